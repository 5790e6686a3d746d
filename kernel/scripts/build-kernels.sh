#!/bin/bash
# Build a list of kernels with "n of m" progress:
#   build-kernels.sh [--guests | --objects] ARCH-VARIANT ...
# --guests: build each kernel's benchmark module and initramfs instead
# (the kernels must be built); --objects: only the objects of the per-arch
# ordering audit (build-kernel.sh --objects). Stops at the first failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
guests=0
objects=
if [ "${1:-}" = --guests ]; then guests=1; shift; fi
if [ "${1:-}" = --objects ]; then objects=--objects; shift; fi
n=0
m=$#
for k in "$@"; do
	n=$((n + 1))
	arch=${k%%-*}
	variant=${k#*-}
	if [ "$guests" = 1 ]; then
		QRWB_PROGRESS="$n of $m" bench/build-module.sh "$arch" "$variant"
		guest/mkinitrd.sh "$arch" "$variant"
	else
		QRWB_PROGRESS="$n of $m" kernel/scripts/build-kernel.sh "$arch" "$variant" $objects
	fi
done

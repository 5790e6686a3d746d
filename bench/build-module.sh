#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build bench/module/ (qrwbench.ko) against one kernel build.
#
# Usage: build-module.sh ARCH VARIANT
#   QRWB_KOUT  kernel build directory (default build/kernels/ARCH-VARIANT)
#   QRWB_MOUT  module build directory (default build/modules/ARCH-VARIANT)
#   QRWB_W     passed as W= to kbuild (default 1: extra warnings)
#
# The sources are copied into QRWB_MOUT (only files that changed, so kbuild
# sees the right timestamps) and built there with
#   make -C <kernel build> M=<module build> ARCH=... CROSS_COMPILE=...
# Warnings fail the build. The stamp QRWB_MOUT/.qrwbench-built holds a hash
# of every input (sources, kernel stamp, compiler); it is removed before and
# written after a successful build, so an interrupted build never looks
# finished and a re-run with unchanged inputs does nothing.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src=$top/bench/module
arch=${1:-}
variant=${2:-}

die() { echo "build-module: $*" >&2; exit 1; }

. "$top/kernel/scripts/arch.sh"
[ -n "$variant" ] || die "usage: build-module.sh ARCH VARIANT (VARIANT: one of kernel/configs/variant-*.config)"

kout=${QRWB_KOUT:-$top/build/kernels/$arch-$variant}
mout=${QRWB_MOUT:-$top/build/modules/$arch-$variant}
[ -f "$kout/.qrwbench-built" ] ||
	die "kernel $arch-$variant is not built ($kout/.qrwbench-built missing): run kernel/scripts/build-kernel.sh $arch $variant"
[ -f "$kout/Module.symvers" ] || die "kernel $arch-$variant has no Module.symvers ($kout)"
command -v "${cross}gcc" >/dev/null || die "missing compiler ${cross}gcc"
cc="${cross}gcc"
command -v ccache >/dev/null && cc="ccache $cc"
w=${QRWB_W:-1}

files=$(cd "$src" && ls Kbuild *.c *.h *.def)
inputs=$( {
	for f in $files; do echo "$f"; cat "$src/$f"; done | sha256sum
	cat "$kout/.qrwbench-built"
	${cross}gcc --version | head -1
	echo "$arch $variant W=$w"
} | sha256sum | cut -c1-16)

stamp=$mout/.qrwbench-built
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ] && [ -f "$mout/qrwbench.ko" ]; then
	echo "module $arch-$variant: up to date ($mout/qrwbench.ko)"
	exit 0
fi

mkdir -p "$mout"
rm -f "$stamp"
for f in $files; do
	cmp -s "$src/$f" "$mout/$f" || cp "$src/$f" "$mout/$f"
done
# sources removed from bench/module/ must not linger in the build
for f in $(cd "$mout" && ls Kbuild *.c *.h *.def 2>/dev/null); do
	case "$f" in *.mod.c) continue ;; esac
	[ -f "$src/$f" ] || rm -f "$mout/$f"
done

log=$mout/build.log
echo "module $arch-$variant: building (log: $log)"
if ! make -C "$kout" M="$mout" ARCH="$karch" CROSS_COMPILE="$cross" \
	CC="$cc" W="$w" -j"$(nproc)" modules > "$log" 2>&1; then
	tail -n 30 "$log" >&2
	die "$arch-$variant: build FAILED (log: $log)"
fi
if grep -E "warning:|error:" "$log" >&2; then
	die "$arch-$variant: the build has warnings (above; log: $log)"
fi
[ -f "$mout/qrwbench.ko" ] || die "$arch-$variant: no qrwbench.ko produced"
echo "$inputs" > "$stamp"
echo "module $arch-$variant: built $mout/qrwbench.ko"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build L1 of `make kvm-nested` for ARCH: its kernel (the rig's tree, the
# acqrel variant, with kernel/configs/nested/ARCH.config merged on top:
# build/nested/ARCH/kernel) and its root (guest/nested/mkroot.sh:
# build/nested/ARCH/root.cpio). Both are skipped when up to date.
#
# Usage: build-l1.sh ARCH
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
arch=${1:-}
frag=$top/kernel/configs/nested/$arch.config
[ -f "$frag" ] || { echo "build-l1: unknown ARCH '$arch': valid are" \
	"$(cd "$top/kernel/configs/nested" && ls *.config | sed 's/\.config$//' | xargs)" >&2; exit 2; }
out=$top/build/nested/$arch/kernel
QRWB_OUT=$out QRWB_EXTRA_CONFIGS=$frag QRWB_PROGRESS="L1 of kvm-nested" \
	"$top/kernel/scripts/build-kernel.sh" "$arch" acqrel
"$top/guest/nested/mkroot.sh" "$arch" "$out/usr/gen_init_cpio"

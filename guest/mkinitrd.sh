#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the guest initramfs build/initrd/ARCH-VARIANT.cpio (newc):
#   /init          guest/init.c, libc-free (tools/include/nolibc of the tree)
#   /qrwbench.ko   build/modules/ARCH-VARIANT/qrwbench.ko
#   /dev/console   character device 5:1, so the kernel gives init a console
#   /proc /sys     mount points
# with the kernel build's usr/gen_init_cpio (no root needed).
#
# Usage: mkinitrd.sh ARCH VARIANT
#   QRWB_SRC     kernel git tree (default build/src/linux)
#   QRWB_KOUT    kernel build directory (default build/kernels/ARCH-VARIANT)
#   QRWB_MOUT    module build directory (default build/modules/ARCH-VARIANT)
#   QRWB_GDIR    UAPI headers + init    (default build/guest/ARCH)
#   QRWB_INITRD  the cpio to write      (default build/initrd/ARCH-VARIANT.cpio)
#
# Per arch, the tree's UAPI headers (headers_install, out of tree) and init
# are built once under build/guest/ARCH/. Every output is written under a
# temporary name and renamed into place, with its input hash in a stamp
# written last, so a half-written file never looks complete and a re-run
# with unchanged inputs does nothing.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
arch=${1:-}
variant=${2:-}

die() { echo "mkinitrd: $*" >&2; exit 1; }

. "$top/kernel/scripts/arch.sh"
[ -n "$variant" ] || die "usage: mkinitrd.sh ARCH VARIANT"

src=${QRWB_SRC:-$top/build/src/linux}
kout=${QRWB_KOUT:-$top/build/kernels/$arch-$variant}
mout=${QRWB_MOUT:-$top/build/modules/$arch-$variant}
gdir=${QRWB_GDIR:-$top/build/guest/$arch}
out=${QRWB_INITRD:-$top/build/initrd/$arch-$variant.cpio}
nolibc=$src/tools/include/nolibc

[ -f "$nolibc/nolibc.h" ] || die "no nolibc at $nolibc: run 'make tree' first"
[ -x "$kout/usr/gen_init_cpio" ] ||
	die "no $kout/usr/gen_init_cpio: build the kernel first (kernel/scripts/build-kernel.sh $arch $variant)"
[ -f "$mout/.qrwbench-built" ] && [ -f "$mout/qrwbench.ko" ] ||
	die "module $arch-$variant is not built: run bench/build-module.sh $arch $variant"
command -v "${cross}gcc" >/dev/null || die "missing compiler ${cross}gcc"

mkdir -p "$gdir" "$(dirname "$out")"
tree_id=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo no-git)

# 1. UAPI headers of the tree, for nolibc (no arm64 libc headers needed)
hstamp=$gdir/uapi/.qrwbench-built
if [ ! -f "$hstamp" ] || [ "$(cat "$hstamp")" != "$tree_id" ]; then
	echo "guest $arch: installing UAPI headers"
	rm -rf "$gdir/uapi" "$gdir/uapi.tmp"
	make -s -C "$src" O="$gdir/hdr-obj" ARCH="$karch" HOSTCC="ccache gcc" \
		INSTALL_HDR_PATH="$gdir/uapi.tmp" headers_install > "$gdir/headers.log" 2>&1 ||
		{ tail -n 20 "$gdir/headers.log" >&2; die "headers_install failed ($gdir/headers.log)"; }
	mv "$gdir/uapi.tmp" "$gdir/uapi"
	echo "$tree_id" > "$hstamp"
fi

# 2. init
#    with the program workloads (guest/prog*.c; their table and defaults are
#    the module's bench/module/qrwb_programs.def and qrwb_params.def)
cflags=(-static -nostdlib -fno-stack-protector -Os -Wall -Wextra -Werror
	-isystem "$gdir/uapi/include" -include "$nolibc/nolibc.h" -I "$top/bench/module")
# arm64: the programs' __atomic builtins inline (gcc's outline atomics need
# libgcc's getauxval-based LSE probe, which nolibc has not)
[ "$karch" = arm64 ] && cflags+=(-mno-outline-atomics)
isrcs=("$top/guest/init.c" "$top"/guest/prog*.c)
istamp=$gdir/init.stamp
ihash=$( { cat "${isrcs[@]}" "$top"/guest/prog.h "$top"/bench/module/qrwb_programs.def \
		"$top"/bench/module/qrwb_params.def; echo "$tree_id"; echo "${cflags[*]}";
	${cross}gcc --version | head -1; } | sha256sum | cut -c1-16)
if [ ! -f "$istamp" ] || [ "$(cat "$istamp")" != "$ihash" ] || [ ! -f "$gdir/init" ]; then
	echo "guest $arch: building init"
	rm -f "$istamp"
	${cross}gcc "${cflags[@]}" -o "$gdir/init.tmp" "${isrcs[@]}" -lgcc
	mv "$gdir/init.tmp" "$gdir/init"
	echo "$ihash" > "$istamp"
fi

# 3. the cpio
cstamp=$out.stamp
chash=$( { cat "$istamp" "$mout/.qrwbench-built"; sha256sum < "$mout/qrwbench.ko"; cat "$0"; } |
	sha256sum | cut -c1-16)
if [ -f "$cstamp" ] && [ "$(cat "$cstamp")" = "$chash" ] && [ -f "$out" ]; then
	echo "initrd $arch-$variant: up to date ($out)"
	exit 0
fi
rm -f "$cstamp"
list=$out.list
cat > "$list" <<EOF
dir /dev 0755 0 0
nod /dev/console 0600 0 0 c 5 1
dir /proc 0755 0 0
dir /sys 0755 0 0
file /init $gdir/init 0755 0 0
file /qrwbench.ko $mout/qrwbench.ko 0644 0 0
EOF
"$kout/usr/gen_init_cpio" "$list" > "$out.tmp.$$" || { rm -f "$out.tmp.$$"; die "gen_init_cpio failed"; }
mv "$out.tmp.$$" "$out"
echo "$chash" > "$cstamp"
echo "initrd $arch-$variant: built $out"

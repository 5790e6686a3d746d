#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the L1 root of `make kvm-nested`: build/nested/ARCH/root.cpio (newc),
# the userspace of a TCG guest that is itself a KVM host:
#   /init                      guest/nested/init.sh (busybox sh)
#   /bin/busybox + applets     Debian's busybox-static for ARCH
#   /usr/bin/qemu-system-*     that arch's real QEMU (the L2 guests' VMM)
#   /lib/...                   every shared library it loads (ELF DT_NEEDED,
#                              resolved recursively), and the dynamic loader
# The L2 kernel, initramfs and the job script travel in a second cpio that
# the rig appends per boot (analysis/qrwbench/run/nested.py).
#
#   arm64:   Debian's arm64 packages (qemu-system-arm:arm64, its libraries and
#            busybox-static:arm64) downloaded with apt-get and unpacked with
#            dpkg-deb -x: dpkg --add-architecture arm64 is done once if needed
#   x86_64:  this host's own qemu-system-x86_64 and its libraries, and
#            busybox-static (amd64) unpacked the same way
#
# Usage: mkroot.sh ARCH GEN_INIT_CPIO
# The cpio is written under a temporary name and renamed, with its input hash
# in root.cpio.stamp written last: a half-built root never looks complete.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
arch=${1:-}
gen=${2:-}
die() { echo "mkroot: $*" >&2; exit 1; }
case "$arch" in
arm64)	darch=arm64; triplet=aarch64-linux-gnu; qemu=qemu-system-aarch64 ;;
x86_64)	darch=amd64; triplet=x86_64-linux-gnu; qemu=qemu-system-x86_64 ;;
*)	die "unknown ARCH '$arch': valid are arm64 x86_64" ;;
esac
[ -x "$gen" ] || die "no gen_init_cpio at '$gen' (build the L1 kernel first)"

out=$top/build/nested/$arch
debs=$out/debs
stage=$out/stage
root=$out/root.cpio
mkdir -p "$debs"

host_darch=$(dpkg --print-architecture)
pkgs=(busybox-static)
if [ "$darch" != "$host_darch" ]; then
	if ! dpkg --print-foreign-architectures | grep -qx "$darch"; then
		echo "mkroot $arch: dpkg --add-architecture $darch; apt-get update"
		dpkg --add-architecture "$darch"
		apt-get update -q > "$out/apt-update.log" 2>&1 ||
			{ tail -5 "$out/apt-update.log" >&2; die "apt-get update failed ($out/apt-update.log)"; }
	fi
	# QEMU and every library package it depends on, recursively
	mapfile -t libs < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
		--no-breaks --no-replaces --no-enhances "qemu-system-arm:$darch" 2>/dev/null |
		grep -v '^ ' | grep -E "^(lib[^<]*|zlib1g):$darch\$" | sed "s/:$darch\$//" | sort -u)
	[ ${#libs[@]} -gt 10 ] || die "apt-cache lists no libraries of qemu-system-arm:$darch (apt-get update?)"
	pkgs+=(qemu-system-arm "${libs[@]}")
fi

# 1. the packages (kept in $debs across runs; a partial download is retried)
want=()
for p in "${pkgs[@]}"; do
	compgen -G "$debs/${p}_*_${darch}.deb" >/dev/null || compgen -G "$debs/${p}_*_all.deb" >/dev/null ||
		want+=("$p:$darch")
done
if [ ${#want[@]} -gt 0 ]; then
	echo "mkroot $arch: downloading ${#want[@]} Debian packages into $debs"
	(cd "$debs" && apt-get download -q "${want[@]}" > "$out/apt-download.log" 2>&1) ||
		{ tail -5 "$out/apt-download.log" >&2; die "apt-get download failed ($out/apt-download.log)"; }
fi

inputs=$( { ls "$debs"; cat "$0" "$top/guest/nested/init.sh";
	[ "$darch" = "$host_darch" ] && sha256sum "$(command -v "$qemu")"; echo "$arch"; } |
	sha256sum | cut -c1-16)
if [ -f "$root.stamp" ] && [ "$(cat "$root.stamp")" = "$inputs" ] && [ -f "$root" ]; then
	echo "mkroot $arch: up to date ($root)"
	exit 0
fi
rm -f "$root.stamp"

# 2. unpacked into a staging tree the rig owns (build/nested/ARCH/stage)
rm -rf "$stage"
mkdir -p "$stage"
for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$stage"; done
if [ "$darch" = "$host_darch" ]; then
	mkdir -p "$stage/usr/bin"
	cp -L "$(command -v "$qemu")" "$stage/usr/bin/$qemu"
fi
qbin=$stage/usr/bin/$qemu
[ -f "$qbin" ] || die "no $qemu in the unpacked packages"
bb=$stage/bin/busybox
[ -f "$bb" ] || die "no busybox in busybox-static"

# 3. the libraries QEMU loads: DT_NEEDED, recursively, found in the staging
# tree (arm64) or on this host (x86_64)
if [ "$darch" = "$host_darch" ]; then
	libdirs=(/lib/$triplet /usr/lib/$triplet /lib /usr/lib)
else
	libdirs=("$stage/lib/$triplet" "$stage/usr/lib/$triplet" "$stage/lib" "$stage/usr/lib")
fi
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
find_lib() {
	local d
	for d in "${libdirs[@]}"; do [ -e "$d/$1" ] && { echo "$d/$1"; return 0; }; done
	return 1
}
declare -A have=()
queue=("$qbin")
list=$root.list
{
	echo "dir /bin 0755 0 0"
	echo "dir /usr 0755 0 0"
	echo "dir /usr/bin 0755 0 0"
	echo "dir /lib 0755 0 0"
	echo "dir /lib/$triplet 0755 0 0"
	for d in dev proc sys tmp l2; do echo "dir /$d 0755 0 0"; done
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "file /init $top/guest/nested/init.sh 0755 0 0"
	echo "file /bin/busybox $bb 0755 0 0"
	for a in sh mount mkdir cat echo sleep poweroff timeout uname ls sync dmesg head grep wc; do
		echo "slink /bin/$a /bin/busybox 0777 0 0"
	done
	echo "file /usr/bin/$qemu $qbin 0755 0 0"
	# firmware QEMU loads for the rig's L2 command line (x86_64: microvm's qboot)
	if [ "$arch" = x86_64 ]; then
		fw=/usr/share/qemu/bios-microvm.bin
		[ -e "$fw" ] || die "no $fw (package qemu-system-data)"
		printf 'dir /usr/share 0755 0 0\ndir /usr/share/qemu 0755 0 0\n'
		echo "file $fw $(readlink -f "$fw") 0644 0 0"
	fi
	while [ ${#queue[@]} -gt 0 ]; do
		f=${queue[0]}; queue=("${queue[@]:1}")
		for n in $(needed "$f"); do
			[ -n "${have[$n]:-}" ] && continue
			p=$(find_lib "$n") || die "$qemu needs $n: not found in ${libdirs[*]}"
			have[$n]=1
			echo "file /lib/$triplet/$n $(readlink -f "$p") 0755 0 0"
			queue+=("$(readlink -f "$p")")
		done
	done
	# the loader at the path the binary asks for (PT_INTERP)
	interp=$(readelf -l "$qbin" | sed -n 's/.*program interpreter: \(.*\)\]/\1/p')
	[ -n "$interp" ] || die "$qemu names no program interpreter"
	ldp=$(find_lib "$(basename "$interp")") || die "no dynamic loader $interp"
	[ "$(dirname "$interp")" = /lib ] || echo "dir $(dirname "$interp") 0755 0 0"
	echo "file $interp $(readlink -f "$ldp") 0755 0 0"
} > "$list"
"$gen" "$list" > "$root.tmp.$$" || { rm -f "$root.tmp.$$"; die "gen_init_cpio failed"; }
mv "$root.tmp.$$" "$root"
echo "$inputs" > "$root.stamp"
echo "mkroot $arch: built $root ($(( $(stat -c %s "$root") >> 20 )) MiB, ${#have[@]} libraries)"

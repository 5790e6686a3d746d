# SPDX-License-Identifier: GPL-2.0
# Sourced by the build scripts: sets, for $arch, karch (kernel ARCH=), cross
# (CROSS_COMPILE=), image (the kernel image, relative to the build
# directory), arch_pkgs (the Debian packages of its compiler and binutils) and
# qrw_needs (the option without which the arch does not use qrwlock, or
# empty), or calls the script's die(). The one table of arches: the host
# side reads the same rows (analysis/qrwbench/vocab.py: build_arches).
#
# An arch with a fragment kernel/configs/<arch>.config builds kernels; one
# with only kernel/configs/audit/<arch>.config is built as objects for the
# ordering audit (`make audit`), never as a kernel.
arch_table() {
	cat <<'EOF'
# arch    karch    CROSS_COMPILE             image                  qrw_needs                    Debian packages
x86_64    x86_64   -                         vmlinux                -                            gcc binutils
arm64     arm64    aarch64-linux-gnu-        arch/arm64/boot/Image  -                            gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu
ppc64le   powerpc  powerpc64le-linux-gnu-    vmlinux                CONFIG_PPC_QUEUED_SPINLOCKS  gcc-powerpc64le-linux-gnu binutils-powerpc64le-linux-gnu
riscv64   riscv    riscv64-linux-gnu-        arch/riscv/boot/Image  -                            gcc-riscv64-linux-gnu binutils-riscv64-linux-gnu
mips64el  mips     mips64el-linux-gnuabi64-  vmlinux                -                            gcc-mips64el-linux-gnuabi64 binutils-mips64el-linux-gnuabi64
sparc64   sparc    sparc64-linux-gnu-        vmlinux                -                            gcc-sparc64-linux-gnu binutils-sparc64-linux-gnu
EOF
}

# (bash only: the scripts run with a PATH of a few tools)
karch=
arch_names=
while read -r _a _k _c _i _q _p; do
	case "$_a" in "" | "#"*) continue ;; esac
	arch_names="$arch_names $_a"
	[ "$_a" = "$arch" ] && { karch=$_k; cross=$_c; image=$_i; qrw_needs=$_q; arch_pkgs=$_p; }
done <<<"$(arch_table)"
unset _a _k _c _i _q _p
[ -n "$karch" ] || die "unknown ARCH '${arch}': valid are${arch_names}"
if [ "$cross" = - ]; then cross=; fi
if [ "$qrw_needs" = - ]; then qrw_needs=; fi

# SPDX-License-Identifier: GPL-2.0
# Sourced by the build scripts: sets karch (kernel ARCH=) and cross
# (CROSS_COMPILE=) for $arch, or calls the script's die().
case "$arch" in
x86_64)	karch=x86_64; cross= ;;
arm64)	karch=arm64; cross=aarch64-linux-gnu- ;;
*)	die "unknown ARCH '${arch}': valid are x86_64 arm64" ;;
esac

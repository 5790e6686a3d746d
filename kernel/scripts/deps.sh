#!/bin/bash
# Install the Debian packages qrwbench needs; does nothing when all are there.
set -euo pipefail
# python3-pytest-xdist: make check runs the host-only tests on every CPU (-n)
# chromium (headless): make report's first-screen screenshot and the report's browser test
# qemu-system-*: the QEMU of every arch of vocab.ARCHES (qemu_package; a test
# checks the two agree); qemu-system-misc has riscv64, its OpenSBI is in
# qemu-system-data
pkgs=(linux-source-6.12 build-essential bc bison flex libelf-dev libssl-dev
      cpio xz-utils kmod rsync git ccache
      qemu-system-x86 qemu-system-arm qemu-system-ppc qemu-system-misc linux-perf
      python3 python3-numpy python3-scipy python3-matplotlib python3-statsmodels python3-pytest
      python3-pytest-xdist
      parallel openssh-client openssh-server chromium)
# the compilers and binutils of every arch of the build scripts' table
# (kernel/scripts/arch.sh): the kernels' and the per-arch audit's objects
# (make audit: powerpc64le, riscv64, mips64el, sparc64)
arch=x86_64
die() { echo "deps: $*" >&2; exit 1; }
. "$(dirname "$0")/arch.sh"
for p in $(arch_table | awk '!/^#/ { for (i = 6; i <= NF; i++) print $i }'); do
	case " ${pkgs[*]} " in *" $p "*) ;; *) pkgs+=("$p") ;; esac
done
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#pkgs[@]} Debian packages installed"
	exit 0
fi
echo "deps: installing ${#missing[@]} Debian packages: ${missing[*]}"
if [ "$(id -u)" != 0 ]; then
	echo "deps: must run as root to install them (try: sudo make deps)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q > /tmp/qrwbench-apt-update.log 2>&1 || { tail -5 /tmp/qrwbench-apt-update.log >&2; exit 1; }
# openssh-server is here for its sshd binary (the several-hosts tests start
# their own on loopback addresses); its package must not start a system sshd.
# Debian's invoke-rc.d asks policy-rc.d: where there is none, one that says
# "no" (exit 101) stands there during the install, and only that file, which
# the rig wrote, is removed after.
policy=/usr/sbin/policy-rc.d
ours=""
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# qrwbench deps.sh: no service starts during this install\nexit 101\n' > "$policy"
	chmod 755 "$policy"
	ours=1
fi
rc=0
apt-get install -y -q --no-install-recommends "${missing[@]}" > /tmp/qrwbench-apt-install.log 2>&1 || rc=$?
if [ -n "$ours" ] && grep -q '^# qrwbench deps.sh' "$policy" 2>/dev/null; then rm -f "$policy"; fi
[ "$rc" = 0 ] ||
	{ echo "deps: apt-get install failed; last lines of /tmp/qrwbench-apt-install.log:" >&2; tail -15 /tmp/qrwbench-apt-install.log >&2; exit 1; }
echo "deps: installed ${missing[*]}"

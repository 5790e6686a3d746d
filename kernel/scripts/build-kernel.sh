#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Configure and build one guest kernel: tinyconfig + kernel/configs/base.config
# + kernel/configs/<arch>.config + kernel/configs/variant-<variant>.config,
# merged with the tree's scripts/kconfig/merge_config.sh, checked option by
# option, then built out of tree (O=) with ccache.
#
# Usage: build-kernel.sh ARCH VARIANT [--config-only]
#   QRWB_SRC       kernel git tree       (default build/src/linux)
#   QRWB_OUT       build directory       (default build/kernels/ARCH-VARIANT)
#   QRWB_PROGRESS  "n of m" shown in the progress line
#   QRWB_JOBS      make -j               (default: nproc + 1)
#   QRWB_CONFIGS   fragment directory    (default kernel/configs)
#   QRWB_EXTRA_CONFIGS  more fragments merged last, space-separated paths
#                  (make kvm-nested: kernel/configs/nested/ARCH.config)
#
# The stamp $QRWB_OUT/.qrwbench-built holds a hash of every input (tree
# commit, fragments, compiler); it is removed before and written after a
# successful build, so an interrupted or failed build never looks finished,
# and a re-run with unchanged inputs does nothing.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
configs=${QRWB_CONFIGS:-$top/kernel/configs}
arch=${1:-}
variant=${2:-}
config_only=0
[ "${3:-}" = "--config-only" ] && config_only=1

die() { echo "build-kernel: $*" >&2; exit 1; }

valid_arches=$(cd "$configs" && ls *.config | grep -v -e '^base' -e '^variant-' | sed 's/\.config$//' | xargs)
valid_variants=$(cd "$configs" && ls variant-*.config | sed 's/^variant-//; s/\.config$//' | xargs)
[ -n "$arch" ] && [ -f "$configs/$arch.config" ] && [ "${arch#variant-}" = "$arch" ] && [ "$arch" != base ] ||
	die "unknown ARCH '$arch': valid are $valid_arches"
[ -n "$variant" ] && [ -f "$configs/variant-$variant.config" ] ||
	die "unknown VARIANT '$variant': valid are $valid_variants"

if [ "$variant" = unpatched ]; then
	# The base tree without the series: a git worktree of the base commit.
	src=${QRWB_SRC:-$top/build/src/linux-unpatched}
	[ -f "$src/Makefile" ] || "$top/kernel/scripts/prepare-tree.sh" --unpatched
else
	src=${QRWB_SRC:-$top/build/src/linux}
fi
out=${QRWB_OUT:-$top/build/kernels/$arch-$variant}
jobs=${QRWB_JOBS:-$(( $(nproc) + 1 ))}
progress=${QRWB_PROGRESS:+ ($QRWB_PROGRESS)}
[ -f "$src/Makefile" ] || die "no kernel tree at $src: run 'make tree' first"

case "$arch" in
x86_64)	karch=x86_64; cross=; image=vmlinux ;;
arm64)	karch=arm64; cross=aarch64-linux-gnu-; image=Image ;;
*)	die "no build recipe for ARCH '$arch'" ;;
esac
command -v "${cross}gcc" >/dev/null || die "missing cross compiler ${cross}gcc: apt-get install gcc-aarch64-linux-gnu (or run 'make deps')"
cc="${cross}gcc"
command -v ccache >/dev/null && cc="ccache $cc"
# Paths under the repository are hashed relative to it, so a second clone
# (CI's) hits the same cache entries.
export CCACHE_BASEDIR=$top

fragments=("$configs/base.config" "$configs/$arch.config" "$configs/variant-$variant.config")
for f in ${QRWB_EXTRA_CONFIGS:-}; do
	[ -f "$f" ] || die "no config fragment $f (QRWB_EXTRA_CONFIGS)"
	fragments+=("$f")
done
inputs=$( {
	git -C "$src" rev-parse HEAD 2>/dev/null || echo "no-git"
	git -C "$src" status --porcelain --untracked-files=no 2>/dev/null | sha256sum
	cat "${fragments[@]}"
	${cross}gcc --version | head -1
	echo "$arch $variant $image"
} | sha256sum | cut -c1-16)

stamp=$out/.qrwbench-built
if [ "$config_only" = 1 ] && [ -f "$out/.qrwbench-configured" ] &&
   [ "$(cat "$out/.qrwbench-configured")" = "$inputs" ]; then
	echo "kernel $arch-$variant: configured, up to date ($out/.config)"
	exit 0
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ]; then
	echo "kernel $arch-$variant$progress: up to date ($out)"
	exit 0
fi

mkdir -p "$out"
rm -f "$stamp" "$out/.qrwbench-configured"
log=$out/build.log
kmake=(make -C "$src" O="$out" ARCH="$karch" CROSS_COMPILE="$cross" CC="$cc" HOSTCC="ccache gcc" -j"$jobs")

run() {
	echo "+ $*" >> "$log"
	if ! "$@" >> "$log" 2>&1; then
		echo "build-kernel: FAILED: $*" >&2
		echo "build-kernel: last lines of $log:" >&2
		tail -n 25 "$log" >&2
		exit 1
	fi
}

: > "$log"
echo "kernel $arch-$variant$progress: configuring (log: $log)"
run "${kmake[@]}" tinyconfig
run env ARCH="$karch" CROSS_COMPILE="$cross" "$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "${fragments[@]}"
run "${kmake[@]}" olddefconfig

# merge_config.sh only warns when Kconfig drops a requested value: check each.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*)
		grep -qxF -- "$line" "$out/.config" || {
			echo "build-kernel: $arch-$variant: requested '$line' but .config has '$(grep -E "^(# )?${line%%=*}[= ]" "$out/.config" || echo "${line%%=*} undefined")'" >&2
			bad=1
		} ;;
	"# CONFIG_"*" is not set")
		sym=${line#\# }; sym=${sym%% *}
		! grep -q "^$sym=" "$out/.config" || {
			echo "build-kernel: $arch-$variant: requested '$line' but .config has '$(grep "^$sym=" "$out/.config")'" >&2
			bad=1
		} ;;
	esac
done < <(cat "${fragments[@]}")
[ "$bad" = 0 ] || die "$arch-$variant: requested options were dropped (see above); fix kernel/configs/"
echo "$inputs" > "$out/.qrwbench-configured"
[ "$config_only" = 1 ] && { echo "kernel $arch-$variant: configured ($out/.config)"; exit 0; }

start=$(date +%s)
echo "kernel $arch-$variant$progress: building $image and modules with -j$jobs (log: $log)"
run "${kmake[@]}" "$image" modules
[ -f "$out/Module.symvers" ] || die "$arch-$variant: build produced no Module.symvers"
secs=$(( $(date +%s) - start ))
# kept across rebuilds (build.log is rewritten): one line per build
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $arch-$variant built in $secs s" | tee -a "$log" >> "$(dirname "$out")/build-times.log"
echo "$inputs" > "$stamp"
echo "kernel $arch-$variant$progress: built in $secs s: $out/$( [ "$image" = Image ] && echo arch/arm64/boot/Image || echo vmlinux)"

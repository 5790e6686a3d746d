#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Configure and build one guest kernel: tinyconfig + kernel/configs/base.config
# + kernel/configs/<arch>.config + kernel/configs/variant-<variant>.config,
# merged with the tree's scripts/kconfig/merge_config.sh, checked option by
# option, then built out of tree (O=) with ccache.
#
# Usage: build-kernel.sh ARCH VARIANT [--config-only | --objects]
#   --config-only  configure and check only
#   --objects      configure, check, `make prepare`, and build only what the
#                  per-arch ordering audit reads (kernel/locking/qrwlock.o,
#                  kernel/locking/spinlock.o and the probe kernel/probe/, as
#                  OUT/probe/qrwb_probe.o): no kernel, minutes not tens of
#                  minutes. An arch with only kernel/configs/audit/ARCH.config
#                  (mips64el, sparc64) builds nothing else.
#   QRWB_SRC       kernel git tree       (default build/src/linux)
#   QRWB_OUT       build directory       (default build/kernels/ARCH-VARIANT;
#                  --objects: build/objects/ARCH-VARIANT)
#   QRWB_PROGRESS  "n of m" shown in the progress line
#   QRWB_JOBS      make -j               (default: nproc + 1)
#   QRWB_CONFIGS   fragment directory    (default kernel/configs)
#   QRWB_EXTRA_CONFIGS  more fragments merged last, space-separated paths
#                  (make kvm-nested: kernel/configs/nested/ARCH.config)
#
# The stamp $QRWB_OUT/.qrwbench-built holds a hash of every input (tree
# commit, fragments, compiler); it is removed before and written after a
# successful build, so an interrupted or failed build never looks finished,
# and a re-run with unchanged inputs does nothing (--objects: the stamp
# .qrwbench-objects).
#
# Every build checks that the kernel uses qrwlock (CONFIG_QUEUED_RWLOCKS=y)
# and fails with one line saying why when it does not: powerpc selects it
# only with CONFIG_PPC_QUEUED_SPINLOCKS=y, which tinyconfig turns off.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
configs=${QRWB_CONFIGS:-$top/kernel/configs}
arch=${1:-}
variant=${2:-}
config_only=0
objects=0
case "${3:-}" in
--config-only) config_only=1 ;;
--objects) objects=1 ;;
"") ;;
*) echo "build-kernel: unknown option '$3': valid are --config-only --objects" >&2; exit 1 ;;
esac

die() { echo "build-kernel: $*" >&2; exit 1; }

valid_arches=$(cd "$configs" && ls *.config | grep -v -e '^base' -e '^variant-' | sed 's/\.config$//' | xargs)
valid_variants=$(cd "$configs" && ls variant-*.config | sed 's/^variant-//; s/\.config$//' | xargs)
arch_config=$configs/$arch.config
if [ "$objects" = 1 ] && [ -d "$configs/audit" ]; then
	# objects also of the arches of kernel/configs/audit/
	valid_arches="$valid_arches $(cd "$configs/audit" && ls *.config | sed 's/\.config$//' | xargs)"
	[ -f "$arch_config" ] || arch_config=$configs/audit/$arch.config
fi
[ -n "$arch" ] && [ -f "$arch_config" ] && [ "${arch#variant-}" = "$arch" ] && [ "$arch" != base ] ||
	die "unknown ARCH '$arch': valid are $valid_arches"
[ -n "$variant" ] && [ -f "$configs/variant-$variant.config" ] ||
	die "unknown VARIANT '$variant': valid are $valid_variants"
# a variant only some arches offer names them: "# qrwbench-arches: a b"
only=$(sed -n 's/^# qrwbench-arches: *//p' "$configs/variant-$variant.config")
if [ -n "$only" ]; then
	case " $only " in *" $arch "*) ;; *)
		die "variant '$variant' is not offered on $arch: valid arches are $only (kernel/configs/variant-$variant.config)" ;;
	esac
fi

if [ "$variant" = unpatched ]; then
	# The base tree without the series: a git worktree of the base commit.
	src=${QRWB_SRC:-$top/build/src/linux-unpatched}
	[ -f "$src/Makefile" ] || "$top/kernel/scripts/prepare-tree.sh" --unpatched
else
	src=${QRWB_SRC:-$top/build/src/linux}
fi
if [ "$objects" = 1 ]; then
	out=${QRWB_OUT:-$top/build/objects/$arch-$variant}
else
	out=${QRWB_OUT:-$top/build/kernels/$arch-$variant}
fi
# --objects writes and replaces parts of $out (probe/): only into a directory
# an earlier --objects build made (its .qrwbench-src), or a new or empty one.
if [ "$objects" = 1 ] && [ -d "$out" ] && [ ! -f "$out/.qrwbench-src" ] &&
   [ -n "$(ls -A "$out")" ]; then
	die "$out is not empty and no object build of build-kernel.sh --objects (no .qrwbench-src): valid is a new or empty directory, or an earlier object build"
fi
jobs=${QRWB_JOBS:-$(( $(nproc) + 1 ))}
progress=${QRWB_PROGRESS:+ ($QRWB_PROGRESS)}
[ -f "$src/Makefile" ] || die "no kernel tree at $src: run 'make tree' first"

. "$top/kernel/scripts/arch.sh"
command -v "${cross}gcc" >/dev/null || die "missing cross compiler ${cross}gcc: apt-get install $arch_pkgs (or run 'make deps')"
cc="${cross}gcc"
command -v ccache >/dev/null && cc="ccache $cc"
# Paths under the repository are hashed relative to it, so a second clone
# (CI's) hits the same cache entries.
export CCACHE_BASEDIR=$top

fragments=("$configs/base.config" "$arch_config" "$configs/variant-$variant.config")
for f in ${QRWB_EXTRA_CONFIGS:-}; do
	[ -f "$f" ] || die "no config fragment $f (QRWB_EXTRA_CONFIGS)"
	fragments+=("$f")
done
inputs=$( {
	git -C "$src" rev-parse HEAD 2>/dev/null || echo "no-git"
	git -C "$src" status --porcelain --untracked-files=no 2>/dev/null | sha256sum
	cat "${fragments[@]}"
	${cross}gcc --version | head -1
	echo "$arch $variant $(basename "$image")"
	# --objects: the probe's sources too
	[ "$objects" = 0 ] || cat "$top/kernel/probe/"* "$top/bench/module/qrwb_ops.def"
} | sha256sum | cut -c1-16)

stamp=$out/.qrwbench-built
[ "$objects" = 1 ] && stamp=$out/.qrwbench-objects
if [ "$config_only" = 1 ] && [ -f "$out/.qrwbench-configured" ] &&
   [ "$(cat "$out/.qrwbench-configured")" = "$inputs" ]; then
	echo "kernel $arch-$variant: configured, up to date ($out/.config)"
	exit 0
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$inputs" ]; then
	echo "$( [ "$objects" = 1 ] && echo objects || echo kernel) $arch-$variant$progress: up to date ($out)"
	exit 0
fi

# --objects: a new variant of an arch starts from a copy of another variant's
# prepared tree (same tree, same compiler): kbuild then rebuilds only what
# the changed options reach (the copy saves the host tools and most of
# `make prepare`: riscv64 with ccache off, 59 s instead of 80 s).
if [ "$objects" = 1 ] && [ ! -e "$out" ] && [ "$variant" != unpatched ]; then
	for seed in "$(dirname "$out")/$arch"-*/; do
		[ -f "$seed/.qrwbench-objects" ] && [ "$(cat "$seed/.qrwbench-src" 2>/dev/null)" = "$src" ] || continue
		echo "objects $arch-$variant: starting from a copy of ${seed%/}"
		# a directory of our own beside $out, renamed to $out when complete
		tmp=$(mktemp -d "$(dirname "$out")/.qrwbench-copy.XXXXXX")
		cp -a "$seed/." "$tmp/"
		rm -rf "$tmp/probe" "$tmp/.qrwbench-objects" "$tmp/.qrwbench-configured"
		mv "$tmp" "$out"
		break
	done
fi
mkdir -p "$out"
rm -f "$stamp" "$out/.qrwbench-configured"
[ "$objects" = 0 ] || echo "$src" > "$out/.qrwbench-src"
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

# A kernel that does not use qrwlock has nothing to measure: one line, before
# the per-option check below (the variant's ordering options depend on it).
grep -qx 'CONFIG_QUEUED_RWLOCKS=y' "$out/.config" ||
	die "$arch-$variant: CONFIG_QUEUED_RWLOCKS is not set, so this kernel would use ${karch}'s own rwlock, not qrwlock$(
		[ -z "$qrw_needs" ] || grep -qx "$qrw_needs=y" "$out/.config" ||
		echo ": ${karch} selects it only with $qrw_needs=y (set it in ${arch_config#"$top"/})")"

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

if [ "$objects" = 1 ]; then
	# Only what the ordering audit reads: the prepared tree, the two objects
	# of the kernel's own rwlock code, and the probe (a copy of kernel/probe/
	# and the op table) built as an external module's object.
	# A fragment's "# qrwbench-objects: <path.o> ..." lines name more objects
	# (sparc64: its out-of-line atomics). The list goes into
	# .qrwbench-objects-list for the audit.
	objs=(kernel/locking/qrwlock.o kernel/locking/spinlock.o)
	extra=($(sed -n 's/^# qrwbench-objects: //p' "${fragments[@]}"))
	start=$(date +%s)
	names=("${objs[@]##*/}" "${extra[@]##*/}")
	echo "objects $arch-$variant$progress: building ${names[*]} and the probe with -j$jobs (log: $log)"
	# (a single object target runs `make prepare` first). An extra object
	# gets a make of its own, -j1: kbuild reaches arch/sparc/lib/ by two
	# routes, and under -j both assembled atomic_64.o at once.
	run "${kmake[@]}" "${objs[@]}"
	for o in "${extra[@]}"; do
		run "${kmake[@]}" -j1 "$o"
		objs+=("$o")
	done
	rm -rf "$out/probe"
	mkdir -p "$out/probe"
	cp "$top/kernel/probe/"* "$top/bench/module/qrwb_ops.def" "$out/probe/"
	run "${kmake[@]}" M="$out/probe" qrwb_probe.o
	echo "${objs[@]}" probe/qrwb_probe.o > "$out/.qrwbench-objects-list"
	secs=$(( $(date +%s) - start ))
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $arch-$variant objects built in $secs s" | tee -a "$log" >> "$(dirname "$out")/build-times.log"
	echo "$inputs" > "$stamp"
	echo "objects $arch-$variant$progress: built in $secs s: $out/probe/qrwb_probe.o"
	exit 0
fi

start=$(date +%s)
echo "kernel $arch-$variant$progress: building $(basename "$image") and modules with -j$jobs (log: $log)"
run "${kmake[@]}" "$(basename "$image")" modules
[ -f "$out/Module.symvers" ] || die "$arch-$variant: build produced no Module.symvers"
secs=$(( $(date +%s) - start ))
# kept across rebuilds (build.log is rewritten): one line per build
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $arch-$variant built in $secs s" | tee -a "$log" >> "$(dirname "$out")/build-times.log"
echo "$inputs" > "$stamp"
echo "kernel $arch-$variant$progress: built in $secs s: $out/$image"

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Extract Debian's linux-source-6.12 into a git tree (one base commit with a
# fixed author and date, so its id is the same on every machine) and apply the
# patch series in kernel/patches/series as commits with `git am`.
#
# Usage: prepare-tree.sh [--base-only | --unpatched]
#   QRWB_TARBALL   kernel tarball (default /usr/src/linux-source-6.12.tar.xz)
#   QRWB_SRC       tree to create  (default build/src/linux)
#   QRWB_PATCHES   patch directory (default kernel/patches)
#
# Re-running when neither the tarball nor the series changed does nothing.
# The stamp build/src/linux/.git/qrwbench-series records what was applied;
# it is written last, so an interrupted run is redone.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
tarball=${QRWB_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
src=${QRWB_SRC:-$top/build/src/linux}
patches=${QRWB_PATCHES:-$top/kernel/patches}
base_only=0
unpatched=0
case "${1:-}" in
--base-only) base_only=1 ;;
--unpatched) base_only=1; unpatched=1 ;;
'') ;;
*) echo "prepare-tree: unknown option '$1': valid are --base-only, --unpatched" >&2; exit 1 ;;
esac

die() { echo "prepare-tree: $*" >&2; exit 1; }

[ -f "$tarball" ] || die "missing kernel tarball $tarball: install it with 'apt-get install linux-source-6.12' (or run 'make deps')"
[ -f "$patches/series" ] || die "missing $patches/series"

export GIT_AUTHOR_NAME="qrwbench" GIT_AUTHOR_EMAIL="qrwbench@localhost"
export GIT_COMMITTER_NAME="qrwbench" GIT_COMMITTER_EMAIL="qrwbench@localhost"
export GIT_AUTHOR_DATE="2024-11-17T00:00:00+0000" GIT_COMMITTER_DATE="2024-11-17T00:00:00+0000"

tar_id=$(stat -c '%s-%Y' "$tarball")
if [ ! -f "$src/.git/qrwbench-base" ] || [ "$(cat "$src/.git/qrwbench-base")" != "$tar_id" ]; then
	echo "prepare-tree: extracting $tarball into $src (about 20 s)"
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -xJf "$tarball" -C "$src.tmp" --strip-components=1
	(
		cd "$src.tmp"
		git init -q -b qrwbench
		git config core.autocrlf false
		git config gc.auto 0
		echo "prepare-tree: committing the base tree"
		git add -A -f .
		version=$(make -s kernelversion 2>/dev/null || echo unknown)
		git commit -q -m "Debian linux-source-6.12 ($version)" \
			-m "Extracted from $(basename "$tarball") by qrwbench."
		git tag -f qrwbench-base >/dev/null
		echo "$tar_id" > .git/qrwbench-base
	)
	mv "$src.tmp" "$src"
fi

if [ "$unpatched" = 1 ]; then
	# A worktree at the base commit, for the unpatched reference build.
	if [ ! -f "$src-unpatched/Makefile" ]; then
		git -C "$src" worktree prune
		rm -rf "$src-unpatched"
		git -C "$src" worktree add -q --detach "$src-unpatched" qrwbench-base
	fi
	exit 0
fi
[ "$base_only" = 1 ] && exit 0

cd "$src"
series_id=$(cd "$patches" && sha256sum series $(grep -v '^#' series) | sha256sum | cut -c1-16)
if [ -f .git/qrwbench-series ] && [ "$(cat .git/qrwbench-series)" = "$series_id" ] &&
   [ -z "$(git status --porcelain --untracked-files=no)" ]; then
	exit 0
fi

rm -f .git/qrwbench-series
git am --abort >/dev/null 2>&1 || true
git checkout -q -f -B qrwbench qrwbench-base
n=$(grep -cv '^#' "$patches/series" || true)
i=0
while read -r p; do
	case "$p" in ''|'#'*) continue ;; esac
	i=$((i + 1))
	echo "prepare-tree: applying patch $i of $n: $p"
	if ! git am -q --3way "$patches/$p" > .git/qrwbench-am.log 2>&1; then
		cat .git/qrwbench-am.log >&2
		git am --show-current-patch=diff 2>/dev/null | grep -m1 '^@@' | sed 's/^/prepare-tree: failing hunk: /' >&2 || true
		git am --abort >/dev/null 2>&1 || true
		die "patch $p does not apply to $(git describe --tags --always qrwbench-base)"
	fi
done < "$patches/series"
echo "$series_id" > .git/qrwbench-series
echo "prepare-tree: $src at $(git log -1 --format='%h %s')"

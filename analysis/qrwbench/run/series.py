"""`make bench-series CELL=... [KERNEL_SRC=...] [FROM=qrwbench-base] [TO=HEAD]`:
benchmark the kernel after each patch of the series, then compare each commit
with the one before it.

    python3 -m qrwbench series --cell CELL [--kernel-src DIR] [--from REF] [--to REF]
                               [--boots 3] [--threshold 5] [--db DB] [--compare-only]

The commits are FROM itself (the reference, built as ``unpatched`` when the
series is not there and the cell's variant is acqrel) and every commit of
FROM..TO (git rev-list --reverse --topo-order). One private checkout
build/kernels/series/src/linux is checked out commit by commit; each commit
is built into its own O= directory build/kernels/series/<arch>-<variant>-<sha12>/
(module: build/modules/series/..., initramfs: build/initrd/series/...). The
O= directories sit at the same depth under the same source path, so ccache
hits for every file a commit did not change; a re-run with nothing changed
rebuilds nothing and reuses stored runs (same rig commit, same cell).

Results are stored with the commit as kernel_tree_commit. The comparison of
commit i with commit i-1 uses ``regress.compare_commits`` (one value per
boot, normalized by the module's acqrel copy where measured, Welch's t with
its CI, Holm-adjusted, threshold). The
kernel's rwlock rows are compared across variant labels (unpatched vs acqrel).
Exit status: 0 done (changes are reported, not failures), 2 bad input.
"""
from __future__ import annotations

import time
from pathlib import Path

from .. import gitutil, vocab
from ..defaults import ALPHA
from ..errors import QrwbenchError
from ..cell import Cell
from ..results import store
from . import ktree, provenance

ROOT = vocab.BUILD


def commits(src: Path, frm: str, to: str) -> list[str]:
    f = ktree.resolve(src, frm, "FROM")
    t = ktree.resolve(src, to, "TO")
    if f != t and subprocess_ok(src, "merge-base", "--is-ancestor", f, t) is False:
        raise QrwbenchError(f"FROM {frm} ({f[:12]}) is not an ancestor of TO {to} ({t[:12]}) in {src}")
    out = ktree.git(src, "rev-list", "--reverse", "--topo-order", f"{f}..{t}").split()
    return [f] + out


def subprocess_ok(repo, *args) -> bool:
    return gitutil.ok(repo, *args)


def workdir(cell, variant: str, sha: str, src_clone: Path) -> ktree.Workdir:
    name = f"{cell.arch}-{variant}-{sha[:12]}"
    return ktree.Workdir(ROOT / "kernels" / "series", src_clone, ROOT / "kernels" / "series" / name,
                         ROOT / "modules" / "series" / name, ROOT / "guest" / "series" / cell.arch,
                         ROOT / "initrd" / "series" / f"{name}.cpio")


def bench_series(cell_text: str, kernel_src=None, *, frm="qrwbench-base", to="HEAD", db=None,
                 boots=5, compare_only=False, log=print, runs_root=None) -> list[str]:
    """Measure each commit (unless compare_only); returns the commit list."""
    cell = ktree.parse_cell(cell_text)
    src = Path(kernel_src or ktree.DEFAULT_SRC).resolve()
    if not ktree.gitutil.is_repo(src):
        raise QrwbenchError(f"kernel tree {src} is not a git repository: run 'make tree' "
                            "or give KERNEL_SRC=/path/to/linux")
    shas = commits(src, frm, to)
    if compare_only:
        return shas
    # only commits are built: uncommitted edits would silently not be measured
    ktree.check_tree(src)
    for s in shas:
        ktree.build_variant(src, s, cell.variant)       # fails early, naming the commit
    clone = ROOT / "kernels" / "series" / "src" / "linux"
    held = ktree.lock(ROOT / "kernels" / "series" / ".lock", "bench-series")
    try:
        _measure_all(cell, src, clone, shas, db, boots, log, Path(runs_root or ROOT / "runs"))
    finally:
        held.close()
    return shas


def _measure_all(cell, src, clone, shas, db, boots, log, runs_root: Path) -> None:
    ktree.sync_clone(clone, src, log=log)
    rig = provenance.rig_state()["rig_commit"]
    conn = store.connect(db)
    t0 = time.monotonic()
    try:
        for i, sha in enumerate(shas, 1):
            variant = ktree.build_variant(src, sha, cell.variant)
            wd = workdir(cell, variant, sha, clone)
            subj = ktree.git(src, "log", "-1", "--format=%s", sha).strip()
            have = ktree.cell_runs(conn, cell, sha, rig)
            log(f"series [{i}/{len(shas)}] {sha[:12]} {subj}: {len(have)} of {boots} boots stored")
            if len(have) >= boots:
                continue
            ktree.checkout(clone, sha)
            ktree.build(wd, cell.arch, variant, log=log)
            bcell = cell if variant == cell.variant else cell.replace(variant=variant)
            ktree.measure(conn, wd, bcell, sha, boots - len(have), runs_root=runs_root, log=log)
    finally:
        conn.close()
    log(f"series: measured {len(shas)} commits in {time.monotonic() - t0:.0f} s")


def reference_digest_at(cell, src: Path, sha: str) -> str | None:
    """ktree.reference_digest of ``sha``'s module build in this series (None
    when it was not built here, or the commit lacks the cell's variant)."""
    try:
        variant = ktree.build_variant(src, sha, cell.variant)
    except QrwbenchError:
        return None
    clone = ROOT / "kernels" / "series" / "src" / "linux"
    return ktree.reference_digest(workdir(cell, variant, sha, clone).module)


def comparison(cell_text: str, shas: list[str], src: Path, *, db=None,
               threshold=None, alpha=None) -> str:
    """Per-commit table: each commit against the one before it."""
    # numpy/scipy: not for --check, which runs before make deps
    from ..analysis import noise, perboot, verdicts, windows
    from ..report import regress
    threshold = regress.DEFAULT_THRESHOLD if threshold is None else threshold
    alpha = ALPHA if alpha is None else alpha
    cell = ktree.parse_cell(cell_text)
    conn = store.connect(db, create=False)
    try:
        runs = {s: ktree.cell_runs(conn, cell, s) for s in shas}
        if not any(runs.values()):
            have = ktree.existing_cells(conn)
            raise QrwbenchError(f"CELL {cell_text} matches no stored runs of these commits; "
                                f"cells with runs: {'; '.join(have[:8]) or 'none'}")
        samples = {s: ktree.samples_of(conn, cell, r) for s, r in runs.items()}
        refs = {s: reference_digest_at(cell, src, s) for s in shas} if ktree.ratio_mode(cell) else {}
        raw = ({s: ktree.raw_samples_of(conn, cell, r) for s, r in runs.items()}
               if len({d for d in refs.values() if d}) > 1 else {})
    finally:
        conn.close()
    lines = [f"qrwbench bench-series: {ktree.cell_text(cell)}",
             f"rule: each commit vs the one before (regress.compare_commits): one value per boot, "
             f"normalized by the module's acqrel copy where measured; change beyond "
             f"{threshold:.0%} with Holm-adjusted Welch p < {alpha:g} and a CI excluding 0; "
             f"no change when the CI lies inside +-{threshold:.0%}, else not judged", ""]
    unit = "kernel/module ratio" if ktree.ratio_mode(cell) else "Mops/s"
    prev = None
    metrics = sorted({(Cell.of(x), x["variant"]) for v in samples.values() for x in v
                      if x["copy"] == 0}, key=lambda k: k[0].metric(k[1]))
    for sha in shas:
        subj = ktree.git(src, "log", "-1", "--format=%s", sha).strip()
        med = perboot.boot_values_by_metric(samples[sha])
        lines.append(f"{sha[:12]} {subj}  ({len(runs[sha])} boots)")
        if not samples[sha]:
            lines.append("    no results")
            continue
        res = {}
        keys, norm = metrics, True
        if prev is not None and samples[prev]:
            tgt, base = samples[sha], samples[prev]
            if refs.get(sha) and refs.get(prev) and refs[sha] != refs[prev]:
                lines.append("    (this commit changes the module's acqrel reference copy, compiled "
                             "against its headers: compared on raw throughput per boot, every "
                             "metric, not on the kernel/module ratio, which would cancel the change)")
                tgt, base, norm = raw[sha], raw[prev], False
                med = perboot.boot_values_by_metric(tgt, normalize=False)
                keys = sorted(med, key=lambda k: k[0].metric(k[1]))
            for r in regress.compare_commits(tgt, base, threshold=threshold, alpha=alpha,
                                             normalize=norm):
                res[(r.cell, r.variant)] = r
        for key in keys:
            if key not in med:
                continue
            x = med[key][2]          # per-boot medians, for display
            r = res.get(key)
            if r is None:
                change = "reference" if prev is None else "-"
            elif r.test is not None and r.test.judged:
                change = f"{r.test.pct_change:+6.1f}% {r.status}"
            else:
                change = f"{r.status}: {r.why}"
            ok, why = noise.stable_samples(x)
            lines.append(f"    {float(sorted(x)[len(x) // 2]) / 1e6:10.4g} {unit if norm else 'Mops/s'}  "
                         f"±{windows.cv(x) * 100:3.0f}%  {change:<28} {key[0].metric(key[1])}"
                         + ("" if ok else f"  [{why}]"))
            if r is not None and r.status in (verdicts.REGRESSION, verdicts.IMPROVEMENT):
                lines.append(f"    => {r.test.pct_change:+.1f}% {r.status} of {r.metric} due to commit "
                             f"{sha[:12]} {subj}")
        prev = sha
    return "\n".join(lines)


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench series`` (the parser is cli's)."""
    ap.add_argument("--cell", required=True, help=ktree.CELL_SYNTAX)
    ap.add_argument("--kernel-src", default=None)
    ap.add_argument("--from", dest="frm", default="qrwbench-base")
    ap.add_argument("--to", default="HEAD")
    ap.add_argument("--db", dest="db_sub", metavar="DB", default=None)
    ap.add_argument("--boots", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=5.0, help="percent (default 5)")
    ap.add_argument("--compare-only", action="store_true", help="only print the comparison")
    ap.add_argument("--check", action="store_true",
                    help="only check CELL, BOOTS, THRESHOLD and KERNEL_SRC (before any build)")


def run(a) -> int:
    """``python3 -m qrwbench series``: bad input raises QrwbenchError (cli.main prints it)."""
    ktree.check_numbers(a.boots, a.threshold)
    ktree.parse_cell(a.cell)
    if a.kernel_src:
        ktree.check_tree(Path(a.kernel_src))
    if a.check:
        return 0
    shas = bench_series(a.cell, a.kernel_src, frm=a.frm, to=a.to, db=a.db, boots=a.boots,
                        compare_only=a.compare_only)
    print(comparison(a.cell, shas, Path(a.kernel_src or ktree.DEFAULT_SRC).resolve(),
                     db=a.db, threshold=a.threshold / 100))
    return 0

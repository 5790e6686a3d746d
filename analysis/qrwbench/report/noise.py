"""Noise figures of a results DB: within-boot CV, A/A rates, MDE, warm-up drift.

``python3 -m qrwbench noise DB [--commit SHA]`` prints the figures that
docs/validity.md tabulates, per (arch, CPU model, vCPUs, workload[, impl]):

* within-boot CV (median over cells of the median over boots of the CV of one
  boot's reps) and between-boot CV (CV of the boots' medians);
* A/A false positives: copy 1 vs copy 0 (paired blocks, ``calibration.aa_control``),
  consecutive boots of one cell on raw throughput (:func:`raw_boot_aa`), and
  copy 1 vs copy 0 in each boot alone;
* the minimum detectable effect at 80 % power for one boot and pooled;
* window drift: median of throughput / (its entry's boot median) by position
  in the boot's run order, in buckets of ``width`` windows: a warm-up or a
  slow phase shows as buckets below 1.

All statistics come from :mod:`qrwbench.analysis` (scipy); this module only
groups and prints. ``make noise`` runs bench/matrix/validity.toml into its
own DB and prints this.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path

from .. import vocab
from ..defaults import ALPHA
from ..errors import QrwbenchError
from ..cell import Cell
from ..results import store
from . import selection

# numpy, scipy and the modules that need them (analysis) are imported
# where they are used: the command line imports this module to build its
# parser, and `bench --plan` runs before `make deps` installed them.


def group(cell) -> tuple:
    """The row a cell is summarized in: the rows of a workload with several
    impls (rwlock: the kernel's lock, the module's copies) are split by impl."""
    g = (cell.arch, cell.cpu, cell.vcpus, cell.workload)
    return g + ((cell.impl,) if vocab.workload(cell.workload).several_impls else ())


def _measured(cell) -> bool:
    return cell.op != "empty" and cell.impl != "none"


def cv_table(samples) -> dict:
    """group -> within-boot CV, between-boot CV and MDEs (medians over cells)."""
    import numpy as np

    from ..analysis import windows
    from ..analysis.noise import within_boot_cv
    acc = defaultdict(lambda: defaultdict(list))
    for w in within_boot_cv(samples):
        c = w["cell"]
        if not _measured(c) or math.isnan(w["within_cv"]):
            continue
        a = acc[group(c)]
        a["within"].append(w["within_cv"])
        between = 0.0 if math.isnan(w["between_cv"]) else w["between_cv"]
        a["between"].append(between)
        if w["copy"] == 0:
            per_boot = max(w["reps"] // max(w["runs"], 1), 1)
            a["mde_boot"].append(windows.mde(w["within_cv"], w["within_cv"], per_boot, per_boot))
            total = math.hypot(w["within_cv"], between)
            a["mde_pooled"].append(windows.mde(total, total, w["reps"], w["reps"]))
    return {g: {k: float(np.median(v)) for k, v in a.items()} | {"cells": len(a["within"])}
            for g, a in acc.items()}


def _tally(results) -> dict:
    per = defaultdict(lambda: [0, 0])
    for r in results:
        if r.test.judged:
            k = (r.cell.arch, r.cell.cpu, r.cell.workload)
            per[k][0] += r.significant
            per[k][1] += 1
    return dict(per)


def aa_table(samples, *, n_resamples=500) -> dict:
    """kind -> {(arch, cpu, workload): [significant, judged]} for the kinds
    'copy' (boots pooled), 'boot' (consecutive boots) and 'copy, one boot'."""
    from ..analysis import calibration
    aa = calibration.aa_control(samples, boots=False)
    out = {"copy": _tally(r for r in aa.results if r.kind == "copy"),
           "boot": _tally(raw_boot_aa(samples, n_resamples=n_resamples))}
    by_run = defaultdict(list)
    for s in samples:
        by_run[s["run_id"]].append(s)
    one = []
    for rid in sorted(by_run):
        one += calibration.aa_control(by_run[rid], boots=False).results
    out["copy, one boot"] = _tally(one)
    return out


def raw_boot_aa(samples, *, alpha=ALPHA, n_resamples=500) -> list:
    """Consecutive boots of one cell and variant (copy 0) compared on their raw
    windows (Mann-Whitney, ``windows.compare_samples``): the boot-to-boot spread
    of absolute throughput, which is why kernel builds are compared through an
    in-boot reference (perboot.boot_values) and never on raw throughput."""
    from ..analysis import calibration, windows
    runs = defaultdict(lambda: defaultdict(list))
    order = {}
    for s in samples:
        if s["copy"] == 0:
            runs[(Cell.of(s), s["variant"])][s["run_id"]].append(float(s["throughput"]))
            order.setdefault(s["run_id"], (s.get("started_at") or "", s["run_id"]))
    out = []
    for i, ((cell, variant), d) in enumerate(sorted(runs.items())):
        ids = sorted(d, key=lambda r: order[r])
        for k, (r0, r1) in enumerate(zip(ids, ids[1:])):
            t = windows.compare_samples(d[r1], d[r0], n_resamples=n_resamples,
                                        seed=[1000 + i, k], alpha=alpha)
            r = calibration.AAResult("boot", cell, variant, t, f"run {r1} vs {r0}")
            r.significant = t.significant(t.p_value, alpha)
            out.append(r)
    return out


def window_drift(samples, *, width=10) -> dict:
    """(arch, cpu, workload, bucket) -> median of throughput / entry median,
    where an entry is one (run, impl, op, variant, copy, placement, params)
    and bucket k holds the windows at run-order positions [k*width, (k+1)*width);
    the last bucket (9) holds everything from 9*width on."""
    import numpy as np
    if width < 1:
        raise QrwbenchError(f"window width {width}: must be at least 1")
    entries = defaultdict(list)
    for s in samples:
        k = (s["run_id"], s["impl"], s["op"], s["variant"], s["copy"], s["placement"], s["params"])
        entries[k].append(s)
    buckets = defaultdict(list)
    for group_samples in entries.values():
        med = float(np.median([float(s["throughput"]) for s in group_samples]))
        if med <= 0:
            continue
        for s in group_samples:
            b = min(int(s["ord"]) // width, 9)
            buckets[(s["arch"], s["cpu_model"], s["workload"], b)].append(float(s["throughput"]) / med)
    return {k: float(np.median(v)) for k, v in sorted(buckets.items())}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def format_text(samples, *, n_resamples=500, width=10) -> str:
    from scipy.stats import binomtest
    lines = ["## within-boot CV (between-boot CV), MDE at 80 % power: one boot / boots pooled"]
    for g, r in sorted(cv_table(samples).items()):
        lines.append(f"{'/'.join(map(str, g))}: within {_pct(r['within'])} "
                     f"(between {_pct(r['between'])}), MDE {_pct(r['mde_boot'])} / "
                     f"{_pct(r['mde_pooled'])}, {r['cells']} cells")
    lines.append("## A/A false positives (alpha 0.05)")
    for kind, per in aa_table(samples, n_resamples=n_resamples).items():
        k = sum(v[0] for v in per.values())
        n = sum(v[1] for v in per.values())
        p = binomtest(k, n, ALPHA, alternative="greater").pvalue if n else math.nan
        lines.append(f"{kind}: {k} of {n} ({_pct(k / n) if n else 'none judged'}; "
                     f"binomial p(rate > alpha) = {p:.3g})")
        lines += [f"  {'/'.join(g)}: {v[0]} of {v[1]}" for g, v in sorted(per.items())]
    lines.append(f"## window drift: median throughput / entry median by run-order position "
                 f"(buckets of {width} windows)")
    rows = defaultdict(dict)
    for (arch, cpu, wl, b), v in window_drift(samples, width=width).items():
        rows[(arch, cpu, wl)][b] = v
    for g, bs in sorted(rows.items()):
        lines.append(f"{'/'.join(g)}: " + " ".join(f"{b}:{v:.3f}" for b, v in sorted(bs.items())))
    return "\n".join(lines) + "\n"


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench noise`` (the parser is cli's)."""
    ap.add_argument("db", help="results DB (SQLite)")
    ap.add_argument("--commit", default="all",
                    help="rig commit: all (default), latest, HEAD, or a sha/prefix (selection.select)")
    ap.add_argument("--width", type=int, default=10, help="windows per drift bucket (default 10)")


def run(args) -> int:
    """``python3 -m qrwbench noise DB``: bad input raises QrwbenchError (cli.main prints it)."""
    if not Path(args.db).is_file():
        raise QrwbenchError(f"results DB {args.db!r} does not exist")
    samples = selection.select(store.connect(args.db, create=False), args.commit).samples
    sys.stdout.write(format_text(samples, width=args.width))
    return 0

"""Noise, and LKP's and 0-day's rules on it.

* :func:`within_boot_cv`: how much the windows of one boot scatter, and how
  much the boots' medians do (`make noise`, the report);
* :func:`stable_samples`: LKP's stability rule (bisect checks GOOD's
  per-boot values with it; bench-series flags unstable commits);
* :func:`samples_separate`: 0-day's "the ranges separate" rule (regress
  shows it for information).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from ..cell import Cell
from .windows import MIN_SAMPLES, cv


def within_boot_cv(samples) -> list[dict]:
    """Per (cell, variant, copy): median over runs of the CV of reps within one run."""
    per = defaultdict(lambda: defaultdict(list))
    for s in samples:
        per[(Cell.of(s), s["variant"], s["copy"])][s["run_id"]].append(float(s["throughput"]))
    out = []
    for (cell, variant, copy), runs in sorted(per.items()):
        cvs = [cv(x) for x in runs.values() if len(x) >= 2]
        cvs = [c for c in cvs if not math.isnan(c)]
        medians = [float(np.median(x)) for x in runs.values()]
        out.append({"cell": cell, "variant": variant, "copy": copy, "runs": len(runs),
                    "reps": sum(len(x) for x in runs.values()),
                    "within_cv": float(np.median(cvs)) if cvs else math.nan,
                    "between_cv": cv(medians) if len(medians) >= 2 else math.nan})
    return out


def stable_samples(x, *, max_gap=0.20, max_rsd=0.20, min_n=MIN_SAMPLES,
                   max_outlier_frac=0.20) -> tuple[bool, str]:
    """LKP's stability rule behind Tukey's fences. Points outside
    [Q1 - 1.5 IQR, Q3 + 1.5 IQR] are set aside when there are >= 5 samples and
    at most ``max_outlier_frac`` of them are outside; the rest must then hold
    >= min_n samples with (max-min)/mean <= max_gap and stddev/mean <= max_rsd.
    Without the fences one slow or fast boot in ten (seen in CI: nine boots at
    0.68-0.72, one at 0.89) made a 30 % regression "unstable". Returns
    (stable, why-not)."""
    x = np.asarray(x, dtype=float)
    if len(x) < min_n:
        return False, f"too few samples (n={len(x)}; need {min_n})"
    kept, note = x, ""
    if len(x) >= 5:
        q1, q3 = np.percentile(x, [25, 75])
        lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
        inside = (x >= lo) & (x <= hi)
        n_out = int(len(x) - inside.sum())
        if 0 < n_out <= max_outlier_frac * len(x):
            kept, note = x[inside], f" after setting aside {n_out} outlier(s) of {len(x)}"
    mean = float(np.mean(kept))
    if mean <= 0:
        return False, "mean is 0"
    gap = float(np.max(kept) - np.min(kept)) / mean
    rsd = float(np.std(kept, ddof=1)) / mean
    if gap > max_gap:
        return False, f"unstable samples (min-max gap {gap:.0%} > {max_gap:.0%}{note})"
    if rsd > max_rsd:
        return False, f"unstable samples (relative stddev {rsd:.0%} > {max_rsd:.0%}{note})"
    return True, ""


def samples_separate(a, b, *, min_n=MIN_SAMPLES) -> bool:
    """0-day's rule: the change from a to b is real when the ranges separate:
    ``min(b) > mean(a) and mean(b) > max(a)`` (or the mirror for a decrease)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if min(len(a), len(b)) < min_n:
        return False
    up = b.min() > a.mean() and b.mean() > a.max()
    down = b.max() < a.mean() and b.mean() < a.min()
    return bool(up or down)

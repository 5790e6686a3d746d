"""Fairness: how the threads of a window shared the work (Jain's index,
min/max of the per-thread totals)."""

from __future__ import annotations

import math

import numpy as np

from ..cell import Cell


def jain_index(x) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 fair, 1/n one thread got all."""
    x = np.asarray(x, dtype=float)
    sq = float(np.sum(x * x))
    return float(np.sum(x) ** 2 / (len(x) * sq)) if len(x) and sq > 0 else math.nan


def fairness(per_thread) -> dict:
    x = np.asarray(per_thread, dtype=float)
    lo, hi = (float(x.min()), float(x.max())) if len(x) else (math.nan, math.nan)
    return {"min": lo, "max": hi, "min_max": lo / hi if hi > 0 else math.nan,
            "jain": jain_index(x)}


def run_fairness(samples, field_name: str = "per_thread_ops") -> list[dict]:
    """Per run, cell, variant, copy: per-thread totals over its reps, and their fairness,
    plus the median Jain's index of the single reps."""
    acc = {}
    for s in samples:
        per = s.get(field_name)
        if per is None:
            continue
        key = (s["run_id"], Cell.of(s), s["variant"], s["copy"])
        tot, jains = acc.setdefault(key, [np.zeros(len(per)), []])
        if len(tot) == len(per):
            tot += np.asarray(per, dtype=float)
        jains.append(jain_index(per))
    out = []
    for (run_id, cell, variant, copy), (tot, jains) in sorted(acc.items(), key=lambda kv: (
            kv[0][1], kv[0][2], kv[0][3], kv[0][0])):
        f = fairness(tot)
        j = [v for v in jains if not math.isnan(v)]
        out.append({"run_id": run_id, "cell": cell, "variant": variant, "copy": copy,
                    "threads": len(tot), **f,
                    "jain_rep_median": float(np.median(j)) if j else math.nan})
    return out

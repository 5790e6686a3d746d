"""Step detection: change points in a metric's history over commits."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from .windows import MIN_SAMPLES


def change_points(series, *, alpha=0.01, min_change=0.05, min_n=MIN_SAMPLES) -> list[int]:
    """Change points in a history: ``series[i]`` holds the samples of commit i,
    in git order; returns the indices i where a new level starts.

    Hand-written binary segmentation (Scott & Knott 1974; Vostrikova 1981) with
    scipy's Mann-Whitney U as the split test: within a segment, every split
    between two commits is tested (pooled samples left vs right) and the one
    with the smallest p is kept when its Bonferroni-corrected p (times the
    number of splits tried) is below ``alpha`` and the medians differ by at least
    ``min_change``; both halves are then searched again.
    """
    arrays = [np.asarray(s, dtype=float) for s in series]
    found: list[int] = []

    def search(lo: int, hi: int) -> None:
        best = None
        tried = 0
        for k in range(lo + 1, hi):
            left = np.concatenate(arrays[lo:k])
            right = np.concatenate(arrays[k:hi])
            if len(left) < min_n or len(right) < min_n:
                continue
            tried += 1
            u = sps.mannwhitneyu(left, right, alternative="two-sided")
            # distance of U from its null mean, comparable across split sizes
            z = abs(u.statistic - len(left) * len(right) / 2) / math.sqrt(
                len(left) * len(right) * (len(left) + len(right) + 1) / 12)
            key = (u.pvalue, -z)
            if best is None or key < best[0]:
                best = (key, k, left, right)
        if best is None:
            return
        (p, _), k, left, right = best
        m_left = float(np.median(left))
        change = float(np.median(right)) / m_left - 1 if m_left > 0 else math.inf
        if p * tried < alpha and abs(change) >= min_change:
            search(lo, k)
            found.append(k)
            search(k, hi)

    search(0, len(arrays))
    return sorted(found)

"""Metric histories across commits and the change points in them.

A history is one metric (a cell, a variant, copy 0, throughput) across the
commits that have results, in git order. Change points come from
:func:`qrwbench.analysis.changepoints.change_points` (binary segmentation
with Mann-Whitney splits), as airspeed velocity marks steps in its history
graphs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .. import gitutil
from ..cell import Cell
from . import changepoints, windows

COMMIT_FIELD = {"rig": "rig_commit", "kernel": "kernel_tree_commit"}


@dataclass
class History:
    cell: Cell
    variant: str
    commits: list[str]              # oldest first
    samples: list[np.ndarray]
    summaries: list[windows.Summary]
    changes: list[int]              # index of the first commit of each new level

    @property
    def metric(self) -> str:
        return self.cell.metric(self.variant)

    def change_lines(self) -> list[str]:
        out = []
        for k in self.changes:
            before = float(np.median(np.concatenate(self.samples[:k])))
            after = float(np.median(np.concatenate(self.samples[k:])))
            out.append(f"{self.metric}: {100 * (after / before - 1):+.1f}% at commit "
                       f"{self.commits[k][:12]} (median {before / 1e6:.4g} -> "
                       f"{after / 1e6:.4g} Mops/s)")
        return out


def commit_order(samples, key: str = "rig", repo=None) -> list[str]:
    """Commits present in ``samples``, oldest first: git order when ``repo``
    knows them, else by the earliest start time of their runs."""
    field = COMMIT_FIELD[key]
    first = {}
    for s in samples:
        c = s.get(field)
        if c is not None:
            t = s.get("started_at") or ""
            first[c] = min(first.get(c, t), t)
    by_time = sorted(first, key=lambda c: (first[c], c))
    return gitutil.order(repo, by_time) if repo is not None else by_time


def histories(samples, *, key: str = "rig", repo=None, min_commits: int = 2,
              alpha: float = 0.01, min_change: float = 0.05, n_resamples: int = 1000,
              order=None) -> list[History]:
    """Every metric with results at ``min_commits`` or more commits."""
    field = COMMIT_FIELD[key]
    order = order or commit_order(samples, key, repo)
    acc = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if s["copy"] == 0 and s.get(field) is not None:
            acc[(Cell.of(s), s["variant"])][s[field]].append(float(s["throughput"]))
    out = []
    for (cell, variant), per in sorted(acc.items()):
        commits = [c for c in order if c in per]
        if len(commits) < min_commits:
            continue
        arrays = [np.asarray(per[c]) for c in commits]
        out.append(History(cell, variant, commits, arrays,
                           [windows.summarize(a, n_resamples=n_resamples) for a in arrays],
                           changepoints.change_points(arrays, alpha=alpha, min_change=min_change)))
    return out

"""One value per boot: blocks, the in-boot reference, the normalisation.

Two kernels never share a boot, so comparisons across boots (kernel builds in
`make bench`; commits in `make regress`, `make bench-series` and `make
bisect`) take one value per boot. Where the boot measured the module's own
``acqrel`` qrwlock copy next to the kernel's rwlock (the *in-boot
reference*: the workload record's ``kernel_ref`` impl in its ``baseline``
variant, identical code in every kernel), a boot's
value is the location of its block log ratios kernel / reference
(:func:`boot_ratio`), which cancels the speed of the boot and of the host;
else the location of its blocks' log throughputs (not normalized). This is
the rig's one per-boot normalisation (:func:`boot_values`); run/ktree.py's
kernel/module ratio samples are made with it too.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from .. import vocab
from ..cell import Cell
from . import effects


def group_reps(samples, *, copy: int | None = 0) -> dict:
    """{cell: {variant: {run_id: {rep: throughput}}}} over ``copy`` (a block is
    one rep of one run)."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for s in samples:
        if copy is None or s["copy"] == copy:
            out[Cell.of(s)][s["variant"]][s["run_id"]][s["rep"]] = float(s["throughput"])
    return out


def reference_runs(reps: dict, cell: Cell) -> dict | None:
    """The in-boot reference of a kernel cell in ``group_reps`` output: the
    same cell's runs of its workload's ``kernel_ref`` impl in the workload's
    ``baseline`` variant (rwlock: the module's acqrel copy; {run: {rep:
    throughput}}); None for any other cell, or a workload without one."""
    if cell.impl != "kernel":
        return None
    wl = vocab.workload(cell.workload)
    if not wl.kernel_ref:
        return None
    return reps.get(cell.replace(impl=wl.kernel_ref), {}).get(wl.baseline)


def boot_ratio(reps: dict, ref_reps: dict) -> float | None:
    """One boot's normalized value: the location (:func:`effects.boot_estimate`,
    a trimmed mean) of the log ratios ``reps`` / ``ref_reps`` of the blocks
    both measured ({rep: throughput} each); None when no block has both."""
    g = effects.block_log_ratios({0: reps}, {0: ref_reps})
    return effects.boot_estimate(g[0])[0] if g else None


def boot_values(runs: dict, ref_runs: dict | None) -> tuple[list[float], bool]:
    """One value per boot of ``runs`` ({run: {rep: throughput}}), in run
    order, for comparisons across boots: :func:`boot_ratio` to the in-boot
    reference (normalized), or, where a boot has no reference, the trimmed
    mean log throughput of its blocks (then the flag, normalized, is False)."""
    vals, normalized = [], True
    for run in sorted(runs):
        v = boot_ratio(runs[run], ref_runs[run]) if ref_runs and run in ref_runs else None
        if v is not None:
            vals.append(v)
        else:
            normalized = False
            x = [y for y in runs[run].values() if y > 0]
            if x:
                vals.append(effects.boot_estimate(np.log(x))[0])
    return vals, normalized


def boot_values_by_metric(samples, normalize: bool = True) -> dict:
    """(cell, variant) -> (per-boot values in log units (:func:`boot_values`),
    normalized?, per-boot median throughputs for display), copy 0. With
    ``normalize`` false every value is raw: for sides whose in-boot
    reference is not the same code."""
    reps = group_reps(samples, copy=0)
    out = {}
    for cell, variants in reps.items():
        ref = reference_runs(reps, cell) if normalize else None
        for variant, runs in variants.items():
            vals, norm = boot_values(runs, ref)
            shown = np.asarray([float(np.median(list(runs[r].values()))) for r in sorted(runs)])
            out[(cell, variant)] = (np.asarray(vals), norm, shown)
    return out

"""What the timed loop itself costs, and each atomics op with and without it.

Every rep of every atomics boot also runs the ``empty`` op: the same
generated loop (32 copies of the op per iteration, qrwb_loops.h) with
nothing in it. Its ns per op is the harness's share of every other op's ns
per op, measured in the same blocks. Per cell and variant (copy 0):

* ns per op and thread, the geometric mean over boots with its 95 % CI: the
  log ns/op of each block, per boot the trimmed mean, :func:`effects.level`
  (the two-level SE, t on boots - 1 degrees of freedom);
* the harness share, ns(empty) / ns(op), from the block ratios of the same
  reps (the paired in-boot machinery), with its CI;
* ns per op less the harness: ns/op x (1 - share).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import vocab
from ..cell import Cell
from . import effects, perboot

EMPTY = ("empty", "relaxed")     # the harness op of qrwb_ops.def and its ordering


@dataclass
class OpCost:
    cell: Cell
    variant: str
    ns: effects.Effect                 # of log(ns per op and thread)
    share: effects.Effect | None       # of log(ns(empty) / ns(op)); None for empty itself

    @property
    def ns_per_op(self) -> float:
        return float(np.exp(self.ns.estimate))

    @property
    def ns_ci(self) -> tuple[float, float]:
        return float(np.exp(self.ns.low)), float(np.exp(self.ns.high))

    @property
    def harness_share(self) -> float:
        return float(np.exp(self.share.estimate)) if self.share and self.share.judged else float("nan")

    @property
    def share_ci(self) -> tuple[float, float]:
        if not (self.share and self.share.judged):
            return float("nan"), float("nan")
        return float(np.exp(self.share.low)), float(np.exp(self.share.high))

    @property
    def less_harness(self) -> float:
        return self.ns_per_op * (1.0 - self.harness_share)


def _log_ns(runs: dict, threads: int) -> list[np.ndarray]:
    """Per boot, log ns per op and thread of each block (throughput is ops/s
    of all threads together)."""
    return [np.log(threads * 1e9 / np.array([x for x in reps.values() if x > 0]))
            for _run, reps in sorted(runs.items()) if any(x > 0 for x in reps.values())]


def op_costs(samples) -> list[OpCost]:
    """One OpCost per atomics cell and variant that has enough blocks, the
    harness share where the cell's boots also ran the empty op."""
    reps = perboot.group_reps(samples, copy=0)
    out = []
    for cell in sorted(reps):
        if not vocab.workload(cell.workload).op_table:
            continue
        empty = reps.get(cell.replace(op=EMPTY[0]), {}).get(EMPTY[1])
        for variant in sorted(reps[cell]):
            runs = reps[cell][variant]
            ns = effects.level(_log_ns(runs, cell.threads))
            if not ns.judged:
                continue
            share = None
            if empty and (cell.op, variant) != EMPTY:
                share = effects.paired(effects.block_log_ratios(runs, empty))
            out.append(OpCost(cell, variant, ns, share))
    return out

"""Calibration: A/A comparisons and the injected barrier.

The rig's own false-positive rate and power, measured in every run (every
report, and the two lines `make bench` ends with): comparisons that should
find nothing (A/A: the same code compiled twice, or boots of one kernel)
must be significant at most at rate alpha (a one-sided binomial test), and
an injected ``smp_mb()`` per op must be found slower wherever it can only
add cost (:func:`calibrates`). The comparisons are those of `make bench`
(:func:`effects.paired`, :func:`effects.boots` on
:func:`perboot.boot_values`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from .. import vocab
from ..defaults import ALPHA
from ..cell import Cell
from . import effects
from .effects import CONFIDENCE
from .perboot import boot_values, group_reps, reference_runs
from .windows import Test, effect_test


@dataclass
class AAResult:
    kind: str            # 'copy' (copy 1 vs 0), 'boot' (boots of one kernel), 'inject'
    cell: Cell
    variant: str
    test: Test
    what: str            # e.g. 'copy 1 vs copy 0' or 'boots 2 vs 2 (alternating)'
    significant: bool = False
    effect: effects.Effect | None = None

    @property
    def counted(self) -> bool:
        """An injected barrier that can only add cost (:func:`calibrates`): its
        comparison counts for the calibration (the others are shown only)."""
        return self.kind == "inject" and calibrates(self.cell)

    @property
    def detected(self) -> bool:
        """A counted injected barrier found slower (significant implies judged)."""
        return self.counted and self.significant and self.effect.estimate < 0


@dataclass
class AAReport:
    results: list[AAResult]
    alpha: float
    n_judged: int
    n_significant: int
    rate: float          # n_significant / n_judged (nan when none judged)
    p_rate_above_alpha: float  # one-sided binomial test of rate > alpha
    barrier_ns: dict = field(default_factory=dict)   # barrier_cost_ns of the samples


def _injected(cell: Cell) -> bool:
    """Copy 1 of this cell adds one smp_mb() per op (module parameter
    aa_inject_mb; the harness's own ``empty`` op is never injected)."""
    return bool(cell.params_dict().get("aa_inject_mb")) and cell.op != "empty"


def aa_control(samples, *, alpha=ALPHA, confidence=CONFIDENCE, boots=True) -> AAReport:
    """Calibration: A/A comparisons, and the injected barrier.

    * copy: copy 1 against copy 0 of the same op, ordering and cell, block by
      block (:func:`effects.paired`); the two copies are the same code
      compiled twice, so a significant difference is a false positive.
    * boot (with ``boots``): the kernel-build machinery on boots of one
      kernel: a cell's boots split in two halves (alternating, in run order),
      the halves' normalized per-boot values (:func:`boot_values`) compared
      with :func:`effects.boots` (needs four boots).
    * inject: in cells with ``aa_inject_mb=1`` copy 1 adds one ``smp_mb()``
      per op; each such comparison should be detected (slower).

    A comparison is significant when its p is below ``alpha`` and its CI
    excludes 0: the per-comparison error rate, which should be at or below
    alpha for the A/A kinds.
    """
    samples = list(samples)
    results = []
    reps0, reps1 = group_reps(samples, copy=0), group_reps(samples, copy=1)
    for cell, variants in sorted(reps1.items()):
        for variant, runs1 in sorted(variants.items()):
            runs0 = reps0.get(cell, {}).get(variant)
            if runs0 is None:
                continue
            e = effects.paired(effects.block_log_ratios(runs1, runs0), confidence=confidence)
            results.append(AAResult("inject" if _injected(cell) else "copy", cell, variant,
                                    effect_test(e, "block"),
                                    "copy 1 vs copy 0", effect=e))
    if boots:
        order = {}
        for s in samples:
            order.setdefault(s["run_id"], (s.get("started_at") or "", s["run_id"]))
        for cell, variants in sorted(reps0.items()):
            if cell.impl != "kernel":
                continue
            ref = reference_runs(reps0, cell)
            for variant, runs in sorted(variants.items()):
                ids = sorted(runs, key=lambda r: order[r])
                if len(ids) < 4:
                    continue
                va, _ = boot_values({r: runs[r] for r in ids[0::2]}, ref)
                vb, _ = boot_values({r: runs[r] for r in ids[1::2]}, ref)
                e = effects.boots(va, vb, confidence=confidence)
                results.append(AAResult("boot", cell, variant, effect_test(e, "boot"),
                                        f"boots {len(va)} vs {len(vb)} (alternating)",
                                        effect=e))
    for r in results:
        r.significant = r.effect.significant(r.effect.p_value, alpha)
    judged = [r for r in results if r.test.judged and r.kind != "inject"]
    k = sum(r.significant for r in judged)
    n = len(judged)
    p_above = float(sps.binomtest(k, n, alpha, alternative="greater").pvalue) if n else math.nan
    return AAReport(results, alpha, n, k, k / n if n else math.nan, p_above,
                    barrier_cost_ns(samples))


def _target(cell: Cell) -> str:
    return f"{cell.arch}/{cell.accel}/{cell.cpu} {cell.vcpus}v"


def calibrates(cell: Cell) -> bool:
    """Whether an injected barrier in this cell can only add cost, so that
    "slower" is the one right answer: its thread's line is its own (per-CPU
    placement, or one thread). On a line the threads share, the delay a
    barrier puts between one thread's ops changes how the line moves between
    CPUs, and throughput may rise: run L (docs/validity.md), arm64
    cortex-a57 with 2 vCPUs, shared line, smp_store_release with the barrier
    +8.8 % [+3.0, +14.6]. Such cells are shown, not counted."""
    return cell.placement == "percpu" or cell.threads == 1


def barrier_hits(aa: AAReport, target: str | None = None) -> tuple[int, int]:
    """(detected, measured) injected-barrier comparisons where the barrier
    can only add cost (:func:`calibrates`; of one target ``arch/accel/cpu
    Nv`` if given): detected = slower."""
    inj = [r for r in aa.results if r.counted and r.test.judged
           and (target is None or _target(r.cell) == target)]
    return sum(r.detected for r in inj), len(inj)


# The workloads whose ops are the rows of qrwb_ops.def (smp_mb and empty among them).
_OP_TABLE = tuple(n for n, w in vocab.WORKLOAD_TABLE.items() if w.op_table)


def barrier_cost_ns(samples) -> dict[str, float]:
    """Per target (``arch/accel/cpu Nv``), what one ``smp_mb()`` costs there:
    median ns/op of the atomics op ``smp_mb`` less that of ``empty`` (the
    harness alone), copy 0 (never the injected copy). It says
    whether the backend charges for a barrier at all (under TCG that depends
    on the host CPU: docs/validity.md)."""
    ns = defaultdict(list)
    for s in samples:
        if (s.get("workload") in _OP_TABLE and s.get("op") in ("smp_mb", "empty")
                and not s.get("copy") and s.get("throughput", 0) > 0):
            threads = len(s.get("per_thread_ops") or []) or 1
            ns[(_target(Cell.of(s)), s["op"])].append(threads / s["throughput"] * 1e9)
    return {t: float(np.median(ns[(t, "smp_mb")]) - np.median(ns[(t, "empty")]))
            for t, op in ns if op == "smp_mb" and (t, "empty") in ns}


def calibration_line(aa: AAReport) -> str:
    """The second line `make bench` ends with (report.md and index.html too)."""
    hit, n = barrier_hits(aa)
    return (f"calibration: A/A {aa.n_significant} of {aa.n_judged} significant at alpha "
            f"{aa.alpha:g}; injected barrier detected {hit} of {n}")


def calibration_failed(aa: AAReport) -> list[str]:
    """Why the calibration fails (empty when it holds): A/A false positives
    above alpha (binomial test), or an injected barrier missed in more than
    5 % of the cells where it was measured; then per target how often it was
    found, with what one barrier costs there (``aa.barrier_ns``) where known."""
    out = []
    if aa.n_judged and aa.p_rate_above_alpha < 0.05:
        out.append(f"A/A false positives {aa.n_significant} of {aa.n_judged} "
                   f"({aa.rate:.0%}) exceed alpha {aa.alpha:g}")
    hit, n = barrier_hits(aa)
    if n and hit < 0.95 * n:
        per = []
        for t in sorted({_target(r.cell) for r in aa.results if r.counted}):
            h, m = barrier_hits(aa, t)
            cost = aa.barrier_ns.get(t)
            per.append(f"{t} {h} of {m}" + (f", one smp_mb() {cost:.1f} ns" if cost is not None else ""))
        out.append(f"the injected barrier was detected in only {hit} of {n} cells ("
                   + "; ".join(per) + ")")
    return out

"""The matrix comparison of `make bench` and the report: every variant
against its workload's baseline, in every cell.

A cell holds everything fixed but the variant and the copy (same arch, accel,
CPU model, vCPUs, workload, impl, op, placement and parameters; copy 0 only,
copy 1 is the A/A control of :mod:`calibration`). Baselines: ``acqrel`` for
rwlock (mainline since 2015), ``full`` (the fully ordered form) for atomics,
where there is no acquire+release variant; both are parameters.

* Variants measured in the same boots (the atomics' orderings, the module's
  qrwlock copies) are compared on paired blocks (:func:`effects.paired`: the
  blocks' log ratios, a trimmed mean per boot, the two-level SE and a t
  interval and test); the level is "in-boot".
* Kernel builds, one kernel per boot, are compared on one normalized value
  per boot (:func:`perboot.boot_values`) with Welch's t
  (:func:`effects.boots`); the level is "kernel".
* Multiple-comparison control per family (:attr:`Comparison.family`):
  :func:`verdicts.adjust`, Holm by default (family-wise error rate) or
  Benjamini-Hochberg (false discovery rate).
* The verdict is :func:`verdicts.effect_verdict`: slower / faster by x %
  [CI] when the adjusted p is below alpha and the CI excludes no change
  (and the change is at least ``min_effect``), equivalent within +-m % when
  the CI lies inside the level's margin (:data:`MARGIN_PCT`), else
  inconclusive.

Next to each comparison the report shows the median throughputs of its
windows with bootstrap CIs (:func:`windows.summarize`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .. import vocab
from ..defaults import ALPHA, CORRECTIONS
from ..errors import QrwbenchError
from ..cell import Cell
from . import effects, verdicts
from .effects import CONFIDENCE
from .perboot import boot_values, group_reps, reference_runs
from .verdicts import adjust
from .windows import N_RESAMPLES, Summary, Test, effect_test, group_runs, pooled, summarize

DEFAULT_BASELINES = vocab.BASELINES

# Equivalence margins (percent; the precision targets are the matrix's,
# matrix.DEFAULT_TARGET_PCT): an in-boot comparison (paired blocks) and a
# kernel-build one (boots).
MARGIN_PCT = {"in-boot": 4.0, "kernel": 10.0}


@dataclass
class Comparison:
    cell: Cell
    variant: str
    baseline: str
    test: Test
    summary: Summary
    base_summary: Summary
    p_adjusted: float = math.nan
    verdict: str = ""
    identical_code: bool = False
    emulator_blind: bool = False     # guest code differs, TCG runs the same (emuaudit)
    effect: effects.Effect | None = None
    kind: str = verdicts.INCONCLUSIVE      # slower, faster, equivalent, inconclusive
    level: str = "in-boot"                # or "kernel" (kernel builds: boots compared)
    runs: frozenset = frozenset()         # the boots the comparison drew on
    ended_by: str = ""                    # planner: target, budget, max_boots, failures

    @property
    def family(self) -> tuple:
        """Multiple-comparison family: one arch, accelerator, CPU model and
        workload (on one host, when there are several)."""
        return (self.cell.arch, self.cell.accel, self.cell.cpu, self.cell.workload,
                self.cell.host)

    @property
    def judged(self) -> bool:
        return self.kind in verdicts.JUDGED

    @property
    def settled(self) -> bool:
        """Nothing a measurement can add says anything about a CPU: the two
        variants compile to identical code, or TCG runs the same ops for both."""
        return self.identical_code or self.emulator_blind


@dataclass
class ComparisonSet:
    comparisons: list[Comparison]
    skipped: list[tuple[Cell, str]] = field(default_factory=list)
    alpha: float = ALPHA
    correction: str = "holm"
    baselines: dict = field(default_factory=dict)

    def distinguishable(self) -> list[Comparison]:
        """The comparisons whose answer can be about a CPU: neither identical
        code nor emulator-blind (labels from the audits; unlabeled count here)."""
        return [c for c in self.comparisons if not c.settled]

    def counts(self) -> dict:
        """Kinds of the distinguishable comparisons."""
        n = {k: 0 for k in verdicts.KINDS}
        for c in self.distinguishable():
            n[c.kind] += 1
        return n

    def median_half_width(self, level: str) -> float:
        """Median CI half-width of the judged distinguishable comparisons of a level."""
        hw = [c.effect.half_width_pct for c in self.distinguishable()
              if c.level == level and c.effect is not None and c.effect.judged]
        return float(np.median(hw)) if hw else math.nan

    def summary_line(self) -> str:
        n = self.counts()
        judged = sum(n[k] for k in verdicts.JUDGED)
        identical = sum(c.identical_code for c in self.comparisons)
        blind = sum(c.emulator_blind and not c.identical_code for c in self.comparisons)
        return (f"comparisons: {judged} judged of {len(self.distinguishable())} distinguishable "
                f"(slower {n[verdicts.SLOWER]}, faster {n[verdicts.FASTER]}, equivalent "
                f"{n[verdicts.EQUIVALENT]}, inconclusive {n[verdicts.INCONCLUSIVE]}); "
                f"emulator-blind {blind}, identical code {identical}; median CI "
                f"half-width in-boot {_pct_text(self.median_half_width('in-boot'))}, kernel "
                f"builds {_pct_text(self.median_half_width('kernel'))}")


def _pct_text(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.1f} %"


def parse_baselines(specs) -> dict:
    """``["rwlock=full", ...]`` -> baselines dict on top of the defaults."""
    out = dict(DEFAULT_BASELINES)
    for spec in specs or ():
        workload, sep, variant = spec.partition("=")
        if not sep or not workload or not variant:
            raise QrwbenchError(f"baseline {spec!r} is not WORKLOAD=VARIANT")
        out[workload] = variant
    return out


def compare_cells(samples, *, baselines=None, alpha=ALPHA, correction="holm",
                  min_effect=0.0, copy=0, confidence=CONFIDENCE,
                  n_resamples=N_RESAMPLES, seed=0, identical=None,
                  margins=None, blind=None) -> ComparisonSet:
    """Every variant against its workload's baseline, in every cell of ``samples``.

    Variants measured in the same boots are compared block by block
    (:func:`effects.paired`); kernel builds, measured in different boots, one
    normalized value per boot (:func:`boot_values`, :func:`effects.boots`).
    Holm (or BH) runs per family (:attr:`Comparison.family`). Verdicts: slower
    / faster by x % [CI], equivalent within +-m % (the CI inside
    ``margins[level]``), else inconclusive. ``identical(cell, a, b) -> bool``
    (from the audit) marks pairs whose code is identical; ``blind(cell, a, b)``
    (the emulator audit) pairs whose code differs but TCG runs the same. Raises
    :class:`QrwbenchError` for an empty selection or when a workload's
    baseline variant has no samples at all.
    """
    baselines = dict(DEFAULT_BASELINES if baselines is None else baselines)
    margins = {**MARGIN_PCT, **(margins or {})}
    if correction not in CORRECTIONS:
        raise QrwbenchError(f"unknown correction {correction!r} (use holm or bh)")
    samples = list(samples)
    if not samples:
        raise QrwbenchError("empty selection: no samples match")
    groups = group_reps(samples, copy=copy)
    windows = group_runs(samples, copy=copy)
    if not groups:
        raise QrwbenchError(f"empty selection: no samples of copy {copy}")
    by_workload = defaultdict(set)
    for cell, variants in groups.items():
        by_workload[cell.workload].update(variants)
    for workload, variants in sorted(by_workload.items()):
        base = baselines.get(workload)
        if base is not None and base not in variants:
            raise QrwbenchError(f"baseline variant {base!r} has no samples for workload "
                                f"{workload} (variants present: "
                                f"{', '.join(sorted(variants))})")
    comps, skipped = [], []
    for i, cell in enumerate(sorted(groups)):
        variants = groups[cell]
        base = baselines.get(cell.workload)
        if base is None:
            skipped.append((cell, f"no baseline defined for workload {cell.workload}"))
            continue
        if base not in variants:
            skipped.append((cell, f"no {base} samples (variants present: "
                                  f"{', '.join(sorted(variants))})"))
            continue
        ref = reference_runs(groups, cell)
        base_sum = summarize(pooled(windows[cell][base]), confidence=confidence,
                             n_resamples=n_resamples, seed=[seed, i, 0])
        for j, variant in enumerate(sorted(variants)):
            if variant == base:
                continue
            a, b = variants[variant], variants[base]
            if set(a).isdisjoint(b):
                # a kernel that recompiles the module's atomics (allfull) changes
                # the reference copy too: both sides unnormalized then
                r = None if any(vocab.variant_recompiles_module(v) for v in (variant, base)) else ref
                va, na = boot_values(a, r)
                vb, nb = boot_values(b, r)
                e = effects.boots(va, vb, confidence=confidence)
                if not (na and nb):
                    e.method = ("boots (not normalized: no in-boot reference)" if r is ref else
                                "boots (not normalized: the variant recompiles the reference copy)")
                level, unit = "kernel", "boot"
            else:
                e = effects.paired(effects.block_log_ratios(a, b), confidence=confidence)
                level, unit = "in-boot", "block"
            a_sum = summarize(pooled(windows[cell][variant]), confidence=confidence,
                              n_resamples=n_resamples, seed=[seed, i, j + 1])
            comps.append(Comparison(
                cell=cell, variant=variant, baseline=base,
                test=effect_test(e, unit, a_sum, base_sum), summary=a_sum,
                base_summary=base_sum, effect=e, level=level, runs=frozenset(a) | frozenset(b),
                identical_code=bool(identical and identical(cell, variant, base)),
                emulator_blind=bool(blind and blind(cell, variant, base))))
        if len(variants) == 1:
            skipped.append((cell, f"only the baseline {base} was measured"))
    judge(comps, alpha=alpha, correction=correction, min_effect=min_effect, margins=margins)
    return ComparisonSet(comps, skipped, alpha, correction, baselines)


def judge(comps: list[Comparison], *, alpha=ALPHA, correction="holm", min_effect=0.0,
          margins=None) -> None:
    """Adjusted p per family, then each comparison's kind and verdict text."""
    margins = {**MARGIN_PCT, **(margins or {})}
    families = defaultdict(list)
    for c in comps:
        if c.effect is not None and c.effect.judged:
            families[c.family].append(c)
    for fam in families.values():
        for c, p in zip(fam, adjust([c.effect.p_value for c in fam], alpha=alpha,
                                    correction=correction)):
            c.p_adjusted = float(p)
    for c in comps:
        p = c.p_adjusted
        if c.effect is not None and c.effect.judged and abs(c.test.pct_change) < min_effect * 100:
            p = 1.0         # smaller than the smallest change worth calling
        c.kind, c.verdict = verdicts.effect_verdict(c.effect, p, alpha=alpha,
                                                    margin_pct=margins[c.level])

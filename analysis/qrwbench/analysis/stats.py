"""Statistics: per-cell comparisons of orderings, A/A control, noise, fairness.

All tests and intervals come from scipy and statsmodels; nothing here
re-implements a test. The unit of observation is one ``result`` record (one
timed window of one rep): its throughput is ``ops * 1e9 / ns`` operations per
second (rwlock: lock+unlock pairs per second).

Comparison of variant V with the baseline B in one cell (same arch, accel, CPU
model, vCPUs, workload, impl, op, placement and parameters; copy 0 only, copy 1
is the A/A control):

* median throughput of each with a 95 % percentile-bootstrap CI
  (``scipy.stats.bootstrap``; BCa's jackknife is unreliable for a median);
* the ratio of medians V/B with a 95 % percentile-bootstrap CI, resampling the
  two groups independently;
* a two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``): no normality
  assumption, robust to the outliers that preemption under TCG produces;
* Cliff's delta (equal to the rank-biserial correlation, ``2U/(n_V n_B) - 1``)
  as the rank effect size, next to the percent change of medians;
* multiple-comparison control over every comparison of the selection
  (``statsmodels.stats.multitest.multipletests``; Holm by default, which
  controls the family-wise error rate, or Benjamini-Hochberg, which controls
  the false discovery rate).

The verdict is ``faster``/``slower`` only when the adjusted p is below alpha
*and* the ratio's CI excludes 1 (and, optionally, the change is at least
``min_effect``); otherwise ``no significant difference``. Cells with fewer than
``MIN_SAMPLES`` samples on a side are ``could not judge``.

Baselines: ``acqrel`` for rwlock (mainline since 2015), ``full`` (the fully
ordered form) for atomics, where there is no acquire+release variant; both are
parameters.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from .. import vocab
from ..defaults import ALPHA, CORRECTIONS
from ..errors import QrwbenchError
from ..cell import Cell
from . import effects

DEFAULT_BASELINES = vocab.BASELINES
CONFIDENCE = 0.95
POWER = 0.80
N_RESAMPLES = 2000
MIN_SAMPLES = 3

FASTER, SLOWER, NO_DIFF = "faster", "slower", "no significant difference"


# -------------------------------------------------------------------- cells

def group_runs(samples, *, copy: int | None = 0, value: str = "throughput"
               ) -> dict[Cell, dict[str, dict[str, list[float]]]]:
    """{cell: {variant: {run_id: [``value`` of each window]}}} over ``copy``."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for s in samples:
        if copy is None or s["copy"] == copy:
            out[Cell.of(s)][s["variant"]][s["run_id"]].append(float(s[value]))
    return out


def per_run_medians(runs: dict) -> np.ndarray:
    """One observation per boot: the median of each run's windows."""
    return np.asarray([float(np.median(v)) for _, v in sorted(runs.items())])


def pooled(runs: dict) -> np.ndarray:
    """Every window of every run (for variants measured in the same boots)."""
    return np.asarray([x for _, v in sorted(runs.items()) for x in v])


def units_for(a_runs: dict, b_runs: dict) -> tuple[np.ndarray, np.ndarray, str]:
    """The observations to compare two variants on, and their unit.

    Variants measured in the same boots (the module's copies, the atomics'
    orderings: all interleaved in every boot) are compared window by window,
    all boots pooled: a boot's speed moves both sides alike. Variants measured
    in different boots (kernel builds: one kernel per boot) are compared boot
    by boot, one median per boot: their windows share their boot's speed, and
    two boots of one kernel differ far more often than alpha (docs/validity.md,
    boot-to-boot A/A 23-48 %), so pooling windows would make noise significant.
    """
    if set(a_runs).isdisjoint(b_runs):
        return per_run_medians(a_runs), per_run_medians(b_runs), "boot"
    return pooled(a_runs), pooled(b_runs), "window"


# ----------------------------------------------------------------- summaries

@dataclass
class Summary:
    n: int
    median: float
    ci_low: float
    ci_high: float
    mean: float
    std: float
    cv: float            # std / mean, ddof 1 (nan for n < 2)


def _rng(seed):
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _median(x, axis=-1):
    return np.median(x, axis=axis)


def _ratio_of_medians(a, b, axis=-1):
    return np.median(a, axis=axis) / np.median(b, axis=axis)


def median_ci(x, *, confidence=CONFIDENCE, n_resamples=N_RESAMPLES, seed=0):
    """Percentile-bootstrap CI of the median of ``x``."""
    x = np.asarray(x, dtype=float)
    if len(x) < 2 or np.all(x == x[0]):
        m = float(np.median(x)) if len(x) else math.nan
        return (m, m) if len(x) >= 2 else (math.nan, math.nan)
    res = sps.bootstrap((x,), _median, vectorized=True, n_resamples=n_resamples,
                        confidence_level=confidence, method="percentile",
                        random_state=_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def ratio_ci(a, b, *, confidence=CONFIDENCE, n_resamples=N_RESAMPLES, seed=0):
    """Percentile-bootstrap CI of median(a)/median(b), groups resampled independently."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if np.all(a == a[0]) and np.all(b == b[0]):
        r = float(a[0] / b[0]) if b[0] else math.inf
        return r, r
    res = sps.bootstrap((a, b), _ratio_of_medians, vectorized=True, paired=False,
                        n_resamples=n_resamples, confidence_level=confidence,
                        method="percentile", random_state=_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def cv(x) -> float:
    x = np.asarray(x, dtype=float)
    if len(x) < 2 or np.mean(x) == 0:
        return math.nan
    return float(np.std(x, ddof=1) / np.mean(x))


def summarize(x, *, confidence=CONFIDENCE, n_resamples=N_RESAMPLES, seed=0) -> Summary:
    x = np.asarray(x, dtype=float)
    lo, hi = median_ci(x, confidence=confidence, n_resamples=n_resamples, seed=seed)
    return Summary(n=len(x), median=float(np.median(x)) if len(x) else math.nan,
                   ci_low=lo, ci_high=hi, mean=float(np.mean(x)) if len(x) else math.nan,
                   std=float(np.std(x, ddof=1)) if len(x) > 1 else math.nan, cv=cv(x))


# ------------------------------------------------------ two-sample compare

def min_p_value(n_a: int, n_b: int) -> float:
    """Smallest two-sided Mann-Whitney p the sample sizes allow (total separation)."""
    return float(sps.mannwhitneyu(np.arange(n_a), np.arange(n_a, n_a + n_b),
                                  alternative="two-sided").pvalue)


def mde(cv_a: float, cv_b: float, n_a: int, n_b: int, *, alpha=ALPHA,
        power=POWER) -> float:
    """Minimum detectable relative effect (fraction) at ``power``.

    Normal approximation for a two-sided two-sample test on the relative scale:
    ``(z_{1-alpha/2} + z_power) * sqrt(cv_a^2/n_a + cv_b^2/n_b)``, inflated by
    ``sqrt(pi/3)`` for the Mann-Whitney test's asymptotic relative efficiency
    (3/pi) against the t-test under normal noise. Infinite when even total
    separation of the samples could not reach ``alpha``.
    """
    if min(n_a, n_b) < 2 or math.isnan(cv_a) or math.isnan(cv_b):
        return math.nan
    if min_p_value(n_a, n_b) >= alpha:
        return math.inf
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return float(z * math.sqrt(cv_a ** 2 / n_a + cv_b ** 2 / n_b) * math.sqrt(math.pi / 3))


@dataclass
class Test:
    """Variant ``a`` against baseline ``b`` (ratio > 1: ``a`` has more throughput)."""

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    ratio: float = math.nan
    ratio_low: float = math.nan
    ratio_high: float = math.nan
    p_value: float = math.nan
    cliffs_delta: float = math.nan
    mde: float = math.nan        # fraction, see :func:`mde`
    cv_a: float = math.nan
    cv_b: float = math.nan
    judged: bool = False
    why: str = ""                # why not judged
    unit: str = "window"         # what one observation is: a timed window, or a boot's median

    @property
    def pct_change(self) -> float:
        return (self.ratio - 1.0) * 100.0


def compare_samples(a, b, *, confidence=CONFIDENCE, n_resamples=N_RESAMPLES, seed=0,
                    alpha=ALPHA, min_n=MIN_SAMPLES, unit="window") -> Test:
    """Median ratio a/b with bootstrap CI, Mann-Whitney p, Cliff's delta, MDE.
    ``unit`` says what one observation is ("window" or "boot")."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    t = Test(n_a=len(a), n_b=len(b),
             median_a=float(np.median(a)) if len(a) else math.nan,
             median_b=float(np.median(b)) if len(b) else math.nan,
             cv_a=cv(a), cv_b=cv(b), unit=unit)
    what = "boots" if unit == "boot" else "samples"
    if min(len(a), len(b)) < min_n:
        t.why = f"too few {what} (n={len(a)} vs {len(b)}; need {min_n})"
        return t
    if t.median_b <= 0:
        t.why = "baseline median throughput is 0"
        return t
    if min_p_value(len(a), len(b)) >= alpha:
        t.why = (f"{len(a)} vs {len(b)} {what} cannot reach alpha {alpha:g} "
                 f"(smallest possible p {min_p_value(len(a), len(b)):.2g})")
        return t
    t.ratio = t.median_a / t.median_b
    t.ratio_low, t.ratio_high = ratio_ci(a, b, confidence=confidence,
                                         n_resamples=n_resamples, seed=seed)
    u = sps.mannwhitneyu(a, b, alternative="two-sided")
    t.p_value = float(u.pvalue)
    t.cliffs_delta = float(2.0 * u.statistic / (len(a) * len(b)) - 1.0)
    t.mde = mde(t.cv_a, t.cv_b, len(a), len(b), alpha=alpha)
    t.judged = True
    return t


def adjust(pvalues, *, alpha=ALPHA, correction="holm") -> np.ndarray:
    """Adjusted p-values (Holm or Benjamini-Hochberg) via statsmodels."""
    if correction not in CORRECTIONS:
        raise QrwbenchError(f"unknown correction {correction!r} (use holm or bh)")
    p = np.asarray(pvalues, dtype=float)
    if len(p) <= 1:         # a family of one: both methods leave p as it is
        return p
    return multipletests(p, alpha=alpha, method=CORRECTIONS[correction])[1]


def verdict(t: Test, p_adjusted: float, *, alpha=ALPHA, min_effect=0.0) -> str:
    """Window-level verdict of :func:`compare_samples` (regress, noise)."""
    if not t.judged:
        return f"could not judge: {t.why}"
    excludes_one = t.ratio_low > 1.0 or t.ratio_high < 1.0
    if p_adjusted < alpha and excludes_one and abs(t.ratio - 1.0) >= min_effect:
        return FASTER if t.ratio > 1.0 else SLOWER
    return NO_DIFF


# ---------------------------------------------------------- matrix compare

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
    kind: str = effects.INCONCLUSIVE      # slower, faster, equivalent, inconclusive
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
        return self.kind in effects.JUDGED

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
        n = {k: 0 for k in (*effects.JUDGED, effects.INCONCLUSIVE)}
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
        judged = sum(n[k] for k in effects.JUDGED)
        identical = sum(c.identical_code for c in self.comparisons)
        blind = sum(c.emulator_blind and not c.identical_code for c in self.comparisons)
        return (f"comparisons: {judged} judged of {len(self.distinguishable())} distinguishable "
                f"(slower {n[effects.SLOWER]}, faster {n[effects.FASTER]}, equivalent "
                f"{n[effects.EQUIVALENT]}, inconclusive {n[effects.INCONCLUSIVE]}); "
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


def group_reps(samples, *, copy: int | None = 0) -> dict:
    """{cell: {variant: {run_id: {rep: throughput}}}} over ``copy`` (a block is
    one rep of one run)."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for s in samples:
        if copy is None or s["copy"] == copy:
            out[Cell.of(s)][s["variant"]][s["run_id"]][s["rep"]] = float(s["throughput"])
    return out


REFERENCE = ("module", "acqrel")      # the in-boot reference of the kernel's rwlock


def reference_runs(reps: dict, cell: Cell) -> dict | None:
    """The in-boot reference of a kernel-rwlock cell in ``group_reps`` output:
    the module's acqrel copy of the same cell ({run: {rep: throughput}})."""
    if cell.impl != "kernel":
        return None
    return reps.get(cell.replace(impl=REFERENCE[0]), {}).get(REFERENCE[1])


def boot_values(runs: dict, ref_runs: dict | None) -> tuple[list[float], bool]:
    """One value per boot for comparisons across boots: the trimmed mean
    (:func:`effects.boot_estimate`) of the block log ratios to the in-boot
    reference (normalized), or, where a boot has no reference, the trimmed
    mean log throughput of its blocks (not normalized)."""
    vals, normalized = [], True
    for run in sorted(runs):
        g = effects.block_log_ratios({run: runs[run]}, {run: ref_runs[run]}) \
            if ref_runs and run in ref_runs else []
        if g:
            vals.append(effects.boot_estimate(g[0])[0])
        else:
            normalized = False
            x = [v for v in runs[run].values() if v > 0]
            if x:
                vals.append(effects.boot_estimate(np.log(x))[0])
    return vals, normalized


def _effect_test(e: effects.Effect, unit: str, a_sum: Summary, b_sum: Summary) -> Test:
    t = Test(n_a=e.n_blocks if unit == "block" else e.n_boots[0],
             n_b=e.n_blocks if unit == "block" else e.n_boots[1],
             median_a=a_sum.median, median_b=b_sum.median, unit=unit,
             judged=e.judged, why=e.why, p_value=e.p_value)
    if e.judged:
        t.ratio, t.ratio_low, t.ratio_high = (math.exp(e.estimate), math.exp(e.low),
                                              math.exp(e.high))
    return t


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
                test=_effect_test(e, unit, a_sum, base_sum), summary=a_sum,
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
        c.kind, c.verdict = effects.verdict(c.effect, p, alpha=alpha,
                                            margin_pct=margins[c.level])


# ---------------------------------------------------------- A/A control

@dataclass
class AAResult:
    kind: str            # 'copy' (copy 1 vs 0), 'boot' (boots of one kernel), 'inject'
    cell: Cell
    variant: str
    test: Test
    what: str            # e.g. 'copy 1 vs copy 0' or 'boots 2 vs 2 (alternating)'
    significant: bool = False
    effect: effects.Effect | None = None


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
                                    _effect_test(e, "block", _NO_SUMMARY, _NO_SUMMARY),
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
                results.append(AAResult("boot", cell, variant, _effect_test(
                    e, "boot", _NO_SUMMARY, _NO_SUMMARY),
                    f"boots {len(va)} vs {len(vb)} (alternating)", effect=e))
    for r in results:
        r.significant = r.effect.significant(r.effect.p_value, alpha)
    judged = [r for r in results if r.test.judged and r.kind != "inject"]
    k = sum(r.significant for r in judged)
    n = len(judged)
    p_above = float(sps.binomtest(k, n, alpha, alternative="greater").pvalue) if n else math.nan
    return AAReport(results, alpha, n, k, k / n if n else math.nan, p_above,
                    barrier_cost_ns(samples))


_NO_SUMMARY = Summary(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)


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
    inj = [r for r in aa.results if r.kind == "inject" and r.test.judged
           and calibrates(r.cell) and (target is None or _target(r.cell) == target)]
    return sum(1 for r in inj if r.significant and r.effect.estimate < 0), len(inj)


def barrier_cost_ns(samples) -> dict[str, float]:
    """Per target (``arch/accel/cpu Nv``), what one ``smp_mb()`` costs there:
    median ns/op of the atomics op ``smp_mb`` less that of ``empty`` (the
    harness alone), copy 0 (never the injected copy). It says
    whether the backend charges for a barrier at all (under TCG that depends
    on the host CPU: docs/validity.md)."""
    ns = defaultdict(list)
    for s in samples:
        if (s.get("workload") == "atomics" and s.get("op") in ("smp_mb", "empty")
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
        for t in sorted({_target(r.cell) for r in aa.results
                         if r.kind == "inject" and calibrates(r.cell)}):
            h, m = barrier_hits(aa, t)
            cost = aa.barrier_ns.get(t)
            per.append(f"{t} {h} of {m}" + (f", one smp_mb() {cost:.1f} ns" if cost is not None else ""))
        out.append(f"the injected barrier was detected in only {hit} of {n} cells ("
                   + "; ".join(per) + ")")
    return out


# ------------------------------------------------------------ noise, fairness

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


def stable_samples(x, *, max_gap=0.20, max_rsd=0.20, min_n=MIN_SAMPLES,
                   max_outlier_frac=0.20) -> tuple[bool, str]:
    """LKP's stability rule behind Tukey's fences. Points outside
    [Q1 - 1.5 IQR, Q3 + 1.5 IQR] are set aside when there are >= 5 samples and
    at most ``max_outlier_frac`` of them are outside; the rest must then hold
    >= min_n samples with (max-min)/mean <= max_gap and stddev/mean <= max_rsd.
    Without the fences one slow or fast boot in ten (seen in CI: nine boots at
    0.68-0.72, one at 0.89) made a 30 % regression "unstable"; the judgement
    itself (median ratio, Mann-Whitney) is rank-based and not moved by it.
    Returns (stable, why-not)."""
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


# ------------------------------------------------------------ step detection

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

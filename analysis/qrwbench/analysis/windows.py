"""Statistics of timed windows: medians with bootstrap CIs, the window test.

The unit of observation here is one ``result`` record (one timed window of
one rep): its throughput is ``ops * 1e9 / ns`` operations per second
(rwlock: lock+unlock pairs per second). Every test and interval comes from
scipy; nothing here re-implements one.

* :func:`summarize`: a variant's median throughput with a 95 %
  percentile-bootstrap CI (``scipy.stats.bootstrap``; BCa's jackknife is
  unreliable for a median) and its CV: what the report shows next to each
  comparison.
* :func:`compare_samples`: two groups of windows, unpaired: the ratio of
  medians with a percentile-bootstrap CI (the groups resampled
  independently), a two-sided Mann-Whitney U test
  (``scipy.stats.mannwhitneyu``), Cliff's delta and the minimum detectable
  effect (:func:`mde`). `make noise` compares consecutive boots on their
  raw windows with it (report/noise.py); its verdict is
  :func:`verdicts.window_verdict`.
* :class:`Test`: the ratio form of a comparison, from :func:`compare_samples`
  or from an :class:`effects.Effect` (:func:`effect_test`).

The comparisons of `make bench` and `make regress` are not window tests:
they are t-based, on paired blocks or on one value per boot
(:mod:`effects`, :mod:`compare`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ..defaults import ALPHA
from ..cell import Cell
from . import effects
from .effects import CONFIDENCE

POWER = 0.80
N_RESAMPLES = 2000
MIN_SAMPLES = 3


def group_runs(samples, *, copy: int | None = 0, value: str = "throughput"
               ) -> dict[Cell, dict[str, dict[str, list[float]]]]:
    """{cell: {variant: {run_id: [``value`` of each window]}}} over ``copy``."""
    out: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for s in samples:
        if copy is None or s["copy"] == copy:
            out[Cell.of(s)][s["variant"]][s["run_id"]].append(float(s[value]))
    return out


def pooled(runs: dict) -> np.ndarray:
    """Every window of every run of one variant ({run_id: [value, ...]})."""
    return np.asarray([x for _, v in sorted(runs.items()) for x in v])


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


NO_SUMMARY = Summary(0, math.nan, math.nan, math.nan, math.nan, math.nan, math.nan)


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
    """Minimum detectable relative effect (fraction) at ``power`` of the
    Mann-Whitney window test (:func:`compare_samples`).

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
    unit: str = "window"         # what one observation is: a window, a block, or a boot

    @property
    def pct_change(self) -> float:
        return (self.ratio - 1.0) * 100.0

    def significant(self, p: float, alpha: float) -> bool:
        """p (raw or adjusted) below alpha and the ratio's CI excludes 1."""
        return self.judged and p < alpha and (self.ratio_low > 1.0 or self.ratio_high < 1.0)


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


def effect_test(e: effects.Effect, unit: str, a_sum: Summary = NO_SUMMARY,
                b_sum: Summary = NO_SUMMARY) -> Test:
    """The :class:`Test` (ratio form) of an effect: ``unit`` "block" (paired
    blocks: n is the blocks) or "boot" (n is each side's boots); the ratio
    and its CI are the exponentiated log ratio and interval; the medians are
    those of the summaries (nan without)."""
    t = Test(n_a=e.n_blocks if unit == "block" else e.n_boots[0],
             n_b=e.n_blocks if unit == "block" else e.n_boots[1],
             median_a=a_sum.median, median_b=b_sum.median, unit=unit,
             judged=e.judged, why=e.why, p_value=e.p_value)
    if e.judged:
        t.ratio, t.ratio_low, t.ratio_high = (math.exp(e.estimate), math.exp(e.low),
                                              math.exp(e.high))
    return t

"""Effects from paired blocks: the estimates and intervals behind every verdict.

A *block* is one repetition (``rep``) of one boot (``run_id``). In a block the
module measures every entry once, and the entries that are compared with each
other run back to back in a random order (the atomics: every ordering and
copy of one op on one placement; the rwlock workload: every implementation),
so the two sides of a comparison are measured within a few windows of each
other and a slow phase of the host moves both alike.

* **In-boot comparisons** (an ordering against the baseline ordering, a module
  qrwlock copy against the ``acqrel`` copy, copy 1 against copy 0): the unit
  is the block's log ratio ``log(x_a / x_b)``. Each boot's location is the
  20 % trimmed mean of its block log ratios (:func:`boot_estimate`): on a
  shared host a preempted vCPU thread loses milliseconds of a 5 ms window,
  so the block ratios have a sharp core and long tails (default bench of
  2026-12-04, 3066ff0: SD 0.11-0.17 of a block's log ratio, 0.05-0.08 from
  its MAD, kurtosis 4-54), and the plain mean let those few blocks set the
  width of every interval. The estimate is the mean of the boot locations
  (each boot weighted alike). Its standard error follows the two-level model
  of Kalibera & Jones ("Rigorous benchmarking in reasonable time", ISMM
  2013), boot and block as random levels, with Yuen's trimmed-mean variance
  for the block level (:func:`random_effects_se`), and the interval is
  ``estimate +- t(df) * SE`` (:func:`paired_df`: boots - 1 where the boot
  locations vary more than their blocks explain, else the blocks kept less
  the boots). A two-stage
  bootstrap (boots, then blocks) was tried first and dropped: it counts the
  within-boot noise twice, so its intervals did not narrow with more boots
  (half-widths 2.3 % at 2 boots and 2.7 % at 8 on the synthetic data of
  tests/analysis/test_stats.py ``gen``, 10 blocks a boot, 5 % window noise,
  seed 2; a throwaway check during development, not kept).
* **Kernel builds** (the kernel's ``rwlock_t`` of one kernel variant against
  another's: always different boots): each boot is reduced to its in-boot
  *normalized* value, the trimmed mean block log ratio of the kernel's rwlock to the
  module's own ``acqrel`` qrwlock copy (identical code in every kernel,
  measured in the same blocks), which cancels the speed of the boot and of
  the host. The boot is the unit: Welch's t test (``scipy.stats.ttest_ind``,
  ``equal_var=False``) on the per-boot values, and its interval with the
  Welch-Satterthwaite degrees of freedom (written out here: scipy 1.10 gives
  the p-value, not the interval). At least two boots a side are needed.

Everything is in natural-log units internally; :func:`pct` turns a log ratio
into a percent change.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from scipy.stats import mstats

CONFIDENCE = 0.95
MIN_BLOCKS = 3          # in-boot: fewer blocks in all is not judged
MIN_BOOTS = 2           # kernel builds: per side
TRIM = 0.2              # share of a boot's blocks cut from each end (boot_estimate)
TRIM_MIN_BLOCKS = 10    # ... in boots of at least this many blocks (fewer: the plain mean)


@dataclass
class Effect:
    """log(a / b) with its interval; ``judged`` False says why not."""

    estimate: float = math.nan      # log ratio
    low: float = math.nan
    high: float = math.nan
    p_value: float = math.nan
    se: float = math.nan
    n_boots: tuple = (0, 0)         # (a side, b side); equal for in-boot pairs
    n_blocks: int = 0
    method: str = ""                # "paired blocks" or "boots (normalized)"
    judged: bool = False
    why: str = ""

    def significant(self, p: float, alpha: float) -> bool:
        """p (raw or adjusted) below alpha and the interval excludes no change."""
        return self.judged and p < alpha and (self.low > 0 or self.high < 0)

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate)

    @property
    def half_width_pct(self) -> float:
        """Half the interval's width, in percent of the estimate's ratio."""
        return (math.exp(self.high) - math.exp(self.low)) / 2 / math.exp(self.estimate) * 100


def pct(log_ratio: float) -> float:
    return (math.exp(log_ratio) - 1.0) * 100.0


def block_log_ratios(a: dict, b: dict) -> list[np.ndarray]:
    """Per boot, the log ratios a/b of the blocks both sides measured.

    ``a``, ``b``: ``{run_id: {rep: throughput}}``. Boots or blocks present on
    one side only, and non-positive throughputs, are left out."""
    out = []
    for run in sorted(set(a) & set(b)):
        reps = sorted(r for r in set(a[run]) & set(b[run]) if a[run][r] > 0 and b[run][r] > 0)
        if reps:
            out.append(np.log([a[run][r] for r in reps]) - np.log([b[run][r] for r in reps]))
    return out


def boot_estimate(g: np.ndarray) -> tuple[float, float, int]:
    """One boot's location of its block log ratios and that location's
    variance: the 20 % trimmed mean (``TRIM`` of the blocks cut from each end,
    ``scipy.stats.trim_mean``) with Yuen's variance, the winsorized variance
    (``scipy.stats.mstats.winsorize``) over ``(h / n)^2 * n``, ``h`` the
    blocks kept. A boot of fewer than ``TRIM_MIN_BLOCKS`` blocks keeps them
    all (the plain mean and s^2/n): cutting 1 of 6 costs more in degrees of
    freedom than it saves. Returns (location, variance, h)."""
    g = np.asarray(g, dtype=float)
    n = len(g)
    k = int(TRIM * n) if n >= TRIM_MIN_BLOCKS else 0
    h = n - 2 * k
    if n < 2:
        return float(g.mean()), 0.0, h
    if k == 0:
        return float(g.mean()), float(g.var(ddof=1)) / n, h
    w = np.asarray(mstats.winsorize(g, limits=(TRIM, TRIM)), dtype=float)
    return float(sps.trim_mean(g, TRIM)), float(w.var(ddof=1)) / ((h / n) ** 2 * n), h


def _levels(estimates: list[tuple[float, float, int]]) -> tuple[float, float]:
    """(within, between) of :func:`random_effects_se`."""
    nb = len(estimates)
    locs = np.array([e[0] for e in estimates])
    within = float(np.mean([e[1] for e in estimates]))
    between = max(0.0, float(locs.var(ddof=1)) - within) if nb > 1 else 0.0
    return within, between


def random_effects_se(estimates: list[tuple[float, float, int]]) -> float:
    """Standard error of the mean of boot locations under the two-level model
    (Kalibera & Jones: boot and block as random levels): the within-boot part
    is the mean of the boots' own variances (:func:`boot_estimate`), the
    between-boot part by the method of moments (the boot locations' variance
    less what the within-boot noise explains, floored at 0). Written out: a
    few lines of one-way ANOVA, with Yuen's variance in place of s^2/n."""
    within, between = _levels(estimates)
    return math.sqrt((between + within) / len(estimates))


def paired_df(estimates: list[tuple[float, float, int]]) -> int:
    """Degrees of freedom of :func:`random_effects_se` for paired blocks.
    Where the boot locations vary more than their blocks explain (between >
    0), the SE is their own spread, s^2 / boots, which has boots - 1 degrees
    of freedom, however many blocks there are; else it is the blocks'
    (within / boots) with the blocks kept less the boots. Until issue 26's
    run Z1 (docs/validity.md) it was always the blocks': on that host two
    compiled copies of one op differ from boot to boot, and copy A/A came
    out significant 106 times of 777 at alpha 0.05 (39 with this rule)."""
    within, between = _levels(estimates)
    nb = len(estimates)
    if between > 0:
        return nb - 1
    return max(sum(e[2] for e in estimates) - nb, 1)


def variance_components(groups: list[np.ndarray]) -> tuple[float, float] | None:
    """Where a comparison's noise comes from (the diagnostics of
    analysis/scripts/{inboot,variance}_components.py): the pooled within-boot
    variance of one block's log ratio, and the between-boot variance of a
    boot's plain mean beyond what that explains (method of moments, floored
    at 0; :func:`random_effects_se` is the same split with the trimmed
    means the verdicts use). None with fewer than 2 boots or a boot of
    fewer than 2 blocks."""
    n = np.array([len(g) for g in groups], dtype=float)
    if len(groups) < 2 or n.min() < 2:
        return None
    within = sum(((g - g.mean()) ** 2).sum() for g in groups) / (n - 1).sum()
    means = np.array([g.mean() for g in groups])
    return float(within), max(0.0, float(means.var(ddof=1) - (within / n).mean()))


def _two_level(groups: list[np.ndarray], confidence: float, method: str, df_of) -> Effect:
    """The mean over boots of per-boot locations (:func:`boot_estimate`) with
    the two-level SE (:func:`random_effects_se`) and a t interval and test on
    ``df_of(boot estimates)`` degrees of freedom."""
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    nblocks = sum(len(g) for g in groups)
    e = Effect(n_boots=(len(groups), len(groups)), n_blocks=nblocks, method=method)
    if nblocks < MIN_BLOCKS:
        e.why = f"too few paired blocks ({nblocks}; need {MIN_BLOCKS})"
        return e
    est = [boot_estimate(g) for g in groups]
    e.estimate = float(np.mean([x[0] for x in est]))
    se = random_effects_se(est)
    df = df_of(est)
    e.se = se
    if df < 1:          # one boot: no interval over boots
        e.low, e.high = -math.inf, math.inf
        e.judged = True
        return e
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    e.low, e.high = e.estimate - q * se, e.estimate + q * se
    if se > 0:
        e.p_value = float(2 * sps.t.sf(abs(e.estimate) / se, df))
    else:
        e.p_value = 0.0 if e.estimate != 0 else 1.0
    e.judged = True
    return e


def paired(groups: list[np.ndarray], *, confidence=CONFIDENCE) -> Effect:
    """The in-boot effect from per-boot block log ratios (module docstring):
    t on :func:`paired_df` degrees of freedom."""
    return _two_level(groups, confidence, "paired blocks", paired_df)


def level(groups: list[np.ndarray], *, confidence=CONFIDENCE) -> Effect:
    """A level (e.g. log ns per op) from per-boot block values: t on boots - 1
    degrees of freedom, since a level carries the whole boot-to-boot
    variance (the blocks' degrees of freedom would make it too narrow)."""
    return _two_level(groups, confidence, "level over boots", lambda est: len(est) - 1)


def boots(a: list[float], b: list[float], *, confidence=CONFIDENCE) -> Effect:
    """Kernel builds: per-boot normalized log values of side a against side b
    (Welch's t; module docstring)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    e = Effect(n_boots=(len(a), len(b)), method="boots (normalized)")
    if min(len(a), len(b)) < MIN_BOOTS:
        e.why = f"too few boots ({len(a)} vs {len(b)}; need {MIN_BOOTS} a side)"
        return e
    e.estimate = float(a.mean() - b.mean())
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    e.se = se
    if se == 0:
        e.low = e.high = e.estimate
        e.p_value = 0.0 if e.estimate != 0 else 1.0
        e.judged = True
        return e
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1) if va else 0) + (vb ** 2 / (len(b) - 1) if vb else 0))
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    e.low, e.high = e.estimate - q * se, e.estimate + q * se
    e.p_value = float(sps.ttest_ind(a, b, equal_var=False).pvalue)
    e.judged = True
    return e

"""The one verdict vocabulary, and the rules that give each verdict.

Every comparison the rig judges ends in one of four outcomes:

* ``slower`` / ``faster``: a change the data show (adjusted p below alpha and
  the interval excludes no change: :meth:`effects.Effect.significant`);
* ``equivalent``: no change as large as a margin (the whole interval inside
  +-margin: :func:`equivalent_within`, the one equivalence rule);
* ``inconclusive``: neither; more boots decide it.

`make bench` and the report name them so (:func:`effect_verdict`). `make
regress`, `make bench-series` and `make bisect` judge a commit's change
against a threshold and name the same four outcomes as a commit's change
(regression, improvement, no change, could not judge: :func:`commit_change`).
The window-level verdict of a Mann-Whitney test (:func:`window_verdict`: the
guest A/A test) has no margin: its third outcome is ``no significant
difference``.

A verdict takes a p-value adjusted over its family (:func:`adjust`: Holm or
Benjamini-Hochberg, statsmodels). These words are defined here and nowhere
else (tests/analysis/test_verdicts.py checks the package for them).
"""
from __future__ import annotations

import math

import numpy as np
from statsmodels.stats.multitest import multipletests

from ..defaults import ALPHA, CORRECTIONS
from ..errors import QrwbenchError
from . import effects

SLOWER, FASTER, EQUIVALENT, INCONCLUSIVE = "slower", "faster", "equivalent", "inconclusive"
JUDGED = (SLOWER, FASTER, EQUIVALENT)
KINDS = (*JUDGED, INCONCLUSIVE)

# The same outcomes as a commit's change (regress, bench-series, bisect).
REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_JUDGED = (
    "regression", "improvement", "no change", "could not judge")

# A window-level test without an equivalence margin (window_verdict).
NO_DIFF = "no significant difference"


def adjust(pvalues, *, alpha=ALPHA, correction="holm") -> np.ndarray:
    """Adjusted p-values (Holm or Benjamini-Hochberg) via statsmodels."""
    if correction not in CORRECTIONS:
        raise QrwbenchError(f"unknown correction {correction!r} (use holm or bh)")
    p = np.asarray(pvalues, dtype=float)
    if len(p) <= 1:         # a family of one: both methods leave p as it is
        return p
    return multipletests(p, alpha=alpha, method=CORRECTIONS[correction])[1]


def equivalent_within(low_pct: float, high_pct: float, margin_pct: float) -> float | None:
    """The equivalence rule: when the whole interval [low_pct, high_pct]
    (percent change) lies strictly inside +-margin_pct, so that a change of
    the margin's size is excluded, its larger bound m (the claim is then
    "within +-m %", exactly what the interval shows); else None. A 95 % CI
    inside the margin is a TOST at alpha 0.025 per side."""
    m = max(abs(low_pct), abs(high_pct))
    return m if m < margin_pct else None


def equivalent_text(m: float) -> str:
    """The words of :func:`equivalent_within`'s verdict, m rounded up."""
    return f"{EQUIVALENT} within +-{math.ceil(m * 10) / 10:.1f} %"


def effect_verdict(e: effects.Effect, p_adjusted: float, *, alpha: float,
                   margin_pct: float) -> tuple[str, str]:
    """(kind, text) of a comparison of `make bench`: "slower by x % [lo, hi]",
    "faster by ..." (significant), "equivalent within +-m %"
    (:func:`equivalent_within` at ``margin_pct``), else "inconclusive (CI +-y
    %)", or "inconclusive: <why>" when ``e`` was not judged."""
    if not e.judged:
        return INCONCLUSIVE, f"{INCONCLUSIVE}: {e.why}"
    lo, mid, hi = effects.pct(e.low), effects.pct(e.estimate), effects.pct(e.high)
    if e.significant(p_adjusted, alpha):
        kind = FASTER if e.estimate > 0 else SLOWER
        return kind, f"{kind} by {abs(mid):.1f} % [{lo:+.1f}, {hi:+.1f}]"
    m = equivalent_within(lo, hi, margin_pct)
    if m is not None:
        return EQUIVALENT, equivalent_text(m)
    return INCONCLUSIVE, f"{INCONCLUSIVE} (CI +-{e.half_width_pct:.1f} %)"


def commit_change(e: effects.Effect, p_adjusted: float, *, alpha: float,
                  threshold: float) -> tuple[str, str]:
    """(status, why) of a commit's change (``e``: target against base, judged;
    ``threshold`` a fraction). No change when the whole CI lies inside
    +-threshold (:func:`equivalent_within`); a regression (improvement) when
    significant and at least ``threshold`` slower (faster); anything else
    could not be judged: the CI holds both no change and a threshold-sized
    one, or the change is significant, smaller than the threshold, and its
    CI reaches it. Regressions and improvements have no ``why``."""
    low, high = effects.pct(e.low), effects.pct(e.high)
    m = equivalent_within(low, high, threshold * 100)
    if m is not None:
        return NO_CHANGE, equivalent_text(m)
    significant = e.significant(p_adjusted, alpha)
    if significant and e.ratio <= 1.0 - threshold:
        return REGRESSION, ""
    if significant and e.ratio >= 1.0 + threshold:
        return IMPROVEMENT, ""
    what = ("a change smaller than the threshold whose CI reaches it" if significant
            else f"includes both no change and a {threshold:.0%} change")
    return NOT_JUDGED, (f"{effects.pct(e.estimate):+.1f} % [{low:+.1f}, {high:+.1f}] {what}: "
                        "measure more boots")


def window_verdict(t, p_adjusted: float, *, alpha=ALPHA, min_effect=0.0) -> str:
    """Verdict of a window-level test (:func:`windows.compare_samples`): faster
    or slower when :meth:`windows.Test.significant` at ``p_adjusted`` and the
    change is at least ``min_effect`` (a fraction), else "no significant
    difference"; "could not judge: <why>" when not judged."""
    if not t.judged:
        return f"{NOT_JUDGED}: {t.why}"
    if t.significant(p_adjusted, alpha) and abs(t.ratio - 1.0) >= min_effect:
        return FASTER if t.ratio > 1.0 else SLOWER
    return NO_DIFF

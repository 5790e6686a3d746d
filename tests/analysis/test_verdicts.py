"""verdicts: one vocabulary, one equivalence rule, one per-boot normalisation."""

import ast
import math
from pathlib import Path

import numpy as np
import pytest

import synth
from qrwbench.analysis import compare, effects, perboot, verdicts
from qrwbench.report import regress
from qrwbench.run import ktree

PACKAGE = Path(__file__).resolve().parents[2] / "analysis" / "qrwbench"
WORDS = {verdicts.SLOWER, verdicts.FASTER, verdicts.EQUIVALENT, verdicts.INCONCLUSIVE,
         verdicts.REGRESSION, verdicts.IMPROVEMENT, verdicts.NO_CHANGE, verdicts.NOT_JUDGED,
         verdicts.NO_DIFF}


def test_the_verdict_words_are_written_only_in_the_vocabulary_module():
    """No module but verdicts.py spells a verdict word as a string of its own
    (a constant, a dict key, a comparison, a piece of an f-string): a second
    vocabulary would start so."""
    hits = []
    for p in sorted(PACKAGE.rglob("*.py")):
        if p.name == "verdicts.py":
            continue
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value.strip().lower() in WORDS):
                hits.append(f"{p.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert hits == []


def _effect(low_pct, high_pct, p=0.5):
    if math.isinf(high_pct - low_pct):      # one boot: no interval over boots
        return effects.Effect(estimate=0.0, low=-math.inf, high=math.inf, judged=True)
    lo, hi = math.log1p(low_pct / 100), math.log1p(high_pct / 100)
    return effects.Effect(estimate=(lo + hi) / 2, low=lo, high=hi, p_value=p, judged=True)


@pytest.mark.parametrize("low, high, equivalent", [
    (-3.0, 2.5, True), (-4.9, 4.9, True), (-5.1, 1.0, False), (-1.0, 5.1, False),
    (-7.0, 1.0, False), (-math.inf, math.inf, False)])
def test_bench_and_regress_apply_one_equivalence_rule(low, high, equivalent):
    """The margin of make bench and the threshold of make regress are one
    rule: the whole CI strictly inside +-margin, with the same words."""
    e = _effect(low, high)
    kind, text = verdicts.effect_verdict(e, 0.5, alpha=0.05, margin_pct=5.0)
    status, why = verdicts.commit_change(e, 0.5, alpha=0.05, threshold=0.05)
    assert (kind == verdicts.EQUIVALENT) == equivalent == (status == verdicts.NO_CHANGE)
    if equivalent:
        assert text == why == verdicts.equivalent_text(max(abs(effects.pct(e.low)),
                                                            abs(effects.pct(e.high))))
        assert text.startswith("equivalent within +-")
    else:
        assert status == verdicts.NOT_JUDGED and why.endswith("measure more boots")


def test_commit_change_words():
    slow = _effect(-14.0, -8.0, p=1e-6)
    assert verdicts.commit_change(slow, 1e-6, alpha=0.05, threshold=0.05) == (
        verdicts.REGRESSION, "")
    assert verdicts.effect_verdict(slow, 1e-6, alpha=0.05, margin_pct=5.0)[0] == verdicts.SLOWER
    fast = _effect(8.0, 14.0, p=1e-6)
    assert verdicts.commit_change(fast, 1e-6, alpha=0.05, threshold=0.05)[0] == \
        verdicts.IMPROVEMENT
    small = _effect(-6.0, -1.0, p=1e-3)     # significant, smaller than 5 %, CI reaches it
    status, why = verdicts.commit_change(small, 1e-3, alpha=0.05, threshold=0.05)
    assert status == verdicts.NOT_JUDGED and "smaller than the threshold" in why


def test_compare_cells_and_compare_commits_agree_on_kernel_builds():
    """The same boots of two identical kernels, judged by make bench (kernel
    builds, margin 10 %) and by make regress (threshold 10 %): the same
    per-boot values, effect and equivalence words."""
    rng = np.random.default_rng(21)
    base = synth.kernel_boots(rng, "acqrel", 5, boot_cv=0.02)
    target = synth.kernel_boots(rng, "full", 5, boot_cv=0.02)
    (c,) = [c for c in compare.compare_cells(base + target).comparisons
            if c.cell.impl == "kernel"]
    relabelled = [dict(s, variant="acqrel") if s["impl"] == "kernel" else s for s in target]
    (r,) = [r for r in regress.compare_commits(relabelled, base, threshold=0.10)
            if r.cell.impl == "kernel"]
    assert c.effect.estimate == pytest.approx(r.effect.estimate, abs=1e-12)
    assert c.kind == verdicts.EQUIVALENT and r.status == verdicts.NO_CHANGE
    assert c.verdict == r.why


def test_ratio_samples_are_the_one_per_boot_normalisation():
    """bisect's and bench-series' kernel/module ratio of a boot is the boot's
    normalized value (perboot.boot_ratio), stored x RATIO_SCALE."""
    rng = np.random.default_rng(3)
    s = synth.kernel_boots(rng, "acqrel", 4, reps=12) + synth.kernel_boots(rng, "full", 2, reps=7)
    reps = perboot.group_reps(s, copy=0)
    want = {}
    for cell, variants in reps.items():
        if cell.impl == "kernel":
            for runs in variants.values():
                vals, normalized = perboot.boot_values(runs, perboot.reference_runs(reps, cell))
                assert normalized
                want.update(zip(sorted(runs), np.exp(vals) * ktree.RATIO_SCALE))
    got = ktree.ratio_samples(s)
    assert {x["run_id"]: x["throughput"] for x in got} == pytest.approx(want, rel=1e-12)
    assert {(x["impl"], x["variant"], x["rep"]) for x in got} == {
        (ktree.RATIO_IMPL, ktree.KERNEL_VARIANT, 0)}
    # a known ratio: every block of the kernel 0.8 x the module's, whatever
    # the boot's speed, stores 0.8 (x RATIO_SCALE) per boot
    known = synth.kernel_boots(rng, "full", 3, factor=0.8, boot_cv=0.3, cv=0.0)
    got = ktree.ratio_samples(known)
    assert len(got) == 3 and all(x["throughput"] == pytest.approx(0.8 * ktree.RATIO_SCALE)
                                 for x in got)
    # a boot without the module's copy has no ratio
    assert ktree.ratio_samples(synth.kernel_boots(rng, "acqrel", 2, with_reference=False)) == []

"""stats: known effects are found with the right sign and CI, null effects stay at alpha."""

import math

import numpy as np
import pytest
from scipy import stats as sps

import synth
from qrwbench import stats
from qrwbench.errors import QrwbenchError

ALPHA = 0.05


def _samples(rng, *, factors=None, reps=12, cv=0.03, copy_factor=1.0, cells=1,
             run_id="run", variants=None):
    out = []
    for k in range(cells):
        recs = synth.results(rng=rng, factors=factors, reps=reps, cv=cv,
                             copy_factor=copy_factor, op=f"op{k}", variants=variants)
        for r in recs:
            out.append({"arch": "x86_64", "accel": "tcg", "cpu_model": "qemu64", "vcpus": 2,
                        "workload": r["workload"], "impl": r["impl"], "op": r["op"],
                        "placement": r["placement"], "params": "{}", "variant": r["variant"],
                        "copy": r["copy"], "run_id": run_id, "started_at": "",
                        "throughput": r["ops"] * 1e9 / r["ns"],
                        "per_thread_ops": r["per_thread_ops"]})
    return out


def _upper(n, p=ALPHA, level=0.001):
    """Largest false-positive count still consistent with rate p (binomial, 0.1 %)."""
    return int(sps.binom.ppf(1 - level, n, p))


@pytest.mark.parametrize("factor", [1.10, 0.90])
def test_known_ten_percent_effect_is_detected(factor):
    rng = np.random.default_rng(11)
    cset = stats.compare_cells(_samples(rng, factors={"relaxed": factor}))
    (c,) = [c for c in cset.comparisons if c.variant == "relaxed"]
    assert c.verdict == (stats.FASTER if factor > 1 else stats.SLOWER)
    assert c.test.ratio_low <= factor <= c.test.ratio_high
    assert np.sign(c.test.pct_change) == np.sign(factor - 1)
    assert np.sign(c.test.cliffs_delta) == np.sign(factor - 1)
    assert c.test.mde < abs(factor - 1)
    others = [c for c in cset.comparisons if c.variant != "relaxed"]
    assert others and all(o.verdict == stats.NO_DIFF for o in others)


def test_ten_percent_effect_over_seeds():
    """Detected with the right sign every time; the CI covers the truth about 95 %."""
    trials, covered = 20, 0
    for seed in range(trials):
        a = synth.results(rng=np.random.default_rng(seed), factors={"relaxed": 1.1},
                          reps=10, cv=0.03, variants=("full", "relaxed"), copies=(0,))
        x = [r["ops"] for r in a if r["variant"] == "relaxed"]
        y = [r["ops"] for r in a if r["variant"] == "full"]
        t = stats.compare_samples(x, y, seed=seed, n_resamples=1000)
        assert stats.verdict(t, t.p_value) == stats.FASTER
        covered += t.ratio_low <= 1.1 <= t.ratio_high
    assert covered >= sps.binom.ppf(0.001, trials, 0.95)


def test_identical_distributions_false_positive_rate_at_most_alpha():
    trials, fp = 200, 0
    rng = np.random.default_rng(2024)
    for i in range(trials):
        s = _samples(rng, reps=10, cv=0.05, variants=("full", "relaxed"))
        cset = stats.compare_cells(s, n_resamples=300, seed=i)
        fp += sum(c.verdict != stats.NO_DIFF for c in cset.comparisons)
    assert fp <= _upper(trials)


def test_holm_and_bh_adjust_over_the_whole_matrix():
    rng = np.random.default_rng(5)
    s = _samples(rng, reps=10, cv=0.05, cells=6, variants=("full", "relaxed"))
    real = _samples(rng, reps=10, cv=0.02, factors={"relaxed": 1.10}, cells=1,
                    variants=("full", "relaxed"))
    s += [dict(r, op="real") for r in real]
    holm = stats.compare_cells(s, correction="holm", n_resamples=300)
    bh = stats.compare_cells(s, correction="bh", n_resamples=300)
    assert len(holm.comparisons) == 7
    for h, b in zip(holm.comparisons, bh.comparisons):
        assert h.p_adjusted >= h.test.p_value
        assert b.p_adjusted <= h.p_adjusted + 1e-12
        assert (h.verdict == stats.FASTER) == (h.cell.op == "real")
    # one test alone would use the raw p: adjusting must have raised it
    alone = stats.compare_cells(real, n_resamples=300).comparisons[0]
    found = [h for h in holm.comparisons if h.cell.op == "real"][0]
    assert found.p_adjusted > alone.p_adjusted
    with pytest.raises(QrwbenchError):
        stats.compare_cells(s, correction="bonferroni-ish")


def test_min_effect_turns_small_real_effects_into_no_difference():
    rng = np.random.default_rng(9)
    s = _samples(rng, reps=30, cv=0.01, factors={"relaxed": 1.03},
                 variants=("full", "relaxed"))
    (c,) = stats.compare_cells(s).comparisons
    assert c.verdict == stats.FASTER
    (c,) = stats.compare_cells(s, min_effect=0.05).comparisons
    assert c.verdict == stats.NO_DIFF


def test_missing_baseline_and_empty_selection_are_errors():
    rng = np.random.default_rng(1)
    s = _samples(rng, variants=("acquire", "relaxed"))
    with pytest.raises(QrwbenchError, match="baseline variant 'full'.*acquire, relaxed"):
        stats.compare_cells(s)
    with pytest.raises(QrwbenchError, match="empty selection"):
        stats.compare_cells([])
    ok = stats.compare_cells(s, baselines={"atomics": "acquire"}, n_resamples=200)
    assert [c.variant for c in ok.comparisons] == ["relaxed"]
    assert stats.parse_baselines(["atomics=acquire"])["atomics"] == "acquire"
    with pytest.raises(QrwbenchError):
        stats.parse_baselines(["atomics"])


def test_too_few_samples_could_not_judge():
    t = stats.compare_samples([1.0, 2.0], [1.0, 2.0, 3.0])
    assert not t.judged
    assert stats.verdict(t, math.nan).startswith("could not judge")


def test_mde_follows_noise_and_sample_size():
    small = stats.mde(0.02, 0.02, 20, 20)
    assert stats.mde(0.04, 0.04, 20, 20) == pytest.approx(2 * small)
    assert stats.mde(0.02, 0.02, 80, 80) == pytest.approx(small / 2)
    assert math.isinf(stats.mde(0.02, 0.02, 3, 3))        # min p of 3 vs 3 is 0.1


def test_cliffs_delta_extremes():
    t = stats.compare_samples([5, 6, 7, 8], [1, 2, 3, 4])
    assert t.cliffs_delta == 1.0
    t = stats.compare_samples([1, 2, 3, 4], [5, 6, 7, 8])
    assert t.cliffs_delta == -1.0


def test_aa_identical_copies_stay_at_alpha_and_injected_cost_is_found():
    rng = np.random.default_rng(77)
    null = stats.aa_control(_samples(rng, reps=10, cv=0.05, cells=60), n_resamples=300)
    assert null.n_judged == 240
    assert null.n_significant <= _upper(null.n_judged)
    injected = stats.aa_control(_samples(rng, reps=10, cv=0.02, copy_factor=0.9, cells=2),
                                n_resamples=300)
    assert injected.n_judged == 8 and injected.n_significant == 8
    assert all(r.test.ratio < 1 for r in injected.results)


def test_aa_compares_boots():
    rng = np.random.default_rng(4)
    s = _samples(rng, run_id="b1", reps=6) + _samples(rng, run_id="b2", reps=6)
    aa = stats.aa_control(s, n_resamples=200)
    assert sum(r.kind == "boot" for r in aa.results) == 4
    assert sum(r.kind == "copy" for r in aa.results) == 4


def test_within_boot_cv_measures_the_noise():
    rng = np.random.default_rng(8)
    low = stats.within_boot_cv(_samples(rng, reps=40, cv=0.01))
    high = stats.within_boot_cv(_samples(rng, reps=40, cv=0.08))
    assert all(0.005 < r["within_cv"] < 0.02 for r in low)
    assert all(0.05 < r["within_cv"] < 0.12 for r in high)


def test_fairness():
    assert stats.jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert stats.jain_index([8, 0, 0, 0]) == pytest.approx(0.25)
    f = stats.fairness([10, 5])
    assert f["min_max"] == 0.5 and f["min"] == 5 and f["max"] == 10
    rows = stats.run_fairness(_samples(np.random.default_rng(1), reps=3))
    assert rows and all(0.5 < r["jain"] <= 1.0 for r in rows)


def test_stability_rule():
    assert stats.stable_samples([100, 101, 99, 100])[0]
    ok, why = stats.stable_samples([100, 130, 100, 100])
    assert not ok and "gap" in why
    ok, why = stats.stable_samples([100, 101])
    assert not ok and "too few" in why


def test_stability_rule_sets_aside_one_outlier_in_ten():
    # the CI case: nine boots at 0.68-0.72, one at 0.89 (min-max gap 30 %)
    x = [0.684, 0.69, 0.692, 0.695, 0.696, 0.7, 0.705, 0.709, 0.716, 0.893]
    assert stats.stable_samples(x) == (True, "")
    # the same outlier fails the rule with fewer than 5 samples (no fences)
    ok, why = stats.stable_samples([0.69, 0.70, 0.71, 0.893])
    assert not ok and "gap" in why
    # more than a fifth outside the fences is not "an outlier": still unstable
    ok, why = stats.stable_samples([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 1.4, 1.45, 1.5])
    assert not ok and "gap" in why
    # a spread that is wide everywhere is not rescued by the fences
    ok, why = stats.stable_samples([0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2])
    assert not ok and "outlier" not in why


def test_samples_separate_rule():
    assert stats.samples_separate([10, 11, 12], [20, 21, 22])
    assert stats.samples_separate([20, 21, 22], [10, 11, 12])
    assert not stats.samples_separate([10, 11, 20], [12, 13, 14])
    assert not stats.samples_separate([10, 11], [20, 21])


def _history(levels, n=5, cv=0.02, seed=0):
    rng = np.random.default_rng(seed)
    return [lvl * rng.lognormal(0, cv, n) for lvl in levels]


def test_change_point_found_at_the_step():
    series = _history([100] * 6 + [88] * 5)
    assert stats.change_points(series) == [6]


def test_two_steps_and_no_step():
    assert stats.change_points(_history([100] * 4 + [120] * 4 + [100] * 4, seed=3)) == [4, 8]
    for seed in range(10):
        assert stats.change_points(_history([100] * 10, seed=seed)) == []


def test_aa_pairs_too_small_to_reach_alpha_are_not_counted():
    rng = np.random.default_rng(12)
    aa = stats.aa_control(_samples(rng, reps=3, copy_factor=0.5), n_resamples=100)
    assert aa.results and aa.n_judged == 0 and math.isnan(aa.rate)
    assert all("cannot reach alpha" in r.test.why for r in aa.results)


def _boots(rng, variant, n_boots, *, factor=1.0, boot_cv=0.10, cv=0.01, reps=20):
    """Windows of ``n_boots`` boots of one kernel variant (impl kernel): each
    boot has its own speed (CV ``boot_cv``), its windows a small CV."""
    out = []
    for b in range(n_boots):
        speed = factor * rng.lognormal(0.0, boot_cv)
        for s in _samples(rng, reps=reps, cv=cv, variants=(variant,), run_id=f"{variant}-{b}",
                          factors={variant: speed}, copy_factor=1.0):
            if s["copy"] == 0:
                out.append(dict(s, workload="rwlock", impl="kernel", op="rwlock"))
    return out


def test_variants_from_different_boots_are_compared_boot_by_boot():
    """Identical kernels, boots differing by 10 %: pooling the windows of 5
    boots a side would call that significant; one median per boot does not."""
    rng = np.random.default_rng(5)
    s = _boots(rng, "acqrel", 5) + _boots(rng, "full", 5)
    (c,) = stats.compare_cells(s).comparisons
    assert c.test.unit == "boot" and (c.test.n_a, c.test.n_b) == (5, 5)
    assert c.verdict == stats.NO_DIFF, (c.test.p_value, c.test.ratio)
    a = [x["throughput"] for x in s if x["variant"] == "full"]
    b = [x["throughput"] for x in s if x["variant"] == "acqrel"]
    assert stats.compare_samples(a, b).p_value < 0.001     # what window pooling would say
    # a real 40 % difference is still found from 5 boots a side
    s = _boots(rng, "acqrel", 5) + _boots(rng, "full", 5, factor=0.6)
    (c,) = stats.compare_cells(s).comparisons
    assert c.test.unit == "boot" and c.verdict == stats.SLOWER


def test_two_boots_a_side_cannot_judge_kernel_builds():
    rng = np.random.default_rng(6)
    s = _boots(rng, "acqrel", 2) + _boots(rng, "full", 2, factor=0.5)
    (c,) = stats.compare_cells(s).comparisons
    assert not c.test.judged and "too few boots (n=2 vs 2" in c.verdict
    s = _boots(rng, "acqrel", 3) + _boots(rng, "full", 3, factor=0.5)
    (c,) = stats.compare_cells(s).comparisons
    assert not c.test.judged and "3 vs 3 boots cannot reach alpha" in c.verdict


def test_variants_of_the_same_boots_are_compared_window_by_window():
    rng = np.random.default_rng(7)
    s = _samples(rng, factors={"relaxed": 0.9}, run_id="r0") + \
        _samples(rng, factors={"relaxed": 0.9}, run_id="r1")
    (c,) = [c for c in stats.compare_cells(s).comparisons if c.variant == "relaxed"]
    assert c.test.unit == "window" and c.test.n_a == 24 and c.verdict == stats.SLOWER

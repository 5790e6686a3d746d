"""stats: known effects are found with the right sign and CI, null effects stay at alpha."""

import math
import re

import numpy as np
import pytest
from scipy import stats as sps

import synth
from qrwbench.analysis import (calibration, changepoints, compare, effects, fairness, noise,
                               verdicts, windows)
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
    # 4 boots: where 2 boots' locations scatter more than their blocks explain,
    # the interval has 1 degree of freedom (effects.paired_df)
    cset = compare.compare_cells(synth.samples(rng, boots=4, factors={"relaxed": factor}))
    (c,) = [c for c in cset.comparisons if c.variant == "relaxed"]
    assert c.kind == (verdicts.FASTER if factor > 1 else verdicts.SLOWER)
    assert c.verdict.startswith(f"{c.kind} by {abs(factor - 1) * 100:.0f}") or \
        abs(abs(c.test.pct_change) - 10) < 2, c.verdict
    assert c.test.ratio_low <= factor <= c.test.ratio_high
    assert c.test.unit == "block" and c.test.n_a == 40
    others = [c for c in cset.comparisons if c.variant != "relaxed"]
    assert others and all(o.kind == verdicts.EQUIVALENT for o in others), \
        [o.verdict for o in others]
    assert all(o.verdict.startswith("equivalent within +-") for o in others)


def test_ci_coverage_is_near_nominal_over_seeds():
    """A true -3 % effect, 2 boots x 8 blocks, window CV 3 %, a small boot
    effect on the ratio: the 95 % interval covers the truth 90-99 % of 300
    seeded trials."""
    trials, covered = 300, 0
    truth = math.log(0.97)
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        groups = [rng.normal(truth + rng.normal(0, 0.003), 0.03, 8) for _ in range(2)]
        e = effects.paired(groups)
        covered += e.low <= truth <= e.high
    assert 0.90 * trials <= covered <= 0.99 * trials, covered


def _contaminated(rng, n, truth=0.0):
    """Block log ratios as a shared host makes them: 80 % of blocks with a
    5 % SD, 20 % hit by a preemption (35 % SD)."""
    return truth + np.where(rng.random(n) < 0.2, rng.normal(0, 0.35, n), rng.normal(0, 0.05, n))


@pytest.mark.parametrize("boots,blocks", [(2, 10), (6, 32)])
def test_trimmed_boot_means_cover_and_are_narrower_on_preempted_blocks(boots, blocks):
    """Heavy-tailed blocks (as measured: docs/validity.md): the 20 % trimmed
    boot means keep the interval's coverage near 95 % over 400 seeds and
    make it about half as wide as the plain means would."""
    truth = math.log(0.97)
    covered, widths = 0, []
    for seed in range(400):
        rng = np.random.default_rng(seed)
        groups = [_contaminated(rng, blocks, truth) for _ in range(boots)]
        e = effects.paired(groups)
        covered += e.low <= truth <= e.high
        widths.append(e.half_width_pct)
        if seed < 100:
            plain = effects.TRIM
            try:
                effects.TRIM = 0.0
                widths[-1] /= effects.paired(groups).half_width_pct
            finally:
                effects.TRIM = plain
        else:
            widths.pop()
    assert 0.92 * 400 <= covered <= 0.99 * 400, covered
    assert np.median(widths) < 0.6, np.median(widths)


def test_boot_estimate_cuts_only_long_boots():
    g = np.array([0.0] * 9 + [5.0])
    assert effects.boot_estimate(g)[0] == 0.0 and effects.boot_estimate(g)[2] == 6
    assert effects.boot_estimate(g[1:])[0] == pytest.approx(5.0 / 9)     # 9 blocks: plain mean


def test_variance_components_split_within_and_between_boots():
    rng = np.random.default_rng(5)
    # 400 boots of 32 blocks: block SD 4 %, boot means 3 % apart
    groups = [rng.normal(rng.normal(0, 0.03), 0.04, 32) for _ in range(400)]
    within, between = effects.variance_components(groups)
    assert math.sqrt(within) == pytest.approx(0.04, rel=0.03)
    assert math.sqrt(between) == pytest.approx(0.03, rel=0.12)
    # no between-boot part: the floor at 0, not a negative variance
    flat = [rng.normal(0, 0.04, 32) for _ in range(400)]
    assert effects.variance_components(flat)[1] < 0.004 ** 2
    assert effects.variance_components(groups[:1]) is None
    assert effects.variance_components([np.array([0.1]), np.array([0.2])]) is None


def test_equivalent_for_no_effect_and_not_for_a_five_percent_effect():
    """Over 40 seeds: no effect is "equivalent" except where the 5 % error
    rate of the test made it significant (at most the binomial 99.9 % bound
    of those), a true -5 % effect is never "equivalent" and is "slower" in at
    least 95 %."""
    kinds0, kinds5 = [], []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        for factor, kinds in ((1.0, kinds0), (0.95, kinds5)):
            s = synth.samples(rng, boots=4, reps=10, cv=0.02, variants=("full", "relaxed"),
                    factors={"relaxed": factor})
            (c,) = compare.compare_cells(s, n_resamples=400).comparisons
            kinds.append(c.kind)
    assert kinds0.count(verdicts.EQUIVALENT) >= 40 - _upper(40), kinds0
    assert verdicts.EQUIVALENT not in kinds5 and kinds5.count(verdicts.SLOWER) >= 38, kinds5


def test_slow_phases_of_the_host_cancel_in_paired_blocks():
    """Every block moves by 20 % (a loaded host), the windows by 1 %: a 3 %
    effect is found with a CI of about +-1 %, where unpaired windows could
    not tell it."""
    rng = np.random.default_rng(3)
    s = synth.samples(rng, boots=4, reps=10, cv=0.01, block_cv=0.20, variants=("full", "relaxed"),
            factors={"relaxed": 1.03})
    (c,) = compare.compare_cells(s).comparisons
    assert c.kind == verdicts.FASTER and c.effect.half_width_pct < 2.0, c.verdict
    a = [x["throughput"] for x in s if x["variant"] == "relaxed" and x["copy"] == 0]
    b = [x["throughput"] for x in s if x["variant"] == "full" and x["copy"] == 0]
    assert not windows.compare_samples(a, b).p_value < 0.05      # what unpaired windows say


def test_identical_distributions_false_positive_rate_at_most_alpha():
    trials, fp = 200, 0
    rng = np.random.default_rng(2024)
    for i in range(trials):
        s = synth.samples(rng, reps=10, cv=0.05, variants=("full", "relaxed"))
        cset = compare.compare_cells(s, n_resamples=300, seed=i)
        fp += sum(c.kind in (verdicts.FASTER, verdicts.SLOWER) for c in cset.comparisons)
    assert fp <= _upper(trials)


def test_holm_and_bh_adjust_per_family():
    rng = np.random.default_rng(5)
    s = []
    for k in range(6):
        s += synth.samples(rng, reps=10, cv=0.05, variants=("full", "relaxed"), op=f"op{k}")
    s += synth.samples(rng, reps=10, cv=0.02, factors={"relaxed": 1.10}, variants=("full", "relaxed"),
             op="real")
    other = synth.samples(rng, reps=10, cv=0.05, variants=("full", "relaxed"), arch="arm64")
    holm = compare.compare_cells(s + other, correction="holm", n_resamples=300)
    bh = compare.compare_cells(s + other, correction="bh", n_resamples=300)
    assert len(holm.comparisons) == 8
    for h, b in zip(holm.comparisons, bh.comparisons):
        assert h.p_adjusted >= h.test.p_value
        assert b.p_adjusted <= h.p_adjusted + 1e-12
        assert (h.kind == verdicts.FASTER) == (h.cell.op == "real")
    # the arm64 comparison is a family of its own: its p is not adjusted
    (arm,) = [h for h in holm.comparisons if h.cell.arch == "arm64"]
    assert arm.p_adjusted == arm.test.p_value
    with pytest.raises(QrwbenchError):
        compare.compare_cells(s, correction="bonferroni-ish")


def test_min_effect_turns_small_real_effects_into_equivalent_or_inconclusive():
    rng = np.random.default_rng(9)
    s = synth.samples(rng, reps=30, cv=0.01, factors={"relaxed": 1.03}, variants=("full", "relaxed"))
    (c,) = compare.compare_cells(s).comparisons
    assert c.kind == verdicts.FASTER
    (c,) = compare.compare_cells(s, min_effect=0.05).comparisons
    assert c.kind == verdicts.EQUIVALENT and c.verdict.startswith("equivalent within +-3."), c.verdict


def test_missing_baseline_and_empty_selection_are_errors():
    rng = np.random.default_rng(1)
    s = synth.samples(rng, variants=("acquire", "relaxed"))
    with pytest.raises(QrwbenchError, match="baseline variant 'full'.*acquire, relaxed"):
        compare.compare_cells(s)
    with pytest.raises(QrwbenchError, match="empty selection"):
        compare.compare_cells([])
    ok = compare.compare_cells(s, baselines={"atomics": "acquire"}, n_resamples=200)
    assert [c.variant for c in ok.comparisons] == ["relaxed"]
    assert compare.parse_baselines(["atomics=acquire"])["atomics"] == "acquire"
    with pytest.raises(QrwbenchError):
        compare.parse_baselines(["atomics"])


def test_too_few_samples_could_not_judge():
    t = windows.compare_samples([1.0, 2.0], [1.0, 2.0, 3.0])
    assert not t.judged
    assert verdicts.window_verdict(t, math.nan).startswith("could not judge")


def test_mde_follows_noise_and_sample_size():
    small = windows.mde(0.02, 0.02, 20, 20)
    assert windows.mde(0.04, 0.04, 20, 20) == pytest.approx(2 * small)
    assert windows.mde(0.02, 0.02, 80, 80) == pytest.approx(small / 2)
    assert math.isinf(windows.mde(0.02, 0.02, 3, 3))        # min p of 3 vs 3 is 0.1


def test_cliffs_delta_extremes():
    t = windows.compare_samples([5, 6, 7, 8], [1, 2, 3, 4])
    assert t.cliffs_delta == 1.0
    t = windows.compare_samples([1, 2, 3, 4], [5, 6, 7, 8])
    assert t.cliffs_delta == -1.0


def test_aa_identical_copies_stay_at_alpha_and_injected_cost_is_found():
    rng = np.random.default_rng(77)
    null = []
    for k in range(60):
        null += synth.samples(rng, reps=10, cv=0.05, op=f"op{k}")
    aa = calibration.aa_control(null)
    assert aa.n_judged == 240
    assert aa.n_significant <= _upper(aa.n_judged)
    inj = []
    for k in range(2):
        inj += synth.samples(rng, boots=4, reps=10, cv=0.02, copy_factor=0.95, op=f"op{k}",
                   params='{"aa_inject_mb":1}', placement="percpu")
    rep = calibration.aa_control(inj)
    kinds = {r.kind for r in rep.results}
    assert kinds == {"inject"} and rep.n_judged == 0      # not counted as A/A
    assert calibration.calibration_line(rep).endswith("injected barrier detected 8 of 8")
    assert calibration.calibration_failed(rep) == []


def test_copies_that_differ_from_boot_to_boot_keep_aa_at_alpha():
    """Run Z1 of issue 26: two compiled copies of one op differ by a few
    percent in a boot, differently in each boot. Their A/A across 3 boots of
    10 blocks must stay at alpha: the interval's degrees of freedom are the
    boots' where the boots scatter more than their blocks explain
    (effects.paired_df). On the blocks' degrees of freedom alone, 52 of 240
    came out significant."""
    rng = np.random.default_rng(81)
    s = []
    for k in range(60):
        s += synth.samples(rng, boots=3, reps=10, cv=0.02, copy_boot_cv=0.03, op=f"op{k}")
    aa = calibration.aa_control(s)
    assert aa.n_judged == 240
    assert aa.n_significant <= _upper(aa.n_judged), aa.n_significant
    # ... and one bias common to every boot is still found
    s = []
    for k in range(10):
        s += synth.samples(rng, boots=3, reps=10, cv=0.02, copy_boot_cv=0.01,
                           copy_factor=0.90, op=f"op{k}")
    assert calibration.aa_control(s).n_significant >= 36


def test_an_injected_barrier_on_a_shared_line_is_shown_but_not_counted():
    """On a line both threads hit, a barrier may make the op faster (less
    line ping-pong): such a cell neither counts as a miss nor as a hit; the
    per-CPU cells of the same run are counted."""
    rng = np.random.default_rng(79)
    s = synth.samples(rng, reps=10, cv=0.02, copy_factor=1.08, params='{"aa_inject_mb":1}',
            placement="shared")
    s += synth.samples(rng, reps=10, cv=0.02, copy_factor=0.95, params='{"aa_inject_mb":1}',
             placement="percpu")
    aa = calibration.aa_control(s)
    shared = [r for r in aa.results if r.cell.placement == "shared"]
    assert len(shared) == 4 and all(r.significant and r.effect.estimate > 0 for r in shared)
    assert calibration.barrier_hits(aa) == (4, 4)
    assert calibration.calibration_failed(aa) == []
    one = calibration.aa_control(synth.samples(rng, reps=10, cv=0.02, copy_factor=1.0,
                                     params='{"aa_inject_mb":1,"threads":1}'))
    assert calibration.barrier_hits(one)[1] == 4          # one thread: its line is its own


def test_calibration_fails_when_the_barrier_is_missed_or_aa_is_too_often_significant():
    rng = np.random.default_rng(78)
    missed = calibration.aa_control(synth.samples(rng, boots=4, reps=10, cv=0.02, params='{"aa_inject_mb":1}', placement="percpu"))
    # no cost at all: found only where the test's 5 % error rate says "slower"
    assert re.search(r"detected in only [0-2] of 4", calibration.calibration_failed(missed)[0])
    biased = []
    for k in range(10):
        biased += synth.samples(rng, boots=4, reps=10, cv=0.01, copy_factor=0.95, op=f"op{k}")
    bad = calibration.aa_control(biased)
    assert "A/A false positives 40 of 40" in calibration.calibration_failed(bad)[0]


def test_calibration_names_the_targets_that_missed_and_what_one_barrier_costs_there():
    """x86_64: the injected barrier costs 5 % and smp_mb() 40 ns over the
    empty loop; arm64: neither costs anything. The failure says so per
    target, with the cost of smp_mb() measured in the same samples."""
    rng = np.random.default_rng(5)
    s = []
    for arch, inj, mb in (("x86_64", 0.95, 0.5), ("arm64", 1.0, 1.0)):
        s += synth.samples(rng, reps=10, cv=0.01, copy_factor=inj, arch=arch, params='{"aa_inject_mb":1}', placement="percpu")
        s += synth.samples(rng, reps=10, cv=0.01, op="smp_mb", arch=arch, variants=("full",),
                 factors={"full": mb}, copies=(0,))
        s += synth.samples(rng, reps=10, cv=0.01, op="empty", arch=arch, variants=("relaxed",), copies=(0,))
    aa = calibration.aa_control(s)
    assert aa.barrier_ns["x86_64/tcg/qemu64 2v"] == pytest.approx(40, rel=0.05)
    assert abs(aa.barrier_ns["arm64/tcg/qemu64 2v"]) < 2
    (why,) = calibration.calibration_failed(aa)
    assert re.search(r"detected in only [4-5] of 8 cells \(arm64/tcg/qemu64 2v [01] of 4, one "
                     r"smp_mb\(\) -?[01]\.\d ns; x86_64/tcg/qemu64 2v 4 of 4, one smp_mb\(\) "
                     r"(39|40|41)\.\d ns\)", why), why


def test_boot_level_aa_uses_the_normalized_kernel_values():
    """Boots of one kernel differing by 10 % in speed: normalized by the
    module copy in the same boot, the two halves agree."""
    rng = np.random.default_rng(4)
    s = synth.kernel_boots(rng, "acqrel", 6, boot_cv=0.10)
    aa = calibration.aa_control(s)
    (b,) = [r for r in aa.results if r.kind == "boot"]
    assert b.test.judged and not b.significant and (b.test.n_a, b.test.n_b) == (3, 3)


def test_within_boot_cv_measures_the_noise():
    rng = np.random.default_rng(8)
    low = noise.within_boot_cv(_samples(rng, reps=40, cv=0.01))
    high = noise.within_boot_cv(_samples(rng, reps=40, cv=0.08))
    assert all(0.005 < r["within_cv"] < 0.02 for r in low)
    assert all(0.05 < r["within_cv"] < 0.12 for r in high)


def test_fairness():
    assert fairness.jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert fairness.jain_index([8, 0, 0, 0]) == pytest.approx(0.25)
    f = fairness.fairness([10, 5])
    assert f["min_max"] == 0.5 and f["min"] == 5 and f["max"] == 10
    rows = fairness.run_fairness(_samples(np.random.default_rng(1), reps=3))
    assert rows and all(0.5 < r["jain"] <= 1.0 for r in rows)


def test_stability_rule():
    assert noise.stable_samples([100, 101, 99, 100])[0]
    ok, why = noise.stable_samples([100, 130, 100, 100])
    assert not ok and "gap" in why
    ok, why = noise.stable_samples([100, 101])
    assert not ok and "too few" in why


def test_stability_rule_sets_aside_one_outlier_in_ten():
    # the CI case: nine boots at 0.68-0.72, one at 0.89 (min-max gap 30 %)
    x = [0.684, 0.69, 0.692, 0.695, 0.696, 0.7, 0.705, 0.709, 0.716, 0.893]
    assert noise.stable_samples(x) == (True, "")
    # the same outlier fails the rule with fewer than 5 samples (no fences)
    ok, why = noise.stable_samples([0.69, 0.70, 0.71, 0.893])
    assert not ok and "gap" in why
    # more than a fifth outside the fences is not "an outlier": still unstable
    ok, why = noise.stable_samples([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 1.4, 1.45, 1.5])
    assert not ok and "gap" in why
    # a spread that is wide everywhere is not rescued by the fences
    ok, why = noise.stable_samples([0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2])
    assert not ok and "outlier" not in why


def test_samples_separate_rule():
    assert noise.samples_separate([10, 11, 12], [20, 21, 22])
    assert noise.samples_separate([20, 21, 22], [10, 11, 12])
    assert not noise.samples_separate([10, 11, 20], [12, 13, 14])
    assert not noise.samples_separate([10, 11], [20, 21])


def _history(levels, n=5, cv=0.02, seed=0):
    rng = np.random.default_rng(seed)
    return [lvl * rng.lognormal(0, cv, n) for lvl in levels]


def test_change_point_found_at_the_step():
    series = _history([100] * 6 + [88] * 5)
    assert changepoints.change_points(series) == [6]


def test_two_steps_and_no_step():
    assert changepoints.change_points(_history([100] * 4 + [120] * 4 + [100] * 4, seed=3)) == [4, 8]
    for seed in range(10):
        assert changepoints.change_points(_history([100] * 10, seed=seed)) == []


def test_kernel_builds_are_compared_through_the_in_boot_reference():
    """Identical kernels, boots differing by 10 %: the normalized per-boot
    values agree (equivalent); a real 5 % difference is found from 4 boots a
    side; raw per-boot throughputs could tell neither."""
    rng = np.random.default_rng(5)
    s = synth.kernel_boots(rng, "acqrel", 4) + synth.kernel_boots(rng, "full", 4)
    (c,) = [c for c in compare.compare_cells(s).comparisons if c.cell.impl == "kernel"]
    assert c.level == "kernel" and c.test.unit == "boot" and (c.test.n_a, c.test.n_b) == (4, 4)
    assert c.kind == verdicts.EQUIVALENT, c.verdict
    assert c.effect.method == "boots (normalized)"
    s = synth.kernel_boots(rng, "acqrel", 4) + synth.kernel_boots(rng, "full", 4, factor=0.95)
    (c,) = [c for c in compare.compare_cells(s).comparisons if c.cell.impl == "kernel"]
    assert c.kind == verdicts.SLOWER, c.verdict
    # without the module's copy in the boots: raw boot values, and no answer
    s = synth.kernel_boots(rng, "acqrel", 4, with_reference=False) + \
        synth.kernel_boots(rng, "full", 4, factor=0.95, with_reference=False)
    (c,) = compare.compare_cells(s).comparisons
    assert "not normalized" in c.effect.method and c.kind == verdicts.INCONCLUSIVE, c.verdict


def test_a_kernel_that_recompiles_the_reference_is_compared_unnormalized():
    """allfull builds every atomic fully ordered, the module's acqrel copy
    included: it slows with the kernel, so normalizing by it would call a
    20 % slower kernel equivalent (shown with a variant that does not
    recompile the module, 'full'); for allfull the raw boot values are used."""
    rng = np.random.default_rng(7)
    hazard = synth.kernel_boots(rng, "acqrel", 6, boot_cv=0.01) + \
        synth.kernel_boots(rng, "full", 6, factor=0.8, ref_factor=0.8, boot_cv=0.01)
    (c,) = [c for c in compare.compare_cells(hazard).comparisons if c.cell.impl == "kernel"]
    assert c.kind == verdicts.EQUIVALENT and c.effect.method == "boots (normalized)", c.verdict
    s = synth.kernel_boots(rng, "acqrel", 6, boot_cv=0.01) + \
        synth.kernel_boots(rng, "allfull", 6, factor=0.8, ref_factor=0.8, boot_cv=0.01)
    (c,) = [c for c in compare.compare_cells(s, baselines={"rwlock": "acqrel"}).comparisons
            if c.cell.impl == "kernel"]
    assert "recompiles the reference copy" in c.effect.method
    assert c.kind == verdicts.SLOWER and -25 < effects.pct(c.effect.estimate) < -15, c.verdict


def test_one_boot_a_side_cannot_judge_kernel_builds():
    rng = np.random.default_rng(6)
    s = synth.kernel_boots(rng, "acqrel", 1) + synth.kernel_boots(rng, "full", 1, factor=0.5)
    (c,) = [c for c in compare.compare_cells(s).comparisons if c.cell.impl == "kernel"]
    assert not c.test.judged and "too few boots (1 vs 1; need 2 a side)" in c.verdict
    assert c.verdict.startswith("inconclusive")


def test_summary_line_counts_every_kind():
    rng = np.random.default_rng(7)
    s = synth.samples(rng, factors={"relaxed": 0.9, "acquire": 1.1})
    cset = compare.compare_cells(s)
    line = cset.summary_line()
    assert line.startswith("comparisons: 3 judged of 3 distinguishable (slower 1, faster 1, "
                           "equivalent 1, inconclusive 0); emulator-blind 0, identical code 0; "
                           "median CI half-width in-boot ")
    assert line.endswith("kernel builds -")

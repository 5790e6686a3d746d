"""planner: the stopping rule gives more boots to the cells whose comparisons
are not yet precise enough, and stops every cell."""
import numpy as np

import synth
from qrwbench.analysis import compare, effects, planner
from qrwbench.cell import Cell

TARGETS = {"in-boot": 2.0, "kernel": 5.0}


def _run_cell(samples, key):
    return {s["run_id"]: key for s in samples}


def test_a_noisy_cell_gets_more_boots_and_a_quiet_one_stops_at_its_target():
    rng = np.random.default_rng(1)
    quiet = synth.samples(rng, boots=2, reps=10, cv=0.005, variants=("full", "relaxed"), op="quiet",
                run_prefix="q")
    noisy = synth.samples(rng, boots=2, reps=10, cv=0.10, variants=("full", "relaxed"), op="noisy",
                run_prefix="n")
    run_cell = {**_run_cell(quiet, "Q"), **_run_cell(noisy, "N")}
    plan = planner.Plan(TARGETS, max_boots=6, budget_s=1e9)
    plan.state("Q").boots = plan.state("N").boots = 2
    cset = compare.compare_cells(quiet + noisy, n_resamples=300)
    keys = planner.next_round(plan, cset, run_cell)
    # CV 10 % over 2 x 10 blocks is about +-5 % against the 2 % target: the
    # cell wants (5/2)^2 times its boots, and gets at most twice them a round
    assert keys == ["N", "N"]
    assert plan.cells["Q"].ended_by == planner.TARGET and plan.cells["N"].ended_by == ""


def test_a_wide_cell_gets_boots_by_its_width_and_the_budget_buys_the_most_precision():
    """Three cells need more: W (wide: 8 comparisons at about +-3 %), S
    (slightly wide: 1 comparison) and K (expensive boots). A budget of 100 s
    buys W's boots first (most comparisons per second), then S's; K's 80 s
    boots do not fit and wait. Nothing fits at all: every cell ends by budget."""
    rng = np.random.default_rng(3)
    w = []
    for k in range(8):
        w += synth.samples(rng, boots=2, reps=10, cv=0.06, variants=("full", "relaxed"), op=f"w{k}",
                 run_prefix="w")
    s_ = synth.samples(rng, boots=2, reps=10, cv=0.045, variants=("full", "relaxed"), op="s",
             run_prefix="s")
    k_ = synth.samples(rng, boots=2, reps=10, cv=0.06, variants=("full", "relaxed"), op="k",
             run_prefix="k")
    run_cell = {**_run_cell(w, "W"), **_run_cell(s_, "S"), **_run_cell(k_, "K")}
    cset = compare.compare_cells(w + s_ + k_, n_resamples=50)

    def fresh():
        plan = planner.Plan(TARGETS, max_boots=12, budget_s=1e9)
        for key, cost in (("W", 20.0), ("S", 10.0), ("K", 80.0)):
            plan.state(key).boots = 2
            plan.state(key).boot_s = [cost, cost]
        return plan

    keys = planner.next_round(fresh(), cset, run_cell)
    assert keys.count("W") == 2 and keys.count("K") == 2 and 1 <= keys.count("S") <= 2, keys
    plan = fresh()
    keys = planner.next_round(plan, cset, run_cell, remaining_s=100)
    assert keys[:2] == ["W", "W"] and "K" not in keys and keys.count("S") >= 1, keys
    assert plan.cells["K"].ended_by == ""          # another round may still fit it
    plan = fresh()
    assert planner.next_round(plan, cset, run_cell, remaining_s=5) == []
    assert {st.ended_by for st in plan.cells.values()} == {planner.BUDGET}


def test_the_rule_stops_every_cell_at_its_target_or_max_boots():
    """Simulated bench: each round adds a boot to the cells that want one;
    the noisy cell reaches its target only with more boots, the hopeless one
    (CV 40 %) ends at max_boots; the loop ends."""
    rng = np.random.default_rng(2)
    cvs = {"A": 0.005, "B": 0.045, "C": 0.40}
    samples = {k: [] for k in cvs}
    plan = planner.Plan(TARGETS, max_boots=8, budget_s=1e9)

    def boot(key):
        b = plan.state(key).boots
        samples[key] += synth.samples(rng, boots=1, reps=10, cv=cvs[key], variants=("full", "relaxed"),
                            op=key, run_prefix=f"{key}{b}")
        plan.state(key).boots += 1

    for key in cvs:
        boot(key)
        boot(key)
    rounds = 0
    while True:
        allsamples = [s for v in samples.values() for s in v]
        run_cell = {s["run_id"]: s["op"] for s in allsamples}
        cset = compare.compare_cells(allsamples, n_resamples=300, seed=rounds)
        keys = planner.next_round(plan, cset, run_cell)
        if not keys:
            break
        rounds += 1
        assert rounds < 20
        for key in keys:
            boot(key)
    st = plan.cells
    assert st["A"].ended_by == planner.TARGET and st["A"].boots == 2
    assert st["B"].ended_by == planner.TARGET and 2 < st["B"].boots < 8
    assert st["C"].ended_by == planner.MAX_BOOTS and st["C"].boots == 8
    assert planner.ended_by_counts(plan) == {planner.TARGET: 2, planner.MAX_BOOTS: 1}
    (c,) = [c for c in cset.comparisons if c.cell.op == "C"]
    ended = {k: s.ended_by for k, s in st.items()}
    assert planner.comparison_ended_by(c, TARGETS, run_cell, ended) == planner.MAX_BOOTS
    (b,) = [c for c in cset.comparisons if c.cell.op == "B"]
    assert planner.comparison_ended_by(b, TARGETS, run_cell, ended) == planner.TARGET
    assert b.effect.half_width_pct <= 2.0


def test_failures_end_a_cell():
    plan = planner.Plan(TARGETS, max_boots=8, budget_s=1e9)
    plan.state("F").boots, plan.state("F").failed = 3, 2
    c = compare.Comparison(Cell("x86_64", "tcg", "max", 2, "atomics", "inline", "op",
                                    "shared", "{}"), "relaxed", "full", None, None, None,
                         effect=effects.Effect(why="too few"), runs=frozenset({"r"}))
    assert planner.next_round(plan, compare.ComparisonSet([c]), {"r": "F"}) == []
    assert plan.cells["F"].ended_by == planner.FAILURES


def test_a_round_without_budget_names_what_stopped_each_cell():
    """A bench whose budget runs out inside a round leaves cells without a
    reason: a round with nothing left to spend (what make bench then asks
    the planner) gives a cell whose comparisons still need more "budget"
    (run L of 2026-12-05 stored "target" for cells with 59 of 90 comparisons
    inconclusive), one at max_boots "max_boots", one at its target "target",
    and keeps a reason already given."""
    rng = np.random.default_rng(4)
    quiet = synth.samples(rng, boots=2, reps=10, cv=0.002, variants=("full", "relaxed"), op="quiet",
                run_prefix="q")
    noisy = synth.samples(rng, boots=2, reps=10, cv=0.10, variants=("full", "relaxed"), op="noisy",
                run_prefix="n")
    full = synth.samples(rng, boots=2, reps=10, cv=0.10, variants=("full", "relaxed"), op="full",
               run_prefix="m")
    run_cell = {**_run_cell(quiet, "Q"), **_run_cell(noisy, "N"), **_run_cell(full, "M"),
                "other": "F"}
    cset = compare.compare_cells(quiet + noisy + full, n_resamples=50)
    plan = planner.Plan(TARGETS, max_boots=6, budget_s=1e9)
    for key in ("Q", "N", "M", "F"):
        plan.state(key).boots = 2
    plan.state("M").boots = 6
    plan.state("F").ended_by = planner.FAILURES
    assert planner.next_round(plan, cset, run_cell, remaining_s=0) == []
    assert {k: st.ended_by for k, st in plan.cells.items()} == {
        "Q": planner.TARGET, "N": planner.BUDGET, "M": planner.MAX_BOOTS,
        "F": planner.FAILURES}


def test_blind_and_identical_pairs_stop_after_round_0_and_free_the_budget():
    """Issue 26: three equally noisy cells. B's only pair is emulator-blind,
    I's is identical code, D's is distinguishable. Without the labels a
    budget of two boots is shared among them; with them B and I end
    "settled" after their first boots, and D gets both boots."""
    rng = np.random.default_rng(11)
    cells = {}
    for key in "BID":
        cells[key] = synth.samples(rng, boots=2, reps=10, cv=0.10, variants=("full", "relaxed"),
                         op=f"op{key}", run_prefix=key.lower())
    samples = [s for v in cells.values() for s in v]
    run_cell = {r: k for k, v in cells.items() for r in _run_cell(v, k)}

    def fresh():
        plan = planner.Plan(TARGETS, max_boots=12, budget_s=1e9)
        for key in "BID":
            plan.state(key).boots = 2
            plan.state(key).boot_s = [10.0, 10.0]
        return plan

    unlabeled = compare.compare_cells(samples, n_resamples=50)
    keys = planner.next_round(fresh(), unlabeled, run_cell, remaining_s=20)
    assert set(keys) != {"D"}, "without labels the budget is not kept for D"
    labeled = compare.compare_cells(samples, n_resamples=50,
                                    blind=lambda c, a, b: c.op == "opB",
                                    identical=lambda c, a, b: c.op == "opI")
    plan = fresh()
    keys = planner.next_round(plan, labeled, run_cell, remaining_s=20)
    assert keys == ["D", "D"]
    assert plan.cells["B"].ended_by == plan.cells["I"].ended_by == planner.SETTLED
    by_op = {c.cell.op: c for c in labeled.comparisons}
    assert planner.comparison_ended_by(by_op["opB"], TARGETS, run_cell, {}) == planner.SETTLED
    assert planner.needs_more(by_op["opD"], TARGETS)
    # the summary line counts each kind; widths over the distinguishable one only
    line = labeled.summary_line()
    assert line.startswith("comparisons: ") and " of 1 distinguishable " in line
    assert "emulator-blind 1, identical code 1;" in line
    d = by_op["opD"].effect
    assert f"in-boot {d.half_width_pct:.1f} %" in line


def test_a_calibration_cell_whose_barrier_is_not_found_gets_boots_though_settled():
    """Run A of issue 26: the arm64 max calibration cell's pairs are all
    emulator-blind, so it stopped after round 0 and its injected barrier was
    found in 14 of 17 rows. A calibration cell still missing its barrier
    gets boots whatever its labels; one whose barrier was found does not."""
    rng = np.random.default_rng(12)
    c = synth.samples(rng, boots=2, reps=10, cv=0.10, variants=("full", "relaxed"), op="opC",
            run_prefix="c")
    run_cell = _run_cell(c, "C")
    cset = compare.compare_cells(c, n_resamples=50, blind=lambda *a: True)

    def fresh():
        plan = planner.Plan(TARGETS, max_boots=12, budget_s=1e9)
        plan.state("C").boots = 2
        plan.state("C").boot_s = [10.0, 10.0]
        return plan

    plan = fresh()
    assert planner.next_round(plan, cset, run_cell) == [] and plan.cells["C"].ended_by == planner.SETTLED
    plan = fresh()
    assert planner.next_round(plan, cset, run_cell, calibrating=["C"]) == ["C", "C"]
    assert plan.cells["C"].ended_by == ""


def test_one_first_boot_a_settled_cell_stops_and_a_kernel_build_gets_its_second():
    """A matrix with `boots = 1` (issue 26 run F): after one boot a cell, the
    settled cell (identical code) stops; the kernel builds, one boot a side,
    cannot be judged, so each of their cells gets one more boot (a round at
    most doubles a cell); the noisy distinguishable atomics cell grows too."""
    rng = np.random.default_rng(5)
    settled = synth.samples(rng, boots=1, reps=10, cv=0.10, variants=("full", "relaxed"),
                            op="same", run_prefix="s")
    noisy = synth.samples(rng, boots=1, reps=10, cv=0.10, variants=("full", "relaxed"),
                          op="differ", run_prefix="d")
    kernels = synth.kernel_boots(rng, "acqrel", 1) + synth.kernel_boots(rng, "full", 1)
    run_cell = {**_run_cell(settled, "S"), **_run_cell(noisy, "D"),
                **{s["run_id"]: f"K-{s['run_id'].split('-')[0]}" for s in kernels}}
    cset = compare.compare_cells(settled + noisy + kernels, n_resamples=50,
                                 identical=lambda c, a, b: c.op == "same")
    kern = [c for c in cset.comparisons if c.level == "kernel"]
    assert kern and not any(c.effect is not None and c.effect.judged for c in kern)
    plan = planner.Plan(TARGETS, max_boots=16, budget_s=1e9)
    for key in set(run_cell.values()):
        plan.state(key).boots = 1
        plan.state(key).boot_s = [5.0]
    keys = planner.next_round(plan, cset, run_cell)
    assert plan.cells["S"].ended_by == planner.SETTLED and "S" not in keys
    assert sorted(k for k in keys if k.startswith("K-")) == ["K-acqrel", "K-full"]
    assert keys.count("D") == 1


def test_an_inconclusive_comparison_gets_the_budget_before_two_judged_wide_ones():
    """Issue 26: cell U feeds one inconclusive comparison (a 3 % change its
    interval cannot yet tell from none), cell W two judged ones (equivalent)
    still wider than a 1 % target. Boots cost the same; the budget buys
    one cell's round. Counted alike, W's two comparisons outweigh U's one;
    a verdict comes before a narrower interval of one, so U gets the boots."""
    rng = np.random.default_rng(5)
    # 4 boots a cell: of 2, the interval has 1 degree of freedom where the
    # boots scatter more than their blocks explain (effects.paired_df)
    u = synth.samples(rng, boots=4, reps=10, cv=0.20, factors={"relaxed": 1.03},
                      variants=("full", "relaxed"), op="u", run_prefix="u")
    w = []
    for k in range(2):
        w += synth.samples(rng, boots=4, reps=10, cv=0.025, variants=("full", "relaxed"),
                           op=f"w{k}", run_prefix=f"w{k}")
    targets = {**TARGETS, "in-boot": 1.0}
    run_cell = {**_run_cell(u, "U"), **_run_cell(w, "W")}
    cset = compare.compare_cells(u + w, n_resamples=50)
    kinds = {c.cell.op: (c.kind, c.effect.half_width_pct) for c in cset.comparisons}
    assert kinds["u"][0] == "inconclusive", kinds
    assert all(kinds[f"w{k}"][0] == "equivalent" and kinds[f"w{k}"][1] > targets["in-boot"]
               for k in range(2)), kinds
    plan = planner.Plan(targets, max_boots=12, budget_s=1e9)
    for key in "UW":
        plan.state(key).boots = 4
        plan.state(key).boot_s = [10.0, 10.0]
    keys = planner.next_round(plan, cset, run_cell, remaining_s=20)
    assert keys == ["U", "U"], keys
    assert plan.cells["W"].ended_by == ""       # a later round may still narrow W


def _simulated_bench(budget_s: float) -> dict:
    """Boots per cell after a bench like `make bench` on one host: 2 first
    boots a cell, then rounds; a boot takes 10 % more than its cell's
    boots so far said (the planner plans on the mean, and hosts drift), and
    as in executor.Local a round whose next boot no longer fits ends the
    bench. C: a cheap cell (5 s a boot) with a 3 % change its noise keeps
    inconclusive for many boots; X0-X3: 50 s boots, judged but wider than
    the target."""
    rng = np.random.default_rng(6)
    spec = {"C": (5.0, 0.15, {"relaxed": 1.03})}
    spec.update({f"X{k}": (50.0, 0.05, {}) for k in range(4)})
    samples = {k: [] for k in spec}
    plan = planner.Plan(TARGETS, max_boots=32, budget_s=budget_s)
    clock = 0.0

    def boot(key):
        nonlocal clock
        cost, cv, factors = spec[key]
        st = plan.state(key)
        samples[key] += synth.samples(rng, boots=1, reps=10, cv=cv, factors=factors,
                                      variants=("full", "relaxed"), op=key,
                                      run_prefix=f"{key}b{st.boots}")
        st.boots += 1
        st.boot_s.append(cost)
        clock += cost * 1.1

    for key in spec:
        boot(key)
        boot(key)
    for rnd in range(20):
        allsamples = [s for v in samples.values() for s in v]
        cset = compare.compare_cells(allsamples, n_resamples=50, seed=rnd)
        keys = planner.next_round(plan, cset, {s["run_id"]: s["op"] for s in allsamples},
                                  remaining_s=budget_s - clock)
        if not keys:
            break
        for key in keys:
            if clock + plan.boot_cost(key) > budget_s:
                return {k: st.boots for k, st in plan.cells.items()}
            boot(key)
    return {k: st.boots for k, st in plan.cells.items()}


def test_rounds_spend_a_share_of_what_is_left_so_a_cheap_wide_cell_keeps_doubling():
    """Issue 26 (runs Y1 and Y3): with each round planning all that was
    left, a round's last boots overran the budget, the bench ended after two
    rounds and a cheap inconclusive cell stopped at 8 boots. A round now
    plans at most half of what is left (planner.ROUND_SHARE): more, shorter
    rounds, the cheap cell first in each, so it gets 16 and more."""
    boots = _simulated_bench(budget_s=1400.0)
    assert boots["C"] >= 16, boots
    assert all(boots[f"X{k}"] >= 4 for k in range(4)), boots


def test_a_round_plans_its_share_of_the_budget_best_value_first_and_leaves_the_rest_open():
    """What is left: 700 s. W's round (2 boots of 20 s, the most value a
    second) and K's (2 of 200 s) would fit; the round's share (350 s) buys
    W's and one of K's, and K is not ended: the next round may give it more.
    With 150 s left, under MIN_ROUND_S, the round may spend all of it."""
    rng = np.random.default_rng(3)
    w = []
    for k in range(8):
        w += synth.samples(rng, boots=2, reps=10, cv=0.06, variants=("full", "relaxed"),
                           op=f"w{k}", run_prefix="w")
    k_ = synth.samples(rng, boots=2, reps=10, cv=0.06, variants=("full", "relaxed"), op="k",
                       run_prefix="k")
    run_cell = {**_run_cell(w, "W"), **_run_cell(k_, "K")}
    cset = compare.compare_cells(w + k_, n_resamples=50)

    def fresh():
        plan = planner.Plan(TARGETS, max_boots=12, budget_s=1e9)
        for key, cost in (("W", 20.0), ("K", 200.0)):
            plan.state(key).boots = 2
            plan.state(key).boot_s = [cost, cost]
        return plan

    plan = fresh()
    keys = planner.next_round(plan, cset, run_cell, remaining_s=700)
    assert keys == ["W", "W", "K"], keys
    assert plan.cells["K"].ended_by == ""
    assert planner.next_round(fresh(), cset, run_cell, remaining_s=150) == ["W", "W"]
    # the share buys none of K's boots, what is left buys one: it gets it
    plan = fresh()
    plan.state("W").boots = 12
    assert planner.next_round(plan, cset, run_cell, remaining_s=250) == ["K"]

"""A/A calibration on real guests (issue 5): identical code measured as two
variants shows no significant difference, and a deliberately injected cost
(aa_inject_mb=1: copy 1 adds one smp_mb() per op) is detected, with the right
sign. x86_64 TCG, the same boot and statistics code `make bench` uses; no
timing thresholds, only the tests' verdicts. About 1 minute of guest time."""
import pytest
from scipy import stats as sps

from conftest import kernel_dir
from qrwbench.results import store
from qrwbench.analysis import calibration, verdicts
from qrwbench.defaults import ALPHA
from qrwbench.run import boot
from qrwbench.cell import Cell

pytestmark = pytest.mark.guest
AA_OPS = "atomic_add_return,atomic_cmpxchg,smp_load_acquire"
AA_BOOTS = 6   # the copies differ from boot to boot on some hosts (run Z1): enough to see it


def boot_samples(tmp_path, name, seed, vcpus=2, **params):
    kernel_dir("x86_64", "acqrel")
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", vcpus, tuple(sorted(params.items())))
    d = tmp_path / name
    st = boot.boot_one(c, seed, d, 120, 256, boot.NOT_ASKED)
    assert st["status"] == "ok", st
    db = tmp_path / "results.sqlite"
    res = store.import_run(db, d)
    assert res.status == "ok", res
    conn = store.connect(db)
    try:
        return store.load_samples(conn, run_ids=[res.run_id])
    finally:
        conn.close()


@pytest.fixture(scope="module")
def aa_boots(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("aa")
    return [boot_samples(tmp, f"aa{i}", 1000 + i, ops=AA_OPS, placement="percpu",
                         reps=8, duration_ms=3) for i in range(AA_BOOTS)]


def aa_verdicts(samples, alpha=ALPHA) -> dict:
    """{(op, variant): verdict} of copy 1 vs copy 0, Holm-adjusted over the family."""
    aa = calibration.aa_control(samples, boots=False, alpha=alpha)
    judged = [r for r in aa.results if r.test.judged]
    padj = verdicts.adjust([r.test.p_value for r in judged], alpha=alpha)
    return {(r.cell.op, r.variant): verdicts.window_verdict(r.test, p, alpha=alpha)
            for r, p in zip(judged, padj)}


# The family-wise error rate of this claim is alpha even for a perfect
# harness: at 0.05 one CI run in 20 could fail by chance (it did once in a
# full `make test`, 2026-12-03). At 0.01 a harness bias still fails it (the
# page-crossing copies of docs/validity.md were 2-4x apart, p < 1e-6), while a
# chance failure is 1 in 100.
AA_FAMILY_ALPHA = 0.01


def test_aa_identical_copies_show_no_significant_difference(aa_boots):
    got = aa_verdicts([s for b in aa_boots for s in b], alpha=AA_FAMILY_ALPHA)
    assert {"atomic_add_return", "atomic_cmpxchg", "smp_load_acquire"} <= {op for op, _ in got}
    assert len(got) >= 9
    assert set(got.values()) == {verdicts.NO_DIFF}, got


def test_aa_false_positives_over_the_boots_are_consistent_with_alpha(aa_boots):
    """Unadjusted, as the bench's calibration line counts them, over the
    boots together. Not per boot: on the host of run Z1 (docs/validity.md)
    the two copies differed within a boot, differently in each, and one
    boot at a time 10 to 12 of 30 came out significant; the rig's intervals
    carry that boot level (effects.paired_df), a single boot's cannot."""
    aa = calibration.aa_control([s for b in aa_boots for s in b], boots=False)
    k, n = aa.n_significant, aa.n_judged
    assert n >= 9
    assert all(r.effect.n_boots[0] == AA_BOOTS for r in aa.results if r.effect)
    p = sps.binomtest(k, n, ALPHA, alternative="greater").pvalue
    assert p >= 0.01, f"{k} of {n} A/A comparisons significant at alpha {ALPHA}: binomial p={p:.3g}"


def test_injected_barrier_is_detected_as_slower(tmp_path):
    # one vCPU: the guest competes less with the (shared, 2-core) host's load
    samples = boot_samples(tmp_path, "inject", 77, vcpus=1, ops="atomic_add_return,smp_load_acquire",
                           placement="percpu", reps=60, duration_ms=2, aa_inject_mb=1)
    aa = calibration.aa_control(samples, boots=False)
    got = {(r.cell.op, r.variant): r for r in aa.results}
    want = [("atomic_add_return", o) for o in ("full", "acquire", "release", "relaxed")]
    want.append(("smp_load_acquire", "acquire"))
    padj = dict(zip(got, verdicts.adjust([r.test.p_value for r in got.values()])))
    for key in want:
        r = got[key]
        assert r.test.judged, (key, r.test.why)
        # copy 1 (with the barrier) against copy 0: less throughput
        assert verdicts.window_verdict(r.test, padj[key]) == verdicts.SLOWER, (key, r.test)
        assert r.significant and r.test.ratio_high < 1.0
    # the A/A check above would have failed on this boot: it can fail
    assert set(aa_verdicts(samples).values()) != {verdicts.NO_DIFF}

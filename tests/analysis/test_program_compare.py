"""A program workload is compared across kernel builds like the rwlock
workload's kernel rows: one value per boot, normalized by the module's
acqrel copy measured in the same blocks (analysis/perboot.py), Welch's t on
boots, the same verdicts. Synthetic boots whose host speed differs from boot
to boot: normalized, a 20 % slower program is found slower."""
from __future__ import annotations

import numpy as np
import pytest

import synth
from qrwbench.analysis import codeid
from qrwbench.report import report
from qrwbench.results import store


@pytest.fixture()
def program_db(tmp_path, monkeypatch):
    monkeypatch.setattr(codeid, "DEFAULT_AUDIT", str(tmp_path / "no-audit.json"))
    db = tmp_path / "r.sqlite"
    runs = tmp_path / "runs"
    rng = np.random.default_rng(5)
    for b in range(4):
        for kv, f in (("acqrel", 1.0), ("full", 0.8)):
            speed = float(rng.uniform(0.6, 1.4))       # the host's speed in this boot
            recs = [synth.begin(workload="forkwait", threads=2, kernel_variant=kv)]
            recs += synth.program_results("forkwait", reps=8, kernel_variant=kv,
                                          rng=rng, rate=5e3 * speed, ref_rate=4e6 * speed,
                                          factor=f)
            store.import_run(db, synth.write_run(
                runs, f"fw{b}-{kv}", synth.console(recs), workload="forkwait",
                kernel_variant=kv, started_at=f"2026-12-0{b + 1}T00:00:00Z"))
    return db


def test_a_slower_program_kernel_is_judged_slower_on_normalized_boots(program_db):
    cset = report.compare_set(program_db, commit="all", n_resamples=200).cset
    kern = [c for c in cset.comparisons if c.cell.workload == "forkwait" and c.level == "kernel"]
    assert [(c.cell.impl, c.variant, c.baseline) for c in kern] == [("kernel", "full", "acqrel")]
    c = kern[0]
    assert c.kind == "slower", c.verdict
    assert c.effect is not None and c.effect.judged
    # normalized by the in-boot reference: -20 % (log 0.8) inside the interval,
    # which the boots' host speeds (0.6..1.4) would swamp unnormalized
    assert c.effect.method == "boots (normalized)", c.effect.method
    assert c.effect.low <= np.log(0.8) <= c.effect.high, (c.effect, c.verdict)
    assert c.effect.half_width_pct < 10, c.verdict


def test_the_summary_lines_count_program_comparisons(program_db):
    text = report.compare_text(program_db, commit="all", n_resamples=200)
    assert "forkwait" in text
    assert "comparisons:" in text or "calibration" in text


def test_does_it_matter_puts_the_program_beside_the_loop_level_kernel_builds(program_db,
                                                                           tmp_path):
    from qrwbench.report import matters
    runs = tmp_path / "rw"
    for b in range(2):
        for kv in ("acqrel", "full"):
            store.import_run(program_db, synth.rwlock_run(
                runs, f"rw{b}-{kv}", kernel_variant=kv, write_pcts=(10,), reps=4,
                started_at=f"2026-12-0{b + 1}T01:00:00Z"))
    cset = report.compare_set(program_db, commit="all", n_resamples=200).cset
    t = matters.table(cset)
    assert [r[:3] for r in t.rows] == [["x86_64/tcg/qemu64 2 vCPU", "full vs acqrel",
                                        "forkwait"]]
    prog = next(c for c in cset.comparisons if c.cell.workload == "forkwait"
                and c.level == "kernel")
    assert t.rows[0][3] == prog.verdict
    assert t.rows[0][4].startswith("rwlock(): "), t.rows[0][4]     # one loop cell: no params


def test_kernel_builds_with_identical_qrwlock_code_are_labeled_so_for_programs_too(
        program_db, tmp_path):
    """The ordering audit's kernel pairs (build/audit.py) are about the kernel's
    rwlock_t, whichever workload drives it."""
    import json
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"schema": 1, "notes": [], "identical": [
        {"arch": "x86_64", "impl": "kernel", "variants": ["acqrel", "full"]}]}))
    cset = report.compare_set(program_db, commit="all", n_resamples=200,
                              audit_path=str(audit)).cset
    c = next(c for c in cset.comparisons if c.cell.workload == "forkwait" and c.level == "kernel")
    assert c.identical_code and c.settled

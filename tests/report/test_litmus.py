"""Weak-memory canaries (workload=litmus): the records, the verdicts, what
`make torture` says with them, and real guests."""
import pytest

from conftest import kernel_dir
from qrwbench import vocab
from qrwbench.results import records
from qrwbench.report import litmus
from qrwbench.run import boot, torture

import synth


def lit(test, counts, iters=None):
    t = vocab.litmus_tests()[test]
    return {"type": "litmus", "schema": 1, "test": test, "lkmm": t.lkmm, "want": list(t.want),
            "iters": sum(counts) if iters is None else iters, "ns": 1000, "counts": counts}


def parse(*recs, workload="litmus"):
    return records.parse_console(records.format_console(
        [synth.begin(workload=workload)] + list(recs)))


def test_the_table_is_read_from_the_def_file():
    t = vocab.litmus_tests()
    assert {"mp", "mp_rel_acq", "sb", "sb_mbs", "qrw_unlock_rlock", "qrw_unlock_rlock_relaxed"} <= set(t)
    assert t["sb"].lkmm == "allowed" and t["sb"].want == (0, 0)
    assert t["mp_rel_acq"].lkmm == "forbidden" and t["mp_rel_acq"].want == (1, 0)


def test_good_litmus_records_parse():
    p = parse(lit("sb", [5, 40, 50, 5]), lit("mp", [50, 0, 0, 50]))
    assert p.ok, p.reason
    assert [r["test"] for r in p.litmus] == ["sb", "mp"] and p.results == []


@pytest.mark.parametrize("rec,why", [
    (dict(lit("sb", [1, 2, 3, 4]), test="iriw"), "'test' is 'iriw'"),
    (dict(lit("sb", [1, 2, 3, 4]), lkmm="forbidden"), "the table says 'allowed'"),
    (dict(lit("sb", [1, 2, 3, 4]), want=[1, 1]), "the table says [0, 0]"),
    (lit("sb", [1, 2, 3, 4], iters=11), "counts sum to 10, iters is 11"),
    (dict(lit("sb", [1, 2, 3, 4]), counts=[1, 2, 3]), "'counts' has 3 entries"),
])
def test_bad_litmus_records_are_refused(rec, why):
    p = parse(rec)
    assert not p.ok and why in p.reason, p.reason


def test_litmus_records_belong_to_litmus_runs_only():
    p = parse(lit("sb", [1, 2, 3, 4]), workload="atomics")
    assert not p.ok and "litmus record in a 'atomics' run" in p.reason
    p = parse()
    assert not p.ok and "no litmus records" in p.reason


def test_verdicts():
    assert litmus.verdict(lit("sb", [7, 40, 50, 3])) == ("Sometimes: 7 of 100", False)
    assert litmus.verdict(lit("sb", [0, 40, 50, 10]))[0].startswith("Never in 100: this backend")
    assert litmus.verdict(lit("sb_mbs", [0, 40, 50, 10])) == ("Never in 100 (as it must)", False)
    words, bad = litmus.verdict(lit("sb_mbs", [1, 40, 50, 9]))
    assert bad and "VIOLATED" in words
    assert litmus.verdict(lit("mp", [0, 0, 0, 0]))[0].startswith("not run")
    text, bad = litmus.table([("x86_64/tcg/max", lit("mp_rel_acq", [1, 0, 1, 0]))])
    assert bad and "| x86_64/tcg/max | mp_rel_acq | forbidden | r0=1 r1=0 | 2 | 1 |" in text


def test_blind_to_message_passing():
    never = [lit("mp", [50, 1, 0, 49]), lit("qrw_unlock_rlock_relaxed", [50, 2, 0, 48]),
             lit("sb", [9, 40, 41, 10])]
    assert litmus.blind_to_mp(never)
    assert not litmus.blind_to_mp(never[:1] + [lit("qrw_unlock_rlock_relaxed", [50, 2, 3, 45])])
    assert not litmus.blind_to_mp([lit("sb", [9, 40, 41, 10])])     # no MP canary ran


def test_torture_says_when_relaxed_rows_prove_nothing():
    cells = {("x86_64", "max", "acqrel", "module", "relaxed"): [0, 100],
             ("arm64", "max", "acqrel", "module", "relaxed"): [0, 100]}
    text, bad = torture.format_report(cells, [], {("x86_64", "max"): True, ("arm64", "max"): False})
    assert not bad
    row = {l.split("|")[1].strip(): l for l in text.splitlines()[2:]}
    assert "cannot show reordering" in row["x86_64"]
    assert "cannot show reordering" not in row["arm64"]


@pytest.mark.guest
def test_real_canaries_on_two_vcpus(tmp_path):
    """One x86_64 guest: every test of the table reports, counts add up, and
    no outcome the LKMM forbids comes out (a TCG or kernel bug if it did)."""
    kernel_dir("x86_64", "acqrel")
    got, failed = torture.run_canaries([litmus.cell("x86_64", "tcg", "max", iters=3000)], tmp_path,
                                       timeout_s=300, mem_mb=256, seed=7)
    assert failed == [], failed
    recs = got["x86_64/tcg/max"]
    assert [r["test"] for r in recs] == list(vocab.litmus_tests())
    for r in recs:
        assert r["iters"] > 0 and sum(r["counts"]) == r["iters"]
        if r["lkmm"] == "forbidden":
            assert litmus.seen(r) == 0, r
    # the two sides race: in message passing each side sometimes came first
    mp = next(r for r in recs if r["test"] == "mp")
    assert mp["counts"][0] > 0 and mp["counts"][3] > 0, mp


@pytest.mark.guest
def test_one_vcpu_is_refused_by_the_module(tmp_path):
    kernel_dir("x86_64", "acqrel")
    c = litmus.cell("x86_64", "tcg", "max", iters=10)
    c = c.replace(vcpus=1)
    boot.boot_one(c, 1, tmp_path / "r", 300, 256, boot.NOT_ASKED)
    p = records.parse_console((tmp_path / "r" / "console.log").read_bytes())
    assert not p.ok
    assert "workload=litmus needs two CPUs, the guest has 1 online" in p.reason, p.reason


def test_canaries_saved_for_the_report_and_read_back(tmp_path):
    from qrwbench.report import sections
    got = {"x86_64/tcg/max": [lit("sb", [7, 40, 50, 3]), lit("mp_rel_acq", [50, 1, 0, 49])]}
    f = tmp_path / "canaries.json"
    litmus.save(got, f)
    rows = litmus.load(f)
    assert [(t, r["test"]) for t, r in rows] == [("x86_64/tcg/max", "sb"),
                                                  ("x86_64/tcg/max", "mp_rel_acq")]
    md = sections.canary_md(rows)
    assert "| x86_64/tcg/max | sb | allowed | r0=0 r1=0 | 100 | 7 | Sometimes: 7 of 100 |" in md
    assert "none found" in sections.canary_md(None)
    assert litmus.load(tmp_path / "missing.json") is None


def test_a_damaged_canary_file_is_one_clear_error(tmp_path):
    from qrwbench.errors import QrwbenchError
    f = tmp_path / "canaries.json"
    for text, why in (("{", "canary file"), ('{"schema": 1, "canaries": [{"target": "t"}]}',
                                             r"canaries\[0\]: litmus record lacks"),
                      ('{"schema": 2}', "not a schema 1 object")):
        f.write_text(text)
        with pytest.raises(QrwbenchError, match=why):
            litmus.load(f)

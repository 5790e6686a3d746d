"""Data to take away: comparisons.csv / .json of `make report` and `compare
--format csv|json`, read back and checked against the results DB."""

import csv
import io
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import synth
from qrwbench import cli
from qrwbench.analysis import codeid
from qrwbench.report import export, labels, report

ROOT = Path(__file__).resolve().parents[2]
COMMIT = synth.RIG_COMMIT
FLOATS = ("estimate_pct", "ci_low_pct", "ci_high_pct", "ratio", "p", "p_adjusted",
          "median_mops", "baseline_median_mops")


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return synth.report_db(tmp_path_factory.mktemp("export"))


@pytest.fixture
def audits(tmp_path, monkeypatch):
    audit, emu = synth.audits(tmp_path)
    monkeypatch.setattr(codeid, "DEFAULT_AUDIT", str(audit))
    monkeypatch.setattr(codeid, "DEFAULT_EMULATOR", str(emu))
    return audit


def _typed(row: dict) -> dict:
    """A CSV row with its numbers as numbers (empty: None)."""
    out = dict(row)
    for k in FLOATS:
        out[k] = float(row[k]) if row[k] != "" else None
    out["vcpus"], out["boots"] = int(row["vcpus"]), int(row["boots"])
    return out


def _db_windows(conn, row: dict, variant: str) -> list[tuple[str, float]]:
    """(run_id, throughput) of the copy-0 windows of one side of a row, straight from SQL."""
    return conn.execute(
        "SELECT s.run_id, s.throughput FROM samples s JOIN runs r ON r.run_id = s.run_id "
        "WHERE r.status = 'ok' AND r.rig_commit = ? AND s.copy = 0 AND s.variant = ? AND "
        "s.arch = ? AND s.accel = ? AND s.cpu_model = ? AND s.vcpus = ? AND s.workload = ? "
        "AND s.impl = ? AND s.op = ? AND s.placement = ? AND s.params = ?",
        (COMMIT, variant, row["arch"], row["accel"], row["cpu_model"], row["vcpus"],
         row["workload"], row["impl"], row["op"], row["placement"], row["params"])).fetchall()


def test_report_writes_csv_and_json_that_agree_with_the_db(db, tmp_path, audits):
    paths = report.build(db, tmp_path / "rep", n_resamples=200)
    assert paths["csv"] == str(tmp_path / "rep" / "comparisons.csv")
    text = Path(paths["csv"]).read_text()
    assert text.splitlines()[0] == ",".join(export.NAMES)
    csv_rows = [_typed(r) for r in csv.DictReader(io.StringIO(text))]
    doc = json.loads(Path(paths["json"]).read_text())
    assert doc["schema"] == 1 and doc["selection"] == f"rig commit {COMMIT[:12]}"
    assert list(doc["columns"]) == list(export.NAMES)
    assert doc["comparisons"] == csv_rows           # the same rows, the same numbers

    cmp_ = report.compare_set(db, n_resamples=200)
    # atomics TCG and KVM; rwlock module copies and kernel builds x write_pct
    assert len(csv_rows) == len(cmp_.cset.comparisons) == 3 + 3 + 2 * 2 + 2
    by_key = {(c.cell.label(), c.variant): c for c in cmp_.cset.comparisons}
    conn = sqlite3.connect(db)
    try:
        for r in csv_rows:
            c = by_key[(r["cell"], r["variant"])]
            assert (r["baseline"], r["level"], r["verdict"], r["verdict_text"]) == \
                (c.baseline, c.level, c.kind, c.verdict)
            assert r["estimate_pct"] == pytest.approx(c.test.pct_change)
            assert r["ci_low_pct"] < r["estimate_pct"] < r["ci_high_pct"]
            assert r["p_adjusted"] == pytest.approx(c.p_adjusted)
            a, b = _db_windows(conn, r, r["variant"]), _db_windows(conn, r, r["baseline"])
            assert a and b
            assert r["boots"] == len({run for run, _ in a + b})
            assert r["median_mops"] == pytest.approx(np.median([t for _, t in a]) / 1e6)
            assert r["baseline_median_mops"] == pytest.approx(np.median([t for _, t in b]) / 1e6)
            commits = {x for (x,) in conn.execute(
                f"SELECT DISTINCT rig_commit FROM runs WHERE run_id IN "
                f"({','.join('?' * len(a + b))})", [run for run, _ in a + b])}
            assert r["commit"] == ";".join(sorted(commits)) == COMMIT
            assert r["kernel_commit"] == "b" * 40
    finally:
        conn.close()

    got = {(r["accel"], r["impl"], r["variant"]): r for r in csv_rows}
    relaxed = got[("tcg", "inline", "relaxed")]
    assert relaxed["verdict"] == "faster" and relaxed["ci_low_pct"] > 0
    assert 5 < relaxed["estimate_pct"] < 15             # the synthetic 10 %
    assert [r["label"] for r in csv_rows if r["accel"] == "tcg" and r["workload"] == "atomics"] \
        == [labels.IDENTICAL, labels.DISTINCT, labels.BLIND]   # acquire, relaxed, release
    assert [r["label"] for r in csv_rows if r["accel"] == "kvm"] == \
        [labels.IDENTICAL, labels.DISTINCT, labels.DISTINCT]
    assert {r["label"] for r in csv_rows if r["workload"] == "rwlock"} == {labels.UNKNOWN}
    kernel = [r for r in csv_rows if r["level"] == "kernel"]
    assert len(kernel) == 2 and all(r["n"] == "2+2" and r["boots"] == 4 for r in kernel)


def test_compare_prints_the_same_rows(db, tmp_path, audits, capsys):
    report.build(db, tmp_path / "rep", n_resamples=200)
    assert cli.main(["compare", "--db", db, "--format", "csv"]) == 0
    printed = capsys.readouterr().out
    assert printed == (tmp_path / "rep" / "comparisons.csv").read_text()
    assert cli.main(["compare", "--db", db, "--format", "json", "--workload", "rwlock"]) == 0
    doc = json.loads(capsys.readouterr().out)
    full = json.loads((tmp_path / "rep" / "comparisons.json").read_text())
    assert doc["comparisons"] == [r for r in full["comparisons"] if r["workload"] == "rwlock"]
    assert cli.main(["compare", "--db", db]) == 0               # text stays the default
    assert "qrwbench comparison: rig commit" in capsys.readouterr().out


def test_missing_values_are_empty_in_csv_and_null_in_json():
    row = {k: None for k in export.NAMES}
    row.update(cell="c", estimate_pct=math.nan, ratio=1.25, boots=3)
    assert export._num(math.nan) is None and export._num(math.inf) is None
    assert export._num(2) == 2.0
    line = export.to_csv([{**row, "estimate_pct": None}]).splitlines()[1].split(",")
    assert line[export.NAMES.index("estimate_pct")] == "" and line[0] == "c"
    assert line[export.NAMES.index("ratio")] == "1.25"
    with pytest.raises(ValueError):                 # NaN never reaches the JSON
        export.to_json([row], {})


@pytest.mark.parametrize("value", ["xml", "CSV", ""])
def test_bad_format_is_one_line_and_status_2(db, value):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "analysis"))
    res = subprocess.run([sys.executable, "-m", "qrwbench", "compare", "--db", db,
                          "--format", value], env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("qrwbench: error: ")
    assert repr(value) in res.stderr
    assert all(repr(f) in res.stderr for f in ("text", "csv", "json"))


def test_every_column_is_documented():
    doc = (ROOT / "docs" / "analysis.md").read_text()
    table = doc[doc.index("### Data to take away"):doc.index("## Regressions")]
    documented = [l.split("`")[1] for l in table.splitlines() if l.startswith("| `")]
    assert documented == list(export.NAMES)

"""report: HTML + Markdown + plots from a small synthetic run set; bad input writes nothing."""

import json
from html import unescape
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import synth
from qrwbench import cli
from qrwbench.results import store
from qrwbench.report import analyse, report, tables
from qrwbench.errors import QrwbenchError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results_db(tmp_path_factory):
    """Atomics at 1 and 2 vCPUs (2 overcommitted on a 1-CPU host; one boot
    each, relaxed faster and release slower), rwlock on two kernel variants
    with a write-fraction sweep, two rig commits for history."""
    tmp = tmp_path_factory.mktemp("report")
    runs = tmp / "runs"
    db = str(tmp / "results" / "qrwbench.sqlite")
    made = []
    for commit, t in (("1" * 40, 0), ("2" * 40, 1)):
        for vcpus in (1, 2):
            made.append(synth.atomics_run(
                runs, f"a{t}-{vcpus}", vcpus=vcpus, factors={"relaxed": 1.10, "release": 0.88},
                reps=6,
                rig_commit=commit, overcommitted=vcpus == 2,
                started_at=f"2026-12-0{t + 1}T00:0{vcpus}:00Z"))
        for kv in ("acqrel", "full"):
            made.append(synth.rwlock_run(
                runs, f"rw{t}-{kv}", kernel_variant=kv, write_pcts=(0, 20), reps=4,
                factors={"full": 0.9}, rig_commit=commit,
                started_at=f"2026-12-0{t + 1}T01:00:00Z"))
    bad = synth.write_run(runs, "a1-broken", synth.console(
        [synth.begin()] + synth.results(rng=np.random.default_rng(0)), end=False),
        rig_commit="2" * 40, started_at="2026-12-02T02:00:00Z")
    # the reported rig's runs were measured beside other work (run/hostload.py)
    for other, run in zip((0.1, 0.2, 0.3, 0.4),
                          [r for r in made if r.name.startswith(("a1-", "rw1-"))]):
        st = json.loads((run / "status.json").read_text())
        st["host_load"] = {"measured": True, "wall_s": 5.0, "cpus": 2, "other_frac": other,
                           "steal_frac": 0.02}
        (run / "status.json").write_text(json.dumps(st))
    for run in made + [bad]:
        store.import_run(db, run)
    return db, tmp


@pytest.fixture(scope="module")
def built_report(results_db, tmp_path_factory):
    """The report of results_db, built once; no real build/audit/audit.json
    (from `make audit`) may leak in."""
    from qrwbench.analysis import codeid
    db, _ = results_db
    tmp = tmp_path_factory.mktemp("built-report")
    mp = pytest.MonkeyPatch()
    mp.setattr(codeid, "DEFAULT_AUDIT", str(tmp / "no-audit.json"))
    try:
        out = tmp / "report"
        paths = report.build(db, out, n_resamples=300)
    finally:
        mp.undo()
    raw = (out / "index.html").read_text()
    return out, paths, raw, unescape(raw), (out / "report.md").read_text()


def test_report_writes_index_html(built_report):
    out, paths, raw, _, md = built_report
    files = [p for v in paths.values() for p in (v if isinstance(v, list) else [v])]
    assert paths["plots"] and all(Path(p).is_file() for p in files)
    assert raw.startswith("<!DOCTYPE html>") and md.strip()


def test_every_plot_is_a_png_with_its_svg_linked(built_report):
    out, _, _, html, _ = built_report
    pngs = {p.name for p in (out / "plots").glob("*.png")}
    svgs = {p.name for p in (out / "plots").glob("*.svg")}
    assert {p[:-4] for p in pngs} == {s[:-4] for s in svgs}
    for kind in ("vcpus-", "ratio-", "writepct-", "fairness-", "history-"):
        assert any(p.startswith(kind) for p in pngs), kind
    for name in pngs:
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'plots/{name[:-4]}.svg' in html


@pytest.mark.parametrize("page", ["html", "md"])
def test_caveats_name_the_backend_and_the_kvm_reason(built_report, page):
    text = built_report[3] if page == "html" else built_report[4]
    assert analyse.TCG_CAVEAT in text
    assert "KVM unavailable on this host: kvm_pvm module: no hardware virtualization" in text


@pytest.mark.parametrize("page", ["html", "md"])
def test_caveats_give_the_host_load_of_the_boots(built_report, page):
    text = built_report[3] if page == "html" else built_report[4]
    assert ("host load: other processes used a median 25 % (max 40 %) of the host's 2 CPUs "
            "during 4 boots, hypervisor steal a median 2 %") in text


@pytest.mark.parametrize("page", ["html", "md"])
def test_verdicts_and_summary_lines(built_report, page):
    text = built_report[3] if page == "html" else built_report[4]
    assert "rig commit 222222222222" in text
    assert "faster by" in text and "slower by" in text and "equivalent within +-" in text
    assert "comparisons: " in text and "judged of" in text and "calibration: A/A" in text


@pytest.mark.parametrize("page", ["html", "md"])
def test_no_identical_label_without_an_audit(built_report, page):
    text = built_report[3] if page == "html" else built_report[4]
    assert tables.IDENTICAL not in text


@pytest.mark.parametrize("page", ["html", "md"])
def test_ns_per_op_table(built_report, page):
    text = built_report[3] if page == "html" else built_report[4]
    assert "Atomics: ns per op and thread (copy 0), raw and less the harness" in text


def test_failed_and_overcommitted_runs_are_named(built_report):
    html = built_report[3]
    assert "a1-broken" in html and "no end marker" in html
    assert "overcommitted" in html


def test_agreement_aa_and_fairness_tables(built_report):
    html = built_report[3]
    assert "kernel builds vs in-module copies" in html
    assert "A/A control" in html and "Jain" in html


def test_identical_code_label_comes_from_the_audit(results_db, tmp_path):
    db, _ = results_db
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"schema": 1, "identical": [
        {"arch": "x86_64", "impl": "inline", "op": "atomic_add_return",
         "variants": ["full", "acquire", "release", "relaxed"]}],
        "notes": [{"arch": "x86_64", "impl": "module", "op": "rwlock",
                   "variant": "relaxed", "text": "relaxed still uses lock cmpxchg"}]}))
    report.build(db, tmp_path / "r", audit_path=audit, n_resamples=200)
    md = (tmp_path / "r" / "report.md").read_text()
    labeled = [l for l in md.splitlines() if tables.IDENTICAL in l]
    assert len(labeled) == 6          # 3 variants x 2 vCPU cells, atomics only
    assert "relaxed still uses lock cmpxchg" in md
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1, "identical": [{"arch": "x86_64"}]}')
    with pytest.raises(QrwbenchError, match="variants"):
        report.build(db, tmp_path / "r2", audit_path=bad)
    assert not (tmp_path / "r2").exists()


@pytest.mark.parametrize("args,message", [
    (["--baseline", "atomics=seqcst"], "baseline variant 'seqcst'"),
    (["--commit", "3333333"], "no results for rig commit"),
])
def test_bad_selection_writes_nothing(results_db, tmp_path, capsys, args, message):
    db, _ = results_db
    out = tmp_path / "out"
    assert cli.main(["report", "--db", db, "--out", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_empty_db_is_an_error(tmp_path):
    db = str(tmp_path / "empty.sqlite")
    store.connect(db).close()
    with pytest.raises(QrwbenchError, match="empty selection"):
        report.build(db, tmp_path / "out")
    with pytest.raises(QrwbenchError, match="no results DB"):
        report.build(str(tmp_path / "missing.sqlite"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_compare_text_table(results_db):
    db, _ = results_db
    text = report.compare_text(db, workload="atomics", n_resamples=200)
    assert "(baseline full: " in text and "relaxed" in text
    rows = [l for l in text.splitlines() if l.strip().startswith("relaxed")]
    assert len(rows) == 2 and all("faster" in r for r in rows)
    assert "TCG: emulated" in text and "a1-broken" in text
    with pytest.raises(QrwbenchError, match="empty selection"):
        report.compare_text(db, arch="arm64")


def test_report_subcommand_prints_where_the_report_is(results_db, tmp_path):
    db, _ = results_db
    env = dict(os.environ, PYTHONPATH=str(ROOT / "analysis"), RESULTS_DB=db)
    res = subprocess.run([sys.executable, "-m", "qrwbench", "report", "--out",
                          str(tmp_path / "rep"), "--commit", "all"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert f"report: {tmp_path / 'rep' / 'index.html'}" in res.stdout
    assert "all rig commits" in (tmp_path / "rep" / "index.html").read_text()


def test_import_cli(tmp_path, capsys):
    runs = tmp_path / "runs"
    synth.atomics_run(runs, "x1")
    db = str(tmp_path / "db.sqlite")
    assert cli.main(["import", "--db", db, str(runs)]) == 0
    assert cli.main(["import", "--db", db, str(runs / "x1")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("x1: imported, ok") and out[1].startswith("x1: already imported")
    assert cli.main(["import", "--db", str(tmp_path / "new.sqlite"),
                     str(tmp_path / "nothing")]) == 2
    assert not (tmp_path / "new.sqlite").exists()


def test_kernel_audit_format_labels_kernel_build_comparisons(results_db, tmp_path):
    """The file qrwbench.build.audit writes: pairs of kernel builds with identical code."""
    db, _ = results_db
    audit = tmp_path / "audit.json"
    audit.write_text(json.dumps({"kernels": [], "identical": [
        {"arch": "x86_64", "a": "acqrel", "b": "full", "functions": ["_raw_read_lock"]}]}))
    text = report.compare_text(db, workload="rwlock", audit_path=audit, n_resamples=200)
    # the console table leads a labeled verdict with its label (report/console.py)
    labeled = [l for l in text.splitlines() if "identical code; " in l]
    assert len(labeled) == 2 and all(l.strip().startswith("full") for l in labeled)
    rows = text.splitlines()
    kernel_rows = [i for i, l in enumerate(rows) if " kernel rwlock " in l]
    assert kernel_rows and all("identical code; " in rows[i + 1] for i in kernel_rows)


def test_compare_text_on_an_open_connection(results_db):
    db, _ = results_db
    conn = store.connect(db)
    try:
        text = report.compare_text(conn, commit="1" * 40, n_resamples=200)
        assert "rig commit 111111111111" in text
        with pytest.raises(QrwbenchError, match="no results for rig commit"):
            report.compare_text(conn, commit="9" * 40)
    finally:
        conn.close()


def test_sweep_table_throughput_vs_vcpus():
    from qrwbench.report.sections import sweep_table

    def s(vcpus, variant, mops, oc=False, copy=0, op="rwlock"):
        return {"arch": "arm64", "accel": "tcg", "cpu_model": "max", "vcpus": vcpus,
                "workload": "rwlock", "impl": "module", "op": op, "placement": "shared",
                "params": f'{{"threads":{vcpus}}}', "variant": variant, "copy": copy, "throughput": mops * 1e6,
                "overcommitted": oc}
    samples = [s(1, "acqrel", 10), s(1, "acqrel", 12), s(1, "acqrel", 11), s(2, "acqrel", 8),
               s(4, "acqrel", 3, oc=True), s(1, "full", 9), s(4, "full", 2, oc=True),
               s(4, "full", 99, copy=1),           # the A/A copy is not in the table
               s(1, "acqrel", 5, op="other")]      # one vCPU count only: not a sweep
    t = sweep_table(samples)
    assert t.headers == ["cell", "variant", "1v", "2v", "4v"]
    assert t.rows == [["arm64/tcg/max rwlock module rwlock shared", "acqrel", "11", "8", "3*"],
                      ["arm64/tcg/max rwlock module rwlock shared", "full", "9", "-", "2*"]]
    assert sweep_table(samples[-1:]).rows == []


def test_the_console_table_fits_160_columns_and_keeps_every_row(results_db):
    """make bench's table (issue 28): long cells and verdicts wrap, nothing is cut."""
    from qrwbench.report import console
    db, _ = results_db
    r = report.compare_set(db, n_resamples=200)
    long = [c.__class__(**{**c.__dict__, "cell": c.cell.replace(
        params='{"nlocks":1,"think_work":16,"threads":2,"cs_lines":4,"write_pct":50,'
               '"placement":"percpu","note":"' + "x" * 120 + '"}')})
        for c in r.cset.comparisons]
    r.cset.comparisons = long
    text = console.text_comparison(r.cset, header="qrwbench comparison: test")
    lines = text.splitlines()
    assert max(len(l) for l in lines) <= console.WIDTH, max(lines, key=len)
    flat = " ".join(l.strip() for l in lines)
    for c in long:
        assert c.variant in text and c.verdict.split(" (")[0] in flat
    assert "x" * 120 in "".join(l.strip() for l in lines), "the long cell wraps, it is not cut"

"""perf stat around a real process: parsed, unsupported events recorded as such."""
import subprocess

import pytest

from qrwbench.run import perf
from qrwbench.cell import Cell


def test_parse_real_perf_stat_output(tmp_path):
    if not perf.available():
        pytest.fail("perf missing: apt-get install linux-perf (make deps)")
    csv = tmp_path / "perf.csv"
    r = subprocess.run(perf.stat_prefix(csv) + ["sh", "-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = perf.parse_stat_csv(csv.read_text())
    assert set(got) == set(perf.EVENTS)
    assert got["task-clock"]["supported"] and got["task-clock"]["value"] > 0
    for ev in ("cycles", "instructions"):
        # Either counted (a host with a PMU) or recorded as not supported.
        assert (got[ev]["value"] is None) == (not got[ev]["supported"])


def test_not_supported_and_garbage():
    got = perf.parse_stat_csv("# started\n\n<not supported>,,cycles,0,100.00,,\n1.5,msec,task-clock,1,100.00,0.3,CPUs\n")
    assert got["cycles"] == {"value": None, "unit": "", "supported": False}
    assert got["task-clock"]["value"] == 1.5
    with pytest.raises(ValueError, match="not understood"):
        perf.parse_stat_csv("garbage\n")


KVM_REPORT = """

Analyze events for all VMs, all VCPUs:

             VM-EXIT    Samples  Samples%     Time%    Min Time    Max Time         Avg time

           MSR_WRITE       1668    32.13%     0.37%      0.57us     16.14us      1.14us ( +-   2.86% )
                 HLT       1302    25.08%    98.76%      1.39us  36547.71us    391.36us ( +-   6.50% )
  EXTERNAL_INTERRUPT       2221    42.79%     0.87%      0.42us    103.10us      1.02us ( +-   4.48% )

Total Samples:5191, Total events handled time:516040.55us.
"""


def test_parse_kvm_stat_report():
    got = perf.parse_kvm_stat_report(KVM_REPORT)
    assert got["total"] == 5191 and got["handled_us"] == 516040.55
    assert got["exits"]["HLT"] == {"samples": 1302, "time_pct": 98.76, "avg_us": 391.36}
    assert set(got["exits"]) == {"MSR_WRITE", "HLT", "EXTERNAL_INTERRUPT"}
    with pytest.raises(ValueError, match="add up"):
        perf.parse_kvm_stat_report(KVM_REPORT.replace("1302", "1303"))
    with pytest.raises(ValueError, match="Total Samples"):
        perf.parse_kvm_stat_report("perf: command not found\n")


def test_real_perf_kvm_stat_of_a_process_without_a_vm(tmp_path):
    """perf kvm stat record/report on this host, around a process with no VM:
    a real report with zero exits (what a failed KVM boot gives here)."""
    if not perf.usable("kvm")[0]:
        pytest.fail(f"perf kvm stat unusable: {perf.usable('kvm')[1]}")
    data = tmp_path / "k.data"
    subprocess.run(perf.kvm_stat_prefix(data) + ["true"], check=True, capture_output=True)
    rep = subprocess.run(perf.kvm_stat_report_cmd(data), capture_output=True, text=True, check=True)
    # perf 6.1 prints the report on stderr
    assert perf.parse_kvm_stat_report(rep.stdout + rep.stderr) == {"exits": {}, "total": 0, "handled_us": 0.0}


def test_perf_prefix_per_accel(tmp_path, monkeypatch):
    from qrwbench.run import boot
    tcg = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 1, ())
    kvm = Cell.boot("x86_64", "kvm", "host", "acqrel", "atomics", 1, ())
    monkeypatch.setenv("QRWB_PERF", "1")
    pre, note = boot.perf_prefix(kvm, tmp_path)
    assert pre[:2] == ["perf", "stat"] and pre[-7:-3] == ["perf", "kvm", "stat", "record"]
    assert pre[-1] == "--" and note == {}
    pre, note = boot.perf_prefix(tcg, tmp_path)
    assert "kvm" not in pre and note == {"kvm_stat": "not a KVM run"}
    monkeypatch.setenv("QRWB_PERF", "0")
    assert boot.perf_prefix(kvm, tmp_path) == ([], {"stat": "off (QRWB_PERF=0)"})


@pytest.mark.guest
def test_perf_stat_of_a_real_guest_boot_is_stored_and_reported(tmp_path, monkeypatch):
    import json
    from conftest import kernel_dir
    from qrwbench.results import store
    from qrwbench.report import report
    from qrwbench.run import boot
    kernel_dir("x86_64", "acqrel")
    monkeypatch.delenv("QRWB_PERF", raising=False)      # on by default
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 1,
                    (("duration_ms", 2), ("ops", "atomic_add_return"), ("reps", 1)))
    st = boot.boot_one(c, 1, tmp_path / "run", 60, 256, boot.NOT_ASKED)
    assert st["status"] == "ok", st
    counts = json.loads((tmp_path / "run" / "status.json").read_text())["perf"]
    assert counts["stat"]["task-clock"]["value"] > 0 and "cycles" in counts["stat"]
    assert counts["kvm_stat"] is None and counts["why"]["kvm_stat"] == "not a KVM run"
    cmd = json.loads((tmp_path / "run" / "provenance.json").read_text())["qemu_cmd"]
    assert cmd[:2] == ["perf", "stat"]
    conn = store.connect(tmp_path / "r.sqlite")
    store.import_run(conn, tmp_path / "run")
    rows = {r["event"]: r for r in store.load_perf(conn)}
    assert set(rows) == set(perf.EVENTS)
    assert rows["task-clock"]["value"] == counts["stat"]["task-clock"]["value"]
    for ev in ("cycles", "instructions"):
        assert (rows[ev]["value"] is None) == (not rows[ev]["supported"])
    out = report.build(tmp_path / "r.sqlite", tmp_path / "report", n_resamples=200)
    md = open(out["markdown"]).read()
    assert "Host perf stat of the QEMU process" in md
    line = next(l for l in md.splitlines() if "x86_64/tcg/max acqrel atomics 1v" in l and "| no |" in l)
    if not rows["cycles"]["supported"]:
        assert "not supported" in line

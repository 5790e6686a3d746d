"""`make bench` as a process: hangs, interrupts, two at once, bad directories.
These boot real x86_64 TCG guests through python3 -m qrwbench bench."""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import re

import pytest

from conftest import TOP, kernel_dir

# Markers per test: guest (boots, or the KVM probe's boot), kernel (no boot,
# but write_matrix asks for a built kernel); the unmarked ones are host-only.

MATRIX = """
[run]
boots = {boots}
timeout_s = {timeout}
test_workloads = true
[[target]]
arch = "x86_64"
accel = "tcg"
cpu = "max"
{workloads}
"""
ATOMICS = """
[[workload]]
name = "atomics"
variants = ["acqrel"]
vcpus = [1]
params = {{ ops = "atomic_add_return", reps = {reps}, duration_ms = 5 }}
"""
HANG = """
[[workload]]
name = "hang"
variants = ["acqrel"]
vcpus = [1]
"""


def write_matrix(tmp_path, workloads, boots=1, timeout=60, reps=2):
    kernel_dir("x86_64", "acqrel")
    p = tmp_path / "m.toml"
    p.write_text(MATRIX.format(boots=boots, timeout=timeout, workloads=workloads.format(reps=reps)))
    return p


def bench_cmd(tmp_path, matrix_path, *extra):
    return [sys.executable, "-m", "qrwbench", "bench", "--matrix", str(matrix_path),
            "--db", str(tmp_path / "db.sqlite"), "--runs", str(tmp_path / "runs"), "--no-summary", *extra]


ENV = dict(os.environ, PYTHONPATH=str(TOP / "analysis"))


def runs_in_db(tmp_path):
    con = sqlite3.connect(tmp_path / "db.sqlite")
    try:
        return con.execute("SELECT run_id, status FROM runs").fetchall()
    finally:
        con.close()


def qemus_for(path: Path) -> list[int]:
    """QEMU processes whose command line mentions `path`."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "qemu-system" in cmd and str(path) in cmd:
            pids.append(int(d.name))
    return pids


@pytest.mark.guest
def test_hanging_guest_fails_its_run_and_the_matrix_goes_on(tmp_path):
    m = write_matrix(tmp_path, HANG + ATOMICS, timeout=12)
    r = subprocess.run(bench_cmd(tmp_path, m), env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 runs ok, 1 failed" in r.stdout
    assert "did not finish within 12 s" in r.stdout
    rows = dict(runs_in_db(tmp_path))
    assert sorted(rows.values()) == ["failed", "ok"]
    hang_dir = next((tmp_path / "runs").glob("*-hang-*"))
    st = json.loads((hang_dir / "status.json").read_text())
    assert st["timed_out"] and st["console_tail"]
    assert qemus_for(tmp_path / "runs") == [], "the timed-out QEMU is still running"
    # the closing summary lists the failure (not only the per-run FAILED line)
    summary = r.stdout[r.stdout.index("1 runs ok, 1 failed"):]
    assert f"failed: {hang_dir.name}: guest did not finish within 12 s" in summary, summary


@pytest.mark.guest
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_kills_qemu_keeps_complete_runs_and_resumes(tmp_path, sig):
    m = write_matrix(tmp_path, ATOMICS, boots=4, reps=4)
    p = subprocess.Popen(bench_cmd(tmp_path, m), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    runs = tmp_path / "runs"
    deadline = time.monotonic() + 120
    # Wait until one run is complete and the next guest is running.
    while time.monotonic() < deadline:
        done = list(runs.glob("*/status.json"))
        if done and len(list(runs.glob("*/console.log"))) > len(done) and qemus_for(runs):
            break
        time.sleep(0.1)
    else:
        p.kill()
        pytest.fail("matrix did not get to its second boot")
    p.send_signal(sig)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, out
    assert f"interrupted by {sig.name}" in out
    time.sleep(0.5)
    assert qemus_for(runs) == [], "orphan QEMU left behind"
    stored = runs_in_db(tmp_path)
    complete = {d.parent.name for d in runs.glob("*/status.json")}
    assert stored and {rid for rid, _ in stored} == complete
    assert all(s == "ok" for _, s in stored)
    # Re-running skips what is done and finishes the rest.
    r = subprocess.run(bench_cmd(tmp_path, m), env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(stored)} already done" in r.stdout
    assert len(runs_in_db(tmp_path)) == 4


@pytest.mark.guest
def test_second_bench_refuses_while_one_runs(tmp_path):
    m = write_matrix(tmp_path, ATOMICS, boots=3, reps=4)
    p = subprocess.Popen(bench_cmd(tmp_path, m), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not qemus_for(tmp_path / "runs"):
            time.sleep(0.1)
        r = subprocess.run(bench_cmd(tmp_path, m), env=ENV, capture_output=True, text=True, timeout=60)
        assert r.returncode == 2
        assert f"another 'make bench' (pid {p.pid}) is running" in r.stderr
    finally:
        out, _ = p.communicate(timeout=300)
    assert p.returncode == 0, out
    con = sqlite3.connect(tmp_path / "db.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.kernel
def test_unwritable_results_dir_is_refused_before_work(tmp_path):
    m = write_matrix(tmp_path, ATOMICS)
    cmd = bench_cmd(tmp_path, m)
    cmd[cmd.index("--db") + 1] = "/proc/qrwbench-nowhere/db.sqlite"
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "cannot create /proc/qrwbench-nowhere" in r.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.kernel
def test_existing_but_unwritable_runs_dir_is_refused_before_work(tmp_path):
    # sysfs refuses new files even to root: a directory that exists but takes no writes
    m = write_matrix(tmp_path, ATOMICS)
    cmd = bench_cmd(tmp_path, m)
    cmd[cmd.index("--runs") + 1] = "/sys/kernel"
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "/sys/kernel is not writable: Permission denied" in r.stderr
    assert r.stderr.count("\n") == 1 and "boots of" not in r.stdout


def test_full_disk_is_refused_before_work(tmp_path, monkeypatch):
    from qrwbench.run import bench
    import shutil
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(100, 99, 1 << 20))
    with pytest.raises(bench.InputError, match="only 1 MiB free"):
        bench.preflight(tmp_path / "db.sqlite", tmp_path / "runs")


@pytest.mark.guest
def test_kvm_asked_for_but_unusable_fails_with_the_probe_reason(tmp_path, monkeypatch):
    from qrwbench import matrix
    from qrwbench.run import bench, kvm
    kernel_dir("x86_64", "acqrel")      # the probe boots it; unbuilt, that is the reason
    if kvm.static_check("x86_64")[0]:
        pytest.skip("this host has usable KVM")
    p = tmp_path / "m.toml"
    p.write_text(MATRIX.format(boots=1, timeout=30, workloads=ATOMICS.format(reps=1))
                 .replace('accel = "tcg"\ncpu = "max"', 'accel = "kvm"\ncpu = "host"'))
    # the real probe (a cached KVM boot of the rig's guest): its reason is in the error
    with pytest.raises(bench.InputError, match="KVM asked for \\(x86_64\\) but unusable: " +
                       re.escape(kvm.static_check("x86_64")[1])):
        bench.run_matrix(matrix.load(p), tmp_path / "db.sqlite", False, summary=False, runs=tmp_path / "runs")


@pytest.mark.guest
def test_a_short_real_bench_ends_with_the_two_summary_lines(tmp_path):
    """Two boots of one atomics cell (2 vCPUs, one op and smp_mb), and a
    calibration cell with the injected barrier: the output ends with the
    comparisons line and the calibration line, in the documented format; a
    stopping rule with max_boots 3 adds a round or says why it ended."""
    inject = ATOMICS.replace("vcpus = [1]", "vcpus = [2]").replace(
        'ops = "atomic_add_return"', 'ops = "atomic_add_return,smp_mb", aa_inject_mb = 1')
    p = write_matrix(tmp_path, inject, boots=2, reps=6)
    p.write_text(p.read_text().replace("boots = 2", "boots = 2\nmax_boots = 3\nbudget_min = 10"))
    cmd = [c for c in bench_cmd(tmp_path, p) if c != "--no-summary"]
    r = subprocess.run(cmd, cwd=TOP, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert re.fullmatch(r"comparisons: \d+ judged of \d+ distinguishable \(slower \d+, faster \d+, "
                        r"equivalent \d+, inconclusive \d+\); emulator-blind \d+, identical code \d+; "
                        r"median CI half-width in-boot (\d+\.\d %|-), "
                        r"kernel builds (\d+\.\d %|-)", lines[-2]), lines[-2]
    assert re.fullmatch(r"calibration: A/A \d+ of \d+ significant at alpha 0\.05; "
                        r"injected barrier detected \d+ of [1-9]\d*", lines[-1]), lines[-1]
    assert any(l.startswith("bench: cells ended by ") for l in lines), r.stdout[-2000:]
    assert any(re.fullmatch(r"bench: host load: other processes used a median \d+ % \(max \d+ %\) "
                            r"of the host's \d+ CPUs during \d+ boots, hypervisor steal a median "
                            r"\d+ %; a busy host widens every interval \(docs/validity\.md\)", l)
               for l in lines), r.stdout[-2000:]

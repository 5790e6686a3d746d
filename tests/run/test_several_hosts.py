"""`make bench HOSTS=...` over real ssh: sshd instances on loopback addresses
act as hosts (loopback.py); GNU parallel runs the boots on them."""
import json
import os
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import TOP, kernel_dir
from loopback import Loopback
from qrwbench.analysis import compare
from qrwbench.run import remote
from qrwbench.vocab import InputError
from qrwbench.cell import Cell

# Markers per test: guest (boots over the loopback hosts), kernel (needs a
# built kernel); the unmarked ones are host-only (make check).
MATRIX = """
[run]
boots = {boots}
timeout_s = 120
mem_mb = 256
seed = 5
[[target]]
arch = "x86_64"
accel = "tcg"
cpu = "max"
[[target]]
arch = "x86_64"
accel = "kvm"
cpu = "host"
optional = true
[[workload]]
name = "atomics"
variants = ["acqrel"]
vcpus = [1]
params = {{ reps = 3, duration_ms = 2, ops = "empty,atomic_add_return" }}
"""


@pytest.fixture
def hosts(tmp_path):
    kernel_dir("x86_64", "acqrel")
    lb = Loopback(tmp_path / "hosts", 2)
    lb.start()
    yield lb
    lb.stop()


def bench(tmp_path, lb, names, boots, **popen):
    m = tmp_path / "m.toml"
    m.write_text(MATRIX.format(boots=boots))
    env = {**os.environ, **lb.env, "PYTHONPATH": str(TOP / "analysis"), "QRWB_PERF": "0"}
    cmd = [sys.executable, "-m", "qrwbench", "bench", "--matrix", str(m), "--db",
           str(tmp_path / "r.sqlite"), "--runs", str(tmp_path / "runs"), "--hosts", names,
           "--no-summary"]
    return subprocess.Popen(cmd, env=env, cwd=TOP, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


def runs_of(tmp_path):
    conn = sqlite3.connect(tmp_path / "r.sqlite")
    rows = conn.execute("SELECT run_id, status, host, reason FROM runs").fetchall()
    n = dict(conn.execute("SELECT run_id, COUNT(*) FROM samples GROUP BY run_id").fetchall())
    conn.close()
    return rows, n


@pytest.mark.guest
def test_a_host_killed_mid_matrix_loses_no_run_and_nothing_counts_twice(tmp_path, hosts):
    """Eight boots on two hosts; host1 dies (sshd and its running boot
    killed) once it has finished one boot. Every boot ends up stored once,
    ok; host1's finished runs are kept; its unfinished one ran on host0."""
    p = bench(tmp_path, hosts, "host0,host1", 8)
    deadline = time.monotonic() + 400
    killed = False
    while p.poll() is None and time.monotonic() < deadline:
        if not killed and (tmp_path / "r.sqlite").exists():
            try:
                rows, _ = runs_of(tmp_path)
            except sqlite3.Error:
                rows = []
            if any(h == "host1" and s == "ok" for _, s, h, _ in rows):
                hosts.hosts[1].kill()
                killed = True
        time.sleep(0.2)
    if p.poll() is None:
        p.kill()
        pytest.fail("bench over two hosts did not end within 400 s")
    out = p.stdout.read()
    assert killed, out
    rows, nsamples = runs_of(tmp_path)
    assert len(rows) == 8 and all(s == "ok" for _, s, _, _ in rows), (rows, out)
    assert len({r for r, *_ in rows}) == 8
    on = {h: sum(1 for _, _, hh, _ in rows if hh == h) for h in ("host0", "host1")}
    assert on["host1"] >= 1 and on["host0"] >= 4 and on["host0"] + on["host1"] == 8, on
    # one boot = 2 ops x their orderings x 2 copies x 2 placements x 3 reps, every run the same
    assert len(set(nsamples.values())) == 1 and len(nsamples) == 8, nsamples
    assert "host host0: x86_64" in out and "x86_64/kvm" in out     # KVM left out, with why
    # provenance names the host and its CPU; the console came back
    for rid, _, h, _ in rows:
        prov = json.loads((tmp_path / "runs" / rid / "provenance.json").read_text())
        assert prov["host"] == h and prov["host_cpu_model"] and prov["remote"]["exitval"] == 0
        assert b'"type":"end"' in (tmp_path / "runs" / rid / "console.log").read_bytes()
    # the files went to each host once, by content: kernel, initramfs, TSC tool
    for h in hosts.hosts:
        blobs = sorted(p.name for p in (h.root / "blobs").iterdir())
        assert len(blobs) == 3 and all(len(b) == 64 for b in blobs), blobs
    # resumed, nothing is booted again (host1 is still dead: it is left out)
    p2 = bench(tmp_path, hosts, "host0,host1", 8)
    out2 = p2.communicate(timeout=120)[0]
    assert p2.returncode == 0, out2
    assert "0 runs ok, 0 failed, 8 already done" in out2 and "host host1 left out" in out2, out2
    assert runs_of(tmp_path)[0] == rows


@pytest.mark.guest
def test_an_unreachable_host_is_left_out_with_its_reason(tmp_path, hosts):
    p = bench(tmp_path, hosts, "host0,nohost", 2)
    out = p.communicate(timeout=300)[0]
    assert p.returncode == 0, out
    assert "bench: host nohost left out: nohost: unreachable over ssh" in out, out
    rows, _ = runs_of(tmp_path)
    assert [(s, h) for _, s, h, _ in rows] == [("ok", "host0")] * 2


@pytest.mark.guest
def test_no_reachable_host_is_a_one_line_error_before_any_boot(tmp_path, hosts):
    p = bench(tmp_path, hosts, "nohost", 2)
    out = p.communicate(timeout=120)[0]
    assert p.returncode == 2 and out.count("\n") == 1, out
    assert out.startswith("qrwbench: error: no host of HOSTS can run boots: nohost: unreachable")
    assert not (tmp_path / "runs").exists() or not any(
        d.name != ".bench.lock" for d in (tmp_path / "runs").iterdir())


@pytest.mark.parametrize("spec,msg", [
    ("", "give ssh host names"), ("a,,b", "give ssh host names"),
    ("a;rm -rf /", "'a;rm -rf /' is not an ssh host name"), ("a,a", "a given twice"),
    ("-oProxyCommand=x", "is not an ssh host name")])
def test_bad_hosts_are_named(spec, msg):
    with pytest.raises(InputError, match=msg.replace("(", r"\(")):
        remote.parse_hosts(spec)


def test_joblog_lines_are_read_once_and_half_written_ones_wait(tmp_path):
    log = tmp_path / "joblog"
    head = "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n"
    log.write_text(head + "1\thost0\t100.5\t2.0\t0\t10\t0\t0\tsh /r/jobs/abc.sh\n2\thost1\t10")
    seen = set()
    got = remote.read_joblog(log, seen)
    assert got == [("abc", {"host": "host0", "start": 100.5, "runtime": 2.0, "exitval": 0,
                            "signal": 0})]
    log.write_text(head + "1\thost0\t100.5\t2.0\t0\t10\t0\t0\tsh /r/jobs/abc.sh\n"
                   "2\thost1\t101\t0.1\t0\t0\t255\t0\tsh /r/jobs/def.sh\n")
    assert [(j, r["exitval"]) for j, r in remote.read_joblog(log, seen)] == [("def", 255)]
    assert remote.read_joblog(log, seen) == []


def test_the_host_is_a_blocking_factor():
    """Host b is 30 % slower in everything: comparisons stay within a host
    (each host's relaxed/full ratio is found), none pairs the two."""
    rng = np.random.default_rng(1)
    samples = []
    for host, speed in (("a", 1.0), ("b", 0.7)):
        for boot in range(2):
            for rep in range(10):
                for v, f in (("full", 1.0), ("relaxed", 1.2)):
                    samples.append({
                        "arch": "x86_64", "accel": "tcg", "cpu_model": "max", "vcpus": 2,
                        "workload": "atomics", "impl": "inline", "op": "atomic_add_return",
                        "placement": "shared", "params": "{}", "variant": v, "copy": 0,
                        "run_id": f"{host}-{boot}", "rep": rep, "host": host,
                        "started_at": f"{boot}", "per_thread_ops": [1, 1],
                        "throughput": 1e7 * speed * f * rng.lognormal(0, 0.01)})
    cset = compare.compare_cells(samples)
    assert sorted(c.cell.host for c in cset.comparisons) == ["a", "b"]
    for c in cset.comparisons:
        assert {r.split("-")[0] for r in c.runs} == {c.cell.host}
        assert c.kind == "faster" and 1.17 < c.test.ratio < 1.23, c.verdict
        assert c.cell.label().endswith(f"@{c.cell.host}")
    assert len({c.family for c in cset.comparisons}) == 2


@pytest.mark.kernel       # no boot, but the built kernel and initramfs (kernel_paths)
def test_a_job_script_runs_qemu_under_timeout_with_the_hosts_tsc():
    from qrwbench.run import bench_remote

    class FakeHosts(bench_remote.Hosts):
        def __init__(self):
            self.blobs = {}
    kernel_dir("x86_64", "acqrel")
    from qrwbench.run.boot import kernel_paths
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 1, (("ops", "empty"),))
    h = FakeHosts()
    script, argv = bench_remote.job_for(h, c, 7, "rid1", 99, 256, kernel_paths("x86_64", "acqrel"))
    lines = script.splitlines()
    assert lines[-1].startswith("exec timeout -k 10 99 qemu-system-x86_64 ")
    assert lines[-2].startswith("tsc=$(") and "tsc_early_khz='\"$tsc\"'" in lines[-1]
    assert len(h.blobs) == 3 and all(remote.blob_path(s) in script for s in h.blobs)
    # the shell turns it back into one -append argument with the host's rate
    r = subprocess.run(["sh", "-c", "tsc=1234\nset -- " + lines[-1].split(" ", 5)[5]
                        .replace("</dev/null", "") + '\nfor a; do echo "$a"; done'],
                       capture_output=True, text=True, check=True)
    args = r.stdout.splitlines()
    append = args[args.index("-append") + 1]
    assert "tsc_early_khz=1234 tsc=reliable" in append and "qrwbench.ops=empty" in append

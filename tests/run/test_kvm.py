"""ACCEL=kvm: real guests under KVM where the host has hardware virtualization;
here (kvm_pvm, or an arm64 guest on an x86_64 host) the tests skip with the
probe's reason, and asking for KVM is a one-line error naming it."""
import json
import subprocess

import pytest

from conftest import TOP, kernel_dir
from qrwbench import matrix
from qrwbench.results import store
from qrwbench.run import boot, ktree, perf

# Markers per test: guest (a boot, or the KVM probe's); the unmarked ones are host-only.
PYENV = {"PYTHONPATH": str(TOP / "analysis"), "PATH": "/usr/bin:/bin"}


def verdict(arch):
    kernel_dir(arch, "acqrel")
    return boot.kvm_probe_one(arch)


@pytest.mark.guest
@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_guest_under_kvm(arch, tmp_path):
    # through the CELL parser, before the skip: the op list is checked against
    # qrwb_ops.def on every host, not first by the module on one where KVM works
    cell = ktree.parse_cell(f"{arch}/kvm/host/acqrel/atomics:duration_ms=5,"
                            "ops=atomic_add_return,smp_mb,reps=2/2")
    v = verdict(arch)
    if not v["usable"]:
        pytest.skip(f"KVM unusable for {arch} guests here: {v['reason']}")
    st = boot.boot_one(cell, 1, tmp_path / "run", 120, 256, v)
    assert st["status"] == "ok", st
    cmd = json.loads((tmp_path / "run" / "provenance.json").read_text())["qemu_cmd"]
    assert "-accel" in cmd and cmd[cmd.index("-accel") + 1] == "kvm" and "host" in cmd
    conn = store.connect(tmp_path / "r.sqlite")
    res = store.import_run(conn, tmp_path / "run")
    assert res.status == "ok" and res.samples > 0
    if perf.usable("kvm")[0]:
        exits = [r for r in store.load_perf(conn) if r["tool"] == "kvm-stat"]
        assert exits and sum(r["value"] for r in exits) > 0, st["perf"]


@pytest.mark.guest
def test_accel_kvm_here_names_the_probe_reason(tmp_path):
    v = verdict("x86_64")
    if v["usable"]:
        pytest.skip("KVM is usable here: test_guest_under_kvm covers ACCEL=kvm")
    r = subprocess.run(["/usr/bin/python3", "-m", "qrwbench", "bench", "--quick", "--accel", "kvm",
                        "--db", str(tmp_path / "r.sqlite"), "--runs", str(tmp_path / "runs")],
                       cwd=TOP, env=PYENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qrwbench: error: KVM asked for (")
    assert v["reason"] in lines[0]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("*/console.log"))


def test_accel_tcg_drops_kvm_targets():
    m = matrix.with_accel(matrix.load(TOP / "bench" / "matrix" / "default.toml"), "tcg")
    assert m.targets and all(t["accel"] == "tcg" for t in m.targets)
    k = matrix.with_accel(matrix.load(TOP / "bench" / "matrix" / "default.toml"), "kvm")
    assert {(t["arch"], t["accel"], t["cpu"], t["optional"]) for t in k.targets} == {
        (a, "kvm", "host", False) for a in {t["arch"] for t in m.targets}}
    with pytest.raises(matrix.InputError, match="unknown accel 'hvf'"):
        matrix.with_accel(m, "hvf")


# ------------------------------------------------------------ nested (issue 25)
# Where /dev/kvm cannot boot a guest (these machines), the KVM path runs for
# real inside a TCG guest that is a KVM host: make kvm-nested. Slow (an L1
# boot under TCG, then L2 boots under KVM inside it): make test-slow.

def nested_db(tmp_path):
    return tmp_path / "r.sqlite", tmp_path / "runs"


@pytest.mark.slow
@pytest.mark.guest
def test_arm64_guests_boot_under_nested_kvm_and_are_stored_apart(tmp_path, capsys):
    from qrwbench.run import nested
    db, runs = nested_db(tmp_path)
    cells = nested.parse_cells("arm64", [])      # the atomics and the rwlock cell
    assert {c.workload for c in cells} == {"atomics", "rwlock"}
    status, lines = nested.boot_nested("arm64", cells, db, runs, timeout_s=600,
                                       out=tmp_path / "nested")
    assert status == 0, "\n".join(lines)
    assert "KVM probe inside L1: guest booted under KVM" in lines[0]
    ok = [l for l in lines if ": ok: " in l]
    assert len(ok) == 2 and all(l.endswith(", nested)") for l in ok), lines
    conn = store.connect(db)
    rows = store.load_runs(conn)
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows), rows
    for r in rows:
        prov = json.loads(r["provenance"])
        assert r["accel"] == "kvm" and r["cpu_model"] == "host" and r["host"] == store.NESTED_HOST
        assert prov["nested"]["l1_kernel_release"] and "virtualization=on" in prov["nested"]["l1_machine"]
        assert prov["kvm_probe"]["usable"] and prov["qemu_cmd"][prov["qemu_cmd"].index("-accel") + 1] == "kvm"
        assert any("kvm" in l.lower() for l in prov["nested"]["l1_kvm_lines"])
    samples = store.load_samples(conn)
    assert {s["workload"] for s in samples} == {"atomics", "rwlock"}
    assert all(s["host"] == store.NESTED_HOST for s in samples)
    conn.close()


@pytest.mark.slow
@pytest.mark.guest
def test_a_broken_kvm_command_line_fails_with_qemus_own_message(tmp_path, monkeypatch):
    """A GIC the L1 host lacks (TCG's GICv3 has no GICv2 compatibility): QEMU
    inside L1 refuses, its message is in the run's console, the run failed."""
    from qrwbench.run import nested
    real = nested.l2_command
    probe = boot.probe_cell("arm64")
    monkeypatch.setattr(nested, "l2_command", lambda c, s: real(c, s) + (
        [] if c == probe else ["-machine", "gic-version=2"]))
    db, runs = nested_db(tmp_path)
    cells = nested.parse_cells("arm64", [nested.DEFAULT_CELLS["arm64"][0]])
    status, lines = nested.boot_nested("arm64", cells, db, runs, timeout_s=600,
                                       out=tmp_path / "nested")
    assert status == 1 and "FAILED" in lines[-1], lines
    conn = store.connect(db)
    (row,) = store.load_runs(conn)
    conn.close()
    assert row["status"] == "failed" and "QEMU exited with status 1" in row["reason"], row["reason"]
    console = (runs / row["run_id"] / "console.log").read_text()
    assert "qemu-system-aarch64:" in console and "gic" in console.lower(), console[-2000:]


@pytest.mark.slow
@pytest.mark.guest
def test_x86_64_guests_boot_under_nested_kvm_on_tcgs_svm(tmp_path):
    """kvm_amd in an L1 on TCG's SVM (-cpu max,-xsave: with XSAVE the L2
    kernel warns about the XSAVE size and the fault scan rejects the run)."""
    from qrwbench.run import nested
    db, runs = nested_db(tmp_path)
    cells = nested.parse_cells("x86_64", [nested.DEFAULT_CELLS["x86_64"][0]])
    status, lines = nested.boot_nested("x86_64", cells, db, runs, timeout_s=600,
                                       out=tmp_path / "nested")
    assert status == 0 and lines[-1].endswith(", nested)"), lines
    conn = store.connect(db)
    (row,) = store.load_runs(conn)
    conn.close()
    prov = json.loads(row["provenance"])
    assert row["status"] == "ok" and row["host"] == store.NESTED_HOST
    assert any("kvm_amd" in l for l in prov["nested"]["l1_kvm_lines"])

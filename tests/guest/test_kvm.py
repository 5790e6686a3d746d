"""ACCEL=kvm: real guests under KVM where the host has hardware virtualization;
here (kvm_pvm, or an arm64 guest on an x86_64 host) the tests skip with the
probe's reason, and asking for KVM is a one-line error naming it."""
import json
import subprocess

import pytest

from conftest import TOP, kernel_dir
from qrwbench import matrix
from qrwbench.results import store
from qrwbench.run import bench, ktree, perf

pytestmark = pytest.mark.guest
PYENV = {"PYTHONPATH": str(TOP / "analysis"), "PATH": "/usr/bin:/bin"}


def verdict(arch):
    kernel_dir(arch, "acqrel")
    return bench.kvm_probe_one(arch)


@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_guest_under_kvm(arch, tmp_path):
    # through the CELL parser, before the skip: the op list is checked against
    # qrwb_ops.def on every host, not first by the module on one where KVM works
    cell = ktree.parse_cell(f"{arch}/kvm/host/acqrel/atomics:duration_ms=5,"
                            "ops=atomic_add_return,smp_mb,reps=2/2")
    v = verdict(arch)
    if not v["usable"]:
        pytest.skip(f"KVM unusable for {arch} guests here: {v['reason']}")
    st = bench.boot_one(cell, 1, tmp_path / "run", 120, 256, v)
    assert st["status"] == "ok", st
    cmd = json.loads((tmp_path / "run" / "provenance.json").read_text())["qemu_cmd"]
    assert "-accel" in cmd and cmd[cmd.index("-accel") + 1] == "kvm" and "host" in cmd
    conn = store.connect(tmp_path / "r.sqlite")
    res = store.import_run(conn, tmp_path / "run")
    assert res.status == "ok" and res.samples > 0
    if perf.usable("kvm")[0]:
        exits = [r for r in store.load_perf(conn) if r["tool"] == "kvm-stat"]
        assert exits and sum(r["value"] for r in exits) > 0, st["perf"]


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

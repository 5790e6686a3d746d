"""vCPU pinning (matrix [run] pin = true): QEMU's vCPU threads found by name
and bound with sched_setaffinity; checked on a real QEMU process."""
import os
import subprocess
import time

import pytest

from qrwbench.run import pin
from qrwbench.cell import Cell


def test_plan_round_robin_and_overcommit():
    assert pin.plan(3, [4, 2]) == {0: 2, 1: 4, 2: 2}
    assert pin.plan(1, [7]) == {0: 7}
    with pytest.raises(ValueError, match="no host CPUs"):
        pin.plan(2, [])


def test_vcpu_threads_from_a_fake_proc(tmp_path):
    """/proc layout: session of the launcher, QEMU's comm, thread names."""
    def proc(pid, comm, sid, tasks=()):
        d = tmp_path / str(pid)
        (d / "task").mkdir(parents=True)
        (d / "comm").write_text(comm + "\n")
        (d / "stat").write_text(f"{pid} ({comm}) S 1 {sid} {sid} 0 -1\n")
        for tid, name in tasks:
            (d / "task" / str(tid)).mkdir()
            (d / "task" / str(tid) / "comm").write_text(name + "\n")
    proc(100, "perf", 100)
    proc(101, "qemu-system-x86", 100, [(101, "qemu-system-x86"), (105, "CPU 1/TCG"),
                                       (104, "CPU 0/TCG"), (106, "worker")])
    proc(200, "qemu-system-x86", 200, [(201, "CPU 0/KVM")])
    assert pin.session_qemu(100, tmp_path) == 101
    assert pin.session_qemu(300, tmp_path) is None
    assert pin.vcpu_threads(101, tmp_path) == {0: 104, 1: 105}
    calls = []
    p = pin.Pinner(100, {0: 1, 1: 0}, tmp_path, setaffinity=lambda t, c: calls.append((t, c)))
    assert p.poll() and p.result["pinned"] and calls == [(104, {1}), (105, {0})]
    # three vCPUs asked, two threads exist: not yet; then give up with a reason
    p = pin.Pinner(100, {0: 0, 1: 1, 2: 0}, tmp_path, setaffinity=lambda t, c: None)
    assert not p.poll()
    assert p.give_up() == {"pinned": False, "reason": "QEMU's vCPU threads (CPU n/TCG|KVM) never appeared"}


def test_pins_the_vcpu_threads_of_a_real_qemu():
    """A real qemu-system-x86_64 (-S: vCPU threads created, guest not started)."""
    cpus = sorted(os.sched_getaffinity(0))
    plan = pin.plan(3, cpus)
    p = subprocess.Popen(["qemu-system-x86_64", "-M", "microvm", "-accel", "tcg,thread=multi",
                          "-smp", "3", "-m", "64M", "-nodefaults", "-nographic", "-S",
                          "-monitor", "none", "-serial", "none", "-name", "t,debug-threads=on"],
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        pinner = pin.Pinner(p.pid, plan)
        deadline = time.monotonic() + 20
        while not pinner.poll() and time.monotonic() < deadline:
            time.sleep(0.05)
        res = pinner.give_up()
        assert res["pinned"], res
        assert sorted(res["threads"]) == ["vcpu 0", "vcpu 1", "vcpu 2"]
        for n in range(3):
            t = res["threads"][f"vcpu {n}"]
            assert os.sched_getaffinity(t["tid"]) == {plan[n]}
            with open(f"/proc/{p.pid}/task/{t['tid']}/comm") as f:
                assert f.read().strip() == f"CPU {n}/TCG"
    finally:
        p.kill()
        p.wait()


@pytest.mark.guest
def test_pinned_guest_boot_is_recorded(tmp_path):
    from conftest import kernel_dir
    from qrwbench.results import store
    from qrwbench.run import boot
    kernel_dir("x86_64", "acqrel")
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 2,
                    (("duration_ms", 2), ("ops", "atomic_add_return"), ("reps", 1)))
    st = boot.boot_one(c, 1, tmp_path / "run", 60, 256,
                        boot.NOT_ASKED, pin=True)
    assert st["status"] == "ok", st
    assert st["pinning"]["pinned"] and len(st["pinning"]["threads"]) == 2
    conn = store.connect(tmp_path / "r.sqlite")
    store.import_run(conn, tmp_path / "run")
    assert [r["pinned"] for r in store.load_runs(conn)] == [1]


def test_pinned_and_unpinned_boots_are_different_runs():
    from qrwbench import matrix
    from qrwbench.run import boot
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 2, ())
    b = matrix.Boot(c, 0, 7)
    rig = {"rig_commit": "a" * 40, "rig_diff_sha256": ""}
    assert boot.run_id(b, rig, "") == boot.run_id(b, rig, "", False)
    assert boot.run_id(b, rig, "", True) != boot.run_id(b, rig, "")

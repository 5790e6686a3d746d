"""End to end: boot real x86_64 and arm64 TCG guests for short runs of each
workload and check what they printed, through the same code `make bench` uses."""
import json

import pytest

from conftest import kernel_dir
from qrwbench import vocab
from qrwbench.results import records
from qrwbench.run import boot as one_boot, qemu
from qrwbench.cell import Cell

pytestmark = pytest.mark.guest


def cell(arch, variant, workload, vcpus=2, cpu="max", **params):
    kernel_dir(arch, variant)
    return Cell.boot(arch, "tcg", cpu, variant, workload, vcpus, tuple(sorted(params.items())))


def boot(tmp_path, c, timeout=120, seed=7):
    d = tmp_path / "run"
    st = one_boot.boot_one(c, seed, d, timeout, 256, one_boot.NOT_ASKED)
    return st, d, records.parse_console((d / "console.log").read_bytes())


def orderings_of(op):
    return set(vocab.op_orderings()[op])


@pytest.mark.parametrize("arch,cpu", [("x86_64", "max"), ("arm64", "max"), ("arm64", "cortex-a57")])
def test_atomics_short_run_is_complete_and_sane(tmp_path, arch, cpu):
    ops = "atomic_add_return,atomic64_fetch_or,smp_mb"
    c = cell(arch, "acqrel", "atomics", cpu=cpu, ops=ops, reps=2, duration_ms=5)
    st, d, p = boot(tmp_path, c)
    assert st["status"] == "ok", st
    assert p.ok, p.reason
    assert p.begin["arch"] == arch and p.begin["online_cpus"] == 2
    console = (d / "console.log").read_text(errors="replace")
    assert "atomic64_test: passed" in console
    got = {(r["op"], r["variant"], r["copy"], r["placement"], r["rep"]) for r in p.results}
    for op in ops.split(","):
        for o in orderings_of(op):
            for rep in (0, 1):
                for place in ("shared", "percpu"):
                    assert (op, o, 0, place, rep) in got, (op, o, place, rep)
    for r in p.results:
        assert r["ops"] > 0 and r["ns"] > 0
        assert sum(r["per_thread_ops"]) == r["ops"] and len(r["per_thread_ops"]) == 2
        assert r["overhead_ps"] > 0
    assert any(r["op"] == "empty" for r in p.results), "harness overhead not measured"
    prov = json.loads((d / "provenance.json").read_text())
    assert prov["cell"]["arch"] == arch and prov["qemu_binary"].endswith("qemu-system-" + ("x86_64" if arch == "x86_64" else "aarch64"))
    # QEMU runs under perf stat (default); the command after "--" is QEMU's
    assert prov["qemu_cmd"][prov["qemu_cmd"].index("--") + 1] == prov["qemu_binary"]
    assert "-nic" in prov["qemu_cmd"] and "none" in prov["qemu_cmd"]


def test_a_given_batch_is_a_multiple_of_the_loop_unroll(tmp_path):
    """An atomics loop runs vocab.loop_unroll() ops per iteration: a
    batch= that is not a multiple of it is rounded up, and the ops counted
    are whole batches of it (the record says the batch that ran)."""
    u = vocab.loop_unroll()
    c = cell("x86_64", "acqrel", "atomics", vcpus=1, ops="atomic_add_return", reps=1,
             duration_ms=2, batch=3 * u + 1)
    st, d, p = boot(tmp_path, c, timeout=60)
    assert st["status"] == "ok", st
    assert p.results
    for r in p.results:
        assert r["batch"] == 4 * u, r
        assert r["ops"] % (4 * u) == 0, r


@pytest.mark.parametrize("arch,cpu", [("x86_64", "max"), ("arm64", "cortex-a57")])
@pytest.mark.parametrize("variant", ["acqrel", "full"])
def test_rwlock_exclusion_holds_for_correct_orderings(tmp_path, arch, cpu, variant):
    c = cell(arch, variant, "rwlock", cpu=cpu, write_pct=50, reps=2, duration_ms=10, check_exclusion=1)
    st, d, p = boot(tmp_path, c)
    assert st["status"] == "ok", st
    impls = {(r["impl"], r["variant"]) for r in p.results}
    assert ("kernel", variant) in impls
    assert {("module", v) for v in ("full", "acqrel", "relaxed")} <= impls
    for r in p.results:
        assert r["reads"] + r["writes"] == r["ops"] > 0
        assert sum(r["per_thread_reads"]) == r["reads"] and sum(r["per_thread_writes"]) == r["writes"]
        assert r["writes"] > 0 and r["reads"] > 0
        if r["impl"] == "kernel" or r["variant"] != "relaxed":
            assert r["violations"] == 0, r


@pytest.mark.parametrize("param,value", [("write_pct", 150), ("nlocks", 0), ("duration_ms", 0),
                                         ("threads", 9), ("ops", "atomic_frobnicate"),
                                         ("warmup_reps", 101)])
def test_bad_parameters_are_refused_with_the_guest_reason(tmp_path, param, value):
    c = cell("x86_64", "acqrel", "atomics" if param in ("ops", "duration_ms", "threads") else "rwlock",
             **{param: value})
    st, d, p = boot(tmp_path, c, timeout=60)
    assert st["status"] == "failed"
    assert "refused" in st["reason"] and param in st["reason"], st["reason"]
    assert p.error is not None and p.error["errno"] == 22, p.error     # -EINVAL


def test_copies_1_measures_copy_0_only_and_an_injected_barrier_needs_copy_1(tmp_path):
    """copies=1: every op's copy 0, no A/A twin (half the boot); the
    module itself refuses aa_inject_mb=1 with it (the matrix does too)."""
    c = cell("x86_64", "acqrel", "atomics", vcpus=1, ops="atomic_add_return", reps=1,
             duration_ms=2, placement="percpu", copies=1)
    st, d, p = boot(tmp_path, c, timeout=60)
    assert st["status"] == "ok", st
    got = {(r["variant"], r["copy"]) for r in p.results if r["op"] == "atomic_add_return"}
    assert got == {(o, 0) for o in orderings_of("atomic_add_return")}
    c = cell("x86_64", "acqrel", "atomics", vcpus=1, ops="atomic_add_return", reps=1,
             duration_ms=2, copies=1, aa_inject_mb=1)
    st, d, p = boot(tmp_path / "inject", c, timeout=60)
    assert st["status"] == "failed" and "copies=1" in st["reason"], st["reason"]
    assert p.error is not None and p.error["errno"] == 22, p.error


def test_unknown_workload_is_refused(tmp_path):
    kernel_dir("x86_64", "acqrel")
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "frob", 1, ())
    st, _, _ = boot(tmp_path, c, timeout=60)
    assert st["status"] == "failed" and "frob" in st["reason"]


def test_hanging_guest_times_out_and_is_failed_with_console_tail(tmp_path):
    kernel_dir("x86_64", "acqrel")
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "hang", 1, ())
    st, d, p = boot(tmp_path, c, timeout=15)
    assert st["status"] == "failed" and st["timed_out"]
    assert st["console_tail"], "console tail missing"
    saved = json.loads((d / "status.json").read_text())
    assert saved["timed_out"] is True


def test_a_coarse_guest_clock_is_refused(tmp_path, monkeypatch):
    """A guest whose clock is jiffies (4 ms steps) must refuse to measure.
    The test makes that clock itself (clocksource=jiffies, and no TSC
    calibration) instead of expecting the host's CPU to leave the guest
    without a better one: on some hosts (AMD EPYC) a microvm guest finds a
    usable TSC even without tsc_early_khz."""
    real = qemu.command

    def without_tsc(*a, **k):
        cmd = real(*a, **k)
        i = cmd.index("-append") + 1
        kept = [t for t in cmd[i].split() if not t.startswith(("tsc_early_khz=", "tsc="))]
        cmd[i] = " ".join(kept + ["clocksource=jiffies"])
        return cmd

    monkeypatch.setattr(qemu, "command", without_tsc)
    c = cell("x86_64", "acqrel", "atomics", vcpus=1, ops="smp_mb", reps=1, duration_ms=5)
    st, d, _ = boot(tmp_path, c, timeout=60)
    cmd = json.loads((d / "provenance.json").read_text())["qemu_cmd"]
    append = cmd[cmd.index("-append") + 1]
    assert "tsc_early_khz" not in append and "clocksource=jiffies" in append
    assert st["status"] == "failed", st
    assert "clock advances in steps of" in st["reason"], st["reason"]


@pytest.mark.parametrize("workload", ["atomics", "rwlock"])
def test_warmup_rounds_are_not_emitted(tmp_path, workload):
    """warmup_reps=2, reps=1: exactly one rep of results, order from 0."""
    params = dict(warmup_reps=2, reps=1, duration_ms=3)
    if workload == "atomics":
        params.update(ops="atomic_add_return", placement="percpu")
    c = cell("x86_64", "acqrel", workload, **params)
    st, _, p = boot(tmp_path, c)
    assert st["status"] == "ok", st
    assert p.begin["params"]["warmup_reps"] == 2
    assert {r["rep"] for r in p.results} == {0}
    assert sorted(r["order"] for r in p.results) == list(range(len(p.results)))
    per_entry = {(r["impl"], r["op"], r["variant"], r["copy"], r["placement"]) for r in p.results}
    assert len(per_entry) == len(p.results)


def test_split_mode_threads_only_read_or_only_write(tmp_path):
    c = cell("x86_64", "acqrel", "rwlock", nreaders=1, nwriters=1, reps=2, duration_ms=5,
             check_exclusion=1)
    st, _, p = boot(tmp_path, c)
    assert st["status"] == "ok", st
    for r in p.results:
        if r["impl"] == "none":
            continue
        roles = sorted((w > 0, rd > 0) for rd, w in zip(r["per_thread_reads"], r["per_thread_writes"]))
        assert roles == [(False, True), (True, False)], r     # one pure reader, one pure writer
        if r["impl"] == "kernel" or r["variant"] != "relaxed":
            assert r["violations"] == 0, r


def test_threads_spread_over_several_locks(tmp_path):
    c = cell("arm64", "acqrel", "rwlock", nlocks=2, write_pct=50, reps=2, duration_ms=5,
             check_exclusion=1)
    st, _, p = boot(tmp_path, c)
    assert st["status"] == "ok", st
    assert p.begin["params"]["nlocks"] == 2
    for r in p.results:
        assert r["reads"] > 0 and r["writes"] > 0 and r["violations"] in (0, -1), r

"""The program workloads (guest/prog_<name>.c) in real TCG guests, through
the code `make bench` uses: their records pass the host's checks, every rep
has the program's window and the in-boot reference; a killed worker and a
short window are failed runs with their reason and no records."""
import pytest

from conftest import kernel_dir
from qrwbench import vocab
from qrwbench.cell import Cell
from qrwbench.results import records
from qrwbench.run import boot as one_boot

pytestmark = pytest.mark.guest

PROGRAMS = tuple(n for n, w in vocab.WORKLOAD_TABLE.items() if w.program)


def boot(tmp_path, arch, cpu, variant, workload, **params):
    kernel_dir(arch, variant)
    c = Cell.boot(arch, "tcg", cpu, variant, workload, 2, tuple(sorted(params.items())))
    d = tmp_path / "run"
    st = one_boot.boot_one(c, 7, d, 180, 256, one_boot.NOT_ASKED)
    return st, records.parse_console((d / "console.log").read_bytes())


@pytest.mark.parametrize("arch,cpu", [("x86_64", "max"), ("arm64", "cortex-a57")])
@pytest.mark.parametrize("workload", PROGRAMS)
def test_a_program_boot_is_complete_and_passes_the_checks(tmp_path, arch, cpu, workload):
    st, p = boot(tmp_path, arch, cpu, "full", workload, reps=2, duration_ms=20)
    assert st["status"] == "ok", st
    assert p.ok, p.reason
    assert p.begin["workload"] == workload and p.begin["threads"] == 2
    got = {(r["impl"], r["variant"], r["rep"]) for r in p.results}
    assert got == {(i, v, rep) for i, v in (("kernel", "full"), ("module", "acqrel"))
                   for rep in (0, 1)}
    wl = vocab.workload(workload)
    for r in p.results:
        assert r["op"] == workload and r["ops"] > 0 and r["ns"] > 0
        assert all(x > 0 for x in r["per_thread_ops"]), r    # both pinned workers ran
        if r["impl"] == "kernel" and "writes" in wl.fields:
            assert r["reads"] > 0, r


@pytest.mark.parametrize("fault,why", [(1, "worker 1 killed by signal 9"),
                                       (2, "short window: worker 1 counted")])
def test_a_killed_worker_or_a_short_window_fails_the_run_with_its_reason(tmp_path, fault, why):
    st, p = boot(tmp_path, "x86_64", "max", "acqrel", "pgrp", reps=1, duration_ms=20,
                 prog_fault=fault)
    assert st["status"] == "failed", st
    assert why in st["reason"], st["reason"]
    assert not p.ok and p.results == [] and p.reason.startswith("program failed: pgrp: ")

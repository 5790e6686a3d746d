"""Guest-side performance counters: boot real TCG guests and check that the
begin record's ``pmu`` object (docs/records.md) tells the truth about the
``cycles`` / ``instructions`` keys of the results.

What QEMU gives (docs/module.md, "Performance counters"): x86_64 TCG has no
PMU; arm64 TCG's PMUv3 counts cycles (from QEMU's virtual clock) and counts
instructions only under -icount, which the rig does not use. Behaviour is
asserted, never timing: the cycles-per-ns bounds below are a factor of 20
around any real or emulated clock rate."""
import statistics

import pytest

from conftest import kernel_dir
from qrwbench.results import records
from qrwbench.run import boot as one_boot
from qrwbench.cell import Cell

pytestmark = pytest.mark.guest


def boot(tmp_path, arch, cpu, workload="atomics", name="run", **params):
    kernel_dir(arch, "acqrel")
    c = Cell.boot(arch, "tcg", cpu, "acqrel", workload, 2, tuple(sorted(params.items())))
    d = tmp_path / name
    st = one_boot.boot_one(c, 11, d, 120, 256, one_boot.NOT_ASKED)
    assert st["status"] == "ok", st
    p = records.parse_console((d / "console.log").read_bytes())
    assert p.ok, p.reason
    return p, (d / "console.log").read_text(errors="replace")


def assert_consistent(p):
    """Every result has counter k iff begin.pmu says k (TCG never multiplexes)."""
    pmu = p.begin.get("pmu")
    assert isinstance(pmu, dict), f"begin has no pmu object: {p.begin}"
    assert set(pmu) <= {"cycles", "instructions", "why"}
    for key in records.PMU_COUNTERS:
        assert isinstance(pmu[key], bool)
        has = [key in r for r in p.results]
        if pmu[key]:
            assert all(has), f"pmu.{key} is true but {has.count(False)} results lack it"
            assert all(type(r[key]) is int and r[key] > 0 for r in p.results)
        else:
            assert not any(has), f"pmu.{key} is false but results have it"
    if not (pmu["cycles"] and pmu["instructions"]):
        assert isinstance(pmu.get("why"), str) and pmu["why"].strip()
    else:
        assert "why" not in pmu
    return pmu


SMALL = dict(ops="atomic_add_return", reps=2, duration_ms=2)


@pytest.mark.parametrize("arch,cpu,workload", [
    ("arm64", "cortex-a57", "atomics"),
    ("arm64", "max", "rwlock"),
])
def test_begin_pmu_matches_the_results(tmp_path, arch, cpu, workload):
    params = SMALL if workload == "atomics" else dict(reps=2, duration_ms=2, impl="kernel")
    p, console = boot(tmp_path, arch, cpu, workload, **params)
    pmu = assert_consistent(p)
    assert "qrwbench: pmu: " in console
    # QEMU -M virt has a PMUv3 and the kernel drives it (kernel/configs/arm64.config)
    assert "hw perfevents: enabled with armv8_pmuv3" in console
    assert pmu["cycles"], pmu


def test_x86_64_tcg_has_no_pmu_and_says_why(tmp_path):
    p, console = boot(tmp_path, "x86_64", "max", **SMALL)
    pmu = assert_consistent(p)
    assert "qrwbench: pmu: no counters" in console
    assert pmu["cycles"] is False and pmu["instructions"] is False
    assert "cycles" in pmu["why"] and "perf_event_create_kernel_counter" in pmu["why"]
    for r in p.results:
        assert "cycles" not in r and "instructions" not in r


def test_arm64_cycles_grow_with_the_window(tmp_path):
    """Per result, cycles per thread-ns is a clock rate (broad bounds); a
    window ten times longer counts several times more cycles."""
    short, _ = boot(tmp_path, "arm64", "cortex-a57", name="short", placement="percpu", **SMALL)
    long_, _ = boot(tmp_path, "arm64", "cortex-a57", name="long", placement="percpu",
                    **{**SMALL, "duration_ms": 20})
    med = {}
    for name, p in (("short", short), ("long", long_)):
        pmu = assert_consistent(p)
        assert pmu["cycles"], pmu
        rates = [r["cycles"] / (r["ns"] * r["threads"]) for r in p.results]
        assert all(0.05 < x < 20 for x in rates), rates
        med[name] = statistics.median(r["cycles"] for r in p.results)
    assert med["long"] > 3 * med["short"], med


def test_report_shows_guest_counters_and_why_not(tmp_path):
    """The report's guest PMU table: cycles/op for the arm64 guest, the
    recorded reason for the x86_64 one (which has no PMU)."""
    from qrwbench.results import store
    from qrwbench.report import report
    boot(tmp_path, "arm64", "cortex-a57", name="a", **SMALL)
    boot(tmp_path, "x86_64", "max", name="x", **SMALL)
    conn = store.connect(tmp_path / "r.sqlite")
    for d in ("a", "x"):
        assert store.import_run(conn, tmp_path / d).status == "ok"
    out = report.build(tmp_path / "r.sqlite", tmp_path / "rep", n_resamples=200)
    md = open(out["markdown"]).read()
    section = md.split("### Guest PMU counters", 1)[1].split("\n\n", 2)[1]
    rows = [[c.strip() for c in l.strip("|").split("|")] for l in section.splitlines()[2:]]
    arm = [r for r in rows if r[0].startswith("arm64/tcg/cortex-a57")
           and " atomic_add_return shared" in r[0] and r[1] == "full"]
    assert len(arm) == 1, section
    full = [s["cycles"] / s["ops"] for s in store.load_samples(conn)
            if s["arch"] == "arm64" and s["op"] == "atomic_add_return" and s["copy"] == 0
            and s["variant"] == "full" and s["placement"] == "shared"]
    assert arm[0][3] == f"{statistics.median(full):.4g}" and arm[0][4] == "not counted"
    x86 = [r for r in rows if r[0] == "x86_64/tcg/max"]
    assert len(x86) == 1 and x86[0][3].startswith("not counted: ") and "no PMU" in x86[0][3]

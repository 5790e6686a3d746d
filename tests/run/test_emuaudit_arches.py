"""The emulator audit on ppc64le and riscv64 (issue 30), from recorded
translation logs of real boots (QEMU 7.2, the atomics workload, cut to the
atomic_add_return loops): what QEMU runs for each ordering, and the labels."""
import pytest

from qrwbench.run import emuaudit as E
from test_emuaudit import recorded

ORDS = ("full", "acquire", "release", "relaxed")
ADD = ("inline", "atomic_add_return")


def barriers(tag) -> dict:
    tbs, lay = recorded(tag)
    rows = {(b["impl"], b["op"]): b["ops"] for b in E.barrier_rows(tbs, lay)}
    assert set(rows) == {ADD}, "only the add loops are in the recorded log"
    return rows[ADD]


def labels(tag) -> dict:
    tbs, lay = recorded(tag)
    return {tuple(r["variants"]): r["label"] for r in E.audit_boot(tbs, lay)
            if r["op"] == "atomic_add_return"}


def mbs(ops: dict) -> set:
    return {k for k in ops if k.startswith("mb ")}


@pytest.mark.parametrize("tag", ["ppc64le-power9-1v", "riscv64-rv64-1v"])
def test_one_vcpu_runs_no_barrier_for_any_ordering(tag):
    """QEMU elides every barrier of a one-vCPU guest: no mb op is left."""
    got = barriers(tag)
    assert set(got) == set(ORDS) and all(mbs(got[o]) == set() for o in ORDS), got


def test_ppc_two_vcpus_sync_is_a_full_barrier_and_lwsync_is_not():
    """full: sync (mb 0x3f, TCG_BAR_SC | TCG_MO_ALL); acquire and release:
    lwsync (0x3d: no TCG_MO_ST_LD); every lwarx an acquire barrier (0x1f)."""
    got = barriers("ppc64le-power9-2v")
    assert mbs(got["full"]) == {"mb $0x1f", "mb $0x3f"}
    assert mbs(got["acquire"]) == mbs(got["release"]) == {"mb $0x1f", "mb $0x3d"}
    assert mbs(got["relaxed"]) == {"mb $0x1f"}
    assert all("call atomic_cmpxchgl_le" in got[o] for o in ORDS)     # stwcx.


def test_ppc_register_allocation_keeps_one_vcpu_pairs_distinguishable():
    """No barrier survives with one vCPU, but the compiler allocated
    registers differently per ordering: the ops differ, so the strict label
    cannot say emulator-blind (the barrier table says why)."""
    assert set(labels("ppc64le-power9-1v").values()) == {E.DISTINCT}


def test_riscv_two_vcpus_acquire_and_release_add_fences_full_does_not():
    """amoadd.w.aqrl (full) runs the relaxed AMO's helper and no barrier; the
    acquire/release forms add a fence, a full barrier in QEMU (inverted)."""
    got = barriers("riscv64-rv64-2v")
    assert got["full"] == got["relaxed"] == {"call atomic_fetch_addl_le": got["full"]["call atomic_fetch_addl_le"]}
    assert mbs(got["acquire"]) == mbs(got["release"]) == {"mb $0x3f"}
    lab = labels("riscv64-rv64-2v")
    assert lab[("full", "relaxed")] == E.BLIND
    assert lab[("full", "acquire")] == lab[("acquire", "relaxed")] == E.DISTINCT


def test_parse_log_reads_compressed_riscv_instructions():
    tbs, _ = recorded("riscv64-rv64-2v")
    sizes = {len(b) for t in tbs for _, b in t.guest}
    assert {4, 8} <= sizes, sizes       # 16-bit (RVC) and 32-bit words


def test_barrier_text_says_which_barriers_cost_a_host_fence(monkeypatch):
    monkeypatch.setattr(E.platform, "machine", lambda: "x86_64")
    assert E.barrier_text("mb $0x3f") == "mb $0x3f (host fence)"
    assert E.barrier_text("mb $0x3d") == "mb $0x3d (no host code)"
    assert E.barrier_text("call atomic_fetch_addl_le") == "call atomic_fetch_addl_le"
    monkeypatch.setattr(E.platform, "machine", lambda: "aarch64")
    assert E.barrier_text("mb $0x3d") == "mb $0x3d"


@pytest.mark.parametrize("arch,cpu", [("ppc64le", "power10"), ("riscv64", "rv64")])
def test_label_targets_boots_the_new_arches(monkeypatch, tmp_path, arch, cpu):
    """Every arch of vocab.ARCHES has the audit: none is skipped."""
    booted = []

    def fake(arch, cpu, v, wl, d, **k):
        booted.append((arch, cpu, v, wl))
        raise StopIteration
    monkeypatch.setattr(E, "boot_logged", fake)
    with pytest.raises(StopIteration):
        E.label_targets(tmp_path, (2,), cpus={(arch, cpu)}, log=lambda s: None)
    assert booted == [(arch, cpu, 2, next(iter(E.WORKLOADS)))]

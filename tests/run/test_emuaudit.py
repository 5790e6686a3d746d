"""The emulator audit: labels from QEMU's own translation log (recorded logs
of the arm64 atomic_add_return loops, and one real short boot)."""
import gzip
import json
from pathlib import Path

import pytest

from conftest import kernel_dir
from qrwbench import vocab
from qrwbench.analysis import codeid
from qrwbench.run import emuaudit as E
from qrwbench.cell import Cell

DATA = Path(__file__).parent / "data" / "emu"
ORDS = ("full", "acquire", "release", "relaxed")


def recorded(tag):
    """A recorded boot's translation log, cut to the atomic_add_return
    loops (gzipped where large), and where those loops were."""
    lay = {n: (int(a, 16), int(b, 16)) for n, (a, b) in
           json.loads((DATA / f"{tag}.layout.json").read_text()).items()}
    log = DATA / f"{tag}.log"
    text = log.read_text() if log.exists() else gzip.open(f"{log}.gz", "rt").read()
    return E.parse_log(text), lay


def labels(tag):
    tbs, lay = recorded(tag)
    return {tuple(r["variants"]): r["label"] for r in E.audit_boot(tbs, lay)
            if r["op"] == "atomic_add_return"}


def test_lse_orderings_are_emulator_blind_with_two_vcpus():
    """arm64 max (LSE): ldaddal, ldadda, ldaddl, ldadd differ as guest code
    but QEMU 7.2 runs one atomic helper for all of them."""
    got = labels("arm64-max-2v")
    assert len(got) == 6 and set(got.values()) == {E.BLIND}, got


def test_llsc_barriers_vanish_with_one_vcpu_and_show_with_two():
    """cortex-a57 (LL/SC, full adds dmb ish): with one vCPU the barriers and
    acquire/release become no TCG op at all; with two they are ops."""
    assert set(labels("arm64-cortex-a57-1v").values()) == {E.BLIND}
    assert set(labels("arm64-cortex-a57-2v").values()) == {E.DISTINCT}


def test_parse_log_reads_guest_code_and_ops():
    tbs, lay = recorded("arm64-max-2v")
    start, end = lay["qrwb_loop_atomic_add_return_full_c0"]
    mine = [t for t in tbs if start <= t.pc < end]
    assert mine and all(t.guest and t.ops for t in mine)
    words = {b for t in mine for _, b in t.guest}
    assert "b8e50002" in words          # ldaddal w5, w2, [x0]


def test_normalize_drops_what_differs_between_identical_translations():
    ops = [" ---- 0000000000000e18 0000000000000000 0000000000000000",
           " add_i64 pc,pc,$0xffffffffffffffccdead: 0 1 2",
           " movi_i64 tmp1,$0xffff800078462e40      sync: 0  pref=0xffff",
           " movi_i64 tmp2,$0x1234",
           " exit_tb $0x7f75d0e68481"]
    got = E.normalize_ops(ops, 0xffff800078462e00, 0xffff800078462e60)
    assert got == ("add_i64 pc,pc,$REL", "movi_i64 tmp1,$PC", "movi_i64 tmp2,$0x1234",
                   "exit_tb TB+1")


def test_labels_from_code():
    a = E.Code(((0, "aa"),), ((0, ("x",)),))
    assert E.label(a, a) == E.IDENTICAL
    assert E.label(a, E.Code(((0, "bb"),), ((0, ("x",)),))) == E.BLIND
    assert E.label(a, E.Code(((0, "bb"),), ((0, ("y",)),))) == E.DISTINCT
    assert E.label(a, None) == E.NOT_RUN


def test_every_ordering_pair_and_lock_copy_pair_is_compared():
    pairs = E.comparisons()
    n = sum(len(o) * (len(o) - 1) // 2 for o in vocab.op_orderings().values())
    assert len([p for p in pairs if p[0] == "inline"]) == n
    assert {(p[2], p[3]) for p in pairs if p[0] == "module"} == {
        ("full", "acqrel"), ("full", "relaxed"), ("acqrel", "relaxed")}


def test_report_marks_blind_comparisons(tmp_path, monkeypatch):
    emu = tmp_path / "emulator.json"
    row = {"arch": "arm64", "accel": "tcg", "cpu_model": "max", "vcpus": 2, "impl": "inline",
           "op": "atomic_add_return", "variants": ["full", "relaxed"], "label": E.BLIND}
    emu.write_text(json.dumps(E.to_json([row], "QEMU 7.2")))
    audit = codeid.Audit(blind=codeid.load_blind(emu))
    cell = Cell("arm64", "tcg", "max", 2, "atomics", "inline", "atomic_add_return",
                      "shared", "{}")
    assert audit.is_blind(cell, "relaxed", "full")
    assert not audit.is_blind(cell, "relaxed", "acquire")
    assert not audit.is_blind(Cell("arm64", "tcg", "max", 1, "atomics", "inline",
                                         "atomic_add_return", "shared", "{}"), "relaxed", "full")
    emu.write_text('{"schema": 1, "blind": [{"arch": "arm64"}]}')
    with pytest.raises(Exception, match=r"blind\[0\]: needs arch, accel"):
        codeid.load_blind(emu)


@pytest.mark.guest
def test_one_real_boot_maps_the_loops_and_labels_them(tmp_path):
    """x86_64: every ordering of atomic_add_return compiles to the same
    `lock xadd`, so the labels must say identical guest code; the other ops
    did not run and say so."""
    kernel_dir("x86_64", "acqrel")
    rows = E.label_targets(tmp_path, vcpus=(2,), cpus={("x86_64", "max")}, workloads=("atomics",),
                 extra={"atomics": {"ops": "atomic_add_return"}})
    add = [r for r in rows if r["op"] == "atomic_add_return"]
    assert len(add) == 6 and {r["label"] for r in add} == {E.IDENTICAL}, add
    assert {r["label"] for r in rows if r["op"] != "atomic_add_return"} == {E.NOT_RUN}
    assert (tmp_path / "runs" / "x86_64-max-2v-atomics" / "tcg.log").stat().st_size > 0

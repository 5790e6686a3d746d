"""The ordering audit of the benchmark module (qrwbench.build.module_audit,
promise and audit, `make audit`): it finds the differences that the
orderings must make, and none where the code is the same (issue 5). Reads
the modules `make test` builds."""
import json
from pathlib import Path

import pytest

from conftest import kernel_dir, module_ko
from qrwbench import cli, vocab
from qrwbench.build import audit, disasm, module_audit, promise
from qrwbench.analysis import codeid
from qrwbench.cell import Cell

ORDERINGS = ("full", "acquire", "release", "relaxed")
DATA = Path(__file__).parent / "data"


def module(arch, variant="acqrel"):
    kd = kernel_dir(arch, variant)
    return module_audit.audit_module(module_ko(arch, variant), arch, variant, kd)


@pytest.fixture(scope="module")
def x86():
    return module("x86_64")


@pytest.fixture(scope="module")
def arm64():
    return module("arm64")


@pytest.fixture(scope="module")
def arm64_full():
    return module("arm64", "full")


@pytest.mark.kernel
def test_every_op_of_the_table_is_audited(x86, arm64):
    rows = module_audit.op_table()
    assert len(rows) > 100
    for m in (x86, arm64):
        assert m["missing_loops"] == []
        assert {(op, o) for op, d in m["ops"].items() for o in d} == set(rows)


@pytest.mark.kernel
def test_x86_all_orderings_of_add_return_are_one_lock_xadd(x86):
    e = x86["ops"]["atomic_add_return"]
    assert {o: e[o]["order"] for o in ORDERINGS} == {o: ["lock xadd"] for o in ORDERINGS}
    assert len({e[o]["hash"]["c0"] for o in ORDERINGS}) == 1
    groups = [g for g in audit.module_identical([x86])
              if g["impl"] == "inline" and g["op"] == "atomic_add_return"]
    assert groups == [{"arch": "x86_64", "impl": "inline", "workload": "atomics",
                       "op": "atomic_add_return", "variants": sorted(ORDERINGS)}]


LSE = {"full": ["ldaddal"], "acquire": ["ldadda"], "release": ["ldaddl"], "relaxed": ["ldadd"]}
LLSC = {"full": ["ldxr", "stlxr", "dmb ish"], "acquire": ["ldaxr", "stxr"],
        "release": ["ldxr", "stlxr"], "relaxed": ["ldxr", "stxr"]}


@pytest.mark.kernel
@pytest.mark.parametrize("ordering", ORDERINGS)
def test_arm64_add_return_lse_and_llsc_forms(arm64, ordering):
    e = arm64["ops"]["atomic_add_return"][ordering]
    assert e["paths"]["lse"]["order"] == LSE[ordering]
    assert e["paths"]["llsc"]["order"] == LLSC[ordering]
    assert e["promise"] == []


@pytest.mark.kernel
def test_arm64_orderings_are_all_different_code(arm64):
    e = arm64["ops"]["atomic_add_return"]
    assert len({e[o]["hash"]["c0"] for o in ORDERINGS}) == 4
    assert not [g for g in audit.module_identical([arm64]) if g.get("op") == "atomic_add_return"]


@pytest.mark.kernel
def test_arm64_inplace_alternative_xchg_has_swp_forms(arm64):
    # xchg is patched in place (ARM64_LSE_ATOMIC_INSN), not through a branch
    e = arm64["ops"]["atomic_xchg"]
    assert [e[o]["paths"]["lse"]["order"] for o in ORDERINGS] == [["swpal"], ["swpa"], ["swpl"], ["swp"]]
    assert e["acquire"]["paths"]["llsc"]["order"] == ["ldaxr", "stxr"]


@pytest.mark.kernel
def test_copy0_and_copy1_are_identical_code_and_c1mb_adds_one_barrier(x86, arm64):
    for m in (x86, arm64):
        for op, d in m["ops"].items():
            for o, e in d.items():
                assert e["copies_identical"], (m["arch"], op, o, e["hash"])
                assert set(e["inject_adds"].values()) == {1}, (m["arch"], op, o, e["inject_adds"])
        assert m["locks"]["acqrel_c0"]["hash"] == m["locks"]["acqrel_c1"]["hash"]
        assert m["locks"]["acqrel_c0"]["hash"] != m["locks"]["acqrel_c1mb"]["hash"]


@pytest.mark.kernel
def test_no_ordering_compiles_weaker_than_its_name(x86, arm64):
    for m in (x86, arm64):
        bad = [f["text"] for f in m["findings"] if f["kind"] not in ("stronger", "page-crossing")]
        assert bad == [], bad


@pytest.mark.kernel
@pytest.mark.parametrize("op", ["atomic_sub_return", "atomic_dec_return", "atomic64_sub_return"])
def test_arm64_sub_return_honours_its_ordering_after_the_lse_fix(arm64, op):
    """kernel/patches/0001: __lse_atomic_sub_return##name() calls
    __lse_atomic_fetch_sub##name(), so every ordering has its own LSE form."""
    e = arm64["ops"][op]
    assert {o: e[o]["paths"]["lse"]["order"] for o in ORDERINGS} == LSE
    assert all(e[o]["promise"] == [] for o in ORDERINGS)


@pytest.mark.kernel
def test_arm64_nothing_compiles_stronger_than_named(arm64):
    strong = sorted({(f["op"], f["ordering"], f["path"]) for f in arm64["findings"]
                     if f["kind"] == "stronger"})
    assert strong == []
    assert not [n for n in audit.module_notes([arm64]) if "read unlock" in n["text"]]


def test_the_build_before_the_lse_fix_is_flagged():
    """The same audit on a module recorded before the fix (6.12 + the qrwlock
    patch, tests/builds/data): every weaker ordering of the 32-bit
    sub_return was ldaddal on the LSE path, the 64-bit one was right, and the
    audit says qrwlock's read unlock is fully ordered whatever the variant."""
    before = json.loads((DATA / "arm64-acqrel-before-lse-fix.json").read_text())
    ops = before["ops"]
    for op in ("atomic_sub_return", "atomic_dec_return"):
        assert {o: ops[op][o]["paths"]["lse"]["order"] for o in ORDERINGS} == {
            o: ["ldaddal"] for o in ORDERINGS}
        for o in ("acquire", "release", "relaxed"):
            got = promise.check_promise("arm64", op, o, ops[op][o])
            assert [(f["kind"], f["path"]) for f in got] == [("stronger", "lse")], (op, o, got)
        assert promise.check_promise("arm64", op, "full", ops[op]["full"]) == []
    assert ops["atomic64_sub_return"]["release"]["paths"]["lse"]["order"] == ["ldaddl"]
    notes = audit.module_notes([{"arch": "arm64", "findings": before["findings"], "ops": ops}])
    assert sorted(n["impl"] for n in notes if "read unlock" in n["text"]) == ["kernel", "module"]
    assert "ldaddal" in next(n["text"] for n in notes if "read unlock" in n["text"])


# objdump -d --no-show-raw-insn -r of a module, as captured: on arm64 a
# relocation is printed at its instruction's address, on x86_64 inside it
OBJDUMP_ARM64 = """
Disassembly of section .text:

0000000000000000 <qrwb_f>:
       c:\tadrp\tx21, 1fc80 <qrwb_g+0xc80>
\t\t\tc: R_AARCH64_ADR_PREL_PG_HI21\tqrwb_cxt
      10:\tadd\tx21, x21, #0x0
\t\t\t10: R_AARCH64_ADD_ABS_LO12_NC\tqrwb_cxt
      14:\tldaddal\tw2, w3, [x0]
      18:\tbl\t0 <ktime_get>
\t\t\t18: R_AARCH64_CALL26\tktime_get
      1c:\tb\t1c <qrwb_f+0x1c>
\t\t\t1c: R_AARCH64_JUMP26\tqrwb_h
"""
OBJDUMP_X86 = """
Disassembly of section .text:

0000000000000000 <qrwb_f>:
      28:\tlock xadd %eax,0x0(%rip)        # 30 <qrwb_f+0x30>
\t\t\t2c: R_X86_64_PC32\tqrwb_cxt+0x13c
      30:\tcall   35 <qrwb_f+0x35>
\t\t\t31: R_X86_64_PLT32\t__cond_resched-0x4
      35:\tret
"""


def test_a_relocation_is_no_instruction_but_its_instructions_target():
    """The relocation line follows the instruction it patches: arm64's bl,
    b, adrp and add keep their mnemonics, x86_64 gets no extra instruction
    at the relocation's offset (disasm.objdump_insns, which Disasm and
    disassemble read)."""
    a64 = disasm.objdump_insns(OBJDUMP_ARM64)
    assert [(a, t.split()[0]) for _s, _f, a, t in a64] == [
        (0xc, "adrp"), (0x10, "add"), (0x14, "ldaddal"), (0x18, "bl"), (0x1c, "b")]
    assert a64[3][3] == "bl\t0 <ktime_get>  [reloc ktime_get]"
    assert a64[4][3].endswith("  [reloc qrwb_h]")
    assert {(s, f) for s, f, _a, _t in a64} == {(".text", "qrwb_f")}
    assert disasm.ordering_insns("arm64", [t for *_x, t in a64]) == ["ldaddal"]
    x86 = disasm.objdump_insns(OBJDUMP_X86)
    assert [a for _s, _f, a, _t in x86] == [0x28, 0x30, 0x35]
    assert x86[0][3].endswith("  [reloc qrwb_cxt+0x13c]")
    assert x86[1][3] == "call   35 <qrwb_f+0x35>  [reloc __cond_resched-0x4]"
    assert disasm.ordering_insns("x86_64", [t for *_x, t in x86]) == ["lock xadd"]


def test_promise_check_can_fail():
    rec = {"order": ["ldadd"], "paths": {"lse": {"order": ["ldadd"]}, "llsc": {"order": ["ldxr", "stxr"]}}}
    got = promise.check_promise("arm64", "atomic_add_return", "acquire", rec)
    assert {(f["kind"], f["path"]) for f in got} == {("weaker", "lse"), ("weaker", "llsc")}
    rec = {"order": [], "locked": 0, "fences": 0, "counts": {}}
    assert promise.check_promise("x86_64", "atomic_add_return", "full", rec)[0]["kind"] == "missing"


@pytest.mark.kernel
def test_module_qrwlock_copies_and_kernel_fast_paths(x86, arm64, arm64_full):
    # x86: the relaxed and acqrel module copies are the same code (TSO), full differs
    groups = [g["variants"] for g in audit.module_identical([x86]) if g["impl"] == "module"]
    assert groups == [["acqrel", "relaxed"]]
    assert not [g for g in audit.module_identical([arm64]) if g["impl"] == "module"]
    # arm64: the kernel variant's inlined fast paths are in qrwb_kernel_loop
    acq = arm64["locks"]["kernel"]["loop_paths"]["lse"]
    full = arm64_full["locks"]["kernel"]["loop_paths"]["lse"]
    assert "ldadda" in acq and "casa" in acq and "stlrb" in acq
    assert "ldadda" not in full and "casal" in full and "stlrb" not in full
    # read unlock (atomic_sub_return_release): ldaddl in acqrel since the LSE
    # fix (ldaddal before it, whatever the variant), ldaddal in full
    assert "ldaddl" in acq and "ldaddal" not in acq
    assert "ldaddal" in full and "ldaddl" not in full
    assert arm64["locks"]["kernel"]["hash"] != arm64_full["locks"]["kernel"]["hash"]


@pytest.mark.kernel
def test_audit_json_labels_identical_code_through_codeid(tmp_path):
    kernels = [kernel_dir("x86_64", "acqrel"), kernel_dir("arm64", "acqrel")]
    out = tmp_path / "audit"
    assert cli.main(["audit", "--out", str(out), *map(str, kernels)]) == 0
    doc = json.loads((out / "audit.json").read_text())
    assert doc["schema"] == 1 and len(doc["modules"]) == 2
    a = codeid.load_audit(out / "audit.json")
    cell = Cell("x86_64", "tcg", "max", 2, "atomics", "inline", "atomic_add_return", "percpu", "{}")
    assert a.is_identical(cell, "acquire", "full")
    assert not a.is_identical(cell.replace(arch="arm64"), "acquire", "full")
    assert not any("sub_return" in n["text"] and n["arch"] == "arm64" for n in a.notes)
    assert "IDENTICAL CODE: x86_64 inline atomic_add_return" in (out / "audit.txt").read_text()


@pytest.fixture(scope="module")
def arm64_allfull():
    return module("arm64", "allfull")


@pytest.mark.kernel
def test_allfull_kernel_builds_every_ordering_fully_ordered(arm64_allfull):
    """kernel/patches/0003 (CONFIG_ATOMICS_FULLY_ORDERED, variant allfull):
    every ordering of every RMW op compiles to the fully ordered form, so the
    four orderings of an op are one code; barriers and acquire/release
    loads and stores keep theirs."""
    m = arm64_allfull
    assert m["atomics_fully_ordered"] and m["missing_loops"] == []
    bad = [f["text"] for f in m["findings"] if f["kind"] in ("stronger", "weaker", "missing")]
    assert bad == [], bad
    e = m["ops"]["atomic_add_return"]
    assert {o: e[o]["paths"]["lse"]["order"] for o in ORDERINGS} == {o: ["ldaddal"] for o in ORDERINGS}
    assert {o: e[o]["paths"]["llsc"]["order"] for o in ORDERINGS} == {o: LLSC["full"] for o in ORDERINGS}
    assert [e[o]["promised"] for o in ORDERINGS] == ["full"] * 4
    rmw = [op for op, d in m["ops"].items() if set(ORDERINGS) <= set(d)]
    assert len(rmw) > 20
    for op in rmw:
        d = m["ops"][op]
        assert len({d[o]["hash"]["c0"] for o in ORDERINGS}) == 1, op
    # not RMW atomics: untouched
    assert m["ops"]["smp_store_release"]["release"]["order"] == ["stlr"]


def test_allfull_promise_is_only_for_rmw_atomics():
    assert promise.promised_ordering("atomic_add_return", "relaxed", True) == "full"
    assert promise.promised_ordering("atomic_add_return", "relaxed", False) == "relaxed"
    assert promise.promised_ordering("smp_store_release", "release", True) == "release"
    assert promise.promised_ordering("atomic_or", "relaxed", True) == "relaxed"   # void op


def test_per_op_folds_an_unrolled_loop_to_one_op():
    """A timed loop writes its op vocab.loop_unroll() times; the audit
    reports one op's ordering instructions (inline code: one segment; arm64
    with its LL/SC code out of line: the inline parts, then the out-of-line
    parts), and None when the loop is not that many copies of one op."""
    u = 4
    assert module_audit.per_op(["lock xadd"] * u, u) == ["lock xadd"]
    assert module_audit.per_op(["ldaddal", "dmb ish"] * u, u) == ["ldaddal", "dmb ish"]
    assert module_audit.per_op(["dmb ish"] * u + ["ldxr", "stlxr", "dmb ish"] * u, u) == \
        ["dmb ish", "ldxr", "stlxr", "dmb ish"]
    assert module_audit.per_op([], u) == []
    assert module_audit.per_op(["lock xadd"] * (u - 1), u) is None            # one op short
    assert module_audit.per_op(["ldxr", "stxr"] * u + ["dmb ish"], u) is None   # one barrier extra
    assert module_audit.per_op(["ldxr", "stxr", "ldxr", "stlxr"] * (u // 2), u) is None


@pytest.mark.kernel
def test_every_real_loop_folds_to_one_op(x86, arm64):
    """No built loop is reported as not being loop_unroll() copies of one op
    (the finding the audit gives when it cannot fold one)."""
    for m in (x86, arm64):
        assert [f["text"] for f in m["findings"] if f["kind"] == "unroll"] == []
        loops = [r for n, r in m["functions"].items() if n.startswith("qrwb_loop_")]
        assert loops and all(r["unrolled"] == vocab.loop_unroll() and r["per_op"] for r in loops)

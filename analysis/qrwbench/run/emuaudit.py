"""Emulator audit: which comparisons TCG can see at all.

The ordering audit (audit.py) says which orderings compile to identical
*guest* code. Under TCG that is not the whole story: QEMU may translate two
different guest instructions into the same host code (arm64 LSE ``ldaddal``
and ``ldadd`` both become one call of the same atomic helper; a barrier may
be elided when only one vCPU runs). This module boots short guests with
QEMU's own log of what it translated (``-d in_asm,op_opt``, ``-dfilter``
restricted to the module area), maps each translation block to the timed
loop it belongs to (the module prints where its first loop is, the .ko's
symbols give the rest), and compares the two sides of every comparison:

* "identical guest code": the loops' guest instructions are the same;
* "emulator-blind": the guest code differs but the TCG ops QEMU runs for it
  (after optimization; addresses, instruction starts and TB exit pointers
  normalized) are the same, so no TCG measurement can tell them apart;
* "distinguishable": the TCG ops differ;
* "not executed": a side's loop was not in the log.

The TCG ops (``op_opt``) are QEMU's IR before host code generation: equal
ops give equal host code. Under KVM the guest-code label is the only one.

    python3 -m qrwbench emuaudit [--out build/emulator] [--vcpus 1,2]

writes the output directory ``build/emulator`` (``emulator.json``, read by
codeid.find_audit so that the report marks emulator-blind pairs;
``emulator.md``; ``runs/`` with each boot's console and QEMU log).
"""
from __future__ import annotations

import itertools
import json
import platform
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import outputs, vocab
from ..vocab import InputError
from ..build.elfmini import Elf
from . import boot, qemu

IDENTICAL, BLIND, DISTINCT, NOT_RUN = ("identical guest code", "emulator-blind",
                                       "distinguishable", "not executed")
# an instruction: x86 bytes ("48 8b 05 "), a 32-bit word (arm64, ppc64le,
# riscv64), a 16-bit one (riscv64's compressed instructions)
_INSN_RE = re.compile(r"^0x([0-9a-f]+):\s+((?:[0-9a-f]{2} )+|[0-9a-f]{8}\s|[0-9a-f]{4}\s)")
_HEX_RE = re.compile(r"\$0x([0-9a-f]+)")


@dataclass
class TB:
    pc: int
    guest: list = field(default_factory=list)     # (pc, instruction bytes as text)
    ops: list = field(default_factory=list)       # raw op lines


def parse_log(text: str) -> list[TB]:
    """Translation blocks of a ``-d in_asm,op_opt`` log, in log order."""
    tbs, cur, in_ops = [], None, False
    for line in text.splitlines():
        if line.startswith("IN:"):
            cur, in_ops = TB(pc=-1), False
            tbs.append(cur)
        elif cur is None:
            continue
        elif line.startswith("OP after optimization"):
            in_ops = True
        elif in_ops:
            if line.startswith("----------------"):
                cur, in_ops = None, False
            elif line.strip():
                cur.ops.append(line.strip())
        elif m := _INSN_RE.match(line):
            pc = int(m.group(1), 16)
            if cur.pc < 0:
                cur.pc = pc
            cur.guest.append((pc, m.group(2).strip()))
        elif line.startswith("0x") and cur.guest:
            # x86: an instruction's bytes continued on the next line
            extra = line.split(":", 1)[1].strip()
            pc, b = cur.guest[-1]
            cur.guest[-1] = (pc, f"{b} {extra}")
    return [t for t in tbs if t.pc >= 0]


# a PC-relative jump (CF_PCREL) and QEMU's liveness annotations of an op
_PCREL_RE = re.compile(r"^((?:add|sub)_i(?:32|64) pc,pc,)\$0x[0-9a-f]+$")
_ANNOT_RE = re.compile(r"\s*(?:sync: [\d ]+|dead: [\d ]+|pref=\S+)")


def normalize_ops(ops: list[str], start: int, end: int) -> tuple[str, ...]:
    """The ops that become host code, without what differs between identical
    translations: liveness annotations, TB exit pointers, and constants
    near the function (guest PCs: a branch target moves when one variant's
    loop is an instruction longer elsewhere) as ``$PC``. Instruction-start markers
    (``---- pc ...``) are metadata, not host code, and are left out: a guest
    instruction that QEMU translates to nothing (a barrier elided in a
    one-vCPU guest) leaves only its marker."""
    out = []
    for op in ops:
        op = _ANNOT_RE.sub("", op).strip()
        if op.startswith("----"):
            continue
        if _PCREL_RE.match(op):      # a PC-relative jump (CF_PCREL): its distance moves too
            out.append(_PCREL_RE.match(op).group(1) + "$REL")
            continue
        if op.startswith("exit_tb "):
            v = int(op.split("$0x", 1)[1], 16) if "$0x" in op else 0
            out.append(f"exit_tb TB+{v & 3}")
            continue

        def pc(m):
            v = int(m.group(1), 16)
            return "$PC" if start - (1 << 20) <= v <= end + (1 << 20) else m.group(0)
        out.append(_HEX_RE.sub(pc, op))
    return tuple(out)


_LAYOUT_RE = re.compile(r"qrwbench: layout: (\w+) at ([0-9a-f]+)")


def layout(console: str, ko: Path) -> dict[str, tuple[int, int]]:
    """{function: (first, end) guest address} of the module's .text, from
    the console's layout line and the .ko's symbols."""
    m = _LAYOUT_RE.search(console)
    if not m:
        raise InputError("the guest printed no 'qrwbench: layout:' line (a module without it?)")
    funcs = Elf(ko).functions(".text")
    if m.group(1) not in funcs:
        raise InputError(f"{ko} has no function {m.group(1)}")
    base = int(m.group(2), 16) - funcs[m.group(1)].value
    return {n: (base + s.value, base + s.value + s.size) for n, s in funcs.items()}


@dataclass
class Code:
    guest: tuple     # the distinct translation blocks' guest instructions, sorted
    ir: tuple        # the distinct translation blocks' normalized ops, sorted


def function_code(tbs: list[TB], start: int, end: int) -> Code | None:
    """What TCG translated of the function at [start, end): None if nothing.
    Blocks are compared as sets, not by offset: a variant whose loop is one
    instruction longer has its blocks elsewhere, and a block translated
    twice (QEMU retranslates) counts once."""
    guest, ir = set(), set()
    for t in tbs:
        if start <= t.pc < end:
            guest.add(tuple(b for pc, b in t.guest if pc < end))
            ir.add(normalize_ops(t.ops, start, end))
    if not ir:
        return None
    return Code(tuple(sorted(guest)), tuple(sorted(ir)))


def label(a: Code | None, b: Code | None) -> str:
    if a is None or b is None:
        return NOT_RUN
    if a.guest == b.guest:
        return IDENTICAL
    return BLIND if a.ir == b.ir else DISTINCT


def comparisons() -> list[tuple[str, str, str, str, tuple[str, ...], tuple[str, ...]]]:
    """(impl, op, variant a, variant b, functions of a, functions of b): every
    atomics ordering pair of qrwb_ops.def and every qrwlock copy pair."""
    out = []
    for op, ords in vocab.op_orderings().items():
        for a, b in itertools.combinations(ords, 2):
            out.append(("inline", op, a, b, (f"qrwb_loop_{op}_{a}_c0",), (f"qrwb_loop_{op}_{b}_c0",)))
    copies = vocab.module_lock_variants()        # the module's qrwlock copies (c0)
    fns = lambda v: tuple(f"qrwb_{copies[v]}_{p}" for p in ("loop", "read_lock_slowpath",
                                                            "write_lock_slowpath"))
    for a, b in itertools.combinations(copies, 2):
        out.append(("module", "rwlock", a, b, fns(a), fns(b)))
    return out


def static_code(elf: Elf, name: str, variant: str) -> tuple:
    """A function's bytes in the .ko and its relocations (offset, type,
    addend, target with the variant's name taken out): the guest code, as
    built, whatever part of it ran."""
    text = elf.section(".text")
    f = elf.functions(".text")[name]
    body = elf.data[text.offset + f.value:text.offset + f.value + f.size]
    syms = elf.symbols
    rel = []
    for off, idx, typ, addend in elf.relas(".text"):
        if f.value <= off < f.value + f.size:
            target = syms[idx].name if idx < len(syms) else "?"
            rel.append((off - f.value, typ, addend, target.replace(f"_{variant}_", "_*_")))
    return body.hex(), tuple(sorted(rel))


def code_of(tbs, lay, names, elf: Elf | None = None, variant: str = "") -> Code | None:
    """The translated code of ``names`` (functions of one variant); the guest
    part from the .ko when ``elf`` is given, else from the translated blocks."""
    parts = [(n, function_code(tbs, *lay[n])) for n in names if n in lay]
    parts = [(n, p) for n, p in parts if p is not None]
    if not parts:
        return None
    guest = (tuple(static_code(elf, n, variant) for n, _ in parts) if elf is not None
             else tuple(p.guest for _, p in parts))
    return Code(guest, tuple(p.ir for _, p in parts))


def audit_boot(tbs, lay, elf: Elf | None = None) -> list[dict]:
    """The labels of every comparison from one boot's log (``elf``: the .ko,
    for guest-code identity as built; without it, as translated)."""
    rows = []
    for impl, op, a, b, fa, fb in comparisons():
        ca, cb = code_of(tbs, lay, fa, elf, a), code_of(tbs, lay, fb, elf, b)
        rows.append({"impl": impl, "op": op, "variants": [a, b], "label": label(ca, cb)})
    return rows


def variant_functions() -> dict:
    """{(impl, op): {variant: functions}} of every compared loop
    (:func:`comparisons`' sides)."""
    out: dict = {}
    for impl, op, a, b, fa, fb in comparisons():
        out.setdefault((impl, op), {}).update({a: fa, b: fb})
    return out


# what the barrier table counts: QEMU's memory barrier op, and its atomic helpers
_BARRIER_OP_RE = re.compile(r"^(mb \$0x[0-9a-f]+|call atomic_\w+)")


def barrier_ops(tbs, lay, names) -> dict | None:
    """{op: count} of the memory barriers (``mb $<TCG_MO/TCG_BAR bits>``) and
    atomic helper calls in the translated code of ``names`` (each distinct
    block once), None if none of it ran: what QEMU runs for a variant's
    ordering (a barrier elided for one vCPU leaves no ``mb``)."""
    code = code_of(tbs, lay, names)
    if code is None:
        return None
    n: dict = {}
    for part in code.ir:
        for block in part:
            for op in block:
                if m := _BARRIER_OP_RE.match(op):
                    n[m.group(1)] = n.get(m.group(1), 0) + 1
    return dict(sorted(n.items()))


# The barrier table's rows: one op that every ordering has, and the lock copies.
BARRIER_ROWS = (("inline", "atomic_add_return"), ("module", "rwlock"))


def barrier_rows(tbs, lay) -> list[dict]:
    """One row per BARRIER_ROWS entry that ran: {impl, op, ops: {variant: {op: n}}}."""
    fns = variant_functions()
    rows = []
    for key in BARRIER_ROWS:
        got = {v: barrier_ops(tbs, lay, names) for v, names in fns.get(key, {}).items()}
        if any(x is not None for x in got.values()):
            rows.append({"impl": key[0], "op": key[1], "ops": got})
    return rows


# ------------------------------------------------------------------ boots

# {workload: the parameters of its logged boot} (vocab.Workload.emu_params)
WORKLOADS = {n: w.emu_params for n, w in vocab.WORKLOAD_TABLE.items() if w.emu_params}


def run_dir(out: Path, arch, cpu, vcpus, workload) -> Path:
    """Where the logged boot of one target, vCPU count and workload writes."""
    return out / "runs" / f"{arch}-{cpu}-{vcpus}v-{workload}"


def boot_logged(arch, cpu, vcpus, workload, out: Path, variant="acqrel",
                extra: dict | None = None) -> tuple[str, str]:
    """Boot one guest with QEMU's translation log; (console, log text)."""
    image, initrd, kdir, _src = boot.kernel_paths(arch, variant)
    params = {"workload": workload, "seed": 1, **WORKLOADS[workload], **(extra or {})}
    append = " ".join(f"qrwbench.{k}={v}" for k, v in params.items())
    cmd = qemu.command(arch, "tcg", cpu, vcpus, 256, image, initrd, append)
    lo, hi = vocab.ARCHES[arch].module_area
    log = out / "tcg.log"
    i = cmd.index("-append")
    cmd[i:i] = ["-d", "in_asm,op_opt", "-dfilter", f"{lo:#x}..{hi:#x}", "-D", str(log)]
    st = qemu.boot(cmd, out, 300)
    console = (out / "console.log").read_text(errors="replace") if (out / "console.log").exists() else ""
    if st["status"] != "ok":
        raise InputError(f"{arch}/{cpu} {vcpus}v {workload}: the logged boot failed: {st.get('reason')}")
    return console, log.read_text(errors="replace") if log.exists() else ""


def label_targets(out: Path, vcpus=(1, 2), cpus=None, workloads=tuple(WORKLOADS), extra=None,
                  log=print, barriers=None) -> list[dict]:
    """Label every comparison on every TCG target (``cpus``: only these (arch,
    cpu) pairs); rows with arch, cpu_model, vcpus. ``barriers``: a list that
    gets the barrier rows (:func:`barrier_rows`) of each boot."""
    rows = []
    tgts = [(a, c) for a in vocab.ARCHES for c in vocab.ARCHES[a].cpu_models
            if cpus is None or (a, c) in cpus]
    n, i = len(tgts) * len(vcpus) * len(workloads), 0
    for (arch, cpu), v, wl in itertools.product(tgts, vcpus, workloads):
        i += 1
        d = run_dir(out, arch, cpu, v, wl)
        log(f"[emulator audit {i}/{n}] {arch}/tcg/{cpu} {v}v {wl} (log: {d / 'tcg.log'})")
        console, text = boot_logged(arch, cpu, v, wl, d, extra=(extra or {}).get(wl))
        ko = vocab.module_ko(arch, "acqrel")
        lay = layout(console, ko)
        tbs = parse_log(text)
        if barriers is not None:
            barriers += [{"arch": arch, "cpu_model": cpu, "vcpus": v, **b} for b in barrier_rows(tbs, lay)
                         if b["impl"] in vocab.workload(wl).impls]
        for r in audit_boot(tbs, lay, Elf(ko)):
            if r["impl"] not in vocab.workload(wl).impls:     # the other workload's pair
                continue
            rows.append({"arch": arch, "accel": "tcg", "cpu_model": cpu, "vcpus": v, **r})
    return rows


def to_json(rows: list[dict], qemu_version: str, **extra) -> dict:
    return {"schema": 1, "emulator": qemu_version, **extra,
            "blind": [{k: r[k] for k in ("arch", "accel", "cpu_model", "vcpus", "impl", "op",
                                          "variants")} for r in rows if r["label"] == BLIND],
            "labels": rows}


def table(rows: list[dict]) -> str:
    """Per target and vCPU count: how many pairs got each label, atomics and
    qrwlock copies apart, with the emulator-blind pairs named."""
    lines = ["| target | vCPUs | impl | identical guest code | emulator-blind | distinguishable | not executed |",
             "|---|---|---|---|---|---|---|"]
    key = lambda r: (r["arch"], r["cpu_model"], r["vcpus"], r["impl"])
    for k, grp in itertools.groupby(sorted(rows, key=key), key=key):
        grp = list(grp)
        c = {lab: sum(r["label"] == lab for r in grp) for lab in (IDENTICAL, BLIND, DISTINCT, NOT_RUN)}
        lines.append(f"| {k[0]}/tcg/{k[1]} | {k[2]} | {k[3]} | {c[IDENTICAL]} | {c[BLIND]} | "
                     f"{c[DISTINCT]} | {c[NOT_RUN]} |")
    return "\n".join(lines)


TCG_MO_ST_LD = 0x02     # tcg/tcg-mo.h: the ordering bit x86_64's TCG backend needs a fence for
# the hosts whose TCG backend is tcg/i386 (those that run x86_64 guests under KVM)
_X86_HOSTS = vocab.ARCHES["x86_64"].host_machine


def barrier_text(op: str) -> str:
    """One barrier-table entry: an ``mb`` says whether QEMU's x86_64 backend
    emits a host fence for it (tcg_out_mb: only for TCG_MO_ST_LD; other
    hosts: the bits alone)."""
    if not op.startswith("mb "):
        return op
    bits = int(op.split("$")[1], 16)
    if platform.machine() not in _X86_HOSTS:
        return op
    return f"{op} ({'host fence' if bits & TCG_MO_ST_LD else 'no host code'})"


def barrier_table(barriers: list[dict]) -> str:
    """The barrier rows as Markdown: per target, vCPU count and loop, the
    barrier ops and atomic helpers QEMU runs for each variant (which ones,
    not how many: the count follows how QEMU split the loop into blocks)."""
    cell = lambda d: "not executed" if d is None else (
        ", ".join(barrier_text(k) for k in d) or "none")
    lines = ["| target | vCPUs | loop | variant: ops |", "|---|---|---|---|"]
    for b in sorted(barriers, key=lambda b: (b["arch"], b["cpu_model"], b["vcpus"], b["impl"])):
        ops = "; ".join(f"{v}: {cell(d)}" for v, d in b["ops"].items())
        lines.append(f"| {b['arch']}/tcg/{b['cpu_model']} | {b['vcpus']} | {b['impl']} {b['op']} | {ops} |")
    return "\n".join(lines)


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench emuaudit`` (the parser is cli's)."""
    outputs.add_out_option(ap, "emulator")
    ap.add_argument("--vcpus", default="1,2", help="comma-separated vCPU counts (default 1,2)")


def run(a) -> int:
    """``python3 -m qrwbench emuaudit``: bad input raises InputError (cli.main
    prints it; nothing is written)."""
    try:
        vcpus = tuple(int(x) for x in a.vcpus.split(","))
    except ValueError:
        vcpus = ()
    if not vcpus or not all(1 <= v <= 8 for v in vcpus):
        raise InputError(f"--vcpus {a.vcpus!r}: valid is a comma-separated list of 1..8")
    for arch in vocab.ARCHES:
        boot.kernel_paths(arch, "acqrel")         # before any boot
    out, text = write(a.out, vcpus)
    print(text)
    print(f"emuaudit: {out / 'emulator.json'}, {out / 'emulator.md'}")
    return 0


def write(out, vcpus, cpus=None, log=print, keep=None, **extra) -> tuple[Path, str]:
    """Label the targets (``cpus``: only these (arch, cpu) pairs) into the
    emulator audit directory ``out`` (replaced only if it is one); ``keep``:
    a previous emulator.json's rows (``labels``, ``barriers``) of targets still
    current, kept with their boots' logs; ``extra`` goes into emulator.json
    (run/audits.py: its inputs and targets)."""
    out = outputs.check(out, "emulator", "qrwbench emulator audit directory")
    ver = qemu.qemu_version(qemu.qemu_binary(sorted({a for a, _c in cpus or ()} or vocab.ARCHES)[0]))
    keep = keep or {}
    with outputs.replacing(out, "emulator", "qrwbench emulator audit directory") as tmp:
        kept = {(r["arch"], r["cpu_model"], r["vcpus"]) for r in keep.get("labels", [])}
        for t, wl in itertools.product(sorted(kept), WORKLOADS):
            if run_dir(out, *t, wl).is_dir():
                shutil.copytree(run_dir(out, *t, wl), run_dir(tmp, *t, wl))
        barriers: list = list(keep.get("barriers", []))
        rows = list(keep.get("labels", [])) + label_targets(tmp, vcpus, cpus=cpus, log=log,
                                                            barriers=barriers)
        text = f"{table(rows)}\n\nWhat QEMU runs for each ordering (barrier ops and atomic helpers " \
               f"in the translated loops):\n\n{barrier_table(barriers)}"
        (tmp / "emulator.json").write_text(
            json.dumps(to_json(rows, ver, barriers=barriers, **extra), indent=1) + "\n")
        (tmp / "emulator.md").write_text(f"# Emulator audit ({ver})\n\n{text}\n")
    return out, text

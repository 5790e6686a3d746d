"""Per-arch ordering audit (issue 30): what the qrwlock fast paths and every
atomic ordering compile to on every architecture that uses qrwlock.

Reads objects only, never a bootable kernel: per arch and variant,
``kernel/scripts/build-kernel.sh ARCH VARIANT --objects`` configures the
tree (tinyconfig + base + the arch's fragment + the variant's), prepares it
and builds kernel/locking/qrwlock.o, kernel/locking/spinlock.o and the probe
kernel/probe/qrwb_probe.c, which has one function per lock fast path
(``qrwb_probe_read_lock`` ...: the arch's arch_read_lock() etc.) and one per
row of the op table (``qrwb_probe_op_<op>_<ordering>``). Each function's
ordering instructions are read from its disassembly (the arch's objdump;
disasm.ordering_token, per ISA):

- x86_64: lock-prefixed instructions, xchg with memory, m/l/sfence;
- arm64: acquire/release accesses, exclusives, LSE atomics, dmb/dsb, and
  separately for the LSE and the LL/SC path the kernel patches in at boot
  (``.altinstructions``: disasm.arm64_paths);
- powerpc: sync (objdump's hwsync), lwsync, isync, eieio, the reservations
  l[bhwd]arx / st[bhwd]cx.; an isync listed in ``__lwsync_fixup`` is
  written ``isync*``: the kernel rewrites it to lwsync at boot (at load in a
  module) on every CPU with CPU_FTR_LWSYNC (PPC970, POWER5 and later);
- riscv: fences with their sets, AMOs and lr/sc with .aq/.rl/.aqrl;
- mips: sync (with its stype), ll/lld/sc/scd;
- sparc: membar with its mask, stbar, cas/casx, ldstub, swap.

A call to an out-of-line function of the build (sparc64's atomics are
functions in arch/sparc/lib/atomic_64.S, built as an extra object, a
``# qrwbench-objects:`` line of the arch's fragment) is replaced by that
function's ordering instructions, in braces.

What the table says is what every CPU of the arch executes for that code:
hardware-true, unlike a TCG timing, which only measures QEMU's emulation.
Where two variants' fast paths, or two orderings of one op, are identical
code (hash of the instructions without addresses) the audit says so: any
measured difference between them is noise.

    /usr/bin/python3 -m qrwbench archaudit [--out build/archaudit] [OBJECTS_DIR ...]
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .. import outputs, vocab
from . import disasm, elfmini, module_audit, promise

OBJECTS = vocab.BUILD / "objects"
PROBE = "qrwb_probe"
# the fast paths, as the probe names them; the table's columns are the first four
LOCK_PATHS = ("read_lock", "read_unlock", "write_lock", "write_unlock")
TRY_PATHS = ("read_trylock", "write_trylock")
# the kernel's own functions in the other two objects (absent where inlined)
KERNEL_FUNCS = {f"_raw_{p}": p for p in LOCK_PATHS + TRY_PATHS}
SLOWPATHS = ("queued_read_lock_slowpath", "queued_write_lock_slowpath")
# ops shown on the console, per ordering (every op: the .txt): the qrwlock's
# own (read lock, read unlock, write lock) and xchg
CONSOLE_OPS = ("atomic_add_return", "atomic_sub_return", "atomic_try_cmpxchg", "atomic_xchg")
PATCHED = "*"           # suffix of an instruction the kernel rewrites at boot
CALL = "call:"          # prefix of a relocated symbol in an order, before expand_calls
NOTE_PPC = (f"powerpc: isync{PATCHED} is an acquire barrier listed in __lwsync_fixup: the "
            "kernel rewrites it to lwsync at boot (modules at load) on every CPU with "
            "CPU_FTR_LWSYNC (PPC970, POWER5 and later: POWER9 and POWER10 run lwsync)")
NOTE_X86 = ("x86_64: a lock prefix is recorded in .smp_locks and patched out only while one "
            "CPU is online; every SMP guest runs the locked instructions shown")
HARDWARE_TRUE = ("What each CPU of the arch executes for this code: hardware-true, unlike any "
                 "TCG timing (which measures QEMU's emulation of it).")

def lwsync_fixups(elf: elfmini.Elf) -> set[tuple[str, int]]:
    """(section, offset) of every isync a powerpc object lists in
    ``__lwsync_fixup`` (entries ``.long 97b - .``: relocations against the
    code's section)."""
    out = set()
    for off, sym, _type, addend in elf.relas("__lwsync_fixup"):
        s = elf.symbols[sym]
        if 0 < s.shndx < len(elf.sections):
            out.add((elf.sections[s.shndx].name, s.value + addend))
    return out


_RELOC_SYM = re.compile(r"\[reloc ([A-Za-z_][\w.]*?)(?:[+-]0x[0-9a-f]+)?\]$")


def _record(dis: disasm.Disasm, fn: str, karch: str, patched: set) -> dict:
    sec, _start, _size = dis.funcs[fn]
    ins = dis.func(fn)
    order, calls = [], []
    for a, t in ins:
        tok = disasm.ordering_token(karch, t)
        if tok is not None:
            order.append(tok + PATCHED if (sec, a) in patched else tok)
        elif m := _RELOC_SYM.search(t):
            # a relocated symbol: a call, or an out-of-line function's name
            # (expand_calls puts its ordering instructions here)
            order.append(CALL + m.group(1))
            calls.append(m.group(1))
    return {"order": order, "hash": module_audit.code_hash([t for _a, t in ins], fn), "calls": calls}


def audit_object(path: Path, arch: str, lse_cap: int | None = None) -> dict:
    """{view: {function: {"order": [...], "hash": ...}}} of one object: the
    view is the arch, or on arm64 "arm64/lse" and "arm64/llsc"."""
    karch = vocab.build_arches()[arch].karch
    dis = disasm.Disasm(path, arch, sections=None)     # every section
    if karch == "arm64":
        alts = {sec: elfmini.arm64_altinstructions(dis.elf, sec)
                for sec in {sec for sec, _a, _s in dis.funcs.values()}}
        views: dict[str, dict] = {f"{arch}/lse": {}, f"{arch}/llsc": {}}
        for fn in sorted(dis.funcs):
            sec = dis.funcs[fn][0]
            for mode, p in disasm.arm64_paths(dis, fn, alts[sec], lse_cap).items():
                views[f"{arch}/{mode}"][fn] = {"order": disasm.ordering_insns(karch, p),
                                               "hash": module_audit.code_hash(p, fn), "calls": []}
        return views
    patched = lwsync_fixups(dis.elf) if karch == "powerpc" else set()
    return {arch: {fn: _record(dis, fn, karch, patched) for fn in sorted(dis.funcs)}}


def built_objects() -> list[Path]:
    """Every finished object build (build/objects/<arch>-<variant>)."""
    return sorted(p for p in OBJECTS.glob("*-*") if (p / ".qrwbench-objects").exists())


# the objects build-kernel.sh --objects builds (its list: OBJECTS_LIST)
PROBE_OBJ = f"probe/{PROBE}.o"
OBJECTS_LIST = ".qrwbench-objects-list"


def expand_calls(rec: dict, callees: dict[str, dict]) -> dict:
    """``rec`` with each call to an out-of-line function of the build (sparc64's
    atomics, arch/sparc/lib/atomic_64.o) replaced by that function's ordering
    instructions in braces; other relocated symbols (the slow paths, data)
    dropped. ``via``: the functions expanded."""
    order, via = [], []
    for t in rec["order"]:
        if not t.startswith(CALL):
            order.append(t)
        elif (sym := t[len(CALL):]) in callees and sym not in SLOWPATHS:
            order += ["{" + x + "}" for x in callees[sym]["order"] if not x.startswith(CALL)]
            via.append(sym)
    return {**rec, "order": order, **({"via": via} if via else {})}


def audit_build(d: Path) -> dict:
    """One object build: its views, each with the probe's fast paths
    ("paths"), its ops ("ops": {op: {ordering: record}}), the kernel's
    _raw_* functions and the slow paths ("kernel")."""
    arch, variant = d.name.split("-", 1)
    if arch not in vocab.build_arches():
        raise ValueError(f"{d}: unknown arch '{arch}'")
    cap = disasm.lse_cap(d) if vocab.build_arches()[arch].karch == "arm64" else None
    views = audit_object(d / PROBE_OBJ, arch, cap)
    objs = (d / OBJECTS_LIST).read_text().split()
    others: dict[str, dict] = {}
    for obj in objs:
        if obj != PROBE_OBJ:
            for view, funcs in audit_object(d / obj, arch, cap).items():
                others.setdefault(view, {}).update(funcs)
    kernel = {view: {f: expand_calls(r, funcs) for f, r in funcs.items()
                     if f in KERNEL_FUNCS or f in SLOWPATHS} for view, funcs in others.items()}
    views = {view: {f: expand_calls(r, others.get(view, {})) for f, r in funcs.items()}
             for view, funcs in views.items()}
    orderings = vocab.op_orderings()
    out = {"arch": arch, "variant": variant, "dir": str(d),
           "atomics_fully_ordered": promise.fully_ordered_kernel(d), "views": {}}
    for view, funcs in views.items():
        ops = {op: {o: funcs[f"{PROBE}_op_{op}_{o}"] for o in ords
                    if f"{PROBE}_op_{op}_{o}" in funcs}
               for op, ords in orderings.items()}
        out["views"][view] = {
            "paths": {p: funcs[f"{PROBE}_{p}"] for p in LOCK_PATHS + TRY_PATHS
                      if f"{PROBE}_{p}" in funcs},
            "ops": {op: e for op, e in ops.items() if e},
            "kernel": kernel.get(view, {})}
    return out


def lock_rows(builds: list[dict]) -> dict[str, dict[str, dict]]:
    """{view: {variant: {path: record}}}, views by arch, variants most ordered first."""
    rows: dict[str, dict[str, dict]] = {}
    for b in sorted(builds, key=lambda b: (b["arch"], vocab.variant_rank(b["variant"]))):
        for view, v in b["views"].items():
            rows.setdefault(view, {})[b["variant"]] = v["paths"]
    return rows


def identical_variants(builds: list[dict]) -> list[dict]:
    """Variants of one view whose fast paths are all identical code, and per
    path, the variants whose code for it is identical."""
    out = []
    for view, by_variant in lock_rows(builds).items():
        paths = LOCK_PATHS + TRY_PATHS
        whole = {v: "|".join(p.get(n, {}).get("hash", "-") for n in paths)
                 for v, p in by_variant.items()}
        for g in disasm.hash_groups(whole):
            out.append({"view": view, "path": "all", "variants": g})
        alls = [set(g) for g in disasm.hash_groups(whole)]
        for n in paths:
            for g in disasm.hash_groups({v: p[n]["hash"] for v, p in by_variant.items() if n in p}):
                if set(g) not in alls:          # more than the variants identical throughout
                    out.append({"view": view, "path": n, "variants": g})
    return out


def identical_orderings(builds: list[dict]) -> list[dict]:
    """Orderings of one op that compile to identical code, per view (from the
    builds of the upstream variant, acqrel, where built, else any)."""
    out = []
    for b in _op_builds(builds):
        for view, v in b["views"].items():
            for op, ords in v["ops"].items():
                for g in disasm.hash_groups({o: r["hash"] for o, r in ords.items()}):
                    out.append({"view": view, "op": op, "orderings": g})
    return out


def _op_builds(builds: list[dict]) -> list[dict]:
    """One build per arch for the atomics tables: the baseline variant of
    the rwlock workload (acqrel, the upstream kernel) where built."""
    base = vocab.BASELINES["rwlock"]
    by: dict[str, dict] = {}
    for b in sorted(builds, key=lambda b: b["variant"] != base):
        if not b["atomics_fully_ordered"]:
            by.setdefault(b["arch"], b)
    return [by[a] for a in sorted(by)]


def kernel_mismatches(builds: list[dict]) -> list[str]:
    """Where the kernel's own _raw_* function (spinlock.o) has other ordering
    instructions than the probe's fast path: the probe would not be the
    kernel's code."""
    out = []
    for b in builds:
        for view, v in b["views"].items():
            for fn, path in KERNEL_FUNCS.items():
                k, p = v["kernel"].get(fn), v["paths"].get(path)
                if k and p and k["order"] != p["order"]:
                    out.append(f"{view} {b['variant']}: {fn} has {' '.join(k['order']) or '-'}, "
                               f"the probe's {path} {' '.join(p['order']) or '-'}")
    return out


def cell(rec: dict | None) -> str:
    """One table cell: the ordering instructions in address order."""
    if rec is None:
        return "?"
    return " ".join(rec["order"]) or "-"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def fmt(r):
        return "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
    return [fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def format_lock_table(builds: list[dict]) -> list[str]:
    same = {(g["view"], v): [x for x in g["variants"] if x != v]
            for g in identical_variants(builds) if g["path"] == "all" for v in g["variants"]}
    rows = [[view, variant] + [cell(paths.get(p)) for p in LOCK_PATHS]
            + [", ".join(same.get((view, variant), [])) or "-"]
            for view, by_variant in lock_rows(builds).items()
            for variant, paths in by_variant.items()]
    return _table(["arch", "variant"] + list(LOCK_PATHS) + ["same code as"], rows)


def format_same_paths(identical: list[dict]) -> list[str]:
    """One line per view and group of variants: the fast paths (of all six)
    whose code is identical in those variants, beyond "same code as"."""
    by: dict[tuple, list[str]] = {}
    for g in identical:
        if g["path"] != "all":
            by.setdefault((g["view"], " = ".join(g["variants"])), []).append(g["path"])
    return [f"same code: {view}: {variants} in {', '.join(paths)}"
            for (view, variants), paths in by.items()]


def format_op_table(builds: list[dict], op: str) -> list[str]:
    ords = vocab.op_orderings()[op]
    rows = []
    for b in _op_builds(builds):
        for view, v in b["views"].items():
            e = v["ops"].get(op, {})
            same = "; ".join(" = ".join(g) for g in disasm.hash_groups({o: r["hash"] for o, r in e.items()}))
            rows.append([view, b["variant"]] + [cell(e.get(o)) for o in ords] + [same or "-"])
    return _table([op, "variant"] + list(ords) + ["same code"], rows)


def format_single_ops(builds: list[dict]) -> list[str]:
    """The ops with one ordering that are barriers or accesses (smp_mb, ...)."""
    ops = [op for op, ords in vocab.op_orderings().items()
           if len(ords) == 1 and ords[0] != "relaxed"]
    rows = [[view, b["variant"]]
            + [cell(v["ops"].get(op, {}).get(vocab.op_orderings()[op][0])) for op in ops]
            for b in _op_builds(builds) for view, v in b["views"].items()]
    return _table(["arch", "variant"] + ops, rows)


def format_text(doc: dict, every_op: bool = False) -> str:
    builds = doc["builds"]
    lines = ["ordering instructions per lock/unlock, by arch and variant (qrwlock fast paths, "
             "in address order)", HARDWARE_TRUE, ""]
    lines += format_lock_table(builds)
    lines += format_same_paths(doc["identical_variants"])
    lines += ["", "ordering instructions per atomic op and ordering (one build per arch, the "
                  f"upstream {vocab.BASELINES['rwlock']} where built: its variant on each row; "
                  "every op: archaudit.txt)", HARDWARE_TRUE]
    ops = list(vocab.op_orderings()) if every_op else list(CONSOLE_OPS)
    for op in ops:
        if len(vocab.op_orderings()[op]) > 1:
            lines += [""] + format_op_table(builds, op)
    lines += [""] + format_single_ops(builds)
    if every_op:
        lines += ["", "kernel/locking/qrwlock.o slow paths and spinlock.o's _raw_* functions"]
        for b in builds:
            for view, v in b["views"].items():
                for fn, r in v["kernel"].items():
                    lines.append(f"  {view:12s} {b['variant']:8s} {fn:28s} {cell(r)}")
    lines += [""] + [f"note: {n}" for n in doc["notes"]]
    for m in doc["kernel_mismatches"]:
        lines.append(f"MISMATCH: {m}")
    return "\n".join(lines)


def notes(builds: list[dict]) -> list[str]:
    karches = {vocab.build_arches()[b["arch"]].karch for b in builds}
    out = []
    if any(PATCHED in t for b in builds for v in b["views"].values()
           for r in list(v["paths"].values()) + [x for e in v["ops"].values() for x in e.values()]
           for t in r["order"]):
        out.append(NOTE_PPC)
    if "x86_64" in karches:
        out.append(NOTE_X86)
    via = sorted({f for b in builds for v in b["views"].values()
                  for r in list(v["paths"].values()) + [x for e in v["ops"].values() for x in e.values()]
                  for f in r.get("via", ())})
    if via:
        out.append("{...}: an ordering instruction of an out-of-line function the code calls "
                   f"({', '.join(via[:4])}{', ...' if len(via) > 4 else ''}: the atomics of "
                   "arches that have them out of line, as sparc64's arch/sparc/lib/atomic_64.S)")
    full = sorted({b["arch"] for b in builds if b["atomics_fully_ordered"]})
    if full:
        out.append(f"allfull ({', '.join(full)}): every RMW atomic fully ordered "
                   "(CONFIG_ATOMICS_FULLY_ORDERED); its op tables are not shown")
    return out


def run_audit(dirs: list[Path]) -> dict:
    builds = []
    for i, d in enumerate(dirs, 1):
        print(f"archaudit: {i} of {len(dirs)}: {d.name}", file=sys.stderr)
        builds.append(audit_build(d))
    return {"schema": 1, "builds": builds, "identical_variants": identical_variants(builds),
            "identical_orderings": identical_orderings(builds),
            "kernel_mismatches": kernel_mismatches(builds), "notes": notes(builds)}


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench archaudit`` (the parser is cli's)."""
    outputs.add_out_option(ap, "archaudit")
    ap.add_argument("objects", nargs="*",
                    help="object build directories (default: every one under build/objects, "
                         "from kernel/scripts/build-kernel.sh ARCH VARIANT --objects)")


def run(args) -> int:
    out = outputs.check(args.out, "archaudit")      # before any work
    dirs = [Path(d) for d in args.objects] or built_objects()
    if not dirs:
        print("archaudit: no object builds under build/objects (run 'make audit-objects')",
              file=sys.stderr)
        return 1
    for d in dirs:
        if not (d / ".qrwbench-objects").exists() or \
                d.name.split("-", 1)[0] not in vocab.build_arches():
            raise vocab.InputError(f"{d} is not an object build directory (no .qrwbench-objects "
                                   "of kernel/scripts/build-kernel.sh ARCH VARIANT --objects)")
        if not (d / OBJECTS_LIST).exists():
            raise vocab.InputError(f"{d} has no {OBJECTS_LIST} (built before the list existed: "
                                   "rerun kernel/scripts/build-kernel.sh ARCH VARIANT --objects)")
    doc = run_audit(dirs)
    with outputs.replacing(out, "archaudit") as tmp:
        (tmp / "archaudit.json").write_text(json.dumps(doc, indent=1))
        (tmp / "archaudit.txt").write_text(format_text(doc, every_op=True) + "\n")
    print(format_text(doc))
    print(f"archaudit: {len(doc['builds'])} object builds, "
          f"{len(doc['identical_variants'])} identical-code variant groups, "
          f"{len(doc['identical_orderings'])} identical-code ordering groups, "
          f"{len(doc['kernel_mismatches'])} probe/kernel mismatches")
    print(f"archaudit: wrote {out / 'archaudit.json'} and {out / 'archaudit.txt'}")
    return 1 if doc["kernel_mismatches"] else 0

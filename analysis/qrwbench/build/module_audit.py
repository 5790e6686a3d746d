"""The ordering audit of one built module (build/modules/<arch>-<variant>/qrwbench.ko):

- every atomics loop ``qrwb_loop_<op>_<ordering>_<copy>`` of qrwb_ops.def, per
  ordering and copy (c0, c1, c1mb): its ordering-relevant instructions, and on
  arm64 separately for the two paths the kernel selects between at boot (LSE
  atomics when ARM64_HAS_LSE_ATOMICS, else LL/SC), read from the module's
  ``.altinstructions`` (a patched-to-nop branch or an in-place replacement:
  disasm.arm64_paths);
- whether c0 and c1 are identical (they must be: the A/A pair) and whether c1mb
  adds exactly one full barrier per op (the injected cost);
- whether each ordering compiles to what its name promises (e.g. an _acquire
  op with no acquire instruction on one of the arm64 paths is reported:
  promise.py);
- the module's qrwlock copies (``qrwb_<impl>_*``: full, acqrel, relaxed, the A/A
  copy) and ``qrwb_kernel_loop``, where the kernel variant's inlined fast paths
  live (all of them on arm64: ARCH_INLINE_*; the unlocks on x86_64);
- that every timed loop starts on a 64-byte boundary (ELF symbol values of the
  ``.text`` section, which is itself 64-byte aligned), and which loops cross a
  4 KiB page (under TCG such a copy runs slower than its identical twin:
  docs/validity.md).

Each function's record (``audit_functions``, the kernel audit's too) has a
code hash (``code_hash``) with addresses, branch targets inside the function
and the module's instance names (c0/c1, the qrwlock copies) taken out, so
that two copies or orderings of one template compare equal when their code is.
Which orderings of one op compile to identical code (all four on x86_64)
audit.module_identical reads from these hashes.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from .. import vocab
from . import elfmini
from .disasm import Disasm, arm64_paths, classify, lse_cap, ordering_insns
from .promise import check_promise, full_barriers, fully_ordered_kernel, promised_ordering

COPIES = ("c0", "c1", "c1mb")
# The functions of an in-module qrwlock instance (module_impls()).
LOCK_PARTS = ("loop", "read_lock", "write_lock", "read_unlock", "write_unlock",
              "read_lock_slowpath", "write_lock_slowpath")
LOOP_ALIGN = 64
PAGE = 4096     # a TCG translation block does not chain directly across a guest page


def _impls_of(kind: str) -> tuple[str, ...]:
    """The instances of one kind (none, kernel, module) of the lock table
    bench/module/qrwb_impls.def (vocab.lock_impls), in table order."""
    return tuple(i.name for i in vocab.lock_impls() if i.kind == kind)


def module_impls() -> tuple[str, ...]:
    """The in-module qrwlock instances."""
    return _impls_of("module")


def _lock_twins() -> list[tuple]:
    """(copy 0, copy n) row pairs of the lock table that must be identical
    code (the A/A control): same kind and ordering, no injected barrier."""
    rows = [i for i in vocab.lock_impls() if not i.mb]
    return [(a, b) for a in rows if a.copy == 0 for b in rows
            if b.copy and (b.kind, b.ordering) == (a.kind, a.ordering)]


def op_table() -> list[tuple[str, str]]:
    """(op, ordering) of every timed loop of qrwb_ops.def, in table order."""
    return [(op, o) for op, o, _stmt in vocab.op_rows()]


_SYM_LOOP = re.compile(r"\bqrwb_loop_\w+?_(?:c0|c1mb|c1)\b")


@functools.lru_cache(maxsize=None)
def _sym_impl() -> re.Pattern:
    """qrwb_<module instance>_<function>: longer names first (acqrel_c1mb before acqrel_c1)."""
    names = sorted(module_impls(), key=lambda n: (-len(n), n))
    return re.compile(r"\bqrwb_(?:" + "|".join(map(re.escape, names)) + r")_(\w+)")


def _norm_syms(t: str) -> str:
    """Instance names out: two copies (c0/c1) or orderings of one template compare equal."""
    t = _SYM_LOOP.sub("LOOP", t)
    return _sym_impl().sub(r"IMPL_\1", t)


def normalize_insn(text: str, fn: str) -> str:
    """One instruction without addresses: branch targets inside ``fn`` become
    function-relative, other targets their symbol, instance names generic."""
    def target(m):
        sym, off = m.group(1), m.group(2) or ""
        return f"<.{off}>" if sym == fn else f"<{_norm_syms(sym)}{off}>"
    t = re.sub(r"\b[0-9a-f]+ <([^>+]+)(\+0x[0-9a-f]+)?>", target, text)
    t = re.sub(r"\b[0-9a-f]{6,}\b", "X", t)
    return _norm_syms(re.sub(r"\s+", " ", t))


def code_hash(insns: list[str], fn: str) -> str:
    """Hash of a function's instructions, each as normalize_insn writes it."""
    h = hashlib.sha256()
    for ins in insns:
        h.update(normalize_insn(ins, fn).encode() + b"\n")
    return h.hexdigest()[:16]


def per_op(order: list[str], unroll: int) -> list[str] | None:
    """The ordering instructions of one op of a loop that writes its op
    ``unroll`` times, in address order; None when the loop is not that.

    ``order`` must be a run of segments, each ``unroll`` repetitions of one
    pattern: one segment for a loop of inline code (x86_64, an arm64 LSE
    path), two on arm64 when the op's LL/SC code lies out of line after the
    loop (``unroll`` inline parts, then as many out-of-line ones). Every instruction
    then occurs ``unroll`` times as often as in one op."""
    if not order:
        return []
    for k in range(1, len(order) // unroll + 1):
        head = order[:k]
        if order[:k * unroll] == head * unroll:
            rest = per_op(order[k * unroll:], unroll)
            if rest is not None:
                return head + rest
    return None


def _fn_record(arch: str, name: str, insns: list[str], addr: int, size: int,
               paths: dict | None) -> dict:
    """One function's record. A timed atomics loop (``qrwb_loop_*``) writes
    its op vocab.loop_unroll() times: its "order" and counts are those of
    one op ("unrolled": the repetitions, "per_op": False when the loop's
    ordering instructions are not that many copies of one op's, and then
    "order" is the whole loop's)."""
    unroll = vocab.loop_unroll() if name.startswith("qrwb_loop_") else 1

    def fold(order):
        one = per_op(order, unroll)
        return (order, False) if one is None else (one, True)

    karch = vocab.build_arches()[arch].karch
    order, ok = fold(ordering_insns(karch, insns))
    rec = {"addr": addr, "size": size, "align64": addr % LOOP_ALIGN == 0,
           "crosses_page": addr // PAGE != (addr + size - 1) // PAGE,
           "order": order, "hash": code_hash(insns, name), "n_insns": len(insns),
           **classify(arch, order)}
    if unroll > 1:
        rec["unrolled"], rec["per_op"] = unroll, ok
    if paths is not None:
        rec["paths"] = {}
        for mode, p in paths.items():
            po, pok = fold(ordering_insns(karch, p))
            rec["paths"][mode] = {"order": po, "hash": code_hash(p, name), **classify(arch, po)}
            if unroll > 1:
                rec["paths"][mode]["per_op"] = pok
    return rec


def audit_functions(dis: Disasm, names, lse: int | None = None) -> dict:
    """{name: record} of the named functions that exist in ``dis``."""
    alts = elfmini.arm64_altinstructions(dis.elf) if dis.arch == "arm64" else []
    res = {}
    for name in names:
        if name not in dis.funcs:
            continue
        sec, start, size = dis.funcs[name]
        insns = [t for _a, t in dis.func(name)]
        paths = arm64_paths(dis, name, alts, lse) if dis.arch == "arm64" else None
        res[name] = _fn_record(dis.arch, name, insns, start, size, paths)
    return res


def audit_module(ko: Path, arch: str, variant: str, kdir: Path | None = None,
                 ops: list[tuple[str, str]] | None = None) -> dict:
    """Everything the audit says about one built module (see the module docstring)."""
    ops = ops or op_table()
    all_full = fully_ordered_kernel(kdir)
    dis = Disasm(ko, arch)
    cap = lse_cap(kdir) if arch == "arm64" else None
    loop_names = [f"qrwb_loop_{op}_{o}_{c}" for op, o in ops for c in COPIES]
    lock_names = [f"qrwb_{impl}_{part}" for impl in module_impls() for part in LOCK_PARTS]
    lock_names += [f"qrwb_{impl}_loop" for impl in _impls_of("kernel") + _impls_of("none")]
    funcs = audit_functions(dis, loop_names + lock_names, cap)
    missing = [n for n in loop_names if n not in funcs]
    doc = {"arch": arch, "variant": variant, "module": str(ko), "lse_cap": cap,
           "atomics_fully_ordered": all_full,
           "functions": funcs, "missing_loops": missing, "ops": {}, "locks": {},
           "findings": [], "misaligned": []}
    paths = ("lse", "llsc") if arch == "arm64" else (None,)
    for name, rec in funcs.items():
        if (name.startswith("qrwb_loop_") or name.endswith("_loop")) and not rec["align64"]:
            doc["misaligned"].append({"function": name, "addr": rec["addr"]})
    for op, o in ops:
        recs = {c: funcs.get(f"qrwb_loop_{op}_{o}_{c}") for c in COPIES}
        if recs["c0"] is None:
            continue
        entry = {"hash": {c: r["hash"] for c, r in recs.items() if r},
                 "order": recs["c0"]["order"],
                 "copies_identical": bool(recs["c1"]) and recs["c0"]["hash"] == recs["c1"]["hash"],
                 "promised": promised_ordering(op, o, all_full),
                 "promise": check_promise(arch, op, promised_ordering(op, o, all_full), recs["c0"])}
        if "paths" in recs["c0"]:
            entry["paths"] = {m: {"order": p["order"], "hash": p["hash"]}
                              for m, p in recs["c0"]["paths"].items()}
        if recs["c1mb"]:
            entry["inject_adds"] = {m or "all": full_barriers(arch, recs["c1mb"], m)
                                    - full_barriers(arch, recs["c0"], m) for m in paths}
        doc["ops"].setdefault(op, {})[o] = entry
        not_folded = sorted(c for c, r in recs.items() if r and not (
            r.get("per_op", True) and all(p.get("per_op", True) for p in r.get("paths", {}).values())))
        if not_folded:
            doc["findings"].append({"kind": "unroll", "op": op, "ordering": o,
                                    "text": f"the {'/'.join(not_folded)} loop of {op}_{o} is not "
                                            f"{vocab.loop_unroll()} copies of one op: its ordering "
                                            "instructions are shown for the whole loop"})
        if not entry["copies_identical"]:
            doc["findings"].append({"kind": "aa-copies-differ", "op": op, "ordering": o,
                                    "text": f"copy 0 and copy 1 of {op}_{o} are not identical code"})
        for f in entry["promise"]:
            doc["findings"].append({"kind": f["kind"], "op": op, "ordering": o, "path": f["path"],
                                    "text": f"{op} ({o}{', promised full' if o != entry['promised'] else ''}) "
                                            f"on the {f['path']} path is "
                                            + {"stronger": "more ordered than its name",
                                               "weaker": "LESS ORDERED THAN ITS NAME PROMISES",
                                               "missing": "NOT AN ATOMIC RMW"}[f["kind"]]
                                            + ": expected "
                                            f"{f['expected']}, got {f['got']}"})
        if recs["c1mb"] and any(v != 1 for v in entry["inject_adds"].values()):
            doc["findings"].append({"kind": "inject", "op": op, "ordering": o,
                                    "text": f"c1mb of {op}_{o} adds {entry['inject_adds']} full "
                                            "barriers, not exactly one per op"})
    for impl in module_impls() + _impls_of("kernel"):
        names = [f"qrwb_{impl}_{part}" for part in LOCK_PARTS]
        present = [n for n in names if n in funcs]
        if not present:
            continue
        h = hashlib.sha256("".join(funcs[n]["hash"] + n.rsplit("_", 2)[-1] for n in
                                   sorted(present, key=lambda n: n.split(impl)[-1])).encode())
        entry = {"functions": {n.split(f"qrwb_{impl}_")[-1]: {"order": funcs[n]["order"],
                                                              "hash": funcs[n]["hash"]}
                               for n in present},
                 "hash": h.hexdigest()[:16]}
        loop = funcs.get(f"qrwb_{impl}_loop")
        if loop is not None and "paths" in loop:
            entry["loop_paths"] = {m: p["order"] for m, p in loop["paths"].items()}
        doc["locks"][impl] = entry
    for a, b in _lock_twins():
        if a.name in doc["locks"] and b.name in doc["locks"] and \
                doc["locks"][a.name]["hash"] != doc["locks"][b.name]["hash"]:
            doc["findings"].append({"kind": "aa-copies-differ", "op": "rwlock", "ordering": a.ordering,
                                    "text": f"module qrwlock copies {a.name} and {b.name} differ"})
    doc["page_crossing"] = [{"function": n, "addr": r["addr"], "size": r["size"]}
                            for n, r in funcs.items()
                            if (n.startswith("qrwb_loop_") or n.endswith("_loop")) and r["crosses_page"]]
    for m in doc["page_crossing"]:
        doc["findings"].append({"kind": "page-crossing", "op": m["function"], "ordering": "",
                                "text": f"{m['function']} ({m['addr']:#x}, {m['size']} bytes) "
                                        f"crosses a {PAGE}-byte page boundary: under TCG such a "
                                        "loop can run several times slower than its identical copy"})
    for m in doc["misaligned"]:
        doc["findings"].append({"kind": "misaligned", "op": m["function"], "ordering": "",
                                "text": f"{m['function']} starts at {m['addr']:#x}, not "
                                        f"{LOOP_ALIGN}-byte aligned"})
    return doc

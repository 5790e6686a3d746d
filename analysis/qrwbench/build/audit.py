"""Ordering audit: what each kernel variant and benchmark op really compiles to.

Disassembles built kernels and modules with binutils' objdump and extracts,
per function, the instructions that carry memory ordering (disasm.py:
which instructions, per arch). Per kernel build (``audit_kernel``) the
qrwlock functions of its vmlinux; per module built against it the timed
loops and the module's qrwlock copies (module_audit.py), and whether each
ordering compiles to what its name promises (promise.py).

It also hashes each function's instruction stream with addresses and branch
targets removed, so that two builds whose code is identical are flagged as
such: a measured difference between them is noise. Here: kernel builds of
one arch whose qrwlock code is identical (``kernel_identical``), orderings
of one op that compile to identical code (all four on x86_64) and module
qrwlock variants that do (``module_identical``), the notes (``module_notes``),
the table (``format_table``) and the command line (``run``).

audit.json is the schema 1 file ``codeid.py`` reads (``identical`` groups per
arch/impl/op and ``notes``), plus the full detail under ``kernels`` and
``modules``; audit.txt is the same as a table.

    /usr/bin/python3 -m qrwbench audit [--out build/audit] [KERNEL_DIR ...]
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from .. import outputs, vocab
from . import disasm
from .disasm import Disasm, lse_cap
from .module_audit import PAGE, audit_functions, audit_module

# Kernel functions that hold qrwlock code. On arm64 without preemption the
# _raw_* lock functions are inlined into their callers (ARCH_INLINE_*), so a
# build may lack some of them; the audit reports which exist.
QRWLOCK_FUNCS = (
    "_raw_read_lock", "_raw_read_trylock", "_raw_read_unlock",
    "_raw_write_lock", "_raw_write_trylock", "_raw_write_unlock",
    "_raw_read_lock_irqsave", "_raw_write_lock_irqsave",
    "_raw_read_unlock_irqrestore", "_raw_write_unlock_irqrestore",
    "queued_read_lock_slowpath", "queued_write_lock_slowpath",
)


def ordering_groups(entries: dict[str, str]) -> list[list[str]]:
    """Groups (size >= 2) of orderings whose code hashes are equal: {ordering: hash}."""
    return [sorted(g) for g in disasm.hash_groups(entries)]


def module_identical(mods: list[dict]) -> list[dict]:
    """codeid ``identical`` entries: orderings of one atomics op, and module
    qrwlock variants, whose code is identical in every module of an arch."""
    out = []
    by_arch: dict[str, list[dict]] = {}
    for m in mods:
        by_arch.setdefault(m["arch"], []).append(m)
    for arch, group in sorted(by_arch.items()):
        ops = sorted(set.intersection(*(set(m["ops"]) for m in group)))
        for op in ops:
            ords = sorted(set.intersection(*(set(m["ops"][op]) for m in group)))
            key = {o: "|".join(m["ops"][op][o]["hash"]["c0"] for m in group) for o in ords}
            for g in ordering_groups(key):
                out.append({"arch": arch, "impl": "inline", "workload": "atomics", "op": op,
                            "variants": g})
        impls = vocab.module_lock_variants()
        key = {v: "|".join(m["locks"][i]["hash"] for m in group)
               for v, i in impls.items() if all(i in m["locks"] for m in group)}
        for g in ordering_groups(key):
            out.append({"arch": arch, "impl": "module", "workload": "rwlock", "op": "rwlock",
                        "variants": g})
    return out


def kernel_identical(audits: list[dict], mods: list[dict]) -> list[dict]:
    """Kernel builds of one arch whose qrwlock code is identical: the vmlinux
    functions and, from the module built against each, ``qrwb_kernel_loop``
    (the inlined fast paths: all of them on arm64, the unlocks on x86_64)."""
    loops = {(m["arch"], m["variant"]): m["functions"].get("qrwb_kernel_loop") for m in mods}
    docs = []
    for a in audits:
        f = dict(a["functions"])
        kl = loops.get((a["arch"], a["variant"]))
        if kl is not None:
            f["qrwb_kernel_loop"] = kl
        docs.append({**a, "functions": f})
    return identical_pairs(docs)


def module_notes(mods: list[dict]) -> list[dict]:
    """codeid ``notes``: promises a variant breaks, A/A copies that differ,
    misaligned loops (once per arch and finding), and the x86 fallback fact."""
    notes, seen = [], set()
    for m in mods:
        for f in m["findings"]:
            key = (m["arch"], f["kind"], f["op"], f.get("ordering"), f.get("path"))
            if key in seen:
                continue
            seen.add(key)
            # a workload's one op (rwlock): the module's own code of it, its kernel_ref
            wl = vocab.workload_of_op(f["op"])
            impl = wl.kernel_ref if wl else "inline"
            n = {"arch": m["arch"], "impl": impl, "text": f["text"]}
            if not f["op"].startswith("qrwb_"):
                n["op"] = f["op"]
            if f.get("ordering"):
                n["variant"] = f["ordering"]
            notes.append(n)
    for m in mods:
        e = m["ops"].get("atomic_sub_return", {}).get("release", {})
        if m["arch"] == "arm64" and any(f["kind"] == "stronger" and f["path"] == "lse"
                                        for f in e.get("promise", ())):
            key = (m["arch"], "rwlock-read-unlock")
            if key not in seen:
                seen.add(key)
                txt = ("qrwlock read unlock is atomic_sub_return_release, which on the LSE "
                       f"path compiles to {' '.join(e['paths']['lse']['order'])} (fully "
                       "ordered) in this kernel, whatever the variant: 6.12's "
                       "__lse_atomic_sub_return##name calls the fully ordered "
                       "__lse_atomic_fetch_sub")
                for impl in vocab.RESULT_IMPLS["rwlock"]:
                    notes.append({"arch": "arm64", "impl": impl, "workload": "rwlock", "text": txt})
    if any(m["arch"] == "x86_64" for m in mods):
        notes.append({"arch": "x86_64", "impl": "inline", "workload": "atomics",
                      "text": "x86_64 has only fully ordered RMW atomics: the _acquire, _release "
                              "and _relaxed forms compile to the same locked instruction as the "
                              "fully ordered one"})
    return notes


def audit_kernel(kdir: Path) -> dict:
    arch = kdir.name.split("-", 1)[0]
    dis = Disasm(kdir / "vmlinux", arch, sections=None)
    return {"arch": arch, "variant": kdir.name.split("-", 1)[1], "kernel": str(kdir),
            "functions": audit_functions(dis, QRWLOCK_FUNCS, lse_cap(kdir) if arch == "arm64" else None)}


def identical_pairs(audits: list[dict], key: str = "functions") -> list[dict]:
    """Variant pairs of one arch whose functions all hash the same."""
    pairs = []
    by_arch: dict[str, list[dict]] = {}
    for a in audits:
        by_arch.setdefault(a["arch"], []).append(a)
    for arch, group in by_arch.items():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                common = sorted(set(a[key]) & set(b[key]))
                if common and all(a[key][f]["hash"] == b[key][f]["hash"] for f in common):
                    pairs.append({"arch": arch, "a": a["variant"], "b": b["variant"], "functions": common})
    return pairs


def _counts(c: dict) -> str:
    return " ".join(f"{m}x{n}" for m, n in c.items()) or "(none)"


def format_table(audits: list[dict], mods: list[dict] | None = None,
                 identical: list[dict] | None = None) -> str:
    lines = []
    for a in audits:
        lines.append(f"== {a['arch']}-{a['variant']} ({a['kernel']})")
        for fn, info in a["functions"].items():
            lines.append(f"  {fn:32s} {_counts(info['counts'])}")
            for mode, p in info.get("paths", {}).items():
                if p["order"] != info["order"]:
                    lines.append(f"  {'':32s}   {mode}: {_counts(p['counts'])}")
    for p in identical_pairs(audits):
        lines.append(f"IDENTICAL CODE (vmlinux): {p['arch']} {p['a']} vs {p['b']} "
                     f"({len(p['functions'])} qrwlock functions)")
    for m in mods or ():
        lines.append(f"== module {m['arch']}-{m['variant']} ({m['module']})")
        for op, ords in m["ops"].items():
            for o, e in ords.items():
                aa = "c0==c1" if e["copies_identical"] else "c0!=c1 (A/A BROKEN)"
                if "paths" in e:
                    txt = "  ".join(f"{k}: {' '.join(p['order']) or '-'}" for k, p in e["paths"].items())
                else:
                    txt = " ".join(e["order"]) or "-"
                flag = "".join(f"  [{f['kind'].upper()}: {f['path']}]" for f in e["promise"])
                lines.append(f"  {op:24s} {o:8s} {e['hash']['c0']} {aa}  {txt}{flag}")
        for impl, e in m["locks"].items():
            lines.append(f"  lock {impl:12s} {e['hash']}")
            for part, f in e["functions"].items():
                lines.append(f"       {part:20s} {' '.join(f['order']) or '-'}")
            for mode, order in e.get("loop_paths", {}).items():
                lines.append(f"       loop {mode:15s} {' '.join(order) or '-'}")
        lines.append(f"  loops not 64-byte aligned: {len(m['misaligned'])}; loops crossing a "
                     f"{PAGE}-byte page: {len(m['page_crossing'])}")
        for f in m["findings"]:
            if f["kind"] != "stronger":
                lines.append(f"  FINDING {f['kind']}: {f['text']}")
    lines += [f"IDENTICAL CODE: {e['arch']} {e.get('impl', '')} {e.get('op', e.get('workload', ''))}: "
              f"{', '.join(e['variants'])}: any difference is noise" for e in identical or ()]
    return "\n".join(lines)


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench audit`` (the parser is cli's)."""
    outputs.add_out_option(ap, "audit")
    ap.add_argument("--no-modules", action="store_true", help="kernels only")
    ap.add_argument("kernels", nargs="*", help="kernel build directories (default: every built one)")


def run(args, inputs: dict | None = None) -> int:
    """``python3 -m qrwbench audit``: an output directory that is not the
    audit's raises QrwbenchError (cli.main prints it; nothing is written).
    ``inputs``: what the audit was made from, kept in audit.json (run/audits.py)."""
    out = outputs.check(args.out, "audit")      # before any work
    dirs = [Path(k) for k in args.kernels] or vocab.built_kernels()
    if not dirs:
        print("audit: no built kernels under build/kernels (run 'make kernels')", file=sys.stderr)
        return 1
    for d in dirs:
        if not (d / "vmlinux").exists():
            print(f"audit: {d} is not a kernel build directory (no vmlinux)", file=sys.stderr)
            return 1
    audits, mods = [], []
    for i, d in enumerate(dirs, 1):
        print(f"audit: {i} of {len(dirs)}: {d.name}", file=sys.stderr)
        audits.append(audit_kernel(d))
        ko = vocab.module_ko(*d.name.split("-", 1))
        if not args.no_modules and ko.exists():
            arch, variant = d.name.split("-", 1)
            print(f"audit: module {d.name}", file=sys.stderr)
            mods.append(audit_module(ko, arch, variant, d))
    kpairs = kernel_identical(audits, mods)
    # the kernel's own rwlock_t, whichever workload drives it (rwlock, the programs)
    identical = [{"arch": p["arch"], "impl": "kernel",
                  "variants": [p["a"], p["b"]]} for p in kpairs] + module_identical(mods)
    notes = module_notes(mods)
    doc = {"schema": 1, "identical": identical, "notes": notes,
           "kernel_pairs": kpairs, "kernels": audits, "modules": mods,
           **({"inputs": inputs} if inputs else {})}
    text = format_table(audits, mods, identical)
    with outputs.replacing(out, "audit") as tmp:
        (tmp / "audit.json").write_text(json.dumps(doc, indent=1))
        (tmp / "audit.txt").write_text(text + "\n")
    print(text)
    kinds = Counter(f["kind"] for m in mods for f in m["findings"])
    print(f"audit: {len(identical)} identical-code groups, {len(notes)} notes; module findings: "
          + (", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none")
          + " (weaker/missing: a variant that does not compile to what its name promises)")
    print(f"audit: wrote {out / 'audit.json'} and {out / 'audit.txt'}")
    return 0

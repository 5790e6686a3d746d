"""Ordering audit: what each kernel variant and benchmark op really compiles to.

Disassembles built kernels and modules with binutils' objdump (the host's for
x86_64, aarch64-linux-gnu-objdump for arm64) and extracts, per function, the
instructions that carry memory ordering:

- x86_64: lock-prefixed instructions, xchg with a memory operand (implicitly
  locked), mfence/lfence/sfence;
- arm64: load-acquire/store-release (ldar*, ldapr*, stlr*), exclusives
  (ldxr/ldaxr/stxr/stlxr, LL/SC path), LSE atomics (ldadd*, ldclr*, ldeor*,
  ldset*, swp*, cas*, and their st* aliases) with their acquire/release
  suffixes, and barriers (dmb, dsb).

It also hashes each function's instruction stream with addresses and branch
targets removed, so that two builds whose code is identical are flagged as
such: a measured difference between them is noise.

Each built module (build/modules/<arch>-<variant>/qrwbench.ko) is audited too:

- every atomics loop ``qrwb_loop_<op>_<ordering>_<copy>`` of qrwb_ops.def, per
  ordering and copy (c0, c1, c1mb): its ordering-relevant instructions, and on
  arm64 separately for the two paths the kernel selects between at boot (LSE
  atomics when ARM64_HAS_LSE_ATOMICS, else LL/SC), read from the module's
  ``.altinstructions`` (a patched-to-nop branch or an in-place replacement);
- whether c0 and c1 are identical (they must be: the A/A pair) and whether c1mb
  adds exactly one full barrier per op (the injected cost);
- which orderings of one op compile to identical code (all four on x86_64);
- whether each ordering compiles to what its name promises (e.g. an _acquire
  op with no acquire instruction on one of the arm64 paths is reported);
- the module's qrwlock copies (``qrwb_<impl>_*``: full, acqrel, relaxed, the A/A
  copy) and ``qrwb_kernel_loop``, where the kernel variant's inlined fast paths
  live (all of them on arm64: ARCH_INLINE_*; the unlocks on x86_64);
- that every timed loop starts on a 64-byte boundary (ELF symbol values of the
  ``.text`` section, which is itself 64-byte aligned), and which loops cross a
  4 KiB page (under TCG such a copy runs slower than its identical twin:
  docs/validity.md).

audit.json is the schema 1 file ``codeid.py`` reads (``identical`` groups per
arch/impl/op and ``notes``), plus the full detail under ``kernels`` and
``modules``; audit.txt is the same as a table.

    /usr/bin/python3 -m qrwbench audit [--out build/audit] [KERNEL_DIR ...]
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from .. import outputs, vocab
from . import elfmini

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

_X86_FENCE = re.compile(r"^(mfence|lfence|sfence)\b")
_ARM_ORDER = re.compile(
    r"^((ldar|ldapr|stlr|ldaxr|ldxr|stxr|stlxr)[bh]?|ldaxp|ldxp|stxp|stlxp"
    r"|ld(add|clr|eor|set|smax|smin|umax|umin)(a|l|al)?[bh]?"
    r"|st(add|clr|eor|set)(l)?[bh]?"
    r"|swp(a|l|al)?[bh]?|cas(a|l|al)?[bh]?|casp(a|l|al)?"
    r"|dmb|dsb)$")
_LSE = re.compile(r"^(ld(add|clr|eor|set|smax|smin|umax|umin)|st(add|clr|eor|set)|swp|cas)")
_LLSC = re.compile(r"^(ldx|ldax|stx|stlx)")


def objdump_for(arch: str) -> str:
    """The objdump of ``arch``'s binutils (the arch table of kernel/scripts/arch.sh)."""
    a = vocab.build_arches()[arch]
    if not shutil.which(a.objdump):
        pkg = next((p for p in a.packages if p.startswith("binutils")), "binutils")
        raise SystemExit(f"audit: missing {a.objdump}: apt-get install {pkg}")
    return a.objdump


def disassemble(elf: Path, arch: str, symbols: list[str] | None = None) -> dict[str, list[str]]:
    """{function: [instruction text, ...]} for the named symbols (all if None)."""
    funcs: dict[str, list[str]] = {}
    # objdump takes one --disassemble=SYM; for several, disassemble all once.
    cmd = [objdump_for(arch), "-d", "--no-show-raw-insn", "-r", str(elf)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    want = set(symbols) if symbols else None
    cur = None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            cur = m.group(1) if (want is None or m.group(1) in want) else None
            if cur is not None:
                funcs[cur] = []
            continue
        if cur is None or not line.strip():
            continue
        m = re.match(r"^\s*[0-9a-f]+:\s+(.*)$", line)
        if m:
            funcs[cur].append(m.group(1).strip())
        elif "R_" in line and funcs[cur]:
            # relocation: say what a call/branch goes to
            funcs[cur][-1] += "  <" + line.split()[-1] + ">"
    return funcs


def ordering_insns(arch: str, insns: list[str]) -> list[str]:
    """The ordering-relevant instructions of one function, in order."""
    found = []
    for ins in insns:
        text = ins.split("//")[0].split("#")[0].strip()
        if not text:
            continue
        if arch == "x86_64":
            if text.startswith("lock "):
                found.append("lock " + text.split()[1])
            elif text.startswith("xchg") and "(" in text:
                found.append("xchg(mem)")
            elif _X86_FENCE.match(text):
                found.append(text.split()[0])
        else:
            mn = text.split()[0]
            if _ARM_ORDER.match(mn):
                if mn in ("dmb", "dsb"):
                    mn = f"{mn} {text.split()[1]}" if len(text.split()) > 1 else mn
                found.append(mn)
    return found


def normalized_hash(insns: list[str]) -> str:
    """Hash of the instruction stream without addresses and branch targets."""
    h = hashlib.sha256()
    for ins in insns:
        t = re.sub(r"\b[0-9a-f]{6,}\b", "X", ins)          # absolute addresses
        t = re.sub(r"<[^>]*>", "", t)                       # symbol+offset annotations
        h.update(t.encode() + b"\n")
    return h.hexdigest()[:16]


def classify(arch: str, order: list[str]) -> dict:
    c = Counter(order)
    out = {"counts": dict(sorted(c.items()))}
    if arch == "arm64":
        out["lse"] = sorted({m for m in c if _LSE.match(m)})
        out["llsc"] = sorted({m for m in c if _LLSC.match(m)})
        out["barriers"] = sorted({m for m in c if m.startswith(("dmb", "dsb"))})
        out["acq_rel"] = sorted({m for m in c if m.startswith(("ldar", "ldapr", "stlr"))})
    else:
        out["locked"] = sum(n for m, n in c.items() if m.startswith("lock") or m == "xchg(mem)")
        out["fences"] = sum(n for m, n in c.items() if m.endswith("fence"))
    return out


def audit_elf(elf: Path, arch: str, symbols=None, pattern: str | None = None) -> dict:
    """{function: {"order": [...], "hash": str, "n_insns": int, ...classify}}."""
    funcs = disassemble(elf, arch, None if pattern else symbols)
    if pattern:
        rx = re.compile(pattern)
        funcs = {k: v for k, v in funcs.items() if rx.search(k)}
    res = {}
    for name, insns in sorted(funcs.items()):
        order = ordering_insns(arch, insns)
        res[name] = {"order": order, "hash": normalized_hash(insns), "n_insns": len(insns),
                     **classify(arch, order)}
    return res


# ------------------------------------------------------------ the module

COPIES = ("c0", "c1", "c1mb")
# The functions of an in-module qrwlock instance (module_impls()).
LOCK_PARTS = ("loop", "read_lock", "write_lock", "read_unlock", "write_unlock",
              "read_lock_slowpath", "write_lock_slowpath")
ARM64_LSE_CAP_DEFAULT = 37      # ARM64_HAS_LSE_ATOMICS in 6.12's generated cpucap-defs.h
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


def lse_cap(kdir: Path | None) -> int:
    """ARM64_HAS_LSE_ATOMICS of a kernel build (its generated cpucap-defs.h)."""
    if kdir is not None:
        h = kdir / "arch" / "arm64" / "include" / "generated" / "asm" / "cpucap-defs.h"
        if h.exists():
            m = re.search(r"#define\s+ARM64_HAS_LSE_ATOMICS\s+(\d+)", h.read_text())
            if m:
                return int(m.group(1))
    return ARM64_LSE_CAP_DEFAULT


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
    h = hashlib.sha256()
    for ins in insns:
        h.update(normalize_insn(ins, fn).encode() + b"\n")
    return h.hexdigest()[:16]


class Disasm:
    """objdump -d -r of one ELF file: instructions by section and address, and
    function extents from the ELF symbol table (value, size)."""

    # objdump -r prints a relocation as "<addr>: R_<type> <target>" after its
    # instruction; with reloc_lines the target is appended to that
    # instruction (a call or tail call then keeps its mnemonic: the per-arch
    # audit's objects need it). Off here, as the module audit was recorded.
    reloc_lines = False
    reloc_suffix = "  <{}>"         # how a relocation's target is appended

    def __init__(self, path: Path, arch: str, sections=(".text",)):
        self.path, self.arch = Path(path), arch
        self.elf = elfmini.Elf(path)
        cmd = [objdump_for(arch), "-d", "--no-show-raw-insn", "-r"]
        for sec in sections or ():
            cmd += ["-j", sec]
        out = subprocess.run(cmd + [str(path)], capture_output=True, text=True, check=True).stdout
        self.insns: dict[str, dict[int, str]] = {}
        sec, last = None, None
        for line in out.splitlines():
            if line.startswith("Disassembly of section "):
                sec = line[len("Disassembly of section "):].rstrip(":")
                self.insns.setdefault(sec, {})
                last = None
                continue
            m = re.match(r"^\s*([0-9a-f]+):\s+(\S.*)$", line)
            if m and self.reloc_lines and m.group(2).startswith("R_"):
                m = None
            if m and sec is not None:
                last = int(m.group(1), 16)
                self.insns[sec][last] = m.group(2).strip()
            elif "R_" in line and last is not None and sec is not None:
                self.insns[sec][last] += self.reloc_suffix.format(line.split()[-1])
        self.funcs = {}
        for name, sym in self.elf.functions().items():
            sname = self.elf.sections[sym.shndx].name if 0 < sym.shndx < len(self.elf.sections) else ""
            if sym.size and sname in self.insns:
                self.funcs[name] = (sname, sym.value, sym.size)

    def func(self, name: str) -> list[tuple[int, str]]:
        sec, start, size = self.funcs[name]
        ins = self.insns[sec]
        return [(a, ins[a]) for a in sorted(a for a in ins if start <= a < start + size)]

    def at(self, sec: str, addr: int) -> str:
        return self.insns.get(sec, {}).get(addr, "")


_ARM_COND = re.compile(r"^(b\.\w+|cbn?z|tbn?z)$")


def _branch_target(text: str) -> int | None:
    m = re.search(r"\b([0-9a-f]+) <", text)
    return int(m.group(1), 16) if m else None


def arm64_paths(dis: Disasm, fn: str, alts, cap: int) -> dict[str, list[str]]:
    """The instructions of ``fn`` that run on the LSE path and on the LL/SC path.

    The kernel patches at boot every ``.altinstructions`` site of ``cap``
    (ARM64_HAS_LSE_ATOMICS) when the CPU has LSE: a callback site (a ``b`` to
    the LL/SC code, ``alternative_has_cap_likely``) becomes a nop, an in-place
    site (``ARM64_LSE_ATOMIC_INSN``, e.g. xchg) gets its replacement. Walking
    the control flow from the entry both ways gives what each path executes.
    """
    sec, start, size = dis.funcs[fn]
    ins = dict(dis.func(fn))
    sites = {a.orig: a for a in alts if a.cpucap == cap and start <= a.orig < start + size}
    out = {}
    for mode in ("lse", "llsc"):
        seen, got, stack = set(), [], [start]
        while stack:
            a = stack.pop()
            if a in seen or a not in ins:
                continue            # outside the function: a tail call
            seen.add(a)
            site = sites.get(a) if mode == "lse" else None
            if site is not None:
                if not site.callback and site.alt is not None:
                    for k in range(0, site.alt_len, 4):
                        got.append((a, k, dis.at(sec, site.alt + k)))
                stack.append(a + site.orig_len)
                continue
            t = ins[a]
            got.append((a, 0, t))
            mn = t.split()[0]
            tgt = _branch_target(t)
            if mn == "b":
                if tgt is not None:
                    stack.append(tgt)
            elif _ARM_COND.match(mn):
                stack.append(a + 4)
                if tgt is not None:
                    stack.append(tgt)
            elif mn in ("ret", "eret", "br", "retaa", "retab"):
                pass
            else:
                stack.append(a + 4)
        out[mode] = [t for _a, _k, t in sorted(got)]
    return out


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

    order, ok = fold(ordering_insns(arch, insns))
    rec = {"addr": addr, "size": size, "align64": addr % LOOP_ALIGN == 0,
           "crosses_page": addr // PAGE != (addr + size - 1) // PAGE,
           "order": order, "hash": code_hash(insns, name), "n_insns": len(insns),
           **classify(arch, order)}
    if unroll > 1:
        rec["unrolled"], rec["per_op"] = unroll, ok
    if paths is not None:
        rec["paths"] = {}
        for mode, p in paths.items():
            po, pok = fold(ordering_insns(arch, p))
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


# ----- what an ordering promises

_LSE_FORM = re.compile(r"^(ld(?:add|clr|eor|set|smax|smin|umax|umin)|st(?:add|clr|eor|set)|swp|casp?)"
                       r"(al|a|l)?([bh]?)$")


def _want_suffix(ordering: str) -> str | None:
    """The arm64 LSE suffix an ordering's promise needs (full: "al")."""
    p = vocab.ORDERING_PROMISE.get(ordering)
    if p is None:
        return None
    return ("a" if p & {"acquire", "barrier"} else "") + ("l" if p & {"release", "barrier"} else "")


def _want_llsc(ordering: str) -> str:
    """What an ordering's promise compiles to with LL/SC (full: the barrier
    after a store-release gives the acquire)."""
    p = vocab.ORDERING_PROMISE[ordering]
    if "barrier" in p:
        return "ldxr + stlxr + dmb ish"
    return f"ld{'a' if 'acquire' in p else ''}xr + st{'l' if 'release' in p else ''}xr"


def arm64_semantics(order: list[str]) -> dict:
    """What one path's ordering instructions give, by kind."""
    lse = [m for m in order if _LSE_FORM.match(m)]
    suffixes = sorted({_LSE_FORM.match(m).group(2) or "" for m in lse})
    excl_ld = [m for m in order if re.match(r"^ld(a)?xr[bh]?$", m)]
    excl_st = [m for m in order if re.match(r"^st(l)?xr[bh]?$", m)]
    return {
        "lse": lse, "lse_suffixes": suffixes,
        "ldaxr": any(m.startswith("ldaxr") for m in excl_ld),
        "ldxr": any(m.startswith("ldxr") for m in excl_ld),
        "stlxr": any(m.startswith("stlxr") for m in excl_st),
        "stxr": any(m.startswith("stxr") for m in excl_st),
        "ldar": any(re.match(r"^(ldar|ldapr)[bh]?$", m) for m in order),
        "stlr": any(re.match(r"^stlr[bh]?$", m) for m in order),
        "dmb_full": sum(m in ("dmb ish", "dmb sy", "dsb ish", "dsb sy") for m in order),
        "dmb_other": sum(m.startswith(("dmb", "dsb")) and m not in ("dmb ish", "dmb sy", "dsb ish", "dsb sy")
                         for m in order),
    }


def _expected(op: str, ordering: str, arch: str, path: str) -> str:
    """Human form of what ``op``/``ordering`` should compile to on ``path``."""
    if op == "empty":
        return "no ordering instruction"
    if arch == "x86_64":
        if op == "smp_mb":
            return "lock-prefixed op or mfence"
        if op in ("smp_load_acquire", "smp_store_release"):
            return "plain move (TSO)"
        return "lock-prefixed RMW or xchg (x86 has only fully ordered RMWs)"
    if op == "smp_mb":
        return "dmb ish"
    if op == "smp_load_acquire":
        return "ldar"
    if op == "smp_store_release":
        return "stlr"
    suf = _want_suffix(ordering)
    if path == "lse":
        return f"LSE atomic with suffix '{suf}'" if suf else "LSE atomic without a/l suffix"
    return _want_llsc(ordering)


# arm64 acquire/release accesses: (the instruction they need, the one that
# would order more than named)
_ACCESS_OPS = {"smp_load_acquire": ("ldar", "stlr"), "smp_store_release": ("stlr", "ldar")}


def check_promise(arch: str, op: str, ordering: str, rec: dict) -> list[dict]:
    """Findings where the loop of ``op``/``ordering`` does not compile to what
    its name promises: ``kind`` 'weaker' (a missing acquire/release/barrier:
    a broken promise), 'stronger' (more ordering than named) or 'missing' (no
    atomic at all). Empty when it compiles as named."""
    out = []

    def bad(kind, path, got):
        out.append({"kind": kind, "path": path, "op": op, "ordering": ordering,
                    "expected": _expected(op, ordering, arch, path), "got": got})

    if arch == "x86_64":
        locked, fences = rec["locked"], rec["fences"]
        got = " ".join(rec["order"]) or "(none)"
        if op == "empty":
            if locked or fences:
                bad("stronger", "all", got)
        elif op == "smp_mb":
            if not locked and not rec["counts"].get("mfence"):
                bad("weaker", "all", got)
        elif op in ("smp_load_acquire", "smp_store_release"):
            if locked or fences:
                bad("stronger", "all", got)
        elif not locked:
            bad("missing", "all", got)
        return out
    for path, p in rec.get("paths", {"all": rec}).items():
        s = arm64_semantics(p["order"])
        if op == "empty":
            kind = "stronger" if p["order"] else None
        elif op == "smp_mb":
            kind = None if s["dmb_full"] else "weaker"
        elif op in _ACCESS_OPS:
            need, more = _ACCESS_OPS[op]
            kind = "weaker" if not s[need] else "stronger" if s["dmb_full"] or s[more] else None
        else:
            kind = _arm64_rmw_kind(path, ordering, s)
        if kind:
            bad(kind, path, " ".join(p["order"]) or "(none)")
    return out


def _arm64_rmw_kind(path: str, ordering: str, s: dict) -> str | None:
    """How an arm64 RMW atomic's path (``s``: arm64_semantics) breaks the
    promise of ``ordering``: 'missing', 'weaker', 'stronger', or None."""
    want = _want_suffix(ordering)
    if want is None:
        return "missing"
    if path == "lse":
        if not s["lse"]:
            return "missing"
        have = set(s["lse_suffixes"])
        acq = have & {"a", "al"} or s["ldar"]
        rel = have & {"l", "al"} or s["stlr"]
        if (want in ("a", "al") and not acq) or (want in ("l", "al") and not rel):
            return "weaker"
        return "stronger" if have != {want} or s["dmb_full"] else None
    if not ((s["ldxr"] or s["ldaxr"]) and (s["stxr"] or s["stlxr"])):
        return "missing"
    acq, rel, mb = s["ldaxr"] or s["ldar"], s["stlxr"] or s["stlr"], s["dmb_full"] > 0
    p = vocab.ORDERING_PROMISE[ordering]
    # a full barrier after the store-release is the acquire of a full RMW
    need_acq, need_rel, need_mb = "acquire" in p and "barrier" not in p, "release" in p, "barrier" in p
    ok_weak = (acq or not need_acq) and (rel or not need_rel) and (mb or not need_mb)
    stronger = (acq and not need_acq) or (rel and not need_rel) or (mb and not need_mb)
    return "weaker" if not ok_weak else "stronger" if stronger else None


def _full_barriers(arch: str, rec: dict, path: str | None = None) -> int:
    r = rec["paths"][path] if path else rec
    if arch == "x86_64":
        return r["locked"] + r["counts"].get("mfence", 0)
    return arm64_semantics(r["order"])["dmb_full"]


def fully_ordered_kernel(kdir: Path | None) -> bool:
    """The kernel was built with CONFIG_ATOMICS_FULLY_ORDERED (the allfull
    variant, kernel/patches/0003): every RMW atomic is the fully ordered one."""
    try:
        return kdir is not None and "CONFIG_ATOMICS_FULLY_ORDERED=y" in (kdir / ".config").read_text().splitlines()
    except OSError:
        return False


def promised_ordering(op: str, ordering: str, fully_ordered: bool) -> str:
    """What ``op``/``ordering`` must compile to: its own ordering, or "full"
    for an op with ordering variants (a value-returning RMW atomic, xchg,
    cmpxchg) in a kernel built with every atomic fully ordered. Void RMW ops
    (one ordering, relaxed), barriers and acquire/release accesses keep theirs."""
    if fully_ordered and "full" in vocab.op_orderings().get(op, ()):
        return "full"
    return ordering


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
            entry["inject_adds"] = {m or "all": _full_barriers(arch, recs["c1mb"], m)
                                    - _full_barriers(arch, recs["c0"], m) for m in paths}
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


def ordering_groups(entries: dict[str, str]) -> list[list[str]]:
    """Groups (size >= 2) of orderings whose code hashes are equal: {ordering: hash}."""
    by = {}
    for o, h in entries.items():
        by.setdefault(h, []).append(o)
    return [sorted(g) for g in by.values() if len(g) >= 2]


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
    identical = [{"arch": p["arch"], "impl": "kernel", "workload": "rwlock",
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


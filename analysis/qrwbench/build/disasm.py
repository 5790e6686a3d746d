"""Disassembly: the instructions of built kernels, modules and objects that
carry memory ordering.

Disassembles with binutils' objdump (the host's for x86_64,
aarch64-linux-gnu-objdump for arm64) and extracts, per function, the
instructions that carry memory ordering:

- x86_64: lock-prefixed instructions, xchg with a memory operand (implicitly
  locked), mfence/lfence/sfence;
- arm64: load-acquire/store-release (ldar*, ldapr*, stlr*), exclusives
  (ldxr/ldaxr/stxr/stlxr, LL/SC path), LSE atomics (ldadd*, ldclr*, ldeor*,
  ldset*, swp*, cas*, and their st* aliases) with their acquire/release
  suffixes, and barriers (dmb, dsb);
- powerpc, riscv, mips, sparc (the per-arch audit's objects): as
  arch_audit.py says.

``ordering_token`` is the one classifier, per ISA (a kernel ARCH=: the
callers pass vocab.build_arches()[arch].karch); an ISA without one raises.

``disassemble``/``audit_elf`` read a whole ELF file by symbol name (the
function's instructions hashed without addresses and branch targets:
``normalized_hash``). ``Disasm`` is the disassembly of one ELF file by
section and address with the function extents of its symbol table; on
arm64 ``arm64_paths`` walks one function along each of the two paths the
kernel selects between at boot (LSE atomics when ARM64_HAS_LSE_ATOMICS,
``lse_cap``, else LL/SC), read from the file's ``.altinstructions`` (a
patched-to-nop branch or an in-place replacement).
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

from .. import vocab
from . import elfmini

ARM64_LSE_CAP_DEFAULT = 37      # ARM64_HAS_LSE_ATOMICS in 6.12's generated cpucap-defs.h

_X86_FENCE = re.compile(r"^(mfence|lfence|sfence)\b")
_ARM_ORDER = re.compile(
    r"^((ldar|ldapr|stlr|ldaxr|ldxr|stxr|stlxr)[bh]?|ldaxp|ldxp|stxp|stlxp"
    r"|ld(add|clr|eor|set|smax|smin|umax|umin)(a|l|al)?[bh]?"
    r"|st(add|clr|eor|set)(l)?[bh]?"
    r"|swp(a|l|al)?[bh]?|cas(a|l|al)?[bh]?|casp(a|l|al)?"
    r"|dmb|dsb)$")
_LSE = re.compile(r"^(ld(add|clr|eor|set|smax|smin|umax|umin)|st(add|clr|eor|set)|swp|cas)")
_LLSC = re.compile(r"^(ldx|ldax|stx|stlx)")
_PPC = re.compile(r"^(sync|lwsync|isync|eieio|ptesync|l[bhwdq]arx|st[bhwdq]cx\.)$")
_RISCV_AMO = re.compile(r"^(amo[a-z]+|lr|sc)\.[bhwd](\.aqrl|\.aq|\.rl)?$")
_MIPS = re.compile(r"^(sync|ll|lld|sc|scd|llwp|scwp|lldp|scdp)$")
_SPARC = re.compile(r"^(membar|stbar|casx?a?|ldstuba?|swapa?)$")


def objdump_for(arch: str) -> str:
    """The objdump of ``arch``'s binutils (the arch table of kernel/scripts/arch.sh)."""
    a = vocab.build_arches()[arch]
    if not shutil.which(a.objdump):
        pkg = next((p for p in a.packages if p.startswith("binutils")), "binutils")
        raise SystemExit(f"audit: missing {a.objdump}: apt-get install {pkg}")
    return a.objdump


_LABEL = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S.*)$")
RELOC = "  [reloc {}]"      # how a relocation's target follows its instruction


def objdump_insns(out: str) -> list[tuple[str, str | None, int, str]]:
    """(section, function label, address, text) of every instruction of
    ``objdump -d -r`` output. A relocation ("<offset>: R_<type> <target>",
    printed after the instruction it patches; at that instruction's address
    on arm64, inside it on x86_64) is no instruction: its target is appended
    to the instruction, written "[reloc <target>]" (objdump's own
    "<sym+off>" is a branch target's)."""
    rows: list[tuple[str, str | None, int, str]] = []
    sec = fn = None
    for line in out.splitlines():
        if line.startswith("Disassembly of section "):
            sec, fn = line[len("Disassembly of section "):].rstrip(":"), None
            continue
        m = _LABEL.match(line)
        if m:
            fn = m.group(1)
            continue
        m = _LINE.match(line)
        if m is None or sec is None:
            continue
        text = m.group(2).strip()
        if text.startswith("R_"):
            if rows and rows[-1][0] == sec:
                s, f, a, t = rows[-1]
                rows[-1] = (s, f, a, t + RELOC.format(text.split()[-1]))
            continue
        rows.append((sec, fn, int(m.group(1), 16), text))
    return rows


def hash_groups(entries: dict[str, str]) -> list[list[str]]:
    """Keys whose values (code hashes) are equal, groups of two or more, in
    the order of ``entries``."""
    by: dict[str, list[str]] = {}
    for k, h in entries.items():
        by.setdefault(h, []).append(k)
    return [g for g in by.values() if len(g) >= 2]


def disassemble(elf: Path, arch: str, symbols: list[str] | None = None) -> dict[str, list[str]]:
    """{function: [instruction text, ...]} for the named symbols (all if None)."""
    # objdump takes one --disassemble=SYM; for several, disassemble all once.
    cmd = [objdump_for(arch), "-d", "--no-show-raw-insn", "-r", str(elf)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    want = set(symbols) if symbols else None
    funcs: dict[str, list[str]] = {}
    for _sec, fn, _addr, text in objdump_insns(out):
        if fn is not None and (want is None or fn in want):
            funcs.setdefault(fn, []).append(text)
    return funcs


_RELOC_TAIL = re.compile(r"(\s+\[reloc [^]]*\])+$")


def _x86(text: str) -> str | None:
    text = text.split("//")[0].split("#")[0].strip()
    if text.startswith("lock "):
        return "lock " + text.split()[1]
    if text.startswith("xchg") and "(" in text:
        return "xchg(mem)"
    if _X86_FENCE.match(text):
        return text.split()[0]
    return None


def _arm64(text: str) -> str | None:
    parts = text.split("//")[0].split("#")[0].split()
    if not parts or not _ARM_ORDER.match(parts[0]):
        return None
    if parts[0] in ("dmb", "dsb") and len(parts) > 1:
        return f"{parts[0]} {parts[1]}"
    return parts[0]


def _split(text: str) -> tuple[str, str]:
    """(mnemonic, operands without blanks) of one instruction."""
    parts = text.split(None, 1)
    return (parts[0], parts[1].replace(" ", "") if len(parts) > 1 else "") if parts else ("", "")


def _powerpc(text: str) -> str | None:
    mn, _ops = _split(text)
    mn = "sync" if mn in ("hwsync", "msync") else mn
    return mn if _PPC.match(mn) else None


def _riscv(text: str) -> str | None:
    mn, ops = _split(text)
    if mn == "fence":
        return f"fence {ops}" if ops else "fence"
    if mn == "fence.tso":
        return mn
    return mn if _RISCV_AMO.match(mn) else None


def _mips(text: str) -> str | None:
    mn, ops = _split(text)
    if mn == "sync" and ops:
        return f"sync {ops}"
    return mn if _MIPS.match(mn) else None


def _sparc(text: str) -> str | None:
    mn, ops = _split(text)
    if mn == "membar":
        return f"membar {ops}"
    return mn if _SPARC.match(mn) else None


# The full barriers (smp_mb()) of each ISA as its classifier writes them, by
# kernel ARCH= (x86: a locked instruction or mfence, counted apart).
FULL_BARRIERS = {"arm64": ("dmb ish", "dmb sy", "dsb ish", "dsb sy"), "powerpc": ("sync",),
                 "riscv": ("fence rw,rw", "fence iorw,iorw")}

# the ordering classifier of each ISA, by kernel ARCH= (vocab.BuildArch.karch)
_ORDERING = {"x86_64": _x86, "x86": _x86, "arm64": _arm64, "powerpc": _powerpc,
             "riscv": _riscv, "mips": _mips, "sparc": _sparc}


def _classifier(karch: str):
    rule = _ORDERING.get(karch)
    if rule is None:
        raise ValueError(f"no ordering classifier for ARCH={karch}")
    return rule


def ordering_token(karch: str, text: str) -> str | None:
    """The ordering-relevant form of one disassembled instruction of an ISA
    (kernel ARCH=: vocab.build_arches()[arch].karch), or None: what the
    audits count. A relocation's target (objdump_insns) is no part of it."""
    return _classifier(karch)(_RELOC_TAIL.sub("", text.strip()))


def ordering_insns(karch: str, insns: list[str]) -> list[str]:
    """The ordering-relevant instructions of one function, in order
    (ordering_token of each; an ISA without a classifier raises ValueError)."""
    rule = _classifier(karch)
    return [t for ins in insns if (t := rule(_RELOC_TAIL.sub("", ins.strip()))) is not None]


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
    karch = vocab.build_arches()[arch].karch
    res = {}
    for name, insns in sorted(funcs.items()):
        order = ordering_insns(karch, insns)
        res[name] = {"order": order, "hash": normalized_hash(insns), "n_insns": len(insns),
                     **classify(arch, order)}
    return res


def lse_cap(kdir: Path | None) -> int:
    """ARM64_HAS_LSE_ATOMICS of a kernel build (its generated cpucap-defs.h)."""
    if kdir is not None:
        h = kdir / "arch" / "arm64" / "include" / "generated" / "asm" / "cpucap-defs.h"
        if h.exists():
            m = re.search(r"#define\s+ARM64_HAS_LSE_ATOMICS\s+(\d+)", h.read_text())
            if m:
                return int(m.group(1))
    return ARM64_LSE_CAP_DEFAULT


class Disasm:
    """objdump -d -r of one ELF file: instructions by section and address
    (relocations as objdump_insns writes them), and function extents from
    the ELF symbol table (value, size)."""

    def __init__(self, path: Path, arch: str, sections=(".text",)):
        self.path, self.arch = Path(path), arch
        self.elf = elfmini.Elf(path)
        cmd = [objdump_for(arch), "-d", "--no-show-raw-insn", "-r"]
        for sec in sections or ():
            cmd += ["-j", sec]
        out = subprocess.run(cmd + [str(path)], capture_output=True, text=True, check=True).stdout
        self.insns: dict[str, dict[int, str]] = {}
        for sec, _fn, addr, text in objdump_insns(out):
            self.insns.setdefault(sec, {})[addr] = text
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

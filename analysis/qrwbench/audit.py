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

    /usr/bin/python3 -m qrwbench.audit [--out build/audit] [KERNEL_DIR ...]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from .targets import TOP

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
    tool = "objdump" if arch == "x86_64" else "aarch64-linux-gnu-objdump"
    if not shutil.which(tool):
        pkg = "binutils" if arch == "x86_64" else "binutils-aarch64-linux-gnu"
        raise SystemExit(f"audit: missing {tool}: apt-get install {pkg}")
    return tool


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


def kernel_dirs() -> list[Path]:
    base = TOP / "build" / "kernels"
    return sorted(p for p in base.glob("*-*") if (p / ".qrwbench-built").exists())


def audit_kernel(kdir: Path) -> dict:
    arch = kdir.name.split("-", 1)[0]
    out = {"arch": arch, "variant": kdir.name.split("-", 1)[1], "kernel": str(kdir),
           "functions": audit_elf(kdir / "vmlinux", arch, list(QRWLOCK_FUNCS))}
    mod = TOP / "build" / "modules" / kdir.name / "qrwbench.ko"
    if mod.exists():
        out["module"] = str(mod)
        out["module_functions"] = audit_elf(mod, arch, pattern=r"^qrwb_")
    return out


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


def format_table(audits: list[dict]) -> str:
    lines = []
    for a in audits:
        lines.append(f"== {a['arch']}-{a['variant']} ({a['kernel']})")
        for fn, info in a["functions"].items():
            lines.append(f"  {fn:32s} {' '.join(f'{m}x{n}' for m, n in info['counts'].items()) or '(none)'}")
    for p in identical_pairs(audits):
        lines.append(f"IDENTICAL CODE: {p['arch']} {p['a']} vs {p['b']} "
                     f"({len(p['functions'])} qrwlock functions): any difference is noise")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="qrwbench.audit", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(TOP / "build" / "audit"))
    ap.add_argument("kernels", nargs="*", help="kernel build directories (default: every built one)")
    args = ap.parse_args(argv)
    dirs = [Path(k) for k in args.kernels] or kernel_dirs()
    if not dirs:
        print("audit: no built kernels under build/kernels (run 'make kernels')", file=sys.stderr)
        return 1
    for d in dirs:
        if not (d / "vmlinux").exists():
            print(f"audit: {d} is not a kernel build directory (no vmlinux)", file=sys.stderr)
            return 1
    audits = []
    for i, d in enumerate(dirs, 1):
        print(f"audit: {i} of {len(dirs)}: {d.name}", file=sys.stderr)
        audits.append(audit_kernel(d))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"kernels": audits, "identical": identical_pairs(audits)}
    tmp = out / "audit.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out / "audit.json")
    text = format_table(audits)
    (out / "audit.txt").write_text(text + "\n")
    print(text)
    print(f"audit: wrote {out / 'audit.json'} and {out / 'audit.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What an ordering promises: whether each timed loop of the module compiles
to what its name promises (e.g. an _acquire op with no acquire instruction
on one of the arm64 paths is reported), in a kernel whose RMW atomics are
its own (the ordering named) or all fully ordered (the allfull variant).
"""
from __future__ import annotations

import re
from pathlib import Path

from .. import vocab
from . import disasm

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
        "dmb_full": sum(m in disasm.FULL_BARRIERS["arm64"] for m in order),
        "dmb_other": sum(m.startswith(("dmb", "dsb")) and m not in disasm.FULL_BARRIERS["arm64"]
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


def promise_checked(arch: str) -> bool:
    """Whether check_promise has rules for ``arch``'s ISA: x86_64 and arm64.
    The others' orderings are in the per-arch table (make audit-arches,
    arch_audit.py), which reads them from their own instructions."""
    return arch == "x86_64" or arch == "arm64"


def check_promise(arch: str, op: str, ordering: str, rec: dict) -> list[dict]:
    """Findings where the loop of ``op``/``ordering`` does not compile to what
    its name promises: ``kind`` 'weaker' (a missing acquire/release/barrier:
    a broken promise), 'stronger' (more ordering than named) or 'missing' (no
    atomic at all). Empty when it compiles as named, and for an arch without
    rules here (promise_checked)."""
    out = []
    if not promise_checked(arch):
        return out

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


def full_barriers(arch: str, rec: dict, path: str | None = None) -> int:
    """The full barriers of a function record (one path's, on arm64): locked
    instructions and mfences on x86_64, disasm.FULL_BARRIERS elsewhere."""
    r = rec["paths"][path] if path else rec
    if arch == "x86_64":
        return r["locked"] + r["counts"].get("mfence", 0)
    full = disasm.FULL_BARRIERS.get(vocab.build_arches()[arch].karch, ())
    return sum(m in full for m in r["order"])


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

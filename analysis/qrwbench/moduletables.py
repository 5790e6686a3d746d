"""What the module's own tables say (bench/module/*.def, qrwbench.h): the
ops and their orderings, the qrwlock copies, the parameters, the loop's
unroll, the litmus canaries. The host reads them here, so that one table in
C is the one list (vocab re-exports these names)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .errors import QrwbenchError as InputError

MODULE = Path(__file__).resolve().parents[2] / "bench" / "module"


OPS_DEF = MODULE / "qrwb_ops.def"
# the orderings of QRWB_RMW: "QRWB_OP(op, <ordering>, lhs op<suffix> args)"
_RMW_ORDER = re.compile(r"^\s*QRWB_OP\(op, (\w+), lhs op(?:##(\w+))? args\)")
_ROWS = {
    "QRWB_RMW": re.compile(r"^QRWB_RMW\((\w+), ([^,]+), (\(.*\))\)$"),
    "QRWB_VOID": re.compile(r"^QRWB_VOID\((\w+), (\(.*\))\)$"),
    "QRWB_ONE": re.compile(r"^QRWB_ONE\((\w+), (\w+), (.*)\)$"),
}


@functools.lru_cache(maxsize=None)
def op_rows() -> tuple[tuple[str, str, str], ...]:
    """(op, ordering, statement) of every timed loop, in table order: the
    module's op table bench/module/qrwb_ops.def (one row per op) expanded
    as its QRWB_RMW / QRWB_VOID / QRWB_ONE macros expand it."""
    text = OPS_DEF.read_text().splitlines()
    rmw = [m.groups() for line in text if (m := _RMW_ORDER.match(line))]
    if not rmw:
        raise InputError(f"{OPS_DEF}: no orderings in its '#define QRWB_RMW'")
    out = []
    for line in text:
        if m := _ROWS["QRWB_RMW"].match(line):
            op, lhs, args = m.groups()
            out += [(op, o, f"{lhs} {op}{suf or ''}{args}") for o, suf in rmw]
        elif m := _ROWS["QRWB_VOID"].match(line):
            out.append((m.group(1), "relaxed", m.group(1) + m.group(2)))
        elif m := _ROWS["QRWB_ONE"].match(line):
            out.append(m.groups())
        elif line.startswith(tuple(f"{k}(" for k in _ROWS)):
            raise InputError(f"{OPS_DEF}: malformed row '{line}': valid are "
                             "QRWB_RMW(op, lhs, (args)), QRWB_VOID(op, (args)), QRWB_ONE(op, ordering, stmt)")
    return tuple(out)


@functools.lru_cache(maxsize=None)
def op_orderings() -> dict[str, tuple[str, ...]]:
    """{op: its orderings}, in table order (op_rows: the one list of ops)."""
    out: dict[str, list[str]] = {}
    for op, o, _stmt in op_rows():
        out.setdefault(op, []).append(o)
    return {k: tuple(v) for k, v in out.items()}


IMPLS_DEF = MODULE / "qrwb_impls.def"
_IMPL_ROW = re.compile(r"^QRWB_IMPL\((\w+), (none|kernel|module), (\w+), ([01]), ([01])\)$")


class LockImpl(NamedTuple):
    """One row of the module's lock table qrwb_impls.def."""
    name: str       # the instance: qrwb_<name>_loop, qrwb_<name>_read_lock ..., qrwb_lock_<name>.o
    kind: str       # none (the harness without a lock), kernel (rwlock_t) or module (the copy)
    ordering: str   # module: full, acqrel, relaxed (the record's variant); else the kind
    copy: int       # the record's copy (1: the A/A twin)
    mb: int         # 1: one smp_mb() per lock+unlock, run in place of its twin with aa_inject_mb=1


@functools.lru_cache(maxsize=None)
def lock_impls() -> tuple[LockImpl, ...]:
    """Every rwlock implementation, in table order: the rows of the module's
    lock table bench/module/qrwb_impls.def, as its QRWB_IMPL rows expand."""
    out = []
    for line in IMPLS_DEF.read_text().splitlines():
        if m := _IMPL_ROW.match(line):
            out.append(LockImpl(m[1], m[2], m[3], int(m[4]), int(m[5])))
        elif line.startswith("QRWB_IMPL("):
            raise InputError(f"{IMPLS_DEF}: malformed row '{line}': valid is "
                             "QRWB_IMPL(name, none|kernel|module, ordering, 0|1, 0|1)")
    if not out:
        raise InputError(f"{IMPLS_DEF}: no QRWB_IMPL rows")
    return tuple(out)


def module_lock_variants() -> dict[str, str]:
    """{ordering: instance} of the module's qrwlock copies compared with
    each other: the module rows of copy 0 without an injected barrier."""
    return {i.ordering: i.name for i in lock_impls()
            if i.kind == "module" and i.copy == 0 and not i.mb}


def rwlock_variants() -> tuple[str, ...]:
    """The variants a module rwlock result may have: the orderings of the
    module's qrwlock copies."""
    return tuple(module_lock_variants())


PARAMS_DEF = MODULE / "qrwb_params.def"
_UPARAM = re.compile(r'^QRWB_UPARAM\((\w+), (\w+), (\w+), (\w+), "(.*)"\)$')
_SPARAM = re.compile(r'^QRWB_SPARAM\((\w+), "(.*)", "(.*)"\)$')


@functools.lru_cache(maxsize=None)
def module_params() -> tuple[dict, frozenset]:
    """({integer param: (min, max)}, {string params}) from the module's
    parameter table bench/module/qrwb_params.def (the one list)."""
    ints, strs = {}, set()
    for line in PARAMS_DEF.read_text().splitlines():
        if m := _UPARAM.match(line):
            hi = (1 << 64) - 1 if m.group(4) == "U64_MAX" else int(m.group(4))
            ints[m.group(1)] = (int(m.group(3)), hi)
        elif m := _SPARAM.match(line):
            strs.add(m.group(1))
    return ints, frozenset(strs)


MODULE_H = MODULE / "qrwbench.h"


@functools.lru_cache(maxsize=None)
def loop_unroll() -> int:
    """Ops per iteration of a timed atomics loop: QRWB_UNROLL of the
    module's bench/module/qrwbench.h (each loop writes its op that often)."""
    m = re.search(r"^#define QRWB_UNROLL\s+(\d+)\s*$", MODULE_H.read_text(), re.M)
    if not m:
        raise InputError(f"{MODULE_H}: no '#define QRWB_UNROLL <n>' line")
    return int(m.group(1))


LITMUS_DEF = MODULE / "qrwb_litmus.def"
_LITMUS_ROW = re.compile(r"QRWB_LITMUS\((\w+), (allowed|forbidden), ([01]), ([01]),")


@dataclass(frozen=True)
class Litmus:
    name: str
    lkmm: str                 # "allowed" or "forbidden" by the Linux kernel memory model
    want: tuple[int, int]     # the outcome (r0, r1) only reordering explains


@functools.lru_cache(maxsize=None)
def litmus_tests() -> dict[str, Litmus]:
    """{name: Litmus} of the module's canary table bench/module/qrwb_litmus.def."""
    out = {}
    for line in LITMUS_DEF.read_text().splitlines():
        if m := _LITMUS_ROW.match(line):
            out[m.group(1)] = Litmus(m.group(1), m.group(2), (int(m.group(3)), int(m.group(4))))
    return out

"""Strict parser of a guest console log (docs/records.md, schema 1).

The console is untrusted input. A run is usable only when every record line
parses exactly: the ``@@QRWB `` prefix at the start of a line, printable ASCII,
at most 4096 bytes of JSON, one object, no duplicate keys, no floats, the right
keys with the right types for its ``type``; ``begin`` first, ``end`` last, the
end marker's record count and CRC-32 match, and the per-thread counts add up.
Anything else makes the run failed (``ParsedRun.ok`` false, ``reason`` one
line naming the first problem) and yields no results.

Non-record lines are kernel and init messages; they are scanned for faults
(:mod:`qrwbench.results.faults`) and for the module's ``qrwbench: refused: <reason>``.

:func:`format_console` is the inverse (records -> console text with a correct
end marker); tests and synthetic fixtures use it.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field

from .. import vocab
from ..errors import one_line
from . import faults as _faults

PREFIX = "@@QRWB "
MARK = "@@QRWB"
SCHEMA = 1
MAX_JSON_BYTES = 4096
MAX_LINE_BYTES = 16384          # any console line, record or not
MAX_CONSOLE_BYTES = 64 << 20    # the whole log

ARCHES = tuple(vocab.ARCHES)
WORKLOADS = vocab.WORKLOADS + vocab.TEST_WORKLOADS + vocab.MODULE_WORKLOADS
# in-kernel perf counters: begin.pmu says which the guest counted
PMU_COUNTERS = ("cycles", "instructions")
MAX_PMU_WHY = 512

# Bounds of what the module can print (bench/module/qrwb_params.def and the
# timed loops): larger values are corrupt records, and SQLite stores at most
# INT64_MAX.
INT64_MAX = (1 << 63) - 1
MAX_REPS = 10000            # reps <= 10000, so rep < 10000
MAX_WINDOW_NS = 3600 * 10**9    # a window is duration_ms <= 60 s plus one batch
MAX_ENTRIES = 1 << 24       # order: entries x reps of one boot

# What a workload's records may name and must carry: its vocab.Workload
# (impls, variants, placements, op, fields). The fields a workload's results
# add are checked by these rules: the read/write split of every op (all of
# READ_WRITE_FIELDS or none), then each integer field's range, in this order.
READ_WRITE_FIELDS = ("reads", "writes", "per_thread_reads", "per_thread_writes")
FIELD_RANGES = (("write_pct", 0, 100), ("nlocks", 1, INT64_MAX), ("cs_work", 0, INT64_MAX),
                ("think_work", 0, INT64_MAX), ("cs_lines", 0, INT64_MAX),
                ("violations", -1, INT64_MAX))
_OP_RE = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
_CRC_RE = re.compile(r"[0-9a-f]{8}\Z")
_REFUSED_RE = re.compile(r"qrwbench: refused: (.*)")
# a program workload's failed run (guest/prog.c): a killed worker, a short
# window, a failed system call; the init prints no records after it
_PROGRAM_FAILED_RE = re.compile(r"qrwbench-init: failed: (.*)")
_PRINTABLE_RE = re.compile(r"[ -~]*\Z")


@dataclass
class ParsedRun:
    """What :func:`parse_console` found. ``results`` is empty unless ``ok``."""

    ok: bool
    reason: str
    begin: dict | None = None
    results: list[dict] = field(default_factory=list)
    end: dict | None = None
    refused_reason: str | None = None
    faults: list[str] = field(default_factory=list)
    error: dict | None = None
    litmus: list[dict] = field(default_factory=list)    # workload=litmus: the canaries


class RecordError(ValueError):
    """One record line is malformed (message without the line number)."""


# ---------------------------------------------------------------- JSON layer

def _pairs_no_dup(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise RecordError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def _no_float(text):
    raise RecordError(f"float {text[:20]!r} (all numbers must be integers)")


def _no_constant(text):
    raise RecordError(f"non-finite number {text!r}")


def loads_record(json_text: str) -> dict:
    """Parse one record's JSON text strictly; raise :class:`RecordError`."""
    if len(json_text) > MAX_JSON_BYTES:
        raise RecordError(f"JSON text is {len(json_text)} bytes, limit {MAX_JSON_BYTES}")
    if not _PRINTABLE_RE.match(json_text):
        raise RecordError("JSON text has a byte that is not printable ASCII")
    if not (json_text.startswith("{") and json_text.endswith("}")):
        raise RecordError("JSON text is not a single object")
    try:
        obj = json.loads(json_text, object_pairs_hook=_pairs_no_dup,
                         parse_float=_no_float, parse_constant=_no_constant)
    except RecordError:
        raise
    except (ValueError, RecursionError) as exc:
        raise RecordError(f"invalid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordError("JSON text is not a single object")
    return obj


# ------------------------------------------------------------- type checks

def _is_int(v) -> bool:
    return type(v) is int


def _int(obj, key, lo=None, hi=INT64_MAX):
    """An integer in lo..hi; every stored integer is at most INT64_MAX (SQLite's)."""
    v = obj.get(key)
    if not _is_int(v):
        raise RecordError(f"{key!r} must be an integer, got {type(v).__name__}")
    if lo is not None and v < lo:
        raise RecordError(f"{key!r} is {v}, must be >= {lo}")
    if v > hi:
        raise RecordError(f"{key!r} is {str(v)[:40]}, must be <= {hi}")
    return v


def _str(obj, key, choices=None, pattern=None, maxlen=128):
    v = obj.get(key)
    if type(v) is not str:
        raise RecordError(f"{key!r} must be a string, got {type(v).__name__}")
    if len(v) > maxlen or not _PRINTABLE_RE.match(v):
        raise RecordError(f"{key!r} is not a printable string of at most {maxlen} chars")
    if choices is not None and v not in choices:
        raise RecordError(f"{key!r} is {v!r}, not one of {', '.join(choices)}")
    if pattern is not None and not pattern.match(v):
        raise RecordError(f"{key!r} is {v!r}, not a valid name")
    return v


def _int_list(obj, key, length):
    v = obj.get(key)
    if type(v) is not list or not all(_is_int(x) and x >= 0 for x in v):
        raise RecordError(f"{key!r} must be a list of non-negative integers")
    if len(v) != length:
        raise RecordError(f"{key!r} has {len(v)} entries, threads is {length}")
    return v


def _require(obj, keys, kind):
    missing = [k for k in keys if k not in obj]
    if missing:
        raise RecordError(f"{kind} record lacks {', '.join(repr(k) for k in missing)}")


def _param_value_ok(v) -> bool:
    if _is_int(v) or type(v) is bool or v is None:
        return True
    if type(v) is str:
        return len(v) <= 256 and bool(_PRINTABLE_RE.match(v))
    if type(v) is list:
        return len(v) <= 256 and all(_param_value_ok(x) and type(x) is not list for x in v)
    return False


def check_pmu(pmu) -> None:
    """``begin.pmu``: ``{"cycles": bool, "instructions": bool[, "why": str]}``,
    ``why`` (non-empty) exactly when a counter is false, no other keys."""
    if type(pmu) is not dict:
        raise RecordError(f"'pmu' must be an object, got {type(pmu).__name__}")
    for key in pmu:
        if key not in PMU_COUNTERS + ("why",):
            raise RecordError(f"'pmu' has an unknown key {key[:40]!r}: valid are "
                              f"{', '.join(PMU_COUNTERS)}, why")
    for key in PMU_COUNTERS:
        if type(pmu.get(key)) is not bool:
            raise RecordError(f"'pmu.{key}' must be true or false, got "
                              f"{type(pmu.get(key)).__name__}")
    if all(pmu[k] for k in PMU_COUNTERS):
        if "why" in pmu:
            raise RecordError("'pmu.why' is given but every counter is true")
        return
    why = pmu.get("why")
    if type(why) is not str or not why:
        raise RecordError("'pmu.why' must be a non-empty string when a counter is false")
    if len(why) > MAX_PMU_WHY or not _PRINTABLE_RE.match(why):
        raise RecordError(f"'pmu.why' is not a printable string of at most {MAX_PMU_WHY} chars")


def check_begin(rec: dict) -> None:
    _require(rec, ("arch", "kernel_variant", "kernel_release", "workload", "seed",
                   "online_cpus", "threads", "params"), "begin")
    _str(rec, "arch", ARCHES)
    _str(rec, "kernel_variant", tuple(vocab.kernel_variants()))
    _str(rec, "kernel_release", maxlen=64)
    _str(rec, "workload", WORKLOADS)
    _int(rec, "seed", 0, (1 << 64) - 1)     # a u64 parameter, kept as JSON text
    _int(rec, "online_cpus", 1, 4096)
    _int(rec, "threads", 1, 4096)
    params = rec["params"]
    if type(params) is not dict:
        raise RecordError("'params' must be an object")
    for name, value in params.items():
        if not _OP_RE.match(name) or not _param_value_ok(value):
            raise RecordError(f"params entry {name[:40]!r} is not a plain name = scalar")
    # optional in schema 1: modules before the PMU support print no pmu
    if "pmu" in rec:
        check_pmu(rec["pmu"])


def check_result(rec: dict, begin: dict) -> None:
    _require(rec, ("workload", "impl", "op", "variant", "copy", "placement", "rep",
                   "order", "threads", "ns", "ops", "per_thread_ops", "overhead_ps",
                   "batch"), "result")
    if vocab.workload(begin["workload"]).record != vocab.RESULT_RECORD:
        raise RecordError(f"result record in a {begin['workload']} run")
    workload = _str(rec, "workload", WORKLOADS)
    if workload != begin["workload"]:
        raise RecordError(f"result workload {workload!r} differs from begin's "
                          f"{begin['workload']!r}")
    wl = vocab.workload(workload)
    impl = _str(rec, "impl", wl.impls)
    op = _str(rec, "op", pattern=_OP_RE)
    if wl.op and op != wl.op:
        raise RecordError(f"{workload} result has op {op!r}, expected {wl.op!r}")
    if impl == "kernel":
        variant = _str(rec, "variant", tuple(vocab.kernel_variants()))
        if variant != begin["kernel_variant"]:
            raise RecordError(f"impl 'kernel' result has variant {variant!r} but the "
                              f"kernel is {begin['kernel_variant']!r}")
    else:
        _str(rec, "variant", wl.variants())
    if wl.op_table:
        orderings = vocab.op_orderings().get(op)
        if orderings is None:
            raise RecordError(f"op {op!r} is not in the module's op table (qrwb_ops.def)")
        if rec["variant"] not in orderings:
            raise RecordError(f"op {op!r} has no ordering {rec['variant']!r}: valid are "
                              f"{', '.join(orderings)}")
    _int(rec, "copy", 0, 1)
    _str(rec, "placement", wl.placements)
    _int(rec, "rep", 0, MAX_REPS - 1)
    _int(rec, "order", 0, MAX_ENTRIES)
    threads = _int(rec, "threads", 1, 4096)
    _int(rec, "ns", 1, MAX_WINDOW_NS)
    ops = _int(rec, "ops", 0)
    per_thread = _int_list(rec, "per_thread_ops", threads)
    if sum(per_thread) != ops:
        raise RecordError(f"per_thread_ops sum to {sum(per_thread)}, ops is {ops}")
    _int(rec, "overhead_ps", 0)
    _int(rec, "batch", 1)
    pmu = begin.get("pmu")
    for key in PMU_COUNTERS:
        if key in rec:
            _int(rec, key, 0)
            if pmu is None or not pmu[key]:
                raise RecordError(f"result has {key!r} but begin's pmu "
                                  f"{'is absent' if pmu is None else f'says {key} false'}")
    if wl.fields:
        _require(rec, wl.fields, f"{workload} result")
    if set(READ_WRITE_FIELDS) <= set(wl.fields):
        reads = _int(rec, "reads", 0)
        writes = _int(rec, "writes", 0)
        if reads + writes != ops:
            raise RecordError(f"reads + writes = {reads + writes}, ops is {ops}")
        ptr = _int_list(rec, "per_thread_reads", threads)
        ptw = _int_list(rec, "per_thread_writes", threads)
        if sum(ptr) != reads:
            raise RecordError(f"per_thread_reads sum to {sum(ptr)}, reads is {reads}")
        if sum(ptw) != writes:
            raise RecordError(f"per_thread_writes sum to {sum(ptw)}, writes is {writes}")
        for i, (r, w, o) in enumerate(zip(ptr, ptw, per_thread)):
            if r + w != o:
                raise RecordError(f"thread {i}: reads + writes = {r + w}, ops is {o}")
    for key, lo, hi in FIELD_RANGES:
        if key in wl.fields:
            _int(rec, key, lo, hi)


def check_litmus(rec: dict, begin: dict) -> None:
    """A canary's outcome (workload=litmus; bench/module/qrwb_litmus.def)."""
    wl = vocab.workload(begin["workload"])
    if wl.record != vocab.LITMUS_RECORD:
        raise RecordError(f"litmus record in a {begin['workload']!r} run")
    _require(rec, wl.fields, vocab.LITMUS_RECORD)
    tests = vocab.litmus_tests()
    name = _str(rec, "test", tuple(tests))
    t = tests[name]
    if rec["lkmm"] != t.lkmm:
        raise RecordError(f"litmus {name}: lkmm {rec['lkmm']!r}, the table says {t.lkmm!r}")
    if _int_list(rec, "want", 2) != list(t.want):
        raise RecordError(f"litmus {name}: want {rec['want']}, the table says {list(t.want)}")
    iters = _int(rec, "iters", 0, 10**7)
    _int(rec, "ns", 0)
    counts = _int_list(rec, "counts", 4)
    if sum(counts) != iters:
        raise RecordError(f"litmus {name}: counts sum to {sum(counts)}, iters is {iters}")


def check_end(rec: dict) -> None:
    _require(rec, ("records", "crc32"), "end")
    _int(rec, "records", 1)
    _str(rec, "crc32", pattern=_CRC_RE)


# ------------------------------------------------------------------ parsing

def _to_text(data) -> str:
    if isinstance(data, (bytes, bytearray, memoryview)):
        # latin-1 maps every byte to one character: nothing is lost or raises,
        # and record lines are then checked for printable ASCII.
        return bytes(data).decode("latin-1")
    if not isinstance(data, str):
        raise TypeError("console must be str or bytes")
    return data


def _fail(why: str, **kw) -> ParsedRun:
    return ParsedRun(ok=False, reason=one_line(why), **kw)


def parse_console(data) -> ParsedRun:
    """Parse a whole console log (``str`` or ``bytes``) into a :class:`ParsedRun`."""
    text = _to_text(data)
    if len(text) > MAX_CONSOLE_BYTES:
        return _fail(f"console log is {len(text)} bytes, limit {MAX_CONSOLE_BYTES}")

    lines = text.split("\n")
    last_terminated = text.endswith("\n")
    if last_terminated:
        lines.pop()  # the empty string after the final newline

    records: list[tuple[int, str, dict]] = []   # (line number, json text, object)
    other: list[str] = []
    unprintable: list[int] = []                 # non-record lines with binary junk
    refused = None
    program_failed = None
    framing_error = None
    for idx, raw in enumerate(lines):
        lineno = idx + 1
        line = raw[:-1] if raw.endswith("\r") else raw
        if framing_error is None and len(line) > MAX_LINE_BYTES:
            framing_error = f"line {lineno}: {len(line)} bytes long, limit {MAX_LINE_BYTES}"
            continue
        if line.startswith(PREFIX):
            if framing_error is not None:
                continue
            if idx == len(lines) - 1 and not last_terminated:
                framing_error = (f"line {lineno}: record not terminated by a newline "
                                 "(truncated console?)")
                continue
            json_text = line[len(PREFIX):]
            try:
                obj = loads_record(json_text)
            except RecordError as exc:
                framing_error = f"line {lineno}: {exc}"
                continue
            records.append((lineno, json_text, obj))
        elif MARK in line:
            if framing_error is None:
                framing_error = (f"line {lineno}: garbled record (the {MARK} marker is "
                                 "not followed by a space at the start of the line)")
        else:
            other.append(line)
            if not _PRINTABLE_RE.match(line.replace("\t", " ")):
                unprintable.append(lineno)
            m = _REFUSED_RE.search(line)
            if m and refused is None:
                refused = one_line(m.group(1), 200) or "(no reason given)"
            m = _PROGRAM_FAILED_RE.search(line)
            if m and program_failed is None:
                program_failed = one_line(m.group(1), 300) or "(no reason given)"

    found_faults = _faults.scan(other)
    error_rec = None
    for lineno, _, obj in records:
        if obj.get("type") == "error":
            error_rec = obj
            break

    common = dict(refused_reason=refused, faults=found_faults)
    if found_faults:
        return _fail(f"guest fault: {found_faults[0]}", error=error_rec, **common)
    if error_rec is not None or refused is not None:
        why = refused or "no reason printed"
        errno = error_rec.get("errno") if error_rec else None
        tail = f" (finit_module errno {errno})" if _is_int(errno) else ""
        if refused is None:
            refused = common["refused_reason"] = why
        return _fail(f"module refused to load: {why}{tail}", error=error_rec, **common)
    if program_failed is not None:
        return _fail(f"program failed: {program_failed}", **common)
    if framing_error is None and records:
        first, last = records[0][0], records[-1][0]
        junk = [n for n in unprintable if first < n < last]
        if junk:
            framing_error = (f"line {junk[0]}: garbage (bytes that are not printable "
                             "ASCII) between the records")
    if framing_error is not None:
        return _fail(framing_error, **common)
    return _check_sequence(records, common)


def _check_sequence(records, common) -> ParsedRun:
    if not records:
        return _fail("no records on the console (the guest printed no @@QRWB lines)",
                     **common)
    crc = 0
    begin = None
    results: list[dict] = []
    litmus: list[dict] = []
    orders: set[int] = set()
    for pos, (lineno, json_text, obj) in enumerate(records):
        where = f"line {lineno}"
        kind = obj.get("type")
        if obj.get("schema") != SCHEMA or not _is_int(obj.get("schema")):
            return _fail(f"{where}: schema is {obj.get('schema')!r}, this parser reads "
                         f"schema {SCHEMA}", begin=begin, **common)
        try:
            if pos == 0:
                if kind != "begin":
                    raise RecordError(f"first record is {kind!r}, expected 'begin'")
                check_begin(obj)
                begin = obj
            elif kind == vocab.RESULT_RECORD:
                check_result(obj, begin)
                if obj["order"] in orders:
                    raise RecordError(f"order {obj['order']} appears twice")
                orders.add(obj["order"])
                results.append(obj)
            elif kind == vocab.LITMUS_RECORD:
                check_litmus(obj, begin)
                litmus.append(obj)
            elif kind == "end":
                check_end(obj)
                if pos != len(records) - 1:
                    raise RecordError("record after the end marker")
                if obj["records"] != pos:
                    raise RecordError(f"end marker counts {obj['records']} records, "
                                      f"{pos} precede it")
                got = f"{crc & 0xFFFFFFFF:08x}"
                if obj["crc32"] != got:
                    raise RecordError(f"end marker crc32 {obj['crc32']}, records "
                                      f"give {got}")
                wl = vocab.workload(begin["workload"])
                printed = litmus if wl.record == vocab.LITMUS_RECORD else results
                if not printed and not wl.test_only:
                    raise RecordError(f"no {wl.record} records between begin and the end marker")
                return ParsedRun(ok=True, reason="ok", begin=begin, results=results,
                                 end=obj, litmus=litmus, **common)
            elif kind == "begin":
                raise RecordError("second begin record")
            else:
                raise RecordError(f"unknown record type {kind!r}")
        except RecordError as exc:
            return _fail(f"{where}: {exc}", begin=begin, **common)
        crc = zlib.crc32((json_text + "\n").encode("ascii"), crc)
    return _fail(f"no end marker after {len(records)} records (truncated console?)",
                 begin=begin, **common)


# ------------------------------------------------------------------ writing

def dumps_record(obj: dict) -> str:
    """The compact JSON text of one record (what the module prints)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def format_console(records: list[dict], *, end: bool = True) -> str:
    """Console text for ``records`` (begin + results), with a correct end marker."""
    crc = 0
    out = []
    for obj in records:
        text = dumps_record(obj)
        crc = zlib.crc32((text + "\n").encode("ascii"), crc)
        out.append(PREFIX + text + "\n")
    if end:
        out.append(PREFIX + dumps_record({"type": "end", "schema": SCHEMA,
                                          "records": len(records),
                                          "crc32": f"{crc:08x}"}) + "\n")
    return "".join(out)

"""records.parse_console: valid consoles parse; every corruption is a failed run."""

import json
import zlib

import numpy as np
import pytest

import synth
from qrwbench.results import records

PREFIX = records.PREFIX


def _recs(workload="rwlock"):
    rng = np.random.default_rng(7)
    recs = [synth.begin(workload=workload, threads=2)]
    recs += synth.results(workload=workload, reps=3, rng=rng, threads=2)
    return recs


@pytest.fixture(params=["atomics", "rwlock"])
def good(request):
    recs = _recs(request.param)
    return recs, synth.console(recs)


def _lines(text):
    return text.split("\n")


def _record_idx(lines):
    return [i for i, l in enumerate(lines) if l.startswith(PREFIX)]


def _replace_record(text, k, mutate):
    """Apply ``mutate(obj) -> obj`` to the k-th record; recompute nothing."""
    lines = _lines(text)
    i = _record_idx(lines)[k]
    obj = json.loads(lines[i][len(PREFIX):])
    lines[i] = PREFIX + json.dumps(mutate(obj), separators=(",", ":"))
    return "\n".join(lines)


def _resign(recs_text_objs):
    """Console for raw JSON texts with a correct end marker (to isolate one fault)."""
    crc = 0
    out = []
    for t in recs_text_objs:
        crc = zlib.crc32((t + "\n").encode(), crc)
        out.append(PREFIX + t)
    end = {"type": "end", "schema": 1, "records": len(out), "crc32": f"{crc:08x}"}
    out.append(PREFIX + json.dumps(end, separators=(",", ":")))
    return "\n".join(synth.BOOT_LINES + out) + "\n"


def test_valid_console_parses(good):
    recs, text = good
    p = records.parse_console(text)
    assert p.ok, p.reason
    assert p.begin == recs[0]
    assert p.results == recs[1:]
    assert p.end["records"] == len(recs)
    assert p.faults == [] and p.refused_reason is None


def test_bytes_and_crlf_parse_like_text(good):
    _, text = good
    p = records.parse_console(text.replace("\n", "\r\n").encode())
    assert p.ok, p.reason
    assert len(p.results) == len(records.parse_console(text).results)


def test_kernel_lines_between_records_are_allowed(good):
    _, text = good
    lines = _lines(text)
    i = _record_idx(lines)[2]
    lines.insert(i, "[    1.234567] random: crng init done")
    assert records.parse_console("\n".join(lines)).ok


def _no_end(text):
    lines = _lines(text)
    del lines[_record_idx(lines)[-1]]
    return "\n".join(lines)


def _end_field(text, key, value):
    return _replace_record(text, -1, lambda o: {**o, key: value})


def _truncate_mid_record(text):
    lines = _lines(text)
    i = _record_idx(lines)[-2]
    return "\n".join(lines[:i] + [lines[i][:40]])


def _garbage_record(text):
    lines = _lines(text)
    lines.insert(_record_idx(lines)[1], PREFIX + "{garbage}")
    return "\n".join(lines)


def _binary_junk(text):
    lines = _lines(text)
    lines.insert(_record_idx(lines)[1], "\x00\x13\xfe\xff junk")
    return "\n".join(lines)


def _oversized(text):
    lines = _lines(text)
    i = _record_idx(lines)[1]
    obj = json.loads(lines[i][len(PREFIX):])
    obj["pad"] = "x" * 5000
    lines[i] = PREFIX + json.dumps(obj)
    return "\n".join(lines)


def _huge_line(text):
    lines = _lines(text)
    lines.insert(2, "A" * (records.MAX_LINE_BYTES + 1))
    return "\n".join(lines)


def _dup_key(text):
    lines = _lines(text)
    i = _record_idx(lines)[1]
    lines[i] = lines[i][:-1] + ',"ops":1}'
    return "\n".join(lines)


def _float(text):
    return _replace_record(text, 1, lambda o: o) .replace(
        f'"ns":{synth.NS}', f'"ns":{synth.NS}.0', 1)


def _mangled_prefix(text):
    lines = _lines(text)
    i = _record_idx(lines)[1]
    lines[i] = "x" + lines[i]
    return "\n".join(lines)


CORRUPTIONS = {
    "no end marker": (_no_end, "no end marker"),
    "wrong count": (lambda t: _end_field(t, "records", 999), "counts 999"),
    "wrong crc": (lambda t: _end_field(t, "crc32", "deadbeef"), "crc32"),
    "bad crc syntax": (lambda t: _end_field(t, "crc32", "DEADBEEF"), "crc32"),
    "edited record": (lambda t: _replace_record(
        t, 1, lambda o: {**o, "rep": o["rep"] + 100}), "crc32"),
    "truncated mid record": (_truncate_mid_record, "truncated"),
    "garbage record": (_garbage_record, "invalid JSON"),
    "binary junk line": (_binary_junk, "garbage"),
    "oversized record": (_oversized, "limit 4096"),
    "oversized console line": (_huge_line, "limit"),
    "duplicate key": (_dup_key, "duplicate key 'ops'"),
    "float": (_float, "float"),
    "mangled prefix": (_mangled_prefix, "garbled record"),
    "record after end": (lambda t: t + PREFIX + records.dumps_record(
        synth.begin()) + "\n", "after the end"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corruption_is_rejected(good, name):
    mutate, expect = CORRUPTIONS[name]
    p = records.parse_console(mutate(good[1]))
    assert not p.ok
    assert expect in p.reason
    assert "\n" not in p.reason
    assert p.results == []


FIELD_FAULTS = {
    "bool for int": (lambda o: {**o, "copy": True}, "'copy' must be an integer"),
    "missing key": (lambda o: {k: v for k, v in o.items() if k != "batch"}, "'batch'"),
    "wrong schema": (lambda o: {**o, "schema": 2}, "schema is 2"),
    "per-thread sum": (lambda o: {**o, "per_thread_ops": [0, 0]}, "sum to 0"),
    "per-thread length": (lambda o: {**o, "per_thread_ops": [o["ops"]]}, "has 1 entries"),
    "negative ns": (lambda o: {**o, "ns": 0}, "'ns' is 0"),
    "unknown variant": (lambda o: {**o, "variant": "seqcst"}, "'variant'"),
    "unknown type": (lambda o: {**o, "type": "resultx"}, "unknown record type"),
    "reads+writes": (lambda o: {**o, "reads": o.get("reads", 0) + 1, "writes": o.get(
        "writes", 0)}, "reads"),
    "control char in string": (lambda o: {**o, "op": "atomic\u0007add"}, "'op'"),
}


@pytest.mark.parametrize("name", sorted(FIELD_FAULTS))
def test_bad_fields_are_rejected_even_with_a_valid_crc(name):
    mutate, expect = FIELD_FAULTS[name]
    recs = _recs("rwlock")
    texts = [records.dumps_record(r) for r in recs]
    texts[1] = json.dumps(mutate(recs[1]), separators=(",", ":"))
    p = records.parse_console(_resign(texts))
    assert not p.ok
    assert expect in p.reason, p.reason


def test_valid_crc_resign_helper_accepts_untouched_records():
    texts = [records.dumps_record(r) for r in _recs("rwlock")]
    assert records.parse_console(_resign(texts)).ok


@pytest.mark.parametrize("const", ["NaN", "Infinity", "1e3", "1.5"])
def test_non_integer_numbers_are_rejected(const):
    recs = _recs("atomics")
    texts = [records.dumps_record(r) for r in recs]
    texts[1] = texts[1].replace('"overhead_ps":1200', f'"overhead_ps":{const}')
    p = records.parse_console(_resign(texts))
    assert not p.ok and ("float" in p.reason or "non-finite" in p.reason), p.reason


def test_begin_must_come_first_and_only_once():
    recs = _recs("atomics")
    texts = [records.dumps_record(r) for r in recs]
    p = records.parse_console(_resign(texts[1:2] + texts))
    assert not p.ok and "expected 'begin'" in p.reason
    p = records.parse_console(_resign(texts + texts[:1]))
    assert not p.ok and "second begin" in p.reason


def test_duplicate_order_is_rejected():
    recs = _recs("atomics")
    recs[2] = {**recs[2], "order": recs[1]["order"]}
    p = records.parse_console(synth.console(recs))
    assert not p.ok and "appears twice" in p.reason


def test_refused_module_gives_refused_reason():
    err = {"type": "error", "schema": 1, "errno": 22, "stage": "load"}
    text = "\n".join(synth.BOOT_LINES) + \
        "\n[    1.0] qrwbench: refused: write_pct=150 is outside 0..100\n" + \
        PREFIX + records.dumps_record(err) + "\n"
    p = records.parse_console(text)
    assert not p.ok
    assert p.refused_reason == "write_pct=150 is outside 0..100"
    assert "errno 22" in p.reason and "write_pct=150" in p.reason
    assert p.error == err


def test_fault_on_console_fails_an_otherwise_valid_run(good):
    text = good[1] + "[    2.5] BUG: soft lockup - CPU#1 stuck for 22s! [qrwbench:80]\n"
    p = records.parse_console(text)
    assert not p.ok
    assert p.faults and "soft lockup" in p.faults[0]
    assert p.reason.startswith("guest fault:")


def test_empty_console():
    p = records.parse_console("")
    assert not p.ok and "no records" in p.reason


def test_format_console_roundtrip_changes_with_content():
    recs = _recs("atomics")
    a = records.format_console(recs)
    b = records.format_console(recs[:-1])
    assert records.parse_console(a).ok and records.parse_console(b).ok
    assert a.splitlines()[-1] != b.splitlines()[-1]

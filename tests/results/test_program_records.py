"""The host's checks on the program workloads' records (guest/prog.c and the
module's qrwb_program.c: the program's windows as impl kernel, the module's
reference as impl module): a complete console parses; each kind of damage,
and a failed program run, is a failed run with a one-line reason and no
results; seeded fuzzing never raises (the contract: tests/fuzz.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest

import synth
from fuzz import escaped, mutate_console_bytes, mutate_records, one_line
from qrwbench import vocab
from qrwbench.results import records

PROGRAMS = tuple(n for n, w in vocab.WORKLOAD_TABLE.items() if w.program)


def recs_of(workload, seed=0, kernel_variant="acqrel"):
    rng = np.random.default_rng(seed)
    return [synth.begin(workload=workload, threads=2, kernel_variant=kernel_variant)] + \
        synth.program_results(workload, reps=3, rng=rng, kernel_variant=kernel_variant)


def parse(recs, **kw):
    return records.parse_console(synth.console(recs, **kw))


def test_there_are_programs():
    assert {"forkwait", "pgrp", "sigio"} <= set(PROGRAMS)


@pytest.mark.parametrize("workload", PROGRAMS)
def test_a_complete_program_console_parses(workload):
    p = parse(recs_of(workload, kernel_variant="full"))
    assert p.ok, p.reason
    assert {(r["impl"], r["variant"]) for r in p.results} == {("kernel", "full"),
                                                              ("module", "acqrel")}
    assert {r["op"] for r in p.results} == {workload}


def _kernel(recs):
    return next(r for r in recs[1:] if r["impl"] == "kernel")


def _module(recs):
    return next(r for r in recs[1:] if r["impl"] == "module")


# (what, workload, damage(recs), a word the reason must name)
DAMAGE = [
    ("kernel result of another kernel variant", "forkwait",
     lambda r: _kernel(r).update(variant="full"), "variant"),
    ("an op other than the program's", "forkwait",
     lambda r: [x.update(op="rwlock") for x in r[1:]], "op"),
    ("the reference in a variant the module has not", "forkwait",
     lambda r: _module(r).update(variant="acquire"), "variant"),
    ("an impl the workload has not", "sigio", lambda r: _kernel(r).update(impl="inline"), "impl"),
    ("a per-CPU placement", "pgrp", lambda r: _kernel(r).update(placement="percpu"),
     "placement"),
    ("reads and writes that do not add up to ops", "pgrp",
     lambda r: _kernel(r).update(reads=_kernel(r)["reads"] + 1), "reads + writes"),
    ("a kernel result without its reads", "sigio", lambda r: _kernel(r).pop("reads"), "reads"),
    ("per-thread ops that do not sum to ops", "forkwait",
     lambda r: _kernel(r).update(ops=_kernel(r)["ops"] + 1), "per_thread_ops"),
    ("a window of 0 ns", "pgrp", lambda r: _kernel(r).update(ns=0), "ns"),
    ("an order given twice", "sigio", lambda r: _kernel(r).update(order=_module(r)["order"]),
     "order"),
    ("a workload other than begin's", "pgrp",
     lambda r: _kernel(r).update(workload="sigio", op="sigio"), "workload"),
    ("a float", "forkwait", lambda r: _kernel(r).update(ns=1.5), "float"),
]


@pytest.mark.parametrize("what,workload,damage,word", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damaged_program_records_fail_the_run(what, workload, damage, word):
    recs = recs_of(workload)
    damage(recs)
    p = parse(recs)
    assert not p.ok and p.results == [], what
    assert word in p.reason and one_line(p.reason), p.reason


def test_a_changed_record_after_the_end_marker_is_computed_fails_its_crc():
    """A record whose every check passes but whose text is not what the
    module summed (a window's ns changed in transit)."""
    recs = recs_of("pgrp")
    text = synth.console(recs)
    line = "@@QRWB " + records.dumps_record(_kernel(recs))
    assert line in text
    text = text.replace(line, line.replace(f'"ns":{synth.NS},', f'"ns":{synth.NS + 1},'), 1)
    p = records.parse_console(text)
    assert not p.ok and "crc32" in p.reason, p.reason


def test_a_console_without_the_end_marker_fails():
    p = parse(recs_of("sigio"), end=False)
    assert not p.ok and "no end marker" in p.reason, p.reason


@pytest.mark.parametrize("why", ["forkwait: worker 1 killed by signal 9",
                                 "pgrp: short window: worker 1 counted 12 ops and left "
                                 "2000000 ns before the window's end",
                                 "sigio: worker 0: fcntl(F_SETOWN): errno 3"])
def test_a_failed_program_is_a_failed_run_with_its_reason(why):
    """The init prints the line and no records; even if records came with it,
    the run is failed and keeps none of them."""
    recs = recs_of(why.split(":")[0])
    for text in (synth.console([], end=False, tail=[f"qrwbench-init: failed: {why}"]),
                 synth.console(recs, tail=[f"qrwbench-init: failed: {why}"])):
        p = records.parse_console(text)
        assert not p.ok and p.results == []
        assert p.reason == f"program failed: {why}", p.reason


def _gen(seed):
    rng = random.Random(7000 + seed)
    workload = rng.choice(PROGRAMS)
    recs = recs_of(workload, seed)
    what = [workload] + mutate_records(recs, rng)
    data = synth.console(recs).encode()
    if rng.random() < 0.3:
        data, how = mutate_console_bytes(data, rng)
        what.append(how)
    return data, " ".join(what)


@pytest.mark.parametrize("seed", range(60))
def test_parse_program_console_fuzz(seed):
    """Damaged program consoles: no traceback, one-line reason, no results unless ok."""
    data, what = _gen(seed)
    try:
        p = records.parse_console(data)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(escaped(exc, what), pytrace=False)
    assert one_line(p.reason), (p.reason, what)
    assert p.ok or p.results == [], what

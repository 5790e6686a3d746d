"""records: the begin record's ``pmu`` object and the results' cycles and
instructions (docs/records.md). Host only: synthetic consoles."""

import numpy as np
import pytest

import synth
from qrwbench.results import records

NO_PMU = {"cycles": False, "instructions": False,
          "why": "cycles, instructions: perf_event_create_kernel_counter: -ENOENT "
                 "(no PMU implements the event)"}
CYCLES_ONLY = {"cycles": True, "instructions": False,
               "why": "instructions: perf_event_create_kernel_counter: -ENOENT "
                      "(no PMU implements the event)"}
BOTH = {"cycles": True, "instructions": True}


def _console(pmu=None, *, drop_pmu=False, counters=(), omit_in=()):
    """begin (with ``pmu`` unless ``drop_pmu``) + atomics results; ``counters``
    are added to every result except those whose index is in ``omit_in``."""
    b = synth.begin(threads=2)
    if not drop_pmu:
        b["pmu"] = pmu
    res = synth.results(reps=2, threads=2, rng=np.random.default_rng(3))
    for i, r in enumerate(res):
        if i in omit_in:
            continue
        for key in counters:
            r[key] = r["ns"] * 2 + i
    return records.format_console([b] + res)


@pytest.mark.parametrize("pmu,counters", [(NO_PMU, ()), (CYCLES_ONLY, ("cycles",)),
                                          (BOTH, ("cycles", "instructions"))])
def test_well_formed_pmu_with_consistent_results_parses(pmu, counters):
    p = records.parse_console(_console(pmu, counters=counters))
    assert p.ok, p.reason
    assert p.begin["pmu"] == pmu
    for r in p.results:
        for key in records.PMU_COUNTERS:
            assert (key in r) == (key in counters)


def test_begin_without_pmu_is_accepted_as_before():
    """schema 1 consoles of modules without PMU support have no pmu: still data."""
    p = records.parse_console(_console(drop_pmu=True))
    assert p.ok, p.reason
    assert "pmu" not in p.begin


def test_counter_on_may_be_omitted_from_single_results():
    """A counter that was multiplexed in one window is left out of that result."""
    p = records.parse_console(_console(BOTH, counters=("cycles", "instructions"),
                                       omit_in=(0, 3)))
    assert p.ok, p.reason
    assert sum("cycles" in r for r in p.results) == len(p.results) - 2


@pytest.mark.parametrize("pmu,needle", [
    ([], "'pmu' must be an object"),
    ("none", "'pmu' must be an object"),
    ({"cycles": 1, "instructions": False, "why": "x"}, "'pmu.cycles' must be true or false"),
    ({"cycles": True}, "'pmu.instructions' must be true or false"),
    ({"cycles": False, "instructions": False}, "'pmu.why' must be a non-empty string"),
    ({"cycles": False, "instructions": True, "why": ""}, "'pmu.why' must be a non-empty"),
    ({"cycles": False, "instructions": True, "why": 5}, "'pmu.why' must be a non-empty"),
    ({"cycles": True, "instructions": True, "why": "x"}, "every counter is true"),
    ({"cycles": True, "instructions": True, "branches": True}, "unknown key 'branches'"),
    ({"cycles": False, "instructions": False, "why": "x" * 513}, "at most 512"),
])
def test_malformed_pmu_fails_the_run(pmu, needle):
    p = records.parse_console(_console(pmu))
    assert not p.ok and not p.results
    assert "line " in p.reason and needle in p.reason, p.reason


@pytest.mark.parametrize("pmu,counters,needle", [
    (NO_PMU, ("cycles",), "begin's pmu says cycles false"),
    (CYCLES_ONLY, ("cycles", "instructions"), "begin's pmu says instructions false"),
    (None, ("cycles",), "begin's pmu is absent"),
])
def test_counter_in_a_result_that_begin_denies_fails_the_run(pmu, counters, needle):
    p = records.parse_console(_console(pmu, drop_pmu=pmu is None, counters=counters))
    assert not p.ok and needle in p.reason, p.reason


@pytest.mark.parametrize("value,needle", [(-1, "'cycles' is -1"), (True, "'cycles' must be an integer"),
                                          ("7", "'cycles' must be an integer")])
def test_negative_or_non_integer_counter_fails_the_run(value, needle):
    b = dict(synth.begin(threads=2), pmu=BOTH)
    res = synth.results(reps=1, threads=2, rng=np.random.default_rng(3))
    for r in res:
        r["cycles"] = r["instructions"] = r["ns"]
    res[1]["cycles"] = value
    p = records.parse_console(records.format_console([b] + res))
    assert not p.ok and needle in p.reason, p.reason

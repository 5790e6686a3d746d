"""No traceback for any guest console: seeded fuzzing of
``records.parse_console``, which never raises (the contract: tests/fuzz.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest

import synth
from fuzz import base_records, escaped, mutate_console_bytes, mutate_records, one_line
from qrwbench.results import records


def _gen_console(seed: int) -> tuple[bytes, str]:
    rng = random.Random(3000 + seed)
    workload = rng.choice(["atomics", "rwlock"])
    recs = base_records(workload, np.random.default_rng(seed))
    what = [workload] + mutate_records(recs, rng)
    data = synth.console(recs).encode()
    if rng.random() < 0.2:
        data, how = mutate_console_bytes(data, rng)
        what.append(how)
    return data, " ".join(what)


def _check_parsed(p, what) -> None:
    assert isinstance(p, records.ParsedRun), what
    assert isinstance(p.ok, bool) and isinstance(p.reason, str) and one_line(p.reason), \
        (p.reason, what)
    assert p.ok or p.results == [], what


@pytest.mark.parametrize("seed", range(120))
def test_parse_console_fuzz(seed):
    """records.parse_console never raises; it says ok, or why not in one line."""
    data, what = _gen_console(seed)
    for form in (data, data.decode("latin-1")):
        p, problem = None, None
        try:
            p = records.parse_console(form)
        except Exception as exc:  # noqa: BLE001
            problem = escaped(exc, what)
        if problem:
            pytest.fail(problem, pytrace=False)
        _check_parsed(p, what)


def test_valid_base_consoles_parse():
    for wl in ("atomics", "rwlock"):
        p = records.parse_console(synth.console(base_records(wl, np.random.default_rng(0))))
        assert p.ok, p.reason

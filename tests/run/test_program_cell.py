"""`make bench-series` and `make bisect` take a program workload's cell as
CELL (run/ktree.py), judged on the program / in-boot reference ratio; a bad
program cell is refused in one line (tests/top/test_refusals.py)."""
from __future__ import annotations

import pytest

from qrwbench import vocab
from qrwbench.run import ktree

PROGRAMS = tuple(n for n, w in vocab.WORKLOAD_TABLE.items() if w.program)


@pytest.mark.parametrize("workload", PROGRAMS)
def test_a_program_cell_parses_and_is_judged_on_its_ratio(workload):
    own = vocab.workload(workload).own_params
    extra = "".join(f",{p}=20" for p in own)
    text = f"arm64/tcg/cortex-a57/acqrel/{workload}:reps=16,duration_ms=100{extra}/2"
    c = ktree.parse_cell(text)
    assert (c.arch, c.cpu, c.variant, c.workload, c.vcpus) == \
        ("arm64", "cortex-a57", "acqrel", workload, 2)
    assert c.params_dict() == {"reps": 16, "duration_ms": 100, **{p: 20 for p in own}}
    assert ktree.ratio_mode(c)
    assert ktree.parse_cell(ktree.cell_text(c)) == c

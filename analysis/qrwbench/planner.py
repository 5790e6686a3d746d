"""The stopping rule of `make bench`: which cells need another boot.

After the matrix's first ``boots`` boots per cell, `make bench` works in
rounds. Each round it judges every comparison of the runs so far
(:func:`qrwbench.stats.compare_cells`) and gives one more boot, interleaved
in a seeded random order, to every cell that some comparison needing more
precision drew on: a comparison needs more while its CI half-width is above
its target (``target_pct`` in-boot, ``kernel_target_pct`` for kernel builds)
or it could not be judged yet. A cell stops when every comparison it feeds
has reached its target ("target"), when it has had ``max_boots`` boots
("max_boots"), when two of its boots failed ("failures"), or when the
matrix's time budget ``budget_min`` would be exceeded by one more boot
("budget"). The reason is stored per cell (``store.save_plan``) and shown by
the report next to each comparison.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from . import stats

TARGET, MAX_BOOTS, FAILURES, BUDGET = "target", "max_boots", "failures", "budget"


@dataclass
class CellState:
    boots: int = 0            # boots scheduled (ok or failed)
    failed: int = 0
    ended_by: str = ""        # "" while the cell may get more boots


@dataclass
class Plan:
    target_pct: dict          # {"in-boot": x, "kernel": y}
    max_boots: int
    budget_s: float
    cells: dict = field(default_factory=dict)     # cell key -> CellState

    def state(self, key) -> CellState:
        return self.cells.setdefault(key, CellState())


def needs_more(c: stats.Comparison, target_pct: dict) -> bool:
    """True while a comparison's CI is wider than its level's target, or it
    could not be judged at all."""
    e = c.effect
    if e is None or not e.judged:
        return True
    return e.half_width_pct > target_pct[c.level]


def next_round(plan: Plan, cset: stats.ComparisonSet, run_cell: dict) -> list:
    """Cell keys to boot once more this round (sorted; the caller shuffles
    them and stops at the budget). ``run_cell``: run_id -> cell key of every
    run of the matrix so far. Cells that end now get their ``ended_by``."""
    wanting = set()
    for c in cset.comparisons:
        if needs_more(c, plan.target_pct):
            wanting |= {run_cell[r] for r in c.runs if r in run_cell}
    out = []
    for key, st in sorted(plan.cells.items()):
        if st.ended_by:
            continue
        if key not in wanting:
            st.ended_by = TARGET
        elif st.failed >= 2:
            st.ended_by = FAILURES
        elif st.boots >= plan.max_boots:
            st.ended_by = MAX_BOOTS
        else:
            out.append(key)
    return out


def ended_by_counts(plan: Plan) -> Counter:
    return Counter(st.ended_by or TARGET for st in plan.cells.values())


def comparison_ended_by(c: stats.Comparison, target_pct: dict, run_cell: dict,
                        cell_ended: dict) -> str:
    """What ended a comparison's measuring: "target" when its CI reached the
    target, else the stopping reason of a cell it drew on (budget, max_boots,
    failures; "" when unknown: runs not measured by a planned bench)."""
    if not needs_more(c, target_pct):
        return TARGET
    reasons = sorted({cell_ended.get(run_cell.get(r)) for r in c.runs} - {TARGET, None, ""})
    return reasons[0] if reasons else ""

"""The stopping rule of `make bench`: which cells need more boots, and how many.

After the matrix's first ``boots`` boots per cell, `make bench` works in
rounds. Each round it judges every comparison of the runs so far
(:func:`qrwbench.analysis.compare.compare_cells`). A comparison needs more
precision while its CI half-width is above its target (``target_pct``
in-boot, ``kernel_target_pct`` for kernel builds) or it could not be judged
yet.

How many boots a cell gets in a round comes from the measured widths: a
cell's interval narrows like 1/sqrt(boots) (the blocks of a boot are fixed,
and for the atomics the between-boot variance is about 0), so a cell whose
comparisons needing more have a median width w against target t wants
``boots * (w / t)^2`` boots in all, at most twice what it has per round and
at most ``max_boots``. Which cells get their boots when the time budget
cannot pay for all comes from the measured costs: cells are taken in the
order of the precision they buy per second, the sum of their comparisons'
weights (each level, in-boot and kernel builds, weighs 1 in all, shared by
its comparisons still needing more) over the mean wall time of one of their
boots, until the round's share of the budget is spent: at most
:data:`ROUND_SHARE` of what is left (or :data:`MIN_ROUND_S`, whichever is
more), so that the budget is spent in several shorter rounds, each planned
on the intervals of the one before, and a cheap cell that is still wide
gets 2, 4, 8, 16, 32 boots in as many rounds (issue 26: with each round
spending all that was left, a 30-minute bench had two rounds after the
first boots, and the cheap cortex-a57 2-vCPU shared cell ended at 8 boots
in runs Y1 and Y3, docs/validity.md). A comparison not yet judged
(inconclusive) weighs :data:`UNJUDGED_WEIGHT` times one judged but wider
than its target: a verdict is what the run is for, a narrower interval of a
verdict already given comes second (issue 26, run X2 in docs/validity.md:
both width targets met with room, 17 comparisons of one cell still
inconclusive when the budget ended it).

Comparisons that cannot say anything about a CPU (identical code, or
emulator-blind under TCG: the audits' labels, ``Comparison.settled``) keep
the boots of the first round, enough for the A/A control and for
"equivalent within +-m %" where it holds, and never ask for more: the time
goes to the distinguishable pairs and the kernel builds. A cell all of whose
comparisons are settled stops at once ("settled").

The calibration cells (an injected barrier, ``aa_inject_mb``) also get boots
while their barrier has not been found slower on a per-CPU line: the
calibration line needs that power whatever their comparisons' labels.

A cell stops when every comparison it feeds has reached its target
("target"), when it has had ``max_boots`` boots ("max_boots"), when two of
its boots failed ("failures"), or when the matrix's time budget
``budget_min`` leaves no room for one more of its boots ("budget"). The
reason is stored per cell (``store.save_plan``) and shown by the report next
to each comparison.
"""
from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from . import calibration, compare

TARGET, MAX_BOOTS, FAILURES, BUDGET = "target", "max_boots", "failures", "budget"
SETTLED = "settled"     # identical code or emulator-blind: more boots cannot help


@dataclass
class CellState:
    boots: int = 0            # boots scheduled (ok or failed)
    failed: int = 0
    ended_by: str = ""        # "" while the cell may get more boots
    boot_s: list = field(default_factory=list)    # wall time of each of its boots


@dataclass
class Plan:
    target_pct: dict          # {"in-boot": x, "kernel": y}
    max_boots: int
    budget_s: float
    cells: dict = field(default_factory=dict)     # cell key -> CellState

    def state(self, key) -> CellState:
        return self.cells.setdefault(key, CellState())

    def boot_cost(self, key) -> float:
        """What one more boot of a cell costs (s): the mean of its own boots,
        else of every cell's (1 s before any)."""
        own = self.state(key).boot_s
        known = own or [t for st in self.cells.values() for t in st.boot_s]
        return max(statistics.fmean(known) if known else 1.0, 1e-3)


def needs_more(c: compare.Comparison, target_pct: dict) -> bool:
    """True while a comparison's CI is wider than its level's target, or it
    could not be judged at all; never for a settled one (identical code,
    emulator-blind)."""
    if c.settled:
        return False
    e = c.effect
    if e is None or not e.judged:
        return True
    return e.half_width_pct > target_pct[c.level]


MAX_GROWTH = 2.0        # a round at most doubles a cell's boots
ROUND_SHARE = 0.5       # a round plans at most this share of the budget left ...
MIN_ROUND_S = 120.0     # ... or this much (s), whichever is more
UNJUDGED_WEIGHT = 4.0   # an inconclusive comparison weighs as much as 4 judged but wide


def weight(c: compare.Comparison) -> float:
    """What one comparison still needing more counts for in its level:
    1 when judged but wider than its target, UNJUDGED_WEIGHT when not judged
    (inconclusive, or no interval at all)."""
    return 1.0 if c.judged else UNJUDGED_WEIGHT


def missed_barrier_targets(aa: calibration.AAReport) -> set:
    """(arch, accel, cpu, vCPUs) of the targets where an injected barrier
    that can only add cost (calibration.calibrates) was not yet found slower."""
    return {(r.cell.arch, r.cell.accel, r.cell.cpu, r.cell.vcpus) for r in aa.results
            if r.counted and not r.detected}


def next_round(plan: Plan, cset: compare.ComparisonSet, run_cell: dict,
               remaining_s: float = math.inf, calibrating=()) -> list:
    """Cell keys to boot this round, a key once per boot it gets (sorted by
    value; the caller shuffles them). ``run_cell``: run_id -> cell key of
    every run of the matrix so far; ``remaining_s``: what is left of the
    time budget; ``calibrating``: keys of the calibration cells whose
    injected barrier was not yet found (missed_barrier_targets): they need
    more boots whatever their comparisons' labels, the calibration weighing
    1 like a level. Cells that end now get their ``ended_by``; with
    ``remaining_s=0`` every cell does (the budget for those that still need
    more), which is how `make bench` closes a round the budget cut short."""
    needing = [c for c in cset.comparisons if needs_more(c, plan.target_pct)]
    fed = defaultdict(list)         # cell key -> whether each comparison it feeds is settled
    for c in cset.comparisons:
        for key in {run_cell[r] for r in c.runs if r in run_cell}:
            fed[key].append(c.settled)
    per_level = defaultdict(float)
    for c in needing:
        per_level[c.level] += weight(c)
    factors, value = defaultdict(list), defaultdict(float)
    for c in needing:
        has_ci = c.effect is not None and c.effect.judged     # an interval, not a verdict
        # no interval yet: it wants the most one round gives
        f = ((c.effect.half_width_pct / plan.target_pct[c.level]) ** 2 if has_ci
             else MAX_GROWTH ** 2)
        for key in {run_cell[r] for r in c.runs if r in run_cell}:
            factors[key].append(f)
            value[key] += weight(c) / per_level[c.level]
    for key in calibrating:
        factors[key].append(MAX_GROWTH ** 2)
        value[key] += 1.0 / len(calibrating)
    offers = []
    for key, st in sorted(plan.cells.items()):
        if st.ended_by:
            continue
        if key not in factors:
            st.ended_by = SETTLED if fed.get(key) and all(fed[key]) else TARGET
        elif st.failed >= 2:
            st.ended_by = FAILURES
        elif st.boots >= plan.max_boots:
            st.ended_by = MAX_BOOTS
        else:
            grow = min(max(statistics.median(factors[key]), 1.0), MAX_GROWTH)
            n = max(1, min(plan.max_boots - st.boots, math.ceil(st.boots * grow) - st.boots))
            cost = plan.boot_cost(key)
            offers.append((-value[key] / cost, key, n, cost))
    offers.sort()
    out = _spend(offers, min(remaining_s, max(remaining_s * ROUND_SHARE, MIN_ROUND_S)))
    if not out:         # a round's share buys none of the boots: what is left may
        out = _spend(offers, remaining_s)
    if offers and not out:
        for _, key, _, _ in offers:
            plan.cells[key].ended_by = BUDGET
    return out


def _spend(offers: list, budget_s: float) -> list:
    """The keys ``offers`` (sorted best first: (-value per s, key, boots
    wanted, cost of one)) get for ``budget_s`` seconds, a key per boot."""
    out, left = [], budget_s
    for _, key, n, cost in offers:
        k = n if math.isinf(left) else min(n, int(left // cost))
        if k > 0:
            out += [key] * k
            left -= k * cost
    return out


def ended_by_counts(plan: Plan) -> Counter:
    return Counter(st.ended_by or TARGET for st in plan.cells.values())


def comparison_ended_by(c: compare.Comparison, target_pct: dict, run_cell: dict,
                        cell_ended: dict) -> str:
    """What ended a comparison's measuring: "target" when its CI reached the
    target, else the stopping reason of a cell it drew on (budget, max_boots,
    failures; "" when unknown: runs not measured by a planned bench)."""
    if c.settled:
        return SETTLED
    if not needs_more(c, target_pct):
        return TARGET
    reasons = sorted({cell_ended.get(run_cell.get(r)) for r in c.runs} - {TARGET, None, ""})
    return reasons[0] if reasons else ""

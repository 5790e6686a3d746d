"""Where a bench's boots run: executors, behind one interface.

``make bench`` (bench.run_matrix) decides which boots to run: the matrix's
first boots, then the rounds of the stopping rule (analysis/planner.py). It
hands each batch of them to an executor, which decides only where and how
they run:

- :class:`Local`: here, one at a time (boot.boot_one);
- ``bench_remote.Remote``: as GNU parallel jobs on other hosts.

Whatever the executor, each boot goes the same way through the bench's
:class:`Progress`: claimed before it runs (its run id; a boot stored already
is skipped), its run directory written and imported into the store, then
recorded (ok or failed, its wall time for the planner). An executor reports
its progress lines itself, and says which boots of a round it left for the
time budget.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .. import matrix
from ..results import store
from . import boot


@dataclass
class Job:
    """A boot claimed to run: its boot of the matrix, run id and run directory."""
    boot: matrix.Boot
    run_id: str
    run_dir: Path


@dataclass
class Batch:
    """The boots an executor runs in one go: the matrix's first boots (round
    0: run whatever the time budget), or a round of the stopping rule's
    (within the budget; ``planned_at_s``: the bench's time spent when the
    round was planned)."""
    boots: list
    round: int = 0
    planned_at_s: float = 0.0

    @property
    def name(self) -> str:
        return f"round {self.round}" if self.round else "first boots"


class Progress:
    """A bench's boots so far: every boot claimed for its cell (``run_cell``:
    run id -> cell key), the runs ok, failed and skipped, the time spent and
    the ETA. ``plan`` is the stopping rule's (planner.Plan): its boot counts,
    failures and boot times are kept here."""

    def __init__(self, plan, conn, runs: Path, rig: dict, nonce: str = "",
                 fresh: bool = False, pin: bool = False):
        self.plan, self.conn, self.runs, self.rig = plan, conn, runs, rig
        self.nonce, self.fresh, self.pin = nonce, fresh, pin
        self.run_cell: dict[str, str] = {}
        self.done, self.skipped = 0, 0
        self.failures: list[tuple[str, str]] = []      # (run id, reason)
        self.host_loads: list[dict] = []                # status["host_load"] of each boot
        self.t0 = time.monotonic()

    def claim(self, b: matrix.Boot) -> Job | None:
        """Count boot b for its cell; its job, or None when it is stored."""
        rid = boot.run_id(b, self.rig, self.nonce, self.pin)
        self.plan.state(b.cell.key()).boots += 1
        self.run_cell[rid] = b.cell.key()
        if not self.fresh and store.has_run(self.conn, rid):
            self.skipped += 1
            return None
        return Job(b, rid, self.runs / rid)

    def record(self, job: Job, st: dict) -> None:
        """A claimed boot that ended, with its status (a failure is printed)."""
        state = self.plan.state(job.boot.cell.key())
        if st.get("wall_s"):
            state.boot_s.append(float(st["wall_s"]))
        self.host_loads.append(st.get("host_load") or {})
        if st["status"] == "ok":
            self.done += 1
        else:
            state.failed += 1
            self.failures.append((job.run_id, st["reason"]))
            print(f"  FAILED: {st['reason']}", flush=True)

    @property
    def measured(self) -> int:
        """Boots that ran (ok or failed)."""
        return self.done + len(self.failures)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.t0

    def eta(self, left: int) -> str:
        """`` ETA m:ss`` for ``left`` more boots at the mean so far ('' before any)."""
        if not self.measured:
            return ""
        s = int(self.elapsed_s() / self.measured * left)
        return f" ETA {s // 60}:{s % 60:02d}"

    def over_budget(self, cost_s: float) -> bool:
        """Whether what costs ``cost_s``, started now, ends past the time budget."""
        return self.elapsed_s() + cost_s > self.plan.budget_s


class Executor(Protocol):
    """Runs a bench's boots. bench.run_matrix calls :meth:`prepare` once,
    then :meth:`run` for the first boots and for each round."""

    def prepare(self, m: matrix.Matrix) -> dict:
        """Get ready to boot ``m``'s cells; {arch: KVM verdict} for the archs
        of its KVM targets ({"usable", "reason", "booted"}, as kvm.probe)."""

    @property
    def width(self) -> int:
        """How many boots it runs side by side (the time budget buys that many)."""

    def run(self, batch: Batch, progress: Progress) -> list:
        """Boot ``batch.boots`` in their order: each claimed (progress.claim;
        a stored one is skipped), its run directory written and imported,
        then recorded (progress.record). Returns the boots of a round it
        left unrun because the time budget could not pay for them."""


class Local:
    """Boots here, one at a time, each announced as it starts. The budget is
    checked before each boot of a round, against what a boot of that cell
    has cost so far."""

    width = 1

    def __init__(self):
        self.m: matrix.Matrix | None = None
        self.verdicts: dict = {}

    def prepare(self, m: matrix.Matrix) -> dict:
        """One KVM probe boot per arch of the matrix's KVM targets (cached)."""
        self.m = m
        archs = sorted({t["arch"] for t in m.targets if t["accel"] == "kvm"})
        self.verdicts = {a: boot.kvm_probe_one(a) for a in archs}
        return self.verdicts

    def run(self, batch: Batch, progress: Progress) -> list:
        m, n = self.m, len(batch.boots)
        for i, b in enumerate(batch.boots, 1):
            # the cell's own boots say what one more costs (run M: an atomics
            # boot 15-19 s, a rwlock one 3.3 s; on the mean over all boots it
            # overran the budget by 3 s)
            if batch.round and progress.over_budget(progress.plan.boot_cost(b.cell.key())):
                return batch.boots[i - 1:]
            job = progress.claim(b)
            if job is None:
                continue
            # the first boots' lines carry an ETA, a round's do not
            tag = f"round {batch.round} [{i}/{n}]" if batch.round else \
                f"[{i}/{n}]{progress.eta(n - i + 1)}"
            print(f"{tag} {b.cell.label()} boot {b.index + 1} "
                  f"(console: {job.run_dir / 'console.log'})", flush=True)
            st = boot.boot_one(b.cell, b.seed, job.run_dir, m.timeout_s, m.mem_mb,
                               self.verdicts.get(b.cell.arch, boot.NOT_ASKED), pin=m.pin)
            store.import_run(progress.conn, job.run_dir)
            progress.record(job, st)
        return []

"""`make bench`: run a matrix of guest boots and store what they measured.

    /usr/bin/python3 -m qrwbench bench [--matrix F | --quick] [--db PATH] [--fresh]

Each boot: QEMU boots a kernel build with its initramfs; the guest loads the
benchmark module with the cell's parameters and prints records; the console,
the exact QEMU command, provenance and a status are saved in build/runs/<id>/,
then the run is imported into the SQLite store (boot.py). Boots whose run
directory already holds a complete, imported run are skipped, so an
interrupted matrix resumes where it stopped (--fresh measures everything
again). After the first boots, rounds of the stopping rule (planner.py) add
boots where the comparisons need them. The boots run here or, with --hosts,
on other hosts: the same loop hands them to an executor (executor.py).
"""
from __future__ import annotations

import fcntl
import hashlib
import math
import os
import platform
import random
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from .. import matrix, vocab
from ..vocab import TOP, InputError
from ..cell import Cell
from ..results import store
from . import bench_remote, boot, hostload, provenance, qemu, remote
from .executor import Batch, Executor, Local, Progress

RUNS = Path(os.environ.get("QRWB_RUNS", vocab.BUILD / "runs"))


def preflight(db: Path, runs: Path) -> None:
    """Clear errors before any work: writable results and runs dirs, free space."""
    for d in (db.parent, runs):
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"cannot create {d}: {e.strerror}") from None
        probe = d / f".qrwbench-write-test-{os.getpid()}"
        try:
            probe.write_bytes(b"x")
            probe.unlink()
        except OSError as e:
            raise InputError(f"{d} is not writable: {e.strerror}") from None
        free = shutil.disk_usage(d).free
        if free < 200 << 20:
            raise InputError(f"only {free >> 20} MiB free under {d}: need at least 200 MiB")


def take_lock(runs: Path):
    """One bench at a time per runs directory (a second one refuses)."""
    lock = runs / ".bench.lock"
    f = open(lock, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        other = f.read().strip() or "?"
        raise InputError(f"another 'make bench' (pid {other}) is running on {runs}: wait for it to finish") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def on_signal(signum, frame):
    qemu.kill_all()
    print(f"\nbench: interrupted by {signal.Signals(signum).name}: QEMU killed; "
          "completed runs are stored, re-run to resume", file=sys.stderr)
    sys.exit(128 + signum)


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench bench`` (the parser is cli's)."""
    ap.add_argument("--matrix", default=None, help="matrix TOML (default bench/matrix/default.toml)")
    ap.add_argument("--quick", action="store_true", help="bench/matrix/quick.toml")
    ap.add_argument("--db", dest="db_sub", metavar="DB", default=None,
                    help="results DB (default $RESULTS_DB or results/qrwbench.sqlite)")
    ap.add_argument("--runs", default=str(RUNS), help="run directories (default build/runs)")
    ap.add_argument("--fresh", action="store_true", help="measure again cells that already have runs")
    ap.add_argument("--accel", default=None,
                    help="run every target under this accelerator (kvm: -cpu host, required; tcg: drop KVM targets)")
    ap.add_argument("--hosts", default=None, metavar="A,B",
                    help="boot on these ssh hosts with GNU parallel (docs/hosts.md)")
    ap.add_argument("--no-summary", action="store_true")
    ap.add_argument("--plan", action="store_true",
                    help="only check the input (matrix, accel, DB, runs dir) and print the "
                         "kernels the matrix needs (ARCH-VARIANT ...); nothing is booted")


def run(args) -> int:
    """``python3 -m qrwbench bench``: bad input raises InputError (cli.main
    prints it), an SQLite error names ``args.db``."""
    args.db = args.db or store.default_db_path()
    path = Path(args.matrix) if args.matrix else TOP / "bench" / "matrix" / ("quick.toml" if args.quick else "default.toml")
    m = matrix.load(path)
    executor = None if args.hosts is None else bench_remote.Remote(remote.parse_hosts(args.hosts))
    if args.accel:
        m = matrix.with_accel(m, args.accel)
    db, runs = Path(args.db), Path(args.runs)
    preflight(db, runs)
    store.connect(db).close()       # a damaged or foreign DB is refused now, not after the boots
    if args.plan:
        print(" ".join(kernels_needed(m)))
        return 0
    lock = take_lock(runs)
    try:
        return run_matrix(m, db, args.fresh, summary=not args.no_summary, runs=runs,
                          executor=executor)
    finally:
        lock.close()


def kernels_needed(m: matrix.Matrix) -> list[str]:
    """ARCH-VARIANT of every kernel the matrix boots, plus the kernel of the
    KVM probe (acqrel) of each KVM target this host could run."""
    need = {(c.arch, c.variant) for c in matrix.cells(m)}
    need |= {(t["arch"], "acqrel") for t in m.targets
             if t["accel"] == "kvm" and platform.machine() in vocab.ARCHES[t["arch"]].host_machine}
    return sorted(f"{a}-{v}" for a, v in need)


def runnable_cells(m: matrix.Matrix, verdicts: dict) -> list[Cell]:
    """The matrix's cells to boot, given the executor's KVM verdicts: an
    optional KVM target whose KVM is unusable is skipped (and said so),
    another is an error; every kernel must be built and take the cell's vCPUs."""
    skipped_targets = []

    def target_ok(t):
        if t["accel"] != "kvm":
            return True
        if verdicts[t["arch"]]["usable"]:
            return True
        if not t["optional"]:
            raise InputError(f"KVM asked for ({t['arch']}) but unusable: {verdicts[t['arch']]['reason']}")
        skipped_targets.append(t)
        return False

    cells = matrix.cells(m, target_ok)
    for t in skipped_targets:
        print(f"bench: skipping {t['arch']}/kvm: KVM unusable on this host: "
              f"{verdicts[t['arch']]['reason']}; using TCG only")
    for c in {(c.arch, c.variant) for c in cells}:
        boot.kernel_paths(*c)
    for c in cells:
        nr = vocab.nr_cpus(c.arch, c.variant)
        if nr is not None and c.vcpus > nr:
            raise InputError(f"{c.label()}: {c.vcpus} vCPUs exceed the kernel's NR_CPUS={nr}")
        vocab.check_kernel_needs(c.workload, c.arch, c.variant)
    return cells


def calibrating(cells: list[Cell], samples: list) -> list:
    """The calibration cells whose injected barrier was not found yet."""
    from ..analysis import calibration, planner
    missed = planner.missed_barrier_targets(calibration.aa_control(samples, boots=False))
    return sorted(c.key() for c in cells if c.params_dict().get("aa_inject_mb")
                  and (c.arch, c.accel, c.cpu, c.vcpus) in missed)


def round_boots(m: matrix.Matrix, plan, cells: list[Cell], keys: list) -> list[matrix.Boot]:
    """The boots of a round: a cell's next boots, one per time its key is in ``keys``."""
    by_key = {c.key(): c for c in cells}
    nth: Counter = Counter()
    out = []
    for key in keys:
        out.append(matrix.boot(m, by_key[key], plan.cells[key].boots + nth[key]))
        nth[key] += 1
    return out


def run_matrix(m: matrix.Matrix, db: Path, fresh: bool, summary: bool = True, runs: Path = RUNS,
               executor: Executor | None = None) -> int:
    """Boot the matrix's cells, then rounds of the stopping rule, on
    ``executor`` (default: here, executor.Local); store the plan, print the
    totals and (``summary``) the comparison. 1 when any boot failed."""
    # numpy and scipy only here: `--plan` runs before `make deps` installed them
    from ..analysis import compare, planner
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    executor = executor or Local()
    cells = runnable_cells(m, executor.prepare(m))
    # what each comparison can show, before the plan (issue 26): the audits
    # run once per change of kernels, modules, QEMU or targets
    from . import audits
    audit = audits.ensure(cells)
    labels = {"identical": audit.is_identical if audit else None,
              "blind": audit.is_blind if audit else None}
    boots = matrix.boots(m, cells)
    rig = provenance.rig_state()
    nonce = hashlib.sha256(str(time.time()).encode()).hexdigest()[:8] if fresh else ""
    conn = store.connect(db)
    plan = planner.Plan({"in-boot": m.target_pct, "kernel": m.kernel_target_pct},
                        m.max_boots, m.budget_min * 60.0 if m.budget_min else math.inf)
    progress = Progress(plan, conn, runs, rig, nonce, fresh, m.pin)
    if executor.width == 1:     # boots here (several hosts: each host's own load)
        print(f"bench: {hostload.now_line(cpus=vocab.host_cpus())}", flush=True)
    print(f"bench: {len(boots)} first boots of {len(cells)} cells from {m.path} "
          f"(rig {rig['rig_commit'][:12]}{'+dirty' if rig['rig_dirty'] else ''}); runs in {runs}"
          + (f"; then more boots per cell (up to {m.max_boots}) until the CIs reach "
             f"+-{m.target_pct:g} % in-boot and +-{m.kernel_target_pct:g} % kernel builds"
             + (f", within {m.budget_min} min" if m.budget_min else "")
             if m.max_boots > m.boots else ""))
    executor.run(Batch(boots), progress)
    rnd = 0
    over_budget = False
    while m.max_boots > m.boots and not over_budget:
        samples = store.load_samples(conn, run_ids=list(progress.run_cell))
        if not samples:
            break
        cset = compare.compare_cells(samples, n_resamples=300, seed=rnd, **labels)
        elapsed = progress.elapsed_s()
        # an executor runs `width` boots side by side: the budget buys that many at once
        keys = planner.next_round(plan, cset, progress.run_cell,
                                  (plan.budget_s - elapsed) * executor.width,
                                  calibrating=calibrating(cells, samples))
        if not keys:
            break
        rnd += 1
        random.Random(f"{m.seed}:{rnd}").shuffle(keys)
        print(f"bench: round {rnd}: {len(keys)} boots for {len(set(keys))} cells "
              f"({cset.summary_line()}); {elapsed / 60:.1f} min spent"
              + (f" of {m.budget_min}" if m.budget_min else ""), flush=True)
        left = executor.run(Batch(round_boots(m, plan, cells, keys), rnd, elapsed), progress)
        for b in left:
            plan.cells[b.cell.key()].ended_by = planner.BUDGET
        over_budget = bool(left)
    if m.max_boots > m.boots and any(not st.ended_by for st in plan.cells.values()):
        # the budget ended a round part-way: a round with nothing left to
        # spend gives every cell still without a reason its own
        samples = store.load_samples(conn, run_ids=list(progress.run_cell))
        if samples:
            planner.next_round(plan, compare.compare_cells(samples, n_resamples=300, seed=rnd,
                                                         **labels),
                               progress.run_cell, remaining_s=0,
                               calibrating=calibrating(cells, samples))
    ends = planner.ended_by_counts(plan)
    store.save_plan(conn, rig["rig_commit"],
                    {k: (st.boots, st.failed, st.ended_by or planner.TARGET)
                     for k, st in plan.cells.items()})
    print(f"bench: {progress.done} runs ok, {len(progress.failures)} failed, "
          f"{progress.skipped} already done in {progress.elapsed_s():.0f} s; results in {db}")
    if m.max_boots > m.boots:
        print("bench: cells ended by " + ", ".join(f"{k} {n}" for k, n in sorted(ends.items())))
    for rid, why in progress.failures:
        print(f"  failed: {rid}: {why}")
    if progress.measured:       # what the summary lines below were measured beside
        from ..analysis import hostload as loads
        print(f"bench: {loads.summary_line(progress.host_loads)}")
    if summary:
        from ..report import report
        try:
            print(report.compare_text(conn, commit="all", run_ids=list(progress.run_cell),
                                      plan_commit=rig["rig_commit"],
                                      audit_path=audit.path if audit else None))
        except InputError as e:
            print(f"bench: no comparison: {e}")
    return 1 if progress.failures else 0

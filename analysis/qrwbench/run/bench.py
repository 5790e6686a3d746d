"""`make bench`: run a matrix of guest boots and store what they measured.

    /usr/bin/python3 -m qrwbench bench [--matrix F | --quick] [--db PATH] [--fresh]

Each boot: QEMU boots a kernel build with its initramfs; the guest loads the
benchmark module with the cell's parameters and prints records; the console,
the exact QEMU command, provenance and a status are saved in build/runs/<id>/,
then the run is imported into the SQLite store. Boots whose run directory
already holds a complete, imported run are skipped, so an interrupted matrix
resumes where it stopped (--fresh measures everything again).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import platform
import random
import shlex
import shutil
import signal
import sys
import time
from collections import Counter
from pathlib import Path

from .. import matrix, outputs, vocab
from ..vocab import TOP, InputError
from ..cell import Cell
from ..results import rundir, store
from . import kvm, perf, provenance, qemu
from . import pin as pinmod

RUNS = Path(os.environ.get("QRWB_RUNS", vocab.BUILD / "runs"))


def kernel_paths(arch: str, variant: str) -> tuple[Path, Path, Path, Path]:
    """(kernel image, initrd, kernel build dir, source tree) of a cell, checked to exist."""
    kdir = vocab.kernel_dir(arch, variant)
    image = kdir / vocab.ARCHES[arch].image
    initrd = vocab.initrd(arch, variant)
    if not (kdir / ".qrwbench-built").exists() or not image.exists():
        raise InputError(f"kernel {arch}-{variant} is not built: run 'make kernel ARCH={arch} VARIANT={variant}'")
    if not initrd.exists():
        raise InputError(f"initramfs {initrd} is missing: run 'make guests'")
    return image, initrd, kdir, vocab.kernel_src(variant)


def cell_provenance(cell: Cell) -> dict:
    """The ``cell`` entry of a run's provenance.json (local and remote boots)."""
    return {"arch": cell.arch, "accel": cell.accel, "cpu_model": cell.cpu,
            "vcpus": cell.vcpus, "kernel_variant": cell.variant,
            "workload": cell.workload, "params": cell.params_dict()}


def append_for(cell: Cell, seed: int) -> str:
    params = {"workload": cell.workload, "seed": seed, **cell.params_dict()}
    return " ".join(f"qrwbench.{k}={v}" for k, v in params.items())


def run_id(boot: matrix.Boot, rig: dict, nonce: str, pin: bool = False) -> str:
    """Stable per cell, boot, seed and rig state (so a re-run resumes); a pinned
    boot is another run than an unpinned one."""
    c = boot.cell
    ident = [c.key(), boot.index, boot.seed, rig["rig_commit"], rig["rig_diff_sha256"], nonce]
    h = hashlib.sha256(json.dumps(ident + (["pinned"] if pin else [])).encode()).hexdigest()[:12]
    wp = c.params_dict().get("write_pct")
    return (f"{h}-{c.arch}-{c.accel}-{c.cpu}-{c.variant}-{c.workload}"
            f"{'' if wp is None else f'-w{wp}'}-{c.vcpus}v-b{boot.index}")


def qemu_cmd(cell: Cell, seed: int, mem_mb: int, image, initrd, **host) -> list[str]:
    """The QEMU command line of one boot of ``cell``: what ``make bench`` runs
    here, and what ``make kvm-nested`` runs inside its L1 guest (``host``:
    that QEMU's binary, qemu.command's keywords)."""
    return qemu.command(cell.arch, cell.accel, cell.cpu, cell.vcpus, mem_mb, image, initrd,
                        append_for(cell, seed), **host)


def boot_one(cell: Cell, seed: int, run_dir: Path, timeout_s: int, mem_mb: int,
             kvm_probe: dict, extra: dict | None = None, kernel: tuple | None = None,
             pin: bool = False, wrap: list[str] | None = None) -> dict:
    """Boot one guest for `cell`, save everything in run_dir; return the status.

    `kernel` is (image, initrd, build dir, source tree); default: the rig's
    own build of the cell's arch and variant (kernel_paths). ``pin``: bind
    vCPU n to host CPU n mod the usable CPUs (pin.py; status["pinning"]).
    ``wrap``: run QEMU under this command prefix instead of perf stat
    (make perf: perf record)."""
    image, initrd, kdir, src = kernel or kernel_paths(cell.arch, cell.variant)
    cmd = qemu_cmd(cell, seed, mem_mb, image, initrd)
    pin_plan = pinmod.plan(cell.vcpus) if pin else None
    outputs.fresh_dir(run_dir, "run")       # an earlier run of ours there, or nothing
    prov = {"run_id": run_dir.name, "cell": cell_provenance(cell),
            **provenance.rig_state(), **provenance.kernel_state(kdir, src), **provenance.host_state(),
            "qemu_binary": cmd[0], "qemu_version": qemu.qemu_version(cmd[0]), "qemu_cmd": cmd,
            "accel": cell.accel, "cpu_model": cell.cpu, "kvm_probe": kvm_probe,
            "overcommitted": cell.vcpus > vocab.host_cpus(), "seed": seed,
            "pin_plan": pin_plan,
            "started_at": provenance.now(), **(extra or {})}
    (run_dir / "provenance.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    prefix, perf_note = (wrap, {"stat": "not run: QEMU ran under " + wrap[0] + " " + wrap[1]}) \
        if wrap else perf_prefix(cell, run_dir)
    status = qemu.boot(prefix + cmd, run_dir, timeout_s, pin=pin_plan)
    status["perf"] = collect_perf(run_dir, perf_note)
    if pin and not status.get("pinning", {}).get("pinned") and status["status"] == "ok":
        status.update(status="failed", reason=f"asked to pin vCPUs: {status['pinning']['reason']}")
    prov["finished_at"] = provenance.now()
    prov["qemu_cmd"] = shlex.split((run_dir / "qemu.cmd").read_text())   # exactly what ran
    (run_dir / "provenance.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    return judge_and_write(run_dir, prov, status)


def judge_and_write(run_dir: Path, prov: dict, status: dict) -> dict:
    """A run's final status.json: the store's import rules decide, so `make
    bench` calls ok exactly the runs that become data (local and remote boots)."""
    text = (run_dir / "console.log").read_bytes()
    why, parsed = rundir.judge_run(prov, {"status": "ok"}, text)
    if status["status"] == "ok" and why:
        status.update(status="failed", reason=why)
    if status["status"] == "failed":
        status["console_tail"] = text[-2000:].decode("ascii", "replace").splitlines()[-15:]
        if parsed.refused_reason:
            status["refused_reason"] = parsed.refused_reason
    qemu.write_status(run_dir, status)
    return status


def perf_prefix(cell: Cell, run_dir: Path) -> tuple[list[str], dict]:
    """The perf commands to run QEMU under, and why any is missing. `perf stat`
    for every run unless QRWB_PERF=0; with KVM also `perf kvm stat record`."""
    if os.environ.get("QRWB_PERF", "1") == "0":
        return [], {"stat": "off (QRWB_PERF=0)"}
    prefix, note = [], {}
    ok, why = perf.usable("stat")
    if ok:
        prefix += perf.stat_prefix(run_dir / "perf.csv")
    else:
        note["stat"] = why
    if cell.accel == "kvm":
        ok, why = perf.usable("kvm")
        if ok:
            prefix += perf.kvm_stat_prefix(run_dir / "perf-kvm.data")
        else:
            note["kvm_stat"] = why
    else:
        note["kvm_stat"] = "not a KVM run"
    return prefix, note


def collect_perf(run_dir: Path, note: dict) -> dict:
    """{"stat": {event: ...} | None, "kvm_stat": {...} | None, "why": {...}}:
    what perf counted for the run (stored with it, shown in the report)."""
    out = {"stat": None, "kvm_stat": None, "why": dict(note)}
    csv = run_dir / "perf.csv"
    if csv.exists():
        try:
            out["stat"] = perf.parse_stat_csv(csv.read_text())
        except ValueError as e:
            out["why"]["stat"] = str(e)
    data = run_dir / "perf-kvm.data"
    if data.exists():
        import subprocess
        rep = subprocess.run(perf.kvm_stat_report_cmd(data), capture_output=True, text=True, check=False)
        (run_dir / "perf-kvm.txt").write_text(rep.stdout + rep.stderr)
        try:
            out["kvm_stat"] = perf.parse_kvm_stat_report(rep.stdout + rep.stderr)
        except ValueError as e:
            out["why"]["kvm_stat"] = str(e)
        data.unlink()       # the text report is kept; the raw trace can be large
    return out


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


def _on_signal(signum, frame):
    qemu.kill_all()
    print(f"\nbench: interrupted by {signal.Signals(signum).name}: QEMU killed; "
          "completed runs are stored, re-run to resume", file=sys.stderr)
    sys.exit(128 + signum)


NOT_ASKED = {"usable": False, "reason": "not asked for", "booted": False}


def probe_cell(arch: str, variant: str = "acqrel") -> Cell:
    """The KVM probe's boot: the rig's own guest, one vCPU, an empty loop."""
    return Cell.boot(arch, "kvm", vocab.ARCHES[arch].kvm_cpu, variant, "atomics", 1,
                     {"duration_ms": 1, "ops": "empty", "reps": 1})


def probe_boot_verdict(st: dict) -> tuple[bool, str]:
    """(booted, why not) of a probe boot's status (judge_and_write's)."""
    tail = [l for l in st.get("console_tail", []) if "error" in l.lower()]
    return st["status"] == "ok", st.get("reason", "") + (f" ({tail[0].strip()})" if tail else "")


def kvm_probe_one(arch: str, variant: str = "acqrel") -> dict:
    """KVM verdict for ``arch`` guests: the static check, then one real boot of
    the rig's own guest (cached, kvm.probe)."""
    if platform.machine() not in vocab.ARCHES[arch].host_machine:
        return {"usable": False, "reason": kvm.static_check(arch)[1], "booted": False}

    def probe_boot():
        d = vocab.BUILD / f"kvm-probe-run-{arch}"
        st = boot_one(probe_cell(arch, variant), 1, d, 60, 256, {"usable": None, "reason": "probing"})
        return probe_boot_verdict(st)

    try:
        image = kernel_paths(arch, variant)[0]
    except InputError as e:
        return {"usable": False, "reason": str(e), "booted": False}
    return kvm.probe(arch, boot=probe_boot, kernel=image,
                     cache=kvm.CACHE.with_name(f"kvm-probe-{arch}.json"))


def kvm_verdict(m: matrix.Matrix) -> dict:
    """{arch: verdict} for the archs of the matrix's KVM targets (one probe boot each)."""
    archs = sorted({t["arch"] for t in m.targets if t["accel"] == "kvm"})
    return {a: kvm_probe_one(a) for a in archs}


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
                    help="boot on these ssh hosts with GNU parallel (README: Several hosts)")
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
    hosts = None
    if args.hosts is not None:
        from . import remote
        hosts = remote.parse_hosts(args.hosts)
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
                          hosts=hosts)
    finally:
        lock.close()


def kernels_needed(m: matrix.Matrix) -> list[str]:
    """ARCH-VARIANT of every kernel the matrix boots, plus the kernel of the
    KVM probe (acqrel) of each KVM target this host could run."""
    need = {(c.arch, c.variant) for c in matrix.cells(m)}
    need |= {(t["arch"], "acqrel") for t in m.targets
             if t["accel"] == "kvm" and platform.machine() in vocab.ARCHES[t["arch"]].host_machine}
    return sorted(f"{a}-{v}" for a, v in need)


def run_matrix(m: matrix.Matrix, db: Path, fresh: bool, summary: bool = True, runs: Path = RUNS,
               hosts: list[str] | None = None) -> int:
    # numpy and scipy only here: `--plan` runs before `make deps` installed them
    from ..analysis import planner, stats
    from . import bench_remote
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    farm = None
    if hosts:
        if m.pin:
            raise InputError("pin = true pins vCPUs on this host: not with HOSTS")
        farm = bench_remote.Hosts(hosts)
        # KVM per host: a host without it runs only the TCG cells
        verdicts = {}
        for arch in {t["arch"] for t in m.targets if t["accel"] == "kvm"}:
            why = [h.why_not_runnable(arch, "kvm") for h in farm.hosts]
            verdicts[arch] = {"usable": "" in why, "booted": False,
                              "reason": "; ".join(w for w in why if w) or "usable"}
    else:
        verdicts = kvm_verdict(m)
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
        kernel_paths(*c)
    for c in cells:
        nr = vocab.nr_cpus(c.arch, c.variant)
        if nr is not None and c.vcpus > nr:
            raise InputError(f"{c.label()}: {c.vcpus} vCPUs exceed the kernel's NR_CPUS={nr}")
    # what each comparison can show, before the plan (issue 26): the audits
    # run once per change of kernels, modules, QEMU or targets
    from . import audits
    audit = audits.ensure(cells)
    labels = {"identical": audit.is_identical if audit else None,
              "blind": audit.is_blind if audit else None}
    boots = matrix.boots(m, cells)

    def calibrating(samples) -> list:
        """The calibration cells whose injected barrier was not found yet."""
        missed = planner.missed_barrier_targets(stats.aa_control(samples, boots=False))
        return sorted(c.key() for c in cells if c.params_dict().get("aa_inject_mb")
                      and (c.arch, c.accel, c.cpu, c.vcpus) in missed)

    rig = provenance.rig_state()
    nonce = hashlib.sha256(str(time.time()).encode()).hexdigest()[:8] if fresh else ""
    conn = store.connect(db)
    plan = planner.Plan({"in-boot": m.target_pct, "kernel": m.kernel_target_pct},
                        m.max_boots, m.budget_min * 60.0 if m.budget_min else math.inf)
    by_key = {c.key(): c for c in cells}
    run_cell: dict = {}
    failures, done, skipped = [], 0, 0
    t0 = time.monotonic()
    print(f"bench: {len(boots)} first boots of {len(cells)} cells from {m.path} "
          f"(rig {rig['rig_commit'][:12]}{'+dirty' if rig['rig_dirty'] else ''}); runs in {runs}"
          + (f"; then more boots per cell (up to {m.max_boots}) until the CIs reach "
             f"+-{m.target_pct:g} % in-boot and +-{m.kernel_target_pct:g} % kernel builds"
             + (f", within {m.budget_min} min" if m.budget_min else "")
             if m.max_boots > m.boots else ""))

    def claim(b: matrix.Boot) -> str | None:
        """Count boot b for its cell; its run id, or None when it is stored."""
        nonlocal skipped
        rid = run_id(b, rig, nonce, m.pin)
        plan.state(b.cell.key()).boots += 1
        run_cell[rid] = b.cell.key()
        if not fresh and store.has_run(conn, rid):
            skipped += 1
            return None
        return rid

    def eta(left: int) -> str:
        measured = done + len(failures)
        if not measured:
            return ""
        s = int((time.monotonic() - t0) / measured * left)
        return f" ETA {s // 60}:{s % 60:02d}"

    def record(b: matrix.Boot, rid: str, st: dict) -> None:
        nonlocal done
        if st.get("wall_s"):
            plan.state(b.cell.key()).boot_s.append(float(st["wall_s"]))
        if st["status"] == "ok":
            done += 1
        else:
            plan.state(b.cell.key()).failed += 1
            failures.append((rid, st["reason"]))
            print(f"  FAILED: {st['reason']}", flush=True)

    def one(b: matrix.Boot, tag: str, left: int | None = None) -> None:
        """Boot b here (unless stored); ``left``: boots still to go, for the ETA."""
        rid = claim(b)
        if rid is None:
            return
        rdir = runs / rid
        print(f"{tag}{eta(left) if left is not None else ''} {b.cell.label()} boot "
              f"{b.index + 1} (console: {rdir / 'console.log'})", flush=True)
        st = boot_one(b.cell, b.seed, rdir, m.timeout_s, m.mem_mb,
                      verdicts.get(b.cell.arch, NOT_ASKED), pin=m.pin)
        store.import_run(conn, rdir)
        record(b, rid, st)

    def on_hosts(batch: list[matrix.Boot], tag: str) -> None:
        """The boots of ``batch`` as GNU parallel jobs on the hosts (bench_remote)."""
        todo = [(b, rid, tag) for b in batch if (rid := claim(b)) is not None]
        n = [0]

        def progress(b, rid, st):
            n[0] += 1
            record(b, rid, st)
            print(f"{tag} [{n[0]}/{len(todo)}]{eta(len(todo) - n[0])} {b.cell.label()} boot "
                  f"{b.index + 1} on {st.get('host', '-')}: {st['status']} "
                  f"(console: {runs / rid / 'console.log'})", flush=True)

        if todo:
            print(f"{tag}: {len(todo)} boots on {len(farm.hosts)} hosts "
                  f"(GNU parallel; its log: {runs / '.remote'})", flush=True)
            bench_remote.run_boots(farm, todo, m, runs, conn, rig, progress)

    if farm is not None:
        on_hosts(boots, "first boots")
    else:
        for i, b in enumerate(boots, 1):
            one(b, f"[{i}/{len(boots)}]", left=len(boots) - i + 1)
    rnd = 0
    over_budget = False
    while m.max_boots > m.boots and not over_budget:
        samples = store.load_samples(conn, run_ids=list(run_cell))
        if not samples:
            break
        cset = stats.compare_cells(samples, n_resamples=300, seed=rnd, **labels)
        elapsed = time.monotonic() - t0
        # hosts run boots side by side: the budget buys that many boots at once
        width = len([h for h in farm.hosts if h.ok]) if farm is not None else 1
        keys = planner.next_round(plan, cset, run_cell, (plan.budget_s - elapsed) * width,
                                  calibrating=calibrating(samples))
        if not keys:
            break
        rnd += 1
        random.Random(f"{m.seed}:{rnd}").shuffle(keys)
        per = elapsed / max(1, done + len(failures) + skipped)
        print(f"bench: round {rnd}: {len(keys)} boots for {len(set(keys))} cells "
              f"({cset.summary_line()}); {elapsed / 60:.1f} min spent"
              + (f" of {m.budget_min}" if m.budget_min else ""), flush=True)
        if farm is not None:
            # a round runs whole on the hosts; the budget is checked between rounds
            if time.monotonic() - t0 + per > plan.budget_s:
                over_budget = True
                for key in keys:
                    plan.cells[key].ended_by = planner.BUDGET
            else:
                nth = Counter()
                batch = []
                for key in keys:
                    batch.append(matrix.boot(m, by_key[key], plan.cells[key].boots + nth[key]))
                    nth[key] += 1
                on_hosts(batch, f"round {rnd}")
            continue
        for k, key in enumerate(keys, 1):
            # the cell's own boots say what one more costs (run M: an atomics
            # boot 15-19 s, a rwlock one 3.3 s; on the mean over all boots it
            # overran the budget by 3 s)
            over_budget = over_budget or \
                time.monotonic() - t0 + plan.boot_cost(key) > plan.budget_s
            if over_budget:
                plan.cells[key].ended_by = planner.BUDGET
            else:
                one(matrix.boot(m, by_key[key], plan.cells[key].boots),
                    f"round {rnd} [{k}/{len(keys)}]")
    if m.max_boots > m.boots and any(not st.ended_by for st in plan.cells.values()):
        # the budget ended a round part-way: a round with nothing left to
        # spend gives every cell still without a reason its own
        samples = store.load_samples(conn, run_ids=list(run_cell))
        if samples:
            planner.next_round(plan, stats.compare_cells(samples, n_resamples=300, seed=rnd,
                                                         **labels),
                               run_cell, remaining_s=0, calibrating=calibrating(samples))
    ends = planner.ended_by_counts(plan)
    store.save_plan(conn, rig["rig_commit"],
                    {k: (st.boots, st.failed, st.ended_by or planner.TARGET)
                     for k, st in plan.cells.items()})
    print(f"bench: {done} runs ok, {len(failures)} failed, {skipped} already done "
          f"in {time.monotonic() - t0:.0f} s; results in {db}")
    if m.max_boots > m.boots:
        print("bench: cells ended by " + ", ".join(f"{k} {n}" for k, n in sorted(ends.items())))
    for rid, why in failures:
        print(f"  failed: {rid}: {why}")
    if summary:
        from ..report import report
        try:
            print(report.compare_text(conn, commit="all", run_ids=list(run_cell),
                                      plan_commit=rig["rig_commit"],
                                      audit_path=audit.path if audit else None))
        except InputError as e:
            print(f"bench: no comparison: {e}")
    return 1 if failures else 0


"""No traceback for any input: what the seeded fuzzing of the host-side entry
points shares (one test file per entry point, test_fuzz_*.py).

Every generated bad input must either be accepted or end in a clean error:

* library entry points (``matrix.load``, ``ktree.parse_cell``,
  ``store.import_run``): a result, or :class:`QrwbenchError` with a non-empty
  one-line message; ``records.parse_console`` never raises at all;
* command lines (``python3 -m qrwbench ...``, ``bench`` included): exit status
  0/1/2, and for 2 exactly one ``qrwbench: error: ...`` line on stderr;
  ``SystemExit`` only from argparse, with status 2;

never any other exception, and nothing half-written: a refused import stores
nothing, a command that fails (and a read-only command at all) leaves the
results DB's bytes as they were, a failed report leaves no directory or
temporary files behind.

Every case is generated from a fixed seed (``random.Random``), so a failure
names a reproducible case; no timing thresholds, nothing skipped, no guests.

The entry points and their files: ``matrix.load`` and ``qrwbench bench``
(tests/top/test_fuzz_matrix.py), ``ktree.parse_cell``
(tests/run/test_fuzz_cell.py), ``records.parse_console``
(tests/results/test_fuzz_console.py), ``store.import_run``
(tests/results/test_fuzz_import.py), the commands that read a damaged results
DB (tests/results/test_fuzz_db.py), and bad arguments to report, compare,
regress and import (tests/top/test_fuzz_cli_args.py).
"""
from __future__ import annotations

import functools
import hashlib
import json
import random
import sqlite3
import traceback
from pathlib import Path

import numpy as np
import pytest

import synth
from conftest import TOP
from qrwbench.results import store
from qrwbench.report import report
from qrwbench.report import regress as regress_mod
from qrwbench.errors import QrwbenchError

PKG = TOP / "analysis" / "qrwbench"
FAST_RESAMPLES = 200        # bootstrap resamples in the CLI runs (speed only)


# ====================================================================== helpers

def short(what, limit=300) -> str:
    text = what if isinstance(what, str) else repr(what)
    text = text.encode("ascii", "backslashreplace").decode()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _where(exc: BaseException) -> str:
    """file:line of the qrwbench frame the exception escaped from (and of the
    frame outside qrwbench that raised it, when that is not ours)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if Path(f.filename).resolve().is_relative_to(PKG)]
    if not ours:
        f = frames[-1]
        return f"{Path(f.filename).name}:{f.lineno} ({f.name})"
    f = ours[-1]
    where = f"{f.filename[len(str(PKG)) + 1:]}:{f.lineno} ({f.name})"
    if frames[-1] is not f:
        g = frames[-1]
        where += f" -> {Path(g.filename).name}:{g.lineno} ({g.name})"
    return where


def escaped(exc: BaseException, what) -> str:
    return (f"{type(exc).__name__} escaped at {_where(exc)}: {short(str(exc), 200)}"
            f"\n  input: {short(what)}")


def one_line(msg: str) -> bool:
    return bool(msg.strip()) and "\n" not in msg and "\r" not in msg


def call_clean(fn, what, *args, **kw):
    """``(fn(*args), None)`` or ``(None, the QrwbenchError)``; any other
    exception, or a QrwbenchError that is not one line, fails the test."""
    try:
        return fn(*args, **kw), None
    except QrwbenchError as exc:
        if one_line(str(exc)):
            return None, exc
        problem = f"QrwbenchError message is not one line: {str(exc)!r}\n  input: {short(what)}"
    except Exception as exc:  # noqa: BLE001 - what this file is about
        problem = escaped(exc, what)
    pytest.fail(problem, pytrace=False)


def run_main(main, argv, capsys, what):
    """Run a command line's ``main(argv)``: (status, stdout, stderr), checked
    against the contract (0/1/2; 2 = one ``qrwbench: error:`` line)."""
    capsys.readouterr()
    problem = None
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
        if rc != 2:
            problem = (f"SystemExit({rc!r}) from main()\n  argv: {short(argv)}"
                       f"\n  stderr: {short(capsys.readouterr()[1])}\n  input: {short(what)}")
    except Exception as exc:  # noqa: BLE001
        problem = escaped(exc, f"argv {argv}; {what}")
    if problem:
        pytest.fail(problem, pytrace=False)
    out, err = capsys.readouterr()
    if type(rc) is not int or rc not in (0, 1, 2):
        pytest.fail(f"exit status {rc!r} (not 0/1/2)\n  argv: {short(argv)}"
                    f"\n  input: {short(what)}", pytrace=False)
    if rc == 2:
        prefix = "qrwbench: error: "
        if not (err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1
                and "\r" not in err and "Traceback" not in err):
            pytest.fail(f"status 2 but stderr is not one '{prefix}...' line: {short(err, 600)}"
                        f"\n  argv: {short(argv)}\n  input: {short(what)}", pytrace=False)
    return rc, out, err


def sha(path: Path) -> str | None:
    p = Path(path)
    if p.is_dir():
        return "dir:" + ",".join(sorted(x.name for x in p.iterdir()))
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None


@pytest.fixture
def fast_stats(monkeypatch):
    """The CLI's report/compare/regress with fewer bootstrap resamples (speed
    only: the code paths and their errors are the same)."""
    for mod, name in ((report, "build"), (report, "compare_text"), (regress_mod, "regress")):
        monkeypatch.setattr(mod, name, functools.partial(getattr(mod, name),
                                                         n_resamples=FAST_RESAMPLES))


# ================================================ guest consoles (and run directories)

BIG = [2 ** 63, 2 ** 63 - 1, 2 ** 64, 2 ** 64 + 1, 10 ** 30, 10 ** 400, -(2 ** 63) - 1]
REC_VALUES = BIG + [-1, 0, 1, True, None, "1", "", [], {}, [0] * 3, 1.5, "atomic_bogus_op",
                    "bogus", "\u00e9", "x" * 200, [[]] * 3]
RESULT_FIELDS = ["workload", "impl", "op", "variant", "copy", "placement", "rep", "order",
                 "threads", "ns", "ops", "per_thread_ops", "overhead_ps", "batch"]
RW_FIELDS = ["reads", "writes", "per_thread_reads", "per_thread_writes", "write_pct", "nlocks",
             "cs_work", "think_work", "cs_lines", "violations"]
BEGIN_FIELDS = ["arch", "kernel_variant", "kernel_release", "workload", "seed", "online_cpus",
                "threads", "params", "pmu", "schema", "type"]


def base_records(workload: str, nrng) -> list[dict]:
    if workload == "atomics":
        return [synth.begin(threads=2)] + synth.results(threads=2, reps=2, rng=nrng)
    recs = [synth.begin(workload="rwlock", threads=2)]
    mod = synth.results(workload="rwlock", impl="module", threads=2, reps=2, rng=nrng,
                        variants=("full", "acqrel"), copies=(0,))
    ker = synth.results(workload="rwlock", impl="kernel", threads=2, reps=2, rng=nrng,
                        copies=(0,), start_order=len(mod))
    return recs + mod + ker


def set_consistent_ops(rec: dict, total: int) -> None:
    """ops = total with the per-thread lists (and reads/writes) still adding up."""
    n = len(rec["per_thread_ops"])
    rec["ops"] = total
    rec["per_thread_ops"] = [total] + [0] * (n - 1)
    if rec["workload"] == "rwlock":
        rec.update(reads=total, writes=0, per_thread_reads=[total] + [0] * (n - 1),
                   per_thread_writes=[0] * n)


def mutate_records(recs: list[dict], rng: random.Random) -> list[str]:
    done = []
    results = recs[1:]
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["field", "field", "bigops", "bignum", "bignum", "op", "variant",
                           "begin", "pmu", "huge-list", "extra", "delete", "type", "deep"])
        r = rng.choice(results)
        if kind == "field":
            k = rng.choice(RESULT_FIELDS + (RW_FIELDS if r["workload"] == "rwlock" else []))
            r[k] = rng.choice(REC_VALUES)
            done.append(f"result[{r['order']}].{k}={short(r[k], 40)}")
        elif kind == "bigops":
            v = rng.choice(BIG[:-1])
            set_consistent_ops(r, v)
            done.append(f"result[{r['order']}].ops={v} (consistent)")
        elif kind == "bignum":
            k = rng.choice(["ns", "rep", "order", "overhead_ps", "batch"]
                           + (["violations", "nlocks", "cs_work", "think_work", "cs_lines"]
                              if r["workload"] == "rwlock" else []))
            r[k] = rng.choice(BIG[:-1])
            done.append(f"result[{r['order'] if k != 'order' else '?'}].{k}={r[k]}")
        elif kind == "op":
            name = rng.choice(["atomic_bogus_op", "z", "a" * 64, "rwlock", "smp_mb"])
            for x in results:
                x["op"] = name
            done.append(f"all ops={name}")
        elif kind == "variant":
            v = rng.choice(["bogus", "acqrel", "full", "unpatched", "acquire", "kernel"])
            r["variant"] = v
            done.append(f"result[{r['order']}].variant={v}")
        elif kind == "begin":
            k = rng.choice(BEGIN_FIELDS)
            v = rng.choice(REC_VALUES + [{"reps": 2 ** 70}, {"x": [1, [2]]}, {"Bad-Name": 1},
                                         {"ops": "a" * 300}])
            recs[0][k] = v
            done.append(f"begin.{k}={short(v, 40)}")
        elif kind == "pmu":
            recs[0]["pmu"] = {"cycles": True, "instructions": True}
            k = rng.choice(["cycles", "instructions"])
            r[k] = rng.choice(BIG[:-1] + [0, -1, 12345])
            done.append(f"pmu + result[{r['order']}].{k}={r[k]}")
        elif kind == "huge-list":
            n = rng.choice([0, 3, 300, 1000, 2000])
            r["threads"] = max(n, 1)
            r["per_thread_ops"] = [0] * n
            r["ops"] = 0
            done.append(f"result[{r['order']}] threads={n} with {n} zero per_thread_ops")
        elif kind == "extra":
            r[rng.choice(["zzz", "throughput", "ns ", "NS"])] = rng.choice(REC_VALUES)
            done.append("extra key")
        elif kind == "delete":
            k = rng.choice(RESULT_FIELDS)
            r.pop(k, None)
            done.append(f"result[{r['order']}] without {k}")
        elif kind == "type":
            r["type"] = rng.choice(["begin", "end", "error", "bogus", 1, None])
            done.append(f"result type={r['type']!r}")
        else:
            depth = rng.choice([50, 500, 900])
            r["per_thread_ops"] = json.loads("[" * depth + "]" * depth)
            done.append(f"per_thread_ops nested {depth} deep")
    return done


def mutate_console_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    kind = rng.choice(["truncate", "flip", "junk", "nul", "cr", "longline", "marker", "dup"])
    pos = rng.randrange(len(data))
    if kind == "truncate":
        return data[:pos], f"truncate@{pos}"
    if kind == "flip":
        return data[:pos] + bytes([rng.randrange(256)]) + data[pos + 1:], f"flip@{pos}"
    if kind == "junk":
        return data[:pos] + bytes(rng.randrange(256) for _ in range(40)) + data[pos:], f"junk@{pos}"
    if kind == "nul":
        return data.replace(b"\n", b"\n\x00", 1), "nul"
    if kind == "cr":
        return data.replace(b"\n", b"\r\n"), "crlf"
    if kind == "longline":
        return data[:pos] + b"y" * 70_000 + data[pos:], f"longline@{pos}"
    if kind == "marker":
        return data[:pos] + b"@@QRWB{}\n" + data[pos:], f"marker@{pos}"
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    return b"\n".join(lines[:i + 1] + lines[i:]), f"dupline{i}"


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


# =================================================== a valid results DB (fixture)

@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """A valid results DB: a git repo with commits c0 < c1 < c2, three atomics
    boots and one rwlock boot at c1 and at c2, and one failed run; plus a spare
    valid run directory to import."""
    tmp = tmp_path_factory.mktemp("golden")
    repo = tmp / "rig"
    shas = synth.empty_commits(repo, 3)
    db = tmp / "golden.sqlite"
    runs = tmp / "runs"
    for t, sha in enumerate(shas[1:], 1):
        for b in range(3):
            store.import_run(db, synth.atomics_run(
                runs, f"a{t}-{b}", reps=4, rig_commit=sha, kernel_src="/nonexistent/linux",
                started_at=f"2026-12-0{t}T00:0{b}:00Z", rng=np.random.default_rng(10 * t + b)))
        store.import_run(db, synth.rwlock_run(runs, f"rw{t}", write_pcts=(10,), reps=3,
                                              rig_commit=sha, started_at=f"2026-12-0{t}T01:00:00Z"))
    store.import_run(db, synth.write_run(runs, "failed-1", b"garbage\n", status="failed",
                                         reason="timed out", rig_commit=shas[2]))
    spare = synth.atomics_run(tmp / "spare", "spare-1", reps=3, rig_commit=shas[2])
    # the same bytes in every session, so that a seeded corruption hits the same data
    run_sql(db, "UPDATE runs SET imported_at = '2026-12-03T00:00:00Z'")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("VACUUM")
    conn.close()
    assert not Path(f"{db}-wal").exists()
    return {"db": db, "repo": repo, "shas": shas, "spare": spare, "tmp": tmp}


def run_sql(db: Path, *stmts) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        for s in stmts:
            conn.execute(s)
        conn.commit()
    finally:
        conn.close()

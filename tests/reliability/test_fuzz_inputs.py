"""No traceback for any input: seeded fuzzing of the host-side entry points.

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
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import random
import re
import shutil
import sqlite3
import subprocess
import tomllib
import traceback
from pathlib import Path

import numpy as np
import pytest

import synth
from qrwbench import cli, matrix
from qrwbench.results import records, store
from qrwbench.report import report
from qrwbench.run import ktree
from qrwbench.report import regress as regress_mod
from qrwbench.errors import QrwbenchError

TOP = Path(__file__).resolve().parents[2]
PKG = TOP / "analysis" / "qrwbench"
MATRIX_DIR = TOP / "bench" / "matrix"
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
               GIT_AUTHOR_DATE="2026-12-01T00:00:00Z", GIT_COMMITTER_DATE="2026-12-01T00:00:00Z",
               GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
FAST_RESAMPLES = 200        # bootstrap resamples in the CLI runs (speed only)


# ====================================================================== helpers

def _short(what, limit=300) -> str:
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


def _escaped(exc: BaseException, what) -> str:
    return (f"{type(exc).__name__} escaped at {_where(exc)}: {_short(str(exc), 200)}"
            f"\n  input: {_short(what)}")


def _one_line(msg: str) -> bool:
    return bool(msg.strip()) and "\n" not in msg and "\r" not in msg


def call_clean(fn, what, *args, **kw):
    """``(fn(*args), None)`` or ``(None, the QrwbenchError)``; any other
    exception, or a QrwbenchError that is not one line, fails the test."""
    try:
        return fn(*args, **kw), None
    except QrwbenchError as exc:
        if _one_line(str(exc)):
            return None, exc
        problem = f"QrwbenchError message is not one line: {str(exc)!r}\n  input: {_short(what)}"
    except Exception as exc:  # noqa: BLE001 - what this file is about
        problem = _escaped(exc, what)
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
            problem = (f"SystemExit({rc!r}) from main()\n  argv: {_short(argv)}"
                       f"\n  stderr: {_short(capsys.readouterr()[1])}\n  input: {_short(what)}")
    except Exception as exc:  # noqa: BLE001
        problem = _escaped(exc, f"argv {argv}; {what}")
    if problem:
        pytest.fail(problem, pytrace=False)
    out, err = capsys.readouterr()
    if type(rc) is not int or rc not in (0, 1, 2):
        pytest.fail(f"exit status {rc!r} (not 0/1/2)\n  argv: {_short(argv)}"
                    f"\n  input: {_short(what)}", pytrace=False)
    if rc == 2:
        prefix = "qrwbench: error: "
        if not (err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1
                and "\r" not in err and "Traceback" not in err):
            pytest.fail(f"status 2 but stderr is not one '{prefix}...' line: {_short(err, 600)}"
                        f"\n  argv: {_short(argv)}\n  input: {_short(what)}", pytrace=False)
    return rc, out, err


def _sha(path: Path) -> str | None:
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


# Values of the wrong type, size or alphabet, for any field.
NASTY = [5, 0, -1, -(2 ** 63), 2 ** 63, 2 ** 64, 2 ** 70, 10 ** 9, 1.5, -0.0,
         float("nan"), float("inf"), True, False, "", "x", "\u00fcn\u00efc\u00f8d\u00e9",
         "\u00b2", "\u0663", "\x00", "a\nb", "\u202e", " ", [], [[]], [1, [2]], [[1, 2]],
         ["x", 1], [2 ** 70], {}, {"a": 1}, {"name": "rwlock"}, [{"a": 1}]]


# =================================================================== matrix files

def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k, ensure_ascii=False)


def _toml_val(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_val(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def to_toml(doc: dict) -> str:
    """TOML text of ``doc``: tables and arrays of tables for the top level,
    inline values below (enough for matrix files)."""
    head, body = [], []
    for k, v in doc.items():
        if isinstance(v, dict):
            body.append(f"[{_toml_key(k)}]")
            body += [f"{_toml_key(a)} = {_toml_val(b)}" for a, b in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                body.append(f"[[{_toml_key(k)}]]")
                body += [f"{_toml_key(a)} = {_toml_val(b)}" for a, b in x.items()]
        else:
            head.append(f"{_toml_key(k)} = {_toml_val(v)}")
    return "\n".join(head + body) + "\n"


BASE_MATRICES = {p.name: tomllib.loads(p.read_text()) for p in sorted(MATRIX_DIR.glob("*.toml"))}
RUN_INTS = [0, 1, -5, 63, 64, 10 ** 9, 2 ** 63, 2 ** 70, -(2 ** 70)]
VCPU_LISTS = [[0], [1], [64], [65], [2 ** 63], [1.5], [True], [], [[2]], ["2"], [1, 1],
              list(range(1, 65)), [-1]]
PARAM_BAD = {"threads": [64, 4096, 4097, 3], "nreaders": [3, 64, 4096, 4097],
             "nwriters": [3, 64, 4096, 10 ** 9], "write_pct": [[], [[10]], 101, -1, [0, 100],
                                                               list(range(0, 101, 7))],
             "ops": ["atomic_bogus_op", "all,", ",", "ALL", "atomic_add_return,atomic_add_return",
                     "all,atomic_add_return", "\u00b2", "smp_mb;ls", ["smp_mb"]],
             "impl": ["KERNEL", "both", "", "kernel,module"], "placement": ["percpu,shared", 1],
             "seed": [1], "workload": ["rwlock"], "reps": [0, 10001, 2 ** 64, "8"],
             "duration_ms": [0, 60001, 1.0], "bogus_param": [1], "batch": [2 ** 24 + 1]}


def _mutate_matrix(doc: dict, rng: random.Random) -> list[str]:
    """Apply 1-3 random mutations to ``doc`` in place; their descriptions."""
    done = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["top", "top", "run", "run", "target", "target", "workload",
                           "workload", "vcpus", "params", "params", "params", "dup"])
        if kind == "top":
            k = rng.choice(["run", "target", "workload", "bogus"])
            how = rng.choice(["value", "delete", "wrap"])
            if how == "delete":
                doc.pop(k, None)
            elif how == "wrap" and k in doc:
                doc[k] = [doc[k]] if isinstance(doc[k], dict) else (
                    doc[k][0] if isinstance(doc[k], list) and doc[k] else {"x": doc[k]})
            else:
                doc[k] = rng.choice(NASTY)
            done.append(f"{k}:{how}={_short(doc.get(k), 60)}")
        elif kind == "run":
            run = doc.setdefault("run", {})
            if not isinstance(run, dict):
                continue
            k = rng.choice(list(matrix.RUN_KEYS) + ["bogus"])
            v = rng.choice(RUN_INTS + NASTY) if rng.random() < 0.7 else None
            if v is None:
                run.pop(k, None)
            else:
                run[k] = v
            done.append(f"run.{k}={_short(v, 60)}")
        elif kind in ("target", "workload", "vcpus", "params"):
            table = "target" if kind == "target" else "workload"
            rows = doc.get(table)
            if not isinstance(rows, list) or not rows:
                continue
            i = rng.randrange(len(rows))
            row = rows[i]
            if not isinstance(row, dict):
                continue
            if kind == "target":
                k = rng.choice(["arch", "accel", "cpu", "optional", "bogus"])
                v = rng.choice(NASTY + ["X86_64", "x86_64 ", "kvm", "host", "arm64", "max",
                                        "cortex-a57", "riscv64"])
            elif kind == "workload":
                k = rng.choice(["name", "variants", "max_vcpus", "params", "bogus"])
                v = rng.choice(NASTY + ["hang", "atomics", ["bogus"], ["acqrel", "acqrel"],
                                        ["unpatched"], [5], ["full", ["acqrel"]], 0, 64, 65])
            elif kind == "vcpus":
                k = rng.choice(["vcpus", "max_vcpus"])
                v = rng.choice(VCPU_LISTS) if k == "vcpus" else rng.choice(RUN_INTS)
                if rng.random() < 0.5:
                    row.pop("max_vcpus" if k == "vcpus" else "vcpus", None)
            else:
                params = row.setdefault("params", {})
                if not isinstance(params, dict):
                    continue
                pk = rng.choice(list(PARAM_BAD))
                pv = rng.choice(PARAM_BAD[pk] + ([rng.choice(NASTY)] if rng.random() < 0.3 else []))
                params[pk] = pv
                done.append(f"{table}[{i}].params.{pk}={_short(pv, 60)}")
                continue
            if rng.random() < 0.15:
                row.pop(k, None)
                done.append(f"{table}[{i}].{k}:delete")
            else:
                row[k] = v
                done.append(f"{table}[{i}].{k}={_short(v, 60)}")
        else:   # dup
            k = rng.choice(["target", "workload"])
            if isinstance(doc.get(k), list) and doc[k]:
                doc[k].append(json.loads(json.dumps(doc[k][0])) if isinstance(doc[k][0], dict)
                              else doc[k][0])
                done.append(f"{k}:dup")
    return done


def _mutate_text(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    kind = rng.choice(["truncate", "badutf8", "flip", "dupline", "bom", "crlf", "longline",
                       "nul", "eqeq"])
    if kind == "truncate":
        n = rng.randrange(len(data) + 1)
        return data[:n], f"truncate@{n}"
    pos = rng.randrange(len(data) + 1)
    if kind == "badutf8":
        junk = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xfe\xff", b"\x80\x80"])
        return data[:pos] + junk + data[pos:], f"badutf8@{pos}"
    if kind == "flip" and data:
        pos = min(pos, len(data) - 1)
        return data[:pos] + bytes([rng.randrange(256)]) + data[pos + 1:], f"flip@{pos}"
    if kind == "dupline":
        lines = data.split(b"\n")
        i = rng.randrange(len(lines))
        return b"\n".join(lines[:i + 1] + lines[i:]), f"dupline{i}"
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, "bom"
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n"), "crlf"
    if kind == "longline":
        return data + b"# " + b"x" * 200_000 + b"\n", "longline"
    if kind == "nul":
        return data[:pos] + b"\x00" + data[pos:], f"nul@{pos}"
    return data.replace(b"=", b"==", 1), "eqeq"


MATRIX_SEEDS = range(160)


def _gen_matrix(seed: int) -> tuple[bytes, str]:
    rng = random.Random(1000 + seed)
    name = rng.choice(sorted(BASE_MATRICES))
    doc = json.loads(json.dumps(BASE_MATRICES[name]))
    what = [name] + _mutate_matrix(doc, rng)
    data = to_toml(doc).encode("utf-8", "surrogatepass")
    if rng.random() < 0.25:
        data, how = _mutate_text(data, rng)
        what.append(how)
    return data, " ".join(what)


def _n_cells(m) -> int:
    n = 0
    for w in m.workloads:
        k = len(w["variants"]) * len(w["vcpus"])
        for v in w["params"].values():
            k *= len(v) if isinstance(v, list) else 1
        n += k
    return n * len(m.targets)


@pytest.mark.parametrize("seed", MATRIX_SEEDS)
def test_matrix_load_fuzz(tmp_path, seed):
    """matrix.load: a Matrix or a one-line QrwbenchError; an accepted matrix
    expands into cells, boots and CELL texts without an exception."""
    data, what = _gen_matrix(seed)
    path = tmp_path / "m.toml"
    path.write_bytes(data)
    m, err = call_clean(matrix.load, what, path)
    if err is not None:
        return
    assert isinstance(m, matrix.Matrix), what
    for accel in ("tcg", "kvm"):
        call_clean(matrix.with_accel, f"{what}; with_accel {accel}", m, accel)
    if _n_cells(m) <= 20_000:
        cells, _ = call_clean(matrix.cells, f"{what}; cells", m)
        if m.boots <= 100:
            call_clean(matrix.boots, f"{what}; boots", m, cells[:200])
        for c in cells[:50]:
            call_clean(ktree.parse_cell, f"{what}; CELL of a matrix cell", ktree.cell_text(c))


def _quick() -> dict:
    return json.loads(json.dumps(BASE_MATRICES["quick.toml"]))


def _edit(fn):
    def make():
        doc = _quick()
        fn(doc)
        return to_toml(doc).encode("utf-8", "surrogatepass")
    return make


def _w(i, **kw):
    return _edit(lambda d: d["workload"][i].update(kw))


def _p(i, **kw):
    return _edit(lambda d: d["workload"][i]["params"].update(kw))


_QUICK_TEXT = (MATRIX_DIR / "quick.toml").read_bytes()
NAMED_MATRICES = {
    "run = 5": _edit(lambda d: d.update(run=5)),
    "[[run]]": _edit(lambda d: d.update(run=[d["run"]])),
    "run = []": _edit(lambda d: d.update(run=[])),
    "target = 5": _edit(lambda d: d.update(target=5)),
    "target = 'x'": _edit(lambda d: d.update(target="x")),
    "[target] (a table)": _edit(lambda d: d.update(target=d["target"][0])),
    "target = [1, 2]": _edit(lambda d: d.update(target=[1, 2])),
    "workload = 'x'": _edit(lambda d: d.update(workload="x")),
    "[workload] (a table)": _edit(lambda d: d.update(workload=d["workload"][0])),
    "workload = [[1]]": _edit(lambda d: d.update(workload=[[1]])),
    "variants = []": _w(0, variants=[]),
    "variants = [[]]": _w(0, variants=[[]]),
    "variants = [['full']]": _w(0, variants=[["full"]]),
    "vcpus = []": _w(0, vcpus=[]),
    "vcpus = [[2]]": _w(0, vcpus=[[2]]),
    "vcpus = [2**70]": _w(0, vcpus=[2 ** 70]),
    "vcpus = [-2]": _w(0, vcpus=[-2]),
    "vcpus = [2.0]": _w(0, vcpus=[2.0]),
    "vcpus = [true]": _w(0, vcpus=[True]),
    "max_vcpus = 2**70": _edit(lambda d: (d["workload"][0].pop("vcpus"),
                                          d["workload"][0].update(max_vcpus=2 ** 70))),
    "name = 5": _w(0, name=5),
    "name non-ASCII": _w(0, name="rwl\u00f6ck"),
    "params = []": _w(0, params=[]),
    "write_pct = []": _p(0, write_pct=[]),
    "write_pct = [[10]]": _p(0, write_pct=[[10]]),
    "write_pct = 2**70": _p(0, write_pct=2 ** 70),
    "write_pct = -1": _p(0, write_pct=-1),
    "write_pct = 1.5": _p(0, write_pct=1.5),
    "write_pct = true": _p(0, write_pct=True),
    "reps = [] (atomics)": _p(1, reps=[]),
    "ops = []": _p(1, ops=[]),
    "ops = [['smp_mb']]": _p(1, ops=[["smp_mb"]]),
    "ops = 'atomic_bogus_op'": _p(1, ops="atomic_bogus_op"),
    "ops non-ASCII": _p(1, ops="smp_mb,\u00b2"),
    "threads > vcpus": _p(0, threads=64),
    "nreaders > vcpus": _p(0, nreaders=4096),
    "nwriters > vcpus": _p(0, nwriters=4096),
    "nreaders + nwriters > vcpus": _p(0, nreaders=2, nwriters=2),
    "params.bogus": _p(0, bogus=1),
    "params.seed": _p(0, seed=1),
    "run.mem_mb = 10**9": _edit(lambda d: d["run"].update(mem_mb=10 ** 9)),
    "run.mem_mb = 2**63": _edit(lambda d: d["run"].update(mem_mb=2 ** 63)),
    "run.mem_mb = 1": _edit(lambda d: d["run"].update(mem_mb=1)),
    "run.boots = 2**70": _edit(lambda d: d["run"].update(boots=2 ** 70)),
    "run.boots = -1": _edit(lambda d: d["run"].update(boots=-1)),
    "run.timeout_s = 1.5": _edit(lambda d: d["run"].update(timeout_s=1.5)),
    "run.seed = -2**70": _edit(lambda d: d["run"].update(seed=-(2 ** 70))),
    "run.pin = 1": _edit(lambda d: d["run"].update(pin=1)),
    "run.bogus": _edit(lambda d: d["run"].update(bogus=True)),
    "target.arch missing": _edit(lambda d: d["target"][0].pop("arch")),
    "target.arch = 5": _edit(lambda d: d["target"][0].update(arch=5)),
    "target.cpu = []": _edit(lambda d: d["target"][0].update(cpu=[])),
    "target.optional = 'yes'": _edit(lambda d: d["target"][0].update(optional="yes")),
    "workload.name missing": _edit(lambda d: d["workload"][0].pop("name")),
    "no [[workload]]": _edit(lambda d: d.pop("workload")),
    "unknown table": _edit(lambda d: d.update(bogus={"a": 1})),
    "invalid UTF-8": lambda: _QUICK_TEXT.replace(b"rwlock", b"rw\xff\xfelock", 1),
    "UTF-16": lambda: _QUICK_TEXT.decode().encode("utf-16"),
    "NUL byte": lambda: _QUICK_TEXT.replace(b"[run]", b"[run]\x00", 1),
    "truncated mid-string": lambda: _QUICK_TEXT[:_QUICK_TEXT.index(b'"x86_64"') + 4],
    "truncated mid-table": lambda: _QUICK_TEXT[:_QUICK_TEXT.index(b"[[workload]]") + 5],
    "empty file": lambda: b"",
}


@pytest.mark.parametrize("name", NAMED_MATRICES)
def test_matrix_load_named(tmp_path, name):
    """The matrix mutations of the issue, one each."""
    path = tmp_path / "m.toml"
    path.write_bytes(NAMED_MATRICES[name]())
    m, err = call_clean(matrix.load, name, path)
    if err is None and _n_cells(m) <= 20_000:
        call_clean(matrix.cells, f"{name}; cells", m)


BENCH_ACCELS = [None, "tcg", "kvm", "", "bogus", "KVM", "\u00e9", "tcg\n"]


@pytest.mark.parametrize("seed", range(40))
def test_bench_main_matrix_fuzz(tmp_path, capsys, monkeypatch, seed):
    """qrwbench bench with a bad matrix or --accel: status 2 and one 'qrwbench: error: ...'
    line (the boots themselves are stubbed out: no guest is started)."""
    from qrwbench.run import bench
    monkeypatch.setattr(bench, "preflight", lambda db, runs: None)
    monkeypatch.setattr(bench, "take_lock", lambda runs: open(os.devnull))
    monkeypatch.setattr(bench, "run_matrix", lambda *a, **kw: 0)
    data, what = _gen_matrix(5000 + seed)
    accel = BENCH_ACCELS[seed % len(BENCH_ACCELS)]
    path = tmp_path / "m.toml"
    path.write_bytes(data)
    argv = ["--matrix", str(path), "--db", str(tmp_path / "db.sqlite"),
            "--runs", str(tmp_path / "runs")] + ([] if accel is None else ["--accel", accel])
    rc, _, _ = run_main(cli.main, ["bench", *argv], capsys, what)
    assert rc in (0, 2), (rc, what)


# ====================================================================== CELL strings

BASE_CELLS = [
    "x86_64/tcg/max/acqrel/rwlock:impl=kernel,write_pct=0,reps=8,duration_ms=20/1",
    "arm64/tcg/cortex-a57/acqrel/atomics:ops=atomic_add_return,smp_mb/2",
    "x86_64/kvm/host/full/rwlock:write_pct=50,nlocks=4,cs_work=0/8",
    "arm64/tcg/max/relaxed/atomics:placement=percpu,reps=3/64",
    "x86_64/tcg/max/unpatched/rwlock/2",
]
CELL_CHARS = ["\u00b2", "\u0663", "\uff10", "\u00b9", "\u2070", "\x00", "/", ":", ",", "=", " ",
              "\n", "\u00e9", "\udcff", "-", "+", "_", "\t", "0", "9", "\u202e"]
CELL_FIELDS = ["", "\u00b2", "\u0663", "\uff13", "9" * 5000, "0" * 5000, "0", "-1", "+1", " 1",
               "1 ", "1_0", "0x10", "65", "64", str(2 ** 64), "\x00", "x86_64", "max", "acqrel",
               "rwlock:", "atomics:ops=", "rwlock:=", "rwlock::", "\u00e9"]
CELL_PARAMS = ["reps", "write_pct", "reps=", "=8", "reps=\u00b2", "reps=\u0663",
               "reps=" + "9" * 5000, "reps=" + "0" * 4400 + "1", "reps=-1", "reps=+1",
               "seed=1", "workload=rwlock", "threads=99999", "threads=4096", "nreaders=65",
               "nwriters=4096", "ops=all,atomic_bogus_op", "ops=,", "ops=all,,smp_mb",
               "impl=KERNEL", "impl=\u00e9", "placement=percpu,shared", "bogus=1",
               "reps=8,reps=8", "ops=smp_mb,ops=smp_mb", "batch=" + str(2 ** 64),
               "duration_ms=1.5", "write_pct=1e2", "x=\x00", "\u00b2=1", "=", ",,,"]


def _gen_cell(seed: int) -> str:
    rng = random.Random(2000 + seed)
    text = rng.choice(BASE_CELLS)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["char", "char", "insert", "delete", "field", "field", "param",
                           "param", "slashes"])
        if kind in ("char", "insert", "delete") and text:
            pos = rng.randrange(len(text))
            if kind == "char":
                text = text[:pos] + rng.choice(CELL_CHARS) + text[pos + 1:]
            elif kind == "insert":
                text = text[:pos] + rng.choice(CELL_CHARS) + text[pos:]
            else:
                text = text[:pos] + text[pos + 1:]
        elif kind == "field":
            parts = text.split("/")
            i = rng.randrange(len(parts))
            parts[i] = rng.choice(CELL_FIELDS)
            text = "/".join(parts)
        elif kind == "param":
            parts = text.split("/")
            if len(parts) >= 5:
                wl, _, p = parts[4].partition(":")
                plist = [x for x in p.split(",") if x] if p else []
                plist.insert(rng.randrange(len(plist) + 1), rng.choice(CELL_PARAMS))
                parts[4] = wl + ":" + ",".join(plist)
                text = "/".join(parts)
        else:
            text = rng.choice([text + "/", "/" + text, text.replace("/", "//", 1),
                               text.rsplit("/", 1)[0], text.replace("/", ":", 1)])
    return text


@pytest.mark.parametrize("seed", range(150))
def test_parse_cell_fuzz(seed):
    """ktree.parse_cell: a Cell or a one-line QrwbenchError; an accepted CELL
    prints (cell_text) as one that parses to the same cell."""
    text = _gen_cell(seed)
    cell, err = call_clean(ktree.parse_cell, text, text)
    if err is None:
        again, err2 = call_clean(ktree.parse_cell, f"cell_text of {text!r}", ktree.cell_text(cell))
        assert err2 is None and again == cell, (text, ktree.cell_text(cell), err2)


NAMED_CELLS = (
    [BASE_CELLS[0].rsplit("/", 1)[0] + "/" + f for f in CELL_FIELDS]
    + [f"x86_64/tcg/max/acqrel/rwlock:{p}/2" for p in CELL_PARAMS]
    + [f"arm64/tcg/cortex-a57/acqrel/atomics:{p}/1" for p in CELL_PARAMS if "=" in p]
    + ["", "/", "//////", "x86_64/tcg/max/acqrel/rwlock:/2", "\x00" * 6]
)


@pytest.mark.parametrize("text", NAMED_CELLS, ids=[_short(t, 50) for t in NAMED_CELLS])
def test_parse_cell_named(text):
    """Each bad VCPUS field and each bad parameter on an otherwise valid CELL."""
    cell, err = call_clean(ktree.parse_cell, text, text)
    if err is None:
        again, err2 = call_clean(ktree.parse_cell, f"cell_text of {text!r}", ktree.cell_text(cell))
        assert err2 is None and again == cell, (text, ktree.cell_text(cell), err2)


def test_base_cells_parse():
    for text in BASE_CELLS:
        assert ktree.parse_cell(text)


# ==================================================================== guest consoles

BIG = [2 ** 63, 2 ** 63 - 1, 2 ** 64, 2 ** 64 + 1, 10 ** 30, 10 ** 400, -(2 ** 63) - 1]
REC_VALUES = BIG + [-1, 0, 1, True, None, "1", "", [], {}, [0] * 3, 1.5, "atomic_bogus_op",
                    "bogus", "\u00e9", "x" * 200, [[]] * 3]
RESULT_FIELDS = ["workload", "impl", "op", "variant", "copy", "placement", "rep", "order",
                 "threads", "ns", "ops", "per_thread_ops", "overhead_ps", "batch"]
RW_FIELDS = ["reads", "writes", "per_thread_reads", "per_thread_writes", "write_pct", "nlocks",
             "cs_work", "think_work", "cs_lines", "violations"]
BEGIN_FIELDS = ["arch", "kernel_variant", "kernel_release", "workload", "seed", "online_cpus",
                "threads", "params", "pmu", "schema", "type"]


def _base_records(workload: str, nrng) -> list[dict]:
    if workload == "atomics":
        return [synth.begin(threads=2)] + synth.results(threads=2, reps=2, rng=nrng)
    recs = [synth.begin(workload="rwlock", threads=2)]
    mod = synth.results(workload="rwlock", impl="module", threads=2, reps=2, rng=nrng,
                        variants=("full", "acqrel"), copies=(0,))
    ker = synth.results(workload="rwlock", impl="kernel", threads=2, reps=2, rng=nrng,
                        copies=(0,), start_order=len(mod))
    return recs + mod + ker


def _set_consistent_ops(rec: dict, total: int) -> None:
    """ops = total with the per-thread lists (and reads/writes) still adding up."""
    n = len(rec["per_thread_ops"])
    rec["ops"] = total
    rec["per_thread_ops"] = [total] + [0] * (n - 1)
    if rec["workload"] == "rwlock":
        rec.update(reads=total, writes=0, per_thread_reads=[total] + [0] * (n - 1),
                   per_thread_writes=[0] * n)


def _mutate_records(recs: list[dict], rng: random.Random) -> list[str]:
    done = []
    results = recs[1:]
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["field", "field", "bigops", "bignum", "bignum", "op", "variant",
                           "begin", "pmu", "huge-list", "extra", "delete", "type", "deep"])
        r = rng.choice(results)
        if kind == "field":
            k = rng.choice(RESULT_FIELDS + (RW_FIELDS if r["workload"] == "rwlock" else []))
            r[k] = rng.choice(REC_VALUES)
            done.append(f"result[{r['order']}].{k}={_short(r[k], 40)}")
        elif kind == "bigops":
            v = rng.choice(BIG[:-1])
            _set_consistent_ops(r, v)
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
            done.append(f"begin.{k}={_short(v, 40)}")
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


def _mutate_console_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
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


def _gen_console(seed: int) -> tuple[bytes, str]:
    rng = random.Random(3000 + seed)
    workload = rng.choice(["atomics", "rwlock"])
    recs = _base_records(workload, np.random.default_rng(seed))
    what = [workload] + _mutate_records(recs, rng)
    data = synth.console(recs).encode()
    if rng.random() < 0.2:
        data, how = _mutate_console_bytes(data, rng)
        what.append(how)
    return data, " ".join(what)


def _check_parsed(p, what) -> None:
    assert isinstance(p, records.ParsedRun), what
    assert isinstance(p.ok, bool) and isinstance(p.reason, str) and _one_line(p.reason), \
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
            problem = _escaped(exc, what)
        if problem:
            pytest.fail(problem, pytrace=False)
        _check_parsed(p, what)


def test_valid_base_consoles_parse():
    for wl in ("atomics", "rwlock"):
        p = records.parse_console(synth.console(_base_records(wl, np.random.default_rng(0))))
        assert p.ok, p.reason


# --------------------------------------------------------------- run directories

def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _ops(v):
    return lambda recs: _set_consistent_ops(recs[1], v)


def _field(k, v, i=1):
    def f(recs):
        recs[i][k] = v
    return f


def _pmu(k, v):
    def f(recs):
        recs[0]["pmu"] = {"cycles": True, "instructions": True}
        recs[1][k] = v
    return f


def _all_ops(name):
    def f(recs):
        for r in recs[1:]:
            r["op"] = name
    return f


# name: (workload, record mutation or None, provenance edit or None, status edit or None)
NAMED_RUNS = {
    "ops=2**63": ("atomics", _ops(2 ** 63), None, None),
    "ops=2**64": ("atomics", _ops(2 ** 64), None, None),
    "ops=10**400": ("atomics", _ops(10 ** 400), None, None),
    "rwlock ops=2**63": ("rwlock", _ops(2 ** 63), None, None),
    "ns=2**63": ("atomics", _field("ns", 2 ** 63), None, None),
    "ns=10**400": ("atomics", _field("ns", 10 ** 400), None, None),
    "rep=2**63": ("atomics", _field("rep", 2 ** 63), None, None),
    "order=2**63": ("atomics", _field("order", 2 ** 63), None, None),
    "overhead_ps=2**63": ("atomics", _field("overhead_ps", 2 ** 63), None, None),
    "batch=2**63": ("atomics", _field("batch", 2 ** 63), None, None),
    "violations=2**63": ("rwlock", _field("violations", 2 ** 63), None, None),
    "nlocks=2**63": ("rwlock", _field("nlocks", 2 ** 63), None, None),
    "cycles=2**63": ("atomics", _pmu("cycles", 2 ** 63), None, None),
    "instructions=2**64": ("atomics", _pmu("instructions", 2 ** 64), None, None),
    "begin seed=2**64": ("atomics", _field("seed", 2 ** 64, 0), None, None),
    "begin params reps=2**70": ("atomics", _field("params", {"reps": 2 ** 70}, 0), None, None),
    "ops=0 everywhere": ("atomics", lambda recs: [_set_consistent_ops(r, 0) for r in recs[1:]],
                         None, None),
    "op=atomic_bogus_op": ("atomics", _all_ops("atomic_bogus_op"), None, None),
    "variant=bogus": ("atomics", _field("variant", "bogus"), None, None),
    "prov host_cpus=2**63": ("atomics", None, lambda p: p.update(host_cpus=2 ** 63), None),
    "prov cell vcpus=2**63": ("atomics", None, lambda p: p["cell"].update(vcpus=2 ** 63), None),
    "prov cell vcpus=-1": ("atomics", None, lambda p: p["cell"].update(vcpus=-1), None),
    "prov cell params 2**70": ("atomics", None,
                               lambda p: p["cell"].update(params={"reps": 2 ** 70}), None),
    "prov cell params list": ("atomics", None, lambda p: p["cell"].update(params=[1]), None),
    "prov kvm_probe list": ("atomics", None, lambda p: p.update(kvm_probe=[1, 2]), None),
    "prov rig_commit int": ("atomics", None, lambda p: p.update(rig_commit=2 ** 70), None),
    "prov rig_commit list": ("atomics", None, lambda p: p.update(rig_commit=["a" * 40]), None),
    "prov seed 2**70": ("atomics", None, lambda p: p.update(seed=2 ** 70), None),
    "prov started_at NaN": ("atomics", None, lambda p: p.update(started_at=float("nan")), None),
    "prov run_id unsafe": ("atomics", None, lambda p: p.update(run_id="../../x"), None),
    "prov run_id 2**70": ("atomics", None, lambda p: p.update(run_id=2 ** 70), None),
    "prov deep nesting": ("atomics", None, lambda p: p.update(junk="@DEEP@"), None),
    "status deep nesting": ("atomics", None, None, lambda s: s.update(junk="@DEEP@")),
    "status perf stat value 10**400": ("atomics", None, None, lambda s: s.update(
        perf={"stat": {"cycles": {"value": 10 ** 400, "unit": "", "supported": True}}})),
    "status perf stat value 2**70": ("atomics", None, None, lambda s: s.update(
        perf={"stat": {"cycles": {"value": 2 ** 70, "unit": "", "supported": True}}})),
    "status perf kvm samples 10**400": ("atomics", None, None, lambda s: s.update(
        perf={"kvm_stat": {"exits": {"HLT": {"samples": 10 ** 400}}}})),
    "status perf stat unit list": ("atomics", None, None, lambda s: s.update(
        perf={"stat": {"cycles": {"value": 1, "unit": [1], "supported": "yes"}}})),
    "status perf Infinity": ("atomics", None, None, lambda s: s.update(
        perf={"stat": {"cycles": {"value": float("inf"), "unit": "", "supported": 1}}})),
    "status pinning odd": ("atomics", None, None, lambda s: s.update(
        pinning={"pinned": {"x": 1}, "threads": 5})),
    "status failed reason newline": ("atomics", None, None, lambda s: s.update(
        status="failed", reason="line1\nline2\x00\u00e9")),
    "status ok reason 2**70": ("atomics", None, None, lambda s: s.update(reason=2 ** 70)),
    "status status list": ("atomics", None, None, lambda s: s.update(status=["ok"])),
}


def _write_run_dir(root: Path, run_id: str, console: bytes | None, prov_edit=None,
                   status_edit=None, workload="atomics") -> Path:
    d = synth.write_run(root, run_id, console, workload=workload, vcpus=2)
    if prov_edit:
        prov = json.loads((d / "provenance.json").read_text())
        prov_edit(prov)
        (d / "provenance.json").write_text(json.dumps(prov).replace(
            '"@DEEP@"', _nested(100_000)))
    if status_edit:
        st = json.loads((d / "status.json").read_text())
        status_edit(st)
        (d / "status.json").write_text(json.dumps(st).replace('"@DEEP@"', _nested(100_000)))
    return d


PROV_EDITS = [
    ("host_cpus", 2 ** 63), ("host_cpus", -1), ("host_cpus", "2"), ("kvm_probe", "x"),
    ("kvm_probe", {"usable": "maybe", "reason": [1]}), ("rig_dirty", "yes"),
    ("rig_commit", None), ("started_at", {"a": 1}), ("overcommitted", 2 ** 70),
    ("qemu_cmd", "x" * 100_000), ("seed", -(2 ** 70)), ("kernel_tree_commit", 5),
]
STATUS_EDITS = [
    ("perf", {"stat": {"cycles": {"value": 10 ** 400}}}), ("perf", {"stat": [1]}),
    ("perf", {"kvm_stat": {"exits": {"X": {"samples": 2 ** 70}}}}), ("perf", "x"),
    ("pinning", {"pinned": 2 ** 70}), ("pinning", [1]), ("returncode", 2 ** 70),
    ("perf", {"stat": {"": {"value": -1.5, "unit": None, "supported": None}}}),
]


def _gen_run(seed: int):
    """(workload, console bytes, provenance edit, status edit, description)."""
    rng = random.Random(4000 + seed)
    workload = rng.choice(["atomics", "rwlock"])
    recs = _base_records(workload, np.random.default_rng(seed))
    what = [workload]
    if rng.random() < 0.85:
        what += _mutate_records(recs, rng)
    data = synth.console(recs).encode()
    if rng.random() < 0.1:
        data, how = _mutate_console_bytes(data, rng)
        what.append(how)
    prov_edit = status_edit = None
    if rng.random() < 0.25:
        k, v = rng.choice(PROV_EDITS)
        prov_edit = lambda p, k=k, v=v: p.update({k: v})  # noqa: E731
        what.append(f"prov.{k}={_short(v, 40)}")
    if rng.random() < 0.25:
        k, v = rng.choice(STATUS_EDITS)
        status_edit = lambda s, k=k, v=v: s.update({k: v})  # noqa: E731
        what.append(f"status.{k}={_short(v, 40)}")
    return workload, data, prov_edit, status_edit, " ".join(what)


def _check_import(tmp_path, capsys, run_dir: Path, what: str) -> None:
    """import_run: an ImportResult matching what the DB holds, or a one-line
    QrwbenchError that stored nothing; an ok import then compares cleanly."""
    db = tmp_path / "results" / "qrwbench.sqlite"
    conn = store.connect(db)
    try:
        res, err = call_clean(store.import_run, what, conn, run_dir)
    finally:
        conn.close()
    raw = sqlite3.connect(db)
    try:
        rows = raw.execute("SELECT run_id, status, reason, (SELECT COUNT(*) FROM samples s "
                           "WHERE s.run_id = r.run_id) FROM runs r").fetchall()
    finally:
        raw.close()
    if err is not None:
        assert rows == [], f"refused import ({err}) stored {rows}; input: {what}"
        return
    assert isinstance(res, store.ImportResult), what
    assert [(r[0], r[1], r[3]) for r in rows] == [(res.run_id, res.status, res.samples)], \
        (rows, res, what)
    assert res.status in ("ok", "failed") and _one_line(res.reason), (res, what)
    if res.status == "failed":
        assert res.samples == 0, (res, what)
    else:
        run_main(cli.main, ["compare", "--db", str(db)], capsys, f"compare after import; {what}")


@pytest.mark.parametrize("name", sorted(NAMED_RUNS))
def test_import_run_named(tmp_path, capsys, fast_stats, name):
    """Hand-picked hostile runs (valid CRC, values no module prints)."""
    workload, rec_edit, prov_edit, status_edit = NAMED_RUNS[name]
    recs = _base_records(workload, np.random.default_rng(7))
    if rec_edit:
        rec_edit(recs)
    run = _write_run_dir(tmp_path / "runs", "r-named", synth.console(recs).encode(),
                         prov_edit, status_edit, workload=workload)
    _check_import(tmp_path, capsys, run, name)


@pytest.mark.parametrize("seed", range(80))
def test_import_run_fuzz(tmp_path, capsys, fast_stats, seed):
    workload, data, prov_edit, status_edit, what = _gen_run(seed)
    run = _write_run_dir(tmp_path / "runs", f"r-fuzz-{seed}", data, prov_edit, status_edit,
                         workload=workload)
    _check_import(tmp_path, capsys, run, what)


# ====================================================================== results DBs

@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """A valid results DB: a git repo with commits c0 < c1 < c2, three atomics
    boots and one rwlock boot at c1 and at c2, and one failed run; plus a spare
    valid run directory to import."""
    tmp = tmp_path_factory.mktemp("golden")
    repo = tmp / "rig"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=GIT_ENV)
    shas = []
    for i in range(3):
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m",
                        f"change {i}"], check=True, env=GIT_ENV)
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                                   env=GIT_ENV, capture_output=True, text=True).stdout.strip())
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
    _sql(db, "UPDATE runs SET imported_at = '2026-12-03T00:00:00Z'")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("VACUUM")
    conn.close()
    assert not Path(f"{db}-wal").exists()
    return {"db": db, "repo": repo, "shas": shas, "spare": spare, "tmp": tmp}


def _sql(db: Path, *stmts) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        for s in stmts:
            conn.execute(s)
        conn.commit()
    finally:
        conn.close()


def _page_size(data: bytes) -> int:
    n = int.from_bytes(data[16:18], "big")
    return 65536 if n == 1 else n or 4096


def corrupt(path: Path, kind: str, seed: int) -> None:
    """Damage the DB at ``path`` in the way ``kind`` names (seeded)."""
    rng = random.Random(seed)
    data = bytearray(path.read_bytes()) if path.is_file() else bytearray()
    ps = _page_size(data) if data else 4096
    if kind == "bytes":             # a few random bytes anywhere after the header
        for _ in range(rng.randint(1, 64)):
            data[rng.randrange(100, len(data))] = rng.randrange(256)
    elif kind == "page-random":     # one whole page of garbage
        p = rng.randrange(len(data) // ps)
        start = max(p * ps, 100)
        data[start:(p + 1) * ps] = bytes(rng.randrange(256) for _ in range((p + 1) * ps - start))
    elif kind == "page-zero":
        p = rng.randrange(1, len(data) // ps)
        data[p * ps:(p + 1) * ps] = bytes(ps)
    elif kind == "truncate":
        del data[rng.choice([0, 1, 50, 100, ps, 2 * ps + 17, rng.randrange(len(data))]):]
    elif kind == "header-zero":
        data[:100] = bytes(100)
    elif kind == "header-magic":
        data[:16] = b"SQLite format 4\x00"
    elif kind == "header-random":
        i = rng.randrange(16, 100)
        data[i] = rng.randrange(256)
    elif kind == "page-size":
        data[16:18] = rng.choice([b"\x00\x03", b"\xff\xff", b"\x02\x00", b"\x00\x00"])
    elif kind == "wal-garbage":     # a stray -wal file of garbage next to the DB
        Path(f"{path}-wal").write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
        return
    elif kind == "directory":
        path.unlink()
        path.mkdir()
        (path / "x").write_text("x")
        return
    elif kind == "unrelated":
        path.unlink()
        _sql(path, "CREATE TABLE t (a, b)", "INSERT INTO t VALUES (1, 2)")
        return
    elif kind == "empty-sqlite":
        path.unlink()
        _sql(path, "PRAGMA user_version = 1")
        return
    elif kind.startswith("sql:"):
        _sql(path, *SQL_CORRUPTIONS[kind[4:]])
        return
    else:
        raise AssertionError(kind)
    path.write_bytes(bytes(data))


SQL_CORRUPTIONS = {
    "schema-empty": ["DELETE FROM schema_version"],
    "schema-text": ["UPDATE schema_version SET version = 'abc'"],
    "schema-empty-text": ["UPDATE schema_version SET version = ''"],
    "schema-newer": ["UPDATE schema_version SET version = 99"],
    "schema-negative": ["UPDATE schema_version SET version = -5"],
    "schema-huge": ["UPDATE schema_version SET version = 9223372036854775807"],
    "schema-real": ["UPDATE schema_version SET version = 2.5"],
    "schema-blob": ["UPDATE schema_version SET version = x'00ff'"],
    "no-schema-table": ["DROP TABLE schema_version"],
    "no-runs-table": ["PRAGMA foreign_keys = OFF", "DROP TABLE runs"],
    "no-samples-table": ["DROP TABLE samples"],
    "no-run-perf-table": ["DROP TABLE run_perf"],
    "samples-ptops-not-json": ["UPDATE samples SET per_thread_ops = '[' WHERE id % 3 = 0"],
    "samples-throughput-text": ["UPDATE samples SET throughput = 'fast' WHERE id % 5 = 0"],
    "samples-throughput-inf": ["UPDATE samples SET throughput = 9e999 WHERE id % 5 = 0"],
    "samples-throughput-negative": ["UPDATE samples SET throughput = -5 WHERE id % 5 = 0"],
    "samples-ns-zero": ["UPDATE samples SET ns = 0, throughput = 0 WHERE id % 4 = 0"],
    "samples-variant-bogus": ["UPDATE samples SET variant = 'bogus' WHERE id % 2 = 0"],
    "runs-started-garbage": ["UPDATE runs SET started_at = x'ff00' WHERE rowid % 2 = 0"],
    "runs-cell-params-bad": ["UPDATE runs SET cell_params = '{'"],
    "runs-status-bogus": ["UPDATE runs SET status = 'weird' WHERE rowid % 2 = 0"],
    "orphan-samples": ["PRAGMA foreign_keys = OFF", "DELETE FROM runs WHERE rowid % 2 = 0"],
}

DB_CASES = (
    [("intact", 0)]
    + [("bytes", s) for s in range(6)]
    + [("page-random", s) for s in range(4)]
    + [("page-zero", s) for s in range(2)]
    + [("truncate", s) for s in range(4)]
    + [("header-zero", 0), ("header-magic", 0), ("header-random", 0), ("header-random", 1),
       ("page-size", 0), ("page-size", 1), ("wal-garbage", 0), ("directory", 0),
       ("unrelated", 0), ("empty-sqlite", 0)]
    + [(f"sql:{k}", 0) for k in SQL_CORRUPTIONS]
)
DB_COMMANDS = ("compare", "regress", "regress-history", "import")
REPORT_CASES = [("intact", 0), ("bytes", 1), ("page-random", 2), ("truncate", 3),
                ("sql:schema-empty", 0), ("sql:samples-ptops-not-json", 0),
                ("sql:samples-throughput-text", 0), ("sql:samples-ns-zero", 0),
                ("sql:orphan-samples", 0), ("directory", 0)]


def _db_copy(golden, tmp_path, kind, seed) -> Path:
    db = tmp_path / "db" / "results.sqlite"
    db.parent.mkdir()
    shutil.copyfile(golden["db"], db)
    if kind != "intact":
        corrupt(db, kind, seed)
    return db


def _argv(cmd, db, golden) -> list[str]:
    repo, shas = str(golden["repo"]), golden["shas"]
    return {"compare": ["compare", "--db", str(db)],
            "regress": ["regress", "--db", str(db), "--target", shas[2], "--repo", repo],
            "regress-history": ["regress", "--db", str(db), "--history", "--repo", repo],
            "import": ["import", "--db", str(db), str(golden["spare"])]}[cmd]


@pytest.mark.parametrize("cmd", DB_COMMANDS)
@pytest.mark.parametrize("kind,seed", DB_CASES, ids=[f"{k}-{s}" for k, s in DB_CASES])
def test_damaged_db(golden, tmp_path, capsys, monkeypatch, fast_stats, kind, seed, cmd):
    """compare / regress / import on a damaged results DB: status 0/1/2, one
    error line, and the DB untouched by a failed or read-only command."""
    monkeypatch.chdir(tmp_path)
    db = _db_copy(golden, tmp_path, kind, seed)
    before = _sha(db)
    rc, out, err = run_main(cli.main, _argv(cmd, db, golden), capsys, f"db {kind}/{seed} {cmd}")
    if kind == "intact":
        assert rc == 0 or (rc == 1 and cmd == "regress"), (rc, err)
    if rc == 2 or cmd != "import":
        assert _sha(db) == before, (f"{cmd} (status {rc}) changed the results DB {kind}/{seed}; "
                                    f"stderr: {err.strip()}")


@pytest.mark.parametrize("kind,seed", REPORT_CASES, ids=[f"{k}-{s}" for k, s in REPORT_CASES])
def test_damaged_db_report(golden, tmp_path, capsys, monkeypatch, fast_stats, kind, seed):
    """report on a damaged DB: status 0 with a complete report, or status 2,
    one error line, no report directory and no temporary files left."""
    monkeypatch.chdir(tmp_path)
    db = _db_copy(golden, tmp_path, kind, seed)
    before = _sha(db)
    parent = tmp_path / "out"
    parent.mkdir()
    out = parent / "report"
    rc, _, err = run_main(cli.main, ["report", "--db", str(db), "--out", str(out)], capsys,
                          f"report on db {kind}/{seed}")
    assert rc in (0, 2), rc
    assert _sha(db) == before, f"report (status {rc}) changed the results DB; stderr: {err}"
    left = sorted(p.name for p in parent.iterdir() if not p.name.endswith(".qrwbench-lock"))
    if rc == 0:
        assert (out / "index.html").is_file() and (out / "report.md").is_file()
        assert left == ["report"], left
    else:
        assert left == [], f"failed report left {left} in the output directory"
    if kind == "intact":
        assert rc == 0, err


# ==================================================================== CLI arguments

# (subcommand args after the DB), with {repo} {c1} {c2} {file} {dir} {userdir} {out}
# {spare} {nul} placeholders; every one must give 0/1/2 and a clean error.
CLI_CASES = [
    ["report", "--min-effect", "nan", "--out", "{out}"],
    ["report", "--min-effect", "-5", "--out", "{out}"],
    ["report", "--alpha", "2", "--out", "{out}"],
    ["report", "--alpha", "5e-324", "--out", "{out}"],
    ["report", "--out", "{file}"],
    ["report", "--out", "{userdir}"],
    ["report", "--out", "{file}/sub"],
    ["report", "--out", ""],
    ["report", "--out", "."],
    ["report", "--out", "{nul}"],
    ["report", "--commit", "zzzz", "--out", "{out}"],
    ["report", "--audit", "{file}", "--out", "{out}"],
    ["report", "--audit", "{dir}", "--out", "{out}"],
    ["report", "--baseline", "atomics=bogus", "--out", "{out}"],
    ["compare", "--min-effect", "nan"],
    ["compare", "--min-effect", "-inf"],
    ["compare", "--min-effect", "1e400"],
    ["compare", "--min-effect", "1e308"],
    ["compare", "--min-effect", "abc"],
    ["compare", "--alpha", "nan"],
    ["compare", "--alpha", "0"],
    ["compare", "--alpha", "1e-400"],
    ["compare", "--alpha", ""],
    ["compare", "--correction", "bogus"],
    ["compare", "--baseline", "x"],
    ["compare", "--baseline", "="],
    ["compare", "--baseline", "atomics="],
    ["compare", "--baseline", "atomics=bogus"],
    ["compare", "--baseline", "bogus=full"],
    ["compare", "--baseline", "rwlock=full", "--baseline", "rwlock=relaxed"],
    ["compare", "--commit", ""],
    ["compare", "--commit", "HEAD"],
    ["compare", "--commit", "HEAD", "--repo", "{repo}"],
    ["compare", "--commit", "1"],
    ["compare", "--commit", "{nul}"],
    ["compare", "--commit", "all", "--arch", "\u00e9"],
    ["compare", "--workload", "rwlock", "--impl", "kernel"],
    ["compare", "--audit", "{missing}"],
    ["compare", "--audit", "{deepjson}"],
    ["compare", "--audit", "{audit_odd}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", ""],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "-"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "--all"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "{nul}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "HEAD~99999"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "HEAD^{{tree}}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", ":/change"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "{c2}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "{c0}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "\u00e9\n"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "a" * 5000],
    ["regress", "--target", "{c1}", "--repo", "{repo}", "--base", "{c2}"],
    ["regress", "--target", "{nul}", "--repo", "{repo}"],
    ["regress", "--target", "{c2}", "--repo", "{file}"],
    ["regress", "--target", "{c2}", "--repo", "{missing}"],
    ["regress", "--target", "{c2}", "--repo", "{nul}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--threshold", "nan"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--threshold", "100"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--threshold", "1e-320"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--alpha", "1"],
    ["regress", "--key", "kernel"],
    ["regress", "--key", "kernel", "--repo", "{repo}"],
    ["regress", "--history"],
    ["regress", "--history", "--key", "kernel", "--repo", "{file}"],
    ["import", "{missing}"],
    ["import", "{file}"],
    ["import", "{dir}"],
    ["import", "{userdir}"],
    ["import", "{nul}"],
    ["import", "{badrun}"],
    ["import", "{spare}", "{spare}"],
]
CLI_DB_ARGS = [None, "{missing_db}", "{file}", "{dir}", "{nul}", "{under_file}", ""]


def _cli_env(golden, tmp_path, args) -> dict:
    """Placeholder values (all under tmp_path) and a fresh copy of the golden DB."""
    db = tmp_path / "db" / "results.sqlite"
    db.parent.mkdir()
    shutil.copyfile(golden["db"], db)
    (tmp_path / "plain.txt").write_text("not a directory\n")
    (tmp_path / "emptydir").mkdir()
    userdir = tmp_path / "userdir"
    userdir.mkdir()
    (userdir / "thesis.tex").write_text("precious\n")
    if "{deepjson}" in args:
        (tmp_path / "deep.json").write_text(_nested(100_000))
    (tmp_path / "audit.json").write_text(json.dumps(
        {"schema": 1, "identical": [{"arch": "x86_64", "variants": ["full", "acquire"],
                                     "op": 5}], "notes": []}))
    bad = tmp_path / "badrun"
    bad.mkdir()
    (bad / "provenance.json").write_text('{"run_id": "b", "cell": {"arch": 1}}')
    (bad / "status.json").mkdir()
    c = golden["shas"]
    return {"db": str(db), "repo": str(golden["repo"]), "c0": c[0], "c1": c[1], "c2": c[2],
            "c1short": c[1][:6],
            "file": str(tmp_path / "plain.txt"), "dir": str(tmp_path / "emptydir"),
            "userdir": str(userdir), "out": str(tmp_path / "reports" / "r"),
            "missing": str(tmp_path / "missing"), "missing_db": str(tmp_path / "new" / "x.db"),
            "under_file": str(tmp_path / "plain.txt" / "x.db"), "nul": "a\x00b",
            "spare": str(golden["spare"]), "deepjson": str(tmp_path / "deep.json"),
            "audit_odd": str(tmp_path / "audit.json"), "badrun": str(bad)}


def _fill(args, env) -> list[str]:
    return [a.format(**env) for a in args]


def _check_cli(tmp_path, capsys, argv, env, what):
    """Run one command line; check the contract and that nothing the user
    owns was touched and no half-written report is left."""
    userdir = Path(env["userdir"])
    rc, out, err = run_main(cli.main, argv, capsys, what)
    thesis, plain = userdir / "thesis.tex", Path(env["file"])
    assert thesis.is_file() and thesis.read_text() == "precious\n", \
        f"{what}: status {rc}, the user's directory {userdir} was replaced or removed"
    assert plain.is_file() and plain.read_text() == "not a directory\n", \
        f"{what}: status {rc}, the user's file {plain} was replaced or removed"
    assert (tmp_path / "cwd" / "keep.txt").is_file(), f"{what}: the current directory was emptied"
    if argv[0] == "report" and env["out"] in argv:
        reports = Path(env["out"]).parent
        left = sorted(p.name for p in reports.iterdir()) if reports.is_dir() else []
        left = [x for x in left if not x.endswith(".qrwbench-lock")]
        if rc == 0:
            assert left == ["r"] and (Path(env["out"]) / "index.html").is_file(), (left, what)
        else:
            assert left == [], f"{what}: failed report left {left}"
    return rc


@pytest.mark.parametrize("i", range(len(CLI_CASES)),
                         ids=[_short(" ".join(c), 60) for c in CLI_CASES])
def test_cli_args(golden, tmp_path, capsys, monkeypatch, fast_stats, i):
    monkeypatch.delenv("RESULTS_DB", raising=False)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "keep.txt").write_text("x")
    monkeypatch.chdir(tmp_path / "cwd")
    env = _cli_env(golden, tmp_path, CLI_CASES[i])
    args = _fill(CLI_CASES[i], env)
    argv = [args[0], "--db", env["db"]] + args[1:]
    rc = _check_cli(tmp_path, capsys, argv, env, " ".join(CLI_CASES[i]))
    if args[0] != "regress":
        assert rc in (0, 2)


CLI_POOL = {
    "report": {"--min-effect": ["nan", "-5", "inf", "0", "1e999", "-0", "x"],
               "--alpha": ["2", "0.5", "nan", "-1", "1e-999", "0.05"],
               "--commit": ["latest", "all", "HEAD", "", "{c1}", "{c1short}", "zz", "{nul}"],
               "--baseline": ["atomics=bogus", "x", "rwlock=", "=full"],
               "--out": ["{out}", "{file}", "{userdir}", "{dir}"],
               "--correction": ["bh", "holm", "none"]},
    "compare": {"--min-effect": ["nan", "-5", "inf", "1e999", "5"],
                "--alpha": ["2", "nan", "1e-999", "0.999999"],
                "--commit": ["latest", "all", "", "{c2}", "q", "{nul}"],
                "--baseline": ["atomics=bogus", "rwlock=relaxed", "x=y", "a"],
                "--arch": ["x86_64", "\u00e9", ""], "--op": ["smp_mb", "{nul}"],
                "--audit": ["{file}", "{dir}", "{deepjson}", "{audit_odd}", "{missing}"],
                "--correction": ["bh", "x"]},
    "regress": {"--target": ["{c2}", "{c1}", "{c0}", "HEAD", "", "{nul}", "-x", "zz"],
                "--base": ["{c1}", "{c0}", "", "-", "{nul}", "HEAD~9", "@{{-1}}", "\u00e9"],
                "--threshold": ["nan", "5", "0", "100", "-1", "1e999"],
                "--alpha": ["nan", "0.05", "7"], "--key": ["rig", "kernel", "x"],
                "--repo": ["{repo}", "{repo}", "{file}", "{missing}", "{nul}"],
                "--history": [None]},
}


@pytest.mark.parametrize("seed", range(50))
def test_cli_random(golden, tmp_path, capsys, monkeypatch, fast_stats, seed):
    """Random combinations of bad option values (and of --db values)."""
    rng = random.Random(6000 + seed)
    monkeypatch.delenv("RESULTS_DB", raising=False)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "keep.txt").write_text("x")
    monkeypatch.chdir(tmp_path / "cwd")
    cmd = rng.choice(["compare", "compare", "regress", "regress", "report"] if seed % 5 == 0
                     else ["compare", "regress"])
    opts = rng.sample(sorted(CLI_POOL[cmd]), rng.randint(1, 3))
    if cmd == "report" and "--out" not in opts:
        opts.append("--out")
    args = [cmd]
    dbarg = rng.choice(CLI_DB_ARGS) if rng.random() < 0.2 else None
    args += ["--db", "{db}" if dbarg is None else dbarg]
    for o in opts:
        v = rng.choice(CLI_POOL[cmd][o])
        args += [o] if v is None else [o, v]
    env = _cli_env(golden, tmp_path, args)
    argv = _fill(args, env)
    _check_cli(tmp_path, capsys, argv, env, " ".join(args))

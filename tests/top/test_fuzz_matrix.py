"""No traceback for any matrix file: seeded fuzzing of ``matrix.load`` and of
``qrwbench bench --matrix`` (the contract: tests/fuzz.py)."""
from __future__ import annotations

import json
import math
import os
import random
import re
import tomllib

import pytest

from conftest import TOP
from fuzz import call_clean, run_main, short
from qrwbench import cli, matrix
from qrwbench.run import ktree

MATRIX_DIR = TOP / "bench" / "matrix"


# Values of the wrong type, size or alphabet, for any field.
NASTY = [5, 0, -1, -(2 ** 63), 2 ** 63, 2 ** 64, 2 ** 70, 10 ** 9, 1.5, -0.0,
         float("nan"), float("inf"), True, False, "", "x", "\u00fcn\u00efc\u00f8d\u00e9",
         "\u00b2", "\u0663", "\x00", "a\nb", "\u202e", " ", [], [[]], [1, [2]], [[1, 2]],
         ["x", 1], [2 ** 70], {}, {"a": 1}, {"name": "rwlock"}, [{"a": 1}]]


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
            done.append(f"{k}:{how}={short(doc.get(k), 60)}")
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
            done.append(f"run.{k}={short(v, 60)}")
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
                done.append(f"{table}[{i}].params.{pk}={short(pv, 60)}")
                continue
            if rng.random() < 0.15:
                row.pop(k, None)
                done.append(f"{table}[{i}].{k}:delete")
            else:
                row[k] = v
                done.append(f"{table}[{i}].{k}={short(v, 60)}")
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

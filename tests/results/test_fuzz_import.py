"""No traceback for any run directory: seeded fuzzing of ``store.import_run``;
a refused import stores nothing (the contract: tests/fuzz.py)."""
from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import synth
from fuzz import (base_records, call_clean, mutate_console_bytes, mutate_records, nested_json,
                  one_line, run_main, set_consistent_ops, short)
from qrwbench import cli
from qrwbench.results import store


def _ops(v):
    return lambda recs: set_consistent_ops(recs[1], v)


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
    "ops=0 everywhere": ("atomics", lambda recs: [set_consistent_ops(r, 0) for r in recs[1:]],
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
            '"@DEEP@"', nested_json(100_000)))
    if status_edit:
        st = json.loads((d / "status.json").read_text())
        status_edit(st)
        (d / "status.json").write_text(json.dumps(st).replace('"@DEEP@"', nested_json(100_000)))
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
    recs = base_records(workload, np.random.default_rng(seed))
    what = [workload]
    if rng.random() < 0.85:
        what += mutate_records(recs, rng)
    data = synth.console(recs).encode()
    if rng.random() < 0.1:
        data, how = mutate_console_bytes(data, rng)
        what.append(how)
    prov_edit = status_edit = None
    if rng.random() < 0.25:
        k, v = rng.choice(PROV_EDITS)
        prov_edit = lambda p, k=k, v=v: p.update({k: v})  # noqa: E731
        what.append(f"prov.{k}={short(v, 40)}")
    if rng.random() < 0.25:
        k, v = rng.choice(STATUS_EDITS)
        status_edit = lambda s, k=k, v=v: s.update({k: v})  # noqa: E731
        what.append(f"status.{k}={short(v, 40)}")
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
    assert res.status in ("ok", "failed") and one_line(res.reason), (res, what)
    if res.status == "failed":
        assert res.samples == 0, (res, what)
    else:
        run_main(cli.main, ["compare", "--db", str(db)], capsys, f"compare after import; {what}")


@pytest.mark.parametrize("name", sorted(NAMED_RUNS))
def test_import_run_named(tmp_path, capsys, fast_stats, name):
    """Hand-picked hostile runs (valid CRC, values no module prints)."""
    workload, rec_edit, prov_edit, status_edit = NAMED_RUNS[name]
    recs = base_records(workload, np.random.default_rng(7))
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

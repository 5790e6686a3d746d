"""store: import, idempotence, failed runs, schema versions, bad paths."""

import hashlib
import json
import sqlite3
import threading

import numpy as np
import pytest

import synth
from qrwbench.results import records, rundir, store
from qrwbench.analysis import compare
from qrwbench.errors import QrwbenchError


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "results" / "qrwbench.sqlite")


def _count(db, table, where="1"):
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}").fetchone()[0]
    finally:
        conn.close()


def _n_results(run_dir):
    return len(records.parse_console((run_dir / "console.log").read_text()).results)


def test_import_stores_every_result_once(tmp_path, db):
    run = synth.atomics_run(tmp_path / "runs", "r-ok")
    res = store.import_run(db, run)
    assert res.added and res.status == "ok"
    assert res.samples == _n_results(run) == _count(db, "samples")
    again = store.import_run(db, run)
    assert not again.added and again.samples == res.samples
    assert _count(db, "samples") == res.samples and _count(db, "runs") == 1


def test_sample_rows_carry_the_cell_and_the_numbers(tmp_path, db):
    run = synth.rwlock_run(tmp_path / "runs", "r-rw", write_pcts=(25,))
    store.import_run(db, run)
    conn = store.connect(db)
    rows = store.load_samples(conn)
    conn.close()
    recs = records.parse_console((run / "console.log").read_text()).results
    by_order = {r["order"]: r for r in recs}
    for row in rows:
        rec = by_order[row["ord"]]
        assert row["throughput"] == pytest.approx(rec["ops"] * 1e9 / rec["ns"])
        assert row["per_thread_ops"] == rec["per_thread_ops"]
        assert (row["reads"], row["writes"]) == (rec["reads"], rec["writes"])
        assert json.loads(row["params"])["write_pct"] == 25 == row["write_pct"]
        assert row["rig_commit"] == "a" * 40


BAD_RUNS = {   # name: (console + status/provenance overrides, expected reason part)
    "truncated": (lambda recs: (synth.console(recs, end=False), {}), "no end marker"),
    "wrong crc": (lambda recs: (synth.console(recs).replace('"rep":0,', '"rep":9,', 1), {}),
                  "crc32"),
    "oversized line": (lambda recs: (synth.console(recs).replace("reboot", "x" * 20000, 1),
                                     {}), "limit"),
    "fault": (lambda recs: (synth.console(recs) + "[ 3.0] Kernel panic - not syncing\n", {}),
              "guest fault: [ 3.0] Kernel panic"),
    "no selftest": (lambda recs: (synth.console(
        recs, boot=[l for l in synth.BOOT_LINES if "atomic64" not in l]), {}),
        "atomic64_test: passed"),
    "launcher failed": (lambda recs: (synth.console(recs), {
        "status": "failed", "reason": "timed out after 60 s"}), "launcher: timed out"),
    "cell mismatch": (lambda recs: (synth.console(recs), {"arch": "arm64"}), "arch"),
    "cpu mismatch": (lambda recs: (synth.console(recs), {"vcpus": 4}), "4 vCPUs"),
    "no console": (lambda recs: (None, {}), "no console.log"),
}


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_bad_run_is_stored_failed_without_samples(tmp_path, db, name):
    rng = np.random.default_rng(3)
    recs = [synth.begin()] + synth.results(rng=rng, factors={"relaxed": 5.0})
    make, expect = BAD_RUNS[name]
    text, kw = make(recs)
    run = synth.write_run(tmp_path / "runs", f"bad-{name.replace(' ', '-')}", text, **kw)
    good = synth.atomics_run(tmp_path / "runs", "good")
    res = store.import_run(db, run)
    store.import_run(db, good)
    assert res.added and res.status == "failed" and res.samples == 0
    assert expect in res.reason and "\n" not in res.reason
    assert _count(db, "samples", f"run_id = '{res.run_id}'") == 0
    conn = store.connect(db)
    samples = store.load_samples(conn)
    failed = store.load_runs(conn, status="failed")
    conn.close()
    assert {s["run_id"] for s in samples} == {"good"}
    assert [r["run_id"] for r in failed] == [res.run_id]
    # absent from statistics: the bad run's 5x "relaxed" would show otherwise
    cset = compare.compare_cells(samples, n_resamples=200)
    assert all(c.test.n_a == _n_per_variant(good) for c in cset.comparisons)


def _n_per_variant(run):
    recs = records.parse_console((run / "console.log").read_text()).results
    return sum(1 for r in recs if r["variant"] == "relaxed" and r["copy"] == 0)


def test_fault_lines_are_kept_for_failed_runs(tmp_path, db):
    recs = [synth.begin()] + synth.results(rng=np.random.default_rng(1))
    text = synth.console(recs) + "[ 3.0] WARNING: CPU: 0 PID: 1 at lib/x.c:1 f+0x0\n"
    run = synth.write_run(tmp_path / "runs", "warn", text)
    res = store.import_run(db, run)
    conn = store.connect(db)
    row = store.load_runs(conn)[0]
    conn.close()
    assert res.status == "failed" and "WARNING: CPU: 0" in res.reason
    assert json.loads(row["faults"]) == ["[ 3.0] WARNING: CPU: 0 PID: 1 at lib/x.c:1 f+0x0"]


@pytest.mark.parametrize("what", ["missing", "no provenance", "interrupted", "a file"])
def test_not_a_run_directory_writes_nothing(tmp_path, db, what):
    run = synth.atomics_run(tmp_path / "runs", "r")
    path = {"missing": tmp_path / "nope", "no provenance": tmp_path / "runs" / "empty",
            "interrupted": run, "a file": run / "console.log"}[what]
    if what == "no provenance":
        path.mkdir()
    if what == "interrupted":
        (run / "status.json").unlink()
    with pytest.raises(QrwbenchError) as exc:
        store.import_run(db, path)
    assert "\n" not in str(exc.value)
    assert ("interrupted" if what == "interrupted" else "not a run directory") in str(exc.value)
    with pytest.raises(QrwbenchError):
        rundir.plan_imports([path])
    assert not (tmp_path / "results").exists()


def test_directory_of_runs_skips_interrupted(tmp_path, db):
    root = tmp_path / "runs"
    synth.atomics_run(root, "r1")
    synth.atomics_run(root, "r2")
    (synth.atomics_run(root, "r3") / "status.json").unlink()
    results, notes = store.import_path(db, root)
    assert sorted(r.run_id for r in results) == ["r1", "r2"]
    assert len(notes) == 1 and "r3" in notes[0] and "interrupted" in notes[0]


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_newer_schema_is_refused_untouched(tmp_path, db):
    store.connect(db).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_version SET version = ?", (store.SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    before = _sha(db)
    with pytest.raises(QrwbenchError) as exc:
        store.connect(db)
    assert "newer" in str(exc.value) and str(store.SCHEMA_VERSION + 1) in str(exc.value)
    with pytest.raises(QrwbenchError):
        store.import_run(db, synth.atomics_run(tmp_path / "runs", "r"))
    assert _sha(db) == before


def _v1_db(path):
    """A results DB of schema version 1 at ``path``."""
    conn = sqlite3.connect(path)
    for stmt in store.MIGRATIONS[1]:
        conn.execute(stmt)
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.commit()
    conn.close()
    return path


def test_old_schema_is_migrated(tmp_path):
    path = _v1_db(str(tmp_path / "v1.sqlite"))
    store.import_run(path, synth.atomics_run(tmp_path / "runs", "r"))
    conn = store.connect(path)
    version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert version == store.SCHEMA_VERSION
    assert {"samples_cell", "runs_rig"} <= indexes
    assert mode == "wal"


def test_foreign_sqlite_file_is_refused(tmp_path):
    path = str(tmp_path / "other.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(QrwbenchError, match="not a qrwbench results DB"):
        store.connect(path)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(QrwbenchError, match="not an SQLite database"):
        store.connect(str(garbage))


def test_missing_db_is_an_error_for_readers(tmp_path):
    with pytest.raises(QrwbenchError, match="no results DB"):
        store.connect(str(tmp_path / "none.sqlite"), create=False)
    assert not (tmp_path / "none.sqlite").exists()


def test_results_db_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("RESULTS_DB", str(tmp_path / "env.sqlite"))
    assert store.default_db_path() == str(tmp_path / "env.sqlite")
    store.import_run(None, synth.atomics_run(tmp_path / "runs", "r"))
    assert _count(str(tmp_path / "env.sqlite"), "runs") == 1
    monkeypatch.delenv("RESULTS_DB")
    assert store.default_db_path() == store.DEFAULT_DB


def test_concurrent_imports_of_one_run_add_it_once(tmp_path, db):
    runs = [synth.atomics_run(tmp_path / "runs", f"r{i}") for i in range(3)]
    store.connect(db).close()
    results, errors = [], []

    def worker():
        try:
            for r in runs:
                results.append(store.import_run(db, r))
        except Exception as exc:          # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(r.added for r in results) == 3
    assert _count(db, "runs") == 3
    assert _count(db, "samples") == sum(_n_results(r) for r in runs)


def test_failed_run_is_replaced_by_a_successful_retry(tmp_path, db):
    root = tmp_path / "runs"
    recs = [synth.begin()] + synth.results(rng=np.random.default_rng(2))
    failed = synth.write_run(root / "try1", "retry", synth.console(recs, end=False))
    first = store.import_run(db, failed)
    again = store.import_run(db, failed)
    conn = store.connect(db)
    assert first.status == again.status == "failed"
    assert not store.has_run(conn, "retry")
    assert _count(db, "runs") == 1 and _count(db, "samples") == 0
    ok = synth.write_run(root / "try2", "retry", synth.console(recs))
    res = store.import_run(conn, ok)
    assert res.replaced and res.status == "ok" and res.samples == len(recs) - 1
    assert store.has_run(conn, "retry")
    assert not store.import_run(conn, failed).added      # ok is never overwritten
    conn.close()
    assert _count(db, "runs") == 1 and _count(db, "samples") == len(recs) - 1


def test_readonly_open_writes_nothing(tmp_path, db):
    """connect_readonly (the analysis scripts' open): samples are read, a
    write is refused, and the directory and the DB's bytes are as before:
    no -wal/-shm, no journal-mode switch."""
    store.import_run(db, synth.atomics_run(tmp_path / "runs", "r"))
    d = tmp_path / "results"
    before, files = _sha(db), sorted(p.name for p in d.iterdir())
    assert files == ["qrwbench.sqlite"]
    conn = store.connect_readonly(db)
    assert len(store.load_samples(conn)) == _count(db, "samples") > 0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM samples")
    conn.close()
    assert sorted(p.name for p in d.iterdir()) == files and _sha(db) == before


def test_readonly_open_refuses_an_old_schema_untouched(tmp_path):
    path = _v1_db(tmp_path / "v1.sqlite")
    before = _sha(path)
    with pytest.raises(QrwbenchError, match="schema version 1"):
        store.connect_readonly(path)
    assert _sha(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["v1.sqlite"]

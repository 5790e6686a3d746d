"""No traceback for any damage to the results DB: compare, regress, import and
report on seeded corruptions of a valid DB; a failed or read-only command
leaves its bytes as they were (the contract: tests/fuzz.py)."""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from fuzz import run_main, run_sql, sha
from qrwbench import cli


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
        run_sql(path, "CREATE TABLE t (a, b)", "INSERT INTO t VALUES (1, 2)")
        return
    elif kind == "empty-sqlite":
        path.unlink()
        run_sql(path, "PRAGMA user_version = 1")
        return
    elif kind.startswith("sql:"):
        run_sql(path, *SQL_CORRUPTIONS[kind[4:]])
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
    before = sha(db)
    rc, out, err = run_main(cli.main, _argv(cmd, db, golden), capsys, f"db {kind}/{seed} {cmd}")
    if kind == "intact":
        assert rc == 0 or (rc == 1 and cmd == "regress"), (rc, err)
    if rc == 2 or cmd != "import":
        assert sha(db) == before, (f"{cmd} (status {rc}) changed the results DB {kind}/{seed}; "
                                    f"stderr: {err.strip()}")


@pytest.mark.parametrize("kind,seed", REPORT_CASES, ids=[f"{k}-{s}" for k, s in REPORT_CASES])
def test_damaged_db_report(golden, tmp_path, capsys, monkeypatch, fast_stats, kind, seed):
    """report on a damaged DB: status 0 with a complete report, or status 2,
    one error line, no report directory and no temporary files left."""
    monkeypatch.chdir(tmp_path)
    db = _db_copy(golden, tmp_path, kind, seed)
    before = sha(db)
    parent = tmp_path / "out"
    parent.mkdir()
    out = parent / "report"
    rc, _, err = run_main(cli.main, ["report", "--db", str(db), "--out", str(out)], capsys,
                          f"report on db {kind}/{seed}")
    assert rc in (0, 2), rc
    assert sha(db) == before, f"report (status {rc}) changed the results DB; stderr: {err}"
    left = sorted(p.name for p in parent.iterdir() if not p.name.endswith(".qrwbench-lock"))
    if rc == 0:
        assert (out / "index.html").is_file() and (out / "report.md").is_file()
        assert left == ["report"], left
    else:
        assert left == [], f"failed report left {left} in the output directory"
    if kind == "intact":
        assert rc == 0, err

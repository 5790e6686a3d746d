"""SQLite results store: runs and their samples, kept across `make clean`.

Default path the rig's ``results/qrwbench.sqlite``; the environment variable
``RESULTS_DB`` overrides it, and every entry point takes an explicit path too.
The database is opened in WAL mode with a generous busy timeout, and every
change happens inside one ``BEGIN IMMEDIATE`` transaction, so two imports at
once serialize instead of corrupting anything.

The schema is versioned (table ``schema_version``) and upgraded by the ordered
``MIGRATIONS``; a database written by a newer qrwbench is refused with a clear
error before anything is written.

:func:`import_run` reads one run directory (docs/runs.md) and judges it
(:mod:`qrwbench.results.rundir`: a launcher failure, a console that does not
parse, a fault, no atomic64 selftest pass line); a run judged failed is
stored in ``runs`` as failed, with its reason and no samples. Importing an ok
``run_id`` again adds nothing; a ``run_id`` stored as failed is replaced by a
later import of it (a retried boot keeps its run id).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .. import gitutil, vocab
from ..errors import QrwbenchError
from . import rows, rundir

DEFAULT_DB = str(vocab.TOP / "results" / "qrwbench.sqlite")     # whatever the working directory
SCHEMA_VERSION = 5

# The host of make kvm-nested's runs (run/nested.py): guests under KVM inside
# a TCG guest, emulation twice over. The host is a blocking factor of every
# comparison, so they are never pooled; the report lists them apart.
NESTED_HOST = "nested"

CELL_COLUMNS = ("arch", "accel", "cpu_model", "vcpus", "workload", "impl", "op",
                "placement", "params")

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE schema_version (version INTEGER NOT NULL)""",
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
            reason TEXT NOT NULL,
            imported_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
            arch TEXT, accel TEXT, cpu_model TEXT, vcpus INTEGER,
            kernel_variant TEXT, workload TEXT, cell_params TEXT,
            rig_commit TEXT, rig_dirty INTEGER, rig_diff_sha256 TEXT,
            kernel_src TEXT, kernel_tree_commit TEXT, kernel_tree_subject TEXT,
            kernel_release TEXT, config_sha256 TEXT, compiler TEXT,
            qemu_version TEXT, qemu_cmd TEXT,
            kvm_usable INTEGER, kvm_reason TEXT,
            host_cpu_model TEXT, host_cpus INTEGER, overcommitted INTEGER,
            seed TEXT, started_at TEXT, finished_at TEXT,
            refused_reason TEXT, faults TEXT NOT NULL DEFAULT '[]',
            provenance TEXT NOT NULL, status_json TEXT NOT NULL, begin_json TEXT
        )""",
        """CREATE TABLE samples (
            id INTEGER PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            arch TEXT NOT NULL, accel TEXT NOT NULL, cpu_model TEXT NOT NULL,
            vcpus INTEGER NOT NULL, workload TEXT NOT NULL, impl TEXT NOT NULL,
            op TEXT NOT NULL, variant TEXT NOT NULL, copy INTEGER NOT NULL,
            placement TEXT NOT NULL, params TEXT NOT NULL,
            kernel_variant TEXT NOT NULL, threads INTEGER NOT NULL, write_pct INTEGER,
            rep INTEGER NOT NULL, ord INTEGER NOT NULL,
            ns INTEGER NOT NULL, ops INTEGER NOT NULL, throughput REAL NOT NULL,
            reads INTEGER, writes INTEGER,
            per_thread_ops TEXT NOT NULL, per_thread_reads TEXT, per_thread_writes TEXT,
            overhead_ps INTEGER NOT NULL, batch INTEGER NOT NULL, violations INTEGER,
            cycles INTEGER, instructions INTEGER,
            UNIQUE (run_id, ord)
        )""",
    ),
    2: (
        """CREATE INDEX samples_cell ON samples (arch, accel, cpu_model, vcpus,
               workload, impl, op, placement, params, variant, copy)""",
        """CREATE INDEX runs_rig ON runs (rig_commit, rig_dirty)""",
        """CREATE INDEX runs_kernel ON runs (kernel_tree_commit)""",
    ),
    3: (
        # pinned: NULL not asked, 0 asked but not done, 1 vCPU threads pinned
        """ALTER TABLE runs ADD COLUMN pinned INTEGER""",
        # host-side perf of the QEMU process: tool 'stat' (perf stat: value in
        # unit, NULL + supported 0 when the host cannot count it) or 'kvm-stat'
        # (perf kvm stat: event = VM-exit reason, value = exits, unit 'exits')
        """CREATE TABLE run_perf (
            run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
            tool TEXT NOT NULL CHECK (tool IN ('stat', 'kvm-stat')),
            event TEXT NOT NULL, value REAL, unit TEXT NOT NULL,
            supported INTEGER NOT NULL,
            PRIMARY KEY (run_id, tool, event)
        )""",
    ),
    4: (
        # the stopping rule of make bench (planner.py): per rig commit and
        # matrix cell, the boots it got and what ended its measuring
        """CREATE TABLE plan_cells (
            rig_commit TEXT NOT NULL, cell TEXT NOT NULL,
            boots INTEGER NOT NULL, failed INTEGER NOT NULL, ended_by TEXT NOT NULL,
            updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
            PRIMARY KEY (rig_commit, cell)
        )""",
    ),
    5: (
        # the host that ran the boot, by the name make bench HOSTS= gave it;
        # NULL: the coordinating host itself (remote.py)
        """ALTER TABLE runs ADD COLUMN host TEXT""",
    ),
}


def default_db_path() -> str:
    """``$RESULTS_DB`` when set and non-empty, else ``results/qrwbench.sqlite``."""
    return os.environ.get("RESULTS_DB") or DEFAULT_DB


# ------------------------------------------------------------------ opening

def _schema_version(conn: sqlite3.Connection, path) -> int:
    try:
        tables = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        # (a damaged schema can make SQLite's own message undecodable)
        raise QrwbenchError(f"{path} is not an SQLite database or is damaged: "
                            f"{type(exc).__name__}: {exc}") from None
    if "schema_version" not in tables:
        if tables:
            raise QrwbenchError(f"{path} is an SQLite database but not a qrwbench "
                                f"results DB (tables: {', '.join(sorted(tables))})")
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    if row[0] is None or type(row[0]) is not int or row[0] < 1:
        raise QrwbenchError(f"{path}: table schema_version holds "
                            f"{'no version' if row[0] is None else repr(row[0])[:40]}: not a "
                            "complete qrwbench results DB (damaged?); restore it from a copy "
                            "or give another RESULTS_DB")
    return row[0]


def _migrate(conn: sqlite3.Connection, path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _schema_version(conn, path)
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for stmt in MIGRATIONS[v]:
                conn.execute(stmt)
            conn.execute("DELETE FROM schema_version")
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (v,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _check_access(path: Path) -> None:
    """An existing DB must be readable and writable, and SQLite's WAL files
    (``<db>-wal``, ``<db>-shm``) must exist writable or be creatable next to it."""
    if not os.access(path, os.R_OK):
        raise QrwbenchError(f"results DB {path} is not readable by this user")
    if not os.access(path, os.W_OK):
        raise QrwbenchError(f"results DB {path} is not writable by this user (SQLite's WAL "
                            "mode writes even to read); copy it somewhere writable")
    if os.access(path.parent, os.W_OK | os.X_OK):
        return
    side = [Path(f"{path}-{s}") for s in ("wal", "shm")]
    if not all(p.exists() and os.access(p, os.R_OK | os.W_OK) for p in side):
        raise QrwbenchError(f"results directory {path.parent} is not writable: SQLite must "
                            f"create {path.name}-wal and {path.name}-shm next to the DB; make "
                            "it writable or copy the DB elsewhere")


def _open(path: Path, target: str, settle) -> sqlite3.Connection:
    """sqlite3.connect(target) with the store's settings, then ``settle(conn,
    version)`` (the mode's checks); any failure is a QrwbenchError and closes
    the connection."""
    try:
        conn = sqlite3.connect(target, timeout=60.0, isolation_level=None,
                               uri=target.startswith("file:"))
    except sqlite3.Error as exc:
        raise QrwbenchError(f"cannot open results DB {path}: {exc}") from None
    # the store writes UTF-8 only: bytes that are not are damage, shown, not raised
    conn.text_factory = lambda b: b.decode("utf-8", "replace")
    try:
        version = _schema_version(conn, path)
        conn.row_factory = sqlite3.Row
        settle(conn, version)
    except QrwbenchError:
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        raise QrwbenchError(f"results DB {path}: {exc}") from None
    return conn


def _no_results(path) -> QrwbenchError:
    return QrwbenchError(f"{path} holds no qrwbench results (an empty database): "
                         "import runs first (make bench, or python3 -m qrwbench import)")


def connect_readonly(path) -> sqlite3.Connection:
    """An existing results DB opened so that nothing is written: no WAL
    switch, no schema upgrade (an older schema is refused), no side files
    created. Without a ``-wal`` file the DB is opened immutable (SQLite then
    creates no ``-wal``/``-shm``); with one, read-only, reading its pages."""
    path = Path(path)
    if not path.is_file():
        raise QrwbenchError(f"no results DB at {path} (import runs first: "
                            "make bench, or python3 -m qrwbench import RUN_DIR)")
    if not os.access(path, os.R_OK):
        raise QrwbenchError(f"results DB {path} is not readable by this user")

    def settle(conn, version):
        if version == 0:
            raise _no_results(path)
        if version != SCHEMA_VERSION:
            raise QrwbenchError(
                f"results DB {path} has schema version {version}, this qrwbench reads "
                f"{SCHEMA_VERSION} only when opening read-only; upgrade a copy with "
                "python3 -m qrwbench report --db COPY")
    mode = "mode=ro" if Path(f"{path}-wal").exists() else "mode=ro&immutable=1"
    return _open(path, f"{path.resolve().as_uri()}?{mode}", settle)


def connect(path=None, *, create: bool = True) -> sqlite3.Connection:
    """Open (and with ``create``, create) the results DB, upgrading its schema.

    Raises :class:`QrwbenchError` for a missing DB (``create=False``), a file
    that is not a qrwbench DB, a DB from a newer schema, or an unwritable
    location; in each case nothing is written.
    """
    path = Path(path or default_db_path())
    if not path.exists():
        if not create:
            raise QrwbenchError(f"no results DB at {path} (import runs first: "
                                "make bench, or python3 -m qrwbench import RUN_DIR)")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise QrwbenchError(f"cannot create results directory {path.parent}: "
                                f"{exc.strerror}") from None
        if not os.access(path.parent, os.W_OK):
            raise QrwbenchError(f"results directory {path.parent} is not writable")
    elif path.is_dir():
        raise QrwbenchError(f"results DB path {path} is a directory")
    else:
        _check_access(path)

    def settle(conn, version):
        if version > SCHEMA_VERSION:
            raise QrwbenchError(
                f"results DB {path} has schema version {version}, newer than this "
                f"qrwbench supports ({SCHEMA_VERSION}); use a newer qrwbench or "
                "another RESULTS_DB")
        if version == 0 and not create:
            raise _no_results(path)
        conn.execute("PRAGMA foreign_keys = ON")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise QrwbenchError(f"results DB {path}: cannot switch to WAL mode ({mode})")
        if version < SCHEMA_VERSION:
            _migrate(conn, path)
    return _open(path, str(path), settle)


def _conn(db):
    """(connection, whether we opened it) for a path or an open connection."""
    if isinstance(db, sqlite3.Connection):
        return db, False
    return connect(db), True


# --------------------------------------------------------------- run files


@dataclass
class ImportResult:
    run_id: str
    status: str          # 'ok' or 'failed'
    reason: str
    added: bool          # False when the run_id was already in the DB as ok
    samples: int
    replaced: bool = False   # an earlier failed import of this run_id was replaced

    def line(self) -> str:
        what = ("re-imported (replaces a failed import)" if self.replaced else
                "imported" if self.added else "already imported")
        return f"{self.run_id}: {what}, {self.status} ({self.samples} samples)" + (
            "" if self.status == "ok" else f": {self.reason}")


def load_perf(conn, run_ids=None) -> list[dict]:
    """run_perf rows (all, or of ``run_ids``)."""
    q = "SELECT * FROM run_perf"
    args: list = []
    if run_ids is not None:
        ids = list(run_ids)
        q += f" WHERE run_id IN ({','.join('?' * len(ids))})"
        args = ids
    return [dict(r) for r in conn.execute(q + " ORDER BY run_id, tool, event", args)]


def _insert(conn, table: str, row: dict) -> None:
    cols = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(row.values()))


def save_plan(conn, rig_commit: str, cells: dict) -> None:
    """``cells``: {cell key: (boots, failed, ended_by)} of one make bench."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(
            "INSERT OR REPLACE INTO plan_cells (rig_commit, cell, boots, failed, ended_by) "
            "VALUES (?, ?, ?, ?, ?)",
            [(rig_commit, k, b, f, e) for k, (b, f, e) in sorted(cells.items())])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def load_plan(conn, rig_commit: str | None) -> dict:
    """{cell key: ended_by} stored by :func:`save_plan` for a rig commit."""
    if rig_commit is None:
        return {}
    return {r["cell"]: r["ended_by"] for r in conn.execute(
        "SELECT cell, ended_by FROM plan_cells WHERE rig_commit = ?", (rig_commit,))}


def has_run(conn, run_id: str) -> bool:
    """True when an ok run with this id is stored (failed runs are retried)."""
    return conn.execute("SELECT 1 FROM runs WHERE run_id = ? AND status = 'ok'",
                        (run_id,)).fetchone() is not None


def import_run(db, run_dir) -> ImportResult:
    """Import one run directory into ``db`` (a path or an open connection).

    Idempotent by ``run_id``: an ok run is never imported twice. A run_id stored
    as failed is replaced by the new import (a retried boot reuses its run_id),
    in the same transaction. Raises :class:`QrwbenchError`, writing nothing,
    when ``run_dir`` is not a (complete) run directory.
    """
    prov, status, console = rundir.read_run_dir(run_dir)
    reason, parsed = rundir.judge_run(prov, status, console)
    state = "failed" if reason else "ok"
    samples = []
    if state == "ok":
        samples = [rows.sample_row(prov["run_id"], prov["cell"], parsed.begin, rec)
                   for rec in parsed.results]
    conn, owned = _conn(db)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            old = conn.execute("SELECT status, reason, (SELECT COUNT(*) FROM samples s "
                               "WHERE s.run_id = r.run_id) FROM runs r WHERE run_id = ?",
                               (prov["run_id"],)).fetchone()
            replaced = False
            if old is not None and old[0] == "ok":
                conn.execute("ROLLBACK")
                return ImportResult(prov["run_id"], old[0], old[1], False, old[2])
            if old is not None:         # a failed attempt: the new one replaces it
                conn.execute("DELETE FROM runs WHERE run_id = ?", (prov["run_id"],))
                replaced = True
            _insert(conn, "runs", rows.run_row(prov, status, state, reason or "ok", parsed))
            for row in samples:
                _insert(conn, "samples", row)
            for row in rows.perf_rows(prov["run_id"], status.get("perf")):
                _insert(conn, "run_perf", row)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise QrwbenchError(f"results DB: {exc}") from None
    finally:
        if owned:
            conn.close()
    return ImportResult(prov["run_id"], state, reason or "ok", True, len(samples), replaced)


def import_path(db, path) -> tuple[list[ImportResult], list[str]]:
    """Import a run directory, or every complete run directory directly under ``path``.

    Returns (results, notes); skipped runs (see :func:`rundir.plan_imports`) become notes.
    """
    plan, notes = rundir.plan_imports([path])
    conn, owned = _conn(db)
    try:
        return [import_run(conn, run_dir) for run_dir in plan], notes
    finally:
        if owned:
            conn.close()


# ------------------------------------------------------------------ queries

def load_runs(conn, *, status: str | None = None) -> list[dict]:
    sql = "SELECT * FROM runs"
    args: tuple = ()
    if status:
        sql += " WHERE status = ?"
        args = (status,)
    rows = [dict(r) for r in conn.execute(sql + " ORDER BY run_id", args)]
    for r in rows:
        for key in ("started_at", "run_id", "rig_commit", "kernel_tree_commit", "status"):
            if r.get(key) is not None and type(r[key]) is not str:
                raise QrwbenchError(f"results DB: run {str(r.get('run_id'))[:60]!r} has {key} of "
                                    f"type {type(r[key]).__name__}, not text: the DB was edited "
                                    "or is damaged; restore it from a copy")
    return sorted(rows, key=lambda r: (r["started_at"] or "", r["run_id"]))


_RUN_FIELDS = ("rig_commit", "rig_dirty", "kernel_tree_commit", "kernel_tree_subject",
               "overcommitted", "started_at", "kernel_release", "host")


def load_samples(conn, *, rig_commit: str | None = None,
                 kernel_tree_commit: str | None = None,
                 run_ids=None, **filters) -> list[dict]:
    """Samples of ok runs, with run fields, per-thread lists decoded.

    ``filters`` are equality filters on sample columns (``workload='rwlock'``).
    """
    where = ["r.status = 'ok'"]
    args: list = []
    if rig_commit is not None:
        where.append("r.rig_commit = ?")
        args.append(rig_commit)
    if kernel_tree_commit is not None:
        where.append("r.kernel_tree_commit = ?")
        args.append(kernel_tree_commit)
    if run_ids is not None:
        run_ids = list(run_ids)
        where.append(f"s.run_id IN ({', '.join('?' for _ in run_ids)})")
        args.extend(run_ids)
    for key, value in filters.items():
        if value is None:
            continue
        if key not in CELL_COLUMNS + ("variant", "copy", "kernel_variant"):
            raise QrwbenchError(f"unknown sample filter {key!r}")
        where.append(f"s.{key} = ?")
        args.append(value)
    sql = (f"SELECT s.*, {', '.join('r.' + f for f in _RUN_FIELDS if f != 'kernel_variant')} "
           "FROM samples s JOIN runs r ON r.run_id = s.run_id "
           f"WHERE {' AND '.join(where)} ORDER BY s.run_id, s.ord")
    return [_checked_sample(dict(row)) for row in conn.execute(sql, args)]


# What the analysis relies on in a sample row: the importer writes only such
# rows, so anything else was edited by hand or damaged.
_SAMPLE_TYPES = {"ns": int, "ops": int, "rep": int, "ord": int, "copy": int, "vcpus": int,
                 "threads": int, "throughput": float, "overhead_ps": int, "batch": int}


def _checked_sample(d: dict) -> dict:
    def bad(what):
        return QrwbenchError(f"results DB: sample {d.get('id')} of run "
                             f"{str(d.get('run_id'))[:60]!r} {what}: the DB was edited or is "
                             "damaged; restore it from a copy or re-import the run")
    for key, typ in _SAMPLE_TYPES.items():
        if type(d.get(key)) is not typ and not (typ is float and type(d.get(key)) is int):
            raise bad(f"has {key} = {str(d.get(key))[:30]!r}, not {typ.__name__}")
    if d["ns"] <= 0 or d["ops"] < 0 or not math.isfinite(d["throughput"]) or d["throughput"] < 0:
        raise bad(f"has ns {d['ns']}, ops {d['ops']}, throughput {d['throughput']}")
    for key in ("started_at", "rig_commit", "kernel_tree_commit", "run_id", "variant", "op"):
        if d.get(key) is not None and type(d[key]) is not str:
            raise bad(f"has {key} of type {type(d[key]).__name__}, not text")
    for key in ("per_thread_ops", "per_thread_reads", "per_thread_writes"):
        if d.get(key) is not None:
            try:
                d[key] = json.loads(d[key])
            except (TypeError, ValueError, RecursionError):
                raise bad(f"has {key} that is not a JSON list") from None
            if type(d[key]) is not list:
                raise bad(f"has {key} that is not a JSON list")
    return d


def commits_with_results(conn, key: str = "rig", exclude_host: str | None = None) -> list[dict]:
    """Distinct commits with ok runs: [{'commit', 'runs', 'first', 'last', 'subject'}]
    (``exclude_host``: not counting that host's runs)."""
    col = {"rig": "rig_commit", "kernel": "kernel_tree_commit"}[key]
    rows = conn.execute(
        f"SELECT {col} AS c, COUNT(*) AS n, MIN(started_at) AS first, "
        f"MAX(started_at) AS last, MAX(kernel_tree_subject) AS subject FROM runs "
        f"WHERE status = 'ok' AND {col} IS NOT NULL AND (host IS NULL OR host != ?) "
        f"GROUP BY {col} ORDER BY last", (exclude_host or "",))
    return [{"commit": r["c"], "runs": r["n"], "first": r["first"], "last": r["last"],
             "subject": r["subject"]} for r in rows]


def resolve_commit(conn, ref: str, key: str = "rig") -> str:
    """The stored commit that ``ref`` (a full sha or unique prefix) names."""
    known = [c["commit"] for c in commits_with_results(conn, key)]
    hits = [c for c in known if len(ref) <= len(c) and gitutil.names_commit(ref, c, 4)]
    if len(hits) == 1:
        return hits[0]
    what = "rig" if key == "rig" else "kernel tree"
    listing = ", ".join(c[:12] for c in known[-8:]) or "none"
    if not hits:
        raise QrwbenchError(f"no results for {what} commit {ref!r}; commits with "
                            f"results: {listing}")
    raise QrwbenchError(f"{what} commit prefix {ref!r} is ambiguous: "
                        f"{', '.join(h[:12] for h in hits)}")

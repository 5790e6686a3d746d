"""A run directory read, checked and judged: the one place that says what a
run directory must hold (docs/runs.md) and when its run is data.

:func:`read_run_dir` validates a run directory's files (provenance.json and
status.json: size, JSON objects, the keys and types the store relies on, a
safe run id; console.log read up to the parser's limit) and raises
:class:`QrwbenchError` for anything that is not a complete run.
:func:`judge_run` applies the import rules to its files: a launcher failure,
a console that does not parse (:mod:`qrwbench.results.records`), no atomic64
selftest pass line (:mod:`qrwbench.results.faults`) or a guest other than
the cell asked for makes the run failed. The store imports by these rules
(store.import_run), and ``make bench`` judges each boot by them before it
writes its status.json (run/boot.py), so a boot is called ok exactly when it
becomes data.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import QrwbenchError, one_line
from . import faults, records

MAX_META_BYTES = 1 << 20   # provenance.json / status.json
_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,199}\Z")



def _read_json(path: Path, what: str) -> dict:
    try:
        size = path.stat().st_size
        if size > MAX_META_BYTES:
            raise QrwbenchError(f"{path}: {size} bytes, limit {MAX_META_BYTES}")
        obj = json.loads(path.read_text(encoding="utf-8"))
    except QrwbenchError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise QrwbenchError(f"{path}: cannot read {what}: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, dict):
        raise QrwbenchError(f"{path}: {what} is not a JSON object")
    return obj


def _want(obj: dict, key: str, types, where: str, required=True):
    if key not in obj or obj[key] is None:
        if required:
            raise QrwbenchError(f"{where} lacks {key!r}")
        return None
    value = obj[key]
    if type(value) not in types:
        raise QrwbenchError(f"{where}: {key!r} is {type(value).__name__}, expected "
                            f"{'/'.join(t.__name__ for t in types)}")
    return value


def is_run_dir(path) -> bool:
    return Path(path, "provenance.json").is_file()


def read_run_dir(run_dir) -> tuple[dict, dict, bytes | None]:
    """(provenance, status, console bytes or None), validated; QrwbenchError if not a run."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise QrwbenchError(f"{run_dir} is not a run directory (no such directory)")
    if not (run_dir / "provenance.json").is_file():
        raise QrwbenchError(f"{run_dir} is not a run directory (no provenance.json)")
    if not (run_dir / "status.json").is_file():
        raise QrwbenchError(f"{run_dir} is an interrupted run (no status.json); "
                            "not imported")
    prov = _read_json(run_dir / "provenance.json", "provenance")
    status = _read_json(run_dir / "status.json", "status")
    where = f"{run_dir}/provenance.json"
    run_id = _want(prov, "run_id", (str,), where)
    if not _RUN_ID_RE.match(run_id):
        raise QrwbenchError(f"{where}: run_id {run_id[:60]!r} has unsafe characters")
    cell = _want(prov, "cell", (dict,), where)
    for key in ("arch", "accel", "cpu_model", "kernel_variant", "workload"):
        _want(cell, key, (str,), f"{where} cell")
    vcpus = _want(cell, "vcpus", (int,), f"{where} cell")
    if not 1 <= vcpus <= 4096:
        raise QrwbenchError(f"{where} cell: vcpus {str(vcpus)[:30]} is not in 1..4096")
    _want(cell, "params", (dict,), f"{where} cell", required=False)
    st = _want(status, "status", (str,), f"{run_dir}/status.json")
    if st not in ("ok", "failed"):
        raise QrwbenchError(f"{run_dir}/status.json: status {st!r} is not ok/failed")
    _want(status, "reason", (str,), f"{run_dir}/status.json", required=False)
    console_path = run_dir / "console.log"
    console = None
    if console_path.is_file():
        try:
            with console_path.open("rb") as fh:
                console = fh.read(records.MAX_CONSOLE_BYTES + 1)
        except OSError as exc:
            raise QrwbenchError(f"{console_path}: {exc.strerror}") from None
    return prov, status, console


def judge_run(prov: dict, status: dict, console: bytes | None):
    """(reason or None when ok, ParsedRun or None) for one run's files."""
    parsed = records.parse_console(console) if console is not None else None
    if status.get("status") != "ok":
        why = status.get("reason") or "no reason given"
        if parsed and parsed.faults:
            why += f"; console: {parsed.faults[0]}"
        return one_line(f"launcher: {why}"), parsed
    if parsed is None:
        return "no console.log", None
    if not parsed.ok:
        return parsed.reason, parsed
    if not faults.selftest_passed(console):
        return "the kernel's atomic64 selftest pass line (atomic64_test: passed) " \
               "is not on the console", parsed
    cell, begin = prov["cell"], parsed.begin
    for key in ("arch", "workload", "kernel_variant"):
        if begin[key] != cell[key]:
            return (f"begin record says {key} {begin[key]!r}, provenance cell says "
                    f"{cell[key]!r}"), parsed
    if begin["online_cpus"] != cell["vcpus"]:
        return (f"guest had {begin['online_cpus']} CPUs online, provenance cell "
                f"asks for {cell['vcpus']} vCPUs"), parsed
    return None, parsed


def plan_imports(paths) -> tuple[list[Path], list[str]]:
    """Run directories named by ``paths`` (each a run directory or a directory of
    them), and notes about the runs skipped inside a directory (interrupted: no
    status.json; unreadable metadata). Raises QrwbenchError for a path that is
    neither, or a named run directory that cannot be imported, before anything
    is opened or written."""
    plan, notes = [], []
    for path in map(Path, paths):
        if is_run_dir(path):
            read_run_dir(path)          # raises for an interrupted or broken run
            plan.append(path)
            continue
        if not path.is_dir():
            raise QrwbenchError(f"{path} is not a run directory (no such directory)")
        children = sorted(p for p in path.iterdir() if p.is_dir() and is_run_dir(p))
        if not children:
            raise QrwbenchError(f"{path} is not a run directory (no provenance.json) "
                                "and holds none")
        for child in children:
            try:
                read_run_dir(child)
            except QrwbenchError as exc:
                notes.append(f"skipped: {exc}")
                continue
            plan.append(child)
    return plan, notes


"""What one judged run becomes in the store's tables: its ``runs`` row, a
``samples`` row per result record and its ``run_perf`` rows.

Pure functions of a run directory's files (provenance, status, the parsed
console: results/rundir.py, results/records.py); store.import_run writes
the rows in one transaction. Whatever of provenance.json or status.json is
not of the expected shape becomes NULL or is left out, never an error: the
files are the rig's own, but an old or hand-edited one must not break an
import.
"""
from __future__ import annotations

import json
import math

from .. import vocab
from ..cell import canonical_json
from ..errors import one_line
from . import records

# Matrix parameters that do not define what is measured: runs that differ only in
# them measure the same cell and are pooled (placement and copies select what
# a boot measures; each sample names its own placement and copy).
NON_CELL_PARAMS = ("reps", "seed", "placement", "copies")


def sample_row(run_id: str, cell: dict, begin: dict, rec: dict) -> dict:
    params = {k: v for k, v in (cell.get("params") or {}).items()
              if k not in NON_CELL_PARAMS}
    wl = vocab.workload(rec["workload"])
    params.update({k: rec[k] for k in wl.result_params})
    params["threads"] = rec["threads"]
    rw = set(records.READ_WRITE_FIELDS) <= set(wl.fields)
    return {
        "run_id": run_id, "arch": cell["arch"], "accel": cell["accel"],
        "cpu_model": cell["cpu_model"], "vcpus": cell["vcpus"],
        "workload": rec["workload"], "impl": rec["impl"], "op": rec["op"],
        "variant": rec["variant"], "copy": rec["copy"], "placement": rec["placement"],
        "params": canonical_json(params), "kernel_variant": begin["kernel_variant"],
        "threads": rec["threads"], "write_pct": rec.get("write_pct"),
        "rep": rec["rep"], "ord": rec["order"], "ns": rec["ns"], "ops": rec["ops"],
        "throughput": rec["ops"] * 1e9 / rec["ns"],
        "reads": rec.get("reads"), "writes": rec.get("writes"),
        "per_thread_ops": json.dumps(rec["per_thread_ops"]),
        "per_thread_reads": json.dumps(rec["per_thread_reads"]) if rw else None,
        "per_thread_writes": json.dumps(rec["per_thread_writes"]) if rw else None,
        "overhead_ps": rec["overhead_ps"], "batch": rec["batch"],
        "violations": rec.get("violations"), "cycles": rec.get("cycles"),
        "instructions": rec.get("instructions"),
    }


def _text(v):
    return None if v is None else one_line(v, 2000) if not isinstance(v, str) else v


def run_row(prov: dict, status: dict, state: str, reason: str, parsed) -> dict:
    cell = prov["cell"]
    kvm = prov.get("kvm_probe") if isinstance(prov.get("kvm_probe"), dict) else {}

    def flag(v):
        return None if v is None else int(bool(v))

    def num(v):
        return v if type(v) is int and -records.INT64_MAX <= v <= records.INT64_MAX else None

    return {
        "run_id": prov["run_id"], "status": state, "reason": reason,
        "arch": cell["arch"], "accel": cell["accel"], "cpu_model": cell["cpu_model"],
        "vcpus": cell["vcpus"], "kernel_variant": cell["kernel_variant"],
        "workload": cell["workload"], "cell_params": canonical_json(cell.get("params") or {}),
        "rig_commit": _text(prov.get("rig_commit")), "rig_dirty": flag(prov.get("rig_dirty")),
        "rig_diff_sha256": _text(prov.get("rig_diff_sha256")),
        "kernel_src": _text(prov.get("kernel_src")),
        "kernel_tree_commit": _text(prov.get("kernel_tree_commit")),
        "kernel_tree_subject": _text(prov.get("kernel_tree_subject")),
        "kernel_release": _text(prov.get("kernel_release")),
        "config_sha256": _text(prov.get("config_sha256")),
        "compiler": _text(prov.get("compiler")),
        "qemu_version": _text(prov.get("qemu_version")),
        "qemu_cmd": _text(prov.get("qemu_cmd")),
        "kvm_usable": flag(kvm.get("usable")), "kvm_reason": _text(kvm.get("reason")),
        "host_cpu_model": _text(prov.get("host_cpu_model")),
        "host_cpus": num(prov.get("host_cpus")),
        "overcommitted": flag(prov.get("overcommitted")),
        "seed": None if prov.get("seed") is None else str(prov.get("seed")),
        "started_at": _text(prov.get("started_at")),
        "finished_at": _text(prov.get("finished_at")),
        "refused_reason": parsed.refused_reason if parsed else None,
        "faults": json.dumps(parsed.faults if parsed else []),
        "provenance": canonical_json(prov), "status_json": canonical_json(status),
        "begin_json": canonical_json(parsed.begin) if parsed and parsed.begin else None,
        "pinned": (None if not isinstance(status.get("pinning"), dict)
                   else flag(status["pinning"].get("pinned"))),
        "host": _text(prov.get("host")),
    }


def _finite(v):
    """A finite float of an int or float, else None (10**400 does not fit)."""
    if type(v) not in (int, float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def perf_rows(run_id: str, perf) -> list[dict]:
    """run_perf rows from status.json's "perf" (run/boot.py: collect_perf);
    what does not have the expected shape is left out."""
    rows = []
    if not isinstance(perf, dict):
        return rows
    stat = perf.get("stat")
    for event, c in (stat.items() if isinstance(stat, dict) else ()):
        if isinstance(c, dict) and isinstance(event, str):
            v = c.get("value")
            rows.append({"run_id": run_id, "tool": "stat", "event": event,
                         "value": _finite(v),
                         "unit": _text(c.get("unit")) or "", "supported": int(bool(c.get("supported")))})
    kvm = perf.get("kvm_stat")
    exits = kvm.get("exits") if isinstance(kvm, dict) else None
    for reason, e in (exits.items() if isinstance(exits, dict) else ()):
        if isinstance(e, dict) and isinstance(e.get("samples"), int):
            if _finite(e["samples"]) is not None:
                rows.append({"run_id": run_id, "tool": "kvm-stat", "event": str(reason)[:200],
                             "value": _finite(e["samples"]), "unit": "exits", "supported": 1})
    return rows


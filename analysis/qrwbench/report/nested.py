"""The report's list of ``make kvm-nested`` runs, apart from everything else.

A nested run boots its guest under KVM inside a TCG guest (L1), so its
timings measure emulation twice over: they show that the KVM path works,
not what an ordering costs on a CPU. The report takes them out of the
selection's statistics (:func:`split`) and lists them in a table of their
own (:func:`table`): per run the cell, its status, its records, the median
time per op of each loop, and L1 (CPU model, kernel, the QEMUs).
"""
from __future__ import annotations

import json
import statistics
from collections import defaultdict

from ..results.store import NESTED_HOST as HOST
from . import tables

TITLE = "Nested KVM runs (make kvm-nested: KVM inside a TCG guest; not in the statistics)"
NOTE = ("These guests ran under KVM inside an L1 guest that QEMU's TCG emulates: the KVM "
        "path (probe, command line, records) is verified, their timings are emulation "
        "twice over and say nothing about a CPU; only real hardware can give those.")


def is_nested(row: dict) -> bool:
    """A run or sample of a nested run (its host is ``nested``)."""
    return row.get("host") == HOST


def split(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(the rows of other runs, the rows of nested runs)."""
    return [r for r in rows if not is_nested(r)], [r for r in rows if is_nested(r)]


def table(runs: list[dict], samples: list[dict]) -> tables.Table:
    by_run = defaultdict(list)
    for s in samples:
        by_run[s["run_id"]].append(s)
    rows = []
    for r in runs:
        if not is_nested(r):
            continue
        try:
            n = json.loads(r["provenance"]).get("nested") or {}
        except (TypeError, ValueError):
            n = {}
        loops = defaultdict(list)
        for s in by_run.get(r["run_id"], []):
            if s["ops"]:
                loops[(s["impl"], s["op"], s["variant"])].append(s["ns"] / s["ops"])
        per_op = "; ".join(f"{op} {v}: {statistics.median(x):.1f} ns/op"
                           for (impl, op, v), x in sorted(loops.items())[:6])
        rows.append([r["run_id"], f"{r['arch']}/{r['accel']}/{r['cpu_model']} "
                     f"{r['kernel_variant']} {r['workload']} {r['vcpus']}v",
                     r["status"] + ("" if r["status"] == "ok" else f": {r['reason']}"),
                     str(len(by_run.get(r["run_id"], []))), per_op or "-",
                     f"{n.get('l1_cpu_model', '?')}, {n.get('l1_kernel_release', '?')}",
                     f"L0 {n.get('l0_qemu', '?')}; L1 {n.get('l1_qemu', '?')}"])
    return tables.Table(["run", "cell", "status", "windows", "median per loop (emulated twice)",
                         "L1 CPU, kernel", "QEMU"], rows, TITLE)

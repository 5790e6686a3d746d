"""The comparisons as data to take away: CSV and JSON, one row per comparison.

`make report` writes ``comparisons.csv`` and ``comparisons.json`` next to
index.html; ``python3 -m qrwbench compare --format csv|json`` prints the same
rows for its selection. The columns (:data:`COLUMNS`) are documented in
docs/analysis.md (Data to take away); the JSON holds the same rows as objects,
numbers as numbers and missing values as null, under a header naming the
selection and the statistics' settings.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from . import labels

SCHEMA = 1
# (column, what it holds); the order is the CSV's
COLUMNS = (
    ("cell", "the comparison cell as the report names it"),
    ("arch", "guest architecture"),
    ("accel", "QEMU accelerator: tcg or kvm"),
    ("cpu_model", "QEMU CPU model"),
    ("vcpus", "guest vCPUs"),
    ("workload", "atomics or rwlock"),
    ("impl", "inline (atomics), module (the module's qrwlock copies), kernel (kernel builds)"),
    ("op", "the op (rwlock: rwlock)"),
    ("placement", "shared or percpu"),
    ("params", "the cell's module parameters, canonical JSON"),
    ("host", "the host that ran the boots (empty: the coordinating host)"),
    ("level", "in-boot (paired blocks of the same boots) or kernel (kernel builds: boots)"),
    ("variant", "the variant compared"),
    ("baseline", "the variant it is compared against"),
    ("estimate_pct", "change of throughput, variant against baseline, percent (+ faster)"),
    ("ci_low_pct", "95 % CI of the change, low end, percent"),
    ("ci_high_pct", "95 % CI of the change, high end, percent"),
    ("ratio", "throughput ratio variant / baseline (1 + estimate_pct / 100)"),
    ("p", "p value, raw"),
    ("p_adjusted", "p value adjusted within the family (Holm or BH)"),
    ("verdict", "slower, faster, equivalent or inconclusive"),
    ("verdict_text", "the verdict as the report words it"),
    ("label", "identical code, emulator-blind, distinguishable, or empty where unknown"),
    ("n", "paired blocks (in-boot) or boots per side (kernel, 'a+b')"),
    ("boots", "boots the comparison drew on (both sides)"),
    ("median_mops", "median throughput of the variant, Mops/s"),
    ("baseline_median_mops", "median throughput of the baseline, Mops/s"),
    ("ended_by", "what ended the comparison's boots in make bench (planner), or empty"),
    ("commit", "rig commit(s) of those boots, ';'-separated"),
    ("kernel_commit", "kernel tree commit(s) of those boots, ';'-separated"),
)
NAMES = tuple(c for c, _ in COLUMNS)


def _num(x):
    """A float for the row, None for a missing value (nan, not judged)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


def _pct(ratio, judged: bool):
    return _num((ratio - 1.0) * 100.0) if judged else None


def _commits(c, runs: dict, key: str) -> str:
    return ";".join(sorted({runs[r][key] for r in c.runs if r in runs and runs[r].get(key)}))


def rows(cset, runs, audit) -> list[dict]:
    """One dict per comparison of ``cset`` (keys :data:`NAMES`), in the long
    table's order. ``runs``: the selection's run rows (their commits);
    ``audit``: the audit the comparisons were labeled with (or None)."""
    by_id = {r["run_id"]: r for r in runs}
    out = []
    for c in sorted(cset.comparisons, key=lambda c: (c.cell, c.variant)):
        t, cell = c.test, c.cell
        out.append({
            "cell": cell.label(), "arch": cell.arch, "accel": cell.accel,
            "cpu_model": cell.cpu, "vcpus": cell.vcpus, "workload": cell.workload,
            "impl": cell.impl, "op": cell.op, "placement": cell.placement,
            "params": cell.params, "host": cell.host, "level": c.level,
            "variant": c.variant, "baseline": c.baseline,
            "estimate_pct": _pct(t.ratio, t.judged),
            "ci_low_pct": _pct(t.ratio_low, t.judged),
            "ci_high_pct": _pct(t.ratio_high, t.judged),
            "ratio": _num(t.ratio) if t.judged else None,
            "p": _num(t.p_value), "p_adjusted": _num(c.p_adjusted),
            "verdict": c.kind, "verdict_text": c.verdict,
            "label": labels.label(c, audit),
            "n": str(t.n_a) if t.unit == "block" else f"{t.n_a}+{t.n_b}",
            "boots": len(c.runs),
            "median_mops": _num(c.summary.median / 1e6),
            "baseline_median_mops": _num(c.base_summary.median / 1e6),
            "ended_by": c.ended_by or "",
            "commit": _commits(c, by_id, "rig_commit"),
            "kernel_commit": _commits(c, by_id, "kernel_tree_commit"),
        })
    return out


def to_csv(rows_: list[dict]) -> str:
    """CSV with a header line; missing values are empty, floats at full precision."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=NAMES, lineterminator="\n")
    w.writeheader()
    for r in rows_:
        w.writerow({k: "" if r[k] is None else repr(r[k]) if isinstance(r[k], float)
                    else r[k] for k in NAMES})
    return buf.getvalue()


def header(selection_label: str, cset) -> dict:
    """The JSON's header: what was selected and how it was judged."""
    return {"schema": SCHEMA, "selection": selection_label,
            "baselines": dict(sorted(cset.baselines.items())), "alpha": cset.alpha,
            "correction": cset.correction, "columns": dict(COLUMNS)}


def to_json(rows_: list[dict], head: dict) -> str:
    return json.dumps({**head, "comparisons": rows_}, indent=1, allow_nan=False) + "\n"


def write(out_dir, rows_: list[dict], head: dict) -> dict:
    """Write comparisons.csv and comparisons.json into ``out_dir``; their paths."""
    out_dir = Path(out_dir)
    paths = {"csv": out_dir / "comparisons.csv", "json": out_dir / "comparisons.json"}
    paths["csv"].write_text(to_csv(rows_), encoding="utf-8")
    paths["json"].write_text(to_json(rows_, head), encoding="utf-8")
    return {k: str(v) for k, v in paths.items()}

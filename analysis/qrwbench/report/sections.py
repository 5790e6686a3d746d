"""The report's per-topic sections: the tables below the comparisons
(calibration, noise, harness overhead, ns per op, vCPU sweep, reads and
writes, fairness, host perf, guest PMU, provenance, cells not compared,
failed runs), the sentences beside them (A/A summary, weak-memory canaries)
and the summary lines at the top. Each builder takes what the analysis
(:mod:`analyse`) computed and returns a :class:`tables.Table` or text."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import numpy as np

from .. import vocab
from ..cell import Cell, canonical_json
from ..results import records
from ..analysis import calibration, compare, harness
from . import litmus, tables
from .selection import Selection


def aa_table(aa: calibration.AAReport) -> tables.Table:
    """Calibration: each A/A comparison (copy 1 vs copy 0, halves of a
    kernel's boots) and the injected barrier, with its result."""
    rows = []
    for r in aa.results:
        t = r.test
        if r.counted:
            result = "detected" if r.detected else "MISSED"
        elif r.kind == "inject":
            result = ("differs (shared line: not counted)" if r.significant
                      else "no difference (shared line: not counted)")
        else:
            result = "FALSE POSITIVE" if r.significant else "ok"
        rows.append([r.kind, r.cell.label(), r.variant, r.what,
                     f"{t.n_a} blocks" if t.unit == "block" else f"{t.n_a}+{t.n_b} boots",
                     f"{tables.fmt_ratio(t.ratio)} [{tables.fmt_ratio(t.ratio_low)}, "
                     f"{tables.fmt_ratio(t.ratio_high)}]" if t.judged else "-",
                     tables.fmt_p(t.p_value),
                     result if t.judged else f"not judged: {t.why}"])
    return tables.Table(["kind", "cell", "variant", "compared", "n", "ratio [95% CI]",
                         "p (raw)", "result"], rows,
                        "Calibration: A/A (copy, boot) and the injected barrier")


def aa_summary(aa: calibration.AAReport) -> str:
    """One sentence on the A/A control: how many comparisons were significant
    at alpha, or that none could be judged."""
    if not aa.n_judged:
        return (f"A/A control: none of {len(aa.results)} A/A comparisons (copy 1 vs "
                "copy 0, halves of a kernel's boots) had enough blocks or boots to judge; "
                "the false-positive rate is unknown.")
    skipped = sum(1 for r in aa.results if r.kind != "inject") - aa.n_judged
    return (f"A/A control: {aa.n_significant} of {aa.n_judged} A/A comparisons "
            f"significant at alpha {aa.alpha:g} (rate {aa.rate:.1%}; one-sided binomial "
            f"test of rate > alpha: p = {aa.p_rate_above_alpha:.2g})"
            + (f"; {skipped} more had too few blocks or boots to judge." if skipped else "."))


def summary_lines(cset: compare.ComparisonSet, aa: calibration.AAReport) -> list[str]:
    """The two machine-readable lines (end of make bench, top of the report),
    and a CALIBRATION FAILED line when the calibration does not hold."""
    out = [cset.summary_line(), calibration.calibration_line(aa)]
    failed = calibration.calibration_failed(aa)
    if failed:
        out.append("CALIBRATION FAILED: " + "; ".join(failed) +
                   ": treat the verdicts with care")
    return out


def noise_table(noise) -> tables.Table:
    """Within- and between-boot CV per cell, variant and copy
    (:func:`qrwbench.analysis.noise.within_boot_cv`'s rows)."""
    rows = [[n["cell"].label(), n["variant"], str(n["copy"]), str(n["runs"]),
             str(n["reps"]), tables.fmt_pct(n["within_cv"] * 100, signed=False),
             tables.fmt_pct(n["between_cv"] * 100, signed=False)] for n in noise]
    return tables.Table(["cell", "variant", "copy", "runs", "reps", "within-boot CV",
                         "between-boot CV"], rows,
                        "Noise (targets: uncontended atomics <= 2 %, rwlock <= 5 %)")


def fair_table(fair, limit=300) -> tables.Table:
    """Per-thread fairness of the multi-threaded runs (the first ``limit``
    rows of :func:`qrwbench.analysis.fairness.run_fairness`)."""
    rows = [[f["run_id"], f["cell"].label(), f["variant"], str(f["copy"]),
             str(f["threads"]), f"{f['min']:.0f}", f"{f['max']:.0f}",
             tables.fmt_ratio(f["min_max"]), tables.fmt_ratio(f["jain"]),
             tables.fmt_ratio(f["jain_rep_median"])]
            for f in fair[:limit] if f["threads"] > 1]
    title = "Fairness per run (per-thread ops summed over reps)"
    if len(fair) > limit:
        title += f"; first {limit} of {len(fair)}"
    return tables.Table(["run", "cell", "variant", "copy", "threads", "min", "max",
                         "min/max", "Jain", "Jain (median rep)"], rows, title)


def rw_table(samples) -> tables.Table:
    """Reads and writes of the workloads whose results split every op into
    one of them (rwlock)."""
    acc = defaultdict(lambda: defaultdict(list))
    for s in samples:
        if _reads_writes(s["workload"]) and s["copy"] == 0:
            k = (Cell.of(s), s["variant"])
            acc[k]["reads"].append(s["reads"] * 1e9 / s["ns"])
            acc[k]["writes"].append(s["writes"] * 1e9 / s["ns"])
            acc[k]["violations"].append(s["violations"])
    rows = []
    for (cell, variant), d in sorted(acc.items()):
        v = d["violations"]
        viol = "checker off" if all(x == -1 for x in v) else str(sum(x for x in v if x > 0))
        rows.append([cell.label(), variant, str(len(d["reads"])),
                     tables.fmt_rate(float(np.median(d["reads"]))),
                     tables.fmt_rate(float(np.median(d["writes"]))), viol])
    return tables.Table(["cell", "variant", "n", "reads Mops/s (median)",
                         "writes Mops/s (median)", "exclusion violations"], rows,
                        f"{', '.join(n for n in vocab.WORKLOAD_TABLE if _reads_writes(n))}: "
                        "reads and writes")


def _reads_writes(workload: str) -> bool:
    return set(records.READ_WRITE_FIELDS) <= set(vocab.workload(workload).fields)


def overhead_table(samples) -> tables.Table:
    """Per group: the harness's cost per op (the rep's `empty` op, or rwlock's
    no-lock harness; `overhead_ps`) against the median cost of the measured ops."""
    acc = defaultdict(lambda: {"ovh": [], "op": []})
    for s in samples:
        if s["copy"] != 0 or s["op"] == "empty" or s["ops"] <= 0:
            continue
        k = (s["arch"], s["accel"], s["cpu_model"], s["vcpus"], s["workload"], s["placement"])
        per_op_ns = s["ns"] * s["threads"] / s["ops"]
        acc[k]["ovh"].append(s["overhead_ps"] / 1000.0)
        acc[k]["op"].append(per_op_ns)
    rows = []
    for (arch, accel, cpu, vcpus, wl, place), d in sorted(acc.items()):
        ovh, op = float(np.median(d["ovh"])), float(np.median(d["op"]))
        rows.append([f"{arch}/{accel}/{cpu}/{vcpus}v {wl} {place}", str(len(d["op"])),
                     f"{ovh:.2f}", f"{op:.2f}", f"{float(np.min(d['op'])):.2f}",
                     tables.fmt_pct(100.0 * ovh / op, signed=False) if op > 0 else "-"])
    return tables.Table(["group", "n", "harness ns/op (median)", "op ns/op (median)",
                         "op ns/op (fastest)", "harness share of the median op"], rows,
                        "Harness overhead (per op and thread; the rep's empty op, rwlock: "
                        "the no-lock loop; included in every figure, not subtracted)")


def op_cost_table(samples) -> tables.Table:
    """Atomics: ns per op raw and less the harness (harness.op_costs)."""
    rows = []
    for c in harness.op_costs(samples):
        lo, hi = c.ns_ci
        slo, shi = c.share_ci
        has = c.share is not None and c.share.judged
        rows.append([c.cell.label(), c.variant, str(c.ns.n_boots[0]),
                     f"{c.ns_per_op:.3f} [{lo:.3f}, {hi:.3f}]",
                     f"{c.less_harness:.3f}" if has else "-",
                     f"{100 * c.harness_share:.1f} % [{100 * slo:.1f}, {100 * shi:.1f}]" if has
                     else ("(the harness)" if (c.cell.op, c.variant) == harness.EMPTY else "-")])
    return tables.Table(["cell", "variant", "boots", "ns/op [95% CI]", "ns/op less the harness",
                         "harness share [95% CI]"], rows,
                        "Atomics: ns per op and thread (copy 0), raw and less the harness (the "
                        "empty op in the same blocks; geometric mean over boots)")


PERF_COLUMNS = (("task-clock", "task-clock ms"), ("context-switches", "context switches"),
                ("cpu-migrations", "CPU migrations"), ("cycles", "cycles"),
                ("instructions", "instructions"))


def _run_label(r: dict) -> str:
    return (f"{r['arch']}/{r['accel']}/{r['cpu_model']} {r['kernel_variant']} "
            f"{r['workload']} {r['vcpus']}v")


def perf_table(sel: Selection, perf_rows: list[dict]) -> tables.Table:
    """Host-side perf of the QEMU process per cell: medians over the runs
    (whole boots, so guest boot and power-off are included), "not supported"
    where the host cannot count an event; with KVM the most frequent exits."""
    runs = {r["run_id"]: r for r in sel.runs}
    by = defaultdict(lambda: defaultdict(list))
    exits = defaultdict(Counter)
    for row in perf_rows:
        r = runs.get(row["run_id"])
        if r is None:
            continue
        key = (_run_label(r), r["pinned"])
        if row["tool"] == "stat":
            by[key][row["event"]].append(row["value"] if row["supported"] else None)
        else:
            exits[key][row["event"]] += row["value"]
    rows = []
    for key in sorted(set(by) | set(exits), key=lambda k: (k[0], str(k[1]))):
        d = by[key]
        cols = []
        for ev, _ in PERF_COLUMNS:
            vals = d.get(ev, [])
            got = [v for v in vals if v is not None]
            if not vals:
                cols.append("-")
            elif not got:
                cols.append("not supported")
            else:
                cols.append(f"{float(np.median(got)):.4g}")
        n = max((len(v) for v in d.values()), default=0)
        top = ", ".join(f"{k} {v:.0f}" for k, v in exits[key].most_common(3)) or "-"
        rows.append([key[0], {None: "no", 0: "failed", 1: "yes"}[key[1]], str(n), *cols, top])
    return tables.Table(["cell", "pinned", "runs", *(h for _, h in PERF_COLUMNS),
                         "KVM exits (perf kvm stat, top 3)"], rows,
                        "Host perf stat of the QEMU process (median per boot)")


def sweep_table(samples) -> tables.Table:
    """Throughput vs vCPUs: median Mops/s per cell (all but vCPUs), variant and
    vCPU count, for cells measured at more than one count; '*' marks
    overcommitted points (more vCPUs than host CPUs)."""
    acc = defaultdict(list)
    oc = set()
    for s in samples:
        if s["copy"] != 0:
            continue
        cell = Cell.of(s)
        p = cell.params_dict()
        if p.get("threads") == cell.vcpus:      # one thread per vCPU: not a parameter here
            p.pop("threads")
        key = (cell.replace(vcpus=0, params=canonical_json(p)), s["variant"])
        acc[(key, s["vcpus"])].append(s["throughput"])
        if s.get("overcommitted"):
            oc.add((key, s["vcpus"]))
    counts = defaultdict(set)
    for key, n in acc:
        counts[key].add(n)
    swept = {k: v for k, v in counts.items() if len(v) > 1}
    cols = sorted(set().union(*swept.values())) if swept else []
    rows = []
    for (cell, variant) in sorted(swept, key=lambda k: (k[0].label(), k[1])):
        row = [cell.label().replace("/0v ", " "), variant]
        for n in cols:
            x = acc.get(((cell, variant), n))
            row.append("-" if not x else tables.fmt_rate(float(np.median(x))) +
                       ("*" if ((cell, variant), n) in oc else ""))
        rows.append(row)
    return tables.Table(["cell", "variant", *(f"{n}v" for n in cols)], rows,
                        "Throughput vs vCPUs (median Mops/s; * overcommitted)")


def pmu_table(sel: Selection) -> tables.Table:
    """Guest-side counters (the module's in-kernel perf events): median cycles
    and instructions per op (summed over threads / ops) per cell and variant
    where the guest had a PMU; one row per guest without one, with why."""
    acc = defaultdict(lambda: {"cycles": [], "instructions": []})
    for s in sel.samples:
        if s["copy"] != 0 or not s["ops"]:
            continue
        for k in ("cycles", "instructions"):
            if s.get(k) is not None:
                acc[(Cell.of(s), s["variant"])][k].append(s[k] / s["ops"])
    rows = []
    for (cell, variant), d in sorted(acc.items(), key=lambda kv: (kv[0][0].label(), kv[0][1])):
        n = max(len(d["cycles"]), len(d["instructions"]))
        rows.append([cell.label(), variant, str(n)] +
                     [f"{float(np.median(d[k])):.4g}" if d[k] else "not counted"
                      for k in ("cycles", "instructions")])
    ok_ids = {s["run_id"] for s in sel.samples}
    why = Counter()
    for r in sel.runs:
        if r["run_id"] not in ok_ids or not r.get("begin_json"):
            continue
        pmu = json.loads(r["begin_json"]).get("pmu")
        if isinstance(pmu, dict) and pmu.get("why"):
            why[(f"{r['arch']}/{r['accel']}/{r['cpu_model']}", pmu["why"])] += 1
    for (guest, w), n in sorted(why.items()):
        rows.append([guest, "(all)", str(n) + " runs", f"not counted: {w}", ""])
    return tables.Table(["cell", "variant", "n", "guest cycles/op", "guest instructions/op"], rows,
                        "Guest PMU counters (module, in-kernel perf events; arm64 TCG "
                        "'cycles' are QEMU's 1 GHz virtual clock)")


def provenance_table(sel: Selection) -> tables.Table:
    """What the selection's runs were made with (rig and kernel commits,
    compiler, QEMU, CPUs, ...): each field's most frequent values and counts."""
    fields = [("rig commit", lambda r: f"{(r['rig_commit'] or '?')[:12]}"
                                       f"{' (dirty)' if r['rig_dirty'] else ''}"),
              ("kernel tree commit", lambda r: f"{(r['kernel_tree_commit'] or '?')[:12]} "
                                               f"{r['kernel_tree_subject'] or ''}".strip()),
              ("kernel release", lambda r: r["kernel_release"]),
              ("compiler", lambda r: r["compiler"]),
              ("QEMU", lambda r: r["qemu_version"]),
              ("accel / CPU model", lambda r: f"{r['accel']} / {r['cpu_model']}"),
              ("host CPU", lambda r: f"{r['host_cpu_model']} x {r['host_cpus']}"),
              ("vCPUs pinned", lambda r: {None: "no", 0: "asked, failed", 1: "yes"}[r["pinned"]]),
              ("config sha256", lambda r: (r["config_sha256"] or "?")[:16]),
              ("status", lambda r: r["status"])]
    rows = []
    for name, get in fields:
        counts = Counter(str(get(r)) for r in sel.runs)
        rows.append([name, "; ".join(f"{v} ({n} runs)" for v, n in counts.most_common(8))])
    return tables.Table(["what", "values"], rows, "Provenance")


def failed_table(sel: Selection) -> tables.Table:
    """The selection's failed runs and why (not in the statistics)."""
    rows = [[r["run_id"], r["reason"]] for r in sel.runs if r["status"] == "failed"]
    return tables.Table(["run", "reason"], rows, "Failed runs (not in the statistics)")


def skipped_table(cset) -> tables.Table:
    """The cells the comparison set did not compare, and why."""
    return tables.Table(["cell", "why not compared"],
                        [[c.label(), why] for c, why in cset.skipped], "Cells not compared")


def canary_md(canaries) -> str:
    """The canary table (litmus.table) of the last `make torture`, or why not."""
    if canaries is None:
        return ("Weak-memory canaries: none found (make torture writes "
                "build/torture/canaries.json): this report cannot say which reorderings "
                "the backend can show.")
    text, _bad = litmus.table(canaries)
    return ("Weak-memory canaries (the last make torture, bench/module/qrwb_litmus.def; "
            "a forbidden outcome seen is a bug):\n\n" + text)


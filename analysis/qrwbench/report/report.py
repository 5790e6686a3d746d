"""`make report`: build/report/index.html (+ report.md, plots/) from the results DB.

``/usr/bin/python3 -m qrwbench report [--db PATH] [--out build/report]``
(options: qrwbench.cli). Everything is computed
first; files are written only when the selection is valid, so bad input (no
DB, an empty selection, a missing baseline variant) writes nothing.

The selection is one rig commit (default: the one with the most recent run;
``--commit all`` pools every commit). History plots always use every commit.
"""

from __future__ import annotations

import html
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import gitutil, matrix, outputs, vocab
from ..errors import QrwbenchError
from ..cell import Cell, canonical_json
from ..results import records, store
from ..analysis import (calibration, codeid, compare, fairness, harness, history, noise,
                        planner, windows)
from ..defaults import ALPHA
from . import browser, console, export, filtertable, litmus, nested, plots, summary, tables

TCG_CAVEAT = "TCG: emulated; ordering costs reflect QEMU's translation"
KVM_CAVEAT = "KVM unavailable on this host: {reason}"


@dataclass
class Selection:
    label: str                  # shown in the report header
    rig_commit: str | None      # None: all commits
    samples: list[dict]
    runs: list[dict]            # ok and failed runs of the selection


@dataclass
class Analysis:
    selection: Selection
    cset: compare.ComparisonSet
    aa: calibration.AAReport
    noise: list[dict]
    fair: list[dict]
    histories: list[history.History]
    caveats: list[str]
    audit: codeid.Audit | None
    agreement: list[list[str]] = field(default_factory=list)
    perf: list[dict] = field(default_factory=list)     # run_perf rows of the ok runs
    canaries: list | None = None    # (target, litmus record) of make torture's canary boots
    nested: tables.Table | None = None      # make kvm-nested's runs, listed apart


# ---------------------------------------------------------------- selection

def select(conn, commit: str = "latest", repo=".") -> Selection:
    """The samples and runs of one rig commit ('latest', 'all', 'HEAD', sha/prefix),
    without make kvm-nested's runs (nested.py: listed apart, never pooled)."""
    runs, nested_runs = nested.split(store.load_runs(conn))
    if not runs:
        raise QrwbenchError("empty selection: the results DB holds no runs" + (
            f" but {len(nested_runs)} of make kvm-nested, which are not compared: "
            "run make bench" if nested_runs else ""))
    if commit == "all":
        sel, label = None, "all rig commits"
    else:
        known = store.commits_with_results(conn, "rig", exclude_host=nested.HOST)
        if not known:
            n_failed = sum(r["status"] == "failed" for r in runs)
            raise QrwbenchError(f"empty selection: no ok runs in the results DB "
                                f"({n_failed} failed runs)")
        if commit == "latest":
            sel = known[-1]["commit"]
        elif commit == "HEAD":
            sha = gitutil.rev_parse(repo, "HEAD")
            sel = store.resolve_commit(conn, sha, "rig") if not any(
                k["commit"] == sha for k in known) else sha
        else:
            sel = store.resolve_commit(conn, commit, "rig")
        label = f"rig commit {sel[:12]}"
    samples = nested.split(store.load_samples(conn, rig_commit=sel))[0]
    if not samples:
        raise QrwbenchError(f"empty selection: no samples of ok runs for {label}")
    runs = [r for r in runs if sel is None or r["rig_commit"] == sel]
    return Selection(label, sel, samples, runs)


# ----------------------------------------------------------------- analysis

def _caveats(sel: Selection, cset, aa, audit) -> list[str]:
    ok_ids = {s["run_id"] for s in sel.samples}
    ok_runs = [r for r in sel.runs if r["run_id"] in ok_ids]
    out = []
    if any(s["accel"] == "tcg" for s in sel.samples):
        out.append(TCG_CAVEAT)
    reasons = sorted({r["kvm_reason"] or "no reason recorded" for r in sel.runs
                      if r["kvm_usable"] == 0 and r["kvm_reason"] != "not asked for"})
    out += [KVM_CAVEAT.format(reason=r) for r in reasons]
    oc = sum(1 for r in ok_runs if r["overcommitted"])
    if oc:
        out.append(f"{oc} runs were overcommitted (more vCPUs than host CPUs): their "
                   "points are marked; contention numbers there include host scheduling")
    dirty = sum(1 for r in ok_runs if r["rig_dirty"])
    if dirty:
        out.append(f"{dirty} runs were made from a dirty rig tree")
    failed = sum(1 for r in sel.runs if r["status"] == "failed")
    if failed:
        out.append(f"{failed} runs failed and are not in the statistics (listed below)")
    if audit is None:
        out.append("no ordering audit found (make audit): comparisons of variants that "
                   "compile to identical code are not labeled")
    else:
        out += audit.notes_for({c.cell for c in cset.comparisons})
        nb = sum(c.emulator_blind for c in cset.comparisons)
        if audit.blind is None:
            out.append("no emulator audit (make audit writes build/audit/emulator.json): "
                       "comparisons TCG cannot tell apart are not labeled")
        elif nb:
            out.append(f"{nb} comparisons are emulator-blind (different guest code, the same "
                       "TCG ops: make audit's emulator audit): their verdicts say nothing "
                       "about a CPU")
    if aa.n_judged and aa.p_rate_above_alpha < 0.05:
        out.append(f"A/A control: {aa.n_significant} of {aa.n_judged} A/A comparisons "
                   f"were significant ({aa.rate:.0%} > alpha {aa.alpha:g}): the harness "
                   "or layout adds differences; treat small effects as noise")
    return out


def _agreement(cset) -> list[list[str]]:
    """Workloads with an in-boot reference (Workload.kernel_ref; rwlock: the
    module's copies): does the kernel-build comparison agree with the
    in-module one?"""
    by = {}
    for c in cset.comparisons:
        wl = vocab.workload(c.cell.workload)
        if wl.kernel_ref and c.cell.impl in wl.impls:
            by[(c.cell.replace(impl=""), c.variant, c.cell.impl)] = c
    rows = []
    for (cell, variant, impl), k in sorted(by.items(), key=lambda kv: kv[0][:2]):
        ref = vocab.workload(cell.workload).kernel_ref
        if impl != "kernel" or (cell, variant, ref) not in by:
            continue
        m = by[(cell, variant, ref)]
        agree = "yes" if k.verdict == m.verdict else "no"
        rows.append([cell.replace(impl=f"kernel/{ref}").label(), variant,
                     tables.fmt_pct(k.test.pct_change) if k.test.judged else "-",
                     k.verdict, tables.fmt_pct(m.test.pct_change) if m.test.judged else "-",
                     m.verdict, agree])
    return rows


def mark_ended_by(cset, runs: list[dict], ended: dict) -> None:
    """Each comparison's stopping reason, from the plan `make bench` stored
    (``store.load_plan``; judged against the default targets)."""
    if not ended:
        return
    run_cell = {r["run_id"]: c.key() for r in runs if (c := Cell.of_run(r))}
    for c in cset.comparisons:
        c.ended_by = planner.comparison_ended_by(c, matrix.DEFAULT_TARGET_PCT, run_cell, ended)


def analyse(conn, *, commit="latest", audit=None, baselines=None, alpha=ALPHA,
            correction="holm", min_effect=0.0, repo=".",
            n_resamples=windows.N_RESAMPLES) -> Analysis:
    sel = select(conn, commit, repo)
    identical = audit.is_identical if audit else None
    cset = compare.compare_cells(sel.samples, baselines=baselines, alpha=alpha,
                                 correction=correction, min_effect=min_effect,
                                 n_resamples=n_resamples, identical=identical,
                                 blind=audit.is_blind if audit else None)
    aa = calibration.aa_control(sel.samples, alpha=alpha)
    mark_ended_by(cset, sel.runs, store.load_plan(conn, sel.rig_commit))
    hist = history.histories(store.load_samples(conn), key="rig", repo=repo,
                             n_resamples=min(n_resamples, 1000))
    ok_ids = sorted({s["run_id"] for s in sel.samples})
    nested_runs = nested.split(store.load_runs(conn))[1]
    nested_table = nested.table(nested_runs, store.load_samples(
        conn, run_ids=[r["run_id"] for r in nested_runs])) if nested_runs else None
    return Analysis(sel, cset, aa, noise.within_boot_cv(sel.samples),
                    fairness.run_fairness(sel.samples), hist,
                    _caveats(sel, cset, aa, audit), audit, _agreement(cset),
                    store.load_perf(conn, ok_ids), litmus.load(), nested_table)


# ------------------------------------------------------------------- tables

def _aa_table(aa: calibration.AAReport) -> tables.Table:
    rows = []
    for r in aa.results:
        t, e = r.test, r.effect
        if r.kind == "inject" and not calibration.calibrates(r.cell):
            result = ("differs (shared line: not counted)" if r.significant
                      else "no difference (shared line: not counted)")
        elif r.kind == "inject":
            result = ("detected" if r.significant and e.estimate < 0 else "MISSED")
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


def _aa_summary(aa: calibration.AAReport) -> str:
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


def _noise_table(noise) -> tables.Table:
    rows = [[n["cell"].label(), n["variant"], str(n["copy"]), str(n["runs"]),
             str(n["reps"]), tables.fmt_pct(n["within_cv"] * 100, signed=False),
             tables.fmt_pct(n["between_cv"] * 100, signed=False)] for n in noise]
    return tables.Table(["cell", "variant", "copy", "runs", "reps", "within-boot CV",
                         "between-boot CV"], rows,
                        "Noise (targets: uncontended atomics <= 2 %, rwlock <= 5 %)")


def _fair_table(fair, limit=300) -> tables.Table:
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


def _rw_table(samples) -> tables.Table:
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


def _overhead_table(samples) -> tables.Table:
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


def _op_cost_table(samples) -> tables.Table:
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


def _perf_table(sel: Selection, perf_rows: list[dict]) -> tables.Table:
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


def _sweep_table(samples) -> tables.Table:
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


def _pmu_table(sel: Selection) -> tables.Table:
    """Guest-side counters (the module's in-kernel perf events): median cycles
    and instructions per op (summed over threads / ops) per cell and variant
    where the guest had a PMU; one row per guest without one, with why."""
    import json
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


def _provenance_table(sel: Selection) -> tables.Table:
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


def _failed_table(sel: Selection) -> tables.Table:
    rows = [[r["run_id"], r["reason"]] for r in sel.runs if r["status"] == "failed"]
    return tables.Table(["run", "reason"], rows, "Failed runs (not in the statistics)")


def _skipped_table(cset) -> tables.Table:
    return tables.Table(["cell", "why not compared"],
                        [[c.label(), why] for c, why in cset.skipped], "Cells not compared")


# ------------------------------------------------------------------ writing

_CSS = """body{font-family:sans-serif;margin:1.5em;max-width:1400px}
table{border-collapse:collapse;font-size:12px;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#eee}.caveat{background:#fff3cd;padding:4px 8px;margin:2px 0}
img{max-width:100%;border:1px solid #ddd;margin:4px 0}"""


def _canary_md(canaries) -> str:
    """The canary table (litmus.table) of the last `make torture`, or why not."""
    if canaries is None:
        return ("Weak-memory canaries: none found (make torture writes "
                "build/torture/canaries.json): this report cannot say which reorderings "
                "the backend can show.")
    text, _bad = litmus.table(canaries)
    return ("Weak-memory canaries (the last make torture, bench/module/qrwb_litmus.def; "
            "a forbidden outcome seen is a bug):\n\n" + text)


def _write(a: Analysis, out: Path, *, n_resamples: int) -> dict:
    plot_dir = out / "plots"
    oc_cells = {Cell.of(s) for s in a.selection.samples if s.get("overcommitted")}
    figs = {
        "Throughput vs vCPUs": plots.throughput_vs_vcpus(a.selection.samples, plot_dir,
                                                         n_resamples=n_resamples),
        "Ratio to baseline": plots.ratio_bars(a.cset.comparisons, plot_dir,
                                              overcommitted_cells=oc_cells),
        "rwlock write-fraction sweep": plots.write_fraction_sweep(
            a.selection.samples, plot_dir, n_resamples=n_resamples),
        "Per-thread fairness": plots.fairness_plot(a.fair, plot_dir),
    }
    hist_figs, change_lines = [], []
    for h in a.histories:
        change_lines += h.change_lines()
        if len(hist_figs) < plots.MAX_FIGURES and (h.changes or len(a.histories) <= 40):
            hist_figs.append(plots.history_plot(h.metric, h.commits, h.summaries,
                                                h.changes, plot_dir))
    figs["History across rig commits"] = hist_figs

    comp = tables.comparison_table(a.cset, title="Comparisons")
    perf_table = _perf_table(a.selection, a.perf)
    pmu_table = _pmu_table(a.selection)
    sweep_table = _sweep_table(a.selection.samples)
    overhead_table = _overhead_table(a.selection.samples)
    op_cost_table = _op_cost_table(a.selection.samples)
    parts = [_aa_table(a.aa), _noise_table(a.noise), overhead_table, op_cost_table, sweep_table,
             _rw_table(a.selection.samples),
             _fair_table(a.fair), perf_table, pmu_table, _provenance_table(a.selection)]
    extra = [t for t in (_skipped_table(a.cset), _failed_table(a.selection)) if t.rows]
    agree = tables.Table(["cell", "variant", "kernel build change", "kernel build verdict",
                          "in-module change", "in-module verdict", "agree"], a.agreement,
                         "rwlock: kernel builds vs in-module copies")
    corr = {"holm": "Holm", "bh": "Benjamini-Hochberg"}[a.cset.correction]
    method = (f"Each variant against the baseline "
              f"({', '.join(f'{w}: {v}' for w, v in sorted(a.cset.baselines.items()))}). "
              "In-boot comparisons (orderings, module copies): per boot the 20% trimmed "
              "mean of the block log ratios (a block is one rep of one boot, its entries run "
              "back to back), 95% t interval on the two-level (boot, block) random-effects SE. Kernel "
              "builds (different boots): one value per boot, the kernel rwlock's trimmed mean "
              "block ratio to the module's acqrel copy in the same boot, compared with Welch's t. "
              f"{corr}-adjusted per arch/accelerator/CPU model/workload, alpha "
              f"{a.cset.alpha:g}. Verdicts: slower/faster by x % [CI] when significant; "
              "equivalent within +-m % when the whole CI lies inside the margin "
              f"(+-{compare.MARGIN_PCT['in-boot']:g} % in-boot, +-{compare.MARGIN_PCT['kernel']:g} % "
              "kernel builds; m is the CI's larger bound); else inconclusive with the CI's "
              "half-width. Median throughputs: 95% percentile-bootstrap CIs of the windows.")
    top = summary_lines(a.cset, a.aa)
    e = html.escape
    answer = summary.targets(a.cset, a.audit, a.canaries)
    body = [f"<h1>qrwbench report: {e(a.selection.label)}</h1>",
            f"<p>{len(a.selection.samples)} samples from "
            f"{len({s['run_id'] for s in a.selection.samples})} ok runs; the long "
            'table, caveats and method are <a href="#comparisons-section">below</a>; the '
            'comparisons as data: <a href="comparisons.csv">CSV</a>, '
            '<a href="comparisons.json">JSON</a>.</p>']
    body += [f'<div class="caveat">{e(l)}</div>' for l in top[2:]]    # CALIBRATION FAILED
    body += [summary.html_section(answer)]
    body += [f'<pre class="summary">{e(l)}</pre>' for l in top]
    body += ["<h2>Caveats</h2>"]
    body += [f'<div class="caveat">{e(c)}</div>' for c in a.caveats] or ["<p>none</p>"]
    body += ['<h2 id="comparisons-section">Comparisons</h2>', f"<p>{e(method)}</p>",
             filtertable.html_table(comp, a.audit)]
    if a.agreement:
        body.append(agree.html())
    body += [f"<p>{e(_aa_summary(a.aa))}</p>"]
    for title, names in figs.items():
        if names:
            body.append(f"<h2>{e(title)}</h2>")
            body += [f'<p><a href="plots/{e(n)}.png"><img src="plots/{e(n)}.svg" '
                     f'alt="{e(n)}"></a></p>' for n in names]
    if change_lines:
        body += ["<h2>Change points</h2><ul>"] + [f"<li>{e(l)}</li>" for l in change_lines] \
            + ["</ul>"]
    body += ["<h2>Weak-memory canaries</h2>", f"<pre>{e(_canary_md(a.canaries))}</pre>"]
    if a.nested is not None:
        body += [f"<p>{e(nested.NOTE)}</p>", a.nested.html()]
    body += [t.html() for t in parts + extra]
    (out / "index.html").write_text(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>qrwbench report"
        f"</title><style>{_CSS}\n{summary.CSS}</style></head><body>\n" + "\n".join(body) +
        "\n</body></html>\n", encoding="utf-8")

    md = [f"# qrwbench report: {a.selection.label}", "",
          f"{len(a.selection.samples)} samples; see index.html for plots.", ""] + \
        [summary.markdown(answer), ""] + \
        [f"    {l}" for l in top] + ["",
          "## Caveats", ""] + [f"- {c}" for c in a.caveats] + [
          "", "## Comparisons", "", method, "", comp.markdown(), ""]
    if a.agreement:
        md += [agree.markdown(), ""]
    md += [_aa_summary(a.aa), ""]
    if change_lines:
        md += ["## Change points", ""] + [f"- {l}" for l in change_lines] + [""]
    md += [_noise_table(a.noise).markdown(), ""]
    for t in (overhead_table, op_cost_table, sweep_table, perf_table, pmu_table):
        if t.rows:
            md += [t.markdown(), ""]
    md += [_canary_md(a.canaries), ""]
    if a.nested is not None:
        md += [nested.NOTE, "", a.nested.markdown(), ""]
    md += [_provenance_table(a.selection).markdown(), ""]
    md += [t.markdown() + "\n" for t in extra]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    export.write(out, export.rows(a.cset, a.selection.runs, a.audit),
                 export.header(a.selection.label, a.cset))


def build(db=None, out="build/report", *, commit="latest", audit_path=None,
          baselines=None, alpha=ALPHA, correction="holm", min_effect=0.0,
          repo=".", n_resamples=windows.N_RESAMPLES, screenshot=False) -> dict:
    """Analyse and write the report; returns {'html', 'markdown', 'csv', 'json',
    'plots'} paths (comparisons.csv and .json: :mod:`export`), and with
    ``screenshot`` {'screenshot': first-screen.png or None, 'screenshot_note':
    why not} (headless Chromium, :mod:`browser`; `make report` asks for it).

    The files are rendered into a temporary directory next to ``out`` and moved
    into place only when complete, and only over an earlier report
    (:mod:`qrwbench.outputs`): any other ``out`` is refused before the analysis.
    """
    out = outputs.check(out, "report")      # before any work: never replaces what is not ours
    audit = codeid.find_audit(audit_path)
    conn = store.connect(db, create=False)
    try:
        a = analyse(conn, commit=commit, audit=audit, baselines=baselines, alpha=alpha,
                    correction=correction, min_effect=min_effect, repo=repo,
                    n_resamples=n_resamples)
    finally:
        conn.close()
    why = None
    with outputs.replacing(out, "report") as tmp:
        _write(a, tmp, n_resamples=min(n_resamples, 1000))
        if screenshot:
            why = browser.screenshot(tmp / "index.html", tmp / browser.SCREENSHOT)
    paths = {"html": str(out / "index.html"), "markdown": str(out / "report.md"),
             "csv": str(out / "comparisons.csv"), "json": str(out / "comparisons.json"),
             "plots": sorted(str(p) for p in (out / "plots").glob("*.png"))}
    if screenshot:
        paths["screenshot"] = None if why else str(out / browser.SCREENSHOT)
        paths["screenshot_note"] = why
    return paths


@dataclass
class Compared:
    """What ``compare`` computed: the selection (filtered), its comparisons,
    the A/A control and the audit they were labeled with."""
    selection: Selection
    cset: compare.ComparisonSet
    aa: calibration.AAReport
    audit: codeid.Audit | None


def compare_set(db=None, *, commit="latest", baselines=None, alpha=ALPHA,
                correction="holm", min_effect=0.0, repo=".", audit_path=None,
                n_resamples=windows.N_RESAMPLES, run_ids=None, plan_commit=None,
                **filters) -> Compared:
    """The comparisons `make bench` prints at its end and ``compare`` prints
    (as text, CSV or JSON).

    ``db``: a path or an open connection. ``commit``: as for :func:`select`;
    ``run_ids``: only these runs (the boots of one `make bench`, whatever rig
    commit each recorded).
    ``filters``: equality filters on cells (arch=, accel=, workload=, ...).
    Raises QrwbenchError (one line) for an empty selection or a missing baseline.
    """
    audit = codeid.find_audit(audit_path)
    if isinstance(db, sqlite3.Connection):
        conn, owned = db, False
    else:
        conn, owned = store.connect(db, create=False), True
    try:
        sel = select(conn, commit, repo)
        ended = store.load_plan(conn, sel.rig_commit if plan_commit is None else plan_commit)
    finally:
        if owned:
            conn.close()
    if run_ids is not None:
        keep = set(run_ids)
        sel = Selection(f"{len(keep)} boots of this make bench", sel.rig_commit,
                        [s for s in sel.samples if s["run_id"] in keep],
                        [r for r in sel.runs if r["run_id"] in keep])
    samples = [s for s in sel.samples
               if all(v is None or s[k] == v for k, v in filters.items())]
    if not samples:
        f = ", ".join(f"{k}={v}" for k, v in filters.items() if v is not None)
        raise QrwbenchError(f"empty selection: no samples for {sel.label} with {f}")
    cset = compare.compare_cells(samples, baselines=baselines, alpha=alpha,
                                 correction=correction, min_effect=min_effect,
                                 n_resamples=n_resamples,
                                 identical=audit.is_identical if audit else None,
                                 blind=audit.is_blind if audit else None)
    aa = calibration.aa_control(samples, alpha=alpha)
    mark_ended_by(cset, sel.runs, ended)
    return Compared(Selection(sel.label, sel.rig_commit, samples, sel.runs), cset, aa, audit)


def compare_text(db=None, **kw) -> str:
    """The plain-text comparison table printed at the end of `make bench`
    (arguments: :func:`compare_set`)."""
    r = compare_set(db, **kw)
    sel, cset, aa = r.selection, r.cset, r.aa
    failed = [run for run in sel.runs if run["status"] == "failed"]
    text = console.text_comparison(cset, header=f"qrwbench comparison: {sel.label}")
    text += "\n" + console.wrap(_aa_summary(aa))
    text += "".join(f"\n{console.wrap('caveat: ' + c)}" for c in _caveats(sel, cset, aa, r.audit)
                    if not c.startswith("no ordering audit"))
    if failed:
        text += f"\n{len(failed)} failed runs are not in the statistics:"
        text += "".join(f"\n{console.wrap('  ' + run['run_id'] + ': ' + run['reason'])}"
                        for run in failed[:20])
    # last: the lines tools read (CALIBRATION FAILED, when it is, just before them)
    lines = summary_lines(cset, aa)
    return text + "".join(f"\n{l}" for l in lines[2:] + lines[:2])

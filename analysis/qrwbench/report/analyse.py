"""The report's analysis: from the selection (:mod:`selection`) the
comparisons, the A/A control, noise, fairness, histories across rig commits,
the caveats that apply and the kernel-build vs in-module agreement, all
computed before anything is written (:class:`Analysis`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .. import matrix, vocab
from ..cell import Cell
from ..results import store
from ..analysis import (calibration, codeid, compare, fairness, history, hostload, noise,
                        planner, windows)
from ..defaults import ALPHA
from . import litmus, nested, tables
from .selection import Selection, select

TCG_CAVEAT = "TCG: emulated; ordering costs reflect QEMU's translation"
KVM_CAVEAT = "KVM unavailable on this host: {reason}"


@dataclass
class Analysis:
    """Everything the report shows (:mod:`page` writes it)."""
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


def _host_load(run: dict) -> dict:
    """A run's status.json host_load (run/hostload.py); {} where absent or damaged."""
    try:
        load = json.loads(run.get("status_json") or "{}").get("host_load")
    except (ValueError, AttributeError):
        return {}
    return load if isinstance(load, dict) else {}


def caveats(sel: Selection, cset, aa, audit) -> list[str]:
    """The caveats that apply to the selection's comparisons: the backend (TCG,
    KVM unavailable), overcommitted, dirty or failed runs, a missing audit and
    the audit's notes, an A/A rate above alpha."""
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
    loads = [_host_load(r) for r in ok_runs]
    if any(x.get("measured") for x in loads):
        out.append(hostload.summary_line(loads))
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


def agreement(cset) -> list[list[str]]:
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


def judge(samples, runs: list[dict], audit, ended: dict, *, alpha=ALPHA,
          **opts) -> tuple[compare.ComparisonSet, calibration.AAReport]:
    """(comparisons, A/A control) of ``samples``: the comparisons labeled
    with ``audit`` (:func:`codeid.find_audit`'s, or None) and marked with
    their stopping reasons from the stored plan ``ended``
    (:func:`mark_ended_by`; ``runs`` the selection's). ``opts``: the other
    arguments of :func:`compare.compare_cells` (baselines, correction,
    min_effect, n_resamples). The report and ``compare`` both judge so."""
    cset = compare.compare_cells(samples, alpha=alpha,
                                 identical=audit.is_identical if audit else None,
                                 blind=audit.is_blind if audit else None, **opts)
    aa = calibration.aa_control(samples, alpha=alpha)
    mark_ended_by(cset, runs, ended)
    return cset, aa


def analyse(conn, *, commit="latest", audit=None, baselines=None, alpha=ALPHA,
            correction="holm", min_effect=0.0, repo=".",
            n_resamples=windows.N_RESAMPLES) -> Analysis:
    """The selection of ``commit`` analysed (arguments: :func:`compare.compare_cells`;
    ``audit``: :func:`codeid.find_audit`'s, or None)."""
    sel = select(conn, commit, repo)
    cset, aa = judge(sel.samples, sel.runs, audit, store.load_plan(conn, sel.rig_commit),
                     baselines=baselines, alpha=alpha, correction=correction,
                     min_effect=min_effect, n_resamples=n_resamples)
    hist = history.histories(store.load_samples(conn), key="rig", repo=repo,
                             n_resamples=min(n_resamples, 1000))
    ok_ids = sorted({s["run_id"] for s in sel.samples})
    nested_runs = nested.split(store.load_runs(conn))[1]
    nested_table = nested.table(nested_runs, store.load_samples(
        conn, run_ids=[r["run_id"] for r in nested_runs])) if nested_runs else None
    return Analysis(sel, cset, aa, noise.within_boot_cv(sel.samples),
                    fairness.run_fairness(sel.samples), hist,
                    caveats(sel, cset, aa, audit), audit, agreement(cset),
                    store.load_perf(conn, ok_ids), litmus.load(), nested_table)


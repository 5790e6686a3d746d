"""Regression check between two commits (`make regress [BASE=<commit>]`).

Compares the results of a target commit (default ``HEAD``) with a base commit
(default: the nearest ancestor in git order with results for the same cells),
metric by metric (cell x variant, copy 0), with the machinery of `make bench`
(``qrwbench.analysis.effects``):

0. one observation is one boot (the commits ran in different boots): where
   the boots measured the module's own acqrel qrwlock copy next to the
   kernel's rwlock (impl=all), the boot's trimmed mean block log ratio to it,
   which cancels the boot's and the host's speed; else the boot's trimmed
   mean log throughput (``perboot.boot_values``);
1. the change is Welch's t on those values (``effects.boots``: >= 2 boots a
   side), with its 95 % CI;
2. three outcomes per metric, p Holm-adjusted over the metrics
   (``verdicts.commit_change``):
   "regression" when the adjusted p < alpha, the CI excludes 0 and the
   estimate is at least ``threshold`` slower (default 5 %; "improvement"
   mirrors it); "no change, equivalent within +-m %" when the whole CI lies
   inside +-threshold (a threshold-sized change is excluded); anything else
   (the CI holds both no change and a threshold-sized one, or a significant
   change smaller than the threshold whose CI reaches it) is "could not
   judge": more boots decide it (bisect measures them).

The output follows the kernel test robot's (0-day/LKP) reports; the exit
status is 1 when anything regressed, 0 otherwise (2 for bad input, from the CLI).
Commits are rig commits by default, or kernel tree commits (``key='kernel'``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import gitutil
from ..errors import QrwbenchError
from ..cell import Cell
from ..results import store
from ..defaults import ALPHA
from ..analysis import effects, history, noise, perboot, verdicts, windows
from ..analysis.verdicts import IMPROVEMENT, NO_CHANGE, NOT_JUDGED, REGRESSION

DEFAULT_THRESHOLD = 0.05


@dataclass
class MetricResult:
    cell: Cell
    variant: str
    base: np.ndarray
    target: np.ndarray
    test: windows.Test | None = None
    p_adjusted: float = math.nan
    status: str = NOT_JUDGED
    why: str = ""
    separate: bool = False      # 0-day's "samples separate" rule, for information
    effect: effects.Effect | None = None

    @property
    def metric(self) -> str:
        return self.cell.metric(self.variant)


@dataclass
class RegressResult:
    target: str
    base: str
    target_subject: str
    base_subject: str
    results: list[MetricResult]
    threshold: float
    alpha: float
    notes: list[str] = field(default_factory=list)
    correction: str = "holm"

    @property
    def regressions(self):
        return [r for r in self.results if r.status == REGRESSION]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0

    def text(self) -> str:
        return format_report(self)


def _resolve(repo, ref: str, known: list[str], what: str) -> str:
    """``gitutil.rev_parse``, its error naming the commits that have results."""
    try:
        return gitutil.rev_parse(repo, ref)
    except QrwbenchError as e:
        raise QrwbenchError(f"{e}; {what} commits with results: {_listing(known)}") from None


def compare_commits(target_samples, base_samples, *, threshold=DEFAULT_THRESHOLD,
                    alpha=ALPHA, correction="holm", n_resamples=windows.N_RESAMPLES,
                    seed=0, normalize=True) -> list[MetricResult]:
    """Judge every metric present on both sides (see the module docstring);
    ``normalize=False``: raw boot values, for sides whose in-boot reference
    is not the same code."""
    tgt = perboot.boot_values_by_metric(target_samples, normalize)
    base = perboot.boot_values_by_metric(base_samples, normalize)
    results = []
    for key in sorted(set(tgt) & set(base)):
        (tv, tn, tshow), (bv, bn, bshow) = tgt[key], base[key]
        r = MetricResult(key[0], key[1], bshow, tshow)
        r.separate = noise.samples_separate(bshow, tshow)
        e = effects.boots(tv, bv)
        if not normalize:
            e.method = "boots (not normalized: the reference copy's code differs)"
        elif not (tn and bn):
            e.method = "boots (not normalized: no in-boot reference)"
        r.effect = e
        r.test = windows.effect_test(e, "boot")
        if not e.judged:
            r.why = e.why
        results.append(r)
    judged = [r for r in results if r.test is not None and r.test.judged]
    for r, p in zip(judged, verdicts.adjust([r.test.p_value for r in judged], alpha=alpha,
                                            correction=correction)):
        r.p_adjusted = float(p)
        r.status, r.why = verdicts.commit_change(r.effect, p, alpha=alpha, threshold=threshold)
        if r.status == NOT_JUDGED:
            r.test.judged = False
    return results


def _db_commit(known: list[str], sha: str) -> str | None:
    for c in known:
        if gitutil.names_commit(c, sha):
            return c
    return None


def _listing(known) -> str:
    return ", ".join(c[:12] for c in known[-10:]) or "none"


def _default_repo(conn, key: str):
    if key == "rig":
        return "."
    srcs = {r["kernel_src"] for r in store.load_runs(conn, status="ok") if r["kernel_src"]}
    repos = [s for s in srcs if gitutil.is_repo(s)]
    if len(repos) != 1:
        raise QrwbenchError("cannot tell which kernel git tree to use (kernel_src of "
                            f"the runs: {', '.join(sorted(srcs)) or 'none'}); give --repo")
    return repos[0]


def regress(db=None, *, target: str = "HEAD", base: str | None = None,
            threshold: float = DEFAULT_THRESHOLD, alpha: float = ALPHA,
            correction: str = "holm", key: str = "rig", repo=None,
            n_resamples: int = windows.N_RESAMPLES) -> RegressResult:
    """Compare ``target`` with ``base`` (see the module docstring)."""
    if not 0 < threshold < 1:
        raise QrwbenchError(f"threshold {threshold!r} must be a fraction between 0 and 1")
    field_name = history.COMMIT_FIELD[key]
    what = "rig" if key == "rig" else "kernel tree"
    conn = store.connect(db, create=False)
    try:
        repo = repo or _default_repo(conn, key)
        known = [c["commit"] for c in store.commits_with_results(conn, key)]
        tsha = _resolve(repo, target, known, what)
        tcommit = _db_commit(known, tsha)
        if tcommit is None:
            raise QrwbenchError(f"no results for {what} commit {target} ({tsha[:12]}); "
                                f"commits with results: {_listing(known)}")
        tsamples = store.load_samples(conn, **{field_name: tcommit})
        tkeys = set(perboot.boot_values_by_metric(tsamples))
        if base is not None:
            bsha = _resolve(repo, base, known, what)
            bcommit = _db_commit(known, bsha)
            if bsha == tsha or (bcommit is not None and bcommit == tcommit):
                raise QrwbenchError(f"base {base} and target {target} are the same {what} "
                                    f"commit {tsha[:12]}: give an earlier BASE (or none: the "
                                    "nearest earlier commit with results)")
            if bcommit is None:
                raise QrwbenchError(f"base {base} ({bsha[:12]}) has no results; "
                                    f"{what} commits with results: {_listing(known)}")
            bsamples = store.load_samples(conn, **{field_name: bcommit})
            if not tkeys & set(perboot.boot_values_by_metric(bsamples)):
                raise QrwbenchError(f"base {base} ({bsha[:12]}) has results but none for "
                                    f"the cells of {target} ({len(tkeys)} metrics)")
        else:
            bcommit = bsamples = None
            for anc in gitutil.ancestors(repo, tsha):
                c = _db_commit(known, anc)
                if c is None or c == tcommit:
                    continue
                cand = store.load_samples(conn, **{field_name: c})
                if tkeys & set(perboot.boot_values_by_metric(cand)):
                    bsha, bcommit, bsamples = anc, c, cand
                    break
            if bcommit is None:
                raise QrwbenchError(f"no earlier {what} commit than {target} "
                                    f"({tsha[:12]}) has results for the same cells; "
                                    f"commits with results: {_listing(known)}")
        results = compare_commits(tsamples, bsamples, threshold=threshold, alpha=alpha,
                                  correction=correction, n_resamples=n_resamples)
        dirty = sum(1 for r in store.load_runs(conn, status="ok")
                    if r[field_name] == tcommit and r["rig_dirty"])
    finally:
        conn.close()
    notes = []
    if dirty and key == "rig":
        notes.append(f"{dirty} of the target's runs were made with a dirty rig tree")
    only_t = len(tkeys - {(r.cell, r.variant) for r in results})
    if only_t:
        notes.append(f"{only_t} target metrics have no base results and were not compared")
    return RegressResult(tsha, bsha, gitutil.subject(repo, tsha), gitutil.subject(repo, bsha),
                         results, threshold, alpha, notes, correction)


def _mean_sd(x) -> str:
    m = float(np.mean(x))
    sd = float(np.std(x, ddof=1)) / m * 100 if len(x) > 1 and m else 0.0
    return f"{m / 1e6:10.4g} \u00b1 {sd:3.0f}%"


def format_report(res: RegressResult) -> str:
    lines = [f"qrwbench regress: target {res.target[:12]} {res.target_subject}",
             f"                  base   {res.base[:12]} {res.base_subject}",
             f"rule: change beyond {res.threshold:.0%} with "
             f"{'Holm' if res.correction == 'holm' else 'Benjamini-Hochberg'}-adjusted "
             f"Welch p < {res.alpha:g} and a 95% CI of the change excluding 0;",
             "one value per boot (normalized by the module's acqrel copy in the same "
             "boot where measured); no change when the whole CI lies inside "
             "+-threshold, else not judged", ""]
    for r in sorted(res.results, key=lambda r: (r.status != REGRESSION, r.metric)):
        if r.status in (REGRESSION, IMPROVEMENT):
            lines.append(f"{r.test.pct_change:+.1f}% {r.status} of {r.metric} due to commit "
                         f"{res.target[:12]} {res.target_subject}".rstrip())
    for r in res.results:
        if r.status == NOT_JUDGED:
            lines.append(f"{NOT_JUDGED} {r.metric}: {r.why}")
        elif r.status == NO_CHANGE and r.why:
            lines.append(f"{NO_CHANGE} of {r.metric}: {r.why}")
    n = {s: sum(r.status == s for r in res.results)
         for s in (REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_JUDGED)}
    lines.append(f"{n[REGRESSION]} regressions, {n[IMPROVEMENT]} improvements, "
                 f"{n[NO_CHANGE]} unchanged, {n[NOT_JUDGED]} {NOT_JUDGED}")
    lines += [f"note: {x}" for x in res.notes]
    lines += ["", f"{res.base[:12]:>16}  {res.target[:12]:>27}",
              "----------------  ---------------------------",
              "         %stddev     %change         %stddev",
              "             \\          |                \\   (mean Mops/s; %change: geometric, per boot)"]
    for r in sorted(res.results, key=lambda r: r.metric):
        change = f"{r.test.pct_change:+7.1f}%" if r.test and r.test.judged else "      -"
        mark = {REGRESSION: f" <- {REGRESSION}", IMPROVEMENT: f" <- {IMPROVEMENT}",
                NOT_JUDGED: " (not judged)"}.get(r.status, "")
        lines.append(f"{_mean_sd(r.base)}   {change}   {_mean_sd(r.target)}  "
                     f"{r.metric}{mark}")
    return "\n".join(lines)


def steps(db=None, *, key: str = "rig", repo=None, alpha: float = 0.01,
          min_change: float = 0.05) -> list[str]:
    """Change points in every metric's history (git order), one line each."""
    conn = store.connect(db, create=False)
    try:
        repo = repo or _default_repo(conn, key)
        samples = store.load_samples(conn)
    finally:
        conn.close()
    if not samples:
        raise QrwbenchError("empty selection: the results DB holds no samples of ok runs")
    lines = []
    for h in history.histories(samples, key=key, repo=repo, alpha=alpha,
                               min_change=min_change, n_resamples=200):
        lines.extend(h.change_lines())
    return lines


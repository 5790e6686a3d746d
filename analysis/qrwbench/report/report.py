"""`make report` and the `make bench` comparison: the report stage's entry points.

:func:`build` writes build/report/index.html (+ report.md, plots/) from the
results DB: ``/usr/bin/python3 -m qrwbench report [--db PATH] [--out build/report]``
(options: qrwbench.cli). Everything is computed first (:mod:`analyse`); files
are written (:mod:`page`) only when the selection is valid, so bad input (no
DB, an empty selection, a missing baseline variant) writes nothing.

The selection (:mod:`selection`) is one rig commit (default: the one with the
most recent run; ``--commit all`` pools every commit). History plots always
use every commit.

:func:`compare_set` and :func:`compare_text`: the comparisons alone, as
``compare`` prints them and `make bench` at its end.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .. import outputs
from ..errors import QrwbenchError
from ..results import store
from ..analysis import calibration, codeid, compare, windows
from ..defaults import ALPHA
from . import browser, console, page, sections
from .analyse import analyse, caveats, judge
from .selection import Selection, select


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
        page.write(a, tmp, n_resamples=min(n_resamples, 1000))
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
    cset, aa = judge(samples, sel.runs, audit, ended, baselines=baselines, alpha=alpha,
                     correction=correction, min_effect=min_effect, n_resamples=n_resamples)
    return Compared(Selection(sel.label, sel.rig_commit, samples, sel.runs), cset, aa, audit)


def compare_text(db=None, **kw) -> str:
    """The plain-text comparison table printed at the end of `make bench`
    (arguments: :func:`compare_set`)."""
    r = compare_set(db, **kw)
    sel, cset, aa = r.selection, r.cset, r.aa
    failed = [run for run in sel.runs if run["status"] == "failed"]
    text = console.text_comparison(cset, header=f"qrwbench comparison: {sel.label}")
    text += "\n" + console.wrap(sections.aa_summary(aa))
    text += "".join(f"\n{console.wrap('caveat: ' + c)}" for c in caveats(sel, cset, aa, r.audit)
                    if not c.startswith("no ordering audit"))
    if failed:
        text += f"\n{len(failed)} failed runs are not in the statistics:"
        text += "".join(f"\n{console.wrap('  ' + run['run_id'] + ': ' + run['reason'])}"
                        for run in failed[:20])
    # last: the lines tools read (CALIBRATION FAILED, when it is, just before them)
    lines = sections.summary_lines(cset, aa)
    return text + "".join(f"\n{l}" for l in lines[2:] + lines[:2])

"""The report's files: from an :class:`analyse.Analysis` the plots
(plots/*.png|svg), index.html, report.md and the comparisons as CSV and JSON
(:mod:`export`), written into one directory (:func:`write`; :func:`report.build`
picks the directory and moves it into place)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

from ..cell import Cell
from ..analysis import compare
from . import export, filtertable, matters, nested, plots, sections, summary, tables
from .analyse import Analysis

_CSS = """body{font-family:sans-serif;margin:1.5em;max-width:1400px}
table{border-collapse:collapse;font-size:12px;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
th{background:#eee}.caveat{background:#fff3cd;padding:4px 8px;margin:2px 0}
img{max-width:100%;border:1px solid #ddd;margin:4px 0}"""



@dataclass
class _Content:
    """What both pages show, each part computed once (the plots are written)."""
    a: Analysis
    figs: dict[str, list[str]]      # section title -> plot names (plots/<name>.png|svg)
    change_lines: list[str]
    top: list[str]                  # sections.summary_lines
    answer: list[summary.Target]    # the first screen
    method: str
    comp: tables.Table              # the long comparison table
    agree: tables.Table             # kernel builds vs in-module copies
    matters: tables.Table           # matters.table: programs beside the loop-level kernel builds
    aa_line: str                    # sections.aa_summary: the A/A control in a sentence
    canaries: str                   # sections.canary_md: the weak-memory canaries
    aa: tables.Table
    noise: tables.Table
    overhead: tables.Table
    op_cost: tables.Table
    sweep: tables.Table
    rw: tables.Table
    fair: tables.Table
    perf: tables.Table
    pmu: tables.Table
    provenance: tables.Table
    extra: list[tables.Table]       # cells not compared, failed runs: only when there are any


def _figures(a: Analysis, plot_dir: Path, n_resamples: int) -> tuple[dict, list[str]]:
    """Draws the plots into ``plot_dir``: ({section title: plot names}, the
    histories' change-point lines)."""
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
    return figs, change_lines


def _method(cset: compare.ComparisonSet) -> str:
    """The paragraph above the comparison table: how each verdict was reached."""
    corr = {"holm": "Holm", "bh": "Benjamini-Hochberg"}[cset.correction]
    return (f"Each variant against the baseline "
            f"({', '.join(f'{w}: {v}' for w, v in sorted(cset.baselines.items()))}). "
            "In-boot comparisons (orderings, module copies): per boot the 20% trimmed "
            "mean of the block log ratios (a block is one rep of one boot, its entries run "
            "back to back), 95% t interval on the two-level (boot, block) random-effects SE. Kernel "
            "builds (different boots): one value per boot, the kernel rwlock's trimmed mean "
            "block ratio to the module's acqrel copy in the same boot, compared with Welch's t. "
            f"{corr}-adjusted per arch/accelerator/CPU model/workload, alpha "
            f"{cset.alpha:g}. Verdicts: slower/faster by x % [CI] when significant; "
            "equivalent within +-m % when the whole CI lies inside the margin "
            f"(+-{compare.MARGIN_PCT['in-boot']:g} % in-boot, +-{compare.MARGIN_PCT['kernel']:g} % "
            "kernel builds; m is the CI's larger bound); else inconclusive with the CI's "
            "half-width. Median throughputs: 95% percentile-bootstrap CIs of the windows.")


def _content(a: Analysis, figs: dict, change_lines: list[str]) -> _Content:
    sel = a.selection
    return _Content(
        a, figs, change_lines, sections.summary_lines(a.cset, a.aa),
        summary.targets(a.cset, a.audit, a.canaries), _method(a.cset),
        tables.comparison_table(a.cset, title="Comparisons"),
        tables.Table(["cell", "variant", "kernel build change", "kernel build verdict",
                      "in-module change", "in-module verdict", "agree"], a.agreement,
                     "rwlock: kernel builds vs in-module copies"),
        matters=matters.table(a.cset),
        aa_line=sections.aa_summary(a.aa), canaries=sections.canary_md(a.canaries),
        aa=sections.aa_table(a.aa), noise=sections.noise_table(a.noise),
        overhead=sections.overhead_table(sel.samples),
        op_cost=sections.op_cost_table(sel.samples), sweep=sections.sweep_table(sel.samples),
        rw=sections.rw_table(sel.samples), fair=sections.fair_table(a.fair),
        perf=sections.perf_table(sel, a.perf), pmu=sections.pmu_table(sel),
        provenance=sections.provenance_table(sel),
        extra=[t for t in (sections.skipped_table(a.cset), sections.failed_table(sel))
               if t.rows])


def _html(c: _Content) -> str:
    """index.html: the first screen, then caveats, comparisons, plots and the sections."""
    a, top, e = c.a, c.top, html.escape
    body = [f"<h1>qrwbench report: {e(a.selection.label)}</h1>",
            f"<p>{len(a.selection.samples)} samples from "
            f"{len({s['run_id'] for s in a.selection.samples})} ok runs; the long "
            'table, caveats and method are <a href="#comparisons-section">below</a>; the '
            'comparisons as data: <a href="comparisons.csv">CSV</a>, '
            '<a href="comparisons.json">JSON</a>.</p>']
    body += [f'<div class="caveat">{e(l)}</div>' for l in top[2:]]    # CALIBRATION FAILED
    body += [summary.html_section(c.answer)]
    body += [f'<pre class="summary">{e(l)}</pre>' for l in top]
    body += ["<h2>Caveats</h2>"]
    body += [f'<div class="caveat">{e(v)}</div>' for v in a.caveats] or ["<p>none</p>"]
    body += ['<h2 id="comparisons-section">Comparisons</h2>', f"<p>{e(c.method)}</p>",
             filtertable.html_table(c.comp, a.audit)]
    if a.agreement:
        body.append(c.agree.html())
    if c.matters.rows:
        body.append(c.matters.html())
    body += [f"<p>{e(c.aa_line)}</p>"]
    for title, names in c.figs.items():
        if names:
            body.append(f"<h2>{e(title)}</h2>")
            body += [f'<p><a href="plots/{e(n)}.png"><img src="plots/{e(n)}.svg" '
                     f'alt="{e(n)}"></a></p>' for n in names]
    if c.change_lines:
        body += ["<h2>Change points</h2><ul>"] + [f"<li>{e(l)}</li>" for l in c.change_lines] \
            + ["</ul>"]
    body += ["<h2>Weak-memory canaries</h2>", f"<pre>{e(c.canaries)}</pre>"]
    if a.nested is not None:
        body += [f"<p>{e(nested.NOTE)}</p>", a.nested.html()]
    parts = [c.aa, c.noise, c.overhead, c.op_cost, c.sweep, c.rw, c.fair, c.perf, c.pmu,
             c.provenance]
    body += [t.html() for t in parts + c.extra]
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>qrwbench report"
            f"</title><style>{_CSS}\n{summary.CSS}</style></head><body>\n" + "\n".join(body) +
            "\n</body></html>\n")


def _markdown(c: _Content) -> str:
    """report.md: index.html's text without the plots (and fewer tables)."""
    a, top = c.a, c.top
    md = [f"# qrwbench report: {a.selection.label}", "",
          f"{len(a.selection.samples)} samples; see index.html for plots.", ""] + \
        [summary.markdown(c.answer), ""] + \
        [f"    {l}" for l in top] + ["",
          "## Caveats", ""] + [f"- {v}" for v in a.caveats] + [
          "", "## Comparisons", "", c.method, "", c.comp.markdown(), ""]
    if a.agreement:
        md += [c.agree.markdown(), ""]
    if c.matters.rows:
        md += [c.matters.markdown(), ""]
    md += [c.aa_line, ""]
    if c.change_lines:
        md += ["## Change points", ""] + [f"- {l}" for l in c.change_lines] + [""]
    md += [c.noise.markdown(), ""]
    for t in (c.overhead, c.op_cost, c.sweep, c.perf, c.pmu):
        if t.rows:
            md += [t.markdown(), ""]
    md += [c.canaries, ""]
    if a.nested is not None:
        md += [nested.NOTE, "", a.nested.markdown(), ""]
    md += [c.provenance.markdown(), ""]
    md += [t.markdown() + "\n" for t in c.extra]
    return "\n".join(md)


def write(a: Analysis, out: Path, *, n_resamples: int) -> None:
    """Writes the report of ``a`` into the directory ``out``: plots/, index.html,
    report.md, comparisons.csv and comparisons.json (bootstrap CIs of the plots
    with ``n_resamples``)."""
    figs, change_lines = _figures(a, out / "plots", n_resamples)
    c = _content(a, figs, change_lines)
    (out / "index.html").write_text(_html(c), encoding="utf-8")
    (out / "report.md").write_text(_markdown(c), encoding="utf-8")
    export.write(out, export.rows(a.cset, a.selection.runs, a.audit),
                 export.header(a.selection.label, a.cset))

"""Plots (matplotlib, Agg backend), each written as PNG and SVG.

Every function takes already-computed data (samples, comparisons, history) and
an output directory, and returns the stems of the files it wrote (``name`` for
``name.png`` + ``name.svg``). Overcommitted points (provenance
``overcommitted``: more vCPUs than host CPUs) are drawn with hollow ``X``
markers and named in the legend.

Nothing is cut: long titles and labels are wrapped (:func:`wrap`), never
truncated, and every figure is saved with its tight bounding box
(:data:`SAVE_KW`), so a label wider than the axes widens the image instead
of running off its edge. Every figure has a legend and its axes name units.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import numpy as np  # noqa: E402

from .. import vocab  # noqa: E402
from ..cell import Cell  # noqa: E402
from ..analysis import verdicts, windows  # noqa: E402

PER_FIGURE = 12          # panels per figure
MAX_FIGURES = 40         # per plot kind; the report says when more were left out
SAVE_KW = {"bbox_inches": "tight", "pad_inches": 0.1}     # nothing outside is cut


def wrap(text: str, width: int = 70) -> str:
    """``text`` wrapped into lines of at most ``width`` characters, broken
    after commas and blanks (a word longer than a line is split); its own
    line breaks are kept and nothing is dropped."""
    out = []
    for line in text.split("\n"):
        cur = ""
        for tok in re.split(r"(?<=[, ])", line):
            while len(tok) > width:                 # one word longer than a line
                if cur:
                    out.append(cur.rstrip())
                    cur = ""
                out.append(tok[:width])
                tok = tok[width:]
            if len(cur) + len(tok) > width and cur:
                out.append(cur.rstrip())
                cur = ""
            cur += tok
        out.append(cur.rstrip())
    return "\n".join(out)


def _slug(text: str) -> str:
    """A file-name-safe stem; long names are cut and get a hash, so they stay unique."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")
    if len(slug) > 100:
        slug = slug[:90] + "-" + hashlib.sha1(text.encode()).hexdigest()[:10]
    return slug


def _colors(variants):
    cmap = plt.get_cmap("tab10")
    return {v: cmap(i % 10) for i, v in enumerate(sorted(set(variants), key=vocab.variant_rank))}


def _save(fig, out_dir: Path, name: str) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_dir / f"{name}.png", dpi=100, **SAVE_KW)
    fig.savefig(out_dir / f"{name}.svg", **SAVE_KW)
    plt.close(fig)
    return name


LINE_IN = 0.14           # inches per line of 7-8 pt text: figures grow with their wrapped text


def _lines(*texts) -> int:
    """The most lines any of ``texts`` has."""
    return max((t.count("\n") + 1 for t in texts), default=1)


def _row_height(labels) -> float:
    """Inches per bar of a horizontal bar figure whose tick labels are ``labels``."""
    return max(0.32, LINE_IN * _lines(*labels) + 0.1)


def _panels(n: int, title_lines: int = 1):
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(5.2 * cols, (3.4 + LINE_IN * title_lines) * rows + 0.3))
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _without(params: str, *keys) -> str:
    p = json.loads(params)
    for k in keys:
        p.pop(k, None)
    return json.dumps(p, sort_keys=True, separators=(",", ":"))


def _sweep(samples, x_field: str, drop_params: tuple, n_resamples: int):
    """{group cell: {variant: {x: (Summary, overcommitted)}}} for a sweep over x_field."""
    acc = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    oc = defaultdict(bool)
    for s in samples:
        if s["copy"] != 0 or s.get(x_field) is None:
            continue
        cell = Cell.of(s)
        g = cell.replace(params=_without(cell.params, *drop_params),
                         **({"vcpus": 0} if x_field == "vcpus" else {}))
        acc[g][s["variant"]][s[x_field]].append(float(s["throughput"]))
        oc[(g, s["variant"], s[x_field])] |= bool(s.get("overcommitted"))
    out = {}
    for g, variants in acc.items():
        xs = {x for d in variants.values() for x in d}
        if len(xs) < 2:
            continue
        out[g] = {v: {x: (windows.summarize(vals, n_resamples=n_resamples),
                          oc[(g, v, x)]) for x, vals in sorted(d.items())}
                  for v, d in variants.items()}
    return out


def _draw_sweep(ax, series, colors, xlabel):
    oc_drawn = False
    for v in sorted(series, key=vocab.variant_rank):
        pts = series[v]
        xs = np.array(sorted(pts), dtype=float)
        med = np.array([pts[x][0].median for x in sorted(pts)]) / 1e6
        lo = np.array([pts[x][0].ci_low for x in sorted(pts)]) / 1e6
        hi = np.array([pts[x][0].ci_high for x in sorted(pts)]) / 1e6
        ax.plot(xs, med, "-o", color=colors[v], label=v, markersize=4)
        ax.fill_between(xs, lo, hi, color=colors[v], alpha=0.2, linewidth=0)
        for x in sorted(pts):
            if pts[x][1]:
                ax.plot([x], [pts[x][0].median / 1e6], "X", markersize=10,
                        markerfacecolor="none", markeredgecolor="black",
                        label=None if oc_drawn else "overcommitted")
                oc_drawn = True
    ax.set_xlabel(xlabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("Mops/s (median, 95% CI)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def _sweep_figures(data, out_dir, prefix, xlabel, title_of):
    written = []
    by_fig = defaultdict(list)
    for g in sorted(data):
        by_fig[(g.arch, g.accel, g.cpu, g.workload)].append(g)
    for key, groups in sorted(by_fig.items()):
        for start in range(0, len(groups), PER_FIGURE):
            if len(written) >= MAX_FIGURES:
                return written
            chunk = groups[start:start + PER_FIGURE]
            titles = [wrap(title_of(g), 60) for g in chunk]
            fig, axes = _panels(len(chunk), _lines(*titles))
            for ax, g, title in zip(axes, chunk, titles):
                colors = _colors(data[g])
                _draw_sweep(ax, data[g], colors, xlabel)
                ax.set_title(title, fontsize=8)
            fig.suptitle(" / ".join(key), fontsize=10)
            fig.tight_layout()
            name = _slug(f"{prefix}-{'-'.join(key)}-{start // PER_FIGURE}")
            written.append(_save(fig, out_dir, name))
    return written


def throughput_vs_vcpus(samples, out_dir, *, n_resamples=1000) -> list[str]:
    """Throughput against vCPUs, one line per variant with its CI band."""
    data = _sweep(samples, "vcpus", ("threads",), n_resamples)
    return _sweep_figures(data, Path(out_dir), "vcpus", "vCPUs",
                          lambda g: f"{g.impl} {g.op} {g.placement} {_short(g.params)}")


def write_fraction_sweep(samples, out_dir, *, n_resamples=1000) -> list[str]:
    """rwlock throughput against write_pct, one line per variant with its CI band."""
    rw = [s for s in samples if "write_pct" in vocab.workload(s["workload"]).result_params]
    data = _sweep(rw, "write_pct", ("write_pct",), n_resamples)
    return _sweep_figures(data, Path(out_dir), "writepct", "write %",
                          lambda g: f"{g.vcpus}v {g.impl} {_short(g.params)}")


def _varying(params_list) -> tuple[list[str], str]:
    """(parameter names whose values differ across ``params_list``, the fixed rest
    as text); 'threads' counts as fixed because vCPUs are shown."""
    dicts = [json.loads(p) for p in params_list]
    keys = sorted({k for d in dicts for k in d})
    vary = [k for k in keys if k != "threads" and len({json.dumps(d.get(k)) for d in dicts}) > 1]
    fixed = ",".join(f"{k}={dicts[0].get(k)}" for k in keys
                     if k not in vary and k != "threads")
    return vary, fixed


def _short(params: str) -> str:
    p = json.loads(params)
    return ",".join(f"{k}={v}" for k, v in sorted(p.items()))


def ratio_bars(comparisons, out_dir, *, overcommitted_cells=frozenset()) -> list[str]:
    """Ratio to the baseline with 95% CI, one horizontal bar per comparison,
    one figure per (arch, accel, cpu model, workload)."""
    out_dir = Path(out_dir)
    groups = defaultdict(list)
    for c in comparisons:
        if c.test.judged:
            groups[(c.cell.arch, c.cell.accel, c.cell.cpu, c.cell.workload)].append(c)
    written = []
    colors = {verdicts.FASTER: "tab:green", verdicts.SLOWER: "tab:red",
              verdicts.EQUIVALENT: "tab:blue"}
    for key, comps in sorted(groups.items()):
        comps.sort(key=lambda c: (c.cell, vocab.variant_rank(c.variant)))
        for start in range(0, len(comps), 40):
            if len(written) >= MAX_FIGURES:
                return written
            chunk = comps[start:start + 40]
            labels, title = _ratio_labels(chunk, key, overcommitted_cells)
            fig, ax = plt.subplots(figsize=(8, 1.0 + LINE_IN * _lines(title) +
                                            _row_height(labels) * len(chunk)))
            y = np.arange(len(chunk))
            r = np.array([c.test.ratio for c in chunk])
            err = np.array([[c.test.ratio - c.test.ratio_low for c in chunk],
                            [c.test.ratio_high - c.test.ratio for c in chunk]])
            bars = ax.barh(y, r - 1.0, left=1.0, xerr=err, capsize=3,
                           color=[colors.get(c.kind, "tab:gray") for c in chunk])
            for bar, c in zip(bars, chunk):
                if c.identical_code:
                    bar.set_hatch(HATCH["identical code"])
                elif c.emulator_blind:
                    bar.set_hatch(HATCH["emulator-blind"])
            ax.set_yticks(y, labels, fontsize=7)
            ax.axvline(1.0, color="black", linewidth=0.8)
            ax.set_xlabel("throughput ratio, variant / baseline (1 = no change; paired blocks "
                          "or normalized boots; bars: 95% CI)", fontsize=8)
            ax.set_title(title, fontsize=9)
            ax.legend(handles=_ratio_legend(chunk, colors), fontsize=7, loc="upper left",
                      bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
            ax.invert_yaxis()
            fig.tight_layout()
            written.append(_save(fig, out_dir, _slug(f"ratio-{'-'.join(key)}-{start // 40}")))
    return written


HATCH = {"identical code": "//", "emulator-blind": "xx"}


def _ratio_labels(chunk, key, overcommitted_cells) -> tuple[list[str], str]:
    """(a wrapped tick label per comparison, the wrapped title): the
    parameters that differ go to the labels, the ones all share to the title."""
    vary, fixed = _varying([c.cell.params for c in chunk])
    labels = []
    for c in chunk:
        lab = f"{c.cell.vcpus}v {c.cell.impl} {c.cell.op} {c.cell.placement} " \
              f"{c.variant}/{c.baseline}"
        p = json.loads(c.cell.params)
        extra = ",".join(f"{k}={p.get(k)}" for k in vary)
        if extra:
            lab += f" [{extra}]"
        if c.cell in overcommitted_cells:
            lab += " (overcommitted)"
        labels.append(wrap(lab, 70))
    return labels, " / ".join(key) + (f"\n{wrap(fixed, 80)}" if fixed else "")


def _ratio_legend(chunk, colors) -> list:
    """Legend entries of a ratio plot: the verdict colours, then the hatches
    of the labels its bars carry."""
    handles = [Patch(facecolor=colors.get(k, "tab:gray"), label=k)
               for k in (verdicts.FASTER, verdicts.SLOWER,
                         verdicts.EQUIVALENT, verdicts.INCONCLUSIVE)]
    for name, flag in (("identical code", "identical_code"), ("emulator-blind", "emulator_blind")):
        if any(getattr(c, flag) for c in chunk):
            handles.append(Patch(facecolor="white", edgecolor="black", hatch=HATCH[name],
                                 label=f"{name} (no CPU difference can show)"))
    return handles


def fairness_plot(fair_rows, out_dir) -> list[str]:
    """Per-thread fairness: Jain's index of each run's per-thread totals (dots)
    and the min/max ratio (crosses), one row per cell and variant."""
    out_dir = Path(out_dir)
    groups = defaultdict(lambda: defaultdict(list))
    for r in fair_rows:
        if r["copy"] != 0 or r["threads"] < 2:
            continue
        c = r["cell"]
        groups[(c.arch, c.accel, c.cpu, c.workload)][(c, r["variant"])].append(r)
    written = []
    for key, rows in sorted(groups.items()):
        items = sorted(rows.items(), key=lambda kv: (kv[0][0], vocab.variant_rank(kv[0][1])))
        for start in range(0, len(items), 40):
            if len(written) >= MAX_FIGURES:
                return written
            chunk = items[start:start + 40]
            vary, fixed = _varying([c.params for (c, _), _ in chunk])

            def label(c, v):
                p = json.loads(c.params)
                extra = ",".join(f"{k}={p.get(k)}" for k in vary)
                return wrap(f"{c.vcpus}v {c.impl} {c.op} {c.placement} {v}"
                            + (f" [{extra}]" if extra else ""), 70)

            labels = [label(c, v) for (c, v), _ in chunk]
            title = " / ".join(key) + (f"\n{wrap(fixed, 80)}" if fixed else "")
            fig, ax = plt.subplots(figsize=(8, 1.0 + LINE_IN * _lines(title) +
                                            _row_height(labels) * len(chunk)))
            for i, ((cell, variant), rs) in enumerate(chunk):
                ax.plot([x["jain"] for x in rs], [i] * len(rs), "o", color="tab:blue",
                        label="Jain's index" if i == 0 else None)
                ax.plot([x["min_max"] for x in rs], [i] * len(rs), "x", color="tab:orange",
                        label="min/max per-thread ops" if i == 0 else None)
            ax.set_yticks(range(len(chunk)), labels, fontsize=7)
            ax.set_xlim(0, 1.05)
            ax.set_xlabel("fairness per run, 0..1 (1 = every thread did the same work)")
            ax.set_title(title, fontsize=9)
            ax.invert_yaxis()
            ax.legend(fontsize=7)
            ax.grid(True, axis="x", alpha=0.3)
            fig.tight_layout()
            written.append(_save(fig, out_dir, _slug(f"fairness-{'-'.join(key)}-{start // 40}")))
    return written


def history_plot(name: str, commits, summaries, change_idx, out_dir, *,
                 title: str = "") -> str:
    """One metric across commits (git order): median with 95% CI bars; change
    points (index of the first commit of a new level) as dashed lines."""
    out_dir = Path(out_dir)
    title = wrap(title or name, 90)
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(commits) + 2), 3.6 + LINE_IN * _lines(title)))
    x = np.arange(len(commits))
    med = np.array([s.median for s in summaries]) / 1e6
    lo = np.array([s.ci_low for s in summaries]) / 1e6
    hi = np.array([s.ci_high for s in summaries]) / 1e6
    ax.errorbar(x, med, yerr=[np.nan_to_num(med - lo), np.nan_to_num(hi - med)],
                fmt="-o", capsize=3, markersize=4, label="median, 95% CI")
    for k in change_idx:
        ax.axvline(k - 0.5, color="tab:red", linestyle="--", linewidth=1)
        ax.annotate(f"change at {commits[k][:8]}", (k - 0.5, ax.get_ylim()[1]),
                    fontsize=7, color="tab:red", ha="left", va="top", rotation=90)
    ax.set_xticks(x, [c[:8] for c in commits], rotation=60, fontsize=7)
    ax.set_xlabel("rig commit (git order)")
    ax.set_ylabel("Mops/s (median, 95% CI)")
    ax.set_title(title, fontsize=8)
    if change_idx:
        ax.plot([], [], color="tab:red", linestyle="--", linewidth=1, label="change point")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return _save(fig, out_dir, _slug(f"history-{name}"))

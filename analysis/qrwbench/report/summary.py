"""The answer first: per target, what each ordering costs (the report's first screen).

A target is one arch / CPU model / accelerator / vCPU count (and host, where
several ran). Per target one compact table: a row per op family or lock path
(workload, impl, op, placement and the parameters that differ between its
rows), a column per ordering, each entry the change against the baseline
(``full`` for atomics; the workload's baseline, named in the row) with its
95 % CI, coloured by verdict, with the label (:mod:`labels`). Below it the
kernel-build verdicts per workload, and one sentence on what the backend can
and cannot show. The comparisons are the report's (one statistical family:
the verdicts are the long table's).
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from dataclasses import dataclass, field

from .. import vocab
from . import labels, litmus, tables



@dataclass
class Entry:
    text: str            # "+10.0 % [+8.1, +12.0]", "baseline", "-"
    kind: str = ""       # the verdict (slower, faster, equivalent, inconclusive), "" none
    label: str = ""      # labels.IDENTICAL, ... ("" unknown)
    verdict: str = ""    # the verdict's words (a tooltip)


@dataclass
class Grid:
    """Rows by orderings: ``cells[row][variant]`` an :class:`Entry`."""
    columns: list[str]
    rows: list[str]
    cells: dict
    fixed: str = ""      # parameters every row shares


@dataclass
class Target:
    name: str                     # "x86_64 / qemu64 / tcg / 2 vCPUs"
    key: str                      # the filter value of the long table (target_key)
    sentence: str
    in_boot: list = field(default_factory=list)   # (workload, Grid): orderings in one boot
    kernel: list = field(default_factory=list)    # (workload, Grid): kernel builds
    folded: bool = False  # no comparison can show a CPU difference (every one settled:
                          # identical code or emulator-blind)


def target_key(cell) -> str:
    """A cell's target as the summary and the long table's filter name it."""
    return (f"{cell.arch}/{cell.cpu}/{cell.accel}/{cell.vcpus}v"
            + (f" @{cell.host}" if cell.host else ""))


def entry(c, audit) -> Entry:
    t = c.test
    lab = labels.label(c, audit)
    if not t.judged:
        return Entry("not judged", c.kind, lab, c.verdict)
    lo, hi = (t.ratio_low - 1) * 100, (t.ratio_high - 1) * 100
    return Entry(f"{t.pct_change:+.1f} % [{lo:+.1f}, {hi:+.1f}]", c.kind, lab, c.verdict)


def _grid(comps, audit, row_of) -> Grid:
    """The comparisons laid out by ``row_of(cell) -> (sort key, label, params)``
    and variant; parameters equal in every row go to ``fixed``."""
    params = {}
    for c in comps:
        params.setdefault(c.cell, c.cell.params_dict())
    keys = sorted({k for p in params.values() for k in p} - {"threads"})
    vary = [k for k in keys if len({json.dumps(p.get(k)) for p in params.values()}) > 1]
    fixed = ",".join(f"{k}={next(iter(params.values())).get(k)}" for k in keys if k not in vary)
    cells, order, columns = defaultdict(dict), {}, set()
    for c in comps:
        sort_key, name = row_of(c.cell)
        extra = ",".join(f"{k}={params[c.cell].get(k)}" for k in vary)
        name += f" [{extra}]" if extra else ""
        order[name] = (sort_key, [params[c.cell].get(k, "") for k in vary], name)
        cells[name][c.variant] = entry(c, audit)
        cells[name].setdefault(c.baseline, Entry("baseline"))
        columns |= {c.variant, c.baseline}
    rows = sorted(order, key=lambda n: (order[n][0], [str(x).zfill(8) for x in order[n][1]]))
    return Grid(sorted(columns, key=vocab.variant_rank), rows, dict(cells), fixed)


def _op_row(cell):
    return (cell.workload, cell.impl, cell.op, cell.placement), \
        f"{cell.op} ({cell.impl}, {cell.placement})"


def _kernel_row(cell):
    return (cell.workload, cell.op, cell.placement), f"{cell.op} ({cell.placement})"


def sentence(comps, audit, canaries) -> str:
    """What this target's backend can and cannot show, in one sentence."""
    n = len(comps)
    count = defaultdict(int)
    for c in comps:
        count[labels.label(c, audit)] += 1
    cell = comps[0].cell
    if cell.accel == "tcg":
        s = ("Emulated (TCG): a change is the cost of QEMU's translation of the ordering, "
             f"not of a {cell.cpu} CPU")
        if audit is None:
            s += "; without make audit it is unknown which orderings compile alike"
        elif audit.blind is None:
            s += "; without the emulator audit it is unknown which orderings TCG runs alike"
        else:
            s += (f"; {count[labels.BLIND]} of {n} comparisons are emulator-blind (no "
                  f"difference can show), {count[labels.DISTINCT]} distinguishable")
    else:
        s = "On the host CPU (KVM): a change is that CPU's cost of the ordering"
        if audit is None:
            s += "; without make audit it is unknown which orderings compile alike"
    if audit is not None and count[labels.IDENTICAL]:
        s += f"; {count[labels.IDENTICAL]} of {n} compile to identical code (noise only)"
    recs = [r for t, r in canaries or () if t == f"{cell.arch}/{cell.accel}/{cell.cpu}"]
    if recs and litmus.blind_to_mp(recs):
        s += ("; its message-passing canaries never reordered, so what a weaker ordering "
              "would break cannot show here")
    if cell.vcpus == 1:
        s += "; with one vCPU no other CPU contends for the line"
    return s + "."


def targets(cset, audit, canaries=None) -> list[Target]:
    """One :class:`Target` per target of ``cset``'s comparisons: first those
    where some comparison can show a CPU difference (one not
    ``Comparison.settled``; unknown labels count: nothing says it cannot),
    then those where none can (folded), each group in arch / CPU / accel /
    vCPU order."""
    by = defaultdict(list)
    for c in cset.comparisons:
        by[target_key(c.cell)].append(c)
    out = []
    folded = {k: all(c.settled for c in comps) for k, comps in by.items()}
    for key in sorted(by, key=lambda k: (folded[k], by[k][0].cell.arch, by[k][0].cell.cpu,
                                         by[k][0].cell.accel, by[k][0].cell.vcpus,
                                         by[k][0].cell.host)):
        comps = by[key]
        cell = comps[0].cell
        name = (f"{cell.arch} / {cell.cpu} / {cell.accel} / {cell.vcpus} vCPU"
                f"{'s' if cell.vcpus != 1 else ''}" + (f" @{cell.host}" if cell.host else ""))
        t = Target(name, key, sentence(comps, audit, canaries), folded=folded[key])
        for level, grids, row_of in (("in-boot", t.in_boot, _op_row),
                                     ("kernel", t.kernel, _kernel_row)):
            per = defaultdict(list)
            for c in comps:
                if c.level == level:
                    per[c.cell.workload].append(c)
            grids += [(w, _grid(per[w], audit, row_of)) for w in sorted(per)]
        out.append(t)
    return out


# ------------------------------------------------------------------ render

CSS = """.answer td.v{white-space:nowrap;text-align:right}
.answer td.v small{display:block;color:#333;text-align:right}
.answer caption{caption-side:top;text-align:left;font-size:11px;color:#444}
.answer{margin-bottom:.6em}
.v-faster{background:#c8e6c9}.v-slower{background:#f4c7c3}.v-equivalent{background:#cfe2f3}
.v-inconclusive{background:#eee}.v-base{color:#666;font-style:italic}
.l-blind,.l-identical{background-image:repeating-linear-gradient(135deg,transparent 0 6px,
rgba(0,0,0,.08) 6px 8px);color:#555}
.legend span{display:inline-block;padding:1px 6px;margin-right:6px;border:1px solid #ccc}
.target{margin-bottom:1.2em}"""

_LCLASS = {labels.BLIND: " l-blind", labels.IDENTICAL: " l-identical"}


def _small(x: Entry) -> str:
    """The second line of an entry: the verdict and the label where known."""
    return x.kind + (f" \u00b7 {x.label}" if x.label else "")


def _cell_html(x: Entry | None) -> str:
    e = html.escape
    if x is None:
        return "<td>-</td>"
    if not x.kind:
        return f'<td class="v v-base">{e(x.text)}</td>'
    return (f'<td class="v v-{e(x.kind)}{_LCLASS.get(x.label, "")}" title="{e(x.verdict)}">'
            f"{e(x.text)}<small>{e(_small(x))}</small></td>")


def _grid_html(g: Grid, head: str) -> str:
    e = html.escape
    th = "".join(f"<th>{e(v)}</th>" for v in g.columns)
    body = "".join(f"<tr><th>{e(r)}</th>" + "".join(_cell_html(g.cells[r].get(v))
                                                     for v in g.columns) + "</tr>"
                   for r in g.rows)
    cap = f"<caption>parameters: {e(g.fixed)}</caption>" if g.fixed else ""
    return (f'<table class="answer">{cap}<thead><tr><th>{e(head)}</th>{th}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


LEGEND = ('<p class="legend">Each entry: the change of throughput against the row\'s '
          'baseline with its 95 % CI (+ faster), then the verdict and, where an audit says, '
          'the label. <span class="v-faster">faster</span><span class="v-slower">slower</span>'
          '<span class="v-equivalent">equivalent</span>'
          '<span class="v-inconclusive">inconclusive</span>'
          '<span class="v-inconclusive l-blind">striped: emulator-blind or identical code '
          '(no CPU difference can show)</span></p>')


def _heads(level: str, workload: str) -> str:
    if level == "kernel":
        return f"{workload}: kernel builds"
    return f"{workload}: {vocab.workload(workload).heading}"


def blind_head(n: int) -> str:
    """The heading of the ``n`` folded targets."""
    return (f"{n} target{'s' if n != 1 else ''} where no comparison can show a CPU "
            "difference (every one emulator-blind or identical code)")


def html_section(ts: list[Target]) -> str:
    """The first screen: the legend, then per target its sentence and tables;
    the targets where nothing can show a CPU difference folded at the end."""
    e = html.escape
    shown, folded = _partition(ts)
    out = ['<section id="answer"><h2>What each ordering costs, per target</h2>', LEGEND]
    for t in shown:
        out += _target_html(t)
    if folded:
        out.append(f"<details><summary>{e(blind_head(len(folded)))}: "
                   f"{e(', '.join(x.name for x in folded))}</summary>")
        for t in folded:
            out += _target_html(t)
        out.append("</details>")
    out.append("</section>")
    return "\n".join(out)


def _partition(ts: list[Target]) -> tuple[list[Target], list[Target]]:
    """(targets shown, targets folded), each in the order of ``ts``."""
    return [t for t in ts if not t.folded], [t for t in ts if t.folded]


def _target_html(t: Target) -> list[str]:
    e = html.escape
    out = [f'<div class="target" data-target="{e(t.key)}"><h3>{e(t.name)}</h3>'
           f"<p>{e(t.sentence)}</p>"]
    out += [_grid_html(g, _heads("in-boot", w)) for w, g in t.in_boot]
    if t.kernel:
        out.append('<p class="kernel">Kernel builds (each variant\'s kernel against the '
                   "baseline's, boots compared):</p>")
        out += [_grid_html(g, _heads("kernel", w)) for w, g in t.kernel]
    out.append("</div>")
    return out


def _md_cell(x: Entry | None) -> str:
    if x is None:
        return "-"
    return f"{x.text} {_small(x)}" if x.kind else x.text


def markdown(ts: list[Target]) -> str:
    out = ["## What each ordering costs, per target", "",
           "Change of throughput against the row's baseline, 95 % CI (+ faster), the "
           "verdict and, where an audit says, the label.", ""]
    shown, folded = _partition(ts)
    for t in shown:
        out += _target_md(t)
    if folded:
        out += [f"### {blind_head(len(folded))}", ""]
        for t in folded:
            out += _target_md(t)
    return "\n".join(out)


def _target_md(t: Target) -> list[str]:
    out = [f"### {t.name}", "", t.sentence, ""]
    for level, grids in (("in-boot", t.in_boot), ("kernel", t.kernel)):
        for w, g in grids:
            rows = [[r] + [_md_cell(g.cells[r].get(v)) for v in g.columns] for r in g.rows]
            tab = tables.Table([_heads(level, w)] + g.columns, rows, "")
            out += ([f"Parameters: {g.fixed}", ""] if g.fixed else []) + [tab.markdown(), ""]
    return out

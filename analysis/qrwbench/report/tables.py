"""Tables of results, rendered as plain text, Markdown or HTML from one row list.

:func:`comparison_table` is the table `make bench` prints at its end and the
report shows: per cell, each variant's median throughput with its CI, the ratio
to the baseline with its CI, the adjusted p, Cliff's delta and the verdict.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

IDENTICAL = "identical code: any difference is noise"
BLIND = "emulator-blind: TCG runs the same ops for both, no CPU difference can show"


def fmt_rate(x: float) -> str:
    """Operations per second in M/s with 4 significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x / 1e6:.4g}"


def fmt_ratio(x: float) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.3f}"


def fmt_p(p: float) -> str:
    if p is None or math.isnan(p):
        return "-"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.0e}"


def fmt_pct(x: float, signed=True) -> str:
    if x is None or math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf"
    return f"{x:+.1f}%" if signed else f"{x:.1f}%"


def fmt_mde(mde: float) -> str:
    """Minimum detectable effect; 'n too small' when no effect could reach alpha."""
    if mde is not None and math.isinf(mde):
        return "n too small"
    return fmt_pct(mde * 100, signed=False) if mde is not None else "-"


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    title: str = ""
    # per row, what it shows (comparison_table: (cell, Comparison or None for
    # the baseline row)), and per row data-* attributes for html()
    sources: list | None = None
    attrs: list[dict] | None = None

    def text(self) -> str:
        widths = [max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h)
                  for i, h in enumerate(self.headers)]
        line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
        out = [self.title] if self.title else []
        out += [line(self.headers), line(["-" * w for w in widths])]
        out += [line(r) for r in self.rows]
        return "\n".join(out)

    def markdown(self) -> str:
        esc = lambda s: s.replace("|", "\\|")
        out = [f"### {self.title}", ""] if self.title else []
        out.append("| " + " | ".join(esc(h) for h in self.headers) + " |")
        out.append("|" + "|".join("---" for _ in self.headers) + "|")
        out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in self.rows]
        return "\n".join(out)

    def html(self, css_class: str = "", table_id: str = "") -> str:
        e = html.escape
        cls = f' class="{e(css_class)}"' if css_class else ""
        cls += f' id="{e(table_id)}"' if table_id else ""
        head = "".join(f"<th>{e(h)}</th>" for h in self.headers)
        attrs = self.attrs or [{}] * len(self.rows)
        body = "".join("<tr" + "".join(f' data-{e(k)}="{e(str(v))}"' for k, v in a.items()) +
                       ">" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
                       for r, a in zip(self.rows, attrs))
        title = f"<h3>{e(self.title)}</h3>" if self.title else ""
        return f"{title}<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _n(n: int, unit: str) -> str:
    """The n column: windows and blocks are counted bare, boots say so."""
    return f"{n} boot{'s' if n != 1 else ''}" if unit == "boot" else str(n)


def comparison_table(cset, *, title: str = "") -> Table:
    """One row per (cell, variant) of a :class:`qrwbench.analysis.compare.ComparisonSet`,
    preceded by the cell's baseline row. n: paired blocks (in-boot) or boots
    per side (kernel builds)."""
    headers = ["cell", "variant", "n", "median Mops/s [95% CI]",
               "ratio to baseline [95% CI]", "change", "CI +-", "p (adj, family)", "verdict",
               "ended by"]
    rows, sources = [], []
    last = None
    for c in sorted(cset.comparisons, key=lambda c: (c.cell, c.variant)):
        if c.cell != last:
            sources.append((c.cell, None))
            b = c.base_summary
            rows.append([c.cell.label(), f"{c.baseline} (baseline)", _n(b.n, "window"),
                         f"{fmt_rate(b.median)} [{fmt_rate(b.ci_low)}, {fmt_rate(b.ci_high)}]",
                         "1", "", "", "", "", ""])
            last = c.cell
        s, t, e = c.summary, c.test, c.effect
        ratio = (f"{fmt_ratio(t.ratio)} [{fmt_ratio(t.ratio_low)}, {fmt_ratio(t.ratio_high)}]"
                 if t.judged else "-")
        n = (f"{t.n_a} blocks" if t.unit == "block" else f"{t.n_a}+{t.n_b} boots")
        # what the backend can show first, the interval second (issue 26)
        verdict = (f"{IDENTICAL}; {c.verdict}" if c.identical_code else
                   f"{BLIND}; {c.verdict}" if c.emulator_blind else c.verdict)
        sources.append((c.cell, c))
        rows.append(["", c.variant, n,
                     f"{fmt_rate(s.median)} [{fmt_rate(s.ci_low)}, {fmt_rate(s.ci_high)}]",
                     ratio, fmt_pct(t.pct_change) if t.judged else "-",
                     f"{e.half_width_pct:.1f} %" if e is not None and e.judged else "-",
                     fmt_p(c.p_adjusted), verdict, c.ended_by or "-"])
    return Table(headers, rows, title, sources)


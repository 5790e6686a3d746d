"""The comparison table as ``make bench`` and ``qrwbench compare`` print it:
no line wider than the terminal (160 columns by default).

Each cell gets a line of its own (wrapped, never cut) with its baseline's
median; below it one row per variant: blocks or boots, median with its CI,
change with its CI half-width, adjusted p, what ended its measuring and the
verdict, which wraps under its own column. Every column of every comparison,
and the cell in full as fields, is in ``qrwbench compare --format csv`` and
the report's comparisons.csv.
"""
from __future__ import annotations

import textwrap

from .tables import fmt_p, fmt_pct, fmt_rate

WIDTH = 160
HEADERS = ("variant", "n", "median Mops/s [95% CI]", "change", "CI +-", "p adj", "ended by")
INDENT = "    "


def _median(s) -> str:
    return f"{fmt_rate(s.median)} [{fmt_rate(s.ci_low)}, {fmt_rate(s.ci_high)}]"


def _row(c) -> list[str]:
    t, e = c.test, c.effect
    n = f"{t.n_a} blocks" if t.unit == "block" else f"{t.n_a}+{t.n_b} boots"
    return [c.variant, n, _median(c.summary), fmt_pct(t.pct_change) if t.judged else "-",
            f"{e.half_width_pct:.1f} %" if e is not None and e.judged else "-",
            fmt_p(c.p_adjusted), c.ended_by or "-"]


def _verdict(c) -> str:
    label = "identical code; " if c.identical_code else "emulator-blind; " if c.emulator_blind else ""
    return label + c.verdict


def table(cset, width: int = WIDTH) -> str:
    comps = sorted(cset.comparisons, key=lambda c: (c.cell, c.variant))
    rows = [_row(c) for c in comps]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HEADERS)]
    lead = len(INDENT) + sum(widths) + 2 * len(widths)
    room = max(30, width - lead)

    def line(cells, verdict_lines):
        head = INDENT + "  ".join(x.ljust(w) for x, w in zip(cells, widths)) + "  "
        out = [(head + (verdict_lines[0] if verdict_lines else "")).rstrip()]
        out += [" " * len(head) + v for v in verdict_lines[1:]]
        return out

    out = line(list(HEADERS), ["verdict"])
    last = None
    for c, r in zip(comps, rows):
        if c.cell != last:
            b = c.base_summary
            out += textwrap.wrap(f"{c.cell.label()}  (baseline {c.baseline}: {_median(b)} Mops/s)",
                                 width, subsequent_indent=INDENT)
            last = c.cell
        out += line(r, textwrap.wrap(_verdict(c), room) or ["-"])
    return "\n".join(out)


def wrap(text: str, width: int = WIDTH) -> str:
    """A paragraph of the console's header, wrapped."""
    return "\n".join(textwrap.wrap(text, width))


def text_comparison(cset, *, header: str = "") -> str:
    """The plain-text comparison `make bench` prints at its end."""
    corr = {"holm": "Holm", "bh": "Benjamini-Hochberg"}[cset.correction]
    base = ", ".join(f"{w}: {v}" for w, v in sorted(cset.baselines.items()))
    lines = [header] if header else []
    lines.append(wrap(
        f"baselines ({base}); in-boot: trimmed mean of paired block log ratios, "
        "t interval on a two-level random-effects SE; kernel builds: one normalized "
        f"value per boot, Welch t; {corr}-adjusted per arch/accel/CPU/workload, alpha "
        f"{cset.alpha:g}; every column and the full cell: qrwbench compare --format csv"))
    lines.append(table(cset))
    for cell, why in cset.skipped:
        lines.append(wrap(f"not compared: {cell.label()}: {why}"))
    return "\n".join(lines)

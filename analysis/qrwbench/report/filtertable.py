"""The long comparison table of index.html, filterable without a server.

Every row carries ``data-target``, ``data-op``, ``data-verdict``,
``data-label`` and ``data-group`` (its cell); four ``<select>`` above the
table pick a value of each, and a small inline script hides the rows that do
not match (a cell's baseline row stays while any of its rows shows). Without
JavaScript every row shows. When the script has set up the filters it marks
``<body data-filters="ready">`` (the browser test reads it).
"""

from __future__ import annotations

import html

from . import labels, summary, tables

FILTERS = (("target", "target"), ("op", "op"), ("verdict", "verdict"), ("label", "label"))

SCRIPT = """(function () {
  var table = document.getElementById("comparisons");
  var selects = document.querySelectorAll("#filters select");
  var shown = document.getElementById("filter-count");
  function apply() {
    var want = {}, groups = {}, n = 0, total = 0;
    selects.forEach(function (s) { want[s.name] = s.value; });
    table.querySelectorAll("tbody tr").forEach(function (r) {
      if (r.dataset.verdict === "baseline") return;
      total += 1;
      var ok = Object.keys(want).every(function (k) {
        return !want[k] || r.dataset[k] === want[k];
      });
      r.hidden = !ok;
      if (ok) { n += 1; groups[r.dataset.group] = true; }
    });
    table.querySelectorAll('tbody tr[data-verdict="baseline"]').forEach(function (r) {
      r.hidden = !groups[r.dataset.group];
    });
    shown.textContent = n + " of " + total + " comparisons shown";
  }
  var query = new URLSearchParams(window.location.search);
  selects.forEach(function (s) {
    if (query.has(s.name)) s.value = query.get(s.name);
    s.addEventListener("change", apply);
  });
  apply();
  document.body.dataset.filters = "ready";
})();"""


def attrs(table: tables.Table, audit) -> list[dict]:
    """The data-* attributes of each row of a :func:`tables.comparison_table`."""
    out, groups = [], {}
    for cell, c in table.sources:
        g = groups.setdefault(cell, len(groups))
        out.append({"target": summary.target_key(cell), "op": cell.op, "group": g,
                    "verdict": "baseline" if c is None else c.kind,
                    "label": "" if c is None else labels.name(labels.label(c, audit))})
    return out


def html_table(table: tables.Table, audit) -> str:
    """The filter controls, the table (id ``comparisons``) and the script."""
    e = html.escape
    table.attrs = attrs(table, audit)
    selects = []
    for key, name in FILTERS:
        values = sorted({a[key] for a in table.attrs if a["verdict"] != "baseline"})
        opts = "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in values)
        selects.append(f'<label>{e(name)} <select name="{e(key)}">'
                       f'<option value="">all</option>{opts}</select></label>')
    n = sum(a["verdict"] != "baseline" for a in table.attrs)
    controls = (f'<form id="filters" onsubmit="return false">{" ".join(selects)} '
                f'<span id="filter-count">{n} comparisons</span></form>')
    return controls + table.html(table_id="comparisons") + f"<script>{SCRIPT}</script>"

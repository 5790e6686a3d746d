"""`make report` on a small real run: two x86_64 TCG boots (atomics, rwlock)
through the code `make bench` uses, imported, then the HTML, Markdown and
plots checked against what the guests measured."""
from html import unescape

import pytest

from conftest import kernel_dir
from qrwbench.results import store
from qrwbench.report import analyse, report
from qrwbench.run import boot
from qrwbench.cell import Cell

pytestmark = pytest.mark.guest


@pytest.fixture(scope="module")
def real_db(tmp_path_factory):
    kernel_dir("x86_64", "acqrel")
    tmp = tmp_path_factory.mktemp("real-report")
    db = str(tmp / "r.sqlite")
    cells = [Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 2,
                         (("duration_ms", 3), ("ops", "atomic_add_return"), ("placement", "percpu"),
                          ("reps", 4))),
             Cell.boot("x86_64", "tcg", "max", "acqrel", "rwlock", 2,
                         (("duration_ms", 3), ("reps", 4), ("write_pct", 10)))]
    ids = []
    for i, c in enumerate(cells):
        d = tmp / "runs" / f"real-{c.workload}"
        st = boot.boot_one(c, 100 + i, d, 120, 256, boot.NOT_ASKED)
        assert st["status"] == "ok", st
        res = store.import_run(db, d)
        assert res.status == "ok", res
        ids.append(res.run_id)
    return db, tmp, ids


def test_report_of_a_real_run_has_its_plots_tables_and_provenance(real_db):
    db, tmp, ids = real_db
    out = tmp / "report"
    paths = report.build(db, out, n_resamples=200)
    html = unescape((out / "index.html").read_text())
    md = (out / "report.md").read_text()
    assert paths["html"] == str(out / "index.html")
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert any(p.startswith("ratio-") for p in pngs) and any(p.startswith("fairness-") for p in pngs), pngs
    for name in pngs:
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / "plots" / (name[:-4] + ".svg")).read_text().lstrip().startswith("<?xml")
    for rid in ids:
        assert rid in html
    conn = store.connect(db)
    try:
        qemu_version = conn.execute("SELECT qemu_version FROM runs").fetchone()[0]
    finally:
        conn.close()
    assert qemu_version.startswith("QEMU emulator version") and qemu_version in html
    for text in (html, md):
        assert analyse.TCG_CAVEAT in text
        assert "atomics inline atomic_add_return percpu" in text
        assert "rwlock module rwlock" in text and "rwlock kernel rwlock" in text
    # the 4 atomics orderings against full, the module's copies against acqrel
    assert html.count("(baseline)") >= 2


def test_report_shows_the_harness_overhead_the_guest_measured(real_db):
    import numpy as np
    db, tmp, _ = real_db
    out = tmp / "report-ovh"
    report.build(db, out, n_resamples=200)
    html = unescape((out / "index.html").read_text())
    md = (out / "report.md").read_text()
    conn = store.connect(db)
    try:
        ovh = [r[0] for r in conn.execute(
            "SELECT overhead_ps FROM samples WHERE workload = 'atomics' AND copy = 0 "
            "AND op != 'empty'")]
    finally:
        conn.close()
    assert ovh and min(ovh) > 0
    want = f"{float(np.median(ovh)) / 1000:.2f}"
    group = "x86_64/tcg/max/2v atomics percpu"
    row = next(l for l in md.splitlines() if l.startswith(f"| {group} |"))
    assert row.split("|")[3].strip() == want, (want, row)
    section = html[html.index("Harness overhead"):]
    at = section.index(group)
    assert want in section[at:at + 200], section[at:at + 200]

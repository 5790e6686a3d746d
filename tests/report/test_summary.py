"""The report's first screen: per target the orderings' changes with CIs,
verdict colours and labels, kernel builds below; the long table filterable."""

import re
from html import unescape

import pytest

import synth
from qrwbench.analysis import codeid
from qrwbench.report import labels, report, summary


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return synth.report_db(tmp_path_factory.mktemp("summary"))


@pytest.fixture
def built(db, tmp_path, monkeypatch):
    audit, emu = synth.audits(tmp_path / "audits")
    monkeypatch.setattr(codeid, "DEFAULT_AUDIT", str(audit))
    monkeypatch.setattr(codeid, "DEFAULT_EMULATOR", str(emu))
    report.build(db, tmp_path / "rep", n_resamples=200)
    return tmp_path / "rep", report.compare_set(db, n_resamples=200)


def test_one_table_per_target_with_every_comparison(built):
    _, r = built
    ts = summary.targets(r.cset, r.audit)
    assert [t.name for t in ts] == ["x86_64 / host / kvm / 2 vCPUs",
                                    "x86_64 / qemu64 / tcg / 2 vCPUs"]
    kvm, tcg = ts
    assert [w for w, _ in tcg.in_boot] == ["atomics", "rwlock"] and \
        [w for w, _ in tcg.kernel] == ["rwlock"] and kvm.kernel == []
    atomics = dict(tcg.in_boot)["atomics"]
    assert atomics.columns == ["full", "acquire", "release", "relaxed"]  # the orderings, in order
    assert atomics.rows == ["atomic_add_return (inline, shared)"]
    row = atomics.cells[atomics.rows[0]]
    assert row["full"].text == "baseline" and not row["full"].kind
    by = {(c.cell.accel, c.cell.impl, c.cell.params, c.variant): c for c in r.cset.comparisons}
    n = 0
    for t in ts:
        for _, g in t.in_boot + t.kernel:
            for name in g.rows:
                for v, x in g.cells[name].items():
                    if x.kind:
                        n += 1
                        assert re.fullmatch(r"[+-]\d+\.\d % \[[+-]\d+\.\d, [+-]\d+\.\d\]", x.text)
    assert n == len(r.cset.comparisons)           # each comparison in exactly one entry
    relaxed = row["relaxed"]
    c = next(c for k, c in by.items() if k[0] == "tcg" and k[1] == "inline" and k[3] == "relaxed")
    assert relaxed.text.startswith(f"{c.test.pct_change:+.1f} %") and relaxed.kind == "faster"
    assert (relaxed.label, row["release"].label, row["acquire"].label) == \
        (labels.DISTINCT, labels.BLIND, labels.IDENTICAL)
    rw = dict(tcg.in_boot)["rwlock"]
    assert rw.rows == ["rwlock (module, shared) [write_pct=0]",
                       "rwlock (module, shared) [write_pct=50]"]
    assert "nlocks=1" in rw.fixed and "write_pct" not in rw.fixed
    kernel = dict(tcg.kernel)["rwlock"]
    assert kernel.columns == ["full", "acqrel"]
    assert all(kernel.cells[r]["full"].text.startswith("-") for r in kernel.rows)  # 10 % slower


def test_sentence_says_what_the_backend_can_show(built):
    _, r = built
    kvm, tcg = summary.targets(r.cset, r.audit)
    assert "Emulated (TCG)" in tcg.sentence and "1 of 9 comparisons are emulator-blind" \
        in tcg.sentence and "1 distinguishable" in tcg.sentence
    assert "host CPU (KVM)" in kvm.sentence and "1 of 3 compile to identical code" \
        in kvm.sentence
    never = {"test": "mp", "lkmm": "allowed", "want": [1, 0], "counts": [5, 0, 0, 5],
             "iters": 10}                  # r0=1 r1=0 never came out
    _, tcg2 = summary.targets(r.cset, r.audit, [("x86_64/tcg/qemu64", never)])
    assert "canaries never reordered" in tcg2.sentence
    seen = {**never, "counts": [4, 0, 1, 5]}
    _, tcg3 = summary.targets(r.cset, r.audit, [("x86_64/tcg/qemu64", seen)])
    assert "canaries" not in tcg3.sentence
    no_audit = summary.targets(r.cset, None)
    assert all("without make audit" in t.sentence for t in no_audit)
    assert {x.label for t in no_audit for _, g in t.in_boot
            for row in g.cells.values() for x in row.values()} == \
        {labels.UNKNOWN, labels.IDENTICAL, labels.BLIND}      # flags of the judged set only


def test_answer_comes_first_and_is_coloured(built):
    out, _ = built
    page = (out / "index.html").read_text()
    answer, long_table = page.index('<section id="answer">'), page.index('id="comparisons"')
    assert answer < page.index('<pre class="summary">') < long_table
    first = page[answer:page.index("</section>")]
    assert "x86_64 / qemu64 / tcg / 2 vCPUs" in first and "x86_64 / host / kvm / 2 vCPUs" in first
    cells = re.findall(r'<td class="v v-(\w+)( l-\w+)?" title="[^"]*">([^<]*)<small>([^<]*)',
                       first)
    assert len(cells) == 12
    for kind, lclass, _, small in cells:
        assert small.startswith(kind)
        assert (lclass == " l-blind") == ("emulator-blind" in small)
    assert {unescape(s) for *_, s in cells} >= {"faster \u00b7 distinguishable",
                                                 "equivalent \u00b7 emulator-blind"}
    md = (out / "report.md").read_text()
    assert md.index("## What each ordering costs, per target") < md.index("## Comparisons")
    assert "| atomics: op (impl, placement) | full | acquire | release | relaxed |" in md


def test_long_table_rows_carry_their_filters(built):
    out, r = built
    page = unescape((out / "index.html").read_text())
    rows = re.findall(r'<tr data-target="([^"]*)" data-op="([^"]*)" data-group="(\d+)" '
                      r'data-verdict="([^"]*)" data-label="([^"]*)">', page)
    data = [x for x in rows if x[3] != "baseline"]
    assert len(data) == len(r.cset.comparisons)
    assert len(rows) - len(data) == len({c.cell for c in r.cset.comparisons})
    assert {x[0] for x in rows} == {"x86_64/qemu64/tcg/2v", "x86_64/host/kvm/2v"}
    assert {x[4] for x in data} == {"identical code", "emulator-blind", "distinguishable",
                                    "unknown"}
    for key, i in (("target", 0), ("op", 1), ("verdict", 3), ("label", 4)):
        select = re.search(rf'<select name="{key}">(.*?)</select>', page).group(1)
        assert re.findall(r'<option value="([^"]*)">', select) == \
            [""] + sorted({x[i] for x in data})
    assert 'document.body.dataset.filters = "ready"' in page


def test_targets_that_can_show_nothing_come_last_folded(built):
    """A target whose every comparison is identical code (or emulator-blind)
    goes after those that can show a CPU difference, folded in <details>."""
    import dataclasses
    _, r = built
    kvm_first = summary.targets(r.cset, r.audit)
    assert [t.name for t in kvm_first][0].startswith("x86_64 / host / kvm")
    comps = [dataclasses.replace(c, identical_code=True) if c.cell.accel == "kvm" else c
             for c in r.cset.comparisons]
    ts = summary.targets(dataclasses.replace(r.cset, comparisons=comps), r.audit)
    assert [t.name for t in ts] == ["x86_64 / qemu64 / tcg / 2 vCPUs",
                                    "x86_64 / host / kvm / 2 vCPUs"]
    assert not ts[0].folded and ts[1].folded
    page = summary.html_section(ts)
    fold = page.index("<details>")
    assert page.index('data-target="x86_64/qemu64/tcg/2v"') < fold < \
        page.index('data-target="x86_64/host/kvm/2v"')
    assert "1 target where no comparison can show" in unescape(page)
    md = summary.markdown(ts)
    assert md.index("qemu64 / tcg") < md.index("target where no comparison") < \
        md.index("host / kvm")
    assert "<details>" not in summary.html_section(kvm_first)

"""The report in a real browser (Debian's headless Chromium, make deps): the
page loads without console errors, its images load, the first table holds
the run's targets, the filters work; the first screen's screenshot is kept
as build/test-report/first-screen.png (make report keeps the real report's
as build/report/first-screen.png)."""

import csv
import json
import re
import xml.etree.ElementTree as ET
from html import unescape
from pathlib import Path

import matplotlib.image
import pytest

import synth
from qrwbench import vocab
from qrwbench.analysis import codeid
from qrwbench.report import browser, report

pytestmark = pytest.mark.skipif(browser.chromium() is None,
                                reason="chromium is not installed (make deps installs it)")
OUT = vocab.BUILD / "test-report"            # an output directory of kind report
PNG = b"\x89PNG\r\n\x1a\n"
# Written into a copy of index.html before anything else runs: records
# errors and console.error, then, once everything loaded, what the page shows.
PROBE = """<script>
window.qrwbErrors = [];
window.addEventListener("error", function (e) { qrwbErrors.push("error: " + e.message); });
window.addEventListener("unhandledrejection", function (e) { qrwbErrors.push("rejection"); });
(function (orig) { console.error = function () {
  qrwbErrors.push("console.error: " + Array.from(arguments).join(" "));
  orig.apply(console, arguments); }; })(console.error);
window.addEventListener("load", function () {
  var imgs = Array.from(document.images).map(function (i) {
    return {src: i.getAttribute("src"), ok: i.complete && i.naturalWidth > 0}; });
  var first = document.querySelector("table");
  var target = first && first.closest("[data-target]");
  var probe = document.createElement("pre");
  probe.id = "qrwb-probe";
  probe.textContent = JSON.stringify({errors: qrwbErrors, images: imgs,
    filters: document.body.dataset.filters || "",
    count: (document.getElementById("filter-count") || {}).textContent || "",
    firstTarget: target ? target.dataset.target : null,
    firstTableText: first ? first.innerText : "",
    targets: Array.from(document.querySelectorAll("#answer [data-target]")).map(
      function (d) { return d.dataset.target; })});
  document.body.appendChild(probe);
});
</script>"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    db = synth.report_db(tmp)
    audit, emu = synth.audits(tmp / "audits")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(codeid, "DEFAULT_EMULATOR", str(emu))
        paths = report.build(db, OUT, audit_path=audit, n_resamples=200, screenshot=True)
    return paths, tmp


def _probe_page(tmp: Path, name: str, extra: str = "") -> Path:
    """A copy of the report's index.html with the probe (and ``extra``) first
    in <head>; <base> keeps its relative links pointing into the report."""
    page = (OUT / "index.html").read_text()
    head = f'<head><base href="{OUT.resolve().as_uri()}/">{PROBE}{extra}'
    p = tmp / name
    p.write_text(page.replace("<head>", head, 1))
    return p


def _load(path: Path, query: str = "") -> tuple[dict, list[str]]:
    dom, console = browser.dump_dom(path, query)
    m = re.search(r'<pre id="qrwb-probe">(.*?)</pre>', dom, re.S)
    assert m, f"the page did not finish loading: {dom[-300:]}"
    return json.loads(unescape(m.group(1))), console


def test_page_loads_without_errors_with_its_images_and_targets(built):
    paths, tmp = built
    got, console = _load(_probe_page(tmp, "probe.html"))
    assert got["errors"] == [] and console == [], (got["errors"], console)
    assert got["filters"] == "ready"                    # the long table's script ran
    assert got["images"] and all(i["ok"] for i in got["images"]), \
        [i["src"] for i in got["images"] if not i["ok"]]
    assert got["targets"] == ["x86_64/host/kvm/2v", "x86_64/qemu64/tcg/2v"]
    assert got["firstTarget"] == got["targets"][0]     # the first table is the answer's
    assert "atomic_add_return (inline, shared)" in got["firstTableText"]
    assert re.search(r"\+\d+\.\d % \[\+\d+\.\d, \+\d+\.\d\]\s*faster", got["firstTableText"])
    rows = list(csv.DictReader(open(paths["csv"])))
    assert set(got["targets"]) == {f"{r['arch']}/{r['cpu_model']}/{r['accel']}/{r['vcpus']}v"
                                   for r in rows}


def test_every_image_file_is_there_and_valid(built):
    page = (OUT / "index.html").read_text()
    srcs = re.findall(r'<img src="([^"]+)"', page)
    links = re.findall(r'<a href="(plots/[^"]+\.png)">', page)
    assert srcs and len(links) == len(srcs)
    for src in srcs:
        root = ET.parse(OUT / unescape(src)).getroot()
        assert root.tag.endswith("svg"), src
    for link in links:
        assert (OUT / unescape(link)).read_bytes()[:8] == PNG, link


def test_screenshot_of_the_first_screen(built):
    paths, _ = built
    assert paths["screenshot"] == str(OUT / "first-screen.png") and paths["screenshot_note"] is None
    shot = Path(paths["screenshot"])
    assert shot.read_bytes()[:8] == PNG
    img = matplotlib.image.imread(str(shot))
    assert img.shape[:2] == (browser.SIZE[1], browser.SIZE[0])
    assert img.std() > 0.01                             # not a blank page


def test_filters_from_the_query_string(built):
    paths, tmp = built
    rows = list(csv.DictReader(open(paths["csv"])))
    page = _probe_page(tmp, "probe.html")
    for query, want in (("verdict=faster", [r for r in rows if r["verdict"] == "faster"]),
                        ("label=emulator-blind", [r for r in rows
                                                  if r["label"] == "emulator-blind"]),
                        ("target=x86_64/host/kvm/2v&op=atomic_add_return",
                         [r for r in rows if r["accel"] == "kvm"])):
        got, console = _load(page, query)
        assert want and got["count"] == f"{len(want)} of {len(rows)} comparisons shown", query
        assert got["errors"] == [] and console == []


def test_the_probe_sees_a_broken_page(built):
    """The checks above can fail: a script error and a missing image are seen."""
    _, tmp = built
    broken = _probe_page(tmp, "broken.html", "<script>console.error('x');notAFunction();</script>")
    broken.write_text(broken.read_text().replace("</body>", '<img src="plots/none.svg"></body>'))
    got, console = _load(broken)
    assert any("notAFunction" in e for e in got["errors"])
    assert any("console.error: x" == e for e in got["errors"])
    assert any("notAFunction" in line for line in console)
    assert [i["src"] for i in got["images"] if not i["ok"]] == ["plots/none.svg"]

"""Every figure readable: no title or label cut, by the figure's edge or by
truncation, however long the cell's name; a legend on every figure."""

import json
import struct
from unittest import mock

import matplotlib.text
import pytest

from qrwbench.analysis import compare, verdicts, windows
from qrwbench.cell import Cell
from qrwbench.report import plots

LONG = "a_parameter_value_nobody_would_shorten_" * 4          # 156 characters, no blank
FIXED = {f"fixed_parameter_{i}": 1000 + i for i in range(24)}


def _cell(mode: str, vcpus=2, impl="inline", op="atomic_add_return_relaxed_long_name") -> Cell:
    return Cell("x86_64", "tcg", "qemu64-with-a-long-cpu-model-name", vcpus, "atomics", impl, op,
                "shared", json.dumps({**FIXED, "mode": mode}, sort_keys=True,
                                     separators=(",", ":")))


def _comparison(cell, variant, kind, ratio, **flags):
    t = windows.Test(n_a=10, n_b=10, median_a=1.0, median_b=1.0, ratio=ratio,
                     ratio_low=ratio - 0.02, ratio_high=ratio + 0.02, judged=True, unit="block")
    return compare.Comparison(cell=cell, variant=variant, baseline="full", test=t, summary=None,
                              base_summary=None, kind=kind, **flags)


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions save, with the PNG each became."""
    got = []
    save = plots._save

    def keep(fig, out_dir, name):
        got.append((fig, out_dir / f"{name}.png"))
        return save(fig, out_dir, name)
    monkeypatch.setattr(plots, "_save", keep)
    return got


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _saved_region(fig, png):
    """The part of the figure (display pixels) that the PNG holds: the whole
    figure, or its tight bounding box when the PNG was saved with one."""
    r = fig.canvas.get_renderer()
    w, h = _png_size(png)
    scale = 100 / fig.dpi                          # plots save at dpi=100
    if abs(w - fig.bbox.width * scale) <= 1 and abs(h - fig.bbox.height * scale) <= 1:
        return fig.bbox
    tight = fig.get_tightbbox(r).padded(plots.SAVE_KW["pad_inches"])
    region = tight.transformed(fig.dpi_scale_trans)
    assert abs(w - region.width * scale) <= 2 and abs(h - region.height * scale) <= 2, \
        "the PNG is neither the figure nor its tight bounding box"
    return region


def _texts(fig):
    """The texts a draw of the figure draws (not the ones it only holds, such
    as tick labels outside the view)."""
    drawn, draw = [], matplotlib.text.Text.draw

    def record(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        return draw(self, renderer)
    with mock.patch.object(matplotlib.text.Text, "draw", record):
        fig.canvas.draw()
    return drawn


def _check(fig, png, must_show=(LONG,)):
    """Every visible text inside the saved image; ``must_show`` whole in some text."""
    texts = _texts(fig)             # draws: positions of this dpi, not the SVG's
    assert texts
    region = _saved_region(fig, png)
    r = fig.canvas.get_renderer()
    for t in texts:
        e = t.get_window_extent(r)
        assert region.x0 - 1 <= e.x0 and e.x1 <= region.x1 + 1 and \
            region.y0 - 1 <= e.y0 and e.y1 <= region.y1 + 1, \
            f"text {t.get_text()[:40]!r} at {e} is outside the saved image {region}"
    joined = "".join("".join(t.get_text().split()) for t in texts)
    for s in must_show:
        assert "".join(s.split()) in joined, f"{s[:40]!r} is cut"
    assert any(ax.get_legend() is not None for ax in fig.axes), "no legend"


def test_ratio_plot_with_long_cell_names(tmp_path, figures):
    comps = [_comparison(_cell(LONG + "1"), "acquire", verdicts.FASTER, 1.10),
             _comparison(_cell(LONG + "2"), "release", verdicts.SLOWER, 0.90,
                         identical_code=True),
             _comparison(_cell(LONG + "3"), "relaxed", verdicts.INCONCLUSIVE, 1.01,
                         emulator_blind=True)]
    assert plots.ratio_bars(comps, tmp_path)
    (fig, png), = figures
    fixed = ",".join(f"{k}={v}" for k, v in sorted(FIXED.items()))
    _check(fig, png, (LONG + "1", LONG + "3", fixed, "qemu64-with-a-long-cpu-model-name"))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend[:4] == ["faster", "slower", "equivalent", "inconclusive"]
    assert any("identical code" in t for t in legend) and \
        any("emulator-blind" in t for t in legend)
    assert "ratio" in fig.axes[0].get_xlabel()


def test_sweep_fairness_and_history_with_long_names(tmp_path, figures):
    samples = []
    for vcpus in (1, 2, 4):
        for variant, rate in (("full", 10e6), ("relaxed", 12e6)):
            cell = _cell(LONG, vcpus)
            samples += [{"arch": cell.arch, "accel": cell.accel, "cpu_model": cell.cpu,
                         "vcpus": vcpus, "workload": "atomics", "impl": cell.impl,
                         "op": cell.op, "placement": "shared", "params": cell.params,
                         "variant": variant, "copy": 0, "throughput": rate * (1 + i / 100),
                         "overcommitted": vcpus == 4} for i in range(5)]
    assert plots.throughput_vs_vcpus(samples, tmp_path, n_resamples=50)
    fair = [{"cell": _cell(LONG + str(i)), "variant": "full", "copy": 0, "threads": 2,
             "jain": 0.9, "min_max": 0.8} for i in range(2)]
    assert plots.fairness_plot(fair, tmp_path)
    s = windows.summarize([1e6, 1.1e6, 0.9e6], n_resamples=50)
    plots.history_plot("qrwbench.x86_64.tcg.atomics." + LONG + ".throughput",
                       ["1" * 40, "2" * 40, "3" * 40], [s, s, s], [1], tmp_path)
    assert len(figures) == 3
    for fig, png in figures:
        _check(fig, png)
    history = figures[2][0].axes[0]
    assert history.get_xlabel() and "Mops/s" in history.get_ylabel()


def test_wrap_keeps_every_character():
    text = "x86_64 / tcg\n" + ",".join(f"{k}={v}" for k, v in FIXED.items()) + "," + LONG
    w = plots.wrap(text, 50)
    assert all(len(line) <= 50 for line in w.splitlines())
    assert w.replace("\n", "") == text.replace("\n", "")

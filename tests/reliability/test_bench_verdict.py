"""`make bench` calls a run ok under the same rules as the store's import."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
import synth  # noqa: E402
from qrwbench import bench, matrix, records  # noqa: E402

CELL = matrix.Cell("x86_64", "tcg", "max", "acqrel", "atomics", 2, ())


def _console(boot_lines):
    recs = [synth.begin()] + synth.results(rng=np.random.default_rng(0), reps=2)
    return synth.console(recs, boot=boot_lines).encode()


def test_complete_run_with_the_selftest_line_is_ok():
    c = _console(synth.BOOT_LINES)
    assert bench.check_parsed(records.parse_console(c), CELL, c) == ""


@pytest.mark.parametrize("change", ["missing", "failed"])
def test_run_without_the_atomic64_selftest_pass_line_fails(change):
    lines = [l for l in synth.BOOT_LINES if "atomic64_test" not in l]
    if change == "failed":
        lines.append("[    0.300000] atomic64_test: failed")
    c = _console(lines)
    why = bench.check_parsed(records.parse_console(c), CELL, c)
    assert "atomic64_test: passed" in why and "not on the console" in why


def test_guest_with_other_cpus_or_kernel_fails():
    c = _console(synth.BOOT_LINES)
    p = records.parse_console(c)
    assert "expected 4" in bench.check_parsed(
        p, matrix.Cell("x86_64", "tcg", "max", "acqrel", "atomics", 4, ()), c)
    assert "expected x86_64-full" in bench.check_parsed(
        p, matrix.Cell("x86_64", "tcg", "max", "full", "atomics", 2, ()), c)

"""`make torture`: violations of correct orderings fail it, relaxed's are only reported."""
import pytest

from conftest import TOP, kernel_dir
from qrwbench import cli, matrix
from qrwbench.run import torture


def test_verdicts_fail_only_for_correct_orderings():
    cells = {("arm64", "max", "acqrel", "kernel", "acqrel"): [0, 100],
             ("arm64", "max", "acqrel", "module", "relaxed"): [3, 100]}
    text, bad = torture.format_report(cells, [])
    assert not bad and "violations observed (expected: relaxed is not a lock)" in text
    cells[("arm64", "max", "full", "kernel", "full")] = [1, 100]
    text, bad = torture.format_report(cells, [])
    assert bad and "VIOLATED: BUG" in text
    # The kernel rwlock of a relaxed kernel is allowed to break.
    assert not torture.must_hold("relaxed", "kernel", "relaxed")
    assert torture.must_hold("relaxed", "module", "acqrel")


def test_minutes_scale_the_windows(tmp_path):
    m = matrix.load(TOP / "bench" / "matrix" / "torture.toml")
    cells = matrix.cells(m)
    short = torture.scaled(m, cells, 0.5)
    long = torture.scaled(m, cells, 5)
    d = lambda cs: cs[0].params_dict()["duration_ms"]
    assert d(long) > d(short) >= 1
    assert all(c.params_dict()["check_exclusion"] == 1 for c in short)


def test_plan_names_the_kernels_of_the_matrix_and_boots_nothing(capsys):
    """make torture builds only what `torture --plan` prints: the arches
    matrix's ppc64le and riscv64 kernels, the default one's x86_64 and arm64."""
    assert cli.main(["torture", "--plan", "--matrix",
                     str(TOP / "bench" / "matrix" / "torture-arches.toml")]) == 0
    assert capsys.readouterr().out.split() == [f"{a}-{v}" for a in ("ppc64le", "riscv64")
                                               for v in ("acqrel", "full", "relaxed")]
    assert cli.main(["torture", "--plan"]) == 0
    assert capsys.readouterr().out.split() == [f"{a}-{v}" for a in ("arm64", "x86_64")
                                               for v in ("acqrel", "full", "relaxed")]
    assert cli.main(["torture", "--plan", "--minutes", "0"]) == 2
    assert "--minutes 0.0: must be a number of minutes in (0, 1440)" in capsys.readouterr().err


@pytest.mark.guest
def test_short_torture_run_reports_zero_violations_for_acqrel(tmp_path):
    kernel_dir("x86_64", "acqrel")
    mfile = tmp_path / "t.toml"
    mfile.write_text((TOP / "bench" / "matrix" / "torture.toml").read_text()
                     .replace('variants = ["full", "acqrel", "relaxed"]', 'variants = ["acqrel"]')
                     .replace('[[target]]\narch = "arm64"\naccel = "tcg"\ncpu = "max"\n', "")
                     .replace('[[target]]\narch = "arm64"\naccel = "tcg"\ncpu = "cortex-a57"\n', ""))
    assert "arm64" not in mfile.read_text()
    rc = cli.main(["torture", "--minutes", "0.1", "--matrix", str(mfile), "--out", str(tmp_path / "out")])
    report = (tmp_path / "out" / "report.md").read_text()
    assert rc == 0, report
    assert "| x86_64 | max | acqrel | kernel | acqrel |" in report
    assert "VIOLATED" not in report

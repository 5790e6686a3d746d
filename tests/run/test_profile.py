"""`make perf CELL=...`: perf record of a real guest boot, hottest symbols."""
import subprocess

import pytest

from conftest import TOP
from qrwbench.run import profile

REPORT = """# Overhead  Command          Shared Object            Symbol
# ........  ...............  .......................  ......
#
     4.66%  CPU 0/TCG        [kernel.kallsyms]        [k] clear_page_erms                            -      -
     0.61%  CPU 1/TCG        qemu-system-x86_64       [.] 0x00000000007d8661                         -      -
     2.38%  CPU 0/TCG        qemu-system-x86_64       [.] cpu_exec                                   -      -
"""


def test_hottest_parses_perf_report_rows():
    rows = profile.hottest(REPORT, top=2)
    assert [(r["pct"], r["comm"], r["dso"], r["kind"], r["symbol"]) for r in rows] == [
        (4.66, "CPU 0/TCG", "[kernel.kallsyms]", "kernel", "clear_page_erms"),
        (2.38, "CPU 0/TCG", "qemu-system-x86_64", "user", "cpu_exec")]
    assert profile.hottest("# only comments\n") == []


def test_make_perf_bad_cell_is_one_line():
    r = subprocess.run(["make", "-s", "perf", "CELL=sparc/tcg/max/acqrel/rwlock/1"], cwd=TOP,
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines()[0] == "qrwbench: error: unknown arch 'sparc': valid are arm64, ppc64le, riscv64, x86_64"
    r = subprocess.run(["make", "-s", "perf", "CELL=x86_64/tcg/pentium/acqrel/rwlock/1"], cwd=TOP,
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""      # refused before any build
    assert r.stderr.splitlines()[0] == ("qrwbench: error: unknown CPU model 'pentium' for x86_64 "
                                        "under tcg: valid are max")
    r = subprocess.run(["make", "-s", "perf", "CELL=x86_64/tcg/max/sloppy/rwlock/1"], cwd=TOP,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown variant 'sloppy'" in r.stderr.splitlines()[0]
    r = subprocess.run(["make", "-s", "perf"], cwd=TOP, capture_output=True, text=True)
    assert r.returncode == 2 and "give CELL=" in r.stderr


@pytest.mark.guest
def test_profile_of_a_real_boot(tmp_path):
    from conftest import kernel_dir
    kernel_dir("x86_64", "acqrel")
    res = profile.profile("x86_64/tcg/max/acqrel/rwlock:write_pct=10,reps=2,duration_ms=10/2",
                          tmp_path, top=10)
    out = tmp_path / profile.slug(profile.ktree.parse_cell(
        "x86_64/tcg/max/acqrel/rwlock:write_pct=10,reps=2,duration_ms=10/2"))
    assert (out / "report.txt").stat().st_size > 0 and (out / "perf.data").exists()
    assert (out / "run" / "status.json").exists()
    pcts = [r["pct"] for r in res["hot"]]
    assert pcts == sorted(pcts, reverse=True) and 0 < pcts[0] <= 100
    # QEMU's vCPU threads (named by -name debug-threads=on) are in the profile
    assert any(r["comm"].startswith("CPU ") and r["comm"].endswith("/TCG") for r in res["hot"])
    assert (out / "hot.txt").read_text() == res["text"]

"""perf stat around a real process: parsed, unsupported events recorded as such."""
import subprocess

import pytest

from qrwbench import perf


def test_parse_real_perf_stat_output(tmp_path):
    if not perf.available():
        pytest.fail("perf missing: apt-get install linux-perf (make deps)")
    csv = tmp_path / "perf.csv"
    r = subprocess.run(perf.stat_prefix(csv) + ["sh", "-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = perf.parse_stat_csv(csv.read_text())
    assert set(got) == set(perf.EVENTS)
    assert got["task-clock"]["supported"] and got["task-clock"]["value"] > 0
    for ev in ("cycles", "instructions"):
        # Either counted (a host with a PMU) or recorded as not supported.
        assert (got[ev]["value"] is None) == (not got[ev]["supported"])


def test_not_supported_and_garbage():
    got = perf.parse_stat_csv("# started\n\n<not supported>,,cycles,0,100.00,,\n1.5,msec,task-clock,1,100.00,0.3,CPUs\n")
    assert got["cycles"] == {"value": None, "unit": "", "supported": False}
    assert got["task-clock"]["value"] == 1.5
    with pytest.raises(ValueError, match="not understood"):
        perf.parse_stat_csv("garbage\n")


@pytest.mark.guest
def test_perf_stat_of_a_real_guest_boot(tmp_path, monkeypatch):
    import json
    from conftest import kernel_dir
    from qrwbench import bench, matrix
    kernel_dir("x86_64", "acqrel")
    monkeypatch.setenv("QRWB_PERF", "1")
    c = matrix.Cell("x86_64", "tcg", "max", "acqrel", "atomics", 1,
                    (("duration_ms", 2), ("ops", "atomic_add_return"), ("reps", 1)))
    st = bench.boot_one(c, 1, tmp_path / "run", 60, 256, {"usable": False, "reason": "t", "booted": False})
    assert st["status"] == "ok", st
    counts = json.loads((tmp_path / "run" / "perf.json").read_text())
    assert counts["task-clock"]["value"] > 0 and "cycles" in counts
    cmd = json.loads((tmp_path / "run" / "provenance.json").read_text())["qemu_cmd"]
    assert cmd[:2] == ["perf", "stat"]

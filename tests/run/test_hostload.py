"""hostload: the CPU time other processes took during a boot, recorded per
boot (status.json host_load) and summed up in one line by make bench."""
import json
import subprocess
import sys

import numpy as np
import pytest

import synth
from qrwbench.analysis import hostload as loadline
from qrwbench.run import boot, hostload, qemu
from qrwbench.cell import Cell

# /proc/stat's first line on this host (USER_HZ ticks)
STAT = "cpu  1518927 763404 900286 2826772 10181 0 6181 250 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def test_cpu_times_reads_busy_and_steal_from_the_first_line():
    busy, steal = hostload.cpu_times(STAT)
    assert busy == pytest.approx((1518927 + 763404 + 900286 + 0 + 6181) * hostload.TICK_S)
    assert steal == pytest.approx(250 * hostload.TICK_S)
    with pytest.raises(ValueError, match="not a /proc/stat cpu line"):
        hostload.cpu_times("intr 1 2 3\n")


def test_other_time_is_the_busy_time_this_process_did_not_spend():
    a = hostload.Mark(t=10.0, busy_s=100.0, steal_s=1.0, own_s=5.0)
    b = hostload.Mark(t=20.0, busy_s=125.0, steal_s=3.0, own_s=15.0)    # 25 busy, 10 ours
    load = hostload.between(a, b, cpus=2)
    assert load == {"measured": True, "wall_s": 10.0, "cpus": 2,
                    "other_frac": 15 / 20, "steal_frac": 2 / 20}
    quiet = hostload.between(a, hostload.Mark(20.0, 110.0, 1.0, 15.0), cpus=2)
    assert quiet["other_frac"] == 0.0            # rounding of ticks never goes below 0
    assert hostload.between(None, b, 2)["measured"] is False


def test_a_process_beside_the_bench_is_counted_as_other():
    """A child that burns CPU and is not waited for yet is another process's
    time: the busy time between the marks holds at least what it reports."""
    burn = ("import time, resource\n"
            "while resource.getrusage(resource.RUSAGE_SELF).ru_utime < 0.4: pass\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_utime"
            " + resource.getrusage(resource.RUSAGE_SELF).ru_stime, flush=True)\n"
            "time.sleep(5)\n")
    a = hostload.mark()
    p = subprocess.Popen([sys.executable, "-c", burn], stdout=subprocess.PIPE, text=True)
    try:
        used = float(p.stdout.readline())
        b = hostload.mark()
    finally:
        p.kill()
        p.wait()
    other_s = hostload.between(a, b, 1)["other_frac"] * (b.t - a.t)
    assert other_s >= 0.9 * used - 2 * hostload.TICK_S, (other_s, used)


def test_summary_line_gives_median_and_max():
    loads = [{"measured": True, "cpus": 2, "other_frac": f, "steal_frac": 0.01}
             for f in (0.10, 0.50, 0.30)] + [{"measured": False, "reason": "x"}, {}]
    line = loadline.summary_line(loads)
    assert line.startswith("host load: other processes used a median 30 % (max 50 %) "
                           "of the host's 2 CPUs during 3 boots, hypervisor steal a median 1 %")
    assert "not measured" in loadline.summary_line([{}, {"measured": False}])


def test_a_boot_records_its_host_load(tmp_path, monkeypatch):
    """boot_one with QEMU replaced (nothing boots): status.json holds the
    host_load of the marks around it."""
    recs = [synth.begin(threads=2)] + synth.results(rng=np.random.default_rng(0), reps=2)

    def fake_boot(cmd, run_dir, timeout_s, pin=None):
        (run_dir / "qemu.cmd").write_text(" ".join(cmd) + "\n")
        (run_dir / "console.log").write_text(synth.console(recs, boot=synth.BOOT_LINES))
        return {"status": "ok", "reason": "", "returncode": 0, "timed_out": False}

    monkeypatch.setattr(qemu, "boot", fake_boot)
    monkeypatch.setattr(qemu, "host_tsc_khz", lambda: 1_000_000)
    monkeypatch.setenv("QRWB_PERF", "0")
    marks = iter([hostload.Mark(0.0, 50.0, 0.0, 1.0), hostload.Mark(4.0, 54.0, 0.0, 2.0)])
    monkeypatch.setattr(hostload, "mark", lambda: next(marks))
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 2, ())
    kernel = tuple(tmp_path / n for n in ("Image", "initrd", "kdir", "src"))
    st = boot.boot_one(c, 1, tmp_path / "run", 60, 256, boot.NOT_ASKED, kernel=kernel)
    assert st["status"] == "ok", st
    saved = json.loads((tmp_path / "run" / "status.json").read_text())["host_load"]
    cpus = saved["cpus"]
    assert saved == {"measured": True, "wall_s": 4.0, "cpus": cpus,
                     "other_frac": round(min(3.0 / (4.0 * cpus), 1.0), 4), "steal_frac": 0.0}


def test_the_load_now_is_sampled_and_said(monkeypatch):
    marks = iter([hostload.Mark(0.0, 10.0, 0.0, 1.0), hostload.Mark(2.0, 13.0, 0.1, 1.0)])
    monkeypatch.setattr(hostload, "mark", lambda: next(marks))
    monkeypatch.setattr(hostload.time, "sleep", lambda s: None)
    assert hostload.now_line(2.0, cpus=2) == (
        "host load now: other processes use 75 % of the host's 2 CPUs (2 s sample), steal 2 %; "
        "every interval will be wider than on a quiet host")
    monkeypatch.setattr(hostload, "mark", lambda: None)
    assert hostload.now_line(2.0, cpus=2).startswith("host load now: not measured (")

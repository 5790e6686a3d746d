"""`make bench` calls a run ok under the store's import rules (rundir.judge_run):
a guest that finished but lacks the kernel's atomic64 selftest pass line, or
reports other CPUs than asked for, is a failed boot, not data."""
import shlex

import numpy as np
import pytest

import synth
from qrwbench.run import boot, qemu
from qrwbench.cell import Cell

SELFTEST_MISSING = [l for l in synth.BOOT_LINES if "atomic64_test" not in l]


def boot_with_console(tmp_path, monkeypatch, boot_lines, vcpus=2):
    """boot.boot_one with QEMU replaced by a guest that printed ``boot_lines``
    and a complete, valid record stream for a 2-CPU x86_64 acqrel atomics run.
    Nothing boots, so no kernel is needed: the paths given are fakes, and the
    host's TSC rate (a tool built on demand) is a fixed number."""
    recs = [synth.begin(threads=2)] + synth.results(rng=np.random.default_rng(0), reps=2)

    def fake_boot(cmd, run_dir, timeout_s, pin=None):
        (run_dir / "qemu.cmd").write_text(shlex.join(cmd) + "\n")
        (run_dir / "console.log").write_text(synth.console(recs, boot=boot_lines))
        return {"status": "ok", "reason": "", "returncode": 0, "timed_out": False}

    monkeypatch.setattr(qemu, "boot", fake_boot)
    monkeypatch.setattr(qemu, "host_tsc_khz", lambda: 1_000_000)
    monkeypatch.setenv("QRWB_PERF", "0")
    c = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", vcpus, ())
    kernel = tuple(tmp_path / n for n in ("Image", "initrd", "kdir", "src"))
    return boot.boot_one(c, 1, tmp_path / "run", 60, 256, boot.NOT_ASKED, kernel=kernel)


def test_complete_run_with_the_selftest_line_is_ok(tmp_path, monkeypatch):
    st = boot_with_console(tmp_path, monkeypatch, synth.BOOT_LINES)
    assert st["status"] == "ok", st


@pytest.mark.parametrize("lines", [SELFTEST_MISSING, SELFTEST_MISSING + ["[    0.3] atomic64_test: failed"]],
                         ids=["missing", "failed"])
def test_run_without_the_atomic64_selftest_pass_line_fails(tmp_path, monkeypatch, lines):
    st = boot_with_console(tmp_path, monkeypatch, lines)
    assert st["status"] == "failed" and "atomic64_test: passed" in st["reason"], st


def test_guest_with_other_cpus_than_asked_for_fails(tmp_path, monkeypatch):
    st = boot_with_console(tmp_path, monkeypatch, synth.BOOT_LINES, vcpus=4)
    assert st["status"] == "failed" and "asks for 4 vCPUs" in st["reason"], st

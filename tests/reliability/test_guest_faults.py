"""A guest kernel that panics is detected from its console and its run fails."""
from pathlib import Path

import pytest

from conftest import TOP, kernel_dir
from qrwbench import bench, faults, matrix, qemu, records

pytestmark = pytest.mark.guest


def test_guest_panic_is_a_failed_run_with_the_offending_line(tmp_path):
    kd = kernel_dir("x86_64", "acqrel")
    cell = matrix.Cell("x86_64", "tcg", "max", "acqrel", "atomics", 1, ())
    # No init in the initramfs: the kernel panics ("No working init found").
    cmd = qemu.command("x86_64", "tcg", "max", 1, 256, kd / "vmlinux",
                       TOP / "build" / "initrd" / "x86_64-acqrel.cpio", "rdinit=/nonexistent init=/nonexistent")
    st = qemu.boot(cmd, tmp_path, 60)
    console = (tmp_path / "console.log").read_bytes()
    found = faults.scan(console)
    assert any("Kernel panic" in line for line in found), found
    why = bench.check_parsed(records.parse_console(console), cell, console)
    assert why.startswith("guest fault: ") and "panic" in why.lower()
    assert not st["timed_out"], "panic=-1 must reboot the guest, and -no-reboot end QEMU"

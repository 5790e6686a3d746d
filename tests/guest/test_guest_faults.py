"""A guest kernel that panics is detected from its console and its run fails."""

import pytest

from conftest import kernel_dir
from qrwbench import vocab
from qrwbench.results import faults, rundir
from qrwbench.run import qemu

pytestmark = pytest.mark.guest


def test_guest_panic_is_a_failed_run_with_the_offending_line(tmp_path):
    kd = kernel_dir("x86_64", "acqrel")
    prov = {"cell": {"arch": "x86_64", "workload": "atomics", "kernel_variant": "acqrel", "vcpus": 1}}
    # No init in the initramfs: the kernel panics ("No working init found").
    cmd = qemu.command("x86_64", "tcg", "max", 1, 256, kd / "vmlinux",
                       vocab.initrd("x86_64", "acqrel"), "rdinit=/nonexistent init=/nonexistent")
    st = qemu.boot(cmd, tmp_path, 60)
    console = (tmp_path / "console.log").read_bytes()
    found = faults.scan(console)
    assert any("Kernel panic" in line for line in found), found
    why, _ = rundir.judge_run(prov, st, console)     # what `make bench` and the import apply
    assert why.startswith("guest fault: ") and "panic" in why.lower()
    assert not st["timed_out"], "panic=-1 must reboot the guest, and -no-reboot end QEMU"

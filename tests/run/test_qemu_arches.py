"""The QEMU command line of every bootable arch, from its vocab.ARCHES entry
alone (issue 30: ppc64le on pseries, riscv64 on virt under OpenSBI). Host
only: nothing is booted, no QEMU binary is needed."""
import pytest

from qrwbench import vocab
from qrwbench.run import qemu


def cmd(arch, accel="tcg", cpu=None, vcpus=2):
    a = vocab.ARCHES[arch]
    cpu = cpu or (a.kvm_cpu if accel == "kvm" else a.cpu_models[0])
    return qemu.command(arch, accel, cpu, vcpus, 256, "/k", "/i", "qrwbench.seed=1",
                        binary=a.qemu, tsc_khz=2000000)


def arg(c, flag):
    return c[c.index(flag) + 1]


@pytest.mark.parametrize("cpu", ["power9", "power10"])
def test_ppc64le_boots_pseries_with_vof_and_the_hvc_console(cpu):
    c = cmd("ppc64le", cpu=cpu)
    assert c[0] == "qemu-system-ppc64"
    assert arg(c, "-M") == "pseries,x-vof=on" and arg(c, "-cpu") == cpu
    assert arg(c, "-accel") == "tcg,thread=multi" and arg(c, "-smp") == "2"
    append = arg(c, "-append").split()
    assert append[0] == "console=hvc0" and "qrwbench.seed=1" in append
    assert not any(w.startswith("tsc") for w in append), "no TSC on ppc64le"
    assert arg(c, "-kernel") == "/k" and arg(c, "-initrd") == "/i"
    assert "-bios" not in c


def test_riscv64_boots_virt_under_opensbi_on_ttys0():
    c = cmd("riscv64")
    assert c[0] == "qemu-system-riscv64"
    assert arg(c, "-M") == "virt" and arg(c, "-cpu") == "rv64" and arg(c, "-bios") == "default"
    assert c.index("-bios") < c.index("-kernel")
    append = arg(c, "-append").split()
    assert append[0] == "console=ttyS0" and not any(w.startswith("tsc") for w in append)


def test_the_arches_of_before_keep_their_command_lines():
    x = cmd("x86_64")
    assert arg(x, "-M") == "microvm,x-option-roms=off"
    assert "tsc_early_khz=2000000" in arg(x, "-append").split()
    a = cmd("arm64", cpu="cortex-a57")
    assert arg(a, "-M") == "virt" and "-bios" not in a
    assert arg(cmd("arm64", "kvm"), "-M") == "virt,gic-version=max"
    # the KVM-only machine options of one arch reach no other
    assert arg(cmd("ppc64le", "kvm"), "-M") == "pseries,x-vof=on"


@pytest.mark.parametrize("arch", sorted(vocab.ARCHES))
def test_every_arch_has_no_network_disk_or_monitor(arch):
    c = cmd(arch)
    for flag, value in (("-nic", "none"), ("-monitor", "none"), ("-serial", "stdio")):
        assert arg(c, flag) == value, (arch, flag)
    assert "-nodefaults" in c and "-no-reboot" in c
    assert not any(w in c for w in ("-drive", "-hda", "-virtfs", "-netdev"))


def test_missing_qemu_names_the_package(monkeypatch):
    monkeypatch.setattr(qemu.shutil, "which", lambda name: None)
    with pytest.raises(vocab.InputError) as e:
        qemu.qemu_binary("riscv64")
    assert str(e.value) == ("missing QEMU binary qemu-system-riscv64: apt-get install "
                            "qemu-system-misc (or run 'make deps')")

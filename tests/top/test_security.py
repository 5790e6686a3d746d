"""Guests are isolated (no network, no host files) and nothing loads a module
into the host kernel."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import TOP
from qrwbench.run import qemu

FORBIDDEN_QEMU = ("-netdev", "-net", "-virtfs", "-fsdev", "-drive", "-hda", "-chardev", "-qmp", "-monitor")


@pytest.mark.parametrize("arch,accel,cpu", [("x86_64", "tcg", "max"), ("x86_64", "kvm", "host"),
                                            ("arm64", "tcg", "cortex-a57")])
def test_guest_has_no_network_and_no_host_files(arch, accel, cpu, monkeypatch):
    monkeypatch.setattr(qemu, "host_tsc_khz", lambda: 1000000)
    cmd = qemu.command(arch, accel, cpu, 2, 256, Path("/k"), Path("/i"), "qrwbench.workload=atomics")
    i = cmd.index("-nic")
    assert cmd[i + 1] == "none"
    assert "-nodefaults" in cmd and "-no-user-config" in cmd
    for opt in FORBIDDEN_QEMU:
        if opt == "-monitor":
            assert cmd[cmd.index(opt) + 1] == "none"
        else:
            assert opt not in cmd, opt
    assert not any("virtio-9p" in c or "vhost" in c for c in cmd)


def tracked_files():
    out = subprocess.run(["git", "-C", str(TOP), "ls-files"], capture_output=True, text=True, check=True).stdout
    return [TOP / f for f in out.splitlines()]


def test_no_host_module_loading_anywhere_in_the_rig():
    """Only the guest's init calls finit_module; no script runs insmod/modprobe."""
    pat = re.compile(r"\b(insmod|modprobe|rmmod)\b|\b(finit_module|init_module)\s*\(|__NR_(f)?init_module")
    allowed = {TOP / "guest" / "init.c", Path(__file__).resolve(), TOP / "Makefile",
               Path(__file__).with_name("test_make_help.py")}   # names the refusing rules
    offenders = []
    for f in tracked_files():
        if f in allowed or f.suffix in (".md", ".patch") or not f.is_file():
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if pat.search(line):
                offenders.append(f"{f.relative_to(TOP)}:{n}: {line.strip()}")
    assert offenders == []


def test_make_refuses_host_insmod(tmp_path):
    """`make insmod|modprobe|load` fails, says why, and runs no loader: an
    insmod, modprobe or rmmod first on PATH would leave a trace if called."""
    trace = tmp_path / "called"
    for tool in ("insmod", "modprobe", "rmmod"):
        t = tmp_path / tool
        t.write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {trace}\n")
        t.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    for target in ("insmod", "modprobe", "load"):
        r = subprocess.run(["make", "-s", "-C", str(TOP), target], capture_output=True,
                           text=True, env=env)
        assert r.returncode != 0, target
        assert "never loads modules into the host kernel" in r.stderr
    assert not trace.exists(), trace.read_text()

"""Boot one guest in QEMU and supervise it.

The guest has no network (-nic none), no disks and no host file sharing: only
a kernel, an initramfs and a serial console, which QEMU writes to a file. The
launcher enforces a wall-clock timeout and a console size limit, kills QEMU's
whole process group on timeout or on SIGINT/SIGTERM, and writes status.json
last, so an interrupted run is recognisably incomplete.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

from .. import vocab
from ..vocab import ARCHES, TOP, InputError
from . import pin as pinmod

CONSOLE_LIMIT = 16 << 20        # bytes; a guest printing more is broken
PIN_WAIT_S = 10                 # seconds for QEMU to create its vCPU threads
_children: set[subprocess.Popen] = set()


def qemu_binary(arch: str) -> str:
    a = ARCHES[arch]
    path = shutil.which(a.qemu)
    if not path:
        raise InputError(f"missing QEMU binary {a.qemu}: apt-get install {a.qemu_package} (or run 'make deps')")
    return path


def qemu_version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0].strip() if out else "unknown"


def tsc_tool() -> Path:
    """build/tools/tsc_khz from guest/host/tsc_khz.c (built on demand)."""
    src = TOP / "guest" / "host" / "tsc_khz.c"
    exe = vocab.BUILD / "tools" / "tsc_khz"
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        exe.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-o", str(exe) + ".tmp", str(src)], check=True)
        os.replace(str(exe) + ".tmp", exe)
    return exe


def host_tsc_khz() -> int:
    """The host TSC frequency, measured by the tsc_khz tool."""
    return int(subprocess.run([str(tsc_tool())], capture_output=True, text=True,
                              check=True).stdout)


def command(arch: str, accel: str, cpu_model: str, vcpus: int, mem_mb: int,
            kernel: Path | str, initrd: Path | str, append: str, *,
            binary: str | None = None, tsc_khz: int | str | None = None) -> list[str]:
    """The QEMU command line for one boot (the console goes to stdout), from
    the arch's entry in vocab.ARCHES alone.
    ``binary`` and ``tsc_khz`` (arches with tsc_khz: the host TSC rate) default to this
    host's; a boot on another host (remote.py) gives its own."""
    a = ARCHES[arch]
    if accel == "kvm":
        accel_args = ["-accel", "kvm"]
    else:
        accel_args = ["-accel", "tcg,thread=multi"]
    # the arch's machine options (vocab.Arch), and those only KVM needs
    machine = a.machine + a.machine_opts + (a.kvm_machine_opts if accel == "kvm" else "")
    extra = a.extra_append
    if a.tsc_khz:
        # TCG's guest TSC is the host's; under KVM without TSC scaling
        # (-cpu host) it runs at the host's rate too.
        extra += f" tsc_early_khz={host_tsc_khz() if tsc_khz is None else tsc_khz} tsc=reliable"
    cmdline = f"console={a.console} panic=-1 {extra} {append}".split()
    return [binary or qemu_binary(arch), "-M", machine, *accel_args, "-cpu", cpu_model,
            "-smp", str(vcpus), "-m", f"{mem_mb}M",
            "-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
            "-nic", "none", "-serial", "stdio", "-monitor", "none", *a.qemu_args,
            "-kernel", str(kernel), "-initrd", str(initrd),
            "-append", " ".join(cmdline)]


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def kill_all() -> None:
    """Kill every QEMU this process started (used by the signal handlers)."""
    for p in list(_children):
        _kill(p)
        _children.discard(p)


def boot(cmd: list[str], run_dir: Path, timeout_s: float, done_marker: bytes = b'"type":"end"',
         pin: dict[int, int] | None = None) -> dict:
    """Run `cmd`, console to run_dir/console.log; return the status dict.

    The guest is given `timeout_s` seconds of wall time. QEMU normally exits by
    itself (the guest reboots and -no-reboot turns that into an exit); once the
    end marker is on the console it gets 10 more seconds to do so.
    ``pin`` ({vCPU: host CPU}) binds the vCPU threads once they exist
    (pin.py); the outcome is status["pinning"].
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    # Name the guest after its run, so `ps` (and the tests) can tell which
    # QEMU belongs to which run.
    # debug-threads=on names the vCPU threads "CPU n/TCG" (pin.py reads them).
    cmd = [*cmd, "-name", f"guest=qrwbench:{str(run_dir).replace(',', ',,')},debug-threads=on"]
    (run_dir / "qemu.cmd").write_text(shlex.join(cmd) + "\n")
    console = run_dir / "console.log"
    start = time.monotonic()
    status = {"status": "ok", "reason": "", "returncode": None, "timed_out": False}
    with open(console, "wb") as out:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        _children.add(p)
        pinner = pinmod.Pinner(p.pid, pin) if pin else None
        deadline = start + timeout_s
        try:
            while p.poll() is None:
                now = time.monotonic()
                size = console.stat().st_size
                if size > CONSOLE_LIMIT:
                    _kill(p)
                    status.update(status="failed", reason=f"console output over {CONSOLE_LIMIT} bytes")
                    break
                if now > deadline:
                    _kill(p)
                    status.update(status="failed", timed_out=True,
                                  reason=f"guest did not finish within {timeout_s:.0f} s; QEMU killed")
                    break
                if pinner is not None and not pinner.poll() and now - start > PIN_WAIT_S:
                    pinner.give_up()
                if size and deadline - now > 10 and _tail_has(console, done_marker):
                    deadline = now + 10
                time.sleep(0.05)
        finally:
            if p.poll() is None:
                _kill(p)
            _children.discard(p)
    if pinner is not None:
        status["pinning"] = pinner.give_up()
    status["returncode"] = p.returncode
    status["wall_s"] = round(time.monotonic() - start, 3)
    if status["status"] == "ok" and p.returncode != 0:
        status.update(status="failed", reason=f"QEMU exited with status {p.returncode}")
    return status


def _tail_has(path: Path, marker: bytes) -> bool:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - 8192))
        return marker in f.read()


def write_status(run_dir: Path, status: dict) -> None:
    tmp = run_dir / "status.json.tmp"
    tmp.write_text(json.dumps(status, indent=1, sort_keys=True) + "\n")
    tmp.replace(run_dir / "status.json")

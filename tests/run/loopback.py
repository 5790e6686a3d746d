"""Hosts for the several-hosts tests: real sshd instances on loopback
addresses (127.0.0.2, 127.0.0.3, ...), each in its own mount namespace where
its own work directory is bind-mounted on the one remote directory path, so
two "hosts" on this machine keep apart what the rig sends them. Traffic goes
only to those addresses; every wait is bounded."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

SSHD = "/usr/sbin/sshd"


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class Host:
    def __init__(self, name: str, addr: str, root: Path):
        self.name, self.addr, self.root = name, addr, root
        self.port = _free_port(addr)
        self.proc: subprocess.Popen | None = None

    def kill(self) -> None:
        """The host dies: its sshd and everything it runs (a boot included)."""
        if self.proc is None:
            return
        for pid in [*descendants(self.proc.pid), self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        self.proc = None


class Loopback:
    """``n`` hosts named host0.. on 127.0.0.2..; ``env`` for the rig."""

    def __init__(self, base: Path, n: int):
        for tool in (SSHD, shutil.which("unshare"), shutil.which("parallel")):
            if not tool or not Path(tool).exists():
                pytest.fail("the several-hosts tests need sshd, unshare and GNU parallel: "
                            "run 'make deps'")
        self.base = base
        self.remote = base / "remote"           # the one remote path every host sees
        self.remote.mkdir(parents=True)
        key = base / "id"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        (base / "authorized_keys").write_text((base / "id.pub").read_text())
        (base / "authorized_keys").chmod(0o600)
        Path("/run/sshd").mkdir(exist_ok=True)     # sshd's privilege separation directory
        cfg = []
        self.hosts = []
        for i in range(n):
            h = Host(f"host{i}", f"127.0.0.{i + 2}", base / f"host{i}")
            h.root.mkdir()
            hk = base / f"hostkey{i}"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hk)], check=True)
            (base / f"sshd{i}").write_text(
                f"ListenAddress {h.addr}:{h.port}\nHostKey {hk}\n"
                f"AuthorizedKeysFile {base / 'authorized_keys'}\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                f"PidFile {base / f'sshd{i}.pid'}\n")
            cfg.append(f"Host {h.name}\n  HostName {h.addr}\n  Port {h.port}\n  User root\n"
                       f"  IdentityFile {key}\n  IdentitiesOnly yes\n"
                       f"  UserKnownHostsFile {base / 'known_hosts'}\n"
                       "  StrictHostKeyChecking accept-new\n  LogLevel ERROR\n")
            self.hosts.append(h)
        # a name with nothing listening behind it: an unreachable host
        self.dead_port = _free_port("127.0.0.9")
        cfg.append(f"Host nohost\n  HostName 127.0.0.9\n  Port {self.dead_port}\n  User root\n"
                   f"  IdentityFile {key}\n  UserKnownHostsFile {base / 'known_hosts'}\n")
        (base / "ssh_config").write_text("".join(cfg))
        self.env = {"QRWB_SSH_CONFIG": str(base / "ssh_config"),
                    "QRWB_REMOTE_DIR": str(self.remote)}

    def start(self) -> None:
        # The sessions of a loopback host run the login shell, which reads
        # this machine's ~/.bashrc (here: pyenv init, whose rehash takes a
        # lock file). The kill test kills a host's sessions, one of them once
        # mid-rehash: the stale lock then stalled every later ssh session 60 s
        # (the probe's "no answer within 30 s"). Each host, like a remote
        # machine, gets its own plain ~/.bashrc in its mount namespace.
        bashrc = self.base / "bashrc"
        bashrc.write_text("# a loopback test host: no dotfiles of the machine\n")
        home_rc = Path.home() / ".bashrc"
        own_rc = f"mount --bind {bashrc} {home_rc} && " if home_rc.is_file() else ""
        for i, h in enumerate(self.hosts):
            h.proc = subprocess.Popen(
                ["unshare", "-m", "sh", "-c",
                 f"mount --bind {h.root} {self.remote} && {own_rc}"
                 f"exec {SSHD} -D -e -f {self.base / f'sshd{i}'}"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=open(self.base / f"sshd{i}.log", "wb"), start_new_session=True)
        deadline = time.monotonic() + 20
        for h in self.hosts:
            while True:
                with socket.socket() as s:
                    s.settimeout(1)
                    if s.connect_ex((h.addr, h.port)) == 0:
                        break
                if time.monotonic() > deadline or h.proc.poll() is not None:
                    pytest.fail(f"sshd for {h.name} did not start: "
                                + (self.base / f"sshd{self.hosts.index(h)}.log").read_text())
                time.sleep(0.1)

    def stop(self) -> None:
        for h in self.hosts:
            h.kill()

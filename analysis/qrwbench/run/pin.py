"""Pin QEMU's vCPU threads to host CPUs (matrix ``[run] pin = true``).

QEMU started with ``-name ...,debug-threads=on`` names each vCPU thread
``CPU <n>/TCG`` (MTTCG) or ``CPU <n>/KVM``; those names are read from
``/proc/<qemu pid>/task/*/comm``. QEMU is found among the processes of the
session the launcher started (the session leader is QEMU itself, or
``perf`` with QEMU as its child). Each vCPU n is then bound to host CPU
``plan[n]`` with sched_setaffinity(2) (``os.sched_setaffinity``, what
``taskset -p`` calls). QMP ``query-cpus-fast`` reports the same thread ids;
the rig runs QEMU with ``-monitor none`` and no QMP socket, so /proc it is.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

PROC = Path("/proc")
VCPU_COMM = re.compile(r"^CPU (\d+)/(TCG|KVM)$")


def plan(vcpus: int, host_cpus: list[int] | None = None) -> dict[int, int]:
    """vCPU -> host CPU: round-robin over the CPUs this process may use
    (overcommitted guests share CPUs)."""
    cpus = sorted(host_cpus if host_cpus is not None else os.sched_getaffinity(0))
    if not cpus:
        raise ValueError("no host CPUs to pin to")
    return {n: cpus[n % len(cpus)] for n in range(vcpus)}


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:         # the process or thread went away
        return ""


def session_qemu(sid: int, proc: Path = PROC) -> int | None:
    """The pid of the qemu-system-* process in session ``sid`` (None: not yet)."""
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        stat = _read(d / "stat")
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces
        rest = stat.rpartition(")")[2].split()
        if len(rest) < 4 or int(rest[3]) != sid:
            continue
        if _read(d / "comm").strip().startswith("qemu-system"):
            return int(d.name)
    return None


def vcpu_threads(pid: int, proc: Path = PROC) -> dict[int, int]:
    """{vCPU index: thread id} of QEMU process ``pid``."""
    out = {}
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except OSError:
        return out
    for t in tasks:
        if m := VCPU_COMM.match(_read(t / "comm").strip()):
            out[int(m.group(1))] = int(t.name)
    return out


def apply(threads: dict[int, int], cpu_of: dict[int, int], setaffinity=os.sched_setaffinity) -> dict:
    """Bind every vCPU thread; {"vcpu n": {"tid": .., "cpu": ..}}."""
    done = {}
    for n, tid in sorted(threads.items()):
        setaffinity(tid, {cpu_of[n]})
        done[f"vcpu {n}"] = {"tid": tid, "cpu": cpu_of[n]}
    return done


class Pinner:
    """Polled by qemu.boot() until QEMU's vCPU threads exist, then pins them once."""

    def __init__(self, sid: int, cpu_of: dict[int, int], proc: Path = PROC,
                 setaffinity=os.sched_setaffinity):
        self.sid, self.cpu_of, self.proc, self.setaffinity = sid, cpu_of, proc, setaffinity
        self.result: dict | None = None

    def poll(self) -> bool:
        """True once pinned (or failed for good)."""
        if self.result is not None:
            return True
        pid = session_qemu(self.sid, self.proc)
        if pid is None:
            return False
        threads = vcpu_threads(pid, self.proc)
        if len(threads) < len(self.cpu_of):
            return False
        try:
            self.result = {"pinned": True, "threads": apply(threads, self.cpu_of, self.setaffinity)}
        except (OSError, KeyError) as e:
            self.result = {"pinned": False, "reason": f"sched_setaffinity failed: {e}"}
        return True

    def give_up(self) -> dict:
        if self.result is None:
            self.result = {"pinned": False, "reason": "QEMU's vCPU threads (CPU n/TCG|KVM) never appeared"}
        return self.result

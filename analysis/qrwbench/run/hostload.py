"""How busy the host was during one boot, besides the boot itself.

Every figure of a TCG boot is host CPU time: a compile or a second guest
beside it takes cores from QEMU's vCPU threads and widens every interval
(issue 26: run D, loaded by two other sessions' builds, judged 28 of 242
distinguishable comparisons against 112 of 248 in run C). So each local boot
records, from /proc/stat and this process's rusage taken before and after
QEMU runs:

- ``other_frac``: the CPU time of everything but this bench process and its
  children (QEMU, perf) over the boot's wall time x the host's CPUs;
- ``steal_frac``: the time the hypervisor gave this VM's CPUs to others
  (/proc/stat "steal"), over the same.

status.json holds them as ``host_load``; `make bench` and the report give their
median and maximum over the boots (analysis/hostload.py). Boots on other
hosts (HOSTS=) are not measured here.
"""
from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

STAT = Path("/proc/stat")
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Mark:
    t: float            # monotonic seconds
    busy_s: float       # all CPUs' non-idle, non-steal time since boot of the host
    steal_s: float
    own_s: float        # this process and its waited-for children (user + system)


def cpu_times(text: str) -> tuple[float, float]:
    """(busy, steal) seconds from /proc/stat's first line ("cpu  user nice
    system idle iowait irq softirq steal ..."; guest time is inside user)."""
    f = text.split("\n", 1)[0].split()
    if len(f) < 9 or f[0] != "cpu":
        raise ValueError(f"not a /proc/stat cpu line: {text[:60]!r}")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f[1:9])
    return (user + nice + system + irq + softirq) * TICK_S, steal * TICK_S


def mark() -> Mark | None:
    """Now; None where /proc/stat cannot be read."""
    try:
        busy, steal = cpu_times(STAT.read_text())
    except (OSError, ValueError):
        return None
    own = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
    return Mark(time.monotonic(), busy, steal, own)


def between(a: Mark | None, b: Mark | None, cpus: int) -> dict:
    """The host_load entry of a boot from the marks around it."""
    if a is None or b is None:
        return {"measured": False, "reason": f"{STAT} not readable"}
    wall = b.t - a.t
    if wall <= 0 or cpus < 1:
        return {"measured": False, "reason": "no time passed"}
    other = max(0.0, (b.busy_s - a.busy_s) - (b.own_s - a.own_s))
    return {"measured": True, "wall_s": round(wall, 3), "cpus": cpus,
            "other_frac": round(min(other / (wall * cpus), 1.0), 4),
            "steal_frac": round(min(max(b.steal_s - a.steal_s, 0.0) / (wall * cpus), 1.0), 4)}


def now_line(seconds: float = 1.0, cpus: int | None = None) -> str:
    """One line on what other processes use right now (a ``seconds`` sample
    before the first boot), so a busy host is seen before 30 minutes go."""
    cpus = cpus or os.cpu_count() or 1
    a = mark()
    time.sleep(seconds)
    load = between(a, mark(), cpus)
    if not load["measured"]:
        return f"host load now: not measured ({load['reason']})"
    return (f"host load now: other processes use {load['other_frac'] * 100:.0f} % of the "
            f"host's {cpus} CPUs ({seconds:g} s sample), steal {load['steal_frac'] * 100:.0f} %"
            + ("; every interval will be wider than on a quiet host" if load["other_frac"] >= 0.1
               else ""))

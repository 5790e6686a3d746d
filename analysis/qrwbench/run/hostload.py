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

status.json holds them as ``host_load``; `make bench` prints their median and
maximum over its boots. Boots on other hosts (HOSTS=) are not measured here.
"""
from __future__ import annotations

import os
import resource
import statistics
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


def summary_line(loads: list[dict]) -> str:
    """One line on the boots' host load (``status["host_load"]`` of each)."""
    got = [x for x in loads if x and x.get("measured")]
    if not got:
        return "host load: not measured (boots on other hosts, or /proc/stat unreadable)"
    other = [x["other_frac"] * 100 for x in got]
    steal = [x["steal_frac"] * 100 for x in got]
    return (f"host load: other processes used a median {statistics.median(other):.0f} % "
            f"(max {max(other):.0f} %) of the host's {got[0]['cpus']} CPUs during "
            f"{len(got)} boots, hypervisor steal a median {statistics.median(steal):.0f} %; "
            "a busy host widens every interval (docs/validity.md)")

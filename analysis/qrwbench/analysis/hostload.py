"""The host load of a run's boots in one line: the ``host_load`` entries
run/hostload.py writes into each boot's status.json, for `make bench`'s
output and the report's caveats."""
from __future__ import annotations

import statistics


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

"""Host-side `perf stat` (Debian's linux-perf) around a QEMU process.

`stat_prefix(csv)` is the command prefix; `parse_stat_csv(text)` reads
`perf stat -x,` output. Events the host cannot count are recorded as not
supported: this host has software events only (hardware events print
`<not supported>`).
"""
from __future__ import annotations

import shutil

EVENTS = ("task-clock", "context-switches", "cpu-migrations", "cycles", "instructions")


def available() -> bool:
    return shutil.which("perf") is not None


def stat_prefix(csv_path) -> list[str]:
    """`perf stat` writing CSV to csv_path, then the command to measure."""
    return ["perf", "stat", "-x,", "-o", str(csv_path), "-e", ",".join(EVENTS), "--"]


def parse_stat_csv(text: str) -> dict:
    """{event: {"value": float | None, "unit": str, "supported": bool}}.

    Lines are `value,unit,event,run time,percent running,...`; comment and
    blank lines are skipped; a line that does not have that shape raises
    ValueError naming it.
    """
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split(",")
        if len(f) < 3 or not f[2]:
            raise ValueError(f"perf stat line not understood: {line!r}")
        value, unit, event = f[0], f[1], f[2]
        if value.startswith("<"):       # <not supported>, <not counted>
            out[event] = {"value": None, "unit": unit, "supported": value == "<not counted>"}
        else:
            out[event] = {"value": float(value), "unit": unit, "supported": True}
    return out

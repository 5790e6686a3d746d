"""Host-side perf (Debian's linux-perf) around a QEMU process.

* `perf stat` on every run (QRWB_PERF=0 turns it off): `stat_prefix(csv)` is
  the command prefix, `parse_stat_csv(text)` reads `perf stat -x,` output.
  Events the host cannot count are recorded as not supported: this host has
  software events only (hardware events print `<not supported>`).
* With KVM, `perf kvm stat record` inside it (`kvm_stat_prefix`), and
  `perf kvm -i F stat report --event=vmexit` (`kvm_stat_report_cmd`; perf 6.1
  prints it on stderr) read by
  `parse_kvm_stat_report` into exits per reason.
* `make perf CELL=...` (profile.py): `perf record -g` (`record_prefix`) and
  `perf report --stdio` (`report_cmd`).

Whether perf can run at all (installed, perf_event_paranoid) is checked once
per process by `usable()`, so a host where it cannot never loses a run to it.
"""
from __future__ import annotations

import functools
import re
import shutil
import subprocess

EVENTS = ("task-clock", "context-switches", "cpu-migrations", "cycles", "instructions")


def available() -> bool:
    return shutil.which("perf") is not None


@functools.cache
def usable(what: str = "stat") -> tuple[bool, str]:
    """(perf `what` works here, why not): one real `perf stat` / `perf kvm
    stat record` of /bin/true."""
    if not available():
        return False, "perf is not installed (apt-get install linux-perf)"
    cmd = {"stat": ["perf", "stat", "-x,", "-o", "/dev/null", "-e", ",".join(EVENTS), "--", "true"],
           "kvm": ["perf", "kvm", "stat", "record", "-o", "/dev/null", "--", "true"]}[what]
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or ["no message"])[0]
        return False, f"'{' '.join(cmd[:3])}' failed here: {err}"
    return True, ""


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


def kvm_stat_prefix(data_path) -> list[str]:
    """`perf kvm stat record` (the kvm:kvm_entry/kvm_exit tracepoints) of the command."""
    return ["perf", "kvm", "stat", "record", "-o", str(data_path), "--"]


def kvm_stat_report_cmd(data_path) -> list[str]:
    return ["perf", "kvm", "-i", str(data_path), "stat", "report", "--event=vmexit"]


_EXIT_ROW = re.compile(r"^\s*(\S+)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%\s+([\d.]+)us\s+([\d.]+)us"
                       r"\s+([\d.]+)us")
_TOTAL = re.compile(r"^Total Samples:\s*(\d+), Total events handled time:\s*([\d.]+)us")


def parse_kvm_stat_report(text: str) -> dict:
    """{"exits": {reason: {"samples", "time_pct", "avg_us"}}, "total": n,
    "handled_us": t} from `perf kvm stat report --event=vmexit`; ValueError
    when the output has no 'Total Samples' line (not a report)."""
    exits, total = {}, None
    for line in text.splitlines():
        if m := _EXIT_ROW.match(line):
            exits[m.group(1)] = {"samples": int(m.group(2)), "time_pct": float(m.group(4)),
                                 "avg_us": float(m.group(7))}
        elif m := _TOTAL.match(line.strip()):
            total = (int(m.group(1)), float(m.group(2)))
    if total is None:
        raise ValueError("not a 'perf kvm stat report' output (no 'Total Samples' line)")
    if sum(e["samples"] for e in exits.values()) != total[0]:
        raise ValueError(f"perf kvm stat report: exit rows add up to "
                         f"{sum(e['samples'] for e in exits.values())}, total says {total[0]}")
    return {"exits": exits, "total": total[0], "handled_us": total[1]}


def record_prefix(data_path) -> list[str]:
    """`perf record -g` of the command (call graphs through frame pointers)."""
    return ["perf", "record", "-q", "-g", "-o", str(data_path), "--"]


def report_cmd(data_path, limit_pct: float = 0.5) -> list[str]:
    """The hottest symbols (self time) of a `perf record` file, as text."""
    return ["perf", "report", "-i", str(data_path), "--stdio", "--no-children",
            "--sort", "comm,dso,symbol", "--percent-limit", str(limit_pct), "-g", "none"]

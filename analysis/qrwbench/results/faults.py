"""Fault scan of a guest console, after rcutorture's parse-console.sh.

``parse-console.sh`` / ``console-badness.sh`` grep for Badness, WARNING:, BUG,
Call Trace:, Oops:, and RCU stall messages, then drop a few known-benign
lines. This module does the same with patterns anchored a little tighter, so
that boot messages such as ``Kernel command line: ... panic=-1`` or the CPU
vulnerability notices (``RETBleed: WARNING: ...``) do not fail every run.

:func:`scan` returns the first offending lines (at most ``limit``), in console
order; an empty list means no fault. :func:`selftest_passed` tells whether the
kernel's ``lib/atomic64_test.c`` printed its pass line.
"""

from __future__ import annotations

import re

# One alternation per family, so the report can say what kind of fault it was.
PATTERNS: tuple[tuple[str, str], ...] = (
    ("panic", r"Kernel panic"),
    ("oops", r"\bOops\b|Internal error: "),
    ("bug", r"\bBUG:|kernel BUG at|UBSAN:"),
    ("warning", r"WARNING:|\bBadness\b"),
    ("call-trace", r"Call [Tt]race:?"),
    ("lockdep", r"possible recursive locking|inconsistent lock state|"
                r"circular locking|possible deadlock|lock held when returning"),
    ("lockup", r"soft lockup|hard LOCKUP|blocked for more than \d+ seconds"),
    ("rcu-stall", r"self-detected stall|detected stalls on CPUs/tasks|"
                  r"rcu: INFO: .*stall|Stall ended before state dump start|"
                  r"rcu_.*kthread starved for"),
    ("gpf", r"general protection fault|Unable to handle kernel|"
            r"BUG: unable to handle"),
    # A misspelled module parameter is ignored by the kernel: the run would
    # silently use defaults, so it is a failed run.
    ("bad-param", r"qrwbench: unknown parameter"),
)

# Lines that match a pattern above but are not faults (as console-badness.sh's
# `grep -v` list, plus hardware-vulnerability notices printed at boot).
IGNORE = (
    r"ODEBUG: ",
    r"This means that this is a DEBUG kernel and it is",
    r"Warning: unable to open an initial console",
    r"Warning: Failed to add ttynull console",
    r"Kernel command line:",
    r"(Spectre|RETBleed|MDS|MMIO Stale Data|GDS|TAA|SRBDS|SRSO|ITS|BHI|TSA|"
    r"L1TF|Speculative Store Bypass|Register File Data Sampling|VMSCAPE)[^:]*: WARNING:",
    # ppc64le on QEMU pseries with VOF (x-vof=on): its NVRAM is blank (SLOF
    # would format it), so the kernel's partition scan finds none
    # (arch/powerpc/kernel/nvram_64.c); no fault of the guest
    r"WARNING: nvram corruption detected: 0-length partition\r?$",
)

_FAULT_RE = re.compile("|".join(f"(?P<{name.replace('-', '_')}>{pat})"
                                for name, pat in PATTERNS))
_IGNORE_RE = re.compile("|".join(IGNORE))
_SELFTEST_RE = re.compile(r"atomic64_test: passed\b")
_SELFTEST_FAIL_RE = re.compile(r"atomic64_test: failed|atomic64_test.*FAIL")
MAX_REPORTED_CHARS = 200


def _lines(console) -> list[str]:
    if isinstance(console, (bytes, bytearray)):
        console = bytes(console).decode("latin-1")
    if isinstance(console, str):
        return console.split("\n")
    return list(console)


def classify(line: str) -> str | None:
    """The fault family of one console line, or None when it is not a fault."""
    if _IGNORE_RE.search(line):
        return None
    m = _FAULT_RE.search(line)
    if not m:
        return None
    return next(k for k, v in m.groupdict().items() if v is not None).replace("_", "-")


def scan(console, limit: int = 10) -> list[str]:
    """First offending lines of ``console`` (text, bytes or an iterable of lines)."""
    found = []
    for line in _lines(console):
        line = line.rstrip("\r")
        if classify(line) is not None:
            found.append("".join(c if " " <= c <= "~" else "?"
                                 for c in line.strip())[:MAX_REPORTED_CHARS])
            if len(found) >= limit:
                break
    return found


def selftest_passed(console) -> bool:
    """True when ``atomic64_test: passed`` is on the console and no failure line is."""
    lines = _lines(console)
    passed = any(_SELFTEST_RE.search(l) and not l.startswith("@@QRWB") for l in lines)
    failed = any(_SELFTEST_FAIL_RE.search(l) for l in lines)
    return passed and not failed

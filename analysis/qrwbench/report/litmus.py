"""Weak-memory canaries: what reordering a backend can show at all.

The module's ``workload=litmus`` runs the tests of
bench/module/qrwb_litmus.def (message passing, store buffering, and the
shape of qrwlock's write unlock against a read lock) on two vCPUs and
prints one ``litmus`` record per test: how often each outcome (r0, r1)
came out. A test's "want" outcome is the one only reordering explains:

* seen in a test the Linux kernel memory model (LKMM) forbids: a bug
  (CPU, emulator or kernel), reported as such;
* seen in an allowed test: this backend can show that reordering;
* never seen in an allowed test: it could not here, in that many tries
  (the wording of herd7/klitmus7: Never / Sometimes).

``make torture`` boots one canary guest per target and prints the table;
where no message-passing canary (``mp``, ``qrw_unlock_rlock_relaxed``) ever
fired, its ``relaxed`` rows say that this backend cannot show the
reordering a relaxed lock allows, so their 0 violations prove nothing.

This module boots nothing: it judges and tabulates canary records and reads
and writes make torture's canaries.json (the report reads it too); the
canary boots are ``torture.run_canaries``.
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import vocab
from ..errors import QrwbenchError
from ..cell import Cell
from ..results import records

DEFAULT_CANARIES = vocab.BUILD / "torture" / "canaries.json"     # make torture writes it

# the canaries whose firing shows the reordering a relaxed read lock allows
MP_CANARIES = ("mp", "qrw_unlock_rlock_relaxed")
ITERS = 100000
LIMIT_MS = 20000         # per test: the module stops a test after this


def cell(arch: str, accel: str, cpu: str, variant: str = "acqrel", iters: int = ITERS,
         limit_ms: int = LIMIT_MS) -> Cell:
    """The canary boot of one target (two vCPUs: the two threads of a test)."""
    return Cell.boot(arch, accel, cpu, variant, "litmus", 2,
                     {"litmus_iters": iters, "duration_ms": limit_ms})


def seen(rec: dict) -> int:
    """How often the test's "want" outcome came out."""
    w = rec["want"]
    return rec["counts"][w[0] * 2 + w[1]]


def verdict(rec: dict) -> tuple[str, bool]:
    """(words, bad): bad when an outcome the LKMM forbids was seen."""
    n, it = seen(rec), rec["iters"]
    if it == 0:
        return "not run (no iteration finished in the time limit)", False
    if rec["lkmm"] == "forbidden":
        return (("VIOLATED: a forbidden outcome, a bug", True) if n else
                (f"Never in {it} (as it must)", False))
    return ((f"Sometimes: {n} of {it}", False) if n else
            (f"Never in {it}: this backend did not show it", False))


def table(rows: list[tuple[str, dict]]) -> tuple[str, bool]:
    """Markdown table of (target label, litmus record) rows; (text, any bad)."""
    lines = ["| target | test | LKMM | outcome | iterations | seen | verdict |",
             "|---|---|---|---|---|---|---|"]
    bad = False
    for label, r in rows:
        words, b = verdict(r)
        bad |= b
        lines.append(f"| {label} | {r['test']} | {r['lkmm']} | r0={r['want'][0]} r1={r['want'][1]} "
                     f"| {r['iters']} | {seen(r)} | {words} |")
    return "\n".join(lines), bad


def blind_to_mp(recs: list[dict]) -> bool:
    """True when no message-passing canary fired (and at least one ran)."""
    mp = [r for r in recs if r["test"] in MP_CANARIES and r["iters"] > 0]
    return bool(mp) and not any(seen(r) for r in mp)


def target_label(c: Cell) -> str:
    return f"{c.arch}/{c.accel}/{c.cpu}"


def canary_targets(cells: list[Cell]) -> list[Cell]:
    """One canary cell per (arch, accel, cpu) of ``cells``, in their order."""
    seen_t, out = set(), []
    for c in cells:
        k = (c.arch, c.accel, c.cpu)
        if k not in seen_t:
            seen_t.add(k)
            out.append(cell(c.arch, c.accel, c.cpu))
    return out


def save(got: dict[str, list[dict]], path: Path) -> None:
    """{target label: litmus records} as JSON rows (make torture's canaries.json)."""
    rows = [{"target": label, **{k: r[k] for k in ("test", "lkmm", "want", "iters", "ns", "counts")}}
            for label, recs in got.items() for r in recs]
    Path(path).write_text(json.dumps({"schema": 1, "canaries": rows}, indent=1) + "\n")


def load(path=None) -> list[tuple[str, dict]] | None:
    """(target label, litmus record) rows of a canaries.json; None when there
    is none; each row checked as the parser checks a litmus record."""
    path = Path(path or DEFAULT_CANARIES)
    try:
        if not path.is_file():
            return None
        obj = json.loads(path.read_text(encoding="utf-8"))
        rows = obj["canaries"] if isinstance(obj, dict) and obj.get("schema") == 1 else None
        if not isinstance(rows, list):
            raise ValueError("not a schema 1 object with a 'canaries' list")
        out = []
        for i, r in enumerate(rows):
            if not isinstance(r, dict) or not isinstance(r.get("target"), str):
                raise ValueError(f"canaries[{i}] has no target")
            try:
                records.check_litmus(r, {"workload": "litmus"})
            except records.RecordError as e:
                raise ValueError(f"canaries[{i}]: {e}") from None
            out.append((r["target"], r))
        return out
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise QrwbenchError(f"canary file {path}: {e}") from None

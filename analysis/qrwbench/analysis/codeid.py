"""Which variant pairs compile to identical code: read from the ordering audit.

The audit (`make audit`) writes a JSON file; this module only reads it, so the
report can label comparisons "identical code: any difference is noise". The
file is optional: without it no comparison is labeled.

Format (schema 1)::

    {"schema": 1,
     "identical": [{"arch": "x86_64", "impl": "inline", "op": "atomic_add_return",
                    "variants": ["full", "acquire", "release", "relaxed"]}, ...],
     "notes": [{"arch": "arm64", "impl": "module", "op": "rwlock",
                "variant": "relaxed", "text": "..."}]}

An ``identical`` entry says all its ``variants`` compile to the same code for
that arch; ``impl``, ``op`` and ``workload`` narrow it when present. ``notes``
are findings the report shows as they are (for example a variant that does not
compile to what its name promises).

The file ``python3 -m qrwbench audit`` writes today (no ``schema`` key) is read
too: ``{"kernels": [...], "identical": [{"arch", "a", "b", "functions"}]}``
lists pairs of kernel builds whose qrwlock functions hash the same; each pair
becomes ``{"arch", "impl": "kernel", "variants": [a, b]}`` (the comparisons of
kernel builds: the kernel's rwlock_t, whichever workload drives it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import QrwbenchError

DEFAULT_AUDIT = "build/audit/audit.json"
DEFAULT_EMULATOR = "build/emulator/emulator.json"      # emuaudit.py
_SCOPE = ("arch", "impl", "op", "workload")


@dataclass
class Audit:
    identical: list[dict] = field(default_factory=list)
    notes: list[dict] = field(default_factory=list)
    path: str = ""
    # emuaudit.py's emulator.json: pairs whose guest code differs while TCG
    # runs the same ops for both ({arch, accel, cpu_model, vcpus, impl, op, variants})
    blind: list[dict] | None = None     # None: no emulator audit was read
    # the emulator audit's pairs whose TCG ops differ (its "labels" rows
    # labeled distinguishable); None: no emulator audit was read
    distinct: list[dict] | None = None

    def is_blind(self, cell, a: str, b: str) -> bool:
        """TCG executes the same for variants a and b of ``cell`` (a Cell)."""
        return any(_same_target(e, cell, a, b) for e in self.blind or ())

    def is_distinct(self, cell, a: str, b: str) -> bool:
        """The emulator audit saw different TCG ops for variants a and b of ``cell``."""
        return any(_same_target(e, cell, a, b) for e in self.distinct or ())

    def is_identical(self, cell, a: str, b: str) -> bool:
        for e in self.identical:
            if all(e.get(k) in (None, getattr(cell, k)) for k in _SCOPE) \
                    and a in e["variants"] and b in e["variants"]:
                return True
        return False

    def notes_for(self, cells) -> list[str]:
        cells = list(cells)
        out = []
        for n in self.notes:
            if any(all(n.get(k) in (None, getattr(c, k)) for k in _SCOPE) for c in cells):
                scope = " ".join(str(n[k]) for k in ("arch", "impl", "op", "variant")
                                 if n.get(k))
                out.append(f"audit ({scope}): {n['text']}")
        return out


def _same_target(e: dict, cell, a: str, b: str) -> bool:
    """An emulator audit entry is about variants a and b of ``cell`` (the file
    names the CPU model cpu_model, as the samples do)."""
    return all(e.get(k) == getattr(cell, k) for k in ("arch", "accel", "vcpus", "impl", "op")) \
        and e.get("cpu_model") == cell.cpu and {a, b} <= set(e["variants"])


def _strs(obj, key, where, required=False):
    v = obj.get(key)
    if v is None and not required:
        return
    if type(v) is not str or not v:
        raise QrwbenchError(f"{where}: {key!r} must be a non-empty string")


def _check_entry(e, where, required, optional) -> None:
    """One entry of an audit list: an object whose ``required`` keys are
    non-empty strings and whose ``optional`` ones, where present, too."""
    if not isinstance(e, dict):
        raise QrwbenchError(f"{where} is not an object")
    for k in required:
        _strs(e, k, where, required=True)
    for k in optional:
        _strs(e, k, where)


def _from_kernel_audit(obj: dict, path) -> dict:
    pairs = obj.get("identical", [])
    if not isinstance(pairs, list):
        raise QrwbenchError(f"audit file {path}: 'identical' must be a list")
    out = []
    for i, p in enumerate(pairs):
        if not isinstance(p, dict) or not all(type(p.get(k)) is str and p.get(k)
                                              for k in ("arch", "a", "b")):
            raise QrwbenchError(f"audit file {path}: identical[{i}] lacks arch/a/b")
        out.append({"arch": p["arch"], "impl": "kernel", "variants": [p["a"], p["b"]]})
    return {"schema": 1, "identical": out, "notes": []}


def load_audit(path) -> Audit:
    """Read and validate the audit JSON; QrwbenchError when it is malformed."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise QrwbenchError(f"audit file {path}: {type(exc).__name__}: {exc}") from None
    if isinstance(obj, dict) and "schema" not in obj and "kernels" in obj:
        obj = _from_kernel_audit(obj, path)
    if not isinstance(obj, dict) or obj.get("schema") != 1:
        raise QrwbenchError(f"audit file {path}: not a schema 1 audit object")
    ident = obj.get("identical", [])
    notes = obj.get("notes", [])
    if not isinstance(ident, list) or not isinstance(notes, list):
        raise QrwbenchError(f"audit file {path}: 'identical' and 'notes' must be lists")
    for key, items, required, optional in (
            ("identical", ident, ("arch",), ("impl", "op", "workload")),
            ("notes", notes, ("arch", "text"), ("impl", "op", "workload", "variant"))):
        for i, e in enumerate(items):
            where = f"audit file {path}: {key}[{i}]"
            _check_entry(e, where, required, optional)
            v = e.get("variants")
            if key == "identical" and (not isinstance(v, list) or len(v) < 2
                                       or not all(type(x) is str for x in v)):
                raise QrwbenchError(f"{where}: 'variants' must list at least two names")
    return Audit(ident, notes, str(path))


def load_blind(path) -> list[dict]:
    """The emulator-blind pairs of an emulator.json (emuaudit.py)."""
    path = Path(path)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise QrwbenchError(f"emulator audit {path}: {type(exc).__name__}: {exc}") from None
    blind = obj.get("blind") if isinstance(obj, dict) and obj.get("schema") == 1 else None
    if not isinstance(blind, list):
        raise QrwbenchError(f"emulator audit {path}: not a schema 1 object with a 'blind' list")
    for i, e in enumerate(blind):
        where = f"emulator audit {path}: blind[{i}]"
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in
                                              ("arch", "accel", "cpu_model", "impl", "op")) \
                or type(e.get("vcpus")) is not int or not isinstance(e.get("variants"), list):
            raise QrwbenchError(f"{where}: needs arch, accel, cpu_model, vcpus, impl, op, variants")
    return blind


def load_distinct(path) -> list[dict]:
    """The pairs an emulator.json labels distinguishable (its ``labels`` rows;
    a file without them: none). Read after :func:`load_blind` checked the file."""
    obj = json.loads(Path(path).read_text(encoding="utf-8"))
    rows = obj.get("labels") if isinstance(obj.get("labels"), list) else []
    return [r for r in rows if isinstance(r, dict) and r.get("label") == "distinguishable"
            and isinstance(r.get("variants"), list)]


def find_audit(path=None, emulator=None) -> Audit | None:
    """The audit at ``path`` (must exist), else the default one if present, else
    None; with the emulator audit (``emulator``, default
    build/emulator/emulator.json) when there is one."""
    if path:
        audit = load_audit(path)
    elif _is_file(DEFAULT_AUDIT):
        audit = load_audit(DEFAULT_AUDIT)
    else:
        return None
    emulator = emulator or DEFAULT_EMULATOR
    if _is_file(emulator):
        audit.blind = load_blind(emulator)
        audit.distinct = load_distinct(emulator)
    return audit


def _is_file(path) -> bool:
    """Path.is_file, with an unreadable directory a one-line error, not a traceback."""
    try:
        return Path(path).is_file()
    except OSError as exc:
        raise QrwbenchError(f"cannot read {path}: {exc.strerror or exc}") from None

"""Output directories the rig owns, and nothing else.

Every directory the rig writes as a whole (a report, an audit, a torture
report, a perf profile, a run directory) carries a marker file
``.qrwbench-output`` naming its kind. A command may replace or remove a
directory only when it is absent or carries the marker of the same kind;
anything else at that path (a system directory, a file, a symbolic link, a
directory of the user's, even an empty one) is a one-line error naming it,
raised before any work is done.

Whole outputs (:func:`replacing`) are written into a new temporary directory
next to the target and swapped in only when complete; concurrent writers of
one output are serialized by a lock file next to it
(``.<name>.qrwbench-lock``), so the second waits and then replaces the first
one's complete output.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .errors import QrwbenchError

MARKER = ".qrwbench-output"

# Outputs written before the marker existed: a directory is taken as an
# earlier output of a kind only when everything in it, recursively, is what
# the rig wrote there: these files, and these subdirectories with their own
# rule ("plots": only .png/.svg files; "run": a run directory; "runs": only
# run directories). Anything else in it, and it is refused.
_RUN_FILES = {"provenance.json", "status.json", "status.json.tmp", "console.log", "qemu.cmd",
              "perf.csv", "perf-kvm.txt", "perf-kvm.data"}
LEGACY = {
    "report": ({"index.html", "report.md"}, {"plots": "plots"}),
    "audit": ({"audit.json", "audit.txt", "audit.json.tmp"}, {}),
    "torture": ({"report.md"}, {"runs": "runs"}),
    "perf": ({"perf.data", "perf.data.old", "report.txt", "hot.txt"}, {"run": "run"}),
    "run": (_RUN_FILES, {}),
}


def _only_files(d: Path, ok) -> bool:
    return all(p.is_file() and not p.is_symlink() and ok(p.name) for p in d.iterdir())


def _legacy(path: Path, kind: str) -> bool:
    """True when ``path`` holds exactly what an unmarked output of ``kind`` held."""
    files, dirs = LEGACY.get(kind, (set(), {}))
    entries = list(path.iterdir())
    if not entries or (kind == "run" and not (path / "provenance.json").is_file()):
        return False
    for e in entries:
        if e.is_symlink():
            return False
        if e.is_file() and e.name in files:
            continue
        rule = dirs.get(e.name) if e.is_dir() else None
        if rule == "plots" and _only_files(e, lambda n: n.endswith((".png", ".svg"))):
            continue
        if rule == "run" and owned(e, "run"):
            continue
        if rule == "runs" and all(r.is_dir() and owned(r, "run") for r in e.iterdir()):
            continue
        return False
    return True


def _kind_of(path: Path) -> str | None:
    """The kind recorded in ``path``'s marker, or None."""
    try:
        doc = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return doc.get("kind") if isinstance(doc, dict) else None


def owned(path: Path, kind: str) -> bool:
    """True when ``path`` is a directory the rig wrote as an output of ``kind``."""
    if path.is_symlink() or not path.is_dir():
        return False
    if _kind_of(path) == kind:
        return True
    if (path / MARKER).exists():
        return False
    try:
        return _legacy(path, kind)
    except OSError:
        return False


def check(path, kind: str, what: str | None = None) -> Path:
    """``path`` as an absolute Path when the rig may (re)write it as an output
    of ``kind``: it does not exist, or it is an earlier output of that kind.
    Otherwise QrwbenchError naming it and what to do."""
    what = what or f"qrwbench {kind} directory"
    if "\0" in str(path) or not str(path).strip():
        raise QrwbenchError(f"{str(path)!r}: not a path the rig can write a {what} to: give "
                            "a new directory path")
    p = Path(os.path.abspath(path))
    if p == p.parent or not p.name or p.name in (".", ".."):
        raise QrwbenchError(f"{path!s}: not a path the rig can write a {what} to: give a "
                            "new directory path")
    if p.is_symlink():
        raise QrwbenchError(f"{p} is a symbolic link, not a {what}: remove it or give "
                            "another path (the rig replaces only its own outputs)")
    if not p.exists():
        return p
    if not p.is_dir():
        raise QrwbenchError(f"{p} exists and is not a directory: give a new path for the "
                            f"{what} (the rig replaces only its own outputs)")
    if not owned(p, kind):
        other = _kind_of(p)
        raise QrwbenchError(
            f"{p} exists and is not a {what} (" +
            (f"it holds a qrwbench {other} output" if other else f"no {MARKER} marker of kind "
             f"'{kind}'") + "): remove it yourself or give a new path")
    return p


def mark(path: Path, kind: str) -> None:
    (path / MARKER).write_text(json.dumps({"kind": kind, "writer": "qrwbench"}) + "\n")


@contextmanager
def _locked(p: Path):
    p.parent.mkdir(parents=True, exist_ok=True)
    lock = p.parent / f".{p.name}.qrwbench-lock"
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            print(f"qrwbench: waiting for another writer of {p} (pid {fh.read().strip() or '?'})",
                  file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield


def _remove_owned(p: Path, kind: str) -> None:
    """Move an earlier output of ``kind`` aside and delete it (checked again)."""
    if not p.exists() and not p.is_symlink():
        return
    check(p, kind)
    old = Path(tempfile.mkdtemp(prefix=f".{p.name}.old-", dir=p.parent))
    os.rename(p, old / p.name)
    shutil.rmtree(old)


@contextmanager
def replacing(path, kind: str, what: str | None = None):
    """Write a whole output: yields a new empty directory next to ``path``;
    when the block ends without an exception it is marked and swapped in for
    ``path`` (an earlier output of ``kind``, or nothing). On an exception the
    temporary directory is removed and ``path`` is untouched."""
    p = check(path, kind, what)
    try:
        with _locked(p):
            p = check(p, kind, what)        # again: another writer may have finished
            tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.tmp-", dir=p.parent))
            os.chmod(tmp, 0o755)    # an output is for everyone to read (mkdtemp makes 0700)
            try:
                yield tmp
                mark(tmp, kind)
                _remove_owned(p, kind)
                os.rename(tmp, p)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except OSError as exc:
        raise QrwbenchError(f"cannot write {p}: {exc.strerror or exc}") from None


def fresh_dir(path, kind: str, what: str | None = None) -> Path:
    """A new, empty, marked directory at ``path`` for an output written in
    place (a run directory, whose console is followed while it runs): an
    earlier output of ``kind`` there is removed first, anything else refused."""
    p = check(path, kind, what)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        _remove_owned(p, kind)
        p.mkdir()
        mark(p, kind)
    except OSError as exc:
        raise QrwbenchError(f"cannot create {p}: {exc.strerror or exc}") from None
    return p


def add_out_option(ap, kind: str) -> None:
    """The ``--out`` option of a command whose output directory is of
    ``kind`` (default build/<kind> of the rig; only a directory of that kind
    is ever replaced)."""
    top = Path(__file__).resolve().parents[2]
    ap.add_argument("--out", default=str(top / "build" / kind),
                    help=f"output directory (default build/{kind}; replaced only if it is a "
                         f"{kind} directory this rig wrote)")

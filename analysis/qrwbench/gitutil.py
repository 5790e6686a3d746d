"""The few questions the analysis asks git (rig repo or a kernel tree)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .errors import QrwbenchError, one_line


def git(repo, *args: str, timeout: float = 60) -> str:
    """``git -C repo args``; QrwbenchError with git's last line when it fails.
    ``timeout``: seconds (a checkout of a whole kernel tree on a loaded
    2-core host took over a minute)."""
    try:
        res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True,
                             text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise QrwbenchError(f"git {' '.join(args[:2])} in {repo}: {exc}") from None
    if res.returncode != 0:
        msg = (res.stderr.strip().splitlines() or ["failed"])[-1]
        raise QrwbenchError(f"git {' '.join(args[:2])} in {repo}: {one_line(msg)}")
    return res.stdout


def argv(repo, *args: str) -> list[str]:
    """The command line of ``git -C repo args`` (for a process that streams)."""
    return ["git", "-C", str(repo), *args]


def soft(repo, *args: str) -> str:
    """``git -C repo args``'s output, or "" when it fails (a question whose
    "no" is an answer: not a repository, no such commit)."""
    try:
        return git(repo, *args)
    except QrwbenchError:
        return ""


def ok(repo, *args: str) -> bool:
    """Whether ``git -C repo args`` succeeds (e.g. merge-base --is-ancestor)."""
    try:
        git(repo, *args)
        return True
    except QrwbenchError:
        return False


def names_commit(ref: str, sha: str, min_len: int = 7) -> bool:
    """Whether ``ref`` and ``sha`` name one commit: equal, or the shorter (at
    least ``min_len`` hex digits) a prefix of the longer. One rule for a
    user's abbreviation of a stored sha and a stored abbreviation of git's."""
    short, long_ = sorted((ref, sha), key=len)
    return ref == sha or (len(short) >= min_len and long_.startswith(short))


def is_repo(repo) -> bool:
    if not Path(repo).is_dir():
        return False
    try:
        return git(repo, "rev-parse", "--git-dir").strip() != ""
    except QrwbenchError:
        return False


def rev_parse(repo, ref: str) -> str:
    """Full sha of ``ref``; QrwbenchError naming the repo when it is unknown."""
    if not is_repo(repo):
        raise QrwbenchError(f"{repo} is not a git repository (needed to resolve {ref!r})")
    if not ref or ref.startswith("-") or "\0" in ref or not ref.isprintable():
        raise QrwbenchError(f"unknown commit {ref!r} in {repo}")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except QrwbenchError:
        raise QrwbenchError(f"unknown commit {ref!r} in {repo}") from None


def ancestors(repo, sha: str) -> list[str]:
    """Commits reachable from ``sha``, newest first (topological), ``sha`` excluded."""
    out = git(repo, "rev-list", "--topo-order", sha).split()
    return [c for c in out if c != sha]


def subject(repo, sha: str) -> str:
    try:
        return one_line(git(repo, "log", "-1", "--format=%s", sha), 120)
    except QrwbenchError:
        return ""


def order(repo, commits) -> list[str]:
    """``commits`` sorted oldest first in git's topological order; commits git
    does not know keep their given relative order, after the known ones."""
    commits = list(commits)
    if not is_repo(repo):
        return commits
    try:
        known = git(repo, "rev-list", "--topo-order", "--reverse", "--all").split()
    except QrwbenchError:
        return commits
    pos = {c: i for i, c in enumerate(known)}

    def where(c):
        full = [k for k in (c,) if k in pos]
        if not full and len(c) >= 7:
            full = [k for k in pos if k.startswith(c)][:1]
        return pos[full[0]] if full else None

    idx = {c: where(c) for c in commits}
    inside = sorted((c for c in commits if idx[c] is not None), key=lambda c: idx[c])
    return inside + [c for c in commits if idx[c] is None]

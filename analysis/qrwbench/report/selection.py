"""What a report or comparison reads: the samples and runs of one rig commit
(``--commit``: 'latest', 'all', 'HEAD', a sha or prefix), make kvm-nested's
runs left out (:mod:`nested` lists them apart, never pooled)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import gitutil
from ..errors import QrwbenchError
from ..results import store
from . import nested


@dataclass
class Selection:
    """One rig commit's samples (of ok runs) and runs (ok and failed)."""
    label: str                  # shown in the report header
    rig_commit: str | None      # None: all commits
    samples: list[dict]
    runs: list[dict]            # ok and failed runs of the selection


def select(conn, commit: str = "latest", repo=".") -> Selection:
    """The samples and runs of one rig commit ('latest', 'all', 'HEAD', sha/prefix),
    without make kvm-nested's runs (nested.py: listed apart, never pooled)."""
    runs, nested_runs = nested.split(store.load_runs(conn))
    if not runs:
        raise QrwbenchError("empty selection: the results DB holds no runs" + (
            f" but {len(nested_runs)} of make kvm-nested, which are not compared: "
            "run make bench" if nested_runs else ""))
    if commit == "all":
        sel, label = None, "all rig commits"
    else:
        known = store.commits_with_results(conn, "rig", exclude_host=nested.HOST)
        if not known:
            n_failed = sum(r["status"] == "failed" for r in runs)
            raise QrwbenchError(f"empty selection: no ok runs in the results DB "
                                f"({n_failed} failed runs)")
        if commit == "latest":
            sel = known[-1]["commit"]
        elif commit == "HEAD":
            sha = gitutil.rev_parse(repo, "HEAD")
            sel = store.resolve_commit(conn, sha, "rig") if not any(
                k["commit"] == sha for k in known) else sha
        else:
            sel = store.resolve_commit(conn, commit, "rig")
        label = f"rig commit {sel[:12]}"
    samples = nested.split(store.load_samples(conn, rig_commit=sel))[0]
    if not samples:
        raise QrwbenchError(f"empty selection: no samples of ok runs for {label}")
    runs = [r for r in runs if sel is None or r["rig_commit"] == sel]
    return Selection(label, sel, samples, runs)


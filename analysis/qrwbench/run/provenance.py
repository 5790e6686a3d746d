"""Provenance of a run: everything needed to compare its numbers later."""
from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

from .. import gitutil, vocab
from ..vocab import TOP


def _git(repo: Path, *args: str) -> str:
    return gitutil.soft(repo, *args).strip()


def rig_state(repo: Path = TOP) -> dict:
    """The rig's git commit, whether the tree is dirty, and a hash of the diff."""
    commit = _git(repo, "rev-parse", "HEAD") or "uncommitted"
    dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    diff = _git(repo, "diff", "HEAD") if dirty else ""
    return {"rig_commit": commit, "rig_dirty": dirty,
            "rig_diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if dirty else "",
            "rig_subject": _git(repo, "log", "-1", "--format=%s") if commit != "uncommitted" else ""}


def kernel_state(kdir: Path, src: Path) -> dict:
    """What a kernel build directory was built from."""
    cfg = kdir / ".config"
    cfg_text = cfg.read_text() if cfg.exists() else ""
    cc = ""
    for line in cfg_text.splitlines():
        if line.startswith("CONFIG_CC_VERSION_TEXT="):
            cc = line.split("=", 1)[1].strip('"')
    rel = kdir / "include" / "config" / "kernel.release"
    return {"kernel_dir": str(kdir), "kernel_src": str(src),
            "kernel_tree_commit": _git(src, "rev-parse", "HEAD"),
            "kernel_tree_subject": _git(src, "log", "-1", "--format=%s"),
            "kernel_release": rel.read_text().strip() if rel.exists() else "",
            "config_sha256": hashlib.sha256(cfg_text.encode()).hexdigest(),
            "compiler": cc}


def host_state() -> dict:
    return {"host_cpu_model": vocab.host_cpu_model(), "host_cpus": vocab.host_cpus(),
            "host_kernel": Path("/proc/sys/kernel/osrelease").read_text().strip()}


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def iso(ts: float) -> str:
    """A Unix time as now() writes times (UTC, seconds)."""
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat(timespec="seconds")

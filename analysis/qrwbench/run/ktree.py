"""Kernels at arbitrary kernel-tree commits: CELL specs, private clones,
builds, boots (used by `make bench-series` and `make bisect`).

CELL syntax (one boot configuration, like one cell of a matrix)::

    ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS
    x86_64/tcg/max/acqrel/rwlock:impl=kernel,write_pct=0,reps=8,duration_ms=20/1

``k=v`` are the module parameters of bench/module/qrwb_params.def (integers
or names), checked like a matrix's. A commit of a tree without the series
(no ``QRWLOCK_ORDERING_<VARIANT>`` in kernel/Kconfig.locks) is built as the
``unpatched`` variant when VARIANT is ``acqrel`` (the same ordering: 6.12's).

The user's kernel tree is never modified: each work directory holds its own
git repository (``linux/``, objects borrowed from build/src/linux through
git alternates when that exists, the user's commits fetched into
``refs/qrwb-src/``), checked out commit by commit, so git only rewrites the
files that differ and kbuild's incremental rebuild applies.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import gitutil, matrix, vocab
from ..errors import QrwbenchError
from ..vocab import TOP
from ..cell import Cell

DEFAULT_SRC = vocab.BUILD / "src" / "linux"
CELL_SYNTAX = "ARCH/ACCEL/CPU/VARIANT/WORKLOAD[:k=v,...]/VCPUS"
# what a kernel tree must have for the rig to configure and build it
KERNEL_FILES = ("Makefile", "kernel/Kconfig.locks", "scripts/kconfig/merge_config.sh")
_DIGITS = re.compile(r"[0-9]{1,20}")      # ASCII digits only (str.isdigit takes '²')
KERNEL_VARIANT = "kernel"     # comparisons: impl=kernel rows, whatever variant label


# ------------------------------------------------------------------ CELL

def parse_cell(text: str) -> Cell:
    """A Cell from CELL (see the module docstring); QrwbenchError naming
    the bad field and what is valid."""
    if not text:
        raise QrwbenchError(f"CELL is empty: give CELL={CELL_SYNTAX}, e.g. "
                            "x86_64/tcg/max/acqrel/rwlock:impl=kernel,write_pct=0/1")
    parts = text.split("/")
    if len(parts) != 6:
        raise QrwbenchError(f"CELL {text!r} has {len(parts)} '/'-separated fields, "
                            f"need 6: {CELL_SYNTAX}")
    arch_name, accel, cpu, variant, wl, vcpus = parts
    workload, _, ptext = wl.partition(":")
    arch = vocab.check_arch(arch_name)
    vocab.check_accel(accel)
    vocab.check_cpu_model(arch, accel, cpu)
    vocab.check_variant(variant)
    vocab.check_workload(workload)
    nr = matrix.config_nr_cpus()
    if not _DIGITS.fullmatch(vcpus) or not 1 <= int(vcpus) <= nr:
        raise QrwbenchError(f"CELL {text!r}: vCPUs {vcpus!r} is not a count in 1..{nr} (NR_CPUS)")
    params = {}
    last = None
    for kv in filter(None, ptext.split(",")):
        k, eq, v = kv.partition("=")
        if not eq and last == "ops":       # ops=a,b,c: the list continues
            params["ops"] += "," + kv
            continue
        if not eq or not k:
            raise QrwbenchError(f"CELL {text!r}: parameter {kv!r} is not k=v")
        if k in params:
            raise QrwbenchError(f"CELL {text!r}: parameter {k!r} given twice")
        params[k] = int(v) if _DIGITS.fullmatch(v) else v
        last = k
    matrix.check_cell_params("CELL", int(vcpus), params)
    return Cell.boot(arch_name, accel, cpu, variant, workload, int(vcpus), params)


MAX_BOOTS = 1000


def check_numbers(boots: int, threshold_pct: float) -> None:
    """BOOTS and THRESHOLD (percent) of bench-series and bisect."""
    if not 1 <= boots <= MAX_BOOTS:
        raise QrwbenchError(f"BOOTS {boots}: must be an integer in 1..{MAX_BOOTS}")
    if not 0 < threshold_pct < 100:      # also refuses nan
        raise QrwbenchError(f"THRESHOLD {threshold_pct}: must be a percentage in (0, 100)")


def cell_text(c: Cell) -> str:
    p = ",".join(f"{k}={v}" for k, v in sorted(c.params_dict().items()))
    return f"{c.arch}/{c.accel}/{c.cpu}/{c.variant}/{c.workload}{':' + p if p else ''}/{c.vcpus}"


# ------------------------------------------------------------------ git

def git(repo, *args, check=True) -> str:
    return gitutil.git(repo, *args) if check else _git_soft(repo, *args)


def _git_soft(repo, *args) -> str:
    return gitutil.soft(repo, *args)


def check_tree(src: Path) -> Path:
    """The user's kernel git tree, checked: a git repo with a kernel, clean."""
    src = Path(src).resolve()
    if not gitutil.is_repo(src):
        raise QrwbenchError(f"KERNEL_SRC {src} is not a git repository"
                            + ("" if src.exists() else " (it does not exist)"))
    if _git_soft(src, "rev-parse", "--is-bare-repository").strip() != "true":
        _check_clean(src)   # a bare repository has no checkout: nothing can be dirty
    missing = [f for f in KERNEL_FILES if not _git_soft(src, "cat-file", "-t", f"HEAD:{f}").strip()]
    if missing:
        raise QrwbenchError(f"KERNEL_SRC {src} is a git repository but not a Linux kernel tree "
                            f"the rig can build: HEAD has no {', '.join(missing)}")
    return src


def _check_clean(src: Path) -> None:
    dirty = [ln[3:] for ln in git(src, "status", "--porcelain", "--untracked-files=no").splitlines()]
    if dirty:
        raise QrwbenchError(f"kernel tree {src} is dirty ({len(dirty)} changed files: "
                            f"{', '.join(dirty[:5])}{', ...' if len(dirty) > 5 else ''}): "
                            "commit or stash them first")


def resolve(src: Path, ref: str, what: str) -> str:
    try:
        return gitutil.rev_parse(src, ref)
    except QrwbenchError:
        heads = _git_soft(src, "for-each-ref", "--count=8", "--sort=-committerdate",
                          "--format=%(refname:short)", "refs/heads", "refs/tags").split()
        head = _git_soft(src, "rev-parse", "--short=12", "HEAD").strip()
        raise QrwbenchError(f"{what} {ref!r}: unknown commit in {src} (HEAD is {head or 'none'}; "
                            f"branches/tags: {', '.join(heads) or 'none'})") from None


def has_variant(repo: Path, sha: str, variant: str) -> bool:
    text = _git_soft(repo, "show", f"{sha}:kernel/Kconfig.locks")
    return f"config QRWLOCK_ORDERING_{variant.upper()}" in text


def build_variant(repo: Path, sha: str, variant: str) -> str:
    """The variant to build at ``sha``: the cell's, or unpatched for acqrel
    on a tree without the series; QrwbenchError when neither applies."""
    if variant == "unpatched" or has_variant(repo, sha, variant):
        return variant
    if variant == "acqrel":
        return "unpatched"
    raise QrwbenchError(f"commit {sha[:12]} has no QRWLOCK_ORDERING_{variant.upper()} "
                        "(the series is not applied there); use variant acqrel")


# ------------------------------------------------------------------ work dirs

@dataclass
class Workdir:
    """One kernel source checkout plus the build outputs of one commit or of a
    run of commits (``obj`` reused: kbuild rebuilds only what changed)."""
    root: Path
    linux: Path
    obj: Path
    module: Path
    guest: Path
    initrd: Path

    @classmethod
    def single(cls, root: Path) -> "Workdir":
        return cls(root, root / "linux", root / "obj", root / "module", root / "guest",
                   root / "initrd.cpio")


CLONE_MARK = "qrwbench-private-clone"      # in .git/ of every clone sync_clone made


def _own_clone(clone: Path) -> bool:
    """True when ``clone`` is a private repository the rig made: the marker,
    or (made before the marker existed) the rig's fetch namespace refs/qrwb-src."""
    if (clone / ".git" / CLONE_MARK).is_file():
        return True
    return bool(_git_soft(clone, "for-each-ref", "--count=1", "refs/qrwb-src"))


def sync_clone(clone: Path, src: Path, log=print) -> None:
    """Create or update ``clone`` (a private repository) with every ref of
    ``src``. A repository there that the rig did not make is refused: its
    work tree would be overwritten by ``checkout -f``."""
    if not (clone / ".git").is_dir():
        if clone.exists() and any(clone.iterdir()):
            raise QrwbenchError(f"{clone} exists and is not the rig's private checkout: "
                                "remove it or give another --workdir")
        log(f"kernel: creating the private checkout {clone} (once)")
        clone.mkdir(parents=True, exist_ok=True)
        git(clone, "init", "-q", "-b", "qrwb-work")
        (clone / ".git" / CLONE_MARK).write_text("made by qrwbench (ktree.sync_clone)\n")
        git(clone, "config", "gc.auto", "0")
        alt = DEFAULT_SRC / ".git" / "objects"
        if alt.is_dir():
            (clone / ".git" / "objects" / "info" / "alternates").write_text(f"{alt}\n")
    elif not _own_clone(clone):
        raise QrwbenchError(f"{clone} is a git repository the rig did not make: remove it or "
                            "give another --workdir (the rig checks out commits there with -f)")
    git(clone, "fetch", "-q", "--no-tags", "--force", str(src),
        "+refs/heads/*:refs/qrwb-src/heads/*", "+refs/tags/*:refs/qrwb-src/tags/*")


def checkout(clone: Path, sha: str, *, keep_bisect: bool = False) -> None:
    """Check out ``sha`` in the rig's private clone; a bisect left there is
    reset unless ``keep_bisect`` (a step of a running `git bisect run`)."""
    if not _own_clone(clone):
        raise QrwbenchError(f"{clone} is not the rig's private checkout: not checking out there")
    st = "" if keep_bisect else (
        _git_soft(clone, "bisect", "log") if _git_soft(clone, "rev-parse", "--verify", "--quiet", "HEAD") else "")
    if st:   # a bisect interrupted before: its state would confuse git bisect start
        _git_soft(clone, "bisect", "reset", "--quiet")
    # Only in the rig's own clone (checked above), whose work directory's flock
    # the caller holds: an index.lock here was left by a git that was killed
    # (a timed-out checkout), and would fail every later checkout.
    (clone / ".git" / "index.lock").unlink(missing_ok=True)
    gitutil.git(clone, "checkout", "-q", "-f", "--detach", sha, timeout=1800)


def build(wd: Workdir, arch: str, variant: str, log=print) -> None:
    """Kernel (build-kernel.sh, O=wd.obj), module and initramfs of wd.linux's HEAD."""
    env = dict(os.environ, QRWB_SRC=str(wd.linux), QRWB_OUT=str(wd.obj), QRWB_KOUT=str(wd.obj),
               QRWB_MOUT=str(wd.module), QRWB_GDIR=str(wd.guest), QRWB_INITRD=str(wd.initrd),
               CCACHE_BASEDIR=str(TOP))
    for cmd in (["kernel/scripts/build-kernel.sh", arch, variant],
                ["bench/build-module.sh", arch, variant],
                ["guest/mkinitrd.sh", arch, variant]):
        t0 = time.monotonic()
        r = subprocess.run(cmd, cwd=TOP, env=env, capture_output=True, text=True)
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0:
            raise BuildError(f"{cmd[0]} failed at {git(wd.linux, 'rev-parse', '--short=12', 'HEAD').strip()}: "
                             + (out.splitlines() or ["?"])[-1])
        last = out.splitlines()[-1] if out else ""
        log(f"  {last} [{time.monotonic() - t0:.0f} s]")


class BuildError(QrwbenchError):
    pass


# ------------------------------------------------------------------ boots

def built_kernel(wd: Workdir, arch: str) -> tuple[Path, Path, Path, Path]:
    """(image, initrd, build dir, source tree) of wd, for boot.boot_one(kernel=...)."""
    image = wd.obj / vocab.build_arches()[arch].image
    if not (wd.obj / ".qrwbench-built").exists() or not image.exists():
        raise QrwbenchError(f"kernel in {wd.obj} is not built")
    if not wd.initrd.exists():
        raise QrwbenchError(f"initramfs {wd.initrd} is missing")
    return image, wd.initrd, wd.obj, wd.linux


def cell_runs(conn, cell: Cell, sha: str, rig_commit: str | None = None) -> list[str]:
    """Run ids of ok runs of ``cell`` (any variant label for the kernel) at kernel commit sha."""
    out = []
    for r in conn.execute("SELECT run_id, arch, accel, cpu_model, kernel_variant, vcpus, "
                          "workload, cell_params, rig_commit FROM runs "
                          "WHERE status = 'ok' AND kernel_tree_commit = ?", (sha,)):
        c = Cell.of_run(r)
        if c is None or c.replace(variant=cell.variant) != cell:
            continue
        if rig_commit and r["rig_commit"] != rig_commit:
            continue
        out.append(r["run_id"])
    return out


def measure(conn, wd: Workdir, cell: Cell, sha: str, boots: int, *, runs_root: Path,
            timeout_s: int = 180, mem_mb: int = 256, log=print) -> list[str]:
    """Boot ``boots`` guests of ``cell`` on wd's kernel, import them; ok run ids."""
    from ..results import store
    from . import boot, provenance
    rig = provenance.rig_state()
    ok = []
    kernel = built_kernel(wd, cell.arch)
    for i in range(boots):
        nonce = f"{time.time_ns()}-{os.getpid()}-{i}"
        h = hashlib.sha256(json.dumps([cell.key(), sha, rig["rig_commit"], nonce]).encode()).hexdigest()
        rid = f"{h[:12]}-k{sha[:12]}-{cell.arch}-{cell.accel}-{cell.cpu}-{cell.variant}-{cell.workload}-{cell.vcpus}v"
        seed = int(h[12:20], 16) or 1
        st = boot.boot_one(cell, seed, runs_root / rid, timeout_s, mem_mb,
                            {"usable": False, "reason": "not probed (kernel commit runs)", "booted": False},
                            kernel=kernel)
        res = store.import_run(conn, runs_root / rid)
        if st["status"] == "ok" and getattr(res, "status", "ok") == "ok":
            ok.append(rid)
        else:
            log(f"  boot {i + 1}/{boots} FAILED: {st.get('reason') or getattr(res, 'reason', '')}")
    return ok


def normalized(samples):
    """Samples with the impl=kernel variant label replaced by 'kernel', so that
    a commit built as unpatched compares with one built as acqrel."""
    out = []
    for s in samples:
        if s["impl"] == "kernel":
            s = dict(s, variant=KERNEL_VARIANT)
        out.append(s)
    return out


RATIO_IMPL = "kernel/module"
# A ratio sample's ``throughput`` is the ratio times RATIO_SCALE, so that the
# tables that print throughputs in Mops/s (x / 1e6: regress, bench-series)
# print the ratio itself.
RATIO_SCALE = 1e6


def ratio_mode(cell: Cell) -> bool:
    """rwlock cells that measure both the kernel's rwlock and the module's
    copies (impl=all, the default) are judged on their ratio (see ratio_samples)."""
    wl = vocab.workload(cell.workload)
    return bool(wl.kernel_ref) and cell.params_dict().get("impl", "all") == "all"


def ratio_samples(samples) -> list[dict]:
    """One sample per boot (and comparison cell): the kernel's rwlock against
    the module's acqrel copy 0 of the same reps, normalized as every
    comparison across boots is (:func:`qrwbench.analysis.perboot.boot_ratio`:
    the trimmed mean of the blocks' log ratios), stored as ``throughput`` =
    ratio x RATIO_SCALE under impl RATIO_IMPL. The module's copy does not
    change with the kernel commit, so the ratio cancels the boot's and the
    host's speed, which on a shared 2-core TCG host moves absolute numbers by
    30-50 % between and within boots. Boots without the reference are left out."""
    import math

    from ..analysis import perboot
    reps = perboot.group_reps(samples, copy=0)
    first = {}                  # (run, cell) -> the boot's first kernel row
    for s in samples:
        if s["copy"] == 0 and s["impl"] == "kernel":
            first.setdefault((s["run_id"], Cell.of(s)), s)
    out = []
    for (run, cell), s in sorted(first.items(), key=lambda kv: kv[0]):
        ref = perboot.reference_runs(reps, cell) or {}
        v = perboot.boot_ratio(reps[cell][s["variant"]][run], ref[run]) if run in ref else None
        if v is not None:
            out.append(dict(s, impl=RATIO_IMPL, variant=KERNEL_VARIANT, rep=0,
                            throughput=math.exp(v) * RATIO_SCALE))
    return out


REFERENCE_OBJECT = "qrwb_lock_acqrel_c0.o"   # the module's acqrel copy 0: ratio_samples' reference


def reference_digest(module_dir: Path) -> str | None:
    """objdiff digest of the module's reference copy as built in ``module_dir``
    (None when not built there). It is compiled against the kernel's headers:
    a commit that changes the atomics it uses (arm64's atomic_lse.h, ...)
    changes the reference too, and the kernel/module ratio then cancels the
    very change it should show."""
    from ..build import objdiff
    f = Path(module_dir) / REFERENCE_OBJECT
    return objdiff.digest(f) if f.is_file() else None


def raw_samples_of(conn, cell: Cell, run_ids) -> list[dict]:
    """Every row of the runs (kernel rows relabelled as in ``normalized``), not
    ratios: for commits whose reference copies differ."""
    from ..results import store
    return normalized(store.load_samples(conn, run_ids=list(run_ids))) if run_ids else []


def samples_of(conn, cell: Cell, run_ids) -> list[dict]:
    from ..results import store
    if not run_ids:
        return []
    samples = store.load_samples(conn, run_ids=list(run_ids))
    return ratio_samples(samples) if ratio_mode(cell) else normalized(samples)


def existing_cells(conn) -> list[str]:
    """CELL texts of what the store holds runs for (for 'matches nothing' errors)."""
    seen = []
    for r in conn.execute("SELECT DISTINCT arch, accel, cpu_model, kernel_variant, workload, "
                          "cell_params, vcpus FROM runs WHERE status = 'ok'"):
        c = Cell.of_run(r)
        if c is None:           # damaged parameters: no CELL can match the row (cell_runs)
            continue
        t = cell_text(c)
        if t not in seen:
            seen.append(t)
    return seen


def lock(path: Path, what: str):
    """An exclusive lock on ``path`` (kept while the returned file is open)."""
    import fcntl
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise QrwbenchError(f"another {what} is running on {path.parent}: wait for it to finish") from None
    return f

"""The audits ``make bench`` plans with, run when no current one exists.

Before its first boot, ``make bench`` needs to know what each comparison can
show: which variant pairs compile to identical code (the ordering audit,
build/audit/audit.json: objdump of the kernels and modules, no boot) and
which the emulator cannot tell apart (the emulator audit,
build/emulator/emulator.json: short guests under QEMU's translation log, one
per TCG target, vCPU count and workload). The planner then gives those pairs
the first round's boots and no more (planner.py, ``Comparison.settled``).

Each audit's JSON keeps what it was made from (``"inputs"``). The ordering
audit: a hash of every built kernel's stamp (``.qrwbench-built``, itself a
hash of every input of the build) and of every module; it is current while
that hash is. The emulator audit: per arch, the hash of its acqrel kernel's
stamp and module and its QEMU's version, and the targets (arch, CPU model,
vCPUs) it booted; a target's rows are current while its arch's inputs are,
so building another arch's kernels keeps them. What is current is reused
without a boot; the rest is run, with progress lines and its output in its
log.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import types
from pathlib import Path

from .. import vocab
from ..analysis import codeid
from ..build import audit as ordering
from . import boot, emuaudit, qemu

AUDIT = vocab.BUILD / "audit"
EMULATOR = vocab.BUILD / "emulator"


def _file_sha(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    except OSError:
        return "missing"


def kernels_inputs(kernels) -> str:
    """A hash of what the audits read of these kernel build directories."""
    h = hashlib.sha256()
    for d in sorted(kernels):
        arch, variant = d.name.split("-", 1)
        h.update(f"{d.name}:{(d / '.qrwbench-built').read_text().strip()}:"
                 f"{_file_sha(vocab.module_ko(arch, variant))}\n".encode())
    return h.hexdigest()[:16]


def _read(path: Path) -> dict:
    """An audit's JSON with its ``inputs`` ({} when missing or unreadable)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and isinstance(doc.get("inputs"), dict) else {}


def _current(path: Path, inputs: dict) -> dict | None:
    """The JSON at ``path`` when it was made from ``inputs``, else None."""
    doc = _read(path)
    return doc if doc and doc["inputs"] == inputs else None


def ensure_ordering(log=print) -> Path | None:
    """build/audit/audit.json, current for every built kernel (None: none built)."""
    kernels = vocab.built_kernels()
    if not kernels:
        return None
    inputs = {"kernels": kernels_inputs(kernels)}
    path = AUDIT / "audit.json"
    if _current(path, inputs):
        log(f"bench: ordering audit current ({path})")
        return path
    log(f"bench: ordering audit of {len(kernels)} kernels and their modules "
        f"(no boot; output in {AUDIT / 'audit.txt'})")
    with open(vocab.BUILD / "audit.log", "w") as f, contextlib.redirect_stdout(f), \
            contextlib.redirect_stderr(f):
        rc = ordering.run(types.SimpleNamespace(out=str(AUDIT), kernels=[], no_modules=False),
                          inputs=inputs)
    if rc != 0:
        log(f"bench: ordering audit failed (log: {vocab.BUILD / 'audit.log'}); comparisons "
            "are not labeled identical code")
        return None
    return path


def arch_inputs(arch: str) -> dict | None:
    """What an arch's emulator-audit rows are made from: its acqrel kernel's
    build stamp and module, and its QEMU's version (None: not built)."""
    d = vocab.kernel_dir(arch, "acqrel")
    if not ((d / ".qrwbench-built").exists() and vocab.module_ko(arch, "acqrel").exists()):
        return None
    return {"kernel": kernels_inputs([d]), "qemu": qemu.qemu_version(qemu.qemu_binary(arch))}


def ensure_emulator(targets: set, log=print) -> Path | None:
    """build/emulator/emulator.json covering ``targets`` ({(arch, cpu, vcpus)}
    of the matrix's TCG cells). Each target's rows are current while its
    arch's inputs (arch_inputs: kernel, module, QEMU) are those they were made
    from: current ones are kept without a boot, the others booted (None:
    nothing to audit)."""
    if not targets:
        return None
    for a in sorted({a for a, _, _ in targets}):
        boot.kernel_paths(a, "acqrel")
    path = EMULATOR / "emulator.json"
    doc = _read(path)
    now = {a: arch_inputs(a) for a in sorted({t[0] for t in doc.get("targets", [])}
                                             | {a for a, _, _ in targets})}
    covered = {tuple(t) for t in doc.get("targets", [])
               if now.get(t[0]) is not None and doc["inputs"].get(t[0]) == now[t[0]]}
    if targets <= covered:
        log(f"bench: emulator audit current ({path})")
        return path
    new = targets - covered
    vcpus = tuple(sorted({v for _, _, v in new}))
    cpus = {(a, c) for a, c, _ in new}
    booted = {(a, c, v) for a, c in cpus for v in vcpus}
    kept = covered - booted
    ok = lambda r: (r["arch"], r["cpu_model"], r["vcpus"]) in kept
    keep = {k: [r for r in doc.get(k, []) if ok(r)] for k in ("labels", "barriers")}
    log(f"bench: emulator audit: {len(cpus) * len(vcpus) * len(emuaudit.WORKLOADS)} short boots "
        f"under QEMU's translation log ({', '.join(f'{a}/{c}' for a, c in sorted(cpus))}; "
        f"{', '.join(map(str, vcpus))} vCPUs; output in {EMULATOR})"
        + (f"; {len(kept)} targets kept" if kept else ""))
    every = kept | booted
    emuaudit.write(EMULATOR, vcpus, cpus, keep=keep,
                   inputs={a: now[a] for a in sorted({t[0] for t in every})},
                   targets=sorted(every), log=log)
    return path


def ensure(cells, log=print) -> codeid.Audit | None:
    """Both audits current for ``cells`` (the matrix's boot cells); the
    labels the planner and the summary use (None without an ordering audit)."""
    ordering_path = ensure_ordering(log)
    emulator_path = ensure_emulator({(c.arch, c.cpu, c.vcpus) for c in cells
                                     if c.accel == "tcg"}, log)
    return codeid.find_audit(ordering_path, emulator_path) if ordering_path else None

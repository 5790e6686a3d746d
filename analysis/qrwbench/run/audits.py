"""The audits ``make bench`` plans with, run when no current one exists.

Before its first boot, ``make bench`` needs to know what each comparison can
show: which variant pairs compile to identical code (the ordering audit,
build/audit/audit.json: objdump of the kernels and modules, no boot) and
which the emulator cannot tell apart (the emulator audit,
build/emulator/emulator.json: short guests under QEMU's translation log, one
per TCG target, vCPU count and workload). The planner then gives those pairs
the first round's boots and no more (planner.py, ``Comparison.settled``).

Each audit's JSON keeps what it was made from (``"inputs"``): a hash of
every built kernel's stamp (``.qrwbench-built``, itself a hash of every input
of the build) and of every module, and for the emulator audit QEMU's version
and the targets and vCPU counts it booted. A current audit (same inputs,
covering what the matrix boots) is reused without a boot; otherwise it is run
again, with progress lines and its output in its log.
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


def _current(path: Path, inputs: dict) -> dict | None:
    """The JSON at ``path`` when it was made from ``inputs``, else None."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("inputs") == inputs else None


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


def _acqrel_built(arch: str) -> bool:
    d = vocab.kernel_dir(arch, "acqrel")
    return (d / ".qrwbench-built").exists() and vocab.module_ko(arch, "acqrel").exists()


def ensure_emulator(targets: set, log=print) -> Path | None:
    """build/emulator/emulator.json covering ``targets`` ({(arch, cpu, vcpus)}
    of the matrix's TCG cells), current for the acqrel kernels and modules of
    every arch that has them and their QEMU; run when not, for these targets
    and those a current audit already covered (None: nothing to audit)."""
    if not targets:
        return None
    for a in sorted({a for a, _, _ in targets}):
        boot.kernel_paths(a, "acqrel")
    archs = [a for a in sorted(vocab.ARCHES) if _acqrel_built(a)]
    inputs = {"kernels": kernels_inputs([vocab.kernel_dir(a, "acqrel") for a in archs]),
              "qemu": {a: qemu.qemu_version(qemu.qemu_binary(a)) for a in archs}}
    path = EMULATOR / "emulator.json"
    doc = _current(path, inputs)
    covered = {tuple(t) for t in (doc or {}).get("targets", [])}
    if doc and targets <= covered:
        log(f"bench: emulator audit current ({path})")
        return path
    want = targets | covered
    vcpus = tuple(sorted({v for _, _, v in want}))
    cpus = {(a, c) for a, c, _ in want}
    boots = len(cpus) * len(vcpus) * len(emuaudit.WORKLOADS)
    log(f"bench: emulator audit: {boots} short boots under QEMU's "
        f"translation log ({', '.join(f'{a}/{c}' for a, c in sorted(cpus))}; "
        f"{', '.join(map(str, vcpus))} vCPUs; output in {EMULATOR})")
    emuaudit.write(EMULATOR, vcpus, cpus, inputs=inputs,
                   targets=sorted((a, c, v) for a, c in cpus for v in vcpus), log=log)
    return path


def ensure(cells, log=print) -> codeid.Audit | None:
    """Both audits current for ``cells`` (the matrix's boot cells); the
    labels the planner and the summary use (None without an ordering audit)."""
    ordering_path = ensure_ordering(log)
    emulator_path = ensure_emulator({(c.arch, c.cpu, c.vcpus) for c in cells
                                     if c.accel == "tcg"}, log)
    return codeid.find_audit(ordering_path, emulator_path) if ordering_path else None

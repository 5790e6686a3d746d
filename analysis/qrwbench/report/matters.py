"""Does it matter? Each program workload's kernel-build verdict (docs/programs.md)
beside the loop-level verdicts of the same kernels: the kernel-build
comparisons of the workloads with an in-boot reference that are not programs
(rwlock's rwlock_t rows), on the same arch, accelerator, CPU model and vCPUs,
variant against the same baseline."""
from __future__ import annotations

from .. import vocab
from ..analysis import compare
from . import labels, tables

TITLE = "Does it matter? Programs against the loop-level kernel builds"


def _kernel_builds(cset: compare.ComparisonSet) -> list[compare.Comparison]:
    return [c for c in cset.comparisons if c.level == "kernel" and c.cell.impl == "kernel"]


def _where(c: compare.Comparison) -> tuple:
    return (c.cell.arch, c.cell.accel, c.cell.cpu, c.cell.vcpus, c.cell.host, c.variant,
            c.baseline)


def _params(c: compare.Comparison, keys=None) -> str:
    """Its own parameters (or ``keys``) as k=v."""
    p = c.cell.params_dict()
    keys = vocab.workload(c.cell.workload).own_params if keys is None else keys
    return ",".join(f"{k}={v}" for k, v in sorted(p.items()) if k in keys)


def _verdict(c: compare.Comparison) -> str:
    """The verdict, after its label where the audits settle it (as the console's table)."""
    lab = labels.IDENTICAL if c.identical_code else labels.BLIND if c.emulator_blind else ""
    return f"{lab}; {c.verdict}" if lab else c.verdict


def _loop_text(same: list) -> str:
    """The loop cells' verdicts, each named by the parameters that tell them apart."""
    if not same:
        return "not measured"
    vals = [x.cell.params_dict() for x in same]
    keys = {k for v in vals for k in v if len({str(w.get(k)) for w in vals}) > 1}
    return "; ".join(f"{x.cell.workload}({_params(x, keys)}): {_verdict(x)}"
                     for x in sorted(same, key=lambda x: sorted(
                         (k, str(v)) for k, v in x.cell.params_dict().items())))


def table(cset: compare.ComparisonSet) -> tables.Table:
    """One row per program comparison of kernel builds: where, the variant
    against its baseline, the program's verdict, and the loop-level verdicts
    of the same kernels (one per loop cell, with its parameters)."""
    kb = _kernel_builds(cset)
    loops: dict = {}
    for c in kb:
        wl = vocab.workload(c.cell.workload)
        if not wl.program and wl.kernel_ref:
            loops.setdefault(_where(c), []).append(c)
    rows = []
    for c in sorted((c for c in kb if vocab.workload(c.cell.workload).program),
                    key=lambda c: (_where(c), c.cell.workload)):
        loop = _loop_text(loops.get(_where(c), []))
        rows.append([f"{c.cell.arch}/{c.cell.accel}/{c.cell.cpu} {c.cell.vcpus} vCPU",
                     f"{c.variant} vs {c.baseline}",
                     f"{c.cell.workload}" + (f" ({_params(c)})" if _params(c) else ""),
                     _verdict(c), loop])
    return tables.Table(["target", "kernel", "program", "program verdict",
                         "loop-level verdicts (kernel rwlock_t)"], rows, TITLE)

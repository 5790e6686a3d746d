"""Does it matter? Each program workload's kernel-build verdict (docs/programs.md)
beside the loop-level verdicts of the same kernels: the kernel-build
comparisons of the workloads with an in-boot reference that are not programs
(rwlock's rwlock_t rows), on the same arch, accelerator, CPU model and vCPUs,
variant against the same baseline."""
from __future__ import annotations

from .. import vocab
from ..analysis import compare
from . import tables

TITLE = "Does it matter? Programs against the loop-level kernel builds"


def _kernel_builds(cset: compare.ComparisonSet) -> list[compare.Comparison]:
    return [c for c in cset.comparisons if c.level == "kernel" and c.cell.impl == "kernel"]


def _where(c: compare.Comparison) -> tuple:
    return (c.cell.arch, c.cell.accel, c.cell.cpu, c.cell.vcpus, c.cell.host, c.variant,
            c.baseline)


def _params(c: compare.Comparison) -> str:
    p = c.cell.params_dict()
    own = vocab.workload(c.cell.workload).own_params
    return ",".join(f"{k}={v}" for k, v in sorted(p.items()) if k in own)


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
        same = loops.get(_where(c), [])
        loop = "; ".join(f"{x.cell.workload}({_params(x)}): {x.verdict}"
                         for x in sorted(same, key=_params)) or "not measured"
        rows.append([f"{c.cell.arch}/{c.cell.accel}/{c.cell.cpu} {c.cell.vcpus} vCPU",
                     f"{c.variant} vs {c.baseline}",
                     f"{c.cell.workload}" + (f" ({_params(c)})" if _params(c) else ""),
                     c.verdict, loop])
    return tables.Table(["target", "kernel", "program", "program verdict",
                         "loop-level verdicts (kernel rwlock_t)"], rows, TITLE)

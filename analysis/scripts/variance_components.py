"""Usage: /usr/bin/python3 analysis/scripts/variance_components.py DB [COMMIT]

Where the noise of the kernel-build comparisons comes from: for every
rwlock cell's kernel rows (normalized: the block log ratio of the kernel's
rwlock to the module's acqrel copy in the same block), the within-boot
variance of one block, the between-boot variance of a boot's mean (the boot
means' variance less what the within noise explains, method of moments),
and what they imply: the variance of one boot's normalized value with k
blocks is between + within/k, so more blocks per boot help only while
within/k dominates. Prints the medians over cells, and the SD of one boot's
value for 4-32 blocks per boot: once the between-boot part dominates, more
short boots beat fewer long ones."""
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import scriptdb  # noqa: E402
from qrwbench.analysis import effects, perboot  # noqa: E402
from qrwbench.report import selection  # noqa: E402


def components(samples):
    reps = perboot.group_reps(samples, copy=0)
    out = []
    for cell, variants in reps.items():
        if cell.impl != "kernel":
            continue
        ref = reps.get(cell.replace(impl="module"), {}).get("acqrel")
        if not ref:
            continue
        for variant, runs in variants.items():
            groups = effects.block_log_ratios(runs, ref)
            parts = effects.variance_components(groups)
            if parts is None:
                continue
            out.append({"cell": cell, "variant": variant, "boots": len(groups),
                        "blocks": float(np.mean([len(g) for g in groups])),
                        "within": parts[0], "between": parts[1]})
    return out


def main(db="", commit="latest"):
    conn = scriptdb.connect(db)
    sel = selection.select(conn, commit)
    cut = __import__('os').environ.get('CUT')
    if cut:
        keep = {r['run_id'] for r in sel.runs if (r['started_at'] or '') >= cut}
        sel = selection.Selection('runs since ' + cut, None, [s for s in sel.samples if s['run_id'] in keep], [r for r in sel.runs if r['run_id'] in keep])
    rows = components(sel.samples)
    if not rows:
        print("no kernel rows with the module reference and >= 2 boots")
        return
    w = statistics.median(r["within"] for r in rows)
    b = statistics.median(r["between"] for r in rows)
    k = statistics.median(r["blocks"] for r in rows)
    print(f"{len(rows)} kernel rows ({sel.label}); blocks per boot {k:g}")
    print(f"within-boot SD of one block's log ratio: {np.sqrt(w) * 100:.2f} %")
    print(f"between-boot SD of a boot's mean:        {np.sqrt(b) * 100:.2f} %")
    print(f"SD of one boot's normalized value with {k:g} blocks: "
          f"{np.sqrt(b + w / k) * 100:.2f} % (between {b / (b + w / k):.0%} of its variance)")
    for blocks in (4, 8, 16, 32):
        print(f"  {blocks:2d} blocks per boot: SD {np.sqrt(b + w / blocks) * 100:.2f} %")


if __name__ == "__main__":
    main(*sys.argv[1:])

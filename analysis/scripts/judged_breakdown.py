"""Usage: /usr/bin/python3 analysis/scripts/judged_breakdown.py DB

Where a run's comparisons were judged and where not (issue 15: >= 90 %
judged): per arch, CPU model, vCPUs, workload, impl and level the count of
each verdict kind and the median CI half-width; the inconclusive atomics
comparisons per placement; and, for 2-vCPU atomics, the within-boot CV and
the SD of one block's log ratio relaxed/full per placement (how much the
pairing of adjacent windows cancels)."""
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.analysis import effects, noise, perboot  # noqa: E402
from qrwbench.report import analyse  # noqa: E402
from qrwbench.results import store  # noqa: E402
import scriptdb  # noqa: E402


def main(argv):
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    conn = scriptdb.connect(argv[0] if argv else "")
    a = analyse.analyse(conn, n_resamples=200)
    kinds, widths, place = defaultdict(Counter), defaultdict(list), defaultdict(Counter)
    for c in a.cset.comparisons:
        k = (c.cell.arch, c.cell.cpu, f"{c.cell.vcpus}v", c.cell.workload,
             c.cell.impl if c.cell.workload == "rwlock" else "", c.level)
        kinds[k][c.kind] += 1
        if c.effect is not None and c.effect.judged:
            widths[k].append(c.effect.half_width_pct)
        if c.cell.workload == "atomics":
            place[(c.cell.arch, c.cell.cpu, c.cell.vcpus, c.cell.placement)].update(
                ["all"] + (["inconclusive"] if c.kind == "inconclusive" else []))
    print(f"{'group':52s} {'n':>5s} {'slower':>6s} {'faster':>6s} {'equiv':>6s} {'inconcl':>7s} {'median CI':>9s}")
    for k in sorted(kinds):
        n = sum(kinds[k].values())
        hw = f"{np.median(widths[k]):.1f} %" if widths[k] else "-"
        print(f"{' '.join(k):52s} {n:5d} {kinds[k]['slower']:6d} {kinds[k]['faster']:6d} "
              f"{kinds[k]['equivalent']:6d} {kinds[k]['inconclusive']:7d} {hw:>9s}")
    print("\natomics inconclusive by placement:")
    for k in sorted(place):
        print(f"  {k[0]}/{k[1]} {k[2]}v {k[3]}: {place[k]['inconclusive']} of {place[k]['all']}")
    samples = store.load_samples(conn)
    cv, sd = defaultdict(list), defaultdict(list)

    def two_vcpu_atomics(cell):
        return (cell.workload == "atomics" and cell.vcpus == 2
                and not cell.params_dict().get("aa_inject_mb"))
    for row in noise.within_boot_cv(samples):
        if row["copy"] == 0 and two_vcpu_atomics(row["cell"]):
            c = row["cell"]
            cv[(c.arch, c.cpu, c.placement)].append(row["within_cv"])
    for cell, var in perboot.group_reps(samples, copy=0).items():
        if two_vcpu_atomics(cell) and "full" in var and "relaxed" in var:
            sd[(cell.arch, cell.cpu, cell.placement)] += [
                np.std(g, ddof=1) for g in effects.block_log_ratios(var["relaxed"], var["full"])
                if len(g) > 3]
    print("\n2-vCPU atomics: within-boot CV (noise.within_boot_cv) and SD of one block's "
          "log ratio relaxed/full (medians):")
    for k in sorted(cv):
        print(f"  {k[0]}/{k[1]} {k[2]}: CV {100 * np.nanmedian(cv[k]):.1f} %, "
              f"block ratio SD {100 * np.median(sd[k]) if sd[k] else float('nan'):.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Usage: /usr/bin/python3 analysis/scripts/inboot_components.py DB [RIG_COMMIT]

Where the width of the in-boot comparisons of `make bench` comes from, per
family (arch, CPU model, workload, vCPUs, placement, parameters but ops):
for each in-boot comparison, the SD of one paired block's log ratio
(within a boot) and the SD of a boot's mean ratio beyond what that
explains (between boots, effects.variance_components), with the
verdicts, boots, blocks per boot and the CI half-width; medians per family. Where the between-boot part is ~0,
the CI shrinks with blocks, and blocks per boot (reps) are cheaper than
boots."""
import collections
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.results import store  # noqa: E402
import scriptdb  # noqa: E402
from qrwbench.analysis import compare, effects, perboot  # noqa: E402


def main(argv):
    if not argv or len(argv) > 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    conn = scriptdb.connect(argv[0] if argv else "")
    samples = store.load_samples(conn, rig_commit=argv[1] if len(argv) > 1 else None)
    cset = compare.compare_cells(samples, n_resamples=100, seed=1)
    reps = perboot.group_reps(samples, copy=0)
    fams = collections.defaultdict(list)
    for c in cset.comparisons:
        if c.level != "in-boot":
            continue
        g = effects.block_log_ratios(reps[c.cell][c.variant], reps[c.cell][c.baseline])
        parts = effects.variance_components(g)
        if parts is None:
            continue
        fams[(c.cell.arch, c.cell.cpu, c.cell.workload, c.cell.vcpus,
              c.cell.placement, c.cell.params_text(drop=("ops",)))].append(
            (c.kind, len(g), np.mean([len(x) for x in g]), np.sqrt(parts[0]) * 100,
             np.sqrt(parts[1]) * 100, c.effect.half_width_pct))
    print("arch cpu workload vCPUs placement params: verdicts; medians: boots, blocks/boot, block SD, "
          "between-boot SD, CI half-width")
    for fam in sorted(fams):
        v = fams[fam]
        kinds = dict(collections.Counter(x[0] for x in v))
        med = np.median(np.array([x[1:] for x in v], dtype=float), axis=0)
        print(f"{' '.join(map(str, fam))}: {kinds}; {med[0]:.0f} boots, {med[1]:.0f} blocks, "
              f"{med[2]:.1f} %, {med[3]:.2f} %, +-{med[4]:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

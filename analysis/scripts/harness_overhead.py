"""Usage: /usr/bin/python3 analysis/scripts/harness_overhead.py DB [OP]

What the timed loop itself costs against an op (default atomic_add_return,
fully ordered), per target, vCPU count and placement: the `empty` op's
ns/op (the loop with nothing in it) over the op's, from the same blocks
(each rep of each boot measures both), as a ratio with its 95 % interval
(effects.paired on the block log ratios), and the op's ns/op raw and less
the harness."""
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench import effects, stats, store  # noqa: E402


def main(argv):
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    op = argv[1] if len(argv) > 1 else "atomic_add_return"
    samples = store.load_samples(store.connect(argv[0]))
    reps = stats.group_reps(samples, copy=0)
    by = defaultdict(dict)
    for cell, variants in reps.items():
        if cell.workload == "atomics" and cell.op in ("empty", op):
            key = (cell.arch, cell.cpu_model, cell.vcpus, cell.placement, cell.host)
            by[key][cell.op] = variants["relaxed" if cell.op == "empty" else "full"]
    print(f"target vCPUs placement: empty/{op} [95 % CI]; {op} ns/op raw, less the harness")
    for key, d in sorted(by.items()):
        if "empty" not in d or op not in d:
            continue
        # ns(empty) / ns(op) = throughput(op) / throughput(empty), block by block
        e = effects.paired(effects.block_log_ratios(d[op], d["empty"]))
        threads = key[2]
        ns_op = np.median([threads / x * 1e9 for r in d[op].values() for x in r.values()])
        ns_empty = np.median([threads / x * 1e9 for r in d["empty"].values() for x in r.values()])
        print(f"{key[0]}/{key[1]} {key[2]}v {key[3]}{' @' + key[4] if key[4] else ''}: "
              f"{e.ratio * 100:.1f} % [{np.exp(e.low) * 100:.1f}, {np.exp(e.high) * 100:.1f}]; "
              f"{ns_op:.2f} ns, {ns_op - ns_empty:.2f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

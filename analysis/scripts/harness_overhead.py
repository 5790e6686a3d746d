"""Usage: /usr/bin/python3 analysis/scripts/harness_overhead.py DB [OP]

What the timed loop itself costs against an op (default atomic_add_return,
fully ordered), per atomics cell: the `empty` op's ns/op (the loop with
nothing in it) over the op's, from the same blocks, with its 95 % interval,
and the op's ns/op raw and less the harness (qrwbench.analysis.harness, the same
figures as the report's table)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.results import store  # noqa: E402
import scriptdb  # noqa: E402
from qrwbench.analysis import harness  # noqa: E402


def main(argv):
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    op = argv[1] if len(argv) > 1 else "atomic_add_return"
    samples = store.load_samples(scriptdb.connect(argv[0] if argv else ""))
    print(f"cell: empty/{op} [95 % CI]; {op} ns/op raw [95 % CI], less the harness")
    for c in harness.op_costs(samples):
        if c.cell.op != op or c.variant != "full" or not (c.share and c.share.judged):
            continue
        lo, hi = c.share_ci
        nlo, nhi = c.ns_ci
        print(f"{c.cell.label()}: {100 * c.harness_share:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]; "
              f"{c.ns_per_op:.2f} ns [{nlo:.2f}, {nhi:.2f}], {c.less_harness:.2f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

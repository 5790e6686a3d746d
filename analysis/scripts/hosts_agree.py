"""Usage: /usr/bin/python3 analysis/scripts/hosts_agree.py ONE_HOST_DB SEVERAL_HOSTS_DB

Whether a run of a matrix on several hosts (make bench HOSTS=...) agrees with
a run of the same matrix on one host: for every comparison (orderings, copy
A/A, injected barrier) judged in both, whether the difference of the
estimates lies within its 95 % interval, 1.96 * sqrt(se1^2 + se2^2), and
whether the two intervals overlap. Each host of the second run is compared
with the first run on its own (the host is a blocking factor)."""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.results import store  # noqa: E402
import scriptdb  # noqa: E402
from qrwbench.analysis import calibration, compare  # noqa: E402


def effects_of(db: str) -> dict:
    samples = store.load_samples(scriptdb.connect(db))
    out = {}
    for c in compare.compare_cells(samples, n_resamples=50).comparisons:
        if c.effect.judged:
            out[(c.cell.replace(host=""), c.variant, c.cell.host)] = c.effect
    for r in calibration.aa_control(samples).results:
        if r.effect.judged:
            out[(r.cell.replace(host=""), f"{r.variant} copy 1/0 ({r.kind})", r.cell.host)] = r.effect
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    one, several = effects_of(argv[0]), effects_of(argv[1])
    rows = []
    for (cell, what, host), e2 in several.items():
        e1 = one.get((cell, what, ""))
        if e1 is None:
            continue
        lim = 1.96 * math.hypot(e1.se, e2.se)
        d = abs(e2.estimate - e1.estimate)
        rows.append((d / lim if lim else 0.0, d <= lim, e1.low <= e2.high and e2.low <= e1.high,
                     f"{cell.label()} {what} @{host}: {math.exp(e1.estimate):.3f} against "
                     f"{math.exp(e2.estimate):.3f}"))
    print(f"{len(rows)} comparisons: difference within its 95 % CI in "
          f"{sum(r[1] for r in rows)}, intervals overlap in {sum(r[2] for r in rows)}")
    for r in sorted(rows, reverse=True)[:5]:
        print(f"  {r[0]:.2f} x the CI: {r[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

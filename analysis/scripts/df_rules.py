"""Usage: /usr/bin/python3 analysis/scripts/df_rules.py DB [RIG_COMMIT]

The summary and calibration lines of a run (the latest rig commit in DB,
or RIG_COMMIT) under each rule for the degrees of freedom of in-boot
(paired-block) intervals (issue 26): ``code`` (effects.paired_df: boots - 1
when the boot locations scatter more than their blocks explain, else the
blocks') and ``boots`` (always boots - 1: the modified Knapp-Hartung
interval). Also the A/A
false positives by boots of the cell, where the rules differ most. Labels
come from the audits in build/ (as `make bench`'s)."""
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.analysis import calibration, codeid, effects  # noqa: E402
from qrwbench.report import analyse  # noqa: E402
from qrwbench.results import store  # noqa: E402
import scriptdb  # noqa: E402


RULES = {"code": effects.paired_df, "boots": lambda est: max(len(est) - 1, 1)}


def main(argv):
    if len(argv) not in (1, 2):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    conn = scriptdb.connect(argv[0])
    sel = analyse.select(conn, argv[1] if len(argv) > 1 else "latest", ".")
    audit = codeid.find_audit()
    ended = store.load_plan(conn, sel.rig_commit)
    for name, rule in RULES.items():
        effects.paired_df = rule
        cset, aa = analyse.judge(sel.samples, sel.runs, audit, ended)
        by_boots = Counter()
        for r in aa.results:
            if r.kind != "inject" and r.test.judged:
                by_boots[(r.effect.n_boots[0], "n")] += 1
                by_boots[(r.effect.n_boots[0], "sig")] += r.significant
        print(f"[{name}] {cset.summary_line()}")
        print(f"[{name}] {calibration.calibration_line(aa)}")
        print(f"[{name}] A/A by boots: " + ", ".join(
            f"{k}: {by_boots[(k, 'sig')]}/{by_boots[(k, 'n')]}"
            for k in sorted({k for k, _ in by_boots})))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`make torture`: hunt for rwlock exclusion violations.

Boots every cell of bench/matrix/torture.toml with the module's exclusion
checker on (a writer checks it is alone, readers check no writer overlaps)
and sums the violations per arch, CPU model, kernel variant and lock
implementation. Violations of the `full` or `acqrel` orderings are bugs: the
exit status is 1. Then one guest per target runs the weak-memory canaries
(``litmus``): a forbidden outcome seen is a bug too (exit status 1), and where
no message-passing canary fired, the `relaxed` rows say the backend cannot
show the reordering they are about. The `relaxed` ordering is not a lock on weakly ordered CPUs;
its violations are reported, not required to be 0.

    /usr/bin/python3 -m qrwbench torture [--minutes N] [--matrix F] [--out build/torture] [--plan]
"""
from __future__ import annotations

import signal
from collections import defaultdict
from pathlib import Path

from .. import matrix, outputs
from ..vocab import TOP, InputError
from ..cell import Cell, canonical_json
from ..results import records
from ..report import litmus
from . import bench, boot

MEASUREMENTS_PER_REP = 5     # kernel rwlock_t + module full, acqrel c0, acqrel c1, relaxed


def run_canaries(cells: list[Cell], out: Path, *, timeout_s: int, mem_mb: int, seed: int,
                 log=print) -> tuple[dict[str, list[dict]], list[str]]:
    """Boot each canary cell into out/<n>-litmus-<target>/; ({target label:
    litmus records}, failed run lines)."""
    got, failed = {}, []
    verdict_kvm = {"usable": False, "reason": "canaries use the cell's accel", "booted": False}
    for i, c in enumerate(cells, 1):
        d = out / f"{i:03d}-litmus-{c.arch}-{c.cpu}"
        log(f"[canary {i}/{len(cells)}] {litmus.target_label(c)} (console: {d / 'console.log'})")
        st = boot.boot_one(c, seed, d, timeout_s, mem_mb, verdict_kvm)
        parsed = records.parse_console((d / "console.log").read_bytes()) \
            if (d / "console.log").exists() else None
        if st["status"] != "ok" or parsed is None or not parsed.ok:
            why = st.get("reason") if st["status"] != "ok" else (parsed.reason if parsed else "no console")
            failed.append(f"{d.name}: {why}")
            log(f"  FAILED: {why}")
            continue
        got[litmus.target_label(c)] = parsed.litmus
    return got, failed


def scaled(m: matrix.Matrix, cells: list[Cell], minutes: float) -> list[Cell]:
    """Set duration_ms so that all boots together run about `minutes`."""
    out = []
    for c in cells:
        p = c.params_dict()
        per_boot_ms = minutes * 60_000 / max(1, len(cells) * m.boots)
        p["duration_ms"] = max(1, min(60000, int(per_boot_ms / (p.get("reps", 5) * MEASUREMENTS_PER_REP))))
        out.append(c.replace(params=canonical_json(p)))
    return out


def tally(parsed_runs) -> dict:
    """{(arch, cpu, kernel variant, impl, lock variant): [violations, ops]}."""
    t = defaultdict(lambda: [0, 0])
    for cell, p in parsed_runs:
        for r in p.results:
            if r.get("violations", -1) < 0:
                continue
            k = (cell.arch, cell.cpu, cell.variant, r["impl"], r["variant"])
            t[k][0] += r["violations"]
            t[k][1] += r["ops"]
    return dict(t)


def must_hold(kernel_variant: str, impl: str, lock_variant: str) -> bool:
    """Whether exclusion must hold: every ordering but relaxed is a real lock."""
    return (lock_variant if impl == "module" else kernel_variant) != "relaxed"


def format_report(t: dict, failed: list[str], blind: dict | None = None) -> tuple[str, bool]:
    """``blind[(arch, cpu)]``: that backend's message-passing canaries never
    fired (litmus.blind_to_mp), so relaxed rows with no violation prove nothing."""
    lines = ["| arch | cpu | kernel | impl | lock ordering | acquisitions | violations | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    bad = False
    blind = blind or {}
    for (arch, cpu, kv, impl, lv), (viol, ops) in sorted(t.items()):
        hold = must_hold(kv, impl, lv)
        none = ("none observed: this backend cannot show reordering (its message-passing "
                "canaries never fired)" if blind.get((arch, cpu)) else "none observed")
        verdict = ("OK" if viol == 0 else "VIOLATED: BUG") if hold else \
            (none if viol == 0 else "violations observed (expected: relaxed is not a lock)")
        bad |= hold and viol > 0
        lines.append(f"| {arch} | {cpu} | {kv} | {impl} | {lv} | {ops} | {viol} | {verdict} |")
    for f in failed:
        lines.append(f"\nfailed run: {f}")
    return "\n".join(lines), bad


def torture(m, cells, out: Path, minutes: float):
    """Boot every cell into out/runs/, write out/report.md; (text, bad, failed)."""
    parsed, failed = [], []
    verdict = {"usable": False, "reason": "torture uses TCG", "booted": False}
    for i, b in enumerate(matrix.boots(m, cells), 1):
        d = out / "runs" / f"{i:03d}-{b.cell.arch}-{b.cell.cpu}-{b.cell.variant}"
        print(f"[{i}/{len(cells) * m.boots}] {b.cell.label()} (console: {d / 'console.log'})", flush=True)
        st = boot.boot_one(b.cell, b.seed, d, m.timeout_s, m.mem_mb, verdict)
        if st["status"] != "ok":
            failed.append(f"{d.name}: {st['reason']}")
            print(f"  FAILED: {st['reason']}")
            continue
        parsed.append((b.cell, records.parse_console((d / "console.log").read_bytes())))
    canaries, cfailed = run_canaries(litmus.canary_targets(cells), out / "runs",
                                      timeout_s=m.timeout_s, mem_mb=m.mem_mb, seed=m.seed)
    failed += cfailed
    blind = {}
    for c in cells:
        recs = canaries.get(litmus.target_label(c), [])
        blind[(c.arch, c.cpu)] = litmus.blind_to_mp(recs)
    text, bad = format_report(tally(parsed), failed, blind)
    litmus.save(canaries, out / "canaries.json")       # for the report
    ctext, cbad = litmus.table([(label, r) for label, recs in canaries.items() for r in recs])
    text = f"{text}\n\nWeak-memory canaries (bench/module/qrwb_litmus.def, 2 vCPUs):\n\n{ctext}"
    (out / "report.md").write_text(f"# qrwbench torture ({minutes} min)\n\n{text}\n")
    return text, bad or cbad, failed


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench torture`` (the parser is cli's)."""
    ap.add_argument("--minutes", type=float, default=3.0, help="total guest time (default 3)")
    ap.add_argument("--matrix", default=str(TOP / "bench" / "matrix" / "torture.toml"))
    outputs.add_out_option(ap, "torture")
    ap.add_argument("--plan", action="store_true",
                    help="only check the input and print the kernels the matrix needs "
                         "(ARCH-VARIANT ...); nothing is booted")


def run(args) -> int:
    """``python3 -m qrwbench torture``: bad input raises InputError (cli.main
    prints it); a signal kills QEMU and exits 128 + its number (bench.on_signal)."""
    signal.signal(signal.SIGINT, bench.on_signal)
    signal.signal(signal.SIGTERM, bench.on_signal)
    if not 0 < args.minutes < 24 * 60:
        raise InputError(f"--minutes {args.minutes}: must be a number of minutes in (0, 1440)")
    m = matrix.load(args.matrix)
    cells = scaled(m, matrix.cells(m), args.minutes)
    if args.plan:
        print(" ".join(bench.kernels_needed(m)))
        return 0
    for c in cells:
        boot.kernel_paths(c.arch, c.variant)
    out = outputs.check(args.out, "torture")      # before any boot
    with outputs.replacing(out, "torture") as tmp:
        text, bad, failed = torture(m, cells, tmp, args.minutes)
    print(text)
    print(f"torture: report in {out / 'report.md'}")
    return 1 if bad or failed else 0

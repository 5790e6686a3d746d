"""The rig's one command line: ``python3 -m qrwbench <subcommand> ...``.

    import report compare regress      results analysis (here)
    bench audit emuaudit archaudit noise torture perf series bisect kvm-nested
                                       their module's add_arguments and run

All argument parsing lives here: every subcommand is a subparser of
:func:`build_parser`; a module with a subcommand of its own exposes
``add_arguments(parser)`` (its options, on the subparser given) and
``run(args) -> int`` (its work). Exit status: 0 ok, 1 what the subcommand
counts as a failure (a regression, a failed boot, a violation, ...), 2 bad
input (one line ``qrwbench: error: ...`` on stderr, nothing written: bad
arguments, a :class:`QrwbenchError` from any subcommand, a damaged results
DB), 130 interrupted (``qrwbench: interrupted``).
"""

from __future__ import annotations

import argparse
import functools
import math
import sqlite3
import sys

from .defaults import ALPHA, CORRECTIONS
from .errors import ArgParser, QrwbenchError, db_error
from .build import arch_audit, audit
from .results import rundir, store
from .report import noise
from .run import bench, bisect, emuaudit, nested, profile, series, torture


def _number(lo: float, hi: float, what: str, *, lo_closed=False, scale=1.0):
    """An argparse type: a finite number in (lo, hi) ([lo, hi) with
    ``lo_closed``), times ``scale``; else one line naming the range."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (math.isfinite(v) and (lo <= v if lo_closed else lo < v) and v < hi):
            raise argparse.ArgumentTypeError(what.format(text=repr(text)))
        return v * scale
    return parse


_fraction_pct = _number(0, 100, "{text} must be a percentage in (0, 100)", scale=0.01)
_effect_pct = _number(0, 100, "{text} must be a percentage in [0, 100)", lo_closed=True)
_alpha = _number(0, 1, "alpha {text} must be in (0, 1)")
FORMATS = ("text", "csv", "json")      # compare --format
_Parser = functools.partial(ArgParser, command="qrwbench")   # one line, status 2

# name -> (module with add_arguments and run, help); these modules import
# neither numpy nor scipy at import time (bench --plan and the --check steps
# run before `make deps`)
MODULE_COMMANDS = {
    "bench": (bench, "run the benchmark matrix (make bench)"),
    "audit": (audit, "what each variant compiles to (make audit)"),
    "emuaudit": (emuaudit, "what TCG can tell apart (make audit)"),
    "archaudit": (arch_audit, "what the qrwlock fast paths and atomic orderings compile to "
                              "on every qrwlock arch, from objects (make audit)"),
    "noise": (noise, "noise figures of a results DB (make noise)"),
    "torture": (torture, "rwlock exclusion torture (make torture)"),
    "perf": (profile, "perf record profile of QEMU for one cell (make perf)"),
    "series": (series, "benchmark and compare each commit of a kernel series "
                       "(make bench-series)"),
    "bisect": (bisect, "find the kernel commit that made a cell slower (make bisect)"),
    "kvm-nested": (nested, "boot the KVM path inside a TCG guest that is a KVM host "
                           "(make kvm-nested)"),
}
ALIASES = {"series": ["bench-series"]}


def _stats_options(p):
    p.add_argument("--commit", default="latest",
                   help="rig commit to report: latest (default: the commit of the most "
                        "recent run), all, HEAD, or a sha/prefix")
    p.add_argument("--baseline", action="append", metavar="WORKLOAD=VARIANT",
                   help="baseline variant per workload (default rwlock=acqrel, "
                        "atomics=full); repeatable")
    p.add_argument("--alpha", type=_alpha, default=ALPHA)
    p.add_argument("--correction", choices=sorted(CORRECTIONS), default="holm",
                   help="multiple-comparison control: holm (FWER, default) or bh (FDR)")
    p.add_argument("--min-effect", type=_effect_pct, default=0.0, metavar="PCT",
                   help="smallest change (percent) called faster/slower (default 0)")
    p.add_argument("--audit", metavar="PATH",
                   help="ordering audit JSON (default build/audit/audit.json if present)")
    p.add_argument("--repo", default=".", help="rig git repository (for commit order)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python3 -m qrwbench", description="qrwbench: the rig's command line "
                                                        "(make help lists the make targets)")
    p.add_argument("--db", help="results DB (default $RESULTS_DB or results/qrwbench.sqlite)")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    imp = sub.add_parser("import", help="import run directories into the results DB")
    imp.add_argument("paths", nargs="+", metavar="RUN_DIR",
                     help="a run directory, or a directory of run directories")
    imp.add_argument("--db", dest="db_sub", help=argparse.SUPPRESS)

    rep = sub.add_parser("report", help="write build/report/index.html and report.md")
    rep.add_argument("--out", default="build/report")
    rep.add_argument("--screenshot", action="store_true",
                     help="also keep first-screen.png, the first screen in headless "
                          "Chromium (make report asks for it)")
    rep.add_argument("--db", dest="db_sub", help=argparse.SUPPRESS)
    _stats_options(rep)

    cmp_ = sub.add_parser("compare", help="print the comparison table (end of make bench)")
    cmp_.add_argument("--db", dest="db_sub", help=argparse.SUPPRESS)
    for f in ("arch", "accel", "cpu_model", "workload", "impl", "op"):
        cmp_.add_argument(f"--{f.replace('_', '-')}", dest=f)
    cmp_.add_argument("--format", choices=FORMATS, default="text",
                      help="text (default: the table make bench prints), or one row per "
                           "comparison as csv or json (the columns: docs/analysis.md)")
    _stats_options(cmp_)

    reg = sub.add_parser("regress", help="compare a commit with its base; exit 1 on "
                                         "a regression")
    reg.add_argument("--db", dest="db_sub", help=argparse.SUPPRESS)
    reg.add_argument("--target", default="HEAD")
    reg.add_argument("--base", default=None,
                     help="base commit (default: nearest earlier commit with results "
                          "for the same cells)")
    reg.add_argument("--threshold", type=_fraction_pct, default=0.05, metavar="PCT",
                     help="slowdown that counts as a regression, percent (default 5)")
    reg.add_argument("--alpha", type=_alpha, default=ALPHA)
    reg.add_argument("--correction", choices=sorted(CORRECTIONS), default="holm")
    reg.add_argument("--key", choices=("rig", "kernel"), default="rig",
                     help="compare rig commits (default) or kernel tree commits")
    reg.add_argument("--repo", default=None,
                     help="git repository of the commits (default: . for rig, the "
                          "runs' kernel_src for kernel)")
    reg.add_argument("--history", action="store_true",
                     help="instead: list change points in every metric's history")

    for name, (mod, help_) in MODULE_COMMANDS.items():
        sp = sub.add_parser(name, aliases=ALIASES.get(name, []), help=help_, description=help_)
        mod.add_arguments(sp)
        sp.set_defaults(handler=mod.run)
    return p


def _run(args) -> int:
    if hasattr(args, "handler"):             # a module's subcommand
        return args.handler(args)
    db = args.db
    if args.cmd == "import":
        plan, notes = rundir.plan_imports(args.paths)   # validates before opening the DB
        conn = store.connect(db)
        try:
            for run_dir in plan:
                print(store.import_run(conn, run_dir).line())
        finally:
            conn.close()
        for n in notes:
            print(n)
        return 0
    if args.cmd in ("report", "compare"):
        from .analysis import compare   # numpy, scipy: only here and in regress
        from .report import report
        common = dict(commit=args.commit, baselines=compare.parse_baselines(args.baseline),
                      alpha=args.alpha, correction=args.correction,
                      min_effect=args.min_effect / 100.0, repo=args.repo,
                      audit_path=args.audit)
        if args.cmd == "report":
            paths = report.build(db, args.out, screenshot=args.screenshot, **common)
            print(f"report: {paths['html']}")
            print(f"summary: {paths['markdown']}")
            print(f"data: {paths['csv']}, {paths['json']}")
            if args.screenshot:
                print(f"first screen: {paths['screenshot']}" if paths["screenshot"] else
                      f"first screen: no screenshot: {paths['screenshot_note']}")
            return 0
        filters = {f: getattr(args, f) for f in ("arch", "accel", "cpu_model",
                                                   "workload", "impl", "op")}
        if args.format == "text":
            print(report.compare_text(db, **common, **filters))
            return 0
        from .report import export
        r = report.compare_set(db, **common, **filters)
        rows = export.rows(r.cset, r.selection.runs, r.audit)
        sys.stdout.write(export.to_csv(rows) if args.format == "csv" else
                         export.to_json(rows, export.header(r.selection.label, r.cset)))
        return 0
    if args.cmd == "regress":
        from .report import regress
        if args.history:
            lines = regress.steps(db, key=args.key, repo=args.repo)
            print("\n".join(lines) if lines else "no change points in any history")
            return 0
        res = regress.regress(db, target=args.target, base=args.base,
                              threshold=args.threshold, alpha=args.alpha,
                              correction=args.correction, key=args.key, repo=args.repo)
        print(res.text())
        return res.exit_code
    raise AssertionError(args.cmd)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    # a subcommand's --db (or DB) wins over the one before the subcommand
    args.db = getattr(args, "db_sub", None) or args.db
    try:
        return _run(args)
    except QrwbenchError as exc:
        print(f"qrwbench: error: {exc}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        print(f"qrwbench: error: {db_error(args.db or store.default_db_path(), exc)}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("qrwbench: interrupted", file=sys.stderr)
        return 130

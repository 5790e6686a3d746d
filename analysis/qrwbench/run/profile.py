"""`make perf CELL=...`: a `perf record -g` profile of the QEMU process for one
cell, with a report of the hottest symbols.

    /usr/bin/python3 -m qrwbench perf --cell CELL [--out build/perf] [--top 25]

One guest boots as in `make bench` (same command line, provenance and record
checks), but under `perf record -g` instead of `perf stat`. Written to
build/perf/<cell>/: run/ (the run directory: console, provenance, status),
perf.data, report.txt (`perf report --stdio --no-children`, sorted by self
time, symbols >= 0.5 %) and hot.txt (the top symbols, also printed). The run is
not imported into the results store: perf record's sampling slows the guest,
so its figures are not comparable with those of `make bench`.

What one profile here showed (x86_64 TCG, rwlock write_pct=10, 2 vCPUs, 4
reps x 10 ms: `make perf CELL=x86_64/tcg/max/acqrel/rwlock:write_pct=10,reps=4,duration_ms=10/2`):
the top entries were the host kernel's clear_page_erms (4.7 %: guest RAM
being zeroed), QEMU addresses without a symbol (Debian strips the binary; its
-dbgsym package adds them), cpu_exec and tcg_gen_code: in a short cell the
guest's boot dominates, so give a cell larger duration_ms/reps to profile the
measurement itself.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .. import outputs, vocab
from ..errors import QrwbenchError
from . import boot, ktree, perf

# "  4.66%  CPU 0/TCG   [kernel.kallsyms]   [k] clear_page_erms   -   -": the
# trailing "-" columns are the (empty) parent/callchain columns of -g none.
_ROW = re.compile(r"^\s*([\d.]+)%\s+(\S.*?)\s{2,}(\S.*?)\s{2,}\[(.)\]\s+(.*?)(?:\s+-)*\s*$")


def slug(cell) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", ktree.cell_text(cell).replace("/", "-"))


def hottest(report_text: str, top: int = 25) -> list[dict]:
    """[{"pct", "comm", "dso", "kind", "symbol"}] from `perf report --stdio
    --sort comm,dso,symbol -g none` output, hottest first."""
    rows = []
    for line in report_text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if m := _ROW.match(line):
            rows.append({"pct": float(m.group(1)), "comm": m.group(2), "dso": m.group(3),
                         "kind": {"k": "kernel", ".": "user"}.get(m.group(4), m.group(4)),
                         "symbol": m.group(5)})
    rows.sort(key=lambda r: -r["pct"])
    return rows[:top]


def format_hot(rows: list[dict], cell_text: str) -> str:
    lines = [f"hottest symbols (self time) of QEMU for {cell_text}:",
             f"{'self':>7}  {'thread':<16} {'object':<28} symbol"]
    lines += [f"{r['pct']:6.2f}%  {r['comm'][:16]:<16} {r['dso'][:28]:<28} {r['symbol']}" for r in rows]
    return "\n".join(lines) + "\n"


def out_dir(cell, out_root=None) -> Path:
    """Where make perf writes a cell's profile: <out_root or build/perf>/<slug>."""
    return Path(out_root or vocab.BUILD / "perf") / slug(cell)


def profile(cell_text: str, out_root=None, top: int = 25, timeout_s: int = 300) -> dict:
    cell = ktree.parse_cell(cell_text)
    ok, why = perf.usable("stat")
    if not ok:
        raise QrwbenchError(f"perf cannot run here: {why}")
    final = outputs.check(out_dir(cell, out_root), "perf")
    boot.kernel_paths(cell.arch, cell.variant)
    with outputs.replacing(final, "perf") as out:
        data = out / "perf.data"
        print(f"perf: booting {ktree.cell_text(cell)} under perf record -g "
              f"(console: {out / 'run' / 'console.log'}; moved to {final} when done)", flush=True)
        st = boot.boot_one(cell, 1, out / "run", timeout_s, 256,
                            {"usable": None, "reason": "not probed (make perf)", "booted": False},
                            wrap=perf.record_prefix(data))
        if st["status"] != "ok":
            tail = (st.get("console_tail") or ["(empty console)"])[-1].strip()
            raise QrwbenchError(f"the profiled boot failed: {st['reason']} (console ends: {tail})")
        if not data.exists():
            raise QrwbenchError(f"perf record wrote no {data.name}")
        rep = subprocess.run(perf.report_cmd(data), capture_output=True, text=True, check=False)
        if rep.returncode != 0:
            raise QrwbenchError(f"perf report failed: {(rep.stderr.strip().splitlines() or ['?'])[0]}")
        (out / "report.txt").write_text(rep.stdout)
        rows = hottest(rep.stdout, top)
        if not rows:
            raise QrwbenchError("perf report has no samples (the profiled boot ran too briefly?)")
        text = format_hot(rows, ktree.cell_text(cell))
        (out / "hot.txt").write_text(text)
    out = final
    return {"out": str(out), "report": str(out / "report.txt"), "hot": rows, "text": text}


def add_arguments(ap) -> None:
    """The options of ``python3 -m qrwbench perf`` (the parser is cli's)."""
    ap.add_argument("--cell", required=True, help=f"the cell: {ktree.CELL_SYNTAX}")
    ap.add_argument("--out", default=None, help="output root (default build/perf)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--check", action="store_true",
                    help="only check CELL and print the kernel it needs (ARCH-VARIANT)")


def run(args) -> int:
    """``python3 -m qrwbench perf``: bad input raises QrwbenchError (cli.main prints it)."""
    if args.check:
        cell = ktree.parse_cell(args.cell)
        outputs.check(out_dir(cell, args.out), "perf")
        print(f"{cell.arch}-{cell.variant}")
        return 0
    if not 1 <= args.top <= 10000:
        raise QrwbenchError(f"--top {args.top}: must be in 1..10000")
    res = profile(args.cell, args.out, args.top)
    print(res["text"], end="")
    print(f"perf: full report {res['report']}")
    return 0

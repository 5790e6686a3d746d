"""Usage: /usr/bin/python3 analysis/scripts/spread.py DB [COMMIT]

Spreads behind the closing-note figures: ns per op per thread
(ns * threads / ops) at 1 vCPU, copy 0, min/median/max over every rep of
every boot of the commit (default: latest; see selection.select) of
atomic_add_return (full, per-CPU line), the empty op (the harness), and
rwlock at 0 % writes (the kernel's rwlock_t and the in-module acqrel copy)."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import scriptdb  # noqa: E402
from qrwbench.report import selection  # noqa: E402


def what(s):
    if s["op"] == "atomic_add_return" and s["variant"] == "full" and s["placement"] == "percpu":
        return "atomic_add_return full percpu"
    if s["op"] == "empty" and s["placement"] == "percpu":
        return "empty percpu (harness)"
    if s["op"] == "rwlock" and s["write_pct"] == 0 and s["variant"] == "acqrel":
        return f"rwlock w0 {s['impl']} acqrel"
    return None


def main(db="", commit="latest"):
    groups = {}
    for s in selection.select(scriptdb.connect(db), commit).samples:
        k = what(s) if s["vcpus"] == 1 and s["copy"] == 0 else None
        if k:
            groups.setdefault((s["arch"], s["cpu_model"], k), []).append(s["ns"] * s["threads"] / s["ops"])
    print("| arch / CPU | what | n | min | median | max |")
    print("|---|---|---|---|---|---|")
    for (arch, cpu, k), v in sorted(groups.items()):
        print(f"| {arch} {cpu} | {k} | {len(v)} | {min(v):.2f} | {statistics.median(v):.2f} | {max(v):.2f} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])

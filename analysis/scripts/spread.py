"""Usage: /usr/bin/python3 analysis/scripts/spread.py DB RIG_COMMIT_PREFIX

Spreads: ns per op per thread (ns*threads/ops) of
atomic_add_return (full, per-CPU line, 1 vCPU) and rwlock at 0 % writes
(1 vCPU, kernel rwlock_t and the in-module acqrel copy), min/median/max over
all reps of both boots; and the empty op's ns/op (harness overhead)."""
import sqlite3, sys, statistics as st
db, rig = sys.argv[1], sys.argv[2]
c = sqlite3.connect(db)
q = """select s.arch, s.cpu_model, s.impl, s.op, s.variant, s.placement, s.write_pct, s.ns, s.ops, s.threads, s.overhead_ps
       from samples s join runs r using(run_id)
       where r.status='ok' and r.rig_commit like ? and s.vcpus=1 and s.copy=0"""
g = {}
for a, cpu, impl, op, var, pl, wp, ns, ops, th, ovh in c.execute(q, (rig + "%",)):
    v = ns * th / ops
    if op == "atomic_add_return" and var == "full" and pl == "percpu":
        g.setdefault((a, cpu, "atomic_add_return full percpu"), []).append(v)
    if op == "empty" and pl == "percpu":
        g.setdefault((a, cpu, "empty percpu (harness)"), []).append(v)
    if op == "rwlock" and wp == 0 and ((impl == "kernel" and var == "acqrel") or (impl == "module" and var == "acqrel")):
        g.setdefault((a, cpu, f"rwlock w0 {impl} acqrel"), []).append(v)
print("| arch / CPU | what | n | min | median | max |")
print("|---|---|---|---|---|---|")
for k in sorted(g):
    v = g[k]
    print(f"| {k[0]} {k[1]} | {k[2]} | {len(v)} | {min(v):.2f} | {st.median(v):.2f} | {max(v):.2f} |")

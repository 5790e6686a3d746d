"""Synthetic guest output, run directories and results DBs for the tests.

Records follow docs/records.md (schema 1); consoles are written with
``qrwbench.results.records.format_console`` so their end markers carry a correct count
and CRC-32. Throughputs are drawn from a log-normal with a known median and CV,
multiplied by a per-variant factor, so every test knows the true effect.
"""

from __future__ import annotations

import json
import os
import subprocess
import zlib
from pathlib import Path

import numpy as np

from qrwbench import vocab
from qrwbench.results import records

NS = 100_000_000            # 100 ms windows
BOOT_LINES = [
    "[    0.000000] Linux version 6.12.0-qrwbench (gcc 12.2.0) #1 SMP",
    "[    0.000000] Kernel command line: console=ttyS0 panic=-1 quiet",
    "[    0.210000] RETBleed: WARNING: Spectre v2 mitigation leaves CPU vulnerable "
    "to RETBleed attacks, data leaks possible!",
    "[    0.300000] atomic64_test: passed for x86-64 platform with CX8 and with SSE",
    "[    0.400000] Warning: unable to open an initial console.",
]
END_LINES = ["[    2.000000] reboot: Power down"]


def begin(arch="x86_64", kernel_variant="acqrel", workload="atomics", threads=2,
          online_cpus=None, seed=1):
    return {"type": "begin", "schema": 1, "arch": arch, "kernel_variant": kernel_variant,
            "kernel_release": "6.12.0-qrwbench", "workload": workload, "seed": seed,
            "online_cpus": online_cpus or threads, "threads": threads,
            "params": {"reps": 5, "duration_ms": 100, "workload": workload}}


def _split(total: int, threads: int, rng, skew: float = 0.0) -> list[int]:
    w = np.ones(threads) + skew * rng.random(threads)
    parts = np.floor(total * w / w.sum()).astype(int)
    parts[0] += total - int(parts.sum())
    return [int(x) for x in parts]


def results(*, workload="atomics", impl=None, op=None, variants=None, copies=(0, 1),
            placement="shared", reps=8, threads=2, rate=50e6, cv=0.02, factors=None,
            copy_factor=1.0, rng=None, write_pct=10, kernel_variant="acqrel",
            start_order=0):
    """Result records for every (variant, copy, rep), in a shuffled run order.

    ``factors[variant]`` multiplies the median throughput of that variant;
    ``copy_factor`` multiplies copy 1 (an injected A/A difference).
    """
    rng = rng or np.random.default_rng(0)
    impl = impl or ("inline" if workload == "atomics" else "module")
    op = op or ("atomic_add_return" if workload == "atomics" else "rwlock")
    if variants is None:
        variants = (("full", "acquire", "release", "relaxed") if workload == "atomics"
                    else (kernel_variant,) if impl == "kernel" else ("full", "acqrel", "relaxed"))
    factors = factors or {}
    combos = [(v, c, r) for r in range(reps) for v in variants for c in copies]
    order = rng.permutation(len(combos))
    out = []
    sigma = np.sqrt(np.log(1 + cv * cv))
    for (variant, copy, rep), pos in zip(combos, order):
        med = rate * factors.get(variant, 1.0) * (copy_factor if copy == 1 else 1.0)
        tput = med * rng.lognormal(0.0, sigma)
        ops = max(1, int(tput * NS / 1e9))
        rec = {"type": "result", "schema": 1, "workload": workload, "impl": impl,
               "op": op, "variant": variant, "copy": copy, "placement": placement,
               "rep": rep, "order": int(pos) + start_order, "threads": threads,
               "ns": NS, "ops": ops, "per_thread_ops": _split(ops, threads, rng, 0.1),
               "overhead_ps": 1200, "batch": 64}
        if workload == "rwlock":
            writes = ops * write_pct // 100
            reads = ops - writes
            ptr = _split(reads, threads, rng)
            ptw = [o - r for o, r in zip(rec["per_thread_ops"], ptr)]
            if min(ptw) < 0:        # keep per-thread reads <= per-thread ops
                ptr = [o - w for o, w in zip(rec["per_thread_ops"],
                                             _split(writes, threads, rng))]
                ptw = [o - r for o, r in zip(rec["per_thread_ops"], ptr)]
            rec.update(reads=reads, writes=writes, per_thread_reads=ptr,
                       per_thread_writes=ptw, write_pct=write_pct, nlocks=1, cs_work=0,
                       think_work=10, cs_lines=1, violations=0)
        out.append(rec)
    out.sort(key=lambda r: r["order"])
    return out


def console(recs, *, boot=BOOT_LINES, tail=END_LINES, end=True) -> str:
    return "\n".join(boot) + "\n" + records.format_console(recs, end=end) + \
        "".join(l + "\n" for l in tail)


def provenance(run_id, *, arch="x86_64", accel="tcg", cpu_model="qemu64", vcpus=2,
               kernel_variant="acqrel", workload="atomics", rig_commit="a" * 40,
               overcommitted=False, kvm_usable=False, started_at="2026-12-01T00:00:00Z",
               **extra):
    prov = {"run_id": run_id,
            "cell": {"arch": arch, "accel": accel, "cpu_model": cpu_model,
                     "vcpus": vcpus, "kernel_variant": kernel_variant,
                     "workload": workload, "params": {}},
            "rig_commit": rig_commit, "rig_dirty": False, "rig_diff_sha256": None,
            "kernel_src": "/usr/src/linux-source-6.12.tar.xz",
            "kernel_tree_commit": "b" * 40,
            "kernel_tree_subject": "locking/qrwlock: make the memory ordering selectable",
            "kernel_release": "6.12.0-qrwbench", "config_sha256": "c" * 64,
            "compiler": "gcc (Debian 12.2.0-14) 12.2.0", "qemu_binary": "qemu-system-x86_64",
            "qemu_version": "QEMU emulator version 7.2.15", "qemu_cmd": "qemu-system-x86_64 ...",
            "accel": accel,
            "kvm_probe": {"usable": kvm_usable,
                          "reason": None if kvm_usable else
                          "kvm_pvm module: no hardware virtualization"},
            "host_cpu_model": "Test CPU @ 2.0GHz", "host_cpus": 2,
            "overcommitted": overcommitted, "seed": 1, "started_at": started_at,
            "finished_at": started_at}
    prov.update(extra)
    return prov


def write_run(root, run_id, console_text, *, status="ok", reason="", **prov_kw) -> Path:
    d = Path(root) / run_id
    d.mkdir(parents=True)
    (d / "qemu.cmd").write_text("qemu-system-x86_64 ...\n")
    if console_text is not None:
        data = console_text if isinstance(console_text, bytes) else console_text.encode()
        (d / "console.log").write_bytes(data)
    (d / "provenance.json").write_text(json.dumps(provenance(run_id, **prov_kw)))
    (d / "status.json").write_text(json.dumps(
        {"status": status, "reason": reason, "returncode": 0 if status == "ok" else 1,
         "timed_out": False, "wall_s": 3.5}))
    return d


def atomics_run(root, run_id, *, vcpus=2, factors=None, rng=None, copy_factor=1.0,
                reps=8, cv=0.02, rate=50e6, **prov_kw) -> Path:
    rng = rng or np.random.default_rng(zlib.crc32(run_id.encode()))
    recs = [begin(threads=vcpus, kernel_variant=prov_kw.get("kernel_variant", "acqrel"))]
    recs += results(threads=vcpus, factors=factors, rng=rng, copy_factor=copy_factor,
                    reps=reps, cv=cv, rate=rate)
    return write_run(root, run_id, console(recs), vcpus=vcpus, **prov_kw)


def rwlock_run(root, run_id, *, vcpus=2, write_pcts=(0, 10, 50), factors=None, rng=None,
               reps=6, **prov_kw) -> Path:
    rng = rng or np.random.default_rng(zlib.crc32(run_id.encode()))
    kv = prov_kw.get("kernel_variant", "acqrel")
    recs = [begin(workload="rwlock", threads=vcpus, kernel_variant=kv)]
    n = 0
    for w in write_pcts:
        for impl in ("module", "kernel"):
            part = results(workload="rwlock", impl=impl, threads=vcpus, factors=factors,
                           rng=rng, reps=reps, write_pct=w, rate=20e6 * (1 - w / 200),
                           cv=0.03, kernel_variant=kv, start_order=n,
                           copies=(0, 1) if impl == "module" else (0,))
            n += len(part)
            recs += part
    return write_run(root, run_id, console(recs), vcpus=vcpus, workload="rwlock", **prov_kw)


def program_results(workload, *, reps=6, threads=2, kernel_variant="acqrel", rng=None,
                    rate=5e3, ref_rate=4e6, factor=1.0, cv=0.03, write_pct=10):
    """A program workload's result records (guest/prog.c + the module's
    qrwb_program.c): per rep the program's window (impl kernel; reads and
    writes where its Workload record has them) and the module's reference
    round (impl module, acqrel, with the rwlock loop's reads and writes), in
    a random order; ``factor`` multiplies the program's rate."""
    rng = rng or np.random.default_rng(0)
    rw = set(records.READ_WRITE_FIELDS) <= set(vocab.workload(workload).fields)
    sigma = np.sqrt(np.log(1 + cv * cv))
    out, order = [], 0
    for rep in range(reps):
        for impl in rng.permutation(["kernel", "module"]):
            impl = str(impl)
            med = rate * factor if impl == "kernel" else ref_rate
            ops = max(threads, int(med * rng.lognormal(0.0, sigma) * NS / 1e9))
            pto = _split(ops, threads, rng, 0.1)
            rec = {"type": "result", "schema": 1, "workload": workload, "impl": impl,
                   "op": workload, "variant": kernel_variant if impl == "kernel" else "acqrel",
                   "copy": 0, "placement": "shared", "rep": rep, "order": order,
                   "threads": threads, "ns": NS, "ops": ops, "per_thread_ops": pto,
                   "overhead_ps": 0 if impl == "kernel" else 1200,
                   "batch": 8 if impl == "kernel" else 256}
            if impl == "module" or rw:
                ptw = [o * write_pct // 100 for o in pto]
                ptr = [o - w for o, w in zip(pto, ptw)]
                rec.update(reads=sum(ptr), writes=sum(ptw), per_thread_reads=ptr,
                           per_thread_writes=ptw)
            out.append(rec)
            order += 1 + (impl == "module")     # the reference's no-lock entry has an order too
    return out


def program_run(root, run_id, workload, *, vcpus=2, factor=1.0, rng=None, reps=6,
                **prov_kw) -> Path:
    rng = rng or np.random.default_rng(zlib.crc32(run_id.encode()))
    kv = prov_kw.get("kernel_variant", "acqrel")
    recs = [begin(workload=workload, threads=vcpus, kernel_variant=kv)]
    recs += program_results(workload, reps=reps, threads=vcpus, kernel_variant=kv, rng=rng,
                            factor=factor)
    return write_run(root, run_id, console(recs), vcpus=vcpus, workload=workload, **prov_kw)


# Analysis samples (stored windows as store.load_samples gives them) with a
# known structure, for the statistics' tests.

def samples(rng, *, boots=2, reps=10, factors=None, cv=0.02, block_cv=0.0, boot_cv=0.0,
            variants=("full", "acquire", "release", "relaxed"), copy_factor=1.0, op="op0",
            workload="atomics", impl="inline", params="{}", run_prefix="run", copies=(0, 1),
            arch="x86_64", cpu="qemu64", placement="shared", copy_boot_cv=0.0):
    """Samples with a known structure: throughput = 50e6 * factor[variant] *
    boot speed (CV boot_cv) * block phase (CV block_cv, common to every entry of
    the block) * window noise (CV cv). Copy 1 is multiplied by copy_factor
    and by a factor of its boot (CV copy_boot_cv: two copies of the same
    code that differ from boot to boot, as on the host of run Z1)."""
    factors = factors or {}
    out = []
    for b in range(boots):
        boot = rng.lognormal(0, boot_cv)
        copy_boot = rng.lognormal(0, copy_boot_cv) if copy_boot_cv else 1.0
        for rep in range(reps):
            phase = rng.lognormal(0, block_cv)
            for v in variants:
                for c in copies:
                    x = 50e6 * factors.get(v, 1.0) * boot * phase * rng.lognormal(0, cv)
                    out.append({"arch": arch, "accel": "tcg", "cpu_model": cpu, "vcpus": 2,
                                "workload": workload, "impl": impl, "op": op,
                                "placement": placement, "params": params, "variant": v,
                                "copy": c, "run_id": f"{run_prefix}-{b}", "rep": rep,
                                "started_at": f"{b:04d}", "per_thread_ops": [1, 1],
                                "throughput": x * (copy_factor * copy_boot if c else 1.0)})
    return out


def kernel_boots(rng, variant, n_boots, *, factor=1.0, boot_cv=0.10, cv=0.01, reps=10,
                 with_reference=True, ref_factor=1.0):
    """``n_boots`` rwlock boots of one kernel variant: the kernel's rwlock
    (impl kernel, speed ``factor``) and the module's acqrel copy (impl
    module), sharing each boot's speed (CV ``boot_cv``) and each block's."""
    out = []
    for b in range(n_boots):
        speed = rng.lognormal(0.0, boot_cv)
        for rep in range(reps):
            phase = rng.lognormal(0, 0.05)
            base = {"arch": "x86_64", "accel": "tcg", "cpu_model": "qemu64", "vcpus": 2,
                    "workload": "rwlock", "op": "rwlock", "placement": "shared",
                    "params": "{}", "copy": 0, "run_id": f"{variant}-{b}", "rep": rep,
                    "started_at": f"{variant}-{b:03d}", "per_thread_ops": [1, 1]}
            out.append(dict(base, impl="kernel", variant=variant,
                            throughput=20e6 * factor * speed * phase * rng.lognormal(0, cv)))
            if with_reference:
                for v in ("acqrel", "full"):
                    out.append(dict(base, impl="module", variant=v,
                                    throughput=20e6 * ref_factor * speed * phase * rng.lognormal(0, cv)))
    return out


RIG_COMMIT = "3" * 40       # of report_db


def report_db(root) -> str:
    """A results DB for the report tests (returns its path): x86_64 TCG
    atomics at 2 vCPUs (two boots, relaxed 10 % faster, acquire 3 % slower),
    the same on KVM (relaxed 30 % faster), and rwlock on two kernel builds
    (full 10 % slower) at write_pct 0 and 50, all of rig commit RIG_COMMIT."""
    root = Path(root)
    runs, path = root / "runs", str(root / "qrwbench.sqlite")
    made = [atomics_run(runs, f"a{i}", factors={"relaxed": 1.10, "acquire": 0.97}, reps=6,
                        rig_commit=RIG_COMMIT) for i in range(2)]
    made += [atomics_run(runs, f"k{i}", factors={"relaxed": 1.30}, reps=6, accel="kvm",
                         cpu_model="host", kvm_usable=True, rig_commit=RIG_COMMIT)
             for i in range(2)]
    made += [rwlock_run(runs, f"rw-{kv}-{i}", kernel_variant=kv, write_pcts=(0, 50), reps=4,
                        factors={"full": 0.9}, rig_commit=RIG_COMMIT)
             for kv in ("acqrel", "full") for i in range(2)]
    from qrwbench.results import store
    for run in made:
        store.import_run(path, run)
    return path


def audits(root) -> tuple[Path, Path]:
    """(ordering audit, emulator audit) for report_db's TCG atomics: full and
    acquire compile alike; release is emulator-blind, relaxed distinguishable."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    audit, emu = root / "audit.json", root / "emulator.json"
    audit.write_text(json.dumps({"schema": 1, "identical": [
        {"arch": "x86_64", "impl": "inline", "op": "atomic_add_return",
         "variants": ["full", "acquire"]}]}))
    target = {"arch": "x86_64", "accel": "tcg", "cpu_model": "qemu64", "vcpus": 2,
              "impl": "inline", "op": "atomic_add_return"}
    blind = {**target, "variants": ["release", "full"]}
    emu.write_text(json.dumps({"schema": 1, "blind": [blind], "labels": [
        {**blind, "label": "emulator-blind"},
        {**target, "variants": ["relaxed", "full"], "label": "distinguishable"}]}))
    return audit, emu


# A git environment that needs no user config and gives the same shas every time.
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
               GIT_AUTHOR_DATE="2026-12-01T00:00:00Z", GIT_COMMITTER_DATE="2026-12-01T00:00:00Z",
               GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")


def empty_commits(repo: Path, n: int) -> list[str]:
    """A new git repository at ``repo`` with ``n`` empty commits, subjects
    'change 0'..'change n-1'; their shas, oldest first."""
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=GIT_ENV)
    shas = []
    for i in range(n):
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m",
                        f"change {i}"], check=True, env=GIT_ENV)
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                                   env=GIT_ENV, capture_output=True, text=True).stdout.strip())
    return shas

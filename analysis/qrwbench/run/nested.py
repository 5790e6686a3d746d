"""``make kvm-nested``: the rig's KVM path booted for real, inside a TCG guest
that is itself a KVM host.

    /usr/bin/python3 -m qrwbench kvm-nested --arch arm64 [--cell CELL ...]

L0 (this host) boots L1 under TCG: arm64 with ``-M virt,virtualization=on``
(QEMU emulates EL2, so L1's kernel initialises KVM), x86_64 with ``-cpu max``
(TCG's AMD SVM with nested paging). L1's kernel is the rig's tree with
kernel/configs/nested/ARCH.config on top; its root (guest/nested/mkroot.sh)
holds that arch's real QEMU; a second cpio appended per boot holds the L2
kernels, initramfs and ``/l2/job.sh``. Inside L1, each L2 boot is exactly
the command line boot.qemu_cmd builds for the cell under ACCEL=kvm (the
function ``make bench ACCEL=kvm`` calls), with L1's QEMU binary and paths.
Each L2 console and QEMU's own messages reach this host on a virtio-serial
port of their own, written by L0's QEMU straight into the run directory's
console.log; L1's console (build/kvm-nested/ARCH/console.log) carries the
facts the KVM probe judges (kvm.static_check on L1's facts, then the probe's
own boot: kvm.verdict) and each L2 QEMU's exit status.

Each cell's run is judged by the same record checks and fault scan as every
run (boot.judge_and_write -> rundir.judge_run) and stored with accel ``kvm``,
``nested`` in its provenance (L1's kernel, CPU model, QEMUs) and host
``nested``: the host is a blocking factor of every comparison, so nested
numbers, which measure emulation twice over, are never pooled with another
host's, and the report lists them apart.
"""
from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .. import outputs, vocab
from ..cell import Cell
from ..vocab import InputError
from ..errors import one_line
from ..results import records, store
from . import bench, boot, kvm, ktree, provenance, qemu

HOST = store.NESTED_HOST     # the runs' host: a blocking factor, never pooled
OUT = vocab.BUILD / "kvm-nested"
L1_PREFIX = "@@L1 "


@dataclass(frozen=True)
class L1:
    """How L0 boots the L1 of an arch."""
    machine: str         # L0's -M: EL2 / SVM on
    cpu: str             # L0's -cpu for L1 (TCG)
    qemu: str            # the L2 VMM inside L1 (guest/nested/mkroot.sh puts it there)

    def kernel_dir(self, arch: str) -> Path:
        return vocab.BUILD / "nested" / arch / "kernel"

    def root(self, arch: str) -> Path:
        return vocab.BUILD / "nested" / arch / "root.cpio"


L1S = {
    # QEMU's own test of this (tests/functional/aarch64/test_kvm.py) boots L1
    # with gic-version=3 and virtualization=on; `max` has VHE, and
    # pauth-impdef=on spares TCG the architected pointer-auth hash.
    "arm64": L1(machine="virt,virtualization=on,gic-version=3", cpu="max,pauth-impdef=on",
                qemu="/usr/bin/qemu-system-aarch64"),
    # TCG emulates AMD SVM with nested paging (-cpu max: vendor AMD), not VMX.
    # acpi=off: only then does microvm name its virtio-mmio transports on
    # the kernel command line (L1's kernel has no ACPI).
    "x86_64": L1(machine=vocab.ARCHES["x86_64"].machine + ",acpi=off", cpu="max,-xsave",
                 qemu="/usr/bin/qemu-system-x86_64"),
}
DEFAULT_CELLS = {
    a: [f"{a}/kvm/host/acqrel/atomics:duration_ms=5,ops=atomic_add_return,smp_mb,reps=2/2",
        f"{a}/kvm/host/acqrel/rwlock:write_pct=10,duration_ms=5,reps=2/2"]
    for a in L1S}
L2_MEM_MB = 256


def parse_cells(arch: str, texts: list[str]) -> list[Cell]:
    """The cells to boot in L2, each checked like CELL= everywhere; one-line
    errors before anything is built or booted."""
    if arch not in L1S:
        raise InputError(f"kvm-nested: unknown ARCH {arch!r}: valid are {', '.join(sorted(L1S))}")
    cells = []
    for t in texts or DEFAULT_CELLS[arch]:
        c = ktree.parse_cell(t)
        if c.arch != arch or c.accel != "kvm":
            raise InputError(f"kvm-nested: CELL {t!r} must be an {arch}/kvm/host/... cell "
                             f"(ARCH={arch}; L2 runs under KVM)")
        cells.append(c)
    return cells


def l1_vcpus(cells: list[Cell]) -> int:
    """L1's vCPUs: as many as the largest L2 guest (KVM runs each L2 vCPU
    on an L1 vCPU) and at least two."""
    return max(2, *(c.vcpus for c in cells))


def l1_mem_mb(cells: list[Cell]) -> int:
    # L1's initramfs holds QEMU and its libraries (~55 MiB, twice while it
    # unpacks), then one L2 guest at a time
    return 1024 + L2_MEM_MB


def paths_in_l1(cell: Cell) -> tuple[str, str]:
    """Where a cell's L2 kernel and initramfs lie inside L1 (the job cpio)."""
    return f"/l2/{cell.arch}-{cell.variant}.img", f"/l2/{cell.arch}-{cell.variant}.cpio"


def l2_command(cell: Cell, seed: int) -> list[str]:
    """The cell's command line under KVM, as make bench ACCEL=kvm builds it,
    with L1's QEMU and L1's paths."""
    image, initrd = paths_in_l1(cell)
    return boot.qemu_cmd(cell, seed, L2_MEM_MB, image, initrd, binary=L1S[cell.arch].qemu)


def job_script(jobs: list[tuple[str, int, list[str]]], qemu_bin: str) -> str:
    """/l2/job.sh: ``l2 NAME SECONDS CMD`` per L2 boot (init.sh's function);
    the probe first, and nothing more when its QEMU fails."""
    lines = ["# written by qrwbench kvm-nested (analysis/qrwbench/run/nested.py)",
             f"echo \"@@L1-QEMU $({shlex.quote(qemu_bin)} --version | head -1)\""]
    first = True
    for name, secs, cmd in jobs:
        line = f"l2 {name} {int(secs)} {shlex.join(cmd)}"
        lines.append(line if first else f"[ \"$rc\" = 0 ] && {line}")
        first = False
    return "\n".join(lines) + "\n"


def job_cpio(cells: list[Cell], script: str, work: Path, gen: Path) -> Path:
    """The per-boot cpio: every L2 kernel and initramfs the cells boot, and job.sh."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "job.sh").write_text(script)
    lines = ["dir /l2 0755 0 0", f"file /l2/job.sh {work / 'job.sh'} 0644 0 0"]
    for arch, variant in sorted({(c.arch, c.variant) for c in cells}):
        image, initrd, _, _ = boot.kernel_paths(arch, variant)
        c = Cell.boot(arch, "kvm", "host", variant, "atomics", 1)
        img_l1, initrd_l1 = paths_in_l1(c)
        lines += [f"file {img_l1} {image} 0644 0 0", f"file {initrd_l1} {initrd} 0644 0 0"]
    (work / "job.list").write_text("\n".join(lines) + "\n")
    out = work / "job.cpio"
    with open(out, "wb") as f:
        subprocess.run([str(gen), str(work / "job.list")], stdout=f, check=True)
    return out


def l0_command(arch: str, cells: list[Cell], kernel: Path, initrd: Path,
               ports: dict[str, Path]) -> list[str]:
    """L0's QEMU for L1: the rig's TCG command line (qemu.command) with L1's
    machine, and a virtio-serial port per L2 console (name qrwb.NAME)."""
    l1 = L1S[arch]
    cmd = qemu.command(arch, "tcg", l1.cpu, l1_vcpus(cells), l1_mem_mb(cells), kernel, initrd,
                       "rdinit=/init")
    cmd[cmd.index("-M") + 1] = l1.machine + vocab.ARCHES[arch].machine_opts
    cmd += ["-device", "virtio-serial-device"]
    for i, (name, path) in enumerate(ports.items()):
        cmd += ["-chardev", f"file,id=p{i},path={str(path).replace(',', ',,')}",
                "-device", f"virtserialport,chardev=p{i},name=qrwb.{name}"]
    return cmd


def parse_l1_console(text: str) -> dict:
    """{"facts": {...} | None, "exits": {name: rc}, "wall_s": {name: s},
    "kvm_lines": [...], "qemu": str, "done": bool, ...} from L1's console."""
    out = {"facts": None, "exits": {}, "why": {}, "kvm_lines": [], "qemu": "", "done": False,
           "release": "", "starts": {}, "wall_s": {}}
    for line in text.splitlines():
        line = line.strip("\r")
        if line.startswith("@@L1-KVM "):
            out["kvm_lines"].append(line[len("@@L1-KVM "):].strip())
        elif line.startswith("@@L1-QEMU "):
            out["qemu"] = line[len("@@L1-QEMU "):].strip()
        elif line.startswith(L1_PREFIX):
            try:
                rec = json.loads(line[len(L1_PREFIX):])
            except ValueError:
                continue
            t = rec.get("type")
            if t == "facts":
                out["facts"] = {"machine": rec.get("machine", ""), "dev_kvm": bool(rec.get("dev_kvm")),
                                "dev_kvm_rw": bool(rec.get("dev_kvm_rw")),
                                "kvm_pvm": bool(rec.get("kvm_pvm")), "cpus": rec.get("cpus")}
                out["release"] = rec.get("release", "")
            elif t == "l2-start":
                out["starts"][rec.get("name")] = rec.get("uptime")
            elif t == "l2-exit":
                out["exits"][rec.get("name")] = rec.get("rc")
                t0 = out["starts"].get(rec.get("name"))
                if isinstance(t0, (int, float)) and isinstance(rec.get("uptime"), (int, float)):
                    out["wall_s"][rec.get("name")] = round(rec["uptime"] - t0, 2)
                if rec.get("why"):
                    out["why"][rec.get("name")] = rec["why"]
            elif t == "l1-done":
                out["done"] = True
    return out


def l2_status(name: str, l1: dict, l0: dict, secs: int) -> dict:
    """A run's launcher status from what L1 said of its L2 QEMU."""
    st = {"status": "ok", "reason": "", "returncode": l1["exits"].get(name), "timed_out": False}
    if name in l1["wall_s"]:
        st["wall_s"] = l1["wall_s"][name]     # L1's clock: emulated time, roughly
    rc = l1["exits"].get(name)
    if rc is None:
        why = ("not started: an earlier L2 boot failed" if l1["done"] else
               f"L1 did not finish ({l0.get('reason') or 'no l1-done line'})")
        st.update(status="failed", reason=f"nested: {why}")
    elif rc == 137:
        st.update(status="failed", timed_out=True,
                  reason=f"L2 guest did not finish within {secs} s; L1 killed its QEMU")
    elif rc != 0:
        st.update(status="failed", reason=l1["why"].get(name) or f"QEMU exited with status {rc}")
    return st


def _run_id(cell: Cell, seed: int, rig: dict, nonce: str) -> str:
    h = hashlib.sha256(json.dumps([cell.key(), seed, rig["rig_commit"], rig["rig_diff_sha256"],
                                   HOST, nonce]).encode()).hexdigest()[:12]
    return f"{h}-{cell.arch}-kvm-{HOST}-{cell.variant}-{cell.workload}-{cell.vcpus}v"


def l1_paths(arch: str) -> tuple[Path, Path, Path]:
    """(L1 kernel image, L1 root cpio, gen_init_cpio), checked to exist."""
    l1 = L1S[arch]
    kdir = l1.kernel_dir(arch)
    image = kdir / vocab.build_arches()[arch].image
    if not (kdir / ".qrwbench-built").exists() or not image.exists():
        raise InputError(f"kvm-nested: L1 kernel {kdir} is not built: run 'make kvm-nested ARCH={arch}'")
    if not l1.root(arch).exists():
        raise InputError(f"kvm-nested: L1 root {l1.root(arch)} is missing: run 'make kvm-nested ARCH={arch}'")
    return image, l1.root(arch), kdir / "usr" / "gen_init_cpio"


def boot_nested(arch: str, cells: list[Cell], db: Path, runs: Path = bench.RUNS, timeout_s: int = 900,
        out: Path = OUT, seed: int = 1) -> tuple[int, list[str]]:
    """Boot L1 once, the probe and every cell inside it; store the runs.
    Returns (exit status, the summary lines): 0 all ok, 1 a run failed,
    2 KVM not possible in L1 (the probe's reason)."""
    l1_image, l1_root, gen = l1_paths(arch)
    for c in cells:
        boot.kernel_paths(c.arch, c.variant)
    probe = boot.probe_cell(arch)
    boot.kernel_paths(probe.arch, probe.variant)
    rig = provenance.rig_state()
    nonce = hashlib.sha256(str(time.time()).encode()).hexdigest()[:8]
    work = outputs.fresh_dir(out / arch, "kvm-nested")
    probe_dir = outputs.fresh_dir(work / "probe", "run")
    jobs, ports, dirs = [("probe", timeout_s, l2_command(probe, seed))], {"probe": probe_dir / "console.log"}, {}
    for i, c in enumerate(cells):
        rid = _run_id(c, seed, rig, nonce)
        dirs[f"run{i}"] = (c, outputs.fresh_dir(runs / rid, "run"))
        ports[f"run{i}"] = dirs[f"run{i}"][1] / "console.log"
        jobs.append((f"run{i}", timeout_s, l2_command(c, seed)))
    for p in ports.values():
        p.touch()
    script = job_script(jobs, L1S[arch].qemu)
    initrd = work / "l1-initrd.cpio"
    with open(initrd, "wb") as f:
        for part in (l1_root, job_cpio(cells + [probe], script, work / "job", gen)):
            with open(part, "rb") as src:
                while chunk := src.read(1 << 20):
                    f.write(chunk)
    cmd = l0_command(arch, cells, l1_image, initrd, ports)
    budget = 300 + timeout_s * len(jobs)
    print(f"kvm-nested: {arch}: booting L1 under TCG ({L1S[arch].cpu}, {l1_vcpus(cells)} vCPUs), "
          f"then {len(jobs)} L2 guests under KVM inside it (L1 console: {work / 'console.log'}; "
          f"gives up after {budget} s)", flush=True)
    t0 = time.monotonic()
    l0 = qemu.boot(cmd, work, budget, done_marker=b'"type":"l1-done"')
    l1 = parse_l1_console((work / "console.log").read_text("ascii", "replace"))
    l1_wall_s = round(time.monotonic() - t0, 1)
    (work / "l1.json").write_text(json.dumps({"l0": l0, "l1": l1}, indent=1) + "\n")
    nested = {"l1_kernel": str(l1_image), "l1_kernel_release": l1["release"],
              "l1_cpu_model": L1S[arch].cpu, "l1_machine": L1S[arch].machine,
              "l1_vcpus": l1_vcpus(cells), "l0_qemu": qemu.qemu_version(cmd[0]),
              "l0_accel": "tcg", "l1_qemu": l1["qemu"], "l0_cmd": cmd,
              "l1_kvm_lines": l1["kvm_lines"][:40], "l1_console": str(work / "console.log"),
              "l1_wall_s": l1_wall_s}
    # the probe: the same checks as on a host (kvm.static_check on L1's
    # facts, then one boot of the probe cell, judged like every run)
    static = (kvm.static_check(arch, l1["facts"]) if l1["facts"] else
              (False, f"L1 printed no facts ({l0.get('reason') or 'see its console'})"))
    pst = _finish(probe_dir, probe, seed, l2_command(probe, seed), rig,
                  {"usable": None, "reason": "probing"}, nested,
                  l2_status("probe", l1, l0, timeout_s))
    verdict = kvm.verdict(static, *boot.probe_boot_verdict(pst))
    (work / "probe.json").write_text(json.dumps(verdict, indent=1) + "\n")
    if not verdict["usable"]:
        for c, d in dirs.values():
            _finish(d, c, seed, l2_command(c, seed), rig, verdict, nested,
                    {"status": "failed", "reason": f"KVM unusable in L1: {verdict['reason']}",
                     "returncode": None, "timed_out": False})
        return 2, [f"kvm-nested: {arch}: not possible here: {one_line(verdict['reason'], 300)}"]
    lines, status = [f"kvm-nested: {arch}: KVM probe inside L1: {verdict['reason']} "
                     f"({static[1]}; L1 kernel {l1['release']}, {L1S[arch].cpu})"], 0
    conn = store.connect(db)
    try:
        for name, (c, d) in dirs.items():
            st = _finish(d, c, seed, l2_command(c, seed), rig, verdict, nested,
                         l2_status(name, l1, l0, timeout_s))
            res = store.import_run(conn, d)
            if st["status"] == "ok" and res.status == "ok":
                n = len(records.parse_console((d / "console.log").read_bytes()).results)
                lines.append(f"kvm-nested: {arch}: ok: {n} records from an L2 guest under KVM "
                             f"(run {d.name}, nested)")
            else:
                status = 1
                lines.append(f"kvm-nested: {arch}: FAILED: {c.label()}: "
                             f"{one_line(st.get('reason') or res.reason, 300)} "
                             f"(run {d.name}; console {d / 'console.log'})")
    finally:
        conn.close()
    return status, lines


def _finish(run_dir: Path, cell: Cell, seed: int, l2_cmd: list[str], rig: dict, probe: dict,
            nested: dict, status: dict) -> dict:
    """provenance.json, qemu.cmd and status.json of one L2 run, judged as
    every run is (boot.judge_and_write)."""
    image, _, kdir, src = boot.kernel_paths(cell.arch, cell.variant)
    (run_dir / "qemu.cmd").write_text(shlex.join(l2_cmd) + "\n")
    prov = {"run_id": run_dir.name, "cell": boot.cell_provenance(cell), **rig,
            **provenance.kernel_state(kdir, src), **provenance.host_state(),
            "qemu_binary": l2_cmd[0], "qemu_version": nested["l1_qemu"] or "unknown",
            "qemu_cmd": l2_cmd, "accel": "kvm", "cpu_model": cell.cpu, "kvm_probe": probe,
            "overcommitted": cell.vcpus > nested["l1_vcpus"], "seed": seed, "pin_plan": None,
            "host": HOST, "nested": nested, "started_at": provenance.now(),
            "finished_at": provenance.now()}
    (run_dir / "provenance.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    status = dict(status, perf={"stat": None, "kvm_stat": None, "why": {
        "stat": "nested: perf stat would count L0's QEMU, which runs L1, not the L2 guest",
        "kvm_stat": "nested: L1 is a tiny kernel without tracepoints (CONFIG_TRACING off) and "
                    "its initramfs has no perf, so perf kvm stat cannot run inside L1"}})
    return boot.judge_and_write(run_dir, prov, status)


def add_arguments(ap) -> None:
    ap.add_argument("--arch", required=True, help=f"one of {', '.join(sorted(L1S))}")
    ap.add_argument("--cell", action="append", default=[],
                    help="an ARCH/kvm/host/VARIANT/WORKLOAD[:k=v,...]/VCPUS cell to boot in L2 "
                         "(repeatable; default: an atomics and an rwlock cell)")
    ap.add_argument("--db", default=None, help="results DB (default $RESULTS_DB or results/qrwbench.sqlite)")
    ap.add_argument("--runs", default=str(bench.RUNS), help="run directories (default build/runs)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per L2 boot (default 900)")
    ap.add_argument("--check", action="store_true",
                    help="only check ARCH and the cells, print the L2 kernels needed (ARCH-VARIANT ...)")


def run(args) -> int:
    cells = parse_cells(args.arch, args.cell)
    if args.timeout < 30:
        raise InputError(f"kvm-nested: --timeout {args.timeout} is too short: give at least 30 s")
    if args.check:
        print(" ".join(sorted({f"{c.arch}-{c.variant}" for c in cells}
                              | {f"{args.arch}-{boot.probe_cell(args.arch).variant}"})))
        return 0
    db = Path(args.db or store.default_db_path())
    bench.preflight(db, Path(args.runs))
    store.connect(db).close()
    status, lines = boot_nested(args.arch, cells, db, Path(args.runs), args.timeout)
    for line in lines:
        print(line)
    return status

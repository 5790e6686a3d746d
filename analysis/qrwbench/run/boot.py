"""One boot of a cell: its run directory prepared, the guest booted, the run
judged and written.

A run directory (docs/runs.md) holds the console, the exact QEMU command,
provenance.json and, written last, status.json. Whether a boot is ok is
decided by the store's import rules (results/rundir.py), so every boot
called ok becomes data. ``make bench`` boots its cells here one at a time
(executor.Local); a boot on another host (bench_remote.py) writes its run
directory from what came back, with the same provenance and verdict. The
KVM probe is one such boot of the rig's own guest.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
from pathlib import Path

from .. import matrix, outputs, vocab
from ..vocab import InputError
from ..cell import Cell
from ..results import rundir
from . import hostload, kvm, perf, provenance, qemu
from . import pin as pinmod

NOT_ASKED = {"usable": False, "reason": "not asked for", "booted": False}


def kernel_paths(arch: str, variant: str) -> tuple[Path, Path, Path, Path]:
    """(kernel image, initrd, kernel build dir, source tree) of a cell, checked to exist."""
    kdir = vocab.kernel_dir(arch, variant)
    image = kdir / vocab.build_arches()[arch].image
    initrd = vocab.initrd(arch, variant)
    if not (kdir / ".qrwbench-built").exists() or not image.exists():
        raise InputError(f"kernel {arch}-{variant} is not built: run 'make kernel ARCH={arch} VARIANT={variant}'")
    if not initrd.exists():
        raise InputError(f"initramfs {initrd} is missing: run 'make guests'")
    return image, initrd, kdir, vocab.kernel_src(variant)


def cell_provenance(cell: Cell) -> dict:
    """The ``cell`` entry of a run's provenance.json (local and remote boots)."""
    return {"arch": cell.arch, "accel": cell.accel, "cpu_model": cell.cpu,
            "vcpus": cell.vcpus, "kernel_variant": cell.variant,
            "workload": cell.workload, "params": cell.params_dict()}


def append_for(cell: Cell, seed: int) -> str:
    params = {"workload": cell.workload, "seed": seed, **cell.params_dict()}
    return " ".join(f"qrwbench.{k}={v}" for k, v in params.items())


def run_id(boot: matrix.Boot, rig: dict, nonce: str, pin: bool = False) -> str:
    """Stable per cell, boot, seed and rig state (so a re-run resumes); a pinned
    boot is another run than an unpinned one."""
    c = boot.cell
    ident = [c.key(), boot.index, boot.seed, rig["rig_commit"], rig["rig_diff_sha256"], nonce]
    h = hashlib.sha256(json.dumps(ident + (["pinned"] if pin else [])).encode()).hexdigest()[:12]
    wp = c.params_dict().get("write_pct")
    return (f"{h}-{c.arch}-{c.accel}-{c.cpu}-{c.variant}-{c.workload}"
            f"{'' if wp is None else f'-w{wp}'}-{c.vcpus}v-b{boot.index}")


def qemu_cmd(cell: Cell, seed: int, mem_mb: int, image, initrd, **host) -> list[str]:
    """The QEMU command line of one boot of ``cell``: what ``make bench`` runs
    here, and what ``make kvm-nested`` runs inside its L1 guest (``host``:
    that QEMU's binary, qemu.command's keywords)."""
    return qemu.command(cell.arch, cell.accel, cell.cpu, cell.vcpus, mem_mb, image, initrd,
                        append_for(cell, seed), **host)


def boot_one(cell: Cell, seed: int, run_dir: Path, timeout_s: int, mem_mb: int,
             kvm_probe: dict, extra: dict | None = None, kernel: tuple | None = None,
             pin: bool = False, wrap: list[str] | None = None) -> dict:
    """Boot one guest for `cell`, save everything in run_dir; return the status.

    `kernel` is (image, initrd, build dir, source tree); default: the rig's
    own build of the cell's arch and variant (kernel_paths). ``pin``: bind
    vCPU n to host CPU n mod the usable CPUs (pin.py; status["pinning"]).
    ``wrap``: run QEMU under this command prefix instead of perf stat
    (make perf: perf record)."""
    image, initrd, kdir, src = kernel or kernel_paths(cell.arch, cell.variant)
    cmd = qemu_cmd(cell, seed, mem_mb, image, initrd)
    pin_plan = pinmod.plan(cell.vcpus) if pin else None
    outputs.fresh_dir(run_dir, "run")       # an earlier run of ours there, or nothing
    prov = {"run_id": run_dir.name, "cell": cell_provenance(cell),
            **provenance.rig_state(), **provenance.kernel_state(kdir, src), **provenance.host_state(),
            "qemu_binary": cmd[0], "qemu_version": qemu.qemu_version(cmd[0]), "qemu_cmd": cmd,
            "accel": cell.accel, "cpu_model": cell.cpu, "kvm_probe": kvm_probe,
            "overcommitted": cell.vcpus > vocab.host_cpus(), "seed": seed,
            "pin_plan": pin_plan,
            "started_at": provenance.now(), **(extra or {})}
    (run_dir / "provenance.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    prefix, perf_note = (wrap, {"stat": "not run: QEMU ran under " + wrap[0] + " " + wrap[1]}) \
        if wrap else perf_prefix(cell, run_dir)
    before = hostload.mark()
    status = qemu.boot(prefix + cmd, run_dir, timeout_s, pin=pin_plan)
    status["host_load"] = hostload.between(before, hostload.mark(), vocab.host_cpus())
    status["perf"] = collect_perf(run_dir, perf_note)
    if pin and not status.get("pinning", {}).get("pinned") and status["status"] == "ok":
        status.update(status="failed", reason=f"asked to pin vCPUs: {status['pinning']['reason']}")
    prov["finished_at"] = provenance.now()
    prov["qemu_cmd"] = shlex.split((run_dir / "qemu.cmd").read_text())   # exactly what ran
    (run_dir / "provenance.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    return judge_and_write(run_dir, prov, status)


def judge_and_write(run_dir: Path, prov: dict, status: dict) -> dict:
    """A run's final status.json: the store's import rules decide, so `make
    bench` calls ok exactly the runs that become data (local and remote boots)."""
    text = (run_dir / "console.log").read_bytes()
    why, parsed = rundir.judge_run(prov, {"status": "ok"}, text)
    if status["status"] == "ok" and why:
        status.update(status="failed", reason=why)
    if status["status"] == "failed":
        status["console_tail"] = text[-2000:].decode("ascii", "replace").splitlines()[-15:]
        if parsed.refused_reason:
            status["refused_reason"] = parsed.refused_reason
    qemu.write_status(run_dir, status)
    return status


def perf_prefix(cell: Cell, run_dir: Path) -> tuple[list[str], dict]:
    """The perf commands to run QEMU under, and why any is missing. `perf stat`
    for every run unless QRWB_PERF=0; with KVM also `perf kvm stat record`."""
    if os.environ.get("QRWB_PERF", "1") == "0":
        return [], {"stat": "off (QRWB_PERF=0)"}
    prefix, note = [], {}
    ok, why = perf.usable("stat")
    if ok:
        prefix += perf.stat_prefix(run_dir / "perf.csv")
    else:
        note["stat"] = why
    if cell.accel == "kvm":
        ok, why = perf.usable("kvm")
        if ok:
            prefix += perf.kvm_stat_prefix(run_dir / "perf-kvm.data")
        else:
            note["kvm_stat"] = why
    else:
        note["kvm_stat"] = "not a KVM run"
    return prefix, note


def collect_perf(run_dir: Path, note: dict) -> dict:
    """{"stat": {event: ...} | None, "kvm_stat": {...} | None, "why": {...}}:
    what perf counted for the run (stored with it, shown in the report)."""
    out = {"stat": None, "kvm_stat": None, "why": dict(note)}
    csv = run_dir / "perf.csv"
    if csv.exists():
        try:
            out["stat"] = perf.parse_stat_csv(csv.read_text())
        except ValueError as e:
            out["why"]["stat"] = str(e)
    data = run_dir / "perf-kvm.data"
    if data.exists():
        import subprocess
        rep = subprocess.run(perf.kvm_stat_report_cmd(data), capture_output=True, text=True, check=False)
        (run_dir / "perf-kvm.txt").write_text(rep.stdout + rep.stderr)
        try:
            out["kvm_stat"] = perf.parse_kvm_stat_report(rep.stdout + rep.stderr)
        except ValueError as e:
            out["why"]["kvm_stat"] = str(e)
        data.unlink()       # the text report is kept; the raw trace can be large
    return out


# ------------------------------------------------------------- the KVM probe

def probe_cell(arch: str, variant: str = "acqrel") -> Cell:
    """The KVM probe's boot: the rig's own guest, one vCPU, an empty loop."""
    return Cell.boot(arch, "kvm", vocab.ARCHES[arch].kvm_cpu, variant, "atomics", 1,
                     {"duration_ms": 1, "ops": "empty", "reps": 1})


def probe_boot_verdict(st: dict) -> tuple[bool, str]:
    """(booted, why not) of a probe boot's status (judge_and_write's)."""
    tail = [l for l in st.get("console_tail", []) if "error" in l.lower()]
    return st["status"] == "ok", st.get("reason", "") + (f" ({tail[0].strip()})" if tail else "")


def kvm_probe_one(arch: str, variant: str = "acqrel") -> dict:
    """KVM verdict for ``arch`` guests: the static check, then one real boot of
    the rig's own guest (cached, kvm.probe)."""
    if platform.machine() not in vocab.ARCHES[arch].host_machine:
        return {"usable": False, "reason": kvm.static_check(arch)[1], "booted": False}

    def probe_boot():
        d = vocab.BUILD / f"kvm-probe-run-{arch}"
        st = boot_one(probe_cell(arch, variant), 1, d, 60, 256, {"usable": None, "reason": "probing"})
        return probe_boot_verdict(st)

    try:
        image = kernel_paths(arch, variant)[0]
    except InputError as e:
        return {"usable": False, "reason": str(e), "booted": False}
    return kvm.probe(arch, boot=probe_boot, kernel=image,
                     cache=kvm.CACHE.with_name(f"kvm-probe-{arch}.json"))

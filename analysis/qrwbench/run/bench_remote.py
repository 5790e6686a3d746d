"""`make bench HOSTS=...`: the executor that runs a bench's boots on other
hosts (:class:`Remote`, executor.py's interface). The boots of a batch run
as GNU parallel jobs (remote.py), and each finished job comes back into a
run directory and the store, as a local boot would (boot.boot_one)."""
from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import time
from pathlib import Path

from .. import matrix, outputs, vocab
from ..vocab import InputError
from ..cell import Cell
from ..results import store
from . import boot, provenance, qemu, remote
from .executor import Batch, Job, Progress

TSC_PLACEHOLDER = "@QRWB_TSC_KHZ@"


class Hosts:
    """The hosts of a distributed bench: probed once, files sent once."""

    def __init__(self, names: list[str], log=print):
        self.log = log
        self.hosts = [remote.probe(n) for n in names]
        if not any(h.ok for h in self.hosts):
            raise InputError("no host of HOSTS can run boots: "
                             + "; ".join(h.reason for h in self.hosts))
        for h in self.hosts:
            if h.ok:
                log(f"bench: host {h.name}: {h.machine}, {h.cpus} CPUs, {h.cpu_model}; "
                    f"QEMU {', '.join(sorted(h.qemu))}; KVM: {h.kvm or 'usable'}")
            else:
                log(f"bench: host {h.name} left out: {h.reason}")
        self.blobs: dict[str, Path] = {}
        self.sent: set[tuple[str, str]] = set()

    def able(self, cell: Cell) -> list[remote.Host]:
        return [h for h in self.hosts if not h.why_not_runnable(cell.arch, cell.accel)]

    def why_not(self, cell: Cell) -> str:
        return "; ".join(h.why_not_runnable(cell.arch, cell.accel) for h in self.hosts)

    def blob(self, path: Path) -> str:
        """The remote path of ``path`` (content addressed); sent by :meth:`send`."""
        sha = remote.sha256(path)
        self.blobs[sha] = path
        return remote.blob_path(sha)

    def send(self, hosts: list[remote.Host], jobs: Path) -> list[remote.Host]:
        """Every blob not yet on a host, once per host, and the batch's job
        scripts; the hosts that took them (one that cannot is left out from
        now on, with its reason)."""
        out = []
        for h in hosts:
            todo = {s: p for s, p in self.blobs.items() if (h.name, s) not in self.sent}
            t0 = time.monotonic()
            try:
                remote.push(h, todo, jobs)
            except InputError as e:
                h.ok, h.reason = False, str(e)
                self.log(f"bench: host {h.name} left out: {e}")
                continue
            self.sent |= {(h.name, s) for s in todo}
            if todo:
                mb = sum(p.stat().st_size for p in todo.values()) / 1e6
                self.log(f"bench: sent {len(todo)} files ({mb:.1f} MB) to {h.name} "
                         f"in {time.monotonic() - t0:.0f} s")
            out.append(h)
        return out


def job_for(hosts: Hosts, cell: Cell, seed: int, rid: str, timeout_s: int,
            mem_mb: int, kernel: tuple) -> tuple[str, list[str]]:
    """(job script, QEMU argv with the TSC placeholder) of one remote boot."""
    image, initrd = kernel[0], kernel[1]
    a = vocab.ARCHES[cell.arch]
    argv = qemu.command(cell.arch, cell.accel, cell.cpu, cell.vcpus, mem_mb,
                        hosts.blob(image), hosts.blob(initrd), boot.append_for(cell, seed),
                        binary=a.qemu, tsc_khz=TSC_PLACEHOLDER)
    argv += ["-name", f"guest=qrwbench:{rid}"]
    script = remote.job_script(argv, timeout_s)
    if a.tsc_khz:
        tsc = hosts.blob(qemu.tsc_tool())      # each host measures its own rate
        script = script.replace("exec timeout", f"tsc=$({shlex.quote(tsc)} 2>/dev/null) || tsc=\n"
                                "exec timeout", 1)
        # the placeholder sits inside the single-quoted -append argument
        script = script.replace(TSC_PLACEHOLDER, "'\"$tsc\"'")
    return script, argv


def finish(d: remote.Done, rid: str, rdir: Path, prov: dict, host: remote.Host | None,
           argv: list[str], script: str, conn) -> dict:
    """The run directory of a finished job, imported; returns its status."""
    outputs.fresh_dir(rdir, "run")
    (rdir / "qemu.cmd").write_text(shlex.join(argv) + "\n")
    (rdir / "job.sh").write_text(script)
    console = rdir / "console.log"
    if d.stdout.exists():
        shutil.copyfile(d.stdout, console)
    else:
        console.write_bytes(b"")
    err = d.stderr.read_text(errors="replace").strip() if d.stderr.exists() else ""
    prov = {**prov, **(host.state() if host else {"host": d.host}),
            "qemu_version": host.qemu.get(prov["cell"]["arch"], "unknown") if host else "unknown",
            "qemu_cmd": argv,
            "kvm_probe": {"usable": bool(host and not host.kvm), "reason": host.kvm if host else "",
                          "booted": False},
            "overcommitted": bool(host and prov["cell"]["vcpus"] > host.cpus),
            "remote": {"host": d.host, "exitval": d.exitval, "runtime_s": round(d.runtime_s, 3)},
            "started_at": provenance.iso(d.started), "finished_at": provenance.iso(d.started + d.runtime_s)}
    (rdir / "provenance.json").write_text(json.dumps(prov, indent=1, sort_keys=True) + "\n")
    status = {"status": "ok", "reason": "", "returncode": d.exitval, "timed_out": d.exitval == 124,
              "wall_s": round(d.runtime_s, 3), "host": d.host,
              "perf": {"stat": None, "kvm_stat": None,
                       "why": {"stat": f"not run: the boot ran on {d.host}"}}}
    if d.exitval == 255:
        status.update(status="failed", reason=f"not run: ssh to {d.host} failed on the last of "
                      f"its tries ({err.splitlines()[-1] if err else 'exit 255'})")
    elif d.exitval == 124:
        status.update(status="failed", reason=f"guest did not finish within the timeout on {d.host}; QEMU killed")
    elif d.exitval != 0:
        status.update(status="failed", reason=f"QEMU exited with status {d.exitval} on {d.host}"
                      + (f": {err.splitlines()[-1]}" if err else ""))
    status = boot.judge_and_write(rdir, prov, status)
    store.import_run(conn, rdir)
    return status


def run_boots(hosts: Hosts, todo: list[Job], m: matrix.Matrix, runs: Path, conn,
              rig: dict, on_done) -> None:
    """Run ``todo`` on the hosts able to; for each finished job
    ``on_done(job, status)``. Boots no host can run are reported as failed
    without a job."""
    groups: dict[tuple, list[Job]] = {}
    for job in todo:
        able = tuple(h.name for h in hosts.able(job.boot.cell))
        groups.setdefault(able, []).append(job)
    for able, items in groups.items():
        if not able:
            for job in items:
                on_done(job, {"status": "failed",
                              "reason": f"no host can run it: {hosts.why_not(job.boot.cell)}"})
            continue
        batch_hosts = [h for h in hosts.hosts if h.name in able]
        jobs, meta = {}, {}
        for job in items:
            b = job.boot
            kernel = boot.kernel_paths(b.cell.arch, b.cell.variant)
            script, argv = job_for(hosts, b.cell, b.seed, job.run_id, m.timeout_s, m.mem_mb, kernel)
            c = b.cell
            prov = {"run_id": job.run_id, "cell": boot.cell_provenance(c),
                    **rig, **provenance.kernel_state(kernel[2], kernel[3]),
                    "qemu_binary": argv[0], "accel": c.accel, "cpu_model": c.cpu,
                    "seed": b.seed, "pin_plan": None}
            jobs[job.run_id] = script
            meta[job.run_id] = (job, prov, argv, script)
        key = hashlib.sha256("".join(sorted(jobs)).encode()).hexdigest()[:12]
        workdir = runs / ".remote" / key
        outputs.fresh_dir(workdir, "remote-batch")
        batch_hosts = hosts.send(batch_hosts, remote.write_jobs(jobs, workdir))
        by_name = {h.name: h for h in hosts.hosts}

        def done(d: remote.Done):
            job, prov, argv, script = meta[d.job]
            st = finish(d, d.job, job.run_dir, prov, by_name.get(d.host), argv, script, conn)
            on_done(job, st)

        left = remote.run_batch(batch_hosts, jobs, workdir, done)
        why = ("GNU parallel ended before it" if batch_hosts else
               "no host could take it: " + "; ".join(h.reason for h in hosts.hosts if not h.ok))
        for rid in left:
            on_done(meta[rid][0], {"status": "failed", "reason": f"not run: {why}"})


class Remote:
    """Boots on the ssh hosts ``names``, a batch at a time as GNU parallel
    jobs, one job slot per host; each boot is announced as it finishes. A
    round runs whole, so the time budget is checked before it, against the
    mean boot of the bench so far."""

    def __init__(self, names: list[str], log=print):
        self.names, self.log = names, log
        self.m: matrix.Matrix | None = None
        self.hosts: Hosts | None = None

    def prepare(self, m: matrix.Matrix) -> dict:
        """Every host probed (the unreachable left out, with why); KVM per
        arch is usable when a host has it (the others run only TCG cells)."""
        if m.pin:
            raise InputError("pin = true pins vCPUs on this host: not with HOSTS")
        self.m, self.hosts = m, Hosts(self.names, self.log)
        verdicts = {}
        for arch in {t["arch"] for t in m.targets if t["accel"] == "kvm"}:
            why = [h.why_not_runnable(arch, "kvm") for h in self.hosts.hosts]
            verdicts[arch] = {"usable": "" in why, "booted": False,
                              "reason": "; ".join(w for w in why if w) or "usable"}
        return verdicts

    @property
    def width(self) -> int:
        return len([h for h in self.hosts.hosts if h.ok])

    def run(self, batch: Batch, progress: Progress) -> list:
        per_boot_s = batch.planned_at_s / max(1, progress.measured + progress.skipped)
        if batch.round and progress.over_budget(per_boot_s):
            return list(batch.boots)
        todo = [job for b in batch.boots if (job := progress.claim(b)) is not None]
        if not todo:
            return []
        print(f"{batch.name}: {len(todo)} boots on {self.width} hosts "
              f"(GNU parallel; its log: {progress.runs / '.remote'})", flush=True)
        before = progress.measured

        def finished(job: Job, st: dict) -> None:
            progress.record(job, st)
            n = progress.measured - before         # the n-th of the batch to end
            b = job.boot
            print(f"{batch.name} [{n}/{len(todo)}]{progress.eta(len(todo) - n)} {b.cell.label()} "
                  f"boot {b.index + 1} on {st.get('host', '-')}: {st['status']} "
                  f"(console: {job.run_dir / 'console.log'})", flush=True)

        run_boots(self.hosts, todo, self.m, progress.runs, progress.conn, progress.rig, finished)
        return []

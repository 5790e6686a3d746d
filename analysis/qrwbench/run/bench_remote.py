"""`make bench HOSTS=...`: the boots of a round as GNU parallel jobs on other
hosts (remote.py), and each finished job back into a run directory and the
store, as a local boot would be (bench.boot_one)."""
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
from . import provenance, qemu, remote

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
    from .bench import append_for
    image, initrd = kernel[0], kernel[1]
    a = vocab.ARCHES[cell.arch]
    argv = qemu.command(cell.arch, cell.accel, cell.cpu, cell.vcpus, mem_mb,
                        hosts.blob(image), hosts.blob(initrd), append_for(cell, seed),
                        binary=a.qemu, tsc_khz=TSC_PLACEHOLDER)
    argv += ["-name", f"guest=qrwbench:{rid}"]
    script = remote.job_script(argv, timeout_s)
    if cell.arch == "x86_64":
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
    from .bench import judge_and_write
    status = judge_and_write(rdir, prov, status)
    store.import_run(conn, rdir)
    return status


def run_boots(hosts: Hosts, todo: list[tuple], m: matrix.Matrix, runs: Path, conn,
              rig: dict, progress) -> None:
    """Run ``todo`` ([(boot, run id, tag)]) on the hosts able to; for each
    finished job ``progress(boot, run id, status)``. Boots no host can run
    are reported as failed without a job."""
    from .bench import cell_provenance, kernel_paths
    groups: dict[tuple, list] = {}
    for b, rid, tag in todo:
        able = tuple(h.name for h in hosts.able(b.cell))
        groups.setdefault(able, []).append((b, rid, tag))
    for able, items in groups.items():
        if not able:
            for b, rid, _ in items:
                progress(b, rid, {"status": "failed",
                                  "reason": f"no host can run it: {hosts.why_not(b.cell)}"})
            continue
        batch_hosts = [h for h in hosts.hosts if h.name in able]
        jobs, meta = {}, {}
        for b, rid, tag in items:
            kernel = kernel_paths(b.cell.arch, b.cell.variant)
            script, argv = job_for(hosts, b.cell, b.seed, rid, m.timeout_s, m.mem_mb, kernel)
            c = b.cell
            prov = {"run_id": rid, "cell": cell_provenance(c),
                    **rig, **provenance.kernel_state(kernel[2], kernel[3]),
                    "qemu_binary": argv[0], "accel": c.accel, "cpu_model": c.cpu,
                    "seed": b.seed, "pin_plan": None}
            jobs[rid] = script
            meta[rid] = (b, prov, argv, script)
        key = hashlib.sha256("".join(sorted(jobs)).encode()).hexdigest()[:12]
        workdir = runs / ".remote" / key
        outputs.fresh_dir(workdir, "remote-batch")
        batch_hosts = hosts.send(batch_hosts, remote.write_jobs(jobs, workdir))
        by_name = {h.name: h for h in hosts.hosts}

        def done(d: remote.Done):
            b, prov, argv, script = meta[d.job]
            st = finish(d, d.job, runs / d.job, prov, by_name.get(d.host), argv, script, conn)
            progress(b, d.job, st)

        left = remote.run_batch(batch_hosts, jobs, workdir, done)
        why = ("GNU parallel ended before it" if batch_hosts else
               "no host could take it: " + "; ".join(h.reason for h in hosts.hosts if not h.ok))
        for rid in left:
            progress(meta[rid][0], rid, {"status": "failed", "reason": f"not run: {why}"})

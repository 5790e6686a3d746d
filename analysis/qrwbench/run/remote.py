"""Several hosts: `make bench HOSTS=a,b` boots the matrix on other machines.

The engine is GNU parallel over ssh (``--sshlogin``, ``--retries``,
``--joblog``, ``--results``); nothing here schedules. A boot is
self-contained (kernel image, initramfs, QEMU command line), so:

1. :func:`probe` asks each host over ssh what it is (machine, CPU model,
   CPUs, QEMU binaries and versions, TSC rate, whether KVM could work). An
   unreachable host is left out with its reason, before any boot.
2. :func:`push` sends every file the boots need once per host, content
   addressed (``<remote dir>/blobs/<sha256>``, ``rsync --ignore-existing``),
   and the batch's job scripts (``<remote dir>/jobs/<run id>.sh``: one
   ``timeout ... qemu-system-...`` line each).
3. :func:`run_batch` runs GNU parallel with one job slot per host (one boot
   at a time on a host, as on the local host) and ``--retries`` so that a job
   whose host died or could not be reached runs on another host. Each job's
   console comes back as its stdout (``--results``); the joblog names the
   host that ran its last attempt. The coordinator imports each finished job
   while the others run, so a host that dies loses no completed run; a job
   that failed on every host it was tried on is reported as not run.

The remote directory is ``$QRWB_REMOTE_DIR`` (default ``.cache/qrwbench``,
relative to the login's home); ssh options come from the user's ssh
configuration, or ``$QRWB_SSH_CONFIG`` (a file given to ``ssh -F``).
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import vocab
from ..vocab import InputError
from ..results import store

HOST_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(@[A-Za-z0-9][A-Za-z0-9._-]*)?$")
PROBE_TIMEOUT_S = 30
PUSH_TIMEOUT_S = 600


def remote_dir() -> str:
    return os.environ.get("QRWB_REMOTE_DIR") or ".cache/qrwbench"


def parse_hosts(spec: str) -> list[str]:
    """``a,b,user@c`` -> names ssh understands (aliases of ~/.ssh/config or
    user@address); one-line errors for anything else."""
    names = [h.strip() for h in spec.split(",")]
    if not spec.strip() or not all(names):
        raise InputError(f"HOSTS {spec!r}: give ssh host names separated by commas, e.g. a,b,user@c")
    for h in names:
        if not HOST_RE.match(h):
            raise InputError(f"HOSTS: {h!r} is not an ssh host name "
                             "(letters, digits, '.', '_', '-', optionally user@)")
    if store.NESTED_HOST in names:
        raise InputError(f"HOSTS: {store.NESTED_HOST!r} is the host name of make kvm-nested's "
                         "runs: give the ssh host another name (an alias in ~/.ssh/config)")
    dup = sorted({h for h in names if names.count(h) > 1})
    if dup:
        raise InputError(f"HOSTS: {', '.join(dup)} given twice: each host runs one boot at a time")
    if not shutil.which("parallel") or not shutil.which("ssh") or not shutil.which("rsync"):
        raise InputError("HOSTS needs GNU parallel, ssh and rsync here: run 'make deps'")
    return names


def ssh_command() -> list[str]:
    cfg = os.environ.get("QRWB_SSH_CONFIG")
    return ["ssh", *(["-F", cfg] if cfg else []), "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3"]


@dataclass
class Host:
    name: str
    ok: bool = False
    reason: str = ""
    machine: str = ""
    cpu_model: str = ""
    cpus: int = 0
    kernel: str = ""
    qemu: dict = field(default_factory=dict)      # arch -> QEMU version line
    kvm: str = ""                                 # "" usable, else why not
    tsc_khz: int | None = None

    def why_not_runnable(self, arch: str, accel: str) -> str:
        """Why this host cannot boot arch/accel guests; '' when it can."""
        if not self.ok:
            return self.reason
        if arch not in self.qemu:
            return f"no {vocab.ARCHES[arch].qemu} on {self.name}"
        if accel == "kvm":
            if self.kvm:
                return self.kvm
            if self.machine not in vocab.ARCHES[arch].host_machine:
                return f"{self.name} is {self.machine}: cannot run {arch} under KVM"
        return ""

    def state(self) -> dict:
        """Provenance fields of a run on this host (as provenance.host_state)."""
        return {"host": self.name, "host_cpu_model": self.cpu_model, "host_cpus": self.cpus,
                "host_kernel": self.kernel}


_PROBE = r"""
echo "machine=$(uname -m)"
echo "kernel=$(uname -r)"
echo "cpus=$(nproc)"
echo "cpu=$(grep -m1 -E '^(model name|CPU part)' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
for q in %(qemus)s; do
  v=$($q --version 2>/dev/null | head -1) && echo "qemu:$q=$v"
done
if [ -d /sys/module/kvm_pvm ]; then echo "kvm=/dev/kvm is kvm_pvm (no VT-x/AMD-V): stock guests cannot boot"
elif [ ! -c /dev/kvm ]; then echo "kvm=no /dev/kvm"
elif [ ! -w /dev/kvm ]; then echo "kvm=/dev/kvm is not writable"
else echo "kvm="; fi
mkdir -p %(dir)s/blobs %(dir)s/jobs && echo "dir=ok"
"""


def probe(name: str) -> Host:
    """What ``name`` is and can run (one ssh call; never raises)."""
    h = Host(name)
    qemus = " ".join(a.qemu for a in vocab.ARCHES.values())
    script = _PROBE % {"qemus": qemus, "dir": shlex.quote(remote_dir())}
    try:
        r = subprocess.run([*ssh_command(), name, script], capture_output=True, text=True,
                           timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        h.reason = f"{name}: no answer over ssh within {PROBE_TIMEOUT_S} s"
        return h
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"ssh exited with status {r.returncode}"])[-1]
        h.reason = f"{name}: unreachable over ssh: {last}"
        return h
    kv = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
    h.machine, h.kernel = kv.get("machine", ""), kv.get("kernel", "")
    h.cpu_model, h.kvm = kv.get("cpu", ""), kv.get("kvm", "no answer")
    try:
        h.cpus = int(kv.get("cpus", "0"))
    except ValueError:
        h.cpus = 0
    for arch, a in vocab.ARCHES.items():
        if f"qemu:{a.qemu}" in kv:
            h.qemu[arch] = kv[f"qemu:{a.qemu}"]
    if kv.get("dir") != "ok":
        h.reason = f"{name}: cannot create {remote_dir()}/blobs there"
    elif not h.qemu:
        h.reason = f"{name}: no QEMU system emulator ({qemus})"
    else:
        h.ok = True
    return h


def sha256(path: Path) -> str:
    d = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            d.update(chunk)
    return d.hexdigest()


def blob_path(sha: str) -> str:
    return f"{remote_dir()}/blobs/{sha}"


def push(host: Host, blobs: dict[str, Path], jobs: Path | None = None) -> None:
    """Every file of ``blobs`` ({sha256: local path}) to the host's blob
    store, once (a blob already there has the same content by its name), and
    the job scripts in ``jobs``. Raises InputError with rsync's last line."""
    staging = None
    rsync = ["rsync", "-e", shlex.join(ssh_command()), "--ignore-existing", "-t"]
    try:
        if blobs:
            # a new directory of links named by content: one rsync for all blobs
            staging = Path(tempfile.mkdtemp(prefix="qrwb-push-"))
            for sha, p in blobs.items():
                (staging / sha).symlink_to(Path(p).resolve())
            _rsync([*rsync, "-r", "-L", f"{staging}/", f"{host.name}:{remote_dir()}/blobs/"], host)
        if jobs is not None:
            _rsync([*rsync, "-r", f"{jobs}/", f"{host.name}:{remote_dir()}/jobs/"], host)
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _rsync(cmd: list[str], host: Host) -> None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=PUSH_TIMEOUT_S,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InputError(f"{host.name}: sending files took over {PUSH_TIMEOUT_S} s") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"rsync exited with status {r.returncode}"])[-1]
        raise InputError(f"{host.name}: sending files failed: {last}")


def job_script(argv: list[str], timeout_s: int) -> str:
    """The remote side of one boot: QEMU under timeout, console on stdout."""
    return ("#!/bin/sh\n# qrwbench: one boot (make bench HOSTS=...)\n"
            f"exec timeout -k 10 {int(timeout_s)} {shlex.join(argv)} </dev/null\n")


@dataclass
class Done:
    """One finished job: the host of its last attempt and what came back."""
    job: str
    host: str
    exitval: int
    started: float
    runtime_s: float
    stdout: Path
    stderr: Path


def parallel_command(hosts: list[Host], jobs_file: Path, results: Path, joblog: Path,
                     retries: int) -> list[str]:
    cmd = ["parallel", "--will-cite", "--ssh", shlex.join(ssh_command()),
           "--retries", str(retries), "--joblog", str(joblog), "--results", str(results),
           "--arg-file", str(jobs_file)]
    for h in hosts:
        cmd += ["--sshlogin", f"1/{h.name}"]
    return cmd + [f"sh {shlex.quote(remote_dir())}/jobs/{{}}.sh"]


def read_joblog(joblog: Path, seen: set) -> list[tuple[str, dict]]:
    """New lines of a GNU parallel joblog: [(job, row)] (job = the argument)."""
    out = []
    try:
        lines = joblog.read_text().splitlines()
    except OSError:
        return out
    for line in lines[1:]:
        f = line.split("\t")
        if len(f) < 9 or not f[6].strip().lstrip("-").isdigit():
            continue            # a line still being written
        job = f[8].rsplit("/", 1)[-1].removesuffix(".sh")
        if job in seen:
            continue
        seen.add(job)
        out.append((job, {"host": f[1], "start": float(f[2]), "runtime": float(f[3]),
                          "exitval": int(f[6]), "signal": int(f[7])}))
    return out


def write_jobs(jobs: dict[str, str], workdir: Path) -> Path:
    """The job scripts ({job name: text}) as files to send (:func:`push`)."""
    d = workdir / "jobs"
    d.mkdir(parents=True, exist_ok=True)
    for name, text in jobs.items():
        (d / f"{name}.sh").write_text(text)
    return d


def run_batch(hosts: list[Host], jobs: dict[str, str], workdir: Path, on_done,
              *, retries: int | None = None, poll_s: float = 0.5) -> list[str]:
    """Run ``jobs`` ({job name: script text}, already sent to the hosts) on
    ``hosts`` with GNU parallel; call ``on_done(Done)`` for each job as it
    finishes. Returns the names of the jobs GNU parallel never finished."""
    if not jobs or not hosts:
        return list(jobs)
    jobs_file = workdir / "jobs.txt"
    jobs_file.write_text("".join(f"{n}\n" for n in jobs))
    results, joblog = workdir / "results", workdir / "joblog"   # workdir is new
    retries = retries or max(2, 2 * len(hosts))
    cmd = parallel_command(hosts, jobs_file, results, joblog, retries)
    (workdir / "parallel.cmd").write_text(shlex.join(cmd) + "\n")
    seen: set = set()
    with open(workdir / "parallel.log", "wb") as log:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            while True:
                finished = p.poll() is not None
                for job, row in read_joblog(joblog, seen):
                    d = results / "1" / job
                    on_done(Done(job, row["host"], row["exitval"] if not row["signal"] else
                                 128 + row["signal"], row["start"], row["runtime"],
                                 d / "stdout", d / "stderr"))
                if finished:
                    break
                time.sleep(poll_s)
        finally:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
    return [n for n in jobs if n not in seen]

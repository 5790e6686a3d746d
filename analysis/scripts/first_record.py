"""Usage: /usr/bin/python3 analysis/scripts/first_record.py (after make guests).

Boot-to-first-record: host wall time from QEMU spawn to the first
@@QRWB result line on the console, per arch/CPU model (5 boots each, 1 vCPU)."""
import subprocess, sys, time, statistics
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.run import bench, qemu
from qrwbench.cell import Cell
rows = []
for arch, cpu in [("x86_64", "max"), ("arm64", "max"), ("arm64", "cortex-a57")]:
    c = Cell.boot(arch, "tcg", cpu, "acqrel", "atomics", 1,
                    tuple(sorted({"ops": "atomic_add_return", "reps": 1, "duration_ms": 5}.items())))
    image, initrd, _, _ = bench.kernel_paths(arch, "acqrel")
    cmd = qemu.command(arch, "tcg", cpu, 1, 256, image, initrd, bench.append_for(c, 1))
    ts = []
    for i in range(5):
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        tbegin = tres = None
        for line in p.stdout:
            if tbegin is None and b'"type":"begin"' in line:
                tbegin = time.monotonic() - t0
            if b'"type":"result"' in line:
                tres = time.monotonic() - t0
                break
        p.kill(); p.wait()
        ts.append((tbegin, tres))
    print(arch, cpu, "begin s:", [round(a, 2) for a, _ in ts], "first result s:", [round(b, 2) for _, b in ts],
          "median first result", round(statistics.median(b for _, b in ts), 2))

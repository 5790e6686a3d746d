"""Usage: /usr/bin/python3 analysis/scripts/first_record.py (after make guests).

Boot-to-first-record: host wall time from QEMU spawn to the first
@@QRWB result line on the console, per arch/CPU model (5 boots each, 1 vCPU).
It takes no arguments; any is refused (one line on stderr, exit status 2)."""
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qrwbench.cell import Cell  # noqa: E402
from qrwbench.errors import QrwbenchError  # noqa: E402
from qrwbench.run import boot  # noqa: E402

TARGETS = [("x86_64", "max"), ("arm64", "max"), ("arm64", "cortex-a57")]
BOOTS = 5
PARAMS = {"ops": "atomic_add_return", "reps": 1, "duration_ms": 5}


def command(arch: str, cpu: str) -> list[str]:
    """The QEMU command of one boot of the acqrel kernel: ``make bench``'s own
    (boot.qemu_cmd), seed 1, 256 MB."""
    c = Cell.boot(arch, "tcg", cpu, "acqrel", "atomics", 1, PARAMS)
    image, initrd, _kdir, _src = boot.kernel_paths(arch, "acqrel")
    return boot.qemu_cmd(c, 1, 256, image, initrd)


def time_boot(cmd: list[str]) -> tuple:
    """(seconds to the begin record, seconds to the first result) of one boot."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    tbegin = tres = None
    for line in p.stdout:
        if tbegin is None and b'"type":"begin"' in line:
            tbegin = time.monotonic() - t0
        if b'"type":"result"' in line:
            tres = time.monotonic() - t0
            break
    p.kill()
    p.wait()
    return tbegin, tres


def main(argv) -> int:
    name = Path(sys.argv[0]).name
    if argv:
        print(f"{name}: error: takes no arguments, got {argv[0]!r} "
              f"({__doc__.strip().splitlines()[0]})", file=sys.stderr)
        return 2
    try:
        cmds = {t: command(*t) for t in TARGETS}      # every kernel checked before a boot
    except QrwbenchError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    for (arch, cpu), cmd in cmds.items():
        ts = [time_boot(cmd) for _ in range(BOOTS)]
        print(arch, cpu, "begin s:", [round(a, 2) for a, _ in ts],
              "first result s:", [round(b, 2) for _, b in ts],
              "median first result", round(statistics.median(b for _, b in ts), 2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""faults.scan: the rcutorture parse-console families are found, benign boot lines are not."""

import pytest

import synth
from qrwbench.results import faults

FAULT_LINES = {
    "panic": "[    3.1] Kernel panic - not syncing: Fatal exception",
    "oops": "[    3.1] Oops: general protection fault, probably for non-canonical address",
    "arm64 oops": "[    3.1] Internal error: Oops: 0000000096000005 [#1] SMP",
    "bug": "[    3.1] BUG: kernel NULL pointer dereference, address: 0000000000000008",
    "kernel bug at": "[    3.1] kernel BUG at kernel/locking/qrwlock.c:42!",
    "warning": "[    3.1] WARNING: CPU: 1 PID: 80 at kernel/locking/lockdep.c:232 x+0x1/0x2",
    "call trace": "[    3.1] Call Trace:",
    "arm64 call trace": "[    3.1] Call trace:",
    "recursive locking": "[    3.1] WARNING: possible recursive locking detected",
    "inconsistent": "[    3.1] inconsistent lock state",
    "circular": "[    3.1] WARNING: possible circular locking dependency detected",
    "soft lockup": "[   30.1] watchdog: BUG: soft lockup - CPU#0 stuck for 26s!",
    "hard lockup": "[   30.1] Watchdog detected hard LOCKUP on cpu 1",
    "rcu self-detected": "[   30.1] rcu: INFO: rcu_sched self-detected stall on CPU",
    "rcu detected": "[   30.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
    "badness": "[    3.1] Badness at kernel/foo.c:12",
    "gpf": "[    3.1] general protection fault: 0000 [#1] SMP",
    "unable to handle": "[    3.1] Unable to handle kernel paging request at virtual address 0",
    "hung task": "[  120.0] INFO: task qrwbench:81 blocked for more than 120 seconds.",
}

BENIGN = synth.BOOT_LINES + synth.END_LINES + [
    "[    0.0] Kernel command line: console=ttyS0 panic=-1 oops=panic",
    "[    0.1] Spectre V2 : WARNING: Unprivileged eBPF is enabled with eIBRS on",
    "[    0.2] ODEBUG: selftest passed",
    "[    1.0] qrwbench: 12 measurements, 2 threads",
    "[    1.0] debug_bugverbose enabled",
    # ppc64le under QEMU pseries with VOF: a blank NVRAM (issue 30)
    "[    0.306451] WARNING: nvram corruption detected: 0-length partition\r",
]


@pytest.mark.parametrize("name", sorted(FAULT_LINES))
def test_fault_is_found(name):
    text = "\n".join(BENIGN[:3] + [FAULT_LINES[name]] + BENIGN[3:])
    assert faults.scan(text) == [FAULT_LINES[name].strip()]


def test_benign_boot_lines_are_not_faults():
    assert faults.scan("\n".join(BENIGN)) == []


def test_first_lines_in_order_and_limited():
    lines = [FAULT_LINES["warning"], FAULT_LINES["call trace"]] * 20
    found = faults.scan("\n".join(lines), limit=5)
    assert found == [l.strip() for l in lines[:5]]


def test_bytes_with_junk_are_scanned():
    data = b"\xff\xfe garbage\n" + FAULT_LINES["panic"].encode() + b"\n"
    assert faults.scan(data) == [FAULT_LINES["panic"]]


def test_selftest_pass_line():
    assert faults.selftest_passed("\n".join(synth.BOOT_LINES))
    assert faults.selftest_passed("[ 0.1] atomic64_test: passed\n")
    without = [l for l in synth.BOOT_LINES if "atomic64_test" not in l]
    assert not faults.selftest_passed("\n".join(without))
    assert not faults.selftest_passed("atomic64_test: passed\natomic64_test: failed\n")


def test_the_blank_nvram_line_excuses_no_other_warning():
    """Only that exact line is benign: a WARNING after it, or one that
    merely mentions nvram, is still a fault."""
    other = "[    3.1] WARNING: nvram partition checksum was 00, should be 70!"
    assert faults.scan(other) == [other]
    tail = "[    3.1] WARNING: nvram corruption detected: 0-length partition at CPU 1"
    assert faults.scan(tail) == [tail]

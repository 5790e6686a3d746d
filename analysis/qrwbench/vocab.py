"""What can be run: arches, accelerators, CPU models, kernel variants, workloads.

The kernel arches and variants are read from kernel/configs/ (one fragment per
arch, one `variant-<name>.config` per variant) so that the Makefile, the build
scripts and this module share one list. Per-arch QEMU facts live in ARCHES
(the arches a matrix may boot); the build facts of every arch (cross
compiler, image, Debian packages) in kernel/scripts/arch.sh's table, read by
build_arches().
"""
from __future__ import annotations

import functools
import os
import platform
import re
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

from . import moduletables
from .errors import QrwbenchError

TOP = Path(__file__).resolve().parents[2]
CONFIGS = TOP / "kernel" / "configs"
BUILD = TOP / "build"       # everything the rig builds and runs (make clean removes parts)


# ------------------------------------------------------------ build paths

def kernel_dir(arch: str, variant: str) -> Path:
    """The kernel build directory of ``arch``-``variant`` (kernel/scripts/build-kernel.sh)."""
    return BUILD / "kernels" / f"{arch}-{variant}"


def module_ko(arch: str, variant: str) -> Path:
    """The benchmark module built against it (bench/build-module.sh)."""
    return BUILD / "modules" / f"{arch}-{variant}" / "qrwbench.ko"


def initrd(arch: str, variant: str) -> Path:
    """Its initramfs (guest/mkinitrd.sh)."""
    return BUILD / "initrd" / f"{arch}-{variant}.cpio"


def kernel_src(variant: str) -> Path:
    """The tree the rig's own build of ``variant`` comes from (kernel/scripts/prepare-tree.sh)."""
    return BUILD / "src" / ("linux-unpatched" if variant == "unpatched" else "linux")


def built_kernels() -> list[Path]:
    """Every finished kernel build directory."""
    return sorted(p for p in (BUILD / "kernels").glob("*-*") if (p / ".qrwbench-built").exists())


# Bad user input: one type for the whole package (see errors.py).
InputError = QrwbenchError


@dataclass(frozen=True)
class Arch:
    """One bootable arch: what QEMU needs to boot its kernel (run/qemu.py
    builds the command line from these fields alone; no module asks about an
    arch by its name). Adding an arch is one entry here, its row in
    kernel/scripts/arch.sh and its fragment kernel/configs/<name>.config."""
    name: str               # kernel ARCH and build directory prefix
    qemu: str               # QEMU system binary
    qemu_package: str       # Debian package that provides it
    machine: str            # -M value
    console: str            # guest console device
    cpu_models: tuple       # CPU models for TCG; the first is the default
    kvm_cpu: str            # -cpu under KVM
    host_machine: tuple     # platform.machine() values that can run it under KVM
    extra_append: str       # arch-specific kernel command line
    module_area: tuple      # (first, last) virtual address where modules load (no KASLR)
    # (the kernel image's path is arch.sh's: build_arches()[name].image)
    machine_opts: str = ""  # appended to -M (",k=v,..."), every accel
    kvm_machine_opts: str = ""  # appended to -M under KVM only
    qemu_args: tuple = ()   # more QEMU arguments (firmware, ...)
    tsc_khz: bool = False   # the command line needs the host's TSC rate (tsc_early_khz=)


ARCHES = {
    "x86_64": Arch(
        name="x86_64", qemu="qemu-system-x86_64", qemu_package="qemu-system-x86",
        machine="microvm", console="ttyS0",
        cpu_models=("max",), kvm_cpu="host", host_machine=("x86_64", "amd64"),
        extra_append="reboot=t",
        # MODULES_VADDR..MODULES_END (the kernel image sits below it)
        module_area=(0xffffffffa0000000, 0xfffffffffeffffff),
        # microvm boots vmlinux through PVH; no PCI, no firmware ROMs.
        machine_opts=",x-option-roms=off",
        # microvm has no timer to calibrate the TSC against: without
        # tsc_early_khz the guest clock is jiffies (4 ms steps)
        tsc_khz=True),
    "arm64": Arch(
        name="arm64", qemu="qemu-system-aarch64", qemu_package="qemu-system-arm",
        machine="virt", console="ttyAMA0",
        cpu_models=("max", "cortex-a57"), kvm_cpu="host", host_machine=("aarch64", "arm64"),
        extra_append="",
        # MODULES_VADDR = _PAGE_END(VA_BITS_MIN = 48), 2 GiB below the image
        module_area=(0xffff800000000000, 0xffff80007fffffff),
        # the host's GIC under KVM (v3 on most arm64 servers; virt defaults to v2)
        kvm_machine_opts=",gic-version=max"),
    "ppc64le": Arch(
        name="ppc64le", qemu="qemu-system-ppc64", qemu_package="qemu-system-ppc",
        # pseries with QEMU's own small Open Firmware (VOF) instead of SLOF:
        # it enters vmlinux's prom_init directly (PPC_OF_BOOT_TRAMPOLINE)
        machine="pseries", machine_opts=",x-vof=on", console="hvc0",
        cpu_models=("power9", "power10"), kvm_cpu="host", host_machine=("ppc64le",),
        extra_append="",
        # no MODULES_VADDR on Book3S-64: modules load into the vmalloc area
        # (arch/powerpc/mm/mem.c execmem_arch_setup), VMALLOC_START under the
        # radix MMU (POWER9/10) 0xc008000000000000, 2^49 bytes
        # (book3s/64/radix.h RADIX_VMALLOC_START, RADIX_VMALLOC_SIZE)
        module_area=(0xc008000000000000, 0xc009ffffffffffff)),
    "riscv64": Arch(
        name="riscv64", qemu="qemu-system-riscv64", qemu_package="qemu-system-misc",
        # S-mode kernel under OpenSBI (qemu-system-data's fw_dynamic)
        machine="virt", qemu_args=("-bios", "default"), console="ttyS0",
        cpu_models=("rv64",), kvm_cpu="host", host_machine=("riscv64",),
        extra_append="",
        # MODULES_VADDR = PFN_ALIGN(_end) - 2 GiB .. MODULES_END = PFN_ALIGN(_start)
        # (riscv/include/asm/pgtable.h, 64-bit), the image linked at
        # KERNEL_LINK_ADDR 0xffffffff80000000 (no RELOCATABLE): this range holds it
        module_area=(0xffffffff00000000, 0xffffffff7fffffff)),
}

ACCELS = ("tcg", "kvm")
# The workloads: WORKLOAD_TABLE, below the module's tables it reads.


# The module's tables: moduletables.py reads them; here under their old names.
OPS_DEF = moduletables.OPS_DEF
op_rows = moduletables.op_rows
op_orderings = moduletables.op_orderings
IMPLS_DEF = moduletables.IMPLS_DEF
LockImpl = moduletables.LockImpl
lock_impls = moduletables.lock_impls
module_lock_variants = moduletables.module_lock_variants
rwlock_variants = moduletables.rwlock_variants
PARAMS_DEF = moduletables.PARAMS_DEF
module_params = moduletables.module_params
MODULE_H = moduletables.MODULE_H
loop_unroll = moduletables.loop_unroll
LITMUS_DEF = moduletables.LITMUS_DEF
Litmus = moduletables.Litmus
litmus_tests = moduletables.litmus_tests


# What an ordering's name promises, after the kernel's atomic_t naming (no
# suffix: fully ordered, _acquire, _release, _relaxed): an acquire, a release,
# a full barrier. The audit checks compiled code against it.
ORDERING_PROMISE = {"full": frozenset({"acquire", "release", "barrier"}),
                    "acquire": frozenset({"acquire"}), "release": frozenset({"release"}),
                    "relaxed": frozenset()}
# Variants from the most to the least ordered (plots and tables list them so):
# the kernel variants (kernel/configs/variant-*.config) and the orderings.
VARIANT_ORDER = ("allfull", "full", "acqrel", "acquire", "release", "relaxed", "unpatched")


def variant_rank(v: str) -> tuple[int, str]:
    """Sort key: VARIANT_ORDER first (most ordered first), others after, by name."""
    return (VARIANT_ORDER.index(v) if v in VARIANT_ORDER else len(VARIANT_ORDER), v)


def orderings() -> tuple[str, ...]:
    """Every ordering an atomics op has, in table order (full, acquire,
    release, relaxed): the variants of the atomics workload."""
    return tuple(dict.fromkeys(o for _op, o, _stmt in op_rows()))


# ------------------------------------------------------------ workloads

# The record types a workload's boot prints per measurement (docs/records.md).
RESULT_RECORD = "result"        # one sample each
LITMUS_RECORD = "litmus"        # a canary's outcome (qrwb_litmus.def)


@dataclass(frozen=True)
class Workload:
    """One workload as the host sees it: a row of the module's workload table
    qrwb_workloads[] (bench/module: one file qrwb_<name>.c each) and what its
    records hold. Other modules ask the record (``workload(name).kernel_ref``),
    never the name (tests/top/test_vocabulary.py)."""
    name: str               # what workload= takes: the row of the module's table
    measures: str           # one line: what it measures
    use: str                # matrix: a matrix's [[workload]], compared and reported;
                            # module: make torture's own boots only; test: a matrix
                            # needs [run] test_workloads = true
    record: str = RESULT_RECORD     # the type of the records it prints per measurement
    fields: tuple = ()      # the keys its records add to a result record's (its own
                            # record type: all of them), in the order records.py checks
    result_params: tuple = ()   # of those, the parameters each result repeats: part of
                            # the sample's params (write_pct: the write-fraction sweep)
    own_params: tuple = ()  # the module parameters only it reads (qrwb_params.def's
                            # "<name>: ..." rows); matrix.py checks them as the module does
    op: str = ""            # the one op every result of it names ("": no one op)
    op_table: bool = False  # a result's op is a row of qrwb_ops.def, its variant one of
                            # that op's orderings
    variants: Callable[[], tuple] = tuple   # what a result's variant may be unless its
                            # impl is kernel (read from the module's tables when called)
    impls: tuple = ()       # what a result's impl may be
    placements: tuple = ()  # what a result's placement may be
    baseline: str = ""      # the variant its others are compared with ("": none)
    kernel_ref: str = ""    # the impl, measured in the same boots as impl kernel, whose
                            # code is the module's own: kernel builds are judged on the
                            # kernel/<ref> ratio (run/ktree.py), and the report shows
                            # whether both agree ("": none)
    heading: str = ""       # its rows' heading in the report's summary, after "<name>: "
    emu_params: dict = field(default_factory=dict)  # the emulator audit's brief logged
                            # boot, so that each timed loop runs once ({}: not audited)
    program: bool = False   # a user program in the guest's init (a row of the module's
                            # qrwb_programs.def, guest/prog_<name>.c), not a module loop
    kernel_needs: tuple = ()    # the kernel options (CONFIG_...=y) it cannot run without:
                            # make bench refuses a cell whose kernel lacks one

    @property
    def test_only(self) -> bool:
        return self.use == "test"

    @property
    def several_impls(self) -> bool:
        """Its results name more than one impl (summarized one row per impl)."""
        return len(self.impls) > 1


_MEASURED = (
    Workload(
        name="atomics",
        measures="ns per op of each atomic op and barrier of qrwb_ops.def in each of its "
                 "orderings, in a timed loop per op, ordering and copy",
        use="matrix", own_params=("ops", "placement", "copies"), op_table=True,
        variants=orderings, impls=("inline",), placements=("shared", "percpu"),
        baseline="full", heading="op (impl, placement)",
        # every op loop runs once, briefly: enough for QEMU to translate it
        emu_params={"reps": 1, "duration_ms": 2, "warmup_reps": 0, "placement": "shared"}),
    Workload(
        name="rwlock",
        measures="lock throughput under a read/write mix: the kernel's rwlock_t and the "
                 "module's qrwlock copies of qrwb_impls.def",
        use="matrix",
        fields=("reads", "writes", "per_thread_reads", "per_thread_writes", "violations",
                "write_pct", "nlocks", "cs_work", "think_work", "cs_lines"),
        result_params=("write_pct", "nlocks", "cs_work", "think_work", "cs_lines"),
        own_params=("impl", "write_pct", "nlocks", "cs_work", "think_work", "cs_lines",
                    "nreaders", "nwriters", "check_exclusion"),
        op="rwlock", variants=rwlock_variants, impls=("kernel", "module"),
        placements=("shared",), baseline="acqrel", kernel_ref="module",
        heading="lock path (impl, placement)",
        # reads and writes, so both slow paths may run (impl=module: the copies)
        emu_params={"reps": 1, "duration_ms": 20, "warmup_reps": 0, "impl": "module",
                    "write_pct": 50, "cs_work": 0, "think_work": 0}),
)


def _program(name: str, measures: str, own_params: tuple = (), rw: bool = False) -> Workload:
    """A program workload (guest/prog_<name>.c): its windows are impl kernel (the
    kernel build's own rwlock paths, driven through system calls), and the module's
    acqrel qrwlock copy, measured in the same boots, is its in-boot reference."""
    return Workload(
        name=name, measures=measures, use="matrix", program=True,
        fields=("reads", "writes", "per_thread_reads", "per_thread_writes") if rw else (),
        own_params=own_params, op=name, variants=rwlock_variants, impls=("kernel", "module"),
        placements=("shared",), baseline="acqrel", kernel_ref="module",
        heading="program (impl, placement)",
        # every worker is a forked process (fork() is -EINVAL without an MMU)
        kernel_needs=("CONFIG_MMU", "CONFIG_PROC_FS"))


# Programs that drive kernel rwlocks, in the order of the module's qrwb_programs.def
_PROGRAMS = (
    _program("forkwait", "fork -> child _exit -> waitpid cycles per second, one process per "
             "vCPU: tasklist_lock (write: copy_process, exit_notify, release_task; read: wait)"),
    _program("pgrp", "getpriority(PRIO_PGRP) calls (tasklist_lock read side) with "
             "pgrp_write_pct % setpgid() moves (write side), per second, one process per vCPU",
             own_params=("pgrp_write_pct",), rw=True),
    _program("sigio", "O_ASYNC pipe write + read + SIGIO taken (f_owner lock read side, "
             "send_sigio) with sigio_setown_pct % F_SETOWN (write side), per second, "
             "one process per vCPU", own_params=("sigio_setown_pct",), rw=True),
)


def _any_measured(attr: str) -> tuple:
    return tuple(dict.fromkeys(x for w in _MEASURED for x in getattr(w, attr)))


# Every workload, in the order of the module's table.
WORKLOAD_TABLE = {w.name: w for w in _MEASURED + (
    Workload(
        name="litmus",
        measures="weak-memory canaries of qrwb_litmus.def: how often each test's "
                 "reordered outcome shows (make torture)",
        use="module", record=LITMUS_RECORD,
        fields=("test", "lkmm", "want", "iters", "ns", "counts"),
        own_params=("litmus_iters",)),
    # never finishes: module_init sleeps (the launcher's timeout test); it
    # prints no results, so it may name anything a measured workload prints
    Workload(
        name="hang",
        measures="nothing: module_init never returns (the launcher's timeout test)",
        use="test",
        variants=lambda: tuple(dict.fromkeys(v for w in _MEASURED for v in w.variants())),
        impls=_any_measured("impls"), placements=_any_measured("placements")),
) + _PROGRAMS}

# The table by use, and the per-workload values many callers read.
WORKLOADS = tuple(n for n, w in WORKLOAD_TABLE.items() if w.use == "matrix")
TEST_WORKLOADS = tuple(n for n, w in WORKLOAD_TABLE.items() if w.use == "test")
MODULE_WORKLOADS = tuple(n for n, w in WORKLOAD_TABLE.items() if w.use == "module")
BASELINES = {n: WORKLOAD_TABLE[n].baseline for n in WORKLOADS}
RESULT_IMPLS = {n: WORKLOAD_TABLE[n].impls for n in WORKLOADS}


def workload(name: str) -> Workload:
    """The record of workload ``name`` (an :class:`InputError` for any other)."""
    wl = WORKLOAD_TABLE.get(name)
    return wl if wl is not None else WORKLOAD_TABLE[one_of("workload", name, tuple(WORKLOAD_TABLE))]


def workload_of_op(op: str) -> Workload | None:
    """The workload every result of which names ``op`` (its one op), if any."""
    return next((w for w in WORKLOAD_TABLE.values() if w.op and w.op == op), None)


@functools.lru_cache(maxsize=None)
def _kernel_variants() -> tuple[str, ...]:
    return tuple(sorted(p.name[len("variant-"):-len(".config")] for p in CONFIGS.glob("variant-*.config")))


def kernel_variants() -> list[str]:
    """Kernel variants, from kernel/configs/variant-*.config (the one list)."""
    return list(_kernel_variants())


@functools.lru_cache(maxsize=None)
def variant_recompiles_module(variant: str) -> bool:
    """The variant builds every RMW atomic fully ordered (its fragment sets
    CONFIG_ATOMICS_FULLY_ORDERED, kernel/patches/0003): the module, compiled
    against that kernel, then has different code too, so its acqrel qrwlock
    copy is no in-boot reference across kernels (it is elsewhere: identical
    code in every kernel)."""
    try:
        return "CONFIG_ATOMICS_FULLY_ORDERED=y" in (
            CONFIGS / f"variant-{variant}.config").read_text().splitlines()
    except OSError:
        return False


ARCH_SH = TOP / "kernel" / "scripts" / "arch.sh"


@dataclass(frozen=True)
class BuildArch:
    """One row of the build scripts' arch table (kernel/scripts/arch.sh)."""
    name: str               # the rig's name: kernel/configs/<name>.config, build directory prefix
    karch: str              # kernel ARCH=
    cross: str              # CROSS_COMPILE= ("": the host's tools)
    image: str              # kernel image, relative to the kernel build directory
    qrw_needs: str          # the option without which it does not use qrwlock ("": none)
    packages: tuple         # Debian packages of its compiler and binutils

    @property
    def objdump(self) -> str:
        return f"{self.cross}objdump"


@functools.lru_cache(maxsize=None)
def build_arches() -> dict[str, BuildArch]:
    """{name: BuildArch} of every arch the build scripts know: the rows of
    the table in kernel/scripts/arch.sh (the one list; adding an arch is a
    row there, its fragment kernel/configs/<arch>.config or, objects for
    the audit only, kernel/configs/audit/<arch>.config, and, to boot it, an
    entry in ARCHES)."""
    m = re.search(r"<<'EOF'\n(.*?)\nEOF\n", ARCH_SH.read_text(), re.S)
    if not m:
        raise InputError(f"{ARCH_SH}: no arch table (cat <<'EOF' ... EOF)")
    out = {}
    for line in m.group(1).splitlines():
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if len(f) < 6:
            raise InputError(f"{ARCH_SH}: malformed arch row '{line}': valid is "
                             "'arch karch cross image qrw_needs package...'")
        f = ["" if v == "-" else v for v in f]      # "-": none
        out[f[0]] = BuildArch(f[0], f[1], f[2], f[3], f[4], tuple(f[5:]))
    return out


def audit_arches() -> list[str]:
    """The arches the per-arch ordering audit builds objects for (make audit):
    every row of the arch table with a fragment, kernel/configs/<arch>.config
    (kernels too) or kernel/configs/audit/<arch>.config (objects only)."""
    have = {p.stem for p in CONFIGS.glob("*.config")} | {p.stem for p in CONFIGS.glob("audit/*.config")}
    return sorted(a for a in build_arches() if a in have)


def kernel_arches() -> list[str]:
    """The arches a matrix may name: a kernel fragment and QEMU facts (ARCHES)."""
    names = [p.stem for p in CONFIGS.glob("*.config")
             if p.stem != "base" and not p.stem.startswith("variant-")]
    return sorted(n for n in names if n in ARCHES)


def check_arch(name: str) -> Arch:
    return ARCHES[one_of("arch", name, kernel_arches())]


def one_of(kind: str, name: str, valid) -> str:
    """``name`` if it is one of ``valid``, else the one-line error naming both."""
    if name not in valid:
        raise InputError(f"unknown {kind} '{name}': valid are {', '.join(valid)}")
    return name


def check_variant(name: str) -> str:
    return one_of("variant", name, kernel_variants())


# "# qrwbench-arches: a b" in a variant's fragment: only these arches offer it
_VARIANT_ARCHES = re.compile(r"^# qrwbench-arches:(.*)$", re.M)


@functools.lru_cache(maxsize=None)
def variant_arches(variant: str) -> tuple[str, ...] | None:
    """The arches kernel/configs/variant-<variant>.config is offered on (its
    "# qrwbench-arches:" line; allfull: where patch 0003 offers
    CONFIG_ATOMICS_FULLY_ORDERED), or None: every arch."""
    try:
        m = _VARIANT_ARCHES.search((CONFIGS / f"variant-{variant}.config").read_text())
    except OSError:
        return None
    return tuple(m.group(1).split()) if m else None


def check_variant_arch(arch: str, variant: str) -> str:
    """``variant`` if ``arch`` offers it, else the one-line error naming both."""
    only = variant_arches(variant)
    if only is not None and arch not in only:
        raise InputError(f"variant '{variant}' is not offered on {arch}: valid arches are "
                         f"{', '.join(only)} (kernel/configs/variant-{variant}.config)")
    return variant


def check_accel(name: str) -> str:
    return one_of("accel", name, ACCELS)


def check_cpu_model(arch: Arch, accel: str, model: str) -> str:
    valid = (arch.kvm_cpu,) if accel == "kvm" else arch.cpu_models
    if model not in valid:
        raise InputError(f"unknown CPU model '{model}' for {arch.name} under {accel}: valid are {', '.join(valid)}")
    return model


def check_workload(name: str) -> str:
    return one_of("workload", name, WORKLOADS)


def kernel_config(arch: str, variant: str) -> dict[str, str] | None:
    """{option: value} of a built kernel's .config (set options only), or None
    when it has none."""
    try:
        text = (kernel_dir(arch, variant) / ".config").read_text()
    except OSError:
        return None
    return dict(line.split("=", 1) for line in text.splitlines()
                if line.startswith("CONFIG_") and "=" in line)


def check_kernel_needs(workload_name: str, arch: str, variant: str) -> None:
    """An :class:`InputError` when the kernel ``arch``-``variant`` lacks an option
    the workload cannot run without (Workload.kernel_needs); nothing when it has
    them all or has no .config to read."""
    needs = workload(workload_name).kernel_needs
    cfg = kernel_config(arch, variant) if needs else None
    if cfg is None:
        return
    lacks = [o for o in needs if cfg.get(o) != "y"]
    if lacks:
        raise InputError(f"workload {workload_name} needs {', '.join(lacks)}=y, which kernel "
                         f"{arch}-{variant} ({kernel_dir(arch, variant)}/.config) lacks: valid "
                         f"are kernels with {', '.join(needs)}")


def host_cpus() -> int:
    """CPUs this process may run on (what QEMU's vCPU threads can use)."""
    return len(os.sched_getaffinity(0))


def host_cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "CPU part")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nr_cpus(arch: str, variant: str) -> int | None:
    """CONFIG_NR_CPUS of a built kernel, or None when it is not configured."""
    cfg = kernel_dir(arch, variant) / ".config"
    try:
        for line in cfg.read_text().splitlines():
            if line.startswith("CONFIG_NR_CPUS="):
                return int(line.split("=", 1)[1])
    except OSError:
        return None
    return None


def host_mem_mb() -> int:
    """MemTotal of this host in MiB (an upper bound for a guest's memory)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20

"""Kernel configs: each build has exactly the requested qrwlock ordering, and
a requested option that Kconfig drops is an error naming it."""
import shutil
import subprocess

import pytest

from conftest import TOP, kernel_dir, kernel_tree

ORDERINGS = {"acqrel": "ACQREL", "full": "FULL", "relaxed": "RELAXED", "allfull": "ACQREL"}
SCRIPT = TOP / "kernel" / "scripts" / "build-kernel.sh"


@pytest.mark.kernel
@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
@pytest.mark.parametrize("variant", sorted(ORDERINGS))
def test_config_has_exactly_the_requested_ordering(arch, variant):
    cfg = (kernel_dir(arch, variant, built=False) / ".config").read_text().splitlines()
    chosen = [l for l in cfg if l.startswith("CONFIG_QRWLOCK_ORDERING_") and l.endswith("=y")
              and not l.startswith("CONFIG_QRWLOCK_ORDERING_ALLOW")]
    assert chosen == [f"CONFIG_QRWLOCK_ORDERING_{ORDERINGS[variant]}=y"]
    allow = "CONFIG_QRWLOCK_ORDERING_ALLOW_RELAXED=y" in cfg
    assert allow == (variant == "relaxed"), "the relaxed guard must be set only for relaxed"
    assert "CONFIG_NR_CPUS=64" in cfg and "CONFIG_ATOMIC64_SELFTEST=y" in cfg
    # kernel/patches/0003: every RMW atomic fully ordered only in allfull
    assert ("CONFIG_ATOMICS_FULLY_ORDERED=y" in cfg) == (variant == "allfull")


def run_script(*args, env=None):
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env)


def test_unknown_arch_lists_valid_ones():
    r = run_script("sparc", "acqrel")
    assert r.returncode != 0
    assert "unknown ARCH 'sparc': valid are arm64 ppc64le riscv64 x86_64" in r.stderr
    # an objects-only arch (kernel/configs/audit/) is no kernel
    r = run_script("sparc64", "acqrel", "--config-only")
    assert r.returncode != 0 and "unknown ARCH 'sparc64'" in r.stderr
    r = run_script("sparc", "acqrel", "--objects")
    assert r.returncode != 0
    assert "unknown ARCH 'sparc': valid are arm64 ppc64le riscv64 x86_64 mips64el sparc64" in r.stderr


@pytest.mark.kernel       # build-kernel.sh needs the tree (build/src/linux)
@pytest.mark.parametrize("arch,options", [
    ("ppc64le", ["CONFIG_PPC64=y", "CONFIG_CPU_LITTLE_ENDIAN=y", "CONFIG_POWER9_CPU=y",
                 "CONFIG_PPC_PSERIES=y", "CONFIG_PPC_QUEUED_SPINLOCKS=y",
                 "CONFIG_HVC_CONSOLE=y", "CONFIG_PPC_OF_BOOT_TRAMPOLINE=y"]),
    ("riscv64", ["CONFIG_ARCH_RV64I=y", "CONFIG_MMU=y", "CONFIG_RISCV_SBI=y",
                 "CONFIG_SERIAL_8250_CONSOLE=y", "CONFIG_SERIAL_OF_PLATFORM=y",
                 "CONFIG_RISCV_ISA_FALLBACK=y"]),
])
def test_new_arch_configs_keep_qrwlock(tmp_path, arch, options):
    """ppc64le and riscv64 (issue 30): tinyconfig + base + the arch's
    fragment configures an SMP kernel that uses qrwlock and boots on QEMU
    (pseries through VOF's prom_init and the hvc console; virt under
    OpenSBI with QEMU 7.2's "riscv,isa" and the 8250 console); make
    test-slow boots them (tests/guest/test_arches_boot.py)."""
    kernel_tree()
    import os
    env = dict(os.environ, QRWB_OUT=str(tmp_path / "out"))
    r = run_script(arch, "acqrel", "--config-only", env=env)
    assert r.returncode == 0, r.stderr
    cfg = (tmp_path / "out" / ".config").read_text().splitlines()
    for line in options + ["CONFIG_SMP=y", "CONFIG_QUEUED_RWLOCKS=y", "CONFIG_QRWLOCK_ORDERING_ACQREL=y"]:
        assert line in cfg, line
    assert "CONFIG_RISCV_M_MODE=y" not in cfg


@pytest.mark.kernel       # build-kernel.sh needs the tree (build/src/linux)
def test_ppc_without_queued_spinlocks_fails_with_one_line(tmp_path):
    """A ppc64le fragment that turns CONFIG_PPC_QUEUED_SPINLOCKS off: powerpc
    then keeps its own rwlock, and the build stops with one line saying so,
    before anything is built or marked configured."""
    kernel_tree()
    import os
    cfgs = tmp_path / "configs"
    shutil.copytree(TOP / "kernel" / "configs", cfgs)
    frag = cfgs / "ppc64le.config"
    frag.write_text(frag.read_text().replace("CONFIG_PPC_QUEUED_SPINLOCKS=y",
                                             "# CONFIG_PPC_QUEUED_SPINLOCKS is not set"))
    env = dict(os.environ, QRWB_CONFIGS=str(cfgs), QRWB_OUT=str(tmp_path / "out"))
    r = run_script("ppc64le", "acqrel", "--config-only", env=env)
    assert r.returncode != 0
    assert r.stderr.splitlines() == [
        "build-kernel: ppc64le-acqrel: CONFIG_QUEUED_RWLOCKS is not set, so this kernel would "
        "use powerpc's own rwlock, not qrwlock: powerpc selects it only with "
        f"CONFIG_PPC_QUEUED_SPINLOCKS=y (set it in {frag})"]
    assert not (tmp_path / "out" / ".qrwbench-configured").exists()


def test_unknown_variant_lists_valid_ones():
    r = run_script("x86_64", "sloppy")
    assert r.returncode != 0
    files = sorted(p.name[len("variant-"):-len(".config")]
                   for p in (TOP / "kernel" / "configs").glob("variant-*.config"))
    assert len(files) >= 4
    assert f"unknown VARIANT 'sloppy': valid are {' '.join(files)}" in r.stderr


def test_make_kernel_rejects_unknown_variant():
    r = subprocess.run(["make", "-s", "-C", str(TOP), "kernel", "ARCH=x86_64", "VARIANT=sloppy"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "unknown VARIANT 'sloppy': valid are" in r.stderr


@pytest.mark.kernel       # build-kernel.sh needs the tree (build/src/linux)
def test_dropped_option_is_named(tmp_path):
    """RELAXED without its guard is dropped by Kconfig: the build must say so."""
    kernel_tree()
    cfgs = tmp_path / "configs"
    shutil.copytree(TOP / "kernel" / "configs", cfgs)
    (cfgs / "variant-relaxed.config").write_text("CONFIG_QRWLOCK_ORDERING_RELAXED=y\n")
    import os
    env = dict(os.environ, QRWB_CONFIGS=str(cfgs), QRWB_OUT=str(tmp_path / "out"))
    r = run_script("x86_64", "relaxed", "--config-only", env=env)
    assert r.returncode != 0
    assert "requested 'CONFIG_QRWLOCK_ORDERING_RELAXED=y'" in r.stderr
    assert not (tmp_path / "out" / ".qrwbench-configured").exists()
    assert not (tmp_path / "out" / ".qrwbench-built").exists()


@pytest.mark.kernel       # build-kernel.sh needs the tree (build/src/linux)
def test_missing_cross_compiler_names_the_package(tmp_path):
    """A PATH without aarch64-linux-gnu-gcc: the arm64 build says what to install."""
    kernel_tree()
    import os
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "ls", "grep", "sed", "xargs", "echo", "nproc", "cat", "env", "cut", "sha256sum"):
        path = shutil.which(tool)
        assert path, tool
        (bin_dir / tool).symlink_to(path)
    env = dict(os.environ, PATH=str(bin_dir))
    r = run_script("arm64", "acqrel", env=env)
    assert r.returncode != 0
    assert ("missing cross compiler aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu "
            "binutils-aarch64-linux-gnu") in r.stderr


def test_objects_refuse_a_directory_they_did_not_make(tmp_path):
    """--objects replaces parts of its output (probe/): into a non-empty
    directory without its marker (.qrwbench-src) it writes nothing, before
    looking for a tree, and leaves every file as it was."""
    import os
    mine = tmp_path / "mine"
    (mine / "probe").mkdir(parents=True)
    (mine / "probe" / "keep.c").write_text("x")
    (mine / "precious").write_text("y")
    r = run_script("riscv64", "acqrel", "--objects", env=dict(os.environ, QRWB_OUT=str(mine)))
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "is not empty and no object build" in err[0], r.stderr
    assert sorted(p.name for p in mine.rglob("*")) == ["keep.c", "precious", "probe"]
    assert (mine / "probe" / "keep.c").read_text() == "x"


def test_a_variant_the_arch_does_not_offer_is_refused_in_one_line(tmp_path):
    """allfull exists on x86_64 and arm64 only (its fragment's
    "# qrwbench-arches:" line): on ppc64le the build stops before any work."""
    import os
    r = run_script("ppc64le", "allfull", "--config-only",
                   env=dict(os.environ, QRWB_OUT=str(tmp_path / "out")))
    assert r.returncode != 0
    assert r.stderr.splitlines() == [
        "build-kernel: variant 'allfull' is not offered on ppc64le: valid arches are "
        "x86_64 arm64 (kernel/configs/variant-allfull.config)"]
    assert not (tmp_path / "out").exists()

"""A program workload needs kernel options (vocab.Workload.kernel_needs:
fork() for its worker processes needs an MMU); `make bench` refuses a cell
whose kernel lacks one with one line naming the option and the kernel,
before any boot."""
from __future__ import annotations

import pytest

from fuzz import one_line
from qrwbench import matrix, vocab
from qrwbench.errors import QrwbenchError
from qrwbench.run import bench, boot

PROGRAMS = tuple(n for n, w in vocab.WORKLOAD_TABLE.items() if w.program)


@pytest.fixture()
def kernels(tmp_path, monkeypatch):
    """kernel_dir(arch, variant) under tmp_path; write(arch, variant, text) its .config."""
    monkeypatch.setattr(vocab, "kernel_dir", lambda a, v: tmp_path / f"{a}-{v}")

    def write(arch, variant, text):
        d = tmp_path / f"{arch}-{variant}"
        d.mkdir(exist_ok=True)
        (d / ".config").write_text(text)
    return write


FULL = "CONFIG_MMU=y\nCONFIG_PROC_FS=y\nCONFIG_SMP=y\nCONFIG_NR_CPUS=64\n"
NO_MMU = "# CONFIG_MMU is not set\nCONFIG_PROC_FS=y\nCONFIG_SMP=y\n"


def test_every_program_needs_an_mmu():
    for name in PROGRAMS:
        assert "CONFIG_MMU" in vocab.workload(name).kernel_needs


@pytest.mark.parametrize("workload", PROGRAMS)
def test_a_kernel_without_the_option_is_refused_in_one_line(kernels, workload):
    kernels("arm64", "acqrel", NO_MMU)
    with pytest.raises(QrwbenchError) as e:
        vocab.check_kernel_needs(workload, "arm64", "acqrel")
    msg = str(e.value)
    assert one_line(msg) and "CONFIG_MMU" in msg and "arm64-acqrel" in msg and workload in msg


def test_a_kernel_with_the_options_and_a_module_workload_pass(kernels):
    kernels("arm64", "acqrel", FULL)
    for name in PROGRAMS:
        vocab.check_kernel_needs(name, "arm64", "acqrel")
    kernels("arm64", "full", NO_MMU)
    vocab.check_kernel_needs("rwlock", "arm64", "full")     # needs nothing


def test_bench_refuses_the_cell_before_booting(kernels, tmp_path, monkeypatch):
    kernels("x86_64", "acqrel", FULL)
    kernels("x86_64", "full", NO_MMU)
    monkeypatch.setattr(boot, "kernel_paths", lambda a, v: None)
    m = tmp_path / "m.toml"
    m.write_text('[run]\nboots = 1\n[[target]]\narch = "x86_64"\naccel = "tcg"\ncpu = "max"\n'
                 '[[workload]]\nname = "pgrp"\nvariants = ["acqrel", "full"]\nvcpus = [2]\n')
    with pytest.raises(QrwbenchError) as e:
        bench.runnable_cells(matrix.load(m), {})
    assert "CONFIG_MMU" in str(e.value) and "x86_64-full" in str(e.value)
    m.write_text(m.read_text().replace('"acqrel", "full"', '"acqrel"'))
    assert [c.variant for c in bench.runnable_cells(matrix.load(m), {})] == ["acqrel"]

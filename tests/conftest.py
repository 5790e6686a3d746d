"""Shared pytest fixtures: paths of the repository and of built artefacts, and
`make` as the tests run it."""
import contextlib
import os
import re
import subprocess
from pathlib import Path

import pytest

from qrwbench import vocab

# the fuzz tests' fixtures (fast_stats, golden) for every test file that names them
pytest_plugins = ["fuzz"]

TOP = Path(__file__).resolve().parents[1]
BUILD = vocab.BUILD
SRC = BUILD / "src" / "linux"           # the kernel tree (make tree)


REQUIRE_BUILT = "QRWB_REQUIRE_BUILT"    # set by `make test`: a missing artifact fails


def missing(what: str, by: str = "make test"):
    """A test's artifact (a kernel, a module, the tree) is missing: under
    `make test` (QRWB_REQUIRE_BUILT=1), which builds them all first, that is a
    failure; run alone (pytest, make check) the test skips, saying why. ``by``:
    the target that builds it (make test-slow for the slow tests' builds)."""
    msg = f"{what}: run the tests through '{by}', which builds it"
    if os.environ.get(REQUIRE_BUILT) == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def kernel_dir(arch: str, variant: str, built: bool = True) -> Path:
    """A kernel build directory that `make test` prepared (:func:`missing` when absent)."""
    d = vocab.kernel_dir(arch, variant)
    stamp = d / (".qrwbench-built" if built else ".config")
    if not stamp.exists():
        missing(f"{d} is not {'built' if built else 'configured'}")
    return d


def kernel_tree() -> Path:
    """build/src/linux, the kernel tree `make tree` prepares (:func:`missing`
    when absent: prepare-tree.sh moves it into place whole, git repository
    and all, so its Makefile stands for all of it)."""
    if not (SRC / "Makefile").exists():
        missing("no kernel tree (build/src/linux)")
    return SRC


def module_ko(arch: str, variant: str) -> Path:
    """The benchmark module `make test` built against that kernel (:func:`missing` when absent)."""
    ko = vocab.module_ko(arch, variant)
    if not ko.exists():
        missing(f"{ko} is not built")
    return ko


@pytest.fixture
def top() -> Path:
    return TOP


@contextlib.contextmanager
def changed_table(monkeypatch, tmp_path, module, attr: str, text: str, *readers):
    """While the block runs, ``module.attr`` (a path: one of the module's
    tables, e.g. moduletables.OPS_DEF) is a copy in tmp_path holding ``text``; the
    caches of ``readers`` (lru_cache'd functions that read it) are cleared
    before and after. Yields the copy's path."""
    f = tmp_path / getattr(module, attr).name
    f.write_text(text)
    monkeypatch.setattr(module, attr, f)
    for r in readers:
        r.cache_clear()
    try:
        yield f
    finally:
        for r in readers:
            r.cache_clear()


def make(*args, timeout=120):
    """`make -s ARGS` in the repository, the host package on PYTHONPATH;
    (rc, stdout, stderr)."""
    r = subprocess.run(["make", "-s", *args], cwd=TOP, capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "PYTHONPATH": str(TOP / "analysis")})
    return r.returncode, r.stdout, r.stderr


def first_error(stderr: str, command: str) -> str:
    """The rig's one error line (make adds its own 'make: ***' line after it)."""
    lines = [l for l in stderr.splitlines() if not re.match(r"make(\[\d+\])?: \*\*\*", l)]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"{command}: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]

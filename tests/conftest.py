"""Shared pytest fixtures: paths of the repository and of built artefacts."""
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[1]
BUILD = TOP / "build"


def kernel_dir(arch: str, variant: str, built: bool = True) -> Path:
    """A kernel build directory that `make test` prepared; fail (not skip) when absent."""
    d = BUILD / "kernels" / f"{arch}-{variant}"
    stamp = d / (".qrwbench-built" if built else ".config")
    if not stamp.exists():
        pytest.fail(f"{d} is not {'built' if built else 'configured'}: run the tests through 'make test'")
    return d


@pytest.fixture
def top() -> Path:
    return TOP

"""The matrices of the other qrwlock arches (issue 30): bench/matrix/arches.toml
and its short version load, boot only ppc64le and riscv64, and the default
matrix does not grow; a variant an arch does not offer is one line."""
import pytest

from conftest import TOP
from qrwbench import matrix
from qrwbench.vocab import InputError

MATRICES = TOP / "bench" / "matrix"


@pytest.mark.parametrize("name", ["arches.toml", "arches-quick.toml"])
def test_the_arches_matrices_boot_ppc64le_and_riscv64(name):
    m = matrix.load(MATRICES / name)
    cells = matrix.cells(m)
    assert {c.arch for c in cells} == {"ppc64le", "riscv64"}
    assert {c.accel for c in cells} == {"tcg"}
    assert {c.workload for c in cells} == {"atomics", "rwlock"}
    rw = {c.variant for c in cells if c.workload == "rwlock"}
    assert rw == ({"full", "acqrel"} if "quick" in name else {"full", "acqrel", "relaxed"})
    assert 2 in {c.vcpus for c in cells}


def test_the_full_arches_matrix_has_both_power_models_and_one_vcpu():
    cells = matrix.cells(matrix.load(MATRICES / "arches.toml"))
    assert {(c.arch, c.cpu) for c in cells} == {("ppc64le", "power9"), ("ppc64le", "power10"),
                                               ("riscv64", "rv64")}
    assert {c.vcpus for c in cells} == {1, 2}


def test_the_default_matrix_does_not_boot_them():
    for name in ("default.toml", "quick.toml"):
        cells = matrix.cells(matrix.load(MATRICES / name))
        assert {c.arch for c in cells} == {"x86_64", "arm64"}, name


def test_a_variant_the_arch_does_not_offer_is_one_line(tmp_path):
    text = (MATRICES / "arches-quick.toml").read_text().replace(
        'variants = ["full", "acqrel"]', 'variants = ["acqrel", "allfull"]')
    p = tmp_path / "m.toml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        matrix.load(p)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.endswith("variant 'allfull' is not offered on ppc64le: valid arches are "
                        "x86_64, arm64 (kernel/configs/variant-allfull.config)"), msg
    assert msg.startswith("m.toml:"), msg

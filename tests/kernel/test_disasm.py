"""The variants compile to what their names promise, read from objdump -d of
each vmlinux (qrwbench.build.disasm)."""
import pytest

from conftest import kernel_dir
from qrwbench.build import audit, disasm

pytestmark = pytest.mark.kernel      # needs built kernels/modules or the tree


def funcs(arch, variant):
    kd = kernel_dir(arch, variant)
    return disasm.audit_elf(kd / "vmlinux", arch, list(audit.QRWLOCK_FUNCS))


@pytest.fixture(scope="module")
def arm64():
    return {v: funcs("arm64", v) for v in ("acqrel", "full")}


@pytest.fixture(scope="module")
def x86():
    return {v: funcs("x86_64", v) for v in ("acqrel", "full")}


SLOWPATHS = ("queued_read_lock_slowpath", "queued_write_lock_slowpath")


# LSE forms of the qrwlock's own atomics (the wait lock, a qspinlock, keeps its
# casa in every variant, so the tests look at the qrwlock ops only).
LSE_EXPECT = [
    ("_raw_read_trylock", "ldadda", "ldaddal"),          # atomic_add_return_acquire vs full
    ("_raw_write_trylock", "casa", "casal"),             # try_cmpxchg_acquire vs full
    ("queued_read_lock_slowpath", "stadd", "ldaddal"),   # void atomic_add/sub vs fully ordered RMW
    ("queued_write_lock_slowpath", "stset", "ldsetal"),  # void atomic_or vs atomic_fetch_or
]


@pytest.mark.parametrize("fn,acq_form,full_form", LSE_EXPECT)
def test_arm64_lse_forms_differ_as_promised(arm64, fn, acq_form, full_form):
    acq = arm64["acqrel"][fn]["counts"]
    full = arm64["full"][fn]["counts"]
    assert acq.get(acq_form, 0) >= 1 and full_form not in acq
    assert full.get(full_form, 0) >= 1 and acq_form not in full


def test_arm64_write_slowpath_cmpxchg_is_fully_ordered_in_full(arm64):
    fn = "queued_write_lock_slowpath"
    acq = arm64["acqrel"][fn]["counts"]
    full = arm64["full"][fn]["counts"]
    assert "casal" not in acq and full.get("casal", 0) >= 1
    # Only the wait lock's acquire cas is left in FULL.
    assert full.get("casa", 0) < acq.get("casa", 0)


@pytest.mark.parametrize("fn", SLOWPATHS)
def test_arm64_llsc_acqrel_uses_acquire_exclusive_full_uses_release_plus_dmb(arm64, fn):
    acq = arm64["acqrel"][fn]
    full = arm64["full"][fn]
    assert "ldaxr" in acq["llsc"] and "stlxr" not in acq["llsc"]
    assert "stlxr" in full["llsc"]
    assert "dmb ish" not in acq["barriers"]
    assert "dmb ish" in full["barriers"]


def test_arm64_acqrel_read_slowpath_spins_with_load_acquire(arm64):
    acq = arm64["acqrel"]["queued_read_lock_slowpath"]["counts"]
    full = arm64["full"]["queued_read_lock_slowpath"]["counts"]
    # atomic_cond_read_acquire -> ldar; FULL spins relaxed then smp_mb().
    assert acq.get("ldar", 0) > full.get("ldar", 0)


def test_x86_full_write_unlock_has_a_locked_op_acqrel_does_not(x86):
    fn = "_raw_write_unlock_irqrestore"
    assert x86["acqrel"][fn]["locked"] == 0
    assert x86["full"][fn]["locked"] >= 1


def test_x86_read_lock_is_identical_code_in_both(x86):
    # Only fully ordered atomics exist on x86: lock xadd either way.
    assert x86["acqrel"]["_raw_read_lock"]["hash"] == x86["full"]["_raw_read_lock"]["hash"]
    assert x86["acqrel"]["_raw_read_lock"]["counts"] == {"lock xadd": 1}


def test_audit_flags_identical_pairs_only_when_identical(x86, arm64):
    docs = [{"arch": a, "variant": v, "functions": f}
            for a, d in (("x86_64", x86), ("arm64", arm64)) for v, f in d.items()]
    pairs = audit.identical_pairs(docs)
    # FULL differs from ACQREL in the write unlock (x86) and everywhere (arm64).
    assert pairs == []
    same = [{"arch": "x86_64", "variant": "acqrel", "functions": x86["acqrel"]},
            {"arch": "x86_64", "variant": "copy", "functions": x86["acqrel"]}]
    assert len(audit.identical_pairs(same)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_acqrel_is_identical_to_unpatched(arch):
    acq = funcs(arch, "acqrel")
    unp = funcs(arch, "unpatched")
    assert set(acq) == set(unp) and acq
    diff = [f for f in acq if acq[f]["hash"] != unp[f]["hash"]]
    assert diff == [], f"ACQREL differs from unpatched 6.12 in {diff}"

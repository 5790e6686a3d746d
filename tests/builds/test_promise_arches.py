"""The ordering audit of a ppc64le or riscv64 module (issue 30): its promise
rules are x86_64's and arm64's, so on the others it reports no broken
promise it cannot judge, and the injected barrier (smp_mb: sync, fence
rw,rw) is counted in that ISA's own instructions."""
from qrwbench.build import promise


def rec(order):
    return {"order": order, "counts": {}, "locked": 0, "fences": 0}


def test_no_promise_findings_where_there_are_no_rules():
    assert not promise.promise_checked("ppc64le") and not promise.promise_checked("riscv64")
    assert promise.promise_checked("arm64") and promise.promise_checked("x86_64")
    # lwarx/stwcx. with no acquire: arm64's rules would call it "missing"
    assert promise.check_promise("ppc64le", "atomic_add_return", "acquire",
                                 rec(["lwarx", "stwcx."])) == []
    assert promise.check_promise("riscv64", "smp_mb", "full", rec([])) == []
    # arm64 still judges the same record
    assert promise.check_promise("arm64", "smp_mb", "full", rec([]))[0]["kind"] == "weaker"


def test_full_barriers_of_each_isa():
    assert promise.full_barriers("ppc64le", rec(["sync", "lwarx", "stwcx.", "sync", "lwsync"])) == 2
    assert promise.full_barriers("riscv64", rec(["fence rw,rw", "amoadd.w", "fence r,rw"])) == 1
    assert promise.full_barriers("arm64", rec(["dmb ish", "ldaddal"])) == 1

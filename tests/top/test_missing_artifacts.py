"""A test whose kernel, module or tree is missing skips with the reason when
run alone (make check, plain pytest) and fails under make test, which builds
them all first (QRWB_REQUIRE_BUILT=1)."""
import subprocess

import pytest

import conftest
from conftest import TOP


def test_missing_artifact_skips_when_run_alone(monkeypatch):
    monkeypatch.delenv(conftest.REQUIRE_BUILT, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such.ko is not built: run the tests"):
        conftest.missing("no-such.ko is not built")


def test_missing_artifact_fails_under_make_test(monkeypatch):
    monkeypatch.setenv(conftest.REQUIRE_BUILT, "1")
    with pytest.raises(pytest.fail.Exception, match="no-such.ko is not built"):
        conftest.missing("no-such.ko is not built")


def test_kernel_dir_of_an_unbuilt_variant_goes_through_missing(monkeypatch):
    monkeypatch.setenv(conftest.REQUIRE_BUILT, "1")
    with pytest.raises(pytest.fail.Exception, match="is not built"):
        conftest.kernel_dir("x86_64", "no-such-variant")


def test_a_missing_kernel_tree_goes_through_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "SRC", tmp_path / "linux")
    monkeypatch.setenv(conftest.REQUIRE_BUILT, "1")
    with pytest.raises(pytest.fail.Exception, match=r"no kernel tree \(build/src/linux\)"):
        conftest.kernel_tree()
    monkeypatch.delenv(conftest.REQUIRE_BUILT)
    with pytest.raises(pytest.skip.Exception, match="no kernel tree"):
        conftest.kernel_tree()
    (tmp_path / "linux").mkdir()
    (tmp_path / "linux" / "Makefile").write_text("")
    assert conftest.kernel_tree() == tmp_path / "linux"


def test_make_test_requires_and_make_check_leaves_out_the_kernel_tests():
    out = subprocess.run(["make", "-n", "-s", "-C", str(TOP), "test", "check"],
                         capture_output=True, text=True).stdout
    runs = [l for l in out.splitlines() if "-m pytest" in l]
    assert any("QRWB_REQUIRE_BUILT=1" in l and '"not slow"' in l for l in runs), runs
    assert any('not guest and not kernel' in l and "QRWB_REQUIRE_BUILT" not in l
               for l in runs), runs
    # one worker per file: module-scoped fixtures once, no two writers of one path
    assert any('not guest and not kernel' in l and "--dist loadfile" in l for l in runs), runs

"""Nothing the rig did not create is deleted or overwritten: every output
directory is replaced only over an earlier output of the same kind (its
.qrwbench-output marker), anything else is a one-line error before any work,
and concurrent writers of one output are serialized."""
import json
import os
import subprocess

import pytest

from conftest import TOP
from qrwbench import cli, outputs
from qrwbench.results import store
from qrwbench.run import boot
from qrwbench.errors import QrwbenchError

import synth
from qrwbench.cell import Cell

PYENV = {**os.environ, "PYTHONPATH": str(TOP / "analysis")}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    root = tmp_path_factory.mktemp("outdb")
    path = str(root / "r.sqlite")
    for i in range(2):
        assert store.import_run(path, synth.atomics_run(root / "runs", f"run-{i}")).status == "ok"
    return path


def user_dir(tmp_path, name="mine"):
    """A directory the rig did not create, with the user's files in it."""
    d = tmp_path / name
    (d / "sub").mkdir(parents=True)
    (d / "notes.txt").write_text("keep me\n")
    (d / "sub" / "data.bin").write_bytes(b"\x00" * 10)
    return d


def snapshot(d):
    return sorted((str(p.relative_to(d)), p.read_bytes() if p.is_file() else None)
                  for p in d.rglob("*"))


def no_temp_left(parent):
    return [p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def report_cli(db, out, capsys):
    code = cli.main(["report", "--db", db, "--out", str(out)])
    return code, capsys.readouterr()


def test_report_refuses_a_directory_it_did_not_create_and_leaves_it_whole(tmp_path, db, capsys):
    d = user_dir(tmp_path)
    before = snapshot(d)
    code, cap = report_cli(db, d, capsys)
    assert code == 2 and cap.out == ""
    assert cap.err.count("\n") == 1 and cap.err.startswith("qrwbench: error: ")
    assert str(d) in cap.err and "not a qrwbench report directory" in cap.err
    assert snapshot(d) == before
    assert no_temp_left(tmp_path) == []


def test_report_refuses_an_empty_directory_a_file_a_link_and_the_root(tmp_path, db, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    f = tmp_path / "file"
    f.write_text("x")
    link = tmp_path / "link"
    link.symlink_to(user_dir(tmp_path))
    for out, what in ((empty, "not a qrwbench report"), (f, "is not a directory"),
                      (link, "symbolic link")):
        code, cap = report_cli(db, out, capsys)
        assert code == 2 and cap.err.count("\n") == 1 and what in cap.err, cap.err
    assert empty.is_dir() and not any(empty.iterdir())
    assert f.read_text() == "x" and link.is_symlink() and (link / "notes.txt").exists()
    # the filesystem root and a system directory are refused by the check
    # itself, before anything could be written (nothing is tried on them)
    for p in ("/", "/etc", "/usr/bin"):
        with pytest.raises(QrwbenchError, match="not a path the rig can write|not a qrwbench"):
            outputs.check(p, "report")


def test_a_second_report_replaces_the_first_and_only_that(tmp_path, db, capsys):
    out = tmp_path / "rep"
    code, _ = report_cli(db, out, capsys)
    assert code == 0 and (out / "index.html").exists()
    assert json.loads((out / outputs.MARKER).read_text())["kind"] == "report"
    (out / "index.html").write_text("stale")
    code, _ = report_cli(db, out, capsys)
    assert code == 0 and (out / "index.html").read_text() != "stale"
    assert no_temp_left(tmp_path) == []
    # a marker of another kind is not a report: refused
    aud = tmp_path / "aud"
    aud.mkdir()
    outputs.mark(aud, "audit")
    code, cap = report_cli(db, aud, capsys)
    assert code == 2 and "qrwbench audit output" in cap.err and aud.is_dir()


def test_a_report_into_a_legacy_report_directory_replaces_it(tmp_path, db, capsys):
    out = tmp_path / "old"
    (out / "plots").mkdir(parents=True)
    (out / "index.html").write_text("old")
    (out / "report.md").write_text("old")
    code, _ = report_cli(db, out, capsys)
    assert code == 0 and (out / "index.html").read_text() != "old"
    # the same names with anything of the user's inside are not a report
    mixed = tmp_path / "mixed"
    (mixed / "plots").mkdir(parents=True)
    (mixed / "index.html").write_text("mine")
    (mixed / "plots" / "thesis.tex").write_text("mine")
    code, cap = report_cli(db, mixed, capsys)
    assert code == 2 and "not a qrwbench report directory" in cap.err
    assert (mixed / "plots" / "thesis.tex").read_text() == "mine"
    # a run directory without its provenance.json is not a run either
    with pytest.raises(QrwbenchError, match="not a qrwbench run directory"):
        d = tmp_path / "r"
        d.mkdir()
        (d / "console.log").write_text("mine")
        outputs.fresh_dir(d, "run")
    assert (d / "console.log").read_text() == "mine"


def test_two_reports_to_one_out_at_once_are_serialized(tmp_path, db):
    out = tmp_path / "rep"
    cmd = ["/usr/bin/python3", "-m", "qrwbench", "report", "--db", db, "--out", str(out)]
    procs = [subprocess.Popen(cmd, cwd=TOP, env=PYENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for so, se, rc in results:
        assert rc == 0, se
        assert "Traceback" not in se
    assert (out / "index.html").exists() and (out / "report.md").exists()
    assert no_temp_left(tmp_path) == []


def test_audit_and_torture_refuse_a_foreign_out_before_any_work(tmp_path, capsys, monkeypatch):
    d = user_dir(tmp_path)
    before = snapshot(d)
    assert cli.main(["audit", "--out", str(d), "/nonexistent-kernel-dir"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qrwbench: error: ") and "not a qrwbench audit directory" in err
    m = tmp_path / "t.toml"
    m.write_text("[run]\nboots = 1\n[[target]]\narch = \"x86_64\"\naccel = \"tcg\"\n"
                 "[[workload]]\nname = \"rwlock\"\nvariants = [\"acqrel\"]\nvcpus = [1]\n")
    monkeypatch.setattr(boot, "kernel_paths", lambda a, v: None)   # kernels need not be built
    assert cli.main(["torture", "--matrix", str(m), "--out", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qrwbench: error: ") and "not a qrwbench torture directory" in err
    assert snapshot(d) == before


def test_a_run_directory_is_replaced_only_when_it_is_a_run(tmp_path):
    d = user_dir(tmp_path, "run-x")
    before = snapshot(d)
    cell = Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 1, ())
    fake = (tmp_path / "vmlinux", tmp_path / "initrd", tmp_path, tmp_path)
    with pytest.raises(QrwbenchError, match="not a qrwbench run directory"):
        boot.boot_one(cell, 1, d, 5, 256, boot.NOT_ASKED, kernel=fake)
    assert snapshot(d) == before
    # an earlier run of the rig there (marker, or the files of an old run) is replaced
    old = tmp_path / "run-y"
    outputs.fresh_dir(old, "run")
    (old / "console.log").write_text("old console")
    assert outputs.fresh_dir(old, "run") == old and not (old / "console.log").exists()
    legacy = tmp_path / "run-z"
    legacy.mkdir()
    (legacy / "provenance.json").write_text("{}")
    (legacy / "console.log").write_text("x")
    outputs.fresh_dir(legacy, "run")
    assert sorted(p.name for p in legacy.iterdir()) == [outputs.MARKER]

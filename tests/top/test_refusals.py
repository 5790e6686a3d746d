"""Bad input of every kind is one line `qrwbench: error: ...` (the Makefile's
own checks: `kernel: error: ...`, `bench-series: error: ...`) naming the bad
value and what is valid, given before any expensive step (tree, kernels,
module, boots); records the module cannot have printed make their run failed
without stopping an import."""
import os
import sqlite3
import subprocess

import numpy as np
import pytest

import synth
from conftest import TOP, first_error, make
from qrwbench import cli
from qrwbench.results import records, store
from qrwbench.run import ktree
from qrwbench.errors import QrwbenchError

PYENV = {**os.environ, "PYTHONPATH": str(TOP / "analysis")}
BIG = 1 << 63


# ------------------------------------------------------------------ CELL

@pytest.mark.parametrize("cell,expect", [
    ("x86_64/tcg/max/acqrel/rwlock/\u00b2", "vCPUs '?' is not a count in 1..64"),
    ("x86_64/tcg/max/acqrel/rwlock:reps=\u00b2/1", "reps = '?': must be an integer"),
    ("x86_64/tcg/max/acqrel/rwlock:reps=\u0663/1", "reps = '?': must be an integer"),
    ("x86_64/tcg/max/acqrel/rwlock:threads=3/2", "threads = 3 exceeds vcpus = 2"),
    ("x86_64/tcg/max/acqrel/rwlock:nreaders=2,nwriters=2/2", "nreaders + nwriters = 2 + 2 exceeds"),
    ("x86_64/tcg/max/acqrel/rwlock/99999999999999999999999", "is not a count in 1..64"),
    ("x86_64/tcg/max/acqrel/pgrp:pgrp_write_pct=101/2", "pgrp_write_pct"),
    ("x86_64/tcg/max/acqrel/sigio:sigio_setown_pct=-1/2", "sigio_setown_pct"),
    ("x86_64/tcg/max/acqrel/forkwaitx/2", "forkwaitx"),
])
def test_bad_cells_are_one_line_errors(cell, expect):
    with pytest.raises(QrwbenchError) as e:
        ktree.parse_cell(cell)
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_make_bisect_and_bench_series_check_cell_before_the_tree(tmp_path):
    rc, out, err = make("bisect", "GOOD=a", "BAD=b", "CELL=x86_64/tcg/max/acqrel/rwlock/\u00b2")
    assert rc == 2 and out == "" and "vCPUs" in first_error(err, "qrwbench")
    rc, out, err = make("bench-series", "CELL=x86_64/tcg/pentium/acqrel/rwlock/1")
    assert rc == 2 and out == "" and "unknown CPU model 'pentium'" in first_error(err, "qrwbench")
    rc, out, err = make("bench-series", "CELL=x86_64/tcg/max/acqrel/rwlock/1", "BOOTS=0")
    assert rc == 2 and "BOOTS 0: must be an integer in 1..1000" in first_error(err, "qrwbench")
    rc, out, err = make("bench-series", "CELL=x86_64/tcg/max/acqrel/rwlock/1", "THRESHOLD=nan")
    assert rc == 2 and "THRESHOLD nan" in first_error(err, "qrwbench")
    rc, out, err = make("bench-series")
    assert rc == 2 and "give CELL=" in first_error(err, "bench-series")


def test_kernel_src_that_is_not_a_kernel_tree_is_named(tmp_path):
    repo = tmp_path / "notlinux"
    repo.mkdir()
    env = {**PYENV, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    (repo / "Makefile").write_text("all:\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "x"], check=True, env=env)
    rc, out, err = make("bench-series", "CELL=x86_64/tcg/max/acqrel/rwlock/1", f"KERNEL_SRC={repo}")
    line = first_error(err, "qrwbench")
    assert rc == 2 and "is a git repository but not a Linux kernel tree" in line
    assert "kernel/Kconfig.locks" in line
    rc, out, err = make("bisect", "GOOD=HEAD~1", "BAD=HEAD", "CELL=x86_64/tcg/max/acqrel/rwlock/1",
                        f"KERNEL_SRC={tmp_path / 'missing'}")
    assert rc == 2 and "is not a git repository (it does not exist)" in first_error(err, "qrwbench")


# -------------------------------------------------------- make, before building

def variant_files():
    """The variants, read from the fragment files (not through vocab)."""
    return sorted(p.name[len("variant-"):-len(".config")]
                  for p in (TOP / "kernel" / "configs").glob("variant-*.config"))


def test_make_kernel_takes_exactly_one_variant_and_arch():
    rc, out, err = make("kernel", "ARCH=x86_64", "VARIANT=acqrel full")
    assert rc == 2 and out == ""
    assert first_error(err, "kernel") == ("kernel: error: VARIANT='acqrel full' must be one variant: "
                                          "valid are " + " ".join(variant_files()))
    rc, out, err = make("kernel", "ARCH=x86_64 arm64", "VARIANT=acqrel")
    assert rc == 2 and "ARCH='x86_64 arm64' must be one arch" in first_error(err, "kernel")


def test_make_bench_checks_the_matrix_before_the_tree(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("run = 5\n")
    rc, out, err = make("bench", f"MATRIX={bad}", f"RESULTS_DB={tmp_path / 'r.sqlite'}")
    assert rc == 2 and out == ""      # no prepare-tree, no kernel build line
    assert "'run' must be a table [run], not an integer (5)" in first_error(err, "qrwbench")
    rc, out, err = make("bench", "ACCEL=hvf", f"RESULTS_DB={tmp_path / 'r.sqlite'}")
    assert rc == 2 and "unknown accel 'hvf'" in first_error(err, "qrwbench")
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    rc, out, err = make("bench", "QUICK=1", f"RESULTS_DB={junk}")
    assert rc == 2 and "is not an SQLite database" in first_error(err, "qrwbench")


def test_the_quick_matrix_needs_four_kernels_not_six(tmp_path):
    r = subprocess.run(["/usr/bin/python3", "-m", "qrwbench", "bench", "--plan", "--quick",
                        "--db", str(tmp_path / "r.sqlite"), "--runs", str(tmp_path / "runs")],
                       cwd=TOP, env=PYENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["arm64-acqrel", "arm64-full", "x86_64-acqrel", "x86_64-full"]
    r = subprocess.run(["/usr/bin/python3", "-m", "qrwbench", "bench", "--plan", "--accel", "tcg",
                        "--db", str(tmp_path / "r.sqlite"), "--runs", str(tmp_path / "runs")],
                       cwd=TOP, env=PYENV, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and len(r.stdout.split()) == 6      # the default matrix: all six


# ------------------------------------------------------------------ records

def _console(mutate=None, results=True):
    recs = [synth.begin(threads=2)]
    if results:
        recs += synth.results(rng=np.random.default_rng(3), reps=2)
    if mutate:
        mutate(recs[1])
    return synth.console(recs)       # a correct end marker: count and CRC-32 match


@pytest.mark.parametrize("key", ["ns", "ops", "rep", "order", "overhead_ps", "batch"])
def test_a_value_beyond_what_the_module_prints_fails_the_run(key):
    def big(r):
        r[key] = BIG
        if key == "ops":
            r["per_thread_ops"] = [BIG, 0]
    p = records.parse_console(_console(big))
    assert not p.ok and f"'{key}' is {BIG}" in p.reason, p.reason


@pytest.mark.parametrize("mutate,expect", [
    (lambda r: r.update(op="atomic_bogus_op"), "op 'atomic_bogus_op' is not in the module's op table"),
    (lambda r: r.update(op="atomic_and", variant="acquire"),
     "op 'atomic_and' has no ordering 'acquire': valid are relaxed"),
])
def test_an_op_or_ordering_the_module_does_not_have_fails_the_run(mutate, expect):
    p = records.parse_console(_console(mutate))
    assert not p.ok and expect in p.reason, p.reason


def test_a_run_without_results_is_failed_not_ok_with_zero_samples():
    p = records.parse_console(_console(results=False))
    assert not p.ok and "no result records" in p.reason


def test_one_bad_run_does_not_stop_an_import(tmp_path, capsys):
    runs = tmp_path / "runs"
    synth.write_run(runs, "a-bad", _console(lambda r: r.update(ns=BIG)))
    synth.write_run(runs, "b-bogus", _console(lambda r: r.update(op="atomic_bogus_op")))
    synth.atomics_run(runs, "c-good")
    db = str(tmp_path / "r.sqlite")
    assert cli.main(["import", "--db", db, str(runs)]) == 0
    out = capsys.readouterr().out
    assert "a-bad: imported, failed (0 samples)" in out and "must be <=" in out
    assert "b-bogus: imported, failed" in out and "c-good: imported, ok" in out
    conn = store.connect(db)
    assert {r["run_id"]: r["status"] for r in conn.execute("SELECT run_id, status FROM runs")} == {
        "a-bad": "failed", "b-bogus": "failed", "c-good": "ok"}
    conn.close()


# ------------------------------------------------------------------ results DB

@pytest.fixture
def good_db(tmp_path):
    db = tmp_path / "db" / "r.sqlite"
    for i in range(2):
        assert store.import_run(str(db), synth.atomics_run(tmp_path / "runs", f"r{i}")).status == "ok"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db


def _cli(capsys, *argv):
    code = cli.main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_a_db_with_corrupted_pages_is_one_line_for_report_compare_regress(tmp_path, good_db, capsys):
    data = bytearray(good_db.read_bytes())
    page = 4096
    for off in range(2 * page, len(data), page):        # keep the header page, smash the rest
        data[off:off + 64] = b"\xa5" * 64
    good_db.write_bytes(bytes(data))
    for argv in (["report", "--db", str(good_db), "--out", str(tmp_path / "rep")],
                 ["compare", "--db", str(good_db)],
                 ["regress", "--db", str(good_db)]):
        code, out, err = _cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and err.startswith("qrwbench: error: "), (argv, err)
    assert not (tmp_path / "rep").exists()


def test_an_empty_schema_version_table_is_named(tmp_path, good_db, capsys):
    conn = sqlite3.connect(good_db)
    conn.execute("DELETE FROM schema_version")
    conn.commit()
    conn.close()
    code, out, err = _cli(capsys, "import", "--db", str(good_db), str(tmp_path / "runs" / "r0"))
    assert code == 2 and "table schema_version holds no version" in err and err.count("\n") == 1


def test_min_effect_and_alpha_must_be_numbers_in_range(good_db, capsys):
    for opt, val, expect in (("--min-effect", "nan", "percentage in [0, 100)"),
                             ("--min-effect", "-5", "percentage in [0, 100)"),
                             ("--min-effect", "inf", "percentage in [0, 100)"),
                             ("--alpha", "nan", "must be in (0, 1)")):
        with pytest.raises(SystemExit) as e:
            cli.main(["compare", "--db", str(good_db), opt, val])
        err = capsys.readouterr().err
        assert e.value.code == 2 and expect in err and err.count("\n") == 1, err


def test_a_read_only_db_directory_is_named_for_an_unprivileged_user(tmp_path_factory):
    """As root everything is writable: the case only exists for a normal user."""
    root = tmp_path_factory.mktemp("ro")
    os.chmod(root, 0o755)
    for p in root.parents:
        if str(p).startswith("/tmp/pytest-of-"):
            os.chmod(p, 0o755)
    d = root / "results"
    run = synth.atomics_run(root / "runs", "r0")
    assert store.import_run(str(d / "r.sqlite"), run).status == "ok"
    conn = sqlite3.connect(d / "r.sqlite")
    conn.execute("PRAGMA journal_mode = DELETE")      # no -wal/-shm left beside it
    conn.close()
    os.chmod(d / "r.sqlite", 0o666)
    os.chmod(d, 0o555)
    home = root / "home"
    home.mkdir(mode=0o777)
    os.chmod(home, 0o777)
    env = {**PYENV, "HOME": str(home), "MPLCONFIGDIR": str(home)}
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "/usr/bin/python3", "-m", "qrwbench", "compare", "--db", str(d / "r.sqlite")],
                       cwd=TOP, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("qrwbench: error: results directory ")
    assert "is not writable: SQLite must create r.sqlite-wal" in r.stderr
    os.chmod(d / "r.sqlite", 0o644)
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        "/usr/bin/python3", "-m", "qrwbench", "compare", "--db", str(d / "r.sqlite")],
                       cwd=TOP, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "is not writable by this user" in r.stderr, r.stderr


def test_a_git_repository_the_rig_did_not_make_is_never_used_as_its_private_clone(tmp_path):
    """bisect/bench-series check out commits with -f and remove a stale
    index.lock in their private clone: never in a repository of the user's
    (a mistyped --workdir), whose work and live git lock stay as they are."""
    env = {**PYENV, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    mine = tmp_path / "mine"
    subprocess.run(["git", "init", "-q", str(mine)], check=True, env=env)
    (mine / "work.c").write_text("uncommitted work\n")
    (mine / ".git" / "index.lock").write_text("")
    with pytest.raises(QrwbenchError, match="git repository the rig did not make"):
        ktree.sync_clone(mine, tmp_path / "src")
    with pytest.raises(QrwbenchError, match="not the rig's private checkout"):
        ktree.checkout(mine, "HEAD")
    assert (mine / ".git" / "index.lock").exists() and (mine / "work.c").read_text() == "uncommitted work\n"
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("x")
    with pytest.raises(QrwbenchError, match="exists and is not the rig's private checkout"):
        ktree.sync_clone(full, tmp_path / "src")
    # a clone the rig makes carries its marker and is accepted again
    src = tmp_path / "src"
    subprocess.run(["git", "init", "-q", str(src)], check=True, env=env)
    subprocess.run(["git", "-C", str(src), "commit", "-q", "--allow-empty", "-m", "x"], check=True, env=env)
    ours = tmp_path / "ours"
    ktree.sync_clone(ours, src, log=lambda *a: None)
    assert (ours / ".git" / ktree.CLONE_MARK).is_file()
    ktree.sync_clone(ours, src, log=lambda *a: None)


def test_bench_plan_runs_before_make_deps_installed_numpy_and_scipy(tmp_path):
    """`make bench` checks its input before `make deps`: on a fresh machine
    Debian's python3 has no numpy or scipy yet, so `--plan` must not import them."""
    code = ("import sys; sys.modules.update(numpy=None, scipy=None, matplotlib=None, "
            "statsmodels=None); sys.argv = ['qrwbench', 'bench', '--plan', '--quick', '--db', "
            "sys.argv[1], '--runs', sys.argv[2]]; import runpy; runpy.run_module('qrwbench', "
            "run_name='__main__')")
    r = subprocess.run(["/usr/bin/python3", "-c", code, str(tmp_path / "r.sqlite"),
                        str(tmp_path / "runs")], cwd=TOP, env=PYENV, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["arm64-acqrel", "arm64-full", "x86_64-acqrel", "x86_64-full"]


@pytest.mark.parametrize("argv", [
    ["perf", "--cell", "x86_64/tcg/max/acqrel/rwlock/1", "--check"],
    ["series", "--cell", "x86_64/tcg/max/acqrel/rwlock/1", "--check"],
    ["bisect", "run", "--good", "a", "--bad", "b", "--cell",
     "x86_64/tcg/max/acqrel/rwlock/1", "--check"],
])
def test_make_perf_series_bisect_checks_run_without_numpy(argv):
    """The --check steps of make perf / bench-series / bisect run before make deps."""
    code = ("import sys, runpy; sys.modules.update(numpy=None, scipy=None, matplotlib=None, "
            "statsmodels=None); sys.argv = ['qrwbench'] + sys.argv[1:]; "
            "runpy.run_module('qrwbench', run_name='__main__')")
    r = subprocess.run(["/usr/bin/python3", "-c", code, *argv], cwd=TOP, env=PYENV,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]

"""Bisect over kernel commits (`make bisect`, `make bench-series`) and their
bad-input errors.

The regression is one `smp_mb();` added to `_raw_read_lock` in
kernel/locking/spinlock.c: on x86_64 (no preemption) `read_lock()` from the
module calls that out-of-line function, and under TCG one more `lock addl`
per read lock is the kind of cost a kernel developer bisects for. Each boot
is judged through the module's own acqrel qrwlock copy measured in the same
blocks (regress.compare_commits), which cancels the boot's speed.

The cell has two vCPUs, each reading its own lock (`nlocks=2`): the fast
path of every CPU, without the contention that sets the pace of one shared
lock. There `make bench-series` at the defaults (5 boots, threshold 5 %)
measured the barrier commit at -23.4 % (CI +-2 %) against GOOD (2026-12-05,
/work/series). One shared lock instead had cost -7 to -20 % with a CI of
+-7.5 % at 5 boots a side, and one vCPU -5 to -7 %, at the threshold (the
test then asked for 3 %). So both tests here run at the default threshold
and boots.

The two harmless commits (a comment in spinlock.c, a documentation line)
build to the same machine code as GOOD and as the barrier commit: the oracle
gives them those verdicts without a boot (objdiff), where measuring the
comment had once given -5.1 % [-16.1, +7.5] on a loaded host, skipped it,
and left git bisect unable to choose between it and the barrier commit.

It is a one-file change, so each bisect step rebuilds in about a minute in
the reused O= directory build/bisect/x86_64-acqrel/obj. (A barrier in
queued_read_lock, in include/asm-generic/qrwlock.h, would rebuild ~95 % of
the kernel per step: 5 min each, too slow for `make test`.) The first run on
a machine pays one full kernel build there (~6 min on 2 cores,
ccache-cold); later runs about 1 min per step. bench-series builds each
commit in a directory of its own (build/kernels/series/).
"""
import os
import subprocess
from pathlib import Path

import pytest

from conftest import TOP, kernel_tree
from qrwbench.cell import Cell
from qrwbench.results import store
from qrwbench.run import bisect, ktree, series

import synth

# Markers per test: guest (boots: bisect, bench-series), kernel (needs only
# the tree build/src/linux); the unmarked ones are host-only (make check).
BARRIERS = 1
CELL = ("x86_64/tcg/max/acqrel/rwlock:write_pct=0,cs_work=0,think_work=0,nlocks=2,"
        "reps=48,duration_ms=10/2")
# fixed dates: the test commits get the same shas in every run on one kernel
# tree, so bench-series's per-commit builds (build/kernels/series/) are reused
ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
           GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
           GIT_AUTHOR_DATE="2026-12-05T12:00:00Z", GIT_COMMITTER_DATE="2026-12-05T12:00:00Z",
           GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
PYENV = dict(os.environ, PYTHONPATH=str(TOP / "analysis"))


def git(repo, *args, input=None):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=ENV, input=input,
                          capture_output=True, text=True).stdout.strip()


def commit_file(repo, path, text, message):
    """Commit ``text`` as ``path`` on top of HEAD of a bare repository (plumbing:
    no checkout of the 80k files needed)."""
    blob = git(repo, "hash-object", "-w", "--stdin", input=text)
    idx = Path(repo) / "qrwb-test-index"
    e = dict(ENV, GIT_INDEX_FILE=str(idx))
    run = lambda *a, **kw: subprocess.run(["git", "-C", str(repo), *a], check=True, env=e,
                                          capture_output=True, text=True, **kw).stdout.strip()
    run("read-tree", "HEAD")
    run("update-index", "--cacheinfo", f"100644,{blob},{path}")
    tree = run("write-tree")
    sha = run("commit-tree", tree, "-p", "HEAD", "-m", message)
    run("update-ref", "HEAD", sha)
    idx.unlink()
    return sha


@pytest.fixture(scope="module")
def kernel_repo(tmp_path_factory):
    """build/src/linux at its HEAD + c1 harmless (a comment in spinlock.c),
    c2 smp_mb() in _raw_read_lock, c3 harmless (a documentation line)."""
    src = kernel_tree()
    repo = tmp_path_factory.mktemp("kernel") / "linux.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--shared", str(src), str(repo)],
                   check=True, env=ENV)
    good = git(repo, "rev-parse", "HEAD")
    spin = git(repo, "show", "HEAD:kernel/locking/spinlock.c")
    fn = "noinline void __lockfunc _raw_read_lock(rwlock_t *lock)\n{\n"
    assert spin.count(fn) == 1
    c1 = commit_file(repo, "kernel/locking/spinlock.c",
                     spin.replace(fn, "/* qrwbench test: a harmless comment */\n" + fn) + "\n",
                     "locking: a harmless comment")
    spin1 = git(repo, "show", "HEAD:kernel/locking/spinlock.c")
    c2 = commit_file(repo, "kernel/locking/spinlock.c",
                     spin1.replace(fn, fn + "\tsmp_mb();\n" * BARRIERS) + "\n",
                     "locking: full barrier in _raw_read_lock")
    doc = git(repo, "show", "HEAD:Documentation/locking/spinlocks.rst")
    c3 = commit_file(repo, "Documentation/locking/spinlocks.rst", doc + "\n\nqrwbench test line.\n",
                     "docs: a harmless line")
    return {"repo": repo, "good": good, "c1": c1, "c2": c2, "c3": c3}


@pytest.fixture(scope="module")
def bisected(kernel_repo, tmp_path_factory):
    d = tmp_path_factory.mktemp("bisect")
    state = bisect.prepare(kernel_repo["good"], kernel_repo["c3"], CELL, kernel_repo["repo"],
                           db=d / "r.sqlite", runs_root=d / "runs")   # the defaults
    result = bisect.run_bisect(state)
    print(result["output"])
    print(bisect.report(state, result))
    return state, result


@pytest.mark.guest
def test_bisect_names_the_barrier_commit(bisected, kernel_repo):
    state, result = bisected
    assert result["first_bad"] == kernel_repo["c2"], result["output"][-3000:]
    rep = bisect.report(state, result)
    assert "full barrier in _raw_read_lock" in rep
    assert "regression of qrwbench.x86_64.tcg.rwlock" in rep, rep
    # GOOD and BAD were booted and stored with their kernel tree commit
    conn = store.connect(state["db"])
    try:
        known = {c["commit"] for c in store.commits_with_results(conn, "kernel")}
    finally:
        conn.close()
    assert {kernel_repo["good"], kernel_repo["c3"]} <= known


@pytest.mark.guest
def test_bench_series_judges_the_barrier_commit_a_regression_at_the_defaults(
        kernel_repo, tmp_path):
    """make bench-series over the comment commit and the barrier commit, 5
    boots each and the 5 % threshold: the barrier commit is the regression."""
    db = tmp_path / "s.sqlite"
    shas = series.bench_series(CELL, kernel_repo["repo"], frm=kernel_repo["c1"],
                               to=kernel_repo["c2"], db=db, runs_root=tmp_path / "runs")
    assert shas == [kernel_repo["c1"], kernel_repo["c2"]]
    text = series.comparison(CELL, shas, kernel_repo["repo"], db=db)
    assert ("regression of qrwbench.x86_64.tcg.rwlock.max.2v.kernel/module.rwlock.kernel"
            in text and f"due to commit {kernel_repo['c2'][:12]}" in text), text


@pytest.mark.guest
def test_same_code_takes_the_verdict_of_the_commit_it_equals(bisected, kernel_repo):
    """The comment builds to GOOD's code, the barrier commit to BAD's (the
    documentation line changes no code): neither is booted."""
    state, result = bisected
    k = {n: kernel_repo[n][:12] for n in ("good", "c1", "c2", "c3")}
    out = result["output"]
    assert (f"{k['c1']} locking: a harmless comment: good (0): same machine code as "
            f"{k['good']}") in out, out[-3000:]
    assert (f"{k['c2']} locking: full barrier in _raw_read_lock: bad (1): same machine code as "
            f"{k['c3']}") in out, out[-3000:]
    assert f"{k['c1']}: 5 boots" not in out and f"{k['c2']}: 5 boots" not in out
    v = bisect.verdicts(state)
    assert v[kernel_repo["good"]]["how"] == v[kernel_repo["c3"]]["how"] == "measured"
    assert v[kernel_repo["good"]]["digest"] != v[kernel_repo["c3"]]["digest"]
    # spinlock.c is not in the module's reference copy: judged on the in-boot ratio
    assert v[kernel_repo["good"]]["reference"] == v[kernel_repo["c3"]]["reference"] is not None
    assert "reference copy has other code" not in out
    assert bisect.oracle(state, kernel_repo["c1"]) == bisect.GOOD
    assert "(it has the same machine code as " + k["c3"] in bisect.report(state, result)


# ------------------------------------------------------------------ bad input

def run_bisect(*args, kernel_src=None):
    argv = ["-m", "qrwbench", "bisect", "run", *args]
    if kernel_src:
        argv += ["--kernel-src", str(kernel_src)]
    return subprocess.run(["/usr/bin/python3", *argv], env=PYENV, capture_output=True, text=True,
                          cwd=TOP, timeout=120)


def one_error(p, *words):
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qrwbench: error: "), p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.mark.kernel
def test_unknown_commit_names_what_exists(kernel_repo):
    p = run_bisect("--good", "no-such-commit", "--bad", kernel_repo["c3"], "--cell", CELL,
                   kernel_src=kernel_repo["repo"])
    one_error(p, "GOOD", "no-such-commit", "unknown commit", "HEAD is")


@pytest.mark.kernel
def test_good_must_be_an_ancestor_of_bad(kernel_repo):
    p = run_bisect("--good", kernel_repo["c3"], "--bad", kernel_repo["good"], "--cell", CELL,
                   kernel_src=kernel_repo["repo"])
    one_error(p, "not an ancestor")


def test_dirty_kernel_tree_is_refused(tmp_path):
    repo = tmp_path / "linux"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "Makefile").write_text("x\n")
    git(repo, "add", "Makefile")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "commit", "-q", "--allow-empty", "-m", "two")
    (repo / "Makefile").write_text("changed\n")
    p = run_bisect("--good", "HEAD~1", "--bad", "HEAD", "--cell", CELL, kernel_src=repo)
    one_error(p, "dirty", "Makefile")
    p = run_bisect("--good", "HEAD~1", "--bad", "HEAD", "--cell", CELL, kernel_src=tmp_path / "nope")
    one_error(p, "not a git repository")
    with pytest.raises(Exception, match=r"is dirty \(1 changed files: Makefile\)"):
        series.bench_series(CELL, repo, frm="HEAD~1", to="HEAD", db=tmp_path / "r.sqlite")


@pytest.mark.kernel
@pytest.mark.parametrize("cell,words", [
    ("x86_64/tcg/max/acqrel/rwlock", ["need 6", "ARCH/ACCEL/CPU/VARIANT/WORKLOAD"]),
    ("sparc/tcg/max/acqrel/rwlock/1", ["unknown arch 'sparc'", "x86_64"]),
    ("x86_64/tcg/max/fast/rwlock/1", ["unknown variant 'fast'", "acqrel"]),
    ("x86_64/tcg/cortex-a57/acqrel/rwlock/1", ["cortex-a57", "valid are max"]),
    ("x86_64/tcg/max/acqrel/locks/1", ["unknown workload 'locks'", "rwlock"]),
    ("x86_64/tcg/max/acqrel/rwlock:frob=1/1", ["unknown parameter 'frob'", "write_pct"]),
    ("x86_64/tcg/max/acqrel/rwlock/0", ["vCPUs"]),
])
def test_bad_cell_names_what_exists(kernel_repo, cell, words):
    p = run_bisect("--good", kernel_repo["good"], "--bad", kernel_repo["c3"], "--cell", cell,
                   kernel_src=kernel_repo["repo"])
    one_error(p, *words)


@pytest.mark.kernel
def test_make_bisect_reports_the_error_in_one_line():
    kernel_tree()       # without it make bisect runs make tree first (a 2 GB extraction)
    p = subprocess.run(["make", "-s", "--no-print-directory", "bisect", "GOOD=no-such-commit",
                        "BAD=HEAD", f"CELL={CELL}"], cwd=TOP, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode != 0
    assert "qrwbench: error: GOOD 'no-such-commit': unknown commit" in p.stderr, p.stderr


def stand_in_tree(repo: Path) -> Path:
    """A git repository with only the files ktree.check_tree asks for, tagged
    qrwbench-base: the kernel tree of a test that compares stored runs only."""
    repo.mkdir()
    git(repo, "init", "-q")
    for f in ktree.KERNEL_FILES:
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / f).write_text("")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "stand-in kernel tree")
    git(repo, "tag", "qrwbench-base")
    return repo


def run_series_compare(tmp_path, db):
    """`qrwbench series --compare-only` on a stand-in tree (no build/src/linux needed)."""
    return subprocess.run(["/usr/bin/python3", "-m", "qrwbench", "series", "--cell", CELL, "--db", str(db),
                           "--compare-only", "--kernel-src", str(stand_in_tree(tmp_path / "linux"))],
                          env=PYENV, cwd=TOP, capture_output=True, text=True)


def test_series_cell_matching_nothing_lists_what_exists(tmp_path):
    db = tmp_path / "r.sqlite"
    store.connect(db).close()
    p = run_series_compare(tmp_path, db)
    assert p.returncode == 2
    assert p.stderr.startswith("qrwbench: error: CELL ") and "matches no stored runs" in p.stderr
    assert "cells with runs: none" in p.stderr


def test_series_cell_matching_nothing_lists_the_cells_that_have_runs(tmp_path):
    db = tmp_path / "r.sqlite"
    run = synth.atomics_run(tmp_path / "runs", "other", vcpus=2)
    assert store.import_run(str(db), run).status == "ok"
    p = run_series_compare(tmp_path, db)
    assert p.returncode == 2
    assert "matches no stored runs" in p.stderr
    assert "cells with runs: x86_64/tcg/qemu64/acqrel/atomics/2" in p.stderr, p.stderr


@pytest.mark.kernel
def test_series_lists_from_and_each_commit_after_it(kernel_repo):
    shas = series.commits(kernel_repo["repo"], kernel_repo["good"], kernel_repo["c3"])
    assert shas == [kernel_repo[k] for k in ("good", "c1", "c2", "c3")]
    with pytest.raises(Exception, match="not an ancestor"):
        series.commits(kernel_repo["repo"], kernel_repo["c3"], kernel_repo["good"])
    with pytest.raises(Exception, match="FROM 'nope': unknown commit"):
        series.commits(kernel_repo["repo"], "nope", "HEAD")


# ------------------------------------------------- GOOD and LKP's stability rule

def _store_good(tmp_path, levels, start=0):
    """One atomics boot per level at kernel commit 'b'*40 (synth's), each
    boot's throughput scaled by its level (atomics have no in-boot reference:
    the per-boot values are the boots' own levels)."""
    db = tmp_path / "good.sqlite"
    for i, lvl in enumerate(levels, start):
        run = synth.atomics_run(tmp_path / "runs", f"good-{i}", rate=50e6 * lvl, cv=0.01)
        assert store.import_run(db, run).status == "ok"
    return db


def _good(db):
    conn = store.connect(db)
    return conn, Cell.of_run(conn.execute("SELECT * FROM runs").fetchone())


def test_a_stable_good_boots_no_more(tmp_path):
    db = _store_good(tmp_path, [1.0, 1.01, 0.99, 1.0, 1.02])
    conn, cell = _good(db)
    runs = ktree.cell_runs(conn, cell, "b" * 40)
    more = []
    try:
        assert bisect.good_runs(conn, cell, runs, lambda: more.append(1)) == (runs, "")
    finally:
        conn.close()
    assert not more


def test_an_unstable_good_is_measured_once_more_then_flagged_not_refused(tmp_path):
    """Boots 30 % apart (the CI host of 2026-12-06): one more batch is booted,
    and when GOOD still fails LKP's rule bisect goes on with all its boots and
    says why, instead of stopping with 'cannot bisect'."""
    spread = [0.85, 1.0, 1.15, 0.9, 1.1]
    db = _store_good(tmp_path, spread)
    conn, cell = _good(db)
    runs = ktree.cell_runs(conn, cell, "b" * 40)

    def measure_more():
        _store_good(tmp_path, spread, start=len(spread))
        return ktree.cell_runs(conn, cell, "b" * 40)

    try:
        good, why = bisect.good_runs(conn, cell, runs, measure_more)
    finally:
        conn.close()
    assert len(good) == 10 and set(runs) < set(good)
    assert "min-max gap" in why and "atomic_add_return" in why, why
    # ... and the report says so where bisect could not name a commit
    rep = bisect.report({"good_unstable": f"after 10 boots: {why}"}, {"candidates": ["c" * 40]})
    assert "(skipped steps; GOOD failed LKP's stability rule after 10 boots: qrwbench." in rep, rep
    assert "min-max gap" in rep and rep.endswith("it is one of: cccccccccccc"), rep

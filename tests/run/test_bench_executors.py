"""`make bench` is one loop over executors (run/executor.py): run_matrix
hands the first boots, then each round of the real planner, to whatever
executor it is given; the local and the remote executor each boot a batch
through the same Progress (claim, record), with their own progress lines
and budget checks. No guest is booted: the executors' boots write synthetic
run directories (tests/synth.py)."""
import sqlite3

import pytest

import synth
from qrwbench import matrix
from qrwbench.results import store
from qrwbench.run import audits, bench, bench_remote, boot, remote
from qrwbench.run.executor import Batch, Local, Progress

MATRIX = """
[run]
boots = 2
timeout_s = 60
mem_mb = 256
seed = 11
max_boots = {max_boots}
target_pct = 0.1
[[target]]
arch = "x86_64"
accel = "tcg"
cpu = "max"
[[workload]]
name = "atomics"
variants = ["acqrel"]
vcpus = [1, 2]
params = {{ reps = 8, duration_ms = 2, ops = "atomic_add_return" }}
"""
RIG = {"rig_commit": "e" * 40, "rig_dirty": False, "rig_diff_sha256": "", "rig_subject": "t"}


def fake_run(cell, run_dir) -> dict:
    """The run directory of a boot of ``cell`` that went well; its status."""
    synth.atomics_run(run_dir.parent, run_dir.name, vcpus=cell.vcpus, accel=cell.accel,
                      cpu_model=cell.cpu, kernel_variant=cell.variant,
                      rig_commit=RIG["rig_commit"])
    return {"status": "ok", "reason": "", "wall_s": 2.0 * cell.vcpus}


class Recorder:
    """An executor that boots nothing: it writes each claimed boot's run
    directory and records which boots it was given, batch by batch."""
    width = 1

    def __init__(self):
        self.batches = []

    def prepare(self, m):
        return {}

    def run(self, batch, progress):
        self.batches.append((batch.round, [(b.cell.key(), b.index) for b in batch.boots]))
        for b in batch.boots:
            job = progress.claim(b)
            if job is not None:
                st = fake_run(b.cell, job.run_dir)
                store.import_run(progress.conn, job.run_dir)
                progress.record(job, st)
        return []


@pytest.fixture
def no_kernels(monkeypatch):
    """No kernel, audit or git needed: the loop is what is tested."""
    monkeypatch.setattr(boot, "kernel_paths", lambda arch, variant: None)
    monkeypatch.setattr(audits, "ensure", lambda cells, log=print: None)
    monkeypatch.setattr(bench.provenance, "rig_state", lambda repo=None: dict(RIG))


def load(tmp_path, max_boots=4):
    p = tmp_path / "m.toml"
    p.write_text(MATRIX.format(max_boots=max_boots))
    return matrix.load(p)


def test_run_matrix_hands_the_first_boots_then_the_planners_rounds_to_its_executor(
        tmp_path, no_kernels, capsys):
    m = load(tmp_path)
    db, runs = tmp_path / "db.sqlite", tmp_path / "runs"
    ex = Recorder()
    assert bench.run_matrix(m, db, False, summary=False, runs=runs, executor=ex) == 0
    cells = matrix.cells(m)
    first = [(b.cell.key(), b.index) for b in matrix.boots(m, cells)]
    assert ex.batches[0] == (0, first)            # the matrix's seeded order
    assert len(ex.batches) > 1, "a CI target of 0.1 % asks for rounds"
    assert [r for r, _ in ex.batches] == list(range(len(ex.batches)))
    # each round continues each cell's boots where they stood; none twice, none past max_boots
    given = [kb for _, boots in ex.batches for kb in boots]
    assert len(given) == len(set(given))
    for c in cells:
        idx = sorted(i for k, i in given if k == c.key())
        assert idx == list(range(len(idx))) and len(idx) <= m.max_boots
    conn = sqlite3.connect(db)
    plan = dict(conn.execute("SELECT cell, boots FROM plan_cells").fetchall())
    assert plan == {c.key(): sum(1 for k, _ in given if k == c.key()) for c in cells}
    out = capsys.readouterr().out
    assert f"bench: {len(given)} runs ok, 0 failed, 0 already done" in out
    assert "bench: round 1: " in out
    assert "bench: host load: not measured" in out     # the recorder boots nothing

    # again on the same store: the same first boots, each one claimed and skipped
    again = Recorder()
    assert bench.run_matrix(m, db, False, summary=False, runs=runs, executor=again) == 0
    assert again.batches[0] == (0, first)
    assert f"0 runs ok, 0 failed, {len(given)} already done" in capsys.readouterr().out


def test_without_rounds_the_executor_gets_only_the_first_boots(tmp_path, no_kernels):
    m = load(tmp_path, max_boots=2)
    ex = Recorder()
    bench.run_matrix(m, tmp_path / "db.sqlite", False, summary=False, runs=tmp_path / "runs",
                     executor=ex)
    assert [r for r, _ in ex.batches] == [0]


def progress_for(tmp_path, budget_s=float("inf")):
    from qrwbench.analysis import planner
    plan = planner.Plan({"in-boot": 1.0, "kernel": 2.0}, 9, budget_s)
    return Progress(plan, store.connect(tmp_path / "db.sqlite"), tmp_path / "runs", RIG)


def test_local_announces_each_boot_as_it_starts(tmp_path, monkeypatch, capsys):
    m = load(tmp_path)
    boots = matrix.boots(m, matrix.cells(m))
    ran = []

    def boot_one(cell, seed, run_dir, timeout_s, mem_mb, kvm_probe, pin=False):
        ran.append((cell.key(), seed, run_dir, kvm_probe, pin))
        return fake_run(cell, run_dir)

    monkeypatch.setattr(boot, "boot_one", boot_one)
    ex, progress = Local(), progress_for(tmp_path)
    assert ex.prepare(m) == {} and ex.width == 1
    stored = tmp_path / "runs" / boot.run_id(boots[0], RIG, "")   # one boot is stored already
    fake_run(boots[0].cell, stored)
    store.import_run(progress.conn, stored)
    assert ex.run(Batch(boots), progress) == []
    assert [r[:2] for r in ran] == [(b.cell.key(), b.seed) for b in boots[1:]]
    assert all(r[3] == boot.NOT_ASKED and r[4] is False for r in ran)
    assert progress.skipped == 1 and progress.done == len(boots) - 1
    lines = capsys.readouterr().out.splitlines()
    n = len(boots)
    assert lines[0] == (f"[2/{n}] {boots[1].cell.label()} boot {boots[1].index + 1} "
                        f"(console: {ran[0][2] / 'console.log'})")
    assert lines[1].startswith(f"[3/{n}] ETA ") and len(lines) == n - 1


def test_local_leaves_the_boots_of_a_round_the_budget_cannot_pay_for(tmp_path, monkeypatch):
    m = load(tmp_path)
    boots = matrix.boots(m, matrix.cells(m))
    monkeypatch.setattr(boot, "boot_one", lambda *a, **k: pytest.fail("over budget"))
    ex, progress = Local(), progress_for(tmp_path, budget_s=0.5)   # a boot costs 1 s at first
    ex.prepare(m)
    assert ex.run(Batch(boots, round=1), progress) == boots
    assert progress.run_cell == {}, "a boot left for the budget is not claimed"
    # the first boots run whatever the budget
    monkeypatch.setattr(boot, "boot_one", lambda cell, seed, run_dir, *a, **k: fake_run(cell, run_dir))
    assert ex.run(Batch(boots), progress) == [] and progress.done == len(boots)


def fake_probe(name):
    return remote.Host(name, ok=True, machine="x86_64", cpus=4, cpu_model="Fake",
                       qemu={"x86_64": "QEMU 9"}, kvm="no /dev/kvm" if name == "b" else "")


def test_remote_asks_each_host_for_kvm_and_announces_each_boot_as_it_ends(
        tmp_path, monkeypatch, capsys):
    m = load(tmp_path)
    boots = matrix.boots(m, matrix.cells(m))[:3]
    m.targets = m.targets + [{**m.targets[0], "accel": "kvm", "cpu": "host", "optional": True}]
    monkeypatch.setattr(remote, "probe", fake_probe)

    def run_boots(hosts, todo, m_, runs, conn, rig, on_done):
        for i, job in enumerate(reversed(todo)):        # GNU parallel's order, not ours
            st = fake_run(job.boot.cell, job.run_dir)
            store.import_run(conn, job.run_dir)
            on_done(job, {**st, "host": "ab"[i % 2]})

    monkeypatch.setattr(bench_remote, "run_boots", run_boots)
    ex = bench_remote.Remote(["a", "b"])
    assert ex.prepare(m) == {"x86_64": {"usable": True, "booted": False, "reason": "no /dev/kvm"}}
    assert ex.width == 2
    progress = progress_for(tmp_path)
    capsys.readouterr()
    assert ex.run(Batch(boots), progress) == []
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (f"first boots: 3 boots on 2 hosts (GNU parallel; its log: "
                        f"{tmp_path / 'runs' / '.remote'})")
    last = boots[-1]
    rid = boot.run_id(last, RIG, "")
    assert lines[1].startswith("first boots [1/3] ETA ") and lines[1].endswith(
        f" {last.cell.label()} boot {last.index + 1} on a: ok "
        f"(console: {tmp_path / 'runs' / rid / 'console.log'})")
    assert [l.split(" on ")[1][0] for l in lines[1:]] == ["a", "b", "a"]
    assert lines[3].startswith("first boots [3/3] ETA 0:00 ")
    assert progress.done == 3 and len(lines) == 4


def test_remote_runs_a_round_whole_or_not_at_all(tmp_path, monkeypatch):
    m = load(tmp_path)
    boots = matrix.boots(m, matrix.cells(m))
    monkeypatch.setattr(remote, "probe", fake_probe)
    monkeypatch.setattr(bench_remote, "run_boots", lambda *a: pytest.fail("over budget"))
    ex = bench_remote.Remote(["a"])
    ex.prepare(m)
    progress = progress_for(tmp_path, budget_s=60.0)
    progress.done = 2                   # 2 boots in the 40 s spent when the round was planned
    progress.t0 -= 45.0                 # 45 s now: one more boot of 20 s ends past the 60 s
    assert ex.run(Batch(boots, round=1, planned_at_s=40.0), progress) == boots
    assert progress.run_cell == {}
    ran = []
    monkeypatch.setattr(bench_remote, "run_boots", lambda hosts, todo, *a: ran.extend(todo))
    progress.plan.budget_s = 66.0       # room for one boot more: the round runs whole
    assert ex.run(Batch(boots, round=1, planned_at_s=40.0), progress) == []
    assert [j.boot for j in ran] == boots


def test_remote_refuses_pinning():
    m = matrix.Matrix(path=None, boots=1, timeout_s=1, mem_mb=1, seed=1, pin=True)
    with pytest.raises(bench.InputError, match="pin = true pins vCPUs on this host: not with HOSTS"):
        bench_remote.Remote(["a"]).prepare(m)

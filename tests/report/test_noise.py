"""noise: CV, A/A and drift figures from a results DB (synthetic runs)."""
import pytest

import synth
from qrwbench import cli
from qrwbench.results import store
from qrwbench.report import noise


def _db(tmp_path, name, n_runs=3, **kw):
    runs = tmp_path / f"runs-{name}"
    db = str(tmp_path / f"{name}.sqlite")
    for i in range(n_runs):
        store.import_run(db, synth.atomics_run(runs, f"{name}{i}", started_at=f"2026-12-01T00:0{i}:00Z",
                                               **kw))
    return db


def _samples(db):
    return store.load_samples(store.connect(db, create=False))


def test_within_boot_cv_follows_the_synthetic_noise(tmp_path):
    quiet = noise.cv_table(_samples(_db(tmp_path, "q", cv=0.02, reps=10)))
    loud = noise.cv_table(_samples(_db(tmp_path, "l", cv=0.20, reps=10)))
    g = ("x86_64", "qemu64", 2, "atomics")
    assert set(quiet) == {g} == set(loud)
    assert 0.01 < quiet[g]["within"] < 0.04, quiet
    assert 0.12 < loud[g]["within"] < 0.30, loud
    assert loud[g]["mde_boot"] > quiet[g]["mde_boot"] > 0
    assert quiet[g]["cells"] == 8          # 4 orderings x 2 copies


def test_aa_table_separates_an_injected_copy_difference(tmp_path):
    same = noise.aa_table(_samples(_db(tmp_path, "s", cv=0.02)))
    slow = noise.aa_table(_samples(_db(tmp_path, "d", cv=0.02, copy_factor=0.7)))
    key = ("x86_64", "qemu64", "atomics")
    k, n = slow["copy"][key]
    assert n == 4 and k == 4, slow["copy"]             # every ordering's copy 1 is 30 % slower
    assert slow["copy, one boot"][key][0] == slow["copy, one boot"][key][1] > 0
    assert same["copy"][key] == [0, 4], same["copy"]
    # 3 boots: 2 consecutive pairs per ordering are judged (4 orderings)
    _, n = same["boot"][key]
    assert n == 8, same["boot"]


def test_window_drift_shows_a_slow_start(tmp_path):
    s = _samples(_db(tmp_path, "w", cv=0.02, reps=10))
    flat = noise.window_drift(s, width=10)
    assert all(0.95 < v < 1.05 for v in flat.values()), flat
    for x in s:
        if x["ord"] < 10:
            x["throughput"] *= 0.5
    slow = noise.window_drift(s, width=10)
    key = ("x86_64", "qemu64", "atomics")
    assert slow[key + (0,)] < 0.6
    assert all(0.9 < slow[key + (b,)] < 1.1 for b in range(1, 8))
    with pytest.raises(Exception, match="width 0"):
        noise.window_drift(s, width=0)


def test_main_prints_every_section(tmp_path, capsys):
    db = _db(tmp_path, "m", n_runs=2)
    assert cli.main(["noise", db]) == 0
    out = capsys.readouterr().out
    for head in ("## within-boot CV", "## A/A false positives", "copy: ", "boot: ",
                 "copy, one boot: ", "## window drift"):
        assert head in out, head


@pytest.mark.parametrize("args,message", [(["missing.sqlite"], "does not exist"),
                                          (["DB", "--commit", "ffff"], "no results for rig commit 'ffff'")])
def test_main_bad_input_is_one_line(tmp_path, capsys, args, message):
    db = _db(tmp_path, "e", n_runs=1)
    args = [db if a == "DB" else str(tmp_path / a) if a.endswith(".sqlite") else a for a in args]
    assert cli.main(["noise", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err

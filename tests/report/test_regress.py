"""regress: 0-day style regression check between commits, step detection over history."""


import numpy as np
import pytest

import synth
from qrwbench import cli
from qrwbench.results import store
from qrwbench.analysis import history, verdicts
from qrwbench.report import regress
from qrwbench.errors import QrwbenchError



@pytest.fixture
def repo(tmp_path):
    """A git repository with commits c0..c7 (subjects 'change 0'..'change 7')."""
    path = tmp_path / "rig"
    shas = synth.empty_commits(path, 8)
    return path, shas


def _fill(tmp_path, shas, levels, *, cv=0.02, reps=8, skip=(), boots=5, boot_cv=0.01):
    """``boots`` atomics runs per commit; ``levels[i]`` scales every variant at
    commit i, and each boot's speed is drawn with CV ``boot_cv`` (regress
    compares boots: one value per boot, the trimmed mean of its blocks' log
    throughputs, perboot.boot_values; atomics have no in-boot reference)."""
    db = str(tmp_path / "db.sqlite")
    rng = np.random.default_rng(11)
    for i, (sha, lvl) in enumerate(zip(shas, levels)):
        if i in skip:
            continue
        for b in range(boots):
            speed = rng.lognormal(0.0, np.sqrt(np.log(1 + boot_cv ** 2)))
            run = synth.atomics_run(tmp_path / "runs", f"run-{i}-{b}", rate=50e6 * lvl * speed,
                                    cv=cv, reps=reps, rig_commit=sha,
                                    started_at=f"2026-12-01T{b:02d}:{i:02d}:00Z")
            assert store.import_run(db, run).status == "ok"
    return db


def test_step_is_reported_as_regression_of_that_commit(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 7 + [0.88])
    res = regress.regress(db, target=shas[7], repo=path)
    assert res.base == shas[6]
    assert res.exit_code == 1
    assert len(res.regressions) == 4       # the four variants (copy 0)
    text = res.text()
    line = [l for l in text.splitlines() if "regression of" in l][0]
    assert line.startswith("-1")
    assert "regression of qrwbench.x86_64.tcg.atomics." in line
    assert f"due to commit {shas[7][:12]} change 7" in line
    assert "%stddev     %change         %stddev" in text
    for r in res.regressions:
        assert -15 < r.test.pct_change < -9


def test_identical_code_reports_no_regression(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 8)
    for target in shas[1:]:
        res = regress.regress(db, target=target, repo=path)
        assert res.exit_code == 0 and not res.regressions
        assert all(r.status in (verdicts.NO_CHANGE, verdicts.NOT_JUDGED) for r in res.results)


def test_improvement_is_reported_but_exits_zero(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 7 + [1.15])
    res = regress.regress(db, target=shas[7], repo=path)
    assert res.exit_code == 0
    assert res.results and all(r.status == verdicts.IMPROVEMENT for r in res.results)
    assert "improvement of" in res.text()


def test_threshold_hides_small_significant_changes(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 7 + [0.96], cv=0.005, reps=12)
    assert regress.regress(db, target=shas[7], repo=path, threshold=0.05).exit_code == 0
    assert regress.regress(db, target=shas[7], repo=path, threshold=0.02).exit_code == 1


def test_default_base_skips_commits_without_results(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 8, skip=(5, 6))
    assert regress.regress(db, target=shas[7], repo=path).base == shas[4]


def test_unstable_samples_could_not_judge(tmp_path, repo):
    """Boots differing by 25 % and no in-boot reference: the CI is far wider
    than the 5 % threshold, so nothing is judged (bisect measures more)."""
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 8, boot_cv=0.25)
    res = regress.regress(db, target=shas[7], repo=path)
    assert res.exit_code == 0
    assert res.results and all(r.status == verdicts.NOT_JUDGED for r in res.results)
    assert "could not judge qrwbench." in res.text()
    assert "includes both no change and a 5% change: measure more boots" in res.text()


def test_a_clear_regression_is_judged_with_a_ci_wider_than_the_threshold(tmp_path, repo):
    """The CI failure of 2026-12-03: one barrier measured -7.4 % with a CI of
    +-5.1 %, and the old rule (a CI wider than +-threshold is not judged) could
    not call it. A 15 % step with boots differing by 6 %: the CI is wider
    than +-5 % but excludes no change, and the estimate is beyond 5 %."""
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 7 + [0.85], boot_cv=0.06)
    res = regress.regress(db, target=shas[7], repo=path)
    widths = [r.effect.half_width_pct for r in res.results]
    assert min(widths) > 5, widths
    assert res.exit_code == 1
    assert res.results and all(r.status == verdicts.REGRESSION for r in res.results)


def test_a_small_change_whose_ci_reaches_the_threshold_is_not_no_change(tmp_path, repo):
    """Significantly slower by less than the threshold, with a CI reaching
    past it: neither a regression nor "no change" (bisect must not call it good)."""
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 7 + [0.97], boot_cv=0.02)
    res = regress.regress(db, target=shas[7], repo=path)
    for r in res.results:
        low = r.effect.low
        if r.status == verdicts.NO_CHANGE:
            assert np.expm1(low) * 100 > -5, r.why
        else:
            assert r.status == verdicts.NOT_JUDGED, r.status
    assert any(r.status == verdicts.NOT_JUDGED for r in res.results), [
        (r.status, r.why) for r in res.results]


def test_identical_commits_are_equivalent(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 8, boot_cv=0.005)
    res = regress.regress(db, target=shas[7], repo=path)
    assert res.results and all(r.status == verdicts.NO_CHANGE for r in res.results)
    assert all(r.why.startswith("equivalent within +-") for r in res.results), \
        [r.why for r in res.results]


def test_bad_commits_are_one_line_errors(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 8, skip=(0, 3))
    with pytest.raises(QrwbenchError, match="unknown commit 'nosuchref'"):
        regress.regress(db, target="nosuchref", repo=path)
    with pytest.raises(QrwbenchError, match="has no results"):
        regress.regress(db, target=shas[7], base=shas[3], repo=path)
    with pytest.raises(QrwbenchError, match="no results for rig commit"):
        regress.regress(db, target=shas[0], repo=path)
    with pytest.raises(QrwbenchError, match="no earlier rig commit"):
        regress.regress(db, target=shas[1], repo=path)
    with pytest.raises(QrwbenchError, match="are the same rig commit"):
        regress.regress(db, target=shas[7], base=shas[7], repo=path)     # BASE=HEAD
    with pytest.raises(QrwbenchError, match="are the same rig commit"):
        regress.regress(db, target="HEAD", base=shas[7][:10], repo=path)


def test_bad_commit_errors_name_the_commits_with_results(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 8, skip=(0, 1, 2, 3, 4, 5), boots=3)
    listing = f"{shas[6][:12]}, {shas[7][:12]}"
    for kw in ({"target": "nosuchref"}, {"target": shas[7], "base": "nosuchref"},
               {"target": shas[7], "base": shas[3]}):
        with pytest.raises(QrwbenchError) as e:
            regress.regress(db, repo=path, **kw)
        assert str(e.value).endswith(f"commits with results: {listing}"), str(e.value)


def test_base_with_results_for_other_cells_only(tmp_path, repo):
    path, shas = repo
    db = str(tmp_path / "db.sqlite")
    for b in range(3):
        for i, vcpus in ((5, 1), (6, 2)):
            run = synth.atomics_run(tmp_path / "runs", f"r{i}-{b}", vcpus=vcpus, rig_commit=shas[i],
                                    started_at=f"2026-12-01T0{b}:0{i}:00Z")
            store.import_run(db, run)
    with pytest.raises(QrwbenchError, match=r"has results but none for the cells of"):
        regress.regress(db, target=shas[6], base=shas[5], repo=path)
    # and the default base skips it: no earlier commit has the same cells
    with pytest.raises(QrwbenchError, match="no earlier rig commit"):
        regress.regress(db, target=shas[6], repo=path)


def test_cli_exit_status(tmp_path, repo, capsys):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 7 + [0.85])
    assert cli.main(["--db", db, "regress", "--target", shas[7], "--repo", str(path)]) == 1
    assert "regression of" in capsys.readouterr().out
    assert cli.main(["regress", "--db", db, "--target", shas[6], "--repo", str(path),
                     "--base", shas[5]]) == 0
    assert cli.main(["regress", "--db", db, "--target", "HEAD~20", "--repo",
                     str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qrwbench: error: unknown commit") and err.count("\n") == 1


def test_history_step_detected_at_the_right_commit(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 5 + [0.9] * 3, reps=5)
    conn = store.connect(db)
    samples = store.load_samples(conn)
    conn.close()
    hs = history.histories(samples, repo=path, n_resamples=100)
    assert len(hs) == 4                    # four variants of copy 0
    for h in hs:
        assert h.commits == shas
        assert h.changes == [5]
        assert shas[5][:12] in h.change_lines()[0]
    lines = regress.steps(db, repo=path)
    assert len(lines) == 4 and all(shas[5][:12] in l for l in lines)


def test_flat_history_has_no_steps(tmp_path, repo):
    path, shas = repo
    db = _fill(tmp_path, shas, [1.0] * 8, reps=5)
    assert regress.steps(db, repo=path) == []


def test_commit_order_follows_git_not_time(tmp_path, repo):
    path, shas = repo
    samples = [{"rig_commit": c, "started_at": f"2026-12-01T00:{9 - i:02d}:00Z"}
               for i, c in enumerate(shas)]
    assert history.commit_order(samples) == shas[::-1]
    assert history.commit_order(samples, repo=path) == shas


def test_bench_series_table_judges_each_commit_against_the_one_before(tmp_path, repo):
    """series.comparison over kernel commits: the commit with a 10 % step is
    named in a 0-day line, the unchanged ones are not."""
    from qrwbench.run import series
    path, shas = repo
    db = str(tmp_path / "db.sqlite")
    rng = np.random.default_rng(3)
    for i, lvl in enumerate([1.0, 1.0, 0.9]):
        for b in range(5):
            speed = rng.lognormal(0.0, 0.005)
            run = synth.atomics_run(tmp_path / "runs", f"k{i}-{b}", rate=50e6 * lvl * speed,
                                    cpu_model="max", kernel_tree_commit=shas[i])
            assert store.import_run(db, run).status == "ok"
    text = series.comparison("x86_64/tcg/max/acqrel/atomics/2", shas[:3], path, db=db)
    assert "regression of qrwbench.x86_64.tcg.atomics.max.2v.inline.atomic_add_return" in text
    assert f"due to commit {shas[2][:12]} change 2" in text
    assert f"due to commit {shas[1][:12]}" not in text


def _series_rwlock_db(tmp_path, shas, factors_per_commit):
    db = str(tmp_path / "db.sqlite")
    for i, f in enumerate(factors_per_commit):
        for b in range(5):
            run = synth.rwlock_run(tmp_path / "runs", f"r{i}-{b}", write_pcts=(0,), factors=f,
                                   cpu_model="max", kernel_tree_commit=shas[i])
            assert store.import_run(db, run).status == "ok"
    return db


def test_bench_series_compares_raw_when_a_commit_changes_the_reference_copy(tmp_path, repo,
                                                                           monkeypatch):
    """A commit that speeds up the kernel's rwlock and the module's acqrel copy
    alike (both compiled against the changed headers, as arm64's LSE
    sub_return fix does) leaves the kernel/module ratio unchanged: when the
    reference copy's code differs between the commits, the series compares raw
    throughput and reports the change; when it is the same, the ratio."""
    from qrwbench.run import series
    path, shas = repo
    db = _series_rwlock_db(tmp_path, shas, [{}, {"acqrel": 1.25}])
    cell = "x86_64/tcg/max/acqrel/rwlock/2"
    digests = {shas[0]: "a" * 64, shas[1]: "b" * 64}
    monkeypatch.setattr(series, "reference_digest_at", lambda c, s, sha: digests[sha])
    text = series.comparison(cell, shas[:2], path, db=db)
    assert "changes the module's acqrel reference copy" in text, text
    assert "improvement of qrwbench.x86_64.tcg.rwlock.max.2v.kernel.rwlock" in text, text
    assert "improvement of qrwbench.x86_64.tcg.rwlock.max.2v.module.rwlock.acqrel" in text, text
    digests[shas[1]] = "a" * 64           # the same reference: the ratio, unchanged
    text = series.comparison(cell, shas[:2], path, db=db)
    assert "reference copy" not in text and "improvement" not in text, text
    assert "kernel/module" in text

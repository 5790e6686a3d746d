"""No traceback for any command line: bad option values (and --db values) for
report, compare, regress and import, hand-picked and seeded; nothing the user
owns is touched (the contract: tests/fuzz.py)."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from fuzz import nested_json, run_main, short
from qrwbench import cli


# (subcommand args after the DB), with {repo} {c1} {c2} {file} {dir} {userdir} {out}
# {spare} {nul} placeholders; every one must give 0/1/2 and a clean error.
CLI_CASES = [
    ["report", "--min-effect", "nan", "--out", "{out}"],
    ["report", "--min-effect", "-5", "--out", "{out}"],
    ["report", "--alpha", "2", "--out", "{out}"],
    ["report", "--alpha", "5e-324", "--out", "{out}"],
    ["report", "--out", "{file}"],
    ["report", "--out", "{userdir}"],
    ["report", "--out", "{file}/sub"],
    ["report", "--out", ""],
    ["report", "--out", "."],
    ["report", "--out", "{nul}"],
    ["report", "--commit", "zzzz", "--out", "{out}"],
    ["report", "--audit", "{file}", "--out", "{out}"],
    ["report", "--audit", "{dir}", "--out", "{out}"],
    ["report", "--baseline", "atomics=bogus", "--out", "{out}"],
    ["compare", "--min-effect", "nan"],
    ["compare", "--min-effect", "-inf"],
    ["compare", "--min-effect", "1e400"],
    ["compare", "--min-effect", "1e308"],
    ["compare", "--min-effect", "abc"],
    ["compare", "--alpha", "nan"],
    ["compare", "--alpha", "0"],
    ["compare", "--alpha", "1e-400"],
    ["compare", "--alpha", ""],
    ["compare", "--correction", "bogus"],
    ["compare", "--baseline", "x"],
    ["compare", "--baseline", "="],
    ["compare", "--baseline", "atomics="],
    ["compare", "--baseline", "atomics=bogus"],
    ["compare", "--baseline", "bogus=full"],
    ["compare", "--baseline", "rwlock=full", "--baseline", "rwlock=relaxed"],
    ["compare", "--commit", ""],
    ["compare", "--commit", "HEAD"],
    ["compare", "--commit", "HEAD", "--repo", "{repo}"],
    ["compare", "--commit", "1"],
    ["compare", "--commit", "{nul}"],
    ["compare", "--commit", "all", "--arch", "\u00e9"],
    ["compare", "--workload", "rwlock", "--impl", "kernel"],
    ["compare", "--audit", "{missing}"],
    ["compare", "--audit", "{deepjson}"],
    ["compare", "--audit", "{audit_odd}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", ""],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "-"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "--all"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "{nul}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "HEAD~99999"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "HEAD^{{tree}}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", ":/change"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "{c2}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "{c0}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "\u00e9\n"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--base", "a" * 5000],
    ["regress", "--target", "{c1}", "--repo", "{repo}", "--base", "{c2}"],
    ["regress", "--target", "{nul}", "--repo", "{repo}"],
    ["regress", "--target", "{c2}", "--repo", "{file}"],
    ["regress", "--target", "{c2}", "--repo", "{missing}"],
    ["regress", "--target", "{c2}", "--repo", "{nul}"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--threshold", "nan"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--threshold", "100"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--threshold", "1e-320"],
    ["regress", "--target", "{c2}", "--repo", "{repo}", "--alpha", "1"],
    ["regress", "--key", "kernel"],
    ["regress", "--key", "kernel", "--repo", "{repo}"],
    ["regress", "--history"],
    ["regress", "--history", "--key", "kernel", "--repo", "{file}"],
    ["import", "{missing}"],
    ["import", "{file}"],
    ["import", "{dir}"],
    ["import", "{userdir}"],
    ["import", "{nul}"],
    ["import", "{badrun}"],
    ["import", "{spare}", "{spare}"],
]
CLI_DB_ARGS = [None, "{missing_db}", "{file}", "{dir}", "{nul}", "{under_file}", ""]


def _cli_env(golden, tmp_path, args) -> dict:
    """Placeholder values (all under tmp_path) and a fresh copy of the golden DB."""
    db = tmp_path / "db" / "results.sqlite"
    db.parent.mkdir()
    shutil.copyfile(golden["db"], db)
    (tmp_path / "plain.txt").write_text("not a directory\n")
    (tmp_path / "emptydir").mkdir()
    userdir = tmp_path / "userdir"
    userdir.mkdir()
    (userdir / "thesis.tex").write_text("precious\n")
    if "{deepjson}" in args:
        (tmp_path / "deep.json").write_text(nested_json(100_000))
    (tmp_path / "audit.json").write_text(json.dumps(
        {"schema": 1, "identical": [{"arch": "x86_64", "variants": ["full", "acquire"],
                                     "op": 5}], "notes": []}))
    bad = tmp_path / "badrun"
    bad.mkdir()
    (bad / "provenance.json").write_text('{"run_id": "b", "cell": {"arch": 1}}')
    (bad / "status.json").mkdir()
    c = golden["shas"]
    return {"db": str(db), "repo": str(golden["repo"]), "c0": c[0], "c1": c[1], "c2": c[2],
            "c1short": c[1][:6],
            "file": str(tmp_path / "plain.txt"), "dir": str(tmp_path / "emptydir"),
            "userdir": str(userdir), "out": str(tmp_path / "reports" / "r"),
            "missing": str(tmp_path / "missing"), "missing_db": str(tmp_path / "new" / "x.db"),
            "under_file": str(tmp_path / "plain.txt" / "x.db"), "nul": "a\x00b",
            "spare": str(golden["spare"]), "deepjson": str(tmp_path / "deep.json"),
            "audit_odd": str(tmp_path / "audit.json"), "badrun": str(bad)}


def _fill(args, env) -> list[str]:
    return [a.format(**env) for a in args]


def _check_cli(tmp_path, capsys, argv, env, what):
    """Run one command line; check the contract and that nothing the user
    owns was touched and no half-written report is left."""
    userdir = Path(env["userdir"])
    rc, out, err = run_main(cli.main, argv, capsys, what)
    thesis, plain = userdir / "thesis.tex", Path(env["file"])
    assert thesis.is_file() and thesis.read_text() == "precious\n", \
        f"{what}: status {rc}, the user's directory {userdir} was replaced or removed"
    assert plain.is_file() and plain.read_text() == "not a directory\n", \
        f"{what}: status {rc}, the user's file {plain} was replaced or removed"
    assert (tmp_path / "cwd" / "keep.txt").is_file(), f"{what}: the current directory was emptied"
    if argv[0] == "report" and env["out"] in argv:
        reports = Path(env["out"]).parent
        left = sorted(p.name for p in reports.iterdir()) if reports.is_dir() else []
        left = [x for x in left if not x.endswith(".qrwbench-lock")]
        if rc == 0:
            assert left == ["r"] and (Path(env["out"]) / "index.html").is_file(), (left, what)
        else:
            assert left == [], f"{what}: failed report left {left}"
    return rc


@pytest.mark.parametrize("i", range(len(CLI_CASES)),
                         ids=[short(" ".join(c), 60) for c in CLI_CASES])
def test_cli_args(golden, tmp_path, capsys, monkeypatch, fast_stats, i):
    monkeypatch.delenv("RESULTS_DB", raising=False)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "keep.txt").write_text("x")
    monkeypatch.chdir(tmp_path / "cwd")
    env = _cli_env(golden, tmp_path, CLI_CASES[i])
    args = _fill(CLI_CASES[i], env)
    argv = [args[0], "--db", env["db"]] + args[1:]
    rc = _check_cli(tmp_path, capsys, argv, env, " ".join(CLI_CASES[i]))
    if args[0] != "regress":
        assert rc in (0, 2)


CLI_POOL = {
    "report": {"--min-effect": ["nan", "-5", "inf", "0", "1e999", "-0", "x"],
               "--alpha": ["2", "0.5", "nan", "-1", "1e-999", "0.05"],
               "--commit": ["latest", "all", "HEAD", "", "{c1}", "{c1short}", "zz", "{nul}"],
               "--baseline": ["atomics=bogus", "x", "rwlock=", "=full"],
               "--out": ["{out}", "{file}", "{userdir}", "{dir}"],
               "--correction": ["bh", "holm", "none"]},
    "compare": {"--min-effect": ["nan", "-5", "inf", "1e999", "5"],
                "--alpha": ["2", "nan", "1e-999", "0.999999"],
                "--commit": ["latest", "all", "", "{c2}", "q", "{nul}"],
                "--baseline": ["atomics=bogus", "rwlock=relaxed", "x=y", "a"],
                "--arch": ["x86_64", "\u00e9", ""], "--op": ["smp_mb", "{nul}"],
                "--audit": ["{file}", "{dir}", "{deepjson}", "{audit_odd}", "{missing}"],
                "--correction": ["bh", "x"]},
    "regress": {"--target": ["{c2}", "{c1}", "{c0}", "HEAD", "", "{nul}", "-x", "zz"],
                "--base": ["{c1}", "{c0}", "", "-", "{nul}", "HEAD~9", "@{{-1}}", "\u00e9"],
                "--threshold": ["nan", "5", "0", "100", "-1", "1e999"],
                "--alpha": ["nan", "0.05", "7"], "--key": ["rig", "kernel", "x"],
                "--repo": ["{repo}", "{repo}", "{file}", "{missing}", "{nul}"],
                "--history": [None]},
}


@pytest.mark.parametrize("seed", range(50))
def test_cli_random(golden, tmp_path, capsys, monkeypatch, fast_stats, seed):
    """Random combinations of bad option values (and of --db values)."""
    rng = random.Random(6000 + seed)
    monkeypatch.delenv("RESULTS_DB", raising=False)
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "keep.txt").write_text("x")
    monkeypatch.chdir(tmp_path / "cwd")
    cmd = rng.choice(["compare", "compare", "regress", "regress", "report"] if seed % 5 == 0
                     else ["compare", "regress"])
    opts = rng.sample(sorted(CLI_POOL[cmd]), rng.randint(1, 3))
    if cmd == "report" and "--out" not in opts:
        opts.append("--out")
    args = [cmd]
    dbarg = rng.choice(CLI_DB_ARGS) if rng.random() < 0.2 else None
    args += ["--db", "{db}" if dbarg is None else dbarg]
    for o in opts:
        v = rng.choice(CLI_POOL[cmd][o])
        args += [o] if v is None else [o, v]
    env = _cli_env(golden, tmp_path, args)
    argv = _fill(args, env)
    _check_cli(tmp_path, capsys, argv, env, " ".join(args))

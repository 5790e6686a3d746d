"""One command line (issue 16): every host-side step is a subcommand of
``python3 -m qrwbench``, built by one argparse tree in qrwbench/cli.py, with
one error form (``qrwbench: error: ...``, status 2) whatever the subcommand."""
import ast
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import TOP
from qrwbench import cli

PKG = TOP / "analysis" / "qrwbench"
PYENV = {**os.environ, "PYTHONPATH": str(TOP / "analysis")}
SUBCOMMANDS = ["import", "report", "compare", "regress", "bench", "audit", "emuaudit", "archaudit",
               "noise", "torture", "perf", "series", "bisect", "kvm-nested"]
# what a subcommand must be given besides a bad option for argparse to get that far
REQUIRED = {"import": ["RUN_DIR"], "noise": ["DB"], "perf": ["--cell", "C"],
            "series": ["--cell", "C"], "bench-series": ["--cell", "C"],
            "bisect": ["run", "--good", "G", "--bad", "B", "--cell", "C"],
            "kvm-nested": ["--arch", "arm64"]}
PARSERS = {"ArgParser", "ArgumentParser", "_Parser"}


def qrwbench(*argv, timeout=60):
    return subprocess.run(["/usr/bin/python3", "-m", "qrwbench", *argv], cwd=TOP, env=PYENV,
                          capture_output=True, text=True, timeout=timeout)


def many(argvs):
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda a: qrwbench(*a), argvs))


def subcommand_names() -> set[str]:
    sub = next(a for a in cli.build_parser()._actions if a.dest == "cmd")
    return set(sub.choices)


def test_the_parser_has_every_subcommand():
    assert subcommand_names() == set(SUBCOMMANDS) | {"bench-series"}    # alias of series


def test_no_parser_is_built_outside_cli():
    """Only cli.py constructs an argument parser (errors.py defines the class;
    no other module imports argparse or names ArgParser), and no module but
    __main__.py is a ``python3 -m`` entry point or has a main of its own."""
    found, built = [], set()
    for path in sorted(PKG.rglob("*.py")):
        text, rel = path.read_text(), str(path.relative_to(PKG))
        if rel not in ("cli.py", "errors.py") and ("argparse" in text or "ArgParser" in text):
            found.append(f"{rel}: names argparse or ArgParser")
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name in PARSERS:
                    built.add(rel)
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name)
                    and node.left.id == "__name__" and rel != "__main__.py"):
                found.append(f"{rel}:{node.lineno}: if __name__ == '__main__'")
            if isinstance(node, ast.FunctionDef) and node.name == "main" and rel != "cli.py":
                found.append(f"{rel}:{node.lineno}: def main")
    assert not found, found
    assert built == {"cli.py"}, built


def test_every_subcommand_has_help():
    argvs = [[s, "--help"] for s in sorted(subcommand_names())]
    argvs += [["bisect", "run", "--help"], ["bisect", "step", "--help"], ["--help"]]
    for argv, r in zip(argvs, many(argvs)):
        assert r.returncode == 0 and r.stderr == "", (argv, r.stderr)
        sub = " ".join(a for a in argv if a != "--help")
        usage = "python3 -m qrwbench " + ("series" if sub == "bench-series" else sub)
        assert r.stdout.startswith(f"usage: {usage.strip()} "), (argv, r.stdout[:200])
    top = qrwbench("--help").stdout
    assert all(s in top for s in SUBCOMMANDS)


def test_a_bad_option_is_one_qrwbench_error_line_for_every_subcommand():
    names = sorted(subcommand_names())
    argvs = [[s, *REQUIRED.get(s, []), "--no-such-option"] for s in names]
    argvs += [["bisect", "step", "STATE", "--no-such-option"], ["--no-such-option", "report"]]
    for argv, r in zip(argvs, many(argvs)):
        assert r.returncode == 2 and r.stdout == "", (argv, r.stdout, r.stderr)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("qrwbench: error: "), (argv, r.stderr)
        assert "unrecognized arguments: --no-such-option" in lines[0], (argv, lines[0])


def test_missing_arguments_and_subcommands_are_one_line_too():
    argvs = [[], ["nosuch"], ["bisect"], ["noise"], ["perf"], ["series"],
             ["bisect", "run", "--good", "G"], ["perf", "--cell", "C", "--top", "x"]]
    for argv, r in zip(argvs, many(argvs)):
        lines = r.stderr.splitlines()
        assert r.returncode == 2 and len(lines) == 1, (argv, r.stderr)
        assert lines[0].startswith("qrwbench: error: "), (argv, r.stderr)


@pytest.mark.parametrize("argv,message", [
    (["bench", "--plan", "--matrix", "/nonexistent/m.toml"], "m.toml"),
    (["emuaudit", "--vcpus", "0"], "--vcpus '0': valid is a comma-separated list of 1..8"),
    (["noise", "/nonexistent/r.sqlite"], "results DB '/nonexistent/r.sqlite' does not exist"),
    (["torture", "--minutes", "0"], "--minutes 0.0: must be a number of minutes in (0, 1440)"),
    (["perf", "--cell", "sparc/tcg/max/acqrel/rwlock/1", "--check"], "unknown arch 'sparc'"),
    (["series", "--cell", "x86_64/tcg/max/acqrel/rwlock/0", "--check"], "vCPUs"),
    (["bisect", "run", "--good", "a", "--bad", "b", "--cell", "x86_64/tcg/max/acqrel/rwlock/1",
      "--alpha", "2", "--check"], "--alpha 2.0: must be in (0, 1)"),
    (["import", "/nonexistent/run"], "/nonexistent/run"),
])
def test_bad_input_of_every_subcommand_is_one_qrwbench_error_line(argv, message):
    """A QrwbenchError of any subcommand: the same line as cli's own (the
    message after the prefix is the module's)."""
    r = qrwbench(*argv)
    lines = r.stderr.splitlines()
    assert r.returncode == 2 and len(lines) == 1, (r.stdout, r.stderr)
    assert lines[0].startswith("qrwbench: error: ") and message in lines[0], lines[0]


def test_audit_refuses_an_output_directory_that_is_not_its_own(tmp_path):
    (tmp_path / "mine.txt").write_text("keep")
    r = qrwbench("audit", "--out", str(tmp_path), "/nonexistent-kernel-dir")
    assert r.returncode == 2 and r.stderr.startswith("qrwbench: error: ")
    assert "not a qrwbench audit directory" in r.stderr and r.stderr.count("\n") == 1
    assert (tmp_path / "mine.txt").read_text() == "keep"


def test_interrupt_and_db_errors_of_a_module_subcommand(monkeypatch, capsys, tmp_path):
    from qrwbench.report import noise

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(noise, "run", interrupted)
    assert cli.main(["noise", "x.sqlite"]) == 130
    assert capsys.readouterr().err == "qrwbench: interrupted\n"
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database" * 100)
    monkeypatch.undo()
    assert cli.main(["noise", str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qrwbench: error: ") and err.count("\n") == 1
    assert str(junk) in err


def test_a_db_before_the_subcommand_reaches_it(tmp_path, capsys, monkeypatch):
    from qrwbench.run import bench, series
    seen = []
    monkeypatch.setattr(bench, "run", lambda a: seen.append(a.db) or 0)
    monkeypatch.setattr(series, "run", lambda a: seen.append(a.db) or 0)
    assert cli.main(["--db", "top.sqlite", "bench"]) == 0
    assert cli.main(["--db", "top.sqlite", "bench", "--db", "sub.sqlite"]) == 0
    assert cli.main(["series", "--cell", "C"]) == 0
    assert seen == ["top.sqlite", "sub.sqlite", None]

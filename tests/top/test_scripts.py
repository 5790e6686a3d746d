"""The measurement scripts of analysis/scripts take a results DB: an
option, no argument or a missing path is one line on stderr and exit
status 2, and no DB file is created. first_record.py, which boots guests
and takes no DB, refuses any argument so, and every script's qrwbench
names exist."""
import ast
import importlib.util
import subprocess
import sys

import pytest

from conftest import TOP

SCRIPTS = sorted(p for p in (TOP / "analysis" / "scripts").glob("*.py")
                 if p.name not in ("scriptdb.py", "first_record.py"))


def test_every_db_script_is_covered():
    assert len(SCRIPTS) >= 6


def run(script, args, cwd):
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def n_dbs(script) -> int:
    return 2 if script.name == "hosts_agree.py" else 1     # it compares two DBs


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
@pytest.mark.parametrize("bad", ["--help", "no-such.sqlite"])
def test_bad_db_argument_is_one_line(tmp_path, script, bad):
    r = run(script, [bad] * n_dbs(script), tmp_path)
    assert r.returncode == 2, r
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{script.name}: error: "), r.stderr
    assert bad in err[0]
    assert list(tmp_path.iterdir()) == []          # nothing created


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_argument_says_the_usage(tmp_path, script):
    r = run(script, [], tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r
    assert r.stderr.strip()
    assert list(tmp_path.iterdir()) == []


FIRST_RECORD = TOP / "analysis" / "scripts" / "first_record.py"
ALL_SCRIPTS = sorted((TOP / "analysis" / "scripts").glob("*.py"))


def qrwbench_names(script):
    """(local name, the object it is bound to, attribute) of every
    ``name.attr`` of ``script`` whose name is imported from qrwbench."""
    tree = ast.parse(script.read_text())
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("qrwbench"):
            for a in node.names:
                try:
                    obj = importlib.import_module(f"{node.module}.{a.name}")
                except ModuleNotFoundError:
                    obj = getattr(importlib.import_module(node.module), a.name)
                bound[a.asname or a.name] = obj
    return [(n.value.id, bound[n.value.id], n.attr) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id in bound]


@pytest.mark.parametrize("script", ALL_SCRIPTS, ids=lambda p: p.name)
def test_the_qrwbench_names_a_script_uses_exist(script):
    """A function moved to another module breaks a script only when run:
    here every ``module.name`` it uses must resolve."""
    missing = [f"{n}.{attr}" for n, obj, attr in qrwbench_names(script) if not hasattr(obj, attr)]
    assert not missing, f"{script.name} uses names that do not exist: {missing}"


def test_first_record_imports_without_booting_and_uses_the_benchs_boot():
    spec = importlib.util.spec_from_file_location("first_record", FIRST_RECORD)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)            # no boot at import
    names = {(n, attr) for n, _obj, attr in qrwbench_names(FIRST_RECORD)}
    assert {("boot", "kernel_paths"), ("boot", "qemu_cmd")} <= names
    assert callable(mod.main)


@pytest.mark.parametrize("bad", ["--help", "no-such.sqlite"])
def test_first_record_refuses_an_argument_in_one_line(tmp_path, bad):
    r = run(FIRST_RECORD, [bad], tmp_path)
    assert r.returncode == 2, r
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("first_record.py: error: "), r.stderr
    assert bad in err[0] and r.stdout == ""
    assert list(tmp_path.iterdir()) == []

"""The measurement scripts of analysis/scripts take a results DB: an
option, no argument or a missing path is one line on stderr and exit
status 2, and no DB file is created."""
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

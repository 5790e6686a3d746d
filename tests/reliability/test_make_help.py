"""`make help` names every target a user runs (issue 16: no target is hidden)."""
import re
import subprocess

from conftest import TOP

# rules that are steps of others, not commands (make test builds test-kernels;
# check-arch-variant guards make kernel)
INTERNAL = {"all", "help", "check-arch-variant", "test-kernels"}


def refusing_rules(text: str) -> set[str]:
    """Targets whose recipe only says the rig never loads into the host kernel."""
    out = set()
    for m in re.finditer(r"^([a-z][a-z0-9 -]*):\s*\n\t[^\n]*never loads", text, re.M):
        out.update(m.group(1).split())
    return out


def test_help_lists_every_target():
    text = (TOP / "Makefile").read_text()
    targets = set()
    for m in re.finditer(r"^([a-z][a-z0-9 -]*):(?!=)", text, re.M):
        targets.update(m.group(1).split())
    assert {"bench", "test", "bisect", "audit"} <= targets       # the parse sees the rules
    out = subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=TOP,
                         capture_output=True, text=True, check=True).stdout
    named = set(re.findall(r"^\s*make ([a-z][a-z0-9-]*)", out, re.M))
    named |= set(re.findall(r"\| ([a-z][a-z0-9-]*)\s", out))   # "make clean | distclean"
    assert len(refusing_rules(text)) == 3
    missing = targets - INTERNAL - refusing_rules(text) - named
    assert not missing, f"make help does not name: {sorted(missing)}"

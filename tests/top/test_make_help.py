"""`make help` names every target a user runs (issue 16: no target is hidden)."""
import re
import subprocess

from conftest import TOP

# rules that are steps of others, never run alone: `all` is `help`;
# check-arch-variant guards make kernel
INTERNAL = {"all", "check-arch-variant"}


def rules(text: str) -> set[str]:
    """Every target a rule of the Makefile ``text`` defines (not variables)."""
    out = set()
    for m in re.finditer(r"^([a-z][a-z0-9 -]*):(?!=)", text, re.M):
        out.update(m.group(1).split())
    return out


def refusing_rules(text: str) -> set[str]:
    """Targets whose recipe only says the rig never loads into the host kernel."""
    out = set()
    for m in re.finditer(r"^([a-z][a-z0-9 -]*):\s*\n\t[^\n]*never loads", text, re.M):
        out.update(m.group(1).split())
    return out


def documented(help_text: str) -> set[str]:
    """The targets the help names: ``make T ...`` lines, ``make A | B`` for two."""
    named = set()
    for line in help_text.splitlines():
        if m := re.match(r"\s*make ([a-z][a-z0-9-]*(?: \| [a-z][a-z0-9-]*)*)", line):
            named.update(m.group(1).split(" | "))
    return named


def undocumented(makefile: str, help_text: str) -> set[str]:
    return rules(makefile) - INTERNAL - refusing_rules(makefile) - documented(help_text)


def make_help() -> str:
    return subprocess.run(["make", "-s", "--no-print-directory", "help"], cwd=TOP,
                          capture_output=True, text=True, check=True).stdout


def test_help_lists_every_target():
    text = (TOP / "Makefile").read_text()
    targets = rules(text)
    assert {"bench", "test", "bisect", "audit", "bench-series", "test-kernels"} <= targets
    # the refusing rules are the host-loading names and nothing else hides there
    assert refusing_rules(text) == {"insmod", "modprobe", "load"}
    assert INTERNAL <= targets, f"INTERNAL names no rule: {sorted(INTERNAL - targets)}"
    out = make_help()
    missing = undocumented(text, out)
    assert not missing, f"make help does not name: {sorted(missing)}"
    # and names no target the Makefile does not have
    assert documented(out) <= targets, sorted(documented(out) - targets)


def test_a_new_rule_left_out_of_the_help_fails_the_check():
    text = (TOP / "Makefile").read_text()
    out = make_help()
    assert undocumented(text + "\nfrob-it: tree\n\t@true\n", out) == {"frob-it"}
    assert undocumented(text.replace("\nhelp:", "\nhelp frob:", 1), out) == {"frob"}
    assert undocumented(text, out.replace("make test-kernels", "test-kernels")) == {"test-kernels"}
    assert undocumented(text, out.replace("make clean | distclean", "make clean")) == {"distclean"}

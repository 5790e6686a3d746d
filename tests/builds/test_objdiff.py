"""objdiff: the machine-code digest the bisect oracle uses to give a commit
the verdict of a measured commit with the same code (real gcc objects)."""
import subprocess

import pytest

from qrwbench.build import objdiff
from qrwbench.build.elfmini import Elf

BASE = """
extern void helper_a(void);
extern void helper_b(void);
int counter;
const char *name(void) { return "%s"; }
void hot(void) { counter++; %s helper_a(); }
"""


def obj(tmp_path, tag, body, barrier="", extra=""):
    src = tmp_path / f"{tag}.c"
    src.write_text(extra + BASE % (body, barrier))
    out = tmp_path / f"{tag}.o"
    subprocess.run(["gcc", "-O2", "-c", "-o", str(out), str(src)], check=True)
    return out


def test_a_comment_or_a_string_is_the_same_code(tmp_path):
    a = obj(tmp_path, "a", "abc")
    comment = obj(tmp_path, "comment", "abc", extra="/* a harmless comment */\n\n\n")
    string = obj(tmp_path, "string", "abd")       # data only: the same bytes, same relocation
    assert objdiff.digest(a) == objdiff.digest(comment) == objdiff.digest(string)


def test_a_barrier_is_different_code(tmp_path):
    a = obj(tmp_path, "a", "abc")
    mb = obj(tmp_path, "mb", "abc", barrier='__asm__ __volatile__("" ::: "memory"); '
             '__sync_synchronize();')
    assert objdiff.digest(a) != objdiff.digest(mb)


def test_a_call_to_another_function_is_different_code(tmp_path):
    """The call's bytes are the same in a .o (the target is a relocation):
    the relocation's symbol is part of the digest."""
    a = obj(tmp_path, "a", "abc")
    src = (tmp_path / "a.c").read_text().replace("helper_a();", "helper_b();")
    (tmp_path / "b.c").write_text(src)
    subprocess.run(["gcc", "-O2", "-c", "-o", str(tmp_path / "b.o"), str(tmp_path / "b.c")],
                   check=True)
    ta = [s for s in objdiff.executable_sections(Elf(a)) if s.name == ".text"][0]
    tb = [s for s in objdiff.executable_sections(Elf(tmp_path / "b.o")) if s.name == ".text"][0]
    assert Elf(a).section_bytes(ta) == Elf(tmp_path / "b.o").section_bytes(tb)
    assert objdiff.digest(a) != objdiff.digest(tmp_path / "b.o")


def test_build_digest_covers_every_file(tmp_path):
    a = obj(tmp_path, "a", "abc")
    mb = obj(tmp_path, "mb", "abc", barrier="__sync_synchronize();")
    assert objdiff.build_digest([a, a]) == objdiff.build_digest([a, a])
    assert objdiff.build_digest([a, a]) != objdiff.build_digest([a, mb])


def test_not_an_elf_file_is_a_clear_error(tmp_path):
    f = tmp_path / "vmlinux"
    f.write_text("not elf\n")
    with pytest.raises(ValueError, match="vmlinux: cannot read its code"):
        objdiff.digest(f)
    with pytest.raises(ValueError, match="missing: cannot read its code"):
        objdiff.digest(tmp_path / "missing")


def test_bisect_verdicts_never_replace_a_file_the_rig_did_not_write(tmp_path):
    """A --workdir of the user's may hold a verdicts.json: it is refused, not reset."""
    from qrwbench.run import bisect
    from qrwbench.errors import QrwbenchError
    state = {"workdir": {"root": str(tmp_path)}}
    mine = tmp_path / "verdicts.json"
    mine.write_text("my notes\n")
    with pytest.raises(QrwbenchError, match="was not written by qrwbench's bisect"):
        bisect.record_verdict(state, "a" * 40, "d", bisect.GOOD, "measured")
    assert mine.read_text() == "my notes\n"
    mine.unlink()
    bisect.record_verdict(state, "a" * 40, "d", bisect.GOOD, "measured")
    assert bisect.verdicts(state)["a" * 40]["how"] == "measured"
    bisect._write_verdicts(state, {})        # a file of ours is reset
    assert bisect.verdicts(state) == {}

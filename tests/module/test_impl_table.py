"""The lock table bench/module/qrwb_impls.def has one row per rwlock
implementation. The module derives from it the enum, the names, the loop
table and the selection (qrwb_rwlock.c), Kbuild one object per row from a
generated source that holds the row; the host reads it with
vocab.lock_impls. All of them must read the same rows."""
import re
import shutil
import subprocess

import pytest

from conftest import TOP, changed_table
from qrwbench import moduletables, vocab
from qrwbench.build import module_audit

MODULE = TOP / "bench" / "module"
KBUILD = MODULE / "Kbuild"


def cpp_rows(def_file):
    """(name, kind, ordering, copy, mb) as the C preprocessor expands ``def_file``."""
    cpp = shutil.which("cpp")
    if cpp is None:
        pytest.fail("cpp (the C preprocessor) is not installed: make deps installs gcc")
    src = (f"#define QRWB_IMPL(name, kind, ord, copy, mb) @@ name | kind | ord | copy | mb @@\n"
           f'#include "{def_file.name}"\n')
    out = subprocess.run([cpp, "-P", "-I", str(def_file.parent), "-"], input=src,
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for chunk in out.split("@@"):
        if "|" in chunk:
            name, kind, o, copy, mb = (x.strip() for x in chunk.split("|"))
            rows.append((name, kind, o, int(copy), int(mb)))
    return tuple(rows)


def kbuild_sh(start):
    """Kbuild's one line that starts with ``start`` (after white space),
    with make's escapes ($$, $(pound)) undone and a trailing '; \\' cut."""
    lines = [l.strip() for l in KBUILD.read_text().splitlines() if l.strip().startswith(start)]
    assert len(lines) == 1, (start, lines)
    return re.sub(r";?\s*\\$", "", lines[0]).replace("$$", "$").replace("$(pound)", "#")


def test_host_reads_the_lock_table_as_the_preprocessor_expands_it():
    rows = cpp_rows(MODULE / "qrwb_impls.def")
    assert len(rows) >= 7
    assert rows == vocab.lock_impls()
    names = [r[0] for r in rows]
    assert len(set(names)) == len(names), "a name is the key of a row"
    assert {r[1] for r in rows} == {"none", "kernel", "module"}


def test_kbuild_builds_one_object_per_row():
    """Kbuild's object list (its sed over the table) is every row's name."""
    sh = kbuild_sh("qrwb-impls :=")
    m = re.search(r"\$\(shell (sed .*) \$\(src\)/qrwb_impls\.def\)", sh)
    assert m, sh
    out = subprocess.run(f"{m.group(1)} {MODULE / 'qrwb_impls.def'}", shell=True,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [i.name for i in vocab.lock_impls()]


def test_each_generated_source_holds_its_row_once():
    """qrwb_lock_<name>.c, as Kbuild's filechk writes it, defines
    QRWB_LK_ROW(col) as col(<that row's columns>), and nothing for a
    name that only starts like another (acqrel_c1 against acqrel_c1mb)."""
    sed = kbuild_sh("sed -n 's/^QRWB_IMPL(")
    assert sed.endswith("$<"), sed
    for i in vocab.lock_impls():
        cmd = sed.replace("$*", i.name).replace("$<", str(MODULE / "qrwb_impls.def"))
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True).stdout
        cols = f"{i.name}, {i.kind}, {i.ordering}, {i.copy}, {i.mb}"
        assert out == f"#define QRWB_LK_ROW(col) col({cols})\n", (i.name, out)


def test_the_audit_and_the_emulator_audit_take_their_lists_from_the_table():
    assert module_audit.module_impls() == tuple(i.name for i in vocab.lock_impls() if i.kind == "module")
    assert vocab.module_lock_variants() == {"full": "full_c0", "acqrel": "acqrel_c0",
                                              "relaxed": "relaxed_c0"}
    assert [(a.name, b.name) for a, b in module_audit._lock_twins()] == [("acqrel_c0", "acqrel_c1")]


def test_a_new_row_is_one_line_of_the_table(tmp_path, monkeypatch):
    """A row added to the table is a lock implementation for the
    preprocessor and the host alike: an A/A twin for the audit."""
    text = (MODULE / "qrwb_impls.def").read_text()
    line = "QRWB_IMPL(relaxed_c0, module, relaxed, 0, 0)\n"
    assert line in text
    changed = text + "QRWB_IMPL(relaxed_c1, module, relaxed, 1, 0)\n"
    with changed_table(monkeypatch, tmp_path, moduletables, "IMPLS_DEF", changed,
                       vocab.lock_impls, module_audit._sym_impl) as f:
        assert cpp_rows(f) == vocab.lock_impls()
        assert module_audit.module_impls()[-1] == "relaxed_c1"
        assert ("relaxed_c0", "relaxed_c1") in [(a.name, b.name) for a, b in module_audit._lock_twins()]
        assert module_audit._norm_syms("bl qrwb_relaxed_c1_read_lock_slowpath") == "bl IMPL_read_lock_slowpath"


def test_a_malformed_row_is_a_one_line_error_naming_it(tmp_path, monkeypatch):
    text = (MODULE / "qrwb_impls.def").read_text()
    changed = text.replace("QRWB_IMPL(acqrel_c1, module, acqrel, 1, 0)",
                           "QRWB_IMPL(acqrel_c1, modul, acqrel, 1, 0)")
    with changed_table(monkeypatch, tmp_path, moduletables, "IMPLS_DEF", changed, vocab.lock_impls):
        with pytest.raises(vocab.InputError, match=r"malformed row 'QRWB_IMPL\(acqrel_c1, modul,"):
            vocab.lock_impls()

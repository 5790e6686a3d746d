"""The op table bench/module/qrwb_ops.def has one row per op; its macros
expand a row to one timed loop per ordering. The host's reading of it
(vocab.op_rows) must be what the C preprocessor makes of it: the module
and the host then know the same ops, orderings and statements."""
import re
import shutil
import subprocess

import pytest

from conftest import TOP, changed_table
from qrwbench import moduletables, vocab

MODULE = TOP / "bench" / "module"


def cpp_rows(def_file):
    """(op, ordering, statement) as the C preprocessor expands ``def_file``."""
    cpp = shutil.which("cpp")
    if cpp is None:
        pytest.fail("cpp (the C preprocessor) is not installed: make deps installs gcc")
    src = '#define QRWB_OP(op, ord, stmt) @@ op | ord | stmt @@\n#include "qrwb_ops.def"\n'
    out = subprocess.run([cpp, "-P", "-I", str(def_file.parent), "-"], input=src,
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for chunk in out.split("@@"):
        if "|" in chunk:
            op, o, stmt = (x.strip() for x in chunk.split("|", 2))
            rows.append((op, o, re.sub(r"\s+\(", "(", stmt)))
    return tuple(rows)


def test_host_reads_the_op_table_as_the_preprocessor_expands_it():
    rows = cpp_rows(MODULE / "qrwb_ops.def")
    assert len(rows) > 100
    assert rows == vocab.op_rows()


def test_a_new_ordering_is_one_line_of_the_table(tmp_path, monkeypatch):
    """Adding an ordering to QRWB_RMW gives every RMW op that ordering, in
    the module (the preprocessor) and on the host alike."""
    text = (MODULE / "qrwb_ops.def").read_text()
    line = "\tQRWB_OP(op, relaxed, lhs op##_relaxed args)\n"
    assert line in text
    changed = text.replace(line, line.replace("\n", "\t\\\n") + "\tQRWB_OP(op, acqrel, lhs op##_acqrel args)\n")
    with changed_table(monkeypatch, tmp_path, moduletables, "OPS_DEF", changed,
                       vocab.op_rows, vocab.op_orderings) as f:
        rows = cpp_rows(f)
        assert rows == vocab.op_rows()
        assert vocab.op_orderings()["atomic_add_return"] == ("full", "acquire", "release", "relaxed", "acqrel")
        assert ("atomic_xchg", "acqrel", "acc += atomic_xchg_acqrel(&s->v, i)") in rows
        assert vocab.op_orderings()["atomic_and"] == ("relaxed",)


def test_a_malformed_row_is_a_one_line_error_naming_it(tmp_path, monkeypatch):
    text = (MODULE / "qrwb_ops.def").read_text()
    changed = text.replace("QRWB_VOID(atomic_and, (~1, &s->v))", "QRWB_VOID(atomic_and (~1, &s->v))")
    with changed_table(monkeypatch, tmp_path, moduletables, "OPS_DEF", changed,
                       vocab.op_rows, vocab.op_orderings):
        with pytest.raises(vocab.InputError, match=r"malformed row 'QRWB_VOID\(atomic_and \(~1"):
            vocab.op_orderings()

"""The console is untrusted: a guest that floods it is killed, and a log over
the parser's limit is rejected and stored as failed, never as data."""

import numpy as np

import synth
from qrwbench.results import records, store
from qrwbench.run import qemu


def _console() -> str:
    return synth.console([synth.begin()] + synth.results(rng=np.random.default_rng(1), reps=2))


def test_flooding_guest_is_killed_at_the_console_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(qemu, "CONSOLE_LIMIT", 1 << 20)
    st = qemu.boot(["sh", "-c", "exec yes 0123456789abcdef"], tmp_path, 60)
    assert st["status"] == "failed" and not st.get("timed_out"), st
    assert st["reason"] == f"console output over {1 << 20} bytes"
    assert (tmp_path / "console.log").stat().st_size > 1 << 20


def test_console_over_the_parser_limit_is_rejected(monkeypatch):
    text = _console().encode()
    assert records.parse_console(text).ok
    monkeypatch.setattr(records, "MAX_CONSOLE_BYTES", len(text) - 1)
    p = records.parse_console(text)
    assert not p.ok and p.results == []
    assert p.reason == f"console log is {len(text)} bytes, limit {len(text) - 1}"


def test_oversized_console_is_stored_failed(tmp_path, monkeypatch):
    run = synth.write_run(tmp_path / "runs", "big", _console())
    monkeypatch.setattr(records, "MAX_CONSOLE_BYTES", 1000)
    res = store.import_run(str(tmp_path / "db.sqlite"), run)
    assert res.status == "failed" and "limit 1000" in res.reason, res
    conn = store.connect(str(tmp_path / "db.sqlite"))
    assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 0

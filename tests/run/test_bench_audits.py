"""make bench runs the audits it plans with when none is current, and reuses
a current one without a boot (issue 26; run/audits.py)."""
import json

import pytest

from qrwbench.build import audit as ordering
from qrwbench.cell import Cell
from qrwbench.run import audits, emuaudit

pytestmark = pytest.mark.guest


def test_the_audits_run_once_then_are_reused_until_the_targets_change(tmp_path, monkeypatch):
    monkeypatch.setattr(audits, "AUDIT", tmp_path / "audit")
    monkeypatch.setattr(audits, "EMULATOR", tmp_path / "emulator")
    boots, orderings = [], []
    real_boot, real_run = emuaudit.boot_logged, ordering.run
    monkeypatch.setattr(emuaudit, "boot_logged",
                        lambda *a, **k: boots.append(a[:4]) or real_boot(*a, **k))
    monkeypatch.setattr(ordering, "run", lambda *a, **k: orderings.append(1) or real_run(*a, **k))
    one = [Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 1)]
    log = []
    audit = audits.ensure(one, log=log.append)
    assert orderings == [1] and sorted(b[3] for b in boots) == ["atomics", "rwlock"]
    assert all(b[:3] == ("x86_64", "max", 1) for b in boots)
    assert audit is not None and audit.blind is not None, "the emulator audit is read"
    doc = json.loads((tmp_path / "emulator" / "emulator.json").read_text())
    assert doc["targets"] == [["x86_64", "max", 1]] and doc["labels"]
    # x86_64 orderings compile to identical code: every atomics pair is labeled
    assert audit.is_identical(Cell("x86_64", "tcg", "max", 1, "atomics", "inline",
                                   "atomic_add_return"), "relaxed", "full")
    # the second bench: nothing runs
    boots.clear(), orderings.clear()
    audits.ensure(one, log=log.append)
    assert boots == [] and orderings == []
    assert "bench: ordering audit current" in log[-2] and "bench: emulator audit current" in log[-1]
    # a vCPU count the audit did not boot: only that target boots; the
    # current one keeps its rows and its logs
    audits.ensure(one + [Cell.boot("x86_64", "tcg", "max", "acqrel", "atomics", 2)],
                  log=log.append)
    assert orderings == [] and {b[2] for b in boots} == {2}
    doc = json.loads((tmp_path / "emulator" / "emulator.json").read_text())
    assert doc["targets"] == [["x86_64", "max", 1], ["x86_64", "max", 2]]
    assert {r["vcpus"] for r in doc["labels"]} == {1, 2}
    assert (tmp_path / "emulator" / "runs" / "x86_64-max-1v-atomics" / "tcg.log").exists()
    # another arch's rows made from other inputs (a rebuilt kernel): booted
    # again; x86_64's are kept
    doc["inputs"]["arm64"] = {"kernel": "stale", "qemu": "?"}
    doc["targets"].append(["arm64", "max", 1])
    (tmp_path / "emulator" / "emulator.json").write_text(json.dumps(doc))
    boots.clear()
    audits.ensure(one + [Cell.boot("arm64", "tcg", "max", "acqrel", "atomics", 1)],
                  log=log.append)
    assert {b[:3] for b in boots} == {("arm64", "max", 1)}
    started = [x for x in log if x.startswith("bench: emulator audit: ")]
    assert started[-1].endswith("; 2 targets kept"), started[-1]

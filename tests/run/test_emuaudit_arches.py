"""Arches without an emulator audit (issue 30: ppc64le, riscv64) are skipped
with the reason, and nothing else breaks: make bench on them plans without
one, and the emulator audit of the other arches goes on."""
from qrwbench import vocab
from qrwbench.run import audits, emuaudit


def test_ensure_emulator_skips_an_arch_without_one(monkeypatch):
    monkeypatch.setattr(emuaudit, "write", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("no emulator audit may run")))
    log = []
    assert audits.ensure_emulator({("ppc64le", "power9", 2), ("riscv64", "rv64", 1)},
                                  log=log.append) is None
    assert log == ["bench: emulator audit: ppc64le skipped: no emulator audit for ppc64le yet",
                   "bench: emulator audit: riscv64 skipped: no emulator audit for riscv64 yet"]


def test_label_targets_boots_only_audited_arches(monkeypatch, tmp_path):
    booted, log = [], []
    monkeypatch.setattr(emuaudit, "boot_logged", lambda arch, cpu, v, wl, d, **k:
                        booted.append(arch) or (_ for _ in ()).throw(StopIteration))
    cpus = {("ppc64le", "power9")}
    assert emuaudit.label_targets(tmp_path, (2,), cpus=cpus, log=log.append) == []
    assert booted == [] and log == ["emulator audit: ppc64le skipped: no emulator audit for ppc64le yet"]
    assert set(vocab.emu_audit_arches()) == {"x86_64", "arm64"}

"""The KVM probe: kvm_pvm hosts are refused with the reason; the verdict is cached."""
import os

from qrwbench.run import kvm


def fake_fs(monkeypatch, present):
    real_isdir, real_exists, real_access = os.path.isdir, os.path.exists, os.access
    monkeypatch.setattr(kvm.os.path, "isdir", lambda p: p in present if p.startswith("/sys/module") else real_isdir(p))
    monkeypatch.setattr(kvm.os.path, "exists", lambda p: p in present if p == "/dev/kvm" else real_exists(p))
    monkeypatch.setattr(kvm.os, "access", lambda p, m: p in present if p == "/dev/kvm" else real_access(p, m))
    monkeypatch.setattr(kvm.platform, "machine", lambda: "x86_64")


def test_kvm_pvm_is_unusable_with_reason(monkeypatch):
    fake_fs(monkeypatch, {"/dev/kvm", "/sys/module/kvm_pvm"})
    ok, why = kvm.static_check("x86_64")
    assert not ok and "kvm_pvm" in why and "KVM internal error" in why


def test_no_dev_kvm(monkeypatch):
    fake_fs(monkeypatch, set())
    ok, why = kvm.static_check("x86_64")
    assert not ok and "/dev/kvm does not exist" in why


def test_real_kvm_passes_static_check_and_boot_decides(monkeypatch, tmp_path):
    fake_fs(monkeypatch, {"/dev/kvm"})
    assert kvm.static_check("x86_64") == (True, "/dev/kvm usable")
    kernel = tmp_path / "vmlinux"
    kernel.write_bytes(b"k")
    calls = []

    def boot():
        calls.append(1)
        return False, "guest did not finish"
    r = kvm.probe("x86_64", boot=boot, kernel=kernel, cache=tmp_path / "c.json")
    assert r["usable"] is False and r["reason"] == "guest did not finish"
    again = kvm.probe("x86_64", boot=boot, kernel=kernel, cache=tmp_path / "c.json")
    assert again == r and calls == [1], "the verdict must be cached"


def test_arm64_guest_needs_arm64_host(monkeypatch):
    fake_fs(monkeypatch, {"/dev/kvm"})
    ok, why = kvm.static_check("arm64")
    assert not ok and "aarch64 host" in why


def test_kvm_command_lines(tmp_path):
    from qrwbench.run import qemu
    x = qemu.command("x86_64", "kvm", "host", 2, 256, tmp_path / "k", tmp_path / "i", "a=1")
    assert x[x.index("-accel") + 1] == "kvm" and x[x.index("-cpu") + 1] == "host"
    assert "tsc_early_khz=" in x[x.index("-append") + 1]
    a = qemu.command("arm64", "kvm", "host", 2, 256, tmp_path / "k", tmp_path / "i", "a=1")
    assert a[a.index("-M") + 1] == "virt,gic-version=max" and a[a.index("-accel") + 1] == "kvm"
    t = qemu.command("arm64", "tcg", "cortex-a57", 2, 256, tmp_path / "k", tmp_path / "i", "a=1")
    assert t[t.index("-M") + 1] == "virt" and t[t.index("-accel") + 1] == "tcg,thread=multi"

"""Is KVM usable on this host? A cheap static check, then one real boot.

/dev/kvm existing is not enough: on hosts whose KVM module is kvm_pvm (a
page-table based hypervisor without VT-x/AMD-V), KVM_CREATE_VM works but stock
guest kernels die with "KVM internal error. Suberror: 1" at their first xrstor.
So the probe boots the rig's own guest of the arch (x86_64 with -cpu host on an
x86_64 host, arm64 on an arm64 host) under KVM once and believes only a
complete record stream. The verdict is cached in build/kvm-probe-<arch>.json,
keyed by host kernel, kvm_pvm and guest kernel, so it is probed once per change.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

from .. import vocab
from ..vocab import ARCHES

CACHE = vocab.BUILD / "kvm-probe.json"


def local_facts() -> dict:
    """What static_check judges, as this host shows it. ``make kvm-nested``'s
    L1 guest prints the same facts about itself (guest/nested/init.sh)."""
    return {"machine": platform.machine(), "dev_kvm": os.path.exists("/dev/kvm"),
            "dev_kvm_rw": os.access("/dev/kvm", os.R_OK | os.W_OK),
            "kvm_pvm": os.path.isdir("/sys/module/kvm_pvm")}


def static_check(arch: str = "x86_64", facts: dict | None = None) -> tuple[bool, str]:
    """Reasons KVM cannot work that need no boot to see, on this host or on
    the host ``facts`` describe (local_facts' keys)."""
    f = local_facts() if facts is None else facts
    a = ARCHES[arch]
    if f["machine"] not in a.host_machine:
        return False, f"host is {f['machine']}: KVM runs {arch} guests only on a {a.host_machine[0]} host"
    if not f["dev_kvm"]:
        return False, "/dev/kvm does not exist (no KVM module loaded, or no hardware virtualization)"
    if not f["dev_kvm_rw"]:
        return False, "/dev/kvm is not readable and writable by this user (add it to group kvm)"
    if f["kvm_pvm"]:
        return False, ("host KVM is kvm_pvm (no VT-x/AMD-V): stock guest kernels stop with "
                       "'KVM internal error. Suberror: 1' (emulation failure)")
    return True, "/dev/kvm usable"


def verdict(static: tuple[bool, str], booted: bool, boot_reason: str) -> dict:
    """The probe's verdict from the static check and one real boot: only a
    complete record stream under KVM makes it usable."""
    ok, reason = static
    result = {"usable": booted and ok, "booted": booted,
              "reason": (reason if not ok else ("guest booted under KVM" if booted else boot_reason))}
    if not ok and not booted:
        result["reason"] = f"{reason}; probe boot: {boot_reason}"
    return result


def _key(arch: str, kernel: Path) -> str:
    h = hashlib.sha256()
    h.update(platform.release().encode())
    h.update(str(os.path.isdir("/sys/module/kvm_pvm")).encode())
    try:
        st = kernel.stat()
        h.update(f"{kernel}:{st.st_size}:{st.st_mtime_ns}".encode())
    except OSError:
        h.update(b"no-kernel")
    return h.hexdigest()[:16]


def probe(arch: str = "x86_64", boot=None, kernel: Path | None = None, cache: Path = CACHE) -> dict:
    """Return {"usable": bool, "reason": str}.

    `boot` is a callable() -> (ok: bool, reason: str) that boots a short guest
    under KVM; without it only the static check runs (and the verdict is not
    cached as a boot result).
    """
    ok, reason = static_check(arch)
    result = {"usable": ok, "reason": reason, "booted": False}
    if boot is None or kernel is None:
        return result
    key = _key(arch, kernel)
    try:
        cached = json.loads(cache.read_text())
        if cached.get("key") == key:
            return cached["result"]
    except (OSError, ValueError, KeyError):
        pass
    if ok or os.path.exists("/dev/kvm"):
        # Believe only a real boot: also confirms what the static check says.
        result = verdict((ok, reason), *boot())
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "result": result}, indent=1))
    tmp.replace(cache)
    return result

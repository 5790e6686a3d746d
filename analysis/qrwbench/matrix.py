"""The run matrix: a TOML file (bench/matrix/*.toml) expanded into boots.

Validation is strict: an unknown key, a wrong type or an unknown arch,
accelerator, CPU model, variant or workload is an InputError naming the value,
where it is, and what is valid. A TOML syntax error keeps tomllib's line and
column.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import targets
from .targets import TOP, InputError

RUN_KEYS = {"boots": int, "timeout_s": int, "mem_mb": int, "seed": int, "test_workloads": bool,
            "pin": bool}
TARGET_KEYS = {"arch": str, "accel": str, "cpu": str, "optional": bool}
WORKLOAD_KEYS = {"name": str, "variants": list, "vcpus": list, "max_vcpus": int, "params": dict}
BASE_CONFIG = TOP / "kernel" / "configs" / "base.config"


def config_nr_cpus() -> int:
    """CONFIG_NR_CPUS of the guest kernels (kernel/configs/base.config)."""
    for line in BASE_CONFIG.read_text().splitlines():
        if line.startswith("CONFIG_NR_CPUS="):
            return int(line.split("=", 1)[1])
    raise InputError(f"{BASE_CONFIG} sets no CONFIG_NR_CPUS")


def sweep(limit: int) -> list[int]:
    """1, 2, 4, ... up to ``limit``, and ``limit`` itself."""
    out, n = [], 1
    while n < limit:
        out.append(n)
        n *= 2
    return out + [limit]
PARAMS_DEF = TOP / "bench" / "module" / "qrwb_params.def"
_UPARAM = re.compile(r'^QRWB_UPARAM\((\w+), (\w+), (\w+), (\w+), "(.*)"\)$')
_SPARAM = re.compile(r'^QRWB_SPARAM\((\w+), "(.*)", "(.*)"\)$')


def module_params() -> tuple[dict, set]:
    """({integer param: (min, max)}, {string params}) from the module's
    parameter table bench/module/qrwb_params.def (the one list)."""
    ints, strs = {}, set()
    for line in PARAMS_DEF.read_text().splitlines():
        if m := _UPARAM.match(line):
            hi = (1 << 64) - 1 if m.group(4) == "U64_MAX" else int(m.group(4))
            ints[m.group(1)] = (int(m.group(3)), hi)
        elif m := _SPARAM.match(line):
            strs.add(m.group(1))
    return ints, strs


# Parameters the host sets itself, never the matrix.
HOST_PARAMS = {"workload", "seed"}
OPS_DEF = TOP / "bench" / "module" / "qrwb_ops.def"
_OP_ROW = re.compile(r"^QRWB_OP\((\w+), (\w+), (.*)\)$")
# Values of the string parameters other than ops (the module's
# qrwb_params.def describes the same; the module checks them again).
STR_CHOICES = {"placement": ("both", "shared", "percpu"), "impl": ("all", "kernel", "module")}


def op_names() -> list[str]:
    """Op names of the module's op table bench/module/qrwb_ops.def."""
    names = []
    for line in OPS_DEF.read_text().splitlines():
        if (m := _OP_ROW.match(line)) and m.group(1) not in names:
            names.append(m.group(1))
    return names


@dataclass(frozen=True)
class Cell:
    arch: str
    accel: str
    cpu: str
    variant: str
    workload: str
    vcpus: int
    params: tuple          # sorted (name, value) pairs

    def params_dict(self) -> dict:
        return dict(self.params)

    def key(self) -> str:
        return json.dumps({"arch": self.arch, "accel": self.accel, "cpu": self.cpu,
                           "variant": self.variant, "workload": self.workload,
                           "vcpus": self.vcpus, "params": self.params_dict()}, sort_keys=True)

    def label(self) -> str:
        p = " ".join(f"{k}={v}" for k, v in self.params if k in ("write_pct", "nlocks", "ops"))
        return f"{self.arch}/{self.accel}/{self.cpu} {self.variant} {self.workload}{' ' + p if p else ''} {self.vcpus}v"


@dataclass(frozen=True)
class Boot:
    cell: Cell
    index: int             # 0 .. boots-1
    seed: int              # the module's seed for this boot


@dataclass
class Matrix:
    path: Path
    boots: int
    timeout_s: int
    mem_mb: int
    seed: int
    pin: bool = False      # bind vCPU threads to host CPUs (pin.py)
    targets: list = field(default_factory=list)     # dicts
    workloads: list = field(default_factory=list)   # dicts


def _where(path: Path, what: str) -> str:
    return f"{path.name}: {what}"


def _check_keys(path: Path, where: str, table: dict, spec: dict, required: set) -> None:
    for k, v in table.items():
        if k not in spec:
            raise InputError(_where(path, f"unknown key '{k}' in {where}: valid are {', '.join(spec)}"))
        if not isinstance(v, spec[k]) or (spec[k] is int and isinstance(v, bool)):
            raise InputError(_where(path, f"{where}.{k} = {v!r}: must be {spec[k].__name__}"))
    for k in required:
        if k not in table:
            raise InputError(_where(path, f"{where} lacks '{k}'"))


def _check_param(path: Path, where: str, name: str, value) -> None:
    PARAMS, STR_PARAMS = module_params()
    if name in HOST_PARAMS:
        raise InputError(_where(path, f"{where}.params.{name}: set by the rig, not the matrix"))
    if name in STR_PARAMS:
        if not isinstance(value, str) or not value.replace(",", "").replace("_", "").isalnum():
            raise InputError(_where(path, f"{where}.params.{name} = {value!r}: must be a comma-separated list of names"))
        if name == "ops":
            valid = op_names()
            for op in value.split(","):
                if op != "all" and op not in valid:
                    raise InputError(_where(path, f"{where}.params.ops: unknown op '{op}': valid are all, "
                                                   f"{', '.join(valid)}"))
        elif name in STR_CHOICES and value not in STR_CHOICES[name]:
            raise InputError(_where(path, f"{where}.params.{name} = '{value}': valid are "
                                           f"{', '.join(STR_CHOICES[name])}"))
        return
    if name not in PARAMS:
        raise InputError(_where(path, f"unknown parameter '{name}' in {where}.params: valid are "
                                       f"{', '.join(sorted(set(PARAMS) | STR_PARAMS))}"))
    lo, hi = PARAMS[name]
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise InputError(_where(path, f"{where}.params.{name} = {value!r}: must be an integer in {lo}..{hi}"))


def load(path: str | Path) -> Matrix:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read matrix {path}: {e.strerror}") from None
    try:
        doc = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: malformed TOML: {e}") from None
    top = {"run": dict, "target": list, "workload": list}
    for k in doc:
        if k not in top:
            raise InputError(_where(path, f"unknown table '{k}': valid are run, target, workload"))
    run = doc.get("run", {})
    _check_keys(path, "[run]", run, RUN_KEYS, set())
    m = Matrix(path=path, boots=run.get("boots", 1), timeout_s=run.get("timeout_s", 300),
               mem_mb=run.get("mem_mb", 256), seed=run.get("seed", 1), pin=run.get("pin", False))
    workloads = targets.WORKLOADS + (targets.TEST_WORKLOADS if run.get("test_workloads") else ())
    if m.boots < 1 or m.timeout_s < 1 or m.mem_mb < 64:
        raise InputError(_where(path, "[run] needs boots >= 1, timeout_s >= 1, mem_mb >= 64"))
    if not doc.get("target") or not doc.get("workload"):
        raise InputError(_where(path, "needs at least one [[target]] and one [[workload]]"))
    for i, t in enumerate(doc["target"]):
        where = f"[[target]] #{i + 1}"
        _check_keys(path, where, t, TARGET_KEYS, {"arch", "accel"})
        try:
            arch = targets.check_arch(t["arch"])
            targets.check_accel(t["accel"])
            targets.check_cpu_model(arch, t["accel"], t.get("cpu", arch.kvm_cpu if t["accel"] == "kvm" else arch.cpu_models[0]))
        except InputError as e:
            raise InputError(_where(path, f"{where}: {e}")) from None
        m.targets.append({"arch": t["arch"], "accel": t["accel"],
                          "cpu": t.get("cpu", arch.kvm_cpu if t["accel"] == "kvm" else arch.cpu_models[0]),
                          "optional": t.get("optional", False)})
    for i, w in enumerate(doc["workload"]):
        where = f"[[workload]] #{i + 1}"
        _check_keys(path, where, w, WORKLOAD_KEYS, {"name", "variants"})
        try:
            if w["name"] not in workloads:
                raise InputError(f"unknown workload '{w['name']}': valid are {', '.join(workloads)}")
            for v in w["variants"]:
                targets.check_variant(v)
        except InputError as e:
            raise InputError(_where(path, f"{where}: {e}")) from None
        nr = config_nr_cpus()
        if ("vcpus" in w) == ("max_vcpus" in w):
            raise InputError(_where(path, f"{where} needs either 'vcpus' (a list) or 'max_vcpus' "
                                           "(a sweep 1, 2, 4, ... up to it), not both"))
        if "max_vcpus" in w and not 1 <= w["max_vcpus"] <= nr:
            raise InputError(_where(path, f"{where}.max_vcpus = {w['max_vcpus']}: must be in 1..{nr} (NR_CPUS)"))
        vcpus = w["vcpus"] if "vcpus" in w else sweep(w["max_vcpus"])
        for n in vcpus:
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= nr:
                raise InputError(_where(path, f"{where}.vcpus: {n!r} is not a vCPU count in 1..{nr} (NR_CPUS)"))
        params = w.get("params", {})
        for k, v in params.items():
            for x in (v if isinstance(v, list) else [v]):
                _check_param(path, where, k, x)
        m.workloads.append({"name": w["name"], "variants": list(w["variants"]),
                            "vcpus": list(vcpus), "params": params})
    return m


def with_accel(m: Matrix, accel: str) -> Matrix:
    """The matrix with every target under ``accel`` (ACCEL=kvm|tcg): kvm makes
    each target a required KVM target with -cpu host (KVM must then work, or
    the bench says why and stops); tcg drops the KVM targets."""
    targets.check_accel(accel)
    out, seen = [], set()
    for t in m.targets:
        if accel == "tcg" and t["accel"] == "kvm":
            continue
        if accel == "kvm":
            t = {"arch": t["arch"], "accel": "kvm", "cpu": targets.ARCHES[t["arch"]].kvm_cpu,
                 "optional": False}
        key = (t["arch"], t["accel"], t["cpu"])
        if key not in seen:
            seen.add(key)
            out.append(t)
    if not out:
        raise InputError(f"{m.path.name}: no target left under ACCEL={accel}")
    return Matrix(m.path, m.boots, m.timeout_s, m.mem_mb, m.seed, m.pin, out, m.workloads)


def cells(m: Matrix, accels_ok=lambda t: True) -> list[Cell]:
    """Every cell of the matrix, for the targets `accels_ok` accepts."""
    out = []
    for t in m.targets:
        if not accels_ok(t):
            continue
        for w in m.workloads:
            names = sorted(w["params"])
            values = [w["params"][k] if isinstance(w["params"][k], list) else [w["params"][k]] for k in names]
            for v in w["variants"]:
                for n in w["vcpus"]:
                    for combo in itertools.product(*values):
                        out.append(Cell(t["arch"], t["accel"], t["cpu"], v, w["name"], n,
                                        tuple(zip(names, combo))))
    return out


def boots(m: Matrix, cell_list: list[Cell]) -> list[Boot]:
    """All boots in one seeded random order (interleaves variants and cells)."""
    out = []
    for c in cell_list:
        for b in range(m.boots):
            h = hashlib.sha256(f"{m.seed}:{c.key()}:{b}".encode()).digest()
            out.append(Boot(c, b, int.from_bytes(h[:4], "little")))
    random.Random(m.seed).shuffle(out)
    return out

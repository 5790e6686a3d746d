"""The run matrix: a TOML file (bench/matrix/*.toml) expanded into boots.

Validation is strict: an unknown key, a wrong type or an unknown arch,
accelerator, CPU model, variant or workload is an InputError naming the value,
where it is, and what is valid. A TOML syntax error keeps tomllib's line and
column.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import random
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import vocab
from .cell import Cell
from .vocab import TOP, InputError

RUN_KEYS = {"boots": int, "timeout_s": int, "mem_mb": int, "seed": int, "test_workloads": bool,
            "pin": bool, "max_boots": int, "budget_min": int, "target_pct": (int, float),
            "kernel_target_pct": (int, float)}
TARGET_KEYS = {"arch": str, "accel": str, "cpu": str, "optional": bool}
WORKLOAD_KEYS = {"name": str, "variants": list, "vcpus": list, "max_vcpus": int, "params": dict}
BASE_CONFIG = TOP / "kernel" / "configs" / "base.config"
MAX_BOOTS = 10000          # boots per cell
# CI half-width targets of the stopping rule (planner.py), percent
DEFAULT_TARGET_PCT = {"in-boot": 2.0, "kernel": 5.0}
MAX_TIMEOUT_S = 86400      # one boot
MIN_MEM_MB = 64            # the guests' kernel and initramfs need about 40 MiB
MAX_MEM_MB = 1 << 20       # and at most the host's memory


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
# Parameters the host sets itself, never the matrix.
HOST_PARAMS = {"workload", "seed"}


def _choices(param: str, attr: str) -> tuple:
    """What the workloads that read ``param`` (Workload.own_params) name in
    their results' ``attr``."""
    return tuple(dict.fromkeys(x for w in vocab.WORKLOAD_TABLE.values()
                               if param in w.own_params for x in getattr(w, attr)))


# Values of the string parameters other than ops (the module's
# qrwb_params.def describes the same; the module checks them again).
STR_CHOICES = {"placement": ("both",) + _choices("placement", "placements"),
               "impl": ("all",) + _choices("impl", "impls")}


def op_names() -> list[str]:
    """Op names of the module's op table bench/module/qrwb_ops.def."""
    return list(vocab.op_orderings())


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
    max_boots: int = 0     # the stopping rule may boot a cell up to this often (planner.py)
    budget_min: int = 0    # ... within this wall time for the whole matrix (0: no limit)
    target_pct: float = DEFAULT_TARGET_PCT["in-boot"]   # CI half-width targets
    kernel_target_pct: float = DEFAULT_TARGET_PCT["kernel"]
    targets: list = field(default_factory=list)     # dicts
    workloads: list = field(default_factory=list)   # dicts


def _where(path: Path, what: str, line: int | None = None) -> str:
    return f"{path.name}:{line}: {what}" if line else f"{path.name}: {what}"


class _Lines:
    """Line numbers of the tables and keys of a matrix file, for error messages
    (tomllib gives positions only for syntax errors)."""

    _HEADER = re.compile(r"\s*\[\[\s*([A-Za-z_]\w*)\s*\]\]|\s*\[\s*([A-Za-z_]\w*)\s*\]")

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.tables: dict[tuple[str, int], tuple[int, int]] = {}
        seen: dict[str, int] = {}
        last = None
        for n, line in enumerate(self.lines, 1):
            m = self._HEADER.match(line)
            if not m:
                continue
            name = m.group(1) or m.group(2)
            if last is not None:
                self.tables[last] = (self.tables[last][0], n - 1)
            last = (name, seen.get(name, 0))
            seen[name] = last[1] + 1
            self.tables[last] = (n, len(self.lines))
        if last is not None:
            self.tables[last] = (self.tables[last][0], len(self.lines))

    def line(self, table: str, index: int = 0, key: str | None = None) -> int | None:
        """The line of ``key`` (``a.b``: b inside a's inline table) in the
        index-th ``table``; the table's header line when the key is not found."""
        if (table, index) not in self.tables:
            return None
        first, last = self.tables[(table, index)]
        for part in reversed((key or "").split(".")):
            if not part:
                continue
            pat = re.compile(rf"(^|[{{,\s]){re.escape(part)}\s*=")
            for n in range(first, last + 1):
                text = self.lines[n - 1].split("#", 1)[0]
                if pat.search(text):
                    return n
        return first


class _At:
    """Where an error is: the file, and (optionally) the table and key."""

    def __init__(self, path: Path, lines: _Lines | None = None, table: str = "", index: int = 0):
        self.path, self.lines, self.table, self.index = path, lines, table, index

    def error(self, what: str, key: str | None = None) -> InputError:
        n = self.lines.line(self.table, self.index, key) if self.lines and self.table else None
        return InputError(_where(self.path, what, n))


def _check_keys(at: _At, where: str, table: dict, spec: dict, required: set) -> None:
    for k, v in table.items():
        if k not in spec:
            raise at.error(f"unknown key '{k}' in {where}: valid are {', '.join(spec)}", k)
        if not isinstance(v, spec[k]) or (spec[k] is not bool and isinstance(v, bool)):
            name = spec[k].__name__ if isinstance(spec[k], type) else "a number"
            raise at.error(f"{where}.{k} = {v!r}: must be {name}", k)
    for k in required:
        if k not in table:
            raise at.error(f"{where} lacks '{k}'")


def _check_param(at: _At, where: str, name: str, value) -> None:
    key = f"params.{name}"
    PARAMS, STR_PARAMS = vocab.module_params()
    if name in HOST_PARAMS:
        raise at.error(f"{where}.params.{name}: set by the rig, not the matrix", key)
    if name in STR_PARAMS:
        if not isinstance(value, str) or not value.replace(",", "").replace("_", "").isalnum():
            raise at.error(f"{where}.params.{name} = {value!r}: must be a comma-separated list of names", key)
        if name == "ops":
            valid = op_names()
            for op in value.split(","):
                if op != "all" and op not in valid:
                    raise at.error(f"{where}.params.ops: unknown op '{op}': valid are all, "
                                   f"{', '.join(valid)}", key)
        elif name in STR_CHOICES and value not in STR_CHOICES[name]:
            raise at.error(f"{where}.params.{name} = '{value}': valid are "
                           f"{', '.join(STR_CHOICES[name])}", key)
        return
    if name not in PARAMS:
        raise at.error(f"unknown parameter '{name}' in {where}.params: valid are "
                       f"{', '.join(sorted(set(PARAMS) | STR_PARAMS))}", key)
    lo, hi = PARAMS[name]
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise at.error(f"{where}.params.{name} = {value!r}: must be an integer in {lo}..{hi}", key)


def _toml_kind(v) -> str:
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "an array" + (" of tables" if v and all(isinstance(x, dict) for x in v) else "")
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    return f"{names.get(type(v), 'a date/time')} ({v!r:.40})"


def _key_line(lines: _Lines, key: str) -> int | None:
    pat = re.compile(rf"\s*(\[\[?\s*{re.escape(key)}\s*\]\]?|{re.escape(key)}\s*=)")
    return next((n for n, line in enumerate(lines.lines, 1) if pat.match(line)), None)


def _values(params: dict, name: str, default) -> list:
    v = params.get(name, default)
    return v if isinstance(v, list) else [v]


def _check_threads(at: _At, where: str, vcpus: list, params: dict) -> None:
    """The module's own limits on threads against the vCPUs of each cell
    (qrwb_parse in bench/module/qrwb_params.c), so no cell is refused at boot."""
    where = f"{where}: " if where else ""
    for n, t, r, w in itertools.product(vcpus, _values(params, "threads", 0),
                                        _values(params, "nreaders", 0),
                                        _values(params, "nwriters", 0)):
        if t > n:
            raise at.error(f"{where}threads = {t} exceeds vcpus = {n}: valid is 0 (all "
                           f"vCPUs) or 1..{n}", "params.threads")
        if r + w > n:
            raise at.error(f"{where}nreaders + nwriters = {r} + {w} exceeds vcpus = {n}: "
                           f"valid is a sum of 1..{n}", "params.nreaders")
        if (r or w) and t and t != r + w:
            raise at.error(f"{where}threads = {t} differs from nreaders + nwriters = "
                           f"{r + w}: valid is threads = 0 or {r + w}", "params.threads")


def _check_copies(at: _At, where: str, name: str, params: dict) -> None:
    """The module's refusal of an injected barrier without the copy it lives
    in (qrwb_parse), so no cell is refused at boot."""
    if ("copies" in vocab.workload(name).own_params and 1 in _values(params, "aa_inject_mb", 0)
            and 1 in _values(params, "copies", 2)):
        raise at.error(f"{where}: aa_inject_mb = 1 with copies = 1: the barrier is injected "
                       "into copy 1: valid is copies = 2 with it", "params.copies")


def check_cell_params(source: str, vcpus: int, params: dict) -> None:
    """The checks a matrix's workload table gets, for one cell given outside
    a matrix (run/ktree.py's CELL): every module parameter, and the threads
    against ``vcpus``; an :class:`InputError` names ``source``."""
    at = _At(Path(source))
    for k, v in params.items():
        _check_param(at, source, k, v)
    _check_threads(at, "", [vcpus], params)


def load(path: str | Path) -> Matrix:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read matrix {path}: {e.strerror}") from None
    try:
        text = raw.decode()
        doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: malformed TOML: {e}") from None
    lines = _Lines(text)
    top = {"run": "a table [run]", "target": "an array of tables [[target]]",
           "workload": "an array of tables [[workload]]"}
    for k in doc:
        if k not in top:
            raise _At(path, lines, k).error(f"unknown table '{k}': valid are run, target, workload")
        shape_ok = isinstance(doc[k], dict) if k == "run" else (
            isinstance(doc[k], list) and all(isinstance(x, dict) for x in doc[k]))
        if not shape_ok:
            raise InputError(_where(path, f"'{k}' must be {top[k]}, not "
                                          f"{_toml_kind(doc[k])}", _key_line(lines, k)))
    run = doc.get("run", {})
    at = _At(path, lines, "run")
    _check_keys(at, "[run]", run, RUN_KEYS, set())
    m = Matrix(path=path, boots=run.get("boots", 1), timeout_s=run.get("timeout_s", 300),
               mem_mb=run.get("mem_mb", 256), seed=run.get("seed", 1), pin=run.get("pin", False),
               budget_min=run.get("budget_min", 0),
               target_pct=float(run.get("target_pct", DEFAULT_TARGET_PCT["in-boot"])),
               kernel_target_pct=float(run.get("kernel_target_pct", DEFAULT_TARGET_PCT["kernel"])))
    m.max_boots = run.get("max_boots", m.boots)
    workloads = vocab.WORKLOADS + (vocab.TEST_WORKLOADS if run.get("test_workloads") else ())
    mem_hi = min(MAX_MEM_MB, vocab.host_mem_mb())
    for key, value, lo, hi in (("boots", m.boots, 1, MAX_BOOTS),
                               ("timeout_s", m.timeout_s, 1, MAX_TIMEOUT_S),
                               ("mem_mb", m.mem_mb, MIN_MEM_MB, mem_hi),
                               ("seed", m.seed, 0, (1 << 64) - 1),
                               ("max_boots", m.max_boots, m.boots, MAX_BOOTS),
                               ("budget_min", m.budget_min, 0, 7 * 24 * 60),
                               ("target_pct", m.target_pct, 0.1, 50),
                               ("kernel_target_pct", m.kernel_target_pct, 0.1, 50)):
        if not lo <= value <= hi:
            why = " (this host's memory)" if key == "mem_mb" and hi < MAX_MEM_MB else ""
            kind = "a number" if key.endswith("_pct") else "an integer"
            raise at.error(f"[run].{key} = {value}: must be {kind} in {lo}..{hi}{why}", key)
    if not doc.get("target") or not doc.get("workload"):
        raise InputError(_where(path, "needs at least one [[target]] and one [[workload]]"))
    for i, t in enumerate(doc["target"]):
        where = f"[[target]] #{i + 1}"
        at = _At(path, lines, "target", i)
        _check_keys(at, where, t, TARGET_KEYS, {"arch", "accel"})
        key = "arch"            # the key being checked, for the error's line
        try:
            arch = vocab.check_arch(t["arch"])
            key = "accel"
            vocab.check_accel(t["accel"])
            key = "cpu"
            cpu = t.get("cpu", arch.kvm_cpu if t["accel"] == "kvm" else arch.cpu_models[0])
            vocab.check_cpu_model(arch, t["accel"], cpu)
        except InputError as e:
            raise at.error(f"{where}: {e}", key) from None
        m.targets.append({"arch": t["arch"], "accel": t["accel"], "cpu": cpu,
                          "optional": t.get("optional", False)})
    for i, w in enumerate(doc["workload"]):
        where = f"[[workload]] #{i + 1}"
        at = _At(path, lines, "workload", i)
        _check_keys(at, where, w, WORKLOAD_KEYS, {"name", "variants"})
        if w["name"] not in workloads:
            raise at.error(f"{where}: unknown workload '{w['name']}': valid are {', '.join(workloads)}",
                           "name")
        try:
            for v in w["variants"]:
                vocab.check_variant(v)
                for t in m.targets:
                    vocab.check_variant_arch(t["arch"], v)
        except InputError as e:
            raise at.error(f"{where}: {e}", "variants") from None
        nr = config_nr_cpus()
        if ("vcpus" in w) == ("max_vcpus" in w):
            raise at.error(f"{where} needs either 'vcpus' (a list) or 'max_vcpus' "
                           "(a sweep 1, 2, 4, ... up to it), not both", "max_vcpus")
        if "max_vcpus" in w and not 1 <= w["max_vcpus"] <= nr:
            raise at.error(f"{where}.max_vcpus = {w['max_vcpus']}: must be in 1..{nr} (NR_CPUS)", "max_vcpus")
        vcpus = w["vcpus"] if "vcpus" in w else sweep(w["max_vcpus"])
        for n in vcpus:
            if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= nr:
                raise at.error(f"{where}.vcpus: {n!r} is not a vCPU count in 1..{nr} (NR_CPUS)", "vcpus")
        if not w["variants"]:
            raise at.error(f"{where}.variants is empty: give at least one of "
                           f"{', '.join(vocab.kernel_variants())}", "variants")
        if not vcpus:
            raise at.error(f"{where}.vcpus is empty: give at least one vCPU count in 1..{nr}",
                           "vcpus")
        for key, values in (("variants", w["variants"]), ("vcpus", vcpus)):
            dup = next((v for i, v in enumerate(values) if v in values[:i]), None)
            if dup is not None:
                raise at.error(f"{where}.{key}: {dup!r} is listed twice", key)
        params = w.get("params", {})
        for k, v in params.items():
            if isinstance(v, list) and not v:
                raise at.error(f"{where}.params.{k} is an empty list: give a value or a list "
                               "of values", f"params.{k}")
            for x in (v if isinstance(v, list) else [v]):
                _check_param(at, where, k, x)
        _check_threads(at, where, vcpus, params)
        _check_copies(at, where, w["name"], params)
        m.workloads.append({"name": w["name"], "variants": list(w["variants"]),
                            "vcpus": list(vcpus), "params": params})
    return m


def with_accel(m: Matrix, accel: str) -> Matrix:
    """The matrix with every target under ``accel`` (ACCEL=kvm|tcg): kvm makes
    each target a required KVM target with -cpu host (KVM must then work, or
    the bench says why and stops); tcg drops the KVM targets."""
    vocab.check_accel(accel)
    out, seen = [], set()
    for t in m.targets:
        if accel == "tcg" and t["accel"] == "kvm":
            continue
        if accel == "kvm":
            t = {"arch": t["arch"], "accel": "kvm", "cpu": vocab.ARCHES[t["arch"]].kvm_cpu,
                 "optional": False}
        key = (t["arch"], t["accel"], t["cpu"])
        if key not in seen:
            seen.add(key)
            out.append(t)
    if not out:
        raise InputError(f"{m.path.name}: no target left under ACCEL={accel}")
    return dataclasses.replace(m, targets=out)


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
                        out.append(Cell.boot(t["arch"], t["accel"], t["cpu"], v, w["name"], n,
                                             zip(names, combo)))
    return out


def boot(m: Matrix, cell: Cell, index: int) -> Boot:
    """The index-th boot of a cell, with its seed (stable: a re-run resumes)."""
    h = hashlib.sha256(f"{m.seed}:{cell.key()}:{index}".encode()).digest()
    return Boot(cell, index, int.from_bytes(h[:4], "little"))


def boots(m: Matrix, cell_list: list[Cell]) -> list[Boot]:
    """All first boots in one seeded random order (interleaves variants and cells)."""
    out = [boot(m, c, b) for c in cell_list for b in range(m.boots)]
    random.Random(m.seed).shuffle(out)
    return out

"""The one Cell type: what is held fixed.

Two levels use it. A *boot cell* (the matrix's: what one boot runs) names
the target, the kernel variant, the workload, the vCPUs and the module
parameters; build it with :meth:`Cell.boot`. A *comparison cell* (the
analysis's: what a comparison holds fixed) names the target, the vCPUs, the
workload, the parameters that define what is measured, the impl, op and
placement of one timed loop, and the host; its variants are what is
compared, so its ``variant`` is "". Build it from a sample with
:meth:`Cell.of`. A field a level does not fix is "".
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace


def canonical_json(obj) -> str:
    """Key-sorted compact JSON: equal objects give equal text (the cell key)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True, order=True)
class Cell:
    arch: str
    accel: str
    cpu: str             # the CPU model (QEMU's -cpu; samples' cpu_model)
    vcpus: int
    workload: str
    impl: str = ""       # comparison cells: kernel, module, inline
    op: str = ""         # comparison cells: the op (rwlock: "rwlock")
    placement: str = ""  # comparison cells: shared, percpu
    params: str = "{}"   # canonical JSON of the parameters
    variant: str = ""    # boot cells: the kernel variant booted
    # The host that ran the boots (make bench HOSTS=...; "" the coordinating
    # host): a blocking factor, so no comparison pairs two hosts' values.
    host: str = ""

    @classmethod
    def boot(cls, arch: str, accel: str, cpu: str, variant: str, workload: str, vcpus: int,
             params=()) -> "Cell":
        """A boot cell; ``params`` a dict or (name, value) pairs."""
        return cls(arch, accel, cpu, int(vcpus), workload, params=canonical_json(dict(params)),
                   variant=variant)

    @classmethod
    def of_run(cls, run) -> "Cell | None":
        """The boot cell a stored run booted (a ``runs`` row: arch, accel,
        cpu_model, kernel_variant, workload, vcpus, cell_params); None when
        its parameters do not read as JSON (a damaged row)."""
        try:
            params = json.loads(run["cell_params"] or "{}")
        except ValueError:
            return None
        return cls.boot(run["arch"], run["accel"], run["cpu_model"], run["kernel_variant"],
                        run["workload"], run["vcpus"], params)

    @classmethod
    def of(cls, sample: dict) -> "Cell":
        """The comparison cell of a sample (a stored window)."""
        return cls(sample["arch"], sample["accel"], sample["cpu_model"], sample["vcpus"],
                   sample["workload"], sample["impl"], sample["op"], sample["placement"],
                   sample["params"], host=sample.get("host") or "")

    def params_dict(self) -> dict:
        return json.loads(self.params)

    @property
    def threads(self) -> int:
        """Measuring threads: the ``threads`` parameter, else one per vCPU."""
        return int(self.params_dict().get("threads") or self.vcpus)

    def params_text(self, drop=()) -> str:
        """``k=v,...`` of the parameters; ``threads`` only when it differs from vCPUs."""
        p = self.params_dict()
        if p.get("threads") == self.vcpus:
            p.pop("threads")
        return ",".join(f"{k}={v}" for k, v in sorted(p.items()) if k not in drop)

    def key(self) -> str:
        """A boot cell's stable key (run ids and the stored plan hash it)."""
        return json.dumps({"arch": self.arch, "accel": self.accel, "cpu": self.cpu,
                           "variant": self.variant, "workload": self.workload,
                           "vcpus": self.vcpus, "params": self.params_dict()}, sort_keys=True)

    def label(self) -> str:
        """A boot cell as the progress lines name it, a comparison cell as
        the report's rows do."""
        if self.variant:
            p = " ".join(f"{k}={v}" for k, v in sorted(self.params_dict().items())
                         if k in ("write_pct", "nlocks", "placement", "copies", "ops"))
            return (f"{self.arch}/{self.accel}/{self.cpu} {self.variant} {self.workload}"
                    f"{' ' + p if p else ''} {self.vcpus}v")
        extra = self.params_text()
        return (f"{self.arch}/{self.accel}/{self.cpu}/{self.vcpus}v "
                f"{self.workload} {self.impl} {self.op} {self.placement}"
                + (f" [{extra}]" if extra else "") + (f" @{self.host}" if self.host else ""))

    def metric(self, variant: str, what: str = "throughput") -> str:
        """``qrwbench.<arch>.<accel>.<workload>.<metric>`` (0-day style name)."""
        parts = [self.cpu, f"{self.vcpus}v", self.impl, self.op, variant, self.placement]
        extra = self.params_text().replace(",", ".").replace("=", "")
        if extra:
            parts.append(extra)
        if self.host:
            parts.append(f"at-{self.host}")
        return f"qrwbench.{self.arch}.{self.accel}.{self.workload}." + \
            ".".join(parts + [what])

    def replace(self, **kw) -> "Cell":
        return replace(self, **kw)


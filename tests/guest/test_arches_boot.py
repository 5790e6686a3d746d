"""ppc64le and riscv64 guests boot (issue 30): every kernel variant the arch
offers, 1 and 2 vCPUs, both measured workloads, under TCG, through the code
`make bench` boots with (run/boot.py); their records pass the host's checks
and import into a results store. `make test-slow` builds their kernels,
modules and initramfs first (tens of minutes cold); make test leaves them out."""
import pytest

from conftest import TOP, missing
from qrwbench import matrix, vocab
from qrwbench.cell import Cell
from qrwbench.results import records, store
from qrwbench.run import boot as one_boot

pytestmark = [pytest.mark.guest, pytest.mark.slow]

# the other bootable arches: every entry of vocab.ARCHES the default matrix
# does not boot (its arches boot in make test's own guest tests)
DEFAULT_ARCHES = {t["arch"] for t in matrix.load(TOP / "bench" / "matrix" / "default.toml").targets}
TARGETS = [(a, c) for a in sorted(set(vocab.ARCHES) - DEFAULT_ARCHES)
           for c in vocab.ARCHES[a].cpu_models]
PARAMS = {"atomics": {"ops": "atomic_add_return,atomic_fetch_or,smp_mb", "reps": 2,
                      "duration_ms": 5},
          "rwlock": {"write_pct": 10, "reps": 2, "duration_ms": 5}}


def variants(arch, cpu):
    """Each variant the arch offers (not unpatched: no series, no ordering);
    a CPU model other than the arch's first boots acqrel only."""
    vs = [v for v in vocab.kernel_variants() if v != "unpatched"
          and arch in (vocab.variant_arches(v) or (arch,))]
    return vs if cpu == vocab.ARCHES[arch].cpu_models[0] else ["acqrel"]


CASES = [(a, c, v, n) for a, c in TARGETS for v in variants(a, c) for n in (1, 2)]


@pytest.mark.parametrize("arch,cpu,variant,vcpus", CASES,
                         ids=[f"{a}-{c}-{v}-{n}v" for a, c, v, n in CASES])
def test_boots_both_workloads_and_imports(tmp_path, arch, cpu, variant, vcpus):
    for what in (vocab.kernel_dir(arch, variant) / ".qrwbench-built", vocab.module_ko(arch, variant),
                 vocab.initrd(arch, variant)):
        if not what.exists():
            missing(f"{what} is not built", by="make test-slow")
    db = tmp_path / "r.sqlite"
    for workload, params in PARAMS.items():
        c = Cell.boot(arch, "tcg", cpu, variant, workload, vcpus, tuple(sorted(params.items())))
        d = tmp_path / f"{workload}-run"
        st = one_boot.boot_one(c, 7, d, 240, 256, one_boot.NOT_ASKED)
        console = (d / "console.log").read_bytes()
        assert st["status"] == "ok", (st.get("reason"), st.get("console_tail"))
        p = records.parse_console(console)
        assert p.ok, p.reason
        assert p.begin["arch"] == arch and p.begin["kernel_variant"] == variant
        assert p.begin["online_cpus"] == vcpus
        assert p.results and all(r["ops"] > 0 and r["ns"] > 0 for r in p.results)
        got = {r["op"] for r in p.results}
        if workload == "atomics":
            assert set(params["ops"].split(",")) <= got
        else:
            assert got == {"rwlock"} and {r["impl"] for r in p.results} == {"kernel", "module"}
        r = store.import_run(db, d)
        assert (r.status, r.added, r.samples) == ("ok", True, len(p.results)), r.line()

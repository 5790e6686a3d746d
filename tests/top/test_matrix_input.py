"""Every invalid user input is a clear one-line error naming the value and
what is valid, before any work starts."""
from pathlib import Path

import pytest

from qrwbench import matrix, vocab
from qrwbench.run import qemu
from qrwbench.vocab import InputError

# the variants, read here from the fragment files themselves (not through vocab)
VARIANT_FILES = sorted(p.name[len("variant-"):-len(".config")]
                       for p in (Path(__file__).parents[2] / "kernel" / "configs").glob("variant-*.config"))

GOOD = """
[run]
boots = 1
[[target]]
arch = "x86_64"
accel = "tcg"
cpu = "max"
[[workload]]
name = "rwlock"
variants = ["acqrel"]
vcpus = [2]
params = { write_pct = 10, duration_ms = 5 }
"""


def load(tmp_path, text):
    p = tmp_path / "m.toml"
    p.write_text(text)
    return matrix.load(p)


def err(tmp_path, text):
    with pytest.raises(InputError) as e:
        load(tmp_path, text)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_good_matrix_loads(tmp_path):
    m = load(tmp_path, GOOD)
    assert [c.label() for c in matrix.cells(m)] == ["x86_64/tcg/max acqrel rwlock write_pct=10 2v"]


@pytest.mark.parametrize("old,new,expect", [
    ('arch = "x86_64"', 'arch = "sparc"', "unknown arch 'sparc': valid are arm64, ppc64le, riscv64, x86_64"),
    ('variants = ["acqrel"]', 'variants = ["sloppy"]', "unknown variant 'sloppy': valid are " + ", ".join(VARIANT_FILES)),
    ('name = "rwlock"', 'name = "frob"', "unknown workload 'frob': valid are atomics, rwlock"),
    ('name = "rwlock"', 'name = "hang"', "unknown workload 'hang'"),
    ('cpu = "max"', 'cpu = "pentium"', "unknown CPU model 'pentium' for x86_64 under tcg: valid are max"),
    ('accel = "tcg"', 'accel = "hvf"', "unknown accel 'hvf': valid are tcg, kvm"),
    ("vcpus = [2]", "vcpus = [0]", "0 is not a vCPU count in 1..64 (NR_CPUS)"),
    ("vcpus = [2]", "vcpus = [65]", "65 is not a vCPU count in 1..64"),
    ("write_pct = 10", "write_pct = 101", "write_pct = 101: must be an integer in 0..100"),
    ("write_pct = 10", "write_pct = -1", "write_pct = -1: must be an integer in 0..100"),
    ("duration_ms = 5", "duration_ms = 0", "duration_ms = 0: must be an integer in 1..60000"),
    ("duration_ms = 5", "duration_ms = -5", "duration_ms = -5: must be an integer"),
    ("duration_ms = 5", 'duration_ms = "fast"', "duration_ms = 'fast': must be an integer"),
    ("duration_ms = 5", "duration_ms = 2.5", "duration_ms = 2.5: must be an integer"),
    ("duration_ms = 5", 'ops = "atomic_frob"', "unknown op 'atomic_frob': valid are all, atomic_add_return"),
    ("duration_ms = 5", 'placement = "nearby"', "placement = 'nearby': valid are both, shared, percpu"),
    ("duration_ms = 5", "frobs = 3", "unknown parameter 'frobs'"),
    ("duration_ms = 5", "seed = 3", "params.seed: set by the rig"),
    ("boots = 1", "boots = 1\nspeed = 2", "unknown key 'speed' in [run]"),
    ("boots = 1", 'boots = 1\npin = "yes"', "[run].pin = 'yes': must be bool"),
    ("vcpus = [2]", "max_vcpus = 65", "max_vcpus = 65: must be in 1..64 (NR_CPUS)"),
    ("vcpus = [2]", "max_vcpus = 0", "max_vcpus = 0: must be in 1..64 (NR_CPUS)"),
    ("vcpus = [2]", "vcpus = [2]\nmax_vcpus = 8", "needs either 'vcpus' (a list) or 'max_vcpus'"),
    ("vcpus = [2]", "", "needs either 'vcpus' (a list) or 'max_vcpus'"),
    # shapes that used to end in a traceback
    ("[run]\nboots = 1", "run = 5", "'run' must be a table [run], not an integer (5)"),
    ("[run]\nboots = 1", "[[run]]\nboots = 1", "'run' must be a table [run], not an array of tables"),
    # empty lists used to run nothing and exit 0
    ('variants = ["acqrel"]', "variants = []", "#1.variants is empty: give at least one of acqrel"),
    ("vcpus = [2]", "vcpus = []", "#1.vcpus is empty: give at least one vCPU count in 1..64"),
    ("write_pct = 10", "write_pct = []", "#1.params.write_pct is an empty list"),
    ('variants = ["acqrel"]', 'variants = ["acqrel", "acqrel"]', "variants: 'acqrel' is listed twice"),
    ("vcpus = [2]", "vcpus = [2, 1, 2]", "vcpus: 2 is listed twice"),
    # the module's limits, checked here instead of at boot
    ("write_pct = 10", "threads = 3", "threads = 3 exceeds vcpus = 2: valid is 0 (all vCPUs) or 1..2"),
    ("write_pct = 10", "nreaders = 2, nwriters = 1",
     "nreaders + nwriters = 2 + 1 exceeds vcpus = 2: valid is a sum of 1..2"),
    ("write_pct = 10", "nreaders = 1, nwriters = 0, threads = 2",
     "threads = 2 differs from nreaders + nwriters = 1"),
    ("boots = 1", "boots = 1\nmem_mb = 1000000000", "[run].mem_mb = 1000000000: must be an integer in 64.."),
    ("boots = 1", "boots = 1\nmem_mb = 32", "[run].mem_mb = 32: must be an integer in 64.."),
    ("boots = 1", "boots = 100000000", "[run].boots = 100000000: must be an integer in 1..10000"),
    ("boots = 1", "boots = 1\ntimeout_s = 0", "[run].timeout_s = 0: must be an integer in 1..86400"),
    ("boots = 1", "boots = 1\nseed = -1", "[run].seed = -1: must be an integer in 0.."),
])
def test_bad_matrix_values_are_named(tmp_path, old, new, expect):
    assert old in GOOD
    assert expect in err(tmp_path, GOOD.replace(old, new, 1))


@pytest.mark.parametrize("copies,inject,ok", [(1, 0, True), (2, 1, True), (1, 1, False),
                                               ("[1, 2]", "[0, 1]", False)])
def test_an_injected_barrier_needs_the_copy_it_lives_in(tmp_path, copies, inject, ok):
    """copies = 1 measures copy 0 only; aa_inject_mb puts its barrier in copy
    1, so the pair is refused before any boot (the module refuses it too)."""
    text = GOOD.replace('name = "rwlock"', 'name = "atomics"').replace(
        "write_pct = 10", f"copies = {copies}, aa_inject_mb = {inject}")
    if ok:
        assert len(matrix.cells(load(tmp_path, text))) >= 1
    else:
        assert ("aa_inject_mb = 1 with copies = 1: the barrier is injected into copy 1: "
                "valid is copies = 2 with it") in err(tmp_path, text)


@pytest.mark.parametrize("table,text,expect", [
    ("target", "target = 5", "'target' must be an array of tables [[target]], not an integer (5)"),
    ("workload", 'workload = "x"', "'workload' must be an array of tables [[workload]], not a string"),
    ("target", "[target]\narch = \"x86_64\"\naccel = \"tcg\"",
     "'target' must be an array of tables [[target]], not a table"),
])
def test_a_table_of_the_wrong_shape_is_named(tmp_path, table, text, expect):
    start = GOOD.index(f"[[{table}]]")
    end = GOOD.find("[[", start + 2)
    rest = GOOD[:start] + (GOOD[end:] if end > 0 else "")
    msg = err(tmp_path, text + "\n" + rest)      # top-level keys come before any table
    assert expect in msg, msg


def test_every_vcpu_count_of_a_list_is_checked_against_threads(tmp_path):
    text = GOOD.replace("vcpus = [2]", "vcpus = [4, 2]").replace("write_pct = 10", "threads = [4]")
    assert "threads = 4 exceeds vcpus = 2" in err(tmp_path, text)


@pytest.mark.parametrize("limit,counts", [(1, [1]), (2, [1, 2]), (8, [1, 2, 4, 8]),
                                          (6, [1, 2, 4, 6]), (64, [1, 2, 4, 8, 16, 32, 64])])
def test_max_vcpus_sweeps_powers_of_two(tmp_path, limit, counts):
    m = load(tmp_path, GOOD.replace("vcpus = [2]", f"max_vcpus = {limit}"))
    assert [c.vcpus for c in matrix.cells(m)] == counts


def test_nr_cpus_limit_comes_from_the_kernel_config(tmp_path, monkeypatch):
    cfg = tmp_path / "base.config"
    cfg.write_text("CONFIG_SMP=y\nCONFIG_NR_CPUS=16\n")
    monkeypatch.setattr(matrix, "BASE_CONFIG", cfg)
    assert "max_vcpus = 32: must be in 1..16 (NR_CPUS)" in err(
        tmp_path, GOOD.replace("vcpus = [2]", "max_vcpus = 32"))
    assert "32 is not a vCPU count in 1..16 (NR_CPUS)" in err(
        tmp_path, GOOD.replace("vcpus = [2]", "vcpus = [32]"))


def test_pin_is_read(tmp_path):
    assert not load(tmp_path, GOOD).pin
    assert load(tmp_path, GOOD.replace("boots = 1", "boots = 1\npin = true")).pin


def test_malformed_toml_gives_the_line(tmp_path):
    msg = err(tmp_path, GOOD.replace('cpu = "max"', 'cpu = "max'))
    assert "malformed TOML" in msg and "line 7" in msg


def test_hang_needs_test_workloads(tmp_path):
    m = load(tmp_path, GOOD.replace('name = "rwlock"', 'name = "hang"').replace(
        "boots = 1", "boots = 1\ntest_workloads = true").replace("params = { write_pct = 10, duration_ms = 5 }", ""))
    assert matrix.cells(m)[0].workload == "hang"


def test_missing_matrix_file(tmp_path):
    with pytest.raises(InputError, match="cannot read matrix"):
        matrix.load(tmp_path / "nope.toml")


def test_missing_qemu_binary_names_the_package(monkeypatch):
    monkeypatch.setattr(qemu.shutil, "which", lambda name: None)
    with pytest.raises(InputError, match="missing QEMU binary qemu-system-aarch64: apt-get install qemu-system-arm"):
        qemu.qemu_binary("arm64")


def test_cpu_model_kvm_needs_host():
    with pytest.raises(InputError, match="valid are host"):
        vocab.check_cpu_model(vocab.ARCHES["x86_64"], "kvm", "max")


@pytest.mark.parametrize("old,new,line", [
    ('arch = "x86_64"', 'arch = "sparc"', 5),
    ('cpu = "max"', 'cpu = "pentium"', 7),
    ('variants = ["acqrel"]', 'variants = ["sloppy"]', 10),
    ("vcpus = [2]", "vcpus = [0]", 11),
    ("write_pct = 10", "write_pct = 101", 12),
    ("boots = 1", "boots = 0", 3),
    ("[run]\nboots = 1", "run = 5", 2),
    ("boots = 1", "bots = 1", 3),
    ('name = "rwlock"', 'name = "frob"', 9),
])
def test_content_errors_give_the_line(tmp_path, old, new, line):
    msg = err(tmp_path, GOOD.replace(old, new))
    assert msg.startswith(f"m.toml:{line}: "), msg


def test_line_is_that_of_the_right_table(tmp_path):
    # the same key in two [[workload]] tables: the error names the second one's line
    text = GOOD + '[[workload]]\nname = "atomics"\nvariants = ["acqrel"]\nvcpus = [1]\n' \
                  'params = { duration_ms = 0 }\n'
    msg = err(tmp_path, text)
    assert msg.startswith("m.toml:17: [[workload]] #2.params.duration_ms = 0"), msg

"""One vocabulary (issue 16): no module of the host package writes its own
list of variants, orderings, lock implementations, workloads, arches or
placements. They come from the module's tables (qrwb_ops.def, the configs)
through the vocabulary module, qrwbench/vocab.py, which alone may name
them. A workload is one record there (issue 27): no other module asks
about one by its name (a comparison, a match case, a dict key)."""
import ast
import re

from conftest import TOP
from qrwbench import vocab
from qrwbench.results import records

PACKAGE = TOP / "analysis" / "qrwbench"
MODULE = TOP / "bench" / "module"


def vocabulary() -> dict[str, set[str]]:
    """Every name of each kind, read from the vocabulary module's tables."""
    locks = vocab.lock_impls()
    wls = vocab.WORKLOAD_TABLE.values()
    return {
        "variant or ordering": (set(vocab.VARIANT_ORDER) | set(vocab.kernel_variants())
                                | set(vocab.orderings()) | set(vocab.rwlock_variants())),
        "workload": set(vocab.WORKLOAD_TABLE),
        "arch": set(vocab.ARCHES) | set(vocab.kernel_arches()) | set(vocab.build_arches()),
        "lock implementation": ({i.name for i in locks} | {i.kind for i in locks}
                                | {x for w in wls for x in w.impls}),
        "placement": {x for w in wls for x in w.placements},
    }


VOCABULARY = vocabulary()


def hand_written_lists(source: str) -> list[tuple[int, str, list[str]]]:
    """(line, kind, names) of every literal tuple, list or set of two or more
    strings that are all names of one kind, and of every dict of constants
    keyed by such names (a lookup table of them)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elts = node.elts
        elif isinstance(node, ast.Dict) and all(isinstance(v, ast.Constant) for v in node.values):
            elts = node.keys
        else:
            continue
        names = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(names) < 2 or len(names) != len(elts):
            continue
        for kind, words in VOCABULARY.items():
            if set(names) <= words:
                found.append((node.lineno, kind, names))
    return found


def test_no_hand_written_vocabulary_outside_the_vocabulary_module():
    hits = [f"{p.relative_to(PACKAGE)}:{line}: {kind} {names}"
            for p in sorted(PACKAGE.rglob("*.py")) if p != PACKAGE / "vocab.py"
            for line, kind, names in hand_written_lists(p.read_text())]
    assert hits == []


def test_the_check_finds_a_hand_written_list():
    src = 'VARIANTS = ("full", "acqrel", "relaxed")\nX = {"full": "al", "relaxed": ""}\n' \
          'ok = ("full", "a string that is not a name")\nfor w in ["atomics", "rwlock"]: pass\n'
    got = [(line, kind) for line, kind, _ in hand_written_lists(src)]
    assert got == [(1, "variant or ordering"), (2, "variant or ordering"), (4, "workload")]
    # the vocabulary module itself does name them
    assert hand_written_lists((PACKAGE / "vocab.py").read_text())


def name_questions(source: str, names, dict_keys: bool = True) -> list[tuple[int, str]]:
    """(line, name) of every place that asks about one of ``names`` by its
    literal: a comparison with it (``x == "rwlock"``, ``"atomics" != y``,
    ``x in ("rwlock",)``), a ``match`` case and, with ``dict_keys``, a dict key."""

    def named(node) -> list[str]:
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [e.value for e in elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in names]

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
        elif isinstance(node, ast.MatchValue):
            sides = [node.value]
        elif dict_keys and isinstance(node, ast.Dict):
            sides = [k for k in node.keys if k is not None]
        else:
            continue
        found += [(node.lineno, n) for side in sides for n in named(side)]
    return sorted(found)


def workload_questions(source: str) -> list[tuple[int, str]]:
    """Workload names asked by literal, dict keys included."""
    return name_questions(source, VOCABULARY["workload"])


def test_no_module_asks_about_a_workload_by_its_name():
    hits = [f"{p.relative_to(PACKAGE)}:{line}: {name!r}: ask vocab.workload(name) instead"
            for p in sorted(PACKAGE.rglob("*.py")) if p != PACKAGE / "vocab.py"
            for line, name in workload_questions(p.read_text())]
    assert hits == []


def test_the_check_finds_a_single_workload_question():
    src = ('if cell.workload == "rwlock": pass\n'
           'ok = "atomics" != s["workload"]\n'
           'x = w in ("litmus",)\n'
           'match w:\n    case "hang": pass\n'
           'T = {"rwlock": f}\n'
           'fine = w == "a string that is not a name" or w in vocab.WORKLOADS\n')
    assert workload_questions(src) == [(1, "rwlock"), (2, "atomics"), (3, "litmus"),
                                       (5, "hang"), (6, "rwlock")]


def test_the_names_are_read_from_the_tables():
    for kind, names in VOCABULARY.items():
        assert len(names) >= 2, kind
    assert {"atomics", "rwlock"} <= VOCABULARY["workload"]
    assert set(vocab.WORKLOADS) | set(vocab.TEST_WORKLOADS) | set(vocab.MODULE_WORKLOADS) \
        == set(vocab.WORKLOAD_TABLE)


def test_each_workload_record_agrees_with_the_module():
    """Its own parameters are the "<name>: ..." rows of qrwb_params.def; its
    name a row of qrwb_workloads.def (where the module has that table); the
    fields its results add each have a rule in records.py."""
    own = {}
    for m in re.finditer(r'^QRWB_[US]PARAM\((\w+),.*"(\w+): [^"]*"\)$',
                         (MODULE / "qrwb_params.def").read_text(), re.M):
        own.setdefault(m[2], set()).add(m[1])
    for name, wl in vocab.WORKLOAD_TABLE.items():
        assert set(wl.own_params) == own.get(name, set()), name
        assert wl.use in ("matrix", "module", "test") and wl.measures, name
        if wl.use == "matrix":
            assert wl.baseline in wl.variants() and wl.heading and wl.impls and wl.placements
        assert set(wl.result_params) <= set(wl.fields)
        if wl.record == vocab.RESULT_RECORD:
            ruled = set(records.READ_WRITE_FIELDS) | {k for k, _lo, _hi in records.FIELD_RANGES}
            assert set(wl.fields) <= ruled, name
    table = MODULE / "qrwb_workloads.def"
    if table.exists():
        rows = re.findall(r"^QRWB_WORKLOAD\((\w+)\)$", table.read_text(), re.M)
        programs = re.findall(r"^QRWB_PROGRAM\((\w+)\)$",
                              (MODULE / "qrwb_programs.def").read_text(), re.M)
        # the module's workload= choices: the workload rows, then the programs
        assert rows + programs == list(vocab.WORKLOAD_TABLE)
        assert programs == [n for n, w in vocab.WORKLOAD_TABLE.items() if w.program]


def test_each_program_is_one_guest_file_with_its_name():
    """A program row is guest/prog_<name>.c, whose struct prog names it."""
    guest = MODULE.parents[1] / "guest"
    for name, wl in vocab.WORKLOAD_TABLE.items():
        if not wl.program:
            continue
        src = (guest / f"prog_{name}.c").read_text()
        assert f"const struct prog prog_{name} = {{" in src, name
        assert re.search(rf'\.name\s*=\s*"{name}",', src), name
        assert wl.kernel_ref and wl.op == name and wl.use == "matrix", name


def arch_questions(source: str) -> list[tuple[int, str]]:
    """Arch names compared or matched by literal (a dict keyed by arch is a
    table, not a question)."""
    return name_questions(source, VOCABULARY["arch"], dict_keys=False)


def test_no_module_asks_about_an_arch_by_its_name():
    """Booting, records, matrices and the analysis read an arch's facts from
    its entry in vocab.ARCHES (issue 30: adding an arch is one entry and its
    configs). build/ is exempt: the ordering audit reads each ISA's own
    instructions (arm64's LSE alternatives, x86's locked ops)."""
    hits = [f"{p.relative_to(PACKAGE)}:{line}: {name!r}: give vocab.Arch a field instead"
            for p in sorted(PACKAGE.rglob("*.py"))
            if p != PACKAGE / "vocab.py" and "build" not in p.relative_to(PACKAGE).parts
            for line, name in arch_questions(p.read_text())]
    assert hits == []


def test_the_check_finds_an_arch_question():
    src = ('if arch == "x86_64": pass\n'
           'ok = "arm64" != a\n'
           'x = a in ("riscv64", "ppc64le")\n'
           'match a:\n    case "arm64": pass\n'
           'fine = a == "not an arch" or vocab.ARCHES[a].tsc_khz\n')
    assert arch_questions(src) == [(1, "x86_64"), (2, "arm64"), (3, "ppc64le"), (3, "riscv64"),
                                   (5, "arm64")]


def test_every_bootable_arch_is_one_entry_and_its_configs():
    """Each entry of vocab.ARCHES has its row in kernel/scripts/arch.sh (its
    image), its fragment kernel/configs/<arch>.config, its QEMU package in
    make deps, and sane QEMU facts; and it is a target a matrix may name."""
    deps = (TOP / "kernel" / "scripts" / "deps.sh").read_text()
    for name, a in vocab.ARCHES.items():
        b = vocab.build_arches()[name]
        assert a.name == name and b.image, name
        assert (vocab.CONFIGS / f"{name}.config").exists(), name
        assert name in vocab.kernel_arches()
        assert re.search(rf"\b{re.escape(a.qemu_package)}\b", deps), (name, a.qemu_package)
        assert a.qemu.startswith("qemu-system-") and a.console and a.cpu_models and a.kvm_cpu
        lo, hi = a.module_area
        assert 0 < lo < hi < 1 << 64, name
        assert not a.machine_opts or a.machine_opts.startswith(","), name
        assert not a.kvm_machine_opts or a.kvm_machine_opts.startswith(","), name
    # issue 30: the two other qrwlock arches of the audit boot too
    assert {"ppc64le", "riscv64"} <= set(vocab.kernel_arches())
    assert vocab.ARCHES["ppc64le"].cpu_models[:2] == ("power9", "power10")


def test_a_variant_names_the_arches_that_offer_it():
    """allfull (CONFIG_ATOMICS_FULLY_ORDERED, kernel/patches/0003) exists on
    x86_64 and arm64 only: its fragment says so, and asking for it on another
    arch is one line naming both."""
    assert vocab.variant_arches("allfull") == ("x86_64", "arm64")
    assert vocab.variant_arches("acqrel") is None
    assert vocab.check_variant_arch("arm64", "allfull") == "allfull"
    import pytest
    with pytest.raises(vocab.InputError) as e:
        vocab.check_variant_arch("riscv64", "allfull")
    assert str(e.value) == ("variant 'allfull' is not offered on riscv64: valid arches are "
                            "x86_64, arm64 (kernel/configs/variant-allfull.config)")

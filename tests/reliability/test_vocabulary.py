"""One vocabulary (issue 16): no module of the host package writes its own
list of variants, orderings, lock implementations, workloads, arches or
placements. They come from the module's tables (qrwb_ops.def, the configs)
through the vocabulary module, qrwbench/vocab.py, which alone may name
them."""
import ast

from conftest import TOP

PACKAGE = TOP / "analysis" / "qrwbench"
VOCABULARY = {
    "variant or ordering": {"full", "acquire", "release", "relaxed", "acqrel", "allfull", "unpatched"},
    "workload": {"atomics", "rwlock", "litmus", "hang"},
    "arch": {"x86_64", "arm64", "ppc64le", "riscv64", "mips64el", "sparc64"},
    "lock implementation": {"full_c0", "acqrel_c0", "acqrel_c1", "acqrel_c1mb", "relaxed_c0",
                            "kernel", "module", "inline", "none"},
    "placement": {"shared", "percpu"},
}


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

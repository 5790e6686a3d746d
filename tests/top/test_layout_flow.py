"""The package layout follows the data flow (issue 16):

    matrix -> build -> run -> results -> analysis -> report

Each stage's subpackage imports only the top level and the stages whose
output it reads; in particular results/, analysis/ and report/ never import
run/: what is measured is judged and shown without the code that boots.
Checked on every import statement of the package (function-level ones too),
read with ``ast``."""
import ast

import pytest

from conftest import TOP

PACKAGE = TOP / "analysis" / "qrwbench"
STAGES = ("build", "run", "results", "analysis", "report")
TOP_LEVEL = None
# what each part of the package may import (besides itself and the top level)
ALLOWED = {
    TOP_LEVEL: set(),                 # vocab, matrix, errors, defaults, outputs, gitutil
    "build": set(),
    "results": set(),
    "analysis": {"results"},
    "report": {"results", "analysis"},
    "run": {"build", "results", "analysis", "report"},
}
ENTRY = {"cli.py", "__main__.py"}    # the command line imports every subcommand's module


def part(path) -> str | None:
    """The subpackage a file of the package is in (None: the top level)."""
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else TOP_LEVEL


def imported(path) -> list[tuple[int, str]]:
    """(line, dotted module) of every qrwbench module a file imports, resolved
    to absolute names (``from ..run import bench`` in qrwbench/report/x.py:
    ``qrwbench.run.bench``)."""
    rel = path.relative_to(PACKAGE).with_suffix("")
    here = ["qrwbench", *rel.parts[:-1]]           # the file's package (an __init__'s own)
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "qrwbench" or mod.startswith("qrwbench."):
                # from X import a, b: a and b may be modules of X
                out += [(node.lineno, f"{mod}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("qrwbench")]
    return out


def target_part(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else TOP_LEVEL


def violations() -> list[str]:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel in ENTRY:
            continue
        src = part(path)
        for line, mod in imported(path):
            dst = target_part(mod)
            if dst is TOP_LEVEL:
                ok = mod.split(".")[1] not in ("cli", "__main__")    # the entry points import all
            else:
                ok = dst == src or dst in ALLOWED[src]
            if not ok:
                bad.append(f"{rel}:{line}: {src or 'top level'} imports {mod}")
    return bad


def test_every_module_is_in_a_stage():
    subdirs = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert subdirs == set(STAGES)
    for s in STAGES:
        doc = ast.get_docstring(ast.parse((PACKAGE / s / "__init__.py").read_text()))
        assert doc and len(doc) > 100, f"{s}/__init__.py: one paragraph saying what the stage takes and gives"


def test_imports_follow_the_data_flow():
    assert violations() == []


@pytest.mark.parametrize("stage", ["results", "analysis", "report"])
def test_no_stage_after_the_boots_imports_the_run_stage(stage):
    hits = [f"{p.relative_to(PACKAGE)}:{line}: {mod}"
            for p in sorted((PACKAGE / stage).rglob("*.py"))
            for line, mod in imported(p) if target_part(mod) == "run"]
    assert hits == []


def test_the_check_resolves_relative_imports(tmp_path, monkeypatch):
    """Relative imports resolve to the module they name, function-level ones
    too, and an import of the run stage is seen as one."""
    pkg = tmp_path / "qrwbench"
    (pkg / "report").mkdir(parents=True)
    f = pkg / "report" / "x.py"
    f.write_text("from .. import vocab\nfrom ..analysis import stats\n"
                 "def g():\n    from ..run import bench\n    from qrwbench.run.qemu import command\n")
    monkeypatch.setitem(globals(), "PACKAGE", pkg)
    got = sorted(imported(f))
    assert got == [(1, "qrwbench.vocab"), (2, "qrwbench.analysis.stats"),
                   (4, "qrwbench.run.bench"), (5, "qrwbench.run.qemu.command")]
    assert [target_part(m) for _, m in got] == [None, "analysis", "run", "run"]
    assert target_part("qrwbench.run") == "run"           # from .. import run


def module_of(dotted: str, modules: set) -> str | None:
    """The package module a dotted import name lands in (``from . import a``
    names module a; ``from .a import f`` names a's f: module a)."""
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def import_cycles() -> list[list[str]]:
    """Groups of modules that import each other, directly or round about
    (strongly connected components of the import graph, function-level
    imports too; a package's __init__ does not count as its modules')."""
    files = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = p.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(("qrwbench",) + (parts[:-1] if parts[-1] == "__init__" else parts))
        files[name] = p
    mods = set(files)
    graph = {m: sorted({module_of(d, mods) for _, d in imported(p)} - {m, "qrwbench", None})
             for m, p in files.items()}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):                       # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_one_that_imports_it_back():
    """make bench's loop, its executors and one boot are separate modules
    (run/bench.py, executor.py, bench_remote.py, boot.py) that import one
    way: none needs a function-level import to break a cycle."""
    assert import_cycles() == []

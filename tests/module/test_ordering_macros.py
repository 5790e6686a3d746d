"""The module's qrwlock copies (bench/module/qrwb_lock_ord.h) expand the
ordering macros exactly as the kernel patch does (include/asm-generic/
qrwlock.h in kernel/patches/0002): the two blocks are written twice (the
module must build against any kernel), so this test keeps them one."""
import re

from conftest import TOP

PATCH = next((TOP / "kernel" / "patches").glob("*-locking-qrwlock-make-the-memory-ordering-*.patch"))
MODULE = TOP / "bench" / "module" / "qrwb_lock_ord.h"


def macros(lines, prefix, var) -> dict[str, str]:
    """{macro name without prefix: body with whitespace and comments squeezed}."""
    text = "\n".join(lines)
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S).replace("\\\n", " ")
    out = {}
    for m in re.finditer(rf"^#define {prefix}(\w+)(\([^)]*\))?(.*)$", text, re.M):
        body = " ".join(m.group(3).replace(var, "VAL").split())
        out[m.group(1) + (m.group(2) or "")] = body
    return out


def blocks(text, cond_re, prefix, var):
    """{ordering: macros} of the #if/#elif/#else chain selected by cond_re."""
    out, cur, lines = {}, None, []
    for line in text.splitlines():
        m = re.match(cond_re, line)
        if m or (cur and line.startswith(("#else", "#endif"))):
            if cur:
                out[cur] = macros(lines, prefix, var)
            lines = []
            cur = m.group(1).lower() if m else (
                "acqrel" if line.startswith("#else") and "ACQREL" in line else None)
            continue
        if cur:
            lines.append(line)
    return out


def patch_blocks():
    added = "\n".join(l[1:] for l in PATCH.read_text().splitlines() if l.startswith("+") and not l.startswith("+++"))
    return blocks(added, r"^#(?:el)?if defined\(CONFIG_QRWLOCK_ORDERING_(\w+)\)", "qrwlock_", "__qrw_val")


def module_blocks():
    return blocks(MODULE.read_text(), r"^#(?:el)?if QRWB_ORD_(\w+) == QRWB_LK_ORD", "qrwb_", "__qrwb_val")


def test_the_parser_finds_all_three_orderings_and_all_macros():
    for b in (patch_blocks(), module_blocks()):
        assert sorted(b) == ["acqrel", "full", "relaxed"]
        for o, m in b.items():
            assert len(m) == 8, (o, sorted(m))


def test_module_copies_use_the_patchs_ordering_macros():
    assert module_blocks() == patch_blocks()


def test_a_changed_ordering_is_seen():
    changed = PATCH.read_text().replace("atomic_add_return_acquire(i, v)", "atomic_add_return(i, v)", 1)
    added = "\n".join(l[1:] for l in changed.splitlines() if l.startswith("+") and not l.startswith("+++"))
    b = blocks(added, r"^#(?:el)?if defined\(CONFIG_QRWLOCK_ORDERING_(\w+)\)", "qrwlock_", "__qrw_val")
    assert b != module_blocks()

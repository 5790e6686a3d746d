"""No traceback for any CELL string: seeded fuzzing of ``ktree.parse_cell``
(the contract: tests/fuzz.py)."""
from __future__ import annotations

import random

import pytest

from fuzz import call_clean, short
from qrwbench.run import ktree


BASE_CELLS = [
    "x86_64/tcg/max/acqrel/rwlock:impl=kernel,write_pct=0,reps=8,duration_ms=20/1",
    "arm64/tcg/cortex-a57/acqrel/atomics:ops=atomic_add_return,smp_mb/2",
    "x86_64/kvm/host/full/rwlock:write_pct=50,nlocks=4,cs_work=0/8",
    "arm64/tcg/max/relaxed/atomics:placement=percpu,reps=3/64",
    "x86_64/tcg/max/unpatched/rwlock/2",
]
CELL_CHARS = ["\u00b2", "\u0663", "\uff10", "\u00b9", "\u2070", "\x00", "/", ":", ",", "=", " ",
              "\n", "\u00e9", "\udcff", "-", "+", "_", "\t", "0", "9", "\u202e"]
CELL_FIELDS = ["", "\u00b2", "\u0663", "\uff13", "9" * 5000, "0" * 5000, "0", "-1", "+1", " 1",
               "1 ", "1_0", "0x10", "65", "64", str(2 ** 64), "\x00", "x86_64", "max", "acqrel",
               "rwlock:", "atomics:ops=", "rwlock:=", "rwlock::", "\u00e9"]
CELL_PARAMS = ["reps", "write_pct", "reps=", "=8", "reps=\u00b2", "reps=\u0663",
               "reps=" + "9" * 5000, "reps=" + "0" * 4400 + "1", "reps=-1", "reps=+1",
               "seed=1", "workload=rwlock", "threads=99999", "threads=4096", "nreaders=65",
               "nwriters=4096", "ops=all,atomic_bogus_op", "ops=,", "ops=all,,smp_mb",
               "impl=KERNEL", "impl=\u00e9", "placement=percpu,shared", "bogus=1",
               "reps=8,reps=8", "ops=smp_mb,ops=smp_mb", "batch=" + str(2 ** 64),
               "duration_ms=1.5", "write_pct=1e2", "x=\x00", "\u00b2=1", "=", ",,,"]


def _gen_cell(seed: int) -> str:
    rng = random.Random(2000 + seed)
    text = rng.choice(BASE_CELLS)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["char", "char", "insert", "delete", "field", "field", "param",
                           "param", "slashes"])
        if kind in ("char", "insert", "delete") and text:
            pos = rng.randrange(len(text))
            if kind == "char":
                text = text[:pos] + rng.choice(CELL_CHARS) + text[pos + 1:]
            elif kind == "insert":
                text = text[:pos] + rng.choice(CELL_CHARS) + text[pos:]
            else:
                text = text[:pos] + text[pos + 1:]
        elif kind == "field":
            parts = text.split("/")
            i = rng.randrange(len(parts))
            parts[i] = rng.choice(CELL_FIELDS)
            text = "/".join(parts)
        elif kind == "param":
            parts = text.split("/")
            if len(parts) >= 5:
                wl, _, p = parts[4].partition(":")
                plist = [x for x in p.split(",") if x] if p else []
                plist.insert(rng.randrange(len(plist) + 1), rng.choice(CELL_PARAMS))
                parts[4] = wl + ":" + ",".join(plist)
                text = "/".join(parts)
        else:
            text = rng.choice([text + "/", "/" + text, text.replace("/", "//", 1),
                               text.rsplit("/", 1)[0], text.replace("/", ":", 1)])
    return text


@pytest.mark.parametrize("seed", range(150))
def test_parse_cell_fuzz(seed):
    """ktree.parse_cell: a Cell or a one-line QrwbenchError; an accepted CELL
    prints (cell_text) as one that parses to the same cell."""
    text = _gen_cell(seed)
    cell, err = call_clean(ktree.parse_cell, text, text)
    if err is None:
        again, err2 = call_clean(ktree.parse_cell, f"cell_text of {text!r}", ktree.cell_text(cell))
        assert err2 is None and again == cell, (text, ktree.cell_text(cell), err2)


NAMED_CELLS = (
    [BASE_CELLS[0].rsplit("/", 1)[0] + "/" + f for f in CELL_FIELDS]
    + [f"x86_64/tcg/max/acqrel/rwlock:{p}/2" for p in CELL_PARAMS]
    + [f"arm64/tcg/cortex-a57/acqrel/atomics:{p}/1" for p in CELL_PARAMS if "=" in p]
    + ["", "/", "//////", "x86_64/tcg/max/acqrel/rwlock:/2", "\x00" * 6]
)


@pytest.mark.parametrize("text", NAMED_CELLS, ids=[short(t, 50) for t in NAMED_CELLS])
def test_parse_cell_named(text):
    """Each bad VCPUS field and each bad parameter on an otherwise valid CELL."""
    cell, err = call_clean(ktree.parse_cell, text, text)
    if err is None:
        again, err2 = call_clean(ktree.parse_cell, f"cell_text of {text!r}", ktree.cell_text(cell))
        assert err2 is None and again == cell, (text, ktree.cell_text(cell), err2)


def test_base_cells_parse():
    for text in BASE_CELLS:
        assert ktree.parse_cell(text)

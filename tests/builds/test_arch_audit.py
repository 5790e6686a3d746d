"""The per-arch ordering audit (issue 30, qrwbench.build.arch_audit, `make
audit`): what each qrwlock fast path and atomic ordering compiles to on every
qrwlock arch, from objects only. The classifier and the table's logic are
checked on captured objdump lines and made-up builds (make test); the table
itself on real ppc64le and riscv64 objects (make test-slow builds them)."""
import os
import subprocess

import pytest

from conftest import BUILD, TOP, missing
from qrwbench import vocab
from qrwbench.build import arch_audit, disasm

PYENV = {**os.environ, "PYTHONPATH": str(TOP / "analysis")}

# (kernel ARCH, an objdump -d --no-show-raw-insn line as captured from the
# objects of build-kernel.sh --objects, its token)
CAPTURED = [
    ("x86_64", "lock xadd %eax,(%rdi)", "lock xadd"),
    ("x86_64", "mov    $0x200,%eax", None),
    ("x86_64", "lock addl $0x0,-0x4(%rsp)", "lock addl"),
    ("arm64", "ldadda\tw1, w1, [x0]", "ldadda"),
    ("arm64", "casal\tw1, w2, [x0]", "casal"),
    ("arm64", "dmb\tish", "dmb ish"),
    ("arm64", "stlr\tx1, [x0]", "stlr"),
    ("arm64", "add\tw1, w1, #0x200", None),
    ("powerpc", "hwsync", "sync"),
    ("powerpc", "lwsync", "lwsync"),
    ("powerpc", "isync", "isync"),
    ("powerpc", "lwarx   r10,0,r3", "lwarx"),
    ("powerpc", "stwcx.  r10,0,r3", "stwcx."),
    ("powerpc", "ldarx   r3,0,r9", "ldarx"),
    ("powerpc", "stdcx.  r3,0,r9", "stdcx."),
    ("powerpc", "addic   r10,r10,512", None),
    ("powerpc", "bl      38 <qrwb_probe_read_lock+0x30>  [reloc queued_read_lock_slowpath]", None),
    ("riscv", "amoadd.w\ta5,a5,(a0)", "amoadd.w"),
    ("riscv", "amoadd.w.aqrl\ta5,a5,(a0)", "amoadd.w.aqrl"),
    ("riscv", "amoswap.d.aqrl\ta5,a5,(a4)", "amoswap.d.aqrl"),
    ("riscv", "fence\tr,rw", "fence r,rw"),
    ("riscv", "fence\trw,w", "fence rw,w"),
    ("riscv", "lr.w\ta5,(a0)", "lr.w"),
    ("riscv", "sc.w.rl\ta3,a4,(a0)", "sc.w.rl"),
    ("riscv", "sext.w\ta5,a5", None),
    ("riscv", "fence.i", None),
    ("mips", "sync", "sync"),
    ("mips", "ll\tv1,0(a0)", "ll"),
    ("mips", "sc\tv0,0(a0)", "sc"),
    ("mips", "lld\tv1,8(a0)", "lld"),
    ("mips", "scd\tv0,8(a0)", "scd"),
    ("mips", "daddiu\tv0,v1,1", None),
    ("sparc", "membar  #StoreLoad", "membar #StoreLoad"),
    ("sparc", "cas  [ %o1 ], %g1, %g7", "cas"),
    ("sparc", "casx  [ %o1 ], %g1, %g7", "casx"),
    ("sparc", "add  %g1, %o0, %g7", None),
]


@pytest.mark.parametrize("karch,line,token", CAPTURED)
def test_classifier_on_captured_objdump_lines(karch, line, token):
    assert disasm.ordering_token(karch, line) == token
    assert disasm.ordering_insns(karch, [line, "nop"]) == ([token] if token else [])


def test_classifier_refuses_an_arch_it_does_not_know():
    with pytest.raises(ValueError, match="no ordering classifier for ARCH=loongarch"):
        disasm.ordering_token("loongarch", "dbar 0")
    with pytest.raises(ValueError, match="no ordering classifier for ARCH=ppc64le"):
        disasm.ordering_insns("ppc64le", [])        # a rig arch name, not its ISA

def test_every_audit_arch_has_a_classifier_and_the_shell_table_agrees():
    """vocab reads the rows kernel/scripts/arch.sh's table gives the build
    scripts, and each audit arch's ISA has a classifier."""
    for name, a in vocab.build_arches().items():
        r = subprocess.run(["bash", "-c", 'die() { echo "die: $*"; exit 1; }; arch=$1; '
                            '. kernel/scripts/arch.sh; echo "$karch|$cross|$image|$qrw_needs|$arch_pkgs"',
                            "-", name], cwd=TOP, capture_output=True, text=True, check=True)
        assert r.stdout.strip() == "|".join([a.karch, a.cross, a.image, a.qrw_needs,
                                             " ".join(a.packages)])
        disasm.ordering_token(a.karch, "nop")      # no ValueError
    assert {"x86_64", "arm64", "ppc64le", "riscv64"} <= set(vocab.audit_arches())
    # what a matrix may boot (issue 30: ppc64le and riscv64 too)
    assert vocab.kernel_arches() == ["arm64", "ppc64le", "riscv64", "x86_64"]


def _rec(order, h):
    return {"order": order, "hash": h}


def _build(arch, variant, view, paths, ops=None):
    return {"arch": arch, "variant": variant, "dir": f"/x/{arch}-{variant}",
            "atomics_fully_ordered": variant == "allfull",
            "views": {view: {"paths": paths, "ops": ops or {}, "kernel": {}}}}


def test_identical_variants_and_orderings_are_flagged():
    """x86_64-like: acqrel and relaxed the same code throughout, full only
    differing in write_unlock; orderings of one op all one instruction."""
    same = {p: _rec(["lock xadd"], p) for p in arch_audit.LOCK_PATHS + arch_audit.TRY_PATHS}
    full = dict(same, write_unlock=_rec(["lock xadd"], "other"))
    ops = {"atomic_add_return": {o: _rec(["lock xadd"], "h") for o in
                                 ("full", "acquire", "release", "relaxed")}}
    builds = [_build("x86_64", "acqrel", "x86_64", same, ops),
              _build("x86_64", "relaxed", "x86_64", dict(same)),
              _build("x86_64", "full", "x86_64", full)]
    groups = arch_audit.identical_variants(builds)
    assert {"view": "x86_64", "path": "all", "variants": ["acqrel", "relaxed"]} in groups
    assert {"view": "x86_64", "path": "read_lock", "variants": ["full", "acqrel", "relaxed"]} in groups
    assert not [g for g in groups if g["path"] == "write_unlock"]
    table = arch_audit.format_lock_table(builds)
    assert table[0].split() == ["arch", "variant", *arch_audit.LOCK_PATHS, "same", "code", "as"]
    rows = {tuple(line.split()[:2]): line for line in table[2:]}
    assert rows[("x86_64", "acqrel")].endswith("relaxed")
    assert rows[("x86_64", "full")].endswith("-")
    assert [line.split()[0] for line in table[2:]] == ["x86_64"] * 3
    assert [line.split()[1] for line in table[2:]] == ["full", "acqrel", "relaxed"]  # most ordered first
    assert arch_audit.identical_orderings(builds) == [
        {"view": "x86_64", "op": "atomic_add_return",
         "orderings": ["full", "acquire", "release", "relaxed"]}]
    assert arch_audit.format_op_table(builds, "atomic_add_return")[2].endswith(
        "full = acquire = release = relaxed")


def test_a_probe_that_is_not_the_kernels_code_is_reported():
    b = _build("riscv64", "acqrel", "riscv64",
               {"read_lock": _rec(["amoadd.w", "fence r,rw"], "a")})
    b["views"]["riscv64"]["kernel"] = {"_raw_read_lock": _rec(["amoadd.w.aqrl"], "b")}
    assert arch_audit.kernel_mismatches([b]) == [
        "riscv64 acqrel: _raw_read_lock has amoadd.w.aqrl, the probe's read_lock amoadd.w fence r,rw"]


def _make_n(target):
    r = subprocess.run(["make", "-s", "-n", target], cwd=TOP, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_default_builds_keep_to_x86_64_and_arm64():
    """Adding ppc64le and riscv64 fragments grows neither make kernels nor
    make test's kernels; make audit-arches builds objects of every audit arch."""
    for target in ("kernels", "test-kernels"):
        out = _make_n(target)
        assert "build-kernels.sh" in out
        assert "ppc64le" not in out and "riscv64" not in out, (target, out)
    out = _make_n("audit-arches")
    line = next(x for x in out.splitlines() if "build-kernels.sh --objects" in x)
    built = set(line.split("--objects", 1)[1].split())
    for arch in vocab.audit_arches():
        assert f"{arch}-acqrel" in built and f"{arch}-full" in built
    assert "archaudit" in out


# ---------------------------------------------------------------- real objects

def objects(arch, variant):
    d = BUILD / "objects" / f"{arch}-{variant}"
    if not (d / ".qrwbench-objects").exists():
        missing(f"{d} is not built", by="make test-slow")
    return d


@pytest.fixture(scope="module")
def real():
    return {(a, v): arch_audit.audit_build(objects(a, v))
            for a in ("ppc64le", "riscv64") for v in ("acqrel", "full")}


def paths(build, view):
    return {p: r["order"] for p, r in build["views"][view]["paths"].items()}


def ops(build, view, op):
    return {o: r["order"] for o, r in build["views"][view]["ops"][op].items()}


@pytest.mark.slow
def test_ppc64le_lock_paths_and_orderings(real):
    """lwarx/stwcx. with isync (acquire, patched to lwsync at boot) and
    lwsync (release); fully ordered: sync ... sync."""
    acq, full = real[("ppc64le", "acqrel")], real[("ppc64le", "full")]
    assert {p: o for p, o in paths(acq, "ppc64le").items() if p in arch_audit.LOCK_PATHS} == {
        "read_lock": ["lwarx", "stwcx.", "isync*"], "read_unlock": ["lwsync", "lwarx", "stwcx."],
        "write_lock": ["lwarx", "stwcx.", "isync*"], "write_unlock": ["lwsync"]}
    fo = ["sync", "lwarx", "stwcx.", "sync"]
    assert {p: o for p, o in paths(full, "ppc64le").items() if p in arch_audit.LOCK_PATHS} == {
        p: fo for p in arch_audit.LOCK_PATHS}
    assert ops(acq, "ppc64le", "atomic_add_return") == {
        "full": fo, "acquire": ["lwarx", "stwcx.", "isync*"],
        "release": ["lwsync", "lwarx", "stwcx."], "relaxed": ["lwarx", "stwcx."]}
    assert ops(acq, "ppc64le", "atomic64_add_return")["full"] == ["sync", "ldarx", "stdcx.", "sync"]
    assert ops(acq, "ppc64le", "smp_mb") == {"full": ["sync"]}


@pytest.mark.slow
def test_riscv64_lock_paths_and_orderings(real):
    """amoadd.w.aqrl for fully ordered; fence r,rw / fence rw,w around the
    relaxed AMO (or lr/sc) for acquire / release."""
    acq, full = real[("riscv64", "acqrel")], real[("riscv64", "full")]
    assert {p: o for p, o in paths(acq, "riscv64").items() if p in arch_audit.LOCK_PATHS} == {
        "read_lock": ["amoadd.w", "fence r,rw"], "read_unlock": ["fence rw,w", "amoadd.w"],
        "write_lock": ["lr.w", "sc.w", "fence r,rw"], "write_unlock": ["fence rw,w"]}
    f = paths(full, "riscv64")
    assert f["read_lock"] == f["read_unlock"] == f["write_unlock"] == ["amoadd.w.aqrl"]
    assert f["write_lock"] == ["lr.w", "sc.w.rl", "fence rw,rw"]
    assert ops(acq, "riscv64", "atomic_add_return") == {
        "full": ["amoadd.w.aqrl"], "acquire": ["amoadd.w", "fence r,rw"],
        "release": ["fence rw,w", "amoadd.w"], "relaxed": ["amoadd.w"]}
    assert ops(acq, "riscv64", "smp_mb") == {"full": ["fence rw,rw"]}


@pytest.mark.slow
def test_real_tables_flag_nothing_identical_and_match_the_kernel(real):
    builds = list(real.values())
    assert arch_audit.kernel_mismatches(builds) == []
    # every ordering of every RMW op is its own code on both arches
    assert arch_audit.identical_orderings(builds) == []
    assert [g for g in arch_audit.identical_variants(builds) if g["path"] == "all"] == []
    assert arch_audit.NOTE_PPC in arch_audit.notes(builds)


@pytest.mark.slow
def test_archaudit_prints_the_table_and_writes_its_files(tmp_path):
    dirs = [str(objects(a, v)) for a in ("ppc64le", "riscv64") for v in ("acqrel", "full")]
    r = subprocess.run(["/usr/bin/python3", "-m", "qrwbench", "archaudit", "--out",
                        str(tmp_path / "out"), *dirs], cwd=TOP, env=PYENV,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("ordering instructions per lock/unlock, by arch and variant")
    assert lines[1] == arch_audit.HARDWARE_TRUE
    assert any(line.split()[:2] == ["ppc64le", "full"] for line in lines)
    assert any(line.split()[:2] == ["riscv64", "acqrel"] for line in lines)
    assert (tmp_path / "out" / "archaudit.json").exists()
    assert "queued_write_lock_slowpath" in (tmp_path / "out" / "archaudit.txt").read_text()


def test_archaudit_refuses_a_directory_that_is_no_object_build(tmp_path):
    r = subprocess.run(["/usr/bin/python3", "-m", "qrwbench", "archaudit", "--out",
                        str(tmp_path / "out"), str(tmp_path)], cwd=TOP, env=PYENV,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "is not an object build directory" in r.stderr


def test_archaudit_refuses_an_object_build_without_its_objects_list(tmp_path):
    """A build from before .qrwbench-objects-list is named, not audited with
    a guessed list of objects."""
    d = tmp_path / "x86_64-acqrel"
    d.mkdir()
    (d / ".qrwbench-objects").touch()
    r = subprocess.run(["/usr/bin/python3", "-m", "qrwbench", "archaudit", "--out",
                        str(tmp_path / "out"), str(d)], cwd=TOP, env=PYENV,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{d} has no {arch_audit.OBJECTS_LIST}" in r.stderr
    assert not (tmp_path / "out").exists()

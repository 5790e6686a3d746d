"""The patch series: applies to a fresh extraction, passes checkpatch, and the
tree script reports a broken patch by name and hunk."""
import email
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from conftest import TOP, kernel_tree, missing

TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
PATCHES = TOP / "kernel" / "patches"


def series() -> list[str]:
    return [l.strip() for l in (PATCHES / "series").read_text().splitlines()
            if l.strip() and not l.startswith("#")]


def touched_files() -> set[str]:
    files = set()
    for p in series():
        files |= set(re.findall(r"^diff --git a/(\S+) ", (PATCHES / p).read_text(), re.M))
    return files


@pytest.fixture(scope="module")
def fresh_tree(tmp_path_factory):
    """The files the series touches (and the top Makefile), freshly extracted
    from Debian's tarball, plus a tarball of just those files."""
    if not TARBALL.exists():
        missing(f"{TARBALL} missing: apt-get install linux-source-6.12 (make deps)")
    d = tmp_path_factory.mktemp("fresh")
    want = touched_files() | {"Makefile"}
    with tarfile.open(TARBALL) as tf:
        members = [m for m in tf if m.name.split("/", 1)[-1] in want]
        tf.extractall(d, members=members)
    root = next(d.iterdir())
    small = d / "small.tar.xz"
    subprocess.run(["tar", "-cJf", small, "-C", d, root.name], check=True)
    return root, small


def test_series_lists_every_patch_file():
    on_disk = sorted(p.name for p in PATCHES.glob("*.patch"))
    assert series() == on_disk and series(), "series and kernel/patches/*.patch disagree"


@pytest.mark.kernel
def test_series_applies_in_order_to_fresh_extraction(fresh_tree):
    root, _ = fresh_tree
    for p in series():
        r = subprocess.run(["git", "apply", "--verbose", str(PATCHES / p)], cwd=root,
                           capture_output=True, text=True)
        assert r.returncode == 0, f"{p} does not apply: {r.stderr}"
    header = (root / "include/asm-generic/qrwlock.h").read_text()
    assert "CONFIG_QRWLOCK_ORDERING_FULL" in header


@pytest.mark.kernel
@pytest.mark.parametrize("patch", series())
def test_checkpatch_strict_is_clean(patch):
    checkpatch = kernel_tree() / "scripts" / "checkpatch.pl"
    # The tree is Debian's tarball in one commit: no upstream history, so the
    # id of a Fixes: tag cannot be looked up here (checkpatch warns for every
    # id it cannot find); its form is checked by test_fixes_tags_are_well_formed.
    r = subprocess.run(["perl", str(checkpatch), "--strict", "--ignore", "UNKNOWN_COMMIT_ID",
                        str(PATCHES / patch)], cwd=checkpatch.parents[1], capture_output=True, text=True)
    assert "total: 0 errors, 0 warnings, 0 checks" in r.stdout, r.stdout
    assert r.returncode == 0


def test_fixes_tags_are_well_formed():
    """Fixes: <12+ hex digits> ("<subject>"), as submitting-patches.rst asks;
    the LSE sub_return fix carries one."""
    tags = []
    for p in series():
        head = (PATCHES / p).read_text().split("\n---\n", 1)[0]
        for line in re.findall(r"^Fixes:.*$", head, re.M):
            assert re.fullmatch(r'Fixes: [0-9a-f]{12,40} \("[^"]+"\)', line), f"{p}: {line}"
            tags.append(line)
    assert any("define RETURN ops in terms of FETCH ops" in t for t in tags), tags


def test_every_patch_is_signed_off_with_a_message():
    for p in series():
        text = (PATCHES / p).read_text()
        head = text.split("\n---\n", 1)[0]
        assert re.search(r"^Signed-off-by: .+ <.+>$", head, re.M), p
        body = head.split("\n\n", 1)[1]
        assert len(body.split()) > 30, f"{p}: commit message too short"


def run_prepare(tarball: Path, src: Path, patches: Path):
    return subprocess.run([str(TOP / "kernel/scripts/prepare-tree.sh")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "QRWB_TARBALL": str(tarball),
                               "QRWB_SRC": str(src), "QRWB_PATCHES": str(patches), "HOME": str(src.parent)})


@pytest.mark.kernel
def test_prepare_tree_applies_series_as_commits(fresh_tree, tmp_path):
    _, small = fresh_tree
    src = tmp_path / "linux"
    r = run_prepare(small, src, PATCHES)
    assert r.returncode == 0, r.stderr
    log = subprocess.run(["git", "-C", src, "log", "--format=%s"], capture_output=True, text=True).stdout
    subjects = log.splitlines()
    assert len(subjects) == len(series()) + 1
    want = [re.sub(r"^\[PATCH[^\]]*\]\s*", "", " ".join(
        email.message_from_string((PATCHES / p).read_text())["Subject"].split())) for p in series()]
    assert subjects[:-1] == want[::-1]     # newest first, as git log lists them
    assert "locking/qrwlock: make the memory ordering of queued rwlocks selectable" in subjects
    assert "arm64: atomics: lse: honour the ordering of sub_return" in subjects
    # Re-running with nothing changed does nothing.
    head = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    r2 = run_prepare(small, src, PATCHES)
    assert r2.returncode == 0 and "applying" not in r2.stdout
    assert subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout == head


@pytest.mark.kernel
def test_prepare_tree_names_the_patch_and_hunk_that_fail(fresh_tree, tmp_path):
    _, small = fresh_tree
    bad = tmp_path / "patches"
    bad.mkdir()
    name = next(p for p in series() if "qrwlock-make-the-memory-ordering" in p)
    text = (PATCHES / name).read_text()
    # Corrupt a context line of the qrwlock.c hunk so that it cannot apply.
    broken = text.replace(" \tatomic_or(_QW_WAITING", " \tatomic_or(_QW_WAITING_BROKEN", 1) \
        if " \tatomic_or(_QW_WAITING" in text else text.replace("-\tatomic_or(_QW_WAITING", "-\tatomic_or(_QW_BROKEN", 1)
    assert broken != text
    (bad / name).write_text(broken)
    (bad / "series").write_text(name + "\n")
    r = run_prepare(small, tmp_path / "linux", bad)
    assert r.returncode != 0
    assert f"patch {name} does not apply" in r.stderr
    assert "failing hunk: @@" in r.stderr
    assert not (tmp_path / "linux" / ".git" / "qrwbench-series").exists()


def test_prepare_tree_missing_tarball_names_package(tmp_path):
    r = run_prepare(tmp_path / "nope.tar.xz", tmp_path / "linux", PATCHES)
    assert r.returncode != 0
    assert "apt-get install linux-source-6.12" in r.stderr

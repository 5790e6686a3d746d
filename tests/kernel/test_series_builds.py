"""Every patch of kernel/patches/series builds, on both arches: the commits
of build/src/linux (`make tree` applies the series with `git am`) are checked
out one by one in a scratch worktree and the objects the series touches are
built in one O= directory per arch (kbuild rebuilds only what each step
changed). lib/atomic64_test.o compiles every ordering of every atomic op, so
it is where the LSE fix and the all-fully-ordered option would break;
kernel/locking/{qrwlock,spinlock}.o hold the qrwlock. The last step is built
twice: as configured for `acqrel`, and with CONFIG_ATOMICS_FULLY_ORDERED=y."""
import subprocess

import pytest

from conftest import SRC, kernel_dir, kernel_tree

pytestmark = pytest.mark.kernel      # needs built kernels/modules or the tree

OBJECTS = ["lib/atomic64_test.o", "kernel/locking/qrwlock.o", "kernel/locking/spinlock.o"]
CROSS = {"x86_64": ("x86_64", ""), "arm64": ("arm64", "aarch64-linux-gnu-")}


def git(*args, cwd=SRC):
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """[(sha, subject)] of the series, oldest first, and a scratch worktree."""
    kernel_tree()
    commits = git("log", "--reverse", "--format=%H %s", "qrwbench-base..HEAD").splitlines()
    wt = tmp_path_factory.mktemp("series") / "linux"
    git("worktree", "add", "-q", "--detach", str(wt), "qrwbench-base")
    try:
        yield [tuple(c.split(" ", 1)) for c in commits], wt
    finally:
        subprocess.run(["git", "-C", str(SRC), "worktree", "remove", "--force", str(wt)],
                       capture_output=True)


def kmake(wt, out, arch, *targets):
    karch, cross = CROSS[arch]
    r = subprocess.run(["make", "-s", "-C", str(wt), f"O={out}", f"ARCH={karch}",
                        f"CROSS_COMPILE={cross}", "CC=ccache " + cross + "gcc", "HOSTCC=ccache gcc",
                        "-j3", *targets], capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr)[-3000:]


@pytest.mark.parametrize("arch", ["x86_64", "arm64"])
def test_every_patch_builds(steps, arch, tmp_path):
    commits, wt = steps
    assert len(commits) >= 3, commits
    out = tmp_path / f"obj-{arch}"
    out.mkdir()
    config = (kernel_dir(arch, "acqrel") / ".config").read_text()
    built = []
    for sha, subject in commits:
        git("checkout", "-q", "--detach", sha, cwd=wt)
        (out / ".config").write_text(config)
        rc, log = kmake(wt, out, arch, "olddefconfig")
        assert rc == 0, f"{arch}: olddefconfig failed at {sha[:12]} {subject}:\n{log}"
        rc, log = kmake(wt, out, arch, *OBJECTS)
        assert rc == 0, f"{arch}: build failed at {sha[:12]} {subject}:\n{log}"
        built.append(subject)
    # the last step again with every atomic fully ordered (variant allfull)
    cfg = subprocess.run([str(wt / "scripts" / "config"), "--file", str(out / ".config"),
                          "--enable", "EXPERT", "--enable", "ATOMICS_FULLY_ORDERED"],
                         capture_output=True, text=True)
    assert cfg.returncode == 0, cfg.stderr
    rc, log = kmake(wt, out, arch, "olddefconfig")
    assert rc == 0, log
    assert "CONFIG_ATOMICS_FULLY_ORDERED=y" in (out / ".config").read_text().splitlines()
    rc, log = kmake(wt, out, arch, *OBJECTS)
    assert rc == 0, f"{arch}: build with CONFIG_ATOMICS_FULLY_ORDERED=y failed:\n{log}"
    assert len(built) == len(commits)

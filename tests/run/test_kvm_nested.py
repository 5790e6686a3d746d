"""make kvm-nested, the parts that need no boot (issue 25): the command line
the rig hands to L1 is the one make bench ACCEL=kvm builds, the job script
carries it to L1's shell intact, L1's console is read into the statuses the
store judges, the probe judges L1's facts, and the report keeps nested runs
apart. The boots themselves: tests/run/test_kvm.py (make test-slow)."""
import json
import subprocess

import pytest

import synth
from conftest import TOP, first_error, kernel_dir, make
from qrwbench.errors import QrwbenchError
from qrwbench.report import nested as report_nested
from qrwbench.report import analyse, report, selection
from qrwbench.results import store
from qrwbench.run import boot, kvm, nested


def test_l2_command_is_the_one_make_bench_accel_kvm_builds(monkeypatch):
    cell = nested.parse_cells("arm64", ["arm64/kvm/host/full/rwlock:write_pct=50,reps=2/2"])[0]
    calls = []
    real = boot.qemu_cmd
    monkeypatch.setattr(boot, "qemu_cmd", lambda *a, **k: calls.append((a, k)) or real(*a, **k))
    cmd = nested.l2_command(cell, 7)
    assert calls and calls[0][0][0] == cell, "the L2 command must come from boot.qemu_cmd"
    assert cmd == real(cell, 7, nested.L2_MEM_MB, "/l2/arm64-full.img", "/l2/arm64-full.cpio",
                       binary="/usr/bin/qemu-system-aarch64")
    assert cmd[cmd.index("-accel") + 1] == "kvm" and cmd[cmd.index("-cpu") + 1] == "host"
    assert cmd[cmd.index("-M") + 1] == "virt,gic-version=max"
    assert "qrwbench.write_pct=50" in cmd[cmd.index("-append") + 1]


def test_job_script_hands_l1_each_command_word_for_word(tmp_path):
    cmds = [["/usr/bin/q", "-append", "a b 'c' $HOME \"d\""], ["/usr/bin/q", "-x", "e;f", ""]]
    script = nested.job_script([("probe", 60, cmds[0]), ("run0", 90, cmds[1])], "/usr/bin/q")
    # L1's init.sh defines l2(); here one that prints its words as JSON
    (tmp_path / "job.sh").write_text(script)
    out = subprocess.run(
        ["sh", "-c", 'l2() { rc=0; /usr/bin/python3 -c "import json,sys; print(json.dumps(sys.argv[1:]))" '
         '"$@"; }; . ./job.sh'], cwd=tmp_path, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin"})
    got = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("[")]
    assert got == [["probe", "60", *cmds[0]], ["run0", "90", *cmds[1]]], out.stderr


def test_a_failed_probe_qemu_stops_the_job(tmp_path):
    script = nested.job_script([("probe", 60, ["p"]), ("run0", 60, ["r"])], "/usr/bin/q")
    (tmp_path / "job.sh").write_text(script)
    out = subprocess.run(["sh", "-c", 'l2() { echo "ran $1"; rc=1; }; . ./job.sh'],
                         cwd=tmp_path, capture_output=True, text=True)
    assert "ran probe" in out.stdout and "ran run0" not in out.stdout


def test_l0_command_boots_an_el2_guest_with_a_port_per_l2_console(tmp_path):
    cells = nested.parse_cells("arm64", [])
    ports = {"probe": tmp_path / "p,1" / "console.log", "run0": tmp_path / "r" / "console.log"}
    cmd = nested.l0_command("arm64", cells, tmp_path / "Image", tmp_path / "i.cpio", ports)
    assert cmd[cmd.index("-M") + 1] == "virt,virtualization=on,gic-version=3"
    assert cmd[cmd.index("-accel") + 1].startswith("tcg")
    assert "rdinit=/init" in cmd[cmd.index("-append") + 1]
    assert f"file,id=p0,path={tmp_path}/p,,1/console.log" in cmd, "commas in a path are escaped"
    assert "virtserialport,chardev=p1,name=qrwb.run0" in cmd
    assert int(cmd[cmd.index("-smp") + 1]) >= max(c.vcpus for c in cells)


L1_CONSOLE = """\
[    0.0] Booting Linux on physical CPU 0x0000000000 [0x000f0510]
@@L1 {"type":"facts","machine":"aarch64","release":"6.12.57-qrwbench", "dev_kvm":1,"dev_kvm_rw":1, "kvm_pvm":0,"cpus":2}
@@L1-KVM [    1.2] kvm [1]: VHE mode initialized successfully
@@L1-QEMU QEMU emulator version 7.2.18 (Debian 1:7.2+dfsg-7+deb12u18)
@@L1 {"type":"l2-start","name":"probe","uptime":1.50}
@@L1 {"type":"l2-exit","name":"probe","rc":0,"uptime":4.25}
@@L1 {"type":"l2-start","name":"run0"}
@@L1 {"type":"l2-exit","name":"run0","rc":1}
@@L1 {"type":"l2-start","name":"run1"}
@@L1 {"type":"l2-exit","name":"run1","rc":137}
@@L1 {"type":"l1-done"}
"""


def test_l1_console_becomes_facts_and_statuses():
    l1 = nested.parse_l1_console(L1_CONSOLE)
    assert l1["done"] and l1["release"] == "6.12.57-qrwbench" and "7.2.18" in l1["qemu"]
    assert l1["kvm_lines"] == ["[    1.2] kvm [1]: VHE mode initialized successfully"]
    assert kvm.static_check("arm64", l1["facts"]) == (True, "/dev/kvm usable")
    assert nested.l2_status("probe", l1, {}, 60)["status"] == "ok"
    assert nested.l2_status("probe", l1, {}, 60)["wall_s"] == 2.75
    assert nested.l2_status("run0", l1, {}, 60)["reason"] == "QEMU exited with status 1"
    st = nested.l2_status("run1", l1, {}, 60)
    assert st["timed_out"] and "within 60 s" in st["reason"]
    gone = nested.l2_status("run2", l1, {}, 60)
    assert gone["status"] == "failed" and "not started" in gone["reason"]
    cut = nested.l2_status("run0", nested.parse_l1_console(L1_CONSOLE.split("@@L1 {\"type\":\"l2-start\",\"name\":\"run0")[0]),
                           {"reason": "guest did not finish within 900 s; QEMU killed"}, 60)
    assert "L1 did not finish (guest did not finish within 900 s" in cut["reason"]


@pytest.mark.parametrize("facts, why", [
    ({"machine": "aarch64", "dev_kvm": False, "dev_kvm_rw": False, "kvm_pvm": False},
     "/dev/kvm does not exist"),
    ({"machine": "x86_64", "dev_kvm": True, "dev_kvm_rw": True, "kvm_pvm": False},
     "host is x86_64"),
])
def test_the_probe_judges_l1_as_it_judges_a_host(facts, why):
    ok, reason = kvm.static_check("arm64", facts)
    assert not ok and why in reason
    v = kvm.verdict((ok, reason), False, "QEMU exited with status 1")
    assert not v["usable"] and why in v["reason"] and "probe boot: QEMU exited" in v["reason"]
    assert kvm.verdict((True, "/dev/kvm usable"), True, "")["usable"]


@pytest.mark.parametrize("cell, msg", [
    ("arm64/tcg/max/acqrel/atomics/2", "must be an arm64/kvm/host/... cell"),
    ("x86_64/kvm/host/acqrel/atomics/2", "must be an arm64/kvm/host/... cell"),
    ("arm64/kvm/host/nosuch/atomics/2", "nosuch"),
])
def test_bad_cells_are_refused_before_anything_runs(cell, msg):
    with pytest.raises(QrwbenchError, match=msg.replace(".", r"\.")):
        nested.parse_cells("arm64", [cell])


def test_bad_arch_and_cell_are_one_line_and_build_nothing():
    rc, out, err = make("kvm-nested", "ARCH=ppc64le")
    assert rc == 2 and out == ""
    assert first_error(err, "qrwbench") == ("qrwbench: error: kvm-nested: unknown ARCH "
                                            "'ppc64le': valid are arm64, x86_64")
    rc, out, err = make("kvm-nested", "CELL=arm64/kvm/host/acqrel/atomics:reps=x/2")
    assert rc == 2 and out == "" and "reps = 'x'" in first_error(err, "qrwbench")


def test_nested_runs_are_not_compared_and_are_listed_apart(tmp_path):
    runs = tmp_path / "runs"
    db = tmp_path / "r.sqlite"
    for i in range(3):
        synth.atomics_run(runs, f"a{i}", started_at=f"2026-12-01T00:00:0{i}Z")
    # the latest run, of another rig commit: nested
    synth.atomics_run(runs, "n0", accel="kvm", cpu_model="host", host=store.NESTED_HOST,
                      rig_commit="f" * 40, started_at="2026-12-02T00:00:00Z",
                      nested={"l1_cpu_model": "max,pauth-impdef=on", "l1_kernel_release": "6.12.57",
                              "l0_qemu": "QEMU 7.2", "l1_qemu": "QEMU 7.2 arm64"})
    conn = store.connect(db)
    for d in sorted(runs.iterdir()):
        assert store.import_run(conn, d).status == "ok"
    sel = selection.select(conn)
    assert sel.rig_commit == "a" * 40, "the latest commit is the latest one with compared runs"
    assert {s["run_id"] for s in sel.samples} == {"a0", "a1", "a2"}
    a = analyse.analyse(conn, n_resamples=200)
    assert a.cset.comparisons and all(c.cell.host != store.NESTED_HOST for c in a.cset.comparisons)
    assert [r[0] for r in a.nested.rows] == ["n0"]
    assert "max,pauth-impdef=on" in a.nested.rows[0][5]
    out = report.build(db, tmp_path / "report", n_resamples=200)
    html = open(out["html"]).read()
    assert report_nested.TITLE in html and "n0" in html
    conn.close()


def test_only_nested_runs_is_a_one_line_error(tmp_path):
    runs = tmp_path / "runs"
    synth.atomics_run(runs, "n0", accel="kvm", cpu_model="host", host=store.NESTED_HOST)
    conn = store.connect(tmp_path / "r.sqlite")
    store.import_run(conn, runs / "n0")
    with pytest.raises(QrwbenchError, match="1 of make kvm-nested, which are not compared"):
        selection.select(conn)
    conn.close()


def test_remote_hosts_cannot_take_the_nested_name():
    from qrwbench.run import remote
    with pytest.raises(QrwbenchError, match="host name of make kvm-nested"):
        remote.parse_hosts("a,nested")


def _needed(path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
    return [l.split("[", 1)[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l]


def _words(script: str) -> set[str]:
    """The first word of each simple command in a shell script (enough for init.sh)."""
    words = set()
    for line in script.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in line.replace("$(", ";").replace("|", ";").replace("&&", ";").split(";"):
            w = part.strip().split()
            if w and w[0].isidentifier() and not w[0].isupper() and "=" not in w[0]:
                words.add(w[0])
    return words


SH_BUILTINS = {"if", "then", "else", "fi", "for", "do", "done", "while", "export", "echo",
               "return", "shift", "b", "l2", "name", "port", "rc", "in", "read"}


@pytest.mark.guest
def test_the_l1_root_holds_qemu_everything_it_loads_and_inits_commands(tmp_path):
    """guest/nested/mkroot.sh arm64 for real (Debian's arm64 packages), then
    the archive is checked on its own: every DT_NEEDED of every ELF in it is
    in it, the loader is where QEMU asks, each command init.sh runs is there."""
    gen = kernel_dir("arm64", "acqrel") / "usr" / "gen_init_cpio"
    r = subprocess.run([str(TOP / "guest/nested/mkroot.sh"), "arm64", str(gen)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    root = TOP / "build/nested/arm64/root.cpio"
    x = tmp_path / "x"
    x.mkdir()
    subprocess.run(["cpio", "-idm", "--quiet", "-F", str(root)], cwd=x, check=True)
    qemu = x / "usr/bin/qemu-system-aarch64"
    assert (x / "init").read_text() == (TOP / "guest/nested/init.sh").read_text()
    interp = subprocess.run(["readelf", "-l", str(qemu)], capture_output=True,
                            text=True).stdout.split("interpreter: ")[1].split("]")[0]
    assert (x / interp.lstrip("/")).is_file(), interp
    libdir = x / "lib/aarch64-linux-gnu"
    elves = [qemu] + sorted(libdir.iterdir())
    missing = {(e.name, n) for e in elves for n in _needed(e) if not (libdir / n).is_file()}
    assert not missing and len(elves) > 20, missing
    have = {p.name for p in (x / "bin").iterdir()}
    need = _words((TOP / "guest/nested/init.sh").read_text()) - SH_BUILTINS
    assert need and need <= have, need - have

"""`make bisect GOOD=<commit> BAD=<commit> CELL=... [KERNEL_SRC=/path/to/linux]`:
find the kernel commit that made a cell slower, with `git bisect run` and the
rig's comparison as the oracle.

    python3 -m qrwbench bisect run  --good G --bad B --cell CELL [--kernel-src DIR]
                                    [--boots 3] [--threshold 5] [--alpha 0.05] [--db DB]
    python3 -m qrwbench bisect step STATE_FILE    (the oracle; bench/bisect-step.sh)

The commits are fetched into a private checkout build/bisect/<arch>-<variant>/linux
(the user's tree is only read) and every step builds in the same O= directory
build/bisect/<arch>-<variant>/obj, so kbuild (and ccache) rebuild only what the
commit changed. GOOD is measured first; BAD is measured and must be judged bad
(else there is nothing to bisect). Each step (exit status for git bisect run):

* build the kernel, module and initramfs at the commit (a failed build: 125, skip);
* a commit whose vmlinux and qrwbench.ko have the same machine code as a
  commit this bisect measured (``objdiff``: every executable section) gets
  that commit's verdict without a boot: a comment, a documentation line or a
  change under an unset option cannot change what the cell measures;
* boot ``--boots`` guests (results stored with the commit as kernel_tree_commit;
  runs of the same rig commit already in the store are reused);
* GOOD's per-boot values are checked with LKP's stability rule (>= 3 boots,
  min-max gap <= 20 %, relative stddev <= 20 %, after Tukey's fences:
  ``noise.stable_samples``); when they fail it, one more batch of GOOD is
  booted, and a GOOD that still fails is flagged in the log and the report,
  not refused (:func:`good_runs`);
* compare with GOOD's boots (``regress.compare_commits``: one value per boot,
  normalized by the module's acqrel copy in the same boot, Welch's t with its
  CI, Holm-adjusted): a regression of any metric beyond the threshold: 1
  (bad); every CI inside +-threshold (or an improvement): 0 (good); a CI
  that holds both no change and a threshold-sized one is not judged, and
  ``--boots`` more boots of the commit (and of GOOD while it has fewer) are
  measured, up to ``MORE_ROUNDS`` times (still not judged: 125, skip). A
  broken rig (no DB, ...): 128 (abort).

Bad input (unknown commit, dirty tree, CELL matching nothing, GOOD not an
ancestor of BAD) is one line ``qrwbench: error: ...`` and exit status 2.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path


from .. import gitutil, vocab
from ..errors import QrwbenchError
from ..vocab import TOP
from ..results import store
from . import ktree

GOOD, BAD, SKIP, ABORT = 0, 1, 125, 128
MORE_ROUNDS = 3     # a step not judged measures BOOTS more boots up to this many times
RUNNER = TOP / "bench" / "bisect-step.sh"


def log(msg: str) -> None:
    print(f"bisect: {msg}", flush=True)


def workdir(cell, root=None) -> ktree.Workdir:
    base = Path(root) if root else vocab.BUILD / "bisect"
    return ktree.Workdir.single(base / f"{cell.arch}-{cell.variant}")


# ------------------------------------------------------------------ oracle

def _build_at(wd, cell, sha, *, in_step=False):
    """Check out ``sha`` (unless HEAD) and build kernel, module and initramfs
    there; returns the cell as built (the variant the commit has)."""
    if ktree.git(wd.linux, "rev-parse", "--verify", "--quiet", "HEAD", check=False).strip() != sha:
        ktree.checkout(wd.linux, sha, keep_bisect=in_step)  # (a fresh clone has no HEAD yet)
    variant = ktree.build_variant(wd.linux, sha, cell.variant)
    bcell = cell if variant == cell.variant else cell.replace(variant=variant)
    log(f"{sha[:12]}: building {cell.arch}-{variant} in {wd.obj}")
    ktree.build(wd, cell.arch, variant, log=print)
    return bcell


def ensure(conn, wd, cell, sha, boots, runs_root, *, more=False, in_step=False) -> list[str]:
    """Run ids of ``cell`` at ``sha`` for this rig commit; build + boot until
    there are ``boots`` of them (``more``: ``boots`` more). ``in_step``: called
    from a step of `git bisect run`, whose state the checkout must keep."""
    from . import provenance
    rig = provenance.rig_state()["rig_commit"]
    have = ktree.cell_runs(conn, cell, sha, rig)
    want = len(have) + boots if more else boots
    if len(have) >= want:
        return have
    bcell = _build_at(wd, cell, sha, in_step=in_step)
    log(f"{sha[:12]}: {want - len(have)} boots of {ktree.cell_text(bcell)}")
    ktree.measure(conn, wd, bcell, sha, want - len(have), runs_root=runs_root)
    return ktree.cell_runs(conn, cell, sha, rig)


# ------------------------------------------------------------------ same code

def code_digest(wd, cell, sha, *, in_step=False) -> str:
    """objdiff.build_digest of vmlinux and qrwbench.ko built at ``sha``."""
    from ..build import objdiff
    _build_at(wd, cell, sha, in_step=in_step)
    return objdiff.build_digest([wd.obj / "vmlinux", wd.module / "qrwbench.ko"])


VERDICTS_WRITER = "qrwbench bisect"     # in every verdicts file the rig writes


def _verdicts_file(state) -> Path:
    return Path(state["workdir"]["root"]) / "verdicts.json"


def _read_verdicts(f: Path) -> dict | None:
    """The verdicts of a file this rig wrote ({} when absent); None when the
    file is not one of ours (a --workdir of the user's may hold anything)."""
    if not f.exists():
        return {}
    try:
        obj = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(obj, dict) and obj.get("writer") == VERDICTS_WRITER:
        return obj.get("verdicts", {})
    # written before the marker: {sha: {"digest", "verdict", "how"}} and nothing else
    if isinstance(obj, dict) and obj and all(
            isinstance(v, dict) and {"digest", "verdict", "how"} <= set(v) for v in obj.values()):
        return obj
    return None


def verdicts(state) -> dict:
    """{sha: {"digest", "verdict" (0 good / 1 bad), "how"}} of this bisect."""
    return _read_verdicts(_verdicts_file(state)) or {}


def _write_verdicts(state, v: dict) -> None:
    f = _verdicts_file(state)
    if _read_verdicts(f) is None:
        raise QrwbenchError(f"{f} exists and was not written by qrwbench's bisect: "
                            "remove it or give another --workdir")
    tmp = f.with_name(f".{f.name}.qrwbench-tmp")
    tmp.write_text(json.dumps({"writer": VERDICTS_WRITER, "verdicts": v}, indent=1) + "\n")
    tmp.replace(f)


def record_verdict(state, sha, digest, verdict, how, reference=None) -> None:
    v = verdicts(state)
    v[sha] = {"digest": digest, "verdict": verdict, "how": how, "reference": reference}
    _write_verdicts(state, v)


def same_code_as(state, digest, sha) -> tuple[str, dict] | None:
    """(commit, its verdict record) of a commit judged in this bisect whose
    build has the same machine code as ``sha``'s, or None."""
    for other, rec in verdicts(state).items():
        if other != sha and rec["digest"] == digest and rec["how"] == "measured":
            return other, rec
    return None


def judge(conn, cell, good_runs, runs, *, threshold, alpha, normalize=True):
    """(exit status, results) of ``runs`` against GOOD's runs; ``normalize``
    false: raw boot values of every metric (the commit changed the module's
    reference copy, whose ratio would cancel the change)."""
    from ..analysis import verdicts
    from ..report import regress
    of = ktree.samples_of if normalize else ktree.raw_samples_of
    base = of(conn, cell, good_runs)
    tgt = of(conn, cell, runs)
    res = regress.compare_commits(tgt, base, threshold=threshold, alpha=alpha, normalize=normalize)
    if not res:
        return SKIP, res
    if any(r.status == verdicts.REGRESSION for r in res):
        return BAD, res
    if any(r.status == verdicts.NOT_JUDGED for r in res):
        return SKIP, res
    return GOOD, res


def unstable(res) -> bool:
    from ..analysis import verdicts
    return any(r.status == verdicts.NOT_JUDGED for r in res)


def describe(res) -> str:
    out = []
    for r in res:
        if r.test is not None and r.test.judged:
            out.append(f"{r.metric}: {r.test.pct_change:+.1f}% (p_adj={r.p_adjusted:.3g}) {r.status}")
        else:
            out.append(f"{r.metric}: {r.status}: {r.why}")
    return "; ".join(out) or "no common metric"


def oracle(state: dict, sha: str) -> int:
    """Judge ``sha`` (see the module docstring); the exit status for git bisect."""
    cell = ktree.parse_cell(state["cell"])
    wd = ktree.Workdir(*(Path(state["workdir"][k]) for k in
                         ("root", "linux", "obj", "module", "guest", "initrd")))
    conn = store.connect(state["db"])
    try:
        good = ktree.cell_runs(conn, cell, state["good"], state["rig"])
        if not good:
            raise QrwbenchError(f"GOOD {state['good'][:12]} has no stored runs any more")
        subject = ktree.git(wd.linux, "log", "-1", "--format=%s", sha).strip()
        try:
            digest = code_digest(wd, cell, sha, in_step=True)
            reference = ktree.reference_digest(wd.module)
            twin = same_code_as(state, digest, sha)
            if twin:
                other, rec = twin
                code = rec["verdict"]
                word = {GOOD: "good", BAD: "bad"}[code]
                how = f"same machine code as {other[:12]}"
                record_verdict(state, sha, digest, code, how, reference)
                log(f"{sha[:12]} {subject}: {word} ({code}): {how} (vmlinux and qrwbench.ko, "
                    f"every executable section), which was measured {word}: not booted")
                return code
            runs = ensure(conn, wd, cell, sha, state["boots"], Path(state["runs"]), in_step=True)
        except ktree.BuildError as e:
            log(f"{sha[:12]}: skip (125): {e}")
            return SKIP
        norm = reference == verdicts(state)[state["good"]].get("reference")
        if not norm:
            log(f"{sha[:12]}: the module's acqrel reference copy has other code than GOOD's "
                "(compiled against this commit's headers): judged on raw boot values")
        code, res = judge(conn, cell, good, runs, threshold=state["threshold"], alpha=state["alpha"],
                          normalize=norm)
        for more in range(1, MORE_ROUNDS + 1):
            if not unstable(res):
                break
            sides = "it" if len(good) > len(runs) else "it and GOOD"
            log(f"{sha[:12]}: not judged ({describe(res)}): measuring {state['boots']} more boots "
                f"of {sides} (round {more} of {MORE_ROUNDS})")
            runs = ensure(conn, wd, cell, sha, state["boots"], Path(state["runs"]), more=True,
                          in_step=True)
            if len(good) < len(runs):
                good = ensure(conn, wd, cell, state["good"], state["boots"], Path(state["runs"]),
                              more=True, in_step=True)
                # git bisect run marks whatever HEAD is when this step exits
                ktree.checkout(wd.linux, sha, keep_bisect=True)
            code, res = judge(conn, cell, good, runs, threshold=state["threshold"], alpha=state["alpha"],
                              normalize=norm)
        word = {GOOD: "good", BAD: "bad", SKIP: "skip"}[code]
        if code in (GOOD, BAD):
            record_verdict(state, sha, digest, code, "measured", reference)
        log(f"{sha[:12]} {subject}: {word} ({code}): {describe(res)}")
        return code
    finally:
        conn.close()


# ------------------------------------------------------------------ driver

def prepare(good: str, bad: str, cell_text: str, kernel_src=None, *, db=None, boots=5,
            threshold=0.05, alpha=0.05, root=None,
            runs_root=None) -> dict:
    """Check the input (one-line QrwbenchError) and return the bisect state."""
    from . import provenance
    cell = ktree.parse_cell(cell_text)
    src = ktree.check_tree(Path(kernel_src) if kernel_src else ktree.DEFAULT_SRC)
    gsha = ktree.resolve(src, good, "GOOD")
    bsha = ktree.resolve(src, bad, "BAD")
    if gsha == bsha:
        raise QrwbenchError(f"GOOD and BAD are the same commit {gsha[:12]}")
    if not gitutil.ok(src, "merge-base", "--is-ancestor", gsha, bsha):
        raise QrwbenchError(f"GOOD {good} ({gsha[:12]}) is not an ancestor of BAD {bad} ({bsha[:12]}) in {src}")
    for sha, what in ((gsha, "GOOD"), (bsha, "BAD")):
        try:
            ktree.build_variant(src, sha, cell.variant)
        except QrwbenchError as e:
            raise QrwbenchError(f"{what}: {e}") from None
    if boots < 1:
        raise QrwbenchError(f"--boots {boots}: need at least 1")
    wd = workdir(cell, root)
    return {"cell": ktree.cell_text(cell), "src": str(src), "good": gsha, "bad": bsha,
            "db": str(Path(db or store.default_db_path()).resolve()), "boots": boots, "threshold": threshold,
            "alpha": alpha, "rig": provenance.rig_state()["rig_commit"],
            "runs": str(Path(runs_root or vocab.BUILD / "runs").resolve()),
            "workdir": {k: str(getattr(wd, k)) for k in ("root", "linux", "obj", "module", "guest", "initrd")}}


def run_bisect(state: dict) -> dict:
    """Measure GOOD and BAD, then `git bisect run`; returns {'first_bad', 'subject', 'log', ...}."""
    t0 = time.monotonic()
    cell = ktree.parse_cell(state["cell"])
    wd = ktree.Workdir(*(Path(state["workdir"][k]) for k in
                         ("root", "linux", "obj", "module", "guest", "initrd")))
    held = ktree.lock(wd.root / ".lock", "bisect")
    try:
        return _run(state, cell, wd, t0)
    finally:
        held.close()


def _run(state, cell, wd, t0) -> dict:
    ktree.sync_clone(wd.linux, Path(state["src"]), log=log)
    state_file = wd.root / "state.json"
    state_file.write_text(json.dumps(state, indent=1) + "\n")
    _write_verdicts(state, {})      # verdicts are per bisect (only a file of ours is reset)
    conn = store.connect(state["db"])
    try:
        good = ensure(conn, wd, cell, state["good"], state["boots"], Path(state["runs"]))
        record_verdict(state, state["good"], code_digest(wd, cell, state["good"]), GOOD, "measured",
                       ktree.reference_digest(wd.module))
        if not good:
            raise QrwbenchError(f"GOOD {state['good'][:12]}: no boot succeeded (see build/runs)")
        good, why = good_runs(conn, cell, good, lambda: ensure(
            conn, wd, cell, state["good"], state["boots"], Path(state["runs"]), more=True))
        if why:
            state["good_unstable"] = f"after {len(good)} boots: {why}"
            state_file.write_text(json.dumps(state, indent=1) + "\n")
            log(f"GOOD {state['good'][:12]} fails LKP's stability rule "
                f"{state['good_unstable']}; the steps are judged by their confidence "
                "intervals, which this spread widens (a step they cannot judge is "
                "measured more, then skipped)")
    finally:
        conn.close()
    code = oracle(state, state["bad"])
    how = verdicts(state).get(state["bad"], {}).get("how", "")
    if code != BAD and how.startswith("same machine code"):
        raise QrwbenchError(f"BAD {state['bad'][:12]} has the {how}: nothing to bisect")
    if code != BAD:
        raise QrwbenchError(f"BAD {state['bad'][:12]} is not judged slower than GOOD "
                            f"{state['good'][:12]} ({'unstable samples' if code == SKIP else 'no regression'}): "
                            "nothing to bisect")
    git = gitutil.argv(wd.linux)
    gitutil.soft(wd.linux, "bisect", "reset", "--quiet")
    gitutil.git(wd.linux, "bisect", "start", state["bad"], state["good"])
    env = dict(os.environ, QRWB_BISECT_STATE=str(state_file), PYTHONPATH=str(TOP / "analysis"))
    proc = subprocess.Popen([*git, "bisect", "run", str(RUNNER), str(state_file)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    chunks = []
    for line in proc.stdout:          # shown as it happens, kept for the result
        chunks.append(line)
        sys.stdout.write(line)
        sys.stdout.flush()
    proc.wait()
    out = "".join(chunks)
    blog = subprocess.run([*git, "bisect", "log"], capture_output=True, text=True).stdout
    (wd.root / "bisect.log").write_text(blog)
    subprocess.run([*git, "bisect", "reset", "--quiet"], capture_output=True)
    m = re.search(r"^([0-9a-f]{40}) is the first bad commit", out, re.M)
    result = {"first_bad": m.group(1) if m else None, "log": blog, "output": out,
              "seconds": time.monotonic() - t0}
    if m:
        result["subject"] = ktree.git(wd.linux, "log", "-1", "--format=%s", m.group(1)).strip()
    else:
        cands = re.findall(r"^([0-9a-f]{40})$", out, re.M)
        result["candidates"] = cands
    return result


def good_runs(conn, cell, good, measure_more) -> tuple[list[str], str]:
    """GOOD's runs, checked with LKP's stability rule (:func:`all_stable`);
    when they fail it, ``measure_more()`` boots one more batch and returns
    all of GOOD's runs. Returns (runs, why): why is "" when they pass, else
    what the rule found. A GOOD that still fails is flagged, not refused: the
    oracle judges each step by a confidence interval over the boots (not by
    0-day's separated ranges, which LKP's rule protects), so a wide spread
    costs skipped steps, not wrong verdicts. The CI host of 2026-12-06 (AMD
    EPYC) had the test cell's per-boot ratios 30 % apart over 10 boots, and
    bench-series judged the barrier commit on the same cell there."""
    ok, why = all_stable(conn, cell, good)
    if ok:
        return good, ""
    log(f"GOOD unstable ({why}): measuring one more batch of boots")
    good = measure_more()
    ok, why = all_stable(conn, cell, good)
    return good, "" if ok else why


def good_flag(state: dict) -> str:
    """What the report says of a GOOD that failed LKP's rule (:func:`good_runs`)."""
    return f"GOOD failed LKP's stability rule {state['good_unstable']}"


def all_stable(conn, cell, run_ids):
    import numpy as np

    from ..analysis import noise, perboot
    by = perboot.boot_values_by_metric(ktree.samples_of(conn, cell, run_ids))
    if not by:
        return False, "no samples"
    for (c, v), (vals, _, _) in sorted(by.items(), key=lambda kv: kv[0][0].metric(kv[0][1])):
        ok, why = noise.stable_samples(np.exp(vals))     # the per-boot (normalized) values
        if not ok:
            return False, f"{c.metric(v)}: {why}"
    return True, ""


def report(state: dict, result: dict) -> str:
    from ..report import regress
    if result.get("first_bad"):
        sha = result["first_bad"]
        conn = store.connect(state["db"])
        try:
            cell = ktree.parse_cell(state["cell"])
            good = ktree.cell_runs(conn, cell, state["good"], state["rig"])
            bad = ktree.cell_runs(conn, cell, sha, state["rig"])
            how = verdicts(state).get(sha, {}).get("how", "measured")
            twin = re.match(r"same machine code as ([0-9a-f]+)", how)
            if not bad and twin:     # not booted: show the boots of the commit it equals
                same = next(c for c in verdicts(state) if c.startswith(twin.group(1)))
                bad = ktree.cell_runs(conn, cell, same, state["rig"])
            v = verdicts(state)
            norm = v.get(sha, {}).get("reference") == v.get(state["good"], {}).get("reference")
            of = ktree.samples_of if norm else ktree.raw_samples_of
            res = regress.compare_commits(of(conn, cell, bad), of(conn, cell, good),
                                          threshold=state["threshold"], alpha=state["alpha"],
                                          normalize=norm)
        finally:
            conn.close()
        lines = [f"first bad commit: {sha} {result['subject']}"]
        if state.get("good_unstable"):
            lines.append(f"({good_flag(state)}: judged by confidence intervals)")
        if twin:
            lines.append(f"(it has the {how}: the boots below are {twin.group(1)}'s)")
        good_subject = ktree.git(state["workdir"]["linux"], "log", "-1", "--format=%s",
                                 state["good"]).strip()
        lines.append(regress.format_report(regress.RegressResult(
            sha, state["good"], result["subject"], good_subject, res,
            state["threshold"], state["alpha"])))
        lines.append(f"bisect took {result['seconds']:.0f} s; log: {Path(state['workdir']['root']) / 'bisect.log'}")
        return "\n".join(lines)
    if result.get("candidates"):
        why = f"; {good_flag(state)}" if state.get("good_unstable") else ""
        return ("bisect: could not tell the first bad commit (skipped steps" + why
                + "); it is one of: " + ", ".join(c[:12] for c in result["candidates"]))
    return "bisect: git bisect run did not name a first bad commit (see the output above)"


def add_arguments(ap) -> None:
    """``python3 -m qrwbench bisect run|step`` (the parser is cli's)."""
    sub = ap.add_subparsers(dest="bisect_cmd", metavar="{run,step}", required=True)
    r = sub.add_parser("run", help="bisect GOOD..BAD (make bisect)")
    r.add_argument("--good", required=True)
    r.add_argument("--bad", required=True)
    r.add_argument("--cell", required=True, help=ktree.CELL_SYNTAX)
    r.add_argument("--kernel-src", default=None)
    r.add_argument("--db", dest="db_sub", metavar="DB", default=None)
    r.add_argument("--boots", type=int, default=5)
    r.add_argument("--threshold", type=float, default=5.0, help="percent (default 5)")
    r.add_argument("--alpha", type=float, default=0.05)
    r.add_argument("--workdir", default=None, help="default build/bisect")
    r.add_argument("--check", action="store_true",
                   help="only check CELL, BOOTS, THRESHOLD and KERNEL_SRC (before any build)")
    s = sub.add_parser("step", help="one step's verdict (the oracle of git bisect run)")
    s.add_argument("state")


def run(a) -> int:
    """``bisect step``: the oracle's exit status (any failure aborts: 128).
    ``bisect run``: bad input raises QrwbenchError (cli.main prints it)."""
    if a.bisect_cmd == "step":
        try:
            state = json.loads(Path(a.state).read_text())
            sha = ktree.git(state["workdir"]["linux"], "rev-parse", "HEAD").strip()
            return oracle(state, sha)
        except Exception as e:      # a broken rig must abort the bisect, not mark commits
            print(f"bisect: step aborted: {e}", file=sys.stderr)
            return ABORT
    ktree.check_numbers(a.boots, a.threshold)
    if not 0 < a.alpha < 1:
        raise QrwbenchError(f"--alpha {a.alpha}: must be in (0, 1)")
    if a.check:
        ktree.parse_cell(a.cell)
        for what, ref in (("GOOD", a.good), ("BAD", a.bad)):
            if not ref.strip():
                raise QrwbenchError(f"{what} is empty: give a commit")
        if a.kernel_src:
            ktree.check_tree(Path(a.kernel_src))
        return 0
    state = prepare(a.good, a.bad, a.cell, a.kernel_src, db=a.db, boots=a.boots,
                    threshold=a.threshold / 100, alpha=a.alpha, root=a.workdir)
    log(f"GOOD {state['good'][:12]} BAD {state['bad'][:12]} in {state['src']}; "
        f"cell {state['cell']}; {state['boots']} boots per step; DB {state['db']}")
    result = run_bisect(state)
    print(report(state, result))
    return 0 if result.get("first_bad") else 1

"""qrwbench.analysis.harness: each atomics op's ns per op with its CI, the harness
share (the empty op in the same blocks) and ns less the harness, on
synthetic blocks with known costs."""
import json

import numpy as np

from qrwbench.analysis import harness

PARAMS = json.dumps({"reps": 10}, sort_keys=True)


def samples(rng, *, op_ns=10.0, empty_ns=0.3, boots=6, reps=10, threads=2, with_empty=True,
            boot_sd=0.05, phase_sd=0.05, block_sd=0.01):
    """Blocks of atomic_add_return (full, relaxed at 0.8x the cost) and the
    empty op: a boot level, a slow phase shared by every entry of a block,
    and each entry's own noise."""
    out = []
    for b in range(boots):
        boot = rng.normal(0, boot_sd)
        for rep in range(reps):
            phase = boot + rng.normal(0, phase_sd)
            entries = [("atomic_add_return", "full", op_ns), ("atomic_add_return", "relaxed", 0.8 * op_ns)]
            if with_empty:
                entries.append(("empty", "relaxed", empty_ns))
            for op, variant, ns in entries:
                ns_block = ns * np.exp(phase + rng.normal(0, block_sd))
                out.append({"arch": "arm64", "accel": "tcg", "cpu_model": "max", "vcpus": threads,
                            "workload": "atomics", "impl": "inline", "op": op,
                            "placement": "percpu", "params": PARAMS, "host": None, "copy": 0,
                            "variant": variant, "run_id": f"boot{b}", "rep": rep,
                            "throughput": threads * 1e9 / ns_block})
    return out


def by_key(costs):
    return {(c.cell.op, c.variant): c for c in costs}


def test_share_and_ns_are_recovered_with_intervals_that_cover():
    covered_share = covered_ns = 0
    trials = 60
    for seed in range(trials):
        c = by_key(harness.op_costs(samples(np.random.default_rng(seed))))
        full = c[("atomic_add_return", "full")]
        lo, hi = full.share_ci
        covered_share += lo <= 0.03 <= hi
        nlo, nhi = full.ns_ci
        covered_ns += nlo <= 10.0 <= nhi
        # the shared phase cancels in the share: it is much tighter than ns/op
        assert hi / lo < nhi / nlo
    assert covered_share >= 0.85 * trials, covered_share
    assert covered_ns >= 0.85 * trials, covered_ns


def test_less_the_harness_subtracts_the_empty_op_and_empty_has_no_share():
    c = by_key(harness.op_costs(samples(np.random.default_rng(1), block_sd=0.001, phase_sd=0.001)))
    full, relaxed = c[("atomic_add_return", "full")], c[("atomic_add_return", "relaxed")]
    assert abs(full.harness_share - 0.03) < 0.002
    assert abs(relaxed.harness_share - 0.3 / 8.0) < 0.002
    assert abs(full.less_harness - (full.ns_per_op - 0.3 * full.ns_per_op / 10.0)) < 0.01
    assert abs(full.less_harness / full.ns_per_op - 0.97) < 0.002
    empty = c[harness.EMPTY]
    assert empty.share is None and np.isnan(empty.harness_share)
    assert abs(empty.ns_per_op - 0.3) < 0.03


def test_without_the_empty_op_there_is_no_harness_share():
    c = by_key(harness.op_costs(samples(np.random.default_rng(2), with_empty=False)))
    assert harness.EMPTY not in c
    full = c[("atomic_add_return", "full")]
    assert full.share is None and np.isnan(full.less_harness)
    assert 9.0 < full.ns_per_op < 11.0

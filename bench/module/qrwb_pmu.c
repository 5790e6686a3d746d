// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench: in-kernel perf counters (cycles, instructions), one set per
 * measuring kthread, read around each window (qrwb_pmu_read() in
 * qrwb_internal.h) and reported only when every thread counts them.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/timekeeping.h>

#include "qrwb_internal.h"

/* PMU probe: loop iterations that any counting event must see */
#define QRWB_PMU_PROBE_OPS	BIT(16)

const char * const qrwb_pmu_key[QRWB_PMU_N] = {
	[QRWB_PMU_CYCLES]	= "cycles",
	[QRWB_PMU_INSNS]	= "instructions",
};

static const u64 qrwb_pmu_config[QRWB_PMU_N] = {
	[QRWB_PMU_CYCLES]	= PERF_COUNT_HW_CPU_CYCLES,
	[QRWB_PMU_INSNS]	= PERF_COUNT_HW_INSTRUCTIONS,
};

static const char *qrwb_errname(int err)
{
	switch (err) {
	case -ENOENT:
		return "-ENOENT (no PMU implements the event)";
	case -EOPNOTSUPP:
		return "-EOPNOTSUPP (the PMU does not support the event)";
	case -ENODEV:
		return "-ENODEV";
	case -EINVAL:
		return "-EINVAL";
	case -EACCES:
		return "-EACCES";
	case -EPERM:
		return "-EPERM";
	case -EBUSY:
		return "-EBUSY";
	case -ENOSPC:
		return "-ENOSPC";
	case -ENOMEM:
		return "-ENOMEM";
	default:
		return NULL;
	}
}

static void qrwb_pmu_drop(struct qrwb_worker *w, unsigned int i,
			  const char *fmt, ...) __printf(3, 4);
static void qrwb_pmu_drop(struct qrwb_worker *w, unsigned int i,
			  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->pmu_why[i], sizeof(w->pmu_why[i]), fmt, ap);
	va_end(ap);
	if (w->pev[i])
		perf_event_release_kernel(w->pev[i]);
	w->pev[i] = NULL;
}

/*
 * In the measuring kthread, before its first job: one counter per event,
 * bound to this task (cpu -1), not to its CPU. The thread is bound to the
 * CPU anyway; a task counter counts only this thread, interrupts taken
 * while it runs included, and not whatever else the CPU may run while
 * the thread is switched out (which would be counted in no op). Then a
 * probe: a counter that does not run, or counts nothing in a loop of
 * QRWB_PMU_PROBE_OPS iterations, is dropped (e.g. QEMU TCG's arm64 PMU
 * takes the instructions event but counts it only with -icount).
 */
void qrwb_pmu_open(struct qrwb_worker *w)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_HARDWARE,
		.size = sizeof(attr),
	};
	struct qrwb_pmu_snap *a = &w->pmu0, *b = &w->pmu1;
	struct perf_event *ev;
	const char *name;
	unsigned int i;

	if (qrwb_cxt.pmu_off) {
		/* program workloads: the threads start once per window */
		for (i = 0; i < QRWB_PMU_N; i++) {
			w->pev[i] = NULL;
			qrwb_pmu_drop(w, i, "not counted: the workload runs programs");
		}
		return;
	}
	for (i = 0; i < QRWB_PMU_N; i++) {
		w->pev[i] = NULL;
		attr.config = qrwb_pmu_config[i];
		ev = perf_event_create_kernel_counter(&attr, -1, current, NULL,
						      NULL);
		if (IS_ERR(ev)) {
			name = qrwb_errname(PTR_ERR(ev));
			if (name)
				qrwb_pmu_drop(w, i, "perf_event_create_kernel_counter: %s",
					      name);
			else
				qrwb_pmu_drop(w, i, "perf_event_create_kernel_counter: %ld",
					      PTR_ERR(ev));
			continue;
		}
		w->pev[i] = ev;
	}

	memset(a, 0, sizeof(*a));
	memset(b, 0, sizeof(*b));
	qrwb_pmu_read(w, a, true, true);
	qrwb_loops_c0[QRWB_ID_empty_relaxed](&qrwb_cxt.slots[1 + w->idx],
					     QRWB_PMU_PROBE_OPS);
	qrwb_pmu_read(w, b, false, true);
	for (i = 0; i < QRWB_PMU_N; i++) {
		if (!w->pev[i])
			continue;
		if (b->running[i] == a->running[i])
			qrwb_pmu_drop(w, i,
				      "created, but not running in a probe loop (enabled %llu ns, running %llu ns)",
				      b->enabled[i], b->running[i]);
		else if (b->val[i] == a->val[i])
			qrwb_pmu_drop(w, i,
				      "counts 0 in a probe loop of %lu iterations (event not implemented by the PMU)",
				      QRWB_PMU_PROBE_OPS);
	}
}

void qrwb_pmu_close(struct qrwb_worker *w)
{
	unsigned int i;

	for (i = 0; i < QRWB_PMU_N; i++) {
		if (w->pev[i])
			perf_event_release_kernel(w->pev[i]);
		w->pev[i] = NULL;
	}
}

/* leader, once every thread has opened its counters: what is reported */
void qrwb_pmu_settle(void)
{
	struct qrwb_worker *w0 = &qrwb_cxt.workers[0];
	const struct qrwb_worker *bad;
	unsigned int i, t, nok;
	u64 t0, best = U64_MAX;

	for (i = 0; i < QRWB_PMU_N; i++) {
		bad = NULL;
		nok = 0;
		for (t = 0; t < qrwb_cxt.nthreads; t++) {
			if (qrwb_cxt.workers[t].pev[i])
				nok++;
			else if (!bad)
				bad = &qrwb_cxt.workers[t];
		}
		qrwb_cxt.pmu_on[i] = !bad;
		qrwb_cxt.pmu_any |= !bad;
		if (bad && nok)
			snprintf(qrwb_cxt.pmu_why[i], sizeof(qrwb_cxt.pmu_why[i]),
				 "thread %u: %s", bad->idx, bad->pmu_why[i]);
		else if (bad)
			strscpy(qrwb_cxt.pmu_why[i], bad->pmu_why[i],
				sizeof(qrwb_cxt.pmu_why[i]));
	}
	if (!qrwb_cxt.pmu_any) {
		pr_info("pmu: no counters: %s\n",
			qrwb_cxt.pmu_why[QRWB_PMU_CYCLES]);
		return;
	}
	/* what one read of the counters costs (outside every window) */
	for (t = 0; t < 5; t++) {
		t0 = ktime_get_ns();
		qrwb_pmu_read(w0, &w0->pmu0, false, false);
		best = min(best, ktime_get_ns() - t0);
	}
	qrwb_cxt.pmu_read_ns = best;
	pr_info("pmu: cycles %s, instructions %s; one read of the counters %llu ns\n",
		qrwb_cxt.pmu_on[QRWB_PMU_CYCLES] ? "counted" : "not counted",
		qrwb_cxt.pmu_on[QRWB_PMU_INSNS] ? "counted" : "not counted",
		qrwb_cxt.pmu_read_ns);
}

/* leader, after a job: sum the threads' deltas where every thread counted */
void qrwb_pmu_collect(struct qrwb_res *r)
{
	const struct qrwb_pmu_snap *a, *b;
	u64 en, run, d;
	unsigned int i, t;
	bool ok;

	r->pmu_ok = 0;
	for (i = 0; i < QRWB_PMU_N; i++) {
		r->pmu[i] = 0;
		if (!qrwb_cxt.pmu_on[i])
			continue;
		ok = true;
		for (t = 0; t < qrwb_cxt.nthreads && ok; t++) {
			a = &qrwb_cxt.workers[t].pmu0;
			b = &qrwb_cxt.workers[t].pmu1;
			en = b->enabled[i] - a->enabled[i];
			run = b->running[i] - a->running[i];
			d = b->val[i] - a->val[i];
			if (!run || run != en) {
				ok = false;
				if (!qrwb_cxt.pmu_omitted[i])
					snprintf(qrwb_cxt.pmu_omit_why[i], QRWB_PMU_WHY,
						 "order %u thread %u: running %llu of %llu ns enabled (multiplexed)",
						 r->order, t, run, en);
			} else if (!d && r->ops) {
				ok = false;
				if (!qrwb_cxt.pmu_omitted[i])
					snprintf(qrwb_cxt.pmu_omit_why[i], QRWB_PMU_WHY,
						 "order %u thread %u: counted 0", r->order, t);
			}
			r->pmu[i] += d;
		}
		if (ok)
			r->pmu_ok |= BIT(i);
		else
			qrwb_cxt.pmu_omitted[i]++;
	}
}

/*
 * At the end: the cost of the counter reads (outside the windows but in
 * the counts), and in how many results a counter was omitted, and why.
 */
void qrwb_pmu_report(void)
{
	u64 n = max(qrwb_cxt.njobs * qrwb_cxt.nthreads, 1ULL);
	u64 before = 0, after = 0;
	unsigned int t, i;

	if (qrwb_cxt.pmu_any) {
		for (t = 0; t < qrwb_cxt.nthreads; t++) {
			before += qrwb_cxt.workers[t].pmu_read_ns[0];
			after += qrwb_cxt.workers[t].pmu_read_ns[1];
		}
		pr_info("pmu: reading the counters took %llu ns before and %llu ns after a window (mean)\n",
			div64_u64(before, n), div64_u64(after, n));
	}
	for (i = 0; i < QRWB_PMU_N; i++)
		if (qrwb_cxt.pmu_omitted[i])
			pr_info("pmu: %s omitted in %llu of %llu measurements; first: %s\n",
				qrwb_pmu_key[i], qrwb_cxt.pmu_omitted[i],
				qrwb_cxt.njobs, qrwb_cxt.pmu_omit_why[i]);
}

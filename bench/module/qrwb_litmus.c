// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench workload=litmus: weak-memory canaries (qrwb_litmus.def).
 *
 * Each test runs `iters` times on two kthreads bound to two CPUs. Both
 * threads meet at a counter before every iteration (one fully ordered
 * increment each, then a spin with acquire loads), so that the two sides
 * of an iteration run at nearly the same moment, as klitmus7's
 * synchronised mode does; the variables of a batch of iterations are fresh
 * (reset by thread 0 between batches), each in its own cache line. The
 * count of each outcome (r0, r1 in {0, 1}) tells whether this CPU, or this
 * emulator on this host, can show the reordering the test is about.
 * Its records: begin, then one litmus record per test.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "qrwb_internal.h"

struct qrwb_lt_vars {
	int x ____cacheline_aligned;
	int y ____cacheline_aligned;
	atomic_t a ____cacheline_aligned;
};

struct qrwb_lt_out {
	int r[2];
};

#define QRWB_LITMUS(name, lkmm, w0, w1, init, p0, p1)			\
static void qrwb_lt_init_##name(struct qrwb_lt_vars *v) { init; }	\
static void qrwb_lt_p0_##name(struct qrwb_lt_vars *v, int *r) { p0; }	\
static void qrwb_lt_p1_##name(struct qrwb_lt_vars *v, int *r) { p1; }
#include "qrwb_litmus.def"
#undef QRWB_LITMUS

struct qrwb_lt_test {
	const char *name;
	const char *lkmm;
	int want[2];
	void (*init)(struct qrwb_lt_vars *v);
	void (*p[2])(struct qrwb_lt_vars *v, int *r);
};

static const struct qrwb_lt_test qrwb_lt_tests[] = {
#define QRWB_LITMUS(name, lkmm, w0, w1, init, p0, p1)			\
	{ #name, #lkmm, { w0, w1 }, qrwb_lt_init_##name,		\
	  { qrwb_lt_p0_##name, qrwb_lt_p1_##name } },
#include "qrwb_litmus.def"
#undef QRWB_LITMUS
};

#define QRWB_LT_BATCH	256

struct qrwb_lt_run {
	const struct qrwb_lt_test *t;
	struct qrwb_lt_vars *v;		/* QRWB_LT_BATCH fresh sets */
	struct qrwb_lt_out *out;	/* QRWB_LT_BATCH outcomes */
	unsigned long iters;
	u64 deadline;
	unsigned long done;		/* iterations tallied (thread 0) */
	u64 count[4];			/* outcome r0 * 2 + r1 (thread 0) */
	atomic_t sync ____cacheline_aligned;
	int abort ____cacheline_aligned;
	struct completion fin[2];
};

/*
 * Both threads meet: each increments the counter (fully ordered) and waits
 * until the other has too. False when the time limit passed (both stop).
 */
static bool qrwb_lt_meet(struct qrwb_lt_run *run, int *target)
{
	unsigned int spins = 0;

	*target += 2;
	atomic_inc_return(&run->sync);
	while (atomic_read_acquire(&run->sync) < *target) {
		if (READ_ONCE(run->abort))
			return false;
		if (!(++spins & 1023) && ktime_get_ns() > run->deadline) {
			WRITE_ONCE(run->abort, 1);
			return false;
		}
		cpu_relax();
	}
	return !READ_ONCE(run->abort);
}

static void qrwb_lt_side(struct qrwb_lt_run *run, unsigned int me)
{
	const struct qrwb_lt_test *t = run->t;
	unsigned long base, i, n;
	int target = 0;

	for (base = 0; base < run->iters; base += n) {
		n = min_t(unsigned long, QRWB_LT_BATCH, run->iters - base);
		if (me == 0) {
			memset(run->v, 0, n * sizeof(*run->v));
			memset(run->out, 0, n * sizeof(*run->out));
			for (i = 0; i < n; i++)
				t->init(&run->v[i]);
		}
		if (!qrwb_lt_meet(run, &target))	/* the fresh batch */
			return;
		for (i = 0; i < n; i++) {
			if (!qrwb_lt_meet(run, &target))
				return;
			t->p[me](&run->v[i], run->out[i].r);
		}
		if (!qrwb_lt_meet(run, &target))	/* the outcomes */
			return;
		if (me == 0) {
			for (i = 0; i < n; i++)
				run->count[(run->out[i].r[0] & 1) * 2 +
					   (run->out[i].r[1] & 1)]++;
			run->done += n;
		}
		cond_resched();
	}
}

struct qrwb_lt_arg {
	struct qrwb_lt_run *run;
	unsigned int me;
};

static int qrwb_lt_thread(void *p)
{
	struct qrwb_lt_arg *a = p;

	qrwb_lt_side(a->run, a->me);
	complete(&a->run->fin[a->me]);
	qrwb_wait_for_stop();
	return 0;
}

/* one test's outcome */
struct qrwb_litmus_res {
	const char *name;
	const char *lkmm;	/* "allowed" or "forbidden" */
	int want[2];		/* the outcome only reordering explains */
	unsigned long iters;	/* iterations run (fewer when the time ran out) */
	u64 ns;
	u64 count[4];		/* outcome r0 * 2 + r1 */
};

/* run test k on the first two online CPUs */
static int qrwb_litmus_run(unsigned int k, unsigned long iters, u64 limit_ns,
			   struct qrwb_litmus_res *res)
{
	struct qrwb_lt_arg arg[2];
	struct task_struct *task[2] = { NULL, NULL };
	struct qrwb_lt_run *run;
	unsigned int cpu[2], me;
	u64 t0;
	int ret = 0;

	cpu[0] = cpumask_first(cpu_online_mask);
	cpu[1] = cpumask_next(cpu[0], cpu_online_mask);
	if (cpu[1] >= nr_cpu_ids)
		return -EINVAL;
	run = vzalloc(sizeof(*run));
	if (!run)
		return -ENOMEM;
	run->v = vzalloc(QRWB_LT_BATCH * sizeof(*run->v));
	run->out = vzalloc(QRWB_LT_BATCH * sizeof(*run->out));
	if (!run->v || !run->out) {
		ret = -ENOMEM;
		goto out;
	}
	run->t = &qrwb_lt_tests[k];
	run->iters = iters;
	atomic_set(&run->sync, 0);
	t0 = ktime_get_ns();
	run->deadline = t0 + limit_ns;
	for (me = 0; me < 2; me++) {
		init_completion(&run->fin[me]);
		arg[me].run = run;
		arg[me].me = me;
		task[me] = kthread_create_on_cpu(qrwb_lt_thread, &arg[me], cpu[me],
						 "qrwb_lt/%u");
		if (IS_ERR(task[me])) {
			ret = PTR_ERR(task[me]);
			task[me] = NULL;
			WRITE_ONCE(run->abort, 1);
			break;
		}
	}
	for (me = 0; me < 2; me++)
		if (task[me])
			wake_up_process(task[me]);
	for (me = 0; me < 2; me++) {
		if (task[me]) {
			wait_for_completion(&run->fin[me]);
			kthread_stop(task[me]);
		}
	}
	res->name = run->t->name;
	res->lkmm = run->t->lkmm;
	res->want[0] = run->t->want[0];
	res->want[1] = run->t->want[1];
	res->iters = run->done;
	res->ns = ktime_get_ns() - t0;
	memcpy(res->count, run->count, sizeof(res->count));
out:
	vfree(run->v);
	vfree(run->out);
	vfree(run);
	return ret;
}

/* its run(): begin, one litmus record per test of qrwb_litmus.def */
static int qrwb_run_litmus(void)
{
	struct qrwb_litmus_res res;
	unsigned int k, i;
	int ret;

	for (i = 0; i < QRWB_PMU_N; i++)
		strscpy(qrwb_cxt.pmu_why[i], "not read by the litmus workload", QRWB_PMU_WHY);
	ret = qrwb_emit_begin();
	for (k = 0; !ret && k < ARRAY_SIZE(qrwb_lt_tests); k++) {
		ret = qrwb_litmus_run(k, qrwb_cxt.cfg.litmus_iters,
				      qrwb_cxt.cfg.duration_ms * NSEC_PER_MSEC, &res);
		if (ret)
			break;
		qrwb_rec_start("litmus");
		qrwb_kstr("test", res.name);
		qrwb_kstr("lkmm", res.lkmm);
		qrwb_key("want");
		qrwb_rec_add("[%d,%d]", res.want[0], res.want[1]);
		qrwb_ku64("iters", res.iters);
		qrwb_ku64("ns", res.ns);
		qrwb_key("counts");
		qrwb_rec_add("[%llu,%llu,%llu,%llu]", res.count[0], res.count[1],
			     res.count[2], res.count[3]);
		ret = qrwb_rec_emit(true);
		pr_info("litmus %s (%s): %llu of %lu iterations showed r0=%d r1=%d\n",
			res.name, res.lkmm, res.count[res.want[0] * 2 + res.want[1]],
			res.iters, res.want[0], res.want[1]);
	}
	return ret;
}

/* two threads, whatever threads= says; litmus_iters=, duration_ms= */
static int qrwb_params_litmus(void)
{
	unsigned int online = num_online_cpus();

	if (online < 2)
		return qrwb_refuse("workload=litmus needs two CPUs, the guest has %u online: valid is a guest with 2 or more vCPUs",
				   online);
	qrwb_cxt.nthreads = 2;
	return 0;
}

/* not measured by the one driver: no entries, no result records */
const struct qrwb_workload qrwb_wl_litmus = {
	.params		= qrwb_params_litmus,
	.run		= qrwb_run_litmus,
};

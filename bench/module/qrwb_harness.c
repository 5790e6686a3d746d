// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench harness: one kthread per measuring CPU, bound, released together
 * by a start barrier; every thread calls the measured loop through a
 * function pointer once per batch and reads the clock only between
 * batches. Thread 0 (the leader) runs the one driver, qrwb_drive(), for
 * the workload: rounds of shuffled entries, one measurement per entry,
 * one result record per entry of a measured round.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/timekeeping.h>

#include "qrwb_internal.h"

/* batch calibration: clock reads cost at most 1/QRWB_CLOCK_SHARE of a batch */
#define QRWB_CLOCK_SHARE	200
#define QRWB_MIN_BATCH		32UL
#define QRWB_MAX_BATCH		((unsigned long)SZ_16M)
#define QRWB_CAL_NS		(200 * NSEC_PER_USEC)

/* PRNG for the run order and per-thread seeds */

u64 qrwb_splitmix(u64 *state)
{
	u64 z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in 0..n-1 */
static u32 qrwb_below(u32 n)
{
	return (u32)(((qrwb_splitmix(&qrwb_cxt.rng) >> 32) * n) >> 32);
}

static void qrwb_shuffle(struct qrwb_ent *e, unsigned int n)
{
	unsigned int i, k;
	struct qrwb_ent t;

	for (i = n - 1; i > 0; i--) {
		k = qrwb_below(i + 1);
		t = e[i];
		e[i] = e[k];
		e[k] = t;
	}
}

/*
 * Paired blocks: the entries that are compared with each other (every
 * ordering and copy of one op on one placement) run back to back, in a
 * random order, and the blocks themselves run in a random order. A
 * comparison's two sides are so measured within a few windows of each
 * other, and the host forms its ratios block by block, so that slow phases
 * of the host cancel. block[] gives each entry's block; n <= QRWB_MAX_ENTS.
 */
static void qrwb_shuffle_blocks(struct qrwb_ent *e, unsigned int n,
				const unsigned int *block)
{
	static u32 key[2 * QRWB_NOPS];
	struct qrwb_ent t;
	unsigned int i, k, bi;

	qrwb_shuffle(e, n);
	for (i = 0; i < ARRAY_SIZE(key); i++)
		key[i] = qrwb_below(1U << 16) << 16 | i;	/* unique keys */
	for (i = 1; i < n; i++) {	/* stable insertion sort by block key */
		t = e[i];
		bi = block[t.id] * 2 + t.percpu;
		for (k = i; k > 0 &&
		     key[block[e[k - 1].id] * 2 + e[k - 1].percpu] > key[bi]; k--)
			e[k] = e[k - 1];
		e[k] = t;
	}
}

/* ------------------------------------------------------------------ */
/* workers and the measurement */

/*
 * Batches until a clock read is at or past until; returns that read. The
 * clock is read after every batch and nowhere else; *ops counts the ops.
 */
static __always_inline u64 qrwb_batches(qrwb_loop_fn loop, void *ctx,
					unsigned long batch, u64 until,
					u64 *ops)
{
	u64 now;

	do {
		loop(ctx, batch);
		*ops += batch;
		now = ktime_get_ns();
	} while (now < until);
	return now;
}

static void qrwb_measure(struct qrwb_worker *w)
{
	struct qrwb_job *j = &qrwb_cxt.job;
	const qrwb_loop_fn loop = j->loop;
	void *const ctx = w->ctx;
	const unsigned long batch = j->batch;
	struct qrwb_rwctx *c = &w->rw;
	u64 now, t, t_start, t_end, warm_ops = 0, ops = 0;
	unsigned long r0, w0;

	/* start barrier: the last thread to arrive sets the window */
	if (atomic_inc_return(&j->arrived) == j->nthreads) {
		now = ktime_get_ns();
		j->t_start = now + j->warm_ns;
		j->t_end = j->t_start + j->dur_ns;
		/* publishes t_start/t_end to the threads spinning below */
		smp_store_release(&j->go, 1);
	} else {
		/*
		 * Pairs with the release above. cond_resched(): a CPU that
		 * waits here must still let stop_machine() and the like run,
		 * or a thread they hold would never arrive.
		 */
		while (!smp_load_acquire(&j->go)) {
			cond_resched();
			cpu_relax();
		}
	}
	t_start = j->t_start;
	t_end = j->t_end;

	/* warm-up: at least one batch, its ops not counted */
	now = qrwb_batches(loop, ctx, batch, t_start, &warm_ops);

	/* the counters are read outside the window: before t_first, after t_last */
	if (qrwb_cxt.pmu_any) {
		t = now;
		qrwb_pmu_read(w, &w->pmu0, true, false);
		now = ktime_get_ns();
		w->pmu_read_ns[0] += now - t;
	}
	w->t_first = now;
	r0 = c->reads;
	w0 = c->writes;
	now = qrwb_batches(loop, ctx, batch, t_end, &ops);
	w->t_last = now;
	if (qrwb_cxt.pmu_any) {
		qrwb_pmu_read(w, &w->pmu1, false, false);
		w->pmu_read_ns[1] += ktime_get_ns() - now;
	}
	w->ops = ops;
	w->reads = c->reads - r0;
	w->writes = c->writes - w0;
	w->viol = c->viol;
}

static int qrwb_run(void);

/*
 * Thread 0 (the leader) runs the whole benchmark: it publishes each job,
 * measures its own share and collects everyone's. The others spin on the
 * job generation between measurements, with cond_resched(), so that no
 * measurement waits for a cross-CPU wakeup (under TCG those took a timer
 * tick, 4 ms and more, per measurement).
 */
static int qrwb_worker_fn(void *arg)
{
	struct qrwb_worker *w = arg;
	unsigned long gen;

	qrwb_pmu_open(w);
	if (w->idx == 0) {
		/* acquire: pairs with the followers' release of pmu_ready */
		while (atomic_read_acquire(&qrwb_cxt.pmu_ready) != qrwb_cxt.nthreads - 1) {
			cond_resched();
			cpu_relax();
		}
		/* program workloads start the threads once per window */
		if (!qrwb_cxt.out.nrec) {
			qrwb_pmu_settle();
			qrwb_cxt.run_ret = qrwb_emit_begin();
		}
		if (!qrwb_cxt.run_ret)
			qrwb_cxt.run_ret = qrwb_run();
		qrwb_pmu_close(w);
		/* release: the followers stop spinning */
		smp_store_release(&qrwb_cxt.quit, 1);
		complete(&qrwb_cxt.run_done);
	} else {
		/* release: the counters above, for the leader's settle */
		atomic_inc_return_release(&qrwb_cxt.pmu_ready);
		for (;;) {
			/* acquire: the job's fields are read after gen */
			gen = smp_load_acquire(&qrwb_cxt.job.gen);
			if (gen != w->seen) {
				w->seen = gen;
				qrwb_measure(w);
				/* release: the results above, for the leader */
				atomic_dec_return_release(&qrwb_cxt.job.remaining);
				continue;
			}
			/* acquire: pairs with the leader's release of quit */
			if (smp_load_acquire(&qrwb_cxt.quit))
				break;
			cond_resched();
			cpu_relax();
		}
		qrwb_pmu_close(w);
	}
	qrwb_wait_for_stop();
	return 0;
}

static void qrwb_stop_workers(void)
{
	unsigned int t;

	for (t = 0; t < qrwb_cxt.nthreads; t++) {
		if (qrwb_cxt.workers[t].task)
			kthread_stop(qrwb_cxt.workers[t].task);
		qrwb_cxt.workers[t].task = NULL;
	}
}

static int qrwb_start_workers(void)
{
	unsigned int t = 0, cpu;
	struct task_struct *task;

	for_each_online_cpu(cpu) {
		struct qrwb_worker *w;

		if (t == qrwb_cxt.nthreads)
			break;
		w = &qrwb_cxt.workers[t];
		w->idx = t;
		w->seen = qrwb_cxt.job.gen;	/* no job yet: not the last one */
		task = kthread_create_on_cpu(qrwb_worker_fn, w, cpu, "qrwb/%u");
		if (IS_ERR(task)) {
			qrwb_stop_workers();
			return PTR_ERR(task);
		}
		w->task = task;
		t++;
	}
	/* the followers first, so that they are spinning when jobs come */
	while (t--)
		wake_up_process(qrwb_cxt.workers[t].task);
	return 0;
}

/* leader: run the job on all workers; sums into r and the per-thread arrays */
void qrwb_run_job(struct qrwb_res *r, u64 *pt_ops, u64 *pt_reads,
			 u64 *pt_writes)
{
	struct qrwb_job *j = &qrwb_cxt.job;
	u64 first = U64_MAX, last = 0, t0 = ktime_get_ns();
	unsigned int t;

	j->nthreads = qrwb_cxt.nthreads;
	j->warm_ns = qrwb_cxt.cfg.warmup_ms * NSEC_PER_MSEC;
	j->dur_ns = qrwb_cxt.cfg.duration_ms * NSEC_PER_MSEC;
	atomic_set(&j->arrived, 0);
	j->go = 0;
	atomic_set(&j->remaining, qrwb_cxt.nthreads - 1);
	/* release: the job's fields above are seen by whoever sees gen */
	smp_store_release(&j->gen, j->gen + 1);
	qrwb_measure(&qrwb_cxt.workers[0]);
	/* acquire: pairs with the followers' release of remaining */
	while (atomic_read_acquire(&j->remaining)) {
		cond_resched();
		cpu_relax();
	}

	r->ops = 0;
	r->reads = 0;
	r->writes = 0;
	r->viol = 0;
	r->batch = j->batch;
	for (t = 0; t < qrwb_cxt.nthreads; t++) {
		struct qrwb_worker *w = &qrwb_cxt.workers[t];

		first = min(first, w->t_first);
		last = max(last, w->t_last);
		r->ops += w->ops;
		r->reads += w->reads;
		r->writes += w->writes;
		r->viol += w->viol;
		pt_ops[t] = w->ops;
		if (pt_reads)
			pt_reads[t] = w->reads;
		if (pt_writes)
			pt_writes[t] = w->writes;
	}
	r->ns = last - first;
	qrwb_pmu_collect(r);
	qrwb_cxt.sum_window_ns += r->ns;
	qrwb_cxt.sum_job_ns += ktime_get_ns() - t0;
	qrwb_cxt.sum_start_ns += j->t_start - j->warm_ns - t0;
	qrwb_cxt.sum_tail_ns += last - j->t_end;
	qrwb_cxt.sum_wake_ns += ktime_get_ns() - last;
	qrwb_cxt.njobs++;
}

/* ------------------------------------------------------------------ */
/* calibration */

static u64 qrwb_measure_clock_ps(void)
{
	u64 best = U64_MAX, t0, t1;
	unsigned int k, i;

	for (k = 0; k < 5; k++) {
		t0 = ktime_get_ns();
		for (i = 0; i < 1000; i++)
			(void)ktime_get_ns();
		t1 = ktime_get_ns();
		best = min(best, t1 - t0);	/* ns per 1000 reads = ps per read */
	}
	return max_t(u64, best, 1);
}

/* single-thread cost of one op (rwlock: iteration) of loop on ctx, in ps */
u64 qrwb_cost_ps(qrwb_loop_fn loop, void *ctx)
{
	unsigned long n = 64;
	u64 t0, t, best = U64_MAX;
	unsigned int k;

	for (;;) {
		t0 = ktime_get_ns();
		loop(ctx, n);
		t = ktime_get_ns() - t0;
		if (t >= QRWB_CAL_NS || n >= QRWB_MAX_BATCH)
			break;
		n *= 2;
	}
	for (k = 0; k < 3; k++) {
		t0 = ktime_get_ns();
		loop(ctx, n);
		best = min(best, ktime_get_ns() - t0);
		cond_resched();
	}
	return max_t(u64, div64_u64(best * 1000, n), 1);
}

unsigned long qrwb_batch_for(u64 cost_ps)
{
	u64 b = div64_u64(qrwb_cxt.clock_ps * QRWB_CLOCK_SHARE + cost_ps - 1, cost_ps);

	/* a power of two >= QRWB_MIN_BATCH: a multiple of the atomics unroll */
	BUILD_BUG_ON(QRWB_MIN_BATCH % QRWB_UNROLL);
	b = clamp_t(u64, b, QRWB_MIN_BATCH, QRWB_MAX_BATCH);
	return roundup_pow_of_two((unsigned long)b);
}

int qrwb_alloc_rep(unsigned int nents, bool rw)
{
	size_t npt = (size_t)nents * qrwb_cxt.nthreads;

	qrwb_cxt.nents = nents;
	qrwb_cxt.ents = kvcalloc(nents, sizeof(*qrwb_cxt.ents), GFP_KERNEL);
	qrwb_cxt.res = kvcalloc(nents, sizeof(*qrwb_cxt.res), GFP_KERNEL);
	qrwb_cxt.pt_ops = kvcalloc(npt, sizeof(u64), GFP_KERNEL);
	if (rw) {
		qrwb_cxt.pt_reads = kvcalloc(npt, sizeof(u64), GFP_KERNEL);
		qrwb_cxt.pt_writes = kvcalloc(npt, sizeof(u64), GFP_KERNEL);
	}
	if (!qrwb_cxt.ents || !qrwb_cxt.res || !qrwb_cxt.pt_ops ||
	    (rw && (!qrwb_cxt.pt_reads || !qrwb_cxt.pt_writes)))
		return -ENOMEM;
	return 0;
}

void qrwb_free_rep(void)
{
	kvfree(qrwb_cxt.ents);
	kvfree(qrwb_cxt.res);
	kvfree(qrwb_cxt.pt_ops);
	kvfree(qrwb_cxt.pt_reads);
	kvfree(qrwb_cxt.pt_writes);
	qrwb_cxt.ents = NULL;
	qrwb_cxt.res = NULL;
	qrwb_cxt.pt_ops = NULL;
	qrwb_cxt.pt_reads = NULL;
	qrwb_cxt.pt_writes = NULL;
}

/*
 * Rounds 0 .. warmup_reps + reps - 1: the first warmup_reps are run in full
 * and not emitted (the first ~100 ms of measuring in a boot ran slow,
 * docs/validity.md); *rep is the rep a measured round is emitted as.
 */
static bool qrwb_measured_round(unsigned int round, unsigned int *rep)
{
	*rep = round < qrwb_cxt.cfg.warmup_reps ? 0 : round - qrwb_cxt.cfg.warmup_reps;
	return round >= qrwb_cxt.cfg.warmup_reps;
}

/*
 * The one driver: rounds of every entry of the workload, each round in a
 * new shuffled order (paired blocks when the workload has them), one
 * measurement per entry; the results of a measured round are emitted as
 * that rep's records.
 */
static int qrwb_drive(const struct qrwb_workload *wl)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;
	unsigned int rep, round, k;
	bool measured;
	size_t off;
	int ret;

	ret = wl->setup();
	if (ret)
		return ret;
	for (round = 0; round < cfg->warmup_reps + cfg->reps; round++) {
		measured = qrwb_measured_round(round, &rep);
		wl->fill(qrwb_cxt.ents);
		if (wl->block)
			qrwb_shuffle_blocks(qrwb_cxt.ents, qrwb_cxt.nents,
					    wl->block);
		else
			qrwb_shuffle(qrwb_cxt.ents, qrwb_cxt.nents);
		for (k = 0; k < qrwb_cxt.nents; k++) {
			off = (size_t)k * qrwb_cxt.nthreads;
			wl->prep(&qrwb_cxt.ents[k], rep);
			qrwb_cxt.res[k].order = rep * qrwb_cxt.nents + k;
			qrwb_run_job(&qrwb_cxt.res[k], qrwb_cxt.pt_ops + off,
				     qrwb_cxt.pt_reads ? qrwb_cxt.pt_reads + off : NULL,
				     qrwb_cxt.pt_writes ? qrwb_cxt.pt_writes + off : NULL);
		}
		if (!measured)
			continue;
		ret = qrwb_emit_rep(rep);
		if (ret)
			return ret;
	}
	return 0;
}

/* in thread 0, on the first measuring CPU */
static int qrwb_run(void)
{
	if (!qrwb_cxt.clock_ps)
		qrwb_cxt.clock_ps = qrwb_measure_clock_ps();
	return qrwb_cxt.wl->drive ? qrwb_cxt.wl->drive() : qrwb_drive(qrwb_cxt.wl);
}

/*
 * The run of a measured workload (its run()), in module_init: the threads,
 * whose leader emits begin once they all have their counters, then runs
 * the workload on the one driver.
 */
int qrwb_run_threads(void)
{
	int ret;

	/* a program workload starts them again for every window */
	qrwb_cxt.quit = 0;
	qrwb_cxt.run_ret = 0;
	atomic_set(&qrwb_cxt.pmu_ready, 0);
	reinit_completion(&qrwb_cxt.run_done);
	ret = qrwb_start_workers();
	if (ret)
		return ret;
	wait_for_completion(&qrwb_cxt.run_done);
	qrwb_stop_workers();
	return qrwb_cxt.run_ret;
}

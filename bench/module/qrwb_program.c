// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench program workloads (the rows of qrwb_programs.def): user
 * programs built into the guest's init (guest/prog_<name>.c) drive kernel
 * rwlocks through system calls, and the module keeps the records.
 *
 * module_init (run()): the threads start once, emit the begin record and
 * calibrate the in-boot reference, the rwlock workload's loop of the
 * module's acqrel qrwlock copy 0 (with the no-lock harness for its
 * overhead: rw_ref_only), and stop; no counters (pmu_off), no end record.
 * Then the init writes one command per write() to /proc/qrwbench:
 *
 *   ref <rep> <measured>     one round of the reference (its entries in a
 *                            random order), its result record emitted
 *                            when measured is 1 (0: a warm-up round)
 *   res <rep> <ns> <batch> <rw> <ops> <reads> <writes> ...
 *                            a program window: one result record, impl
 *                            kernel, with the ops (and reads and writes
 *                            when rw is 1) of each of its threads
 *   end                      the end record; /proc/qrwbench is complete
 *
 * Every record names the workload= program as its op, so the reference
 * and the program share the comparison cell (analysis/perboot.py).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "qrwb_internal.h"

static struct {
	bool ready;		/* calibrated: commands may run windows */
	bool ended;		/* the end record is out */
	bool measured;		/* the ref command's round is emitted */
	unsigned int rep;
	unsigned int nres;	/* program results emitted */
} qrwb_prog;

static DEFINE_MUTEX(qrwb_prog_lock);

static int qrwb_params_program(void)
{
	int ret = qrwb_parse_measured();

	if (ret)
		return ret;
	qrwb_cxt.rw_ref_only = true;
	qrwb_cxt.pmu_off = true;
	return qrwb_parse_threads();
}

/* in the leader, each time the threads start */
static int qrwb_drive_program(void)
{
	const struct qrwb_workload *rw = &qrwb_wl_rwlock;
	struct qrwb_ent tmp;
	unsigned int k;
	size_t off;
	int ret;

	if (!qrwb_prog.ready) {
		ret = rw->setup();
		if (!ret)
			qrwb_prog.ready = true;
		return ret;
	}
	rw->fill(qrwb_cxt.ents);
	for (k = qrwb_cxt.nents; k > 1; k--) {	/* Fisher-Yates */
		unsigned int j = qrwb_splitmix(&qrwb_cxt.rng) % k;

		tmp = qrwb_cxt.ents[k - 1];
		qrwb_cxt.ents[k - 1] = qrwb_cxt.ents[j];
		qrwb_cxt.ents[j] = tmp;
	}
	for (k = 0; k < qrwb_cxt.nents; k++) {
		off = (size_t)k * qrwb_cxt.nthreads;
		rw->prep(&qrwb_cxt.ents[k], qrwb_prog.rep);
		qrwb_cxt.res[k].order = qrwb_cxt.next_order++;
		qrwb_run_job(&qrwb_cxt.res[k], qrwb_cxt.pt_ops + off,
			     qrwb_cxt.pt_reads + off, qrwb_cxt.pt_writes + off);
	}
	return qrwb_prog.measured ? qrwb_emit_rep(qrwb_prog.rep) : 0;
}

/* the reference: the module's copy, named by the program's op */
static bool qrwb_label_program(const struct qrwb_ent *e, struct qrwb_label *l)
{
	struct qrwb_label rl;

	if (!qrwb_wl_rwlock.label(e, &rl))
		return false;
	l->impl = rl.impl;
	l->op = qrwb_cxt.cfg.workload;
	l->variant = rl.variant;
	return true;
}

/* the no-lock harness: the reference's overhead_ps */
static bool qrwb_overhead_program(const struct qrwb_ent *e)
{
	return qrwb_wl_rwlock.overhead(e);
}

static void qrwb_emit_program(unsigned int k, const struct qrwb_res *r)
{
	size_t off = (size_t)k * qrwb_cxt.nthreads;

	qrwb_ku64("reads", r->reads);
	qrwb_ku64("writes", r->writes);
	qrwb_klist("per_thread_reads", qrwb_cxt.pt_reads + off);
	qrwb_klist("per_thread_writes", qrwb_cxt.pt_writes + off);
}

static int qrwb_next_u64(char **s, u64 *v)
{
	char *tok;

	do {
		tok = strsep(s, " ");
	} while (tok && !*tok);
	if (!tok)
		return -EINVAL;
	return kstrtou64(tok, 10, v);
}

/* "ref <rep> <measured>" */
static int qrwb_cmd_ref(char *args)
{
	u64 rep, measured;
	int ret;

	if (qrwb_next_u64(&args, &rep) || qrwb_next_u64(&args, &measured) ||
	    rep >= qrwb_cxt.cfg.reps || measured > 1 || (args && *args))
		return -EINVAL;
	qrwb_prog.rep = rep;
	qrwb_prog.measured = measured;
	ret = qrwb_run_threads();
	if (ret)
		pr_err("failed: reference window of rep %llu: error %d\n", rep, ret);
	return ret;
}

/* "res <rep> <ns> <batch> <rw> <ops> <reads> <writes> ..." */
static int qrwb_cmd_res(char *args)
{
	const unsigned int n = qrwb_cxt.nthreads;
	u64 rep, ns, batch, rw, ops = 0, reads = 0, writes = 0, *pt;
	unsigned int t;
	int ret = -EINVAL;

	if (qrwb_next_u64(&args, &rep) || qrwb_next_u64(&args, &ns) ||
	    qrwb_next_u64(&args, &batch) || qrwb_next_u64(&args, &rw) ||
	    rep >= qrwb_cxt.cfg.reps || !ns || !batch || rw > 1)
		return -EINVAL;
	pt = kcalloc(3 * n, sizeof(*pt), GFP_KERNEL);
	if (!pt)
		return -ENOMEM;
	for (t = 0; t < n; t++) {
		if (qrwb_next_u64(&args, &pt[t]) ||
		    qrwb_next_u64(&args, &pt[n + t]) ||
		    qrwb_next_u64(&args, &pt[2 * n + t]) ||
		    (rw && pt[n + t] + pt[2 * n + t] != pt[t]))
			goto out;
		ops += pt[t];
		reads += pt[n + t];
		writes += pt[2 * n + t];
	}
	if (args && *args)
		goto out;
	qrwb_rec_start("result");
	qrwb_kstr("workload", qrwb_cxt.cfg.workload);
	qrwb_kstr("impl", "kernel");
	qrwb_kstr("op", qrwb_cxt.cfg.workload);
	qrwb_kstr("variant", qrwb_kernel_variant());
	qrwb_ku64("copy", 0);
	qrwb_kstr("placement", "shared");
	qrwb_ku64("rep", rep);
	qrwb_ku64("order", qrwb_cxt.next_order++);
	qrwb_ku64("threads", n);
	qrwb_ku64("ns", ns);
	qrwb_ku64("ops", ops);
	qrwb_klist("per_thread_ops", pt);
	qrwb_ku64("overhead_ps", 0);
	qrwb_ku64("batch", batch);
	if (rw) {
		qrwb_ku64("reads", reads);
		qrwb_ku64("writes", writes);
		qrwb_klist("per_thread_reads", pt + n);
		qrwb_klist("per_thread_writes", pt + 2 * n);
	}
	ret = qrwb_rec_emit(true);
	if (!ret)
		qrwb_prog.nres++;
out:
	kfree(pt);
	return ret;
}

static int qrwb_command_program(char *line)
{
	char *cmd;
	int ret;

	mutex_lock(&qrwb_prog_lock);
	cmd = strsep(&line, " ");
	if (!qrwb_prog.ready || qrwb_prog.ended)
		ret = -EINVAL;
	else if (!strcmp(cmd, "ref"))
		ret = qrwb_cmd_ref(line);
	else if (!strcmp(cmd, "res"))
		ret = qrwb_cmd_res(line);
	else if (!strcmp(cmd, "end") && !line)
		ret = qrwb_emit_end();
	else
		ret = -EINVAL;
	if (!ret && !strcmp(cmd, "end")) {
		qrwb_prog.ended = true;
		pr_info("done: %u records, %zu bytes; %u program results, %llu reference measurements\n",
			qrwb_cxt.out.nrec + 1, qrwb_cxt.out.len, qrwb_prog.nres,
			qrwb_cxt.njobs);
	}
	mutex_unlock(&qrwb_prog_lock);
	return ret;
}

const struct qrwb_workload qrwb_wl_program = {
	.params		= qrwb_params_program,
	.run		= qrwb_run_threads,
	.cleanup	= NULL,		/* the run lasts until the machine stops */
	.overhead	= qrwb_overhead_program,
	.label		= qrwb_label_program,
	.emit		= qrwb_emit_program,
	.drive		= qrwb_drive_program,
	.command	= qrwb_command_program,
};

// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench workload=atomics: every selected op of qrwb_ops.def (all its
 * orderings) x copy {0, 1} x placement, measured by the one driver in
 * paired blocks (every ordering and copy of one op on one placement).
 * The loops themselves are generated per op, ordering and copy from
 * qrwb_ops.def (qrwb_loops.h). Its parameters: ops= (its check()),
 * placement=, copies=, aa_inject_mb=.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/math.h>
#include <linux/string.h>

#include "qrwb_internal.h"

/* the op table, once more: names for the records, in enum qrwb_op_id order */
const struct qrwb_op_desc qrwb_op_desc[QRWB_NOPS] = {
#define QRWB_OP(op, ord, stmt)	{ #op, #ord },
#include "qrwb_ops.def"
#undef QRWB_OP
};

/* the ops selected (ops=), their batches and paired blocks */
static bool qrwb_op_selected[QRWB_NOPS];
static unsigned long qrwb_op_batch[QRWB_NOPS];
/* each op id's block: the first op id of the same op name */
static unsigned int qrwb_op_block[QRWB_NOPS];

static void qrwb_init_op_blocks(void)
{
	unsigned int i, k;

	for (i = 0; i < QRWB_NOPS; i++)
		for (k = 0; k <= i; k++)
			if (!strcmp(qrwb_op_desc[k].name, qrwb_op_desc[i].name)) {
				qrwb_op_block[i] = k;
				break;
			}
}

/* its check(), in every measured run: ops=all or a comma-separated list of op names */
static int qrwb_parse_ops(void)
{
	/* static: 1 KiB more on the stack passed ppc64le's FRAME_WARN (1024) */
	static char names[1024], list[1025];
	char *p, *tok;
	size_t len = 0;
	unsigned int i;
	bool any;

	qrwb_init_op_blocks();
	for (i = 0; i < QRWB_NOPS; i++)
		qrwb_op_selected[i] = !strcmp(qrwb_cxt.cfg.ops, "all");
	/* the harness overhead is measured in every rep */
	qrwb_op_selected[QRWB_ID_empty_relaxed] = true;
	if (!strcmp(qrwb_cxt.cfg.ops, "all"))
		return 0;

	strscpy(list, qrwb_cxt.cfg.ops, sizeof(list));
	p = list;
	while ((tok = strsep(&p, ","))) {
		if (!*tok)
			continue;
		any = false;
		for (i = 0; i < QRWB_NOPS; i++) {
			if (!strcmp(tok, qrwb_op_desc[i].name)) {
				qrwb_op_selected[i] = true;
				any = true;
			}
		}
		if (any)
			continue;
		for (i = 0; i < QRWB_NOPS; i++) {
			if (qrwb_op_block[i] == i)	/* first of its name */
				len += scnprintf(names + len, sizeof(names) - len,
						 "%s%s", len ? " " : "",
						 qrwb_op_desc[i].name);
		}
		return qrwb_refuse("ops: unknown op '%.40s': valid is all or a comma-separated list of: %s",
				   tok, names);
	}
	return 0;
}

/* the driver's choices and ops= (check()), the injected barrier's copy, the threads */
static int qrwb_params_atomics(void)
{
	int ret;

	ret = qrwb_parse_measured();
	if (ret)
		return ret;
	if (qrwb_cxt.cfg.aa_inject_mb && qrwb_cxt.cfg.copies < 2)
		return qrwb_refuse("aa_inject_mb=1 with copies=%llu: the barrier is injected into copy 1: valid is copies=2 with it",
				   qrwb_cxt.cfg.copies);
	return qrwb_parse_threads();
}

/* atomics: one batch per op name (all orderings and copies share it) */
static void qrwb_calibrate_atomics(void)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;
	/* batch= given: rounded up, an atomics loop runs QRWB_UNROLL ops an iteration */
	const unsigned long given = cfg->batch ?
		roundup((unsigned long)cfg->batch, QRWB_UNROLL) : 0;
	static u64 cost[QRWB_NOPS];
	unsigned long bmin = ULONG_MAX, bmax = 0;
	unsigned int i, k;

	for (i = 0; i < QRWB_NOPS; i++) {
		if (qrwb_op_selected[i])
			cost[i] = qrwb_cost_ps(qrwb_loops_c0[i], &qrwb_cxt.slots[1]);
	}
	for (i = 0; i < QRWB_NOPS; i++) {
		u64 c = U64_MAX;

		if (!qrwb_op_selected[i])
			continue;
		for (k = 0; k < QRWB_NOPS; k++)
			if (qrwb_op_selected[k] &&
			    qrwb_op_block[k] == qrwb_op_block[i])
				c = min(c, cost[k]);
		qrwb_op_batch[i] = given ?: qrwb_batch_for(c);
		bmin = min(bmin, qrwb_op_batch[i]);
		bmax = max(bmax, qrwb_op_batch[i]);
	}
	pr_info("clock read %llu ps; empty op %llu ps; batch %lu..%lu%s\n",
		qrwb_cxt.clock_ps, cost[QRWB_ID_empty_relaxed], bmin, bmax,
		given ? " (batch= given, a multiple of the unroll)" : "");
}

/* entries: every selected op x copy {0, 1} (copies=) x the placements */
static int qrwb_setup_atomics(void)
{
	unsigned int nsel = 0, nplace, i;
	int ret;

	for (i = 0; i < QRWB_NOPS; i++)
		nsel += qrwb_op_selected[i];
	nplace = qrwb_cxt.placement == QRWB_PLACE_BOTH ? 2 : 1;
	ret = qrwb_alloc_rep(nsel * qrwb_cxt.cfg.copies * nplace, false);
	if (ret)
		return ret;
	qrwb_calibrate_atomics();
	return 0;
}

static void qrwb_fill_atomics(struct qrwb_ent *e)
{
	bool shared = qrwb_cxt.placement != QRWB_PLACE_PERCPU;
	bool percpu = qrwb_cxt.placement != QRWB_PLACE_SHARED;
	unsigned int i, copy, n = 0;

	for (i = 0; i < QRWB_NOPS; i++) {
		if (!qrwb_op_selected[i])
			continue;
		for (copy = 0; copy < qrwb_cxt.cfg.copies; copy++) {
			if (shared)
				e[n++] = (struct qrwb_ent){ i, copy, 0 };
			if (percpu)
				e[n++] = (struct qrwb_ent){ i, copy, 1 };
		}
	}
}

/* copy 1 runs the separately compiled twin, or the injected one */
static void qrwb_prep_atomics(const struct qrwb_ent *e, unsigned int rep)
{
	const qrwb_loop_fn *tbl = qrwb_loops_c0;
	unsigned int t;

	if (e->copy)
		tbl = qrwb_cxt.cfg.aa_inject_mb && e->id != QRWB_ID_empty_relaxed ?
		      qrwb_loops_c1mb : qrwb_loops_c1;
	qrwb_cxt.job.loop = tbl[e->id];
	qrwb_cxt.job.batch = qrwb_op_batch[e->id];
	/* slot 0: shared by all threads; slot 1 + t: thread t's own */
	for (t = 0; t < qrwb_cxt.nthreads; t++)
		qrwb_cxt.workers[t].ctx = e->percpu ? &qrwb_cxt.slots[1 + t] :
				       &qrwb_cxt.slots[0];
}

static bool qrwb_label_atomics(const struct qrwb_ent *e, struct qrwb_label *l)
{
	l->impl = "inline";
	l->op = qrwb_op_desc[e->id].name;
	l->variant = qrwb_op_desc[e->id].ord;
	return true;
}

/* the harness alone: empty, copy 0 (its result is also a record) */
static bool qrwb_overhead_atomics(const struct qrwb_ent *e)
{
	return e->id == QRWB_ID_empty_relaxed && e->copy == 0;
}

const struct qrwb_workload qrwb_wl_atomics = {
	.params		= qrwb_params_atomics,
	.check		= qrwb_parse_ops,
	.run		= qrwb_run_threads,
	.setup		= qrwb_setup_atomics,
	.fill		= qrwb_fill_atomics,
	.block		= qrwb_op_block,
	.prep		= qrwb_prep_atomics,
	.label		= qrwb_label_atomics,
	.overhead	= qrwb_overhead_atomics,
};

// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench workload=rwlock: the no-lock harness, the kernel's rwlock_t and
 * the module's qrwlock copies (as impl= selects), on cfg.nlocks locks,
 * measured by the one driver as one block per rep. The loops are one
 * template (qrwb_lock_tmpl.h), instantiated per lock implementation.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/overflow.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#include "qrwb_internal.h"

/* one row of qrwb_impls.def */
struct qrwb_impl_desc {
	const char *kind;	/* the record's impl: "kernel" or "module" */
	const char *ord;	/* module: the record's variant */
	const qrwb_loop_fn *loop;
	u8 kind_id;		/* QRWB_KIND_* */
	u8 copy;
	u8 mb;
};

static const struct qrwb_impl_desc qrwb_impls[QRWB_RW_N] = {
#define QRWB_IMPL(name, kind, ord, copy, mb)				\
	[QRWB_RW_##name] = { #kind, #ord, &qrwb_rwloop_##name,		\
			     QRWB_KIND_##kind, copy, mb },
#include "qrwb_impls.def"
#undef QRWB_IMPL
};

/* cfg.nlocks locks, one batch for every implementation */
static struct qrwb_lockbox *qrwb_boxes;
static unsigned long qrwb_rw_batch;

/*
 * The loop of row id: with aa_inject_mb=1 its injected twin's (the row
 * with mb 1 of the same kind, ordering and copy), if it has one.
 */
static qrwb_loop_fn qrwb_rwloop(unsigned int id)
{
	const struct qrwb_impl_desc *d = &qrwb_impls[id], *m;
	unsigned int i;

	for (i = 0; qrwb_cxt.cfg.aa_inject_mb && i < QRWB_RW_N; i++) {
		m = &qrwb_impls[i];
		if (m->mb && m->kind_id == d->kind_id && m->copy == d->copy &&
		    !strcmp(m->ord, d->ord))
			return *m->loop;
	}
	return *d->loop;
}

/*
 * impl= names a kind (or is all); the no-lock harness always runs. A
 * program workload (qrwb_program.c) measures only the in-boot reference:
 * the module's acqrel copy 0.
 */
static bool qrwb_rw_selected(const struct qrwb_impl_desc *d)
{
	if (d->kind_id == QRWB_KIND_none)
		return true;
	if (qrwb_cxt.rw_ref_only)
		return d->kind_id == QRWB_KIND_module && !d->copy &&
		       !strcmp(d->ord, "acqrel");
	return qrwb_cxt.impl == QRWB_IMPL_ALL || !strcmp(d->kind, qrwb_cxt.cfg.impl);
}

/*
 * The entries' ids: the selected rows in table order (the no-lock harness
 * first), but not the injected twins (mb 1: qrwb_rwloop()); their count.
 */
static unsigned int qrwb_rw_ids(unsigned int *ids)
{
	unsigned int i, nids = 0;

	for (i = 0; i < QRWB_RW_N; i++)
		if (!qrwb_impls[i].mb && qrwb_rw_selected(&qrwb_impls[i]))
			ids[nids++] = i;
	return nids;
}

static void qrwb_reset_locks(void)
{
	unsigned int i;

	for (i = 0; i < qrwb_cxt.cfg.nlocks; i++) {
		struct qrwb_lockbox *b = &qrwb_boxes[i];

		memset(b, 0, sizeof(*b));
		rwlock_init(&b->klock);
		b->mlock = (arch_rwlock_t)__ARCH_RW_LOCK_UNLOCKED;
		atomic_set(&b->chk.writers, 0);
		atomic_set(&b->chk.readers, 0);
	}
}

static unsigned int qrwb_wthresh(unsigned int t)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;

	if (cfg->nreaders || cfg->nwriters)
		return t < cfg->nwriters ? 100 : 0;
	return cfg->write_pct;
}

/* per-thread state; the seeds depend on (seed, rep, thread) only, so
 * every implementation in a rep sees the same read/write sequences
 */
static void qrwb_setup_rwctx(struct qrwb_rwctx *c, unsigned int t,
			     unsigned int rep, unsigned int nlocks)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;
	u64 st = qrwb_cxt.seed ^ ((u64)rep << 32) ^ ((u64)t << 16) ^ 0x5152574252ULL;

	memset(c, 0, sizeof(*c));
	c->box = &qrwb_boxes[t % nlocks];
	c->rng = qrwb_splitmix(&st) | 1;
	c->wthresh = qrwb_wthresh(t);
	c->cs_work = cfg->cs_work;
	c->think_work = cfg->think_work;
	c->cs_lines = cfg->cs_lines;
	c->check = cfg->check_exclusion;
}

static unsigned long qrwb_calibrate_rwlock(const unsigned int *ids,
					   unsigned int nids)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;
	struct qrwb_rwctx c;
	u64 cost = U64_MAX, none;
	unsigned long b;
	unsigned int i;

	qrwb_reset_locks();
	qrwb_setup_rwctx(&c, 0, 0, 1);
	none = qrwb_cost_ps(qrwb_rwloop(QRWB_RW_none), &c);
	for (i = 0; i < nids; i++) {
		if (qrwb_impls[ids[i]].kind_id == QRWB_KIND_none)
			continue;
		qrwb_setup_rwctx(&c, 0, 0, 1);
		cost = min(cost, qrwb_cost_ps(qrwb_rwloop(ids[i]), &c));
	}
	b = cfg->batch ? (unsigned long)cfg->batch : qrwb_batch_for(cost);
	pr_info("clock read %llu ps; uncontended iteration %llu ps, harness %llu ps; batch %lu%s\n",
		qrwb_cxt.clock_ps, cost, none, b, cfg->batch ? " (batch= given)" : "");
	return b;
}

static int qrwb_setup_rwlock(void)
{
	unsigned int ids[QRWB_RW_N], nids;
	int ret;

	nids = qrwb_rw_ids(ids);
	qrwb_boxes = vzalloc(array_size(qrwb_cxt.cfg.nlocks, sizeof(*qrwb_boxes)));
	if (!qrwb_boxes)
		return -ENOMEM;
	ret = qrwb_alloc_rep(nids, true);
	if (ret)
		return ret;
	qrwb_rw_batch = qrwb_calibrate_rwlock(ids, nids);
	return 0;
}

static void qrwb_fill_rwlock(struct qrwb_ent *e)
{
	unsigned int ids[QRWB_RW_N], nids, k;

	nids = qrwb_rw_ids(ids);
	for (k = 0; k < nids; k++) {
		e[k].id = ids[k];
		e[k].copy = qrwb_impls[ids[k]].copy;
		e[k].percpu = 0;
	}
}

/* fresh locks, and every thread's PRNG seeded for (seed, rep, thread) */
static void qrwb_prep_rwlock(const struct qrwb_ent *e, unsigned int rep)
{
	unsigned int t;

	qrwb_reset_locks();
	for (t = 0; t < qrwb_cxt.nthreads; t++) {
		qrwb_setup_rwctx(&qrwb_cxt.workers[t].rw, t, rep,
				 qrwb_cxt.cfg.nlocks);
		qrwb_cxt.workers[t].ctx = &qrwb_cxt.workers[t].rw;
	}
	qrwb_cxt.job.loop = qrwb_rwloop(e->id);
	qrwb_cxt.job.batch = qrwb_rw_batch;
}

static void qrwb_cleanup_rwlock(void)
{
	vfree(qrwb_boxes);
	qrwb_boxes = NULL;
}

/* the driver's choices (impl=: qrwb_rw_selected()), the threads */
static int qrwb_params_rwlock(void)
{
	int ret;

	ret = qrwb_parse_measured();
	if (ret)
		return ret;
	return qrwb_parse_threads();
}

/* the no-lock harness has no record of its own: it is the overhead */
static bool qrwb_label_rwlock(const struct qrwb_ent *e, struct qrwb_label *l)
{
	const struct qrwb_impl_desc *d = &qrwb_impls[e->id];

	if (d->kind_id == QRWB_KIND_none)
		return false;
	l->impl = d->kind;
	l->op = "rwlock";
	l->variant = d->kind_id == QRWB_KIND_kernel ? qrwb_kernel_variant() : d->ord;
	return true;
}

static bool qrwb_overhead_rwlock(const struct qrwb_ent *e)
{
	return qrwb_impls[e->id].kind_id == QRWB_KIND_none;
}

/* the fields of a result record that only rwlock results have */
static void qrwb_emit_rwlock(unsigned int k, const struct qrwb_res *r)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;
	size_t off = (size_t)k * qrwb_cxt.nthreads;

	qrwb_ku64("reads", r->reads);
	qrwb_ku64("writes", r->writes);
	qrwb_klist("per_thread_reads", qrwb_cxt.pt_reads + off);
	qrwb_klist("per_thread_writes", qrwb_cxt.pt_writes + off);
	qrwb_ku64("write_pct", cfg->write_pct);
	qrwb_ku64("nlocks", cfg->nlocks);
	qrwb_ku64("cs_work", cfg->cs_work);
	qrwb_ku64("think_work", cfg->think_work);
	qrwb_ku64("cs_lines", cfg->cs_lines);
	qrwb_ks64("violations", cfg->check_exclusion ? (s64)r->viol : -1);
}

const struct qrwb_workload qrwb_wl_rwlock = {
	.params		= qrwb_params_rwlock,
	.run		= qrwb_run_threads,
	.cleanup	= qrwb_cleanup_rwlock,
	.setup		= qrwb_setup_rwlock,
	.fill		= qrwb_fill_rwlock,
	.block		= NULL,		/* the entries of a rep are one block */
	.prep		= qrwb_prep_rwlock,
	.label		= qrwb_label_rwlock,
	.overhead	= qrwb_overhead_rwlock,
	.emit		= qrwb_emit_rwlock,
};

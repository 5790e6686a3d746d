// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench: the records (docs/records.md, schema 1), one JSON object per
 * line after the prefix "@@QRWB ", collected in one buffer that
 * /proc/qrwbench shows; the end record has the count and crc32 of the
 * others.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/crc32.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/utsname.h>
#include <linux/vmalloc.h>

#include "qrwb_internal.h"

const char *qrwb_kernel_variant(void)
{
	/* kernel/configs/variant-allfull.config: every atomic RMW fully ordered */
	if (IS_ENABLED(CONFIG_ATOMICS_FULLY_ORDERED))
		return "allfull";
	if (IS_ENABLED(CONFIG_QRWLOCK_ORDERING_FULL))
		return "full";
	if (IS_ENABLED(CONFIG_QRWLOCK_ORDERING_ACQREL))
		return "acqrel";
	if (IS_ENABLED(CONFIG_QRWLOCK_ORDERING_RELAXED))
		return "relaxed";
	return "unpatched";
}

void qrwb_rec_add(const char *fmt, ...)
{
	size_t room = sizeof(qrwb_cxt.rec) - qrwb_cxt.rec_len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(qrwb_cxt.rec + qrwb_cxt.rec_len, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room) {
		qrwb_cxt.rec_overflow = true;
		return;
	}
	qrwb_cxt.rec_len += n;
}

void qrwb_key(const char *key)
{
	qrwb_rec_add("%s\"%s\":", qrwb_cxt.rec_first ? "" : ",", key);
	qrwb_cxt.rec_first = false;
}

void qrwb_kstr(const char *key, const char *val)
{
	const char *p;

	qrwb_key(key);
	qrwb_rec_add("\"");
	for (p = val; *p; p++) {
		if (*p == '"' || *p == '\\')
			qrwb_rec_add("\\%c", *p);
		else if (*p >= 0x20 && *p < 0x7f)
			qrwb_rec_add("%c", *p);
		else
			qrwb_rec_add("?");
	}
	qrwb_rec_add("\"");
}

void qrwb_ku64(const char *key, u64 val)
{
	qrwb_key(key);
	qrwb_rec_add("%llu", val);
}

void qrwb_ks64(const char *key, s64 val)
{
	qrwb_key(key);
	qrwb_rec_add("%lld", val);
}

static void qrwb_kbool(const char *key, bool val)
{
	qrwb_key(key);
	qrwb_rec_add("%s", val ? "true" : "false");
}

/* key: [v[0], v[1], ...], one per thread */
void qrwb_klist(const char *key, const u64 *v)
{
	unsigned int t;

	qrwb_key(key);
	qrwb_rec_add("[");
	for (t = 0; t < qrwb_cxt.nthreads; t++)
		qrwb_rec_add("%s%llu", t ? "," : "", v[t]);
	qrwb_rec_add("]");
}

void qrwb_rec_start(const char *type)
{
	qrwb_cxt.rec_len = 0;
	qrwb_cxt.rec_first = true;
	qrwb_cxt.rec_overflow = false;
	qrwb_rec_add("{");
	qrwb_kstr("type", type);
	qrwb_ku64("schema", QRWB_SCHEMA);
}

static int qrwb_out_put(const char *s, size_t len)
{
	struct qrwb_out *out = &qrwb_cxt.out;

	if (out->len + len > out->cap) {
		size_t cap = max(2 * out->cap, out->len + len + 4096);
		char *nbuf = vmalloc(cap);

		if (!nbuf)
			return -ENOMEM;
		if (out->len)
			memcpy(nbuf, out->buf, out->len);
		vfree(out->buf);
		out->buf = nbuf;
		out->cap = cap;
	}
	memcpy(out->buf + out->len, s, len);
	out->len += len;
	return 0;
}

/* close the record, append "@@QRWB <json>\n" and fold it into the crc */
int qrwb_rec_emit(bool count)
{
	int ret;

	qrwb_rec_add("}");
	if (qrwb_cxt.rec_overflow || qrwb_cxt.rec_len > QRWB_MAX_JSON) {
		pr_err("record longer than %d bytes (threads=%u)\n",
		       QRWB_MAX_JSON, qrwb_cxt.nthreads);
		return -E2BIG;
	}
	ret = qrwb_out_put(QRWB_PREFIX, strlen(QRWB_PREFIX));
	if (!ret)
		ret = qrwb_out_put(qrwb_cxt.rec, qrwb_cxt.rec_len);
	if (!ret)
		ret = qrwb_out_put("\n", 1);
	if (ret)
		return ret;
	if (count) {
		qrwb_cxt.out.crc = crc32_le(qrwb_cxt.out.crc, qrwb_cxt.rec,
					    qrwb_cxt.rec_len);
		qrwb_cxt.out.crc = crc32_le(qrwb_cxt.out.crc, "\n", 1);
		qrwb_cxt.out.nrec++;
	}
	return 0;
}

/*
 * begin.pmu: {"cycles":bool,"instructions":bool[,"why":"..."]}, "why"
 * exactly when one is false: "<key>: <reason>" per false counter, joined
 * by "; ", or "cycles, instructions: <reason>" when both have the same.
 */
static void qrwb_emit_pmu(void)
{
	static char why[2 * QRWB_PMU_WHY + 64];
	const bool c = qrwb_cxt.pmu_on[QRWB_PMU_CYCLES];
	const bool i = qrwb_cxt.pmu_on[QRWB_PMU_INSNS];
	const char *wc = qrwb_cxt.pmu_why[QRWB_PMU_CYCLES];
	const char *wi = qrwb_cxt.pmu_why[QRWB_PMU_INSNS];

	qrwb_key("pmu");
	qrwb_cxt.rec_first = true;
	qrwb_rec_add("{");
	qrwb_kbool(qrwb_pmu_key[QRWB_PMU_CYCLES], c);
	qrwb_kbool(qrwb_pmu_key[QRWB_PMU_INSNS], i);
	if (!c && !i && !strcmp(wc, wi))
		snprintf(why, sizeof(why), "cycles, instructions: %s", wc);
	else if (!c && !i)
		snprintf(why, sizeof(why), "cycles: %s; instructions: %s", wc, wi);
	else if (!c)
		snprintf(why, sizeof(why), "cycles: %s", wc);
	else if (!i)
		snprintf(why, sizeof(why), "instructions: %s", wi);
	if (!c || !i)
		qrwb_kstr("why", why);
	qrwb_rec_add("}");
	qrwb_cxt.rec_first = false;
}

/* begin.params: every parameter of qrwb_params.def, as given or defaulted */
static void qrwb_emit_params(void)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;

	qrwb_key("params");
	qrwb_cxt.rec_first = true;
	qrwb_rec_add("{");
#define QRWB_SPARAM(n, def, desc)		qrwb_kstr(#n, cfg->n);
#define QRWB_UPARAM(n, def, lo, hi, desc)	qrwb_ku64(#n, cfg->n);
#include "qrwb_params.def"
#undef QRWB_SPARAM
#undef QRWB_UPARAM
	qrwb_rec_add("}");
	qrwb_cxt.rec_first = false;
}

int qrwb_emit_begin(void)
{
	qrwb_cxt.out.crc = ~0U;
	qrwb_rec_start("begin");
	qrwb_kstr("arch", QRWB_ARCH);
	qrwb_kstr("kernel_variant", qrwb_kernel_variant());
	qrwb_kstr("kernel_release", utsname()->release);
	qrwb_kstr("workload", qrwb_cxt.cfg.workload);
	qrwb_ku64("seed", qrwb_cxt.seed);
	qrwb_ku64("online_cpus", num_online_cpus());
	qrwb_ku64("threads", qrwb_cxt.nthreads);
	qrwb_emit_params();
	qrwb_emit_pmu();
	return qrwb_rec_emit(true);
}

int qrwb_emit_end(void)
{
	char crc[9];

	snprintf(crc, sizeof(crc), "%08x", qrwb_cxt.out.crc ^ ~0U);
	qrwb_rec_start("end");
	qrwb_ku64("records", qrwb_cxt.out.nrec);
	qrwb_kstr("crc32", crc);
	return qrwb_rec_emit(false);
}

/* harness cost per op and thread, in picoseconds */
static u64 qrwb_per_op_ps(const struct qrwb_res *r)
{
	if (!r || !r->ops)
		return 0;
	return div64_u64(r->ns * qrwb_cxt.nthreads * 1000, r->ops);
}

/*
 * The results of a rep: one record per entry the workload names (its
 * label()), its own fields (emit()) last; overhead_ps is the cost per op
 * of the rep's entry that measures the harness alone (overhead()) on the
 * same placement.
 */
int qrwb_emit_rep(unsigned int rep)
{
	const struct qrwb_workload *wl = qrwb_cxt.wl;
	const struct qrwb_res *ovh[2] = { NULL, NULL };
	struct qrwb_label l;
	unsigned int k, i;
	int ret;

	for (k = 0; k < qrwb_cxt.nents; k++) {
		const struct qrwb_ent *e = &qrwb_cxt.ents[k];

		if (wl->overhead && wl->overhead(e))
			ovh[e->percpu] = &qrwb_cxt.res[k];
	}

	for (k = 0; k < qrwb_cxt.nents; k++) {
		const struct qrwb_ent *e = &qrwb_cxt.ents[k];
		const struct qrwb_res *r = &qrwb_cxt.res[k];
		const u64 *pt = qrwb_cxt.pt_ops + (size_t)k * qrwb_cxt.nthreads;

		if (!wl->label(e, &l))
			continue;
		qrwb_rec_start("result");
		qrwb_kstr("workload", qrwb_cxt.cfg.workload);
		qrwb_kstr("impl", l.impl);
		qrwb_kstr("op", l.op);
		qrwb_kstr("variant", l.variant);
		qrwb_ku64("copy", e->copy);
		qrwb_kstr("placement", e->percpu ? "percpu" : "shared");
		qrwb_ku64("rep", rep);
		qrwb_ku64("order", r->order);
		qrwb_ku64("threads", qrwb_cxt.nthreads);
		qrwb_ku64("ns", r->ns);
		qrwb_ku64("ops", r->ops);
		qrwb_klist("per_thread_ops", pt);
		qrwb_ku64("overhead_ps", qrwb_per_op_ps(ovh[e->percpu]));
		qrwb_ku64("batch", r->batch);
		for (i = 0; i < QRWB_PMU_N; i++)
			if (r->pmu_ok & BIT(i))
				qrwb_ku64(qrwb_pmu_key[i], r->pmu[i]);
		if (wl->emit)
			wl->emit(k, r);
		ret = qrwb_rec_emit(true);
		if (ret)
			return ret;
		cond_resched();
	}
	return 0;
}

/* /proc/qrwbench: the records */
static ssize_t qrwb_proc_read(struct file *file, char __user *ubuf,
			      size_t count, loff_t *ppos)
{
	return simple_read_from_buffer(ubuf, count, ppos, qrwb_cxt.out.buf,
				       qrwb_cxt.out.len);
}

/* a program workload's commands (qrwb_program.c), one per write() */
static ssize_t qrwb_proc_write(struct file *file, const char __user *ubuf,
			       size_t count, loff_t *ppos)
{
	char *line;
	int ret;

	if (!qrwb_cxt.wl->command)
		return -EPERM;
	if (count > QRWB_MAX_JSON)
		return -E2BIG;
	line = memdup_user_nul(ubuf, count);
	if (IS_ERR(line))
		return PTR_ERR(line);
	ret = qrwb_cxt.wl->command(strim(line));
	kfree(line);
	return ret ? ret : count;
}

const struct proc_ops qrwb_proc_ops = {
	.proc_read	= qrwb_proc_read,
	.proc_write	= qrwb_proc_write,
	.proc_lseek	= default_llseek,
};

// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench: the module parameters (qrwb_params.def), parsed and checked
 * once, in module_init. Every parameter is a string, so that any bad value
 * is refused with one "qrwbench: refused: <reason>" line and -EINVAL.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/string.h>
#include <linux/timekeeping.h>

#include "qrwb_internal.h"

#define QRWB_SPARAM(n, def, desc)					\
	static char *qrwb_arg_##n;					\
	module_param_named(n, qrwb_arg_##n, charp, 0444);		\
	MODULE_PARM_DESC(n, desc " (default " def ")");
#define QRWB_UPARAM(n, def, lo, hi, desc)				\
	static char *qrwb_arg_##n;					\
	module_param_named(n, qrwb_arg_##n, charp, 0444);		\
	MODULE_PARM_DESC(n, desc " (default " #def ", valid " #lo ".." #hi ")");
#include "qrwb_params.def"
#undef QRWB_SPARAM
#undef QRWB_UPARAM

/* the parameter table, for parsing and for the begin record */
static const struct qrwb_pdesc {
	const char *name;
	char **arg;
	const char *sdef;	/* string parameter: its default */
	u64 def, lo, hi;	/* integer parameter */
	const char **sval;
	u64 *uval;
} qrwb_pdescs[] = {
#define QRWB_SPARAM(n, def, desc)					\
	{ #n, &qrwb_arg_##n, def, 0, 0, 0, &qrwb_cxt.cfg.n, NULL },
#define QRWB_UPARAM(n, def, lo, hi, desc)				\
	{ #n, &qrwb_arg_##n, NULL, def, lo, hi, NULL, &qrwb_cxt.cfg.n },
#include "qrwb_params.def"
#undef QRWB_SPARAM
#undef QRWB_UPARAM
};

/* begin.params: every parameter, as given or defaulted */
void qrwb_emit_params(void)
{
	unsigned int i;

	qrwb_key("params");
	qrwb_cxt.rec_first = true;
	qrwb_rec_add("{");
	for (i = 0; i < ARRAY_SIZE(qrwb_pdescs); i++) {
		const struct qrwb_pdesc *d = &qrwb_pdescs[i];

		if (d->sval)
			qrwb_kstr(d->name, *d->sval);
		else
			qrwb_ku64(d->name, *d->uval);
	}
	qrwb_rec_add("}");
	qrwb_cxt.rec_first = false;
}

static int qrwb_refuse(const char *fmt, ...) __printf(1, 2);
static int qrwb_refuse(const char *fmt, ...)
{
	struct va_format vaf;
	va_list ap;

	va_start(ap, fmt);
	vaf.fmt = fmt;
	vaf.va = &ap;
	pr_err("refused: %pV\n", &vaf);
	va_end(ap);
	return -EINVAL;
}

static bool qrwb_str_ok(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == ','))
			return false;
	return true;
}

static int qrwb_parse_one(const struct qrwb_pdesc *d)
{
	const char *arg = *d->arg;

	if (d->sval) {
		*d->sval = (arg && *arg) ? arg : d->sdef;
		if (!qrwb_str_ok(*d->sval) || strlen(*d->sval) > 1024)
			return qrwb_refuse("%s: only a-z, 0-9, '_' and ',' are valid, up to 1024 of them",
					   d->name);
		return 0;
	}
	if (!arg || !*arg) {
		*d->uval = d->def;
		return 0;
	}
	if (kstrtoull(arg, 0, d->uval))
		return qrwb_refuse("%s='%.40s' is not an unsigned integer: valid is %llu..%llu",
				   d->name, arg, d->lo, d->hi);
	if (*d->uval < d->lo || *d->uval > d->hi)
		return qrwb_refuse("%s=%llu is out of range: valid is %llu..%llu",
				   d->name, *d->uval, d->lo, d->hi);
	return 0;
}

/* the index of val in valid[] (an enum's order), or a refusal */
static int qrwb_parse_oneof(const char *name, const char *val,
			    const char * const *valid, unsigned int n,
			    const char *valid_text)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!strcmp(val, valid[i]))
			return i;
	return qrwb_refuse("%s='%.40s' is unknown: valid is %s", name, val,
			   valid_text);
}

/* ops=all or a comma-separated list of op names */
static int qrwb_parse_ops(void)
{
	static char names[1024];
	char list[1025], *p, *tok;
	size_t len = 0;
	unsigned int i;
	bool any;

	qrwb_init_op_blocks();
	for (i = 0; i < QRWB_NOPS; i++)
		qrwb_cxt.op_selected[i] = !strcmp(qrwb_cxt.cfg.ops, "all");
	/* the harness overhead is measured in every rep */
	qrwb_cxt.op_selected[QRWB_ID_empty_relaxed] = true;
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
				qrwb_cxt.op_selected[i] = true;
				any = true;
			}
		}
		if (any)
			continue;
		for (i = 0; i < QRWB_NOPS; i++) {
			if (qrwb_cxt.op_block[i] == i)	/* first of its name */
				len += scnprintf(names + len, sizeof(names) - len,
						 "%s%s", len ? " " : "",
						 qrwb_op_desc[i].name);
		}
		return qrwb_refuse("ops: unknown op '%.40s': valid is all or a comma-separated list of: %s",
				   tok, names);
	}
	return 0;
}

/*
 * The harness needs a fine clock: x86 TCG guests without a TSC
 * calibration reference fall back to jiffies (4 ms steps). The
 * resolution is the smallest of several steps: one step alone can be
 * stretched by an interrupt or by the host descheduling the vCPU
 * thread (seen in 2 of 156 boots as 104 us and 4.9 ms "steps" on
 * the TSC).
 */
#define QRWB_CLOCK_TRIES 32

static int qrwb_check_clock(void)
{
	u64 t0, t, step = U64_MAX;
	unsigned int i;

	for (i = 0; i < QRWB_CLOCK_TRIES; i++) {
		t0 = ktime_get_ns();
		do {
			t = ktime_get_ns();
		} while (t == t0);
		step = min(step, t - t0);
	}
	if (step > 100 * NSEC_PER_USEC)
		return qrwb_refuse("the clock advances in steps of %llu us (clocksource jiffies?): valid is under 100 us; x86 TCG guests need tsc_early_khz=<host TSC kHz> tsc=reliable",
				   div_u64(step, NSEC_PER_USEC));
	return 0;
}

/* the threads: threads=, or nreaders + nwriters, or every online CPU */
static int qrwb_parse_threads(unsigned int online)
{
	const struct qrwb_cfg *cfg = &qrwb_cxt.cfg;

	if (cfg->threads > online)
		return qrwb_refuse("threads=%llu exceeds the %u online CPUs: valid is 0 (all online CPUs) or 1..%u",
				   cfg->threads, online, online);
	if (cfg->nreaders || cfg->nwriters) {
		u64 sum = cfg->nreaders + cfg->nwriters;

		if (sum > online)
			return qrwb_refuse("nreaders=%llu + nwriters=%llu exceeds the %u online CPUs: valid is a sum of 1..%u",
					   cfg->nreaders, cfg->nwriters, online, online);
		if (cfg->threads && cfg->threads != sum)
			return qrwb_refuse("threads=%llu differs from nreaders=%llu + nwriters=%llu: valid is threads=0 or threads=%llu",
					   cfg->threads, cfg->nreaders, cfg->nwriters, sum);
		qrwb_cxt.nthreads = sum;
	} else {
		qrwb_cxt.nthreads = cfg->threads ? cfg->threads : online;
	}
	if (qrwb_cxt.nthreads > QRWB_MAX_THREADS)
		return qrwb_refuse("threads=%u exceeds the module's limit: valid is 1..%u",
				   qrwb_cxt.nthreads, QRWB_MAX_THREADS);
	return 0;
}

int qrwb_parse(void)
{
	/* in the order of enum qrwb_workload_id, _place_id, _impl_id */
	static const char * const workloads[] = { "atomics", "rwlock", "hang", "litmus" };
	static const char * const placements[] = { "both", "shared", "percpu" };
	static const char * const impls[] = { "all", "kernel", "module" };
	unsigned int online = num_online_cpus();
	unsigned int i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(qrwb_pdescs); i++) {
		ret = qrwb_parse_one(&qrwb_pdescs[i]);
		if (ret)
			return ret;
	}

	ret = qrwb_parse_oneof("workload", qrwb_cxt.cfg.workload, workloads, 4,
			       "atomics, rwlock, litmus or hang");
	if (ret < 0)
		return ret;
	qrwb_cxt.workload = ret;
	if (qrwb_cxt.workload == QRWB_W_HANG)
		return 0;
	if (qrwb_cxt.workload == QRWB_W_LITMUS) {
		if (online < 2)
			return qrwb_refuse("workload=litmus needs two CPUs, the guest has %u online: valid is a guest with 2 or more vCPUs",
					   online);
		qrwb_cxt.nthreads = 2;
		return 0;
	}
	ret = qrwb_parse_oneof("placement", qrwb_cxt.cfg.placement, placements, 3,
			       "both, shared or percpu");
	if (ret < 0)
		return ret;
	qrwb_cxt.placement = ret;
	ret = qrwb_parse_oneof("impl", qrwb_cxt.cfg.impl, impls, 3,
			       "all, kernel or module");
	if (ret < 0)
		return ret;
	qrwb_cxt.impl = ret;
	ret = qrwb_parse_ops();
	if (ret)
		return ret;
	if (qrwb_cxt.workload == QRWB_W_ATOMICS && qrwb_cxt.cfg.aa_inject_mb &&
	    qrwb_cxt.cfg.copies < 2)
		return qrwb_refuse("aa_inject_mb=1 with copies=%llu: the barrier is injected into copy 1: valid is copies=2 with it",
				   qrwb_cxt.cfg.copies);
	ret = qrwb_parse_threads(online);
	if (ret)
		return ret;
	return qrwb_check_clock();
}

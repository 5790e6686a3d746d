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

/* the parameter table, for parsing (the begin record: qrwb_rec.c) */
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

/* one "qrwbench: refused: <reason>" line; -EINVAL */
int qrwb_refuse(const char *fmt, ...)
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
static int qrwb_parse_nthreads(unsigned int online)
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

/*
 * The workloads, one row of qrwb_workloads.def each, as refscale's
 * scale_ops[], and their names: workload= picks one (qrwb_parse()).
 */
static const struct qrwb_workload *const qrwb_workloads[] = {
#define QRWB_WORKLOAD(name)	(&qrwb_wl_##name),
#include "qrwb_workloads.def"
#undef QRWB_WORKLOAD
#define QRWB_PROGRAM(name)	(&qrwb_wl_program),
#include "qrwb_programs.def"
#undef QRWB_PROGRAM
};

static const char * const qrwb_workload_names[] = {
#define QRWB_WORKLOAD(name)	#name,
#include "qrwb_workloads.def"
#undef QRWB_WORKLOAD
#define QRWB_PROGRAM(name)	#name,
#include "qrwb_programs.def"
#undef QRWB_PROGRAM
};

/*
 * A measured workload's (its params()): the choices of the one driver,
 * placement= and impl=, then every workload's check(): a value given to
 * a measured run is checked, whichever workload it measures.
 */
int qrwb_parse_measured(void)
{
	/* in the order of enum qrwb_place_id, _impl_id */
	static const char * const placements[] = { "both", "shared", "percpu" };
	static const char * const impls[] = { "all", "kernel", "module" };
	unsigned int i;
	int ret;

	ret = qrwb_parse_oneof("placement", qrwb_cxt.cfg.placement, placements,
			       ARRAY_SIZE(placements), "both, shared or percpu");
	if (ret < 0)
		return ret;
	qrwb_cxt.placement = ret;
	ret = qrwb_parse_oneof("impl", qrwb_cxt.cfg.impl, impls, ARRAY_SIZE(impls),
			       "all, kernel or module");
	if (ret < 0)
		return ret;
	qrwb_cxt.impl = ret;
	for (i = 0; i < ARRAY_SIZE(qrwb_workloads); i++) {
		ret = qrwb_workloads[i]->check ? qrwb_workloads[i]->check() : 0;
		if (ret)
			return ret;
	}
	return 0;
}

/* a measured workload's, last: its threads and the clock they read */
int qrwb_parse_threads(void)
{
	int ret = qrwb_parse_nthreads(num_online_cpus());

	return ret ?: qrwb_check_clock();
}

/* workload=: a row of the table, or a refusal that names every row */
static int qrwb_parse_workload(void)
{
	const unsigned int n = ARRAY_SIZE(qrwb_workload_names);
	static char valid[256];
	size_t len = 0;
	unsigned int i;
	int ret;

	for (i = 0; i < n; i++)
		len += scnprintf(valid + len, sizeof(valid) - len, "%s%s",
				 !i ? "" : i + 1 < n ? ", " : " or ",
				 qrwb_workload_names[i]);
	ret = qrwb_parse_oneof("workload", qrwb_cxt.cfg.workload,
			       qrwb_workload_names, n, valid);
	if (ret < 0)
		return ret;
	qrwb_cxt.wl = qrwb_workloads[ret];
	return 0;
}

/* every parameter's range, then workload= and the workload's params() */
int qrwb_parse(void)
{
	unsigned int i;
	int ret;

	for (i = 0; i < ARRAY_SIZE(qrwb_pdescs); i++) {
		ret = qrwb_parse_one(&qrwb_pdescs[i]);
		if (ret)
			return ret;
	}
	ret = qrwb_parse_workload();
	if (ret)
		return ret;
	return qrwb_cxt.wl->params();
}

// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench: what memory ordering costs in queued rwlocks and atomics.
 *
 * The benchmark runs synchronously in module_init and leaves its records
 * (docs/records.md, schema 1) in /proc/qrwbench for the guest's init to
 * copy to the console. Bad parameters make module_init fail with -EINVAL
 * after one "qrwbench: refused: <reason>" line.
 *
 * Harness: one kthread per measuring CPU, bound, released together by a
 * start barrier; every thread calls the measured loop through a function
 * pointer once per batch and reads the clock only between batches. The
 * loops themselves are generated per op, ordering and copy from
 * qrwb_ops.def (qrwb_loops.h) and per lock implementation from one
 * template (qrwb_lock_tmpl.h).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/crc32.h>
#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/perf_event.h>
#include <linux/proc_fs.h>
#include <linux/random.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/uaccess.h>
#include <linux/utsname.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>

#include "qrwbench.h"

#define QRWB_SCHEMA		1
#define QRWB_PREFIX		"@@QRWB "
#define QRWB_MAX_JSON		4096
#define QRWB_MAX_THREADS	NR_CPUS

/* batch calibration: clock reads cost at most 1/QRWB_CLOCK_SHARE of a batch */
#define QRWB_CLOCK_SHARE	200
#define QRWB_MIN_BATCH		16UL
#define QRWB_MAX_BATCH		((unsigned long)SZ_16M)
#define QRWB_CAL_NS		(200 * NSEC_PER_USEC)

/* PMU probe: loop iterations that any counting event must see */
#define QRWB_PMU_PROBE_OPS	BIT(16)
#define QRWB_PMU_WHY		160

/* ------------------------------------------------------------------ */
/* parameters: every one a string, parsed and checked in qrwb_parse() */

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

static struct qrwb_cfg {
#define QRWB_SPARAM(n, def, desc)		const char *n;
#define QRWB_UPARAM(n, def, lo, hi, desc)	u64 n;
#include "qrwb_params.def"
#undef QRWB_SPARAM
#undef QRWB_UPARAM
} cfg;

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
	{ #n, &qrwb_arg_##n, def, 0, 0, 0, &cfg.n, NULL },
#define QRWB_UPARAM(n, def, lo, hi, desc)				\
	{ #n, &qrwb_arg_##n, NULL, def, lo, hi, NULL, &cfg.n },
#include "qrwb_params.def"
#undef QRWB_SPARAM
#undef QRWB_UPARAM
};

/* ------------------------------------------------------------------ */
/* the op table, once more: names for the records */

/* in enum qrwb_op_id order: both come from the same rows */
static const char * const qrwb_op_name[QRWB_NOPS] = {
#define QRWB_OP(op, ord, stmt)	#op,
#include "qrwb_ops.def"
#undef QRWB_OP
};

static const char * const qrwb_op_ord[QRWB_NOPS] = {
#define QRWB_OP(op, ord, stmt)	#ord,
#include "qrwb_ops.def"
#undef QRWB_OP
};

static const char * const qrwb_rw_variant[QRWB_RW_N] = {
	[QRWB_RW_FULL_C0]	= "full",
	[QRWB_RW_ACQREL_C0]	= "acqrel",
	[QRWB_RW_ACQREL_C1]	= "acqrel",
	[QRWB_RW_RELAXED_C0]	= "relaxed",
};

static const char *qrwb_kernel_variant(void)
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

#if defined(CONFIG_X86_64)
#define QRWB_ARCH	"x86_64"
#elif defined(CONFIG_ARM64)
#define QRWB_ARCH	"arm64"
#else
#error "qrwbench supports x86_64 and arm64"
#endif

enum { QRWB_W_ATOMICS, QRWB_W_RWLOCK, QRWB_W_HANG, QRWB_W_LITMUS };

/* in-kernel perf counters, one set per measuring kthread */
enum { QRWB_PMU_CYCLES, QRWB_PMU_INSNS, QRWB_PMU_N };

static const char * const qrwb_pmu_key[QRWB_PMU_N] = {
	[QRWB_PMU_CYCLES]	= "cycles",
	[QRWB_PMU_INSNS]	= "instructions",
};

static const u64 qrwb_pmu_config[QRWB_PMU_N] = {
	[QRWB_PMU_CYCLES]	= PERF_COUNT_HW_CPU_CYCLES,
	[QRWB_PMU_INSNS]	= PERF_COUNT_HW_INSTRUCTIONS,
};

/* one read of a thread's counters */
struct qrwb_pmu_snap {
	u64 val[QRWB_PMU_N];
	u64 enabled[QRWB_PMU_N];
	u64 running[QRWB_PMU_N];
};

/* ------------------------------------------------------------------ */
/* run state */

/* one entry of a rep's shuffled list */
struct qrwb_ent {
	u16 id;		/* atomics: enum qrwb_op_id; rwlock: enum qrwb_rw_id */
	u8 copy;
	u8 percpu;
};

/* what one measurement produced */
struct qrwb_res {
	u64 ns;
	u64 ops;
	u64 reads;
	u64 writes;
	u64 viol;
	unsigned long batch;
	unsigned int order;
	u64 pmu[QRWB_PMU_N];	/* summed over the threads */
	unsigned int pmu_ok;	/* bit i: pmu[i] counted in every thread */
};

struct qrwb_job {
	qrwb_loop_fn aloop;	/* atomics, or NULL */
	qrwb_rwloop_fn rloop;	/* rwlock */
	unsigned long batch;
	bool percpu;
	unsigned int nthreads;
	u64 warm_ns;
	u64 dur_ns;
	atomic_t arrived ____cacheline_aligned;
	int go;
	u64 t_start;
	u64 t_end;
	atomic_t remaining ____cacheline_aligned;
	unsigned long gen ____cacheline_aligned;
};

struct qrwb_worker {
	struct task_struct *task;
	unsigned int idx;
	unsigned long seen;
	struct qrwb_rwctx rw;
	u64 ops;
	u64 reads;
	u64 writes;
	u64 viol;
	u64 t_first;
	u64 t_last;
	/* counters of this thread (NULL: none), read around each window */
	struct perf_event *pev[QRWB_PMU_N];
	char pmu_why[QRWB_PMU_N][QRWB_PMU_WHY];	/* why pev[i] is NULL */
	struct qrwb_pmu_snap pmu0, pmu1;
	u64 pmu_read_ns[2];	/* sums: reading them before, after the windows */
} __aligned(QRWB_LINE);

static struct qrwb_job qrwb_job;
static struct qrwb_worker qrwb_workers[QRWB_MAX_THREADS];
static DECLARE_COMPLETION(qrwb_run_done);
static int qrwb_run_ret;
static int qrwb_quit;
static unsigned int qrwb_nthreads;
static int qrwb_workload;
static u64 qrwb_seed;
static u64 qrwb_rng;		/* splitmix64 state of the run order */
static u64 qrwb_clock_ps;	/* cost of one ktime_get_ns() */
static u64 qrwb_sum_window_ns, qrwb_sum_job_ns, qrwb_njobs;
static u64 qrwb_sum_start_ns, qrwb_sum_tail_ns, qrwb_sum_wake_ns;

/*
 * PMU state, fixed before the first job: counter i is read and reported
 * only when every thread has it (qrwb_pmu_on[i]); otherwise
 * qrwb_pmu_why[i] says why not (the begin record's pmu.why).
 */
static atomic_t qrwb_pmu_ready;
static bool qrwb_pmu_on[QRWB_PMU_N];
static bool qrwb_pmu_any;
static char qrwb_pmu_why[QRWB_PMU_N][QRWB_PMU_WHY];
static u64 qrwb_pmu_read_ns;
/* results whose counter i was omitted, and the first reason */
static u64 qrwb_pmu_omitted[QRWB_PMU_N];
static char qrwb_pmu_omit_why[QRWB_PMU_N][QRWB_PMU_WHY];

/* slot 0: shared by all threads; slot 1 + t: thread t's own */
static struct qrwb_slot qrwb_slots[QRWB_MAX_THREADS + 1];
static struct qrwb_lockbox *qrwb_boxes;
static bool qrwb_op_selected[QRWB_NOPS];
static unsigned long qrwb_op_batch[QRWB_NOPS];

/* per rep: entries, results, per-thread counts [entry][thread] */
static struct qrwb_ent *qrwb_ents;
static struct qrwb_res *qrwb_res;
static u64 *qrwb_pt_ops, *qrwb_pt_reads, *qrwb_pt_writes;
static unsigned int qrwb_nents;

/* output: the records, as /proc/qrwbench shows them */
static struct {
	char *buf;
	size_t len;
	size_t cap;
	u32 crc;
	unsigned int nrec;
} qrwb_out;

static char qrwb_rec[QRWB_MAX_JSON + 256];
static size_t qrwb_rec_len;
static bool qrwb_rec_first;
static bool qrwb_rec_overflow;

static struct proc_dir_entry *qrwb_proc;

/* ------------------------------------------------------------------ */
/* PRNG for the run order and per-thread seeds */

static u64 qrwb_splitmix(u64 *state)
{
	u64 z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in 0..n-1 */
static u32 qrwb_below(u32 n)
{
	return (u32)(((qrwb_splitmix(&qrwb_rng) >> 32) * n) >> 32);
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
/* records */

static void qrwb_rec_add(const char *fmt, ...) __printf(1, 2);
static void qrwb_rec_add(const char *fmt, ...)
{
	size_t room = sizeof(qrwb_rec) - qrwb_rec_len;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(qrwb_rec + qrwb_rec_len, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room) {
		qrwb_rec_overflow = true;
		return;
	}
	qrwb_rec_len += n;
}

static void qrwb_key(const char *key)
{
	qrwb_rec_add("%s\"%s\":", qrwb_rec_first ? "" : ",", key);
	qrwb_rec_first = false;
}

static void qrwb_kstr(const char *key, const char *val)
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

static void qrwb_ku64(const char *key, u64 val)
{
	qrwb_key(key);
	qrwb_rec_add("%llu", val);
}

static void qrwb_ks64(const char *key, s64 val)
{
	qrwb_key(key);
	qrwb_rec_add("%lld", val);
}

static void qrwb_kbool(const char *key, bool val)
{
	qrwb_key(key);
	qrwb_rec_add("%s", val ? "true" : "false");
}

/* key: [v[0*stride], v[1*stride], ...], one per thread */
static void qrwb_klist(const char *key, const u64 *v)
{
	unsigned int t;

	qrwb_key(key);
	qrwb_rec_add("[");
	for (t = 0; t < qrwb_nthreads; t++)
		qrwb_rec_add("%s%llu", t ? "," : "", v[t]);
	qrwb_rec_add("]");
}

static void qrwb_rec_start(const char *type)
{
	qrwb_rec_len = 0;
	qrwb_rec_first = true;
	qrwb_rec_overflow = false;
	qrwb_rec_add("{");
	qrwb_kstr("type", type);
	qrwb_ku64("schema", QRWB_SCHEMA);
}

static int qrwb_out_put(const char *s, size_t len)
{
	if (qrwb_out.len + len > qrwb_out.cap) {
		size_t cap = max(2 * qrwb_out.cap, qrwb_out.len + len + 4096);
		char *nbuf = vmalloc(cap);

		if (!nbuf)
			return -ENOMEM;
		if (qrwb_out.len)
			memcpy(nbuf, qrwb_out.buf, qrwb_out.len);
		vfree(qrwb_out.buf);
		qrwb_out.buf = nbuf;
		qrwb_out.cap = cap;
	}
	memcpy(qrwb_out.buf + qrwb_out.len, s, len);
	qrwb_out.len += len;
	return 0;
}

/* close the record, append "@@QRWB <json>\n" and fold it into the crc */
static int qrwb_rec_emit(bool count)
{
	int ret;

	qrwb_rec_add("}");
	if (qrwb_rec_overflow || qrwb_rec_len > QRWB_MAX_JSON) {
		pr_err("record longer than %d bytes (threads=%u)\n",
		       QRWB_MAX_JSON, qrwb_nthreads);
		return -E2BIG;
	}
	ret = qrwb_out_put(QRWB_PREFIX, strlen(QRWB_PREFIX));
	if (!ret)
		ret = qrwb_out_put(qrwb_rec, qrwb_rec_len);
	if (!ret)
		ret = qrwb_out_put("\n", 1);
	if (ret)
		return ret;
	if (count) {
		qrwb_out.crc = crc32_le(qrwb_out.crc, qrwb_rec, qrwb_rec_len);
		qrwb_out.crc = crc32_le(qrwb_out.crc, "\n", 1);
		qrwb_out.nrec++;
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
	const bool c = qrwb_pmu_on[QRWB_PMU_CYCLES];
	const bool i = qrwb_pmu_on[QRWB_PMU_INSNS];
	const char *wc = qrwb_pmu_why[QRWB_PMU_CYCLES];
	const char *wi = qrwb_pmu_why[QRWB_PMU_INSNS];

	qrwb_key("pmu");
	qrwb_rec_first = true;
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
	qrwb_rec_first = false;
}

static int qrwb_emit_begin(void)
{
	unsigned int i;

	qrwb_out.crc = ~0U;
	qrwb_rec_start("begin");
	qrwb_kstr("arch", QRWB_ARCH);
	qrwb_kstr("kernel_variant", qrwb_kernel_variant());
	qrwb_kstr("kernel_release", utsname()->release);
	qrwb_kstr("workload", cfg.workload);
	qrwb_ku64("seed", qrwb_seed);
	qrwb_ku64("online_cpus", num_online_cpus());
	qrwb_ku64("threads", qrwb_nthreads);
	qrwb_key("params");
	qrwb_rec_first = true;
	qrwb_rec_add("{");
	for (i = 0; i < ARRAY_SIZE(qrwb_pdescs); i++) {
		const struct qrwb_pdesc *d = &qrwb_pdescs[i];

		if (d->sval)
			qrwb_kstr(d->name, *d->sval);
		else
			qrwb_ku64(d->name, *d->uval);
	}
	qrwb_rec_add("}");
	qrwb_rec_first = false;
	qrwb_emit_pmu();
	return qrwb_rec_emit(true);
}

static int qrwb_emit_end(void)
{
	char crc[9];

	snprintf(crc, sizeof(crc), "%08x", qrwb_out.crc ^ ~0U);
	qrwb_rec_start("end");
	qrwb_ku64("records", qrwb_out.nrec);
	qrwb_kstr("crc32", crc);
	return qrwb_rec_emit(false);
}

/* harness cost per op and thread, in picoseconds */
static u64 qrwb_per_op_ps(const struct qrwb_res *r)
{
	if (!r || !r->ops)
		return 0;
	return div64_u64(r->ns * qrwb_nthreads * 1000, r->ops);
}

static int qrwb_emit_rep(unsigned int rep)
{
	const struct qrwb_res *ovh[2] = { NULL, NULL };
	unsigned int k, i;
	int ret;

	/* overhead: the rep's empty (atomics, copy 0, same placement) or no-lock harness */
	for (k = 0; k < qrwb_nents; k++) {
		const struct qrwb_ent *e = &qrwb_ents[k];

		if (qrwb_workload == QRWB_W_ATOMICS &&
		    e->id == QRWB_ID_empty_relaxed && e->copy == 0)
			ovh[e->percpu] = &qrwb_res[k];
		if (qrwb_workload == QRWB_W_RWLOCK && e->id == QRWB_RW_NONE)
			ovh[0] = &qrwb_res[k];
	}

	for (k = 0; k < qrwb_nents; k++) {
		const struct qrwb_ent *e = &qrwb_ents[k];
		const struct qrwb_res *r = &qrwb_res[k];
		const u64 *pt = qrwb_pt_ops + (size_t)k * qrwb_nthreads;

		if (qrwb_workload == QRWB_W_RWLOCK && e->id == QRWB_RW_NONE)
			continue;
		qrwb_rec_start("result");
		qrwb_kstr("workload", cfg.workload);
		if (qrwb_workload == QRWB_W_ATOMICS) {
			qrwb_kstr("impl", "inline");
			qrwb_kstr("op", qrwb_op_name[e->id]);
			qrwb_kstr("variant", qrwb_op_ord[e->id]);
		} else {
			qrwb_kstr("impl", e->id == QRWB_RW_KERNEL ? "kernel" : "module");
			qrwb_kstr("op", "rwlock");
			qrwb_kstr("variant", e->id == QRWB_RW_KERNEL ?
				  qrwb_kernel_variant() : qrwb_rw_variant[e->id]);
		}
		qrwb_ku64("copy", e->copy);
		qrwb_kstr("placement", e->percpu ? "percpu" : "shared");
		qrwb_ku64("rep", rep);
		qrwb_ku64("order", r->order);
		qrwb_ku64("threads", qrwb_nthreads);
		qrwb_ku64("ns", r->ns);
		qrwb_ku64("ops", r->ops);
		qrwb_klist("per_thread_ops", pt);
		qrwb_ku64("overhead_ps", qrwb_per_op_ps(ovh[e->percpu]));
		qrwb_ku64("batch", r->batch);
		for (i = 0; i < QRWB_PMU_N; i++)
			if (r->pmu_ok & BIT(i))
				qrwb_ku64(qrwb_pmu_key[i], r->pmu[i]);
		if (qrwb_workload == QRWB_W_RWLOCK) {
			qrwb_ku64("reads", r->reads);
			qrwb_ku64("writes", r->writes);
			qrwb_klist("per_thread_reads",
				   qrwb_pt_reads + (size_t)k * qrwb_nthreads);
			qrwb_klist("per_thread_writes",
				   qrwb_pt_writes + (size_t)k * qrwb_nthreads);
			qrwb_ku64("write_pct", cfg.write_pct);
			qrwb_ku64("nlocks", cfg.nlocks);
			qrwb_ku64("cs_work", cfg.cs_work);
			qrwb_ku64("think_work", cfg.think_work);
			qrwb_ku64("cs_lines", cfg.cs_lines);
			qrwb_ks64("violations", cfg.check_exclusion ? (s64)r->viol : -1);
		}
		ret = qrwb_rec_emit(true);
		if (ret)
			return ret;
		cond_resched();
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* in-kernel perf counters */

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
 * Read this thread's counters; at the start of a window (rev) the cycle
 * counter last, at its end first, so that it counts the least of the
 * other counter's read. Only counters every thread has, unless probing.
 */
static void qrwb_pmu_read(struct qrwb_worker *w, struct qrwb_pmu_snap *snap,
			  bool rev, bool probe)
{
	unsigned int k, i;

	for (k = 0; k < QRWB_PMU_N; k++) {
		i = rev ? QRWB_PMU_N - 1 - k : k;
		if (w->pev[i] && (probe || qrwb_pmu_on[i]))
			snap->val[i] = perf_event_read_value(w->pev[i],
							     &snap->enabled[i],
							     &snap->running[i]);
	}
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
static void qrwb_pmu_open(struct qrwb_worker *w)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_HARDWARE,
		.size = sizeof(attr),
	};
	struct qrwb_pmu_snap *a = &w->pmu0, *b = &w->pmu1;
	struct perf_event *ev;
	const char *name;
	unsigned int i;

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
	qrwb_loops_c0[QRWB_ID_empty_relaxed](&qrwb_slots[1 + w->idx],
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

static void qrwb_pmu_close(struct qrwb_worker *w)
{
	unsigned int i;

	for (i = 0; i < QRWB_PMU_N; i++) {
		if (w->pev[i])
			perf_event_release_kernel(w->pev[i]);
		w->pev[i] = NULL;
	}
}

/* leader, once every thread has opened its counters: what is reported */
static void qrwb_pmu_settle(void)
{
	struct qrwb_worker *w0 = &qrwb_workers[0];
	const struct qrwb_worker *bad;
	unsigned int i, t, nok;
	u64 t0, best = U64_MAX;

	for (i = 0; i < QRWB_PMU_N; i++) {
		bad = NULL;
		nok = 0;
		for (t = 0; t < qrwb_nthreads; t++) {
			if (qrwb_workers[t].pev[i])
				nok++;
			else if (!bad)
				bad = &qrwb_workers[t];
		}
		qrwb_pmu_on[i] = !bad;
		qrwb_pmu_any |= !bad;
		if (bad && nok)
			snprintf(qrwb_pmu_why[i], sizeof(qrwb_pmu_why[i]),
				 "thread %u: %s", bad->idx, bad->pmu_why[i]);
		else if (bad)
			strscpy(qrwb_pmu_why[i], bad->pmu_why[i],
				sizeof(qrwb_pmu_why[i]));
	}
	if (!qrwb_pmu_any) {
		pr_info("pmu: no counters: %s\n",
			qrwb_pmu_why[QRWB_PMU_CYCLES]);
		return;
	}
	/* what one read of the counters costs (outside every window) */
	for (t = 0; t < 5; t++) {
		t0 = ktime_get_ns();
		qrwb_pmu_read(w0, &w0->pmu0, false, false);
		best = min(best, ktime_get_ns() - t0);
	}
	qrwb_pmu_read_ns = best;
	pr_info("pmu: cycles %s, instructions %s; one read of the counters %llu ns\n",
		qrwb_pmu_on[QRWB_PMU_CYCLES] ? "counted" : "not counted",
		qrwb_pmu_on[QRWB_PMU_INSNS] ? "counted" : "not counted",
		qrwb_pmu_read_ns);
}

/* leader, after a job: sum the threads' deltas where every thread counted */
static void qrwb_pmu_collect(struct qrwb_res *r)
{
	const struct qrwb_pmu_snap *a, *b;
	u64 en, run, d;
	unsigned int i, t;
	bool ok;

	r->pmu_ok = 0;
	for (i = 0; i < QRWB_PMU_N; i++) {
		r->pmu[i] = 0;
		if (!qrwb_pmu_on[i])
			continue;
		ok = true;
		for (t = 0; t < qrwb_nthreads && ok; t++) {
			a = &qrwb_workers[t].pmu0;
			b = &qrwb_workers[t].pmu1;
			en = b->enabled[i] - a->enabled[i];
			run = b->running[i] - a->running[i];
			d = b->val[i] - a->val[i];
			if (!run || run != en) {
				ok = false;
				if (!qrwb_pmu_omitted[i])
					snprintf(qrwb_pmu_omit_why[i], QRWB_PMU_WHY,
						 "order %u thread %u: running %llu of %llu ns enabled (multiplexed)",
						 r->order, t, run, en);
			} else if (!d && r->ops) {
				ok = false;
				if (!qrwb_pmu_omitted[i])
					snprintf(qrwb_pmu_omit_why[i], QRWB_PMU_WHY,
						 "order %u thread %u: counted 0", r->order, t);
			}
			r->pmu[i] += d;
		}
		if (ok)
			r->pmu_ok |= BIT(i);
		else
			qrwb_pmu_omitted[i]++;
	}
}

/* ------------------------------------------------------------------ */
/* workers and the measurement */

static void qrwb_measure(struct qrwb_worker *w)
{
	struct qrwb_job *j = &qrwb_job;
	struct qrwb_slot *s = j->percpu ? &qrwb_slots[1 + w->idx] : &qrwb_slots[0];
	const qrwb_loop_fn aloop = j->aloop;
	const qrwb_rwloop_fn rloop = j->rloop;
	const unsigned long batch = j->batch;
	struct qrwb_rwctx *c = &w->rw;
	u64 now, t, t_start, t_end, ops = 0;
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

	/* warm-up: at least one batch */
	do {
		if (aloop)
			aloop(s, batch);
		else
			rloop(c, batch);
		now = ktime_get_ns();
	} while (now < t_start);

	/* the counters are read outside the window: before t_first, after t_last */
	if (qrwb_pmu_any) {
		t = now;
		qrwb_pmu_read(w, &w->pmu0, true, false);
		now = ktime_get_ns();
		w->pmu_read_ns[0] += now - t;
	}
	w->t_first = now;
	r0 = c->reads;
	w0 = c->writes;
	do {
		if (aloop)
			aloop(s, batch);
		else
			rloop(c, batch);
		ops += batch;
		now = ktime_get_ns();
	} while (now < t_end);
	w->t_last = now;
	if (qrwb_pmu_any) {
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
		while (atomic_read_acquire(&qrwb_pmu_ready) != qrwb_nthreads - 1) {
			cond_resched();
			cpu_relax();
		}
		qrwb_pmu_settle();
		qrwb_run_ret = qrwb_emit_begin();
		if (!qrwb_run_ret)
			qrwb_run_ret = qrwb_run();
		qrwb_pmu_close(w);
		/* release: the followers stop spinning */
		smp_store_release(&qrwb_quit, 1);
		complete(&qrwb_run_done);
	} else {
		/* release: the counters above, for the leader's settle */
		atomic_inc_return_release(&qrwb_pmu_ready);
		for (;;) {
			/* acquire: the job's fields are read after gen */
			gen = smp_load_acquire(&qrwb_job.gen);
			if (gen != w->seen) {
				w->seen = gen;
				qrwb_measure(w);
				/* release: the results above, for the leader */
				atomic_dec_return_release(&qrwb_job.remaining);
				continue;
			}
			/* acquire: pairs with the leader's release of quit */
			if (smp_load_acquire(&qrwb_quit))
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

	for (t = 0; t < qrwb_nthreads; t++) {
		if (qrwb_workers[t].task)
			kthread_stop(qrwb_workers[t].task);
		qrwb_workers[t].task = NULL;
	}
}

static int qrwb_start_workers(void)
{
	unsigned int t = 0, cpu;
	struct task_struct *task;

	for_each_online_cpu(cpu) {
		struct qrwb_worker *w;

		if (t == qrwb_nthreads)
			break;
		w = &qrwb_workers[t];
		w->idx = t;
		w->seen = 0;
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
		wake_up_process(qrwb_workers[t].task);
	return 0;
}

/* leader: run the job on all workers; sums into r and the per-thread arrays */
static void qrwb_run_job(struct qrwb_res *r, u64 *pt_ops, u64 *pt_reads,
			 u64 *pt_writes)
{
	struct qrwb_job *j = &qrwb_job;
	u64 first = U64_MAX, last = 0, t0 = ktime_get_ns();
	unsigned int t;

	j->nthreads = qrwb_nthreads;
	j->warm_ns = cfg.warmup_ms * NSEC_PER_MSEC;
	j->dur_ns = cfg.duration_ms * NSEC_PER_MSEC;
	atomic_set(&j->arrived, 0);
	j->go = 0;
	atomic_set(&j->remaining, qrwb_nthreads - 1);
	/* release: the job's fields above are seen by whoever sees gen */
	smp_store_release(&j->gen, j->gen + 1);
	qrwb_measure(&qrwb_workers[0]);
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
	for (t = 0; t < qrwb_nthreads; t++) {
		struct qrwb_worker *w = &qrwb_workers[t];

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
	qrwb_sum_window_ns += r->ns;
	qrwb_sum_job_ns += ktime_get_ns() - t0;
	qrwb_sum_start_ns += j->t_start - j->warm_ns - t0;
	qrwb_sum_tail_ns += last - j->t_end;
	qrwb_sum_wake_ns += ktime_get_ns() - last;
	qrwb_njobs++;
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

/* single-thread cost of one op in ps; aloop on s, or rloop on c */
static u64 qrwb_cost_ps(qrwb_loop_fn aloop, struct qrwb_slot *s,
			qrwb_rwloop_fn rloop, struct qrwb_rwctx *c)
{
	unsigned long n = 64;
	u64 t0, t, best = U64_MAX;
	unsigned int k;

	for (;;) {
		t0 = ktime_get_ns();
		if (aloop)
			aloop(s, n);
		else
			rloop(c, n);
		t = ktime_get_ns() - t0;
		if (t >= QRWB_CAL_NS || n >= QRWB_MAX_BATCH)
			break;
		n *= 2;
	}
	for (k = 0; k < 3; k++) {
		t0 = ktime_get_ns();
		if (aloop)
			aloop(s, n);
		else
			rloop(c, n);
		best = min(best, ktime_get_ns() - t0);
		cond_resched();
	}
	return max_t(u64, div64_u64(best * 1000, n), 1);
}

static unsigned long qrwb_batch_for(u64 cost_ps)
{
	u64 b = div64_u64(qrwb_clock_ps * QRWB_CLOCK_SHARE + cost_ps - 1, cost_ps);

	/* a power of two >= QRWB_MIN_BATCH: a multiple of the atomics unroll */
	BUILD_BUG_ON(QRWB_MIN_BATCH % QRWB_UNROLL);
	b = clamp_t(u64, b, QRWB_MIN_BATCH, QRWB_MAX_BATCH);
	return roundup_pow_of_two((unsigned long)b);
}

/* each op id's block: the first op id of the same op name (set by qrwb_parse_ops) */
static unsigned int qrwb_op_block[QRWB_NOPS];

static void qrwb_init_op_blocks(void)
{
	unsigned int i, k;

	for (i = 0; i < QRWB_NOPS; i++)
		for (k = 0; k <= i; k++)
			if (!strcmp(qrwb_op_name[k], qrwb_op_name[i])) {
				qrwb_op_block[i] = k;
				break;
			}
}

/* atomics: one batch per op name (all orderings and copies share it) */
static void qrwb_calibrate_atomics(void)
{
	static u64 cost[QRWB_NOPS];
	unsigned long bmin = ULONG_MAX, bmax = 0;
	unsigned int i, k;

	for (i = 0; i < QRWB_NOPS; i++) {
		if (qrwb_op_selected[i])
			cost[i] = qrwb_cost_ps(qrwb_loops_c0[i], &qrwb_slots[1],
					       NULL, NULL);
	}
	for (i = 0; i < QRWB_NOPS; i++) {
		u64 c = U64_MAX;

		if (!qrwb_op_selected[i])
			continue;
		if (cfg.batch) {
			/* an atomics loop runs QRWB_UNROLL ops per iteration */
			qrwb_op_batch[i] = roundup((unsigned long)cfg.batch, QRWB_UNROLL);
			continue;
		}
		for (k = 0; k < QRWB_NOPS; k++)
			if (qrwb_op_selected[k] &&
			    qrwb_op_block[k] == qrwb_op_block[i])
				c = min(c, cost[k]);
		qrwb_op_batch[i] = qrwb_batch_for(c);
		bmin = min(bmin, qrwb_op_batch[i]);
		bmax = max(bmax, qrwb_op_batch[i]);
	}
	if (cfg.batch)
		bmin = bmax = roundup((unsigned long)cfg.batch, QRWB_UNROLL);
	pr_info("clock read %llu ps; empty op %llu ps; batch %lu..%lu%s\n",
		qrwb_clock_ps, cost[QRWB_ID_empty_relaxed], bmin, bmax,
		cfg.batch ? " (batch= given, a multiple of the unroll)" : "");
}

/* ------------------------------------------------------------------ */
/* atomics workload */

static int qrwb_alloc_rep(unsigned int nents, bool rw)
{
	size_t npt = (size_t)nents * qrwb_nthreads;

	qrwb_nents = nents;
	qrwb_ents = kvcalloc(nents, sizeof(*qrwb_ents), GFP_KERNEL);
	qrwb_res = kvcalloc(nents, sizeof(*qrwb_res), GFP_KERNEL);
	qrwb_pt_ops = kvcalloc(npt, sizeof(u64), GFP_KERNEL);
	if (rw) {
		qrwb_pt_reads = kvcalloc(npt, sizeof(u64), GFP_KERNEL);
		qrwb_pt_writes = kvcalloc(npt, sizeof(u64), GFP_KERNEL);
	}
	if (!qrwb_ents || !qrwb_res || !qrwb_pt_ops ||
	    (rw && (!qrwb_pt_reads || !qrwb_pt_writes)))
		return -ENOMEM;
	return 0;
}

static void qrwb_free_rep(void)
{
	kvfree(qrwb_ents);
	kvfree(qrwb_res);
	kvfree(qrwb_pt_ops);
	kvfree(qrwb_pt_reads);
	kvfree(qrwb_pt_writes);
	qrwb_ents = NULL;
	qrwb_res = NULL;
	qrwb_pt_ops = NULL;
	qrwb_pt_reads = NULL;
	qrwb_pt_writes = NULL;
}

static void qrwb_fill_atomics(void)
{
	bool shared = strcmp(cfg.placement, "percpu") != 0;
	bool percpu = strcmp(cfg.placement, "shared") != 0;
	unsigned int i, copy, n = 0;

	for (i = 0; i < QRWB_NOPS; i++) {
		if (!qrwb_op_selected[i])
			continue;
		for (copy = 0; copy < 2; copy++) {
			if (shared)
				qrwb_ents[n++] = (struct qrwb_ent){ i, copy, 0 };
			if (percpu)
				qrwb_ents[n++] = (struct qrwb_ent){ i, copy, 1 };
		}
	}
}

/*
 * Rounds 0 .. warmup_reps + reps - 1: the first warmup_reps are run in full
 * and not emitted (the first ~100 ms of measuring in a boot ran slow,
 * docs/validity.md); *rep is the rep a measured round is emitted as.
 */
static bool qrwb_measured_round(unsigned int round, unsigned int *rep)
{
	*rep = round < cfg.warmup_reps ? 0 : round - cfg.warmup_reps;
	return round >= cfg.warmup_reps;
}

static int qrwb_run_atomics(void)
{
	unsigned int nsel = 0, nplace, i, rep, round, k;
	bool measured;
	int ret;

	for (i = 0; i < QRWB_NOPS; i++)
		nsel += qrwb_op_selected[i];
	nplace = strcmp(cfg.placement, "both") ? 1 : 2;
	ret = qrwb_alloc_rep(nsel * 2 * nplace, false);
	if (ret)
		return ret;

	qrwb_calibrate_atomics();
	for (round = 0; round < cfg.warmup_reps + cfg.reps; round++) {
		measured = qrwb_measured_round(round, &rep);
		qrwb_fill_atomics();
		qrwb_shuffle_blocks(qrwb_ents, qrwb_nents, qrwb_op_block);
		for (k = 0; k < qrwb_nents; k++) {
			const struct qrwb_ent *e = &qrwb_ents[k];
			const qrwb_loop_fn *tbl = qrwb_loops_c0;

			if (e->copy)
				tbl = cfg.aa_inject_mb && e->id != QRWB_ID_empty_relaxed ?
				      qrwb_loops_c1mb : qrwb_loops_c1;
			qrwb_job.aloop = tbl[e->id];
			qrwb_job.rloop = NULL;
			qrwb_job.batch = qrwb_op_batch[e->id];
			qrwb_job.percpu = e->percpu;
			qrwb_res[k].order = rep * qrwb_nents + k;
			qrwb_run_job(&qrwb_res[k],
				     qrwb_pt_ops + (size_t)k * qrwb_nthreads,
				     NULL, NULL);
		}
		if (!measured)
			continue;
		ret = qrwb_emit_rep(rep);
		if (ret)
			return ret;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* rwlock workload */

static qrwb_rwloop_fn qrwb_rwloop(unsigned int id)
{
	switch (id) {
	case QRWB_RW_NONE:
		return qrwb_rwloop_none;
	case QRWB_RW_KERNEL:
		return qrwb_rwloop_kernel;
	case QRWB_RW_FULL_C0:
		return qrwb_rwloop_full_c0;
	case QRWB_RW_ACQREL_C0:
		return qrwb_rwloop_acqrel_c0;
	case QRWB_RW_ACQREL_C1:
		return cfg.aa_inject_mb ? qrwb_rwloop_acqrel_c1mb :
		       qrwb_rwloop_acqrel_c1;
	default:
		return qrwb_rwloop_relaxed_c0;
	}
}

static void qrwb_reset_locks(void)
{
	unsigned int i;

	for (i = 0; i < cfg.nlocks; i++) {
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
	if (cfg.nreaders || cfg.nwriters)
		return t < cfg.nwriters ? 100 : 0;
	return cfg.write_pct;
}

/* per-thread state; the seeds depend on (seed, rep, thread) only, so
 * every implementation in a rep sees the same read/write sequences
 */
static void qrwb_setup_rwctx(struct qrwb_rwctx *c, unsigned int t,
			     unsigned int rep, unsigned int nlocks)
{
	u64 st = qrwb_seed ^ ((u64)rep << 32) ^ ((u64)t << 16) ^ 0x5152574252ULL;

	memset(c, 0, sizeof(*c));
	c->box = &qrwb_boxes[t % nlocks];
	c->rng = qrwb_splitmix(&st) | 1;
	c->wthresh = qrwb_wthresh(t);
	c->cs_work = cfg.cs_work;
	c->think_work = cfg.think_work;
	c->cs_lines = cfg.cs_lines;
	c->check = cfg.check_exclusion;
}

static unsigned long qrwb_calibrate_rwlock(const unsigned int *ids,
					   unsigned int nids)
{
	struct qrwb_rwctx c;
	u64 cost = U64_MAX, none;
	unsigned long b;
	unsigned int i;

	qrwb_reset_locks();
	qrwb_setup_rwctx(&c, 0, 0, 1);
	none = qrwb_cost_ps(NULL, NULL, qrwb_rwloop(QRWB_RW_NONE), &c);
	for (i = 0; i < nids; i++) {
		if (ids[i] == QRWB_RW_NONE)
			continue;
		qrwb_setup_rwctx(&c, 0, 0, 1);
		cost = min(cost, qrwb_cost_ps(NULL, NULL, qrwb_rwloop(ids[i]), &c));
	}
	b = cfg.batch ? (unsigned long)cfg.batch : qrwb_batch_for(cost);
	pr_info("clock read %llu ps; uncontended iteration %llu ps, harness %llu ps; batch %lu%s\n",
		qrwb_clock_ps, cost, none, b, cfg.batch ? " (batch= given)" : "");
	return b;
}

static int qrwb_run_rwlock(void)
{
	unsigned int ids[QRWB_RW_N], nids = 0, rep, round, k, t;
	unsigned long batch;
	bool measured;
	int ret;

	ids[nids++] = QRWB_RW_NONE;
	if (strcmp(cfg.impl, "module"))
		ids[nids++] = QRWB_RW_KERNEL;
	if (strcmp(cfg.impl, "kernel")) {
		ids[nids++] = QRWB_RW_FULL_C0;
		ids[nids++] = QRWB_RW_ACQREL_C0;
		ids[nids++] = QRWB_RW_ACQREL_C1;
		ids[nids++] = QRWB_RW_RELAXED_C0;
	}

	qrwb_boxes = vzalloc(array_size(cfg.nlocks, sizeof(*qrwb_boxes)));
	if (!qrwb_boxes)
		return -ENOMEM;
	ret = qrwb_alloc_rep(nids, true);
	if (ret)
		return ret;

	batch = qrwb_calibrate_rwlock(ids, nids);
	for (round = 0; round < cfg.warmup_reps + cfg.reps; round++) {
		measured = qrwb_measured_round(round, &rep);
		for (k = 0; k < nids; k++) {
			qrwb_ents[k].id = ids[k];
			qrwb_ents[k].copy = ids[k] == QRWB_RW_ACQREL_C1;
			qrwb_ents[k].percpu = 0;
		}
		qrwb_shuffle(qrwb_ents, qrwb_nents);
		for (k = 0; k < qrwb_nents; k++) {
			size_t off = (size_t)k * qrwb_nthreads;

			qrwb_reset_locks();
			for (t = 0; t < qrwb_nthreads; t++)
				qrwb_setup_rwctx(&qrwb_workers[t].rw, t, rep,
						 cfg.nlocks);
			qrwb_job.aloop = NULL;
			qrwb_job.rloop = qrwb_rwloop(qrwb_ents[k].id);
			qrwb_job.batch = batch;
			qrwb_job.percpu = false;
			qrwb_res[k].order = rep * qrwb_nents + k;
			qrwb_run_job(&qrwb_res[k], qrwb_pt_ops + off,
				     qrwb_pt_reads + off, qrwb_pt_writes + off);
		}
		if (!measured)
			continue;
		ret = qrwb_emit_rep(rep);
		if (ret)
			return ret;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* parameters */

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
			return qrwb_refuse(
				"%s: only a-z, 0-9, '_' and ',' are valid, up to 1024 of them",
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
		qrwb_op_selected[i] = !strcmp(cfg.ops, "all");
	/* the harness overhead is measured in every rep */
	qrwb_op_selected[QRWB_ID_empty_relaxed] = true;
	if (!strcmp(cfg.ops, "all"))
		return 0;

	strscpy(list, cfg.ops, sizeof(list));
	p = list;
	while ((tok = strsep(&p, ","))) {
		if (!*tok)
			continue;
		any = false;
		for (i = 0; i < QRWB_NOPS; i++) {
			if (!strcmp(tok, qrwb_op_name[i])) {
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
						 qrwb_op_name[i]);
		}
		return qrwb_refuse(
			"ops: unknown op '%.40s': valid is all or a comma-separated list of: %s",
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
		return qrwb_refuse(
			"the clock advances in steps of %llu us (clocksource jiffies?): valid is under 100 us; x86 TCG guests need tsc_early_khz=<host TSC kHz> tsc=reliable",
			div_u64(step, NSEC_PER_USEC));
	return 0;
}

static int qrwb_parse(void)
{
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

	ret = qrwb_parse_oneof("workload", cfg.workload, workloads, 4,
			       "atomics, rwlock, litmus or hang");
	if (ret < 0)
		return ret;
	qrwb_workload = ret;
	if (qrwb_workload == QRWB_W_HANG)
		return 0;
	if (qrwb_workload == QRWB_W_LITMUS) {
		if (online < 2)
			return qrwb_refuse(
				"workload=litmus needs two CPUs, the guest has %u online: valid is a guest with 2 or more vCPUs",
				online);
		qrwb_nthreads = 2;
		return 0;
	}
	ret = qrwb_parse_oneof("placement", cfg.placement, placements, 3,
			       "both, shared or percpu");
	if (ret < 0)
		return ret;
	ret = qrwb_parse_oneof("impl", cfg.impl, impls, 3,
			       "all, kernel or module");
	if (ret < 0)
		return ret;
	ret = qrwb_parse_ops();
	if (ret)
		return ret;

	if (cfg.threads > online)
		return qrwb_refuse(
			"threads=%llu exceeds the %u online CPUs: valid is 0 (all online CPUs) or 1..%u",
			cfg.threads, online, online);
	if (cfg.nreaders || cfg.nwriters) {
		u64 sum = cfg.nreaders + cfg.nwriters;

		if (sum > online)
			return qrwb_refuse(
				"nreaders=%llu + nwriters=%llu exceeds the %u online CPUs: valid is a sum of 1..%u",
				cfg.nreaders, cfg.nwriters, online, online);
		if (cfg.threads && cfg.threads != sum)
			return qrwb_refuse(
				"threads=%llu differs from nreaders=%llu + nwriters=%llu: valid is threads=0 or threads=%llu",
				cfg.threads, cfg.nreaders, cfg.nwriters, sum);
		qrwb_nthreads = sum;
	} else {
		qrwb_nthreads = cfg.threads ? cfg.threads : online;
	}
	if (qrwb_nthreads > QRWB_MAX_THREADS)
		return qrwb_refuse("threads=%u exceeds the module's limit: valid is 1..%u",
				   qrwb_nthreads, QRWB_MAX_THREADS);
	return qrwb_check_clock();
}

/* ------------------------------------------------------------------ */
/* /proc/qrwbench */

static ssize_t qrwb_proc_read(struct file *file, char __user *ubuf,
			      size_t count, loff_t *ppos)
{
	return simple_read_from_buffer(ubuf, count, ppos, qrwb_out.buf,
				       qrwb_out.len);
}

static const struct proc_ops qrwb_proc_ops = {
	.proc_read	= qrwb_proc_read,
	.proc_lseek	= default_llseek,
};

static void qrwb_free_all(void)
{
	qrwb_free_rep();
	vfree(qrwb_boxes);
	qrwb_boxes = NULL;
}

/* the cost of the counter reads, outside the windows but in the counts */
static void qrwb_pmu_report(void)
{
	u64 before = 0, after = 0, n = max(qrwb_njobs * qrwb_nthreads, 1ULL);
	unsigned int t;

	for (t = 0; t < qrwb_nthreads; t++) {
		before += qrwb_workers[t].pmu_read_ns[0];
		after += qrwb_workers[t].pmu_read_ns[1];
	}
	pr_info("pmu: reading the counters took %llu ns before and %llu ns after a window (mean)\n",
		div64_u64(before, n), div64_u64(after, n));
}

/* workload=litmus: begin, one litmus record per test of qrwb_litmus.def */
static int qrwb_run_litmus(void)
{
	struct qrwb_litmus_res res;
	unsigned int k, i;
	int ret;

	for (i = 0; i < QRWB_PMU_N; i++)
		strscpy(qrwb_pmu_why[i], "not read by the litmus workload", QRWB_PMU_WHY);
	ret = qrwb_emit_begin();
	for (k = 0; !ret && k < qrwb_nlitmus; k++) {
		ret = qrwb_litmus_run(k, cfg.litmus_iters,
				      cfg.duration_ms * NSEC_PER_MSEC, &res);
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

/* in thread 0, on the first measuring CPU */
static int qrwb_run(void)
{
	qrwb_clock_ps = qrwb_measure_clock_ps();
	if (qrwb_workload == QRWB_W_ATOMICS)
		return qrwb_run_atomics();
	return qrwb_run_rwlock();
}

static int __init qrwb_init(void)
{
	unsigned int i;
	u64 t0, t1;
	int ret;

	ret = qrwb_parse();
	if (ret)
		return ret;

	if (qrwb_workload == QRWB_W_HANG) {
		pr_info("workload=hang: sleeping until the machine is stopped\n");
		for (;;)
			msleep(1000);
	}

	qrwb_seed = cfg.seed ? cfg.seed : get_random_u32();
	qrwb_rng = qrwb_seed;
	t0 = ktime_get_ns();
	/*
	 * Where the timed loops run: the emulator audit (emuaudit.py) maps the
	 * guest PCs of QEMU's TCG log to loops with this and the .ko's symbols.
	 */
	pr_info("layout: qrwb_loop_%s_%s_c0 at %px\n", qrwb_op_name[0],
		qrwb_op_ord[0], qrwb_loops_c0[0]);
	pr_info("start: workload=%s threads=%u seed=%llu kernel_variant=%s arch=%s\n",
		cfg.workload, qrwb_nthreads, qrwb_seed, qrwb_kernel_variant(),
		QRWB_ARCH);

	if (qrwb_workload == QRWB_W_LITMUS) {
		ret = qrwb_run_litmus();
	} else {
		/* the leader emits begin once the threads have their counters */
		ret = qrwb_start_workers();
		if (ret)
			goto out;
		wait_for_completion(&qrwb_run_done);
		qrwb_stop_workers();
		ret = qrwb_run_ret;
	}
	if (ret)
		goto out;
	ret = qrwb_emit_end();
	if (ret)
		goto out;

	qrwb_proc = proc_create("qrwbench", 0444, NULL, &qrwb_proc_ops);
	if (!qrwb_proc) {
		ret = -ENOMEM;
		goto out;
	}
	t1 = ktime_get_ns();
	pr_info("done: %u records, %zu bytes in %llu ms; %llu measurements, mean window %llu us, mean wall %llu us\n",
		qrwb_out.nrec + 1, qrwb_out.len, div_u64(t1 - t0, NSEC_PER_MSEC),
		qrwb_njobs, div64_u64(qrwb_sum_window_ns, max(qrwb_njobs, 1ULL) * 1000),
		div64_u64(qrwb_sum_job_ns, max(qrwb_njobs, 1ULL) * 1000));
	pr_info("harness: mean start %llu us, tail %llu us, collect %llu us\n",
		div64_u64(qrwb_sum_start_ns, max(qrwb_njobs, 1ULL) * 1000),
		div64_u64(qrwb_sum_tail_ns, max(qrwb_njobs, 1ULL) * 1000),
		div64_u64(qrwb_sum_wake_ns, max(qrwb_njobs, 1ULL) * 1000));
	if (qrwb_pmu_any)
		qrwb_pmu_report();
	for (i = 0; i < QRWB_PMU_N; i++)
		if (qrwb_pmu_omitted[i])
			pr_info("pmu: %s omitted in %llu of %llu measurements; first: %s\n",
				qrwb_pmu_key[i], qrwb_pmu_omitted[i], qrwb_njobs,
				qrwb_pmu_omit_why[i]);
	qrwb_free_all();
	return 0;
out:
	pr_err("failed: error %d\n", ret);
	qrwb_free_all();
	vfree(qrwb_out.buf);
	qrwb_out.buf = NULL;
	return ret;
}

static void __exit qrwb_exit(void)
{
	proc_remove(qrwb_proc);
	vfree(qrwb_out.buf);
}

module_init(qrwb_init);
module_exit(qrwb_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("qrwbench: memory ordering cost of qrwlocks and atomics");

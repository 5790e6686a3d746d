/* SPDX-License-Identifier: GPL-2.0 */
/*
 * qrwbench: what the harness's files share (qrwbench.h is what the loops
 * share). The run's whole state is one context, qrwb_cxt (qrwb_main.c),
 * as locktorture's cxt; a workload's own state is in its own file.
 *
 *   qrwb_params.c   parameters: parsing, checks, refusals
 *   qrwb_rec.c      the records (JSON lines) and /proc/qrwbench
 *   qrwb_pmu.c      in-kernel perf counters
 *   qrwb_harness.c  workers, the measurement, calibration, the one driver
 *   qrwb_<name>.c   workload=<name>: its ops, struct qrwb_workload, one
 *                   per row of the workload table qrwb_workloads.def
 *   qrwb_main.c     module init and exit, the workload table
 */
#ifndef QRWB_INTERNAL_H
#define QRWB_INTERNAL_H

#include <linux/completion.h>
#include <linux/perf_event.h>
#include <linux/proc_fs.h>
#include <linux/types.h>

#include "qrwbench.h"

#define QRWB_SCHEMA		1
#define QRWB_PREFIX		"@@QRWB "
#define QRWB_MAX_JSON		4096
#define QRWB_MAX_THREADS	NR_CPUS

/* PMU: room for the reason a counter is not counted */
#define QRWB_PMU_WHY		160

/*
 * The rig's name of the arch (its row of kernel/scripts/arch.sh, the "arch"
 * of every record): given by bench/build-module.sh through Kbuild, so that
 * the module names no arch of its own.
 */
#ifndef QRWB_ARCH
#error "QRWB_ARCH is not set: build the module with bench/build-module.sh ARCH VARIANT"
#endif

/* parameters (qrwb_params.def), parsed once: in the order of their names */
enum qrwb_place_id { QRWB_PLACE_BOTH, QRWB_PLACE_SHARED, QRWB_PLACE_PERCPU };
enum qrwb_impl_id { QRWB_IMPL_ALL, QRWB_IMPL_KERNEL, QRWB_IMPL_MODULE };

struct qrwb_cfg {
#define QRWB_SPARAM(n, def, desc)		const char *n;
#define QRWB_UPARAM(n, def, lo, hi, desc)	u64 n;
#include "qrwb_params.def"
#undef QRWB_SPARAM
#undef QRWB_UPARAM
};

/* in-kernel perf counters, one set per measuring kthread */
enum { QRWB_PMU_CYCLES, QRWB_PMU_INSNS, QRWB_PMU_N };

/* one read of a thread's counters */
struct qrwb_pmu_snap {
	u64 val[QRWB_PMU_N];
	u64 enabled[QRWB_PMU_N];
	u64 running[QRWB_PMU_N];
};

/* one entry of a rep's shuffled list */
struct qrwb_ent {
	u16 id;		/* the workload's (atomics: enum qrwb_op_id) */
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
	qrwb_loop_fn loop;	/* called with the worker's ctx (qrwb_measure) */
	unsigned long batch;
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
	void *ctx;		/* the job's loop's ctx here (the workload's prep()) */
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

/* what a result record names: its impl, op and variant */
struct qrwb_label {
	const char *impl;
	const char *op;
	const char *variant;
};

/*
 * A workload: its ops, as refscale's struct ref_scale_ops. One file
 * qrwb_<name>.c defines qrwb_wl_<name> for its row of qrwb_workloads.def;
 * the parser, the harness and the record writer call these and never ask
 * which workload runs.
 *
 * Parameters (qrwb_parse()): params() checks the workload's parameters
 * after the generic ranges of qrwb_params.def, refusing a bad one with
 * qrwb_refuse(), and sets what the run needs, qrwb_cxt.nthreads among it
 * (a measured workload: qrwb_parse_measured(), qrwb_parse_threads()).
 * check(), where a workload has one, checks a parameter only it reads
 * (atomics: ops=) and keeps what it needs of it; it runs in every
 * measured run, whichever workload that measures, as placement= and
 * impl= are checked in every one.
 *
 * The run: run() is all of it, in module_init, the begin record first:
 * qrwb_run_threads() for a workload the one driver measures, or the
 * workload's own. cleanup() (or NULL) frees what the run allocated.
 *
 * The one driver (qrwb_drive()): setup() allocates the rep's entries
 * (qrwb_alloc_rep()) and calibrates; every round, fill() writes the
 * entries, which the driver shuffles (in paired blocks when block is set,
 * else as one block); for each entry, prep() sets up the job (cxt.job's
 * loop and batch, every worker's ctx, and whatever the threads need),
 * which the driver then runs.
 *
 * The result records of a rep (qrwb_emit_rep()): label() names an entry's
 * result, or returns false for an entry that has none; overhead() (or
 * NULL: none) is true for an entry that measures the harness alone, whose
 * cost per op is the overhead_ps of the entries of its placement; emit()
 * (or NULL) adds the workload's own fields to the end of entry k's result.
 */
struct qrwb_workload {
	int (*params)(void);
	int (*check)(void);
	int (*run)(void);
	void (*cleanup)(void);
	/* the one driver */
	int (*setup)(void);
	void (*fill)(struct qrwb_ent *e);
	const unsigned int *block;	/* entry id -> block (< QRWB_NOPS), or NULL */
	void (*prep)(const struct qrwb_ent *e, unsigned int rep);
	/* the result records */
	bool (*label)(const struct qrwb_ent *e, struct qrwb_label *l);
	bool (*overhead)(const struct qrwb_ent *e);
	void (*emit)(unsigned int k, const struct qrwb_res *r);
	/*
	 * Program workloads (qrwb_program.c): drive() runs in place of the
	 * one driver each time the threads start; command() takes a line
	 * the guest's init writes to /proc/qrwbench after module_init,
	 * which then emits neither the end record nor frees the run.
	 */
	int (*drive)(void);
	int (*command)(char *line);
};

/* the workloads, one per row of qrwb_workloads.def (the table: qrwb_main.c) */
#define QRWB_WORKLOAD(name)	extern const struct qrwb_workload qrwb_wl_##name;
#include "qrwb_workloads.def"
#undef QRWB_WORKLOAD
/* and every row of qrwb_programs.def (qrwb_program.c) */
extern const struct qrwb_workload qrwb_wl_program;

/* the run's context: everything the module keeps between calls */
struct qrwb_cxt {
	struct qrwb_cfg cfg;		/* parameters, as given or defaulted */
	const struct qrwb_workload *wl;	/* the workload= that runs */
	enum qrwb_place_id placement;
	enum qrwb_impl_id impl;
	unsigned int nthreads;
	u64 seed;
	u64 rng;		/* splitmix64 state of the run order */
	u64 clock_ps;		/* cost of one ktime_get_ns() */
	/*
	 * PMU state, fixed before the first job: counter i is read and
	 * reported only when every thread has it (pmu_on[i]); otherwise
	 * pmu_why[i] says why not (the begin record's pmu.why). Near the
	 * top: the measurement reads them (arm64 addresses them from the
	 * context's base, in one instruction while under 4 KiB from it).
	 */
	bool pmu_on[QRWB_PMU_N];
	bool pmu_any;
	bool pmu_off;		/* no counters (program workloads) */

	/* the harness: the job, its threads and the memory they work on */
	struct qrwb_job job;
	struct qrwb_worker workers[QRWB_MAX_THREADS];
	/* slot 0: shared by all threads; slot 1 + t: thread t's own */
	struct qrwb_slot slots[QRWB_MAX_THREADS + 1];
	struct completion run_done;
	int run_ret;
	int quit;
	u64 sum_window_ns, sum_job_ns, njobs;
	u64 sum_start_ns, sum_tail_ns, sum_wake_ns;

	/* PMU state, fixed before the first job (more below) */
	atomic_t pmu_ready;
	char pmu_why[QRWB_PMU_N][QRWB_PMU_WHY];
	u64 pmu_read_ns;
	/* results whose counter i was omitted, and the first reason */
	u64 pmu_omitted[QRWB_PMU_N];
	char pmu_omit_why[QRWB_PMU_N][QRWB_PMU_WHY];

	/* per rep: entries, results, per-thread counts [entry][thread] */
	struct qrwb_ent *ents;
	struct qrwb_res *res;
	u64 *pt_ops, *pt_reads, *pt_writes;
	unsigned int nents;

	/* output: the records, as /proc/qrwbench shows them */
	struct qrwb_out {
		char *buf;
		size_t len;
		size_t cap;
		u32 crc;
		unsigned int nrec;
	} out;
	/* the record being written */
	char rec[QRWB_MAX_JSON + 256];
	size_t rec_len;
	bool rec_first;
	bool rec_overflow;
	struct proc_dir_entry *proc;

	/* program workloads: only the in-boot reference among the rwlock rows */
	bool rw_ref_only;
	unsigned int next_order;
};

extern struct qrwb_cxt qrwb_cxt;

/* qrwb_params.c */
int qrwb_parse(void);
int qrwb_refuse(const char *fmt, ...) __printf(1, 2);
int qrwb_parse_measured(void);
int qrwb_parse_threads(void);

/* qrwb_rec.c */
const char *qrwb_kernel_variant(void);
void qrwb_rec_add(const char *fmt, ...) __printf(1, 2);
void qrwb_key(const char *key);
void qrwb_kstr(const char *key, const char *val);
void qrwb_ku64(const char *key, u64 val);
void qrwb_ks64(const char *key, s64 val);
void qrwb_klist(const char *key, const u64 *v);
void qrwb_rec_start(const char *type);
int qrwb_rec_emit(bool count);
int qrwb_emit_begin(void);
int qrwb_emit_end(void);
int qrwb_emit_rep(unsigned int rep);
extern const struct proc_ops qrwb_proc_ops;

/* qrwb_pmu.c */
extern const char * const qrwb_pmu_key[QRWB_PMU_N];
void qrwb_pmu_open(struct qrwb_worker *w);
void qrwb_pmu_close(struct qrwb_worker *w);
void qrwb_pmu_settle(void);
void qrwb_pmu_collect(struct qrwb_res *r);
void qrwb_pmu_report(void);

/*
 * Read this thread's counters; at the start of a window (rev) the cycle
 * counter last, at its end first, so that it counts the least of the
 * other counter's read. Only counters every thread has, unless probing.
 */
static inline void qrwb_pmu_read(struct qrwb_worker *w,
				 struct qrwb_pmu_snap *snap, bool rev,
				 bool probe)
{
	unsigned int k, i;

	for (k = 0; k < QRWB_PMU_N; k++) {
		i = rev ? QRWB_PMU_N - 1 - k : k;
		if (w->pev[i] && (probe || qrwb_cxt.pmu_on[i]))
			snap->val[i] = perf_event_read_value(w->pev[i],
							     &snap->enabled[i],
							     &snap->running[i]);
	}
}

/* qrwb_harness.c */
u64 qrwb_splitmix(u64 *state);
int qrwb_run_threads(void);
void qrwb_run_job(struct qrwb_res *r, u64 *pt_ops, u64 *pt_reads,
		  u64 *pt_writes);
u64 qrwb_cost_ps(qrwb_loop_fn loop, void *ctx);
unsigned long qrwb_batch_for(u64 cost_ps);
int qrwb_alloc_rep(unsigned int nents, bool rw);
void qrwb_free_rep(void);

/* qrwb_atomics.c: the op table's names, for the records and the layout line */
struct qrwb_op_desc {
	const char *name;	/* the op, e.g. atomic_add_return */
	const char *ord;	/* its ordering: full, acquire, release, relaxed */
};

extern const struct qrwb_op_desc qrwb_op_desc[QRWB_NOPS];

#endif /* QRWB_INTERNAL_H */

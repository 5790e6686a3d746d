/* SPDX-License-Identifier: GPL-2.0 */
/*
 * qrwbench program workloads, guest side: the harness (prog.c) and one
 * file per program (prog_<name>.c, a row of bench/module/qrwb_programs.def).
 * Built into the init with the tree's nolibc (guest/mkinitrd.sh).
 *
 * A program is a struct prog: the harness forks one worker process per
 * thread for every window, each pinned to its CPU, and each calls op()
 * in a loop; op() returns PROG_READ or PROG_WRITE (the lock side the
 * call took, when the program splits them: rw) or a negative errno,
 * which fails the run (prog_fail() says why).
 */
#ifndef QRWB_PROG_H
#define QRWB_PROG_H

#define PROG_MAX_THREADS	64	/* CONFIG_NR_CPUS of kernel/configs/base.config */
#define PROG_READ		0
#define PROG_WRITE		1

struct prog_worker {
	volatile int ready;
	volatile int pid;
	unsigned long long ops, reads, writes;
	unsigned long long t_first, t_last;
	char why[120];		/* why it failed ("" while it has not) */
} __attribute__((aligned(64)));

/* one window's shared state (MAP_SHARED: every worker sees it) */
struct prog_shm {
	volatile int go;
	volatile int nready;
	volatile int ndone;		/* workers past their window */
	volatile int release;		/* the init lets them exit */
	unsigned long long t_start, t_end;
	int nthreads;
	unsigned int write_pct;		/* the program's write-side share, if any */
	long arg[4];			/* the program's own (setup()) */
	struct prog_worker w[PROG_MAX_THREADS];
};

/* what a worker's op() sees */
struct prog_ctx {
	struct prog_shm *shm;
	struct prog_worker *self;
	int idx;
	unsigned long long rng;
	long state;		/* the program's, per worker */
};

struct prog {
	const char *name;
	int rw;			/* results split into reads and writes */
	unsigned int batch;	/* ops between two clock reads */
	/* the program's parameter of qrwb_params.def (its write share), or NULL */
	const char *write_param;
	/* in the init, before a window's workers are forked; 0 or -errno */
	int (*setup)(struct prog_shm *shm);
	/* in each worker, pinned, before the window; 0 or -errno */
	int (*worker_init)(struct prog_ctx *c);
	/* one op: PROG_READ, PROG_WRITE or -errno (after prog_fail()) */
	int (*op)(struct prog_ctx *c);
	/* in the init, after the window's workers are reaped */
	void (*teardown)(struct prog_shm *shm);
};

/* record why the worker fails ("<what>: errno <e>"); returns -e */
int prog_fail(struct prog_ctx *c, const char *what, int e);
/* a number in 0..99 from the worker's PRNG */
unsigned int prog_pct(struct prog_ctx *c);

/* the table: one row of qrwb_programs.def each (prog_table.c) */
const struct prog *prog_find(const char *name);

/* the harness: the whole measured run after finit_module; 0, or the
 * failure already printed as "qrwbench-init: failed: <why>" */
int prog_run(const struct prog *p, const char *params);

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * qrwbench: types shared by the harness (qrwb_internal.h), the generated
 * atomics loops (qrwb_loops_*.c) and the rwlock loops (qrwb_lock_*.c).
 */
#ifndef QRWBENCH_H
#define QRWBENCH_H

#include <linux/atomic.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/types.h>

/*
 * Stride between data written by different threads: two 64-byte lines,
 * so that adjacent-line prefetch does not couple "per-CPU" slots.
 */
#define QRWB_LINE		128

#define __QRWB_PASTE(a, b)	a##b
#define QRWB_PASTE(a, b)	__QRWB_PASTE(a, b)

/* atomics: the memory one loop works on (shared or one per thread) */
struct qrwb_slot {
	atomic_t v;
	atomic64_t v64;
	unsigned long p;
	long sink;
} __aligned(QRWB_LINE);

/*
 * Every timed loop, atomics and rwlock alike: n ops (rwlock: iterations) on
 * ctx, a struct qrwb_slot (atomics) or a struct qrwb_rwctx (rwlock). The
 * harness calls it once per batch, with no branch on the workload.
 */
typedef void (*qrwb_loop_fn)(void *ctx, unsigned long n);

/*
 * Ops per iteration of a timed atomics loop: the loop body is the op's
 * statement written QRWB_UNROLL times, so that the loop's own cost (the
 * increment, compare and branch; under TCG a translation-block exit per
 * iteration) is paid once per QRWB_UNROLL ops. n must be a multiple of it.
 */
#define QRWB_UNROLL		32

/*
 * Alignment of every timed atomics loop: a power of two at least as large
 * as the largest loop, so that no loop crosses a 4 KiB page (under TCG a
 * loop that crosses a page ran 2-4x slower than its identical twin: QEMU
 * chains translated blocks directly only within a page).
 */
#define QRWB_LOOP_ALIGN		4096

enum qrwb_op_id {
#define QRWB_OP(op, ord, stmt) QRWB_ID_##op##_##ord,
#include "qrwb_ops.def"
#undef QRWB_OP
	QRWB_NOPS
};

/* generated in qrwb_loops_c0.c, qrwb_loops_c1.c, qrwb_loops_c1mb.c */
extern const qrwb_loop_fn qrwb_loops_c0[QRWB_NOPS];
extern const qrwb_loop_fn qrwb_loops_c1[QRWB_NOPS];
extern const qrwb_loop_fn qrwb_loops_c1mb[QRWB_NOPS];

/* rwlock: one lock, its exclusion checker and the data it protects */
#define QRWB_MAX_CS_LINES	64

struct qrwb_line {
	unsigned long w;
} __aligned(QRWB_LINE);

struct qrwb_lockbox {
	union {
		rwlock_t klock;		/* impl=kernel: the kernel's rwlock_t */
		arch_rwlock_t mlock;	/* impl=module: struct qrwlock */
	} __aligned(QRWB_LINE);
	struct {
		atomic_t writers;
		atomic_t readers;
	} chk __aligned(QRWB_LINE);
	struct qrwb_line data[QRWB_MAX_CS_LINES];
};

/* per-thread state of the rwlock loop, kept in registers inside it */
struct qrwb_rwctx {
	struct qrwb_lockbox *box;
	u64 rng;		/* xorshift64 state, never 0 */
	unsigned int wthresh;	/* write when (rand % 100) < wthresh */
	unsigned int cs_work;
	unsigned int think_work;
	unsigned int cs_lines;
	unsigned int check;	/* exclusion checker on */
	unsigned long reads;
	unsigned long writes;
	unsigned long viol;
	unsigned long sink;
};

/* the kinds of lock implementation (qrwb_impls.def's kind column) */
#define QRWB_KIND_none		0	/* harness only: no lock (overhead) */
#define QRWB_KIND_kernel	1	/* rwlock_t: the kernel's qrwlock variant */
#define QRWB_KIND_module	2	/* the module's qrwlock copy */

/* rwlock implementations: the rows of qrwb_impls.def */
enum qrwb_rw_id {
#define QRWB_IMPL(name, ...) QRWB_RW_##name,
#include "qrwb_impls.def"
#undef QRWB_IMPL
	QRWB_RW_N
};

/* every row's loop, in its qrwb_lock_<name>.o (qrwb_lock_tmpl.h) */
#define QRWB_IMPL(name, ...)						\
	extern const qrwb_loop_fn qrwb_rwloop_##name;
#include "qrwb_impls.def"
#undef QRWB_IMPL

/* the end of a kthread's function: it must not exit before kthread_stop() */
static inline void qrwb_wait_for_stop(void)
{
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
}

/* xorshift64 (Marsaglia 13/7/17): the rwlock loop's read/write choice */
static __always_inline u64 qrwb_xorshift(u64 x)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

/* uniform in 0..99 from the high 32 bits, without a division */
static __always_inline unsigned int qrwb_pct(u64 x)
{
	return (unsigned int)(((x >> 32) * 100) >> 32);
}

#endif /* QRWBENCH_H */

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rwlock workload's timed loop, one template for every lock
 * implementation, and (for impl=module) the module's own copy of the
 * Linux 6.12 queued rwlock: the fast paths of include/asm-generic/qrwlock.h,
 * the slow paths of kernel/locking/qrwlock.c and the lock/unlock API of
 * kernel/locking/spinlock.c, with every atomic operation taken from the
 * ordering macro table qrwb_lock_ord.h. Only the tracepoints
 * (trace_contention_begin/end) are left out.
 *
 * Included by qrwb_lock_<name>.c, which Kbuild generates for every row of
 * the lock table qrwb_impls.def: it defines the row as
 *   #define QRWB_LK_ROW(col) col(<name>, <kind>, <ordering>, <copy>, <mb>)
 * and the columns are taken from it here:
 *   QRWB_LK_NAME  instance name: functions are qrwb_<name>_*, the loop is
 *                 qrwb_<name>_loop, its pointer qrwb_rwloop_<name>
 *   QRWB_LK_KIND  QRWB_KIND_none (harness only, no lock: the overhead),
 *                 QRWB_KIND_kernel (read_lock() etc. on rwlock_t) or
 *                 QRWB_KIND_module (the copy below)
 *   QRWB_LK_ORD   QRWB_ORD_full, _acqrel or _relaxed (module only)
 *   QRWB_LK_MB    1: one extra smp_mb() per lock+unlock (aa_inject_mb)
 */
#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/preempt.h>
#include <linux/spinlock.h>
#include "qrwbench.h"

#ifndef QRWB_LK_ROW
#error "qrwb_lock_<name>.c defines QRWB_LK_ROW(col): Kbuild generates it from qrwb_impls.def"
#endif

/* the row's columns, as qrwb_impls.def names them */
#define QRWB_COL_NAME(name, ...)			name
#define QRWB_COL_KIND(name, kind, ...)			QRWB_KIND_##kind
#define QRWB_COL_ORD(name, kind, ord, ...)		QRWB_ORD_##ord
#define QRWB_COL_MB(name, kind, ord, copy, mb)		mb

#define QRWB_LK_NAME	QRWB_LK_ROW(QRWB_COL_NAME)
#define QRWB_LK_KIND	QRWB_LK_ROW(QRWB_COL_KIND)
#define QRWB_LK_ORD	QRWB_LK_ROW(QRWB_COL_ORD)
#define QRWB_LK_MB	QRWB_LK_ROW(QRWB_COL_MB)

#define QRWB_F(f)	QRWB_PASTE(QRWB_PASTE(qrwb_, QRWB_LK_NAME), _##f)

#if QRWB_KIND_module == QRWB_LK_KIND
#include "qrwb_lock_ord.h"

/*
 * The functions a timed rwlock loop calls are aligned like the loops, so
 * that none crosses a 4 KiB page (under TCG a page-crossing copy of the same
 * code ran 2-4x slower, docs/validity.md): the slow paths are at most ~360
 * bytes (arm64), the out-of-line lock/unlock functions under 64.
 */
#define QRWB_SLOW_ALIGN		512
#define QRWB_CALL_ALIGN		64

/* kernel/locking/qrwlock.c: queued_read_lock_slowpath() */
static noinline __aligned(QRWB_SLOW_ALIGN)
void QRWB_F(read_lock_slowpath)(struct qrwlock *lock)
{
	/*
	 * Readers come here when they cannot get the lock without waiting
	 */
	if (unlikely(in_interrupt())) {
		/*
		 * Readers in interrupt context will get the lock immediately
		 * if the writer is just waiting (not holding the lock yet),
		 * so spin with ACQUIRE semantics until the lock is available
		 * without waiting in the queue.
		 */
		qrwb_lock_cond_read(&lock->cnts, !(VAL & _QW_LOCKED));
		return;
	}
	qrwb_sub(_QR_BIAS, &lock->cnts);

	/*
	 * Put the reader into the wait queue
	 */
	arch_spin_lock(&lock->wait_lock);
	qrwb_add(_QR_BIAS, &lock->cnts);

	/*
	 * The ACQUIRE semantics of the following spinning code ensure
	 * that accesses can't leak upwards out of our subsequent critical
	 * section in the case that the lock is currently held for write.
	 */
	qrwb_lock_cond_read(&lock->cnts, !(VAL & _QW_LOCKED));

	/*
	 * Signal the next one in queue to become queue head
	 */
	arch_spin_unlock(&lock->wait_lock);
}

/* kernel/locking/qrwlock.c: queued_write_lock_slowpath() */
static noinline __aligned(QRWB_SLOW_ALIGN)
void QRWB_F(write_lock_slowpath)(struct qrwlock *lock)
{
	int cnts;

	/* Put the writer into the wait queue */
	arch_spin_lock(&lock->wait_lock);

	/* Try to acquire the lock directly if no reader is present */
	cnts = atomic_read(&lock->cnts);
	if (!cnts && qrwb_lock_try_cmpxchg(&lock->cnts, &cnts, _QW_LOCKED))
		goto unlock;

	/* Set the waiting flag to notify readers that a writer is pending */
	qrwb_or(_QW_WAITING, &lock->cnts);

	/* When no more readers or writers, set the locked flag */
	do {
		cnts = atomic_cond_read_relaxed(&lock->cnts, VAL == _QW_WAITING);
	} while (!qrwb_lock_try_cmpxchg(&lock->cnts, &cnts, _QW_LOCKED));
unlock:
	arch_spin_unlock(&lock->wait_lock);
}

/* include/asm-generic/qrwlock.h: queued_read_lock() */
static __always_inline void QRWB_F(queued_read_lock)(struct qrwlock *lock)
{
	int cnts;

	cnts = qrwb_lock_add_return(_QR_BIAS, &lock->cnts);
	if (likely(!(cnts & _QW_WMASK)))
		return;

	/* The slowpath will decrement the reader count, if necessary. */
	QRWB_F(read_lock_slowpath)(lock);
}

/* include/asm-generic/qrwlock.h: queued_write_lock() */
static __always_inline void QRWB_F(queued_write_lock)(struct qrwlock *lock)
{
	int cnts = 0;
	/* Optimize for the unfair lock case where the fair flag is 0. */
	if (likely(qrwb_lock_try_cmpxchg(&lock->cnts, &cnts, _QW_LOCKED)))
		return;

	QRWB_F(write_lock_slowpath)(lock);
}

/* include/asm-generic/qrwlock.h: queued_read_unlock() */
static __always_inline void QRWB_F(queued_read_unlock)(struct qrwlock *lock)
{
	/*
	 * Atomically decrement the reader count
	 */
	(void)qrwb_unlock_sub_return(_QR_BIAS, &lock->cnts);
}

/* include/asm-generic/qrwlock.h: queued_write_unlock() */
static __always_inline void QRWB_F(queued_write_unlock)(struct qrwlock *lock)
{
	qrwb_unlock_wlocked(lock);
}

/*
 * kernel/locking/spinlock.c and include/linux/rwlock_api_smp.h: the lock
 * side is out of line unless CONFIG_INLINE_{READ,WRITE}_LOCK, the unlock
 * side is inlined when CONFIG_INLINE_{READ,WRITE}_UNLOCK (the default
 * without preemption), exactly as for the kernel's rwlock_t.
 * QRWB_WRAPPER(cfg) is the header of such a function, up to its name:
 * inlined when the Kconfig option cfg is set (__is_defined(): a bare 1 or
 * 0), else out of line and aligned.
 */
#define QRWB_WRAPPER_1		static __always_inline void
#define QRWB_WRAPPER_0		static noinline __aligned(QRWB_CALL_ALIGN) void
#define QRWB_WRAPPER(cfg)	__PASTE(QRWB_WRAPPER_, __is_defined(cfg))

QRWB_WRAPPER(CONFIG_INLINE_READ_LOCK)
QRWB_F(read_lock)(struct qrwlock *lock)
{
	preempt_disable();
	QRWB_F(queued_read_lock)(lock);
}

QRWB_WRAPPER(CONFIG_INLINE_WRITE_LOCK)
QRWB_F(write_lock)(struct qrwlock *lock)
{
	preempt_disable();
	QRWB_F(queued_write_lock)(lock);
}

QRWB_WRAPPER(CONFIG_INLINE_READ_UNLOCK)
QRWB_F(read_unlock)(struct qrwlock *lock)
{
	QRWB_F(queued_read_unlock)(lock);
	preempt_enable();
}

QRWB_WRAPPER(CONFIG_INLINE_WRITE_UNLOCK)
QRWB_F(write_unlock)(struct qrwlock *lock)
{
	QRWB_F(queued_write_unlock)(lock);
	preempt_enable();
}

#define QRWB_RLOCK(b)		QRWB_F(read_lock)(&(b)->mlock)
#define QRWB_RUNLOCK(b)		QRWB_F(read_unlock)(&(b)->mlock)
#define QRWB_WLOCK(b)		QRWB_F(write_lock)(&(b)->mlock)
#define QRWB_WUNLOCK(b)		QRWB_F(write_unlock)(&(b)->mlock)

#elif QRWB_KIND_kernel == QRWB_LK_KIND

#define QRWB_RLOCK(b)		read_lock(&(b)->klock)
#define QRWB_RUNLOCK(b)		read_unlock(&(b)->klock)
#define QRWB_WLOCK(b)		write_lock(&(b)->klock)
#define QRWB_WUNLOCK(b)		write_unlock(&(b)->klock)

#elif QRWB_KIND_none == QRWB_LK_KIND

#define QRWB_RLOCK(b)		do { } while (0)
#define QRWB_RUNLOCK(b)		do { } while (0)
#define QRWB_WLOCK(b)		do { } while (0)
#define QRWB_WUNLOCK(b)		do { } while (0)

#else
#error "the row's kind must be none, kernel or module"
#endif

#if QRWB_LK_MB
/* the injected cost of aa_inject_mb=1: one full barrier per lock+unlock */
#define QRWB_LK_INJECT()	smp_mb()
#else
#define QRWB_LK_INJECT()	do { } while (0)
#endif

/*
 * The exclusion checker uses relaxed atomics so that it adds no ordering
 * of its own (on x86 every atomic RMW is fully ordered anyway).
 */
static __always_inline unsigned long qrwb_chk_wenter(struct qrwb_lockbox *b)
{
	unsigned long bad = 0;

	if (atomic_inc_return_relaxed(&b->chk.writers) != 1)
		bad = 1;
	if (atomic_read(&b->chk.readers))
		bad = 1;
	return bad;
}

static __always_inline void qrwb_chk_wexit(struct qrwb_lockbox *b)
{
	atomic_dec(&b->chk.writers);
}

static __always_inline unsigned long qrwb_chk_renter(struct qrwb_lockbox *b)
{
	atomic_inc(&b->chk.readers);
	return atomic_read(&b->chk.writers) != 0;
}

static __always_inline void qrwb_chk_rexit(struct qrwb_lockbox *b)
{
	atomic_dec(&b->chk.readers);
}

/*
 * One acquisition in the loop below: lock, the checker's entry, cs_work
 * units of unit (cycling over the cs_lines protected lines), the checker's
 * exit, unlock, and count it. A macro, so that the writer's and the
 * reader's sides are one text and the loop's code is what it was when each
 * side was written out.
 */
#define QRWB_CS(lock, unlock, chk_enter, chk_exit, count, unit)	\
do {									\
	lock(b);							\
	QRWB_LK_INJECT();						\
	if (check)							\
		viol += chk_enter(b);					\
	for (u = 0; u < cs_work; u++) {					\
		unit;							\
		if (++l == cs_lines)					\
			l = 0;						\
	}								\
	if (check)							\
		chk_exit(b);						\
	unlock(b);							\
	(count)++;							\
} while (0)

/*
 * n iterations of: choose read or write (per-thread xorshift64 against
 * wthresh), lock, cs_work units on the protected lines (a load, for a
 * writer a load and a store, cycling over cs_lines lines), unlock, then
 * think_work units of private arithmetic.
 */
/* 1024-byte aligned (the loop is at most ~960 bytes): never crosses a page. */
static noinline __aligned(1024) void QRWB_F(loop)(void *ctx, unsigned long n)
{
	struct qrwb_rwctx *c = ctx;
	struct qrwb_lockbox *b = c->box;
	const unsigned int wthresh = c->wthresh;
	const unsigned int cs_work = c->cs_work;
	const unsigned int think_work = c->think_work;
	const unsigned int cs_lines = c->cs_lines;
	const unsigned int check = c->check;
	unsigned long reads = 0, writes = 0, viol = 0;
	unsigned long sink = c->sink;
	u64 x = c->rng;
	unsigned long i;
	unsigned int u, l;

	for (i = 0; i < n; i++) {
		x = qrwb_xorshift(x);
		l = 0;
		if (qrwb_pct(x) < wthresh)
			QRWB_CS(QRWB_WLOCK, QRWB_WUNLOCK, qrwb_chk_wenter,
				qrwb_chk_wexit, writes,
				WRITE_ONCE(b->data[l].w, READ_ONCE(b->data[l].w) + 1));
		else
			QRWB_CS(QRWB_RLOCK, QRWB_RUNLOCK, qrwb_chk_renter,
				qrwb_chk_rexit, reads,
				sink += READ_ONCE(b->data[l].w));
		for (u = 0; u < think_work; u++) {
			sink = sink * 6364136223846793005UL + 1442695040888963407UL;
			OPTIMIZER_HIDE_VAR(sink);
		}
	}
	c->rng = x;
	c->sink = sink;
	c->reads += reads;
	c->writes += writes;
	c->viol += viol;
}

const qrwb_loop_fn QRWB_PASTE(qrwb_rwloop_, QRWB_LK_NAME) = QRWB_F(loop);

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Timed loops of the atomics workload, generated from qrwb_ops.def.
 *
 * Included by qrwb_loops_c0.c, qrwb_loops_c1.c and qrwb_loops_c1mb.c,
 * each a separate translation unit, with QRWB_COPY set to c0, c1 or c1mb:
 * c0 and c1 are two separately compiled, identical copies of every loop
 * (the A/A control); c1mb is c1 plus one smp_mb() per op, used in place
 * of c1 when aa_inject_mb=1 (the injected cost the A/A test must see).
 *
 * Every loop has the same shape: the op written QRWB_UNROLL times per
 * iteration, no switch, no indirect call, no PRNG, no clock read; the
 * harness calls it once per batch of n ops (a multiple of QRWB_UNROLL).
 */
#ifndef QRWB_COPY
#error "define QRWB_COPY (c0, c1 or c1mb) before including qrwb_loops.h"
#endif

#include <linux/atomic.h>
#include <linux/compiler.h>
#include "qrwbench.h"

#ifdef QRWB_INJECT_MB
/* the injected cost of aa_inject_mb=1: one full barrier per op */
#define QRWB_INJECT()	smp_mb()
#else
#define QRWB_INJECT()	do { } while (0)
#endif

/* one op: its statement, the injected barrier (c1mb) and the op index */
#define QRWB_BODY(stmt)	do { stmt; QRWB_INJECT(); i++; } while (0)
#define QRWB_BODY4(stmt)						\
	do {								\
		QRWB_BODY(stmt); QRWB_BODY(stmt);			\
		QRWB_BODY(stmt); QRWB_BODY(stmt);			\
	} while (0)

/* QRWB_UNROLL (32) ops per iteration; n is a multiple of it */
#define QRWB_OP(op, ord, stmt)						\
static noinline __aligned(QRWB_LOOP_ALIGN) void				\
QRWB_PASTE(qrwb_loop_##op##_##ord##_, QRWB_COPY)(void *ctx,		\
						 unsigned long n)	\
{									\
	int o32 = atomic_read(&s->v);					\
	s64 o64 = atomic64_read(&s->v64);				\
	unsigned long i = 0;						\
	long acc = 0;							\
									\
	while (i < n) {							\
		QRWB_BODY4(stmt); QRWB_BODY4(stmt);			\
		QRWB_BODY4(stmt); QRWB_BODY4(stmt);			\
		QRWB_BODY4(stmt); QRWB_BODY4(stmt);			\
		QRWB_BODY4(stmt); QRWB_BODY4(stmt);			\
	}								\
	WRITE_ONCE(s->sink, acc + o32 + (long)o64);			\
}
#if QRWB_UNROLL != 32
#error "the loop body above writes the op 32 times: keep it equal to QRWB_UNROLL"
#endif
/*
 * The op table's statements name the slot s: here a cast of ctx, not a
 * local variable. A local copy (struct qrwb_slot *s = ctx;) renumbered
 * GCC's temporaries and so changed the register allocation of arm64's
 * smp_load_acquire loop; the cast leaves every loop's code as it was with
 * a struct qrwb_slot * parameter.
 */
#define s	((struct qrwb_slot *)ctx)
#include "qrwb_ops.def"
#undef s
#undef QRWB_OP

const qrwb_loop_fn QRWB_PASTE(qrwb_loops_, QRWB_COPY)[QRWB_NOPS] = {
#define QRWB_OP(op, ord, stmt)						\
	[QRWB_ID_##op##_##ord] = QRWB_PASTE(qrwb_loop_##op##_##ord##_, QRWB_COPY),
#include "qrwb_ops.def"
#undef QRWB_OP
};

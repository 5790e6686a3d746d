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
 * Every loop has the same shape: no switch, no indirect call, no PRNG,
 * no clock read; the harness calls it once per batch of n ops.
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

/*
 * 256-byte alignment (a loop is at most ~140 bytes) keeps every loop inside
 * one 4 KiB page: under TCG a loop that crosses a page ran 2-4x slower than
 * its identical twin (QEMU chains translated blocks directly only within a
 * page), which the A/A control showed on arm64 cortex-a57.
 */
#define QRWB_OP(op, ord, stmt)						\
static noinline __aligned(256) void					\
QRWB_PASTE(qrwb_loop_##op##_##ord##_, QRWB_COPY)(struct qrwb_slot *s,	\
						 unsigned long n)	\
{									\
	int o32 = atomic_read(&s->v);					\
	s64 o64 = atomic64_read(&s->v64);				\
	unsigned long i;						\
	long acc = 0;							\
									\
	for (i = 0; i < n; i++) {					\
		stmt;							\
		QRWB_INJECT();						\
	}								\
	WRITE_ONCE(s->sink, acc + o32 + (long)o64);			\
}
#include "qrwb_ops.def"
#undef QRWB_OP

const qrwb_loop_fn QRWB_PASTE(qrwb_loops_, QRWB_COPY)[QRWB_NOPS] = {
#define QRWB_OP(op, ord, stmt)						\
	[QRWB_ID_##op##_##ord] = QRWB_PASTE(qrwb_loop_##op##_##ord##_, QRWB_COPY),
#include "qrwb_ops.def"
#undef QRWB_OP
};

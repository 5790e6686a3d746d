// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench ordering probe: one small object, compiled against a configured
 * kernel tree of any arch (kernel/scripts/build-kernel.sh --objects), with
 * one function per qrwlock fast path and one per atomic op and ordering,
 * for the per-arch ordering audit (analysis/qrwbench/build/arch_audit.py).
 * Never loaded: the audit only disassembles it.
 *
 *   qrwb_probe_<path>(arch_rwlock_t *)	read_lock, read_trylock,
 *	read_unlock, write_lock, write_trylock, write_unlock: the arch's
 *	arch_read_lock() etc., the qrwlock fast paths of this kernel's
 *	variant (CONFIG_QRWLOCK_ORDERING_*), the slow path a call
 *   qrwb_probe_op_<op>_<ordering>(struct qrwb_slot *, unsigned long)
 *	one op of every row of the module's op table qrwb_ops.def
 *
 * Every function is noinline and, with -fno-ipa-icf, its own code: two
 * that compile alike stay two functions, which the audit then reports as
 * identical.
 */
#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/spinlock.h>

#ifndef CONFIG_QUEUED_RWLOCKS
#error "this kernel does not use qrwlock (CONFIG_QUEUED_RWLOCKS is not set)"
#endif
#ifndef CONFIG_SMP
#error "a kernel without CONFIG_SMP has no rwlock code to audit"
#endif

/* each function with its prototype (-Wmissing-prototypes) */
#define QRWB_PROBE_LOCK(path)						\
void qrwb_probe_##path(arch_rwlock_t *l);				\
noinline void qrwb_probe_##path(arch_rwlock_t *l)			\
{									\
	arch_##path(l);							\
}
#define QRWB_PROBE_TRY(path)						\
int qrwb_probe_##path(arch_rwlock_t *l);				\
noinline int qrwb_probe_##path(arch_rwlock_t *l)			\
{									\
	return arch_##path(l);						\
}
QRWB_PROBE_LOCK(read_lock)
QRWB_PROBE_TRY(read_trylock)
QRWB_PROBE_LOCK(read_unlock)
QRWB_PROBE_LOCK(write_lock)
QRWB_PROBE_TRY(write_trylock)
QRWB_PROBE_LOCK(write_unlock)

/* the slot of the op table's statements (bench/module/qrwbench.h) */
struct qrwb_slot {
	atomic_t v;
	atomic64_t v64;
	unsigned long p;
	long sink;
};

/*
 * One op: the statement of its row (it may use s, i, acc, o32 and o64, as
 * in the module's timed loops), its result returned.
 */
#define QRWB_OP(op, ord, stmt)						\
long qrwb_probe_op_##op##_##ord(struct qrwb_slot *s, unsigned long i);	\
noinline long qrwb_probe_op_##op##_##ord(struct qrwb_slot *s,		\
					unsigned long i)		\
{									\
	int o32 = atomic_read(&s->v);					\
	s64 o64 = atomic64_read(&s->v64);				\
	long acc = 0;							\
									\
	stmt;								\
	return acc + o32 + (long)o64;					\
}
#include "qrwb_ops.def"
#undef QRWB_OP

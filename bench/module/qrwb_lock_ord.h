/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Ordering macro table of the module's copies of the queued rwlock.
 *
 * One block per ordering, selected by QRWB_LK_ORD (QRWB_ORD_<ordering>,
 * the ordering column of qrwb_impls.def); the names mirror the
 * macros of the kernel patch (include/asm-generic/qrwlock.h of the built
 * tree, qrwlock_lock_add_return() etc.) with a qrwb_ prefix, and each
 * block expands to exactly what the patch's block for that
 * CONFIG_QRWLOCK_ORDERING_* choice expands to. ACQREL is upstream 6.12.
 */
#ifndef QRWB_LOCK_ORD_H
#define QRWB_LOCK_ORD_H

#define QRWB_ORD_full		1
#define QRWB_ORD_acqrel		2
#define QRWB_ORD_relaxed	3

#if QRWB_ORD_full == QRWB_LK_ORD
#define qrwb_lock_add_return(i, v)		atomic_add_return(i, v)
#define qrwb_lock_try_cmpxchg(v, o, n)		atomic_try_cmpxchg(v, o, n)
#define qrwb_unlock_sub_return(i, v)		atomic_sub_return(i, v)
#define qrwb_unlock_wlocked(l)	\
	((void)atomic_sub_return(_QW_LOCKED, &(l)->cnts))
#define qrwb_lock_cond_read(v, c)					\
({									\
	int __qrwb_val = atomic_cond_read_relaxed(v, c);		\
	/* A full barrier after the spin orders the critical section. */\
	smp_mb();							\
	__qrwb_val;							\
})
#define qrwb_add(i, v)				((void)atomic_add_return(i, v))
#define qrwb_sub(i, v)				((void)atomic_sub_return(i, v))
#define qrwb_or(i, v)				((void)atomic_fetch_or(i, v))
#elif QRWB_ORD_relaxed == QRWB_LK_ORD
#define qrwb_lock_add_return(i, v)		atomic_add_return_relaxed(i, v)
#define qrwb_lock_try_cmpxchg(v, o, n)		atomic_try_cmpxchg_relaxed(v, o, n)
#define qrwb_unlock_sub_return(i, v)		atomic_sub_return_relaxed(i, v)
#define qrwb_unlock_wlocked(l)			WRITE_ONCE((l)->wlocked, 0)
#define qrwb_lock_cond_read(v, c)		atomic_cond_read_relaxed(v, c)
#define qrwb_add(i, v)				atomic_add(i, v)
#define qrwb_sub(i, v)				atomic_sub(i, v)
#define qrwb_or(i, v)				atomic_or(i, v)
#elif QRWB_ORD_acqrel == QRWB_LK_ORD
#define qrwb_lock_add_return(i, v)		atomic_add_return_acquire(i, v)
#define qrwb_lock_try_cmpxchg(v, o, n)		atomic_try_cmpxchg_acquire(v, o, n)
#define qrwb_unlock_sub_return(i, v)		atomic_sub_return_release(i, v)
/* Release: the critical section is ordered before the unlocking store. */
#define qrwb_unlock_wlocked(l)			smp_store_release(&(l)->wlocked, 0)
#define qrwb_lock_cond_read(v, c)		atomic_cond_read_acquire(v, c)
#define qrwb_add(i, v)				atomic_add(i, v)
#define qrwb_sub(i, v)				atomic_sub(i, v)
#define qrwb_or(i, v)				atomic_or(i, v)
#else
#error "a module row's ordering must be full, acqrel or relaxed"
#endif

#endif /* QRWB_LOCK_ORD_H */

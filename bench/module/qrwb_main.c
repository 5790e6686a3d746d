// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench: what memory ordering costs in queued rwlocks and atomics.
 *
 * The benchmark runs synchronously in module_init and leaves its records
 * (docs/records.md, schema 1) in /proc/qrwbench for the guest's init to
 * copy to the console. Bad parameters make module_init fail with -EINVAL
 * after one "qrwbench: refused: <reason>" line.
 *
 * Harness (qrwb_harness.c): one kthread per measuring CPU, bound, released
 * together by a start barrier; every thread calls the measured loop
 * through a function pointer once per batch and reads the clock only
 * between batches. The loops themselves are generated per op, ordering
 * and copy from qrwb_ops.def (qrwb_loops.h) and per lock implementation
 * from one template (qrwb_lock_tmpl.h). The workloads are the rows of
 * qrwb_workloads.def, one file each. The files: qrwb_internal.h.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/kernel.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/proc_fs.h>
#include <linux/random.h>
#include <linux/timekeeping.h>
#include <linux/vmalloc.h>

#include "qrwb_internal.h"

/* the run's context */
struct qrwb_cxt qrwb_cxt = {
	.run_done = COMPLETION_INITIALIZER(qrwb_cxt.run_done),
};

static void qrwb_free_all(void)
{
	qrwb_free_rep();
	if (qrwb_cxt.wl->cleanup)
		qrwb_cxt.wl->cleanup();
}

/* the console lines at the end: records, measurements, harness costs */
static void qrwb_report(u64 t0)
{
	u64 njobs = max(qrwb_cxt.njobs, 1ULL) * 1000;
	u64 t1 = ktime_get_ns();

	pr_info("done: %u records, %zu bytes in %llu ms; %llu measurements, mean window %llu us, mean wall %llu us\n",
		qrwb_cxt.out.nrec + 1, qrwb_cxt.out.len,
		div_u64(t1 - t0, NSEC_PER_MSEC), qrwb_cxt.njobs,
		div64_u64(qrwb_cxt.sum_window_ns, njobs),
		div64_u64(qrwb_cxt.sum_job_ns, njobs));
	pr_info("harness: mean start %llu us, tail %llu us, collect %llu us\n",
		div64_u64(qrwb_cxt.sum_start_ns, njobs),
		div64_u64(qrwb_cxt.sum_tail_ns, njobs),
		div64_u64(qrwb_cxt.sum_wake_ns, njobs));
	qrwb_pmu_report();
}

static int __init qrwb_init(void)
{
	u64 t0;
	int ret;

	ret = qrwb_parse();
	if (ret)
		return ret;

	qrwb_cxt.seed = qrwb_cxt.cfg.seed ? qrwb_cxt.cfg.seed : get_random_u32();
	qrwb_cxt.rng = qrwb_cxt.seed;
	t0 = ktime_get_ns();
	/*
	 * Where the timed loops run: the emulator audit (emuaudit.py) maps the
	 * guest PCs of QEMU's TCG log to loops with this and the .ko's symbols.
	 */
	pr_info("layout: qrwb_loop_%s_%s_c0 at %px\n", qrwb_op_desc[0].name,
		qrwb_op_desc[0].ord, qrwb_loops_c0[0]);
	pr_info("start: workload=%s threads=%u seed=%llu kernel_variant=%s arch=%s\n",
		qrwb_cxt.cfg.workload, qrwb_cxt.nthreads, qrwb_cxt.seed,
		qrwb_kernel_variant(), QRWB_ARCH);

	ret = qrwb_cxt.wl->run();
	if (ret)
		goto out;
	/* a program workload's run goes on with the init's commands */
	if (!qrwb_cxt.wl->command) {
		ret = qrwb_emit_end();
		if (ret)
			goto out;
	}

	qrwb_cxt.proc = proc_create("qrwbench", qrwb_cxt.wl->command ? 0644 : 0444,
				    NULL, &qrwb_proc_ops);
	if (!qrwb_cxt.proc) {
		ret = -ENOMEM;
		goto out;
	}
	if (qrwb_cxt.wl->command)
		return 0;
	qrwb_report(t0);
	qrwb_free_all();
	return 0;
out:
	pr_err("failed: error %d\n", ret);
	qrwb_free_all();
	vfree(qrwb_cxt.out.buf);
	qrwb_cxt.out.buf = NULL;
	return ret;
}

static void __exit qrwb_exit(void)
{
	proc_remove(qrwb_cxt.proc);
	vfree(qrwb_cxt.out.buf);
}

module_init(qrwb_init);
module_exit(qrwb_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("qrwbench: memory ordering cost of qrwlocks and atomics");

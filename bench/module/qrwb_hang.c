// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench workload=hang, test only: module_init never returns, so that
 * the host's boot timeout is tested. It sleeps as soon as its parameters
 * are read, before the start line: the console ends with its one line.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/printk.h>

#include "qrwb_internal.h"

/* its params() and its run() alike (the run is never reached) */
static int qrwb_hang(void)
{
	pr_info("workload=hang: sleeping until the machine is stopped\n");
	for (;;)
		msleep(1000);
	return 0;
}

const struct qrwb_workload qrwb_wl_hang = {
	.params		= qrwb_hang,
	.run		= qrwb_hang,
};

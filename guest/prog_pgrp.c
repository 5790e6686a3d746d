// SPDX-License-Identifier: GPL-2.0
/*
 * pgrp: every worker loops getpriority(PRIO_PGRP, 0), which walks its
 * process group under read_lock(&tasklist_lock); pgrp_write_pct percent
 * of its calls are instead setpgid(), write_lock_irq(&tasklist_lock),
 * moving itself between the window's group (a holder process, arg[0])
 * and a group of its own.
 */
#include <linux/resource.h>
#include <linux/unistd.h>

#include "prog.h"

/* the group: a child of the init that leads it and sleeps */
static int pgrp_setup(struct prog_shm *shm)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		setpgid(0, 0);
		for (;;)
			sleep(1000);
	}
	setpgid(pid, pid);	/* as the child does: whichever runs first */
	shm->arg[0] = pid;
	return 0;
}

static void pgrp_teardown(struct prog_shm *shm)
{
	int st;

	kill(shm->arg[0], SIGKILL);
	waitpid(shm->arg[0], &st, 0);
}

static int pgrp_worker_init(struct prog_ctx *c)
{
	if (setpgid(0, c->shm->arg[0]) < 0)
		return prog_fail(c, "setpgid (join)", errno);
	c->state = 1;		/* in the window's group */
	return 0;
}

static int pgrp_op(struct prog_ctx *c)
{
	long r;

	if (prog_pct(c) < c->shm->write_pct) {
		/* leave the group for one of its own, or come back */
		pid_t to = c->state ? 0 : c->shm->arg[0];

		if (setpgid(0, to) < 0)
			return prog_fail(c, "setpgid", errno);
		c->state = !c->state;
		return PROG_WRITE;
	}
	r = my_syscall2(__NR_getpriority, PRIO_PGRP, 0);
	if (r < 0)
		return prog_fail(c, "getpriority(PRIO_PGRP)", -r);
	return PROG_READ;
}

const struct prog prog_pgrp = {
	.name		= "pgrp",
	.rw		= 1,
	.batch		= 8,
	.write_param	= "pgrp_write_pct",
	.setup		= pgrp_setup,
	.worker_init	= pgrp_worker_init,
	.op		= pgrp_op,
	.teardown	= pgrp_teardown,
};

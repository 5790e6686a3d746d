// SPDX-License-Identifier: GPL-2.0
/*
 * forkwait: every worker loops fork() -> the child _exit(0)s -> waitpid().
 * tasklist_lock: write_lock_irq in copy_process(), exit_notify() and
 * release_task(); read_lock in __do_wait(). One op is one child's life.
 */
#include <linux/unistd.h>

#include "prog.h"

static int forkwait_op(struct prog_ctx *c)
{
	int st = 0;
	pid_t pid = fork();

	if (pid < 0)
		return prog_fail(c, "fork", errno);
	if (pid == 0)
		my_syscall1(__NR_exit, 0);
	if (waitpid(pid, &st, 0) != pid)
		return prog_fail(c, "waitpid", errno);
	if (st)		/* not exited with 0 */
		return prog_fail(c, "child wait status", st);
	return PROG_WRITE;
}

const struct prog prog_forkwait = {
	.name	= "forkwait",
	.rw	= 0,
	.batch	= 1,
	.op	= forkwait_op,
};

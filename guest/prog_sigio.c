// SPDX-License-Identifier: GPL-2.0
/*
 * sigio: one pipe per window, both ends O_ASYNC | O_NONBLOCK with an
 * owner (F_SETOWN), shared by every worker. Each op writes a byte (the
 * reader's send_sigio(): read_lock(&f_owner->lock)), reads a byte back
 * (the writer's send_sigio()) and takes the pending SIGIO, blocked in
 * every worker, with a zero-timeout sigtimedwait(); sigio_setown_pct
 * percent of the ops are instead F_SETOWN of one end to a random
 * worker: write_lock_irq(&f_owner->lock).
 */
#include <linux/fcntl.h>
#include <linux/time_types.h>
#include <linux/unistd.h>
#include <asm/signal.h>

#include "prog.h"

#define SIGIO_MASK	(1UL << (SIGIO - 1))

static int sigio_fcntl(int fd, int cmd, long arg)
{
	return my_syscall3(__NR_fcntl, fd, cmd, arg);
}

static int sigio_setup(struct prog_shm *shm)
{
	int fds[2], i, r;

	if (pipe2(fds, O_NONBLOCK) < 0)
		return -errno;
	for (i = 0; i < 2; i++) {
		/* owner: the init, which ignores SIGIO (pid 1) until a worker takes over */
		r = sigio_fcntl(fds[i], F_SETOWN, getpid());
		if (r >= 0)
			r = sigio_fcntl(fds[i], F_SETFL, O_NONBLOCK | FASYNC);
		if (r < 0) {
			close(fds[0]);
			close(fds[1]);
			return r;
		}
	}
	shm->arg[0] = fds[0];
	shm->arg[1] = fds[1];
	return 0;
}

static void sigio_teardown(struct prog_shm *shm)
{
	close(shm->arg[0]);
	close(shm->arg[1]);
}

static int sigio_worker_init(struct prog_ctx *c)
{
	unsigned long set = SIGIO_MASK;
	int r = my_syscall4(__NR_rt_sigprocmask, SIG_BLOCK, &set, NULL, sizeof(set));

	return r < 0 ? prog_fail(c, "rt_sigprocmask", -r) : 0;
}

static int sigio_op(struct prog_ctx *c)
{
	static const struct __kernel_timespec zero;
	unsigned long set = SIGIO_MASK;
	struct prog_shm *shm = c->shm;
	char b = 'x';
	long r;

	if (prog_pct(c) < shm->write_pct) {
		int end = prog_pct(c) & 1;
		int to = shm->w[prog_pct(c) % shm->nthreads].pid;

		r = sigio_fcntl(shm->arg[end], F_SETOWN, to);
		if (r < 0)
			return prog_fail(c, "fcntl(F_SETOWN)", -r);
		return PROG_WRITE;
	}
	r = my_syscall3(__NR_write, shm->arg[1], &b, 1);
	if (r < 0 && r != -EAGAIN)
		return prog_fail(c, "write to the pipe", -r);
	r = my_syscall3(__NR_read, shm->arg[0], &b, 1);
	if (r < 0 && r != -EAGAIN)
		return prog_fail(c, "read from the pipe", -r);
	r = my_syscall4(__NR_rt_sigtimedwait, &set, NULL, &zero, sizeof(set));
	if (r < 0 && r != -EAGAIN)
		return prog_fail(c, "rt_sigtimedwait", -r);
	return PROG_READ;
}

const struct prog prog_sigio = {
	.name		= "sigio",
	.rw		= 1,
	.batch		= 8,
	.write_param	= "sigio_setown_pct",
	.setup		= sigio_setup,
	.worker_init	= sigio_worker_init,
	.op		= sigio_op,
	.teardown	= sigio_teardown,
};

// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench program workloads: the harness in the guest's init (prog.h).
 *
 * After finit_module has emitted the begin record and calibrated the
 * in-boot reference (bench/module/qrwb_program.c), the run is warmup_reps
 * + reps rounds; each round measures the program's window and one round
 * of the reference, in a random order, and the first warmup_reps rounds
 * are not emitted. A program window: one worker process per thread,
 * forked for the window and pinned to its CPU, released together; each
 * calls the program's op() until warmup_ms have passed (at least once),
 * counts its ops until duration_ms later, reading the clock every batch
 * ops. The window's ns run from the first worker's first clock read at
 * or after the window's start to the last one's last, at or after its
 * end (one op may straddle either, so ns may be shorter than duration_ms).
 * A worker that leaves before the window's end, or counts nothing in it,
 * makes a short window: a failed run. The counts go to the module as one "res" command,
 * which writes the result record.
 *
 * Failed runs (never data): a worker killed or exiting non-zero, a failed
 * system call, a worker that left its window early or counted nothing,
 * a command the module refused. The init then prints one line
 *   qrwbench-init: failed: <workload>: <why>
 * and no records (the host: results/records.py).
 */
#include <linux/sched.h>
#include <linux/time.h>
#include <linux/unistd.h>
#include <linux/fcntl.h>
#include <linux/mman.h>

#include "prog.h"

/* wait(2) statuses (nolibc's WIFSIGNALED is true for an exit status 0) */
#define ST_SIGNALED(st)	(((st) & 0x7f) != 0 && ((st) & 0x7f) != 0x7f)
#define ST_SIGNAL(st)	((st) & 0x7f)
#define ST_EXITED(st)	(((st) & 0x7f) == 0)
#define ST_CODE(st)	(((st) >> 8) & 0xff)
#define NOHANG		1	/* WNOHANG */

/* the parameters the harness reads, defaulted as the module defaults them */
static const struct { const char *name; unsigned long long def; } prog_pdef[] = {
#define QRWB_SPARAM(n, def, desc)
#define QRWB_UPARAM(n, def, lo, hi, desc)	{ #n, def },
#include "qrwb_params.def"
#undef QRWB_SPARAM
#undef QRWB_UPARAM
};

static const char *prog_params;
static const char *prog_name;
static char prog_why[256];

static unsigned long long param(const char *name)
{
	size_t len = strlen(name);
	const char *p = prog_params;
	unsigned int i;

	while (p && *p) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, name, len) && p[len] == '=')
			return strtoull(p + len + 1, NULL, 10);
		p = strchr(p, ' ');
	}
	for (i = 0; i < sizeof(prog_pdef) / sizeof(prog_pdef[0]); i++)
		if (!strcmp(prog_pdef[i].name, name))
			return prog_pdef[i].def;
	return 0;
}

static unsigned long long now_ns(void)
{
	struct timespec ts;

	if (my_syscall2(__NR_clock_gettime, CLOCK_MONOTONIC, &ts))
		return 0;
	return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static unsigned long long splitmix(unsigned long long *s)
{
	unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

unsigned int prog_pct(struct prog_ctx *c)
{
	return splitmix(&c->rng) % 100;
}

static void fmt_num(char *dst, size_t room, unsigned long long v)
{
	char d[24];

	u64toa_r(v, d);		/* nolibc */
	strncat(dst, d, room - strlen(dst) - 1);
}

static void cat(char *dst, size_t room, const char *s)
{
	strncat(dst, s, room - strlen(dst) - 1);
}

int prog_fail(struct prog_ctx *c, const char *what, int e)
{
	char *why = c->self->why;

	why[0] = 0;
	cat(why, sizeof(c->self->why), what);
	cat(why, sizeof(c->self->why), ": errno ");
	fmt_num(why, sizeof(c->self->why), e);
	return -e;
}

/* the run's failure, printed once by prog_run() */
static int failed(const char *what, long long num, const char *more)
{
	prog_why[0] = 0;
	cat(prog_why, sizeof(prog_why), what);
	if (num >= 0)
		fmt_num(prog_why, sizeof(prog_why), num);
	if (more)
		cat(prog_why, sizeof(prog_why), more);
	return -1;
}

/* the CPUs this process may run on: cpus[i] is worker i's */
static int online_cpus(int *cpus)
{
	unsigned long mask[PROG_MAX_THREADS / (8 * sizeof(long)) + 1] = { 0 };
	int n = 0, b;

	if (my_syscall3(__NR_sched_getaffinity, 0, sizeof(mask), mask) < 0)
		return 0;
	for (b = 0; b < PROG_MAX_THREADS; b++)
		if (mask[b / (8 * sizeof(long))] & (1UL << (b % (8 * sizeof(long)))))
			cpus[n++] = b;
	return n;
}

static int pin(int cpu)
{
	unsigned long mask[PROG_MAX_THREADS / (8 * sizeof(long)) + 1] = { 0 };

	mask[cpu / (8 * sizeof(long))] = 1UL << (cpu % (8 * sizeof(long)));
	return my_syscall3(__NR_sched_setaffinity, 0, sizeof(mask), mask);
}

/* a worker: never returns */
static void worker(const struct prog *p, struct prog_shm *shm, int idx, int cpu,
		   unsigned long long seed, int fault)
{
	struct prog_ctx c = { shm, &shm->w[idx], idx, seed ^ ((unsigned long long)idx << 32), 0 };
	struct prog_worker *w = c.self;
	unsigned long long t, ops = 0, reads = 0, writes = 0;
	unsigned int i;
	int r, ret;

	w->pid = getpid();
	ret = pin(cpu);
	if (ret < 0) {
		prog_fail(&c, "sched_setaffinity", -ret);
		my_syscall1(__NR_exit, 1);
	}
	if (p->worker_init && p->worker_init(&c) < 0)
		my_syscall1(__NR_exit, 1);
	__atomic_add_fetch(&shm->nready, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&shm->go, __ATOMIC_ACQUIRE))
		sched_yield();
	/* the warm-up: at least one op */
	do {
		for (i = 0; i < p->batch; i++)
			if (p->op(&c) < 0)
				my_syscall1(__NR_exit, 1);
		t = now_ns();
	} while (t < shm->t_start);
	w->t_first = t;
	/* the test hooks (prog_fault=): the last worker, as its window starts */
	if (fault == 1 && idx == shm->nthreads - 1)
		kill(getpid(), SIGKILL);
	for (; !(fault == 2 && idx == shm->nthreads - 1);) {
		for (i = 0; i < p->batch; i++) {
			r = p->op(&c);
			if (r < 0)
				my_syscall1(__NR_exit, 1);
			ops++;
			reads += r == PROG_READ;
			writes += r == PROG_WRITE;
		}
		t = now_ns();
		if (t >= shm->t_end)
			break;
	}
	w->t_last = t;
	w->ops = ops;
	w->reads = reads;
	w->writes = writes;
	/* every worker stays until the init lets them go: their pids stay valid (sigio) */
	__atomic_add_fetch(&shm->ndone, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&shm->release, __ATOMIC_ACQUIRE))
		sched_yield();
	my_syscall1(__NR_exit, 0);
}

/* one program window: 0 and its result command in cmd, or -1 (prog_why) */
static int window(const struct prog *p, struct prog_shm *shm, const int *cpus,
		  unsigned long long seed, int fault, char *cmd, size_t room,
		  unsigned int rep)
{
	unsigned long long warm = param("warmup_ms") * 1000000ULL;
	unsigned long long dur = param("duration_ms") * 1000000ULL;
	unsigned long long first = ~0ULL, last = 0;
	int n = shm->nthreads, t, st[PROG_MAX_THREADS], reaped[PROG_MAX_THREADS] = { 0 };
	int ret = 0, bad = -1;
	pid_t pid;

	memset(shm->w, 0, sizeof(shm->w));
	shm->go = 0;
	shm->nready = 0;
	shm->ndone = 0;
	shm->release = 0;
	if (p->setup) {
		ret = p->setup(shm);
		if (ret < 0)
			return failed("setup: errno ", -ret, NULL);
	}
	for (t = 0; t < n; t++) {
		pid = fork();
		if (pid < 0) {
			ret = failed("fork of worker ", t, NULL);
			break;
		}
		if (pid == 0)
			worker(p, shm, t, cpus[t], seed, fault);
		shm->w[t].pid = pid;
	}
	if (!ret) {
		/* every worker pinned and ready, then the window */
		while (__atomic_load_n(&shm->nready, __ATOMIC_ACQUIRE) < n) {
			for (t = 0; t < n; t++)
				if (shm->w[t].why[0] ||
				    (reaped[t] = waitpid(shm->w[t].pid, &st[t], NOHANG) ==
				     shm->w[t].pid)) {
					bad = t;
					break;
				}
			if (bad >= 0)
				break;
			sched_yield();
		}
		shm->t_start = now_ns() + warm;
		shm->t_end = shm->t_start + dur;
		__atomic_store_n(&shm->go, 1, __ATOMIC_RELEASE);
		/*
		 * Asleep through the window; then, every millisecond, until every
		 * worker is done or one has died (which the reaping below reports).
		 */
		t = (shm->t_end - now_ns()) / 1000000;
		if (t > 0 && t < 3600000)
			msleep(t + 1);
		while (bad < 0 && __atomic_load_n(&shm->ndone, __ATOMIC_ACQUIRE) < n) {
			for (t = 0; t < n && bad < 0; t++)
				if (!reaped[t] && (reaped[t] = waitpid(shm->w[t].pid, &st[t], NOHANG) ==
						   shm->w[t].pid))
					bad = t;
			if (bad < 0)
				msleep(1);
		}
	}
	__atomic_store_n(&shm->release, 1, __ATOMIC_RELEASE);
	/* reap every worker; the first that did not end well fails the run */
	for (t = 0; t < n && shm->w[t].pid > 0; t++) {
		if (!reaped[t] && waitpid(shm->w[t].pid, &st[t], 0) != shm->w[t].pid) {
			if (!ret)
				ret = failed("waitpid of worker ", t, NULL);
			continue;
		}
		if (ret)
			continue;
		if (ST_SIGNALED(st[t])) {
			ret = failed("worker ", t, "");
			cat(prog_why, sizeof(prog_why), " killed by signal ");
			fmt_num(prog_why, sizeof(prog_why), ST_SIGNAL(st[t]));
		} else if (!ST_EXITED(st[t]) || ST_CODE(st[t])) {
			ret = failed("worker ", t, ": ");
			cat(prog_why, sizeof(prog_why),
			    shm->w[t].why[0] ? shm->w[t].why : "exited with an error");
		}
	}
	if (p->teardown)
		p->teardown(shm);
	if (ret)
		return ret;
	for (t = 0; t < n; t++) {
		struct prog_worker *w = &shm->w[t];

		if (!w->ops || w->t_last < shm->t_end) {
			ret = failed("short window: worker ", t, NULL);
			cat(prog_why, sizeof(prog_why), " counted ");
			fmt_num(prog_why, sizeof(prog_why), w->ops);
			cat(prog_why, sizeof(prog_why), " ops and left ");
			fmt_num(prog_why, sizeof(prog_why),
				w->t_last < shm->t_end ? shm->t_end - w->t_last : 0);
			cat(prog_why, sizeof(prog_why), " ns before the window's end");
			return ret;
		}
		first = w->t_first < first ? w->t_first : first;
		last = w->t_last > last ? w->t_last : last;
	}
	if (last <= first)
		return failed("empty window: ", last - first, " ns");
	cmd[0] = 0;
	cat(cmd, room, "res ");
	fmt_num(cmd, room, rep);
	cat(cmd, room, " ");
	fmt_num(cmd, room, last - first);
	cat(cmd, room, " ");
	fmt_num(cmd, room, p->batch);
	cat(cmd, room, p->rw ? " 1" : " 0");
	for (t = 0; t < n; t++) {
		cat(cmd, room, " ");
		fmt_num(cmd, room, shm->w[t].ops);
		cat(cmd, room, " ");
		fmt_num(cmd, room, p->rw ? shm->w[t].reads : 0);
		cat(cmd, room, " ");
		fmt_num(cmd, room, p->rw ? shm->w[t].writes : 0);
	}
	return 0;
}

static int command(int fd, const char *cmd)
{
	ssize_t n = write(fd, cmd, strlen(cmd));

	if (n < 0) {
		failed("the module refused '", -1, NULL);
		cat(prog_why, sizeof(prog_why), cmd);
		prog_why[60] = 0;
		cat(prog_why, sizeof(prog_why), "...': errno ");
		fmt_num(prog_why, sizeof(prog_why), errno);
		return -1;
	}
	return 0;
}

static void print_failure(void)
{
	const char *s[] = { "qrwbench-init: failed: ", prog_name, ": ", prog_why, "\n" };
	unsigned int i;

	for (i = 0; i < 5; i++)
		write(1, s[i], strlen(s[i]));
}

int prog_run(const struct prog *p, const char *params)
{
	static char cmd[4096];
	static int cpus[PROG_MAX_THREADS];
	unsigned long long seed, reps, warmup, round;
	struct prog_shm *shm;
	int fd, ncpu, n, ret = 0, fault;

	prog_params = params;
	prog_name = p->name;
	reps = param("reps");
	warmup = param("warmup_reps");
	fault = param("prog_fault");
	seed = param("seed");
	if (!seed)
		seed = now_ns() | 1;
	ncpu = online_cpus(cpus);
	n = param("threads") ? (int)param("threads") : ncpu;
	if (n < 1 || n > ncpu || n > PROG_MAX_THREADS) {
		failed("threads: ", n, " is not in 1..the CPUs init may run on");
		goto out;
	}
	shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		failed("mmap: errno ", errno, NULL);
		goto out;
	}
	memset(shm, 0, sizeof(*shm));
	shm->nthreads = n;
	shm->write_pct = p->write_param ? param(p->write_param) : 0;
	fd = open("/proc/qrwbench", O_WRONLY);
	if (fd < 0) {
		failed("open /proc/qrwbench: errno ", errno, NULL);
		goto out;
	}
	for (round = 0; round < warmup + reps && !ret; round++) {
		int measured = round >= warmup;
		unsigned long long rep = measured ? round - warmup : 0;
		int ref_first = splitmix(&seed) & 1;
		char ref[64] = "ref ";

		fmt_num(ref, sizeof(ref), rep);
		cat(ref, sizeof(ref), measured ? " 1" : " 0");
		if (ref_first)
			ret = command(fd, ref);
		if (!ret)
			ret = window(p, shm, cpus, splitmix(&seed), measured ? fault : 0,
				     cmd, sizeof(cmd), rep);
		if (!ret && measured)
			ret = command(fd, cmd);
		if (!ret && !ref_first)
			ret = command(fd, ref);
	}
	if (!ret)
		ret = command(fd, "end");
	close(fd);
	if (!ret)
		return 0;
out:
	print_failure();
	return -1;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * qrwbench guest init, libc-free (the kernel tree's tools/include/nolibc).
 *
 * 1. mounts /proc and /sys (and devtmpfs on /dev if the kernel gave init no
 *    console), waits until the clocksource is final (not tsc-early),
 * 2. passes every "qrwbench.<param>=<value>" token of /proc/cmdline, without
 *    the prefix, as the parameter string of finit_module(/qrwbench.ko);
 *    the module runs the benchmark inside finit_module,
 * 3. where workload= names a program (bench/module/qrwb_programs.def),
 *    runs it (guest/prog.c: its windows and the module's reference, the
 *    records through /proc/qrwbench; a failure is one line
 *    "qrwbench-init: failed: <workload>: <why>" and no records),
 * 4. copies /proc/qrwbench (the records) to stdout (/dev/console),
 *    waits until the console has sent it, and reboots (QEMU -no-reboot
 *    exits). If finit_module fails it prints
 *      @@QRWB {"type":"error","schema":1,"errno":N,"stage":"load"}
 *    instead.
 *
 * Built by guest/mkinitrd.sh: gcc -static -nostdlib -fno-stack-protector
 * -isystem <UAPI headers> -include <tree>/tools/include/nolibc/nolibc.h -lgcc
 */
#include <linux/reboot.h>
#include <linux/unistd.h>
#include <asm/ioctls.h>

#include "prog.h"

#define MODULE_PATH	"/qrwbench.ko"
#define RECORDS_PATH	"/proc/qrwbench"
#define PARAM_PREFIX	"qrwbench."
#define CLOCKSOURCE_PATH "/sys/devices/system/clocksource/clocksource0/current_clocksource"

static char cmdline[8192];
static char params[8192];
static char buf[65536];

static void put(const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t n = write(1, s, len);

		if (n <= 0)
			return;
		s += n;
		len -= n;
	}
}

static void put_num(long v)
{
	char d[24];

	i64toa_r(v, d);		/* nolibc */
	put(d);
}

/* wait until the console has transmitted everything, then reboot */
static void finish(void)
{
	ioctl(1, TCSBRK, (void *)1);	/* tcdrain() */
	reboot(LINUX_REBOOT_CMD_RESTART);
	for (;;)
		sleep(1);
}

static void msg(const char *s)
{
	put("qrwbench-init: ");
	put(s);
}

static long read_file(const char *path, char *dst, size_t size)
{
	long total = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	while ((size_t)total < size - 1) {
		ssize_t n = read(fd, dst + total, size - 1 - total);

		if (n < 0) {
			total = -errno;
			break;
		}
		if (n == 0)
			break;
		total += n;
	}
	close(fd);
	if (total >= 0)
		dst[total] = 0;
	return total;
}

/*
 * x86 guests without a calibration reference start on "tsc-early" and
 * switch to "tsc" about a second later (a stop_machine() in the middle of
 * the run): wait for the final clocksource first, at most 5 s, and say
 * which one the benchmark runs on.
 */
static void wait_clocksource(void)
{
	static char cs[64];
	int i;

	for (i = 0; i < 50; i++) {
		if (read_file(CLOCKSOURCE_PATH, cs, sizeof(cs)) <= 0)
			return;
		if (strcmp(cs, "tsc-early\n"))
			break;
		msleep(100);
	}
	msg("clocksource ");
	put(cs);
}

/* the workload= value of params (the module's default: not a program) */
static const struct prog *find_program(void)
{
	static char name[64];
	const char *p = params;
	size_t n = 0;

	while (p && *p) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, "workload=", 9)) {
			p += 9;
			n = 0;
			while (*p && *p != ' ' && n < sizeof(name) - 1)
				name[n++] = *p++;
			name[n] = 0;
		}
		p = strchr(p, ' ');
	}
	return n ? prog_find(name) : NULL;
}

/* the qrwbench.* tokens of the kernel command line, prefix removed */
static void collect_params(void)
{
	size_t plen = strlen(PARAM_PREFIX), out = 0;
	char *p = cmdline;

	while (*p) {
		char *tok;
		size_t len;

		while (*p == ' ' || *p == '\n' || *p == '\t')
			p++;
		tok = p;
		while (*p && *p != ' ' && *p != '\n' && *p != '\t')
			p++;
		len = p - tok;
		if (len > plen && !strncmp(tok, PARAM_PREFIX, plen) &&
		    out + len - plen + 2 < sizeof(params)) {
			if (out)
				params[out++] = ' ';
			memcpy(params + out, tok + plen, len - plen);
			out += len - plen;
		}
	}
	params[out] = 0;
}

/*
 * While the records go out, kernel messages written to the same console
 * could land in the middle of a record line. So the console log level is
 * lowered for that window, and what the kernel logged meanwhile is read back
 * from /dev/kmsg and printed afterwards, one "qrwbench-init: kmsg:" line each,
 * where the host's fault scan still sees it.
 */
static int kmsg_fd = -1;

static void console_quiet(void)
{
	int probe = open("/dev/kmsg", O_RDONLY);

	if (probe >= 0) {
		close(probe);
	} else {
		mkdir("/dev", 0755);
		mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	}
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
	my_syscall3(__NR_syslog, 8 /* SYSLOG_ACTION_CONSOLE_LEVEL */, 0, 1);
}

static void console_replay(void)
{
	static char rec[2048];
	ssize_t n;

	ioctl(1, TCSBRK, (void *)1);	/* the records are out */
	my_syscall3(__NR_syslog, 8 /* SYSLOG_ACTION_CONSOLE_LEVEL */, 0, 7);
	if (kmsg_fd < 0)
		return;
	for (;;) {
		char *text, *end;

		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten entries: go on */
		if (n <= 0)
			break;
		rec[n] = 0;
		text = strchr(rec, ';');
		if (!text)
			continue;
		text++;
		end = strchr(text, '\n');
		if (end)
			*end = 0;
		msg("kmsg: ");
		put(text);
		put("\n");
	}
	close(kmsg_fd);
}

static void copy_records(void)
{
	int fd = open(RECORDS_PATH, O_RDONLY);
	ssize_t n;

	if (fd < 0) {
		msg("cannot open " RECORDS_PATH ": errno ");
		put_num(errno);
		put("\n");
		return;
	}
	for (;;) {
		char *s;

		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (s = buf; n > 0;) {
			ssize_t w = write(1, s, n);

			if (w <= 0) {
				n = 0;
				break;
			}
			s += w;
			n -= w;
		}
	}
	if (n < 0) {
		msg("read " RECORDS_PATH ": errno ");
		put_num(errno);
		put("\n");
	}
	close(fd);
}

int main(void)
{
	const struct prog *prog;
	long ret;
	int fd;

	mkdir("/proc", 0755);
	mount("proc", "/proc", "proc", 0, NULL);
	mkdir("/sys", 0755);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	if (write(1, "", 0) < 0) {
		/* no /dev/console in the initramfs: get one from devtmpfs */
		mkdir("/dev", 0755);
		mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
		fd = open("/dev/console", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
	}

	wait_clocksource();

	if (read_file("/proc/cmdline", cmdline, sizeof(cmdline)) < 0)
		cmdline[0] = 0;
	collect_params();
	msg("loading " MODULE_PATH " with '");
	put(params);
	put("'\n");

	fd = open(MODULE_PATH, O_RDONLY);
	if (fd < 0) {
		ret = -errno;
	} else {
		ret = my_syscall3(__NR_finit_module, fd, params, 0);
		close(fd);
	}
	if (ret < 0) {
		put("@@QRWB {\"type\":\"error\",\"schema\":1,\"errno\":");
		put_num(-ret);
		put(",\"stage\":\"load\"}\n");
		finish();
	}

	prog = find_program();
	if (prog && prog_run(prog, params))
		finish();	/* the failure is printed: no records */

	console_quiet();
	copy_records();
	console_replay();
	finish();
	return 0;
}

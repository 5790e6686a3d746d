// SPDX-License-Identifier: GPL-2.0
/*
 * Print the host's TSC frequency in kHz, measured against CLOCK_MONOTONIC_RAW.
 *
 * Why: QEMU's TCG gives an x86_64 guest the host's raw TSC, but a microvm
 * guest has no PIT/HPET/PM-timer reference to calibrate it against, so the
 * kernel marks the TSC unstable and falls back to jiffies (4 ms resolution at
 * HZ=250). The launcher passes this value as tsc_early_khz= (with
 * tsc=reliable) so the guest clocksource is the TSC.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	double best = 0;

	for (int i = 0; i < 3; i++) {
		double t0 = now();
		uint64_t c0 = __rdtsc();

		nanosleep(&pause, NULL);
		double t1 = now();
		uint64_t c1 = __rdtsc();
		double khz = (c1 - c0) / (t1 - t0) / 1e3;

		if (khz > best)
			best = khz;
	}
	printf("%.0f\n", best);
	return 0;
}

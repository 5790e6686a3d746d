// SPDX-License-Identifier: GPL-2.0
/* The program workloads: one row of bench/module/qrwb_programs.def each. */
#include "prog.h"

#define QRWB_PROGRAM(name)	extern const struct prog prog_##name;
#include "qrwb_programs.def"
#undef QRWB_PROGRAM

static const struct prog *const progs[] = {
#define QRWB_PROGRAM(name)	&prog_##name,
#include "qrwb_programs.def"
#undef QRWB_PROGRAM
};

const struct prog *prog_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		if (!strcmp(progs[i]->name, name))
			return progs[i];
	return NULL;
}

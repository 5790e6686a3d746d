// SPDX-License-Identifier: GPL-2.0
/* qrwbench atomics loops, copy c1mb: see qrwb_loops.h */
#define QRWB_INJECT_MB
#define QRWB_COPY c1mb
#include "qrwb_loops.h"

// SPDX-License-Identifier: GPL-2.0
/* qrwbench atomics loops, copy c0: see qrwb_loops.h */
#define QRWB_COPY c0
#include "qrwb_loops.h"

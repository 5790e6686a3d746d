// SPDX-License-Identifier: GPL-2.0
/* qrwbench atomics loops, copy c1: see qrwb_loops.h */
#define QRWB_COPY c1
#include "qrwb_loops.h"

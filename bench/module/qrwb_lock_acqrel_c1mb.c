// SPDX-License-Identifier: GPL-2.0
/* module qrwlock copy 1 plus one smp_mb() per op (aa_inject_mb=1) */
#define QRWB_LK_KIND QRWB_KIND_MODULE
#define QRWB_LK_ORD QRWB_ORD_ACQREL
#define QRWB_LK_NAME acqrel_c1mb
#define QRWB_LK_MB 1
#include "qrwb_lock_tmpl.h"

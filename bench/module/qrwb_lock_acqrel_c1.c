// SPDX-License-Identifier: GPL-2.0
/* module qrwlock copy, acquire/release, copy 1 (A/A control): see qrwb_lock_tmpl.h */
#define QRWB_LK_KIND QRWB_KIND_MODULE
#define QRWB_LK_ORD QRWB_ORD_ACQREL
#define QRWB_LK_NAME acqrel_c1
#include "qrwb_lock_tmpl.h"

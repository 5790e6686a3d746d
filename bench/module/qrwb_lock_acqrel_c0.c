// SPDX-License-Identifier: GPL-2.0
/* module qrwlock copy, acquire/release (upstream), copy 0: see qrwb_lock_tmpl.h */
#define QRWB_LK_KIND QRWB_KIND_MODULE
#define QRWB_LK_ORD QRWB_ORD_ACQREL
#define QRWB_LK_NAME acqrel_c0
#include "qrwb_lock_tmpl.h"

// SPDX-License-Identifier: GPL-2.0
/* module qrwlock copy, relaxed (not a lock on weak CPUs): see qrwb_lock_tmpl.h */
#define QRWB_LK_KIND QRWB_KIND_MODULE
#define QRWB_LK_ORD QRWB_ORD_RELAXED
#define QRWB_LK_NAME relaxed_c0
#include "qrwb_lock_tmpl.h"

// SPDX-License-Identifier: GPL-2.0
/* module qrwlock copy, fully ordered: see qrwb_lock_tmpl.h */
#define QRWB_LK_KIND QRWB_KIND_MODULE
#define QRWB_LK_ORD QRWB_ORD_FULL
#define QRWB_LK_NAME full_c0
#include "qrwb_lock_tmpl.h"

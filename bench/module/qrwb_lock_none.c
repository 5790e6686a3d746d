// SPDX-License-Identifier: GPL-2.0
/* rwlock harness without a lock (overhead_ps): see qrwb_lock_tmpl.h */
#define QRWB_LK_KIND QRWB_KIND_NONE
#define QRWB_LK_NAME none
#include "qrwb_lock_tmpl.h"

// SPDX-License-Identifier: GPL-2.0
/* rwlock loop on the kernel's rwlock_t: see qrwb_lock_tmpl.h */
#define QRWB_LK_KIND QRWB_KIND_KERNEL
#define QRWB_LK_NAME kernel
#include "qrwb_lock_tmpl.h"

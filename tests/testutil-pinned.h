/* testutil-pinned.h: what the pinned tests share (testutil-pinned.c). */
#ifndef TESTUTIL_PINNED_H
#define TESTUTIL_PINNED_H

#include "testutil.h"

#define MiB ((gsize) 1 << 20)

gboolean host_pools_supported (void);

gboolean require_pool_mode (void);

void sweep (const char *spec, gboolean expect_calls);

#endif

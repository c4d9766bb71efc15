/* testutil-pinned.h: what the pinned tests share (testutil-pinned.c). */
#ifndef TESTUTIL_PINNED_H
#define TESTUTIL_PINNED_H

#include "testutil.h"

#define MiB ((gsize) 1 << 20)

int device_attribute (CUdevice_attribute attr);

gboolean host_pools_supported (void);

gboolean require_pool_mode (void);

/* Sets a fake device attribute for the rest of the test, remembering its value. */
typedef struct
{
  CUdevice_attribute attr;
  int value;
} SavedAttribute;

void override_attribute (SavedAttribute *saved, CUdevice_attribute attr, int value);

void restore_attribute (const SavedAttribute *saved);

void sweep (const char *spec, gboolean expect_calls);

#endif

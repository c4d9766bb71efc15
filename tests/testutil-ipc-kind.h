/* testutil-ipc-kind.h: what the ipc kind's tests share (testutil-ipc-kind.c). */
#ifndef TESTUTIL_IPC_KIND_H
#define TESTUTIL_IPC_KIND_H

#include "testutil.h"

#define KiB ((gsize) 1024)

#define MiB (1024 * KiB)

MemresBuffer *alloc_pattern (MemresResource *mr, gsize size, guint32 seed);

void assert_buffer_pattern (MemresBuffer *buf, gsize offset, gsize size, guint32 seed,
                            gsize seed_offset);

MemresResource *import_own (MemresResource *exporter);

#endif

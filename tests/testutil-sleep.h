/* testutil-sleep.h: what the sleep tests share (testutil-sleep.c). */
#ifndef TESTUTIL_SLEEP_H
#define TESTUTIL_SLEEP_H

#include "testutil.h"

#define MiB ((gsize) 1 << 20)

gboolean require_device (void);

MemresResource *new_ok (const char *spec);

MemresBuffer *alloc_tagged (MemresResource *mr, const char *tag, gsize size);

int live_handles (void);

guint64 device_free_bytes (void);

void sleep_ok (MemresResource *mr, const char *tag, MemresSleepPolicy *policy);

void wake_ok (MemresResource *mr, const char *tag);

MemresSleepPolicy *policy_new (MemresSleepMode mode);

void assert_sleep_segment_events (MemresResource *mr, const char *tag, MemresBuffer *const *bufs,
                                  guint n_bufs, guint n_segments, guint64 bytes);

void test_no_open_buffer (gconstpointer spec);

#endif

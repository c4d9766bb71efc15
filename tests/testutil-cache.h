/* testutil-cache.h: what the cache tests share (testutil-cache.c). */
#ifndef TESTUTIL_CACHE_H
#define TESTUTIL_CACHE_H

#include "testutil.h"

#define KiB ((gsize) 1024)

#define MiB (1024 * KiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

/* The device upstream: a pool of the cache's own, so that its statistics are the cache's. */
#define DEVICE_UPSTREAM "dmr:pool=new"

GVariant *counters_ok (MemresResource *mr);

guint64 counter (MemresResource *mr, const char *name);

void class_counts (MemresResource *mr, gsize size, guint64 *hits, guint64 *misses, guint64 *cached);

void trim_ok (MemresResource *mr);

void assert_upstream_empty (MemresResource *mr, const FakeCudaCounts *base);

typedef struct
{
  MemresResource *mr;
  guint n;
  GMutex lock;
  GCond cond;
  gboolean filled, go;
} ExitJob;

gpointer exit_thread (gpointer data);

void exit_job_go (ExitJob *job);

void exit_job_wait_filled (ExitJob *job);

#endif

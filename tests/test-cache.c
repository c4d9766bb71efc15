/* test-cache.c: the `cache` adaptor over host memory and over the device pool, against the fake
 * driver (suite fake) and the real one (suite gpu): size classes, exact hits and misses,
 * max_block, max_cached, trim, the out-of-memory flush, threads, thread exit and finalize. */
#include "testutil.h"

#include "../plugins/common/cache/cache-classes.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

/* The device upstream: a pool of the cache's own, so that its statistics are the cache's. */
#define DEVICE_UPSTREAM "dmr:pool=new"

static CUstream
stream_new (void)
{
  return mt_stream_new_on (0);
}

static void
stream_free (CUstream stream)
{
  CU_OK (mt_driver ()->cuStreamSynchronize (stream));
  CU_OK (mt_driver ()->cuStreamDestroy (stream));
}

/* The counters of @mr, asserted to exist. */
static GVariant *
counters_ok (MemresResource *mr)
{
  GError *error = NULL;
  GVariant *v = memres_resource_get_counters (mr, &error);

  g_assert_no_error (error);
  g_assert_nonnull (v);
  g_assert_true (g_variant_is_of_type (v, G_VARIANT_TYPE_VARDICT));
  return v;
}

static guint64
counter (MemresResource *mr, const char *name)
{
  g_autoptr (GVariant) v = counters_ok (mr);
  guint64 value = 0;

  g_assert_true (g_variant_lookup (v, name, "t", &value));
  return value;
}

/* Hits and misses of the class that serves @size. */
static void
class_counts (MemresResource *mr, gsize size, guint64 *hits, guint64 *misses, guint64 *cached)
{
  g_autoptr (GVariant) v = counters_ok (mr);
  g_autoptr (GVariant) classes = g_variant_lookup_value (v, "classes", G_VARIANT_TYPE ("a(tttt)"));
  guint64 csize, h, m, c;
  GVariantIter iter;

  g_assert_nonnull (classes);
  g_variant_iter_init (&iter, classes);
  while (g_variant_iter_next (&iter, "(tttt)", &csize, &h, &m, &c))
    if (csize == cache_class_size (cache_class_of (size)))
      {
        *hits = h;
        *misses = m;
        if (cached != NULL)
          *cached = c;
        return;
      }
  g_assert_not_reached ();
}

static void
trim_ok (MemresResource *mr)
{
  GError *error = NULL;

  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
}

/* The upstream holds no allocation of the cache's any more: its used bytes are 0 and, on the
 * fake, no pool allocation beyond @base is live. */
static void
assert_upstream_empty (MemresResource *mr, const FakeCudaCounts *base)
{
  MemresResource *up = memres_resource_get_upstream (mr);
  MemresStats stats = mt_stats_ok (up);
  FakeCudaCounts now;

  g_assert_cmpuint (stats.used_current, ==, 0);
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.pool_allocations, ==, base->pool_allocations);
    }
}

/* ---- size classes ------------------------------------------------------------------------------
 */

static void
test_class_table (void)
{
  gsize prev = 0;

  g_assert_cmpuint (cache_class_of (1), ==, 0);
  g_assert_cmpuint (cache_class_size (0), ==, 256);
  for (guint c = 0; c < 176; c++)
    {
      gsize s = cache_class_size (c);

      g_assert_cmpuint (s, >, prev);
      g_assert_cmpuint (s % 256, ==, 0);
      g_assert_cmpuint (cache_class_of (s), ==, c);
      g_assert_cmpuint (cache_class_of (s + 1), ==, c + 1);
      g_assert_cmpuint (cache_class_of (prev + 1), ==, c);
      if (s - 1 > prev)
        g_assert_cmpuint (cache_class_of (s - 1), ==, c);
      /* finer than powers of two: at most 1/8 more than the smallest request above 2 KiB */
      if (s > 2048)
        g_assert_cmpuint ((s - (prev + 1)) * 8, <=, prev + 1);
      prev = s;
    }
  g_assert_cmpuint (cache_class_size (175), ==, (gsize) 4 << 30);
}

/* Through the resource, for every class up to max_block, from an empty cache: class size - 1
 * misses, the class size then hits the same block, class size + 1 is the next class and
 * misses. */
static void
test_class_boundaries (gconstpointer data)
{
  const char *upstream = data;
  g_autofree char *spec = g_strdup_printf ("cache:max_block=4MiB,chunk=64KiB>%s", upstream);
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;
  guint n_classes = cache_class_of (4 * MiB) + 1;

  if (g_str_has_prefix (upstream, "dmr") && !mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (spec);
  g_assert_cmpuint (counter (mr, "max_block"), ==, 4 * MiB);
  for (guint c = 0; c < n_classes; c++)
    {
      gsize s = cache_class_size (c);
      guint64 h0, m0, h1, m1, hn0 = 0, mn0 = 0, hn1 = 0, mn1 = 0;
      MemresBuffer *buf;

      class_counts (mr, s, &h0, &m0, NULL);
      if (c + 1 < n_classes)
        class_counts (mr, s + 1, &hn0, &mn0, NULL);
      buf = mt_alloc_ok (mr, s - 1, NULL);
      mt_close_ok (buf, NULL);
      buf = mt_alloc_ok (mr, s, NULL);
      mt_close_ok (buf, NULL);
      class_counts (mr, s, &h1, &m1, NULL);
      g_assert_cmpuint (m1 - m0, ==, 1);
      g_assert_cmpuint (h1 - h0, ==, 1);
      if (c + 1 < n_classes)
        {
          buf = mt_alloc_ok (mr, s + 1, NULL);
          class_counts (mr, s + 1, &hn1, &mn1, NULL);
          g_assert_cmpuint (mn1 - mn0, ==, 1);
          g_assert_cmpuint (hn1 - hn0, ==, 0);
          mt_close_ok (buf, NULL);
        }
      trim_ok (mr); /* the next class starts from an empty cache */
      g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
    }
  /* above max_block: the upstream's own allocation */
  mt_close_ok (mt_alloc_ok (mr, 4 * MiB + 1, NULL), NULL);
  g_assert_cmpuint (counter (mr, "direct"), ==, 1);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
}

/* ---- hits and misses ---------------------------------------------------------------------------
 */

static void
test_hits_misses (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *b, *c;
  guint64 hits, misses;
  FakeCudaCounts base;
  CUstream stream;

  if (!mt_require_devices (1))
    return;
  stream = stream_new ();
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);

  a = mt_alloc_ok (mr, 1000, stream); /* a miss: a chunk of 1 KiB blocks */
  class_counts (mr, 1000, &hits, &misses, NULL);
  g_assert_cmpuint (hits, ==, 0);
  g_assert_cmpuint (misses, ==, 1);
  mt_close_ok (a, stream);
  b = mt_alloc_ok (mr, 1024, stream); /* the same block, from the front cache */
  g_assert_cmpuint (memres_buffer_get_size (b), ==, 1024);
  c = mt_alloc_ok (mr, 900, stream); /* another block of the chunk, from the shared cache */
  class_counts (mr, 1000, &hits, &misses, NULL);
  g_assert_cmpuint (hits, ==, 2);
  g_assert_cmpuint (misses, ==, 1);
  g_assert_cmpuint (counter (mr, "hits"), ==, 2);
  g_assert_cmpuint (counter (mr, "misses"), ==, 1);
  g_assert_cmpuint (memres_buffer_get_address (b) % 256, ==, 0);
  g_assert_cmpuint (memres_buffer_get_address (c) % 256, ==, 0);
  g_assert_cmpuint (memres_buffer_get_address (b), !=, memres_buffer_get_address (c));
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * 1024);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 2 * MiB);
  g_assert_cmpuint (counter (mr, "cached"), ==, 2 * MiB - 2 * 1024);
  mt_write_pattern (c, 0, 900, 7, stream);
  mt_check_pattern (c, 0, 900, 7, stream);
  mt_close_ok (b, stream);
  mt_close_ok (c, stream);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  trim_ok (mr);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  assert_upstream_empty (mr, &base);
  g_clear_pointer (&mr, memres_resource_unref);
  stream_free (stream);
}

/* Over host memory there are no streams to respect: a block freed "on" one stream serves
 * another at once, and no driver call is made. */
static void
test_host_no_events (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("cache>host");
  MemresBuffer *buf;
  guint64 hits, misses;
  gboolean events = TRUE;
  g_autoptr (GVariant) v = NULL;

  buf = mt_alloc_ok (mr, 64 * KiB, (MemresStream) 0x1000);
  mt_write_pattern (buf, 0, 64 * KiB, 3, NULL);
  mt_close_ok (buf, (MemresStream) 0x1000);
  buf = mt_alloc_ok (mr, 64 * KiB, (MemresStream) 0x2000);
  class_counts (mr, 64 * KiB, &hits, &misses, NULL);
  g_assert_cmpuint (hits, ==, 1);
  g_assert_cmpuint (misses, ==, 1);
  v = counters_ok (mr);
  g_assert_true (g_variant_lookup (v, "events", "b", &events));
  g_assert_false (events);
  mt_close_ok (buf, NULL);
  g_assert_true (memres_resource_is_host_accessible (mr));
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
}

/* A block freed on stream A goes to the shared cache with an event (front=0) and serves stream
 * B after B waits on it: one cuEventRecord, one cuStreamWaitEvent. */
static void
test_cross_stream_event (void)
{
  g_autoptr (MemresResource) mr = NULL;
  CUstream a, b;
  MemresBuffer *buf;
  guint64 addr, hits, misses;
  long records = 0, waits = 0;

  if (!mt_require_devices (1))
    return;
  a = stream_new ();
  b = stream_new ();
  mr = mt_new_ok ("cache:front=0>" DEVICE_UPSTREAM);
  buf = mt_alloc_ok (mr, 1 * MiB, a);
  addr = memres_buffer_get_address (buf);
  if (mt_driver_is_fake ())
    {
      records = mt_fake_call_count ("cuEventRecord");
      waits = mt_fake_call_count ("cuStreamWaitEvent");
    }
  mt_close_ok (buf, a);
  buf = mt_alloc_ok (mr, 1 * MiB, b);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, addr);
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records + 1);
      g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent"), ==, waits + 1);
    }
  class_counts (mr, 1 * MiB, &hits, &misses, NULL);
  g_assert_cmpuint (hits, ==, 1);
  g_assert_cmpuint (misses, ==, 1);
  mt_close_ok (buf, b);
  /* same stream again: from the shared cache, no wait */
  if (mt_driver_is_fake ())
    waits = mt_fake_call_count ("cuStreamWaitEvent");
  buf = mt_alloc_ok (mr, 1 * MiB, b);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent"), ==, waits);
  mt_close_ok (buf, b);
  g_clear_pointer (&mr, memres_resource_unref);
  stream_free (a);
  stream_free (b);
}

/* ---- bounds -------------------------------------------------------------------------------------
 */

static void
test_max_block (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *small, *big;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache:max_block=1MiB>" DEVICE_UPSTREAM);
  small = mt_alloc_ok (mr, 1 * MiB, NULL);
  big = mt_alloc_ok (mr, 1 * MiB + 1, NULL);
  g_assert_cmpuint (counter (mr, "direct"), ==, 1);
  g_assert_cmpuint (counter (mr, "misses"), ==, 1);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, >=, 2 * MiB + 1);
  mt_write_pattern (big, 0, 1 * MiB + 1, 11, NULL);
  mt_check_pattern (big, 0, 1 * MiB + 1, 11, NULL);
  mt_close_ok (big, NULL);
  mt_close_ok (small, NULL);
  /* the direct allocation is not cached: only the 1 MiB block is */
  g_assert_cmpuint (counter (mr, "cached"), ==, 1 * MiB);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 1 * MiB);
  trim_ok (mr);
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
}

/* 8 blocks of 1 MiB (each its own upstream allocation) freed under max_cached=4MiB: 4 stay
 * cached, 4 go back to the upstream at their close. */
static void
test_max_cached (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *bufs[8];
  FakeCudaCounts base, now;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache:max_cached=4MiB>" DEVICE_UPSTREAM);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_cmpuint (counter (mr, "cached"), ==, 4 * MiB);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 4 * MiB);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_high, ==, 8 * MiB);
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.pool_allocations, ==, base.pool_allocations + 4);
    }
  trim_ok (mr);
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
}

/* max_cached holds across spills: with front=16, a full bin moves into the shared cache under
 * one event, and its lease goes with it; 40 blocks of 512 KiB freed one by one never leave more
 * than max_cached bytes cached, and the cache ends exactly at the bound. */
static void
test_max_cached_spill (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *bufs[40];
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache:max_cached=9MiB,front=16>" DEVICE_UPSTREAM);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = mt_alloc_ok (mr, 512 * KiB, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      mt_close_ok (bufs[i], NULL);
      g_assert_cmpuint (counter (mr, "cached"), <=, 9 * MiB);
      g_assert_cmpuint (counter (mr, "cached"), ==, MIN (i + 1, 18) * 512 * KiB);
    }
  g_assert_cmpuint (counter (mr, "shared_cached") + counter (mr, "front_cached"), ==, 9 * MiB);
  trim_ok (mr);
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
}

static void
test_bad_options (void)
{
  mt_new_fails ("cache:max_block=100>host", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "max_block");
  mt_new_fails ("cache:max_block=8GiB>host", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "max_block");
  mt_new_fails ("cache:chunk=1KiB>host", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "chunk");
  mt_new_fails ("cache:front=17>host", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "front");
}

/* ---- trim and out of memory --------------------------------------------------------------------
 */

/* trim keeps at least bytes_to_keep reserved (cuMemPoolTrimTo's contract): three idle 1 MiB
 * blocks trimmed to 2.5 MiB keep three, to 2 MiB keep two, to 1 byte keep one; over host and
 * over the device pool. */
static void
test_trim_keep (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  const gsize keep[] = { 5 * MiB / 2, 2 * MiB, 1 };
  const guint64 left[] = { 3 * MiB, 2 * MiB, 1 * MiB };
  MemresBuffer *bufs[3];

  if (g_str_has_prefix (spec, "cache>dmr") && !mt_require_devices (1))
    return;
  mr = mt_new_ok (spec);
  for (guint i = 0; i < 3; i++)
    bufs[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
  for (guint i = 0; i < 3; i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 3 * MiB);
  for (guint i = 0; i < G_N_ELEMENTS (keep); i++)
    {
      g_assert_true (memres_resource_trim (mr, keep[i], &error));
      g_assert_no_error (error);
      g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, left[i]);
    }
  trim_ok (mr);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  mt_sync_ok (NULL);
}

static void
test_trim_everything (void)
{
  g_autoptr (MemresResource) mr = NULL;
  const gsize sizes[] = { 1, 300, 4 * KiB, 100 * KiB, 1 * MiB, 3 * MiB, 16 * MiB };
  MemresBuffer *bufs[3 * G_N_ELEMENTS (sizes)];
  FakeCudaCounts base;
  CUstream stream;
  guint n = 0;

  if (!mt_require_devices (1))
    return;
  stream = stream_new ();
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  for (guint r = 0; r < 3; r++)
    for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
      bufs[n++] = mt_alloc_ok (mr, sizes[i], r == 1 ? stream : NULL);
  for (guint i = 0; i < n; i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, >, 0);
  trim_ok (mr);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  g_assert_cmpuint (counter (mr, "cached"), ==, 0);
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
  g_clear_pointer (&mr, memres_resource_unref);
  stream_free (stream);
}

static void
test_oom_flush_retry (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base, now;

  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  buf = mt_alloc_ok (mr, 2 * MiB, NULL);
  mt_close_ok (buf, NULL); /* cached */
  g_assert_cmpuint (counter (mr, "cached"), ==, 2 * MiB);

  /* one OOM: the cache gives its 2 MiB back and the retry succeeds */
  mt_fake_fail_call ("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY);
  buf = mt_alloc_ok (mr, 3 * MiB, NULL);
  g_assert_cmpuint (counter (mr, "oom_flushes"), ==, 1);
  g_assert_cmpuint (counter (mr, "cached"), ==, 0);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.pool_allocations, ==, base.pool_allocations + 1);
  mt_close_ok (buf, NULL);

  /* two OOMs: the retry fails too, cleanly */
  mt_fake_fail_call ("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY);
  mt_fake_fail_call ("cuMemAllocFromPoolAsync", 2, CUDA_ERROR_OUT_OF_MEMORY);
  g_assert_null (memres_resource_allocate (mr, 5 * MiB, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_cmpuint (counter (mr, "oom_flushes"), ==, 2);
  g_assert_cmpuint (counter (mr, "cached"), ==, 0);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  mt_fake_reset_faults ();
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
  /* and it still works */
  buf = mt_alloc_ok (mr, 5 * MiB, NULL);
  mt_close_ok (buf, NULL);
}

/* ---- threads ------------------------------------------------------------------------------------
 */

#define PAIRS_THREADS    16
#define PAIRS_PER_THREAD 100000

typedef struct
{
  MemresResource *mr;
  CUstream stream;
  gsize size;
} PairJob;

static gpointer
pairs_thread (gpointer data)
{
  PairJob *job = data;
  GError *error = NULL;

  for (guint i = 0; i < PAIRS_PER_THREAD; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (job->mr, job->size, job->stream, &error);

      g_assert_no_error (error);
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      g_assert_no_error (error);
      memres_buffer_unref (buf);
    }
  return NULL;
}

static void
test_threads_pairs (void)
{
  g_autoptr (MemresResource) mr = NULL;
  GThread *threads[PAIRS_THREADS];
  PairJob jobs[PAIRS_THREADS];
  long allocs = 0;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  if (mt_driver_is_fake ())
    allocs = mt_fake_call_count ("cuMemAllocFromPoolAsync");
  for (guint t = 0; t < PAIRS_THREADS; t++)
    {
      jobs[t].mr = mr;
      jobs[t].stream = stream_new ();
      jobs[t].size = (t % 4 == 0) ? 256 : (t % 4 == 1) ? 4 * KiB : (t % 4 == 2) ? 64 * KiB : MiB;
      threads[t] = g_thread_new ("pairs", pairs_thread, &jobs[t]);
    }
  for (guint t = 0; t < PAIRS_THREADS; t++)
    g_thread_join (threads[t]);
  g_assert_cmpuint (counter (mr, "hits") + counter (mr, "misses"), ==,
                    (guint64) PAIRS_THREADS * PAIRS_PER_THREAD);
  /* every miss is one upstream allocation (a chunk or a block) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAllocFromPoolAsync") - allocs, ==,
                     (long) counter (mr, "misses"));
  /* each thread missed at most once per class (its first block), the rest were hits */
  g_assert_cmpuint (counter (mr, "misses"), <=, PAIRS_THREADS);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  trim_ok (mr);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  for (guint t = 0; t < PAIRS_THREADS; t++)
    stream_free (jobs[t].stream);
}

typedef struct
{
  MemresResource *mr;
  guint n;
  GMutex lock;
  GCond cond;
  gboolean filled, go;
} ExitJob;

/* Allocates and closes @n blocks (they stay in this thread's front cache), then waits for
 * the word before exiting. */
static gpointer
exit_thread (gpointer data)
{
  ExitJob *job = data;
  MemresBuffer *bufs[8];

  for (guint i = 0; i < job->n; i++)
    bufs[i] = mt_alloc_ok (job->mr, 1 * MiB, NULL);
  for (guint i = 0; i < job->n; i++)
    mt_close_ok (bufs[i], NULL);
  g_mutex_lock (&job->lock);
  job->filled = TRUE;
  g_cond_broadcast (&job->cond);
  while (!job->go)
    g_cond_wait (&job->cond, &job->lock);
  g_mutex_unlock (&job->lock);
  return NULL;
}

static void
exit_job_go (ExitJob *job)
{
  g_mutex_lock (&job->lock);
  job->go = TRUE;
  g_cond_broadcast (&job->cond);
  g_mutex_unlock (&job->lock);
}

static void
exit_job_wait_filled (ExitJob *job)
{
  g_mutex_lock (&job->lock);
  while (!job->filled)
    g_cond_wait (&job->cond, &job->lock);
  g_mutex_unlock (&job->lock);
}

static void
test_thread_exit (void)
{
  g_autoptr (MemresResource) mr = NULL;
  ExitJob job = { 0 };
  GThread *thread;
  MemresBuffer *bufs[4];
  guint64 hits, misses;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  job.mr = mr;
  job.n = 4;
  thread = g_thread_new ("exit", exit_thread, &job);
  exit_job_wait_filled (&job);
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 4 * MiB);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 0);
  exit_job_go (&job);
  g_thread_join (thread);
  /* nothing lost: the 4 blocks are in the shared cache and serve this thread (same stream) */
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 4 * MiB);
  for (guint i = 0; i < 4; i++)
    bufs[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
  class_counts (mr, 1 * MiB, &hits, &misses, NULL);
  g_assert_cmpuint (hits, ==, 4);
  g_assert_cmpuint (misses, ==, 4);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 4 * MiB);
  for (guint i = 0; i < 4; i++)
    mt_close_ok (bufs[i], NULL);
  trim_ok (mr);
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
}

/* The last reference goes while blocks are cached in this thread and in another one that is
 * still running: finalize gives every block back; the other thread's exit afterwards finds
 * nothing of the gone instance. */
static void
test_finalize_cached (void)
{
  MemresResource *mr;
  ExitJob job = { 0 };
  GThread *thread;
  FakeCudaCounts base;
  MemresBuffer *buf;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  job.mr = mr;
  job.n = 3;
  thread = g_thread_new ("finalize", exit_thread, &job);
  exit_job_wait_filled (&job);
  buf = mt_alloc_ok (mr, 1000, NULL); /* a chunk: one block used, the rest shared */
  mt_close_ok (buf, NULL);
  buf = mt_alloc_ok (mr, 8 * MiB, NULL);
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
  exit_job_go (&job);
  g_thread_join (thread);
  /* a new instance (likely in the same slot) starts empty */
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  g_assert_cmpuint (counter (mr, "cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "hits"), ==, 0);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* ---- stream hazards (the fake's asynchronous mode; the real driver) ---------------------------
 */

/* Asynchronous streams for the hazard tests, back to synchronous at the end. */
static gboolean
hazard_begin (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  if (mt_driver_is_fake ())
    mt_fake_set_async (TRUE);
  if (!mt_require_stream_holds ())
    {
      if (mt_driver_is_fake ())
        mt_fake_set_async (FALSE);
      return FALSE;
    }
  return TRUE;
}

static void
hazard_end (void)
{
  if (mt_driver_is_fake ())
    mt_fake_set_async (FALSE);
}

typedef enum
{
  HAZARD_STREAM,    /* A is a non-blocking stream */
  HAZARD_LEGACY,    /* A is the legacy default stream */
  HAZARD_DESTROYED, /* A is destroyed right after the free */
} HazardKind;

typedef struct
{
  const char *spec;
  gsize size;
  HazardKind kind;
  gboolean expect_reuse; /* the freed block must serve B (else a new one may) */
} Hazard;

/* Hold stream A, queue a fill of a block on A, free the block on A, allocate the same size for
 * B and fill it on B, release A: the bytes are B's. */
static void
test_hazard (gconstpointer data)
{
  const Hazard *h = data;
  g_autoptr (MemresResource) mr = NULL;
  MemresStream a, b;
  MemresBuffer *x, *y;
  MtStreamHold *hold;
  guint64 addr;

  if (!hazard_begin ())
    return;
  b = stream_new ();
  a = h->kind == HAZARD_LEGACY ? NULL : stream_new ();
  mr = mt_new_ok (h->spec);
  x = mt_alloc_ok (mr, h->size, a);
  mt_fill_byte_ok (x, 0x11, a);
  mt_sync_ok (a);
  addr = memres_buffer_get_address (x);

  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xaa, a); /* waits behind the hold */
  mt_close_ok (x, a);
  if (h->kind == HAZARD_DESTROYED)
    CU_OK (mt_driver ()->cuStreamDestroy (a));
  y = mt_alloc_ok (mr, h->size, b);
  if (h->expect_reuse)
    g_assert_cmpuint (memres_buffer_get_address (y), ==, addr);
  mt_fill_byte_ok (y, 0xbb, b);
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, b);
  if (h->kind == HAZARD_DESTROYED)
    {
      /* a new stream (perhaps with a's handle, once a's work ran) gets correct memory too */
      CUstream c = stream_new ();
      MemresBuffer *z = mt_alloc_ok (mr, h->size, c);

      mt_fill_byte_ok (z, 0xcc, c);
      mt_assert_bytes (z, 0xcc, c);
      mt_close_ok (z, c);
      stream_free (c);
    }
  mt_close_ok (y, b);
  mt_sync_ok (b);
  g_clear_pointer (&mr, memres_resource_unref);
  if (a != NULL && h->kind != HAZARD_DESTROYED)
    stream_free (a);
  stream_free (b);
  hazard_end ();
}

static const Hazard hazards[] = {
  { "cache>" DEVICE_UPSTREAM, 1 * MiB, HAZARD_STREAM, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 1 * MiB, HAZARD_STREAM, TRUE },
  { "cache:front=0>" DEVICE_UPSTREAM, 4 * KiB, HAZARD_STREAM, TRUE },
  { "cache>" DEVICE_UPSTREAM, 1 * MiB, HAZARD_LEGACY, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 1 * MiB, HAZARD_LEGACY, TRUE },
  { "cache>" DEVICE_UPSTREAM, 1 * MiB, HAZARD_DESTROYED, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 1 * MiB, HAZARD_DESTROYED, TRUE },
  { "cache:front=0>" DEVICE_UPSTREAM, 4 * KiB, HAZARD_DESTROYED, TRUE },
};
static const char *const hazard_names[] = {
  "/cache/hazard/stream/front",     "/cache/hazard/stream/shared",
  "/cache/hazard/stream/shared-4k", "/cache/hazard/legacy/front",
  "/cache/hazard/legacy/shared",    "/cache/hazard/destroyed/front",
  "/cache/hazard/destroyed/shared", "/cache/hazard/destroyed/shared-4k",
};
G_STATIC_ASSERT (G_N_ELEMENTS (hazards) == G_N_ELEMENTS (hazard_names));

/* Stream A was held while B got @n blocks and filled them with 0xbb: A is still held; once it
 * runs, the bytes are B's. Closes the blocks and waits for @b. */
static void
hold_release_check (MtStreamHold *hold, MemresBuffer **y, guint n, MemresStream b)
{
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  for (guint i = 0; i < n; i++)
    {
      mt_assert_bytes (y[i], 0xbb, b);
      mt_close_ok (y[i], b);
    }
  mt_sync_ok (b);
}

/* A spill records one event for its whole bin: with front=2 the third close of a class on A
 * moves the two front blocks freed on A and itself into the shared cache under one
 * cuEventRecord on A; B, given all three, waits for A's queued fills, so that the bytes are B's
 * once A runs. */
static void
test_hazard_spill (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresStream a, b;
  MemresBuffer *x[3], *y[3];
  guint64 addr[3];
  MtStreamHold *hold;
  long records = 0, waits = 0;

  if (!hazard_begin ())
    return;
  a = stream_new ();
  b = stream_new ();
  mr = mt_new_ok ("cache:front=2>" DEVICE_UPSTREAM);
  for (guint i = 0; i < 3; i++)
    {
      x[i] = mt_alloc_ok (mr, 1 * MiB, a);
      mt_fill_byte_ok (x[i], 0x11, a);
      addr[i] = memres_buffer_get_address (x[i]);
    }
  mt_sync_ok (a);

  hold = mt_stream_hold (a);
  for (guint i = 0; i < 3; i++)
    mt_fill_byte_ok (x[i], 0xaa, a); /* wait behind the hold */
  if (mt_driver_is_fake ())
    records = mt_fake_call_count ("cuEventRecord");
  for (guint i = 0; i < 3; i++)
    mt_close_ok (x[i], a);
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records + 1);
      waits = mt_fake_call_count ("cuStreamWaitEvent");
    }
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 3 * MiB);

  for (guint i = 0; i < 3; i++)
    {
      guint64 got;

      y[i] = mt_alloc_ok (mr, 1 * MiB, b);
      got = memres_buffer_get_address (y[i]);
      g_assert_true (got == addr[0] || got == addr[1] || got == addr[2]);
      mt_fill_byte_ok (y[i], 0xbb, b);
    }
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent"), ==, waits + 3);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 0);
  hold_release_check (hold, y, 3, b);
  g_clear_pointer (&mr, memres_resource_unref);
  stream_free (a);
  stream_free (b);
  hazard_end ();
}

/* Blocks freed on the legacy default stream join the shared cache without an event of their
 * own: three frees there (front=0) make no cuEventRecord. Another stream that takes one has an
 * event recorded on the legacy stream then and waits for it, so that the fills queued there
 * before the frees run first and the bytes are B's. */
static void
test_hazard_legacy_lazy (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresStream b;
  MemresBuffer *x[3], *y[3];
  MtStreamHold *hold;
  long records = 0, waits = 0;

  if (!hazard_begin ())
    return;
  b = stream_new ();
  mr = mt_new_ok ("cache:front=0>" DEVICE_UPSTREAM);
  for (guint i = 0; i < 3; i++)
    {
      x[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
      mt_fill_byte_ok (x[i], 0x11, NULL);
    }
  mt_sync_ok (NULL);

  hold = mt_stream_hold (NULL);
  for (guint i = 0; i < 3; i++)
    mt_fill_byte_ok (x[i], 0xaa, NULL); /* wait behind the hold */
  if (mt_driver_is_fake ())
    records = mt_fake_call_count ("cuEventRecord");
  for (guint i = 0; i < 3; i++)
    mt_close_ok (x[i], NULL);
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records);
      waits = mt_fake_call_count ("cuStreamWaitEvent");
    }
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 3 * MiB);
  for (guint i = 0; i < 3; i++)
    {
      y[i] = mt_alloc_ok (mr, 1 * MiB, b);
      mt_fill_byte_ok (y[i], 0xbb, b);
    }
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records + 3);
      g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent"), ==, waits + 3);
    }
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "misses"), ==, 3);
  hold_release_check (hold, y, 3, b);
  g_clear_pointer (&mr, memres_resource_unref);
  stream_free (b);
  hazard_end ();
}

/* Two threads in the pattern of a training step (autograd): A allocates activations, B frees
 * them and allocates gradients, A frees those. What one thread frees and the other allocates
 * passes through the shared cache, because a front holds at most front_bytes: after ten warm-up
 * steps no allocation misses (before front_bytes, each thread's front kept up to `front` blocks
 * of every class that only the other thread allocates, and the misses never stopped), and the
 * fronts hold at most front_bytes each. */
#define PC_ACTS  16
#define PC_GRADS 8
#define PC_STEPS 30

typedef struct
{
  MemresResource *mr;
  MemresBuffer *acts[PC_ACTS], *grads[PC_GRADS];
  GMutex lock;
  GCond cond;
  gint turn; /* 0: A, 1: B */
} ProducerConsumer;

static gsize
pc_act_size (guint i)
{
  return ((gsize) (1 + i % 8) << 20) + i * 4096;
}

static void
pc_wait (ProducerConsumer *pc, gint me)
{
  g_mutex_lock (&pc->lock);
  while (pc->turn != me)
    g_cond_wait (&pc->cond, &pc->lock);
  g_mutex_unlock (&pc->lock);
}

static void
pc_give (ProducerConsumer *pc, gint to)
{
  g_mutex_lock (&pc->lock);
  pc->turn = to;
  g_cond_broadcast (&pc->cond);
  g_mutex_unlock (&pc->lock);
}

static gpointer
pc_backward (gpointer data)
{
  ProducerConsumer *pc = data;

  for (guint step = 0; step < PC_STEPS; step++)
    {
      pc_wait (pc, 1);
      for (guint i = 0; i < PC_GRADS; i++)
        pc->grads[i] = mt_alloc_ok (pc->mr, ((gsize) (1 + i % 4) << 19) + i * 8192, NULL);
      for (guint i = PC_ACTS; i-- > 0;)
        mt_close_ok (pc->acts[i], NULL);
      pc_give (pc, 0);
    }
  return NULL;
}

static void
test_producer_consumer (gconstpointer data)
{
  ProducerConsumer pc = { NULL };
  guint64 warm = 0;
  GThread *backward;

  if (strstr (data, ">dmr") != NULL && !mt_require_devices (1))
    return;
  pc.mr = mt_new_ok (data);

  g_mutex_init (&pc.lock);
  g_cond_init (&pc.cond);
  backward = g_thread_new ("backward", pc_backward, &pc);
  for (guint step = 0; step < PC_STEPS; step++)
    {
      for (guint i = 0; i < PC_ACTS; i++)
        pc.acts[i] = mt_alloc_ok (pc.mr, pc_act_size (i), NULL);
      pc_give (&pc, 1);
      pc_wait (&pc, 0);
      for (guint i = 0; i < PC_GRADS; i++)
        mt_close_ok (pc.grads[i], NULL);
      g_assert_cmpuint (counter (pc.mr, "front_cached"), <=, 2 * 8 * MiB);
      if (step == 9)
        warm = counter (pc.mr, "misses");
    }
  g_thread_join (backward);
  g_assert_cmpuint (counter (pc.mr, "misses"), ==, warm);
  g_assert_cmpuint (counter (pc.mr, "hits"), >=, (PC_STEPS - 10) * (PC_ACTS + PC_GRADS));
  g_assert_cmpuint (counter (pc.mr, "used"), ==, 0);
  g_mutex_clear (&pc.lock);
  g_cond_clear (&pc.cond);
  memres_resource_unref (pc.mr);
}

/* A front holds at most front_bytes: of five 1 MiB blocks freed by one thread on the legacy
 * stream, three stay in its front (front_bytes=3MiB), two go to the shared cache (without an
 * event: no spill of the front's bin); each is a hit again. */
static void
test_front_bytes (gconstpointer data)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x[5];

  if (strstr (data, ">dmr") != NULL && !mt_require_devices (1))
    return;
  mr = mt_new_ok (data);

  for (guint i = 0; i < 5; i++)
    x[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
  for (guint i = 0; i < 5; i++)
    {
      mt_close_ok (x[i], NULL);
      g_assert_cmpuint (counter (mr, "front_cached"), ==, MIN (i + 1, 3) * MiB);
    }
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 2 * MiB);
  for (guint i = 0; i < 5; i++)
    x[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
  g_assert_cmpuint (counter (mr, "misses"), ==, 5);
  g_assert_cmpuint (counter (mr, "hits"), ==, 5);
  g_assert_cmpuint (counter (mr, "front_cached") + counter (mr, "shared_cached"), ==, 0);
  for (guint i = 0; i < 5; i++)
    mt_close_ok (x[i], NULL);
}

/* ---- two devices (issue 20; the fake has two, one GPU skips naming device 1) -------------- */

static void
set_access_ok (MemresResource *mr, gint device, MemresAccess access)
{
  g_autoptr (GError) error = NULL;
  const MemresAccessDesc desc = { device, access };
  MemresAccess got = (MemresAccess) -1;

  g_assert_true (memres_resource_set_access (mr, &desc, 1, &error));
  g_assert_no_error (error);
  g_assert_true (memres_resource_get_access (mr, device, &got, &error));
  g_assert_no_error (error);
  g_assert_cmpint (got, ==, access);
}

/* Device 1 granted access to the pool below `cache` through the stack: the grant reaches the
 * pool (get_access reads it back) and covers a block the cache already held, which device 1
 * then writes and reads; revoked, device 1 cannot touch it (the fake refuses the fill). */
static void
test_peer_access (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *y;
  CUstream s1;
  guint64 addr;

  if (!mt_require_peer_access (0, 1))
    return;
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  s1 = mt_stream_new_on (1);
  x = mt_alloc_ok (mr, 1 * MiB, NULL);
  addr = memres_buffer_get_address (x);
  set_access_ok (mr, 1, MEMRES_ACCESS_NONE);
  if (mt_driver_is_fake ())
    {
      g_assert_false (memres_buffer_fill (x, 0x77, 1, s1, &error));
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE);
      g_clear_error (&error);
    }
  mt_close_ok (x, NULL); /* cached */
  set_access_ok (mr, 1, MEMRES_ACCESS_READWRITE);
  y = mt_alloc_ok (mr, 1 * MiB, NULL);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, addr); /* the cached block */
  mt_sync_ok (NULL);
  mt_fill_byte_ok (y, 0x5a, s1);
  mt_assert_bytes (y, 0x5a, s1);
  mt_assert_bytes (y, 0x5a, NULL);
  set_access_ok (mr, 1, MEMRES_ACCESS_NONE);
  if (mt_driver_is_fake ())
    {
      g_assert_false (memres_buffer_fill (y, 0x77, 1, s1, &error));
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE);
      g_clear_error (&error);
    }
  mt_close_ok (y, NULL);
  mt_sync_ok (NULL);
  stream_free (s1);
}

/* A block freed on a stream of device 0 and asked for by a stream of device 1 (granted access):
 * the cache hands it out after device 1's stream waits on the free's event, so that device 1's
 * write lands after device 0's queued one: the bytes are device 1's. */
static void
test_peer_stream (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *y;
  MtStreamHold *hold;
  CUstream s0, s1;
  guint64 addr;
  long waits = 0;

  if (!mt_require_peer_access (0, 1) || !hazard_begin ())
    return;
  mr = mt_new_ok ("cache:front=0>" DEVICE_UPSTREAM);
  set_access_ok (mr, 1, MEMRES_ACCESS_READWRITE);
  s0 = mt_stream_new_on (0);
  s1 = mt_stream_new_on (1);
  x = mt_alloc_ok (mr, 1 * MiB, s0);
  addr = memres_buffer_get_address (x);
  mt_fill_byte_ok (x, 0x11, s0);
  mt_sync_ok (s0);

  hold = mt_stream_hold (s0);
  mt_fill_byte_ok (x, 0xaa, s0); /* waits behind the hold */
  mt_close_ok (x, s0);
  if (mt_driver_is_fake ())
    waits = mt_fake_call_count ("cuStreamWaitEvent");
  y = mt_alloc_ok (mr, 1 * MiB, s1);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, addr);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent"), ==, waits + 1);
  mt_fill_byte_ok (y, 0xbb, s1);
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, s1);
  mt_close_ok (y, s1);
  mt_sync_ok (s1);
  g_clear_pointer (&mr, memres_resource_unref);
  stream_free (s0);
  stream_free (s1);
  hazard_end ();
}

#define HAZARD_THREADS 16
#define HAZARD_ROUNDS  20

typedef struct
{
  MemresResource *mr;
  CUstream *streams;
  guint index;
  GError *error;
  gint step;       /* atomic: round * 10 + the step it is in, for the watchdog's report */
  guint8 *staging; /* 64 KiB of page-locked memory, allocated before any stream is held */
} HazardJob;

#define STEP(job, r, n) g_atomic_int_set (&(job)->step, (gint) ((r) *10 + (n)))

/* A hang (a stream held for good) fails the test with where each thread was, instead of the
 * harness's timeout: steps 1 alloc X, 2 hold, 3 fill X, 4 close X, 5 alloc Y, 6 fill Y,
 * 7 release, 8 check Y, 9 close Y. */
typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean done;
  HazardJob *jobs;
} HazardWatch;

static gpointer
hazard_watchdog (gpointer data)
{
  HazardWatch *w = data;
  gint64 end = g_get_monotonic_time () + 120 * G_TIME_SPAN_SECOND;
  g_autoptr (GString) where = g_string_new (NULL);

  g_mutex_lock (&w->lock);
  while (!w->done)
    if (!g_cond_wait_until (&w->cond, &w->lock, end))
      break;
  g_mutex_unlock (&w->lock);
  if (w->done)
    return NULL;
  for (guint t = 0; t < HAZARD_THREADS; t++)
    g_string_append_printf (where, " %u:%d", t, g_atomic_int_get (&w->jobs[t].step));
  g_error ("hazard threads still running after 120 s; thread:round*10+step =%s", where->str);
  return NULL;
}

/* Thread t, round after round: hold its stream S_t, fill a block X on S_t, free X on S_t,
 * allocate Y of the same size for S_{t+1}, fill Y there, release S_t, check Y on S_{t+1}. */
static gpointer
hazard_thread (gpointer data)
{
  HazardJob *job = data;
  CUstream mine = job->streams[job->index];
  CUstream next = job->streams[(job->index + 1) % HAZARD_THREADS];
  guint8 byte = (guint8) (0x40 + job->index);
  guint8 *staging = job->staging;
  CUevent filled;

  g_assert_true (memres_cuda_ensure_context (0, NULL));
  CU_OK (mt_driver ()->cuEventCreate (&filled, CU_EVENT_DISABLE_TIMING));
  for (guint r = 0; r < HAZARD_ROUNDS; r++)
    {
      MemresBuffer *x, *y;
      MtStreamHold *hold;

      STEP (job, r, 1);
      x = mt_alloc_ok (job->mr, 64 * KiB, mine);
      STEP (job, r, 2);
      hold = mt_stream_hold (mine);
      STEP (job, r, 3);
      mt_fill_byte_ok (x, 0xee, mine);
      STEP (job, r, 4);
      mt_close_ok (x, mine);
      STEP (job, r, 5);
      y = mt_alloc_ok (job->mr, 64 * KiB, next);
      STEP (job, r, 6);
      mt_fill_byte_ok (y, byte, next);
      STEP (job, r, 7);
      mt_stream_release (hold);
      STEP (job, r, 8);
      /* Y is read back into page-locked memory on this thread's own stream, after it waits for
       * Y's fill on `next`: every call queues without waiting inside the driver, and only the
       * stream synchronize waits. (A read into pageable memory on `next` waits inside the
       * driver while the next thread still holds `next`, and on the H200 that blocked the
       * holder's own calls too: a deadlock.) */
      CU_OK (mt_driver ()->cuEventRecord (filled, next));
      CU_OK (mt_driver ()->cuStreamWaitEvent (mine, filled, 0));
      {
        g_autoptr (GError) error = NULL;

        memset (staging, 0, 64 * KiB);
        g_assert_true (memres_buffer_read (y, 0, staging, 64 * KiB, mine, &error));
        g_assert_no_error (error);
        for (gsize i = 0; i < 64 * KiB; i++)
          if (staging[i] != byte)
            g_error ("thread %u round %u: byte %" G_GSIZE_FORMAT " is 0x%02x, expected 0x%02x",
                     job->index, r, i, staging[i], byte);
      }
      STEP (job, r, 9);
      mt_close_ok (y, next);
    }
  STEP (job, HAZARD_ROUNDS, 0);
  CU_OK (mt_driver ()->cuEventDestroy (filled));
  return NULL;
}

static void
test_hazard_threads (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (MemresResource) mr = NULL;
  CUstream streams[HAZARD_THREADS];
  HazardJob jobs[HAZARD_THREADS];
  GThread *threads[HAZARD_THREADS], *watchdog;
  guint8 *staging[HAZARD_THREADS];
  HazardWatch watch = { 0 };

  if (!hazard_begin ())
    return;
  mr = mt_new_ok (spec);
  g_assert_true (memres_cuda_ensure_context (0, NULL));
  for (guint t = 0; t < HAZARD_THREADS; t++)
    {
      void *host = NULL;

      streams[t] = stream_new ();
      CU_OK (mt_driver ()->cuMemHostAlloc (&host, 64 * KiB, 0));
      staging[t] = host;
    }
  g_mutex_init (&watch.lock);
  g_cond_init (&watch.cond);
  watch.jobs = jobs;
  for (guint t = 0; t < HAZARD_THREADS; t++)
    {
      jobs[t] = (HazardJob){ mr, streams, t, NULL, 0, staging[t] };
      threads[t] = g_thread_new ("hazard", hazard_thread, &jobs[t]);
    }
  watchdog = g_thread_new ("hazard-watchdog", hazard_watchdog, &watch);
  for (guint t = 0; t < HAZARD_THREADS; t++)
    g_thread_join (threads[t]);
  g_mutex_lock (&watch.lock);
  watch.done = TRUE;
  g_cond_signal (&watch.cond);
  g_mutex_unlock (&watch.lock);
  g_thread_join (watchdog);
  g_mutex_clear (&watch.lock);
  g_cond_clear (&watch.cond);
  g_assert_cmpuint (counter (mr, "hits") + counter (mr, "misses"), ==,
                    (guint64) HAZARD_THREADS * HAZARD_ROUNDS * 2);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  for (guint t = 0; t < HAZARD_THREADS; t++)
    {
      stream_free (streams[t]);
      CU_OK (mt_driver ()->cuMemFreeHost (staging[t]));
    }
  g_clear_pointer (&mr, memres_resource_unref);
  hazard_end ();
}

/* The core's wrapper: a kind without counters has the core's own (contract_breaches) only; a
 * kind's counters come with it. */
static void
test_counters_core_only (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresResource) cache = mt_new_ok ("cache>host");
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) counters = memres_resource_get_counters (mr, &error);
  g_autoptr (GVariant) cached = NULL;
  guint64 breaches = G_MAXUINT64;

  g_assert_no_error (error);
  g_assert_cmpuint (g_variant_n_children (counters), ==, 1);
  g_assert_true (g_variant_lookup (counters, "contract_breaches", "t", &breaches));
  g_assert_cmpuint (breaches, ==, 0);
  cached = memres_resource_get_counters (cache, &error);
  g_assert_no_error (error);
  g_assert_true (g_variant_lookup (cached, "contract_breaches", "t", &breaches));
  g_assert_cmpuint (breaches, ==, 0);
  g_assert_true (g_variant_lookup (cached, "hits", "t", &breaches));
}

/* An out-of-memory handler below the cache that trims the cache above it (as the retry docs
 * suggest) runs while the cache asks its upstream for memory: the cache's lock is not held then,
 * so the trim gives the idle chunk back and the retried allocation succeeds. */
static MemresResource *trim_top;

static gboolean
trim_the_cache (MemresResource *mr, gsize size, guint attempt, const GError *error,
                gpointer user_data)
{
  g_assert_true (memres_resource_trim (trim_top, 0, NULL));
  (*(guint *) user_data)++;
  return attempt < 2;
}

static void
test_oom_handler_trims (void)
{
  g_autoptr (GError) error = NULL;
  guint calls = 0;
  MemresBuffer *a, *b, *c;

  trim_top = mt_new_ok ("cache>retry>limit:max=4MiB>host");
  g_assert_cmpuint (memres_retry_add_handler (memres_resource_get_upstream (trim_top),
                                              trim_the_cache, &calls, NULL, &error),
                    >, 0);
  g_assert_no_error (error);
  a = mt_alloc_ok (trim_top, 1000, NULL); /* a 2 MiB chunk, idle once a is closed */
  memres_buffer_unref (a);
  b = mt_alloc_ok (trim_top, 300, NULL);  /* a second chunk: the limit is reached */
  c = mt_alloc_ok (trim_top, 2000, NULL); /* a third: the handler trims the first away */
  g_assert_cmpuint (calls, ==, 1);
  memres_buffer_unref (c);
  memres_buffer_unref (b);
  g_clear_pointer (&trim_top, memres_resource_unref);
}

/* An upstream that cannot give a whole chunk still serves a small request: the block alone. */
static void
test_small_upstream (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("cache>limit:max=1MiB>host");
  MemresBuffer *x = mt_alloc_ok (mr, 1024, NULL);

  mt_write_pattern (x, 0, 1024, 9, NULL);
  mt_check_pattern (x, 0, 1024, 9, NULL);
  memres_buffer_unref (x);
}

/* A cache over a cache, with fresh threads allocating at once and trims: the outer cache gives
 * blocks back to the inner one without its lock held (the inner one takes the global slots lock for
 * a thread's first front: taken in the other order, that deadlocked). */
static gpointer
nested_thread (gpointer data)
{
  for (guint i = 0; i < 50; i++)
    memres_buffer_unref (mt_alloc_ok (data, 150000 + (i % 7) * 15000, NULL));
  return NULL;
}

static void
test_nested_threads (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("cache>cache>host");

  for (guint round = 0; round < 200; round++)
    {
      GThread *threads[8];

      for (guint t = 0; t < G_N_ELEMENTS (threads); t++)
        threads[t] = g_thread_new ("nested", nested_thread, mr);
      /* trims meanwhile: the outer cache gives blocks back to the inner one unlocked there too */
      g_assert_true (memres_resource_trim (mr, 0, NULL));
      for (guint t = 0; t < G_N_ELEMENTS (threads); t++)
        g_thread_join (threads[t]);
    }
  /* one block kept by the outer cache whatever the last trim found (it may have run after the
   * last thread was done) */
  memres_buffer_unref (mt_alloc_ok (mr, 150000, NULL));
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  /* what the outer cache holds is what the inner one has handed out, each rounded up to one of
   * the inner cache's classes */
  g_assert_cmpuint (counter (memres_resource_get_upstream (mr), "used"), >=,
                    counter (mr, "reserved"));
  g_assert_cmpuint (counter (mr, "reserved"), >, 0);
}

/* Over an upstream that rounds sizes up (vmm, to its granularity), the cache's reserve is what
 * it holds from the upstream, not the sum of its class sizes; used bytes stay the class sizes. */
static void
test_upstream_rounding (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *b;
  guint64 held;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("cache>vmm:device=0");
  a = mt_alloc_ok (mr, 1 << 20, NULL); /* a class of 1 MiB: a block of its own */
  b = mt_alloc_ok (mr, 1 << 20, NULL);
  /* vmm rounds each 1 MiB block up to its granularity (2 MiB on the fake) */
  held = mt_stats_ok (memres_resource_get_upstream (mr)).used_current;
  g_assert_cmpuint (held, >, 2 << 20);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, held);
  g_assert_cmpuint (counter (mr, "reserved"), ==, held);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 << 20);
  g_assert_cmpuint (counter (mr, "used"), ==, 2 << 20);
  memres_buffer_unref (a);
  memres_buffer_unref (b);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, held);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_high, ==, held);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  trim_ok (mr);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  g_assert_cmpuint (counter (mr, "reserved"), ==, 0);
  g_assert_cmpuint (mt_stats_ok (memres_resource_get_upstream (mr)).used_current, ==, 0);
}

int
main (int argc, char **argv)
{
  /* Against the fake, two devices for the peer tests (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);

  g_test_add_func ("/cache/classes/table", test_class_table);
  g_test_add_data_func ("/cache/classes/boundaries/host", "host", test_class_boundaries);
  g_test_add_data_func ("/cache/classes/boundaries/dmr", DEVICE_UPSTREAM, test_class_boundaries);
  g_test_add_func ("/cache/stats/hits-misses", test_hits_misses);
  g_test_add_func ("/cache/stats/counters-core-only", test_counters_core_only);
  g_test_add_func ("/cache/streams/host-no-events", test_host_no_events);
  g_test_add_func ("/cache/streams/cross-stream-event", test_cross_stream_event);
  g_test_add_func ("/cache/bounds/max-block", test_max_block);
  g_test_add_func ("/cache/bounds/max-cached", test_max_cached);
  g_test_add_func ("/cache/bounds/max-cached-spill", test_max_cached_spill);
  g_test_add_func ("/cache/bounds/bad-options", test_bad_options);
  g_test_add_func ("/cache/trim/everything", test_trim_everything);
  g_test_add_data_func ("/cache/trim/keep/host", "cache>host", test_trim_keep);
  g_test_add_data_func ("/cache/trim/keep/dmr", "cache>" DEVICE_UPSTREAM, test_trim_keep);
  g_test_add_func ("/cache/oom/flush-retry", test_oom_flush_retry);
  g_test_add_func ("/cache/threads/pairs", test_threads_pairs);
  g_test_add_func ("/cache/threads/exit", test_thread_exit);
  g_test_add_func ("/cache/finalize/cached", test_finalize_cached);
  for (guint i = 0; i < G_N_ELEMENTS (hazards); i++)
    g_test_add_data_func (hazard_names[i], &hazards[i], test_hazard);
  g_test_add_func ("/cache/hazard/stream/spill", test_hazard_spill);
  g_test_add_func ("/cache/hazard/legacy/lazy-event", test_hazard_legacy_lazy);
  g_test_add_data_func ("/cache/threads/producer-consumer/host", "cache:front_bytes=8MiB>host",
                        test_producer_consumer);
  g_test_add_data_func ("/cache/threads/producer-consumer/dmr",
                        "cache:front_bytes=8MiB>" DEVICE_UPSTREAM, test_producer_consumer);
  g_test_add_data_func ("/cache/bounds/front-bytes/host", "cache:front_bytes=3MiB>host",
                        test_front_bytes);
  g_test_add_data_func ("/cache/bounds/front-bytes/dmr", "cache:front_bytes=3MiB>" DEVICE_UPSTREAM,
                        test_front_bytes);
  g_test_add_func ("/cache/peer/access", test_peer_access);
  g_test_add_func ("/cache/peer/stream", test_peer_stream);
  g_test_add_func ("/cache/deadlock/oom-handler-trims", test_oom_handler_trims);
  g_test_add_func ("/cache/deadlock/nested-threads", test_nested_threads);
  g_test_add_func ("/cache/small-upstream", test_small_upstream);
  g_test_add_func ("/cache/stats/upstream-rounding", test_upstream_rounding);
  g_test_add_data_func ("/cache/hazard/threads/front", "cache>" DEVICE_UPSTREAM,
                        test_hazard_threads);
  g_test_add_data_func ("/cache/hazard/threads/shared", "cache:front=0>" DEVICE_UPSTREAM,
                        test_hazard_threads);
  return g_test_run ();
}

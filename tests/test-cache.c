/* test-cache.c: the `cache` adaptor over host memory and over the device pool, against the fake
 * driver (suite fake) and the real one (suite gpu): size classes, exact hits and misses,
 * max_block, max_cached, trim, the out-of-memory flush, thread exit, finalize and peers. Streams'
 * hazards: test-cache-hazard.c; threads: test-cache-threads.c. */
#include "testutil.h"

#include "../plugins/common/cache/cache-classes.h"
#include "testutil-cache.h"

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
  stream = mt_stream_new_on (0);
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
  mt_stream_free (stream);
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
  a = mt_stream_new_on (0);
  b = mt_stream_new_on (0);
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
  mt_stream_free (a);
  mt_stream_free (b);
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
  stream = mt_stream_new_on (0);
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
  mt_stream_free (stream);
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
  mt_stream_free (s1);
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

  if (!mt_require_peer_access (0, 1) || !mt_hazard_begin ())
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
  mt_stream_free (s0);
  mt_stream_free (s1);
  mt_hazard_end ();
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
  g_test_add_func ("/cache/finalize/cached", test_finalize_cached);
  g_test_add_data_func ("/cache/bounds/front-bytes/host", "cache:front_bytes=3MiB>host",
                        test_front_bytes);
  g_test_add_data_func ("/cache/bounds/front-bytes/dmr", "cache:front_bytes=3MiB>" DEVICE_UPSTREAM,
                        test_front_bytes);
  g_test_add_func ("/cache/peer/access", test_peer_access);
  g_test_add_func ("/cache/peer/stream", test_peer_stream);
  g_test_add_func ("/cache/small-upstream", test_small_upstream);
  g_test_add_func ("/cache/stats/upstream-rounding", test_upstream_rounding);
  return g_test_run ();
}

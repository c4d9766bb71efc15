/* test-peers.c: what a user coming from a peer library (RMM's resource and adaptor tests,
 * cuda.core's memory tests, CuPy's pool, PyTorch's pluggable allocator) expects of memres, case
 * by case, over host stacks without a driver (suite core) and the device kinds (fake, gpu):
 * 0 bytes, huge requests then the resource still serving, 256-byte alignment at odd sizes, bytes
 * read back, closes twice and after the resource's unref, the limit's edge, the statistics'
 * sequences within and across threads, tracking's list, retry's calls, bad specs, the default
 * resource, other streams and threads, mixes of sizes and streams over many stacks, the stream
 * hazard over more stacks, queries while threads allocate. */
#include "testutil.h"

#include <string.h>

#include <glib/gstdio.h>

/* the specs every generic case runs over: host without a driver, device kinds with one */
static const char *const host_specs[] = { "host",       "stats>host", "limit:max=1GiB>host",
                                          "track>host", "retry>host", "cache>host",
                                          NULL };
static const char *const device_specs[] = { "dmr:device=0",
                                            "cache>dmr:device=0",
                                            "arena",
                                            "vmm",
                                            "pinned",
                                            "managed",
                                            "stats>limit:max=1GiB>dmr",
                                            "track:backtrace=true>cache>dmr",
                                            NULL };

/* memres_resource_allocate() asserted: a buffer of at least @size bytes (vmm rounds up) */
static MemresBuffer *
alloc_ok (MemresResource *mr, gsize size, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, stream, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_size (buf), >=, size);
  return buf;
}

static gboolean
have_device (void)
{
  static gsize answer; /* 1: no device, 2: a device */

  if (g_once_init_enter (&answer))
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *spec = memres_resource_get_default_spec (0, NULL, &error);

      g_once_init_leave (&answer, spec != NULL && g_str_has_prefix (spec, "dmr") ? 2 : 1);
    }
  return answer == 2;
}

static const char *const *
specs (void)
{
  return have_device () ? device_specs : host_specs;
}

/* RMM's mr_tests: odd sizes, every pointer 256-byte aligned, bytes written and read back */
static void
test_alignment_odd_sizes (void)
{
  static const gsize sizes[] = { 1, 3, 7, 255, 257, 511, 1000, 4097, 65535, 1048577 };

  for (const char *const *s = specs (); *s != NULL; s++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*s);
      MemresBuffer *bufs[G_N_ELEMENTS (sizes)];

      for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
        {
          bufs[i] = alloc_ok (mr, sizes[i], NULL);
          g_assert_cmpuint (memres_buffer_get_address (bufs[i]) % 256, ==, 0);
          mt_write_pattern (bufs[i], 0, sizes[i], i + 1, NULL);
        }
      for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
        {
          mt_check_pattern (bufs[i], 0, sizes[i], i + 1, NULL);
          mt_close_ok (bufs[i], NULL);
        }
    }
}

/* RMM: a huge request fails out of memory, and the resource still serves afterwards */
static void
test_huge_then_usable (void)
{
  /* the first two reach the kinds, the others are refused by the core (above G_MAXSSIZE) */
  static const gsize huge[] = { (gsize) 1 << 50, G_MAXSSIZE, G_MAXSIZE, G_MAXSIZE - 255 };
  guint first = 0;

#if defined(__SANITIZE_ADDRESS__)
  /* its allocator aborts the process on a request past its maximum instead of failing (host's
   * posix_memalign; vmm's table of chunks was sized by the request before 214791e) */
  first = 2;
#endif
  /* on the real driver not every kind refuses 1 PiB at once (conformance's out-of-memory/1pib
   * case runs those that do) */
  if (have_device () && !mt_driver_is_fake ())
    first = 2;
  for (const char *const *s = specs (); *s != NULL; s++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*s);

      for (guint i = first; i < G_N_ELEMENTS (huge); i++)
        {
          g_autoptr (GError) error = NULL;
          MemresBuffer *buf = memres_resource_allocate (mr, huge[i], NULL, &error);

          g_test_message ("%s: %" G_GSIZE_FORMAT, *s, huge[i]);
          g_assert_null (buf);
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
          mt_close_ok (alloc_ok (mr, 4096, NULL), NULL);
        }
    }
}

/* RMM: 0 bytes; cuda.core: a buffer closed twice */
static void
test_zero_and_double_close (void)
{
  for (const char *const *s = specs (); *s != NULL; s++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*s);
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = alloc_ok (mr, 0, NULL);
      guint8 byte = 0;

      g_assert_null (memres_buffer_get_pointer (buf));
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      g_assert_no_error (error);
      memres_buffer_unref (buf);

      buf = alloc_ok (mr, 16, NULL);
      MT_CHECK (memres_buffer_close (buf, NULL, &error));
      MT_CHECK (memres_buffer_close (buf, NULL, &error));
      g_assert_true (memres_buffer_is_closed (buf));
      g_assert_false (memres_buffer_read (buf, 0, &byte, 1, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
      g_clear_error (&error);
      g_assert_false (memres_buffer_fill (buf, 0, 1, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
      memres_buffer_unref (buf);
    }
}

/* a buffer outlives the caller's reference on its resource; closing it then works */
static void
test_close_after_resource_unref (void)
{
  for (const char *const *s = specs (); *s != NULL; s++)
    {
      MemresResource *mr = mt_new_ok (*s);
      MemresBuffer *buf = alloc_ok (mr, 1000, NULL);

      mt_write_pattern (buf, 0, 1000, 7, NULL);
      memres_resource_unref (mr);
      mt_check_pattern (buf, 0, 1000, 7, NULL);
      g_assert_nonnull (memres_buffer_get_resource (buf));
      mt_close_ok (buf, NULL);
    }
}

/* out-of-range reads and writes: a clear error, no overflow */
static void
test_out_of_range (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok (specs ()[0]);
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = alloc_ok (mr, 100, NULL);
  MemresBuffer *small = alloc_ok (mr, 50, NULL);
  guint8 bytes[200];

  g_assert_false (memres_buffer_read (buf, 50, bytes, 51, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_read (buf, G_MAXSIZE, bytes, 2, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (buf, 1, bytes, G_MAXSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (buf, 101, bytes, 0, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_fill (buf, 0, 3, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (buf, small, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  mt_close_ok (small, NULL);
  mt_close_ok (buf, NULL);
}

/* RMM's limiting adaptor: exactly the remaining bytes fit, one more does not; after frees */
static void
test_limit_edge (void)
{
  const char *base = have_device () ? "dmr" : "host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("limit:max=1MiB>%s", base);
  g_autoptr (GError) error = NULL;
  MemresBuffer *a, *b;
  g_autoptr (GVariant) counters = NULL;
  guint64 used = 0, limit = 0;

  a = alloc_ok (mr, 1000 * 256, NULL);
  b = alloc_ok (mr, (1 << 20) - 1000 * 256, NULL);
  g_assert_null (memres_resource_allocate (mr, 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  counters = memres_resource_get_counters (mr, &error);
  g_assert_no_error (error);
  g_assert_true (g_variant_lookup (counters, "used", "t", &used));
  g_assert_true (g_variant_lookup (counters, "limit", "t", &limit));
  g_assert_cmpuint (used, ==, 1 << 20);
  g_assert_cmpuint (limit, ==, 1 << 20);
  mt_close_ok (a, NULL);
  a = alloc_ok (mr, 1000 * 256, NULL);
  g_assert_null (memres_resource_allocate (mr, 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  a = alloc_ok (mr, 1 << 20, NULL);
  mt_close_ok (a, NULL);
  g_assert_null (memres_resource_allocate (mr, (1 << 20) + 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
}

/* RMM's statistics adaptor: current, peak, total in bytes and allocations after a sequence */
static void
test_stats_sequence (void)
{
  const char *base = have_device () ? "dmr" : "host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("stats>%s", base);
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;
  MemresBuffer *bufs[10];

  for (guint i = 0; i < 10; i++)
    bufs[i] = alloc_ok (mr, 1024 * (i + 1), NULL);
  for (guint i = 0; i < 10; i += 2)
    mt_close_ok (bufs[i], NULL);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_current, ==, 5);
  g_assert_cmpuint (c.count_peak, ==, 10);
  g_assert_cmpuint (c.count_total, ==, 10);
  g_assert_cmpuint (c.bytes_peak, ==, 1024 * 55);
  g_assert_cmpuint (c.bytes_total, ==, 1024 * 55);
  g_assert_cmpuint (c.bytes_current, ==, 1024 * (2 + 4 + 6 + 8 + 10));
  MT_CHECK (memres_stats_reset (mr, &error));
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_current, ==, 5);
  g_assert_cmpuint (c.count_peak, ==, 5);
  g_assert_cmpuint (c.count_total, ==, 0);
  g_assert_cmpuint (c.bytes_peak, ==, 1024 * 30);
  g_assert_cmpuint (c.bytes_total, ==, 0);
  for (guint i = 1; i < 10; i += 2)
    mt_close_ok (bufs[i], NULL);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.bytes_peak, ==, 1024 * 30);
}

typedef struct
{
  MemresResource *mr;
  guint n;
  gsize size;
} ThreadJob;

static gpointer
alloc_thread (gpointer data)
{
  ThreadJob *job = data;
  MemresBuffer **bufs = g_new (MemresBuffer *, job->n);

  for (guint i = 0; i < job->n; i++)
    bufs[i] = alloc_ok (job->mr, job->size, NULL);
  for (guint i = 0; i < job->n; i++)
    mt_close_ok (bufs[i], NULL);
  g_free (bufs);
  return NULL;
}

/* statistics counted from many threads: totals exact */
static void
test_stats_threads (void)
{
  const char *base = have_device () ? "cache>dmr" : "host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("stats>%s", base);
  g_autoptr (GError) error = NULL;
  ThreadJob job = { mr, 100, 512 };
  GThread *threads[8];
  MemresStatsCounters c;

  for (guint i = 0; i < 8; i++)
    threads[i] = g_thread_new ("alloc", alloc_thread, &job);
  for (guint i = 0; i < 8; i++)
    g_thread_join (threads[i]);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_total, ==, 800);
  g_assert_cmpuint (c.bytes_total, ==, 800 * 512);
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.count_peak, >=, 100);
  g_assert_cmpuint (c.count_peak, <=, 800);
  g_assert_cmpuint (c.size_classes[9], ==, 800);
}

static gboolean
count_live (const MemresLiveAllocation *a, gpointer data)
{
  GPtrArray *seen = data;

  g_ptr_array_add (seen, g_strdup_printf ("%" G_GSIZE_FORMAT " %s", a->size,
                                          a->backtrace != NULL ? "bt" : "nobt"));
  return TRUE;
}

/* RMM's tracking adaptor: outstanding allocations, with and without stacks */
static void
test_track_outstanding (void)
{
  const char *base = have_device () ? "dmr" : "host";
  g_autoptr (GError) error = NULL;

  for (int bt = 0; bt < 2; bt++)
    {
      g_autoptr (MemresResource) mr
          = mt_new_printf_ok ("track:backtrace=%s>%s", bt ? "true" : "false", base);
      g_autoptr (GPtrArray) seen = g_ptr_array_new_with_free_func (g_free);
      MemresBuffer *a = alloc_ok (mr, 100, NULL);
      MemresBuffer *b = alloc_ok (mr, 200, NULL);
      MemresBuffer *c = alloc_ok (mr, 300, NULL);

      mt_close_ok (b, NULL);
      MT_CHECK (memres_track_foreach_live (mr, count_live, seen, &error));
      g_assert_cmpuint (seen->len, ==, 2);
      g_assert_cmpstr (seen->pdata[0], ==, bt ? "100 bt" : "100 nobt");
      g_assert_cmpstr (seen->pdata[1], ==, bt ? "300 bt" : "300 nobt");
      mt_close_ok (a, NULL);
      mt_close_ok (c, NULL);
      g_ptr_array_set_size (seen, 0);
      MT_CHECK (memres_track_foreach_live (mr, count_live, seen, &error));
      g_assert_cmpuint (seen->len, ==, 0);
    }
}

static gboolean
always_retry (MemresResource *mr, gsize size, guint attempt, const GError *why, gpointer data)
{
  (*(guint *) data)++;
  return TRUE;
}

/* RMM's failure callback adaptor: the callback's calls, bounded by max_retries */
static void
test_retry_counts (void)
{
  for (guint max = 0; max < 4; max++)
    {
      g_autoptr (MemresResource) mr
          = mt_new_printf_ok ("retry:max_retries=%u>limit:max=1000>host", max);
      g_autoptr (GError) error = NULL;
      guint calls = 0;
      guint id = memres_retry_add_handler (mr, always_retry, &calls, NULL, &error);

      g_assert_no_error (error);
      g_assert_cmpuint (id, >, 0);
      g_assert_null (memres_resource_allocate (mr, 1001, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      g_clear_error (&error);
      g_test_message ("max_retries=%u: %u calls", max, calls);
      g_assert_cmpuint (calls, ==, max);
      g_assert_true (memres_retry_remove_handler (mr, id, &error));
      g_assert_no_error (error);
      g_assert_false (memres_retry_remove_handler (mr, id, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
      g_clear_error (&error);
      g_assert_false (memres_retry_remove_handler (mr, 0, &error));
      g_assert_nonnull (error);
      g_clear_error (&error);
    }
}

/* the adaptor functions on a stack without the adaptor: NOT_FOUND */
static void
test_adaptor_missing (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;

  g_assert_false (memres_stats_get_counters (mr, &c, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (memres_stats_reset (mr, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (memres_track_foreach_live (mr, count_live, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_cmpuint (memres_retry_add_handler (mr, always_retry, NULL, NULL, &error), ==, 0);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (memres_retry_remove_handler (mr, 1, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_null (memres_resource_find_layer (mr, "stats", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
}

/* spec strings a user gets wrong: each a clear error */
static void
test_bad_specs (void)
{
  static const struct
  {
    const char *spec;
    gint code;
  } bad[] = {
    { "", MEMRES_ERROR_INVALID_ARGUMENT },
    { ">", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host>", MEMRES_ERROR_INVALID_ARGUMENT },
    { ">host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:alignment", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:=256", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:alignment=3", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:alignment=0", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:alignment=-256", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:alignment=256,alignment=512", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:alignment=256,", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host:bogus=1", MEMRES_ERROR_INVALID_ARGUMENT },
    { "nosuchkind", MEMRES_ERROR_NOT_FOUND },
    { "HOST", MEMRES_ERROR_INVALID_ARGUMENT },
    { "stats", MEMRES_ERROR_INVALID_ARGUMENT },
    { "host>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "limit>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "limit:max=-1>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "limit:max=1QiB>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "limit:max=99999999999999999999999>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "limit:max=17179869184GiB>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "limit:max=1.5MiB>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "retry:max_retries=-1>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "retry:max_retries=x>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "track:backtrace=maybe>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "stats>>host", MEMRES_ERROR_INVALID_ARGUMENT },
    { " host", MEMRES_ERROR_INVALID_ARGUMENT },
    { "@", MEMRES_ERROR_INVALID_ARGUMENT },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresResource *mr = memres_resource_new (bad[i].spec, &error);

      g_test_message ("spec '%s': %s", bad[i].spec, error ? error->message : "(created)");
      g_assert_null (mr);
      g_assert_nonnull (error);
      g_assert_true (error->domain == MEMRES_ERROR);
      g_assert_cmpint (error->code, ==, bad[i].code);
      mt_assert_printable (error->message, 1000);
    }
}

/* get_default: bad devices */
static void
test_default (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) a = memres_resource_get_default (-1, &error);
  MemresResource *mr;

  g_assert_no_error (error);
  g_assert_cmpstr (memres_resource_get_kind_name (a), ==, "host");
  mr = memres_resource_get_default (-2, &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  if (have_device ())
    {
      mr = memres_resource_get_default (64, &error);
      g_assert_null (mr);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
      g_clear_error (&error);
      mr = memres_resource_get_default (G_MAXINT, &error);
      g_assert_null (mr);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
      g_clear_error (&error);
    }
}

/* free on a different stream than the allocation; many streams */
static void
test_other_stream_free (void)
{
  CUstream s1, s2;

  if (!have_device ())
    {
      g_test_skip ("no device");
      return;
    }
  s1 = mt_stream_new_on (0);
  s2 = mt_stream_new_on (0);
  for (const char *const *s = specs (); *s != NULL; s++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*s);
      MemresBuffer *bufs[16];

      for (guint i = 0; i < 16; i++)
        {
          bufs[i] = alloc_ok (mr, 1000 + i * 100, (i & 1) ? s1 : s2);
          mt_write_pattern (bufs[i], 0, 1000 + i * 100, i, (i & 1) ? s1 : s2);
        }
      for (guint i = 0; i < 16; i++)
        {
          mt_check_pattern (bufs[i], 0, 1000 + i * 100, i, (i & 1) ? s2 : s1);
          mt_close_ok (bufs[i], (i & 1) ? s2 : s1);
        }
      mt_sync_ok (s1);
      mt_sync_ok (s2);
    }
  mt_stream_free (s1);
  mt_stream_free (s2);
}

/* random allocate/free mix with patterns, from several threads, and freed on other threads */
typedef struct
{
  MemresResource *mr;
  GAsyncQueue *handoff;
  guint seed;
} MixJob;

static gpointer
mix_thread (gpointer data)
{
  MixJob *job = data;
  GRand *rand = g_rand_new_with_seed (job->seed);
  MemresBuffer *live[32] = { 0 };
  gsize sizes[32];

  for (guint round = 0; round < 400; round++)
    {
      guint i = g_rand_int_range (rand, 0, 32);

      if (live[i] == NULL)
        {
          sizes[i] = g_rand_int_range (rand, 1, 70000);
          live[i] = alloc_ok (job->mr, sizes[i], NULL);
          g_assert_cmpuint (memres_buffer_get_address (live[i]) % 256, ==, 0);
          mt_write_pattern (live[i], 0, sizes[i], job->seed * 1000 + i, NULL);
        }
      else
        {
          mt_check_pattern (live[i], 0, sizes[i], job->seed * 1000 + i, NULL);
          if (round & 1)
            mt_close_ok (live[i], NULL);
          else
            g_async_queue_push (job->handoff, live[i]);
          live[i] = NULL;
        }
      /* close what another thread handed over */
      MemresBuffer *other = g_async_queue_try_pop (job->handoff);
      if (other != NULL)
        mt_close_ok (other, NULL);
    }
  for (guint i = 0; i < 32; i++)
    if (live[i] != NULL)
      mt_close_ok (live[i], NULL);
  g_rand_free (rand);
  return NULL;
}

static void
test_random_threads (void)
{
  for (const char *const *s = specs (); *s != NULL; s++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*s);
      GAsyncQueue *q = g_async_queue_new ();
      MixJob jobs[4];
      GThread *threads[4];
      MemresBuffer *left;
      MemresStats st;

      for (guint i = 0; i < 4; i++)
        {
          jobs[i] = (MixJob){ mr, q, i + 1 };
          threads[i] = g_thread_new ("mix", mix_thread, &jobs[i]);
        }
      for (guint i = 0; i < 4; i++)
        g_thread_join (threads[i]);
      while ((left = g_async_queue_try_pop (q)) != NULL)
        mt_close_ok (left, NULL);
      g_async_queue_unref (q);
      st = mt_stats_ok (mr);
      g_assert_cmpuint (st.n_buffers, ==, 0);
      g_assert_cmpuint (st.used_current, ==, 0);
    }
}

/* statistics when one thread allocates and another closes: current back to 0, peaks right */
typedef struct
{
  MemresResource *mr;
  MemresBuffer **bufs;
  guint n;
  gsize size;
} CrossJob;

static gpointer
close_all_thread (gpointer data)
{
  CrossJob *job = data;

  for (guint i = 0; i < job->n; i++)
    mt_close_ok (job->bufs[i], NULL);
  return NULL;
}

static gpointer
alloc_all_thread (gpointer data)
{
  CrossJob *job = data;

  for (guint i = 0; i < job->n; i++)
    job->bufs[i] = alloc_ok (job->mr, job->size, NULL);
  return NULL;
}

static void
test_stats_cross_thread (void)
{
  const char *base = have_device () ? "dmr" : "host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("stats>%s", base);
  g_autoptr (GError) error = NULL;
  MemresBuffer *bufs[20];
  CrossJob job = { mr, bufs, 10, 1024 };
  MemresStatsCounters c;
  MemresStats st;
  GThread *t;

  for (guint i = 0; i < 10; i++)
    bufs[i] = alloc_ok (mr, 1024, NULL);
  t = g_thread_new ("closer", close_all_thread, &job);
  g_thread_join (t);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.count_peak, ==, 10);
  g_assert_cmpuint (c.bytes_peak, ==, 10240);
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.n_buffers, ==, 0);
  g_assert_cmpuint (st.used_current, ==, 0);
  g_assert_cmpuint (st.used_high, ==, 10240);
  /* 5 here, then 10 on another thread while they live: peak 15 */
  for (guint i = 0; i < 5; i++)
    bufs[10 + i] = alloc_ok (mr, 1024, NULL);
  t = g_thread_new ("allocator", alloc_all_thread, &job);
  g_thread_join (t);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_current, ==, 15);
  g_assert_cmpuint (c.count_peak, ==, 15);
  g_assert_cmpuint (c.bytes_peak, ==, 15 * 1024);
  g_assert_cmpuint (c.count_total, ==, 25);
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.n_buffers, ==, 15);
  g_assert_cmpuint (st.used_high, ==, 15 * 1024);
  /* closing here what the other thread allocated */
  for (guint i = 0; i < 15; i++)
    mt_close_ok (bufs[i], NULL);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_cmpuint (c.bytes_current, ==, 0);
  MT_CHECK (memres_stats_reset (mr, &error));
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_peak, ==, 0);
  g_assert_cmpuint (c.bytes_peak, ==, 0);
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.n_buffers, ==, 0);
}

typedef struct
{
  guint calls;
  gboolean answer;
  guint last_attempt;
} Handler;

static gboolean
handler_answers (MemresResource *mr, gsize size, guint attempt, const GError *why, gpointer data)
{
  Handler *h = data;

  h->calls++;
  h->last_attempt = attempt;
  g_assert_cmpuint (size, ==, 1001);
  return h->answer;
}

/* two handlers: the first declines, the second asks for a retry each time */
static void
test_retry_two_handlers (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("retry:max_retries=3>limit:max=1000>host");
  g_autoptr (GError) error = NULL;
  Handler h1 = { 0, FALSE, 0 }, h2 = { 0, TRUE, 0 };
  guint id1 = memres_retry_add_handler (mr, handler_answers, &h1, NULL, &error);
  guint id2 = memres_retry_add_handler (mr, handler_answers, &h2, NULL, &error);

  g_assert_no_error (error);
  g_assert_cmpuint (id1, !=, id2);
  g_assert_null (memres_resource_allocate (mr, 1001, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_test_message ("h1 %u calls (last attempt %u), h2 %u calls (last attempt %u)", h1.calls,
                  h1.last_attempt, h2.calls, h2.last_attempt);
  g_assert_cmpuint (h2.calls, ==, 3);
  g_assert_cmpuint (h1.calls, ==, 3);
  g_assert_cmpuint (h2.last_attempt, ==, 3);
  /* both declining: one round of calls, no retry */
  h1 = (Handler){ 0, FALSE, 0 };
  h2 = (Handler){ 0, FALSE, 0 };
  g_assert_null (memres_resource_allocate (mr, 1001, NULL, &error));
  g_clear_error (&error);
  g_assert_cmpuint (h1.calls, ==, 1);
  g_assert_cmpuint (h2.calls, ==, 1);
}

static gint destroyed;

static void
count_destroyed (gpointer data)
{
  destroyed++;
}

/* a handler's destroy notify runs once, at removal or with the resource */
static void
test_retry_destroy (void)
{
  MemresResource *mr = mt_new_ok ("retry>host");
  g_autoptr (GError) error = NULL;
  Handler h = { 0 };
  guint id;

  destroyed = 0;
  id = memres_retry_add_handler (mr, handler_answers, &h, count_destroyed, &error);
  g_assert_cmpuint (id, >, 0);
  memres_resource_unref (mr);
  g_assert_cmpint (destroyed, ==, 1);
}

/* tracking: a walk that stops; the live list after closes on another thread */
static gboolean
stop_after_one (const MemresLiveAllocation *a, gpointer data)
{
  (*(guint *) data)++;
  return FALSE;
}

static void
test_track_stop_and_threads (void)
{
  const char *base = have_device () ? "dmr" : "host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("track>%s", base);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) seen = g_ptr_array_new_with_free_func (g_free);
  MemresBuffer *bufs[6];
  CrossJob job = { mr, bufs, 3, 4096 };
  guint n = 0;
  GThread *t;

  t = g_thread_new ("allocator", alloc_all_thread, &job);
  g_thread_join (t);
  for (guint i = 3; i < 6; i++)
    bufs[i] = alloc_ok (mr, 100 * i, NULL);
  MT_CHECK (memres_track_foreach_live (mr, stop_after_one, &n, &error));
  g_assert_cmpuint (n, ==, 1);
  job.n = 2;
  t = g_thread_new ("closer", close_all_thread, &job);
  g_thread_join (t);
  MT_CHECK (memres_track_foreach_live (mr, count_live, seen, &error));
  g_assert_cmpuint (seen->len, ==, 4);
  g_assert_cmpstr (seen->pdata[0], ==, "4096 nobt");
  g_assert_cmpstr (seen->pdata[1], ==, "300 nobt");
  for (guint i = 2; i < 6; i++)
    mt_close_ok (bufs[i], NULL);
}

/* CuPy's pool: a freed block is reused for the same size on the same stream; a trim gives
 * everything back once nothing is live */
static void
test_cache_reuse_and_trim (void)
{
  const char *base = have_device () ? "dmr:pool=new,release_threshold=0" : "host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("cache>%s", base);
  g_autoptr (GError) error = NULL;
  MemresBuffer *a, *b;
  guint64 addr;
  MemresStats st;

  a = alloc_ok (mr, 5000, NULL);
  addr = memres_buffer_get_address (a);
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.used_current, >=, 5000); /* its size class (docs/cache.md) */
  g_assert_cmpuint (st.n_buffers, ==, 1);
  mt_close_ok (a, NULL);
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.used_current, ==, 0);
  g_assert_cmpuint (st.reserved_current, >=, 5000);
  b = alloc_ok (mr, 5000, NULL);
  g_assert_cmpuint (memres_buffer_get_address (b), ==, addr);
  mt_close_ok (b, NULL);
  MT_CHECK (memres_resource_trim (mr, 0, &error));
  st = mt_stats_ok (mr);
  g_test_message ("after trim: reserved %" G_GUINT64_FORMAT, (guint64) st.reserved_current);
  g_assert_cmpuint (st.reserved_current, ==, 0);
  g_assert_cmpuint (st.used_current, ==, 0);
}

/* RMM's logging adaptor: one line per allocate and free, in RMM's columns */
static void
test_log_lines (void)
{
  g_autofree char *dir = g_dir_make_tmp ("peers-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "log.csv", NULL);
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  /* the limit refuses the huge request before host (a sanitizer aborts on its allocation) */
  MemresResource *mr = mt_new_printf_ok ("log:path=%s>limit:max=1MiB>host", path);
  MemresBuffer *a = alloc_ok (mr, 123, NULL);
  MemresBuffer *z = alloc_ok (mr, 0, NULL);

  mt_close_ok (a, NULL);
  mt_close_ok (z, NULL);
  g_assert_null (memres_resource_allocate (mr, (gsize) 1 << 62, NULL, &error));
  g_clear_error (&error);
  g_assert_null (memres_resource_allocate (mr, G_MAXSIZE, NULL, &error));
  g_clear_error (&error);
  memres_resource_unref (mr);
  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    g_test_message ("log: %s", lines[i]);
  g_assert_cmpstr (lines[0], ==, "Thread,Time,Action,Pointer,Size,Stream");
  g_assert_nonnull (strstr (lines[1], ",allocate,"));
  g_assert_nonnull (strstr (lines[1], ",123,"));
  g_assert_nonnull (strstr (lines[2], ",free,"));
  g_assert_nonnull (strstr (lines[3], ",allocate failure,"));
  g_unlink (path);
  g_rmdir (dir);
}

/* to_string names a spec that makes the same stack again */
static void
test_to_string_roundtrip (void)
{
  static const char *const stacks[] = { "host",
                                        "stats>host",
                                        "limit:max=1000>host",
                                        "retry:max_retries=5>track>host",
                                        "cache>host",
                                        "host:alignment=4096",
                                        NULL };

  for (const char *const *s = stacks; *s != NULL; s++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*s);
      g_autofree char *str = memres_resource_to_string (mr);
      g_autoptr (MemresResource) again = mt_new_ok (str);
      g_autofree char *str2 = memres_resource_to_string (again);

      g_test_message ("%s -> %s", *s, str);
      g_assert_cmpstr (str, ==, str2);
    }
}

/* host's alignment option honoured at odd sizes */
static void
test_host_alignment (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("host:alignment=4096");

  for (gsize size = 1; size < 20000; size += 777)
    {
      MemresBuffer *buf = alloc_ok (mr, size, NULL);

      g_assert_cmpuint (memres_buffer_get_address (buf) % 4096, ==, 0);
      mt_close_ok (buf, NULL);
    }
}

static gint released;

static void
count_release (gpointer data)
{
  released++;
}

/* cuda.core's Buffer.from_handle: wrapped memory, its release once */
static void
test_wrap_release_once (void)
{
  g_autoptr (GError) error = NULL;
  guint8 mem[512];
  MemresBuffer *buf;

  released = 0;
  buf = memres_buffer_new_for_pointer (mem, sizeof mem, -1, MEMRES_MEMORY_HOST_ACCESSIBLE,
                                       count_release, NULL, &error);
  g_assert_no_error (error);
  MT_CHECK (memres_buffer_fill (buf, 0xab, 1, NULL, &error));
  g_assert_cmpuint (mem[511], ==, 0xab);
  MT_CHECK (memres_buffer_close (buf, NULL, &error));
  MT_CHECK (memres_buffer_close (buf, NULL, &error));
  g_assert_cmpint (released, ==, 1);
  memres_buffer_unref (buf);
  g_assert_cmpint (released, ==, 1);
  /* dropped without a close: released with the last reference */
  buf = memres_buffer_new_for_pointer (mem, sizeof mem, -1, MEMRES_MEMORY_HOST_ACCESSIBLE,
                                       count_release, NULL, &error);
  memres_buffer_unref (buf);
  g_assert_cmpint (released, ==, 2);
  g_assert_null (memres_buffer_new_for_pointer (NULL, 8, -1, MEMRES_MEMORY_HOST_ACCESSIBLE,
                                                count_release, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_cmpint (released, ==, 2);
}

static guint64
counter_u64 (MemresResource *mr, const char *name)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) counters = memres_resource_get_counters (mr, &error);
  guint64 v = G_MAXUINT64;

  g_assert_no_error (error);
  g_assert_true (g_variant_lookup (counters, name, "t", &v));
  return v;
}

/* a refusal below an adaptor leaves its counts as they were (RMM's adaptors over a full pool) */
static void
test_upstream_failure_counts (void)
{
  const char *base = have_device () ? "dmr:pool=new,max_size=1MiB" : "limit:max=1MiB>host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("track>stats>limit:max=10MiB>%s", base);
  MemresResource *lim; /* transfer none */
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) seen = g_ptr_array_new_with_free_func (g_free);
  MemresStatsCounters c;
  MemresBuffer *a;

  lim = memres_resource_find_layer (mr, "limit", &error);
  g_assert_no_error (error);
  a = alloc_ok (mr, 512 << 10, NULL);
  g_assert_null (memres_resource_allocate (mr, 2 << 20, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpuint (counter_u64 (lim, "used"), ==, 512 << 10);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.count_current, ==, 1);
  g_assert_cmpuint (c.count_total, ==, 1);
  g_assert_cmpuint (c.bytes_current, ==, 512 << 10);
  MT_CHECK (memres_track_foreach_live (mr, count_live, seen, &error));
  g_assert_cmpuint (seen->len, ==, 1);
  mt_close_ok (a, NULL);
  g_assert_cmpuint (counter_u64 (lim, "used"), ==, 0);
  a = alloc_ok (mr, 1 << 20, NULL);
  mt_close_ok (a, NULL);
}

/* a caching pool over a small upstream: a request past it fails, the pool serves again */
static void
test_cache_oom_then_usable (void)
{
  const char *base = have_device () ? "dmr:pool=new,max_size=8MiB" : "limit:max=8MiB>host";
  g_autoptr (MemresResource) mr = mt_new_printf_ok ("cache>%s", base);
  g_autoptr (GError) error = NULL;
  MemresBuffer *bufs[64];
  guint n = 0;
  MemresStats st;

  /* fill it with small blocks, then ask for one more than fits */
  while (n < 64)
    {
      MemresBuffer *b = memres_resource_allocate (mr, 256 << 10, NULL, &error);

      if (b == NULL)
        break;
      bufs[n++] = b;
    }
  g_test_message ("%u blocks of 256 KiB before out of memory", n);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpuint (n, >=, 24);
  g_assert_cmpuint (n, <=, 32);
  for (guint i = 0; i < n; i++)
    mt_close_ok (bufs[i], NULL);
  /* all freed: one block of nearly all of it fits after the cache gives back its chunks */
  bufs[0] = alloc_ok (mr, 6 << 20, NULL);
  mt_close_ok (bufs[0], NULL);
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.used_current, ==, 0);
  g_assert_cmpuint (st.n_buffers, ==, 0);
}

/* set_deallocation_stream then close(NULL); a closed buffer refuses it */
static void
test_deallocation_stream (void)
{
  g_autoptr (GError) error = NULL;
  CUstream s;

  if (!have_device ())
    {
      g_test_skip ("no device");
      return;
    }
  s = mt_stream_new_on (0);
  for (const char *const *sp = specs (); *sp != NULL; sp++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*sp);
      MemresBuffer *buf = alloc_ok (mr, 4096, NULL);

      g_assert_true (memres_buffer_get_deallocation_stream (buf) == NULL);
      MT_CHECK (memres_buffer_set_deallocation_stream (buf, s, &error));
      g_assert_true (memres_buffer_get_deallocation_stream (buf) == (MemresStream) s);
      MT_CHECK (memres_buffer_close (buf, NULL, &error));
      g_assert_false (memres_buffer_set_deallocation_stream (buf, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
      g_clear_error (&error);
      memres_buffer_unref (buf);
      mt_sync_ok (s);
    }
  mt_stream_free (s);
}

/* cuda.core's fill: widths 2 and 4 on sizes not their multiple, patterns too wide */
static void
test_fill_widths (void)
{
  for (const char *const *sp = specs (); *sp != NULL; sp++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*sp);
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = alloc_ok (mr, 4096, NULL);
      gsize size = memres_buffer_get_size (buf);
      g_autofree guint8 *back = g_malloc (size);

      MT_CHECK (memres_buffer_fill (buf, 0x1234, 2, NULL, &error));
      MT_CHECK (memres_buffer_read (buf, 0, back, size, NULL, &error));
      mt_sync_ok (NULL);
      g_assert_cmpuint (back[0], ==, 0x34);
      g_assert_cmpuint (back[1], ==, 0x12);
      g_assert_cmpuint (back[size - 1], ==, 0x12);
      MT_CHECK (memres_buffer_fill (buf, 0xdeadbeef, 4, NULL, &error));
      MT_CHECK (memres_buffer_read (buf, 0, back, size, NULL, &error));
      mt_sync_ok (NULL);
      g_assert_cmpuint (back[size - 4], ==, 0xef);
      g_assert_cmpuint (back[size - 1], ==, 0xde);
      g_assert_false (memres_buffer_fill (buf, 0x100, 1, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      g_assert_false (memres_buffer_fill (buf, 0x10000, 2, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      g_assert_false (memres_buffer_fill (buf, 0, 0, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      mt_close_ok (buf, NULL);
      if (memres_buffer_get_size (buf = alloc_ok (mr, 4097, NULL)) == 4097)
        {
          g_assert_false (memres_buffer_fill (buf, 1, 2, NULL, &error));
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
          g_clear_error (&error);
          g_assert_false (memres_buffer_fill (buf, 1, 4, NULL, &error));
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
          g_clear_error (&error);
        }
      mt_close_ok (buf, NULL);
    }
}

/* copies between kinds, with the bytes read back */
static void
test_copy_between_kinds (void)
{
  g_autoptr (MemresResource) host = mt_new_ok ("host");
  g_autoptr (GError) error = NULL;

  for (const char *const *sp = specs (); *sp != NULL; sp++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*sp);
      MemresBuffer *d = alloc_ok (mr, 3000, NULL);
      gsize size = memres_buffer_get_size (d);
      MemresBuffer *h = alloc_ok (host, size, NULL);
      MemresBuffer *h2 = alloc_ok (host, size, NULL);

      mt_write_pattern (h, 0, size, 99, NULL);
      MT_CHECK (memres_buffer_copy_to (h, d, NULL, &error));
      MT_CHECK (memres_buffer_copy_from (h2, d, NULL, &error));
      mt_sync_ok (NULL);
      mt_check_pattern (h2, 0, size, 99, NULL);
      mt_close_ok (d, NULL);
      mt_close_ok (h, NULL);
      mt_close_ok (h2, NULL);
    }
}

/* memory freed by one thread, held in its caches while it lives, serves another thread's large
 * request when the device is nearly full (RMM's arena bug: free memory stuck in another thread's
 * arena) */
typedef struct
{
  MemresResource *mr;
  gsize block;
  guint n;
  GMutex lock;
  GCond cond;
  gint stage; /* 1: freed, waiting; 2: may exit */
} HoldJob;

static gpointer
fill_free_wait (gpointer data)
{
  HoldJob *job = data;
  MemresBuffer **bufs = g_new (MemresBuffer *, job->n);

  for (guint i = 0; i < job->n; i++)
    bufs[i] = alloc_ok (job->mr, job->block, NULL);
  for (guint i = 0; i < job->n; i++)
    mt_close_ok (bufs[i], NULL);
  g_free (bufs);
  g_mutex_lock (&job->lock);
  job->stage = 1;
  g_cond_broadcast (&job->cond);
  while (job->stage != 2)
    g_cond_wait (&job->cond, &job->lock);
  g_mutex_unlock (&job->lock);
  return NULL;
}

static void
test_held_by_other_thread (void)
{
  static const char *const stacks[] = { "arena",     "arena:park=true",      "cache>dmr:pool=new",
                                        "cache>dmr", "arena:max_block=1MiB", NULL };
  const MemresCudaDriver *drv;
  size_t free_b = 0, total_b = 0;

  if (!have_device ())
    {
      g_test_skip ("no device");
      return;
    }
  if (!mt_require_fake ("fills the fake device"))
    return;
  drv = mt_driver ();
  for (const char *const *sp = stacks; *sp != NULL; sp++)
    for (guint shape = 0; shape < 3; shape++)
      {
        g_autoptr (MemresResource) ballast_mr = mt_new_ok ("dmr:pool=new");
        g_autoptr (MemresResource) mr = mt_new_ok (*sp);
        g_autoptr (GError) error = NULL;
        static const gsize blocks[] = { 4096, 64 << 10, 3 << 20 };
        HoldJob job = { mr, blocks[shape], (guint) ((48 << 20) / blocks[shape]) };
        MemresBuffer *ballast, *big;
        GThread *t;
        gboolean pushed = FALSE;

        g_assert_true (memres_cuda_push_context (0, &pushed, NULL));
        g_assert_cmpint (drv->cuMemGetInfo (&free_b, &total_b), ==, CUDA_SUCCESS);
        memres_cuda_pop_context (pushed);
        ballast = alloc_ok (ballast_mr, free_b - (64 << 20), NULL);
        /* the device is nearly full now */
        g_assert_null (memres_resource_allocate (ballast_mr, 80 << 20, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
        g_clear_error (&error);
        g_mutex_init (&job.lock);
        g_cond_init (&job.cond);
        t = g_thread_new ("holder", fill_free_wait, &job);
        g_mutex_lock (&job.lock);
        while (job.stage != 1)
          g_cond_wait (&job.cond, &job.lock);
        g_mutex_unlock (&job.lock);
        big = memres_resource_allocate (mr, 40 << 20, NULL, &error);
        g_test_message ("%s, blocks of %" G_GSIZE_FORMAT ": %s", *sp, blocks[shape],
                        big != NULL ? "served" : error->message);
        g_assert_no_error (error);
        mt_close_ok (big, NULL);
        g_mutex_lock (&job.lock);
        job.stage = 2;
        g_cond_broadcast (&job.cond);
        g_mutex_unlock (&job.lock);
        g_thread_join (t);
        g_mutex_clear (&job.lock);
        g_cond_clear (&job.cond);
        mt_close_ok (ballast, NULL);
      }
}

/* every call on a closed buffer: the getters report nothing, the others MEMRES_ERROR_CLOSED */
static void
test_closed_buffer_calls (void)
{
  for (const char *const *sp = specs (); *sp != NULL; sp++)
    for (gsize size = 0; size <= 256; size += 256)
      {
        g_autoptr (MemresResource) mr = mt_new_ok (*sp);
        g_autoptr (GError) error = NULL;
        MemresBuffer *buf = alloc_ok (mr, size, NULL);
        MemresBuffer *other = alloc_ok (mr, size, NULL);
        MemresBufferDescriptor desc;
        guint8 byte = 0;

        g_test_message ("%s, %" G_GSIZE_FORMAT " bytes", *sp, size);
        MT_CHECK (memres_buffer_close (buf, NULL, &error));
        g_assert_null (memres_buffer_get_pointer (buf));
        g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
        g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
        g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
        g_assert_null (memres_buffer_get_resource (buf));
        g_assert_cmpuint (memres_buffer_get_flags (buf), ==, 0);
        g_assert_false (memres_buffer_is_device_accessible (buf));
        g_assert_false (memres_buffer_is_host_accessible (buf));
        g_assert_false (memres_buffer_read (buf, 0, &byte, 0, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
        g_clear_error (&error);
        g_assert_false (memres_buffer_write (buf, 0, &byte, 0, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
        g_clear_error (&error);
        g_assert_false (memres_buffer_copy_to (buf, other, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
        g_clear_error (&error);
        g_assert_false (memres_buffer_copy_to (other, buf, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
        g_clear_error (&error);
        g_assert_false (memres_buffer_copy_from (buf, other, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
        g_clear_error (&error);
        g_assert_false (memres_buffer_resize (buf, 512, NULL, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
        g_clear_error (&error);
        g_assert_false (memres_buffer_export (buf, &desc, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
        g_clear_error (&error);
        g_assert_false (memres_buffer_close_full (buf, NULL, MEMRES_CLOSE_CALLER_ORDERED, &error)
                        == FALSE);
        g_assert_no_error (error);
        memres_buffer_unref (buf);
        mt_close_ok (other, NULL);
      }
}

/* statistics: size classes per power of two, cleared by a reset; the resource's own marks */
static void
test_stats_classes_reset (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("stats>host");
  g_autoptr (GError) error = NULL;
  static const gsize sizes[] = { 1, 2, 3, 255, 256, 257, 1 << 20, (1 << 20) + 1 };
  MemresBuffer *bufs[G_N_ELEMENTS (sizes)];
  MemresStatsCounters c;
  MemresStats st;

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    bufs[i] = alloc_ok (mr, sizes[i], NULL);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.size_classes[0], ==, 1);
  g_assert_cmpuint (c.size_classes[1], ==, 2);
  g_assert_cmpuint (c.size_classes[7], ==, 1);
  g_assert_cmpuint (c.size_classes[8], ==, 2);
  g_assert_cmpuint (c.size_classes[20], ==, 2);
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    mt_close_ok (bufs[i], NULL);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.size_classes[20], ==, 2); /* totals: closes take nothing away */
  MT_CHECK (memres_stats_reset (mr, &error));
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  for (guint k = 0; k < MEMRES_STATS_N_SIZE_CLASSES; k++)
    g_assert_cmpuint (c.size_classes[k], ==, 0);
  st = mt_stats_ok (mr);
  g_test_message ("after stats reset: used_high %" G_GUINT64_FORMAT, (guint64) st.used_high);
  bufs[0] = alloc_ok (mr, 1000, NULL);
  MT_CHECK (memres_resource_reset_stats (mr, &error));
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.used_high, ==, 1000);
  g_assert_cmpuint (st.used_current, ==, 1000);
  mt_close_ok (bufs[0], NULL);
  st = mt_stats_ok (mr);
  g_assert_cmpuint (st.used_high, ==, 1000);
  g_assert_cmpuint (st.used_current, ==, 0);
}

/* statistics of a buffer that grows and shrinks (vmm): current and peak follow its size */
static void
test_stats_resize (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;
  MemresBuffer *buf;
  gsize g;

  if (!have_device ())
    {
      g_test_skip ("no device");
      return;
    }
  mr = mt_new_ok ("stats>vmm");
  g = mt_device_granularity ();
  buf = alloc_ok (mr, g, NULL);
  MT_CHECK (memres_buffer_resize (buf, 3 * g, NULL, &error));
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, 3 * g);
  g_assert_cmpuint (c.bytes_peak, ==, 3 * g);
  g_assert_cmpuint (c.count_current, ==, 1);
  MT_CHECK (memres_buffer_resize (buf, g, NULL, &error));
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, g);
  g_assert_cmpuint (c.bytes_peak, ==, 3 * g);
  MT_CHECK (memres_buffer_resize (buf, 0, NULL, &error));
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_test_message ("resized to 0: bytes %" G_GUINT64_FORMAT ", count %" G_GUINT64_FORMAT,
                  c.bytes_current, c.count_current);
  g_assert_cmpuint (c.bytes_current, ==, 0);
  mt_close_ok (buf, NULL);
  MT_CHECK (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_cmpuint (c.count_total, ==, 1);
}

/* a workload's mix over many stacks: sizes from 1 byte to 48 MiB (log-uniform), three streams,
 * closes on another stream and another thread, resizes where the kind can; the ends of every
 * buffer written and read back */
static const char *const fuzz_device_specs[] = { "arena",
                                                 "arena:park=true",
                                                 "arena:settle=eager",
                                                 "arena:max_block=1MiB,front=0",
                                                 "cache>vmm",
                                                 "cache>arena",
                                                 "stats>cache>arena",
                                                 "limit:max=4GiB>arena",
                                                 "track>arena",
                                                 "log:path=/dev/null>arena",
                                                 "retry>cache>dmr",
                                                 "vmm",
                                                 "stats>vmm",
                                                 "pinned:mode=legacy",
                                                 "managed:pool=none",
                                                 "cache:front=0>dmr:pool=new",
                                                 "dmr:pool=new,release_threshold=0",
                                                 "cache>pinned",
                                                 "ipc",
                                                 NULL };

typedef struct
{
  MemresResource *mr;
  GAsyncQueue *handoff;
  CUstream *streams;
  guint seed;
  guint rounds;
} FuzzJob;

static gsize
fuzz_size (GRand *r)
{
  /* log-uniform up to 2^25.6, about 48 MiB, on a device: a power of two, then a part of the
   * next; up to 4 MiB in host memory, which Meson's MALLOC_PERTURB_ fills at every malloc and
   * free (48 MiB buffers made the core run take a minute) */
  guint e = g_rand_int_range (r, 0, have_device () ? 26 : 22);
  gsize lo = (gsize) 1 << e;

  return MIN (lo + (gsize) g_rand_int_range (r, 0, (gint32) MIN (lo, G_MAXINT32)), 48 << 20);
}

static void
fuzz_write (MemresBuffer *b, guint32 seed, MemresStream s)
{
  gsize n = memres_buffer_get_size (b);
  gsize k = MIN (n, 4096);

  mt_write_pattern (b, 0, k, seed, s);
  mt_write_pattern (b, n - k, k, seed + 1, s);
}

static void
fuzz_check (MemresBuffer *b, guint32 seed, MemresStream s)
{
  gsize n = memres_buffer_get_size (b);
  gsize k = MIN (n, 4096);

  if (n >= 2 * k) /* the two ends do not overlap */
    mt_check_pattern (b, 0, k, seed, s);
  mt_check_pattern (b, n - k, k, seed + 1, s);
}

typedef struct
{
  MemresBuffer *buf;
  guint32 seed;
} FuzzLive;

static gpointer
fuzz_thread (gpointer data)
{
  FuzzJob *job = data;
  GRand *r = g_rand_new_with_seed (job->seed);
  FuzzLive live[24] = { { 0 } };
  gboolean resizable = (memres_resource_get_flags (job->mr) & MEMRES_MEMORY_RESIZABLE) != 0;

  for (guint round = 0; round < job->rounds; round++)
    {
      guint i = g_rand_int_range (r, 0, 24);
      MemresStream s = job->streams[g_rand_int_range (r, 0, 3)];
      FuzzLive *other;

      if (live[i].buf == NULL)
        {
          gsize size = fuzz_size (r);

          live[i].buf = alloc_ok (job->mr, size, s);
          g_assert_cmpuint (memres_buffer_get_address (live[i].buf) % 256, ==, 0);
          live[i].seed = g_rand_int (r);
          fuzz_write (live[i].buf, live[i].seed, s);
        }
      else
        {
          fuzz_check (live[i].buf, live[i].seed, s);
          switch (g_rand_int_range (r, 0, 4))
            {
            case 0:
              mt_close_ok (live[i].buf, s);
              break;
            case 1:
              mt_close_ok (live[i].buf, NULL);
              break;
            case 2:
              {
                FuzzLive *h = g_new (FuzzLive, 1);

                *h = live[i];
                g_async_queue_push (job->handoff, h);
                break;
              }
            default:
              if (resizable)
                {
                  g_autoptr (GError) error = NULL;
                  gsize size = fuzz_size (r);

                  if (memres_buffer_resize (live[i].buf, size, s, &error))
                    {
                      g_assert_cmpuint (memres_buffer_get_size (live[i].buf), >=, size);
                      fuzz_write (live[i].buf, live[i].seed, s);
                      continue;
                    }
                  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
                }
              mt_close_ok (live[i].buf, s);
              break;
            }
          live[i].buf = NULL;
        }
      other = g_async_queue_try_pop (job->handoff);
      if (other != NULL)
        {
          fuzz_check (other->buf, other->seed, s);
          mt_close_ok (other->buf, s);
          g_free (other);
        }
    }
  for (guint i = 0; i < 24; i++)
    if (live[i].buf != NULL)
      mt_close_ok (live[i].buf, NULL);
  g_rand_free (r);
  return NULL;
}

static void
test_fuzz_stacks (void)
{
  CUstream streams[3] = { NULL, NULL, NULL };
  const char *const *list = have_device () ? fuzz_device_specs : host_specs;

  if (have_device ())
    {
      streams[1] = mt_stream_new_on (0);
      streams[2] = mt_stream_new_on (0);
    }
  for (const char *const *sp = list; *sp != NULL; sp++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*sp);
      GAsyncQueue *q = g_async_queue_new ();
      FuzzJob jobs[3];
      GThread *threads[3];
      FuzzLive *left;
      MemresStats st;

      g_test_message ("%s", *sp);
      for (guint i = 0; i < 3; i++)
        {
          jobs[i] = (FuzzJob){ mr, q, streams, g_test_rand_int () + i, 300 };
          threads[i] = g_thread_new ("fuzz", fuzz_thread, &jobs[i]);
        }
      for (guint i = 0; i < 3; i++)
        g_thread_join (threads[i]);
      while ((left = g_async_queue_try_pop (q)) != NULL)
        {
          fuzz_check (left->buf, left->seed, NULL);
          mt_close_ok (left->buf, NULL);
          g_free (left);
        }
      g_async_queue_unref (q);
      for (guint i = 1; i < 3; i++)
        if (streams[i] != NULL)
          mt_sync_ok (streams[i]);
      st = mt_stats_ok (mr);
      g_assert_cmpuint (st.n_buffers, ==, 0);
      g_assert_cmpuint (st.used_current, ==, 0);
    }
  for (guint i = 1; i < 3; i++)
    if (streams[i] != NULL)
      mt_stream_free (streams[i]);
}

/* cuda.core's VMM grow: a resized buffer keeps its bytes up to the smaller size, grown in place
 * or moved; shrunk and grown again */
static void
test_resize_keeps_bytes (void)
{
  static const char *const stacks[] = {
    "vmm", "arena", "stats>vmm", "track>vmm", "arena:max_block=1MiB", "vmm:chunk=4MiB", NULL
  };

  if (!have_device ())
    {
      g_test_skip ("no device");
      return;
    }
  for (const char *const *sp = stacks; *sp != NULL; sp++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*sp);
      g_autoptr (GError) error = NULL;
      static const gsize steps[] = { 5000, 3 << 20, 100, 70000, 9 << 20, 1 << 20, 40 << 20 };
      MemresBuffer *buf, *blocker;
      gsize kept;

      if ((memres_resource_get_flags (mr) & MEMRES_MEMORY_RESIZABLE) == 0)
        {
          g_test_message ("%s: not resizable", *sp);
          continue;
        }
      buf = alloc_ok (mr, 3000, NULL);
      mt_write_pattern (buf, 0, 3000, 5, NULL);
      kept = 3000;
      /* a neighbour, so that growing in place is not always possible */
      blocker = alloc_ok (mr, 1 << 20, NULL);
      for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
        {
          MT_CHECK (memres_buffer_resize (buf, steps[i], NULL, &error));
          g_assert_cmpuint (memres_buffer_get_size (buf), >=, steps[i]);
          g_assert_cmpuint (memres_buffer_get_address (buf) % 256, ==, 0);
          kept = MIN (kept, steps[i]);
          g_test_message ("%s: resized to %" G_GSIZE_FORMAT " (%" G_GSIZE_FORMAT
                          " bytes) at 0x%" G_GINT64_MODIFIER "x",
                          *sp, steps[i], memres_buffer_get_size (buf),
                          memres_buffer_get_address (buf));
          mt_check_pattern (buf, 0, kept, 5, NULL);
        }
      mt_close_ok (buf, NULL);
      mt_close_ok (blocker, NULL);
    }
}

/* the stream hazard over more stacks, and a buffer closed on a third stream: held stream A
 * fills X, X is closed on B (ordered after A by the default close), Y is allocated on C and
 * filled; once A runs, Y holds C's bytes */
static void
test_hazards_more (void)
{
  static const char *const stacks[] = { "cache>pinned",
                                        "stats>cache>dmr:pool=new",
                                        "limit:max=1GiB>arena",
                                        "cache>managed",
                                        "track>cache>dmr:pool=new",
                                        "cache>arena",
                                        "arena:park=true",
                                        NULL };
  static const gsize sizes[] = { 4096, 1 << 20, 6 << 20 };

  for (const char *const *sp = stacks; *sp != NULL; sp++)
    for (guint k = 0; k < G_N_ELEMENTS (sizes); k++)
      {
        MtHazard h = { *sp, sizes[k], MT_HAZARD_STREAM, FALSE, FALSE, FALSE };
        g_autoptr (MemresResource) mr = NULL;
        MemresStream a, b, c;
        MemresBuffer *x, *y;
        MtStreamHold *hold;

        g_test_message ("%s, %" G_GSIZE_FORMAT " bytes", *sp, sizes[k]);
        mt_hazard_run (&h);
        h.kind = MT_HAZARD_LEGACY;
        mt_hazard_run (&h);
        if (!mt_hazard_begin ())
          return;
        a = mt_stream_new_on (0);
        b = mt_stream_new_on (0);
        c = mt_stream_new_on (0);
        mr = mt_new_ok (*sp);
        x = alloc_ok (mr, sizes[k], a);
        mt_fill_byte_ok (x, 0x11, a);
        mt_sync_ok (a);
        hold = mt_stream_hold (a);
        mt_fill_byte_ok (x, 0xaa, a);
        mt_close_ok (x, b);
        y = alloc_ok (mr, sizes[k], c);
        mt_fill_byte_ok (y, 0xcc, c);
        g_assert_true (mt_stream_is_held (hold));
        mt_stream_release (hold);
        mt_assert_bytes (y, 0xcc, c);
        mt_close_ok (y, c);
        mt_sync_ok (b);
        mt_sync_ok (c);
        g_clear_pointer (&mr, memres_resource_unref);
        mt_stream_free (a);
        mt_stream_free (b);
        mt_stream_free (c);
        mt_hazard_end ();
      }
}

/* RMM's per-thread default stream and the named legacy stream: allocations on them from several
 * threads, closed on the other one, the bytes read back on each */
static gpointer
special_streams_thread (gpointer data)
{
  MemresResource *mr = data;
  static const MemresStream streams[]
      = { (MemresStream) CU_STREAM_PER_THREAD, MEMRES_STREAM_LEGACY, NULL };

  for (guint i = 0; i < 60; i++)
    {
      MemresStream s = streams[i % 3], t = streams[(i + 1) % 3];
      gsize size = 1 + (i * 7919) % 300000;
      MemresBuffer *buf = alloc_ok (mr, size, s);

      mt_write_pattern (buf, 0, MIN (size, 4096), i, s);
      mt_check_pattern (buf, 0, MIN (size, 4096), i, t);
      mt_close_ok (buf, t);
    }
  return NULL;
}

static void
test_special_streams (void)
{
  if (!have_device ())
    {
      g_test_skip ("no device");
      return;
    }
  for (const char *const *sp = specs (); *sp != NULL; sp++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*sp);
      GThread *threads[3];

      g_test_message ("%s", *sp);
      for (guint i = 0; i < 3; i++)
        threads[i] = g_thread_new ("streams", special_streams_thread, mr);
      for (guint i = 0; i < 3; i++)
        g_thread_join (threads[i]);
      g_assert_cmpuint (mt_stats_ok (mr).n_buffers, ==, 0);
    }
}

/* a workload's threads allocating and closing while another thread trims, reads and resets the
 * statistics, walks the tracked allocations and takes snapshots, over and over */
typedef struct
{
  MemresResource *mr;
  gint stop;
} ChurnJob;

static gpointer
churn_thread (gpointer data)
{
  ChurnJob *job = data;
  GRand *r = g_rand_new ();
  MemresBuffer *live[16] = { 0 };
  gsize written[16];

  while (!g_atomic_int_get (&job->stop))
    {
      guint i = g_rand_int_range (r, 0, 16);

      if (live[i] == NULL)
        {
          gsize size = (gsize) 1 << g_rand_int_range (r, 0, 23);

          live[i] = alloc_ok (job->mr, size + g_rand_int_range (r, 0, 100), NULL);
          written[i] = MIN (size, 512);
          mt_write_pattern (live[i], 0, written[i], i, NULL);
        }
      else
        {
          mt_check_pattern (live[i], 0, written[i], i, NULL);
          mt_close_ok (live[i], NULL);
          live[i] = NULL;
        }
    }
  for (guint i = 0; i < 16; i++)
    if (live[i] != NULL)
      mt_close_ok (live[i], NULL);
  g_rand_free (r);
  return NULL;
}

static gboolean
count_only (const MemresLiveAllocation *a, gpointer data)
{
  (*(guint *) data)++;
  return TRUE;
}

static void
test_churn_with_queries (void)
{
  static const char *const dev[] = { "track>stats>cache>arena", "track>stats>cache>dmr",
                                     "track>stats>arena", "track>stats>cache>vmm", NULL };
  static const char *const host[] = { "track>stats>cache>host", NULL };

  for (const char *const *sp = have_device () ? dev : host; *sp != NULL; sp++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (*sp);
      ChurnJob job = { mr, 0 };
      GThread *threads[3];

      g_test_message ("%s", *sp);
      for (guint i = 0; i < 3; i++)
        threads[i] = g_thread_new ("churn", churn_thread, &job);
      for (guint round = 0; round < 100; round++)
        {
          g_autoptr (GError) error = NULL;
          g_autofree char *snap = NULL;
          MemresStatsCounters c;
          guint n = 0;

          switch (round % 5)
            {
            case 0:
              g_assert_true (memres_resource_trim (mr, round % 2 ? 0 : 4 << 20, &error));
              break;
            case 1:
              MT_CHECK (memres_stats_get_counters (mr, &c, &error));
              g_assert_cmpuint (c.count_current, <=, 48);
              g_assert_cmpuint (c.count_peak, >=, c.count_current);
              MT_CHECK (memres_resource_reset_stats (memres_resource_get_upstream (mr), &error));
              break;
            case 2:
              MT_CHECK (memres_track_foreach_live (mr, count_only, &n, &error));
              g_assert_cmpuint (n, <=, 48);
              break;
            case 3:
              snap = memres_resource_snapshot (mr, &error);
              g_assert_no_error (error);
              g_assert_nonnull (snap);
              break;
            default:
              (void) mt_stats_ok (mr);
              MT_CHECK (memres_stats_reset (mr, &error));
              break;
            }
          g_assert_no_error (error);
        }
      g_atomic_int_set (&job.stop, 1);
      for (guint i = 0; i < 3; i++)
        g_thread_join (threads[i]);
      g_assert_cmpuint (mt_stats_ok (mr).n_buffers, ==, 0);
    }
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/peers/alignment-odd-sizes", test_alignment_odd_sizes);
  g_test_add_func ("/peers/huge-then-usable", test_huge_then_usable);
  g_test_add_func ("/peers/zero-and-double-close", test_zero_and_double_close);
  g_test_add_func ("/peers/close-after-resource-unref", test_close_after_resource_unref);
  g_test_add_func ("/peers/out-of-range", test_out_of_range);
  g_test_add_func ("/peers/limit-edge", test_limit_edge);
  g_test_add_func ("/peers/stats-sequence", test_stats_sequence);
  g_test_add_func ("/peers/stats-threads", test_stats_threads);
  g_test_add_func ("/peers/track-outstanding", test_track_outstanding);
  g_test_add_func ("/peers/retry-counts", test_retry_counts);
  g_test_add_func ("/peers/adaptor-missing", test_adaptor_missing);
  g_test_add_func ("/peers/bad-specs", test_bad_specs);
  g_test_add_func ("/peers/default", test_default);
  g_test_add_func ("/peers/other-stream-free", test_other_stream_free);
  g_test_add_func ("/peers/random-threads", test_random_threads);
  g_test_add_func ("/peers/stats-cross-thread", test_stats_cross_thread);
  g_test_add_func ("/peers/retry-two-handlers", test_retry_two_handlers);
  g_test_add_func ("/peers/retry-destroy", test_retry_destroy);
  g_test_add_func ("/peers/track-stop-and-threads", test_track_stop_and_threads);
  g_test_add_func ("/peers/cache-reuse-and-trim", test_cache_reuse_and_trim);
  g_test_add_func ("/peers/log-lines", test_log_lines);
  g_test_add_func ("/peers/to-string-roundtrip", test_to_string_roundtrip);
  g_test_add_func ("/peers/host-alignment", test_host_alignment);
  g_test_add_func ("/peers/wrap-release-once", test_wrap_release_once);
  g_test_add_func ("/peers/upstream-failure-counts", test_upstream_failure_counts);
  g_test_add_func ("/peers/cache-oom-then-usable", test_cache_oom_then_usable);
  g_test_add_func ("/peers/deallocation-stream", test_deallocation_stream);
  g_test_add_func ("/peers/fill-widths", test_fill_widths);
  g_test_add_func ("/peers/copy-between-kinds", test_copy_between_kinds);
  g_test_add_func ("/peers/held-by-other-thread", test_held_by_other_thread);
  g_test_add_func ("/peers/closed-buffer-calls", test_closed_buffer_calls);
  g_test_add_func ("/peers/stats-classes-reset", test_stats_classes_reset);
  g_test_add_func ("/peers/stats-resize", test_stats_resize);
  g_test_add_func ("/peers/fuzz-stacks", test_fuzz_stacks);
  g_test_add_func ("/peers/resize-keeps-bytes", test_resize_keeps_bytes);
  g_test_add_func ("/peers/hazards-more", test_hazards_more);
  g_test_add_func ("/peers/special-streams", test_special_streams);
  g_test_add_func ("/peers/churn-with-queries", test_churn_with_queries);
  return g_test_run ();
}

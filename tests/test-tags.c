/* test-tags.c: tags (memres-tags.h, docs/tags.md): the scope stack and its guard, a buffer's
 * tag, the defaults of devices and streams and which wins, the counts per tag of a counted layer
 * (exact under 16 threads; through pass-through adaptors; not for a cache's chunks), each tag's
 * peak reset alone, the limit of distinct tags, the tag a kind's slot sees
 * (memres_allocation_get_tag(), MEMRES_KIND_TAGGED) and on an adaptor's memory of its own for a
 * tag (memres_upstream_allocate_for_tag()), and every error with its domain and code. Host
 * resources: no driver needed. */
#include "testutil.h"

#include <string.h>

static void
assert_tag_counts (MemresResource *mr, const char *tag, guint64 bytes_current, guint64 bytes_peak,
                   guint64 bytes_total, guint64 count_current, guint64 count_peak,
                   guint64 count_total)
{
  g_autoptr (GError) error = NULL;
  MemresTagCounts c;

  g_assert_true (memres_resource_get_tag_counts (mr, tag, &c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.bytes_current, ==, bytes_current);
  g_assert_cmpuint (c.bytes_peak, ==, bytes_peak);
  g_assert_cmpuint (c.bytes_total, ==, bytes_total);
  g_assert_cmpuint (c.count_current, ==, count_current);
  g_assert_cmpuint (c.count_peak, ==, count_peak);
  g_assert_cmpuint (c.count_total, ==, count_total);
}

static MemresBuffer *
alloc_ok (MemresResource *mr, gsize size, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, stream, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  return buf;
}

static void
close_ok (MemresBuffer *buf)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  memres_buffer_unref (buf);
}

static void
test_scope_stack (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("host", &error);
  MemresBuffer *a, *b, *c, *d;

  g_assert_no_error (error);
  g_assert_null (memres_tag_get_current ());
  a = alloc_ok (mr, 64, NULL);
  g_assert_null (memres_buffer_get_tag (a));

  g_assert_true (memres_tag_push ("weights", &error));
  g_assert_cmpstr (memres_tag_get_current (), ==, "weights");
  b = alloc_ok (mr, 64, NULL);
  g_assert_true (memres_tag_push ("weights/kv", &error));
  c = alloc_ok (mr, 64, NULL);
  g_assert_true (memres_tag_pop ("weights/kv", &error));
  d = alloc_ok (mr, 64, NULL);
  g_assert_true (memres_tag_pop (NULL, &error));
  g_assert_no_error (error);
  g_assert_null (memres_tag_get_current ());

  g_assert_cmpstr (memres_buffer_get_tag (b), ==, "weights");
  /* the innermost tag, by exact name: no nesting by name */
  g_assert_cmpstr (memres_buffer_get_tag (c), ==, "weights/kv");
  g_assert_cmpstr (memres_buffer_get_tag (d), ==, "weights");
  /* interned: one string per name */
  g_assert_true (memres_buffer_get_tag (b) == memres_buffer_get_tag (d));
  /* size 0 (the slow path) carries the tag too */
  g_assert_true (memres_tag_push ("empty", &error));
  {
    MemresBuffer *e = alloc_ok (mr, 0, NULL);

    g_assert_cmpstr (memres_buffer_get_tag (e), ==, "empty");
    close_ok (e);
  }
  g_assert_true (memres_tag_pop ("empty", &error));

  close_ok (a);
  close_ok (b);
  g_assert_true (memres_buffer_close (c, NULL, &error));
  g_assert_null (memres_buffer_get_tag (c)); /* closed */
  memres_buffer_unref (c);
  close_ok (d);
}

static void
test_scope_guard (void)
{
  g_autoptr (GError) error = NULL;

  {
    g_autoptr (MemresTagScope) outer = memres_tag_scope_begin ("guard-outer", &error);

    g_assert_no_error (error);
    g_assert_nonnull (outer);
    {
      g_autoptr (MemresTagScope) inner = memres_tag_scope_begin ("guard-inner", &error);

      g_assert_cmpstr (memres_tag_get_current (), ==, "guard-inner");
    }
    g_assert_cmpstr (memres_tag_get_current (), ==, "guard-outer");
    {
      /* a failed begin returns NULL, which ends nothing */
      g_autoptr (MemresTagScope) bad = memres_tag_scope_begin ("", &error);

      g_assert_null (bad);
      g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
      g_clear_error (&error);
    }
    g_assert_cmpstr (memres_tag_get_current (), ==, "guard-outer");
  }
  g_assert_null (memres_tag_get_current ());
}

static void
test_scope_guard_out_of_order (void)
{
  if (g_test_subprocess ())
    {
      MemresTagScope *a = memres_tag_scope_begin ("order-a", NULL);
      MemresTagScope *b = memres_tag_scope_begin ("order-b", NULL);

      memres_tag_scope_end (a); /* not the innermost: reported, nothing popped */
      g_assert_cmpstr (memres_tag_get_current (), ==, "order-b");
      memres_tag_scope_end (b);
      memres_tag_scope_end (a);
      g_assert_null (memres_tag_get_current ());
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed ();
  g_test_trap_assert_stderr ("*memres_tag_scope_end*cannot pop tag \"order-a\"*innermost tag is "
                             "\"order-b\"*");
}

static void
test_errors (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) host = memres_resource_new ("host", &error);
  g_autoptr (MemresResource) stats = memres_resource_new ("stats>host", &error);
  char long_name[MEMRES_TAG_NAME_MAX + 2];
  MemresTagCounts c;

  g_assert_no_error (error);
  /* empty, NULL, too long, not UTF-8, a control character */
  g_assert_false (memres_tag_push ("", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (memres_tag_push (NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  memset (long_name, 'x', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  g_assert_false (memres_tag_push (long_name, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  long_name[MEMRES_TAG_NAME_MAX] = '\0'; /* the longest allowed */
  g_assert_true (memres_tag_push (long_name, &error));
  g_assert_true (memres_tag_pop (long_name, &error));
  g_assert_no_error (error);
  g_assert_false (memres_tag_push ("bad\xff", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (memres_tag_push ("a\nb", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (memres_tag_check_name ("\xc3", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_null (memres_tag_get_current ());

  /* pop on an empty stack, a mismatched pop (the stack unchanged) */
  g_assert_false (memres_tag_pop (NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_EMPTY);
  g_clear_error (&error);
  g_assert_false (memres_tag_pop ("errors", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_EMPTY);
  g_clear_error (&error);
  g_assert_true (memres_tag_push ("errors", &error));
  g_assert_false (memres_tag_pop ("other", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_MISMATCH);
  g_clear_error (&error);
  g_assert_false (memres_tag_pop ("", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_cmpstr (memres_tag_get_current (), ==, "errors");

  /* too deep: the stack is left as it was */
  for (guint i = 1; i < MEMRES_TAG_DEPTH_MAX; i++)
    g_assert_true (memres_tag_push ("errors", &error));
  g_assert_false (memres_tag_push ("errors", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_TOO_DEEP);
  g_clear_error (&error);
  for (guint i = 0; i < MEMRES_TAG_DEPTH_MAX; i++)
    g_assert_true (memres_tag_pop ("errors", &error));
  g_assert_null (memres_tag_get_current ());

  /* counts: a layer that does not count, a name never used, an invalid name */
  g_assert_false (memres_resource_get_tag_counts (host, "errors", &c, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_null (memres_resource_list_tags (host, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_resource_reset_tag_peak (host, "errors", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_resource_get_tag_counts (stats, "never-used", &c, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_false (memres_resource_reset_tag_peak (stats, "never-used", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_false (memres_resource_get_tag_counts (stats, "", &c, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  /* a tag that exists but never went through this layer reads as zeros */
  assert_tag_counts (stats, "errors", 0, 0, 0, 0, 0, 0);

  /* defaults: a device out of range, an invalid tag */
  g_assert_false (memres_tag_set_device_default (-2, "x", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_tag_set_device_default (64, "x", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_false (memres_tag_set_device_default (0, "", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (memres_tag_set_stream_default (NULL, "bad\xff", &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
}

/* Counts of a `stats` layer at the top, through a pass-through adaptor, and below a cache. */
static void
test_counts (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("stats>host", &error);
  g_autoptr (MemresResource) limited = memres_resource_new ("limit:max=1MiB>stats>host", &error);
  g_autoptr (MemresResource) cached = memres_resource_new ("cache>stats>host", &error);
  MemresResource *inner, *cache_stats;
  MemresStatsCounters all;
  MemresBuffer *a, *b, *c, *d;
  GStrv tags;

  g_assert_no_error (error);
  g_assert_true (memres_tag_push ("count-a", &error));
  a = alloc_ok (mr, 1000, NULL);
  b = alloc_ok (mr, 24, NULL);
  g_assert_true (memres_tag_push ("count-b", &error));
  c = alloc_ok (mr, 4096, NULL);
  g_assert_true (memres_tag_pop ("count-b", &error));
  g_assert_true (memres_tag_pop ("count-a", &error));
  d = alloc_ok (mr, 7, NULL); /* untagged */

  assert_tag_counts (mr, "count-a", 1024, 1024, 1024, 2, 2, 2);
  assert_tag_counts (mr, "count-b", 4096, 4096, 4096, 1, 1, 1);
  g_assert_true (memres_resource_get_counts (mr, &all, &error));
  g_assert_cmpuint (all.bytes_current, ==, 1024 + 4096 + 7);
  g_assert_cmpuint (all.count_current, ==, 4);

  tags = memres_resource_list_tags (mr, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (g_strv_length (tags), ==, 2);
  g_assert_true (g_strv_contains ((const char *const *) tags, "count-a"));
  g_assert_true (g_strv_contains ((const char *const *) tags, "count-b"));
  g_strfreev (tags);

  /* a close counts down the buffer's tag, whatever the closing thread's scope */
  g_assert_true (memres_tag_push ("count-b", &error));
  close_ok (a);
  g_assert_true (memres_tag_pop ("count-b", &error));
  assert_tag_counts (mr, "count-a", 24, 1024, 1024, 1, 2, 2);
  assert_tag_counts (mr, "count-b", 4096, 4096, 4096, 1, 1, 1);
  close_ok (b);
  close_ok (c);
  close_ok (d);
  assert_tag_counts (mr, "count-a", 0, 1024, 1024, 0, 2, 2);
  assert_tag_counts (mr, "count-b", 0, 4096, 4096, 0, 1, 1);

  /* reset_counts resets every tag's peaks and totals too */
  g_assert_true (memres_resource_reset_counts (mr, &error));
  assert_tag_counts (mr, "count-a", 0, 0, 0, 0, 0, 0);
  tags = memres_resource_list_tags (mr, &error);
  g_assert_cmpuint (g_strv_length (tags), ==, 0);
  g_strfreev (tags);

  /* through a pass-through adaptor: the stats layer below counts the buffer's tag */
  inner = memres_resource_find_layer (limited, "stats", &error);
  g_assert_nonnull (inner);
  g_assert_true (memres_tag_push ("count-a", &error));
  a = alloc_ok (limited, 100, NULL);
  g_assert_true (memres_tag_pop ("count-a", &error));
  assert_tag_counts (inner, "count-a", 100, 100, 100, 1, 1, 1);
  close_ok (a);
  assert_tag_counts (inner, "count-a", 0, 100, 100, 0, 1, 1);

  /* below a cache: the stats layer sees the cache's chunks, of no tag */
  cache_stats = memres_resource_find_layer (cached, "stats", &error);
  g_assert_nonnull (cache_stats);
  g_assert_true (memres_tag_push ("count-a", &error));
  a = alloc_ok (cached, 100, NULL);
  g_assert_true (memres_tag_pop ("count-a", &error));
  g_assert_cmpstr (memres_buffer_get_tag (a), ==, "count-a");
  g_assert_true (memres_resource_get_counts (cache_stats, &all, &error));
  g_assert_cmpuint (all.count_current, >=, 1);
  assert_tag_counts (cache_stats, "count-a", 0, 0, 0, 0, 0, 0);
  close_ok (a);
}

/* Each tag's peak is reset alone: the other tags' peaks and the totals stay. */
static void
test_peak_reset (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("stats>host", &error);
  MemresBuffer *a1, *a2, *b1;
  MemresStatsCounters all;

  g_assert_no_error (error);
  g_assert_true (memres_tag_push ("phase-a", &error));
  a1 = alloc_ok (mr, 1024, NULL);
  a2 = alloc_ok (mr, 2048, NULL);
  g_assert_true (memres_tag_pop ("phase-a", &error));
  g_assert_true (memres_tag_push ("phase-b", &error));
  b1 = alloc_ok (mr, 512, NULL);
  g_assert_true (memres_tag_pop ("phase-b", &error));
  close_ok (a2);
  memres_buffer_close (b1, NULL, &error);
  memres_buffer_unref (b1);

  assert_tag_counts (mr, "phase-a", 1024, 3072, 3072, 1, 2, 2);
  assert_tag_counts (mr, "phase-b", 0, 512, 512, 0, 1, 1);
  g_assert_true (memres_resource_reset_tag_peak (mr, "phase-a", &error));
  g_assert_no_error (error);
  assert_tag_counts (mr, "phase-a", 1024, 1024, 3072, 1, 1, 2);
  assert_tag_counts (mr, "phase-b", 0, 512, 512, 0, 1, 1); /* untouched */
  g_assert_true (memres_resource_get_counts (mr, &all, &error));
  g_assert_cmpuint (all.bytes_peak, ==, 3072 + 512); /* the layer's own peak untouched */

  /* a new peak after the reset is the phase's own */
  g_assert_true (memres_tag_push ("phase-a", &error));
  a2 = alloc_ok (mr, 256, NULL);
  g_assert_true (memres_tag_pop ("phase-a", &error));
  assert_tag_counts (mr, "phase-a", 1280, 1280, 3328, 2, 2, 3);
  g_assert_true (memres_resource_reset_tag_peak (mr, "phase-b", &error));
  assert_tag_counts (mr, "phase-b", 0, 0, 512, 0, 0, 1);
  assert_tag_counts (mr, "phase-a", 1280, 1280, 3328, 2, 2, 3);
  close_ok (a1);
  close_ok (a2);
}

/* Which setting wins: the thread's scope, then the stream's default, then the device's. */
static void
test_defaults (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("stats>host", &error);
  MemresStream s1 = (MemresStream) (guintptr) 0x1000, s2 = (MemresStream) (guintptr) 0x2000;
  MemresBuffer *b[6];

  g_assert_no_error (error);
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
  g_assert_true (memres_tag_set_device_default (-1, "dev-host", &error));
  g_assert_true (memres_tag_set_stream_default (s1, "stream-1", &error));
  g_assert_true (memres_tag_set_stream_default (NULL, "stream-legacy", &error));
  g_assert_no_error (error);

  b[0] = alloc_ok (mr, 16, s1);   /* stream over device */
  b[1] = alloc_ok (mr, 16, s2);   /* no stream default: the device's */
  b[2] = alloc_ok (mr, 16, NULL); /* the legacy stream's */
  g_assert_true (memres_tag_push ("scope", &error));
  b[3] = alloc_ok (mr, 16, s1); /* the scope over both */
  g_assert_true (memres_tag_pop ("scope", &error));
  g_assert_cmpstr (memres_buffer_get_tag (b[0]), ==, "stream-1");
  g_assert_cmpstr (memres_buffer_get_tag (b[1]), ==, "dev-host");
  g_assert_cmpstr (memres_buffer_get_tag (b[2]), ==, "stream-legacy");
  g_assert_cmpstr (memres_buffer_get_tag (b[3]), ==, "scope");
  assert_tag_counts (mr, "stream-1", 16, 16, 16, 1, 1, 1);
  assert_tag_counts (mr, "dev-host", 16, 16, 16, 1, 1, 1);

  /* cleared: back to the device's, then to none */
  g_assert_true (memres_tag_set_stream_default (s1, NULL, &error));
  g_assert_true (memres_tag_set_stream_default (NULL, NULL, &error));
  b[4] = alloc_ok (mr, 16, s1);
  g_assert_cmpstr (memres_buffer_get_tag (b[4]), ==, "dev-host");
  g_assert_true (memres_tag_set_device_default (-1, NULL, &error));
  b[5] = alloc_ok (mr, 16, s1);
  g_assert_null (memres_buffer_get_tag (b[5]));
  g_assert_no_error (error);
  /* clearing what is not set does nothing */
  g_assert_true (memres_tag_set_stream_default (s2, NULL, &error));
  g_assert_true (memres_tag_set_device_default (3, NULL, &error));
  for (guint i = 0; i < G_N_ELEMENTS (b); i++)
    close_ok (b[i]);
  assert_tag_counts (mr, "stream-1", 0, 16, 16, 0, 1, 1);
  assert_tag_counts (mr, "dev-host", 0, 32, 32, 0, 2, 2);
}

/* A default set on one thread tags the allocations of another (a framework's worker). */
static gpointer
default_worker (gpointer data)
{
  MemresResource *mr = data;
  MemresBuffer *buf = alloc_ok (mr, 32, (MemresStream) (guintptr) 0x3000);
  char *tag = g_strdup (memres_buffer_get_tag (buf));

  close_ok (buf);
  return tag;
}

static void
test_defaults_worker_thread (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("stats>host", &error);
  GThread *thread;
  g_autofree char *tag = NULL;

  g_assert_true (
      memres_tag_set_stream_default ((MemresStream) (guintptr) 0x3000, "backward", &error));
  /* the scope of this thread does not reach the worker */
  g_assert_true (memres_tag_push ("forward", &error));
  thread = g_thread_new ("backward", default_worker, mr);
  tag = g_thread_join (thread);
  g_assert_true (memres_tag_pop ("forward", &error));
  g_assert_cmpstr (tag, ==, "backward");
  assert_tag_counts (mr, "backward", 0, 32, 32, 0, 1, 1);
  g_assert_true (memres_tag_set_stream_default ((MemresStream) (guintptr) 0x3000, NULL, &error));
}

/* 16 threads, each allocating and closing under a tag of its own and a shared one: the counts of
 * every tag come out exact (the 16 threads fit the stripes of their own; more threads than
 * stripes share one with locked adds, which test-threads covers for the layer's counts). */
#define N_THREADS 16
#define N_ROUNDS  2000
static gint start_flag;

static MemresResource *count_mr;

static gpointer
count_worker (gpointer data)
{
  MemresResource *mr = count_mr;
  g_autoptr (GError) error = NULL;
  g_autofree char *own = g_strdup_printf ("thread-%u", GPOINTER_TO_UINT (data));
  MemresBuffer *keep[4];

  while (!g_atomic_int_get (&start_flag))
    g_thread_yield ();
  for (guint r = 0; r < N_ROUNDS; r++)
    {
      MemresBuffer *a, *b;

      g_assert_true (memres_tag_push ("shared", &error));
      a = alloc_ok (mr, 100, NULL);
      g_assert_true (memres_tag_push (own, &error));
      b = alloc_ok (mr, 10, NULL);
      g_assert_true (memres_tag_pop (own, &error));
      g_assert_true (memres_tag_pop ("shared", &error));
      close_ok (b);
      close_ok (a);
    }
  /* 4 left open under "shared" */
  g_assert_true (memres_tag_push ("shared", &error));
  for (guint i = 0; i < 4; i++)
    keep[i] = alloc_ok (mr, 1000, NULL);
  g_assert_true (memres_tag_pop ("shared", &error));
  return g_memdup2 (keep, sizeof keep);
}

static void
test_threads (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("stats>host", &error);
  GThread *threads[N_THREADS];
  MemresBuffer **kept[N_THREADS];

  g_assert_no_error (error);
  MemresTagCounts c;
  MemresStatsCounters all;

  g_assert_no_error (error);
  count_mr = mr;
  for (guint i = 0; i < N_THREADS; i++)
    threads[i] = g_thread_new ("tags", count_worker, GUINT_TO_POINTER (i));
  g_atomic_int_set (&start_flag, 1);
  for (guint i = 0; i < N_THREADS; i++)
    kept[i] = g_thread_join (threads[i]);

  /* current and totals exact; the peak at least the current (exact when threads take turns:
   * here they ran at once, so within a few allocations, and no higher than it could have been) */
  g_assert_true (memres_resource_get_tag_counts (mr, "shared", &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, N_THREADS * 4 * 1000);
  g_assert_cmpuint (c.count_current, ==, N_THREADS * 4);
  g_assert_cmpuint (c.bytes_total, ==, (guint64) N_THREADS * (N_ROUNDS * 100 + 4000));
  g_assert_cmpuint (c.count_total, ==, (guint64) N_THREADS * (N_ROUNDS + 4));
  g_assert_cmpuint (c.bytes_peak, >=, c.bytes_current);
  g_assert_cmpuint (c.bytes_peak, <=, c.bytes_current + N_THREADS * 100);
  g_assert_cmpuint (c.count_peak, >=, c.count_current);
  g_assert_cmpuint (c.count_peak, <=, c.count_current + N_THREADS);
  for (guint i = 0; i < N_THREADS; i++)
    {
      g_autofree char *own = g_strdup_printf ("thread-%u", i);

      assert_tag_counts (mr, own, 0, 10, (guint64) N_ROUNDS * 10, 0, 1, N_ROUNDS);
    }
  for (guint i = 0; i < N_THREADS; i++)
    {
      for (guint k = 0; k < 4; k++)
        close_ok (kept[i][k]);
      g_free (kept[i]);
    }
  g_assert_true (memres_resource_get_tag_counts (mr, "shared", &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.count_current, ==, 0);
  /* the layer's own counts agree: every allocation was tagged */
  g_assert_true (memres_resource_get_counts (mr, &all, &error));
  g_assert_cmpuint (all.count_total, ==, (guint64) N_THREADS * (2 * N_ROUNDS + 4));
  g_assert_cmpuint (all.bytes_current, ==, 0);
}

/* The limit of distinct tags: the one after MEMRES_TAGS_MAX is refused with TOO_MANY, nothing is
 * counted under it, and every existing tag still works (in a subprocess: tags live as long as the
 * process). */
static void
test_too_many (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = memres_resource_new ("stats>host", &error);
      g_auto (GStrv) all = NULL;
      MemresStatsCounters c;
      MemresBuffer *buf;
      guint i;

      for (i = 1; i <= MEMRES_TAGS_MAX; i++)
        {
          g_autofree char *name = g_strdup_printf ("t%u", i);

          g_assert_true (memres_tag_push (name, &error));
          g_assert_no_error (error);
          buf = alloc_ok (mr, i, NULL);
          g_assert_true (memres_tag_pop (name, &error));
          close_ok (buf);
        }
      g_assert_true (memres_tag_push ("t1", &error)); /* existing names still work */
      g_assert_false (memres_tag_push ("one-too-many", &error));
      g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_TOO_MANY);
      g_clear_error (&error);
      g_assert_false (memres_tag_set_stream_default (NULL, "one-too-many", &error));
      g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_TOO_MANY);
      g_clear_error (&error);
      g_assert_cmpstr (memres_tag_get_current (), ==, "t1");
      buf = alloc_ok (mr, 5, NULL);
      g_assert_cmpstr (memres_buffer_get_tag (buf), ==, "t1");
      close_ok (buf);
      g_assert_true (memres_tag_pop ("t1", &error));
      all = memres_tag_list ();
      g_assert_cmpuint (g_strv_length (all), ==, MEMRES_TAGS_MAX);
      g_assert_cmpstr (all[MEMRES_TAGS_MAX - 1], ==, "t63");
      assert_tag_counts (mr, "t63", 0, 63, 63, 0, 1, 1);
      assert_tag_counts (mr, "t1", 0, 5, 6, 0, 1, 2);
      g_assert_true (memres_resource_get_counts (mr, &c, &error));
      g_assert_cmpuint (c.count_total, ==, MEMRES_TAGS_MAX + 1);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

/* A kind's slots see the tag of the buffer they serve (memres_allocation_get_tag()) when the
 * kind has MEMRES_KIND_TAGGED, or sits above a layer that asks for tags; never else, nor outside
 * a slot call; and an allocate slot finds the record of such a buffer marked
 * (MEMRES_ALLOCATION_TAGGED in its size), through memres_upstream_allocate() too, every other
 * record with size 0. Two pass-through adaptors record what they saw: "tagrec" with the flag,
 * "tagnone" without. */
static const char *seen[8]; /* what each slot call saw, in order */
static gsize entry_size[8]; /* each allocate call's record size on entry (deallocate: G_MAXSIZE) */
static guint n_seen;

static gboolean
rec_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
rec_finalize (MemresResource *mr)
{
}

static gboolean
rec_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
              GError **error)
{
  g_assert_cmpuint (n_seen, <, G_N_ELEMENTS (seen));
  entry_size[n_seen] = alloc->size;
  seen[n_seen++] = memres_allocation_get_tag (alloc);
  return memres_upstream_allocate (mr, size, stream, alloc, error);
}

static gboolean
rec_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  g_assert_cmpuint (n_seen, <, G_N_ELEMENTS (seen));
  entry_size[n_seen] = G_MAXSIZE;
  seen[n_seen++] = memres_allocation_get_tag (alloc);
  return memres_upstream_deallocate (mr, alloc, stream, error);
}

static const MemresResourceOps rec_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = rec_init,
  .finalize = rec_finalize,
  .allocate = rec_allocate,
  .deallocate = rec_deallocate,
};

static void
register_recorders (void)
{
  static gsize done;

  if (g_once_init_enter (&done))
    {
      MemresKindInfo info = {
        .struct_size = sizeof (MemresKindInfo),
        .name = "tagrec",
        .description = "test: records the tags its slots see",
        .ops = &rec_ops,
        .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS | MEMRES_KIND_TAGGED,
      };
      g_autoptr (GError) error = NULL;

      g_assert_true (memres_registry_register_kind (&info, &error));
      info.name = "tagnone";
      info.flags &= ~MEMRES_KIND_TAGGED;
      g_assert_true (memres_registry_register_kind (&info, &error));
      g_assert_no_error (error);
      g_once_init_leave (&done, 1);
    }
}

/* One buffer under @scope (NULL: none) through @spec: every recorder's allocate and deallocate
 * (@n_calls in all) saw @want, and each allocate (the first half) a record marked exactly when
 * @want is a tag. */
static void
assert_seen (const char *spec, const char *scope, guint n_calls, const char *want)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new (spec, &error);
  MemresBuffer *buf;

  g_assert_no_error (error);
  if (scope != NULL)
    g_assert_true (memres_tag_push (scope, &error));
  n_seen = 0;
  buf = alloc_ok (mr, 64, NULL);
  if (scope != NULL)
    g_assert_true (memres_tag_pop (scope, &error));
  /* outside the slot call, the buffer's own record is no call's */
  g_assert_null (memres_allocation_get_tag (memres_buffer_get_allocation (buf)));
  close_ok (buf);
  g_assert_cmpuint (n_seen, ==, n_calls);
  for (guint i = 0; i < n_seen; i++)
    g_assert_cmpstr (seen[i], ==, want);
  for (guint i = 0; i < n_seen; i++)
    g_assert_cmpuint (entry_size[i], ==,
                      i >= n_calls / 2 ? G_MAXSIZE
                      : want != NULL   ? MEMRES_ALLOCATION_TAGGED
                                       : 0);
}

static void
test_allocation_tag (void)
{
  register_recorders ();
  g_assert_null (memres_allocation_get_tag (NULL));
  assert_seen ("tagrec>host", "weights", 2, "weights");
  assert_seen ("tagrec>host", NULL, 2, NULL);
  assert_seen ("tagnone>host", "weights", 2, NULL);            /* nobody asks */
  assert_seen ("tagnone>stats>host", "weights", 2, "weights"); /* above a counted layer */
  assert_seen ("tagnone>tagrec>host", "w2", 4, "w2");          /* above a tagged one */
  /* a stream's default is the buffer's tag too */
  {
    g_autoptr (GError) error = NULL;

    g_assert_true (memres_tag_set_stream_default (NULL, "legacy-default", &error));
    assert_seen ("tagrec>host", NULL, 2, "legacy-default");
    g_assert_true (memres_tag_set_stream_default (NULL, NULL, &error));
    g_assert_no_error (error);
  }
}

/* An adaptor's memory of its own for one tag (memres_upstream_allocate_for_tag(), as `cache`'s
 * chunks in a stack that can sleep): the upstream's slots see the tag on that record, the
 * allocate's record marked, through the layers below that it is passed on to (tagnone's upstream
 * "tagrec" calls memres_upstream_allocate() on it), and only during the call; the deallocate
 * (memres_upstream_deallocate_for_tag()) sees it too. No tag: the plain calls. A counted layer
 * below does not count the memory under the tag (its buffers are counted under theirs). A name
 * that is no tag, or a tag never used, is refused with its code before any slot is called, the
 * record untouched. */
static void
test_upstream_for_tag (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) counted = NULL;
  MemresAllocation alloc, before;

  register_recorders ();
  g_assert_true (memres_tag_push ("own-chunk", &error));
  g_assert_true (memres_tag_pop ("own-chunk", &error));
  mr = memres_resource_new ("tagnone>tagrec>host", &error);
  g_assert_no_error (error);

  n_seen = 0;
  g_assert_true (memres_upstream_allocate_for_tag (mr, 256, NULL, "own-chunk", &alloc, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_seen, ==, 1);
  g_assert_cmpstr (seen[0], ==, "own-chunk");
  g_assert_cmpuint (entry_size[0], ==, MEMRES_ALLOCATION_TAGGED);
  g_assert_cmpuint (alloc.size, ==, 256);
  g_assert_null (memres_allocation_get_tag (&alloc)); /* the call is over */
  g_assert_true (memres_upstream_deallocate_for_tag (mr, &alloc, "own-chunk", NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_seen, ==, 2);
  g_assert_cmpstr (seen[1], ==, "own-chunk");
  g_assert_cmpuint (alloc.address, ==, 0); /* zeroed: gone */

  /* no tag: memres_upstream_allocate() and memres_upstream_deallocate() */
  g_assert_true (memres_upstream_allocate_for_tag (mr, 256, NULL, NULL, &alloc, &error));
  g_assert_true (memres_upstream_deallocate_for_tag (mr, &alloc, NULL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (n_seen, ==, 4);
  g_assert_null (seen[2]);
  g_assert_cmpuint (entry_size[2], ==, 0);
  g_assert_null (seen[3]);

  /* refused before any slot: not a name, never used; the record as it was */
  g_assert_true (memres_upstream_allocate (mr, 256, NULL, &alloc, &error));
  before = alloc;
  n_seen = 0;
  g_assert_false (memres_upstream_allocate_for_tag (mr, 256, NULL, "", &alloc, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (
      memres_upstream_allocate_for_tag (mr, 256, NULL, "own-never-used", &alloc, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_false (memres_upstream_deallocate_for_tag (mr, &alloc, "", NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID);
  g_clear_error (&error);
  g_assert_false (memres_upstream_deallocate_for_tag (mr, &alloc, "own-never-used", NULL, &error));
  g_assert_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_cmpuint (n_seen, ==, 0);
  g_assert_cmpmem (&alloc, sizeof alloc, &before, sizeof before);
  g_assert_true (memres_upstream_deallocate (mr, &alloc, NULL, &error));
  g_assert_no_error (error);

  /* a counted layer below counts the memory, under no tag */
  counted = memres_resource_new ("tagnone>stats>host", &error);
  g_assert_no_error (error);
  g_assert_true (
      memres_upstream_allocate_for_tag (counted, 4096, NULL, "own-chunk", &alloc, &error));
  g_assert_no_error (error);
  assert_tag_counts (memres_resource_get_upstream (counted), "own-chunk", 0, 0, 0, 0, 0, 0);
  g_assert_cmpuint (mt_stats_ok (memres_resource_get_upstream (counted)).used_current, ==, 4096);
  g_assert_true (memres_upstream_deallocate_for_tag (counted, &alloc, "own-chunk", NULL, &error));
  g_assert_no_error (error);
  assert_tag_counts (memres_resource_get_upstream (counted), "own-chunk", 0, 0, 0, 0, 0, 0);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/tags/scope-stack", test_scope_stack);
  g_test_add_func ("/tags/scope-guard", test_scope_guard);
  g_test_add_func ("/tags/scope-guard-out-of-order", test_scope_guard_out_of_order);
  g_test_add_func ("/tags/errors", test_errors);
  g_test_add_func ("/tags/counts", test_counts);
  g_test_add_func ("/tags/peak-reset", test_peak_reset);
  g_test_add_func ("/tags/defaults", test_defaults);
  g_test_add_func ("/tags/defaults-worker-thread", test_defaults_worker_thread);
  g_test_add_func ("/tags/threads", test_threads);
  g_test_add_func ("/tags/too-many", test_too_many);
  g_test_add_func ("/tags/allocation-tag", test_allocation_tag);
  g_test_add_func ("/tags/upstream-for-tag", test_upstream_for_tag);
  return g_test_run ();
}

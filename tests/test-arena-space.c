/* test-arena-space.c: the `arena` kind when memory or address space runs short, against the fake
 * driver (a small device, suite fake) and the real one (suite gpu): the out-of-memory report
 * (explain_oom: the free bytes stranded in granules partly in use, the verdict and the remedy),
 * the out-of-memory flush and retry, and more address space reserved when the first runs out. */
#include "testutil.h"

#include "arena-check.h"

#include <string.h>

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

/* Fragmentation: the device filled with granules that each hold a large buffer x and, at its
 * end, a small-ish one y; every x freed. The free bytes (all but y's) are plenty, yet each
 * granule stays mapped for its y, so a request of two granules fails: the report says
 * fragmentation, with the arena's free bytes, the largest request they could serve (one x's
 * range), the granules partly in use, and the remedy. */
static void
test_oom_fragmentation (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *report = NULL, *expect = NULL;
  MemresBuffer *x[512], *y[512], *big;
  size_t free_bytes = 0, total = 0;
  gboolean pushed;
  guint n = 0;
  gsize g, ysize = 128 * KiB;

  if (!mt_require_devices (1) || !mt_require_fake ("needs the fake's small device"))
    return;
  mr = mt_new_ok ("arena");
  g = (gsize) counter (mr, "granularity");
  MT_CHECK (memres_cuda_push_context (0, &pushed, &error));
  g_assert_cmpint (memres_cuda_get_driver (NULL)->cuMemGetInfo (&free_bytes, &total), ==,
                   CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  g_assert_cmpuint (free_bytes / g, <=, G_N_ELEMENTS (x));
  for (n = 0; n < free_bytes / g; n++)
    {
      x[n] = mt_alloc_ok (mr, g - ysize, NULL);
      y[n] = mt_alloc_ok (mr, ysize, NULL);
      g_assert_cmpuint (memres_buffer_get_address (y[n]), ==,
                        memres_buffer_get_address (x[n]) + g - ysize);
      g_assert_cmpuint (memres_buffer_get_address (x[n]) % g, ==, 0);
    }
  g_assert_cmpuint (counter (mr, "physical"), ==, (guint64) n * g);
  for (guint i = 0; i < n; i++)
    mt_close_ok (x[i], NULL);

  big = memres_resource_allocate (mr, 2 * g, NULL, &error);
  g_assert_null (big);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_test_message ("%s", error->message);
  g_assert_cmpuint (counter (mr, "oom_flushes"), ==, 1);
  report = memres_resource_get_oom_report (mr);
  g_assert_nonnull (report);
  g_test_message ("report: %s", report);
  expect = g_strdup_printf ("%u granules of %" G_GSIZE_FORMAT " bytes mapped, 0 idle, %u partly "
                            "in use",
                            n, g, n);
  g_assert_nonnull (strstr (report, expect));
  g_assert_nonnull (strstr (report, "fragmentation"));
  g_assert_nonnull (strstr (error->message, "fragmentation"));
  g_clear_pointer (&expect, g_free);
  if (g == 2 * MiB && n == 32)
    {
      /* the largest: one x's range, g - ysize bytes */
      g_assert_nonnull (strstr (report, "fragmentation: 60 MiB free in `arena`, largest block "
                                        "1.9 MiB, request 4 MiB"));
      g_assert_nonnull (strstr (report, "`arena` holds 64 MiB (4 MiB used, 60 MiB cached"));
    }
  expect = g_strdup_printf ("the free bytes of `arena` lie in %u granules that also hold live "
                            "buffers",
                            n);
  g_assert_nonnull (strstr (report, expect));
  for (guint i = 0; i < n; i++)
    mt_close_ok (y[i], NULL);
  /* once the small ones are gone, the same request is served by the granules held */
  big = mt_alloc_ok (mr, 2 * g, (MemresStream) CU_STREAM_PER_THREAD);
  g_assert_cmpuint (counter (mr, "granules_created"), ==, n);
  mt_close_ok (big, (MemresStream) CU_STREAM_PER_THREAD);
}

/* Blocks held in a thread's front and slabs of idle blocks go back to the range when an
 * allocation would otherwise fail: the retry then uses their granules. */
/* The address space runs out: the reservation is nearly full and the driver refuses another
 * (every cuMemAddressReserve fails with CUDA_ERROR_OUT_OF_MEMORY). The verdict is the arena's
 * own, "address space", not the device's memory ("exhausted"), with its remedy; the message
 * names the request once. */
static void
test_oom_address_space (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *expect = NULL;
  MemresBuffer *a, *b;
  const char *at;
  guint times = 0;
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("needs the fake's fault injection"))
    return;
  mr = mt_new_ok ("arena:reserve=8MiB");
  g = (gsize) counter (mr, "granularity");
  g_assert_cmpuint (counter (mr, "virtual"), ==, 8 * MiB);
  a = mt_alloc_ok (mr, 8 * MiB - g, NULL);
  for (int i = 1; i <= 8; i++)
    mt_fake_fail_call ("cuMemAddressReserve", i, CUDA_ERROR_OUT_OF_MEMORY);
  b = memres_resource_allocate (mr, 2 * g, NULL, &error);
  mt_fake_reset_faults ();
  g_assert_null (b);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_test_message ("%s", error->message);
  expect = g_strdup_printf ("Out of memory, address space: `arena` has 8388608 bytes of address "
                            "space in 1 reservation, none with a free range for the request, and "
                            "the driver refused %" G_GSIZE_FORMAT " bytes more",
                            2 * g); /* of the first one's size, then of the request's */
  g_assert_nonnull (strstr (error->message, expect));
  g_assert_nonnull (strstr (error->message, "Remedy: create the arena with a larger reserve"));
  g_assert_null (strstr (error->message, "exhausted"));
  for (at = error->message; (at = strstr (at, "cannot allocate")) != NULL; at++)
    times++;
  g_assert_cmpuint (times, ==, 1);
  g_assert_true (g_str_has_prefix (error->message, "cannot allocate "));
  /* the driver grants address space again: the same request is served */
  b = mt_alloc_ok (mr, 2 * g, NULL);
  g_assert_cmpuint (counter (mr, "reservations"), ==, 2);
  mt_close_ok (b, NULL);
  mt_close_ok (a, NULL);
}

/* One "cannot allocate N bytes" in the message of a physical out-of-memory too (the granule's
 * own size is not said again). */
static void
test_oom_message_once (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *b;

  if (!mt_require_devices (1) || !mt_require_fake ("needs the fake's fault injection"))
    return;
  mr = mt_new_ok ("arena");
  for (int i = 1; i <= 4; i++)
    mt_fake_fail_call ("cuMemCreate", i, CUDA_ERROR_OUT_OF_MEMORY);
  b = memres_resource_allocate (mr, 3 * MiB, NULL, &error);
  mt_fake_reset_faults ();
  g_assert_null (b);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_test_message ("%s", error->message);
  g_assert_true (g_str_has_prefix (error->message, "cannot allocate 3145728 bytes: cuMemCreate"));
  g_assert_null (strstr (error->message + 1, "cannot allocate"));
}

static void
test_oom_flush (void)
{
  g_autoptr (MemresResource) mr = NULL;
  GError *error = NULL;
  MemresBuffer *bufs[8], *big;
  size_t free_bytes = 0, total = 0;
  gboolean pushed;
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("needs the fake's small device"))
    return;
  mr = mt_new_ok ("arena:max_block=1MiB");
  g = gran (mr);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 0);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 4 * g);
  g_assert_true (memres_cuda_push_context (0, &pushed, &error));
  g_assert_cmpint (memres_cuda_get_driver (NULL)->cuMemGetInfo (&free_bytes, &total), ==,
                   CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  /* everything the device has left, plus the four granules the cached blocks hold */
  big = memres_resource_allocate (mr, free_bytes / g * g + 4 * g, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (big);
  g_assert_cmpuint (counter (mr, "oom_flushes"), ==, 1);
  /* the retry starts where the slabs were: their granules back it in place */
  g_assert_cmpuint (memres_buffer_get_address (big) % g, ==, 0);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, free_bytes / g * g + 4 * g);
  mt_close_ok (big, NULL);
  /* and past the device's memory: out of memory, nothing left behind */
  big = memres_resource_allocate (mr, total + g, NULL, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_null (big);
  g_clear_error (&error);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
}

/* RMM's arena Defragment case: threads, each on a stream of its own, allocate and close a small
 * buffer and end, their blocks left in their fronts and classes; then one request of everything
 * the device has left plus the granules those blocks hold succeeds (the out-of-memory flush
 * reaches the blocks of threads that are gone), and one past the device's memory fails with
 * nothing left behind. */
typedef struct
{
  MemresResource *mr;
  CUstream stream;
} SmallJob;

static gpointer
small_pair (gpointer data)
{
  SmallJob *job = data;

  mt_close_ok (mt_alloc_ok (job->mr, 32 * KiB, (MemresStream) job->stream),
               (MemresStream) job->stream);
  return NULL;
}

static void
test_oom_flush_threads (void)
{
  g_autoptr (MemresResource) mr = NULL;
  GError *error = NULL;
  SmallJob jobs[4];
  GThread *threads[G_N_ELEMENTS (jobs)];
  MemresBuffer *big;
  size_t free_bytes = 0, total = 0;
  guint64 reserved;
  gboolean pushed;
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("needs the fake's small device"))
    return;
  mr = mt_new_ok ("arena");
  g = gran (mr);
  for (guint i = 0; i < G_N_ELEMENTS (jobs); i++)
    {
      jobs[i].mr = mr;
      jobs[i].stream = mt_stream_new_on (0);
      threads[i] = g_thread_new ("small", small_pair, &jobs[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (jobs); i++)
    {
      g_thread_join (threads[i]);
      mt_stream_free (jobs[i].stream);
    }
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 0);
  reserved = stats_ok (mr).reserved_current;
  g_assert_cmpuint (reserved, >, 0);
  g_assert_cmpuint (reserved % g, ==, 0);
  g_assert_true (memres_cuda_push_context (0, &pushed, &error));
  g_assert_cmpint (memres_cuda_get_driver (NULL)->cuMemGetInfo (&free_bytes, &total), ==,
                   CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  big = memres_resource_allocate (mr, free_bytes / g * g + reserved, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (big);
  g_assert_cmpuint (counter (mr, "oom_flushes"), ==, 1);
  mt_close_ok (big, NULL);
  big = memres_resource_allocate (mr, total + g, NULL, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_null (big);
  g_clear_error (&error);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
}

/* ---- growing the reservation ----------------------------------------------------------------- */

/* An arena of 8 MiB of address space filled, then continued: the next buffer gets a second
 * reservation of the first one's size, a buffer larger than that a third of its own size; data,
 * lookups and statistics hold across them, and finalize gives all three back. */
static void
test_grow (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *b, *c, *small;
  MemresLookupInfo info;
  guint64 va;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("arena:reserve=8MiB");
  g = gran (mr);
  va = counter (mr, "virtual");
  g_assert_cmpuint (va, ==, 8 * MiB);
  g_assert_cmpuint (counter (mr, "reservations"), ==, 1);
  a = mt_alloc_ok (mr, va - g, NULL);
  b = mt_alloc_ok (mr, 2 * g, NULL);
  g_assert_cmpuint (counter (mr, "reservations"), ==, 2);
  g_assert_cmpuint (counter (mr, "virtual"), ==, 2 * va);
  g_assert_true (memres_buffer_get_address (b) < memres_buffer_get_address (a)
                 || memres_buffer_get_address (b) >= memres_buffer_get_address (a) + va - g);
  c = mt_alloc_ok (mr, va + 3 * g, NULL);
  g_assert_cmpuint (counter (mr, "reservations"), ==, 3);
  g_assert_cmpuint (counter (mr, "virtual"), ==, 3 * va + 3 * g);
  small = mt_alloc_ok (mr, 1000, NULL);
  g_assert_cmpuint (counter (mr, "reservations"), ==, 3);
  mt_fill_byte_ok (a, 0x1a, NULL);
  mt_fill_byte_ok (b, 0x2b, NULL);
  mt_fill_byte_ok (c, 0x3c, NULL);
  mt_fill_byte_ok (small, 0x4d, NULL);
  mt_assert_bytes (a, 0x1a, NULL);
  mt_assert_bytes (b, 0x2b, NULL);
  mt_assert_bytes (c, 0x3c, NULL);
  mt_assert_bytes (small, 0x4d, NULL);
  g_assert_true (
      memres_lookup ((gconstpointer) (guintptr) (memres_buffer_get_address (c) + va), &info));
  g_assert_true (info.resource == mr);
  g_assert_cmpuint (info.offset, ==, (memres_buffer_get_address (c) + va) % g);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, va - g + 2 * g + va + 3 * g + 1024);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  mt_close_ok (c, NULL);
  mt_close_ok (small, NULL);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  /* a small fake device, filled quickly (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "64MiB", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/arena/oom/fragmentation", test_oom_fragmentation);
  g_test_add_func ("/arena/oom/flush-retry", test_oom_flush);
  g_test_add_func ("/arena/oom/flush-threads", test_oom_flush_threads);
  g_test_add_func ("/arena/oom/address-space", test_oom_address_space);
  g_test_add_func ("/arena/oom/message-once", test_oom_message_once);
  g_test_add_func ("/arena/grow/continues", test_grow);
  return g_test_run ();
}

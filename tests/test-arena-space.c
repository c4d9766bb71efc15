/* test-arena-space.c: the `arena` kind when memory or address space runs short, against the fake
 * driver (a small device, suite fake) and the real one (suite gpu): the out-of-memory report
 * (explain_oom: the free bytes stranded in granules partly in use, the verdict and the remedy). */
#include "testutil.h"

#include <string.h>

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

static guint64
counter (MemresResource *mr, const char *name)
{
  GError *error = NULL;
  g_autoptr (GVariant) v = memres_resource_get_counters (mr, &error);
  guint64 value = 0;

  g_assert_no_error (error);
  g_assert_true (g_variant_lookup (v, name, "t", &value));
  return value;
}

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

int
main (int argc, char **argv)
{
  /* a small fake device, filled quickly (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "64MiB", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/arena/oom/fragmentation", test_oom_fragmentation);
  return g_test_run ();
}

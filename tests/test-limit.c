/* test-limit.c: the `limit` adaptor's own: its refusals over a layer that rounds up and at the
 * boundary, with the words of its error (suites core, fake and gpu). */
#include "testutil.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>
#include "testutil-adaptors.h"

/* limit over a layer that rounds up (vmm, to its 2 MiB granularity on the fake): the refusal
 * names the rounded size and what was in use before the request (its own bytes not counted),
 * and nothing stays taken. */
static void
test_limit_rounded (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  if (!mt_require_fake ("vmm's granularity on the fake is 2 MiB") || !mt_require_devices (1))
    return;
  /* the size the application asked for, then what the layer below takes */
  mr = mt_new_ok ("limit:max=1MiB>vmm");
  buf = memres_resource_allocate (mr, 1, NULL, &error);
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  mt_assert_oom_cause (
      error, "limit: allocating 1 byte (2097152 bytes in the layer below, which rounds it "
             "up) would pass the limit of 1048576 bytes (0 in use)");
  g_clear_error (&error);
  /* nothing was kept: the same refusal again, not a different count */
  g_assert_null (memres_resource_allocate (mr, 1, NULL, &error));
  g_assert_nonnull (strstr (error->message, "(0 in use)"));
  g_clear_error (&error);
  g_clear_pointer (&mr, memres_resource_unref);

  /* 3 MiB with 2 MiB in use fits a limit of 5 MiB, but vmm would take 4 MiB */
  mr = mt_new_ok ("limit:max=5MiB>vmm");
  buf = mt_alloc_ok (mr, 2 << 20, NULL);
  g_assert_null (memres_resource_allocate (mr, 3 << 20, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  mt_assert_oom_cause (error,
                       "limit: allocating 3145728 bytes (4194304 bytes in the layer below, which "
                       "rounds it up) would pass the limit of 5242880 bytes (2097152 in use)");
  g_clear_error (&error);
  /* refused before anything is asked of the layer below: only the size asked is said */
  g_assert_null (memres_resource_allocate (mr, 4 << 20, NULL, &error));
  mt_assert_oom_cause (error,
                       "limit: allocating 4194304 bytes would pass the limit of 5242880 bytes "
                       "(2097152 in use)");
  mt_close_ok (buf, NULL);
}

/* limit: exact at the boundary, one byte past fails saying why ("1 byte", not "1 bytes"),
 * nothing below called. */
static void
test_limit_boundary (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("limit:max=1000>stats>host");
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;
  MemresBuffer *a, *b, *c1;

  a = mt_alloc_ok (mr, 600, NULL);
  b = mt_alloc_ok (mr, 400, NULL); /* exactly the limit */
  c1 = memres_resource_allocate (mr, 1, NULL, &error);
  g_assert_null (c1);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  mt_assert_oom_cause (error,
                       "limit: allocating 1 byte would pass the limit of 1000 bytes (1000 in use)");
  g_clear_error (&error);
  g_assert_true (memres_stats_get_counters (mr, &c, NULL));
  g_assert_cmpuint (c.count_total, ==, 2); /* the refused one never reached stats */
  mt_close_ok (b, NULL);
  b = memres_resource_allocate (mr, 401, NULL, &error);
  g_assert_null (b);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  b = mt_alloc_ok (mr, 400, NULL);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  /* a size larger than the limit itself */
  a = memres_resource_allocate (mr, G_MAXSSIZE, NULL, &error);
  g_assert_null (a);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_clear_pointer (&mr, memres_resource_unref);

  /* a limit of 1 byte, full */
  mr = mt_new_ok ("limit:max=1>host");
  a = mt_alloc_ok (mr, 1, NULL);
  g_assert_null (memres_resource_allocate (mr, 2, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  mt_assert_oom_cause (error,
                       "limit: allocating 2 bytes would pass the limit of 1 byte (1 in use)");
  g_clear_error (&error);
  g_assert_null (memres_resource_allocate (mr, 1, NULL, &error));
  mt_assert_oom_cause (error, "limit: allocating 1 byte would pass the limit of 1 byte (1 in use)");
  mt_close_ok (a, NULL);
}

/* The limit's counters (memres_resource_get_counters(): `limit` and `used`, what RMM's
 * limiting adaptor answers as get_allocation_limit() and get_allocated_bytes()): exact after
 * each allocate, refusal and close; two limits stacked each count their own; a layer above
 * without counters of its own passes the call down to the limit. */
static guint64
counter (MemresResource *mr, const char *name)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) v = memres_resource_get_counters (mr, &error);
  guint64 value = G_MAXUINT64;

  g_assert_no_error (error);
  g_assert_true (g_variant_lookup (v, name, "t", &value));
  return value;
}

static void
test_limit_counters (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("limit:max=10MiB>host");
  g_autoptr (MemresResource) two = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *a, *b, *c;

  g_assert_cmpuint (counter (mr, "limit"), ==, 10 << 20);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  a = mt_alloc_ok (mr, 4 << 20, NULL);
  g_assert_cmpuint (counter (mr, "used"), ==, 4 << 20);
  b = mt_alloc_ok (mr, 4 << 20, NULL);
  g_assert_cmpuint (counter (mr, "used"), ==, 8 << 20);
  /* over the limit: refused, nothing counted */
  g_assert_null (memres_resource_allocate (mr, 3 << 20, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpuint (counter (mr, "used"), ==, 8 << 20);
  /* under it again once a buffer is closed: 6 MiB fills it exactly */
  mt_close_ok (a, NULL);
  g_assert_cmpuint (counter (mr, "used"), ==, 4 << 20);
  c = mt_alloc_ok (mr, 6 << 20, NULL);
  g_assert_cmpuint (counter (mr, "used"), ==, 10 << 20);
  g_assert_cmpuint (counter (mr, "limit") - counter (mr, "used"), ==, 0);
  /* an empty buffer reaches no layer: nothing counted */
  a = mt_alloc_ok (mr, 0, NULL);
  g_assert_cmpuint (counter (mr, "used"), ==, 10 << 20);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  mt_close_ok (c, NULL);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);

  /* two limits: the lower refuses what the upper allows; each layer's counters are its own, and
   * `stats` above passes the call to the first limit */
  two = mt_new_ok ("stats>limit:max=5MiB>limit:max=2MiB>host");
  g_assert_null (memres_resource_allocate (two, 4 << 20, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "limit of 2097152 bytes"));
  g_clear_error (&error);
  a = mt_alloc_ok (two, 1 << 20, NULL);
  g_assert_cmpuint (counter (two, "limit"), ==, 5 << 20);
  g_assert_cmpuint (counter (two, "used"), ==, 1 << 20);
  g_assert_cmpuint (
      counter (memres_resource_get_upstream (memres_resource_get_upstream (two)), "limit"), ==,
      2 << 20);
  mt_close_ok (a, NULL);
  g_assert_cmpuint (counter (two, "used"), ==, 0);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  register_kinds ();
  g_test_add_func ("/adaptors/limit-rounded", test_limit_rounded);
  g_test_add_func ("/adaptors/limit-boundary", test_limit_boundary);
  g_test_add_func ("/adaptors/limit-counters", test_limit_counters);
  return g_test_run ();
}

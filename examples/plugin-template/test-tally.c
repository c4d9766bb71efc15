/* test-tally.c: the `tally` adaptor in stacks, loaded by name like any kind (through
 * MEMRES_PLUGIN_PATH), over the `host` kind built into libmemres: no GPU needed. */
#include <memres/memres.h>

static MemresBuffer *
allocate (MemresResource *mr, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  return buf;
}

static void
close_buffer (MemresBuffer *buf)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  memres_buffer_unref (buf);
}

static void
test_stack (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("tally:max_live=2>host", &error);
  g_autofree char *text = NULL;
  MemresResource *host;
  MemresBuffer *a, *b, *c;
  MemresStats stats;

  g_assert_no_error (error);
  g_assert_nonnull (mr);
  text = memres_resource_to_string (mr);
  g_assert_cmpstr (text, ==, "tally:max_live=2>host:alignment=256");
  host = memres_resource_get_upstream (mr);
  g_assert_cmpstr (memres_resource_get_kind_name (host), ==, "host");
  g_assert_true (memres_resource_is_host_accessible (mr)); /* the upstream's flags */

  a = allocate (mr, 1000);
  b = allocate (mr, 24);
  c = memres_resource_allocate (mr, 1, NULL, &error); /* a third: past max_live */
  g_assert_null (c);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_cmpuint (stats.used_current, ==, 1024);
  g_assert_cmpuint (stats.n_buffers, ==, 2);
  /* the layer below counted the same bytes */
  g_assert_true (memres_resource_get_stats (host, &stats, &error));
  g_assert_cmpuint (stats.used_current, ==, 1024);
  close_buffer (a);
  close_buffer (b);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.used_high, ==, 1024);
}

static void
test_bad_stacks (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("tally", &error);

  /* an adaptor needs a layer below it */
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  mr = memres_resource_new ("host>tally", &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  mr = memres_resource_new ("tally:max_live=0>host", &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/tally/stack", test_stack);
  g_test_add_func ("/tally/bad-stacks", test_bad_stacks);
  return g_test_run ();
}

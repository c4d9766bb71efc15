/* test-counting.c: loads the `counting` kind by name, as any application would (the plugin is
 * found through MEMRES_PLUGIN_PATH, which `meson test` points at the build directory), and
 * checks its counts. Needs no GPU: the upstream is the `host` kind built into libmemres. */
#include <string.h>

#include <memres/memres.h>

/* The counts log_counts() in counting.c logs when a resource is finalized. */
typedef struct
{
  gint64 allocations, deallocations, failed, high_bytes;
} LoggedCounts;

static LoggedCounts logged = { -1, -1, -1, -1 };

static gint64
field_value (const GLogField *field)
{
  return g_ascii_strtoll (field->value, NULL, 10);
}

static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  for (gsize i = 0; i < n_fields; i++)
    {
      if (g_str_equal (fields[i].key, "MEMRES_COUNTING_ALLOCATIONS"))
        logged.allocations = field_value (&fields[i]);
      else if (g_str_equal (fields[i].key, "MEMRES_COUNTING_DEALLOCATIONS"))
        logged.deallocations = field_value (&fields[i]);
      else if (g_str_equal (fields[i].key, "MEMRES_COUNTING_FAILED"))
        logged.failed = field_value (&fields[i]);
      else if (g_str_equal (fields[i].key, "MEMRES_COUNTING_HIGH_BYTES"))
        logged.high_bytes = field_value (&fields[i]);
    }
  return g_log_writer_default (level, fields, n_fields, user_data);
}

static void
get_stats (MemresResource *mr, MemresStats *stats)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_get_stats (mr, stats, &error));
  g_assert_no_error (error);
}

static MemresBuffer *
allocate (MemresResource *mr, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
  return buf;
}

static void
test_load_by_name (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("counting", &error);
  MemresKind *kind;

  g_assert_no_error (error);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "counting");
  kind = memres_resource_get_kind (mr);
  g_assert_cmpstr (memres_kind_get_plugin_name (kind), ==, "counting");
  g_assert_true (g_str_has_suffix (memres_kind_get_plugin_path (kind), "/libmemres-counting.so"));
  /* The default upstream is host memory. */
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
  g_assert_true (memres_resource_is_host_accessible (mr));
  g_assert_false (memres_resource_is_device_accessible (mr));
}

static void
test_stats (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("counting:upstream=host", &error);
  g_autoptr (MemresBuffer) a = NULL;
  g_autoptr (MemresBuffer) b = NULL;
  g_autoptr (MemresBuffer) empty = NULL;
  MemresStats stats;
  guint8 *p;

  g_assert_no_error (error);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.used_high, ==, 0);
  g_assert_cmpuint (stats.n_buffers, ==, 0);

  a = allocate (mr, 1000);
  b = allocate (mr, 3000);
  /* The memory is the upstream's, and real. */
  p = memres_buffer_get_pointer (b);
  memset (p, 0xa5, 3000);
  g_assert_cmpuint (p[2999], ==, 0xa5);

  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 4000);
  g_assert_cmpuint (stats.used_high, ==, 4000);
  g_assert_cmpuint (stats.n_buffers, ==, 2);
  /* host keeps statistics: reserved is the upstream's, which holds exactly these bytes. */
  g_assert_cmpuint (stats.reserved_current, ==, 4000);

  /* A zero-byte buffer never reaches the plugin. */
  empty = allocate (mr, 0);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 4000);

  g_assert_true (memres_buffer_close (a, NULL, &error));
  g_assert_no_error (error);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 3000);
  g_assert_cmpuint (stats.used_high, ==, 4000);

  g_assert_true (memres_resource_reset_stats (mr, &error));
  g_assert_no_error (error);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 3000);
  g_assert_cmpuint (stats.used_high, ==, 3000);
  g_assert_cmpuint (stats.reserved_high, ==, 3000);
}

static void
test_limit (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("counting:limit=4KiB", &error);
  g_autoptr (MemresBuffer) a = NULL;
  g_autoptr (MemresBuffer) b = NULL;
  MemresStats stats;

  g_assert_no_error (error);
  a = allocate (mr, 4096);
  b = memres_resource_allocate (mr, 1, NULL, &error);
  g_assert_null (b);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);

  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 4096);

  g_assert_true (memres_buffer_close (a, NULL, &error));
  b = allocate (mr, 4096);
}

/* The upstream spec carries its own options, ';' between them. */
static void
test_upstream_options (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) aligned = NULL;
  g_autoptr (MemresResource) nested = NULL;
  g_autoptr (MemresBuffer) buf = NULL;

  aligned = memres_resource_new ("counting:upstream=host:alignment=64KiB", &error);
  g_assert_no_error (error);
  buf = allocate (aligned, 100);
  g_assert_cmpuint (memres_buffer_get_address (buf) % 65536, ==, 0);
  g_clear_pointer (&buf, memres_buffer_unref);

  /* Two options for the upstream, itself a counting resource with a 1 KiB limit. */
  nested = memres_resource_new ("counting:upstream=counting:upstream=host;limit=1KiB", &error);
  g_assert_no_error (error);
  buf = memres_resource_allocate (nested, 2048, NULL, &error);
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  buf = allocate (nested, 1024);
}

static void
test_bad_upstream (void)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr;

  mr = memres_resource_new ("counting:upstream=nosuchkind", &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);

  mr = memres_resource_new ("counting:upstream=host:bogus=1", &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "bogus"));
  g_clear_error (&error);

  mr = memres_resource_new ("counting:limit=lots", &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
}

/* The call counts, logged when the resource is finalized. */
static void
test_call_counts (void)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr = memres_resource_new ("counting:limit=1MiB", &error);
  MemresBuffer *a, *b, *c;
  const LoggedCounts none = { -1, -1, -1, -1 };

  logged = none; /* earlier tests' resources logged theirs */
  g_assert_no_error (error);
  a = allocate (mr, 512 * 1024);
  b = allocate (mr, 256 * 1024);
  c = memres_resource_allocate (mr, 512 * 1024, NULL, &error); /* over the limit */
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_null (c);
  g_clear_error (&error);
  g_assert_true (memres_buffer_close (a, NULL, &error));
  c = allocate (mr, 512 * 1024);

  memres_buffer_unref (b); /* the last reference of an open buffer closes it */
  memres_buffer_unref (c);
  memres_buffer_unref (a);
  g_assert_cmpint (logged.allocations, ==, -1); /* buffers gone, resource still alive */
  memres_resource_unref (mr);

  g_assert_cmpint (logged.allocations, ==, 3);
  g_assert_cmpint (logged.deallocations, ==, 3);
  g_assert_cmpint (logged.failed, ==, 1);
  g_assert_cmpint (logged.high_bytes, ==, 768 * 1024); /* a + b, then b + c */
}

#define N_THREADS 4
#define N_ROUNDS  200

static gpointer
churn (gpointer data)
{
  MemresResource *mr = data;

  for (int i = 0; i < N_ROUNDS; i++)
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = memres_resource_allocate (mr, 1024, NULL, &error);

      g_assert_no_error (error);
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      memres_buffer_unref (buf);
    }
  return NULL;
}

static void
test_threads (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("counting", &error);
  GThread *threads[N_THREADS];
  MemresStats stats;

  g_assert_no_error (error);
  for (int i = 0; i < N_THREADS; i++)
    threads[i] = g_thread_new ("churn", churn, mr);
  for (int i = 0; i < N_THREADS; i++)
    g_thread_join (threads[i]);

  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.used_high, >=, 1024);
  g_assert_cmpuint (stats.used_high, <=, N_THREADS * 1024);
}

int
main (int argc, char **argv)
{
  g_log_set_writer_func (writer, NULL, NULL);
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/counting/load-by-name", test_load_by_name);
  g_test_add_func ("/counting/stats", test_stats);
  g_test_add_func ("/counting/limit", test_limit);
  g_test_add_func ("/counting/upstream-options", test_upstream_options);
  g_test_add_func ("/counting/bad-upstream", test_bad_upstream);
  g_test_add_func ("/counting/call-counts", test_call_counts);
  g_test_add_func ("/counting/threads", test_threads);

  return g_test_run ();
}

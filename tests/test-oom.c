/* memres - CUDA memory resources
 * test-oom.c: the out-of-memory rule. A driver call that answers CUDA_ERROR_OUT_OF_MEMORY is
 * reported as MEMRES_ERROR_OUT_OF_MEMORY by every base kind (and through adaptors), its message
 * naming the failing call and the CUresult; other CUresults stay MEMRES_CUDA_ERROR. The fake
 * driver injects the failure into the allocation call of each kind (fake only); against the
 * real driver, a request of 1 PiB (more than any device or host has) shows the same rule
 * (gpu only: the fake has no memory limit). */
#include "testutil.h"

#include <string.h>

typedef struct
{
  const char *spec;
  const char *entry; /* the driver call of the allocation */
  gboolean capture;  /* allocates inside a stream capture (graph) */
  gboolean sized;    /* the message starts with the size asked for */
} Case;

static const Case cases[] = {
  { "dmr", "cuMemAllocFromPoolAsync", FALSE, TRUE },
  { "ipc", "cuMemAllocFromPoolAsync", FALSE, TRUE },
  { "pinned", "cuMemAllocFromPoolAsync", FALSE, TRUE },
  { "pinned:mode=legacy", "cuMemHostAlloc", FALSE, TRUE },
  { "managed:pool=none", "cuMemAllocManaged", FALSE, TRUE },
  { "vmm", "cuMemCreate", FALSE, TRUE },
  { "graph", "cuMemAllocAsync", TRUE, TRUE },
  /* through adaptors, untouched */
  { "stats>limit:max=1GiB>vmm", "cuMemCreate", FALSE, TRUE },
  { "track>pinned:mode=legacy", "cuMemHostAlloc", FALSE, TRUE },
};

/* One allocation of @size bytes of @c with its driver call failing with @code; returns the
 * error. */
static GError *
allocate_failing (const Case *c, gsize size, CUresult code)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  g_autoptr (MemresResource) mr = mt_new_ok (c->spec);
  GError *error = NULL;
  CUstream stream = NULL;
  MemresBuffer *buf;

  g_assert_nonnull (drv);
  if (c->capture)
    {
      g_assert_true (memres_cuda_ensure_context (0, NULL));
      g_assert_cmpint (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuStreamBeginCapture (stream, CU_STREAM_CAPTURE_MODE_RELAXED), ==,
                       CUDA_SUCCESS);
    }
  mt_fake_fail_call (c->entry, 1, code);
  buf = memres_resource_allocate (mr, size, (MemresStream) stream, &error);
  mt_fake_reset_faults ();
  g_assert_null (buf);
  g_assert_nonnull (error);
  if (c->capture)
    {
      CUgraph graph = NULL;

      g_assert_cmpint (drv->cuStreamEndCapture (stream, &graph), ==, CUDA_SUCCESS);
      if (graph != NULL)
        g_assert_cmpint (drv->cuGraphDestroy (graph), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuStreamDestroy (stream), ==, CUDA_SUCCESS);
    }
  return error;
}

static void
test_out_of_memory (gconstpointer data)
{
  const Case *c = data;
  g_autoptr (GError) error = NULL;
  g_autofree char *expected = g_strdup_printf ("%s: CUDA_ERROR_OUT_OF_MEMORY", c->entry);
  FakeCudaCounts base;

  if (!mt_require_fake ("injects CUDA_ERROR_OUT_OF_MEMORY"))
    return;
  mt_counts_snapshot (&base);
  error = allocate_failing (c, 1 << 20, CUDA_ERROR_OUT_OF_MEMORY);
  g_test_message ("%s: %s", c->spec, error->message);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, expected));
  if (c->sized)
    g_assert_true (g_str_has_prefix (error->message, "cannot allocate 1048576 bytes: "));
  g_assert_true (mt_error_is_cuda (error, CUDA_ERROR_OUT_OF_MEMORY));
  g_clear_error (&error);
  /* one byte, in the singular */
  error = allocate_failing (c, 1, CUDA_ERROR_OUT_OF_MEMORY);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, expected));
  if (c->sized)
    g_assert_true (g_str_has_prefix (error->message, "cannot allocate 1 byte: "));
  mt_assert_fake_counts_equal (&base);
}

/* Another CUresult of the same call keeps its own domain and code. */
static void
test_other_error (gconstpointer data)
{
  const Case *c = data;
  g_autoptr (GError) error = NULL;

  if (!mt_require_fake ("injects CUDA_ERROR_UNKNOWN"))
    return;
  error = allocate_failing (c, 1 << 20, CUDA_ERROR_UNKNOWN);
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_assert_nonnull (strstr (error->message, c->entry));
}

/* The retry adaptor matches the one code: a driver out-of-memory runs its handler. */
static gboolean
count_handler (MemresResource *mr, gsize size, guint attempt, const GError *error,
               gpointer user_data)
{
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  (*(int *) user_data)++;
  return TRUE;
}

static void
test_retry (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  int calls = 0;

  if (!mt_require_fake ("injects CUDA_ERROR_OUT_OF_MEMORY"))
    return;
  mr = mt_new_ok ("retry>vmm");
  g_assert_cmpuint (memres_retry_add_handler (mr, count_handler, &calls, NULL, &error), >, 0);
  g_assert_no_error (error);
  mt_fake_fail_call ("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
  buf = memres_resource_allocate (mr, 1 << 20, NULL, &error);
  mt_fake_reset_faults ();
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpint (calls, ==, 1);
  mt_close_ok (buf, NULL);
}

/* Kinds whose real driver answers a request larger than the device (or host) memory. */
static const char *const real_specs[] = {
  "dmr", "managed:pool=none", "pinned", "pinned:mode=legacy", "cache>dmr", "stats>dmr",
};

static void
test_real_driver (gconstpointer data)
{
  const char *spec = data;
  const gsize size = (gsize) 1 << 50;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresStats stats;
  MemresBuffer *buf;

  if (mt_driver_is_fake ())
    {
      g_test_skip ("needs the real driver: the fake has no memory limit");
      return;
    }
  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok (spec);
  buf = memres_resource_allocate (mr, size, NULL, &error);
  g_test_message ("%s: %s", spec, error != NULL ? error->message : "(allocated)");
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  /* nothing stays allocated, and the resource still serves */
  g_clear_error (&error);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.n_buffers, ==, 0);
  buf = memres_resource_allocate (mr, 4096, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 4096);
  mt_close_ok (buf, NULL);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *oom = g_strdup_printf ("/oom/%s", cases[i].spec);
      g_autofree char *other = g_strdup_printf ("/oom/other-error/%s", cases[i].spec);

      g_test_add_data_func (oom, &cases[i], test_out_of_memory);
      g_test_add_data_func (other, &cases[i], test_other_error);
    }
  g_test_add_func ("/oom/retry", test_retry);
  for (gsize i = 0; i < G_N_ELEMENTS (real_specs); i++)
    {
      g_autofree char *path = g_strdup_printf ("/oom/real-driver/%s", real_specs[i]);

      g_test_add_data_func (path, real_specs[i], test_real_driver);
    }
  return g_test_run ();
}

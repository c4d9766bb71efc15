/* memres - CUDA memory resources
 * test-exit.c: the exit rule. Once the driver has shut down at process exit, every driver call
 * answers CUDA_ERROR_DEINITIALIZED, and a buffer closed then (a static destructor, Python's
 * garbage collector) must close without an error: the memory went with the driver. Every base
 * kind, pool or not, agrees (plugins/common/release.h): the core's wait before the free, making
 * a context current for the free, and the free itself all take that code as success. The fake
 * driver plays the shutdown (fake only: the real one cannot be shut down under a test); what
 * the exit would have freed is freed by the test afterwards. */
#include "testutil.h"

#define MiB (1024 * 1024)

typedef struct
{
  const char *spec;
  const char *free_entry; /* the kind's free */
  gboolean capture;       /* allocates and frees inside a stream capture (graph) */
  gboolean no_pools;      /* on a device without memory pools (dmr's sync_fallback) */
} Case;

static const Case cases[] = {
  { "dmr", "cuMemFreeAsync", FALSE, FALSE },
  { "dmr:sync_fallback=true", "cuMemFree", FALSE, TRUE },
  { "ipc", "cuMemFreeAsync", FALSE, FALSE },
  { "pinned", "cuMemFreeAsync", FALSE, FALSE },
  { "pinned:mode=legacy", "cuMemFreeHost", FALSE, FALSE },
  { "managed", "cuMemFreeAsync", FALSE, FALSE },
  { "managed:pool=none", "cuMemFree", FALSE, FALSE },
  { "vmm", "cuMemUnmap", FALSE, FALSE },
  { "graph", "cuMemFreeAsync", TRUE, FALSE },
};

/* The driver calls a close can make, each answering CUDA_ERROR_DEINITIALIZED for the next few
 * calls: the driver shut down. */
static const char *const shut_down_entries[] = {
  "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent",    "cuCtxPopCurrent",
  "cuCtxGetDevice",  "cuStreamGetCtx",  "cuStreamSynchronize", "cuMemRelease",
};

static void
shut_down (const char *free_entry)
{
  for (guint i = 0; i < G_N_ELEMENTS (shut_down_entries); i++)
    for (int nth = 1; nth <= 3; nth++)
      mt_fake_fail_call (shut_down_entries[i], nth, CUDA_ERROR_DEINITIALIZED);
  for (int nth = 1; nth <= 3; nth++)
    mt_fake_fail_call (free_entry, nth, CUDA_ERROR_DEINITIALIZED);
}

/* Frees what the exit would have freed: the memory of @c's buffer at @address (@size bytes). */
static void
free_as_exit (const Case *c, const MemresCudaDriver *drv, CUdeviceptr address, gsize size)
{
  CUmemGenericAllocationHandle handle;

  if (g_str_has_prefix (c->spec, "vmm"))
    {
      /* one chunk, one reservation, both of @size bytes; the handle taken back first */
      g_assert_cmpint (drv->cuMemRetainAllocationHandle (&handle, (void *) (guintptr) address), ==,
                       CUDA_SUCCESS);
      g_assert_cmpint (drv->cuMemUnmap (address, size), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuMemAddressFree (address, size), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuMemRelease (handle), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuMemRelease (handle), ==, CUDA_SUCCESS);
    }
  else if (g_strcmp0 (c->free_entry, "cuMemFreeHost") == 0)
    g_assert_cmpint (drv->cuMemFreeHost ((void *) (guintptr) address), ==, CUDA_SUCCESS);
  else if (g_strcmp0 (c->free_entry, "cuMemFree") == 0)
    g_assert_cmpint (drv->cuMemFree (address), ==, CUDA_SUCCESS);
  else if (!c->capture)
    {
      g_assert_cmpint (drv->cuMemFreeAsync (address, NULL), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuStreamSynchronize (NULL), ==, CUDA_SUCCESS);
    }
}

static void
test_close_at_exit (gconstpointer data)
{
  const Case *c = data;
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  CUstream stream = NULL;
  CUgraph graph = NULL;
  CUdeviceptr address;
  FakeCudaCounts base;

  if (!mt_require_fake ("plays the driver's shutdown"))
    return;
  g_assert_nonnull (drv);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  mt_counts_snapshot (&base);
  if (c->no_pools)
    mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
  mr = mt_new_ok (c->spec);
  if (c->capture)
    {
      g_assert_cmpint (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuStreamBeginCapture (stream, CU_STREAM_CAPTURE_MODE_RELAXED), ==,
                       CUDA_SUCCESS);
    }
  buf = mt_alloc_ok (mr, 2 * MiB, (MemresStream) stream);
  address = (CUdeviceptr) memres_buffer_get_address (buf);

  shut_down (c->free_entry);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_closed (buf));
  memres_buffer_unref (buf);

  /* the driver is back (for the test): what the exit would have done */
  free_as_exit (c, drv, address, 2 * MiB);
  if (c->capture)
    {
      g_assert_cmpint (drv->cuStreamEndCapture (stream, &graph), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuGraphDestroy (graph), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuStreamDestroy (stream), ==, CUDA_SUCCESS);
    }
  memres_resource_unref (mr);
  if (c->no_pools)
    mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strdup_printf ("/exit/close/%s", cases[i].spec);

      g_test_add_data_func (path, &cases[i], test_close_at_exit);
    }
  return g_test_run ();
}

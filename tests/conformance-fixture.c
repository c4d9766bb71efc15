/* conformance-fixture.c: the conformance suite's fixture (test-conformance.c): a resource of the
 * spec, a stream to work on (captured into a graph for graph kinds), host memory to read into,
 * buffers allocated and checked. */
#include "conformance.h"

gboolean
layer_is (const Spec *s, LayerFlags f)
{
  return ((s->layer->flags | s->base->as_layer) & f) != 0;
}

/* A new stream for @s (NULL for host specs), capturing for graph. */
MemresStream
stream_begin (const Spec *s)
{
  const MemresCudaDriver *drv;
  GError *error = NULL;
  CUstream stream;

  if (!is (s, B_DEVICE))
    return NULL;
  drv = memres_cuda_get_driver (NULL);
  MT_CHECK (memres_cuda_ensure_context (0, &error));
  CU_OK (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING));
  if (is (s, B_CAPTURE))
    CU_OK (drv->cuStreamBeginCapture (stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  return (MemresStream) stream;
}

/* Ends @stream's capture; @launch: instantiates, launches and waits for what was captured.
 * Destroys the graph. */
static void
capture_end (MemresStream stream, gboolean launch)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  CUgraph graph = NULL;
  CUgraphExec exec;

  CU_OK (drv->cuStreamEndCapture ((CUstream) stream, &graph));
  g_assert_nonnull (graph);
  if (launch)
    {
      CU_OK (drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
      CU_OK (drv->cuGraphLaunch (exec, (CUstream) stream));
      CU_OK (drv->cuStreamSynchronize ((CUstream) stream));
      CU_OK (drv->cuGraphExecDestroy (exec));
    }
  CU_OK (drv->cuGraphDestroy (graph));
}

void
stream_end (const Spec *s, MemresStream stream)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);

  if (stream == NULL)
    return;
  if (is (s, B_CAPTURE))
    capture_end (stream, FALSE);
  CU_OK (drv->cuStreamSynchronize ((CUstream) stream));
  CU_OK (drv->cuStreamDestroy ((CUstream) stream));
}

/* Runs what was queued on @f's stream: for graph, the capture so far is launched (and a new one
 * begins); otherwise the stream is synchronized. */
void
fx_run (Fx *f)
{
  if (is (f->s, B_CAPTURE))
    {
      capture_end (f->stream, TRUE);
      CU_OK (f->drv->cuStreamBeginCapture ((CUstream) f->stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    }
  else
    mt_sync_ok (f->stream);
}

void
fx_no_pools (const Spec *s, gboolean on)
{
  if (is (s, B_NO_POOLS))
    mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, on ? 0 : 1);
}

gboolean
fx_init (Fx *f, gconstpointer data)
{
  const Spec *s = data;

  memset (f, 0, sizeof *f);
  f->s = s;
  if (is (s, B_DEVICE))
    {
      if (!mt_require_devices (1))
        return FALSE;
      if (is (s, B_NO_POOLS) && !mt_require_fake ("plays a device without memory pools"))
        return FALSE;
      f->drv = memres_cuda_get_driver (NULL);
      g_assert_true (memres_cuda_ensure_context (0, NULL));
    }
  mt_counts_snapshot (&f->base);
  fx_no_pools (s, TRUE);
  f->mr = mt_new_ok (s->spec);
  if (is (s, B_SHARED))
    g_assert_true (memres_resource_reset_stats (f->mr, NULL));
  f->stream = stream_begin (s);
  return TRUE;
}

void
fx_clear (Fx *f)
{
  stream_end (f->s, f->stream);
  if (f->mr != NULL)
    {
      /* what a pool or a cache keeps goes back (host has no trim) */
      if (is (f->s, B_TRIM) || layer_is (f->s, L_KEEPS))
        g_assert_true (memres_resource_trim (f->mr, 0, NULL));
      memres_resource_unref (f->mr);
    }
  if (f->drv != NULL)
    mt_sync_ok (NULL);
  fx_no_pools (f->s, FALSE);
  mt_assert_fake_counts_equal (&f->base);
}

void
host_mem_init (Fx *f, HostMem *h, gsize size)
{
  GError *error = NULL;
  MemresMemoryFlags flags = MEMRES_MEMORY_HOST_ACCESSIBLE;

  h->size = size;
  if (f->drv != NULL)
    {
      CU_OK (f->drv->cuMemHostAlloc ((void **) &h->bytes, size, 0));
      flags |= MEMRES_MEMORY_DEVICE_ACCESSIBLE;
    }
  else
    h->bytes = g_malloc (size);
  memset (h->bytes, 0, size);
  h->buf = memres_buffer_new_for_pointer (h->bytes, size, -1, flags, NULL, NULL, &error);
  g_assert_no_error (error);
}

void
host_mem_clear (Fx *f, HostMem *h)
{
  mt_close_ok (h->buf, NULL);
  if (f->drv != NULL)
    CU_OK (f->drv->cuMemFreeHost (h->bytes));
  else
    g_free (h->bytes);
}

/* An allocation of @size bytes on @stream from @s's resource @mr, asserting no error and its
 * size: @size, or at least @size for a kind that rounds. */
MemresBuffer *
alloc_ok (const Spec *s, MemresResource *mr, gsize size, MemresStream stream)
{
  GError *error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, stream, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  if (is (s, B_ROUNDS))
    g_assert_cmpuint (memres_buffer_get_size (buf), >=, size);
  else
    g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
  return buf;
}

/* The buffer's properties after an allocation of @size bytes from @f's resource. */
static void
assert_buffer (Fx *f, MemresBuffer *buf, gsize size)
{
  MemresMemoryFlags flags = memres_resource_get_flags (f->mr);

  g_assert_true (memres_buffer_get_resource (buf) == f->mr);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpint (memres_buffer_is_host_accessible (buf), ==,
                   (flags & MEMRES_MEMORY_HOST_ACCESSIBLE) != 0);
  g_assert_cmpint (memres_buffer_is_device_accessible (buf), ==,
                   (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE) != 0);
  if (!is (f->s, B_DEVICE))
    g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  if (size > 0)
    {
      g_assert_cmpuint (memres_buffer_get_address (buf), !=, 0);
      if (memres_buffer_is_host_accessible (buf))
        g_assert_cmpuint (memres_buffer_get_address (buf), ==,
                          (guint64) (guintptr) memres_buffer_get_pointer (buf));
    }
}

/* ---- the cases ---- */

/* Sizes from one byte to a few MiB: each buffer has the size asked for, an address aligned to
 * 256 bytes, distinct from the others, and the resource's accessibility. */
void
test_sizes (gconstpointer data)
{
  static const gsize sizes[] = { 1, 7, 255, 256, 4096, 65537, MiB, 3 * MiB + 5 };
  MemresBuffer *bufs[G_N_ELEMENTS (sizes)];
  Fx f;

  g_test_summary ("Buffers of 1 byte to a few MiB have their size, 256-byte alignment, distinct "
                  "addresses and the resource's accessibility.");
  if (!fx_init (&f, data))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      bufs[i] = alloc_ok (f.s, f.mr, sizes[i], f.stream);
      assert_buffer (&f, bufs[i], sizes[i]);
      g_assert_cmpuint (memres_buffer_get_address (bufs[i]) % 256, ==, 0);
      for (guint j = 0; j < i; j++)
        g_assert_cmpuint (memres_buffer_get_address (bufs[i]), !=,
                          memres_buffer_get_address (bufs[j]));
    }
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    mt_close_ok (bufs[i], f.stream);
  fx_clear (&f);
}

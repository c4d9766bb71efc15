/* test-graph.c: the graph kind (allocations inside a stream capture), against the fake driver
 * (suite fake) and the real one (suite gpu). The tests capture, instantiate and launch graphs
 * themselves through the driver table (memres_cuda_get_driver()). The contract it keeps with
 * every kind (zero bytes among it, inside a capture) is test-conformance.c's. */
#include "testutil.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

#define PATTERN 0xa5c3e10fu

/* What one test works with: a graph resource of device 0, a stream of its primary context (also
 * made current), and a pinned host buffer the graph copies into. */
typedef struct
{
  const MemresCudaDriver *drv;
  MemresResource *mr;
  CUstream stream;
  guint8 *host;
  gsize size;
  MemresBuffer *host_buf; /* wraps @host */
  FakeCudaCounts base;
} Fixture;

static gboolean
fixture_init (Fixture *f, gsize size)
{
  GError *error = NULL;

  memset (f, 0, sizeof *f);
  if (!mt_require_devices (1))
    return FALSE;
  mt_counts_snapshot (&f->base);
  f->drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  f->size = size;
  f->mr = mt_new_ok ("graph:device=0");
  MT_CHECK (memres_cuda_ensure_context (0, &error));
  CU_OK (f->drv->cuStreamCreate (&f->stream, CU_STREAM_NON_BLOCKING));
  /* Page-locked: a graph's copy node may not stage through pageable memory. */
  CU_OK (f->drv->cuMemHostAlloc ((void **) &f->host, size, 0));
  f->host_buf = memres_buffer_new_for_pointer (
      f->host, size, -1, MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE, NULL,
      NULL, &error);
  g_assert_no_error (error);
  return TRUE;
}

static void
fixture_clear (Fixture *f)
{
  GError *error = NULL;

  mt_close_ok (f->host_buf, NULL);
  CU_OK (f->drv->cuStreamSynchronize (f->stream));
  CU_OK (f->drv->cuMemFreeHost (f->host));
  CU_OK (f->drv->cuStreamDestroy (f->stream));
  MT_CHECK (memres_resource_trim (f->mr, 0, &error));
  memres_resource_unref (f->mr);
  mt_assert_fake_counts_equal (&f->base);
}

/* Captures into @f's stream: allocate, fill with PATTERN, copy to the host buffer, and close
 * the buffer there (a free node) when @free_in_graph; returns the buffer (closed or not). */
static MemresBuffer *
capture_fill_copy (Fixture *f, gboolean free_in_graph)
{
  GError *error = NULL;
  MemresBuffer *buf;

  buf = memres_resource_allocate (f->mr, f->size, f->stream, &error);
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, f->size);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, 0);
  MT_CHECK (memres_buffer_fill (buf, PATTERN, 4, f->stream, &error));
  MT_CHECK (memres_buffer_copy_to (buf, f->host_buf, f->stream, &error));
  if (free_in_graph)
    MT_CHECK (memres_buffer_close (buf, f->stream, &error));
  return buf;
}

/* Clears the host buffer, launches @exec, waits and asserts the host buffer holds PATTERN. */
static void
launch_and_check (Fixture *f, CUgraphExec exec)
{
  memset (f->host, 0, f->size);
  CU_OK (f->drv->cuGraphLaunch (exec, f->stream));
  CU_OK (f->drv->cuStreamSynchronize (f->stream));
  for (gsize i = 0; i < f->size; i += 4)
    {
      guint32 v;

      memcpy (&v, f->host + i, 4);
      if (v != PATTERN)
        g_error ("byte %" G_GSIZE_FORMAT ": 0x%08x, expected 0x%08x", i, v, PATTERN);
    }
}

static void
test_capture_launch (void)
{
  Fixture f;
  MemresBuffer *buf;
  MemresStats s;
  CUgraph graph;
  CUgraphExec exec;

  if (!fixture_init (&f, 4 * MiB))
    return;
  mt_capture_begin (f.stream);
  buf = capture_fill_copy (&f, TRUE);
  g_assert_true (memres_buffer_is_closed (buf));
  memres_buffer_unref (buf);
  graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));

  for (int i = 0; i < 3; i++)
    {
      launch_and_check (&f, exec);
      s = mt_stats_ok (f.mr);
      /* Each launch allocated the buffer (used, at its high mark) and freed it again. */
      g_assert_cmpuint (s.used_high, >=, f.size);
      g_assert_cmpuint (s.reserved_current, >=, f.size);
      g_assert_cmpuint (s.reserved_high, >=, s.reserved_current);
      if (mt_driver_is_fake ())
        {
          FakeCudaCounts now;

          g_assert_cmpuint (s.used_current, ==, 0);
          mt_fake_get_counts (&now);
          g_assert_cmpint (now.graph_allocations, ==, f.base.graph_allocations);
          g_assert_cmpint (now.graphs, ==, f.base.graphs + 1);
          g_assert_cmpint (now.graph_execs, ==, f.base.graph_execs + 1);
        }
    }
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  fixture_clear (&f);
}

static void
test_not_capturing (void)
{
  GError *error = NULL;
  MemresBuffer *buf;
  Fixture f;

  if (!fixture_init (&f, 64 * KiB))
    return;
  buf = memres_resource_allocate (f.mr, f.size, f.stream, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_null (buf);
  g_assert_nonnull (strstr (error->message, "not capturing"));
  g_assert_nonnull (strstr (error->message, "cuStreamBeginCapture"));
  g_clear_error (&error);

  /* the legacy stream never captures */
  buf = memres_resource_allocate (f.mr, f.size, NULL, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_null (buf);
  g_clear_error (&error);
  buf = memres_resource_allocate (f.mr, f.size, MEMRES_STREAM_LEGACY, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_null (buf);
  g_clear_error (&error);

  /* a capture that ended no longer allocates */
  mt_capture_begin (f.stream);
  CU_OK (f.drv->cuGraphDestroy (mt_capture_end (f.stream)));
  buf = memres_resource_allocate (f.mr, f.size, f.stream, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_null (buf);
  g_clear_error (&error);
  fixture_clear (&f);
}

static void
test_trim_after_destroy (void)
{
  GError *error = NULL;
  MemresBuffer *buf;
  MemresStats s;
  CUgraph graph;
  CUgraphExec exec;
  Fixture f;

  if (!fixture_init (&f, 8 * MiB))
    return;
  mt_capture_begin (f.stream);
  buf = capture_fill_copy (&f, TRUE);
  memres_buffer_unref (buf);
  graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
  launch_and_check (&f, exec);
  s = mt_stats_ok (f.mr);
  g_assert_cmpuint (s.reserved_current, >=, f.size);

  /* trim cannot keep part of the reservation: only a floor above it is a no-op */
  g_assert_false (memres_resource_trim (f.mr, 1, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  MT_CHECK (memres_resource_trim (f.mr, s.reserved_current, &error));
  g_assert_cmpuint (mt_stats_ok (f.mr).reserved_current, ==, s.reserved_current);

  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  CU_OK (f.drv->cuStreamSynchronize (f.stream));
  MT_CHECK (memres_resource_trim (f.mr, 0, &error));
  s = mt_stats_ok (f.mr);
  g_assert_cmpuint (s.reserved_current, ==, 0);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.reserved_high, >=, f.size);

  /* reset: the high marks come down to the current values */
  MT_CHECK (memres_resource_reset_stats (f.mr, &error));
  s = mt_stats_ok (f.mr);
  g_assert_cmpuint (s.reserved_high, ==, s.reserved_current);
  g_assert_cmpuint (s.used_high, ==, s.used_current);
  fixture_clear (&f);
}

/* A buffer not freed in its graph outlives each launch until it is freed. */
static void
test_outlives_graph (void)
{
  GError *error = NULL;
  MemresBuffer *buf;
  guint8 back[16];
  CUgraph graph;
  CUgraphExec exec;
  Fixture f;

  if (!fixture_init (&f, 1 * MiB))
    return;

  /* Without auto-free: one launch, the buffer is read after it, a second launch is refused
   * while the first launch's allocation is live, then the buffer is freed. */
  mt_capture_begin (f.stream);
  buf = capture_fill_copy (&f, FALSE);
  g_assert_false (memres_buffer_is_closed (buf));
  graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
  launch_and_check (&f, exec);
  MT_CHECK (memres_buffer_read (buf, f.size - sizeof back, back, sizeof back, f.stream, &error));
  CU_OK (f.drv->cuStreamSynchronize (f.stream));
  for (gsize i = 0; i < sizeof back; i++)
    g_assert_cmphex (back[i], ==, (PATTERN >> (8 * (i % 4))) & 0xff);
  g_assert_cmpuint (mt_stats_ok (f.mr).used_current, >=, f.size);
  g_assert_cmpint (f.drv->cuGraphLaunch (exec, f.stream), ==, CUDA_ERROR_INVALID_VALUE);
  mt_close_ok (buf, f.stream);
  CU_OK (f.drv->cuStreamSynchronize (f.stream));
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  if (mt_driver_is_fake ())
    g_assert_cmpuint (mt_stats_ok (f.mr).used_current, ==, 0);

  /* With auto-free on launch: every relaunch frees the previous launch's allocation; the
   * buffer is closed once, after the last launch. */
  mt_capture_begin (f.stream);
  buf = capture_fill_copy (&f, FALSE);
  graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph,
                                             CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
  for (int i = 0; i < 3; i++)
    {
      launch_and_check (&f, exec);
      MT_CHECK (memres_buffer_read (buf, 0, back, sizeof back, f.stream, &error));
      CU_OK (f.drv->cuStreamSynchronize (f.stream));
      g_assert_cmphex (back[0], ==, PATTERN & 0xff);
    }
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  /* the allocation of the last launch outlived its executable graph, until now */
  mt_close_ok (buf, f.stream);
  CU_OK (f.drv->cuStreamSynchronize (f.stream));
  if (mt_driver_is_fake ())
    g_assert_cmpuint (mt_stats_ok (f.mr).used_current, ==, 0);
  fixture_clear (&f);
}

/* memres frees a graph buffer once: a buffer closed in its capture (the free node) is closed for
 * good, and neither a second close (inside or outside the capture) nor the last unref frees it
 * again. The last unref of a buffer still open inside the capture is its free node. */
static void
test_double_free (void)
{
  GError *error = NULL;
  MemresBuffer *buf, *dropped;
  long frees = 0;
  CUgraph graph;
  CUgraphExec exec;
  Fixture f;

  if (!fixture_init (&f, 256 * KiB))
    return;
  mt_capture_begin (f.stream);
  if (mt_driver_is_fake ())
    frees = mt_fake_call_count ("cuMemFreeAsync");
  buf = capture_fill_copy (&f, TRUE);
  /* closed: nothing more is freed and nothing else works on it */
  MT_CHECK (memres_buffer_close (buf, f.stream, &error));
  MT_CHECK (memres_buffer_close (buf, NULL, &error));
  g_assert_false (memres_buffer_fill (buf, 0, 1, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  memres_buffer_unref (buf);

  /* dropped open inside the capture: the unref frees it there, once */
  dropped = memres_resource_allocate (f.mr, 4 * KiB, f.stream, &error);
  g_assert_no_error (error);
  memres_buffer_unref (dropped);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync"), ==, frees + 2);
  graph = mt_capture_end (f.stream);

  /* freed in the graph: every launch allocates and frees both, nothing stays live */
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
  for (int i = 0; i < 2; i++)
    {
      launch_and_check (&f, exec);
      if (mt_driver_is_fake ())
        {
          FakeCudaCounts now;

          mt_fake_get_counts (&now);
          g_assert_cmpint (now.graph_allocations, ==, f.base.graph_allocations);
        }
    }
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync"), ==, frees + 2);
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  fixture_clear (&f);
}

/* What memres guards against, shown on the fake: the driver refuses a second free of a graph
 * allocation, in the graph and outside it. */
static void
test_double_free_driver (void)
{
  CUdeviceptr ptr = 0;
  CUgraph graph;
  Fixture f;

  if (!mt_require_fake ("the driver's answer to a double free is checked on the fake only"))
    return;
  if (!fixture_init (&f, 64 * KiB))
    return;
  mt_capture_begin (f.stream);
  CU_OK (f.drv->cuMemAllocAsync (&ptr, f.size, f.stream));
  CU_OK (f.drv->cuMemFreeAsync (ptr, f.stream));
  g_assert_cmpint (f.drv->cuMemFreeAsync (ptr, f.stream), ==, CUDA_ERROR_INVALID_VALUE);
  graph = mt_capture_end (f.stream);
  /* freed in its graph: never outside it */
  g_assert_cmpint (f.drv->cuMemFreeAsync (ptr, f.stream), ==, CUDA_ERROR_INVALID_VALUE);
  CU_OK (f.drv->cuGraphDestroy (graph));
  fixture_clear (&f);
}

/* A buffer allocated in one graph and freed in another: the second graph's free node frees what
 * the first graph's launch allocated. */
static void
test_freed_by_other_graph (void)
{
  GError *error = NULL;
  MemresBuffer *buf;
  CUgraph alloc_graph, free_graph;
  CUgraphExec alloc_exec, free_exec;
  Fixture f;

  if (!fixture_init (&f, 512 * KiB))
    return;
  mt_capture_begin (f.stream);
  buf = capture_fill_copy (&f, FALSE);
  alloc_graph = mt_capture_end (f.stream);
  mt_capture_begin (f.stream);
  MT_CHECK (memres_buffer_close (buf, f.stream, &error)); /* the other graph's free node */
  memres_buffer_unref (buf);
  free_graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&alloc_exec, alloc_graph, 0));
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&free_exec, free_graph, 0));
  for (int i = 0; i < 2; i++)
    {
      launch_and_check (&f, alloc_exec);
      g_assert_cmpuint (mt_stats_ok (f.mr).used_current, >=, f.size);
      CU_OK (f.drv->cuGraphLaunch (free_exec, f.stream));
      CU_OK (f.drv->cuStreamSynchronize (f.stream));
      if (mt_driver_is_fake ())
        g_assert_cmpuint (mt_stats_ok (f.mr).used_current, ==, 0);
    }
  CU_OK (f.drv->cuGraphExecDestroy (alloc_exec));
  CU_OK (f.drv->cuGraphExecDestroy (free_exec));
  CU_OK (f.drv->cuGraphDestroy (alloc_graph));
  CU_OK (f.drv->cuGraphDestroy (free_graph));
  fixture_clear (&f);
}

/* A graph with memory nodes has one executable graph at a time (cuda.h), on both drivers. */
static void
test_one_exec_per_graph (void)
{
  MemresBuffer *buf;
  CUgraph graph;
  CUgraphExec exec, second = NULL;
  Fixture f;

  if (!fixture_init (&f, 64 * KiB))
    return;
  mt_capture_begin (f.stream);
  buf = capture_fill_copy (&f, TRUE);
  memres_buffer_unref (buf);
  graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
  g_assert_cmpint (f.drv->cuGraphInstantiateWithFlags (&second, graph, 0), !=, CUDA_SUCCESS);
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
  launch_and_check (&f, exec);
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  fixture_clear (&f);
}

/* Allocation and free from a thread with no current context: the stream's context serves. */
typedef struct
{
  Fixture *f;
  gboolean done;
} ThreadJob;

static gpointer
allocate_in_thread (gpointer data)
{
  ThreadJob *job = data;
  GError *error = NULL;
  CUcontext current = NULL;
  MemresBuffer *buf;

  long failed;

  CU_OK (job->f->drv->cuCtxGetCurrent (&current));
  g_assert_null (current);
  failed = mt_driver_is_fake () ? mt_fake_failed_call_count () : 0;
  buf = memres_resource_allocate (job->f->mr, 64 * KiB, job->f->stream, &error);
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  MT_CHECK (memres_buffer_close (buf, job->f->stream, &error));
  memres_buffer_unref (buf);
  /* no driver call failed on the way (none tried without a context first) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_failed_call_count (), ==, failed);
  job->done = TRUE;
  return NULL;
}

static void
test_thread_without_context (void)
{
  Fixture f;
  ThreadJob job = { &f, FALSE };
  CUgraph graph;
  CUgraphExec exec;

  if (!fixture_init (&f, 64 * KiB))
    return;
  mt_capture_begin (f.stream);
  g_thread_join (g_thread_new ("no-context", allocate_in_thread, &job));
  g_assert_true (job.done);
  graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
  CU_OK (f.drv->cuGraphLaunch (exec, f.stream));
  CU_OK (f.drv->cuStreamSynchronize (f.stream));
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  fixture_clear (&f);
}

/* Two graph resources of a device are equal views of its graph memory. */
static void
test_equal_resources (void)
{
  GError *error = NULL;
  MemresResource *other;
  MemresBuffer *buf;
  MemresStats a, b;
  CUgraph graph;
  CUgraphExec exec;
  Fixture f;

  if (!fixture_init (&f, 2 * MiB))
    return;
  other = mt_new_ok ("graph");
  g_assert_cmpint (memres_resource_get_device (other), ==, memres_resource_get_device (f.mr));
  g_assert_cmpint (memres_resource_get_flags (other), ==, memres_resource_get_flags (f.mr));
  mt_capture_begin (f.stream);
  buf = capture_fill_copy (&f, TRUE);
  memres_buffer_unref (buf);
  graph = mt_capture_end (f.stream);
  CU_OK (f.drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
  launch_and_check (&f, exec);
  a = mt_stats_ok (f.mr);
  b = mt_stats_ok (other);
  g_assert_cmpuint (a.reserved_current, ==, b.reserved_current);
  g_assert_cmpuint (a.used_high, ==, b.used_high);
  CU_OK (f.drv->cuGraphExecDestroy (exec));
  CU_OK (f.drv->cuGraphDestroy (graph));
  MT_CHECK (memres_resource_trim (other, 0, &error));
  g_assert_cmpuint (mt_stats_ok (f.mr).reserved_current, ==, 0);
  memres_resource_unref (other);
  fixture_clear (&f);
}

static void
test_bad_spec (void)
{
  if (!mt_require_devices (1))
    return;
  mt_new_fails ("graph:device=99", MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  mt_new_fails ("graph:device=-1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "device");
  mt_new_fails ("graph:pool=new", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "pool");
}

/* Graph memory is flagged MEMRES_MEMORY_GRAPH (the flag reaches adaptors above), and `cache`
 * refuses it as its upstream, directly or below a pass-through adaptor: a block kept after its
 * graph's launch would be an address no launch allocated. Adaptors that pass each call through
 * work over it. */
static void
test_under_cache (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) stats = NULL;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("graph");
  g_assert_cmpuint (memres_resource_get_flags (mr), ==,
                    MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED
                        | MEMRES_MEMORY_GRAPH);
  stats = mt_new_ok ("stats>graph");
  g_assert_true (memres_resource_get_flags (stats) & MEMRES_MEMORY_GRAPH);
  mt_new_fails ("cache>graph", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "graph memory");
  mt_new_fails ("cache>stats>graph", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "graph memory");
}

static void
test_no_pools (void)
{
  if (!mt_require_fake ("needs a device without memory pools"))
    return;
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
  mt_new_fails ("graph:device=0", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED");
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
}

/* Fault sweeps over the kind's driver calls: creation, allocation inside a capture (undone by
 * the free node), statistics, reset and trim. */
static gboolean
op_stats (gpointer data, GError **error)
{
  MemresStats stats;

  return memres_resource_get_stats (((MtSweepData *) data)->mr, &stats, error);
}

static gboolean
op_reset (gpointer data, GError **error)
{
  return memres_resource_reset_stats (((MtSweepData *) data)->mr, error);
}

static gboolean
op_trim (gpointer data, GError **error)
{
  return memres_resource_trim (((MtSweepData *) data)->mr, 0, error);
}

static void
undo_capture_allocate (gpointer data)
{
  MtSweepData *d = data;

  mt_close_ok (g_steal_pointer (&d->buf), d->stream); /* a free node */
}

static void
test_fault_sweep (void)
{
  MtSweepData sd = { .spec = "graph:device=0", .size = 64 * KiB };
  Fixture f;

  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  g_assert_cmpint (
      mt_fault_sweep ("new", mt_op_new, mt_undo_new, &sd, CUDA_ERROR_INVALID_VALUE, NULL), >=, 2);
  if (!fixture_init (&f, 64 * KiB))
    return;
  sd.mr = f.mr;
  sd.stream = f.stream;
  mt_capture_begin (f.stream);
  g_assert_cmpint (mt_fault_sweep ("allocate in a capture", mt_op_allocate, undo_capture_allocate,
                                   &sd, CUDA_ERROR_OUT_OF_MEMORY, NULL),
                   >=, 2);
  CU_OK (f.drv->cuGraphDestroy (mt_capture_end (f.stream)));
  g_assert_cmpint (mt_fault_sweep ("stats", op_stats, NULL, &sd, CUDA_ERROR_INVALID_VALUE, NULL),
                   ==, 4);
  g_assert_cmpint (mt_fault_sweep ("reset", op_reset, NULL, &sd, CUDA_ERROR_INVALID_VALUE, NULL),
                   ==, 2);
  g_assert_cmpint (mt_fault_sweep ("trim", op_trim, NULL, &sd, CUDA_ERROR_INVALID_DEVICE, NULL), ==,
                   1);
  fixture_clear (&f);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/graph/capture/launch-three-times", test_capture_launch);
  g_test_add_func ("/graph/allocate/not-capturing", test_not_capturing);
  g_test_add_func ("/graph/trim/after-destroy", test_trim_after_destroy);
  g_test_add_func ("/graph/buffer/outlives-graph", test_outlives_graph);
  g_test_add_func ("/graph/buffer/double-free", test_double_free);
  g_test_add_func ("/graph/buffer/double-free-driver", test_double_free_driver);
  g_test_add_func ("/graph/buffer/freed-by-other-graph", test_freed_by_other_graph);
  g_test_add_func ("/graph/driver/one-exec-per-graph", test_one_exec_per_graph);
  g_test_add_func ("/graph/allocate/thread-without-context", test_thread_without_context);
  g_test_add_func ("/graph/resource/equal", test_equal_resources);
  g_test_add_func ("/graph/new/bad-spec", test_bad_spec);
  g_test_add_func ("/graph/new/under-cache", test_under_cache);
  g_test_add_func ("/graph/new/no-pools", test_no_pools);
  g_test_add_func ("/graph/fault-sweep", test_fault_sweep);
  return g_test_run ();
}

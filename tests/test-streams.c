/* test-streams.c: stream order, on the fake driver's asynchronous mode (suite fake) and the real
 * driver (suite gpu). A stream is held with cuStreamWaitValue32 on page-locked host memory
 * (mt_stream_hold), so that work queued behind the hold waits and an ordering bug between two
 * streams shows as wrong bytes. */
#include "testutil.h"

#define SIZE (1024 * 1024)

static const MemresCudaDriver *
drv (void)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *d = memres_cuda_get_driver (&error);

  g_assert_no_error (error);
  return d;
}

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

static CUstream
stream_new (unsigned flags)
{
  g_autoptr (GError) error = NULL;
  CUstream s = NULL;

  g_assert_true (memres_cuda_ensure_context (0, &error));
  CU_OK (drv ()->cuStreamCreate (&s, flags));
  return s;
}

static void
stream_destroy (CUstream s)
{
  CU_OK (drv ()->cuStreamDestroy (s));
}

static void
fill_ok (MemresBuffer *buf, guint8 byte, MemresStream stream)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_fill (buf, byte, 1, stream, &error));
  g_assert_no_error (error);
}

/* Asserts that every byte of @buf is @byte, read on @stream (which is synchronized). */
static void
assert_bytes (MemresBuffer *buf, guint8 byte, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  gsize n = memres_buffer_get_size (buf);
  g_autofree guint8 *host = g_malloc (n);

  g_assert_true (memres_buffer_read (buf, 0, host, n, stream, &error));
  g_assert_no_error (error);
  mt_sync_ok (stream);
  for (gsize i = 0; i < n; i++)
    if (host[i] != byte)
      g_error ("byte %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " is 0x%02x, expected 0x%02x", i, n,
               host[i], byte);
}

static CUresult
event_query (CUevent e)
{
  CUresult (*query) (CUevent) = (CUresult (*) (CUevent)) mt_driver_proc ("cuEventQuery");

  g_assert_nonnull (query);
  return query (e);
}

static CUresult
stream_query (CUstream s)
{
  return drv ()->cuStreamQuery (s);
}

static MemresResource *
dmr_new (void)
{
  return mt_new_ok ("dmr:device=0");
}

/* A held stream runs nothing queued behind the hold; the host and other streams go on; the
 * release lets it run, in order. */
static void
test_hold_release (void)
{
  CUstream a, b;
  MemresResource *mr;
  MemresBuffer *x;
  MtStreamHold *hold;
  CUevent after;
  FakeCudaCounts base;

  if (!mt_require_stream_holds ())
    return;
  mt_counts_snapshot (&base);
  a = stream_new (CU_STREAM_NON_BLOCKING);
  b = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, a);
  fill_ok (x, 0x11, a);
  mt_sync_ok (a);

  hold = mt_stream_hold (a);
  fill_ok (x, 0xaa, a);
  CU_OK (drv ()->cuEventCreate (&after, CU_EVENT_DISABLE_TIMING));
  CU_OK (drv ()->cuEventRecord (after, a));
  g_assert_true (mt_stream_is_held (hold));
  g_assert_cmpint (event_query (after), ==, CUDA_ERROR_NOT_READY);
  g_assert_cmpint (stream_query (a), ==, CUDA_ERROR_NOT_READY);
  /* Stream b runs: it reads what was there before the hold. */
  assert_bytes (x, 0x11, b);
  g_assert_cmpint (event_query (after), ==, CUDA_ERROR_NOT_READY);

  mt_stream_release (hold);
  mt_sync_ok (a);
  g_assert_cmpint (event_query (after), ==, CUDA_SUCCESS);
  g_assert_cmpint (stream_query (a), ==, CUDA_SUCCESS);
  assert_bytes (x, 0xaa, a);

  CU_OK (drv ()->cuEventDestroy (after));
  mt_close_ok (x, a);
  mt_sync_ok (a);
  memres_resource_unref (mr);
  stream_destroy (a);
  stream_destroy (b);
  mt_assert_fake_counts_equal (&base);
}

/* The bug the double must see: a block still being written on stream a is reused on stream b
 * without ordering b after a. a's late write lands over b's bytes. With b waiting for an event
 * recorded on a, b's bytes survive. */
static void
test_unordered_reuse_corrupts (void)
{
  CUstream a, b;
  MemresResource *mr;
  MemresBuffer *x;
  MtStreamHold *hold;
  CUevent e;

  if (!mt_require_stream_holds ())
    return;
  a = stream_new (CU_STREAM_NON_BLOCKING);
  b = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, a);
  mt_sync_ok (a);

  /* Unordered: b writes the block while a's write to it is still queued. */
  hold = mt_stream_hold (a);
  fill_ok (x, 0xaa, a);
  fill_ok (x, 0xbb, b);
  mt_sync_ok (b);
  mt_stream_release (hold);
  mt_sync_ok (a);
  assert_bytes (x, 0xaa, b); /* b's bytes are gone: the bug is visible */

  /* Ordered: b waits for an event recorded on a after a's write. */
  CU_OK (drv ()->cuEventCreate (&e, CU_EVENT_DISABLE_TIMING));
  hold = mt_stream_hold (a);
  fill_ok (x, 0xcc, a);
  CU_OK (drv ()->cuEventRecord (e, a));
  CU_OK (drv ()->cuStreamWaitEvent (b, e, 0));
  fill_ok (x, 0xdd, b);
  g_assert_cmpint (stream_query (b), ==, CUDA_ERROR_NOT_READY); /* b waits for a */
  mt_stream_release (hold);
  mt_sync_ok (b);
  assert_bytes (x, 0xdd, b);

  CU_OK (drv ()->cuEventDestroy (e));
  mt_close_ok (x, a);
  mt_sync_ok (a);
  memres_resource_unref (mr);
  stream_destroy (a);
  stream_destroy (b);
}

/* The legacy stream waits for blocking streams and they for it; a non-blocking stream does not. */
static void
test_legacy_implicit_sync (void)
{
  CUstream blocking, nonblocking;
  MemresResource *mr;
  MemresBuffer *x;
  MtStreamHold *hold;
  CUevent e;

  if (!mt_require_stream_holds ())
    return;
  blocking = stream_new (0);
  nonblocking = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, NULL);
  mt_sync_ok (NULL);
  CU_OK (drv ()->cuEventCreate (&e, CU_EVENT_DISABLE_TIMING));

  /* Held blocking stream: legacy work queued after it runs after it. */
  hold = mt_stream_hold (blocking);
  fill_ok (x, 0xaa, blocking);
  fill_ok (x, 0xcc, NULL);
  CU_OK (drv ()->cuEventRecord (e, NULL));
  g_assert_cmpint (event_query (e), ==, CUDA_ERROR_NOT_READY);
  mt_stream_release (hold);
  CU_OK (drv ()->cuEventSynchronize (e));
  assert_bytes (x, 0xcc, nonblocking);

  /* Held legacy stream: a blocking stream's later work waits for it. */
  hold = mt_stream_hold (NULL);
  fill_ok (x, 0x11, NULL);
  fill_ok (x, 0x22, blocking);
  CU_OK (drv ()->cuEventRecord (e, blocking));
  g_assert_cmpint (event_query (e), ==, CUDA_ERROR_NOT_READY);
  mt_stream_release (hold);
  CU_OK (drv ()->cuEventSynchronize (e));
  assert_bytes (x, 0x22, nonblocking);

  /* Held non-blocking stream: the legacy stream does not wait for it. */
  hold = mt_stream_hold (nonblocking);
  fill_ok (x, 0x33, nonblocking);
  fill_ok (x, 0x44, NULL);
  CU_OK (drv ()->cuEventRecord (e, NULL));
  CU_OK (drv ()->cuEventSynchronize (e));
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  mt_sync_ok (nonblocking);
  assert_bytes (x, 0x33, NULL);

  CU_OK (drv ()->cuEventDestroy (e));
  mt_close_ok (x, NULL);
  mt_sync_ok (NULL);
  memres_resource_unref (mr);
  stream_destroy (blocking);
  stream_destroy (nonblocking);
}

/* A stream destroyed with work queued: the handle is gone at once, the work still runs. */
static void
test_destroy_with_queued_work (void)
{
  CUstream a, b;
  MemresResource *mr;
  MemresBuffer *x;
  MtStreamHold *hold;
  FakeCudaCounts base, now;
  CUevent e;

  if (!mt_require_stream_holds ())
    return;
  mt_counts_snapshot (&base);
  b = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, b);
  fill_ok (x, 0x11, b);
  mt_sync_ok (b);

  a = stream_new (CU_STREAM_NON_BLOCKING);
  hold = mt_stream_hold (a);
  fill_ok (x, 0xaa, a);
  CU_OK (drv ()->cuEventCreate (&e, CU_EVENT_DISABLE_TIMING));
  CU_OK (drv ()->cuEventRecord (e, a));
  stream_destroy (a);
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.streams, ==, base.streams + 1); /* b only */
      g_assert_cmpint (drv ()->cuStreamQuery (a), ==, CUDA_ERROR_INVALID_HANDLE);
    }
  g_assert_cmpint (event_query (e), ==, CUDA_ERROR_NOT_READY);
  assert_bytes (x, 0x11, b);
  mt_stream_release (hold);
  CU_OK (drv ()->cuEventSynchronize (e));
  assert_bytes (x, 0xaa, b);

  CU_OK (drv ()->cuEventDestroy (e));
  mt_close_ok (x, b);
  mt_sync_ok (b);
  memres_resource_unref (mr);
  stream_destroy (b);
  mt_assert_fake_counts_equal (&base);
}

/* A stream-ordered free runs when the stream reaches it: until then the pool still counts the
 * allocation (fake) and the memory keeps its bytes. */
static void
test_ordered_free (void)
{
  CUstream a;
  MemresResource *mr;
  MemresBuffer *x;
  MtStreamHold *hold;
  FakeCudaCounts before, held, after;

  if (!mt_require_stream_holds ())
    return;
  a = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, a);
  mt_sync_ok (a);
  if (mt_driver_is_fake ())
    mt_fake_get_counts (&before);
  hold = mt_stream_hold (a);
  mt_close_ok (x, a);
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&held);
      g_assert_cmpint (held.pool_allocations, ==, before.pool_allocations);
    }
  g_assert_cmpint (stream_query (a), ==, CUDA_ERROR_NOT_READY);
  mt_stream_release (hold);
  mt_sync_ok (a);
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&after);
      g_assert_cmpint (after.pool_allocations, ==, before.pool_allocations - 1);
    }
  memres_resource_unref (mr);
  stream_destroy (a);
}

static void
host_fn (void *data)
{
  g_atomic_int_inc ((gint *) data);
}

/* Host functions and value writes run in stream order. */
static void
test_host_fn_and_write_value (void)
{
  CUresult (*launch) (CUstream, CUhostFn, void *)
      = (CUresult (*) (CUstream, CUhostFn, void *)) mt_driver_proc ("cuLaunchHostFunc");
  CUresult (*write_value) (CUstream, CUdeviceptr, cuuint32_t, unsigned) = (CUresult (*) (
      CUstream, CUdeviceptr, cuuint32_t, unsigned)) mt_driver_proc ("cuStreamWriteValue32");
  CUstream a;
  MtStreamHold *hold;
  gint calls = 0;
  void *host = NULL;
  CUdeviceptr word;

  if (!mt_require_stream_holds ())
    return;
  g_assert_nonnull (launch);
  g_assert_nonnull (write_value);
  a = stream_new (CU_STREAM_NON_BLOCKING);
  CU_OK (drv ()->cuMemHostAlloc (&host, 4, CU_MEMHOSTALLOC_DEVICEMAP));
  *(volatile guint32 *) host = 0;
  CU_OK (drv ()->cuMemHostGetDevicePointer (&word, host, 0));

  hold = mt_stream_hold (a);
  CU_OK (write_value (a, word, 7, 0));
  CU_OK (launch (a, host_fn, &calls));
  g_usleep (20 * 1000);
  g_assert_cmpint (g_atomic_int_get (&calls), ==, 0);
  g_assert_cmpuint (__atomic_load_n ((guint32 *) host, __ATOMIC_SEQ_CST), ==, 0);
  mt_stream_release (hold);
  mt_sync_ok (a);
  g_assert_cmpint (g_atomic_int_get (&calls), ==, 1);
  g_assert_cmpuint (__atomic_load_n ((guint32 *) host, __ATOMIC_SEQ_CST), ==, 7);

  CU_OK (drv ()->cuMemFreeHost (host));
  stream_destroy (a);
}

typedef struct
{
  MemresResource *mr;
  guint index;
} ThreadData;

/* Each thread holds its own stream, queues a fill behind the hold, reads on another stream what
 * was there before, releases and reads its fill back. */
static gpointer
hold_thread (gpointer data)
{
  ThreadData *t = data;
  CUstream a = stream_new (CU_STREAM_NON_BLOCKING);
  CUstream b = stream_new (CU_STREAM_NON_BLOCKING);
  MemresBuffer *x = mt_alloc_ok (t->mr, 64 * 1024, a);
  guint8 before = (guint8) (t->index * 2 + 1), after = (guint8) (t->index * 2 + 2);
  MtStreamHold *hold;

  fill_ok (x, before, a);
  mt_sync_ok (a);
  hold = mt_stream_hold (a);
  fill_ok (x, after, a);
  assert_bytes (x, before, b);
  mt_stream_release (hold);
  mt_sync_ok (a);
  assert_bytes (x, after, b);
  mt_close_ok (x, a);
  mt_sync_ok (a);
  stream_destroy (a);
  stream_destroy (b);
  return NULL;
}

static void
test_threads (void)
{
  ThreadData data[16];
  GThread *threads[16];
  MemresResource *mr;

  if (!mt_require_stream_holds ())
    return;
  mr = dmr_new ();
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    {
      data[i] = (ThreadData){ mr, i };
      threads[i] = g_thread_new ("hold", hold_thread, &data[i]);
    }
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  memres_resource_unref (mr);
}

/* Fake only: queued work whose memory is gone when it runs makes the stream's error sticky
 * (a real device may fault instead); a fault injected into a queued call queues nothing. */
static void
test_fake_late_errors (void)
{
  CUstream a;
  CUdeviceptr p;
  MtStreamHold *hold;
  MemresResource *mr;
  MemresBuffer *x;

  if (!mt_require_fake ("needs the fake's fault injection") || !mt_require_stream_holds ())
    return;
  a = stream_new (CU_STREAM_NON_BLOCKING);
  CU_OK (drv ()->cuMemAlloc (&p, 4096));
  hold = mt_stream_hold (a);
  CU_OK (drv ()->cuMemsetD8Async (p, 0x5a, 4096, a));
  CU_OK (drv ()->cuMemFree (p)); /* does not wait for a non-blocking stream */
  mt_stream_release (hold);
  g_assert_cmpint (drv ()->cuStreamSynchronize (a), ==, CUDA_ERROR_ILLEGAL_ADDRESS);
  g_assert_cmpint (drv ()->cuStreamQuery (a), ==, CUDA_ERROR_ILLEGAL_ADDRESS);
  stream_destroy (a);

  a = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, a);
  fill_ok (x, 0x11, a);
  hold = mt_stream_hold (a);
  mt_fake_fail_call ("cuMemsetD8Async", 1, CUDA_ERROR_LAUNCH_FAILED);
  {
    g_autoptr (GError) error = NULL;
    g_assert_false (memres_buffer_fill (x, 0x22, 1, a, &error));
    g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_LAUNCH_FAILED);
  }
  mt_stream_release (hold);
  assert_bytes (x, 0x11, a);
  mt_close_ok (x, a);
  mt_sync_ok (a);
  memres_resource_unref (mr);
  stream_destroy (a);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  if (mt_driver_is_fake ())
    mt_fake_set_async (TRUE);

  g_test_add_func ("/streams/hold/release", test_hold_release);
  g_test_add_func ("/streams/hold/unordered-reuse-corrupts", test_unordered_reuse_corrupts);
  g_test_add_func ("/streams/hold/legacy-implicit-sync", test_legacy_implicit_sync);
  g_test_add_func ("/streams/hold/destroy-with-queued-work", test_destroy_with_queued_work);
  g_test_add_func ("/streams/hold/ordered-free", test_ordered_free);
  g_test_add_func ("/streams/hold/host-fn-write-value", test_host_fn_and_write_value);
  g_test_add_func ("/streams/hold/threads", test_threads);
  g_test_add_func ("/streams/fake/late-errors", test_fake_late_errors);
  return g_test_run ();
}

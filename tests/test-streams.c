/* test-streams.c: stream order, on the fake driver's asynchronous mode (suite fake) and the real
 * driver (suite gpu). A stream is held with cuStreamWaitValue32 on page-locked host memory
 * (mt_stream_hold), so that work queued behind the hold waits and an ordering bug between two
 * streams shows as wrong bytes. */
#include "testutil.h"

#include <string.h>

#define SIZE (1024 * 1024)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

static CUstream
stream_new (unsigned flags)
{
  g_autoptr (GError) error = NULL;
  CUstream s = NULL;

  g_assert_true (memres_cuda_ensure_context (0, &error));
  CU_OK (mt_driver ()->cuStreamCreate (&s, flags));
  return s;
}

static void
stream_destroy (CUstream s)
{
  CU_OK (mt_driver ()->cuStreamDestroy (s));
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
  return mt_driver ()->cuStreamQuery (s);
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
  mt_fill_byte_ok (x, 0x11, a);
  mt_sync_ok (a);

  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xaa, a);
  CU_OK (mt_driver ()->cuEventCreate (&after, CU_EVENT_DISABLE_TIMING));
  CU_OK (mt_driver ()->cuEventRecord (after, a));
  g_assert_true (mt_stream_is_held (hold));
  g_assert_cmpint (event_query (after), ==, CUDA_ERROR_NOT_READY);
  g_assert_cmpint (stream_query (a), ==, CUDA_ERROR_NOT_READY);
  /* Stream b runs: it reads what was there before the hold. */
  mt_assert_bytes (x, 0x11, b);
  g_assert_cmpint (event_query (after), ==, CUDA_ERROR_NOT_READY);

  mt_stream_release (hold);
  mt_sync_ok (a);
  g_assert_cmpint (event_query (after), ==, CUDA_SUCCESS);
  g_assert_cmpint (stream_query (a), ==, CUDA_SUCCESS);
  mt_assert_bytes (x, 0xaa, a);

  CU_OK (mt_driver ()->cuEventDestroy (after));
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
  mt_fill_byte_ok (x, 0xaa, a);
  mt_fill_byte_ok (x, 0xbb, b);
  mt_sync_ok (b);
  mt_stream_release (hold);
  mt_sync_ok (a);
  mt_assert_bytes (x, 0xaa, b); /* b's bytes are gone: the bug is visible */

  /* Ordered: b waits for an event recorded on a after a's write. */
  CU_OK (mt_driver ()->cuEventCreate (&e, CU_EVENT_DISABLE_TIMING));
  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xcc, a);
  CU_OK (mt_driver ()->cuEventRecord (e, a));
  CU_OK (mt_driver ()->cuStreamWaitEvent (b, e, 0));
  mt_fill_byte_ok (x, 0xdd, b);
  g_assert_cmpint (stream_query (b), ==, CUDA_ERROR_NOT_READY); /* b waits for a */
  mt_stream_release (hold);
  mt_sync_ok (b);
  mt_assert_bytes (x, 0xdd, b);

  CU_OK (mt_driver ()->cuEventDestroy (e));
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
  CU_OK (mt_driver ()->cuEventCreate (&e, CU_EVENT_DISABLE_TIMING));

  /* Held blocking stream: legacy work queued after it runs after it. */
  hold = mt_stream_hold (blocking);
  mt_fill_byte_ok (x, 0xaa, blocking);
  mt_fill_byte_ok (x, 0xcc, NULL);
  CU_OK (mt_driver ()->cuEventRecord (e, NULL));
  g_assert_cmpint (event_query (e), ==, CUDA_ERROR_NOT_READY);
  mt_stream_release (hold);
  CU_OK (mt_driver ()->cuEventSynchronize (e));
  mt_assert_bytes (x, 0xcc, nonblocking);

  /* Held legacy stream: a blocking stream's later work waits for it. */
  hold = mt_stream_hold (NULL);
  mt_fill_byte_ok (x, 0x11, NULL);
  mt_fill_byte_ok (x, 0x22, blocking);
  CU_OK (mt_driver ()->cuEventRecord (e, blocking));
  g_assert_cmpint (event_query (e), ==, CUDA_ERROR_NOT_READY);
  mt_stream_release (hold);
  CU_OK (mt_driver ()->cuEventSynchronize (e));
  mt_assert_bytes (x, 0x22, nonblocking);

  /* Held non-blocking stream: the legacy stream does not wait for it. */
  hold = mt_stream_hold (nonblocking);
  mt_fill_byte_ok (x, 0x33, nonblocking);
  mt_fill_byte_ok (x, 0x44, NULL);
  CU_OK (mt_driver ()->cuEventRecord (e, NULL));
  CU_OK (mt_driver ()->cuEventSynchronize (e));
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  mt_sync_ok (nonblocking);
  mt_assert_bytes (x, 0x33, NULL);

  CU_OK (mt_driver ()->cuEventDestroy (e));
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
  mt_fill_byte_ok (x, 0x11, b);
  mt_sync_ok (b);

  a = stream_new (CU_STREAM_NON_BLOCKING);
  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xaa, a);
  CU_OK (mt_driver ()->cuEventCreate (&e, CU_EVENT_DISABLE_TIMING));
  CU_OK (mt_driver ()->cuEventRecord (e, a));
  stream_destroy (a);
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.streams, ==, base.streams + 1); /* b only */
      g_assert_cmpint (mt_driver ()->cuStreamQuery (a), ==, CUDA_ERROR_INVALID_HANDLE);
    }
  g_assert_cmpint (event_query (e), ==, CUDA_ERROR_NOT_READY);
  mt_assert_bytes (x, 0x11, b);
  mt_stream_release (hold);
  CU_OK (mt_driver ()->cuEventSynchronize (e));
  mt_assert_bytes (x, 0xaa, b);

  CU_OK (mt_driver ()->cuEventDestroy (e));
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
  CU_OK (mt_driver ()->cuMemHostAlloc (&host, 4, CU_MEMHOSTALLOC_DEVICEMAP));
  *(volatile guint32 *) host = 0;
  CU_OK (mt_driver ()->cuMemHostGetDevicePointer (&word, host, 0));

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

  CU_OK (mt_driver ()->cuMemFreeHost (host));
  stream_destroy (a);
}

typedef struct
{
  MemresResource *mr;
  guint index;
} ThreadData;

/* Each thread holds its own stream, queues a fill behind the hold, reads on another stream what
 * was there before, releases and reads its fill back. The read waits on the host while the
 * hold is on: with more live streams than the device's hardware queues
 * (CUDA_DEVICE_MAX_CONNECTIONS, 32 in the gpu suite) one thread's read stream could share a
 * queue with another thread's held stream, and two such threads would wait for each other. */
#define HOLD_THREADS 8
static gpointer
hold_thread (gpointer data)
{
  ThreadData *t = data;
  CUstream a = stream_new (CU_STREAM_NON_BLOCKING);
  CUstream b = stream_new (CU_STREAM_NON_BLOCKING);
  MemresBuffer *x = mt_alloc_ok (t->mr, 64 * 1024, a);
  guint8 before = (guint8) (t->index * 2 + 1), after = (guint8) (t->index * 2 + 2);
  MtStreamHold *hold;

  mt_fill_byte_ok (x, before, a);
  mt_sync_ok (a);
  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, after, a);
  mt_assert_bytes (x, before, b);
  mt_stream_release (hold);
  mt_sync_ok (a);
  mt_assert_bytes (x, after, b);
  mt_close_ok (x, a);
  mt_sync_ok (a);
  stream_destroy (a);
  stream_destroy (b);
  return NULL;
}

static void
test_threads (void)
{
  ThreadData data[HOLD_THREADS];
  GThread *threads[HOLD_THREADS];
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
  CU_OK (mt_driver ()->cuMemAlloc (&p, 4096));
  hold = mt_stream_hold (a);
  CU_OK (mt_driver ()->cuMemsetD8Async (p, 0x5a, 4096, a));
  CU_OK (mt_driver ()->cuMemFree (p)); /* does not wait for a non-blocking stream */
  mt_stream_release (hold);
  g_assert_cmpint (mt_driver ()->cuStreamSynchronize (a), ==, CUDA_ERROR_ILLEGAL_ADDRESS);
  g_assert_cmpint (mt_driver ()->cuStreamQuery (a), ==, CUDA_ERROR_ILLEGAL_ADDRESS);
  stream_destroy (a);

  a = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, a);
  mt_fill_byte_ok (x, 0x11, a);
  hold = mt_stream_hold (a);
  mt_fake_fail_call ("cuMemsetD8Async", 1, CUDA_ERROR_LAUNCH_FAILED);
  {
    g_autoptr (GError) error = NULL;
    g_assert_false (memres_buffer_fill (x, 0x22, 1, a, &error));
    g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_LAUNCH_FAILED);
  }
  mt_stream_release (hold);
  mt_assert_bytes (x, 0x11, a);
  mt_close_ok (x, a);
  mt_sync_ok (a);
  memres_resource_unref (mr);
  stream_destroy (a);
}

/* --- closing on another stream (issue 15) --------------------------------------------------- */

/* A buffer allocated and written on a, closed on b: by default b waits for a's work before the
 * free, so memory b allocates next cannot receive a's late write. */
static void
test_close_cross_stream_ordered (void)
{
  CUstream a, b;
  MemresResource *mr;
  MemresBuffer *x, *y;
  MtStreamHold *hold;
  FakeCudaCounts base;

  if (!mt_require_stream_holds ())
    return;
  mt_counts_snapshot (&base);
  a = stream_new (CU_STREAM_NON_BLOCKING);
  b = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, a);
  mt_sync_ok (a);

  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xaa, a);
  mt_close_ok (x, b); /* b now waits for a */
  y = mt_alloc_ok (mr, SIZE, b);
  mt_fill_byte_ok (y, 0xbb, b);
  g_assert_cmpint (stream_query (b), ==, CUDA_ERROR_NOT_READY);
  mt_stream_release (hold);
  mt_sync_ok (b);
  mt_sync_ok (a);
  mt_assert_bytes (y, 0xbb, b);

  mt_close_ok (y, b);
  mt_sync_ok (b);
  memres_resource_unref (mr);
  stream_destroy (a);
  stream_destroy (b);
  mt_assert_fake_counts_equal (&base);
}

/* MEMRES_CLOSE_CALLER_ORDERED: no event. A caller that did not order b after a then gets what it
 * asked for: the block comes back on b at once and a's late write lands over b's bytes. */
static void
test_close_caller_ordered (void)
{
  g_autoptr (GError) error = NULL;
  CUstream a, b;
  MemresResource *mr;
  MemresBuffer *x, *y;
  MtStreamHold *hold;
  guint64 address;

  if (!mt_require_stream_holds ())
    return;
  a = stream_new (CU_STREAM_NON_BLOCKING);
  b = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  x = mt_alloc_ok (mr, SIZE, a);
  address = memres_buffer_get_address (x);
  mt_sync_ok (a);

  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xaa, a);
  g_assert_true (memres_buffer_close_full (x, b, MEMRES_CLOSE_CALLER_ORDERED, &error));
  g_assert_no_error (error);
  memres_buffer_unref (x);
  mt_sync_ok (b); /* b did not wait: the free is done */
  y = mt_alloc_ok (mr, SIZE, b);
  mt_fill_byte_ok (y, 0xbb, b);
  mt_sync_ok (b);
  mt_stream_release (hold);
  mt_sync_ok (a);
  if (memres_buffer_get_address (y) == address)
    mt_assert_bytes (y, 0xaa, b); /* the unordered reuse, as documented */
  else if (mt_driver_is_fake ())
    g_test_fail_printf ("the fake's pool did not hand the freed block out again");
  else
    g_test_message ("the driver did not reuse the block on b: nothing to see");

  mt_close_ok (y, b);
  mt_sync_ok (b);
  memres_resource_unref (mr);
  stream_destroy (a);
  stream_destroy (b);
}

/* What a close costs in driver calls: on the buffer's own stream (or with NULL) one free; on
 * another stream an event too; with MEMRES_CLOSE_CALLER_ORDERED one free again. */
static void
test_close_calls (void)
{
  g_autoptr (GError) error = NULL;
  CUstream a, b;
  MemresResource *mr;
  MemresBuffer *x;
  char *trace;

  if (!mt_require_fake ("counts the driver calls of a close") || !mt_require_devices (1))
    return;
  a = stream_new (CU_STREAM_NON_BLOCKING);
  b = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();

  x = mt_alloc_ok (mr, SIZE, a);
  mt_fake_trace_begin ();
  mt_close_ok (x, a);
  trace = mt_fake_trace_end_string ();
  g_assert_cmpstr (trace, ==, "cuMemFreeAsync");
  g_free (trace);

  x = mt_alloc_ok (mr, SIZE, a);
  mt_fake_trace_begin ();
  mt_close_ok (x, NULL);
  trace = mt_fake_trace_end_string ();
  g_assert_cmpstr (trace, ==, "cuMemFreeAsync");
  g_free (trace);

  /* the first cross-stream close of the resource makes the event it keeps */
  x = mt_alloc_ok (mr, SIZE, a);
  mt_fake_trace_begin ();
  mt_close_ok (x, b);
  trace = mt_fake_trace_end_string ();
  g_test_message ("first cross-stream close: %s", trace);
  g_assert_true (
      g_str_has_suffix (trace, "cuEventCreate cuEventRecord cuStreamWaitEvent cuMemFreeAsync"));
  g_free (trace);
  for (int i = 0; i < 2; i++)
    {
      x = mt_alloc_ok (mr, SIZE, a);
      mt_fake_trace_begin ();
      mt_close_ok (x, b);
      trace = mt_fake_trace_end_string ();
      g_test_message ("cross-stream close: %s", trace);
      g_assert_true (g_str_has_suffix (trace, "cuEventRecord cuStreamWaitEvent cuMemFreeAsync"));
      g_assert_null (strstr (trace, "cuEventCreate"));
      g_assert_null (strstr (trace, "cuEventDestroy"));
      g_free (trace);
    }

  x = mt_alloc_ok (mr, SIZE, a);
  mt_fake_trace_begin ();
  g_assert_true (memres_buffer_close_full (x, b, MEMRES_CLOSE_CALLER_ORDERED, &error));
  trace = mt_fake_trace_end_string ();
  g_assert_no_error (error);
  g_assert_cmpstr (trace, ==, "cuMemFreeAsync");
  g_free (trace);
  memres_buffer_unref (x);

  mt_sync_ok (a);
  mt_sync_ok (b);
  memres_resource_unref (mr);
  stream_destroy (a);
  stream_destroy (b);
}

/* Asserts that @buf is still open at @address with @size bytes of @byte (read on @stream). */
static void
assert_still_open (MemresBuffer *buf, guint64 address, guint8 byte, MemresStream stream)
{
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, SIZE);
  g_assert_nonnull (memres_buffer_get_resource (buf));
  mt_assert_bytes (buf, byte, stream);
}

/* Every driver call of a cross-stream close fails in turn: either the close copes (an event that
 * cannot be recorded: it waits for the device instead) and succeeds, or it fails with the
 * driver's code and leaves the buffer open, and a second close succeeds. Nothing leaks. */
static void
test_close_cross_stream_faults (void)
{
  static const char *const entries[]
      = { "cuStreamIsCapturing", "cuStreamGetCtx",    "cuCtxGetCurrent", "cuEventCreate",
          "cuEventRecord",       "cuStreamWaitEvent", "cuMemFreeAsync" };
  CUstream a, b;
  MemresResource *mr, *fresh;
  FakeCudaCounts base;

  if (!mt_require_fake ("injects faults") || !mt_require_devices (1))
    return;
  a = stream_new (CU_STREAM_NON_BLOCKING);
  b = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();
  mt_close_ok (mt_alloc_ok (mr, SIZE, a), b); /* mr keeps an event from now on */
  mt_sync_ok (b);
  fresh = dmr_new (); /* keeps none yet: its close creates one */
  mt_counts_snapshot (&base);
  for (guint i = 0; i < G_N_ELEMENTS (entries); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *x
          = mt_alloc_ok (g_str_equal (entries[i], "cuEventCreate") ? fresh : mr, SIZE, a);
      guint64 address = memres_buffer_get_address (x);
      long calls = mt_fake_call_count (entries[i]);

      mt_fill_byte_ok (x, (guint8) (0x10 + i), a);
      mt_fake_fail_call (entries[i], 1, CUDA_ERROR_LAUNCH_FAILED);
      if (memres_buffer_close (x, b, &error))
        {
          g_test_message ("%s failing: the close copes", entries[i]);
          g_assert_no_error (error);
          g_assert_true (memres_buffer_is_closed (x));
          g_assert_true (g_str_equal (entries[i], "cuStreamIsCapturing")
                         || g_str_equal (entries[i], "cuStreamGetCtx")
                         || g_str_equal (entries[i], "cuCtxGetCurrent")
                         || g_str_equal (entries[i], "cuEventCreate")
                         || g_str_equal (entries[i], "cuEventRecord"));
        }
      else
        {
          g_test_message ("%s failing: %s", entries[i], error->message);
          g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_LAUNCH_FAILED);
          g_assert_nonnull (strstr (error->message, entries[i]));
          assert_still_open (x, address, (guint8) (0x10 + i), a);
          mt_close_ok (g_steal_pointer (&x), b);
        }
      g_assert_cmpint (mt_fake_call_count (entries[i]), >, calls); /* the call was made */
      mt_fake_reset_faults ();
      if (x != NULL)
        memres_buffer_unref (x);
      mt_sync_ok (a);
      mt_sync_ok (b);
      mt_assert_fake_counts_equal (&base);
    }
  memres_resource_unref (fresh);
  memres_resource_unref (mr);
  stream_destroy (a);
  stream_destroy (b);
}

/* A close on a destroyed stream fails and loses nothing: the buffer stays open with its bytes
 * and closes on a live stream. Likewise when the buffer's own (deallocation) stream was
 * destroyed: a close there fails, a close on a live stream works (it waits for the device, as no
 * event can be recorded on the destroyed stream). Fake only: the real driver does not promise
 * an error for a destroyed stream's handle (the H200's 580 driver crashed here), so this is the
 * contract memres keeps when the driver reports one. */
static void
test_close_destroyed_stream (void)
{
  CUstream a, gone;
  MemresResource *mr;
  MemresBuffer *x;
  guint64 address;
  FakeCudaCounts base;

  if (!mt_require_fake ("a destroyed stream's handle is undefined behaviour on the real driver")
      || !mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  a = stream_new (CU_STREAM_NON_BLOCKING);
  mr = dmr_new ();

  /* closing on a destroyed stream */
  x = mt_alloc_ok (mr, SIZE, a);
  address = memres_buffer_get_address (x);
  mt_fill_byte_ok (x, 0x5a, a);
  mt_sync_ok (a);
  gone = stream_new (CU_STREAM_NON_BLOCKING);
  stream_destroy (gone);
  for (int attempt = 0; attempt < 2; attempt++)
    {
      g_autoptr (GError) error = NULL;

      g_assert_false (memres_buffer_close (x, gone, &error));
      g_assert_nonnull (error);
      g_test_message ("close on a destroyed stream: %s", error->message);
      g_assert_true (error->domain == MEMRES_CUDA_ERROR);
      if (mt_driver_is_fake ())
        g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_HANDLE);
      assert_still_open (x, address, 0x5a, a);
    }
  mt_close_ok (x, a);
  mt_sync_ok (a);

  /* the buffer's own stream destroyed */
  gone = stream_new (CU_STREAM_NON_BLOCKING);
  x = mt_alloc_ok (mr, SIZE, gone);
  address = memres_buffer_get_address (x);
  mt_fill_byte_ok (x, 0x6b, gone);
  mt_sync_ok (gone);
  stream_destroy (gone);
  {
    g_autoptr (GError) error = NULL;

    g_assert_false (memres_buffer_close (x, NULL, &error)); /* NULL: the destroyed stream */
    g_assert_nonnull (error);
    g_test_message ("close on the buffer's destroyed stream: %s", error->message);
    g_assert_true (error->domain == MEMRES_CUDA_ERROR);
    if (mt_driver_is_fake ())
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_HANDLE);
    assert_still_open (x, address, 0x6b, a);
  }
  mt_close_ok (x, a);
  mt_sync_ok (a);

  memres_resource_unref (mr);
  stream_destroy (a);
  mt_assert_fake_counts_equal (&base);
}

/* The last unref of a buffer whose close fails (its stream was destroyed) frees it all the same,
 * after waiting for the device, with a warning. */
static void
test_unref_destroyed_stream (void)
{
  if (!mt_require_fake ("counts the allocations left") || !mt_require_devices (1))
    return;
  if (g_test_subprocess ())
    {
      FakeCudaCounts base, now;
      MemresResource *mr = dmr_new ();
      CUstream gone = stream_new (CU_STREAM_NON_BLOCKING);
      MemresBuffer *x = mt_alloc_ok (mr, SIZE, gone);

      mt_sync_ok (gone);
      mt_fake_get_counts (&base);
      stream_destroy (gone);
      g_log_set_always_fatal (G_LOG_FATAL_MASK); /* the warning is expected */
      memres_buffer_unref (x);
      mt_fake_wait_idle ();
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.pool_allocations, ==, base.pool_allocations - 1);
      memres_resource_unref (mr);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*Closing a buffer of 1048576 bytes failed*cuMemFreeAsync*");
  g_test_trap_assert_stderr_unmatched ("*could not be freed*");
}

/* --- clean under the driver's checkers (issue 15) ------------------------------------------- */

static gpointer
alloc_without_context (gpointer data)
{
  MemresResource *mr = data;
  gboolean fake = mt_driver_is_fake ();
  long failed = fake ? mt_fake_failed_call_count () : 0;
  long allocs = fake ? mt_fake_call_count ("cuMemAllocFromPoolAsync") : 0;
  CUcontext ctx = (CUcontext) 1;

  CU_OK (mt_driver ()->cuCtxGetCurrent (&ctx));
  g_assert_null (ctx); /* a new thread has no current context */
  for (int i = 0; i < 3; i++)
    {
      MemresBuffer *x = mt_alloc_ok (mr, 4096, NULL);
      mt_fill_byte_ok (x, 0x3c, NULL);
      mt_assert_bytes (x, 0x3c, NULL);
      mt_close_ok (x, NULL);
    }
  mt_sync_ok (NULL);
  if (fake)
    {
      g_assert_cmpint (mt_fake_call_count ("cuMemAllocFromPoolAsync"), ==, allocs + 3);
      g_assert_cmpint (mt_fake_failed_call_count (), ==, failed);
    }
  return NULL;
}

/* Allocating from a thread without a current context makes no driver call that fails (the pool
 * used to try first and retry on CUDA_ERROR_INVALID_CONTEXT). The fake counts failed calls; on
 * the GPU, scripts/gpu-sanitize runs this under compute-sanitizer, which reports any. */
static void
test_alloc_no_failing_call (void)
{
  MemresResource *mr;

  if (!mt_require_devices (1))
    return;
  mr = dmr_new ();
  g_thread_join (g_thread_new ("no-context", alloc_without_context, mr));
  memres_resource_unref (mr);
}

/* An import whose second step fails is undone on the caller's stream: held, the unmap waits. */
static void
test_failed_import_undone_on_stream (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresResource *exporter, *importer;
  MemresBuffer *buf;
  MemresBufferDescriptor desc;
  FakeCudaCounts base, now;
  MtStreamHold *hold;
  CUstream s;

  if (!mt_require_fake ("injects a fault") || !mt_require_stream_holds ())
    return;
  exporter = mt_new_ok ("ipc");
  handle = memres_resource_export_handle (exporter, &error);
  g_assert_no_error (error);
  importer = memres_resource_import_handle (handle, &error);
  g_assert_no_error (error);
  buf = mt_alloc_ok (exporter, 4096, NULL);
  g_assert_true (memres_buffer_export (buf, &desc, &error));
  mt_sync_ok (NULL);
  s = stream_new (CU_STREAM_NON_BLOCKING);
  mt_fake_get_counts (&base);

  hold = mt_stream_hold (s);
  mt_fake_fail_call ("cuPointerGetAttributes", 1, CUDA_ERROR_LAUNCH_FAILED);
  g_assert_null (memres_buffer_import (importer, desc.bytes, sizeof desc.bytes, s, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_LAUNCH_FAILED);
  mt_fake_reset_faults ();
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.pool_allocations, ==, base.pool_allocations + 1); /* queued on s */
  mt_stream_release (hold);
  mt_sync_ok (s);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.pool_allocations, ==, base.pool_allocations);

  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  memres_resource_unref (importer);
  memres_resource_unref (exporter);
  stream_destroy (s);
}

/* --- the core's wait before freeing memory that is not stream-ordered --------------------- */

/* A base kind of device-accessible memory (host memory standing in for it): "waitcheck" is not
 * stream-ordered, "waitcheck_so" is. Its deallocate records how many cuStreamSynchronize calls
 * the driver had seen when it ran. */
static long frees, syncs_at_free;

static gboolean
waitcheck_init (MemresResource *mr G_GNUC_UNUSED, const MemresOptions *options G_GNUC_UNUSED,
                GError **error G_GNUC_UNUSED)
{
  return TRUE;
}

static void
waitcheck_finalize (MemresResource *mr G_GNUC_UNUSED)
{
}

static gboolean
waitcheck_allocate (MemresResource *mr G_GNUC_UNUSED, gsize size, MemresStream stream G_GNUC_UNUSED,
                    MemresAllocation *alloc, GError **error G_GNUC_UNUSED)
{
  alloc->address = (guint64) (guintptr) g_malloc (size);
  alloc->size = size;
  return TRUE;
}

static gboolean
waitcheck_deallocate (MemresResource *mr G_GNUC_UNUSED, MemresAllocation *alloc,
                      MemresStream stream G_GNUC_UNUSED, GError **error G_GNUC_UNUSED)
{
  syncs_at_free = mt_fake_call_count ("cuStreamSynchronize");
  frees++;
  g_free ((gpointer) (guintptr) alloc->address);
  return TRUE;
}

static void
waitcheck_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = 0;
  info->flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE;
  if (g_str_equal (memres_resource_get_kind_name (mr), "waitcheck_so"))
    info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
}

static void
register_waitcheck (void)
{
  static const MemresResourceOps ops = {
    .version = MEMRES_RESOURCE_OPS_VERSION,
    .init = waitcheck_init,
    .finalize = waitcheck_finalize,
    .allocate = waitcheck_allocate,
    .deallocate = waitcheck_deallocate,
    .query = waitcheck_query,
  };
  static const char *const names[] = { "waitcheck", "waitcheck_so" };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      MemresKindInfo info = {
        .struct_size = sizeof (MemresKindInfo),
        .name = names[i],
        .description = "test: device-accessible memory, freed at once or in stream order",
        .ops = &ops,
      };
      g_autoptr (GError) error = NULL;

      g_assert_true (memres_registry_register_kind (&info, &error));
      g_assert_no_error (error);
    }
}

/* The core waits for the close's stream before the deallocate slot of a kind whose memory is not
 * stream-ordered, on the stream's own (explicit) or the buffer's deallocation stream, and not for
 * a stream-ordered kind, an adaptor's layer or host memory. When the wait fails, the slot is not
 * called and the buffer stays open (the one fallback); a later close frees it. */
static void
test_close_waits_not_stream_ordered (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) ordered = NULL;
  g_autoptr (MemresResource) stacked = NULL;
  g_autoptr (MemresResource) host = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *trace = NULL;
  MemresBuffer *buf;
  CUstream s;
  long before;

  if (!mt_require_fake ("counts and fails cuStreamSynchronize"))
    return;
  register_waitcheck ();
  s = stream_new (CU_STREAM_NON_BLOCKING);
  mr = mt_new_ok ("waitcheck");
  g_assert_true (memres_resource_get_flags (mr) == MEMRES_MEMORY_DEVICE_ACCESSIBLE);

  /* on the deallocation stream and on the legacy stream: one wait each, before the free */
  for (int i = 0; i < 2; i++)
    {
      MemresStream on = i == 0 ? (MemresStream) s : MEMRES_STREAM_LEGACY;

      buf = mt_alloc_ok (mr, 4096, (MemresStream) s);
      before = mt_fake_call_count ("cuStreamSynchronize");
      mt_close_ok (buf, on);
      g_assert_cmpint (syncs_at_free, ==, before + 1);
      g_assert_cmpint (mt_fake_call_count ("cuStreamSynchronize"), ==, before + 1);
    }

  /* the wait fails: the slot is not called, the buffer stays open with its memory */
  buf = mt_alloc_ok (mr, 4096, (MemresStream) s);
  before = frees;
  mt_fake_fail_call ("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_assert_nonnull (strstr (error->message, "cuStreamSynchronize"));
  g_assert_nonnull (strstr (error->message, "waitcheck"));
  g_assert_cmpint (frees, ==, before);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 4096);
  mt_close_ok (buf, NULL);
  g_assert_cmpint (frees, ==, before + 1);

  /* the driver shutting down at process exit (CUDA_ERROR_DEINITIALIZED): no work runs any more,
   * the free goes ahead and the close succeeds */
  g_clear_error (&error);
  buf = mt_alloc_ok (mr, 4096, (MemresStream) s);
  before = frees;
  mt_fake_fail_call ("cuStreamSynchronize", 1, CUDA_ERROR_DEINITIALIZED);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_no_error (error);
  g_assert_cmpint (frees, ==, before + 1);
  g_assert_true (memres_buffer_is_closed (buf));
  memres_buffer_unref (buf);

  /* through an adaptor: one wait, the upstream's */
  stacked = mt_new_ok ("stats>limit:max=1GiB>waitcheck");
  buf = mt_alloc_ok (stacked, 4096, (MemresStream) s);
  before = mt_fake_call_count ("cuStreamSynchronize");
  mt_close_ok (buf, NULL);
  g_assert_cmpint (syncs_at_free, ==, before + 1);
  g_assert_cmpint (mt_fake_call_count ("cuStreamSynchronize"), ==, before + 1);

  /* stream-ordered memory is freed in the stream's order: no wait */
  ordered = mt_new_ok ("waitcheck_so");
  buf = mt_alloc_ok (ordered, 4096, (MemresStream) s);
  before = mt_fake_call_count ("cuStreamSynchronize");
  mt_close_ok (buf, NULL);
  g_assert_cmpint (syncs_at_free, ==, before);

  /* host memory: no driver call at all */
  host = mt_new_ok ("host");
  mt_fake_trace_begin ();
  buf = mt_alloc_ok (host, 4096, (MemresStream) s);
  mt_close_ok (buf, NULL);
  trace = mt_fake_trace_end_string ();
  g_assert_cmpstr (trace, ==, "");
  stream_destroy (s);
}

/* memres_stream_synchronize() of a default stream on a thread with no current context: the
 * legacy stream's and the per-thread default stream's (RMM's cuda_stream_per_thread) alike, in
 * device 0's primary context made current first (the per-thread one failed with
 * CUDA_ERROR_INVALID_CONTEXT) */
static gpointer
sync_default_streams (gpointer data)
{
  const MemresStream streams[]
      = { (MemresStream) CU_STREAM_PER_THREAD, NULL, MEMRES_STREAM_LEGACY };

  for (guint i = 0; i < G_N_ELEMENTS (streams); i++)
    {
      g_autoptr (GError) error = NULL;
      CUcontext ctx = NULL;

      CU_OK (mt_driver ()->cuCtxSetCurrent (NULL));
      g_assert_true (memres_stream_synchronize (streams[i], &error));
      g_assert_no_error (error);
      CU_OK (mt_driver ()->cuCtxGetCurrent (&ctx));
      g_assert_nonnull (ctx);
    }
  return NULL;
}

static void
test_sync_default_streams_fresh_thread (void)
{
  if (!mt_require_devices (1))
    return;
  g_thread_join (g_thread_new ("fresh", sync_default_streams, NULL));
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  if (mt_driver_is_fake ())
    mt_fake_set_async (TRUE);

  g_test_add_func ("/streams/hold/release", test_hold_release);
  g_test_add_func ("/streams/sync/default-streams-fresh-thread",
                   test_sync_default_streams_fresh_thread);
  g_test_add_func ("/streams/hold/unordered-reuse-corrupts", test_unordered_reuse_corrupts);
  g_test_add_func ("/streams/hold/legacy-implicit-sync", test_legacy_implicit_sync);
  g_test_add_func ("/streams/hold/destroy-with-queued-work", test_destroy_with_queued_work);
  g_test_add_func ("/streams/hold/ordered-free", test_ordered_free);
  g_test_add_func ("/streams/hold/host-fn-write-value", test_host_fn_and_write_value);
  g_test_add_func ("/streams/hold/threads", test_threads);
  g_test_add_func ("/streams/fake/late-errors", test_fake_late_errors);
  g_test_add_func ("/streams/close/cross-stream-ordered", test_close_cross_stream_ordered);
  g_test_add_func ("/streams/close/caller-ordered", test_close_caller_ordered);
  g_test_add_func ("/streams/close/driver-calls", test_close_calls);
  g_test_add_func ("/streams/close/cross-stream-faults", test_close_cross_stream_faults);
  g_test_add_func ("/streams/close/unref-destroyed-stream", test_unref_destroyed_stream);
  g_test_add_func ("/streams/close/waits-not-stream-ordered", test_close_waits_not_stream_ordered);
  g_test_add_func ("/streams/checkers/alloc-no-failing-call", test_alloc_no_failing_call);
  g_test_add_func ("/streams/checkers/failed-import-undone-on-stream",
                   test_failed_import_undone_on_stream);
  /* Last (a group of its own): a destroyed stream handle given to the real driver. */
  g_test_add_func ("/streams/zz-destroyed/close", test_close_destroyed_stream);
  return g_test_run ();
}

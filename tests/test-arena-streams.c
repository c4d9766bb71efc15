/* test-arena-streams.c: the `arena` kind's reaping by event under stream lifetimes a user gets
 * wrong or does not think of (suite fake, and gpu): a buffer closed on a stream that is destroyed
 * while its work is still queued, before the freed range is wanted on another stream (the event
 * recorded on the gone stream still answers, the range is not lent early and is reaped once the
 * work is done); a buffer closed on the legacy default stream, by either of its names (NULL and
 * MEMRES_STREAM_LEGACY), held back from a non-blocking stream and reused at once on the legacy
 * stream; closes on the legacy stream sharing one event, none of their ranges reused early on
 * another stream; a close on a destroyed stream refused with the driver's error, the buffer still
 * open and its bytes intact. */
#include "testutil.h"

#include "arena-check.h"

#define MiB ((gsize) 1 << 20)

/* ARENA_CLOSES_PER_EVENT of plugins/arena/arena-private.h */
#define ARENA_CLOSES_PER_EVENT_TEST 16

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

/* A stream destroyed while its work waits behind a hold: x's range, tagged with it, is not
 * lent to stream b before that work is done (its fill would land in b's buffer), and once the
 * work is done its event (recorded on the destroyed stream) settles it: the next allocation on b
 * that would create memory takes x's granules instead. */
static void
test_destroyed_before_reuse (void)
{
  ArenaStreams t;
  MemresBuffer *y, *z;
  MtStreamHold *hold;
  guint64 at, reserved;

  g_test_summary ("a range freed on a stream destroyed with its work queued is neither reused "
                  "early on another stream nor lost");
  if (!arena_streams_begin (&t, FALSE))
    return;
  hold = arena_streams_close_held (&t, 4 * MiB, &at);
  /* the handle goes now; the fill and the close's event still wait behind the hold */
  CU_OK (mt_driver ()->cuStreamDestroy (t.a));
  t.a = NULL;
  y = mt_alloc_ok (t.mr, 4 * MiB, t.b);
  g_assert_cmpuint (memres_buffer_get_address (y), !=, at);
  g_assert_cmpuint (counter (t.mr, "granules_lent"), ==, 0);
  mt_fill_byte_ok (y, 0xbb, t.b);
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, t.b);
  /* x's range settles by its event: no new memory for z */
  reserved = stats_ok (t.mr).reserved_current;
  z = mt_alloc_ok (t.mr, 4 * MiB, t.b);
  g_assert_cmpuint (memres_buffer_get_address (z), ==, at);
  g_assert_cmpuint (stats_ok (t.mr).reserved_current, ==, reserved);
  mt_fill_byte_ok (z, 0xcc, t.b);
  mt_assert_bytes (z, 0xcc, t.b);
  mt_assert_bytes (y, 0xbb, t.b);
  mt_close_ok (y, t.b);
  mt_close_ok (z, t.b);
  arena_streams_end (&t);
}

/* A buffer closed on the legacy default stream (NULL) with its work held back: a non-blocking
 * stream does not get its range; the legacy stream by its other name (MEMRES_STREAM_LEGACY) does,
 * at once (its order puts the reuse after the close); every byte as written. */
static void
test_legacy_close (void)
{
  ArenaStreams t;
  MemresBuffer *y, *z;
  MtStreamHold *hold;
  guint64 at;

  g_test_summary ("a buffer closed on the legacy stream: not reused by a non-blocking stream "
                  "before its work is done, reused at once on the legacy stream by either name");
  if (!arena_streams_begin (&t, TRUE))
    return;
  hold = arena_streams_close_held (&t, 4 * MiB, &at);
  y = mt_alloc_ok (t.mr, 4 * MiB, t.b);
  g_assert_cmpuint (memres_buffer_get_address (y), !=, at);
  mt_fill_byte_ok (y, 0xbb, t.b);
  z = mt_alloc_ok (t.mr, 4 * MiB, MEMRES_STREAM_LEGACY);
  g_assert_cmpuint (memres_buffer_get_address (z), ==, at);
  mt_fill_byte_ok (z, 0xcc, MEMRES_STREAM_LEGACY);
  mt_assert_bytes (y, 0xbb, t.b);
  mt_stream_release (hold);
  mt_assert_bytes (z, 0xcc, NULL);
  mt_assert_bytes (y, 0xbb, t.b);
  mt_close_ok (y, t.b);
  mt_close_ok (z, MEMRES_STREAM_LEGACY);
  arena_streams_end (&t);
}

/* Closes on the legacy stream that share one event (arena-events.c: recorded at the 16th close,
 * or when a decision needs it): @n buffers of @size bytes allocated on the legacy stream, then,
 * with it held, each filled there (work queued between the closes) and closed there; stream b
 * then allocates as many, and gets none of their bytes before the legacy stream's work is done
 * (its buffers' bytes are b's after the release, the late fills having landed in the freed
 * ranges), and once it is done, b reuses the freed ranges without new memory. On the fake: the
 * first 15 closes record no event (the 16th records one, arena-events.c). */
static void
legacy_batch_run (const char *spec, guint n, gsize size, long records_expected)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree MemresBuffer **x = g_new0 (MemresBuffer *, n);
  g_autofree MemresBuffer **y = g_new0 (MemresBuffer *, n);
  g_autofree guint64 *at = g_new0 (guint64, n);
  gboolean fake = mt_driver_is_fake ();
  MtStreamHold *hold;
  guint64 reserved;
  long records = 0;
  MemresBuffer *z;
  CUstream b;

  if (!mt_hazard_begin ())
    return;
  if (fake)
    mt_counts_snapshot (&base);
  b = mt_stream_new_on (0);
  mr = mt_new_ok (spec);
  for (guint i = 0; i < n; i++)
    {
      x[i] = mt_alloc_ok (mr, size, NULL);
      at[i] = memres_buffer_get_address (x[i]);
    }
  hold = mt_stream_hold (NULL);
  if (fake)
    records = mt_fake_call_count ("cuEventRecord");
  for (guint i = 0; i < n; i++)
    {
      mt_fill_byte_ok (x[i], (guint8) (0x10 + i), NULL);
      mt_close_ok (x[i], NULL);
      /* the first 15 share one event, not recorded yet (unless the bytes waiting for it reach
       * event_bytes first) */
      if (fake && records_expected == n / ARENA_CLOSES_PER_EVENT_TEST
          && i + 1 < ARENA_CLOSES_PER_EVENT_TEST)
        g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records);
    }
  if (fake)
    g_assert_cmpint (mt_fake_call_count ("cuEventRecord") - records, ==, records_expected);
  for (guint i = 0; i < n; i++)
    {
      guint64 a;

      y[i] = mt_alloc_ok (mr, size, b);
      a = memres_buffer_get_address (y[i]);
      for (guint j = 0; j < n; j++)
        g_assert_true (a + size <= at[j] || at[j] + size <= a);
      mt_fill_byte_ok (y[i], 0xbb, b);
    }
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  for (guint i = 0; i < n; i++)
    mt_assert_bytes (y[i], 0xbb, b);
  /* the legacy stream past the closes: their ranges settle, b reuses them */
  reserved = stats_ok (mr).reserved_current;
  z = mt_alloc_ok (mr, size, b);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, reserved);
  mt_fill_byte_ok (z, 0xcc, b);
  mt_assert_bytes (z, 0xcc, b);
  mt_close_ok (z, b);
  for (guint i = 0; i < n; i++)
    mt_close_ok (y[i], b);
  mt_sync_ok (b);
  mt_sync_ok (NULL);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  CU_OK (mt_driver ()->cuStreamDestroy (b));
  if (fake)
    mt_assert_fake_counts_equal (&base);
  mt_hazard_end ();
}

static void
test_legacy_batch (void)
{
  g_test_summary ("closes on the legacy stream sharing one event: another stream gets none of "
                  "their ranges before the legacy stream's work is done, and all of them after");
  /* one event for each 16 closes (their ranges, merged, wait for less than 64 MiB) */
  legacy_batch_run ("arena", 5, 4 * MiB, 0);
}

static void
test_legacy_batch_long (void)
{
  g_test_summary ("20 closes on the legacy stream (an event recorded at the 16th, the last four "
                  "sharing one recorded when another stream needs it): none reused early");
  legacy_batch_run ("arena", 20, 1 * MiB, 1);
}

static void
test_legacy_batch_bytes (void)
{
  g_test_summary ("20 closes of 8 MiB on the legacy stream: by default an event once 64 MiB of "
                  "merged free ranges wait for one (at the 8th close, then at every close, each "
                  "joining the recorded ranges before it); with event_bytes=0 only at the 16th, "
                  "as for small closes; none reused early either way");
  legacy_batch_run ("arena", 20, 8 * MiB, 13);
  legacy_batch_run ("arena:event_bytes=0", 20, 8 * MiB, 1);
}

/* event_bytes at its edges: 1 records the shared event at every large close (each one frees at
 * least a byte), the largest size never (as 0: only at the 16th close), place=stable alike; bad
 * values are refused naming the option. */
static void
test_legacy_batch_bytes_edges (void)
{
  g_test_summary ("event_bytes=1 records at every close, event_bytes=16EiB-1 as 0; bad values "
                  "refused");
  legacy_batch_run ("arena:event_bytes=1", 20, 8 * MiB, 20);
  legacy_batch_run ("arena:event_bytes=18446744073709551615", 20, 8 * MiB, 1);
  legacy_batch_run ("arena:place=stable,event_bytes=1", 20, 8 * MiB, 20);
  legacy_batch_run ("arena:place=stable,event_bytes=0", 20, 8 * MiB, 1);
  mt_new_fails ("arena:event_bytes=-1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "event_bytes");
  mt_new_fails ("arena:event_bytes=lots", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "event_bytes");
  mt_new_fails ("arena:event_bytes=17EiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "event_bytes");
  mt_new_fails ("arena:event_bytes=", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "event_bytes");
}

/* A close on a stream already destroyed: the driver's error (the event cannot be recorded on
 * it), the buffer still open with its bytes, closed afterwards on a live stream; nothing leaks. */
static void
test_close_on_destroyed (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  gboolean fake = mt_driver_is_fake ();
  MemresBuffer *x;
  CUstream a, b;

  g_test_summary ("a close on a destroyed stream is refused with the driver's error and loses "
                  "nothing");
  if (!mt_require_devices (1))
    return;
  if (!fake)
    {
      /* the real driver may reuse the handle for another stream at once */
      g_test_skip ("a destroyed stream's handle is only known to be invalid on the fake");
      return;
    }
  mt_counts_snapshot (&base);
  a = mt_stream_new_on (0);
  b = mt_stream_new_on (0);
  mr = mt_new_ok ("arena");
  x = mt_alloc_ok (mr, 4 * MiB, a);
  mt_fill_byte_ok (x, 0x5a, a);
  mt_sync_ok (a);
  CU_OK (mt_driver ()->cuStreamDestroy (a));
  g_assert_false (memres_buffer_close (x, a, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_HANDLE);
  g_assert_false (memres_buffer_is_closed (x));
  mt_assert_bytes (x, 0x5a, b);
  mt_close_ok (x, b);
  mt_sync_ok (b);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  CU_OK (mt_driver ()->cuStreamDestroy (b));
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/arena-streams/destroyed-before-reuse", test_destroyed_before_reuse);
  g_test_add_func ("/arena-streams/legacy-close", test_legacy_close);
  g_test_add_func ("/arena-streams/legacy-batch", test_legacy_batch);
  g_test_add_func ("/arena-streams/legacy-batch-long", test_legacy_batch_long);
  g_test_add_func ("/arena-streams/legacy-batch-bytes", test_legacy_batch_bytes);
  g_test_add_func ("/arena-streams/legacy-batch-bytes-edges", test_legacy_batch_bytes_edges);
  g_test_add_func ("/arena-streams/close-on-destroyed", test_close_on_destroyed);
  return g_test_run ();
}

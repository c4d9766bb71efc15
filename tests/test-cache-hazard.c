/* test-cache-hazard.c: the `cache` adaptor's stream hazards: a block freed on one stream and
 * reused on another (stream, legacy, destroyed streams), front and shared, under threads; host
 * memory and the device pool, against the fake driver (suite fake) and the real one (suite gpu). */
#include "testutil.h"

#include "../plugins/common/cache/cache-classes.h"
#include "testutil-cache.h"

/* Hold stream A, queue a fill of a block on A, free the block on A, allocate the same size for
 * B and fill it on B, release A: the bytes are B's (mt_hazard_run(); the freed block must serve B
 * where the case says so; a destroyed A's successor stream gets correct memory too). */
static void
test_hazard (gconstpointer data)
{
  mt_hazard_run (data);
}

static const MtHazard hazards[] = {
  { "cache>" DEVICE_UPSTREAM, 1 * MiB, MT_HAZARD_STREAM, FALSE, TRUE, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 1 * MiB, MT_HAZARD_STREAM, TRUE, TRUE, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 4 * KiB, MT_HAZARD_STREAM, TRUE, TRUE, FALSE },
  { "cache>" DEVICE_UPSTREAM, 1 * MiB, MT_HAZARD_LEGACY, FALSE, TRUE, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 1 * MiB, MT_HAZARD_LEGACY, TRUE, TRUE, FALSE },
  { "cache>" DEVICE_UPSTREAM, 1 * MiB, MT_HAZARD_DESTROYED, FALSE, TRUE, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 1 * MiB, MT_HAZARD_DESTROYED, TRUE, TRUE, FALSE },
  { "cache:front=0>" DEVICE_UPSTREAM, 4 * KiB, MT_HAZARD_DESTROYED, TRUE, TRUE, FALSE },
};
static const char *const hazard_names[] = {
  "/cache/hazard/stream/front",     "/cache/hazard/stream/shared",
  "/cache/hazard/stream/shared-4k", "/cache/hazard/legacy/front",
  "/cache/hazard/legacy/shared",    "/cache/hazard/destroyed/front",
  "/cache/hazard/destroyed/shared", "/cache/hazard/destroyed/shared-4k",
};
G_STATIC_ASSERT (G_N_ELEMENTS (hazards) == G_N_ELEMENTS (hazard_names));

/* Stream A was held while B got @n blocks and filled them with 0xbb: A is still held; once it
 * runs, the bytes are B's. Closes the blocks and waits for @b. */
static void
hold_release_check (MtStreamHold *hold, MemresBuffer **y, guint n, MemresStream b)
{
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  for (guint i = 0; i < n; i++)
    {
      mt_assert_bytes (y[i], 0xbb, b);
      mt_close_ok (y[i], b);
    }
  mt_sync_ok (b);
}

/* A spill records one event for its whole bin: with front=2 the third close of a class on A
 * moves the two front blocks freed on A and itself into the shared cache under one
 * cuEventRecord on A; B, given all three, waits for A's queued fills, so that the bytes are B's
 * once A runs. */
static void
test_hazard_spill (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresStream a, b;
  MemresBuffer *x[3], *y[3];
  guint64 addr[3];
  MtStreamHold *hold;
  long records = 0, waits = 0;

  if (!mt_hazard_begin ())
    return;
  a = mt_stream_new_on (0);
  b = mt_stream_new_on (0);
  mr = mt_new_ok ("cache:front=2>" DEVICE_UPSTREAM);
  for (guint i = 0; i < 3; i++)
    {
      x[i] = mt_alloc_ok (mr, 1 * MiB, a);
      mt_fill_byte_ok (x[i], 0x11, a);
      addr[i] = memres_buffer_get_address (x[i]);
    }
  mt_sync_ok (a);

  hold = mt_stream_hold (a);
  for (guint i = 0; i < 3; i++)
    mt_fill_byte_ok (x[i], 0xaa, a); /* wait behind the hold */
  if (mt_driver_is_fake ())
    records = mt_fake_call_count ("cuEventRecord");
  for (guint i = 0; i < 3; i++)
    mt_close_ok (x[i], a);
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records + 1);
      waits = mt_fake_call_count ("cuStreamWaitEvent");
    }
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 3 * MiB);

  for (guint i = 0; i < 3; i++)
    {
      guint64 got;

      y[i] = mt_alloc_ok (mr, 1 * MiB, b);
      got = memres_buffer_get_address (y[i]);
      g_assert_true (got == addr[0] || got == addr[1] || got == addr[2]);
      mt_fill_byte_ok (y[i], 0xbb, b);
    }
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent"), ==, waits + 3);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 0);
  hold_release_check (hold, y, 3, b);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (a);
  mt_stream_free (b);
  mt_hazard_end ();
}

/* Blocks freed on the legacy default stream join the shared cache without an event of their
 * own: three frees there (front=0) make no cuEventRecord. Another stream that takes one has an
 * event recorded on the legacy stream then and waits for it, so that the fills queued there
 * before the frees run first and the bytes are B's. */
static void
test_hazard_legacy_lazy (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresStream b;
  MemresBuffer *x[3], *y[3];
  MtStreamHold *hold;
  long records = 0, waits = 0;

  if (!mt_hazard_begin ())
    return;
  b = mt_stream_new_on (0);
  mr = mt_new_ok ("cache:front=0>" DEVICE_UPSTREAM);
  for (guint i = 0; i < 3; i++)
    {
      x[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
      mt_fill_byte_ok (x[i], 0x11, NULL);
    }
  mt_sync_ok (NULL);

  hold = mt_stream_hold (NULL);
  for (guint i = 0; i < 3; i++)
    mt_fill_byte_ok (x[i], 0xaa, NULL); /* wait behind the hold */
  if (mt_driver_is_fake ())
    records = mt_fake_call_count ("cuEventRecord");
  for (guint i = 0; i < 3; i++)
    mt_close_ok (x[i], NULL);
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records);
      waits = mt_fake_call_count ("cuStreamWaitEvent");
    }
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 3 * MiB);
  for (guint i = 0; i < 3; i++)
    {
      y[i] = mt_alloc_ok (mr, 1 * MiB, b);
      mt_fill_byte_ok (y[i], 0xbb, b);
    }
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuEventRecord"), ==, records + 3);
      g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent"), ==, waits + 3);
    }
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "misses"), ==, 3);
  hold_release_check (hold, y, 3, b);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (b);
  mt_hazard_end ();
}

#define HAZARD_THREADS 16
#define HAZARD_ROUNDS  20

typedef struct
{
  MemresResource *mr;
  CUstream *streams;
  guint index;
  GError *error;
  gint step;       /* atomic: round * 10 + the step it is in, for the watchdog's report */
  guint8 *staging; /* 64 KiB of page-locked memory, allocated before any stream is held */
} HazardJob;

#define STEP(job, r, n) g_atomic_int_set (&(job)->step, (gint) ((r) *10 + (n)))

/* A hang (a stream held for good) fails the test with where each thread was, instead of the
 * harness's timeout: steps 1 alloc X, 2 hold, 3 fill X, 4 close X, 5 alloc Y, 6 fill Y,
 * 7 release, 8 check Y, 9 close Y. */
typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean done;
  HazardJob *jobs;
} HazardWatch;

static gpointer
hazard_watchdog (gpointer data)
{
  HazardWatch *w = data;
  gint64 end = g_get_monotonic_time () + 120 * G_TIME_SPAN_SECOND;
  g_autoptr (GString) where = g_string_new (NULL);

  g_mutex_lock (&w->lock);
  while (!w->done)
    if (!g_cond_wait_until (&w->cond, &w->lock, end))
      break;
  g_mutex_unlock (&w->lock);
  if (w->done)
    return NULL;
  for (guint t = 0; t < HAZARD_THREADS; t++)
    g_string_append_printf (where, " %u:%d", t, g_atomic_int_get (&w->jobs[t].step));
  g_error ("hazard threads still running after 120 s; thread:round*10+step =%s", where->str);
  return NULL;
}

/* Thread t, round after round: hold its stream S_t, fill a block X on S_t, free X on S_t,
 * allocate Y of the same size for S_{t+1}, fill Y there, release S_t, check Y on S_{t+1}. */
static gpointer
hazard_thread (gpointer data)
{
  HazardJob *job = data;
  CUstream mine = job->streams[job->index];
  CUstream next = job->streams[(job->index + 1) % HAZARD_THREADS];
  guint8 byte = (guint8) (0x40 + job->index);
  guint8 *staging = job->staging;
  CUevent filled;

  g_assert_true (memres_cuda_ensure_context (0, NULL));
  CU_OK (mt_driver ()->cuEventCreate (&filled, CU_EVENT_DISABLE_TIMING));
  for (guint r = 0; r < HAZARD_ROUNDS; r++)
    {
      MemresBuffer *x, *y;
      MtStreamHold *hold;

      STEP (job, r, 1);
      x = mt_alloc_ok (job->mr, 64 * KiB, mine);
      STEP (job, r, 2);
      hold = mt_stream_hold (mine);
      STEP (job, r, 3);
      mt_fill_byte_ok (x, 0xee, mine);
      STEP (job, r, 4);
      mt_close_ok (x, mine);
      STEP (job, r, 5);
      y = mt_alloc_ok (job->mr, 64 * KiB, next);
      STEP (job, r, 6);
      mt_fill_byte_ok (y, byte, next);
      STEP (job, r, 7);
      mt_stream_release (hold);
      STEP (job, r, 8);
      /* Y is read back into page-locked memory on this thread's own stream, after it waits for
       * Y's fill on `next`: every call queues without waiting inside the driver, and only the
       * stream synchronize waits. (A read into pageable memory on `next` waits inside the
       * driver while the next thread still holds `next`, and on the H200 that blocked the
       * holder's own calls too: a deadlock.) */
      CU_OK (mt_driver ()->cuEventRecord (filled, next));
      CU_OK (mt_driver ()->cuStreamWaitEvent (mine, filled, 0));
      {
        g_autoptr (GError) error = NULL;

        memset (staging, 0, 64 * KiB);
        g_assert_true (memres_buffer_read (y, 0, staging, 64 * KiB, mine, &error));
        g_assert_no_error (error);
        for (gsize i = 0; i < 64 * KiB; i++)
          if (staging[i] != byte)
            g_error ("thread %u round %u: byte %" G_GSIZE_FORMAT " is 0x%02x, expected 0x%02x",
                     job->index, r, i, staging[i], byte);
      }
      STEP (job, r, 9);
      mt_close_ok (y, next);
    }
  STEP (job, HAZARD_ROUNDS, 0);
  CU_OK (mt_driver ()->cuEventDestroy (filled));
  return NULL;
}

static void
test_hazard_threads (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (MemresResource) mr = NULL;
  CUstream streams[HAZARD_THREADS];
  HazardJob jobs[HAZARD_THREADS];
  GThread *threads[HAZARD_THREADS], *watchdog;
  guint8 *staging[HAZARD_THREADS];
  HazardWatch watch = { 0 };

  if (!mt_hazard_begin ())
    return;
  mr = mt_new_ok (spec);
  g_assert_true (memres_cuda_ensure_context (0, NULL));
  for (guint t = 0; t < HAZARD_THREADS; t++)
    {
      void *host = NULL;

      streams[t] = mt_stream_new_on (0);
      CU_OK (mt_driver ()->cuMemHostAlloc (&host, 64 * KiB, 0));
      staging[t] = host;
    }
  g_mutex_init (&watch.lock);
  g_cond_init (&watch.cond);
  watch.jobs = jobs;
  for (guint t = 0; t < HAZARD_THREADS; t++)
    {
      jobs[t] = (HazardJob){ mr, streams, t, NULL, 0, staging[t] };
      threads[t] = g_thread_new ("hazard", hazard_thread, &jobs[t]);
    }
  watchdog = g_thread_new ("hazard-watchdog", hazard_watchdog, &watch);
  for (guint t = 0; t < HAZARD_THREADS; t++)
    g_thread_join (threads[t]);
  g_mutex_lock (&watch.lock);
  watch.done = TRUE;
  g_cond_signal (&watch.cond);
  g_mutex_unlock (&watch.lock);
  g_thread_join (watchdog);
  g_mutex_clear (&watch.lock);
  g_cond_clear (&watch.cond);
  g_assert_cmpuint (counter (mr, "hits") + counter (mr, "misses"), ==,
                    (guint64) HAZARD_THREADS * HAZARD_ROUNDS * 2);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  for (guint t = 0; t < HAZARD_THREADS; t++)
    {
      mt_stream_free (streams[t]);
      CU_OK (mt_driver ()->cuMemFreeHost (staging[t]));
    }
  g_clear_pointer (&mr, memres_resource_unref);
  mt_hazard_end ();
}

int
main (int argc, char **argv)
{
  /* Against the fake, two devices for the peer tests (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  for (guint i = 0; i < G_N_ELEMENTS (hazards); i++)
    g_test_add_data_func (hazard_names[i], &hazards[i], test_hazard);
  g_test_add_func ("/cache/hazard/stream/spill", test_hazard_spill);
  g_test_add_func ("/cache/hazard/legacy/lazy-event", test_hazard_legacy_lazy);
  g_test_add_data_func ("/cache/hazard/threads/front", "cache>" DEVICE_UPSTREAM,
                        test_hazard_threads);
  g_test_add_data_func ("/cache/hazard/threads/shared", "cache:front=0>" DEVICE_UPSTREAM,
                        test_hazard_threads);
  return g_test_run ();
}

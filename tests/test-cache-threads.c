/* test-cache-threads.c: the `cache` adaptor under threads: pairs, producer and consumer, an
 * out-of-memory handler that trims and nested threads (no deadlock); against the fake driver
 * (suite fake) and the real one (suite gpu). */
#include "testutil.h"

#include "../plugins/common/cache/cache-classes.h"
#include "testutil-cache.h"

/* ---- threads ------------------------------------------------------------------------------------
 */

#define PAIRS_THREADS    16
#define PAIRS_PER_THREAD 100000

typedef struct
{
  MemresResource *mr;
  CUstream stream;
  gsize size;
} PairJob;

static gpointer
pairs_thread (gpointer data)
{
  PairJob *job = data;

  mt_pairs (job->mr, job->size, job->stream, PAIRS_PER_THREAD);
  return NULL;
}

static void
test_threads_pairs (void)
{
  g_autoptr (MemresResource) mr = NULL;
  GThread *threads[PAIRS_THREADS];
  PairJob jobs[PAIRS_THREADS];
  long allocs = 0;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  if (mt_driver_is_fake ())
    allocs = mt_fake_call_count ("cuMemAllocFromPoolAsync");
  for (guint t = 0; t < PAIRS_THREADS; t++)
    {
      jobs[t].mr = mr;
      jobs[t].stream = mt_stream_new_on (0);
      jobs[t].size = (t % 4 == 0) ? 256 : (t % 4 == 1) ? 4 * KiB : (t % 4 == 2) ? 64 * KiB : MiB;
      threads[t] = g_thread_new ("pairs", pairs_thread, &jobs[t]);
    }
  for (guint t = 0; t < PAIRS_THREADS; t++)
    g_thread_join (threads[t]);
  g_assert_cmpuint (counter (mr, "hits") + counter (mr, "misses"), ==,
                    (guint64) PAIRS_THREADS * PAIRS_PER_THREAD);
  /* every miss is one upstream allocation (a chunk or a block) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAllocFromPoolAsync") - allocs, ==,
                     (long) counter (mr, "misses"));
  /* each thread missed at most once per class (its first block), the rest were hits */
  g_assert_cmpuint (counter (mr, "misses"), <=, PAIRS_THREADS);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  trim_ok (mr);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  for (guint t = 0; t < PAIRS_THREADS; t++)
    mt_stream_free (jobs[t].stream);
}

static void
test_thread_exit (void)
{
  g_autoptr (MemresResource) mr = NULL;
  ExitJob job = { 0 };
  GThread *thread;
  MemresBuffer *bufs[4];
  guint64 hits, misses;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("cache>" DEVICE_UPSTREAM);
  job.mr = mr;
  job.n = 4;
  thread = g_thread_new ("exit", exit_thread, &job);
  exit_job_wait_filled (&job);
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 4 * MiB);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 0);
  exit_job_go (&job);
  g_thread_join (thread);
  /* nothing lost: the 4 blocks are in the shared cache and serve this thread (same stream) */
  g_assert_cmpuint (counter (mr, "front_cached"), ==, 0);
  g_assert_cmpuint (counter (mr, "shared_cached"), ==, 4 * MiB);
  for (guint i = 0; i < 4; i++)
    bufs[i] = mt_alloc_ok (mr, 1 * MiB, NULL);
  class_counts (mr, 1 * MiB, &hits, &misses, NULL);
  g_assert_cmpuint (hits, ==, 4);
  g_assert_cmpuint (misses, ==, 4);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 4 * MiB);
  for (guint i = 0; i < 4; i++)
    mt_close_ok (bufs[i], NULL);
  trim_ok (mr);
  mt_sync_ok (NULL);
  assert_upstream_empty (mr, &base);
}

/* Two threads in the pattern of a training step (autograd): A allocates activations, B frees
 * them and allocates gradients, A frees those. What one thread frees and the other allocates
 * passes through the shared cache, because a front holds at most front_bytes: after ten warm-up
 * steps no allocation misses (before front_bytes, each thread's front kept up to `front` blocks
 * of every class that only the other thread allocates, and the misses never stopped), and the
 * fronts hold at most front_bytes each. */
#define PC_ACTS  16
#define PC_GRADS 8
#define PC_STEPS 30

typedef struct
{
  MemresResource *mr;
  MemresBuffer *acts[PC_ACTS], *grads[PC_GRADS];
  GMutex lock;
  GCond cond;
  gint turn; /* 0: A, 1: B */
} ProducerConsumer;

static gsize
pc_act_size (guint i)
{
  return ((gsize) (1 + i % 8) << 20) + i * 4096;
}

static void
pc_wait (ProducerConsumer *pc, gint me)
{
  g_mutex_lock (&pc->lock);
  while (pc->turn != me)
    g_cond_wait (&pc->cond, &pc->lock);
  g_mutex_unlock (&pc->lock);
}

static void
pc_give (ProducerConsumer *pc, gint to)
{
  g_mutex_lock (&pc->lock);
  pc->turn = to;
  g_cond_broadcast (&pc->cond);
  g_mutex_unlock (&pc->lock);
}

static gpointer
pc_backward (gpointer data)
{
  ProducerConsumer *pc = data;

  for (guint step = 0; step < PC_STEPS; step++)
    {
      pc_wait (pc, 1);
      for (guint i = 0; i < PC_GRADS; i++)
        pc->grads[i] = mt_alloc_ok (pc->mr, ((gsize) (1 + i % 4) << 19) + i * 8192, NULL);
      for (guint i = PC_ACTS; i-- > 0;)
        mt_close_ok (pc->acts[i], NULL);
      pc_give (pc, 0);
    }
  return NULL;
}

static void
test_producer_consumer (gconstpointer data)
{
  ProducerConsumer pc = { NULL };
  guint64 warm = 0;
  GThread *backward;

  if (strstr (data, ">dmr") != NULL && !mt_require_devices (1))
    return;
  pc.mr = mt_new_ok (data);

  g_mutex_init (&pc.lock);
  g_cond_init (&pc.cond);
  backward = g_thread_new ("backward", pc_backward, &pc);
  for (guint step = 0; step < PC_STEPS; step++)
    {
      for (guint i = 0; i < PC_ACTS; i++)
        pc.acts[i] = mt_alloc_ok (pc.mr, pc_act_size (i), NULL);
      pc_give (&pc, 1);
      pc_wait (&pc, 0);
      for (guint i = 0; i < PC_GRADS; i++)
        mt_close_ok (pc.grads[i], NULL);
      g_assert_cmpuint (counter (pc.mr, "front_cached"), <=, 2 * 8 * MiB);
      if (step == 9)
        warm = counter (pc.mr, "misses");
    }
  g_thread_join (backward);
  g_assert_cmpuint (counter (pc.mr, "misses"), ==, warm);
  g_assert_cmpuint (counter (pc.mr, "hits"), >=, (PC_STEPS - 10) * (PC_ACTS + PC_GRADS));
  g_assert_cmpuint (counter (pc.mr, "used"), ==, 0);
  g_mutex_clear (&pc.lock);
  g_cond_clear (&pc.cond);
  memres_resource_unref (pc.mr);
}

/* An out-of-memory handler below the cache that trims the cache above it (as the retry docs
 * suggest) runs while the cache asks its upstream for memory: the cache's lock is not held then,
 * so the trim gives the idle chunk back and the retried allocation succeeds. */
static MemresResource *trim_top;

static gboolean
trim_the_cache (MemresResource *mr, gsize size, guint attempt, const GError *error,
                gpointer user_data)
{
  g_assert_true (memres_resource_trim (trim_top, 0, NULL));
  (*(guint *) user_data)++;
  return attempt < 2;
}

static void
test_oom_handler_trims (void)
{
  g_autoptr (GError) error = NULL;
  guint calls = 0;
  MemresBuffer *a, *b, *c;

  trim_top = mt_new_ok ("cache>retry>limit:max=4MiB>host");
  g_assert_cmpuint (memres_retry_add_handler (memres_resource_get_upstream (trim_top),
                                              trim_the_cache, &calls, NULL, &error),
                    >, 0);
  g_assert_no_error (error);
  a = mt_alloc_ok (trim_top, 1000, NULL); /* a 2 MiB chunk, idle once a is closed */
  memres_buffer_unref (a);
  b = mt_alloc_ok (trim_top, 300, NULL);  /* a second chunk: the limit is reached */
  c = mt_alloc_ok (trim_top, 2000, NULL); /* a third: the handler trims the first away */
  g_assert_cmpuint (calls, ==, 1);
  memres_buffer_unref (c);
  memres_buffer_unref (b);
  g_clear_pointer (&trim_top, memres_resource_unref);
}

/* A cache over a cache, with fresh threads allocating at once and trims: the outer cache gives
 * blocks back to the inner one without its lock held (the inner one takes the global slots lock for
 * a thread's first front: taken in the other order, that deadlocked). */
static gpointer
nested_thread (gpointer data)
{
  for (guint i = 0; i < 50; i++)
    memres_buffer_unref (mt_alloc_ok (data, 150000 + (i % 7) * 15000, NULL));
  return NULL;
}

static void
test_nested_threads (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("cache>cache>host");

  for (guint round = 0; round < 200; round++)
    {
      GThread *threads[8];

      for (guint t = 0; t < G_N_ELEMENTS (threads); t++)
        threads[t] = g_thread_new ("nested", nested_thread, mr);
      /* trims meanwhile: the outer cache gives blocks back to the inner one unlocked there too */
      g_assert_true (memres_resource_trim (mr, 0, NULL));
      for (guint t = 0; t < G_N_ELEMENTS (threads); t++)
        g_thread_join (threads[t]);
    }
  /* one block kept by the outer cache whatever the last trim found (it may have run after the
   * last thread was done) */
  memres_buffer_unref (mt_alloc_ok (mr, 150000, NULL));
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  /* what the outer cache holds is what the inner one has handed out, each rounded up to one of
   * the inner cache's classes */
  g_assert_cmpuint (counter (memres_resource_get_upstream (mr), "used"), >=,
                    counter (mr, "reserved"));
  g_assert_cmpuint (counter (mr, "reserved"), >, 0);
}

int
main (int argc, char **argv)
{
  /* Against the fake, two devices for the peer tests (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/cache/threads/pairs", test_threads_pairs);
  g_test_add_func ("/cache/threads/exit", test_thread_exit);
  g_test_add_data_func ("/cache/threads/producer-consumer/host", "cache:front_bytes=8MiB>host",
                        test_producer_consumer);
  g_test_add_data_func ("/cache/threads/producer-consumer/dmr",
                        "cache:front_bytes=8MiB>" DEVICE_UPSTREAM, test_producer_consumer);
  g_test_add_func ("/cache/deadlock/oom-handler-trims", test_oom_handler_trims);
  g_test_add_func ("/cache/deadlock/nested-threads", test_nested_threads);
  return g_test_run ();
}

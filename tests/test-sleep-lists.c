/* test-sleep-lists.c: the lists of a tag's open buffers that a sleep walks (core/sleep.h:
 * MemresSleepList, one per stripe and tag, changed without a lock by the allocating thread):
 * tagged buffers allocated on many threads (more than there are stripes: the shared stripe's
 * list too) and closed on other threads, on their own, on threads that have exited, and while
 * their tag sleeps; each sleep must find exactly the buffers still open (on `vmm` with 2 MiB
 * chunks, one physical handle each: the fake's live handles count them) and none of those closed
 * (a closed one found would be put to sleep a second time, or its freed memory), and the backup
 * policy brings the open ones back with their bytes. Then the threads that allocate again unlink
 * the closed ones (their structures freed: nothing left for valgrind or LeakSanitizer), and the
 * resource's finalize drops what no thread unlinked. Also run under the no-membarrier launcher
 * (every list change under the lock). Against the fake driver (suite fake) and the real one
 * (suite gpu; the handle counts on the fake only). */
#include <memres/memres.h>

#include "testutil.h"

#include <pthread.h>
#include "testutil-sleep.h"

#define TAG "sl-lists"

typedef struct
{
  MemresResource *mr;
  guint n_threads;
  guint per_thread;
  MemresBuffer **bufs; /* n_threads * per_thread, bufs[t * per_thread + k] allocated by t */
  pthread_barrier_t barrier;
  /* which thread closes buffer k of thread t, by round: the thread itself, the next one, or
   * nobody (-1) */
  int (*closer) (guint t, guint k, guint n_threads);
  guint closed; /* atomic: buffers closed by the threads */
} Lists;

typedef struct
{
  Lists *l;
  guint t;
} Worker;

static guint32
seed_of (guint t, guint k)
{
  return t * 1000 + k + 1;
}

/* Each thread allocates its buffers under TAG and writes their first page; all wait; each closes
 * those the round's closer gives it; all wait again before they exit. */
static gpointer
worker (gpointer data)
{
  Worker *w = data;
  Lists *l = w->l;

  for (guint k = 0; k < l->per_thread; k++)
    {
      MemresBuffer *buf = alloc_tagged (l->mr, TAG, 2 * MiB);

      mt_write_pattern (buf, 0, 4096, seed_of (w->t, k), NULL);
      l->bufs[w->t * l->per_thread + k] = buf;
    }
  pthread_barrier_wait (&l->barrier);
  for (guint t = 0; t < l->n_threads; t++)
    for (guint k = 0; k < l->per_thread; k++)
      if (l->closer (t, k, l->n_threads) == (int) w->t)
        {
          MemresBuffer **slot = &l->bufs[t * l->per_thread + k];

          mt_close_ok (g_steal_pointer (slot), NULL);
          g_atomic_int_inc (&l->closed);
        }
  pthread_barrier_wait (&l->barrier);
  return NULL;
}

static void
run_threads (Lists *l)
{
  g_autofree GThread **threads = g_new0 (GThread *, l->n_threads);
  g_autofree Worker *workers = g_new0 (Worker, l->n_threads);

  pthread_barrier_init (&l->barrier, NULL, l->n_threads);
  for (guint t = 0; t < l->n_threads; t++)
    {
      workers[t] = (Worker){ l, t };
      threads[t] = g_thread_new ("sleep-lists", worker, &workers[t]);
    }
  for (guint t = 0; t < l->n_threads; t++)
    g_thread_join (threads[t]);
  pthread_barrier_destroy (&l->barrier);
}

/* buffers 0 and 1 closed by the next thread, 2 by its own, 3 and on left open */
static int
close_mixed (guint t, guint k, guint n_threads)
{
  if (k < 2)
    return (int) ((t + 1) % n_threads);
  return k == 2 ? (int) t : -1;
}

static guint
count_open (Lists *l)
{
  guint n = 0;

  for (guint i = 0; i < l->n_threads * l->per_thread; i++)
    n += l->bufs[i] != NULL;
  return n;
}

/* The first page of each open buffer holds what its thread wrote */
static void
check_open (Lists *l)
{
  for (guint t = 0; t < l->n_threads; t++)
    for (guint k = 0; k < l->per_thread; k++)
      if (l->bufs[t * l->per_thread + k] != NULL)
        mt_check_pattern (l->bufs[t * l->per_thread + k], 0, 4096, seed_of (t, k), NULL);
}

/* Sleeps TAG with the backup policy: exactly the @n_open open buffers release their handle
 * (one 2 MiB chunk each) and read as asleep; the wake gives every handle back and their bytes. */
static void
assert_sleep_finds_open (Lists *l, guint n_open)
{
  g_autoptr (MemresSleepPolicy) policy = policy_new (MEMRES_SLEEP_BACKUP);
  int before = live_handles ();

  g_assert_cmpuint (count_open (l), ==, n_open);
  check_open (l);
  sleep_ok (l->mr, TAG, policy);
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, before - (int) n_open);
  for (guint i = 0; i < l->n_threads * l->per_thread; i++)
    if (l->bufs[i] != NULL)
      g_assert_true (memres_buffer_is_asleep (l->bufs[i]));
  wake_ok (l->mr, TAG);
  g_assert_cmpint (live_handles (), ==, before);
  check_open (l);
}

static gpointer
alloc_close_one (gpointer data)
{
  MemresBuffer *buf = alloc_tagged (data, TAG, 2 * MiB);

  mt_close_ok (buf, NULL);
  return NULL;
}

static gpointer
close_list (gpointer data)
{
  GPtrArray *bufs = data;

  for (guint i = 0; i < bufs->len; i++)
    {
      mt_close_ok (bufs->pdata[i], NULL);
    }
  return NULL;
}

/* @n_threads threads (more than the core's 31 stripes of their own when 40: the rest share one)
 * allocate 4 tagged buffers each and close 3 of them, 2 of another thread's: the sleep after they
 * exit finds the one left of each; closed on yet other threads while asleep, their handles are
 * not given back twice; threads that allocate the tag again unlink the dead of their lists. */
static void
test_cross_thread (gconstpointer data)
{
  guint n_threads = GPOINTER_TO_UINT (data);
  g_autoptr (GPtrArray) later = g_ptr_array_new ();
  g_autoptr (MemresSleepPolicy) backup = NULL;
  Lists l = { 0 };
  FakeCudaCounts base;
  GThread *thread;
  int before;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  backup = policy_new (MEMRES_SLEEP_BACKUP);
  l.mr = new_ok ("vmm:chunk=2MiB");
  l.n_threads = n_threads;
  l.per_thread = 4;
  l.bufs = g_new0 (MemresBuffer *, n_threads * l.per_thread);
  l.closer = close_mixed;
  before = live_handles ();
  run_threads (&l);
  g_assert_cmpuint (l.closed, ==, 3 * n_threads);
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, before + (int) n_threads);

  /* the sleep finds each thread's last buffer, none of those closed (twice, the second after a
   * wake that relinked nothing) */
  assert_sleep_finds_open (&l, n_threads);
  assert_sleep_finds_open (&l, n_threads);

  /* asleep, every other open buffer closed on this thread (none of them allocated it): the
   * next sleep finds the rest */
  sleep_ok (l.mr, TAG, backup);
  for (guint t = 0; t < n_threads; t += 2)
    {
      MemresBuffer **slot = &l.bufs[t * l.per_thread + 3];

      g_ptr_array_add (later, g_steal_pointer (slot));
    }
  thread = g_thread_new ("sleep-lists-close", close_list, later);
  g_thread_join (thread);
  wake_ok (l.mr, TAG);
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, before + (int) (n_threads / 2));
  assert_sleep_finds_open (&l, n_threads / 2);

  /* new threads take the stripes of those gone, and with them their lists: an allocation of the
   * tag unlinks the dead there (the structures freed: the leak checks) */
  for (guint i = 0; i < n_threads; i++)
    {
      thread = g_thread_new ("sleep-lists-again", alloc_close_one, l.mr);
      g_thread_join (thread);
    }
  assert_sleep_finds_open (&l, n_threads / 2);

  for (guint i = 0; i < n_threads * l.per_thread; i++)
    if (l.bufs[i] != NULL)
      {
        mt_close_ok (l.bufs[i], NULL);
      }
  g_assert_cmpint (live_handles (), ==, before);
  g_free (l.bufs);
  g_clear_pointer (&l.mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

typedef struct
{
  MemresResource *mr;
  pthread_barrier_t barrier; /* the workers and the main thread */
  gint pause, stop;
  gint held; /* atomic: the workers' open buffers */
} Race;

/* Allocates tagged buffers on its own thread and closes them there, one held at a time, while
 * the main thread puts the tag to sleep: each allocation either succeeds (and the sleep that
 * follows finds it) or is refused; parked at the main thread's pause. */
static gpointer
race_worker (gpointer data)
{
  Race *r = data;
  MemresBuffer *held = NULL;

  for (;;)
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf;

      if (g_atomic_int_get (&r->pause))
        {
          pthread_barrier_wait (&r->barrier); /* parked */
          pthread_barrier_wait (&r->barrier); /* resumed */
          if (g_atomic_int_get (&r->stop))
            break;
          continue;
        }
      g_assert_true (memres_tag_push (TAG, NULL));
      buf = memres_resource_allocate (r->mr, 2 * MiB, NULL, &error);
      g_assert_true (memres_tag_pop (TAG, NULL));
      if (buf == NULL)
        {
          g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
          continue;
        }
      if (held != NULL)
        {
          mt_close_ok (held, NULL);
        }
      else
        g_atomic_int_inc (&r->held);
      held = buf;
    }
  if (held != NULL)
    {
      mt_close_ok (held, NULL);
    }
  return NULL;
}

/* Sleeps racing with allocations and closes of the tag on 8 threads: with the threads parked
 * after each sleep, the fake's live handles are those of the untagged buffer alone (the sleep
 * found every open tagged buffer, those allocated as it began included, or refused them); after
 * the wake, those of the threads' open buffers too. */
static void
test_race (void)
{
  GThread *threads[8];
  MemresBuffer *plain;
  Race r = { 0 };
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  r.mr = new_ok ("vmm:chunk=2MiB");
  plain = alloc_tagged (r.mr, NULL, 2 * MiB);
  /* the tag known before the first sleep (a name never used is refused) */
  mt_close_ok (alloc_tagged (r.mr, TAG, 2 * MiB), NULL);
  pthread_barrier_init (&r.barrier, NULL, G_N_ELEMENTS (threads) + 1);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("sleep-lists-race", race_worker, &r);
  for (guint round = 0; round < 40; round++)
    {
      sleep_ok (r.mr, TAG, NULL);
      g_atomic_int_set (&r.pause, 1);
      pthread_barrier_wait (&r.barrier);
      if (mt_driver_is_fake ())
        g_assert_cmpint (live_handles () - base.physical_handles, ==, 1);
      wake_ok (r.mr, TAG);
      if (mt_driver_is_fake ())
        g_assert_cmpint (live_handles () - base.physical_handles, ==,
                         1 + g_atomic_int_get (&r.held));
      g_atomic_int_set (&r.pause, 0);
      if (round == 39)
        g_atomic_int_set (&r.stop, 1);
      pthread_barrier_wait (&r.barrier);
    }
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  pthread_barrier_destroy (&r.barrier);
  mt_close_ok (plain, NULL);
  g_clear_pointer (&r.mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

typedef struct
{
  MemresResource *mr;
  GAsyncQueue *handed;       /* buffers allocated by producers, closed by consumers */
  pthread_barrier_t barrier; /* the workers and the main thread */
  gint pause, stop;
  gint allocated, refused, closed; /* atomic */
} Handoff;

/* Parks the calling worker when the main thread asks (both barriers); TRUE when it must stop. */
static gboolean
handoff_park (Handoff *h)
{
  if (!g_atomic_int_get (&h->pause))
    return FALSE;
  pthread_barrier_wait (&h->barrier); /* parked */
  pthread_barrier_wait (&h->barrier); /* resumed */
  return g_atomic_int_get (&h->stop);
}

/* Allocates tagged buffers and hands each to the consumers (at most 64 waiting); a refusal of
 * the sleeping tag is counted. Each allocation of the tag also unlinks the buffers of this
 * thread's list that consumers closed meanwhile. */
static gpointer
handoff_producer (gpointer data)
{
  Handoff *h = data;

  while (!handoff_park (h))
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf;

      if (g_async_queue_length (h->handed) > 64)
        {
          g_thread_yield ();
          continue;
        }
      g_assert_true (memres_tag_push (TAG, NULL));
      buf = memres_resource_allocate (h->mr, 2 * MiB, NULL, &error);
      g_assert_true (memres_tag_pop (TAG, NULL));
      if (buf == NULL)
        {
          g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_TAG_ASLEEP);
          g_atomic_int_inc (&h->refused);
          g_thread_yield ();
          continue;
        }
      g_atomic_int_inc (&h->allocated);
      g_async_queue_push (h->handed, buf);
    }
  return NULL;
}

/* Closes what the producers hand over, on its own thread (awake or asleep: a close is allowed
 * at any time). */
static gpointer
handoff_consumer (gpointer data)
{
  Handoff *h = data;

  while (!handoff_park (h))
    {
      MemresBuffer *buf = g_async_queue_timeout_pop (h->handed, 1000);

      if (buf != NULL)
        {
          mt_close_ok (buf, NULL);
          g_atomic_int_inc (&h->closed);
        }
    }
  return NULL;
}

/* 4 threads allocate tagged buffers and hand them to 4 others that close them (every close on
 * another thread than the allocation, while the allocating thread keeps allocating the tag and
 * unlinking the dead of its list), while the main thread puts the tag to sleep and wakes it.
 * With the workers parked after each sleep, no tagged physical memory is left on the fake (a
 * buffer the sleep's walk missed would keep its handle); after the wake, exactly the handles of
 * the buffers waiting to be closed. At the end every buffer is closed once and nothing leaks. */
static void
test_handoff (void)
{
  GThread *threads[8];
  Handoff h = { 0 };
  FakeCudaCounts base;
  MemresBuffer *buf;

  g_test_summary ("tagged buffers closed on other threads while their allocating threads keep "
                  "allocating the tag and the tag sleeps and wakes");
  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  h.mr = new_ok ("vmm:chunk=2MiB");
  h.handed = g_async_queue_new ();
  /* the tag known before the first sleep */
  mt_close_ok (alloc_tagged (h.mr, TAG, 2 * MiB), NULL);
  pthread_barrier_init (&h.barrier, NULL, G_N_ELEMENTS (threads) + 1);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("handoff", i % 2 ? handoff_consumer : handoff_producer, &h);
  for (guint round = 0; round < 30; round++)
    {
      g_usleep (2000); /* the workers run awake */
      sleep_ok (h.mr, TAG, NULL);
      g_usleep (1000); /* asleep: producers refused, consumers close sleeping buffers */
      g_atomic_int_set (&h.pause, 1);
      pthread_barrier_wait (&h.barrier);
      if (mt_driver_is_fake ())
        g_assert_cmpint (live_handles (), ==, base.physical_handles);
      wake_ok (h.mr, TAG);
      if (mt_driver_is_fake ())
        g_assert_cmpint (live_handles () - base.physical_handles, ==,
                         g_async_queue_length (h.handed));
      g_assert_cmpint (g_atomic_int_get (&h.allocated) - g_atomic_int_get (&h.closed), ==,
                       g_async_queue_length (h.handed));
      g_atomic_int_set (&h.pause, 0);
      if (round == 29)
        g_atomic_int_set (&h.stop, 1);
      pthread_barrier_wait (&h.barrier);
    }
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  pthread_barrier_destroy (&h.barrier);
  while ((buf = g_async_queue_try_pop (h.handed)) != NULL)
    {
      mt_close_ok (buf, NULL);
      h.closed++;
    }
  g_test_message ("%d allocations, %d refused while asleep", h.allocated, h.refused);
  g_assert_cmpint (h.allocated, >, 0);
  g_assert_cmpint (h.closed, ==, h.allocated);
  g_assert_cmpint (live_handles (), ==, base.physical_handles);
  g_async_queue_unref (h.handed);
  g_clear_pointer (&h.mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_data_func ("/sleep-lists/cross-thread/16", GUINT_TO_POINTER (16), test_cross_thread);
  /* more threads than stripes of their own: some on the shared stripe's lists */
  g_test_add_data_func ("/sleep-lists/cross-thread/40", GUINT_TO_POINTER (40), test_cross_thread);
  g_test_add_func ("/sleep-lists/race", test_race);
  g_test_add_func ("/sleep-lists/handoff", test_handoff);
  return g_test_run ();
}

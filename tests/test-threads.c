/* test-threads.c: 8 threads at once looking up kinds (loading the same plugin), creating
 * resources, allocating from a shared resource and their own, and listing kinds. */
#include "testkind.h"
#include "testutil.h"

#define N_THREADS 8
#define N_ROUNDS  200

static MemresResource *shared;
/* What each thread's plugin lookup returned, one slot per thread (no lock: ThreadSanitizer
 * does not see GLib's futex-based GMutex). */
static MemresKind *loaded_kinds[N_THREADS];
static gint start_flag;

static gpointer
worker (gpointer data)
{
  guint id = GPOINTER_TO_UINT (data);
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) plugin_kind = NULL;
  guint round;

  while (!g_atomic_int_get (&start_flag))
    g_thread_yield ();

  /* all threads load the same plugin at the same moment: exactly one load happens */
  plugin_kind = memres_registry_lookup ("abi_old", &error);
  g_assert_no_error (error);
  loaded_kinds[id] = memres_kind_ref (plugin_kind);

  for (round = 0; round < N_ROUNDS; round++)
    {
      g_autofree char *spec = g_strdup_printf ("host:alignment=%u", 1u << (round % 12));
      g_autoptr (MemresResource) own = memres_resource_new (spec, &error);
      g_autoptr (MemresKind) host = memres_registry_lookup ("host", &error);
      MemresBuffer *a, *b;
      guint8 *p;

      g_assert_no_error (error);
      g_assert_nonnull (host);
      a = mt_alloc_ok (own, 64 + round, NULL);
      b = mt_alloc_ok (shared, 32 + id, NULL);
      p = memres_buffer_get_pointer (b);
      memset (p, (int) id, 32 + id);
      g_assert_true (memres_buffer_fill (a, id, 1, NULL, &error));
      g_assert_cmpint (((guint8 *) memres_buffer_get_pointer (a))[63], ==, id);
      g_assert_cmpint (p[31 + id], ==, id);
      if (round % 2 == 0)
        g_assert_true (memres_buffer_close (b, NULL, &error));
      memres_buffer_unref (b);
      memres_buffer_unref (a);

      if (round % 50 == 0)
        {
          g_autoptr (GPtrArray) kinds = memres_registry_list_kinds (&error);
          g_assert_no_error (error);
          g_assert_cmpuint (kinds->len, >=, 3);
        }
    }
  return NULL;
}

static void
test_concurrent (void)
{
  g_autoptr (GError) error = NULL;
  GThread *threads[N_THREADS];
  MemresStats stats;
  guint i;

  shared = mt_new_ok ("tk");

  for (i = 0; i < N_THREADS; i++)
    threads[i] = g_thread_new ("worker", worker, GUINT_TO_POINTER (i));
  g_atomic_int_set (&start_flag, 1);
  for (i = 0; i < N_THREADS; i++)
    g_thread_join (threads[i]);

  /* one kind: the plugin was loaded once */
  for (i = 0; i < N_THREADS; i++)
    {
      g_assert_nonnull (loaded_kinds[i]);
      g_assert_true (loaded_kinds[i] == loaded_kinds[0]);
    }
  for (i = 0; i < N_THREADS; i++)
    memres_kind_unref (loaded_kinds[i]);

  /* every allocation of the shared resource was freed exactly once */
  g_assert_cmpint (g_atomic_int_get (&tk.allocates), ==, N_THREADS * N_ROUNDS);
  g_assert_cmpint (g_atomic_int_get (&tk.deallocates), ==, N_THREADS * N_ROUNDS);
  /* tk keeps no statistics: the core's count of the bytes, updated by every thread, says that
   * nothing is left and that at most one buffer per thread (32 + id bytes) was live at once */
  g_assert_true (memres_resource_get_stats (shared, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.n_buffers, ==, 0);
  g_assert_cmpuint (stats.used_high, >=, 32 + N_THREADS - 1);
  g_assert_cmpuint (stats.used_high, <=, 32 * N_THREADS + N_THREADS * (N_THREADS - 1) / 2);
  memres_resource_unref (shared);
  g_assert_cmpint (tk.finalizes, ==, 1);
}

static gint register_wins;
static gint register_exists;

static gpointer
register_worker (gpointer data)
{
  MemresKindInfo info = tk_info;
  g_autoptr (GError) error = NULL;

  info.name = "race";
  while (!g_atomic_int_get (&start_flag))
    g_thread_yield ();
  if (memres_registry_register_kind (&info, &error))
    g_atomic_int_inc (&register_wins);
  else if (g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_EXISTS))
    g_atomic_int_inc (&register_exists);
  return NULL;
}

static void
test_concurrent_register (void)
{
  GThread *threads[N_THREADS];
  guint i;

  /* several threads register the same application kind: exactly one wins */
  g_atomic_int_set (&start_flag, 0);
  for (i = 0; i < N_THREADS; i++)
    threads[i] = g_thread_new ("register", register_worker, NULL);
  g_atomic_int_set (&start_flag, 1);
  for (i = 0; i < N_THREADS; i++)
    g_thread_join (threads[i]);
  g_assert_cmpint (register_wins, ==, 1);
  g_assert_cmpint (register_exists, ==, N_THREADS - 1);
}

/* The last reference and the last buffers go at once: buffers allocated on the main thread are
 * closed on other threads (their stripes go below zero) while the main thread drops the
 * resource; the kind is finalized exactly once per round, after every deallocate. */
#define RACE_BUFFERS 6
#define RACE_ROUNDS  300

typedef struct
{
  MemresBuffer *buf;
  gint *go;
} RaceJob;

static gpointer
race_closer (gpointer data)
{
  RaceJob *job = data;
  g_autoptr (GError) error = NULL;

  while (!g_atomic_int_get (job->go))
    g_thread_yield ();
  g_assert_true (memres_buffer_close (job->buf, NULL, &error));
  g_assert_no_error (error);
  memres_buffer_unref (job->buf);
  return NULL;
}

static void
test_last_reference_race (void)
{
  tk_reset ();
  for (guint round = 0; round < RACE_ROUNDS; round++)
    {
      g_autoptr (GError) error = NULL;
      MemresResource *mr = memres_resource_new ("tk", &error);
      GThread *threads[RACE_BUFFERS];
      RaceJob jobs[RACE_BUFFERS];
      MemresStats stats;
      gint go = 0;

      g_assert_no_error (error);
      for (guint i = 0; i < RACE_BUFFERS; i++)
        {
          jobs[i].buf = memres_resource_allocate (mr, 64, NULL, &error);
          g_assert_no_error (error);
          jobs[i].go = &go;
        }
      /* tk has no get_stats: the core's own counts */
      g_assert_true (memres_resource_get_stats (mr, &stats, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (stats.n_buffers, ==, RACE_BUFFERS);
      g_assert_cmpuint (stats.used_current, ==, 64 * RACE_BUFFERS);
      for (guint i = 0; i < RACE_BUFFERS; i++)
        threads[i] = g_thread_new ("race", race_closer, &jobs[i]);
      g_atomic_int_set (&go, 1);
      if (round % 2 == 0)
        memres_resource_unref (mr); /* while the closes run */
      for (guint i = 0; i < RACE_BUFFERS; i++)
        g_thread_join (threads[i]);
      if (round % 2 == 1)
        {
          g_assert_cmpint (g_atomic_int_get (&tk.finalizes), ==, (gint) round);
          memres_resource_unref (mr); /* after them: finalized here */
        }
      g_assert_cmpint (g_atomic_int_get (&tk.finalizes), ==, (gint) round + 1);
      g_assert_cmpint (g_atomic_int_get (&tk.deallocates), ==, (gint) (round + 1) * RACE_BUFFERS);
    }
}

/* Each thread holds a buffer; the last reference goes while they take one again through their
 * buffers, allocate and close on it, and drop it: the resource is finalized once, after all. */
static gpointer
race_ref_again (gpointer data)
{
  RaceJob *job = data;
  MemresResource *again;
  MemresBuffer *more;

  while (!g_atomic_int_get (job->go))
    ;
  again = memres_resource_ref (memres_buffer_get_resource (job->buf));
  more = memres_resource_allocate (again, 32, NULL, NULL);
  g_assert_nonnull (more);
  g_assert_true (memres_buffer_close (job->buf, NULL, NULL));
  memres_buffer_unref (job->buf);
  memres_resource_unref (again);
  g_assert_true (memres_buffer_close (more, NULL, NULL));
  memres_buffer_unref (more);
  return NULL;
}

static void
test_ref_again_race (void)
{
  tk_reset ();
  for (guint round = 0; round < RACE_ROUNDS; round++)
    {
      g_autoptr (GError) error = NULL;
      MemresResource *mr = memres_resource_new (round % 4 < 2 ? "tk" : "stats>tk", &error);
      GThread *threads[RACE_BUFFERS];
      RaceJob jobs[RACE_BUFFERS];
      gint go = 0;

      g_assert_no_error (error);
      for (guint i = 0; i < RACE_BUFFERS; i++)
        {
          jobs[i].buf = memres_resource_allocate (mr, 64, NULL, &error);
          g_assert_no_error (error);
          jobs[i].go = &go;
        }
      for (guint i = 0; i < RACE_BUFFERS; i++)
        threads[i] = g_thread_new ("again", race_ref_again, &jobs[i]);
      if (round % 2 == 1)
        memres_resource_unref (mr); /* before they start */
      g_atomic_int_set (&go, 1);
      if (round % 2 == 0)
        memres_resource_unref (mr); /* while they run */
      for (guint i = 0; i < RACE_BUFFERS; i++)
        g_thread_join (threads[i]);
      g_assert_cmpint (g_atomic_int_get (&tk.finalizes), ==, (gint) round + 1);
      g_assert_cmpint (g_atomic_int_get (&tk.allocates), ==, (gint) (round + 1) * 2 * RACE_BUFFERS);
      g_assert_cmpint (g_atomic_int_get (&tk.deallocates), ==,
                       (gint) (round + 1) * 2 * RACE_BUFFERS);
    }
}

/* n_buffers counts buffers closed on another thread than the one that allocated them right. */
static void
test_buffer_count_across_threads (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("host", &error);
  MemresBuffer *bufs[4];
  GThread *threads[4];
  RaceJob jobs[4];
  MemresStats stats;
  gint go = 1;

  g_assert_no_error (error);
  for (guint i = 0; i < 4; i++)
    bufs[i] = memres_resource_allocate (mr, 100, NULL, &error);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_cmpuint (stats.n_buffers, ==, 4);
  for (guint i = 0; i < 3; i++)
    {
      jobs[i] = (RaceJob){ bufs[i], &go };
      threads[i] = g_thread_new ("count", race_closer, &jobs[i]);
    }
  for (guint i = 0; i < 3; i++)
    g_thread_join (threads[i]);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_cmpuint (stats.n_buffers, ==, 1);
  memres_buffer_unref (bufs[3]);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_cmpuint (stats.n_buffers, ==, 0);
}

/* More threads at once than there are stripes of their own (MEMRES_STRIPE_SHARED - 1): the
 * later ones count on the shared stripe with locked instructions, the others with plain stores.
 * At each quiescent point the counts are exact; then every thread drops its reference while
 * the others still close, and the kind is finalized exactly once, after every deallocate. The
 * spec is `tk` (the core's counts of a layer), or `stats>tk`: a counted layer (the core's counted
 * calls, whose shared stripe is their out-of-line half), with its upstream's usage. */
#define WIDE_THREADS 40
#define WIDE_PAIRS   2000
#define WIDE_HELD    3

typedef struct
{
  MemresResource *mr;
  guint id;
  gint *phase; /* 0: go; 1: holding (counted in @held); 2: release */
  gint *held;
} WideJob;

static gsize
wide_size (guint id, guint k)
{
  return 64 + 8 * (id * WIDE_HELD + k);
}

static gsize
wide_pair_size (guint i)
{
  return 32 + i % 512;
}

static gpointer
wide_worker (gpointer data)
{
  WideJob *job = data;
  g_autoptr (GError) error = NULL;
  MemresBuffer *kept[WIDE_HELD];

  for (guint i = 0; i < WIDE_PAIRS; i++)
    {
      MemresBuffer *buf = mt_alloc_ok (job->mr, wide_pair_size (i), NULL);

      g_assert_true (memres_buffer_close (buf, NULL, &error));
      memres_buffer_unref (buf);
    }
  for (guint k = 0; k < WIDE_HELD; k++)
    kept[k] = mt_alloc_ok (job->mr, wide_size (job->id, k), NULL);
  g_atomic_int_inc (job->held);
  while (g_atomic_int_get (job->phase) < 2)
    g_thread_yield ();
  for (guint k = 0; k < WIDE_HELD; k++)
    {
      g_assert_true (memres_buffer_close (kept[k], NULL, &error));
      g_assert_no_error (error);
      memres_buffer_unref (kept[k]);
    }
  memres_resource_unref (job->mr);
  return NULL;
}

/* What a `stats` layer counted of @mr's buffers: @count_current of @bytes_current open, the
 * totals, the size classes adding up to the allocations, and (through get_stats) its upstream's
 * usage, which the core counts beside the layer's own. */
static void
assert_counted (MemresResource *mr, guint64 count_current, guint64 bytes_current,
                guint64 count_total, guint64 bytes_total)
{
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;
  MemresStats up;
  guint64 classes = 0;

  g_assert_true (memres_stats_get_counters (mr, &c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.count_current, ==, count_current);
  g_assert_cmpuint (c.bytes_current, ==, bytes_current);
  g_assert_cmpuint (c.count_total, ==, count_total);
  g_assert_cmpuint (c.bytes_total, ==, bytes_total);
  g_assert_cmpuint (c.count_peak, >=, count_current);
  g_assert_cmpuint (c.bytes_peak, >=, bytes_current);
  for (guint k = 0; k < MEMRES_STATS_N_SIZE_CLASSES; k++)
    classes += c.size_classes[k];
  g_assert_cmpuint (classes, ==, count_total);
  g_assert_true (memres_resource_get_stats (memres_resource_get_upstream (mr), &up, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (up.used_current, ==, bytes_current);
  g_assert_cmpuint (up.used_high, >=, bytes_current);
}

static void
test_stripes_shared (gconstpointer spec)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  GThread *threads[WIDE_THREADS];
  WideJob jobs[WIDE_THREADS];
  MemresStats stats;
  gint phase = 0, held = 0;
  guint64 bytes = 0, pair_bytes = 0;

  tk_reset ();
  mr = memres_resource_new (spec, &error);
  g_assert_no_error (error);
  for (guint t = 0; t < WIDE_THREADS; t++)
    {
      jobs[t] = (WideJob){ memres_resource_ref (mr), t, &phase, &held };
      for (guint k = 0; k < WIDE_HELD; k++)
        bytes += wide_size (t, k);
      threads[t] = g_thread_new ("wide", wide_worker, &jobs[t]);
    }
  for (guint i = 0; i < WIDE_PAIRS; i++)
    pair_bytes += WIDE_THREADS * wide_pair_size (i);
  while (g_atomic_int_get (&held) < WIDE_THREADS)
    g_thread_yield ();
  /* tk has no get_stats: the core's own counts, summed over every stripe (stats: its counts) */
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.n_buffers, ==, WIDE_THREADS * WIDE_HELD);
  g_assert_cmpuint (stats.used_current, ==, bytes);
  g_assert_cmpuint (stats.used_high, >=, bytes);
  g_assert_cmpint (g_atomic_int_get (&tk.allocates), ==, WIDE_THREADS * (WIDE_PAIRS + WIDE_HELD));
  if (memres_resource_get_upstream (mr) != NULL)
    assert_counted (mr, WIDE_THREADS * WIDE_HELD, bytes, WIDE_THREADS * (WIDE_PAIRS + WIDE_HELD),
                    pair_bytes + bytes);
  memres_resource_unref (mr);
  g_atomic_int_set (&phase, 2);
  for (guint t = 0; t < WIDE_THREADS; t++)
    g_thread_join (threads[t]);
  g_assert_cmpint (g_atomic_int_get (&tk.finalizes), ==, 1);
  g_assert_cmpint (g_atomic_int_get (&tk.deallocates), ==, WIDE_THREADS * (WIDE_PAIRS + WIDE_HELD));
}

/* Threads come and go, one after the other, more of them than there are stripes: each leaves
 * a buffer open for the main thread and closes one that the thread before it allocated, on a
 * stripe that an exited thread gave back. The counts stay exact across the exits. Over `host`,
 * and `stats>host`, whose counted calls find a thread's stripe out of line at its first count:
 * here a close. */
#define SERIAL_THREADS 100

typedef struct
{
  MemresResource *mr;
  MemresBuffer *take;  /* the previous thread's buffer, closed here */
  MemresBuffer *leave; /* allocated here, closed by the next thread */
  MemresBuffer *keep;  /* allocated here, closed by the main thread */
  guint id;
} SerialJob;

static gpointer
serial_worker (gpointer data)
{
  SerialJob *job = data;
  g_autoptr (GError) error = NULL;

  if (job->take != NULL)
    {
      g_assert_true (memres_buffer_close (job->take, NULL, &error));
      g_assert_no_error (error);
      memres_buffer_unref (job->take);
    }
  job->leave = mt_alloc_ok (job->mr, 1000 + job->id, NULL);
  job->keep = mt_alloc_ok (job->mr, 10 + job->id, NULL);
  return NULL;
}

static void
test_stripes_recycled (gconstpointer spec)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new (spec, &error);
  gboolean counted = memres_resource_get_upstream (mr) != NULL;
  MemresBuffer *keep[SERIAL_THREADS];
  MemresBuffer *pending = NULL;
  MemresStats stats;
  guint64 kept = 0;

  g_assert_no_error (error);
  for (guint t = 0; t < SERIAL_THREADS; t++)
    {
      SerialJob job = { mr, pending, NULL, NULL, t };

      g_thread_join (g_thread_new ("serial", serial_worker, &job));
      pending = job.leave;
      keep[t] = job.keep;
      kept += 10 + t;
      g_assert_true (memres_resource_get_stats (mr, &stats, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (stats.n_buffers, ==, (t + 1) + 1); /* kept, and the pending one */
      g_assert_cmpuint (stats.used_current, ==, kept + 1000 + t);
      if (counted)
        assert_counted (mr, (t + 1) + 1, kept + 1000 + t, 2 * (t + 1),
                        kept + 1000 * (t + 1) + t * (t + 1) / 2);
    }
  memres_buffer_unref (pending);
  for (guint t = 0; t < SERIAL_THREADS; t++)
    memres_buffer_unref (keep[t]);
  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_cmpuint (stats.n_buffers, ==, 0);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.used_high, ==, kept + 1000 + SERIAL_THREADS - 1);
  if (counted)
    assert_counted (mr, 0, 0, 2 * SERIAL_THREADS,
                    kept + 1000 * SERIAL_THREADS + SERIAL_THREADS * (SERIAL_THREADS - 1) / 2);
}

int
main (int argc, char **argv)
{
  const char *plugin_dir = g_getenv ("MEMRES_TEST_PLUGIN_DIR");

  g_test_init (&argc, &argv, NULL);
  if (plugin_dir == NULL)
    g_error ("MEMRES_TEST_PLUGIN_DIR is not set: run through meson test");
  g_setenv ("MEMRES_PLUGIN_PATH", plugin_dir, TRUE);
  tk_register ();

  g_test_add_func ("/threads/lookup-create-allocate", test_concurrent);
  g_test_add_func ("/threads/register-race", test_concurrent_register);
  g_test_add_func ("/threads/last-reference-race", test_last_reference_race);
  g_test_add_func ("/threads/ref-again-race", test_ref_again_race);
  g_test_add_func ("/threads/buffer-count-across-threads", test_buffer_count_across_threads);
  g_test_add_data_func ("/threads/stripes/shared", "tk", test_stripes_shared);
  g_test_add_data_func ("/threads/stripes/shared/counted", "stats>tk", test_stripes_shared);
  g_test_add_data_func ("/threads/stripes/recycled", "host", test_stripes_recycled);
  g_test_add_data_func ("/threads/stripes/recycled/counted", "stats>host", test_stripes_recycled);
  return g_test_run ();
}

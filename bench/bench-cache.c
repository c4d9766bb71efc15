/* memres-bench: the sections written for caching resources (`cache>dmr`, `cache>host`), which
 * work on any resource:
 * (k) thread_pairs: allocate+close pairs of one size on T threads at once, each on its own
 *     stream, the same T threads for every repetition of a row; the time is the wall time of
 *     all threads, per pair, so 1e3 / ns is the aggregate rate in M pairs/s;
 * (l) alternating: pairs whose streams alternate (allocate on S, close, allocate on S2, close);
 * (m) core: the core's own per-buffer cost, as a memres pair on a kind whose slots do nothing
 *     against two indirect calls, and the resource against a second resource named by
 *     --core-base (`host` for `cache>host`). */
#define _GNU_SOURCE /* sched_getaffinity(), pthread_setaffinity_np() */
#include "bench-common.h"

#include <errno.h>

#include <pthread.h>
#include <sched.h>

/* ---- (k) thread pairs -------------------------------------------------------------------- */

/* The threads of one row live through all its repetitions (a pool of workers, as in an
 * application): each thread's first allocation (a front cache of its own, a block taken from
 * the shared cache after an event wait) is paid once, in the calibration, not in every
 * repetition. A repetition releases them through @start and waits for them at @done. */
typedef struct _PairThreads PairThreads;

typedef struct
{
  PairThreads *run;
  BenchRaw *raw;
  gsize size;
  CUstream stream;
  gint64 started_ns, finished_ns;
  GError *error;
} PairThread;

struct _PairThreads
{
  const BenchContext *ctx;
  guint n_threads;
  PairThread *jobs;
  GThread **threads;
  pthread_barrier_t start, done;
  /* set by the main thread before @start, read by the workers after it */
  gboolean use_memres, quit;
  guint64 iterations;
};

static gboolean
pairs_loop (PairThread *job, gboolean use_memres, guint64 iterations, GError **error)
{
  const BenchContext *ctx = job->run->ctx;

  for (guint64 i = 0; i < iterations; i++)
    {
      if (use_memres)
        {
          MemresBuffer *buf = memres_resource_allocate (ctx->mr, job->size, job->stream, error);

          if (buf == NULL || !bench_close_buffer (buf, job->stream, error))
            return FALSE;
        }
      else
        {
          gpointer handle;

          if (!bench_raw_alloc (job->raw, job->size, job->stream, &handle, error)
              || !bench_raw_free_one (job->raw, handle, job->stream, error))
            return FALSE;
        }
    }
  return bench_sync_stream (ctx, job->stream, error);
}

/* --pin-threads: the calling thread onto the @index-th CPU (modulo their number) of those the
 * process may run on; a failure is a warning (the row is measured unpinned). */
static void
pin_to_cpu (guint index)
{
  cpu_set_t allowed, one;
  guint n, seen = 0;

  if (sched_getaffinity (0, sizeof allowed, &allowed) != 0
      || (n = (guint) CPU_COUNT (&allowed)) == 0)
    {
      g_warning ("memres-bench: sched_getaffinity: %s", g_strerror (errno));
      return;
    }
  index %= n;
  for (guint cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET (cpu, &allowed) && seen++ == index)
      {
        CPU_ZERO (&one);
        CPU_SET (cpu, &one);
        if (pthread_setaffinity_np (pthread_self (), sizeof one, &one) != 0)
          g_warning ("memres-bench: cannot pin a worker to CPU %u", cpu);
        return;
      }
}

static gpointer
pair_thread_main (gpointer data)
{
  PairThread *job = data;
  PairThreads *run = job->run;
  const BenchContext *ctx = run->ctx;
  gboolean ok;

  if (ctx->config->pin_threads)
    pin_to_cpu ((guint) (job - run->jobs));
  ok = bench_cuda_check (ctx, ctx->drv->cuCtxSetCurrent (ctx->context), "cuCtxSetCurrent",
                         &job->error);

  for (;;)
    {
      pthread_barrier_wait (&run->start);
      if (run->quit)
        break;
      job->started_ns = bench_now_ns ();
      if (ok && job->error == NULL)
        pairs_loop (job, run->use_memres, run->iterations, &job->error);
      job->finished_ns = bench_now_ns ();
      pthread_barrier_wait (&run->done);
    }
  return NULL;
}

static void
pair_threads_start (PairThreads *run)
{
  run->threads = g_new0 (GThread *, run->n_threads);
  pthread_barrier_init (&run->start, NULL, run->n_threads + 1);
  pthread_barrier_init (&run->done, NULL, run->n_threads + 1);
  for (guint t = 0; t < run->n_threads; t++)
    run->threads[t] = g_thread_new ("bench-pairs", pair_thread_main, &run->jobs[t]);
}

static void
pair_threads_stop (PairThreads *run)
{
  run->quit = TRUE;
  pthread_barrier_wait (&run->start);
  for (guint t = 0; t < run->n_threads; t++)
    {
      g_thread_join (run->threads[t]);
      g_clear_error (&run->jobs[t].error);
    }
  pthread_barrier_destroy (&run->start);
  pthread_barrier_destroy (&run->done);
  g_clear_pointer (&run->threads, g_free);
}

/* One repetition: every thread runs @iterations pairs; the time from the first start to the
 * last finish. */
static gboolean
pair_threads_run (PairThreads *run, gboolean use_memres, guint64 iterations, gint64 *elapsed_ns,
                  GError **error)
{
  gint64 first = G_MAXINT64, last = 0;

  run->use_memres = use_memres;
  run->iterations = iterations;
  pthread_barrier_wait (&run->start);
  pthread_barrier_wait (&run->done);
  for (guint t = 0; t < run->n_threads; t++)
    {
      first = MIN (first, run->jobs[t].started_ns);
      last = MAX (last, run->jobs[t].finished_ns);
      if (run->jobs[t].error != NULL)
        {
          g_propagate_error (error, g_error_copy (run->jobs[t].error));
          return FALSE;
        }
    }
  *elapsed_ns = last - first;
  return TRUE;
}

static gboolean
thread_pairs_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  return pair_threads_run (data, TRUE, iterations, elapsed_ns, error);
}

static gboolean
thread_pairs_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  return pair_threads_run (data, FALSE, iterations, elapsed_ns, error);
}

/**
 * bench_run_thread_pairs:
 * @ctx: the benchmark context
 * @raw: the raw equivalent of @ctx's resource
 * @size: bytes per pair
 *
 * Section (k): allocate+close pairs of @size bytes on each configured number of threads, each
 * with its own non-blocking stream, all on @ctx's resource. The unit is one pair of the
 * aggregate: a row's time is the wall time of the round divided by threads x iterations.
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_thread_pairs (BenchContext *ctx, BenchRaw *raw, gsize size)
{
  const BenchConfig *cfg = ctx->config;
  g_autofree char *size_text = bench_format_size (size);
  g_autofree char *title = g_strdup_printf (
      "allocate + close pairs of %s on T threads, one stream each (aggregate)", size_text);
  BenchSection *section
      = bench_section_new ("thread_pairs", title, "ns/pair", bench_raw_describe (raw));
  guint max_threads = 0, n_streams = 0;
  g_autofree CUstream *streams = NULL;
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < cfg->thread_counts->len; i++)
    max_threads = MAX (max_threads, g_array_index (cfg->thread_counts, guint, i));
  streams = g_new0 (CUstream, max_threads);
  for (; n_streams < max_threads; n_streams++)
    if (!bench_cuda_check (ctx,
                           ctx->drv->cuStreamCreate (&streams[n_streams], CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate", &error))
      break;
  for (guint i = 0; i < cfg->thread_counts->len; i++)
    {
      guint n = g_array_index (cfg->thread_counts, guint, i);
      g_autofree char *label = g_strdup_printf ("threads=%u", n);
      g_autofree char *what = g_strdup_printf ("pairs %s, %u threads", size_text, n);
      BenchRow *row = bench_section_add_row (section, label, size, n);
      PairThreads run = { ctx, n, NULL };
      g_autoptr (GError) local = NULL;

      if (n > n_streams)
        {
          bench_row_set_error (row, error);
          continue;
        }
      run.jobs = g_new0 (PairThread, n);
      for (guint t = 0; t < n; t++)
        {
          run.jobs[t].run = &run;
          run.jobs[t].raw = raw;
          run.jobs[t].size = size;
          run.jobs[t].stream = streams[t];
        }
      pair_threads_start (&run);
      BenchVariant variants[]
          = { { "memres", thread_pairs_memres, &run }, { "raw", thread_pairs_raw, &run } };
      /* units: the pairs of all threads in one iteration */
      if (!bench_measure (ctx, what, variants, 2, n, row, &local))
        bench_row_set_error (row, local);
      pair_threads_stop (&run);
      g_free (run.jobs);
    }
  for (guint i = 0; i < n_streams; i++)
    ctx->drv->cuStreamDestroy (streams[i]);
  return section;
}

/* ---- (l) alternating streams ------------------------------------------------------------- */

typedef struct
{
  const BenchContext *ctx;
  BenchRaw *raw;
  gsize size;
  CUstream streams[2];
} AlternateJob;

static gboolean
alternate_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  AlternateJob *job = data;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      CUstream s = job->streams[i & 1];
      MemresBuffer *buf = memres_resource_allocate (job->ctx->mr, job->size, s, error);

      if (buf == NULL || !bench_close_buffer (buf, s, error))
        return FALSE;
    }
  if (!bench_sync_stream (job->ctx, job->streams[0], error))
    return FALSE;
  return bench_finish (job->ctx, job->streams[1], t0, elapsed_ns, error);
}

static gboolean
alternate_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  AlternateJob *job = data;
  gint64 t0 = bench_now_ns ();
  gpointer handle;

  for (guint64 i = 0; i < iterations; i++)
    {
      CUstream s = job->streams[i & 1];

      if (!bench_raw_alloc (job->raw, job->size, s, &handle, error)
          || !bench_raw_free_one (job->raw, handle, s, error))
        return FALSE;
    }
  if (!bench_sync_stream (job->ctx, job->streams[0], error))
    return FALSE;
  return bench_finish (job->ctx, job->streams[1], t0, elapsed_ns, error);
}

/**
 * bench_run_alternating:
 * @ctx: the benchmark context
 * @raw: the raw equivalent of @ctx's resource
 *
 * Section (l): pairs at each configured size whose stream alternates between two non-blocking
 * streams (the block freed on one is wanted by the other next).
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_alternating (BenchContext *ctx, BenchRaw *raw)
{
  BenchSection *section
      = bench_section_new ("alternating", "allocate + close pairs alternating between two streams",
                           "ns/pair", bench_raw_describe (raw));
  AlternateJob job = { ctx, raw, 0, { NULL, NULL } };
  g_autoptr (GError) error = NULL;

  for (guint i = 0; i < 2; i++)
    if (!bench_cuda_check (ctx, ctx->drv->cuStreamCreate (&job.streams[i], CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate", &error))
      {
        bench_row_set_error (bench_section_add_row (section, "all", 0, 0), error);
        goto out;
      }
  for (guint i = 0; i < ctx->config->sizes->len; i++)
    {
      guint64 size = g_array_index (ctx->config->sizes, guint64, i);
      g_autofree char *label = bench_format_size (size);
      g_autofree char *what = g_strdup_printf ("alternating %s", label);
      BenchRow *row = bench_section_add_row (section, label, size, 0);
      BenchVariant variants[]
          = { { "memres", alternate_memres, &job }, { "raw", alternate_raw, &job } };
      g_autoptr (GError) local = NULL;

      job.size = size;
      if (!bench_measure (ctx, what, variants, 2, 1, row, &local))
        bench_row_set_error (row, local);
    }
out:
  for (guint i = 0; i < 2; i++)
    if (job.streams[i] != NULL)
      ctx->drv->cuStreamDestroy (job.streams[i]);
  return section;
}

/* ---- (m) the core's own cost ------------------------------------------------------------- */

/* A kind whose slots do nothing: a memres pair on it is the core's cost alone. */
static guint64 null_cell[4];

static gboolean
null_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
null_finalize (MemresResource *mr)
{
}

static gboolean
null_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  alloc->address = (guint64) (guintptr) null_cell;
  alloc->size = size;
  return TRUE;
}

static gboolean
null_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  return TRUE;
}

static void
null_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static const MemresResourceOps null_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = null_init,
  .finalize = null_finalize,
  .allocate = null_allocate,
  .deallocate = null_deallocate,
  .query = null_query,
};

static const MemresKindInfo null_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "bench_null",
  .description = "memres-bench: slots that do nothing (the core's own cost)",
  .ops = &null_ops,
};

typedef struct
{
  MemresResource *mr;
  gsize size;
  gboolean (*volatile allocate) (MemresResource *, gsize, MemresStream, MemresAllocation *,
                                 GError **);
  gboolean (*volatile deallocate) (MemresResource *, MemresAllocation *, MemresStream, GError **);
} CoreJob;

static gboolean
core_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CoreJob *job = data;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (job->mr, job->size, NULL, error);

      if (buf == NULL || !bench_close_buffer (buf, NULL, error))
        return FALSE;
    }
  *elapsed_ns = bench_now_ns () - t0;
  return TRUE;
}

/* The two slot calls the core makes, without the core. */
static gboolean
core_calls (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CoreJob *job = data;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      MemresAllocation alloc = { 0, 0, NULL };

      if (!job->allocate (job->mr, job->size, NULL, &alloc, error)
          || !job->deallocate (job->mr, &alloc, NULL, error))
        return FALSE;
    }
  *elapsed_ns = bench_now_ns () - t0;
  return TRUE;
}

/**
 * bench_run_core:
 * @ctx: the benchmark context
 * @base_spec: (nullable): a second resource to compare @ctx's with (`host` for `cache>host`)
 *
 * Section (m): the core's per-buffer cost (memres_resource_allocate + memres_buffer_close +
 * unref on a kind whose slots do nothing, against the two slot calls alone), and pairs of
 * @ctx's resource against pairs of @base_spec's, at each configured size (memres = @ctx's,
 * raw = @base_spec's).
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_core (BenchContext *ctx, const char *base_spec)
{
  g_autofree char *raw_desc = g_strdup_printf (
      "row 'core': the two slot calls without the core; other rows: the same pairs on `%s`",
      base_spec != NULL ? base_spec : "(none)");
  BenchSection *section = bench_section_new ("core",
                                             "the core's own cost, and the resource "
                                             "against a base resource",
                                             "ns/pair", raw_desc);
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) null_mr = NULL;
  g_autoptr (MemresResource) base = NULL;
  BenchRow *row = bench_section_add_row (section, "core (slots do nothing)", 256, 0);

  if (!memres_registry_register_kind (&null_kind, &error)
      && !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_EXISTS))
    bench_row_set_error (row, error);
  else if ((null_mr = memres_resource_new ("bench_null", &error)) == NULL)
    bench_row_set_error (row, error);
  else
    {
      CoreJob job = { null_mr, 256, null_allocate, null_deallocate };
      BenchVariant variants[] = { { "memres", core_memres, &job }, { "raw", core_calls, &job } };

      g_clear_error (&error);
      if (!bench_measure (ctx, "core cost", variants, 2, 1, row, &error))
        bench_row_set_error (row, error);
      row->note = g_strdup ("memres: memres_resource_allocate + memres_buffer_close + "
                            "memres_buffer_unref on kind bench_null; raw: its two slots called "
                            "through pointers; the difference is the core's per-buffer cost");
    }
  if (base_spec == NULL)
    return section;
  g_clear_error (&error);
  base = memres_resource_new (base_spec, &error);
  for (guint i = 0; i < ctx->config->sizes->len; i++)
    {
      guint64 size = g_array_index (ctx->config->sizes, guint64, i);
      g_autofree char *size_text = bench_format_size (size);
      g_autofree char *label = g_strdup_printf ("%s vs %s", size_text, base_spec);
      CoreJob a = { ctx->mr, size, NULL, NULL }, b = { base, size, NULL, NULL };
      BenchVariant variants[] = { { "memres", core_memres, &a }, { "raw", core_memres, &b } };
      g_autoptr (GError) local = NULL;

      row = bench_section_add_row (section, label, size, 0);
      if (base == NULL)
        bench_row_set_error (row, error);
      else if (!bench_measure (ctx, label, variants, 2, 1, row, &local))
        bench_row_set_error (row, local);
    }
  return section;
}

/* memres-bench: the allocation workloads. (a) allocate+close pairs of one size; (b) a random
 * trace of allocations and frees with a bounded number of live buffers (in the spirit of RMM's
 * random-allocations benchmark); (c) that trace on several threads, each with its own stream,
 * sharing the one resource. memres and the raw driver replay exactly the same sequence. */
#include "bench-common.h"

#include <pthread.h>

/* ---- traces -------------------------------------------------------------------------------- */

typedef struct
{
  guint32 slot;
  gboolean is_alloc;
  gsize size;
} TraceOp;

typedef struct
{
  guint n_slots;
  GArray *ops; /* TraceOp */
} Trace;

static void
trace_free (Trace *trace)
{
  if (trace == NULL)
    return;
  g_array_unref (trace->ops);
  g_free (trace);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (Trace, trace_free)

static void
trace_push (Trace *trace, guint32 slot, gboolean is_alloc, gsize size)
{
  TraceOp op = { slot, is_alloc, size };

  g_array_append_val (trace->ops, op);
}

/* Fill @live slots, then 2 x @live random operations (allocate while not full, with
 * probability 1/2), then free what is left in random order. Sizes are uniform in
 * [@min_size, @max_size]. The same @seed gives the same trace. */
static Trace *
trace_new (guint live, guint64 min_size, guint64 max_size, guint32 seed)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (seed);
  g_autofree guint32 *live_slots = g_new (guint32, live);
  g_autofree guint32 *free_slots = g_new (guint32, live);
  guint n_live = 0, n_free = live, i;
  Trace *trace = g_new0 (Trace, 1);

  trace->n_slots = live;
  trace->ops = g_array_new (FALSE, FALSE, sizeof (TraceOp));
  for (i = 0; i < live; i++)
    free_slots[i] = live - 1 - i;

#define ALLOC_ONE()                                                                                \
  G_STMT_START                                                                                     \
  {                                                                                                \
    guint32 s_ = free_slots[--n_free];                                                             \
    gsize size_ = min_size + (gsize) (g_rand_double (rand) * (max_size - min_size + 1));           \
    live_slots[n_live++] = s_;                                                                     \
    trace_push (trace, s_, TRUE, MIN (size_, max_size));                                           \
  }                                                                                                \
  G_STMT_END
#define FREE_ONE()                                                                                 \
  G_STMT_START                                                                                     \
  {                                                                                                \
    guint k_ = g_rand_int_range (rand, 0, n_live);                                                 \
    guint32 s_ = live_slots[k_];                                                                   \
    live_slots[k_] = live_slots[--n_live];                                                         \
    free_slots[n_free++] = s_;                                                                     \
    trace_push (trace, s_, FALSE, 0);                                                              \
  }                                                                                                \
  G_STMT_END

  while (n_live < live)
    ALLOC_ONE ();
  for (i = 0; i < 2 * live; i++)
    {
      if (n_live == 0 || (n_live < live && g_rand_boolean (rand)))
        ALLOC_ONE ();
      else
        FREE_ONE ();
    }
  while (n_live > 0)
    FREE_ONE ();
#undef ALLOC_ONE
#undef FREE_ONE
  return trace;
}

/* The most bytes the trace's buffers hold at once (the sizes asked for). */
static guint64
trace_peak_bytes (const Trace *trace)
{
  const TraceOp *ops = (const TraceOp *) trace->ops->data;
  g_autofree gsize *sizes = g_new0 (gsize, trace->n_slots);
  guint64 live = 0, peak = 0;

  for (guint i = 0; i < trace->ops->len; i++)
    {
      if (ops[i].is_alloc)
        {
          sizes[ops[i].slot] = ops[i].size;
          live += ops[i].size;
          peak = MAX (peak, live);
        }
      else
        live -= sizes[ops[i].slot];
    }
  return peak;
}

/* ---- one replay, memres and raw ------------------------------------------------------------ */

static gboolean
replay_memres (const BenchContext *ctx, const Trace *trace, MemresBuffer **slots, CUstream stream,
               GError **error)
{
  const TraceOp *ops = (const TraceOp *) trace->ops->data;
  gboolean ok = TRUE;
  guint i;

  for (i = 0; ok && i < trace->ops->len; i++)
    {
      if (ops[i].is_alloc)
        ok = (slots[ops[i].slot] = memres_resource_allocate (ctx->mr, ops[i].size, stream, error))
             != NULL;
      else
        {
          ok = bench_close_buffer (slots[ops[i].slot], stream, error);
          slots[ops[i].slot] = NULL;
        }
    }
  for (i = 0; i < trace->n_slots; i++) /* after a failure: leave nothing behind */
    if (slots[i] != NULL)
      {
        bench_close_buffer (slots[i], stream, NULL);
        slots[i] = NULL;
      }
  return ok;
}

static gboolean
replay_raw (BenchRaw *raw, const Trace *trace, gpointer *slots, gboolean *held, CUstream stream,
            GError **error)
{
  const TraceOp *ops = (const TraceOp *) trace->ops->data;
  gboolean ok = TRUE;
  guint i;

  for (i = 0; ok && i < trace->ops->len; i++)
    {
      guint32 s = ops[i].slot;

      if (ops[i].is_alloc)
        ok = held[s] = bench_raw_alloc (raw, ops[i].size, stream, &slots[s], error);
      else
        {
          held[s] = FALSE;
          ok = bench_raw_free_one (raw, slots[s], stream, error);
        }
    }
  for (i = 0; i < trace->n_slots; i++)
    if (held[i])
      {
        bench_raw_free_one (raw, slots[i], stream, NULL);
        held[i] = FALSE;
      }
  return ok;
}

/* ---- (a) pairs ----------------------------------------------------------------------------- */

typedef struct
{
  const BenchContext *ctx;
  BenchRaw *raw;
  gsize size;
} PairJob;

static gboolean
pairs_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  PairJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (ctx->mr, job->size, ctx->stream, error);

      if (buf == NULL || !bench_close_buffer (buf, ctx->stream, error))
        return FALSE;
    }
  return bench_finish (ctx, ctx->stream, t0, elapsed_ns, error);
}

static gboolean
pairs_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  PairJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();
  gpointer handle;

  for (guint64 i = 0; i < iterations; i++)
    if (!bench_raw_alloc (job->raw, job->size, ctx->stream, &handle, error)
        || !bench_raw_free_one (job->raw, handle, ctx->stream, error))
      return FALSE;
  return bench_finish (ctx, ctx->stream, t0, elapsed_ns, error);
}

/**
 * bench_run_pairs:
 * @ctx: the benchmark context
 * @raw: the raw equivalent of @ctx's resource
 *
 * Section (a): allocate+close pairs at each configured size, memres against raw.
 *
 * Returns: (transfer full): the section; failed rows carry their error
 */
BenchSection *
bench_run_pairs (BenchContext *ctx, BenchRaw *raw)
{
  BenchSection *section = bench_section_new ("pairs", "allocate + close pairs, one stream",
                                             "ns/pair", bench_raw_describe (raw));

  for (guint i = 0; i < ctx->config->sizes->len; i++)
    {
      guint64 size = g_array_index (ctx->config->sizes, guint64, i);
      g_autofree char *label = bench_format_size (size);
      BenchRow *row = bench_section_add_row (section, label, size, 0);
      PairJob job = { ctx, raw, size };
      BenchVariant variants[] = { { "memres", pairs_memres, &job }, { "raw", pairs_raw, &job } };
      g_autoptr (GError) error = NULL;
      g_autofree char *what = g_strdup_printf ("pairs %s", label);

      if (!bench_measure (ctx, what, variants, 2, 1, row, &error))
        bench_row_set_error (row, error);
    }
  return section;
}

/* ---- (h) cross-stream close ---------------------------------------------------------------- */

typedef struct
{
  const BenchContext *ctx;
  BenchRaw *raw;
  gsize size;
  CUstream other; /* the closing stream */
  CUevent event;  /* the raw variant's, reused */
} CrossJob;

/* Allocate on the context's stream, close on the other one: memres orders the free after the
 * allocating stream (an event per close). */
static gboolean
cross_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CrossJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (ctx->mr, job->size, ctx->stream, error);

      if (buf == NULL || !bench_close_buffer (buf, job->other, error))
        return FALSE;
    }
  return bench_sync_stream (ctx, job->other, error)
         && bench_finish (ctx, ctx->stream, t0, elapsed_ns, error);
}

/* What a careful caller writes by hand: one event, recorded on the allocating stream and waited
 * for by the freeing stream before each free. */
static gboolean
cross_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CrossJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();
  gpointer handle;

  for (guint64 i = 0; i < iterations; i++)
    if (!bench_raw_alloc (job->raw, job->size, ctx->stream, &handle, error)
        || !bench_cuda_check (ctx, ctx->drv->cuEventRecord (job->event, ctx->stream),
                              "cuEventRecord", error)
        || !bench_cuda_check (ctx, ctx->drv->cuStreamWaitEvent (job->other, job->event, 0),
                              "cuStreamWaitEvent", error)
        || !bench_raw_free_one (job->raw, handle, job->other, error))
      return FALSE;
  return bench_sync_stream (ctx, job->other, error)
         && bench_finish (ctx, ctx->stream, t0, elapsed_ns, error);
}

/* The same-stream memres pair, for reference in the same repetitions. */
static gboolean
cross_same_stream (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CrossJob *job = data;
  PairJob pair = { job->ctx, job->raw, job->size };

  return pairs_memres (&pair, iterations, elapsed_ns, error);
}

/**
 * bench_run_cross_stream:
 * @ctx: the benchmark context
 * @raw: the raw equivalent of @ctx's resource
 *
 * Section (h): allocate on one stream, close on another, at each configured size: memres (which
 * records an event and makes the closing stream wait on it) against the same event calls written
 * by hand with one reused event, and memres's same-stream pair as a third column.
 *
 * Returns: (transfer full): the section; failed rows carry their error
 */
BenchSection *
bench_run_cross_stream (BenchContext *ctx, BenchRaw *raw)
{
  BenchSection *section = bench_section_new (
      "cross_stream", "allocate on one stream, close on another", "ns/pair",
      "alloc on A, cuEventRecord(A), cuStreamWaitEvent(B), free on B, one event reused; "
      "same_stream: memres allocate+close on A");
  CrossJob job = { ctx, raw, 0, NULL, NULL };
  g_autoptr (GError) error = NULL;

  if (!bench_cuda_check (ctx, ctx->drv->cuStreamCreate (&job.other, CU_STREAM_NON_BLOCKING),
                         "cuStreamCreate", &error)
      || !bench_cuda_check (ctx, ctx->drv->cuEventCreate (&job.event, CU_EVENT_DISABLE_TIMING),
                            "cuEventCreate", &error))
    {
      bench_row_set_error (bench_section_add_row (section, "all", 0, 0), error);
      goto out;
    }
  for (guint i = 0; i < ctx->config->sizes->len; i++)
    {
      guint64 size = g_array_index (ctx->config->sizes, guint64, i);
      g_autofree char *label = bench_format_size (size);
      BenchRow *row = bench_section_add_row (section, label, size, 0);
      BenchVariant variants[] = { { "memres", cross_memres, &job },
                                  { "raw", cross_raw, &job },
                                  { "same_stream", cross_same_stream, &job } };
      g_autofree char *what = g_strdup_printf ("cross-stream %s", label);

      job.size = size;
      g_clear_error (&error);
      if (!bench_measure (ctx, what, variants, 3, 1, row, &error))
        bench_row_set_error (row, error);
    }
out:
  if (job.event != NULL)
    ctx->drv->cuEventDestroy (job.event);
  if (job.other != NULL)
    ctx->drv->cuStreamDestroy (job.other);
  return section;
}

/* ---- (b) random ---------------------------------------------------------------------------- */

typedef struct
{
  const BenchContext *ctx;
  BenchRaw *raw;
  const Trace *trace;
  CUstream stream;
  MemresBuffer **buffers;
  gpointer *handles;
  gboolean *held;
} ReplayJob;

static gboolean
random_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ReplayJob *job = data;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    if (!replay_memres (job->ctx, job->trace, job->buffers, job->stream, error))
      return FALSE;
  return bench_finish (job->ctx, job->stream, t0, elapsed_ns, error);
}

static gboolean
random_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ReplayJob *job = data;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    if (!replay_raw (job->raw, job->trace, job->handles, job->held, job->stream, error))
      return FALSE;
  return bench_finish (job->ctx, job->stream, t0, elapsed_ns, error);
}

static void
replay_job_init (ReplayJob *job, const BenchContext *ctx, BenchRaw *raw, const Trace *trace,
                 CUstream stream)
{
  job->ctx = ctx;
  job->raw = raw;
  job->trace = trace;
  job->stream = stream;
  job->buffers = g_new0 (MemresBuffer *, trace->n_slots);
  job->handles = g_new0 (gpointer, trace->n_slots);
  job->held = g_new0 (gboolean, trace->n_slots);
}

static void
replay_job_clear (ReplayJob *job)
{
  g_free (job->buffers);
  g_free (job->handles);
  g_free (job->held);
}

static char *
random_label (const BenchConfig *cfg, guint live)
{
  g_autofree char *lo = bench_format_size (cfg->min_size);
  g_autofree char *hi = bench_format_size (cfg->max_size);

  return g_strdup_printf ("live=%u, %s-%s", live, lo, hi);
}

/**
 * bench_run_random:
 * @ctx: the benchmark context
 * @raw: the raw equivalent of @ctx's resource
 *
 * Section (b): one random trace on @ctx's stream, memres against raw.
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_random (BenchContext *ctx, BenchRaw *raw)
{
  const BenchConfig *cfg = ctx->config;
  BenchSection *section = bench_section_new ("random", "random allocations and frees, one stream",
                                             "ns/op", bench_raw_describe (raw));
  g_autoptr (Trace) trace = trace_new (cfg->live, cfg->min_size, cfg->max_size, cfg->seed);
  g_autofree char *label = random_label (cfg, cfg->live);
  BenchRow *row = bench_section_add_row (section, label, 0, 1);
  g_autoptr (GError) error = NULL;
  ReplayJob job;

  replay_job_init (&job, ctx, raw, trace, ctx->stream);
  BenchVariant variants[] = { { "memres", random_memres, &job }, { "raw", random_raw, &job } };
  if (!bench_measure (ctx, "random", variants, 2, trace->ops->len, row, &error))
    bench_row_set_error (row, error);
  row->note = g_strdup_printf ("%u operations per trace, seed %u", trace->ops->len, cfg->seed);
  /* Memory: one more replay between a reset of the high-water marks and their reading. */
  {
    MemresStats stats;
    guint64 peak = trace_peak_bytes (trace);

    if (memres_resource_reset_stats (ctx->mr, NULL)
        && replay_memres (ctx, trace, job.buffers, ctx->stream, NULL)
        && bench_sync_stream (ctx, ctx->stream, NULL)
        && memres_resource_get_stats (ctx->mr, &stats, NULL) && peak > 0)
      {
        char *note = g_strdup_printf (
            "%s; peak reserved %.1f MiB (the resource's high-water mark over one replay), "
            "peak requested %.1f MiB (the trace's live bytes): reserved/requested %.3f",
            row->note, stats.reserved_high / 1048576.0, peak / 1048576.0,
            (gdouble) stats.reserved_high / peak);

        g_free (row->note);
        row->note = note;
        row->peak_reserved = stats.reserved_high;
        row->peak_requested = peak;
      }
  }
  replay_job_clear (&job);
  return section;
}

/* ---- (c) threads --------------------------------------------------------------------------- */

typedef struct
{
  ReplayJob replay;
  gboolean use_memres;
  guint64 iterations;
  pthread_barrier_t *barrier;
  gint64 started_ns, finished_ns;
  GError *error;
} ThreadJob;

typedef struct
{
  BenchContext *ctx;
  guint n_threads;
  ThreadJob *jobs;
  gboolean use_memres;
} ThreadRun;

static gpointer
thread_main (gpointer data)
{
  ThreadJob *job = data;
  const BenchContext *ctx = job->replay.ctx;
  gboolean ok = bench_cuda_check (ctx, ctx->drv->cuCtxSetCurrent (ctx->context), "cuCtxSetCurrent",
                                  &job->error);
  gint64 dummy;

  pthread_barrier_wait (job->barrier);
  job->started_ns = bench_now_ns ();
  if (ok)
    ok = job->use_memres ? random_memres (&job->replay, job->iterations, &dummy, &job->error)
                         : random_raw (&job->replay, job->iterations, &dummy, &job->error);
  job->finished_ns = bench_now_ns ();
  return NULL;
}

static gboolean
threads_run (ThreadRun *run, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  g_autofree GThread **threads = g_new0 (GThread *, run->n_threads);
  pthread_barrier_t barrier;
  gint64 first = G_MAXINT64, last = 0;
  gboolean ok = TRUE;
  guint t;

  pthread_barrier_init (&barrier, NULL, run->n_threads + 1);
  for (t = 0; t < run->n_threads; t++)
    {
      ThreadJob *job = &run->jobs[t];

      job->use_memres = run->use_memres;
      job->iterations = iterations;
      job->barrier = &barrier;
      g_clear_error (&job->error);
      threads[t] = g_thread_new ("bench", thread_main, job);
    }
  pthread_barrier_wait (&barrier);
  for (t = 0; t < run->n_threads; t++)
    {
      g_thread_join (threads[t]);
      first = MIN (first, run->jobs[t].started_ns);
      last = MAX (last, run->jobs[t].finished_ns);
      if (ok && run->jobs[t].error != NULL)
        {
          g_propagate_error (error, run->jobs[t].error);
          run->jobs[t].error = NULL;
          ok = FALSE;
        }
      g_clear_error (&run->jobs[t].error);
    }
  pthread_barrier_destroy (&barrier);
  /* From the first thread's start to the last one's end: the main thread may be scheduled out
   * right after the barrier, so it does not take the time itself. */
  *elapsed_ns = last - first;
  return ok;
}

static gboolean
threads_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ThreadRun *run = data;

  run->use_memres = TRUE;
  return threads_run (run, iterations, elapsed_ns, error);
}

static gboolean
threads_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ThreadRun *run = data;

  run->use_memres = FALSE;
  return threads_run (run, iterations, elapsed_ns, error);
}

static void
measure_threads (BenchContext *ctx, BenchRaw *raw, BenchSection *section, guint n_threads,
                 CUstream *streams)
{
  const BenchConfig *cfg = ctx->config;
  guint live = MAX (1, cfg->live / n_threads);
  g_autofree char *label = g_strdup_printf ("threads=%u", n_threads);
  g_autofree char *what = g_strdup_printf ("random, %u threads", n_threads);
  BenchRow *row = bench_section_add_row (section, label, 0, n_threads);
  g_autoptr (GPtrArray) traces = g_ptr_array_new_with_free_func ((GDestroyNotify) trace_free);
  ThreadRun run = { ctx, n_threads, g_new0 (ThreadJob, n_threads), FALSE };
  g_autoptr (GError) error = NULL;
  guint64 units = 0;

  for (guint t = 0; t < n_threads; t++)
    {
      Trace *trace = trace_new (live, cfg->min_size, cfg->max_size, cfg->seed + t);

      g_ptr_array_add (traces, trace);
      replay_job_init (&run.jobs[t].replay, ctx, raw, trace, streams[t]);
      units += trace->ops->len;
    }
  BenchVariant variants[] = { { "memres", threads_memres, &run }, { "raw", threads_raw, &run } };
  if (!bench_measure (ctx, what, variants, 2, units, row, &error))
    bench_row_set_error (row, error);
  row->note = g_strdup_printf ("%u live per thread, %" G_GUINT64_FORMAT " operations per round",
                               live, units);
  for (guint t = 0; t < n_threads; t++)
    replay_job_clear (&run.jobs[t].replay);
  g_free (run.jobs);
}

/**
 * bench_run_threads:
 * @ctx: the benchmark context
 * @raw: the raw equivalent of @ctx's resource
 *
 * Section (c): the random workload on 1, 2, 4, ... threads, each on its own non-blocking
 * stream, all on @ctx's resource. The live allocations are split between the threads (the
 * total stays the configured number); per-thread traces use seeds seed, seed+1, ...
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_threads (BenchContext *ctx, BenchRaw *raw)
{
  const BenchConfig *cfg = ctx->config;
  BenchSection *section
      = bench_section_new ("threads", "random workload on T threads, one stream each", "ns/op",
                           bench_raw_describe (raw));
  guint max_threads = 0, n_streams = 0, i;
  g_autofree CUstream *streams = NULL;
  g_autoptr (GError) error = NULL;

  for (i = 0; i < cfg->thread_counts->len; i++)
    max_threads = MAX (max_threads, g_array_index (cfg->thread_counts, guint, i));
  streams = g_new0 (CUstream, max_threads);
  for (; n_streams < max_threads; n_streams++)
    if (!bench_cuda_check (ctx,
                           ctx->drv->cuStreamCreate (&streams[n_streams], CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate", &error))
      break;
  for (i = 0; i < cfg->thread_counts->len; i++)
    {
      guint n = g_array_index (cfg->thread_counts, guint, i);

      if (n > n_streams)
        {
          g_autofree char *label = g_strdup_printf ("threads=%u", n);

          bench_row_set_error (bench_section_add_row (section, label, 0, n), error);
          continue;
        }
      measure_threads (ctx, raw, section, n, streams);
    }
  for (i = 0; i < n_streams; i++)
    ctx->drv->cuStreamDestroy (streams[i]);
  return section;
}

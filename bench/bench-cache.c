/* memres-bench: the sections written for caching resources (`cache>dmr`, `cache>host`), which
 * work on any resource:
 * (k) thread_pairs: allocate+close pairs of one size on T threads at once, each on its own
 *     stream, the same T threads for every repetition of a row; the time is the wall time of
 *     all threads, per pair, so 1e3 / ns is the aggregate rate in M pairs/s; beside it the
 *     machine's ceiling (bench-ceiling.c) on the same threads;
 * (l) alternating: pairs whose streams alternate (allocate on S, close, allocate on S2, close);
 * (m) core: the core's own per-buffer cost, as a memres pair on a kind whose slots do nothing
 *     against two indirect calls, and the resource against a second resource named by
 *     --core-base (`host` for `cache>host`). */
#define _GNU_SOURCE /* sched_getaffinity(), pthread_setaffinity_np() */
#include "bench-common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include <pthread.h>
#include <sched.h>

/* ---- (k) thread pairs -------------------------------------------------------------------- */

/* The threads of one row live through all its repetitions (a pool of workers, as in an
 * application): each thread's first allocation (a front cache of its own, a block taken from
 * the shared cache after an event wait) is paid once, in the calibration, not in every
 * repetition.
 *
 * A repetition: the main thread wakes the workers (@start, a pthread barrier: their wake-ups
 * are spread over tens of microseconds, more on a VM); each runs a warm-up of its own (1/32 of
 * the repetition's count, not timed: its core leaves idle and its lines come back), then
 * arrives at a spin barrier; the last to arrive reads the clock and releases them all at once.
 * The time is from that release to the last thread's end (its stream synchronized), while the
 * main thread sleeps in @done. Until h-ceiling the time ran from the first thread's start to
 * the last one's end, with no warm-up: the wake-up's spread was timed, and at 16 threads the
 * calibration settled on repetitions of 3.7 ms for the 20 ms target (H100, 2026-12-06: 78,636
 * pairs a thread at 2.92 ns a pair of the aggregate), as a count calibrated on runs whose fixed
 * cost is timed does. Repetitions now last at least 100 ms (bench_run_thread_pairs()). */
typedef struct _PairThreads PairThreads;

typedef enum
{
  PAIR_MEMRES,
  PAIR_RAW,
  PAIR_CEILING, /* bench-ceiling.c: a loop of the pair's length that shares nothing */
} PairVariant;

/* One worker's state, in 128 bytes of its own (the pair of lines x86's adjacent-line
 * prefetcher fetches together): its loop reads it at every pair, and a neighbour's end of a
 * repetition (@finished_ns) would otherwise take the line away from it (bench/pair-lines.py
 * --bench found the array's lines shared by two threads each). bench/pair-lines.c's BenchState
 * copies this layout for that check: change both together. */
typedef struct
{
  PairThreads *run;
  BenchRaw *raw;
  gsize size;
  CUstream stream;
  gint64 finished_ns;
  guint64 sink; /* the ceiling loop's result, kept */
  GError *error;
} __attribute__ ((aligned (128))) PairThread;

struct _PairThreads
{
  const BenchContext *ctx;
  guint n_threads;
  PairThread *jobs;
  GThread **threads;
  pthread_barrier_t start, done;
  guint ceiling_rounds;
  /* set by the main thread before @start, read by the workers after it */
  PairVariant variant;
  gboolean quit;
  guint64 iterations, warmup;
  gint generation;
  /* the spin barrier: workers past their warm-up; the last one sets @released_ns, then
   * @release to @generation */
  gint arrived, release;
  gint64 released_ns;
  /* per memres repetition (calibration and warm-up included): the last thread's end minus
   * the first one's, over the time from the release (the spread of the threads' ends) */
  GArray *memres_spread;
};

static gboolean
pairs_loop (PairThread *job, PairVariant variant, guint64 iterations, GError **error)
{
  const BenchContext *ctx = job->run->ctx;

  if (variant == PAIR_CEILING)
    {
      job->sink += bench_ceiling_run (job->run->ceiling_rounds, iterations);
      return TRUE;
    }
  for (guint64 i = 0; i < iterations; i++)
    {
      if (variant == PAIR_MEMRES)
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

/* The spin barrier after the warm-up: the last worker to arrive takes the time and releases
 * the others, who spin (yielding after a while, in case the workers outnumber the CPUs). */
static void
wait_for_release (PairThreads *run, gint generation)
{
  if (g_atomic_int_add (&run->arrived, 1) == (gint) run->n_threads - 1)
    {
      run->released_ns = bench_now_ns ();
      g_atomic_int_set (&run->release, generation); /* a full barrier: publishes released_ns */
      return;
    }
  for (guint spins = 0; g_atomic_int_get (&run->release) != generation; spins++)
    if (spins >= 4096)
      sched_yield ();
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
      /* a failed warm-up still arrives: the others wait for every thread */
      if (ok && job->error == NULL)
        pairs_loop (job, run->variant, run->warmup, &job->error);
      wait_for_release (run, run->generation);
      if (ok && job->error == NULL)
        pairs_loop (job, run->variant, run->iterations, &job->error);
      job->finished_ns = bench_now_ns ();
      pthread_barrier_wait (&run->done);
    }
  return NULL;
}

static void
pair_threads_start (PairThreads *run)
{
  run->threads = g_new0 (GThread *, run->n_threads);
  run->memres_spread = g_array_new (FALSE, FALSE, sizeof (gdouble));
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
  g_clear_pointer (&run->memres_spread, g_array_unref);
}

/* One repetition: every thread runs its warm-up, then, released together, @iterations pairs
 * (or ceiling units); the time from the release to the last thread's end. */
static gboolean
pair_threads_run (PairThreads *run, PairVariant variant, guint64 iterations, gint64 *elapsed_ns,
                  GError **error)
{
  gint64 first = G_MAXINT64, last = 0;

  run->variant = variant;
  run->iterations = iterations;
  run->warmup = MAX (1, iterations / 32);
  run->generation++;
  run->arrived = 0;
  pthread_barrier_wait (&run->start);
  pthread_barrier_wait (&run->done);
  for (guint t = 0; t < run->n_threads; t++)
    {
      first = MIN (first, run->jobs[t].finished_ns);
      last = MAX (last, run->jobs[t].finished_ns);
      if (run->jobs[t].error != NULL)
        {
          g_propagate_error (error, g_error_copy (run->jobs[t].error));
          return FALSE;
        }
    }
  *elapsed_ns = last - run->released_ns;
  if (variant == PAIR_MEMRES && *elapsed_ns > 0)
    {
      gdouble spread = (gdouble) (last - first) / *elapsed_ns;

      g_array_append_val (run->memres_spread, spread);
    }
  return TRUE;
}

static gboolean
thread_pairs_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  return pair_threads_run (data, PAIR_MEMRES, iterations, elapsed_ns, error);
}

static gboolean
thread_pairs_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  return pair_threads_run (data, PAIR_RAW, iterations, elapsed_ns, error);
}

static gboolean
thread_pairs_ceiling (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  return pair_threads_run (data, PAIR_CEILING, iterations, elapsed_ns, error);
}

/* The one-thread pair's time on the main thread, on @stream (warmed up, then the median of 5
 * runs of about 20 ms), in the thread's CPU time, to calibrate the ceiling's unit; 0 when a
 * pair fails. */
static gdouble
one_thread_pair_ns (const BenchContext *ctx, gsize size, CUstream stream)
{
  PairThreads run = { ctx, 1 };
  PairThread job = { &run, NULL, size, stream };
  gdouble runs[5], ns = 0;
  guint64 n = 1000;
  gint64 t0;

  /* grow N until a run lasts 5 ms */
  for (;;)
    {
      t0 = bench_thread_cpu_ns ();
      if (!pairs_loop (&job, PAIR_MEMRES, n, &job.error))
        break;
      ns = (gdouble) (bench_thread_cpu_ns () - t0) / n;
      if (ns * n >= 5e6 || n >= (G_GUINT64_CONSTANT (1) << 30))
        break;
      n *= 4;
    }
  n = (guint64) MAX (1, 20e6 / MAX (ns, 1));
  for (guint i = 0; i < G_N_ELEMENTS (runs) && job.error == NULL; i++)
    {
      t0 = bench_thread_cpu_ns ();
      if (pairs_loop (&job, PAIR_MEMRES, n, &job.error))
        runs[i] = (gdouble) (bench_thread_cpu_ns () - t0) / n;
    }
  if (job.error != NULL)
    {
      g_clear_error (&job.error);
      return 0;
    }
  return bench_median (runs, G_N_ELEMENTS (runs));
}

/* The median of the last @n values of @values (the measured repetitions), or NAN. */
static gdouble
median_of_last (GArray *values, guint n)
{
  g_autofree gdouble *v = NULL;

  if (n == 0 || values->len < n)
    return NAN;
  v = g_memdup2 (&g_array_index (values, gdouble, values->len - n), n * sizeof (gdouble));
  return bench_median (v, n);
}

/* Each row's note: its aggregate over the one-thread row's, for the pair and the ceiling. */
static void
note_scaling (BenchSection *section)
{
  const BenchRow *one = NULL;

  for (guint i = 0; i < section->rows->len && one == NULL; i++)
    {
      const BenchRow *row = g_ptr_array_index (section->rows, i);

      if (row->threads == 1 && row->error == NULL)
        one = row;
    }
  for (guint i = 0; one != NULL && i < section->rows->len; i++)
    {
      BenchRow *row = g_ptr_array_index (section->rows, i);
      int m = bench_row_variant_index (row, "memres"), c = bench_row_variant_index (row, "ceiling");
      int m1 = bench_row_variant_index (one, "memres"),
          c1 = bench_row_variant_index (one, "ceiling");
      char *note;

      if (row->error != NULL || m < 0 || c < 0 || m1 < 0 || c1 < 0)
        continue;
      note = g_strdup_printf ("scaling over 1 thread: memres %.2fx, ceiling %.2fx%s%s",
                              one->summaries[m1].median / row->summaries[m].median,
                              one->summaries[c1].median / row->summaries[c].median,
                              row->note ? "; " : "", row->note ? row->note : "");
      g_free (row->note);
      row->note = note;
    }
}

/**
 * bench_run_thread_pairs:
 * @ctx: the benchmark context
 * @raw: the raw equivalent of @ctx's resource
 * @size: bytes per pair
 *
 * Section (k): allocate+close pairs of @size bytes on each configured number of threads, each
 * with its own non-blocking stream, all on @ctx's resource. The unit is one pair of the
 * aggregate: a row's time is the wall time of the round (from the release of the warmed-up
 * threads to the last one's end) divided by threads x iterations. A third variant, "ceiling",
 * runs bench-ceiling.c's loop (no shared state, calibrated to the one-thread pair's time) on
 * the same threads: each row's note gives both aggregates over the one-thread row's. A
 * repetition lasts at least 100 ms (--target-ms if longer; --quick keeps its own).
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_thread_pairs (BenchContext *ctx, BenchRaw *raw, gsize size)
{
  const BenchConfig *cfg = ctx->config;
  BenchConfig long_cfg = *cfg;
  BenchContext long_ctx = *ctx;
  g_autofree char *size_text = bench_format_size (size);
  g_autofree char *title = g_strdup_printf (
      "allocate + close pairs of %s on T threads, one stream each (aggregate)", size_text);
  BenchSection *section
      = bench_section_new ("thread_pairs", title, "ns/pair", bench_raw_describe (raw));
  guint max_threads = 0, n_streams = 0, rounds = 1;
  gdouble pair_ns = 0, unit_ns = 0;
  g_autofree CUstream *streams = NULL;
  g_autofree char *topology = bench_cpu_topology ();
  g_autoptr (GError) error = NULL;

  /* repetitions of at least 100 ms: the release and the last end a small part of them; the row
   * budget grows to hold the configured repetitions of the three variants */
  if (!cfg->quick)
    long_cfg.target_ms = MAX (cfg->target_ms, 100);
  long_cfg.row_budget_ms
      = MAX (cfg->row_budget_ms, 3 * long_cfg.target_ms * (MAX (cfg->repetitions, 1) + 1));
  long_ctx.config = &long_cfg;

  for (guint i = 0; i < cfg->thread_counts->len; i++)
    max_threads = MAX (max_threads, g_array_index (cfg->thread_counts, guint, i));
  streams = g_new0 (CUstream, max_threads);
  for (; n_streams < max_threads; n_streams++)
    if (!bench_cuda_check (ctx,
                           ctx->drv->cuStreamCreate (&streams[n_streams], CU_STREAM_NON_BLOCKING),
                           "cuStreamCreate", &error))
      break;
  if (n_streams > 0)
    pair_ns = one_thread_pair_ns (ctx, size, streams[0]);
  rounds = bench_ceiling_calibrate (pair_ns > 0 ? pair_ns : 30, &unit_ns);
  section->note = g_strdup_printf ("%s; ceiling: %u rounds of a private free-list pop+push a "
                                   "unit, %.1f ns on the main thread against its pair's %.1f ns",
                                   topology, rounds, unit_ns, pair_ns);
  bench_progress (ctx, "  %s", section->note);
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
      run.jobs = g_aligned_alloc0 (n, sizeof (PairThread), 128);
      run.ceiling_rounds = rounds;
      for (guint t = 0; t < n; t++)
        {
          run.jobs[t].run = &run;
          run.jobs[t].raw = raw;
          run.jobs[t].size = size;
          run.jobs[t].stream = streams[t];
        }
      pair_threads_start (&run);
      BenchVariant variants[] = { { "memres", thread_pairs_memres, &run },
                                  { "raw", thread_pairs_raw, &run },
                                  { "ceiling", thread_pairs_ceiling, &run } };
      /* units: the pairs of all threads in one iteration */
      if (!bench_measure (&long_ctx, what, variants, G_N_ELEMENTS (variants), n, row, &local))
        bench_row_set_error (row, local);
      else if (n > 1)
        row->note = g_strdup_printf (
            "threads' ends spread over %.1f%% of the memres wall (median)",
            100 * median_of_last (run.memres_spread, row->summaries[0].repetitions));
      pair_threads_stop (&run);
      g_aligned_free (run.jobs);
    }
  note_scaling (section);
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

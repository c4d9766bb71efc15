/* memres-bench: timing. Calibrates each variant's iteration count so that one repetition of it
 * lasts about the target time (a variant 50 times faster than the other runs 50 times as many
 * iterations: with one count for both, the fast one's repetition would last a fiftieth of the
 * target, and on T threads the wake-up of the threads would be most of what it measures), then
 * runs the variants interleaved (A B, B A, A B, ...) so that drift of the
 * machine (clocks, pool state, other tenants) falls on all of them alike. The ratio of memres to
 * raw is taken per repetition, where the two ran back to back, and its median reported: on the
 * GPU machines the speed of a process shifts between two levels about 1.6 times apart for
 * seconds at a time, and a ratio of the two medians then compares samples of different levels
 * (raw against raw, measured so, came out anywhere from 0.84 to 1.04). */
#include "bench-common.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

gint64
bench_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (gint64) ts.tv_sec * G_GINT64_CONSTANT (1000000000) + ts.tv_nsec;
}

gint64
bench_thread_cpu_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_THREAD_CPUTIME_ID, &ts);
  return (gint64) ts.tv_sec * G_GINT64_CONSTANT (1000000000) + ts.tv_nsec;
}

gboolean
bench_sync_stream (const BenchContext *ctx, CUstream stream, GError **error)
{
  return bench_cuda_check (ctx, ctx->drv->cuStreamSynchronize (stream), "cuStreamSynchronize",
                           error);
}

gboolean
bench_finish (const BenchContext *ctx, CUstream stream, gint64 t0, gint64 *elapsed_ns,
              GError **error)
{
  if (!bench_sync_stream (ctx, stream, error))
    return FALSE;
  *elapsed_ns = bench_now_ns () - t0;
  return TRUE;
}

gboolean
bench_close_buffer (MemresBuffer *buf, CUstream stream, GError **error)
{
  gboolean ok = memres_buffer_close (buf, stream, error);

  memres_buffer_unref (buf);
  return ok;
}

void
bench_progress (const BenchContext *ctx, const char *format, ...)
{
  va_list args;

  if (ctx->config->quiet)
    return;
  va_start (args, format);
  fputs ("memres-bench: ", stderr);
  vfprintf (stderr, format, args);
  fputc ('\n', stderr);
  va_end (args);
}

static int
compare_doubles (gconstpointer a, gconstpointer b)
{
  gdouble x = *(const gdouble *) a, y = *(const gdouble *) b;

  return (x > y) - (x < y);
}

/* Linear interpolation between the order statistics of sorted @v. */
static gdouble
quantile (const gdouble *v, guint n, gdouble q)
{
  gdouble pos = q * (n - 1);
  guint lo = (guint) pos;
  gdouble frac = pos - lo;

  if (lo + 1 >= n)
    return v[n - 1];
  return v[lo] + frac * (v[lo + 1] - v[lo]);
}

/* The median of @v's @n values (sorted in place), NAN for none. */
gdouble
bench_median (gdouble *v, guint n)
{
  if (n == 0)
    return NAN;
  qsort (v, n, sizeof (gdouble), compare_doubles);
  return quantile (v, n, 0.5);
}

static void
summarize (gdouble *samples, guint n, guint64 iterations, BenchSummary *out)
{
  qsort (samples, n, sizeof (gdouble), compare_doubles);
  out->min = samples[0];
  out->max = samples[n - 1];
  out->median = quantile (samples, n, 0.5);
  out->q1 = quantile (samples, n, 0.25);
  out->q3 = quantile (samples, n, 0.75);
  out->repetitions = n;
  out->iterations = iterations;
}

/* The median over the repetitions of @v's time over raw's (@r) in the same repetition.
 * @samples: unsorted, variant-major; @ratios: @reps of room. */
static gdouble
paired_median (const gdouble *samples, guint reps, int v, int r, gdouble *ratios)
{
  for (guint i = 0; i < reps; i++)
    ratios[i] = samples[v * reps + i] / samples[r * reps + i];
  qsort (ratios, reps, sizeof (gdouble), compare_doubles);
  return quantile (ratios, reps, 0.5);
}

/* The median and quartiles over the repetitions of memres's time over raw's in the same
 * repetition, into @row (its variant names set); left NAN when the row lacks either. And each
 * variant's median the same way (row->variant_ratio), NAN without raw. @samples: unsorted,
 * variant-major. */
static void
paired_ratio (const gdouble *samples, guint reps, BenchRow *row)
{
  int m = bench_row_variant_index (row, "memres");
  int r = bench_row_variant_index (row, "raw");
  g_autofree gdouble *ratios = NULL;

  for (guint v = 0; v < BENCH_MAX_VARIANTS; v++)
    row->variant_ratio[v] = NAN;
  if (r < 0)
    return;
  ratios = g_new (gdouble, reps);
  for (guint v = 0; v < row->n_variants; v++)
    row->variant_ratio[v] = paired_median (samples, reps, (int) v, r, ratios);
  if (m < 0)
    return;
  row->ratio = paired_median (samples, reps, m, r, ratios);
  row->ratio_q1 = quantile (ratios, reps, 0.25);
  row->ratio_q3 = quantile (ratios, reps, 0.75);
}

static gboolean
run_variant (const BenchVariant *v, guint64 iterations, gint64 *elapsed, GError **error)
{
  *elapsed = 0;
  if (!v->func (v->data, iterations, elapsed, error))
    return FALSE;
  if (*elapsed <= 0)
    *elapsed = 1;
  return TRUE;
}

/**
 * bench_measure:
 * @ctx: the benchmark context (its config gives repetitions, target and budget)
 * @what: the row's name, for progress
 * @variants: (array length=n_variants): what to measure
 * @n_variants: 1 to %BENCH_MAX_VARIANTS
 * @units: units one iteration counts (1 for a pair; the operations of a trace)
 * @row: receives one summary per variant, in ns per unit
 * @error: return location for a #GError: the first failing variant's error
 *
 * Calibrates, warms up (excluded; a warm-up run shorter than half the target refines N and
 * runs again, up to 5 runs), then measures R repetitions of each variant's own N
 * iterations (each lasting about the target time),
 * interleaved and alternating the order. R shrinks (to at least 3) when the row would exceed
 * the row budget. A row that would start after the deadline (--time-limit) is skipped with
 * %MEMRES_ERROR_FAILED.
 *
 * Returns: %TRUE when every run succeeded
 */
gboolean
bench_measure (const BenchContext *ctx, const char *what, const BenchVariant *variants,
               guint n_variants, guint64 units, BenchRow *row, GError **error)
{
  const BenchConfig *cfg = ctx->config;
  gdouble target = cfg->target_ms * 1e6, budget = cfg->row_budget_ms * 1e6;
  gdouble per_iter[BENCH_MAX_VARIANTS] = { 0 }, slowest, rep_cost = 0;
  guint64 iters[BENCH_MAX_VARIANTS];
  g_autofree gdouble *samples = NULL;
  guint64 iterations = 1;
  guint reps, r, v;
  gint64 elapsed, started = bench_now_ns ();

  g_return_val_if_fail (n_variants >= 1 && n_variants <= BENCH_MAX_VARIANTS, FALSE);
  if (cfg->deadline_ns != 0 && started > cfg->deadline_ns)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "skipped: the --time-limit ran out before this row");
      return FALSE;
    }

  /* Calibration (doubles as the first warm-up): grow N until the slowest variant takes an
   * eighth of the target, then extrapolate each variant's own N. */
  for (;;)
    {
      slowest = 0;
      for (v = 0; v < n_variants; v++)
        {
          if (!run_variant (&variants[v], iterations, &elapsed, error))
            return FALSE;
          per_iter[v] = (gdouble) elapsed / iterations;
          slowest = MAX (slowest, (gdouble) elapsed);
        }
      if (slowest >= target / 8 || iterations >= (G_GUINT64_CONSTANT (1) << 30))
        break;
      iterations *= (guint64) CLAMP ((target / 8) / slowest + 1, 2, 64);
    }
  /* Warm-up (excluded) at the count extrapolated from the calibration, which for a fast variant
   * ran only the slowest one's count and so overstates its cost per iteration; its time refines
   * the count once more. */
  for (v = 0; v < n_variants; v++)
    {
      /* a run of less than half the target (a cost per iteration still overstated: first-use
       * costs in the calibration, or a fixed cost a run pays whatever its count) is refined
       * again, at most 4 times more */
      for (guint k = 0; k < 5; k++)
        {
          iters[v]
              = (guint64) CLAMP (target / per_iter[v], 1, (gdouble) (G_GUINT64_CONSTANT (1) << 32));
          if (!run_variant (&variants[v], iters[v], &elapsed, error))
            return FALSE;
          per_iter[v] = (gdouble) elapsed / iters[v];
          if (elapsed >= target / 2 || iters[v] >= (G_GUINT64_CONSTANT (1) << 32))
            break;
        }
      iters[v]
          = (guint64) CLAMP (target / per_iter[v], 1, (gdouble) (G_GUINT64_CONSTANT (1) << 32));
      rep_cost += per_iter[v] * iters[v];
    }

  reps = MAX (cfg->repetitions, 1);
  if (rep_cost * (reps + 1) > budget)
    reps = (guint) MAX (3, budget / rep_cost - 1);
  reps = MIN (reps, MAX (cfg->repetitions, 1));

  samples = g_new0 (gdouble, (gsize) n_variants * reps);
  for (r = 0; r < reps; r++)
    for (guint k = 0; k < n_variants; k++)
      {
        v = (r % 2 == 0) ? k : n_variants - 1 - k;
        if (!run_variant (&variants[v], iters[v], &elapsed, error))
          return FALSE;
        samples[v * reps + r] = (gdouble) elapsed / ((gdouble) iters[v] * units);
      }

  row->n_variants = n_variants;
  row->units = units;
  for (v = 0; v < n_variants; v++)
    row->variant_names[v] = g_strdup (variants[v].name);
  paired_ratio (samples, reps, row); /* before summarize() sorts the samples */
  for (v = 0; v < n_variants; v++)
    summarize (samples + v * reps, reps, iters[v], &row->summaries[v]);
  bench_progress (ctx, "  %-28s N=%" G_GUINT64_FORMAT "..%" G_GUINT64_FORMAT " R=%u  %.2f s", what,
                  iters[0], iters[n_variants - 1], reps, (bench_now_ns () - started) / 1e9);
  return TRUE;
}

/* memres-bench: section (j), the cost of a pass-through adaptor. Allocate+close pairs through
 * `stats>SPEC` (variant "memres") against the same pairs through SPEC itself (variant "raw":
 * here the plain memres resource, not driver calls), at each pair size, back to back in each
 * repetition: the paired ratio is stats>SPEC over SPEC, and the note gives the adaptor's cost in
 * ns per pair from it, (ratio - 1) x SPEC's median, and the difference of the medians (the
 * budget is 10 ns). */
#include "bench-common.h"

typedef struct
{
  const BenchContext *ctx;
  MemresResource *mr;
  gsize size;
} AdaptorJob;

static gboolean
adaptor_pairs (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  AdaptorJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (job->mr, job->size, ctx->stream, error);

      if (buf == NULL || !bench_close_buffer (buf, ctx->stream, error))
        return FALSE;
    }
  return bench_finish (ctx, ctx->stream, t0, elapsed_ns, error);
}

/**
 * bench_run_adaptor:
 * @ctx: the benchmark context (its resource is SPEC)
 *
 * Section (j): pairs through `stats>SPEC` against pairs through SPEC.
 *
 * Returns: (transfer full): the section; failed rows carry their error
 */
BenchSection *
bench_run_adaptor (BenchContext *ctx)
{
  g_autofree char *spec = memres_resource_to_string (ctx->mr);
  g_autofree char *desc = g_strdup_printf ("the same pairs through %s without the adaptor", spec);
  g_autofree char *stacked = g_strdup_printf ("stats>%s", spec);
  BenchSection *section
      = bench_section_new ("adaptor", "pass-through adaptor: stats>SPEC vs SPEC", "ns/pair", desc);
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) stats = memres_resource_new (stacked, &error);

  if (stats == NULL)
    {
      bench_row_set_error (bench_section_add_row (section, "all", 0, 0), error);
      return section;
    }
  for (guint i = 0; i < ctx->config->sizes->len; i++)
    {
      guint64 size = g_array_index (ctx->config->sizes, guint64, i);
      g_autofree char *label = bench_format_size (size);
      BenchRow *row = bench_section_add_row (section, label, size, 0);
      AdaptorJob over = { ctx, stats, size };
      AdaptorJob plain = { ctx, ctx->mr, size };
      BenchVariant variants[]
          = { { "memres", adaptor_pairs, &over }, { "raw", adaptor_pairs, &plain } };
      g_autofree char *what = g_strdup_printf ("adaptor %s", label);

      g_clear_error (&error);
      if (!bench_measure (ctx, what, variants, 2, 1, row, &error))
        bench_row_set_error (row, error);
      else
        /* the paired ratio (the median of each repetition's ratio) is robust against the
         * machine's drift between repetitions, which the difference of the medians is not */
        row->note = g_strdup_printf (
            "memres = %s, raw = %s: the adaptor adds %.1f ns per pair ((paired ratio - 1) x raw "
            "median; difference of the medians %.1f ns)",
            stacked, spec, (row->ratio - 1) * row->summaries[1].median,
            row->summaries[0].median - row->summaries[1].median);
    }
  return section;
}

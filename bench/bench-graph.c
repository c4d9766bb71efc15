/* memres-bench: section (g), allocation inside a stream capture. What is timed is the capture
 * of one allocate+free pair: memres_resource_allocate() and memres_buffer_close() of a graph
 * kind on the capturing stream (memres), against cuMemAllocAsync and cuMemFreeAsync on the same
 * capturing stream (raw); each adds an allocation and a free node to the graph. A capture holds
 * at most GRAPH_PAIRS_PER_CAPTURE pairs; beginning, ending and destroying the captures is not
 * timed (nor is anything launched). */
#include "bench-common.h"

#define GRAPH_PAIRS_PER_CAPTURE 256

typedef struct
{
  const BenchContext *ctx;
  gsize size;
} GraphJob;

#define CHECK(call, args) bench_cuda_check (ctx, ctx->drv->call args, #call, error)

typedef gboolean (*GraphPairs) (GraphJob *job, guint64 n, GError **error);

static gboolean
pairs_memres (GraphJob *job, guint64 n, GError **error)
{
  for (guint64 i = 0; i < n; i++)
    {
      MemresBuffer *buf
          = memres_resource_allocate (job->ctx->mr, job->size, job->ctx->stream, error);

      if (buf == NULL || !bench_close_buffer (buf, job->ctx->stream, error))
        return FALSE;
    }
  return TRUE;
}

static gboolean
pairs_raw (GraphJob *job, guint64 n, GError **error)
{
  const BenchContext *ctx = job->ctx;

  for (guint64 i = 0; i < n; i++)
    {
      CUdeviceptr ptr = 0;

      if (!CHECK (cuMemAllocAsync, (&ptr, job->size, ctx->stream))
          || !CHECK (cuMemFreeAsync, (ptr, ctx->stream)))
        return FALSE;
    }
  return TRUE;
}

/* Runs @iterations pairs in captures of at most GRAPH_PAIRS_PER_CAPTURE, timing the pairs. */
static gboolean
run_captured (GraphJob *job, GraphPairs pairs, guint64 iterations, gint64 *elapsed_ns,
              GError **error)
{
  const BenchContext *ctx = job->ctx;

  *elapsed_ns = 0;
  while (iterations > 0)
    {
      guint64 n = MIN (iterations, GRAPH_PAIRS_PER_CAPTURE);
      CUgraph graph = NULL;
      gboolean ok;
      gint64 t0;
      CUresult r;

      if (!CHECK (cuStreamBeginCapture, (ctx->stream, CU_STREAM_CAPTURE_MODE_RELAXED)))
        return FALSE;
      t0 = bench_now_ns ();
      ok = pairs (job, n, error);
      *elapsed_ns += bench_now_ns () - t0;
      /* The capture ends whatever happened, so that the stream is usable again; a failed pair's
       * error is the one reported. */
      r = ctx->drv->cuStreamEndCapture (ctx->stream, &graph);
      if (!ok)
        {
          if (graph != NULL)
            ctx->drv->cuGraphDestroy (graph);
          return FALSE;
        }
      if (!bench_cuda_check (ctx, r, "cuStreamEndCapture", error)
          || (graph != NULL && !CHECK (cuGraphDestroy, (graph))))
        return FALSE;
      iterations -= n;
    }
  return TRUE;
}

static gboolean
graph_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  return run_captured (data, pairs_memres, iterations, elapsed_ns, error);
}

static gboolean
graph_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  return run_captured (data, pairs_raw, iterations, elapsed_ns, error);
}

/**
 * bench_run_graph_capture:
 * @ctx: the benchmark context; its resource must be of the graph kind
 *
 * Section (g): one row per pair size; variants memres (the graph kind) and raw
 * (cuMemAllocAsync/cuMemFreeAsync), both on the capturing stream.
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_graph_capture (BenchContext *ctx)
{
  BenchSection *section = bench_section_new (
      "graph_capture", "allocate+free pairs captured into a graph, one stream", "ns/pair",
      "cuMemAllocAsync + cuMemFreeAsync on the capturing stream (allocation and free nodes)");
  const GArray *sizes = ctx->config->sizes;
  const char *kind = memres_resource_get_kind_name (ctx->mr);

  for (guint i = 0; i < sizes->len; i++)
    {
      guint64 size = g_array_index (sizes, guint64, i);
      g_autofree char *label = bench_format_size (size);
      BenchRow *row = bench_section_add_row (section, label, size, 0);
      GraphJob job = { ctx, (gsize) size };
      BenchVariant variants[] = { { "memres", graph_memres, &job }, { "raw", graph_raw, &job } };
      g_autoptr (GError) error = NULL;

      if (g_strcmp0 (kind, "graph") != 0)
        {
          g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "--graph-capture needs a spec of the graph kind, not '%s'",
                       ctx->config->spec);
          bench_row_set_error (row, error);
          continue;
        }
      if (!bench_measure (ctx, label, variants, G_N_ELEMENTS (variants), 1, row, &error))
        bench_row_set_error (row, error);
    }
  return section;
}

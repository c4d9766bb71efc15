/* memres-bench: measures a memory resource against the raw driver calls it stands for, in one
 * process, on one non-blocking stream, and prints a table (or JSON with --json).
 *
 *   memres-bench [--spec SPEC] [--pairs] [--random] [--threads] [--vmm-grow] [--copy]
 *                [--ipc-import] [--graph-capture] [--adaptor] [--quick] [--json] ...
 *
 * With no workload named, it runs --pairs --random --threads. Exit status: 0 when every row was
 * measured, 1 when the spec (or the driver, the context, the stream) could not be set up (one
 * error line on stderr), 2 for a bad command line, 3 when some rows failed (their errors are in
 * the output). Timings against the fake driver mean nothing; they only prove the harness runs. */
#include "bench-common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gboolean
parse_size (const char *text, guint64 *out, GError **error)
{
  static const struct
  {
    const char *suffix;
    guint64 factor;
  } suffixes[]
      = { { "", 1 },          { "B", 1 },           { "K", BENCH_KIB }, { "KiB", BENCH_KIB },
          { "M", BENCH_MIB }, { "MiB", BENCH_MIB }, { "G", BENCH_GIB }, { "GiB", BENCH_GIB } };
  g_autofree char *copy = g_strstrip (g_strdup (text));
  char *end = NULL;
  guint64 value;

  if (!g_ascii_isdigit (copy[0]))
    goto bad;
  value = g_ascii_strtoull (copy, &end, 10);
  while (*end == ' ')
    end++;
  for (guint i = 0; i < G_N_ELEMENTS (suffixes); i++)
    if (g_ascii_strcasecmp (end, suffixes[i].suffix) == 0)
      {
        if (value > G_MAXUINT64 / suffixes[i].factor)
          goto bad;
        *out = value * suffixes[i].factor;
        return TRUE;
      }
bad:
  g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
               "'%s' is not a size (bytes, or a number with KiB, MiB or GiB)", text);
  return FALSE;
}

/* Comma-separated sizes into a GArray of guint64 (or of guint when @as_uint). */
static GArray *
parse_list (const char *text, gboolean as_uint, GError **error)
{
  g_auto (GStrv) items = g_strsplit (text, ",", -1);
  g_autoptr (GArray) out = g_array_new (FALSE, FALSE, as_uint ? sizeof (guint) : sizeof (guint64));

  for (guint i = 0; items[i] != NULL; i++)
    {
      guint64 v;

      if (!parse_size (items[i], &v, error))
        return NULL;
      if (v == 0 || (as_uint && v > 1024))
        {
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                       "'%s': each value must be positive%s", items[i],
                       as_uint ? " and at most 1024" : "");
          return NULL;
        }
      if (as_uint)
        {
          guint u = (guint) v;
          g_array_append_val (out, u);
        }
      else
        g_array_append_val (out, v);
    }
  if (out->len == 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "empty list");
      return NULL;
    }
  return g_steal_pointer (&out);
}

typedef struct
{
  gboolean pairs, random, threads, vmm_grow, copy, ipc_import, graph_capture, adaptor, cross_stream,
      thread_pairs, alternating, core, lookup;
  char *sizes, *thread_counts, *chunks, *min_size, *max_size, *grow_size, *copy_size;
  char *thread_pair_size, *core_base;
  gint repetitions, live, seed, import_buffers;
  gdouble target_ms, row_budget_ms, time_limit_s;
} Args;

static gboolean
pick_size (const char *given, const char *fallback, guint64 *out, GError **error)
{
  return parse_size (given != NULL ? given : fallback, out, error);
}

static gboolean
configure (BenchConfig *cfg, Args *a, GError **error)
{
  gboolean q = cfg->quick;

  cfg->repetitions = a->repetitions > 0 ? (guint) a->repetitions : (q ? 3 : 15);
  cfg->target_ms = a->target_ms > 0 ? a->target_ms : (q ? 2 : 20);
  cfg->row_budget_ms = a->row_budget_ms > 0 ? a->row_budget_ms : (q ? 300 : 4000);
  cfg->live = a->live > 0 ? (guint) a->live : (q ? 64 : 1000);
  cfg->seed = (guint32) a->seed;
  cfg->import_buffers = a->import_buffers > 0 ? (guint) a->import_buffers : (q ? 16 : 256);
  if (a->import_buffers < 0 || a->import_buffers > 65536)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--import-buffers must be 1 to 65536");
      return FALSE;
    }
  cfg->sizes = parse_list (a->sizes ? a->sizes
                           : q      ? "256,4KiB,64KiB,1MiB"
                                    : "256,4KiB,64KiB,1MiB,16MiB,64MiB,256MiB",
                           FALSE, error);
  if (cfg->sizes == NULL)
    return FALSE;
  cfg->thread_counts = parse_list (
      a->thread_counts ? a->thread_counts : (q ? "1,2,4" : "1,2,4,8,16"), TRUE, error);
  if (cfg->thread_counts == NULL)
    return FALSE;
  cfg->chunks = parse_list (a->chunks ? a->chunks : (q ? "2MiB,20MiB" : "2MiB,20MiB,64MiB,256MiB"),
                            FALSE, error);
  if (cfg->chunks == NULL)
    return FALSE;
  if (!pick_size (a->min_size, "1KiB", &cfg->min_size, error)
      || !pick_size (a->max_size, q ? "256KiB" : "4MiB", &cfg->max_size, error)
      || !pick_size (a->grow_size, q ? "64MiB" : "1GiB", &cfg->grow_size, error)
      || !pick_size (a->copy_size, q ? "4MiB" : "256MiB", &cfg->copy_size, error))
    return FALSE;
  if (cfg->min_size == 0 || cfg->min_size > cfg->max_size || cfg->grow_size == 0
      || cfg->copy_size == 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "sizes must be positive and --min-size at most --max-size");
      return FALSE;
    }
  if (a->time_limit_s > 0)
    cfg->deadline_ns = bench_now_ns () + (gint64) (a->time_limit_s * 1e9);
  if (!pick_size (a->thread_pair_size, "4KiB", &cfg->thread_pair_size, error))
    return FALSE;
  if (cfg->thread_pair_size == 0)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                   "--thread-pair-size must be positive");
      return FALSE;
    }
  if (!a->pairs && !a->random && !a->threads && !a->vmm_grow && !a->copy && !a->ipc_import
      && !a->graph_capture && !a->adaptor && !a->cross_stream && !a->thread_pairs && !a->alternating
      && !a->core && !a->lookup)
    a->pairs = a->random = a->threads = TRUE;
  return TRUE;
}

static gboolean
parse_args (int *argc, char ***argv, BenchConfig *cfg, Args *a, GError **error)
{
  GOptionEntry entries[] = {
    { "spec", 's', 0, G_OPTION_ARG_STRING, &cfg->spec, "The resource (default dmr)", "SPEC" },
    { "device", 'd', 0, G_OPTION_ARG_INT, &cfg->device,
      "Device for streams and copies (default: the resource's, else 0)", "N" },
    { "pairs", 0, 0, G_OPTION_ARG_NONE, &a->pairs, "(a) allocate+close pairs per size", NULL },
    { "random", 0, 0, G_OPTION_ARG_NONE, &a->random, "(b) random allocations and frees", NULL },
    { "threads", 0, 0, G_OPTION_ARG_NONE, &a->threads, "(c) (b) on several threads", NULL },
    { "vmm-grow", 0, 0, G_OPTION_ARG_NONE, &a->vmm_grow, "(d) grow a vmm buffer (vmm spec)", NULL },
    { "copy", 0, 0, G_OPTION_ARG_NONE, &a->copy, "(e) host<->device copies (pinned spec)", NULL },
    { "cross-stream", 0, 0, G_OPTION_ARG_NONE, &a->cross_stream,
      "(h) allocate on one stream, close on another", NULL },
    { "ipc-import", 0, 0, G_OPTION_ARG_NONE, &a->ipc_import,
      "(f) import the pool and buffers into this process (ipc spec)", NULL },
    { "graph-capture", 0, 0, G_OPTION_ARG_NONE, &a->graph_capture,
      "(g) allocate+free pairs inside a stream capture (graph spec)", NULL },
    { "adaptor", 0, 0, G_OPTION_ARG_NONE, &a->adaptor,
      "(j) pairs through stats>SPEC against SPEC (a pass-through adaptor's cost)", NULL },
    { "thread-pairs", 0, 0, G_OPTION_ARG_NONE, &a->thread_pairs,
      "(k) pairs on several threads at once, aggregate", NULL },
    { "alternating", 0, 0, G_OPTION_ARG_NONE, &a->alternating,
      "(l) pairs alternating between two streams", NULL },
    { "core", 0, 0, G_OPTION_ARG_NONE, &a->core,
      "(m) the core's own per-buffer cost, and pairs against --core-base", NULL },
    { "lookup", 0, 0, G_OPTION_ARG_NONE, &a->lookup,
      "(n) memres_lookup against cuPointerGetAttribute (a spec with segments: vmm, cache>...)",
      NULL },
    { "thread-pair-size", 0, 0, G_OPTION_ARG_STRING, &a->thread_pair_size,
      "Bytes per pair of (k) (4KiB)", "SIZE" },
    { "core-base", 0, 0, G_OPTION_ARG_STRING, &a->core_base,
      "The resource (m) compares the pairs with (none)", "SPEC" },
    { "json", 0, 0, G_OPTION_ARG_NONE, &cfg->json, "Print JSON instead of a table", NULL },
    { "quick", 0, 0, G_OPTION_ARG_NONE, &cfg->quick, "Small sizes, few repetitions (a smoke test)",
      NULL },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &cfg->quiet, "No progress on stderr", NULL },
    { "repetitions", 'r', 0, G_OPTION_ARG_INT, &a->repetitions, "Repetitions per row (15)", "R" },
    { "target-ms", 0, 0, G_OPTION_ARG_DOUBLE, &a->target_ms, "Length of a repetition (20)", "MS" },
    { "row-budget-ms", 0, 0, G_OPTION_ARG_DOUBLE, &a->row_budget_ms,
      "Most time per row; fewer repetitions beyond (4000)", "MS" },
    { "time-limit", 0, 0, G_OPTION_ARG_DOUBLE, &a->time_limit_s,
      "Skip the rows that would start after this many seconds (default: none)", "S" },
    { "sizes", 0, 0, G_OPTION_ARG_STRING, &a->sizes, "Pair sizes", "LIST" },
    { "live", 0, 0, G_OPTION_ARG_INT, &a->live, "Live allocations of (b) and (c) (1000)", "N" },
    { "min-size", 0, 0, G_OPTION_ARG_STRING, &a->min_size, "Smallest random size (1KiB)", "SIZE" },
    { "max-size", 0, 0, G_OPTION_ARG_STRING, &a->max_size, "Largest random size (4MiB)", "SIZE" },
    { "seed", 0, 0, G_OPTION_ARG_INT, &a->seed, "Seed of the random traces (42)", "N" },
    { "raw-pool", 0, 0, G_OPTION_ARG_NONE, &cfg->raw_pool,
      "Pair (a) to (c), (h), (k) and (l) with the device's current pool "
      "(cuMemAllocFromPoolAsync + cuMemFreeAsync) whatever the resource: e.g. arena or vmm "
      "against the raw pool pair",
      NULL },
    { "pin-threads", 0, 0, G_OPTION_ARG_NONE, &cfg->pin_threads,
      "Pin the workers of (k) to one CPU each (the CPUs the process may use, in order)", NULL },
    { "thread-counts", 0, 0, G_OPTION_ARG_STRING, &a->thread_counts,
      "Thread counts of (c) (1,2,4,8,16)", "LIST" },
    { "chunks", 0, 0, G_OPTION_ARG_STRING, &a->chunks,
      "Chunk sizes of (d) (2MiB,20MiB,64MiB,256MiB)", "LIST" },
    { "grow-size", 0, 0, G_OPTION_ARG_STRING, &a->grow_size, "Bytes a buffer grows by (1GiB)",
      "SIZE" },
    { "copy-size", 0, 0, G_OPTION_ARG_STRING, &a->copy_size, "Bytes per copy (256MiB)", "SIZE" },
    { "import-buffers", 0, 0, G_OPTION_ARG_INT, &a->import_buffers,
      "Distinct buffers of (f) per repetition (256)", "N" },
    { NULL },
  };
  g_autoptr (GOptionContext) octx = g_option_context_new ("- benchmark a memres resource");

  g_option_context_set_summary (
      octx, "Measures allocate+close pairs, random workloads, vmm growth, copies, IPC imports "
            "and allocations inside a stream capture through memres against the equivalent raw "
            "CUDA driver calls, in one process.");
  g_option_context_add_main_entries (octx, entries, NULL);
  if (!g_option_context_parse (octx, argc, argv, error))
    return FALSE;
  if (*argc > 1)
    {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "unexpected argument '%s'",
                   (*argv)[1]);
      return FALSE;
    }
  if (cfg->spec == NULL)
    {
      gboolean allocating = a->pairs || a->random || a->threads || a->cross_stream
                            || a->thread_pairs || a->alternating || a->core;

      gboolean other = allocating || a->vmm_grow || a->ipc_import;

      cfg->spec = g_strdup ((a->vmm_grow || a->lookup) && !allocating      ? "vmm"
                            : a->ipc_import && !allocating && !a->vmm_grow ? "ipc"
                            : a->graph_capture && !other                   ? "graph"
                                                                           : "dmr");
    }
  return configure (cfg, a, error);
}

static gboolean
setup (BenchContext *ctx, GError **error)
{
  const BenchConfig *cfg = ctx->config;
  gint mr_device;

  ctx->mr = memres_resource_new (cfg->spec, error);
  if (ctx->mr == NULL)
    {
      g_prefix_error (error, "cannot create '%s': ", cfg->spec);
      return FALSE;
    }
  /* MEMRES_BENCH_TAG: the main thread's measurements run under that tag (docs/tags.md): read
   * from the environment so that compare-builds.py can pair a build without tags, which ignores
   * it, with this one tagged */
  if (g_getenv ("MEMRES_BENCH_TAG") != NULL && g_getenv ("MEMRES_BENCH_TAG")[0] != '\0'
      && !memres_tag_push (g_getenv ("MEMRES_BENCH_TAG"), error))
    return FALSE;
  ctx->drv = memres_cuda_get_driver (error);
  if (ctx->drv == NULL)
    return FALSE;
  mr_device = memres_resource_get_device (ctx->mr);
  ctx->device = cfg->device >= 0 ? cfg->device : MAX (mr_device, 0);
  if (!memres_cuda_ensure_context (ctx->device, error))
    return FALSE;
  return bench_cuda_check (ctx, ctx->drv->cuCtxGetCurrent (&ctx->context), "cuCtxGetCurrent", error)
         && bench_cuda_check (ctx, ctx->drv->cuStreamCreate (&ctx->stream, CU_STREAM_NON_BLOCKING),
                              "cuStreamCreate", error);
}

/* Sections (a) to (c) need the raw equivalent; when it cannot be found each says why. */
static void
run_allocation_sections (BenchContext *ctx, const Args *a, GPtrArray *sections)
{
  g_autoptr (GError) error = NULL;
  BenchRaw *raw = bench_raw_new (ctx, &error);
  const char *names[]
      = { "pairs", "random", "threads", "cross_stream", "thread_pairs", "alternating" };
  gboolean wanted[]
      = { a->pairs, a->random, a->threads, a->cross_stream, a->thread_pairs, a->alternating };

  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      BenchSection *section;

      if (!wanted[i])
        continue;
      if (raw == NULL)
        {
          section = bench_section_new (names[i], names[i], "ns", "unknown");
          bench_row_set_error (bench_section_add_row (section, "all", 0, 0), error);
        }
      else
        {
          bench_progress (ctx, "%s: %s", ctx->config->spec, names[i]);
          section = i == 0   ? bench_run_pairs (ctx, raw)
                    : i == 1 ? bench_run_random (ctx, raw)
                    : i == 2 ? bench_run_threads (ctx, raw)
                    : i == 3 ? bench_run_cross_stream (ctx, raw)
                    : i == 4 ? bench_run_thread_pairs (ctx, raw, ctx->config->thread_pair_size)
                             : bench_run_alternating (ctx, raw);
        }
      g_ptr_array_add (sections, section);
    }
  bench_raw_free (raw);
}

static gboolean
all_rows_ok (GPtrArray *sections)
{
  for (guint i = 0; i < sections->len; i++)
    {
      BenchSection *section = g_ptr_array_index (sections, i);

      for (guint j = 0; j < section->rows->len; j++)
        if (((BenchRow *) g_ptr_array_index (section->rows, j))->error != NULL)
          return FALSE;
    }
  return TRUE;
}

static void
cleanup (BenchContext *ctx, BenchConfig *cfg, Args *a)
{
  if (ctx->stream != NULL)
    ctx->drv->cuStreamDestroy (ctx->stream);
  g_clear_pointer (&ctx->mr, memres_resource_unref);
  g_free (cfg->spec);
  g_strfreev (cfg->argv);
  g_clear_pointer (&cfg->sizes, g_array_unref);
  g_clear_pointer (&cfg->thread_counts, g_array_unref);
  g_clear_pointer (&cfg->chunks, g_array_unref);
  g_free (a->sizes);
  g_free (a->thread_counts);
  g_free (a->chunks);
  g_free (a->min_size);
  g_free (a->max_size);
  g_free (a->grow_size);
  g_free (a->copy_size);
  g_free (a->thread_pair_size);
  g_free (a->core_base);
}

int
main (int argc, char **argv)
{
  BenchConfig cfg = { .device = -1 };
  Args a = { .seed = 42 };
  BenchContext ctx = { .config = &cfg };
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) sections
      = g_ptr_array_new_with_free_func ((GDestroyNotify) bench_section_free);
  gint64 started = bench_now_ns ();
  int status;

  cfg.argv = g_strdupv (argv);
  if (!parse_args (&argc, &argv, &cfg, &a, &error))
    {
      fprintf (stderr, "memres-bench: %s\n", error->message);
      cleanup (&ctx, &cfg, &a);
      return 2;
    }
  if (!setup (&ctx, &error))
    {
      fprintf (stderr, "memres-bench: %s\n", error->message);
      cleanup (&ctx, &cfg, &a);
      return 1;
    }

  if (a.pairs || a.random || a.threads || a.cross_stream || a.thread_pairs || a.alternating)
    run_allocation_sections (&ctx, &a, sections);
  if (a.core)
    {
      bench_progress (&ctx, "%s: core", cfg.spec);
      g_ptr_array_add (sections, bench_run_core (&ctx, a.core_base));
    }
  if (a.vmm_grow)
    {
      bench_progress (&ctx, "%s: vmm grow", cfg.spec);
      g_ptr_array_add (sections, bench_run_vmm_grow (&ctx));
    }
  if (a.copy)
    {
      bench_progress (&ctx, "%s: copy", cfg.spec);
      g_ptr_array_add (sections, bench_run_copy (&ctx));
    }
  if (a.ipc_import)
    {
      bench_progress (&ctx, "%s: ipc import", cfg.spec);
      g_ptr_array_add (sections, bench_run_ipc_import (&ctx));
    }
  if (a.graph_capture)
    {
      bench_progress (&ctx, "%s: graph capture", cfg.spec);
      g_ptr_array_add (sections, bench_run_graph_capture (&ctx));
    }
  if (a.lookup)
    {
      bench_progress (&ctx, "%s: lookup", cfg.spec);
      g_ptr_array_add (sections, bench_run_lookup (&ctx));
    }
  if (a.adaptor)
    {
      bench_progress (&ctx, "%s: adaptor", cfg.spec);
      g_ptr_array_add (sections, bench_run_adaptor (&ctx));
    }

  if (cfg.json)
    bench_print_json (&ctx, sections, stdout);
  else
    bench_print_table (&ctx, sections, stdout);
  fflush (stdout);
  bench_progress (&ctx, "%s: done in %.1f s", cfg.spec, (bench_now_ns () - started) / 1e9);
  status = all_rows_ok (sections) ? 0 : 3;
  cleanup (&ctx, &cfg, &a);
  return status;
}

/* memres-bench: declarations shared by the benchmark's files.
 *
 * The harness measures memres against the equivalent raw driver calls, in the same process, on
 * the same stream and (for pools) the same pool. Every measured quantity is a BenchSummary of R
 * interleaved repetitions; a repetition runs an operation N times and its time is divided by N
 * (and by the units one iteration counts: operations of a trace, say). */
#pragma once

#include <memres/memres-plugin.h>
#include <stdio.h>

G_BEGIN_DECLS

#define BENCH_KIB (G_GUINT64_CONSTANT (1) << 10)
#define BENCH_MIB (G_GUINT64_CONSTANT (1) << 20)
#define BENCH_GIB (G_GUINT64_CONSTANT (1) << 30)

/* What the command line asked for. */
typedef struct
{
  char *spec;
  gint device;    /* -1: the resource's device, or 0 for host resources */
  gboolean quick; /* small sizes, few repetitions: proves the harness runs */
  gboolean json;  /* JSON on stdout instead of the table */
  gboolean quiet; /* no progress on stderr */
  guint repetitions;
  gdouble target_ms;     /* wanted length of one repetition */
  gdouble row_budget_ms; /* most time one row may take (repetitions shrink, not below 3) */
  GArray *sizes;         /* guint64: pair sizes in bytes */
  guint live;            /* random workload: live allocations */
  guint64 min_size, max_size;
  guint32 seed;
  GArray *thread_counts;    /* guint */
  GArray *chunks;           /* guint64: vmm chunk sizes in bytes */
  guint64 grow_size;        /* bytes a vmm buffer grows by */
  guint64 copy_size;        /* bytes per copy */
  guint import_buffers;     /* distinct buffers an IPC import repetition maps */
  guint64 thread_pair_size; /* bytes per pair of (k) */
  gboolean pin_threads;     /* (k): worker t runs on the t-th CPU the process may use */
  gboolean raw_pool;  /* (a) to (c), (h), (k), (l): the raw calls are the device's current pool's
                       * (cuMemAllocFromPoolAsync + cuMemFreeAsync), whatever the resource */
  gint64 deadline_ns; /* bench_now_ns() after which rows are skipped; 0: none */
  char **argv;        /* the command line, for the record */
} BenchConfig;

/* One process-wide setup: the driver table, the resource, one non-blocking stream. */
typedef struct
{
  const BenchConfig *config;
  const MemresCudaDriver *drv;
  MemresResource *mr;
  gint device;       /* the device whose primary context is current */
  CUcontext context; /* that context: worker threads make it current */
  CUstream stream;
} BenchContext;

/* Statistics of one measured variant, in nanoseconds per unit. */
typedef struct
{
  gdouble median, min, max, q1, q3;
  guint repetitions;
  guint64 iterations; /* per repetition */
} BenchSummary;

/* Runs one variant @iterations times and stores the time it measured (only the part that
 * counts: setup and teardown a repetition needs stay outside) in @elapsed_ns. */
typedef gboolean (*BenchFunc) (gpointer data, guint64 iterations, gint64 *elapsed_ns,
                               GError **error);

typedef struct
{
  const char *name; /* "memres", "raw", "pageable" */
  BenchFunc func;
  gpointer data;
} BenchVariant;

#define BENCH_MAX_VARIANTS 4

/* A row of a result table. Values are per unit, in ns (or as the section says). */
typedef struct
{
  char *label;
  guint64 size;  /* bytes, 0 when not applicable */
  guint threads; /* 0 when not applicable */
  guint64 units; /* units per iteration (trace operations, bytes grown, ...) */
  guint n_variants;
  char *variant_names[BENCH_MAX_VARIANTS];
  BenchSummary summaries[BENCH_MAX_VARIANTS];
  /* memres / raw, paired: the median and quartiles over the repetitions of memres's time over
   * raw's in the same repetition (they run back to back); NAN without both variants */
  gdouble ratio, ratio_q1, ratio_q3;
  /* each variant's time over raw's, paired as @ratio is: the median (NAN without raw) */
  gdouble variant_ratio[BENCH_MAX_VARIANTS];
  char *error;                           /* the row failed: why (then summaries are meaningless) */
  char *note;                            /* anything a reader must know about the row, or NULL */
  guint64 peak_reserved, peak_requested; /* random workload: bytes, 0 when not measured */
} BenchRow;

/* A section: (a) pairs, (b) random, (c) threads, (d) vmm_grow, (e) copy, (f) ipc_import,
 * (g) graph_capture, (h) cross_stream, (j) adaptor, (k) thread_pairs, (l) alternating, (m) core,
 * (n) lookup. */
typedef struct
{
  char *name;
  char *title;
  char *unit;      /* of every summary: "ns/pair", "ns/op", "ns/grow", "ns/copy" */
  char *raw_desc;  /* what the raw variant does, in driver calls */
  char *note;      /* what a reader must know about the whole section (the machine), or NULL */
  GPtrArray *rows; /* BenchRow* */
} BenchSection;

/* bench-measure.c */
gint64 bench_now_ns (void);
/* The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns: a calibration on a loaded machine
 * that does not count the time the thread was preempted. */
gint64 bench_thread_cpu_ns (void);
/* The median of @v's @n values (sorted in place), NAN for none. */
gdouble bench_median (gdouble *v, guint n);
gboolean bench_measure (const BenchContext *ctx, const char *what, const BenchVariant *variants,
                        guint n_variants, guint64 units, BenchRow *row, GError **error);
void bench_progress (const BenchContext *ctx, const char *format, ...) G_GNUC_PRINTF (2, 3);
/* cuStreamSynchronize(@stream), its failure reported as bench_cuda_check() does. */
gboolean bench_sync_stream (const BenchContext *ctx, CUstream stream, GError **error);
/* The end of a timed run begun at @t0 (bench_now_ns()): synchronizes @stream, then stores the
 * nanoseconds since @t0 in @elapsed_ns. */
gboolean bench_finish (const BenchContext *ctx, CUstream stream, gint64 t0, gint64 *elapsed_ns,
                       GError **error);
/* memres_buffer_close(@buf, @stream), then drops the caller's reference, whatever the close
 * returned. */
gboolean bench_close_buffer (MemresBuffer *buf, CUstream stream, GError **error);

/* bench-raw.c: the raw driver equivalent of the resource's allocate and close. */
typedef struct _BenchRaw BenchRaw;
BenchRaw *bench_raw_new (const BenchContext *ctx, GError **error);
void bench_raw_free (BenchRaw *raw);
const char *bench_raw_describe (const BenchRaw *raw);
gboolean bench_raw_alloc (BenchRaw *raw, gsize size, CUstream stream, gpointer *handle,
                          GError **error);
gboolean bench_raw_free_one (BenchRaw *raw, gpointer handle, CUstream stream, GError **error);
gboolean bench_raw_get_vmm_prop (const BenchRaw *raw, CUmemAllocationProp *prop);
gboolean bench_cuda_check (const BenchContext *ctx, CUresult result, const char *call,
                           GError **error);

/* bench-workloads.c: sections (a), (b), (c). */
BenchSection *bench_run_pairs (BenchContext *ctx, BenchRaw *raw);
BenchSection *bench_run_cross_stream (BenchContext *ctx, BenchRaw *raw);
BenchSection *bench_run_random (BenchContext *ctx, BenchRaw *raw);
BenchSection *bench_run_threads (BenchContext *ctx, BenchRaw *raw);

/* bench-cache.c: sections (k) thread_pairs, (l) alternating, (m) core. */
BenchSection *bench_run_thread_pairs (BenchContext *ctx, BenchRaw *raw, gsize size);
BenchSection *bench_run_alternating (BenchContext *ctx, BenchRaw *raw);
BenchSection *bench_run_core (BenchContext *ctx, const char *base_spec);

/* bench-ceiling.c: the control of (k), a loop that shares nothing, and the CPUs it runs on. */
guint64 bench_ceiling_run (guint rounds, guint64 units);
guint bench_ceiling_calibrate (gdouble unit_ns, gdouble *unit_ns_out);
char *bench_cpu_topology (void);

/* bench-vmm-grow.c: section (d). */
BenchSection *bench_run_vmm_grow (BenchContext *ctx);

/* bench-copy.c: section (e). */
BenchSection *bench_run_copy (BenchContext *ctx);

/* bench-ipc-import.c: section (f). */
BenchSection *bench_run_ipc_import (BenchContext *ctx);

/* bench-graph.c: section (g). */
BenchSection *bench_run_graph_capture (BenchContext *ctx);

/* bench-lookup.c: section (n). */
BenchSection *bench_run_lookup (BenchContext *ctx);

/* bench-adaptor.c: section (j). */
BenchSection *bench_run_adaptor (BenchContext *ctx);

/* bench-output.c */
BenchSection *bench_section_new (const char *name, const char *title, const char *unit,
                                 const char *raw_desc);
void bench_section_free (BenchSection *section);
BenchRow *bench_section_add_row (BenchSection *section, const char *label, guint64 size,
                                 guint threads);
void bench_row_set_error (BenchRow *row, const GError *error);
/* The index of the variant named @name in @row, or -1. */
int bench_row_variant_index (const BenchRow *row, const char *name);
char *bench_format_size (guint64 bytes);
void bench_print_table (const BenchContext *ctx, GPtrArray *sections, FILE *out);
void bench_print_json (const BenchContext *ctx, GPtrArray *sections, FILE *out);

G_END_DECLS

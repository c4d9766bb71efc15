/* memres-bench: section (f), importing an IPC pool and its buffers, in the exporting process
 * itself (the driver imports a pool into the process that exported it; the fake does too).
 *
 * The resource exports its pool once and N buffers (allocated once, outside the timing); then
 *  - "pool + first buffer": memres_resource_import_handle + memres_buffer_import of the first
 *    descriptor + close and unref of both, against cuMemPoolImportFromShareableHandle (a dup of
 *    the same fd) + cuMemPoolImportPointer + cuMemFreeAsync + cuMemPoolDestroy + close;
 *  - "per buffer": with the pool imported once (by each side), every iteration imports all N
 *    distinct buffers and then closes them (memres_buffer_import + close, against
 *    cuMemPoolImportPointer + cuMemFreeAsync), so memres's per-process mapping table never
 *    answers an import from a mapping already there.
 * Each iteration ends with a stream synchronize on both sides: the unmaps (cuMemFreeAsync) are
 * stream-ordered, and a pointer must not be imported again while its previous unmap is pending
 * (the driver maps it to the same address). Memres's imports are deduplicated per process while
 * a resource is alive, so each side's importer of "per buffer" exists only during that row. At
 * the end the importers' unmaps complete before the exporter frees its buffers. */
#include "bench-common.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define IMPORT_BUFFER_SIZE (64 * BENCH_KIB)

typedef struct
{
  const BenchContext *ctx;
  MemresIpcHandle *handle;
  guint n;
  MemresBuffer **exported;          /* n buffers of the resource */
  MemresBufferDescriptor *descs;    /* their descriptors (memres) */
  CUmemPoolPtrExportData *raw_data; /* their export data (raw) */
  MemresResource *importer;         /* per buffer: the memres importer */
  CUmemoryPool raw_pool;            /* per buffer: the raw importer */
  int raw_fd;                       /* its fd (a dup of the handle's) */
  MemresBuffer **imported;          /* n slots */
  CUdeviceptr *raw_ptrs;            /* n slots */
} ImportJob;

#define CHECK(call, args) bench_cuda_check (ctx, ctx->drv->call args, #call, error)

/* A dup of the handle's fd, as memres's import makes for itself. */
static int
dup_fd (const ImportJob *job, GError **error)
{
  int fd = fcntl (memres_ipc_handle_get_fd (job->handle), F_DUPFD_CLOEXEC, 0);

  if (fd < 0)
    {
      int saved = errno;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "dup of the handle's fd: %s",
                   g_strerror (saved));
    }
  return fd;
}

/* The raw pool import: a dup of the handle's fd, imported. On failure nothing is left open. */
static gboolean
raw_import_pool (const ImportJob *job, CUmemoryPool *pool, int *fd, GError **error)
{
  const BenchContext *ctx = job->ctx;

  *fd = dup_fd (job, error);
  if (*fd < 0)
    return FALSE;
  if (!CHECK (cuMemPoolImportFromShareableHandle,
              (pool, (void *) (gintptr) *fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)))
    {
      close (*fd);
      *fd = -1;
      return FALSE;
    }
  return TRUE;
}

static gboolean
raw_destroy_pool (const ImportJob *job, CUmemoryPool pool, int fd, GError **error)
{
  const BenchContext *ctx = job->ctx;
  gboolean ok = CHECK (cuMemPoolDestroy, (pool));

  close (fd);
  return ok;
}

/* ---- pool + first buffer ------------------------------------------------------------------- */

static gboolean
pool_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ImportJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      MemresResource *mr = memres_resource_import_handle (job->handle, error);
      MemresBuffer *buf;
      gboolean ok;

      if (mr == NULL)
        return FALSE;
      buf = memres_buffer_import (mr, job->descs[0].bytes, sizeof job->descs[0].bytes, ctx->stream,
                                  error);
      ok = buf != NULL && bench_close_buffer (buf, ctx->stream, error);
      memres_resource_unref (mr);
      if (!ok || !bench_sync_stream (ctx, ctx->stream, error))
        return FALSE;
    }
  *elapsed_ns = bench_now_ns () - t0;
  return TRUE;
}

/* The checks a safe importer makes after cuMemPoolImportPointer (memres's ipc kind does): the
 * mapped range must hold the bytes the descriptor claims, and be device memory (one
 * cuPointerGetAttributes, as memres asks). */
static gboolean
raw_range_check (ImportJob *job, CUdeviceptr ptr, GError **error)
{
  CUpointer_attribute attrs[]
      = { CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
  size_t range = 0;
  unsigned int type = 0;
  void *data[] = { &range, &type };

  if (!bench_cuda_check (
          job->ctx, job->ctx->drv->cuPointerGetAttributes (G_N_ELEMENTS (attrs), attrs, data, ptr),
          "cuPointerGetAttributes", error))
    return FALSE;
  if (type != CU_MEMORYTYPE_DEVICE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "raw import: the mapped range is not device memory");
      return FALSE;
    }
  if (range < IMPORT_BUFFER_SIZE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "raw import: the mapped range is %zu bytes, fewer than the buffer", range);
      return FALSE;
    }
  return TRUE;
}

static gboolean
pool_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ImportJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    {
      CUmemoryPool pool;
      CUdeviceptr ptr;
      gboolean ok;
      int fd;

      if (!raw_import_pool (job, &pool, &fd, error))
        return FALSE;
      ok = CHECK (cuMemPoolImportPointer, (&ptr, pool, &job->raw_data[0]))
           && raw_range_check (job, ptr, error) && CHECK (cuMemFreeAsync, (ptr, ctx->stream));
      ok = raw_destroy_pool (job, pool, fd, ok ? error : NULL) && ok;
      if (!ok || !bench_sync_stream (ctx, ctx->stream, error))
        return FALSE;
    }
  *elapsed_ns = bench_now_ns () - t0;
  return TRUE;
}

/* ---- per buffer ---------------------------------------------------------------------------- */

static gboolean
buffers_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ImportJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();
  gboolean ok = TRUE;
  guint k, opened = 0;

  for (guint64 i = 0; ok && i < iterations; i++)
    {
      for (opened = 0; ok && opened < job->n; opened++)
        ok = (job->imported[opened]
              = memres_buffer_import (job->importer, job->descs[opened].bytes,
                                      sizeof job->descs[opened].bytes, ctx->stream, error))
             != NULL;
      if (!ok)
        opened--;
      for (k = 0; k < opened; k++) /* after a failure too: leave nothing mapped */
        if (!bench_close_buffer (job->imported[k], ctx->stream, ok ? error : NULL))
          ok = FALSE;
      ok = ok && bench_sync_stream (ctx, ctx->stream, error);
    }
  *elapsed_ns = bench_now_ns () - t0;
  return ok;
}

static gboolean
buffers_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  ImportJob *job = data;
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();
  gboolean ok = TRUE;
  guint k, opened = 0;

  for (guint64 i = 0; ok && i < iterations; i++)
    {
      for (opened = 0; ok && opened < job->n; opened++)
        ok = CHECK (cuMemPoolImportPointer,
                    (&job->raw_ptrs[opened], job->raw_pool, &job->raw_data[opened]))
             && raw_range_check (job, job->raw_ptrs[opened], error);
      if (!ok)
        opened--;
      for (k = 0; k < opened; k++)
        if (!bench_cuda_check (ctx, ctx->drv->cuMemFreeAsync (job->raw_ptrs[k], ctx->stream),
                               "cuMemFreeAsync", ok ? error : NULL))
          ok = FALSE;
      ok = ok && bench_sync_stream (ctx, ctx->stream, error);
    }
  *elapsed_ns = bench_now_ns () - t0;
  return ok;
}

/* ---- setup --------------------------------------------------------------------------------- */

static gboolean
import_job_init (ImportJob *job, const BenchContext *ctx, GError **error)
{
  job->ctx = ctx;
  job->raw_fd = -1;
  job->exported = g_new0 (MemresBuffer *, job->n);
  job->descs = g_new0 (MemresBufferDescriptor, job->n);
  job->raw_data = g_new0 (CUmemPoolPtrExportData, job->n);
  job->imported = g_new0 (MemresBuffer *, job->n);
  job->raw_ptrs = g_new0 (CUdeviceptr, job->n);
  job->handle = memres_resource_export_handle (ctx->mr, error);
  if (job->handle == NULL)
    {
      g_prefix_error (error, "--ipc-import needs a spec that exports its pool (ipc): ");
      return FALSE;
    }
  for (guint i = 0; i < job->n; i++)
    {
      job->exported[i] = memres_resource_allocate (ctx->mr, IMPORT_BUFFER_SIZE, ctx->stream, error);
      if (job->exported[i] == NULL
          || !memres_buffer_export (job->exported[i], &job->descs[i], error)
          || !CHECK (
              cuMemPoolExportPointer,
              (&job->raw_data[i], (CUdeviceptr) memres_buffer_get_address (job->exported[i]))))
        return FALSE;
    }
  /* The allocations complete before anything imports them. */
  return bench_sync_stream (ctx, ctx->stream, error);
}

/* The importers of "per buffer", one per side; only while that row runs (memres deduplicates
 * pool imports per process, which would turn the other row's imports into lookups). */
static gboolean
import_job_open_importers (ImportJob *job, GError **error)
{
  job->importer = memres_resource_import_handle (job->handle, error);
  return job->importer != NULL && raw_import_pool (job, &job->raw_pool, &job->raw_fd, error);
}

static void
import_job_close_importers (ImportJob *job)
{
  g_clear_pointer (&job->importer, memres_resource_unref);
  if (job->raw_fd >= 0)
    raw_destroy_pool (job, job->raw_pool, job->raw_fd, NULL);
  job->raw_fd = -1;
}

static void
import_job_clear (ImportJob *job)
{
  const BenchContext *ctx = job->ctx;

  /* The importers' unmaps complete before the exporter frees what they mapped. */
  ctx->drv->cuStreamSynchronize (ctx->stream);
  import_job_close_importers (job);
  for (guint i = 0; i < job->n; i++)
    if (job->exported[i] != NULL)
      bench_close_buffer (job->exported[i], ctx->stream, NULL);
  ctx->drv->cuStreamSynchronize (ctx->stream);
  g_clear_pointer (&job->handle, memres_ipc_handle_free);
  g_free (job->exported);
  g_free (job->descs);
  g_free (job->raw_data);
  g_free (job->imported);
  g_free (job->raw_ptrs);
}

/**
 * bench_run_ipc_import:
 * @ctx: the benchmark context; its resource must export its pool (kind ipc)
 *
 * Section (f): "pool + first buffer" (ns per import of the pool and one buffer, closed again)
 * and "per buffer" (ns per import + close of one of N distinct buffers on a pool imported once),
 * memres against raw, in this process.
 *
 * Returns: (transfer full): the section; failed rows carry their error
 */
BenchSection *
bench_run_ipc_import (BenchContext *ctx)
{
  ImportJob job = { .n = ctx->config->import_buffers };
  g_autofree char *size_text = bench_format_size (IMPORT_BUFFER_SIZE);
  g_autofree char *title
      = g_strdup_printf ("IPC import into this process, buffers of %s, one stream", size_text);
  g_autofree char *per_label = g_strdup_printf ("per buffer (%u distinct)", job.n);
  BenchSection *section = bench_section_new (
      "ipc_import", title, "ns/import",
      "pool + first buffer: dup + cuMemPoolImportFromShareableHandle + cuMemPoolImportPointer + "
      "cuPointerGetAttribute(RANGE_SIZE) + cuMemFreeAsync + cuMemPoolDestroy + close; per buffer: "
      "cuMemPoolImportPointer + cuPointerGetAttribute(RANGE_SIZE) + cuMemFreeAsync on a pool "
      "imported once; every iteration ends with cuStreamSynchronize. The range query is the "
      "check every safe importer makes (memres and cuda.core alike): a descriptor from another "
      "process may claim more bytes than the exporter's allocation has");
  BenchRow *rows[]
      = { bench_section_add_row (section, "pool + first buffer", IMPORT_BUFFER_SIZE, 0),
          bench_section_add_row (section, per_label, IMPORT_BUFFER_SIZE, 0) };
  g_autoptr (GError) error = NULL;

  if (!import_job_init (&job, ctx, &error))
    {
      for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
        bench_row_set_error (rows[i], error);
      import_job_clear (&job);
      return section;
    }

  {
    BenchVariant variants[] = { { "memres", pool_memres, &job }, { "raw", pool_raw, &job } };

    if (!bench_measure (ctx, "ipc import pool", variants, 2, 1, rows[0], &error))
      bench_row_set_error (rows[0], error);
  }

  g_clear_error (&error);
  if (!import_job_open_importers (&job, &error))
    bench_row_set_error (rows[1], error);
  else
    {
      BenchVariant variants[]
          = { { "memres", buffers_memres, &job }, { "raw", buffers_raw, &job } };

      if (!bench_measure (ctx, "ipc import buffers", variants, 2, job.n, rows[1], &error))
        bench_row_set_error (rows[1], error);
    }
  import_job_clear (&job);
  return section;
}

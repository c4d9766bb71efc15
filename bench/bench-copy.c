/* memres-bench: section (e), copies between host and device. The same device memory (one
 * cuMemAlloc) is the other end of every copy: memres copies from/to a buffer of the resource
 * (pinned) with memres_buffer_copy_to(); the raw copies use cuMemHostAlloc memory and, for
 * contrast, pageable malloc memory, with cuMemcpyHtoDAsync / cuMemcpyDtoHAsync. */
#include "bench-common.h"

#include <string.h>

typedef struct
{
  const BenchContext *ctx;
  gboolean to_device;
  gsize size;
  MemresBuffer *host_buf;   /* from the resource */
  MemresBuffer *device_buf; /* wraps device */
  CUdeviceptr device;
  void *pinned;   /* cuMemHostAlloc */
  void *pageable; /* g_malloc */
} CopyJob;

#define CHECK(call, args) bench_cuda_check (ctx, ctx->drv->call args, #call, error)

static gboolean
copy_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CopyJob *job = data;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    if (!(job->to_device
              ? memres_buffer_copy_to (job->host_buf, job->device_buf, job->ctx->stream, error)
              : memres_buffer_copy_to (job->device_buf, job->host_buf, job->ctx->stream, error)))
      return FALSE;
  return bench_finish (job->ctx, job->ctx->stream, t0, elapsed_ns, error);
}

static gboolean
copy_driver (CopyJob *job, void *host, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  const BenchContext *ctx = job->ctx;
  gint64 t0 = bench_now_ns ();

  for (guint64 i = 0; i < iterations; i++)
    if (!(job->to_device ? CHECK (cuMemcpyHtoDAsync, (job->device, host, job->size, ctx->stream))
                         : CHECK (cuMemcpyDtoHAsync, (host, job->device, job->size, ctx->stream))))
      return FALSE;
  return bench_finish (ctx, ctx->stream, t0, elapsed_ns, error);
}

static gboolean
copy_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CopyJob *job = data;

  return copy_driver (job, job->pinned, iterations, elapsed_ns, error);
}

static gboolean
copy_pageable (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  CopyJob *job = data;

  return copy_driver (job, job->pageable, iterations, elapsed_ns, error);
}

static gboolean
copy_job_init (CopyJob *job, const BenchContext *ctx, GError **error)
{
  job->ctx = ctx;
  if (!memres_resource_is_host_accessible (ctx->mr))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "--copy needs a host-accessible spec (pinned), not '%s'", ctx->config->spec);
      return FALSE;
    }
  job->host_buf = memres_resource_allocate (ctx->mr, job->size, ctx->stream, error);
  if (job->host_buf == NULL || !CHECK (cuMemAlloc, (&job->device, job->size)))
    return FALSE;
  job->device_buf
      = memres_buffer_new_for_pointer ((gpointer) (guintptr) job->device, job->size, ctx->device,
                                       MEMRES_MEMORY_DEVICE_ACCESSIBLE, NULL, NULL, error);
  if (job->device_buf == NULL || !CHECK (cuMemHostAlloc, (&job->pinned, job->size, 0)))
    return FALSE;
  job->pageable = g_try_malloc (job->size);
  if (job->pageable == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "malloc of %" G_GSIZE_FORMAT " bytes failed", job->size);
      return FALSE;
    }
  /* Touch every page once so that no copy pays for first faults. */
  memset (job->pageable, 1, job->size);
  memset (job->pinned, 1, job->size);
  memset (memres_buffer_get_pointer (job->host_buf), 1, job->size);
  return bench_sync_stream (ctx, ctx->stream, error);
}

static void
copy_job_clear (CopyJob *job)
{
  const BenchContext *ctx = job->ctx;

  if (job->host_buf != NULL)
    memres_buffer_close (job->host_buf, ctx->stream, NULL);
  g_clear_pointer (&job->host_buf, memres_buffer_unref);
  g_clear_pointer (&job->device_buf, memres_buffer_unref);
  if (job->device != 0)
    ctx->drv->cuMemFree (job->device);
  if (job->pinned != NULL)
    ctx->drv->cuMemFreeHost (job->pinned);
  g_free (job->pageable);
}

/**
 * bench_run_copy:
 * @ctx: the benchmark context; its resource must be host-accessible (pinned)
 *
 * Section (e): host to device and device to host, one row each; variants memres (the
 * resource's buffer), raw (cuMemHostAlloc) and pageable (malloc).
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_copy (BenchContext *ctx)
{
  g_autofree char *size_text = bench_format_size (ctx->config->copy_size);
  g_autofree char *title = g_strdup_printf ("copies of %s, one stream", size_text);
  BenchSection *section
      = bench_section_new ("copy", title, "ns/copy",
                           "cuMemcpyHtoDAsync / cuMemcpyDtoHAsync from cuMemHostAlloc memory "
                           "(raw) and from malloc memory (pageable)");
  CopyJob job = { .size = ctx->config->copy_size };
  g_autoptr (GError) error = NULL;
  const char *labels[] = { "host to device", "device to host" };

  if (!copy_job_init (&job, ctx, &error))
    {
      for (guint i = 0; i < G_N_ELEMENTS (labels); i++)
        bench_row_set_error (bench_section_add_row (section, labels[i], job.size, 0), error);
      copy_job_clear (&job);
      return section;
    }
  for (guint i = 0; i < G_N_ELEMENTS (labels); i++)
    {
      BenchRow *row = bench_section_add_row (section, labels[i], job.size, 0);
      BenchVariant variants[] = { { "memres", copy_memres, &job },
                                  { "raw", copy_raw, &job },
                                  { "pageable", copy_pageable, &job } };

      job.to_device = i == 0;
      g_clear_error (&error);
      if (!bench_measure (ctx, labels[i], variants, 3, 1, row, &error))
        bench_row_set_error (row, error);
    }
  copy_job_clear (&job);
  return section;
}

/* memres-bench: section (d), growing a VMM buffer. For each chunk size C, a buffer of C bytes
 * grows by the configured size (1 GiB) through memres_buffer_resize() on `vmm:...,chunk=C`,
 * against the raw driver sequence with the same chunking: cuMemAddressReserve right after the
 * buffer, then cuMemCreate + cuMemMap + cuMemSetAccess per chunk. Only the grow is timed; the
 * initial buffer and the teardown are not. */
#include "bench-common.h"

#include <string.h>

typedef struct
{
  const BenchContext *ctx;
  MemresResource *mr;
  guint64 chunk;
  guint64 grow;
  CUmemAllocationProp prop;
  CUmemAccessDesc access;
  gsize granularity;
  guint64 moved;     /* raw grows whose reservation did not land right after the buffer */
  guint64 raw_grows; /* raw grows done */
  gsize memres_size; /* buffer size memres reported after its last grow */
} GrowJob;

static gboolean
grow_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  GrowJob *job = data;
  const BenchContext *ctx = job->ctx;

  for (guint64 i = 0; i < iterations; i++)
    {
      g_autoptr (MemresBuffer) buf
          = memres_resource_allocate (job->mr, job->chunk, ctx->stream, error);
      gint64 t0;
      gboolean ok;

      if (buf == NULL)
        return FALSE;
      t0 = bench_now_ns ();
      ok = memres_buffer_resize (buf, job->chunk + job->grow, ctx->stream, error);
      *elapsed_ns += bench_now_ns () - t0;
      job->memres_size = memres_buffer_get_size (buf);
      if (!memres_buffer_close (buf, ctx->stream, ok ? error : NULL) || !ok)
        return FALSE;
    }
  return TRUE;
}

#define CHECK(call, args) bench_cuda_check (ctx, ctx->drv->call args, #call, error)

typedef struct
{
  CUdeviceptr base;
  gsize size;
} Range;

/* What one raw buffer holds: its reservations and, per mapped chunk, where and which handle. */
typedef struct
{
  Range reservations[2];
  guint n_reservations;
  GArray *maps;    /* Range */
  GArray *handles; /* CUmemGenericAllocationHandle, parallel to maps */
} RawBuffer;

static gboolean
raw_map_chunk (GrowJob *job, RawBuffer *b, CUdeviceptr at, gsize size, GError **error)
{
  const BenchContext *ctx = job->ctx;
  CUmemGenericAllocationHandle h;
  Range r = { at, size };

  if (!CHECK (cuMemCreate, (&h, size, &job->prop, 0)))
    return FALSE;
  if (!CHECK (cuMemMap, (at, size, 0, h, 0)))
    {
      ctx->drv->cuMemRelease (h);
      return FALSE;
    }
  g_array_append_val (b->maps, r);
  g_array_append_val (b->handles, h);
  return CHECK (cuMemSetAccess, (at, size, &job->access, 1));
}

static void
raw_teardown (GrowJob *job, RawBuffer *b)
{
  const MemresCudaDriver *drv = job->ctx->drv;

  for (guint i = 0; i < b->maps->len; i++)
    {
      Range *r = &g_array_index (b->maps, Range, i);

      drv->cuMemUnmap (r->base, r->size);
      drv->cuMemRelease (g_array_index (b->handles, CUmemGenericAllocationHandle, i));
    }
  for (guint i = 0; i < b->n_reservations; i++)
    drv->cuMemAddressFree (b->reservations[i].base, b->reservations[i].size);
  g_array_set_size (b->maps, 0);
  g_array_set_size (b->handles, 0);
  b->n_reservations = 0;
}

static gsize
round_up (GrowJob *job, guint64 size)
{
  return (size + job->granularity - 1) / job->granularity * job->granularity;
}

static gboolean
raw_grow_once (GrowJob *job, RawBuffer *b, gint64 *elapsed_ns, GError **error)
{
  const BenchContext *ctx = job->ctx;
  gsize first = round_up (job, job->chunk), total = round_up (job, job->grow);
  CUdeviceptr want, at;
  gint64 t0;

  if (!CHECK (cuMemAddressReserve, (&b->reservations[0].base, first, 0, 0, 0)))
    return FALSE;
  b->reservations[0].size = first;
  b->n_reservations = 1;
  if (!raw_map_chunk (job, b, b->reservations[0].base, first, error))
    return FALSE;

  t0 = bench_now_ns ();
  want = b->reservations[0].base + first;
  if (!CHECK (cuMemAddressReserve, (&b->reservations[1].base, total, 0, want, 0)))
    return FALSE;
  b->reservations[1].size = total;
  b->n_reservations = 2;
  at = b->reservations[1].base;
  for (gsize off = 0; off < total; off += job->chunk)
    if (!raw_map_chunk (job, b, at + off, round_up (job, MIN (job->chunk, total - off)), error))
      return FALSE;
  *elapsed_ns += bench_now_ns () - t0;
  job->moved += at != want;
  job->raw_grows++;
  return TRUE;
}

static gboolean
grow_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  GrowJob *job = data;
  RawBuffer b = { .maps = g_array_new (FALSE, FALSE, sizeof (Range)),
                  .handles = g_array_new (FALSE, FALSE, sizeof (CUmemGenericAllocationHandle)) };
  gboolean ok = TRUE;

  for (guint64 i = 0; ok && i < iterations; i++)
    {
      ok = raw_grow_once (job, &b, elapsed_ns, error);
      raw_teardown (job, &b);
    }
  g_array_unref (b.maps);
  g_array_unref (b.handles);
  return ok;
}

static gboolean
grow_job_init (GrowJob *job, BenchContext *ctx, const char *spec, GError **error)
{
  BenchContext sub = *ctx;
  BenchRaw *raw;
  gboolean ok;

  job->ctx = ctx;
  job->mr = memres_resource_new (spec, error);
  if (job->mr == NULL)
    return FALSE;
  sub.mr = job->mr;
  raw = bench_raw_new (&sub, error);
  if (raw == NULL)
    return FALSE;
  ok = bench_raw_get_vmm_prop (raw, &job->prop);
  bench_raw_free (raw);
  if (!ok)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "'%s' does not allocate with cuMemCreate", spec);
      return FALSE;
    }
  job->access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  job->access.location.id = ctx->device;
  job->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return bench_cuda_check (ctx,
                           ctx->drv->cuMemGetAllocationGranularity (
                               &job->granularity, &job->prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                           "cuMemGetAllocationGranularity", error);
}

/**
 * bench_run_vmm_grow:
 * @ctx: the benchmark context; its resource must be of kind `vmm`
 *
 * Section (d): one row per configured chunk size.
 *
 * Returns: (transfer full): the section
 */
BenchSection *
bench_run_vmm_grow (BenchContext *ctx)
{
  const BenchConfig *cfg = ctx->config;
  g_autofree char *grow_text = bench_format_size (cfg->grow_size);
  g_autofree char *title = g_strdup_printf ("growing a vmm buffer by %s", grow_text);
  BenchSection *section = bench_section_new (
      "vmm_grow", title, "ns/grow",
      "cuMemAddressReserve right after the buffer, then cuMemCreate + cuMemMap + "
      "cuMemSetAccess per chunk");
  const char *kind = memres_resource_get_kind_name (ctx->mr);

  for (guint i = 0; i < cfg->chunks->len; i++)
    {
      guint64 chunk = g_array_index (cfg->chunks, guint64, i);
      g_autofree char *chunk_text = bench_format_size (chunk);
      g_autofree char *label = g_strdup_printf ("chunk=%s", chunk_text);
      g_autofree char *spec = g_strdup_printf ("%s%cchunk=%" G_GUINT64_FORMAT, cfg->spec,
                                               strchr (cfg->spec, ':') ? ',' : ':', chunk);
      BenchRow *row = bench_section_add_row (section, label, chunk, 0);
      GrowJob job = { .chunk = chunk, .grow = cfg->grow_size };
      g_autoptr (GError) error = NULL;

      if (g_strcmp0 (kind, "vmm") != 0)
        g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "--vmm-grow needs a spec of kind vmm, not '%s'", kind);
      else if (grow_job_init (&job, ctx, spec, &error))
        {
          BenchVariant variants[] = { { "memres", grow_memres, &job }, { "raw", grow_raw, &job } };
          g_autofree char *what = g_strdup_printf ("vmm grow, %s", label);

          bench_measure (ctx, what, variants, 2, 1, row, &error);
          row->note = g_strdup_printf (
              "spec %s; memres buffer %" G_GSIZE_FORMAT " bytes after the grow; raw reservation "
              "moved in %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " grows",
              spec, job.memres_size, job.moved, job.raw_grows);
        }
      if (error != NULL)
        bench_row_set_error (row, error);
      g_clear_pointer (&job.mr, memres_resource_unref);
    }
  return section;
}

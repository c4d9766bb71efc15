/* memres-bench: the raw driver equivalent of a resource's allocate and close.
 *
 * The equivalent is found from the driver, not from the spec: a probe buffer allocated through
 * memres is asked which pool it came from (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE), so the raw loop
 * runs on the very same pool (same release threshold, same reuse state); a VMM buffer gives its
 * allocation properties (cuMemRetainAllocationHandle + cuMemGetAllocationPropertiesFromHandle).
 * Only when the driver cannot tell does the resource's flags decide. */
#include "bench-common.h"

#include <stdlib.h>

typedef enum
{
  RAW_POOL,      /* cuMemAllocFromPoolAsync / cuMemFreeAsync */
  RAW_VMM,       /* cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess, reversed */
  RAW_HOSTALLOC, /* cuMemHostAlloc / cuMemFreeHost */
  RAW_MEMALLOC,  /* cuMemAlloc / cuMemFree */
  RAW_MALLOC,    /* aligned_alloc / free (pageable host memory) */
} RawMode;

struct _BenchRaw
{
  const BenchContext *ctx;
  RawMode mode;
  CUmemoryPool pool;
  CUmemAllocationProp prop;
  CUmemAccessDesc access;
  gsize granularity;
  char *desc;
};

/* A raw VMM allocation: what the reverse sequence needs. */
typedef struct
{
  CUdeviceptr ptr;
  gsize size;
  CUmemGenericAllocationHandle handle;
} RawVmm;

/**
 * bench_cuda_check:
 * @ctx: the benchmark context
 * @result: what a driver call returned
 * @call: the call's name
 * @error: return location for a #GError (%MEMRES_CUDA_ERROR, code @result)
 *
 * Returns: %TRUE when @result is %CUDA_SUCCESS
 */
gboolean
bench_cuda_check (const BenchContext *ctx, CUresult result, const char *call, GError **error)
{
  if (result == CUDA_SUCCESS)
    return TRUE;
  return memres_cuda_set_error (error, result, call);
}

#define CHECK(call, args) bench_cuda_check (raw->ctx, raw->ctx->drv->call args, #call, error)

static gboolean
detect_pool (BenchRaw *raw, CUdeviceptr ptr)
{
  const MemresCudaDriver *drv = raw->ctx->drv;
  CUmemoryPool pool = NULL;

  if (drv->cuPointerGetAttribute == NULL
      || drv->cuPointerGetAttribute (&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr)
             != CUDA_SUCCESS
      || pool == NULL)
    return FALSE;
  raw->mode = RAW_POOL;
  raw->pool = pool;
  return TRUE;
}

static gboolean
detect_vmm (BenchRaw *raw, CUdeviceptr ptr)
{
  const MemresCudaDriver *drv = raw->ctx->drv;
  CUmemGenericAllocationHandle handle;
  CUresult r;

  if (drv->cuMemRetainAllocationHandle == NULL
      || drv->cuMemRetainAllocationHandle (&handle, (void *) (guintptr) ptr) != CUDA_SUCCESS)
    return FALSE;
  r = drv->cuMemGetAllocationPropertiesFromHandle (&raw->prop, handle);
  drv->cuMemRelease (handle);
  if (r != CUDA_SUCCESS)
    return FALSE;
  raw->mode = RAW_VMM;
  return TRUE;
}

/* The driver could not name the pool: take the one a pool resource most likely uses. */
static gboolean
fallback_pool (BenchRaw *raw, MemresResource *mr, GError **error)
{
  const MemresCudaDriver *drv = raw->ctx->drv;

  raw->mode = RAW_POOL;
  if (memres_resource_get_device (mr) >= 0)
    return CHECK (cuDeviceGetMemPool, (&raw->pool, memres_resource_get_device (mr)));
  CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_HOST, .id = 0 };
  if (drv->cuMemGetMemPool == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "the driver cannot name the host pool of this resource");
      return FALSE;
    }
  return CHECK (cuMemGetMemPool, (&raw->pool, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
}

static gboolean
describe (BenchRaw *raw, gboolean fell_back, GError **error)
{
  const MemresCudaDriver *drv = raw->ctx->drv;
  cuuint64_t threshold = 0;

  switch (raw->mode)
    {
    case RAW_POOL:
      if (drv->cuMemPoolGetAttribute (raw->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold)
          != CUDA_SUCCESS)
        threshold = 0;
      {
        g_autofree char *text
            = threshold == G_MAXUINT64 ? g_strdup ("max") : bench_format_size (threshold);

        raw->desc = g_strdup_printf (
            "cuMemAllocFromPoolAsync + cuMemFreeAsync on %s pool %p (release threshold %s)",
            fell_back ? "the device's current" : "the resource's own", (void *) raw->pool, text);
      }
      break;
    case RAW_VMM:
      raw->access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      raw->access.location.id = raw->ctx->device;
      raw->access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      if (!CHECK (cuMemGetAllocationGranularity,
                  (&raw->granularity, &raw->prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))
        return FALSE;
      raw->desc = g_strdup_printf (
          "cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess; cuStreamSynchronize + "
          "cuMemUnmap + cuMemAddressFree + cuMemRelease (recommended granularity %" G_GSIZE_FORMAT
          ", location type %d id %d, handle types 0x%x)",
          raw->granularity, raw->prop.location.type, raw->prop.location.id,
          raw->prop.requestedHandleTypes);
      break;
    case RAW_HOSTALLOC:
      raw->desc = g_strdup ("cuMemHostAlloc(PORTABLE) + cuMemFreeHost");
      break;
    case RAW_MEMALLOC:
      raw->desc = g_strdup ("cuMemAlloc + cuMemFree");
      break;
    case RAW_MALLOC:
      raw->desc = g_strdup ("aligned_alloc(256) + free");
      break;
    }
  return TRUE;
}

/**
 * bench_raw_new:
 * @ctx: the benchmark context (its resource and stream)
 * @error: return location for a #GError
 *
 * Finds the raw driver equivalent of @ctx's resource from one probe buffer.
 *
 * Returns: (transfer full): the raw equivalent, or %NULL with @error set
 */
BenchRaw *
bench_raw_new (const BenchContext *ctx, GError **error)
{
  g_autoptr (MemresBuffer) probe = NULL;
  BenchRaw *raw = g_new0 (BenchRaw, 1);
  MemresMemoryFlags flags = memres_resource_get_flags (ctx->mr);
  gboolean fell_back = FALSE;
  CUdeviceptr ptr;

  raw->ctx = ctx;
  probe = memres_resource_allocate (ctx->mr, 64 * BENCH_KIB, ctx->stream, error);
  if (probe == NULL)
    goto fail;
  ptr = (CUdeviceptr) memres_buffer_get_address (probe);
  if (ctx->config->raw_pool)
    {
      /* --raw-pool: the device's pool whatever the resource's memory is (a host resource has
       * none to pair with) */
      fell_back = TRUE;
      if (memres_resource_get_device (ctx->mr) < 0)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                       "--raw-pool needs a resource on a device");
          goto fail;
        }
      if (!fallback_pool (raw, ctx->mr, error))
        goto fail;
    }
  else if (detect_pool (raw, ptr) || detect_vmm (raw, ptr))
    ;
  else if (flags & MEMRES_MEMORY_STREAM_ORDERED)
    {
      fell_back = TRUE;
      if (!fallback_pool (raw, ctx->mr, error))
        goto fail;
    }
  else if ((flags & MEMRES_MEMORY_HOST_ACCESSIBLE) && (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE))
    raw->mode = RAW_HOSTALLOC;
  else if (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE)
    raw->mode = RAW_MEMALLOC;
  else
    raw->mode = RAW_MALLOC;
  if (!memres_buffer_close (probe, ctx->stream, error) || !describe (raw, fell_back, error))
    goto fail;
  return raw;

fail:
  bench_raw_free (raw);
  return NULL;
}

void
bench_raw_free (BenchRaw *raw)
{
  if (raw == NULL)
    return;
  g_free (raw->desc);
  g_free (raw);
}

const char *
bench_raw_describe (const BenchRaw *raw)
{
  return raw->desc;
}

/* The VMM properties the resource's buffers have, when the raw equivalent is VMM. */
gboolean
bench_raw_get_vmm_prop (const BenchRaw *raw, CUmemAllocationProp *prop)
{
  if (raw->mode != RAW_VMM)
    return FALSE;
  *prop = raw->prop;
  return TRUE;
}

static gboolean
vmm_alloc (BenchRaw *raw, gsize size, gpointer *handle, GError **error)
{
  RawVmm *v = g_new0 (RawVmm, 1);

  v->size = (size + raw->granularity - 1) / raw->granularity * raw->granularity;
  if (!CHECK (cuMemCreate, (&v->handle, v->size, &raw->prop, 0)))
    goto fail;
  if (!CHECK (cuMemAddressReserve, (&v->ptr, v->size, 0, 0, 0)))
    goto fail_release;
  if (!CHECK (cuMemMap, (v->ptr, v->size, 0, v->handle, 0)))
    goto fail_free;
  if (!CHECK (cuMemSetAccess, (v->ptr, v->size, &raw->access, 1)))
    goto fail_unmap;
  *handle = v;
  return TRUE;

fail_unmap:
  raw->ctx->drv->cuMemUnmap (v->ptr, v->size);
fail_free:
  raw->ctx->drv->cuMemAddressFree (v->ptr, v->size);
fail_release:
  raw->ctx->drv->cuMemRelease (v->handle);
fail:
  g_free (v);
  return FALSE;
}

static gboolean
vmm_free (BenchRaw *raw, RawVmm *v, CUstream stream, GError **error)
{
  gboolean ok = CHECK (cuStreamSynchronize, (stream)) && CHECK (cuMemUnmap, (v->ptr, v->size))
                && CHECK (cuMemAddressFree, (v->ptr, v->size)) && CHECK (cuMemRelease, (v->handle));

  g_free (v);
  return ok;
}

/**
 * bench_raw_alloc:
 * @raw: the raw equivalent
 * @size: bytes
 * @stream: orders the allocation for pools
 * @handle: (out): what bench_raw_free_one() takes back
 * @error: return location for a #GError (%MEMRES_CUDA_ERROR)
 *
 * Returns: %TRUE on success
 */
gboolean
bench_raw_alloc (BenchRaw *raw, gsize size, CUstream stream, gpointer *handle, GError **error)
{
  CUdeviceptr d;
  void *p;

  switch (raw->mode)
    {
    case RAW_POOL:
      if (!CHECK (cuMemAllocFromPoolAsync, (&d, size, raw->pool, stream)))
        return FALSE;
      *handle = (gpointer) (guintptr) d;
      return TRUE;
    case RAW_VMM:
      return vmm_alloc (raw, size, handle, error);
    case RAW_HOSTALLOC:
      if (!CHECK (cuMemHostAlloc, (&p, size, CU_MEMHOSTALLOC_PORTABLE)))
        return FALSE;
      *handle = p;
      return TRUE;
    case RAW_MEMALLOC:
      if (!CHECK (cuMemAlloc, (&d, size)))
        return FALSE;
      *handle = (gpointer) (guintptr) d;
      return TRUE;
    case RAW_MALLOC:
      *handle = aligned_alloc (256, (size + 255) / 256 * 256);
      if (*handle == NULL)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "aligned_alloc failed");
          return FALSE;
        }
      return TRUE;
    }
  g_assert_not_reached ();
}

/**
 * bench_raw_free_one:
 * @raw: the raw equivalent
 * @handle: from bench_raw_alloc()
 * @stream: orders the free for pools
 * @error: return location for a #GError (%MEMRES_CUDA_ERROR)
 *
 * Returns: %TRUE on success
 */
gboolean
bench_raw_free_one (BenchRaw *raw, gpointer handle, CUstream stream, GError **error)
{
  switch (raw->mode)
    {
    case RAW_POOL:
      return CHECK (cuMemFreeAsync, ((CUdeviceptr) (guintptr) handle, stream));
    case RAW_VMM:
      return vmm_free (raw, handle, stream, error);
    case RAW_HOSTALLOC:
      return CHECK (cuMemFreeHost, (handle));
    case RAW_MEMALLOC:
      return CHECK (cuMemFree, ((CUdeviceptr) (guintptr) handle));
    case RAW_MALLOC:
      free (handle);
      return TRUE;
    }
  g_assert_not_reached ();
}

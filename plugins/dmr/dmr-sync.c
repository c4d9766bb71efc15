/* memres - CUDA memory resources
 * dmr-sync.c: the dmr kind's implementation for devices without memory pools
 * (sync_fallback=true): the driver calls (#PoolOther) such an instance gets at init. Allocation is
 * cuMemAlloc in the device's primary context, immediately usable by every stream; a free is
 * cuMemFree, after the core waited for the deallocation stream (the memory is not stream-ordered),
 * so that work queued there before the free is done with the memory. The driver keeps no pool
 * statistics for such memory: the shared pool code counts the bytes of the live buffers (reserved =
 * used) and enforces max_size. */
#include "dmr-private.h"

/* cuMemAlloc, in the device's primary context (POOL_CONTEXT_PRIMARY). */
static CUresult
sync_allocate (MemresResource *mr, gsize size, guint64 *address, const char **call)
{
  Dmr *self = memres_resource_get_private (mr);
  CUdeviceptr ptr = 0;
  CUresult r = self->drv->cuMemAlloc (&ptr, size);

  *address = ptr;
  return r;
}

/* cuMemFree, in the primary context, after the core synchronized the deallocation stream. */
static CUresult
sync_free (MemresResource *mr, guint64 address)
{
  Dmr *self = memres_resource_get_private (mr);

  return self->drv->cuMemFree ((CUdeviceptr) address);
}

static const PoolOther dmr_sync = {
  .context = POOL_CONTEXT_PRIMARY,
  .allocate = sync_allocate,
  .allocate_call = "cuMemAlloc",
  .free = sync_free,
  .free_call = "cuMemFree",
};

gboolean
dmr_sync_init (Dmr *self, guint64 max_size, GError **error)
{
  CUcontext context;

  /* the primary context is retained here, so that a device that cannot have one fails at init */
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL || !memres_cuda_get_primary_context (self->device, &context, error))
    return FALSE;
  pool_use_other (&self->pool, &dmr_sync, self->device, max_size,
                  "dmr: peer access needs a memory pool, and this device has none "
                  "(sync_fallback=true allocates with cuMemAlloc)");
  return TRUE;
}

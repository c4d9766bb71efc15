/* memres - CUDA memory resources
 * dmr-sync.c: the dmr kind's implementation for devices without memory pools
 * (sync_fallback=true), the ops table such an instance gets at init. Allocation is cuMemAlloc
 * in the device's primary context, immediately usable by every stream; a free is cuMemFree, after
 * the core waited for the deallocation stream (the memory is not stream-ordered), so that work
 * queued there before the free is done with the memory. The driver keeps no pool statistics for
 * such memory: the shared pool code counts the bytes of the live buffers (reserved = used) and
 * enforces max_size. */
#include "dmr-private.h"

/* cuMemAlloc in the device's primary context (memres_cuda_push_context()). Thread-safe. */
static gboolean
sync_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  Dmr *self = memres_resource_get_private (mr);
  CUdeviceptr ptr = 0;
  gboolean pushed;
  CUresult r;

  if (!memres_cuda_push_context (self->device, &pushed, error))
    return FALSE;
  r = self->drv->cuMemAlloc (&ptr, size);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    return pool_set_alloc_error (error, r, "cuMemAlloc", size);
  alloc->address = ptr;
  alloc->size = size;
  return TRUE;
}

/* cuMemFree in the primary context; the core synchronized the deallocation stream first. When the
 * free fails nothing is freed (the core keeps the buffer open). `CUDA_ERROR_DEINITIALIZED` is
 * success: at process exit the memory is gone with the driver. Thread-safe. */
static gboolean
sync_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);
  GError *local = NULL;
  gboolean pushed;
  CUresult r;

  if (!memres_cuda_push_context (self->device, &pushed, &local))
    {
      if (g_error_matches (local, MEMRES_CUDA_ERROR, CUDA_ERROR_DEINITIALIZED))
        {
          g_error_free (local);
          return TRUE;
        }
      g_propagate_error (error, local);
      return FALSE;
    }
  r = self->drv->cuMemFree ((CUdeviceptr) alloc->address);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
    return memres_cuda_set_error (error, r, "cuMemFree");
  return TRUE;
}

static const MemresResourceOps dmr_sync_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .allocate = sync_allocate,
  .deallocate = sync_deallocate,
};

gboolean
dmr_sync_init (Dmr *self, guint64 max_size, GError **error)
{
  CUcontext context;

  /* the primary context is retained here, so that a device that cannot have one fails at init */
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL || !memres_cuda_get_primary_context (self->device, &context, error))
    return FALSE;
  pool_use_other (&self->pool, &dmr_sync_ops, max_size,
                  "dmr: peer access needs a memory pool, and this device has none "
                  "(sync_fallback=true allocates with cuMemAlloc)");
  return TRUE;
}

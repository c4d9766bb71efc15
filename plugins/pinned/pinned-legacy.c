/* memres - CUDA memory resources
 * pinned-legacy.c: mode=legacy of the pinned kind, the ops table such an instance gets at init.
 * Every buffer is its own cuMemHostAlloc allocation; freeing is synchronous: cuMemFreeHost, after
 * the core waited for the deallocation stream (the memory is not stream-ordered). The shared pool
 * code counts the live bytes (reserved = used) and answers the pool-only slots. */
#include "pinned-private.h"

/* Page-locked host memory from cuMemHostAlloc(), after making the device's primary context
 * current when the thread has none. Not stream-ordered: the memory is usable at once.
 * Thread-safe. Errors: %MEMRES_ERROR_OUT_OF_MEMORY when the driver has not enough memory;
 * otherwise those of memres_cuda_ensure_context() and %MEMRES_CUDA_ERROR of cuMemHostAlloc. */
static gboolean
legacy_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                 GError **error)
{
  Pinned *self = memres_resource_get_private (mr);
  void *ptr = NULL;
  CUresult res;

  if (!memres_cuda_ensure_context (self->device, error))
    return FALSE;
  res = self->drv->cuMemHostAlloc (&ptr, size, self->host_alloc_flags);
  if (res != CUDA_SUCCESS)
    return pool_set_alloc_error (error, res, "cuMemHostAlloc", size);
  alloc->address = (guint64) (guintptr) ptr;
  alloc->size = size;
  return TRUE;
}

/* cuMemFreeHost(); the core synchronized the deallocation stream first, so that no work queued
 * on it still uses the memory. When the free fails nothing is freed: the core keeps the buffer
 * open, so that it can be closed again. Thread-safe. Errors: those of
 * memres_cuda_ensure_context(); %MEMRES_CUDA_ERROR of cuMemFreeHost. */
static gboolean
legacy_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);
  CUresult res;

  if (!memres_cuda_ensure_context (self->device, error))
    return FALSE;
  res = self->drv->cuMemFreeHost ((void *) (guintptr) alloc->address);
  if (res != CUDA_SUCCESS && res != CUDA_ERROR_DEINITIALIZED)
    return memres_cuda_set_error (error, res, "cuMemFreeHost");
  return TRUE;
}

static const MemresResourceOps legacy_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .allocate = legacy_allocate,
  .deallocate = legacy_deallocate,
};

/**
 * pinned_legacy_init:
 * @self: the zero-filled instance data
 * @config: a configuration resolved to legacy mode: its device (whose primary context allocates
 *   when the calling thread has no current context) and `CU_MEMHOSTALLOC_*` flags
 * @error: return location for a #GError
 *
 * Makes @self a legacy-mode instance (pool_use_other()). Makes no driver call beyond loading
 * the driver.
 *
 * Returns: %TRUE on success; %FALSE with the errors of memres_cuda_get_driver() (nothing to
 *   undo).
 */
gboolean
pinned_legacy_init (Pinned *self, const PinnedConfig *config, GError **error)
{
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL)
    return FALSE;
  self->device = config->device;
  self->host_alloc_flags = config->host_alloc_flags;
  pool_use_other (&self->pool, &legacy_ops, 0,
                  "pinned: mode=legacy is cuMemHostAlloc memory, accessible from every device "
                  "with unified addressing: its access cannot be read or changed, and it cannot "
                  "be shared with other processes (use mode=pool, or mode=pool,ipc=true to "
                  "share)");
  return TRUE;
}

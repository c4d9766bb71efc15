/* memres - CUDA memory resources
 * pinned-legacy.c: mode=legacy of the pinned kind, the driver calls (#PoolOther) such an instance
 * gets at init.
 * Every buffer is its own cuMemHostAlloc allocation; freeing is synchronous: cuMemFreeHost, after
 * the core waited for the deallocation stream (the memory is not stream-ordered). The shared pool
 * code counts the live bytes (reserved = used) and answers the pool-only slots. */
#include "pinned-private.h"

/* Page-locked host memory from cuMemHostAlloc(), in the thread's current context, the device's
 * primary one made current when there is none (POOL_CONTEXT_CURRENT). Not stream-ordered: the
 * memory is usable at once. */
static CUresult
legacy_allocate (MemresResource *mr, gsize size, guint64 *address, const char **call)
{
  Pinned *self = memres_resource_get_private (mr);
  void *ptr = NULL;
  CUresult r = self->drv->cuMemHostAlloc (&ptr, size, self->host_alloc_flags);

  *address = (guint64) (guintptr) ptr;
  return r;
}

/* cuMemFreeHost(), after the core synchronized the deallocation stream, so that no work queued
 * on it still uses the memory. */
static CUresult
legacy_free (MemresResource *mr, guint64 address)
{
  Pinned *self = memres_resource_get_private (mr);

  return self->drv->cuMemFreeHost ((void *) (guintptr) address);
}

static const PoolOther pinned_legacy = {
  .context = POOL_CONTEXT_CURRENT,
  .allocate = legacy_allocate,
  .allocate_call = "cuMemHostAlloc",
  .free = legacy_free,
  .free_call = "cuMemFreeHost",
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
  pool_use_other (&self->pool, &pinned_legacy, config->device, 0,
                  "pinned: mode=legacy is cuMemHostAlloc memory, accessible from every device "
                  "with unified addressing: its access cannot be read or changed, and it cannot "
                  "be shared with other processes (use mode=pool, or mode=pool,ipc=true to "
                  "share)");
  return TRUE;
}

/* memres - CUDA memory resources
 * pinned-legacy.c: legacy mode of the pinned kind. Every buffer is its own cuMemHostAlloc
 * allocation; freeing is synchronous (the deallocation stream is synchronized first). */
#include "pinned-legacy.h"

#include "pool.h"

/**
 * pinned_legacy_init:
 * @self: zero-filled state to set up
 * @device: device ordinal whose primary context allocates when the calling thread has no
 *   current context
 * @host_alloc_flags: `CU_MEMHOSTALLOC_*` flags passed to every cuMemHostAlloc
 * @error: return location for a #GError
 *
 * Sets up legacy mode. Makes no driver call beyond loading the driver.
 *
 * Errors: those of memres_cuda_get_driver().
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise (nothing to undo).
 */
gboolean
pinned_legacy_init (PinnedLegacy *self, gint device, guint host_alloc_flags, GError **error)
{
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL)
    return FALSE;
  self->device = device;
  self->host_alloc_flags = host_alloc_flags;
  g_mutex_init (&self->lock);
  return TRUE;
}

/**
 * pinned_legacy_finalize:
 * @self: state set up by pinned_legacy_init()
 *
 * Releases the state. Every buffer is gone by then (each held the resource).
 */
void
pinned_legacy_finalize (PinnedLegacy *self)
{
  g_mutex_clear (&self->lock);
}

static void
account (PinnedLegacy *self, gsize size, gboolean add)
{
  g_mutex_lock (&self->lock);
  if (add)
    {
      self->used_current += size;
      self->used_high = MAX (self->used_high, self->used_current);
    }
  else
    self->used_current -= size;
  g_mutex_unlock (&self->lock);
}

/**
 * pinned_legacy_allocate:
 * @self: legacy state
 * @size: bytes, more than 0
 * @alloc: (out caller-allocates): filled with the host pointer and @size
 * @error: return location for a #GError
 *
 * Allocates page-locked host memory with cuMemHostAlloc(), after making the device's primary
 * context current when the thread has none. Not stream-ordered: the memory is usable at once.
 * Thread-safe.
 *
 * Errors: %MEMRES_ERROR_OUT_OF_MEMORY when the driver has not enough memory; otherwise those
 * of memres_cuda_ensure_context() and %MEMRES_CUDA_ERROR of cuMemHostAlloc.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_legacy_allocate (PinnedLegacy *self, gsize size, MemresAllocation *alloc, GError **error)
{
  void *ptr = NULL;
  CUresult res;

  if (!memres_cuda_ensure_context (self->device, error))
    return FALSE;
  res = self->drv->cuMemHostAlloc (&ptr, size, self->host_alloc_flags);
  if (res != CUDA_SUCCESS)
    return memres_pool_set_alloc_error (error, res, "cuMemHostAlloc", size);
  alloc->address = (guint64) (guintptr) ptr;
  alloc->size = size;
  alloc->plugin_data = NULL;
  account (self, size, TRUE);
  return TRUE;
}

/**
 * pinned_legacy_deallocate:
 * @self: legacy state
 * @alloc: an allocation of pinned_legacy_allocate()
 * @stream: the buffer's deallocation stream (%NULL: the legacy default stream)
 * @error: return location for a #GError
 *
 * Waits for @stream (cuStreamSynchronize()), so that no work queued on it still uses the
 * memory, then frees it with cuMemFreeHost(). When either fails nothing is freed: the core keeps
 * the buffer open, so that it can be closed again on a live stream. Thread-safe.
 *
 * Errors: those of memres_cuda_ensure_context(); %MEMRES_CUDA_ERROR of cuStreamSynchronize or
 * cuMemFreeHost.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_legacy_deallocate (PinnedLegacy *self, MemresAllocation *alloc, MemresStream stream,
                          GError **error)
{
  CUresult res;

  if (!memres_cuda_ensure_context (self->device, error))
    return FALSE;
  res = self->drv->cuStreamSynchronize (stream);
  if (res != CUDA_SUCCESS && res != CUDA_ERROR_DEINITIALIZED)
    return memres_cuda_set_error (error, res, "cuStreamSynchronize");
  res = self->drv->cuMemFreeHost ((void *) (guintptr) alloc->address);
  if (res != CUDA_SUCCESS && res != CUDA_ERROR_DEINITIALIZED)
    return memres_cuda_set_error (error, res, "cuMemFreeHost");
  account (self, alloc->size, FALSE);
  return TRUE;
}

/**
 * pinned_legacy_get_stats:
 * @self: legacy state
 * @stats: (out caller-allocates): filled but for n_buffers
 *
 * Legacy mode holds nothing beyond its buffers: reserved equals used. Thread-safe.
 */
void
pinned_legacy_get_stats (PinnedLegacy *self, MemresStats *stats)
{
  g_mutex_lock (&self->lock);
  stats->reserved_current = stats->used_current = self->used_current;
  stats->reserved_high = stats->used_high = self->used_high;
  g_mutex_unlock (&self->lock);
}

/**
 * pinned_legacy_reset_stats:
 * @self: legacy state
 *
 * Resets the high-water marks to the current values. Thread-safe.
 */
void
pinned_legacy_reset_stats (PinnedLegacy *self)
{
  g_mutex_lock (&self->lock);
  self->used_high = self->used_current;
  g_mutex_unlock (&self->lock);
}

/* memres - CUDA memory resources
 * dmr-sync.c: the dmr kind's fallback for devices without memory pools (sync_fallback=true).
 * Allocation is cuMemAlloc in the device's primary context, immediately usable by every stream;
 * a free first synchronizes its stream, so that work queued there before the free is done with
 * the memory, then cuMemFree. The driver keeps no pool statistics for such memory: they are
 * counted here, reserved = used. */
#include "dmr-sync.h"
#include "pool.h"

gboolean
dmr_sync_init (DmrSync *self, gint device, guint64 max_size, GError **error)
{
  memset (self, 0, sizeof *self);
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL)
    return FALSE;
  if (!memres_cuda_get_primary_context (device, &self->context, error))
    return FALSE;
  self->device = device;
  self->max_size = max_size;
  g_mutex_init (&self->lock);
  return TRUE;
}

void
dmr_sync_clear (DmrSync *self)
{
  if (self->drv == NULL)
    return;
  g_mutex_clear (&self->lock);
  memset (self, 0, sizeof *self);
}

/* Adds @delta bytes (or takes -@delta away) to the counters; refuses growth beyond max_size. */
static gboolean
account (DmrSync *self, gsize size, gboolean add)
{
  gboolean ok = TRUE;

  g_mutex_lock (&self->lock);
  if (!add)
    self->used_current -= size;
  else if (self->max_size != 0
           && (size > self->max_size || self->used_current > self->max_size - size))
    ok = FALSE;
  else
    {
      self->used_current += size;
      self->used_high = MAX (self->used_high, self->used_current);
    }
  g_mutex_unlock (&self->lock);
  return ok;
}

gboolean
dmr_sync_allocate (DmrSync *self, gsize size, guint64 *address, GError **error)
{
  CUdeviceptr ptr = 0;
  CUcontext popped;
  CUresult r;

  if (!account (self, size, TRUE))
    return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                        "cannot allocate %" G_GSIZE_FORMAT " bytes: max_size (%" G_GUINT64_FORMAT
                        " bytes) would be exceeded",
                        size, self->max_size),
           FALSE;

  r = self->drv->cuCtxPushCurrent (self->context);
  if (r != CUDA_SUCCESS)
    {
      account (self, size, FALSE);
      return memres_cuda_set_error (error, r, "cuCtxPushCurrent");
    }
  r = self->drv->cuMemAlloc (&ptr, size);
  (void) self->drv->cuCtxPopCurrent (&popped);
  if (r != CUDA_SUCCESS)
    {
      account (self, size, FALSE);
      return memres_pool_set_alloc_error (error, r, "cuMemAlloc", size);
    }
  *address = ptr;
  return TRUE;
}

/* As memres_pool_free(): waits for @stream (cuStreamSynchronize), then frees (cuMemFree in the
 * primary context). When either fails nothing is freed (the core keeps the buffer open). */
gboolean
dmr_sync_free (DmrSync *self, guint64 address, gsize size, MemresStream stream, GError **error)
{
  const MemresCudaDriver *drv = self->drv;
  CUcontext popped;
  CUresult r;

  if (!memres_cuda_ensure_context (self->device, error))
    return FALSE;
  r = drv->cuStreamSynchronize (stream);
  if (r == CUDA_ERROR_DEINITIALIZED)
    return TRUE; /* process exit: the memory is gone with the driver */
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamSynchronize");

  r = drv->cuCtxPushCurrent (self->context);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuCtxPushCurrent");
  r = drv->cuMemFree ((CUdeviceptr) address);
  (void) drv->cuCtxPopCurrent (&popped);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
    return memres_cuda_set_error (error, r, "cuMemFree");
  account (self, size, FALSE);
  return TRUE;
}

void
dmr_sync_get_stats (DmrSync *self, MemresStats *stats)
{
  g_mutex_lock (&self->lock);
  stats->reserved_current = stats->used_current = self->used_current;
  stats->reserved_high = stats->used_high = self->used_high;
  g_mutex_unlock (&self->lock);
}

void
dmr_sync_reset_stats (DmrSync *self)
{
  g_mutex_lock (&self->lock);
  self->used_high = self->used_current;
  g_mutex_unlock (&self->lock);
}

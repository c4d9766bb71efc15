/* memres - CUDA memory resources
 * managed-none.c: pool=none of the managed kind, the driver calls (#PoolOther) such an instance
 * gets at init.
 * Every buffer is one cuMemAllocManaged, advised to the preferred location (cuMemAdvise) when
 * one is given; closing is cuMemFree, after the core waited for the deallocation stream (the
 * memory is not stream-ordered). The shared pool code counts the live bytes (reserved = used). */
#include "managed-private.h"

/* cuMemAllocManaged, in the device's primary context (POOL_CONTEXT_PRIMARY: it acts on the
 * current context), then cuMemAdvise to the preferred location when one is given. */
static CUresult
none_allocate (MemresResource *mr, gsize size, guint64 *address, const char **call)
{
  Managed *self = memres_resource_get_private (mr);
  CUdeviceptr ptr = 0;
  CUresult r = self->drv->cuMemAllocManaged (&ptr, size, self->attach);

  if (r != CUDA_SUCCESS || self->preferred.type == CU_MEM_LOCATION_TYPE_NONE)
    {
      *address = ptr;
      return r;
    }
  r = self->drv->cuMemAdvise (ptr, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, self->preferred);
  if (r != CUDA_SUCCESS)
    {
      (void) self->drv->cuMemFree (ptr);
      *call = "cuMemAdvise";
      return r;
    }
  *address = ptr;
  return CUDA_SUCCESS;
}

/* cuMemFree, in the primary context the memory was allocated in, after the core synchronized
 * the deallocation stream. */
static CUresult
none_free (MemresResource *mr, guint64 address)
{
  Managed *self = memres_resource_get_private (mr);

  return self->drv->cuMemFree ((CUdeviceptr) address);
}

static const PoolOther managed_none = {
  .context = POOL_CONTEXT_PRIMARY,
  .allocate = none_allocate,
  .allocate_call = "cuMemAllocManaged",
  .free = none_free,
  .free_call = "cuMemFree",
};

gboolean
managed_none_init (Managed *self, const MemresOptions *options, const CUmemLocation *location,
                   const ManagedDevice *info, GError **error)
{
  if (self->drv->cuMemAllocManaged == NULL || self->drv->cuCtxPushCurrent == NULL
      || self->drv->cuCtxPopCurrent == NULL
      || (location->type != CU_MEM_LOCATION_TYPE_NONE && self->drv->cuMemAdvise == NULL))
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "managed: the CUDA driver lacks cuMemAllocManaged or the "
                           "CUmemLocation form of cuMemAdvise (CUDA 12.2)");
      return FALSE;
    }
  self->attach
      = memres_options_get_int (options, "attach") == 1 ? CU_MEM_ATTACH_HOST : CU_MEM_ATTACH_GLOBAL;
  self->preferred = *location;
  if (!info->concurrent)
    managed_warn_not_concurrent (self->device, info);
  pool_use_other (&self->pool, &managed_none, self->device, 0,
                  "managed: pool=none has no memory pool");
  return TRUE;
}

/* memres - CUDA memory resources
 * managed-none.c: pool=none of the managed kind, the ops table such an instance gets at init.
 * Every buffer is one cuMemAllocManaged, advised to the preferred location (cuMemAdvise) when
 * one is given; closing is cuMemFree, after the core waited for the deallocation stream (the
 * memory is not stream-ordered). The shared pool code counts the live bytes (reserved = used). */
#include "managed-private.h"

static gboolean
none_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  Managed *self = memres_resource_get_private (mr);
  CUdeviceptr ptr = 0;
  gboolean pushed;
  CUresult r;

  /* cuMemAllocManaged acts on the current context: the device's primary one, for the call */
  if (!memres_cuda_push_context (self->device, &pushed, error))
    return FALSE;
  r = self->drv->cuMemAllocManaged (&ptr, size, self->attach);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    return pool_set_alloc_error (error, r, "cuMemAllocManaged", size);
  if (self->preferred.type != CU_MEM_LOCATION_TYPE_NONE)
    {
      r = self->drv->cuMemAdvise (ptr, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, self->preferred);
      if (r != CUDA_SUCCESS)
        {
          (void) self->drv->cuMemFree (ptr);
          return memres_cuda_set_error (error, r, "cuMemAdvise");
        }
    }
  alloc->address = ptr;
  alloc->size = size;
  return TRUE;
}

/* cuMemFree; the core synchronized the deallocation stream first. When the free fails nothing is
 * freed (the deallocate contract: the core keeps the buffer open). `CUDA_ERROR_DEINITIALIZED` is
 * success, as for the other kinds: at process exit the memory is gone with the driver. */
static gboolean
none_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Managed *self = memres_resource_get_private (mr);
  CUresult r;

  if (!memres_cuda_ensure_context (self->device, error))
    return FALSE;
  r = self->drv->cuMemFree ((CUdeviceptr) alloc->address);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
    return memres_cuda_set_error (error, r, "cuMemFree");
  return TRUE;
}

static const MemresResourceOps none_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .allocate = none_allocate,
  .deallocate = none_deallocate,
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
  pool_use_other (&self->pool, &none_ops, 0, "managed: pool=none has no memory pool");
  return TRUE;
}

/* memres - CUDA memory resources
 * managed-none.c: pool=none of the managed kind, the driver calls (#PoolOther) such an instance
 * gets at init.
 * Every buffer is one cuMemAllocManaged, advised to the preferred location (cuMemAdvise) when
 * one is given; closing is cuMemFree, after the core waited for the deallocation stream (the
 * memory is not stream-ordered). The shared pool code counts the live bytes (reserved = used).
 * At init, a preferred location is checked on one page: a driver that accepts the advice but
 * does not keep it makes creation fail (MEMRES_ERROR_NOT_SUPPORTED) rather than every buffer
 * silently prefer nothing. */
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

static const char *
location_type_name (int type)
{
  switch (type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return "a device";
    case CU_MEM_LOCATION_TYPE_HOST:
      return "the host";
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      return "a host NUMA node";
    default:
      return "none";
    }
}

/* Whether the driver keeps @location as a preferred location: one page of managed memory
 * (cuMemAllocManaged in @device's primary context), advised (cuMemAdvise), read back
 * (cuMemRangeGetAttribute of the TYPE and ID) and freed. A driver that accepts the advice but
 * keeps nothing (the 580 driver with a host NUMA node, on one-node hosts: the range reads back
 * as none) would leave every buffer without the location the spec asked for: NOT_SUPPORTED. */
static gboolean
check_location_kept (const MemresCudaDriver *drv, gint device, const CUmemLocation *location,
                     GError **error)
{
  const gsize page = 4096;
  CUdeviceptr ptr = 0;
  int type = CU_MEM_LOCATION_TYPE_NONE, id = -1;
  const char *call = "cuMemAllocManaged";
  gboolean pushed;
  CUresult r, freed;

  if (drv->cuMemRangeGetAttribute == NULL)
    return TRUE; /* nothing can read it back: nothing to check */
  if (!memres_cuda_push_context (device, &pushed, error))
    return FALSE;
  r = drv->cuMemAllocManaged (&ptr, page, CU_MEM_ATTACH_GLOBAL);
  if (r == CUDA_SUCCESS)
    {
      call = "cuMemAdvise";
      r = drv->cuMemAdvise (ptr, page, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, *location);
      if (r == CUDA_SUCCESS)
        {
          call = "cuMemRangeGetAttribute";
          r = drv->cuMemRangeGetAttribute (
              &type, sizeof type, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, ptr, page);
        }
      if (r == CUDA_SUCCESS
          && (type == CU_MEM_LOCATION_TYPE_DEVICE || type == CU_MEM_LOCATION_TYPE_HOST_NUMA))
        r = drv->cuMemRangeGetAttribute (&id, sizeof id,
                                         CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, ptr, page);
      freed = drv->cuMemFree (ptr);
      if (r == CUDA_SUCCESS && freed != CUDA_SUCCESS)
        {
          r = freed;
          call = "cuMemFree";
        }
    }
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    {
      memres_cuda_set_error (error, r, call);
      g_prefix_error (error, "managed: checking the preferred location: ");
      return FALSE;
    }
  if (type != (int) location->type
      || ((type == CU_MEM_LOCATION_TYPE_DEVICE || type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
          && id != location->id))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "managed: pool=none: the CUDA driver accepts %s (id %d) as the preferred "
                   "location (cuMemAdvise) but does not keep it: the memory reads back as "
                   "preferring %s (cuMemRangeGetAttribute); choose another preferred_location",
                   location_type_name (location->type), location->id, location_type_name (type));
      return FALSE;
    }
  return TRUE;
}

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
  if (location->type != CU_MEM_LOCATION_TYPE_NONE
      && !check_location_kept (self->drv, self->device, location, error))
    return FALSE;
  self->attach
      = memres_options_get_int (options, "attach") == 1 ? CU_MEM_ATTACH_HOST : CU_MEM_ATTACH_GLOBAL;
  self->preferred = *location;
  if (!info->concurrent)
    managed_warn_not_concurrent (self->device, info);
  pool_use_other (&self->pool, &managed_none, self->device, 0,
                  "managed: pool=none has no memory pool");
  return TRUE;
}

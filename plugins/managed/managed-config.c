/* memres - CUDA memory resources
 * managed-config.c: what creating a managed resource checks: the options that apply to the mode
 * asked for, the device's managed-memory attributes, and the preferred location. */
#include "managed-private.h"

const char *const managed_pool_choices[] = { "current", "new", "none", NULL };

typedef enum
{
  MANAGED_PREFER_NONE,
  MANAGED_PREFER_DEVICE,
  MANAGED_PREFER_HOST,
  MANAGED_PREFER_HOST_NUMA,
} ManagedPreference;

gboolean
managed_get_device (const MemresCudaDriver *drv, gint device, ManagedDevice *info, GError **error)
{
  CUdevice dev;
  CUresult r;

  r = drv->cuDeviceGet (&dev, device);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  if (drv->cuDeviceGetName == NULL
      || drv->cuDeviceGetName (info->name, sizeof info->name, dev) != CUDA_SUCCESS)
    g_strlcpy (info->name, "unknown", sizeof info->name);
  return memres_cuda_get_device_attribute (device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
                                           &info->managed_memory, error)
         && memres_cuda_get_device_attribute (device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                                              &info->concurrent, error)
         && memres_cuda_get_device_attribute (device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                              &info->pools, error);
}

gboolean
managed_not_supported (GError **error, gint device, const ManagedDevice *info, const char *what,
                       const char *attribute, const char *hint)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "managed: device %d (%s) %s (%s is 0)%s", device, info->name, what, attribute, hint);
  return FALSE;
}

/* Why @device cannot have a managed pool, as an error; TRUE when it can. */
gboolean
managed_check_pools (const MemresCudaDriver *drv, gint device, const ManagedDevice *info,
                     GError **error)
{
  static const char hint[] = "; pool=none uses cuMemAllocManaged, fallback=true does that "
                             "where managed pools are missing";

  if (drv->cuMemGetMemPool == NULL || drv->driver_version < 13000)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "managed: managed memory pools need a CUDA 13 driver (this one is %d.%d)%s",
                   drv->driver_version / 1000, drv->driver_version % 1000 / 10, hint);
      return FALSE;
    }
  if (!info->pools)
    return managed_not_supported (error, device, info, "has no memory pools",
                                  "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED", hint);
  if (!info->concurrent)
    return managed_not_supported (error, device, info,
                                  "has no concurrent managed access, which managed pools need",
                                  "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS", hint);
  return TRUE;
}

/* Once per process: the host must keep off managed memory while kernels run. */
void
managed_warn_not_concurrent (gint device, const ManagedDevice *info)
{
  static gint warned = 0;

  if (g_atomic_int_compare_and_exchange (&warned, 0, 1))
    g_warning ("managed: device %d (%s) has no concurrent managed access "
               "(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0): host access to managed "
               "memory while any kernel runs is unsafe (it may crash); synchronize first",
               device, info->name);
}

/* The preferred location the options name. */
gboolean
managed_resolve_location (const MemresOptions *options, gint device, CUmemLocation *location,
                          GError **error)
{
  ManagedPreference pref
      = (ManagedPreference) memres_options_get_int (options, "preferred_location");

  location->id = 0;
  if (memres_options_is_set (options, "numa_id") && pref != MANAGED_PREFER_HOST_NUMA)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                           "managed: numa_id applies to preferred_location=host_numa only");
      return FALSE;
    }
  switch (pref)
    {
    case MANAGED_PREFER_DEVICE:
      location->type = CU_MEM_LOCATION_TYPE_DEVICE;
      location->id = device;
      return TRUE;
    case MANAGED_PREFER_HOST:
      location->type = CU_MEM_LOCATION_TYPE_HOST;
      return TRUE;
    case MANAGED_PREFER_HOST_NUMA:
      location->type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      if (memres_options_is_set (options, "numa_id"))
        location->id = (gint) memres_options_get_int (options, "numa_id");
      else
        {
          int numa = -1;

          if (!memres_cuda_get_device_attribute (device, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, &numa,
                                                 error))
            return FALSE;
          if (numa < 0)
            {
              g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "managed: preferred_location=host_numa: device %d has no closest "
                           "host NUMA node (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID is %d); give "
                           "numa_id",
                           device, numa);
              return FALSE;
            }
          location->id = numa;
        }
      return TRUE;
    default:
      location->type = CU_MEM_LOCATION_TYPE_NONE;
      return TRUE;
    }
}

gboolean
managed_check_mode_options (const MemresOptions *options, ManagedPoolMode mode, GError **error)
{
  const char *wrong = NULL;

  if (mode == MANAGED_POOL_NONE)
    {
      wrong = pool_options_first_set (options, MANAGED_POOL_OPTIONS);
      if (wrong == NULL && memres_options_is_set (options, "fallback"))
        wrong = "fallback";
    }
  else if (memres_options_is_set (options, "attach"))
    wrong = "attach";
  if (wrong == NULL)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "managed: %s does not apply to pool=%s", wrong, managed_pool_choices[mode]);
  return FALSE;
}

/* memres - CUDA memory resources
 * default-spec.c: which resource memres_resource_get_default() makes, and why: the spec and,
 * for host memory, the reason (memres_resource_get_default_spec(), which `memres alloc
 * default` prints). */
#include "memres-private.h"

/**
 * memres_resource_get_default_spec:
 * @device: a CUDA device ordinal, or -1 for host memory
 * @host_reason: (out) (optional) (nullable) (transfer full): return location for why the
 *   default is host memory, one line of text, or %NULL
 * @error: return location for a #GError, or %NULL
 *
 * The spec memres_resource_get_default() creates for @device, without creating anything:
 * `dmr:device=N` when a CUDA driver loads (memres_cuda_get_driver()), reports at least one
 * device (memres_cuda_get_device_count()) and @device is one of them
 * (memres_cuda_check_device()); else `host`. With `host`, *@host_reason is set to why: "asked
 * for device -1" when @device is -1, the driver's %MEMRES_ERROR_NO_DRIVER message when no
 * driver loads, "the CUDA driver reports no device" when it has none; with `dmr`, or on error,
 * *@host_reason is set to %NULL. Driver calls: the driver's load on first use (cuInit) and
 * cuDeviceGetCount(). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @device is below -1; %MEMRES_ERROR_NO_DEVICE
 * when a driver with devices loads but @device is not one of them.
 *
 * Returns: (transfer full) (nullable): "dmr:device=N" or "host" (free with `g_free`), or
 *   %NULL with @error set
 *
 * Since: 1.2
 */
char *
memres_resource_get_default_spec (gint device, char **host_reason, GError **error)
{
  g_autoptr (GError) local = NULL;
  g_autofree char *reason = NULL;
  gint n_devices = 0;

  if (host_reason != NULL)
    *host_reason = NULL;
  if (device < -1)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "device %d: a device ordinal is 0 or more, or -1 for host memory", device);
      return NULL;
    }
  if (device < 0)
    reason = g_strdup_printf ("asked for device %d", device);
  else if (memres_cuda_get_driver (&local) == NULL
           || !memres_cuda_get_device_count (&n_devices, &local))
    reason = g_strdup (local->message);
  else if (n_devices == 0)
    reason = g_strdup ("the CUDA driver reports no device");
  else if (!memres_cuda_check_device (device, error))
    return NULL;
  else
    return g_strdup_printf ("dmr:device=%d", device);

  if (host_reason != NULL)
    *host_reason = g_steal_pointer (&reason);
  return g_strdup ("host");
}

/**
 * memres_resource_get_default:
 * @device: a CUDA device ordinal, or -1 for host memory
 * @error: return location for a #GError, or %NULL
 *
 * The resource an application gets when it names none: `dmr:device=N` (the device's memory
 * pool, stream-ordered) when a CUDA driver loads (memres_cuda_get_driver()) and @device exists;
 * `host` (pageable host memory) when @device is -1, when no driver loads or when the driver
 * reports no device (memres_resource_get_default_spec() tells which, and why). A new resource on
 * each call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @device is below -1;
 * %MEMRES_ERROR_NO_DEVICE when a driver with devices loads but @device is not one of
 * them (asking for device 5 on a one-GPU machine is a mistake, not a request for host memory);
 * those of memres_resource_new() for the chosen spec.
 *
 * Returns: (transfer full) (nullable): a new resource, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresResource *
memres_resource_get_default (gint device, GError **error)
{
  g_autofree char *spec = memres_resource_get_default_spec (device, NULL, error);

  if (spec == NULL)
    return NULL;
  return memres_resource_new (spec, error);
}

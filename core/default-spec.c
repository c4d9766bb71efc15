/* memres - CUDA memory resources
 * default-spec.c: which resource memres_resource_get_default() makes, and why. Uses only the
 * public driver functions: the memres command compiles this file too, to say why `default`
 * is host memory. */
#include "memres-private.h"

char *
_memres_default_spec (gint device, char **host_reason, GError **error)
{
  g_autoptr (GError) local = NULL;
  gint n_devices = 0;
  char *reason;

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
    *host_reason = reason;
  else
    g_free (reason);
  return g_strdup ("host");
}

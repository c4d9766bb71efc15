/* memres - CUDA memory resources
 * pinned-pool.c: creates the host-located pool of the pinned kind and grants the devices
 * access to it. Everything else of pool mode is the shared pool code. */
#include "pinned-pool.h"

/**
 * pinned_pool_init:
 * @pool: zero-filled pool to set up
 * @config: a configuration resolved to pool mode by pinned_config_resolve()
 * @error: return location for a #GError
 *
 * Creates the pool @config describes (memres_pool_init(): cuMemPoolCreate with a
 * `CU_MEM_LOCATION_TYPE_HOST` or `CU_MEM_LOCATION_TYPE_HOST_NUMA` location, shareable through
 * POSIX file descriptors when @config asks for IPC, then its attributes with
 * cuMemPoolSetAttribute), then grants read-write access to every device of @config in one
 * cuMemPoolSetAccess() call. On failure nothing is left (the pool is destroyed).
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when the driver refuses the NUMA node @config names
 * (cuMemPoolCreate fails with `CUDA_ERROR_INVALID_VALUE`); those of memres_pool_init() and
 * memres_pool_set_access(): %MEMRES_ERROR_OUT_OF_MEMORY,
 * %MEMRES_ERROR_NO_DEVICE, %MEMRES_CUDA_ERROR of cuMemPoolCreate, cuMemPoolSetAttribute,
 * cuDeviceGetUuid, cuMemPoolSetAccess.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_pool_init (MemresPool *pool, const PinnedConfig *config, GError **error)
{
  g_autofree MemresAccessDesc *descs = g_new (MemresAccessDesc, MAX (config->n_devices, 1));
  GError *local = NULL;

  if (!memres_pool_init (pool, &config->pool, &local))
    {
      /* The driver refuses a node it cannot place a pool on with CUDA_ERROR_INVALID_VALUE. */
      if (config->numa_id_given
          && g_error_matches (local, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE))
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "pinned: numa_id=%d: the driver refuses host NUMA node %d: %s",
                       config->numa_id, config->numa_id, local->message);
          g_error_free (local);
          return FALSE;
        }
      g_propagate_error (error, local);
      return FALSE;
    }

  for (gsize i = 0; i < config->n_devices; i++)
    {
      descs[i].device = config->devices[i];
      descs[i].access = MEMRES_ACCESS_READWRITE;
    }
  if (!memres_pool_set_access (pool, descs, config->n_devices, error))
    {
      memres_pool_destroy (pool);
      return FALSE;
    }
  return TRUE;
}

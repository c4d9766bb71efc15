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
 * Creates a new pool of page-locked host memory (cuMemPoolCreate with a `CU_MEM_LOCATION_TYPE_HOST`
 * or `CU_MEM_LOCATION_TYPE_HOST_NUMA` location, shareable through POSIX file descriptors when
 * @config asks for IPC), sets its release threshold (the given one, or the most bytes
 * possible: page-locking memory is slow, so by default the pool keeps what it got until it is
 * trimmed), then grants read-write access to every device of @config in one
 * cuMemPoolSetAccess() call. On failure nothing is left (the pool is destroyed).
 *
 * Errors: those of memres_pool_init() and memres_pool_set_access(): %MEMRES_ERROR_OUT_OF_MEMORY,
 * %MEMRES_ERROR_NOT_SUPPORTED, %MEMRES_CUDA_ERROR of cuMemPoolCreate, cuMemPoolSetAttribute,
 * cuMemPoolSetAccess.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_pool_init(MemresPool *pool, const PinnedConfig *config, GError **error)
{
  g_autofree MemresAccessDesc *descs = g_new(MemresAccessDesc, config->n_devices);
  MemresPoolConfig cfg;

  memres_pool_config_init_host(&cfg, config->location, config->numa_id, config->device);
  cfg.create = TRUE;
  cfg.handle_type
      = config->ipc ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  cfg.max_size = config->has_max_size ? config->max_size : 0;
  cfg.release_threshold_set = TRUE;
  cfg.release_threshold = config->has_release_threshold ? config->release_threshold : G_MAXUINT64;

  if (!memres_pool_init(pool, &cfg, error))
    return FALSE;

  for (gsize i = 0; i < config->n_devices; i++)
    {
      descs[i].device = config->devices[i];
      descs[i].access = MEMRES_ACCESS_READWRITE;
    }
  if (!memres_pool_set_access(pool, descs, config->n_devices, error))
    {
      memres_pool_destroy(pool);
      return FALSE;
    }
  return TRUE;
}

/* memres - CUDA memory resources
 * pinned-pool.c: mode=pool of the pinned kind: creates the host-located pool and grants the
 * devices access to it, or imports one shared by another process (ipc=true). Everything else of
 * pool mode is the shared pool code (plugins/common/pool).
 *
 * Sharing: the exporter creates its host pool on a host NUMA node with POSIX file descriptor
 * handles (the driver refuses shareable pools at the plain HOST location). An importer
 * (memres_resource_import_handle) maps that pool, grants its device access to it, cannot
 * allocate, and maps buffers (cuMemPoolImportPointer) that it unmaps with cuMemFreeAsync. The
 * lifetime rules are those of the ipc kind: an importer closes an imported buffer before the
 * exporter frees it. */
#include "pinned-private.h"

/* Read-write access for @devices to the pool in one cuMemPoolSetAccess(); on failure the pool
 * is destroyed. */
static gboolean
grant_devices (PoolRecord *pool, const gint *devices, gsize n_devices, GError **error)
{
  g_autofree MemresAccessDesc *descs = g_new (MemresAccessDesc, MAX (n_devices, 1));

  for (gsize i = 0; i < n_devices; i++)
    {
      descs[i].device = devices[i];
      descs[i].access = MEMRES_ACCESS_READWRITE;
    }
  if (pool_grant_access (pool, descs, n_devices, error))
    return TRUE;
  pool_destroy (pool);
  return FALSE;
}

/**
 * pinned_pool_init:
 * @self: the zero-filled instance data
 * @config: a configuration resolved to pool mode by pinned_config_resolve()
 * @error: return location for a #GError
 *
 * Creates the pool @config describes (pool_init(): cuMemPoolCreate with a
 * `CU_MEM_LOCATION_TYPE_HOST` or `CU_MEM_LOCATION_TYPE_HOST_NUMA` location, shareable through
 * POSIX file descriptors when @config asks for IPC, then its attributes with
 * cuMemPoolSetAttribute), then grants read-write access to every device of @config in one
 * cuMemPoolSetAccess() call. On failure nothing is left (the pool is destroyed).
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when the driver refuses the NUMA node @config names
 * (cuMemPoolCreate fails with `CUDA_ERROR_INVALID_VALUE`); those of pool_init() and
 * pool_grant_access(): %MEMRES_ERROR_OUT_OF_MEMORY, %MEMRES_ERROR_NO_DEVICE, %MEMRES_CUDA_ERROR
 * of cuMemPoolCreate, cuMemPoolSetAttribute, cuDeviceGetUuid, cuMemPoolSetAccess.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_pool_init (Pinned *self, const PinnedConfig *config, GError **error)
{
  GError *local = NULL;

  if (!pool_init (&self->pool, &config->pool, &local))
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
  if (!config->ipc)
    self->pool.unshareable = "pinned: the pool is not shareable: create it with ipc=true";
  return grant_devices (&self->pool, config->devices, config->n_devices, error);
}

/**
 * pinned_import_handle:
 * @mr: a new pinned resource (not set up by init)
 * @handle: a handle of kind "pinned" from another process (transfer none)
 * @error: return location for a #GError
 *
 * The import_handle slot: imports the pool (pool_init_import(): the device with the handle's
 * device UUID, cuMemPoolImportFromShareableHandle on a duplicate of the fd), then grants that
 * device read-write access to it (cuMemPoolSetAccess: access is not carried over from the
 * exporter). The resource is a pool-mode importer: it maps buffers but cannot allocate. On
 * failure nothing is left.
 *
 * Errors: those of pool_init_import() (%MEMRES_ERROR_WRONG_DEVICE, %MEMRES_ERROR_NOT_SUPPORTED,
 * %MEMRES_ERROR_FAILED, %MEMRES_CUDA_ERROR) and of pool_grant_access().
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);
  /* The handle does not say which node the exporter's pool is on; nothing here needs it. */
  const CUmemLocation location = { .type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = -1 };

  if (!pool_init_import (&self->pool, handle, &location, error))
    return FALSE;
  self->device = self->pool.device;
  return grant_devices (&self->pool, &self->device, 1, error);
}

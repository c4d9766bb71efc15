/* memres - CUDA memory resources
 * pinned-ipc.c: sharing a pinned pool (ipc=true) with other processes, through the shared pool
 * code's export and import functions and the core's handles, descriptors and transport.
 *
 * The exporter creates its host pool on a host NUMA node with POSIX file descriptor handles
 * (the driver refuses shareable pools at the plain HOST location). An importer
 * (memres_resource_import_handle) maps that pool, grants its device access to it, cannot
 * allocate, and maps buffers (cuMemPoolImportPointer) that it unmaps with cuMemFreeAsync. The
 * lifetime rules are those of the ipc kind: an importer closes an imported buffer before the
 * exporter frees it. */
#include "pinned-private.h"

static gboolean
check_shareable (Pinned *self, GError **error)
{
  if (self->ipc)
    return TRUE;
  g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                       self->mode == PINNED_MODE_LEGACY
                           ? "pinned: mode=legacy memory cannot be shared with other processes: "
                             "use mode=pool,ipc=true"
                           : "pinned: the pool is not shareable: create it with ipc=true");
  return FALSE;
}

/**
 * pinned_export_handle:
 * @mr: a pinned resource
 * @handle: (out) (transfer full): the new handle, owning a new file descriptor
 * @error: return location for a #GError
 *
 * The export_handle slot: a handle of kind "pinned" for the resource's pool
 * (memres_pool_export_handle(): cuMemPoolExportToShareableHandle, or a duplicate of the fd an
 * imported pool came from). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED (legacy mode, or a pool made without ipc=true),
 * %MEMRES_ERROR_FAILED (dup() failed), %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_export_handle (MemresResource *mr, MemresIpcHandle **handle, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (!check_shareable (self, error))
    return FALSE;
  return memres_pool_export_handle (&self->pool, "pinned", handle, error);
}

/**
 * pinned_import_handle:
 * @mr: a new pinned resource (not set up by init)
 * @handle: a handle of kind "pinned" from another process (transfer none)
 * @error: return location for a #GError
 *
 * The import_handle slot: imports the pool (memres_pool_init_import(): the device with the
 * handle's device UUID, cuMemPoolImportFromShareableHandle on a duplicate of the fd), then
 * grants that device read-write access to it (cuMemPoolSetAccess: access is not carried over
 * from the exporter). The resource is a pool-mode importer: it maps buffers but cannot
 * allocate. On failure nothing is left.
 *
 * Errors: those of memres_pool_init_import() (%MEMRES_ERROR_WRONG_DEVICE,
 * %MEMRES_ERROR_NOT_SUPPORTED, %MEMRES_ERROR_FAILED, %MEMRES_CUDA_ERROR) and of
 * memres_pool_set_access().
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);
  /* The handle does not say which node the exporter's pool is on; nothing here needs it. */
  const CUmemLocation location = { .type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = -1 };
  MemresAccessDesc access;

  if (!memres_pool_init_import (&self->pool, handle, &location, error))
    return FALSE;
  access.device = self->pool.device;
  access.access = MEMRES_ACCESS_READWRITE;
  if (!memres_pool_set_access (&self->pool, &access, 1, error))
    {
      memres_pool_destroy (&self->pool);
      return FALSE;
    }
  self->mode = PINNED_MODE_POOL;
  self->device = self->pool.device;
  self->ipc = TRUE;
  self->imported = TRUE;
  return TRUE;
}

/**
 * pinned_export_buffer:
 * @mr: a pinned resource made with ipc=true
 * @alloc: an allocation of @mr made in this process
 * @out: (out caller-allocates): the export record
 * @error: return location for a #GError
 *
 * The export_buffer slot (memres_pool_export_pointer(): cuMemPoolExportPointer). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED (not shareable, or an imported buffer),
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_export_buffer (MemresResource *mr, const MemresAllocation *alloc, MemresBufferExport *out,
                      GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (!check_shareable (self, error))
    return FALSE;
  return memres_pool_export_pointer (&self->pool, alloc, out, error);
}

/**
 * pinned_import_buffer:
 * @mr: an importer (from pinned_import_handle())
 * @in: the decoded, validated descriptor
 * @stream: unused: the mapping is not stream-ordered
 * @alloc: (out caller-allocates): the whole mapped allocation
 * @error: return location for a #GError
 *
 * The import_buffer slot (memres_pool_import_pointer(): cuMemPoolImportPointer). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED (@mr is not an importer), %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise.
 */
gboolean
pinned_import_buffer (MemresResource *mr, const MemresBufferExport *in, MemresStream stream,
                      MemresAllocation *alloc, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (!self->imported)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "pinned: only a pool imported with memres_resource_import_handle() "
                           "imports buffers; the exporter uses its buffers directly");
      return FALSE;
    }
  return memres_pool_import_pointer (&self->pool, in, stream, alloc, error);
}

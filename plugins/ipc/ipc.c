/* memres - CUDA memory resources
 * ipc.c: the `ipc` kind, a device memory pool shared between processes.
 *
 * Spec: ipc[:device=N,max_size=SIZE,release_threshold=SIZE|max,
 *            reuse_follow_event_dependencies=BOOL,reuse_allow_opportunistic=BOOL,
 *            reuse_allow_internal_dependencies=BOOL]
 *
 * Two roles. The exporter (memres_resource_new) owns a new pool created with POSIX file
 * descriptor handles (cuMemPoolCreate), allocates from it stream-ordered like dmr, exports the
 * pool (cuMemPoolExportToShareableHandle: a new fd per handle) and its buffers
 * (cuMemPoolExportPointer). The importer (memres_resource_import_handle) maps that pool on the
 * device with the exporter's device UUID (cuMemPoolImportFromShareableHandle), cannot allocate,
 * and maps buffers (cuMemPoolImportPointer; the core deduplicates the mappings and checks the
 * descriptor's size against the mapped range) which it unmaps with cuMemFreeAsync.
 *
 * Lifetime across processes (the driver's rule, cuMemPoolImportPointer): importers must unmap
 * (close) an imported buffer before the exporter frees it, and must not touch it before the
 * exporter's allocation completed on its stream. memres cannot enforce this across processes:
 * the application orders it (tests/test-ipc-procs.c and examples/ipc-producer-consumer.c wait
 * for the consumer's "done" before closing). An exporter that exits (or crashes) ends its
 * use of the pool, but each importer's pool and mappings keep the physical memory alive until
 * the importer releases them: data stays readable there (tests/test-ipc-procs.c checks it).
 */
#include "pool.h"

typedef struct
{
  gboolean imported;
  MemresPool pool;
} Ipc;

static const MemresOptionSpec ipc_options[] = {
  { "device", MEMRES_OPTION_INT, "0", "CUDA device ordinal of the exporter's pool", NULL, 0,
    G_MAXINT },
  MEMRES_POOL_OPTION_SPECS_ATTRIBUTES,
};

static gboolean
ipc_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);
  gint device = (gint) memres_options_get_int (options, "device");
  MemresPoolConfig config;
  gboolean supported = FALSE;

  memres_pool_config_init_device (&config, device);
  config.create = TRUE;
  config.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (!memres_pool_config_set_options (&config, options, MEMRES_POOL_OPTIONS_ATTRIBUTES, error))
    return FALSE;
  if (!memres_cuda_check_device (device, error))
    return FALSE;
  if (!memres_pool_check_supported (&config, &supported, error))
    return FALSE;
  if (!supported)
    return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                        "device %d cannot share memory pools between processes: it lacks memory "
                        "pools or POSIX file descriptor pool handles "
                        "(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)",
                        device),
           FALSE;
  return memres_pool_init (&self->pool, &config, error);
}

static gboolean
ipc_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  if (!memres_pool_init_import (&self->pool, handle, NULL, error))
    return FALSE;
  self->imported = TRUE;
  return TRUE;
}

static void
ipc_finalize (MemresResource *mr)
{
  Ipc *self = memres_resource_get_private (mr);

  memres_pool_destroy (&self->pool);
}

static gboolean
ipc_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
              GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  if (G_UNLIKELY (self->imported))
    return g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                                "a pool imported from another process cannot allocate: allocate "
                                "in the exporting process and import the buffer"),
           FALSE;
  if (!memres_pool_allocate (&self->pool, size, stream, &alloc->address, error))
    return FALSE;
  alloc->size = size;
  return TRUE;
}

/* Frees an allocation (exporter) or unmaps an imported one (importer): cuMemFreeAsync both. */
static gboolean
ipc_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_free (&self->pool, alloc->address, alloc->size, stream, error);
}

static void
ipc_query (MemresResource *mr, MemresResourceInfo *info)
{
  Ipc *self = memres_resource_get_private (mr);

  info->device = self->pool.device;
  info->flags
      = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED | MEMRES_MEMORY_IPC_ENABLED;
  if (self->imported)
    info->flags |= MEMRES_MEMORY_IMPORTED;
}

static gboolean
ipc_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_get_stats (&self->pool, stats, error);
}

static gboolean
ipc_reset_stats (MemresResource *mr, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_reset_stats (&self->pool, error);
}

static gboolean
ipc_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_trim (&self->pool, bytes_to_keep, error);
}

static gboolean
ipc_set_access (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_set_access (&self->pool, descs, n_descs, error);
}

static gboolean
ipc_get_access (MemresResource *mr, gint device, MemresAccess *access, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_get_access (&self->pool, device, access, error);
}

static gboolean
ipc_export_handle (MemresResource *mr, MemresIpcHandle **handle, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_export_handle (&self->pool, "ipc", handle, error);
}

static gboolean
ipc_export_buffer (MemresResource *mr, const MemresAllocation *alloc, MemresBufferExport *out,
                   GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  return memres_pool_export_pointer (&self->pool, alloc, out, error);
}

static gboolean
ipc_import_buffer (MemresResource *mr, const MemresBufferExport *in, MemresStream stream,
                   MemresAllocation *alloc, GError **error)
{
  Ipc *self = memres_resource_get_private (mr);

  if (!self->imported)
    return g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                                "the exporting resource cannot import its own buffers: use the "
                                "buffer itself, or import the pool's handle first"),
           FALSE;
  return memres_pool_import_pointer (&self->pool, in, stream, alloc, error);
}

static const MemresResourceOps ipc_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = ipc_init,
  .finalize = ipc_finalize,
  .allocate = ipc_allocate,
  .deallocate = ipc_deallocate,
  .query = ipc_query,
  .get_stats = ipc_get_stats,
  .reset_stats = ipc_reset_stats,
  .trim = ipc_trim,
  .set_access = ipc_set_access,
  .get_access = ipc_get_access,
  .export_handle = ipc_export_handle,
  .import_handle = ipc_import_handle,
  .export_buffer = ipc_export_buffer,
  .import_buffer = ipc_import_buffer,
};

static const MemresKindInfo ipc_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "ipc",
  .description = "device memory from a stream-ordered pool shared between processes (POSIX "
                 "file descriptors); imported pools map buffers but cannot allocate",
  .options = ipc_options,
  .n_options = G_N_ELEMENTS (ipc_options),
  .ops = &ipc_ops,
  .instance_size = sizeof (Ipc),
  .flags = MEMRES_KIND_OWN_USAGE, /* get_stats reports the used bytes */
};

static gboolean
ipc_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &ipc_kind, error);
}

MEMRES_PLUGIN_DEFINE (ipc, "device memory pools shared between processes", ipc_plugin_init)

/* memres - CUDA memory resources
 * ipc.c: the `ipc` kind, a device memory pool shared between processes.
 *
 * Spec: ipc[:device=N,handle_type=posix_fd|fabric,fabric_fallback=fail|posix_fd,max_size=SIZE,
 *            release_threshold=SIZE|max,reuse_follow_event_dependencies=BOOL,
 *            reuse_allow_opportunistic=BOOL,reuse_allow_internal_dependencies=BOOL]
 *
 * Two roles. The exporter (memres_resource_new) owns a new pool created with POSIX file
 * descriptor handles (cuMemPoolCreate), allocates from it stream-ordered like dmr, exports the
 * pool (cuMemPoolExportToShareableHandle: a new fd per handle) and its buffers
 * (cuMemPoolExportPointer). The importer (memres_resource_import_handle) maps that pool on the
 * device with the exporter's device UUID (cuMemPoolImportFromShareableHandle), cannot allocate,
 * and maps buffers (cuMemPoolImportPointer; the core deduplicates the mappings and checks the
 * descriptor's size against the mapped range) which it unmaps with cuMemFreeAsync.
 *
 * handle_type=fabric: a granule of fabric memory is probed first (probe_fabric()), then the pool
 * is created with fabric handles and exported once at creation (cuMemPoolExportToShareableHandle
 * with CU_MEM_HANDLE_TYPE_FABRIC): where the driver refuses either with CUDA_ERROR_NOT_PERMITTED
 * (no IMEX channel), fabric_fallback decides
 * (plugins/common/fabric.h: fail naming the channel, or a pool of POSIX-fd handles). A fabric
 * pool's flags carry MEMRES_MEMORY_FABRIC_HANDLES; its buffers' messages
 * (memres_buffer_export_message()) carry the pool's fabric handle as bytes, with no fd, and the
 * importer maps the pool from them (the export_fabric_handle and import_fabric_handle slots).
 *
 * Lifetime across processes (the driver's rule, cuMemPoolImportPointer): importers must unmap
 * (close) an imported buffer before the exporter frees it, and must not touch it before the
 * exporter's allocation completed on its stream. memres cannot enforce this across processes:
 * the application orders it (tests/test-ipc-procs.c and examples/ipc-producer-consumer.c wait
 * for the consumer's "done" before closing). An exporter that exits (or crashes) ends its
 * use of the pool, but each importer's pool and mappings keep the physical memory alive until
 * the importer releases them: data stays readable there (tests/test-ipc-procs.c checks it).
 *
 * The slots but init and query are the shared pool code's (plugins/common/pool). Statistics are
 * the pool's (MEMRES_KIND_OWN_USAGE): only the exporter allocates from it (an imported pool
 * cannot), so the driver's used bytes are this resource's, counted at no cost on the
 * allocate/free path; an importer's statistics are the core's (it never asks the kind).
 */
#include "pool.h"

#include "../common/fabric.h"

static const MemresOptionSpec ipc_options[] = {
  { "device", MEMRES_OPTION_INT, "0", "CUDA device ordinal of the exporter's pool", NULL, 0,
    G_MAXINT },
  { "handle_type", MEMRES_OPTION_ENUM, "posix_fd",
    "shareable handle type of the pool: posix_fd (processes of one host, a file descriptor) or "
    "fabric (bytes alone, across the nodes of a multi-node NVLink domain, where the driver "
    "grants them: an IMEX channel)",
    (const char *const[]){ "posix_fd", "fabric", NULL }, 0, 0 },
  FABRIC_FALLBACK_OPTION,
  POOL_OPTIONS_HERE,
};

/* %MEMRES_ERROR_NOT_SUPPORTED unless the device has pools shareable with @config's handle
 * type. */
static gboolean
ipc_check_supported (const PoolConfig *config, GError **error)
{
  gboolean supported = FALSE;

  if (!pool_check_supported (config, &supported, error))
    return FALSE;
  if (supported)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "device %d cannot share memory pools between processes: it lacks memory "
               "pools or %s pool handles (CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)",
               config->device,
               config->handle_type == CU_MEM_HANDLE_TYPE_FABRIC ? "fabric"
                                                                : "POSIX file descriptor");
  return FALSE;
}

/* The probe of fabric handles on @device before a fabric pool exists (fabric_probe_memory(): one
 * granule created, exported, released). The pool's own export at creation would be the probe,
 * but the H200's driver (580.x), having refused that export with CUDA_ERROR_NOT_PERMITTED (no
 * IMEX channel), corrupts its heap when the pool is then destroyed (cuMemPoolDestroy crashed,
 * or free() aborted later): so where fabric memory is refused, no fabric pool is created. */
static gboolean
probe_fabric (gint device, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  CUmemAllocationProp prop;
  const char *call;
  size_t granularity = 0;
  CUresult r;

  if (drv == NULL)
    return FALSE;
  memset (&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  r = drv->cuMemGetAllocationGranularity (&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemGetAllocationGranularity");
  r = fabric_probe_memory (drv, &prop, granularity, &call);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, call);
  return TRUE;
}

static gboolean
ipc_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  PoolRecord *pool = memres_resource_get_private (mr);
  gint device = (gint) memres_options_get_int (options, "device");
  PoolConfig config;
  GError *probe = NULL;
  gboolean fabric;

  pool_config_init_device (&config, device);
  config.create = TRUE;
  config.handle_type = g_strcmp0 (memres_options_get_string (options, "handle_type"), "fabric") == 0
                           ? CU_MEM_HANDLE_TYPE_FABRIC
                           : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  if (!pool_config_set_options (&config, options, POOL_OPTIONS_ATTRIBUTES, error)
      || !memres_cuda_check_device (device, error) || !ipc_check_supported (&config, error))
    return FALSE;
  if (config.handle_type != CU_MEM_HANDLE_TYPE_FABRIC)
    return pool_init (pool, &config, error);

  /* a granule of fabric memory first: no fabric pool is created where the driver refuses */
  if (probe_fabric (device, &probe) && pool_init (pool, &config, &probe))
    return TRUE;
  if (!g_error_matches (probe, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED))
    {
      g_propagate_error (error, probe);
      return FALSE;
    }
  if (!fabric_settle ("ipc", device, options, probe, &fabric, error))
    return FALSE;
  config.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return ipc_check_supported (&config, error) && pool_init (pool, &config, error);
}

static void
ipc_query (MemresResource *mr, MemresResourceInfo *info)
{
  PoolRecord *pool = memres_resource_get_private (mr);

  info->device = pool->device;
  info->flags
      = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED | MEMRES_MEMORY_IPC_ENABLED;
  if (pool->handle_type == CU_MEM_HANDLE_TYPE_FABRIC)
    info->flags |= MEMRES_MEMORY_FABRIC_HANDLES;
  if (pool->imported)
    info->flags |= MEMRES_MEMORY_IMPORTED;
}

static const MemresResourceOps ipc_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = ipc_init,
  .query = ipc_query,
  POOL_SLOTS, /* deallocate frees (exporter) or unmaps (importer): cuMemFreeAsync both */
  POOL_ACCESS_SLOTS,
};

static const MemresIpcOps ipc_ipc_ops = {
  .version = MEMRES_IPC_OPS_VERSION,
  .import_handle = pool_import_handle,
  POOL_SHARING_SLOTS,
  POOL_FABRIC_SLOTS, /* handle_type=fabric: the pool's fabric handle in the message */
};

static gboolean
ipc_plugin_init (MemresPlugin *plugin, GError **error)
{
  static const MemresKindInfo info = {
    .struct_size = sizeof (MemresKindInfo),
    .name = "ipc",
    .description = "device memory from a stream-ordered pool shared between processes (POSIX "
                   "file descriptors, or fabric handles); imported pools map buffers but cannot "
                   "allocate",
    .options = ipc_options,
    .n_options = G_N_ELEMENTS (ipc_options),
    .ops = &ipc_ops,
    .ipc = &ipc_ipc_ops,
    .instance_size = sizeof (PoolRecord),
    .flags = MEMRES_KIND_OWN_USAGE, /* get_stats reports the used bytes */
  };

  return pool_register_kind (plugin, &info, POOL_OPTIONS_ATTRIBUTES, error);
}

MEMRES_PLUGIN_DEFINE (ipc, "device memory pools shared between processes", ipc_plugin_init)

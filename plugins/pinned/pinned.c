/* memres - CUDA memory resources
 * pinned.c: the `pinned` kind: page-locked host memory, accessible from the host (the buffer's
 * address is a host pointer) and from the devices.
 *
 * Spec: pinned[:device=N,mode=pool|legacy, POOL OPTIONS | LEGACY OPTIONS]
 *   pool options:   fallback, max_size, release_threshold, reuse_*, numa_id, devices, ipc
 *   legacy options: portable, devicemap, writecombined
 * Naming an option of the other mode is an error (MEMRES_ERROR_INVALID_ARGUMENT).
 *
 * mode=pool (default): a new driver memory pool located on the host (cuMemPoolCreate with a
 * CU_MEM_LOCATION_TYPE_HOST_NUMA location on `numa_id`, by default the node closest to
 * `device`, or CU_MEM_LOCATION_TYPE_HOST where there is none), read-write accessible from every
 * device of `devices` (cuMemPoolSetAccess). Allocation and free are stream-ordered
 * (cuMemAllocFromPoolAsync / cuMemFreeAsync); statistics, trim and access are the pool's. The
 * release threshold defaults to max, because page-locking memory is slow (about 1 ms per MiB
 * on an H200 host, against microseconds for a pool allocation that reuses memory): the pool
 * keeps what it got until trimmed. A device without host memory pools makes creation fail with
 * MEMRES_ERROR_NOT_SUPPORTED naming mode=legacy, unless fallback=true asks for legacy mode.
 * ipc=true makes the pool shareable with other processes (pinned-config.c).
 *
 * mode=legacy: every buffer is one cuMemHostAlloc (flags from the options); closing waits for
 * the buffer's deallocation stream (the core does, the memory being not stream-ordered) and
 * then calls cuMemFreeHost. Not stream-ordered; statistics count the live bytes (reserved
 * equals used), trim has nothing to do, and access cannot be read or changed.
 *
 * Statistics are the pool's (MEMRES_KIND_OWN_USAGE): the pool is the resource's own, so the
 * driver's used bytes are its buffers', counted at no cost on the allocate/free path; the
 * shared pool code counts mode=legacy's.
 *
 * Files: pinned-config.c (options, mode and location), pinned-pool.c (pool creation and
 * import), pinned-legacy.c (legacy mode's ops table); the slots but init and query are the
 * shared pool code's (plugins/common/pool). */
#include "pinned-private.h"

static const char *const mode_choices[] = { "pool", "legacy", NULL };

static const MemresOptionSpec pinned_options[] = {
  { "device", MEMRES_OPTION_INT, "0",
    "device of the buffers (their copies run there) whose primary context allocates", NULL, 0,
    G_MAXINT },
  { "mode", MEMRES_OPTION_ENUM, "pool",
    "pool: a stream-ordered driver pool located on the host (the pool options, fallback, "
    "numa_id, devices and ipc apply to it only); legacy: cuMemHostAlloc and a synchronous "
    "cuMemFreeHost",
    mode_choices, 0, 0 },
  { "fallback", MEMRES_OPTION_BOOL, NULL,
    "mode=pool: use mode=legacy where the device has no host memory pools (unset: false, fail "
    "with not-supported)",
    NULL, 0, 0 },
  POOL_OPTIONS_HERE,
  { "numa_id", MEMRES_OPTION_INT, NULL,
    "mode=pool: host NUMA node of the pool (unset or -1: the node closest to device, or no "
    "particular node where there is none)",
    NULL, -1, G_MAXINT },
  { "devices", MEMRES_OPTION_INT_LIST, NULL,
    "mode=pool: devices granted read-write access, joined with + (must include device; unset: "
    "device only)",
    NULL, 0, G_MAXINT },
  { "ipc", MEMRES_OPTION_BOOL, NULL,
    "mode=pool: make the pool shareable with other processes (POSIX fds; needs a host NUMA "
    "node) (unset: false)",
    NULL, 0, 0 },
  { "portable", MEMRES_OPTION_BOOL, NULL,
    "mode=legacy: pinned for every CUDA context (CU_MEMHOSTALLOC_PORTABLE) (unset: false)", NULL, 0,
    0 },
  { "devicemap", MEMRES_OPTION_BOOL, NULL,
    "mode=legacy: map into the device address space (CU_MEMHOSTALLOC_DEVICEMAP) (unset: false)",
    NULL, 0, 0 },
  { "writecombined", MEMRES_OPTION_BOOL, NULL,
    "mode=legacy: write-combined, fast to write from the host and to transfer, slow to read "
    "from the host (CU_MEMHOSTALLOC_WRITECOMBINED) (unset: false)",
    NULL, 0, 0 },
};

static gboolean
pinned_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);
  PinnedConfig config;
  gboolean ok;

  ok = pinned_config_init (&config, options, error) && pinned_config_resolve (&config, error);
  if (ok && config.mode == PINNED_MODE_POOL)
    ok = pinned_pool_init (self, &config, error);
  else if (ok)
    ok = pinned_legacy_init (self, &config, error);
  /* page-locked memory cannot exceed the host's physical memory: a larger request fails before
   * any driver call */
  if (ok)
    pool_set_size_limit (&self->pool, pinned_host_memory (), "the host's physical memory");
  pinned_config_clear (&config);
  return ok;
}

static void
pinned_query (MemresResource *mr, MemresResourceInfo *info)
{
  Pinned *self = memres_resource_get_private (mr);

  /* page-locked host memory belongs to no device (the rule of memres_buffer_get_device(),
   * the same as for a wrapped page-locked pointer); the device option only picks the context
   * the allocations use */
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE;
  if (self->pool.other == NULL)
    info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
  if (pool_is_shareable (&self->pool))
    info->flags |= MEMRES_MEMORY_IPC_ENABLED;
  if (self->pool.imported)
    info->flags |= MEMRES_MEMORY_IMPORTED;
}

static const MemresResourceOps pinned_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = pinned_init,
  .query = pinned_query,
  POOL_SLOTS,
  POOL_ACCESS_SLOTS,
};

/* every instance's: mode=legacy and pools made without ipc=true refuse to export */
static const MemresIpcOps pinned_ipc_ops = {
  .version = MEMRES_IPC_OPS_VERSION,
  .import_handle = pinned_import_handle,
  POOL_SHARING_SLOTS,
};

static gboolean
pinned_plugin_init (MemresPlugin *plugin, GError **error)
{
  static const MemresKindInfo info = {
    .struct_size = sizeof (MemresKindInfo),
    .name = "pinned",
    .description = "page-locked host memory, accessible from the devices: a stream-ordered "
                   "host-located pool (mode=pool) or cuMemHostAlloc (mode=legacy)",
    .options = pinned_options,
    .n_options = G_N_ELEMENTS (pinned_options),
    .ops = &pinned_ops,
    .ipc = &pinned_ipc_ops,
    .instance_size = sizeof (Pinned),
    .flags = MEMRES_KIND_OWN_USAGE, /* get_stats reports the used bytes */
  };

  return pool_register_kind (plugin, &info, PINNED_POOL_OPTIONS, error);
}

MEMRES_PLUGIN_DEFINE (pinned, "page-locked host memory", pinned_plugin_init)

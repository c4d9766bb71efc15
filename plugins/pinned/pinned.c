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
 * ipc=true makes the pool shareable with other processes (pinned-ipc.c).
 *
 * mode=legacy: every buffer is one cuMemHostAlloc (flags from the options); closing
 * synchronizes the buffer's deallocation stream and then calls cuMemFreeHost. Not stream-ordered;
 * statistics count the live bytes (reserved equals used), trim has nothing to do, and access
 * cannot be read or changed.
 *
 * Files: pinned-config.c (options, mode and location), pinned-pool.c (pool creation),
 * pinned-legacy.c, pinned-ipc.c; the pool itself is plugins/pool. */
#include <unistd.h>

#include "pinned-pool.h"
#include "pinned-private.h"

static const char *const mode_choices[] = { "pool", "legacy", NULL };

static const MemresOptionSpec pinned_options[] = {
  { "device", MEMRES_OPTION_INT, "0",
    "device of the buffers (their copies run there) whose primary context allocates", NULL, 0,
    G_MAXINT },
  { "mode", MEMRES_OPTION_ENUM, "pool",
    "pool: a stream-ordered driver pool located on the host; legacy: cuMemHostAlloc and a "
    "synchronous cuMemFreeHost",
    mode_choices, 0, 0 },
  { "fallback", MEMRES_OPTION_BOOL, NULL,
    "mode=pool: use mode=legacy where the device has no host memory pools (unset: false, fail "
    "with not-supported)",
    NULL, 0, 0 },
  { "max_size", MEMRES_OPTION_SIZE, NULL,
    "mode=pool: most bytes the pool may reserve (unset: the driver's limit)", NULL, 0, 0 },
  { "release_threshold", MEMRES_OPTION_SIZE, NULL,
    "mode=pool: bytes the pool keeps reserved across synchronizations, or max (unset: max, "
    "keep everything until trimmed, because page-locking memory is slow)",
    NULL, 0, 0 },
  { "reuse_follow_event_dependencies", MEMRES_OPTION_BOOL, NULL,
    "mode=pool: reuse memory freed on another stream once an event orders it (unset: driver "
    "default)",
    NULL, 0, 0 },
  { "reuse_allow_opportunistic", MEMRES_OPTION_BOOL, NULL,
    "mode=pool: reuse memory whose free has already completed on another stream (unset: "
    "driver default)",
    NULL, 0, 0 },
  { "reuse_allow_internal_dependencies", MEMRES_OPTION_BOOL, NULL,
    "mode=pool: let the driver insert dependencies to reuse memory freed on another stream "
    "(unset: driver default)",
    NULL, 0, 0 },
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
  if (ok)
    {
      self->mode = config.mode;
      self->device = config.device;
      self->ipc = config.ipc;
      if (config.mode == PINNED_MODE_POOL)
        ok = pinned_pool_init (&self->pool, &config, error);
      else
        ok = pinned_legacy_init (&self->legacy, config.device, config.host_alloc_flags, error);
    }
  pinned_config_clear (&config);
  return ok;
}

static void
pinned_finalize (MemresResource *mr)
{
  Pinned *self = memres_resource_get_private (mr);

  if (self->mode == PINNED_MODE_POOL)
    memres_pool_destroy (&self->pool);
  else
    pinned_legacy_finalize (&self->legacy);
}

/* Bytes of physical memory of the host (G_MAXUINT64 where unknown), read once. */
static guint64
host_memory (void)
{
  static gsize total = 0;

  if (g_once_init_enter (&total))
    {
      long pages = sysconf (_SC_PHYS_PAGES);
      long page_size = sysconf (_SC_PAGESIZE);
      guint64 bytes
          = pages > 0 && page_size > 0 ? (guint64) pages * (guint64) page_size : G_MAXUINT64;

      g_once_init_leave (&total, (gsize) MIN (bytes, (guint64) G_MAXSIZE));
    }
  return total;
}

/* Page-locked memory cannot exceed the host's physical memory: a larger request fails before
 * any driver call. */
static gboolean
check_size (gsize size, GError **error)
{
  guint64 total = host_memory ();

  if (size <= total)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
               "pinned: cannot allocate %" G_GSIZE_FORMAT " bytes of page-locked memory: the "
               "host has %" G_GUINT64_FORMAT " bytes",
               size, total);
  return FALSE;
}

static gboolean
pinned_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                 GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (G_UNLIKELY (self->imported))
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "pinned: a pool imported from another process cannot allocate: "
                           "allocate in the exporting process and import the buffer");
      return FALSE;
    }
  if (!check_size (size, error))
    return FALSE;
  if (self->mode == PINNED_MODE_LEGACY)
    return pinned_legacy_allocate (&self->legacy, size, alloc, error);
  if (!memres_pool_allocate (&self->pool, size, stream, &alloc->address, error))
    return FALSE;
  alloc->size = size;
  alloc->plugin_data = NULL;
  return TRUE;
}

static gboolean
pinned_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (self->mode == PINNED_MODE_LEGACY)
    return pinned_legacy_deallocate (&self->legacy, alloc, stream, error);
  return memres_pool_free (&self->pool, alloc->address, alloc->size, stream, error);
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
  if (self->mode == PINNED_MODE_POOL)
    info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
  if (self->ipc)
    info->flags |= MEMRES_MEMORY_IPC_ENABLED;
  if (self->imported)
    info->flags |= MEMRES_MEMORY_IMPORTED;
}

static gboolean
pinned_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (self->mode == PINNED_MODE_POOL)
    return memres_pool_get_stats (&self->pool, stats, error);
  pinned_legacy_get_stats (&self->legacy, stats);
  return TRUE;
}

static gboolean
pinned_reset_stats (MemresResource *mr, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (self->mode == PINNED_MODE_POOL)
    return memres_pool_reset_stats (&self->pool, error);
  pinned_legacy_reset_stats (&self->legacy);
  return TRUE;
}

/* Legacy mode holds no memory beyond its buffers: trimming it has nothing to do. */
static gboolean
pinned_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (self->mode == PINNED_MODE_POOL)
    return memres_pool_trim (&self->pool, bytes_to_keep, error);
  return TRUE;
}

static gboolean
legacy_has_no_access_control (GError **error)
{
  g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                       "pinned: mode=legacy memory is accessible from every device with unified "
                       "addressing; its access cannot be read or changed (use mode=pool)");
  return FALSE;
}

static gboolean
pinned_set_access (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (self->mode == PINNED_MODE_LEGACY)
    return legacy_has_no_access_control (error);
  return memres_pool_set_access (&self->pool, descs, n_descs, error);
}

static gboolean
pinned_get_access (MemresResource *mr, gint device, MemresAccess *access, GError **error)
{
  Pinned *self = memres_resource_get_private (mr);

  if (self->mode == PINNED_MODE_LEGACY)
    return legacy_has_no_access_control (error);
  return memres_pool_get_access (&self->pool, device, access, error);
}

static const MemresResourceOps pinned_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = pinned_init,
  .finalize = pinned_finalize,
  .allocate = pinned_allocate,
  .deallocate = pinned_deallocate,
  .query = pinned_query,
  .get_stats = pinned_get_stats,
  .reset_stats = pinned_reset_stats,
  .trim = pinned_trim,
  .set_access = pinned_set_access,
  .get_access = pinned_get_access,
  .export_handle = pinned_export_handle,
  .import_handle = pinned_import_handle,
  .export_buffer = pinned_export_buffer,
  .import_buffer = pinned_import_buffer,
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
    .instance_size = sizeof (Pinned),
    .flags = MEMRES_KIND_OWN_USAGE, /* get_stats reports the used bytes */
  };

  return memres_plugin_register_kind (plugin, &info, error);
}

MEMRES_PLUGIN_DEFINE (pinned, "page-locked host memory", pinned_plugin_init)

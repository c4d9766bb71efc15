/* memres - CUDA memory resources
 * dmr.c: the `dmr` kind, device memory from a stream-ordered driver memory pool.
 *
 * Spec: dmr[:device=N,pool=current|new,max_size=SIZE,release_threshold=SIZE|max,
 *            reuse_follow_event_dependencies=BOOL,reuse_allow_opportunistic=BOOL,
 *            reuse_allow_internal_dependencies=BOOL,sync_fallback=BOOL]
 *
 * Buffers are allocated with cuMemAllocFromPoolAsync and freed with cuMemFreeAsync, each
 * ordered on the caller's stream. A buffer may be freed on another stream than the one it was
 * allocated on: the caller orders the free after every use of the memory (cuEventRecord on the
 * stream that used it, cuStreamWaitEvent on the freeing stream); the driver does not. A pool
 * outlives its buffers: the core runs finalize after the last one is gone. The slots but init
 * and query are the shared pool code's (plugins/common/pool); a device without memory pools
 * gets dmr-sync.c's implementation with sync_fallback=true.
 *
 * Statistics are the pool's (MEMRES_KIND_OWN_USAGE): a current pool is shared with every other
 * user of the device's current pool in the process, whose used bytes only the driver knows, and
 * the driver counts them at no cost on the allocate/free path. */
#include "dmr-private.h"

static const MemresOptionSpec dmr_options[] = {
  { "device", MEMRES_OPTION_INT, "0", "CUDA device ordinal", NULL, 0, G_MAXINT },
  POOL_OPTIONS_HERE,
  { "sync_fallback", MEMRES_OPTION_BOOL, "false",
    "on a device without memory pools, allocate with cuMemAlloc and free with cuMemFree after "
    "synchronizing the stream, instead of failing (only max_size applies then)",
    NULL, 0, 0 },
};

static gboolean
dmr_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);
  PoolConfig config;
  gboolean supported = FALSE;

  self->device = (gint) memres_options_get_int (options, "device");
  pool_config_init_device (&config, self->device);
  if (!pool_config_set_options (&config, options, POOL_OPTIONS_ALL, error)
      || !memres_cuda_check_device (self->device, error)
      || !pool_check_supported (&config, &supported, error))
    return FALSE;
  if (supported)
    return pool_init (&self->pool, &config, error);
  if (!memres_options_get_bool (options, "sync_fallback"))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "device %d does not support memory pools "
                   "(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0); "
                   "sync_fallback=true allocates with cuMemAlloc instead",
                   self->device);
      return FALSE;
    }
  return dmr_sync_init (self, config.max_size, error);
}

static void
dmr_query (MemresResource *mr, MemresResourceInfo *info)
{
  Dmr *self = memres_resource_get_private (mr);

  info->device = self->device;
  info->flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE;
  if (self->pool.other == NULL)
    info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
}

static const MemresResourceOps dmr_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = dmr_init,
  .query = dmr_query,
  POOL_SLOTS,
  POOL_ACCESS_SLOTS,
};

static gboolean
dmr_plugin_init (MemresPlugin *plugin, GError **error)
{
  static const MemresKindInfo info = {
    .struct_size = sizeof (MemresKindInfo),
    .name = "dmr",
    .description = "device memory from a stream-ordered driver memory pool, with statistics, "
                   "trimming and peer access",
    .options = dmr_options,
    .n_options = G_N_ELEMENTS (dmr_options),
    .ops = &dmr_ops,
    .instance_size = sizeof (Dmr),
    .flags = MEMRES_KIND_OWN_USAGE, /* get_stats reports the used bytes */
  };

  return pool_register_kind (plugin, &info, POOL_OPTIONS_ALL, error);
}

MEMRES_PLUGIN_DEFINE (dmr, "device memory pools (stream-ordered)", dmr_plugin_init)

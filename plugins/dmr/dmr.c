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
 * outlives its buffers: the core runs finalize after the last one is gone. */
#include "dmr-sync.h"
#include "pool.h"

typedef struct
{
  gint device;
  gboolean sync; /* no pool support: the fallback allocator */
  MemresPool pool;
  DmrSync fallback;
} Dmr;

static const MemresOptionSpec dmr_options[] = {
  { "device", MEMRES_OPTION_INT, "0", "CUDA device ordinal", NULL, 0, G_MAXINT },
  MEMRES_POOL_OPTION_SPEC_POOL,
  MEMRES_POOL_OPTION_SPECS_ATTRIBUTES,
  { "sync_fallback", MEMRES_OPTION_BOOL, "false",
    "on a device without memory pools, allocate with cuMemAlloc and free with cuMemFree after "
    "synchronizing the stream, instead of failing (only max_size applies then)",
    NULL, 0, 0 },
};

static gboolean
dmr_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);
  gint device = (gint) memres_options_get_int (options, "device");
  MemresPoolConfig config;
  gboolean supported = FALSE;

  memres_pool_config_init_device (&config, device);
  if (!memres_pool_config_set_options (&config, options, MEMRES_POOL_OPTIONS_ALL, error))
    return FALSE;
  if (!memres_cuda_check_device (device, error))
    return FALSE;
  if (!memres_pool_check_supported (&config, &supported, error))
    return FALSE;

  self->device = device;
  if (!supported)
    {
      if (!memres_options_get_bool (options, "sync_fallback"))
        return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                            "device %d does not support memory pools "
                            "(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0); "
                            "sync_fallback=true allocates with cuMemAlloc instead",
                            device),
               FALSE;
      self->sync = TRUE;
      return dmr_sync_init (&self->fallback, device, config.max_size, error);
    }
  return memres_pool_init (&self->pool, &config, error);
}

static void
dmr_finalize (MemresResource *mr)
{
  Dmr *self = memres_resource_get_private (mr);

  if (self->sync)
    dmr_sync_clear (&self->fallback);
  else
    memres_pool_destroy (&self->pool);
}

static gboolean
dmr_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
              GError **error)
{
  Dmr *self = memres_resource_get_private (mr);
  gboolean ok;

  if (G_UNLIKELY (self->sync))
    ok = dmr_sync_allocate (&self->fallback, size, &alloc->address, error);
  else
    ok = memres_pool_allocate (&self->pool, size, stream, &alloc->address, error);
  if (ok)
    alloc->size = size;
  return ok;
}

static gboolean
dmr_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);

  if (G_UNLIKELY (self->sync))
    return dmr_sync_free (&self->fallback, alloc->address, alloc->size, stream, error);
  return memres_pool_free (&self->pool, alloc->address, alloc->size, stream, error);
}

static void
dmr_query (MemresResource *mr, MemresResourceInfo *info)
{
  Dmr *self = memres_resource_get_private (mr);

  info->device = self->device;
  info->flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE;
  if (!self->sync)
    info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
}

static gboolean
dmr_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);

  if (self->sync)
    {
      dmr_sync_get_stats (&self->fallback, stats);
      return TRUE;
    }
  return memres_pool_get_stats (&self->pool, stats, error);
}

static gboolean
dmr_reset_stats (MemresResource *mr, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);

  if (self->sync)
    {
      dmr_sync_reset_stats (&self->fallback);
      return TRUE;
    }
  return memres_pool_reset_stats (&self->pool, error);
}

static gboolean
dmr_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);

  if (self->sync)
    return TRUE; /* cuMemAlloc memory is returned at every free: nothing is held */
  return memres_pool_trim (&self->pool, bytes_to_keep, error);
}

static gboolean
check_pool (Dmr *self, GError **error)
{
  if (!self->sync)
    return TRUE;
  return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                      "peer access needs a memory pool; device %d has none (sync_fallback)",
                      self->device),
         FALSE;
}

static gboolean
dmr_set_access (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);

  return check_pool (self, error) && memres_pool_set_access (&self->pool, descs, n_descs, error);
}

static gboolean
dmr_get_access (MemresResource *mr, gint device, MemresAccess *access, GError **error)
{
  Dmr *self = memres_resource_get_private (mr);

  return check_pool (self, error) && memres_pool_get_access (&self->pool, device, access, error);
}

static const MemresResourceOps dmr_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = dmr_init,
  .finalize = dmr_finalize,
  .allocate = dmr_allocate,
  .deallocate = dmr_deallocate,
  .query = dmr_query,
  .get_stats = dmr_get_stats,
  .reset_stats = dmr_reset_stats,
  .trim = dmr_trim,
  .set_access = dmr_set_access,
  .get_access = dmr_get_access,
};

static const MemresKindInfo dmr_kind = {
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

static gboolean
dmr_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &dmr_kind, error);
}

MEMRES_PLUGIN_DEFINE (dmr, "device memory pools (stream-ordered)", dmr_plugin_init)

/* memres - CUDA memory resources
 * managed.c: the `managed` kind, managed (unified) memory: one address valid on the host and on
 * every device, migrated on demand by the driver. Buffers are flagged MEMRES_MEMORY_MANAGED, so
 * the advice, prefetch and discard functions of memres-managed.h accept them.
 *
 * Spec: managed[:device=N,pool=current|new|none,attach=global|host,
 *                preferred_location=none|device|host|host_numa,numa_id=N,
 *                release_threshold=SIZE|max,fallback=BOOL]
 *
 * pool=current (default) wraps the current managed pool of the preferred location
 * (cuMemGetMemPool with CU_MEM_ALLOCATION_TYPE_MANAGED; the location is NONE when no preference
 * is given); pool=new creates one (cuMemPoolCreate, allocType MANAGED, no handle types, maxSize
 * 0 as the driver requires for managed pools), destroyed after the last buffer. Both are
 * stream-ordered (cuMemAllocFromPoolAsync / cuMemFreeAsync) and need CUDA 13, memory pools and
 * concurrent managed access on `device`: where one is missing, creation fails with
 * MEMRES_ERROR_NOT_SUPPORTED naming the device and the attribute, unless fallback=true, which
 * takes pool=none instead.
 *
 * pool=none: every buffer is one cuMemAllocManaged (attach=global: any stream on any device may
 * access it; attach=host: only the host until a stream attaches it), advised to the preferred
 * location (cuMemAdvise) when one is given; closing synchronizes the buffer's deallocation
 * stream (the core does, the memory being not stream-ordered) and then calls cuMemFree. Not
 * stream-ordered; statistics count the live bytes.
 *
 * A device without concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 0)
 * can still use pool=none; the first such resource of the process logs a g_warning: the host
 * must not touch managed memory while any kernel runs (it may crash).
 *
 * Statistics are the pool's (MEMRES_KIND_OWN_USAGE): the current managed pool is shared with
 * every other user of it in the process, whose used bytes only the driver knows, and the driver
 * counts them at no cost on the allocate/free path; the shared pool code counts pool=none's.
 * Files: managed-config.c (the checks of creation), managed-none.c (pool=none's ops table); the
 * slots but init and query are the shared pool code's (plugins/common/pool). */
#include "managed-private.h"

static const char *const attach_choices[] = { "global", "host", NULL };
static const char *const preference_choices[] = { "none", "device", "host", "host_numa", NULL };

static const MemresOptionSpec managed_options[] = {
  { "device", MEMRES_OPTION_INT, "0",
    "device of the buffers (their copies run there, its attributes decide what works), and the "
    "preferred location of preferred_location=device",
    NULL, 0, G_MAXINT },
  { "pool", MEMRES_OPTION_ENUM, "current",
    "current: the preferred location's current managed pool (shared, never destroyed); new: a "
    "managed pool of its own; both stream-ordered, CUDA 13; none: cuMemAllocManaged, freed "
    "after synchronizing the stream",
    managed_pool_choices, 0, 0 },
  { "attach", MEMRES_OPTION_ENUM, NULL,
    "pool=none: global: any stream on any device may access the memory; host: only the host, "
    "until a stream attaches it (unset: global)",
    attach_choices, 0, 0 },
  { "preferred_location", MEMRES_OPTION_ENUM, "none",
    "where the memory should live: none, device (the device option), host, host_numa (the "
    "numa_id option); the pool's location, or advice on each buffer with pool=none",
    preference_choices, 0, 0 },
  { "numa_id", MEMRES_OPTION_INT, NULL,
    "preferred_location=host_numa: the host NUMA node (unset: the node closest to device, "
    "CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)",
    NULL, 0, G_MAXINT },
  POOL_OPTIONS_HERE,
  { "fallback", MEMRES_OPTION_BOOL, NULL,
    "pool=current|new: use pool=none where the device has no managed pools (unset: false, fail "
    "with not-supported)",
    NULL, 0, 0 },
};

static gboolean
managed_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Managed *self = memres_resource_get_private (mr);
  ManagedPoolMode mode = (ManagedPoolMode) memres_options_get_int (options, "pool");
  g_autoptr (GError) pool_error = NULL;
  CUmemLocation location;
  ManagedDevice info;
  PoolConfig config;

  self->device = (gint) memres_options_get_int (options, "device");
  if (!managed_check_mode_options (options, mode, error))
    return FALSE;
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL || !memres_cuda_check_device (self->device, error)
      || !managed_get_device (self->drv, self->device, &info, error))
    return FALSE;
  if (!info.managed_memory)
    return managed_not_supported (error, self->device, &info, "cannot allocate managed memory",
                                  "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY", "");
  if (!managed_resolve_location (options, self->device, &location, error))
    return FALSE;

  if (mode != MANAGED_POOL_NONE
      && !managed_check_pools (self->drv, self->device, &info, &pool_error))
    {
      if (!memres_options_get_bool (options, "fallback"))
        {
          g_propagate_error (error, g_steal_pointer (&pool_error));
          return FALSE;
        }
      mode = MANAGED_POOL_NONE;
    }
  if (mode == MANAGED_POOL_NONE)
    return managed_none_init (self, options, &location, &info, error);

  pool_config_init_device (&config, self->device);
  config.alloc_type = CU_MEM_ALLOCATION_TYPE_MANAGED;
  config.location = location;
  config.create = mode == MANAGED_POOL_NEW;
  return pool_config_set_options (&config, options, MANAGED_POOL_OPTIONS, error)
         && pool_init (&self->pool, &config, error);
}

static void
managed_query (MemresResource *mr, MemresResourceInfo *info)
{
  Managed *self = memres_resource_get_private (mr);

  info->device = self->device;
  info->flags
      = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_MANAGED;
  if (self->pool.other == NULL)
    info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
}

static const MemresResourceOps managed_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = managed_init,
  .query = managed_query,
  POOL_SLOTS,
};

static gboolean
managed_plugin_init (MemresPlugin *plugin, GError **error)
{
  static const MemresKindInfo info = {
    .struct_size = sizeof (MemresKindInfo),
    .name = "managed",
    .description = "managed (unified) memory, host- and device-accessible, with advice and "
                   "prefetch: a stream-ordered managed pool (CUDA 13) or cuMemAllocManaged",
    .options = managed_options,
    .n_options = G_N_ELEMENTS (managed_options),
    .ops = &managed_ops,
    .instance_size = sizeof (Managed),
    .flags = MEMRES_KIND_OWN_USAGE, /* get_stats reports the used bytes */
  };

  return pool_register_kind (plugin, &info, MANAGED_POOL_OPTIONS, error);
}

MEMRES_PLUGIN_DEFINE (managed, "managed (unified) memory", managed_plugin_init)

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
 * stream and then calls cuMemFree. Not stream-ordered; statistics count the live bytes.
 *
 * A device without concurrent managed access (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 0)
 * can still use pool=none; the first such resource of the process logs a g_warning: the host
 * must not touch managed memory while any kernel runs (it may crash). */
#include "pool.h"

typedef enum
{
  MANAGED_POOL_CURRENT,
  MANAGED_POOL_NEW,
  MANAGED_POOL_NONE,
} ManagedPoolMode;

typedef enum
{
  MANAGED_PREFER_NONE,
  MANAGED_PREFER_DEVICE,
  MANAGED_PREFER_HOST,
  MANAGED_PREFER_HOST_NUMA,
} ManagedPreference;

typedef struct
{
  const MemresCudaDriver *drv;
  gint device;
  gboolean pooled; /* pool=current|new: the pool below; else cuMemAllocManaged */
  MemresPool pool;
  /* pool=none */
  guint attach;            /* CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST */
  CUmemLocation preferred; /* advised after each allocation unless type NONE */
  GMutex lock;             /* the counters */
  guint64 used_current, used_high;
} Managed;

static const char *const pool_choices[] = { "current", "new", "none", NULL };
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
    pool_choices, 0, 0 },
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
  { "release_threshold", MEMRES_OPTION_SIZE, NULL, MEMRES_POOL_DOC_RELEASE_THRESHOLD, NULL, 0, 0 },
  { "fallback", MEMRES_OPTION_BOOL, NULL,
    "pool=current|new: use pool=none where the device has no managed pools (unset: false, fail "
    "with not-supported)",
    NULL, 0, 0 },
};

/* The device attributes creation looks at. */
typedef struct
{
  gchar name[128];
  int managed_memory;
  int concurrent;
  int pools;
} DeviceInfo;

static gboolean
get_attribute (const MemresCudaDriver *drv, CUdevice dev, CUdevice_attribute attr, int *value,
               GError **error)
{
  CUresult r = drv->cuDeviceGetAttribute (value, attr, dev);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGetAttribute");
  return TRUE;
}

static gboolean
get_device_info (const MemresCudaDriver *drv, gint device, DeviceInfo *info, GError **error)
{
  CUdevice dev;
  CUresult r;

  r = drv->cuDeviceGet (&dev, device);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  if (drv->cuDeviceGetName == NULL
      || drv->cuDeviceGetName (info->name, sizeof info->name, dev) != CUDA_SUCCESS)
    g_strlcpy (info->name, "unknown", sizeof info->name);
  return get_attribute (drv, dev, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, &info->managed_memory, error)
         && get_attribute (drv, dev, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                           &info->concurrent, error)
         && get_attribute (drv, dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, &info->pools,
                           error);
}

static gboolean
not_supported (GError **error, gint device, const DeviceInfo *info, const char *what,
               const char *attribute, const char *hint)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "managed: device %d (%s) %s (%s is 0)%s", device, info->name, what, attribute, hint);
  return FALSE;
}

/* Why @device cannot have a managed pool, as an error; TRUE when it can. */
static gboolean
check_pools (const MemresCudaDriver *drv, gint device, const DeviceInfo *info, GError **error)
{
  static const char hint[] = "; pool=none uses cuMemAllocManaged, fallback=true does that "
                             "where managed pools are missing";

  if (drv->cuMemGetMemPool == NULL || drv->driver_version < 13000)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "managed: managed memory pools need a CUDA 13 driver (this one is %d.%d)%s",
                   drv->driver_version / 1000, drv->driver_version % 1000 / 10, hint);
      return FALSE;
    }
  if (!info->pools)
    return not_supported (error, device, info, "has no memory pools",
                          "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED", hint);
  if (!info->concurrent)
    return not_supported (error, device, info,
                          "has no concurrent managed access, which managed pools need",
                          "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS", hint);
  return TRUE;
}

/* Once per process: the host must keep off managed memory while kernels run. */
static void
warn_not_concurrent (gint device, const DeviceInfo *info)
{
  static gint warned = 0;

  if (g_atomic_int_compare_and_exchange (&warned, 0, 1))
    g_warning ("managed: device %d (%s) has no concurrent managed access "
               "(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS is 0): host access to managed "
               "memory while any kernel runs is unsafe (it may crash); synchronize first",
               device, info->name);
}

/* The preferred location the options name. */
static gboolean
resolve_location (const MemresCudaDriver *drv, const MemresOptions *options, gint device,
                  CUmemLocation *location, GError **error)
{
  ManagedPreference pref
      = (ManagedPreference) memres_options_get_int (options, "preferred_location");

  location->id = 0;
  if (memres_options_is_set (options, "numa_id") && pref != MANAGED_PREFER_HOST_NUMA)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                           "managed: numa_id applies to preferred_location=host_numa only");
      return FALSE;
    }
  switch (pref)
    {
    case MANAGED_PREFER_DEVICE:
      location->type = CU_MEM_LOCATION_TYPE_DEVICE;
      location->id = device;
      return TRUE;
    case MANAGED_PREFER_HOST:
      location->type = CU_MEM_LOCATION_TYPE_HOST;
      return TRUE;
    case MANAGED_PREFER_HOST_NUMA:
      location->type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      if (memres_options_is_set (options, "numa_id"))
        location->id = (gint) memres_options_get_int (options, "numa_id");
      else
        {
          CUdevice dev;
          CUresult r = drv->cuDeviceGet (&dev, device);
          int numa = -1;

          if (r != CUDA_SUCCESS)
            return memres_cuda_set_error (error, r, "cuDeviceGet");
          if (!get_attribute (drv, dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, &numa, error))
            return FALSE;
          if (numa < 0)
            {
              g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "managed: preferred_location=host_numa: device %d has no closest "
                           "host NUMA node (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID is %d); give "
                           "numa_id",
                           device, numa);
              return FALSE;
            }
          location->id = numa;
        }
      return TRUE;
    default:
      location->type = CU_MEM_LOCATION_TYPE_NONE;
      return TRUE;
    }
}

static gboolean
check_mode_options (const MemresOptions *options, ManagedPoolMode mode, GError **error)
{
  const char *wrong = NULL;

  if (mode == MANAGED_POOL_NONE)
    {
      if (memres_options_is_set (options, "release_threshold"))
        wrong = "release_threshold";
      else if (memres_options_is_set (options, "fallback"))
        wrong = "fallback";
    }
  else if (memres_options_is_set (options, "attach"))
    wrong = "attach";
  if (wrong == NULL)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "managed: %s does not apply to pool=%s", wrong, pool_choices[mode]);
  return FALSE;
}

static gboolean
managed_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Managed *self = memres_resource_get_private (mr);
  gint device = (gint) memres_options_get_int (options, "device");
  ManagedPoolMode mode = (ManagedPoolMode) memres_options_get_int (options, "pool");
  g_autoptr (GError) pool_error = NULL;
  CUmemLocation location;
  DeviceInfo info;

  if (!check_mode_options (options, mode, error))
    return FALSE;
  self->drv = memres_cuda_get_driver (error);
  if (self->drv == NULL || !memres_cuda_check_device (device, error)
      || !get_device_info (self->drv, device, &info, error))
    return FALSE;
  if (!info.managed_memory)
    return not_supported (error, device, &info, "cannot allocate managed memory",
                          "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY", "");
  if (!resolve_location (self->drv, options, device, &location, error))
    return FALSE;
  self->device = device;

  if (mode != MANAGED_POOL_NONE && !check_pools (self->drv, device, &info, &pool_error))
    {
      if (!memres_options_get_bool (options, "fallback"))
        {
          g_propagate_error (error, g_steal_pointer (&pool_error));
          return FALSE;
        }
      mode = MANAGED_POOL_NONE;
    }

  if (mode != MANAGED_POOL_NONE)
    {
      MemresPoolConfig config;

      memres_pool_config_init_device (&config, device);
      config.alloc_type = CU_MEM_ALLOCATION_TYPE_MANAGED;
      config.location = location;
      config.create = mode == MANAGED_POOL_NEW;
      if (memres_options_is_set (options, "release_threshold"))
        {
          config.release_threshold_set = TRUE;
          config.release_threshold = memres_options_get_size (options, "release_threshold");
        }
      if (!memres_pool_init (&self->pool, &config, error))
        return FALSE;
      self->pooled = TRUE;
    }
  else
    {
      if (self->drv->cuMemAllocManaged == NULL || self->drv->cuCtxPushCurrent == NULL
          || self->drv->cuCtxPopCurrent == NULL
          || (location.type != CU_MEM_LOCATION_TYPE_NONE && self->drv->cuMemAdvise == NULL))
        {
          g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                               "managed: the CUDA driver lacks cuMemAllocManaged or the "
                               "CUmemLocation form of cuMemAdvise (CUDA 12.2)");
          return FALSE;
        }
      self->attach = memres_options_get_int (options, "attach") == 1 ? CU_MEM_ATTACH_HOST
                                                                     : CU_MEM_ATTACH_GLOBAL;
      self->preferred = location;
      g_mutex_init (&self->lock);
      if (!info.concurrent)
        warn_not_concurrent (device, &info);
    }
  return TRUE;
}

static void
managed_finalize (MemresResource *mr)
{
  Managed *self = memres_resource_get_private (mr);

  if (self->pooled)
    memres_pool_destroy (&self->pool);
  else
    g_mutex_clear (&self->lock);
}

static void
account (Managed *self, gsize size, gboolean add)
{
  g_mutex_lock (&self->lock);
  if (add)
    {
      self->used_current += size;
      self->used_high = MAX (self->used_high, self->used_current);
    }
  else
    self->used_current -= size;
  g_mutex_unlock (&self->lock);
}

static gboolean
allocate_managed (Managed *self, gsize size, MemresAllocation *alloc, GError **error)
{
  CUdeviceptr ptr = 0;
  CUcontext ctx;
  CUresult r;

  /* cuMemAllocManaged acts on the current context: the device's primary one, for the call */
  if (!memres_cuda_get_primary_context (self->device, &ctx, error))
    return FALSE;
  r = self->drv->cuCtxPushCurrent (ctx);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuCtxPushCurrent");
  r = self->drv->cuMemAllocManaged (&ptr, size, self->attach);
  (void) self->drv->cuCtxPopCurrent (&ctx);
  if (r != CUDA_SUCCESS)
    return memres_pool_set_alloc_error (error, r, "cuMemAllocManaged", size);
  if (self->preferred.type != CU_MEM_LOCATION_TYPE_NONE)
    {
      r = self->drv->cuMemAdvise (ptr, size, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, self->preferred);
      if (r != CUDA_SUCCESS)
        {
          (void) self->drv->cuMemFree (ptr);
          return memres_cuda_set_error (error, r, "cuMemAdvise");
        }
    }
  alloc->address = ptr;
  alloc->size = size;
  alloc->plugin_data = NULL;
  account (self, size, TRUE);
  return TRUE;
}

static gboolean
managed_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                  GError **error)
{
  Managed *self = memres_resource_get_private (mr);

  if (!self->pooled)
    return allocate_managed (self, size, alloc, error);
  if (!memres_pool_allocate (&self->pool, size, stream, &alloc->address, error))
    return FALSE;
  alloc->size = size;
  alloc->plugin_data = NULL;
  return TRUE;
}

static gboolean
managed_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                    GError **error)
{
  Managed *self = memres_resource_get_private (mr);
  CUresult r;

  if (self->pooled)
    return memres_pool_free (&self->pool, alloc->address, alloc->size, stream, error);

  /* cuMemFree is not stream-ordered: wait for the work on the buffer first. When that wait or
   * the free fails nothing is freed (the deallocate contract: the core keeps the buffer open). */
  if (!memres_cuda_ensure_context (self->device, error))
    return FALSE;
  r = self->drv->cuStreamSynchronize ((CUstream) stream);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamSynchronize");
  r = self->drv->cuMemFree ((CUdeviceptr) alloc->address);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemFree");
  account (self, alloc->size, FALSE);
  return TRUE;
}

static void
managed_query (MemresResource *mr, MemresResourceInfo *info)
{
  Managed *self = memres_resource_get_private (mr);

  info->device = self->device;
  info->flags
      = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_MANAGED;
  if (self->pooled)
    info->flags |= MEMRES_MEMORY_STREAM_ORDERED;
}

static gboolean
managed_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Managed *self = memres_resource_get_private (mr);

  if (self->pooled)
    return memres_pool_get_stats (&self->pool, stats, error);
  g_mutex_lock (&self->lock);
  stats->reserved_current = stats->used_current = self->used_current;
  stats->reserved_high = stats->used_high = self->used_high;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
managed_reset_stats (MemresResource *mr, GError **error)
{
  Managed *self = memres_resource_get_private (mr);

  if (self->pooled)
    return memres_pool_reset_stats (&self->pool, error);
  g_mutex_lock (&self->lock);
  self->used_high = self->used_current;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

/* pool=none holds nothing beyond its buffers: trimming has nothing to do. */
static gboolean
managed_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Managed *self = memres_resource_get_private (mr);

  if (self->pooled)
    return memres_pool_trim (&self->pool, bytes_to_keep, error);
  return TRUE;
}

static const MemresResourceOps managed_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = managed_init,
  .finalize = managed_finalize,
  .allocate = managed_allocate,
  .deallocate = managed_deallocate,
  .query = managed_query,
  .get_stats = managed_get_stats,
  .reset_stats = managed_reset_stats,
  .trim = managed_trim,
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

  return memres_plugin_register_kind (plugin, &info, error);
}

MEMRES_PLUGIN_DEFINE (managed, "managed (unified) memory", managed_plugin_init)

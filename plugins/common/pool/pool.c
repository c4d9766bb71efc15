/* memres - CUDA memory resources
 * pool.c: setting up and releasing the PoolRecord of a pool kind's instance: a driver memory
 * pool created or wrapped with its attributes (the release threshold of a wrapped current pool
 * shared between the resources on it), or the kind's other implementation (pool_use_other()).
 * The slots that use it are pool-slots.c and pool-ipc.c. */
#include "pool-private.h"

#include <unistd.h>

/**
 * pool_config_init_device:
 * @config: (out caller-allocates): the configuration to fill
 * @device: a device ordinal
 *
 * Fills @config for the current pool of device @device, every attribute left to the driver.
 */
void
pool_config_init_device (PoolConfig *config, gint device)
{
  memset (config, 0, sizeof *config);
  config->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  config->location.id = device;
  config->device = device;
  config->create = FALSE;
  config->handle_type = CU_MEM_HANDLE_TYPE_NONE;
  config->reuse_follow_event_dependencies = -1;
  config->reuse_allow_opportunistic = -1;
  config->reuse_allow_internal_dependencies = -1;
  config->alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
}

/**
 * pool_config_init_host:
 * @config: (out caller-allocates): the configuration to fill
 * @type: `CU_MEM_LOCATION_TYPE_HOST` or `CU_MEM_LOCATION_TYPE_HOST_NUMA`
 * @numa_id: the NUMA node for `CU_MEM_LOCATION_TYPE_HOST_NUMA` (ignored for HOST)
 * @device: the device whose primary context allocation on the %NULL stream falls back to
 *
 * Fills @config for the current pool of a host location, every attribute left to the driver.
 */
void
pool_config_init_host (PoolConfig *config, CUmemLocationType type, gint numa_id, gint device)
{
  pool_config_init_device (config, device);
  config->location.type = type;
  config->location.id = type == CU_MEM_LOCATION_TYPE_HOST_NUMA ? numa_id : 0;
}

/**
 * pool_check_supported:
 * @config: the configuration to check
 * @supported: (out): whether @config->device supports pools at @config->location with
 *   @config->handle_type
 * @error: return location for a #GError
 *
 * Asks the driver whether a pool as described by @config can be used: the device attribute
 * `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` (device locations),
 * `CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED` (HOST) or
 * `CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED` (HOST_NUMA), and for a shareable
 * handle type `CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES`, each read with
 * memres_cuda_get_device_attribute() (cuDeviceGet, cuDeviceGetAttribute).
 *
 * Returns: %TRUE when the question was answered (@supported is set); %FALSE with
 *   %MEMRES_ERROR_NO_DRIVER, %MEMRES_ERROR_NO_DEVICE or a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
pool_check_supported (const PoolConfig *config, gboolean *supported, GError **error)
{
  CUdevice_attribute attr;
  int value = 0;

  *supported = FALSE;

  switch (config->location.type)
    {
    case CU_MEM_LOCATION_TYPE_HOST:
      attr = CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED;
      break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      attr = CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED;
      break;
    default:
      attr = CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
      break;
    }

  if (!memres_cuda_get_device_attribute (config->device, attr, &value, error))
    return FALSE;
  if (value == 0)
    return TRUE;

  if (config->handle_type != CU_MEM_HANDLE_TYPE_NONE)
    {
      if (!memres_cuda_get_device_attribute (
              config->device, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, &value, error))
        return FALSE;
      if (((guint) value & (guint) config->handle_type) != (guint) config->handle_type)
        return TRUE;
    }

  *supported = TRUE;
  return TRUE;
}

gboolean
pool_set_attribute (PoolRecord *pool, CUmemPool_attribute attr, void *value, GError **error)
{
  CUresult r = pool->drv->cuMemPoolSetAttribute (pool->handle, attr, value);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolSetAttribute");
  return TRUE;
}

gboolean
pool_get_attribute (PoolRecord *pool, CUmemPool_attribute attr, void *value, GError **error)
{
  CUresult r = pool->drv->cuMemPoolGetAttribute (pool->handle, attr, value);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolGetAttribute");
  return TRUE;
}

/* The release threshold is a cuuint64_t, the reuse policies are ints. */
static gboolean
attribute_is_int (CUmemPool_attribute attr)
{
  return attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
}

static gboolean
get_attribute_u64 (PoolRecord *pool, CUmemPool_attribute attr, guint64 *value, GError **error)
{
  cuuint64_t u = 0;
  int i = 0;

  if (!pool_get_attribute (pool, attr, attribute_is_int (attr) ? (void *) &i : (void *) &u, error))
    return FALSE;
  *value = attribute_is_int (attr) ? (guint64) i : u;
  return TRUE;
}

static gboolean
set_attribute_u64 (PoolRecord *pool, CUmemPool_attribute attr, guint64 value, GError **error)
{
  cuuint64_t u = value;
  int i = (int) value;

  return pool_set_attribute (pool, attr, attribute_is_int (attr) ? (void *) &i : (void *) &u,
                             error);
}

typedef struct
{
  CUmemPool_attribute attr;
  guint64 value;
  guint64 old; /* a shared pool's value before, to restore on failure */
} AttributeChange;

/* The current pools this plugin wraps, with how many #PoolRecord use each and the release
 * threshold memres raised (apply_attributes()), so that the last user gives it back
 * (pool_destroy()). Per plugin (this code is linked into each): the device pools are
 * wrapped by dmr only. */
typedef struct
{
  guint users;
  gboolean raised;   /* the threshold was 0 and memres set it to G_MAXUINT64 */
  guint64 threshold; /* the value before (0) */
} SharedPool;

static GMutex shared_lock;       /* shared_pools, and the threshold check of a wrap */
static GHashTable *shared_pools; /* CUmemoryPool -> SharedPool* */

/**
 * pool_at_fork:
 * @mr: (nullable): an instance of a pool kind, or %NULL for the plugin's own state
 * @phase: the phase of the fork
 *
 * The at_fork slot of every pool kind: the table of wrapped current pools (with @mr %NULL:
 * one call per plugin, since each plugin registers one pool kind and has its own copy of this
 * file) and the instance's peer-access lock.
 */
void
pool_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  memres_fork_mutex (mr == NULL ? &shared_lock : &POOL_RECORD (mr)->access_lock, phase);
}

/* Under shared_lock: the entry of @handle, made on first use. */
static SharedPool *
shared_pool_get (CUmemoryPool handle)
{
  SharedPool *shared;

  if (shared_pools == NULL)
    shared_pools = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
  shared = g_hash_table_lookup (shared_pools, handle);
  if (shared == NULL)
    {
      shared = g_new0 (SharedPool, 1);
      g_hash_table_insert (shared_pools, handle, shared);
    }
  return shared;
}

/* A user of a wrapped current pool is gone; the last one gives back the release threshold
 * memres raised, unless someone set another value meanwhile (then it is theirs). Failures
 * (CUDA_ERROR_DEINITIALIZED at exit) are ignored: the pool is the driver's. */
static void
shared_pool_release (PoolRecord *pool)
{
  SharedPool *shared;

  g_mutex_lock (&shared_lock);
  shared = g_hash_table_lookup (shared_pools, pool->handle);
  if (shared != NULL && --shared->users == 0)
    {
      guint64 now = 0;

      if (shared->raised && get_attribute_u64 (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &now, NULL)
          && now == G_MAXUINT64)
        (void) set_attribute_u64 (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, shared->threshold, NULL);
      g_hash_table_remove (shared_pools, pool->handle);
    }
  g_mutex_unlock (&shared_lock);
}

static gboolean
apply_attributes (PoolRecord *pool, const PoolConfig *config, GError **error)
{
  gboolean raising = FALSE;
  const struct
  {
    CUmemPool_attribute attr;
    gint value;
  } reuse[] = {
    { CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, config->reuse_follow_event_dependencies },
    { CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, config->reuse_allow_opportunistic },
    { CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
      config->reuse_allow_internal_dependencies },
  };
  AttributeChange changes[1 + G_N_ELEMENTS (reuse)];
  guint n = 0, done;

  if (config->release_threshold_set)
    changes[n++]
        = (AttributeChange){ CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, config->release_threshold, 0 };
  else if (!pool->owned)
    {
      /* A current pool keeps the driver's release threshold, 0 by default: at every
       * synchronization such a pool returns all its unused memory to the system, and the next
       * allocation has to map it again, which makes stream-ordered allocation as slow as
       * cuMemAlloc. Like cuda.core, raise a threshold of 0 to "keep everything"; trim releases
       * memory explicitly. A threshold someone else set (not 0) is left alone. */
      guint64 threshold = 0;

      if (!get_attribute_u64 (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold, error))
        return FALSE;
      if (threshold == 0)
        {
          changes[n++] = (AttributeChange){ CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, G_MAXUINT64, 0 };
          raising = TRUE;
        }
    }
  for (guint i = 0; i < G_N_ELEMENTS (reuse); i++)
    if (reuse[i].value >= 0)
      changes[n++] = (AttributeChange){ reuse[i].attr, (guint64) reuse[i].value, 0 };

  /* A pool of our own is destroyed on failure; a shared one gets its old values back. */
  for (done = 0; done < n; done++)
    {
      if (!pool->owned && !get_attribute_u64 (pool, changes[done].attr, &changes[done].old, error))
        break;
      if (!set_attribute_u64 (pool, changes[done].attr, changes[done].value, error))
        break;
    }
  if (done == n)
    {
      /* the last user of the shared pool gives the threshold back (shared_pool_release()) */
      if (raising)
        {
          SharedPool *shared = shared_pool_get (pool->handle);

          shared->raised = TRUE;
          shared->threshold = 0;
        }
      return TRUE;
    }
  if (!pool->owned)
    while (done-- > 0)
      (void) set_attribute_u64 (pool, changes[done].attr, changes[done].old, NULL);
  return FALSE;
}

static void
make_pool_id (guint8 id[MEMRES_IPC_ID_SIZE])
{
  for (guint i = 0; i < MEMRES_IPC_ID_SIZE; i += 4)
    {
      guint32 r = g_random_int ();

      memcpy (id + i, &r, 4);
    }
  id[6] = (id[6] & 0x0f) | 0x40; /* version 4 */
  id[8] = (id[8] & 0x3f) | 0x80; /* RFC 4122 variant */
}

static gboolean
get_current_pool (const MemresCudaDriver *drv, const PoolConfig *config, CUmemoryPool *handle,
                  GError **error)
{
  CUmemLocation location = config->location;
  CUdevice dev;
  CUresult r;

  if (config->location.type != CU_MEM_LOCATION_TYPE_DEVICE
      || config->alloc_type == CU_MEM_ALLOCATION_TYPE_MANAGED)
    {
      if (drv->cuMemGetMemPool == NULL)
        {
          g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                               "the CUDA driver has no cuMemGetMemPool (CUDA 13 or newer "
                               "is needed for the current pool of a host location or of "
                               "managed memory)");
          return FALSE;
        }
      r = drv->cuMemGetMemPool (handle, &location, config->alloc_type);
      if (r != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuMemGetMemPool");
      return TRUE;
    }

  r = drv->cuDeviceGet (&dev, config->location.id);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  r = drv->cuDeviceGetMemPool (handle, dev);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGetMemPool");
  return TRUE;
}

/**
 * pool_init_for_handle:
 * @pool: (out caller-allocates): the pool to set up
 * @drv: the driver table
 * @handle: a driver pool
 * @owned: whether pool_destroy() destroys @handle
 * @location: where the pool's memory lives
 * @device: the device whose primary context allocation falls back to
 * @handle_type: the pool's shareable handle types
 *
 * Sets up @pool around an existing driver pool (an imported one, for example) without any
 * driver call. @pool_id is random and @device_uuid zero: an importer overwrites them.
 * Undo with pool_destroy().
 */
void
pool_init_for_handle (PoolRecord *pool, const MemresCudaDriver *drv, CUmemoryPool handle,
                      gboolean owned, const CUmemLocation *location, gint device,
                      CUmemAllocationHandleType handle_type)
{
  memset (pool, 0, sizeof *pool);
  pool->drv = drv;
  pool->handle = handle;
  pool->owned = owned;
  pool->location = *location;
  pool->device = device;
  pool->handle_type = handle_type;
  pool->share_fd = -1;
  pool->size_limit = G_MAXUINT64;
  pool->fast_size = G_MAXSIZE;
  make_pool_id (pool->pool_id);
  g_mutex_init (&pool->access_lock);
}

/**
 * pool_init:
 * @pool: (out caller-allocates): the pool to set up
 * @config: what to set up
 * @error: return location for a #GError
 *
 * Creates a new pool (@config->create, cuMemPoolCreate with a zeroed `CUmemPoolProps`:
 * @config->alloc_type allocations (pinned or managed), @config->location, @config->handle_type,
 * @config->max_size) or wraps the location's current pool (cuDeviceGetMemPool for a device's
 * pinned pool, cuMemGetMemPool for a host location or a managed pool), then applies the
 * attributes of @config with cuMemPoolSetAttribute. When a current pool is wrapped and @config
 * gives no release threshold, a threshold of 0 is raised to G_MAXUINT64 (read with
 * cuMemPoolGetAttribute): the driver's default 0 releases memory at every synchronization and
 * makes allocation slow. That raise lasts while a #PoolRecord of this plugin wraps the pool:
 * pool_destroy() of the last one sets the threshold back to 0 (unless someone set
 * another value meanwhile). Attributes @config gives explicitly stay as set: they change the
 * shared pool for every user, for the life of the process. Shareable pools also get
 * @device_uuid (cuDeviceGetUuid) and are exported once (cuMemPoolExportToShareableHandle): a
 * POSIX-fd pool into @share_fd, a pool of fabric handles into @fabric (a process without an
 * IMEX channel gets `CUDA_ERROR_NOT_PERMITTED` there: the probe of `ipc`'s handle_type=fabric). The
 * caller checks beforehand that the device exists (memres_cuda_check_device()) and supports pools
 * (pool_check_supported()).
 *
 * On failure nothing is left: a pool created here is destroyed again.
 *
 * Returns: %TRUE on success; %FALSE with @error set: %MEMRES_ERROR_NO_DRIVER, a
 *   %MEMRES_CUDA_ERROR of the failing call, %MEMRES_ERROR_OUT_OF_MEMORY when cuMemPoolCreate
 *   runs out of memory, %MEMRES_ERROR_NOT_SUPPORTED for a host location's current pool with a
 *   driver older than CUDA 13.
 */
gboolean
pool_init (PoolRecord *pool, const PoolConfig *config, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  CUmemoryPool handle = NULL;
  CUresult r;

  memset (pool, 0, sizeof *pool);
  if (drv == NULL)
    return FALSE;

  if (config->create)
    {
      CUmemPoolProps props;

      memset (&props, 0, sizeof props);
      props.allocType = config->alloc_type;
      props.handleTypes = config->handle_type;
      props.location = config->location;
      props.maxSize = (size_t) MIN (config->max_size, (guint64) G_MAXSIZE);
      r = drv->cuMemPoolCreate (&handle, &props);
      if (r != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuMemPoolCreate");
    }
  else if (!get_current_pool (drv, config, &handle, error))
    return FALSE;

  pool_init_for_handle (pool, drv, handle, config->create, &config->location, config->device,
                        config->handle_type);
  if (config->create && config->max_size > 0)
    {
      pool->max_size = config->max_size;
      pool->counted = TRUE;
      pool->fast_size = 0;
    }

  if (!config->create)
    {
      /* one more user of the shared pool: its threshold is checked and raised under the lock,
       * so that two wraps at once raise it once and the last user restores it */
      gboolean ok;

      g_mutex_lock (&shared_lock);
      shared_pool_get (handle)->users++;
      pool->shared = TRUE;
      ok = apply_attributes (pool, config, error);
      g_mutex_unlock (&shared_lock);
      if (!ok)
        goto fail;
    }
  else if (!apply_attributes (pool, config, error))
    goto fail;
  if (config->handle_type != CU_MEM_HANDLE_TYPE_NONE
      && !memres_cuda_get_device_uuid (config->device, pool->device_uuid, error))
    goto fail;
  if (config->create && config->handle_type == CU_MEM_HANDLE_TYPE_FABRIC)
    {
      /* the driver decides here whether this process may share fabric handles (an IMEX
       * channel: the H200 machine refuses with CUDA_ERROR_NOT_PERMITTED) */
      r = drv->cuMemPoolExportToShareableHandle (&pool->fabric, handle, CU_MEM_HANDLE_TYPE_FABRIC,
                                                 0);
      if (r != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemPoolExportToShareableHandle");
          goto fail;
        }
    }
  if (config->create && config->handle_type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    {
      int fd = -1;

      r = drv->cuMemPoolExportToShareableHandle (&fd, handle,
                                                 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      if (r != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemPoolExportToShareableHandle");
          goto fail;
        }
      pool->share_fd = fd;
    }
  return TRUE;

fail:
  pool_destroy (pool);
  return FALSE;
}

/* Grants of peer access survive in the driver beyond the pool: a pool created later can get
 * the same handle and inherit them. Revoke every grant made here before destroying. */
static void
revoke_peers (PoolRecord *pool)
{
  CUmemAccessDesc descs[64];
  guint n = 0;

  for (gint d = 0; d < 64; d++)
    if (pool->peers_granted & (G_GUINT64_CONSTANT (1) << d))
      {
        descs[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        descs[n].location.id = d;
        descs[n].flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        n++;
      }
  if (n > 0)
    (void) pool->drv->cuMemPoolSetAccess (pool->handle, descs, n);
  pool->peers_granted = 0;
}

/**
 * pool_destroy:
 * @pool: a record set up with pool_init(), pool_init_import() or pool_use_other(), or zeroed
 *
 * Releases @pool: nothing for an instance of another implementation (pool_use_other()); an
 * owned pool is destroyed (peer grants made with pool_set_access()
 * revoked first, then cuMemPoolDestroy); a wrapped current pool is left to the driver, except
 * that the last user of it gives back the release threshold pool_init() raised
 * (cuMemPoolGetAttribute, cuMemPoolSetAttribute). Call it
 * only when no allocation of the pool is live. Failures (`CUDA_ERROR_DEINITIALIZED` at process
 * exit, for example) are ignored: there is nobody to report them to. Leaves @pool zeroed, so a
 * second call does nothing. Not thread-safe.
 */
void
pool_destroy (PoolRecord *pool)
{
  if (pool->drv == NULL)
    {
      memset (pool, 0, sizeof *pool);
      return;
    }
  if (pool->owned && pool->handle != NULL)
    {
      revoke_peers (pool);
      (void) pool->drv->cuMemPoolDestroy (pool->handle);
    }
  if (pool->shared)
    shared_pool_release (pool);
  if (pool->share_fd >= 0)
    close (pool->share_fd);
  g_mutex_clear (&pool->access_lock);
  memset (pool, 0, sizeof *pool);
}

/**
 * pool_use_other:
 * @pool: the zero-filled record of a new instance
 * @other: the kind's implementation that is not a pool (static)
 * @device: the device of @other's contexts
 * @max_size: the most bytes of live buffers (0: no limit), enforced here
 * @no_pool: the message of the slots that need a pool (access, sharing), naming what to use
 *   instead (static)
 *
 * Makes the instance one of the kind's other implementation, chosen once at init: the
 * allocate and deallocate slots make every call with @other's driver calls (through their
 * checked path, which counts the bytes of live buffers for the statistics and @max_size;
 * pool-other.c), pool_get_stats() reports
 * those counts (reserved = used), pool_trim() has nothing to do, the pool-only slots fail with
 * %MEMRES_ERROR_NOT_SUPPORTED and @no_pool, and pool_finalize() releases nothing. Makes no
 * driver call.
 */
void
pool_use_other (PoolRecord *pool, const PoolOther *other, gint device, guint64 max_size,
                const char *no_pool)
{
  memset (pool, 0, sizeof *pool);
  pool->other = other;
  pool->device = device;
  pool->no_pool = no_pool;
  pool->max_size = max_size;
  pool->counted = TRUE;
  pool->size_limit = G_MAXUINT64;
  pool->share_fd = -1;
  pool->fast_size = 0;
}

/**
 * pool_set_size_limit:
 * @pool: a record set up by pool_init() or pool_use_other()
 * @size_limit: the largest single allocation, in bytes
 * @what: what @size_limit is, for the error of a larger request (static), e.g. "the host's
 *   physical memory"
 *
 * Makes the allocate slot refuse a request above @size_limit with %MEMRES_ERROR_OUT_OF_MEMORY
 * before any driver call (page-locked memory cannot exceed the host's memory, say). Requests
 * up to it stay on the fast path.
 */
void
pool_set_size_limit (PoolRecord *pool, guint64 size_limit, const char *what)
{
  pool->size_limit = size_limit;
  pool->size_limit_what = what;
  pool->fast_size = MIN (pool->fast_size, (gsize) MIN (size_limit, (guint64) G_MAXSIZE));
}

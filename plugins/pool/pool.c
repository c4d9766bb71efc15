/* memres - CUDA memory resources
 * pool.c: stream-ordered driver memory pools shared by the dmr, ipc and pinned kinds. */
#include "pool.h"

#include <unistd.h>

const char *const memres_pool_choices_[] = { "current", "new", NULL };

/* The legacy default stream is never captured (capture on it is refused by the driver), so
 * allocation on it needs no capture check. Every other stream, the per-thread default stream
 * included, may be capturing. */
static inline gboolean
stream_may_capture (MemresStream stream)
{
  return stream != NULL && stream != (MemresStream) CU_STREAM_LEGACY;
}

/**
 * memres_pool_config_init_device:
 * @config: (out caller-allocates): the configuration to fill
 * @device: a device ordinal
 *
 * Fills @config for the current pool of device @device, every attribute left to the driver.
 */
void
memres_pool_config_init_device (MemresPoolConfig *config, gint device)
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
}

/**
 * memres_pool_config_init_host:
 * @config: (out caller-allocates): the configuration to fill
 * @type: `CU_MEM_LOCATION_TYPE_HOST` or `CU_MEM_LOCATION_TYPE_HOST_NUMA`
 * @numa_id: the NUMA node for `CU_MEM_LOCATION_TYPE_HOST_NUMA` (ignored for HOST)
 * @device: the device whose primary context allocation on the %NULL stream falls back to
 *
 * Fills @config for the current pool of a host location, every attribute left to the driver.
 */
void
memres_pool_config_init_host (MemresPoolConfig *config, CUmemLocationType type, gint numa_id,
                              gint device)
{
  memres_pool_config_init_device (config, device);
  config->location.type = type;
  config->location.id = type == CU_MEM_LOCATION_TYPE_HOST_NUMA ? numa_id : 0;
}

/**
 * memres_pool_config_set_options:
 * @config: a configuration from memres_pool_config_init_device() or _init_host()
 * @options: the validated options of the resource being created (transfer none)
 * @which: the option groups the kind's schema holds
 * @error: return location for a #GError
 *
 * Reads the pool options into @config. Makes no driver call.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_INVALID_ARGUMENT when `max_size` is
 *   given for a current pool (it applies to new pools only), or is 0.
 */
gboolean
memres_pool_config_set_options (MemresPoolConfig *config, const MemresOptions *options,
                                MemresPoolOptions which, GError **error)
{
  static const char *const reuse_keys[] = {
    "reuse_follow_event_dependencies",
    "reuse_allow_opportunistic",
    "reuse_allow_internal_dependencies",
  };
  gint *reuse_fields[] = {
    &config->reuse_follow_event_dependencies,
    &config->reuse_allow_opportunistic,
    &config->reuse_allow_internal_dependencies,
  };

  if (which & MEMRES_POOL_OPTIONS_POOL)
    config->create = g_strcmp0 (memres_options_get_string (options, "pool"), "new") == 0;

  if (!(which & MEMRES_POOL_OPTIONS_ATTRIBUTES))
    return TRUE;

  if (memres_options_is_set (options, "max_size"))
    {
      guint64 max_size = memres_options_get_size (options, "max_size");

      if (!config->create)
        return g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                                    "max_size applies to new pools only: add pool=new"),
               FALSE;
      if (max_size == 0)
        return g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                                    "max_size must be at least 1 byte (leave it unset for the "
                                    "driver's default)"),
               FALSE;
      config->max_size = max_size;
    }

  if (memres_options_is_set (options, "release_threshold"))
    {
      config->release_threshold_set = TRUE;
      config->release_threshold = memres_options_get_size (options, "release_threshold");
    }

  for (guint i = 0; i < G_N_ELEMENTS (reuse_keys); i++)
    if (memres_options_is_set (options, reuse_keys[i]))
      *reuse_fields[i] = memres_options_get_bool (options, reuse_keys[i]) ? 1 : 0;

  return TRUE;
}

/**
 * memres_pool_check_supported:
 * @config: the configuration to check
 * @supported: (out): whether @config->device supports pools at @config->location with
 *   @config->handle_type
 * @error: return location for a #GError
 *
 * Asks the driver whether a pool as described by @config can be used: the device attribute
 * `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED` (device locations),
 * `CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED` (HOST) or
 * `CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED` (HOST_NUMA), and for a shareable
 * handle type `CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES`. The device must exist:
 * check it first with memres_cuda_check_device(). Driver calls: cuDeviceGet,
 * cuDeviceGetAttribute.
 *
 * Returns: %TRUE when the question was answered (@supported is set); %FALSE with
 *   %MEMRES_ERROR_NO_DRIVER or a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
memres_pool_check_supported (const MemresPoolConfig *config, gboolean *supported, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  CUdevice dev;
  CUdevice_attribute attr;
  CUresult r;
  int value = 0;

  if (drv == NULL)
    return FALSE;
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

  r = drv->cuDeviceGet (&dev, config->device);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  r = drv->cuDeviceGetAttribute (&value, attr, dev);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGetAttribute");
  if (value == 0)
    return TRUE;

  if (config->handle_type != CU_MEM_HANDLE_TYPE_NONE)
    {
      r = drv->cuDeviceGetAttribute (&value, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES,
                                     dev);
      if (r != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuDeviceGetAttribute");
      if (((guint) value & (guint) config->handle_type) != (guint) config->handle_type)
        return TRUE;
    }

  *supported = TRUE;
  return TRUE;
}

/**
 * memres_pool_set_alloc_error:
 * @error: return location for a #GError
 * @result: the failed driver call's result
 * @call: the driver call's name
 * @size: the bytes asked for, or 0 when the call allocates no buffer (pool creation)
 *
 * Sets @error for a failed allocation: `CUDA_ERROR_OUT_OF_MEMORY` becomes
 * %MEMRES_ERROR_OUT_OF_MEMORY with the driver's message (and the size when not 0); any other
 * result a %MEMRES_CUDA_ERROR.
 *
 * Returns: %FALSE
 */
gboolean
memres_pool_set_alloc_error (GError **error, CUresult result, const char *call, gsize size)
{
  GError *cuda_error = NULL;

  if (result != CUDA_ERROR_OUT_OF_MEMORY)
    return memres_cuda_set_error (error, result, call);

  memres_cuda_set_error (&cuda_error, result, call);
  if (size > 0)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                 "cannot allocate %" G_GSIZE_FORMAT " bytes: %s", size, cuda_error->message);
  else
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "out of memory: %s",
                 cuda_error->message);
  g_error_free (cuda_error);
  return FALSE;
}

static gboolean
set_attribute (MemresPool *pool, CUmemPool_attribute attr, void *value, GError **error)
{
  CUresult r = pool->drv->cuMemPoolSetAttribute (pool->handle, attr, value);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolSetAttribute");
  return TRUE;
}

static gboolean
get_attribute (MemresPool *pool, CUmemPool_attribute attr, void *value, GError **error)
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
get_attribute_u64 (MemresPool *pool, CUmemPool_attribute attr, guint64 *value, GError **error)
{
  cuuint64_t u = 0;
  int i = 0;

  if (!get_attribute (pool, attr, attribute_is_int (attr) ? (void *) &i : (void *) &u, error))
    return FALSE;
  *value = attribute_is_int (attr) ? (guint64) i : u;
  return TRUE;
}

static gboolean
set_attribute_u64 (MemresPool *pool, CUmemPool_attribute attr, guint64 value, GError **error)
{
  cuuint64_t u = value;
  int i = (int) value;

  return set_attribute (pool, attr, attribute_is_int (attr) ? (void *) &i : (void *) &u, error);
}

typedef struct
{
  CUmemPool_attribute attr;
  guint64 value;
  guint64 old; /* a shared pool's value before, to restore on failure */
} AttributeChange;

static gboolean
apply_attributes (MemresPool *pool, const MemresPoolConfig *config, GError **error)
{
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
        changes[n++] = (AttributeChange){ CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, G_MAXUINT64, 0 };
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
    return TRUE;
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
get_current_pool (const MemresCudaDriver *drv, const MemresPoolConfig *config, CUmemoryPool *handle,
                  GError **error)
{
  CUmemLocation location = config->location;
  CUdevice dev;
  CUresult r;

  if (config->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    {
      if (drv->cuMemGetMemPool == NULL)
        return g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                                    "the CUDA driver has no cuMemGetMemPool (CUDA 13 or newer "
                                    "is needed for the current pool of a host location)"),
               FALSE;
      r = drv->cuMemGetMemPool (handle, &location, CU_MEM_ALLOCATION_TYPE_PINNED);
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
 * memres_pool_init_for_handle:
 * @pool: (out caller-allocates): the pool to set up
 * @drv: the driver table
 * @handle: a driver pool
 * @owned: whether memres_pool_destroy() destroys @handle
 * @location: where the pool's memory lives
 * @device: the device whose primary context allocation falls back to
 * @handle_type: the pool's shareable handle types
 *
 * Sets up @pool around an existing driver pool (an imported one, for example) without any
 * driver call. @pool_id is random and @device_uuid zero: an importer overwrites them.
 * Undo with memres_pool_destroy().
 */
void
memres_pool_init_for_handle (MemresPool *pool, const MemresCudaDriver *drv, CUmemoryPool handle,
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
  make_pool_id (pool->pool_id);
  g_mutex_init (&pool->access_lock);
}

/**
 * memres_pool_init:
 * @pool: (out caller-allocates): the pool to set up
 * @config: what to set up
 * @error: return location for a #GError
 *
 * Creates a new pool (@config->create, cuMemPoolCreate with a zeroed `CUmemPoolProps`:
 * pinned allocations, @config->location, @config->handle_type, @config->max_size) or wraps the
 * location's current pool (cuDeviceGetMemPool for a device, cuMemGetMemPool for a host
 * location), then applies the attributes of @config with cuMemPoolSetAttribute. When a
 * current pool is wrapped and @config gives no release threshold, a threshold of 0 is raised
 * to G_MAXUINT64 (read with cuMemPoolGetAttribute): the driver's default 0 releases memory at
 * every synchronization and makes allocation slow. Shareable pools also get @device_uuid
 * (cuDeviceGetUuid). The caller checks beforehand that the device exists
 * (memres_cuda_check_device()) and supports pools (memres_pool_check_supported()).
 *
 * On failure nothing is left: a pool created here is destroyed again.
 *
 * Returns: %TRUE on success; %FALSE with @error set: %MEMRES_ERROR_NO_DRIVER, a
 *   %MEMRES_CUDA_ERROR of the failing call, %MEMRES_ERROR_OUT_OF_MEMORY when cuMemPoolCreate
 *   runs out of memory, %MEMRES_ERROR_NOT_SUPPORTED for a host location's current pool with a
 *   driver older than CUDA 13.
 */
gboolean
memres_pool_init (MemresPool *pool, const MemresPoolConfig *config, GError **error)
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
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.handleTypes = config->handle_type;
      props.location = config->location;
      props.maxSize = (size_t) MIN (config->max_size, (guint64) G_MAXSIZE);
      r = drv->cuMemPoolCreate (&handle, &props);
      if (r != CUDA_SUCCESS)
        return memres_pool_set_alloc_error (error, r, "cuMemPoolCreate", 0);
    }
  else if (!get_current_pool (drv, config, &handle, error))
    return FALSE;

  memres_pool_init_for_handle (pool, drv, handle, config->create, &config->location, config->device,
                               config->handle_type);

  if (!apply_attributes (pool, config, error))
    goto fail;
  if (config->handle_type != CU_MEM_HANDLE_TYPE_NONE
      && !memres_cuda_get_device_uuid (config->device, pool->device_uuid, error))
    goto fail;
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
  memres_pool_destroy (pool);
  return FALSE;
}

/* Grants of peer access survive in the driver beyond the pool: a pool created later can get
 * the same handle and inherit them. Revoke every grant made here before destroying. */
static void
revoke_peers (MemresPool *pool)
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
 * memres_pool_destroy:
 * @pool: a pool set up with memres_pool_init() or memres_pool_init_for_handle(), or zeroed
 *
 * Releases @pool: an owned pool is destroyed (peer grants made with memres_pool_set_access()
 * revoked first, then cuMemPoolDestroy); a wrapped current pool is left to the driver. Call it
 * only when no allocation of the pool is live. Failures (`CUDA_ERROR_DEINITIALIZED` at process
 * exit, for example) are ignored: there is nobody to report them to. Leaves @pool zeroed, so a
 * second call does nothing. Not thread-safe.
 */
void
memres_pool_destroy (MemresPool *pool)
{
  if (pool->drv == NULL)
    return;
  if (pool->owned && pool->handle != NULL)
    {
      revoke_peers (pool);
      (void) pool->drv->cuMemPoolDestroy (pool->handle);
    }
  if (pool->share_fd >= 0)
    close (pool->share_fd);
  g_mutex_clear (&pool->access_lock);
  memset (pool, 0, sizeof *pool);
}

static gboolean
allocate_checked (MemresPool *pool, gsize size, MemresStream stream, CUdeviceptr *ptr,
                  GError **error)
{
  CUresult r;

  if (stream_may_capture (stream) && !memres_cuda_check_stream_not_capturing (stream, error))
    return FALSE;
  r = pool->drv->cuMemAllocFromPoolAsync (ptr, size, pool->handle, stream);
  if (r != CUDA_SUCCESS)
    return memres_pool_set_alloc_error (error, r, "cuMemAllocFromPoolAsync", size);
  return TRUE;
}

/* Whether a context was current on this thread when memres last looked (or memres made one
 * current): the allocate/free hot path then calls the driver at once. Without it, a thread that
 * has no current context would see its first call fail with CUDA_ERROR_INVALID_CONTEXT, a failing
 * API call that compute-sanitizer reports. */
static __thread gboolean thread_has_context;

static gboolean
ensure_thread_context (MemresPool *pool, GError **error)
{
  if (!memres_cuda_ensure_context (pool->device, error))
    return FALSE;
  thread_has_context = TRUE;
  return TRUE;
}

/**
 * memres_pool_ensure_context:
 * @pool: a pool
 * @error: return location for a #GError
 *
 * Makes sure that a context is current on the calling thread before a driver call that needs one
 * (memres_cuda_ensure_context() the first time on a thread; nothing after that). Thread-safe.
 *
 * Returns: %TRUE when a context is current; %FALSE with @error set otherwise.
 */
gboolean
memres_pool_ensure_context (MemresPool *pool, GError **error)
{
  return G_LIKELY (thread_has_context) || ensure_thread_context (pool, error);
}

/**
 * memres_pool_allocate:
 * @pool: a pool
 * @size: bytes to allocate, more than 0
 * @stream: the stream that orders the allocation; %NULL is the legacy default stream of the
 *   calling thread's current context
 * @address: (out): the allocation's address
 * @error: return location for a #GError
 *
 * Allocates @size bytes from @pool ordered on @stream (cuMemAllocFromPoolAsync): work on
 * @stream after this call may use the memory; other streams must wait for @stream (an event).
 * A stream that is capturing a graph is refused (cuStreamIsCapturing; the legacy stream, which
 * cannot capture, is not asked): the driver would turn the allocation into a graph node whose
 * memory belongs to the graph, not to @pool. The first call on a thread makes sure a context is
 * current (memres_cuda_ensure_context(): cuCtxGetCurrent(), and the primary context of @pool's
 * device made current when there is none), so that no driver call of a successful allocation
 * fails; later calls on the thread make only the allocation's calls. Should the application
 * take the thread's context away after that (`CUDA_ERROR_INVALID_CONTEXT`), the context is
 * made current again and the allocation tried once more. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with @error set: %MEMRES_ERROR_OUT_OF_MEMORY (the device
 *   or the pool's max_size is exhausted), the error of memres_cuda_check_stream_not_capturing()
 *   for a capturing stream, a %MEMRES_CUDA_ERROR for any other driver failure.
 */
gboolean
memres_pool_allocate (MemresPool *pool, gsize size, MemresStream stream, guint64 *address,
                      GError **error)
{
  const MemresCudaDriver *drv = pool->drv;
  const char *call = "cuStreamIsCapturing";
  gboolean capturing = FALSE;
  CUdeviceptr ptr = 0;
  CUresult r = CUDA_SUCCESS;

  if (G_UNLIKELY (!thread_has_context) && !ensure_thread_context (pool, error))
    return FALSE;
  if (stream_may_capture (stream) && drv->cuStreamIsCapturing != NULL)
    {
      CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;

      r = drv->cuStreamIsCapturing (stream, &status);
      capturing = r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
    }
  if (G_LIKELY (r == CUDA_SUCCESS && !capturing))
    {
      call = "cuMemAllocFromPoolAsync";
      r = drv->cuMemAllocFromPoolAsync (&ptr, size, pool->handle, stream);
      if (G_LIKELY (r == CUDA_SUCCESS))
        {
          *address = ptr;
          return TRUE;
        }
    }

  /* Slow path. The application took the context away: make one current and try again with
   * every check; a capturing stream gets its error from the core's check. */
  if (r == CUDA_ERROR_INVALID_CONTEXT)
    {
      if (!ensure_thread_context (pool, error))
        return FALSE;
    }
  else if (!capturing)
    return memres_pool_set_alloc_error (error, r, call, size);

  if (!allocate_checked (pool, size, stream, &ptr, error))
    return FALSE;
  *address = ptr;
  return TRUE;
}

/**
 * memres_pool_free:
 * @pool: a pool
 * @address: an address memres_pool_allocate() returned
 * @stream: the stream that orders the free (%NULL: the legacy default stream)
 * @error: return location for a #GError
 *
 * Frees @address ordered on @stream (cuMemFreeAsync). The memory may be reused by work ordered
 * after the free; the caller orders the free after all work using the memory, on any stream
 * (for work on another stream: cuEventRecord there, cuStreamWaitEvent on @stream; the core does
 * that for a buffer closed on another stream than its own). A thread without a current context
 * gets the primary context of @pool's device, as in memres_pool_allocate().
 * `CUDA_ERROR_DEINITIALIZED` (the driver is shutting down at process exit, the memory is gone
 * anyway) counts as success. When the free fails (an invalid or destroyed stream) nothing is
 * freed: the core keeps the buffer open, so that it can be closed again on a live stream (the
 * deallocate slot's contract). Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise (the memory is still
 *   allocated).
 */
gboolean
memres_pool_free (MemresPool *pool, guint64 address, MemresStream stream, GError **error)
{
  CUresult r;

  if (G_UNLIKELY (!thread_has_context) && !ensure_thread_context (pool, error))
    return FALSE;
  r = pool->drv->cuMemFreeAsync ((CUdeviceptr) address, stream);
  if (G_LIKELY (r == CUDA_SUCCESS))
    return TRUE;
  if (r == CUDA_ERROR_INVALID_CONTEXT)
    {
      if (!ensure_thread_context (pool, error))
        return FALSE;
      r = pool->drv->cuMemFreeAsync ((CUdeviceptr) address, stream);
    }
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_DEINITIALIZED)
    return TRUE;
  return memres_cuda_set_error (error, r, "cuMemFreeAsync");
}

/**
 * memres_pool_get_stats:
 * @pool: a pool
 * @stats: (out caller-allocates): filled but for @n_buffers, which is left alone
 * @error: return location for a #GError
 *
 * Reads the pool's statistics with cuMemPoolGetAttribute: RESERVED_MEM_CURRENT,
 * RESERVED_MEM_HIGH, USED_MEM_CURRENT, USED_MEM_HIGH (bytes). A shared current pool counts
 * every user's allocations, not just this resource's. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
memres_pool_get_stats (MemresPool *pool, MemresStats *stats, GError **error)
{
  const struct
  {
    CUmemPool_attribute attr;
    guint64 *out;
  } fields[] = {
    { CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &stats->reserved_current },
    { CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &stats->reserved_high },
    { CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &stats->used_current },
    { CU_MEMPOOL_ATTR_USED_MEM_HIGH, &stats->used_high },
  };

  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      cuuint64_t value = 0;

      if (!get_attribute (pool, fields[i].attr, &value, error))
        return FALSE;
      *fields[i].out = value;
    }
  return TRUE;
}

/**
 * memres_pool_reset_stats:
 * @pool: a pool
 * @error: return location for a #GError
 *
 * Resets the high-water marks to the current values: cuMemPoolSetAttribute of
 * RESERVED_MEM_HIGH and USED_MEM_HIGH to 0, the only value the driver accepts. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
memres_pool_reset_stats (MemresPool *pool, GError **error)
{
  cuuint64_t zero = 0;

  return set_attribute (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero, error)
         && set_attribute (pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero, error);
}

/**
 * memres_pool_trim:
 * @pool: a pool
 * @bytes_to_keep: bytes of unused memory the pool may keep reserved
 * @error: return location for a #GError
 *
 * Returns unused memory to the system (cuMemPoolTrimTo), keeping at least @bytes_to_keep bytes
 * reserved. Memory whose free is still pending on a stream is not unused yet: synchronize
 * first. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
memres_pool_trim (MemresPool *pool, gsize bytes_to_keep, GError **error)
{
  CUresult r = pool->drv->cuMemPoolTrimTo (pool->handle, bytes_to_keep);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolTrimTo");
  return TRUE;
}

/**
 * memres_pool_get_release_threshold:
 * @pool: a pool
 * @bytes: (out): the release threshold in bytes (G_MAXUINT64: keep everything)
 * @error: return location for a #GError
 *
 * Reads CU_MEMPOOL_ATTR_RELEASE_THRESHOLD with cuMemPoolGetAttribute. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
memres_pool_get_release_threshold (MemresPool *pool, guint64 *bytes, GError **error)
{
  cuuint64_t value = 0;

  if (!get_attribute (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value, error))
    return FALSE;
  *bytes = value;
  return TRUE;
}

static gboolean
access_is_valid (MemresAccess access)
{
  return access == MEMRES_ACCESS_NONE || access == MEMRES_ACCESS_READ
         || access == MEMRES_ACCESS_READWRITE;
}

/* Whether @device is the device the pool's memory lives on (always has access). */
static gboolean
is_owner (MemresPool *pool, gint device)
{
  return pool->location.type == CU_MEM_LOCATION_TYPE_DEVICE && pool->location.id == device;
}

static gboolean
check_peer (MemresPool *pool, gint device, GError **error)
{
  CUdevice dev, owner;
  int can = 0;
  CUresult r;

  if (pool->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return TRUE; /* host memory: every device may be granted access */
  r = pool->drv->cuDeviceGet (&dev, device);
  if (r == CUDA_SUCCESS)
    r = pool->drv->cuDeviceGet (&owner, pool->location.id);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  r = pool->drv->cuDeviceCanAccessPeer (&can, dev, owner);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceCanAccessPeer");
  if (!can)
    return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                        "device %d cannot access the memory of device %d (no peer access)", device,
                        pool->location.id),
           FALSE;
  return TRUE;
}

/**
 * memres_pool_set_access:
 * @pool: a pool
 * @descs: (array length=n_descs): the access each device gets
 * @n_descs: entries in @descs
 * @error: return location for a #GError
 *
 * Grants or revokes access of devices to the pool's memory, all in ONE cuMemPoolSetAccess call
 * (each change updates every mapping of the pool and can take long). Every entry is checked
 * before the call: the device exists (memres_cuda_check_device()), the access is a
 * #MemresAccess value, a device named twice gets the same access both times, and a device
 * being granted access to a device pool can reach the owner (cuDeviceCanAccessPeer). The
 * owner's own entry is ignored: it always has read-write access. Nothing changes when a check
 * fails. Thread-safe (calls are serialized).
 *
 * Returns: %TRUE on success; %FALSE with @error set: %MEMRES_ERROR_NO_DEVICE (no such device),
 *   %MEMRES_ERROR_INVALID_ARGUMENT (bad access value, conflicting duplicates),
 *   %MEMRES_ERROR_NOT_SUPPORTED (no peer access between the devices), %MEMRES_CUDA_ERROR.
 */
gboolean
memres_pool_set_access (MemresPool *pool, const MemresAccessDesc *descs, guint n_descs,
                        GError **error)
{
  g_autofree CUmemAccessDesc *map = g_new0 (CUmemAccessDesc, MAX (n_descs, 1));
  guint64 granted = 0, revoked = 0;
  guint n = 0;
  CUresult r;

  g_return_val_if_fail (descs != NULL || n_descs == 0, FALSE);

  for (guint i = 0; i < n_descs; i++)
    {
      gint device = descs[i].device;
      gboolean dup = FALSE;

      if (!memres_cuda_check_device (device, error))
        return FALSE;
      if (!access_is_valid (descs[i].access))
        return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                            "invalid access %d for device %d (valid: none 0, read 1, "
                            "readwrite 3)",
                            (int) descs[i].access, device),
               FALSE;
      if (is_owner (pool, device))
        continue;
      for (guint j = 0; j < n; j++)
        if (map[j].location.id == device)
          {
            if ((MemresAccess) map[j].flags != descs[i].access)
              return g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                                  "device %d is given two different accesses", device),
                     FALSE;
            dup = TRUE;
          }
      if (dup)
        continue;
      if (descs[i].access != MEMRES_ACCESS_NONE && !check_peer (pool, device, error))
        return FALSE;

      map[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      map[n].location.id = device;
      map[n].flags = (CUmemAccess_flags) descs[i].access;
      n++;
      if (device < 64)
        {
          if (descs[i].access == MEMRES_ACCESS_NONE)
            revoked |= G_GUINT64_CONSTANT (1) << device;
          else
            granted |= G_GUINT64_CONSTANT (1) << device;
        }
    }

  if (n == 0)
    return TRUE;

  g_mutex_lock (&pool->access_lock);
  r = pool->drv->cuMemPoolSetAccess (pool->handle, map, n);
  if (r == CUDA_SUCCESS)
    pool->peers_granted = (pool->peers_granted & ~revoked) | granted;
  g_mutex_unlock (&pool->access_lock);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolSetAccess");
  return TRUE;
}

/**
 * memres_pool_get_access:
 * @pool: a pool
 * @device: a device ordinal
 * @access: (out): the access @device has to the pool's memory
 * @error: return location for a #GError
 *
 * Reads the access of @device with cuMemPoolGetAccess (the owner of a device pool always has
 * read-write access). Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with %MEMRES_ERROR_NO_DEVICE (no such device) or a
 *   %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
memres_pool_get_access (MemresPool *pool, gint device, MemresAccess *access, GError **error)
{
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  CUmemLocation location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device };
  CUresult r;

  if (!memres_cuda_check_device (device, error))
    return FALSE;
  r = pool->drv->cuMemPoolGetAccess (&flags, pool->handle, &location);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolGetAccess");
  *access = (MemresAccess) flags;
  return TRUE;
}

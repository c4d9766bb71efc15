/* memres - CUDA memory resources
 * pool-slots.c: the ready-made allocate, deallocate, statistics, trim and finalize slots of the
 * pool kinds. The fast path of allocate and deallocate is one comparison (PoolRecord.fast_size)
 * and the driver's calls; everything fixed at init that needs more (a size limit, max_size, an
 * imported pool, the kind's other implementation) is on the checked path. */
#include "pool-private.h"

/* The legacy default stream is never captured (capture on it is refused by the driver), so
 * allocation on it needs no capture check. Every other stream, the per-thread default stream
 * included, may be capturing. */
static inline gboolean
stream_may_capture (MemresStream stream)
{
  return stream != NULL && stream != (MemresStream) CU_STREAM_LEGACY;
}

/* Whether a context was current on this thread when memres last looked (or memres made one
 * current): the allocate/free hot path then calls the driver at once. Without it, a thread that
 * has no current context would see its first call fail with CUDA_ERROR_INVALID_CONTEXT, a failing
 * API call that compute-sanitizer reports. Initial-exec, as the cache's fronts: read without a
 * __tls_get_addr() call on every allocate and free. */
static __thread gboolean thread_has_context __attribute__ ((tls_model ("initial-exec")));

static gboolean
ensure_thread_context (PoolRecord *pool, GError **error)
{
  if (!memres_cuda_ensure_context (pool->device, error))
    return FALSE;
  thread_has_context = TRUE;
  return TRUE;
}

gboolean
pool_ensure_context (PoolRecord *pool, GError **error)
{
  return G_LIKELY (thread_has_context) || ensure_thread_context (pool, error);
}

/* An allocation after the stream's capture state was asked (memres_cuda_check_stream_not_capturing
 * sets the error of a capturing stream). */
static gboolean
allocate_capture_checked (PoolRecord *pool, gsize size, MemresStream stream, CUdeviceptr *ptr,
                          GError **error)
{
  CUresult r;

  if (stream_may_capture (stream) && !memres_cuda_check_stream_not_capturing (stream, error))
    return FALSE;
  r = pool->drv->cuMemAllocFromPoolAsync (ptr, size, pool->handle, stream);
  if (r != CUDA_SUCCESS)
    return alloc_error_set (error, r, "cuMemAllocFromPoolAsync", size);
  return TRUE;
}

/* @size bytes from the driver's pool, ordered on @stream (see pool_allocate()). Inlined into the
 * slot: the fast path makes no call but the driver's. */
static inline __attribute__ ((always_inline)) gboolean
driver_allocate (PoolRecord *pool, gsize size, MemresStream stream, guint64 *address,
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
    return alloc_error_set (error, r, call, size);

  if (!allocate_capture_checked (pool, size, stream, &ptr, error))
    return FALSE;
  *address = ptr;
  return TRUE;
}

/* cuMemFreeAsync of @address on @stream (see pool_deallocate()), inlined as driver_allocate(). */
static inline __attribute__ ((always_inline)) gboolean
driver_free (PoolRecord *pool, guint64 address, MemresStream stream, GError **error)
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
  return release_result (error, r, "cuMemFreeAsync");
}

/* The bytes of live buffers, for max_size and for the statistics of an instance of the kind's
 * other implementation. max_size is enforced here, not left to the driver: the driver rounds a
 * small CUmemPoolProps.maxSize up and then serves more than was asked (on the H200, CUDA 13,
 * driver 580: a pool with maxSize 2 MiB served a 4 MiB allocation, one with 8 MiB took 4 +
 * 8 MiB; CUmemPoolProps documents no granularity). max_size bounds the bytes of live
 * allocations, as asked (the driver's 512-byte rounding is not counted); the driver still gets
 * maxSize, a bound on what it reserves. Returns the bytes in use with @size, 0 when refused. */
static guint64
count_charge (PoolRecord *pool, gsize size, GError **error)
{
  guint64 used = __atomic_add_fetch (&pool->used, (guint64) size, __ATOMIC_RELAXED);

  if (used >= size && (pool->max_size == 0 || used <= pool->max_size))
    return used;
  used = __atomic_sub_fetch (&pool->used, (guint64) size, __ATOMIC_RELAXED);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
               "cannot allocate %" G_GSIZE_FORMAT
               " byte%s: the pool's max_size is %" G_GUINT64_FORMAT " bytes and %" G_GUINT64_FORMAT
               " are in use",
               size, size == 1 ? "" : "s", pool->max_size, used);
  return 0;
}

/* An allocation that brought the count to @used succeeded: a new high-water mark maybe. */
static void
count_peak (PoolRecord *pool, guint64 used)
{
  guint64 high = __atomic_load_n (&pool->used_high, __ATOMIC_RELAXED);

  while (used > high
         && !__atomic_compare_exchange_n (&pool->used_high, &high, used, TRUE, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED))
    ;
}

static void
count_uncharge (PoolRecord *pool, gsize size)
{
  __atomic_sub_fetch (&pool->used, (guint64) size, __ATOMIC_RELAXED);
}

/* pool_allocate() for everything but a plain pool's fast path. */
static G_GNUC_NO_INLINE gboolean
allocate_checked (MemresResource *mr, PoolRecord *pool, gsize size, MemresStream stream,
                  MemresAllocation *alloc, GError **error)
{
  guint64 used = 0;
  gboolean ok;

  if (size > pool->size_limit)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "cannot allocate %" G_GSIZE_FORMAT " bytes: %s is %" G_GUINT64_FORMAT " bytes",
                   size, pool->size_limit_what, pool->size_limit);
      return FALSE;
    }
  if (pool->imported)
    {
      g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                           "a pool imported from another process cannot allocate: allocate "
                           "in the exporting process and import the buffer");
      return FALSE;
    }
  if (pool->counted && (used = count_charge (pool, size, error)) == 0)
    return FALSE;
  if (pool->other != NULL)
    ok = pool_other_allocate (mr, pool, size, alloc, error);
  else if ((ok = driver_allocate (pool, size, stream, &alloc->address, error)))
    alloc->size = size;
  if (pool->counted)
    {
      if (ok)
        count_peak (pool, used);
      else
        count_uncharge (pool, size);
    }
  return ok;
}

/**
 * pool_allocate:
 * @mr: an instance of a pool kind
 * @size: bytes to allocate, more than 0
 * @stream: the stream that orders the allocation; %NULL is the legacy default stream of the
 *   calling thread's current context
 * @alloc: (out caller-allocates): the allocation's address and @size
 * @error: return location for a #GError
 *
 * The allocate slot. Allocates @size bytes from the pool ordered on @stream
 * (cuMemAllocFromPoolAsync): work on @stream after this call may use the memory; other streams
 * must wait for @stream (an event). A stream that is capturing a graph is refused
 * (cuStreamIsCapturing; the legacy stream, which cannot capture, is not asked): the driver
 * would turn the allocation into a graph node whose memory belongs to the graph, not to the
 * pool. The first call on a thread makes sure a context is current
 * (memres_cuda_ensure_context(): cuCtxGetCurrent(), and the primary context of the pool's
 * device made current when there is none), so that no driver call of a successful allocation
 * fails; later calls on the thread make only the allocation's calls. Should the application
 * take the thread's context away after that (`CUDA_ERROR_INVALID_CONTEXT`), the context is
 * made current again and the allocation tried once more. Thread-safe.
 *
 * A pool created with a max_size (#PoolConfig) serves at most that many bytes of live
 * allocations, counted as asked, whatever the driver's own limit (see count_charge()). An
 * instance of the kind's other implementation (pool_use_other()) allocates with its ops
 * table's allocate, counted the same way.
 *
 * Returns: %TRUE on success; %FALSE with @error set: %MEMRES_ERROR_OUT_OF_MEMORY (the device
 *   or the pool's max_size is exhausted: the message gives the max_size and the bytes in use;
 *   or above the size limit, pool_set_size_limit()), %MEMRES_ERROR_NOT_SUPPORTED for an
 *   imported pool, the error of memres_cuda_check_stream_not_capturing() for a capturing
 *   stream, a %MEMRES_CUDA_ERROR for any other driver failure; those of the other
 *   implementation.
 */
gboolean
pool_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);

  if (G_UNLIKELY (size > pool->fast_size))
    return allocate_checked (mr, pool, size, stream, alloc, error);
  if (!driver_allocate (pool, size, stream, &alloc->address, error))
    return FALSE;
  alloc->size = size;
  return TRUE;
}

/* pool_deallocate() for everything but a plain pool's fast path. A failing free leaves the
 * memory allocated and the buffer open (to be closed again): its bytes stay counted until a free
 * succeeds. */
static G_GNUC_NO_INLINE gboolean
deallocate_checked (MemresResource *mr, PoolRecord *pool, MemresAllocation *alloc,
                    MemresStream stream, GError **error)
{
  gsize size = alloc->size;
  gboolean ok;

  if (pool->other != NULL)
    ok = pool_other_deallocate (mr, pool, alloc, error);
  else
    ok = driver_free (pool, alloc->address, stream, error);
  if (ok && pool->counted)
    count_uncharge (pool, size);
  return ok;
}

/**
 * pool_deallocate:
 * @mr: an instance of a pool kind
 * @alloc: an allocation pool_allocate() or pool_import_buffer() made
 * @stream: the stream that orders the free (%NULL: the legacy default stream)
 * @error: return location for a #GError
 *
 * The deallocate slot. Frees @alloc ordered on @stream (cuMemFreeAsync; an imported mapping is
 * unmapped the same way). The memory may be reused by work ordered after the free; the caller
 * orders the free after all work using the memory, on any stream (for work on another stream:
 * cuEventRecord there, cuStreamWaitEvent on @stream; the core does that for a buffer closed on
 * another stream than its own). A thread without a current context gets the primary context of
 * the pool's device, as in pool_allocate(). `CUDA_ERROR_DEINITIALIZED` (the driver is shutting
 * down at process exit, the memory is gone anyway) counts as success. When the free fails (an
 * invalid or destroyed stream) nothing is freed: the core keeps the buffer open, so that it can
 * be closed again on a live stream (the deallocate slot's contract). An instance of the kind's
 * other implementation frees with its ops table's deallocate. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise (the memory is still
 *   allocated).
 */
gboolean
pool_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);

  if (G_UNLIKELY (alloc->size > pool->fast_size))
    return deallocate_checked (mr, pool, alloc, stream, error);
  return driver_free (pool, alloc->address, stream, error);
}

/**
 * pool_get_stats:
 * @mr: an instance of a pool kind
 * @stats: (inout caller-allocates): the core's counts on entry; n_buffers is left alone
 * @error: return location for a #GError
 *
 * The get_stats slot of kinds registered with %MEMRES_KIND_OWN_USAGE. A pool: its statistics
 * from cuMemPoolGetAttribute: RESERVED_MEM_CURRENT, RESERVED_MEM_HIGH, USED_MEM_CURRENT,
 * USED_MEM_HIGH (bytes); a shared current pool counts every user's allocations, not just this
 * resource's. An instance of the kind's other implementation: the bytes of its live buffers
 * counted here, reserved = used (it holds nothing else). Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
pool_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);
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

  if (pool->other != NULL)
    {
      /* the high mark is raised after the count: read the count first */
      guint64 used = __atomic_load_n (&pool->used, __ATOMIC_RELAXED);

      stats->reserved_current = stats->used_current = used;
      stats->reserved_high = stats->used_high
          = MAX (__atomic_load_n (&pool->used_high, __ATOMIC_RELAXED), used);
      return TRUE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      cuuint64_t value = 0;

      if (!pool_get_attribute (pool, fields[i].attr, &value, error))
        return FALSE;
      *fields[i].out = value;
    }
  return TRUE;
}

/**
 * pool_snapshot:
 * @mr: an instance of a pool kind
 * @layer: the layer being described
 *
 * The snapshot slot: the driver's pool lists none of its blocks, so the layer says so, and adds
 * what the pool's attributes tell (RESERVED_MEM_CURRENT and USED_MEM_CURRENT as `pool_reserved`
 * and `pool_used`, RELEASE_THRESHOLD as `release_threshold`, in bytes; an attribute the driver
 * does not answer is left out). An instance of the kind's other implementation (no pool): the
 * bytes of its live buffers as `used`; the driver allocates each, and lists none. Thread-safe.
 */
void
pool_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  PoolRecord *pool = POOL_RECORD (mr);
  const struct
  {
    CUmemPool_attribute attr;
    const char *name;
  } fields[] = {
    { CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "pool_reserved" },
    { CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "pool_used" },
    { CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "release_threshold" },
  };

  if (pool->other != NULL)
    {
      memres_snapshot_add_figure (layer, "used", __atomic_load_n (&pool->used, __ATOMIC_RELAXED));
      memres_snapshot_set_unseen (layer, "each allocation is the driver's own; none is listed");
      return;
    }
  for (guint i = 0; i < G_N_ELEMENTS (fields); i++)
    {
      cuuint64_t value = 0;

      if (pool_get_attribute (pool, fields[i].attr, &value, NULL))
        memres_snapshot_add_figure (layer, fields[i].name, value);
    }
  memres_snapshot_set_unseen (layer, "the driver's memory pool lists none of its blocks: its "
                                     "reserved and used bytes are known, not where they lie");
}

/**
 * pool_explain_oom:
 * @mr: an instance of a pool kind
 * @figures: what the layer says of itself
 *
 * The explain_oom slot: a pool with a max_size (enforced here: count_charge()) reports it as its
 * limit and the bytes of its live buffers as what is counted against it, so that an allocation
 * the max_size refused gets the verdict "limit" and its remedy, not "exhausted" and a trim
 * (the bytes are in live buffers; the device may have plenty free). Nothing without a max_size.
 * Thread-safe.
 */
void
pool_explain_oom (MemresResource *mr, MemresOomFigures *figures)
{
  PoolRecord *pool = POOL_RECORD (mr);

  if (pool->max_size == 0)
    return;
  figures->limit = pool->max_size;
  figures->limit_used = __atomic_load_n (&pool->used, __ATOMIC_RELAXED);
}

/**
 * pool_reset_stats:
 * @mr: an instance of a pool kind
 * @error: return location for a #GError
 *
 * The reset_stats slot: the high-water marks come down to the current values. A pool:
 * cuMemPoolSetAttribute of RESERVED_MEM_HIGH and USED_MEM_HIGH to 0, the only value the driver
 * accepts. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
pool_reset_stats (MemresResource *mr, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);
  cuuint64_t zero = 0;

  if (pool->other != NULL)
    {
      __atomic_store_n (&pool->used_high, __atomic_load_n (&pool->used, __ATOMIC_RELAXED),
                        __ATOMIC_RELAXED);
      return TRUE;
    }
  return pool_set_attribute (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero, error)
         && pool_set_attribute (pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero, error);
}

/**
 * pool_trim:
 * @mr: an instance of a pool kind
 * @bytes_to_keep: bytes of unused memory the pool may keep reserved
 * @error: return location for a #GError
 *
 * The trim slot. Returns unused memory to the system (cuMemPoolTrimTo), keeping at least
 * @bytes_to_keep bytes reserved. Memory whose free is still pending on a stream is not unused
 * yet: synchronize first. An instance of the kind's other implementation holds nothing beyond
 * its buffers: nothing to do. Thread-safe.
 *
 * Returns: %TRUE on success; %FALSE with a %MEMRES_CUDA_ERROR otherwise.
 */
gboolean
pool_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  PoolRecord *pool = POOL_RECORD (mr);
  CUresult r;

  if (pool->other != NULL)
    return TRUE;
  r = pool->drv->cuMemPoolTrimTo (pool->handle, bytes_to_keep);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemPoolTrimTo");
  return TRUE;
}

/**
 * pool_finalize:
 * @mr: an instance of a pool kind
 *
 * The finalize slot: pool_destroy() of the instance's record. For kinds whose private data
 * holds nothing else to release.
 */
void
pool_finalize (MemresResource *mr)
{
  pool_destroy (POOL_RECORD (mr));
}

gboolean
pool_refuse_without_pool (const PoolRecord *pool, GError **error)
{
  g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, pool->no_pool);
  return FALSE;
}

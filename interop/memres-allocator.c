/* memres - CUDA memory resources
 * memres-allocator.c: libmemres-allocator, the functions PyTorch and CuPy load by name to use
 * memres as their allocator. Each device gets one resource, made on first use from an
 * environment variable; every live allocation is kept in a table sharded by pointer (a hash
 * picks the shard, a mutex of its own guards each), so that free finds the buffer from the
 * pointer alone, in any thread, without a scan and without a global lock. */
#include "memres-allocator-private.h"
#include "../sdk/file-writer.h"

#include <memres/memres-plugin.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One device's resource, made once. */
typedef struct
{
  GMutex lock;         /* held while the resource is made */
  MemresResource *mr;  /* set once under @lock; read with an atomic load */
  GError *failure;     /* why making it failed (logged once); no later try */
  gint failure_logged; /* an allocation failure was logged (atomic) */
  gint64 n_buffers;    /* live allocations (atomic builtins) */
} Device;

static Device devices[MEMRES_ALLOCATOR_MAX_DEVICES];

#define N_SHARDS 64 /* a power of 2 */

/* The live allocations whose pointers hash to one shard. The buffer itself is the value (no
 * record of our own: a malloc and a free less per pair); its device comes from its resource
 * (buffer_device()), and the streams record_stream named, which few buffers have, from a table
 * of their own. */
typedef struct
{
  GMutex lock;
  GHashTable *buffers;  /* pointer -> MemresBuffer (a reference owned); made on first use */
  GHashTable *recorded; /* pointer -> GArray of MemresStream (owned) from record_stream, for live
                         * pointers of @buffers only; NULL until used */
} __attribute__ ((aligned (64))) Shard;

static Shard shards[N_SHARDS];

static gint bad_call_logged;
static gint unknown_pointer_logged;
static gint close_failure_logged;

static Shard *
shard_for (gconstpointer ptr)
{
  guint64 h = (guint64) (guintptr) ptr;

  /* allocations are aligned: mix the high bits down before taking the top 6 bits */
  h ^= h >> 31;
  h *= G_GUINT64_CONSTANT (0x9e3779b97f4a7c15);
  return &shards[h >> (64 - 6)];
}

/* fork(): another thread of the parent may hold a shard's lock (or a device's, while it makes the
 * resource) at the fork, and the child, which has only the forking thread, would wait for it
 * forever at its first free of an inherited pointer (helper-128: 95-117 children of 300 hung
 * with four threads allocating). So the forking thread takes every lock first and releases them
 * in the parent and the child, as libmemres does with its own (core/fork.c). These handlers are
 * registered after libmemres's (the shim is loaded after the library it links), so their prepare
 * runs before libmemres's: a thread making a device's resource under its lock can still take
 * the core's locks and finish. Each lock here is held only around table operations or the
 * making of one resource. */
static void
on_prepare (void)
{
  for (guint d = 0; d < MEMRES_ALLOCATOR_MAX_DEVICES; d++)
    g_mutex_lock (&devices[d].lock);
  for (guint i = 0; i < N_SHARDS; i++)
    g_mutex_lock (&shards[i].lock);
}

static void
on_after (void)
{
  for (guint i = N_SHARDS; i-- > 0;)
    g_mutex_unlock (&shards[i].lock);
  for (guint d = MEMRES_ALLOCATOR_MAX_DEVICES; d-- > 0;)
    g_mutex_unlock (&devices[d].lock);
}

/* When the library is loaded (a dlclose() removes the handlers: glibc registers them with the
 * library's handle). */
__attribute__ ((constructor)) static void
fork_register (void)
{
  pthread_atfork (on_prepare, on_after, on_after);
}

/* Logs @error with g_warning() the first time @flag is raised, with g_debug() afterwards. */
static void
log_once (gint *flag, const char *what, const GError *error)
{
  if (g_atomic_int_compare_and_exchange (flag, 0, 1))
    g_warning ("memres allocator: %s: %s (further failures of this kind are logged at debug "
               "level)",
               what, error->message);
  else
    g_debug ("memres allocator: %s: %s", what, error->message);
}

/* The spec for @device: MEMRES_ALLOCATOR_RESOURCE_<device>, else MEMRES_ALLOCATOR_RESOURCE,
 * else MEMRES_ALLOCATOR_DEFAULT_SPEC, with `{device}` replaced by the ordinal. A variable set
 * to the empty string is unset, as memres reads MEMRES_CUDA_DRIVER, MEMRES_NCCL_LIBRARY and
 * MEMRES_OOM_SNAPSHOT (and torch an empty PYTORCH_CUDA_ALLOC_CONF): `VAR= prog` clears an
 * override; a blank one (spaces) is a spec, refused by memres_resource_new(). */
static char *
device_spec (int device)
{
  g_autofree char *own = g_strdup_printf ("MEMRES_ALLOCATOR_RESOURCE_%d", device);
  g_autofree char *ordinal = g_strdup_printf ("%d", device);
  const char *spec = g_getenv (own);
  g_auto (GStrv) parts = NULL;

  if (spec == NULL || spec[0] == '\0')
    spec = g_getenv ("MEMRES_ALLOCATOR_RESOURCE");
  if (spec == NULL || spec[0] == '\0')
    spec = MEMRES_ALLOCATOR_DEFAULT_SPEC;
  parts = g_strsplit (spec, "{device}", -1);
  return g_strjoinv (ordinal, parts);
}

static MemresResource *
make_resource (int device, GError **error)
{
  g_autofree char *spec = device_spec (device);
  g_autoptr (MemresResource) mr = memres_resource_new (spec, error);
  gint mr_device;

  if (mr == NULL)
    return NULL;
  /* torch and CuPy hand the pointer to kernels: memory no device can reach (pageable host
   * memory) is refused, as memory of another device is; page-locked and managed memory pass */
  if ((memres_resource_get_flags (mr) & MEMRES_MEMORY_DEVICE_ACCESSIBLE) == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "the resource '%s' gives memory that device %d cannot access (kind '%s'): "
                   "frameworks need device-accessible memory (device, pinned or managed)",
                   spec, device, memres_resource_get_kind_name (mr));
      return NULL;
    }
  mr_device = memres_resource_get_device (mr);
  if (mr_device >= 0 && mr_device != device)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE,
                   "the resource '%s' is of device %d, not of device %d (put {device} in the "
                   "spec, or set MEMRES_ALLOCATOR_RESOURCE_%d)",
                   spec, mr_device, device, device);
      return NULL;
    }
  return g_steal_pointer (&mr);
}

/* The resource of @device, made on first use; NULL when it cannot be made (logged once with
 * g_warning(); @error is set on every call, with the message of the first failure). */
static MemresResource *
device_resource (int device, GError **error)
{
  Device *d;
  MemresResource *mr;

  if (device < 0 || device >= MEMRES_ALLOCATOR_MAX_DEVICES)
    {
      g_autoptr (GError) local = g_error_new (MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                                              "device %d is not served (0 to %d are)", device,
                                              MEMRES_ALLOCATOR_MAX_DEVICES - 1);

      log_once (&bad_call_logged, "allocation", local);
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "memres allocator: ");
      return NULL;
    }
  d = &devices[device];
  mr = g_atomic_pointer_get (&d->mr);
  if (G_LIKELY (mr != NULL))
    return mr;

  g_mutex_lock (&d->lock);
  if (d->mr == NULL && d->failure == NULL)
    {
      g_autoptr (GError) local = NULL;

      mr = make_resource (device, &local);
      if (mr == NULL)
        {
          d->failure = g_error_copy (local);
          g_warning ("memres allocator: device %d: no resource: %s", device, local->message);
        }
      g_atomic_pointer_set (&d->mr, mr);
    }
  mr = d->mr;
  if (mr == NULL && error != NULL)
    {
      *error = g_error_copy (d->failure);
      g_prefix_error (error, "memres allocator: device %d: no resource: ", device);
    }
  g_mutex_unlock (&d->lock);
  return mr;
}

/* Refuses @stream while it captures a CUDA graph (torch.cuda.graph calls alloc on its capturing
 * stream): the graph bakes the address in and uses it again at every replay, but torch tells a
 * pluggable allocator neither when the capture begins nor when the graph goes (its
 * begin_allocate_to_pool and release_pool hooks are C++ only), so nothing would keep that memory
 * from being handed out again after the tensor's free; the cache would even hand out a cached
 * block inside the capture without a driver call. The legacy stream cannot capture (no driver
 * call for it); without a driver no stream captures. */
static gboolean
check_not_capturing (MemresStream stream, GError **error)
{
  g_autoptr (GError) local = NULL;

  if (stream == MEMRES_STREAM_LEGACY || memres_cuda_check_stream_not_capturing (stream, &local)
      || g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER))
    return TRUE;
  if (g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                 "stream %p is capturing a CUDA graph: memres as torch's or CuPy's allocator "
                 "cannot keep a graph's memory for its replays (docs/interop.md, CUDA graphs)",
                 (gpointer) stream);
  else
    g_propagate_error (error, g_steal_pointer (&local));
  return FALSE;
}

/* Allocates @size bytes on @stream from @device's resource and records the buffer under its
 * pointer. A failure is logged (once at warning level per device, then at debug level) and set
 * in @error (NULL returned); a @size of 0 gives NULL without an error. */
static void *
allocate (gsize size, int device, MemresStream stream, GError **error)
{
  g_autoptr (GError) local = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  Shard *shard;
  void *ptr;

  if (size == 0)
    return NULL; /* nothing to allocate; freeing NULL does nothing */
  mr = device_resource (device, error);
  if (mr == NULL)
    return NULL;
  buf = check_not_capturing (stream, &local) ? memres_resource_allocate (mr, size, stream, &local)
                                             : NULL;
  if (buf == NULL)
    {
      g_autofree char *what
          = g_strdup_printf ("device %d: allocating %" G_GSIZE_FORMAT " bytes", device, size);

      log_once (&devices[device].failure_logged, what, local);
      g_propagate_prefixed_error (error, g_steal_pointer (&local), "memres allocator: %s: ", what);
      return NULL;
    }
  ptr = memres_buffer_get_pointer (buf);
  shard = shard_for (ptr);
  g_mutex_lock (&shard->lock);
  if (G_UNLIKELY (shard->buffers == NULL))
    shard->buffers = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_hash_table_insert (shard->buffers, ptr, buf);
  g_mutex_unlock (&shard->lock);
  __atomic_fetch_add (&devices[device].n_buffers, 1, __ATOMIC_RELAXED);
  return ptr;
}

/* The device whose resource allocated the open buffer @buf: the one its memory lives on when that
 * device's resource is its resource (a device kind), else the device whose resource it is
 * (pinned or managed memory lives on none; each device has a resource of its own). */
static int
buffer_device (MemresBuffer *buf)
{
  MemresResource *mr = memres_buffer_get_resource (buf);
  int d = memres_buffer_get_device (buf);

  if (d >= 0 && d < MEMRES_ALLOCATOR_MAX_DEVICES && g_atomic_pointer_get (&devices[d].mr) == mr)
    return d;
  for (d = 0; d < MEMRES_ALLOCATOR_MAX_DEVICES; d++)
    if (g_atomic_pointer_get (&devices[d].mr) == mr)
      return d;
  g_return_val_if_reached (0); /* every buffer in the table came from a device's resource */
}

/* Makes @stream wait for the work queued so far on each of @recorded: an event recorded on each,
 * waited for on @stream, in @device's primary context (memres_cuda_push_context()). Where that
 * fails, the recorded stream is waited for instead (memres_cuda_stream_synchronize()). In the
 * child of a fork() after the driver was initialized (%MEMRES_ERROR_FORKED) nothing is ordered
 * and nothing logged: the child can queue no work, and the close that follows only releases
 * memres's bookkeeping (core/fork.c). */
static void
wait_for_recorded (int device, MemresStream stream, GArray *recorded)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&error);
  gboolean pushed = FALSE;
  gboolean in_context = drv != NULL && memres_cuda_push_context (device, &pushed, &error);

  if (!in_context && g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_FORKED))
    return;
  if (!in_context)
    log_once (&close_failure_logged, "ordering a free after recorded streams", error);
  for (guint i = 0; i < recorded->len; i++)
    {
      MemresStream s = g_array_index (recorded, MemresStream, i);
      CUevent ev = NULL;

      if (s == stream)
        continue;
      if (!in_context || drv->cuEventCreate (&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS
          || drv->cuEventRecord (ev, (CUstream) s) != CUDA_SUCCESS
          || drv->cuStreamWaitEvent ((CUstream) stream, ev, 0) != CUDA_SUCCESS)
        (void) memres_cuda_stream_synchronize (device, s, NULL);
      if (ev != NULL)
        drv->cuEventDestroy (ev);
    }
  memres_cuda_pop_context (pushed);
}

/* Frees what allocate() returned at @ptr, ordered on @stream. */
static void
release (void *ptr, int device, MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = NULL;
  GArray *recorded = NULL;
  Shard *shard;
  int dev;

  if (ptr == NULL)
    return;
  shard = shard_for (ptr);
  g_mutex_lock (&shard->lock);
  if (shard->buffers != NULL)
    g_hash_table_steal_extended (shard->buffers, ptr, NULL, (gpointer *) &buf);
  if (buf != NULL && G_UNLIKELY (shard->recorded != NULL))
    g_hash_table_steal_extended (shard->recorded, ptr, NULL, (gpointer *) &recorded);
  g_mutex_unlock (&shard->lock);

  if (buf == NULL)
    {
      g_autoptr (GError) unknown
          = g_error_new (MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                         "%p (device %d) was not allocated here, or is freed already", ptr, device);

      log_once (&unknown_pointer_logged, "free", unknown);
      return;
    }
  dev = buffer_device (buf);
  if (recorded != NULL)
    {
      wait_for_recorded (dev, stream, recorded);
      g_array_unref (recorded);
    }
  /* CUDA_ERROR_DEINITIALIZED: the process exits and the driver is gone (torch frees late);
   * MEMRES_ERROR_NOT_SUPPORTED: memory that is not stream-ordered, freed on a stream that is
   * capturing a graph: the unref below keeps it until the capture has ended (memres_buffer_unref())
   */
  if (!memres_buffer_close (buf, stream, &error)
      && !g_error_matches (error, MEMRES_CUDA_ERROR, CUDA_ERROR_DEINITIALIZED)
      && !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
    {
      log_once (&close_failure_logged, "free", error);
      /* The stream may be gone: torch frees on the allocation's stream, which its owner (an
       * ExternalStream's library) may have destroyed first (the fake answers
       * CUDA_ERROR_INVALID_HANDLE; the real driver promises nothing). Free after all of the
       * device's work, on the legacy stream, rather than leave it to the last unref, which
       * would do the same with a warning for every such tensor. */
      if (error->domain == MEMRES_CUDA_ERROR && memres_cuda_device_synchronize (dev, NULL))
        (void) memres_buffer_close_full (buf, MEMRES_STREAM_LEGACY, MEMRES_CLOSE_CALLER_ORDERED,
                                         NULL);
    }
  memres_buffer_unref (buf);
  __atomic_fetch_sub (&devices[dev].n_buffers, 1, __ATOMIC_RELAXED);
}

/* NULL is the legacy default stream for torch and for memres's allocate, but "the recorded
 * stream" for memres_buffer_close(): name it. */
static MemresStream
explicit_stream (void *stream)
{
  return stream != NULL ? (MemresStream) stream : MEMRES_STREAM_LEGACY;
}

/* The result of a ctypes entry point (memres-allocator-private.h): of the tags and the sleep. */
int
_memres_allocator_result (gboolean ok, GError *error, GQuark domain, GPrivate *last_error)
{
  int code;

  if (ok)
    return 0;
  if (error == NULL) /* a failed precondition (g_return_val_if_fail) sets none */
    {
      g_private_replace (last_error, g_strdup ("invalid argument (see the critical warning)"));
      return -1;
    }
  code = error->domain == domain ? error->code + 1 : -1;
  g_private_replace (last_error, g_strdup (error->message));
  g_error_free (error);
  return code;
}

/* The allocation of memres_torch_alloc(), both builds (memres-allocator-private.h). torch
 * calls its alloc with a `size_t` (CUDAPluggableAllocator's MallocFuncType), which its documented
 * example declares `ssize_t`: a size past G_MAXSSIZE (torch.empty of 8 EiB) arrives negative
 * here, and is the size torch asked for. */
void *
_memres_allocator_torch_alloc (ssize_t size, int device, void *stream, GError **error)
{
  return allocate ((gsize) size, device, explicit_stream (stream), error);
}

#ifndef MEMRES_ALLOCATOR_TORCH_THROWS
/* Without a C++ compiler: the C entry point, which can only return NULL. With one,
 * memres-allocator-torch.cc defines memres_torch_alloc() (documented there). */
void *
memres_torch_alloc (ssize_t size, int device, void *stream)
{
  return _memres_allocator_torch_alloc (size, device, stream, NULL);
}
#endif

/**
 * memres_torch_pool_alloc:
 * @size: bytes (0 gives %NULL); a `size_t` read as memres_torch_alloc() reads it
 * @device: the CUDA device ordinal
 * @stream: the `cudaStream_t`/`CUstream` the allocation is ordered on (%NULL: the legacy
 *   default stream); torch passes its current stream
 *
 * The allocation function for a `torch.cuda.MemPool` (PyTorch 2.5 and later:
 * `torch.cuda.MemPool(torch.cuda.memory.CUDAPluggableAllocator(lib, "memres_torch_pool_alloc",
 * "memres_torch_free").allocator())`, which memres.torch.mem_pool() makes). Inside
 * `torch.cuda.use_mem_pool()` torch's caching allocator calls it for each new segment and,
 * unlike torch's pluggable-allocator path, checks the pointer: %NULL is
 * `cudaErrorMemoryAllocation` to it, after which it frees its cached blocks, asks again, and
 * finally raises `torch.OutOfMemoryError`. So this returns %NULL on failure, in either build,
 * where memres_torch_alloc() throws (an exception skips torch's retry and reaches Python as a
 * plain `RuntimeError`). Otherwise as memres_torch_alloc(): the same resources, the same table
 * (free with memres_torch_free()), a failure logged with g_warning() the first time for each
 * device and with g_debug() afterwards; a stream capturing a CUDA graph is refused.
 *
 * Do not install it with `change_current_allocator()`: torch does not check that path's pointer
 * (use memres_torch_alloc() there).
 *
 * Thread safety: any thread, concurrently with every function here.
 *
 * Returns: the pointer, or %NULL (failure, or a @size of 0)
 */
void *
memres_torch_pool_alloc (ssize_t size, int device, void *stream)
{
  return _memres_allocator_torch_alloc (size, device, stream, NULL);
}

/**
 * memres_torch_alloc_throws:
 *
 * Tells which memres_torch_alloc() this library was built with: with a C++ compiler, it throws
 * a C++ exception (a `std::runtime_error` carrying the GError's message) on failure, which
 * torch turns into a Python `RuntimeError`; without one it returns %NULL, and torch 2.x does not
 * check the pointer: the tensor gets address 0 and the first kernel touching it faults the
 * context (docs/interop.md). Use memres with torch only where this returns %TRUE.
 *
 * Thread safety: any thread.
 *
 * Returns: %TRUE when memres_torch_alloc() throws on failure
 */
gboolean
memres_torch_alloc_throws (void)
{
#ifdef MEMRES_ALLOCATOR_TORCH_THROWS
  return TRUE;
#else
  return FALSE;
#endif
}

/**
 * memres_torch_free:
 * @ptr: (nullable): what memres_torch_alloc() returned; %NULL does nothing
 * @size: ignored (the buffer knows its size)
 * @device: ignored (the buffer knows its device)
 * @stream: the stream the free is ordered on: torch passes the allocation's stream (%NULL:
 *   the legacy default stream)
 *
 * The free function of `torch.cuda.memory.CUDAPluggableAllocator`
 * (`void free (void *ptr, ssize_t size, int device, cudaStream_t stream)`). Finds the buffer
 * from @ptr in a table sharded by pointer (no scan, one shard's lock), makes @stream wait for
 * the streams memres_torch_record_stream() recorded for it, and closes it on @stream (dmr:
 * cuMemFreeAsync()). A pointer that was not allocated here, or is freed already, is logged
 * once and otherwise ignored; so is a failing close (except `CUDA_ERROR_DEINITIALIZED`, which
 * the driver returns while the process exits, and %MEMRES_ERROR_NOT_SUPPORTED for memory that is
 * not stream-ordered freed on a stream that is capturing a graph, which memres frees once the
 * capture has ended: see memres_buffer_unref(); neither is logged), after which a close that
 * failed in the driver (@stream destroyed already, where the driver says so rather than crash)
 * is done again on the legacy stream after all of the device's work (cuCtxSynchronize()), so
 * that the memory goes back without a warning per tensor. In the child of a fork()
 * made after the driver was initialized, a pointer inherited from the parent is forgotten
 * (memres_allocator_count_buffers() drops it) without a driver call or a log line: the
 * parent's memory stays the parent's (core/fork.c).
 *
 * Thread safety: any thread, concurrently with every function here.
 */
void
memres_torch_free (void *ptr, ssize_t size, int device, void *stream)
{
  release (ptr, device, explicit_stream (stream));
}

/**
 * memres_torch_record_stream:
 * @ptr: what memres_torch_alloc() returned
 * @stream: a stream that uses the memory besides the allocation's
 *
 * The `record_stream` hook of torch's C++ `CUDAPluggableAllocator::set_record_stream_fn()`
 * (`void (void *ptr, cudaStream_t stream)`; not reachable from Python, where torch ignores
 * `Tensor.record_stream()` for a pluggable allocator). Remembers @stream for @ptr: the free
 * of @ptr is then ordered after the work queued on @stream until then (an event recorded on
 * it, waited for on the free's stream; cuEventCreate(), cuEventRecord(), cuStreamWaitEvent(),
 * or cuStreamSynchronize() where those fail). An unknown pointer does nothing.
 *
 * Thread safety: any thread.
 */
void
memres_torch_record_stream (void *ptr, void *stream)
{
  Shard *shard = shard_for (ptr);

  g_mutex_lock (&shard->lock);
  if (shard->buffers != NULL && g_hash_table_contains (shard->buffers, ptr))
    {
      MemresStream s = explicit_stream (stream);
      GArray *recorded;
      gboolean seen = FALSE;

      if (shard->recorded == NULL)
        shard->recorded = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL,
                                                 (GDestroyNotify) g_array_unref);
      recorded = g_hash_table_lookup (shard->recorded, ptr);
      if (recorded == NULL)
        {
          recorded = g_array_new (FALSE, FALSE, sizeof (MemresStream));
          g_hash_table_insert (shard->recorded, ptr, recorded);
        }
      for (guint i = 0; i < recorded->len && !seen; i++)
        seen = g_array_index (recorded, MemresStream, i) == s;
      if (!seen)
        g_array_append_val (recorded, s);
    }
  g_mutex_unlock (&shard->lock);
}

/**
 * memres_torch_empty_cache:
 *
 * The reset hook of torch's C++ `CUDAPluggableAllocator::set_reset_fn()`, also called directly
 * (ctypes) after `torch.cuda.empty_cache()`: trims every device's resource to 0 bytes kept
 * (memres_resource_trim(); dmr: cuMemPoolTrimTo()). Live allocations are kept: only memory
 * held unused is released. Kinds that keep nothing cached (%MEMRES_ERROR_NOT_SUPPORTED) are
 * skipped, and so is every resource in the child of a fork() after the driver was initialized
 * (%MEMRES_ERROR_FORKED: what the parent's pools hold is not the child's to release); other
 * failures are logged with g_warning().
 *
 * Thread safety: any thread.
 */
void
memres_torch_empty_cache (void)
{
  for (int d = 0; d < MEMRES_ALLOCATOR_MAX_DEVICES; d++)
    {
      MemresResource *mr = g_atomic_pointer_get (&devices[d].mr);
      g_autoptr (GError) error = NULL;

      if (mr != NULL && !memres_resource_trim (mr, 0, &error)
          && !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED)
          && !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_FORKED))
        g_warning ("memres allocator: device %d: trimming: %s", d, error->message);
    }
}

/**
 * memres_cupy_malloc:
 * @param: the `param` given to `cupy.cuda.memory.CFunctionAllocator`: 0 for the legacy
 *   default stream, or a `CUstream` to order every allocation and free on
 * @size: bytes (0 gives %NULL)
 * @device: the CUDA device ordinal
 *
 * The malloc function of `cupy.cuda.memory.CFunctionAllocator`
 * (`void *malloc (void *param, size_t size, int device)`). CuPy passes no stream: the
 * allocation is ordered on the legacy default stream unless @param names one. The legacy
 * stream is the choice because CuPy's default stream is the legacy stream, and the legacy
 * stream waits for (and is waited for by) every blocking stream of the context: memory freed
 * on it is not reused before the work CuPy queued on its default or any blocking stream is
 * done. The per-thread default stream would not be ordered with other threads' streams.
 * Work on non-blocking streams (`cupy.cuda.Stream(non_blocking=True)`) is not ordered with
 * it: synchronize such a stream before dropping its arrays, or pass it as @param.
 *
 * Otherwise as memres_torch_alloc(): the same resources, the same table; on failure %NULL,
 * with the GError logged (g_warning() the first time per device, g_debug() afterwards). CuPy's
 * `CFunctionAllocator` does not check the pointer (CuPy 14 makes an array at address 0 from a
 * %NULL): use it through memres_interop.Allocator.cupy_allocator(), which raises
 * `cupy.cuda.memory.OutOfMemoryError` for a %NULL (docs/interop.md).
 *
 * Returns: the pointer, or %NULL
 */
void *
memres_cupy_malloc (void *param, size_t size, int device)
{
  return allocate (size, device, explicit_stream (param), NULL);
}

/**
 * memres_cupy_free:
 * @param: as given to memres_cupy_malloc()
 * @ptr: (nullable): what memres_cupy_malloc() returned
 * @device: ignored (the buffer knows its device)
 *
 * The free function of `cupy.cuda.memory.CFunctionAllocator`
 * (`void free (void *param, void *ptr, int device)`): as memres_torch_free(), ordered on the
 * legacy default stream or the stream @param names.
 */
void
memres_cupy_free (void *param, void *ptr, int device)
{
  release (ptr, device, explicit_stream (param));
}

/**
 * memres_allocator_get_resource:
 * @device: a CUDA device ordinal
 *
 * The resource the library allocates from for @device, made now if no allocation made it yet.
 * Its statistics (memres_resource_get_stats()) show what torch or CuPy allocated through it;
 * from Python, load libmemres with ctypes and call memres_resource_get_stats() on the pointer
 * this returns (docs/interop.md).
 *
 * Thread safety: any thread.
 *
 * Returns: (transfer none) (nullable): the resource, valid for the life of the process; %NULL
 *   when it cannot be made (the error is logged with g_warning() once)
 */
MemresResource *
memres_allocator_get_resource (int device)
{
  return device_resource (device, NULL);
}

/**
 * memres_allocator_count_buffers:
 * @device: a CUDA device ordinal, or -1 (any negative value) for every device
 *
 * Thread safety: any thread (relaxed atomic counts: an allocation or free under way in another
 * thread may or may not be counted).
 *
 * Returns: the allocations made through this library for @device (or all) and not freed yet; 0
 *   for a device past %MEMRES_ALLOCATOR_MAX_DEVICES
 */
guint64
memres_allocator_count_buffers (int device)
{
  gint64 n = 0;

  for (int d = 0; d < MEMRES_ALLOCATOR_MAX_DEVICES; d++)
    if (device < 0 || d == device)
      n += __atomic_load_n (&devices[d].n_buffers, __ATOMIC_RELAXED);
  return (guint64) n;
}

/**
 * memres_allocator_write_snapshot:
 * @path: the file to write: replaced whole (written beside it, then renamed over it); a
 *   symbolic link is followed to the regular file it leads to (the link stays); a directory, a
 *   FIFO, a device such as /dev/null, a socket, a link to nothing or a file another writer
 *   holds locked with flock() (a `log` layer's log, a sleep's file) is refused, left as it is
 * @error: (nullable): return location for a #GError, or %NULL
 *
 * Writes the snapshot (memres_resource_snapshot(), docs/snapshot.md) of the resource of every
 * device the library has made one for, as one JSON document: `{"memres_allocator_snapshot": 1,
 * "devices": {"0": SNAPSHOT, ...}}` (an empty object when no allocation was made yet). For the
 * snapshot at an out-of-memory failure, set `MEMRES_OOM_SNAPSHOT` instead (the core writes it
 * when the error happens). Driver calls: those of memres_resource_snapshot().
 *
 * Thread safety: any thread.
 *
 * Returns: %TRUE when the file was written; %FALSE with @error set (a #GFileError:
 *   %G_FILE_ERROR_ISDIR for a directory, %G_FILE_ERROR_INVAL for a FIFO, a device or a socket,
 *   %G_FILE_ERROR_NOENT for a link to nothing, %G_FILE_ERROR_AGAIN (flock()'s EWOULDBLOCK) for a
 *   file another writer holds locked, the system's reason otherwise; a
 *   %MEMRES_ERROR_FORKED of a resource inherited through fork()) otherwise
 */
gboolean
memres_allocator_write_snapshot (const char *path, GError **error)
{
  g_autoptr (GString) doc = g_string_new ("{\"memres_allocator_snapshot\": 1, \"devices\": {");
  gboolean first = TRUE;

  g_return_val_if_fail (path != NULL, FALSE);

  for (int d = 0; d < MEMRES_ALLOCATOR_MAX_DEVICES; d++)
    {
      MemresResource *mr = g_atomic_pointer_get (&devices[d].mr);
      g_autofree char *one = NULL;

      if (mr == NULL)
        continue;
      one = memres_resource_snapshot (mr, error);
      if (one == NULL)
        return FALSE;
      g_string_append_printf (doc, "%s\n\"%d\": %s", first ? "" : ",", d, g_strchomp (one));
      first = FALSE;
    }
  g_string_append (doc, "}}\n");
  return memres_file_replace (path, doc->str, (gssize) doc->len, error);
}

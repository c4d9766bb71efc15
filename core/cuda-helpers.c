/* memres - CUDA memory resources
 * cuda-helpers.c: the driver helpers of the plugin SDK that kinds and the core share: a device's
 * primary context pushed around calls that act on the current context, the context stream work
 * runs in, waiting for a stream or a device, device attributes and the peer-access check. One
 * copy each, so that every kind gets the same contexts and the same errors. Part of libmemres,
 * written against the public headers alone, as a third party's plugin is (the SDK sits on the
 * core's driver table, memres_cuda_get_driver(), and nothing else of it). In core/ beside
 * cuda-driver.c, the other half of memres-cuda.h, so that the header is implemented in one
 * directory. */
#include <memres/memres-plugin.h>

static gboolean
set_no_entry (GError **error, const MemresCudaDriver *drv, const char *entries)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "The CUDA driver %s lacks %s",
               drv->path != NULL ? drv->path : "", entries);
  return FALSE;
}

/* Pushes @ctx unless it is current (or NULL); *@pushed is set only when it was pushed. */
static gboolean
push_unless_current (const MemresCudaDriver *drv, CUcontext ctx, gboolean *pushed, GError **error)
{
  CUcontext current = NULL;
  CUresult r = drv->cuCtxGetCurrent (&current);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuCtxGetCurrent");
  if (ctx == NULL || ctx == current)
    return TRUE;
  r = drv->cuCtxPushCurrent (ctx);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuCtxPushCurrent");
  *pushed = TRUE;
  return TRUE;
}

/**
 * memres_cuda_push_context:
 * @device: a CUDA device ordinal
 * @pushed: (out): set to whether a context was pushed, for memres_cuda_pop_context()
 * @error: return location for a #GError, or %NULL
 *
 * Makes the primary context of @device (memres_cuda_get_primary_context()) current on the
 * calling thread for driver calls that act on "the current context" (cuMemAlloc(),
 * cuMemHostAlloc(), cuMemAllocManaged(), cuCtxSynchronize(), creating an event, the legacy
 * default stream): pushes it (cuCtxPushCurrent()) unless it is current already
 * (cuCtxGetCurrent()). Always pair a success with memres_cuda_pop_context (@pushed) on the same
 * thread, after the calls; on failure nothing was pushed. A context the application made
 * current, of this device or another, is current again after the pop. Thread-safe (it acts on
 * the calling thread only).
 *
 * Errors: those of memres_cuda_get_primary_context(); %MEMRES_ERROR_NOT_SUPPORTED when the
 * driver lacks cuCtxPushCurrent or cuCtxPopCurrent; %MEMRES_CUDA_ERROR when a driver call
 * fails.
 *
 * Returns: %TRUE when @device's primary context is current
 *
 * Since: 1.2
 */
gboolean
memres_cuda_push_context (gint device, gboolean *pushed, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  CUcontext primary;

  g_return_val_if_fail (pushed != NULL, FALSE);

  *pushed = FALSE;
  if (drv == NULL || !memres_cuda_get_primary_context (device, &primary, error))
    return FALSE;
  if (drv->cuCtxPushCurrent == NULL || drv->cuCtxPopCurrent == NULL)
    return set_no_entry (error, drv, "cuCtxPushCurrent or cuCtxPopCurrent");
  return push_unless_current (drv, primary, pushed, error);
}

/**
 * memres_cuda_pop_context:
 * @pushed: what memres_cuda_push_context() stored in its @pushed
 *
 * Pops the context memres_cuda_push_context() pushed (cuCtxPopCurrent()), when it pushed one;
 * does nothing for %FALSE. A failing pop, which no caller can act on, is logged through
 * memres_cuda_warn_release_failure() (a warning; silent for `CUDA_ERROR_DEINITIALIZED` at
 * process exit). Thread-safe (it acts on the calling thread only).
 *
 * Since: 1.2
 */
void
memres_cuda_pop_context (gboolean pushed)
{
  const MemresCudaDriver *drv;
  CUcontext popped;
  CUresult r;

  if (!pushed || (drv = memres_cuda_get_driver (NULL)) == NULL)
    return;
  r = drv->cuCtxPopCurrent (&popped);
  if (r != CUDA_SUCCESS)
    {
      g_autoptr (GError) error = NULL;

      memres_cuda_set_error (&error, r, "cuCtxPopCurrent");
      memres_cuda_warn_release_failure (error, "popping the context pushed for a driver call");
    }
}

/**
 * memres_cuda_push_stream_context:
 * @device: the device ordinal of the memory the work is on, or -1 for host memory
 * @stream: the stream the work is queued on; %NULL or %MEMRES_STREAM_LEGACY is the legacy default
 *   stream
 * @pushed: (out): set to whether a context was pushed, for memres_cuda_pop_context()
 * @error: return location for a #GError, or %NULL
 *
 * Makes the context that work queued on @stream runs in current on the calling thread, for
 * driver calls that queue work on it (cuMemcpyAsync(), cuMemsetD8Async(), cuMemPrefetchAsync(),
 * cuStreamWaitEvent()...). An explicit stream runs in its own context (cuStreamGetCtx()), which
 * the real driver wants current for the call (a copy on device 1's stream while device 0's context
 * is current fails with `CUDA_ERROR_INVALID_VALUE`): it is pushed (cuCtxPushCurrent()) when
 * another is current. The default streams (%NULL, %MEMRES_STREAM_LEGACY, `CU_STREAM_PER_THREAD`)
 * are the current context's: for device memory, @device's primary context is pushed
 * (memres_cuda_push_context()) when the current context is another device's (cuCtxGetDevice());
 * for host memory (@device -1) the current context is used. When no context is current at all,
 * @device's primary context (device 0's for -1) is made current first and stays current
 * (memres_cuda_ensure_context()). A driver without cuStreamGetCtx, cuCtxPushCurrent or
 * cuCtxPopCurrent gets nothing pushed for an explicit stream.
 *
 * This is the context memres_buffer_copy_to(), memres_buffer_fill(), memres_buffer_prefetch() and
 * memres_cuda_stream_synchronize() use. Always pair a success with memres_cuda_pop_context
 * (@pushed) on the same thread, after the calls; on failure nothing was pushed. Thread-safe (it
 * acts on the calling thread only).
 *
 * Errors: those of memres_cuda_ensure_context() and memres_cuda_push_context();
 * %MEMRES_CUDA_ERROR when cuStreamGetCtx(), cuCtxGetCurrent(), cuCtxGetDevice() or
 * cuCtxPushCurrent() fails (`CUDA_ERROR_INVALID_HANDLE` for a stream the driver knows is gone).
 *
 * Returns: %TRUE when @stream's context is current
 *
 * Since: 2.0
 */
gboolean
memres_cuda_push_stream_context (gint device, MemresStream stream, gboolean *pushed, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  CUcontext own = NULL;
  CUdevice current_device;
  CUresult res;

  g_return_val_if_fail (pushed != NULL, FALSE);

  *pushed = FALSE;
  if (drv == NULL || !memres_cuda_ensure_context (MAX (device, 0), error))
    return FALSE;
  if ((guintptr) stream > (guintptr) CU_STREAM_PER_THREAD)
    {
      if (drv->cuStreamGetCtx == NULL || drv->cuCtxPushCurrent == NULL
          || drv->cuCtxPopCurrent == NULL)
        return TRUE;
      res = drv->cuStreamGetCtx ((CUstream) stream, &own);
      if (res != CUDA_SUCCESS)
        return memres_cuda_set_error (error, res, "cuStreamGetCtx");
      return push_unless_current (drv, own, pushed, error);
    }
  if (device < 0 || drv->cuCtxGetDevice == NULL)
    return TRUE;
  res = drv->cuCtxGetDevice (&current_device);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuCtxGetDevice");
  if (current_device == device)
    return TRUE;
  return memres_cuda_push_context (device, pushed, error);
}

/* Whether @stream captures a graph: memres_cuda_check_stream_not_capturing() refuses it. The
 * legacy default stream cannot capture and is not asked. A failing query says no: the wait that
 * follows reports the stream's error itself (a destroyed stream's). */
static gboolean
stream_is_capturing (MemresStream stream)
{
  g_autoptr (GError) error = NULL;

  return stream != NULL && stream != MEMRES_STREAM_LEGACY
         && !memres_cuda_check_stream_not_capturing (stream, &error)
         && g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
}

/**
 * memres_cuda_stream_synchronize:
 * @device: the device ordinal of the memory the wait is for, or -1 for host memory
 * @stream: the stream to wait for; %NULL or %MEMRES_STREAM_LEGACY is the legacy default stream
 * @error: return location for a #GError, or %NULL
 *
 * Blocks until all work queued on @stream is done (cuStreamSynchronize()), in the stream's
 * context: an explicit stream's own (cuStreamGetCtx(), pushed when another is current); for the
 * default streams the current context when it is one of @device (or when @device is -1), else
 * @device's primary context, pushed for the call. When no context is current at all, @device's
 * primary context (device 0's for -1) is made current first (memres_cuda_ensure_context()).
 * This is the wait the core makes before it calls the deallocate slot of a kind whose memory
 * is not stream-ordered (see #MemresResourceOps); a kind calls it before it unmaps or frees
 * memory in other slots (vmm's resize). Thread-safe.
 *
 * A stream that is capturing a graph (cuStreamIsCapturing(), asked of every stream but the
 * legacy default one, which cannot capture) is refused before the wait: synchronizing it fails
 * and invalidates the capture, losing the graph the program was building. Wait after
 * cuStreamEndCapture() instead.
 *
 * Errors: those of memres_cuda_ensure_context(); %MEMRES_ERROR_NOT_SUPPORTED when @stream is
 * capturing a graph; %MEMRES_CUDA_ERROR when a driver call fails (`CUDA_ERROR_INVALID_HANDLE`
 * for a stream the driver knows is gone).
 *
 * Returns: %TRUE once the stream is idle
 *
 * Since: 1.2
 */
gboolean
memres_cuda_stream_synchronize (gint device, MemresStream stream, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  gboolean pushed = FALSE;
  CUresult r;

  if (drv == NULL || !memres_cuda_push_stream_context (device, stream, &pushed, error))
    return FALSE;
  if (stream_is_capturing (stream))
    {
      memres_cuda_pop_context (pushed);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "stream %p is capturing a graph: it cannot be waited for until "
                   "cuStreamEndCapture() (cuStreamSynchronize would invalidate the capture)",
                   (gpointer) stream);
      return FALSE;
    }
  r = drv->cuStreamSynchronize ((CUstream) stream);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamSynchronize");
  return TRUE;
}

/**
 * memres_cuda_device_synchronize:
 * @device: a CUDA device ordinal
 * @error: return location for a #GError, or %NULL
 *
 * Blocks until all work of @device's primary context is done: cuCtxSynchronize() with that
 * context pushed (memres_cuda_push_context()). For memory that may still be used by work queued
 * on any stream of the device. Thread-safe.
 *
 * Errors: those of memres_cuda_push_context(); %MEMRES_ERROR_NOT_SUPPORTED when the driver lacks
 * cuCtxSynchronize; %MEMRES_CUDA_ERROR when cuCtxSynchronize() fails.
 *
 * Returns: %TRUE once the device is idle
 *
 * Since: 1.2
 */
gboolean
memres_cuda_device_synchronize (gint device, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  gboolean pushed;
  CUresult r;

  if (drv == NULL)
    return FALSE;
  if (drv->cuCtxSynchronize == NULL)
    return set_no_entry (error, drv, "cuCtxSynchronize");
  if (!memres_cuda_push_context (device, &pushed, error))
    return FALSE;
  r = drv->cuCtxSynchronize ();
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuCtxSynchronize");
  return TRUE;
}

/**
 * memres_cuda_get_device_attribute:
 * @device: a CUDA device ordinal
 * @attribute: the attribute to read, a `CUdevice_attribute`
 * @value: (out): return location for the attribute's value
 * @error: return location for a #GError, or %NULL
 *
 * Reads one attribute of @device: cuDeviceGet(), then cuDeviceGetAttribute(). A driver older
 * than the attribute answers `CUDA_ERROR_INVALID_VALUE`; a kind that reads a capability may take
 * that for "not supported". Thread-safe.
 *
 * Errors: those of memres_cuda_check_device(); %MEMRES_CUDA_ERROR when a driver call fails (the
 * message names the attribute by number).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_cuda_get_device_attribute (gint device, CUdevice_attribute attribute, gint *value,
                                  GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  g_autofree char *call = NULL;
  CUdevice dev;
  CUresult r;

  g_return_val_if_fail (value != NULL, FALSE);

  if (drv == NULL || !memres_cuda_check_device (device, error))
    return FALSE;
  r = drv->cuDeviceGet (&dev, device);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  r = drv->cuDeviceGetAttribute (value, attribute, dev);
  if (r == CUDA_SUCCESS)
    return TRUE;
  call = g_strdup_printf ("cuDeviceGetAttribute (attribute %d, device %d)", (gint) attribute,
                          device);
  return memres_cuda_set_error (error, r, call);
}

/**
 * memres_cuda_check_peer_access:
 * @device: the device ordinal that owns the memory
 * @peer: the device ordinal that is to access it
 * @error: return location for a #GError, or %NULL
 *
 * Checks with cuDeviceCanAccessPeer() that @peer can map memory of @device, before a kind
 * grants it access (cuMemPoolSetAccess(), cuMemSetAccess()). A device can always access its
 * own memory. Thread-safe.
 *
 * Errors: those of memres_cuda_check_device() (for both devices); %MEMRES_ERROR_NOT_SUPPORTED
 * when the driver lacks cuDeviceCanAccessPeer or says no (the message names both devices);
 * %MEMRES_CUDA_ERROR when a driver call fails.
 *
 * Returns: %TRUE when @peer can access @device's memory
 *
 * Since: 1.2
 */
gboolean
memres_cuda_check_peer_access (gint device, gint peer, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);
  CUdevice owner_dev, peer_dev;
  int can = 0;
  CUresult r;

  if (drv == NULL || !memres_cuda_check_device (device, error)
      || !memres_cuda_check_device (peer, error))
    return FALSE;
  if (peer == device)
    return TRUE;
  if (drv->cuDeviceCanAccessPeer == NULL)
    return set_no_entry (error, drv, "cuDeviceCanAccessPeer");
  r = drv->cuDeviceGet (&owner_dev, device);
  if (r == CUDA_SUCCESS)
    r = drv->cuDeviceGet (&peer_dev, peer);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceGet");
  r = drv->cuDeviceCanAccessPeer (&can, peer_dev, owner_dev);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuDeviceCanAccessPeer");
  if (!can)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "device %d cannot access the memory of device %d (cuDeviceCanAccessPeer)", peer,
                   device);
      return FALSE;
    }
  return TRUE;
}

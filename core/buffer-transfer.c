/* memres - CUDA memory resources
 * buffer-transfer.c: copy, fill, read and write, stream-ordered. Memory only the host can
 * reach is handled with memcpy/memset on the calling thread; everything else goes through the
 * driver after making a context current for the device involved. */
#include "memres-private.h"

#include <string.h>

/* Open, and awake (a sleeping buffer has no memory under it: sleep.h) */
static gboolean
check_open (MemresBuffer *buf, const char *what, GError **error)
{
  if (G_UNLIKELY (memres_buffer_is_closed (buf)))
    return _memres_buffer_closed_error (error);
  return _memres_buffer_check_awake (buf, what, error);
}

/* Host memory no device can reach: plain memcpy/memset, no driver. */
static gboolean
is_host_only (MemresBuffer *buf)
{
  return (buf->flags & (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE))
         == MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static gboolean
copy (MemresBuffer *dst, MemresBuffer *src, MemresStream stream, GError **error)
{
  MemresStreamContext t;
  CUresult res;
  gint device;

  if (!check_open (src, "copy", error) || !check_open (dst, "copy", error))
    return FALSE;
  if (src->alloc.size != dst->alloc.size)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "cannot copy between buffers of different sizes (%" G_GSIZE_FORMAT
                   " and %" G_GSIZE_FORMAT " bytes)",
                   src->alloc.size, dst->alloc.size);
      return FALSE;
    }
  if (src->alloc.size == 0)
    return TRUE;
  if (is_host_only (src) && is_host_only (dst))
    {
      memmove ((gpointer) (guintptr) dst->alloc.address,
               (gconstpointer) (guintptr) src->alloc.address, src->alloc.size);
      return TRUE;
    }
  device = _memres_buffer_context_device (dst);
  if (device < 0)
    device = _memres_buffer_context_device (src);
  if (!_memres_stream_context_begin (&t, device, stream, error))
    return FALSE;
  res = t.drv->cuMemcpyAsync ((CUdeviceptr) dst->alloc.address, (CUdeviceptr) src->alloc.address,
                              src->alloc.size, (CUstream) stream);
  _memres_stream_context_end (&t);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuMemcpyAsync");
  return TRUE;
}

/**
 * memres_buffer_copy_to:
 * @src: the buffer to copy from
 * @dst: the buffer to copy into, of the same size
 * @stream: the stream the copy is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Copies all of @src into @dst. Between two buffers of host-only memory it is a memcpy() done
 * before returning; otherwise cuMemcpyAsync() on @stream, after making a context current for
 * the device involved (memres_cuda_ensure_context()); on the legacy default stream (%NULL)
 * the device's primary context is pushed for the call (cuCtxPushCurrent()) when another
 * device's context is current, and popped after it. For device-accessible memory of no device
 * (page-locked pool memory, device -1), the device involved is the first one the resource's
 * memres_resource_get_access() grants access (the `device` of `pinned`; read once, and again
 * after memres_resource_set_access()), where the kind can tell; otherwise the current context.
 * Thread-safe for distinct buffers.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_SLEEP_ERROR_ASLEEP for a sleeping buffer;
 * %MEMRES_ERROR_INVALID_ARGUMENT when the sizes differ; %MEMRES_ERROR_NO_DRIVER when device memory
 * is involved and no driver loads; %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_buffer_copy_to (MemresBuffer *src, MemresBuffer *dst, MemresStream stream, GError **error)
{
  g_return_val_if_fail (src != NULL, FALSE);
  g_return_val_if_fail (dst != NULL, FALSE);
  return copy (dst, src, stream, error);
}

/**
 * memres_buffer_copy_from:
 * @dst: the buffer to copy into
 * @src: the buffer to copy from, of the same size
 * @stream: the stream the copy is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Copies all of @src into @dst; the same as memres_buffer_copy_to() with the arguments swapped.
 *
 * Errors: those of memres_buffer_copy_to().
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_buffer_copy_from (MemresBuffer *dst, MemresBuffer *src, MemresStream stream, GError **error)
{
  g_return_val_if_fail (src != NULL, FALSE);
  g_return_val_if_fail (dst != NULL, FALSE);
  return copy (dst, src, stream, error);
}

/**
 * memres_buffer_fill:
 * @buf: a #MemresBuffer
 * @pattern: the value to repeat; must fit in @width bytes
 * @width: 1, 2 or 4: bytes per element; the buffer's size must be a multiple of it
 * @stream: the stream the fill is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Fills the whole buffer with @pattern, stored in host byte order. Host-only memory is filled
 * before returning; device memory with cuMemsetD8Async(), cuMemsetD16Async() or
 * cuMemsetD32Async() on @stream, in the contexts memres_buffer_copy_to() uses. Thread-safe for
 * distinct buffers.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_SLEEP_ERROR_ASLEEP for a sleeping buffer;
 * %MEMRES_ERROR_INVALID_ARGUMENT for a width other than 1, 2 or 4, a pattern wider than @width or a
 * size that is not a multiple of @width; %MEMRES_ERROR_NO_DRIVER; %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_buffer_fill (MemresBuffer *buf, guint32 pattern, guint width, MemresStream stream,
                    GError **error)
{
  MemresStreamContext t;
  CUdeviceptr addr;
  gsize size, n, i;
  CUresult res;
  const char *call;

  g_return_val_if_fail (buf != NULL, FALSE);

  if (!check_open (buf, "fill", error))
    return FALSE;
  if (width != 1 && width != 2 && width != 4)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "invalid fill width %u: expected 1, 2 or 4 bytes", width);
      return FALSE;
    }
  if (width < 4 && pattern >> (8 * width) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "fill pattern 0x%x does not fit in %u byte%s", pattern, width,
                   width == 1 ? "" : "s");
      return FALSE;
    }
  size = buf->alloc.size;
  if (size % width != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "buffer size %" G_GSIZE_FORMAT " is not a multiple of the fill width %u", size,
                   width);
      return FALSE;
    }
  if (size == 0)
    return TRUE;
  n = size / width;
  addr = (CUdeviceptr) buf->alloc.address;

  if (is_host_only (buf))
    {
      gpointer p = (gpointer) (guintptr) addr;
      if (width == 1)
        memset (p, (int) pattern, size);
      else if (width == 2)
        for (i = 0; i < n; i++)
          ((guint16 *) p)[i] = (guint16) pattern;
      else
        for (i = 0; i < n; i++)
          ((guint32 *) p)[i] = pattern;
      return TRUE;
    }

  if (!_memres_stream_context_begin (&t, _memres_buffer_context_device (buf), stream, error))
    return FALSE;
  if (width == 1)
    {
      res = t.drv->cuMemsetD8Async (addr, (unsigned char) pattern, n, (CUstream) stream);
      call = "cuMemsetD8Async";
    }
  else if (width == 2)
    {
      res = t.drv->cuMemsetD16Async (addr, (unsigned short) pattern, n, (CUstream) stream);
      call = "cuMemsetD16Async";
    }
  else
    {
      res = t.drv->cuMemsetD32Async (addr, pattern, n, (CUstream) stream);
      call = "cuMemsetD32Async";
    }
  _memres_stream_context_end (&t);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, call);
  return TRUE;
}

static gboolean
check_range (MemresBuffer *buf, gsize offset, gsize n_bytes, GError **error)
{
  if (offset > buf->alloc.size || n_bytes > buf->alloc.size - offset)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "range of %" G_GSIZE_FORMAT " bytes at offset %" G_GSIZE_FORMAT
                   " is outside the buffer of %" G_GSIZE_FORMAT " bytes",
                   n_bytes, offset, buf->alloc.size);
      return FALSE;
    }
  return TRUE;
}

/* memres_buffer_read() (@to_buffer FALSE: from the buffer at @offset into @host) and
 * memres_buffer_write() (TRUE: from @host into the buffer): the buffer open and awake (@what:
 * "read", "write"), the range inside it; memmove() for host-only memory (@host may be inside the
 * buffer: a memoryview of it from Python), else cuMemcpyAsync() on @stream, then a wait for
 * @stream. */
static gboolean
transfer_host (MemresBuffer *buf, const char *what, gsize offset, guintptr host, gsize n_bytes,
               gboolean to_buffer, MemresStream stream, GError **error)
{
  MemresStreamContext t;
  CUdeviceptr at, dst, src;
  CUresult res;
  const char *call = "cuMemcpyAsync";

  if (!check_open (buf, what, error) || !check_range (buf, offset, n_bytes, error))
    return FALSE;
  if (n_bytes == 0)
    return TRUE;
  at = buf->alloc.address + offset;
  dst = to_buffer ? at : host;
  src = to_buffer ? host : at;
  if (is_host_only (buf))
    {
      memmove ((gpointer) (guintptr) dst, (gconstpointer) (guintptr) src, n_bytes);
      return TRUE;
    }
  if (!_memres_stream_context_begin (&t, _memres_buffer_context_device (buf), stream, error))
    return FALSE;
  res = t.drv->cuMemcpyAsync (dst, src, n_bytes, (CUstream) stream);
  if (res == CUDA_SUCCESS)
    {
      call = "cuStreamSynchronize";
      res = t.drv->cuStreamSynchronize ((CUstream) stream);
    }
  _memres_stream_context_end (&t);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, call);
  return TRUE;
}

/**
 * memres_buffer_read:
 * @buf: a #MemresBuffer
 * @offset: where to start reading, in bytes from the start of the buffer
 * @dest: (out caller-allocates) (array length=n_bytes): host memory to copy into
 * @n_bytes: bytes to read
 * @stream: the stream the copy is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Copies bytes from the buffer into host memory and returns when they are there: memmove() for
 * host-only memory (@dest may overlap the range read), otherwise cuMemcpyAsync() on @stream
 * followed by cuStreamSynchronize(), in the contexts memres_buffer_copy_to() uses. Thread-safe for
 * distinct buffers.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_SLEEP_ERROR_ASLEEP for a sleeping buffer;
 * %MEMRES_ERROR_INVALID_ARGUMENT when the range leaves the buffer; %MEMRES_ERROR_NO_DRIVER;
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_buffer_read (MemresBuffer *buf, gsize offset, gpointer dest, gsize n_bytes,
                    MemresStream stream, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (dest != NULL || n_bytes == 0, FALSE);

  return transfer_host (buf, "read", offset, (guintptr) dest, n_bytes, FALSE, stream, error);
}

/**
 * memres_buffer_write:
 * @buf: a #MemresBuffer
 * @offset: where to start writing, in bytes from the start of the buffer
 * @src: (array length=n_bytes): host memory to copy from
 * @n_bytes: bytes to write
 * @stream: the stream the copy is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Copies bytes from host memory into the buffer and returns when they are there: memmove() for
 * host-only memory (@src may overlap the range written), otherwise cuMemcpyAsync() on @stream
 * followed by cuStreamSynchronize(), in the contexts memres_buffer_copy_to() uses. Thread-safe for
 * distinct buffers.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_SLEEP_ERROR_ASLEEP for a sleeping buffer;
 * %MEMRES_ERROR_INVALID_ARGUMENT when the range leaves the buffer; %MEMRES_ERROR_NO_DRIVER;
 * %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_buffer_write (MemresBuffer *buf, gsize offset, gconstpointer src, gsize n_bytes,
                     MemresStream stream, GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (src != NULL || n_bytes == 0, FALSE);

  return transfer_host (buf, "write", offset, (guintptr) src, n_bytes, TRUE, stream, error);
}

/**
 * memres_stream_synchronize:
 * @stream: a CUDA stream; %NULL is the legacy default stream of the current context
 * @error: return location for a #GError, or %NULL
 *
 * Waits until all work on @stream is done (cuStreamSynchronize()). For a default stream (%NULL,
 * %MEMRES_STREAM_LEGACY or the per-thread default stream, the driver's `CU_STREAM_PER_THREAD`),
 * device 0's primary context is made current first when no context is
 * (memres_cuda_ensure_context()). Where no CUDA driver loads, or the driver reports no device,
 * synchronizing a default stream succeeds at once (no device work can be pending), so that code
 * written for a GPU also runs on host memory. Buffers whose last reference went while their
 * stream was capturing a graph are closed first when their capture has ended (see
 * memres_buffer_unref()). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NO_DRIVER (a stream of its own, but no driver); %MEMRES_CUDA_ERROR.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_stream_synchronize (MemresStream stream, GError **error)
{
  const MemresCudaDriver *drv;
  CUresult res;

  /* the legacy and the per-thread default streams (RMM's cuda_stream_legacy and
   * cuda_stream_per_thread) */
  gboolean is_default = _memres_stream_is_default (stream);

  _memres_buffer_deferred_flush ();
  /* Without a driver no device work can be pending: waiting on a default stream is then a
   * no-op, so that code written for a GPU also runs where memres falls back to host memory. */
  if (is_default)
    {
      gint n_devices = 0;

      drv = memres_cuda_get_driver (NULL);
      if (drv == NULL || !memres_cuda_get_device_count (&n_devices, NULL) || n_devices == 0)
        return TRUE;
    }
  else if ((drv = memres_cuda_get_driver (error)) == NULL)
    return FALSE;
  if (is_default && !memres_cuda_ensure_context (0, error))
    return FALSE;
  res = drv->cuStreamSynchronize ((CUstream) stream);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuStreamSynchronize");
  return TRUE;
}

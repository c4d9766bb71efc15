/* memres - CUDA memory resources
 * buffer-streams.c: the stream order of a close on another stream than the buffer's
 * deallocation stream (off the allocate/close hot path, which compares the two streams only). */
#include "memres-private.h"

static gboolean
is_legacy (MemresStream stream)
{
  return stream == NULL || stream == MEMRES_STREAM_LEGACY;
}

gboolean
_memres_buffer_order_close (MemresBuffer *buf, MemresStream stream, GError **error)
{
  MemresStream last = buf->dealloc_stream;
  MemresStreamContext ctx;
  CUevent event = NULL;
  const char *call = "cuStreamGetCtx";
  CUresult r = CUDA_ERROR_INVALID_HANDLE;

  /* Only stream-ordered memory is freed in a stream's order; NULL and MEMRES_STREAM_LEGACY name
   * one stream. */
  if (!(buf->flags & MEMRES_MEMORY_STREAM_ORDERED) || (is_legacy (stream) && is_legacy (last)))
    return TRUE;
  /* Inside a stream capture the graph's own dependencies order a free node: an event recorded
   * outside the capture cannot join it (nor one recorded in it be waited for outside). */
  if (_memres_stream_is_capturing (stream) || _memres_stream_is_capturing (last))
    return TRUE;
  /* The event belongs to the context of the stream it is recorded on. One is kept per resource
   * for the next cross-stream close (a wait takes the record as it is when the wait is queued, so
   * the event may be recorded again at once); a kept one of another context is replaced. */
  if (_memres_stream_context_begin (&ctx, _memres_buffer_context_device (buf), last, NULL))
    {
      event = __atomic_exchange_n (&buf->mr->close_event, NULL, __ATOMIC_ACQ_REL);
      for (int attempt = 0; attempt < 2; attempt++)
        {
          gboolean kept = event != NULL;

          call = "cuEventCreate";
          r = kept ? CUDA_SUCCESS : ctx.drv->cuEventCreate (&event, CU_EVENT_DISABLE_TIMING);
          if (r != CUDA_SUCCESS)
            {
              event = NULL;
              break;
            }
          call = "cuEventRecord";
          r = ctx.drv->cuEventRecord (event, (CUstream) last);
          if (r == CUDA_SUCCESS || !kept)
            break;
          (void) ctx.drv->cuEventDestroy (event);
          event = NULL;
        }
      if (r == CUDA_SUCCESS)
        {
          call = "cuStreamWaitEvent";
          r = ctx.drv->cuStreamWaitEvent ((CUstream) stream, event, 0);
        }
      /* The driver keeps a recorded event until the work it waits for is done. */
      if (event != NULL
          && (r != CUDA_SUCCESS
              || !g_atomic_pointer_compare_and_exchange (&buf->mr->close_event, NULL, event)))
        (void) ctx.drv->cuEventDestroy (event);
      _memres_stream_context_end (&ctx);
      if (r == CUDA_SUCCESS)
        return TRUE;
      if (g_str_equal (call, "cuStreamWaitEvent"))
        return memres_cuda_set_error (error, r, call); /* the closing stream is unusable */
    }
  /* No event on the deallocation stream (destroyed, say): wait for all work of the device. */
  if (_memres_buffer_wait_device (buf))
    return TRUE;
  if (memres_cuda_get_driver (error) == NULL)
    return FALSE;
  return memres_cuda_set_error (error, r, call);
}

gboolean
_memres_buffer_wait_device (MemresBuffer *buf)
{
  return memres_cuda_device_synchronize (MAX (_memres_buffer_context_device (buf), 0), NULL);
}

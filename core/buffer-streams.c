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
  /* The event belongs to the context of the stream it is recorded on. */
  if (_memres_stream_context_begin (&ctx, buf->device, last, NULL))
    {
      call = "cuEventCreate";
      r = ctx.drv->cuEventCreate (&event, CU_EVENT_DISABLE_TIMING);
      if (r == CUDA_SUCCESS)
        {
          call = "cuEventRecord";
          r = ctx.drv->cuEventRecord (event, (CUstream) last);
          if (r == CUDA_SUCCESS)
            {
              call = "cuStreamWaitEvent";
              r = ctx.drv->cuStreamWaitEvent ((CUstream) stream, event, 0);
            }
          /* The driver keeps a recorded event until the work it waits for is done. */
          (void) ctx.drv->cuEventDestroy (event);
        }
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
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  CUcontext context, popped;
  gboolean ok;

  if (drv == NULL || drv->cuCtxSynchronize == NULL || drv->cuCtxPushCurrent == NULL
      || drv->cuCtxPopCurrent == NULL
      || !memres_cuda_get_primary_context (MAX (buf->device, 0), &context, NULL)
      || drv->cuCtxPushCurrent (context) != CUDA_SUCCESS)
    return FALSE;
  ok = drv->cuCtxSynchronize () == CUDA_SUCCESS;
  (void) drv->cuCtxPopCurrent (&popped);
  return ok;
}

/* memres - CUDA memory resources
 * buffer-deferred.c: whether a stream is capturing a graph, and the buffers whose last reference
 * went while their deallocation stream was capturing, whose memory could not be freed then.
 *
 * Memory that is not stream-ordered (vmm, `pinned:mode=legacy`, `managed:pool=none`, and any
 * stack on them) is freed only after a wait for the stream (memres_cuda_stream_synchronize()),
 * which a capturing stream refuses: the wait would invalidate the capture. An explicit close
 * then fails and leaves the buffer open for a close after cuStreamEndCapture(); but the last
 * unref has nobody to report to, and waiting for the whole device instead (its fallback for a
 * dead stream) is refused during a capture as well (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). So
 * such a buffer waits here, held by this list, until a later memres call finds its stream no
 * longer capturing, and is closed then as its last unref would have closed it. Those calls
 * (_memres_buffer_deferred_flush()): memres_buffer_unref() of an open or shared buffer, the
 * wait before any free of memory that is not stream-ordered, memres_resource_trim(),
 * memres_resource_unref() and memres_stream_synchronize(). Each costs one relaxed load while
 * nothing waits. */
#include "memres-private.h"

gint _memres_deferred_closes_ = 0;

/* memres_buffer_unref(), handed over by buffer.c (a call back into buffer.c would make a circle
 * of the core's files, tests/check-call-cycles.sh) */
static void (*unref_again) (MemresBuffer *buf);
static GMutex lock;        /* a leaf: held for the array's changes only */
static GPtrArray *waiting; /* MemresBuffer: open, its one reference this list's */

gboolean
_memres_stream_is_capturing (const MemresCudaDriver *drv, MemresStream stream)
{
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;

  return stream != NULL && stream != MEMRES_STREAM_LEGACY && drv->cuStreamIsCapturing != NULL
         && drv->cuStreamIsCapturing ((CUstream) stream, &status) == CUDA_SUCCESS
         && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static void
deferred_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&lock, phase);
}

/* Whether @buf's deallocation stream is capturing a graph, asked in the stream's own context (the
 * legacy stream is not asked: @buf's device matters for the per-thread default stream only). A
 * failing query says no: the close that follows reports the stream's error itself. */
static gboolean
deallocation_stream_capturing (MemresBuffer *buf)
{
  MemresStreamContext ctx;
  gboolean capturing;

  if (_memres_cuda_driver_if_loaded () == NULL
      || !_memres_stream_context_begin (&ctx, buf->device, buf->dealloc_stream, NULL))
    return FALSE;
  capturing = _memres_stream_is_capturing (ctx.drv, buf->dealloc_stream);
  _memres_stream_context_end (&ctx);
  return capturing;
}

static void
waiting_add (MemresBuffer *buf)
{
  static gsize fork_part_once = 0;

  if (g_once_init_enter (&fork_part_once))
    {
      _memres_fork_add_part (MEMRES_FORK_DEFERRED, deferred_fork);
      g_once_init_leave (&fork_part_once, 1);
    }
  g_mutex_lock (&lock);
  if (waiting == NULL)
    waiting = g_ptr_array_new ();
  g_ptr_array_add (waiting, buf);
  g_atomic_int_inc (&_memres_deferred_closes_);
  g_mutex_unlock (&lock);
}

gboolean
_memres_buffer_defer_close (MemresBuffer *buf, const GError *error,
                            void (*unref) (MemresBuffer *buf))
{
  if (!g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED) || buf->mr == NULL
      || !deallocation_stream_capturing (buf))
    return FALSE;
  g_debug ("A buffer of %" G_GSIZE_FORMAT " bytes lost its last reference while its stream %p "
           "was capturing a graph: it is freed after the capture ends",
           buf->alloc.size, (gpointer) buf->dealloc_stream);
  /* open again, held by the list alone: memres_buffer_unref() closes it later */
  __atomic_store_n (&buf->closed, 0, __ATOMIC_SEQ_CST);
  g_atomic_pointer_set (&unref_again, unref);
  waiting_add (buf);
  return TRUE;
}

void
_memres_buffer_deferred_flush_slow (void)
{
  GPtrArray *ready;

  g_mutex_lock (&lock);
  ready = g_steal_pointer (&waiting);
  g_atomic_int_set (&_memres_deferred_closes_, 0);
  g_mutex_unlock (&lock);
  if (ready == NULL)
    return;
  for (guint i = 0; i < ready->len; i++)
    {
      MemresBuffer *buf = g_ptr_array_index (ready, i);

      /* still capturing: back in the list; else its last unref again, which closes it (or, when
       * its stream captures again by then, hands it back to the list) */
      if (deallocation_stream_capturing (buf))
        waiting_add (buf);
      else
        g_atomic_pointer_get (&unref_again) (buf);
    }
  g_ptr_array_unref (ready);
}

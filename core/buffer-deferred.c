/* memres - CUDA memory resources
 * buffer-deferred.c: the buffers whose last reference went while their deallocation stream was
 * capturing a graph, whose memory could not be freed then.
 *
 * Memory that is not stream-ordered (vmm, `pinned:mode=legacy`, `managed:pool=none`, and any
 * stack on them) is freed only after a wait for the stream (memres_cuda_stream_synchronize()),
 * which a capturing stream refuses: the wait would invalidate the capture. An explicit close
 * then fails and leaves the buffer open for a close after cuStreamEndCapture(); but the last
 * unref has nobody to report to, and waiting for the whole device instead (its fallback for a
 * dead stream) is refused during a capture as well (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). So
 * such a buffer waits here, held by this list, until a later memres call finds its stream no
 * longer capturing, and is closed then as its last unref would have closed it.
 *
 * The calls that look (_memres_buffer_deferred_flush()) are entry points that hold nothing: no
 * lock, no slot call under way (a close inside a layer's slot, which may hold the layer's lock,
 * could wait for that lock forever). memres_buffer_unref() of an open or shared buffer, the
 * close of a shared buffer or on another stream, memres_resource_trim(), memres_resource_unref(),
 * memres_stream_synchronize(), and an allocation that failed (buffer.c tries it again when
 * something was freed); and the end of a thread that left a buffer on its per-thread default
 * stream (owner_exit()). Each costs one relaxed load while nothing waits; while buffers wait, one
 * cuStreamIsCapturing() per stream they wait on. */
#include "memres-private.h"

gint _memres_deferred_closes_ = 0;

/* memres_buffer_unref(), handed over by buffer.c (a call back into buffer.c would make a circle
 * of the core's files, tests/check-call-cycles.sh) */
static void (*unref_again) (MemresBuffer *buf);
static GMutex lock; /* a leaf: held for the array's changes only */
/* A buffer waiting: open, its one reference the list's. @owner: for one freed on the per-thread
 * default stream, the thread whose stream that is (only that thread can ask it, or wait for it);
 * NULL for any other stream. */
typedef struct
{
  MemresBuffer *buf;
  GThread *owner;
} Waiting;
static GArray *waiting; /* Waiting */
/* this thread is closing the buffers of a flush: a flush inside one of those closes (their
 * unref, their resource's last reference) looks no further */
static __thread gboolean flushing;
static guint flush_as (GThread *self);
/* A thread that left a buffer waiting on its per-thread default stream: set to that thread (the
 * Waiting's owner), so that the thread's end looks once more at what it left (no other thread
 * can: they would ask their own per-thread streams). */
static void
owner_exit (gpointer owner)
{
  flush_as (owner);
}
static GPrivate owner_key = G_PRIVATE_INIT (owner_exit);

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
  capturing = _memres_stream_is_capturing (buf->dealloc_stream);
  _memres_stream_context_end (&ctx);
  return capturing;
}

static void
waiting_add (MemresBuffer *buf, GThread *owner)
{
  Waiting w = { buf, owner };
  static gsize fork_part_once = 0;

  if (g_once_init_enter (&fork_part_once))
    {
      _memres_fork_add_part (MEMRES_FORK_DEFERRED, deferred_fork);
      g_once_init_leave (&fork_part_once, 1);
    }
  g_mutex_lock (&lock);
  if (waiting == NULL)
    waiting = g_array_new (FALSE, FALSE, sizeof (Waiting));
  g_array_append_val (waiting, w);
  g_atomic_int_inc (&_memres_deferred_closes_);
  g_mutex_unlock (&lock);
}

/* Whether @error says that the close waited for a stream that captures: memres's refusal
 * (memres_cuda_stream_synchronize()), or the driver's when the capture began between that check
 * and the wait. Judged from the error alone: asking the stream again could find the capture
 * just ended, and the fallback of the last unref, a wait for the whole device, then fails if
 * another capture has begun. A buffer taken in wrongly costs a later look, nothing more. */
static gboolean
refused_for_capture (const GError *error)
{
  return g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED)
         || g_error_matches (error, MEMRES_CUDA_ERROR, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
         || g_error_matches (error, MEMRES_CUDA_ERROR, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

gboolean
_memres_buffer_defer_close (MemresBuffer *buf, const GError *error,
                            void (*unref) (MemresBuffer *buf))
{
  GThread *owner;

  if (buf->mr == NULL || buf->ipc_mapping != NULL || !refused_for_capture (error)
      || (buf->flags & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED))
             != MEMRES_MEMORY_DEVICE_ACCESSIBLE)
    return FALSE;
  g_debug ("A buffer of %" G_GSIZE_FORMAT " bytes lost its last reference while its stream %p "
           "was capturing a graph: it is freed after the capture ends",
           buf->alloc.size, (gpointer) buf->dealloc_stream);
  /* open again, held by the list alone: memres_buffer_unref() closes it later */
  __atomic_store_n (&buf->closed, 0, __ATOMIC_SEQ_CST);
  g_atomic_pointer_set (&unref_again, unref);
  owner = buf->dealloc_stream == (MemresStream) CU_STREAM_PER_THREAD ? g_thread_self () : NULL;
  if (owner != NULL)
    g_private_set (&owner_key, owner);
  waiting_add (buf, owner);
  return TRUE;
}

/* A stream a flush has asked, and its answer. */
typedef struct
{
  MemresStream stream;
  gboolean capturing;
} Asked;

/* Whether @buf's deallocation stream is capturing, asked once a flush: the answers so far in
 * @asked (Asked). */
static gboolean
stream_capturing (GArray *asked, MemresBuffer *buf)
{
  Asked a = { buf->dealloc_stream, FALSE };

  for (guint i = 0; i < asked->len; i++)
    if (g_array_index (asked, Asked, i).stream == a.stream)
      return g_array_index (asked, Asked, i).capturing;
  a.capturing = deallocation_stream_capturing (buf);
  g_array_append_val (asked, a);
  return a.capturing;
}

/* The look of thread @self (g_thread_self(), or the thread that ends: owner_exit()). */
static guint
flush_as (GThread *self)
{
  const MemresAllocation *call_record = _memres_thread.call_record;
  GArray *asked, *ready;
  guint closed = 0;

  if (flushing)
    return 0;
  g_mutex_lock (&lock);
  ready = g_steal_pointer (&waiting);
  g_atomic_int_set (&_memres_deferred_closes_, 0);
  g_mutex_unlock (&lock);
  if (ready == NULL)
    return 0;
  flushing = TRUE;
  asked = g_array_new (FALSE, FALSE, sizeof (Asked));
  for (guint i = 0; i < ready->len; i++)
    {
      Waiting *w = &g_array_index (ready, Waiting, i);

      /* still capturing, or another thread's per-thread stream: back in the list; else its last
       * unref again, which closes it (or, when its stream captures again by now, hands it back
       * to the list) */
      if ((w->owner != NULL && w->owner != self) || stream_capturing (asked, w->buf))
        waiting_add (w->buf, w->owner);
      else
        {
          g_atomic_pointer_get (&unref_again) (w->buf);
          closed++;
        }
    }
  g_array_unref (asked);
  g_array_unref (ready);
  flushing = FALSE;
  /* a tagged buffer's record, when a caller looked from inside its call (tags.h) */
  _memres_thread.call_record = call_record;
  return closed;
}

guint
_memres_buffer_deferred_flush_slow (void)
{
  return flush_as (g_thread_self ());
}

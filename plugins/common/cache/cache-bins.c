/* memres - CUDA memory resources
 * cache-bins.c: the shared bins (per class, under CacheParts.lock: where free blocks go when a
 * front is full or gone, and where every thread finds them) and the events that make reusing a
 * block on another stream safe.
 *
 * Stream rules (docs/cache.md): a block freed on stream S is handed out again for S at once; for
 * another stream S2 only after S2 waits on an event recorded on S after the free. The kind
 * records that event when the block joins a shared bin (cache_event_record(), on the stream the
 * caller is closing on, which is therefore alive); cache_shared_take() makes S2 wait on it
 * (cuStreamWaitEvent). On the legacy default stream, which cannot be gone, no event is recorded
 * at the free: cache_block_event() records one when another stream takes the block. Events are
 * shared: the blocks of a chunk carved together, or the front blocks spilled together, hold
 * references to one event (CacheEvent.refs), and a driver event whose last block is reused goes
 * to CacheParts.spare_events for the next record instead of being destroyed. Front blocks carry
 * no event and are only ever reused on their stream. Without events (CacheParts.events FALSE:
 * memory neither stream-ordered nor device-accessible) every block is on the NULL stream. */
#include "cache-parts.h"

/* The driver, with the primary context of the device current (events belong to the context
 * they are created in); pop with memres_cuda_pop_context (*@pushed). */
const MemresCudaDriver *
cache_context_push (CacheParts *self, gboolean *pushed, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);

  if (drv == NULL || !memres_cuda_push_context (self->device, pushed, error))
    return NULL;
  return drv;
}

/* Refuses @stream while it captures a graph (memres_cuda_check_stream_not_capturing(), asked with
 * the device's primary context current: the per-thread default stream is the current
 * context's), for every allocation of the cache and the arena but a front hit: the graph keeps
 * the address for each of its launches, while the block goes back for the next allocation after
 * its close; and a miss would give idle blocks back to the upstream ordered on the capture
 * (docs/cache.md, docs/arena.md). The legacy default stream cannot capture and is not asked;
 * nor is any stream over memory that needs no events (streams are not used there). */
gboolean
cache_check_not_capturing (CacheParts *self, MemresStream stream, GError **error)
{
  gboolean pushed = FALSE, ok;

  if (!self->events || stream == NULL || stream == MEMRES_STREAM_LEGACY)
    return TRUE;
  if (!memres_cuda_push_context (self->device, &pushed, error))
    return FALSE;
  ok = memres_cuda_check_stream_not_capturing (stream, error);
  memres_cuda_pop_context (pushed);
  return ok;
}

/* A new event recorded on @stream now. Lock held. */
CacheEvent *
cache_event_record (CacheParts *self, MemresStream stream, GError **error)
{
  const MemresCudaDriver *drv;
  gboolean pushed;
  CacheEvent *e;
  CUevent ev = NULL;
  CUresult r;

  if ((drv = cache_context_push (self, &pushed, error)) == NULL)
    return NULL;
  if (self->spare_events->len > 0)
    ev = g_ptr_array_steal_index_fast (self->spare_events, self->spare_events->len - 1);
  else if ((r = drv->cuEventCreate (&ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
    {
      memres_cuda_pop_context (pushed);
      memres_cuda_set_error (error, r, "cuEventCreate");
      return NULL;
    }
  r = drv->cuEventRecord (ev, (CUstream) stream);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    {
      g_ptr_array_add (self->spare_events, ev);
      memres_cuda_set_error (error, r, "cuEventRecord");
      return NULL;
    }
  e = g_new (CacheEvent, 1);
  e->event = ev;
  e->refs = 1;
  e->done = FALSE;
  return e;
}

/* Drops a block's reference to @e (NULL: none); the last one puts the driver event (if it has
 * one) with the spares. Lock held. */
void
cache_event_unref (CacheParts *self, CacheEvent *e)
{
  if (e != NULL && --e->refs == 0)
    {
      if (e->event != NULL)
        g_ptr_array_add (self->spare_events, e->event);
      g_free (e);
    }
}

/* Makes @stream wait for @e. Lock held. */
gboolean
cache_event_wait (CacheParts *self, CacheEvent *e, MemresStream stream, GError **error)
{
  const MemresCudaDriver *drv;
  gboolean pushed;
  CUresult r;

  if ((drv = cache_context_push (self, &pushed, error)) == NULL)
    return FALSE;
  r = drv->cuStreamWaitEvent ((CUstream) stream, e->event, 0);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamWaitEvent");
  return TRUE;
}

/* The event another stream waits for before it takes @b from a shared bin: the one recorded
 * after its free, else, for a block freed on the legacy default stream, one recorded there now
 * (that stream lives as long as the context, so an event recorded later orders the taker after
 * at least the free: blocks freed on it join the shared bins without a cuEventRecord each).
 * NULL when the block has none (it may then serve only its own stream) or the record failed.
 * Lock held. */
CacheEvent *
cache_block_event (CacheParts *self, Block *b)
{
  g_autoptr (GError) local = NULL;

  if (b->event == NULL && b->stream == MEMRES_STREAM_LEGACY
      && (b->event = cache_event_record (self, MEMRES_STREAM_LEGACY, &local)) == NULL)
    g_debug ("cache: no event on the legacy stream for a block of %" G_GUINT64_FORMAT " bytes: %s",
             b->size, local->message);
  return b->event;
}

/* @b (with its event, if any) into the shared bin of its class. Lock held. */
void
cache_shared_push (CacheParts *self, Block *b)
{
  SharedBin *bin = &self->shared[b->cls];

  LIST_PUSH (bin->head, b);
  bin->n++;
  self->shared_cached += b->size;
}

/* @b out of its shared bin (its event still its own). Lock held. */
void
cache_shared_unlink (CacheParts *self, Block *b)
{
  SharedBin *bin = &self->shared[b->cls];

  LIST_UNLINK (bin->head, b);
  b->prev = b->next = NULL;
  bin->n--;
  self->shared_cached -= b->size;
}

/* A block of class @cls from the shared bins for @stream (normalized): one freed on @stream,
 * else one with an event that @stream is made to wait on; NULL when there is none. A block freed
 * on the per-thread default stream is never taken as @stream's own: each thread's is another
 * stream. Lock held. */
Block *
cache_shared_take (CacheParts *self, guint cls, MemresStream stream, guint tag, GError **error)
{
  Block *other = NULL;

  for (Block *b = self->shared[cls].head; b != NULL; b = b->next)
    {
      if (b->tag != tag)
        continue;
      if (b->stream == stream && stream != CU_STREAM_PER_THREAD)
        {
          cache_shared_unlink (self, b);
          cache_event_unref (self, g_steal_pointer (&b->event));
          return b;
        }
      if (other == NULL && (b->event != NULL || b->stream == MEMRES_STREAM_LEGACY))
        other = b;
    }
  if (other == NULL || cache_block_event (self, other) == NULL)
    return NULL;
  if (!cache_event_wait (self, other->event, stream, error))
    return NULL;
  cache_shared_unlink (self, other);
  cache_event_unref (self, g_steal_pointer (&other->event));
  return other;
}

void
cache_parts_clear (CacheParts *self)
{
  g_autoptr (GError) error = NULL;

  if (self->spare_events->len > 0)
    {
      const MemresCudaDriver *drv;
      gboolean pushed;

      if ((drv = cache_context_push (self, &pushed, &error)) != NULL)
        {
          for (guint i = 0; i < self->spare_events->len; i++)
            drv->cuEventDestroy (g_ptr_array_index (self->spare_events, i));
          memres_cuda_pop_context (pushed);
        }
      else
        g_warning ("cache: cannot destroy its events: %s", error->message);
    }
  g_ptr_array_unref (self->spare_events);
}

/* memres - CUDA memory resources
 * arena-segments.c: the segment events of the `arena` kind (memres-segments.h). Each mapped
 * granule is a segment of the arena (base its address, length the granularity). Events are
 * raised with parts.lock dropped, since subscribers may call into memres: arena_granule_map()
 * queues "mapped" (Arena.pending, in the order of the driver calls) and the slot that mapped
 * raises the queue after it unlocks (arena_events_flush(), under ev_lock, so that events reach
 * subscribers in queue order whichever thread raises them, and a slot returns only once every
 * event queued before it unlocked was delivered; each run of events of one kind in the queue is
 * raised as one batch, memres_resource_raise_segment_events(), so that a sleep's thousands of
 * granules change the lookup index once). "About to be unmapped" is queued by arena-unmap.c and
 * delivered before the unmap. A "mapped" event of a mapping rolled back before the slot unlocked
 * is withdrawn (arena_segment_withdraw()). */
#include "arena-private.h"

void
arena_segment_queue (Arena *self, MemresSegmentEvent event, guint g)
{
  PendingEvent e = { arena_granule_address (self, g), event, self->gtag[g] };

  g_array_append_val (self->pending, e);
  __atomic_add_fetch (&self->in_flight, 1, __ATOMIC_SEQ_CST);
}

/* The "mapped" event of granule @g, queued by this very lock hold, withdrawn. */
void
arena_segment_withdraw (Arena *self, guint g)
{
  guint64 base = arena_granule_address (self, g);

  for (guint i = self->pending->len; i-- > 0;)
    {
      PendingEvent *e = &g_array_index (self->pending, PendingEvent, i);

      if (e->base == base && e->event == MEMRES_SEGMENT_MAPPED)
        {
          g_array_remove_index (self->pending, i);
          __atomic_sub_fetch (&self->in_flight, 1, __ATOMIC_SEQ_CST);
          return;
        }
    }
}

/* Raises the queued events, parts.lock not held, each run of one kind as one batch: on return,
 * every event queued before the call was delivered. A subscriber's callback that allocates from
 * this arena on the same thread raises the events its allocation queued from inside the outer
 * loop, in queue order still (the core delivers the rest of the outer batch first). */
void
arena_events_flush (Arena *self)
{
  g_autoptr (GArray) segs = NULL;
  gboolean nested;

  if (__atomic_load_n (&self->in_flight, __ATOMIC_SEQ_CST) == 0)
    return;
  nested = __atomic_load_n (&self->ev_owner, __ATOMIC_RELAXED) == g_thread_self ();
  if (!nested)
    {
      g_mutex_lock (&self->ev_lock);
      self->ev_owner = g_thread_self ();
    }
  segs = g_array_new (FALSE, TRUE, sizeof (MemresSegment));
  for (;;)
    {
      MemresSegmentEvent event = MEMRES_SEGMENT_MAPPED;
      g_autoptr (GError) error = NULL;
      guint n = 0;

      /* the run of events of one kind at the head of the queue */
      g_mutex_lock (&self->parts.lock);
      g_array_set_size (segs, 0);
      if (self->pending->len > 0)
        event = g_array_index (self->pending, PendingEvent, 0).event;
      for (; n < self->pending->len; n++)
        {
          const PendingEvent *e = &g_array_index (self->pending, PendingEvent, n);
          MemresSegment seg = { 0 };

          if (e->event != event)
            break;
          seg.base = e->base;
          seg.length = self->granularity;
          seg.device = self->device;
          seg.handle_types = self->prop.requestedHandleTypes;
          seg.tag = cache_tag_name (e->tag);
          g_array_append_val (segs, seg);
        }
      if (n > 0)
        g_array_remove_range (self->pending, 0, n);
      g_mutex_unlock (&self->parts.lock);
      if (n == 0)
        break;
      if (!memres_resource_raise_segment_events (self->mr, event,
                                                 (const MemresSegment *) segs->data, n, &error))
        g_warning ("arena: %s", error->message);
      __atomic_sub_fetch (&self->in_flight, n, __ATOMIC_SEQ_CST);
    }
  if (!nested)
    {
      self->ev_owner = NULL;
      g_mutex_unlock (&self->ev_lock);
    }
}

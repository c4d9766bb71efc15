/* memres - CUDA memory resources
 * segments.c: segments (memres-segments.h): each resource's subscribers to its segment events,
 * and the events, which change the process-wide index that memres_lookup() reads
 * (segment-index.c, under this file's lock).
 *
 * Events. A kind raises them with memres_resource_raise_segment_event(): under the lock, the
 * index changes (a mapped segment goes in before its event, an unmapping one comes out only after
 * its event was delivered, so callbacks find it) and the resource's subscribers are taken (a
 * reference each); then, with no lock held, each callback runs. A new subscriber is told the
 * segments that exist as mapped (a replay, on the subscribing thread), and the set it is told is
 * exactly those in the index when it was added, under the same lock: every later change reaches
 * it as an event. An event for it raised on another thread while the replay runs waits for the
 * replay to end (not holding the lock), so that a segment is never told grown or unmapping before
 * it was told mapped.
 *
 * Batches. memres_resource_raise_segment_events() raises a run of events of one kind at once: the
 * index changes once for all of them (segment-index.c rewrites each page they touch once, where
 * one event at a time rewrote a crowded page, sorting its segments, at every event), then each
 * event is delivered as one call would deliver it. While a batch is delivered, the thread keeps
 * it on a stack of its own (Delivery): an event raised from one of its callbacks for the same
 * resource (a subscriber allocating from it) first delivers the rest of the batch, so that
 * subscribers see events in the order a kind raising its queue one event at a time gave them. */
#include "memres-private.h"
#include "segment-index.h"

#include <stdlib.h>

typedef struct
{
  gint refs; /* atomic */
  guint id;
  MemresSegmentFunc func;
  gpointer data;
  GDestroyNotify destroy;
  GThread *replayer; /* under lock: the thread telling it the existing segments, or NULL */
  gint gone;         /* atomic: unsubscribed (or its resource finalized): no more calls */
} Subscriber;

/* A resource's subscribers (MemresResource.segments), made at the first subscription. */
struct _MemresSegmentsState
{
  MemresResource *mr;
  GPtrArray *subs; /* Subscriber, in subscription order */
};

/* A batch being delivered on this thread: @n events of @event, the next at @next. */
typedef struct _Delivery Delivery;
struct _Delivery
{
  MemresResource *mr;
  MemresSegmentEvent event;
  GPtrArray *subs;
  const MemresSegment *segs;
  gsize n;
  gsize next;
  Delivery *outer; /* the batch whose callback raised this one, or NULL */
};

static GMutex lock;
static GCond replay_done;
/* this thread's innermost batch, or NULL */
static __thread Delivery *delivering __attribute__ ((tls_model ("initial-exec")));
static GPtrArray *states; /* MemresSegmentsState, under lock: every one that exists */
static guint last_id;     /* under lock */

/* ---- setup ---------------------------------------------------------------------------------- */

static void
segments_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&lock, phase);
  /* the threads that were replaying are gone: nobody waits for them */
  if (phase == MEMRES_FORK_CHILD && states != NULL)
    for (guint i = 0; i < states->len; i++)
      {
        MemresSegmentsState *st = g_ptr_array_index (states, i);

        for (guint j = 0; j < st->subs->len; j++)
          ((Subscriber *) g_ptr_array_index (st->subs, j))->replayer = NULL;
      }
}

/* lock held */
static void
ensure_setup (void)
{
  if (states != NULL)
    return;
  g_atomic_pointer_set (&states, g_ptr_array_new ());
  _memres_fork_add_part (MEMRES_FORK_SEGMENTS, segments_fork);
}

static void
segment_of (const MemresIndexEntry *e, MemresSegment *out)
{
  out->base = e->base;
  out->length = e->end - e->base;
  out->device = e->device;
  out->handle_types = e->handle_types;
  out->tag_id = e->tag_id;
  out->tag = e->tag;
}

/* The segments of @layer in the index, in address order (lock held); with the unmapping ones
 * unless @mapped_only. */
static GArray *
segments_of (MemresResource *layer, gboolean mapped_only)
{
  GPtrArray *live = _memres_index_live ();
  g_autoptr (GPtrArray) mine = g_ptr_array_new ();
  GArray *out;

  for (guint i = 0; i < live->len; i++)
    {
      MemresIndexEntry *e = g_ptr_array_index (live, i);

      if (e->mr == layer && !(mapped_only && e->unmapping))
        g_ptr_array_add (mine, e);
    }
  _memres_index_sort (mine);
  out = g_array_sized_new (FALSE, FALSE, sizeof (MemresSegment), mine->len);
  for (guint i = 0; i < mine->len; i++)
    {
      MemresSegment seg;

      segment_of (g_ptr_array_index (mine, i), &seg);
      g_array_append_val (out, seg);
    }
  return out;
}

/* ---- subscribers ---------------------------------------------------------------------------- */

static Subscriber *
subscriber_ref (Subscriber *s)
{
  g_atomic_int_inc (&s->refs);
  return s;
}

static void
subscriber_unref (gpointer data)
{
  Subscriber *s = data;

  if (!g_atomic_int_dec_and_test (&s->refs))
    return;
  if (s->destroy != NULL)
    s->destroy (s->data);
  g_free (s);
}

/* The layer whose segments a subscription to @mr follows: @mr when its kind has segments,
 * else the first below it through adaptors that pass allocations; NULL when none has. */
static MemresResource *
segments_layer (MemresResource *mr)
{
  for (;;)
    {
      MemresKindFlags flags = memres_kind_get_flags (mr->kind);

      if (flags & MEMRES_KIND_SEGMENTS)
        return mr;
      if (!(flags & MEMRES_KIND_PASSES_ALLOCATIONS) || mr->upstream == NULL)
        return NULL;
      mr = mr->upstream;
    }
}

/* Calls @s for one event, first waiting while another thread tells it the segments that existed
 * when it subscribed (lock not held). */
static void
deliver (Subscriber *s, MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
         guint64 previous_length)
{
  GThread *self = g_thread_self ();

  if (G_UNLIKELY (__atomic_load_n (&s->replayer, __ATOMIC_ACQUIRE) != NULL))
    {
      g_mutex_lock (&lock);
      while (s->replayer != NULL && s->replayer != self)
        g_cond_wait (&replay_done, &lock);
      g_mutex_unlock (&lock);
    }
  /* unsubscribed since the event took its subscribers (by an earlier callback of this very
   * event, say): "no event raised after this returns reaches its callback" */
  if (g_atomic_int_get (&s->gone))
    return;
  s->func (mr, event, seg, previous_length, s->data);
}

/* The rest of batch @d, each event to every subscriber in turn (lock not held). The next event is
 * counted before its callbacks run: a raise from one of them delivers the ones after it. */
static void
delivery_run (Delivery *d)
{
  while (d->next < d->n)
    {
      const MemresSegment *seg = &d->segs[d->next++];

      for (guint i = 0; i < d->subs->len; i++)
        deliver (g_ptr_array_index (d->subs, i), d->mr, d->event, seg, 0);
    }
}

/* Before an event of @mr is raised on this thread: the rest of the batches of @mr this thread is
 * delivering (a callback of one raises it), delivered first. */
static inline void
catch_up (MemresResource *mr)
{
  for (Delivery *d = delivering; G_UNLIKELY (d != NULL); d = d->outer)
    if (d->mr == mr)
      delivery_run (d);
}

/* References to @mr's subscribers (NULL when it has none). lock held. */
static inline __attribute__ ((always_inline)) GPtrArray *
take_subscribers (MemresResource *mr)
{
  MemresSegmentsState *st = mr->segments;
  GPtrArray *subs;

  if (st == NULL || st->subs->len == 0)
    return NULL;
  subs = g_ptr_array_new_full (st->subs->len, subscriber_unref);
  for (guint i = 0; i < st->subs->len; i++)
    g_ptr_array_add (subs, subscriber_ref (g_ptr_array_index (st->subs, i)));
  return subs;
}

/**
 * memres_resource_subscribe_segments:
 * @mr: a resource
 * @func: the callback (see #MemresSegmentFunc)
 * @user_data: passed to @func
 * @destroy: (nullable): called on @user_data once the subscription is gone (after
 *   memres_resource_unsubscribe_segments() or the resource's finalization) and no callback is
 *   running any more
 * @error: return location for a #GError
 *
 * Subscribes @func to the segment events of @mr: mapped, grown, about to be unmapped (see
 * #MemresSegmentEvent). When @mr's kind has no segments but passes allocations through
 * (%MEMRES_KIND_PASSES_ALLOCATIONS: `stats`, `limit`, `track`, `log`, `retry`), the
 * subscription follows the first layer below it that has them, whose resource the callback
 * then receives. Before it returns, @func is called on this thread with
 * %MEMRES_SEGMENT_MAPPED for every segment the resource has now (in address order): a
 * subscriber added at any time sees every segment mapped once, then its growth and its unmap,
 * never an event for a segment it was not told about. Events are delivered on the thread that
 * raised them, with no memres lock held; an "about to be unmapped" event's callbacks all return
 * before the driver unmaps the segment. An event raised on another thread while this call is
 * still telling @func the existing segments waits for it to finish.
 *
 * The subscription lasts until memres_resource_unsubscribe_segments() or until @mr is
 * finalized; it holds no reference on @mr. Thread-safe. No driver call.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @func is %NULL; %MEMRES_ERROR_NOT_SUPPORTED when
 * neither @mr's kind nor one below it through pass-through adaptors has segments (kinds without
 * %MEMRES_KIND_SEGMENTS: `dmr`, `host`, `pinned`...; docs/segments.md says why). @destroy is not
 * called on failure.
 *
 * Returns: the subscription's id (never 0), for memres_resource_unsubscribe_segments(); 0 on
 *   failure
 *
 * Since: 2.0
 */
guint
memres_resource_subscribe_segments (MemresResource *mr, MemresSegmentFunc func, gpointer user_data,
                                    GDestroyNotify destroy, GError **error)
{
  MemresResource *layer;
  MemresSegmentsState *st;
  Subscriber *s;
  g_autoptr (GArray) existing = NULL;
  guint id;

  g_return_val_if_fail (mr != NULL, 0);
  g_return_val_if_fail (error == NULL || *error == NULL, 0);

  if (func == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "subscribing to segment events: the callback is NULL");
      return 0;
    }
  layer = segments_layer (mr);
  if (layer == NULL)
    {
      g_set_error (
          error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
          "a resource of kind \"%s\" has no segment events: its kind does not raise them, nor "
          "one below it through pass-through adaptors (vmm, arena and cache do)",
          memres_kind_get_name (mr->kind));
      return 0;
    }

  s = g_new0 (Subscriber, 1);
  s->refs = 1;
  s->func = func;
  s->data = user_data;
  s->destroy = destroy;
  s->replayer = g_thread_self ();

  g_mutex_lock (&lock);
  ensure_setup ();
  if (++last_id == 0)
    ++last_id;
  id = s->id = last_id;
  if ((st = layer->segments) == NULL)
    {
      st = g_new0 (MemresSegmentsState, 1);
      st->mr = layer;
      st->subs = g_ptr_array_new ();
      layer->segments = st;
      g_ptr_array_add (states, st);
    }
  g_ptr_array_add (st->subs, subscriber_ref (s));
  existing = segments_of (layer, TRUE);
  g_mutex_unlock (&lock);

  for (guint i = 0; i < existing->len; i++)
    func (layer, MEMRES_SEGMENT_MAPPED, &g_array_index (existing, MemresSegment, i), 0, user_data);

  g_mutex_lock (&lock);
  __atomic_store_n (&s->replayer, NULL, __ATOMIC_RELEASE);
  g_cond_broadcast (&replay_done);
  g_mutex_unlock (&lock);
  subscriber_unref (s);
  return id;
}

/**
 * memres_resource_unsubscribe_segments:
 * @mr: the resource given to memres_resource_subscribe_segments()
 * @id: the id it returned
 * @error: return location for a #GError
 *
 * Ends the subscription @id: no event raised after this returns reaches its callback. An event
 * already being delivered on another thread may still call it once; the subscription's
 * destroy notify runs when that call (if any) has returned, on the thread that made it, else
 * before this function returns. Thread-safe; may be called from inside the callback. No driver
 * call.
 *
 * Errors: %MEMRES_ERROR_NOT_FOUND when @id is not a live subscription of @mr (0, already
 * unsubscribed, another resource's); %MEMRES_ERROR_NOT_SUPPORTED when @mr has no segment
 * events at all (as for memres_resource_subscribe_segments()).
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_resource_unsubscribe_segments (MemresResource *mr, guint id, GError **error)
{
  MemresResource *layer;
  Subscriber *found = NULL;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  layer = segments_layer (mr);
  if (layer == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "a resource of kind \"%s\" has no segment events",
                   memres_kind_get_name (mr->kind));
      return FALSE;
    }
  g_mutex_lock (&lock);
  if (layer->segments != NULL && id != 0)
    {
      GPtrArray *subs = layer->segments->subs;

      for (guint i = 0; i < subs->len && found == NULL; i++)
        if (((Subscriber *) g_ptr_array_index (subs, i))->id == id)
          found = g_ptr_array_steal_index (subs, i);
    }
  if (found != NULL)
    g_atomic_int_set (&found->gone, TRUE);
  g_mutex_unlock (&lock);
  if (found == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                   "this resource (kind \"%s\") has no segment subscription %u",
                   memres_kind_get_name (mr->kind), id);
      return FALSE;
    }
  subscriber_unref (found);
  return TRUE;
}

/* ---- events --------------------------------------------------------------------------------- */

/* memres_resource_raise_segment_event() past its checks (inlined there and in
 * memres_resource_raise_segment_events(), which calls it for one segment and for growth). */
static inline __attribute__ ((always_inline)) gboolean
raise_one (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
           GError **error)
{
  g_autoptr (GPtrArray) subs = NULL;
  MemresSegment seg;
  guint64 previous = 0;
  MemresIndexEntry *at;

  catch_up (mr);
  g_mutex_lock (&lock);
  ensure_setup ();
  switch (event)
    {
    case MEMRES_SEGMENT_MAPPED:
      {
        MemresIndexEntry e = { .base = segment->base,
                               .end = segment->base + segment->length,
                               .mr = mr,
                               .device = segment->device,
                               .handle_types = segment->handle_types };

        /* the tag by its name (interned: the core's pointer kept, the id found) */
        if (segment->tag != NULL && (e.tag_id = _memres_tag_find (segment->tag, NULL)) != 0)
          e.tag = _memres_tag_name (e.tag_id);

        /* a segment of its own overlapping the new one */
        if (_memres_index_overlaps (mr, e.base, e.end))
          {
            g_mutex_unlock (&lock);
            g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                         "a resource of kind \"%s\" already has a segment overlapping "
                         "[0x%" G_GINT64_MODIFIER "x, +%" G_GUINT64_FORMAT ")",
                         memres_kind_get_name (mr->kind), segment->base, segment->length);
            return FALSE;
          }
        at = _memres_index_insert (&e);
        break;
      }
    case MEMRES_SEGMENT_GROWN:
      at = _memres_index_find (mr, segment->base);
      if (at == NULL || at->unmapping)
        goto unknown;
      if (segment->base + segment->length < at->end)
        {
          g_mutex_unlock (&lock);
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "a segment of a resource of kind \"%s\" at 0x%" G_GINT64_MODIFIER
                       "x cannot grow from %" G_GUINT64_FORMAT " to %" G_GUINT64_FORMAT
                       " bytes: a growth makes it larger",
                       memres_kind_get_name (mr->kind), segment->base, at->end - at->base,
                       segment->length);
          return FALSE;
        }
      previous = at->end - at->base;
      _memres_index_grow (at, segment->base + segment->length);
      break;
    case MEMRES_SEGMENT_UNMAPPING:
      at = _memres_index_find (mr, segment->base);
      if (at == NULL || at->unmapping)
        goto unknown;
      at->unmapping = TRUE;
      break;
    default:
      g_assert_not_reached ();
    }
  segment_of (at, &seg);
  subs = take_subscribers (mr);
  g_mutex_unlock (&lock);

  for (guint i = 0; subs != NULL && i < subs->len; i++)
    deliver (g_ptr_array_index (subs, i), mr, event, &seg, previous);

  if (event == MEMRES_SEGMENT_UNMAPPING)
    {
      g_mutex_lock (&lock);
      /* not taken by another (forgotten with its resource meanwhile) */
      at = _memres_index_find (mr, seg.base);
      if (at != NULL)
        _memres_index_remove (at);
      g_mutex_unlock (&lock);
    }
  return TRUE;

unknown:
  g_mutex_unlock (&lock);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
               "a resource of kind \"%s\" has no segment at 0x%" G_GINT64_MODIFIER
               "x (or it is already unmapping)",
               memres_kind_get_name (mr->kind), segment->base);
  return FALSE;
}

/* The checks before either raise call changes anything: @mr's kind has segments
 * (MEMRES_ERROR_NOT_SUPPORTED) and, but for an unmapping, each of the @n @segments has a length
 * of at least 1 byte that ends inside the address space (MEMRES_ERROR_INVALID_ARGUMENT); a
 * @batch's message names the segment's place in it. */
static gboolean
segments_acceptable (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segments,
                     gsize n, gboolean batch, GError **error)
{
  if (!(memres_kind_get_flags (mr->kind) & MEMRES_KIND_SEGMENTS))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "%s of a resource of kind \"%s\", which was registered without "
                   "MEMRES_KIND_SEGMENTS",
                   batch ? "segment events" : "a segment event", memres_kind_get_name (mr->kind));
      return FALSE;
    }
  for (gsize i = 0; event != MEMRES_SEGMENT_UNMAPPING && i < n; i++)
    if (segments[i].length == 0 || segments[i].base + segments[i].length <= segments[i].base)
      {
        g_autofree char *which
            = batch ? g_strdup_printf ("segment %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT, i, n)
                    : g_strdup ("a segment");

        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "%s of a resource of kind \"%s\" at 0x%" G_GINT64_MODIFIER
                     "x with a length of %" G_GUINT64_FORMAT
                     " bytes: a length must be at least 1 byte and end inside the address space",
                     which, memres_kind_get_name (mr->kind), segments[i].base, segments[i].length);
        return FALSE;
      }
  return TRUE;
}

/**
 * memres_resource_raise_segment_event:
 * @mr: the instance (a kind registered with %MEMRES_KIND_SEGMENTS raises events for its own
 *   instances only)
 * @event: what happened
 * @segment: for %MEMRES_SEGMENT_MAPPED the whole segment (base, length of at least 1 byte,
 *   device, handle types, and in @segment->tag the tag the memory serves, as
 *   memres_allocation_get_tag() gave it, or %NULL; @segment->tag_id is ignored: the core sets
 *   it from the name, and an unknown name counts as %NULL); for
 *   %MEMRES_SEGMENT_GROWN its base and new, larger length; for %MEMRES_SEGMENT_UNMAPPING its
 *   base (the other fields are ignored, the segment is known)
 * @error: where a refusal is reported, or %NULL
 *
 * For kinds (the plugin SDK): tells memres that a segment of @mr was mapped, grew in place or is
 * about to be unmapped. memres updates the lookup index and calls the subscribers before it
 * returns: the callbacks of %MEMRES_SEGMENT_UNMAPPING have all returned when this call does, so
 * call it before the driver unmap (cuMemUnmap, or giving a chunk back to an upstream), and call
 * %MEMRES_SEGMENT_MAPPED after the memory is mapped and accessible. Call it holding none of the
 * kind's own locks: the callbacks may call into memres, this resource included (and call it
 * from the slots, not from the at_fork slot). A step that failed after its
 * %MEMRES_SEGMENT_UNMAPPING and left the memory mapped raises %MEMRES_SEGMENT_MAPPED again for
 * it. Events of one segment must be raised in order (mapped, grown..., unmapping) and not
 * concurrently; those of different segments may come from any threads at once.
 *
 * Refused, with nothing changed and no subscriber called: a %MEMRES_SEGMENT_MAPPED segment that
 * overlaps another of the same resource, or whose length is 0 or wraps around the address space
 * (%MEMRES_ERROR_INVALID_ARGUMENT); a %MEMRES_SEGMENT_GROWN or %MEMRES_SEGMENT_UNMAPPING for a
 * base that has no segment of @mr, or one already unmapping, or a growth to a smaller or wrapping
 * length (%MEMRES_ERROR_NOT_FOUND for an unknown base, %MEMRES_ERROR_INVALID_ARGUMENT for the
 * length); a kind registered without %MEMRES_KIND_SEGMENTS (%MEMRES_ERROR_NOT_SUPPORTED). The
 * core forgets the segments a resource still has when it is finalized (after its finalize slot),
 * but a kind should tell each one's unmapping.
 *
 * Cost: a lock, an update of the index (in proportion to the 1 MiB pages the segment spans,
 * whatever the number of other segments), and the callbacks. Thread-safe. No driver call.
 *
 * Returns: %TRUE when the index changed and the subscribers were called, %FALSE with @error set
 *   when the event was refused
 *
 * Since: 2.0
 */
gboolean
memres_resource_raise_segment_event (MemresResource *mr, MemresSegmentEvent event,
                                     const MemresSegment *segment, GError **error)
{
  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (segment != NULL, FALSE);
  g_return_val_if_fail (event <= MEMRES_SEGMENT_UNMAPPING, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!segments_acceptable (mr, event, segment, 1, FALSE, error))
    return FALSE;
  return raise_one (mr, event, segment, error);
}

/* The entries of @n new segments of @mr made from @segments, the tags found by name (a name
 * found once for a run of segments of one tag: a sleep's or a wake's batch is of one tag). */
static void
entries_of (MemresResource *mr, const MemresSegment *segments, gsize n, MemresIndexEntry *out)
{
  const char *last = NULL;
  guint last_id = 0;

  for (gsize i = 0; i < n; i++)
    {
      const MemresSegment *seg = &segments[i];
      MemresIndexEntry e = { .base = seg->base,
                             .end = seg->base + seg->length,
                             .mr = mr,
                             .device = seg->device,
                             .handle_types = seg->handle_types };

      if (seg->tag != NULL && seg->tag != last)
        {
          last = seg->tag;
          last_id = _memres_tag_find (seg->tag, NULL);
        }
      if (seg->tag != NULL && (e.tag_id = last_id) != 0)
        e.tag = _memres_tag_name (e.tag_id);
      out[i] = e;
    }
}

static gint
entry_ptr_by_base (gconstpointer a, gconstpointer b)
{
  const MemresIndexEntry *x = *(MemresIndexEntry *const *) a;
  const MemresIndexEntry *y = *(MemresIndexEntry *const *) b;

  return x->base < y->base ? -1 : x->base > y->base;
}

/* The @n segments @segments of @mr into the index, their entries in @at; or, when one overlaps
 * another of them or a segment @mr has, nothing, FALSE and *@bad that one. lock held. */
static gboolean
map_all (MemresResource *mr, const MemresSegment *segments, gsize n, MemresIndexEntry **at,
         gsize *bad)
{
  g_autofree MemresIndexEntry *src = g_new (MemresIndexEntry, n);
  g_autofree MemresIndexEntry **sorted = g_new (MemresIndexEntry *, n);

  gboolean in_order = TRUE;

  entries_of (mr, segments, n, src);
  for (gsize i = 0; i < n; i++)
    {
      sorted[i] = &src[i];
      in_order = in_order && (i == 0 || src[i - 1].base <= src[i].base);
    }
  if (!in_order)
    qsort (sorted, n, sizeof *sorted, entry_ptr_by_base);
  for (gsize i = 0; i + 1 < n; i++)
    if (sorted[i]->end > sorted[i + 1]->base)
      {
        *bad = (gsize) (sorted[i + 1] - src);
        return FALSE;
      }
  if (_memres_index_overlaps_many (mr, sorted, (guint) n))
    {
      /* which one: the first the index finds overlapping */
      for (*bad = 0; *bad < n; (*bad)++)
        if (_memres_index_overlaps (mr, src[*bad].base, src[*bad].end))
          break;
      if (*bad == n) /* cannot be: both read the same pages */
        *bad = 0;
      return FALSE;
    }
  _memres_index_insert_many (src, (guint) n, at);
  return TRUE;
}

/* The @n segments @segments of @mr marked unmapping, their entries in @at; or, when one is unknown,
 * already unmapping or twice in @segments, none, FALSE and *@bad that one. lock held. */
static gboolean
mark_unmapping (MemresResource *mr, const MemresSegment *segments, gsize n, MemresIndexEntry **at,
                gsize *bad)
{
  _memres_index_find_many (mr, segments, n, at);
  for (gsize i = 0; i < n; i++)
    {
      if (at[i] == NULL || at[i]->unmapping)
        {
          *bad = i;
          while (i-- > 0)
            at[i]->unmapping = FALSE;
          return FALSE;
        }
      at[i]->unmapping = TRUE;
    }
  return TRUE;
}

/**
 * memres_resource_raise_segment_events:
 * @mr: the instance (a kind registered with %MEMRES_KIND_SEGMENTS raises events for its own
 *   instances only)
 * @event: what happened to every one of them
 * @segments: (array length=n_segments): the segments, as memres_resource_raise_segment_event()
 *   takes each (for %MEMRES_SEGMENT_MAPPED whole, for %MEMRES_SEGMENT_UNMAPPING their bases);
 *   borrowed: read during the call only
 * @n_segments: how many; 0 does nothing
 * @error: where a refusal is reported, or %NULL
 *
 * For kinds (the plugin SDK): memres_resource_raise_segment_event() for each of @segments, in
 * their order, with the lookup index changed once for all of them: what a kind calls when it
 * maps or unmaps many segments at once (a sleep or a wake of thousands of buffers, a trim). The
 * index rewrites each 1 MiB page they touch once, where one event at a time rewrites a page
 * holding many segments (sorting them) at every event.
 *
 * Subscribers see exactly what @n_segments calls would give them: each segment's event, in the
 * order of @segments, each delivered to every subscriber in subscription order, on this thread,
 * with no memres lock held. For %MEMRES_SEGMENT_MAPPED, every segment is in the index (found by
 * memres_lookup()) before the first callback runs; for %MEMRES_SEGMENT_UNMAPPING, every one stays
 * found until the last callback has returned and none is found once this call returns: call it
 * before the driver unmaps any of them. A subscriber added on another thread meanwhile is told
 * the mapped ones as existing and none of the unmapping ones. A callback that raises an event of
 * @mr on this thread (a subscriber allocating from it) first has the rest of this batch
 * delivered, as a kind raising its queue one event at a time would. %MEMRES_SEGMENT_GROWN events
 * are raised one by one.
 *
 * All or nothing: when one of @segments would be refused by
 * memres_resource_raise_segment_event() (a %MEMRES_SEGMENT_MAPPED one of no length, wrapping
 * around the address space or overlapping a segment @mr has: %MEMRES_ERROR_INVALID_ARGUMENT; a
 * %MEMRES_SEGMENT_UNMAPPING or %MEMRES_SEGMENT_GROWN base that is no segment of @mr or is already
 * unmapping: %MEMRES_ERROR_NOT_FOUND), or a %MEMRES_SEGMENT_MAPPED one overlaps another of
 * @segments (%MEMRES_ERROR_INVALID_ARGUMENT), or a %MEMRES_SEGMENT_UNMAPPING base comes twice
 * (%MEMRES_ERROR_NOT_FOUND: the second is already unmapping), the batch is refused with @error
 * naming that segment's place in @segments, nothing changed and no subscriber called; a kind
 * registered without %MEMRES_KIND_SEGMENTS gets %MEMRES_ERROR_NOT_SUPPORTED. Growth is raised one
 * event at a time, so a refused growth stops there, the ones before it done. Call it holding none
 * of the kind's own locks.
 *
 * Cost: a lock, one update of the index (in proportion to the pages the segments touch and the
 * segments on those pages, sorted once per page), and the callbacks; a second lock for
 * %MEMRES_SEGMENT_UNMAPPING. Thread-safe. No driver call.
 *
 * Returns: %TRUE when the index changed and the subscribers were called (and for 0 segments),
 *   %FALSE with @error set when the batch was refused
 *
 * Since: 2.0
 */
gboolean
memres_resource_raise_segment_events (MemresResource *mr, MemresSegmentEvent event,
                                      const MemresSegment *segments, gsize n_segments,
                                      GError **error)
{
  g_autofree MemresIndexEntry **at = NULL;
  g_autofree MemresSegment *segs = NULL;
  g_autofree guint16 *gen = NULL;
  g_autoptr (GPtrArray) subs = NULL;
  gsize bad = 0;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (segments != NULL || n_segments == 0, FALSE);
  g_return_val_if_fail (event <= MEMRES_SEGMENT_UNMAPPING, FALSE);
  g_return_val_if_fail (n_segments <= G_MAXUINT, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!segments_acceptable (mr, event, segments, n_segments, TRUE, error))
    return FALSE;
  if (event == MEMRES_SEGMENT_GROWN || n_segments == 1)
    {
      for (gsize i = 0; i < n_segments; i++)
        if (!raise_one (mr, event, &segments[i], error))
          {
            g_prefix_error (error, "segment %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT ": ", i,
                            n_segments);
            return FALSE;
          }
      return TRUE;
    }
  if (n_segments == 0)
    return TRUE;

  catch_up (mr);
  at = g_new (MemresIndexEntry *, n_segments);
  segs = g_new (MemresSegment, n_segments);
  g_mutex_lock (&lock);
  ensure_setup ();
  if (event == MEMRES_SEGMENT_MAPPED ? !map_all (mr, segments, n_segments, at, &bad)
                                     : !mark_unmapping (mr, segments, n_segments, at, &bad))
    {
      g_mutex_unlock (&lock);
      if (event == MEMRES_SEGMENT_MAPPED)
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "segment %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT " [0x%" G_GINT64_MODIFIER
                     "x, +%" G_GUINT64_FORMAT
                     ") of a resource of kind \"%s\" overlaps another of the batch or a segment "
                     "it already has; no event raised",
                     bad, n_segments, segments[bad].base, segments[bad].length,
                     memres_kind_get_name (mr->kind));
      else
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                     "segment %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
                     ": a resource of kind \"%s\" has no segment at 0x%" G_GINT64_MODIFIER
                     "x (or it is already unmapping, or comes twice); no event raised",
                     bad, n_segments, memres_kind_get_name (mr->kind), segments[bad].base);
      return FALSE;
    }
  gen = g_new (guint16, n_segments);
  for (gsize i = 0; i < n_segments; i++)
    {
      segment_of (at[i], &segs[i]);
      gen[i] = at[i]->gen;
    }
  subs = take_subscribers (mr);
  g_mutex_unlock (&lock);

  if (subs != NULL)
    {
      Delivery d = { mr, event, subs, segs, n_segments, 0, delivering };

      delivering = &d;
      delivery_run (&d);
      delivering = d.outer;
    }

  if (event == MEMRES_SEGMENT_UNMAPPING)
    {
      gsize m = 0;

      g_mutex_lock (&lock);
      /* those not removed meanwhile (forgotten with their resource): an entry counts its
       * removals */
      for (gsize i = 0; i < n_segments; i++)
        if (at[i]->gen == gen[i] && at[i]->unmapping)
          at[m++] = at[i];
      _memres_index_remove_many (at, (guint) m);
      g_mutex_unlock (&lock);
    }
  return TRUE;
}

/* @mr is being freed (its finalize slot ran): its subscriptions end and the index forgets what
 * it still had (an inherited resource in a forked child, or a kind that did not tell). */
void
_memres_segments_forget (MemresResource *mr)
{
  MemresSegmentsState *st;

  if (g_atomic_pointer_get (&states) == NULL)
    return;
  g_mutex_lock (&lock);
  _memres_index_remove_resource (mr);
  st = g_steal_pointer (&mr->segments);
  if (st != NULL)
    g_ptr_array_remove_fast (states, st);
  g_mutex_unlock (&lock);
  if (st != NULL)
    {
      g_ptr_array_set_free_func (st->subs, subscriber_unref);
      g_ptr_array_unref (st->subs);
      g_free (st);
    }
}

/* snapshot.c: a copy of the segments of @mr in the index, in address order (MemresSegment; the
 * tags borrowed: the index never frees them), taken under the lock. */
GArray *
_memres_segments_copy (MemresResource *mr)
{
  GArray *out;

  if (g_atomic_pointer_get (&states) == NULL)
    return g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  g_mutex_lock (&lock);
  out = segments_of (mr, FALSE);
  g_mutex_unlock (&lock);
  return out;
}

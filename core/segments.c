/* memres - CUDA memory resources
 * segments.c: segments (memres-segments.h): the process-wide index that memres_lookup() reads,
 * and each resource's subscribers to its segment events.
 *
 * The index. Every segment of every resource, in one array sorted by base (then longest first,
 * then oldest first), each entry with the index of its parent, the innermost other segment
 * containing it (segments of one resource never overlap; those of two layers of a stack nest).
 * The writer keeps its own copy (shadow, plain memory, under lock) and, after each change,
 * publishes the entries from the first that changed onward into the table readers see, inside a
 * sequence lock: memres_lookup() takes no lock and writes nothing; it reads the table with
 * atomic loads and retries when the sequence number changed under it. The table readers see is
 * never freed: when it is full a new one twice as large is published and the old one kept on a
 * list of retired tables (a reader may still be inside it), so what is kept is always less than
 * the live table's size, and a reader never reads freed memory or past the end of a table (it
 * searches the table's own capacity, a power of two that never changes: the bases past the
 * entries in use hold the largest address, so the search needs no count).
 *
 * A lookup finds the last entry whose base is at or before the address; when that entry does not
 * hold the address, the innermost one that does is one of its ancestors (laminar ranges), so it
 * follows the parents. The innermost segment is the upper layer's: for `cache>vmm`, the cache's
 * chunk rather than the vmm buffer it lies in. In front of the search, each thread keeps the
 * answers it found in a small table of its own, each tagged with the sequence number it was read
 * at: a publication (any change of the index) makes them all stale at once, so a kept answer is
 * used only while the index is exactly what it was when the answer was read.
 *
 * Events. A kind raises them with memres_resource_raise_segment_event(): under the lock, the
 * index changes (a mapped segment goes in before its event, an unmapping one comes out only after
 * its event was delivered, so callbacks find it) and the resource's subscribers are taken (a
 * reference each); then, with no lock held, each callback runs. A new subscriber is told the
 * segments that exist as mapped (a replay, on the subscribing thread), and the set it is told is
 * exactly those in the index when it was added, under the same lock: every later change reaches
 * it as an event. An event for it raised on another thread while the replay runs waits for the
 * replay to end (not holding the lock), so that a segment is never told grown or unmapping before
 * it was told mapped. */
#include "memres-private.h"

#include <stdlib.h>

typedef struct
{
  guint64 base;
  guint64 end;
  MemresResource *mr;
  gint parent; /* the index of the innermost entry containing this one, -1 for none */
  gint device;
  guint32 handle_types;
  guint32 tag_id;
  const char *tag;
  gboolean unmapping; /* shadow only: its UNMAPPING event is being delivered */
} Entry;

/* What readers see: the entries as arrays, so that the binary search reads the bases alone
 * (8 bytes a segment: 1024 segments in 8 KiB). The header never changes once published. */
typedef struct
{
  MemresResource *mr;
  gint device;
  guint32 handle_types;
  guint32 tag_id;
  const char *tag;
} Payload;

typedef struct
{
  gsize cap;
  guint64 *base;
  guint64 *end;
  gint *parent;
  Payload *payload;
} Table;

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

static GMutex lock;
static GCond replay_done;
static GArray *shadow;     /* Entry, under lock: the writer's copy of the index */
static GPtrArray *states;  /* MemresSegmentsState, under lock: every one that exists */
static guint last_id;      /* under lock */
static GSList *retired;    /* under lock: tables readers may still be reading */
static guint64 index_seq;  /* atomic: odd while the table changes; never wraps */
static Table *index_table; /* atomic */
static gsize index_n;      /* under lock: entries in use in the published table */

/* ---- the index ------------------------------------------------------------------------------ */

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
  if (shadow != NULL)
    return;
  states = g_ptr_array_new ();
  g_atomic_pointer_set (&shadow, g_array_new (FALSE, FALSE, sizeof (Entry)));
  _memres_fork_add_part (MEMRES_FORK_SEGMENTS, segments_fork);
}

#define LOAD(p)     __atomic_load_n ((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n ((p), (v), __ATOMIC_RELAXED)

static void
entry_store (Table *t, gsize i, const Entry *src)
{
  STORE (&t->base[i], src->base);
  STORE (&t->end[i], src->end);
  STORE (&t->parent[i], src->parent);
  STORE (&t->payload[i].mr, src->mr);
  STORE (&t->payload[i].device, src->device);
  STORE (&t->payload[i].handle_types, src->handle_types);
  STORE (&t->payload[i].tag_id, src->tag_id);
  STORE (&t->payload[i].tag, src->tag);
}

/* A table of @cap entries in one block, zero-filled. */
static Table *
table_new (gsize cap)
{
  gsize head = G_STRUCT_OFFSET (Table, payload) + sizeof (Payload *);
  gsize at = (head + 63) & ~(gsize) 63;
  guint8 *block = g_malloc0 (at + cap * (2 * sizeof (guint64) + sizeof (gint) + sizeof (Payload))
                             + sizeof (Payload));
  Table *t = (Table *) block;

  t->cap = cap;
  t->base = (guint64 *) (block + at);
  t->end = t->base + cap;
  t->parent = (gint *) (t->end + cap);
  /* after the parents, aligned for the pointers */
  t->payload = (Payload *) (((guintptr) (t->parent + cap) + 7) & ~(guintptr) 7);
  /* bases past the entries in use are the largest address: a search over the whole capacity
   * (a power of two) never stops on one */
  memset (t->base, 0xff, cap * sizeof (guint64));
  return t;
}

/* Recomputes every parent in the shadow (sorted by base, then longest first). lock held. */
static void
compute_parents (void)
{
  Entry *e = (Entry *) (gpointer) shadow->data;
  g_autofree gint *stack = g_new (gint, shadow->len + 1);
  gint top = 0;

  for (guint i = 0; i < shadow->len; i++)
    {
      while (top > 0 && e[stack[top - 1]].end < e[i].end)
        top--;
      e[i].parent = top > 0 ? stack[top - 1] : -1;
      stack[top++] = (gint) i;
    }
}

/* Publishes the shadow's entries from @from on (those before are unchanged) to the readers'
 * table. lock held. */
static void
publish (guint from)
{
  Table *t = index_table;
  guint64 seq = index_seq;

  compute_parents ();
  if (t == NULL || t->cap < shadow->len)
    {
      gsize cap = MAX (64, t != NULL ? t->cap * 2 : 0);

      while (cap < shadow->len)
        cap *= 2;
      Table *bigger = table_new (cap);

      if (t != NULL)
        {
          gsize keep = MIN (from, t->cap);

          memcpy (bigger->base, t->base, keep * sizeof (guint64));
          memcpy (bigger->end, t->end, keep * sizeof (guint64));
          memcpy (bigger->parent, t->parent, keep * sizeof (gint));
          memcpy (bigger->payload, t->payload, keep * sizeof (Payload));
          retired = g_slist_prepend (retired, t);
        }
      t = bigger;
    }
  STORE (&index_seq, seq + 1);
  __atomic_thread_fence (__ATOMIC_RELEASE);
  __atomic_store_n (&index_table, t, __ATOMIC_RELEASE);
  for (guint i = from; i < shadow->len; i++)
    entry_store (t, i, &g_array_index (shadow, Entry, i));
  for (gsize i = shadow->len; i < index_n; i++)
    STORE (&t->base[i], G_MAXUINT64);
  index_n = shadow->len;
  __atomic_store_n (&index_seq, seq + 2, __ATOMIC_RELEASE);
}

/* Where @e goes in the shadow: after every entry that sorts before it or equal. lock held. */
static guint
insert_position (guint64 base, guint64 end)
{
  guint lo = 0, hi = shadow->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      const Entry *m = &g_array_index (shadow, Entry, mid);

      if (m->base < base || (m->base == base && m->end >= end))
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* The shadow index of @mr's segment at @base, or -1. lock held. */
static gint
find (MemresResource *mr, guint64 base)
{
  guint lo = 0, hi = shadow->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;

      if (g_array_index (shadow, Entry, mid).base < base)
        lo = mid + 1;
      else
        hi = mid;
    }
  for (guint i = lo; i < shadow->len && g_array_index (shadow, Entry, i).base == base; i++)
    if (g_array_index (shadow, Entry, i).mr == mr)
      return (gint) i;
  return -1;
}

/* Inserts @e; returns its index. lock held. */
static guint
shadow_insert (const Entry *e)
{
  guint pos = insert_position (e->base, e->end);

  g_array_insert_val (shadow, pos, *e);
  return pos;
}

static void
segment_of (const Entry *e, MemresSegment *out)
{
  out->base = e->base;
  out->length = e->end - e->base;
  out->device = e->device;
  out->handle_types = e->handle_types;
  out->tag_id = e->tag_id;
  out->tag = e->tag;
}

/* The last answers of a thread: a direct-mapped table keyed by the address's MiB (its low bits,
 * with the higher ones folded in: segments 1 or 2 MiB apart, as a pool's blocks or 2 MiB-aligned
 * reservations lie, take distinct slots up to 128 or 64 of them), each answer valid while
 * index_seq is the even value it was read at (every publication changes it: an answer from
 * before any change of the index, an unmap included, is never used). 64 bytes a slot, 8 KiB a
 * thread, allocated at its first lookup that found something, freed at its exit. */
#define LOOKUP_SLOTS_LOG2 7

typedef struct
{
  guint64 gen; /* the index_seq it was read at; 0 (never a published index's) when empty */
  guint64 base;
  guint64 end;
  MemresResource *mr;
  const char *tag;
  gint device;
  guint32 handle_types;
  guint32 tag_id;
} __attribute__ ((aligned (64))) LookupHit;

typedef struct
{
  LookupHit slot[1 << LOOKUP_SLOTS_LOG2];
} LookupCache;

/* initial-exec as buffer.c's cache: one pointer, no __tls_get_addr on the hit */
static __thread LookupCache *thread_lookup __attribute__ ((tls_model ("initial-exec")));

static void
lookup_cache_free (gpointer data)
{
  if (thread_lookup == data)
    thread_lookup = NULL;
  free (data);
}

static GPrivate lookup_cache_cleanup = G_PRIVATE_INIT (lookup_cache_free);

static inline LookupHit *
lookup_slot (LookupCache *c, guint64 addr)
{
  guint64 mib = addr >> 20;

  return &c->slot[(mib ^ (mib >> LOOKUP_SLOTS_LOG2) ^ (mib >> (2 * LOOKUP_SLOTS_LOG2)))
                  & ((1 << LOOKUP_SLOTS_LOG2) - 1)];
}

static inline void
hit_copy (const LookupHit *h, guint64 addr, MemresLookupInfo *info)
{
  info->resource = h->mr;
  info->segment.base = h->base;
  info->segment.length = h->end - h->base;
  info->segment.device = h->device;
  info->segment.handle_types = h->handle_types;
  info->segment.tag_id = h->tag_id;
  info->segment.tag = h->tag;
  info->offset = addr - h->base;
}

/* The search of the index under its sequence lock; the answer kept in the thread's table. */
G_GNUC_NO_INLINE static gboolean
lookup_slow (guint64 addr, MemresLookupInfo *info)
{
  g_return_val_if_fail (info != NULL, FALSE);

  for (;;)
    {
      guint64 seq = __atomic_load_n (&index_seq, __ATOMIC_ACQUIRE);
      const Table *t;
      const guint64 *lo;
      gssize i;
      gboolean found = FALSE;
      LookupHit hit;

      if (G_UNLIKELY (seq & 1))
        {
          g_thread_yield ();
          continue;
        }
      t = __atomic_load_n (&index_table, __ATOMIC_ACQUIRE);
      if (t == NULL)
        return FALSE;
      /* the last base at or before @addr, without a branch per step: over the whole capacity
       * (a power of two), the unused bases being the largest address */
      lo = t->base;
      for (gsize step = t->cap / 2; step > 0; step /= 2)
        lo = LOAD (&lo[step]) <= addr ? lo + step : lo;
      i = LOAD (lo) <= addr ? lo - t->base : -1;
      while (i >= 0)
        {
          gint parent;

          if (addr < LOAD (&t->end[i]))
            {
              const Payload *p = &t->payload[i];

              hit.gen = seq;
              hit.base = LOAD (&t->base[i]);
              hit.end = LOAD (&t->end[i]);
              hit.mr = LOAD (&p->mr);
              hit.device = LOAD (&p->device);
              hit.handle_types = LOAD (&p->handle_types);
              hit.tag_id = LOAD (&p->tag_id);
              hit.tag = LOAD (&p->tag);
              found = TRUE;
              break;
            }
          parent = LOAD (&t->parent[i]);
          if (parent >= i) /* only a torn read; the sequence check below retries */
            break;
          i = parent;
        }
      __atomic_thread_fence (__ATOMIC_ACQUIRE);
      if (__atomic_load_n (&index_seq, __ATOMIC_RELAXED) != seq)
        continue;
      if (!found)
        return FALSE;
      hit_copy (&hit, addr, info);
      if (G_UNLIKELY (thread_lookup == NULL))
        {
          /* 64-byte slots on lines of their own; freed by this thread's exit */
          LookupCache *c = aligned_alloc (64, sizeof (LookupCache));

          if (c == NULL)
            return TRUE; /* nothing kept; the answer stands */
          memset (c, 0, sizeof (LookupCache));
          thread_lookup = c;
          g_private_set (&lookup_cache_cleanup, thread_lookup);
        }
      *lookup_slot (thread_lookup, addr) = hit;
      return TRUE;
    }
}

/**
 * memres_lookup:
 * @ptr: an address: a device pointer (`(gconstpointer) (guintptr) cudeviceptr`) or a host
 *   pointer
 * @info: (out caller-allocates): where the answer goes; untouched when %FALSE is returned
 *
 * Finds the segment of memres memory that @ptr lies in, the resource whose segment it is and
 * the offset of @ptr inside it. It answers for the memory of kinds that have segments (those
 * registered with %MEMRES_KIND_SEGMENTS: `vmm`, `arena`, and `cache` over any upstream, whose
 * chunks are its segments); for memory of every other kind (`dmr`, `host`, `pinned`, a buffer
 * wrapped with memres_buffer_new_for_pointer()) it answers "not found", by design: an index
 * updated at every allocation would cost every allocation. Where segments nest (a `cache` over
 * `vmm`), it answers the innermost: the upper layer's. A segment is found from just before its
 * %MEMRES_SEGMENT_MAPPED event until its %MEMRES_SEGMENT_UNMAPPING event's callbacks have
 * returned; one byte past its end is not in it.
 *
 * @info->resource is borrowed (transfer none): it is valid while the memory at @ptr is
 * allocated, which the caller knows (it holds a buffer inside the segment, say); take
 * memres_resource_ref() to keep it beyond that.
 *
 * Cost: a few nanoseconds, no lock taken and no shared cache line written. Each thread keeps the
 * answers it found lately (a small table of its own, keyed by the address's MiB), each valid
 * only while the index is unchanged since it was found: a repeated lookup in a segment is a
 * load of the index's generation, two compares and the copy. Otherwise a binary search of the
 * process's segments read under a sequence lock (docs/segments.md, bench/bench-lookup.c). No
 * driver call. Thread-safe: any thread, at any time, concurrently with anything; an answer is
 * never older than the index at the call (a segment unmapped before the call is not found).
 *
 * Returns: %TRUE and @info filled when @ptr lies in a segment; %FALSE (no error: not finding is
 *   no failure) when it does not, %NULL included.
 *
 * Since: 2.0
 */
gboolean
memres_lookup (gconstpointer ptr, MemresLookupInfo *info)
{
  guint64 addr = (guint64) (guintptr) ptr;
  LookupCache *c = thread_lookup;

  /* the hit: this thread found @addr's segment lately and the index has not changed since */
  if (G_LIKELY (c != NULL && info != NULL))
    {
      const LookupHit *h = lookup_slot (c, addr);

      if (h->gen == __atomic_load_n (&index_seq, __ATOMIC_ACQUIRE)
          && addr - h->base < h->end - h->base)
        {
          hit_copy (h, addr, info);
          return TRUE;
        }
    }
  return lookup_slow (addr, info);
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

/* References to @mr's subscribers (NULL when it has none). lock held. */
static GPtrArray *
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
  existing = g_array_new (FALSE, FALSE, sizeof (MemresSegment));

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
  for (guint i = 0; i < shadow->len; i++)
    {
      const Entry *e = &g_array_index (shadow, Entry, i);
      MemresSegment seg;

      if (e->mr != layer || e->unmapping)
        continue;
      segment_of (e, &seg);
      g_array_append_val (existing, seg);
    }
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

/**
 * memres_resource_raise_segment_event:
 * @mr: the instance (a kind registered with %MEMRES_KIND_SEGMENTS raises events for its own
 *   instances only)
 * @event: what happened
 * @segment: for %MEMRES_SEGMENT_MAPPED the whole segment (base, length of at least 1 byte,
 *   device, handle types; @segment->tag_id and @segment->tag must be 0 and %NULL); for
 *   %MEMRES_SEGMENT_GROWN its base and new, larger length; for %MEMRES_SEGMENT_UNMAPPING its
 *   base (the other fields are ignored, the segment is known)
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
 * A segment that overlaps another of the same resource, a %MEMRES_SEGMENT_GROWN or
 * %MEMRES_SEGMENT_UNMAPPING for a base that has no segment of @mr, a kind without
 * %MEMRES_KIND_SEGMENTS, or a length that wraps around the address space is a programmer error
 * (g_critical(), nothing happens). The core forgets the segments a resource still has when it is
 * finalized (after its finalize slot), but a kind should tell each one's unmapping.
 *
 * Cost: a lock, an update of the index (linear in the number of segments after this one's), and
 * the callbacks. Thread-safe. No driver call.
 *
 * Since: 2.0
 */
void
memres_resource_raise_segment_event (MemresResource *mr, MemresSegmentEvent event,
                                     const MemresSegment *segment)
{
  g_autoptr (GPtrArray) subs = NULL;
  MemresSegment seg;
  guint64 previous = 0;
  gint at;
  Entry e;

  g_return_if_fail (mr != NULL);
  g_return_if_fail (segment != NULL);
  g_return_if_fail (memres_kind_get_flags (mr->kind) & MEMRES_KIND_SEGMENTS);
  g_return_if_fail (event <= MEMRES_SEGMENT_UNMAPPING);
  g_return_if_fail (event == MEMRES_SEGMENT_UNMAPPING
                    || (segment->length > 0 && segment->base + segment->length > segment->base));

  g_mutex_lock (&lock);
  ensure_setup ();
  at = find (mr, segment->base);
  switch (event)
    {
    case MEMRES_SEGMENT_MAPPED:
      {
        e = (Entry){ segment->base,
                     segment->base + segment->length,
                     mr,
                     -1,
                     segment->device,
                     segment->handle_types,
                     0,
                     NULL,
                     FALSE };
        /* a segment of its own overlapping the new one (linear, as the publication is) */
        for (guint i = 0; i < shadow->len && g_array_index (shadow, Entry, i).base < e.end; i++)
          if (g_array_index (shadow, Entry, i).mr == mr
              && g_array_index (shadow, Entry, i).end > e.base)
            at = (gint) i;
        if (at >= 0)
          {
            g_mutex_unlock (&lock);
            g_critical (
                "memres_resource_raise_segment_event: a resource of kind \"%s\" already has a "
                "segment overlapping [0x%" G_GINT64_MODIFIER "x, +%" G_GUINT64_FORMAT ")",
                memres_kind_get_name (mr->kind), segment->base, segment->length);
            return;
          }
        publish (shadow_insert (&e));
        break;
      }
    case MEMRES_SEGMENT_GROWN:
      if (at < 0 || g_array_index (shadow, Entry, at).unmapping
          || segment->base + segment->length < g_array_index (shadow, Entry, at).end)
        goto unknown;
      e = g_array_index (shadow, Entry, at);
      previous = e.end - e.base;
      e.end = segment->base + segment->length;
      g_array_remove_index (shadow, at);
      {
        guint pos = shadow_insert (&e); /* not inside MIN(), which evaluates twice */

        publish (MIN ((guint) at, pos));
      }
      break;
    case MEMRES_SEGMENT_UNMAPPING:
      if (at < 0 || g_array_index (shadow, Entry, at).unmapping)
        goto unknown;
      g_array_index (shadow, Entry, at).unmapping = TRUE;
      e = g_array_index (shadow, Entry, at);
      break;
    default:
      g_assert_not_reached ();
    }
  segment_of (&e, &seg);
  subs = take_subscribers (mr);
  g_mutex_unlock (&lock);

  for (guint i = 0; subs != NULL && i < subs->len; i++)
    deliver (g_ptr_array_index (subs, i), mr, event, &seg, previous);

  if (event == MEMRES_SEGMENT_UNMAPPING)
    {
      g_mutex_lock (&lock);
      at = find (mr, seg.base);
      if (at >= 0)
        {
          g_array_remove_index (shadow, at);
          publish ((guint) at);
        }
      g_mutex_unlock (&lock);
    }
  return;

unknown:
  g_mutex_unlock (&lock);
  g_critical ("memres_resource_raise_segment_event: a resource of kind \"%s\" has no segment at "
              "0x%" G_GINT64_MODIFIER "x (or it shrank or is already unmapping)",
              memres_kind_get_name (mr->kind), segment->base);
}

/* @mr is being freed (its finalize slot ran): its subscriptions end and the index forgets what
 * it still had (an inherited resource in a forked child, or a kind that did not tell). */
void
_memres_segments_forget (MemresResource *mr)
{
  MemresSegmentsState *st;
  guint first = G_MAXUINT;

  if (g_atomic_pointer_get (&shadow) == NULL)
    return;
  g_mutex_lock (&lock);
  for (guint i = shadow->len; i-- > 0;)
    if (g_array_index (shadow, Entry, i).mr == mr)
      {
        g_array_remove_index (shadow, i);
        first = i;
      }
  if (first != G_MAXUINT)
    publish (first);
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
 * tags borrowed: the index never frees them), taken under the lock: one pass of the index. */
GArray *
_memres_segments_copy (MemresResource *mr)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (MemresSegment));

  if (g_atomic_pointer_get (&shadow) == NULL)
    return out;
  g_mutex_lock (&lock);
  for (guint i = 0; i < shadow->len; i++)
    {
      const Entry *e = &g_array_index (shadow, Entry, i);
      MemresSegment seg;

      if (e->mr != mr)
        continue;
      segment_of (e, &seg);
      g_array_append_val (out, seg);
    }
  g_mutex_unlock (&lock);
  return out;
}

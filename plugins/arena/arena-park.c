/* memres - CUDA memory resources
 * arena-park.c: deferred coalescing of the `arena` kind's large closes, with exact-size reuse
 * (option park=true; off by default, when nothing is ever parked and a close frees at once).
 *
 * A large extent closed on a stream S (not the per-thread default stream, one handle for many
 * streams) is not inserted into the heap (arena-heap.c) at once: it is parked, as it is, on the
 * list of its size (ParkedList, a hash table by size, newest first). The next large allocation
 * of that size (rounded, arena_round()) on S, for the tag its granules serve, takes it back: no
 * heap work, no mapping change, no driver call (arena_park_take()). A large allocation on S that
 * no parked extent serves, while one or two are parked, is placed without a flush where that
 * needs no driver call (arena_park_miss_place(): a free range of S's own of its size, or
 * settled bytes in mapped granules), so that the parked ones stay. Any other placement (a large
 * allocation of another size or stream, a slab) first flushes every parked extent into the heap
 * (arena_park_flush(), oldest first, coalesced as the close did before): a placement sees every
 * free byte, as it did without parking, so parking never makes the arena create, remap or lend
 * memory that the heap would have served, and the physical peak is not raised by what is parked
 * (no granule is mapped while anything is parked). That is the bound on the bytes parked; the
 * count is bounded too (ARENA_PARKED_MAX: a close past it flushes first, so that a flush stays
 * short). The out-of-memory flush and trim (arena_flush()), a sleep, a resize and finalize
 * flush as well; a snapshot does not (it shows them as pending on their close's stream,
 * arena-snapshot.c), so that taking one between a program's steps changes nothing.
 *
 * A parked extent is free memory: not in use (large_used, the statistics' used bytes, drop at
 * the close), its bytes held as a tagged range's are (arena-heap.c's top), so its granules stay
 * mapped and in the physical bytes (reserved). Counters `parked`, `parked_bytes`, `park_hits`,
 * `park_flushes`.
 *
 * A size's list stays, empty, once its extents went: the mark of a size closed before (at most
 * ARENA_PARKED_SIZES sizes; forgotten all at once past it). A placement of such a size lends
 * nothing to a granule whose memory was lent away before (Arena.no_lend, lent_away: its address
 * unmapped at a reap; arena_span_hold() backs it another way): a training step that repeats its
 * sizes otherwise lent memory every step, as each lent granule's old address, unmapped at the
 * reap, was backed again by lending the step after (22 to 125 cuMemMap a steady resnet18 step);
 * backed once with memory of its own, it stays mapped and the steps reach a fixed point. Lending
 * keeps serving the sizes never closed before (a KV cache grown a token at a time) and the
 * addresses never lent away. (Lending nothing at all for such sizes converged sooner, but the
 * resnet18 trace's replay then peaked at 1.035 times its peak used, h-lend.)
 *
 * Stream safety: the rules of a tagged range. A parked extent is S's until it is flushed, reused
 * by S's own allocations only (S's order puts them after the close); another stream gets its
 * bytes only from the heap, once they settle there (the close's event done). Each close on a
 * stream other than the legacy one records its event at the close (arena_close_event(): the
 * stream may be destroyed after it), kept with the extent and given to its free range at the
 * flush. Closes on the legacy stream (which lives as long as the context) record nothing: a flush
 * gives their ranges one event of the legacy stream's line, after them all (its pending one,
 * arena_close_event(), recorded when a decision needs it). The flush inserts the extents in the
 * order of their closes, so that a range that joins a neighbour freed on the same stream holds
 * the newer event (arena_heap_insert() keeps the inserted one); every other range tagged S in the
 * heap holds an older event than any parked one of S (each close on S parks, or flushes first,
 * and the heap's tagged ranges of S were made by flushes, or by a lending or a resize after the
 * flush they start with), so the newest is kept.
 *
 * All under parts.lock. */
#include "arena-private.h"

void
arena_park_init (Arena *self)
{
  self->parked = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, g_free);
}

/* Finalize (after arena_flush(), which flushed every parked extent). */
void
arena_park_clear (Arena *self)
{
  Parked *p;

  while ((p = self->parked_oldest) != NULL)
    {
      self->parked_oldest = p->newer;
      cache_event_unref (&self->parts, p->event);
      g_free (p);
    }
  while ((p = self->parked_pool) != NULL)
    {
      self->parked_pool = p->next;
      g_free (p);
    }
  g_clear_pointer (&self->parked, g_hash_table_unref);
}

#define KEY(size) GSIZE_TO_POINTER ((gsize) (size))

/* @p out of the list of every parked extent (by close) and the count; its struct kept for the
 * next park. */
static void
unpark (Arena *self, Parked *p)
{
  if (p->older != NULL)
    p->older->newer = p->newer;
  else
    self->parked_oldest = p->newer;
  if (p->newer != NULL)
    p->newer->older = p->older;
  else
    self->parked_newest = p->older;
  self->n_parked--;
  self->parked_large -= p->size;
  if (p->stream == MEMRES_STREAM_LEGACY)
    self->parked_legacy -= p->size;
  p->next = self->parked_pool;
  self->parked_pool = p;
}

/* Takes a parked extent of @size bytes (a multiple of ARENA_ALIGN) closed on @stream (normalized)
 * whose granules serve tag @tag (cache_tag_index()): its address in *@addr, the newest such.
 * FALSE when there is none. */
gboolean
arena_park_take (Arena *self, guint64 size, MemresStream stream, guint tag, guint64 *addr,
                 gboolean *seen)
{
  ParkedList *list = g_hash_table_lookup (self->parked, KEY (size));

  *seen = list != NULL;
  if (list == NULL)
    return FALSE;
  for (Parked **pp = &list->head; *pp != NULL; pp = &(*pp)->next)
    {
      Parked *p = *pp;

      if (p->stream != stream || p->tag != tag)
        continue;
      *pp = p->next;
      *addr = p->addr;
      /* the stream's own allocation comes after the close: the event is not needed */
      cache_event_unref (&self->parts, g_steal_pointer (&p->event));
      unpark (self, p);
      self->park_hits++;
      return TRUE;
    }
  return FALSE;
}

/* A new extent of @size bytes for tag @tag on @stream placed only where it needs no driver call,
 * no settle and no lending: a free range of the stream's own of exactly @size bytes (its bytes
 * held, its granules mapped), else a window at either end of the best-fit settled range that
 * lies in mapped granules (idle ones held again, arena_span_hold()). FALSE, nothing changed,
 * when neither serves. (Taking part of a larger range of the stream's own as well left the
 * resnet18 replay of tests/test-arena-steps.c without a fixed point: 41 cuMemMap at its 8th
 * step.) */
static gboolean
place_backed (Arena *self, guint64 size, MemresStream stream, guint tag, guint64 *addr)
{
  guint64 at;
  Range *r;

  if ((r = arena_heap_fit_serving (self, stream, size, tag, &at)) != NULL && r->size == size)
    {
      *addr = arena_heap_take_at (self, r, at, size);
      arena_span_serve (self, *addr, size, tag);
      return TRUE;
    }
  if ((r = arena_heap_fit_serving (self, NULL, size, tag, &at)) == NULL)
    return FALSE;
  if (arena_span_unbacked (self, at, size) > 0
      && (!arena_heap_window (self, r, size, tag, TRUE, &at)
          || arena_span_unbacked (self, at, size) > 0))
    return FALSE;
  *addr = arena_heap_take_at (self, r, at, size);
  arena_span_serve (self, *addr, size, tag);
  /* every granule mapped: no driver call, no lending (lend_stream is not set), cannot fail */
  return arena_span_hold (self, *addr, size, NULL);
}

/* The most extents parked for which a miss is placed without a flush (arena_park_miss_place()) */
#define MISS_KEEP_MAX 2

/* A large allocation of @size bytes (a multiple of ARENA_ALIGN) on @stream (normalized) for tag
 * @tag that no parked extent served, while one or two extents are parked (MISS_KEEP_MAX): placed
 * without flushing them where that needs no driver call (place_backed()), so that they stay for
 * their sizes' next allocations, and no memory is created or mapped while they are parked. A
 * loop of up to three large sizes on one stream, each freed before the next is allocated
 * (bench/interop.py's empty-del), otherwise flushed every parked extent and placed at every
 * allocation: no park hit, a legacy-stream event recorded every 4th 16 MiB close
 * (/arena/steps/empty-del). With more parked (a training step's), a miss flushes: placing
 * them without a flush too (any number parked, or 4) slowed the resnet18 step's convergence
 * with the device catching up every 20 ops (/arena/steps/resnet18-lagged: memory mapped until
 * step 23, 427 granules remapped, against step 11 and 310 without any such placement and step 4
 * and 154 with at most 2 or 3 parked). FALSE (nothing changed) when parking is off, nothing or
 * more than MISS_KEEP_MAX is parked, settle=eager (whose placements settle first), or no such
 * range fits: the caller flushes and places (arena-alloc.c). */
gboolean
arena_park_miss_place (Arena *self, guint64 size, MemresStream stream, guint tag, guint64 *addr)
{
  if (!self->park || self->n_parked == 0 || self->n_parked > MISS_KEEP_MAX || self->eager_settle
      || stream == NULL || stream == CU_STREAM_PER_THREAD)
    return FALSE;
  return place_backed (self, size, stream, tag, addr);
}

/* Whether [addr, addr + size) lies in a granule that is a shared granule's donor
 * (arena-lend.c). */
static gboolean
touches_donor (Arena *self, guint64 addr, guint64 size)
{
  return self->shared_at[arena_granule (self, addr)] == 2
         || self->shared_at[arena_granule (self, addr + size - 1)] == 2;
}

/* Parks the large extent [addr, addr + size), closed on @stream (normalized). FALSE when it
 * cannot be (parking off, no stream to reuse it on, the per-thread default stream, an end in a
 * shared granule's donor, whose sharing the free may end, or its event could not be recorded):
 * the caller frees it into the heap (arena_extent_free()), after every parked one. */
gboolean
arena_park (Arena *self, guint64 addr, guint64 size, MemresStream stream)
{
  CacheEvent *event = NULL;
  ParkedList *list;
  Parked *p;

  if (!self->park || stream == NULL || stream == CU_STREAM_PER_THREAD)
    return FALSE;
  /* a close in a shared granule's donor may end the sharing (arena_shared_resolve(), at the
   * free): freed at once, after the parked ones (their older events first) */
  if (self->shared->len > 0 && touches_donor (self, addr, size))
    {
      arena_park_flush (self);
      return FALSE;
    }
  if (self->n_parked >= ARENA_PARKED_MAX)
    arena_park_flush (self);
  if (stream != MEMRES_STREAM_LEGACY
      && (event = arena_close_event (self, stream, size, NULL)) == NULL)
    return FALSE;
  if ((list = g_hash_table_lookup (self->parked, KEY (size))) == NULL)
    {
      /* the sizes remembered, bounded: past it, every parked extent flushed and the sizes
       * forgotten */
      if (g_hash_table_size (self->parked) >= ARENA_PARKED_SIZES)
        {
          arena_park_flush (self);
          g_hash_table_remove_all (self->parked);
        }
      list = g_new0 (ParkedList, 1);
      g_hash_table_insert (self->parked, KEY (size), list);
    }
  if ((p = self->parked_pool) != NULL)
    self->parked_pool = p->next;
  else
    p = g_new (Parked, 1);
  p->addr = addr;
  p->size = size;
  p->stream = stream;
  p->event = event;
  p->tag = self->gtag[arena_granule (self, addr)];
  p->next = list->head;
  p->list = list;
  list->head = p;
  p->older = self->parked_newest;
  p->newer = NULL;
  if (p->older != NULL)
    p->older->newer = p;
  else
    self->parked_oldest = p;
  self->parked_newest = p;
  self->n_parked++;
  self->parked_large += size;
  if (stream == MEMRES_STREAM_LEGACY)
    self->parked_legacy += size;
  return TRUE;
}

/* Every parked extent into the heap, oldest first, as arena_extent_free() would have put it at
 * its close: a free range tagged with its stream, with its event (the legacy stream's: one for
 * them all, after them all), joined with its free neighbours of that stream. Each size's list
 * stays, empty. Cannot fail: the events were recorded at the closes, and the legacy stream's
 * pending event is recorded when a decision needs it. */
void
arena_park_flush (Arena *self)
{
  CacheEvent *legacy = NULL;
  Parked *p;

  if (self->n_parked == 0)
    return;
  /* one close of the legacy stream's parked bytes: its pending event, a reference for each */
  if (self->parked_legacy > 0)
    legacy = arena_close_event (self, MEMRES_STREAM_LEGACY, self->parked_legacy, NULL);
  while ((p = self->parked_oldest) != NULL)
    {
      CacheEvent *event = g_steal_pointer (&p->event);

      if (p->stream == MEMRES_STREAM_LEGACY)
        {
          event = legacy;
          event->refs++;
        }
      arena_heap_insert (self, p->addr, p->size, p->stream, event);
      if (self->shared->len > 0)
        arena_shared_resolve (self, p->stream, event, p->addr, p->addr + p->size);
      p->list->head = NULL;
      unpark (self, p);
    }
  cache_event_unref (&self->parts, legacy);
  self->park_flushes++;
}

/* memres - CUDA memory resources
 * arena-alloc.c: the `arena` kind's allocate and close.
 *
 * Small requests (up to max_block) are rounded up to a size class (common/cache/cache-classes.h)
 * and served as the `cache` adaptor serves them, from the parts of plugins/common/cache/: the
 * calling thread's front (front_try_allocate(), inline, no lock), else the shared bins (for another
 * stream after a wait on the block's event), else a new slab: an extent of the address range
 * (arena_extent_new(), from the top of a settled range down) carved into blocks of the class, chunk
 * bytes for the classes up to chunk/16, one block for the larger ones. A close puts the block into
 * the front, or the shared bins with an event recorded on its stream. Slabs go back to the range
 * when all their blocks are idle, at trim and at the out-of-memory flush.
 *
 * Large requests are rounded up to ARENA_ALIGN bytes and placed best-fit in the range
 * (arena-heap.c); a close makes the extent a free range tagged with the closing stream, reusable
 * at once on it, by every stream once settled.
 *
 * Out of memory (physical memory, or address space): every thread's front is drained into the
 * shared bins, the slabs whose blocks are all idle go back to the range, the tagged ranges are
 * settled, and the allocation is tried once more. */
#include "arena-private.h"

#include "../common/alloc-error.h"

/* The out-of-memory flush: parked extents into the heap, fronts drained, idle slabs returned,
 * ranges settled. Lock held. */
gboolean
arena_flush (Arena *self, GError **error)
{
  Chunk *chunk, *next;
  gboolean synced = FALSE;

  arena_park_flush (self);
  cache_fronts_stop (&self->parts);
  for (Front *f = self->parts.fronts; f != NULL; f = f->next)
    cache_front_drain (&self->parts, f);
  cache_fronts_resume (&self->parts);
  for (chunk = self->chunks; chunk != NULL; chunk = chunk->next)
    chunk->n_idle = 0;
  for (guint c = 0; c < self->parts.n_classes; c++)
    for (Block *b = self->parts.shared[c].head; b != NULL; b = b->next)
      b->chunk->n_idle++;
  for (chunk = self->chunks; chunk != NULL; chunk = next)
    {
      guint64 class_bytes = (guint64) chunk->n_blocks * chunk->blocks[0].size;

      next = chunk->next;
      /* a sleeping tag's slab stays, without memory, until its wake */
      if (chunk->n_idle != chunk->n_blocks || chunk->asleep)
        continue;
      /* the blocks' last users may have been any stream */
      if (!synced && !memres_cuda_device_synchronize (self->device, error))
        return FALSE;
      synced = TRUE;
      for (guint i = 0; i < chunk->n_blocks; i++)
        {
          cache_shared_unlink (&self->parts, &chunk->blocks[i]);
          cache_event_unref (&self->parts, g_steal_pointer (&chunk->blocks[i].event));
        }
      LIST_UNLINK (self->chunks, chunk);
      self->slab_bytes -= class_bytes;
      arena_extent_free (self, chunk->addr, chunk->size, NULL, NULL);
      g_free (chunk);
    }
  if (!arena_heap_settle (self, TRUE, error))
    return FALSE;
  arena_lend_reap (self);
  return TRUE;
}

/* arena_extent_new() (for a slab with @slab) with the out-of-memory flush and one more try. When
 * backing the extent would create memory while granules are idle, those are unmapped first
 * (arena_unmap_idle(), which drops the lock to tell their segments' subscribers) and the placement
 * made again; after a few rounds lost to other threads, it creates. Spares left over are released.
 * Lock held. */
static gboolean
extent_new_or_flush (Arena *self, guint64 size, gboolean slab, MemresStream tag, guint owner,
                     guint64 *addr, GError **error)
{
  gboolean flushed = FALSE, ok = FALSE;
  guint n_resv = self->n_resv;

  self->va_refused = 0;
  /* every free byte in the heap: a placement sees the parked extents too (arena-park.c) */
  arena_park_flush (self);
  arena_lend_reap (self); /* lent memory's old addresses, once drained */
  for (guint round = 0;; round++)
    {
      GError *local = NULL;

      self->want_unmap = 0;
      self->no_unmap = round >= 4;
      if (arena_extent_new (self, size, slab, tag, owner, addr, &local))
        {
          ok = TRUE;
          break;
        }
      if (local == NULL && self->want_unmap > 0)
        {
          if (!arena_unmap_idle (self, self->want_unmap, FALSE, error))
            break;
          continue;
        }
      g_assert (local != NULL);
      if (flushed || !g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
        {
          g_propagate_error (error, local);
          break;
        }
      g_clear_error (&local);
      flushed = TRUE;
      self->oom_flushes++;
      arena_headroom_reset (self); /* the retry moves idle granules (arena-headroom.c) */
      if (!arena_flush (self, error))
        break;
    }
  self->no_unmap = FALSE;
  arena_spares_release (self);
  if (!ok)
    arena_reservations_drop_empty (self, n_resv); /* what it reserved for itself */
  return ok;
}

/* A new slab of class @cls for @stream (normalized) and tag @tag (cache_tag_index()): its first
 * block, the others in the shared bins (with an event recorded on @stream, off the legacy stream,
 * which other streams wait for). Lock held. */
static Block *
slab_new (Arena *self, guint cls, MemresStream stream, guint tag, GError **error)
{
  gsize csize = cache_class_size (cls);
  guint n = cls < self->n_chunk_classes ? (guint) (self->chunk_size / csize) : 1;
  guint64 bytes = arena_round ((guint64) n * csize);
  CacheEvent *e = NULL;
  Chunk *chunk;
  guint64 addr;

  if (!extent_new_or_flush (self, bytes, TRUE, stream, tag, &addr, error))
    return NULL;
  /* without an event (the record failed) the other blocks serve their own stream only */
  if (n > 1 && stream != MEMRES_STREAM_LEGACY)
    e = cache_event_record (&self->parts, stream, NULL);
  chunk = g_malloc0 (sizeof (Chunk) + n * sizeof (Block));
  chunk->addr = addr;
  chunk->size = bytes;
  chunk->n_blocks = n;
  chunk->tag = (guint8) tag;
  LIST_PUSH (self->chunks, chunk);
  self->slab_bytes += (guint64) n * csize;
  for (guint i = 0; i < n; i++)
    {
      Block *b = &chunk->blocks[i];

      b->address = addr + (guint64) i * csize;
      b->chunk = chunk;
      b->cls = (guint16) cls;
      b->size = csize;
      b->stream = stream;
      b->tag = (guint8) tag;
      if (i > 0)
        {
          b->event = e;
          cache_shared_push (&self->parts, b);
        }
    }
  if (e != NULL)
    e->refs = n - 1;
  self->misses++;
  return &chunk->blocks[0];
}

G_GNUC_NO_INLINE
static gboolean
allocate_slow (Arena *self, guint cls, gsize size, MemresStream stream, guint tag,
               MemresAllocation *alloc, GError **error)
{
  GError *local = NULL;
  Block *b;

  g_mutex_lock (&self->parts.lock);
  b = cache_shared_take (&self->parts, cls, stream, tag, &local);
  if (b != NULL)
    self->parts.shared_hits[cls]++;
  else if (local == NULL)
    b = slab_new (self, cls, stream, tag, &local);
  if (b != NULL)
    arena_used_note (self);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  if (b == NULL)
    {
      g_propagate_error (error, local);
      alloc_error_prefix (error, size);
      return FALSE;
    }
  fill_allocation (alloc, b, size);
  return TRUE;
}

G_GNUC_NO_INLINE
static gboolean
allocate_large (Arena *self, gsize size, MemresStream stream, guint tag, MemresAllocation *alloc,
                GError **error)
{
  guint64 rounded = arena_round (size);
  guint64 addr;
  gboolean ok, seen = FALSE;
  MemresStream s = cache_normalize_stream (&self->parts, stream);

  g_mutex_lock (&self->parts.lock);
  /* park=true: an extent of this size parked by a close on this stream, taken back as it is
   * (arena-park.c); else placed, and when the size was closed before (a repeating step's),
   * lending nothing to an address whose memory was lent away before (arena-park.c's top) */
  if (!(ok = self->park && arena_park_take (self, rounded, s, tag, &addr, &seen))
      && !(ok = arena_park_miss_place (self, rounded, s, tag, &addr)))
    {
      self->no_lend = seen;
      ok = extent_new_or_flush (self, rounded, FALSE, s, tag, &addr, error);
      self->no_lend = FALSE;
    }
  else if (self->retired->len > 0)
    arena_lend_reap (self); /* as every placement does: lent memory's old addresses, drained */
  if (ok)
    {
      self->large_used += rounded;
      self->large_allocs++;
      arena_used_note (self);
      if ((guint64) self->n_mapped * self->granularity > self->release_threshold)
        {
          g_autoptr (GError) local = NULL;

          if (!arena_release_idle (self, self->release_threshold, &local))
            g_debug ("arena: giving idle granules back failed: %s", local->message);
        }
    }
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  if (!ok)
    {
      alloc_error_prefix (error, size);
      return FALSE;
    }
  alloc->address = addr;
  alloc->size = size; /* the extent: size rounded up to ARENA_ALIGN (arena_round()) */
  alloc->plugin_data = NULL;
  return TRUE;
}

/* Every allocation but a front hit: a stream that is capturing a graph is refused first, as the
 * pool kinds refuse it (cache_check_not_capturing(); docs/arena.md, "Graph capture"); a front hit
 * makes no driver call, as in the cache. */
G_GNUC_NO_INLINE
static gboolean
allocate_general (MemresResource *mr, gsize size, MemresStream stream, guint tag,
                  MemresAllocation *alloc, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  Front *f;

  if (!cache_check_not_capturing (&self->parts, stream, error))
    return FALSE;
  if (size > self->parts.max_block)
    {
      if (arena_wants_own (self, size))
        return arena_own_allocate (self, size, alloc, error);
      return allocate_large (self, size, stream, tag, alloc, error);
    }
  f = front_get_for (mr, &self->parts);
  if (f != NULL
      && front_try_allocate_tagged (f, &self->parts, cache_class_of (size), size, stream, TRUE, tag,
                                    alloc))
    return TRUE;
  return allocate_slow (self, cache_class_of (size), size,
                        cache_normalize_stream (&self->parts, stream), tag, alloc, error);
}

/* An allocation for tag @tag (cache_tag_index(), 0 untagged): a block of a slab of that tag, or
 * an extent in granules that serve it; the hot path is the cache parts' hit
 * (cache_hit_allocate_tagged(), the cache's too) on a block of that tag. */
G_ALWAYS_INLINE static inline gboolean
allocate_for (MemresResource *mr, gsize size, MemresStream stream, guint tag,
              MemresAllocation *alloc, GError **error)
{
  if (cache_hit_allocate_tagged (mr, size, stream, TRUE, tag, alloc))
    return TRUE;
  return allocate_general (mr, size, stream, tag, alloc, error);
}

gboolean
arena_allocate_for (MemresResource *mr, gsize size, MemresStream stream, guint tag,
                    MemresAllocation *alloc, GError **error)
{
  return allocate_for (mr, size, stream, tag, alloc, error);
}

/* A marked record's allocation: under the buffer's tag (none when the core's tag is not one that
 * the record's stack wants). */
G_GNUC_NO_INLINE
static gboolean
allocate_tagged (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                 GError **error)
{
  const char *name = memres_allocation_get_tag (alloc);

  return allocate_for (mr, size, stream, name == NULL ? 0 : cache_tag_index (name), alloc, error);
}

/* The allocate slot: arena_allocate_for() the buffer's tag. The core marks a tagged buffer's
 * record in a stack that can sleep (MEMRES_ALLOCATION_TAGGED in its size, memres-plugin.h): only
 * a marked record asks memres_allocation_get_tag(), out of line; an untagged allocation reads the
 * record it is about to fill and runs the hit path for "no tag", whose tag compares fold away. */
gboolean
arena_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  if (G_UNLIKELY (alloc->size == MEMRES_ALLOCATION_TAGGED))
    return allocate_tagged (mr, size, stream, alloc, error);
  return allocate_for (mr, size, stream, 0, alloc, error);
}

/* The tag @alloc (one of this arena's) serves: its block's, its extent's granules', 0 for a
 * buffer of its own memory. Lock not needed for a block; held or not for an extent (its first
 * granule's tag does not change while it is live). */
guint
arena_tag_of (Arena *self, const MemresAllocation *alloc)
{
  if (alloc->size <= self->parts.max_block)
    return ((const Block *) alloc->plugin_data)->tag;
  if (arena_is_own (alloc))
    return 0;
  return self->gtag[arena_granule (self, alloc->address)];
}

/* The front had no room: a bigger lease, else the shared bins with an event on @stream (which
 * the class's front blocks freed on @stream join). */
G_GNUC_NO_INLINE
static gboolean
deallocate_slow (Arena *self, Front *f, Block *b, MemresStream stream)
{
  g_mutex_lock (&self->parts.lock);
  if (cache_front_lease_put (&self->parts, f, b, G_MAXUINT64))
    {
      g_mutex_unlock (&self->parts.lock);
      return TRUE;
    }
  cache_shared_put (&self->parts, f, b, stream);
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

G_GNUC_NO_INLINE
static gboolean
deallocate_general (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                    GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  Block *b;
  Front *f;

  if (alloc->size > self->parts.max_block && arena_is_own (alloc))
    return arena_own_free (self, alloc, stream, error);
  if (alloc->size > self->parts.max_block)
    {
      guint64 rounded = arena_round (alloc->size);
      gboolean ok;

      g_mutex_lock (&self->parts.lock);
      /* a sleeping extent is free and settled at once: no work can use memory it has not got */
      if (G_UNLIKELY (self->asleep_large != NULL)
          && arena_sleep_forget (self, alloc->address, rounded))
        ok = arena_extent_free (self, alloc->address, rounded, NULL, error);
      else
        {
          MemresStream s = cache_normalize_stream (&self->parts, stream);

          /* parked for the next allocation of its size on its stream (arena-park.c), else free */
          ok = arena_park (self, alloc->address, rounded, s)
               || arena_extent_free (self, alloc->address, rounded, s, error);
        }
      if (ok)
        self->large_used -= rounded;
      g_mutex_unlock (&self->parts.lock);
      return ok;
    }
  b = alloc->plugin_data;
  if (G_UNLIKELY (b->size == ARENA_BLOCK_ASLEEP)) /* its tag sleeps: parked (arena-sleep.c) */
    {
      g_mutex_lock (&self->parts.lock);
      arena_sleep_block_closed (self, b);
      g_mutex_unlock (&self->parts.lock);
      return TRUE;
    }
  b->stream = cache_normalize_stream (&self->parts, stream);
  f = front_get_for (mr, &self->parts);
  if (f != NULL && front_try_deallocate (f, &self->parts, b))
    return TRUE;
  return deallocate_slow (self, f, b, b->stream);
}

/* The deallocate slot's hot path: cache_hit_deallocate() (cache-parts.h), the cache's too. */
gboolean
arena_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  if (cache_hit_deallocate (mr, alloc, stream))
    return TRUE;
  return deallocate_general (mr, alloc, stream, error);
}

/* memres - CUDA memory resources
 * cache-alloc.c: the `cache` adaptor's allocate and close (deallocate), from the fast path to a
 * miss.
 *
 * An allocate: cache_allocate() finds the calling thread's front of this instance without a call
 * (ThreadFronts.last_mr) and takes a block of the request's class freed on the same stream
 * (front_try_allocate(), inline from cache-parts.h); else allocate_general() (the front found or
 * made, or a request above max_block: direct_allocate()), else allocate_slow() under the lock:
 * the shared bins (for another stream, with a wait on the block's event), then the upstream
 * (cache-upstream.c). A close is the same walk: cache_deallocate() puts the block into the front
 * when its class has a slot and the front's lease has room; else deallocate_slow() grows the
 * lease, or moves the block to the shared bins with an event, or past max_cached gives it back
 * to the upstream. */
#include "cache-private.h"

/* Above max_block (or tagged, over an upstream that places by tag: Cache.by_tag): an upstream
 * allocation of the buffer's own, not cached. */
G_GNUC_NO_INLINE
static gboolean
direct_allocate (MemresResource *mr, Cache *self, gsize size, MemresStream stream,
                 MemresAllocation *alloc, GError **error)
{
  if (!upstream_allocate (mr, self, size, stream, memres_allocation_get_tag (alloc), FALSE, alloc,
                          error))
    return FALSE;
  DirectLive *live = g_new (DirectLive, 1);

  live->size = alloc->size;
  live->stream = stream;
  g_mutex_lock (&self->parts.lock);
  self->direct++;
  self->direct_used += alloc->size;
  self->reserved += alloc->size;
  update_highs (self);
  if (self->direct_live == NULL)
    self->direct_live = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  g_hash_table_insert (self->direct_live, GSIZE_TO_POINTER (alloc->address), live);
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

G_GNUC_NO_INLINE
static gboolean
direct_deallocate (MemresResource *mr, Cache *self, MemresAllocation *alloc, MemresStream stream,
                   GError **error)
{
  gsize size = alloc->size;
  guint64 address = alloc->address;
  gboolean ok;

  /* a sleeping one's segment was told unmapped at its sleep (cache-sleep.c) */
  if (G_UNLIKELY (self->asleep_tags != 0 && cache_direct_is_asleep (self, alloc)))
    ok = memres_upstream_deallocate (self->self_mr, alloc, stream, error);
  else
    ok = upstream_give_back (self, alloc, memres_allocation_get_tag (alloc), FALSE, stream, error);

  /* a failed free that left the allocation in place leaves the buffer open (the core's rule) */
  if (!ok && alloc->address == address)
    return FALSE;
  g_mutex_lock (&self->parts.lock);
  self->direct_used -= size;
  self->reserved -= size;
  if (self->direct_live != NULL)
    g_hash_table_remove (self->direct_live, GSIZE_TO_POINTER (address));
  g_mutex_unlock (&self->parts.lock);
  return ok;
}

/* No block of @cls and tag @tag freed on @stream (normalized) in the front: the calling thread's
 * front for a larger class (large classes only), the shared bins, then a new block from the
 * upstream (for @tag: a chunk serves one tag). */
G_GNUC_NO_INLINE
static gboolean
allocate_slow (MemresResource *mr, Cache *self, guint cls, gsize size, MemresStream stream,
               guint tag, MemresAllocation *alloc, GError **error)
{
  GError *local = NULL;
  MemresAllocation up;
  Retired retired = { NULL, NULL };
  Block *b;
  guint last = cls, n;

  if (cls >= self->n_chunk_classes)
    last = MIN (cls + CACHE_FIT_CLASSES, self->parts.n_classes - 1);
  g_mutex_lock (&self->parts.lock);
  b = NULL;
  for (guint c = cls; b == NULL && local == NULL && c <= last; c++)
    {
      b = c > cls ? cache_own_front_take (&self->parts, c, stream, tag) : NULL;
      if (b == NULL)
        b = cache_shared_take (&self->parts, c, stream, tag, &local);
    }
  if (b != NULL)
    {
      self->parts.shared_hits[cls]++;
      b->fresh = FALSE; /* handed out: work may touch it from now on (cache-sleep.c) */
    }
  else if (local == NULL && cls >= self->n_chunk_classes)
    recycle_idle (self, cls, stream, &retired);
  g_mutex_unlock (&self->parts.lock);
  retired_free (self, &retired, stream);
  /* a miss: the upstream is asked without the lock, then the block goes in under it */
  if (b == NULL && local == NULL && block_memory (mr, self, cls, stream, tag, &up, &n, &local))
    {
      g_mutex_lock (&self->parts.lock);
      if ((b = block_new (mr, self, cls, stream, tag, &up, n, &local)) != NULL)
        {
          self->misses[cls]++;
          update_highs (self);
        }
      g_mutex_unlock (&self->parts.lock);
      if (b == NULL)
        upstream_give_back (self, &up, cache_tag_name (tag), TRUE, stream, NULL);
    }
  if (b == NULL)
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  fill_allocation (alloc, b, size);
  return TRUE;
}

/* An allocation for tag @tag (cache_tag_index(), 0 untagged): a block of that tag (Block.tag).
 * Every allocation but a front hit refuses a stream that is capturing a graph
 * (cache_check_not_capturing()): a miss there gave idle blocks back to the upstream ordered on
 * the capture, where a free node took them out of the cache's hands (docs/cache.md). */
G_GNUC_NO_INLINE
static gboolean
allocate_general (MemresResource *mr, gsize size, MemresStream stream, guint tag,
                  MemresAllocation *alloc, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  Front *f;

  if (!cache_check_not_capturing (&self->parts, stream, error))
    return FALSE;
  if (G_UNLIKELY (cache_is_direct (self, alloc, size)))
    return direct_allocate (mr, self, size, stream, alloc, error);
  f = front_get_for (mr, &self->parts);
  if (f != NULL
      && front_try_allocate_tagged (f, &self->parts, cache_class_of (size), size, stream, TRUE, tag,
                                    alloc))
    return TRUE;
  return allocate_slow (mr, self, cache_class_of (size), size,
                        cache_normalize_stream (&self->parts, stream), tag, alloc, error);
}

/* A marked record's allocation (a tagged buffer in a stack that can sleep, or below a layer
 * that reads tags): above an upstream that places by tag, the upstream's own
 * (cache_is_direct()); over one that can sleep (Cache.by_tag_blocks), a block of the buffer's
 * tag, so that the blocks and chunks a tag's buffers used are that tag's alone, and its sleep
 * gives back its free ones (cache-sleep.c) and no other tag's; elsewhere a block of no tag. Its
 * hit path is cache_allocate()'s with the tag's index (found through the thread's memo of its
 * last tag, cache_tag_index_cached()): the front of the instance the thread used last, a block
 * of the class, the stream and the tag. */
G_GNUC_NO_INLINE
static gboolean
allocate_tagged (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                 GError **error)
{
  ThreadFronts *tf = thread_fronts_get ();
  Cache *self;
  const char *name;
  guint tag = 0;

  if (G_LIKELY (tf != NULL && __atomic_load_n (&tf->last_mr, __ATOMIC_RELAXED) == mr))
    {
      Front *f = __atomic_load_n (&tf->last_front, __ATOMIC_RELAXED);

      self = (Cache *) f->parts; /* CacheParts first in the instance */
      /* hit_max 0 over an upstream that places by tag: the general path (direct) */
      if (G_LIKELY (size <= self->parts.hit_max))
        {
          if (self->by_tag_blocks && (name = memres_allocation_get_tag (alloc)) != NULL)
            tag = cache_tag_index_cached (tf, name);
          if (front_try_allocate_tagged (f, &self->parts, cache_class_of (size), size, stream, TRUE,
                                         tag, alloc))
            return TRUE;
          return allocate_general (mr, size, stream, tag, alloc, error);
        }
    }
  self = memres_resource_get_private (mr);
  if (self->by_tag_blocks && (name = memres_allocation_get_tag (alloc)) != NULL)
    tag = cache_tag_index (name);
  return allocate_general (mr, size, stream, tag, alloc, error);
}

/* The hot path: cache_hit_allocate_tagged() (cache-parts.h), the arena's too, for "no tag". The
 * core marks a tagged buffer's record only in a stack that can sleep or reads tags
 * (MEMRES_ALLOCATION_TAGGED, memres-plugin-ops.h): only such a record takes the tagged path; an
 * untagged allocation reads the record it is about to fill and takes a block of no tag. */
gboolean
cache_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  if (G_UNLIKELY (alloc->size == MEMRES_ALLOCATION_TAGGED))
    return allocate_tagged (mr, size, stream, alloc, error);
  if (cache_hit_allocate_tagged (mr, size, stream, TRUE, 0, alloc))
    return TRUE;
  return allocate_general (mr, size, stream, 0, alloc, error);
}

/* The front had no room: a bigger lease, else the shared bins (with an event on @stream, which
 * the class's front blocks freed on @stream join: cache_front_spill()), else (past max_cached)
 * back to the upstream. */
G_GNUC_NO_INLINE
static gboolean
deallocate_slow (MemresResource *mr, Cache *self, Front *f, Block *b, MemresStream stream,
                 MemresStream caller_stream, GError **error)
{
  gsize csize = cache_class_size (b->cls);
  guint64 room;

  g_mutex_lock (&self->parts.lock);
  room = self->max_cached - MIN (self->max_cached, self->parts.leased + self->parts.shared_cached);
  /* the calling thread's own front, and the lock held: nobody else is inside it */
  if (cache_front_lease_put (&self->parts, f, b, room))
    {
      g_mutex_unlock (&self->parts.lock);
      return TRUE;
    }
  if (room < csize && b->chunk == NULL)
    {
      g_autoptr (GError) local = NULL;

      /* past max_cached: the memory goes back, ordered on the caller's stream, without the lock
       * (its segment's callbacks run there, and the upstream may be another cache); when that
       * fails (a stream that is gone, say), the block stays cached without an event instead: the
       * buffer is closed either way */
      gsize up_size = b->up.size;

      g_mutex_unlock (&self->parts.lock);
      if (upstream_give_back (self, &b->up, block_tag_name (b), TRUE, caller_stream, &local)
          || b->up.address == 0)
        {
          own_block_returned (self, b, csize, up_size);
          return TRUE;
        }
      g_debug ("cache: returning a block of %" G_GSIZE_FORMAT " bytes failed, kept: %s", csize,
               local->message);
      g_mutex_lock (&self->parts.lock);
      cache_shared_push (&self->parts, b);
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
  Cache *self = memres_resource_get_private (mr);
  Block *b;
  Front *f;

  if (G_UNLIKELY (cache_is_direct (self, alloc, alloc->size)))
    return direct_deallocate (mr, self, alloc, stream, error);
  b = alloc->plugin_data;
  if (G_UNLIKELY (b->size == CACHE_BLOCK_ASLEEP)) /* no memory under it (cache-sleep.c) */
    return cache_deallocate_asleep (self, b, alloc, stream, error);
  b->stream = cache_normalize_stream (&self->parts, stream);
  f = front_get_for (mr, &self->parts);
  if (f != NULL && front_try_deallocate (f, &self->parts, b))
    return TRUE;
  /* under the lock, which every other user of a front holds, the front is ours again */
  return deallocate_slow (mr, self, f, b, b->stream, stream, error);
}

gboolean
cache_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  if (cache_hit_deallocate (mr, alloc, stream))
    return TRUE;
  return deallocate_general (mr, alloc, stream, error);
}

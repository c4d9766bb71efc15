/* memres - CUDA memory resources
 * cache-upstream.c: the `cache` adaptor's memory from and back to its upstream. A miss takes a
 * chunk of blocks of one class (or a block of its own, for large classes) from the upstream
 * without the lock, and carves it under the lock (block_new()); the reserve counts what is held.
 * Memory goes back in two steps: taken out of the cache under the lock onto a Retired list
 * (release_idle() for trim, the out-of-memory flush and finalize; recycle_idle() at a miss of a
 * large class), then given to the upstream after the lock is released (retired_free()).
 *
 * Segments (memres-segments.h): every allocation the cache holds from its upstream (a chunk, a
 * block of its own, a buffer above max_block) is one of the cache's segments, whatever the
 * upstream: told mapped when the upstream gave it (upstream_allocate()), about to be unmapped
 * before it goes back (upstream_give_back()), and mapped again when the upstream refused it and
 * the cache still holds it. Both without the lock. Its tag: a buffer's own record's is the
 * buffer's (memres_allocation_get_tag()); a chunk's or a block of its own's, the tag its blocks
 * serve (block_tag_name(): one tag's in a stack that can sleep, Cache.by_tag_blocks; none for
 * untagged buffers' and elsewhere), so that a registrar tells the segments a tag's sleep unmaps;
 * and the upstream is told it (memres_upstream_allocate/deallocate_for_tag()), so that `vmm`'s
 * segment under a tagged chunk carries the tag too. */
#include "cache-private.h"

#include <string.h>

void
cache_segment_of (Cache *self, const MemresAllocation *up, const char *tag, MemresSegment *seg)
{
  memset (seg, 0, sizeof *seg);
  seg->base = up->address;
  seg->length = up->size;
  seg->device = self->device;
  seg->tag = tag;
}

void
cache_raise_segment (Cache *self, MemresSegmentEvent event, const MemresAllocation *up,
                     const char *tag)
{
  g_autoptr (GError) error = NULL;
  MemresSegment seg;

  cache_segment_of (self, up, tag, &seg);
  if (!memres_resource_raise_segment_event (self->self_mr, event, &seg, &error))
    g_warning ("cache: %s", error->message);
}

/* memres_upstream_deallocate() of @up, an allocation of @self's (a segment of tag @tag, as it was
 * told mapped), parts.lock not held: the segment's about-to-be-unmapped event first; when the
 * upstream refuses and the allocation stays (its address unchanged), it is told mapped again. */
gboolean
upstream_give_back (Cache *self, MemresAllocation *up, const char *tag, gboolean own,
                    MemresStream stream, GError **error)
{
  MemresAllocation was = *up;

  cache_raise_segment (self, MEMRES_SEGMENT_UNMAPPING, up, tag);
  if (own ? memres_upstream_deallocate_for_tag (self->self_mr, up, tag, stream, error)
          : memres_upstream_deallocate (self->self_mr, up, stream, error))
    return TRUE;
  if (up->address == was.address)
    cache_raise_segment (self, MEMRES_SEGMENT_MAPPED, &was, tag);
  return FALSE;
}

/* The high-water marks, sampled at each miss and each get_stats. parts.lock held. */
void
update_highs (Cache *self)
{
  guint64 cached = self->parts.shared_cached + cache_fronts_cached (&self->parts);
  guint64 used = self->reserved > cached + self->parked ? used_bytes (self, cached) : 0;

  self->reserved_high = MAX (self->reserved_high, reserved_bytes (self));
  self->used_high = MAX (self->used_high, used);
}

/* memres_upstream_allocate(), told mapped as a segment of tag @tag, parts.lock not held (the
 * upstream may be another cache, or call an out-of-memory handler that trims or reads this one); on
 * out-of-memory, every cached block of every thread goes back to the upstream (under the lock) and
 * the allocation is tried once more. */
static gboolean
upstream_call (MemresResource *mr, gsize size, MemresStream stream, const char *tag, gboolean own,
               MemresAllocation *alloc, GError **error)
{
  return own ? memres_upstream_allocate_for_tag (mr, size, stream, tag, alloc, error)
             : memres_upstream_allocate (mr, size, stream, alloc, error);
}

gboolean
upstream_allocate (MemresResource *mr, Cache *self, gsize size, MemresStream stream,
                   const char *tag, gboolean own, MemresAllocation *alloc, GError **error)
{
  GError *local = NULL;
  Retired retired = { NULL, NULL };
  gboolean ok;

  memset (alloc, 0, sizeof *alloc);
  if (upstream_call (mr, size, stream, tag, own, alloc, &local))
    {
      cache_raise_segment (self, MEMRES_SEGMENT_MAPPED, alloc, tag);
      return TRUE;
    }
  if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  g_clear_error (&local);
  g_mutex_lock (&self->parts.lock);
  self->oom_flushes++;
  ok = flush_idle (self, 0, &retired, error);
  g_mutex_unlock (&self->parts.lock);
  retired_free (self, &retired, NULL);
  if (!ok)
    return FALSE;
  memset (alloc, 0, sizeof *alloc);
  if (!upstream_call (mr, size, stream, tag, own, alloc, error))
    return FALSE;
  cache_raise_segment (self, MEMRES_SEGMENT_MAPPED, alloc, tag);
  return TRUE;
}

/* The upstream memory of a new block of class @cls for @stream, parts.lock not held: a chunk of
 * blocks for the chunk classes, or when the upstream has not the memory for a chunk, the block
 * alone (a chunk of one block: an upstream limited below the chunk size still serves small
 * requests); a block of its own for larger classes. *@n_blocks: the blocks @up holds. */
gboolean
block_memory (MemresResource *mr, Cache *self, guint cls, MemresStream stream, guint tag,
              MemresAllocation *up, guint *n_blocks, GError **error)
{
  gsize csize = cache_class_size (cls);
  const char *name = cache_tag_name (tag); /* NULL for 0 */
  GError *local = NULL;

  *n_blocks = cls >= self->n_chunk_classes ? 1 : (guint) (self->chunk_size / csize);
  if (upstream_allocate (mr, self, (gsize) *n_blocks * csize, stream, name, TRUE, up, &local))
    return TRUE;
  if (*n_blocks == 1 || !g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  g_clear_error (&local);
  *n_blocks = 1;
  return upstream_allocate (mr, self, csize, stream, name, TRUE, up, error);
}

/* A new block of class @cls and tag @tag (Block.tag, each block of the chunk too) for @stream in
 * @up (block_memory()): a block of its own above the chunk classes, else carved from a new
 * chunk (the other blocks of the chunk go to the shared
 * cache, with an event recorded after the chunk's allocation). NULL when the event cannot be
 * recorded: @up is then still the caller's, to give back once the lock is released. parts.lock
 * held. */
Block *
block_new (MemresResource *mr, Cache *self, guint cls, MemresStream stream, guint tag,
           MemresAllocation *up, guint n, GError **error)
{
  gsize csize = cache_class_size (cls);
  Chunk *chunk;
  Block *b;
  CacheEvent *e = NULL;

  if (cls >= self->n_chunk_classes)
    {
      b = g_new0 (Block, 1);
      b->address = up->address;
      b->up = *up;
      b->cls = cls;
      b->size = csize;
      b->tag = (guint8) tag;
      b->stream = stream;
      reserve_add (self, csize, up->size);
      if (self->own_blocks == NULL)
        self->own_blocks = g_hash_table_new (NULL, NULL);
      g_hash_table_add (self->own_blocks, b);
      return b;
    }
  /* blocks on the legacy stream get their event when another stream takes one
   * (cache_block_event()) */
  if (self->parts.events && n > 1 && stream != MEMRES_STREAM_LEGACY
      && (e = cache_event_record (&self->parts, stream, error)) == NULL)
    return NULL;
  chunk = g_malloc0 (sizeof (Chunk) + n * sizeof (Block));
  chunk->up = *up;
  chunk->n_blocks = n;
  LIST_PUSH (self->chunks, chunk);
  reserve_add (self, (guint64) n * csize, up->size);
  for (guint i = 0; i < n; i++)
    {
      b = &chunk->blocks[i];
      b->address = up->address + (guint64) i * csize;
      b->chunk = chunk;
      b->cls = cls;
      b->size = csize;
      b->tag = (guint8) tag;
      b->stream = stream;
      if (i > 0)
        {
          b->fresh = TRUE;
          b->event = e;
          cache_shared_push (&self->parts, b);
        }
    }
  if (e != NULL)
    e->refs = n - 1;
  return &chunk->blocks[0];
}

/* Synchronizes the device (host-observed completion of every stream's work) before memory that
 * may still be in use by queued work goes back to the upstream. */
gboolean
cache_device_synchronize (Cache *self, GError **error)
{
  return !self->parts.events || memres_cuda_device_synchronize (self->parts.device, error);
}

/* Takes @b (an upstream allocation of its own, out of every cache) out of the reserve and onto
 * @out. parts.lock held. */
static void
block_retire (Cache *self, Block *b, Retired *out)
{
  reserve_sub (self, b->size, b->up.size);
  own_block_forget (self, b);
  b->next = out->blocks;
  out->blocks = b;
}

/* Chunk.n_idle of every chunk: its blocks in the shared bins. parts.lock held. */
void
chunks_count_idle (Cache *self)
{
  for (Chunk *chunk = self->chunks; chunk != NULL; chunk = chunk->next)
    chunk->n_idle = 0;
  for (guint c = 0; c < self->n_chunk_classes; c++)
    for (Block *b = self->parts.shared[c].head; b != NULL; b = b->next)
      b->chunk->n_idle++;
}

/* Whether @b, free, is of tag @tag (CACHE_TAG_ANY: any) and may go while @bytes_to_keep stay
 * reserved. parts.lock held. */
static gboolean
block_goes (Cache *self, const Block *b, guint tag, gsize bytes_to_keep)
{
  return (tag == CACHE_TAG_ANY || b->tag == tag) && self->reserved - b->size >= bytes_to_keep;
}

/* Whether @chunk (Chunk.n_idle counted) is all free, of tag @tag and may go while
 * @bytes_to_keep stay reserved. parts.lock held. */
static gboolean
chunk_goes (Cache *self, const Chunk *chunk, guint tag, gsize bytes_to_keep)
{
  return chunk->n_idle == chunk->n_blocks && (tag == CACHE_TAG_ANY || chunk->blocks[0].tag == tag)
         && self->reserved - (guint64) chunk->n_blocks * cache_class_size (chunk->blocks[0].cls)
                >= bytes_to_keep;
}

/* Whether release_idle() would retire anything: a free block of its own that fits above
 * @bytes_to_keep, or a chunk all of whose blocks are free (chunks_count_idle()), of tag @tag. So
 * that a trim or sleep with nothing to give back waits for no device. parts.lock held. */
static gboolean
release_idle_finds_some (Cache *self, gsize bytes_to_keep, guint tag)
{
  for (guint c = self->parts.n_classes; c-- > self->n_chunk_classes;)
    for (Block *b = self->parts.shared[c].head; b != NULL; b = b->next)
      if (block_goes (self, b, tag, bytes_to_keep))
        return TRUE;
  chunks_count_idle (self);
  for (Chunk *chunk = self->chunks; chunk != NULL; chunk = chunk->next)
    if (chunk_goes (self, chunk, tag, bytes_to_keep))
      return TRUE;
  return FALSE;
}

/* Retires the shared cache's blocks (and the chunks all of whose blocks are there) of tag @tag
 * (Block.tag; CACHE_TAG_ANY: every tag) onto @out while more than @bytes_to_keep stay reserved,
 * never going below it (a block or chunk that would is kept); every stream's work on them is
 * complete once this returns TRUE. parts.lock held. */
gboolean
release_idle (Cache *self, gsize bytes_to_keep, guint tag, Retired *out, GError **error)
{
  Chunk *chunk, *next;

  if (self->parts.shared_cached == 0 || self->reserved <= bytes_to_keep
      || !release_idle_finds_some (self, bytes_to_keep, tag))
    return TRUE;
  if (!cache_device_synchronize (self, error))
    return FALSE;
  for (guint c = self->parts.n_classes; c-- > self->n_chunk_classes;)
    for (Block *b = self->parts.shared[c].head, *bnext; b != NULL; b = bnext)
      {
        bnext = b->next;
        if (!block_goes (self, b, tag, bytes_to_keep))
          continue;
        cache_shared_unlink (&self->parts, b);
        cache_event_unref (&self->parts, g_steal_pointer (&b->event));
        block_retire (self, b, out);
      }
  chunks_count_idle (self);
  for (chunk = self->chunks; chunk != NULL && self->reserved > bytes_to_keep; chunk = next)
    {
      gsize csize;

      next = chunk->next;
      csize = cache_class_size (chunk->blocks[0].cls);
      if (!chunk_goes (self, chunk, tag, bytes_to_keep))
        continue;
      for (guint i = 0; i < chunk->n_blocks; i++)
        {
          cache_shared_unlink (&self->parts, &chunk->blocks[i]);
          cache_event_unref (&self->parts, g_steal_pointer (&chunk->blocks[i].event));
        }
      LIST_UNLINK (self->chunks, chunk);
      reserve_sub (self, (guint64) chunk->n_blocks * csize, chunk->up.size);
      chunk->next = out->chunks;
      out->chunks = chunk;
    }
  return TRUE;
}

/* Every front drained into the shared cache, then release_idle(): the out-of-memory flush and
 * trim. parts.lock held. */
gboolean
flush_idle (Cache *self, gsize bytes_to_keep, Retired *out, GError **error)
{
  cache_fronts_stop (&self->parts);
  for (Front *f = self->parts.fronts; f != NULL; f = f->next)
    cache_front_drain (&self->parts, f);
  cache_fronts_resume (&self->parts);
  return release_idle (self, bytes_to_keep, CACHE_TAG_ANY, out, error);
}

/* Before a miss of class @cls for @stream: free blocks of other classes that @stream may use
 * (freed on it, or with an event it then waits on) while more than reserved / CACHE_IDLE_SHARE
 * bytes are idle, largest classes first: onto *@out (block_retire()). parts.lock held. */
void
recycle_idle (Cache *self, guint cls, MemresStream stream, Retired *out)
{
  Front *f = cache_own_front (&self->parts);
  guint64 idle = self->parts.shared_cached + cache_fronts_cached (&self->parts);
  guint budget = CACHE_RECYCLE_MAX;

  for (guint c = self->parts.n_classes; c-- > self->n_chunk_classes;)
    {
      if (c >= cls && c <= cls + CACHE_FIT_CLASSES)
        continue;
      for (Block *b = self->parts.shared[c].head, *next; b != NULL; b = next)
        {
          gboolean mine = b->stream == stream && stream != CU_STREAM_PER_THREAD;

          next = b->next;
          if (budget == 0 || idle <= self->reserved / CACHE_IDLE_SHARE)
            return;
          if (!mine
              && (cache_block_event (&self->parts, b) == NULL
                  || !cache_event_wait (&self->parts, b->event, stream, NULL)))
            continue;
          cache_shared_unlink (&self->parts, b);
          cache_event_unref (&self->parts, g_steal_pointer (&b->event));
          idle -= b->size;
          block_retire (self, b, out);
          budget--;
        }
      while (f != NULL && budget > 0 && idle > self->reserved / CACHE_IDLE_SHARE)
        {
          Block *b = cache_own_front_take (&self->parts, c, stream, CACHE_TAG_ANY);

          if (b == NULL)
            break;
          idle -= b->size;
          block_retire (self, b, out);
          budget--;
        }
    }
}

/* One upstream allocation of @self back to the upstream on @stream; a failure is a warning
 * (nobody is left to retry it). */
static void
give_back (Cache *self, MemresAllocation *up, const char *tag, MemresStream stream,
           const char *what)
{
  g_autoptr (GError) error = NULL;
  gsize size = up->size;

  if (!upstream_give_back (self, up, tag, TRUE, stream, &error))
    g_warning ("cache: returning %s of %" G_GSIZE_FORMAT " bytes to the upstream failed: %s", what,
               size, error->message);
}

/* Gives what @r holds back to the upstream, ordered on @stream, after which nothing queued
 * before on @stream touches it; empties @r. parts.lock not held. */
void
retired_free (Cache *self, Retired *r, MemresStream stream)
{
  while (r->blocks != NULL)
    {
      Block *b = r->blocks;

      r->blocks = b->next;
      give_back (self, &b->up, block_tag_name (b), stream, "a block");
      g_free (b);
    }
  while (r->chunks != NULL)
    {
      Chunk *chunk = r->chunks;

      r->chunks = chunk->next;
      give_back (self, &chunk->up, block_tag_name (&chunk->blocks[0]), stream, "a chunk");
      g_free (chunk);
    }
}

/* memres - CUDA memory resources
 * cache-sleep.c: the `cache` adaptor's sleep and wake slots (docs/sleep.md), over an upstream
 * that can sleep (`vmm`, `arena`).
 *
 * Blocks and chunks serve one tag (Block.tag, set when the chunk or block is taken from the
 * upstream; an allocation takes only blocks of its buffer's tag, cache-alloc.c). A sleep first
 * gives the free blocks of the sleeping tag back to the upstream (free_blocks_release(): the
 * tag's blocks of its own, and its chunks all of whose blocks are free, out of every front and
 * the shared bins; the other tags' free blocks stay cached), then puts to sleep, through
 * memres_upstream_sleep(), the upstream allocation under each buffer that has one of its own: a
 * request above max_block (the buffer's record is the upstream's), or a block of a class above the
 * chunked ones (Block.up); and, as `arena` sleeps its slabs, every chunk whose blocks are all free
 * or the sleep's buffers (Chunk.asleep: asleep whole, its live blocks' bytes restored at the same
 * addresses by the core after the wake when the policy keeps them). A chunk that also holds a
 * live block the sleep does not pass stays mapped, contents and all. The cache's segments of
 * what sleeps are told unmapped before and mapped after the wake.
 *
 * A sleeping chunk's free blocks are parked: out of the shared bins (no allocation can reach them
 * while their memory is gone; Cache.parked counts them), taken out before the upstream sleeps
 * and put back if it fails. When one of them was handed out since the chunk was carved (not
 * Block.fresh), work queued on it may still run: the device is synchronized first, as for the
 * free blocks given back (release_idle()); blocks never handed out need no wait. The wake puts
 * them back into the shared bins, fresh (new memory: no work touches it).
 *
 * While asleep, a live block (of its own, or of a sleeping chunk) has Block.size set to
 * CACHE_BLOCK_ASLEEP: the close's hit path then finds no room for it in the front (its byte
 * budget), and deallocate_general() hands it to cache_deallocate_asleep(), which gives a block of
 * its own back to the upstream (its address range released) instead of caching a block with no
 * memory under it, and parks a chunk's block: the chunk's last one closed gives the chunk back
 * (no wake will come for it); the hit path pays nothing for this. A request of its own (above
 * max_block, or every tagged buffer over an upstream that places by tag) sleeps with its tag: the
 * tags asleep are a mask (Cache.asleep_tags, cache_tag_index()), so that the close of such a
 * buffer of a sleeping tag gives it back without telling its segment unmapped a second time.
 *
 * The cost of a discard sleep and wake beyond the driver's calls (issue 34: at most 1.2x the raw
 * calls) is mostly the segment events of the records that sleep, one per buffer of its own. Their
 * batch goes in address order (sorted once here, by a radix sort, when the core's records are not),
 * so that the index finds, rewrites and sorts nothing again (segment-index.c checks the order
 * first); their tags are the sleep's (memres_sleep_call_get_tag()): every record that sleeps is a
 * buffer of that tag, or a block or chunk of the cache (whose blocks say their tag, Block.tag), so
 * no lookup and no table of them is needed. */
#include "cache-private.h"

#include <string.h>

/* What a sleep or wake passes to the upstream: an upstream record (@up), its address, and the
 * block of its own (@block) or the chunk (@chunk) it is, both NULL for a buffer's own record. */
typedef struct
{
  guint64 address;
  MemresAllocation *up;
  Block *block;
  Chunk *chunk;
} Unit;

/* The units of a sleep or wake (@m of them, at most @n, with as many after them for the sort),
 * whether they were added in address order (@in_order), and their upstream records in address
 * order (@ups, units_order()). */
typedef struct
{
  gsize m, n;
  gboolean in_order;
  Unit *units;
  MemresAllocation **ups;
} Units;

static void
units_init (Units *u, gsize n)
{
  u->m = 0;
  u->n = n;
  u->in_order = TRUE;
  u->units = g_new (Unit, 2 * n + 1);
  u->ups = g_new (MemresAllocation *, n + 1);
}

static void
units_clear (Units *u)
{
  g_free (u->units);
  g_free (u->ups);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Units, units_clear)

static void
units_add (Units *u, MemresAllocation *up, Block *b, Chunk *chunk)
{
  Unit *x = &u->units[u->m];

  x->address = up->address;
  x->up = up;
  x->block = b;
  x->chunk = chunk;
  u->in_order = u->in_order && (u->m == 0 || x[-1].address < x->address);
  u->m++;
}

/* @s (@n of them) in address order: a radix sort of the address bits that differ, a byte a
 * pass, through @tmp (as many): the collection with it took 180 K instructions for 1,000 records
 * of memres-sleep-bench, where qsort() alone took 530 K (bench/RESULTS.md). */
static void
units_sort (Unit *s, Unit *tmp, gsize n)
{
  guint64 diff = 0;
  guint shift;

  for (gsize i = 0; i < n; i++)
    diff |= s[i].address ^ s[0].address;
  if (diff == 0)
    return;
  /* from the lowest bit that differs to the highest */
  for (shift = (guint) g_bit_nth_lsf (diff, -1) & ~7u; shift < 64 && (diff >> shift) != 0;
       shift += 8)
    {
      gsize count[257] = { 0 };

      for (gsize i = 0; i < n; i++)
        count[((s[i].address >> shift) & 0xff) + 1]++;
      for (guint d = 1; d <= 256; d++)
        count[d] += count[d - 1];
      for (gsize i = 0; i < n; i++)
        tmp[count[(s[i].address >> shift) & 0xff]++] = s[i];
      memcpy (s, tmp, n * sizeof *s);
    }
}

/* The units put in address order (when they were not added so) and their records into @ups. */
static void
units_order (Units *u)
{
  if (!u->in_order)
    units_sort (u->units, u->units + u->n, u->m);
  for (gsize i = 0; i < u->m; i++)
    u->ups[i] = u->units[i].up;
}

/* Whether @b is in a shared bin. parts.lock held. */
static gboolean
in_shared_bin (Cache *self, const Block *b)
{
  return b->prev != NULL || b->next != NULL || self->parts.shared[b->cls].head == b;
}

/* A whole chunk's sleep begins: its @c live blocks (the sleep's: every block of the chunk that is
 * in no shared bin, collect_sleep() having counted them) marked, its free blocks (all in the
 * shared bins) parked. Returns whether one of those was handed out since the chunk was carved
 * (work may touch it). parts.lock held. */
static gboolean
chunk_park (Cache *self, Chunk *chunk, guint c)
{
  gboolean used = FALSE;
  guint live = 0;

  chunk->n_asleep = c;
  for (guint i = 0; i < chunk->n_blocks; i++)
    {
      Block *b = &chunk->blocks[i];

      if (!in_shared_bin (self, b))
        {
          b->size = CACHE_BLOCK_ASLEEP;
          live++;
          continue;
        }
      cache_shared_unlink (&self->parts, b);
      self->parked += b->size;
      used |= !b->fresh;
    }
  g_assert (live == c);
  return used;
}

/* A whole chunk's sleep undone (the upstream's failed) or its wake: the live blocks given their
 * size back, the parked ones into the shared bins (after a wake: with no event, fresh, on the
 * legacy stream, as new memory). parts.lock held. */
static void
chunk_unpark (Cache *self, Chunk *chunk, gboolean woken)
{
  gsize csize = cache_class_size (chunk->blocks[0].cls);

  for (guint i = 0; i < chunk->n_blocks; i++)
    {
      Block *b = &chunk->blocks[i];

      if (b->size == CACHE_BLOCK_ASLEEP)
        {
          b->size = csize;
          continue;
        }
      self->parked -= b->size;
      if (woken)
        {
          cache_event_unref (&self->parts, g_steal_pointer (&b->event));
          b->stream = cache_normalize_stream (&self->parts, NULL);
          b->fresh = TRUE;
        }
      cache_shared_push (&self->parts, b);
    }
  chunk->asleep = FALSE;
  chunk->n_asleep = 0;
}

/* The block of @alloc when it is a chunk's (a request the cache served from a chunk), else NULL */
static Block *
chunk_block (Cache *self, const MemresAllocation *alloc)
{
  Block *b;

  if (alloc->size > self->parts.max_block || self->by_tag)
    return NULL;
  b = alloc->plugin_data;
  return b->chunk != NULL ? b : NULL;
}

/* The sleep's units of @allocs: the upstream records under them that sleep (a request above
 * max_block, or every buffer over an upstream that places by tag: the buffer's record; a block
 * of its own), and each chunk all of whose blocks are free or among @allocs (asleep whole:
 * chunk_park(), at once, so that no allocation takes a free one meanwhile). *@wait: a parked
 * block may have work queued on it. No table: each chunk counts its blocks among @allocs in
 * Chunk.n_asleep (0 in a chunk awake, and left so in one that stays mapped), and a block its
 * chunk's park marked (CACHE_BLOCK_ASLEEP) says that its chunk was judged. */
static void
collect_sleep (Cache *self, MemresAllocation *const *allocs, gsize n, Units *u, gboolean *wait)
{
  gboolean chunked = FALSE;

  *wait = FALSE;
  g_mutex_lock (&self->parts.lock);
  for (gsize i = 0; i < n; i++)
    {
      Block *b;

      if (allocs[i]->size > self->parts.max_block || self->by_tag)
        {
          units_add (u, allocs[i], NULL, NULL);
          continue;
        }
      b = allocs[i]->plugin_data;
      if (b->chunk == NULL)
        {
          units_add (u, &b->up, b, NULL);
          continue;
        }
      b->chunk->n_asleep++;
      chunked = TRUE;
    }
  if (chunked)
    chunks_count_idle (self);
  for (gsize i = 0; chunked && i < n; i++)
    {
      Block *b = chunk_block (self, allocs[i]);
      Chunk *chunk;
      guint c;

      if (b == NULL || b->size == CACHE_BLOCK_ASLEEP || (c = (chunk = b->chunk)->n_asleep) == 0)
        continue; /* not a chunk's, or its chunk judged already */
      if (c + chunk->n_idle != chunk->n_blocks)
        {
          chunk->n_asleep = 0; /* a live block the sleep does not pass: stays mapped */
          continue;
        }
      *wait |= chunk_park (self, chunk, c);
      units_add (u, &chunk->up, NULL, chunk);
    }
  g_mutex_unlock (&self->parts.lock);
  units_order (u);
}

/* The wake's units of @allocs: as the sleep's, but of the chunks only those asleep, each once
 * (Chunk.asleep cleared as each is taken, set again before the lock is released: no table). */
static void
collect_wake (Cache *self, MemresAllocation *const *allocs, gsize n, Units *u)
{
  g_mutex_lock (&self->parts.lock);
  for (gsize i = 0; i < n; i++)
    {
      Block *b;

      if (allocs[i]->size > self->parts.max_block || self->by_tag)
        units_add (u, allocs[i], NULL, NULL);
      else if ((b = allocs[i]->plugin_data)->chunk == NULL)
        units_add (u, &b->up, b, NULL);
      else if (b->chunk->asleep)
        {
          b->chunk->asleep = FALSE;
          units_add (u, &b->chunk->up, NULL, b->chunk);
        }
    }
  for (gsize i = 0; i < u->m; i++)
    if (u->units[i].chunk != NULL)
      u->units[i].chunk->asleep = TRUE;
  g_mutex_unlock (&self->parts.lock);
  units_order (u);
}

/* One @event for each unit's segment, in one batch (memres_resource_raise_segment_events()), in
 * address order: a buffer's own record with the tag @tag of the sleep or wake, a block or chunk
 * of the cache with the tag its blocks serve (block_tag_name(), as cache_raise_segment() told it
 * mapped); with no @tag (a slot called outside a sleep or a wake), a buffer's own record with the
 * tag the index keeps (memres_lookup()). */
static void
raise_all (Cache *self, MemresSegmentEvent event, const Units *u, const char *tag)
{
  g_autofree MemresSegment *segs = g_new (MemresSegment, u->m + 1);
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < u->m; i++)
    {
      const Unit *x = &u->units[i];
      const char *t = tag;
      MemresLookupInfo info;

      if (x->block != NULL || x->chunk != NULL)
        t = block_tag_name (x->block != NULL ? x->block : &x->chunk->blocks[0]);
      else if (tag == NULL && memres_lookup (GSIZE_TO_POINTER ((gsize) x->address), &info))
        t = info.segment.tag;
      cache_segment_of (self, x->up, t, &segs[i]);
    }
  if (!memres_resource_raise_segment_events (self->self_mr, event, segs, u->m, &error))
    g_warning ("cache: %s", error->message);
}

/* Marks the units asleep (@asleep), or awake again; tag @tag asleep or awake (Cache.asleep_tags),
 * for the close of the buffers' own records; a sleeping chunk's parked blocks drop their events.
 * With @undo, a sleep that failed: the chunks parked for it taken back, nothing else. */
static void
mark (Cache *self, Units *u, gboolean asleep, gboolean undo, const char *tag)
{
  guint64 bit = tag != NULL ? (guint64) 1 << cache_tag_index (tag) : 0;

  g_mutex_lock (&self->parts.lock);
  for (gsize i = 0; i < u->m; i++)
    {
      Block *b = u->units[i].block;
      Chunk *chunk = u->units[i].chunk;

      if (chunk != NULL)
        {
          if (!asleep)
            chunk_unpark (self, chunk, !undo);
          else
            {
              chunk->asleep = TRUE;
              for (guint k = 0; k < chunk->n_blocks; k++)
                cache_event_unref (&self->parts, g_steal_pointer (&chunk->blocks[k].event));
            }
        }
      else if (!undo && b != NULL)
        b->size = asleep ? CACHE_BLOCK_ASLEEP : cache_class_size (b->cls);
    }
  g_mutex_unlock (&self->parts.lock);
  if (undo)
    return;
  if (asleep)
    __atomic_or_fetch (&self->asleep_tags, bit, __ATOMIC_SEQ_CST);
  else
    __atomic_and_fetch (&self->asleep_tags, ~bit, __ATOMIC_SEQ_CST);
}

/* The free memory of the sleep's tag (memres_sleep_call_get_tag()) back to the upstream: the
 * free blocks of its own and the chunks all of whose blocks are free, of that tag (Block.tag:
 * blocks and chunks serve one tag, cache-alloc.c), the fronts' too; the other tags' stay
 * cached, and the upstream keeps its own free memory of them (its sleep slot gives back the
 * tag's). With no tag (a slot called outside a memres_resource_sleep()), a trim to 0: every
 * free block, and the upstream's reserve. */
static gboolean
free_blocks_release (MemresResource *mr, Cache *self, GError **error)
{
  const char *name = memres_sleep_call_get_tag (NULL);
  Retired retired = { NULL, NULL };
  guint tag;
  gboolean ok;

  if (name == NULL)
    return cache_trim (mr, 0, error);
  tag = cache_tag_index (name);
  g_mutex_lock (&self->parts.lock);
  cache_fronts_drain_tag (&self->parts, tag);
  ok = release_idle (self, 0, tag, &retired, error);
  g_mutex_unlock (&self->parts.lock);
  retired_free (self, &retired, NULL);
  return ok;
}

gboolean
cache_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  g_auto (Units) u = { 0 };
  const char *tag = memres_sleep_call_get_tag (NULL);
  gboolean wait;

  /* the free cached blocks first: they go back to the upstream (their memory released) */
  if (!free_blocks_release (mr, self, error))
    {
      g_prefix_error (error, "cache: giving the free cached blocks back: ");
      return FALSE;
    }
  /* with no record of its own to sleep too: an upstream that places by tag (`arena`) parks the
   * tag's free blocks (memres_sleep_call_get_tag()) */
  units_init (&u, n_allocs);
  collect_sleep (self, allocs, n_allocs, &u, &wait);
  if (wait && !cache_device_synchronize (self, error))
    {
      mark (self, &u, FALSE, TRUE, tag);
      g_prefix_error (error, "cache: waiting for the work on the free blocks of its chunks: ");
      return FALSE;
    }
  raise_all (self, MEMRES_SEGMENT_UNMAPPING, &u, tag);
  if (!memres_upstream_sleep (mr, u.ups, u.m, error))
    {
      mark (self, &u, FALSE, TRUE, tag);
      raise_all (self, MEMRES_SEGMENT_MAPPED, &u, tag);
      return FALSE;
    }
  mark (self, &u, TRUE, FALSE, tag);
  return TRUE;
}

gboolean
cache_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  g_auto (Units) u = { 0 };
  const char *tag = memres_sleep_call_get_tag (NULL);

  units_init (&u, n_allocs);
  collect_wake (self, allocs, n_allocs, &u);
  if (!memres_upstream_wake (mr, u.ups, u.m, error))
    return FALSE;
  mark (self, &u, FALSE, FALSE, tag);
  raise_all (self, MEMRES_SEGMENT_MAPPED, &u, tag);
  return TRUE;
}

/* A sleeping chunk's live block @b closed (of the buffer of record @alloc): parked; the chunk's
 * last one gives the chunk back to the upstream (its address range released; its segment was
 * told unmapped at the sleep). When the upstream keeps it, so does the block (the buffer stays
 * open and asleep); when it released it all the same, the buffer is closed (@alloc's address
 * 0). */
static gboolean
chunk_block_closed (Cache *self, Block *b, MemresAllocation *alloc, MemresStream stream,
                    GError **error)
{
  Chunk *chunk = b->chunk;
  gsize csize = cache_class_size (b->cls);
  guint64 bytes = (guint64) chunk->n_blocks * csize, address = chunk->up.address;
  gsize up_size = chunk->up.size;

  g_mutex_lock (&self->parts.lock);
  b->size = csize;
  self->parked += csize;
  if (--chunk->n_asleep > 0)
    {
      g_mutex_unlock (&self->parts.lock);
      return TRUE;
    }
  LIST_UNLINK (self->chunks, chunk);
  reserve_sub (self, bytes, up_size);
  self->parked -= bytes;
  g_mutex_unlock (&self->parts.lock);
  if (memres_upstream_deallocate_for_tag (self->self_mr, &chunk->up,
                                          block_tag_name (&chunk->blocks[0]), stream, error))
    {
      g_free (chunk);
      return TRUE;
    }
  if (chunk->up.address != address)
    {
      g_free (chunk);
      alloc->address = 0;
      return FALSE;
    }
  g_mutex_lock (&self->parts.lock);
  LIST_PUSH (self->chunks, chunk);
  reserve_add (self, bytes, up_size);
  self->parked += bytes - csize;
  chunk->n_asleep = 1;
  b->size = CACHE_BLOCK_ASLEEP;
  g_mutex_unlock (&self->parts.lock);
  return FALSE;
}

gboolean
cache_deallocate_asleep (Cache *self, Block *b, MemresAllocation *alloc, MemresStream stream,
                         GError **error)
{
  gsize csize = cache_class_size (b->cls);
  gsize up_size = b->up.size;

  if (b->chunk != NULL)
    return chunk_block_closed (self, b, alloc, stream, error);
  if (!memres_upstream_deallocate_for_tag (self->self_mr, &b->up, block_tag_name (b), stream,
                                           error))
    return FALSE; /* the upstream's close keeps what it could not release: so does the block */
  own_block_returned (self, b, csize, up_size);
  return TRUE;
}

gboolean
cache_direct_is_asleep (Cache *self, const MemresAllocation *alloc)
{
  const char *tag = memres_allocation_get_tag (alloc);

  return tag != NULL
         && (__atomic_load_n (&self->asleep_tags, __ATOMIC_SEQ_CST) >> cache_tag_index (tag)) & 1;
}

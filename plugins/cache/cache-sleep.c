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
 * chunked ones (Block.up). A block carved from a chunk shares that chunk with other blocks: it
 * stays mapped, contents and all (the classes of at most chunk / 16 bytes, 128 KiB by default). The
 * cache's segments of what sleeps are told unmapped before and mapped after the wake.
 *
 * While asleep, a block of its own has Block.size set to CACHE_BLOCK_ASLEEP: the close's hit path
 * then finds no room for it in the front (its byte budget), and deallocate_general() hands it to
 * cache_deallocate_asleep(), which gives the sleeping allocation back to the upstream (its
 * address range released) instead of caching a block with no memory under it; the hit path
 * pays nothing for this. A sleeping request above max_block is remembered by address
 * (Cache.asleep_direct), so that its close gives it back without telling its segment unmapped a
 * second time. */
#include "cache-private.h"

/* The upstream records under @allocs that sleep (@ups), and their blocks (NULL for a request
 * above max_block). */
static gsize
collect (Cache *self, MemresAllocation *const *allocs, gsize n, MemresAllocation **ups,
         Block **blocks)
{
  gsize m = 0;

  for (gsize i = 0; i < n; i++)
    {
      Block *b;

      /* the upstream's record: above max_block, or every buffer of a sleep (all tagged) over an
       * upstream that places by tag */
      if (allocs[i]->size > self->parts.max_block || self->by_tag)
        {
          blocks[m] = NULL;
          ups[m++] = allocs[i];
          continue;
        }
      b = allocs[i]->plugin_data;
      if (b->chunk != NULL)
        continue; /* shares its chunk: stays mapped */
      blocks[m] = b;
      ups[m++] = &b->up;
    }
  return m;
}

/* One @event for each of @ups' segments, in one batch (memres_resource_raise_segment_events()). */
static void
raise_all (Cache *self, MemresSegmentEvent event, MemresAllocation *const *ups, gsize m,
           const char *const *tags)
{
  g_autofree MemresSegment *segs = g_new (MemresSegment, m + 1);
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < m; i++)
    cache_segment_of (self, ups[i], tags[i], &segs[i]);
  if (!memres_resource_raise_segment_events (self->self_mr, event, segs, m, &error))
    g_warning ("cache: %s", error->message);
}

/* The tags of @ups' segments (memres_lookup(): the index keeps them), into @tags. */
static void
segment_tags (MemresAllocation *const *ups, gsize m, const char **tags)
{
  for (gsize i = 0; i < m; i++)
    {
      MemresLookupInfo info;

      tags[i] = memres_lookup (GSIZE_TO_POINTER ((gsize) ups[i]->address), &info) ? info.segment.tag
                                                                                  : NULL;
    }
}

/* Marks @blocks (and the direct records among @ups, with their segments' @tags) asleep, or
 * awake again (@tags: the tags kept at their sleep). */
static void
mark (Cache *self, MemresAllocation *const *ups, Block *const *blocks, gsize m, gboolean asleep,
      const char **tags)
{
  g_mutex_lock (&self->parts.lock);
  for (gsize i = 0; i < m; i++)
    {
      if (blocks[i] != NULL)
        blocks[i]->size = asleep ? CACHE_BLOCK_ASLEEP : cache_class_size (blocks[i]->cls);
      else if (asleep)
        {
          if (self->asleep_direct == NULL)
            self->asleep_direct = g_hash_table_new (NULL, NULL);
          g_hash_table_insert (self->asleep_direct, GSIZE_TO_POINTER (ups[i]->address),
                               (gpointer) tags[i]);
        }
      else
        {
          tags[i] = g_hash_table_lookup (self->asleep_direct, GSIZE_TO_POINTER (ups[i]->address));
          g_hash_table_remove (self->asleep_direct, GSIZE_TO_POINTER (ups[i]->address));
        }
    }
  g_mutex_unlock (&self->parts.lock);
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
  g_autofree MemresAllocation **ups = g_new (MemresAllocation *, n_allocs + 1);
  g_autofree Block **blocks = g_new (Block *, n_allocs + 1);
  g_autofree const char **tags = g_new0 (const char *, n_allocs + 1);
  gsize m;

  /* the free cached blocks first: they go back to the upstream (their memory released) */
  if (!free_blocks_release (mr, self, error))
    {
      g_prefix_error (error, "cache: giving the free cached blocks back: ");
      return FALSE;
    }
  /* with no record of its own to sleep too: an upstream that places by tag (`arena`) parks the
   * tag's free blocks (memres_sleep_call_get_tag()) */
  m = collect (self, allocs, n_allocs, ups, blocks);
  segment_tags (ups, m, tags);
  raise_all (self, MEMRES_SEGMENT_UNMAPPING, ups, m, tags);
  if (!memres_upstream_sleep (mr, ups, m, error))
    {
      raise_all (self, MEMRES_SEGMENT_MAPPED, ups, m, tags);
      return FALSE;
    }
  mark (self, ups, blocks, m, TRUE, tags);
  return TRUE;
}

gboolean
cache_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  g_autofree MemresAllocation **ups = g_new (MemresAllocation *, n_allocs + 1);
  g_autofree Block **blocks = g_new (Block *, n_allocs + 1);
  g_autofree const char **tags = g_new0 (const char *, n_allocs + 1);
  gsize m = collect (self, allocs, n_allocs, ups, blocks);

  if (!memres_upstream_wake (mr, ups, m, error))
    return FALSE;
  mark (self, ups, blocks, m, FALSE, tags);
  raise_all (self, MEMRES_SEGMENT_MAPPED, ups, m, tags);
  return TRUE;
}

gboolean
cache_deallocate_asleep (Cache *self, Block *b, MemresStream stream, GError **error)
{
  gsize csize = cache_class_size (b->cls);
  gsize up_size = b->up.size;

  if (!memres_upstream_deallocate (self->self_mr, &b->up, stream, error))
    return FALSE; /* the upstream's close keeps what it could not release: so does the block */
  g_mutex_lock (&self->parts.lock);
  reserve_sub (self, csize, up_size);
  own_block_forget (self, b);
  g_mutex_unlock (&self->parts.lock);
  g_free (b);
  return TRUE;
}

gboolean
cache_direct_is_asleep (Cache *self, guint64 address)
{
  gboolean asleep;

  g_mutex_lock (&self->parts.lock);
  asleep = self->asleep_direct != NULL
           && g_hash_table_contains (self->asleep_direct, GSIZE_TO_POINTER (address));
  g_mutex_unlock (&self->parts.lock);
  return asleep;
}

void
cache_direct_forget (Cache *self, guint64 address)
{
  g_mutex_lock (&self->parts.lock);
  if (self->asleep_direct != NULL)
    g_hash_table_remove (self->asleep_direct, GSIZE_TO_POINTER (address));
  g_mutex_unlock (&self->parts.lock);
}

/* memres - CUDA memory resources
 * arena-sleep.c: the `arena` kind's sleep and wake slots (docs/sleep.md).
 *
 * A sleep first gives the idle granules that last served the tag back to the driver (its free
 * memory, its free ranges whose streams are done settled first, without a wait; the other tags'
 * idle granules and free ranges stay as they were; every idle granule, as a trim to 0, when the
 * slot is called with no tag), then counts the bytes of each sleeping large extent in its granules
 * (Arena.asleep) and releases every granule whose held bytes are all asleep: those the tag's
 * buffers cover alone, with free bytes around them or other sleeping buffers
 * (arena_granules_sleep(): unmapped after "about to be unmapped", then released). Placement keeps
 * other tags out of a tag's granules; a granule that still holds bytes that do not sleep (a tagged
 * free range not settled yet, a buffer of the tag that is not asleep) stays mapped, its contents
 * too, and its sleeping bytes count as asleep all the same. The addresses stay reserved and the
 * extents stay in use.
 *
 * While a tag sleeps, the free bytes of a released granule may be handed out to another
 * allocation: backing them (arena_span_hold()) maps memory under the whole granule again, and
 * the wake finds it mapped and leaves it. A wake creates and maps memory under every granule of
 * the tag's extents that has none (arena_granules_wake()), all or nothing. A sleeping extent
 * closed forgets its asleep bytes (arena_sleep_forget(), from the close) and is freed settled,
 * not tagged with the closing stream (a tagged range is reused on its stream without backing
 * its granules, and no work can use memory it has not got): reusing it backs its granules.
 *
 * Slabs. A granule and a slab serve one tag (arena-private.h), so a tag's slabs sleep whole: at
 * its sleep every slab of the tag counts as asleep (Chunk.asleep), its free blocks parked (taken
 * out of the fronts and the shared bins: no allocation can reach them while their memory is
 * gone) and its live blocks marked (Block.size ARENA_BLOCK_ASLEEP, which keeps their close off
 * the front's hit path); its granules are then released with the extents'. A sleeping block
 * closed is parked too. The wake maps the slabs' granules again, gives the parked blocks back to
 * the shared bins and the live ones their size. When the tag's last sleeping buffer is closed
 * (Arena.n_asleep), no wake will come for it: its slabs, every block parked, go back to the
 * range, settled (no work can use memory that is gone).
 *
 * Buffers with memory of their own (handle_type=posix_fd) do not sleep: one exported or
 * imported is refused with MEMRES_SLEEP_ERROR_SHARED, the others with NOT_SUPPORTED. */
#include "arena-private.h"

/* Whether @alloc is a large extent of the heap (else a block of the size classes, or a buffer of
 * its own memory); its extent's bytes in *@size. */
static gboolean
extent_of (Arena *self, const MemresAllocation *alloc, guint64 *size)
{
  if (alloc->size <= self->parts.max_block || arena_is_own (alloc))
    return FALSE;
  *size = arena_round (alloc->size);
  return TRUE;
}

/* Adds (@sign 1) or takes away (-1) the bytes of [addr, addr + size) to the asleep count of
 * their granules. Lock held. */
static void
span_asleep (Arena *self, guint64 addr, guint64 size, gint sign)
{
  guint64 end = addr + size;

  for (guint g = arena_granule (self, addr); addr < end; g++)
    {
      guint64 g_end = arena_granule_address (self, g) + self->granularity;
      guint64 bytes = MIN (end, g_end) - addr;

      if (sign > 0)
        self->asleep[g] += bytes;
      else
        self->asleep[g] -= bytes;
      addr = MIN (end, g_end);
    }
}

static gint
cmp_guint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

static void
span_granules (Arena *self, GArray *gs, guint64 addr, guint64 size, gboolean sleep)
{
  for (guint g = arena_granule (self, addr); g <= arena_granule (self, addr + size - 1); g++)
    if (sleep ? self->handle[g] != 0 && self->held[g] == self->asleep[g] : self->handle[g] == 0)
      g_array_append_val (gs, g);
}

/* The granules of the extents among @allocs and of tag @tag's slabs (0: none) that are mapped
 * and all asleep (@sleep), or without memory (a wake); sorted, each once. Lock held. */
static GArray *
granules_of (Arena *self, MemresAllocation *const *allocs, gsize n, guint tag, gboolean sleep)
{
  GArray *gs = g_array_new (FALSE, FALSE, sizeof (guint));
  guint last = G_MAXUINT;
  guint m = 0;

  for (gsize i = 0; i < n; i++)
    {
      guint64 size;

      if (extent_of (self, allocs[i], &size))
        span_granules (self, gs, allocs[i]->address, size, sleep);
    }
  for (Chunk *c = self->chunks; tag != 0 && c != NULL; c = c->next)
    if (c->tag == tag && c->asleep)
      span_granules (self, gs, c->addr, c->size, sleep);
  g_array_sort (gs, cmp_guint);
  for (guint i = 0; i < gs->len; i++)
    {
      guint g = g_array_index (gs, guint, i);

      if (g != last)
        g_array_index (gs, guint, m++) = g;
      last = g;
    }
  g_array_set_size (gs, m);
  return gs;
}

/* The tag of the sleep or wake in progress (memres_sleep_call_get_tag()) in this arena, whose
 * slabs sleep with it: also when no buffer of it is open (@allocs empty), as its free blocks are
 * memory the tag last used; else the one @allocs (of one tag's sleep) serve, 0 when none does
 * (a cache's own records above, placed untagged). Lock held. */
static guint
tag_of_all (Arena *self, MemresAllocation *const *allocs, gsize n)
{
  const char *name = memres_sleep_call_get_tag (NULL);

  if (name != NULL)
    return cache_tag_index (name);
  for (gsize i = 0; i < n; i++)
    {
      guint t = arena_tag_of (self, allocs[i]);

      if (t != 0)
        return t;
    }
  return 0;
}

/* Tag @tag's slabs asleep (@sign 1: their free blocks parked) or awake (-1: the parked blocks
 * back in the shared bins); the live blocks among @allocs marked or given their size back. Lock
 * held; with @sign 1 the fronts are drained first (the caller stopped them). */
static void
mark_blocks (Arena *self, MemresAllocation *const *allocs, gsize n, gint sign)
{
  for (gsize i = 0; i < n; i++)
    if (allocs[i]->size <= self->parts.max_block)
      {
        Block *b = allocs[i]->plugin_data;

        b->size = sign > 0 ? ARENA_BLOCK_ASLEEP : cache_class_size (b->cls);
      }
}

static void
mark_slabs (Arena *self, MemresAllocation *const *allocs, gsize n, guint tag, gint sign)
{
  if (sign > 0)
    mark_blocks (self, allocs, n, sign);
  for (Chunk *c = self->chunks; tag != 0 && c != NULL; c = c->next)
    {
      if (c->tag != tag || c->asleep == (sign > 0))
        continue;
      c->asleep = sign > 0;
      span_asleep (self, c->addr, c->size, sign);
      for (guint i = 0; i < c->n_blocks; i++)
        {
          Block *b = &c->blocks[i];

          if (b->size == ARENA_BLOCK_ASLEEP)
            continue; /* live */
          if (sign > 0 && b->prev == NULL && b->next == NULL
              && self->parts.shared[b->cls].head != b)
            continue; /* live and awake: not ours to park (cannot happen: the tag sleeps) */
          if (sign > 0)
            {
              cache_shared_unlink (&self->parts, b);
              cache_event_unref (&self->parts, g_steal_pointer (&b->event));
              self->parked_bytes += b->size;
            }
          else
            {
              self->parked_bytes -= b->size;
              cache_shared_push (&self->parts, b);
            }
        }
    }
  if (sign < 0)
    mark_blocks (self, allocs, n, sign);
}

/* Tag @tag's slabs, every block parked (its last sleeping buffer closed), back to the range. */
static void
slabs_return (Arena *self, guint tag)
{
  Chunk *next;

  for (Chunk *c = self->chunks; tag != 0 && c != NULL; c = next)
    {
      next = c->next;
      if (c->tag != tag || !c->asleep)
        continue;
      span_asleep (self, c->addr, c->size, -1);
      LIST_UNLINK (self->chunks, c);
      self->slab_bytes -= (guint64) c->n_blocks * c->blocks[0].size;
      self->parked_bytes -= (guint64) c->n_blocks * c->blocks[0].size;
      arena_extent_free (self, c->addr, c->size, NULL, NULL);
      g_free (c);
    }
}

/* A sleeping block closed (deallocate_general()): parked, its size given back; the tag's last
 * sleeping buffer returns its slabs. Lock held. */
void
arena_sleep_block_closed (Arena *self, Block *b)
{
  b->size = cache_class_size (b->cls);
  self->parked_bytes += b->size;
  if (--self->n_asleep[b->tag] == 0)
    slabs_return (self, b->tag);
}

/* Counts @allocs' extents asleep (@sign 1) or awake (-1). Lock held. */
static void
mark (Arena *self, MemresAllocation *const *allocs, gsize n, gint sign)
{
  for (gsize i = 0; i < n; i++)
    {
      guint64 size;

      if (!extent_of (self, allocs[i], &size))
        continue;
      span_asleep (self, allocs[i]->address, size, sign);
      if (sign > 0)
        g_hash_table_add (self->asleep_large, GSIZE_TO_POINTER (allocs[i]->address));
      else
        g_hash_table_remove (self->asleep_large, GSIZE_TO_POINTER (allocs[i]->address));
    }
}

static gboolean
refuse_own (Arena *self, MemresAllocation *const *allocs, gsize n, GError **error)
{
  gboolean refused = FALSE;

  g_mutex_lock (&self->parts.lock);
  for (gsize i = 0; !refused && i < n; i++)
    {
      const OwnBuf *own = allocs[i]->plugin_data;

      if (allocs[i]->size <= self->parts.max_block || !arena_is_own (allocs[i]))
        continue;
      refused = TRUE;
      if (own->imported || own->exported)
        g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_SHARED,
                     "arena: the buffer of %" G_GSIZE_FORMAT " bytes at 0x%" G_GINT64_MODIFIER
                     "x is %s another process: it cannot sleep",
                     allocs[i]->size, allocs[i]->address,
                     own->imported ? "imported from" : "exported to");
      else
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                     "arena: the buffer of %" G_GSIZE_FORMAT " bytes at 0x%" G_GINT64_MODIFIER
                     "x has physical memory of its own (handle_type=posix_fd, at least "
                     "export_min bytes): such buffers cannot sleep; allocate them from an arena "
                     "without handle_type=posix_fd, or from `vmm`",
                     allocs[i]->size, allocs[i]->address);
    }
  g_mutex_unlock (&self->parts.lock);
  return !refused;
}

gboolean
arena_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  g_autoptr (GArray) gs = NULL;
  gboolean ok;
  guint tag;

  if (!refuse_own (self, allocs, n_allocs, error))
    return FALSE;
  g_mutex_lock (&self->parts.lock);
  arena_park_flush (self); /* parked extents are free memory: into the heap (arena-park.c) */
  /* the free memory first: the idle granules the tag last used given back, its free ranges
   * whose streams are done settled first, without a wait (every idle granule, as a trim does,
   * with no tag: a slot called outside memres_resource_sleep()) */
  tag = tag_of_all (self, allocs, n_allocs);
  if (memres_sleep_call_get_tag (NULL) != NULL
          ? !arena_heap_settle_tag (self, tag, error) || !arena_release_idle_tag (self, tag, error)
          : !arena_release_idle (self, 0, error))
    {
      g_mutex_unlock (&self->parts.lock);
      arena_events_flush (self);
      g_prefix_error (error, "arena: giving the idle granules back: ");
      return FALSE;
    }
  if (self->asleep == NULL)
    self->asleep = g_new0 (guint64, self->n_granules);
  if (self->asleep_large == NULL)
    self->asleep_large = g_hash_table_new (NULL, NULL);
  /* the tag's blocks in the fronts into the shared bins, where its free ones are parked from
   * (the other tags' stay in their fronts) */
  if (tag != 0)
    cache_fronts_drain_tag (&self->parts, tag);
  mark (self, allocs, n_allocs, 1);
  mark_slabs (self, allocs, n_allocs, tag, 1);
  gs = granules_of (self, allocs, n_allocs, tag, TRUE);
  ok = gs->len == 0 || arena_granules_sleep (self, (guint *) gs->data, gs->len, error);
  if (!ok)
    {
      mark_slabs (self, allocs, n_allocs, tag, -1);
      mark (self, allocs, n_allocs, -1);
    }
  else
    for (gsize i = 0; i < n_allocs; i++)
      self->n_asleep[arena_tag_of (self, allocs[i])]++;
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  if (!ok)
    g_prefix_error (error, "arena: unmapping %u granules of %" G_GSIZE_FORMAT " bytes: ", gs->len,
                    self->granularity);
  return ok;
}

gboolean
arena_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  g_autoptr (GArray) gs = NULL;
  gboolean ok;
  guint tag;

  g_mutex_lock (&self->parts.lock);
  tag = tag_of_all (self, allocs, n_allocs);
  gs = granules_of (self, allocs, n_allocs, tag, FALSE);
  ok = gs->len == 0 || arena_granules_wake (self, (guint *) gs->data, gs->len, error);
  if (ok)
    {
      mark_slabs (self, allocs, n_allocs, tag, -1);
      mark (self, allocs, n_allocs, -1);
      for (gsize i = 0; i < n_allocs; i++)
        self->n_asleep[arena_tag_of (self, allocs[i])] = 0;
      self->mapped_high = MAX (self->mapped_high, self->n_mapped);
    }
  arena_spares_release (self);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  if (!ok)
    g_prefix_error (error,
                    "arena: mapping %u granules of %" G_GSIZE_FORMAT " bytes again: ", gs->len,
                    self->granularity);
  return ok;
}

gboolean
arena_sleep_forget (Arena *self, guint64 addr, guint64 size)
{
  guint tag = self->gtag[arena_granule (self, addr)];

  if (!g_hash_table_remove (self->asleep_large, GSIZE_TO_POINTER (addr)))
    return FALSE;
  span_asleep (self, addr, size, -1);
  if (self->n_asleep[tag] > 0 && --self->n_asleep[tag] == 0)
    slabs_return (self, tag);
  return TRUE;
}

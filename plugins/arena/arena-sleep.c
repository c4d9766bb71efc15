/* memres - CUDA memory resources
 * arena-sleep.c: the `arena` kind's sleep and wake slots (docs/sleep.md).
 *
 * A sleep first gives every idle granule back to the driver (the free memory: what a trim to 0
 * gives back), then counts the bytes of each sleeping large extent in its granules (Arena.asleep)
 * and releases every granule whose held bytes are all asleep: those the tag's buffers cover alone,
 * with free bytes around them or other sleeping buffers (arena_granules_sleep(): unmapped after
 * "about to be unmapped", then released). A granule shared with an awake buffer, a tagged free
 * range or a slab stays mapped, its contents too, and its sleeping bytes count as asleep all
 * the same; so do blocks of the size classes (their slabs are shared by the blocks of every
 * tag). The addresses stay reserved and the extents stay in use.
 *
 * While a tag sleeps, the free bytes of a released granule may be handed out to another
 * allocation: backing them (arena_span_hold()) maps memory under the whole granule again, and
 * the wake finds it mapped and leaves it. A wake creates and maps memory under every granule of
 * the tag's extents that has none (arena_granules_wake()), all or nothing. A sleeping extent
 * closed forgets its asleep bytes (arena_sleep_forget(), from the close) and is freed settled,
 * not tagged with the closing stream (a tagged range is reused on its stream without backing
 * its granules, and no work can use memory it has not got): reusing it backs its granules.
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

/* The granules of the extents among @allocs that are mapped and all asleep (@sleep), or without
 * memory (a wake); sorted, each once. Lock held. */
static GArray *
granules_of (Arena *self, MemresAllocation *const *allocs, gsize n, gboolean sleep)
{
  GArray *gs = g_array_new (FALSE, FALSE, sizeof (guint));
  guint last = G_MAXUINT;
  guint m = 0;

  for (gsize i = 0; i < n; i++)
    {
      guint64 size;

      if (!extent_of (self, allocs[i], &size))
        continue;
      for (guint g = arena_granule (self, allocs[i]->address);
           g <= arena_granule (self, allocs[i]->address + size - 1); g++)
        if (sleep ? self->handle[g] != 0 && self->held[g] == self->asleep[g] : self->handle[g] == 0)
          g_array_append_val (gs, g);
    }
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

  if (!refuse_own (self, allocs, n_allocs, error))
    return FALSE;
  g_mutex_lock (&self->parts.lock);
  /* the free memory first: every idle granule given back, as a trim does */
  if (!arena_release_idle (self, 0, error))
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
  mark (self, allocs, n_allocs, 1);
  gs = granules_of (self, allocs, n_allocs, TRUE);
  ok = gs->len == 0 || arena_granules_sleep (self, (guint *) gs->data, gs->len, error);
  if (!ok)
    mark (self, allocs, n_allocs, -1);
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

  g_mutex_lock (&self->parts.lock);
  gs = granules_of (self, allocs, n_allocs, FALSE);
  ok = gs->len == 0 || arena_granules_wake (self, (guint *) gs->data, gs->len, error);
  if (ok)
    {
      mark (self, allocs, n_allocs, -1);
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
  if (!g_hash_table_remove (self->asleep_large, GSIZE_TO_POINTER (addr)))
    return FALSE;
  span_asleep (self, addr, size, -1);
  return TRUE;
}

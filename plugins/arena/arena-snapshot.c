/* memres - CUDA memory resources
 * arena-snapshot.c: the `arena` kind's snapshot slot (#MemresResourceOps.snapshot): what the
 * reserved range holds, copied under the lock with the fronts stopped. The blocks of the slabs
 * (used, or free in a front or a shared bin) and each slab's bytes past its last block (unused);
 * the free ranges of the heap where granules are mapped (free when settled, pending while
 * tagged with the stream of their last free), and the parked extents (arena-park.c) as pending
 * on the stream of their close, left parked (a snapshot changes nothing the arena holds); the
 * unmapped granules as holes; the bytes of lent and shared granules whose memory the other
 * address uses as withheld (arena-lend.c: a retired granule whole, a shared granule's bytes
 * outside its extent and its donor's bytes inside it), so that the other blocks add up to the
 * physical memory once; what is left of the range, live large buffers, as used blocks (two
 * adjacent large buffers read as one block). */
#include "arena-private.h"

static gint
range_cmp (gconstpointer a, gconstpointer b)
{
  const Range *x = *(Range *const *) a, *y = *(Range *const *) b;

  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static gint
withheld_cmp (gconstpointer a, gconstpointer b)
{
  const Range *x = a, *y = b;

  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The withheld bytes (Range: addr, size, tag), in address order: the retired granules whole,
 * and each shared granule's bytes outside [lo, hi) at @to and inside at @from. None of them lies
 * in a free range, a slab or a buffer. Lock held. */
static GArray *
withheld_collect (Arena *self)
{
  GArray *w = g_array_new (FALSE, FALSE, sizeof (Range));
  guint64 g = self->granularity;

  for (guint i = 0; i < self->retired->len; i++)
    {
      guint64 at = arena_granule_address (self, g_array_index (self->retired, Retired, i).g);

      g_array_append_val (w, ((Range){ at, g, NULL, NULL }));
    }
  for (guint i = 0; i < self->shared->len; i++)
    {
      const Shared *sh = &g_array_index (self->shared, Shared, i);
      guint64 to = arena_granule_address (self, sh->to);
      guint64 from = arena_granule_address (self, sh->from);

      if (sh->lo > 0)
        g_array_append_val (w, ((Range){ to, sh->lo, sh->stream, NULL }));
      if (sh->hi < g)
        g_array_append_val (w, ((Range){ to + sh->hi, g - sh->hi, sh->stream, NULL }));
      g_array_append_val (w, ((Range){ from + sh->lo, sh->hi - sh->lo, sh->stream, NULL }));
    }
  g_array_sort (w, withheld_cmp);
  return w;
}

/* The bytes [at, end) that no free range nor slab holds: withheld where @w (from *@next on)
 * says, live large buffers (used) elsewhere. Lock held. */
static void
add_held (MemresSnapshotLayer *layer, GArray *w, guint *next, guint64 at, guint64 end)
{
  while (at < end)
    {
      const Range *r;

      while (*next < w->len
             && g_array_index (w, Range, *next).addr + g_array_index (w, Range, *next).size <= at)
        (*next)++;
      r = *next < w->len ? &g_array_index (w, Range, *next) : NULL;
      if (r == NULL || r->addr >= end)
        {
          memres_snapshot_add_block (layer, at, end - at, NULL, MEMRES_BLOCK_USED);
          return;
        }
      if (r->addr > at)
        {
          memres_snapshot_add_block (layer, at, r->addr - at, NULL, MEMRES_BLOCK_USED);
          at = r->addr;
        }
      memres_snapshot_add_block (layer, at, MIN (end, r->addr + r->size) - at, r->tag,
                                 MEMRES_BLOCK_WITHHELD);
      at = MIN (end, r->addr + r->size);
    }
}

static gint
chunk_cmp (gconstpointer a, gconstpointer b)
{
  const Chunk *x = *(Chunk *const *) a, *y = *(Chunk *const *) b;

  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The free range [addr, addr + size) split by granule: runs of mapped granules as free (or
 * pending) blocks, runs of unmapped ones as holes. Lock held. */
static void
add_free (Arena *self, MemresSnapshotLayer *layer, const Range *r)
{
  guint64 addr = r->addr, end = r->addr + r->size;

  while (addr < end)
    {
      gboolean mapped = self->handle[arena_granule (self, addr)] != 0;
      guint64 run = addr;

      while (run < end && (self->handle[arena_granule (self, run)] != 0) == mapped)
        {
          /* a range lies in one reservation (ranges of two never coalesce) */
          guint64 base = arena_reservation_of (self, run)->base;

          run = MIN (end,
                     base + ((((run - base) >> self->granule_shift) + 1) << self->granule_shift));
        }
      if (mapped)
        memres_snapshot_add_block (layer, addr, run - addr, r->tag,
                                   r->tag == NULL ? MEMRES_BLOCK_FREE : MEMRES_BLOCK_PENDING);
      else
        memres_snapshot_add_hole (layer, addr, run - addr);
      addr = run;
    }
}

/* The blocks of slab @sl, used or free (in @free_blocks), and its extent's bytes past its last
 * block (the extent rounded up to ARENA_ALIGN, or a class that does not divide the slab) as
 * unused, so that the slab's blocks add up to its extent. Lock held. */
static void
add_slab (MemresSnapshotLayer *layer, const Chunk *sl, GHashTable *free_blocks)
{
  guint64 end = sl->addr;

  for (guint i = 0; i < sl->n_blocks; i++)
    {
      Block *b = (Block *) &sl->blocks[i];
      /* a sleeping block's size is a marker (arena-sleep.c): its class's */
      gsize size = cache_class_size (b->cls);

      memres_snapshot_add_block (layer, b->address, size, b->stream,
                                 g_hash_table_contains (free_blocks, b) ? MEMRES_BLOCK_FREE
                                                                        : MEMRES_BLOCK_USED);
      end = MAX (end, b->address + size);
    }
  if (end < sl->addr + sl->size)
    memres_snapshot_add_block (layer, end, sl->addr + sl->size - end, NULL, MEMRES_BLOCK_UNUSED);
}

void
arena_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  Arena *self = memres_resource_get_private (mr);
  g_autoptr (GHashTable) free_blocks = g_hash_table_new (NULL, NULL);
  g_autoptr (GPtrArray) ranges = g_ptr_array_new ();
  g_autoptr (GPtrArray) slabs = g_ptr_array_new ();
  g_autoptr (GArray) withheld = NULL;
  g_autofree Range *parked = g_new (Range, self->n_parked + 1);
  guint next_withheld = 0, n_parked = 0;
  guint64 at, va_end;
  guint r, s;

  g_mutex_lock (&self->parts.lock);
  cache_fronts_stop (&self->parts);
  cache_free_blocks_collect (&self->parts, free_blocks);
  cache_fronts_resume (&self->parts);

  for (Range *f = arena_tree_first (&self->addr_tree); f != NULL;
       f = arena_tree_next (&self->addr_tree, f))
    g_ptr_array_add (ranges, f);
  /* a parked extent is a range tagged with its close's stream that is out of the heap: mapped,
   * overlapping no free range, slab or buffer; shown as the heap shows a tagged range, without
   * the flush that would put it there (the program's next allocation of its size takes it) */
  for (const Parked *p = self->parked_oldest; p != NULL; p = p->newer)
    {
      parked[n_parked] = (Range){ p->addr, p->size, p->stream, NULL };
      g_ptr_array_add (ranges, &parked[n_parked++]);
    }
  g_ptr_array_sort (ranges, range_cmp);
  for (Chunk *c = self->chunks; c != NULL; c = c->next)
    g_ptr_array_add (slabs, c);
  g_ptr_array_sort (slabs, chunk_cmp);
  withheld = withheld_collect (self);

  /* each reservation in address order: free ranges, slabs, and the live large buffers between
   * them */
  for (guint k = 0; k < self->n_resv; k++)
    for (at = self->resv[k].base, va_end = at + self->resv[k].size, r = 0, s = 0, next_withheld = 0;
         at < va_end;)
      {
        const Range *fr = r < ranges->len ? g_ptr_array_index (ranges, r) : NULL;
        const Chunk *sl = s < slabs->len ? g_ptr_array_index (slabs, s) : NULL;
        guint64 next;

        /* nothing overlaps (the heap's and the slabs' invariant); skip what would */
        if (fr != NULL && fr->addr < at)
          {
            r++;
            continue;
          }
        if (sl != NULL && sl->addr < at)
          {
            s++;
            continue;
          }
        next = MIN (MIN (fr != NULL ? fr->addr : va_end, sl != NULL ? sl->addr : va_end), va_end);

        if (next > at)
          {
            add_held (layer, withheld, &next_withheld, at, next);
            at = next;
            continue;
          }
        if (fr != NULL && fr->addr == at)
          {
            add_free (self, layer, fr);
            at += fr->size;
            r++;
            continue;
          }
        add_slab (layer, sl, free_blocks);
        at += sl->size;
        s++;
      }
  /* the buffers of memory of their own, each at a reservation of its own (arena-export.c) */
  for (const OwnBuf *own = self->owns; own != NULL; own = own->next)
    if (own->imported)
      memres_snapshot_add_import (layer, own->base, own->bytes);
    else
      memres_snapshot_add_block (layer, own->base, own->bytes, NULL, MEMRES_BLOCK_USED);
  memres_snapshot_add_figure (layer, "granularity", self->granularity);
  memres_snapshot_add_figure (layer, "mapped", (guint64) self->n_mapped << self->granule_shift);
  memres_snapshot_add_figure (layer, "idle_mapped",
                              (guint64) self->n_idle_mapped << self->granule_shift);
  memres_snapshot_add_figure (layer, "reserved_address_space", self->va_size);
  memres_snapshot_add_figure (layer, "release_threshold", self->release_threshold);
  g_mutex_unlock (&self->parts.lock);
}

/* memres - CUDA memory resources
 * arena-heap.c: the address range of the `arena` kind as free ranges: best fit (the smallest
 * free range that holds a request, by a tree ordered on (tag, size, address)), neighbours of the
 * same tag coalesced at every insert, and the free range holding an address, or the free
 * neighbours of bytes being freed, found by a second tree, ordered on the address
 * (arena_heap_range_at(), heap_neighbours()).
 *
 * A range's tag is the stream of the last free that made it (normalized: the legacy stream is
 * MEMRES_STREAM_LEGACY), or NULL once it is settled. A tagged range is reused at once by
 * allocations on its stream, whose order puts them after the free; its bytes stay held, so its
 * granules stay mapped. Each tagged range holds an event on its stream after its last free
 * (arena-events.c: recorded at the close, or on the legacy stream one shared by many closes and
 * recorded when a decision needs it). Settling (arena_heap_settle()) makes tagged ranges settled
 * once their events are done: every stream may then use them, and their granules, once no other
 * bytes hold them, are idle. Without a wait (before the arena would create physical memory), the
 * line of each stream with tagged ranges is polled (arena_line_poll(): cuEventQuery, oldest event
 * first, up to the first not done; no call blocks) and the ranges whose events are done settle;
 * with a wait (out of memory, trim, finalize), all of them after cuCtxSynchronize. All under
 * parts.lock. */
#include "arena-runs.h"

#include <string.h>

void
arena_heap_init (Arena *self)
{
  arena_tree_init (&self->free_tree, ARENA_ORDER_FIT, G_STRUCT_OFFSET (Range, fit_node));
  arena_runs_init (self);
  arena_tree_init (&self->addr_tree, ARENA_ORDER_ADDR, G_STRUCT_OFFSET (Range, addr_node));
}

/* Every range freed, their events unreferenced (parts.lock held, before cache_parts_clear()). */
void
arena_heap_clear (Arena *self)
{
  g_autoptr (GPtrArray) ranges = g_ptr_array_new_with_free_func (g_free);

  /* collected first: a walk reads the links of ranges it has passed */
  for (Range *r = arena_tree_first (&self->free_tree); r != NULL;
       r = arena_tree_next (&self->free_tree, r))
    {
      cache_event_unref (&self->parts, g_steal_pointer (&r->event));
      g_ptr_array_add (ranges, r);
    }
  arena_tree_clear (&self->free_tree);
  arena_tree_clear (&self->addr_tree);
  arena_tree_clear (&self->run_tree);
  g_clear_pointer (&self->run_dirty, g_free);
  while (self->n_range_pool > 0)
    g_free (self->range_pool[--self->n_range_pool]);
}

/* Whether @r, its key in the best-fit tree about to become (its tag, @size, @addr), keeps its
 * place there: the ranges before and after it in the tree's order stay on either side of the new
 * key. Then the tree needs no removal and insertion (two searches and rebalancing): a placement
 * taken from one end of a range, or a free merged into one, keeps the order about three times in
 * four on the resnet18 trace. */
static gboolean
fit_place_holds (Arena *self, Range *r, guint64 addr, guint64 size)
{
  Range probe = { addr, size, r->tag };
  Range *n;

  return ((n = arena_tree_prev (&self->free_tree, r)) == NULL
          || arena_range_order (ARENA_ORDER_FIT, n, &probe) < 0)
         && ((n = arena_tree_next (&self->free_tree, r)) == NULL
             || arena_range_order (ARENA_ORDER_FIT, &probe, n) < 0);
}

/* @r out of the tables, but for its place in the address tree when @reshaped (range_reshape():
 * shrunk or grown into free space, the tree's order still holds) and, when @held, its place in
 * the best-fit tree. */
static void
range_detach (Arena *self, Range *r, gboolean reshaped, gboolean held)
{
  if (!reshaped)
    arena_tree_remove (&self->addr_tree, r);
  if (!held)
    arena_tree_remove (&self->free_tree, r);
  if (r->tag != NULL)
    self->tagged_bytes -= r->size;
  arena_runs_detached (self, r);
}

void
arena_range_unlink (Arena *self, Range *r)
{
  range_detach (self, r, FALSE, FALSE);
}

/* @r's event unreferenced, the struct kept for range_new() (a best-fit pair frees one range
 * and makes one: no malloc and free each) or freed. */
void
arena_range_free (Arena *self, Range *r)
{
  cache_event_unref (&self->parts, r->event);
  if (self->n_range_pool < G_N_ELEMENTS (self->range_pool))
    self->range_pool[self->n_range_pool++] = r;
  else
    g_free (r);
}

static Range *
range_new (Arena *self)
{
  Range *r = self->n_range_pool > 0 ? self->range_pool[--self->n_range_pool] : g_new (Range, 1);

  r->in_run = FALSE;
  r->dirty_at = 0;
  r->visit = 0;
  return r;
}

/* @r into the tables, but for what it kept there (@reshaped, @held: range_detach()'s). @before
 * and @after: the free ranges that end where it starts and start where it ends (NULL: none),
 * which each caller knows (the run index links them, arena-runs.c; arena_heap_check() checks
 * them). */
static void
range_attach (Arena *self, Range *r, gboolean reshaped, gboolean held, Range *before, Range *after)
{
  if (!reshaped)
    arena_tree_insert (&self->addr_tree, r);
  if (!held)
    arena_tree_insert (&self->free_tree, r);
  if (r->tag != NULL)
    self->tagged_bytes += r->size;
  arena_runs_attached (self, r, before, after);
}

/* The free ranges around address @a, by one search of the address tree: *@prev the last that
 * starts at or before it, *@next the first that starts after it (NULL where none). */
static void
addr_around (Arena *self, guint64 a, Range **prev, Range **next)
{
  Range key = { a, 0, NULL };
  Range *n = arena_tree_upper_bound (&self->addr_tree, &key);

  *prev = n != NULL ? arena_tree_prev (&self->addr_tree, n) : arena_tree_last (&self->addr_tree);
  *next = n;
}

/* The free neighbours of the bytes [addr, end), which no free range holds (in use, or being
 * freed): the range that ends at @addr (*@left) and the one that starts at @end (*@right), NULL
 * where none. One search of the address tree: the first range starting after @addr starts at
 * @end or later, and the one before it ends at @addr or earlier. */
static void
heap_neighbours (Arena *self, guint64 addr, guint64 end, Range **left, Range **right)
{
  Range *p, *n;

  addr_around (self, addr, &p, &n);
  *left = p != NULL && p->addr + p->size == addr ? p : NULL;
  *right = n != NULL && n->addr == end ? n : NULL;
}

/* @r, a free range, becomes [addr, addr + size), shrunk or grown into free space (one end where
 * it was, or the merge of a free that the address tree's order lets it keep its place):
 * out of the tables and in again, keeping its place in the address tree, and in the best-fit
 * tree where fit_place_holds(). @before and @after: its free neighbours then. */
static void
range_reshape (Arena *self, Range *r, guint64 addr, guint64 size, Range *before, Range *after)
{
  gboolean held = fit_place_holds (self, r, addr, size);

  range_detach (self, r, TRUE, held);
  r->addr = addr;
  r->size = size;
  range_attach (self, r, TRUE, held, before, after);
}

/* arena_heap_insert() with the free ranges that end at @addr (@before) and start at
 * @addr + @size (@after), NULL where none, looked up by the caller. */
static inline void
heap_insert_between (Arena *self, guint64 addr, guint64 size, MemresStream tag, CacheEvent *event,
                     Range *before, Range *after)
{
  Range *left = before, *right = after;
  const Reservation *here = arena_reservation_of (self, addr);
  Range *r;

  /* ranges of two reservations that happen to be adjacent stay apart: a granule index counts
   * within its reservation */
  if (left != NULL && arena_reservation_of (self, left->addr) != here)
    left = NULL;
  if (right != NULL && arena_reservation_of (self, right->addr) != here)
    right = NULL;
  if (left == NULL || left->tag != tag)
    left = NULL;
  if (right == NULL || right->tag != tag)
    right = NULL;
  /* a neighbour merged with is grown in place (the address tree's order holds: the bytes it
   * grows into are free), its event replaced by the newer @event; a new range only without one */
  if ((r = left != NULL ? left : right) != NULL)
    {
      /* its free neighbours then: those of the ranges it merges, else @before and @after */
      Range *l = left != NULL ? left->before : before, *n = right != NULL ? right->after : after;
      guint64 grown = r->size + size + (left != NULL && right != NULL ? right->size : 0);

      if (left != NULL && right != NULL)
        {
          arena_range_unlink (self, right);
          arena_range_free (self, right);
        }
      /* grown at its end (a left neighbour) or at its start (a right one alone) */
      if (r == left)
        range_reshape (self, r, r->addr, grown, l, n);
      else
        range_reshape (self, r, addr, grown, l, n);
      cache_event_unref (&self->parts, r->event);
      r->event = event;
      return;
    }
  r = range_new (self);
  r->addr = addr;
  r->size = size;
  r->tag = tag;
  r->event = event;
  range_attach (self, r, FALSE, FALSE, before, after);
}

/* [addr, addr + size) is free, tagged @tag (NULL: settled; its bytes must be dropped by the
 * caller) with @event (recorded on @tag after the free; the caller's reference is taken),
 * merged with free neighbours of the same tag, whose events the newer @event replaces. */
void
arena_heap_insert (Arena *self, guint64 addr, guint64 size, MemresStream tag, CacheEvent *event)
{
  Range *left, *right;

  heap_neighbours (self, addr, addr + size, &left, &right);
  heap_insert_between (self, addr, size, tag, event, left, right);
}

/* The free range (of any tag) that holds address @a, or NULL: one search of the tree by
 * address. */
Range *
arena_heap_range_at (Arena *self, guint64 a)
{
  Range *r, *next;

  addr_around (self, a, &r, &next);
  return r != NULL && a < r->addr + r->size ? r : NULL;
}

/* The smallest free range tagged @tag of at least @size bytes, or NULL. */
Range *
arena_heap_best_fit (Arena *self, MemresStream tag, guint64 size)
{
  Range key = { 0, size, tag };
  Range *r = arena_tree_lower_bound (&self->free_tree, &key);

  return r != NULL && r->tag == tag ? r : NULL;
}

/* Takes @size bytes of @r, its first ones or with @at_end its last ones (the rest stays free
 * with its tag); returns their address. */
guint64
arena_heap_take (Arena *self, Range *r, guint64 size, gboolean at_end)
{
  guint64 addr = at_end ? r->addr + r->size - size : r->addr;

  if (r->size == size)
    {
      arena_range_unlink (self, r);
      arena_range_free (self, r);
    }
  else if (at_end)
    range_reshape (self, r, r->addr, r->size - size, r->before, NULL);
  else
    range_reshape (self, r, r->addr + size, r->size - size, NULL, r->after);
  return addr;
}

/* Takes [addr, addr + size) out of @r, which holds it (what is left on either side stays free
 * with @r's tag, the event's reference shared); returns @addr. */
guint64
arena_heap_take_at (Arena *self, Range *r, guint64 addr, guint64 size)
{
  guint64 end = r->addr + r->size;

  if (addr == r->addr || addr + size == end)
    return arena_heap_take (self, r, size, addr != r->addr);
  /* @r keeps the bytes before (its place in the address tree too: the piece after starts past
   * it), shrunk before the piece after goes in (the best-fit tree's order is checked against
   * the ranges there now); the piece after: a new range with a reference of the event */
  range_reshape (self, r, r->addr, addr - r->addr, r->before, NULL);
  if (r->event != NULL)
    r->event->refs++;
  arena_heap_insert (self, addr + size, end - (addr + size), r->tag, r->event);
  return addr;
}

/* A window of @size bytes in @r that may serve @tag: its start (@at_end: its end) when that
 * serves, else the other end, else one starting or ending at a granule boundary inside it.
 * FALSE when none does. */
gboolean
arena_heap_window (Arena *self, Range *r, guint64 size, guint tag, gboolean at_end, guint64 *addr)
{
  guint64 lo = r->addr, hi = r->addr + r->size, mask = self->granularity - 1;
  guint64 cand[4] = { at_end ? hi - size : lo, at_end ? lo : hi - size, (lo + mask) & ~mask,
                      (hi & ~mask) - size };

  for (guint i = 0; i < 4; i++)
    if (cand[i] >= lo && cand[i] <= hi - size && cand[i] + size > cand[i]
        && arena_heap_window_serves (self, cand[i], size, lo, hi, tag))
      {
        *addr = cand[i];
        return TRUE;
      }
  return FALSE;
}

/* arena_heap_best_fit() for tag @tag: the smallest free range of stream @stream with a window
 * that may serve @tag (arena_heap_window(), its start preferred), the window's address in *@addr.
 */
Range *
arena_heap_fit_serving (Arena *self, MemresStream stream, guint64 size, guint tag, guint64 *addr)
{
  Range key = { 0, size, stream };

  for (Range *r = arena_tree_lower_bound (&self->free_tree, &key); r != NULL;
       r = arena_tree_next (&self->free_tree, r))
    {
      if (r->tag != stream)
        break;
      if (arena_heap_window (self, r, size, tag, FALSE, addr))
        return r;
    }
  return NULL;
}

/* Whether the tagged range @r is one a settle for tag @owner takes: all its granules serve
 * @owner (CACHE_TAG_ANY: any tagged range). */
static gboolean
settle_takes (Arena *self, const Range *r, guint owner)
{
  if (owner != CACHE_TAG_ANY)
    for (guint g = arena_granule (self, r->addr); g <= arena_granule (self, r->addr + r->size - 1);
         g++)
      if (self->gtag[g] != owner)
        return FALSE;
  return TRUE;
}

/* arena_heap_settle() of the tagged ranges all of whose granules serve @owner (CACHE_TAG_ANY:
 * every tagged range). */
static gboolean
settle (Arena *self, gboolean wait, guint owner, GError **error)
{
  g_autoptr (GPtrArray) tagged = NULL;

  if (self->tagged_bytes == 0)
    return TRUE;
  tagged = g_ptr_array_new ();
  for (Range *r = arena_tree_first (&self->free_tree); r != NULL;
       r = arena_tree_next (&self->free_tree, r))
    if (r->tag != NULL && settle_takes (self, r, owner))
      g_ptr_array_add (tagged, r);
  if (tagged->len == 0)
    return TRUE;
  if (wait)
    {
      if (!memres_cuda_device_synchronize (self->device, error))
        return FALSE;
      arena_lines_all_done (self);
    }
  else
    {
      MemresStream polled = NULL;
      guint kept = 0;

      /* the line of each stream polled once (the tree orders the ranges by stream first): its
       * events asked oldest first, up to the first not done (arena-events.c) */
      for (guint i = 0; i < tagged->len; i++)
        {
          Range *range = g_ptr_array_index (tagged, i);

          if (range->tag != polled && !arena_line_poll (self, polled = range->tag, FALSE, NULL))
            return TRUE; /* no answer: nothing settled */
        }
      for (guint i = 0; i < tagged->len; i++)
        {
          Range *range = g_ptr_array_index (tagged, i);

          if (arena_event_done (range->event))
            g_ptr_array_index (tagged, kept++) = range;
        }
      g_ptr_array_set_size (tagged, kept);
      if (kept == 0)
        return TRUE;
    }
  for (guint i = 0; i < tagged->len; i++)
    {
      Range *r = g_ptr_array_index (tagged, i);
      guint64 addr = r->addr, size = r->size;

      arena_range_unlink (self, r);
      arena_range_free (self, r);
      arena_span_drop (self, addr, size);
      arena_heap_insert (self, addr, size, NULL, NULL);
    }
  if (self->shared->len > 0)
    arena_shared_resolve (self, NULL, NULL, 0, G_MAXUINT64);
  self->settles++;
  return TRUE;
}

/* Without @wait: each tagged range whose event is done (cuEventQuery: nothing waits) is
 * settled; the others stay tagged (a stream held back keeps its own, the caller then creates
 * memory instead); a query that fails settles nothing. With @wait (trim, the out-of-memory
 * flush, finalize): after the device's work is done (cuCtxSynchronize), every tagged range is
 * settled. */
gboolean
arena_heap_settle (Arena *self, gboolean wait, GError **error)
{
  return settle (self, wait, CACHE_TAG_ANY, error);
}

/* arena_heap_settle() without a wait of the tagged ranges whose granules all serve tag @owner
 * (cache_tag_index()): a tag's sleep, which gives back the tag's free memory and leaves the
 * other tags' ranges tagged (reused on their streams without a driver call). */
gboolean
arena_heap_settle_tag (Arena *self, guint owner, GError **error)
{
  return settle (self, FALSE, owner, error);
}

/* The granules without memory that @size bytes at the better end of @r would need. */
static guint
range_unbacked (Arena *self, Range *r, guint64 size)
{
  return MIN (arena_span_unbacked (self, r->addr, size),
              arena_span_unbacked (self, r->addr + r->size - size, size));
}

/* A new extent of @size bytes (a multiple of ARENA_ALIGN) for an allocation on @tag (a
 * normalized stream): a free range of that stream's if one fits as tightly as a settled one, or
 * if the settled one would need memory created while the stream's own range needs none; else a
 * settled range, its granules backed (idle granules moved there first). When backing it would
 * create physical memory, or nothing fits, the tagged ranges are settled first and the search
 * made again. In a settled range, a large buffer goes to the end that needs fewer granules
 * backed (next to memory in use); a @slab (of the size classes) to its top end: slabs stack
 * from the top of the reservation down, away from the large buffers, between which a slab
 * would keep two frees from coalescing (a cache grown a token at a time, as torch.cat does,
 * then no longer fits the hole its predecessor left with the slack beside it:
 * /arena/memory/kv-growth went from 1.233 to 1.106 times the peak used). */
static gboolean
extent_place (Arena *self, guint64 size, gboolean slab, MemresStream tag, guint owner,
              guint64 *addr, GError **error)
{
  gboolean settled = FALSE, grown = FALSE, at_end;

  for (;;)
    {
      guint64 mine_at = 0, any_at = 0;
      Range *mine, *any;

      /* place=stable: best fit over the stream's own and the settled ranges as one
       * (arena-stable.c); else as below */
      if (self->stable_place && tag != NULL && tag != CU_STREAM_PER_THREAD)
        {
          gint placed = arena_stable_place (self, size, slab, tag, owner, settled, addr, error);

          if (placed >= 0)
            return placed > 0;
          if (!settled && self->tagged_bytes > 0)
            {
              if (!arena_heap_settle (self, FALSE, error))
                return FALSE;
              settled = TRUE;
              continue;
            }
        }
      mine = tag != NULL && tag != CU_STREAM_PER_THREAD
                 ? arena_heap_fit_serving (self, tag, size, owner, &mine_at)
                 : NULL;
      /* a range of the stream's own of exactly @size: no settled one fits tighter (the test
       * below would take it), so that one is not looked for (a buffer freed and allocated
       * again at its size: 259 instructions of a 1 MiB pair's 3,691) */
      if (mine != NULL && mine->size == size)
        {
          *addr = arena_heap_take_at (self, mine, mine_at, size);
          return TRUE;
        }
      /* settle=eager: the stream's own free ranges settled first, where their work is done, so
       * that they coalesce with the settled ones around them and best fit below sees whole
       * holes, not the pieces the stream freed (which it takes, in the middle of a hole, leaving
       * slivers of granules that live neighbours hold: memres-bench --random 1.066 -> 1.034
       * times its peak requested on the fake, bench/RESULTS.md); a cuEventQuery per stream
       * with free ranges, each such request */
      if (self->eager_settle && !settled && !slab && self->tagged_bytes > 0)
        {
          if (!arena_heap_settle (self, FALSE, error))
            return FALSE;
          settled = TRUE;
          continue;
        }
      any = arena_heap_fit_serving (self, NULL, size, owner, &any_at);
      if (mine != NULL && (any == NULL || mine->size <= any->size))
        {
          *addr = arena_heap_take_at (self, mine, mine_at, size);
          return TRUE;
        }
      /* settling (every tagged range whose event is done made settled, its granules idle)
       * only when no range of the stream's own fits: one that does serves without a driver call
       * (below, when the settled fit would need memory created), where a settle before it would
       * leave this stream's frees idle and move their memory into the tighter settled fit, one
       * cuMemMap per granule (a training step's largest buffers: thousands of granules a step) */
      if (!settled && self->tagged_bytes > 0 && mine == NULL
          && (any == NULL || arena_span_unbacked (self, any->addr, size) > arena_reusable (self)))
        {
          if (!arena_heap_settle (self, FALSE, error))
            return FALSE;
          settled = TRUE;
          continue;
        }
      /* settled or not, the stream's own range rather than a tighter settled one that would
       * need memory created: that would strand the stream's free bytes */
      if (mine != NULL && range_unbacked (self, any, size) > arena_reusable (self))
        {
          *addr = arena_heap_take_at (self, mine, mine_at, size);
          return TRUE;
        }
      if (tag != NULL && tag != CU_STREAM_PER_THREAD && self->tagged_bytes > 0)
        {
          guint64 run_addr = 0;
          guint run_unbacked = 0; /* set when found; the optimizer reads it before (memcheck) */
          Range *from = NULL;

          /* on a tie too: the run's window starts in the stream's own free bytes (a ring of
           * growing caches' front tail), which a settled range's fresh start would leave
           * behind (/arena/memory/kv-growth) */
          if (arena_runs_best_fit (self, tag, size, owner, &run_addr, &from, &run_unbacked)
              && (any == NULL || run_unbacked <= arena_span_unbacked (self, any->addr, size)))
            {
              arena_placement_begin (self, run_addr, size, owner);
              if (!arena_runs_take (self, from, run_addr, size, error))
                return FALSE;
              self->run_takes++;
              *addr = run_addr;
              return TRUE;
            }
        }
      if (any == NULL && !grown)
        {
          if (!arena_reserve_more (self, size, error))
            return FALSE;
          grown = TRUE;
          continue;
        }
      if (any == NULL)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                       "arena: no free range of %" G_GUINT64_FORMAT
                       " bytes in its %" G_GUINT64_FORMAT " bytes of address space",
                       size, self->va_size);
          return FALSE;
        }
      /* the end of the range that needs fewer granules backed: next to memory in use; a slab's
       * top end */
      at_end = slab
               || arena_span_unbacked (self, any->addr + any->size - size, size)
                      < arena_span_unbacked (self, any->addr, size);
      /* that end, or the other, or a window at a granule boundary that may serve @owner */
      arena_heap_window (self, any, size, owner, at_end, &any_at);
      *addr = arena_heap_take_at (self, any, any_at, size);
      arena_placement_begin (self, *addr, size, owner);
      if (!arena_span_hold (self, *addr, size, error))
        {
          arena_heap_insert (self, *addr, size, NULL, NULL);
          return FALSE;
        }
      return TRUE;
    }
}

/* The granules of [addr, addr + size) serve tag @owner from now on. */
void
arena_span_serve (Arena *self, guint64 addr, guint64 size, guint owner)
{
  guint g0 = arena_granule (self, addr);

  memset (self->gtag + g0, (guint8) owner, arena_granule (self, addr + size - 1) + 1 - g0);
}

/* The extent [addr, addr + size) that a placement for tag @owner is about to back: its granules
 * serve @owner from now on (before their "mapped" events are queued), and no donor granule of
 * lending may overlap it (arena-lend.c: Arena.lend_lo, lend_hi). */
void
arena_placement_begin (Arena *self, guint64 addr, guint64 size, guint owner)
{
  arena_span_serve (self, addr, size, owner);
  self->lend_lo = addr;
  self->lend_hi = addr + size;
}

/* A new extent for tag @owner (cache_tag_index(): its granules serve that tag alone, see
 * arena_granule_serves()); extent_place() does the rest. */
gboolean
arena_extent_new (Arena *self, guint64 size, gboolean slab, MemresStream tag, guint owner,
                  guint64 *addr, GError **error)
{
  gboolean ok;

  /* the stream's own frees may be lent to it (arena-lend.c); not the per-thread default
   * stream's, one handle for the streams of many threads */
  self->lend_stream = tag != CU_STREAM_PER_THREAD ? tag : NULL;
  ok = extent_place (self, size, slab, tag, owner, addr, error);
  if (ok)
    arena_lend_commit (self, *addr, size);
  else
    arena_lend_abort (self);
  self->lend_stream = NULL;
  if (!ok)
    return FALSE;
  arena_span_serve (self, *addr, size, owner);
  return TRUE;
}

/* The bytes whose settling the free of @size bytes on @tag between the free ranges @left and
 * @right (NULL: none) makes wait for the close's event: its own, and those of the neighbours
 * tagged @tag whose events are recorded that it merges with (arena_heap_insert(): the merged
 * range holds the newest event). */
static guint64
bytes_waiting (guint64 size, MemresStream tag, const Range *left, const Range *right)
{
  guint64 bytes = size;

  if (left != NULL && left->tag == tag && left->event != NULL && left->event->event != NULL)
    bytes += left->size;
  if (right != NULL && right->tag == tag && right->event != NULL && right->event->event != NULL)
    bytes += right->size;
  return bytes;
}

/* The extent [addr, addr + size) is free, freed on @tag (NULL: settled already): an event on
 * @tag after the free marks it (arena_close_event(): recorded now, or on the legacy stream one
 * shared with the closes around it, recorded later); when a record fails, a wait for @tag settles
 * the extent at once. On failure (neither worked) nothing changed. */
gboolean
arena_extent_free (Arena *self, guint64 addr, guint64 size, MemresStream tag, GError **error)
{
  Range *left, *right;
  CacheEvent *event = NULL;

  /* its free neighbours, looked up once (recording the event changes no range) */
  heap_neighbours (self, addr, addr + size, &left, &right);
  if (tag != NULL
      && (event = arena_close_event (self, tag, bytes_waiting (size, tag, left, right), NULL))
             == NULL)
    {
      if (!memres_cuda_stream_synchronize (self->device, tag, error))
        return FALSE;
      tag = NULL;
    }
  if (tag == NULL)
    arena_span_drop (self, addr, size);
  heap_insert_between (self, addr, size, tag, event, left, right);
  if (self->shared->len > 0)
    arena_shared_resolve (self, tag, event, addr, addr + size);
  return TRUE;
}

/* The most one request could get from free range @r without creating memory: the longest run
 * of its bytes, granule by granule, whose granules without memory number at most the granules
 * idle elsewhere (and spares), @reusable of them. A run is contiguous: mapped bytes at both ends
 * of the range with unmapped granules between them are not one block. */
static guint64
range_servable (Arena *self, const Range *r, guint reusable)
{
  guint64 end = r->addr + r->size, best = 0, sum = 0;
  guint g0 = arena_granule (self, r->addr), g1 = arena_granule (self, end - 1);
  guint idle, k, unmapped = 0, lo;
  guint64 mapped = arena_span_mapped_bytes (self, r->addr, r->size, &idle);

  k = reusable - MIN (idle, reusable);
  if (r->size - mapped <= (guint64) k * self->granularity)
    return r->size;
  lo = g0;
  for (guint g = g0; g <= g1; g++)
    {
      guint64 ga = arena_granule_address (self, g);

      sum += MIN (end, ga + self->granularity) - MAX (r->addr, ga);
      unmapped += self->handle[g] == 0;
      while (unmapped > k)
        {
          guint64 la = arena_granule_address (self, lo);

          sum -= MIN (end, la + self->granularity) - MAX (r->addr, la);
          unmapped -= self->handle[lo] == 0;
          lo++;
        }
      best = MAX (best, sum);
    }
  return best;
}

/* The most one request could get from the physical memory the arena holds, without creating
 * any: over every free range, its longest run of bytes whose granules without memory the
 * granules idle elsewhere (and spares) can back (range_servable()). For the out-of-memory
 * report; lock held. */
guint64
arena_heap_largest_servable (Arena *self)
{
  guint64 largest = 0;

  for (Range *r = arena_tree_first (&self->free_tree); r != NULL;
       r = arena_tree_next (&self->free_tree, r))
    largest = MAX (largest, range_servable (self, r, arena_reusable (self)));
  return largest;
}

/* Grows the large extent [addr, addr + old_size) to @new_size bytes in place, into the free range
 * right after it, if that range is settled or tagged @tag, lies in the same reservation and
 * holds the new bytes: their granules backed (arena_span_hold(), which may ask for unmaps
 * first: FALSE without an error and want_unmap set). FALSE without an error when the range does
 * not allow it; on failure nothing changed. */
gboolean
arena_heap_grow_in_place (Arena *self, guint64 addr, guint64 old_size, guint64 new_size,
                          MemresStream tag, GError **error)
{
  guint64 at = addr + old_size, need = new_size - old_size;
  guint owner = self->gtag[arena_granule (self, addr)];
  Range *left, *r;

  heap_neighbours (self, addr, at, &left, &r);
  if (r == NULL || (r->tag != NULL && r->tag != tag) || r->size < need
      || arena_reservation_of (self, addr) != arena_reservation_of (self, at)
      || !arena_heap_window_serves (self, at, need, r->addr, r->addr + r->size, owner))
    return FALSE;
  /* a tagged range's bytes are held already; what is left of it keeps its tag and event */
  arena_span_serve (self, at, need, owner);
  if (r->tag == NULL && !arena_span_hold (self, at, need, error))
    return FALSE;
  arena_heap_take (self, r, need, FALSE);
  return TRUE;
}

/* For a move of the large extent [addr, addr + old_size) that remaps its whole granules: a
 * settled free range holding @new_size bytes at an address N with N - @addr a multiple of the
 * granularity (so that each whole granule of the old extent lands on a whole granule of the new
 * one), those target granules without physical memory. The smallest such range; the extent
 * [N, N + new_size) taken out of it (the rest stays free and settled), its bytes not held yet.
 * FALSE when no range allows it. Lock held. */
gboolean
arena_heap_take_congruent (Arena *self, guint64 addr, guint64 old_size, guint64 new_size,
                           guint64 *at)
{
  guint64 mask = self->granularity - 1;
  guint64 i_lo = (addr + mask) & ~mask, i_hi = (addr + old_size) & ~mask;
  Range key = { 0, new_size, NULL };
  guint owner = self->gtag[arena_granule (self, addr)];

  for (Range *r = arena_tree_lower_bound (&self->free_tree, &key); r != NULL;
       r = arena_tree_next (&self->free_tree, r))
    {
      guint64 n = r->addr + ((addr - r->addr) & mask);
      gboolean unbacked = TRUE;

      if (r->tag != NULL)
        break;
      if (n + new_size > r->addr + r->size
          || !arena_heap_window_serves (self, n, new_size, r->addr, r->addr + r->size, owner))
        continue;
      for (guint64 a = n + (i_lo - addr); a < n + (i_hi - addr) && unbacked; a += self->granularity)
        unbacked = self->handle[arena_granule (self, a)] == 0;
      if (!unbacked)
        continue;
      arena_range_unlink (self, r);
      if (r->addr < n)
        arena_heap_insert (self, r->addr, n - r->addr, NULL, NULL);
      if (n + new_size < r->addr + r->size)
        arena_heap_insert (self, n + new_size, r->addr + r->size - (n + new_size), NULL, NULL);
      arena_range_free (self, r);
      arena_span_serve (self, n, new_size, owner);
      *at = n;
      return TRUE;
    }
  return FALSE;
}

/* memres - CUDA memory resources
 * arena-runs.c: runs of free ranges for the `arena` kind's placement (arena-heap.c
 * extent_place()). A run is a chain of two or more adjacent free ranges, each settled or tagged
 * with one stream: such neighbours never coalesce (their tags differ), yet that stream may use
 * them together, its own frees being ordered before its allocations.
 *
 * Each free range is linked with its free neighbours (Range.before, .after: the run walks follow
 * them, no lookups), and only a tagged range with a neighbour that is settled or tagged with its
 * stream (in its reservation) can be in a run, so those alone are indexed: Arena.run_tree, ordered
 * as the best-fit tree (tag, size, address), which decides ties as the walk over every tagged
 * range did. arena-runs.h keeps the links and the index true as ranges join and leave the heap's
 * tables (arena-heap.c range_attach(), range_detach()), the index lazily: a range whose place
 * may have changed is marked (Arena.run_dirty) and put in or out when the index is next read,
 * so that a buffer closed and allocated again at its size never enters the tree.
 * arena_runs_best_fit() walks each run once, from the first of its ranges in that order.
 * memres-bench --random's warm replay on the fake: 46.1k instructions an operation before
 * (every tagged range of the stream walked its whole run by hash lookups), 13.2k after, every
 * placement the same (bench/RESULTS.md, h-bestfit).
 *
 * And arena_heap_check(): the heap's indexes checked against each other (the counter heap_errors
 * with check=true, which tests/test-arena-heap.c reads after random operations). All
 * under parts.lock. */
#include "arena-runs.h"

/* @r into the run index or out of it. */
void
arena_runs_index (Arena *self, Range *r, gboolean in)
{
  if (in == r->in_run)
    return;
  if (in)
    arena_tree_insert (&self->run_tree, r);
  else
    arena_tree_remove (&self->run_tree, r);
  r->in_run = in;
}

void
arena_runs_init (Arena *self)
{
  arena_tree_init (&self->run_tree, ARENA_ORDER_FIT, G_STRUCT_OFFSET (Range, run_node));
  self->run_dirty = NULL;
  self->n_run_dirty = self->run_dirty_size = 0;
}

/* Room for more ranges in run_dirty. */
void
arena_runs_grow (Arena *self)
{
  self->run_dirty_size = MAX (64, self->run_dirty_size * 2);
  self->run_dirty = g_renew (Range *, self->run_dirty, self->run_dirty_size);
}

/* The run index brought up to date: each range of run_dirty in it exactly when a neighbour
 * joins it. */
static void
runs_flush (Arena *self)
{
  for (guint i = 0; i < self->n_run_dirty; i++)
    {
      Range *r = self->run_dirty[i];

      r->dirty_at = 0;
      arena_runs_index (self, r, arena_runs_member (self, r, r->before, r->after));
    }
  self->n_run_dirty = 0;
}

/* @r's free neighbour before it (@left) or after it, if it is settled or tagged @tag and in the
 * same reservation (ranges of two reservations stay apart: arena_heap_insert()). Also
 * arena-stable.c's. */
Range *
arena_runs_neighbour (const Arena *self, const Range *r, MemresStream tag, gboolean left)
{
  Range *n = left ? r->before : r->after;

  return n != NULL && (n->tag == NULL || n->tag == tag)
                 && (self->n_resv == 1
                     || arena_reservation_of (self, n->addr)
                            == arena_reservation_of (self, r->addr))
             ? n
             : NULL;
}

/* Calls @fn for every run of two or more adjacent free ranges that are each settled or tagged
 * @tag (such neighbours never coalesce, yet the stream may use them together: its own frees are
 * ordered before its allocations), once, with its first and its last range: over the run index
 * (every such run holds a tagged range with a neighbour in it: two settled neighbours coalesce),
 * in the order of the best-fit tree of the tagged range it is reached from first (the order
 * decides arena_runs_best_fit()'s ties). Before h-bestfit every tagged range of the stream
 * walked its whole run (memres-bench --random's warm replay: 194 tagged ranges and 838 neighbour
 * steps a call, for 73 runs of 258 ranges in all). */
void
arena_runs_foreach (Arena *self, MemresStream tag, ArenaRunFunc fn, gpointer data)
{
  Range key = { 0, 0, tag };
  guint32 visit;

  runs_flush (self);
  /* a stamp no range holds: after 2^32 calls, every range's cleared first */
  if ((visit = ++self->run_visit) == 0)
    {
      for (Range *r = arena_tree_first (&self->free_tree); r != NULL;
           r = arena_tree_next (&self->free_tree, r))
        r->visit = 0;
      visit = self->run_visit = 1;
    }
  for (Range *r = arena_tree_lower_bound (&self->run_tree, &key); r != NULL;
       r = arena_tree_next (&self->run_tree, r))
    {
      Range *left = r, *right = r, *n;

      if (r->tag != tag)
        break;
      /* a run walked already, from a range before this one */
      if (r->visit == visit)
        continue;
      r->visit = visit;
      while ((n = arena_runs_neighbour (self, left, tag, TRUE)) != NULL)
        (left = n)->visit = visit;
      while ((n = arena_runs_neighbour (self, right, tag, FALSE)) != NULL)
        (right = n)->visit = visit;
      if (left != right)
        fn (self, left, right, data);
    }
}

/* The free range that address @at of the run from @first on lies in. */
Range *
arena_runs_range_of (Range *first, guint64 at)
{
  Range *f = first;

  while (f->addr + f->size <= at)
    f = f->after;
  return f;
}

static void
run_fit_consider (Arena *self, Range *left, Range *right, gpointer data)
{
  ArenaRunChoice *b = data;
  guint64 run = right->addr + right->size - left->addr;

  if (run < b->size)
    return;
  for (guint side = 0; side < 2; side++)
    {
      guint64 at = side == 0 ? left->addr : right->addr + right->size - b->size;
      gboolean front = side == 0 && left->tag != NULL;
      guint u;

      if (!arena_heap_window_serves (self, at, b->size, left->addr, right->addr + right->size,
                                     b->owner))
        continue;
      u = arena_span_unbacked (self, at, b->size);
      if (!b->found || u < b->unbacked
          || (u == b->unbacked
              && (front > b->best_front || (front == b->best_front && run < b->best_run))))
        {
          b->found = TRUE;
          b->at = at;
          b->from = arena_runs_range_of (left, at);
          b->unbacked = u;
          b->best_front = front;
          b->best_run = run;
        }
    }
}

/* For an allocation on @tag: a window of @size bytes in a run of adjacent free ranges that are
 * each settled or tagged @tag, at least two of them (arena_runs_foreach()). Of the windows at
 * either end of every such run, the one with the fewest granules to back; then the window at
 * the start of a run that begins with the stream's own free bytes (the front of a ring of caches
 * grown a token at a time, /arena/memory/kv-growth: the new one continues there, into the
 * settled bytes after them); then the tightest run; then the first reached. *@from is the free
 * range its first byte lies in. FALSE when no run holds @size bytes.
 *
 * The run's length alone does not choose between the ring's front and a hole behind it: the run
 * at the front reaches into the settled rest of the reservation, whose length is the
 * reservation's (twice the device's memory), not the workload's. Chosen by length, a tie went to
 * the front on a 256 MiB device and behind it on an 80 GiB one (kv-growth 1.021 against 1.063). */
gboolean
arena_runs_best_fit (Arena *self, MemresStream tag, guint64 size, guint owner, guint64 *addr,
                     Range **from, guint *unbacked)
{
  ArenaRunChoice b = { size, owner, FALSE, FALSE, FALSE, G_MAXUINT64, 0, 0, NULL };

  arena_runs_foreach (self, tag, run_fit_consider, &b);
  if (b.found)
    {
      *addr = b.at;
      *from = b.from;
      *unbacked = b.unbacked;
    }
  return b.found;
}

/* Takes [addr, addr + size) out of the run of free ranges it lies in, from @from on (settled,
 * or tagged with the allocating stream): the settled parts are held (their granules backed),
 * the tagged parts are held already; what is left of the first and the last range stays free
 * with its tag and event. On failure nothing changed. */
gboolean
arena_runs_take (Arena *self, Range *from, guint64 addr, guint64 size, GError **error)
{
  g_autoptr (GPtrArray) parts = NULL;
  guint64 end = addr + size;
  Range *first, *last;
  guint held;

  /* within one range (nearly every placement of a repeating step): taken out of it in place, its
   * settled bytes held first (arena_heap_take_at(); the tables touched once, not the range
   * unlinked and what is left of it inserted again: 3,600 instructions a placement before) */
  if (end <= from->addr + from->size)
    {
      if (from->tag == NULL && !arena_span_hold (self, addr, size, error))
        return FALSE;
      arena_heap_take_at (self, from, addr, size);
      return TRUE;
    }
  parts = g_ptr_array_new ();
  for (Range *r = from; r != NULL && r->addr < end; r = r->after)
    g_ptr_array_add (parts, r);
  for (held = 0; held < parts->len; held++)
    {
      Range *p = g_ptr_array_index (parts, held);
      guint64 a = MAX (p->addr, addr), e = MIN (p->addr + p->size, end);

      if (p->tag == NULL && !arena_span_hold (self, a, e - a, error))
        {
          while (held-- > 0)
            {
              p = g_ptr_array_index (parts, held);
              a = MAX (p->addr, addr);
              if (p->tag == NULL)
                arena_span_drop (self, a, MIN (p->addr + p->size, end) - a);
            }
          return FALSE;
        }
    }
  first = g_ptr_array_index (parts, 0);
  last = g_ptr_array_index (parts, parts->len - 1);
  for (guint i = 0; i < parts->len; i++)
    arena_range_unlink (self, g_ptr_array_index (parts, i));
  /* each piece left keeps a reference of its range's event; range_free() drops the range's */
  if (first->addr < addr)
    {
      if (first->event != NULL)
        first->event->refs++;
      arena_heap_insert (self, first->addr, addr - first->addr, first->tag, first->event);
    }
  if (last->addr + last->size > end)
    {
      if (last->event != NULL)
        last->event->refs++;
      arena_heap_insert (self, end, last->addr + last->size - end, last->tag, last->event);
    }
  for (guint i = 0; i < parts->len; i++)
    arena_range_free (self, g_ptr_array_index (parts, i));
  return TRUE;
}

typedef struct
{
  Arena *self;
  const Range *prev; /* the range before, by address */
  guint64 ranges, members, tagged_bytes, errors;
} Check;

static void
check_range (Check *c, Range *r)
{
  Arena *self = c->self;
  Range *next = arena_tree_next (&self->addr_tree, r);
  Range *l = c->prev != NULL && c->prev->addr + c->prev->size == r->addr ? (Range *) c->prev : NULL;
  Range *n = next != NULL && next->addr == r->addr + r->size ? next : NULL;
  gboolean member = arena_runs_member (self, r, l, n);

  c->ranges++;
  c->members += member;
  if (r->tag != NULL)
    c->tagged_bytes += r->size;
  /* in address order, not empty, apart from the one before */
  c->errors += r->size == 0 || (c->prev != NULL && c->prev->addr + c->prev->size > r->addr);
  /* in the best-fit tree */
  c->errors += !arena_tree_holds (&self->free_tree, r);
  /* linked with its free neighbours */
  c->errors += r->before != l || r->after != n;
  /* in the run index exactly when a neighbour joins it */
  c->errors += member != r->in_run;
  c->errors += arena_tree_holds (&self->run_tree, r) != member;
  c->prev = r;
}

/* The disagreements among the heap's indexes: every free range of the address tree (in order,
 * none overlapping) in the best-fit tree, linked with its free
 * neighbours and, exactly when one of them joins it in a run, in the run index; the counts of
 * those, and tagged_bytes, the sum of the tagged ranges. 0 unless the arena has a bug. A walk of
 * every free range (a few lookups each): for the tests, through the counter heap_errors
 * (the option check=true). Lock held. */
guint64
arena_heap_check (Arena *self)
{
  Check c = { self, NULL, 0, 0, 0, 0 };

  runs_flush (self);
  for (Range *r = arena_tree_first (&self->addr_tree); r != NULL;
       r = arena_tree_next (&self->addr_tree, r))
    check_range (&c, r);
  c.errors += c.ranges != self->free_tree.n;
  c.errors += c.members != self->run_tree.n;
  /* each tree's own structure */
  c.errors += arena_tree_check (&self->addr_tree) + arena_tree_check (&self->free_tree)
              + arena_tree_check (&self->run_tree);
  c.errors += c.tagged_bytes != self->tagged_bytes;
  return c.errors;
}

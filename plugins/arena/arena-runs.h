/* memres - CUDA memory resources
 * arena-runs.h: the run index of the `arena` kind kept true as free ranges join and leave the
 * heap's tables (arena-runs.c says what it is): inline, as arena-heap.c's range_attach() and
 * range_detach() call it at every free and every placement (a buffer closed and allocated
 * again at its size pays a few stores, no lookup: its neighbours are the caller's). Lock held. */
#pragma once

#include "arena-private.h"

/* Whether the free range @n, next to the free range @r, may be in a run of @r's stream: settled
 * or tagged with it, in the same reservation (ranges of two reservations stay apart:
 * arena_heap_insert()). */
static inline gboolean
arena_runs_joins (const Arena *self, const Range *n, const Range *r)
{
  return (n->tag == NULL || n->tag == r->tag)
         && (self->n_resv == 1
             || arena_reservation_of (self, n->addr) == arena_reservation_of (self, r->addr));
}

/* Whether @r belongs in the run index: tagged, with a neighbour on either side that joins it
 * (@l and @n its neighbours, NULL where none). */
static inline gboolean
arena_runs_member (const Arena *self, const Range *r, const Range *l, const Range *n)
{
  return r->tag != NULL
         && ((l != NULL && arena_runs_joins (self, l, r))
             || (n != NULL && arena_runs_joins (self, n, r)));
}

/* @r's place in the run index to be brought up to date before the index is next read
 * (arena-runs.c runs_flush()): a range freed and taken again in between (a buffer closed and
 * allocated again at its size) never enters the tree. */
static inline void
arena_runs_mark (Arena *self, Range *r)
{
  if (r->dirty_at != 0)
    return;
  if (self->n_run_dirty == self->run_dirty_size)
    arena_runs_grow (self);
  self->run_dirty[self->n_run_dirty++] = r;
  r->dirty_at = self->n_run_dirty;
}

/* @r out of run_dirty (it leaves the heap's tables). */
static inline void
arena_runs_unmark (Arena *self, Range *r)
{
  Range *last;

  if (r->dirty_at == 0)
    return;
  /* the last one moves to its place */
  last = self->run_dirty[--self->n_run_dirty];
  self->run_dirty[r->dirty_at - 1] = last;
  last->dirty_at = r->dirty_at;
  r->dirty_at = 0;
}

/* @r has joined the heap's tables (range_attach(); in_run FALSE) between @before and @after, the
 * free ranges that end where it starts and start where it ends (NULL: none): linked with them;
 * it is to enter the run index if one of them joins it, and a tagged neighbour that it joins
 * too (a range joining can only add members). */
static inline void
arena_runs_attached (Arena *self, Range *r, Range *before, Range *after)
{
  gboolean member = FALSE;

  r->before = before;
  r->after = after;
  if (before != NULL)
    {
      before->after = r;
      if (arena_runs_joins (self, before, r))
        member = r->tag != NULL;
      if (before->tag != NULL && !before->in_run && arena_runs_joins (self, r, before))
        arena_runs_mark (self, before);
    }
  if (after != NULL)
    {
      after->before = r;
      if (arena_runs_joins (self, after, r))
        member = r->tag != NULL;
      if (after->tag != NULL && !after->in_run && arena_runs_joins (self, r, after))
        arena_runs_mark (self, after);
    }
  if (member)
    arena_runs_mark (self, r);
}

/* @r has left the heap's tables (range_detach(), before its address, size or tag change): out
 * of the run index, unlinked from its neighbours (its own links kept: the caller may read them),
 * and a neighbour in the index that it joined is to stay only if its other neighbour joins it
 * (marked: the flush decides). */
static inline void
arena_runs_detached (Arena *self, Range *r)
{
  Range *l = r->before, *n = r->after;

  if (r->in_run)
    arena_runs_index (self, r, FALSE);
  arena_runs_unmark (self, r);
  if (l != NULL)
    {
      l->after = NULL;
      if (l->in_run && arena_runs_joins (self, r, l))
        arena_runs_mark (self, l);
    }
  if (n != NULL)
    {
      n->before = NULL;
      if (n->in_run && arena_runs_joins (self, r, n))
        arena_runs_mark (self, n);
    }
}

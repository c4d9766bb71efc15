/* memres - CUDA memory resources
 * arena-stable.c: place=stable (docs/arena.md): a large request on a stream placed the same way
 * whatever moment the stream's events complete, so that a repeating training step keeps its
 * layout and maps nothing once it has run once.
 *
 * Why (tests/test-arena-steps.c, /arena/steps/resnet18-random): with the device catching up at
 * random points of each step, as on a GPU where the host is only slightly ahead, plain `arena`
 * remapped 3-93 granules a step for 10-20 steps of resnet18's step on the fake (11-208 a step
 * for 50+ steps on an H100). Two things changed with the timing: (1) whether a free range of the
 * stream's own is still tagged or already settled decides which ranges coalesce, so best fit
 * chose other addresses each step; (2) lending (arena-lend.c) moved the memory of the stream's
 * own frees to new addresses, and took their old addresses out of the free ranges until their
 * events were done. Here (1) the stream's own free ranges and the settled ones are one: best fit
 * over the maximal runs of adjacent ranges that are each settled or tagged with the stream
 * (which it may use at once: its frees are ordered before its allocations), the tightest run
 * (a run longer than the most bytes ever live counting as that long: stable_length()), then the
 * window needing the fewest granules backed, then the lowest address; and (2) lending
 * only once the physical memory would be more than ARENA_STABLE_SLACK above the peak used
 * (created below that). Without it, the same replay with neither: no lending, 1.05 times the
 * peak used and 3 steps to converge; with both: 1.016-1.019 and from step 2 nothing mapped. */
#include "arena-private.h"

/* Created rather than lent while the memory mapped stays within 1/ARENA_STABLE_SLACK (2 %) over
 * the peak used. */
#define ARENA_STABLE_SLACK 50

/* The length a run of @run bytes counts for in stable_fit()'s choice of the tightest for @size
 * bytes (less than @size only when @run is): at most stable_high, the most bytes of extents the
 * arena has had live (at least @size). A run longer than that could hold all of them at once, and
 * its length beyond says how large the reservation is, not how tight the fit: the run that reaches
 * into the settled rest of the reservation is as long as the reservation (twice the device's
 * memory). Uncapped, that run lost to any hole behind it on an 80 GiB reservation and won on the
 * fake's 512 MiB one: at the start of a batch, /arena/memory/kv-growth's ring of growing caches
 * jumped from its front (its own free bytes, then the settled rest) to an old hole at the bottom
 * that needed memory backed, 1.106 times the peak used there against 1.021 on the small
 * reservation. Capped, such runs tie, and the window needing the fewest granules backed, then the
 * lowest address, decides, the same at every reservation. stable_high is a function of the request
 * sequence (unlike used_high, which a stats reset lowers), so the layout stays one too. */
static guint64
stable_length (const Arena *self, guint64 run, guint64 size)
{
  return MIN (run, MAX (self->stable_high, size));
}

/* The run [first, last] (one range or several) as a candidate for @data's request: a slab at
 * its top end, taken when higher than the best; a large request at either end, taken when the
 * run is tighter (its length as stable_length() counts it), or as tight with fewer granules to
 * back, or as both at a lower address. The best is the least (length, granules to back,
 * address), or the highest for a slab: whatever the order the runs come in. */
static void
stable_consider (Arena *self, Range *first, Range *last, gpointer data)
{
  ArenaRunChoice *b = data;
  guint64 lo = first->addr, hi = last->addr + last->size, run;

  if (hi - lo < b->size)
    return;
  run = stable_length (self, hi - lo, b->size);
  if (!b->slab && run > b->best_run)
    return;
  for (guint side = b->slab ? 1 : 0; side < 2; side++)
    {
      guint64 at = side == 0 ? lo : hi - b->size;
      guint u;

      if (b->slab && b->found && at <= b->at)
        continue;
      if (!arena_heap_window_serves (self, at, b->size, lo, hi, b->owner))
        continue;
      u = arena_span_unbacked (self, at, b->size);
      if (!b->slab && b->found
          && (run > b->best_run || (run == b->best_run && u > b->unbacked)
              || (run == b->best_run && u == b->unbacked && at >= b->at)))
        continue;
      b->found = TRUE;
      b->best_run = run;
      b->at = at;
      b->unbacked = u;
      b->from = arena_runs_range_of (first, at);
    }
}

/* The tightest run of free ranges each settled or tagged @tag (at least @size bytes; its length
 * as stable_length() counts it): of the windows at its two ends that may serve @owner, the one
 * with the fewest granules to back, then the lowest. A @slab: the top end of the highest run that
 * holds it, so that slabs stack down from the top of the reservation (a hole among them first)
 * and never land among the large buffers (docs/arena.md: on two threads, the slabs made for the
 * other thread's front cache took 55 more granules). *@from the free range the window's first
 * byte lies in. FALSE when no run holds @size bytes.
 *
 * The runs of several ranges come from the run index (arena_runs_foreach()); a range with no
 * neighbour in a run is a run of its own, and those are taken from the best-fit tree upwards
 * from @size, the stream's own then the settled ones, until they count longer than the best so
 * far (all of them for a slab, whose best is the highest). The choice is the same as walking
 * every run (h-headroom checked both on every placement of the arena tests and the shim
 * replays). Before, every free range of the stream and every settled one was walked from the
 * smallest: 5,800 instructions a placement on the resnet18 trace repeated (callgrind), and the
 * shim's steady step through place=stable cost 1.2 us an allocation more than cache>dmr on an
 * H100's host (bench/RESULTS.md). */
static gboolean
stable_fit (Arena *self, MemresStream tag, guint64 size, gboolean slab, guint owner, guint64 *addr,
            Range **from, guint *unbacked)
{
  ArenaRunChoice b = { size, owner, slab, FALSE, FALSE, G_MAXUINT64, 0, 0, NULL };

  arena_runs_foreach (self, tag, stable_consider, &b);
  for (guint pass = 0; pass < 2; pass++)
    {
      MemresStream want = pass == 0 ? tag : NULL;
      Range key = { 0, size, want };

      for (Range *r = arena_tree_lower_bound (&self->free_tree, &key); r != NULL;
           r = arena_tree_next (&self->free_tree, r))
        {
          if (r->tag != want || (!slab && stable_length (self, r->size, size) > b.best_run))
            break;
          if (arena_runs_neighbour (self, r, tag, TRUE) == NULL
              && arena_runs_neighbour (self, r, tag, FALSE) == NULL)
            stable_consider (self, r, r, &b);
        }
    }
  if (b.found)
    {
      *addr = b.at;
      *from = b.from;
      *unbacked = b.unbacked;
    }
  return b.found;
}

/* extent_place() with place=stable, for an allocation on @tag (a stream, not the per-thread
 * one): 1 and *@addr when placed in the best run (stable_fit()); 0 on failure (@error set, or
 * none with want_unmap set: arena_span_hold()); -1 when no run holds @size bytes, or when its
 * window would need more granules backed than are idle or spare and the tagged ranges were not
 * @settled yet (the caller settles and asks again, or goes on as without the option). */
gint
arena_stable_place (Arena *self, guint64 size, gboolean slab, MemresStream tag, guint owner,
                    gboolean settled, guint64 *addr, GError **error)
{
  guint64 at = 0;
  guint unbacked = 0;
  Range *from = NULL;
  gboolean across;

  self->stable_high = MAX (self->stable_high, self->large_used + self->slab_bytes + size);
  if (!stable_fit (self, tag, size, slab, owner, &at, &from, &unbacked))
    return -1;
  if (!settled && self->tagged_bytes > 0 && unbacked > arena_reusable (self))
    return -1;
  arena_placement_begin (self, at, size, owner);
  across = at + size > from->addr + from->size;
  if (!arena_runs_take (self, from, at, size, error))
    return 0;
  /* counted as arena_runs_best_fit()'s takes are (it was not: 0 over test-arena-heap's random
   * operations with place=stable) */
  self->run_takes += across;
  *addr = at;
  return 1;
}

/* Whether a placement that needs @n more granules than the spares hold may lend the memory of
 * its stream's frees (arena-lend.c): always without place=stable; with it, only when creating
 * them would map more than ARENA_STABLE_SLACK over the peak used (Arena.used_peak: a stats
 * reset or read changes no decision). */
gboolean
arena_stable_may_lend (Arena *self, guint n)
{
  return !self->stable_place
         || ((guint64) self->n_mapped + n) * self->granularity
                > self->used_peak + self->used_peak / ARENA_STABLE_SLACK;
}

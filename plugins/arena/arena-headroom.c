/* memres - CUDA memory resources
 * arena-headroom.c: the remap headroom of the `arena` kind (docs/arena.md): physical memory
 * created beyond the peak of granules in use, instead of moving idle granules, once the arena has
 * seen that moving them is undone.
 *
 * By default a placement that needs memory takes it from idle granules (unmapped where they lie,
 * mapped where it needs them: a remap) before it creates any, so the physical peak is the peak of
 * granules with bytes in use. A repeating workload (a training step) whose layout uses more
 * granules over a step than at any one moment then moves the same memory back and forth every
 * step: resnet18's step through the allocator shim, replayed on the fake, used 446 granules over a
 * step against 440 at its peak, and remapped 56 granules every step (about 100 us each on an
 * H100: 5 ms of a 10 ms step) with its layout otherwise fixed.
 *
 * A *refault* is a granule that needs memory again at an address whose memory was unmapped to
 * back another (arena_unmap_idle() without release): the move was undone. Each refault raises the
 * headroom by one granule, up to ARENA_HEADROOM_MAX of the peak of granules in use. While the
 * memory mapped stays within that peak plus the headroom, a placement creates granules rather
 * than moving idle ones or lending its stream's frees (arena-lend.c). A workload that never
 * comes back to an address it left (a ring of growing KV caches, a one-off replay) never refaults
 * and keeps the peak of granules in use; one that repeats stops moving memory after a step or
 * two. Memory the driver refuses (CUDA_ERROR_OUT_OF_MEMORY) sets the headroom to 0 again, so the
 * out-of-memory retry moves idle granules as before. Counters: granules_refaulted, headroom
 * (bytes). All under parts.lock. */
#include "arena-private.h"

/* The headroom stays within 1/ARENA_HEADROOM_MAX (1/32: 3.1 %) of the peak of granules in use. */
#define ARENA_HEADROOM_MAX 32

/* Granules [g0, g1] are about to be backed: each without memory whose memory was moved away
 * from it (a refault, marked ARENA_MOVED) raises the headroom by one, within its bound, once: it
 * is marked ARENA_REFAULTING until arena_headroom_done() counts it. A placement that fails or
 * asks again (its span's idle granules unmapped first, or the out-of-memory retry after
 * arena_headroom_reset()) notes it again without raising the headroom a second time. */
void
arena_headroom_note (Arena *self, guint g0, guint g1)
{
  guint refaults = 0;

  if (!self->stable_place)
    return;
  for (guint g = g0; g <= g1; g++)
    if (self->handle[g] == 0 && self->moved_away[g] == ARENA_MOVED)
      {
        self->moved_away[g] = ARENA_REFAULTING;
        refaults++;
      }
  if (refaults > 0)
    self->headroom = MIN (self->headroom + refaults, self->held_high / ARENA_HEADROOM_MAX);
}

/* The granules [g0, g1] have memory now: their refaults are counted (granules_refaulted counts
 * the refaults served, not those of a placement that failed: /arena-stable/headroom/
 * failed-placement) and their marks cleared. */
void
arena_headroom_done (Arena *self, guint g0, guint g1)
{
  for (guint g = g0; g <= g1; g++)
    {
      self->refaulted += self->moved_away[g] == ARENA_REFAULTING;
      self->moved_away[g] = 0;
    }
}

/* Whether @extra granules more than the spares hold may be created rather than taken from idle
 * granules or lent: the memory mapped then stays within the peak of granules in use plus the
 * headroom. */
gboolean
arena_headroom_allows (const Arena *self, guint extra)
{
  return self->headroom > 0 && (guint64) self->n_mapped + extra <= self->held_high + self->headroom;
}

/* The peak of granules in use, after a placement held its span. */
void
arena_headroom_held (Arena *self)
{
  self->held_high = MAX (self->held_high, self->n_mapped - self->n_idle_mapped);
}

/* The driver refused memory: no headroom until granules refault again. */
void
arena_headroom_reset (Arena *self)
{
  self->headroom = 0;
}

/* A placement outside the allocation path (a resize's, arena-resize.c) failed with *@local: when
 * that is the driver refusing memory while the headroom let it create, the headroom goes to 0,
 * *@local is cleared and TRUE says to try again (moving idle granules then, as the allocation's
 * out-of-memory retry does); else FALSE, *@local kept. Without it, a resize within the headroom
 * on a full device failed with idle granules left to move (/arena-stable/headroom/refused-resize).
 */
gboolean
arena_headroom_refused (Arena *self, GError **local)
{
  if (self->headroom == 0 || !g_error_matches (*local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    return FALSE;
  g_clear_error (local);
  arena_headroom_reset (self);
  return TRUE;
}

/* memres - CUDA memory resources
 * arena-granules.c: the physical memory of the `arena` kind, one granule (the device's
 * allocation granularity) at a time: the granule table, the one place that maps a granule
 * (arena_granule_map()) and the one place that unmaps granules (arena_granules_unmap(), called
 * by arena-unmap.c and by the rollbacks here), the runs of adjacent granules one driver call spans
 * (arena_granule_run()), the idle count of each granule, and backing the granules a new extent
 * needs (spare memory unmapped from idle granules first, else lent, else a new cuMemCreate), and
 * more address space (arena_reserve_more(): a reservation whose granules extend the table).
 * Segment events: arena-segments.c; unmapping, giving back, moving, reaping, sleeping:
 * arena-unmap.c.
 *
 * Backing a granule (arena_span_hold()) never unmaps: when it would create memory while
 * granules are idle, it asks its caller (arena-alloc.c) to unmap them first (want_unmap,
 * arena_unmap_idle()) and to try again.
 *
 * Rollback. Backing the granules of a span: per granule cuMemCreate (or a spare) and cuMemMap,
 * then one cuMemSetAccess per run of adjacent granules (arena_granules_grant()); a failing create
 * or map undoes the ones before it for that granule (release). When a later step of the same span
 * fails, the granules created for it are unmapped and released and the spares mapped there are
 * unmapped and spares again (their "mapped" events, still queued, withdrawn). Spares left over
 * are released at the end of the allocation. Every failure leaves the table as it was and the
 * driver matching it. All under parts.lock. */
#include "arena-private.h"

#include <string.h>

gboolean
arena_granules_init (Arena *self, GError **error)
{
  self->held = g_new0 (guint64, self->n_granules);
  self->gtag = g_new0 (guint8, self->n_granules);
  self->handle = g_new0 (CUmemGenericAllocationHandle, self->n_granules);
  self->mapped_bits = g_new0 (guint64, (self->n_granules + 63) / 64);
  self->in_idle = g_new0 (guint8, self->n_granules);
  self->idle = g_new (guint32, self->n_granules);
  self->spare = g_new (CUmemGenericAllocationHandle, self->n_granules);
  self->pending = g_array_new (FALSE, FALSE, sizeof (PendingEvent));
  self->retired_at = g_new0 (guint8, self->n_granules);
  self->lent_away = g_new0 (guint8, self->n_granules);
  self->moved_away = g_new0 (guint8, self->n_granules);
  self->unmapping = g_new0 (guint8, self->n_granules);
  self->shared_at = g_new0 (guint8, self->n_granules);
  self->keep_lo = G_MAXUINT;
  self->idle_tag = CACHE_TAG_ANY;
  g_mutex_init (&self->ev_lock);
  return TRUE;
}

void
arena_granules_clear (Arena *self)
{
  g_clear_pointer (&self->held, g_free);
  g_clear_pointer (&self->gtag, g_free);
  g_clear_pointer (&self->handle, g_free);
  g_clear_pointer (&self->mapped_bits, g_free);
  g_clear_pointer (&self->in_idle, g_free);
  g_clear_pointer (&self->idle, g_free);
  g_clear_pointer (&self->spare, g_free);
  g_clear_pointer (&self->pending, g_array_unref);
  g_clear_pointer (&self->retired_at, g_free);
  g_clear_pointer (&self->lent_away, g_free);
  g_clear_pointer (&self->moved_away, g_free);
  g_clear_pointer (&self->unmapping, g_free);
  g_clear_pointer (&self->shared_at, g_free);
  g_clear_pointer (&self->asleep, g_free);
  g_clear_pointer (&self->asleep_large, g_hash_table_unref);
  g_mutex_clear (&self->ev_lock);
}

/* @n granules more (a new reservation's), after the others, without memory. */
void
arena_granules_grow (Arena *self, guint n)
{
  guint was = self->n_granules, words = (was + 63) / 64;

  self->n_granules += n;
  /* the bits past @was in its last word are clear already (no granule there had memory) */
  self->mapped_bits = g_renew (guint64, self->mapped_bits, (self->n_granules + 63) / 64);
  memset (self->mapped_bits + words, 0,
          ((self->n_granules + 63) / 64 - words) * sizeof *self->mapped_bits);
  self->held = g_renew (guint64, self->held, self->n_granules);
  self->gtag = g_renew (guint8, self->gtag, self->n_granules);
  self->handle = g_renew (CUmemGenericAllocationHandle, self->handle, self->n_granules);
  self->in_idle = g_renew (guint8, self->in_idle, self->n_granules);
  self->idle = g_renew (guint32, self->idle, self->n_granules);
  self->spare = g_renew (CUmemGenericAllocationHandle, self->spare, self->n_granules);
  self->retired_at = g_renew (guint8, self->retired_at, self->n_granules);
  memset (self->retired_at + was, 0, n * sizeof *self->retired_at);
  self->lent_away = g_renew (guint8, self->lent_away, self->n_granules);
  memset (self->lent_away + was, 0, n * sizeof *self->lent_away);
  self->moved_away = g_renew (guint8, self->moved_away, self->n_granules);
  memset (self->moved_away + was, 0, n * sizeof *self->moved_away);
  self->unmapping = g_renew (guint8, self->unmapping, self->n_granules);
  memset (self->unmapping + was, 0, n * sizeof *self->unmapping);
  self->shared_at = g_renew (guint8, self->shared_at, self->n_granules);
  memset (self->shared_at + was, 0, n * sizeof *self->shared_at);
  memset (self->held + was, 0, n * sizeof *self->held);
  memset (self->gtag + was, 0, n * sizeof *self->gtag);
  memset (self->handle + was, 0, n * sizeof *self->handle);
  memset (self->in_idle + was, 0, n * sizeof *self->in_idle);
  if (self->asleep != NULL)
    {
      self->asleep = g_renew (guint64, self->asleep, self->n_granules);
      memset (self->asleep + was, 0, n * sizeof *self->asleep);
    }
}

/* ---- mapping and unmapping ------------------------------------------------------------------- */

/* THE place where the arena maps memory: @h at granule @g, with the device's access unless
 * @grant is FALSE (the wake grants a run of granules at once, arena_granules_wake()); its
 * "mapped" event queued. On failure nothing is mapped. */
gboolean
arena_granule_map (Arena *self, guint g, CUmemGenericAllocationHandle h, gboolean grant,
                   GError **error)
{
  CUdeviceptr at = arena_granule_address (self, g);
  CUresult r = self->drv->cuMemMap (at, self->granularity, 0, h, 0);

  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemMap");
  r = grant ? self->drv->cuMemSetAccess (at, self->granularity, &self->access, 1) : CUDA_SUCCESS;
  if (r != CUDA_SUCCESS)
    {
      CUresult r2 = self->drv->cuMemUnmap (at, self->granularity);

      if (r2 != CUDA_SUCCESS)
        g_warning ("arena: cuMemUnmap failed (%d) while rolling back a failure", r2);
      return memres_cuda_set_error (error, r, "cuMemSetAccess");
    }
  arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, g);
  return TRUE;
}

/* Whether granule @g + @k lies right after the @k granules from @g, in the same reservation: one
 * driver call may span them all (cuMemUnmap, cuMemSetAccess). */
static gboolean
granules_adjacent (const Arena *self, guint g, guint k)
{
  CUdeviceptr at = arena_granule_address (self, g), next = at + (guint64) k * self->granularity;

  return arena_granule_address (self, g + k) == next
         && arena_reservation_of (self, at) == arena_reservation_of (self, next);
}

/* The run of granules that starts at @gs[@i] (@gs ascending, @n of them): its length, the
 * granules after it that follow it one by one (@gs[@i] + k at @gs[@i + k]), adjacent to it in its
 * reservation (so that one driver call spans them all: cuMemUnmap, cuMemSetAccess) and, unless
 * @also is NULL, for which @also is TRUE. At least 1. Lock held. */
guint
arena_granule_run (Arena *self, const guint *gs, guint n, guint i, ArenaGranuleTest also)
{
  guint run = 1;

  while (i + run < n && gs[i + run] == gs[i] + run && granules_adjacent (self, gs[i], run)
         && (also == NULL || also (self, gs[i + run])))
    run++;
  return run;
}

/* The device's access granted to the @n granules @gs (ascending, mapped without it), one
 * cuMemSetAccess per run of adjacent ones: a span backed at once costs one call, not one per
 * granule. FALSE with @error naming the call when one fails (the runs before it granted). */
gboolean
arena_granules_grant (Arena *self, const guint *gs, guint n, GError **error)
{
  for (guint i = 0, run; i < n; i += run)
    {
      CUresult r;

      run = arena_granule_run (self, gs, n, i, NULL);
      r = self->drv->cuMemSetAccess (arena_granule_address (self, gs[i]), run * self->granularity,
                                     &self->access, 1);
      if (r != CUDA_SUCCESS)
        return memres_cuda_set_error (error, r, "cuMemSetAccess");
    }
  return TRUE;
}

/* THE place where the arena unmaps memory: granule @g and the @n - 1 after it (adjacent in one
 * reservation: one cuMemUnmap), whose bytes are all free and settled (no queued work uses them)
 * or asleep, and whose "about to be unmapped" event was delivered, or whose "mapped" event was
 * withdrawn. */
CUresult
arena_granules_unmap (Arena *self, guint g, guint n)
{
  return self->drv->cuMemUnmap (arena_granule_address (self, g), n * self->granularity);
}

/* Undoes the mapping of granule @g made by a call that then failed (its "mapped" event
 * withdrawn, cuMemUnmap): its memory is released (cuMemRelease), or kept as a spare, released at
 * the end of the call, where @keep (memory moved from a free range) or where the release fails.
 * A failed unmap leaves the granule mapped, its event queued again, with a warning naming
 * @what. Lock held. */
void
arena_granule_roll_back (Arena *self, guint g, gboolean keep, const char *what)
{
  CUresult r;

  arena_segment_withdraw (self, g);
  if ((r = arena_granules_unmap (self, g, 1)) != CUDA_SUCCESS)
    {
      g_warning ("arena: cuMemUnmap failed (%d) while rolling back %s; the granule stays mapped", r,
                 what);
      arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, g);
      return;
    }
  if (keep || (r = self->drv->cuMemRelease (self->handle[g])) != CUDA_SUCCESS)
    {
      self->spare[self->n_spare++] = self->handle[g];
      arena_handle_set (self, g, 0);
      return;
    }
  arena_handle_set (self, g, 0);
  self->n_mapped--;
  self->created--;
}

void
arena_idle_push (Arena *self, guint g)
{
  if (!self->in_idle[g])
    {
      self->in_idle[g] = 1;
      self->idle[self->n_idle_stack++] = g;
    }
}

/* Spare physical memory given back to the driver (what a failed or raced allocation left). */
void
arena_spares_release (Arena *self)
{
  while (self->n_spare > 0)
    {
      CUresult r = self->drv->cuMemRelease (self->spare[self->n_spare - 1]);

      if (r != CUDA_SUCCESS)
        {
          g_debug ("arena: cuMemRelease of a spare granule failed (%d); kept for later", r);
          return;
        }
      self->n_spare--;
      self->n_mapped--;
      self->released++;
    }
}

/* Physical memory for granule @g: a spare's, mapped there (*@moved TRUE), else new; access
 * granted with @grant. */
gboolean
arena_granule_back (Arena *self, guint g, gboolean *moved, gboolean grant, GError **error)
{
  CUmemGenericAllocationHandle h;
  CUresult r;

  *moved = self->n_spare > 0;
  if (*moved)
    {
      h = self->spare[--self->n_spare];
      if (!arena_granule_map (self, g, h, grant, error))
        {
          self->spare[self->n_spare++] = h;
          return FALSE;
        }
      arena_handle_set (self, g, h);
      self->remapped++;
      return TRUE;
    }
  /* the slot says which request failed ("cannot allocate N bytes: "), once */
  if ((r = self->drv->cuMemCreate (&h, self->granularity, &self->prop, 0)) != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemCreate");
  if (!arena_granule_map (self, g, h, grant, error))
    {
      if ((r = self->drv->cuMemRelease (h)) != CUDA_SUCCESS)
        g_warning ("arena: cuMemRelease failed (%d) while rolling back a failure", r);
      return FALSE;
    }
  arena_handle_set (self, g, h);
  self->n_mapped++;
  self->mapped_high = MAX (self->mapped_high, self->n_mapped);
  self->created++;
  return TRUE;
}

/* Adds (@sign 1) or takes away (-1) the bytes of [addr, addr + size) granule by granule; a
 * granule whose count goes to 0 is idle. */
void
arena_span_count (Arena *self, guint64 addr, guint64 size, gint sign)
{
  guint64 end = addr + size;

  for (guint g = arena_granule (self, addr); addr < end; g++)
    {
      guint64 g_end = arena_granule_address (self, g) + self->granularity;
      guint64 bytes = MIN (end, g_end) - addr;

      if (sign > 0)
        {
          if (self->held[g] == 0 && self->handle[g] != 0)
            self->n_idle_mapped--;
          self->held[g] += bytes;
        }
      else if ((self->held[g] -= bytes) == 0 && self->handle[g] != 0)
        {
          self->n_idle_mapped++;
          arena_idle_push (self, g);
        }
      addr = MIN (end, g_end);
    }
}

/* Granules of [addr, addr + size) with no physical memory (unmapped: nothing held, or only
 * sleeping bytes): the clear bits of mapped_bits over its granules, a word at a time (a
 * placement asks it of each window it considers: walking the handles granule by granule was
 * 800 instructions a placement on the resnet18 trace repeated, callgrind). */
guint
arena_span_unbacked (Arena *self, guint64 addr, guint64 size)
{
  guint g0 = arena_granule (self, addr), g1 = arena_granule (self, addr + size - 1) + 1;
  guint unbacked = 0;

  while (g0 < g1)
    {
      guint lo = g0 % 64, n = MIN (64 - lo, g1 - g0);
      guint64 mask = n == 64 ? G_MAXUINT64 : ((G_GUINT64_CONSTANT (1) << n) - 1) << lo;
      guint64 word = self->mapped_bits[g0 / 64] & mask;

      /* all mapped, nearly always: no count */
      if (word != mask)
        unbacked += n - (guint) __builtin_popcountll (word);
      g0 += n;
    }
  return unbacked;
}

/* Bytes of [addr, addr + size) that lie in mapped granules; *@idle the idle granules among them. */
guint64
arena_span_mapped_bytes (Arena *self, guint64 addr, guint64 size, guint *idle)
{
  guint64 end = addr + size, bytes = 0;

  *idle = 0;
  for (guint g = arena_granule (self, addr); addr < end; g++)
    {
      guint64 g_end = MIN (end, arena_granule_address (self, g) + self->granularity);

      if (self->handle[g] != 0)
        {
          bytes += g_end - addr;
          *idle += self->held[g] == 0;
        }
      addr = g_end;
    }
  return bytes;
}

/* The bytes [addr, addr + size), free and settled, are held from now on: every granule they lie
 * in gets physical memory (arena_granule_back(): lent, a spare's or new, mapped), then access,
 * one cuMemSetAccess per run of adjacent granules (arena_granules_grant()). When that would create
 * memory while granules are idle (and no_unmap is not set), nothing is held and FALSE comes back
 * with no error and want_unmap set: the caller unmaps that many (arena_unmap_idle()) and tries
 * again. On failure nothing is held, and the granules created for it are gone again. */
gboolean
arena_span_hold (Arena *self, guint64 addr, guint64 size, GError **error)
{
  guint g0 = arena_granule (self, addr), g1 = arena_granule (self, addr + size - 1);
  guint n_new = 0;
  g_autofree guint *backed = NULL, *grant = NULL; /* memory of their own; every one mapped */
  g_autofree gboolean *moved = NULL;
  gboolean ok = TRUE, lend, create;
  guint n_grant = 0, idle_here = 0;

  /* a granule without memory that holds bytes is one a sleep released (arena-sleep.c): free
   * bytes of it handed out get memory too, and its wake finds it mapped */
  for (guint g = g0; g <= g1; g++)
    {
      n_new += self->handle[g] == 0;
      idle_here += self->held[g] == 0 && self->handle[g] != 0;
    }
  /* within the remap headroom, created rather than moved or lent (arena-headroom.c); a refault
   * is a granule without memory, so a span whose granules all have some has none to note */
  if (n_new > 0)
    arena_headroom_note (self, g0, g1);
  create = n_new > self->n_spare && arena_headroom_allows (self, n_new - self->n_spare);
  if (n_new > self->n_spare && self->n_idle_mapped > idle_here && !self->no_unmap && !create)
    {
      /* the idle granules of the span itself are kept: it is about to use them */
      self->want_unmap = MIN (n_new - self->n_spare, self->n_idle_mapped - idle_here);
      self->keep_lo = g0;
      self->keep_hi = g1;
      return FALSE;
    }
  /* what spares cannot back: granules of the allocating stream's own frees, lent
   * (arena-lend.c), before any memory is created; with place=stable only past the slack
   * (arena_stable_may_lend()) */
  lend = self->lend_stream != NULL && !create
         && arena_stable_may_lend (self, n_new > self->n_spare ? n_new - self->n_spare : 0);
  if (n_new > self->n_spare && lend)
    arena_lend_pick (self, n_new - self->n_spare);
  arena_span_count (self, addr, size, 1);
  if (n_new == 0)
    {
      arena_headroom_held (self);
      return TRUE;
    }
  backed = g_new (guint, n_new);
  grant = g_new (guint, n_new);
  moved = g_new (gboolean, n_new);
  n_new = 0;
  for (guint g = g0; g <= g1; g++)
    {
      guint64 ga = arena_granule_address (self, g);
      guint64 lo = MAX (addr, ga) - ga, hi = MIN (addr + size, ga + self->granularity) - ga;
      /* not where memory was lent away before, for a size closed before (no_lend: a repeating
       * step's churn, arena-park.c) */
      gboolean lendable = self->n_spare == 0 && lend
                          && (self->asleep == NULL || self->asleep[g] == 0)
                          && !(self->no_lend && self->lent_away[g]);
      gint part;

      if (self->handle[g] != 0)
        continue;
      /* an end granule the extent covers at most half of: the memory of a granule of the
       * stream's own whose bytes there are free, the rest of it in use, shared (arena-lend.c),
       * before a whole one is lent */
      if (lendable && hi - lo <= self->granularity / 2 && self->held[g] == hi - lo
          && (part = arena_lend_pick_part (self, g, lo, hi)) >= 0)
        {
          if (arena_granule_lend (self, g, (guint) part, lo, hi, error))
            {
              grant[n_grant++] = g;
              continue;
            }
        }
      else if (lendable && self->lend_donors->len > 0)
        {
          guint from = g_array_index (self->lend_donors, guint, self->lend_donors->len - 1);

          g_array_set_size (self->lend_donors, self->lend_donors->len - 1);
          if (arena_granule_lend (self, g, from, 0, 0, error))
            {
              grant[n_grant++] = g;
              continue;
            }
        }
      /* access granted below, to each run of them by one call */
      else if (arena_granule_back (self, g, &moved[n_new], FALSE, error))
        {
          grant[n_grant++] = g;
          backed[n_new++] = g;
          continue;
        }
      ok = FALSE;
      break;
    }
  if (ok && arena_granules_grant (self, grant, n_grant, error))
    {
      arena_headroom_done (self, g0, g1);
      arena_headroom_held (self);
      return TRUE;
    }
  /* the created ones go back, the moved ones (mapped without access) are spares again; the lent
   * ones are undone by the caller (arena_lend_abort()) */
  while (n_new-- > 0)
    arena_granule_roll_back (self, backed[n_new], moved[n_new], "a failure");
  arena_span_count (self, addr, size, -1);
  return FALSE;
}

/* The bytes [addr, addr + size) are free and settled again. */
void
arena_span_drop (Arena *self, guint64 addr, guint64 size)
{
  arena_span_count (self, addr, size, -1);
}

/* The bytes [addr, addr + size), free and settled in granules without physical memory, are
 * held from now on, their granules still without (arena_granules_move() brings it). */
void
arena_span_claim (Arena *self, guint64 addr, guint64 size)
{
  arena_span_count (self, addr, size, 1);
}

/* The reservations past the first @keep given back (cuMemAddressFree), newest first, while the
 * newest is one settled free range with nothing in it: what a failed allocation reserved for
 * itself (arena-alloc.c). Without it, each failing request larger than any free range (1 TiB,
 * 2 TiB, ... on a 4 GiB device) left a reservation behind: 10 TiB of address space after five
 * (/arena-break/oom/growing-va). Lock held. */
void
arena_reservations_drop_empty (Arena *self, guint keep)
{
  while (self->n_resv > MAX (keep, 1))
    {
      const Reservation *v = &self->resv[self->n_resv - 1];
      Range *r = arena_heap_range_at (self, v->base);
      CUresult res;

      if (r == NULL || r->addr != v->base || r->size != v->size || r->tag != NULL)
        return;
      if ((res = self->drv->cuMemAddressFree (v->base, v->size)) != CUDA_SUCCESS)
        {
          g_debug ("arena: giving back an empty reservation failed (%d); kept", res);
          return;
        }
      arena_range_unlink (self, r);
      arena_range_free (self, r);
      self->va_size -= v->size;
      self->n_granules = v->first;
      self->n_resv--;
    }
}

/* More address space: a new reservation (cuMemAddressReserve) of the first one's size, or of
 * @size rounded up to the granularity when that is more (if the driver refuses, of that much
 * only), its granules appended to the table, all of it one settled free range. Lock held. On
 * failure nothing changed but va_refused, the bytes refused, which the out-of-memory report
 * makes the arena's own verdict (arena_explain_oom()). */
gboolean
arena_reserve_more (Arena *self, guint64 size, GError **error)
{
  guint64 need = (size + self->granularity - 1) & ~(guint64) (self->granularity - 1);
  guint64 bytes = MAX (need, self->resv[0].size);
  CUdeviceptr base = 0;
  CUresult r;

  if (self->n_granules + (bytes >> self->granule_shift) > G_MAXUINT32 / 2)
    bytes = need;
  if (self->n_granules + (bytes >> self->granule_shift) > G_MAXUINT32 / 2)
    {
      self->va_refused = need;
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "arena: no more address space: %" G_GUINT64_FORMAT " bytes reserved",
                   self->va_size);
      return FALSE;
    }
  r = self->drv->cuMemAddressReserve (&base, bytes, self->granularity, 0, 0);
  if (r != CUDA_SUCCESS && bytes > need)
    r = self->drv->cuMemAddressReserve (&base, bytes = need, self->granularity, 0, 0);
  if (r != CUDA_SUCCESS)
    {
      self->va_refused = bytes;
      memres_cuda_set_error (error, r, "cuMemAddressReserve");
      g_prefix_error (
          error, "arena: reserving %" G_GUINT64_FORMAT " more bytes of address space: ", bytes);
      return FALSE;
    }
  self->va_refused = 0;
  self->resv = g_renew (Reservation, self->resv, self->n_resv + 1);
  self->resv[self->n_resv++] = (Reservation){ base, bytes, self->n_granules };
  arena_granules_grow (self, (guint) (bytes >> self->granule_shift));
  self->va_size += bytes;
  arena_heap_insert (self, base, bytes, NULL, NULL);
  return TRUE;
}

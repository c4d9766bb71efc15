/* memres - CUDA memory resources
 * arena-granules.c: the physical memory of the `arena` kind, one granule (the device's
 * allocation granularity) at a time: the granule table, the one place that maps a granule
 * (granule_map()) and the one place that unmaps one (granule_unmap()), backing the granules a
 * new extent needs (spare memory unmapped from idle granules first, else a new cuMemCreate),
 * giving idle granules back to the driver, and the segment events of all of it.
 *
 * Segments (memres-segments.h). Each mapped granule is a segment of the arena (base its
 * address, length the granularity). Events are raised with parts.lock dropped, since
 * subscribers may call into memres: granule_map() queues "mapped" (Arena.pending, in the order
 * of the driver calls) and the slot that mapped raises the queue after it unlocks
 * (arena_events_flush(), under ev_lock, so that events reach subscribers in queue order whichever
 * thread raises them, and a slot returns only once every event queued before it unlocked was
 * delivered; each run of events of one kind in the queue is raised as one batch,
 * memres_resource_raise_segment_events(), so that a sleep's thousands of granules change the
 * lookup index once). "About to be unmapped" must be delivered before the unmap,
 * so granule_unmap() is reached only through arena_unmap_idle() (and arena_granules_move(), whose
 * granules are held by the buffer a resize moves: nothing else touches them while the lock is
 * dropped for their events): under the lock, idle granules
 * are pinned (a held byte of their own, so that they are neither picked again nor idle) and
 * their events queued; the lock is dropped and the queue raised; under the lock again each one
 * whose bytes are still all free is unmapped, its memory kept as a spare (a move) or released.
 * A granule that an allocation on another thread took bytes of meanwhile stays mapped and is
 * told mapped again (the event API's rule for a failed unmap); until then memres_lookup() does
 * not find those bytes. Backing a granule (arena_span_hold()) never unmaps: when it would
 * create memory while granules are idle, it asks its caller (arena-alloc.c) to unmap them first
 * (want_unmap) and to try again.
 *
 * Rollback. Backing the granules of a span: per granule cuMemCreate (or a spare) and cuMemMap,
 * then one cuMemSetAccess per run of adjacent granules (granules_grant()); a failing create or
 * map undoes the ones before it for that granule (release). When a later step of the same span
 * fails, the granules created for it are unmapped and released and the spares mapped there are
 * unmapped and spares again (their "mapped" events, still queued, withdrawn). Spares left over
 * are released at the end of the allocation. Giving a granule
 * back: cuMemRelease while it is still mapped (the mapping keeps the memory), then cuMemUnmap,
 * which frees it; a failing unmap takes the handle back (cuMemRetainAllocationHandle). Every
 * failure leaves the table as it was and the driver matching it. All under parts.lock except
 * where said. */
#include "arena-private.h"

#include <stdlib.h>
#include <string.h>

gboolean
arena_granules_init (Arena *self, GError **error)
{
  self->held = g_new0 (guint64, self->n_granules);
  self->gtag = g_new0 (guint8, self->n_granules);
  self->handle = g_new0 (CUmemGenericAllocationHandle, self->n_granules);
  self->in_idle = g_new0 (guint8, self->n_granules);
  self->idle = g_new (guint32, self->n_granules);
  self->spare = g_new (CUmemGenericAllocationHandle, self->n_granules);
  self->pending = g_array_new (FALSE, FALSE, sizeof (PendingEvent));
  self->retired_at = g_new0 (guint8, self->n_granules);
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
  g_clear_pointer (&self->in_idle, g_free);
  g_clear_pointer (&self->idle, g_free);
  g_clear_pointer (&self->spare, g_free);
  g_clear_pointer (&self->pending, g_array_unref);
  g_clear_pointer (&self->retired_at, g_free);
  g_clear_pointer (&self->shared_at, g_free);
  g_clear_pointer (&self->asleep, g_free);
  g_clear_pointer (&self->asleep_large, g_hash_table_unref);
  g_mutex_clear (&self->ev_lock);
}

/* @n granules more (a new reservation's), after the others, without memory. */
void
arena_granules_grow (Arena *self, guint n)
{
  guint was = self->n_granules;

  self->n_granules += n;
  self->held = g_renew (guint64, self->held, self->n_granules);
  self->gtag = g_renew (guint8, self->gtag, self->n_granules);
  self->handle = g_renew (CUmemGenericAllocationHandle, self->handle, self->n_granules);
  self->in_idle = g_renew (guint8, self->in_idle, self->n_granules);
  self->idle = g_renew (guint32, self->idle, self->n_granules);
  self->spare = g_renew (CUmemGenericAllocationHandle, self->spare, self->n_granules);
  self->retired_at = g_renew (guint8, self->retired_at, self->n_granules);
  memset (self->retired_at + was, 0, n * sizeof *self->retired_at);
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

#define granule_address arena_granule_address

/* ---- segment events -------------------------------------------------------------------------- */

static void
queue_event (Arena *self, MemresSegmentEvent event, guint g)
{
  PendingEvent e = { granule_address (self, g), event, self->gtag[g] };

  g_array_append_val (self->pending, e);
  __atomic_add_fetch (&self->in_flight, 1, __ATOMIC_SEQ_CST);
}

/* The "mapped" event of granule @g, queued by this very lock hold, withdrawn. */
static void
withdraw_mapped (Arena *self, guint g)
{
  guint64 base = granule_address (self, g);

  for (guint i = self->pending->len; i-- > 0;)
    {
      PendingEvent *e = &g_array_index (self->pending, PendingEvent, i);

      if (e->base == base && e->event == MEMRES_SEGMENT_MAPPED)
        {
          g_array_remove_index (self->pending, i);
          __atomic_sub_fetch (&self->in_flight, 1, __ATOMIC_SEQ_CST);
          return;
        }
    }
}

/* Raises the queued events, parts.lock not held, each run of one kind as one batch: on return,
 * every event queued before the call was delivered. A subscriber's callback that allocates from
 * this arena on the same thread raises the events its allocation queued from inside the outer
 * loop, in queue order still (the core delivers the rest of the outer batch first). */
void
arena_events_flush (Arena *self)
{
  g_autoptr (GArray) segs = NULL;
  gboolean nested;

  if (__atomic_load_n (&self->in_flight, __ATOMIC_SEQ_CST) == 0)
    return;
  nested = __atomic_load_n (&self->ev_owner, __ATOMIC_RELAXED) == g_thread_self ();
  if (!nested)
    {
      g_mutex_lock (&self->ev_lock);
      self->ev_owner = g_thread_self ();
    }
  segs = g_array_new (FALSE, TRUE, sizeof (MemresSegment));
  for (;;)
    {
      MemresSegmentEvent event = MEMRES_SEGMENT_MAPPED;
      g_autoptr (GError) error = NULL;
      guint n = 0;

      /* the run of events of one kind at the head of the queue */
      g_mutex_lock (&self->parts.lock);
      g_array_set_size (segs, 0);
      if (self->pending->len > 0)
        event = g_array_index (self->pending, PendingEvent, 0).event;
      for (; n < self->pending->len; n++)
        {
          const PendingEvent *e = &g_array_index (self->pending, PendingEvent, n);
          MemresSegment seg = { 0 };

          if (e->event != event)
            break;
          seg.base = e->base;
          seg.length = self->granularity;
          seg.device = self->device;
          seg.handle_types = self->prop.requestedHandleTypes;
          seg.tag = cache_tag_name (e->tag);
          g_array_append_val (segs, seg);
        }
      if (n > 0)
        g_array_remove_range (self->pending, 0, n);
      g_mutex_unlock (&self->parts.lock);
      if (n == 0)
        break;
      if (!memres_resource_raise_segment_events (self->mr, event,
                                                 (const MemresSegment *) segs->data, n, &error))
        g_warning ("arena: %s", error->message);
      __atomic_sub_fetch (&self->in_flight, n, __ATOMIC_SEQ_CST);
    }
  if (!nested)
    {
      self->ev_owner = NULL;
      g_mutex_unlock (&self->ev_lock);
    }
}

/* ---- mapping and unmapping ------------------------------------------------------------------- */

/* THE place where the arena maps memory: @h at granule @g, with the device's access unless
 * @grant is FALSE (the wake grants a run of granules at once, arena_granules_wake()); its
 * "mapped" event queued. On failure nothing is mapped. */
static gboolean
granule_map_granted (Arena *self, guint g, CUmemGenericAllocationHandle h, gboolean grant,
                     GError **error)
{
  CUdeviceptr at = granule_address (self, g);
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
  queue_event (self, MEMRES_SEGMENT_MAPPED, g);
  return TRUE;
}

/* Maps @h at granule @g and grants access: cuMemMap, cuMemSetAccess. */
static gboolean
granule_map (Arena *self, guint g, CUmemGenericAllocationHandle h, GError **error)
{
  return granule_map_granted (self, g, h, TRUE, error);
}

/* Whether granule @g + @k lies right after the @k granules from @g, in the same reservation: one
 * driver call may span them all (cuMemUnmap, cuMemSetAccess). */
static gboolean
granules_adjacent (const Arena *self, guint g, guint k)
{
  CUdeviceptr at = granule_address (self, g), next = at + (guint64) k * self->granularity;

  return granule_address (self, g + k) == next
         && arena_reservation_of (self, at) == arena_reservation_of (self, next);
}

/* The device's access granted to the @n granules @gs (ascending, mapped without it), one
 * cuMemSetAccess per run of adjacent ones: a span backed at once costs one call, not one per
 * granule. FALSE with @error naming the call when one fails (the runs before it granted). */
static gboolean
granules_grant (Arena *self, const guint *gs, guint n, GError **error)
{
  for (guint i = 0, run; i < n; i += run)
    {
      CUresult r;

      for (run = 1;
           i + run < n && gs[i + run] == gs[i] + run && granules_adjacent (self, gs[i], run); run++)
        ;
      r = self->drv->cuMemSetAccess (granule_address (self, gs[i]), run * self->granularity,
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
static CUresult
granules_unmap (Arena *self, guint g, guint n)
{
  return self->drv->cuMemUnmap (granule_address (self, g), n * self->granularity);
}

static CUresult
granule_unmap (Arena *self, guint g)
{
  return granules_unmap (self, g, 1);
}

/* Undoes the mapping of granule @g made by a call that then failed (its "mapped" event
 * withdrawn, cuMemUnmap): its memory is released (cuMemRelease), or kept as a spare, released at
 * the end of the call, where @keep (memory moved from a free range) or where the release fails.
 * A failed unmap leaves the granule mapped, its event queued again, with a warning naming
 * @what. Lock held. */
static void
granule_roll_back (Arena *self, guint g, gboolean keep, const char *what)
{
  CUresult r;

  withdraw_mapped (self, g);
  if ((r = granule_unmap (self, g)) != CUDA_SUCCESS)
    {
      g_warning ("arena: cuMemUnmap failed (%d) while rolling back %s; the granule stays mapped", r,
                 what);
      queue_event (self, MEMRES_SEGMENT_MAPPED, g);
      return;
    }
  if (keep || (r = self->drv->cuMemRelease (self->handle[g])) != CUDA_SUCCESS)
    {
      self->spare[self->n_spare++] = self->handle[g];
      self->handle[g] = 0;
      return;
    }
  self->handle[g] = 0;
  self->n_mapped--;
  self->created--;
}

static void
idle_push (Arena *self, guint g)
{
  if (!self->in_idle[g])
    {
      self->in_idle[g] = 1;
      self->idle[self->n_idle_stack++] = g;
    }
}

/* An idle granule (mapped, no held bytes) off the stack, or -1. */
static gint
idle_pop (Arena *self)
{
  while (self->n_idle_stack > 0)
    {
      guint g = self->idle[--self->n_idle_stack];

      self->in_idle[g] = 0;
      if (self->held[g] == 0 && self->handle[g] != 0)
        return (gint) g;
    }
  return -1;
}

/* A pinned granule stays mapped: told mapped again, idle again when nothing holds it. */
static void
unpin_mapped (Arena *self, guint g)
{
  queue_event (self, MEMRES_SEGMENT_MAPPED, g);
  if (self->held[g] == 0)
    {
      self->n_idle_mapped++;
      idle_push (self, g);
    }
}

/* Gives back granule @g (pinned, now unpinned, nothing held): cuMemRelease while mapped, then
 * cuMemUnmap; a failing unmap takes the handle back. */
static gboolean
granule_release (Arena *self, guint g, GError **error)
{
  CUmemGenericAllocationHandle h = self->handle[g];
  CUresult r;

  if ((r = self->drv->cuMemRelease (h)) != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemRelease");
  if ((r = granule_unmap (self, g)) != CUDA_SUCCESS)
    {
      CUresult r2 = self->drv->cuMemRetainAllocationHandle (
          &h, (void *) (guintptr) granule_address (self, g));

      if (r2 != CUDA_SUCCESS)
        g_warning ("arena: cuMemRetainAllocationHandle failed (%d) while rolling back a "
                   "failure",
                   r2);
      self->handle[g] = h;
      return memres_cuda_set_error (error, r, "cuMemUnmap");
    }
  self->handle[g] = 0;
  self->n_mapped--;
  self->released++;
  return TRUE;
}

static gint
granule_cmp (gconstpointer a, gconstpointer b)
{
  guint32 x = *(const guint32 *) a, y = *(const guint32 *) b;

  return x < y ? -1 : x > y;
}

/* Unmaps up to @n idle granules: their physical memory kept as spares (a run of adjacent ones
 * unmapped by one cuMemUnmap), or with @release given back to the driver. parts.lock held on
 * entry and on return, dropped in between to deliver the "about to be unmapped" events (see the
 * top of the file). On failure the granules whose call failed, and those after them, stay mapped
 * and idle. */
gboolean
arena_unmap_idle (Arena *self, guint n, gboolean release, GError **error)
{
  g_autofree guint32 *picked = g_new (guint32, MAX (n, 1));
  g_autoptr (GArray) kept = g_array_new (FALSE, FALSE, sizeof (guint));
  gboolean ok = TRUE;
  guint k = 0;
  gint g;

  while (k < n && (g = idle_pop (self)) >= 0)
    {
      if (((guint) g >= self->keep_lo && (guint) g <= self->keep_hi)
          || (self->idle_tag != CACHE_TAG_ANY && self->gtag[g] != self->idle_tag))
        {
          g_array_append_val (kept, g);
          continue;
        }
      self->held[g] = 1; /* the pin */
      self->n_idle_mapped--;
      queue_event (self, MEMRES_SEGMENT_UNMAPPING, (guint) g);
      picked[k++] = (guint32) g;
    }
  for (guint i = kept->len; i-- > 0;)
    idle_push (self, g_array_index (kept, guint, i));
  self->keep_lo = G_MAXUINT;
  self->keep_hi = 0;
  self->idle_tag = CACHE_TAG_ANY;
  if (k == 0)
    return TRUE;
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  g_mutex_lock (&self->parts.lock);
  qsort (picked, k, sizeof (guint32), granule_cmp);
  for (guint i = 0, run; i < k; i += run)
    {
      CUresult r;

      g = (gint) picked[i];
      run = 1;
      if (--self->held[g] != 0 || !ok)
        {
          unpin_mapped (self, (guint) g);
          continue;
        }
      if (release)
        {
          if (!(ok = granule_release (self, (guint) g, error)))
            unpin_mapped (self, (guint) g);
          continue;
        }
      /* the run of adjacent picked granules that only their pins hold: one cuMemUnmap */
      while (i + run < k && picked[i + run] == (guint) g + run && self->held[g + run] == 1
             && granules_adjacent (self, (guint) g, run))
        self->held[g + run++]--;
      if ((r = granules_unmap (self, (guint) g, run)) != CUDA_SUCCESS)
        {
          ok = memres_cuda_set_error (error, r, "cuMemUnmap");
          for (guint j = 0; j < run; j++)
            unpin_mapped (self, (guint) g + j);
          continue;
        }
      for (guint j = (guint) g; j < (guint) g + run; j++)
        {
          self->spare[self->n_spare++] = self->handle[j];
          self->handle[j] = 0;
        }
    }
  return ok;
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
static gboolean
granule_back_granted (Arena *self, guint g, gboolean *moved, gboolean grant, GError **error)
{
  CUmemGenericAllocationHandle h;
  CUresult r;

  *moved = self->n_spare > 0;
  if (*moved)
    {
      h = self->spare[--self->n_spare];
      if (!granule_map_granted (self, g, h, grant, error))
        {
          self->spare[self->n_spare++] = h;
          return FALSE;
        }
      self->handle[g] = h;
      self->remapped++;
      return TRUE;
    }
  /* the slot says which request failed ("cannot allocate N bytes: "), once */
  if ((r = self->drv->cuMemCreate (&h, self->granularity, &self->prop, 0)) != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemCreate");
  if (!granule_map_granted (self, g, h, grant, error))
    {
      if ((r = self->drv->cuMemRelease (h)) != CUDA_SUCCESS)
        g_warning ("arena: cuMemRelease failed (%d) while rolling back a failure", r);
      return FALSE;
    }
  self->handle[g] = h;
  self->n_mapped++;
  self->mapped_high = MAX (self->mapped_high, self->n_mapped);
  self->created++;
  return TRUE;
}

/* Adds (@sign 1) or takes away (-1) the bytes of [addr, addr + size) granule by granule; a
 * granule whose count goes to 0 is idle. */
static void
span_count (Arena *self, guint64 addr, guint64 size, gint sign)
{
  guint64 end = addr + size;

  for (guint g = arena_granule (self, addr); addr < end; g++)
    {
      guint64 g_end = granule_address (self, g) + self->granularity;
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
          idle_push (self, g);
        }
      addr = MIN (end, g_end);
    }
}

/* Granules of [addr, addr + size) with no physical memory (unmapped: nothing held, or only
 * sleeping bytes). */
guint
arena_span_unbacked (Arena *self, guint64 addr, guint64 size)
{
  guint n = 0;

  for (guint g = arena_granule (self, addr); g <= arena_granule (self, addr + size - 1); g++)
    n += self->handle[g] == 0;
  return n;
}

/* Bytes of [addr, addr + size) that lie in mapped granules; *@idle the idle granules among them. */
guint64
arena_span_mapped_bytes (Arena *self, guint64 addr, guint64 size, guint *idle)
{
  guint64 end = addr + size, bytes = 0;

  *idle = 0;
  for (guint g = arena_granule (self, addr); addr < end; g++)
    {
      guint64 g_end = MIN (end, granule_address (self, g) + self->granularity);

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
 * in gets physical memory (granule_back_granted(): lent, a spare's or new, mapped), then access,
 * one cuMemSetAccess per run of adjacent granules (granules_grant()). When that would create memory
 * while granules are idle (and no_unmap is not set), nothing is held and FALSE comes back with no
 * error and want_unmap set: the caller unmaps that many (arena_unmap_idle()) and tries again. On
 * failure nothing is held, and the granules created for it are gone again. */
gboolean
arena_span_hold (Arena *self, guint64 addr, guint64 size, GError **error)
{
  guint g0 = arena_granule (self, addr), g1 = arena_granule (self, addr + size - 1);
  guint n_new = 0;
  g_autofree guint *backed = NULL, *grant = NULL; /* memory of their own; every one mapped */
  g_autofree gboolean *moved = NULL;
  gboolean ok = TRUE;
  guint n_grant = 0;

  guint idle_here = 0;

  /* a granule without memory that holds bytes is one a sleep released (arena-sleep.c): free
   * bytes of it handed out get memory too, and its wake finds it mapped */
  for (guint g = g0; g <= g1; g++)
    {
      n_new += self->handle[g] == 0;
      idle_here += self->held[g] == 0 && self->handle[g] != 0;
    }
  if (n_new > self->n_spare && self->n_idle_mapped > idle_here && !self->no_unmap)
    {
      /* the idle granules of the span itself are kept: it is about to use them */
      self->want_unmap = MIN (n_new - self->n_spare, self->n_idle_mapped - idle_here);
      self->keep_lo = g0;
      self->keep_hi = g1;
      return FALSE;
    }
  /* what spares cannot back: granules of the allocating stream's own frees, lent
   * (arena-lend.c), before any memory is created */
  if (n_new > self->n_spare && self->lend_stream != NULL)
    arena_lend_pick (self, n_new - self->n_spare);
  span_count (self, addr, size, 1);
  if (n_new == 0)
    return TRUE;
  backed = g_new (guint, n_new);
  grant = g_new (guint, n_new);
  moved = g_new (gboolean, n_new);
  n_new = 0;
  for (guint g = g0; g <= g1; g++)
    {
      guint64 ga = granule_address (self, g);
      guint64 lo = MAX (addr, ga) - ga, hi = MIN (addr + size, ga + self->granularity) - ga;
      gboolean lendable = self->n_spare == 0 && self->lend_stream != NULL
                          && (self->asleep == NULL || self->asleep[g] == 0);
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
      else if (granule_back_granted (self, g, &moved[n_new], FALSE, error))
        {
          grant[n_grant++] = g;
          backed[n_new++] = g;
          continue;
        }
      ok = FALSE;
      break;
    }
  if (ok && granules_grant (self, grant, n_grant, error))
    return TRUE;
  /* the created ones go back, the moved ones (mapped without access) are spares again; the lent
   * ones are undone by the caller (arena_lend_abort()) */
  while (n_new-- > 0)
    granule_roll_back (self, backed[n_new], moved[n_new], "a failure");
  span_count (self, addr, size, -1);
  return FALSE;
}

/* The bytes [addr, addr + size) are free and settled again. */
void
arena_span_drop (Arena *self, guint64 addr, guint64 size)
{
  span_count (self, addr, size, -1);
}

/* The bytes [addr, addr + size), free and settled in granules without physical memory, are
 * held from now on, their granules still without (arena_granules_move() brings it). */
void
arena_span_claim (Arena *self, guint64 addr, guint64 size)
{
  span_count (self, addr, size, 1);
}

/* Granule @from + i's physical memory moved back from @to + i (a rollback), for i < @n. */
static void
move_back (Arena *self, guint from, guint to, guint n)
{
  for (guint i = n; i-- > 0;)
    {
      CUmemGenericAllocationHandle h = self->handle[to + i];
      g_autoptr (GError) error = NULL;
      CUresult r;

      withdraw_mapped (self, to + i);
      if ((r = granule_unmap (self, to + i)) != CUDA_SUCCESS)
        {
          g_warning ("arena: cuMemUnmap failed (%d) while rolling back a failed move; the granule "
                     "stays where it was moved",
                     r);
          queue_event (self, MEMRES_SEGMENT_MAPPED, to + i);
          continue;
        }
      self->handle[to + i] = 0;
      if (!granule_map (self, from + i, h, &error))
        {
          g_warning ("arena: mapping a granule back failed while rolling back a failed move: %s",
                     error->message);
          self->spare[self->n_spare++] = h; /* released at the end of the resize */
          continue;
        }
      self->handle[from + i] = h;
    }
}

/* Moves the physical memory of the @n granules from @from on (all held, in a buffer being moved)
 * to the @n granules from @to on (held, without memory): their "about to be unmapped" events
 * delivered first (parts.lock dropped meanwhile: nothing else touches held granules of a buffer
 * its owner is resizing), then each one unmapped and mapped there (cuMemUnmap, cuMemMap,
 * cuMemSetAccess; no memory created, none copied). On failure every granule is back where it
 * was (told mapped again), the error set. */
gboolean
arena_granules_move (Arena *self, guint from, guint to, guint n, GError **error)
{
  for (guint i = 0; i < n; i++)
    queue_event (self, MEMRES_SEGMENT_UNMAPPING, from + i);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  g_mutex_lock (&self->parts.lock);
  for (guint i = 0; i < n; i++)
    {
      CUmemGenericAllocationHandle h = self->handle[from + i];
      CUresult r;

      if ((r = granule_unmap (self, from + i)) != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemUnmap");
          for (guint j = i; j < n; j++)
            queue_event (self, MEMRES_SEGMENT_MAPPED, from + j);
          move_back (self, from, to, i);
          return FALSE;
        }
      if (!granule_map (self, to + i, h, error))
        {
          g_autoptr (GError) again = NULL;

          if (!granule_map (self, from + i, h, &again))
            {
              g_warning ("arena: mapping a granule back failed while rolling back a failed move: "
                         "%s",
                         again->message);
              self->spare[self->n_spare++] = h;
              self->handle[from + i] = 0;
            }
          for (guint j = i + 1; j < n; j++)
            queue_event (self, MEMRES_SEGMENT_MAPPED, from + j);
          move_back (self, from, to, i);
          return FALSE;
        }
      self->handle[to + i] = h;
      self->handle[from + i] = 0;
    }
  self->moved += n;
  return TRUE;
}

/* ---- lent memory (arena-lend.c) ------------------------------------------------------------- */

/* Granule @g (without memory, held by the placement in progress) mapped with the memory of
 * granule @from (a donor: mapped, its bytes all freed on lend_stream), which stays mapped
 * where it is too (cuMemMap: nothing created; arena_span_hold() grants access with the span's
 * other granules). The pair is recorded for arena_lend_commit() or arena_lend_abort(). On
 * failure nothing changed. */
gboolean
arena_granule_lend (Arena *self, guint g, guint from, guint64 lo, guint64 hi, GError **error)
{
  LentPair pair = { g, from, lo, hi };

  if (!granule_map_granted (self, g, self->handle[from], FALSE, error))
    return FALSE;
  self->handle[g] = self->handle[from];
  g_array_append_val (self->lent, pair);
  return TRUE;
}

/* Undoes arena_granule_lend() of granule @g: its "mapped" event withdrawn and its second
 * mapping unmapped (TRUE). When the unmap fails it stays mapped, told mapped again (FALSE: the
 * caller retires it, arena_lend_abort()). */
gboolean
arena_granule_unlend (Arena *self, guint g)
{
  CUresult r;

  withdraw_mapped (self, g);
  if ((r = granule_unmap (self, g)) == CUDA_SUCCESS)
    {
      if (self->held[g] == 0)
        self->n_idle_mapped--; /* counted idle when the failed placement dropped its bytes */
      self->handle[g] = 0;
      return TRUE;
    }
  g_warning ("arena: cuMemUnmap failed (%d) while undoing a lent granule; it is unmapped later", r);
  queue_event (self, MEMRES_SEGMENT_MAPPED, g);
  return FALSE;
}

static gint
retired_cmp (gconstpointer a, gconstpointer b)
{
  return granule_cmp (&((const Retired *) a)->g, &((const Retired *) b)->g);
}

/* Unmaps the old addresses of lent memory (Arena.retired) whose events are done: each event is
 * asked (cuEventQuery, once for the granules of one lending: nothing blocks, nothing is queued),
 * so that an old address goes at the first call after its stream is past the event, whatever
 * other streams still hold. "About to be unmapped" is delivered for each (parts.lock dropped
 * meanwhile; nothing else touches those bytes), then cuMemUnmap, one per run of adjacent ones
 * (the memory stays mapped where it was lent), and their bytes become a settled free range without
 * memory (counter `granules_reaped`). A query that fails (neither done nor not ready) reaps nothing
 * at this call; one whose unmap fails is told mapped again and tried at a later call. parts.lock
 * held on entry and on return. */
void
arena_lend_reap (Arena *self)
{
  g_autoptr (GArray) done = NULL;
  g_autofree guint8 *passed = NULL;
  const MemresCudaDriver *drv;
  CacheEvent *asked = NULL;
  gboolean pushed = FALSE;
  CUresult r = CUDA_SUCCESS;
  guint kept = 0;

  if (self->retired->len == 0 || (drv = cache_context_push (&self->parts, &pushed, NULL)) == NULL)
    return;
  passed = g_new (guint8, self->retired->len);
  for (guint i = 0; i < self->retired->len; i++)
    {
      const Retired *e = &g_array_index (self->retired, Retired, i);

      /* a shared granule's donor retired after its bytes settled has no event: done */
      if (e->event != NULL && e->event != asked)
        {
          asked = e->event;
          r = drv->cuEventQuery != NULL ? drv->cuEventQuery (asked->event)
                                        : CUDA_ERROR_NOT_SUPPORTED;
          if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
            break;
        }
      passed[i] = e->event == NULL || r == CUDA_SUCCESS;
    }
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
    return; /* no answer: nothing reaped now */
  done = g_array_new (FALSE, FALSE, sizeof (Retired));
  for (guint i = 0; i < self->retired->len; i++)
    {
      Retired e = g_array_index (self->retired, Retired, i);

      if (passed[i])
        g_array_append_val (done, e);
      else
        g_array_index (self->retired, Retired, kept++) = e;
    }
  g_array_set_size (self->retired, kept);
  if (done->len == 0)
    return;
  for (guint i = 0; i < done->len; i++)
    queue_event (self, MEMRES_SEGMENT_UNMAPPING, g_array_index (done, Retired, i).g);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  g_mutex_lock (&self->parts.lock);
  g_array_sort (done, retired_cmp);
  for (guint i = 0, run; i < done->len; i += run)
    {
      guint g = g_array_index (done, Retired, i).g;

      /* a run of adjacent old addresses: one cuMemUnmap */
      for (run = 1; i + run < done->len && g_array_index (done, Retired, i + run).g == g + run
                    && granules_adjacent (self, g, run);
           run++)
        ;
      if ((r = granules_unmap (self, g, run)) != CUDA_SUCCESS)
        g_debug ("arena: cuMemUnmap of a lent granule's old address failed (%d); tried later",
                 (int) r);
      for (guint j = i; j < i + run; j++)
        {
          Retired *e = &g_array_index (done, Retired, j);
          guint64 at = granule_address (self, e->g);

          if (r != CUDA_SUCCESS)
            {
              queue_event (self, MEMRES_SEGMENT_MAPPED, e->g);
              g_array_append_val (self->retired, *e);
              continue;
            }
          self->handle[e->g] = 0;
          self->retired_at[e->g] = 0;
          self->reaped_granules++;
          span_count (self, at, self->granularity, -1);
          arena_heap_insert (self, at, self->granularity, NULL, NULL);
          cache_event_unref (&self->parts, e->event);
        }
    }
}

/* Gives spares, then idle granules back to the driver while more than @keep_bytes are mapped.
 * parts.lock held; dropped in between (arena_unmap_idle()). */
gboolean
arena_release_idle (Arena *self, guint64 keep_bytes, GError **error)
{
  guint64 mapped;

  arena_spares_release (self);
  mapped = (guint64) self->n_mapped * self->granularity;
  if (mapped <= keep_bytes || self->n_idle_mapped == 0)
    return TRUE;
  return arena_unmap_idle (
      self,
      (guint) MIN ((mapped - keep_bytes + self->granularity - 1) >> self->granule_shift,
                   self->n_idle_mapped),
      TRUE, error);
}

/* Gives spares, then the idle granules that last served tag @tag (cache_tag_index(): gtag, which
 * a granule keeps once idle) back to the driver: the free memory a tag's sleep gives back, the
 * other tags' idle granules kept mapped. parts.lock held; dropped in between
 * (arena_unmap_idle()). */
gboolean
arena_release_idle_tag (Arena *self, guint tag, GError **error)
{
  arena_spares_release (self);
  if (self->n_idle_mapped == 0)
    return TRUE;
  self->idle_tag = tag;
  return arena_unmap_idle (self, self->n_idle_mapped, TRUE, error);
}

/* Finalize: every granule given back (cuMemRelease, cuMemUnmap) after its "about to be
 * unmapped" event (parts.lock dropped to deliver them: nothing else uses the arena now); a
 * failure is warned about and the others are still given back. TRUE when nothing stays
 * mapped. */
gboolean
arena_granules_release_all (Arena *self)
{
  gboolean all = TRUE;

  for (guint g = 0; g < self->n_granules; g++)
    if (self->handle[g] != 0)
      queue_event (self, MEMRES_SEGMENT_UNMAPPING, g);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  g_mutex_lock (&self->parts.lock);
  for (guint g = 0; g < self->n_granules; g++)
    {
      CUresult r;

      if (self->handle[g] == 0)
        continue;
      /* an old address of lent memory, or the second address of a shared granule: the handle
       * is released where the memory was lent, or at the donor */
      if (!self->retired_at[g] && self->shared_at[g] != 1
          && (r = self->drv->cuMemRelease (self->handle[g])) != CUDA_SUCCESS
          && r != CUDA_ERROR_DEINITIALIZED)
        g_warning ("arena: cuMemRelease failed (%d) at finalize", r);
      if ((r = granule_unmap (self, g)) != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
        {
          g_warning ("arena: cuMemUnmap failed (%d) at finalize", r);
          all = FALSE;
        }
      self->handle[g] = 0;
    }
  for (; self->n_spare > 0; self->n_spare--)
    {
      CUresult r = self->drv->cuMemRelease (self->spare[self->n_spare - 1]);

      if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
        g_warning ("arena: cuMemRelease failed (%d) at finalize", r);
    }
  self->n_mapped = self->n_idle_mapped = 0;
  return all;
}

/* ---- sleep and wake (arena-sleep.c) ---------------------------------------------------------- */

/* Whether granule @g still sleeps whole: mapped, every held byte asleep. Lock held. */
static gboolean
sleep_eligible (const Arena *self, guint g)
{
  return self->handle[g] != 0 && self->held[g] == self->asleep[g];
}

/* The @n granules @gs (mapped, every held byte asleep) lose their physical memory: "about to be
 * unmapped" delivered first (parts.lock dropped meanwhile), then each one whose held bytes are
 * still all asleep is unmapped, a run of adjacent ones by one cuMemUnmap (one that an allocation
 * took free bytes of meanwhile stays mapped, told mapped again); only once all are unmapped are the
 * handles released, which cannot be undone: a handle the driver refuses to release becomes a spare
 * (released at the end of a later allocation), not a failure. A failing unmap maps the others back
 * (told mapped again) and sets @error naming cuMemUnmap. parts.lock held on entry and on return. */
gboolean
arena_granules_sleep (Arena *self, const guint *gs, guint n, GError **error)
{
  g_autofree CUmemGenericAllocationHandle *h = g_new0 (CUmemGenericAllocationHandle, n + 1);

  for (guint i = 0; i < n; i++)
    queue_event (self, MEMRES_SEGMENT_UNMAPPING, gs[i]);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  g_mutex_lock (&self->parts.lock);
  for (guint k = 0, run; k < n; k += run)
    {
      guint g = gs[k];
      CUresult r;

      run = 1;
      if (!sleep_eligible (self, g))
        {
          queue_event (self, MEMRES_SEGMENT_MAPPED, g);
          continue;
        }
      /* the run of adjacent granules from @g that sleep too: one cuMemUnmap for them all */
      while (k + run < n && gs[k + run] == g + run && sleep_eligible (self, g + run)
             && granules_adjacent (self, g, run))
        run++;
      if ((r = granules_unmap (self, g, run)) != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemUnmap");
          for (guint j = k; j < n; j++)
            queue_event (self, MEMRES_SEGMENT_MAPPED, gs[j]);
          for (guint j = 0; j < k; j++)
            {
              g_autoptr (GError) again = NULL;

              if (h[j] == 0)
                continue;
              if (!granule_map (self, gs[j], h[j], &again))
                {
                  g_warning ("arena: mapping a granule back failed while rolling back a failed "
                             "sleep: %s",
                             again->message);
                  self->spare[self->n_spare++] = h[j];
                  continue;
                }
              self->handle[gs[j]] = h[j];
            }
          return FALSE;
        }
      for (guint j = k; j < k + run; j++)
        {
          h[j] = self->handle[gs[j]];
          self->handle[gs[j]] = 0;
        }
    }
  for (guint k = 0; k < n; k++)
    {
      CUresult r;

      if (h[k] == 0)
        continue;
      if ((r = self->drv->cuMemRelease (h[k])) != CUDA_SUCCESS)
        {
          g_debug ("arena: cuMemRelease of a sleeping granule failed (%d): kept as a spare",
                   (int) r);
          self->spare[self->n_spare++] = h[k];
          continue;
        }
      self->n_mapped--;
      self->released++;
    }
  return TRUE;
}

/* The @n granules @gs (ascending; without memory, held by sleeping bytes) get physical memory
 * again (granule_back_granted(): a spare's, else cuMemCreate; cuMemMap) and access, one run of
 * adjacent granules at a time, each granted by one cuMemSetAccess and told mapped to the core
 * (memres_sleep_call_mapped()), which queues its restoring copies while the next run is mapped;
 * a run is cut after memres_sleep_call_get_restore_batch() bytes when that is not 0 (a backup's
 * wake). Their "mapped" events queued. On failure the copies queued are waited for
 * (memres_sleep_call_unmapping()), the granules done are unmapped again (their events withdrawn),
 * created memory released and spares kept, and @error names the driver call. Lock held. */
gboolean
arena_granules_wake (Arena *self, const guint *gs, guint n, GError **error)
{
  g_autofree gboolean *moved = g_new0 (gboolean, n + 1);
  gsize batch = memres_sleep_call_get_restore_batch ();
  guint most = batch > 0 ? (guint) MAX (batch / self->granularity, 1) : G_MAXUINT;
  gboolean ok = TRUE;
  guint k = 0;

  for (guint i = 0, run; ok && i < n; i += run)
    {
      CUresult r;

      for (run = 1; run < most && i + run < n && gs[i + run] == gs[i] + run
                    && granules_adjacent (self, gs[i], run);
           run++)
        ;
      for (; k < i + run; k++)
        if (!(ok = granule_back_granted (self, gs[k], &moved[k], FALSE, error)))
          break;
      if (!ok)
        break;
      r = self->drv->cuMemSetAccess (granule_address (self, gs[i]), run * self->granularity,
                                     &self->access, 1);
      if (r != CUDA_SUCCESS)
        {
          ok = memres_cuda_set_error (error, r, "cuMemSetAccess");
          break;
        }
      memres_sleep_call_mapped (granule_address (self, gs[i]), run * self->granularity);
    }
  if (ok)
    return TRUE;
  /* the granules mapped (the failing run's too) back without memory, once no copy the core
   * queued into them can still run */
  memres_sleep_call_unmapping ();
  for (guint j = k; j-- > 0;)
    granule_roll_back (self, gs[j], moved[j], "a failed wake");
  return FALSE;
}

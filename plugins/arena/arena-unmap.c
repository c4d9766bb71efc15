/* memres - CUDA memory resources
 * arena-unmap.c: taking the `arena` kind's physical memory away from addresses: idle granules
 * unmapped (their memory kept as spares for a remap, arena_unmap_idle()) or given back to the
 * driver (arena_release_idle(), _tag(), and every granule at finalize), a resized buffer's
 * granules moved (arena_granules_move()), the second mappings of lending made and undone and the
 * old addresses of lent memory reaped once their stream is past them (arena_lend_reap()), and the
 * granules of a sleeping tag released and backed again at its wake. The driver calls themselves
 * are arena-granules.c's (arena_granule_map(), arena_granules_unmap()).
 *
 * "About to be unmapped" must be delivered before the unmap (arena-segments.c), so every unmap
 * here goes the same way: under the lock, the granules are pinned (idle ones get a held byte of
 * their own, so that they are neither picked again nor idle; the others are held already, by a
 * buffer its owner is resizing, a retired address or sleeping bytes) and their events queued; the
 * lock is dropped and the queue raised; under the lock again each one whose bytes are still as
 * they were is unmapped, a run of adjacent ones by one cuMemUnmap (arena_granule_run()). A
 * granule that an allocation on another thread took bytes of meanwhile stays mapped and is told
 * mapped again (the event API's rule for a failed unmap); until then memres_lookup() does not find
 * those bytes, and the granule is marked (Arena.unmapping) so that nothing raises an event of its
 * own for it meanwhile: its memory is not lent (arena-lend.c) and a resize does not move it
 * (arena-resize.c copies). Either raised "about to be unmapped" a second time, which the core
 * refuses (/arena/segments/taken-while-unmapping).
 *
 * Giving a granule back: cuMemRelease while it is still mapped (the mapping keeps the memory),
 * then cuMemUnmap, which frees it; a failing unmap takes the handle back
 * (cuMemRetainAllocationHandle). Every failure leaves the table as it was and the driver matching
 * it. All under parts.lock except where said. */
#include "arena-private.h"

#include <stdlib.h>
#include <string.h>

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
  arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, g);
  if (self->held[g] == 0)
    {
      self->n_idle_mapped++;
      arena_idle_push (self, g);
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
  if ((r = arena_granules_unmap (self, g, 1)) != CUDA_SUCCESS)
    {
      CUresult r2 = self->drv->cuMemRetainAllocationHandle (
          &h, (void *) (guintptr) arena_granule_address (self, g));

      if (r2 != CUDA_SUCCESS)
        g_warning ("arena: cuMemRetainAllocationHandle failed (%d) while rolling back a "
                   "failure",
                   r2);
      arena_handle_set (self, g, h);
      return memres_cuda_set_error (error, r, "cuMemUnmap");
    }
  arena_handle_set (self, g, 0);
  self->n_mapped--;
  self->released++;
  return TRUE;
}

static gint
granule_cmp (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

/* Whether granule @g is held by its pin alone (arena_unmap_idle()). */
static gboolean
only_pinned (const Arena *self, guint g)
{
  return self->held[g] == 1;
}

/* The "about to be unmapped" events of the @n granules @gs (pinned) queued and raised with
 * parts.lock dropped (held on entry and on return), each granule marked meanwhile
 * (Arena.unmapping), so that an allocation that takes bytes of it raises no event of its own
 * for it before this one's unmap decides (it is neither lent nor moved). Every unmap of this
 * file but finalize's goes through here. */
static void
unmapping_raise (Arena *self, const guint *gs, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      arena_segment_queue (self, MEMRES_SEGMENT_UNMAPPING, gs[i]);
      self->unmapping[gs[i]] = 1;
    }
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  g_mutex_lock (&self->parts.lock);
  for (guint i = 0; i < n; i++)
    self->unmapping[gs[i]] = 0;
}

/* Unmaps up to @n idle granules: their physical memory kept as spares (a run of adjacent ones
 * unmapped by one cuMemUnmap), or with @release given back to the driver. parts.lock held on
 * entry and on return, dropped in between to deliver the "about to be unmapped" events (see the
 * top of the file). On failure the granules whose call failed, and those after them, stay mapped
 * and idle. */
gboolean
arena_unmap_idle (Arena *self, guint n, gboolean release, GError **error)
{
  g_autofree guint *picked = g_new (guint, MAX (n, 1));
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
      picked[k++] = (guint) g;
    }
  for (guint i = kept->len; i-- > 0;)
    arena_idle_push (self, g_array_index (kept, guint, i));
  self->keep_lo = G_MAXUINT;
  self->keep_hi = 0;
  self->idle_tag = CACHE_TAG_ANY;
  if (k == 0)
    return TRUE;
  unmapping_raise (self, picked, k);
  qsort (picked, k, sizeof (guint), granule_cmp);
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
      run = arena_granule_run (self, picked, k, i, only_pinned);
      for (guint j = 1; j < run; j++)
        self->held[g + j]--;
      if ((r = arena_granules_unmap (self, (guint) g, run)) != CUDA_SUCCESS)
        {
          ok = memres_cuda_set_error (error, r, "cuMemUnmap");
          for (guint j = 0; j < run; j++)
            unpin_mapped (self, (guint) g + j);
          continue;
        }
      for (guint j = (guint) g; j < (guint) g + run; j++)
        {
          self->spare[self->n_spare++] = self->handle[j];
          arena_handle_set (self, j, 0);
          self->moved_away[j]
              = ARENA_MOVED; /* a refault if it needs memory again (arena-headroom.c) */
        }
    }
  return ok;
}

/* Gives spares, then idle granules back to the driver, keeping at least @keep_bytes mapped (as
 * cuMemPoolTrimTo() keeps at least its bytes: the whole granules above them go, never one that
 * would leave less). When that gives the last idle granules back, the marks of memory moved
 * away (Arena.moved_away) are forgotten: the memory that was moved is in use or given back, so
 * memory needed at such an address again undoes no move and is no refault (arena-headroom.c;
 * /arena-stable/trim/headroom). parts.lock held; dropped in between (arena_unmap_idle()). */
gboolean
arena_release_idle (Arena *self, guint64 keep_bytes, GError **error)
{
  guint64 mapped;
  guint n;
  gboolean ok = TRUE;

  arena_spares_release (self);
  mapped = (guint64) self->n_mapped * self->granularity;
  n = mapped <= keep_bytes
          ? 0
          : (guint) MIN ((mapped - keep_bytes) >> self->granule_shift, self->n_idle_mapped);
  if (n > 0)
    ok = arena_unmap_idle (self, n, TRUE, error);
  if (n > 0 && self->n_idle_mapped == 0)
    memset (self->moved_away, 0, self->n_granules * sizeof *self->moved_away);
  return ok;
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
      arena_segment_queue (self, MEMRES_SEGMENT_UNMAPPING, g);
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
      if ((r = arena_granules_unmap (self, g, 1)) != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
        {
          g_warning ("arena: cuMemUnmap failed (%d) at finalize", r);
          all = FALSE;
        }
      arena_handle_set (self, g, 0);
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

/* Granule @from + i's physical memory moved back from @to + i (a rollback), for i < @n. */
static void
move_back (Arena *self, guint from, guint to, guint n)
{
  for (guint i = n; i-- > 0;)
    {
      CUmemGenericAllocationHandle h = self->handle[to + i];
      g_autoptr (GError) error = NULL;
      CUresult r;

      arena_segment_withdraw (self, to + i);
      if ((r = arena_granules_unmap (self, to + i, 1)) != CUDA_SUCCESS)
        {
          g_warning ("arena: cuMemUnmap failed (%d) while rolling back a failed move; the granule "
                     "stays where it was moved",
                     r);
          arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, to + i);
          continue;
        }
      arena_handle_set (self, to + i, 0);
      if (!arena_granule_map (self, from + i, h, TRUE, &error))
        {
          g_warning ("arena: mapping a granule back failed while rolling back a failed move: %s",
                     error->message);
          self->spare[self->n_spare++] = h; /* released at the end of the resize */
          continue;
        }
      arena_handle_set (self, from + i, h);
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
  g_autofree guint *gs = g_new (guint, MAX (n, 1));

  for (guint i = 0; i < n; i++)
    gs[i] = from + i;
  unmapping_raise (self, gs, n);
  for (guint i = 0; i < n; i++)
    {
      CUmemGenericAllocationHandle h = self->handle[from + i];
      CUresult r;

      if ((r = arena_granules_unmap (self, from + i, 1)) != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemUnmap");
          for (guint j = i; j < n; j++)
            arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, from + j);
          move_back (self, from, to, i);
          return FALSE;
        }
      if (!arena_granule_map (self, to + i, h, TRUE, error))
        {
          g_autoptr (GError) again = NULL;

          if (!arena_granule_map (self, from + i, h, TRUE, &again))
            {
              g_warning ("arena: mapping a granule back failed while rolling back a failed move: "
                         "%s",
                         again->message);
              self->spare[self->n_spare++] = h;
              arena_handle_set (self, from + i, 0);
            }
          for (guint j = i + 1; j < n; j++)
            arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, from + j);
          move_back (self, from, to, i);
          return FALSE;
        }
      arena_handle_set (self, to + i, h);
      arena_handle_set (self, from + i, 0);
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

  if (!arena_granule_map (self, g, self->handle[from], FALSE, error))
    return FALSE;
  arena_handle_set (self, g, self->handle[from]);
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

  arena_segment_withdraw (self, g);
  if ((r = arena_granules_unmap (self, g, 1)) == CUDA_SUCCESS)
    {
      if (self->held[g] == 0)
        self->n_idle_mapped--; /* counted idle when the failed placement dropped its bytes */
      arena_handle_set (self, g, 0);
      return TRUE;
    }
  g_warning ("arena: cuMemUnmap failed (%d) while undoing a lent granule; it is unmapped later", r);
  arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, g);
  return FALSE;
}

static gint
retired_cmp (gconstpointer a, gconstpointer b)
{
  return granule_cmp (&((const Retired *) a)->g, &((const Retired *) b)->g);
}

/* Unmaps the old addresses of lent memory (Arena.retired) whose events are done: the line of
 * each stream they wait for is polled for the newest of them (arena_line_poll(): that one asked
 * first, and when it is not done the older ones oldest first up to the first not done,
 * cuEventQuery; nothing blocks, nothing is queued; a stream found not done in several reaps in a
 * row skips a few, see arena-events.c), so that an old address goes
 * soon after its stream is past the event, whatever other streams still hold. An address waiting
 * for the legacy stream's pending event gets it recorded (arena_event_record()). "About to be
 * unmapped" is delivered for each (parts.lock dropped meanwhile; nothing else touches those bytes),
 * then cuMemUnmap, one per run of adjacent ones (the memory stays mapped where it was lent), and
 * their bytes become a settled free range without memory (counter `granules_reaped`). A query that
 * fails (neither done nor not ready) reaps nothing at this call; one whose unmap fails is told
 * mapped again and tried at a later call. parts.lock held on entry and on return. */
void
arena_lend_reap (Arena *self)
{
  g_autoptr (GArray) done = NULL;
  g_autofree guint *gs = NULL;
  MemresStream polled[8];
  guint n_polled = 0, kept = 0;
  CUresult r;

  if (self->retired->len == 0)
    return;
  /* per stream, the newest event an old address waits for (the last in the array: appended in
   * the order of the lendings) asked; a shared granule's donor retired after its bytes settled
   * has no event: done */
  for (guint i = self->retired->len; i-- > 0 && n_polled < G_N_ELEMENTS (polled);)
    {
      const Retired *e = &g_array_index (self->retired, Retired, i);
      gboolean seen = FALSE;

      for (guint k = 0; k < n_polled && !seen; k++)
        seen = polled[k] == e->stream;
      if (seen || arena_event_done (e->event))
        continue;
      polled[n_polled++] = e->stream;
      if (e->event->event == NULL && !arena_event_record (self, e->event))
        continue;
      if (!arena_line_poll (self, e->stream, TRUE, e->event))
        return; /* no answer: nothing reaped now */
    }
  done = g_array_new (FALSE, FALSE, sizeof (Retired));
  for (guint i = 0; i < self->retired->len; i++)
    {
      Retired e = g_array_index (self->retired, Retired, i);

      if (arena_event_done (e.event))
        g_array_append_val (done, e);
      else
        g_array_index (self->retired, Retired, kept++) = e;
    }
  g_array_set_size (self->retired, kept);
  if (done->len == 0)
    return;
  gs = g_new (guint, done->len);
  for (guint i = 0; i < done->len; i++)
    gs[i] = g_array_index (done, Retired, i).g;
  unmapping_raise (self, gs, done->len);
  g_array_sort (done, retired_cmp);
  for (guint i = 0; i < done->len; i++)
    gs[i] = g_array_index (done, Retired, i).g;
  for (guint i = 0, run; i < done->len; i += run)
    {
      guint g = gs[i];

      /* a run of adjacent old addresses: one cuMemUnmap */
      run = arena_granule_run (self, gs, done->len, i, NULL);
      if ((r = arena_granules_unmap (self, g, run)) != CUDA_SUCCESS)
        g_debug ("arena: cuMemUnmap of a lent granule's old address failed (%d); tried later",
                 (int) r);
      for (guint j = i; j < i + run; j++)
        {
          Retired *e = &g_array_index (done, Retired, j);
          guint64 at = arena_granule_address (self, e->g);

          if (r != CUDA_SUCCESS)
            {
              arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, e->g);
              g_array_append_val (self->retired, *e);
              continue;
            }
          arena_handle_set (self, e->g, 0);
          self->retired_at[e->g] = 0;
          self->lent_away[e->g] = 1;
          self->reaped_granules++;
          arena_span_count (self, at, self->granularity, -1);
          arena_heap_insert (self, at, self->granularity, NULL, NULL);
          cache_event_unref (&self->parts, e->event);
        }
    }
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

  unmapping_raise (self, gs, n);
  for (guint k = 0, run; k < n; k += run)
    {
      guint g = gs[k];
      CUresult r;

      run = 1;
      if (!sleep_eligible (self, g))
        {
          arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, g);
          continue;
        }
      /* the run of adjacent granules from @g that sleep too: one cuMemUnmap for them all */
      run = arena_granule_run (self, gs, n, k, sleep_eligible);
      if ((r = arena_granules_unmap (self, g, run)) != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemUnmap");
          for (guint j = k; j < n; j++)
            arena_segment_queue (self, MEMRES_SEGMENT_MAPPED, gs[j]);
          for (guint j = 0; j < k; j++)
            {
              g_autoptr (GError) again = NULL;

              if (h[j] == 0)
                continue;
              if (!arena_granule_map (self, gs[j], h[j], TRUE, &again))
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
 * again (arena_granule_back(): a spare's, else cuMemCreate; cuMemMap) and access, one run of
 * adjacent granules at a time (arena_granule_run()), each granted by one cuMemSetAccess and told
 * mapped to the core (memres_sleep_call_mapped()), which queues its restoring copies while the
 * next run is mapped; a run is cut after memres_sleep_call_get_restore_batch() bytes when that
 * is not 0 (a backup's wake). Their "mapped" events queued. On failure the copies queued are
 * waited for (memres_sleep_call_unmapping()), the granules done are unmapped again (their events
 * withdrawn), created memory released and spares kept, and @error names the driver call. Lock
 * held. */
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

      run = MIN (arena_granule_run (self, gs, n, i, NULL), most);
      for (; k < i + run; k++)
        if (!(ok = arena_granule_back (self, gs[k], &moved[k], FALSE, error)))
          break;
      if (!ok)
        break;
      r = self->drv->cuMemSetAccess (arena_granule_address (self, gs[i]), run * self->granularity,
                                     &self->access, 1);
      if (r != CUDA_SUCCESS)
        {
          ok = memres_cuda_set_error (error, r, "cuMemSetAccess");
          break;
        }
      memres_sleep_call_mapped (arena_granule_address (self, gs[i]), run * self->granularity);
    }
  if (ok)
    return TRUE;
  /* the granules mapped (the failing run's too) back without memory, once no copy the core
   * queued into them can still run */
  memres_sleep_call_unmapping ();
  for (guint j = k; j-- > 0;)
    arena_granule_roll_back (self, gs[j], moved[j], "a failed wake");
  return FALSE;
}

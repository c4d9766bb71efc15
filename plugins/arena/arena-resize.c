/* memres - CUDA memory resources
 * arena-resize.c: memres_buffer_resize() on `arena` buffers (the resize slot).
 *
 * In place where the range allows: a large buffer (above max_block) shrinks by freeing its tail
 * on the stream (a free range tagged with it, as a close makes one); it grows into the free
 * range right after it when that range is settled or was freed on the same stream and holds
 * the new bytes (arena_heap_grow_in_place(): the settled part's granules backed, idle ones moved
 * there first, as any allocation's). A block of the size classes keeps its place while the new
 * size fits its class.
 *
 * Otherwise a large buffer moves by remapping (resize_remap()): placed where each whole granule
 * of it lands on a whole granule without memory, the granules at its two ends backed anew and
 * its bytes in them copied on the stream, the whole granules' memory moved there
 * (arena_granules_move(): unmap, map, set access). A buffer in no whole granule, an exportable
 * one and a block of the size classes move by a copy: a new allocation (the allocate slot, on
 * the stream), the first MIN (old, new) bytes copied on the stream (cuMemcpyAsync), the old one
 * closed on the stream: the copy is ordered after the stream's work on the old buffer and
 * before its later work on the new one.
 *
 * Failure leaves the buffer as it was: a grow in place that cannot back its granules backs
 * none; a move whose copy fails closes the new allocation and keeps the old one. */
#include "arena-private.h"

/* A move: new allocation, copy on @stream, old one closed on @stream. */
static gboolean
resize_move (MemresResource *mr, Arena *self, MemresAllocation *alloc, gsize new_size,
             MemresStream stream, GError **error)
{
  MemresAllocation fresh = { 0 };
  const MemresCudaDriver *drv;
  gboolean pushed;
  CUresult r;

  /* the buffer's tag kept: the new allocation serves it as the old one did */
  if (!arena_allocate_for (mr, new_size, stream, arena_tag_of (self, alloc), &fresh, error))
    return FALSE;
  if ((drv = cache_context_push (&self->parts, &pushed, error)) == NULL)
    {
      arena_deallocate (mr, &fresh, stream, NULL);
      return FALSE;
    }
  r = drv->cuMemcpyAsync (fresh.address, alloc->address, MIN (alloc->size, new_size),
                          (CUstream) stream);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    {
      if (!arena_deallocate (mr, &fresh, stream, NULL))
        g_warning ("arena: a buffer allocated for a failed resize could not be closed");
      return memres_cuda_set_error (error, r, "cuMemcpyAsync");
    }
  if (!arena_deallocate (mr, alloc, stream, error))
    {
      /* the old one stays: the new one goes back (after the copy, on the same stream) */
      if (!arena_deallocate (mr, &fresh, stream, NULL))
        g_warning ("arena: a buffer allocated for a failed resize could not be closed");
      return FALSE;
    }
  *alloc = fresh;
  return TRUE;
}

/* Backs [addr, addr + size) of a taken extent (arena_span_hold()), unmapping idle granules first
 * when it asks (arena_unmap_idle(), which drops the lock), as an allocation does. */
static gboolean
hold_span (Arena *self, guint64 addr, guint64 size, GError **error)
{
  gboolean ok = TRUE;

  if (size == 0)
    return TRUE;
  for (guint round = 0;; round++)
    {
      GError *local = NULL;

      self->want_unmap = 0;
      self->no_unmap = round >= 4;
      if (arena_span_hold (self, addr, size, &local))
        break;
      if (local == NULL && self->want_unmap > 0
          && arena_unmap_idle (self, self->want_unmap, FALSE, &local))
        continue;
      if (local != NULL && arena_headroom_refused (self, &local))
        continue;
      if (local != NULL)
        g_propagate_error (error, local);
      ok = FALSE;
      break;
    }
  self->no_unmap = FALSE;
  return ok;
}

/* A move that remaps instead of copying (FALSE without an error: not possible here, copy
 * instead). The new extent is placed so that each whole granule of the old one lands on a whole
 * granule without memory (arena_heap_take_congruent(), another reservation if none does); the
 * granules at its two ends, which the old one may share with neighbours, are backed as any
 * allocation's and their bytes of the buffer copied on the stream (cuMemcpyAsync: less than a
 * granule each); the whole granules' memory is moved (arena_granules_move(): unmap, map, set
 * access; no copy, no new memory). The stream is waited for before the memory moves (queued work
 * may use the old addresses) and after the copies (so that the old extent is free and settled at
 * once). On failure the buffer is as it was and the new extent free again. */
static gboolean
resize_remap (MemresResource *mr, Arena *self, MemresAllocation *alloc, gsize new_size,
              MemresStream stream, GError **error)
{
  guint64 mask = self->granularity - 1;
  guint64 addr = alloc->address, old_r = arena_round (alloc->size), new_r = arena_round (new_size);
  guint64 i_lo = (addr + mask) & ~mask, i_hi = (addr + old_r) & ~mask;
  guint64 head = i_lo - addr, tail_at = i_hi - addr,
          tail = alloc->size - MIN (alloc->size, tail_at);
  const MemresCudaDriver *drv;
  guint64 at = 0;
  gboolean pushed, ok;
  guint n = (guint) ((i_hi - i_lo) >> self->granule_shift);
  CUresult r = CUDA_SUCCESS;

  if (i_hi <= i_lo)
    return FALSE; /* no whole granule: the copy is as small */
  if (!memres_cuda_stream_synchronize (self->device, stream, error))
    return FALSE;
  g_mutex_lock (&self->parts.lock);
  /* a granule the buffer took while its "about to be unmapped" event was on its way
   * (Arena.unmapping) gets no second one: the bytes are copied */
  for (guint i = 0; i < n; i++)
    if (self->unmapping[arena_granule (self, i_lo) + i])
      {
        g_mutex_unlock (&self->parts.lock);
        return FALSE;
      }
  arena_park_flush (self); /* every free byte in the heap (arena-park.c) */
  if (!arena_heap_take_congruent (self, addr, old_r, new_r, &at)
      && (!arena_reserve_more (self, new_r + self->granularity, NULL)
          || !arena_heap_take_congruent (self, addr, old_r, new_r, &at)))
    {
      g_mutex_unlock (&self->parts.lock);
      return FALSE;
    }
  /* the ends backed (a failure frees the extent again), the whole granules claimed */
  if (!hold_span (self, at, head, error))
    {
      arena_heap_insert (self, at, new_r, NULL, NULL);
      goto fail_locked;
    }
  if (!hold_span (self, at + tail_at, new_r - tail_at, error))
    {
      arena_span_drop (self, at, head);
      arena_heap_insert (self, at, new_r, NULL, NULL);
      goto fail_locked;
    }
  arena_span_claim (self, at + head, tail_at - head);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);

  /* the ends' bytes, then a wait: nothing of the stream's is queued on either extent after it */
  if ((drv = cache_context_push (&self->parts, &pushed, error)) != NULL)
    {
      if (head > 0)
        r = drv->cuMemcpyAsync (at, addr, MIN (head, alloc->size), (CUstream) stream);
      if (r == CUDA_SUCCESS && tail > 0)
        r = drv->cuMemcpyAsync (at + tail_at, addr + tail_at, tail, (CUstream) stream);
      memres_cuda_pop_context (pushed);
      if (r != CUDA_SUCCESS)
        memres_cuda_set_error (error, r, "cuMemcpyAsync");
    }
  /* waited for even after a failed copy: the first one may be queued */
  ok = drv != NULL && r == CUDA_SUCCESS;
  if (drv != NULL && !memres_cuda_stream_synchronize (self->device, stream, ok ? error : NULL))
    ok = FALSE;

  g_mutex_lock (&self->parts.lock);
  /* nothing is queued on the new extent any more (the copies waited for, or never queued: a
   * failed wait leaves the work in the driver's hands, as a failed synchronize does anywhere) */
  if (ok)
    ok = arena_granules_move (self, arena_granule (self, i_lo), arena_granule (self, at + head), n,
                              error);
  if (!ok)
    {
      arena_extent_free (self, at, new_r, NULL, NULL);
      goto fail_locked;
    }
  arena_extent_free (self, addr, old_r, NULL, NULL);
  self->large_used += new_r - old_r;
  arena_used_note (self);
  arena_spares_release (self);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  alloc->address = at;
  alloc->size = new_size;
  return TRUE;

fail_locked:
  arena_spares_release (self);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  if (error != NULL && *error == NULL)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "arena: a move failed");
  return FALSE;
}

/* A large buffer, large still: shrunk, or grown in place. FALSE without an error when it cannot
 * grow in place. */
static gboolean
resize_large_in_place (Arena *self, MemresAllocation *alloc, gsize new_size, MemresStream tag,
                       GError **error)
{
  guint64 old_r = arena_round (alloc->size), new_r = arena_round (new_size);
  gboolean ok = TRUE;

  g_mutex_lock (&self->parts.lock);
  /* every free byte in the heap, and the parked extents' older events before the freed tail's
   * newer one (arena-park.c) */
  arena_park_flush (self);
  if (new_r < old_r)
    {
      ok = arena_extent_free (self, alloc->address + new_r, old_r - new_r, tag, error);
      if (ok)
        self->large_used -= old_r - new_r;
    }
  else if (new_r > old_r)
    for (guint round = 0;; round++)
      {
        GError *local = NULL;

        self->want_unmap = 0;
        self->no_unmap = round >= 4;
        if (arena_heap_grow_in_place (self, alloc->address, old_r, new_r, tag, &local))
          {
            self->large_used += new_r - old_r;
            arena_used_note (self);
            break;
          }
        if (local == NULL && self->want_unmap > 0
            && arena_unmap_idle (self, self->want_unmap, FALSE, &local))
          continue;
        if (local != NULL && arena_headroom_refused (self, &local))
          continue;
        ok = FALSE;
        if (local != NULL)
          g_propagate_error (error, local);
        break;
      }
  self->no_unmap = FALSE;
  arena_spares_release (self);
  g_mutex_unlock (&self->parts.lock);
  arena_events_flush (self);
  if (ok)
    alloc->size = new_size;
  return ok;
}

gboolean
arena_resize (MemresResource *mr, MemresAllocation *alloc, gsize new_size, MemresStream stream,
              GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  gsize max_block = self->parts.max_block;
  MemresStream tag = cache_normalize_stream (&self->parts, stream);
  GError *local = NULL;

  if (alloc->size <= max_block && new_size <= max_block)
    {
      Block *b = alloc->plugin_data;

      if (new_size <= b->size)
        {
          alloc->size = new_size;
          return TRUE;
        }
    }
  else if (alloc->size > max_block && new_size > max_block && !arena_is_own (alloc)
           && !arena_wants_own (self, new_size))
    {
      if (resize_large_in_place (self, alloc, new_size, tag, &local))
        return TRUE;
      if (local != NULL)
        {
          /* out of memory for the bytes after it: a move may still fit */
          if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
            {
              g_propagate_error (error, local);
              return FALSE;
            }
          g_clear_error (&local);
        }
    }
  if (alloc->size > max_block && new_size > alloc->size && !arena_is_own (alloc)
      && !arena_wants_own (self, new_size))
    {
      if (resize_remap (mr, self, alloc, new_size, stream, &local))
        return TRUE;
      if (local != NULL)
        {
          g_propagate_error (error, local);
          return FALSE;
        }
    }
  return resize_move (mr, self, alloc, new_size, stream, error);
}

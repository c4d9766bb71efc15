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
 * Otherwise the buffer moves: a new allocation (the allocate slot, on the stream), the first
 * MIN (old, new) bytes copied on the stream (cuMemcpyAsync), the old one closed on the stream:
 * the copy is ordered after the stream's work on the old buffer and before its later work on
 * the new one. A move copies; it does not remap the buffer's granules as `vmm` does, since a
 * granule at either end of an arena buffer may hold its neighbours' bytes.
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

  if (!arena_allocate (mr, new_size, stream, &fresh, error))
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

/* A large buffer, large still: shrunk, or grown in place. FALSE without an error when it cannot
 * grow in place. */
static gboolean
resize_large_in_place (Arena *self, MemresAllocation *alloc, gsize new_size, MemresStream tag,
                       GError **error)
{
  guint64 old_r = arena_round (alloc->size), new_r = arena_round (new_size);
  gboolean ok = TRUE;

  g_mutex_lock (&self->parts.lock);
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
            self->used_high = MAX (self->used_high, arena_used (self));
            break;
          }
        if (local == NULL && self->want_unmap > 0
            && arena_unmap_idle (self, self->want_unmap, FALSE, &local))
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
  return resize_move (mr, self, alloc, new_size, stream, error);
}

/* memres - CUDA memory resources
 * buffer-resize.c: memres_buffer_resize(): the layer that made a buffer's allocation (through
 * the adaptors that pass allocations) grows or shrinks it through its resize slot, the result
 * checked as an allocation's, the change counted on every layer between. */
#include "memres-private.h"

/* A resize of @delta bytes of @buf counted on every layer that counts the allocation: the
 * buffer's resource and, down to @owner (whose slot resized it), the upstreams the pass-through
 * adaptors between them allocated it from (memres_upstream_allocate() counts there); a counted
 * layer (`stats`) in its counts, under the buffer's tag where its allocation was counted so. */
static void
count_resize (MemresBuffer *buf, MemresResource *owner, gint64 delta)
{
  guint tag = buf->tag != 0 && buf->mr->tags_wanted != 0 ? buf->tag : 0;

  if (delta == 0)
    return;
  for (MemresResource *mr = buf->mr;; mr = mr->upstream)
    {
      if (mr->counts != NULL)
        _memres_counted_resized (mr, tag, delta);
      else
        _memres_resource_count_used (mr, delta);
      if (mr == owner || mr->upstream == NULL)
        break;
    }
}

/* An empty buffer (memres_resource_allocate() of 0 bytes: address 0, no slot ever saw it) grows
 * as memres_resource_allocate() would have made it: the allocate slot of its resource on its own
 * record, under its tag, through buffer.c's calls (hot-path.h: _memres_buffer_slot_allocate(),
 * the record marked and the thread's call record, checked as _memres_resource_call_allocate()
 * checks), the top layer's usage counted (the layers below count theirs in
 * memres_upstream_allocate(), a counted layer in its slot), a tagged buffer of a stack that can
 * sleep linked into its tag's list. A kind's resize slot is never given a record it did not fill
 * (arena read the block of the record's plugin_data, NULL: SIGSEGV). */
static gboolean
resize_empty (MemresBuffer *buf, gsize new_size, MemresStream stream, GError **error)
{
  MemresResource *mr = buf->mr;
  gboolean tagged = buf->tag != 0 && mr->tags_wanted != 0;
  gboolean sleeps = tagged && (mr->tags_wanted & MEMRES_TAGS_SLEEP);
  GError *local = NULL;
  GError *failure = NULL;
  gboolean ok;

  if (new_size == 0)
    return TRUE;
  if (sleeps && !_memres_sleep_check_tag (mr, buf->tag, error))
    return FALSE;
  ok = _memres_buffer_slot_allocate (buf, mr, new_size, stream, tagged, &local);
  ok = _memres_resource_alloc_result (mr, "allocate", ok, &local, new_size, stream, &buf->alloc,
                                      &failure);
  _memres_buffer_call_end (tagged);
  if (!ok)
    {
      buf->alloc = (MemresAllocation){ 0, 0, NULL };
      return _memres_buffer_allocation_failed (mr, new_size, failure, error);
    }
  if (mr->counts == NULL)
    _memres_resource_count_used (mr, (gint64) buf->alloc.size);
  if (sleeps && !_memres_sleep_link (mr, buf, error))
    {
      /* its tag fell asleep meanwhile: the memory goes back, the buffer stays empty */
      gsize size = buf->alloc.size;

      _memres_buffer_call_deallocate (buf, mr, stream, TRUE, NULL);
      if (mr->counts == NULL)
        _memres_resource_count_used (mr, -(gint64) size);
      buf->alloc = (MemresAllocation){ 0, 0, NULL };
      return FALSE;
    }
  return TRUE;
}

/**
 * memres_buffer_resize:
 * @buf: a #MemresBuffer
 * @new_size: the new size in bytes
 * @stream: the stream the resize is ordered on
 * @error: return location for a #GError, or %NULL
 *
 * Grows or shrinks the buffer through the kind's resize slot (vmm: maps more physical memory
 * after the buffer, or remaps into a new reservation without copying); the address may change.
 * An empty buffer (allocated with 0 bytes: address 0) grows as an allocation of @new_size bytes
 * from its resource would be made (the allocate slot, under the buffer's tag), where the stack
 * resizes. On failure the buffer is left exactly as it was. Not to be called while another
 * thread uses the buffer.
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_SLEEP_ERROR_ASLEEP for a sleeping buffer
 * (memres_buffer_is_asleep()); %MEMRES_ERROR_NOT_SUPPORTED for kinds without
 * %MEMRES_MEMORY_RESIZABLE, for wrapped memory and for buffers imported from another process
 * (%MEMRES_MEMORY_IMPORTED); %MEMRES_ERROR_OUT_OF_MEMORY,
 * %MEMRES_CUDA_ERROR from the kind.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_buffer_resize (MemresBuffer *buf, gsize new_size, MemresStream stream, GError **error)
{
  MemresAllocation alloc;
  MemresResource *owner;
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail (buf != NULL, FALSE);

  if (memres_buffer_is_closed (buf))
    return _memres_buffer_closed_error (error);
  if (!_memres_buffer_check_awake (buf, "resize", error))
    return FALSE;
  /* through adaptors that pass allocations through: the layer that made the allocation */
  owner = buf->mr != NULL ? _memres_resource_slot_owner (buf->mr, MEMRES_SLOT_OFFSET (resize), TRUE)
                          : NULL;
  /* an adaptor that keeps per-buffer accounting clears RESIZABLE in its query */
  if (owner != buf->mr && !(buf->flags & MEMRES_MEMORY_RESIZABLE))
    owner = NULL;
  if (owner == NULL || owner->ops->resize == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "buffers of %s%s%s cannot be resized",
                   buf->mr != NULL ? "kind \"" : "wrapped memory",
                   buf->mr != NULL ? buf->mr->kind->name : "", buf->mr != NULL ? "\"" : "");
      return FALSE;
    }
  if (buf->flags & MEMRES_MEMORY_IMPORTED)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "a buffer imported from another process cannot be resized");
      return FALSE;
    }
  if (new_size > G_MAXSSIZE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "cannot resize a buffer to %" G_GSIZE_FORMAT " bytes", new_size);
      return FALSE;
    }
  if (!_memres_resource_check_usable (buf->mr, "resizing", error))
    return FALSE;
  if (buf->alloc.address == 0 && buf->alloc.size == 0)
    return resize_empty (buf, new_size, stream, error);
  alloc = buf->alloc;
  ok = owner->ops->resize (owner, &alloc, new_size, stream, &local);
  if (!ok) /* the buffer as it was; a failure without an error reported as a breach */
    {
      GError *failure = NULL;

      _memres_resource_alloc_result (owner, "resize", ok, &local, new_size, stream, &alloc,
                                     &failure);
      return _memres_buffer_allocation_failed (buf->mr, new_size, failure, error);
    }
  if (new_size == 0) /* resized to nothing: address 0 is allowed */
    {
      if (!_memres_resource_slot_result (owner, "resize", ok, &local, error))
        return FALSE;
      count_resize (buf, owner, (gint64) alloc.size - (gint64) buf->alloc.size);
      buf->alloc = alloc;
      return TRUE;
    }
  /* A success that breaks the contract (address 0, too few bytes): what the plugin returned is
   * released and the buffer is left open and empty (the old memory belongs to the new record). */
  ok = _memres_resource_alloc_result (owner, "resize", ok, &local, new_size, stream, &alloc, error);
  count_resize (buf, owner, (gint64) alloc.size - (gint64) buf->alloc.size);
  buf->alloc = alloc;
  return ok;
}

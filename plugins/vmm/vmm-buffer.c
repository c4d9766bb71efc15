/* memres - CUDA memory resources
 * vmm-buffer.c: buffers of the `vmm` kind: allocation, close, growth and shrinking.
 *
 * Every step that creates something (reservation, physical allocation, mapping, access) is
 * undone in reverse order when a later step fails, so that a failed operation leaves the buffer
 * and the driver exactly as they were. Releasing steps are ordered so that they can be undone
 * too: unmapping is undone by mapping the same physical handles again (and setting access), and
 * freeing a reservation by reserving the same range again. The one release that cannot be undone
 * is cuMemRelease of a handle that is no longer mapped (the memory is gone): close releases the
 * handles last, and once the first one is released it releases the rest regardless. */
#include "vmm-private.h"

static gboolean
vmm_cuda_error (GError **error, CUresult res, const char *call)
{
  memres_cuda_set_error (error, res, call);
  return FALSE;
}

/* A release call failed while undoing a failed operation: nothing else can be done with the
 * object. */
static void
vmm_warn_leak (CUresult res, const char *call)
{
  g_warning ("vmm: %s failed with error %d while rolling back; the object is leaked", call,
             (int) res);
}

static gboolean
vmm_round_size (VmmResource *self, gsize size, gsize *out, GError **error)
{
  if (size > G_MAXSIZE - (self->granularity - 1))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "vmm: %" G_GSIZE_FORMAT " bytes cannot be rounded up to the granularity "
                   "(%" G_GSIZE_FORMAT " bytes)",
                   size, self->granularity);
      return FALSE;
    }
  *out = (size + self->granularity - 1) & ~(self->granularity - 1);
  return TRUE;
}

/* Makes room for @n_more entries in an array of @elt_size-byte entries. */
static gboolean
vmm_array_reserve (gpointer *array, gsize *cap, gsize n, gsize n_more, gsize elt_size,
                   GError **error)
{
  gsize want = n + n_more;
  gpointer grown;

  if (want <= *cap)
    return TRUE;
  want = MAX (want, *cap * 2);
  grown = want <= G_MAXSIZE / elt_size ? g_try_realloc (*array, want * elt_size) : NULL;
  if (grown == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "vmm: cannot track %" G_GSIZE_FORMAT " more chunks", n_more);
      return FALSE;
    }
  *array = grown;
  *cap = want;
  return TRUE;
}

static gboolean
vmm_reserve_chunks (VmmBuffer *buf, gsize bytes, gsize chunk, GError **error)
{
  gsize n_more = bytes / chunk + (bytes % chunk != 0);

  return vmm_array_reserve ((gpointer *) &buf->chunks, &buf->chunks_cap, buf->n_chunks, n_more,
                            sizeof (VmmChunk), error);
}

static gboolean
vmm_reserve_ranges (VmmBuffer *buf, gsize n_more, GError **error)
{
  return vmm_array_reserve ((gpointer *) &buf->ranges, &buf->ranges_cap, buf->n_ranges, n_more,
                            sizeof (VmmRange), error);
}

static void
vmm_buffer_free (VmmBuffer *buf)
{
  g_free (buf->chunks);
  g_free (buf->ranges);
  g_free (buf);
}

/* --- driver steps, each with its undo ------------------------------------------------------ */

static gboolean
vmm_address_reserve (VmmResource *self, gsize size, CUdeviceptr hint, CUdeviceptr *ptr,
                     GError **error)
{
  CUresult res = self->drv->cuMemAddressReserve (ptr, size, self->granularity, hint, 0);

  if (res != CUDA_SUCCESS)
    return vmm_cuda_error (error, res, "cuMemAddressReserve");
  return TRUE;
}

static void
vmm_address_free_or_warn (VmmResource *self, CUdeviceptr ptr, gsize size)
{
  CUresult res = self->drv->cuMemAddressFree (ptr, size);

  if (res != CUDA_SUCCESS)
    vmm_warn_leak (res, "cuMemAddressFree");
}

static void
vmm_unmap_or_warn (VmmResource *self, CUdeviceptr ptr, gsize size)
{
  CUresult res;

  if (size == 0)
    return;
  res = self->drv->cuMemUnmap (ptr, size);
  if (res != CUDA_SUCCESS)
    vmm_warn_leak (res, "cuMemUnmap");
}

static gboolean
vmm_set_access (VmmResource *self, CUdeviceptr ptr, gsize size, GError **error)
{
  CUresult res;

  if (size == 0)
    return TRUE;
  res = self->drv->cuMemSetAccess (ptr, size, self->access, self->n_access);
  if (res != CUDA_SUCCESS)
    return vmm_cuda_error (error, res, "cuMemSetAccess");
  return TRUE;
}

/* Maps the existing chunks [first, last) of @buf at @base + their offset. On failure unmaps
 * what it mapped. */
static gboolean
vmm_map_chunks (VmmResource *self, VmmBuffer *buf, CUdeviceptr base, gsize first, gsize last,
                GError **error)
{
  for (gsize i = first; i < last; i++)
    {
      const VmmChunk *c = &buf->chunks[i];
      CUresult res = self->drv->cuMemMap (base + c->offset, c->size, 0, c->handle, 0);

      if (res != CUDA_SUCCESS)
        {
          if (i > first)
            vmm_unmap_or_warn (self, base + buf->chunks[first].offset,
                               c->offset - buf->chunks[first].offset);
          return vmm_cuda_error (error, res, "cuMemMap");
        }
    }
  return TRUE;
}

/* Releases the physical handles of the chunks [first, n_chunks) and forgets them. */
static void
vmm_release_chunks_or_warn (VmmResource *self, VmmBuffer *buf, gsize first)
{
  for (gsize i = buf->n_chunks; i-- > first;)
    {
      CUresult res = self->drv->cuMemRelease (buf->chunks[i].handle);

      if (res != CUDA_SUCCESS)
        vmm_warn_leak (res, "cuMemRelease");
    }
  buf->n_chunks = first;
}

/* Creates physical memory for the bytes [buf->mapped, @end) in chunks of at most the resource's
 * chunk size, appends the chunks to @buf (room for them is reserved by the caller) and maps them
 * at @base + offset. Leaves buf->mapped alone. On failure unmaps and releases what it created,
 * leaving @buf as it was. */
static gboolean
vmm_create_chunks (VmmResource *self, VmmBuffer *buf, CUdeviceptr base, gsize end, GError **error)
{
  gsize first = buf->n_chunks;
  gsize offset = buf->mapped;
  const char *call = NULL;
  CUresult res = CUDA_SUCCESS;

  while (offset < end)
    {
      VmmChunk *c = &buf->chunks[buf->n_chunks];

      c->offset = offset;
      c->size = MIN (self->chunk, end - offset);
      res = self->drv->cuMemCreate (&c->handle, c->size, &self->prop, 0);
      if (res != CUDA_SUCCESS)
        {
          call = "cuMemCreate";
          break;
        }
      res = self->drv->cuMemMap (base + offset, c->size, 0, c->handle, 0);
      if (res != CUDA_SUCCESS)
        {
          CUresult res2 = self->drv->cuMemRelease (c->handle);

          if (res2 != CUDA_SUCCESS)
            vmm_warn_leak (res2, "cuMemRelease");
          call = "cuMemMap";
          break;
        }
      buf->n_chunks++;
      offset += c->size;
    }
  if (call == NULL)
    return TRUE;

  vmm_unmap_or_warn (self, base + buf->mapped, offset - buf->mapped);
  vmm_release_chunks_or_warn (self, buf, first);
  return vmm_cuda_error (error, res, call);
}

/* Undoes vmm_create_chunks() after it succeeded: unmaps the new chunks (mapped at @base) and
 * releases them. */
static void
vmm_destroy_new_chunks (VmmResource *self, VmmBuffer *buf, CUdeviceptr base, gsize first)
{
  if (first == buf->n_chunks)
    return;
  vmm_unmap_or_warn (self, base + buf->chunks[first].offset,
                     buf->chunks[buf->n_chunks - 1].offset + buf->chunks[buf->n_chunks - 1].size
                         - buf->chunks[first].offset);
  vmm_release_chunks_or_warn (self, buf, first);
}

/* Maps every chunk of @buf at buf->base again and grants access: undoes an unmap of the whole
 * buffer. */
static gboolean
vmm_restore_mappings (VmmResource *self, VmmBuffer *buf, GError **error)
{
  if (!vmm_map_chunks (self, buf, buf->base, 0, buf->n_chunks, error))
    return FALSE;
  if (!vmm_set_access (self, buf->base, buf->mapped, error))
    {
      vmm_unmap_or_warn (self, buf->base, buf->mapped);
      return FALSE;
    }
  return TRUE;
}

/* Reserves @r again at exactly its address: undoes cuMemAddressFree. */
static gboolean
vmm_reserve_again (VmmResource *self, const VmmRange *r)
{
  CUdeviceptr ptr = 0;
  CUresult res = self->drv->cuMemAddressReserve (&ptr, r->size, self->granularity, r->ptr, 0);

  if (res != CUDA_SUCCESS)
    {
      vmm_warn_leak (res, "cuMemAddressReserve");
      return FALSE;
    }
  if (ptr != r->ptr)
    {
      g_warning ("vmm: the address range of a buffer was taken while rolling back a failure");
      vmm_address_free_or_warn (self, ptr, r->size);
      return FALSE;
    }
  return TRUE;
}

/* Frees the reservations of @buf (which hold no mapping). On failure reserves the ones already
 * freed again, so the set of reservations is unchanged. */
static gboolean
vmm_free_ranges (VmmResource *self, VmmBuffer *buf, GError **error)
{
  for (gsize i = 0; i < buf->n_ranges; i++)
    {
      CUresult res = self->drv->cuMemAddressFree (buf->ranges[i].ptr, buf->ranges[i].size);

      if (res != CUDA_SUCCESS)
        {
          for (gsize j = i; j-- > 0;)
            vmm_reserve_again (self, &buf->ranges[j]);
          return vmm_cuda_error (error, res, "cuMemAddressFree");
        }
    }
  return TRUE;
}

/* Waits for the work queued on @stream: nothing is unmapped while a kernel may still use it. */
static gboolean
vmm_stream_synchronize (VmmResource *self, MemresStream stream, GError **error)
{
  CUresult res;

  /* The legacy and per-thread default streams are those of the current context. */
  if ((guintptr) stream <= (guintptr) CU_STREAM_PER_THREAD
      && !memres_cuda_ensure_context (self->device, error))
    return FALSE;
  res = self->drv->cuStreamSynchronize ((CUstream) stream);
  if (res != CUDA_SUCCESS)
    return vmm_cuda_error (error, res, "cuStreamSynchronize");
  return TRUE;
}

/* --- the slots ----------------------------------------------------------------------------- */

/* _vmm_allocate: the allocate slot. Rounds @size up to the granularity, reserves max(size, reserve)
 * bytes of address space (cuMemAddressReserve), creates the physical memory in chunks (cuMemCreate)
 * and maps each one (cuMemMap), then grants the owner, the host location and the peers access in
 * one cuMemSetAccess. Synchronous: @stream is not used. On failure everything created is released
 * in reverse order.
 */
gboolean
_vmm_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  VmmBuffer *buf;
  gsize rounded;
  VmmRange range;

  if (!vmm_round_size (self, size, &rounded, error))
    return FALSE;
  range.size = MAX (rounded, self->reserve);
  if (!vmm_address_reserve (self, range.size, 0, &range.ptr, error))
    return FALSE;

  buf = g_new0 (VmmBuffer, 1);
  buf->base = range.ptr;
  if (!vmm_reserve_ranges (buf, 1, error) || !vmm_reserve_chunks (buf, rounded, self->chunk, error))
    goto fail_range;
  buf->ranges[buf->n_ranges++] = range;
  buf->reserved = range.size;
  if (!vmm_create_chunks (self, buf, buf->base, rounded, error))
    goto fail_range;
  buf->mapped = rounded;
  if (!vmm_set_access (self, buf->base, buf->mapped, error))
    {
      vmm_destroy_new_chunks (self, buf, buf->base, 0);
      goto fail_range;
    }

  alloc->address = buf->base;
  alloc->size = rounded;
  alloc->plugin_data = buf;
  _vmm_stats_update (self, rounded, rounded);
  return TRUE;

fail_range:
  vmm_address_free_or_warn (self, range.ptr, range.size);
  vmm_buffer_free (buf);
  return FALSE;
}

/* _vmm_deallocate: the deallocate slot. Waits for @stream (cuStreamSynchronize), unmaps the buffer
 * in one cuMemUnmap, frees every reservation with its exact range (cuMemAddressFree) and releases
 * every physical handle (cuMemRelease). A failure before the first handle is released is undone
 * (the buffer stays usable); after it, the remaining handles are still released and the first error
 * is reported.
 */
gboolean
_vmm_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  VmmBuffer *buf = alloc->plugin_data;
  gsize physical = buf->mapped;
  CUresult res, first_failure = CUDA_SUCCESS;

  if (!vmm_stream_synchronize (self, stream, error))
    return FALSE;
  if (buf->mapped != 0)
    {
      res = self->drv->cuMemUnmap (buf->base, buf->mapped);
      if (res != CUDA_SUCCESS)
        return vmm_cuda_error (error, res, "cuMemUnmap");
    }
  if (!vmm_free_ranges (self, buf, error))
    {
      vmm_restore_mappings (self, buf, NULL);
      return FALSE;
    }

  for (gsize i = buf->n_chunks; i-- > 0;)
    {
      res = self->drv->cuMemRelease (buf->chunks[i].handle);
      if (res == CUDA_SUCCESS)
        continue;
      if (i == buf->n_chunks - 1)
        {
          /* nothing released yet: put the buffer back */
          gboolean restored = TRUE;

          for (gsize j = 0; j < buf->n_ranges && restored; j++)
            restored = vmm_reserve_again (self, &buf->ranges[j]);
          if (restored)
            vmm_restore_mappings (self, buf, NULL);
          return vmm_cuda_error (error, res, "cuMemRelease");
        }
      if (first_failure == CUDA_SUCCESS)
        first_failure = res;
    }

  _vmm_stats_update (self, -(gint64) physical, -(gint64) alloc->size);
  vmm_buffer_free (buf);
  alloc->plugin_data = NULL;
  if (first_failure != CUDA_SUCCESS)
    return vmm_cuda_error (error, first_failure, "cuMemRelease");
  return TRUE;
}

/* Maps the chunks beyond the buffer's mapped bytes up to @new_size bytes from @buf->base,
 * reserving the address space right after the buffer when the reservations are too short.
 * Returns FALSE with *@moved set to FALSE (and nothing changed) when that address space is taken:
 * the caller moves the buffer then. */
static gboolean
vmm_grow_in_place (VmmResource *self, VmmBuffer *buf, gsize new_size, gboolean *taken,
                   GError **error)
{
  gsize first = buf->n_chunks;
  VmmRange extra = { 0, 0 };

  *taken = FALSE;
  if (!vmm_reserve_ranges (buf, 1, error)
      || !vmm_reserve_chunks (buf, new_size - buf->mapped, self->chunk, error))
    return FALSE;
  if (new_size > buf->reserved)
    {
      CUdeviceptr hint = buf->base + buf->reserved;

      extra.size = new_size - buf->reserved;
      if (!vmm_address_reserve (self, extra.size, hint, &extra.ptr, error))
        return FALSE;
      if (extra.ptr != hint)
        {
          CUresult res = self->drv->cuMemAddressFree (extra.ptr, extra.size);

          if (res != CUDA_SUCCESS)
            return vmm_cuda_error (error, res, "cuMemAddressFree");
          *taken = TRUE;
          return FALSE;
        }
    }

  if (!vmm_create_chunks (self, buf, buf->base, new_size, error))
    goto fail_extra;
  if (!vmm_set_access (self, buf->base + buf->mapped, new_size - buf->mapped, error))
    {
      vmm_destroy_new_chunks (self, buf, buf->base, first);
      goto fail_extra;
    }

  if (extra.size != 0)
    {
      buf->ranges[buf->n_ranges++] = extra;
      buf->reserved += extra.size;
    }
  buf->mapped = new_size;
  return TRUE;

fail_extra:
  if (extra.size != 0)
    vmm_address_free_or_warn (self, extra.ptr, extra.size);
  return FALSE;
}

/* Moves @buf into a new reservation of max(new_size, reserve) bytes: maps the existing physical
 * handles there too (no copy), creates and maps the new chunks, grants access to the whole new
 * range, then (after @stream is idle) unmaps and frees the old range. */
static gboolean
vmm_grow_by_move (VmmResource *self, VmmBuffer *buf, gsize new_size, MemresStream stream,
                  GError **error)
{
  gsize first = buf->n_chunks;
  VmmRange range;

  range.size = MAX (new_size, self->reserve);
  if (!vmm_reserve_chunks (buf, new_size - buf->mapped, self->chunk, error))
    return FALSE;
  if (!vmm_address_reserve (self, range.size, 0, &range.ptr, error))
    return FALSE;
  if (!vmm_map_chunks (self, buf, range.ptr, 0, first, error))
    goto fail_range;
  if (!vmm_create_chunks (self, buf, range.ptr, new_size, error))
    goto fail_old_mappings;
  if (!vmm_set_access (self, range.ptr, new_size, error))
    goto fail_new_chunks;

  /* Commit: the old addresses go away. */
  if (!vmm_stream_synchronize (self, stream, error))
    goto fail_new_chunks;
  if (buf->mapped != 0)
    {
      CUresult res = self->drv->cuMemUnmap (buf->base, buf->mapped);

      if (res != CUDA_SUCCESS)
        {
          vmm_cuda_error (error, res, "cuMemUnmap");
          goto fail_new_chunks;
        }
    }
  if (!vmm_free_ranges (self, buf, error))
    {
      vmm_restore_mappings (self, buf, NULL);
      goto fail_new_chunks;
    }

  buf->ranges[0] = range;
  buf->n_ranges = 1;
  buf->base = range.ptr;
  buf->reserved = range.size;
  buf->mapped = new_size;
  return TRUE;

fail_new_chunks:
  vmm_destroy_new_chunks (self, buf, range.ptr, first);
fail_old_mappings:
  if (first != 0)
    vmm_unmap_or_warn (self, range.ptr, buf->mapped);
fail_range:
  vmm_address_free_or_warn (self, range.ptr, range.size);
  return FALSE;
}

/* Releases the chunks that start at or beyond @new_size bytes. The handles are released while
 * still mapped (the mapping keeps the memory alive, and cuMemRetainAllocationHandle gets a
 * handle back if a later step fails); the unmap then frees the memory. */
static gboolean
vmm_shrink (VmmResource *self, VmmBuffer *buf, gsize new_size, MemresStream stream, GError **error)
{
  gsize keep = buf->n_chunks;
  gsize i;
  CUdeviceptr tail;
  CUresult res = CUDA_SUCCESS;
  const char *call = NULL;

  while (keep > 0 && buf->chunks[keep - 1].offset >= new_size)
    keep--;
  if (keep == buf->n_chunks)
    return TRUE;
  tail = buf->base + buf->chunks[keep].offset;

  if (!vmm_stream_synchronize (self, stream, error))
    return FALSE;
  for (i = keep; i < buf->n_chunks; i++)
    {
      res = self->drv->cuMemRelease (buf->chunks[i].handle);
      if (res != CUDA_SUCCESS)
        {
          call = "cuMemRelease";
          break;
        }
    }
  if (call == NULL)
    {
      res = self->drv->cuMemUnmap (tail, buf->mapped - buf->chunks[keep].offset);
      if (res == CUDA_SUCCESS)
        {
          buf->n_chunks = keep;
          buf->mapped = buf->chunks[keep].offset;
          return TRUE;
        }
      call = "cuMemUnmap";
    }

  /* Take the released handles back from their mappings. */
  while (i-- > keep)
    {
      VmmChunk *c = &buf->chunks[i];
      CUresult res2 = self->drv->cuMemRetainAllocationHandle (
          &c->handle, (void *) (guintptr) (buf->base + c->offset));

      if (res2 != CUDA_SUCCESS)
        vmm_warn_leak (res2, "cuMemRetainAllocationHandle");
    }
  return vmm_cuda_error (error, res, call);
}

/* _vmm_resize: the resize slot. Growing maps new chunks after the buffer: in place when the
 * buffer's reservations have room or the address range right after them can be reserved, otherwise
 * in a new reservation that the existing physical memory is mapped into as well (no copy), after
 * which the old range is unmapped and freed (the address changes). Shrinking releases the chunks
 * that lie wholly beyond the new size; the address range stays reserved (even at size 0), so that
 * the buffer grows back in place. Anything unmapped is unmapped only after @stream is idle. On
 * failure @alloc and the driver are left exactly as they were.
 */
gboolean
_vmm_resize (MemresResource *mr, MemresAllocation *alloc, gsize new_size, MemresStream stream,
             GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  VmmBuffer *buf = alloc->plugin_data;
  gsize rounded, old_mapped;
  gboolean taken = FALSE;

  /* The core's empty buffer (no address, no state) grows by allocating. */
  if (buf == NULL)
    return new_size == 0 || _vmm_allocate (mr, new_size, stream, alloc, error);

  if (!vmm_round_size (self, new_size, &rounded, error))
    return FALSE;

  old_mapped = buf->mapped;
  if (rounded > buf->mapped)
    {
      if (!vmm_grow_in_place (self, buf, rounded, &taken, error)
          && (!taken || !vmm_grow_by_move (self, buf, rounded, stream, error)))
        return FALSE;
    }
  else if (rounded < alloc->size && !vmm_shrink (self, buf, rounded, stream, error))
    return FALSE;

  _vmm_stats_update (self, (gint64) buf->mapped - (gint64) old_mapped,
                     (gint64) rounded - (gint64) alloc->size);
  alloc->address = buf->base;
  alloc->size = rounded;
  return TRUE;
}

/* memres - CUDA memory resources
 * vmm-buffer.c: buffers of the `vmm` kind: allocation, close, growth and shrinking (the slots;
 * their steps on the address space and the physical memory are vmm-memory.c's).
 *
 * A buffer's address space is one or more adjacent reservations (a grow in place adds one); its
 * physical memory is a list of chunks, each one cuMemCreate allocation mapped whole at its offset
 * and never across two reservations. Unmapping and granting access take one driver call per
 * reservation.
 *
 * Every step that creates something (reservation, physical allocation, mapping, access) is
 * undone in reverse order when a later step fails, so that a failed operation leaves the buffer
 * and the driver as they were. Releasing steps are ordered so that they can be undone too: an
 * unmap is undone by mapping the same handles again and granting access, a freed reservation by
 * reserving the same range again, a handle released while still mapped by taking it back from
 * its mapping (cuMemRetainAllocationHandle). What cannot be undone is the release of memory that
 * is no longer mapped; see vmm_shrink() for the one place where that can happen. A close that
 * cannot wait for its stream changes nothing (the core waits before the deallocate slot, and
 * keeps the buffer open when it cannot); once the teardown has begun it is not undone: a failing
 * step is reported, everything else still released, and the allocation's address set to 0 so that
 * the core closes the buffer all the same.
 *
 * Segments (memres-segments.h): a buffer's mapped bytes [base, base + mapped) are one segment,
 * told mapped once placed, grown when a grow in place maps more, about to be unmapped before a
 * close, a shrink or a move unmaps anything (then, for a shrink or a move, the segment that is
 * left mapped); a step that fails after that and maps the memory back tells it mapped again. */
#include "vmm-private.h"

#include <string.h>

#include "../common/alloc-error.h"
#include "../common/release.h"

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

static void
vmm_buffer_free (VmmBuffer *buf)
{
  g_free (buf->chunks);
  g_free (buf->ranges);
  g_free (buf);
}

/* --- segments -------------------------------------------------------------------------------- */

gboolean
_vmm_segment (VmmResource *self, const VmmBuffer *buf, CUdeviceptr base, gsize length,
              MemresSegment *seg)
{
  if (length == 0)
    return FALSE;
  memset (seg, 0, sizeof *seg);
  seg->base = base;
  seg->length = length;
  /* as memres_buffer_get_device() says: host-located memory belongs to no device */
  seg->device = self->prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? self->device : -1;
  seg->handle_types = (guint32) self->prop.requestedHandleTypes;
  seg->tag = buf->tag;
  return TRUE;
}

void
_vmm_raise (VmmResource *self, const VmmBuffer *buf, MemresSegmentEvent event, CUdeviceptr base,
            gsize length)
{
  g_autoptr (GError) error = NULL;
  MemresSegment seg;

  if (_vmm_segment (self, buf, base, length, &seg)
      && !memres_resource_raise_segment_event (self->mr, event, &seg, &error))
    g_warning ("vmm: %s", error->message);
}

/* --- the slots ------------------------------------------------------------------------------- */

/* Places the new buffer @buf (its chunk array ready: room for the chunks to create, or the
 * chunks to map): reserves @reserve bytes of address space, maps the first @mapped bytes,
 * creating their chunks (cuMemCreate) when @create, else mapping the chunks @buf holds (an
 * import), grants access (cuMemSetAccess), then fills @alloc (@size bytes) and counts @mapped
 * physical bytes. On failure releases what it made (not the handles it was given), frees @buf
 * and sets @error. */
static gboolean
vmm_place (VmmResource *self, VmmBuffer *buf, gsize reserve, gsize mapped, gboolean create,
           gsize size, MemresAllocation *alloc, GError **error)
{
  VmmRange range = { 0, reserve };
  VmmSpace space;

  if (!_vmm_reserve_ranges (buf, 1, error)
      || !_vmm_address_reserve (self, range.size, 0, &range.ptr, error))
    goto fail;
  buf->ranges[buf->n_ranges++] = range;
  buf->base = range.ptr;
  buf->reserved = range.size;

  space = _vmm_space_of (buf);
  if (create ? !_vmm_create_chunks (self, buf, space, mapped, error)
             : !_vmm_map_chunks (self, buf, space, 0, buf->n_chunks, error))
    goto fail_range;
  if (!_vmm_grant (self, space, 0, mapped, error))
    {
      if (create)
        _vmm_destroy_chunks (self, buf, space, 0);
      else
        _vmm_unmap_or_warn (self, space, 0, mapped);
      goto fail_range;
    }
  buf->mapped = mapped;
  buf->imported = !create;

  alloc->address = buf->base;
  alloc->size = size;
  alloc->plugin_data = buf;
  _vmm_buffer_update (self, buf, size, VMM_BUFFER_ADDED, (gint64) mapped);
  _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, mapped);
  return TRUE;

fail_range:
  _vmm_address_free_or_warn (self, range.ptr, range.size);
fail:
  vmm_buffer_free (buf);
  return FALSE;
}

/* _vmm_allocate: the allocate slot. Rounds @size up to the granularity, reserves max(size,
 * reserve) bytes of address space (cuMemAddressReserve), creates the physical memory in chunks
 * (cuMemCreate) and maps each one (cuMemMap), then grants the owner, the host location and the
 * peers access in one cuMemSetAccess. Synchronous: @stream is not used. On failure everything
 * created is released in reverse order, and the error says "cannot allocate SIZE bytes: ", the
 * step and the bytes its driver call asked for, then the call and its CUresult ("cannot allocate
 * 3145728 bytes: reserving 4194304 bytes of address space: cuMemAddressReserve:
 * CUDA_ERROR_OUT_OF_MEMORY: out of memory"). */
gboolean
_vmm_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  VmmBuffer *buf;
  gsize rounded;

  if (!vmm_round_size (self, size, &rounded, error))
    return FALSE;
  buf = g_new0 (VmmBuffer, 1);
  buf->tag = memres_allocation_get_tag (alloc); /* marked in a stack that can sleep */
  if (vmm_place (self, buf, MAX (rounded, self->reserve), rounded, TRUE, rounded, alloc, error))
    return TRUE;
  /* the size the slot was asked for, then the step and the bytes of its driver call */
  alloc_error_prefix (error, size);
  return FALSE;
}

gboolean
_vmm_map_imported (VmmResource *self, const CUmemGenericAllocationHandle *handles,
                   const gsize *sizes, gsize n, gsize size, MemresAllocation *alloc, GError **error)
{
  VmmBuffer *buf = g_new0 (VmmBuffer, 1);
  gsize total = 0;

  buf->chunks = g_new (VmmChunk, n);
  buf->chunks_cap = n;
  for (gsize i = 0; i < n; i++)
    {
      buf->chunks[i].handle = handles[i];
      buf->chunks[i].offset = total;
      buf->chunks[i].size = sizes[i];
      total += sizes[i];
    }
  buf->n_chunks = n;
  return vmm_place (self, buf, total, total, FALSE, size, alloc, error);
}

/* Keeps the first failure of a teardown in *@first; `CUDA_ERROR_DEINITIALIZED` is none (the
 * driver shut down at process exit: release.h). */
static void
vmm_note_failure (GError **first, CUresult res, const char *call)
{
  if (*first == NULL)
    (void) release_result (first, res, call);
}

/* _vmm_deallocate: the deallocate slot. The core waited for @stream (vmm memory is not
 * stream-ordered: see the deallocate slot in memres-plugin.h). One reservation at a time, unmaps
 * it (cuMemUnmap) and frees it with its exact range (cuMemAddressFree), then releases every
 * physical handle (cuMemRelease). A failing step of that teardown does not stop
 * the others: everything that can be released is, only what the driver refused is left, the
 * first failure is reported, and @alloc's address is set to 0 (released: the core closes the
 * buffer). `CUDA_ERROR_DEINITIALIZED` is no failure: at process exit the driver took the memory
 * with it, and the close succeeds as for every kind. */
gboolean
_vmm_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  VmmBuffer *buf = alloc->plugin_data;
  GError *first = NULL;
  CUresult res;

  gint64 held = 0;

  /* the teardown is not undone once begun: the segment goes whatever fails below (a sleeping
   * buffer's went at its sleep: nothing is mapped under it) */
  if (!buf->asleep)
    _vmm_raise (self, buf, MEMRES_SEGMENT_UNMAPPING, buf->base, buf->mapped);
  for (gsize i = 0; i < buf->n_ranges; i++)
    {
      const VmmRange *r = &buf->ranges[i];
      gsize from = r->ptr - buf->base;
      gsize to = buf->asleep ? from : MIN (buf->mapped, from + r->size);

      if (from < to && (res = self->drv->cuMemUnmap (r->ptr, to - from)) != CUDA_SUCCESS)
        {
          vmm_note_failure (&first, res, "cuMemUnmap");
          continue; /* the driver frees no reservation that holds a mapping */
        }
      if ((res = self->drv->cuMemAddressFree (r->ptr, r->size)) != CUDA_SUCCESS)
        vmm_note_failure (&first, res, "cuMemAddressFree");
    }
  for (gsize i = 0; i < buf->n_chunks; i++)
    {
      if (buf->asleep && buf->chunks[i].handle == 0) /* released at the sleep */
        continue;
      held += (gint64) buf->chunks[i].size;
      if ((res = self->drv->cuMemRelease (buf->chunks[i].handle)) != CUDA_SUCCESS)
        vmm_note_failure (&first, res, "cuMemRelease");
    }

  _vmm_buffer_update (self, buf, 0, VMM_BUFFER_REMOVED,
                      buf->asleep ? -held : -(gint64) buf->mapped);
  vmm_buffer_free (buf);
  alloc->plugin_data = NULL;
  if (first != NULL)
    {
      alloc->address = 0;
      g_propagate_error (error, first);
      return FALSE;
    }
  return TRUE;
}

static void
vmm_keep_stray (VmmResource *self, const VmmRange *r)
{
  g_mutex_lock (&self->stats_lock);
  if (self->strays == NULL)
    g_atomic_pointer_set (&self->strays, g_array_new (FALSE, FALSE, sizeof (VmmRange)));
  g_array_append_val (self->strays, *r);
  g_mutex_unlock (&self->stats_lock);
}

void
_vmm_free_strays (VmmResource *self)
{
  g_mutex_lock (&self->stats_lock);
  for (guint i = 0; self->strays != NULL && i < self->strays->len;)
    {
      const VmmRange *r = &g_array_index (self->strays, VmmRange, i);

      if (self->drv->cuMemAddressFree (r->ptr, r->size) == CUDA_SUCCESS)
        g_array_remove_index_fast (self->strays, i);
      else
        i++;
    }
  g_mutex_unlock (&self->stats_lock);
}

/* Maps new chunks after the buffer's mapped bytes up to @new_size, into its reservations, or
 * into the address range right after them, which it reserves. When that range is taken (the
 * driver reserved elsewhere, or refused the reservation with any error), returns FALSE with
 * *@taken set (no error, nothing changed): the caller moves the buffer. */
static gboolean
vmm_grow_in_place (VmmResource *self, VmmBuffer *buf, gsize new_size, gboolean *taken,
                   GError **error)
{
  gsize first = buf->n_chunks;
  gboolean extended = FALSE;
  VmmSpace space;

  *taken = FALSE;
  if (!_vmm_reserve_ranges (buf, 1, error))
    return FALSE;
  if (new_size > buf->reserved)
    {
      CUdeviceptr hint = buf->base + buf->reserved;
      VmmRange extra = { 0, new_size - buf->reserved };

      /* The hint is only a wish: a driver that cannot reserve there may say so with an
       * error rather than another address. Either way the buffer moves (the move reserves
       * anywhere, and reports the driver's error if it cannot reserve at all). */
      if (self->drv->cuMemAddressReserve (&extra.ptr, extra.size, self->granularity, hint, 0)
          != CUDA_SUCCESS)
        {
          *taken = TRUE;
          return FALSE;
        }
      if (extra.ptr != hint)
        {
          /* The range after the buffer is taken: the caller moves the buffer. A stray
           * reservation the driver will not free now is kept for later, not lost. */
          if (self->drv->cuMemAddressFree (extra.ptr, extra.size) != CUDA_SUCCESS)
            vmm_keep_stray (self, &extra);
          *taken = TRUE;
          return FALSE;
        }
      buf->ranges[buf->n_ranges++] = extra;
      extended = TRUE;
    }

  space = _vmm_space_of (buf);
  if (!_vmm_create_chunks (self, buf, space, new_size, error))
    goto fail;
  if (!_vmm_grant (self, space, buf->mapped, new_size, error))
    {
      _vmm_destroy_chunks (self, buf, space, first);
      goto fail;
    }
  if (extended)
    buf->reserved += buf->ranges[buf->n_ranges - 1].size;
  _vmm_raise (self, buf, buf->mapped > 0 ? MEMRES_SEGMENT_GROWN : MEMRES_SEGMENT_MAPPED, buf->base,
              new_size);
  buf->mapped = new_size;
  return TRUE;

fail:
  if (extended)
    {
      buf->n_ranges--;
      _vmm_address_free_or_warn (self, buf->ranges[buf->n_ranges].ptr,
                                 buf->ranges[buf->n_ranges].size);
    }
  return FALSE;
}

/* Moves @buf into a new reservation of max(new_size, reserve) bytes: maps its physical memory
 * there as well (no copy), creates and maps the new chunks, grants access to the whole new range,
 * then, once @stream is idle, unmaps and frees the old range. */
static gboolean
vmm_grow_by_move (VmmResource *self, VmmBuffer *buf, gsize new_size, MemresStream stream,
                  GError **error)
{
  gsize first = buf->n_chunks;
  VmmRange range = { 0, MAX (new_size, self->reserve) };
  VmmSpace space = { &range, 1 };

  if (!_vmm_address_reserve (self, range.size, 0, &range.ptr, error))
    return FALSE;
  if (!_vmm_map_chunks (self, buf, space, 0, first, error))
    goto fail_range;
  if (!_vmm_create_chunks (self, buf, space, new_size, error))
    goto fail_old_chunks;
  if (!_vmm_grant (self, space, 0, new_size, error))
    goto fail_new_chunks;

  /* The old addresses go away. */
  if (!memres_cuda_stream_synchronize (self->device, stream, error))
    goto fail_new_chunks;
  _vmm_raise (self, buf, MEMRES_SEGMENT_UNMAPPING, buf->base, buf->mapped);
  if (!_vmm_unmap (self, buf, 0, buf->mapped, error))
    goto fail_still_mapped;
  if (!_vmm_free_ranges (self, buf, error))
    {
      _vmm_remap_or_warn (self, buf, 0, buf->mapped);
      goto fail_still_mapped;
    }

  buf->ranges[0] = range;
  buf->n_ranges = 1;
  buf->base = range.ptr;
  buf->reserved = range.size;
  buf->mapped = new_size;
  _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, new_size);
  return TRUE;

fail_still_mapped:
  /* the old range is mapped again (_vmm_unmap() and _vmm_remap_or_warn() put it back) */
  _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, buf->mapped);

fail_new_chunks:
  _vmm_destroy_chunks (self, buf, space, first);
fail_old_chunks:
  _vmm_unmap_or_warn (self, space, 0, buf->mapped);
fail_range:
  _vmm_address_free_or_warn (self, range.ptr, range.size);
  return FALSE;
}

/* After a shrink failed half-way, the bytes [from, buf->mapped) lost their memory: maps new
 * memory there, so that the buffer keeps its size (those bytes were being dropped anyway). */
static void
vmm_replace_lost_or_warn (VmmResource *self, VmmBuffer *buf, gsize from)
{
  g_autoptr (GError) error = NULL;
  gsize end = buf->mapped;
  VmmSpace space = _vmm_space_of (buf);

  buf->n_chunks = _vmm_chunk_index (buf, from);
  buf->mapped = from;
  if (!_vmm_create_chunks (self, buf, space, end, &error))
    goto fail;
  if (!_vmm_grant (self, space, from, end, &error))
    {
      _vmm_destroy_chunks (self, buf, space, buf->n_chunks);
      goto fail;
    }
  buf->mapped = end;
  return;

fail:
  memres_cuda_warn_release_failure (error,
                                    "vmm: a buffer lost %" G_GSIZE_FORMAT
                                    " bytes of memory after offset %" G_GSIZE_FORMAT
                                    " while rolling back a failure",
                                    end - from, from);
}

/* Releases the chunks that start at or beyond @new_size bytes. The handles are released first,
 * while still mapped (the mappings keep the memory; a later failure takes the handles back from
 * them), then the tail is unmapped, which frees the memory, last reservation first. Only when
 * the tail spans several reservations and an unmap after the first fails is memory lost; it is
 * replaced with new memory. */
static gboolean
vmm_shrink (VmmResource *self, VmmBuffer *buf, gsize new_size, MemresStream stream, GError **error)
{
  gsize keep = _vmm_chunk_index (buf, new_size);
  gsize tail, stop;
  CUresult res;

  if (keep == buf->n_chunks)
    return TRUE;
  tail = buf->chunks[keep].offset;
  if (!memres_cuda_stream_synchronize (self->device, stream, error))
    return FALSE;

  /* the segment is unmapped and, at its new length, mapped again */
  _vmm_raise (self, buf, MEMRES_SEGMENT_UNMAPPING, buf->base, buf->mapped);
  for (gsize i = keep; i < buf->n_chunks; i++)
    {
      res = self->drv->cuMemRelease (buf->chunks[i].handle);
      if (res != CUDA_SUCCESS)
        {
          _vmm_retain_chunks_or_warn (self, buf, keep, i);
          _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, buf->mapped);
          return memres_cuda_set_error (error, res, "cuMemRelease");
        }
    }

  res = _vmm_space_apply (self, _vmm_space_of (buf), VMM_UNMAP, tail, buf->mapped, TRUE, &stop);
  if (res == CUDA_SUCCESS)
    {
      buf->n_chunks = keep;
      buf->mapped = tail;
      _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, tail);
      return TRUE;
    }
  _vmm_retain_chunks_or_warn (self, buf, keep, _vmm_chunk_index (buf, stop));
  if (stop < buf->mapped)
    vmm_replace_lost_or_warn (self, buf, stop);
  /* mapped as before, or up to where new memory could not replace the lost (warned) */
  _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, buf->mapped);
  return memres_cuda_set_error (error, res, "cuMemUnmap");
}

/* _vmm_resize: the resize slot. Growing maps new chunks after the buffer: in place when the
 * buffer's reservations have room or the address range right after them can be reserved,
 * otherwise in a new reservation that the existing physical memory is mapped into as well (no
 * copy), after which the old range is unmapped and freed (the address changes). Shrinking
 * releases the chunks that lie wholly beyond the new size; the address range stays reserved
 * (even at size 0), so that the buffer grows back in place. Anything unmapped is unmapped only
 * after @stream is idle. On failure @alloc and the driver are left as they were. */
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
  if (buf->imported)
    {
      /* the core refuses first; the chunks are another process's, sized by its options */
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "vmm: a buffer imported from another process cannot be resized");
      return FALSE;
    }

  if (!vmm_round_size (self, new_size, &rounded, error))
    return FALSE;
  if (G_UNLIKELY (g_atomic_pointer_get (&self->strays) != NULL))
    _vmm_free_strays (self);

  old_mapped = buf->mapped;
  if (rounded > buf->mapped)
    {
      if (!vmm_grow_in_place (self, buf, rounded, &taken, error)
          && (!taken || !vmm_grow_by_move (self, buf, rounded, stream, error)))
        {
          g_prefix_error (error,
                          "cannot grow a buffer of %" G_GSIZE_FORMAT " bytes to %" G_GSIZE_FORMAT
                          " bytes: ",
                          alloc->size, new_size);
          return FALSE;
        }
    }
  else if (rounded < alloc->size && !vmm_shrink (self, buf, rounded, stream, error))
    return FALSE;

  _vmm_buffer_update (self, buf, rounded, VMM_BUFFER_CHANGED,
                      (gint64) buf->mapped - (gint64) old_mapped);
  alloc->address = buf->base;
  alloc->size = rounded;
  return TRUE;
}

/* memres - CUDA memory resources
 * vmm-buffer.c: buffers of the `vmm` kind: allocation, close, growth and shrinking.
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

/* A call failed while undoing a failed operation: nothing else can be done about it. */
static void
vmm_warn_leak (CUresult res, const char *call)
{
  vmm_warn_call_failed (res, call, "rolling back a failure");
}

/* A driver call of an allocation or growth failed: memres_cuda_set_error()'s error (the call and
 * the CUresult; MEMRES_ERROR_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY) after what was being
 * done and the bytes the call asked for: "@doing @bytes bytes@what: " ("reserving 4194304 bytes
 * of address space: cuMemAddressReserve: ..."). Returns FALSE. */
static gboolean
vmm_call_failed (GError **error, CUresult res, const char *call, const char *doing, gsize bytes,
                 const char *what)
{
  memres_cuda_set_error (error, res, call);
  g_prefix_error (error, "%s %" G_GSIZE_FORMAT " bytes%s: ", doing, bytes, what);
  return FALSE;
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

/* Makes room for @n_more entries after the @n used ones of an array of @elt_size-byte
 * entries. */
static gboolean
vmm_array_reserve (gpointer *array, gsize *cap, gsize n, gsize n_more, gsize elt_size,
                   GError **error)
{
  gsize want;
  gpointer grown = NULL;

  if (n_more <= *cap - n)
    return TRUE;
  if (n_more <= G_MAXSIZE / elt_size - n)
    {
      want = MAX (n + n_more, MIN (*cap * 2, G_MAXSIZE / elt_size));
      grown = g_try_realloc (*array, want * elt_size);
    }
  if (grown == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "vmm: cannot track %" G_GSIZE_FORMAT " more chunks or reservations", n_more);
      return FALSE;
    }
  *array = grown;
  *cap = want;
  return TRUE;
}

/* Room for the chunks of @bytes more memory (one more per reservation boundary crossed). */
static gboolean
vmm_reserve_chunks (VmmResource *self, VmmBuffer *buf, gsize bytes, GError **error)
{
  gsize n_more = bytes / self->chunk + 1 + buf->n_ranges;

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

/* --- address space --------------------------------------------------------------------------- */

/* Adjacent reservations in address order; offsets count from the first one's start. */
typedef struct
{
  const VmmRange *ranges;
  gsize n_ranges;
} VmmSpace;

static VmmSpace
vmm_space_of (const VmmBuffer *buf)
{
  return (VmmSpace){ buf->ranges, buf->n_ranges };
}

/* Applies @op to the bytes [start, end) of @space, one driver call per reservation they lie in,
 * in address order (from the end when @backwards). Returns the first failure; *@stop then says
 * how far the calls got: [start, *stop) is done (with @backwards: [*stop, end)). */
static CUresult
vmm_space_apply (VmmResource *self, VmmSpace space, VmmSpanOp op, gsize start, gsize end,
                 gboolean backwards, gsize *stop)
{
  CUdeviceptr base = space.ranges[0].ptr;

  for (gsize k = 0; k < space.n_ranges && start < end; k++)
    {
      const VmmRange *r = &space.ranges[backwards ? space.n_ranges - 1 - k : k];
      gsize from = MAX (start, r->ptr - base);
      gsize to = MIN (end, r->ptr - base + r->size);
      CUresult res;

      if (from >= to)
        continue;
      if (op == VMM_UNMAP)
        res = self->drv->cuMemUnmap (base + from, to - from);
      else
        res = self->drv->cuMemSetAccess (base + from, to - from, self->access, self->n_access);
      if (res != CUDA_SUCCESS)
        {
          *stop = backwards ? end : start;
          return res;
        }
      if (backwards)
        end = from;
      else
        start = to;
    }
  *stop = backwards ? end : start;
  return CUDA_SUCCESS;
}

CUresult
_vmm_buffer_apply (VmmResource *self, const VmmBuffer *buf, VmmSpanOp op, gsize start, gsize end,
                   gsize *stop)
{
  return vmm_space_apply (self, vmm_space_of (buf), op, start, end, FALSE, stop);
}

/* Grants the owner, the host location and the peers access to the mapped bytes [start, end). */
static gboolean
vmm_grant (VmmResource *self, VmmSpace space, gsize start, gsize end, GError **error)
{
  gsize stop;
  CUresult res = vmm_space_apply (self, space, VMM_GRANT, start, end, FALSE, &stop);

  if (res != CUDA_SUCCESS)
    return vmm_call_failed (error, res, "cuMemSetAccess", "granting access to", end - start, "");
  return TRUE;
}

static void
vmm_unmap_or_warn (VmmResource *self, VmmSpace space, gsize start, gsize end)
{
  gsize stop;
  CUresult res = vmm_space_apply (self, space, VMM_UNMAP, start, end, FALSE, &stop);

  if (res != CUDA_SUCCESS)
    vmm_warn_leak (res, "cuMemUnmap");
}

static gboolean
vmm_address_reserve (VmmResource *self, gsize size, CUdeviceptr hint, CUdeviceptr *ptr,
                     GError **error)
{
  CUresult res = self->drv->cuMemAddressReserve (ptr, size, self->granularity, hint, 0);

  if (res != CUDA_SUCCESS)
    return vmm_call_failed (error, res, "cuMemAddressReserve", "reserving", size,
                            " of address space");
  return TRUE;
}

static void
vmm_address_free_or_warn (VmmResource *self, CUdeviceptr ptr, gsize size)
{
  CUresult res = self->drv->cuMemAddressFree (ptr, size);

  if (res != CUDA_SUCCESS)
    vmm_warn_leak (res, "cuMemAddressFree");
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

/* Frees the reservations of @buf, which hold no mapping. On failure reserves the ones already
 * freed again, so the reservations are as they were. */
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
          return memres_cuda_set_error (error, res, "cuMemAddressFree");
        }
    }
  return TRUE;
}

/* --- physical memory ------------------------------------------------------------------------- */

/* The index of the first chunk that starts at or after @offset (n_chunks when none does). */
static gsize
vmm_chunk_index (const VmmBuffer *buf, gsize offset)
{
  gsize lo = 0, hi = buf->n_chunks;

  while (lo < hi)
    {
      gsize mid = lo + (hi - lo) / 2;

      if (buf->chunks[mid].offset < offset)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static gsize
vmm_chunks_end (const VmmBuffer *buf)
{
  const VmmChunk *last = buf->n_chunks > 0 ? &buf->chunks[buf->n_chunks - 1] : NULL;

  return last != NULL ? last->offset + last->size : 0;
}

/* Maps the existing chunks [first, last) of @buf at their offsets in @space. On failure unmaps
 * what it mapped. */
static gboolean
vmm_map_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space, gsize first, gsize last,
                GError **error)
{
  CUdeviceptr base = space.ranges[0].ptr;

  for (gsize i = first; i < last; i++)
    {
      const VmmChunk *c = &buf->chunks[i];
      CUresult res = self->drv->cuMemMap (base + c->offset, c->size, 0, c->handle, 0);

      if (res != CUDA_SUCCESS)
        {
          vmm_unmap_or_warn (self, space, buf->chunks[first].offset, c->offset);
          return vmm_call_failed (error, res, "cuMemMap", "mapping", c->size, "");
        }
    }
  return TRUE;
}

/* Releases the handles of the chunks [first, n_chunks), newest first, and forgets them. */
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

/* Takes back the handles of the chunks [first, last), released while still mapped. */
static void
vmm_retain_chunks_or_warn (VmmResource *self, VmmBuffer *buf, gsize first, gsize last)
{
  for (gsize i = first; i < last; i++)
    {
      VmmChunk *c = &buf->chunks[i];
      CUresult res = self->drv->cuMemRetainAllocationHandle (
          &c->handle, (void *) (guintptr) (buf->base + c->offset));

      if (res != CUDA_SUCCESS)
        vmm_warn_leak (res, "cuMemRetainAllocationHandle");
    }
}

/* Creates the physical memory for the bytes [buf->mapped, @end) of @space in chunks of at most
 * the resource's chunk size, none across a reservation boundary, and maps each one at its offset.
 * Appends the chunks to @buf (the caller made room for them) and leaves buf->mapped alone. On
 * failure releases what it created, leaving @buf as it was. Per chunk: one cuMemCreate and one
 * cuMemMap, nothing else. */
static gboolean
vmm_create_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space, gsize end, GError **error)
{
  CUdeviceptr base = space.ranges[0].ptr;
  gsize first = buf->n_chunks;
  gsize offset = buf->mapped;
  gsize r = 0;
  const char *call = NULL, *doing = NULL, *what = "";
  CUresult res = CUDA_SUCCESS;
  gsize bytes;

  while (offset < end)
    {
      VmmChunk *c = &buf->chunks[buf->n_chunks];
      gsize range_end;

      while (space.ranges[r].ptr - base + space.ranges[r].size <= offset)
        r++;
      range_end = space.ranges[r].ptr - base + space.ranges[r].size;
      c->offset = offset;
      c->size = MIN (MIN (self->chunk, end - offset), range_end - offset);
      res = self->drv->cuMemCreate (&c->handle, c->size, &self->prop, 0);
      if (res != CUDA_SUCCESS)
        {
          call = "cuMemCreate";
          doing = "creating";
          what = " of physical memory";
          break;
        }
      res = self->drv->cuMemMap (base + offset, c->size, 0, c->handle, 0);
      if (res != CUDA_SUCCESS)
        {
          CUresult res2 = self->drv->cuMemRelease (c->handle);

          if (res2 != CUDA_SUCCESS)
            vmm_warn_leak (res2, "cuMemRelease");
          call = "cuMemMap";
          doing = "mapping";
          break;
        }
      buf->n_chunks++;
      offset += c->size;
    }
  if (call == NULL)
    return TRUE;

  bytes = buf->chunks[buf->n_chunks].size; /* the chunk that failed, not counted */
  vmm_unmap_or_warn (self, space, buf->mapped, offset);
  vmm_release_chunks_or_warn (self, buf, first);
  return vmm_call_failed (error, res, call, doing, bytes, what);
}

/* Undoes vmm_create_chunks() after it succeeded: unmaps the chunks [first, n_chunks) from
 * @space and releases them. */
static void
vmm_destroy_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space, gsize first)
{
  if (first < buf->n_chunks)
    vmm_unmap_or_warn (self, space, buf->chunks[first].offset, vmm_chunks_end (buf));
  vmm_release_chunks_or_warn (self, buf, first);
}

/* Maps the chunks of @buf in the bytes [start, end) where they were and grants access again:
 * undoes vmm_unmap(). */
static void
vmm_remap_or_warn (VmmResource *self, VmmBuffer *buf, gsize start, gsize end)
{
  g_autoptr (GError) error = NULL;
  VmmSpace space = vmm_space_of (buf);

  if (!vmm_map_chunks (self, buf, space, vmm_chunk_index (buf, start), vmm_chunk_index (buf, end),
                       &error)
      || !vmm_grant (self, space, start, end, &error))
    memres_cuda_warn_release_failure (error, "vmm: mapping a buffer again while rolling back a "
                                             "failure");
}

/* Unmaps the bytes [start, end) of @buf, whose handles are held. On failure maps back what was
 * unmapped. */
static gboolean
vmm_unmap (VmmResource *self, VmmBuffer *buf, gsize start, gsize end, GError **error)
{
  gsize stop;
  CUresult res = vmm_space_apply (self, vmm_space_of (buf), VMM_UNMAP, start, end, FALSE, &stop);

  if (res == CUDA_SUCCESS)
    return TRUE;
  if (stop > start)
    vmm_remap_or_warn (self, buf, start, stop);
  return memres_cuda_set_error (error, res, "cuMemUnmap");
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

  if (!vmm_reserve_ranges (buf, 1, error)
      || !vmm_address_reserve (self, range.size, 0, &range.ptr, error))
    goto fail;
  buf->ranges[buf->n_ranges++] = range;
  buf->base = range.ptr;
  buf->reserved = range.size;

  space = vmm_space_of (buf);
  if (create ? !vmm_create_chunks (self, buf, space, mapped, error)
             : !vmm_map_chunks (self, buf, space, 0, buf->n_chunks, error))
    goto fail_range;
  if (!vmm_grant (self, space, 0, mapped, error))
    {
      if (create)
        vmm_destroy_chunks (self, buf, space, 0);
      else
        vmm_unmap_or_warn (self, space, 0, mapped);
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
  vmm_address_free_or_warn (self, range.ptr, range.size);
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
  if (!vmm_reserve_chunks (self, buf, rounded, error))
    vmm_buffer_free (buf);
  else if (vmm_place (self, buf, MAX (rounded, self->reserve), rounded, TRUE, rounded, alloc,
                      error))
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
  if (!vmm_reserve_ranges (buf, 1, error)
      || !vmm_reserve_chunks (self, buf, new_size - buf->mapped, error))
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

  space = vmm_space_of (buf);
  if (!vmm_create_chunks (self, buf, space, new_size, error))
    goto fail;
  if (!vmm_grant (self, space, buf->mapped, new_size, error))
    {
      vmm_destroy_chunks (self, buf, space, first);
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
      vmm_address_free_or_warn (self, buf->ranges[buf->n_ranges].ptr,
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

  if (!vmm_reserve_chunks (self, buf, new_size - buf->mapped, error)
      || !vmm_address_reserve (self, range.size, 0, &range.ptr, error))
    return FALSE;
  if (!vmm_map_chunks (self, buf, space, 0, first, error))
    goto fail_range;
  if (!vmm_create_chunks (self, buf, space, new_size, error))
    goto fail_old_chunks;
  if (!vmm_grant (self, space, 0, new_size, error))
    goto fail_new_chunks;

  /* The old addresses go away. */
  if (!memres_cuda_stream_synchronize (self->device, stream, error))
    goto fail_new_chunks;
  _vmm_raise (self, buf, MEMRES_SEGMENT_UNMAPPING, buf->base, buf->mapped);
  if (!vmm_unmap (self, buf, 0, buf->mapped, error))
    goto fail_still_mapped;
  if (!vmm_free_ranges (self, buf, error))
    {
      vmm_remap_or_warn (self, buf, 0, buf->mapped);
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
  /* the old range is mapped again (vmm_unmap() and vmm_remap_or_warn() put it back) */
  _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, buf->mapped);

fail_new_chunks:
  vmm_destroy_chunks (self, buf, space, first);
fail_old_chunks:
  vmm_unmap_or_warn (self, space, 0, buf->mapped);
fail_range:
  vmm_address_free_or_warn (self, range.ptr, range.size);
  return FALSE;
}

/* After a shrink failed half-way, the bytes [from, buf->mapped) lost their memory: maps new
 * memory there, so that the buffer keeps its size (those bytes were being dropped anyway). */
static void
vmm_replace_lost_or_warn (VmmResource *self, VmmBuffer *buf, gsize from)
{
  g_autoptr (GError) error = NULL;
  gsize end = buf->mapped;
  VmmSpace space = vmm_space_of (buf);

  buf->n_chunks = vmm_chunk_index (buf, from);
  buf->mapped = from;
  if (!vmm_reserve_chunks (self, buf, end - from, &error)
      || !vmm_create_chunks (self, buf, space, end, &error))
    goto fail;
  if (!vmm_grant (self, space, from, end, &error))
    {
      vmm_destroy_chunks (self, buf, space, buf->n_chunks);
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
  gsize keep = vmm_chunk_index (buf, new_size);
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
          vmm_retain_chunks_or_warn (self, buf, keep, i);
          _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, buf->mapped);
          return memres_cuda_set_error (error, res, "cuMemRelease");
        }
    }

  res = vmm_space_apply (self, vmm_space_of (buf), VMM_UNMAP, tail, buf->mapped, TRUE, &stop);
  if (res == CUDA_SUCCESS)
    {
      buf->n_chunks = keep;
      buf->mapped = tail;
      _vmm_raise (self, buf, MEMRES_SEGMENT_MAPPED, buf->base, tail);
      return TRUE;
    }
  vmm_retain_chunks_or_warn (self, buf, keep, vmm_chunk_index (buf, stop));
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

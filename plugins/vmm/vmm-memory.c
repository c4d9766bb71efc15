/* memres - CUDA memory resources
 * vmm-memory.c: the address space and the physical memory of `vmm` buffers, the steps the slots
 * of vmm-buffer.c (allocation, close, growth and shrinking) and vmm-sleep.c are made of:
 * reservations (adjacent ones, reserved again at their address to undo a free), chunks of
 * physical memory (created, mapped, released, retained again from their mapping), unmapping and
 * granting access one driver call per reservation. Each step that fails leaves what it found:
 * it undoes its own part before it returns. The rules they keep are vmm-buffer.c's. */
#include "vmm-private.h"

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

gboolean
_vmm_reserve_ranges (VmmBuffer *buf, gsize n_more, GError **error)
{
  return vmm_array_reserve ((gpointer *) &buf->ranges, &buf->ranges_cap, buf->n_ranges, n_more,
                            sizeof (VmmRange), error);
}

/* --- address space --------------------------------------------------------------------------- */

VmmSpace
_vmm_space_of (const VmmBuffer *buf)
{
  return (VmmSpace){ buf->ranges, buf->n_ranges };
}

/* Applies @op to the bytes [start, end) of @space, one driver call per reservation they lie in,
 * in address order (from the end when @backwards). Returns the first failure; *@stop then says
 * how far the calls got: [start, *stop) is done (with @backwards: [*stop, end)). */
CUresult
_vmm_space_apply (VmmResource *self, VmmSpace space, VmmSpanOp op, gsize start, gsize end,
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
  return _vmm_space_apply (self, _vmm_space_of (buf), op, start, end, FALSE, stop);
}

/* Grants the owner, the host location and the peers access to the mapped bytes [start, end). */
gboolean
_vmm_grant (VmmResource *self, VmmSpace space, gsize start, gsize end, GError **error)
{
  gsize stop;
  CUresult res = _vmm_space_apply (self, space, VMM_GRANT, start, end, FALSE, &stop);

  if (res != CUDA_SUCCESS)
    return vmm_call_failed (error, res, "cuMemSetAccess", "granting access to", end - start, "");
  return TRUE;
}

void
_vmm_unmap_or_warn (VmmResource *self, VmmSpace space, gsize start, gsize end)
{
  gsize stop;
  CUresult res = _vmm_space_apply (self, space, VMM_UNMAP, start, end, FALSE, &stop);

  if (res != CUDA_SUCCESS)
    vmm_warn_leak (res, "cuMemUnmap");
}

gboolean
_vmm_address_reserve (VmmResource *self, gsize size, CUdeviceptr hint, CUdeviceptr *ptr,
                      GError **error)
{
  CUresult res = self->drv->cuMemAddressReserve (ptr, size, self->granularity, hint, 0);

  if (res != CUDA_SUCCESS)
    return vmm_call_failed (error, res, "cuMemAddressReserve", "reserving", size,
                            " of address space");
  return TRUE;
}

void
_vmm_address_free_or_warn (VmmResource *self, CUdeviceptr ptr, gsize size)
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
      _vmm_address_free_or_warn (self, ptr, r->size);
      return FALSE;
    }
  return TRUE;
}

/* Frees the reservations of @buf, which hold no mapping. On failure reserves the ones already
 * freed again, so the reservations are as they were. */
gboolean
_vmm_free_ranges (VmmResource *self, VmmBuffer *buf, GError **error)
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
gsize
_vmm_chunk_index (const VmmBuffer *buf, gsize offset)
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
gboolean
_vmm_map_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space, gsize first, gsize last,
                 GError **error)
{
  CUdeviceptr base = space.ranges[0].ptr;

  for (gsize i = first; i < last; i++)
    {
      const VmmChunk *c = &buf->chunks[i];
      CUresult res = self->drv->cuMemMap (base + c->offset, c->size, 0, c->handle, 0);

      if (res != CUDA_SUCCESS)
        {
          _vmm_unmap_or_warn (self, space, buf->chunks[first].offset, c->offset);
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
void
_vmm_retain_chunks_or_warn (VmmResource *self, VmmBuffer *buf, gsize first, gsize last)
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
 * Appends the chunks to @buf, its table grown as they come (never sized by the request: a request
 * far beyond any memory, 1 PiB or 8 EiB, fails at the driver, where a table sized by it was
 * 96 TiB for 8 EiB, which meson's MALLOC_PERTURB_ made malloc write whole on a host that
 * overcommits, until the OOM killer ended the test), and leaves buf->mapped alone. On failure
 * releases what it created, leaving @buf as it was (its table perhaps larger). Per chunk: one
 * cuMemCreate and one cuMemMap, nothing else. */
gboolean
_vmm_create_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space, gsize end, GError **error)
{
  CUdeviceptr base = space.ranges[0].ptr;
  gsize first = buf->n_chunks;
  gsize offset = buf->mapped;
  gsize r = 0;
  const char *call = NULL, *doing = NULL, *what = "";
  CUresult res = CUDA_SUCCESS;
  GError *grow = NULL;
  gsize bytes;

  while (offset < end)
    {
      VmmChunk *c;
      gsize range_end;

      if (!vmm_array_reserve ((gpointer *) &buf->chunks, &buf->chunks_cap, buf->n_chunks, 1,
                              sizeof (VmmChunk), &grow))
        break;
      c = &buf->chunks[buf->n_chunks];

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
  if (call == NULL && grow == NULL)
    return TRUE;

  /* the chunk that failed, not counted */
  bytes = grow == NULL ? buf->chunks[buf->n_chunks].size : 0;
  _vmm_unmap_or_warn (self, space, buf->mapped, offset);
  vmm_release_chunks_or_warn (self, buf, first);
  if (grow != NULL)
    {
      g_propagate_error (error, grow);
      return FALSE;
    }
  return vmm_call_failed (error, res, call, doing, bytes, what);
}

/* Undoes _vmm_create_chunks() after it succeeded: unmaps the chunks [first, n_chunks) from
 * @space and releases them. */
void
_vmm_destroy_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space, gsize first)
{
  if (first < buf->n_chunks)
    _vmm_unmap_or_warn (self, space, buf->chunks[first].offset, vmm_chunks_end (buf));
  vmm_release_chunks_or_warn (self, buf, first);
}

/* Maps the chunks of @buf in the bytes [start, end) where they were and grants access again:
 * undoes _vmm_unmap(). */
void
_vmm_remap_or_warn (VmmResource *self, VmmBuffer *buf, gsize start, gsize end)
{
  g_autoptr (GError) error = NULL;
  VmmSpace space = _vmm_space_of (buf);

  if (!_vmm_map_chunks (self, buf, space, _vmm_chunk_index (buf, start),
                        _vmm_chunk_index (buf, end), &error)
      || !_vmm_grant (self, space, start, end, &error))
    memres_cuda_warn_release_failure (error, "vmm: mapping a buffer again while rolling back a "
                                             "failure");
}

/* Unmaps the bytes [start, end) of @buf, whose handles are held. On failure maps back what was
 * unmapped. */
gboolean
_vmm_unmap (VmmResource *self, VmmBuffer *buf, gsize start, gsize end, GError **error)
{
  gsize stop;
  CUresult res = _vmm_space_apply (self, _vmm_space_of (buf), VMM_UNMAP, start, end, FALSE, &stop);

  if (res == CUDA_SUCCESS)
    return TRUE;
  if (stop > start)
    _vmm_remap_or_warn (self, buf, start, stop);
  return memres_cuda_set_error (error, res, "cuMemUnmap");
}

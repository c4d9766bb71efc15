/* memres - CUDA memory resources
 * arena-export.c: the `arena` kind's exportable buffers (handle_type=posix_fd, or fabric) and
 * the buffers it imports from other processes, the two kinds of buffer that hold physical memory of
 * their own, outside the granule table.
 *
 * An exportable buffer (a request of more than max_block and at least export_min bytes, on a
 * resource made with handle_type=posix_fd) is one physical allocation of its own (cuMemCreate
 * with a POSIX-fd handle type, its size rounded up to the granularity) mapped at a reservation
 * of its own (cuMemAddressReserve, cuMemMap, cuMemSetAccess), as a `vmm` buffer is: no other
 * buffer ever lies in its granules, so its export (the export_chunks slot: one chunk, one fd of
 * cuMemExportToShareableHandle(); with handle_type=fabric where the driver grants it, the
 * export_fabric_chunks slot: one chunk, its fabric handle's bytes) shows another process this
 * buffer's bytes and nothing else.
 * Its memory is never an idle granule that the arena moves to back another buffer: a close waits
 * for the stream (the close is stream-ordered; the memory goes back to the driver, not to the
 * arena), unmaps it and releases it, so a process that imported it keeps its own reference to
 * those bytes and never sees another buffer's in them. Each such buffer is one segment.
 *
 * An import (the import_chunks slot) maps the chunks of another arena's (or a `vmm`'s layout of
 * the same framing with kind "arena") message into one new reservation of this process with
 * this arena's access, and is one segment too.
 *
 * Both are told apart from the arena's other large buffers by their plugin data (an OwnBuf;
 * NULL for a heap extent) and are listed (Arena.owns) for the snapshot and finalize. Every
 * driver step is rolled back on failure. Lock: parts.lock guards the list and the counts only;
 * no driver call here is made under it. */
#include <unistd.h>

#include "arena-private.h"

#include "../common/alloc-error.h"
#include "../common/fabric.h"

static void
own_raise (Arena *self, MemresSegmentEvent event, const OwnBuf *own)
{
  MemresSegment seg = { 0 };
  g_autoptr (GError) error = NULL;

  seg.base = own->base;
  seg.length = own->bytes;
  seg.device = self->device;
  seg.handle_types = own->imported ? own->handle_type : self->own_prop.requestedHandleTypes;
  if (!memres_resource_raise_segment_event (self->mr, event, &seg, &error))
    g_warning ("arena: %s", error->message);
}

/* Counts @own in (@sign 1) or out (-1): listed, its physical bytes in the arena's (exportable
 * ones) or the imported bytes, the bytes handed out. */
static void
own_count (Arena *self, OwnBuf *own, gint sign)
{
  guint n = (guint) (own->bytes >> self->granule_shift);

  g_mutex_lock (&self->parts.lock);
  if (sign > 0)
    {
      LIST_PUSH (self->owns, own);
      if (own->imported)
        self->imported_bytes += own->bytes;
      else
        {
          self->n_mapped += n;
          self->mapped_high = MAX (self->mapped_high, self->n_mapped);
          self->own_used += own->used;
          arena_used_note (self);
          self->exportables++;
        }
    }
  else
    {
      LIST_UNLINK (self->owns, own);
      if (own->imported)
        self->imported_bytes -= own->bytes;
      else
        {
          self->n_mapped -= n;
          self->own_used -= own->used;
        }
    }
  g_mutex_unlock (&self->parts.lock);
}

/* Unmaps @own's mapping, frees its reservation, releases its handles. A failing unmap stops
 * there with nothing changed (FALSE, *@gone FALSE); after it every step is tried, the first
 * failure reported (FALSE, *@gone TRUE: the memory is no longer mapped). */
static gboolean
own_teardown (Arena *self, OwnBuf *own, gboolean *gone, GError **error)
{
  GError *first = NULL;
  CUresult r;

  *gone = FALSE;
  if ((r = self->drv->cuMemUnmap (own->base, own->bytes)) != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemUnmap");
  *gone = TRUE;
  if ((r = self->drv->cuMemAddressFree (own->base, own->bytes)) != CUDA_SUCCESS)
    memres_cuda_set_error (&first, r, "cuMemAddressFree");
  for (guint i = 0; i < own->n; i++)
    if ((r = self->drv->cuMemRelease (own->chunks[i].handle)) != CUDA_SUCCESS && first == NULL)
      memres_cuda_set_error (&first, r, "cuMemRelease");
  if (first == NULL)
    return TRUE;
  g_propagate_error (error, first);
  return FALSE;
}

/* Reserves @own->bytes of address space and maps its chunks there in order with the arena's
 * access. On failure nothing stays reserved or mapped (the handles stay the caller's). */
static gboolean
own_map (Arena *self, OwnBuf *own, GError **error)
{
  guint64 offset = 0;
  guint mapped = 0;
  CUresult r;

  r = self->drv->cuMemAddressReserve (&own->base, own->bytes, self->granularity, 0, 0);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuMemAddressReserve");
  for (; mapped < own->n; mapped++)
    {
      r = self->drv->cuMemMap (own->base + offset, own->chunks[mapped].size, 0,
                               own->chunks[mapped].handle, 0);
      if (r != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemMap");
          break;
        }
      offset += own->chunks[mapped].size;
    }
  if (mapped == own->n)
    {
      r = self->drv->cuMemSetAccess (own->base, own->bytes, &self->access, 1);
      if (r == CUDA_SUCCESS)
        return TRUE;
      memres_cuda_set_error (error, r, "cuMemSetAccess");
    }
  offset = 0;
  for (guint i = 0; i < mapped; offset += own->chunks[i++].size)
    if ((r = self->drv->cuMemUnmap (own->base + offset, own->chunks[i].size)) != CUDA_SUCCESS)
      g_warning ("arena: cuMemUnmap failed (%d) while rolling back a failure", r);
  if ((r = self->drv->cuMemAddressFree (own->base, own->bytes)) != CUDA_SUCCESS)
    g_warning ("arena: cuMemAddressFree failed (%d) while rolling back a failure", r);
  own->base = 0;
  return FALSE;
}

static OwnBuf *
own_new (guint n)
{
  OwnBuf *own = g_malloc0 (sizeof (OwnBuf) + n * sizeof (OwnChunk));

  own->n = n;
  return own;
}

static void
own_release_handles (Arena *self, const OwnBuf *own, guint n)
{
  for (guint i = n; i-- > 0;)
    {
      CUresult r = self->drv->cuMemRelease (own->chunks[i].handle);

      if (r != CUDA_SUCCESS)
        g_warning ("arena: cuMemRelease failed (%d) while rolling back a failure", r);
    }
}

/* An exportable buffer of @size bytes (more than max_block): its own physical memory, created
 * with a POSIX-fd handle type, at its own reservation. Out of memory, the arena's fronts and
 * idle slabs are flushed and its idle granules go back to the driver (they cannot back this
 * buffer), and it is tried once more. */
gboolean
arena_own_allocate (Arena *self, gsize size, MemresAllocation *alloc, GError **error)
{
  guint64 bytes = ((guint64) size + self->granularity - 1) & ~(guint64) (self->granularity - 1);
  OwnBuf *own = own_new (1);
  CUresult r;

  own->bytes = bytes;
  own->used = arena_round (size);
  own->chunks[0].size = bytes;
  r = self->drv->cuMemCreate (&own->chunks[0].handle, bytes, &self->own_prop, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    {
      gboolean ok;

      g_mutex_lock (&self->parts.lock);
      self->oom_flushes++;
      ok = arena_flush (self, NULL) && arena_release_idle (self, 0, NULL);
      g_mutex_unlock (&self->parts.lock);
      arena_events_flush (self);
      if (ok)
        r = self->drv->cuMemCreate (&own->chunks[0].handle, bytes, &self->own_prop, 0);
    }
  if (r != CUDA_SUCCESS)
    {
      g_free (own);
      memres_cuda_set_error (error, r, "cuMemCreate");
      alloc_error_prefix (error, size);
      return FALSE;
    }
  if (!own_map (self, own, error))
    {
      own_release_handles (self, own, 1);
      g_free (own);
      alloc_error_prefix (error, size);
      return FALSE;
    }
  own_count (self, own, 1);
  own_raise (self, MEMRES_SEGMENT_MAPPED, own);
  alloc->address = own->base;
  alloc->size = size;
  alloc->plugin_data = own;
  return TRUE;
}

/* The close of an exportable or imported buffer: after @stream's work (the close is
 * stream-ordered), its memory unmapped and given back. A failed wait or unmap leaves the buffer
 * as it was; a failure after the unmap reports it with the address set to 0 (released, as
 * `vmm` does: the core closes the buffer). */
gboolean
arena_own_free (Arena *self, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  OwnBuf *own = alloc->plugin_data;
  GError *local = NULL;
  gboolean gone;

  if (!memres_cuda_stream_synchronize (self->device, stream, error))
    return FALSE;
  own_raise (self, MEMRES_SEGMENT_UNMAPPING, own);
  if (!own_teardown (self, own, &gone, &local) && !gone)
    {
      own_raise (self, MEMRES_SEGMENT_MAPPED, own); /* the segment API's rule for a failed unmap */
      g_propagate_error (error, local);
      return FALSE;
    }
  own_count (self, own, -1);
  g_free (own);
  alloc->plugin_data = NULL;
  if (local != NULL)
    {
      alloc->address = 0;
      g_propagate_error (error, local);
      return FALSE;
    }
  return TRUE;
}

/* Finalize: the buffers still open given back, with a warning. */
void
arena_own_release_all (Arena *self)
{
  while (self->owns != NULL)
    {
      OwnBuf *own = self->owns;
      g_autoptr (GError) error = NULL;
      gboolean gone;

      LIST_UNLINK (self->owns, own);
      g_warning ("arena: a buffer of %" G_GUINT64_FORMAT " bytes of its own still open at "
                 "finalize",
                 own->bytes);
      if (!own_teardown (self, own, &gone, &error))
        memres_cuda_warn_release_failure (error, "arena: finalize");
      g_free (own);
    }
}

/* ---- the IPC slots --------------------------------------------------------------------------- */

/* Whether this arena exports and imports buffers as @type handles: made with handle_type=posix_fd
 * (or fabric fallen back to it), or with handle_type=fabric granted. */
static gboolean
check_type (Arena *self, CUmemAllocationHandleType type, const char *what, GError **error)
{
  return fabric_check_handle_type (
      "arena", self->exportable ? self->own_prop.requestedHandleTypes : CU_MEM_HANDLE_TYPE_NONE,
      type, what, error);
}

/* The export_chunks (@handles NULL) and export_fabric_chunks slots: an exportable buffer as its
 * one chunk, a new fd of cuMemExportToShareableHandle() or its fabric handle in @handles[0].
 * Other buffers share granules with their neighbours: refused. */
static gboolean
own_export (MemresResource *mr, const MemresAllocation *alloc, MemresBufferChunks *out,
            MemresFabricHandle *handles, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  OwnBuf *own = alloc->size > self->parts.max_block ? alloc->plugin_data : NULL;
  CUmemAllocationHandleType type
      = handles != NULL ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  gint fd = -1;
  CUresult r;

  if (!check_type (self, type, "export", error))
    return FALSE;
  if (own == NULL)
    {
      g_set_error (
          error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
          "arena: this buffer of %" G_GSIZE_FORMAT " bytes shares granules with other "
          "buffers and cannot be exported: only buffers of more than max_block (%" G_GSIZE_FORMAT
          " bytes) and at least export_min (%" G_GUINT64_FORMAT " bytes) get physical "
          "memory of their own",
          alloc->size, self->parts.max_block, self->export_min);
      return FALSE;
    }
  if (own->imported)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "arena: a buffer imported from another process cannot be exported again");
      return FALSE;
    }
  if (!memres_cuda_get_device_uuid (self->device, out->device_uuid, error))
    return FALSE;
  r = self->drv->cuMemExportToShareableHandle (
      handles != NULL ? (void *) handles[0].data : (void *) &fd, own->chunks[0].handle, type, 0);
  if (r != CUDA_SUCCESS)
    {
      memres_cuda_set_error (error, r, "cuMemExportToShareableHandle");
      g_prefix_error (error, "arena: exporting a buffer: ");
      return FALSE;
    }
  if (handles == NULL)
    out->fds[0] = fd;
  out->chunk_sizes[0] = own->bytes;
  out->handle_type = type;
  out->location_type = CU_MEM_LOCATION_TYPE_DEVICE;
  out->granularity = self->granularity;
  out->size = alloc->size;
  out->n_chunks = 1;
  g_mutex_lock (&self->parts.lock);
  own->exported = TRUE;
  self->exports++;
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

gboolean
arena_export_chunks (MemresResource *mr, const MemresAllocation *alloc, MemresBufferChunks *out,
                     GError **error)
{
  return own_export (mr, alloc, out, NULL, error);
}

gboolean
arena_export_fabric_chunks (MemresResource *mr, const MemresAllocation *alloc,
                            MemresBufferChunks *out, MemresFabricHandle *handles, GError **error)
{
  return own_export (mr, alloc, out, handles, error);
}

/* What only the arena knows about @in, checked before any driver call that creates something. */
static gboolean
check_import (Arena *self, const MemresBufferChunks *in, CUmemAllocationHandleType type,
              GError **error)
{
  gint device = -1;
  GError *local = NULL;

  if (!check_type (self, type, "import", error))
    return FALSE;
  if (in->handle_type != (guint32) type || in->location_type != CU_MEM_LOCATION_TYPE_DEVICE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "arena: invalid buffer layout: handle type %u, location type %u (expected "
                   "%s of device memory)",
                   in->handle_type, in->location_type,
                   type == CU_MEM_HANDLE_TYPE_FABRIC ? "fabric handles" : "POSIX file descriptors");
      return FALSE;
    }
  if (!memres_cuda_find_device_by_uuid (in->device_uuid, &device, &local))
    {
      if (g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE))
        g_prefix_error (&local, "arena: the buffer's memory belongs to no device here: ");
      g_propagate_error (error, local);
      return FALSE;
    }
  if (device != self->device)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE,
                   "arena: the buffer's memory belongs to device %d, the importer to device %d",
                   device, self->device);
      return FALSE;
    }
  for (guint i = 0; i < in->n_chunks; i++)
    if (in->chunk_sizes[i] % self->granularity != 0)
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                     "arena: invalid buffer layout: chunk %u of %u is %" G_GUINT64_FORMAT
                     " bytes, not a multiple of the importer's granularity (%" G_GSIZE_FORMAT
                     " bytes)",
                     i, in->n_chunks, in->chunk_sizes[i], self->granularity);
        return FALSE;
      }
  /* a close tells an arena's own buffers from its blocks by size (the fronts' hit path) */
  if (in->size <= self->parts.max_block)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "arena: a buffer of %" G_GUINT64_FORMAT " bytes is not imported by an arena "
                   "whose max_block is %" G_GSIZE_FORMAT " bytes (import it into an arena with a "
                   "smaller max_block)",
                   in->size, self->parts.max_block);
      return FALSE;
    }
  return TRUE;
}

/* The import_chunks (@fabric NULL) and import_fabric_chunks slots: each chunk imported
 * (cuMemImportFromShareableHandle, of its fd or of its fabric handle's bytes), all mapped into
 * one new reservation with the arena's access (own_map()). Synchronous: @stream is not used. */
static gboolean
own_import (MemresResource *mr, const MemresBufferChunks *in, const MemresFabricHandle *fabric,
            MemresAllocation *alloc, GError **error)
{
  Arena *self = memres_resource_get_private (mr);
  CUmemAllocationHandleType type
      = fabric != NULL ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  OwnBuf *own;
  guint n = 0;

  if (!check_import (self, in, type, error))
    return FALSE;
  own = own_new (in->n_chunks);
  own->imported = TRUE;
  own->handle_type = type;
  for (; n < in->n_chunks; n++)
    {
      MemresFabricHandle copy; /* the driver's argument is not const */
      void *os_handle = (void *) (gintptr) in->fds[n];
      CUresult r;

      if (fabric != NULL)
        {
          copy = fabric[n];
          os_handle = copy.data;
        }
      r = self->drv->cuMemImportFromShareableHandle (&own->chunks[n].handle, os_handle, type);

      if (r != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, r, "cuMemImportFromShareableHandle");
          g_prefix_error (error, "arena: importing chunk %u of %u: ", n, in->n_chunks);
          goto fail;
        }
      own->chunks[n].size = in->chunk_sizes[n];
      own->bytes += in->chunk_sizes[n];
    }
  if (!own_map (self, own, error))
    {
      g_prefix_error (error, "arena: mapping %u imported chunks: ", n);
      goto fail;
    }
  own_count (self, own, 1);
  own_raise (self, MEMRES_SEGMENT_MAPPED, own);
  alloc->address = own->base;
  alloc->size = (gsize) in->size;
  alloc->plugin_data = own;
  return TRUE;

fail:
  own_release_handles (self, own, n);
  g_free (own);
  return FALSE;
}

gboolean
arena_import_chunks (MemresResource *mr, const MemresBufferChunks *in, MemresStream stream,
                     MemresAllocation *alloc, GError **error)
{
  return own_import (mr, in, NULL, alloc, error);
}

gboolean
arena_import_fabric_chunks (MemresResource *mr, const MemresBufferChunks *in,
                            const MemresFabricHandle *handles, MemresStream stream,
                            MemresAllocation *alloc, GError **error)
{
  return own_import (mr, in, handles, alloc, error);
}

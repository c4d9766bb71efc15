/* memres - CUDA memory resources
 * vmm-ipc.c: buffers of the `vmm` kind shared with other processes (handle_type=posix_fd): the
 * export_chunks slot hands the core one POSIX-fd shareable handle per physical chunk, the
 * import_chunks slot maps the chunks another process sent into one new reservation with this
 * resource's own access rights. The core carries the fds and the layout over the socket
 * (memres_ipc_send_buffer(), memres_ipc_receive_buffer()) and checks the framing; what only
 * this kind knows is checked here, before any driver call that creates something. */
#include <unistd.h>

#include "vmm-private.h"

#include "../common/fabric.h"

/* Whether the resource was made with @type handles (the fabric fallback made it POSIX-fd). */
static gboolean
vmm_check_type (VmmResource *self, CUmemAllocationHandleType type, const char *what, GError **error)
{
  return fabric_check_handle_type ("vmm", self->prop.requestedHandleTypes, type, what, error);
}

static void
vmm_close_fds (gint *fds, guint n)
{
  for (guint i = 0; i < n; i++)
    close (fds[i]);
}

/* The export_chunks (@handles NULL) and export_fabric_chunks slots. One
 * cuMemExportToShareableHandle() per chunk, in address order: an fd into @out->fds, or a fabric
 * handle into @handles; on failure the fds already made are closed. */
static gboolean
vmm_export (MemresResource *mr, const MemresAllocation *alloc, MemresBufferChunks *out,
            MemresFabricHandle *handles, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  const VmmBuffer *buf = alloc->plugin_data;
  CUmemAllocationHandleType type
      = handles != NULL ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

  if (!vmm_check_type (self, type, "export", error))
    return FALSE;
  if (buf->imported)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "vmm: a buffer imported from another process cannot be exported again");
      return FALSE;
    }
  if (buf->n_chunks > MEMRES_IPC_MAX_CHUNKS)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "vmm: the buffer has %" G_GSIZE_FORMAT " physical chunks, more than the %d "
                   "that can be sent (create the resource with a larger chunk)",
                   buf->n_chunks, MEMRES_IPC_MAX_CHUNKS);
      return FALSE;
    }
  if (!memres_cuda_get_device_uuid (self->device, out->device_uuid, error))
    return FALSE;

  for (gsize i = 0; i < buf->n_chunks; i++)
    {
      gint fd = -1;
      CUresult res = self->drv->cuMemExportToShareableHandle (
          handles != NULL ? (void *) handles[i].data : (void *) &fd, buf->chunks[i].handle, type,
          0);

      if (res != CUDA_SUCCESS)
        {
          if (handles == NULL)
            vmm_close_fds (out->fds, (guint) i);
          memres_cuda_set_error (error, res, "cuMemExportToShareableHandle");
          g_prefix_error (error,
                          "vmm: exporting chunk %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT ": ", i,
                          buf->n_chunks);
          return FALSE;
        }
      if (handles == NULL)
        out->fds[i] = fd;
      out->chunk_sizes[i] = buf->chunks[i].size;
    }
  out->handle_type = type;
  out->location_type = self->prop.location.type;
  out->granularity = self->granularity;
  out->size = alloc->size;
  out->n_chunks = (guint32) buf->n_chunks;
  ((VmmBuffer *) buf)->exported = TRUE; /* shared from now on: it cannot sleep (vmm-sleep.c) */
  return TRUE;
}

gboolean
_vmm_export_chunks (MemresResource *mr, const MemresAllocation *alloc, MemresBufferChunks *out,
                    GError **error)
{
  return vmm_export (mr, alloc, out, NULL, error);
}

gboolean
_vmm_export_fabric_chunks (MemresResource *mr, const MemresAllocation *alloc,
                           MemresBufferChunks *out, MemresFabricHandle *handles, GError **error)
{
  return vmm_export (mr, alloc, out, handles, error);
}

/* Everything about @in that this resource must agree with, before any driver call that
 * creates something (the device lookup only reads UUIDs). */
static gboolean
vmm_check_import (VmmResource *self, const MemresBufferChunks *in, CUmemAllocationHandleType type,
                  GError **error)
{
  gint device = -1;
  GError *local = NULL;

  if (!vmm_check_type (self, type, "import", error))
    return FALSE;
  if (in->handle_type != (guint32) type)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "vmm: invalid buffer layout: handle type %u (expected %s)", in->handle_type,
                   type == CU_MEM_HANDLE_TYPE_FABRIC ? "fabric handles" : "POSIX file descriptors");
      return FALSE;
    }
  if (in->location_type != (guint32) self->prop.location.type)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "vmm: invalid buffer layout: location type %u, but the importer's memory is "
                   "of location type %d",
                   in->location_type, (int) self->prop.location.type);
      return FALSE;
    }
  if (!memres_cuda_find_device_by_uuid (in->device_uuid, &device, &local))
    {
      if (g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE))
        g_prefix_error (&local, "vmm: the buffer's memory belongs to no device here: ");
      g_propagate_error (error, local);
      return FALSE;
    }
  if (device != self->device)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE,
                   "vmm: the buffer's memory belongs to device %d, the importer to device %d",
                   device, self->device);
      return FALSE;
    }
  for (guint i = 0; i < in->n_chunks; i++)
    if (in->chunk_sizes[i] % self->granularity != 0)
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                     "vmm: invalid buffer layout: chunk %u of %u is %" G_GUINT64_FORMAT
                     " bytes, not a multiple of the importer's granularity (%" G_GSIZE_FORMAT
                     " bytes)",
                     i, in->n_chunks, in->chunk_sizes[i], self->granularity);
        return FALSE;
      }
  return TRUE;
}

static void
vmm_release_or_warn (VmmResource *self, const CUmemGenericAllocationHandle *handles, guint n)
{
  for (guint i = n; i-- > 0;)
    {
      CUresult res = self->drv->cuMemRelease (handles[i]);

      if (res != CUDA_SUCCESS)
        vmm_warn_call_failed (res, "cuMemRelease", "rolling back a failed import");
    }
}

/* The import_chunks (@fabric NULL) and import_fabric_chunks slots. One
 * cuMemImportFromShareableHandle() per chunk (of its fd, or of its fabric handle's bytes), then
 * _vmm_map_imported() (one cuMemAddressReserve, one cuMemMap per chunk, cuMemSetAccess). On
 * failure releases what it imported. Synchronous: @stream is not used. */
static gboolean
vmm_import (MemresResource *mr, const MemresBufferChunks *in, const MemresFabricHandle *fabric,
            MemresAllocation *alloc, GError **error)
{
  VmmResource *self = memres_resource_get_private (mr);
  CUmemGenericAllocationHandle handles[MEMRES_IPC_MAX_CHUNKS];
  gsize sizes[MEMRES_IPC_MAX_CHUNKS];
  CUmemAllocationHandleType type
      = fabric != NULL ? CU_MEM_HANDLE_TYPE_FABRIC : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  guint n = 0;

  if (!vmm_check_import (self, in, type, error))
    return FALSE;

  for (; n < in->n_chunks; n++)
    {
      MemresFabricHandle copy; /* the driver's argument is not const */
      void *os_handle = (void *) (gintptr) in->fds[n];
      CUresult res;

      if (fabric != NULL)
        {
          copy = fabric[n];
          os_handle = copy.data;
        }
      res = self->drv->cuMemImportFromShareableHandle (&handles[n], os_handle, type);

      if (res != CUDA_SUCCESS)
        {
          memres_cuda_set_error (error, res, "cuMemImportFromShareableHandle");
          g_prefix_error (error, "vmm: importing chunk %u of %u: ", n, in->n_chunks);
          goto fail;
        }
      sizes[n] = (gsize) in->chunk_sizes[n];
    }
  if (_vmm_map_imported (self, handles, sizes, n, (gsize) in->size, alloc, error))
    return TRUE;
  g_prefix_error (error, "vmm: mapping %u imported chunks: ", n);

fail:
  vmm_release_or_warn (self, handles, n);
  return FALSE;
}

gboolean
_vmm_import_chunks (MemresResource *mr, const MemresBufferChunks *in, MemresStream stream,
                    MemresAllocation *alloc, GError **error)
{
  return vmm_import (mr, in, NULL, alloc, error);
}

gboolean
_vmm_import_fabric_chunks (MemresResource *mr, const MemresBufferChunks *in,
                           const MemresFabricHandle *handles, MemresStream stream,
                           MemresAllocation *alloc, GError **error)
{
  return vmm_import (mr, in, handles, alloc, error);
}

/* memres - CUDA memory resources
 * ipc-chunks.c: a whole buffer as its physical chunks, the message of the chunks family
 * (ipc-message.c joins both families): the layout record (ipc-layout.c) and one shareable-handle
 * fd per chunk, through the kind's export_chunks and import_chunks slots (vmm with
 * handle_type=posix_fd); or the layout record followed by one fabric handle per chunk and no fd,
 * through export_fabric_chunks and import_fabric_chunks (vmm with handle_type=fabric). Unlike pool
 * buffers (ipc-pool-message.c) there is no handle to import first and no per-process deduplication:
 * each imported buffer is its own reservation and mappings, which the driver keeps apart. */
#include <string.h>
#include <unistd.h>

#include "ipc-private.h"

static void
close_chunk_fds (MemresBufferChunks *chunks)
{
  for (guint i = 0; i < chunks->n_chunks && i < MEMRES_IPC_MAX_CHUNKS; i++)
    if (chunks->fds[i] >= 0)
      {
        close (chunks->fds[i]);
        chunks->fds[i] = -1;
      }
}
/* Checks what the export_chunks slot returned (a plugin bug otherwise: MEMRES_ERROR_FAILED). */
static gboolean
check_exported (MemresResource *mr, const MemresAllocation *alloc, MemresBufferChunks *chunks,
                gboolean fabric, GError **error)
{
  GError *local = NULL;

  if (chunks->n_chunks > MEMRES_IPC_MAX_CHUNKS)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "kind \"%s\": export_chunks returned %u chunks (at most %d)", mr->kind->name,
                   chunks->n_chunks, MEMRES_IPC_MAX_CHUNKS);
      chunks->n_chunks = MEMRES_IPC_MAX_CHUNKS; /* close what can be closed */
      return FALSE;
    }
  if (chunks->size != alloc->size)
    g_set_error (&local, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                 "size %" G_GUINT64_FORMAT " is not the buffer's (%" G_GSIZE_FORMAT ")",
                 chunks->size, alloc->size);
  else if ((chunks->handle_type == CU_MEM_HANDLE_TYPE_FABRIC) != fabric)
    g_set_error (&local, MEMRES_ERROR, MEMRES_ERROR_FAILED, "handle type %u from %s",
                 chunks->handle_type, fabric ? "export_fabric_chunks" : "export_chunks");
  else if (_memres_layout_check (chunks, &local) && !fabric)
    {
      for (guint i = 0; i < chunks->n_chunks; i++)
        if (!_memres_fd_is_open (chunks->fds[i]))
          {
            g_set_error (&local, MEMRES_ERROR, MEMRES_ERROR_FAILED, "fd %d of chunk %u is not open",
                         chunks->fds[i], i);
            chunks->fds[i] = -1;
            break;
          }
    }
  if (local == NULL)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
               "kind \"%s\": export_chunks returned an unusable layout: %s", mr->kind->name,
               local->message);
  g_error_free (local);
  return FALSE;
}

gboolean
_memres_chunks_export_message (MemresResource *mr, MemresBuffer *buf, GBytes **bytes, gint **fds,
                               guint *n_fds, GError **error)
{
  guint8 record[MEMRES_LAYOUT_MAX_SIZE];
  MemresBufferChunks chunks;
  GError *local = NULL;
  gsize length;
  gboolean ok;

  memset (&chunks, 0, sizeof chunks);
  if (!_memres_resource_check_usable (mr, "exporting a buffer as chunks", error))
    return FALSE;
  ok = mr->kind->ipc.export_chunks (mr, &buf->alloc, &chunks, &local);
  if (!_memres_resource_slot_result (mr, "export_chunks", ok, &local, error))
    return FALSE;
  if (!check_exported (mr, &buf->alloc, &chunks, FALSE, error))
    {
      close_chunk_fds (&chunks);
      return FALSE;
    }
  length = _memres_layout_encode (mr->kind->name, &chunks, record);
  *bytes = g_bytes_new (record, length);
  *fds = g_memdup2 (chunks.fds, sizeof (gint) * chunks.n_chunks); /* the caller's now */
  *n_fds = chunks.n_chunks;
  return TRUE;
}

gboolean
_memres_chunks_export_fabric_message (MemresResource *mr, MemresBuffer *buf, GBytes **bytes,
                                      GError **error)
{
  guint8 record[MEMRES_CHUNKS_MESSAGE_MAX_SIZE];
  MemresFabricHandle handles[MEMRES_IPC_MAX_CHUNKS];
  MemresBufferChunks chunks;
  GError *local = NULL;
  gsize length;
  gboolean ok;

  memset (&chunks, 0, sizeof chunks);
  memset (handles, 0, sizeof handles);
  for (guint i = 0; i < MEMRES_IPC_MAX_CHUNKS; i++)
    chunks.fds[i] = -1; /* none is made, none is closed */
  if (!_memres_resource_check_usable (mr, "exporting a buffer as fabric handles", error))
    return FALSE;
  ok = mr->kind->ipc.export_fabric_chunks (mr, &buf->alloc, &chunks, handles, &local);
  if (!_memres_resource_slot_result (mr, "export_fabric_chunks", ok, &local, error)
      || !check_exported (mr, &buf->alloc, &chunks, TRUE, error))
    return FALSE;
  length = _memres_layout_encode (mr->kind->name, &chunks, record);
  memcpy (record + length, handles, MEMRES_FABRIC_HANDLE_SIZE * (gsize) chunks.n_chunks);
  length += MEMRES_FABRIC_HANDLE_SIZE * (gsize) chunks.n_chunks;
  *bytes = g_bytes_new (record, length);
  return TRUE;
}

/* The importer's slot for a message of @chunks: NULL with MEMRES_ERROR_NOT_SUPPORTED when its
 * kind has none. */
static gboolean
check_importer (MemresResource *importer, gboolean fabric, GError **error)
{
  if (fabric ? importer->kind->ipc.import_fabric_chunks != NULL
             : importer->kind->ipc.import_chunks != NULL)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "resources of kind \"%s\" cannot import buffers sent as %s (use kind \"vmm\" with "
               "handle_type=%s)",
               importer->kind->name, fabric ? "fabric handles" : "chunks",
               fabric ? "fabric" : "posix_fd");
  return FALSE;
}

MemresBuffer *
_memres_chunks_import_message (MemresResource *importer, const guint8 *data, gsize length,
                               const gint *fds, guint n_fds, MemresStream stream, GError **error)
{
  char kind[MEMRES_KIND_NAME_MAX];
  MemresBufferChunks chunks;
  MemresAllocation alloc = { 0, 0, NULL };
  MemresBuffer *buf;
  GError *local = NULL;
  gsize record_length;
  gboolean ok, fabric;

  if (importer == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "a buffer sent as chunks is received into an importer (a resource of the "
                   "sender's kind), not NULL");
      return NULL;
    }
  /* ipc-message.c checked that @length is the record's declared length plus the fabric
   * handles its header announces */
  record_length = length - _memres_layout_fabric_length (data);
  if (!_memres_layout_decode (data, record_length, kind, &chunks, error))
    return NULL;
  fabric = chunks.handle_type == CU_MEM_HANDLE_TYPE_FABRIC;
  if (n_fds != (fabric ? 0 : chunks.n_chunks))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer layout: n_chunks: %u chunks of %s, but %u file descriptors "
                   "came with the message",
                   chunks.n_chunks, fabric ? "fabric handles (no fd)" : "POSIX fds", n_fds);
      return NULL;
    }
  if (!check_importer (importer, fabric, error))
    return NULL;
  if (strcmp (kind, importer->kind->name) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer layout: kind: \"%s\", but the importer is of kind \"%s\"", kind,
                   importer->kind->name);
      return NULL;
    }
  if (!_memres_resource_check_usable (importer, "receiving a buffer", error))
    return NULL;
  if (fabric)
    {
      MemresFabricHandle handles[MEMRES_IPC_MAX_CHUNKS];

      memcpy (handles, data + record_length, MEMRES_FABRIC_HANDLE_SIZE * (gsize) chunks.n_chunks);
      ok = importer->kind->ipc.import_fabric_chunks (importer, &chunks, handles, stream, &alloc,
                                                     &local);
    }
  else
    {
      /* the caller's fds, lent to the slot for the call (it closes none of them) */
      memcpy (chunks.fds, fds, sizeof (gint) * n_fds);
      ok = importer->kind->ipc.import_chunks (importer, &chunks, stream, &alloc, &local);
    }
  if (!_memres_resource_alloc_result (importer, fabric ? "import_fabric_chunks" : "import_chunks",
                                      ok, &local, chunks.size, stream, &alloc, error))
    return NULL;
  buf = _memres_buffer_new (importer, &alloc, stream);
  buf->flags |= MEMRES_MEMORY_IMPORTED;
  return buf;
}

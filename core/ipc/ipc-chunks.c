/* memres - CUDA memory resources
 * ipc-chunks.c: a whole buffer to another process as its physical chunks: one message carrying
 * the layout record (ipc-layout.c) and one shareable-handle fd per chunk, through the kind's
 * export_chunks and import_chunks slots (vmm with handle_type=posix_fd). Unlike pool buffers
 * (ipc-buffers.c) there is no handle to import first and no per-process deduplication: each
 * received buffer is its own reservation and mappings, which the driver keeps apart. */
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
                GError **error)
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
  else if (_memres_layout_check (chunks, &local))
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

/**
 * memres_ipc_send_buffer:
 * @socket_fd: a connected `AF_UNIX` socket (stream or seqpacket)
 * @buf: an open, non-empty buffer of a resource that shares (`vmm` with `handle_type=posix_fd`;
 *   since 2.0 also a pool that shares: `ipc`, `pinned` with `ipc=true`), not itself imported
 *   from another process
 * @error: return location for a #GError
 *
 * Sends @buf to the peer, which maps it with memres_ipc_receive_buffer(). A pool buffer (since
 * 2.0) goes as one message carrying the pool's handle record (as memres_ipc_send_handle() sends
 * it) with a new fd of the pool, and the buffer's descriptor (as memres_buffer_export() makes
 * it); the fd is closed before this returns. A vmm buffer goes as one sendmsg() with a
 * small versioned layout record (kind, device UUID, handle type, granularity, buffer size in
 * bytes, and the size of each physical chunk in address order) plus one new shareable-handle fd
 * per chunk in `SCM_RIGHTS` and this process's credentials. The fds are this call's own: they
 * are closed before it returns, on success too (the peer holds duplicates, and the memory lives
 * on in the driver for as long as any process maps it). The exporter's access rights are not
 * sent: the importer grants its own. Nothing is ordered on a stream: finish writing (synchronize)
 * before the peer reads. Buffers of at most %MEMRES_IPC_MAX_CHUNKS chunks can be sent. Blocks
 * while the socket's buffer is full; never raises `SIGPIPE`. Thread safety: safe from any
 * thread while @buf stays open and is not resized.
 *
 * Driver calls: the kind's export_chunks slot (vmm: cuMemExportToShareableHandle() with
 * `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` per chunk, cuDeviceGetUuid()), or for a pool its
 * export_buffer and export_handle slots (cuMemPoolExportPointer(),
 * cuMemPoolExportToShareableHandle()).
 *
 * Errors: %MEMRES_ERROR_CLOSED for a closed buffer; %MEMRES_ERROR_INVALID_ARGUMENT for an empty
 * (zero-byte) buffer or when @socket_fd is not an `AF_UNIX` socket;
 * %MEMRES_ERROR_NOT_SUPPORTED for foreign memory, a buffer imported from another process (refused
 * before any driver call: forward what you received, or copy the data into a buffer of your
 * own), a kind that does not share, a resource created without `handle_type=posix_fd` or a
 * pool made without IPC, or a buffer of more than %MEMRES_IPC_MAX_CHUNKS chunks;
 * %MEMRES_ERROR_FAILED when sendmsg() fails or sends part of the message; %MEMRES_CUDA_ERROR from
 * the driver.
 *
 * Returns: %TRUE when the whole message was sent
 *
 * Since: 1.1
 */
gboolean
memres_ipc_send_buffer (gint socket_fd, MemresBuffer *buf, GError **error)
{
  guint8 record[MEMRES_LAYOUT_MAX_SIZE];
  MemresBufferChunks chunks;
  MemresResource *mr;
  GError *local = NULL;
  gsize length;
  gboolean ok;

  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (memres_buffer_is_closed (buf))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED, "cannot send a closed buffer");
      return FALSE;
    }
  if (buf->alloc.size == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "cannot send an empty (zero-byte) buffer");
      return FALSE;
    }
  mr = buf->mr;
  if (mr == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "cannot send foreign memory (a buffer wrapping a pointer)");
      return FALSE;
    }
  if (buf->flags & MEMRES_MEMORY_IMPORTED)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "this buffer was imported from another process and cannot be exported again: "
                   "forward what you received, or copy the data into a buffer of your own");
      return FALSE;
    }
  mr = _memres_resource_ipc_owner (mr);
  if (mr->kind->ipc.export_chunks == NULL && mr->kind->ipc.export_buffer != NULL)
    return _memres_ipc_send_pool_buffer (socket_fd, buf, error);
  if (mr->kind->ipc.export_chunks == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "buffers of kind \"%s\" cannot be sent to other processes (use kind \"ipc\", "
                   "\"pinned\" with ipc=true, or \"vmm\" with handle_type=posix_fd)",
                   mr->kind->name);
      return FALSE;
    }
  if (!_memres_ipc_check_socket (socket_fd, error))
    return FALSE;

  memset (&chunks, 0, sizeof chunks);
  if (!_memres_resource_check_usable (mr, "sending a buffer", error))
    return FALSE;
  ok = mr->kind->ipc.export_chunks (mr, &buf->alloc, &chunks, &local);
  if (!_memres_resource_slot_result (mr, "export_chunks", ok, &local, error))
    return FALSE;
  ok = check_exported (mr, &buf->alloc, &chunks, error);
  if (ok)
    {
      length = _memres_layout_encode (mr->kind->name, &chunks, record);
      ok = _memres_ipc_send_message (socket_fd, "buffer", record, length, chunks.fds,
                                     chunks.n_chunks, error);
    }
  close_chunk_fds (&chunks);
  return ok;
}

/* The length of a buffer message from its first bytes: a pool buffer's (MRPB) or, for anything
 * else, a layout record's (whose decoder refuses what is not one). */
static gsize
message_length (const guint8 *header)
{
  if (_memres_get_le (header, 4) == MEMRES_POOL_MESSAGE_MAGIC)
    return _memres_pool_message_declared_length (header);
  return _memres_layout_declared_length (header);
}

/**
 * memres_ipc_receive_buffer:
 * @socket_fd: a connected `AF_UNIX` socket (stream or seqpacket)
 * @importer: (nullable): the resource that maps the buffer. For a vmm buffer: of the sender's
 *   kind, created with `handle_type=posix_fd` on the device whose UUID the message carries. For
 *   a pool buffer (since 2.0): %NULL to import the pool the message names (or to reuse the
 *   resource already imported from it, as memres_resource_import_handle() does), or the
 *   resource imported from that pool
 * @flags: #MemresIpcFlags: %MEMRES_IPC_ALLOW_ANY_UID accepts a message from any sender
 * @stream: recorded as the buffer's deallocation stream (the mapping itself is synchronous)
 * @error: return location for a #GError
 *
 * Receives one buffer sent with memres_ipc_send_buffer() and maps it. A pool buffer's message is
 * checked whole before anything is imported (its framing, the handle record first and the
 * descriptor after it, exactly one fd, both records as strictly as memres_ipc_receive_handle()
 * and memres_buffer_import() check them, and the descriptor's pool and device those of the
 * handle); then the pool is imported (or @importer used) and the buffer imported from it, as
 * memres_buffer_import() does: the buffer holds a reference on the imported pool. A vmm
 * buffer: each chunk is imported,
 * one address range of the whole extent is reserved, the chunks are mapped into it in order and
 * @importer's own access rights (its device, host location, peers; `access=ro` too) are
 * granted. The new buffer has the sender's size, holds a reference on @importer and is flagged
 * %MEMRES_MEMORY_IMPORTED: it cannot be sent again nor resized. Closing it waits for its
 * deallocation stream, then unmaps, frees the range and releases the imported chunks.
 *
 * The message is untrusted. Before any driver call: the record's framing (magic, version,
 * length, chunk count against the fds that came with it, kind, chunk sizes positive multiples
 * of the sender's granularity, their sum without overflow and at least the size), the sender's
 * uid on every piece of the message and the peer's (as memres_ipc_receive_handle_with_flags():
 * a piece without credentials is refused too), and then, in the kind, the handle type,
 * location, device UUID and the chunk sizes against @importer's granularity. Every received fd
 * is closed before this returns, on every path, success included (the driver keeps its own
 * reference to what it imported). Each call maps anew: receiving the same memory twice gives
 * two independent mappings. On failure nothing stays imported, reserved or mapped. Blocks
 * until a message arrives. Thread safety: safe from any thread; receive on one socket from one
 * thread at a time.
 *
 * Driver calls: for a pool buffer, those of memres_resource_import_handle() and
 * memres_buffer_import(); else the kind's import_chunks slot (vmm: cuDeviceGetUuid() to find the
 * device, cuMemImportFromShareableHandle() per chunk, cuMemAddressReserve(), cuMemMap() per chunk,
 * cuMemSetAccess(); on failure cuMemUnmap(), cuMemAddressFree(), cuMemRelease()).
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @socket_fd is not an `AF_UNIX` socket;
 * %MEMRES_ERROR_INVALID_ARGUMENT for a vmm buffer received with @importer %NULL;
 * %MEMRES_ERROR_FAILED when recvmsg() fails or the peer closed the connection before sending
 * anything; %MEMRES_ERROR_INVALID_DESCRIPTOR for a short, oversized or malformed message, a
 * chunk count that differs from the fds received, a kind other than @importer's, chunk
 * sizes @importer cannot map, a pool message with records out of order, not exactly one fd,
 * or a descriptor of another pool than its handle, or an @importer not imported from the
 * message's pool; %MEMRES_ERROR_PERMISSION_DENIED (never with
 * %MEMRES_IPC_ALLOW_ANY_UID) for a piece of the message sent under another uid or without
 * credentials, or a peer of another uid (refused before @importer is looked at);
 * %MEMRES_ERROR_NOT_SUPPORTED when @importer cannot import chunks (another kind, or not created
 * with `handle_type=posix_fd`); %MEMRES_ERROR_WRONG_DEVICE when the memory is not on
 * @importer's device; %MEMRES_CUDA_ERROR from the driver.
 *
 * Returns: (transfer full) (nullable): the new buffer, or %NULL with @error set
 *
 * Since: 1.1
 */
MemresBuffer *
memres_ipc_receive_buffer (gint socket_fd, MemresResource *importer, MemresIpcFlags flags,
                           MemresStream stream, GError **error)
{
  guint8 record[MEMRES_LAYOUT_MAX_SIZE];
  g_autoptr (GArray) fds = g_array_new (FALSE, FALSE, sizeof (int));
  char kind[MEMRES_KIND_NAME_MAX];
  MemresBufferChunks chunks;
  MemresAllocation alloc = { 0, 0, NULL };
  MemresBuffer *buf = NULL;
  GError *local = NULL;
  gsize length;
  gboolean ok;

  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  /* The message is taken from the socket whatever follows, so that the next one stays
   * readable; from here on every fd that arrived is closed before returning. */
  if (!_memres_ipc_receive_message (socket_fd, flags, "buffer", record, MEMRES_LAYOUT_HEADER_SIZE,
                                    MEMRES_LAYOUT_MAX_SIZE, message_length, &length, fds, error))
    return NULL;
  if (_memres_get_le (record, 4) == MEMRES_POOL_MESSAGE_MAGIC)
    {
      buf = _memres_ipc_receive_pool_buffer (record, length, fds, importer, stream, error);
      goto out;
    }
  if (importer == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "a buffer sent as chunks is received into an importer (a resource of the "
                   "sender's kind), not NULL");
      goto out;
    }
  if (!_memres_layout_decode (record, length, kind, &chunks, error))
    goto out;
  if (fds->len != chunks.n_chunks)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer layout: n_chunks: %u chunks, but %u file descriptors came "
                   "with the message",
                   chunks.n_chunks, fds->len);
      goto out;
    }
  if (importer->kind->ipc.import_chunks == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "resources of kind \"%s\" cannot import buffers sent as chunks (use kind "
                   "\"vmm\" with handle_type=posix_fd)",
                   importer->kind->name);
      goto out;
    }
  if (strcmp (kind, importer->kind->name) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer layout: kind: \"%s\", but the importer is of kind \"%s\"", kind,
                   importer->kind->name);
      goto out;
    }
  if (!_memres_resource_check_usable (importer, "receiving a buffer", error))
    goto out;
  memcpy (chunks.fds, fds->data, sizeof (int) * fds->len);

  ok = importer->kind->ipc.import_chunks (importer, &chunks, stream, &alloc, &local);
  if (!_memres_resource_alloc_result (importer, "import_chunks", ok, &local, chunks.size, stream,
                                      &alloc, error))
    goto out;
  buf = _memres_buffer_new (importer, &alloc, stream);
  buf->flags |= MEMRES_MEMORY_IMPORTED;

out:
  _memres_ipc_close_fds (fds);
  return buf;
}

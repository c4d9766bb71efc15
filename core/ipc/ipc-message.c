/* memres - CUDA memory resources
 * ipc-message.c: a whole buffer as one message, bytes plus file descriptors, for both sharing
 * families: memres_buffer_export_message() and memres_buffer_import_message() (the public
 * message model: which family a buffer or a message is of, the checks every message gets, the
 * rules of fd ownership), and memres_ipc_send_buffer()/receive_buffer(), which are those two
 * plus the AF_UNIX transport (ipc-transport.c). The families' own messages are built and
 * checked in ipc-pool-message.c (ipc, pinned with ipc=true) and ipc-chunks.c (vmm with
 * handle_type=posix_fd). */
#include <string.h>
#include <unistd.h>

#include "ipc-private.h"

/* Every check of @buf that needs no driver call, in the order memres_ipc_send_buffer() has
 * always made them; *@owner gets the layer that made the allocation. @socket_fd (when not
 * NULL) is checked last, before any export. */
static gboolean
check_exportable (MemresBuffer *buf, const gint *socket_fd, MemresResource **owner, GError **error)
{
  MemresResource *mr;

  if (!_memres_ipc_check_buffer (buf, "send", error))
    return FALSE;
  mr = buf->mr;
  if (buf->flags & MEMRES_MEMORY_IMPORTED)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "this buffer was imported from another process and cannot be exported again: "
                   "forward what you received, or copy the data into a buffer of your own");
      return FALSE;
    }
  mr = _memres_resource_ipc_owner (mr);
  if (mr->kind->ipc.export_chunks == NULL && mr->kind->ipc.export_buffer == NULL
      && mr->kind->ipc.export_fabric_chunks == NULL)
    return _memres_ipc_set_not_shared (error, mr, "buffers", "sent to",
                                       "use kind \"ipc\", \"pinned\" with ipc=true, or \"vmm\" "
                                       "with handle_type=posix_fd");
  if (socket_fd != NULL && !_memres_ipc_check_socket (*socket_fd, error))
    return FALSE;
  *owner = mr;
  return TRUE;
}

/* The message of @buf, checked by check_exportable() into @owner, from its family. */
static gboolean
export_checked (MemresBuffer *buf, MemresResource *owner, GBytes **bytes, gint **fds, guint *n_fds,
                GError **error)
{
  if (owner->kind->ipc.export_fabric_chunks != NULL
      && (owner->info.flags & MEMRES_MEMORY_FABRIC_HANDLES))
    {
      if (!_memres_chunks_export_fabric_message (owner, buf, bytes, error))
        return FALSE;
      *fds = NULL; /* fabric handles are bytes: no fd */
      *n_fds = 0;
      return TRUE;
    }
  if (owner->kind->ipc.export_chunks != NULL)
    return _memres_chunks_export_message (owner, buf, bytes, fds, n_fds, error);
  return _memres_pool_export_message (buf, owner, bytes, fds, n_fds, error);
}

static void
close_exported (GBytes *bytes, gint *fds, guint n_fds)
{
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  g_free (fds);
  g_bytes_unref (bytes);
}

/**
 * memres_buffer_export_message:
 * @buf: an open, non-empty buffer of a resource that shares (`ipc`, `pinned` with `ipc=true`,
 *   `vmm` with `handle_type=posix_fd` or, where the driver grants fabric handles,
 *   `handle_type=fabric`, `arena` with either, `ipc` with `handle_type=fabric`, or an adaptor
 *   stack over one), not itself imported from another process
 * @bytes: (out) (transfer full): the message's bytes
 * @fds: (out) (transfer full) (array length=n_fds): the message's file descriptors, new ones of
 *   this call; close each and `g_free` the array
 * @n_fds: (out): the number of fds at *@fds (1 for a pool buffer, one per chunk for a vmm
 *   buffer, at most %MEMRES_IPC_MAX_CHUNKS; 0, with *@fds %NULL, for a buffer of fabric handles
 *   and for a buffer of a pool of fabric handles)
 * @error: return location for a #GError
 *
 * Makes the message that shares @buf with another process, for an application that carries it
 * by its own transport (or several in one of its own messages); memres_ipc_send_buffer() is
 * this call plus one sendmsg() of the bytes with the fds in `SCM_RIGHTS`. Deliver the bytes and
 * the fds together and unchanged (the fds as the peer's duplicates, e.g. `SCM_RIGHTS` or
 * `pidfd_getfd`): the peer maps the buffer with memres_buffer_import_message(). The
 * format is the one memres_ipc_send_buffer() sends (see docs/ipc.md): for a pool buffer the `MRPB`
 * record (the pool's handle record and the buffer's descriptor, 240 bytes) and one fd of the pool
 * (for a pool of fabric handles, version 2: the same records and the pool's 64-byte fabric
 * handle, 304 bytes, and no fd);
 * for a buffer shared by chunks the `MRCB` layout record (88 bytes plus 8 per chunk) and one
 * shareable-handle fd per physical chunk, in address order; for a buffer of fabric handles
 * (a resource whose flags carry %MEMRES_MEMORY_FABRIC_HANDLES) the same record with handle type
 * `CU_MEM_HANDLE_TYPE_FABRIC` followed by one 64-byte fabric handle per chunk, and no fd: those
 * bytes alone map the memory, on any node of the NVLink domain, for whoever holds them (they
 * carry no identity; docs/distributed.md). Other messages' bytes hold no secret (the fds
 * are what grants access) and nothing about this process: the sender's identity is the
 * transport's business. The exporter's access rights are not carried: the importer grants its
 * own.
 *
 * The fds are the caller's: keep them open until the peer has its duplicates, then close them;
 * the memory lives on in the driver for as long as any process maps it. On failure *@bytes,
 * *@fds and *@n_fds are not set and no fd stays open. Nothing is ordered on a stream: finish
 * writing @buf (synchronize) before the peer reads. Thread safety: safe from any thread while
 * @buf stays open and is not resized.
 *
 * Driver calls: for a pool buffer the kind's export_buffer and export_handle slots
 * (cuMemPoolExportPointer(), cuMemPoolExportToShareableHandle()), or for a pool of fabric
 * handles export_buffer and export_fabric_handle (`ipc`: the fabric handle exported at creation,
 * no call); for chunks its export_chunks
 * slot (vmm: cuMemExportToShareableHandle() with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` per
 * chunk, cuDeviceGetUuid(); with `CU_MEM_HANDLE_TYPE_FABRIC` through its export_fabric_chunks
 * slot, since 2.0).
 *
 * Errors: %MEMRES_ERROR_CLOSED for a closed buffer; %MEMRES_ERROR_INVALID_ARGUMENT for an empty
 * (zero-byte) buffer; %MEMRES_ERROR_NOT_SUPPORTED for foreign memory, a buffer imported from
 * another process (refused before any driver call), a kind that does not share (or is under
 * an adaptor that does not pass allocations through, `cache`), a resource created without
 * `handle_type=posix_fd` or a pool made without IPC, or a buffer of more than
 * %MEMRES_IPC_MAX_CHUNKS chunks; %MEMRES_ERROR_FAILED when a kind's export slot returns
 * something unusable (a plugin bug); %MEMRES_CUDA_ERROR from the driver.
 *
 * Returns: %TRUE with *@bytes, *@fds and *@n_fds set
 *
 * Since: 2.0
 */
gboolean
memres_buffer_export_message (MemresBuffer *buf, GBytes **bytes, gint **fds, guint *n_fds,
                              GError **error)
{
  MemresResource *owner;

  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (bytes != NULL && fds != NULL && n_fds != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!check_exportable (buf, NULL, &owner, error))
    return FALSE;
  return export_checked (buf, owner, bytes, fds, n_fds, error);
}

/**
 * memres_ipc_send_buffer:
 * @socket_fd: a connected `AF_UNIX` socket (stream or seqpacket)
 * @buf: an open, non-empty buffer of a resource that shares (`vmm` with `handle_type=posix_fd`;
 *   since 2.0 also a pool that shares: `ipc`, `pinned` with `ipc=true`), not itself imported
 *   from another process
 * @error: return location for a #GError
 *
 * Sends @buf to the peer, which maps it with memres_ipc_receive_buffer(): the message of
 * memres_buffer_export_message() in one sendmsg(), its fds closed before this returns (since
 * 2.0 the two are one path). A pool buffer (since
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
 * own), a kind that does not share (or is under an adaptor that does not pass allocations
 * through, `cache`), a resource created without `handle_type=posix_fd` or a pool made without
 * IPC, or a buffer of more than %MEMRES_IPC_MAX_CHUNKS chunks;
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
  MemresResource *owner;
  GBytes *bytes;
  gint *fds;
  guint n_fds;
  gboolean ok;

  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!check_exportable (buf, &socket_fd, &owner, error)
      || !export_checked (buf, owner, &bytes, &fds, &n_fds, error))
    return FALSE;
  ok = _memres_ipc_send_message (socket_fd, "buffer", g_bytes_get_data (bytes, NULL),
                                 g_bytes_get_size (bytes), fds, n_fds, error);
  close_exported (bytes, fds, n_fds); /* the peer holds duplicates */
  return ok;
}

/* The length of a buffer message from its first bytes: a pool buffer's (MRPB) or, for anything
 * else, a layout record's (whose decoder refuses what is not one). */
static gsize
message_length (const guint8 *header)
{
  if (_memres_get_le (header, 4) == MEMRES_POOL_MESSAGE_MAGIC)
    return _memres_pool_message_declared_length (header);
  return _memres_layout_declared_length (header) + _memres_layout_fabric_length (header);
}

/**
 * memres_buffer_import_message:
 * @importer: (nullable): the resource that maps the buffer. For a buffer shared by chunks: of
 *   the sender's kind, created with `handle_type=posix_fd` (for a message of fabric handles:
 *   `handle_type=fabric`, granted by the driver) on the device whose UUID the message
 *   carries. For a pool buffer: %NULL to import the pool the message names (or to reuse the
 *   resource already imported from it, as memres_resource_import_handle() does), or the
 *   resource imported from that pool
 * @data: (array length=length): the message's bytes, as memres_buffer_export_message() made them
 * @length: the number of bytes at @data
 * @fds: (array length=n_fds) (transfer none) (nullable): the file descriptors that came with the
 *   message, in their order; they stay the caller's
 * @n_fds: the number of fds at @fds
 * @stream: recorded as the buffer's deallocation stream (the mapping itself is synchronous)
 * @error: return location for a #GError
 *
 * Maps the buffer a message of memres_buffer_export_message() (or memres_ipc_send_buffer())
 * shares, received by the application's own transport. The message is untrusted and is checked
 * as memres_ipc_receive_buffer() checks it, before any driver call: its length against what
 * its header declares (at most 88 + 72 × %MEMRES_IPC_MAX_CHUNKS bytes, at most
 * %MEMRES_IPC_MAX_CHUNKS fds, each an open fd), then by its family. A pool buffer's message:
 * its framing, the handle record first and the descriptor after it, exactly one fd, both
 * records as strictly as memres_ipc_receive_handle() and memres_buffer_import() check them,
 * and the descriptor's pool and device those of the handle (a pool of fabric handles: version 2,
 * no fd, the pool's fabric handle after the records); then the pool is imported (or
 * @importer used) and the buffer imported from it, as memres_buffer_import() does: the buffer
 * holds a reference on the imported pool. A buffer shared by chunks: the layout record (magic,
 * version, length, chunk count equal to @n_fds, kind that of @importer, chunk sizes positive
 * multiples of the sender's granularity, their sum without overflow and at least the size),
 * then in the kind the handle type, location, device UUID and the chunk sizes against
 * @importer's granularity (a message of fabric handles: the record, then 64 bytes per chunk,
 * with no fd; the handles are the driver's to refuse); then each chunk is imported, one address
 * range of the whole extent reserved, the chunks mapped into it in order and @importer's own access
 * rights granted. The sender's identity is not in the message: authenticating the peer is the
 * transport's job (memres_ipc_receive_buffer() checks credentials).
 *
 * The fds are lent for the call and stay the caller's, on success and on every failure: close
 * them after this returns (the driver keeps its own reference to what it imported). On failure
 * nothing stays imported, reserved or mapped. The new buffer has the sender's size, holds a
 * reference on its resource and is flagged %MEMRES_MEMORY_IMPORTED: it cannot be exported
 * again nor resized. Each call maps a buffer shared by chunks anew (two independent mappings
 * for the same memory); pool buffers share one mapping per process. Thread safety: safe from
 * any thread.
 *
 * Driver calls: for a pool buffer, those of memres_resource_import_handle() and
 * memres_buffer_import() (a pool of fabric handles: the kind's import_fabric_handle slot, `ipc`:
 * cuMemPoolImportFromShareableHandle() with `CU_MEM_HANDLE_TYPE_FABRIC`); else the kind's
 * import_chunks slot (vmm: cuDeviceGetUuid() to find the
 * device, cuMemImportFromShareableHandle() per chunk, cuMemAddressReserve(), cuMemMap() per chunk,
 * cuMemSetAccess(); on failure cuMemUnmap(), cuMemAddressFree(), cuMemRelease()).
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a buffer shared by chunks with @importer %NULL,
 * or an fd of @fds that is not open; %MEMRES_ERROR_INVALID_DESCRIPTOR for a short, oversized or
 * malformed message, a length other than the one its header declares, more fds than
 * %MEMRES_IPC_MAX_CHUNKS, a chunk count that differs from @n_fds, a kind other than
 * @importer's, chunk sizes @importer cannot map, a pool message with records out of order, not
 * exactly one fd, or a descriptor of another pool than its handle, or an @importer not
 * imported from the message's pool; %MEMRES_ERROR_NOT_SUPPORTED when @importer cannot import
 * chunks (another kind, or not created with `handle_type=posix_fd`);
 * %MEMRES_ERROR_WRONG_DEVICE when the memory is not on @importer's device; %MEMRES_CUDA_ERROR
 * from the driver, also for a chunk size forged to another multiple of the granularity (no
 * driver call tells an imported chunk's size before cuMemMap() refuses it), or
 * %MEMRES_ERROR_OUT_OF_MEMORY when the address range of such forged sizes cannot be reserved.
 *
 * Returns: (transfer full) (nullable): the new buffer, or %NULL with @error set
 *
 * Since: 2.0
 */
MemresBuffer *
memres_buffer_import_message (MemresResource *importer, gconstpointer data, gsize length,
                              const gint *fds, guint n_fds, MemresStream stream, GError **error)
{
  gsize declared;

  g_return_val_if_fail (data != NULL || length == 0, NULL);
  g_return_val_if_fail (fds != NULL || n_fds == 0, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  /* what the transport checks of a message it receives */
  if (length < MEMRES_LAYOUT_HEADER_SIZE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer message: %" G_GSIZE_FORMAT " bytes, truncated (at least %d)",
                   length, MEMRES_LAYOUT_HEADER_SIZE);
      return NULL;
    }
  declared = message_length (data);
  if (declared != length || length > MEMRES_CHUNKS_MESSAGE_MAX_SIZE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer message: %" G_GSIZE_FORMAT
                   " bytes, its header declares %" G_GSIZE_FORMAT " (at most %d)",
                   length, declared, (int) MEMRES_CHUNKS_MESSAGE_MAX_SIZE);
      return NULL;
    }
  if (n_fds > MEMRES_IPC_MAX_CHUNKS)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer message: %u file descriptors (at most %d)", n_fds,
                   MEMRES_IPC_MAX_CHUNKS);
      return NULL;
    }
  for (guint i = 0; i < n_fds; i++)
    if (!_memres_fd_is_open (fds[i]))
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "buffer message: file descriptor %u (%d) is not open", i, fds[i]);
        return NULL;
      }
  if (_memres_get_le (data, 4) == MEMRES_POOL_MESSAGE_MAGIC)
    return _memres_pool_import_message (data, length, fds, n_fds, importer, stream, error);
  return _memres_chunks_import_message (importer, data, length, fds, n_fds, stream, error);
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
 * Receives one buffer sent with memres_ipc_send_buffer() and maps it: one message from the
 * socket, its sender's credentials checked, then memres_buffer_import_message() on it (since 2.0
 * the two are one path), and every fd that came with it closed. A pool buffer's message is
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
  guint8 record[MEMRES_CHUNKS_MESSAGE_MAX_SIZE];
  g_autoptr (GArray) fds = g_array_new (FALSE, FALSE, sizeof (int));
  MemresBuffer *buf;
  gsize length;

  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  /* The message is taken from the socket whatever follows, so that the next one stays
   * readable; from here on every fd that arrived is closed before returning. */
  if (!_memres_ipc_receive_message (socket_fd, flags, "buffer", record, MEMRES_LAYOUT_HEADER_SIZE,
                                    MEMRES_CHUNKS_MESSAGE_MAX_SIZE, message_length, &length, fds,
                                    error))
    return NULL;
  buf = memres_buffer_import_message (importer, record, length, (const gint *) fds->data, fds->len,
                                      stream, error);
  _memres_ipc_close_fds (fds);
  return buf;
}

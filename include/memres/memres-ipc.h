/* memres - CUDA memory resources
 * memres-ipc.h: shareable handles and their transport between processes. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-ipc
 * @title: Sharing between processes
 * @short_description: shareable pool handles and buffers sent to other processes
 * @section_id: memres-memres-ipc
 *
 * A process can share its device memory with another process on the same machine. A pool is
 * exported as a #MemresIpcHandle (memres_resource_export_handle()), which owns a POSIX file
 * descriptor, and imported with memres_resource_import_handle(); its buffers then travel as
 * descriptors (memres_buffer_export(), memres_buffer_import()). A whole buffer can also travel in
 * one message (memres_ipc_send_buffer(), memres_ipc_receive_buffer()), or, for a transport of
 * the application's own, as bytes plus file descriptors (memres_buffer_export_message()).
 * memres_ipc_send_handle() and memres_ipc_receive_handle() carry handles over a Unix socket and
 * check the peer's credentials (#MemresIpcFlags).
 *
 * |[<!-- language="C" -->
 * // exporter
 * g_autoptr (MemresIpcHandle) handle = memres_resource_export_handle (mr, &error);
 * memres_ipc_send_handle (sock, handle, &error);
 *
 * // importer
 * g_autoptr (MemresIpcHandle) got = memres_ipc_receive_handle (sock, &error);
 * g_autoptr (MemresResource) pool = memres_resource_import_handle (got, &error);
 * ]|
 *
 * Treat everything received as untrusted: every field is validated
 * (%MEMRES_ERROR_INVALID_DESCRIPTOR). The send and receive functions are thread-safe; a handle is
 * not locked (use one from one thread at a time).
 */

/**
 * MEMRES_IPC_ID_SIZE:
 *
 * Size in bytes of a pool identity and of a device UUID.
 *
 * Since: 1.0
 */
#define MEMRES_IPC_ID_SIZE 16

/**
 * MEMRES_IPC_MAX_CHUNKS:
 *
 * The most physical chunks (and so file descriptors) one buffer sent with
 * memres_ipc_send_buffer() may have. A buffer with more cannot be sent
 * (%MEMRES_ERROR_NOT_SUPPORTED): give its resource a larger `chunk`.
 *
 * Since: 1.1
 */
#define MEMRES_IPC_MAX_CHUNKS 64

/**
 * MemresIpcFlags:
 * @MEMRES_IPC_NONE: defaults: every piece of a message must come with the credentials of a
 *   sender running under this process's effective uid, and the peer must run under it
 * @MEMRES_IPC_ALLOW_ANY_UID: accept a message from a peer of any uid, and one that came
 *   without the sender's credentials
 *
 * How memres_ipc_receive_handle_with_flags() and memres_ipc_receive_buffer() check the peer,
 * a bitmask.
 *
 * Since: 1.0
 */
typedef enum
{
  MEMRES_IPC_NONE = 0,
  MEMRES_IPC_ALLOW_ANY_UID = 1 << 0,
} MemresIpcFlags;

/* A MemresIpcHandle owns exactly one file descriptor (a POSIX-fd shareable handle of a pool)
 * plus the kind name, the pool identity and the device UUID. Full documentation:
 * the reference (share/gtk-doc/html/memres), memres-ipc. */
MemresIpcHandle *memres_ipc_handle_new (const char *kind, gint fd,
                                        const guint8 pool_id[MEMRES_IPC_ID_SIZE],
                                        const guint8 device_uuid[MEMRES_IPC_ID_SIZE],
                                        GError **error);
void memres_ipc_handle_free (MemresIpcHandle *handle);
gint memres_ipc_handle_get_fd (const MemresIpcHandle *handle);
gint memres_ipc_handle_steal_fd (MemresIpcHandle *handle);
const char *memres_ipc_handle_get_kind (const MemresIpcHandle *handle);
const guint8 *memres_ipc_handle_get_pool_id (const MemresIpcHandle *handle);
const guint8 *memres_ipc_handle_get_device_uuid (const MemresIpcHandle *handle);

gboolean memres_ipc_send_handle (gint socket_fd, const MemresIpcHandle *handle, GError **error);
MemresIpcHandle *memres_ipc_receive_handle (gint socket_fd, GError **error);
MemresIpcHandle *memres_ipc_receive_handle_with_flags (gint socket_fd, MemresIpcFlags flags,
                                                       GError **error);

/* A whole buffer over the same transport, in one message: its physical chunks' fds plus their
 * layout (vmm with handle_type=posix_fd), or (since 2.0) a pool buffer's pool handle and
 * descriptor (ipc, pinned with ipc=true). Since: 1.1 */
gboolean memres_ipc_send_buffer (gint socket_fd, MemresBuffer *buf, GError **error);
MemresBuffer *memres_ipc_receive_buffer (gint socket_fd, MemresResource *importer,
                                         MemresIpcFlags flags, MemresStream stream, GError **error);

/* The message those two carry, for a transport of the application's own: bytes plus fds, for
 * either family (the fds of an export are the caller's to close; an import only borrows them).
 * Since: 2.0 */
gboolean memres_buffer_export_message (MemresBuffer *buf, GBytes **bytes, gint **fds, guint *n_fds,
                                       GError **error);
MemresBuffer *memres_buffer_import_message (MemresResource *importer, gconstpointer data,
                                            gsize length, const gint *fds, guint n_fds,
                                            MemresStream stream, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MemresIpcHandle, memres_ipc_handle_free)

G_END_DECLS

/* memres - CUDA memory resources
 * ipc-handle.c: MemresIpcHandle, the owner of one shareable-handle file descriptor (or, for a
 * pool shared by its fabric handle, of none: the pool's identity alone). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "ipc-private.h"

struct _MemresIpcHandle
{
  gint fd; /* owned; -1 once stolen */
  char kind[MEMRES_KIND_NAME_MAX];
  guint8 pool_id[MEMRES_IPC_ID_SIZE];
  guint8 device_uuid[MEMRES_IPC_ID_SIZE];
};

gboolean
_memres_fd_is_open (gint fd)
{
  return fd >= 0 && fcntl (fd, F_GETFD) != -1;
}

char *
_memres_ipc_format_id (const guint8 id[MEMRES_IPC_ID_SIZE])
{
  GString *s = g_string_sized_new (2 * MEMRES_IPC_ID_SIZE);
  for (int i = 0; i < MEMRES_IPC_ID_SIZE; i++)
    g_string_append_printf (s, "%02x", id[i]);
  return g_string_free (s, FALSE);
}

/**
 * memres_ipc_handle_new:
 * @kind: (transfer none): the kind name of the exporting resource, matching `[a-z][a-z0-9_]*`
 *   and shorter than 32 bytes
 * @fd: (transfer full): an open file descriptor, the POSIX-fd shareable handle of a pool
 * @pool_id: (array fixed-size=16): the identity of the pool, 16 bytes
 * @device_uuid: (array fixed-size=16): the UUID of the pool's device (all zero for host memory)
 * @error: return location for a #GError
 *
 * Creates a handle that owns @fd: memres_ipc_handle_free() closes it. On failure the handle
 * takes nothing: @fd stays owned by the caller. No driver call.
 *
 * Plugins create handles in their export_handle slot; receivers get them from
 * memres_ipc_receive_handle(). Thread safety: a handle is not locked; use one from one thread at
 * a time (reading it from several threads is fine).
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when @fd is negative or not open, or when @kind is not
 * a valid kind name.
 *
 * Returns: (transfer full) (nullable): the new handle, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresIpcHandle *
memres_ipc_handle_new (const char *kind, gint fd, const guint8 pool_id[MEMRES_IPC_ID_SIZE],
                       const guint8 device_uuid[MEMRES_IPC_ID_SIZE], GError **error)
{
  MemresIpcHandle *handle;

  g_return_val_if_fail (pool_id != NULL, NULL);
  g_return_val_if_fail (device_uuid != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (kind == NULL || strlen (kind) >= MEMRES_KIND_NAME_MAX || !_memres_kind_name_is_valid (kind))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC handle: invalid kind name \"%s\" (expected [a-z][a-z0-9_]*, at most %d "
                   "bytes)",
                   kind ? kind : "(null)", MEMRES_KIND_NAME_MAX - 1);
      return NULL;
    }
  if (fd < 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC handle: file descriptor %d is negative", fd);
      return NULL;
    }
  if (!_memres_fd_is_open (fd))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC handle: file descriptor %d is not open", fd);
      return NULL;
    }

  handle = g_new0 (MemresIpcHandle, 1);
  handle->fd = fd;
  g_strlcpy (handle->kind, kind, sizeof handle->kind);
  memcpy (handle->pool_id, pool_id, MEMRES_IPC_ID_SIZE);
  memcpy (handle->device_uuid, device_uuid, MEMRES_IPC_ID_SIZE);
  return handle;
}

MemresIpcHandle *
_memres_ipc_handle_new_identity (const char *kind, const guint8 pool_id[MEMRES_IPC_ID_SIZE],
                                 const guint8 device_uuid[MEMRES_IPC_ID_SIZE])
{
  MemresIpcHandle *handle = g_new0 (MemresIpcHandle, 1);

  handle->fd = -1;
  g_strlcpy (handle->kind, kind, sizeof handle->kind);
  memcpy (handle->pool_id, pool_id, MEMRES_IPC_ID_SIZE);
  memcpy (handle->device_uuid, device_uuid, MEMRES_IPC_ID_SIZE);
  return handle;
}

/**
 * memres_ipc_handle_free:
 * @handle: (transfer full) (nullable): a handle
 *
 * Closes the handle's file descriptor (unless it was stolen with memres_ipc_handle_steal_fd())
 * and frees the handle. Resources imported from the handle stay valid: they hold their own
 * descriptor or mapping. Never fails; a failing close() is logged.
 *
 * Since: 1.0
 */
void
memres_ipc_handle_free (MemresIpcHandle *handle)
{
  if (handle == NULL)
    return;
  if (handle->fd >= 0 && close (handle->fd) != 0 && errno != EINTR)
    g_warning ("IPC handle: closing file descriptor %d failed: %s", handle->fd, g_strerror (errno));
  g_free (handle);
}

/**
 * memres_ipc_handle_get_fd:
 * @handle: a handle
 *
 * The POSIX file descriptor of the exported pool that @handle owns, to pass to a transport of the
 * application's own (memres_ipc_send_handle() does it over a Unix socket). Sets no error. A handle
 * is not locked: use one from one thread at a time.
 *
 * Returns: the file descriptor the handle owns (transfer none: do not close it; dup() it to keep
 *   a copy), or -1 after memres_ipc_handle_steal_fd()
 *
 * Since: 1.0
 */
gint
memres_ipc_handle_get_fd (const MemresIpcHandle *handle)
{
  g_return_val_if_fail (handle != NULL, -1);
  return handle->fd;
}

/**
 * memres_ipc_handle_steal_fd:
 * @handle: a handle
 *
 * Takes the file descriptor out of the handle: the caller owns it and must close it; the handle
 * keeps its kind, pool identity and device UUID but holds no descriptor any more (so it cannot
 * be sent or imported).
 *
 * Returns: (transfer full): the file descriptor, or -1 when it was already stolen
 *
 * Since: 1.0
 */
gint
memres_ipc_handle_steal_fd (MemresIpcHandle *handle)
{
  gint fd;

  g_return_val_if_fail (handle != NULL, -1);
  fd = handle->fd;
  handle->fd = -1;
  return fd;
}

/**
 * memres_ipc_handle_get_kind:
 * @handle: a handle
 *
 * The name of the kind that exported the pool, which the importing resource must match
 * (memres_resource_import_handle()). Sets no error; use a handle from one thread at a time.
 *
 * Returns: (transfer none): the kind name of the exporting resource
 *
 * Since: 1.0
 */
const char *
memres_ipc_handle_get_kind (const MemresIpcHandle *handle)
{
  g_return_val_if_fail (handle != NULL, NULL);
  return handle->kind;
}

/**
 * memres_ipc_handle_get_pool_id:
 * @handle: a handle
 *
 * The identity of the exported pool, %MEMRES_IPC_ID_SIZE bytes chosen by the exporter, which
 * buffer descriptors of that pool carry (memres_buffer_import() checks it). Valid while @handle
 * lives. Sets no error; use a handle from one thread at a time.
 *
 * Returns: (transfer none) (array fixed-size=16): the pool identity, %MEMRES_IPC_ID_SIZE bytes
 *
 * Since: 1.0
 */
const guint8 *
memres_ipc_handle_get_pool_id (const MemresIpcHandle *handle)
{
  g_return_val_if_fail (handle != NULL, NULL);
  return handle->pool_id;
}

/**
 * memres_ipc_handle_get_device_uuid:
 * @handle: a handle
 *
 * The UUID of the device the pool's memory is on, %MEMRES_IPC_ID_SIZE bytes (cuDeviceGetUuid()),
 * by which the importer finds the same device under its own ordinal
 * (memres_cuda_find_device_by_uuid()). Valid while @handle lives. Sets no error; use a handle from
 * one thread at a time.
 *
 * Returns: (transfer none) (array fixed-size=16): the UUID of the pool's device,
 *   %MEMRES_IPC_ID_SIZE bytes
 *
 * Since: 1.0
 */
const guint8 *
memres_ipc_handle_get_device_uuid (const MemresIpcHandle *handle)
{
  g_return_val_if_fail (handle != NULL, NULL);
  return handle->device_uuid;
}

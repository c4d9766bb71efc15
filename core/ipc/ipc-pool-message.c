/* memres - CUDA memory resources
 * ipc-pool-message.c: a pool buffer as one message, the message of the pools family
 * (ipc-message.c joins both families; kinds that share pools: ipc, pinned with ipc=true). The
 * message joins the two records a pool buffer is shared with, unchanged and checked by their own
 * strict codecs: the pool's handle record (MRIH, with the pool's fd) and the buffer's descriptor
 * (MRBD). Layout, little-endian, 240 bytes: magic u32 'MRPB', version u16 (1), length u16 (240),
 * the handle record (72 bytes), the descriptor (160 bytes); exactly one fd, the pool's. A pool
 * shared by its fabric handle (`ipc` with handle_type=fabric: a resource whose flags carry
 * MEMRES_MEMORY_FABRIC_HANDLES) sends version 2, 304 bytes: the same two records, then the
 * fabric record, the pool's 64-byte fabric handle; no fd (docs/distributed.md). The importer
 * imports the pool (or uses the resource it already imported from it) and then the buffer; the
 * fd stays the caller's. */
#include <string.h>

#include "ipc-private.h"

enum
{
  P_OFF_MAGIC = 0,
  P_OFF_VERSION = 4,
  P_OFF_LENGTH = 6,
  P_OFF_HANDLE = 8,
  P_OFF_DESCRIPTOR = P_OFF_HANDLE + MEMRES_HANDLE_RECORD_SIZE,
  P_OFF_FABRIC = P_OFF_DESCRIPTOR + MEMRES_BUFFER_DESCRIPTOR_SIZE,
  /* the descriptor's identity fields (ipc-descriptor.c): after its header and kind */
  D_OFF_POOL_ID = 8 + MEMRES_KIND_NAME_MAX,
  D_OFF_DEVICE_UUID = D_OFF_POOL_ID + MEMRES_IPC_ID_SIZE,
};
G_STATIC_ASSERT (P_OFF_FABRIC == MEMRES_POOL_MESSAGE_SIZE);
G_STATIC_ASSERT (MEMRES_POOL_MESSAGE_SIZE <= MEMRES_LAYOUT_MAX_SIZE);
G_STATIC_ASSERT (MEMRES_POOL_FABRIC_MESSAGE_SIZE <= MEMRES_CHUNKS_MESSAGE_MAX_SIZE);
G_STATIC_ASSERT (D_OFF_DEVICE_UUID + MEMRES_IPC_ID_SIZE == MEMRES_DESCRIPTOR_PREFIX_SIZE);

gsize
_memres_pool_message_declared_length (const guint8 *header)
{
  return (gsize) _memres_get_le (header + P_OFF_LENGTH, 2);
}

#define invalid(error, field, ...)                                                                 \
  _memres_set_invalid_record ((error), "pool buffer message", (field), __VA_ARGS__)

gboolean
_memres_pool_export_message (MemresBuffer *buf, MemresResource *owner, GBytes **bytes, gint **fds,
                             guint *n_fds, GError **error)
{
  guint8 message[MEMRES_POOL_FABRIC_MESSAGE_SIZE];
  gboolean fabric = owner->kind->ipc.export_fabric_handle != NULL
                    && (owner->info.flags & MEMRES_MEMORY_FABRIC_HANDLES);
  gsize size = fabric ? MEMRES_POOL_FABRIC_MESSAGE_SIZE : MEMRES_POOL_MESSAGE_SIZE;
  MemresBufferDescriptor descriptor;
  MemresIpcHandle *handle;

  memset (message, 0, sizeof message);
  if (!memres_buffer_export (buf, &descriptor, error))
    return FALSE;
  if (fabric)
    {
      if (!_memres_ipc_export_fabric_pool (owner, (MemresFabricHandle *) (message + P_OFF_FABRIC),
                                           error))
        return FALSE;
      /* the pool's identity is the one its buffers' descriptors carry */
      handle = _memres_ipc_handle_new_identity (owner->kind->name, descriptor.bytes + D_OFF_POOL_ID,
                                                descriptor.bytes + D_OFF_DEVICE_UUID);
    }
  else
    handle = memres_resource_export_handle (memres_buffer_get_resource (buf), error);
  if (handle == NULL)
    return FALSE;
  _memres_put_le (message + P_OFF_MAGIC, MEMRES_POOL_MESSAGE_MAGIC, 4);
  _memres_put_le (message + P_OFF_VERSION,
                  fabric ? MEMRES_POOL_FABRIC_MESSAGE_VERSION : MEMRES_POOL_MESSAGE_VERSION, 2);
  _memres_put_le (message + P_OFF_LENGTH, size, 2);
  _memres_ipc_handle_encode (handle, message + P_OFF_HANDLE);
  memcpy (message + P_OFF_DESCRIPTOR, descriptor.bytes, MEMRES_BUFFER_DESCRIPTOR_SIZE);
  *bytes = g_bytes_new (message, size);
  *fds = NULL;
  *n_fds = 0;
  if (!fabric)
    {
      *fds = g_new (gint, 1);
      (*fds)[0] = memres_ipc_handle_steal_fd (handle); /* the caller's now */
      *n_fds = 1;
    }
  memres_ipc_handle_free (handle);
  return TRUE;
}

/* Checks everything in @message that needs no import: framing, record order, the one fd (none
 * for a message of a fabric pool, version 2), both records by their codecs, and that the
 * descriptor belongs to the handle's pool. On success *handle holds the caller's fd (lent: steal
 * it back before freeing the handle), or no fd for a fabric pool's message. */
static gboolean
check_message (const guint8 *message, gsize length, const gint *fds, guint n_fds,
               MemresIpcHandle **handle, GError **error)
{
  guint64 version = _memres_get_le (message + P_OFF_VERSION, 2);
  guint64 declared = _memres_get_le (message + P_OFF_LENGTH, 2);
  guint64 first = _memres_get_le (message + P_OFF_HANDLE, 4);
  guint8 kind_field[MEMRES_KIND_NAME_MAX] = { 0 };
  char kind[MEMRES_KIND_NAME_MAX];
  MemresBufferExport info;
  MemresIpcHandle *h;
  const char *name;

  gboolean fabric = version == MEMRES_POOL_FABRIC_MESSAGE_VERSION;
  gsize expected = fabric ? MEMRES_POOL_FABRIC_MESSAGE_SIZE : MEMRES_POOL_MESSAGE_SIZE;

  if (version != MEMRES_POOL_MESSAGE_VERSION && !fabric)
    return invalid (
        error, "version", "%u (this library reads version %d, and %d for a pool of fabric handles)",
        (guint) version, MEMRES_POOL_MESSAGE_VERSION, MEMRES_POOL_FABRIC_MESSAGE_VERSION);
  if (declared != expected || length != expected)
    return invalid (error, "length",
                    "%u, %" G_GSIZE_FORMAT " bytes received (expected %" G_GSIZE_FORMAT
                    " for version %u)",
                    (guint) declared, length, expected, (guint) version);
  if (first == MEMRES_DESCRIPTOR_MAGIC)
    return invalid (error, "records",
                    "the buffer's descriptor comes before the pool's handle (expected the "
                    "handle record first)");
  if (n_fds != (fabric ? 0 : 1))
    return invalid (error, "fds", "%u file descriptors attached (expected %s)", n_fds,
                    fabric ? "none: a pool of fabric handles is named by bytes" : "1, the pool's");
  h = _memres_ipc_handle_decode (message + P_OFF_HANDLE, fabric ? -1 : fds[0], error);
  if (h == NULL)
    return FALSE;
  name = memres_ipc_handle_get_kind (h);
  memcpy (kind_field, name, strlen (name)); /* checked: a kind name, shorter than the field */
  if (!_memres_descriptor_decode (message + P_OFF_DESCRIPTOR, MEMRES_BUFFER_DESCRIPTOR_SIZE,
                                  kind_field, kind, &info, error))
    goto fail;
  if (strcmp (kind, name) != 0)
    {
      invalid (error, "kind", "the buffer's kind \"%s\" is not the pool's \"%s\"", kind, name);
      goto fail;
    }
  if (memcmp (info.pool_id, memres_ipc_handle_get_pool_id (h), MEMRES_IPC_ID_SIZE) != 0
      || memcmp (info.device_uuid, memres_ipc_handle_get_device_uuid (h), MEMRES_IPC_ID_SIZE) != 0)
    {
      invalid (error, "pool", "the buffer's pool id or device UUID is not the pool's");
      goto fail;
    }
  *handle = h;
  return TRUE;

fail:
  memres_ipc_handle_steal_fd (h); /* the fd stays the caller's */
  memres_ipc_handle_free (h);
  return FALSE;
}

MemresBuffer *
_memres_pool_import_message (const guint8 *message, gsize length, const gint *fds, guint n_fds,
                             MemresResource *importer, MemresStream stream, GError **error)
{
  MemresIpcHandle *handle = NULL;
  MemresResource *pool = NULL;
  MemresBuffer *buf = NULL;
  gboolean fabric;

  if (!check_message (message, length, fds, n_fds, &handle, error))
    return NULL;
  fabric = _memres_get_le (message + P_OFF_VERSION, 2) == MEMRES_POOL_FABRIC_MESSAGE_VERSION;
  if (importer != NULL)
    {
      const MemresIpcImport *st = _memres_ipc_import (importer);

      if (st == NULL
          || memcmp (st->pool_id, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE) != 0)
        {
          invalid (error, "importer",
                   "its pool is not the one the importer (kind \"%s\") was imported from (pass "
                   "NULL to import the pool)",
                   importer->kind->name);
          goto out;
        }
      pool = memres_resource_ref (importer);
    }
  else
    {
      pool = fabric ? _memres_ipc_import_fabric_pool (
                 handle, (const MemresFabricHandle *) (message + P_OFF_FABRIC), error)
                    : memres_resource_import_handle (handle, error);
      if (pool == NULL)
        goto out;
    }
  buf = memres_buffer_import (pool, message + P_OFF_DESCRIPTOR, MEMRES_BUFFER_DESCRIPTOR_SIZE,
                              stream, error);

out:
  g_clear_pointer (&pool, memres_resource_unref);
  memres_ipc_handle_steal_fd (handle); /* the caller's fd, not closed here */
  memres_ipc_handle_free (handle);
  return buf;
}

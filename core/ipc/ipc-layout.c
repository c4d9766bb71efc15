/* memres - CUDA memory resources
 * ipc-layout.c: the codec of the layout record that travels with a buffer's chunk fds
 * (memres_ipc_send_buffer()). The bytes come from another process: decode trusts nothing, reads
 * nothing outside @data and names the field that failed. The record's layout is in
 * ipc-private.h. */
#include <string.h>

#include "ipc-private.h"

enum
{
  OFF_MAGIC = 0,
  OFF_VERSION = 4,
  OFF_LENGTH = 6,
  OFF_KIND = 8,
  OFF_DEVICE_UUID = OFF_KIND + MEMRES_KIND_NAME_MAX,      /* 40 */
  OFF_HANDLE_TYPE = OFF_DEVICE_UUID + MEMRES_IPC_ID_SIZE, /* 56 */
  OFF_LOCATION_TYPE = OFF_HANDLE_TYPE + 4,                /* 60 */
  OFF_GRANULARITY = OFF_LOCATION_TYPE + 4,                /* 64 */
  OFF_SIZE = OFF_GRANULARITY + 8,                         /* 72 */
  OFF_N_CHUNKS = OFF_SIZE + 8,                            /* 80 */
  OFF_RESERVED = OFF_N_CHUNKS + 4,                        /* 84 */
  OFF_CHUNK_SIZES = OFF_RESERVED + 4,                     /* 88 */
};

G_STATIC_ASSERT (OFF_CHUNK_SIZES == MEMRES_LAYOUT_HEADER_SIZE);
G_STATIC_ASSERT (MEMRES_LAYOUT_MAX_SIZE <= G_MAXUINT16);

#define invalid(error, field, ...)                                                                 \
  _memres_set_invalid_record ((error), "buffer layout", (field), __VA_ARGS__)

/* Checks the content of @chunks as far as the core can without knowing the kind: one to
 * MEMRES_IPC_MAX_CHUNKS chunks of POSIX-fd or fabric handles, each a positive multiple of a
 * power-of-two granularity, whose sum neither overflows nor falls short of a positive size. The fds
 * are not looked at. MEMRES_ERROR_INVALID_DESCRIPTOR naming the field otherwise. */
gboolean
_memres_layout_check (const MemresBufferChunks *chunks, GError **error)
{
  guint64 g = chunks->granularity;
  guint64 total = 0;

  if (chunks->handle_type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
      && chunks->handle_type != CU_MEM_HANDLE_TYPE_FABRIC)
    return invalid (error, "handle_type",
                    "%u (only POSIX file descriptors, %d, and fabric handles, %d, are sent)",
                    chunks->handle_type, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                    CU_MEM_HANDLE_TYPE_FABRIC);
  if (chunks->n_chunks == 0 || chunks->n_chunks > MEMRES_IPC_MAX_CHUNKS)
    return invalid (error, "n_chunks", "%u (1 to %d expected)", chunks->n_chunks,
                    MEMRES_IPC_MAX_CHUNKS);
  if (chunks->reserved != 0)
    return invalid (error, "reserved", "0x%08x (expected 0)", chunks->reserved);
  if (g == 0 || (g & (g - 1)) != 0)
    return invalid (error, "granularity", "%" G_GUINT64_FORMAT " bytes, not a power of two", g);
  for (guint i = 0; i < chunks->n_chunks; i++)
    {
      guint64 c = chunks->chunk_sizes[i];

      if (c == 0 || (c & (g - 1)) != 0)
        return invalid (error, "chunk size",
                        "chunk %u of %u: %" G_GUINT64_FORMAT
                        " bytes (a positive multiple of the granularity, %" G_GUINT64_FORMAT
                        " bytes, expected)",
                        i, chunks->n_chunks, c, g);
      if (c > G_MAXSIZE - total)
        return invalid (error, "chunk size",
                        "chunk %u of %u: %" G_GUINT64_FORMAT
                        " bytes: the sum of the sizes overflows",
                        i, chunks->n_chunks, c);
      total += c;
    }
  if (chunks->size == 0 || chunks->size > total)
    return invalid (error, "size",
                    "%" G_GUINT64_FORMAT " bytes (1 to the chunks' %" G_GUINT64_FORMAT
                    " bytes expected)",
                    chunks->size, total);
  return TRUE;
}

/* Encodes @chunks (which passed _memres_layout_check()) of a buffer of kind @kind into @out.
 * Returns the record's length. Never fails. */
gsize
_memres_layout_encode (const char *kind, const MemresBufferChunks *chunks,
                       guint8 out[MEMRES_LAYOUT_MAX_SIZE])
{
  gsize length = MEMRES_LAYOUT_HEADER_SIZE + 8 * (gsize) chunks->n_chunks;

  g_return_val_if_fail (kind != NULL && strlen (kind) < MEMRES_KIND_NAME_MAX, 0);
  g_return_val_if_fail (chunks->n_chunks <= MEMRES_IPC_MAX_CHUNKS, 0);

  memset (out, 0, MEMRES_LAYOUT_MAX_SIZE);
  _memres_put_le (out + OFF_MAGIC, MEMRES_LAYOUT_MAGIC, 4);
  _memres_put_le (out + OFF_VERSION, MEMRES_LAYOUT_VERSION, 2);
  _memres_put_le (out + OFF_LENGTH, length, 2);
  memcpy (out + OFF_KIND, kind, strlen (kind));
  memcpy (out + OFF_DEVICE_UUID, chunks->device_uuid, MEMRES_IPC_ID_SIZE);
  _memres_put_le (out + OFF_HANDLE_TYPE, chunks->handle_type, 4);
  _memres_put_le (out + OFF_LOCATION_TYPE, chunks->location_type, 4);
  _memres_put_le (out + OFF_GRANULARITY, chunks->granularity, 8);
  _memres_put_le (out + OFF_SIZE, chunks->size, 8);
  _memres_put_le (out + OFF_N_CHUNKS, chunks->n_chunks, 4);
  for (guint i = 0; i < chunks->n_chunks; i++)
    _memres_put_le (out + OFF_CHUNK_SIZES + 8 * i, chunks->chunk_sizes[i], 8);
  return length;
}

/* The length the record starting at @header (MEMRES_LAYOUT_HEADER_SIZE bytes) declares. */
gsize
_memres_layout_declared_length (const guint8 *header)
{
  return (gsize) _memres_get_le (header + OFF_LENGTH, 2);
}

/* The bytes of fabric handles that follow the record starting at @header
 * (MEMRES_LAYOUT_HEADER_SIZE bytes): MEMRES_FABRIC_HANDLE_SIZE per chunk for a record of fabric
 * handles, 0 for any other; a chunk count out of range gives a length no message matches. */
gsize
_memres_layout_fabric_length (const guint8 *header)
{
  guint64 n = _memres_get_le (header + OFF_N_CHUNKS, 4);

  if (_memres_get_le (header + OFF_HANDLE_TYPE, 4) != CU_MEM_HANDLE_TYPE_FABRIC)
    return 0;
  return MEMRES_FABRIC_HANDLE_SIZE * (gsize) MIN (n, MEMRES_IPC_MAX_CHUNKS + 1);
}

/* Decodes and validates the @length bytes at @data (untrusted). On success fills @kind
 * (NUL-terminated) and @chunks (every fd -1); on failure sets MEMRES_ERROR_INVALID_DESCRIPTOR
 * naming the field and leaves both untouched. Reads no byte outside @data[0 .. length). */
gboolean
_memres_layout_decode (gconstpointer data, gsize length, char kind[MEMRES_KIND_NAME_MAX],
                       MemresBufferChunks *chunks, GError **error)
{
  const guint8 *b = data;
  MemresBufferChunks c;
  guint32 magic, version, record_length;

  g_return_val_if_fail (kind != NULL && chunks != NULL, FALSE);

  if (b == NULL && length > 0)
    return invalid (error, "input", "no data");
  if (length < MEMRES_LAYOUT_HEADER_SIZE)
    return invalid (error, "input length", "%" G_GSIZE_FORMAT " bytes, truncated (at least %d)",
                    length, MEMRES_LAYOUT_HEADER_SIZE);
  magic = (guint32) _memres_get_le (b + OFF_MAGIC, 4);
  if (magic != MEMRES_LAYOUT_MAGIC)
    return invalid (error, "magic", "0x%08x (expected 0x%08x)", magic, MEMRES_LAYOUT_MAGIC);
  version = (guint32) _memres_get_le (b + OFF_VERSION, 2);
  if (version != MEMRES_LAYOUT_VERSION)
    return invalid (error, "version", "%u (this library reads version %d)", version,
                    MEMRES_LAYOUT_VERSION);

  memset (&c, 0, sizeof c);
  c.n_chunks = (guint32) _memres_get_le (b + OFF_N_CHUNKS, 4);
  if (c.n_chunks == 0 || c.n_chunks > MEMRES_IPC_MAX_CHUNKS)
    return invalid (error, "n_chunks", "%u (1 to %d expected)", c.n_chunks, MEMRES_IPC_MAX_CHUNKS);
  record_length = (guint32) _memres_get_le (b + OFF_LENGTH, 2);
  if (record_length != MEMRES_LAYOUT_HEADER_SIZE + 8 * c.n_chunks)
    return invalid (error, "length", "%u (expected %u for %u chunks)", record_length,
                    MEMRES_LAYOUT_HEADER_SIZE + 8 * c.n_chunks, c.n_chunks);
  if (length != record_length)
    return invalid (error, "input length", "%" G_GSIZE_FORMAT " bytes, the record declares %u",
                    length, record_length);

  if (!_memres_check_kind_field (b + OFF_KIND, "buffer layout", error))
    return FALSE;

  memcpy (c.device_uuid, b + OFF_DEVICE_UUID, MEMRES_IPC_ID_SIZE);
  c.handle_type = (guint32) _memres_get_le (b + OFF_HANDLE_TYPE, 4);
  c.location_type = (guint32) _memres_get_le (b + OFF_LOCATION_TYPE, 4);
  c.granularity = _memres_get_le (b + OFF_GRANULARITY, 8);
  c.size = _memres_get_le (b + OFF_SIZE, 8);
  c.reserved = (guint32) _memres_get_le (b + OFF_RESERVED, 4);
  for (guint i = 0; i < c.n_chunks; i++)
    c.chunk_sizes[i] = _memres_get_le (b + OFF_CHUNK_SIZES + 8 * i, 8);
  for (guint i = 0; i < MEMRES_IPC_MAX_CHUNKS; i++)
    c.fds[i] = -1;
  if (!_memres_layout_check (&c, error))
    return FALSE;

  memcpy (kind, b + OFF_KIND, MEMRES_KIND_NAME_MAX);
  *chunks = c;
  return TRUE;
}

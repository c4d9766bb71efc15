/* memres - CUDA memory resources
 * ipc-descriptor.c: the buffer descriptor codec. The bytes come from another process: decode
 * trusts nothing, reads nothing outside @data and names the field that failed. */
#include <string.h>

#include "ipc-private.h"

/* Byte offsets of the fields (see ipc-private.h for the layout). */
enum
{
  OFF_MAGIC = 0,
  OFF_VERSION = 4,
  OFF_LENGTH = 6,
  OFF_KIND = 8,
  OFF_POOL_ID = OFF_KIND + MEMRES_KIND_NAME_MAX,      /* 40 */
  OFF_DEVICE_UUID = OFF_POOL_ID + MEMRES_IPC_ID_SIZE, /* 56 */
  OFF_OFFSET = OFF_DEVICE_UUID + MEMRES_IPC_ID_SIZE,  /* 72 */
  OFF_SIZE = OFF_OFFSET + 8,                          /* 80 */
  OFF_EXPORT_DATA = OFF_SIZE + 8,                     /* 88 */
  OFF_RESERVED = OFF_EXPORT_DATA + 64,                /* 152 */
  DESCRIPTOR_END = OFF_RESERVED + 8,                  /* 160 */
};

G_STATIC_ASSERT (DESCRIPTOR_END == MEMRES_BUFFER_DESCRIPTOR_SIZE);
G_STATIC_ASSERT (OFF_OFFSET == MEMRES_DESCRIPTOR_PREFIX_SIZE);
G_STATIC_ASSERT (sizeof (((MemresBufferExport *) NULL)->export_data) == 64);

static void
put_header (guint8 *b)
{
  _memres_put_le (b + OFF_MAGIC, MEMRES_DESCRIPTOR_MAGIC, 4);
  _memres_put_le (b + OFF_VERSION, MEMRES_DESCRIPTOR_VERSION, 2);
  _memres_put_le (b + OFF_LENGTH, MEMRES_BUFFER_DESCRIPTOR_SIZE, 2);
}

/* Encodes @info of a buffer of kind @kind (a valid kind name, shorter than
 * MEMRES_KIND_NAME_MAX) into the 160-byte little-endian record. Never fails. */
void
_memres_descriptor_encode (const char *kind, const MemresBufferExport *info,
                           MemresBufferDescriptor *out)
{
  guint8 *b = out->bytes;

  g_return_if_fail (kind != NULL && strlen (kind) < MEMRES_KIND_NAME_MAX);

  memset (out, 0, sizeof *out);
  put_header (b);
  memcpy (b + OFF_KIND, kind, strlen (kind));
  memcpy (b + OFF_POOL_ID, info->pool_id, MEMRES_IPC_ID_SIZE);
  memcpy (b + OFF_DEVICE_UUID, info->device_uuid, MEMRES_IPC_ID_SIZE);
  _memres_put_le (b + OFF_OFFSET, info->offset, 8);
  _memres_put_le (b + OFF_SIZE, info->size, 8);
  memcpy (b + OFF_EXPORT_DATA, info->export_data, sizeof info->export_data);
  /* reserved: zero from the memset */
}

/* The first MEMRES_DESCRIPTOR_PREFIX_SIZE bytes of every descriptor of a buffer of the kind
 * whose NUL-padded name is @kind_field, in the pool @pool_id on the device @device_uuid: the
 * header, then those three fields as _memres_descriptor_encode() writes them. */
void
_memres_descriptor_prefix (const guint8 kind_field[MEMRES_KIND_NAME_MAX],
                           const guint8 pool_id[MEMRES_IPC_ID_SIZE],
                           const guint8 device_uuid[MEMRES_IPC_ID_SIZE],
                           guint8 prefix[MEMRES_DESCRIPTOR_PREFIX_SIZE])
{
  put_header (prefix);
  memcpy (prefix + OFF_KIND, kind_field, MEMRES_KIND_NAME_MAX);
  memcpy (prefix + OFF_POOL_ID, pool_id, MEMRES_IPC_ID_SIZE);
  memcpy (prefix + OFF_DEVICE_UUID, device_uuid, MEMRES_IPC_ID_SIZE);
}

/* Sets MEMRES_ERROR_INVALID_DESCRIPTOR: "invalid @what: @field: detail". Shared by the codecs
 * of the records that come from other processes (buffer descriptors, VMM layouts). Returns
 * FALSE. */
gboolean
_memres_set_invalid_record (GError **error, const char *what, const char *field, const char *format,
                            ...)
{
  va_list args;
  g_autofree char *detail = NULL;

  va_start (args, format);
  detail = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR, "invalid %s: %s: %s", what,
               field, detail);
  return FALSE;
}

#define invalid(error, field, ...)                                                                 \
  _memres_set_invalid_record ((error), "buffer descriptor", (field), __VA_ARGS__)

/* The first 8 bytes of every valid descriptor: magic, version, length. */
static const guint8 header[8] = {
  MEMRES_DESCRIPTOR_MAGIC & 0xff,         (MEMRES_DESCRIPTOR_MAGIC >> 8) & 0xff,
  (MEMRES_DESCRIPTOR_MAGIC >> 16) & 0xff, MEMRES_DESCRIPTOR_MAGIC >> 24,
  MEMRES_DESCRIPTOR_VERSION & 0xff,       MEMRES_DESCRIPTOR_VERSION >> 8,
  MEMRES_BUFFER_DESCRIPTOR_SIZE & 0xff,   MEMRES_BUFFER_DESCRIPTOR_SIZE >> 8,
};

static gboolean
check_header (const guint8 *b, GError **error)
{
  guint32 magic;
  guint16 version, record_length;

  if (memcmp (b, header, sizeof header) == 0)
    return TRUE;
  magic = (guint32) _memres_get_le (b + OFF_MAGIC, 4);
  if (magic != MEMRES_DESCRIPTOR_MAGIC)
    return invalid (error, "magic", "0x%08x (expected 0x%08x)", magic, MEMRES_DESCRIPTOR_MAGIC);
  version = (guint16) _memres_get_le (b + OFF_VERSION, 2);
  if (version != MEMRES_DESCRIPTOR_VERSION)
    return invalid (error, "version", "%u (this library reads version %d)", version,
                    MEMRES_DESCRIPTOR_VERSION);
  record_length = (guint16) _memres_get_le (b + OFF_LENGTH, 2);
  return invalid (error, "length", "%u (expected %d)", record_length,
                  MEMRES_BUFFER_DESCRIPTOR_SIZE);
}

/* Checks the kind field of a record of @what (MEMRES_KIND_NAME_MAX bytes at @field): a kind
 * name, NUL-terminated and NUL-padded. Shared by the codecs of records from other processes. */
gboolean
_memres_check_kind_field (const guint8 *field, const char *what, GError **error)
{
  const guint8 *nul = memchr (field, '\0', MEMRES_KIND_NAME_MAX);

  if (nul == NULL)
    return _memres_set_invalid_record (error, what, "kind", "not NUL-terminated within %d bytes",
                                       MEMRES_KIND_NAME_MAX);
  for (const guint8 *p = nul; p < field + MEMRES_KIND_NAME_MAX; p++)
    if (*p != 0)
      return _memres_set_invalid_record (error, what, "kind", "padding after the name is not zero");
  if (!_memres_kind_name_is_valid ((const char *) field))
    return _memres_set_invalid_record (error, what, "kind",
                                       "not a kind name (expected [a-z][a-z0-9_]*)");
  return TRUE;
}

static gboolean
check_kind (const guint8 *b, const guint8 *expected_kind, GError **error)
{
  if (expected_kind != NULL && memcmp (b + OFF_KIND, expected_kind, MEMRES_KIND_NAME_MAX) == 0)
    return TRUE; /* a registered kind's name, so valid */
  return _memres_check_kind_field (b + OFF_KIND, "buffer descriptor", error);
}

/* The fields of @info from a validated descriptor @b whose offset and size were read. */
static void
fill_info (const guint8 *b, guint64 offset, guint64 size, MemresBufferExport *info)
{
  memcpy (info->pool_id, b + OFF_POOL_ID, MEMRES_IPC_ID_SIZE);
  memcpy (info->device_uuid, b + OFF_DEVICE_UUID, MEMRES_IPC_ID_SIZE);
  info->offset = offset;
  info->size = size;
  memcpy (info->export_data, b + OFF_EXPORT_DATA, sizeof info->export_data);
}

/* Decodes and validates @length bytes at @data (untrusted). On success fills @kind (NUL-
 * terminated) and @info; on failure sets MEMRES_ERROR_INVALID_DESCRIPTOR naming the field and
 * leaves @kind and @info untouched. Reads no byte outside @data[0 .. length). @expected_kind,
 * when not NULL, is the kind field (MEMRES_KIND_NAME_MAX bytes, NUL-padded) of a registered
 * kind the caller expects: a descriptor carrying exactly it skips the kind name checks (the
 * importer's hot path). */
gboolean
_memres_descriptor_decode (gconstpointer data, gsize length, const guint8 *expected_kind,
                           char kind[MEMRES_KIND_NAME_MAX], MemresBufferExport *info,
                           GError **error)
{
  const guint8 *b = data;
  guint64 offset, size, reserved;

  g_return_val_if_fail (kind != NULL && info != NULL, FALSE);

  if (b == NULL && length > 0)
    return invalid (error, "input", "no data");
  if (length < MEMRES_BUFFER_DESCRIPTOR_SIZE)
    return invalid (error, "input length", "%" G_GSIZE_FORMAT " bytes, truncated (expected %d)",
                    length, MEMRES_BUFFER_DESCRIPTOR_SIZE);
  if (length > MEMRES_BUFFER_DESCRIPTOR_SIZE)
    return invalid (error, "input length", "%" G_GSIZE_FORMAT " bytes, oversized (expected %d)",
                    length, MEMRES_BUFFER_DESCRIPTOR_SIZE);
  if (!check_header (b, error) || !check_kind (b, expected_kind, error))
    return FALSE;

  reserved = _memres_get_le (b + OFF_RESERVED, 8);
  if (reserved != 0)
    for (int i = 0; i < 8; i++)
      if (b[OFF_RESERVED + i] != 0)
        return invalid (error, "reserved", "byte %d is 0x%02x (expected 0)", i,
                        b[OFF_RESERVED + i]);

  offset = _memres_get_le (b + OFF_OFFSET, 8);
  size = _memres_get_le (b + OFF_SIZE, 8);
  if (size == 0)
    return invalid (error, "size", "0 bytes (an empty buffer is never exported)");
  if (offset > G_MAXUINT64 - size)
    return invalid (error, "offset",
                    "offset %" G_GUINT64_FORMAT " + size %" G_GUINT64_FORMAT " overflows", offset,
                    size);
  if (size > G_MAXSIZE)
    return invalid (error, "size", "%" G_GUINT64_FORMAT " bytes do not fit in this process", size);

  memcpy (kind, b + OFF_KIND, MEMRES_KIND_NAME_MAX);
  fill_info (b, offset, size, info);
  return TRUE;
}

/* Whether the MEMRES_DESCRIPTOR_PREFIX_SIZE bytes at @a and @b are equal: word by word with
 * no branch but the loop's (memcmp of 72 bytes is a call into libc through the PLT). */
static inline gboolean
prefix_equal (const guint8 *a, const guint8 *b)
{
  guint64 diff = 0;

  G_STATIC_ASSERT (MEMRES_DESCRIPTOR_PREFIX_SIZE % 8 == 0);
  for (gsize i = 0; i < MEMRES_DESCRIPTOR_PREFIX_SIZE; i += 8)
    {
      guint64 x, y;

      memcpy (&x, a + i, 8);
      memcpy (&y, b + i, 8);
      diff |= x ^ y;
    }
  return diff == 0;
}

/* The importer's hot path: decodes @length bytes at @data into @info when they are a valid
 * descriptor that starts with @prefix (_memres_descriptor_prefix() of the importing pool), and
 * returns FALSE, setting nothing, for anything else. It accepts exactly the descriptors that
 * _memres_descriptor_decode() accepts and whose kind, pool and device are the prefix's, with the
 * same @info; on FALSE the caller runs the full decode for the error. */
gboolean
_memres_descriptor_decode_pool (gconstpointer data, gsize length,
                                const guint8 prefix[MEMRES_DESCRIPTOR_PREFIX_SIZE],
                                MemresBufferExport *info)
{
  const guint8 *b = data;
  guint64 offset, size;

  if (length != MEMRES_BUFFER_DESCRIPTOR_SIZE || b == NULL || !prefix_equal (b, prefix)
      || _memres_get_le (b + OFF_RESERVED, 8) != 0)
    return FALSE;
  offset = _memres_get_le (b + OFF_OFFSET, 8);
  size = _memres_get_le (b + OFF_SIZE, 8);
  if (size == 0 || offset > G_MAXUINT64 - size || size > G_MAXSIZE)
    return FALSE;
  fill_info (b, offset, size, info);
  return TRUE;
}

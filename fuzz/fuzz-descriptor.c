/* memres - CUDA memory resources
 * fuzz-descriptor.c: libFuzzer target for the buffer descriptor codec. Any input must decode
 * without a crash or an out-of-bounds read; an input that decodes must be canonical, that is
 * encode (decode (input)) == input, and every failure must be MEMRES_ERROR_INVALID_DESCRIPTOR.
 * The importer's shortcuts must decide as the full decode does: the expected-kind one, and the
 * pool-prefix one (_memres_descriptor_decode_pool), given the prefix of the input's own pool and
 * device (the bytes where they would be) and of its kind when it decodes, else of "ipc". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc-private.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char kind[MEMRES_KIND_NAME_MAX];
  MemresBufferExport info;
  MemresBufferDescriptor again;
  GError *error = NULL;

  static const guint8 ipc_kind[MEMRES_KIND_NAME_MAX] = "ipc";
  char kind_fast[MEMRES_KIND_NAME_MAX];
  MemresBufferExport info_fast;
  gboolean ok_fast, ok_pool, ok;
  guint8 pool_id[MEMRES_IPC_ID_SIZE] = { 0 }, device_uuid[MEMRES_IPC_ID_SIZE] = { 0 };
  guint8 prefix[MEMRES_DESCRIPTOR_PREFIX_SIZE];
  MemresBufferExport info_pool;

  /* The importer's shortcut for an expected kind decides exactly as the full checks do. */
  ok_fast = _memres_descriptor_decode (data, size, ipc_kind, kind_fast, &info_fast, NULL);
  ok = _memres_descriptor_decode (data, size, NULL, kind, &info, &error);
  if (size >= MEMRES_DESCRIPTOR_PREFIX_SIZE)
    {
      memcpy (pool_id, data + 8 + MEMRES_KIND_NAME_MAX, MEMRES_IPC_ID_SIZE);
      memcpy (device_uuid, data + 8 + MEMRES_KIND_NAME_MAX + MEMRES_IPC_ID_SIZE,
              MEMRES_IPC_ID_SIZE);
    }
  _memres_descriptor_prefix (ok ? (const guint8 *) kind : ipc_kind, pool_id, device_uuid, prefix);
  ok_pool = _memres_descriptor_decode_pool (data, size, prefix, &info_pool);
  if (ok_pool != ok || (ok && memcmp (&info, &info_pool, sizeof info) != 0))
    abort ();
  if (!ok)
    {
      if (ok_fast)
        abort ();
      if (error == NULL || !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR))
        abort ();
      g_error_free (error);
      return 0;
    }
  if (!ok_fast || memcmp (kind, kind_fast, sizeof kind) != 0
      || memcmp (&info, &info_fast, sizeof info) != 0)
    abort ();
  if (error != NULL || size != MEMRES_BUFFER_DESCRIPTOR_SIZE
      || memchr (kind, '\0', sizeof kind) == NULL)
    abort ();
  if (info.size == 0 || info.offset + info.size < info.offset)
    abort ();
  _memres_descriptor_encode (kind, &info, &again);
  if (memcmp (again.bytes, data, size) != 0)
    abort ();
  return 0;
}

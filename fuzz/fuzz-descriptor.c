/* memres - CUDA memory resources
 * fuzz-descriptor.c: libFuzzer target for the buffer descriptor codec. Any input must decode
 * without a crash or an out-of-bounds read; an input that decodes must be canonical, that is
 * encode (decode (input)) == input, and every failure must be MEMRES_ERROR_INVALID_DESCRIPTOR. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memres-private.h"

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
  gboolean ok_fast;

  /* The importer's shortcut for an expected kind decides exactly as the full checks do. */
  ok_fast = _memres_descriptor_decode (data, size, ipc_kind, kind_fast, &info_fast, NULL);
  if (!_memres_descriptor_decode (data, size, NULL, kind, &info, &error))
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

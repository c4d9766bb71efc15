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

  if (!_memres_descriptor_decode (data, size, kind, &info, &error))
    {
      if (error == NULL || !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR))
        abort ();
      g_error_free (error);
      return 0;
    }
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

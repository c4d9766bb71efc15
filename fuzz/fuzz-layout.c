/* memres - CUDA memory resources
 * fuzz-layout.c: libFuzzer target for the codec of the layout record that travels with a
 * buffer's chunk fds (memres_ipc_receive_buffer()). Any input must decode without a crash or an
 * out-of-bounds read; an input that decodes must be canonical, that is encode (decode (input))
 * == input, describe chunks whose sizes add up without overflow to at least the buffer's size,
 * and every failure must be MEMRES_ERROR_INVALID_DESCRIPTOR. The length of the fabric handles a
 * header announces (a message of fabric handles) stays within 64 × (MEMRES_IPC_MAX_CHUNKS + 1). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc-private.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char kind[MEMRES_KIND_NAME_MAX];
  MemresBufferChunks chunks;
  guint8 again[MEMRES_LAYOUT_MAX_SIZE];
  GError *error = NULL;
  guint64 total = 0;

  if (size >= MEMRES_LAYOUT_HEADER_SIZE
      && _memres_layout_fabric_length (data)
             > MEMRES_FABRIC_HANDLE_SIZE * (gsize) (MEMRES_IPC_MAX_CHUNKS + 1))
    abort ();
  if (!_memres_layout_decode (data, size, kind, &chunks, &error))
    {
      if (error == NULL || !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR))
        abort ();
      g_error_free (error);
      return 0;
    }
  if (error != NULL || memchr (kind, '\0', sizeof kind) == NULL || chunks.n_chunks == 0
      || chunks.n_chunks > MEMRES_IPC_MAX_CHUNKS)
    abort ();
  for (guint i = 0; i < chunks.n_chunks; i++)
    {
      if (chunks.chunk_sizes[i] == 0 || chunks.chunk_sizes[i] > G_MAXUINT64 - total
          || chunks.fds[i] != -1)
        abort ();
      total += chunks.chunk_sizes[i];
    }
  if (chunks.size == 0 || chunks.size > total)
    abort ();
  if (_memres_layout_encode (kind, &chunks, again) != size || memcmp (again, data, size) != 0)
    abort ();
  return 0;
}

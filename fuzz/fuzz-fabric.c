/* memres - CUDA memory resources
 * fuzz-fabric.c: libFuzzer target for a buffer's message of fabric handles (issue 37: the bytes
 * that cross nodes with no fd and no peer identity), through memres_buffer_import_message() as
 * an importer receives it: the framing (ipc-message.c), the layout record and the handles after
 * it (ipc-chunks.c, ipc-layout.c), up to the kind's import_fabric_chunks slot. The importer is a
 * kind of this file's (no driver): its slot checks what the core hands it and then refuses, so
 * that no memory is imported. Any input must be refused without a crash or an out-of-bounds
 * read, with MEMRES_ERROR_INVALID_DESCRIPTOR (or the slot's own refusal); an input that reaches
 * the slot must be a canonical record of fabric handles of the importer's kind (the record
 * encodes back to the input's first bytes) followed by exactly 64 bytes a chunk, handed to the
 * slot as they came. The slot is never reached with file descriptors (n_fds is 0 here) or a
 * record of POSIX-fd handles.
 *
 * An input that starts with a pool buffer message's magic ('MRPB') is the message of a pool of
 * fabric handles (`ipc` with handle_type=fabric: version 2, the handle record, the descriptor,
 * the pool's 64-byte fabric handle, no fd), imported with no importer, as a receiver of a pool
 * buffer does: the framing (ipc-pool-message.c), both records by their codecs, their identities
 * against each other, up to the kind's import_fabric_handle slot (this file's kind refuses it).
 * An input that reaches that slot must be exactly 304 bytes of version 2 whose handle record
 * encodes back from the handle the slot gets (which holds no fd) and whose last 64 bytes are the
 * fabric handle the slot gets. Refusals before it: MEMRES_ERROR_INVALID_DESCRIPTOR, or the
 * kind's lookup (a kind no plugin provides: MEMRES_ERROR_NOT_FOUND; one that cannot import a
 * fabric pool: MEMRES_ERROR_NOT_SUPPORTED). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/ipc-private.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define FUZZ_KIND "fuzzfabric"

static const uint8_t *input;
static size_t input_size;
static gboolean reached;

static gboolean
ff_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
ff_finalize (MemresResource *mr)
{
}

static gboolean
ff_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "fuzz kind: no allocation");
  return FALSE;
}

static gboolean
ff_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  abort (); /* nothing is ever allocated or imported */
}

static void
ff_query (MemresResource *mr, MemresResourceInfo *info)
{
  /* no device: a fuzzer has no driver (the core's part of an import asks none) */
  info->device = -1;
  info->flags
      = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_IPC_ENABLED | MEMRES_MEMORY_FABRIC_HANDLES;
}

static gboolean
ff_export_fabric_chunks (MemresResource *mr, const MemresAllocation *alloc, MemresBufferChunks *out,
                         MemresFabricHandle *handles, GError **error)
{
  abort (); /* nothing is exported here */
}

/* What the core hands the slot of a message it let through. */
static gboolean
ff_import_fabric_chunks (MemresResource *mr, const MemresBufferChunks *in,
                         const MemresFabricHandle *handles, MemresStream stream,
                         MemresAllocation *alloc, GError **error)
{
  guint8 record[MEMRES_LAYOUT_MAX_SIZE];
  gsize length;

  reached = TRUE;
  if (in->handle_type != CU_MEM_HANDLE_TYPE_FABRIC || in->n_chunks == 0
      || in->n_chunks > MEMRES_IPC_MAX_CHUNKS || !_memres_layout_check (in, NULL))
    abort ();
  for (guint i = 0; i < in->n_chunks; i++)
    if (in->fds[i] != -1)
      abort ();
  length = _memres_layout_encode (FUZZ_KIND, in, record);
  if (length + MEMRES_FABRIC_HANDLE_SIZE * (gsize) in->n_chunks != input_size
      || memcmp (record, input, length) != 0
      || memcmp (handles, input + length, MEMRES_FABRIC_HANDLE_SIZE * (gsize) in->n_chunks) != 0)
    abort ();
  g_set_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED,
               "fuzz kind: every fabric handle refused");
  return FALSE;
}

static gboolean
ff_export_fabric_handle (MemresResource *mr, MemresFabricHandle *out, GError **error)
{
  abort (); /* nothing is exported here */
}

/* What the core hands the slot of a pool message it let through. */
static gboolean
ff_import_fabric_handle (MemresResource *mr, const MemresIpcHandle *handle,
                         const MemresFabricHandle *fabric, GError **error)
{
  guint8 record[MEMRES_HANDLE_RECORD_SIZE];

  reached = TRUE;
  if (input_size != MEMRES_POOL_FABRIC_MESSAGE_SIZE
      || _memres_get_le (input + 4, 2) != MEMRES_POOL_FABRIC_MESSAGE_VERSION
      || memres_ipc_handle_get_fd (handle) != -1
      || strcmp (memres_ipc_handle_get_kind (handle), FUZZ_KIND) != 0)
    abort ();
  _memres_ipc_handle_encode (handle, record);
  if (memcmp (record, input + 8, sizeof record) != 0
      || memcmp (fabric, input + MEMRES_POOL_MESSAGE_SIZE, MEMRES_FABRIC_HANDLE_SIZE) != 0)
    abort ();
  g_set_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED,
               "fuzz kind: every fabric pool refused");
  return FALSE;
}

static const MemresResourceOps ff_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = ff_init,
  .finalize = ff_finalize,
  .allocate = ff_allocate,
  .deallocate = ff_deallocate,
  .query = ff_query,
};

static const MemresIpcOps ff_ipc_ops = {
  .version = MEMRES_IPC_OPS_VERSION,
  .export_fabric_chunks = ff_export_fabric_chunks,
  .import_fabric_chunks = ff_import_fabric_chunks,
  .export_fabric_handle = ff_export_fabric_handle,
  .import_fabric_handle = ff_import_fabric_handle,
};

static MemresResource *
importer (void)
{
  static MemresResource *mr;

  if (mr == NULL)
    {
      const MemresKindInfo info = {
        .struct_size = sizeof info,
        .name = FUZZ_KIND,
        .description = "fuzz-fabric.c's importer: checks what reaches its slot, imports nothing",
        .ops = &ff_ops,
        .ipc = &ff_ipc_ops,
      };
      GError *error = NULL;

      if (!memres_registry_register_kind (&info, &error)
          || (mr = memres_resource_new (FUZZ_KIND, &error)) == NULL)
        {
          fprintf (stderr, "fuzz-fabric: %s\n", error->message);
          abort ();
        }
    }
  return mr;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  MemresResource *mr = importer ();
  gboolean pool = size >= 4 && _memres_get_le (data, 4) == MEMRES_POOL_MESSAGE_MAGIC;
  GError *error = NULL;
  MemresBuffer *buf;

  input = data;
  input_size = size;
  reached = FALSE;
  buf = memres_buffer_import_message (pool ? NULL : mr, size > 0 ? data : (const uint8_t *) "",
                                      size, NULL, 0, NULL, &error);
  if (buf != NULL || error == NULL)
    abort ();
  if (reached ? !g_error_matches (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED)
              : !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR)
                    && !(pool
                         && (g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND)
                             || g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))))
    abort ();
  g_error_free (error);
  return 0;
}

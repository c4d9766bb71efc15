/* memres - CUDA memory resources
 * ipc.h: the IPC layer (core/ipc/) as the rest of the core sees it. The layer calls the core
 * (resource and buffer creation, the checked slot calls); the core calls the layer only through
 * the hooks of a resource's IPC state and, when a kind is registered, through
 * _memres_ipc_ops_copy(), so that no other file of the core refers to another symbol of the
 * layer or to a slot of the IPC table. Only a resource that memres_resource_import_handle() made
 * carries IPC state (MemresResource.ipc, set before the resource is published and never changed
 * after); the buffers imported through it point at their shared mapping (MemresBuffer.ipc_mapping).
 * The rest of the state is the layer's own (ipc-private.h). */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

typedef struct _MemresIpcMapping MemresIpcMapping; /* one imported allocation (ipc-private.h) */
typedef struct _MemresIpcHooks MemresIpcHooks;

/* The head of a resource's IPC state. */
typedef struct
{
  const MemresIpcHooks *hooks;
} MemresIpcState;

struct _MemresIpcHooks
{
  /* resource.c, when @mr is finalized, before its kind's finalize slot (no buffer of @mr is
   * open): @mr leaves the table of imported pools and its state is freed. */
  void (*finalize) (MemresResource *mr);
  /* buffer.c, instead of the deallocate slot and the buffer reference, when a buffer with an
   * ipc_mapping is closed: drops the buffer's use of the mapping, which is shared by every
   * import of the same allocation and unmapped with the last (the deallocate slot, ordered on
   * @stream and after the streams earlier users were closed on); drops the imported buffers'
   * reference on @owner when none is left (which may finalize it). On a failure that released
   * nothing, buf->ipc_mapping stays set: the buffer is still open. */
  gboolean (*release_buffer) (MemresBuffer *buf, MemresResource *owner, MemresStream stream,
                              GError **error);
  /* resource-query.c: the statistics of what @mr imported: in @stats (may be NULL) the bytes mapped
   * now as reserved and used, their high-water mark; in @n_imported its open imported buffers.
   * reset_stats(): that mark reset to the bytes mapped now. */
  void (*get_stats) (MemresResource *mr, MemresStats *stats, guint64 *n_imported);
  void (*reset_stats) (MemresResource *mr);
  /* snapshot.c: each live mapping of @mr into @layer as an import (memres_snapshot_add_import()),
   * copied under the table's lock */
  void (*snapshot) (MemresResource *mr, MemresSnapshotLayer *layer);
};

/* ipc-ops.c, from kind.c: checks a kind's IPC table @ipc (NULL: the kind shares nothing) and
 * copies it into @out (zero-filled, version 0, when @ipc is NULL). Errors: an adaptor (@adaptor)
 * with a table, a slot without its pair (export_handle/import_handle,
 * export_buffer/import_buffer, export_chunks/import_chunks): MEMRES_ERROR_INVALID_ARGUMENT; a
 * version of 0 or newer than MEMRES_IPC_OPS_VERSION: MEMRES_PLUGIN_ERROR_ABI_MISMATCH. */
gboolean _memres_ipc_ops_copy (const char *kind, const MemresIpcOps *ipc, gboolean adaptor,
                               MemresIpcOps *out, GError **error);

G_END_DECLS

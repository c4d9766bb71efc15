/* memres - CUDA memory resources
 * ipc-buffers.c: export and import of pool buffers (descriptors), and the deduplication of
 * imported buffers.
 *
 * Each imported resource has a table of mappings (ipc-mappings.c, in its IPC state,
 * MemresIpcImport), export data -> mapping, under that table's lock. The mapping is made by the
 * import_buffer slot, shared by every MemresBuffer importing that allocation and unmapped
 * (deallocate slot) when the last of them is closed. Drivers map the same allocation twice to
 * the same address and unmap it on the first free (nvbug 5570902; probed on the H200's
 * 580.159.04), so without this one close would pull memory out from under another part of the
 * program. The table's lock is held across import_buffer and the final deallocate (neither
 * calls back into memres): two threads never map the same thing twice. The table is per
 * resource because a mapping belongs to the resource that made it (and lives no longer than it:
 * the resource's imported buffers share one reference on it); the pool is the resource's, so
 * the export data alone is the key.
 *
 * Also the error of an export or a send that the stack's sharing layer has no slot for
 * (_memres_ipc_set_not_shared(), ipc-pools.c and ipc-message.c use it too). */
#include <string.h>

#include "ipc-private.h"

static gboolean
check_descriptor_fits (const MemresBufferExport *info, const MemresAllocation *mapped,
                       GError **error)
{
  if (info->offset > mapped->size || info->size > mapped->size - info->offset)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer descriptor: size: %" G_GUINT64_FORMAT
                   " bytes at offset %" G_GUINT64_FORMAT
                   " do not fit in the exported allocation of %" G_GSIZE_FORMAT " bytes",
                   info->size, info->offset, mapped->size);
      return FALSE;
    }
  return TRUE;
}

gboolean
_memres_ipc_set_not_shared (GError **error, MemresResource *owner, const char *what,
                            const char *done, const char *hint)
{
  const char *name = owner->kind->name;
  g_autofree char *why = NULL;
  MemresResource *below;

  if (owner->upstream == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "%s of kind \"%s\" cannot be %s other processes (%s)", what, name, done, hint);
      return FALSE;
    }
  /* an adaptor that does not pass allocations through: what it hands out are pieces of what
   * it got from below, which the layer below cannot share on its behalf */
  below = _memres_resource_ipc_owner (owner->upstream);
  if (below->kind->ipc.version != 0)
    why = g_strdup_printf ("which hides the sharing of kind \"%s\" under it; share from the layer "
                           "below (memres_resource_get_upstream()), or use a stack without \"%s\"",
                           below->kind->name, name);
  else
    why = g_strdup_printf ("and no layer below it shares either (%s, in a stack without \"%s\")",
                           hint, name);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "%s of kind \"%s\" cannot be %s other processes: \"%s\" carves its blocks out of "
               "larger allocations of the layer below (it does not pass allocations through, "
               "MEMRES_KIND_PASSES_ALLOCATIONS), %s",
               what, name, done, name, why);
  return FALSE;
}

/* The checks every sharing call makes first, named by its @verb ("export", "send"): an open,
 * non-empty buffer that some resource allocated. */
gboolean
_memres_ipc_check_buffer (MemresBuffer *buf, const char *verb, GError **error)
{
  if (__atomic_load_n (&buf->closed, __ATOMIC_SEQ_CST))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED, "cannot %s a closed buffer", verb);
      return FALSE;
    }
  if (buf->alloc.size == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "cannot %s an empty (zero-byte) buffer", verb);
      return FALSE;
    }
  if (buf->mr == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "cannot %s foreign memory (a buffer wrapping a pointer)", verb);
      return FALSE;
    }
  return _memres_buffer_check_awake (buf, verb, error); /* no memory under it (sleep.h) */
}

/**
 * memres_buffer_export:
 * @buf: an open buffer of an IPC-enabled resource (or one imported from another process)
 * @descriptor: (out caller-allocates): where to write the descriptor
 * @error: return location for a #GError
 *
 * Describes @buf for another process that imported (or will import) the buffer's pool with
 * memres_resource_import_handle(): a fixed-size record of plain bytes, safe to send any way.
 * Exporting grants nothing by itself: the receiver also needs the pool's handle. A buffer that
 * was itself imported is re-exported from what its import received (no driver call). Thread
 * safety: safe from any thread while @buf stays open.
 *
 * Driver calls: the kind's export_buffer slot (for `ipc`, cuMemPoolExportPointer()).
 *
 * Errors: %MEMRES_ERROR_CLOSED for a closed buffer; %MEMRES_ERROR_INVALID_ARGUMENT for an empty
 * (zero-byte) buffer; %MEMRES_ERROR_NOT_SUPPORTED for foreign memory, a kind that is not
 * IPC-enabled (or is under an adaptor that does not pass allocations through, `cache`, whose
 * blocks are pieces of its upstream's allocations: the message says to share from the layer
 * below), or a kind that shares buffers as their physical chunks (`vmm`: a descriptor of
 * bytes cannot carry them; use memres_buffer_export_message() or memres_ipc_send_buffer(),
 * whose message has one fd per chunk); %MEMRES_CUDA_ERROR from the driver.
 *
 * Returns: %TRUE with @descriptor filled
 *
 * Since: 1.0
 */
gboolean
memres_buffer_export (MemresBuffer *buf, MemresBufferDescriptor *descriptor, GError **error)
{
  MemresBufferExport info;
  MemresResource *mr;

  g_return_val_if_fail (buf != NULL, FALSE);
  g_return_val_if_fail (descriptor != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  if (!_memres_ipc_check_buffer (buf, "export", error))
    return FALSE;
  mr = buf->mr;

  memset (&info, 0, sizeof info);
  if (buf->ipc_mapping != NULL)
    {
      const MemresIpcMapping *mapping = buf->ipc_mapping;
      const MemresIpcImport *st = _memres_ipc_import (mr);
      /* the pool it imported, which the import checked the buffer's identity against */
      memcpy (info.pool_id, st->pool_id, MEMRES_IPC_ID_SIZE);
      memcpy (info.device_uuid, st->device_uuid, MEMRES_IPC_ID_SIZE);
      memcpy (info.export_data, mapping->export_data, MEMRES_EXPORT_DATA_SIZE);
      info.offset = buf->alloc.address - mapping->alloc.address;
      info.size = buf->alloc.size;
    }
  else
    {
      /* through adaptors that pass allocations through: the layer that made the allocation */
      mr = _memres_resource_ipc_owner (mr);
      if (mr->kind->ipc.export_buffer == NULL && mr->kind->ipc.export_chunks != NULL)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                       "buffers of kind \"%s\" are shared as their physical chunks, one file "
                       "descriptor each, not as a descriptor of bytes: use "
                       "memres_buffer_export_message() or memres_ipc_send_buffer()",
                       mr->kind->name);
          return FALSE;
        }
      if (mr->kind->ipc.export_buffer == NULL)
        return _memres_ipc_set_not_shared (error, mr, "buffers", "shared with", "use kind \"ipc\"");
      GError *local = NULL;
      gboolean ok;

      if (!_memres_resource_check_usable (mr, "exporting a buffer", error))
        return FALSE;
      ok = mr->kind->ipc.export_buffer (mr, &buf->alloc, &info, &local);
      if (!_memres_resource_slot_result (mr, "export_buffer", ok, &local, error))
        return FALSE;
    }
  _memres_descriptor_encode (mr->kind->name, &info, descriptor);
  return TRUE;
}

/* One more user of @mapping for @info, which must fit in it. */
static MemresIpcMapping *
join_mapping (MemresIpcMapping *mapping, const MemresBufferExport *info, GError **error)
{
  if (!check_descriptor_fits (info, &mapping->alloc, error))
    return NULL;
  mapping->n_users++;
  return mapping;
}

/* The mapping for @info on @mr, made through the import_buffer slot if none exists; one more
 * user counted. */
static MemresIpcMapping *
acquire_mapping (MemresResource *mr, MemresIpcMappings *table, const MemresBufferExport *info,
                 MemresStream stream, GError **error)
{
  guint64 hash = _memres_ipc_mappings_hash (info->export_data);
  MemresIpcMapping *found, *mapping = NULL;
  MemresAllocation alloc = { 0 };
  GError *local = NULL;
  gboolean ok;

  g_mutex_lock (&table->lock);
  found = _memres_ipc_mappings_lookup (table, info->export_data, hash);
  if (found != NULL && found->n_users > 0)
    mapping = join_mapping (found, info, error);
  else
    {
      ok = mr->kind->ipc.import_buffer (mr, info, stream, &alloc, &local);
      if (!_memres_resource_alloc_result (mr, "import_buffer", ok, &local, 1, stream, &alloc,
                                          error))
        ;
      else if (!check_descriptor_fits (info, &alloc, error))
        {
          g_autoptr (GError) unmap_error = NULL;
          if (!_memres_resource_call_deallocate (mr, &alloc, stream, &unmap_error))
            memres_cuda_warn_release_failure (unmap_error, "unmapping a refused buffer import");
        }
      else if (found != NULL) /* imported and unmapped before: the record is reused */
        {
          _memres_ipc_mappings_revive (table, found, &alloc);
          mapping = found;
        }
      else
        mapping = _memres_ipc_mappings_add (table, hash, info, &alloc);
    }
  /* The open imported buffers of @mr together hold one buffer reference on it: one atomic
   * operation per busy period instead of two per buffer. */
  if (mapping != NULL && table->n_users++ == 0)
    _memres_resource_add_buffer (mr);
  g_mutex_unlock (&table->lock);
  return mapping;
}

/* The full validation of @descriptor for an import into @mr, in the order of the checks that
 * name the first bad field (INVALID_DESCRIPTOR) or the resource that cannot import
 * (NOT_SUPPORTED). A well-formed descriptor imported into a resource that imports nothing
 * (a kind without IPC, an exporter, a pool made without IPC) is NOT_SUPPORTED whatever its
 * kind, pool and device say: the same answer as on every other path. */
static gboolean
check_descriptor (MemresResource *mr, gconstpointer descriptor, gsize length,
                  MemresBufferExport *info, GError **error)
{
  const MemresIpcImport *st = _memres_ipc_import (mr);
  char kind[MEMRES_KIND_NAME_MAX];

  if (!_memres_descriptor_decode (descriptor, length, mr->kind->name_field, kind, info, error))
    return FALSE;
  if (mr->kind->ipc.import_buffer == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "resources of kind \"%s\" cannot import buffers from other processes",
                   mr->kind->name);
      return FALSE;
    }
  if (st == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "this resource of kind \"%s\" was not imported from another process: only "
                   "a pool imported with memres_resource_import_handle() imports buffers",
                   mr->kind->name);
      return FALSE;
    }
  if (memcmp (kind, mr->kind->name_field, MEMRES_KIND_NAME_MAX) != 0) /* both NUL-padded */
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer descriptor: kind: \"%s\", but the resource is of kind \"%s\"",
                   kind, mr->kind->name);
      return FALSE;
    }
  if (memcmp (st->pool_id, info->pool_id, MEMRES_IPC_ID_SIZE) != 0)
    {
      g_autofree char *id = _memres_ipc_format_id (info->pool_id);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer descriptor: pool_id: the buffer belongs to pool %s, not to "
                   "this resource's pool (import that pool's handle first)",
                   id);
      return FALSE;
    }
  if (memcmp (st->device_uuid, info->device_uuid, MEMRES_IPC_ID_SIZE) != 0)
    {
      g_autofree char *buffer_device = _memres_ipc_format_id (info->device_uuid);
      g_autofree char *pool_device = _memres_ipc_format_id (st->device_uuid);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "invalid buffer descriptor: device_uuid: the buffer is on device %s, but this "
                   "resource's pool is on device %s",
                   buffer_device, pool_device);
      return FALSE;
    }

  return TRUE;
}

/**
 * memres_buffer_import:
 * @mr: the resource imported from the buffer's pool (memres_resource_import_handle())
 * @descriptor: (array length=length): bytes of a descriptor made by memres_buffer_export() in
 *   another process: untrusted
 * @length: bytes at @descriptor (%MEMRES_BUFFER_DESCRIPTOR_SIZE for a valid one)
 * @stream: the stream the import is ordered on, recorded as the buffer's deallocation stream
 * @error: return location for a #GError
 *
 * Maps the buffer described by @descriptor into this process. Every field is validated before
 * any driver call (length, magic, version, kind, reserved bytes, size, offset), then the
 * descriptor's kind, pool identity and device UUID must be those of @mr's pool. The 64 bytes of
 * driver export data in it are passed to the driver as they came (see docs/ipc.md: the driver
 * trusts them). Importing the same buffer more than once returns distinct #MemresBuffer objects
 * sharing one mapping: the mapping stays until the last of them is closed, so closing one never
 * unmaps memory another still uses; the unmap, ordered on the stream of the last close, also
 * waits for the streams the others were closed on. The buffer is flagged
 * %MEMRES_MEMORY_IMPORTED. Thread safety: safe from any thread, concurrently too.
 *
 * Driver calls: the kind's import_buffer slot, once per mapping (for `ipc`,
 * cuMemPoolImportPointer() and cuPointerGetAttribute(`CU_POINTER_ATTRIBUTE_RANGE_SIZE`)); on
 * the last close, its deallocate slot (cuMemFreeAsync() on the deallocation stream). Closing one
 * of several users of a mapping of a stream-ordered kind: cuEventCreate() and cuEventRecord()
 * on its stream (cuStreamSynchronize() when that fails); the last close then makes its stream
 * wait for those events (cuStreamWaitEvent(), cuEventDestroy()).
 *
 * Errors: %MEMRES_ERROR_INVALID_DESCRIPTOR for a malformed descriptor (the message names the
 * field), one of another kind, another pool or another device than @mr's pool, or one claiming
 * more bytes than the exported allocation has; %MEMRES_ERROR_NOT_SUPPORTED when @mr cannot
 * import buffers: its kind has no imports, or @mr was not made by
 * memres_resource_import_handle() (an exporter, a pool made without IPC), whatever the
 * descriptor names; %MEMRES_CUDA_ERROR from the driver.
 *
 * Returns: (transfer full) (nullable): a new buffer, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresBuffer *
memres_buffer_import (MemresResource *mr, gconstpointer descriptor, gsize length,
                      MemresStream stream, GError **error)
{
  MemresBufferExport info;
  MemresAllocation alloc;
  MemresIpcMapping *mapping;
  MemresIpcImport *st;

  g_return_val_if_fail (mr != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  /* A valid descriptor of this resource's pool: one compare checks its kind, pool and device. */
  st = _memres_ipc_import (mr);
  if (G_LIKELY (
          st != NULL && mr->kind->ipc.import_buffer != NULL
          && _memres_descriptor_decode_pool (descriptor, length, st->descriptor_prefix, &info)))
    ;
  else if (!check_descriptor (mr, descriptor, length, &info, error))
    return NULL;

  if (!_memres_resource_check_usable (mr, "importing a buffer", error))
    return NULL;
  mapping = acquire_mapping (mr, &st->mappings, &info, stream, error);
  if (mapping == NULL)
    return NULL;

  alloc.address = mapping->alloc.address + info.offset;
  alloc.size = info.size;
  alloc.plugin_data = NULL;
  return _memres_buffer_new_imported (mr, &alloc, stream, mapping);
}

/* A user of @mapping was closed on @stream while others stay: its unmap, on the stream of the
 * last close, must still come after the work queued on @stream so far, which the caller was
 * told the memory was free after. Records an event there for the last close to wait for; when
 * no event can be had, waits for @stream here. Only stream-ordered kinds order anything. */
static gboolean
order_after_close (MemresResource *mr, MemresIpcMapping *mapping, MemresStream stream,
                   GError **error)
{
  MemresStreamContext ctx;
  CUevent event = NULL;
  CUresult r;

  if (!(mr->info.flags & MEMRES_MEMORY_STREAM_ORDERED))
    return TRUE;
  if (!_memres_stream_context_begin (&ctx, _memres_resource_context_device (mr), stream, error))
    return FALSE;
  r = ctx.drv->cuEventCreate (&event, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS && (r = ctx.drv->cuEventRecord (event, (CUstream) stream)) != CUDA_SUCCESS)
    (void) ctx.drv->cuEventDestroy (event);
  if (r != CUDA_SUCCESS)
    {
      event = NULL;
      r = ctx.drv->cuStreamSynchronize ((CUstream) stream);
    }
  _memres_stream_context_end (&ctx);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamSynchronize");
  if (event != NULL)
    {
      if (mapping->waits == NULL)
        mapping->waits = g_array_new (FALSE, FALSE, sizeof (CUevent));
      g_array_append_val (mapping->waits, event);
    }
  return TRUE;
}

/* Before the unmap on @stream: makes @stream wait for the events order_after_close() recorded
 * (or, when it cannot, waits for each event here) and destroys them. */
static gboolean
wait_for_earlier_closes (MemresResource *mr, MemresIpcMapping *mapping, MemresStream stream,
                         GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL); /* it made the events */
  MemresStreamContext ctx;
  gboolean ok = TRUE;
  gboolean began
      = _memres_stream_context_begin (&ctx, _memres_resource_context_device (mr), stream, NULL);

  for (guint i = 0; i < mapping->waits->len; i++)
    {
      CUevent event = g_array_index (mapping->waits, CUevent, i);
      CUresult r = began ? drv->cuStreamWaitEvent ((CUstream) stream, event, 0)
                         : CUDA_ERROR_INVALID_HANDLE;

      if (r != CUDA_SUCCESS)
        r = drv->cuEventSynchronize (event);
      if (r != CUDA_SUCCESS && ok)
        ok = memres_cuda_set_error (error, r, "cuEventSynchronize");
      (void) drv->cuEventDestroy (event);
    }
  if (began)
    _memres_stream_context_end (&ctx);
  g_clear_pointer (&mapping->waits, g_array_unref);
  return ok;
}

/* The release_buffer hook (ipc.h): buffer.c calls it instead of the deallocate slot and the
 * buffer reference when an imported buffer of @owner is closed. On a failure that released
 * nothing (the event or the unmap on @stream failed) the buffer keeps its mapping. */
gboolean
_memres_ipc_release_buffer (MemresBuffer *buf, MemresResource *owner, MemresStream stream,
                            GError **error)
{
  MemresIpcMapping *mapping = buf->ipc_mapping;
  MemresIpcMappings *table = &_memres_ipc_import (owner)->mappings;
  gboolean ok = TRUE;
  gboolean last;

  g_mutex_lock (&table->lock);
  g_assert (mapping->n_users > 0 && table->n_users > 0);
  if (G_UNLIKELY (_memres_resource_is_inherited (owner)))
    {
      /* the child of a fork(): no driver call; the mapping stays until the child exits */
      if (--mapping->n_users == 0)
        {
          g_clear_pointer (&mapping->waits, g_array_unref);
          _memres_ipc_mappings_retire (table, mapping);
        }
    }
  else if (--mapping->n_users > 0)
    {
      if (!order_after_close (owner, mapping, stream, error))
        {
          /* Nothing done (a destroyed stream, say): the buffer stays open. */
          mapping->n_users++;
          g_mutex_unlock (&table->lock);
          return FALSE;
        }
    }
  else
    {
      guint64 address = mapping->alloc.address;

      if (G_UNLIKELY (mapping->waits != NULL))
        ok = wait_for_earlier_closes (owner, mapping, stream, error);
      if (!_memres_resource_call_deallocate (owner, &mapping->alloc, stream, ok ? error : NULL))
        {
          if (mapping->alloc.address == address)
            {
              /* Nothing unmapped: the buffer stays open, its mapping with it. */
              mapping->n_users = 1;
              g_mutex_unlock (&table->lock);
              return FALSE;
            }
          ok = FALSE;
        }
      _memres_ipc_mappings_retire (table, mapping);
    }
  last = --table->n_users == 0;
  g_mutex_unlock (&table->lock);
  buf->ipc_mapping = NULL;
  if (last)
    _memres_resource_remove_buffer (owner);
  return ok;
}

/* The get_stats hook (ipc.h). */
void
_memres_ipc_get_stats (MemresResource *mr, MemresStats *stats, guint64 *n_imported)
{
  MemresIpcMappings *table = &_memres_ipc_import (mr)->mappings;

  g_mutex_lock (&table->lock);
  *n_imported = table->n_users;
  if (stats != NULL)
    {
      stats->reserved_current = stats->used_current = table->mapped_bytes;
      stats->reserved_high = stats->used_high = table->mapped_high;
    }
  g_mutex_unlock (&table->lock);
}

/* The reset_stats hook (ipc.h). */
void
_memres_ipc_reset_stats (MemresResource *mr)
{
  MemresIpcMappings *table = &_memres_ipc_import (mr)->mappings;

  g_mutex_lock (&table->lock);
  table->mapped_high = table->mapped_bytes;
  g_mutex_unlock (&table->lock);
}

/* The snapshot hook (ipc.h): the live mappings as imports. */
void
_memres_ipc_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  MemresIpcMappings *table = &_memres_ipc_import (mr)->mappings;

  g_mutex_lock (&table->lock);
  for (gsize i = 0; i <= table->mask && table->slots != NULL; i++)
    {
      const MemresIpcMapping *m = table->slots[i].mapping;

      if (m != NULL && m->n_users > 0)
        memres_snapshot_add_import (layer, m->alloc.address, m->alloc.size);
    }
  g_mutex_unlock (&table->lock);
}

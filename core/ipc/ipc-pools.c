/* memres - CUDA memory resources
 * ipc-pools.c: export and import of pools, the deduplication of imported pools, and the IPC
 * state of an imported resource (MemresIpcImport), whose hooks the core calls.
 *
 * Imported pools: a per-process table, pool identity -> MemresResource (weak: the entry leaves
 * when the resource is finalized, through its IPC state's finalize hook), under pools_lock.
 * Importing a pool that is already imported returns the same resource with a new reference.
 * import_pool_lock serializes creating imported pools, held across the kind's import_handle
 * slot, so that two threads never import the same pool twice. */
#include <string.h>

#include "ipc-private.h"

static GMutex pools_lock;       /* pools */
static GHashTable *pools;       /* guint8[16] (in the IPC state) -> MemresResource* */
static GMutex import_pool_lock; /* serializes creating imported pools */

/* fork.c's order: import_pool_lock is held across the import_handle slot (outer), pools_lock
 * around the table alone (inner); a pool's mapping table is held across import_buffer and the
 * last deallocate of a mapping (outer). */
static void
import_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&import_pool_lock, phase);
}

static void
pools_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&pools_lock, phase);
}

static void
tables_fork (MemresResource *mr, MemresForkPhase phase)
{
  /* attached by the importer after the resource was made: read once, in prepare and after */
  if (__atomic_load_n (&mr->ipc, __ATOMIC_ACQUIRE) != NULL)
    memres_fork_mutex (&_memres_ipc_import (mr)->mappings.lock, phase);
}

static guint
pool_id_hash (gconstpointer key)
{
  guint64 a, b;

  memcpy (&a, key, 8);
  memcpy (&b, (const guint8 *) key + 8, 8);
  a = (a ^ (b * G_GUINT64_CONSTANT (0xff51afd7ed558ccd))) * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15);
  return (guint) (a ^ (a >> 32));
}

static gboolean
pool_id_equal (gconstpointer a, gconstpointer b)
{
  return memcmp (a, b, MEMRES_IPC_ID_SIZE) == 0;
}

/* The finalize hook: @mr leaves the table of imported pools; every buffer imported through it
 * is closed, so its mapping records are all retired and only freed. */
static void
import_finalize (MemresResource *mr)
{
  MemresIpcImport *st = _memres_ipc_import (mr);

  g_mutex_lock (&pools_lock);
  if (pools != NULL && g_hash_table_lookup (pools, st->pool_id) == mr)
    g_hash_table_remove (pools, st->pool_id);
  g_mutex_unlock (&pools_lock);
  _memres_ipc_mappings_clear (&st->mappings);
  mr->ipc = NULL;
  g_free (st);
}

static const MemresIpcHooks import_hooks = {
  .finalize = import_finalize,
  .release_buffer = _memres_ipc_release_buffer,
  .get_stats = _memres_ipc_get_stats,
  .reset_stats = _memres_ipc_reset_stats,
  .snapshot = _memres_ipc_snapshot,
};

/* The IPC state of @mr, just made by memres_resource_import_handle() from @handle and not yet
 * published: its pool's identity, the prefix of its buffers' descriptors, an empty table of
 * mappings. An exporter needs none: each export of its buffers asks the kind anew. */
static void
attach_import_state (MemresResource *mr, const MemresIpcHandle *handle)
{
  MemresIpcImport *st = g_new0 (MemresIpcImport, 1);

  st->base.hooks = &import_hooks;
  memcpy (st->pool_id, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE);
  memcpy (st->device_uuid, memres_ipc_handle_get_device_uuid (handle), MEMRES_IPC_ID_SIZE);
  _memres_descriptor_prefix (mr->kind->name_field, st->pool_id, st->device_uuid,
                             st->descriptor_prefix);
  _memres_ipc_mappings_init (&st->mappings);
  mr->ipc = &st->base;
}

/**
 * memres_resource_export_handle:
 * @mr: a resource
 * @error: return location for a #GError
 *
 * Exports the resource's pool for another process: the returned handle owns a new file
 * descriptor (each call makes a new one) plus the kind name, the pool identity and the device
 * UUID. Send it with memres_ipc_send_handle(), then free it; the receiver imports it with
 * memres_resource_import_handle(). Thread safety: safe from any thread.
 *
 * Driver calls: the kind's export_handle slot (for `ipc`, cuMemPoolExportToShareableHandle()
 * with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`).
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when the kind is not IPC-enabled (no export_handle slot;
 * a kind that shares its buffers as physical chunks, `vmm`, has no pool handle: its message
 * names memres_ipc_send_buffer() and memres_buffer_export_message()), when an adaptor that does
 * not pass allocations through (`cache`) sits above the pool and hides it, or when the resource
 * cannot export (an imported pool, or a pool of fabric handles, `ipc:handle_type=fabric`, which
 * has no fd: its buffers' messages carry its fabric handle, memres_buffer_export_message());
 * %MEMRES_CUDA_ERROR from the driver.
 *
 * Returns: (transfer full) (nullable): a new handle, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresIpcHandle *
memres_resource_export_handle (MemresResource *mr, GError **error)
{
  MemresIpcHandle *handle = NULL;
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail (mr != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  mr = _memres_resource_ipc_owner (mr);
  if (mr->kind->ipc.export_handle == NULL && mr->kind->ipc.export_chunks != NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "resources of kind \"%s\" have no pool handle to share: their buffers are "
                   "shared whole, as their physical chunks (one file descriptor each): send a "
                   "buffer with memres_ipc_send_buffer(), or make its message with "
                   "memres_buffer_export_message() (docs/ipc.md)",
                   mr->kind->name);
      return NULL;
    }
  if (mr->kind->ipc.export_handle == NULL)
    {
      _memres_ipc_set_not_shared (error, mr, "resources", "shared with", "use kind \"ipc\"");
      return NULL;
    }
  if (!_memres_resource_check_usable (mr, "exporting a pool", error))
    return NULL;
  ok = mr->kind->ipc.export_handle (mr, &handle, &local);
  if (ok && handle == NULL)
    ok = FALSE; /* a plugin bug: reported as a failure without a reason */
  if (!_memres_resource_slot_result (mr, "export_handle", ok, &local, error))
    {
      g_clear_pointer (&handle, memres_ipc_handle_free);
      return NULL;
    }
  return handle;
}

static MemresResource *
lookup_imported_pool (const MemresIpcHandle *handle, GError **error)
{
  MemresResource *mr;

  g_mutex_lock (&pools_lock);
  mr = pools ? g_hash_table_lookup (pools, memres_ipc_handle_get_pool_id (handle)) : NULL;
  if (mr != NULL && !_memres_resource_try_ref (mr))
    mr = NULL; /* being finalized: import anew */
  g_mutex_unlock (&pools_lock);

  if (mr != NULL && strcmp (mr->kind->name, memres_ipc_handle_get_kind (handle)) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_DESCRIPTOR,
                   "IPC handle of kind \"%s\" names a pool already imported as kind \"%s\"",
                   memres_ipc_handle_get_kind (handle), mr->kind->name);
      memres_resource_unref (mr);
      return NULL;
    }
  return mr;
}

/* What a resource is imported from: a pool handle, with the pool's fabric handle for a pool
 * shared by it (the handle then holds no fd). */
typedef struct
{
  const MemresIpcHandle *handle;
  const MemresFabricHandle *fabric;
} ImportSource;

/* The setup of a resource imported from a pool handle: the kind's import_handle slot, or its
 * import_fabric_handle slot. */
static gboolean
import_handle_setup (MemresResource *mr, gconstpointer data, GError **error)
{
  const ImportSource *source = data;

  if (source->fabric != NULL)
    return mr->kind->ipc.import_fabric_handle (mr, source->handle, source->fabric, error);
  return mr->kind->ipc.import_handle (mr, source->handle, error);
}

static MemresResource *import_pool (const MemresIpcHandle *handle, const MemresFabricHandle *fabric,
                                    GError **error);

/**
 * memres_resource_import_handle:
 * @handle: (transfer none): a handle received from the exporting process; it keeps its fd
 * @error: return location for a #GError
 *
 * Imports the pool behind @handle into this process as a resource of the kind the handle
 * names, loading that kind's plugin when needed. Imports are deduplicated per process: while a
 * resource imported from the same pool (same pool identity) is alive, the same resource is
 * returned with a new reference. An imported resource cannot allocate; it imports buffers with
 * memres_buffer_import(). Thread safety: safe from any thread; concurrent imports of one pool
 * make one resource.
 *
 * What the resource can know: its memres_resource_get_flags() (host- or device-accessible) and
 * memres_resource_get_device() are what the handle's kind makes (`ipc`: device memory of the
 * device the UUID names; `pinned`: page-locked host memory, device -1), taken on trust. The
 * driver (CUDA 13) cannot be asked where an imported pool's memory lives, so a handle relabelled
 * with another kind's name (an `ipc` pool named `pinned`, or the reverse) imports, and the
 * resource claims that kind's memory until a buffer is mapped: every memres_buffer_import()
 * asks the driver what it mapped (cuPointerGetAttributes()) and refuses memory of another type
 * with %MEMRES_ERROR_INVALID_DESCRIPTOR ("relabelled"), mapping nothing. Trust the flags of an
 * imported resource once one of its buffers imported.
 *
 * Driver calls: the kind's import_handle slot (for `ipc`, cuMemPoolImportFromShareableHandle()
 * on the device whose UUID the handle names).
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT when the handle holds no fd (it was stolen);
 * %MEMRES_ERROR_NOT_FOUND when no plugin provides the kind; %MEMRES_ERROR_NOT_SUPPORTED when the
 * kind cannot import or the handle is not a shareable pool handle;
 * %MEMRES_ERROR_INVALID_DESCRIPTOR when the pool is already imported as another kind;
 * %MEMRES_ERROR_WRONG_DEVICE when no device here has the handle's device UUID;
 * %MEMRES_ERROR_NO_DEVICE, %MEMRES_ERROR_NO_DRIVER, #MEMRES_PLUGIN_ERROR from loading,
 * %MEMRES_CUDA_ERROR from the driver; %MEMRES_ERROR_FAILED when called inside kinds' inits
 * nested 32 deep (see memres_resource_new()).
 *
 * Returns: (transfer full) (nullable): the imported resource, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresResource *
memres_resource_import_handle (const MemresIpcHandle *handle, GError **error)
{
  g_return_val_if_fail (handle != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (memres_ipc_handle_get_fd (handle) < 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "IPC handle holds no file descriptor (it was stolen)");
      return NULL;
    }
  return import_pool (handle, NULL, error);
}

gboolean
_memres_ipc_export_fabric_pool (MemresResource *owner, MemresFabricHandle *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  if (owner->kind->ipc.export_fabric_handle == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "resources of kind \"%s\" have no fabric handle of a pool to share",
                   owner->kind->name);
      return FALSE;
    }
  if (!_memres_resource_check_usable (owner, "exporting a pool as a fabric handle", error))
    return FALSE;
  memset (out, 0, sizeof *out);
  ok = owner->kind->ipc.export_fabric_handle (owner, out, &local);
  return _memres_resource_slot_result (owner, "export_fabric_handle", ok, &local, error);
}

MemresResource *
_memres_ipc_import_fabric_pool (const MemresIpcHandle *handle, const MemresFabricHandle *fabric,
                                GError **error)
{
  return import_pool (handle, fabric, error);
}

/* memres_resource_import_handle() of @handle, or (@fabric not NULL) of the pool named by
 * @fabric with @handle's identity. */
static MemresResource *
import_pool (const MemresIpcHandle *handle, const MemresFabricHandle *fabric, GError **error)
{
  g_autoptr (MemresKind) kind = NULL;
  g_autofree char *id = NULL;
  g_autofree char *spec = NULL;
  ImportSource source = { handle, fabric };
  MemresResource *mr;
  GError *local_error = NULL;

  /* Before the lock: this may load the kind's plugin. */
  kind = memres_registry_lookup (memres_ipc_handle_get_kind (handle), error);
  if (kind == NULL)
    return NULL;

  _memres_fork_add_part (MEMRES_FORK_IPC_IMPORT, import_fork);
  _memres_fork_add_part (MEMRES_FORK_IPC_TABLES, tables_fork);
  _memres_fork_add_part (MEMRES_FORK_IPC_POOLS, pools_fork);
  g_mutex_lock (&import_pool_lock);
  mr = lookup_imported_pool (handle, &local_error);
  if (mr != NULL || local_error != NULL)
    goto out;
  /* an adaptor kind (which has no IPC table) is refused here too */
  if (fabric != NULL ? kind->ipc.import_fabric_handle == NULL : kind->ipc.import_handle == NULL)
    {
      g_set_error (&local_error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "resources of kind \"%s\" cannot be imported from a %s", kind->name,
                   fabric != NULL ? "fabric handle" : "handle");
      goto out;
    }
  id = _memres_ipc_format_id (memres_ipc_handle_get_pool_id (handle));
  spec = g_strdup_printf ("%s (imported pool %s)", kind->name, id);
  mr = _memres_resource_new_imported (kind, import_handle_setup,
                                      fabric != NULL ? "import_fabric_handle" : "import_handle",
                                      &source, spec, &local_error);
  if (mr == NULL)
    goto out;

  attach_import_state (mr, handle);
  g_mutex_lock (&pools_lock);
  if (pools == NULL)
    pools = g_hash_table_new (pool_id_hash, pool_id_equal);
  g_hash_table_replace (pools, _memres_ipc_import (mr)->pool_id, mr);
  g_mutex_unlock (&pools_lock);

out:
  g_mutex_unlock (&import_pool_lock);
  if (local_error != NULL)
    g_propagate_error (error, local_error);
  return mr;
}

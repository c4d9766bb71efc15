/* ipc-testkind.c: the in-test IPC kind on host memory (see ipc-testkind.h). */
#define _GNU_SOURCE
#include "ipc-testkind.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

MtIpcKindCounts mt_ipc_kind;

static guint8 device_uuid[MEMRES_IPC_ID_SIZE];

typedef struct
{
  gboolean imported;
  guint8 pool_id[MEMRES_IPC_ID_SIZE];
} IpcKind;

/* An exporter's allocation as the "driver" sees it. */
typedef struct
{
  guint64 address; /* the key */
  gsize size;
  gboolean mapped; /* imported into this process: one mapping, however many imports */
  gint held;       /* imported buffers the test holds open */
} Range;

static GMutex ranges_lock;
static GHashTable *ranges; /* &Range.address -> Range* */

static gboolean
ik_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  IpcKind *self = memres_resource_get_private (mr);
  guint32 n = (guint32) g_atomic_int_add (&mt_ipc_kind.pools, 1) + 1;

  memset (self->pool_id, 0x5a, sizeof self->pool_id);
  memcpy (self->pool_id, &n, sizeof n);
  return TRUE;
}

static void
ik_finalize (MemresResource *mr)
{
  IpcKind *self = memres_resource_get_private (mr);

  if (self->imported)
    g_atomic_int_inc (&mt_ipc_kind.finalized_imports);
}

static gboolean
ik_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  IpcKind *self = memres_resource_get_private (mr);
  Range *r;

  if (self->imported)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "an imported pool");
      return FALSE;
    }
  r = g_new0 (Range, 1);
  r->address = (guint64) (guintptr) g_malloc0 (size);
  r->size = size;
  g_mutex_lock (&ranges_lock);
  g_hash_table_insert (ranges, &r->address, r);
  g_mutex_unlock (&ranges_lock);
  alloc->address = r->address;
  alloc->size = size;
  return TRUE;
}

/* On an importer, an unmap: the memory is the exporter's. */
static gboolean
ik_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  IpcKind *self = memres_resource_get_private (mr);
  Range *r;

  g_mutex_lock (&ranges_lock);
  r = g_hash_table_lookup (ranges, &alloc->address);
  if (self->imported)
    {
      g_atomic_int_inc (&mt_ipc_kind.unmaps);
      if (r == NULL || !r->mapped || r->held > 0)
        {
          g_atomic_int_inc (&mt_ipc_kind.violations);
          g_test_message ("unmap of 0x%" G_GINT64_MODIFIER "x: %s", alloc->address,
                          r == NULL    ? "no such allocation"
                          : !r->mapped ? "not mapped"
                                       : "an import of it is still open");
        }
      if (r != NULL)
        r->mapped = FALSE;
      g_mutex_unlock (&ranges_lock);
      return TRUE;
    }
  g_assert_nonnull (r);
  g_hash_table_remove (ranges, &alloc->address);
  g_mutex_unlock (&ranges_lock);
  g_free ((gpointer) (guintptr) r->address);
  g_free (r);
  return TRUE;
}

static void
ik_query (MemresResource *mr, MemresResourceInfo *info)
{
  IpcKind *self = memres_resource_get_private (mr);

  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_IPC_ENABLED;
  if (self->imported)
    info->flags |= MEMRES_MEMORY_IMPORTED;
}

static gboolean
ik_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  return TRUE; /* the core fills in n_buffers */
}

static gboolean
ik_export_handle (MemresResource *mr, MemresIpcHandle **handle, GError **error)
{
  IpcKind *self = memres_resource_get_private (mr);
  int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  g_assert_cmpint (fd, >=, 0);
  *handle = memres_ipc_handle_new (memres_resource_get_kind_name (mr), fd, self->pool_id,
                                   device_uuid, error);
  if (*handle == NULL)
    close (fd);
  return *handle != NULL;
}

static gboolean
ik_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error)
{
  IpcKind *self = memres_resource_get_private (mr);

  g_atomic_int_inc (&mt_ipc_kind.handle_imports);
  self->imported = TRUE;
  memcpy (self->pool_id, memres_ipc_handle_get_pool_id (handle), MEMRES_IPC_ID_SIZE);
  return TRUE;
}

/* Export data: the address (8 bytes), the size (8 bytes), zeros. */
static gboolean
ik_export_buffer (MemresResource *mr, const MemresAllocation *alloc, MemresBufferExport *out,
                  GError **error)
{
  IpcKind *self = memres_resource_get_private (mr);
  guint64 size = alloc->size;

  memcpy (out->pool_id, self->pool_id, MEMRES_IPC_ID_SIZE);
  memcpy (out->device_uuid, device_uuid, MEMRES_IPC_ID_SIZE);
  out->offset = 0;
  out->size = size;
  memset (out->export_data, 0, sizeof out->export_data);
  memcpy (out->export_data, &alloc->address, 8);
  memcpy (out->export_data + 8, &size, 8);
  return TRUE;
}

/* Maps what the export data names, checking it as a driver would, and reports the whole
 * allocation (as the ipc kind reports the driver's range); a repeated import of a mapped
 * allocation returns the same address. */
static gboolean
ik_import_buffer (MemresResource *mr, const MemresBufferExport *in, MemresStream stream,
                  MemresAllocation *alloc, GError **error)
{
  IpcKind *self = memres_resource_get_private (mr);
  guint64 address, size;
  Range *r;

  if (!self->imported)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "the exporter imports nothing");
      return FALSE;
    }
  memcpy (&address, in->export_data, 8);
  memcpy (&size, in->export_data + 8, 8);
  for (gsize i = 16; i < sizeof in->export_data; i++)
    if (in->export_data[i] != 0)
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "export data: byte %zu", i);
        return FALSE;
      }
  g_mutex_lock (&ranges_lock);
  r = g_hash_table_lookup (ranges, &address);
  if (r == NULL || r->size != size)
    {
      g_mutex_unlock (&ranges_lock);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "export data: no such allocation");
      return FALSE;
    }
  r->mapped = TRUE;
  g_atomic_int_inc (&mt_ipc_kind.maps);
  g_mutex_unlock (&ranges_lock);
  alloc->address = address;
  alloc->size = size;
  return TRUE;
}

static const MemresResourceOps ik_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = ik_init,
  .finalize = ik_finalize,
  .allocate = ik_allocate,
  .deallocate = ik_deallocate,
  .query = ik_query,
  .get_stats = ik_get_stats,
};

static const MemresIpcOps ik_ipc_ops = {
  .version = MEMRES_IPC_OPS_VERSION,
  .export_handle = ik_export_handle,
  .import_handle = ik_import_handle,
  .export_buffer = ik_export_buffer,
  .import_buffer = ik_import_buffer,
};

void
mt_ipc_kind_register (const char *name, const guint8 uuid[MEMRES_IPC_ID_SIZE])
{
  const MemresKindInfo info = {
    .struct_size = sizeof info,
    .name = name,
    .description = "IPC test double on host memory with the driver's mapping rules",
    .ops = &ik_ops,
    .ipc = &ik_ipc_ops,
    .instance_size = sizeof (IpcKind),
  };
  GError *error = NULL;

  g_assert_null (ranges);
  memcpy (device_uuid, uuid, MEMRES_IPC_ID_SIZE);
  ranges = g_hash_table_new (g_int64_hash, g_int64_equal);
  g_assert_true (memres_registry_register_kind (&info, &error));
  g_assert_no_error (error);
}

void
mt_ipc_kind_hold (guint64 address, gint delta)
{
  Range *r;

  g_mutex_lock (&ranges_lock);
  r = g_hash_table_lookup (ranges, &address);
  g_assert_nonnull (r);
  if (delta > 0 && !r->mapped)
    {
      g_atomic_int_inc (&mt_ipc_kind.violations);
      g_test_message ("an open import of 0x%" G_GINT64_MODIFIER "x is not mapped", address);
    }
  r->held += delta;
  g_assert_cmpint (r->held, >=, 0);
  g_mutex_unlock (&ranges_lock);
}

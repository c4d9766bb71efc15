/* abi-kind.c: a minimal host-memory kind for the ABI test plugins. */
#include "abi-kind.h"

static gboolean
abi_kind_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
abi_kind_finalize (MemresResource *mr)
{
}

static gboolean
abi_kind_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                   GError **error)
{
  gpointer mem = g_try_malloc0 (size);

  if (mem == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "cannot allocate %" G_GSIZE_FORMAT " bytes", size);
      return FALSE;
    }
  alloc->address = (guint64) (guintptr) mem;
  alloc->size = size;
  return TRUE;
}

static gboolean
abi_kind_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                     GError **error)
{
  g_free ((gpointer) (guintptr) alloc->address);
  return TRUE;
}

static void
abi_kind_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static const MemresResourceOps abi_kind_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = abi_kind_init,
  .finalize = abi_kind_finalize,
  .allocate = abi_kind_allocate,
  .deallocate = abi_kind_deallocate,
  .query = abi_kind_query,
};

gboolean
abi_kind_register (MemresPlugin *plugin, const char *name, GError **error)
{
  const MemresKindInfo info = {
    .struct_size = sizeof (MemresKindInfo),
    .name = name,
    .description = "host memory, for the plugin ABI tests",
    .ops = &abi_kind_ops,
  };

  return memres_plugin_register_kind (plugin, &info, error);
}

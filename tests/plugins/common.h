/* common.h: a minimal valid kind shared by the test plugins of this directory, and its slots
 * (malloc memory) by the in-binary kinds of tests/hostdev-kind.c, tests/test-dlpack.c and
 * tests/test-snapshot.c. */
#pragma once

#include <memres/memres-plugin.h>
#include <stdlib.h>

static gboolean
tp_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
tp_finalize (MemresResource *mr)
{
}

static gboolean
tp_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  gpointer p = malloc (size);

  if (p == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "out of memory");
      return FALSE;
    }
  alloc->address = (guint64) (guintptr) p;
  alloc->size = size;
  return TRUE;
}

static gboolean
tp_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  free ((gpointer) (guintptr) alloc->address);
  return TRUE;
}

G_GNUC_UNUSED static void
tp_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

G_GNUC_UNUSED static const MemresResourceOps tp_ops = {
  .version = 1,
  .init = tp_init,
  .finalize = tp_finalize,
  .allocate = tp_allocate,
  .deallocate = tp_deallocate,
  .query = tp_query,
};

#define TP_KIND_INFO(kind_name)                                                                    \
  {                                                                                                \
    .struct_size = sizeof (MemresKindInfo), .name = (kind_name),                                   \
    .description = "test kind " kind_name, .ops = &tp_ops,                                         \
  }

/* hostdev-kind.c: "hostdev", a kind the allocator's test programs register in themselves: malloc()
 * memory flagged host- and device-accessible and stream-ordered (no wait before the free), on no
 * device. libmemres-allocator accepts it (it says the device can reach it, as page-locked memory
 * does) where no driver is: the suite core's stand-in for device memory. Write to it as host
 * memory only. */
#include "hostdev-kind.h"

#include <memres/memres-plugin.h>
#include <stdlib.h>

static gboolean
hostdev_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
hostdev_finalize (MemresResource *mr)
{
}

static gboolean
hostdev_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                  GError **error)
{
  gpointer p = malloc (size);

  if (p == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "hostdev: out of memory");
      return FALSE;
    }
  alloc->address = (guint64) (guintptr) p;
  alloc->size = size;
  return TRUE;
}

static gboolean
hostdev_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                    GError **error)
{
  free ((gpointer) (guintptr) alloc->address);
  return TRUE;
}

static void
hostdev_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE
                | MEMRES_MEMORY_STREAM_ORDERED;
}

static const MemresResourceOps hostdev_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = hostdev_init,
  .finalize = hostdev_finalize,
  .allocate = hostdev_allocate,
  .deallocate = hostdev_deallocate,
  .query = hostdev_query,
};

static const MemresKindInfo hostdev_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "hostdev",
  .description = "host memory flagged device-accessible (tests/hostdev-kind.h)",
  .ops = &hostdev_ops,
};

void
hostdev_register (void)
{
  GError *error = NULL;

  if (!memres_registry_register_kind (&hostdev_info, &error))
    g_error ("registering hostdev: %s", error->message);
}

/* hostdev-kind.c: "hostdev", a kind the allocator's test programs register in themselves: malloc()
 * memory flagged host- and device-accessible and stream-ordered (no wait before the free), on no
 * device. libmemres-allocator accepts it (it says the device can reach it, as page-locked memory
 * does) where no driver is: the suite core's stand-in for device memory. Write to it as host
 * memory only. */
#include "hostdev-kind.h"

#include "plugins/common.h"

static void
hostdev_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE
                | MEMRES_MEMORY_STREAM_ORDERED;
}

static const MemresResourceOps hostdev_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = tp_init,
  .finalize = tp_finalize,
  .allocate = tp_allocate,
  .deallocate = tp_deallocate,
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

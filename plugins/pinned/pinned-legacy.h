/* memres - CUDA memory resources
 * pinned-legacy.h: legacy mode of the pinned kind: cuMemHostAlloc / cuMemFreeHost, synchronous.
 * Internal to the pinned plugin. */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

typedef struct
{
  const MemresCudaDriver *drv;
  gint device;            /* whose primary context allocates when none is current */
  guint host_alloc_flags; /* CU_MEMHOSTALLOC_* */
  GMutex lock;            /* guards the statistics */
  guint64 used_current;
  guint64 used_high;
} PinnedLegacy;

gboolean pinned_legacy_init (PinnedLegacy *self, gint device, guint host_alloc_flags,
                             GError **error);
void pinned_legacy_finalize (PinnedLegacy *self);
gboolean pinned_legacy_allocate (PinnedLegacy *self, gsize size, MemresAllocation *alloc,
                                 GError **error);
gboolean pinned_legacy_deallocate (PinnedLegacy *self, MemresAllocation *alloc, MemresStream stream,
                                   GError **error);
void pinned_legacy_get_stats (PinnedLegacy *self, MemresStats *stats);
void pinned_legacy_reset_stats (PinnedLegacy *self);

G_END_DECLS

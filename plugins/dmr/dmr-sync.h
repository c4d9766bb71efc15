/* memres - CUDA memory resources
 * dmr-sync.h: the dmr kind's fallback for devices without memory pools: synchronous cuMemAlloc
 * and cuMemFree, with statistics counted here. */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

typedef struct
{
  const MemresCudaDriver *drv;
  gint device;
  CUcontext context; /* the device's primary context, held by the core */
  guint64 max_size;  /* 0: no limit */
  GMutex lock;       /* guards the counters */
  guint64 used_current;
  guint64 used_high;
} DmrSync;

gboolean dmr_sync_init(DmrSync *self, gint device, guint64 max_size, GError **error);
void dmr_sync_clear(DmrSync *self);
gboolean dmr_sync_allocate(DmrSync *self, gsize size, guint64 *address, GError **error);
gboolean dmr_sync_free(DmrSync *self, guint64 address, gsize size, MemresStream stream,
                       GError **error);
void dmr_sync_get_stats(DmrSync *self, MemresStats *stats);
void dmr_sync_reset_stats(DmrSync *self);

G_END_DECLS

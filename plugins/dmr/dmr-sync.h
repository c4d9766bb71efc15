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

/* Sets up the fallback for @device (which exists) with a cap of @max_size live bytes (0: none):
 * retains nothing itself, the primary context is the core's (memres_cuda_get_primary_context).
 * NO_DRIVER, NO_DEVICE or a MEMRES_CUDA_ERROR on failure. */
gboolean dmr_sync_init (DmrSync *self, gint device, guint64 max_size, GError **error);
void dmr_sync_clear (DmrSync *self);
/* cuMemAlloc in the device's primary context (pushed and popped); the memory is ready for every
 * stream at once. OUT_OF_MEMORY beyond max_size or from the driver; thread-safe. */
gboolean dmr_sync_allocate (DmrSync *self, gsize size, guint64 *address, GError **error);
/* cuStreamSynchronize (@stream), then cuMemFree; see dmr-sync.c for a stream that fails.
 * Thread-safe. */
gboolean dmr_sync_free (DmrSync *self, guint64 address, gsize size, MemresStream stream,
                        GError **error);
/* Statistics counted here: reserved = used (the driver keeps no pool). Thread-safe. */
void dmr_sync_get_stats (DmrSync *self, MemresStats *stats);
void dmr_sync_reset_stats (DmrSync *self);

G_END_DECLS

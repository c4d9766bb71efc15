/* memres - CUDA memory resources
 * dmr-private.h: the instance data of the dmr kind, and its implementation for devices without
 * memory pools (dmr-sync.c). Internal to the dmr plugin. */
#pragma once

#include "pool.h"

G_BEGIN_DECLS

typedef struct
{
  PoolRecord pool; /* first: the shared pool slots find it there */
  gint device;
  /* sync_fallback=true on a device without memory pools (dmr-sync.c) */
  const MemresCudaDriver *drv;
} Dmr;

/* Makes @self (device set) an instance of the fallback, with a cap of @max_size live bytes (0:
 * none): its ops table, chosen once (pool_use_other()). Retains nothing itself: the primary
 * context is the core's (memres_cuda_get_primary_context). NO_DRIVER, NO_DEVICE or a
 * MEMRES_CUDA_ERROR on failure. */
gboolean dmr_sync_init (Dmr *self, guint64 max_size, GError **error);

G_END_DECLS

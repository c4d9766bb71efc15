/* memres - CUDA memory resources
 * pinned-private.h: the instance data of the pinned kind, and the functions that set up its two
 * implementations. Internal to the pinned plugin. */
#pragma once

#include "pinned-config.h"

G_BEGIN_DECLS

typedef struct
{
  PoolRecord pool; /* first: the shared pool slots find it there */
  /* mode=legacy (pinned-legacy.c) */
  const MemresCudaDriver *drv;
  gint device;            /* whose primary context allocates when none is current */
  guint host_alloc_flags; /* CU_MEMHOSTALLOC_* */
} Pinned;

/* pinned-pool.c: mode=pool. Creates the host-located pool @config describes and grants its
 * devices access; the import_handle slot. */
gboolean pinned_pool_init (Pinned *self, const PinnedConfig *config, GError **error);
gboolean pinned_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error);

/* pinned-legacy.c: mode=legacy, the ops table such an instance gets (pool_use_other()). */
gboolean pinned_legacy_init (Pinned *self, const PinnedConfig *config, GError **error);

G_END_DECLS

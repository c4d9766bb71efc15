/* memres - CUDA memory resources
 * pinned-config.h: the options of the pinned kind, checked, and the mode they resolve to on
 * the machine. Internal to the pinned plugin. */
#pragma once

#include "pool.h"

G_BEGIN_DECLS

typedef enum
{
  PINNED_MODE_POOL,
  PINNED_MODE_LEGACY,
} PinnedMode;

/* The shared pool options pinned offers: mode=pool only. */
#define PINNED_POOL_OPTIONS POOL_OPTIONS_ATTRIBUTES

/* Sentinel of numa_id: "the node closest to the device" (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID). */
#define PINNED_NUMA_AUTO (-1)

typedef struct
{
  gint device;
  PinnedMode mode;   /* the mode asked for, then (after resolve) the one in use */
  gboolean fallback; /* pool mode: use legacy where the device has no host memory pools */

  /* pool mode */
  gint numa_id;           /* PINNED_NUMA_AUTO, or a node */
  gboolean numa_id_given; /* the spec named a node (>= 0) */
  gint *devices;          /* devices granted access; owned */
  gsize n_devices;
  gboolean ipc;
  PoolConfig pool; /* a new pool; attributes from the options, location set by resolve */

  /* legacy mode: CU_MEMHOSTALLOC_* */
  guint host_alloc_flags;
} PinnedConfig;

gboolean pinned_config_init (PinnedConfig *config, const MemresOptions *options, GError **error);
gboolean pinned_config_resolve (PinnedConfig *config, GError **error);
void pinned_config_clear (PinnedConfig *config);
/* Bytes of physical memory of the host (G_MAXUINT64 where unknown), read once. */
guint64 pinned_host_memory (void);

G_END_DECLS

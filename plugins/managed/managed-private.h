/* memres - CUDA memory resources
 * managed-private.h: the instance data of the managed kind, what its creation checks
 * (managed-config.c) and its pool=none implementation (managed-none.c). Internal to the managed
 * plugin. */
#pragma once

#include "pool.h"

G_BEGIN_DECLS

typedef enum
{
  MANAGED_POOL_CURRENT,
  MANAGED_POOL_NEW,
  MANAGED_POOL_NONE,
} ManagedPoolMode;

typedef struct
{
  PoolRecord pool; /* first: the shared pool slots find it there */
  gint device;
  /* pool=none (managed-none.c) */
  const MemresCudaDriver *drv;
  guint attach;            /* CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST */
  CUmemLocation preferred; /* advised after each allocation unless type NONE */
} Managed;

/* The shared pool options managed offers: pool=current|new only. */
#define MANAGED_POOL_OPTIONS POOL_OPTION_RELEASE_THRESHOLD

/* The device attributes creation looks at. */
typedef struct
{
  gchar name[128];
  int managed_memory;
  int concurrent;
  int pools;
} ManagedDevice;

/* managed-config.c: the choices of the pool option; the options of another mode than @mode
 * (INVALID_ARGUMENT); @device's name and attributes; NOT_SUPPORTED naming @device, @what and
 * @attribute; why @device cannot have a managed pool (NOT_SUPPORTED; TRUE when it can); the
 * once-per-process warning of a device without concurrent managed access; the preferred
 * location the options name. */
extern const char *const managed_pool_choices[];
gboolean managed_check_mode_options (const MemresOptions *options, ManagedPoolMode mode,
                                     GError **error);
gboolean managed_get_device (const MemresCudaDriver *drv, gint device, ManagedDevice *info,
                             GError **error);
gboolean managed_not_supported (GError **error, gint device, const ManagedDevice *info,
                                const char *what, const char *attribute, const char *hint);
gboolean managed_check_pools (const MemresCudaDriver *drv, gint device, const ManagedDevice *info,
                              GError **error);
void managed_warn_not_concurrent (gint device, const ManagedDevice *info);
gboolean managed_resolve_location (const MemresOptions *options, gint device,
                                   CUmemLocation *location, GError **error);

/* managed-none.c: makes @self (device and drv set) a pool=none instance attaching as the attach
 * option says and advising @location (pool_use_other()); warns once where @info has no
 * concurrent managed access; NOT_SUPPORTED when the driver lacks the calls. */
gboolean managed_none_init (Managed *self, const MemresOptions *options,
                            const CUmemLocation *location, const ManagedDevice *info,
                            GError **error);

G_END_DECLS

/* memres - CUDA memory resources
 * pool.h: stream-ordered driver memory pools (CUmemoryPool), the code the dmr, ipc and pinned
 * kinds share. Linked statically into each of those plugins with hidden visibility: none of
 * these symbols is exported, and none of them is part of any ABI.
 *
 * A MemresPool is a plain struct embedded in a plugin's private data. It is set up once
 * (memres_pool_init() or memres_pool_init_for_handle()), then read-only: every other function
 * is thread-safe, except memres_pool_destroy(), which the plugin calls once from its finalize
 * slot when no buffer of the pool is left.
 *
 * Typical plugin:
 *
 *   static const MemresOptionSpec options[] = {
 *     { "device", MEMRES_OPTION_INT, "0", "...", NULL, 0, G_MAXINT },
 *     MEMRES_POOL_OPTION_SPEC_POOL,
 *     MEMRES_POOL_OPTION_SPECS_ATTRIBUTES,
 *   };
 *
 *   init:      memres_pool_config_init_device (&cfg, device);
 *              memres_pool_config_set_options (&cfg, options, MEMRES_POOL_OPTIONS_ALL, error);
 *              memres_pool_init (&self->pool, &cfg, error);
 *   allocate:  memres_pool_allocate (&self->pool, size, stream, &alloc->address, error);
 *   deallocate memres_pool_free (&self->pool, alloc->address, stream, error);
 *   finalize:  memres_pool_destroy (&self->pool);
 */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

/* One #MemresOptionSpec initializer without default, choices or range. */
#define MEMRES_POOL_OPTION_(name, type, doc)                                                       \
  {                                                                                                \
    (name), (type), NULL, (doc), NULL, 0, 0                                                        \
  }

/**
 * MEMRES_POOL_OPTION_SPEC_POOL:
 *
 * The `pool` option (enum `current` | `new`, default `current`), as a #MemresOptionSpec
 * initializer for a kind's schema. Read by memres_pool_config_set_options() with
 * %MEMRES_POOL_OPTIONS_POOL.
 */
#define MEMRES_POOL_OPTION_SPEC_POOL                                                               \
  {                                                                                                \
    "pool", MEMRES_OPTION_ENUM, "current", MEMRES_POOL_DOC_POOL, memres_pool_choices_, 0, 0        \
  }

#define MEMRES_POOL_DOC_POOL                                                                       \
  "current: the location's current pool (shared with other users, never destroyed); new: a "       \
  "pool of its own, destroyed after the resource's last buffer"
#define MEMRES_POOL_DOC_MAX_SIZE                                                                   \
  "most bytes the pool may reserve (a pool the resource creates, not a wrapped current pool; "     \
  "unset: the driver's default)"
#define MEMRES_POOL_DOC_RELEASE_THRESHOLD                                                          \
  "bytes of unused memory the pool keeps reserved across synchronizations, or max; unset: the "    \
  "driver's value, except that a wrapped current pool whose threshold is 0 gets max: at 0 the "    \
  "pool returns its memory to the system at every synchronization and allocation gets slow"
#define MEMRES_POOL_DOC_REUSE_FOLLOW                                                               \
  "reuse memory freed on another stream once an event orders the two (unset: driver default)"
#define MEMRES_POOL_DOC_REUSE_OPPORTUNISTIC                                                        \
  "reuse memory whose free already completed on another stream (unset: driver default)"
#define MEMRES_POOL_DOC_REUSE_INTERNAL                                                             \
  "let the driver add dependencies to reuse memory freed on another stream (unset: driver "        \
  "default)"

/**
 * MEMRES_POOL_OPTION_SPECS_ATTRIBUTES:
 *
 * The options that set pool attributes, as five #MemresOptionSpec initializers:
 * `max_size` (size, new pools only), `release_threshold` (size or `max`),
 * `reuse_follow_event_dependencies`, `reuse_allow_opportunistic`,
 * `reuse_allow_internal_dependencies` (bools). All unset by default, which keeps the driver's
 * values, except that wrapping a current pool whose release threshold is 0 raises it to `max`
 * (see memres_pool_init()). Read by memres_pool_config_set_options() with
 * %MEMRES_POOL_OPTIONS_ATTRIBUTES.
 */
#define MEMRES_POOL_OPTION_SPECS_ATTRIBUTES                                                        \
  MEMRES_POOL_OPTION_ ("max_size", MEMRES_OPTION_SIZE, MEMRES_POOL_DOC_MAX_SIZE),                  \
      MEMRES_POOL_OPTION_ ("release_threshold", MEMRES_OPTION_SIZE,                                \
                           MEMRES_POOL_DOC_RELEASE_THRESHOLD),                                     \
      MEMRES_POOL_OPTION_ ("reuse_follow_event_dependencies", MEMRES_OPTION_BOOL,                  \
                           MEMRES_POOL_DOC_REUSE_FOLLOW),                                          \
      MEMRES_POOL_OPTION_ ("reuse_allow_opportunistic", MEMRES_OPTION_BOOL,                        \
                           MEMRES_POOL_DOC_REUSE_OPPORTUNISTIC),                                   \
      MEMRES_POOL_OPTION_ ("reuse_allow_internal_dependencies", MEMRES_OPTION_BOOL,                \
                           MEMRES_POOL_DOC_REUSE_INTERNAL)

/* The choices of MEMRES_POOL_OPTION_SPEC_POOL: {"current", "new", NULL}. */
extern const char *const memres_pool_choices_[];

/**
 * MemresPoolOptions:
 * @MEMRES_POOL_OPTIONS_POOL: read the `pool` option (%MEMRES_POOL_OPTION_SPEC_POOL)
 * @MEMRES_POOL_OPTIONS_ATTRIBUTES: read the attribute options
 *   (%MEMRES_POOL_OPTION_SPECS_ATTRIBUTES)
 * @MEMRES_POOL_OPTIONS_ALL: both
 *
 * Which option groups a kind's schema holds, for memres_pool_config_set_options().
 */
typedef enum
{
  MEMRES_POOL_OPTIONS_POOL = 1 << 0,
  MEMRES_POOL_OPTIONS_ATTRIBUTES = 1 << 1,
  MEMRES_POOL_OPTIONS_ALL = MEMRES_POOL_OPTIONS_POOL | MEMRES_POOL_OPTIONS_ATTRIBUTES,
} MemresPoolOptions;

/**
 * MemresPoolConfig:
 * @location: where the memory lives: `CU_MEM_LOCATION_TYPE_DEVICE` + ordinal,
 *   `CU_MEM_LOCATION_TYPE_HOST`, or `CU_MEM_LOCATION_TYPE_HOST_NUMA` + NUMA node
 * @device: the device ordinal whose primary context is made current when a thread without a
 *   current context allocates on the %NULL stream; equals @location's id for device pools
 * @create: %TRUE for a new pool owned by the #MemresPool (cuMemPoolCreate), %FALSE to wrap the
 *   location's current pool (not owned)
 * @handle_type: shareable handle types of a new pool: `CU_MEM_HANDLE_TYPE_NONE`, or
 *   `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` for IPC
 * @max_size: new pools: the most bytes the pool may reserve; 0 = driver default
 * @release_threshold_set: whether @release_threshold is given
 * @release_threshold: bytes kept reserved at synchronization (G_MAXUINT64 = keep everything)
 * @reuse_follow_event_dependencies: -1 = driver default, 0 or 1
 * @reuse_allow_opportunistic: -1 = driver default, 0 or 1
 * @reuse_allow_internal_dependencies: -1 = driver default, 0 or 1
 *
 * How to set up a #MemresPool. Start with memres_pool_config_init_device() or
 * memres_pool_config_init_host(), then memres_pool_config_set_options() or set fields.
 */
typedef struct
{
  CUmemLocation location;
  gint device;
  gboolean create;
  CUmemAllocationHandleType handle_type;
  guint64 max_size;
  gboolean release_threshold_set;
  guint64 release_threshold;
  gint reuse_follow_event_dependencies;
  gint reuse_allow_opportunistic;
  gint reuse_allow_internal_dependencies;
} MemresPoolConfig;

/**
 * MemresPool:
 * @drv: the driver table (set by init)
 * @handle: the driver's pool
 * @owned: %TRUE when memres_pool_destroy() destroys @handle (created or imported pools)
 * @location: where the memory lives (see #MemresPoolConfig)
 * @device: the device whose primary context allocation falls back to (see #MemresPoolConfig)
 * @handle_type: the pool's shareable handle types (`CU_MEM_HANDLE_TYPE_NONE` when not shareable)
 * @pool_id: identity of the pool: random (a version-4 UUID) for pools set up here; an importer
 *   copies the exporter's
 * @device_uuid: UUID of @device; filled only for shareable pools (@handle_type not NONE),
 *   all zero otherwise
 * @share_fd: shareable pools: the pool's POSIX-fd shareable handle in this process: for a pool
 *   created here, exported once at creation (the driver refuses cuMemPoolExportPointer on a
 *   pool never exported: CUDA_ERROR_INVALID_VALUE, seen on the H200); for an imported pool,
 *   this process's duplicate of the fd it was imported from. memres_pool_export_handle() hands
 *   out duplicates; memres_pool_destroy() closes it. -1 for other pools
 *
 * A driver memory pool. Fields are read-only after init; plugins may read them freely.
 */
typedef struct
{
  const MemresCudaDriver *drv;
  CUmemoryPool handle;
  gboolean owned;
  CUmemLocation location;
  gint device;
  CUmemAllocationHandleType handle_type;
  guint8 pool_id[MEMRES_IPC_ID_SIZE];
  guint8 device_uuid[MEMRES_IPC_ID_SIZE];
  gint share_fd;
  /*< private >*/
  GMutex access_lock;    /* serializes set_access and guards peers_granted */
  guint64 peers_granted; /* bit d: device d was granted access by set_access */
} MemresPool;

/* Configuration */
void memres_pool_config_init_device (MemresPoolConfig *config, gint device);
void memres_pool_config_init_host (MemresPoolConfig *config, CUmemLocationType type, gint numa_id,
                                   gint device);
gboolean memres_pool_config_set_options (MemresPoolConfig *config, const MemresOptions *options,
                                         MemresPoolOptions which, GError **error);
gboolean memres_pool_check_supported (const MemresPoolConfig *config, gboolean *supported,
                                      GError **error);

/* Lifetime */
gboolean memres_pool_init (MemresPool *pool, const MemresPoolConfig *config, GError **error);
void memres_pool_init_for_handle (MemresPool *pool, const MemresCudaDriver *drv,
                                  CUmemoryPool handle, gboolean owned,
                                  const CUmemLocation *location, gint device,
                                  CUmemAllocationHandleType handle_type);
void memres_pool_destroy (MemresPool *pool);

/* Stream-ordered allocation */
gboolean memres_pool_allocate (MemresPool *pool, gsize size, MemresStream stream, guint64 *address,
                               GError **error);
gboolean memres_pool_free (MemresPool *pool, guint64 address, MemresStream stream, GError **error);

/* Attributes */
gboolean memres_pool_get_stats (MemresPool *pool, MemresStats *stats, GError **error);
gboolean memres_pool_reset_stats (MemresPool *pool, GError **error);
gboolean memres_pool_trim (MemresPool *pool, gsize bytes_to_keep, GError **error);
gboolean memres_pool_get_release_threshold (MemresPool *pool, guint64 *bytes, GError **error);

/* Peer access */
gboolean memres_pool_set_access (MemresPool *pool, const MemresAccessDesc *descs, guint n_descs,
                                 GError **error);
gboolean memres_pool_get_access (MemresPool *pool, gint device, MemresAccess *access,
                                 GError **error);

/* Sharing between processes (pool-ipc.c): POSIX file descriptor handles only */
gboolean memres_pool_is_shareable (const MemresPool *pool);
gboolean memres_pool_export_handle (MemresPool *pool, const char *kind, MemresIpcHandle **handle,
                                    GError **error);
gboolean memres_pool_init_import (MemresPool *pool, const MemresIpcHandle *handle,
                                  const CUmemLocation *location, GError **error);
gboolean memres_pool_export_pointer (MemresPool *pool, const MemresAllocation *alloc,
                                     MemresBufferExport *out, GError **error);
gboolean memres_pool_import_pointer (MemresPool *pool, const MemresBufferExport *in,
                                     MemresStream stream, MemresAllocation *alloc, GError **error);
gboolean memres_pool_ensure_context (MemresPool *pool, GError **error);

/* Errors: sets @error from a failed driver call @call, mapping CUDA_ERROR_OUT_OF_MEMORY to
 * MEMRES_ERROR_OUT_OF_MEMORY (keeping the driver's message) and everything else to
 * MEMRES_CUDA_ERROR. Always returns FALSE. */
gboolean memres_pool_set_alloc_error (GError **error, CUresult result, const char *call,
                                      gsize size);

G_END_DECLS

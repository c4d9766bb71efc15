/* memres - CUDA memory resources
 * pool.h: the shared implementation of the pool kinds (dmr, ipc, pinned, managed): stream-ordered
 * driver memory pools (CUmemoryPool) and the ready-made slot functions that serve them. A static
 * library linked into each of those plugins with hidden visibility: none of these symbols is
 * exported (each plugin still exports its descriptor only), none is part of any ABI.
 *
 * A pool kind puts a #PoolRecord FIRST in its private data (subclass by prefix: the slots find
 * the record at memres_resource_get_private()), sets it up in its init slot with pool_init(),
 * pool_init_import() or pool_use_other(), and registers the pool_* slots below as its own:
 *
 *   typedef struct { PoolRecord pool; gint device; } Dmr;
 *
 *   static const MemresOptionSpec dmr_options[] = {
 *     { "device", MEMRES_OPTION_INT, "0", "...", NULL, 0, G_MAXINT },
 *     POOL_OPTIONS_HERE,
 *   };
 *   init:     pool_config_init_device (&cfg, device);
 *             pool_config_set_options (&cfg, options, POOL_OPTIONS_ALL, error);
 *             pool_init (&self->pool, &cfg, error);
 *   ops:      { .version = ..., .init = dmr_init, .query = dmr_query, POOL_SLOTS,
 *               POOL_ACCESS_SLOTS }
 *   register: pool_register_kind (plugin, &info, POOL_OPTIONS_ALL, error);
 *
 * A kind with a second implementation that is not a pool (dmr's sync_fallback, pinned's
 * mode=legacy, managed's pool=none) chooses it once, at init, with pool_use_other(): the
 * instance's allocate and deallocate are then that implementation's ops table, reached through
 * the checked path the slots already have (see #PoolRecord.fast_size), and the other slots
 * answer for it (statistics counted here, nothing to trim, the pool-only slots refused). The
 * kinds' slots have no branch of their own; the shared allocate and deallocate fast path is one
 * comparison, the one max_size already needed. */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

/* Options (pool-options.c): declared once, each kind picking the entries it offers. */

/**
 * PoolOptions:
 * @POOL_OPTION_POOL: `pool` (enum `current` | `new`, default `current`)
 * @POOL_OPTION_MAX_SIZE: `max_size` (size; new pools only: bytes of live buffers, enforced here)
 * @POOL_OPTION_RELEASE_THRESHOLD: `release_threshold` (size or `max`)
 * @POOL_OPTION_REUSE: the three reuse policies `reuse_follow_event_dependencies`,
 *   `reuse_allow_opportunistic`, `reuse_allow_internal_dependencies` (bools)
 * @POOL_OPTIONS_ATTRIBUTES: the options that set pool attributes
 * @POOL_OPTIONS_ALL: every pool option
 *
 * Which of the shared pool options a kind offers (pool_register_kind()) and reads
 * (pool_config_set_options()). Unset options keep the driver's values.
 */
typedef enum
{
  POOL_OPTION_POOL = 1 << 0,
  POOL_OPTION_MAX_SIZE = 1 << 1,
  POOL_OPTION_RELEASE_THRESHOLD = 1 << 2,
  POOL_OPTION_REUSE = 1 << 3,
  POOL_OPTIONS_ATTRIBUTES
  = POOL_OPTION_MAX_SIZE | POOL_OPTION_RELEASE_THRESHOLD | POOL_OPTION_REUSE,
  POOL_OPTIONS_ALL = POOL_OPTION_POOL | POOL_OPTIONS_ATTRIBUTES,
} PoolOptions;

/* The place in a kind's own option table where pool_register_kind() puts the pool options it
 * picks (an entry without a name, never registered as such). */
#define POOL_OPTIONS_HERE                                                                          \
  {                                                                                                \
    NULL, MEMRES_OPTION_BOOL, NULL, NULL, NULL, 0, 0                                               \
  }

gboolean pool_register_kind (MemresPlugin *plugin, const MemresKindInfo *info, PoolOptions which,
                             GError **error);
const char *pool_options_first_set (const MemresOptions *options, PoolOptions which);

/**
 * PoolConfig:
 * @location: where the memory lives: `CU_MEM_LOCATION_TYPE_DEVICE` + ordinal,
 *   `CU_MEM_LOCATION_TYPE_HOST`, or `CU_MEM_LOCATION_TYPE_HOST_NUMA` + NUMA node
 * @device: the device ordinal whose primary context is made current when a thread without a
 *   current context allocates on the %NULL stream; equals @location's id for device pools
 * @create: %TRUE for a new pool owned by the record (cuMemPoolCreate), %FALSE to wrap the
 *   location's current pool (not owned)
 * @handle_type: shareable handle types of a new pool: `CU_MEM_HANDLE_TYPE_NONE`, or
 *   `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` or `CU_MEM_HANDLE_TYPE_FABRIC` for IPC
 * @max_size: new pools: the most bytes of live allocations the pool serves (enforced here,
 *   also passed to the driver as maxSize, which it rounds up); 0 = driver default
 * @release_threshold_set: whether @release_threshold is given
 * @release_threshold: bytes kept reserved at synchronization (G_MAXUINT64 = keep everything)
 * @reuse_follow_event_dependencies: -1 = driver default, 0 or 1
 * @reuse_allow_opportunistic: -1 = driver default, 0 or 1
 * @reuse_allow_internal_dependencies: -1 = driver default, 0 or 1
 * @alloc_type: `CU_MEM_ALLOCATION_TYPE_PINNED` (what the init functions set) or
 *   `CU_MEM_ALLOCATION_TYPE_MANAGED` (a managed pool, whose @location may also be
 *   `CU_MEM_LOCATION_TYPE_NONE`; @max_size and @handle_type must stay 0 and NONE)
 *
 * How to set up a pool. Start with pool_config_init_device() or pool_config_init_host(), then
 * pool_config_set_options() or set fields.
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
  CUmemAllocationType alloc_type;
} PoolConfig;

void pool_config_init_device (PoolConfig *config, gint device);
void pool_config_init_host (PoolConfig *config, CUmemLocationType type, gint numa_id, gint device);
gboolean pool_config_set_options (PoolConfig *config, const MemresOptions *options,
                                  PoolOptions which, GError **error);
gboolean pool_check_supported (const PoolConfig *config, gboolean *supported, GError **error);

/**
 * PoolRecord:
 * @fast_size: the largest allocation the allocate and deallocate slots hand to the driver at
 *   once; a larger one takes the checked path, which refuses it (@size_limit), lets another
 *   implementation serve it (@other), refuses allocation (@imported) or counts it (@counted).
 *   %G_MAXSIZE for a plain pool, @size_limit when one is set, 0 when every call needs the
 *   checked path. Kept up to date by the setup functions
 * @drv: the driver table (%NULL for an @other instance)
 * @handle: the driver's pool
 * @other: (nullable): the instance's implementation when it is not a pool (pool_use_other()):
 *   its driver calls serve the allocate and deallocate slots; %NULL for a pool
 * @no_pool: with @other, the message of the slots that need a pool (access, sharing)
 * @imported: the pool was imported from another process (pool_init_import()): it maps
 *   buffers (pool_import_buffer()) but cannot allocate
 * @size_limit: the largest single allocation (G_MAXUINT64: none); see pool_set_size_limit()
 * @size_limit_what: what @size_limit is, for the error
 * @unshareable: (nullable): the message of the sharing slots for a pool that is not
 *   shareable; %NULL for the generic one
 * @counted: @used counts the bytes of live buffers (a pool with @max_size, or @other)
 * @max_size: the most bytes of live buffers (0: no limit); enforced here, not by the driver,
 *   which rounds a small CUmemPoolProps.maxSize up
 * @used: (atomic) bytes of live buffers, when @counted
 * @used_high: (atomic) high-water mark of @used
 * @owned: %TRUE when pool_destroy() destroys @handle (created or imported pools)
 * @location: where the memory lives (see #PoolConfig)
 * @device: the device whose primary context allocation falls back to (see #PoolConfig); with
 *   @other, the device of its contexts (#PoolContext)
 * @handle_type: the pool's shareable handle types (`CU_MEM_HANDLE_TYPE_NONE` when not shareable)
 * @pool_id: identity of the pool: random (a version-4 UUID) for pools set up here; an importer
 *   copies the exporter's
 * @device_uuid: UUID of @device; filled only for shareable pools, all zero otherwise
 * @share_fd: shareable pools: the pool's POSIX-fd shareable handle in this process: for a pool
 *   created here, exported once at creation (the driver refuses cuMemPoolExportPointer on a
 *   pool never exported: CUDA_ERROR_INVALID_VALUE, seen on the H200); for an imported pool,
 *   this process's duplicate of the fd it was imported from. pool_export_handle() hands out
 *   duplicates; pool_destroy() closes it. -1 for other pools
 * @fabric: a pool of fabric handles (@handle_type `CU_MEM_HANDLE_TYPE_FABRIC`): its fabric
 *   handle, exported once at creation (cuMemPoolExportToShareableHandle(), which is also the
 *   probe: a process without an IMEX channel is refused there) or the one it was imported from
 *
 * The pool kinds' shared instance data, placed first in each kind's private data. Set up in
 * init (or import_handle), read-only after that but for the atomic counters and the access
 * state; kinds may read the fields freely.
 */
typedef struct
{
  /* the allocate/deallocate fast path reads these three */
  gsize fast_size;
  const MemresCudaDriver *drv;
  CUmemoryPool handle;
  /* the checked path */
  const struct _PoolOther *other;
  const char *no_pool;
  gboolean imported;
  guint64 size_limit;
  const char *size_limit_what;
  const char *unshareable;
  gboolean counted;
  guint64 max_size;
  guint64 used;
  guint64 used_high;
  /* the pool */
  gboolean owned;
  CUmemLocation location;
  gint device;
  CUmemAllocationHandleType handle_type;
  guint8 pool_id[MEMRES_IPC_ID_SIZE];
  guint8 device_uuid[MEMRES_IPC_ID_SIZE];
  gint share_fd;
  MemresFabricHandle fabric;
  /*< private >*/
  GMutex access_lock;    /* serializes set_access and guards peers_granted */
  guint64 peers_granted; /* bit d: device d was granted access by set_access */
  gboolean shared;       /* a wrapped current pool counted as a user (pool.c: SharedPool) */
} PoolRecord;

/* Setup (pool.c, pool-ipc.c), from a kind's init or import_handle slot. On failure nothing is
 * left: the core does not call finalize after a failed init. */
gboolean pool_init (PoolRecord *pool, const PoolConfig *config, GError **error);
gboolean pool_init_import (PoolRecord *pool, const MemresIpcHandle *handle,
                           const CUmemLocation *location, GError **error);
gboolean pool_init_import_fabric (PoolRecord *pool, const MemresIpcHandle *handle,
                                  const MemresFabricHandle *fabric, GError **error);

/**
 * PoolContext:
 * @POOL_CONTEXT_PRIMARY: the device's primary context, pushed for the call
 *   (memres_cuda_push_context()): memory that belongs to that context (cuMemAlloc,
 *   cuMemAllocManaged)
 * @POOL_CONTEXT_CURRENT: the calling thread's current context, the device's primary context
 *   made current when there is none (memres_cuda_ensure_context()): pinned's mode=legacy
 *
 * The context an other implementation (#PoolOther) allocates and frees in.
 */
typedef enum
{
  POOL_CONTEXT_PRIMARY,
  POOL_CONTEXT_CURRENT,
} PoolContext;

/**
 * PoolOther:
 * @context: the context both calls are made in
 * @allocate: the kind's allocation of @size bytes (its own driver calls), in @context:
 *   stores the address in *@address and returns `CUDA_SUCCESS`, or releases what it made and
 *   returns the failing call's result, *@call set to its name (on entry: @allocate_call)
 * @allocate_call: the name of @allocate's driver call, for its error
 * @free: the kind's free of @address (its own driver call), in @context: the call's result
 * @free_call: the name of @free's driver call, for its error
 *
 * A kind's implementation that is not a pool (dmr's sync_fallback, pinned's mode=legacy,
 * managed's pool=none), given to pool_use_other(): only its driver calls. The slots make the
 * context current around them and report their failures the same way for every kind
 * (pool-other.c): an allocation's error through alloc_error_set() (alloc-error.h); a free's
 * `CUDA_ERROR_DEINITIALIZED` (process exit: the driver shut down), from the free or from making
 * the context current, is success (release.h). Static; called on any thread.
 */
typedef struct _PoolOther
{
  PoolContext context;
  CUresult (*allocate) (MemresResource *mr, gsize size, guint64 *address, const char **call);
  const char *allocate_call;
  CUresult (*free) (MemresResource *mr, guint64 address);
  const char *free_call;
} PoolOther;

void pool_use_other (PoolRecord *pool, const PoolOther *other, gint device, guint64 max_size,
                     const char *no_pool);
void pool_set_size_limit (PoolRecord *pool, guint64 size_limit, const char *what);
void pool_destroy (PoolRecord *pool);
gboolean pool_is_shareable (const PoolRecord *pool);
gboolean pool_grant_access (PoolRecord *pool, const MemresAccessDesc *descs, guint n_descs,
                            GError **error);

/* Ready-made slots (pool-slots.c, pool-ipc.c), for a kind's #MemresResourceOps and (the
 * sharing ones) #MemresIpcOps. Each finds the #PoolRecord at the start of the instance's
 * private data. */
void pool_finalize (MemresResource *mr);
gboolean pool_allocate (MemresResource *mr, gsize size, MemresStream stream,
                        MemresAllocation *alloc, GError **error);
gboolean pool_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                          GError **error);
gboolean pool_get_stats (MemresResource *mr, MemresStats *stats, GError **error);
gboolean pool_reset_stats (MemresResource *mr, GError **error);
gboolean pool_trim (MemresResource *mr, gsize bytes_to_keep, GError **error);
void pool_at_fork (MemresResource *mr, MemresForkPhase phase);
void pool_snapshot (MemresResource *mr, MemresSnapshotLayer *layer);
void pool_explain_oom (MemresResource *mr, MemresOomFigures *figures);
gboolean pool_set_access (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs,
                          GError **error);
gboolean pool_get_access (MemresResource *mr, gint device, MemresAccess *access, GError **error);
gboolean pool_export_handle (MemresResource *mr, MemresIpcHandle **handle, GError **error);
gboolean pool_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error);
gboolean pool_export_fabric_handle (MemresResource *mr, MemresFabricHandle *out, GError **error);
gboolean pool_import_fabric_handle (MemresResource *mr, const MemresIpcHandle *handle,
                                    const MemresFabricHandle *fabric, GError **error);
gboolean pool_export_buffer (MemresResource *mr, const MemresAllocation *alloc,
                             MemresBufferExport *out, GError **error);
gboolean pool_import_buffer (MemresResource *mr, const MemresBufferExport *in, MemresStream stream,
                             MemresAllocation *alloc, GError **error);

/* The slots above as designated initializers: of a kind's #MemresResourceOps, which adds its
 * own init and query, POOL_SLOTS every pool kind takes (finalize, allocate, deallocate,
 * get_stats, reset_stats, trim, at_fork, snapshot, explain_oom) and POOL_ACCESS_SLOTS (set_access,
 * get_access); of a sharing kind's #MemresIpcOps, POOL_SHARING_SLOTS (export_handle, export_buffer,
 * import_buffer; import_handle is pool_import_handle() for device memory, or the kind's own);
 * a kind of device pools with fabric handles adds POOL_FABRIC_SLOTS. */
#define POOL_SLOTS                                                                                 \
  .finalize = pool_finalize, .allocate = pool_allocate, .deallocate = pool_deallocate,             \
  .get_stats = pool_get_stats, .reset_stats = pool_reset_stats, .trim = pool_trim,                 \
  .at_fork = pool_at_fork, .snapshot = pool_snapshot, .explain_oom = pool_explain_oom
#define POOL_ACCESS_SLOTS .set_access = pool_set_access, .get_access = pool_get_access
#define POOL_SHARING_SLOTS                                                                         \
  .export_handle = pool_export_handle, .export_buffer = pool_export_buffer,                        \
  .import_buffer = pool_import_buffer
#define POOL_FABRIC_SLOTS                                                                          \
  .export_fabric_handle = pool_export_fabric_handle,                                               \
  .import_fabric_handle = pool_import_fabric_handle

G_END_DECLS

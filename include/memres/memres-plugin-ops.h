/* memres - CUDA memory resources
 * memres-plugin-ops.h: a kind's slot table (MemresResourceOps) and what its slots take and fill:
 * the allocation record, the resource's information, the options, the out-of-memory figures, the
 * snapshot layer and its builders, the fork phases. Part of the plugin SDK, included by
 * <memres/memres-plugin.h> (the ABI rules are there); never include it directly. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-plugin-ops
 * @title: Kind slots
 * @short_description: a kind's slot table, #MemresResourceOps, and what its slots take and fill
 * @section_id: memres-memres-plugin-ops
 *
 * The functions a kind gives the core (#MemresResourceOps, in its #MemresKindInfo) and the
 * records they take and fill: the #MemresAllocation a memory slot returns or takes back, the
 * #MemresResourceInfo of the query slot, the #MemresOptions init reads, the #MemresOomFigures of
 * explain_oom, the #MemresSnapshotLayer the snapshot slot fills with memres_snapshot_add_block()
 * and the other builders, the #MemresForkPhase of at_fork (memres_fork_mutex()). A kind that
 * shares memory with other processes has a second table, #MemresIpcOps (memres-plugin-ipc).
 *
 * Part of the plugin SDK: a plugin includes `<memres/memres-plugin.h>`, which includes this
 * header; including it alone is an error. The contract common to every slot (threads, locks,
 * errors, contexts) is #MemresResourceOps's; each slot says what it must do, when the core calls
 * it and which errors it may set.
 */

typedef struct _MemresAllocation MemresAllocation;

/**
 * MemresAllocation:
 * @address: start of the memory: a `CUdeviceptr`, or a host pointer cast to an integer
 *   (`(guint64) (guintptr) ptr`); never 0 for an allocation a slot returns (the core alone
 *   creates the empty, zero-byte buffers whose address is 0)
 * @size: usable bytes, at least the size asked for; a kind that rounds up (granularity)
 *   reports the rounded size, which becomes the buffer's size
 * @plugin_data: per-buffer state owned by the plugin, or %NULL; the core never reads it
 *
 * One allocation as the core keeps it inside its buffer. The allocate, import_buffer and resize
 * slots fill it in (it arrives zero-filled for allocate and import_buffer, but for the mark of a
 * tagged buffer's record: %MEMRES_ALLOCATION_TAGGED); deallocate,
 * export_buffer and resize receive the same record back, so @plugin_data is where a kind keeps
 * what it needs to free the memory (a handle, a mapping, a reference to an upstream buffer).
 * The core owns the record; the plugin owns what @plugin_data points to and frees it in
 * deallocate. A plugin may read the allocation of any of its buffers with
 * memres_buffer_get_allocation(). Frozen layout (part of the plugin ABI).
 *
 * Since: 1.0
 */
struct _MemresAllocation
{
  guint64 address;
  gsize size;
  gpointer plugin_data;
};

/**
 * MEMRES_ALLOCATION_TAGGED:
 *
 * The @size an allocate slot's #MemresAllocation record arrives with when the buffer the call
 * serves has a tag that memres_allocation_get_tag() returns (the core marks that record only in
 * stacks where a layer reads tags, see memres_allocation_get_tag()); every other record arrives
 * with @size 0. So a kind that places or records buffers by tag reads its own record, already in
 * the cache, and calls memres_allocation_get_tag() only for a marked one: an untagged allocation
 * pays no call. Address and plugin data arrive 0 either way, and the slot sets @size on success
 * as always. memres_upstream_allocate() marks the record it passes on when it is the marked one.
 *
 * Since: 2.0
 */
#define MEMRES_ALLOCATION_TAGGED ((gsize) 1)

typedef struct _MemresResourceInfo MemresResourceInfo;

/**
 * MemresResourceInfo:
 * @device: the device ordinal the memory belongs to, or -1 for host memory, page-locked
 *   (pinned, host-located pools and VMM) or not: page-locked memory belongs to no device, as
 *   memres_buffer_new_for_pointer() reports it too
 * @flags: what the memory and the resource can do (#MemresMemoryFlags); the core copies them
 *   to every buffer of the resource and refuses calls the flags rule out (for example
 *   memres_buffer_resize() without %MEMRES_MEMORY_RESIZABLE)
 *
 * Filled by the query slot once, right after init (or import_handle) succeeded; the core
 * caches it for the life of the resource. Frozen layout (part of the plugin ABI).
 *
 * Since: 1.0
 */
struct _MemresResourceInfo
{
  gint device;
  MemresMemoryFlags flags;
};

/**
 * MemresOptions:
 *
 * The validated options of one resource: every key of the kind's schema is present, with the
 * value the spec string gave or the schema's default. Opaque and read-only for plugins; valid
 * during the init slot only (copy what you keep: `g_strdup` strings, copy int lists).
 *
 * Read it with the getter of the key's #MemresOptionType. All getters take a @name that must be
 * a key of the kind's schema, of a type the getter reads; anything else is a programmer error
 * (a `g_critical`) and returns 0, %FALSE or %NULL. They set no error (validation already
 * happened) and only read, so any thread may call them while init runs.
 *
 * - memres_options_is_set(): %TRUE when the spec named the key or the schema has a default
 *   for it; %FALSE for a key with a %NULL default that the spec left out (its getter then
 *   returns 0, %FALSE or %NULL). Works for keys of every type.
 * - memres_options_get_bool(): %MEMRES_OPTION_BOOL.
 * - memres_options_get_int(): %MEMRES_OPTION_INT; for %MEMRES_OPTION_ENUM the index of the
 *   chosen value in @choices (so a C enum in the same order maps directly).
 * - memres_options_get_size(): %MEMRES_OPTION_SIZE, in bytes; `max` reads as `G_MAXUINT64`.
 * - memres_options_get_string(): the value as written in the spec (or the default), for a key
 *   of any type: a %MEMRES_OPTION_STRING's text, an enum's chosen value, an int list joined
 *   with `+`. Transfer none, valid during init only.
 * - memres_options_get_int_list(): %MEMRES_OPTION_INT_LIST; stores the number of values in
 *   @n_values and returns the array (transfer none, valid during init only; %NULL with
 *   @n_values 0 when unset or empty).
 *
 * Since: 1.0
 */
typedef struct _MemresOptions MemresOptions;

/* Full documentation: the reference (share/gtk-doc/html/memres), memres-plugin. */
gboolean memres_options_is_set (const MemresOptions *options, const char *name);
gboolean memres_options_get_bool (const MemresOptions *options, const char *name);
gint64 memres_options_get_int (const MemresOptions *options, const char *name);
guint64 memres_options_get_size (const MemresOptions *options, const char *name);
const char *memres_options_get_string (const MemresOptions *options, const char *name);
const gint64 *memres_options_get_int_list (const MemresOptions *options, const char *name,
                                           gsize *n_values);

/**
 * MEMRES_RESOURCE_OPS_VERSION:
 *
 * The number of the newest #MemresResourceOps layout these headers describe, counted within
 * the plugin ABI's major: 5 under ABI 2 now (#MemresResourceOps.version lists what each number
 * holds). A new major starts again at 1 (the numbers of ABI 1, 1 to 3, meant other layouts; no
 * plugin built for them loads). Every slot's documentation says in which ABI version
 * (`Since:`) it appeared. Set #MemresResourceOps.version to this macro.
 *
 * Since: 1.0
 */
#define MEMRES_RESOURCE_OPS_VERSION 5

/**
 * MemresForkPhase:
 * @MEMRES_FORK_PREPARE: in the parent, before the fork: take the locks
 * @MEMRES_FORK_PARENT: in the parent, after the fork: release them
 * @MEMRES_FORK_CHILD: in the child, after the fork: release them or initialize them again,
 *   and forget what the parent's other threads were doing (they do not exist in the child)
 *
 * The moment of a fork() at which the core calls #MemresResourceOps.at_fork, as
 * `pthread_atfork` names them. Part of the plugin ABI (values are only appended).
 *
 * Since: 2.0
 */
typedef enum
{
  MEMRES_FORK_PREPARE,
  MEMRES_FORK_PARENT,
  MEMRES_FORK_CHILD,
} MemresForkPhase;

/**
 * MEMRES_OOM_UNKNOWN:
 *
 * A figure of #MemresOomFigures that the layer does not know: every figure arrives set to it,
 * and a figure left so is not shown.
 *
 * Since: 2.0
 */
#define MEMRES_OOM_UNKNOWN G_MAXUINT64

typedef struct _MemresOomFigures MemresOomFigures;

/**
 * MemresOomFigures:
 * @struct_size: sizeof (MemresOomFigures) in the core's headers; the slot writes no field past
 *   it (a core older than the plugin's headers passes a smaller struct)
 * @request: in: the bytes the application asked the stack's top layer for
 * @cached: out: bytes the layer holds free (taken from below, not in a live allocation)
 * @largest_free: out: the largest free block of those, in bytes: the most one request can get
 *   from them without going below
 * @limit: out: a bound the layer puts on what it hands out, in bytes
 * @limit_used: out: the bytes counted against @limit now
 * @refused: out: the bytes the layer refused to hand out in the failed allocation, when it is
 *   the layer that refused it (more than @request where a layer below rounds the size up)
 * @figures: out: what else the layer wants said of itself, a few words without a final
 *   full stop (transfer full: `g_strdup` it; the core frees it), or %NULL
 * @remedy: out: the one remedy the layer knows for a failure it caused (its @limit reached, or
 *   its free bytes in blocks smaller than the request), a sentence without a final full stop
 *   (transfer full), or %NULL for the core's words
 * @verdict: out: the layer's own verdict when the failure is its own in a way none of the core's
 *   says (the `arena`'s address space, which the driver refused to extend): a few words without
 *   a final full stop (transfer full), shown in place of the core's verdict, with @remedy as
 *   its remedy; or %NULL. Since 2.0, past the first @struct_size of 72 bytes: write it only
 *   when @struct_size covers it.
 *
 * What one layer says of itself when an allocation through its stack ran out of memory
 * (#MemresResourceOps.explain_oom). The core arrives with @request set, every figure
 * %MEMRES_OOM_UNKNOWN and the strings %NULL, and reads the figures the layer set: it adds each
 * layer's used, cached and reserved bytes from memres_resource_get_stats() itself, so a layer
 * fills in only what statistics cannot say. The verdict is a layer's own when one sets @verdict
 * (the first from the top), else the core's: "limit" when a layer refused
 * (@refused) or its @limit minus @limit_used is below @request, else "fragmentation" when a layer
 * has at least
 * @request bytes @cached but its @largest_free is below @request, else "exhausted". Part of the
 * plugin ABI (fields only appended, within @struct_size).
 *
 * Since: 2.0
 */
struct _MemresOomFigures
{
  gsize struct_size;
  guint64 request;
  guint64 cached;
  guint64 largest_free;
  guint64 limit;
  guint64 limit_used;
  guint64 refused;
  char *figures;
  char *remedy;
  char *verdict;
};

/**
 * MemresSnapshotLayer:
 *
 * One layer of a snapshot while its kind describes itself (#MemresResourceOps.snapshot):
 * opaque; the kind adds what it holds with memres_snapshot_add_block() (and a used block's
 * call stack with memres_snapshot_add_block_stack()), memres_snapshot_add_hole(),
 * memres_snapshot_add_import(), memres_snapshot_add_figure() and says what it cannot see with
 * memres_snapshot_set_unseen(). Each call only copies its arguments into arrays of the core (no
 * formatting, no lock of the core, no driver call), so a kind may call them while it holds its own
 * lock. Valid during the slot only.
 *
 * Since: 2.0
 */
typedef struct _MemresSnapshotLayer MemresSnapshotLayer;

/**
 * MemresBlockState:
 * @MEMRES_BLOCK_USED: in a live allocation of the layer
 * @MEMRES_BLOCK_FREE: held by the layer and free: the next allocation that fits may take it
 * @MEMRES_BLOCK_PENDING: held by the layer and freed on a stream whose work the layer has not
 *   yet seen complete: free for that stream, not yet for the others
 * @MEMRES_BLOCK_WITHHELD: mapped by the layer at a second address of physical memory that it
 *   counts (and lists) at another address, so neither used nor free: no allocation takes it
 *   until the layer gives it back (the `arena` kind's old address of lent memory, the bytes of a
 *   shared granule that the other address uses); a layer's blocks other than these add up to
 *   the memory it holds
 * @MEMRES_BLOCK_UNUSED: held by the layer and mapped, but no allocation can take it while the
 *   layer holds it as it is: the bytes of an `arena` slab's extent past its last block (the
 *   extent rounded up, or a class that does not divide the slab), given back with the slab.
 *   Neither used nor free (not in the free bytes, the largest free block nor the fragmentation
 *   index); counted in the memory the layer holds. Since: 2.0
 *
 * The state of a block in a snapshot. Values are only appended.
 *
 * Since: 2.0
 */
typedef enum
{
  MEMRES_BLOCK_USED,
  MEMRES_BLOCK_FREE,
  MEMRES_BLOCK_PENDING,
  MEMRES_BLOCK_WITHHELD,
  MEMRES_BLOCK_UNUSED,
} MemresBlockState;

/* The snapshot slot's builders: what the layer holds (see #MemresResourceOps.snapshot). Full
 * documentation: the reference (share/gtk-doc/html/memres), memres-plugin-ops. Since: 2.0 */
void memres_snapshot_add_block (MemresSnapshotLayer *layer, guint64 address, guint64 size,
                                MemresStream stream, MemresBlockState state);
void memres_snapshot_add_tagged_block (MemresSnapshotLayer *layer, guint64 address, guint64 size,
                                       MemresStream stream, MemresBlockState state,
                                       const char *tag);
void memres_snapshot_add_hole (MemresSnapshotLayer *layer, guint64 address, guint64 size);
void memres_snapshot_add_import (MemresSnapshotLayer *layer, guint64 address, guint64 size);
void memres_snapshot_add_figure (MemresSnapshotLayer *layer, const char *name, guint64 value);
void memres_snapshot_set_unseen (MemresSnapshotLayer *layer, const char *what);
/**
 * MEMRES_SNAPSHOT_STACK_FRAMES:
 *
 * The most return addresses of one block's call stack memres_snapshot_add_block_stack() keeps
 * (the innermost).
 *
 * Since: 2.0
 */
#define MEMRES_SNAPSHOT_STACK_FRAMES 64
void memres_snapshot_add_block_stack (MemresSnapshotLayer *layer, guint64 address,
                                      gpointer const *frames, guint n_frames);

/**
 * memres_fork_mutex:
 * @mutex: a #GMutex that an at_fork slot takes
 * @phase: the phase the slot was called for
 *
 * What an at_fork slot (#MemresResourceOps.at_fork) does with one #GMutex: locks it in
 * %MEMRES_FORK_PREPARE and unlocks it in %MEMRES_FORK_PARENT and %MEMRES_FORK_CHILD. GLib's
 * mutex has no owner, so the child's one thread may unlock what the parent's thread locked.
 * (A #GRWLock or #GRecMutex does know its owner: initialize it again in the child instead.)
 *
 * Since: 2.0
 */
static inline void
memres_fork_mutex (GMutex *mutex, MemresForkPhase phase)
{
  if (phase == MEMRES_FORK_PREPARE)
    g_mutex_lock (mutex);
  else
    g_mutex_unlock (mutex);
}

typedef struct _MemresResourceOps MemresResourceOps;

/**
 * MemresResourceOps:
 * @version: see the comment above the field
 * @init: required; see the comment above the slot
 * @finalize: required; see the comment above the slot
 * @allocate: required; see the comment above the slot
 * @deallocate: required; see the comment above the slot
 * @query: required; see the comment above the slot
 * @get_stats: optional; see the comment above the slot
 * @reset_stats: optional; see the comment above the slot
 * @trim: optional; see the comment above the slot
 * @set_access: optional; see the comment above the slot
 * @get_access: optional; see the comment above the slot
 * @resize: optional; see the comment above the slot
 * @get_counters: optional; see the comment above the slot
 * @at_fork: optional; see the comment above the slot
 * @explain_oom: optional; see the comment above the slot
 * @snapshot: optional; see the comment above the slot
 * @sleep: optional; see the comment above the slot
 * @wake: optional; see the comment above the slot
 *
 * The table of a kind's functions (sharing with other processes has its own table,
 * #MemresIpcOps). Define it `static const`, set @version to
 * %MEMRES_RESOURCE_OPS_VERSION and name the slots with designated initializers; the core
 * copies the table when the kind is registered.
 *
 * Contract common to every slot:
 * - The core's public wrappers (memres_resource_*(), memres_buffer_*()) are the only callers;
 *   a missing optional slot makes its wrapper fail with %MEMRES_ERROR_NOT_SUPPORTED without
 *   calling the plugin, except get_stats and reset_stats, whose wrappers answer from the core's
 *   own counts. The wrappers check the arguments (NULL, closed buffers, zero sizes)
 *   before a slot sees them.
 * - @mr is the instance (never %NULL); memres_resource_get_private() returns its private data.
 * - No memres lock is held while a slot runs: a slot may call any public memres function,
 *   including creating other resources and allocating from them, but must not call a
 *   memres_* function on its own @mr that would call back into the same slot.
 * - Thread safety: besides init, finalize, query and import_handle (which never overlap with
 *   anything on the same instance), every slot can run on any thread, concurrently with every
 *   other slot on the same instance. The core serializes nothing for the plugin: protect
 *   shared state in the private data with a #GMutex or atomics. For one allocation the core
 *   guarantees that nothing follows its deallocate.
 * - Arguments are transfer none and valid for the duration of the call, except what a slot
 *   is documented to return (transfer full).
 * - CUDA contexts: the core makes no context current before a slot, and slots run on
 *   application threads whose current context, if any, may belong to another device. Before
 *   driver calls that name their device, pool or pointer (pools, VMM, cuMemFreeAsync),
 *   memres_cuda_ensure_context() is enough. Around calls that act on "the current context"
 *   (cuMemAlloc, cuMemHostAlloc, a %NULL stream), push the device's primary context
 *   (memres_cuda_push_context(), memres_cuda_pop_context()). Plugins reach the driver through
 * memres_cuda_get_driver() only and never link libcuda.
 * - Errors: a slot returning %FALSE sets @error; one returning %TRUE never does. Use the
 *   %MEMRES_ERROR codes listed with each slot and, for a failed driver call,
 *   memres_cuda_set_error() (never `g_set_error` in %MEMRES_CUDA_ERROR): it reports
 *   `CUDA_ERROR_OUT_OF_MEMORY` as %MEMRES_ERROR_OUT_OF_MEMORY and every other `CUresult` as a
 *   %MEMRES_CUDA_ERROR, so that out-of-memory has one code whatever the kind (since 1.2;
 *   before, some kinds reported it as a %MEMRES_CUDA_ERROR). %MEMRES_PLUGIN_ERROR belongs to
 *   the loader. Bad input is never a crash and a failure never leaks memory, driver handles
 *   or fds.
 * - Contexts and devices: push a device's primary context with memres_cuda_push_context() and
 *   memres_cuda_pop_context() (a stream's context: memres_cuda_push_stream_context()), wait
 *   with memres_cuda_stream_synchronize() or memres_cuda_device_synchronize(), read attributes
 *   with memres_cuda_get_device_attribute() and check peers with
 *   memres_cuda_check_peer_access(): one copy in the core, not one per kind.
 *
 * Slots are only appended within a major, each with its `Since:` ABI version and a new
 * @version (listed there); the core reads nothing past the end of the plugin's version. Part of
 * the plugin ABI.
 *
 * Since: 1.0
 */
struct _MemresResourceOps
{
  /**
   * MemresResourceOps.version:
   *
   * Set it to %MEMRES_RESOURCE_OPS_VERSION, the layout of the headers the plugin is built with.
   * The core refuses 0 and a version newer than its own (%MEMRES_ERROR_INVALID_ARGUMENT), copies
   * the slots of the plugin's version and treats the newer ones as %NULL, so that a plugin built
   * against older headers keeps working. The versions under ABI 2 (each appends slots; a new
   * major counts from 1 again):
   *
   * - 1 (ABI 2.0): init to get_counters. ABI 2.0 took the six IPC slots out into #MemresIpcOps
   *   and closed the gaps, so that resize and get_counters follow get_access.
   * - 2 (ABI 2.0, before its release): at_fork.
   * - 3 (ABI 2.0, before its release): explain_oom.
   * - 4 (ABI 2.0, before its release): snapshot.
   * - 5 (ABI 2.0, before its release): sleep and wake.
   *
   * Since: 1.0
   */
  guint32 version;
  /**
   * MemresResourceOps.init:
   *
   * Required. Sets up a new instance from its validated @options: reads them, checks what the
   * schema cannot (combinations, that the device exists), acquires what the instance needs (a pool,
   * a context reference) and stores it in the private data. Called once per instance by
   * memres_resource_new(), on the caller's thread, before the instance is visible to anybody:
   * nothing else runs on it concurrently. The private data arrives zero-filled. @options is valid
   * only during the call. On failure: sets @error (%MEMRES_ERROR_INVALID_ARGUMENT for a bad
   * combination of options, %MEMRES_ERROR_NO_DRIVER, %MEMRES_ERROR_NO_DEVICE,
   * %MEMRES_ERROR_NOT_SUPPORTED when the device lacks a feature, a %MEMRES_CUDA_ERROR), releases
   * everything it acquired and returns %FALSE; the core then frees the instance without calling
   * finalize.
   *
   * Since: 1.0
   */
  gboolean (*init) (MemresResource *mr, const MemresOptions *options, GError **error);
  /**
   * MemresResourceOps.finalize:
   *
   * Required. Releases everything the instance holds. Called once, when the last reference is gone:
   * the application's and every buffer's (a buffer holds its resource, so every allocation has been
   * through deallocate by then). May run on any thread, including inside the memres_buffer_close()
   * or memres_buffer_unref() of the last buffer; nothing else runs on the instance concurrently.
   * Never fails: log a driver failure with `g_warning` and go on releasing. Not called when init or
   * import_handle failed.
   *
   * Since: 1.0
   */
  void (*finalize) (MemresResource *mr);
  /**
   * MemresResourceOps.allocate:
   *
   * Required. Allocates @size bytes and fills @alloc (zero-filled on entry, but @alloc->size is
   * %MEMRES_ALLOCATION_TAGGED for a tagged buffer in a stack that reads tags): a nonzero address
   * and a size of at least @size. @size is from 1 to `G_MAXSSIZE` (the core makes empty buffers
   * itself without calling the plugin and refuses larger sizes with %MEMRES_ERROR_OUT_OF_MEMORY):
   * rounding up must still not overflow. @stream is the caller's stream (%NULL is the legacy
   * default stream; %MEMRES_STREAM_LEGACY and per-thread streams are possible): a stream-ordered
   * kind
   * (%MEMRES_MEMORY_STREAM_ORDERED) makes the memory valid in @stream's order; any other kind
   * returns memory usable at once and may ignore @stream. Called from any thread, concurrently with
   * itself and with every slot but init and finalize: must be thread-safe. Errors:
   * %MEMRES_ERROR_OUT_OF_MEMORY when the kind itself knows the size cannot be had (overflow while
   * rounding, above a configured limit, a host allocation failed) and when the driver said
   * `CUDA_ERROR_OUT_OF_MEMORY` (memres_cuda_set_error() sets that code for it, since 1.2: one code
   * for every kind, see "Errors" below); a %MEMRES_CUDA_ERROR carrying the `CUresult` when a driver
   * call failed otherwise (set with memres_cuda_set_error()); %MEMRES_ERROR_NOT_SUPPORTED for a
   * stream the kind cannot use (memres_cuda_check_stream_not_capturing());
   * %MEMRES_ERROR_INVALID_ARGUMENT for a stream the kind needs in another state (the graph kind: a
   * stream that is not capturing); %MEMRES_ERROR_NO_DRIVER. On failure nothing stays allocated and
   * @alloc is ignored.
   *
   * Since: 1.0
   */
  gboolean (*allocate) (MemresResource *mr, gsize size, MemresStream stream,
                        MemresAllocation *alloc, GError **error);
  /**
   * MemresResourceOps.deallocate:
   *
   * Required. Frees @alloc, the record allocate, import_buffer or resize filled, including whatever
   * @alloc->plugin_data owns. Called from memres_buffer_close() or from the memres_buffer_unref()
   * that drops an open buffer's last reference, on any thread, concurrently with every slot but
   * init and finalize; once per allocation when it succeeds. @stream is the stream the close was
   * ordered on: the one given to memres_buffer_close() or else the buffer's recorded deallocation
   * stream (by default its allocation stream; %NULL is the legacy default stream). A stream-ordered
   * kind frees in @stream's order. For a base kind whose memory is device-accessible but not
   * stream-ordered (%MEMRES_MEMORY_DEVICE_ACCESSIBLE without %MEMRES_MEMORY_STREAM_ORDERED:
   * cuMemAlloc, cuMemHostAlloc, managed or VMM memory), the core has waited for @stream
   * (memres_cuda_stream_synchronize() with the resource's device) before it calls deallocate, so
   * the slot frees at once and makes no wait of its own (since 1.2; until 1.1 each kind
   * synchronized itself). The one fallback: when that wait fails, the core does not call deallocate
   * and fails the close with the wait's error (a %MEMRES_CUDA_ERROR naming cuStreamSynchronize):
   * the buffer stays open, as for a failing deallocate, because freeing memory a kernel may still
   * use is worse than a failed close. A wait answering `CUDA_ERROR_DEINITIALIZED` (the driver
   * shutting down at process exit) is no failure: deallocate is called, and should take that code
   * from its free as success. Host-only memory (no %MEMRES_MEMORY_DEVICE_ACCESSIBLE) is freed
   * without any wait or driver call; an adaptor's deallocate is not preceded by a wait (its memory
   * is its upstream's, whose deallocate memres_upstream_deallocate() calls with the wait). Errors:
   * a %MEMRES_CUDA_ERROR. On failure it must release nothing and leave @alloc as it was: the core
   * keeps the buffer open, and a later close (on another stream) calls deallocate again (the last
   * unref, which nobody can retry, calls it again on the legacy stream after cuCtxSynchronize()). A
   * slot that fails after releasing part of the allocation, which it cannot undo, releases all it
   * can, reports the first failure and sets @alloc->address to 0: the core then takes the
   * allocation as gone and closes the buffer all the same. (Since 1.2; until 1.1 the core closed
   * the buffer whatever deallocate returned.) A failure without an error, or one that changed
   * @alloc->address to another nonzero value, breaks this contract: the core reports it (a critical
   * warning naming the kind, `contract_breaches` in memres_resource_get_counters()), takes the
   * allocation as released and never calls deallocate on it again (since 2.0; allocate and resize
   * failing without an error are reported the same way). When allocate or resize succeeded with a
   * record the core refuses (address 0, fewer bytes than asked, a range no memory can have), the
   * core gives that record back through deallocate before it fails the call with
   * %MEMRES_ERROR_FAILED: deallocate must then accept an address of 0 (what plugin_data owns is
   * still the kind's to free).
   *
   * Since: 1.0
   */
  gboolean (*deallocate) (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                          GError **error);
  /**
   * MemresResourceOps.query:
   *
   * Required. Fills @info (device -1 and flags 0 on entry) with the device and the flags. Called
   * once per instance, right after init or import_handle succeeded and before the instance is
   * returned to anybody; the core caches the answer. Cannot fail.
   *
   * Since: 1.0
   */
  void (*query) (MemresResource *mr, MemresResourceInfo *info);
  /**
   * MemresResourceOps.get_stats:
   *
   * Optional: without it, the core reports what it counts itself for every kind (the bytes the
   * instance's allocate slot handed out, for buffers and for adaptors above it alike, their
   * high-water mark, reserved = used), so a kind needs no accounting of its own: usage accounting
   * is the core's. @stats arrives filled with those counts (since 1.2; zero-filled before):
   * overwrite only what the kind knows better (a pool's reserved bytes, the driver's used bytes,
   * with %MEMRES_KIND_OWN_USAGE); the core overwrites n_buffers with its own count. Called from any
   * thread, concurrently with allocate and deallocate: read the counters under the kind's own lock
   * (or atomically) so that current <= high holds in what it returns. Errors: a %MEMRES_CUDA_ERROR
   * (pool attribute queries).
   *
   * Since: 1.0
   */
  gboolean (*get_stats) (MemresResource *mr, MemresStats *stats, GError **error);
  /**
   * MemresResourceOps.reset_stats:
   *
   * Optional. Resets the high-water marks (reserved_high, used_high) to the current values, for
   * what get_stats reports beyond the core's counts (which the core resets itself). Same threading
   * as get_stats. Errors: a %MEMRES_CUDA_ERROR.
   *
   * Since: 1.0
   */
  gboolean (*reset_stats) (MemresResource *mr, GError **error);
  /**
   * MemresResourceOps.trim:
   *
   * Optional. Returns memory held but unused to the system, keeping at least @bytes_to_keep bytes
   * reserved; live buffers are never touched. Any thread, concurrently with allocate and
   * deallocate; it orders nothing on a stream (memory whose stream-ordered free the host has not
   * yet seen complete may stay reserved). Errors: a %MEMRES_CUDA_ERROR.
   *
   * Since: 1.0
   */
  gboolean (*trim) (MemresResource *mr, gsize bytes_to_keep, GError **error);
  /**
   * MemresResourceOps.set_access:
   *
   * Optional. Grants or revokes the access of other devices to the resource's memory (existing and
   * future buffers), all @n_descs entries of @descs (transfer none, @n_descs >= 1) in one driver
   * call: all or nothing. Errors: %MEMRES_ERROR_NO_DEVICE (an ordinal that does not exist),
   * %MEMRES_ERROR_INVALID_ARGUMENT (an access value that is not a #MemresAccess, or revoking the
   * owning device's own access), %MEMRES_ERROR_NOT_SUPPORTED (cuDeviceCanAccessPeer says no), a
   * %MEMRES_CUDA_ERROR. Any thread; concurrent calls must leave one of the requested states.
   *
   * Since: 1.0
   */
  gboolean (*set_access) (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs,
                          GError **error);
  /**
   * MemresResourceOps.get_access:
   *
   * Optional. Stores in @access the access @device has to the resource's memory. Errors:
   * %MEMRES_ERROR_NO_DEVICE, a %MEMRES_CUDA_ERROR. Any thread.
   *
   * Since: 1.0
   */
  gboolean (*get_access) (MemresResource *mr, gint device, MemresAccess *access, GError **error);
  /**
   * MemresResourceOps.resize:
   *
   * Optional, for kinds that set %MEMRES_MEMORY_RESIZABLE. Grows or shrinks @alloc to @new_size
   * bytes (> 0), keeping the first MIN (old, new) bytes, and updates @alloc->address (which may
   * move), @alloc->size and @alloc->plugin_data; the result is usable in @stream's order. On
   * failure @alloc and the memory are left exactly as they were. Any thread, concurrently with the
   * other slots on other allocations. Errors: %MEMRES_ERROR_OUT_OF_MEMORY,
   * %MEMRES_ERROR_INVALID_ARGUMENT, a %MEMRES_CUDA_ERROR.
   *
   * Since: 1.0
   */
  gboolean (*resize) (MemresResource *mr, MemresAllocation *alloc, gsize new_size,
                      MemresStream stream, GError **error);
  /**
   * MemresResourceOps.get_counters:
   *
   * Optional, for memres_resource_get_counters(). Inserts the kind's own counters into @counters
   * (an empty #GVariantDict, transfer none): names in lower case with underscores, values of any
   * type (counts and bytes as `t`); the kind documents them (the cache adaptor: docs/cache.md).
   * Same threading as get_stats. Errors: those of the kind.
   *
   * Since: 1.2
   */
  gboolean (*get_counters) (MemresResource *mr, GVariantDict *counters, GError **error);
  /**
   * MemresResourceOps.at_fork:
   *
   * Optional, for kinds that take a lock (or keep state that another thread may be in the middle
   * of changing) on a path the application's threads can be in when one of them calls fork().
   * Without it, a child of a process that forked while another thread held the lock would block
   * on it forever (a lock is copied into the child as it was, and the thread that would release
   * it is not there). The core calls the slot from its own `pthread_atfork` handlers:
   *
   * - with @mr set, once per live instance of the kind (made and not finalized), to take
   *   (%MEMRES_FORK_PREPARE) and release (%MEMRES_FORK_PARENT, %MEMRES_FORK_CHILD) the
   *   instance's locks;
   * - with @mr %NULL, once per registered kind whose table has the slot, for the kind's
   *   process-wide state (static locks). A plugin whose kinds share such a lock handles it in one
   *   kind's slot only.
   *
   * Order: in prepare, the %NULL calls first (kinds in registration order), then the instances,
   * newest first, so that an adaptor, which is always newer than its upstream, locks before the
   * layers below it, and every lock the core takes itself (the registry, the loader, its
   * statistics and IPC tables) after them; parent and child run the exact reverse. The rule that
   * makes this order safe, which every kind with the slot must follow: never hold a lock that
   * at_fork takes while calling another resource (memres_upstream_allocate(), any
   * memres_resource_*() or memres_buffer_*() function) or creating or releasing one; the
   * memres_cuda_*() helpers are fine.
   *
   * The slot runs while the core holds its locks and other threads are stopped on them: take
   * and release locks, reset state, nothing else (no memres call, no allocation through a
   * resource, no I/O that may block). In %MEMRES_FORK_CHILD only the forking thread exists:
   * release (or `g_mutex_init` again) what prepare took, and clear what the parent's other threads
   * left half done (a "busy" flag, a waiter count, an entry naming an operation in flight), which
   * nobody will ever finish. An instance the child inherited from a parent that had initialized
   * the driver is never called again in the child except by at_fork (core/fork.c), but its locks
   * are released all the same. Cannot fail.
   *
   * Since: 2.0
   */
  void (*at_fork) (MemresResource *mr, MemresForkPhase phase);
  /**
   * MemresResourceOps.explain_oom:
   *
   * Optional, for the report of an out-of-memory error: fills in @figures (see
   * #MemresOomFigures) with what the layer knows of its memory that statistics cannot say (its
   * free bytes and largest free block, a limit), a line of its own and the remedy for a failure
   * it caused. The core calls it on every layer of a stack, top first, only when a
   * %MEMRES_ERROR_OUT_OF_MEMORY is about to reach the application (memres_resource_allocate(),
   * memres_buffer_resize()), never for one an adaptor catches below the top (the `cache`'s
   * flush, `retry`), on the thread that got the error, with no memres lock held. Take the
   * layer's own lock to read a consistent state; allocate nothing from any resource. Cannot
   * fail: leave what is not known as it arrived.
   *
   * Since: 2.0
   */
  void (*explain_oom) (MemresResource *mr, MemresOomFigures *figures);
  /**
   * MemresResourceOps.snapshot:
   *
   * Optional, for memres_resource_snapshot(): describes what the layer holds, into @layer
   * (see #MemresSnapshotLayer): its blocks (each with its address, size, stream and state: a
   * live allocation, or free memory it keeps), the holes of address space it reserved and did
   * not map, the memory it imported from other processes, figures of its own (a limit, a
   * granularity, bytes it knows but cannot list) and, when it cannot list everything it
   * holds, what it cannot see (memres_snapshot_set_unseen(); a driver's pool lists no blocks).
   * The core adds the rest itself: the kind and spec, the statistics
   * (memres_resource_get_stats()), the layer's segments (memres-segments.h) and the figures
   * derived from the blocks (the largest free block, the fragmentation index). Take the layer's
   * lock, copy its tables with the calls above, release it: the allocations of the layer wait
   * for no longer than that copy. Call no memres function on @mr or on another resource from
   * the slot (the upstream describes itself in its own call); the memres_snapshot_*() calls
   * and the memres_cuda_*() helpers are fine. Any thread, concurrently with every slot but
   * init and finalize; no memres lock is held. A layer without the slot is shown with what the
   * core knows and as one that cannot see its blocks. Cannot fail: leave out what is not known.
   *
   * Since: 2.0
   */
  void (*snapshot) (MemresResource *mr, MemresSnapshotLayer *layer);
  /**
   * MemresResourceOps.sleep:
   *
   * Optional, for memres_resource_sleep() (docs/sleep.md): releases the physical memory under
   * each of the @n_allocs allocations @allocs (records its allocate slot filled, or, for a layer
   * below a %MEMRES_KIND_PASSES_ALLOCATIONS adaptor, the same records) and keeps their virtual
   * address ranges reserved, so that wake can map new memory at exactly the same addresses.
   * Having the slot declares that the kind keeps addresses while the memory under them changes:
   * the core lists the kinds that have it in the error of a stack that cannot sleep. A base kind
   * does the work itself; an adaptor (`cache`) that hands out memory of its upstream translates
   * its records into its upstream's and calls memres_upstream_sleep(), releasing what else it
   * holds from the upstream that can be released (free cached blocks). All or nothing: on failure
   * every allocation is awake and mapped as it was, @error set. Before it unmaps, the kind raises
   * %MEMRES_SEGMENT_UNMAPPING for the bytes it releases (a kind with %MEMRES_KIND_SEGMENTS).
   *
   * The core calls it with no memres lock held, after it waited for each buffer's stream and
   * saved the contents the policy keeps; it never passes an allocation twice, nor one asleep
   * already. @n_allocs may be 0 (a tag with no open buffer): a layer that keeps free memory by
   * tag then still releases the tag's (memres_sleep_call_get_tag()), and wake is called with 0
   * too. While an allocation is asleep the core calls no slot on it but wake and deallocate:
   * deallocate then releases its address range and whatever it still holds (nothing is mapped
   * under it). Errors: a %MEMRES_CUDA_ERROR naming the driver call,
   * %MEMRES_SLEEP_ERROR_SHARED for an allocation exported to another process (naming it),
   * %MEMRES_ERROR_NOT_SUPPORTED.
   *
   * Since: 2.0
   */
  gboolean (*sleep) (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                     GError **error);
  /**
   * MemresResourceOps.wake:
   *
   * Optional, with sleep: creates physical memory again under each of the @n_allocs allocations
   * @allocs (all asleep, put to sleep by this slot's sleep) and maps it at the same addresses
   * with the resource's access granted; the contents are undefined (the core restores them by
   * policy). Raises %MEMRES_SEGMENT_MAPPED for what it maps. A kind that maps memory tells the
   * core each piece mapped and granted (memres_sleep_call_mapped(), pieces of about
   * memres_sleep_call_get_restore_batch() bytes), so that the restoring copies of a backup run
   * while it maps the rest. All or nothing: on failure every allocation is asleep as it was
   * (nothing mapped, nothing held), @error set and naming the step that failed (the driver
   * call, through memres_cuda_set_error()); before releasing memory it told mapped, the slot
   * calls memres_sleep_call_unmapping() (the copies into it finish first). Same threading as
   * sleep. Errors: %MEMRES_ERROR_OUT_OF_MEMORY, a %MEMRES_CUDA_ERROR.
   *
   * Since: 2.0
   */
  gboolean (*wake) (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                    GError **error);
};

G_END_DECLS

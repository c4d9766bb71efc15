/* memres - CUDA memory resources
 * memres-private.h: the core's internal structures and functions. Never installed; the structs
 * here are not part of any ABI. Internal functions carry a leading underscore so that the
 * version script (memres_* only) keeps them out of libmemres's exports. Only the core's own
 * files include it (core/, core/ipc/, and the internal tests and fuzzers that reach into the
 * core): they are compiled with MEMRES_CORE_COMPILATION. The plugins, the kinds embedded in
 * libmemres among them, are written against the installed headers and the SDK alone
 * (tests/check-plugin-wall.sh). */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "memres-private.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <string.h>

#include <gmodule.h>
#include <memres/memres-plugin.h>

#include "ipc/ipc.h"
#include "counting.h"

/* one fence state for libmemres (defined in resource.c): the buffer stripes */
#define OWNER_FENCE_SHARED 1
#include "../sdk/owner-fence.h"

/* memres_printable() of one piece of user input: what error messages quote. */
#define _memres_show_input(text) memres_printable ((text), MEMRES_INPUT_SHOWN_MAX)

G_BEGIN_DECLS

#define MEMRES_KIND_NAME_MAX 32 /* bytes including the terminating NUL */

/* plugin.c: a plugin that loaded lives as long as the process (loader.c keeps it) */
struct _MemresPlugin
{
  char *name;
  char *path; /* NULL for a plugin embedded in the core */
  GModule *module;
  const MemresPluginDesc *desc;
  GPtrArray *kinds;       /* MemresKind*, registered while init runs */
  GError *register_error; /* first error of memres_plugin_register_kind() during init */
};

struct _MemresKind
{
  gatomicrefcount ref;
  char *name;
  guint8 name_field[MEMRES_KIND_NAME_MAX]; /* the name NUL-padded, as descriptors carry it */
  char *description;
  MemresOptionSpec *options; /* copied array; strings point into the plugin */
  guint n_options;
  MemresResourceOps ops; /* copied; slots newer than the plugin's version are NULL */
  /* the IPC table, copied (core/ipc/ipc-ops.c) and read only by the IPC layer: all NULL, with
   * version 0, when the kind shares nothing (every adaptor) */
  MemresIpcOps ipc;
  gsize instance_size;
  MemresKindFlags flags;
  MemresPlugin *plugin; /* not a reference (plugins outlive kinds); NULL: the application's */
};

/* the resource's buffer stripes (MemresResource.stripes), one per thread as counting.h's */
#define MEMRES_STRIPE_BIAS ((gint64) 1 << 40)
#define MEMRES_STRIPE_DEAD ((gint64) 1 << 62)
typedef struct
{
  gint64 n;     /* atomic: MEMRES_STRIPE_BIAS + buffers counted here (MemresResource.stripes) */
  gint64 used;  /* atomic: bytes allocated minus bytes closed through this stripe (may be < 0) */
  gint64 quota; /* atomic: how high @used may go before the stripes are summed (resource.c) */
  gint busy;    /* the stripe's thread is inside a plain update (owner-fence.h) */
  /* 128 bytes apart, not 64: x86's adjacent-line prefetcher fetches lines in 128-byte pairs, so
   * stripes on the two lines of one pair would still be written back and forth between the cores
   * of their threads */
} __attribute__ ((aligned (128))) MemresStripe;

/* The functions of the allocate/close hot path (the core's, and the embedded pass-through
 * layer's slots): the compiler puts them in .text.hot, which the linker places together, so
 * that a pair runs from a few neighbouring lines of one or two pages of code rather than from
 * lines scattered over the library (after a driver call, each a cold line and TLB entry). */
#define MEMRES_HOT __attribute__ ((hot))

typedef struct _MemresSegmentsState MemresSegmentsState;

struct _MemresResource
{
  /* Line 0: all the allocate/close pair reads of a resource (buffer.c, the slot calls below),
   * so that a pair through a resource touches one line of it besides its stripe. */
  /* the kind's allocate and deallocate slots (ops->allocate, ops->deallocate), copied here at
   * creation so that a call loads no line of the kind's table */
  gboolean (*allocate) (MemresResource *mr, gsize size, MemresStream stream,
                        MemresAllocation *alloc, GError **error);
  gboolean (*deallocate) (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                          GError **error);
  gpointer priv;            /* instance_size bytes, zero-filled, 16-byte aligned */
  MemresResource *upstream; /* adaptors: the layer below (strong reference), else NULL */
  MemresResourceInfo info;  /* from the query slot, read on hot paths */
  /* set at creation: the core counts the bytes of this resource's buffers on the stripes.
   * FALSE for kinds with MEMRES_KIND_OWN_USAGE and for adaptors without a get_stats slot
   * (whose statistics are their upstream's, so that nobody reads their count) */
  gboolean count_usage;
  /* set at creation: a base kind whose memory is device-accessible but not stream-ordered; the
   * core waits for the deallocation stream before its deallocate slot (resource.c) */
  gboolean wait_before_free;
  /* set when @refs drops to 0, or at creation where membarrier() cannot be used: from then on
   * every thread changes the stripes with locked instructions (the stop flag of owner-fence.h;
   * resource.c: resource_last_ref()) */
  gint stripes_stop;
  gint generation; /* the fork generation it was made in (fork.c) */
  /* set at creation for a kind with MEMRES_KIND_COUNTED: the core counts what the layer's
   * allocate and deallocate slots hand out and take back (counting.h); NULL for every other */
  MemresCounts *counts;

  /* Line 1 and on: the rest. */
  MemresKind *kind;
  const MemresResourceOps *ops; /* == &kind->ops */
  char *spec;                   /* normalized spec, or a description of the import */
  /* Lifetime, in one atomic word so that the allocate/close hot path costs one locked operation
   * each: the high 32 bits count the references of the application (memres_resource_ref()), the
   * low 32 bits the open buffers. The instance is finalized when the word drops to 0. */
  gint64 refs;
  /* The high-water mark of the bytes of the buffers memres_resource_allocate() and
   * memres_ipc_receive_buffer() made (resized ones at their size now; buffers imported through
   * a pool's mapping are not counted: core/ipc/ipc-buffers.c reports those); the bytes themselves
   * are counted on the stripes (MemresStripe.used, summed by _memres_resource_used_bytes()). The
   * statistics a kind without a get_stats slot reports, and what a get_stats slot starts from.
   * Written only when a new peak is seen (resource.c: _memres_resource_count_peak()), so the hot
   * path only reads it. */
  guint64 used_high;
  /* the IPC layer's state (core/ipc/ipc.h): set on a resource memres_resource_import_handle()
   * made, before it is published; NULL on every other */
  MemresIpcState *ipc;
  gpointer close_event; /* atomic: a CUevent kept for the next cross-stream close */
  /* atomic: the device whose context reaches memory of device -1 (resource.c:
   * _memres_resource_context_device()), plus 2; 0: not known yet, 1: none known */
  gint reach_device;
  GList *fork_link; /* in fork.c's list of live resources, NULL before and after */
  /* Buffers allocated through memres_resource_allocate(), counted apart from @refs so that the
   * allocate/close pair of threads running at once writes no shared cache line: each thread
   * counts on a stripe of its own (MEMRES_BUFFER_STRIPES of them, 128 bytes apart; a buffer
   * closed on another thread than it was allocated on makes one stripe go up, another down).
   * Each stripe holds MEMRES_STRIPE_BIAS + its count. When @refs drops to 0, the stripes are
   * marked MEMRES_STRIPE_DEAD and their counts summed into @dead_count; a close that finds its
   * stripe dead then counts down @dead_count, and whoever takes it to 0 finalizes. */
  gint64 dead_count;
  /* atomic: the calls of this layer's memory slots that broke the contract (a failure without
   * an error; resource.c: contract_breach()), read by memres_resource_get_counters() */
  guint64 contract_breaches;
  /* the message of the last out-of-memory error of an allocation through this resource, with its
   * report (oom-report.c, under its lock; freed at finalize), or NULL */
  char *oom_report;
  /* its segment subscribers (segments.c), made at the first subscription, under segments.c's
   * lock */
  MemresSegmentsState *segments;
  MemresStripe stripes[MEMRES_BUFFER_STRIPES];
};
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresResource, kind) <= 64);

/* The release function of wrapped foreign memory and its data (buffer.c). Kept out of the
 * buffer's allocation record: memres_buffer_get_allocation() shows that record to plugins, whose
 * plugin_data it is (NULL for memory no kind allocated). */
typedef struct
{
  GDestroyNotify func;
  gpointer data;
  gint generation; /* the fork generation the buffer was made in (fork.c) */
} MemresRelease;

/* One cache line, allocated 64-byte aligned (buffer.c): an import or allocation and its close
 * touch one line of it, not two. */
struct _MemresBuffer
{
  gatomicrefcount ref;
  gint closed;        /* atomic; set exactly once */
  MemresResource *mr; /* strong reference; NULL for wrapped foreign memory */
  MemresAllocation alloc;
  MemresStream dealloc_stream;
  gint device;
  MemresMemoryFlags flags;
  union
  {
    MemresIpcMapping *ipc_mapping; /* mr != NULL: the shared mapping (imported), else NULL */
    MemresRelease *release;        /* mr == NULL (wrapped foreign memory): owned, or NULL */
  };
};
G_STATIC_ASSERT (sizeof (MemresBuffer) <= 64);

/* fork.c: the child of a fork() after the driver was initialized (see there).
 * _memres_fork_generation_: incremented in every child of a fork() once the driver is loaded;
 *   read it with g_atomic_int_get().
 * _memres_fork_note_driver_init(): cuInit ran in this generation (cuda-driver.c).
 * _memres_fork_driver_lost(): the driver was initialized before a fork of this process: it
 *   must not be called here.
 * _memres_fork_set_error(): sets MEMRES_ERROR_FORKED for @what; returns FALSE.
 * _memres_resource_is_inherited(): @mr was made before the fork in a parent whose driver was
 *   initialized, and its kind is not the embedded host kind: its slots must not be called
 *   (release it without them).
 * _memres_resource_check_usable(): FALSE with MEMRES_ERROR_FORKED naming @what when @mr is
 *   inherited. */
extern gint _memres_fork_generation_;
void _memres_fork_note_driver_init (void);
gboolean _memres_fork_driver_lost (void);
gboolean _memres_fork_set_error (GError **error, const char *what);
gboolean _memres_resource_is_inherited_slow (MemresResource *mr);
/* Whether the release function of wrapped memory with @flags, wrapped in fork @generation, must
 * not run: device-accessible memory wrapped before the fork (its release would call the
 * driver). */
gboolean _memres_fork_skips_release (gint generation, MemresMemoryFlags flags);
/* fork.c's atfork handlers (see there): the live resources and the kinds with an at_fork slot
 * (added when made, removed when finalized or freed); each module's part, taking (prepare) and
 * releasing (parent, child) its locks (memres_fork_mutex() for one GMutex). */
void _memres_fork_add_resource (MemresResource *mr);
void _memres_fork_remove_resource (MemresResource *mr);
void _memres_fork_add_kind (MemresKind *kind);
void _memres_fork_remove_kind (MemresKind *kind);
/* Each module hands fork.c its part when its locks first matter (fork.c calls it through the
 * pointer, so that no file's calls circle back through fork.c): in prepare the parts in the
 * order of these ranks, the kinds' and resources' slots between IPC_TABLES and REGISTRY; parent
 * and child the reverse. IPC_TABLES is called with each live resource. */
typedef enum
{
  MEMRES_FORK_LOADER,     /* the load token (loader.c) */
  MEMRES_FORK_IPC_IMPORT, /* import_pool_lock (ipc-pools.c) */
  MEMRES_FORK_IPC_TABLES, /* an imported pool's mapping table (ipc-pools.c) */
  MEMRES_FORK_REGISTRY,   /* registry.c */
  MEMRES_FORK_IPC_POOLS,  /* pools_lock (ipc-pools.c) */
  MEMRES_FORK_COUNTS,     /* counting.c */
  MEMRES_FORK_REPORTS,    /* the last out-of-memory reports (oom-report.c) */
  MEMRES_FORK_SEGMENTS,   /* segments.c */
  MEMRES_FORK_CONTEXTS,   /* the primary contexts (cuda-driver.c) */
  MEMRES_FORK_N_PARTS
} MemresForkPart;
void _memres_fork_add_part (MemresForkPart part,
                            void (*func) (MemresResource *mr, MemresForkPhase phase));
void _memres_loader_fork (MemresResource *unused, MemresForkPhase phase);
/* segments.c: @mr is being freed, after its finalize slot: its subscriptions end, the index
 * forgets what it still has. */
void _memres_segments_forget (MemresResource *mr);
void _memres_registry_fork (MemresResource *unused, MemresForkPhase phase);

static inline gboolean
_memres_resource_is_inherited (MemresResource *mr)
{
  return G_UNLIKELY (mr->generation != g_atomic_int_get (&_memres_fork_generation_))
         && _memres_resource_is_inherited_slow (mr);
}

/* inline: one compare on the allocation hot path */
static inline gboolean
_memres_resource_check_usable (MemresResource *mr, const char *what, GError **error)
{
  if (G_LIKELY (!_memres_resource_is_inherited (mr)))
    return TRUE;
  return _memres_fork_set_error (error, what);
}
/* buffer-streams.c: a close of @buf on @stream, not its deallocation stream, is ordered after the
 * deallocation stream's work (event recorded there, waited for on @stream; when no event can be
 * recorded there, after all work of the device: cuCtxSynchronize()), for stream-ordered memory.
 * Errors: MEMRES_CUDA_ERROR (a @stream that cannot wait: CUDA_ERROR_INVALID_HANDLE for a
 * destroyed one), MEMRES_ERROR_NO_DRIVER; nothing changed then. */
gboolean _memres_buffer_order_close (MemresBuffer *buf, MemresStream stream, GError **error);
/* buffer-streams.c: waits for all work of the primary context of @buf's device
 * (cuCtxSynchronize()); FALSE when it cannot. */
gboolean _memres_buffer_wait_device (MemresBuffer *buf);

/* spec.c: kind names and option keys */
gboolean _memres_kind_name_is_valid (const char *name);
gboolean _memres_kind_name_check (const char *name, GError **error);
gboolean _memres_key_is_valid (const char *name);
/* registry.c: the table of kinds (see there); it loads nothing */
gboolean _memres_registry_check_name (const char *name, GPtrArray *pending, GError **error);
gboolean _memres_registry_insert (GPtrArray *kinds, GError **error);
MemresKind *_memres_registry_find (const char *name);
GPtrArray *_memres_registry_list (void);
/* loader.c: the registered kind @name after the embedded kinds registered, or NULL; loads no
 * plugin file */
MemresKind *_memres_registry_lookup_loaded (const char *name);
/* plugin.c: a plugin's load (the caller holds loader.c's load token), and the free of one whose
 * load failed */
MemresPlugin *_memres_plugin_load (const char *name, const char *path, GError **error);
MemresPlugin *_memres_plugin_load_embedded (const MemresPluginDesc *desc, GError **error);
void _memres_plugin_free (MemresPlugin *plugin);

/* cuda-driver.c: how the message of the driver's MEMRES_ERROR_NO_DRIVER starts when no driver
 * library could be opened at all (other messages: a library that is not a driver, or a driver
 * that failed to initialize); memres_error_is_driver_absent() (errors.c) tells them apart. */
#define MEMRES_NO_DRIVER_PREFIX "No CUDA driver could be loaded from "

/* module-file.c: NULL when @path is a regular, readable file (or missing); else what it is, in a
 * new string
 * ("a FIFO", "a directory", "a dangling symbolic link", ...). Never blocks. */
char *_memres_module_file_problem (const char *path);
/* module-file.c: fills @note from the `.note.memres` section of the ELF file @path (TRUE), or
 * returns FALSE (not an ELF object of this machine, no note). Only reads the file. */
gboolean _memres_module_file_read_note (const char *path, MemresPluginNote *note);

/* kind.c: a new kind from @info, validated (name, ops, option schema); @plugin may be NULL. */
MemresKind *_memres_kind_new (MemresPlugin *plugin, const MemresKindInfo *info, GError **error);

/* resource.c: references held by buffers (see MemresResource.refs) */
#define MEMRES_RESOURCE_APP_REF ((gint64) 1 << 32)
void _memres_resource_add_buffer (MemresResource *mr);

void _memres_resource_remove_buffer (MemresResource *mr);
gboolean _memres_resource_try_ref (MemresResource *mr);

/* resource.c: the stripes of the allocate/close hot path (see MemresResource.stripes; the
 * calling thread's stripe is counting.h's); _memres_resource_buffer_gone() counts down a dead
 * resource's buffers. */
void _memres_resource_buffer_gone (MemresResource *mr);

/* resource.c: @delta more (or fewer) bytes in @mr's allocated buffers, on the calling thread's
 * stripe. Each stripe has a quota, and the quotas sum to at most used_high: while every stripe
 * stays within its own, no new peak can have been reached. A stripe that passes its quota sums
 * all stripes (_memres_resource_count_peak()), raises used_high to the sum when it is a new
 * peak, and shares what is left below the mark among the stripes as new quotas. Exact whenever
 * no two threads change the counts at the same instant; under contention the mark may be off by
 * a few allocations either way (memres_resource_get_stats() documents it). @reset: used_high
 * set to the sum. */
void _memres_resource_count_peak (MemresResource *mr, gboolean reset);
guint64 _memres_resource_used_bytes (MemresResource *mr);

/* Counts @buffers more open buffers (1, -1 or 0) and @bytes more bytes (only where the core
 * counts @mr's usage) on the calling thread's stripe of @mr. A thread with a stripe of its own
 * changes it with plain loads and stores, marked busy when it counts buffers (owner-fence.h: no
 * locked instruction on the allocate/close pair) unless @mr's stripes are stopping; the shared
 * stripe, and every stripe's buffers once stopped, with locked instructions. Returns TRUE when a
 * buffer fewer was counted on a dead stripe (the caller then calls _memres_resource_buffer_gone()).
 */
G_ALWAYS_INLINE static inline gboolean
_memres_stripe_count (MemresResource *mr, gint64 buffers, gint64 bytes)
{
  guint i = _memres_stripe_index;
  MemresStripe *stripe;
  gint64 n = 0, used = 0;

  if (!mr->count_usage)
    bytes = 0;
  if (buffers == 0 && bytes == 0)
    return FALSE;
  if (G_UNLIKELY (i == 0))
    i = _memres_stripe_assign ();
  stripe = &mr->stripes[i - 1];
  /* a count of bytes alone needs no busy mark: a stripe's bytes have one writer, its thread, and
   * the stop (resource_last_ref()) sums only the buffers */
  if (G_LIKELY (i != MEMRES_STRIPE_SHARED)
      && (buffers == 0 || owner_try_enter_light (&stripe->busy, &mr->stripes_stop)))
    {
      if (buffers != 0) /* a constant at every call: a count of bytes alone touches no count */
        {
          n = __atomic_load_n (&stripe->n, __ATOMIC_RELAXED);
          __atomic_store_n (&stripe->n, n + buffers, __ATOMIC_RELAXED);
        }
      if (bytes != 0)
        {
          used = __atomic_load_n (&stripe->used, __ATOMIC_RELAXED) + bytes;
          __atomic_store_n (&stripe->used, used, __ATOMIC_RELAXED);
        }
      if (buffers != 0)
        owner_leave_busy (&stripe->busy);
    }
  else
    {
      /* the bytes first: once the count of a close is in @n, the last reference's sum may see the
       * resource without buffers and free it (resource_last_ref()), so the close writes nothing
       * of it after that add */
      if (bytes != 0)
        used = __atomic_add_fetch (&stripe->used, bytes, __ATOMIC_RELAXED);
      if (buffers != 0)
        n = __atomic_fetch_add (&stripe->n, buffers, __ATOMIC_ACQ_REL);
    }
  if (bytes > 0 && G_UNLIKELY (used > __atomic_load_n (&stripe->quota, __ATOMIC_RELAXED)))
    _memres_resource_count_peak (mr, FALSE);
  return buffers < 0 && G_UNLIKELY (n & MEMRES_STRIPE_DEAD);
}

/* @delta more (or fewer) bytes in @mr's buffers (a resize, an upstream's allocation). */
G_ALWAYS_INLINE static inline void
_memres_resource_count_used (MemresResource *mr, gint64 delta)
{
  _memres_stripe_count (mr, 0, delta);
}

/* One more buffer of memres_resource_allocate(), of @size bytes: it keeps @mr alive. */
G_ALWAYS_INLINE static inline void
_memres_resource_add_allocated (MemresResource *mr, gsize size)
{
  _memres_stripe_count (mr, 1, (gint64) size);
}

/* One such buffer fewer, of @size bytes: with the application's last reference gone, maybe the
 * last one. */
G_ALWAYS_INLINE static inline void
_memres_resource_remove_allocated (MemresResource *mr, gsize size)
{
  if (G_UNLIKELY (_memres_stripe_count (mr, -1, -(gint64) size)))
    _memres_resource_buffer_gone (mr);
}

/* Buffers counted on the stripes now (exact when no allocate or close runs). */
gint64 _memres_resource_count_allocated (MemresResource *mr);

/* resource.c: create an instance of @kind through @setup (called as the init slot would be,
 * with @data; its failures are reported as those of the slot @setup_name) instead of the init
 * slot: the IPC layer's import of a pool handle (the kind's import_handle slot). */
typedef gboolean (*MemresResourceSetupFunc) (MemresResource *mr, gconstpointer data,
                                             GError **error);
MemresResource *_memres_resource_new_imported (MemresKind *kind, MemresResourceSetupFunc setup,
                                               const char *setup_name, gconstpointer data,
                                               const char *spec, GError **error);

/* resource.c: an instance of @kind over @upstream (an adaptor's layer below; the new instance
 * takes over the caller's reference on success, the caller keeps it on failure), through the
 * init slot. */
MemresResource *_memres_resource_new_layer (MemresKind *kind, const MemresOptions *options,
                                            MemresResource *upstream, const char *spec,
                                            GError **error);

/* resource.c: the layer that serves @mr's optional slot at @slot_offset (an offset in
 * MemresResourceOps): @mr when it implements it, else down the stack through adaptors that
 * leave it NULL (only through MEMRES_KIND_PASSES_ALLOCATIONS adaptors when
 * @allocation_level); the last layer looked at when none does (its slot is then NULL). */
MemresResource *_memres_resource_slot_owner (MemresResource *mr, gsize slot_offset,
                                             gboolean allocation_level);
#define MEMRES_SLOT_OFFSET(slot) G_STRUCT_OFFSET (MemresResourceOps, slot)

/* resource.c: the layer whose IPC table (MemresKind.ipc) serves @mr: @mr when its kind has
 * one, else down the stack through MEMRES_KIND_PASSES_ALLOCATIONS adaptors (which have none) to
 * the first layer with one; the last layer looked at when none has (its table is then empty). */
MemresResource *_memres_resource_ipc_owner (MemresResource *mr);

/* stack.c: stacks of layers, `a>b>c`, at most MEMRES_STACK_MAX_LAYERS, and `@name` layers
 * from the config file (config.c).
 * _memres_stack_split(): @spec split at every `>` not escaped by a backslash, `@name` layers
 *   replaced by their definitions (@expand_names; else kept), into @layers (strings as
 *   written, escapes kept; in order, the first what the application calls), and into @origins
 *   (when not NULL) for each layer the `@name` it came from, with its definition and file
 *   (NULL for a layer the application wrote), for errors. Errors:
 *   MEMRES_ERROR_INVALID_ARGUMENT (an empty layer, `>>`, a trailing `>`, a lone trailing `\`,
 *   too many layers, a cycle of names), those of _memres_config_lookup().
 * _memres_stack_check_layer(): the rule of @kind at @position (0-based) of @n_layers layers:
 *   every layer but the last an adaptor, the last not. MEMRES_ERROR_INVALID_ARGUMENT.
 * memres_resource_new() is stack.c's too. */
#define MEMRES_STACK_MAX_LAYERS 16
gboolean _memres_stack_split (const char *spec, gboolean expand_names, GPtrArray **layers,
                              GPtrArray **origins, GError **error);
gboolean _memres_stack_check_layer (MemresKind *kind, guint position, guint n_layers,
                                    GError **error);

/* config.c: named resources. _memres_config_lookup(): the spec of @name (without the `@`),
 * transfer full, with where it was defined in @origin (transfer full, may be NULL). Errors:
 * MEMRES_ERROR_INVALID_ARGUMENT (@name is not [A-Za-z0-9_.-]+: the file is not read),
 * MEMRES_ERROR_NOT_FOUND (no such name: the message lists the defined ones), those of reading
 * the file (MEMRES_ERROR_INVALID_ARGUMENT naming file, line and key; MEMRES_ERROR_NOT_FOUND for a
 * MEMRES_CONFIG that does not exist, MEMRES_ERROR_PERMISSION_DENIED when unreadable). */
char *_memres_config_lookup (const char *name, char **origin, GError **error);

/* resource.c: checks the result of a call of @mr's @slot: FALSE must come with an error (one
 * is made up when the plugin set none), TRUE without one (dropped with a warning); moves *@local
 * into @error on failure. Returns @ok. */
gboolean _memres_resource_slot_result (MemresResource *mr, const char *slot, gboolean ok,
                                       GError **local, GError **error);

/* resource.c: the calls of the slots that return or take back memory, with their results
 * checked. _memres_resource_call_allocate() is the one way to call the allocate slot; it and
 * _memres_resource_alloc_result() (for resize, import_buffer, import_chunks) refuse a success
 * with address 0, fewer than @size bytes, more than G_MAXSSIZE bytes or a range past the end of
 * the address space (MEMRES_ERROR_FAILED), releasing what the plugin
 * returned through deallocate, and zero @alloc. _memres_resource_call_deallocate() is the one
 * way to call deallocate. */
gboolean _memres_resource_alloc_result_slow (MemresResource *mr, const char *slot, gboolean ok,
                                             GError **local, gsize size, MemresStream stream,
                                             MemresAllocation *alloc, GError **error);

/* Whether @alloc is memory an allocation of @size bytes can have returned: a nonzero address,
 * at least @size and at most G_MAXSSIZE bytes, a range inside the address space. */
static inline gboolean
_memres_allocation_plausible (const MemresAllocation *alloc, gsize size)
{
  return alloc->address != 0 && alloc->size >= size && alloc->size <= G_MAXSSIZE
         && alloc->address <= G_MAXUINT64 - alloc->size;
}

/* Inline: a good result costs a few compares on the allocation hot path, and each layer of a
 * stack pays no call of its own for the check. */
static inline gboolean
_memres_resource_alloc_result (MemresResource *mr, const char *slot, gboolean ok, GError **local,
                               gsize size, MemresStream stream, MemresAllocation *alloc,
                               GError **error)
{
  if (G_LIKELY (ok && *local == NULL && _memres_allocation_plausible (alloc, size)))
    return TRUE;
  return _memres_resource_alloc_result_slow (mr, slot, ok, local, size, stream, alloc, error);
}

/* resource.c: _memres_resource_call_allocate() and _memres_resource_call_deallocate(), out of
 * line, for the upstream of a counted pass-through layer when it is counted itself or waits
 * before its frees (the inline calls below cannot nest). */
gboolean _memres_resource_call_allocate_nested (MemresResource *mr, gsize size, MemresStream stream,
                                                MemresAllocation *alloc, GError **error);
gboolean _memres_resource_call_deallocate_nested (MemresResource *mr, MemresAllocation *alloc,
                                                  MemresStream stream, GError **error);

/* resource.c: the check of a deallocate call that did not simply succeed (@address: the
 * record's address before the call). A failure with an error that left @alloc->address as it
 * was released nothing; one that set it to 0 released the allocation half-way. A failure without
 * an error, or one that changed the address to another nonzero value, breaks the contract: it is
 * reported (a critical warning, the layer's contract_breaches), @alloc->address set to 0 and
 * the allocation taken as gone, never deallocated again (a leak at worst, never a double free).
 * So after any failure, @alloc->address unchanged means kept, anything else gone. */
gboolean _memres_resource_deallocate_result_slow (MemresResource *mr, gboolean ok, GError **local,
                                                  guint64 address, MemresAllocation *alloc,
                                                  GError **error);

/* The allocate of a counted layer (MemresResource.counts, MEMRES_KIND_COUNTED): its slot, or for
 * a pass-through layer without one (the `stats` adaptor) the call memres_upstream_allocate()
 * would make, inline: the upstream's slot, its result checked (naming and releasing at the
 * upstream), its bytes counted in the upstream's usage; then the layer's count (counting.h), of
 * a record _memres_allocation_plausible() accepts only (the caller's check releases any other).
 */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_allocate (MemresResource *mr, gsize size, MemresStream stream,
                          MemresAllocation *alloc, GError **error)
{
  if (mr->allocate != NULL)
    {
      if (G_UNLIKELY (!mr->allocate (mr, size, stream, alloc, error)))
        return FALSE;
    }
  else
    {
      MemresResource *up = mr->upstream;

      if (G_LIKELY (up->counts == NULL))
        {
          GError *local = NULL;
          gboolean ok = up->allocate (up, size, stream, alloc, &local);

          if (!_memres_resource_alloc_result (up, "allocate", ok, &local, size, stream, alloc,
                                              error))
            return FALSE;
        }
      else if (!_memres_resource_call_allocate_nested (up, size, stream, alloc, error))
        return FALSE;
      /* checked above: plausible */
      _memres_resource_count_used (up, (gint64) alloc->size);
      _memres_counts_add (mr->counts, 0, (gint64) alloc->size, 1, TRUE);
      return TRUE;
    }
  if (G_LIKELY (_memres_allocation_plausible (alloc, size)))
    _memres_counts_add (mr->counts, 0, (gint64) alloc->size, 1, TRUE);
  return TRUE;
}

/* The deallocate of a counted layer: uncounted before the free (once freed, another thread may
 * get the memory and count it), then its slot, or for a pass-through layer the call
 * memres_upstream_deallocate() would make (the upstream's checked deallocate, its usage
 * uncounted once the allocation is gone); counted again when the free failed with an error and
 * kept the allocation (the address as it was). */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                            GError **error)
{
  guint64 address = alloc->address;
  gint64 size = (gint64) alloc->size;
  gboolean ok;

  _memres_counts_add (mr->counts, 0, -size, -1, FALSE);
  if (mr->deallocate != NULL)
    ok = mr->deallocate (mr, alloc, stream, error);
  else
    {
      MemresResource *up = mr->upstream;

      if (G_LIKELY (up->counts == NULL && !up->wait_before_free))
        {
          GError *local = NULL;

          ok = up->deallocate (up, alloc, stream, &local);
          if (G_UNLIKELY (!(ok && local == NULL)))
            ok = _memres_resource_deallocate_result_slow (up, ok, &local, address, alloc, error);
        }
      else
        ok = _memres_resource_call_deallocate_nested (up, alloc, stream, error);
      if (G_LIKELY (ok) || alloc->address != address)
        _memres_resource_count_used (up, -size);
    }
  if (G_UNLIKELY (!ok) && error != NULL && *error != NULL && address != 0
      && alloc->address == address)
    _memres_counts_add (mr->counts, 0, size, 1, FALSE); /* kept: still live */
  return ok;
}

/* resource.c: _memres_counted_allocate() and _memres_counted_deallocate() above, out of line, so
 * that the hot paths of the layers that are not counted keep their registers. */
gboolean _memres_resource_counted_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                            MemresAllocation *alloc, GError **error);
gboolean _memres_resource_counted_deallocate (MemresResource *mr, MemresAllocation *alloc,
                                              MemresStream stream, GError **error);

/* A call of @mr's allocate slot, unchecked: for a counted layer (MemresResource.counts) the slot
 * and its count; for any other the slot. */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_slot_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                MemresAllocation *alloc, GError **error)
{
  if (G_UNLIKELY (mr->counts != NULL))
    return _memres_resource_counted_allocate (mr, size, stream, alloc, error);
  return mr->allocate (mr, size, stream, alloc, error);
}

/* The same for the deallocate slot. */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_slot_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                                  GError **error)
{
  if (G_UNLIKELY (mr->counts != NULL))
    return _memres_resource_counted_deallocate (mr, alloc, stream, error);
  return mr->deallocate (mr, alloc, stream, error);
}

/* The allocate slot for @size (> 0) bytes. Every caller of the allocate slot goes through here
 * (memres_resource_allocate() and the upstream resources of adaptor kinds). */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_call_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                MemresAllocation *alloc, GError **error)
{
  GError *local = NULL;
  gboolean ok = _memres_resource_slot_allocate (mr, size, stream, alloc, &local);

  return _memres_resource_alloc_result (mr, "allocate", ok, &local, size, stream, alloc, error);
}

/* resource.c: waits for @stream before memory of @mr that is not stream-ordered is freed
 * (memres_cuda_stream_synchronize()); the error names the kind. */
gboolean _memres_resource_wait_stream (MemresResource *mr, MemresStream stream, GError **error);

/* The deallocate slot. For a kind whose memory is device-accessible but not stream-ordered
 * (MemresResource.wait_before_free, one flag on the line the slot pointer is read from) it first
 * waits for @stream; when that fails, the slot is not called and nothing changes. */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_call_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                                  GError **error)
{
  GError *local = NULL;
  guint64 address = alloc->address; /* read after a failure only (the callers keep it too) */
  gboolean ok;

  if (G_UNLIKELY (mr->wait_before_free) && !_memres_resource_wait_stream (mr, stream, error))
    return FALSE;
  ok = _memres_resource_slot_deallocate (mr, alloc, stream, &local);

  if (G_LIKELY (ok && local == NULL))
    return TRUE;
  return _memres_resource_deallocate_result_slow (mr, ok, &local, address, alloc, error);
}

/* memres_cuda_push_stream_context() (cuda-helpers.c) with the driver kept in @t->drv, for
 * the core's callers (transfers, the cross-stream close, IPC close ordering);
 * _memres_stream_context_end() pops what begin pushed. */
typedef struct
{
  const MemresCudaDriver *drv;
  gboolean pushed;
} MemresStreamContext;

/* resource.c: the device whose context the entry points make current for @mr's memory: its
 * device; for device-accessible memory of device -1 (page-locked pools), the first device the
 * kind's get_access slot says has access (the resource's `device` by default), read once and
 * again after memres_resource_set_access(); -1 where no slot says (the current context is
 * used). _memres_buffer_context_device(): the same for @buf (wrapped memory: its device). */
gint _memres_resource_context_device (MemresResource *mr);

static inline gint
_memres_buffer_context_device (MemresBuffer *buf)
{
  if (buf->device >= 0 || buf->mr == NULL || !(buf->flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE))
    return buf->device;
  return _memres_resource_context_device (buf->mr);
}

static inline gboolean
_memres_stream_context_begin (MemresStreamContext *t, gint device, MemresStream stream,
                              GError **error)
{
  t->pushed = FALSE;
  t->drv = memres_cuda_get_driver (error);
  return t->drv != NULL && memres_cuda_push_stream_context (device, stream, &t->pushed, error);
}

static inline void
_memres_stream_context_end (MemresStreamContext *t)
{
  memres_cuda_pop_context (t->pushed);
}

/* oom-report.c: @error (MEMRES_ERROR_OUT_OF_MEMORY of an allocation of @size bytes through @mr,
 * about to reach the application) gets the report of the stack appended to its message: what
 * each layer holds, the largest free block where a layer knows it (its explain_oom slot), the
 * device's free and total bytes, the verdict and the remedy; the message is also kept as @mr's
 * last report (memres_resource_get_oom_report()). Only for the error the caller gets: never
 * for one an adaptor catches below. */
void _memres_oom_report (MemresResource *mr, gsize size, GError *error);

/* buffer.c: a new open buffer owning @alloc, holding a reference on @mr, its bytes counted on
 * the stripes (memres_resource_allocate(), chunks received from another process).
 * _memres_buffer_new_imported(): a new open buffer at @alloc inside @mapping (one user of it
 * already counted), flagged MEMRES_MEMORY_IMPORTED; it holds no reference of its own on @mr:
 * the imported buffers of @mr share one (ipc/ipc-buffers.c). */
MemresBuffer *_memres_buffer_new (MemresResource *mr, const MemresAllocation *alloc,
                                  MemresStream stream);
MemresBuffer *_memres_buffer_new_imported (MemresResource *mr, const MemresAllocation *alloc,
                                           MemresStream stream, MemresIpcMapping *mapping);

/* spec.c */
gboolean _memres_set_spec_error (GError **error, const char *spec, const char *format, ...)
    G_GNUC_PRINTF (3, 4);
gboolean _memres_spec_parse (const char *spec, char **kind, GPtrArray **keys, GPtrArray **values,
                             GError **error);
GStrv _memres_split (const char *text, char separator, gboolean escapes);
/* @text with `\`, `,` and `>` escaped by a backslash, as values are written in specs;
 * _memres_unescape(): the reverse on the first @len bytes of @text (a lone trailing backslash is
 * kept). */
char *_memres_escape_value (const char *text);
char *_memres_unescape (const char *text, gsize len);
gboolean _memres_parse_size (const char *text, guint64 *bytes, GError **error);
gboolean _memres_parse_bool (const char *text, gboolean *value, GError **error);
gboolean _memres_parse_int (const char *text, gint64 min, gint64 max, gint64 *value,
                            GError **error);
gboolean _memres_parse_option_value (const MemresOptionSpec *spec, const char *text,
                                     GError **error);

/* options.c: validate key/values against @kind's schema; errors name the key and list what is
 * valid. */
MemresOptions *_memres_options_new (MemresKind *kind, GPtrArray *keys, GPtrArray *values,
                                    GError **error);
void _memres_options_free (MemresOptions *options);
char *_memres_options_to_string (const MemresOptions *options);

G_END_DECLS

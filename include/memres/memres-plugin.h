/* memres - CUDA memory resources
 * memres-plugin.h: the SDK for plugin authors. A plugin is a shared module named
 * libmemres-<name>.so exporting exactly one symbol, memres_plugin_<name>_get_desc, defined with
 * MEMRES_PLUGIN_DEFINE(). See docs/writing-a-plugin.md for a walk-through and
 * examples/plugin-template/ for a complete out-of-tree plugin.
 *
 * Everything a plugin may use is declared here or in the headers this one includes (its own two
 * parts among them: memres-plugin-ops.h, a kind's slot table and what the slots take and fill,
 * and memres-plugin-ipc.h, the table of a kind that shares memory with other processes); a plugin
 * includes only <memres/memres-plugin.h> and builds against `pkg-config memres-2`.
 *
 * ABI rules (what "part of the plugin ABI" means below):
 *  - A plugin built against headers of ABI MAJOR.MINOR loads into a core of ABI
 *    MAJOR.CORE_MINOR when CORE_MINOR >= MINOR. Anything else is refused with
 *    %MEMRES_PLUGIN_ERROR_ABI_MISMATCH before any plugin code runs: the loader reads the
 *    version from the plugin's ELF note (#MemresPluginNote) before it opens the file. (A plugin
 *    without the note, built with headers of ABI 1.0 or 1.1, is opened, which runs its ELF
 *    constructors, and its descriptor function is called before the check.)
 *  - Minor versions only append: fields at the end of structs that carry a struct_size or a
 *    version, slots at the end of #MemresResourceOps and #MemresIpcOps, entries at the end of
 *    the driver table,
 *    values at the end of enums. Nothing is ever reordered, retyped or removed within a major.
 *  - Structs without struct_size or version (#MemresOptionSpec, #MemresAllocation,
 *    #MemresResourceInfo, #MemresBufferExport, #MemresBufferChunks, #MemresFabricHandle,
 *    #MemresStats,
 *    #MemresAccessDesc) are frozen for
 *    the whole major version. tests/test-abi.c records every layout. */
#pragma once

/* Internal helpers (MEMRES_INSIDE here, the macros with a trailing underscore) are kept out of
 * the reference by __GTK_DOC_IGNORE__, which gtk-doc's scanner skips and compilers never define. */
#ifndef __GTK_DOC_IGNORE__
#define MEMRES_INSIDE
#endif
#include <memres/memres-version.h>
#include <memres/memres-error.h>
#include <memres/memres-types.h>
#include <memres/memres-registry.h>
#include <memres/memres-resource.h>
#include <memres/memres-buffer.h>
#include <memres/memres-ipc.h>
#include <memres/memres-adaptors.h>
#include <memres/memres-managed.h>
#include <memres/memres-segments.h>
#include <memres/memres-tags.h>
#include <memres/memres-sleep.h>
#include <memres/memres-cuda.h>
#include <memres/memres-plugin-ops.h>
#include <memres/memres-plugin-ipc.h>
#undef MEMRES_INSIDE

G_BEGIN_DECLS

/**
 * SECTION:memres-plugin
 * @title: Plugin SDK
 * @short_description: writing a plugin: the descriptor, the kind slots and the helpers a kind uses
 * @section_id: memres-memres-plugin
 *
 * A plugin is a shared module named `libmemres-NAME.so` that exports exactly one symbol,
 * `memres_plugin_NAME_get_desc`, defined with MEMRES_PLUGIN_DEFINE(). The core loads it the
 * first time one of its kinds is asked for, checks its ABI version (%MEMRES_PLUGIN_ABI_MAJOR,
 * %MEMRES_PLUGIN_ABI_MINOR), and runs its init function (#MemresPluginInitFunc), which registers
 * its kinds: a #MemresKindInfo each, with the option schema and the #MemresResourceOps slots
 * (init, allocate, deallocate, ...) that the core calls. A plugin includes only
 * `<memres/memres-plugin.h>`, which includes every public header, and builds against
 * `pkg-config memres-2`.
 *
 * |[<!-- language="C" -->
 * static gboolean
 * plugin_init (MemresPlugin *plugin, GError **error)
 * {
 *   return memres_plugin_register_kind (plugin, &my_kind_info, error);
 * }
 *
 * MEMRES_PLUGIN_DEFINE (mykind, "my memory", plugin_init)
 * ]|
 *
 * The slots (#MemresResourceOps, and #MemresIpcOps for a kind that shares memory with other
 * processes) are described on their own pages, memres-plugin-ops and memres-plugin-ipc, which
 * this header includes. They get their options as #MemresOptions, fill #MemresAllocation
 * records, and may call the helpers declared here (the adaptors' memres_upstream_allocate(), the
 * segment events of memres_resource_raise_segment_event()), the snapshot builders and those of
 * memres-cuda.
 * Structures with a `struct_size` or version grow only at their end within a major version. See
 * docs/writing-a-plugin.md and examples/plugin-template/ in the source tree for a walk-through.
 */

/**
 * MEMRES_PLUGIN_ABI_MAJOR:
 *
 * Major version of the plugin ABI. The loader accepts a plugin whose major equals the core's.
 * A new major may change anything; plugins must be rebuilt (and usually edited) for it.
 * Equal to %MEMRES_MAJOR_VERSION ("Versions" in README.md).
 *
 * ABI 2.0 moved the six IPC slots (export_handle, import_handle, export_buffer, import_buffer,
 * export_chunks, import_chunks) out of #MemresResourceOps into their own, separately versioned
 * table #MemresIpcOps, which #MemresKindInfo.ipc points to; #MemresResourceOps lost them, its
 * remaining slots closed up and its version counts from 1 again
 * (%MEMRES_RESOURCE_OPS_VERSION), and #MemresKindInfo is one layout with every field. A plugin
 * built for an earlier major is refused (%MEMRES_PLUGIN_ERROR_ABI_MISMATCH): rebuild it, and
 * move its IPC slots into a #MemresIpcOps (docs/writing-a-plugin.md, "Sharing with other
 * processes").
 *
 * Since: 1.0
 */
#define MEMRES_PLUGIN_ABI_MAJOR 2
/**
 * MEMRES_PLUGIN_ABI_MINOR:
 *
 * Minor version of the plugin ABI. The loader accepts a plugin whose minor is at most the
 * core's: minors only append fields, ops slots and driver table entries, so a plugin built
 * against older headers keeps working, while one built against newer headers could use what
 * this core does not have and is refused (%MEMRES_PLUGIN_ERROR_ABI_MISMATCH).
 *
 * 0 under ABI 2: ABI 2.0 is everything these headers describe. (The minors of ABI 1, never
 * released, appended the chunk slots and #MemresBufferChunks in 1.1, and in 1.2 the graph and
 * managed-memory driver entries, adaptor kinds, the get_counters slot, the SDK helpers of
 * memres-cuda.h and two contract changes: memres_cuda_set_error() reports
 * `CUDA_ERROR_OUT_OF_MEMORY` as %MEMRES_ERROR_OUT_OF_MEMORY, and the core waits for the stream
 * before the deallocate slot of a kind whose memory is not stream-ordered; all of it is part of
 * ABI 2.0.) Equal to %MEMRES_MINOR_VERSION ("Versions" in README.md).
 *
 * Since: 1.0
 */
#define MEMRES_PLUGIN_ABI_MINOR 0

/**
 * MemresPluginInitFunc:
 * @plugin: the plugin being loaded (transfer none; valid for as long as the plugin is loaded,
 *   which is the life of the process once init succeeded)
 * @error: return location for a #GError
 *
 * The plugin's entry point: registers the plugin's kinds with memres_plugin_register_kind().
 * Called once per process, from the thread that first asked for one of the plugin's kinds,
 * after every check of the descriptor (ABI version, names) passed. No memres lock is held;
 * loads are serialized (init never runs concurrently with another plugin's init), and a lookup
 * of another kind from init nests. Still, keep resources out of init: create them lazily,
 * in the ops.
 *
 * Do only cheap, infallible-in-practice work here: no driver calls (the machine may have no
 * GPU and no driver; a kind must still register so that `memres kinds` can list it) and no
 * global state that would need tearing down (plugins are never unloaded once init succeeded).
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise (any domain; the loader reports
 *   %MEMRES_PLUGIN_ERROR_INIT_FAILED with your message and discards every kind the plugin
 *   registered; the module stays loaded, since its code ran and may have left pointers into
 *   it in process-wide state). A memres_plugin_register_kind() that failed during init fails
 *   the load too, whatever init returns, with that call's error (%MEMRES_ERROR_EXISTS,
 *   %MEMRES_ERROR_INVALID_ARGUMENT): a plugin registers all its kinds or none, so do not
 *   register a kind you expect to be refused.
 *
 * Since: 1.0
 */
typedef gboolean (*MemresPluginInitFunc) (MemresPlugin *plugin, GError **error);

typedef struct _MemresPluginDesc MemresPluginDesc;

/**
 * MemresPluginDesc:
 * @abi_major: %MEMRES_PLUGIN_ABI_MAJOR of the headers the plugin was built with
 * @abi_minor: %MEMRES_PLUGIN_ABI_MINOR of the headers the plugin was built with
 * @struct_size: sizeof (MemresPluginDesc) in those headers; the loader reads no field past it
 * @reserved: must be 0 (the loader refuses another value with
 *   %MEMRES_PLUGIN_ERROR_ABI_MISMATCH, since 1.2)
 * @name: the plugin's name, matching `[a-z][a-z0-9_]*`: must equal the `<name>` of the file
 *   (`libmemres-<name>.so`) and of the symbol (`memres_plugin_<name>_get_desc`), else the load
 *   fails with %MEMRES_PLUGIN_ERROR_NAME_MISMATCH
 * @description: one line, shown by `memres kinds`
 * @init: registers the kinds (see #MemresPluginInitFunc)
 *
 * What a plugin's one exported function returns: static, const data that the loader checks
 * before it runs the plugin's init (the ABI version and name were checked already, from the
 * #MemresPluginNote, before the module was opened). Never fill it by hand: MEMRES_PLUGIN_DEFINE()
 * does it from these headers, so rebuilding against new headers updates the versions by itself.
 * Part of the plugin ABI.
 *
 * Since: 1.0
 */
struct _MemresPluginDesc
{
  guint32 abi_major;
  guint32 abi_minor;
  guint32 struct_size;
  guint32 reserved;
  const char *name;
  const char *description;
  MemresPluginInitFunc init;
};

typedef struct _MemresPluginNote MemresPluginNote;

/**
 * MemresPluginNote:
 * @namesz: 7, the length of @owner with its NUL
 * @descsz: 40, the bytes from @abi_major to the end
 * @type: %MEMRES_PLUGIN_NOTE_TYPE
 * @owner: "memres"
 * @abi_major: %MEMRES_PLUGIN_ABI_MAJOR of the headers the plugin was built with
 * @abi_minor: %MEMRES_PLUGIN_ABI_MINOR of those headers
 * @name: the plugin's name, NUL-padded
 *
 * An ELF note (section `.note.memres`) that MEMRES_PLUGIN_DEFINE() puts in every plugin: the
 * loader reads it from the file with plain ELF parsing before it opens the module, so that a
 * plugin built for another ABI, or whose name is not its file's, is refused before any of its
 * code runs (ELF constructors and `g_module_check_init` included). A plugin without the note
 * (built with headers older than 1.2) is checked through its descriptor, after opening.
 * Never fill one by hand. Frozen layout (part of the plugin ABI).
 *
 * Since: 1.2
 */
struct _MemresPluginNote
{
  guint32 namesz;
  guint32 descsz;
  guint32 type;
  char owner[8];
  guint32 abi_major;
  guint32 abi_minor;
  char name[32];
};

/**
 * MEMRES_PLUGIN_NOTE_TYPE:
 *
 * The type of the #MemresPluginNote in `.note.memres`.
 *
 * Since: 1.2
 */
#define MEMRES_PLUGIN_NOTE_TYPE 1

/**
 * MEMRES_PLUGIN_EXPORT:
 *
 * Marks a symbol as exported from a module built with `-fvisibility=hidden`. Only
 * MEMRES_PLUGIN_DEFINE() needs it: a plugin exports nothing else.
 *
 * Since: 1.0
 */
#define MEMRES_PLUGIN_EXPORT __attribute__ ((visibility ("default")))

/* C linkage for the entry point, so that a plugin written in C++ exports the unmangled
 * memres_plugin_<name>_get_desc the loader looks up. */
#ifndef __GTK_DOC_IGNORE__
#ifdef __cplusplus
#define MEMRES_PLUGIN_EXTERN_C_ extern "C"
#else
#define MEMRES_PLUGIN_EXTERN_C_
#endif
#endif

/* The descriptor of plugin @name, filled from these headers (MEMRES_PLUGIN_DEFINE() and
 * MEMRES_PLUGIN_DEFINE_EMBEDDED()). */
#ifndef __GTK_DOC_IGNORE__
#define MEMRES_PLUGIN_DESC_INIT_(name, description, init)                                          \
  {                                                                                                \
    MEMRES_PLUGIN_ABI_MAJOR, MEMRES_PLUGIN_ABI_MINOR, sizeof (MemresPluginDesc), 0, #name,         \
        (description), (init),                                                                     \
  }
#endif

/**
 * MEMRES_PLUGIN_DEFINE:
 * @name: the plugin name, a bare identifier matching `[a-z][a-z0-9_]*` (not a string: it is
 *   pasted into the symbol name); it must equal the `<name>` in `libmemres-<name>.so`
 * @description: a string literal, one line
 * @init: a #MemresPluginInitFunc (a `static` function of the plugin)
 *
 * Defines the plugin's one exported symbol, `const MemresPluginDesc
 * *memres_plugin_<name>_get_desc (void)`, returning a static const #MemresPluginDesc filled from
 * these headers, and (since 1.2) the #MemresPluginNote the loader reads before it opens the
 * module. Use it exactly once per module, at file scope. Build the module with
 * `-fvisibility=hidden` (Meson: `gnu_symbol_visibility: 'hidden'`) and make every other
 * function and variable `static`, so that this is the only exported symbol.
 *
 * Since: 1.0
 */
#define MEMRES_PLUGIN_DEFINE(name, description, init)                                              \
  __attribute__ ((section (".note.memres"), used,                                                  \
                  aligned (4))) static const MemresPluginNote memres_plugin_note_##name##_         \
      = {                                                                                          \
          7,                                                                                       \
          40,                                                                                      \
          MEMRES_PLUGIN_NOTE_TYPE,                                                                 \
          "memres",                                                                                \
          MEMRES_PLUGIN_ABI_MAJOR,                                                                 \
          MEMRES_PLUGIN_ABI_MINOR,                                                                 \
          #name,                                                                                   \
        };                                                                                         \
  MEMRES_PLUGIN_EXTERN_C_ MEMRES_PLUGIN_EXPORT const MemresPluginDesc                              \
      *memres_plugin_##name##_get_desc (void);                                                     \
  const MemresPluginDesc *memres_plugin_##name##_get_desc (void)                                   \
  {                                                                                                \
    static const MemresPluginDesc desc_ = MEMRES_PLUGIN_DESC_INIT_ (name, description, init);      \
    return &desc_;                                                                                 \
  }

/**
 * MEMRES_PLUGIN_DEFINE_EMBEDDED:
 * @name: the plugin name, a bare identifier matching `[a-z][a-z0-9_]*`
 * @description: a string literal, one line
 * @init: a #MemresPluginInitFunc (a `static` function of the plugin)
 *
 * MEMRES_PLUGIN_DEFINE() for a plugin compiled into libmemres itself rather than into a module
 * file (the `host` kind and the adaptors with a C API: `stats`, `track`, `retry`): the same
 * #MemresPluginDesc, static, with a pointer to it in the section `memres_embedded` of the object,
 * which the loader walks (between the bounds the linker defines for it) at the first use of the
 * registry, registering each plugin there as if it had been loaded; nothing is
 * exported and no #MemresPluginNote is made (no file is opened). Such a plugin is written against
 * the installed headers alone, as any other: the macro is its only difference. Only the objects
 * linked into libmemres are walked: in an application or a module the section is never read.
 * Use it exactly once per plugin, at file scope.
 *
 * Since: 2.0
 */
#define MEMRES_PLUGIN_DEFINE_EMBEDDED(name, description, init)                                     \
  static const MemresPluginDesc memres_embedded_desc_##name##_                                     \
      = MEMRES_PLUGIN_DESC_INIT_ (name, description, init);                                        \
  __attribute__ ((                                                                                 \
      section ("memres_embedded"), used,                                                           \
      aligned (sizeof (void *)))) static const MemresPluginDesc *const memres_embedded_##name##_   \
      = &memres_embedded_desc_##name##_

typedef struct _MemresKindInfo MemresKindInfo;

/**
 * MemresKindInfo:
 * @struct_size: sizeof (MemresKindInfo) in the plugin's headers; the core reads no field past
 *   it
 * @name: the kind name, matching `[a-z][a-z0-9_]*`, at most 31 bytes. A kind whose name
 *   equals its plugin's name is found by name (`libmemres-<name>.so` is loaded on first use);
 *   further kinds of the same plugin exist only once the plugin is loaded
 * @description: one line, shown by `memres kinds`
 * @options: the option schema (see #MemresOptionSpec), or %NULL when @n_options is 0
 * @n_options: entries in @options
 * @ops: the functions (see #MemresResourceOps)
 * @ipc: the sharing functions (see #MemresIpcOps), or %NULL for a kind that shares nothing
 *   with other processes (every adaptor). Since: 2.0
 * @instance_size: bytes of private data per resource, zero-filled, 16-byte aligned, freed by
 *   the core after finalize; reached with memres_resource_get_private(). 0 for none
 * @flags: #MemresKindFlags: 0 for a base kind (one that gets its memory itself),
 *   %MEMRES_KIND_ADAPTOR for a kind layered over another resource (see "Adaptors" in
 *   docs/writing-a-plugin.md). Since: 1.2
 *
 * What a plugin registers with memres_plugin_register_kind() (or an application with
 * memres_registry_register_kind()). The core copies the struct, the @options array, the
 * @ops table and the @ipc table, but keeps pointing at the strings (names, descriptions, docs,
 * defaults, enum choices): they must be static. Part of the plugin ABI.
 *
 * Since: 1.0
 */
struct _MemresKindInfo
{
  gsize struct_size;
  const char *name;
  const char *description;
  const MemresOptionSpec *options;
  guint n_options;
  const MemresResourceOps *ops;
  const MemresIpcOps *ipc;
  gsize instance_size;
  MemresKindFlags flags;
};

/* Helpers for plugins. Full documentation: the reference (share/gtk-doc/html/memres),
 * memres-plugin; in short:
 *
 * memres_plugin_register_kind(): registers @info for @plugin; only valid while the plugin's
 *   init function runs (on the thread running it). Checks the name, that the required slots
 *   (init, finalize, allocate, deallocate, query) are there, the schema (valid keys, no
 *   duplicate, enum choices present, defaults that parse) and the IPC table (its slots in
 *   pairs, none for an adaptor): %MEMRES_ERROR_INVALID_ARGUMENT; an IPC table whose version
 *   is 0 or newer than the core's: %MEMRES_PLUGIN_ERROR_ABI_MISMATCH (since 2.0); a kind of
 *   that name already registered: %MEMRES_ERROR_EXISTS. Since: 1.0
 * memres_plugin_get_name(): the plugin's name (transfer none, valid while it is loaded).
 *   Since: 1.0
 * memres_registry_register_kind(): the same as memres_plugin_register_kind() for a kind that
 *   lives in the application or test binary itself (no plugin file): its strings and
 *   functions must stay valid for the life of the process. Since: 1.0
 * memres_resource_get_private(): the instance's private data (instance_size bytes; %NULL when
 *   instance_size is 0), transfer none, valid until finalize returns. Only meaningful for the
 *   kind that registered it: never call it on a resource of another kind. Thread-safe.
 *   Since: 1.0
 * memres_kind_get_ops(): the kind's ops table as the core copied it, to see whether a layer
 *   implements an optional slot itself (transfer none; call nothing through it). Since: 2.0
 * memres_buffer_get_resource(): declared in memres-buffer.h (included here). Since: 1.0
 * memres_buffer_get_allocation(): the buffer's #MemresAllocation (transfer none, read-only,
 *   valid until the buffer is closed); for a plugin looking at one of its own buffers, for
 *   example to implement a copy on a foreign kind's buffer. Since: 1.0
 * memres_upstream_allocate(), memres_upstream_deallocate(): for adaptor kinds, the allocate
 *   and deallocate slots of the adaptor's upstream (memres_resource_get_upstream()), called on
 *   an allocation record without creating a #MemresBuffer; a successful deallocate zeroes the
 *   record, and a zeroed record is refused (%MEMRES_ERROR_INVALID_ARGUMENT), so that a record
 *   given back twice is not freed twice. Since: 1.2
 * memres_upstream_sleep(), memres_upstream_wake(): for adaptor kinds with the sleep and wake
 *   slots (#MemresResourceOps.sleep), the same slots of the upstream (through the
 *   %MEMRES_KIND_PASSES_ALLOCATIONS adaptors below it) on the upstream's records @allocs; all or
 *   nothing as the slots are; %MEMRES_ERROR_NOT_SUPPORTED when no layer below can. Since: 2.0
 * memres_upstream_allocate_for_tag(), memres_upstream_deallocate_for_tag():
 *   memres_upstream_allocate() and memres_upstream_deallocate() for memory of the adaptor's own
 *   that serves one tag's buffers (a caching layer's chunk in a stack that
 *   can sleep): during the call memres_allocation_get_tag() answers the tag for the record, so
 *   that the kinds below place and describe it by tag (`vmm`'s segment); not counted under it.
 *   Since: 2.0
 * memres_sleep_call_get_tag(): inside a sleep or wake slot, the tag the memres_resource_sleep()
 *   or memres_resource_wake() of this thread puts to sleep or wakes, and its policy's mode.
 *   Since: 2.0
 * memres_sleep_call_get_restore_batch(), memres_sleep_call_mapped(),
 *   memres_sleep_call_unmapping(): inside a wake slot of a kind that maps memory, the bytes to map
 *   before telling them mapped, the telling (the core queues the restoring copies of a backup
 *   while the kind maps the rest), and the wait a failing slot makes before releasing memory it
 *   told mapped. Since: 2.0
 * memres_allocation_get_tag(): inside an allocate or deallocate slot of a kind with
 *   %MEMRES_KIND_TAGGED (or below one that asks for tags), the tag of the buffer the call serves
 *   (transfer none, interned), %NULL for none. Since: 2.0
 * memres_resource_raise_segment_event(): for kinds registered with %MEMRES_KIND_SEGMENTS, tells
 *   the core that a segment of @mr was mapped, grew or is about to be unmapped (see
 *   memres-segments.h and docs/segments.md): the lookup index changes and the subscribers are
 *   called before it returns. Raise MAPPED after the memory is mapped, UNMAPPING before the
 *   driver unmaps it (or before an adaptor gives it back to its upstream), and MAPPED again when
 *   that step failed and the memory stays; never while holding a lock of the kind. An event
 *   the index cannot take (an overlap with a segment of @mr, an unknown base) is refused with
 *   a #GError, nothing changed. Since: 2.0
 * memres_resource_raise_segment_events(): the same for a run of segments and one event, the
 *   lookup index changed once for all of them (a sleep's or a wake's thousands of segments):
 *   subscribers see what one call per segment would give them; a run with one segment the index
 *   cannot take is refused whole. Since: 2.0
 * The snapshot slot's builders (memres_snapshot_add_block() and the others) are declared with
 * #MemresSnapshotLayer in memres-plugin-ops.h, the options' getters with #MemresOptions. */
gboolean memres_plugin_register_kind (MemresPlugin *plugin, const MemresKindInfo *info,
                                      GError **error);
const char *memres_plugin_get_name (MemresPlugin *plugin);
gboolean memres_registry_register_kind (const MemresKindInfo *info, GError **error);
gpointer memres_resource_get_private (MemresResource *mr);
const MemresResourceOps *memres_kind_get_ops (MemresKind *kind);
const MemresAllocation *memres_buffer_get_allocation (MemresBuffer *buf);
gboolean memres_upstream_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                   MemresAllocation *alloc, GError **error);
gboolean memres_upstream_deallocate (MemresResource *mr, MemresAllocation *alloc,
                                     MemresStream stream, GError **error);
gboolean memres_upstream_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                                GError **error);
gboolean memres_upstream_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                               GError **error);
gboolean memres_upstream_allocate_for_tag (MemresResource *mr, gsize size, MemresStream stream,
                                           const char *tag, MemresAllocation *alloc,
                                           GError **error);
gboolean memres_upstream_deallocate_for_tag (MemresResource *mr, MemresAllocation *alloc,
                                             const char *tag, MemresStream stream, GError **error);
const char *memres_sleep_call_get_tag (MemresSleepMode *mode);
gsize memres_sleep_call_get_restore_batch (void);
void memres_sleep_call_mapped (guint64 address, guint64 size);
void memres_sleep_call_unmapping (void);
const char *memres_allocation_get_tag (const MemresAllocation *alloc);
gboolean memres_resource_raise_segment_event (MemresResource *mr, MemresSegmentEvent event,
                                              const MemresSegment *segment, GError **error);
gboolean memres_resource_raise_segment_events (MemresResource *mr, MemresSegmentEvent event,
                                               const MemresSegment *segments, gsize n_segments,
                                               GError **error);

G_END_DECLS

/* memres - CUDA memory resources
 * memres-plugin.h: the SDK for plugin authors. A plugin is a shared module named
 * libmemres-<name>.so exporting exactly one symbol, memres_plugin_<name>_get_desc, defined with
 * MEMRES_PLUGIN_DEFINE(). See docs/writing-a-plugin.md. */
#pragma once

#define MEMRES_INSIDE
#include <memres/memres-version.h>
#include <memres/memres-error.h>
#include <memres/memres-types.h>
#include <memres/memres-registry.h>
#include <memres/memres-resource.h>
#include <memres/memres-buffer.h>
#include <memres/memres-ipc.h>
#include <memres/memres-cuda.h>
#undef MEMRES_INSIDE

G_BEGIN_DECLS

/**
 * MEMRES_PLUGIN_ABI_MAJOR:
 *
 * Major version of the plugin ABI. The loader accepts a plugin whose major equals the core's.
 */
#define MEMRES_PLUGIN_ABI_MAJOR 1
/**
 * MEMRES_PLUGIN_ABI_MINOR:
 *
 * Minor version of the plugin ABI. The loader accepts a plugin whose minor is at most the
 * core's: minors only append fields and slots.
 */
#define MEMRES_PLUGIN_ABI_MINOR 0

/**
 * MemresPluginInitFunc:
 * @plugin: the plugin being loaded (transfer none)
 * @error: return location for a #GError
 *
 * Registers the plugin's kinds with memres_plugin_register_kind(). Called once, with no memres
 * lock held, after every check of the descriptor passed.
 *
 * Returns: %TRUE on success; %FALSE with @error set otherwise (the loader reports
 *   %MEMRES_PLUGIN_ERROR_INIT_FAILED and discards every kind the plugin registered).
 */
typedef gboolean (*MemresPluginInitFunc) (MemresPlugin *plugin, GError **error);

/**
 * MemresPluginDesc:
 * @abi_major: %MEMRES_PLUGIN_ABI_MAJOR of the headers the plugin was built with
 * @abi_minor: %MEMRES_PLUGIN_ABI_MINOR of the headers the plugin was built with
 * @struct_size: sizeof (MemresPluginDesc) in those headers; the loader reads no field past it
 * @name: the plugin's name: must equal the `<name>` of the file and of the symbol
 * @description: one line
 * @init: registers the kinds
 *
 * What a plugin's one exported function returns. Define it with MEMRES_PLUGIN_DEFINE().
 */
typedef struct
{
  guint32 abi_major;
  guint32 abi_minor;
  guint32 struct_size;
  guint32 reserved;
  const char *name;
  const char *description;
  MemresPluginInitFunc init;
} MemresPluginDesc;

#define MEMRES_PLUGIN_EXPORT __attribute__ ((visibility ("default")))

/**
 * MEMRES_PLUGIN_DEFINE:
 * @name: the plugin name, a bare identifier matching `[a-z][a-z0-9_]*`
 * @description: a string literal
 * @init: a #MemresPluginInitFunc
 *
 * Defines the plugin's one exported symbol, `memres_plugin_<name>_get_desc`, returning a static
 * const #MemresPluginDesc filled from these headers. Build the module with
 * `-fvisibility=hidden` so this is the only exported symbol.
 */
#define MEMRES_PLUGIN_DEFINE(name, description, init)                                             \
  MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_##name##_get_desc (void);            \
  const MemresPluginDesc *memres_plugin_##name##_get_desc (void)                                  \
  {                                                                                               \
    static const MemresPluginDesc desc_ = {                                                       \
      MEMRES_PLUGIN_ABI_MAJOR, MEMRES_PLUGIN_ABI_MINOR, sizeof (MemresPluginDesc), 0, #name,      \
      (description),           (init),                                                            \
    };                                                                                            \
    return &desc_;                                                                                \
  }

/**
 * MemresAllocation:
 * @address: start of the memory: a `CUdeviceptr`, or a host pointer cast to an integer;
 *   0 only for an empty (zero-byte) buffer
 * @size: usable bytes; a kind that rounds up (granularity) reports the rounded size
 * @plugin_data: per-buffer state owned by the plugin, or %NULL
 *
 * What the allocate, import_buffer and resize slots fill in, and what deallocate receives back.
 */
typedef struct
{
  guint64 address;
  gsize size;
  gpointer plugin_data;
} MemresAllocation;

/**
 * MemresResourceInfo:
 * @device: the device ordinal the memory belongs to, or -1 for host memory
 * @flags: what the memory and the resource can do
 *
 * Filled by the query slot once, right after init (or import_handle) succeeded.
 */
typedef struct
{
  gint device;
  MemresMemoryFlags flags;
} MemresResourceInfo;

/**
 * MemresBufferExport:
 * @pool_id: identity of the exporting pool
 * @device_uuid: UUID of the device the memory is on (all zero for host memory)
 * @offset: offset of the buffer inside the exported allocation, in bytes
 * @size: size of the buffer in bytes
 * @export_data: the driver's export data (`CUmemPoolPtrExportData`)
 *
 * The decoded content of a #MemresBufferDescriptor. The core encodes and validates it; plugins
 * fill it in export_buffer and read it in import_buffer.
 */
typedef struct
{
  guint8 pool_id[MEMRES_IPC_ID_SIZE];
  guint8 device_uuid[MEMRES_IPC_ID_SIZE];
  guint64 offset;
  guint64 size;
  guint8 export_data[64];
} MemresBufferExport;

/**
 * MemresOptions:
 *
 * The validated options of one resource, every key of the schema present (given or default).
 * Read-only for plugins; valid during the init slot only.
 */
typedef struct _MemresOptions MemresOptions;

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
 * The number of the newest #MemresResourceOps layout these headers describe.
 */
#define MEMRES_RESOURCE_OPS_VERSION 1

/**
 * MemresResourceOps:
 * @version: %MEMRES_RESOURCE_OPS_VERSION of the plugin's headers; the core reads no slot newer
 *   than that
 * @init: required. Sets up the instance from validated options. On failure, sets @error and
 *   leaves nothing allocated (finalize is not called).
 * @finalize: required. Releases everything the instance holds. Called once, when the last
 *   reference (the application's or a buffer's) is gone; never fails.
 * @allocate: required. Allocates @size bytes (@size > 0; the core handles 0 itself), ordered on
 *   @stream for stream-ordered kinds. Sets %MEMRES_ERROR_OUT_OF_MEMORY or a %MEMRES_CUDA_ERROR.
 *   Called concurrently from any thread: must be thread-safe.
 * @deallocate: required. Frees @alloc, ordered on @stream (the buffer's deallocation stream).
 *   Called at most once per allocation, from any thread.
 * @query: required. Fills @info. Called once after init/import_handle.
 * @get_stats: optional. Fills every field of @stats but n_buffers (the core counts buffers).
 * @reset_stats: optional. Resets the high-water marks to the current values.
 * @trim: optional. Returns memory held but unused to the system, keeping at least
 *   @bytes_to_keep bytes reserved.
 * @set_access: optional. Grants or revokes access of other devices in one driver call.
 * @get_access: optional. Reads the access @device has.
 * @export_handle: optional. Returns a new #MemresIpcHandle (owning its own fd) for the pool.
 * @import_handle: optional. Alternative to init: sets up the instance as an importer of
 *   @handle (the fd stays owned by the caller: dup it to keep it).
 * @export_buffer: optional. Fills @out for @alloc.
 * @import_buffer: optional. Maps the allocation @in describes into this process and fills
 *   @alloc with the whole mapping: the mapped address and its extent in bytes (for pools, the
 *   driver's range), not just the buffer. The core then checks that @in's offset and size fit
 *   in it (else it calls deallocate with @alloc and fails with
 *   %MEMRES_ERROR_INVALID_DESCRIPTOR), maps each exported allocation once per process however
 *   often it is imported, and passes @alloc to deallocate (the unmap) when the last buffer
 *   using it closes. On failure nothing stays mapped.
 * @resize: optional. Grows or shrinks @alloc to @new_size bytes, updating @alloc->address and
 *   @alloc->size; on failure @alloc is left exactly as it was.
 *
 * The table of a kind's functions. Slots are only appended, each with its `Since:` version.
 * Slots of version 1 are all listed above. The core's public wrappers are the only callers; a
 * missing optional slot makes the wrapper fail with %MEMRES_ERROR_NOT_SUPPORTED.
 */
typedef struct
{
  guint32 version;
  gboolean (*init) (MemresResource *mr, const MemresOptions *options, GError **error);
  void (*finalize) (MemresResource *mr);
  gboolean (*allocate) (MemresResource *mr, gsize size, MemresStream stream,
                        MemresAllocation *alloc, GError **error);
  gboolean (*deallocate) (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                          GError **error);
  void (*query) (MemresResource *mr, MemresResourceInfo *info);
  gboolean (*get_stats) (MemresResource *mr, MemresStats *stats, GError **error);
  gboolean (*reset_stats) (MemresResource *mr, GError **error);
  gboolean (*trim) (MemresResource *mr, gsize bytes_to_keep, GError **error);
  gboolean (*set_access) (MemresResource *mr, const MemresAccessDesc *descs, guint n_descs,
                          GError **error);
  gboolean (*get_access) (MemresResource *mr, gint device, MemresAccess *access,
                          GError **error);
  gboolean (*export_handle) (MemresResource *mr, MemresIpcHandle **handle, GError **error);
  gboolean (*import_handle) (MemresResource *mr, const MemresIpcHandle *handle, GError **error);
  gboolean (*export_buffer) (MemresResource *mr, const MemresAllocation *alloc,
                             MemresBufferExport *out, GError **error);
  gboolean (*import_buffer) (MemresResource *mr, const MemresBufferExport *in,
                             MemresStream stream, MemresAllocation *alloc, GError **error);
  gboolean (*resize) (MemresResource *mr, MemresAllocation *alloc, gsize new_size,
                      MemresStream stream, GError **error);
} MemresResourceOps;

/**
 * MemresKindInfo:
 * @struct_size: sizeof (MemresKindInfo) in the plugin's headers
 * @name: the kind name, matching `[a-z][a-z0-9_]*`
 * @description: one line
 * @options: the option schema
 * @n_options: entries in @options
 * @ops: the functions (must stay valid while the plugin is loaded: use static const)
 * @instance_size: bytes of private data per resource, zero-filled, reached with
 *   memres_resource_get_private()
 *
 * What a plugin registers. The core copies the strings' pointers: they must be static.
 */
typedef struct
{
  gsize struct_size;
  const char *name;
  const char *description;
  const MemresOptionSpec *options;
  guint n_options;
  const MemresResourceOps *ops;
  gsize instance_size;
} MemresKindInfo;

/* Full documentation with each definition in core/. */
gboolean memres_plugin_register_kind (MemresPlugin *plugin, const MemresKindInfo *info,
                                      GError **error);
const char *memres_plugin_get_name (MemresPlugin *plugin);
gboolean memres_registry_register_kind (const MemresKindInfo *info, GError **error);
gpointer memres_resource_get_private (MemresResource *mr);
MemresResource *memres_buffer_get_resource (MemresBuffer *buf);
const MemresAllocation *memres_buffer_get_allocation (MemresBuffer *buf);

G_END_DECLS

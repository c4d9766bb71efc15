/* memres - CUDA memory resources
 * memres-types.h: the types shared by applications and plugins. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <glib.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-types
 * @title: Common types
 * @short_description: streams, the opaque objects, memory flags, access and statistics
 * @section_id: memres-memres-types
 *
 * The types shared by applications and plugins, included by every other header.
 *
 * #MemresStream is the driver's `CUstream` under another name, so that applications need not
 * include `cuda.h`. The opaque objects are introduced here and documented with their functions:
 * #MemresResource (memres-resource), #MemresBuffer (memres-buffer), #MemresKind
 * (memres-registry), #MemresPlugin (memres-plugin) and #MemresIpcHandle (memres-ipc).
 * #MemresMemoryFlags says what the memory of a resource or buffer can do, #MemresAccess and
 * #MemresAccessDesc the access of one device to it (memres_resource_set_access()), #MemresStats
 * what memres_resource_get_stats() reports, and #MemresBufferDescriptor carries a buffer to
 * another process (memres_buffer_export()).
 *
 * Applications include `<memres/memres.h>` (plugins `<memres/memres-plugin.h>`), never this
 * header alone.
 */

/**
 * MemresStream:
 *
 * A CUDA stream. The same type as the driver's `CUstream`, declared here so that applications
 * need not include `cuda.h`. %NULL is the legacy default stream of the current context, except
 * where a function says that %NULL means "the buffer's recorded deallocation stream".
 *
 * Since: 1.0
 */
typedef struct CUstream_st *MemresStream;

/**
 * MEMRES_STREAM_LEGACY:
 *
 * The legacy default stream, named explicitly (the driver's `CU_STREAM_LEGACY`).
 *
 * Since: 1.0
 */
#define MEMRES_STREAM_LEGACY ((MemresStream) 0x1)

/**
 * MemresResource:
 *
 * An opaque object: a memory resource, one layer of a stack made from a spec string
 * (memres_resource_new(), memres_resource_get_default()), from which buffers are allocated
 * (memres_resource_allocate()). Reference counted (memres_resource_ref(),
 * memres_resource_unref(), `g_autoptr (MemresResource)`); every buffer holds a reference on its
 * resource, and an adaptor on its upstream. Thread-safe: any number of threads may allocate
 * from one resource at once.
 *
 * Since: 1.0
 */
typedef struct _MemresResource MemresResource;

/**
 * MemresBuffer:
 *
 * An opaque object: a block of memory allocated from a #MemresResource, wrapped
 * (memres_buffer_new_for_pointer(), memres_buffer_new_for_dlpack()) or imported from another
 * process (memres_buffer_import()). memres_buffer_close() gives the memory back, ordered on a
 * stream; the object is reference counted (memres_buffer_ref(), memres_buffer_unref(),
 * `g_autoptr (MemresBuffer)`), and the last reference to an open buffer closes it. Reference
 * counting and the getters are thread-safe; close a buffer once, when no other thread still
 * uses it.
 *
 * Since: 1.0
 */
typedef struct _MemresBuffer MemresBuffer;

/**
 * MemresKind:
 *
 * An opaque object: a kind of resource (`host`, `dmr`, `stats`, ...), registered under its name
 * by a plugin (memres_plugin_register_kind()) or by the application
 * (memres_registry_register_kind()), and found with memres_registry_lookup(). It holds the
 * kind's description, option schema, #MemresKindFlags and slots. Reference counted
 * (memres_kind_ref(), memres_kind_unref()) and immutable once registered: thread-safe.
 *
 * Since: 1.0
 */
typedef struct _MemresKind MemresKind;

/**
 * MemresPlugin:
 *
 * An opaque object: a plugin being loaded, as its #MemresPluginInitFunc receives it to register
 * its kinds (memres_plugin_register_kind()). Owned by the core (transfer none); a plugin that
 * loaded is never unloaded.
 *
 * Since: 1.0
 */
typedef struct _MemresPlugin MemresPlugin;

/**
 * MemresIpcHandle:
 *
 * An opaque object: a shareable handle of a memory pool, which another process imports
 * (memres_resource_import_handle()). It owns one POSIX file descriptor and carries the
 * exporting kind's name, the pool identity and the device UUID. Made by
 * memres_resource_export_handle() (by memres_ipc_handle_new() in a kind's export_handle slot),
 * sent and received with memres_ipc_send_handle() and memres_ipc_receive_handle(), freed with
 * memres_ipc_handle_free() (`g_autoptr (MemresIpcHandle)`), which closes the descriptor. Not
 * locked: use a handle from one thread at a time (reading it from several is fine).
 *
 * Since: 1.0
 */
typedef struct _MemresIpcHandle MemresIpcHandle;

/**
 * MemresMemoryFlags:
 * @MEMRES_MEMORY_DEVICE_ACCESSIBLE: device code can access the memory
 * @MEMRES_MEMORY_HOST_ACCESSIBLE: host code can dereference the pointer
 * @MEMRES_MEMORY_IPC_ENABLED: the resource can export handles and buffers to other processes
 * @MEMRES_MEMORY_IMPORTED: the resource or buffer was imported from another process
 * @MEMRES_MEMORY_RESIZABLE: buffers of the resource support memres_buffer_resize()
 * @MEMRES_MEMORY_STREAM_ORDERED: allocation and free are ordered on a stream
 * @MEMRES_MEMORY_MANAGED: managed (unified) memory: host- and device-accessible, migrated on
 *   demand by the driver; the advice and prefetch functions of memres-managed.h accept it
 *   (Since: 1.2)
 * @MEMRES_MEMORY_GRAPH: graph memory (the `graph` kind): an allocation exists only inside the
 *   launches of the graph whose capture allocated it, so adaptors that keep freed memory for
 *   reuse (`cache`) refuse such an upstream (Since: 2.0)
 * @MEMRES_MEMORY_FABRIC_HANDLES: the memory is made with fabric handles
 *   (`CU_MEM_HANDLE_TYPE_FABRIC`): bytes that name it across the nodes of a multi-node NVLink
 *   domain, no file descriptor; set where the driver let the resource export one at creation
 *   (`vmm` with `handle_type=fabric`; docs/distributed.md) (Since: 2.0)
 *
 * What the memory of a resource or of a buffer can do, a bitmask
 * (memres_resource_get_flags(), memres_buffer_get_flags()); the kind's init slot chooses it.
 * Values are only appended.
 *
 * Since: 1.0
 */
typedef enum
{
  MEMRES_MEMORY_DEVICE_ACCESSIBLE = 1 << 0,
  MEMRES_MEMORY_HOST_ACCESSIBLE = 1 << 1,
  MEMRES_MEMORY_IPC_ENABLED = 1 << 2,
  MEMRES_MEMORY_IMPORTED = 1 << 3,
  MEMRES_MEMORY_RESIZABLE = 1 << 4,
  MEMRES_MEMORY_STREAM_ORDERED = 1 << 5,
  MEMRES_MEMORY_MANAGED = 1 << 6,
  MEMRES_MEMORY_GRAPH = 1 << 7,
  MEMRES_MEMORY_FABRIC_HANDLES = 1 << 8,
} MemresMemoryFlags;

/**
 * MemresCloseFlags:
 * @MEMRES_CLOSE_DEFAULT: a close on a stream other than the buffer's deallocation stream is
 *   ordered after the work queued on the deallocation stream (an event recorded there, waited
 *   for by the closing stream)
 * @MEMRES_CLOSE_CALLER_ORDERED: the caller has ordered the closing stream after every use of
 *   the memory on other streams itself (its own event, a synchronization): no event is recorded
 *
 * How memres_buffer_close_full() orders the free.
 *
 * Since: 1.2
 */
typedef enum
{
  MEMRES_CLOSE_DEFAULT = 0,
  MEMRES_CLOSE_CALLER_ORDERED = 1 << 0,
} MemresCloseFlags;

/**
 * MemresAccess:
 * @MEMRES_ACCESS_NONE: no access (the driver's `CU_MEM_ACCESS_FLAGS_PROT_NONE`)
 * @MEMRES_ACCESS_READ: read-only (`CU_MEM_ACCESS_FLAGS_PROT_READ`)
 * @MEMRES_ACCESS_READWRITE: read and write (`CU_MEM_ACCESS_FLAGS_PROT_READWRITE`)
 *
 * Access of one device to the memory of a resource. The values equal the driver's.
 *
 * Since: 1.0
 */
typedef enum
{
  MEMRES_ACCESS_NONE = 0,
  MEMRES_ACCESS_READ = 1,
  MEMRES_ACCESS_READWRITE = 3,
} MemresAccess;

typedef struct _MemresAccessDesc MemresAccessDesc;

/**
 * MemresAccessDesc:
 * @device: a CUDA device ordinal
 * @access: the access that device gets
 *
 * The access of one device to the memory of a resource: an entry of the array given to
 * memres_resource_set_access(). Frozen layout (part of the ABI).
 *
 * Since: 1.0
 */
struct _MemresAccessDesc
{
  gint device;
  MemresAccess access;
};

typedef struct _MemresStats MemresStats;

/**
 * MemresStats:
 * @reserved_current: bytes the resource holds from the system (driver) now
 * @reserved_high: high-water mark of @reserved_current since creation or the last reset
 * @used_current: bytes in live buffers now
 * @used_high: high-water mark of @used_current since creation or the last reset
 * @n_buffers: live buffers allocated from this resource
 *
 * Statistics of a resource, all sizes in bytes.
 *
 * Since: 1.0
 */
struct _MemresStats
{
  guint64 reserved_current;
  guint64 reserved_high;
  guint64 used_current;
  guint64 used_high;
  guint64 n_buffers;
};

/**
 * MEMRES_BUFFER_DESCRIPTOR_SIZE:
 *
 * Size in bytes of an encoded #MemresBufferDescriptor.
 *
 * Since: 1.0
 */
#define MEMRES_BUFFER_DESCRIPTOR_SIZE 160

typedef struct _MemresBufferDescriptor MemresBufferDescriptor;

/**
 * MemresBufferDescriptor:
 * @bytes: the encoded, versioned record (magic, version, length, kind, pool identity,
 *   device UUID, offset, size, the driver's export data)
 *
 * A buffer exported for another process: plain bytes the application may send any way it
 * likes. Treat a received descriptor as untrusted: memres_buffer_import() validates every field.
 *
 * Since: 1.0
 */
struct _MemresBufferDescriptor
{
  guint8 bytes[MEMRES_BUFFER_DESCRIPTOR_SIZE];
};

G_END_DECLS

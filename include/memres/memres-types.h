/* memres - CUDA memory resources
 * memres-types.h: the types shared by applications and plugins. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <glib.h>

G_BEGIN_DECLS

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

typedef struct _MemresResource MemresResource;
typedef struct _MemresBuffer MemresBuffer;
typedef struct _MemresKind MemresKind;
typedef struct _MemresPlugin MemresPlugin;
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

/* memres - CUDA memory resources
 * memres-plugin-ipc.h: the table of a kind that shares memory with other processes
 * (MemresIpcOps) and the records its slots fill and read: a buffer's export, a buffer as its
 * physical chunks, a fabric handle. Part of the plugin SDK, included by <memres/memres-plugin.h>
 * (the ABI rules are there); never include it directly. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>
#include <memres/memres-ipc.h>
#include <memres/memres-plugin-ops.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-plugin-ipc
 * @title: Kind sharing slots
 * @short_description: the slots of a kind that shares memory with other processes, #MemresIpcOps
 * @section_id: memres-memres-plugin-ipc
 *
 * The second table of a kind (#MemresKindInfo.ipc), for a kind whose memory other processes can
 * import (docs/ipc.md): its slots export and import a pool's handle (export_handle,
 * import_handle, and with fabric handles export_fabric_handle, import_fabric_handle), one
 * buffer's #MemresBufferExport (export_buffer, import_buffer), or a buffer as the physical
 * allocations it is mapped from, #MemresBufferChunks (export_chunks, import_chunks; with fabric
 * handles, #MemresFabricHandle, export_fabric_chunks and import_fabric_chunks). The core frames,
 * sends and checks the messages (memres-ipc); the slots fill and validate their content, which
 * comes from another process.
 *
 * Part of the plugin SDK: a plugin includes `<memres/memres-plugin.h>`, which includes this
 * header; including it alone is an error. The contract common to every slot of
 * #MemresResourceOps (memres-plugin-ops) applies to these slots too.
 */

typedef struct _MemresBufferExport MemresBufferExport;

/**
 * MemresBufferExport:
 * @pool_id: identity of the exporting pool, unique per pool and stable while it lives (the
 *   importer uses it to match the buffer to the pool it imported)
 * @device_uuid: UUID of the device the memory is on (all zero for host memory)
 * @offset: offset of the buffer inside the exported allocation, in bytes
 * @size: size of the buffer in bytes
 * @export_data: the driver's export data (`CUmemPoolPtrExportData`), unused bytes zero
 *
 * The decoded content of a #MemresBufferDescriptor. The core encodes it (with the kind name,
 * magic, version and length) and validates the framing on import; plugins fill it in
 * export_buffer and must validate the content in import_buffer, which receives bytes from
 * another process. Frozen layout (part of the plugin ABI).
 *
 * Since: 1.0
 */
struct _MemresBufferExport
{
  guint8 pool_id[MEMRES_IPC_ID_SIZE];
  guint8 device_uuid[MEMRES_IPC_ID_SIZE];
  guint64 offset;
  guint64 size;
  guint8 export_data[64];
};

typedef struct _MemresBufferChunks MemresBufferChunks;

/**
 * MemresBufferChunks:
 * @device_uuid: UUID of the device the memory belongs to (the resource's device, also for
 *   host-NUMA memory)
 * @handle_type: the shareable handle type of every chunk, a `CUmemAllocationHandleType`
 *   (memres transports only `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`)
 * @location_type: where the physical memory lives, a `CUmemLocationType`
 * @granularity: the exporter's allocation granularity in bytes (a power of two; every chunk
 *   size is a multiple of it)
 * @size: size of the buffer in bytes (1 to the sum of the chunk sizes)
 * @n_chunks: chunks in use in @chunk_sizes and @fds, 1 to %MEMRES_IPC_MAX_CHUNKS
 * @reserved: must be 0
 * @chunk_sizes: the size in bytes of each physical allocation, in address order: chunk i is
 *   mapped right after chunk i - 1, the first at the buffer's start
 * @fds: the POSIX-fd shareable handle of each chunk, in the same order
 *
 * A buffer as the physical allocations (chunks) it is mapped from, for kinds whose buffers are
 * made of several allocations (vmm). The export_chunks slot fills it (the fds then belong to
 * the core, which sends and closes them); the import_chunks slot receives it from the core,
 * which decoded it from another process's message and checked its framing (counts, sizes
 * positive multiples of @granularity, no overflow, @size within the sum, one received fd per
 * chunk) but not its meaning. Frozen layout (part of the plugin ABI).
 *
 * Since: 1.1
 */
struct _MemresBufferChunks
{
  guint8 device_uuid[MEMRES_IPC_ID_SIZE];
  guint32 handle_type;
  guint32 location_type;
  guint64 granularity;
  guint64 size;
  guint32 n_chunks;
  guint32 reserved;
  guint64 chunk_sizes[MEMRES_IPC_MAX_CHUNKS];
  gint fds[MEMRES_IPC_MAX_CHUNKS];
};

/**
 * MEMRES_FABRIC_HANDLE_SIZE:
 *
 * Size in bytes of a fabric handle (`CUmemFabricHandle`).
 *
 * Since: 2.0
 */
#define MEMRES_FABRIC_HANDLE_SIZE 64

typedef struct _MemresFabricHandle MemresFabricHandle;

/**
 * MemresFabricHandle:
 * @data: the handle's bytes, as cuMemExportToShareableHandle() writes a `CUmemFabricHandle`
 *
 * The fabric handle (`CU_MEM_HANDLE_TYPE_FABRIC`) of one physical allocation: bytes that name it
 * across the nodes of a multi-node NVLink domain, with no file descriptor and no identity of the
 * process that made them (docs/distributed.md). Frozen layout (part of the plugin ABI).
 *
 * Since: 2.0
 */
struct _MemresFabricHandle
{
  guint8 data[MEMRES_FABRIC_HANDLE_SIZE];
};

/**
 * MEMRES_IPC_OPS_VERSION:
 *
 * The number of the newest #MemresIpcOps layout these headers describe: 3 for ABI 2.0 (the
 * ten slots below; version 1 has the first six, version 2 the first eight). Each ABI 2 minor
 * that appends IPC slots increments it. Set #MemresIpcOps.version to this macro.
 *
 * Since: 2.0
 */
#define MEMRES_IPC_OPS_VERSION 3

typedef struct _MemresIpcOps MemresIpcOps;

/**
 * MemresIpcOps:
 * @version: see the comment above the field
 * @export_handle: optional; see the comment above the slot
 * @import_handle: optional; see the comment above the slot
 * @export_buffer: optional; see the comment above the slot
 * @import_buffer: optional; see the comment above the slot
 * @export_chunks: optional; see the comment above the slot
 * @import_chunks: optional; see the comment above the slot
 * @export_fabric_chunks: optional; see the comment above the slot
 * @import_fabric_chunks: optional; see the comment above the slot
 * @export_fabric_handle: optional; see the comment above the slot
 * @import_fabric_handle: optional; see the comment above the slot
 *
 * The sharing functions of a kind that shares memory with other processes: its
 * #MemresKindInfo.ipc points at this table (%NULL: the kind shares nothing). Two families:
 * pools (export_handle/import_handle make and import a pool's shareable handle,
 * export_buffer/import_buffer one buffer's descriptor, as the `ipc` and `pinned` kinds do) and
 * chunks (export_chunks/import_chunks, a buffer as the physical allocations it is mapped from,
 * as `vmm` with handle_type=posix_fd does; export_fabric_chunks/import_fabric_chunks the same
 * with fabric handles, as `vmm` with handle_type=fabric does; export_fabric_handle/
 * import_fabric_handle a pool's fabric handle in place of its fd, as `ipc` with
 * handle_type=fabric does). Slots go in pairs: a table that
 * has one of export_handle and import_handle, one of export_buffer and import_buffer, one of
 * export_chunks and import_chunks, one of export_fabric_chunks and import_fabric_chunks, or one
 * of export_fabric_handle and import_fabric_handle, has
 * the other too (else registration fails with
 * %MEMRES_ERROR_INVALID_ARGUMENT). Only base kinds have an IPC table: an adaptor's registration
 * with one fails (%MEMRES_ERROR_INVALID_ARGUMENT); a buffer or a pool shared through an
 * adaptor that passes allocations (%MEMRES_KIND_PASSES_ALLOCATIONS) is served by the first
 * layer below it with an IPC table. Define it `static const`, set @version to
 * %MEMRES_IPC_OPS_VERSION and name the slots with designated initializers; the core copies it
 * when the kind is registered. The contract common to every slot of #MemresResourceOps
 * (threads, locks, errors, contexts) applies to these slots too; a missing slot makes its
 * public call fail with %MEMRES_ERROR_NOT_SUPPORTED. Slots are only appended within a major.
 * Part of the plugin ABI.
 *
 * Since: 2.0
 */
struct _MemresIpcOps
{
  /**
   * MemresIpcOps.version:
   *
   * Set it to %MEMRES_IPC_OPS_VERSION, the layout of the headers the plugin is built with. The
   * core refuses 0 and a version newer than its own (%MEMRES_PLUGIN_ERROR_ABI_MISMATCH) and reads
   * no slot past the plugin's version. The versions under ABI 2:
   *
   * - 1 (ABI 2.0): export_handle to import_chunks. Each moved here in ABI 2.0 from
   *   #MemresResourceOps, where export_handle to import_buffer appeared in 1.0 and the chunk
   *   slots in 1.1, with the same signature and contract.
   * - 2 (ABI 2.0, issue 37): export_fabric_chunks and import_fabric_chunks.
   * - 3 (ABI 2.0, issue 37): export_fabric_handle and import_fabric_handle.
   *
   * Since: 2.0
   */
  guint32 version;
  /**
   * MemresIpcOps.export_handle:
   *
   * Optional. Creates a shareable handle for the pool: stores in @handle a new #MemresIpcHandle
   * (transfer full: the caller frees it) made with memres_ipc_handle_new(), which takes ownership
   * of its own fd. Errors: %MEMRES_ERROR_NOT_SUPPORTED (the instance was not created shareable, or
   * was itself imported), a %MEMRES_CUDA_ERROR; on failure no fd stays open. Any thread.
   *
   * Since: 2.0
   */
  gboolean (*export_handle) (MemresResource *mr, MemresIpcHandle **handle, GError **error);
  /**
   * MemresIpcOps.import_handle:
   *
   * Optional. Alternative to init, for memres_resource_import_handle(): sets up a new instance
   * (private data zero-filled) as an importer of @handle, whose kind is this kind's name. @handle
   * and its fd stay owned by the caller and are valid during the call only: dup() the fd to keep
   * it. Then query is called, as after init. Same threading and failure rules as init. Errors:
   * %MEMRES_ERROR_INVALID_DESCRIPTOR (the handle's content is not acceptable),
   * %MEMRES_ERROR_WRONG_DEVICE (no local device has the handle's UUID), a %MEMRES_CUDA_ERROR.
   *
   * Since: 2.0
   */
  gboolean (*import_handle) (MemresResource *mr, const MemresIpcHandle *handle, GError **error);
  /**
   * MemresIpcOps.export_buffer:
   *
   * Optional. Fills @out (zero-filled on entry) for @alloc (transfer none), a live allocation of
   * this instance; the core encodes the descriptor. @out->pool_id and @out->device_uuid must be
   * those export_handle puts in the instance's handles (importers refuse a descriptor whose
   * identity differs from the handle they imported), and exporting one allocation twice must give
   * the same export data (importers deduplicate by it). Any thread. Errors:
   * %MEMRES_ERROR_NOT_SUPPORTED, a %MEMRES_CUDA_ERROR.
   *
   * Since: 2.0
   */
  gboolean (*export_buffer) (MemresResource *mr, const MemresAllocation *alloc,
                             MemresBufferExport *out, GError **error);
  /**
   * MemresIpcOps.import_buffer:
   *
   * Optional. Maps the allocation @in describes into this process, on an instance created by
   * import_handle, and fills @alloc (zero-filled on entry) with the WHOLE mapping: the mapped
   * address and its extent in bytes (for pools, the driver's range), not just the buffer. @in comes
   * from another process and its framing was checked by the core, not its content; the core checked
   * @in->pool_id and @in->device_uuid against the handle the instance was imported from
   * (%MEMRES_ERROR_INVALID_DESCRIPTOR). The core then checks that @in's offset and size fit in the
   * mapping (else it calls deallocate with @alloc and fails with %MEMRES_ERROR_INVALID_DESCRIPTOR),
   * maps each exported allocation once per process however often it is imported, and passes @alloc
   * to deallocate (the unmap) when the last buffer using it closes. The mapping is usable in
   * @stream's order. On failure nothing stays mapped. Any thread. Errors also:
   * %MEMRES_ERROR_NOT_SUPPORTED (not an importer), a %MEMRES_CUDA_ERROR.
   *
   * Since: 2.0
   */
  gboolean (*import_buffer) (MemresResource *mr, const MemresBufferExport *in, MemresStream stream,
                             MemresAllocation *alloc, GError **error);
  /**
   * MemresIpcOps.export_chunks:
   *
   * Optional, for memres_ipc_send_buffer() and memres_buffer_export_message(). Fills @out
   * (zero-filled on entry) for @alloc (transfer none), a live, non-empty allocation of this
   * instance that was not imported: the device UUID, handle type, location type, granularity,
   * @alloc->size as the buffer size, and for each physical allocation in address order its size and
   * a NEW shareable-handle fd (for vmm: cuMemExportToShareableHandle()). On success the fds belong
   * to the core, which sends and closes them (or hands them to the caller of
   * memres_buffer_export_message()); on failure no fd stays open. Errors:
   * %MEMRES_ERROR_NOT_SUPPORTED (the instance was not created with a POSIX-fd handle type, the
   * buffer was imported, or it has more than %MEMRES_IPC_MAX_CHUNKS chunks), a %MEMRES_CUDA_ERROR.
   * Any thread.
   *
   * Since: 2.0
   */
  gboolean (*export_chunks) (MemresResource *mr, const MemresAllocation *alloc,
                             MemresBufferChunks *out, GError **error);
  /**
   * MemresIpcOps.import_chunks:
   *
   * Optional, for memres_ipc_receive_buffer() and memres_buffer_import_message(). Maps the chunks
   * @in describes (a message from another process; the core checked its framing, see
   * #MemresBufferChunks) into ONE new address range of this instance, in order, with this
   * instance's own access rights, and fills @alloc (zero-filled on entry): the address, @in->size
   * as the size, and the plugin data deallocate needs to unmap and release it all. The fds stay the
   * core's (valid during the call; the driver keeps its own reference to what it imports). Before
   * any driver call that creates something, check what only the kind knows: that the instance can
   * import (%MEMRES_ERROR_NOT_SUPPORTED), the handle and location types
   * (%MEMRES_ERROR_INVALID_DESCRIPTOR), the device UUID (%MEMRES_ERROR_WRONG_DEVICE) and the chunk
   * sizes against the instance's granularity (%MEMRES_ERROR_INVALID_DESCRIPTOR). On failure
   * everything imported, reserved or mapped is released. The core marks the buffer
   * %MEMRES_MEMORY_IMPORTED and refuses to export or resize it; deallocate gets @alloc at close, as
   * for allocate. Errors also: a %MEMRES_CUDA_ERROR. Any thread.
   *
   * Since: 2.0
   */
  gboolean (*import_chunks) (MemresResource *mr, const MemresBufferChunks *in, MemresStream stream,
                             MemresAllocation *alloc, GError **error);
  /**
   * MemresIpcOps.export_fabric_chunks:
   *
   * Optional (version 2), for memres_buffer_export_message() of a resource whose flags carry
   * %MEMRES_MEMORY_FABRIC_HANDLES. As export_chunks, but each chunk's shareable handle is a
   * fabric handle written to @handles[i] (room for %MEMRES_IPC_MAX_CHUNKS, zero-filled on entry;
   * vmm: cuMemExportToShareableHandle() with `CU_MEM_HANDLE_TYPE_FABRIC`), @out->handle_type is
   * `CU_MEM_HANDLE_TYPE_FABRIC` and @out->fds is left alone (no fd is made). Errors:
   * %MEMRES_ERROR_NOT_SUPPORTED (the instance was not made with fabric handles, the buffer was
   * imported, or it has more than %MEMRES_IPC_MAX_CHUNKS chunks), a %MEMRES_CUDA_ERROR. Any
   * thread.
   *
   * Since: 2.0
   */
  gboolean (*export_fabric_chunks) (MemresResource *mr, const MemresAllocation *alloc,
                                    MemresBufferChunks *out, MemresFabricHandle *handles,
                                    GError **error);
  /**
   * MemresIpcOps.import_fabric_chunks:
   *
   * Optional (version 2), for memres_buffer_import_message() of a message of fabric handles.
   * As import_chunks, with @handles[i] (from another process, possibly another node: untrusted
   * bytes) the fabric handle of chunk i in place of @in->fds (all -1); the core checked the
   * framing and that @in->handle_type is `CU_MEM_HANDLE_TYPE_FABRIC`. A handle the driver does
   * not know (forged, or of memory already freed) fails in the driver (%MEMRES_CUDA_ERROR);
   * everything imported is released. Any thread.
   *
   * Since: 2.0
   */
  gboolean (*import_fabric_chunks) (MemresResource *mr, const MemresBufferChunks *in,
                                    const MemresFabricHandle *handles, MemresStream stream,
                                    MemresAllocation *alloc, GError **error);
  /**
   * MemresIpcOps.export_fabric_handle:
   *
   * Optional (version 3), for memres_buffer_export_message() of a buffer of a pool whose
   * resource's flags carry %MEMRES_MEMORY_FABRIC_HANDLES: writes the pool's fabric handle to
   * @out (zero-filled on entry; `ipc`: cuMemPoolExportToShareableHandle() with
   * `CU_MEM_HANDLE_TYPE_FABRIC`, made once at creation; an imported pool gives the handle it was
   * imported from, so that it can be forwarded). The pool's identity and device UUID are those
   * export_handle would give. No fd is made. Errors: %MEMRES_ERROR_NOT_SUPPORTED (the pool has
   * no fabric handle), a %MEMRES_CUDA_ERROR. Any thread.
   *
   * Since: 2.0
   */
  gboolean (*export_fabric_handle) (MemresResource *mr, MemresFabricHandle *out, GError **error);
  /**
   * MemresIpcOps.import_fabric_handle:
   *
   * Optional (version 3). As import_handle, for a pool shared by its fabric handle: @handle
   * carries the kind, the pool identity and the device UUID and holds no fd
   * (memres_ipc_handle_get_fd() is -1); @fabric (from another process, possibly another node:
   * untrusted bytes) is the pool's fabric handle (`ipc`: cuMemPoolImportFromShareableHandle()
   * with `CU_MEM_HANDLE_TYPE_FABRIC`). Both are valid during the call only. Bytes the driver does
   * not know (forged, or of a pool destroyed since) fail in the driver; a process without the
   * exporter's IMEX channel gets `CUDA_ERROR_NOT_PERMITTED`. Same threading, failure rules and
   * errors as import_handle.
   *
   * Since: 2.0
   */
  gboolean (*import_fabric_handle) (MemresResource *mr, const MemresIpcHandle *handle,
                                    const MemresFabricHandle *fabric, GError **error);
};

G_END_DECLS

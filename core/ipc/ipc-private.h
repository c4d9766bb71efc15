/* memres - CUDA memory resources
 * ipc-private.h: the IPC layer's own structures and functions (core/ipc/), seen by its files,
 * its tests and the fuzz targets only: the wire codecs, the transport, the handle's fd check,
 * the table of imported mappings, the IPC state of an imported resource. The rest of the core
 * sees the layer only through ipc.h. */
#pragma once

#include "memres-private.h"

G_BEGIN_DECLS

/* ipc-mappings.c: one resource's imported buffer mappings (see there). A mapping is made by
 * the import_buffer slot, shared by every MemresBuffer importing that allocation, and unmapped
 * (deallocate slot) when the last of them is closed. */
#define MEMRES_EXPORT_DATA_SIZE 64
/* The header, kind, pool_id and device_uuid of a buffer descriptor (ipc-descriptor.c). */
#define MEMRES_DESCRIPTOR_PREFIX_SIZE (8 + MEMRES_KIND_NAME_MAX + 2 * MEMRES_IPC_ID_SIZE)
/* Allocated 64-byte aligned (ipc-mappings.c): what a close reads and writes is the first cache
 * line; the export data after it is written by the import and read only on a repeated import
 * or an export again. */
struct _MemresIpcMapping
{
  MemresAllocation alloc;      /* what import_buffer filled: the whole mapped allocation */
  GArray *waits;               /* CUevent recorded where earlier users were closed, or NULL */
  MemresIpcMapping *next_free; /* in the free list */
  guint n_users;               /* open buffers using this mapping; 0: retired (unmapped) */
  /* the key, compared when the hash matches; with the resource's pool identity and device
   * what a buffer of this mapping is exported again with */
  guint8 export_data[MEMRES_EXPORT_DATA_SIZE];
};
/* A slot of the table: the mapping's hash beside it, so that probing and rebuilding read the
 * slot array only, not the records. */
typedef struct
{
  guint64 hash;
  MemresIpcMapping *mapping; /* NULL when empty */
} MemresIpcSlot;
typedef struct
{
  GMutex lock;          /* everything here and in every mapping */
  MemresIpcSlot *slots; /* 2^k slots */
  gsize mask;           /* number of slots - 1 */
  gsize n_mappings;     /* live mappings (n_users > 0) */
  gsize n_retired;      /* records still in the slots whose mapping was unmapped */
  gsize n_users;        /* open imported buffers, over every mapping */
  guint64 mapped_bytes; /* the sizes of every live mapping */
  guint64 mapped_high;  /* high-water mark of mapped_bytes */
  MemresIpcMapping *free_list;
} MemresIpcMappings;
G_STATIC_ASSERT (sizeof (((MemresBufferExport *) NULL)->export_data) == MEMRES_EXPORT_DATA_SIZE);

/* The IPC state of a resource memres_resource_import_handle() made (MemresResource.ipc, whose
 * head it is): the identity of its pool and the buffers imported through it. Allocated by
 * ipc-pools.c before the resource is published; then only the mapping table changes,
 * under its lock. */
typedef struct
{
  MemresIpcState base;
  /* the bytes every descriptor of a buffer of this pool starts with (header, kind, pool_id,
   * device_uuid), so that the importer's hot path checks them with one compare */
  guint8 descriptor_prefix[MEMRES_DESCRIPTOR_PREFIX_SIZE];
  MemresIpcMappings mappings;             /* the buffers imported through the resource */
  guint8 pool_id[MEMRES_IPC_ID_SIZE];     /* key of the table of imported pools */
  guint8 device_uuid[MEMRES_IPC_ID_SIZE]; /* of the pool's device (zero: host memory) */
} MemresIpcImport;

static inline MemresIpcImport *
_memres_ipc_import (MemresResource *mr)
{
  return (MemresIpcImport *) mr->ipc;
}

/* ipc-buffers.c: the release_buffer, get_stats and reset_stats hooks of an imported resource's
 * state (ipc.h); ipc-pools.c puts them in its hooks table. */
gboolean _memres_ipc_release_buffer (MemresBuffer *buf, MemresResource *owner, MemresStream stream,
                                     GError **error);
void _memres_ipc_get_stats (MemresResource *mr, MemresStats *stats, guint64 *n_imported);
void _memres_ipc_reset_stats (MemresResource *mr);
void _memres_ipc_snapshot (MemresResource *mr, MemresSnapshotLayer *layer);

void _memres_ipc_mappings_init (MemresIpcMappings *t);
void _memres_ipc_mappings_clear (MemresIpcMappings *t);
guint64 _memres_ipc_mappings_hash (const guint8 key[MEMRES_EXPORT_DATA_SIZE]);
MemresIpcMapping *_memres_ipc_mappings_lookup (const MemresIpcMappings *t,
                                               const guint8 key[MEMRES_EXPORT_DATA_SIZE],
                                               guint64 hash);
MemresIpcMapping *_memres_ipc_mappings_add (MemresIpcMappings *t, guint64 hash,
                                            const MemresBufferExport *exported,
                                            const MemresAllocation *alloc);
void _memres_ipc_mappings_retire (MemresIpcMappings *t, MemresIpcMapping *m);
void _memres_ipc_mappings_revive (MemresIpcMappings *t, MemresIpcMapping *m,
                                  const MemresAllocation *alloc);

/* ipc-transport.c: the handle record (MRIH), as memres_ipc_send_handle() sends it. Layout,
 * little-endian, 72 bytes: magic u32 'MRIH', version u16 (1), length u16 (72), kind char[32]
 * (NUL-padded), pool_id[16], device_uuid[16].
 * _memres_ipc_handle_encode(): @handle's record into @record.
 * _memres_ipc_handle_decode(): a new handle owning @fd from the record @record (checked strictly:
 *   magic, version, length, kind); on failure %NULL with MEMRES_ERROR_INVALID_DESCRIPTOR (or
 *   the errors of memres_ipc_handle_new()) and @fd stays the caller's. @fd -1: a handle of the
 *   record's identity with no fd (a pool shared by its fabric handle). */
#define MEMRES_HANDLE_MAGIC       0x4849524du /* "MRIH" read as little-endian u32 */
#define MEMRES_HANDLE_RECORD_SIZE 72
void _memres_ipc_handle_encode (const MemresIpcHandle *handle,
                                guint8 record[MEMRES_HANDLE_RECORD_SIZE]);
MemresIpcHandle *_memres_ipc_handle_decode (const guint8 *record, gint fd, GError **error);

/* ipc-descriptor.c: the buffer descriptor codec (fuzzed). Layout, little-endian, 160 bytes:
 * magic u32 'MRBD', version u16, length u16, kind char[32] (NUL-padded), pool_id[16],
 * device_uuid[16], offset u64, size u64, export_data[64], reserved[8] (zero). */
#define MEMRES_DESCRIPTOR_MAGIC   0x4442524du /* "MRBD" read as little-endian u32 */
#define MEMRES_DESCRIPTOR_VERSION 1
gboolean _memres_set_invalid_record (GError **error, const char *what, const char *field,
                                     const char *format, ...) G_GNUC_PRINTF (4, 5);
gboolean _memres_check_kind_field (const guint8 *field, const char *what, GError **error);
void _memres_descriptor_encode (const char *kind, const MemresBufferExport *info,
                                MemresBufferDescriptor *out);
gboolean _memres_descriptor_decode (gconstpointer data, gsize length, const guint8 *expected_kind,
                                    char kind[MEMRES_KIND_NAME_MAX], MemresBufferExport *info,
                                    GError **error);
void _memres_descriptor_prefix (const guint8 kind_field[MEMRES_KIND_NAME_MAX],
                                const guint8 pool_id[MEMRES_IPC_ID_SIZE],
                                const guint8 device_uuid[MEMRES_IPC_ID_SIZE],
                                guint8 prefix[MEMRES_DESCRIPTOR_PREFIX_SIZE]);
gboolean _memres_descriptor_decode_pool (gconstpointer data, gsize length,
                                         const guint8 prefix[MEMRES_DESCRIPTOR_PREFIX_SIZE],
                                         MemresBufferExport *info);

/* ipc-handle.c: whether @fd is an open file descriptor; a pool identity or device UUID in
 * lower-case hex (transfer full), for messages; a handle of a pool's identity that holds no fd
 * (a pool shared by its fabric handle; @kind a valid kind name, checked by the caller). */
gboolean _memres_fd_is_open (gint fd);
MemresIpcHandle *_memres_ipc_handle_new_identity (const char *kind,
                                                  const guint8 pool_id[MEMRES_IPC_ID_SIZE],
                                                  const guint8 device_uuid[MEMRES_IPC_ID_SIZE]);
char *_memres_ipc_format_id (const guint8 id[MEMRES_IPC_ID_SIZE]);

/* Little-endian fields of the wire records: @n bytes (1 to 8) at @p. */
static inline void
_memres_put_le (guint8 *p, guint64 v, int n)
{
  for (int i = 0; i < n; i++)
    p[i] = (v >> (8 * i)) & 0xff;
}

static inline guint64
_memres_get_le (const guint8 *p, int n)
{
  guint64 v = 0;

  /* one load where a byte loop would not be merged into one (the import path decodes these) */
  memcpy (&v, p, (gsize) n);
  return GUINT64_FROM_LE (v);
}

/* ipc-transport.c: messages with fds over a connected AF_UNIX socket.
 * _memres_ipc_send_message(): sends @len bytes at @data with the @n_fds (0 to
 *   MEMRES_IPC_MAX_CHUNKS) open fds at @fds (they stay the caller's; the peer receives
 *   duplicates) in SCM_RIGHTS and this process's credentials, in one sendmsg(). @what names the
 *   message in errors. Errors: MEMRES_ERROR_INVALID_ARGUMENT (not an AF_UNIX socket),
 *   MEMRES_ERROR_FAILED (sendmsg failed or sent part of the message).
 * _memres_ipc_receive_message(): receives one message into @buf (@max_len bytes of room): a
 *   header of @header_len bytes, from which @length_of tells the whole message's length
 *   (checked to lie in [header_len, max_len]), then the rest; on a stream socket exactly that
 *   many bytes are read (the next message stays in the socket), on a seqpacket socket the
 *   datagram must have exactly that length. Unless MEMRES_IPC_ALLOW_ANY_UID, every piece read
 *   (every recvmsg()) must carry SCM_CREDENTIALS of this process's euid (a piece without is
 *   refused) and SO_PEERCRED must name it; a refused message is still read to its end, and the
 *   first refused piece is the error. On success *@length gets the length and @fds (an empty GArray
 * of int) the received fds, which the caller owns (close them with _memres_ipc_close_fds()); on
 *   failure every fd that arrived is closed and @fds is empty. Errors:
 *   MEMRES_ERROR_INVALID_ARGUMENT, MEMRES_ERROR_FAILED (recvmsg failed, or the peer closed before
 *   sending anything), MEMRES_ERROR_INVALID_DESCRIPTOR (short, long, too many fds),
 *   MEMRES_ERROR_PERMISSION_DENIED.
 * _memres_ipc_close_fds(): closes every fd in @fds and empties it. */
typedef gsize (*MemresIpcLengthFunc) (const guint8 *header);
gboolean _memres_ipc_check_socket (gint socket_fd, GError **error);
gboolean _memres_ipc_send_message (gint socket_fd, const char *what, const guint8 *data, gsize len,
                                   const gint *fds, guint n_fds, GError **error);
gboolean _memres_ipc_receive_message (gint socket_fd, MemresIpcFlags flags, const char *what,
                                      guint8 *buf, gsize header_len, gsize max_len,
                                      MemresIpcLengthFunc length_of, gsize *length, GArray *fds,
                                      GError **error);
void _memres_ipc_close_fds (GArray *fds);

/* ipc-layout.c: the layout record of a buffer sent as chunks (fuzzed). Little-endian:
 * magic u32 'MRCB', version u16, length u16 (header + 8 * n_chunks), kind char[32]
 * (NUL-padded), device_uuid[16], handle_type u32, location_type u32, granularity u64, size u64,
 * n_chunks u32, reserved u32 (zero), then n_chunks chunk sizes u64. */
#define MEMRES_LAYOUT_MAGIC       0x4243524du /* "MRCB" read as little-endian u32 */
#define MEMRES_LAYOUT_VERSION     1
#define MEMRES_LAYOUT_HEADER_SIZE 88
#define MEMRES_LAYOUT_MAX_SIZE    (MEMRES_LAYOUT_HEADER_SIZE + 8 * MEMRES_IPC_MAX_CHUNKS)
gsize _memres_layout_encode (const char *kind, const MemresBufferChunks *chunks,
                             guint8 out[MEMRES_LAYOUT_MAX_SIZE]);
gsize _memres_layout_declared_length (const guint8 *header);
gsize _memres_layout_fabric_length (const guint8 *header);
gboolean _memres_layout_decode (gconstpointer data, gsize length, char kind[MEMRES_KIND_NAME_MAX],
                                MemresBufferChunks *chunks, GError **error);
gboolean _memres_layout_check (const MemresBufferChunks *chunks, GError **error);

/* ipc-pool-message.c: a pool buffer as one message (ipc-message.c, see there): magic u32
 * 'MRPB', version u16 (1), length u16 (240), the pool's handle record (MRIH), the buffer's
 * descriptor (MRBD); one fd, the pool's. A pool of fabric handles: version 2, length 304, the
 * same records and then the pool's fabric handle (64 bytes); no fd.
 * _memres_pool_message_declared_length(): the length field of a message whose first bytes
 *   (at least 8) are at @header.
 * _memres_pool_export_message(): exports @buf (memres_buffer_export()) and its pool, @owner
 *   (the layer with the IPC table): memres_resource_export_handle(), or for a resource whose
 *   flags carry MEMRES_MEMORY_FABRIC_HANDLES and whose kind has export_fabric_handle
 *   _memres_ipc_export_fabric_pool(); as one message: *@bytes (transfer full) and one new fd
 *   of the pool in *@fds (g_new'd; the caller closes it and frees the array), or none (*@fds
 *   NULL, *@n_fds 0) for a fabric pool.
 * _memres_pool_import_message(): checks a message (@length bytes, @n_fds fds at @fds, lent:
 *   none is closed or kept), imports the pool or, when @importer is not NULL, uses @importer,
 *   which must be the resource imported from that pool, and imports the buffer. Errors:
 *   MEMRES_ERROR_INVALID_DESCRIPTOR for a bad message (before any import) or an importer of
 *   another pool, and those of memres_resource_import_handle() and memres_buffer_import(). */
#define MEMRES_POOL_MESSAGE_MAGIC          0x4250524du /* "MRPB" read as little-endian u32 */
#define MEMRES_POOL_MESSAGE_VERSION        1
#define MEMRES_POOL_MESSAGE_SIZE           (8 + MEMRES_HANDLE_RECORD_SIZE + MEMRES_BUFFER_DESCRIPTOR_SIZE)
#define MEMRES_POOL_FABRIC_MESSAGE_VERSION 2
#define MEMRES_POOL_FABRIC_MESSAGE_SIZE    (MEMRES_POOL_MESSAGE_SIZE + MEMRES_FABRIC_HANDLE_SIZE)
gsize _memres_pool_message_declared_length (const guint8 *header);
gboolean _memres_pool_export_message (MemresBuffer *buf, MemresResource *owner, GBytes **bytes,
                                      gint **fds, guint *n_fds, GError **error);
MemresBuffer *_memres_pool_import_message (const guint8 *message, gsize length, const gint *fds,
                                           guint n_fds, MemresResource *importer,
                                           MemresStream stream, GError **error);

/* ipc-chunks.c: a buffer shared by chunks as one message (ipc-message.c, see there): the
 * layout record and one shareable-handle fd per chunk.
 * _memres_chunks_export_message(): @buf's message through the export_chunks slot of @mr (the
 *   layer that made its allocation, which has the slot): *@bytes (transfer full), the fds in
 *   *@fds (g_new'd; the caller closes them and frees the array); on failure none stays open.
 * _memres_chunks_import_message(): decodes and checks the layout record (@length bytes) against
 *   @n_fds and @importer, and maps it through the import_chunks slot; the fds at @fds are lent
 *   (none is closed or kept). Errors: MEMRES_ERROR_INVALID_ARGUMENT (@importer NULL),
 *   MEMRES_ERROR_INVALID_DESCRIPTOR, MEMRES_ERROR_NOT_SUPPORTED, and the slot's. */
gboolean _memres_chunks_export_message (MemresResource *mr, MemresBuffer *buf, GBytes **bytes,
                                        gint **fds, guint *n_fds, GError **error);
/* ipc-chunks.c: the same family with fabric handles (vmm with handle_type=fabric): the layout
 * record (handle type CU_MEM_HANDLE_TYPE_FABRIC) followed by one MemresFabricHandle per chunk,
 * no fd (docs/distributed.md).
 * _memres_chunks_export_fabric_message(): @buf's message through the export_fabric_chunks slot
 *   of @mr: *@bytes (transfer full).
 * _memres_chunks_import_message() takes such a message too (@n_fds must then be 0) and maps it
 *   through import_fabric_chunks. */
#define MEMRES_CHUNKS_MESSAGE_MAX_SIZE                                                             \
  (MEMRES_LAYOUT_MAX_SIZE + MEMRES_FABRIC_HANDLE_SIZE * MEMRES_IPC_MAX_CHUNKS)
gboolean _memres_chunks_export_fabric_message (MemresResource *mr, MemresBuffer *buf,
                                               GBytes **bytes, GError **error);
MemresBuffer *_memres_chunks_import_message (MemresResource *importer, const guint8 *data,
                                             gsize length, const gint *fds, guint n_fds,
                                             MemresStream stream, GError **error);

/* ipc-pools.c: a pool shared by its fabric handle (the kind's export_fabric_handle and
 * import_fabric_handle slots, `ipc` with handle_type=fabric).
 * _memres_ipc_export_fabric_pool(): the fabric handle of @owner's pool into @out; errors:
 *   MEMRES_ERROR_NOT_SUPPORTED (no slot), the slot's.
 * _memres_ipc_import_fabric_pool(): memres_resource_import_handle() for @handle, a handle of
 *   the pool's identity with no fd, and @fabric (lent), through import_fabric_handle: the same
 *   deduplication by pool identity, the same errors. */
gboolean _memres_ipc_export_fabric_pool (MemresResource *owner, MemresFabricHandle *out,
                                         GError **error);
MemresResource *_memres_ipc_import_fabric_pool (const MemresIpcHandle *handle,
                                                const MemresFabricHandle *fabric, GError **error);

/* ipc-buffers.c: the first checks of every sharing call (open, not empty, allocated by a
 * resource), their messages naming @verb. Errors: MEMRES_ERROR_CLOSED,
 * MEMRES_ERROR_INVALID_ARGUMENT, MEMRES_ERROR_NOT_SUPPORTED. */
gboolean _memres_ipc_check_buffer (MemresBuffer *buf, const char *verb, GError **error);

/* ipc-buffers.c: the error of an export or a send refused because @owner, the layer
 * _memres_resource_ipc_owner() found, has no slot for it: %MEMRES_ERROR_NOT_SUPPORTED, "@what of
 * kind "K" cannot be @done other processes", then why and what to do. A base kind: "(@hint)"
 * (`use kind "ipc"`). An adaptor (the walk stops at one without MEMRES_KIND_PASSES_ALLOCATIONS:
 * it carves its blocks out of larger allocations of its upstream, which hides the upstream's
 * sharing): says so, and to share from the layer below or use a stack without it; when no layer
 * below shares either, @hint. Returns FALSE. */
gboolean _memres_ipc_set_not_shared (GError **error, MemresResource *owner, const char *what,
                                     const char *done, const char *hint);

G_END_DECLS

/* memres - CUDA memory resources
 * vmm-private.h: state shared by the files of the vmm plugin. Nothing here is exported from the
 * module (G_GNUC_INTERNAL, and the module is built with hidden visibility). */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

/* Bytes of physical memory per cuMemCreate() when the `chunk` option is 0. One constant, to be
 * tuned from GPU measurements. */
#define VMM_DEFAULT_CHUNK ((gsize) 64 * 1024 * 1024)

/* The instance private data of a vmm resource. Everything but the statistics is written once
 * by init and read-only afterwards, so buffers need no lock. */
typedef struct
{
  MemresResource *mr; /* the instance itself (transfer none), for its segment events */
  const MemresCudaDriver *drv;
  gint device;
  CUmemAllocationProp prop; /* what cuMemCreate() gets */
  gsize granularity;        /* bytes; every size, offset and address is a multiple */
  gsize chunk;              /* bytes per cuMemCreate(), a multiple of granularity */
  gsize reserve;            /* bytes of address space reserved up front per buffer */
  CUmemAccessDesc *access;  /* owner (and host location) first, then the peers */
  guint n_access;
  MemresMemoryFlags flags;

  /* Bytes of live cuMemCreate allocations and their high-water mark, under stats_lock; the
   * used bytes (the buffers' sizes) are the core's count. */
  GMutex stats_lock;
  guint64 physical;
  guint64 physical_high;

  /* Reservations a grow got away from where it asked and could not free (VmmRange), under
   * stats_lock: freed again at the next grow and at finalize, never lost. */
  GArray *strays;

  /* The live buffers (VmmBuffer.prev/next) and what each shows a snapshot (VmmBuffer.shown),
   * under stats_lock: changed with the physical bytes (_vmm_buffer_update()). */
  struct _VmmBuffer *buffers;
} VmmResource;

/* Frees the stray reservations of @self that the driver now lets go (all, at finalize). */
void _vmm_free_strays (VmmResource *self);

/* One physical allocation (cuMemCreate handle), mapped at buffer base + offset. */
typedef struct
{
  CUmemGenericAllocationHandle handle;
  gsize offset;
  gsize size;
} VmmChunk;

/* One address range reservation, freed with exactly this (ptr, size). */
typedef struct
{
  CUdeviceptr ptr;
  gsize size;
} VmmRange;

/* Per-buffer state (MemresAllocation.plugin_data). The reservations are adjacent, in address
 * order, and cover [base, base + reserved); the chunks are adjacent, in offset order, and cover
 * [base, base + mapped), none across a reservation boundary; size <= mapped <= reserved (a shrink
 * keeps a partially used chunk mapped). The arrays grow by doubling, never per chunk. */
typedef struct _VmmBuffer VmmBuffer;

/* A buffer's extent as a snapshot shows it: a copy made under VmmResource.stats_lock, so that
 * the snapshot slot reads no field a resize is changing. */
typedef struct
{
  CUdeviceptr base;
  gsize size, mapped, reserved;
} VmmShown;

struct _VmmBuffer
{
  CUdeviceptr base;
  gsize mapped;
  gsize reserved;
  VmmChunk *chunks;
  gsize n_chunks;
  gsize chunks_cap;
  VmmRange *ranges;
  gsize n_ranges;
  gsize ranges_cap;
  gboolean imported; /* chunks imported from another process: no export, no resize */
  gboolean exported; /* its chunks were exported to another process: it cannot sleep */
  /* put to sleep (vmm-sleep.c): nothing mapped, the chunks' offsets and sizes kept, their
   * handles 0 once released (a handle the driver refused to release is kept, and mapped again
   * at the wake) */
  gboolean asleep;
  const char *tag;        /* the tag it was allocated under (interned), NULL: none; its segments' */
  VmmBuffer *prev, *next; /* VmmResource.buffers, under stats_lock */
  VmmShown shown;         /* under stats_lock */
};

/* vmm-buffer.c: the allocate, deallocate and resize slots. */
G_GNUC_INTERNAL gboolean _vmm_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                        MemresAllocation *alloc, GError **error);
G_GNUC_INTERNAL gboolean _vmm_deallocate (MemresResource *mr, MemresAllocation *alloc,
                                          MemresStream stream, GError **error);
G_GNUC_INTERNAL gboolean _vmm_resize (MemresResource *mr, MemresAllocation *alloc, gsize new_size,
                                      MemresStream stream, GError **error);

/* vmm-buffer.c: maps the @n imported physical allocations @handles, of @sizes bytes each, in
 * order into one new reservation of their total size, grants the resource's access and fills
 * @alloc (a buffer of @size bytes, its plugin data owning the handles from then on). On failure
 * unmaps and frees what it made and leaves the handles to the caller. */
G_GNUC_INTERNAL gboolean _vmm_map_imported (VmmResource *self,
                                            const CUmemGenericAllocationHandle *handles,
                                            const gsize *sizes, gsize n, gsize size,
                                            MemresAllocation *alloc, GError **error);

/* vmm-ipc.c: the export_chunks and import_chunks slots, and their fabric pair. */
G_GNUC_INTERNAL gboolean _vmm_export_chunks (MemresResource *mr, const MemresAllocation *alloc,
                                             MemresBufferChunks *out, GError **error);
G_GNUC_INTERNAL gboolean _vmm_import_chunks (MemresResource *mr, const MemresBufferChunks *in,
                                             MemresStream stream, MemresAllocation *alloc,
                                             GError **error);
G_GNUC_INTERNAL gboolean _vmm_export_fabric_chunks (MemresResource *mr,
                                                    const MemresAllocation *alloc,
                                                    MemresBufferChunks *out,
                                                    MemresFabricHandle *handles, GError **error);
G_GNUC_INTERNAL gboolean _vmm_import_fabric_chunks (MemresResource *mr,
                                                    const MemresBufferChunks *in,
                                                    const MemresFabricHandle *handles,
                                                    MemresStream stream, MemresAllocation *alloc,
                                                    GError **error);

/* vmm-memory.c: one driver call per reservation of @buf over its bytes [start, end): cuMemUnmap
 * (VMM_UNMAP) or cuMemSetAccess with the resource's access (VMM_GRANT), in address order. Returns
 * the first failure; *@stop then says how far the calls got ([start, *stop) done). */
typedef enum
{
  VMM_UNMAP,
  VMM_GRANT,
} VmmSpanOp;
G_GNUC_INTERNAL CUresult _vmm_buffer_apply (VmmResource *self, const VmmBuffer *buf, VmmSpanOp op,
                                            gsize start, gsize end, gsize *stop);

/* vmm-memory.c: the address space and the physical memory of a buffer, each step undone when a
 * later one fails (vmm-buffer.c's slots and vmm-sleep.c build on them).
 *
 * Adjacent reservations in address order; offsets count from the first one's start. */
typedef struct
{
  const VmmRange *ranges;
  gsize n_ranges;
} VmmSpace;

/* Room for @n_more reservations in @buf's array of them. */
G_GNUC_INTERNAL gboolean _vmm_reserve_ranges (VmmBuffer *buf, gsize n_more, GError **error);
/* The reservations of @buf as a space. */
G_GNUC_INTERNAL VmmSpace _vmm_space_of (const VmmBuffer *buf);
/* Applies @op to the bytes [start, end) of @space, one driver call per reservation they lie in,
 * in address order (from the end when @backwards). Returns the first failure; *@stop then says
 * how far the calls got: [start, *stop) is done (with @backwards: [*stop, end)). */
G_GNUC_INTERNAL CUresult _vmm_space_apply (VmmResource *self, VmmSpace space, VmmSpanOp op,
                                           gsize start, gsize end, gboolean backwards, gsize *stop);
/* Grants the owner, the host location and the peers access to the mapped bytes [start, end). */
G_GNUC_INTERNAL gboolean _vmm_grant (VmmResource *self, VmmSpace space, gsize start, gsize end,
                                     GError **error);
/* Unmaps the bytes [start, end) of @space; a failure is warned about (a rollback's). */
G_GNUC_INTERNAL void _vmm_unmap_or_warn (VmmResource *self, VmmSpace space, gsize start, gsize end);
/* Reserves @size bytes of address space, at @hint if the driver grants it, into *@ptr. */
G_GNUC_INTERNAL gboolean _vmm_address_reserve (VmmResource *self, gsize size, CUdeviceptr hint,
                                               CUdeviceptr *ptr, GError **error);
/* Frees the reservation of @size bytes at @ptr; a failure is warned about. */
G_GNUC_INTERNAL void _vmm_address_free_or_warn (VmmResource *self, CUdeviceptr ptr, gsize size);
/* Frees the reservations of @buf, which hold no mapping. On failure reserves the ones already
 * freed again, so the reservations are as they were. */
G_GNUC_INTERNAL gboolean _vmm_free_ranges (VmmResource *self, VmmBuffer *buf, GError **error);
/* The index of the first chunk that starts at or after @offset (n_chunks when none does). */
G_GNUC_INTERNAL gsize _vmm_chunk_index (const VmmBuffer *buf, gsize offset);
/* Maps the existing chunks [first, last) of @buf at their offsets in @space. On failure unmaps
 * what it mapped. */
G_GNUC_INTERNAL gboolean _vmm_map_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space,
                                          gsize first, gsize last, GError **error);
/* Takes back the handles of the chunks [first, last), released while still mapped. */
G_GNUC_INTERNAL void _vmm_retain_chunks_or_warn (VmmResource *self, VmmBuffer *buf, gsize first,
                                                 gsize last);
/* Creates the physical memory for the bytes [buf->mapped, @end) of @space in chunks of at most
 * the resource's chunk size, none across a reservation boundary, and maps each one at its offset.
 * Appends the chunks to @buf (the caller made room for them) and leaves buf->mapped alone. On
 * failure releases what it created, leaving @buf as it was. Per chunk: one cuMemCreate and one
 * cuMemMap, nothing else. */
G_GNUC_INTERNAL gboolean _vmm_create_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space,
                                             gsize end, GError **error);
/* Undoes _vmm_create_chunks() after it succeeded: unmaps the chunks [first, n_chunks) from
 * @space and releases them. */
G_GNUC_INTERNAL void _vmm_destroy_chunks (VmmResource *self, VmmBuffer *buf, VmmSpace space,
                                          gsize first);
/* Maps the chunks of @buf in the bytes [start, end) where they were and grants access again:
 * undoes _vmm_unmap(). */
G_GNUC_INTERNAL void _vmm_remap_or_warn (VmmResource *self, VmmBuffer *buf, gsize start, gsize end);
/* Unmaps the bytes [start, end) of @buf, whose handles are held. On failure maps back what was
 * unmapped. */
G_GNUC_INTERNAL gboolean _vmm_unmap (VmmResource *self, VmmBuffer *buf, gsize start, gsize end,
                                     GError **error);

/* vmm-sleep.c: the sleep and wake slots */
G_GNUC_INTERNAL gboolean _vmm_sleep (MemresResource *mr, MemresAllocation *const *allocs,
                                     gsize n_allocs, GError **error);
G_GNUC_INTERNAL gboolean _vmm_wake (MemresResource *mr, MemresAllocation *const *allocs,
                                    gsize n_allocs, GError **error);
/* vmm-buffer.c: a segment event (memres_resource_raise_segment_event()) for the mapped bytes
 * [base, base + length) of @buf (its tag the segment's); nothing for 0 bytes (no segment). */
G_GNUC_INTERNAL void _vmm_raise (VmmResource *self, const VmmBuffer *buf, MemresSegmentEvent event,
                                 CUdeviceptr base, gsize length);
/* vmm-buffer.c: that segment into @seg; FALSE (@seg untouched) for 0 bytes. */
G_GNUC_INTERNAL gboolean _vmm_segment (VmmResource *self, const VmmBuffer *buf, CUdeviceptr base,
                                       gsize length, MemresSegment *seg);

/* vmm.c: @buf (of @size bytes now) added to, changed in or removed from the live buffers, and
 * @physical_delta bytes of physical memory counted, under stats_lock (what statistics and
 * snapshots read). */
typedef enum
{
  VMM_BUFFER_ADDED,
  VMM_BUFFER_CHANGED,
  VMM_BUFFER_REMOVED,
} VmmBufferChange;
G_GNUC_INTERNAL void _vmm_buffer_update (VmmResource *self, VmmBuffer *buf, gsize size,
                                         VmmBufferChange change, gint64 physical_delta);

/* A driver call @call failed with @res while @during ("rolling back a failure"): nothing else
 * can be done about it; warned about unless the driver shut down (process exit). */
static inline void
vmm_warn_call_failed (CUresult res, const char *call, const char *during)
{
  g_autoptr (GError) error = NULL;

  memres_cuda_set_error (&error, res, call);
  memres_cuda_warn_release_failure (error, "vmm: %s", during);
}

G_END_DECLS

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

/* vmm-buffer.c: one driver call per reservation of @buf over its bytes [start, end): cuMemUnmap
 * (VMM_UNMAP) or cuMemSetAccess with the resource's access (VMM_GRANT), in address order. Returns
 * the first failure; *@stop then says how far the calls got ([start, *stop) done). */
typedef enum
{
  VMM_UNMAP,
  VMM_GRANT,
} VmmSpanOp;
G_GNUC_INTERNAL CUresult _vmm_buffer_apply (VmmResource *self, const VmmBuffer *buf, VmmSpanOp op,
                                            gsize start, gsize end, gsize *stop);
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

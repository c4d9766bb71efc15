/* fakecuda-private.h: the state shared by the files of libfakecuda.so.
 *
 * Every entry point is a function `fk_<name>` with exactly the type cuda.h declares for <name>
 * (checked at compile time by FK_DECLARE), reached only through cuGetProcAddress. Every entry
 * point starts with FK_ENTER (count, trace, injected fault, initialization, then the global lock
 * is held) and leaves with FK_RETURN (drops the lock). */
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fakecuda-control.h"

/* memres-cuda.h for MEMRES_CUDA_FOREACH_ENTRY alone (its declarations need glib.h's headers;
 * the fake links neither glib nor memres) */
#define MEMRES_INSIDE
#include <memres/memres-cuda.h>
#undef MEMRES_INSIDE

#define FK_EXPORT __attribute__ ((visibility ("default")))

#define FK_MAX_DEVICES    8
#define FK_N_NUMA_NODES   1
#define FK_MAX_ATTRIBUTE  256
#define FK_POOL_ALIGN     512u
#define FK_MIB            (1024ull * 1024ull)
#define FK_GIB            (1024ull * FK_MIB)
#define FK_DRIVER_VERSION 13000

/* Every entry point the fake serves through cuGetProcAddress (base names, as cuda.h spells them
 * before its _v2 renames): every one of the table memres resolves (MEMRES_CUDA_FOREACH_ENTRY,
 * memres-cuda.h), then the ones outside that table, which tests call directly
 * (FK_FOREACH_EXTRA_ENTRY). */
#define FK_FOREACH_ENTRY(X)                                                                        \
  MEMRES_CUDA_FOREACH_ENTRY (X)                                                                    \
  FK_FOREACH_EXTRA_ENTRY (X)
#define FK_FOREACH_EXTRA_ENTRY(X)                                                                  \
  X (cuMemGetAddressRange)                                                                         \
  X (cuMemcpyHtoD)                                                                                 \
  X (cuMemcpyDtoH)                                                                                 \
  X (cuMemcpyDtoD)                                                                                 \
  X (cuMemcpyDtoDAsync)                                                                            \
  X (cuMemsetD8)                                                                                   \
  X (cuMemsetD32)                                                                                  \
  X (cuDeviceSetMemPool)                                                                           \
  X (cuMemGetDefaultMemPool)                                                                       \
  X (cuStreamWaitValue32)                                                                          \
  X (cuStreamWriteValue32)                                                                         \
  X (cuLaunchHostFunc)

/* Entry points: the ones above plus cuGetProcAddress itself (counted, traced and failable, but
 * not handed out by itself). */
typedef enum
{
#define FK_ENUM_(name) FK_E_##name,
  FK_FOREACH_ENTRY (FK_ENUM_)
#undef FK_ENUM_
      FK_E_cuGetProcAddress,
  FK_N_ENTRIES
} FkEntry;

#define FK_DECLARE_(name) extern __typeof__ (name) fk_##name;
FK_FOREACH_ENTRY (FK_DECLARE_)
#undef FK_DECLARE_

#define FK_MAGIC_CTX    0x46435458u
#define FK_MAGIC_STREAM 0x46535452u
#define FK_MAGIC_EVENT  0x46455654u
#define FK_MAGIC_POOL   0x46504f4cu
#define FK_MAGIC_GRAPH  0x46475250u

struct CUctx_st
{
  uint32_t magic;
  int device;
  int primary_refs;
};

typedef struct CUmemPoolHandle_st FkPool;

typedef struct
{
  char name[64];
  CUuuid uuid;
  size_t total; /* bytes of device memory */
  size_t used;  /* bytes of physical device memory in use (cuMemAlloc, pool chunks, cuMemCreate) */
  bool attr_set[FK_MAX_ATTRIBUTE];
  int attr_value[FK_MAX_ATTRIBUTE];
  struct CUctx_st ctx;
  FkPool *default_pool;
  FkPool *current_pool;
  struct CUstream_st *legacy; /* the legacy default stream's queue (asynchronous mode) */
} FkDevice;

/* Kinds of live address ranges in the range table. */
typedef enum
{
  FK_RANGE_ALLOC,       /* cuMemAlloc */
  FK_RANGE_HOST_ALLOC,  /* cuMemHostAlloc */
  FK_RANGE_POOL_ALLOC,  /* pool allocation or imported pool pointer */
  FK_RANGE_RESERVATION, /* cuMemAddressReserve */
  FK_RANGE_GRAPH_ALLOC, /* an allocation node's address (fakecuda-graph.c) */
  FK_RANGE_MANAGED,     /* cuMemAllocManaged (fakecuda-managed.c) */
} FkRangeKind;

typedef struct
{
  uintptr_t base;
  size_t size;
  FkRangeKind kind;
  void *obj;
} FkRange;

typedef struct
{
  uintptr_t base;
  size_t size;
  int device;     /* owner device (cuMemAlloc) or context device (cuMemHostAlloc) */
  unsigned flags; /* cuMemHostAlloc flags */
  unsigned long long id;
} FkAlloc;

typedef struct
{
  pthread_mutex_t lock;
  bool loaded;      /* environment read (library constructor) */
  bool initialized; /* cuInit succeeded */
  int n_devices;
  FkDevice devices[FK_MAX_DEVICES];
  FkPool *host_pool;                   /* default pool of CU_MEM_LOCATION_TYPE_HOST */
  FkPool *numa_pools[FK_N_NUMA_NODES]; /* default pools of CU_MEM_LOCATION_TYPE_HOST_NUMA */
  size_t host_total; /* bytes of "host" memory the fake lets pools and pinned use */
  size_t host_used;
  size_t granularity;
  size_t recommended_granularity;
  size_t pool_spread;         /* FAKECUDA_POOL_SPREAD: a pool chunk's place rounded up to it */
  uintptr_t pool_spread_next; /* where the next pool chunk is placed when pool_spread is set */
  bool no_peer;
  FakeCudaCounts counts;
  unsigned long long next_id;
  bool async; /* stream work is queued to a worker per stream (fakecuda_set_async) */
} FkState;

extern FkState fk;

/* Entry/exit of every entry point. */
CUresult fk_enter (FkEntry entry, bool needs_init);
CUresult fk_leave (CUresult result);
#define FK_ENTER_(entry, needs_init)                                                               \
  do                                                                                               \
    {                                                                                              \
      CUresult fk_enter_result_ = fk_enter (entry, needs_init);                                    \
      if (fk_enter_result_ != CUDA_SUCCESS)                                                        \
        return fk_enter_result_;                                                                   \
    }                                                                                              \
  while (0)
/* (The name is pasted at once: cuda.h renames several entry points with macros.) */
#define FK_ENTER(name)         FK_ENTER_ (FK_E_##name, true)
#define FK_ENTER_NO_INIT(name) FK_ENTER_ (FK_E_##name, false)
#define FK_RETURN(result)      return fk_leave (result)

/* fakecuda-device.c */
void fk_devices_init (void);
int fk_device_attribute (int device, int attr);
bool fk_device_valid (int device);
bool fk_can_access_peer (int device, int peer);
CUcontext fk_current_context (void);
/* Resolves @stream (NULL, legacy and per-thread handles included) to its device. */
CUresult fk_stream_device (CUstream stream, int *device);
/* Like fk_stream_device, and fails for a stream being captured. */
CUresult fk_stream_for_work (CUstream stream, int *device);
const char *fk_entry_name (FkEntry entry);

/* fakecuda-stream.c: streams, events, graphs and the asynchronous mode. */
/* Synchronization point: pools release memory above their release threshold. */
void fk_sync_point (void);
/* Work a stream runs in order: at once in the synchronous mode, by the stream's worker thread
 * in the asynchronous one. */
typedef enum
{
  FK_OP_COPY,
  FK_OP_FILL,
  FK_OP_FREE,
} FkOpKind;
typedef struct
{
  FkOpKind kind;
  int device; /* the stream's device: whose access the copy or fill needs */
  uintptr_t dst, src;
  size_t n;       /* copy: bytes; fill: elements */
  size_t width;   /* fill: bytes per element (1, 2, 4) */
  uint32_t value; /* fill */
} FkWork;
/* Submits @work, checked by the caller, to @stream (resolved with fk_stream_for_work to
 * @device); the synchronous mode runs it now and returns its result. */
CUresult fk_stream_submit (CUstream stream, int device, const FkWork *work);
/* Before a call that is synchronous with the legacy stream (cuMemcpy, cuMemsetD8, cuMemFree):
 * waits, in the asynchronous mode, until the legacy stream of the current context and the
 * blocking streams ordered before it have run their work. Returns a sticky error of theirs. */
CUresult fk_legacy_drain (void);

/* fakecuda-arena.c: the address space of "device" memory. */
bool fk_arena_init (void);
bool fk_arena_contains (uintptr_t addr, size_t size);
/* Reserves @size bytes (a multiple of the page size) of address space aligned to @align,
 * at @hint (page aligned) when that is free (0: anywhere); @vmm places it in the VMM zone with room
 * after it. */
uintptr_t fk_va_alloc (size_t size, size_t align, uintptr_t hint, bool vmm);
void fk_va_free (uintptr_t base, size_t size);
/* Backing: anonymous read-write memory, a shared file mapping, or back to inaccessible. */
bool fk_va_back_anonymous (uintptr_t base, size_t size);
bool fk_va_back_fd (uintptr_t base, size_t size, int fd, uint64_t offset, bool accessible);
void fk_va_unback (uintptr_t base, size_t size);
size_t fk_page_size (void);

/* fakecuda-memory.c: the range table and access checks. */
bool fk_range_add (uintptr_t base, size_t size, FkRangeKind kind, void *obj);
void fk_range_remove (uintptr_t base);
FkRange *fk_range_find (uintptr_t addr);
/* Checks that [addr, addr+size) may be read (or written) by work of @device (-1: the host). */
CUresult fk_check_access (uintptr_t addr, size_t size, int device, bool write);
/* Copy and fill checks and execution (the stream worker runs them again for queued work). */
CUresult fk_copy_check (uintptr_t dst, uintptr_t src, size_t n, int *device);
CUresult fk_fill_check (uintptr_t dst, size_t width, size_t count, int device);
void fk_work_execute (const FkWork *work);
/* Device index of memory, or -1 for host memory; for memory type queries. */
int fk_memory_device (uintptr_t addr);
size_t fk_round_up (size_t value, size_t multiple);
bool fk_is_power_of_two (size_t value);

/* fakecuda-pool.c */
void fk_pools_init (void);
void fk_pools_release_above_threshold (void);
bool fk_pool_valid (FkPool *pool);
/* Frees a pool allocation or an imported pointer starting at @ptr; @queued: the free that
 * cuMemFreeAsync queued (fk_pool_queue_free) in the asynchronous mode. */
CUresult fk_pool_free (uintptr_t ptr, bool queued);
/* Checks that @ptr starts a pool allocation with no free queued and marks it queued. */
CUresult fk_pool_queue_free (uintptr_t ptr);
/* Whether [addr, addr+size) lies in a live chunk of a pool (backed memory, even if no live
 * allocation holds it any more: what a late write of a queued operation lands in). */
bool fk_pools_backed (uintptr_t addr, size_t size);
/* Whether @device may access pool allocation memory (@write: for writing). */
bool fk_pool_alloc_accessible (void *alloc, int device, bool write);
int fk_pool_alloc_device (void *alloc);
/* Whether @fd is a memfd the fake keeps (not one it handed out). */
bool fk_pools_own_fd (int fd);
CUmemoryPool fk_pool_alloc_pool (void *alloc);

/* fakecuda-vmm.c */
CUresult fk_reservation_check (void *reservation, uintptr_t addr, size_t size, int device,
                               bool write);
/* Mapping queries for pointer attributes: FALSE when @addr is not mapped. */
bool fk_reservation_lookup (void *reservation, uintptr_t addr, int *device, bool *host,
                            uintptr_t *map_base, size_t *map_size);

bool fk_handles_own_fd (int fd);

/* fakecuda-graph.c: stream capture records nodes into the capturing stream's graph. */
struct CUgraph_st *fk_graph_new (int device);
void fk_graph_free (struct CUgraph_st *graph);
CUresult fk_graph_capture_alloc (struct CUgraph_st *graph, size_t size, uintptr_t *out);
CUresult fk_graph_capture_free (struct CUgraph_st *graph, uintptr_t ptr);
CUresult fk_graph_capture_memset (struct CUgraph_st *graph, uintptr_t dst, uint32_t value,
                                  size_t width, size_t count);
CUresult fk_graph_capture_copy (struct CUgraph_st *graph, uintptr_t dst, uintptr_t src, size_t n);
/* cuMemFreeAsync/cuMemFree of a graph allocation outside a capture. */
CUresult fk_graph_free_outside (uintptr_t ptr);
bool fk_graph_alloc_accessible (void *alloc, int device);
int fk_graph_alloc_device (void *alloc);
bool fk_graph_alloc_is_live (void *alloc);
/* fakecuda-stream.c: the graph @stream is capturing into, or NULL (not a stream, or not
 * capturing). */
struct CUgraph_st *fk_stream_capture_graph (CUstream stream);
/* fakecuda-stream.c: in the asynchronous mode waits until @stream (of @device) ran what is
 * queued on it (a graph launch then runs in the call, in the stream's order); returns its sticky
 * error. */
CUresult fk_stream_wait_queue (CUstream stream, int device);
/* fakecuda-memory.c: a copy or fill by @device's work (-1: the host), every byte checked. */
CUresult fk_copy (uintptr_t dst, uintptr_t src, size_t n, int device);
CUresult fk_fill (uintptr_t dst, uint32_t value, size_t width, size_t count, int device);

/* fakecuda-managed.c. A managed allocation's advice record: fk_managed_track() makes one for
 * an allocation of a managed pool (fakecuda-pool.c), fk_managed_untrack() drops it at its free;
 * cuMemAllocManaged's own ranges (FK_RANGE_MANAGED, obj an FkManaged) are freed with
 * fk_managed_free(). */
typedef struct FkManaged FkManaged;
bool fk_managed_track (uintptr_t base, size_t size, int device);
void fk_managed_untrack (uintptr_t base);
void fk_managed_free (FkRange *r);
int fk_managed_device (void *obj);
/* Whether @device can have managed pools: memory pools, managed memory and concurrent managed
 * access. */
bool fk_managed_pools_supported (int device);
/* fakecuda-pool.c: whether a pool allocation (an FkRange obj) is of a managed pool. */
bool fk_pool_alloc_is_managed (void *alloc);

/* fakecuda.c */
void fk_track_exported_fd (int fd);
CUresult fk_parse_result (const char *text, bool *ok);

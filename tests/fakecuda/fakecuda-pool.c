/* fakecuda-pool.c: memory pools and stream-ordered allocation (cuMemPool*, cuMemAllocAsync,
 * cuMemAllocFromPoolAsync, cuMemFreeAsync), including pool IPC.
 *
 * A pool reserves backing memory in chunks (multiples of 2 MiB) and
 * places allocations (rounded to 512 bytes) first-fit inside them. Freed space stays reserved;
 * at a synchronization point (stream, event or context synchronize) a pool holding more than its
 * release threshold releases free chunks until it holds no more than the threshold;
 * cuMemPoolTrimTo releases free chunks down to its argument. A pool created with
 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (or CU_MEM_HANDLE_TYPE_FABRIC) keeps its chunks in one
 * sparse memfd (named after the pool so that an importer can find the pool's identity and
 * device), exported as a dup of that fd, or as a fabric handle that names the exporting process,
 * the memfd and its inode (FkPoolFabric: the host's processes are the namespace, as for VMM
 * fabric handles); an exported pointer is its offset in the memfd. */
#include "fakecuda-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct FkChunk FkChunk;
typedef struct FkPoolAlloc FkPoolAlloc;

struct FkPoolAlloc
{
  FkPoolAlloc *next; /* in the chunk (sorted by base) or in the pool's imports */
  FkPool *pool;
  FkChunk *chunk; /* NULL for an imported pointer */
  uintptr_t base;
  size_t size;  /* bytes asked for */
  size_t rsize; /* bytes taken, a multiple of FK_POOL_ALIGN */
  uint64_t fd_offset;
  uintptr_t map_base; /* imported pointer: the pages mapped */
  size_t map_size;
  bool free_queued; /* cuMemFreeAsync queued its free (asynchronous mode) */
};

struct FkChunk
{
  FkChunk *next; /* sorted by fd_offset */
  uintptr_t va;
  size_t size;
  uint64_t fd_offset;
  FkPoolAlloc *allocs;
  int n_allocs;
};

struct CUmemPoolHandle_st
{
  uint32_t magic;
  FkPool *next;
  CUmemPoolProps props;
  int device; /* -1 for host pools */
  bool is_default, imported, destroyed;
  size_t max_size;
  cuuint64_t release_threshold;
  int reuse[3];
  size_t reserved, reserved_high, used, used_high;
  CUmemAccess_flags access[FK_MAX_DEVICES];
  int memfd; /* -1 unless IPC capable or imported */
  size_t fd_size;
  uint8_t identity[16];
  FkChunk *chunks;
  FkPoolAlloc *imports;
  int n_allocs; /* live allocations, imports counted once per import */
};

#define FK_POOL_CHUNK     (2 * FK_MIB)  /* pools reserve backing memory in multiples of this */
#define FK_POOL_MAX_ROUND (32 * FK_MIB) /* created pools: maxSize rounded up to this */
#define FK_POOL_FD_BASE   (2 * FK_MIB)  /* first chunk offset in a pool memfd */
#define FK_PTR_MAGIC      "FKPOOLP1"

static FkPool *fk_pools;

static void
fk_hex (char *out, const uint8_t *bytes, size_t n)
{
  for (size_t i = 0; i < n; i++)
    sprintf (out + 2 * i, "%02x", bytes[i]);
}

static bool
fk_unhex (uint8_t *bytes, const char *in, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      unsigned v;
      if (sscanf (in + 2 * i, "%2x", &v) != 1)
        return false;
      bytes[i] = (uint8_t) v;
    }
  return true;
}

static void
fk_random (uint8_t *bytes, size_t n)
{
  static unsigned long long counter;
  int fd = open ("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read (fd, bytes, n) != (ssize_t) n)
    for (size_t i = 0; i < n; i++)
      bytes[i] = (uint8_t) ((getpid () * 131 + ++counter * 7919) >> (i % 8));
  if (fd >= 0)
    close (fd);
}

static size_t *
fk_pool_used_counter (FkPool *pool, size_t *total)
{
  if (pool->device >= 0)
    {
      *total = fk.devices[pool->device].total;
      return &fk.devices[pool->device].used;
    }
  *total = fk.host_total;
  return &fk.host_used;
}

static FkPool *
fk_pool_new (const CUmemPoolProps *props, int device)
{
  FkPool *pool = calloc (1, sizeof *pool);
  if (pool == NULL)
    return NULL;
  pool->magic = FK_MAGIC_POOL;
  pool->props = *props;
  pool->device = device;
  pool->reuse[0] = pool->reuse[1] = pool->reuse[2] = 1;
  pool->memfd = -1;
  if (device >= 0)
    pool->access[device] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  fk_random (pool->identity, sizeof pool->identity);
  pool->next = fk_pools;
  fk_pools = pool;
  return pool;
}

static void
fk_pool_unlink (FkPool *pool)
{
  for (FkPool **p = &fk_pools; *p; p = &(*p)->next)
    if (*p == pool)
      {
        *p = pool->next;
        break;
      }
}

static FkPool *
fk_default_pool_new_of_type (CUmemLocationType type, int id, CUmemAllocationType alloc_type)
{
  CUmemPoolProps props = { 0 };
  FkPool *pool;

  props.allocType = alloc_type;
  props.location.type = type;
  props.location.id = id;
  pool = fk_pool_new (&props, type == CU_MEM_LOCATION_TYPE_DEVICE ? id : -1);
  if (pool == NULL)
    abort ();
  pool->is_default = true;
  pool->max_size = type == CU_MEM_LOCATION_TYPE_DEVICE ? fk.devices[id].total : fk.host_total;
  return pool;
}

static FkPool *
fk_default_pool_new (CUmemLocationType type, int id)
{
  return fk_default_pool_new_of_type (type, id, CU_MEM_ALLOCATION_TYPE_PINNED);
}

/* The default managed pools, made on first use: no location, the host, each host NUMA node,
 * each device. */
static FkPool *fk_managed_defaults[2 + FK_N_NUMA_NODES + FK_MAX_DEVICES];

static bool
fk_is_managed (const FkPool *pool)
{
  return pool->props.allocType == CU_MEM_ALLOCATION_TYPE_MANAGED;
}

bool
fk_pool_alloc_is_managed (void *alloc)
{
  return fk_is_managed (((FkPoolAlloc *) alloc)->pool);
}

/* The device whose attributes decide managed pools at a location without a device. */
static int
fk_managed_context_device (void)
{
  CUcontext ctx = fk_current_context ();

  return ctx != NULL ? ctx->device : 0;
}

/* Checks a managed pool's location; stores the device it belongs to (-1: none) and the slot of
 * its default pool in fk_managed_defaults. */
static CUresult
fk_managed_location (const CUmemLocation *location, int *device, size_t *slot)
{
  int check;

  *device = -1;
  switch (location->type)
    {
    case CU_MEM_LOCATION_TYPE_NONE:
      *slot = 0;
      check = fk_managed_context_device ();
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
      *slot = 1;
      check = fk_managed_context_device ();
      break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (location->id < 0 || location->id >= FK_N_NUMA_NODES)
        return CUDA_ERROR_INVALID_VALUE;
      *slot = 2 + (size_t) location->id;
      check = fk_managed_context_device ();
      break;
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!fk_device_valid (location->id))
        return CUDA_ERROR_INVALID_DEVICE;
      *slot = 2 + FK_N_NUMA_NODES + (size_t) location->id;
      *device = check = location->id;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
  return fk_managed_pools_supported (check) ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

void
fk_pools_init (void)
{
  for (int i = 0; i < fk.n_devices; i++)
    {
      fk.devices[i].default_pool = fk_default_pool_new (CU_MEM_LOCATION_TYPE_DEVICE, i);
      fk.devices[i].current_pool = fk.devices[i].default_pool;
    }
  fk.host_pool = fk_default_pool_new (CU_MEM_LOCATION_TYPE_HOST, 0);
  for (int i = 0; i < FK_N_NUMA_NODES; i++)
    fk.numa_pools[i] = fk_default_pool_new (CU_MEM_LOCATION_TYPE_HOST_NUMA, i);
}

bool
fk_pool_valid (FkPool *pool)
{
  if (pool == NULL)
    return false;
  for (FkPool *p = fk_pools; p; p = p->next)
    if (p == pool)
      return !p->destroyed;
  return false;
}

bool
fk_pools_own_fd (int fd)
{
  for (FkPool *p = fk_pools; p; p = p->next)
    if (p->memfd == fd)
      return true;
  return false;
}

/* Chunks */

static void
fk_chunk_release (FkPool *pool, FkChunk *chunk)
{
  size_t total;
  size_t *used = fk_pool_used_counter (pool, &total);

  for (FkChunk **p = &pool->chunks; *p; p = &(*p)->next)
    if (*p == chunk)
      {
        *p = chunk->next;
        break;
      }
  fk_va_free (chunk->va, chunk->size);
  if (pool->memfd >= 0)
    fallocate (pool->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t) chunk->fd_offset,
               (off_t) chunk->size);
  pool->reserved -= chunk->size;
  *used -= chunk->size;
  free (chunk);
}

/* Releases free chunks while the pool keeps at least @keep reserved bytes after each one. */
static void
fk_pool_trim (FkPool *pool, size_t keep)
{
  FkChunk *c = pool->chunks;
  while (c != NULL)
    {
      FkChunk *next = c->next;
      if (c->n_allocs == 0 && pool->reserved - c->size >= keep)
        fk_chunk_release (pool, c);
      c = next;
    }
}

void
fk_pools_release_above_threshold (void)
{
  for (FkPool *p = fk_pools; p; p = p->next)
    if (!p->imported && p->reserved > p->release_threshold)
      {
        FkChunk *c = p->chunks;
        while (c != NULL && p->reserved > p->release_threshold)
          {
            FkChunk *next = c->next;
            if (c->n_allocs == 0)
              fk_chunk_release (p, c);
            c = next;
          }
      }
}

/* Offset for a new chunk of @size bytes in the pool's memfd; 0 when full. */
static uint64_t
fk_chunk_fd_offset (FkPool *pool, size_t size, FkChunk ***link)
{
  uint64_t candidate = FK_POOL_FD_BASE;
  FkChunk **p = &pool->chunks;

  for (; *p; p = &(*p)->next)
    {
      if ((*p)->fd_offset - candidate >= size && (*p)->fd_offset >= candidate)
        break;
      candidate = (*p)->fd_offset + (*p)->size;
    }
  *link = p;
  if (candidate + size > pool->fd_size)
    return 0;
  return candidate;
}

static FkChunk *
fk_chunk_new (FkPool *pool, size_t size)
{
  size_t total;
  size_t *used = fk_pool_used_counter (pool, &total);
  FkChunk *chunk, **link = &pool->chunks;
  uint64_t offset = 0;
  uintptr_t va;

  if (pool->reserved + size > pool->max_size || pool->reserved + size < size
      || size > total - *used)
    return NULL;
  if (pool->memfd >= 0)
    {
      offset = fk_chunk_fd_offset (pool, size, &link);
      if (offset == 0)
        return NULL;
    }
  else
    while (*link)
      link = &(*link)->next;
  chunk = calloc (1, sizeof *chunk);
  if (chunk == NULL)
    return NULL;
  /* FAKECUDA_POOL_SPREAD: each chunk from the next multiple of the spread after the last one
   * (a hint: first fit where that is taken or past the arena), the chunks of a pool as far apart
   * as a real driver may put them rather than side by side */
  va = fk_va_alloc (size, FK_POOL_CHUNK, fk.pool_spread ? fk.pool_spread_next : 0, false);
  if (va != 0 && fk.pool_spread != 0)
    fk.pool_spread_next = fk_round_up (va + size, fk.pool_spread);
  if (va == 0
      || !(pool->memfd >= 0 ? fk_va_back_fd (va, size, pool->memfd, offset, true)
                            : fk_va_back_anonymous (va, size)))
    {
      if (va != 0)
        fk_va_free (va, size);
      free (chunk);
      return NULL;
    }
  chunk->va = va;
  chunk->size = size;
  chunk->fd_offset = offset;
  chunk->next = *link;
  *link = chunk;
  pool->reserved += size;
  if (pool->reserved > pool->reserved_high)
    pool->reserved_high = pool->reserved;
  *used += size;
  return chunk;
}

/* First fit of @rsize bytes in @chunk; links the allocation in. */
static bool
fk_chunk_place (FkChunk *chunk, FkPoolAlloc *a)
{
  uintptr_t candidate = chunk->va;
  FkPoolAlloc **p = &chunk->allocs;

  for (; *p; p = &(*p)->next)
    {
      if ((*p)->base - candidate >= a->rsize)
        break;
      candidate = (*p)->base + (*p)->rsize;
    }
  if (candidate + a->rsize > chunk->va + chunk->size)
    return false;
  a->base = candidate;
  a->chunk = chunk;
  a->fd_offset = chunk->fd_offset + (candidate - chunk->va);
  a->next = *p;
  *p = a;
  chunk->n_allocs++;
  return true;
}

static CUresult
fk_pool_alloc (FkPool *pool, size_t size, uintptr_t *out)
{
  size_t rsize = fk_round_up (size, FK_POOL_ALIGN);
  FkPoolAlloc *a;
  bool placed = false;

  if (rsize == 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  a = calloc (1, sizeof *a);
  if (a == NULL)
    return CUDA_ERROR_OUT_OF_MEMORY;
  a->pool = pool;
  a->size = size;
  a->rsize = rsize;
  for (FkChunk *c = pool->chunks; c && !placed; c = c->next)
    placed = fk_chunk_place (c, a);
  if (!placed)
    {
      size_t csize = fk_round_up (rsize, FK_POOL_CHUNK);
      FkChunk *c = csize ? fk_chunk_new (pool, csize) : NULL;
      if (c == NULL && csize != 0)
        {
          /* Out of room: give back what the pool holds unused, then try again. */
          fk_pool_trim (pool, 0);
          c = fk_chunk_new (pool, csize);
        }
      placed = c != NULL && fk_chunk_place (c, a);
    }
  if (!placed || !fk_range_add (a->base, size, FK_RANGE_POOL_ALLOC, a))
    {
      if (placed)
        {
          FkChunk *c = a->chunk;
          for (FkPoolAlloc **p = &c->allocs; *p; p = &(*p)->next)
            if (*p == a)
              {
                *p = a->next;
                break;
              }
          c->n_allocs--;
        }
      free (a);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  pool->used += rsize;
  if (pool->used > pool->used_high)
    pool->used_high = pool->used;
  pool->n_allocs++;
  fk.counts.pool_allocations++;
  *out = a->base;
  if (fk_is_managed (pool) && !fk_managed_track (a->base, size, pool->device))
    {
      fk_pool_free (a->base, false);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  return CUDA_SUCCESS;
}

static void
fk_pool_finalize (FkPool *pool)
{
  while (pool->chunks)
    fk_chunk_release (pool, pool->chunks);
  if (pool->memfd >= 0)
    close (pool->memfd);
  fk_pool_unlink (pool);
  pool->magic = 0;
  free (pool);
  fk.counts.pools--;
}

static FkPoolAlloc *
fk_pool_alloc_at (uintptr_t ptr)
{
  FkRange *r = fk_range_find (ptr);

  if (r == NULL || r->base != ptr || r->kind != FK_RANGE_POOL_ALLOC)
    return NULL;
  return r->obj;
}

CUresult
fk_pool_queue_free (uintptr_t ptr)
{
  FkPoolAlloc *a = fk_pool_alloc_at (ptr);

  if (a == NULL || a->free_queued)
    return CUDA_ERROR_INVALID_VALUE;
  a->free_queued = true;
  return CUDA_SUCCESS;
}

bool
fk_pools_backed (uintptr_t addr, size_t size)
{
  for (FkPool *p = fk_pools; p; p = p->next)
    for (FkChunk *c = p->chunks; c; c = c->next)
      if (addr >= c->va && addr - c->va <= c->size && size <= c->size - (addr - c->va))
        return true;
  return false;
}

CUresult
fk_pool_free (uintptr_t ptr, bool queued)
{
  FkPoolAlloc *a = fk_pool_alloc_at (ptr);
  FkPool *pool;

  if (a == NULL || a->free_queued != queued)
    return CUDA_ERROR_INVALID_VALUE;
  pool = a->pool;
  if (fk_is_managed (pool))
    fk_managed_untrack (ptr);
  fk.counts.pool_allocations--;
  pool->n_allocs--;
  if (a->chunk == NULL)
    {
      /* An imported pointer: unmapped at its first free, however often it was imported. */
      fk_range_remove (ptr);
      fk_va_free (a->map_base, a->map_size);
      for (FkPoolAlloc **p = &pool->imports; *p; p = &(*p)->next)
        if (*p == a)
          {
            *p = a->next;
            break;
          }
      pool->used -= a->rsize;
    }
  else
    {
      FkChunk *c = a->chunk;
      fk_range_remove (ptr);
      for (FkPoolAlloc **p = &c->allocs; *p; p = &(*p)->next)
        if (*p == a)
          {
            *p = a->next;
            break;
          }
      c->n_allocs--;
      pool->used -= a->rsize;
    }
  free (a);
  if (pool->destroyed && pool->n_allocs == 0)
    fk_pool_finalize (pool);
  return CUDA_SUCCESS;
}

bool
fk_pool_alloc_accessible (void *alloc, int device, bool write)
{
  FkPool *pool = ((FkPoolAlloc *) alloc)->pool;
  CUmemAccess_flags need
      = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
  if (fk_is_managed (pool))
    return true;
  if (device < 0)
    return pool->device < 0;
  return (pool->access[device] & need) == need;
}

int
fk_pool_alloc_device (void *alloc)
{
  return ((FkPoolAlloc *) alloc)->pool->device;
}

CUmemoryPool
fk_pool_alloc_pool (void *alloc)
{
  return ((FkPoolAlloc *) alloc)->pool;
}

/* Entry points */

static bool
fk_pools_supported (int device)
{
  return fk_device_attribute (device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0;
}

static bool
fk_host_pools_supported (bool numa)
{
  for (int i = 0; i < fk.n_devices; i++)
    if (fk_device_attribute (i, numa ? CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED
                                     : CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED))
      return true;
  return false;
}

CUresult
fk_cuDeviceGetDefaultMemPool (CUmemoryPool *pool_out, CUdevice dev)
{
  FK_ENTER (cuDeviceGetDefaultMemPool);
  if (pool_out == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  if (!fk_pools_supported (dev))
    FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
  *pool_out = fk.devices[dev].default_pool;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceGetMemPool (CUmemoryPool *pool, CUdevice dev)
{
  FK_ENTER (cuDeviceGetMemPool);
  if (pool == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  if (!fk_pools_supported (dev))
    FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
  *pool = fk.devices[dev].current_pool;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuDeviceSetMemPool (CUdevice dev, CUmemoryPool pool)
{
  FK_ENTER (cuDeviceSetMemPool);
  if (!fk_device_valid (dev))
    FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
  if (!fk_pool_valid (pool) || pool->imported || pool->device != dev)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  fk.devices[dev].current_pool = pool;
  FK_RETURN (CUDA_SUCCESS);
}

/* The default (or current) pool of @location. */
static CUresult
fk_location_pool (CUmemoryPool *pool, const CUmemLocation *location, CUmemAllocationType type,
                  bool current)
{
  if (pool == NULL || location == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  if (type == CU_MEM_ALLOCATION_TYPE_MANAGED)
    {
      int device;
      size_t slot;
      CUresult r = fk_managed_location (location, &device, &slot);

      if (r != CUDA_SUCCESS)
        return r;
      if (fk_managed_defaults[slot] == NULL)
        fk_managed_defaults[slot]
            = fk_default_pool_new_of_type (location->type, location->id, type);
      *pool = fk_managed_defaults[slot];
      return CUDA_SUCCESS;
    }
  if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
    return CUDA_ERROR_INVALID_VALUE;
  switch (location->type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!fk_device_valid (location->id))
        return CUDA_ERROR_INVALID_DEVICE;
      if (!fk_pools_supported (location->id))
        return CUDA_ERROR_NOT_SUPPORTED;
      *pool
          = current ? fk.devices[location->id].current_pool : fk.devices[location->id].default_pool;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
      if (!fk_host_pools_supported (false))
        return CUDA_ERROR_NOT_SUPPORTED;
      *pool = fk.host_pool;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (location->id < 0 || location->id >= FK_N_NUMA_NODES)
        return CUDA_ERROR_INVALID_VALUE;
      if (!fk_host_pools_supported (true))
        return CUDA_ERROR_NOT_SUPPORTED;
      *pool = fk.numa_pools[location->id];
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult
fk_cuMemGetMemPool (CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
  FK_ENTER (cuMemGetMemPool);
  FK_RETURN (fk_location_pool (pool, location, type, true));
}

CUresult
fk_cuMemGetDefaultMemPool (CUmemoryPool *pool_out, CUmemLocation *location,
                           CUmemAllocationType type)
{
  FK_ENTER (cuMemGetDefaultMemPool);
  FK_RETURN (fk_location_pool (pool_out, location, type, false));
}

static bool
fk_all_zero (const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0)
      return false;
  return true;
}

/* Creates the memfd of an IPC capable pool. */
static bool
fk_pool_make_memfd (FkPool *pool)
{
  char name[160], id[33], uuid[33];
  int fd;

  fk_hex (id, pool->identity, 16);
  if (pool->device >= 0)
    fk_hex (uuid, (const uint8_t *) fk.devices[pool->device].uuid.bytes, 16);
  else
    snprintf (uuid, sizeof uuid, "host");
  snprintf (name, sizeof name, "fakecuda-pool:%s:%s:%d:%d", id, uuid,
            (int) pool->props.location.type, pool->props.location.id);
  fd = memfd_create (name, MFD_CLOEXEC);
  if (fd < 0)
    return false;
  pool->fd_size = FK_POOL_FD_BASE + fk_round_up (pool->max_size, FK_POOL_CHUNK);
  if (ftruncate (fd, (off_t) pool->fd_size) != 0)
    {
      close (fd);
      return false;
    }
  pool->memfd = fd;
  return true;
}

CUresult
fk_cuMemPoolCreate (CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
  int device = -1;
  size_t max_default;
  unsigned handle_types;
  FkPool *p;

  FK_ENTER (cuMemPoolCreate);
  if (pool != NULL && poolProps != NULL && poolProps->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED)
    {
      size_t slot;
      CUresult r;

      /* managed pools: no handle types, no maxSize (cuda.h) */
      if (poolProps->handleTypes != 0 || poolProps->maxSize != 0
          || poolProps->win32SecurityAttributes != NULL
          || !fk_all_zero (poolProps->reserved, sizeof poolProps->reserved)
          || poolProps->usage != 0)
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      if ((r = fk_managed_location (&poolProps->location, &device, &slot)) != CUDA_SUCCESS)
        FK_RETURN (r);
      p = fk_pool_new (poolProps, device);
      if (p == NULL)
        FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
      p->max_size = device >= 0 ? fk.devices[device].total : fk.host_total;
      fk.counts.pools++;
      *pool = p;
      FK_RETURN (CUDA_SUCCESS);
    }
  if (pool == NULL || poolProps == NULL || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED
      || poolProps->win32SecurityAttributes != NULL
      || !fk_all_zero (poolProps->reserved, sizeof poolProps->reserved)
      || (poolProps->usage & ~CU_MEM_POOL_CREATE_USAGE_HW_DECOMPRESS) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  handle_types = poolProps->handleTypes;
  if ((handle_types
       & ~(unsigned) (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC))
      != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  switch (poolProps->location.type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      device = poolProps->location.id;
      if (!fk_device_valid (device))
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      if (!fk_pools_supported (device))
        FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
      if ((handle_types
           & (unsigned) fk_device_attribute (device,
                                             CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES))
          != handle_types)
        FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
      max_default = fk.devices[device].total;
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
      if (handle_types != 0)
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      if (!fk_host_pools_supported (false))
        FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
      max_default = fk.host_total;
      break;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (poolProps->location.id < 0 || poolProps->location.id >= FK_N_NUMA_NODES)
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      if (!fk_host_pools_supported (true))
        FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
      if ((handle_types & ~(unsigned) CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0
          || (handle_types != 0
              && (fk.n_devices == 0
                  || !(fk_device_attribute (0, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)
                       & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))))
        FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
      max_default = fk.host_total;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  p = fk_pool_new (poolProps, device);
  if (p == NULL)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  /* The real driver rounds a small maxSize up and serves more than it: on the H200 (CUDA 13,
   * driver 580) a pool with maxSize 2 MiB served a 4 MiB allocation and one with 8 MiB took
   * 4 + 8 MiB (memres issue 15, and test-fakecuda's /fakecuda/pool/max-size). The granularity
   * is documented nowhere (CUmemPoolProps.maxSize: "Maximum pool size"); the fake rounds up to
   * FK_POOL_MAX_ROUND (32 MiB), an assumption consistent with both observations, so
   * that memres's own enforcement of the size asked for is tested. */
  p->max_size
      = poolProps->maxSize ? fk_round_up (poolProps->maxSize, FK_POOL_MAX_ROUND) : max_default;
  if (p->max_size == 0) /* rounding overflowed */
    p->max_size = SIZE_MAX;
  if (handle_types & (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC))
    {
      if (!fk_pool_make_memfd (p))
        {
          fk_pool_unlink (p);
          free (p);
          FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
        }
    }
  fk.counts.pools++;
  *pool = p;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemPoolDestroy (CUmemoryPool pool)
{
  FK_ENTER (cuMemPoolDestroy);
  if (!fk_pool_valid (pool) || pool->is_default)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < fk.n_devices; i++)
    if (fk.devices[i].current_pool == pool)
      fk.devices[i].current_pool = fk.devices[i].default_pool;
  pool->destroyed = true;
  /* Outstanding allocations keep the rest alive until they are freed. */
  fk_pool_trim (pool, 0);
  if (pool->n_allocs == 0)
    fk_pool_finalize (pool);
  FK_RETURN (CUDA_SUCCESS);
}

/* Whether cuMemPoolGetAttribute / cuMemPoolSetAttribute may touch @pool's attributes through
 * @value. Not on an imported pool: the real driver answers CUDA_ERROR_INVALID_VALUE to a get of
 * every attribute there (seen on the H200's 580.159.04); set is assumed to be refused alike. */
static bool
fk_pool_attribute_usable (CUmemoryPool pool, const void *value)
{
  return fk_pool_valid (pool) && value != NULL && !pool->imported;
}

CUresult
fk_cuMemPoolGetAttribute (CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
  FK_ENTER (cuMemPoolGetAttribute);
  if (!fk_pool_attribute_usable (pool, value))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  switch (attr)
    {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *(int *) value = pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
      break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *(cuuint64_t *) value = pool->release_threshold;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *(cuuint64_t *) value = pool->reserved;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *(cuuint64_t *) value = pool->reserved_high;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *(cuuint64_t *) value = pool->used;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *(cuuint64_t *) value = pool->used_high;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemPoolSetAttribute (CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
  FK_ENTER (cuMemPoolSetAttribute);
  if (!fk_pool_attribute_usable (pool, value))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  switch (attr)
    {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *) value != 0;
      break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      pool->release_threshold = *(cuuint64_t *) value;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      /* High watermarks can only be reset, which restarts them from the current value. */
      if (*(cuuint64_t *) value != 0)
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
        pool->reserved_high = pool->reserved;
      else
        pool->used_high = pool->used;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemPoolTrimTo (CUmemoryPool pool, size_t minBytesToKeep)
{
  FK_ENTER (cuMemPoolTrimTo);
  if (!fk_pool_valid (pool))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  fk_pool_trim (pool, minBytesToKeep);
  FK_RETURN (CUDA_SUCCESS);
}

static bool
fk_access_flags_valid (CUmemAccess_flags flags)
{
  return flags == CU_MEM_ACCESS_FLAGS_PROT_NONE || flags == CU_MEM_ACCESS_FLAGS_PROT_READ
         || flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}

CUresult
fk_cuMemPoolSetAccess (CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
  FK_ENTER (cuMemPoolSetAccess);
  if (!fk_pool_valid (pool) || (map == NULL && count > 0))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* Validate every descriptor before changing anything. */
  for (size_t i = 0; i < count; i++)
    {
      const CUmemAccessDesc *d = &map[i];
      if (!fk_access_flags_valid (d->flags))
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        {
          /* The host's access to a host pool is always read-write. */
          if (pool->device < 0
              && (d->location.type == CU_MEM_LOCATION_TYPE_HOST
                  || d->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA)
              && d->flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            continue;
          FK_RETURN (CUDA_ERROR_INVALID_VALUE);
        }
      if (!fk_device_valid (d->location.id))
        FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
      if (d->location.id == pool->device)
        {
          /* The owner's access cannot be taken away. */
          if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            FK_RETURN (CUDA_ERROR_INVALID_VALUE);
        }
      else if (pool->device >= 0 && d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE
               && !fk_can_access_peer (pool->device, d->location.id))
        FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
    }
  for (size_t i = 0; i < count; i++)
    if (map[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE)
      pool->access[map[i].location.id] = map[i].flags;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemPoolGetAccess (CUmemAccess_flags *flags, CUmemoryPool memPool, CUmemLocation *location)
{
  FK_ENTER (cuMemPoolGetAccess);
  if (flags == NULL || location == NULL || !fk_pool_valid (memPool))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  switch (location->type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!fk_device_valid (location->id))
        FK_RETURN (CUDA_ERROR_INVALID_DEVICE);
      *flags = memPool->access[location->id];
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      *flags = memPool->device < 0 ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                   : CU_MEM_ACCESS_FLAGS_PROT_NONE;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemAllocFromPoolAsync (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
  int device;
  uintptr_t base;
  CUresult r;

  FK_ENTER (cuMemAllocFromPoolAsync);
  if (dptr == NULL || bytesize == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_stream_for_work (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if (!fk_pool_valid (pool) || pool->imported)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_pool_alloc (pool, bytesize, &base);
  if (r == CUDA_SUCCESS)
    *dptr = base;
  FK_RETURN (r);
}

CUresult
fk_cuMemAllocAsync (CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
  struct CUgraph_st *graph;
  int device;
  uintptr_t base;
  CUresult r;

  FK_ENTER (cuMemAllocAsync);
  if (dptr == NULL || bytesize == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if ((graph = fk_stream_capture_graph (hStream)) != NULL)
    {
      /* An allocation node: the address now, the memory at each launch. */
      r = fk_stream_device (hStream, &device);
      if (r != CUDA_SUCCESS)
        FK_RETURN (r);
      if (!fk_pools_supported (device))
        FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
      r = fk_graph_capture_alloc (graph, bytesize, &base);
      if (r == CUDA_SUCCESS)
        *dptr = base;
      FK_RETURN (r);
    }
  r = fk_stream_for_work (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  if (!fk_pools_supported (device))
    FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
  r = fk_pool_alloc (fk.devices[device].current_pool, bytesize, &base);
  if (r == CUDA_SUCCESS)
    *dptr = base;
  FK_RETURN (r);
}

CUresult
fk_cuMemFreeAsync (CUdeviceptr dptr, CUstream hStream)
{
  struct CUgraph_st *graph;
  FkRange *range;
  int device;
  CUresult r;

  FK_ENTER (cuMemFreeAsync);
  if ((graph = fk_stream_capture_graph (hStream)) != NULL)
    FK_RETURN (fk_graph_capture_free (graph, dptr)); /* a free node */
  r = fk_stream_for_work (hStream, &device);
  if (r != CUDA_SUCCESS)
    FK_RETURN (r);
  range = fk_range_find (dptr);
  if (range != NULL && range->base == dptr && range->kind == FK_RANGE_GRAPH_ALLOC)
    FK_RETURN (fk_graph_free_outside (dptr));
  if (!fk.async)
    FK_RETURN (fk_pool_free (dptr, false));
  /* Stream-ordered: the memory returns to its pool when the stream reaches the free. */
  r = fk_pool_queue_free (dptr);
  if (r == CUDA_SUCCESS)
    {
      FkWork w = { FK_OP_FREE, device, dptr, 0, 0, 0, 0 };
      r = fk_stream_submit (hStream, device, &w);
    }
  FK_RETURN (r);
}

/* Pool IPC */

/* A pool's fabric handle: the exporting process, the pool's memfd and its inode, the pool's
 * identity. Any process of the host (of the same user) opens /proc/PID/fd/FD; a handle of a
 * pool destroyed since (its memfd closed, the fd number gone or reused) is refused:
 * CUDA_ERROR_INVALID_VALUE. */
typedef struct
{
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t ino;
  uint8_t identity[16];
  uint8_t zero[24];
} FkPoolFabric;
_Static_assert(sizeof (FkPoolFabric) == sizeof (CUmemFabricHandle), "pool fabric handle size");
#define FK_POOL_FABRIC_MAGIC "FKFABPL1"

CUresult
fk_cuMemPoolExportToShareableHandle (void *handle_out, CUmemoryPool pool,
                                     CUmemAllocationHandleType handleType, unsigned long long flags)
{
  int fd;

  FK_ENTER (cuMemPoolExportToShareableHandle);
  if (handle_out == NULL || flags != 0 || !fk_pool_valid (pool) || pool->imported
      || (pool->props.handleTypes & handleType) == 0
      || (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
          && handleType != CU_MEM_HANDLE_TYPE_FABRIC))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (handleType == CU_MEM_HANDLE_TYPE_FABRIC)
    {
      FkPoolFabric f = { 0 };
      struct stat st;

      /* as on the H200 without an IMEX channel: the pool is created, its export refused */
      if (getenv ("FAKECUDA_NO_IMEX") != NULL)
        FK_RETURN (CUDA_ERROR_NOT_PERMITTED);
      if (fstat (pool->memfd, &st) != 0)
        FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
      memcpy (f.magic, FK_POOL_FABRIC_MAGIC, 8);
      f.pid = (int32_t) getpid ();
      f.fd = pool->memfd;
      f.ino = (uint64_t) st.st_ino;
      memcpy (f.identity, pool->identity, 16);
      memcpy (handle_out, &f, sizeof f);
      FK_RETURN (CUDA_SUCCESS);
    }
  fd = fcntl (pool->memfd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  fk_track_exported_fd (fd);
  fk.counts.exported_fds++;
  *(int *) handle_out = fd;
  FK_RETURN (CUDA_SUCCESS);
}

/* Reads the pool description from the name of a pool memfd. */
static bool
fk_parse_pool_fd (int fd, uint8_t identity[16], int *device, CUmemLocation *location)
{
  char path[64], link[256], uuid[33];
  ssize_t n;
  const char *p;
  int type, id;

  snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
  n = readlink (path, link, sizeof link - 1);
  if (n <= 0)
    return false;
  link[n] = '\0';
  p = strstr (link, "memfd:fakecuda-pool:");
  if (p == NULL)
    return false;
  p += strlen ("memfd:fakecuda-pool:");
  if (strlen (p) < 33 || !fk_unhex (identity, p, 16) || p[32] != ':')
    return false;
  p += 33;
  if (sscanf (p, "%32[0-9a-z]:%d:%d", uuid, &type, &id) != 3)
    return false;
  location->type = (CUmemLocationType) type;
  location->id = id;
  *device = -1;
  if (type == CU_MEM_LOCATION_TYPE_DEVICE)
    {
      uint8_t bytes[16];
      if (!fk_unhex (bytes, uuid, 16))
        return false;
      for (int i = 0; i < fk.n_devices; i++)
        if (memcmp (fk.devices[i].uuid.bytes, bytes, 16) == 0)
          *device = i;
      return *device >= 0;
    }
  return type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
}

/* The fd of the pool a fabric handle names, opened through /proc (a new fd of this process),
 * or -1 with *@r set. */
static int
fk_pool_open_fabric (const void *handle, CUresult *r)
{
  FkPoolFabric f;
  char path[64];
  struct stat st;
  int own;

  *r = CUDA_ERROR_INVALID_VALUE;
  if (handle == NULL)
    return -1;
  memcpy (&f, handle, sizeof f);
  if (memcmp (f.magic, FK_POOL_FABRIC_MAGIC, 8) != 0 || !fk_all_zero (f.zero, sizeof f.zero))
    return -1;
  if (getenv ("FAKECUDA_NO_IMEX") != NULL)
    {
      *r = CUDA_ERROR_NOT_PERMITTED;
      return -1;
    }
  snprintf (path, sizeof path, "/proc/%d/fd/%d", (int) f.pid, (int) f.fd);
  own = open (path, O_RDWR | O_CLOEXEC);
  if (own < 0)
    {
      if (errno == EACCES || errno == EPERM)
        *r = CUDA_ERROR_NOT_PERMITTED;
      return -1;
    }
  if (fstat (own, &st) != 0 || (uint64_t) st.st_ino != f.ino)
    {
      close (own);
      return -1;
    }
  return own;
}

CUresult
fk_cuMemPoolImportFromShareableHandle (CUmemoryPool *pool_out, void *handle,
                                       CUmemAllocationHandleType handleType,
                                       unsigned long long flags)
{
  int fd = (int) (intptr_t) handle, device, own;
  CUmemPoolProps props = { 0 };
  uint8_t identity[16];
  struct stat st;
  FkPool *p;

  FK_ENTER (cuMemPoolImportFromShareableHandle);
  if (pool_out == NULL || flags != 0
      || (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
          && handleType != CU_MEM_HANDLE_TYPE_FABRIC))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (handleType == CU_MEM_HANDLE_TYPE_FABRIC)
    {
      CUresult r;

      own = fk_pool_open_fabric (handle, &r);
      if (own < 0)
        FK_RETURN (r);
      /* the memfd must be a pool's, and the one whose identity the handle carries */
      if (fstat (own, &st) != 0 || !fk_parse_pool_fd (own, identity, &device, &props.location)
          || memcmp (identity, ((const FkPoolFabric *) handle)->identity, 16) != 0)
        {
          close (own);
          FK_RETURN (CUDA_ERROR_INVALID_VALUE);
        }
    }
  else
    {
      if (fd < 0 || fstat (fd, &st) != 0)
        FK_RETURN (CUDA_ERROR_INVALID_VALUE);
      /* An fd that is no pool's shareable handle: the real driver (580, H200) answers
       * CUDA_ERROR_UNKNOWN. */
      if (!fk_parse_pool_fd (fd, identity, &device, &props.location))
        FK_RETURN (CUDA_ERROR_UNKNOWN);
      own = fcntl (fd, F_DUPFD_CLOEXEC, 0);
      if (own < 0)
        FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = handleType;
  p = fk_pool_new (&props, device);
  if (p == NULL)
    {
      close (own);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  p->imported = true;
  memcpy (p->identity, identity, 16);
  p->memfd = own;
  p->fd_size = (size_t) st.st_size;
  p->max_size = p->fd_size;
  fk.counts.pools++;
  *pool_out = p;
  FK_RETURN (CUDA_SUCCESS);
}

typedef struct
{
  char magic[8];
  uint8_t identity[16];
  uint64_t offset;
  uint64_t size;
  uint64_t rsize;
  uint8_t zero[16];
} FkPtrExport;
_Static_assert(sizeof (FkPtrExport) == sizeof (CUmemPoolPtrExportData), "export data size");

CUresult
fk_cuMemPoolExportPointer (CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
  FkRange *r;
  FkPoolAlloc *a;
  FkPtrExport e = { 0 };

  FK_ENTER (cuMemPoolExportPointer);
  if (shareData_out == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  r = fk_range_find (ptr);
  if (r == NULL || r->kind != FK_RANGE_POOL_ALLOC || r->base != ptr)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  a = r->obj;
  if (a->chunk == NULL || a->pool->memfd < 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  memcpy (e.magic, FK_PTR_MAGIC, 8);
  memcpy (e.identity, a->pool->identity, 16);
  e.offset = a->fd_offset;
  e.size = a->size;
  e.rsize = a->rsize;
  memcpy (shareData_out, &e, sizeof e);
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemPoolImportPointer (CUdeviceptr *ptr_out, CUmemoryPool pool,
                           CUmemPoolPtrExportData *shareData)
{
  FkPtrExport e;
  FkPoolAlloc *a;
  size_t page = fk_page_size ();
  uint64_t map_offset;

  FK_ENTER (cuMemPoolImportPointer);
  if (ptr_out == NULL || shareData == NULL || !fk_pool_valid (pool) || !pool->imported)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  memcpy (&e, shareData, sizeof e);
  if (memcmp (e.magic, FK_PTR_MAGIC, 8) != 0 || memcmp (e.identity, pool->identity, 16) != 0
      || e.size == 0 || e.rsize < e.size || e.rsize % FK_POOL_ALIGN != 0
      || e.offset % FK_POOL_ALIGN != 0 || e.offset < FK_POOL_FD_BASE || e.offset > pool->fd_size
      || e.rsize > pool->fd_size - e.offset || !fk_all_zero (e.zero, sizeof e.zero))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* The same pointer imported again: the same mapping at the same address, not counted, as the
   * real driver does (seen on 580.159.04; nvbug 5570902): the first cuMemFreeAsync unmaps it
   * for every import, and later frees of it fail. An import whose free is queued (asynchronous
   * mode) is not found: what the driver does then is not known; the fake maps it again. */
  for (a = pool->imports; a; a = a->next)
    if (a->fd_offset == e.offset && !a->free_queued)
      {
        if (a->size != e.size)
          FK_RETURN (CUDA_ERROR_INVALID_VALUE);
        *ptr_out = a->base;
        FK_RETURN (CUDA_SUCCESS);
      }
  a = calloc (1, sizeof *a);
  if (a == NULL)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  map_offset = e.offset - e.offset % page;
  a->map_size = fk_round_up (e.offset + e.rsize, page) - map_offset;
  a->map_base = fk_va_alloc (a->map_size, page, 0, false);
  if (a->map_base == 0 || !fk_va_back_fd (a->map_base, a->map_size, pool->memfd, map_offset, true))
    {
      if (a->map_base != 0)
        fk_va_free (a->map_base, a->map_size);
      free (a);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  a->pool = pool;
  a->base = a->map_base + (e.offset - map_offset);
  a->size = e.size;
  a->rsize = e.rsize;
  a->fd_offset = e.offset;
  if (!fk_range_add (a->base, a->size, FK_RANGE_POOL_ALLOC, a))
    {
      fk_va_free (a->map_base, a->map_size);
      free (a);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  a->next = pool->imports;
  pool->imports = a;
  pool->used += a->rsize;
  if (pool->used > pool->used_high)
    pool->used_high = pool->used;
  pool->n_allocs++;
  fk.counts.pool_allocations++;
  *ptr_out = a->base;
  FK_RETURN (CUDA_SUCCESS);
}

/* fakecuda-managed.c: managed (unified) memory. cuMemAllocManaged gives anonymous memory inside
 * the fake's address range (so the host dereferences it, and copies and fills from any device
 * reach it); allocations from managed pools (fakecuda-pool.c) are the same kind of memory. Every
 * managed allocation has a record of the advice given for it and of where it was last
 * prefetched, which cuMemRangeGetAttribute reports; the record covers the whole allocation
 * (advice on part of one applies to all of it). Discarding fills the memory with 0xdd, so that a
 * test reading discarded data sees garbage. */
#include "fakecuda-private.h"

#include <stdlib.h>
#include <string.h>

static bool
fk_env_set (const char *name)
{
  const char *v = getenv (name);
  return v != NULL && *v != '\0' && strcmp (v, "0") != 0;
}

#define FK_HOST_BIT (1u << FK_MAX_DEVICES) /* accessed-by bit of the host */

struct FkManaged
{
  FkManaged *next;
  uintptr_t base;
  size_t size;
  bool own_range; /* cuMemAllocManaged: the range table entry and the pages are ours */
  int device;     /* the context's device at allocation */
  unsigned attach;
  bool read_mostly;
  CUmemLocation preferred;     /* type NONE: unset */
  unsigned accessed_by;        /* bit d: device d; FK_HOST_BIT: the host */
  CUmemLocation last_prefetch; /* type NONE: never prefetched */
};

static FkManaged *fk_managed;

static FkManaged *
fk_managed_new (uintptr_t base, size_t size, int device, bool own_range)
{
  FkManaged *m = calloc (1, sizeof *m);

  if (m == NULL)
    return NULL;
  m->base = base;
  m->size = size;
  m->device = device;
  m->own_range = own_range;
  m->next = fk_managed;
  fk_managed = m;
  return m;
}

static void
fk_managed_unlink (FkManaged *m)
{
  for (FkManaged **p = &fk_managed; *p; p = &(*p)->next)
    if (*p == m)
      {
        *p = m->next;
        break;
      }
}

bool
fk_managed_track (uintptr_t base, size_t size, int device)
{
  return fk_managed_new (base, size, device, false) != NULL;
}

void
fk_managed_untrack (uintptr_t base)
{
  for (FkManaged *m = fk_managed; m != NULL; m = m->next)
    if (m->base == base && !m->own_range)
      {
        fk_managed_unlink (m);
        free (m);
        return;
      }
}

/* The managed allocation holding all of [addr, addr + size), or NULL. */
static FkManaged *
fk_managed_find (uintptr_t addr, size_t size)
{
  if (size == 0 || addr + size < addr)
    return NULL;
  for (FkManaged *m = fk_managed; m != NULL; m = m->next)
    if (addr >= m->base && addr - m->base < m->size && size <= m->size - (addr - m->base))
      return m;
  return NULL;
}

bool
fk_managed_pools_supported (int device)
{
  if (!fk_device_valid (device))
    return false;
  return fk_device_attribute (device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0
         && fk_device_attribute (device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) != 0
         && fk_device_attribute (device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0;
}

static bool
fk_concurrent (int device)
{
  return fk_device_attribute (device, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0;
}

CUresult
fk_cuMemAllocManaged (CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
  CUcontext ctx;
  size_t vsize;
  uintptr_t base;
  FkManaged *m;

  FK_ENTER (cuMemAllocManaged);
  if (dptr == NULL || bytesize == 0
      || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  if (fk_device_attribute (ctx->device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) == 0)
    FK_RETURN (CUDA_ERROR_NOT_SUPPORTED);
  vsize = fk_round_up (bytesize, fk_page_size ());
  if (vsize < bytesize || bytesize > fk.host_total - fk.host_used)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  base = fk_va_alloc (vsize, fk_page_size (), 0, false);
  if (base == 0)
    FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
  if (!fk_va_back_anonymous (base, vsize)
      || (m = fk_managed_new (base, bytesize, ctx->device, true)) == NULL)
    {
      fk_va_free (base, vsize);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  m->attach = flags;
  if (!fk_range_add (base, bytesize, FK_RANGE_MANAGED, m))
    {
      fk_managed_unlink (m);
      free (m);
      fk_va_free (base, vsize);
      FK_RETURN (CUDA_ERROR_OUT_OF_MEMORY);
    }
  fk.host_used += bytesize;
  fk.counts.allocations++;
  *dptr = base;
  FK_RETURN (CUDA_SUCCESS);
}

void
fk_managed_free (FkRange *r)
{
  FkManaged *m = r->obj;

  fk.host_used -= m->size;
  fk_range_remove (m->base);
  fk_va_free (m->base, fk_round_up (m->size, fk_page_size ()));
  fk_managed_unlink (m);
  free (m);
  fk.counts.allocations--;
}

int
fk_managed_device (void *obj)
{
  return ((FkManaged *) obj)->device;
}

/* A location as advice and prefetch take it; HOST_NUMA_CURRENT resolves to node 0. */
static CUresult
fk_check_location (CUmemLocation *loc, bool allow_numa)
{
  switch (loc->type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return fk_device_valid (loc->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
      loc->id = 0;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      if (!allow_numa)
        return CUDA_ERROR_INVALID_VALUE;
      loc->type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      loc->id = 0;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (!allow_numa)
        return CUDA_ERROR_INVALID_VALUE;
      return loc->id >= 0 && loc->id < FK_N_NUMA_NODES ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult
fk_cuMemAdvise (CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
  FkManaged *m;
  CUresult r;
  unsigned bit;

  FK_ENTER (cuMemAdvise);
  m = fk_managed_find (devPtr, count);
  if (m == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  switch (advice)
    {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
      m->read_mostly = advice == CU_MEM_ADVISE_SET_READ_MOSTLY;
      FK_RETURN (CUDA_SUCCESS);
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
      if ((r = fk_check_location (&location, true)) != CUDA_SUCCESS)
        FK_RETURN (r);
      /* FAKECUDA_NO_HOST_NUMA_PREFERENCE: as the 580 driver on a one-node host (an H200), a
       * host NUMA node is accepted and not kept: the range keeps its earlier preference */
      if (location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA
          && fk_env_set ("FAKECUDA_NO_HOST_NUMA_PREFERENCE"))
        FK_RETURN (CUDA_SUCCESS);
      m->preferred = location;
      FK_RETURN (CUDA_SUCCESS);
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      m->preferred = (CUmemLocation){ CU_MEM_LOCATION_TYPE_NONE, 0 };
      FK_RETURN (CUDA_SUCCESS);
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
      if ((r = fk_check_location (&location, false)) != CUDA_SUCCESS)
        FK_RETURN (r);
      bit = location.type == CU_MEM_LOCATION_TYPE_DEVICE ? 1u << location.id : FK_HOST_BIT;
      if (advice == CU_MEM_ADVISE_SET_ACCESSED_BY)
        m->accessed_by |= bit;
      else
        m->accessed_by &= ~bit;
      FK_RETURN (CUDA_SUCCESS);
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
}

/* Checks one prefetch destination: a device must have concurrent managed access. */
static CUresult
fk_check_prefetch_location (CUmemLocation *loc)
{
  CUresult r = fk_check_location (loc, true);

  if (r == CUDA_SUCCESS && loc->type == CU_MEM_LOCATION_TYPE_DEVICE && !fk_concurrent (loc->id))
    return CUDA_ERROR_INVALID_DEVICE;
  return r;
}

CUresult
fk_cuMemPrefetchAsync (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
                       CUstream hStream)
{
  FkManaged *m;
  int device;
  CUresult r;

  FK_ENTER (cuMemPrefetchAsync);
  if (flags != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if ((r = fk_stream_for_work (hStream, &device)) != CUDA_SUCCESS)
    FK_RETURN (r);
  m = fk_managed_find (devPtr, count);
  if (m == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if ((r = fk_check_prefetch_location (&location)) != CUDA_SUCCESS)
    FK_RETURN (r);
  m->last_prefetch = location;
  FK_RETURN (CUDA_SUCCESS);
}

/* The legacy int form of a location: a device ordinal, CU_DEVICE_CPU for the host (any node),
 * CU_DEVICE_INVALID for none. */
static int
fk_location_ordinal (const CUmemLocation *loc)
{
  switch (loc->type)
    {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return loc->id;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      return CU_DEVICE_CPU;
    default:
      return CU_DEVICE_INVALID;
    }
}

CUresult
fk_cuMemRangeGetAttribute (void *data, size_t dataSize, CUmem_range_attribute attribute,
                           CUdeviceptr devPtr, size_t count)
{
  FkManaged *m;
  int *out = data;
  size_t n, k = 0;

  FK_ENTER (cuMemRangeGetAttribute);
  if (data == NULL || dataSize < sizeof (int) || dataSize % sizeof (int) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  m = fk_managed_find (devPtr, count);
  if (m == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (attribute != CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY && dataSize != sizeof (int))
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  switch (attribute)
    {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
      *out = m->read_mostly;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      *out = fk_location_ordinal (&m->preferred);
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
      *out = (int) m->preferred.type;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
      *out = m->preferred.type == CU_MEM_LOCATION_TYPE_NONE ? CU_DEVICE_INVALID : m->preferred.id;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      *out = fk_location_ordinal (&m->last_prefetch);
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
      *out = (int) m->last_prefetch.type;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
      *out = m->last_prefetch.type == CU_MEM_LOCATION_TYPE_NONE ? CU_DEVICE_INVALID
                                                                : m->last_prefetch.id;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY:
      /* The devices (and CU_DEVICE_CPU for the host), then CU_DEVICE_INVALID to the end. */
      n = dataSize / sizeof (int);
      for (int d = 0; d < fk.n_devices && k < n; d++)
        if (m->accessed_by & (1u << d))
          out[k++] = d;
      if ((m->accessed_by & FK_HOST_BIT) && k < n)
        out[k++] = CU_DEVICE_CPU;
      while (k < n)
        out[k++] = CU_DEVICE_INVALID;
      break;
    default:
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
    }
  FK_RETURN (CUDA_SUCCESS);
}

/* The batch entry points: every range is checked before any is touched (all or nothing).
 * prefetchLocIdxs[i] is the first range prefetched to prefetchLocs[i]; the ranges up to the next
 * index (or the end) go there too. */
static CUresult
fk_batch_check (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs,
                size_t *loc_idxs, size_t n_locs, bool with_locs, FkManaged **found)
{
  if (count == 0 || dptrs == NULL || sizes == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  if (with_locs)
    {
      if (n_locs == 0 || n_locs > count || locs == NULL || loc_idxs == NULL || loc_idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
      for (size_t i = 0; i < n_locs; i++)
        {
          CUresult r;

          if (i > 0 && (loc_idxs[i] <= loc_idxs[i - 1] || loc_idxs[i] >= count))
            return CUDA_ERROR_INVALID_VALUE;
          if ((r = fk_check_prefetch_location (&locs[i])) != CUDA_SUCCESS)
            return r;
        }
    }
  for (size_t i = 0; i < count; i++)
    if ((found[i] = fk_managed_find (dptrs[i], sizes[i])) == NULL)
      return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult
fk_batch (CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *locs, size_t *loc_idxs,
          size_t n_locs, unsigned long long flags, CUstream stream, bool discard, bool prefetch)
{
  FkManaged **found;
  CUmemLocation *copy = NULL;
  int device;
  CUresult r;

  /* cuda.h: the batch calls' stream "must not be legacy NULL stream" */
  if (flags != 0 || stream == NULL || stream == CU_STREAM_LEGACY)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = fk_stream_for_work (stream, &device)) != CUDA_SUCCESS)
    return r;
  if (prefetch && locs != NULL && n_locs > 0 && n_locs <= count)
    {
      /* checked on a copy: HOST_NUMA_CURRENT is resolved in it, the caller's array stays */
      copy = malloc (n_locs * sizeof *copy);
      if (copy == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
      memcpy (copy, locs, n_locs * sizeof *copy);
    }
  found = calloc (count ? count : 1, sizeof *found);
  if (found == NULL)
    {
      free (copy);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  r = fk_batch_check (dptrs, sizes, count, copy, loc_idxs, n_locs, prefetch, found);
  if (r == CUDA_SUCCESS)
    for (size_t i = 0, l = 0; i < count; i++)
      {
        if (discard)
          memset ((void *) dptrs[i], 0xdd, sizes[i]);
        if (prefetch)
          {
            while (l + 1 < n_locs && loc_idxs[l + 1] <= i)
              l++;
            found[i]->last_prefetch = copy[l];
          }
      }
  free (found);
  free (copy);
  return r;
}

CUresult
fk_cuMemPrefetchBatchAsync (CUdeviceptr *dptrs, size_t *sizes, size_t count,
                            CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                            size_t numPrefetchLocs, unsigned long long flags, CUstream hStream)
{
  FK_ENTER (cuMemPrefetchBatchAsync);
  FK_RETURN (fk_batch (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                       hStream, false, true));
}

CUresult
fk_cuMemDiscardBatchAsync (CUdeviceptr *dptrs, size_t *sizes, size_t count,
                           unsigned long long flags, CUstream hStream)
{
  FK_ENTER (cuMemDiscardBatchAsync);
  FK_RETURN (fk_batch (dptrs, sizes, count, NULL, NULL, 0, flags, hStream, true, false));
}

CUresult
fk_cuMemDiscardAndPrefetchBatchAsync (CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                      CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                      size_t numPrefetchLocs, unsigned long long flags,
                                      CUstream hStream)
{
  FK_ENTER (cuMemDiscardAndPrefetchBatchAsync);
  FK_RETURN (fk_batch (dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                       hStream, true, true));
}

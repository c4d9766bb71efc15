/* fakecuda-memory.c: the table of live address ranges, access checks, cuMemAlloc and pinned
 * host memory, copies and fills (done at once, after every byte was checked), pointer
 * attributes and cuMemGetInfo. */
#include "fakecuda-private.h"

#include <stdlib.h>
#include <string.h>

static FkRange *fk_ranges; /* sorted by base, never overlapping */
static size_t fk_n_ranges, fk_cap_ranges;

/* Index of the first range whose end is after @addr. */
static size_t
fk_range_index (uintptr_t addr)
{
  size_t lo = 0, hi = fk_n_ranges;
  while (lo < hi)
    {
      size_t mid = (lo + hi) / 2;
      if (fk_ranges[mid].base + fk_ranges[mid].size <= addr)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

bool
fk_range_add (uintptr_t base, size_t size, FkRangeKind kind, void *obj)
{
  size_t i = fk_range_index (base);
  if (fk_n_ranges == fk_cap_ranges)
    {
      size_t cap = fk_cap_ranges ? 2 * fk_cap_ranges : 64;
      FkRange *r = realloc (fk_ranges, cap * sizeof *r);
      if (r == NULL)
        return false;
      fk_ranges = r;
      fk_cap_ranges = cap;
    }
  memmove (&fk_ranges[i + 1], &fk_ranges[i], (fk_n_ranges - i) * sizeof *fk_ranges);
  fk_ranges[i] = (FkRange){ base, size, kind, obj };
  fk_n_ranges++;
  return true;
}

void
fk_range_remove (uintptr_t base)
{
  size_t i = fk_range_index (base);
  if (i < fk_n_ranges && fk_ranges[i].base == base)
    {
      memmove (&fk_ranges[i], &fk_ranges[i + 1], (fk_n_ranges - i - 1) * sizeof *fk_ranges);
      fk_n_ranges--;
    }
}

FkRange *
fk_range_find (uintptr_t addr)
{
  size_t i = fk_range_index (addr);
  if (i < fk_n_ranges && fk_ranges[i].base <= addr)
    return &fk_ranges[i];
  return NULL;
}

CUresult
fk_check_access (uintptr_t addr, size_t size, int device, bool write)
{
  FkRange *r;

  if (size == 0)
    return CUDA_SUCCESS;
  if (addr == 0 || addr + size < addr)
    return CUDA_ERROR_INVALID_VALUE;
  r = fk_range_find (addr);
  if (r == NULL)
    {
      /* Plain host memory, unless it touches the fake's address space. */
      return fk_arena_contains (addr, size) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    }
  for (;;)
    {
      size_t part = r->base + r->size - addr;
      CUresult res;

      if (part > size)
        part = size;
      switch (r->kind)
        {
        case FK_RANGE_ALLOC:
        case FK_RANGE_HOST_ALLOC:
          return part == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        case FK_RANGE_POOL_ALLOC:
          if (part != size)
            return CUDA_ERROR_INVALID_VALUE;
          return fk_pool_alloc_accessible (r->obj, device, write) ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_INVALID_VALUE;
        case FK_RANGE_RESERVATION:
          res = fk_reservation_check (r->obj, addr, part, device, write);
          if (res != CUDA_SUCCESS || part == size)
            return res;
          /* Mapped memory may go on in the adjacent reservation. */
          addr += part;
          size -= part;
          r = fk_range_find (addr);
          if (r == NULL || r->kind != FK_RANGE_RESERVATION)
            return CUDA_ERROR_INVALID_VALUE;
          break;
        default:
          return CUDA_ERROR_INVALID_VALUE;
        }
    }
}

int
fk_memory_device (uintptr_t addr)
{
  FkRange *r = fk_range_find (addr);
  int device = -1;

  if (r == NULL)
    return -1;
  switch (r->kind)
    {
    case FK_RANGE_ALLOC:
      return ((FkAlloc *) r->obj)->device;
    case FK_RANGE_HOST_ALLOC:
      return -1;
    case FK_RANGE_POOL_ALLOC:
      return fk_pool_alloc_device (r->obj);
    case FK_RANGE_RESERVATION:
      {
        bool host = true;
        if (fk_reservation_lookup (r->obj, addr, &device, &host, NULL, NULL) && !host)
          return device;
        return -1;
      }
    }
  return -1;
}

/* cuMemAlloc and pinned host memory */

static CUresult
fk_alloc_block (size_t size, int device, unsigned flags, FkRangeKind kind, uintptr_t *out)
{
  size_t vsize = fk_round_up (size, fk_page_size ());
  FkAlloc *a;
  uintptr_t base;

  if (vsize == 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (kind == FK_RANGE_ALLOC && size > fk.devices[device].total - fk.devices[device].used)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (kind == FK_RANGE_HOST_ALLOC && size > fk.host_total - fk.host_used)
    return CUDA_ERROR_OUT_OF_MEMORY;
  a = calloc (1, sizeof *a);
  if (a == NULL)
    return CUDA_ERROR_OUT_OF_MEMORY;
  base = fk_va_alloc (vsize, fk_page_size (), 0, false);
  if (base == 0 || !fk_va_back_anonymous (base, vsize))
    {
      if (base != 0)
        fk_va_free (base, vsize);
      free (a);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  *a = (FkAlloc){ base, size, device, flags, ++fk.next_id };
  if (!fk_range_add (base, size, kind, a))
    {
      fk_va_free (base, vsize);
      free (a);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  if (kind == FK_RANGE_ALLOC)
    fk.devices[device].used += size;
  else
    fk.host_used += size;
  fk.counts.allocations++;
  *out = base;
  return CUDA_SUCCESS;
}

static void
fk_free_block (FkRange *r)
{
  FkAlloc *a = r->obj;

  if (r->kind == FK_RANGE_ALLOC)
    fk.devices[a->device].used -= a->size;
  else
    fk.host_used -= a->size;
  fk_range_remove (a->base);
  fk_va_free (a->base, fk_round_up (a->size, fk_page_size ()));
  free (a);
  fk.counts.allocations--;
}

CUresult
fk_cuMemAlloc (CUdeviceptr *dptr, size_t bytesize)
{
  CUcontext ctx;
  uintptr_t base;
  CUresult r;

  FK_ENTER (cuMemAlloc);
  if (dptr == NULL || bytesize == 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  r = fk_alloc_block (bytesize, ctx->device, 0, FK_RANGE_ALLOC, &base);
  if (r == CUDA_SUCCESS)
    *dptr = base;
  FK_RETURN (r);
}

CUresult
fk_cuMemFree (CUdeviceptr dptr)
{
  FkRange *r;
  CUresult res;

  FK_ENTER (cuMemFree);
  if (fk_current_context () == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  if ((res = fk_legacy_drain ()) != CUDA_SUCCESS)
    FK_RETURN (res);
  r = fk_range_find (dptr);
  if (r == NULL || r->base != dptr)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (r->kind == FK_RANGE_ALLOC)
    {
      fk_free_block (r);
      FK_RETURN (CUDA_SUCCESS);
    }
  if (r->kind == FK_RANGE_POOL_ALLOC)
    FK_RETURN (fk_pool_free (dptr, false));
  FK_RETURN (CUDA_ERROR_INVALID_VALUE);
}

CUresult
fk_cuMemGetAddressRange (CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
  FkRange *r;

  FK_ENTER (cuMemGetAddressRange);
  r = fk_range_find (dptr);
  if (r == NULL)
    FK_RETURN (CUDA_ERROR_NOT_FOUND);
  if (r->kind == FK_RANGE_RESERVATION)
    {
      uintptr_t base;
      size_t size;
      int device;
      bool host;
      if (!fk_reservation_lookup (r->obj, dptr, &device, &host, &base, &size))
        FK_RETURN (CUDA_ERROR_NOT_FOUND);
      if (pbase)
        *pbase = base;
      if (psize)
        *psize = size;
      FK_RETURN (CUDA_SUCCESS);
    }
  if (pbase)
    *pbase = r->base;
  if (psize)
    *psize = r->size;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemHostAlloc (void **pp, size_t bytesize, unsigned int Flags)
{
  CUcontext ctx;
  uintptr_t base;
  CUresult r;
  unsigned known
      = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;

  FK_ENTER (cuMemHostAlloc);
  if (pp == NULL || bytesize == 0 || (Flags & ~known) != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  r = fk_alloc_block (bytesize, ctx->device, Flags, FK_RANGE_HOST_ALLOC, &base);
  if (r == CUDA_SUCCESS)
    *pp = (void *) base;
  FK_RETURN (r);
}

CUresult
fk_cuMemFreeHost (void *p)
{
  FkRange *r;
  CUresult res;

  FK_ENTER (cuMemFreeHost);
  if (fk_current_context () == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  if ((res = fk_legacy_drain ()) != CUDA_SUCCESS)
    FK_RETURN (res);
  r = fk_range_find ((uintptr_t) p);
  if (r == NULL || r->base != (uintptr_t) p || r->kind != FK_RANGE_HOST_ALLOC)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  fk_free_block (r);
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemHostGetDevicePointer (CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
  FkRange *r;

  FK_ENTER (cuMemHostGetDevicePointer);
  if (pdptr == NULL || Flags != 0)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  if (fk_current_context () == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  r = fk_range_find ((uintptr_t) p);
  if (r == NULL || r->kind != FK_RANGE_HOST_ALLOC)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  /* Unified addressing: the device sees pinned memory at the host address. */
  *pdptr = (CUdeviceptr) p;
  FK_RETURN (CUDA_SUCCESS);
}

CUresult
fk_cuMemGetInfo (size_t *free_bytes, size_t *total)
{
  CUcontext ctx;
  FkDevice *d;

  FK_ENTER (cuMemGetInfo);
  if (free_bytes == NULL || total == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  ctx = fk_current_context ();
  if (ctx == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_CONTEXT);
  d = &fk.devices[ctx->device];
  *total = d->total;
  *free_bytes = d->total - d->used;
  FK_RETURN (CUDA_SUCCESS);
}

/* Copies and fills */

/* Checks a copy; on success *@device is whose access it uses (-1: the host's). */
CUresult
fk_copy_check (uintptr_t dst, uintptr_t src, size_t n, int *device)
{
  CUresult r;

  if (n == 0)
    return CUDA_SUCCESS;
  if (dst == 0 || src == 0)
    return CUDA_ERROR_INVALID_VALUE;
  /* Between two host buffers the host copies; otherwise @device's copy engine, which needs
   * access to every byte. */
  if (fk_memory_device (src) < 0 && fk_memory_device (dst) < 0)
    *device = -1;
  r = fk_check_access (src, n, *device, false);
  if (r == CUDA_SUCCESS)
    r = fk_check_access (dst, n, *device, true);
  return r;
}

CUresult
fk_fill_check (uintptr_t dst, size_t width, size_t count, int device)
{
  if (count == 0)
    return CUDA_SUCCESS;
  if (dst % width != 0 || count > SIZE_MAX / width)
    return CUDA_ERROR_INVALID_VALUE;
  return fk_check_access (dst, count * width, device, true);
}

void
fk_work_execute (const FkWork *w)
{
  switch (w->kind)
    {
    case FK_OP_COPY:
      if (w->n > 0)
        memmove ((void *) w->dst, (const void *) w->src, w->n);
      break;
    case FK_OP_FILL:
      switch (w->width)
        {
        case 1:
          memset ((void *) w->dst, (int) (w->value & 0xff), w->n);
          break;
        case 2:
          for (size_t i = 0; i < w->n; i++)
            ((uint16_t *) w->dst)[i] = (uint16_t) w->value;
          break;
        default:
          for (size_t i = 0; i < w->n; i++)
            ((uint32_t *) w->dst)[i] = w->value;
          break;
        }
      break;
    case FK_OP_FREE:
      fk_pool_free (w->dst, true);
      break;
    }
}

static CUresult
fk_copy_sync (uintptr_t dst, uintptr_t src, size_t n)
{
  CUcontext ctx = fk_current_context ();
  FkWork w = { FK_OP_COPY, 0, dst, src, n, 0, 0 };
  CUresult r;

  if (ctx == NULL)
    return CUDA_ERROR_INVALID_CONTEXT;
  w.device = ctx->device;
  r = fk_copy_check (dst, src, n, &w.device);
  if (r == CUDA_SUCCESS)
    r = fk_legacy_drain ();
  if (r == CUDA_SUCCESS)
    fk_work_execute (&w);
  return r;
}

static CUresult
fk_copy_async (uintptr_t dst, uintptr_t src, size_t n, CUstream stream)
{
  FkWork w = { FK_OP_COPY, 0, dst, src, n, 0, 0 };
  int device;
  CUresult r = fk_stream_for_work (stream, &device);

  w.device = device;
  if (r == CUDA_SUCCESS)
    r = fk_copy_check (dst, src, n, &w.device);
  if (r == CUDA_SUCCESS && n > 0)
    r = fk_stream_submit (stream, device, &w);
  return r;
}

CUresult
fk_cuMemcpy (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
  FK_ENTER (cuMemcpy);
  FK_RETURN (fk_copy_sync (dst, src, ByteCount));
}

CUresult
fk_cuMemcpyAsync (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
  FK_ENTER (cuMemcpyAsync);
  FK_RETURN (fk_copy_async (dst, src, ByteCount, hStream));
}

CUresult
fk_cuMemcpyHtoD (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
  FK_ENTER (cuMemcpyHtoD);
  FK_RETURN (fk_copy_sync (dstDevice, (uintptr_t) srcHost, ByteCount));
}

CUresult
fk_cuMemcpyDtoH (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
  FK_ENTER (cuMemcpyDtoH);
  FK_RETURN (fk_copy_sync ((uintptr_t) dstHost, srcDevice, ByteCount));
}

CUresult
fk_cuMemcpyDtoD (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
  FK_ENTER (cuMemcpyDtoD);
  FK_RETURN (fk_copy_sync (dstDevice, srcDevice, ByteCount));
}

CUresult
fk_cuMemcpyHtoDAsync (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                      CUstream hStream)
{
  FK_ENTER (cuMemcpyHtoDAsync);
  FK_RETURN (fk_copy_async (dstDevice, (uintptr_t) srcHost, ByteCount, hStream));
}

CUresult
fk_cuMemcpyDtoHAsync (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
  FK_ENTER (cuMemcpyDtoHAsync);
  FK_RETURN (fk_copy_async ((uintptr_t) dstHost, srcDevice, ByteCount, hStream));
}

CUresult
fk_cuMemcpyDtoDAsync (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                      CUstream hStream)
{
  FK_ENTER (cuMemcpyDtoDAsync);
  FK_RETURN (fk_copy_async (dstDevice, srcDevice, ByteCount, hStream));
}

static CUresult
fk_fill_sync (uintptr_t dst, uint32_t value, size_t width, size_t count)
{
  CUcontext ctx = fk_current_context ();
  FkWork w = { FK_OP_FILL, 0, dst, 0, count, width, value };
  CUresult r;

  if (ctx == NULL)
    return CUDA_ERROR_INVALID_CONTEXT;
  w.device = ctx->device;
  r = fk_fill_check (dst, width, count, w.device);
  if (r == CUDA_SUCCESS)
    r = fk_legacy_drain ();
  if (r == CUDA_SUCCESS)
    fk_work_execute (&w);
  return r;
}

static CUresult
fk_fill_async (uintptr_t dst, uint32_t value, size_t width, size_t count, CUstream stream)
{
  FkWork w = { FK_OP_FILL, 0, dst, 0, count, width, value };
  CUresult r = fk_stream_for_work (stream, &w.device);

  if (r == CUDA_SUCCESS)
    r = fk_fill_check (dst, width, count, w.device);
  if (r == CUDA_SUCCESS && count > 0)
    r = fk_stream_submit (stream, w.device, &w);
  return r;
}

CUresult
fk_cuMemsetD8 (CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
  FK_ENTER (cuMemsetD8);
  FK_RETURN (fk_fill_sync (dstDevice, uc, 1, N));
}

CUresult
fk_cuMemsetD32 (CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
  FK_ENTER (cuMemsetD32);
  FK_RETURN (fk_fill_sync (dstDevice, ui, 4, N));
}

CUresult
fk_cuMemsetD8Async (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
  FK_ENTER (cuMemsetD8Async);
  FK_RETURN (fk_fill_async (dstDevice, uc, 1, N, hStream));
}

CUresult
fk_cuMemsetD16Async (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
  FK_ENTER (cuMemsetD16Async);
  FK_RETURN (fk_fill_async (dstDevice, us, 2, N, hStream));
}

CUresult
fk_cuMemsetD32Async (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
  FK_ENTER (cuMemsetD32Async);
  FK_RETURN (fk_fill_async (dstDevice, ui, 4, N, hStream));
}

/* Pointer attributes */

/* Fills one attribute of @ptr; @strict: fail for pointers the fake does not know. */
static CUresult
fk_pointer_attribute (void *data, CUpointer_attribute attribute, uintptr_t ptr)
{
  FkRange *r = fk_range_find (ptr);
  CUcontext ctx = fk_current_context ();
  int ctx_device = ctx ? ctx->device : 0;
  uintptr_t range_base = 0;
  size_t range_size = 0;
  int device = CU_DEVICE_INVALID;
  unsigned type = 0;
  bool mapped = false;
  CUmemoryPool pool = NULL;

  if (r == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  range_base = r->base;
  range_size = r->size;
  switch (r->kind)
    {
    case FK_RANGE_ALLOC:
      device = ((FkAlloc *) r->obj)->device;
      type = CU_MEMORYTYPE_DEVICE;
      mapped = true;
      break;
    case FK_RANGE_HOST_ALLOC:
      device = ((FkAlloc *) r->obj)->device;
      type = CU_MEMORYTYPE_HOST;
      mapped = true;
      break;
    case FK_RANGE_POOL_ALLOC:
      device = fk_pool_alloc_device (r->obj);
      type = device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      if (device < 0)
        device = ctx_device;
      mapped = true;
      pool = fk_pool_alloc_pool (r->obj);
      break;
    case FK_RANGE_RESERVATION:
      {
        bool host = false;
        mapped = fk_reservation_lookup (r->obj, ptr, &device, &host, NULL, NULL);
        if (mapped)
          {
            type = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
            if (host)
              device = ctx_device;
          }
        break;
      }
    }

  switch (attribute)
    {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      if (!mapped)
        return CUDA_ERROR_INVALID_VALUE;
      *(unsigned *) data = type;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      if (!mapped)
        return CUDA_ERROR_INVALID_VALUE;
      *(int *) data = device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      if (!mapped)
        return CUDA_ERROR_INVALID_VALUE;
      *(CUcontext *) data = r->kind == FK_RANGE_ALLOC || r->kind == FK_RANGE_HOST_ALLOC
                                ? &fk.devices[device].ctx
                                : NULL;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!mapped)
        return CUDA_ERROR_INVALID_VALUE;
      if (attribute == CU_POINTER_ATTRIBUTE_HOST_POINTER && type != CU_MEMORYTYPE_HOST)
        return CUDA_ERROR_INVALID_VALUE;
      if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_POINTER)
        *(CUdeviceptr *) data = ptr;
      else
        *(void **) data = (void *) ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *(unsigned long long *) data = (unsigned long long) range_base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *(int *) data = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(CUdeviceptr *) data = range_base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *(size_t *) data = range_size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *(int *) data = mapped;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      *(CUmemoryPool *) data = pool;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      *(int *) data = attribute == CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE
                          ? r->kind == FK_RANGE_ALLOC
                          : 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult
fk_cuPointerGetAttribute (void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
  FK_ENTER (cuPointerGetAttribute);
  if (data == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  FK_RETURN (fk_pointer_attribute (data, attribute, ptr));
}

/* Size of the value of @attribute, 0 for attributes the fake does not know. */
static size_t
fk_pointer_attribute_size (CUpointer_attribute attribute)
{
  switch (attribute)
    {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      return sizeof (unsigned);
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      return sizeof (CUcontext);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      return sizeof (CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      return sizeof (void *);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      return sizeof (unsigned long long);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      return sizeof (CUdeviceptr);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      return sizeof (size_t);
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      return sizeof (CUmemoryPool);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      return sizeof (int);
    default:
      return 0;
    }
}

CUresult
fk_cuPointerGetAttributes (unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                           CUdeviceptr ptr)
{
  FK_ENTER (cuPointerGetAttributes);
  if (numAttributes == 0 || attributes == NULL || data == NULL)
    FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < numAttributes; i++)
    if (fk_pointer_attribute_size (attributes[i]) == 0 || data[i] == NULL)
      FK_RETURN (CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < numAttributes; i++)
    {
      /* Unlike cuPointerGetAttribute, unknown pointers get default values. */
      if (fk_pointer_attribute (data[i], attributes[i], ptr) != CUDA_SUCCESS)
        {
          memset (data[i], 0, fk_pointer_attribute_size (attributes[i]));
          if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
            *(int *) data[i] = CU_DEVICE_INVALID;
        }
    }
  FK_RETURN (CUDA_SUCCESS);
}

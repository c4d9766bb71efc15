/* memres - CUDA memory resources
 * buffer-wrap.c: buffers over foreign memory (memres_buffer_new_for_pointer()): what the driver
 * says the pointer is, the checks of the caller's device and flags against it, and the buffer
 * that owns no allocation, only a release function. Their close and release are buffer.c's. */
#include "memres-private.h"

/* What the driver says of a pointer: the memory's device and flags as memres names them, and the
 * extent of the driver's allocation (or mapping) that holds it (@range_size 0: not said). */
typedef struct
{
  gint device;
  MemresMemoryFlags flags;
  guint64 range_base;
  gsize range_size;
} PointerInfo;

/* Asks the driver what @ptr is (loading it first unless @loaded_only: then only a driver in use
 * already): one cuPointerGetAttributes() call. FALSE when there is none (then it is host memory),
 * or it does not know @ptr. */
static gboolean
query_pointer (guint64 ptr, gboolean loaded_only, PointerInfo *info)
{
  const MemresCudaDriver *drv
      = loaded_only ? _memres_cuda_driver_if_loaded () : memres_cuda_get_driver (NULL);
  CUpointer_attribute attrs[]
      = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
          CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
          CU_POINTER_ATTRIBUTE_RANGE_SIZE };
  unsigned int type = 0;
  int ordinal = -1;
  unsigned int managed = 0;
  CUdeviceptr range_base = 0;
  size_t range_size = 0;
  void *data[] = { &type, &ordinal, &managed, &range_base, &range_size };

  if (drv == NULL || drv->cuPointerGetAttributes == NULL)
    return FALSE;
  if (drv->cuPointerGetAttributes (G_N_ELEMENTS (attrs), attrs, data, (CUdeviceptr) ptr)
      != CUDA_SUCCESS)
    return FALSE;
  if (managed)
    {
      info->flags
          = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_MANAGED;
      info->device = ordinal;
    }
  else if (type == CU_MEMORYTYPE_DEVICE)
    {
      info->flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE;
      info->device = ordinal;
    }
  else if (type == CU_MEMORYTYPE_HOST)
    {
      /* page-locked (registered or cuMemHostAlloc) host memory */
      info->flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE;
      info->device = -1;
    }
  else
    return FALSE;
  /* an extent that does not hold @ptr is no extent (nothing is checked against it) */
  info->range_base = range_base;
  info->range_size = range_base <= ptr && ptr - range_base < range_size ? range_size : 0;
  return TRUE;
}

/* Device memory said to be on @device: refused when the driver is loaded and has no such
 * device (without a driver, nothing can check it, and nothing can use the memory either). */
static gboolean
wrap_device_exists (gint device, GError **error)
{
  gint n;

  if (!memres_cuda_get_device_count (&n, NULL) || device < n)
    return TRUE;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "device %d: the driver has %d device%s", device, n, n == 1 ? "" : "s");
  return FALSE;
}

/* The caller's description of memory it names (@flags not 0) against the driver's, @known, where
 * the driver knows the pointer as device memory (not managed): refused when the caller says the
 * host can access it (a read or write through the host would fault), or that it is on another
 * device than the driver says. Memory the driver does not know (pageable host memory), and every
 * other description, is taken on the caller's word. */
static gboolean
wrap_matches_driver (gpointer ptr, gsize size, gint device, MemresMemoryFlags flags,
                     const PointerInfo *known, GError **error)
{
  if ((known->flags & (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_MANAGED)) != 0)
    return TRUE;
  if (flags & MEMRES_MEMORY_HOST_ACCESSIBLE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%" G_GSIZE_FORMAT " bytes at %p described as host-accessible: the driver "
                   "says they are device memory of device %d (cuPointerGetAttributes), which "
                   "the host cannot read or write",
                   size, ptr, known->device);
      return FALSE;
    }
  if (device != known->device)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE,
                   "%" G_GSIZE_FORMAT " bytes at %p described as memory of device %d: the driver "
                   "says they are on device %d (cuPointerGetAttributes)",
                   size, ptr, device, known->device);
      return FALSE;
    }
  return TRUE;
}

/* @size bytes at @ptr, which the driver knows as device or managed memory (@known), against the
 * extent the driver gives of its allocation: refused when they run past it into memory that is
 * not the same device's (a copy or fill of the buffer would write memory that is not its own).
 * An extent that ends inside the range is followed by the next one (the mappings of one
 * reservation, which the driver gives one at a time) while the driver says it is memory of the
 * same kind and device. Page-locked host memory, and a driver that gives no extent, are taken
 * on the caller's word. */
static gboolean
wrap_within_driver_range (gpointer ptr, gsize size, const PointerInfo *known, GError **error)
{
  guint64 start = (guint64) (guintptr) ptr, end = start + size, reached = start;
  PointerInfo next = *known;

  if ((known->flags & MEMRES_MEMORY_HOST_ACCESSIBLE) && !(known->flags & MEMRES_MEMORY_MANAGED))
    return TRUE;
  for (;;)
    {
      if (next.range_size == 0)
        return TRUE;
      reached = next.range_base + next.range_size;
      if (reached >= end)
        return TRUE;
      if (!query_pointer (reached, TRUE, &next) || next.flags != known->flags
          || next.device != known->device)
        break;
    }
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "%" G_GSIZE_FORMAT " bytes at %p run past the end of the driver's allocation: "
               "its memory ends at 0x%" G_GINT64_MODIFIER "x, %" G_GUINT64_FORMAT
               " bytes in (cuPointerGetAttributes)",
               size, ptr, reached, reached - start);
  return FALSE;
}

/**
 * memres_buffer_new_for_pointer:
 * @ptr: (nullable): start of the memory (a host pointer, or a `CUdeviceptr` cast to a
 *   pointer); %NULL only with @size 0
 * @size: bytes
 * @device: the device ordinal the memory is on, or -1 for host memory; ignored when @flags
 *   is 0
 * @flags: what the memory can do; 0 asks the driver (cuPointerGetAttributes(): memory type,
 *   device ordinal, managed) when one loads, and otherwise takes it for pageable host memory.
 *   %MEMRES_MEMORY_MANAGED (cuMemAllocManaged memory; Since: 1.2) implies both accessible
 *   flags
 * @release: (nullable): called with @user_data when the buffer is closed (except in the child
 *   of a fork() made after the driver was initialized, for device-accessible memory wrapped
 *   before the fork: that release would free it through the driver, and is skipped)
 * @user_data: data for @release
 * @error: return location for a #GError, or %NULL
 *
 * Wraps memory memres did not allocate, so that the copy and fill functions work on it. The
 * buffer has no resource (memres_buffer_get_resource() returns %NULL). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a %NULL @ptr with a non-zero @size, a range that
 * wraps past the end of the address space, a @size above `G_MAXSSIZE`, a @device below -1,
 * device-only memory (%MEMRES_MEMORY_DEVICE_ACCESSIBLE without
 * %MEMRES_MEMORY_HOST_ACCESSIBLE) with @device -1, device-accessible memory on a
 * @device the loaded driver does not have (cuDeviceGetCount(); not checked when no driver
 * loads), or @flags other than
 * %MEMRES_MEMORY_DEVICE_ACCESSIBLE, %MEMRES_MEMORY_HOST_ACCESSIBLE and %MEMRES_MEMORY_MANAGED
 * (wrapped memory is not imported, resizable, shareable or stream-ordered by memres), and
 * memory described as host-accessible (not managed) that the driver knows as device memory
 * (cuPointerGetAttributes, asked where @flags is not 0 too when the driver is loaded already:
 * a host read or write of it would fault), and device or managed memory the driver knows whose
 * @size bytes run past the end of the driver's allocation (its extent,
 * `CU_POINTER_ATTRIBUTE_RANGE_START_ADDR` and `CU_POINTER_ATTRIBUTE_RANGE_SIZE` of the same
 * cuPointerGetAttributes call, followed across adjacent mappings of the same device, as of a
 * VMM reservation; checked whatever @flags say; page-locked host memory is not: a copy or fill
 * of the buffer would write memory that is not its own); %MEMRES_ERROR_WRONG_DEVICE (Since:
 * 2.0) for device memory described as on another @device than the driver says it is on.
 *
 * Returns: (transfer full) (nullable): a new open buffer, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresBuffer *
memres_buffer_new_for_pointer (gpointer ptr, gsize size, gint device, MemresMemoryFlags flags,
                               GDestroyNotify release, gpointer user_data, GError **error)
{
  PointerInfo known;
  gboolean known_by_driver;
  MemresBuffer *buf;

  if (ptr == NULL && size > 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "cannot wrap a NULL pointer of %" G_GSIZE_FORMAT " bytes", size);
      return NULL;
    }
  if ((guintptr) ptr > G_MAXSIZE - size)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%" G_GSIZE_FORMAT " bytes at %p run past the end of the address space", size,
                   ptr);
      return NULL;
    }
  if (size > G_MAXSSIZE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%" G_GSIZE_FORMAT " bytes: no buffer is larger than %" G_GSSIZE_FORMAT " bytes",
                   size, G_MAXSSIZE);
      return NULL;
    }
  if (device < -1)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "device %d: a device ordinal is 0 or more, or -1 for host memory", device);
      return NULL;
    }
  if ((flags & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE))
          == MEMRES_MEMORY_DEVICE_ACCESSIBLE
      && device < 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "device memory that the host cannot access must name its device (not -1)");
      return NULL;
    }
  if ((flags
       & ~(MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_MANAGED))
      != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "flags 0x%x: wrapped memory can only be described as device and/or host "
                   "accessible, or managed",
                   (guint) flags);
      return NULL;
    }
  if (flags & MEMRES_MEMORY_MANAGED)
    flags |= MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE;
  if ((flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE) && device >= 0
      && !wrap_device_exists (device, error))
    return NULL;
  /* the driver is asked where @flags leave it to it; where the caller describes the memory, a
   * driver memres has not loaded is not loaded for this: wrapping host memory (a NumPy array
   * through DLPack) must not initialize CUDA (a fork() after cuInit leaves the child without
   * it), the caller's word is taken then */
  known_by_driver = ptr != NULL && query_pointer ((guint64) (guintptr) ptr, flags != 0, &known);
  if (flags == 0)
    {
      flags = known_by_driver ? known.flags : MEMRES_MEMORY_HOST_ACCESSIBLE;
      device = known_by_driver ? known.device : -1;
    }
  else if (known_by_driver && !wrap_matches_driver (ptr, size, device, flags, &known, error))
    return NULL;
  if (known_by_driver && !wrap_within_driver_range (ptr, size, &known, error))
    return NULL;

  buf = _memres_buffer_struct_alloc ();
  memset (buf, 0, sizeof *buf);
  g_atomic_ref_count_init (&buf->ref);
  buf->alloc.address = (guint64) (guintptr) ptr;
  buf->alloc.size = size;
  buf->device = device;
  buf->flags = flags;
  if (release != NULL)
    {
      buf->release = g_new (MemresRelease, 1);
      buf->release->func = release;
      buf->release->data = user_data;
      buf->release->generation = g_atomic_int_get (&_memres_fork_generation_);
    }
  return buf;
}

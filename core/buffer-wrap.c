/* memres - CUDA memory resources
 * buffer-wrap.c: buffers over foreign memory (memres_buffer_new_for_pointer()): what the driver
 * says the pointer is, the checks of the caller's device and flags against it, and the buffer
 * that owns no allocation, only a release function. Their close and release are buffer.c's. */
#include "memres-private.h"

/* Asks the driver what @ptr is (loading it first unless @loaded_only: then only a driver in use
 * already); FALSE when there is none (then it is host memory), or it does not know @ptr. */
static gboolean
query_pointer (gpointer ptr, gboolean loaded_only, gint *device, MemresMemoryFlags *flags)
{
  const MemresCudaDriver *drv
      = loaded_only ? _memres_cuda_driver_if_loaded () : memres_cuda_get_driver (NULL);
  CUpointer_attribute attrs[]
      = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
          CU_POINTER_ATTRIBUTE_IS_MANAGED };
  unsigned int type = 0;
  int ordinal = -1;
  unsigned int managed = 0;
  void *data[] = { &type, &ordinal, &managed };

  if (drv == NULL || drv->cuPointerGetAttributes == NULL)
    return FALSE;
  if (drv->cuPointerGetAttributes (G_N_ELEMENTS (attrs), attrs, data, (CUdeviceptr) ptr)
      != CUDA_SUCCESS)
    return FALSE;
  if (managed)
    {
      *flags
          = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_MANAGED;
      *device = ordinal;
    }
  else if (type == CU_MEMORYTYPE_DEVICE)
    {
      *flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE;
      *device = ordinal;
    }
  else if (type == CU_MEMORYTYPE_HOST)
    {
      /* page-locked (registered or cuMemHostAlloc) host memory */
      *flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE;
      *device = -1;
    }
  else
    return FALSE;
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

/* The caller's description of memory it names (@flags not 0) against the driver's, where the
 * driver knows the pointer as device memory (not managed): refused when the caller says the host
 * can access it (a read or write through the host would fault), or that it is on another device
 * than the driver says. Memory the driver does not know (pageable host memory), and every other
 * description, is taken on the caller's word. */
static gboolean
wrap_matches_driver (gpointer ptr, gsize size, gint device, MemresMemoryFlags flags, GError **error)
{
  MemresMemoryFlags known = 0;
  gint known_device = -1;

  /* a driver memres has not loaded is not loaded for this: wrapping host memory (a NumPy array
   * through DLPack) must not initialize CUDA (a fork() after cuInit leaves the child without
   * it); the caller's word is taken then */
  if (ptr == NULL || flags == 0 || !query_pointer (ptr, TRUE, &known_device, &known)
      || (known & (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_MANAGED)) != 0)
    return TRUE;
  if (flags & MEMRES_MEMORY_HOST_ACCESSIBLE)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%" G_GSIZE_FORMAT " bytes at %p described as host-accessible: the driver "
                   "says they are device memory of device %d (cuPointerGetAttributes), which "
                   "the host cannot read or write",
                   size, ptr, known_device);
      return FALSE;
    }
  if (device != known_device)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE,
                   "%" G_GSIZE_FORMAT " bytes at %p described as memory of device %d: the driver "
                   "says they are on device %d (cuPointerGetAttributes)",
                   size, ptr, device, known_device);
      return FALSE;
    }
  return TRUE;
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
 * a host read or write of it would fault); %MEMRES_ERROR_WRONG_DEVICE (Since: 2.0) for device
 * memory described as on another
 * @device than the driver says it is on.
 *
 * Returns: (transfer full) (nullable): a new open buffer, or %NULL with @error set
 *
 * Since: 1.0
 */
MemresBuffer *
memres_buffer_new_for_pointer (gpointer ptr, gsize size, gint device, MemresMemoryFlags flags,
                               GDestroyNotify release, gpointer user_data, GError **error)
{
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
  if (flags == 0 && (ptr == NULL || !query_pointer (ptr, FALSE, &device, &flags)))
    {
      flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
      device = -1;
    }
  else if (!wrap_matches_driver (ptr, size, device, flags, error))
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

/* memres - CUDA memory resources
 * dlpack.c: buffers as DLPack 1.x (or unversioned 0.x) tensors and DLPack 1.x tensors as
 * buffers. The exported tensor is one allocation (the structure, then its shape and strides)
 * holding a reference on the buffer; a wrapped tensor is a buffer of foreign memory whose
 * release calls the tensor's deleter. Both directions check the tensor's geometry with the same
 * function.
 *
 * Part of libmemres (memres-dlpack.h is its API), kept in interop/ beside the other exchanges
 * with array libraries: it is written against the public API alone (buffers through their
 * getters and memres_buffer_new_for_pointer(), the driver through the plugin SDK's table), so it
 * knows nothing of the core's structures (public_api_sources, the top-level meson.build). */
#include <memres/memres.h>
#include <memres/memres-plugin.h> /* the driver table (memres-cuda.h) */

#include <string.h>

/* The bytes a tensor's elements cover, relative to data + byte_offset: [start, start + size). */
typedef struct
{
  gint64 start; /* 0 unless a stride is negative */
  guint64 size; /* 0 for a tensor with an extent of 0 */
} TensorSpan;

static gboolean
geometry_error (GError **error, const char *what)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "DLPack tensor: %s", what);
  return FALSE;
}

/* Checks dtype, ndim, shape and strides, and computes the span of bytes the elements cover.
 * Every multiplication and addition is checked: a forged shape or stride is an error. */
static gboolean
tensor_span (MemresDLDataType dtype, gint ndim, const gint64 *shape, const gint64 *strides,
             TensorSpan *span, GError **error)
{
  guint64 element_size;
  gint64 lo = 0, hi = 0; /* element offsets of the first and last element */
  guint64 count = 1;

  if (ndim < 0 || ndim > MEMRES_DLPACK_MAX_NDIM)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "DLPack tensor: %d dimensions (0 to %d are accepted)", ndim,
                   MEMRES_DLPACK_MAX_NDIM);
      return FALSE;
    }
  if (ndim > 0 && shape == NULL)
    return geometry_error (error, "a NULL shape with dimensions");
  if (dtype.bits == 0 || dtype.lanes == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "DLPack tensor: a data type of %u bits and %u lanes has no size",
                   (guint) dtype.bits, (guint) dtype.lanes);
      return FALSE;
    }
  element_size = (guint64) dtype.bits * dtype.lanes;
  if (element_size % 8 != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "DLPack tensor: elements of %" G_GUINT64_FORMAT
                   " bits are not whole bytes (sub-byte types are not supported)",
                   element_size);
      return FALSE;
    }
  element_size /= 8;

  for (gint i = 0; i < ndim; i++)
    if (shape[i] < 0)
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "DLPack tensor: dimension %d has a negative extent (%" G_GINT64_FORMAT ")", i,
                     shape[i]);
        return FALSE;
      }
  /* the extents other than 0 multiply to a count that fits (the compact strides of an empty
   * tensor are their products) */
  for (gint i = 0; i < ndim; i++)
    if (!g_uint64_checked_mul (&count, count, (guint64) MAX (shape[i], 1)) || count > G_MAXINT64)
      return geometry_error (error, "the number of elements overflows");
  count = 1;
  for (gint i = 0; i < ndim; i++)
    if (shape[i] == 0)
      {
        span->start = 0;
        span->size = 0; /* no element: strides do not matter */
        return TRUE;
      }

  for (gint i = ndim - 1; i >= 0; i--)
    {
      gint64 stride, reach;

      /* compact row-major without strides: the product of the later extents (it fits) */
      stride = strides != NULL ? strides[i] : (gint64) count;
      if (__builtin_mul_overflow (shape[i] - 1, stride, &reach)
          || (reach > 0 ? __builtin_add_overflow (hi, reach, &hi)
                        : __builtin_add_overflow (lo, reach, &lo)))
        return geometry_error (error, "shape and strides overflow 64 bits");
      count *= (guint64) shape[i];
    }
  /* elements lo..hi, each element_size bytes */
  if (lo == G_MININT64 || (guint64) hi >= G_MAXINT64 / element_size
      || (guint64) -lo > G_MAXINT64 / element_size
      || !g_uint64_checked_mul (&span->size, (guint64) hi + (guint64) -lo + 1, element_size))
    return geometry_error (error, "the span of the strides overflows 64 bits");
  span->start = lo * (gint64) element_size;
  return TRUE;
}

/* Adds @span to @byte_offset: the first byte and the end of the elements from the base address.
 * The first byte must not lie before the base. */
static gboolean
span_from_base (const TensorSpan *span, guint64 byte_offset, guint64 *first, guint64 *end,
                GError **error)
{
  if (span->start < 0 && (guint64) -span->start > byte_offset)
    return geometry_error (error, "negative strides reach before the start of the memory");
  *first = byte_offset + span->start;
  if (!g_uint64_checked_add (end, *first, span->size))
    return geometry_error (error, "the byte offset and the span overflow 64 bits");
  return TRUE;
}

/* The DLPack device of a buffer's memory: device memory, pinned host memory, managed memory
 * (which the driver tells apart from pinned memory: both are host and device accessible) or
 * host memory. */
static MemresDLDevice
buffer_dl_device (MemresBuffer *buf)
{
  MemresMemoryFlags flags = memres_buffer_get_flags (buf);
  gint device = memres_buffer_get_device (buf);
  gboolean on_device = (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE) != 0;
  gboolean on_host = (flags & MEMRES_MEMORY_HOST_ACCESSIBLE) != 0;
  MemresDLDevice dl = { MEMRES_DL_CPU, 0 };

  if (on_device && !on_host)
    {
      dl.device_type = MEMRES_DL_CUDA;
      dl.device_id = MAX (device, 0);
    }
  else if (on_device && on_host)
    {
      const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
      unsigned int managed = 0;

      /* the buffer's flag first: memory of a managed pool does not report IS_MANAGED */
      if ((flags & MEMRES_MEMORY_MANAGED)
          || (drv != NULL && drv->cuPointerGetAttribute != NULL
              && drv->cuPointerGetAttribute (&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                             (CUdeviceptr) memres_buffer_get_address (buf))
                     == CUDA_SUCCESS
              && managed))
        {
          dl.device_type = MEMRES_DL_CUDA_MANAGED;
          dl.device_id = MAX (device, 0);
        }
      else
        dl.device_type = MEMRES_DL_CUDA_HOST;
    }
  return dl;
}

/* What an exported tensor is allocated with: the structure, then shape and strides. */
typedef struct
{
  MemresDLManagedTensorVersioned tensor;
  gint64 dims[]; /* ndim extents, then ndim strides */
} ExportedTensor;

/* The same for the unversioned (DLPack 0.x) tensor. */
typedef struct
{
  MemresDLManagedTensor tensor;
  gint64 dims[];
} ExportedTensorUnversioned;

static void
exported_tensor_delete (MemresDLManagedTensorVersioned *self)
{
  memres_buffer_unref (self->manager_ctx);
  g_free (self);
}

static void
exported_tensor_unversioned_delete (MemresDLManagedTensor *self)
{
  memres_buffer_unref (self->manager_ctx);
  g_free (self);
}

/* Checks what an export of @buf is asked for. */
static gboolean
check_export (MemresBuffer *buf, MemresDLDataType dtype, gint ndim, const gint64 *shape,
              const gint64 *strides, guint64 byte_offset, GError **error)
{
  TensorSpan span;
  guint64 first, end;

  if (memres_buffer_is_closed (buf))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED, "the buffer is closed");
      return FALSE;
    }
  /* a sleeping buffer has no memory under its address: a new consumer would read nothing (one
   * that took the tensor before the sleep keeps it: memres-sleep.h) */
  if (memres_buffer_is_asleep (buf))
    {
      g_set_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_ASLEEP,
                   "cannot export the buffer through DLPack: it is asleep (tag \"%s\"): wake "
                   "its tag first (memres_resource_wake())",
                   memres_buffer_get_tag (buf));
      return FALSE;
    }
  /* DLPack has no device type for memory that neither the host nor a CUDA device can reach
   * (an application kind's): kDLCPU would be a lie a consumer dereferences */
  if ((memres_buffer_get_flags (buf)
       & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE))
      == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "DLPack export: the buffer's memory is neither host- nor device-accessible "
                   "(no DLPack device type describes it)");
      return FALSE;
    }
  if (!tensor_span (dtype, ndim, shape, strides, &span, error)
      || !span_from_base (&span, byte_offset, &first, &end, error))
    return FALSE;
  if (span.size > 0 && end > memres_buffer_get_size (buf))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "DLPack tensor: its elements end at byte %" G_GUINT64_FORMAT
                   ", past the buffer's %" G_GSIZE_FORMAT " bytes",
                   end, memres_buffer_get_size (buf));
      return FALSE;
    }
  return TRUE;
}

/* Fills @t for @buf (checked by check_export()); @dims has room for 2 × @ndim values. */
static void
fill_tensor (MemresDLTensor *t, gint64 *dims, MemresBuffer *buf, MemresDLDataType dtype, gint ndim,
             const gint64 *shape, const gint64 *strides, guint64 byte_offset)
{
  t->data = memres_buffer_get_pointer (buf);
  t->device = buffer_dl_device (buf);
  t->ndim = ndim;
  t->dtype = dtype;
  t->byte_offset = byte_offset;
  if (ndim > 0)
    {
      gint64 compact = 1;

      t->shape = dims;
      t->strides = dims + ndim;
      memcpy (t->shape, shape, (gsize) ndim * sizeof (gint64));
      for (gint i = ndim - 1; i >= 0; i--)
        {
          /* tensor_span() checked that these products fit */
          t->strides[i] = strides != NULL ? strides[i] : compact;
          compact *= MAX (shape[i], 1);
        }
    }
}

/**
 * memres_buffer_export_dlpack:
 * @buf: an open #MemresBuffer
 * @dtype: the element type
 * @ndim: number of dimensions, 0 (a scalar) to %MEMRES_DLPACK_MAX_NDIM
 * @shape: (array length=ndim) (nullable): the extents (%NULL only with @ndim 0)
 * @strides: (array length=ndim) (nullable): strides in elements (negative ones allowed), or
 *   %NULL for a compact row-major tensor
 * @byte_offset: bytes from the buffer's start to the first element
 * @error: return location for a #GError, or %NULL
 *
 * Describes the buffer's memory as a DLPack 1.x tensor for another array library (PyTorch,
 * CuPy, JAX, NumPy...). The tensor's `data` is the buffer's pointer and its device is taken
 * from the memory: `kDLCUDA` (device_id: the buffer's device) for device memory, `kDLCUDAHost`
 * for pinned host memory, `kDLCUDAManaged` for managed memory (a buffer flagged
 * %MEMRES_MEMORY_MANAGED, or told apart from pinned memory with
 * cuPointerGetAttribute(`CU_POINTER_ATTRIBUTE_IS_MANAGED`)), `kDLCPU` for host memory.
 * Memory that is neither (a buffer without %MEMRES_MEMORY_DEVICE_ACCESSIBLE and
 * %MEMRES_MEMORY_HOST_ACCESSIBLE, such as an application kind's) has no DLPack device and is
 * refused.
 * The strides are always filled in (computed for a compact tensor when @strides is %NULL);
 * @shape and @strides are copied. Flags are 0 (writable, not a copy).
 *
 * The tensor holds a reference on @buf until its deleter runs: the consumer calls
 * `tensor->deleter (tensor)` exactly once, from any thread, when it is done (this drops the
 * reference and frees the tensor). The memory stays allocated while the tensor lives unless
 * someone calls memres_buffer_close() on @buf: closing frees the memory under the consumer, so
 * a buffer handed out through DLPack is released with memres_buffer_unref() only. No stream
 * synchronization is done: work queued on the buffer must be ordered before the consumer's
 * (DLPack's `__dlpack__(stream=...)` protocol is the caller's).
 *
 * For Python, a capsule named `"dltensor_versioned"` over the returned pointer is what
 * `torch.from_dlpack()` and `cupy.from_dlpack()` take (docs/interop.md has the ctypes recipe).
 * A consumer that asks for no version (`__dlpack__` without `max_version`, as JAX 0.11 does)
 * gets memres_buffer_export_dlpack_unversioned() in a `"dltensor"` capsule instead.
 *
 * Thread safety: like every call on @buf; the tensor may be deleted in any thread.
 *
 * A buffer asleep (memres_resource_sleep()) is refused: it has no memory until its wake. A
 * tensor exported before the sleep stays valid as an object, but its memory is gone until the
 * wake (docs/sleep.md).
 *
 * Errors: %MEMRES_ERROR_CLOSED; %MEMRES_SLEEP_ERROR_ASLEEP for a buffer asleep (since 2.0);
 * %MEMRES_ERROR_INVALID_ARGUMENT for bad geometry (dimensions out
 * of range, a NULL @shape with dimensions, a negative extent, a data type of size 0, a shape
 * or strides whose span overflows 64 bits, negative strides reaching before the buffer, or
 * elements running past the buffer's size); %MEMRES_ERROR_NOT_SUPPORTED for elements that are
 * not whole bytes, and for memory neither host- nor device-accessible (since 2.0).
 *
 * Returns: (transfer full): a new tensor, to be released with its deleter; %NULL on error
 *
 * Since: 1.2
 */
MemresDLManagedTensorVersioned *
memres_buffer_export_dlpack (MemresBuffer *buf, MemresDLDataType dtype, gint ndim,
                             const gint64 *shape, const gint64 *strides, guint64 byte_offset,
                             GError **error)
{
  ExportedTensor *exported;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!check_export (buf, dtype, ndim, shape, strides, byte_offset, error))
    return NULL;
  exported = g_malloc0 (sizeof *exported + 2 * (gsize) ndim * sizeof (gint64));
  exported->tensor.version.major = MEMRES_DLPACK_MAJOR_VERSION;
  exported->tensor.version.minor = MEMRES_DLPACK_MINOR_VERSION;
  exported->tensor.manager_ctx = memres_buffer_ref (buf);
  exported->tensor.deleter = exported_tensor_delete;
  exported->tensor.flags = 0;
  fill_tensor (&exported->tensor.dl_tensor, exported->dims, buf, dtype, ndim, shape, strides,
               byte_offset);
  return &exported->tensor;
}

/**
 * memres_buffer_export_dlpack_unversioned:
 * @buf: an open #MemresBuffer
 * @dtype: the element type
 * @ndim: number of dimensions, 0 (a scalar) to %MEMRES_DLPACK_MAX_NDIM
 * @shape: (array length=ndim) (nullable): the extents (%NULL only with @ndim 0)
 * @strides: (array length=ndim) (nullable): strides in elements (negative ones allowed), or
 *   %NULL for a compact row-major tensor
 * @byte_offset: bytes from the buffer's start to the first element
 * @error: return location for a #GError, or %NULL
 *
 * As memres_buffer_export_dlpack(), in the unversioned layout of DLPack before 1.0
 * (#MemresDLManagedTensor: no version, no flags, so nothing says "read-only" or "copied":
 * the memory is the buffer's, writable). This is what a consumer gets that calls
 * `__dlpack__` without `max_version` (or with one below 1.0), as JAX 0.11 does; in Python
 * it goes into a capsule named `"dltensor"`. The same tensor, device and rules: it holds a
 * reference on @buf until the consumer calls `tensor->deleter (tensor)`, exactly once, from any
 * thread; memres_buffer_close() on @buf frees the memory under the consumer; no stream
 * synchronization is done.
 *
 * Thread safety: like every call on @buf; the tensor may be deleted in any thread.
 *
 * Errors: as memres_buffer_export_dlpack(): %MEMRES_ERROR_CLOSED, %MEMRES_SLEEP_ERROR_ASLEEP
 * for a buffer asleep, %MEMRES_ERROR_INVALID_ARGUMENT for bad geometry, %MEMRES_ERROR_NOT_SUPPORTED
 * for elements that are not whole bytes and for memory neither host- nor device-accessible
 * (since 2.0).
 *
 * Returns: (transfer full): a new tensor, to be released with its deleter; %NULL on error
 *
 * Since: 1.2
 */
MemresDLManagedTensor *
memres_buffer_export_dlpack_unversioned (MemresBuffer *buf, MemresDLDataType dtype, gint ndim,
                                         const gint64 *shape, const gint64 *strides,
                                         guint64 byte_offset, GError **error)
{
  ExportedTensorUnversioned *exported;

  g_return_val_if_fail (buf != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!check_export (buf, dtype, ndim, shape, strides, byte_offset, error))
    return NULL;
  exported = g_malloc0 (sizeof *exported + 2 * (gsize) ndim * sizeof (gint64));
  exported->tensor.manager_ctx = memres_buffer_ref (buf);
  exported->tensor.deleter = exported_tensor_unversioned_delete;
  fill_tensor (&exported->tensor.dl_tensor, exported->dims, buf, dtype, ndim, shape, strides,
               byte_offset);
  return &exported->tensor;
}

static void
wrapped_tensor_release (gpointer data)
{
  MemresDLManagedTensorVersioned *tensor = data;

  tensor->deleter (tensor);
}

/* The flags and device memres gives memory of a DLPack device. */
static gboolean
wrap_device (const MemresDLDevice *dl, MemresMemoryFlags *flags, gint *device, GError **error)
{
  switch (dl->device_type)
    {
    case MEMRES_DL_CPU:
      *flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
      *device = -1;
      return TRUE;
    case MEMRES_DL_CUDA_HOST:
      *flags = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE;
      *device = -1;
      return TRUE;
    case MEMRES_DL_CUDA:
    case MEMRES_DL_CUDA_MANAGED:
      if (dl->device_id < 0)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "DLPack tensor: device id %d is not a device ordinal", dl->device_id);
          return FALSE;
        }
      *flags = MEMRES_MEMORY_DEVICE_ACCESSIBLE;
      if (dl->device_type == MEMRES_DL_CUDA_MANAGED)
        *flags |= MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_MANAGED;
      *device = dl->device_id;
      return TRUE;
    default:
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "DLPack tensor: device type %d is not memory memres can use (kDLCPU 1, "
                   "kDLCUDA 2, kDLCUDAHost 3 and kDLCUDAManaged 13 are)",
                   (int) dl->device_type);
      return FALSE;
    }
}

/**
 * memres_buffer_new_for_dlpack:
 * @tensor: (transfer full): a DLPack 1.x tensor from another library
 * @error: return location for a #GError, or %NULL
 *
 * Wraps another library's tensor as a #MemresBuffer of foreign memory (as
 * memres_buffer_new_for_pointer() does), so that memres's calls (memres_buffer_read(),
 * memres_buffer_copy_to(), ...) reach its bytes. The buffer covers the bytes the tensor's
 * elements span: it starts at `data + byte_offset` (lower where a stride is negative) and is
 * empty for a tensor with an extent of 0. Its device and flags come from the device type:
 * `kDLCPU` host memory (device -1), `kDLCUDAHost` pinned memory (device -1, host and device
 * accessible), `kDLCUDA` device memory of `device_id`, `kDLCUDAManaged` managed memory of
 * `device_id` (host and device accessible, %MEMRES_MEMORY_MANAGED: the advice and prefetch
 * functions of memres-managed.h accept it). The buffer has no resource.
 *
 * On success the buffer owns the tensor: closing the buffer (memres_buffer_close(), or the last
 * memres_buffer_unref()) calls `tensor->deleter (tensor)` exactly once, in the thread that
 * closes it. On failure nothing is taken: the caller still owns @tensor and calls its deleter.
 *
 * Thread safety: the tensor must not be changed while this runs.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for a NULL @tensor, a tensor without a deleter (memres
 * could not hand it back), a NULL data pointer with elements, a negative device id or one of device
 * memory the loaded driver does not have (cuDeviceGetCount()), bad
 * geometry (as memres_buffer_export_dlpack()), or a span that runs past the end of the address
 * space; %MEMRES_ERROR_NOT_SUPPORTED for a major version other than
 * %MEMRES_DLPACK_MAJOR_VERSION, a device type memres cannot use (ROCm, Vulkan, OpenCL, ...), a
 * read-only tensor (%MEMRES_DLPACK_FLAG_READ_ONLY: memres buffers are writable) or elements
 * that are not whole bytes.
 *
 * Returns: (transfer full): a new buffer; %NULL on error
 *
 * Since: 1.2
 */
MemresBuffer *
memres_buffer_new_for_dlpack (MemresDLManagedTensorVersioned *tensor, GError **error)
{
  const MemresDLTensor *t;
  MemresMemoryFlags flags;
  gint device;
  TensorSpan span;
  guint64 first, end;

  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (tensor == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "DLPack tensor: NULL instead of a tensor");
      return NULL;
    }
  t = &tensor->dl_tensor;
  if (tensor->version.major != MEMRES_DLPACK_MAJOR_VERSION)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "DLPack tensor: version %u.%u (memres reads major version %d)",
                   tensor->version.major, tensor->version.minor, MEMRES_DLPACK_MAJOR_VERSION);
      return NULL;
    }
  if (tensor->deleter == NULL)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "DLPack tensor: no deleter (a wrapped tensor is handed back through it)");
      return NULL;
    }
  if ((tensor->flags & MEMRES_DLPACK_FLAG_READ_ONLY) != 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "DLPack tensor: read-only (memres buffers are writable)");
      return NULL;
    }
  if (!wrap_device (&t->device, &flags, &device, error)
      || !tensor_span (t->dtype, t->ndim, t->shape, t->strides, &span, error)
      || !span_from_base (&span, t->byte_offset, &first, &end, error))
    return NULL;
  if (t->data == NULL && span.size > 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "DLPack tensor: NULL data with %" G_GUINT64_FORMAT " bytes of elements",
                   span.size);
      return NULL;
    }
  if (span.size > 0 && (first > G_MAXSIZE - (guintptr) t->data || end > G_MAXSIZE))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "DLPack tensor: %" G_GUINT64_FORMAT " bytes at %p + %" G_GUINT64_FORMAT
                   " run past the end of the address space",
                   span.size, t->data, first);
      return NULL;
    }
  return memres_buffer_new_for_pointer (span.size > 0 ? (guint8 *) t->data + first : NULL,
                                        span.size, device, flags, wrapped_tensor_release, tensor,
                                        error);
}

/* memres - CUDA memory resources
 * fuzz-dlpack.c: libFuzzer target for the DLPack checks (memres_buffer_new_for_dlpack(),
 * memres_buffer_export_dlpack()). The input is a forged tensor: a 40-byte header (version,
 * flags, device, ndim, dtype, byte offset, whether strides follow) and its shape and strides.
 * Any input must be wrapped or refused with MEMRES_ERROR_INVALID_ARGUMENT or
 * MEMRES_ERROR_NOT_SUPPORTED, without a crash; a refused tensor's deleter never runs, a wrapped
 * one's runs exactly once when its buffer closes, and the buffer spans exactly the bytes the
 * elements reach. The same geometry exported from a 4 KiB host buffer must succeed exactly when
 * every element lies inside it (checked element by element for small tensors). Memory is never
 * read: the wrapped pointer is made up. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <memres/memres-dlpack.h>

#include "memres-private.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define HEADER      40
#define EXPORT_SIZE 4096
#define CHECK_MAX   4096 /* elements enumerated one by one */

static int n_deleted;

static void
count_delete (MemresDLManagedTensorVersioned *self)
{
  n_deleted++;
}

/* Element offsets (in elements) of the lowest and highest element, by enumeration; FALSE when
 * there are too many elements to enumerate, or none. */
static gboolean
enumerate_span (gint ndim, const gint64 *shape, const gint64 *strides, gint64 *lo, gint64 *hi)
{
  gint64 index[MEMRES_DLPACK_MAX_NDIM] = { 0 };
  guint64 count = 1;

  for (gint i = 0; i < ndim; i++)
    {
      if (shape[i] <= 0 || !g_uint64_checked_mul (&count, count, (guint64) shape[i])
          || count > CHECK_MAX)
        return FALSE;
      if (strides[i] > (1 << 20) || strides[i] < -(1 << 20))
        return FALSE; /* offsets (and their bytes) that fit: nothing below may overflow */
    }
  *lo = G_MAXINT64;
  *hi = G_MININT64;
  for (guint64 n = 0; n < count; n++)
    {
      gint64 off = 0;

      for (gint i = 0; i < ndim; i++)
        off += index[i] * strides[i];
      *lo = MIN (*lo, off);
      *hi = MAX (*hi, off);
      for (gint i = ndim - 1; i >= 0; i--)
        {
          if (++index[i] < shape[i])
            break;
          index[i] = 0;
        }
    }
  return TRUE;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static guint8 host[EXPORT_SIZE];
  gint64 shape[MEMRES_DLPACK_MAX_NDIM + 8], strides[MEMRES_DLPACK_MAX_NDIM + 8];
  gint64 compact[MEMRES_DLPACK_MAX_NDIM + 8];
  MemresDLManagedTensorVersioned t;
  MemresDLManagedTensorVersioned *exported;
  MemresBuffer *buf, *host_buf;
  GError *error = NULL;
  gboolean has_strides;
  gint32 ndim;
  gsize n_dims;
  gint64 lo, hi;
  guint64 element_size;

  if (size < HEADER)
    return 0;
  memset (&t, 0, sizeof t);
  memcpy (&t.version.major, data, 4);
  t.version.major %= 3; /* mostly 1 */
  memcpy (&t.version.minor, data + 4, 4);
  memcpy (&t.flags, data + 8, 8);
  t.flags = (t.flags & ~MEMRES_DLPACK_FLAG_READ_ONLY)
            | (data[39] & 1 ? MEMRES_DLPACK_FLAG_READ_ONLY : 0);
  memcpy (&t.dl_tensor.device.device_type, data + 16, 4);
  t.dl_tensor.device.device_type %= 16;
  memcpy (&t.dl_tensor.device.device_id, data + 20, 4);
  memcpy (&ndim, data + 24, 4);
  if (ndim >= 0)
    ndim %= MEMRES_DLPACK_MAX_NDIM + 4;
  t.dl_tensor.ndim = ndim;
  memcpy (&t.dl_tensor.dtype, data + 28, 4);
  memcpy (&t.dl_tensor.byte_offset, data + 32, 7);
  has_strides = (data[39] & 2) != 0;
  t.deleter = data[39] & 4 ? NULL : count_delete;
  t.dl_tensor.data = data[39] & 8 ? NULL : (gpointer) (guintptr) 0x100000;

  n_dims = MIN ((size - HEADER) / (has_strides ? 16 : 8), G_N_ELEMENTS (shape));
  if (ndim > 0 && (gsize) ndim > n_dims)
    return 0;
  for (gsize i = 0; i < n_dims; i++)
    {
      memcpy (&shape[i], data + HEADER + i * (has_strides ? 16 : 8), 8);
      if (has_strides)
        memcpy (&strides[i], data + HEADER + i * 16 + 8, 8);
    }
  t.dl_tensor.shape = ndim > 0 ? shape : NULL;
  t.dl_tensor.strides = has_strides ? strides : NULL;

  /* wrap */
  n_deleted = 0;
  buf = memres_buffer_new_for_dlpack (&t, &error);
  if (buf == NULL)
    {
      if (error == NULL
          || !(g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT)
               || g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
          || n_deleted != 0)
        abort ();
      g_clear_error (&error);
    }
  else
    {
      element_size = (guint64) t.dl_tensor.dtype.bits * t.dl_tensor.dtype.lanes / 8;
      if (error != NULL || t.deleter == NULL || ndim < 0)
        abort ();
      if (!has_strides)
        for (gint i = ndim - 1, c = 1; i >= 0; i--)
          {
            compact[i] = c;
            c = (gint) MIN ((gint64) c * MAX (shape[i], 1), G_MAXINT32);
          }
      if (enumerate_span (ndim, shape, has_strides ? strides : compact, &lo, &hi)
          && memres_buffer_get_size (buf) != (guint64) (hi - lo + 1) * element_size)
        abort ();
      memres_buffer_unref (buf);
      if (n_deleted != 1)
        abort ();
    }

  /* export the same geometry from a host buffer of EXPORT_SIZE bytes */
  if (ndim < 0 || (ndim > 0 && t.dl_tensor.shape == NULL))
    return 0;
  host_buf = memres_buffer_new_for_pointer (host, sizeof host, -1, MEMRES_MEMORY_HOST_ACCESSIBLE,
                                            NULL, NULL, &error);
  if (host_buf == NULL)
    abort ();
  exported = memres_buffer_export_dlpack (host_buf, t.dl_tensor.dtype, ndim, t.dl_tensor.shape,
                                          t.dl_tensor.strides, t.dl_tensor.byte_offset, &error);
  if (exported == NULL)
    {
      if (error == NULL
          || !(g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT)
               || g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED)))
        abort ();
      g_clear_error (&error);
    }
  else
    {
      element_size = (guint64) t.dl_tensor.dtype.bits * t.dl_tensor.dtype.lanes / 8;
      if (exported->dl_tensor.data != host || exported->dl_tensor.ndim != ndim)
        abort ();
      /* every element inside the buffer */
      if (enumerate_span (ndim, exported->dl_tensor.shape, exported->dl_tensor.strides, &lo, &hi)
          && ((gint64) t.dl_tensor.byte_offset + lo * (gint64) element_size < 0
              || t.dl_tensor.byte_offset + (hi + 1) * element_size > EXPORT_SIZE))
        abort ();
      exported->deleter (exported);
    }
  memres_buffer_unref (host_buf);
  return 0;
}

/* test-dlpack.c: buffers as DLPack tensors and tensors as buffers: the fields memres writes,
 * round trips (export, wrap, read back), the references and deleters (each runs once), and
 * every bad tensor. Host memory in suite core; device and pinned memory against the fake
 * (suite fake) and the real driver (suite gpu). */
#include <memres/memres.h>

#include <string.h>

#include "plugins/common.h"
#include "testutil.h"

/* "opaque": memory neither the host nor a device can reach, as an application's kind may have
 * (memory of another accelerator); here malloc() memory that says so (the slots of
 * tests/plugins/common.h). */
static void
opaque_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = 0;
}

static const MemresResourceOps opaque_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = tp_init,
  .finalize = tp_finalize,
  .allocate = tp_allocate,
  .deallocate = tp_deallocate,
  .query = opaque_query,
};

static const MemresKindInfo opaque_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "opaque",
  .description = "memory neither host- nor device-accessible (test-dlpack.c)",
  .ops = &opaque_ops,
};

static const MemresDLDataType f32 = { MEMRES_DL_FLOAT, 32, 1 };
static const MemresDLDataType u8 = { MEMRES_DL_UINT, 8, 1 };

/* Another library's tensor: its deleter counts its calls. */
typedef struct
{
  MemresDLManagedTensorVersioned tensor;
  gint64 shape[4];
  gint64 strides[4];
  int n_deleted;
} Foreign;

static void
foreign_delete (MemresDLManagedTensorVersioned *self)
{
  Foreign *f = (Foreign *) self;

  f->n_deleted++;
}

/* A tensor of @ndim dimensions over @data, as another library would hand it over. */
static void
foreign_init (Foreign *f, gpointer data, gint32 device_type, gint32 device_id,
              MemresDLDataType dtype, gint ndim, const gint64 *shape, const gint64 *strides)
{
  memset (f, 0, sizeof *f);
  f->tensor.version.major = 1;
  f->tensor.version.minor = 3;
  f->tensor.deleter = foreign_delete;
  f->tensor.dl_tensor.data = data;
  f->tensor.dl_tensor.device.device_type = device_type;
  f->tensor.dl_tensor.device.device_id = device_id;
  f->tensor.dl_tensor.ndim = ndim;
  f->tensor.dl_tensor.dtype = dtype;
  if (ndim > 0)
    {
      memcpy (f->shape, shape, ndim * sizeof (gint64));
      f->tensor.dl_tensor.shape = f->shape;
    }
  if (strides != NULL)
    {
      memcpy (f->strides, strides, ndim * sizeof (gint64));
      f->tensor.dl_tensor.strides = f->strides;
    }
}

/* Counts the calls of an exported tensor's deleter, then runs it. */
static void (*saved_deleter) (MemresDLManagedTensorVersioned *);
static int n_export_deleted;

static void
counting_deleter (MemresDLManagedTensorVersioned *self)
{
  n_export_deleted++;
  saved_deleter (self);
}

static void
count_deletes (MemresDLManagedTensorVersioned *t)
{
  saved_deleter = t->deleter;
  n_export_deleted = 0;
  t->deleter = counting_deleter;
}

/* memres_buffer_close() that must succeed; keeps the caller's reference (mt_close_ok() drops
 * it). */
static void
close_ok (MemresBuffer *buf)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
}

static guint64
n_buffers (MemresResource *mr)
{
  MemresStats stats;
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  return stats.n_buffers;
}

static void
test_export_fields (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  MemresBuffer *buf = mt_alloc_ok (mr, 4096, NULL);
  const gint64 shape[] = { 4, 256 };
  MemresDLManagedTensorVersioned *t;

  t = memres_buffer_export_dlpack (buf, f32, 2, shape, NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_nonnull (t);
  g_assert_cmpuint (t->version.major, ==, 1);
  g_assert_cmpuint (t->version.minor, ==, MEMRES_DLPACK_MINOR_VERSION);
  g_assert_cmpuint (t->flags, ==, 0);
  g_assert_nonnull (t->deleter);
  g_assert_true (t->manager_ctx == buf);
  g_assert_true (t->dl_tensor.data == memres_buffer_get_pointer (buf));
  g_assert_cmpint (t->dl_tensor.device.device_type, ==, MEMRES_DL_CPU);
  g_assert_cmpint (t->dl_tensor.device.device_id, ==, 0);
  g_assert_cmpint (t->dl_tensor.ndim, ==, 2);
  g_assert_cmpint (t->dl_tensor.dtype.code, ==, MEMRES_DL_FLOAT);
  g_assert_cmpint (t->dl_tensor.dtype.bits, ==, 32);
  g_assert_cmpint (t->dl_tensor.dtype.lanes, ==, 1);
  g_assert_cmpint (t->dl_tensor.shape[0], ==, 4);
  g_assert_cmpint (t->dl_tensor.shape[1], ==, 256);
  /* compact row-major strides are filled in */
  g_assert_nonnull (t->dl_tensor.strides);
  g_assert_cmpint (t->dl_tensor.strides[0], ==, 256);
  g_assert_cmpint (t->dl_tensor.strides[1], ==, 1);
  g_assert_cmpuint (t->dl_tensor.byte_offset, ==, 0);

  /* the tensor keeps the buffer: after our unref its memory is still there */
  count_deletes (t);
  memres_buffer_unref (buf);
  g_assert_cmpuint (n_buffers (mr), ==, 1);
  memset (t->dl_tensor.data, 0x5a, 4096);
  t->deleter (t);
  g_assert_cmpint (n_export_deleted, ==, 1);
  g_assert_cmpuint (n_buffers (mr), ==, 0);
}

static void
test_export_scalar_and_strides (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 1024, NULL);
  const gint64 shape[] = { 16, 4 };
  const gint64 transposed[] = { 1, 16 };
  const gint64 empty_shape[] = { 3, 0, 7 };
  MemresDLManagedTensorVersioned *t;

  /* a scalar: no shape, no strides */
  t = memres_buffer_export_dlpack (buf, f32, 0, NULL, NULL, 1020, &error);
  g_assert_no_error (error);
  g_assert_cmpint (t->dl_tensor.ndim, ==, 0);
  g_assert_null (t->dl_tensor.shape);
  g_assert_null (t->dl_tensor.strides);
  g_assert_cmpuint (t->dl_tensor.byte_offset, ==, 1020);
  t->deleter (t);

  /* given strides are copied; the caller's arrays may go */
  t = memres_buffer_export_dlpack (buf, f32, 2, shape, transposed, 768, &error);
  g_assert_no_error (error);
  g_assert_true (t->dl_tensor.shape != shape && t->dl_tensor.strides != transposed);
  g_assert_cmpint (t->dl_tensor.strides[0], ==, 1);
  g_assert_cmpint (t->dl_tensor.strides[1], ==, 16);
  g_assert_cmpuint (t->dl_tensor.byte_offset, ==, 768);
  t->deleter (t);

  /* an extent of 0: no element, any offset within the buffer's reach */
  t = memres_buffer_export_dlpack (buf, u8, 3, empty_shape, NULL, 4096, &error);
  g_assert_no_error (error);
  g_assert_cmpint (t->dl_tensor.strides[0], ==, 7);
  g_assert_cmpint (t->dl_tensor.strides[1], ==, 7);
  g_assert_cmpint (t->dl_tensor.strides[2], ==, 1);
  t->deleter (t);
}

/* Export, wrap the exported tensor back, read its bytes through the new buffer: each side's
 * release runs once. */
static void
test_round_trip_host (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  MemresBuffer *buf = mt_alloc_ok (mr, 8192, NULL);
  const gint64 shape[] = { 4, 256 };
  MemresDLManagedTensorVersioned *t;
  MemresBuffer *back;
  guint8 bytes[4096];

  mt_fill_pattern (memres_buffer_get_pointer (buf), 8192, 19);
  t = memres_buffer_export_dlpack (buf, f32, 2, shape, NULL, 4096, &error);
  g_assert_no_error (error);
  memres_buffer_unref (buf);
  count_deletes (t);

  back = memres_buffer_new_for_dlpack (t, &error);
  g_assert_no_error (error);
  g_assert_nonnull (back);
  g_assert_cmpuint (memres_buffer_get_size (back), ==, 8192 - 4096);
  g_assert_cmpint (memres_buffer_get_device (back), ==, -1);
  g_assert_cmpint (memres_buffer_get_flags (back), ==, MEMRES_MEMORY_HOST_ACCESSIBLE);
  g_assert_null (memres_buffer_get_resource (back));
  g_assert_true (memres_buffer_read (back, 0, bytes, sizeof bytes, NULL, &error));
  g_assert_no_error (error);
  {
    guint8 expected[8192];

    mt_fill_pattern (expected, 8192, 19);
    g_assert_cmpmem (bytes, sizeof bytes, expected + 4096, 4096);
  }
  g_assert_cmpint (n_export_deleted, ==, 0);
  close_ok (back);
  g_assert_cmpint (n_export_deleted, ==, 1);
  g_assert_cmpuint (n_buffers (mr), ==, 0);
  memres_buffer_unref (back);
  g_assert_cmpint (n_export_deleted, ==, 1);
}

/* Another library's tensors: compact, strided, negative strides, empty, managed. */
static void
test_wrap_foreign (void)
{
  g_autoptr (GError) error = NULL;
  gint32 data[15];
  const gint64 shape[] = { 3, 5 };
  const gint64 column[] = { 3 };
  const gint64 column_strides[] = { 5 };
  const gint64 reversed_strides[] = { -1 };
  const gint64 zero[] = { 0 };
  Foreign f;
  MemresBuffer *buf;
  gint32 got[15];
  gint n_devices = 0;

  for (int i = 0; i < 15; i++)
    data[i] = i * 1000 + 7;

  foreign_init (&f, data, MEMRES_DL_CPU, 0, (MemresDLDataType){ MEMRES_DL_INT, 32, 1 }, 2, shape,
                NULL);
  buf = memres_buffer_new_for_dlpack (&f.tensor, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, sizeof data);
  g_assert_true (memres_buffer_get_pointer (buf) == data);
  g_assert_true (memres_buffer_read (buf, 0, got, sizeof got, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (got, sizeof got, data, sizeof data);
  memres_buffer_unref (buf); /* the last reference closes it */
  g_assert_cmpint (f.n_deleted, ==, 1);

  /* column 1 of the 3x5 matrix: elements 1, 6, 11 (bytes 4..48) */
  foreign_init (&f, data, MEMRES_DL_CPU, 0, (MemresDLDataType){ MEMRES_DL_INT, 32, 1 }, 1, column,
                column_strides);
  f.tensor.dl_tensor.byte_offset = 4;
  buf = memres_buffer_new_for_dlpack (&f.tensor, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_get_pointer (buf) == &data[1]);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 11 * 4);
  close_ok (buf);
  close_ok (buf); /* closing twice releases once */
  memres_buffer_unref (buf);
  g_assert_cmpint (f.n_deleted, ==, 1);

  /* elements 3, 2, 1 through a negative stride: the buffer starts at the lowest */
  foreign_init (&f, data, MEMRES_DL_CPU, 0, (MemresDLDataType){ MEMRES_DL_INT, 32, 1 }, 1, column,
                reversed_strides);
  f.tensor.dl_tensor.byte_offset = 12;
  buf = memres_buffer_new_for_dlpack (&f.tensor, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_get_pointer (buf) == &data[1]);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 12);
  memres_buffer_unref (buf);
  g_assert_cmpint (f.n_deleted, ==, 1);

  /* no element: NULL data is fine, the buffer is empty */
  foreign_init (&f, NULL, MEMRES_DL_CUDA, 0, f32, 1, zero, NULL);
  buf = memres_buffer_new_for_dlpack (&f.tensor, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  memres_buffer_unref (buf);
  g_assert_cmpint (f.n_deleted, ==, 1);

  /* managed memory of device 2: without a driver, the flags only (nothing touches the memory);
   * a driver with fewer devices refuses it, and the tensor stays the caller's */
  foreign_init (&f, data, MEMRES_DL_CUDA_MANAGED, 2, u8, 1, column, NULL);
  if (memres_cuda_get_device_count (&n_devices, NULL) && n_devices <= 2)
    {
      g_assert_null (memres_buffer_new_for_dlpack (&f.tensor, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_clear_error (&error);
      g_assert_cmpint (f.n_deleted, ==, 0);
      f.tensor.dl_tensor.device.device_id = 0;
    }
  buf = memres_buffer_new_for_dlpack (&f.tensor, &error);
  g_assert_no_error (error);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, f.tensor.dl_tensor.device.device_id);
  g_assert_cmpint (memres_buffer_get_flags (buf), ==,
                   MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE
                       | MEMRES_MEMORY_MANAGED);
  g_assert_true (memres_buffer_is_managed (buf));
  memres_buffer_unref (buf);

  /* pinned memory: host and device accessible, device -1 */
  foreign_init (&f, data, MEMRES_DL_CUDA_HOST, 0, u8, 1, column, NULL);
  buf = memres_buffer_new_for_dlpack (&f.tensor, &error);
  g_assert_no_error (error);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_cmpint (memres_buffer_get_flags (buf), ==,
                   MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE);
  memres_buffer_unref (buf);
  g_assert_cmpint (f.n_deleted, ==, 1);
}

static void
assert_export_fails (MemresBuffer *buf, MemresDLDataType dtype, gint ndim, const gint64 *shape,
                     const gint64 *strides, guint64 byte_offset, gint code)
{
  g_autoptr (GError) error = NULL;

  g_assert_null (
      memres_buffer_export_dlpack (buf, dtype, ndim, shape, strides, byte_offset, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  mt_assert_printable (error->message, 300);
  g_clear_error (&error);
  /* the unversioned export checks the same */
  g_assert_null (memres_buffer_export_dlpack_unversioned (buf, dtype, ndim, shape, strides,
                                                          byte_offset, &error));
  g_assert_error (error, MEMRES_ERROR, code);
}

static void
test_export_invalid (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 1024, NULL);
  g_autoptr (MemresBuffer) closed = mt_alloc_ok (mr, 1024, NULL);
  const gint64 ok_shape[] = { 256 };
  const gint64 negative[] = { 4, -1 };
  const gint64 huge[] = { G_GINT64_CONSTANT (1) << 40, G_GINT64_CONSTANT (1) << 40 };
  const gint64 three[] = { 3 };
  const gint64 max_stride[] = { G_MAXINT64 };
  const gint64 min_stride[] = { G_MININT64 / 2 };
  const gint64 back[] = { -1 };
  const gint64 half_max[] = { G_MAXINT64 / 2 + 1 };
  const gint64 two[] = { 2 };
  const gint64 empty_huge[] = { 0, G_GINT64_CONSTANT (1) << 59, 16 };
  const gint64 many[MEMRES_DLPACK_MAX_NDIM + 1] = { 0 };

  close_ok (closed);
  assert_export_fails (closed, f32, 1, ok_shape, NULL, 0, MEMRES_ERROR_CLOSED);
  /* 256 floats are the whole buffer: one byte more runs past it */
  assert_export_fails (buf, f32, 1, ok_shape, NULL, 1, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, f32, 1, ok_shape, NULL, G_MAXUINT64, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, f32, -1, ok_shape, NULL, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, f32, MEMRES_DLPACK_MAX_NDIM + 1, many, NULL, 0,
                       MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, f32, 2, NULL, NULL, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, f32, 2, negative, NULL, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, (MemresDLDataType){ MEMRES_DL_FLOAT, 0, 1 }, 1, ok_shape, NULL, 0,
                       MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, (MemresDLDataType){ MEMRES_DL_FLOAT, 32, 0 }, 1, ok_shape, NULL, 0,
                       MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, (MemresDLDataType){ MEMRES_DL_INT, 4, 1 }, 1, ok_shape, NULL, 0,
                       MEMRES_ERROR_NOT_SUPPORTED);
  /* 2^80 elements; a stride whose reach overflows; a span that overflows once in bytes */
  assert_export_fails (buf, u8, 2, huge, NULL, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  /* no element, but the other extents' product (a compact stride) overflows */
  assert_export_fails (buf, u8, 3, empty_huge, NULL, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, u8, 1, three, max_stride, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, u8, 1, three, min_stride, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  assert_export_fails (buf, f32, 1, two, half_max, 0, MEMRES_ERROR_INVALID_ARGUMENT);
  /* a negative stride reaching before the start of the buffer */
  assert_export_fails (buf, f32, 1, three, back, 4, MEMRES_ERROR_INVALID_ARGUMENT);
}

/* Memory neither host- nor device-accessible has no DLPack device: refused (a kind's buffer:
 * a wrapped pointer with flags 0 asks the driver), the buffer still open and closable. */
static void
test_export_inaccessible (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("opaque");
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 1024, NULL);
  const gint64 shape[] = { 16 };

  g_assert_cmpuint (memres_buffer_get_flags (buf), ==, 0);
  assert_export_fails (buf, f32, 1, shape, NULL, 0, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_cmpuint (n_buffers (mr), ==, 1);
  close_ok (buf);
  g_assert_cmpuint (n_buffers (mr), ==, 0);
}

static void
assert_wrap_fails (Foreign *f, GQuark domain, gint code)
{
  g_autoptr (GError) error = NULL;

  g_assert_null (memres_buffer_new_for_dlpack (&f->tensor, &error));
  g_assert_error (error, domain, code);
  mt_assert_printable (error->message, 300);
  /* nothing was taken: the caller still owns the tensor */
  g_assert_cmpint (f->n_deleted, ==, 0);
}

static void
test_wrap_invalid (void)
{
  g_autoptr (GError) error = NULL;
  static guint8 data[64];
  const gint64 shape[] = { 64 };
  const gint64 negative[] = { -2 };
  const gint64 three[] = { 3 };
  const gint64 max_stride[] = { G_MAXINT64 };
  const gint64 back[] = { -1 };
  Foreign f;

  g_assert_null (memres_buffer_new_for_dlpack (NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, shape, NULL);
  f.tensor.version.major = 2;
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  f.tensor.version.major = 0;
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, shape, NULL);
  f.tensor.deleter = NULL;
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, shape, NULL);
  f.tensor.flags = MEMRES_DLPACK_FLAG_READ_ONLY;
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);

  /* kDLROCM, kDLVulkan, kDLOpenCL, 0 and a value no version of DLPack has */
  {
    const gint32 types[] = { 10, 7, 4, 0, 1000, -1 };

    for (gsize i = 0; i < G_N_ELEMENTS (types); i++)
      {
        foreign_init (&f, data, types[i], 0, u8, 1, shape, NULL);
        assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      }
  }
  foreign_init (&f, data, MEMRES_DL_CUDA, -1, u8, 1, shape, NULL);
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, NULL, MEMRES_DL_CUDA, 0, u8, 1, shape, NULL);
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, negative, NULL);
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, three, max_stride);
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, three, back);
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, shape, NULL);
  f.tensor.dl_tensor.ndim = MEMRES_DLPACK_MAX_NDIM + 1;
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, u8, 1, shape, NULL);
  f.tensor.dl_tensor.shape = NULL;
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);

  foreign_init (&f, data, MEMRES_DL_CPU, 0, (MemresDLDataType){ MEMRES_DL_BOOL, 1, 1 }, 1, shape,
                NULL);
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);

  /* the elements run past the end of the address space */
  foreign_init (&f, (gpointer) (guintptr) (G_MAXSIZE - 31), MEMRES_DL_CUDA, 0, u8, 1, shape, NULL);
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  foreign_init (&f, data, MEMRES_DL_CUDA, 0, u8, 1, shape, NULL);
  f.tensor.dl_tensor.byte_offset = G_MAXUINT64 - 16;
  assert_wrap_fails (&f, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
}

/* Device memory (dmr) and pinned host memory: the device types, and a round trip whose bytes
 * are read back through the driver. */
static void
test_round_trip_device (void)
{
  static const struct
  {
    const char *spec;
    gint32 device_type;
  } cases[] = { { "dmr:device=0", MEMRES_DL_CUDA }, { "pinned", MEMRES_DL_CUDA_HOST } };
  const gint64 shape[] = { 1024 };

  if (!mt_require_devices (1))
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = mt_new_ok (cases[i].spec);
      MemresBuffer *buf = mt_alloc_ok (mr, 4096, NULL);
      MemresDLManagedTensorVersioned *t;
      MemresBuffer *back;

      mt_write_pattern (buf, 0, 4096, 7 + i, NULL);
      t = memres_buffer_export_dlpack (buf, f32, 1, shape, NULL, 0, &error);
      g_assert_no_error (error);
      g_assert_cmpint (t->dl_tensor.device.device_type, ==, cases[i].device_type);
      g_assert_cmpint (t->dl_tensor.device.device_id, ==, 0);
      g_assert_cmpuint ((guintptr) t->dl_tensor.data, ==, memres_buffer_get_address (buf));
      memres_buffer_unref (buf);
      count_deletes (t);

      back = memres_buffer_new_for_dlpack (t, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (memres_buffer_get_address (back), ==, (guintptr) t->dl_tensor.data);
      if (cases[i].device_type == MEMRES_DL_CUDA)
        {
          g_assert_cmpint (memres_buffer_get_device (back), ==, 0);
          g_assert_cmpint (memres_buffer_get_flags (back), ==, MEMRES_MEMORY_DEVICE_ACCESSIBLE);
        }
      mt_check_pattern (back, 0, 4096, 7 + i, NULL);
      close_ok (back);
      memres_buffer_unref (back);
      g_assert_cmpint (n_export_deleted, ==, 1);
      g_assert_cmpuint (n_buffers (mr), ==, 0);
    }
}

/* The unversioned (DLPack 0.x) tensor: a deleter that counts its calls. */
static void (*saved_unversioned_deleter) (MemresDLManagedTensor *);

static void
counting_unversioned_deleter (MemresDLManagedTensor *self)
{
  n_export_deleted++;
  saved_unversioned_deleter (self);
}

static void
count_unversioned_deletes (MemresDLManagedTensor *t)
{
  saved_unversioned_deleter = t->deleter;
  n_export_deleted = 0;
  t->deleter = counting_unversioned_deleter;
}

static void
unversioned_release (gpointer data)
{
  MemresDLManagedTensor *t = data;

  t->deleter (t);
}

/* The fields of an unversioned export: as the versioned one's, and the tensor keeps the buffer
 * until its deleter runs, once. */
static void
test_unversioned_fields (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  MemresBuffer *buf = mt_alloc_ok (mr, 4096, NULL);
  const gint64 shape[] = { 4, 128 };
  const gint64 strides[] = { 1, 4 };
  MemresDLManagedTensor *t;

  t = memres_buffer_export_dlpack_unversioned (buf, f32, 2, shape, NULL, 1024, &error);
  g_assert_no_error (error);
  g_assert_nonnull (t);
  g_assert_nonnull (t->deleter);
  g_assert_true (t->manager_ctx == buf);
  g_assert_true (t->dl_tensor.data == memres_buffer_get_pointer (buf));
  g_assert_cmpint (t->dl_tensor.device.device_type, ==, MEMRES_DL_CPU);
  g_assert_cmpint (t->dl_tensor.ndim, ==, 2);
  g_assert_cmpint (t->dl_tensor.dtype.bits, ==, 32);
  g_assert_cmpint (t->dl_tensor.shape[0], ==, 4);
  g_assert_cmpint (t->dl_tensor.shape[1], ==, 128);
  g_assert_cmpint (t->dl_tensor.strides[0], ==, 128);
  g_assert_cmpint (t->dl_tensor.strides[1], ==, 1);
  g_assert_cmpuint (t->dl_tensor.byte_offset, ==, 1024);

  count_unversioned_deletes (t);
  memres_buffer_unref (buf);
  g_assert_cmpuint (n_buffers (mr), ==, 1);
  memset (t->dl_tensor.data, 0xa5, 4096); /* still allocated */
  t->deleter (t);
  g_assert_cmpint (n_export_deleted, ==, 1);
  g_assert_cmpuint (n_buffers (mr), ==, 0);

  /* given strides are copied */
  buf = mt_alloc_ok (mr, 4096, NULL);
  t = memres_buffer_export_dlpack_unversioned (buf, f32, 2, shape, strides, 0, &error);
  g_assert_no_error (error);
  g_assert_true (t->dl_tensor.strides != strides);
  g_assert_cmpint (t->dl_tensor.strides[0], ==, 1);
  g_assert_cmpint (t->dl_tensor.strides[1], ==, 4);
  /* a scalar: no shape, no strides */
  {
    MemresDLManagedTensor *scalar
        = memres_buffer_export_dlpack_unversioned (buf, u8, 0, NULL, NULL, 4095, &error);

    g_assert_no_error (error);
    g_assert_null (scalar->dl_tensor.shape);
    g_assert_null (scalar->dl_tensor.strides);
    scalar->deleter (scalar);
  }
  memres_buffer_unref (buf);
  t->deleter (t);
  g_assert_cmpuint (n_buffers (mr), ==, 0);
}

/* An unversioned export of @spec's memory taken by a consumer (here memres itself, over the
 * tensor's pointer): the bytes read back through it, the consumer's release calls the deleter
 * once, and the exporting buffer goes with it. */
static void
unversioned_round_trip (const char *spec, gint32 device_type, guint seed)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  MemresBuffer *buf = mt_alloc_ok (mr, 8192, NULL);
  const gint64 shape[] = { 1024 };
  MemresDLManagedTensor *t;
  MemresBuffer *back;

  mt_write_pattern (buf, 0, 8192, seed, NULL);
  t = memres_buffer_export_dlpack_unversioned (buf, f32, 1, shape, NULL, 4096, &error);
  g_assert_no_error (error);
  g_assert_cmpint (t->dl_tensor.device.device_type, ==, device_type);
  g_assert_cmpint (t->dl_tensor.device.device_id, ==, 0);
  g_assert_cmpuint ((guintptr) t->dl_tensor.data, ==, memres_buffer_get_address (buf));
  memres_buffer_unref (buf);
  count_unversioned_deletes (t);

  back = memres_buffer_new_for_pointer (
      (guint8 *) t->dl_tensor.data + t->dl_tensor.byte_offset, 4096,
      memres_resource_get_device (mr),
      memres_resource_get_flags (mr)
          & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE),
      unversioned_release, t, &error);
  g_assert_no_error (error);
  {
    /* the second half of the pattern written over 8192 bytes */
    g_autofree guint8 *expected = g_malloc (8192);
    guint8 got[4096];

    mt_fill_pattern (expected, 8192, seed);
    g_assert_true (memres_buffer_read (back, 0, got, sizeof got, NULL, &error));
    g_assert_no_error (error);
    mt_sync_ok (NULL);
    g_assert_cmpmem (got, sizeof got, expected + 4096, 4096);
  }
  g_assert_cmpint (n_export_deleted, ==, 0);
  g_assert_cmpuint (n_buffers (mr), ==, 1);
  close_ok (back);
  g_assert_cmpint (n_export_deleted, ==, 1);
  g_assert_cmpuint (n_buffers (mr), ==, 0);
  memres_buffer_unref (back);
  g_assert_cmpint (n_export_deleted, ==, 1);
}

static void
test_unversioned_round_trip_host (void)
{
  unversioned_round_trip ("host", MEMRES_DL_CPU, 23);
}

static void
test_unversioned_round_trip_device (void)
{
  if (!mt_require_devices (1))
    return;
  unversioned_round_trip ("dmr:device=0", MEMRES_DL_CUDA, 29);
  unversioned_round_trip ("pinned", MEMRES_DL_CUDA_HOST, 31);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  {
    g_autoptr (GError) error = NULL;

    g_assert_true (memres_registry_register_kind (&opaque_info, &error));
    g_assert_no_error (error);
  }
  g_test_add_func ("/dlpack/export/fields", test_export_fields);
  g_test_add_func ("/dlpack/export/scalar-and-strides", test_export_scalar_and_strides);
  g_test_add_func ("/dlpack/export/invalid", test_export_invalid);
  g_test_add_func ("/dlpack/export/inaccessible", test_export_inaccessible);
  g_test_add_func ("/dlpack/wrap/foreign", test_wrap_foreign);
  g_test_add_func ("/dlpack/wrap/invalid", test_wrap_invalid);
  g_test_add_func ("/dlpack/round-trip/host", test_round_trip_host);
  g_test_add_func ("/dlpack/round-trip/device", test_round_trip_device);
  g_test_add_func ("/dlpack/unversioned/fields", test_unversioned_fields);
  g_test_add_func ("/dlpack/unversioned/round-trip-host", test_unversioned_round_trip_host);
  g_test_add_func ("/dlpack/unversioned/round-trip-device", test_unversioned_round_trip_device);
  return g_test_run ();
}

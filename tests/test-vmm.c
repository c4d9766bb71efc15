/* test-vmm.c: the `vmm` kind: allocation, rounding, growth in place and by move, shrinking,
 * close, options, peer and read-only access, statistics, and rollback of every failing driver
 * call. Runs against the fake driver (suite fake) and the real one (suite gpu). */
#include "testutil.h"

#include <string.h>

static const MemresCudaDriver *drv;

/* --- helpers ------------------------------------------------------------------------------- */

static void
counts_begin (FakeCudaCounts *baseline)
{
  memset (baseline, 0, sizeof *baseline);
  if (mt_driver_is_fake ())
    mt_fake_get_counts (baseline);
}

static gboolean
require_device (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  drv = memres_cuda_get_driver (NULL);
  g_assert_nonnull (drv);
  return TRUE;
}

static gsize
granularity (CUmemLocationType type, CUmemAllocationGranularity_flags flag)
{
  CUmemAllocationProp prop = { 0 };
  size_t value = 0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = type;
  prop.location.id = 0;
  g_assert_cmpint (drv->cuMemGetAllocationGranularity (&value, &prop, flag), ==, CUDA_SUCCESS);
  g_assert_cmpuint (value, >, 0);
  return value;
}

/* The granularity of the default resource (device memory, recommended). */
static gsize
gran (void)
{
  return granularity (CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
}

static MemresResource *vmm_new (const char *format, ...) G_GNUC_PRINTF (1, 2);

static MemresResource *
vmm_new (const char *format, ...)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *spec = NULL;
  MemresResource *mr;
  va_list args;

  va_start (args, format);
  spec = g_strdup_vprintf (format, args);
  va_end (args);
  mr = memres_resource_new (spec, &error);
  g_assert_no_error (error);
  g_assert_nonnull (mr);
  return mr;
}

static void
assert_spec_error (const char *spec, GQuark domain, gint code, const char *needle)
{
  g_autoptr (GError) error = NULL;
  MemresResource *mr = memres_resource_new (spec, &error);

  g_assert_null (mr);
  g_assert_error (error, domain, code);
  if (needle != NULL && strstr (error->message, needle) == NULL)
    g_error ("\"%s\": message \"%s\" does not mention \"%s\"", spec, error->message, needle);
}

static MemresBuffer *
allocate (MemresResource *mr, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  return buf;
}

static void
close_buffer (MemresBuffer *buf)
{
  g_autoptr (GError) error = NULL;

  gboolean ok = memres_buffer_close (buf, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  memres_buffer_unref (buf);
}

static void
resize (MemresBuffer *buf, gsize size)
{
  g_autoptr (GError) error = NULL;

  gboolean ok = memres_buffer_resize (buf, size, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
}

static void
transfer (MemresBuffer *buf, gsize offset, guint8 *data, gsize n, gboolean to_buffer)
{
  g_autoptr (GError) error = NULL;
  gboolean ok = to_buffer ? memres_buffer_write (buf, offset, data, n, NULL, &error)
                          : memres_buffer_read (buf, offset, data, n, NULL, &error);

  g_assert_no_error (error);
  g_assert_true (ok);
}

static void
write_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed)
{
  g_autofree guint8 *data = g_malloc (n);

  mt_fill_pattern (data, n, seed);
  transfer (buf, offset, data, n, TRUE);
}

static void
check_pattern (MemresBuffer *buf, gsize offset, gsize n, guint32 seed)
{
  g_autofree guint8 *data = g_malloc (n);

  transfer (buf, offset, data, n, FALSE);
  mt_assert_pattern (data, n, seed);
}

typedef struct
{
  CUdeviceptr ptr;
  gsize size;
} VmmBlocker;

/* Reserves the address range right after @buf so that it cannot grow in place. */
static VmmBlocker
block_after (MemresBuffer *buf)
{
  CUdeviceptr end = memres_buffer_get_address (buf) + memres_buffer_get_size (buf);
  VmmBlocker b = { 0, gran () };

  g_assert_cmpint (drv->cuMemAddressReserve (&b.ptr, b.size, 0, end, 0), ==, CUDA_SUCCESS);
  /* Anywhere else, the range after the buffer was taken already: a grow moves either way. */
  if (b.ptr != end)
    g_test_message ("the range after the buffer was taken already (blocker at %#llx)",
                    (unsigned long long) b.ptr);
  return b;
}

static void
unblock (VmmBlocker *b)
{
  if (b->ptr != 0)
    g_assert_cmpint (drv->cuMemAddressFree (b->ptr, b->size), ==, CUDA_SUCCESS);
  b->ptr = 0;
}

static CUmemAccess_flags
get_access (MemresBuffer *buf, int device)
{
  CUmemLocation location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = device };
  unsigned long long flags = 0;

  g_assert_cmpint (drv->cuMemGetAccess (&flags, &location, memres_buffer_get_address (buf)), ==,
                   CUDA_SUCCESS);
  return (CUmemAccess_flags) flags;
}

static void
ensure_context (void)
{
  g_autoptr (GError) error = NULL;

  gboolean ok = memres_cuda_ensure_context (0, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
}

static gsize
free_device_memory (void)
{
  size_t free_bytes = 0, total = 0;

  ensure_context ();
  g_assert_cmpint (drv->cuMemGetInfo (&free_bytes, &total), ==, CUDA_SUCCESS);
  return free_bytes;
}

static MemresStats
stats (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresStats s;

  gboolean ok = memres_resource_get_stats (mr, &s, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  return s;
}

/* --- allocation ---------------------------------------------------------------------------- */

static void
test_allocate_rounding (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  const gsize sizes[] = { 1, g - 1, g, g + 1, 3 * g - 5 };
  const gsize expect[] = { g, g, g, 2 * g, 3 * g };
  counts_begin (&base);
  mr = vmm_new ("vmm");
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  g_assert_cmpuint (memres_resource_get_flags (mr), ==,
                    MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_RESIZABLE);

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      MemresBuffer *buf = allocate (mr, sizes[i]);

      g_assert_cmpuint (memres_buffer_get_size (buf), ==, expect[i]);
      g_assert_cmpuint (memres_buffer_get_address (buf) % gran (), ==, 0);
      g_assert_true (memres_buffer_is_device_accessible (buf));
      g_assert_false (memres_buffer_is_host_accessible (buf));
      write_pattern (buf, 0, expect[i], i);
      check_pattern (buf, 0, expect[i], i);
      close_buffer (buf);
    }
  mt_assert_fake_counts_equal (&base);
}

static void
test_allocate_minimum_granularity (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  gsize minimum;
  MemresBuffer *buf;

  if (!require_device ())
    return;
  counts_begin (&base);
  minimum = granularity (CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  mr = vmm_new ("vmm:granularity=minimum");
  buf = allocate (mr, minimum + 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * minimum);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

static void
test_allocate_huge (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  long reserves = 0;

  if (!require_device ())
    return;
  counts_begin (&base);
  mr = vmm_new ("vmm");
  if (mt_driver_is_fake ())
    reserves = mt_fake_call_count ("cuMemAddressReserve");
  g_assert_null (memres_resource_allocate (mr, G_MAXSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_null (memres_resource_allocate (mr, G_MAXSIZE - 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAddressReserve"), ==, reserves);
  mt_assert_fake_counts_equal (&base);
}

/* location=host and host_numa: the CPU uses the pointer, the device sees the same bytes. */
static void
check_host_location (const char *spec)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  gsize size;

  counts_begin (&base);
  mr = memres_resource_new (spec, &error);
  if (mr == NULL && !mt_driver_is_fake ()
      && g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
    {
      g_test_skip (error->message);
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_resource_get_flags (mr), ==,
                    MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE
                        | MEMRES_MEMORY_RESIZABLE);
  /* page-locked host memory belongs to no device (the rule of memres_buffer_get_device()) */
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
  buf = allocate (mr, 3 * gran () + 1);
  size = memres_buffer_get_size (buf);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_true (memres_buffer_is_host_accessible (buf));
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 77);
  check_pattern (buf, 0, size, 77);
  resize (buf, 2 * size);
  mt_assert_pattern (memres_buffer_get_pointer (buf), size, 77);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

static void
test_allocate_host (void)
{
  if (!require_device ())
    return;
  check_host_location ("vmm:location=host");
}

static void
test_allocate_host_numa (void)
{
  if (!require_device ())
    return;
  check_host_location ("vmm:location=host_numa");
}

/* --- growth -------------------------------------------------------------------------------- */

static void
test_grow_in_place (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, 2 * g);
  buf = allocate (mr, 3 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 3 * g, 1);

  resize (buf, 10 * g - 7);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 10 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  check_pattern (buf, 0, 3 * g, 1);
  write_pattern (buf, 3 * g, 7 * g, 2);

  resize (buf, 11 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  check_pattern (buf, 0, 3 * g, 1);
  check_pattern (buf, 3 * g, 7 * g, 2);
  write_pattern (buf, 0, 11 * g, 3);
  check_pattern (buf, 0, 11 * g, 3);

  /* the same size (after rounding) changes nothing */
  resize (buf, 11 * g - 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 11 * g);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* One copy over the whole of a buffer grown in place, across the boundary of its two
 * reservations: the address range is contiguous. */
static void
test_grow_one_copy (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree guint8 *data = NULL;
  MemresBuffer *buf;
  guint64 address;
  gboolean ok;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm");
  buf = allocate (mr, g);
  address = memres_buffer_get_address (buf);
  resize (buf, 3 * g);
  /* The fake always has the range after the buffer free; the real driver may place the probe
   * elsewhere (seen on the H200), and then the grow moves: the bytes must survive either way. */
  if (mt_driver_is_fake ())
    g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  else if (memres_buffer_get_address (buf) != address)
    g_test_message ("the driver did not grant the range after the buffer: grown by move");
  data = g_malloc (3 * g);
  mt_fill_pattern (data, 3 * g, 20);
  ok = memres_buffer_write (buf, 0, data, 3 * g, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  memset (data, 0, 3 * g);
  ok = memres_buffer_read (buf, 0, data, 3 * g, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  mt_assert_pattern (data, 3 * g, 20);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A probe reservation after the buffer that the driver refuses with an error (rather than
 * placing it elsewhere) moves the buffer, as when the range is taken. */
static void
test_grow_probe_fails (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  if (!mt_require_fake ("failing the probe reservation needs the fake driver"))
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 2 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 2 * g, 21);

  mt_fake_fail_call ("cuMemAddressReserve", 1, CUDA_ERROR_INVALID_VALUE);
  resize (buf, 5 * g);
  mt_fake_reset_faults ();
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 5 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 2 * g, 21);
  write_pattern (buf, 2 * g, 3 * g, 22);
  check_pattern (buf, 0, 2 * g, 21);

  /* also with an out-of-memory answer, and when the move's own reservation then fails the
   * grow fails with that error and leaves the buffer as it was */
  address = memres_buffer_get_address (buf);
  mt_fake_fail_call ("cuMemAddressReserve", 1, CUDA_ERROR_OUT_OF_MEMORY);
  mt_fake_fail_call ("cuMemAddressReserve", 2, CUDA_ERROR_OUT_OF_MEMORY);
  {
    g_autoptr (GError) error = NULL;

    g_assert_false (memres_buffer_resize (buf, 8 * g, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    g_assert_nonnull (strstr (error->message, "cuMemAddressReserve: CUDA_ERROR_OUT_OF_MEMORY"));
  }
  mt_fake_reset_faults ();
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 5 * g);
  check_pattern (buf, 0, 2 * g, 21);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A rollback whose driver call fails is warned about, except with CUDA_ERROR_DEINITIALIZED
 * (the driver shut down at process exit): then it is silent. In a subprocess (the warning is
 * fatal under g_test, and the failed rollback leaks a reservation). */
static void
test_rollback_deinitialized (void)
{
  if (!require_device ())
    return;
  if (!mt_require_fake ("failing the rollback needs the fake driver"))
    return;
  if (g_test_subprocess ())
    {
      g_autoptr (MemresResource) mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, gran ());
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = allocate (mr, 2 * gran ());
      const char *mode = g_getenv ("VMM_ROLLBACK_MODE");

      /* the grow in place fails at the access grant; its rollback frees the range it reserved */
      mt_fake_fail_call ("cuMemSetAccess", 1, CUDA_ERROR_OUT_OF_MEMORY);
      mt_fake_fail_call ("cuMemAddressFree", 1,
                         g_strcmp0 (mode, "deinit") == 0 ? CUDA_ERROR_DEINITIALIZED
                                                         : CUDA_ERROR_INVALID_VALUE);
      g_assert_false (memres_buffer_resize (buf, 5 * gran (), NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      mt_fake_reset_faults ();
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * gran ());
      close_buffer (buf);
      return;
    }
  g_setenv ("VMM_ROLLBACK_MODE", "fail", TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed ();
  g_test_trap_assert_stderr ("*vmm: rolling back a failure: cuMemAddressFree: "
                             "CUDA_ERROR_INVALID_VALUE*");
  g_setenv ("VMM_ROLLBACK_MODE", "deinit", TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("");
  g_unsetenv ("VMM_ROLLBACK_MODE");
}

/* With an up-front reservation a grow needs no new address range at all. */
static void
test_grow_within_reserve (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  long reserves = 0;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:reserve=%" G_GSIZE_FORMAT, 8 * g);
  buf = allocate (mr, g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, g, 4);
  /* a range after the reservation is taken: no matter */
  blocker.ptr = 0;
  blocker.size = g;
  g_assert_cmpint (drv->cuMemAddressReserve (&blocker.ptr, blocker.size, 0, address + 8 * g, 0), ==,
                   CUDA_SUCCESS);
  if (mt_driver_is_fake ())
    reserves = mt_fake_call_count ("cuMemAddressReserve");

  resize (buf, 8 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 8 * g);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAddressReserve"), ==, reserves);
  check_pattern (buf, 0, g, 4);
  write_pattern (buf, 0, 8 * g, 5);
  check_pattern (buf, 0, 8 * g, 5);

  close_buffer (buf);
  unblock (&blocker);
  mt_assert_fake_counts_equal (&base);
}

static void
test_grow_by_move (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, 2 * g);
  buf = allocate (mr, 5 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 5 * g, 6);
  blocker = block_after (buf);

  resize (buf, 9 * g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 9 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  g_assert_cmpuint (memres_buffer_get_address (buf) % g, ==, 0);
  check_pattern (buf, 0, 5 * g, 6);
  write_pattern (buf, 5 * g, 4 * g, 7);
  check_pattern (buf, 0, 5 * g, 6);
  check_pattern (buf, 5 * g, 4 * g, 7);

  /* and once more, after an in-place grow gave the buffer two reservations */
  unblock (&blocker);
  resize (buf, 12 * g);
  blocker = block_after (buf);
  address = memres_buffer_get_address (buf);
  resize (buf, 13 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 5 * g, 6);
  check_pattern (buf, 5 * g, 4 * g, 7);

  close_buffer (buf);
  unblock (&blocker);
  mt_assert_fake_counts_equal (&base);
}

/* A grow whose adjacent reservation lands elsewhere frees that stray reservation and moves the
 * buffer. When the driver refuses to free it, the grow still moves the buffer (no error) and the
 * stray reservation is kept, freed at the next grow or with the resource, never lost. */
static void
test_grow_stray_free_fails (void)
{
  FakeCudaCounts base, now;
  MemresResource *mr;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  gsize g;

  if (!require_device () || !mt_require_fake ("injects a fault"))
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 2 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 2 * g, 21);
  blocker = block_after (buf);
  g_assert_cmpuint (blocker.ptr, ==, address + 2 * g); /* the fake honours the hint */

  mt_fake_fail_call ("cuMemAddressFree", 1, CUDA_ERROR_UNKNOWN);
  resize (buf, 4 * g);
  mt_fake_reset_faults ();
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 2 * g, 21);
  mt_fake_get_counts (&now);
  /* the buffer's new reservation, the blocker and the stray one */
  g_assert_cmpint (now.reservations, ==, base.reservations + 3);

  /* the next grow frees the stray reservation */
  resize (buf, 5 * g);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.reservations, <=, base.reservations + 3);
  check_pattern (buf, 0, 2 * g, 21);
  close_buffer (buf);
  unblock (&blocker);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);

  /* kept until the resource goes when no grow comes */
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 2 * g);
  blocker = block_after (buf);
  mt_fake_fail_call ("cuMemAddressFree", 1, CUDA_ERROR_UNKNOWN);
  resize (buf, 4 * g);
  mt_fake_reset_faults ();
  close_buffer (buf);
  unblock (&blocker);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.reservations, ==, base.reservations + 1); /* the stray one */
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* --- shrinking ----------------------------------------------------------------------------- */

static void
test_shrink (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  MemresStats s;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 6 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 6 * g, 8);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 6 * g);

  resize (buf, 2 * g + 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 3 * g);
  g_assert_cmpuint (s.used_current, ==, 3 * g);
  check_pattern (buf, 0, 3 * g, 8);

  /* grows back in place into the kept reservation */
  resize (buf, 6 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  check_pattern (buf, 0, 3 * g, 8);
  write_pattern (buf, 0, 6 * g, 9);
  check_pattern (buf, 0, 6 * g, 9);

  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A chunk that is only partly beyond the new size stays mapped, and growing into it again needs
 * no driver call. */
static void
test_shrink_partial_chunk (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  long creates = 0;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, 4 * g);
  buf = allocate (mr, 8 * g);
  write_pattern (buf, 0, 8 * g, 10);

  resize (buf, g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, g);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 4 * g);
  g_assert_cmpuint (stats (mr).used_current, ==, g);
  check_pattern (buf, 0, g, 10);

  if (mt_driver_is_fake ())
    creates = mt_fake_call_count ("cuMemCreate");
  resize (buf, 4 * g);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates);
  check_pattern (buf, 0, 4 * g, 10);

  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* Size 0 releases every chunk but keeps the address range; growing maps memory there again. */
static void
test_shrink_to_zero (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 3 * g);
  address = memres_buffer_get_address (buf);
  resize (buf, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  /* empty, but the range is kept: the getters report it (memres_buffer_get_pointer()) */
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_true (memres_buffer_get_pointer (buf) == (gpointer) (guintptr) address);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 0);
  resize (buf, 2 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * g);
  write_pattern (buf, 0, 2 * g, 18);
  check_pattern (buf, 0, 2 * g, 18);
  resize (buf, 0);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* The core's empty buffer (no memory, address 0) grows into a real one. */
static void
test_grow_from_empty (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;

  if (!require_device ())
    return;
  counts_begin (&base);
  mr = vmm_new ("vmm");
  buf = allocate (mr, 0);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  resize (buf, 0);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  resize (buf, gran () + 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * gran ());
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, 0);
  write_pattern (buf, 0, 2 * gran (), 19);
  check_pattern (buf, 0, 2 * gran (), 19);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* --- close --------------------------------------------------------------------------------- */

static void
test_close_returns_memory (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *bufs[64];
  gsize before, during, after;
  const gsize size = 64 * 1024 * 1024;

  if (!require_device ())
    return;
  counts_begin (&base);
  mr = vmm_new ("vmm");
  /* settle the driver's own allocations first */
  close_buffer (allocate (mr, size));

  before = free_device_memory ();
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = allocate (mr, size);
  during = free_device_memory ();
  g_assert_cmpuint (before - during, >=, G_N_ELEMENTS (bufs) * size);
  g_assert_cmpuint (stats (mr).reserved_current, ==, G_N_ELEMENTS (bufs) * size);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    close_buffer (bufs[i]);
  after = free_device_memory ();

  if (mt_driver_is_fake ())
    g_assert_cmpuint (after, ==, before);
  else /* the real driver may move a little for itself; one leaked buffer would be 64 MiB */
    g_assert_cmpuint (after + size / 2, >=, before);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

/* --- options ------------------------------------------------------------------------------- */

static void
test_options_invalid (void)
{
  FakeCudaCounts base;
  gint n_devices = 0;

  if (!require_device ())
    return;
  counts_begin (&base);
  g_assert_true (memres_cuda_get_device_count (&n_devices, NULL));

  assert_spec_error ("vmm:location=moon", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "location");
  assert_spec_error ("vmm:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "numa_id");
  assert_spec_error ("vmm:location=host,numa_id=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "numa_id");
  assert_spec_error ("vmm:handle_type=win32", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "handle_type");
  assert_spec_error ("vmm:location=host,handle_type=posix_fd", MEMRES_ERROR,
                     MEMRES_ERROR_INVALID_ARGUMENT, "handle_type");
  assert_spec_error ("vmm:granularity=huge", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                     "granularity");
  assert_spec_error ("vmm:access=wo", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "access");
  assert_spec_error ("vmm:chunk=max", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "chunk");
  assert_spec_error ("vmm:reserve=max", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "reserve");
  assert_spec_error ("vmm:peers=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "peers");
  {
    g_autofree char *spec = g_strdup_printf ("vmm:device=%d", n_devices);
    assert_spec_error (spec, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
    g_free (spec);
    spec = g_strdup_printf ("vmm:peers=%d", n_devices);
    assert_spec_error (spec, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  }
  mt_assert_fake_counts_equal (&base);
}

/* Runs @spec with device 0's attribute @attr forced to 0 (fake only) and expects
 * NOT_SUPPORTED naming @needle. */
static void
check_unsupported (CUdevice_attribute attr, const char *spec, const char *needle)
{
  CUdevice dev;
  int saved = 0;

  g_assert_cmpint (drv->cuDeviceGet (&dev, 0), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuDeviceGetAttribute (&saved, attr, dev), ==, CUDA_SUCCESS);
  mt_fake_set_attribute (0, attr, 0);
  assert_spec_error (spec, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, needle);
  mt_fake_set_attribute (0, attr, saved);
}

static void
test_options_unsupported (void)
{
  FakeCudaCounts base;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("needs the fake driver to switch device attributes off");
      return;
    }
  counts_begin (&base);
  check_unsupported (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "vmm", "device 0");
  check_unsupported (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                     "vmm:handle_type=posix_fd", "posix_fd");
  check_unsupported (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, "vmm:handle_type=fabric",
                     "fabric");
  check_unsupported (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                     "vmm:gpu_direct_rdma=true", "gpu_direct_rdma");
  check_unsupported (CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                     "vmm:location=host_numa", "host_numa");
  /* CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
  check_unsupported ((CUdevice_attribute) 145, "vmm:location=host", "location=host");
  mt_assert_fake_counts_equal (&base);
}

/* The handle types and RDMA, where the device has them: the memory works the same. */
static void
test_options_supported (void)
{
  FakeCudaCounts base;
  const char *specs[] = { "vmm:handle_type=posix_fd",
                          "vmm:gpu_direct_rdma=true",
                          "vmm:location=host_numa,numa_id=0",
                          "vmm:location=host_numa,numa_id=-1",
                          "vmm:location=host_numa,handle_type=posix_fd",
                          "vmm:access=rw,granularity=recommended,reserve=0,chunk=0" };

  if (!require_device ())
    return;
  counts_begin (&base);
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = memres_resource_new (specs[i], &error);
      MemresBuffer *buf;

      if (mr == NULL && g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
        {
          g_test_message ("%s: %s", specs[i], error->message);
          continue;
        }
      g_assert_no_error (error);
      buf = allocate (mr, gran ());
      write_pattern (buf, 0, gran (), 11 + i);
      resize (buf, 3 * gran ());
      check_pattern (buf, 0, gran (), 11 + i);
      close_buffer (buf);
    }
  mt_assert_fake_counts_equal (&base);
}

/* --- access -------------------------------------------------------------------------------- */

/* Copies @n bytes at @address to @dest with device @device's context current. */
static CUresult
copy_from_device (int device, CUdeviceptr address, gpointer dest, gsize n)
{
  g_autoptr (GError) error = NULL;
  CUcontext ctx, previous = NULL;
  CUresult res;

  gboolean ok = memres_cuda_get_primary_context (device, &ctx, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  g_assert_cmpint (drv->cuCtxGetCurrent (&previous), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuCtxSetCurrent (ctx), ==, CUDA_SUCCESS);
  res = drv->cuMemcpyDtoHAsync (dest, address, n, NULL);
  if (res == CUDA_SUCCESS)
    res = drv->cuStreamSynchronize (NULL);
  g_assert_cmpint (drv->cuCtxSetCurrent (previous), ==, CUDA_SUCCESS);
  return res;
}

static void
test_peers (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) shared = NULL;
  g_autoptr (MemresResource) unshared = NULL;
  MemresBuffer *a, *b;
  gsize g;
  g_autofree guint8 *data = NULL;

  if (!mt_require_devices (2) || !require_device ())
    return;
  g = gran ();
  data = g_malloc (2 * g);
  counts_begin (&base);
  assert_spec_error ("vmm:peers=1+1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "peers");
  shared = vmm_new ("vmm:peers=1,chunk=%" G_GSIZE_FORMAT, g);
  unshared = vmm_new ("vmm");

  a = allocate (shared, g);
  b = allocate (unshared, g);
  write_pattern (a, 0, g, 12);
  write_pattern (b, 0, g, 13);
  g_assert_cmpint (get_access (a, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  g_assert_cmpint (get_access (a, 1), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  g_assert_cmpint (get_access (b, 1), ==, CU_MEM_ACCESS_FLAGS_PROT_NONE);

  g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (a), data, g), ==, CUDA_SUCCESS);
  mt_assert_pattern (data, g, 12);
  g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (b), data, g), !=, CUDA_SUCCESS);

  /* memory added by a grow is shared too, in place and after a move */
  resize (a, 2 * g);
  write_pattern (a, g, g, 14);
  g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (a), data, 2 * g), ==,
                   CUDA_SUCCESS);
  mt_assert_pattern (data, g, 12);
  mt_assert_pattern (data + g, g, 14);
  {
    VmmBlocker blocker = block_after (a);
    guint64 address = memres_buffer_get_address (a);

    resize (a, 3 * g);
    g_assert_cmpuint (memres_buffer_get_address (a), !=, address);
    g_assert_cmpint (copy_from_device (1, memres_buffer_get_address (a), data, 2 * g), ==,
                     CUDA_SUCCESS);
    mt_assert_pattern (data, g, 12);
    mt_assert_pattern (data + g, g, 14);
    unblock (&blocker);
  }

  /* with device 1's context current, a shrink waits in device 0's and leaves device 1's current */
  {
    g_autoptr (GError) error = NULL;
    CUcontext ctx1, previous = NULL, now = NULL;
    long pushes = mt_driver_is_fake () ? mt_fake_call_count ("cuCtxPushCurrent") : 0;
    gboolean ok = memres_cuda_get_primary_context (1, &ctx1, &error);

    g_assert_no_error (error);
    g_assert_true (ok);
    g_assert_cmpint (drv->cuCtxGetCurrent (&previous), ==, CUDA_SUCCESS);
    g_assert_cmpint (drv->cuCtxSetCurrent (ctx1), ==, CUDA_SUCCESS);
    resize (a, g);
    g_assert_cmpint (drv->cuCtxGetCurrent (&now), ==, CUDA_SUCCESS);
    g_assert_true (now == ctx1);
    g_assert_cmpint (drv->cuCtxSetCurrent (previous), ==, CUDA_SUCCESS);
    if (mt_driver_is_fake ())
      g_assert_cmpint (mt_fake_call_count ("cuCtxPushCurrent"), ==, pushes + 1);
    check_pattern (a, 0, g, 12);
  }

  close_buffer (a);
  close_buffer (b);
  mt_assert_fake_counts_equal (&base);
}

/* Writes into a read-only buffer. Runs in a subprocess: on a GPU, a faulting write can leave the
 * context unusable. */
static void
test_read_only (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  gsize g;
  g_autofree guint8 *before = NULL;
  g_autofree guint8 *after = NULL;
  CUresult res;

  if (!require_device ())
    return;
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_test_trap_assert_passed ();
      return;
    }
  g = gran ();
  before = g_malloc (g);
  after = g_malloc (g);
  counts_begin (&base);
  mr = vmm_new ("vmm:access=ro");
  buf = allocate (mr, g);
  g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READ);
  gboolean ok = memres_buffer_read (buf, 0, before, g, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);

  ensure_context ();
  res = drv->cuMemsetD8Async (memres_buffer_get_address (buf), 0xa5, g, NULL);
  if (res == CUDA_SUCCESS)
    res = drv->cuStreamSynchronize (NULL);
  if (mt_driver_is_fake ())
    g_assert_cmpint (res, !=, CUDA_SUCCESS);
  if (res == CUDA_SUCCESS)
    {
      /* a driver that does not report the write must at least not have done it */
      gboolean ok = memres_buffer_read (buf, 0, after, g, NULL, &error);
      g_assert_no_error (error);
      g_assert_true (ok);
      g_assert_cmpmem (before, g, after, g);
    }
  else
    g_test_message ("the write failed with %d", (int) res);

  /* growing keeps the buffer read-only */
  if (mt_driver_is_fake ())
    {
      resize (buf, 2 * g);
      g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READ);
      gboolean ok = memres_buffer_read (buf, 0, after, g, NULL, &error);
      g_assert_no_error (error);
      g_assert_true (ok);
      close_buffer (buf);
      mt_assert_fake_counts_equal (&base);
    }
}

/* --- statistics ---------------------------------------------------------------------------- */

static void
test_stats (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  MemresStats s;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 3 * g);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 3 * g);
  g_assert_cmpuint (s.used_current, ==, 3 * g);
  resize (buf, 5 * g);
  resize (buf, 2 * g - 1);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 2 * g);
  g_assert_cmpuint (s.used_current, ==, 2 * g);
  g_assert_cmpuint (s.reserved_high, ==, 5 * g);
  g_assert_cmpuint (s.used_high, ==, 5 * g);
  gboolean ok = memres_resource_reset_stats (mr, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_high, ==, 2 * g);
  g_assert_cmpuint (s.used_high, ==, 2 * g);
  close_buffer (buf);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 0);
  g_assert_cmpuint (s.used_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

/* A resize through `stats>vmm` changes what the `stats` layer counts as it changes vmm's usage:
 * the used bytes (and the tag's) are the new size after growing and after shrinking, a growth
 * raises the peaks, the allocation and its totals stay one; closing takes the new size back. */
static void
test_stats_counted_resize (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;
  MemresTagCounts t;
  MemresBuffer *buf;
  MemresStats s;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("stats>vmm:chunk=%" G_GSIZE_FORMAT, g);
  g_assert_true (memres_tag_push ("test-vmm-resize", &error));
  g_assert_no_error (error);
  buf = allocate (mr, 3 * g);
  g_assert_true (memres_tag_pop ("test-vmm-resize", &error));
  resize (buf, 5 * g);
  s = stats (mr);
  g_assert_cmpuint (s.used_current, ==, 5 * g);
  g_assert_cmpuint (s.used_high, ==, 5 * g);
  g_assert_true (memres_stats_get_counters (mr, &c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.bytes_current, ==, 5 * g);
  g_assert_cmpuint (c.bytes_peak, ==, 5 * g);
  g_assert_cmpuint (c.bytes_total, ==, 3 * g);
  g_assert_cmpuint (c.count_current, ==, 1);
  g_assert_cmpuint (c.count_total, ==, 1);
  g_assert_true (memres_resource_get_tag_counts (mr, "test-vmm-resize", &t, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (t.bytes_current, ==, 5 * g);
  g_assert_cmpuint (t.bytes_peak, ==, 5 * g);
  g_assert_cmpuint (t.count_current, ==, 1);
  /* the layer below counts the same */
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 5 * g);
  resize (buf, 2 * g - 1);
  s = stats (mr);
  g_assert_cmpuint (s.used_current, ==, 2 * g);
  g_assert_cmpuint (s.used_high, ==, 5 * g);
  g_assert_true (memres_resource_get_tag_counts (mr, "test-vmm-resize", &t, &error));
  g_assert_cmpuint (t.bytes_current, ==, 2 * g);
  g_assert_cmpuint (t.bytes_peak, ==, 5 * g);
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 2 * g);
  resize (buf, 0);
  g_assert_cmpuint (stats (mr).used_current, ==, 0);
  resize (buf, g);
  g_assert_cmpuint (stats (mr).used_current, ==, g);
  close_buffer (buf);
  g_assert_true (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_true (memres_resource_get_tag_counts (mr, "test-vmm-resize", &t, &error));
  g_assert_cmpuint (t.bytes_current, ==, 0);
  g_assert_cmpuint (stats (mr).used_current, ==, 0);
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

/* --- fault injection ----------------------------------------------------------------------- */

typedef struct
{
  MemresResource *mr;
  MemresBuffer *buf;
  gsize size;     /* bytes the buffer is allocated with (granules until run_sweep) */
  gsize new_size; /* bytes it is resized to (granules until run_sweep) */
  gboolean block; /* keep the range after the buffer reserved, so that growing moves */
  VmmBlocker blocker;
  guint64 address; /* of the buffer before the operation */
} SweepData;

static void
sweep_prepare (SweepData *d)
{
  d->buf = allocate (d->mr, d->size);
  write_pattern (d->buf, 0, d->size, 15);
  d->address = memres_buffer_get_address (d->buf);
  if (d->block)
    d->blocker = block_after (d->buf);
}

static void
sweep_discard (SweepData *d)
{
  unblock (&d->blocker);
  if (d->buf != NULL)
    close_buffer (g_steal_pointer (&d->buf));
}

static gboolean
op_allocate (gpointer data, GError **error)
{
  SweepData *d = data;

  d->buf = memres_resource_allocate (d->mr, d->size, NULL, error);
  return d->buf != NULL;
}

static void
undo_allocate (gpointer data)
{
  sweep_discard (data);
}

static gboolean
op_resize (gpointer data, GError **error)
{
  SweepData *d = data;
  gsize old_size = memres_buffer_get_size (d->buf);

  if (!memres_buffer_resize (d->buf, d->new_size, NULL, error))
    {
      /* the buffer is exactly as it was, data and access included */
      g_assert_cmpuint (memres_buffer_get_address (d->buf), ==, d->address);
      g_assert_cmpuint (memres_buffer_get_size (d->buf), ==, old_size);
      g_assert_cmpint (get_access (d->buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
      check_pattern (d->buf, 0, MIN (d->size, d->new_size), 15);
      write_pattern (d->buf, 0, old_size, 15);
      check_pattern (d->buf, 0, old_size, 15);
      return FALSE;
    }
  return TRUE;
}

static void
undo_resize (gpointer data)
{
  SweepData *d = data;

  sweep_discard (d);
  sweep_prepare (d);
}

static void
check_still_works (MemresResource *mr)
{
  MemresBuffer *buf = allocate (mr, 3 * gran ());

  write_pattern (buf, 0, 3 * gran (), 16);
  resize (buf, 7 * gran ());
  check_pattern (buf, 0, 3 * gran (), 16);
  close_buffer (buf);
}

static void
run_sweep (const char *what, MtOp op, MtUndo undo, SweepData *d, gboolean prepare,
           const char *const *ignore, int min_calls)
{
  FakeCudaCounts base;
  int n;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  d->size *= gran ();
  d->new_size *= gran ();
  counts_begin (&base);
  d->mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, gran ());
  if (prepare)
    sweep_prepare (d);
  n = mt_fault_sweep (what, op, undo, d, 0, ignore);
  g_assert_cmpint (n, >=, min_calls);
  sweep_discard (d);
  check_still_works (d->mr);
  g_clear_pointer (&d->mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* An allocation or growth that runs out of memory says the size asked for, then the step and the
 * bytes its own driver call asked for, then that call: the reservation (cuMemAddressReserve), a
 * chunk's creation (cuMemCreate) and mapping (cuMemMap), the access (cuMemSetAccess). Nothing
 * is left behind. */
static void
test_out_of_memory_names_call (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  gsize g;

  if (!require_device ())
    return;
  if (!mt_require_fake ("injects CUDA_ERROR_OUT_OF_MEMORY"))
    return;
  g = gran ();
  counts_begin (&base);
  /* g + 1 bytes: 2g rounded, in two chunks of g */
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  {
    const struct
    {
      const char *call;
      int nth;
      const char *step;
      gsize bytes;
    } cases[] = {
      { "cuMemAddressReserve", 1, "reserving %" G_GSIZE_FORMAT " bytes of address space", 2 * g },
      { "cuMemCreate", 2, "creating %" G_GSIZE_FORMAT " bytes of physical memory", g },
      { "cuMemMap", 1, "mapping %" G_GSIZE_FORMAT " bytes", g },
      { "cuMemSetAccess", 1, "granting access to %" G_GSIZE_FORMAT " bytes", 2 * g },
    };

    for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
      {
        g_autoptr (GError) error = NULL;
        g_autofree char *step = g_strdup_printf (cases[i].step, cases[i].bytes);
        g_autofree char *want
            = g_strdup_printf ("cannot allocate %" G_GSIZE_FORMAT " bytes: %s: %s: "
                               "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
                               g + 1, step, cases[i].call);

        mt_fake_fail_call (cases[i].call, cases[i].nth, CUDA_ERROR_OUT_OF_MEMORY);
        buf = memres_resource_allocate (mr, g + 1, NULL, &error);
        mt_fake_reset_faults ();
        g_assert_null (buf);
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
        mt_assert_oom_cause (error, want);
      }
  }
  /* a growth in place: from g to 3g, its second new chunk fails */
  buf = allocate (mr, g);
  {
    g_autoptr (GError) error = NULL;
    g_autofree char *want = g_strdup_printf (
        "cannot grow a buffer of %" G_GSIZE_FORMAT " bytes to %" G_GSIZE_FORMAT
        " bytes: creating %" G_GSIZE_FORMAT " bytes of physical memory: cuMemCreate: "
        "CUDA_ERROR_OUT_OF_MEMORY: out of memory",
        g, 3 * g, g);

    mt_fake_fail_call ("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY);
    g_assert_false (memres_buffer_resize (buf, 3 * g, NULL, &error));
    mt_fake_reset_faults ();
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    mt_assert_oom_cause (error, want);
    g_assert_cmpuint (memres_buffer_get_size (buf), ==, g);
  }
  close_buffer (buf);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_faults_allocate (void)
{
  SweepData d = { .size = 3 };

  /* reserve, 3 × (create, map), set access */
  run_sweep ("vmm allocate", op_allocate, undo_allocate, &d, FALSE, NULL, 8);
}

static void
test_faults_grow_in_place (void)
{
  /* A failed probe reservation moves the buffer instead (test_grow_probe_fails). */
  const char *const ignore[] = { "cuMemAddressReserve#1", NULL };
  SweepData d = { .size = 2, .new_size = 5 };

  /* 3 × (create, map), set access */
  run_sweep ("vmm grow in place", op_resize, undo_resize, &d, TRUE, ignore, 7);
}

static void
test_faults_grow_by_move (void)
{
  /* Freeing the probe reservation the driver placed elsewhere cannot be undone; the free of the
   * old range after the move is swept on its own in test_faults_move_commit. */
  const char *const ignore[] = { "cuMemAddressFree", "cuMemAddressReserve#1", NULL };
  SweepData d = { .size = 2, .new_size = 4, .block = TRUE };

  /* (probe), reserve, 2 × map, 2 × (create, map), set access, sync, unmap */
  run_sweep ("vmm grow by move", op_resize, undo_resize, &d, TRUE, ignore, 11);
}

static void
test_faults_shrink (void)
{
  SweepData d = { .size = 5, .new_size = 2 };

  /* sync, 3 × release, unmap */
  run_sweep ("vmm shrink", op_resize, undo_resize, &d, TRUE, NULL, 5);
}

/* A move whose last step fails (freeing the old reservations, here two of them) puts the
 * buffer back where it was, mapped and accessible. */
static void
test_faults_move_commit (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, g);
  resize (buf, 2 * g); /* a second reservation, in place */
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 2 * g, 17);
  blocker = block_after (buf);

  for (int nth = 2; nth <= 3; nth++)
    {
      FakeCudaCounts before;

      mt_fake_get_counts (&before);
      /* the 1st free is the probe's, the 2nd and 3rd those of the old reservations */
      mt_fake_fail_call ("cuMemAddressFree", nth, CUDA_ERROR_NOT_PERMITTED);
      g_assert_false (memres_buffer_resize (buf, 3 * g, NULL, &error));
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED);
      g_clear_error (&error);
      mt_fake_reset_faults ();
      mt_assert_fake_counts_equal (&before);
      g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * g);
      g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
      check_pattern (buf, 0, 2 * g, 17);
    }

  resize (buf, 3 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 2 * g, 17);
  close_buffer (buf);
  unblock (&blocker);
  mt_assert_fake_counts_equal (&base);
}

/* A shrink whose tail spans two reservations unmaps the last one first; when unmapping the
 * other then fails, the memory of the last one is gone already. The buffer keeps its size and
 * address: new memory replaces the lost (its bytes were being dropped), the rest keeps its data,
 * and no driver object is left over. */
static void
test_faults_shrink_split (void)
{
  FakeCudaCounts base, before;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  guint64 address;
  long creates;
  gsize g;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  g = gran ();
  counts_begin (&base);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, g);
  address = memres_buffer_get_address (buf);
  resize (buf, 3 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  write_pattern (buf, 0, 3 * g, 21);

  mt_fake_get_counts (&before);
  creates = mt_fake_call_count ("cuMemCreate");
  mt_fake_fail_call ("cuMemUnmap", 2, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_resize (buf, 0, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  mt_assert_fake_counts_equal (&before);
  /* the two chunks of the second reservation were replaced */
  g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates + 2);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * g);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 3 * g);
  check_pattern (buf, 0, g, 21);
  g_assert_cmpint (get_access (buf, 0), ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  write_pattern (buf, 0, 3 * g, 22);
  check_pattern (buf, 0, 3 * g, 22);

  resize (buf, 0);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A close that cannot wait for its stream changes nothing: the buffer stays open and closes
 * later. Once the teardown began it is not undone: each failing driver call of it is reported,
 * everything else is still released, only what the driver refused is left, and the buffer is
 * closed. The buffer has two reservations (it grew in place) and three chunks. */
static void
test_faults_close (void)
{
  static const struct
  {
    const char *entry;
    int nth;
    gboolean stays_open;
    int reservations, mappings, physical_handles; /* left behind */
  } cases[] = {
    { "cuCtxGetCurrent", 1, TRUE, 0, 0, 0 }, /* no stream sync: nothing released */
    { "cuStreamSynchronize", 1, TRUE, 0, 0, 0 },
    { "cuMemUnmap", 1, FALSE, 1, 1, 0 }, /* the first reservation and its chunk's mapping */
    { "cuMemAddressFree", 1, FALSE, 1, 0, 0 },
    { "cuMemUnmap", 2, FALSE, 1, 2, 0 }, /* the second reservation and its two chunks' mappings */
    { "cuMemAddressFree", 2, FALSE, 1, 0, 0 },
    { "cuMemRelease", 1, FALSE, 0, 0, 1 },
    { "cuMemRelease", 3, FALSE, 0, 0, 1 },
  };
  FakeCudaCounts expected;
  g_autoptr (MemresResource) mr = NULL;

  if (!require_device ())
    return;
  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault injection needs the fake driver");
      return;
    }
  counts_begin (&expected);
  mr = vmm_new ("vmm:chunk=%" G_GSIZE_FORMAT, gran ());

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = allocate (mr, gran ());
      guint64 address = memres_buffer_get_address (buf);

      resize (buf, 3 * gran ());
      g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
      g_test_message ("close with %s #%d failing", cases[i].entry, cases[i].nth);
      mt_fake_fail_call (cases[i].entry, cases[i].nth, CUDA_ERROR_UNKNOWN);
      g_assert_false (memres_buffer_close (buf, NULL, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
      g_assert_nonnull (strstr (error->message, cases[i].entry));
      g_assert_true (memres_buffer_is_closed (buf) == !cases[i].stays_open);
      if (cases[i].stays_open)
        {
          g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
          g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * gran ());
          g_assert_cmpuint (stats (mr).reserved_current, >, 0);
          g_clear_error (&error);
          g_assert_true (memres_buffer_close (buf, NULL, &error));
          g_assert_no_error (error);
        }
      memres_buffer_unref (buf);
      expected.reservations += cases[i].reservations;
      expected.mappings += cases[i].mappings;
      expected.physical_handles += cases[i].physical_handles;
      mt_assert_fake_counts_equal (&expected);
      g_assert_cmpuint (stats (mr).reserved_current, ==, 0);
    }
}

int
main (int argc, char **argv)
{
  const char *driver = g_getenv ("MEMRES_CUDA_DRIVER");

  /* Before the driver loads: two fake devices for the peer tests, room for 64 × 64 MiB. */
  if (driver != NULL && strstr (driver, "fakecuda") != NULL)
    {
      g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
      g_setenv ("FAKECUDA_DEVICE_MEMORY", "8GiB", FALSE);
    }
  mt_init (&argc, &argv);

  g_test_add_func ("/vmm/allocate/rounding", test_allocate_rounding);
  g_test_add_func ("/vmm/grow/stray-free-fails", test_grow_stray_free_fails);
  g_test_add_func ("/vmm/allocate/minimum-granularity", test_allocate_minimum_granularity);
  g_test_add_func ("/vmm/allocate/huge", test_allocate_huge);
  g_test_add_func ("/vmm/allocate/host", test_allocate_host);
  g_test_add_func ("/vmm/allocate/host-numa", test_allocate_host_numa);
  g_test_add_func ("/vmm/grow/in-place", test_grow_in_place);
  g_test_add_func ("/vmm/grow/one-copy", test_grow_one_copy);
  g_test_add_func ("/vmm/grow/within-reserve", test_grow_within_reserve);
  g_test_add_func ("/vmm/grow/move", test_grow_by_move);
  g_test_add_func ("/vmm/grow/probe-fails", test_grow_probe_fails);
  g_test_add_func ("/vmm/grow/rollback-deinitialized", test_rollback_deinitialized);
  g_test_add_func ("/vmm/grow/from-empty", test_grow_from_empty);
  g_test_add_func ("/vmm/shrink/chunks", test_shrink);
  g_test_add_func ("/vmm/shrink/partial-chunk", test_shrink_partial_chunk);
  g_test_add_func ("/vmm/shrink/to-zero", test_shrink_to_zero);
  g_test_add_func ("/vmm/close/returns-memory", test_close_returns_memory);
  g_test_add_func ("/vmm/options/invalid", test_options_invalid);
  g_test_add_func ("/vmm/options/unsupported", test_options_unsupported);
  g_test_add_func ("/vmm/options/supported", test_options_supported);
  g_test_add_func ("/vmm/access/peers", test_peers);
  g_test_add_func ("/vmm/access/read-only", test_read_only);
  g_test_add_func ("/vmm/stats", test_stats);
  g_test_add_func ("/vmm/stats/counted-resize", test_stats_counted_resize);
  g_test_add_func ("/vmm/faults/allocate", test_faults_allocate);
  g_test_add_func ("/vmm/faults/out-of-memory-names-call", test_out_of_memory_names_call);
  g_test_add_func ("/vmm/faults/close", test_faults_close);
  g_test_add_func ("/vmm/faults/grow-in-place", test_faults_grow_in_place);
  g_test_add_func ("/vmm/faults/grow-by-move", test_faults_grow_by_move);
  g_test_add_func ("/vmm/faults/move-commit", test_faults_move_commit);
  g_test_add_func ("/vmm/faults/shrink", test_faults_shrink);
  g_test_add_func ("/vmm/faults/shrink-split", test_faults_shrink_split);
  return g_test_run ();
}

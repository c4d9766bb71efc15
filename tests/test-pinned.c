/* test-pinned.c: the pinned kind (page-locked host memory), pool and legacy mode, against the
 * fake driver (suite fake) and the real one (suite gpu). The contract it keeps with every kind
 * is test-conformance.c's. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define MiB ((gsize) 1 << 20)

static void
get_stats (MemresResource *mr, MemresStats *stats)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_get_stats (mr, stats, &error));
  g_assert_no_error (error);
}

static int
device_attribute (CUdevice_attribute attr)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&error);
  CUdevice dev;
  int value = 0;

  g_assert_no_error (error);
  g_assert_cmpint (drv->cuDeviceGet (&dev, 0), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuDeviceGetAttribute (&value, attr, dev), ==, CUDA_SUCCESS);
  return value;
}

static gboolean
host_pools_supported (void)
{
  return device_attribute (CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED)
         || (device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED)
             && device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID) >= 0);
}

/* Pool mode where the device has no host pools cannot be tested on that device. */
static gboolean
require_pool_mode (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  if (host_pools_supported ())
    return TRUE;
  g_test_skip ("device 0 has no host memory pools");
  return FALSE;
}

/* Writes a pattern through the host pointer of a buffer of @src_spec, copies it to a dmr
 * device buffer, copies that into a buffer of @dst_spec and compares every byte. */
static void
check_roundtrip (const char *src_spec, const char *dst_spec, gsize size, guint32 seed)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) src_mr = mt_new_ok (src_spec);
  g_autoptr (MemresResource) dst_mr = mt_new_ok (dst_spec);
  g_autoptr (MemresResource) dev_mr = mt_new_ok ("dmr:device=0");
  MemresBuffer *src = mt_alloc_ok (src_mr, size, NULL);
  MemresBuffer *dev = mt_alloc_ok (dev_mr, size, NULL);
  MemresBuffer *dst = mt_alloc_ok (dst_mr, size, NULL);

  g_assert_true (memres_buffer_is_host_accessible (src));
  g_assert_true (memres_buffer_is_device_accessible (src));
  g_assert_cmpint (memres_buffer_get_device (src), ==, -1);
  g_assert_nonnull (memres_buffer_get_pointer (src));
  g_assert_cmpuint ((guintptr) memres_buffer_get_pointer (src), ==,
                    memres_buffer_get_address (src));

  mt_sync_ok (NULL); /* stream-ordered allocations are usable from the host once complete */
  mt_fill_pattern (memres_buffer_get_pointer (src), size, seed);
  memset (memres_buffer_get_pointer (dst), 0, size);

  g_assert_true (memres_buffer_copy_to (src, dev, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_copy_to (dev, dst, NULL, &error));
  g_assert_no_error (error);
  mt_sync_ok (NULL);
  mt_assert_pattern (memres_buffer_get_pointer (dst), size, seed);

  mt_close_ok (src, NULL);
  mt_close_ok (dev, NULL);
  mt_close_ok (dst, NULL);
}

static void
test_pool_roundtrip (void)
{
  FakeCudaCounts base;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  check_roundtrip ("pinned", "pinned", 3 * MiB + 5, 1);
  check_roundtrip ("pinned:mode=pool,device=0,devices=0", "pinned:numa_id=-1", 4096, 2);
  mt_assert_fake_counts_equal (&base);
}

static void
test_legacy_roundtrip (void)
{
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  check_roundtrip ("pinned:mode=legacy", "pinned:mode=legacy", 3 * MiB + 5, 3);
  mt_assert_fake_counts_equal (&base);
}

/* Write-combined memory is slow to read from the host: write it, read it back through a copy
 * into ordinary pinned memory. */
static void
test_legacy_writecombined (void)
{
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  check_roundtrip ("pinned:mode=legacy,writecombined=true", "pinned:mode=legacy", 2 * MiB + 3, 4);
  mt_assert_fake_counts_equal (&base);
}

static void
test_legacy_portable_devicemap (void)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv;
  FakeCudaCounts base;
  MemresBuffer *buf;
  CUdeviceptr dptr = 0;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  check_roundtrip ("pinned:mode=legacy,portable=true,devicemap=true",
                   "pinned:mode=legacy,portable=true", MiB, 5);

  /* Mapped memory has a device pointer. */
  {
    g_autoptr (MemresResource) mr = mt_new_ok ("pinned:mode=legacy,devicemap=true");

    drv = memres_cuda_get_driver (&error);
    g_assert_no_error (error);
    buf = mt_alloc_ok (mr, 4096, NULL);
    g_assert_cmpint (drv->cuMemHostGetDevicePointer (&dptr, memres_buffer_get_pointer (buf), 0), ==,
                     CUDA_SUCCESS);
    g_assert_cmpuint (dptr, !=, 0);
    mt_close_ok (buf, NULL);
  }
  mt_assert_fake_counts_equal (&base);
}

static void
test_pool_flags (void)
{
  g_autoptr (MemresResource) pool = NULL;
  g_autoptr (MemresResource) legacy = NULL;
  FakeCudaCounts base;
  MemresBuffer *buf;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  pool = mt_new_ok ("pinned");
  legacy = mt_new_ok ("pinned:mode=legacy");

  g_assert_cmpstr (memres_resource_get_kind_name (pool), ==, "pinned");
  g_assert_cmpint (memres_resource_get_device (pool), ==, -1);
  g_assert_cmphex (memres_resource_get_flags (pool), ==,
                   MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE
                       | MEMRES_MEMORY_STREAM_ORDERED);
  g_assert_cmpint (memres_resource_get_device (legacy), ==, -1);
  g_assert_cmphex (memres_resource_get_flags (legacy), ==,
                   MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE);

  buf = mt_alloc_ok (pool, 4096, NULL);
  g_assert_cmphex (memres_buffer_get_flags (buf), ==, memres_resource_get_flags (pool));
  mt_close_ok (buf, NULL);
  buf = mt_alloc_ok (legacy, 4096, NULL);
  g_assert_cmphex (memres_buffer_get_flags (buf), ==, memres_resource_get_flags (legacy));
  mt_close_ok (buf, NULL);

  g_clear_pointer (&pool, memres_resource_unref);
  g_clear_pointer (&legacy, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* One rule for page-locked memory: a pinned buffer (either mode, on any device) and the same
 * memory wrapped with memres_buffer_new_for_pointer() (the driver asked) report the same
 * device, -1, and the same accessibility. */
static void
test_device_rule (void)
{
  const char *const specs[]
      = { "pinned", "pinned:mode=legacy", "pinned:device=1", "pinned:mode=legacy,device=1" };
  gint n_devices = 0;
  g_autoptr (GError) error = NULL;

  if (!require_pool_mode ())
    return;
  g_assert_true (memres_cuda_get_device_count (&n_devices, &error));
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = NULL;
      MemresBuffer *buf, *wrapped;

      if (strstr (specs[i], "device=1") != NULL && n_devices < 2)
        continue;
      mr = mt_new_ok (specs[i]);
      buf = mt_alloc_ok (mr, 64 * 1024, NULL);
      mt_sync_ok (NULL);
      wrapped = memres_buffer_new_for_pointer (memres_buffer_get_pointer (buf), 64 * 1024, 0, 0,
                                               NULL, NULL, &error);
      g_assert_no_error (error);
      g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
      g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
      g_assert_cmpint (memres_buffer_get_device (wrapped), ==, memres_buffer_get_device (buf));
      g_assert_cmphex (memres_buffer_get_flags (wrapped)
                           & (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE),
                       ==, MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE);
      /* copies still work both ways through either buffer */
      mt_write_pattern (buf, 0, 64 * 1024, 40 + i, NULL);
      mt_check_pattern (wrapped, 0, 64 * 1024, 40 + i, NULL);
      mt_close_ok (wrapped, NULL);
      mt_close_ok (buf, NULL);
    }
}

static void
test_pool_stats (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;
  MemresStats s;
  MemresBuffer *a, *b;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("pinned");

  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.reserved_current, ==, 0);
  g_assert_cmpuint (s.n_buffers, ==, 0);

  a = mt_alloc_ok (mr, 2 * MiB, NULL);
  mt_sync_ok (NULL);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 2 * MiB);
  g_assert_cmpuint (s.used_high, ==, 2 * MiB);
  g_assert_cmpuint (s.reserved_current, >=, 2 * MiB);
  g_assert_cmpuint (s.n_buffers, ==, 1);

  b = mt_alloc_ok (mr, 4 * MiB, NULL);
  mt_sync_ok (NULL);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 6 * MiB);
  g_assert_cmpuint (s.used_high, ==, 6 * MiB);
  g_assert_cmpuint (s.reserved_current, >=, 6 * MiB);
  g_assert_cmpuint (s.reserved_high, >=, s.reserved_current);
  g_assert_cmpuint (s.n_buffers, ==, 2);

  mt_close_ok (a, NULL);
  mt_sync_ok (NULL);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 4 * MiB);
  g_assert_cmpuint (s.used_high, ==, 6 * MiB);
  g_assert_cmpuint (s.n_buffers, ==, 1);

  g_assert_true (memres_resource_reset_stats (mr, &error));
  g_assert_no_error (error);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_high, ==, 4 * MiB);
  g_assert_cmpuint (s.reserved_high, ==, s.reserved_current);

  /* The release threshold is max by default: freed memory stays reserved until trimmed. */
  mt_close_ok (b, NULL);
  mt_sync_ok (NULL);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.reserved_current, >=, 4 * MiB);
  g_assert_cmpuint (s.n_buffers, ==, 0);

  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
  get_stats (mr, &s);
  g_assert_cmpuint (s.reserved_current, ==, 0);
  g_assert_cmpuint (s.used_current, ==, 0);

  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* Trimming keeps what is asked for and gives back the rest; a pool reused after a trim works. */
static void
test_pool_trim (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;
  MemresStats before, after;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("pinned:release_threshold=max,max_size=64MiB");

  mt_close_ok (mt_alloc_ok (mr, 8 * MiB, NULL), NULL);
  mt_sync_ok (NULL);
  get_stats (mr, &before);
  g_assert_cmpuint (before.reserved_current, >=, 8 * MiB);

  g_assert_true (memres_resource_trim (mr, before.reserved_current, &error));
  g_assert_no_error (error);
  get_stats (mr, &after);
  g_assert_cmpuint (after.reserved_current, ==, before.reserved_current);

  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
  get_stats (mr, &after);
  g_assert_cmpuint (after.reserved_current, ==, 0);

  check_roundtrip ("pinned:max_size=64MiB", "pinned:mode=legacy", MiB, 6);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_legacy_stats (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  FakeCudaCounts base;
  MemresStats s;
  MemresBuffer *a, *b;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("pinned:mode=legacy");
  a = mt_alloc_ok (mr, 3000, NULL);
  b = mt_alloc_ok (mr, 5000, NULL);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 8000);
  g_assert_cmpuint (s.reserved_current, ==, 8000);
  g_assert_cmpuint (s.n_buffers, ==, 2);
  mt_close_ok (a, NULL);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 5000);
  g_assert_cmpuint (s.used_high, ==, 8000);
  g_assert_true (memres_resource_reset_stats (mr, &error));
  g_assert_no_error (error);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_high, ==, 5000);
  /* Nothing held beyond the buffers: trim succeeds and changes nothing. */
  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
  get_stats (mr, &s);
  g_assert_cmpuint (s.reserved_current, ==, 5000);
  mt_close_ok (b, NULL);
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.n_buffers, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_pool_access (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) pool = NULL;
  g_autoptr (MemresResource) legacy = NULL;
  MemresAccess access = MEMRES_ACCESS_NONE;
  FakeCudaCounts base;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  pool = mt_new_ok ("pinned:devices=0");
  g_assert_true (memres_resource_get_access (pool, 0, &access, &error));
  g_assert_no_error (error);
  g_assert_cmpint (access, ==, MEMRES_ACCESS_READWRITE);

  legacy = mt_new_ok ("pinned:mode=legacy");
  g_assert_false (memres_resource_get_access (legacy, 0, &access, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);

  g_clear_pointer (&pool, memres_resource_unref);
  g_clear_pointer (&legacy, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_options_invalid (void)
{
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  /* Options of the other mode. */
  mt_new_fails ("pinned:mode=legacy,max_size=1MiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "max_size");
  mt_new_fails ("pinned:mode=legacy,numa_id=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "numa_id");
  mt_new_fails ("pinned:mode=legacy,fallback=false", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "fallback");
  mt_new_fails ("pinned:mode=legacy,release_threshold=0", MEMRES_ERROR,
                MEMRES_ERROR_INVALID_ARGUMENT, "release_threshold");
  mt_new_fails ("pinned:mode=legacy,ipc=false", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "ipc");
  mt_new_fails ("pinned:writecombined=true", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "writecombined");
  mt_new_fails ("pinned:mode=pool,portable=false", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "portable");
  mt_new_fails ("pinned:devicemap=true", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "devicemap");
  /* Bad values. */
  mt_new_fails ("pinned:max_size=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "max_size");
  mt_new_fails ("pinned:devices=1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "devices");
  mt_new_fails ("pinned:mode=auto", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "mode");
  mt_new_fails ("pinned:numa_id=-2", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "numa_id");
  mt_new_fails ("pinned:device=4096", MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  mt_new_fails ("pinned:mode=legacy,device=4096", MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  mt_assert_fake_counts_equal (&base);
}

/* A NUMA node the host does not have. */
static void
test_options_numa_missing (void)
{
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mt_new_fails ("pinned:numa_id=4095", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "NUMA node 4095");
  mt_new_fails ("pinned:numa_id=4095,fallback=true", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "NUMA node 4095");
  /* A node the driver refuses. */
  if (mt_driver_is_fake ())
    {
      mt_fake_fail_call ("cuMemPoolCreate", 1, CUDA_ERROR_INVALID_VALUE);
      mt_new_fails ("pinned:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                    "refuses host NUMA node 0");
      mt_fake_reset_faults ();
    }
  mt_assert_fake_counts_equal (&base);
}

/* Node 0 exists on every Linux host: a pool on it works where the device has host NUMA pools,
 * and is refused (naming the attribute) where it has not. */
static void
test_pool_numa_node (void)
{
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  if (device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED))
    check_roundtrip ("pinned:numa_id=0", "pinned:numa_id=0", MiB + 1, 7);
  else
    mt_new_fails ("pinned:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                  "HOST_NUMA_MEMORY_POOLS_SUPPORTED");
  mt_assert_fake_counts_equal (&base);
}

/* Sets a fake device attribute for the rest of the test, remembering its value. */
typedef struct
{
  CUdevice_attribute attr;
  int value;
} SavedAttribute;

static void
override_attribute (SavedAttribute *saved, CUdevice_attribute attr, int value)
{
  saved->attr = attr;
  saved->value = device_attribute (attr);
  mt_fake_set_attribute (0, attr, value);
}

static void
restore_attribute (const SavedAttribute *saved)
{
  mt_fake_set_attribute (0, saved->attr, saved->value);
}

/* Pool mode on a device without host memory pools: refused, naming legacy mode, unless
 * fallback=true, which gives legacy mode. */
static void
test_pool_unsupported (void)
{
  g_autoptr (MemresResource) mr = NULL;
  SavedAttribute host = { 0 }, numa = { 0 };
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  if (!mt_driver_is_fake () && host_pools_supported ())
    {
      g_test_skip ("device 0 has host memory pools (the fake driver tests their absence)");
      return;
    }
  mt_counts_snapshot (&base);
  if (mt_driver_is_fake ())
    {
      override_attribute (&host, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 0);
      override_attribute (&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0);
    }

  mt_new_fails ("pinned", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "mode=legacy");
  mt_new_fails ("pinned:mode=pool,fallback=false", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "mode=legacy");
  /* Legacy mode cannot share memory: no fallback for ipc=true. */
  mt_new_fails ("pinned:ipc=true,fallback=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "ipc");

  mr = mt_new_ok ("pinned:fallback=true,max_size=1GiB");
  g_assert_cmphex (memres_resource_get_flags (mr), ==,
                   MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE);
  g_clear_pointer (&mr, memres_resource_unref);
  check_roundtrip ("pinned:fallback=true", "pinned:mode=legacy", MiB + 7, 8);

  if (mt_driver_is_fake ())
    {
      restore_attribute (&numa);
      restore_attribute (&host);
    }
  mt_assert_fake_counts_equal (&base);
}

/* Host pools without host NUMA pools: the default pool mode uses the HOST location, a named
 * node is refused. */
static void
test_pool_no_numa_pools (void)
{
  SavedAttribute host, numa;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("needs the fake driver to turn host NUMA pools off"))
    return;
  mt_counts_snapshot (&base);
  override_attribute (&host, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 1);
  override_attribute (&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0);

  check_roundtrip ("pinned", "pinned", MiB, 9);
  mt_new_fails ("pinned:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "mode=legacy");
  mt_new_fails ("pinned:ipc=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "ipc");

  restore_attribute (&numa);

  /* Host NUMA pools, but no node close to the device: the HOST location. */
  override_attribute (&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1);
  check_roundtrip ("pinned", "pinned:numa_id=-1", MiB, 10);
  restore_attribute (&numa);
  restore_attribute (&host);
  mt_assert_fake_counts_equal (&base);
}

/* A device attribute that cannot be read fails creation with the driver's error, prefixed with
 * the attribute's name; CUDA_ERROR_INVALID_VALUE (a driver older than the attribute) reads as
 * "not supported" instead. */
static void
test_pool_attribute_errors (void)
{
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("fails cuDeviceGetAttribute"))
    return;
  memres_resource_unref (mt_new_ok ("pinned")); /* the driver and the plugin loaded */
  mt_counts_snapshot (&base);
  mt_fake_fail_call ("cuDeviceGetAttribute", 1, CUDA_ERROR_NOT_PERMITTED);
  mt_new_fails ("pinned", MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_PERMITTED,
                "pinned: device attribute HOST_MEMORY_POOLS_SUPPORTED: cuDeviceGetAttribute");
  mt_fake_reset_faults ();
  /* the second read is HOST_NUMA_MEMORY_POOLS_SUPPORTED: unknown, so a named node is refused */
  mt_fake_fail_call ("cuDeviceGetAttribute", 2, CUDA_ERROR_INVALID_VALUE);
  mt_new_fails ("pinned:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "has no host NUMA memory pools");
  mt_fake_reset_faults ();
  mt_assert_fake_counts_equal (&base);
}

static void
check_too_large (const char *spec)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  MemresBuffer *buf = memres_resource_allocate (mr, G_MAXSIZE, NULL, &error);

  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
}

static void
test_allocate_max_size (void)
{
  FakeCudaCounts base;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  /* (plain pinned and pinned:mode=legacy: the max-size case of test-conformance.c) */
  check_too_large ("pinned:max_size=1MiB");

  /* Beyond the pool's max_size: the driver's out-of-memory, reported as such. */
  {
    g_autoptr (GError) error = NULL;
    g_autoptr (MemresResource) mr = mt_new_ok ("pinned:max_size=4MiB");
    MemresBuffer *buf = mt_alloc_ok (mr, 2 * MiB, NULL);

    g_assert_null (memres_resource_allocate (mr, 64 * MiB, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    mt_close_ok (buf, NULL);
  }
  mt_assert_fake_counts_equal (&base);
}

/* More than the host's physical memory cannot be page-locked: refused before any driver call,
 * in both modes and with a max_size, and the resource keeps working. */
static void
check_above_host_memory (const char *spec, gsize size)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  long pool_calls = mt_driver_is_fake () ? mt_fake_call_count ("cuMemAllocFromPoolAsync") : 0;
  long host_calls = mt_driver_is_fake () ? mt_fake_call_count ("cuMemHostAlloc") : 0;
  MemresStats s;

  g_assert_null (memres_resource_allocate (mr, size, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "physical memory"));
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuMemAllocFromPoolAsync"), ==, pool_calls);
      g_assert_cmpint (mt_fake_call_count ("cuMemHostAlloc"), ==, host_calls);
    }
  get_stats (mr, &s);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.used_high, ==, 0);
  g_assert_cmpuint (s.n_buffers, ==, 0);
  mt_close_ok (mt_alloc_ok (mr, 4096, NULL), NULL);
}

static void
test_allocate_above_host_memory (void)
{
  long pages = sysconf (_SC_PHYS_PAGES);
  long page_size = sysconf (_SC_PAGESIZE);
  FakeCudaCounts base;
  guint64 total;

  if (!require_pool_mode ())
    return;
  if (pages <= 0 || page_size <= 0)
    {
      g_test_skip ("the host's physical memory is unknown");
      return;
    }
  total = (guint64) pages * (guint64) page_size;
  if (total >= G_MAXSSIZE)
    {
      g_test_skip ("the core refuses sizes above G_MAXSSIZE itself");
      return;
    }
  mt_counts_snapshot (&base);
  check_above_host_memory ("pinned", (gsize) total + 1);
  check_above_host_memory ("pinned:mode=legacy", (gsize) total + 1);
  check_above_host_memory ("pinned:max_size=1MiB", (gsize) total + 1);
  mt_assert_fake_counts_equal (&base);
}

/* Fault sweeps: every driver call of creation, allocation and close fails once in turn. */
/* Allocate then close: a failing close must still leave nothing behind. */
static gboolean
op_allocate_close (gpointer data, GError **error)
{
  MtSweepData *d = data;
  MemresBuffer *buf = memres_resource_allocate (d->mr, d->size, NULL, error);
  gboolean ok;

  if (buf == NULL)
    return FALSE;
  ok = memres_buffer_close (buf, NULL, error);
  memres_buffer_unref (buf);
  return ok;
}

static void
sweep (const char *spec, gboolean expect_calls)
{
  /* A failing free cannot be undone: the memory stays allocated. */
  static const char *const frees[] = { "cuMemFreeAsync", "cuMemFreeHost", NULL };
  g_autofree char *what = NULL;
  MtSweepData d = { .spec = spec, .size = 2 * MiB };
  int n;

  /* Warm up once: first-use work of the core (loading the plugin, retaining the primary
   * context) happens once per process and is not the operation under test. */
  g_assert_true (mt_op_new (&d, NULL));
  g_assert_true (op_allocate_close (&d, NULL));
  mt_undo_new (&d);

  what = g_strdup_printf ("create %s", spec);
  n = mt_fault_sweep (what, mt_op_new, mt_undo_new, &d, CUDA_ERROR_NOT_PERMITTED, NULL);
  if (expect_calls)
    g_assert_cmpint (n, >, 0);

  d.mr = mt_new_ok (spec);
  g_free (what);
  what = g_strdup_printf ("allocate %s", spec);
  n = mt_fault_sweep (what, mt_op_allocate, mt_undo_allocate, &d, CUDA_ERROR_NOT_PERMITTED, NULL);
  g_assert_cmpint (n, >, 0);
  g_free (what);
  what = g_strdup_printf ("allocate+close %s", spec);
  n = mt_fault_sweep (what, op_allocate_close, NULL, &d, CUDA_ERROR_NOT_PERMITTED, frees);
  g_assert_cmpint (n, >, 0);
  mt_undo_new (&d);
}

static void
test_fault_sweep_pool (void)
{
  FakeCudaCounts base;

  if (!require_pool_mode ())
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  sweep ("pinned", TRUE);
  sweep ("pinned:numa_id=0,max_size=64MiB,release_threshold=1MiB", TRUE);
  mt_assert_fake_counts_equal (&base);
}

static void
test_fault_sweep_legacy (void)
{
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  sweep ("pinned:mode=legacy", FALSE);
  sweep ("pinned:mode=legacy,portable=true,devicemap=true,writecombined=true", FALSE);
  mt_assert_fake_counts_equal (&base);
}

/* ---- ipc=true ------------------------------------------------------------------------------ */

static MemresIpcHandle *
export_handle (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresIpcHandle *handle = memres_resource_export_handle (mr, &error);

  g_assert_no_error (error);
  g_assert_nonnull (handle);
  g_assert_cmpstr (memres_ipc_handle_get_kind (handle), ==, "pinned");
  return handle;
}

static void
export_buffer (MemresBuffer *buf, MemresBufferDescriptor *desc)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_export (buf, desc, &error));
  g_assert_no_error (error);
}

static MemresBuffer *
import_buffer (MemresResource *importer, const MemresBufferDescriptor *desc)
{
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf
      = memres_buffer_import (importer, desc->bytes, sizeof desc->bytes, NULL, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  return buf;
}

#define IPC_FLAGS                                                                                  \
  (MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED  \
   | MEMRES_MEMORY_IPC_ENABLED)

/* Export and import inside one process: the importer maps the exporter's bytes, through its
 * host pointer and through copies. */
static void
test_ipc_same_process (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) exporter = NULL;
  g_autoptr (MemresResource) importer = NULL;
  g_autoptr (MemresResource) dev_mr = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  MemresBufferDescriptor desc;
  MemresBuffer *buf, *imported, *dev;
  FakeCudaCounts base;
  const gsize size = 2 * MiB;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("pinned:ipc=true");
  g_assert_cmphex (memres_resource_get_flags (exporter), ==, IPC_FLAGS);

  handle = export_handle (exporter);
  importer = memres_resource_import_handle (handle, &error);
  if (importer == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      g_clear_pointer (&exporter, memres_resource_unref);
      return;
    }
  g_assert_no_error (error);
  g_assert_true (importer != exporter);
  g_assert_cmpstr (memres_resource_get_kind_name (importer), ==, "pinned");
  g_assert_cmpint (memres_resource_get_device (importer), ==, -1);
  g_assert_cmphex (memres_resource_get_flags (importer), ==, IPC_FLAGS | MEMRES_MEMORY_IMPORTED);

  /* An importer cannot allocate. */
  g_assert_null (memres_resource_allocate (importer, 4096, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);

  buf = mt_alloc_ok (exporter, size, NULL);
  mt_sync_ok (NULL);
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 21);
  export_buffer (buf, &desc);
  imported = import_buffer (importer, &desc);
  g_assert_cmpuint (memres_buffer_get_size (imported), ==, size);
  g_assert_true (memres_buffer_get_resource (imported) == importer);
  g_assert_true (memres_buffer_is_host_accessible (imported));
  mt_assert_pattern (memres_buffer_get_pointer (imported), size, 21);

  /* Through a device buffer: imported -> device -> exporter's buffer. */
  dev_mr = mt_new_ok ("dmr:device=0");
  dev = mt_alloc_ok (dev_mr, size, NULL);
  mt_fill_pattern (memres_buffer_get_pointer (imported), size, 22);
  g_assert_true (memres_buffer_copy_to (imported, dev, NULL, &error));
  g_assert_no_error (error);
  /* buf and imported are the same page-locked memory and the copy from it is asynchronous:
   * wait for it before clearing the source (the fake runs copies at once, the GPU does not). */
  mt_sync_ok (NULL);
  memset (memres_buffer_get_pointer (buf), 0, size);
  g_assert_true (memres_buffer_copy_to (dev, buf, NULL, &error));
  g_assert_no_error (error);
  mt_sync_ok (NULL);
  mt_assert_pattern (memres_buffer_get_pointer (buf), size, 22);
  mt_close_ok (dev, NULL);

  /* The importer's buffer goes first (the driver's rule), then the exporter's. */
  mt_close_ok (imported, NULL);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&handle, memres_ipc_handle_free);
  g_clear_pointer (&importer, memres_resource_unref);
  g_clear_pointer (&exporter, memres_resource_unref);
  g_clear_pointer (&dev_mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_ipc_not_shareable (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) pool = NULL;
  g_autoptr (MemresResource) legacy = NULL;
  MemresBufferDescriptor desc;
  FakeCudaCounts base;
  MemresBuffer *buf;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  pool = mt_new_ok ("pinned");
  g_assert_false (memres_resource_get_flags (pool) & MEMRES_MEMORY_IPC_ENABLED);
  g_assert_null (memres_resource_export_handle (pool, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "ipc=true"));
  g_clear_error (&error);
  buf = mt_alloc_ok (pool, 4096, NULL);
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_close_ok (buf, NULL);

  legacy = mt_new_ok ("pinned:mode=legacy");
  g_assert_null (memres_resource_export_handle (legacy, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "mode=pool,ipc=true"));
  g_clear_error (&error);
  buf = mt_alloc_ok (legacy, 4096, NULL);
  g_assert_false (memres_buffer_export (buf, &desc, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  mt_close_ok (buf, NULL);

  g_clear_pointer (&pool, memres_resource_unref);
  g_clear_pointer (&legacy, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* ipc=true needs a host NUMA node and POSIX fd pool handles. */
static void
test_ipc_unsupported (void)
{
  SavedAttribute saved;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("needs the fake driver to change device attributes"))
    return;
  mt_counts_snapshot (&base);
  override_attribute (&saved, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1);
  mt_new_fails ("pinned:ipc=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "numa_id");
  mt_new_fails ("pinned:ipc=true,fallback=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "numa_id");
  g_clear_pointer (&(MemresResource *){ mt_new_ok ("pinned:ipc=true,numa_id=0") },
                   memres_resource_unref);
  restore_attribute (&saved);

  override_attribute (&saved, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0);
  mt_new_fails ("pinned:ipc=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "MEMPOOL_SUPPORTED_HANDLE_TYPES");
  restore_attribute (&saved);
  mt_assert_fake_counts_equal (&base);
}

static void
test_ipc_fault_sweep (void)
{
  MtIpcSweepData d = { 0 };
  FakeCudaCounts base;
  GError *error = NULL;
  int fds;

  if (!require_pool_mode ())
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  sweep ("pinned:ipc=true", TRUE);

  d.exporter = mt_new_ok ("pinned:ipc=true");
  d.buf = mt_alloc_ok (d.exporter, MiB, NULL);
  g_assert_true (mt_op_export_handle (&d, NULL));
  mt_undo_ipc (&d);
  fds = mt_count_open_fds ();
  /* The pool's shareable handle is exported once, at creation (swept above): exporting a
   * handle only duplicates it, with no driver call to fail. */
  g_assert_cmpint (mt_fault_sweep ("export handle", mt_op_export_handle, mt_undo_ipc, &d,
                                   CUDA_ERROR_NOT_PERMITTED, NULL),
                   ==, 0);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);
  g_assert_cmpint (mt_fault_sweep ("export buffer", mt_op_export_buffer, NULL, &d,
                                   CUDA_ERROR_NOT_PERMITTED, NULL),
                   >, 0);

  d.handle = memres_resource_export_handle (d.exporter, &error);
  g_assert_no_error (error);
  g_assert_cmpint (mt_fault_sweep ("import handle", mt_op_import_handle, mt_undo_ipc, &d,
                                   CUDA_ERROR_NOT_PERMITTED, NULL),
                   >, 0);
  g_clear_pointer (&d.handle, memres_ipc_handle_free);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);

  mt_close_ok (d.buf, NULL);
  g_clear_pointer (&d.exporter, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* Between processes: this program runs again as `--child import` with fd 3 its end of a
 * socketpair. The parent sends the pool's handle, then a descriptor and a seed; the child
 * imports both, checks the bytes through its host pointer, writes the pattern of seed + 1,
 * closes its buffer and answers with one status byte (0: all well). */
#define CHILD_FD 3

typedef struct
{
  MemresBufferDescriptor desc;
  guint32 seed;
} IpcMessage;

static gboolean
read_all (int fd, gpointer data, gsize n)
{
  guint8 *p = data;

  while (n > 0)
    {
      gssize r = read (fd, p, n);

      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return FALSE;
      p += r;
      n -= r;
    }
  return TRUE;
}

static int
child_import (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autoptr (MemresResource) importer = NULL;
  IpcMessage msg;
  MemresBuffer *buf;
  guint8 status = 1;
  gsize size;

  handle = memres_ipc_receive_handle (CHILD_FD, &error);
  if (handle != NULL)
    importer = memres_resource_import_handle (handle, &error);
  if (importer == NULL || !read_all (CHILD_FD, &msg, sizeof msg))
    {
      g_printerr ("child: %s\n", error != NULL ? error->message : "no message");
      return 1;
    }
  buf = memres_buffer_import (importer, msg.desc.bytes, sizeof msg.desc.bytes, NULL, &error);
  if (buf == NULL)
    {
      g_printerr ("child: %s\n", error->message);
      return 1;
    }
  size = memres_buffer_get_size (buf);
  {
    g_autofree guint8 *want = g_malloc (size);

    mt_fill_pattern (want, size, msg.seed);
    if (memcmp (want, memres_buffer_get_pointer (buf), size) == 0)
      status = 0;
  }
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, msg.seed + 1);
  if (!memres_buffer_close (buf, NULL, &error) || !memres_stream_synchronize (NULL, &error))
    status = 2;
  memres_buffer_unref (buf);
  if (write (CHILD_FD, &status, 1) != 1)
    return 1;
  return 0;
}

static void
test_ipc_processes (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresIpcHandle) handle = NULL;
  g_autofree char *self = g_file_read_link ("/proc/self/exe", NULL);
  const char *argv[] = { self, "--child", "import", NULL };
  const gsize size = 3 * MiB;
  int sv[2], target = CHILD_FD, status = 0;
  FakeCudaCounts base;
  IpcMessage msg;
  MemresBuffer *buf;
  guint8 reply = 0xff;
  GPid pid;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("pinned:ipc=true");
  buf = mt_alloc_ok (mr, size, NULL);
  mt_sync_ok (NULL);
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 31);
  export_buffer (buf, &msg.desc);
  msg.seed = 31;

  g_assert_nonnull (self);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_true (g_spawn_async_with_pipes_and_fds (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                                   NULL, NULL, -1, -1, -1, &sv[1], &target, 1, &pid,
                                                   NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  close (sv[1]);

  handle = export_handle (mr);
  g_assert_true (memres_ipc_send_handle (sv[0], handle, &error));
  g_assert_no_error (error);
  g_assert_cmpint (write (sv[0], &msg, sizeof msg), ==, sizeof msg);
  g_assert_true (read_all (sv[0], &reply, 1));
  close (sv[0]);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_cmpint (reply, ==, 0);

  /* The child's bytes, seen here. */
  mt_assert_pattern (memres_buffer_get_pointer (buf), size, 32);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&handle, memres_ipc_handle_free);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* memres_ipc_send_buffer() of a pinned pool buffer: one message, the pool imported on receipt;
 * a pool made without ipc=true, and mode=legacy, cannot send (nothing leaks). */
static void
test_ipc_send_buffer (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) exporter = NULL;
  const char *const refused[] = { "pinned", "pinned:mode=legacy" };
  MemresBuffer *buf, *got;
  FakeCudaCounts base;
  const gsize size = 1 * MiB;
  int sv[2], fds;

  if (!require_pool_mode ())
    return;
  mt_counts_snapshot (&base);
  exporter = mt_new_ok ("pinned:ipc=true");
  buf = mt_alloc_ok (exporter, size, NULL);
  mt_sync_ok (NULL);
  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 31);
  /* The real driver opens descriptors of its own at the first import of a process and keeps
   * them: one cycle first there, then count */
  for (guint round = mt_driver_is_fake () ? 1 : 0; round < 2; round++)
    {
      if (round == 1)
        fds = mt_count_open_fds ();
      g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
      g_assert_true (memres_ipc_send_buffer (sv[0], buf, &error));
      g_assert_no_error (error);
      got = memres_ipc_receive_buffer (sv[1], NULL, MEMRES_IPC_NONE, NULL, &error);
      close (sv[0]);
      close (sv[1]);
      if (round == 0)
        {
          g_clear_error (&error);
          if (got != NULL)
            mt_close_ok (got, NULL);
        }
    }
  if (got == NULL && !mt_driver_is_fake () && error->domain == MEMRES_CUDA_ERROR)
    {
      g_test_skip_printf ("the driver does not import a pool into its own process: %s",
                          error->message);
      mt_close_ok (buf, NULL);
      return;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_size (got), ==, size);
  g_assert_true (memres_buffer_get_flags (got) & MEMRES_MEMORY_IMPORTED);
  g_assert_cmpstr (memres_resource_get_kind_name (memres_buffer_get_resource (got)), ==, "pinned");
  g_assert_true (memres_buffer_get_resource (got) != exporter);
  mt_assert_pattern (memres_buffer_get_pointer (got), size, 31);
  mt_close_ok (got, NULL);
  mt_close_ok (buf, NULL);
  g_assert_cmpint (mt_count_open_fds (), ==, fds);

  for (guint i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (refused[i]);

      buf = mt_alloc_ok (mr, 4096, NULL);
      g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
      fds = mt_count_open_fds ();
      g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
      g_assert_cmpint (mt_count_open_fds (), ==, fds);
      close (sv[0]);
      close (sv[1]);
      mt_close_ok (buf, NULL);
    }
  g_clear_pointer (&exporter, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* Page-locked pool memory used while another device's context is current (device 1's primary
 * context: device 1 has no access to the pool of `pinned`, device 0) or none is: every entry
 * point makes current a context that reaches the memory (the resource's device) and gives the
 * caller's back. Fill, copy, write, read and close on the default stream, the bytes read back. */
static void
test_other_context (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) dmr = NULL;
  const MemresCudaDriver *drv;
  gint n_devices = 0;

  if (!require_pool_mode ())
    return;
  drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_true (memres_cuda_get_device_count (&n_devices, &error));
  mr = mt_new_ok ("pinned");
  dmr = mt_new_ok ("dmr:device=0");
  for (int mode = 0; mode < 2; mode++)
    {
      MemresBuffer *buf, *dev;
      CUcontext saved = NULL, other = NULL, now = NULL;

      if (mode == 0 && n_devices < 2)
        continue;
      if (mode == 0)
        {
          g_assert_true (memres_cuda_get_primary_context (1, &other, &error));
          g_assert_no_error (error);
        }
      buf = mt_alloc_ok (mr, 64 * 1024, NULL);
      dev = mt_alloc_ok (dmr, 64 * 1024, NULL);
      mt_sync_ok (NULL);
      g_assert_cmpint (drv->cuCtxGetCurrent (&saved), ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuCtxSetCurrent (other), ==, CUDA_SUCCESS);

      mt_fill_byte_ok (buf, 0x5a, NULL);
      mt_assert_bytes (buf, 0x5a, NULL);
      g_assert_true (memres_buffer_copy_to (buf, dev, NULL, &error));
      g_assert_no_error (error);
      mt_assert_bytes (dev, 0x5a, NULL);
      mt_write_pattern (buf, 0, 64 * 1024, 60 + mode, NULL);
      mt_check_pattern (buf, 0, 64 * 1024, 60 + mode, NULL);
      g_assert_true (memres_buffer_copy_from (buf, dev, NULL, &error));
      g_assert_no_error (error);
      mt_assert_bytes (buf, 0x5a, NULL);
      mt_close_ok (buf, NULL);
      if (mode == 0)
        {
          /* the caller's context is current again after every call */
          g_assert_cmpint (drv->cuCtxGetCurrent (&now), ==, CUDA_SUCCESS);
          g_assert_true (now == other);
        }
      g_assert_cmpint (drv->cuCtxSetCurrent (saved), ==, CUDA_SUCCESS);
      mt_close_ok (dev, NULL);
      mt_sync_ok (NULL);
    }
}

int
main (int argc, char **argv)
{
  if (argc == 3 && strcmp (argv[1], "--child") == 0 && strcmp (argv[2], "import") == 0)
    return child_import ();
  /* Against the fake, two devices for the other-context test (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);

  g_test_add_func ("/pinned/pool/roundtrip", test_pool_roundtrip);
  g_test_add_func ("/pinned/pool/flags", test_pool_flags);
  g_test_add_func ("/pinned/device-rule", test_device_rule);
  g_test_add_func ("/pinned/pool/other-context", test_other_context);
  g_test_add_func ("/pinned/pool/stats", test_pool_stats);
  g_test_add_func ("/pinned/pool/trim", test_pool_trim);
  g_test_add_func ("/pinned/pool/access", test_pool_access);
  g_test_add_func ("/pinned/pool/numa-node", test_pool_numa_node);
  g_test_add_func ("/pinned/pool/unsupported", test_pool_unsupported);
  g_test_add_func ("/pinned/pool/no-numa-pools", test_pool_no_numa_pools);
  g_test_add_func ("/pinned/pool/attribute-errors", test_pool_attribute_errors);
  g_test_add_func ("/pinned/ipc/same-process", test_ipc_same_process);
  g_test_add_func ("/pinned/ipc/not-shareable", test_ipc_not_shareable);
  g_test_add_func ("/pinned/ipc/send-buffer", test_ipc_send_buffer);
  g_test_add_func ("/pinned/ipc/unsupported", test_ipc_unsupported);
  g_test_add_func ("/pinned/ipc/processes", test_ipc_processes);
  g_test_add_func ("/pinned/ipc/fault-sweep", test_ipc_fault_sweep);
  g_test_add_func ("/pinned/legacy/roundtrip", test_legacy_roundtrip);
  g_test_add_func ("/pinned/legacy/writecombined", test_legacy_writecombined);
  g_test_add_func ("/pinned/legacy/portable-devicemap", test_legacy_portable_devicemap);
  g_test_add_func ("/pinned/legacy/stats", test_legacy_stats);
  g_test_add_func ("/pinned/options/invalid", test_options_invalid);
  g_test_add_func ("/pinned/options/numa-missing", test_options_numa_missing);
  g_test_add_func ("/pinned/allocate/max-size", test_allocate_max_size);
  g_test_add_func ("/pinned/allocate/above-host-memory", test_allocate_above_host_memory);
  g_test_add_func ("/pinned/fault/pool", test_fault_sweep_pool);
  g_test_add_func ("/pinned/fault/legacy", test_fault_sweep_legacy);

  return g_test_run ();
}

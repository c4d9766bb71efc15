/* test-pinned.c: the pinned kind (page-locked host memory), pool and legacy mode, against the
 * fake driver (suite fake) and the real one (suite gpu). Its sharing: test-pinned-ipc.c. The
 * contract it keeps with every kind is test-conformance.c's. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "testutil-pinned.h"

static void
get_stats (MemresResource *mr, MemresStats *stats)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_get_stats (mr, stats, &error));
  g_assert_no_error (error);
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
  if (mt_device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED))
    check_roundtrip ("pinned:numa_id=0", "pinned:numa_id=0", MiB + 1, 7);
  else
    mt_new_fails ("pinned:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                  "HOST_NUMA_MEMORY_POOLS_SUPPORTED");
  mt_assert_fake_counts_equal (&base);
}

/* Pool mode on a device without host memory pools: refused, naming legacy mode, unless
 * fallback=true, which gives legacy mode. */
static void
test_pool_unsupported (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MtSavedAttribute host = { 0 }, numa = { 0 };
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
      mt_override_attribute (&host, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 0);
      mt_override_attribute (&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0);
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
      mt_restore_attribute (&numa);
      mt_restore_attribute (&host);
    }
  mt_assert_fake_counts_equal (&base);
}

/* Host pools without host NUMA pools: the default pool mode uses the HOST location, a named
 * node is refused. */
static void
test_pool_no_numa_pools (void)
{
  MtSavedAttribute host, numa;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("needs the fake driver to turn host NUMA pools off"))
    return;
  mt_counts_snapshot (&base);
  mt_override_attribute (&host, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 1);
  mt_override_attribute (&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0);

  check_roundtrip ("pinned", "pinned", MiB, 9);
  mt_new_fails ("pinned:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "mode=legacy");
  mt_new_fails ("pinned:ipc=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "ipc");

  mt_restore_attribute (&numa);

  /* Host NUMA pools, but no node close to the device: the HOST location. */
  mt_override_attribute (&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1);
  check_roundtrip ("pinned", "pinned:numa_id=-1", MiB, 10);
  mt_restore_attribute (&numa);
  mt_restore_attribute (&host);
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
{ /* Against the fake, two devices for the other-context test (read at cuInit) */
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

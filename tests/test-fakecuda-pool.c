/* test-fakecuda-pool.c: the driver's memory pools called directly through the core's driver
 * table (allocate and free, threshold and trim, max size, deferred destroy, properties, access,
 * host pools), against tests/fakecuda (suite fake) and the real driver (suite gpu). */
#include <memres/memres-plugin.h>
#include "testutil.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-fakecuda.h"

static void
test_pool_alloc_free (void)
{
  FakeCudaCounts base, now;
  CUmemoryPool pool, attr_pool = NULL;
  CUstream stream;
  CUdeviceptr a = 0, b = 0, start = 0;
  unsigned type = 0;
  int ordinal = -1, mapped = 0, managed = 1;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 0);
  stream = stream_new ();
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), ==, 0);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 0);
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 1000, pool, stream));
  CU_OK (drv->cuMemAllocFromPoolAsync (&b, 3 * MiB, pool, stream));
  g_assert_cmpuint (a, !=, 0);
  g_assert_true (b >= a + 1000 || b + 3 * MiB <= a);
  if (mt_driver_is_fake ())
    {
      mt_counts_snapshot (&now);
      g_assert_cmpint (now.pools, ==, base.pools + 1);
      g_assert_cmpint (now.pool_allocations, ==, base.pool_allocations + 2);
    }
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), >=, 1000 + 3 * MiB);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), >=,
                    pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
  assert_round_trip (a, 1000, 3, stream);
  assert_round_trip (b, 3 * MiB, 4, stream);

  CU_OK (drv->cuPointerGetAttribute (&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b));
  g_assert_cmpuint (type, ==, CU_MEMORYTYPE_DEVICE);
  CU_OK (drv->cuPointerGetAttribute (&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b));
  g_assert_cmpint (ordinal, ==, 0);
  CU_OK (drv->cuPointerGetAttribute (&attr_pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b));
  g_assert_true (attr_pool == pool);
  CU_OK (drv->cuPointerGetAttribute (&mapped, CU_POINTER_ATTRIBUTE_MAPPED, b));
  g_assert_cmpint (mapped, ==, 1);
  CU_OK (drv->cuPointerGetAttribute (&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, b));
  g_assert_cmpint (managed, ==, 0);
  {
    CUpointer_attribute attrs[]
        = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            CU_POINTER_ATTRIBUTE_RANGE_START_ADDR };
    void *values[] = { &type, &ordinal, &start };
    type = 0;
    ordinal = -1;
    CU_OK (drv->cuPointerGetAttributes (3, attrs, values, b));
    g_assert_cmpuint (type, ==, CU_MEMORYTYPE_DEVICE);
    g_assert_cmpint (ordinal, ==, 0);
    g_assert_cmpuint (start, ==, b);
  }

  CU_OK (drv->cuMemFreeAsync (a, stream));
  CU_OK (drv->cuMemFreeAsync (b, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), ==, 0);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), >=, 1000 + 3 * MiB);

  /* The default pool through cuMemAllocAsync. */
  CU_OK (drv->cuDeviceGetDefaultMemPool (&attr_pool, 0));
  CU_FAILS (drv->cuMemPoolDestroy (attr_pool), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemAllocAsync (&a, 4096, stream));
  CU_OK (drv->cuPointerGetAttribute (&attr_pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
  {
    CUmemoryPool current = NULL;
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CU_OK (drv->cuDeviceGetMemPool (&current, 0));
    g_assert_true (attr_pool == current);
    CU_OK (drv->cuMemGetMemPool (&current, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
    g_assert_true (attr_pool == current);
  }
  CU_OK (drv->cuMemFreeAsync (a, stream));
  CU_OK (drv->cuStreamSynchronize (stream));

  CU_OK (drv->cuStreamDestroy (stream));
  CU_OK (drv->cuMemPoolDestroy (pool));
  mt_assert_fake_counts_equal (&base);
}

static void
test_pool_threshold_trim (void)
{
  CUmemoryPool pool;
  CUstream stream;
  CUdeviceptr a = 0;
  cuuint64_t threshold = 64 * MiB, zero = 0, one = 1;

  if (!setup (1))
    return;
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 0);
  stream = stream_new ();

  /* Threshold 0: a synchronization gives everything free back. */
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 4 * MiB, pool, stream));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), >=, 4 * MiB);
  CU_OK (drv->cuMemFreeAsync (a, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), ==, 0);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), >=, 4 * MiB);

  /* Below the threshold freed memory stays reserved, until trimmed. */
  CU_OK (drv->cuMemPoolSetAttribute (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 64 * MiB);
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 4 * MiB, pool, stream));
  CU_OK (drv->cuMemFreeAsync (a, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), >=, 4 * MiB);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), ==, 0);
  CU_OK (drv->cuMemPoolTrimTo (pool, 0));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), ==, 0);

  /* Trimming keeps what is in use. */
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 1 * MiB, pool, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuMemPoolTrimTo (pool, 0));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), >=, 1 * MiB);
  CU_OK (drv->cuMemFreeAsync (a, stream));
  CU_OK (drv->cuStreamSynchronize (stream));

  /* High watermarks reset to 0 only. */
  CU_FAILS (drv->cuMemPoolSetAttribute (pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one),
            CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemPoolSetAttribute (pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
  CU_OK (drv->cuMemPoolSetAttribute (pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
  CU_OK (drv->cuMemPoolTrimTo (pool, 0));
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), <, 1 * MiB);
  {
    int reuse = 0;
    CU_OK (drv->cuMemPoolGetAttribute (pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    g_assert_cmpint (reuse, ==, 1);
    reuse = 0;
    CU_OK (drv->cuMemPoolSetAttribute (pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    reuse = 1;
    CU_OK (drv->cuMemPoolGetAttribute (pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    g_assert_cmpint (reuse, ==, 0);
  }
  CU_OK (drv->cuStreamDestroy (stream));
  CU_OK (drv->cuMemPoolDestroy (pool));
}

static void
test_pool_max_size (void)
{
  FakeCudaCounts base;
  CUmemoryPool pool;
  CUstream stream;
  CUdeviceptr a = 0, b = 0;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  /* The real driver rounds a small maxSize up (an 8 MiB pool took 4 + 8 MiB on the H200):
   * stay well clear of the limit. */
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 64 * MiB);
  stream = stream_new ();
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 16 * MiB, pool, stream));
  CU_FAILS (drv->cuMemAllocFromPoolAsync (&b, 128 * MiB, pool, stream), CUDA_ERROR_OUT_OF_MEMORY);
  CU_FAILS_UNDOC (drv->cuMemAllocFromPoolAsync (&b, G_MAXSIZE, pool, stream),
                  CUDA_ERROR_OUT_OF_MEMORY);
  /* Freed memory makes room again. */
  CU_OK (drv->cuMemFreeAsync (a, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuMemAllocFromPoolAsync (&b, 60 * MiB, pool, stream));
  CU_OK (drv->cuMemFreeAsync (b, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuStreamDestroy (stream));
  CU_OK (drv->cuMemPoolDestroy (pool));
  mt_assert_fake_counts_equal (&base);
}

/* How far past a small maxSize the driver serves (memres enforces the size asked for itself):
 * the fake rounds maxSize up to 32 MiB; against the real driver (suite gpu) the test reports
 * what it serves, in 1 MiB steps up to 256 MiB, for a maxSize of 2 MiB. */
static void
test_pool_max_size_rounding (void)
{
  CUdeviceptr ptrs[256];
  CUmemoryPool pool;
  CUstream stream;
  guint n = 0;

  if (!setup (1))
    return;
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 2 * MiB);
  stream = stream_new ();
  while (n < G_N_ELEMENTS (ptrs)
         && drv->cuMemAllocFromPoolAsync (&ptrs[n], MiB, pool, stream) == CUDA_SUCCESS)
    n++;
  g_test_message ("a pool with maxSize 2 MiB served %u allocations of 1 MiB", n);
  g_assert_cmpuint (n, >=, 2);
  if (mt_driver_is_fake ())
    g_assert_cmpuint (n, ==, 32);
  while (n > 0)
    CU_OK (drv->cuMemFreeAsync (ptrs[--n], stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuStreamDestroy (stream));
  CU_OK (drv->cuMemPoolDestroy (pool));
}

static void
test_pool_destroy_deferred (void)
{
  FakeCudaCounts base;
  CUmemoryPool pool;
  CUstream stream;
  CUdeviceptr a = 0;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 0);
  stream = stream_new ();
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 2 * MiB, pool, stream));
  /* Destroying a pool with an outstanding allocation returns at once; the allocation stays
   * usable until it is freed. */
  CU_OK (drv->cuMemPoolDestroy (pool));
  assert_round_trip (a, 2 * MiB, 5, stream);
  CU_OK (drv->cuMemFreeAsync (a, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuStreamDestroy (stream));
  mt_assert_fake_counts_equal (&base);
}

static void
test_pool_invalid (void)
{
  FakeCudaCounts base;
  CUmemPoolProps props = { 0 };
  CUmemoryPool pool = NULL;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
  CU_FAILS (drv->cuMemPoolCreate (&pool, &props), CUDA_ERROR_INVALID_VALUE);
  props.location.type = CU_MEM_LOCATION_TYPE_HOST;
  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CU_FAILS (drv->cuMemPoolCreate (&pool, &props), CUDA_ERROR_INVALID_VALUE);
  mt_assert_fake_counts_equal (&base);
}

static void
test_pool_access (void)
{
  CUmemoryPool pool;
  CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  int count = 0, can = 0;

  if (!setup (1))
    return;
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 0);
  CU_OK (drv->cuMemPoolGetAccess (&flags, pool, &loc));
  g_assert_cmpint (flags, ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CU_OK (drv->cuDeviceGetCount (&count));
  if (count >= 2)
    {
      CUmemAccessDesc desc
          = { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
      CUstream stream = stream_new ();
      CUdeviceptr a = 0;
      CUcontext ctx1 = NULL;

      loc.id = 1;
      CU_OK (drv->cuMemPoolGetAccess (&flags, pool, &loc));
      g_assert_cmpint (flags, ==, CU_MEM_ACCESS_FLAGS_PROT_NONE);
      CU_OK (drv->cuDeviceCanAccessPeer (&can, 1, 0));
      CU_OK (drv->cuMemAllocFromPoolAsync (&a, 1 * MiB, pool, stream));
      CU_OK (drv->cuStreamSynchronize (stream));
      CU_OK (drv->cuDevicePrimaryCtxRetain (&ctx1, 1));
      if (can)
        {
          CU_OK (drv->cuMemPoolSetAccess (pool, &desc, 1));
          CU_OK (drv->cuMemPoolGetAccess (&flags, pool, &loc));
          g_assert_cmpint (flags, ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
          /* Device 1 copies from device 0's pool. */
          CU_OK (drv->cuCtxPushCurrent (ctx1));
          assert_round_trip (a, 1 * MiB, 6, NULL);
          CU_OK (drv->cuCtxPopCurrent (NULL));
        }
      if (mt_driver_is_fake ())
        {
          /* Without access, device 1's copies fail. */
          desc.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
          CU_OK (drv->cuMemPoolSetAccess (pool, &desc, 1));
          CU_OK (drv->cuCtxPushCurrent (ctx1));
          CU_FAILS (drv->cuMemsetD8Async (a, 0, 16, NULL), CUDA_ERROR_INVALID_VALUE);
          CU_OK (drv->cuCtxPopCurrent (NULL));
        }
      CU_OK (drv->cuDevicePrimaryCtxRelease (1));
      CU_OK (drv->cuMemFreeAsync (a, stream));
      CU_OK (drv->cuStreamSynchronize (stream));
      CU_OK (drv->cuStreamDestroy (stream));
    }
  CU_OK (drv->cuMemPoolDestroy (pool));
}

static void
test_pool_host (void)
{
  FakeCudaCounts base;
  CUmemPoolProps props = { 0 };
  CUmemoryPool pool = NULL, def = NULL;
  CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
  CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUmemAccessDesc desc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
  CUdeviceptr host = 0, dev = 0;
  unsigned type = 0;
  int supported = 0, numa = -1;

  if (!setup (1))
    return;
  CU_OK (
      drv->cuDeviceGetAttribute (&supported, CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED, 0));
  if (!supported)
    {
      g_test_skip ("no host memory pools");
      return;
    }
  mt_counts_snapshot (&base);
  CU_OK (drv->cuDeviceGetAttribute (&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0));
  CU_OK (drv->cuDeviceGetAttribute (&supported,
                                    CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED, 0));
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type
      = numa >= 0 && supported ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_HOST;
  props.location.id = numa >= 0 ? numa : 0;
  CU_OK (drv->cuMemPoolCreate (&pool, &props));
  CU_OK (drv->cuMemAllocFromPoolAsync (&host, 1 * MiB, pool, NULL));
  CU_OK (drv->cuStreamSynchronize (NULL));
  CU_OK (drv->cuPointerGetAttribute (&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, host));
  g_assert_cmpuint (type, ==, CU_MEMORYTYPE_HOST);
  /* Host memory: the CPU reads and writes it directly. */
  mt_fill_pattern ((guint8 *) host, 1 * MiB, 12);
  mt_assert_pattern ((const guint8 *) host, 1 * MiB, 12);
  /* Devices get access only when granted. */
  CU_OK (drv->cuMemPoolGetAccess (&flags, pool, &loc));
  g_assert_cmpint (flags, ==, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  CU_OK (drv->cuMemAlloc (&dev, 1 * MiB));
  if (mt_driver_is_fake ())
    CU_FAILS (drv->cuMemcpyAsync (dev, host, 1 * MiB, NULL), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemPoolSetAccess (pool, &desc, 1));
  CU_OK (drv->cuMemPoolGetAccess (&flags, pool, &loc));
  g_assert_cmpint (flags, ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CU_OK (drv->cuMemcpyAsync (dev, host, 1 * MiB, NULL));
  CU_OK (drv->cuMemsetD8Async (host, 0, 1 * MiB, NULL));
  CU_OK (drv->cuMemcpyAsync (host, dev, 1 * MiB, NULL));
  CU_OK (drv->cuStreamSynchronize (NULL));
  mt_assert_pattern ((const guint8 *) host, 1 * MiB, 12);
  CU_OK (drv->cuMemFree (dev));
  CU_OK (drv->cuMemFreeAsync (host, NULL));
  CU_OK (drv->cuStreamSynchronize (NULL));
  CU_OK (drv->cuMemPoolDestroy (pool));

  /* The current (by default the default) pool of the host location. */
  loc.type = CU_MEM_LOCATION_TYPE_HOST;
  CU_OK (drv->cuMemGetMemPool (&def, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  g_assert_nonnull (def);
  if (mt_driver_is_fake ())
    CU_FAILS (drv->cuMemPoolDestroy (def), CUDA_ERROR_INVALID_VALUE);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{ /* Two fake devices, for peer access; read when the driver loads. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/fakecuda/pool/alloc-free", test_pool_alloc_free);
  g_test_add_func ("/fakecuda/pool/threshold-trim", test_pool_threshold_trim);
  g_test_add_func ("/fakecuda/pool/max-size", test_pool_max_size);
  g_test_add_func ("/fakecuda/pool/max-size-rounding", test_pool_max_size_rounding);
  g_test_add_func ("/fakecuda/pool/destroy-deferred", test_pool_destroy_deferred);
  g_test_add_func ("/fakecuda/pool/invalid-props", test_pool_invalid);
  g_test_add_func ("/fakecuda/pool/access", test_pool_access);
  g_test_add_func ("/fakecuda/pool/host", test_pool_host);
  return g_test_run ();
}

/* test-fakecuda.c: the driver entry points memres uses, called directly through the core's
 * driver table. Runs against tests/fakecuda (suite fake) and the real driver (suite gpu): every
 * assertion is documented driver behaviour, except those guarded by mt_driver_is_fake(). */
#include <memres/memres-plugin.h>
#include "testutil.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB       (1024 * 1024)
#define CHILD_ARG "--fakecuda-ipc-child"

#define CU_OK(call)          g_assert_cmpint ((call), ==, CUDA_SUCCESS)
#define CU_FAILS(call, code) g_assert_cmpint ((call), ==, (code))
/* A failure whose code cuda.h does not document: exactly @code from the fake, any error from the
 * real driver. */
#define CU_FAILS_UNDOC(call, code)                                                                 \
  do                                                                                               \
    {                                                                                              \
      CUresult r_ = (call);                                                                        \
      if (mt_driver_is_fake ())                                                                    \
        g_assert_cmpint (r_, ==, (code));                                                          \
      else                                                                                         \
        g_assert_cmpint (r_, !=, CUDA_SUCCESS);                                                    \
    }                                                                                              \
  while (0)

static const MemresCudaDriver *drv;
static char *self_path; /* this program, to start it again as the IPC child */

/* The driver, with device 0's primary context current. */
static gboolean
setup (int n_devices)
{
  g_autoptr (GError) error = NULL;

  if (!mt_require_devices (n_devices))
    return FALSE;
  drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  return TRUE;
}

static CUmemoryPool
pool_new (int device, CUmemAllocationHandleType handle_types, size_t max_size)
{
  CUmemPoolProps props = { 0 };
  CUmemoryPool pool = NULL;

  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = handle_types;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  props.maxSize = max_size;
  CU_OK (drv->cuMemPoolCreate (&pool, &props));
  g_assert_nonnull (pool);
  return pool;
}

static cuuint64_t
pool_attr (CUmemoryPool pool, CUmemPool_attribute attr)
{
  cuuint64_t value = G_MAXUINT64;

  CU_OK (drv->cuMemPoolGetAttribute (pool, attr, &value));
  return value;
}

static CUstream
stream_new (void)
{
  CUstream stream = NULL;

  CU_OK (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING));
  return stream;
}

/* Writes a pattern to @dptr and reads it back. */
static void
assert_round_trip (CUdeviceptr dptr, gsize size, guint32 seed, CUstream stream)
{
  g_autofree guint8 *in = g_malloc (size);
  g_autofree guint8 *out = g_malloc0 (size);

  mt_fill_pattern (in, size, seed);
  CU_OK (drv->cuMemcpyHtoDAsync (dptr, in, size, stream));
  CU_OK (drv->cuMemcpyDtoHAsync (out, dptr, size, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  mt_assert_pattern (out, size, seed);
}

static size_t
granularity (CUmemAllocationGranularity_flags which)
{
  CUmemAllocationProp prop = { 0 };
  size_t g = 0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CU_OK (drv->cuMemGetAllocationGranularity (&g, &prop, which));
  g_assert_cmpuint (g, >, 0);
  return g;
}

static CUmemGenericAllocationHandle
physical_new (size_t size, CUmemAllocationHandleType types)
{
  CUmemAllocationProp prop = { 0 };
  CUmemGenericAllocationHandle handle = 0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = types;
  CU_OK (drv->cuMemCreate (&handle, size, &prop, 0));
  return handle;
}

static void
set_access (CUdeviceptr ptr, size_t size, int device, CUmemAccess_flags flags)
{
  CUmemAccessDesc desc = { { CU_MEM_LOCATION_TYPE_DEVICE, device }, flags };

  CU_OK (drv->cuMemSetAccess (ptr, size, &desc, 1));
}

/* Tests */

static void
test_init_proc_address (void)
{
  const char *path = g_getenv ("MEMRES_CUDA_DRIVER");
  CUresult (*get_proc) (const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  void *handle, *pfn = NULL;
  int version = 0;

  if (!setup (1))
    return;
#define CHECK_ENTRY_(name) g_assert_nonnull (drv->name);
  MEMRES_CUDA_FOREACH_ENTRY (CHECK_ENTRY_)
#undef CHECK_ENTRY_
  CU_OK (drv->cuDriverGetVersion (&version));
  g_assert_cmpint (version, >=, 12000);
  CU_OK (drv->cuInit (0));

  handle = dlopen (path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  g_assert_nonnull (handle);
  get_proc
      = (CUresult (*) (const char *, void **, int, cuuint64_t,
                       CUdriverProcAddressQueryResult *)) dlsym (handle, "cuGetProcAddress_v2");
  g_assert_nonnull (get_proc);
  /* An unknown name: CUDA_SUCCESS with a NULL pointer and the status SYMBOL_NOT_FOUND, as the
   * real driver answers (580.159, CUDA 13.0). */
  pfn = (void *) &status;
  CU_OK (get_proc ("cuNoSuchEntryPoint", &pfn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  g_assert_null (pfn);
  g_assert_cmpint (status, ==, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  /* The base name gives the entry point cuda.h maps it to. */
  CU_OK (get_proc ("cuMemAlloc", &pfn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  g_assert_cmpint (status, ==, CU_GET_PROC_ADDRESS_SUCCESS);
  g_assert_true (pfn == (void *) drv->cuMemAlloc);
  dlclose (handle);
}

static void
test_errors (void)
{
  const char *s = NULL;

  if (!setup (1))
    return;
  CU_OK (drv->cuGetErrorName (CUDA_ERROR_OUT_OF_MEMORY, &s));
  g_assert_cmpstr (s, ==, "CUDA_ERROR_OUT_OF_MEMORY");
  CU_OK (drv->cuGetErrorName (CUDA_SUCCESS, &s));
  g_assert_cmpstr (s, ==, "CUDA_SUCCESS");
  CU_OK (drv->cuGetErrorName (CUDA_ERROR_NOT_SUPPORTED, &s));
  g_assert_cmpstr (s, ==, "CUDA_ERROR_NOT_SUPPORTED");
  s = NULL;
  CU_OK (drv->cuGetErrorString (CUDA_ERROR_INVALID_VALUE, &s));
  g_assert_nonnull (s);
  g_assert_cmpuint (strlen (s), >, 0);
  CU_FAILS (drv->cuGetErrorName ((CUresult) 123456, &s), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS (drv->cuGetErrorString ((CUresult) 123456, &s), CUDA_ERROR_INVALID_VALUE);
}

static void
test_devices (void)
{
  int count = 0;

  if (!setup (1))
    return;
  CU_OK (drv->cuDeviceGetCount (&count));
  g_assert_cmpint (count, >=, 1);
  for (int i = 0; i < count; i++)
    {
      CUdevice dev = -1;
      CUuuid a, b;
      char name[256] = "";
      size_t total = 0;
      int value = -1, peer = -1;

      CU_OK (drv->cuDeviceGet (&dev, i));
      g_assert_cmpint (dev, ==, i);
      CU_OK (drv->cuDeviceGetName (name, sizeof name, dev));
      g_assert_cmpuint (strlen (name), >, 0);
      CU_OK (drv->cuDeviceTotalMem (&total, dev));
      g_assert_cmpuint (total, >, 0);
      CU_OK (drv->cuDeviceGetUuid (&a, dev));
      CU_OK (drv->cuDeviceGetUuid (&b, dev));
      g_assert_cmpmem (a.bytes, 16, b.bytes, 16);
      for (int j = 0; j < i; j++)
        {
          CUuuid other;
          CU_OK (drv->cuDeviceGetUuid (&other, j));
          g_assert_true (memcmp (other.bytes, a.bytes, 16) != 0);
        }
      CU_OK (drv->cuDeviceGetAttribute (&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
      g_assert_cmpint (value, >=, 1);
      CU_OK (drv->cuDeviceGetAttribute (&value, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev));
      g_assert_cmpint (value, ==, 1);
      if (i > 0)
        {
          CU_OK (drv->cuDeviceCanAccessPeer (&peer, dev, 0));
          g_assert_true (peer == 0 || peer == 1);
        }
    }
  CU_FAILS (drv->cuDeviceGetName ((char[8]){ 0 }, 8, count), CUDA_ERROR_INVALID_DEVICE);
  if (mt_driver_is_fake ())
    {
      int value = 0;
      CU_OK (drv->cuDeviceGetAttribute (&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
      g_assert_cmpint (value, ==, 9);
      mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
      CU_OK (drv->cuDeviceGetAttribute (&value, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
      g_assert_cmpint (value, ==, 0);
      CU_FAILS (drv->cuDeviceGetDefaultMemPool (&(CUmemoryPool){ NULL }, 0),
                CUDA_ERROR_NOT_SUPPORTED);
      mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
    }
}

static void
test_contexts (void)
{
  CUcontext primary = NULL, current = NULL, popped = NULL;
  CUdevice dev = -1;

  if (!setup (1))
    return;
  CU_OK (drv->cuDevicePrimaryCtxRetain (&primary, 0));
  g_assert_nonnull (primary);
  CU_OK (drv->cuCtxGetCurrent (&current));
  g_assert_true (current == primary); /* memres_cuda_ensure_context made it current */
  CU_OK (drv->cuCtxSetCurrent (NULL));
  CU_OK (drv->cuCtxGetCurrent (&current));
  g_assert_null (current);
  CU_FAILS (drv->cuCtxGetDevice (&dev), CUDA_ERROR_INVALID_CONTEXT);
  CU_FAILS (drv->cuMemAlloc (&(CUdeviceptr){ 0 }, 1024), CUDA_ERROR_INVALID_CONTEXT);
  CU_OK (drv->cuCtxPushCurrent (primary));
  CU_OK (drv->cuCtxGetDevice (&dev));
  g_assert_cmpint (dev, ==, 0);
  CU_OK (drv->cuCtxPopCurrent (&popped));
  g_assert_true (popped == primary);
  CU_OK (drv->cuCtxSetCurrent (primary));
  CU_OK (drv->cuCtxSynchronize ());
  CU_OK (drv->cuDevicePrimaryCtxRelease (0));
}

static void
test_streams_events (void)
{
  FakeCudaCounts base, now;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  CUstream stream;
  CUevent start, end;
  CUgraph graph = NULL;
  float ms = -1;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  stream = stream_new ();
  CU_OK (drv->cuEventCreate (&start, CU_EVENT_DEFAULT));
  CU_OK (drv->cuEventCreate (&end, CU_EVENT_DEFAULT));
  if (mt_driver_is_fake ())
    {
      mt_counts_snapshot (&now);
      g_assert_cmpint (now.streams, ==, base.streams + 1);
      g_assert_cmpint (now.events, ==, base.events + 2);
    }
  CU_OK (drv->cuEventRecord (start, stream));
  CU_OK (drv->cuEventRecord (end, stream));
  CU_OK (drv->cuEventSynchronize (end));
  CU_OK (drv->cuEventElapsedTime (&ms, start, end));
  g_assert_cmpfloat (ms, >=, 0);
  CU_OK (drv->cuStreamWaitEvent (stream, end, 0));
  CU_OK (drv->cuStreamQuery (stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuStreamIsCapturing (stream, &status));
  g_assert_cmpint (status, ==, CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK (drv->cuStreamBeginCapture (stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  CU_OK (drv->cuStreamIsCapturing (stream, &status));
  g_assert_cmpint (status, ==, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CU_OK (drv->cuStreamEndCapture (stream, &graph));
  g_assert_nonnull (graph);
  CU_OK (drv->cuStreamIsCapturing (stream, &status));
  g_assert_cmpint (status, ==, CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK (drv->cuGraphDestroy (graph));
  CU_OK (drv->cuStreamIsCapturing (NULL, &status));
  g_assert_cmpint (status, ==, CU_STREAM_CAPTURE_STATUS_NONE);
  CU_OK (drv->cuEventDestroy (start));
  CU_OK (drv->cuEventDestroy (end));
  CU_OK (drv->cuStreamDestroy (stream));
  mt_assert_fake_counts_equal (&base);
}

static void
test_memory_alloc (void)
{
  FakeCudaCounts base;
  size_t free0 = 0, free1 = 0, total = 0;
  CUdeviceptr dptr = 0, dev_alias = 0, range_base = 0;
  size_t range_size = 0;
  unsigned type = 0;
  int ordinal = -1;
  guint8 *host = NULL;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  CU_OK (drv->cuMemGetInfo (&free0, &total));
  g_assert_cmpuint (free0, <=, total);
  CU_OK (drv->cuMemAlloc (&dptr, 64 * MiB));
  CU_OK (drv->cuMemGetInfo (&free1, &total));
  g_assert_cmpuint (free1, <, free0);
  assert_round_trip (dptr, 64 * MiB, 1, NULL);
  CU_OK (drv->cuPointerGetAttribute (&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dptr + 100));
  g_assert_cmpuint (type, ==, CU_MEMORYTYPE_DEVICE);
  CU_OK (drv->cuPointerGetAttribute (&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dptr));
  g_assert_cmpint (ordinal, ==, 0);
  CU_OK (drv->cuPointerGetAttribute (&range_base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, dptr + 5));
  g_assert_cmpuint (range_base, ==, dptr);
  CU_OK (drv->cuPointerGetAttribute (&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dptr + 5));
  g_assert_cmpuint (range_size, >=, 64 * MiB);
  /* Fill and read back through a synchronous copy. */
  CU_OK (drv->cuMemsetD32Async (dptr, 0xdeadbeef, 16, NULL));
  {
    guint32 words[16];
    CU_OK (drv->cuMemcpy ((CUdeviceptr) words, dptr, sizeof words));
    for (int i = 0; i < 16; i++)
      g_assert_cmphex (words[i], ==, 0xdeadbeef);
  }
  CU_FAILS_UNDOC (drv->cuMemsetD32Async (dptr + 1, 0, 4, NULL), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemFree (dptr));
  CU_FAILS (drv->cuMemAlloc (&dptr, 0), CUDA_ERROR_INVALID_VALUE);

  CU_OK (drv->cuMemHostAlloc ((void **) &host, 1 * MiB, CU_MEMHOSTALLOC_PORTABLE));
  mt_fill_pattern (host, 1 * MiB, 2);
  CU_OK (drv->cuMemHostGetDevicePointer (&dev_alias, host, 0));
  CU_OK (drv->cuPointerGetAttribute (&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr) host));
  g_assert_cmpuint (type, ==, CU_MEMORYTYPE_HOST);
  CU_OK (drv->cuMemAlloc (&dptr, 1 * MiB));
  CU_OK (drv->cuMemcpyAsync (dptr, dev_alias, 1 * MiB, NULL));
  /* From page-locked memory the copy is truly asynchronous (the fake runs it at once): the
   * host must wait for it before reusing the source. */
  CU_OK (drv->cuStreamSynchronize (NULL));
  memset (host, 0, 1 * MiB);
  CU_OK (drv->cuMemcpyDtoHAsync (host, dptr, 1 * MiB, NULL));
  CU_OK (drv->cuStreamSynchronize (NULL));
  mt_assert_pattern (host, 1 * MiB, 2);
  CU_OK (drv->cuMemFree (dptr));
  CU_OK (drv->cuMemFreeHost (host));
  mt_assert_fake_counts_equal (&base);
}

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
test_vmm_granularity (void)
{
  FakeCudaCounts base;
  size_t min = 0, rec = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop = { 0 }, got;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  min = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  rec = granularity (CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  g_assert_cmpuint (rec % min, ==, 0);
  if (mt_driver_is_fake ())
    g_assert_cmpuint (min, ==, 2 * MiB);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CU_FAILS (drv->cuMemCreate (&handle, min / 2, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS (drv->cuMemCreate (&handle, min + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CU_FAILS (drv->cuMemCreate (&handle, min, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  mt_assert_fake_counts_equal (&base);
  handle = physical_new (2 * min, CU_MEM_HANDLE_TYPE_NONE);
  CU_OK (drv->cuMemGetAllocationPropertiesFromHandle (&got, handle));
  g_assert_cmpint (got.location.type, ==, CU_MEM_LOCATION_TYPE_DEVICE);
  g_assert_cmpint (got.location.id, ==, 0);
  g_assert_cmpint (got.type, ==, CU_MEM_ALLOCATION_TYPE_PINNED);
  CU_OK (drv->cuMemRelease (handle));
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_map (void)
{
  FakeCudaCounts base, now;
  size_t g;
  CUdeviceptr va = 0, range_start = 0;
  size_t range_size = 0;
  CUmemGenericAllocationHandle h1, h2, retained = 0;
  CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
  unsigned long long flags = 0;
  int mapped = -1;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&va, 4 * g, 0, 0, 0));
  g_assert_cmpuint (va % g, ==, 0);
  h1 = physical_new (2 * g, CU_MEM_HANDLE_TYPE_NONE);
  h2 = physical_new (g, CU_MEM_HANDLE_TYPE_NONE);

  /* Misaligned, outside or overlapping mappings are refused. */
  CU_FAILS (drv->cuMemMap (va + 4096, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS (drv->cuMemMap (va, g + 4096, 0, h2, 0), CUDA_ERROR_NOT_SUPPORTED);
  CU_OK (drv->cuMemMap (va, 2 * g, 0, h1, 0));
  CU_FAILS_UNDOC (drv->cuMemMap (va + g, g, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemMap (va + 2 * g, g, 0, h2, 0));
  if (mt_driver_is_fake ())
    {
      mt_counts_snapshot (&now);
      g_assert_cmpint (now.reservations, ==, base.reservations + 1);
      g_assert_cmpint (now.mappings, ==, base.mappings + 2);
      g_assert_cmpint (now.physical_handles, ==, base.physical_handles + 2);
    }
  /* Released handles stay alive while mapped. */
  CU_OK (drv->cuMemRelease (h1));
  CU_OK (drv->cuMemRelease (h2));

  /* Access over both mappings at once; then the bytes go through. */
  set_access (va, 3 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CU_OK (drv->cuMemGetAccess (&flags, &loc, va + g));
  g_assert_cmpuint (flags, ==, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  assert_round_trip (va, 3 * g, 7, NULL);
  CU_OK (drv->cuPointerGetAttribute (&range_start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + g));
  g_assert_cmpuint (range_start, ==, va);
  CU_OK (drv->cuPointerGetAttribute (&range_size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + g));
  g_assert_cmpuint (range_size, ==, 4 * g);
  CU_OK (drv->cuPointerGetAttribute (&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va));
  g_assert_cmpint (mapped, ==, 1);

  /* The last granule is reserved but not mapped: copies there fail. (Fake only: on a device
   * such a copy may fault the context instead of failing.) */
  if (mt_driver_is_fake ())
    {
      guint8 bytes[64] = { 0 };
      int zero = -1;
      CU_FAILS (drv->cuMemcpyHtoDAsync (va + 3 * g, bytes, sizeof bytes, NULL),
                CUDA_ERROR_INVALID_VALUE);
      CU_FAILS (drv->cuMemcpyHtoDAsync (va + 3 * g - 32, bytes, sizeof bytes, NULL),
                CUDA_ERROR_INVALID_VALUE);
      CU_FAILS (drv->cuMemcpyDtoHAsync (bytes, va + 3 * g, sizeof bytes, NULL),
                CUDA_ERROR_INVALID_VALUE);
      CU_OK (drv->cuPointerGetAttribute (&zero, CU_POINTER_ATTRIBUTE_MAPPED, va + 3 * g));
      g_assert_cmpint (zero, ==, 0);
    }

  CU_OK (drv->cuMemRetainAllocationHandle (&retained, (void *) (va + 100)));
  g_assert_cmpuint (retained, ==, h1);
  CU_OK (drv->cuMemRelease (retained));

  /* A sub-range of a mapping cannot be unmapped; the range of two whole mappings can. */
  CU_FAILS_UNDOC (drv->cuMemUnmap (va, g), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemUnmap (va, 3 * g));
  /* Only the exact reservation can be freed. */
  CU_FAILS_UNDOC (drv->cuMemAddressFree (va, 2 * g), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS_UNDOC (drv->cuMemAddressFree (va + g, 3 * g), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemAddressFree (va, 4 * g));
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_no_access (void)
{
  FakeCudaCounts base;
  size_t g;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h;
  guint8 bytes[64] = { 0 };

  if (!setup (1))
    return;
  /* On a GPU, touching mapped memory without access faults the context: fake only. */
  if (!mt_require_fake ("an inaccessible mapping would fault the real device"))
    return;
  mt_counts_snapshot (&base);
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&va, g, 0, 0, 0));
  h = physical_new (g, CU_MEM_HANDLE_TYPE_NONE);
  CU_OK (drv->cuMemMap (va, g, 0, h, 0));
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  set_access (va, g, 0, CU_MEM_ACCESS_FLAGS_PROT_READ);
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemcpy ((CUdeviceptr) bytes, va, sizeof bytes));
  set_access (va, g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CU_OK (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes));
  CU_FAILS (drv->cuMemSetAccess (va, g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemUnmap (va, g));
  /* Unmapped again: no access any more. */
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemRelease (h));
  CU_OK (drv->cuMemAddressFree (va, g));
  /* A freed reservation is no memory at all. */
  CU_FAILS (drv->cuMemcpy (va, (CUdeviceptr) bytes, sizeof bytes), CUDA_ERROR_INVALID_VALUE);
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_grow_in_place (void)
{
  size_t g;
  CUdeviceptr a = 0, b = 0;

  if (!setup (1))
    return;
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&a, 2 * g, 0, 0, 0));
  CU_OK (drv->cuMemAddressReserve (&b, 2 * g, 0, a + 2 * g, 0));
  /* The hint is only a hint for the real driver; the fake honours a free one. */
  if (mt_driver_is_fake ())
    g_assert_cmpuint (b, ==, a + 2 * g);
  g_assert_true (b >= a + 2 * g || b + 2 * g <= a);
  CU_OK (drv->cuMemAddressFree (b, 2 * g));
  CU_OK (drv->cuMemAddressFree (a, 2 * g));
}

static void
test_vmm_export_import (void)
{
  FakeCudaCounts base;
  size_t g;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h, imported = 0;
  int fd = -1, supported = 0, fds;
  g_autofree guint8 *bytes = NULL;

  if (!setup (1))
    return;
  CU_OK (drv->cuDeviceGetAttribute (
      &supported, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
  if (!supported)
    {
      g_test_skip ("no POSIX file descriptor handles");
      return;
    }
  mt_counts_snapshot (&base);
  fds = mt_count_open_fds ();
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  bytes = g_malloc (g);
  CU_OK (drv->cuMemAddressReserve (&va, 2 * g, 0, 0, 0));

  /* Not requested at creation: no export. */
  h = physical_new (g, CU_MEM_HANDLE_TYPE_NONE);
  g_assert_cmpint (
      drv->cuMemExportToShareableHandle (&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), !=,
      CUDA_SUCCESS);
  CU_OK (drv->cuMemRelease (h));

  h = physical_new (g, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CU_OK (drv->cuMemExportToShareableHandle (&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  g_assert_cmpint (fd, >=, 0);
  if (mt_driver_is_fake ())
    {
      FakeCudaCounts now;
      mt_counts_snapshot (&now);
      g_assert_cmpint (now.exported_fds, ==, base.exported_fds + 1);
    }
  CU_OK (drv->cuMemImportFromShareableHandle (&imported, (void *) (intptr_t) fd,
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close (fd);
  /* The same memory mapped twice: bytes written through one mapping show in the other. */
  CU_OK (drv->cuMemMap (va, g, 0, h, 0));
  CU_OK (drv->cuMemMap (va + g, g, 0, imported, 0));
  set_access (va, 2 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  mt_fill_pattern (bytes, g, 8);
  CU_OK (drv->cuMemcpy (va, (CUdeviceptr) bytes, g));
  memset (bytes, 0, g);
  CU_OK (drv->cuMemcpy ((CUdeviceptr) bytes, va + g, g));
  mt_assert_pattern (bytes, g, 8);
  CU_OK (drv->cuMemUnmap (va, 2 * g));
  CU_OK (drv->cuMemRelease (imported));
  CU_OK (drv->cuMemRelease (h));
  CU_OK (drv->cuMemAddressFree (va, 2 * g));
  /* (The real driver may open descriptors of its own on first use.) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_assert_fake_counts_equal (&base);
}

static void
test_vmm_adjacent (void)
{
  FakeCudaCounts base;
  size_t g;
  CUdeviceptr a = 0, b = 0;
  CUmemGenericAllocationHandle h1, h2;
  g_autofree guint8 *in = NULL, *out = NULL;

  if (!setup (1))
    return;
  mt_counts_snapshot (&base);
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CU_OK (drv->cuMemAddressReserve (&a, 2 * g, 0, 0, 0));
  CU_OK (drv->cuMemAddressReserve (&b, 2 * g, 0, a + 2 * g, 0));
  if (b != a + 2 * g)
    {
      CU_OK (drv->cuMemAddressFree (b, 2 * g));
      CU_OK (drv->cuMemAddressFree (a, 2 * g));
      g_assert_false (mt_driver_is_fake ());
      g_test_skip ("the driver placed the second reservation elsewhere");
      return;
    }
  h1 = physical_new (2 * g, CU_MEM_HANDLE_TYPE_NONE);
  h2 = physical_new (2 * g, CU_MEM_HANDLE_TYPE_NONE);
  CU_OK (drv->cuMemMap (a, 2 * g, 0, h1, 0));
  CU_OK (drv->cuMemMap (b, 2 * g, 0, h2, 0));
  CU_OK (drv->cuMemRelease (h1));
  CU_OK (drv->cuMemRelease (h2));
  set_access (a, 2 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  set_access (b, 2 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  if (mt_driver_is_fake ())
    set_access (a, 4 * g, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  /* One contiguous range over both reservations. */
  in = g_malloc (2 * g);
  out = g_malloc0 (2 * g);
  mt_fill_pattern (in, 2 * g, 11);
  CU_OK (drv->cuMemcpy (a + g, (CUdeviceptr) in, 2 * g));
  CU_OK (drv->cuMemcpy ((CUdeviceptr) out, a + g, 2 * g));
  mt_assert_pattern (out, 2 * g, 11);
  /* Both mappings go in one unmap; each reservation is freed on its own. */
  CU_OK (drv->cuMemUnmap (a, 4 * g));
  CU_FAILS_UNDOC (drv->cuMemAddressFree (a, 4 * g), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemAddressFree (a, 2 * g));
  CU_OK (drv->cuMemAddressFree (b, 2 * g));
  mt_assert_fake_counts_equal (&base);
}

static void
test_memory_info (void)
{
  size_t free0 = 0, free1 = 0, free2 = 0, total = 0, g;
  CUmemoryPool pool;
  CUdeviceptr a = 0;
  CUmemGenericAllocationHandle h;

  if (!setup (1))
    return;
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 0);
  CU_OK (drv->cuMemGetInfo (&free0, &total));
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 64 * MiB, pool, NULL));
  CU_OK (drv->cuStreamSynchronize (NULL));
  CU_OK (drv->cuMemGetInfo (&free1, &total));
  /* On a real GPU other processes (the tests run in parallel) move free memory too. */
  if (mt_driver_is_fake ())
    g_assert_cmpuint (free1, <, free0);
  CU_OK (drv->cuMemFreeAsync (a, NULL));
  CU_OK (drv->cuStreamSynchronize (NULL)); /* threshold 0: released */
  g = granularity (CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  h = physical_new (32 * g, CU_MEM_HANDLE_TYPE_NONE);
  CU_OK (drv->cuMemGetInfo (&free2, &total));
  if (mt_driver_is_fake ())
    {
      g_assert_cmpuint (free1, ==, free0 - 64 * MiB);
      g_assert_cmpuint (free2, ==, free0 - 32 * g);
    }
  CU_OK (drv->cuMemRelease (h));
  CU_OK (drv->cuMemGetInfo (&free1, &total));
  if (mt_driver_is_fake ())
    g_assert_cmpuint (free1, ==, free0);
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

/* In one process (fake only: the real driver's behaviour is not documented for a process that
 * imports its own pool): fd accounting and importing the same pointer twice. */
static void
test_ipc_in_process (void)
{
  FakeCudaCounts base, now;
  CUmemoryPool pool, imported = NULL;
  CUmemPoolPtrExportData data, bad;
  CUdeviceptr ptr = 0, p1 = 0, p2 = 0;
  guint8 byte = 0;
  int fd = -1, fds;

  if (!setup (1))
    return;
  if (!mt_require_fake ("importing a pool into its own process is not documented"))
    return;
  mt_counts_snapshot (&base);
  fds = mt_count_open_fds ();
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 64 * MiB);
  CU_OK (drv->cuMemAllocFromPoolAsync (&ptr, 1000, pool, NULL));
  CU_OK (drv->cuMemsetD8Async (ptr, 0x7e, 1000, NULL));
  CU_OK (drv->cuMemPoolExportPointer (&data, ptr));
  CU_FAILS (drv->cuMemPoolExportPointer (&bad, ptr + 512), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemPoolExportToShareableHandle (&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                0));
  mt_counts_snapshot (&now);
  g_assert_cmpint (now.exported_fds, ==, base.exported_fds + 1);
  /* Anything that is not a pool handle is refused (the real driver: CUDA_ERROR_UNKNOWN). */
  CU_FAILS_UNDOC (drv->cuMemPoolImportFromShareableHandle (&imported, (void *) (intptr_t) 0,
                                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                           0),
                  CUDA_ERROR_UNKNOWN);
  CU_OK (drv->cuMemPoolImportFromShareableHandle (&imported, (void *) (intptr_t) fd,
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  close (fd);
  mt_counts_snapshot (&now);
  g_assert_cmpint (now.exported_fds, ==, base.exported_fds);
  g_assert_cmpint (now.pools, ==, base.pools + 2);
  /* An imported pool cannot allocate; the owner's pool cannot import. */
  CU_FAILS (drv->cuMemAllocFromPoolAsync (&p1, 1000, imported, NULL), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS (drv->cuMemPoolImportPointer (&p1, pool, &data), CUDA_ERROR_INVALID_VALUE);
  bad = data;
  bad.reserved[30] ^= 1;
  CU_FAILS (drv->cuMemPoolImportPointer (&p1, imported, &bad), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemPoolImportPointer (&p1, imported, &data));
  CU_OK (drv->cuMemPoolImportPointer (&p2, imported, &data));
  g_assert_cmpuint (p1, ==, p2);
  g_assert_cmpuint (p1, !=, ptr);
  CU_OK (drv->cuMemcpy ((CUdeviceptr) &byte, p1 + 999, 1));
  g_assert_cmpuint (byte, ==, 0x7e);
  /* Imports are not counted (as on the H200's driver 580.159.04): one mapping, which the first
   * free unmaps for both; memres maps each exported allocation once per process for this. */
  mt_counts_snapshot (&now);
  g_assert_cmpint (now.pool_allocations, ==, base.pool_allocations + 2);
  CU_OK (drv->cuMemFreeAsync (p1, NULL));
  CU_FAILS (drv->cuMemcpy ((CUdeviceptr) &byte, p2, 1), CUDA_ERROR_INVALID_VALUE);
  CU_FAILS (drv->cuMemFreeAsync (p2, NULL), CUDA_ERROR_INVALID_VALUE);
  CU_OK (drv->cuMemPoolDestroy (imported));
  CU_OK (drv->cuMemFreeAsync (ptr, NULL));
  CU_OK (drv->cuMemPoolDestroy (pool));
  /* (The real driver may open descriptors of its own on first use.) */
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_assert_fake_counts_equal (&base);
}

/* Pool IPC across processes: the child is this program started again (fork + exec, because a
 * CUDA process cannot use the driver in a plain fork() child). fd 3 is a socket to the parent,
 * fd 4 the pool's shareable handle. */
typedef struct
{
  CUmemPoolPtrExportData data;
  guint64 size;
} IpcMessage;

static int
child_main (void)
{
  const MemresCudaDriver *d;
  g_autoptr (GError) error = NULL;
  IpcMessage msg;
  CUmemoryPool pool = NULL;
  CUdeviceptr ptr = 0;
  g_autofree guint8 *bytes = NULL;
  char ack = 'k';

  d = memres_cuda_get_driver (&error);
  if (d == NULL || !memres_cuda_ensure_context (0, &error))
    g_error ("child: %s", error->message);
  if (read (3, &msg, sizeof msg) != sizeof msg)
    g_error ("child: no message");
  if (d->cuMemPoolImportFromShareableHandle (&pool, (void *) (intptr_t) 4,
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)
          != CUDA_SUCCESS
      || d->cuMemPoolImportPointer (&ptr, pool, &msg.data) != CUDA_SUCCESS)
    g_error ("child: import failed");
  close (4);
  bytes = g_malloc (msg.size);
  if (d->cuMemcpy ((CUdeviceptr) bytes, ptr, msg.size) != CUDA_SUCCESS)
    g_error ("child: copy failed");
  mt_assert_pattern (bytes, msg.size, 9);
  mt_fill_pattern (bytes, msg.size, 10);
  if (d->cuMemcpy (ptr, (CUdeviceptr) bytes, msg.size) != CUDA_SUCCESS
      || d->cuCtxSynchronize () != 0)
    g_error ("child: write failed");
  /* The parent frees its allocation only after the child freed its import. */
  if (d->cuMemFree (ptr) != CUDA_SUCCESS || d->cuMemPoolDestroy (pool) != CUDA_SUCCESS)
    g_error ("child: free failed");
  if (mt_driver_is_fake ())
    {
      FakeCudaCounts c;
      mt_fake_get_counts (&c);
      if (c.pools != 0 || c.pool_allocations != 0)
        g_error ("child: leaked %d pools, %d pool allocations", c.pools, c.pool_allocations);
    }
  if (write (3, &ack, 1) != 1)
    g_error ("child: no ack");
  return 0;
}

static void
test_ipc_pool_processes (void)
{
  FakeCudaCounts base;
  CUmemoryPool pool;
  CUstream stream;
  CUdeviceptr ptr = 0;
  IpcMessage msg = { .size = 3 * MiB + 100 };
  g_autofree guint8 *bytes = g_malloc (msg.size);
  g_autoptr (GError) error = NULL;
  int sv[2], pool_fd = -1, types = 0, status = -1, fds;
  GPid pid;
  char ack = 0;
  const char *argv[] = { self_path, CHILD_ARG, NULL };
  int source_fds[2], target_fds[2] = { 3, 4 };

  if (!setup (1))
    return;
  CU_OK (drv->cuDeviceGetAttribute (&types, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0));
  if (!(types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    {
      g_test_skip ("no pool IPC with POSIX file descriptors");
      return;
    }
  mt_counts_snapshot (&base);
  fds = mt_count_open_fds ();
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 0);
  g_assert_cmpint (drv->cuMemPoolExportToShareableHandle (
                       &pool_fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                   !=, CUDA_SUCCESS);
  CU_OK (drv->cuMemPoolDestroy (pool));

  pool = pool_new (0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  stream = stream_new ();
  CU_OK (drv->cuMemAllocFromPoolAsync (&ptr, msg.size, pool, stream));
  mt_fill_pattern (bytes, msg.size, 9);
  CU_OK (drv->cuMemcpyHtoDAsync (ptr, bytes, msg.size, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuMemPoolExportToShareableHandle (&pool_fd, pool,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CU_OK (drv->cuMemPoolExportPointer (&msg.data, ptr));
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);

  source_fds[0] = sv[1];
  source_fds[1] = pool_fd;
  g_assert_true (g_spawn_async_with_pipes_and_fds (NULL, argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD,
                                                   NULL, NULL, -1, -1, -1, source_fds, target_fds,
                                                   2, &pid, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  close (sv[1]);
  close (pool_fd);
  g_assert_cmpint (send (sv[0], &msg, sizeof msg, MSG_NOSIGNAL), ==, sizeof msg);
  g_assert_cmpint (read (sv[0], &ack, 1), ==, 1);
  g_assert_cmpint (ack, ==, 'k');
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_spawn_close_pid (pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  close (sv[0]);

  /* What the child wrote is here. */
  memset (bytes, 0, msg.size);
  CU_OK (drv->cuMemcpyDtoHAsync (bytes, ptr, msg.size, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  mt_assert_pattern (bytes, msg.size, 10);
  CU_OK (drv->cuMemFreeAsync (ptr, stream));
  CU_OK (drv->cuStreamSynchronize (stream));
  CU_OK (drv->cuStreamDestroy (stream));
  CU_OK (drv->cuMemPoolDestroy (pool));
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_count_open_fds (), ==, fds);
  mt_assert_fake_counts_equal (&base);
}

static void
test_faults_once (void)
{
  FakeCudaCounts base;
  CUmemoryPool pool;
  CUdeviceptr a = 0;
  long calls;

  if (!setup (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  pool = pool_new (0, CU_MEM_HANDLE_TYPE_NONE, 0);
  mt_counts_snapshot (&base);
  calls = mt_fake_call_count ("cuMemAllocFromPoolAsync");
  mt_fake_fail_call ("cuMemAllocFromPoolAsync", 2, CUDA_ERROR_ILLEGAL_STATE);
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 1024, pool, NULL));
  CU_OK (drv->cuMemFreeAsync (a, NULL));
  a = 0;
  /* The second call fails with the injected code and leaves nothing behind. */
  CU_FAILS (drv->cuMemAllocFromPoolAsync (&a, 1024, pool, NULL), CUDA_ERROR_ILLEGAL_STATE);
  g_assert_cmpuint (a, ==, 0);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), ==, 0);
  mt_assert_fake_counts_equal (&base);
  /* Once only. */
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 1024, pool, NULL));
  CU_OK (drv->cuMemFreeAsync (a, NULL));
  g_assert_cmpint (mt_fake_call_count ("cuMemAllocFromPoolAsync"), ==, calls + 3);

  /* A fault on a creating call: no pool appears. */
  mt_fake_fail_call ("cuMemPoolCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
  {
    CUmemPoolProps props = { 0 };
    CUmemoryPool p = NULL;
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CU_FAILS (drv->cuMemPoolCreate (&p, &props), CUDA_ERROR_OUT_OF_MEMORY);
    g_assert_null (p);
  }
  mt_assert_fake_counts_equal (&base);
  /* Disarming. */
  mt_fake_fail_call ("cuMemFreeAsync", 1, CUDA_ERROR_UNKNOWN);
  mt_fake_fail_call ("cuMemFreeAsync", 0, CUDA_SUCCESS);
  mt_fake_fail_call ("cuStreamQuery", 1, CUDA_ERROR_UNKNOWN);
  mt_fake_reset_faults ();
  CU_OK (drv->cuMemAllocFromPoolAsync (&a, 1024, pool, NULL));
  CU_OK (drv->cuMemFreeAsync (a, NULL));
  CU_OK (drv->cuStreamQuery (NULL));
  CU_OK (drv->cuMemPoolDestroy (pool));
}

static void
test_faults_env (void)
{
  if (!setup (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  if (g_test_subprocess ())
    {
      /* FAKECUDA_FAIL=cuMemAlloc:2:CUDA_ERROR_ILLEGAL_STATE */
      CUdeviceptr a = 0, b = 0;
      CU_OK (drv->cuMemAlloc (&a, 4096));
      CU_FAILS (drv->cuMemAlloc (&b, 4096), CUDA_ERROR_ILLEGAL_STATE);
      CU_OK (drv->cuMemAlloc (&b, 4096));
      CU_OK (drv->cuMemFree (a));
      CU_OK (drv->cuMemFree (b));
      return;
    }
  g_setenv ("FAKECUDA_FAIL", "cuMemAlloc:2:CUDA_ERROR_ILLEGAL_STATE", TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_unsetenv ("FAKECUDA_FAIL");
  g_test_trap_assert_passed ();
}

static void
test_trace (void)
{
  void *handle;
  void (*begin) (void);
  int (*end) (const char ***);
  const char **names = NULL;
  CUdeviceptr a = 0;
  int n;

  if (!setup (1))
    return;
  if (!mt_require_fake ("tracing needs the fake driver"))
    return;
  handle = dlopen (g_getenv ("MEMRES_CUDA_DRIVER"), RTLD_NOW | RTLD_NOLOAD);
  g_assert_nonnull (handle);
  begin = (void (*) (void)) dlsym (handle, "fakecuda_trace_begin");
  end = (int (*) (const char ***)) dlsym (handle, "fakecuda_trace_end");
  begin ();
  CU_OK (drv->cuMemAlloc (&a, 100));
  CU_OK (drv->cuMemFree (a));
  CU_FAILS (drv->cuMemFree (a), CUDA_ERROR_INVALID_VALUE);
  n = end (&names);
  g_assert_cmpint (n, ==, 3);
  g_assert_cmpstr (names[0], ==, "cuMemAlloc");
  g_assert_cmpstr (names[1], ==, "cuMemFree");
  g_assert_cmpstr (names[2], ==, "cuMemFree");
  dlclose (handle);
}

/* An operation made of driver calls, for mt_fault_sweep(): every failure cleans up. */
static gboolean
op_stream_alloc (gpointer data, GError **error)
{
  CUstream stream = NULL;
  CUdeviceptr ptr = 0;
  CUresult r;
  const char *call;

  if ((r = drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamCreate");
  if ((r = drv->cuMemAllocAsync (&ptr, 1 * MiB, stream)) != CUDA_SUCCESS)
    {
      call = "cuMemAllocAsync";
      goto fail_stream;
    }
  if ((r = drv->cuMemsetD8Async (ptr, 1, 1 * MiB, stream)) != CUDA_SUCCESS)
    {
      call = "cuMemsetD8Async";
      goto fail_alloc;
    }
  if ((r = drv->cuMemFreeAsync (ptr, stream)) != CUDA_SUCCESS)
    {
      call = "cuMemFreeAsync";
      goto fail_alloc;
    }
  if ((r = drv->cuStreamSynchronize (stream)) != CUDA_SUCCESS)
    {
      call = "cuStreamSynchronize";
      goto fail_stream;
    }
  if ((r = drv->cuStreamDestroy (stream)) != CUDA_SUCCESS)
    {
      call = "cuStreamDestroy";
      goto fail_stream;
    }
  return TRUE;

fail_alloc:
  drv->cuMemFreeAsync (ptr, stream);
fail_stream:
  drv->cuStreamSynchronize (stream);
  drv->cuStreamDestroy (stream);
  return memres_cuda_set_error (error, r, call);
}

static void
test_fault_sweep (void)
{
  FakeCudaCounts base;

  if (!setup (1))
    return;
  if (!mt_require_fake ("fault sweeps need the fake driver"))
    return;
  mt_counts_snapshot (&base);
  g_assert_cmpint (
      mt_fault_sweep ("stream alloc", op_stream_alloc, NULL, NULL, CUDA_ERROR_NOT_PERMITTED, NULL),
      ==, 6);
  {
    const char *const ignore[] = { "cuStreamSynchronize", "cuStreamDestroy", NULL };
    g_assert_cmpint (mt_fault_sweep ("stream alloc", op_stream_alloc, NULL, NULL, 0, ignore), ==,
                     4);
  }
  mt_assert_fake_counts_equal (&base);
}

/* Last: everything every test created is gone. */
static void
test_counts_zero (void)
{
  FakeCudaCounts zero = { 0 };

  if (!setup (1))
    return;
  mt_assert_fake_counts_equal (&zero);
}

int
main (int argc, char **argv)
{
  if (argc > 1 && g_str_equal (argv[1], CHILD_ARG))
    return child_main ();
  /* (Not /proc/self/exe: under valgrind that is valgrind.) */
  self_path = g_canonicalize_filename (argv[0], NULL);
  /* Two fake devices, for peer access; read when the driver loads. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);

  g_test_add_func ("/fakecuda/init/proc-address", test_init_proc_address);
  g_test_add_func ("/fakecuda/errors/names", test_errors);
  g_test_add_func ("/fakecuda/devices/attributes", test_devices);
  g_test_add_func ("/fakecuda/contexts/current", test_contexts);
  g_test_add_func ("/fakecuda/streams-events/basics", test_streams_events);
  g_test_add_func ("/fakecuda/memory/alloc-copy-fill", test_memory_alloc);
  g_test_add_func ("/fakecuda/pool/alloc-free", test_pool_alloc_free);
  g_test_add_func ("/fakecuda/pool/threshold-trim", test_pool_threshold_trim);
  g_test_add_func ("/fakecuda/pool/max-size", test_pool_max_size);
  g_test_add_func ("/fakecuda/pool/max-size-rounding", test_pool_max_size_rounding);
  g_test_add_func ("/fakecuda/pool/destroy-deferred", test_pool_destroy_deferred);
  g_test_add_func ("/fakecuda/pool/invalid-props", test_pool_invalid);
  g_test_add_func ("/fakecuda/pool/access", test_pool_access);
  g_test_add_func ("/fakecuda/vmm/granularity", test_vmm_granularity);
  g_test_add_func ("/fakecuda/vmm/map-access-unmap-free", test_vmm_map);
  g_test_add_func ("/fakecuda/vmm/no-access", test_vmm_no_access);
  g_test_add_func ("/fakecuda/vmm/grow-in-place", test_vmm_grow_in_place);
  g_test_add_func ("/fakecuda/vmm/export-import", test_vmm_export_import);
  g_test_add_func ("/fakecuda/vmm/adjacent-reservations", test_vmm_adjacent);
  g_test_add_func ("/fakecuda/memory/info", test_memory_info);
  g_test_add_func ("/fakecuda/pool/host", test_pool_host);
  g_test_add_func ("/fakecuda/ipc/in-process", test_ipc_in_process);
  g_test_add_func ("/fakecuda/ipc/pool-processes", test_ipc_pool_processes);
  g_test_add_func ("/fakecuda/faults/once", test_faults_once);
  g_test_add_func ("/fakecuda/faults/env", test_faults_env);
  g_test_add_func ("/fakecuda/faults/trace", test_trace);
  g_test_add_func ("/fakecuda/faults/sweep", test_fault_sweep);
  g_test_add_func ("/fakecuda/counts/zero", test_counts_zero);
  return g_test_run ();
}

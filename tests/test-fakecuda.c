/* test-fakecuda.c: the driver entry points memres uses, called directly through the core's
 * driver table: init, errors, devices, contexts, streams and events, memory, IPC. The pools':
 * test-fakecuda-pool.c; the VMM calls': test-fakecuda-vmm.c; fault injection:
 * test-fakecuda-faults.c. Runs against tests/fakecuda (suite fake) and the real driver (suite
 * gpu): every assertion is documented driver behaviour, except those guarded by
 * mt_driver_is_fake(). */
#include <memres/memres-plugin.h>
#include "testutil.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-fakecuda.h"

#define CHILD_ARG "--fakecuda-ipc-child"
static char *self_path; /* this program, to start it again as the IPC child */

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
  g_test_add_func ("/fakecuda/memory/info", test_memory_info);
  g_test_add_func ("/fakecuda/ipc/in-process", test_ipc_in_process);
  g_test_add_func ("/fakecuda/ipc/pool-processes", test_ipc_pool_processes);
  return g_test_run ();
}

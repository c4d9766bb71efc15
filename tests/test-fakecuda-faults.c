/* test-fakecuda-faults.c: tests/fakecuda's fault injection (once, from the environment, the
 * trace, a sweep) and its leak counts (suite fake; they skip on the real driver, suite gpu). */
#include <memres/memres-plugin.h>
#include "testutil.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-fakecuda.h"

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
{ /* Two fake devices, for peer access; read when the driver loads. */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/fakecuda/faults/once", test_faults_once);
  g_test_add_func ("/fakecuda/faults/env", test_faults_env);
  g_test_add_func ("/fakecuda/faults/trace", test_trace);
  g_test_add_func ("/fakecuda/faults/sweep", test_fault_sweep);
  g_test_add_func ("/fakecuda/counts/zero", test_counts_zero);
  return g_test_run ();
}

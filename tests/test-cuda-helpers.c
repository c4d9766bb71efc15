/* memres - CUDA memory resources
 * test-cuda-helpers.c: the SDK helpers of core/cuda-helpers.c, against the fake (suite fake)
 * and the real driver (suite gpu): the primary context pushed and popped, a stream's context
 * pushed, stream and device waits, device attributes, the peer-access check. Fault injection on
 * the fake only. */
#include "testutil.h"

#include <string.h>

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

static CUcontext
primary (gint device)
{
  g_autoptr (GError) error = NULL;
  CUcontext ctx = NULL;

  g_assert_true (memres_cuda_get_primary_context (device, &ctx, &error));
  g_assert_no_error (error);
  return ctx;
}

static CUcontext
current (void)
{
  CUcontext ctx = NULL;

  CU_OK (mt_driver ()->cuCtxGetCurrent (&ctx));
  return ctx;
}

static gint
n_devices (void)
{
  gint n = 0;

  g_assert_true (memres_cuda_get_device_count (&n, NULL));
  return n;
}

/* Pushed when no context or another device's is current, not when the primary one is; the pop
 * leaves what was current before. */
static void
test_push_pop (void)
{
  g_autoptr (GError) error = NULL;
  CUcontext saved, ctx0;
  gboolean pushed = TRUE;

  if (!mt_require_devices (1))
    return;
  saved = current ();
  ctx0 = primary (0);

  CU_OK (mt_driver ()->cuCtxSetCurrent (NULL));
  g_assert_true (memres_cuda_push_context (0, &pushed, &error));
  g_assert_no_error (error);
  g_assert_true (pushed);
  g_assert_true (current () == ctx0);
  memres_cuda_pop_context (pushed);
  g_assert_null (current ());

  CU_OK (mt_driver ()->cuCtxSetCurrent (ctx0));
  g_assert_true (memres_cuda_push_context (0, &pushed, &error));
  g_assert_false (pushed); /* already current: nothing to push */
  g_assert_true (current () == ctx0);
  memres_cuda_pop_context (pushed);
  g_assert_true (current () == ctx0);

  if (n_devices () >= 2)
    {
      CUcontext ctx1 = primary (1);

      CU_OK (mt_driver ()->cuCtxSetCurrent (ctx1));
      g_assert_true (memres_cuda_push_context (0, &pushed, &error));
      g_assert_true (pushed);
      g_assert_true (current () == ctx0);
      memres_cuda_pop_context (pushed);
      g_assert_true (current () == ctx1);
    }

  /* a device that does not exist: nothing pushed */
  pushed = TRUE;
  g_assert_false (memres_cuda_push_context (99, &pushed, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_assert_false (pushed);
  CU_OK (mt_driver ()->cuCtxSetCurrent (saved));
}

static void
test_push_fails (void)
{
  g_autoptr (GError) error = NULL;
  CUcontext saved;
  gboolean pushed = TRUE;

  if (!mt_require_devices (1) || !mt_require_fake ("fails cuCtxPushCurrent"))
    return;
  saved = current ();
  CU_OK (mt_driver ()->cuCtxSetCurrent (NULL));
  mt_fake_fail_call ("cuCtxPushCurrent", 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_cuda_push_context (0, &pushed, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_assert_nonnull (strstr (error->message, "cuCtxPushCurrent"));
  g_assert_false (pushed);
  g_assert_null (current ());
  CU_OK (mt_driver ()->cuCtxSetCurrent (saved));
}

/* A failing pop cannot be reported to the caller: it is a warning naming the call (in a
 * subprocess, whose stderr shows it: structured logging bypasses g_test_expect_message()). */
static void
test_pop_fails (void)
{
  g_autoptr (GError) error = NULL;
  CUcontext saved, popped;
  gboolean pushed = FALSE;

  if (!mt_require_devices (1) || !mt_require_fake ("fails cuCtxPopCurrent"))
    return;
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      g_test_trap_assert_stderr ("*popping the context pushed for a driver call: cuCtxPopCurrent: "
                                 "CUDA_ERROR_INVALID_CONTEXT*");
      return;
    }
  g_log_set_always_fatal (G_LOG_FATAL_MASK); /* the warning is what is tested */
  saved = current ();
  CU_OK (mt_driver ()->cuCtxSetCurrent (NULL));
  g_assert_true (memres_cuda_push_context (0, &pushed, &error));
  g_assert_no_error (error);
  g_assert_true (pushed);
  mt_fake_fail_call ("cuCtxPopCurrent", 1, CUDA_ERROR_INVALID_CONTEXT);
  memres_cuda_pop_context (pushed);
  mt_fake_reset_faults ();
  /* the context the failed pop left is still there: pop it for real */
  g_assert_nonnull (current ());
  CU_OK (mt_driver ()->cuCtxPopCurrent (&popped));
  g_assert_null (current ());
  CU_OK (mt_driver ()->cuCtxSetCurrent (saved));
}

/* memres_cuda_push_stream_context() for @device and @stream succeeds, pushes (or not: @pushes)
 * and makes @inside current; the pop leaves @after current. */
static void
push_stream_ok (gint device, CUstream stream, gboolean pushes, CUcontext inside, CUcontext after)
{
  g_autoptr (GError) error = NULL;
  gboolean pushed = !pushes;

  g_assert_true (memres_cuda_push_stream_context (device, (MemresStream) stream, &pushed, &error));
  g_assert_no_error (error);
  g_assert_true (pushed == pushes);
  g_assert_true (current () == inside);
  memres_cuda_pop_context (pushed);
  g_assert_true (current () == after);
}

/* A stream's context: an explicit stream's own, pushed when another is current; a default
 * stream's, the device's primary context unless a context of the device is current (host memory:
 * the current context). The pop leaves what was current; a failing call is named, nothing
 * pushed. */
static void
test_push_stream_context (void)
{
  g_autoptr (GError) error = NULL;
  CUcontext saved, ctx0;
  CUstream stream = NULL;
  gboolean pushed = TRUE;

  if (!mt_require_devices (1))
    return;
  saved = current ();
  ctx0 = primary (0);

  /* no context current: device 0's primary context is made current, not pushed */
  CU_OK (mt_driver ()->cuCtxSetCurrent (NULL));
  push_stream_ok (0, NULL, FALSE, ctx0, ctx0);

  /* device 0's stream, device 0's context current; host memory on the legacy stream */
  CU_OK (mt_driver ()->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING));
  pushed = TRUE;
  g_assert_true (memres_cuda_push_stream_context (0, (MemresStream) stream, &pushed, &error));
  g_assert_no_error (error);
  g_assert_false (pushed);
  pushed = TRUE;
  g_assert_true (memres_cuda_push_stream_context (-1, MEMRES_STREAM_LEGACY, &pushed, &error));
  g_assert_no_error (error);
  g_assert_false (pushed);
  g_assert_true (current () == ctx0);

  if (n_devices () >= 2)
    {
      CUcontext ctx1 = primary (1);

      /* the stream runs in device 0's context, whatever the memory's device */
      CU_OK (mt_driver ()->cuCtxSetCurrent (ctx1));
      push_stream_ok (1, stream, TRUE, ctx0, ctx1);

      /* a default stream: device 0's memory gets its primary context, device 1's the current */
      push_stream_ok (0, NULL, TRUE, ctx0, ctx1);
      push_stream_ok (1, NULL, FALSE, ctx1, ctx1);
      CU_OK (mt_driver ()->cuCtxSetCurrent (ctx0));
    }

  /* a device that does not exist: nothing pushed */
  pushed = TRUE;
  g_assert_false (memres_cuda_push_stream_context (99, NULL, &pushed, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_assert_false (pushed);
  CU_OK (mt_driver ()->cuStreamDestroy (stream));
  CU_OK (mt_driver ()->cuCtxSetCurrent (saved));
}

/* A failing driver call is named; nothing is pushed. */
static void
test_push_stream_context_fails (void)
{
  g_autoptr (GError) error = NULL;
  CUcontext saved;
  CUstream stream = NULL;
  gboolean pushed = TRUE;

  if (!mt_require_devices (1) || !mt_require_fake ("fails cuStreamGetCtx"))
    return;
  saved = current ();
  CU_OK (mt_driver ()->cuCtxSetCurrent (primary (0)));
  CU_OK (mt_driver ()->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING));
  mt_fake_fail_call ("cuStreamGetCtx", 1, CUDA_ERROR_INVALID_HANDLE);
  g_assert_false (memres_cuda_push_stream_context (0, (MemresStream) stream, &pushed, &error));
  mt_fake_reset_faults ();
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_HANDLE);
  g_assert_nonnull (strstr (error->message, "cuStreamGetCtx"));
  g_assert_false (pushed);
  g_assert_true (current () == primary (0));
  CU_OK (mt_driver ()->cuStreamDestroy (stream));
  CU_OK (mt_driver ()->cuCtxSetCurrent (saved));
}

/* The waits succeed on idle and explicit streams, leave the current context as it was, and
 * report the failing call. */
static void
test_synchronize (void)
{
  g_autoptr (GError) error = NULL;
  CUstream s = NULL;
  CUcontext saved;

  if (!mt_require_devices (1))
    return;
  g_assert_true (memres_cuda_ensure_context (0, &error));
  saved = current ();
  CU_OK (mt_driver ()->cuStreamCreate (&s, CU_STREAM_NON_BLOCKING));
  g_assert_true (memres_cuda_stream_synchronize (0, (MemresStream) s, &error));
  g_assert_no_error (error);
  g_assert_true (memres_cuda_stream_synchronize (0, NULL, &error));
  g_assert_true (memres_cuda_stream_synchronize (-1, MEMRES_STREAM_LEGACY, &error));
  g_assert_true (memres_cuda_device_synchronize (0, &error));
  g_assert_no_error (error);
  g_assert_true (current () == saved);

  if (mt_driver_is_fake ())
    {
      long before = mt_fake_call_count ("cuStreamSynchronize");

      g_assert_true (memres_cuda_stream_synchronize (0, (MemresStream) s, &error));
      g_assert_cmpint (mt_fake_call_count ("cuStreamSynchronize"), ==, before + 1);
      mt_fake_fail_call ("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED);
      g_assert_false (memres_cuda_stream_synchronize (0, (MemresStream) s, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_LAUNCH_FAILED);
      g_assert_nonnull (strstr (error->message, "cuStreamSynchronize"));
      g_clear_error (&error);
      mt_fake_fail_call ("cuCtxSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED);
      g_assert_false (memres_cuda_device_synchronize (0, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_LAUNCH_FAILED);
      g_assert_nonnull (strstr (error->message, "cuCtxSynchronize"));
      g_clear_error (&error);
      g_assert_true (current () == saved); /* popped after the failure too */
    }
  g_assert_false (memres_cuda_device_synchronize (99, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  CU_OK (mt_driver ()->cuStreamDestroy (s));
}

static void
test_device_attribute (void)
{
  g_autoptr (GError) error = NULL;
  CUdevice dev;
  int direct = -1;
  gint value = -1;

  if (!mt_require_devices (1))
    return;
  CU_OK (mt_driver ()->cuDeviceGet (&dev, 0));
  CU_OK (mt_driver ()->cuDeviceGetAttribute (&direct, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                             dev));
  g_assert_true (memres_cuda_get_device_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                                   &value, &error));
  g_assert_no_error (error);
  g_assert_cmpint (value, ==, direct);

  g_assert_false (memres_cuda_get_device_attribute (-1, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                                    &value, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
  if (mt_driver_is_fake ())
    {
      mt_fake_fail_call ("cuDeviceGetAttribute", 1, CUDA_ERROR_INVALID_VALUE);
      g_assert_false (memres_cuda_get_device_attribute (
          0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, &value, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE);
      g_assert_nonnull (strstr (error->message, "cuDeviceGetAttribute"));
    }
}

static void
test_peer_access (void)
{
  g_autoptr (GError) error = NULL;

  if (!mt_require_devices (1))
    return;
  /* a device reaches its own memory without asking */
  g_assert_true (memres_cuda_check_peer_access (0, 0, &error));
  g_assert_no_error (error);
  g_assert_false (memres_cuda_check_peer_access (0, 99, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
  if (!mt_require_devices (2))
    return;
  if (g_test_subprocess ())
    {
      /* FAKECUDA_NO_PEER (set by the parent): the fake's devices cannot reach each other */
      g_assert_false (memres_cuda_check_peer_access (0, 1, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_assert_cmpstr (error->message, ==,
                       "device 1 cannot access the memory of device 0 (cuDeviceCanAccessPeer)");
      return;
    }
  g_assert_true (memres_cuda_check_peer_access (0, 1, &error));
  g_assert_no_error (error);
  g_assert_true (memres_cuda_check_peer_access (1, 0, &error));
  if (mt_driver_is_fake ())
    {
      mt_fake_fail_call ("cuDeviceCanAccessPeer", 1, CUDA_ERROR_UNKNOWN);
      g_assert_false (memres_cuda_check_peer_access (0, 1, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
      g_clear_error (&error);

      g_setenv ("FAKECUDA_NO_PEER", "1", TRUE);
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_unsetenv ("FAKECUDA_NO_PEER");
      g_test_trap_assert_passed ();
    }
}

int
main (int argc, char **argv)
{
  const char *driver = g_getenv ("MEMRES_CUDA_DRIVER");

  if (driver != NULL && strstr (driver, "fakecuda") != NULL)
    g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/cuda-helpers/push-pop", test_push_pop);
  g_test_add_func ("/cuda-helpers/push-fails", test_push_fails);
  g_test_add_func ("/cuda-helpers/pop-fails", test_pop_fails);
  g_test_add_func ("/cuda-helpers/push-stream-context", test_push_stream_context);
  g_test_add_func ("/cuda-helpers/push-stream-context-fails", test_push_stream_context_fails);
  g_test_add_func ("/cuda-helpers/synchronize", test_synchronize);
  g_test_add_func ("/cuda-helpers/device-attribute", test_device_attribute);
  g_test_add_func ("/cuda-helpers/peer-access", test_peer_access);
  return g_test_run ();
}

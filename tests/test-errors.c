/* test-errors.c: the three error domains and memres_cuda_set_error() without a driver. */
#include <memres/memres-plugin.h>

#include <string.h>

static void
test_domains (void)
{
  g_assert_cmpstr (g_quark_to_string (MEMRES_ERROR), ==, "memres-error-quark");
  g_assert_cmpstr (g_quark_to_string (MEMRES_PLUGIN_ERROR), ==, "memres-plugin-error-quark");
  g_assert_cmpstr (g_quark_to_string (MEMRES_CUDA_ERROR), ==, "memres-cuda-error-quark");
  g_assert_cmpuint (MEMRES_ERROR, !=, MEMRES_PLUGIN_ERROR);
  g_assert_cmpuint (MEMRES_ERROR, !=, MEMRES_CUDA_ERROR);
  g_assert_cmpuint (MEMRES_PLUGIN_ERROR, !=, MEMRES_CUDA_ERROR);
  /* the same quark on every call */
  g_assert_cmpuint (memres_error_quark (), ==, memres_error_quark ());
}

static void
test_cuda_set_error_without_driver (void)
{
  g_autoptr (GError) error = NULL;

  /* No driver loaded (the core suite points MEMRES_CUDA_DRIVER at nothing): the code is the
   * CUresult and the message still names the call and the number. */
  g_assert_false (memres_cuda_set_error (&error, CUDA_ERROR_INVALID_VALUE, "cuMemFree"));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE);
  g_assert_cmpstr (error->message, ==, "cuMemFree: CUDA error 1");
  g_clear_error (&error);
  /* the out-of-memory rule: CUDA_ERROR_OUT_OF_MEMORY is MEMRES_ERROR_OUT_OF_MEMORY, driver or
   * not, the message naming the call and the CUresult */
  g_assert_false (memres_cuda_set_error (&error, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc"));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_cmpstr (error->message, ==, "cuMemAlloc: CUDA error 2");
}

/* Without a driver every SDK helper of the kinds' mechanics fails with NO_DRIVER. */
static void
test_cuda_helpers_without_driver (void)
{
  g_autoptr (GError) error = NULL;
  gboolean pushed = TRUE;
  gint value = 0;

  g_assert_false (memres_cuda_push_context (0, &pushed, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_assert_false (pushed);
  g_clear_error (&error);
  memres_cuda_pop_context (FALSE); /* nothing pushed: nothing to do, no driver needed */
  g_assert_false (memres_cuda_stream_synchronize (0, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_false (memres_cuda_device_synchronize (0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_false (memres_cuda_get_device_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                                    &value, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&error);
  g_assert_false (memres_cuda_check_peer_access (0, 0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
}

static void
test_cuda_set_error_null (void)
{
  /* a NULL error location is allowed and still returns FALSE */
  g_assert_false (memres_cuda_set_error (NULL, CUDA_ERROR_INVALID_VALUE, "cuFoo"));
}

/* One helper warns about release failures; the driver's "deinitialized" (process exit) is
 * silent, every other failure a warning naming what was released and why. In subprocesses:
 * the warning is fatal under g_test. */
static void
test_warn_release_failure (void)
{
  static const char *const modes[] = { "deinit", "other", "null", "same-code" };
  static const char *const expected[] = {
    "",
    "*closing a buffer of 10 bytes: cuMemFreeAsync: *",
    "*rolling back: failed without saying why*",
    "*x: not the driver*",
  };

  if (g_test_subprocess ())
    {
      const char *mode = g_getenv ("WARN_MODE");
      g_autoptr (GError) error = NULL;

      if (g_strcmp0 (mode, "deinit") == 0 || g_strcmp0 (mode, "other") == 0)
        memres_cuda_set_error (&error,
                               g_strcmp0 (mode, "deinit") == 0 ? CUDA_ERROR_DEINITIALIZED
                                                               : CUDA_ERROR_ILLEGAL_ADDRESS,
                               "cuMemFreeAsync");
      if (g_strcmp0 (mode, "null") == 0)
        memres_cuda_warn_release_failure (NULL, "rolling back");
      else if (g_strcmp0 (mode, "same-code") == 0)
        {
          /* a MEMRES_ERROR with the code number of DEINITIALIZED is not the driver's */
          error = g_error_new_literal (MEMRES_ERROR, CUDA_ERROR_DEINITIALIZED, "not the driver");
          memres_cuda_warn_release_failure (error, "x");
        }
      else
        memres_cuda_warn_release_failure (error, "closing a buffer of %d bytes", 10);
      return;
    }
  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    {
      g_setenv ("WARN_MODE", modes[i], TRUE);
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      if (i == 0)
        {
          g_test_trap_assert_passed ();
          g_test_trap_assert_stderr ("");
        }
      else
        {
          g_test_trap_assert_failed ();
          g_test_trap_assert_stderr (expected[i]);
        }
    }
  g_unsetenv ("WARN_MODE");
}

static void
test_version (void)
{
  g_autofree char *expected = g_strdup_printf ("%d.%d.%d", MEMRES_MAJOR_VERSION,
                                               MEMRES_MINOR_VERSION, MEMRES_MICRO_VERSION);

  g_assert_cmpstr (memres_get_version (), ==, MEMRES_VERSION_STRING);
  g_assert_cmpstr (memres_get_version (), ==, expected);
  g_assert_cmpint (MEMRES_CUDA_VERSION, >=, 12030);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/errors/domains", test_domains);
  g_test_add_func ("/errors/cuda/without-driver", test_cuda_set_error_without_driver);
  g_test_add_func ("/errors/cuda/null-error", test_cuda_set_error_null);
  g_test_add_func ("/errors/cuda/helpers-without-driver", test_cuda_helpers_without_driver);
  g_test_add_func ("/errors/version", test_version);
  g_test_add_func ("/errors/cuda/warn-release-failure", test_warn_release_failure);
  return g_test_run ();
}

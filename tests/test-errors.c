/* test-errors.c: the three error domains, memres_cuda_set_error() without a driver, the test
 * of an absent driver and the quoting of user input (memres_printable()). */
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

/* Only the NO_DRIVER error of a driver library that is not there says "absent"; the core suite
 * has none. */
static void
test_driver_absent (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) other = NULL;

  g_assert_null (memres_cuda_get_driver (&error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_assert_true (memres_error_is_driver_absent (error));
  /* the same code for a library that is not a driver, another domain, no error */
  other = g_error_new_literal (MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER,
                               "/usr/lib/libc.so.6 is not a CUDA driver");
  g_assert_false (memres_error_is_driver_absent (other));
  g_clear_error (&other);
  other = g_error_new_literal (MEMRES_CUDA_ERROR, MEMRES_ERROR_NO_DRIVER, error->message);
  g_assert_false (memres_error_is_driver_absent (other));
  g_assert_false (memres_error_is_driver_absent (NULL));
}

static void
assert_printable (const char *text, gsize max_bytes, const char *expected)
{
  g_autofree char *got = memres_printable (text, max_bytes);

  g_assert_cmpstr (got, ==, expected);
}

static void
test_printable (void)
{
  g_autofree char *long_text = g_strnfill (100, 'k');
  g_autofree char *shown = NULL;

  /* short printable text is kept as it is, quotes and backslashes included */
  assert_printable ("dmr:device=0", 64, "dmr:device=0");
  assert_printable ("a \"b\" \\c", 64, "a \"b\" \\c");
  assert_printable ("", 64, "");
  assert_printable (NULL, 64, "(null)");
  /* line breaks, tabs, controls, C1 controls, bytes that are not UTF-8 */
  assert_printable ("a\nb\rc\td", 64, "a\\nb\\rc\\td");
  assert_printable ("\033[31m", 64, "\\x1b[31m");
  assert_printable ("\x7f", 64, "\\x7f");
  assert_printable ("x\xc2\x9by", 64, "x\\u009by");
  assert_printable ("\xff\xfe", 64, "\\xff\\xfe");
  assert_printable ("caf\xc3\xa9", 64, "caf\xc3\xa9");
  assert_printable ("caf\xc3", 64, "caf\\xc3");
  /* cut after what fits, with the length of the whole input; an escape is not split */
  assert_printable ("abcdef", 4, "abcd... (6 bytes)");
  assert_printable ("abcd", 4, "abcd");
  assert_printable ("abc\n", 4, "abc... (4 bytes)");
  assert_printable ("caf\xc3\xa9!", 4, "caf... (6 bytes)");
  /* what error messages quote */
  g_assert_cmpint (MEMRES_INPUT_SHOWN_MAX, ==, 64);
  shown = memres_printable (long_text, MEMRES_INPUT_SHOWN_MAX);
  g_assert_cmpuint (strlen (shown), ==, 64 + strlen ("... (100 bytes)"));
  g_assert_true (g_str_has_suffix (shown, "k... (100 bytes)"));
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
  g_test_add_func ("/errors/driver-absent", test_driver_absent);
  g_test_add_func ("/errors/printable", test_printable);
  g_test_add_func ("/errors/cuda/warn-release-failure", test_warn_release_failure);
  return g_test_run ();
}

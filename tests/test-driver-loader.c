/* test-driver-loader.c: loading the CUDA driver where there is none or where MEMRES_CUDA_DRIVER
 * names a file that is not a driver: always MEMRES_ERROR_NO_DRIVER, never a crash, and the
 * library keeps working with host memory. Each case runs in a child process, because the
 * driver is loaded once per process. */
#include <memres/memres-plugin.h>

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const char *plugin_dir;

/* memres_resource_get_default_spec (@device) gives @spec and the reason @reason, also when the
 * reason is not asked for. */
static void
assert_default_spec (gint device, const char *spec, const char *reason)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *got = NULL;
  g_autofree char *why = NULL;

  got = memres_resource_get_default_spec (device, &why, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got, ==, spec);
  g_assert_cmpstr (why, ==, reason);
  g_clear_pointer (&got, g_free);
  got = memres_resource_get_default_spec (device, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (got, ==, spec);
}

/* In the child: the driver fails to load with NO_DRIVER, again on the second call, and the
 * functions that need it fail the same way while host memory still works. */
static void
child_expect_no_driver (const char *needle, gboolean absent)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) again = NULL;
  g_autoptr (MemresResource) mr = NULL;
  guint8 uuid[16];
  gint count = -1, device = -1;

  g_assert_null (memres_cuda_get_driver (&error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  if (needle != NULL && strstr (error->message, needle) == NULL)
    g_error ("message lacks \"%s\": %s", needle, error->message);
  /* the failure is remembered and reported again, identically */
  g_assert_null (memres_cuda_get_driver (&again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_assert_cmpstr (error->message, ==, again->message);
  g_clear_error (&again);
  /* no library at all, or one that is not a usable driver */
  g_assert_cmpint (memres_error_is_driver_absent (error), ==, absent);

  g_assert_false (memres_cuda_get_device_count (&count, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&again);
  g_assert_false (memres_cuda_check_device (0, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&again);
  g_assert_false (memres_cuda_ensure_context (0, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&again);
  g_assert_false (memres_cuda_get_device_uuid (0, uuid, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&again);
  g_assert_false (memres_cuda_find_device_by_uuid (uuid, &device, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&again);
  g_assert_false (memres_cuda_check_stream_not_capturing (NULL, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&again);
  /* as the README says: the default streams synchronize at once, a stream of one's own needs
   * the driver */
  g_assert_true (memres_stream_synchronize (NULL, &again));
  g_assert_no_error (again);
  g_assert_true (memres_stream_synchronize (MEMRES_STREAM_LEGACY, &again));
  g_assert_no_error (again);
  /* the per-thread default stream too (RMM's cuda_stream_per_thread): a default stream */
  g_assert_true (memres_stream_synchronize ((MemresStream) CU_STREAM_PER_THREAD, &again));
  g_assert_no_error (again);
  g_assert_false (memres_stream_synchronize ((MemresStream) 0x1000, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
  g_clear_error (&again);

  /* the default resource falls back to host memory; an ordinal below -1 is refused */
  mr = memres_resource_get_default (0, &again);
  g_assert_no_error (again);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "host");
  g_assert_null (memres_resource_get_default (-2, &again));
  g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&again);
  /* and says why: the driver's error, or the ordinal asked for */
  assert_default_spec (0, "host", error->message);
  assert_default_spec (-1, "host", "asked for device -1");
  {
    g_autofree char *stale = g_strdup ("not cleared");
    char *reason = stale; /* the call sets it without freeing what it held */
    g_assert_null (memres_resource_get_default_spec (-2, &reason, &again));
    g_assert_error (again, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_assert_null (reason);
  }
}

typedef struct
{
  const char *driver; /* MEMRES_CUDA_DRIVER; "@stub" for libstubcuda.so, "@text" for a text
                         file, "@empty" for an empty file, "@fifo" for a FIFO (it must not
                         hang), "@loop" for a symbolic link to itself, "@dangling" for a link to
                         nothing; the odd files are in odd_dir */
  const char *stub_mode;
  const char *needle; /* expected in the NO_DRIVER message, or NULL */
  gboolean absent;    /* memres_error_is_driver_absent() of that error */
} Case;

static char *text_file;
static char *empty_file;
static char *odd_dir;

static void test_no_device_child (void);

/* Runs the case in a child process with MEMRES_CUDA_DRIVER set before the first driver use. */
static void
test_case (gconstpointer data)
{
  const Case *c = data;
  g_autofree char *stub = NULL;
  g_autofree char *odd = NULL;
  const char *driver = c->driver;

  if (g_test_subprocess ())
    {
      if (c->needle == NULL && g_strcmp0 (c->stub_mode, "nodevice") == 0)
        test_no_device_child ();
      else
        child_expect_no_driver (c->needle, c->absent);
      return;
    }
  if (strcmp (driver, "@stub") == 0)
    driver = stub = g_build_filename (plugin_dir, "libstubcuda.so", NULL);
  else if (strcmp (driver, "@text") == 0)
    driver = text_file;
  else if (strcmp (driver, "@empty") == 0)
    driver = empty_file;
  else if (driver[0] == '@')
    driver = odd = g_build_filename (odd_dir, driver + 1, NULL);
  g_setenv ("MEMRES_CUDA_DRIVER", driver, TRUE);
  if (c->stub_mode != NULL)
    g_setenv ("STUBCUDA_MODE", c->stub_mode, TRUE);
  else
    g_unsetenv ("STUBCUDA_MODE");
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed ();
}

static void
test_no_device_child (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  const MemresCudaDriver *drv;
  guint8 uuid[16] = { 0 };
  gint count = -1, device = -1;

  /* cuInit said CUDA_ERROR_NO_DEVICE: a loaded driver with no devices */
  drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_nonnull (drv);
  g_assert_cmpuint (drv->struct_size, ==, sizeof (MemresCudaDriver));
  g_assert_cmpint (drv->driver_version, ==, 12030);
  g_assert_true (g_str_has_suffix (drv->path, "libstubcuda.so"));
  g_assert_nonnull (drv->cuInit);
  g_assert_null (drv->cuMemAlloc); /* the stub has no such entry point */
  g_assert_true (memres_cuda_get_device_count (&count, &error));
  g_assert_cmpint (count, ==, 0);
  g_assert_false (memres_cuda_check_device (0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
  g_assert_false (memres_cuda_check_device (-1, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
  g_assert_false (memres_cuda_find_device_by_uuid (uuid, &device, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
  /* no device: no device work can be pending on the default stream */
  g_assert_true (memres_stream_synchronize (NULL, &error));
  g_assert_no_error (error);

  /* with a driver loaded, errors carry the driver's names */
  g_assert_false (memres_cuda_set_error (&error, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc"));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY); /* the out-of-memory rule */
  g_assert_cmpstr (error->message, ==, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
  g_clear_error (&error);

  mr = memres_resource_get_default (0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "host");
  assert_default_spec (0, "host", "the CUDA driver reports no device");
  assert_default_spec (-1, "host", "asked for device -1");
}

static const Case cases[] = {
  { "/nonexistent/libcuda.so.1", NULL, "/nonexistent/libcuda.so.1", TRUE },
  { "@text", NULL, "No CUDA driver could be loaded", TRUE },
  { "@empty", NULL, "No CUDA driver could be loaded", TRUE },
  { "/", NULL, "it is a directory", TRUE },
  { "@fifo", NULL, "it is a FIFO", TRUE },
  { "@loop", NULL, "it is a symbolic link loop", TRUE },
  { "@dangling", NULL, "it is a dangling symbolic link", TRUE },
  { "libc.so.6", NULL, "is not a CUDA driver", FALSE },
  { "libglib-2.0.so.0", NULL, "is not a CUDA driver", FALSE },
  { "@stub", "missing", "lacks the entry point cuDeviceGetCount", FALSE },
  { "@stub", "initfail", "cuInit: CUDA_ERROR_INVALID_DEVICE: invalid device ordinal", FALSE },
  { "@stub", "nodevice", NULL, FALSE },
};
static const char *const case_names[] = {
  "missing-file",  "text-file", "empty-file", "directory",     "fifo",       "link-loop",
  "dangling-link", "libc",      "glib",       "missing-entry", "init-fails", "no-device",
};

int
main (int argc, char **argv)
{
  gsize i;
  int ret;

  g_test_init (&argc, &argv, NULL);
  plugin_dir = g_getenv ("MEMRES_TEST_PLUGIN_DIR");
  if (plugin_dir == NULL)
    g_error ("MEMRES_TEST_PLUGIN_DIR is not set: run through meson test");
  text_file
      = g_strdup_printf ("%s/memres-test-not-a-driver-%d.txt", g_get_tmp_dir (), (int) getpid ());
  empty_file = g_strdup_printf ("%s/memres-test-empty-%d.so", g_get_tmp_dir (), (int) getpid ());
  if (!g_test_subprocess ())
    {
      g_assert_true (g_file_set_contents (text_file, "This is not a shared object.\n", -1, NULL));
      g_assert_true (g_file_set_contents (empty_file, "", 0, NULL));
      odd_dir = g_dir_make_tmp ("memres-test-driver-XXXXXX", NULL);
      g_assert_nonnull (odd_dir);
      mt_make_odd_files (odd_dir, "fifo", "loop", "dangling");
    }
  else
    {
      /* the child inherits the parent's file names through the environment */
      g_free (text_file);
      g_free (empty_file);
      text_file = g_strdup (g_getenv ("MEMRES_TEST_TEXT_FILE"));
      empty_file = g_strdup (g_getenv ("MEMRES_TEST_EMPTY_FILE"));
      odd_dir = g_strdup (g_getenv ("MEMRES_TEST_ODD_DIR"));
    }
  g_setenv ("MEMRES_TEST_ODD_DIR", odd_dir, TRUE);
  g_setenv ("MEMRES_TEST_TEXT_FILE", text_file, TRUE);
  g_setenv ("MEMRES_TEST_EMPTY_FILE", empty_file, TRUE);

  G_STATIC_ASSERT (G_N_ELEMENTS (cases) == G_N_ELEMENTS (case_names));
  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = g_strconcat ("/driver-loader/", case_names[i], NULL);
      g_test_add_data_func (path, &cases[i], test_case);
    }
  ret = g_test_run ();
  if (!g_test_subprocess ())
    {
      g_remove (text_file);
      g_remove (empty_file);
      mt_remove_dir (odd_dir);
    }
  g_free (text_file);
  g_free (empty_file);
  return ret;
}

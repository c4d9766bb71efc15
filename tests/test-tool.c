/* test-tool.c: the `memres` command as a user runs it (the program named by MEMRES_TOOL), with
 * no driver (suite core) and against the fake (suite fake). */
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "testutil.h"

typedef struct
{
  int status; /* exit status */
  char *out;
  char *err;
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}

/* Runs `memres ARGS...` (NULL-terminated) with the test's environment. */
static void
run_tool (Run *r, ...)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  GError *error = NULL;
  const char *arg;
  va_list args;
  int wait_status;

  g_assert_nonnull (tool);
  g_ptr_array_add (argv, (gpointer) tool);
  va_start (args, r);
  while ((arg = va_arg (args, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (args);
  g_ptr_array_add (argv, NULL);

  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &r->out, &r->err, &wait_status, &error));
  g_assert_no_error (error);
  g_assert_true (WIFEXITED (wait_status));
  r->status = WEXITSTATUS (wait_status);
}

/* The command's promise: an error is one line on stderr, whatever the input echoed in it. */
static void
assert_one_error_line (const Run *r)
{
  const char *nl = strchr (r->err, '\n');

  g_assert_cmpint (r->status, !=, 0);
  g_assert_true (g_str_has_prefix (r->err, "memres"));
  g_assert_nonnull (nl);
  g_assert_cmpstr (nl + 1, ==, "");
  g_assert_true (g_utf8_validate (r->err, -1, NULL));
}

static void
test_error_one_line (void)
{
  static const char *const specs[] = {
    "host\n",                  /* kind name */
    "host:alignment=8\nx",     /* option value */
    "host:alignment=\r8\t",    /* other control characters */
    "h\xff\xfe",               /* not UTF-8 */
    "host:alignment=8\x1b[2J", /* a terminal escape */
  };

  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      Run r = { 0 };

      run_tool (&r, "alloc", specs[i], "1", NULL);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      run_clear (&r);
    }
  {
    Run r = { 0 };

    run_tool (&r, "alloc", "host", "1\n2", NULL);
    assert_one_error_line (&r);
    g_assert_nonnull (strstr (r.err, "\"1\\n2\""));
    run_clear (&r);
  }
}

/* A kind that rounds sizes up: the command reports the buffer it got and verified. */
static void
test_alloc_reports_rounded_size (void)
{
  Run r = { 0 };
  g_autofree char *want = NULL;

  if (!mt_require_devices (1))
    return;
  run_tool (&r, "alloc", "--json", "vmm", "1MiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_test_message ("%s", r.out);
  /* vmm rounds to its granularity (the fake's and the H200's: 2 MiB) */
  g_assert_nonnull (strstr (r.out, "\"size\": 2097152"));
  g_assert_nonnull (strstr (r.out, "\"requested_size\": 1048576"));
  g_assert_nonnull (strstr (r.out, "\"verified_bytes\": 2097152"));
  run_clear (&r);

  run_tool (&r, "alloc", "vmm", "1MiB", NULL);
  g_test_message ("%s", r.out);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\nbuffer    2.0 MiB (2097152 bytes) at "));
  g_assert_nonnull (strstr (r.out, " (rounded up from 1048576 bytes)\n"));
  g_assert_nonnull (strstr (r.out, "every byte checked (2097152)"));
  run_clear (&r);
}

/* ipc-serve with a resource that cannot be shared fails before it listens, not at the first
 * client (with --count 0 it would otherwise fail every client, forever). */
static void
test_ipc_serve_not_shareable (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  Run r = { 0 };

  g_assert_nonnull (dir);
  run_tool (&r, "ipc-serve", "--spec", "host", "--count", "1", path, NULL);
  g_test_message ("%s", r.err);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "cannot be shared"));
  g_assert_cmpstr (r.out, ==, "");
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  run_clear (&r);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/tool/error/one-line", test_error_one_line);
  g_test_add_func ("/tool/alloc/rounded-size", test_alloc_reports_rounded_size);
  g_test_add_func ("/tool/ipc-serve/not-shareable", test_ipc_serve_not_shareable);
  return g_test_run ();
}

/* test-tool-ipc.c: the `memres ipc-serve` command and silent peers, with no driver (suite core)
 * and against the fake (suite fake). */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "testutil.h"
#include "testutil-tool.h"

/* ipc-serve with a resource that cannot be shared fails before it listens, not at the first
 * client (without --count it would otherwise fail every client, forever). */
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
  if (mt_require_devices (1))
    {
      /* vmm shares whole buffers, not a pool: the message says how, not "use kind ipc" */
      run_tool (&r, "ipc-serve", "--spec", "vmm:handle_type=posix_fd", "--count", "1", path, NULL);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_cmpstr (r.err, ==,
                       "memres: resources of kind \"vmm\" have no pool handle to share: their "
                       "buffers are shared whole, as their physical chunks (one file descriptor "
                       "each): send a buffer with memres_ipc_send_buffer(), or make its message "
                       "with memres_buffer_export_message() (docs/ipc.md)\n");
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      run_clear (&r);
      /* a cache over the pool hides it: why, and what to do */
      run_tool (&r, "ipc-serve", "--spec", "cache>ipc", "--count", "1", path, NULL);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_nonnull (strstr (r.err, ": resources of kind \"cache\" cannot be shared with "
                                       "other processes: \"cache\" carves its blocks out of "
                                       "larger allocations of the layer below"));
      g_assert_nonnull (strstr (r.err, "share from the layer below "
                                       "(memres_resource_get_upstream()), or use a stack without "
                                       "\"cache\"\n"));
      g_assert_null (strstr (r.err, "use kind"));
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      run_clear (&r);
    }
  g_rmdir (dir);
}

/* A SOCKET where no socket can be made is a usage error (exit status 2), as an -o FILE in a
 * missing directory is, checked before the pool is made (it was exit status 1: "listening on
 * ...: No such file or directory", and without a driver NO_DRIVER first): the error's domain
 * and code with --json. At ipc-attach a missing socket, in a missing directory too, is no
 * server listening (1, as documented); a path under a file is 2 there too. */
static void
test_ipc_socket_paths (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *file = g_build_filename (dir, "plain", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing", "s.sock", NULL);
  g_autofree char *under_file = g_build_filename (file, "s.sock", NULL);
  static const char *const no_pool[] = { NULL, "host" }; /* the default ipc pool; one refused */
  const struct
  {
    const char *path;
    const char *code_name;
    const char *domain;
  } serve[] = {
    { missing, "G_FILE_ERROR_NOENT", "g-file-error-quark" },
    { under_file, "G_FILE_ERROR_NOTDIR", "g-file-error-quark" },
    { file, "MEMRES_ERROR_INVALID_ARGUMENT", "memres-error-quark" },
    { dir, "MEMRES_ERROR_INVALID_ARGUMENT", "memres-error-quark" },
  };
  Run r = { 0 };

  g_assert_true (g_file_set_contents (file, "mine", -1, NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (serve); i++)
    for (gsize k = 0; k < G_N_ELEMENTS (no_pool); k++)
      {
        g_autofree char *domain = g_strdup_printf ("\"domain\": \"%s\"", serve[i].domain);
        g_autofree char *code = g_strdup_printf ("\"code_name\": \"%s\"", serve[i].code_name);
        g_autofree char *kept = NULL;

        if (no_pool[k] != NULL)
          run_tool (&r, "ipc-serve", "--json", "--spec", no_pool[k], "--count", "1", serve[i].path,
                    NULL);
        else
          run_tool (&r, "ipc-serve", "--json", "--count", "1", serve[i].path, NULL);
        g_test_message ("ipc-serve %s: %s", serve[i].path, r.err);
        assert_one_error_line (&r);
        g_assert_cmpint (r.status, ==, 2);
        g_assert_nonnull (strstr (r.out, domain));
        g_assert_nonnull (strstr (r.out, code));
        g_assert_nonnull (strstr (r.out, "\"exit_status\": 2"));
        g_assert_null (strstr (r.err, "driver"));
        run_clear (&r);
        g_assert_false (g_file_test (missing, G_FILE_TEST_EXISTS));
        g_assert_true (g_file_get_contents (file, &kept, NULL, NULL));
        g_assert_cmpstr (kept, ==, "mine");
      }
  /* the message names the path and the reason */
  run_tool (&r, "ipc-serve", missing, NULL);
  {
    g_autofree char *want = g_strdup_printf ("memres: cannot listen on \"%s\": No such file or "
                                             "directory\n",
                                             missing);
    g_assert_cmpstr (r.err, ==, want);
  }
  run_clear (&r);
  g_assert_false (g_file_test (missing, G_FILE_TEST_EXISTS));
  /* ipc-attach: a missing directory is a server that is not there (1); under a file, 2 */
  run_tool (&r, "--json", "ipc-attach", missing, NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "No such file or directory"));
  run_clear (&r);
  run_tool (&r, "--json", "ipc-attach", under_file, NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"G_FILE_ERROR_NOTDIR\""));
  run_clear (&r);
  run_tool (&r, "--json", "ipc-attach", file, NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_INVALID_ARGUMENT\""));
  run_clear (&r);
  g_assert_cmpint (g_remove (file), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
}

/* --count takes 1 or more: 0 (or less) would serve forever, which is what leaving it out
 * means; it is a usage error before anything listens, with --json the error document. */
static void
test_ipc_serve_count (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  static const char *const counts[] = { "0", "-1", "-2147483648", "x", "", "2147483648" };
  Run r = { 0 };

  for (gsize i = 0; i < G_N_ELEMENTS (counts); i++)
    {
      g_autofree char *want
          = g_strdup_printf ("memres ipc-serve: --count \"%s\": expected a number of clients, 1 "
                             "or more (without --count: serve until SIGINT or SIGTERM) (see "
                             "memres ipc-serve --help)\n",
                             counts[i]);

      run_tool (&r, "ipc-serve", "--count", counts[i], path, NULL);
      g_test_message ("--count '%s': %s", counts[i], r.err);
      g_assert_cmpint (r.status, ==, 2);
      g_assert_cmpstr (r.out, ==, "");
      g_assert_cmpstr (r.err, ==, want);
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      run_clear (&r);
    }
  run_tool (&r, "ipc-serve", "--json", "--count=0", path, NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_cmpstr (r.err, ==,
                   "memres ipc-serve: --count \"0\": expected a number of clients, 1 or more "
                   "(without --count: serve until SIGINT or SIGTERM) (see memres ipc-serve "
                   "--help)\n");
  g_assert_cmpstr (r.out, ==,
                   "{\n  \"error\": {\n    \"message\": \"--count \\\"0\\\": expected a number of "
                   "clients, 1 or more (without --count: serve until SIGINT or SIGTERM)\",\n    "
                   "\"domain\": "
                   "null,\n    \"code\": null,\n    \"code_name\": null,\n    "
                   "\"exit_status\": 2\n  }\n}\n");
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  run_clear (&r);
  g_rmdir (dir);
}

/* A second ipc-serve on the socket of a live one is refused (the first keeps it); SIGTERM and
 * SIGINT make a server remove its socket and exit. `ipc-attach ''` says the path is empty. */
static void
test_ipc_serve_socket (void)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  static const int signals[] = { SIGTERM, SIGINT };
  Run r = { 0 };

  run_tool (&r, "ipc-attach", "", NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, "the socket path is empty"));
  run_clear (&r);
  /* a --size that is no size names what is wanted (not "or max", which it refuses too) */
  run_tool (&r, "ipc-serve", "--size", "-1", path, NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_cmpstr (r.err, ==,
                   "memres ipc-serve: --size: invalid size \"-1\": expected a non-zero multiple "
                   "of 1KiB, in bytes with an optional B, KiB, MiB, GiB or TiB suffix (see "
                   "memres ipc-serve --help)\n");
  run_clear (&r);
  if (!mt_require_fake ("ipc-serve needs a driver with pools: the fake"))
    {
      g_rmdir (dir);
      return;
    }
  /* a SOCKET that names a file which is not a socket is a bad operand (2); the file stays */
  {
    g_autofree char *want = g_strdup_printf ("memres: %s exists and is not a socket\n", path);
    g_autofree char *kept = NULL;

    g_assert_true (g_file_set_contents (path, "mine", -1, NULL));
    run_tool (&r, "ipc-serve", "--size", "4KiB", "--count", "1", path, NULL);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_cmpstr (r.err, ==, want);
    g_assert_cmpstr (r.out, ==, "");
    run_clear (&r);
    /* ipc-attach too (it said "Connection refused", exit status 1, as for a missing server) */
    run_tool (&r, "ipc-attach", path, NULL);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_cmpstr (r.err, ==, want);
    g_assert_cmpstr (r.out, ==, "");
    run_clear (&r);
    g_assert_true (g_file_get_contents (path, &kept, NULL, NULL));
    g_assert_cmpstr (kept, ==, "mine");
    g_assert_cmpint (g_remove (path), ==, 0);
  }
  for (gsize i = 0; i < G_N_ELEMENTS (signals); i++)
    {
      const char *argv[] = { tool, "ipc-serve", "--size", "4KiB", path, NULL };
      g_autoptr (GError) error = NULL;
      GPid pid;
      int status, tries;

      g_assert_true (g_spawn_async (NULL, (char **) argv, NULL,
                                    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                                    NULL, &pid, &error));
      g_assert_no_error (error);
      for (tries = 0; tries < 500 && !g_file_test (path, G_FILE_TEST_EXISTS); tries++)
        g_usleep (10000);
      g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
      if (i == 0)
        {
          run_tool (&r, "ipc-serve", "--size", "4KiB", "--count", "1", path, NULL);
          assert_one_error_line (&r);
          g_assert_cmpint (r.status, ==, 1);
          g_assert_nonnull (strstr (r.err, "a server is already listening on"));
          g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
          run_clear (&r);
        }
      g_assert_cmpint (kill (pid, signals[i]), ==, 0);
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_spawn_close_pid (pid);
      g_assert_true (WIFEXITED (status));
      g_assert_cmpint (WEXITSTATUS (status), ==, 0);
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
    }
  g_rmdir (dir);
}

/* A connected UNIX socket to @path (a listener must be there). */
static int
connect_to (const char *path)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_strlcpy (addr.sun_path, path, sizeof addr.sun_path);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  return fd;
}

/* Peers that stop talking: ipc-serve gives up on a silent client after --timeout and serves
 * the next (which answers garbage), with one JSON document listing both failures; ipc-attach
 * gives up on a server that accepts and never answers. */
static void
test_ipc_silent_peers (void)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  g_autofree char *mute = g_build_filename (dir, "mute.sock", NULL);
  const char *argv[] = { tool, "ipc-serve", "--json", "--count", "2", "--timeout",
                         "1",  "--size",    "4KiB",   path,      NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int silent, garbage, listener, tries, out_fd, status;
  char chunk[4096];
  gssize n;
  GPid pid;
  Run r = { 0 };

  if (!mt_require_fake ("ipc-serve needs a driver with pools: the fake"))
    {
      g_rmdir (dir);
      return;
    }
  g_assert_true (g_spawn_async_with_pipes (NULL, (char **) argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDERR_TO_DEV_NULL,
                                           NULL, NULL, &pid, NULL, &out_fd, NULL, &error));
  g_assert_no_error (error);
  for (tries = 0; tries < 500 && !g_file_test (path, G_FILE_TEST_EXISTS); tries++)
    g_usleep (10000);
  silent = connect_to (path);  /* says nothing, stays connected */
  garbage = connect_to (path); /* waits in the backlog, then answers 'X' */
  g_assert_cmpint (write (garbage, "X", 1), ==, 1);
  while ((n = read (out_fd, chunk, sizeof chunk)) > 0)
    g_string_append_len (out, chunk, n);
  close (out_fd);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_spawn_close_pid (pid);
  g_test_message ("%s", out->str);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 1);
  assert_one_json_document (out->str);
  g_assert_nonnull (strstr (out->str, "\"served\": 0,"));
  g_assert_nonnull (strstr (out->str, "\"failed\": 2,"));
  g_assert_nonnull (strstr (out->str, "receiving from the peer: timed out (--timeout)"));
  g_assert_nonnull (strstr (out->str, "the client answered 0x58"));
  close (silent);
  close (garbage);

  /* a server that accepts nothing and never answers */
  listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_strlcpy (addr.sun_path, mute, sizeof addr.sun_path);
  g_assert_cmpint (bind (listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (listener, 4), ==, 0);
  run_tool (&r, "ipc-attach", "--timeout", "1", mute, NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "timed out"));
  assert_one_error_line (&r);
  run_clear (&r);
  /* nor does ipc-serve take the socket of another program that listens there */
  run_tool (&r, "ipc-serve", "--count", "1", mute, NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "another program listens on"));
  g_assert_true (g_file_test (mute, G_FILE_TEST_EXISTS));
  run_clear (&r);
  run_tool (&r, "ipc-attach", "--timeout", "-1", mute, NULL);
  g_assert_cmpint (r.status, ==, 2);
  run_clear (&r);
  close (listener);
  g_unlink (mute);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/tool/ipc-serve/not-shareable", test_ipc_serve_not_shareable);
  g_test_add_func ("/tool/ipc-serve/socket", test_ipc_serve_socket);
  g_test_add_func ("/tool/ipc/socket-paths", test_ipc_socket_paths);
  g_test_add_func ("/tool/ipc-serve/count", test_ipc_serve_count);
  g_test_add_func ("/tool/ipc/silent-peers", test_ipc_silent_peers);
  return g_test_run ();
}

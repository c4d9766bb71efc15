/* testutil-tool.c: running the `memres` command (MEMRES_TOOL) for the tool tests
 * (test-tool*.c) and the shape of what it prints. */
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

void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}

/* Runs `memres ARGS...` (@args NULL-terminated) with the test's environment, where @env, when
 * not NULL, sets variables: NULL-terminated NAME, VALUE pairs. */
void
run_toolv (Run *r, const char *const *env, const char *const *args)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_get_environ ();
  GError *error = NULL;
  int wait_status;

  g_assert_nonnull (tool);
  g_ptr_array_add (argv, (gpointer) tool);
  for (; *args != NULL; args++)
    g_ptr_array_add (argv, (gpointer) *args);
  g_ptr_array_add (argv, NULL);
  for (; env != NULL && env[0] != NULL; env += 2)
    envp = g_environ_setenv (envp, env[0], env[1], TRUE);

  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL,
                               &r->out, &r->err, &wait_status, &error));
  g_assert_no_error (error);
  g_assert_true (WIFEXITED (wait_status));
  r->status = WEXITSTATUS (wait_status);
}

/* Runs `memres ARGS...` (NULL-terminated) with the test's environment. */
void
run_tool (Run *r, ...)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  const char *arg;
  va_list ap;

  va_start (ap, r);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (args, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  run_toolv (r, NULL, (const char *const *) args->pdata);
}

/* The command's promise: an error is one line on stderr, whatever the input echoed in it. */
void
assert_one_error_line (const Run *r)
{
  const char *nl = strchr (r->err, '\n');

  g_assert_cmpint (r->status, !=, 0);
  g_assert_true (g_str_has_prefix (r->err, "memres"));
  g_assert_nonnull (nl);
  g_assert_cmpstr (nl + 1, ==, "");
  g_assert_true (g_utf8_validate (r->err, -1, NULL));
}

/* @out is one JSON document: it opens with "{" and no other top-level one starts after it
 * (memres's JSON indents every nested object, so only a top-level one starts a line with
 * "{"). */
void
assert_one_json_document (const char *out)
{
  g_assert_true (g_str_has_prefix (out, "{\n"));
  g_assert_null (strstr (out, "\n{"));
}

/* Runs `memres ARGS...` (NULL-terminated) with its stdout on @out_fd (-1: closed), stderr
 * collected; r->out is empty. */
void
run_tool_stdout (Run *r, int out_fd, ...)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GString) err = g_string_new (NULL);
  const char *arg;
  int pipe_fds[2], wait_status;
  char chunk[4096];
  ssize_t n;
  va_list ap;
  pid_t pid;

  g_assert_nonnull (tool);
  g_ptr_array_add (argv, (gpointer) tool);
  va_start (ap, out_fd);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  g_assert_cmpint (pipe (pipe_fds), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      dup2 (pipe_fds[1], 2);
      if (out_fd < 0)
        close (1);
      else
        dup2 (out_fd, 1);
      execv (tool, (char **) argv->pdata);
      _exit (127);
    }
  close (pipe_fds[1]);
  while ((n = read (pipe_fds[0], chunk, sizeof chunk)) > 0)
    g_string_append_len (err, chunk, n);
  close (pipe_fds[0]);
  g_assert_cmpint (waitpid (pid, &wait_status, 0), ==, pid);
  g_assert_true (WIFEXITED (wait_status));
  r->status = WEXITSTATUS (wait_status);
  r->out = g_strdup ("");
  r->err = g_string_free (g_steal_pointer (&err), FALSE);
}

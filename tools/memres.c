/* memres.c: the `memres` command: inspect kinds and devices, allocate by name. */
#include "memres-tool.h"

#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct
{
  const char *name;
  int (*run) (int argc, char **argv);
  const char *summary;
} commands[] = {
  { "kinds", memres_tool_kinds, "list every resource kind with its options" },
  { "info", memres_tool_info, "show the CUDA driver and devices" },
  { "alloc", memres_tool_alloc, "allocate a buffer by name, fill it and verify it" },
  { "resources", memres_tool_resources, "list the named resources of the config file" },
  { "replay", memres_tool_replay, "replay a log of the log adaptor against stacks" },
  { "trace", memres_tool_trace, "a log adaptor's logs as a Perfetto (Chrome) trace" },
  { "snapshot", memres_tool_snapshot, "what every layer of a resource holds, as JSON" },
  { "view", memres_tool_view, "a page to look at logs and snapshots (HTML, offline)" },
  { "ipc-serve", memres_tool_ipc_serve, "share a buffer of an ipc pool over a UNIX socket" },
  { "ipc-attach", memres_tool_ipc_attach, "import a shared buffer, verify it, write back" },
};

static void
print_usage (FILE *out)
{
  gsize i;

  fprintf (out, "Usage: memres COMMAND [OPTION...]\n\nCUDA memory resources by name.\n\n"
                "Commands:\n");
  for (i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf (out,
           "\nRun memres COMMAND --help for the options of a command; every command "
           "takes --json\n(memres --json COMMAND ... is the same as memres COMMAND --json ...).\n"
           "memres --version [--json] prints the version.\n");
}

/* TRUE when the command's options ask for JSON: errors found while parsing them (an unknown
 * option, a bad operand) are JSON too. */
static gboolean
wants_json (int argc, char **argv)
{
  int i;

  for (i = 1; i < argc && strcmp (argv[i], "--") != 0; i++)
    if (strcmp (argv[i], "--json") == 0 || strcmp (argv[i], "-j") == 0)
      return TRUE;
  return FALSE;
}

/* `memres --version`: "memres VERSION", or with --json the document {"version": "VERSION"}. */
static int
print_version (gboolean json)
{
  MemresJson doc;
  g_autofree char *text = NULL;

  if (!json)
    {
      g_print ("memres %s\n", memres_get_version ());
      return 0;
    }
  memres_json_init (&doc);
  memres_json_begin_object (&doc, NULL);
  memres_json_string (&doc, "version", memres_get_version ());
  memres_json_end_object (&doc);
  text = memres_json_finish (&doc);
  g_print ("%s", text);
  return 0;
}

/* The first error of a write to stdout (0: none yet), and whether stdout was closed when the
 * program started. */
static int stdout_errno;
static gboolean stdout_closed;

/* g_print()'s handler: GLib's own writes and flushes each text too, but forgets a failure. */
static void
print_stdout (const char *text)
{
  if ((fputs (text, stdout) == EOF || fflush (stdout) != 0) && stdout_errno == 0)
    stdout_errno = errno != 0 ? errno : EIO;
}

/* A standard descriptor that is closed gets /dev/null, so that no file the command opens (a
 * log, a socket) takes its number and receives what is meant for stdout or stderr. */
static void
guard_standard_fds (void)
{
  int fd;

  for (fd = 0; fd <= 2; fd++)
    if (fcntl (fd, F_GETFD) < 0 && errno == EBADF)
      {
        int null = open ("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);

        if (fd == 1)
          stdout_closed = TRUE;
        if (null >= 0 && null != fd)
          {
            dup2 (null, fd);
            close (null);
          }
      }
}

/* Every command's last step: what it printed must have reached stdout. A write, flush or
 * close that failed, or a stdout closed from the start, is one line on stderr and exit status
 * 1 (or the command's own status when it failed already). */
static int
finish_stdout (int status)
{
  int saved = stdout_errno;

  if (fflush (stdout) != 0 && saved == 0)
    saved = errno;
  if (ferror (stdout) && saved == 0)
    saved = EIO;
  if (fclose (stdout) != 0 && saved == 0)
    saved = errno;
  if (stdout_closed)
    saved = EBADF;
  if (saved == 0)
    return status;
  g_printerr ("memres: cannot write the standard output: %s\n", g_strerror (saved));
  return status != 0 ? status : 1;
}

/* GOption prints a command's --help and calls exit(0) itself, past finish_stdout(): checked here
 * then (it was exit status 0 with the help lost, `memres alloc --help > /dev/full`). */
static gboolean finished;

static void
finish_stdout_at_exit (void)
{
  if (!finished && finish_stdout (0) != 0)
    _exit (1);
}

static int
run_command (int argc, char **argv)
{
  gsize i;

  if (argc < 2)
    {
      print_usage (stderr);
      return 2;
    }
  /* `memres --json CMD ARGS...` is `memres CMD --json ARGS...` (once: a second --json in
   * the command's place is an unknown command) */
  if ((strcmp (argv[1], "--json") == 0 || strcmp (argv[1], "-j") == 0) && argc > 2)
    {
      char *flag = argv[1];

      argv[1] = argv[2];
      argv[2] = flag;
    }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0
      || strcmp (argv[1], "help") == 0)
    {
      print_usage (stdout);
      return 0;
    }
  if (strcmp (argv[1], "--version") == 0)
    {
      /* --json is its one option: anything else is refused, not ignored */
      for (i = 2; i < (gsize) argc; i++)
        if (strcmp (argv[i], "--json") != 0 && strcmp (argv[i], "-j") != 0)
          {
            memres_tool_set_json_errors (wants_json (argc, argv));
            return memres_tool_usage_error_input (
                NULL, "--version: unexpected argument \"%s\" (it takes only --json)", argv[i]);
          }
      return print_version (wants_json (argc, argv));
    }
  for (i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      {
        memres_tool_set_json_errors (wants_json (argc, argv));
        return commands[i].run (argc - 1, argv + 1);
      }

  {
    g_autofree char *shown = memres_tool_show_input (argv[1]);
    g_autoptr (GString) names = g_string_new (NULL);
    g_autofree char *message = NULL;

    /* every command of the table, as --help lists them */
    for (i = 0; i < G_N_ELEMENTS (commands); i++)
      g_string_append_printf (names, "%s%s", i > 0 ? ", " : "", commands[i].name);
    message = g_strdup_printf ("unknown command \"%s\" (commands: %s; see memres --help)", shown,
                               names->str);

    memres_tool_set_json_errors (wants_json (argc, argv));
    return memres_tool_usage_error (NULL, message);
  }
}

int
main (int argc, char **argv)
{
  int status;

  /* GLib's messages say "(memres:PID)", not the name of the command (the option parser would
   * take argv[0] of the command: "alloc") */
  g_set_prgname ("memres");
  setlocale (LC_ALL, "");
  guard_standard_fds ();
  g_set_print_handler (print_stdout);
  atexit (finish_stdout_at_exit);
  status = run_command (argc, argv);
  finished = TRUE;
  return finish_stdout (status);
}

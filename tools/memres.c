/* memres.c: the `memres` command: inspect kinds and devices, allocate by name. */
#include "memres-tool.h"

#include <locale.h>
#include <stdio.h>
#include <string.h>

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
  { "replay", memres_tool_replay, "replay a log of the log adaptor against a stack" },
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
           "takes --json\n(memres --json COMMAND ... is the same as memres COMMAND --json ...).\n");
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

int
main (int argc, char **argv)
{
  gsize i;

  setlocale (LC_ALL, "");
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
    return print_version (wants_json (argc, argv));
  for (i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      {
        memres_tool_set_json_errors (wants_json (argc, argv));
        return commands[i].run (argc - 1, argv + 1);
      }

  {
    g_autofree char *shown = memres_tool_show_input (argv[1]);
    g_autofree char *message
        = g_strdup_printf ("unknown command \"%s\" (commands: kinds, info, alloc, resources, "
                           "replay, ipc-serve, ipc-attach; see memres --help)",
                           shown);

    memres_tool_set_json_errors (wants_json (argc, argv));
    return memres_tool_usage_error (NULL, message);
  }
}

/* output.c: error reporting and formatting shared by the commands (the JSON writer is
 * sdk/json-writer.c, shared with the core's snapshots). */
#include "memres-tool.h"

#include <stdio.h>
#include <string.h>

/* The most bytes of one message line: messages quote the user's input, which the core and the
 * commands shorten, but GLib's option parser quotes it whole. */
#define LINE_MAX_BYTES 4096

/* @message made printable on one line (line breaks, terminal escapes, bytes that are not UTF-8
 * escaped), the way the core quotes user input. */
char *
memres_tool_one_line (const char *message)
{
  return memres_printable (message, LINE_MAX_BYTES);
}

const char *
memres_tool_error_code_name (const GError *error)
{
  static const char *const memres_codes[] = {
    "MEMRES_ERROR_FAILED",
    "MEMRES_ERROR_INVALID_ARGUMENT",
    "MEMRES_ERROR_NOT_FOUND",
    "MEMRES_ERROR_EXISTS",
    "MEMRES_ERROR_NOT_SUPPORTED",
    "MEMRES_ERROR_OUT_OF_MEMORY",
    "MEMRES_ERROR_CLOSED",
    "MEMRES_ERROR_NO_DRIVER",
    "MEMRES_ERROR_NO_DEVICE",
    "MEMRES_ERROR_WRONG_DEVICE",
    "MEMRES_ERROR_INVALID_DESCRIPTOR",
    "MEMRES_ERROR_PERMISSION_DENIED",
    "MEMRES_ERROR_FORKED",
  };
  static const char *const plugin_codes[] = {
    "MEMRES_PLUGIN_ERROR_MODULE",       "MEMRES_PLUGIN_ERROR_SYMBOL",
    "MEMRES_PLUGIN_ERROR_ABI_MISMATCH", "MEMRES_PLUGIN_ERROR_NAME_MISMATCH",
    "MEMRES_PLUGIN_ERROR_INIT_FAILED",
  };
  /* a file's errors (the -o FILE of trace, snapshot and view, an input that is missing) */
  static const char *const file_codes[] = {
    "G_FILE_ERROR_EXIST",  "G_FILE_ERROR_ISDIR",  "G_FILE_ERROR_ACCES", "G_FILE_ERROR_NAMETOOLONG",
    "G_FILE_ERROR_NOENT",  "G_FILE_ERROR_NOTDIR", "G_FILE_ERROR_NXIO",  "G_FILE_ERROR_NODEV",
    "G_FILE_ERROR_ROFS",   "G_FILE_ERROR_TXTBSY", "G_FILE_ERROR_FAULT", "G_FILE_ERROR_LOOP",
    "G_FILE_ERROR_NOSPC",  "G_FILE_ERROR_NOMEM",  "G_FILE_ERROR_MFILE", "G_FILE_ERROR_NFILE",
    "G_FILE_ERROR_BADF",   "G_FILE_ERROR_INVAL",  "G_FILE_ERROR_PIPE",  "G_FILE_ERROR_AGAIN",
    "G_FILE_ERROR_INTR",   "G_FILE_ERROR_IO",     "G_FILE_ERROR_PERM",  "G_FILE_ERROR_NOSYS",
    "G_FILE_ERROR_FAILED",
  };
  G_STATIC_ASSERT (G_N_ELEMENTS (file_codes) == G_FILE_ERROR_FAILED + 1);
  G_STATIC_ASSERT (G_N_ELEMENTS (memres_codes) == MEMRES_ERROR_FORKED + 1);
  G_STATIC_ASSERT (G_N_ELEMENTS (plugin_codes) == MEMRES_PLUGIN_ERROR_INIT_FAILED + 1);

  if (error->code < 0)
    return NULL;
  if (error->domain == MEMRES_ERROR && error->code < (gint) G_N_ELEMENTS (memres_codes))
    return memres_codes[error->code];
  if (error->domain == MEMRES_PLUGIN_ERROR && error->code < (gint) G_N_ELEMENTS (plugin_codes))
    return plugin_codes[error->code];
  if (error->domain == G_FILE_ERROR && error->code < (gint) G_N_ELEMENTS (file_codes))
    return file_codes[error->code];
  if (error->domain == MEMRES_CUDA_ERROR)
    {
      /* a CUDA error came from the loaded driver: its table names the CUresult */
      const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
      const char *name = NULL;

      if (drv != NULL && drv->cuGetErrorName ((CUresult) error->code, &name) == CUDA_SUCCESS)
        return name;
    }
  return NULL;
}

/* Set by main() when the command line asks for --json: errors then also go to stdout, as a
 * JSON object. */
static gboolean json_errors;

void
memres_tool_set_json_errors (gboolean enabled)
{
  json_errors = enabled;
}

/* The one line on stderr ("memres: MESSAGE" or "memres COMMAND: MESSAGE (see ...)"), and with
 * --json the same error as JSON on stdout: {"error": {"message", "domain", "code", "code_name",
 * "exit_status"}} (domain, code and code_name null when the error has no GError). Returns
 * @status. */
static int
report (const char *command, const char *message, const GError *error, int status)
{
  g_autofree char *text = memres_tool_one_line (message);

  if (command != NULL)
    g_printerr ("memres %s: %s (see memres %s --help)\n", command, text, command);
  else
    g_printerr ("memres: %s\n", text);
  if (json_errors)
    {
      g_autofree char *out = NULL;
      MemresJson json;

      memres_json_init (&json);
      memres_json_begin_object (&json, NULL);
      memres_json_begin_object (&json, "error");
      memres_json_string (&json, "message", message);
      memres_json_string (&json, "domain",
                          error != NULL ? g_quark_to_string (error->domain) : NULL);
      if (error != NULL)
        memres_json_int (&json, "code", error->code);
      else
        memres_json_string (&json, "code", NULL);
      memres_json_string (&json, "code_name",
                          error != NULL ? memres_tool_error_code_name (error) : NULL);
      memres_json_int (&json, "exit_status", status);
      memres_json_end_object (&json);
      memres_json_end_object (&json);
      out = memres_json_finish (&json);
      g_print ("%s", out);
    }
  return status;
}

int
memres_tool_failf (const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);
  return report (NULL, message, NULL, 1);
}

/* TRUE when @error is the failure of a plugin file on the search path to load: the loader's
 * own errors, and a kind the plugin registers that the core refuses (an invalid option schema,
 * a name already taken), which are the same error the listing of the path reports for the
 * file. */
static gboolean
is_plugin_failure (const GError *error)
{
  g_autoptr (GHashTable) failures = NULL;
  g_autoptr (GPtrArray) kinds = NULL;
  GHashTableIter iter;
  gpointer value;

  if (error->domain == MEMRES_PLUGIN_ERROR)
    return TRUE;
  if (!g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT)
      && !g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_EXISTS))
    return FALSE;
  kinds = memres_registry_list_kinds_full (&failures, NULL);
  if (kinds == NULL || failures == NULL)
    return FALSE;
  g_hash_table_iter_init (&iter, failures);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    {
      const GError *failure = value;

      if (failure->domain == error->domain && failure->code == error->code
          && strcmp (failure->message, error->message) == 0)
        return TRUE;
    }
  return FALSE;
}

int
memres_tool_fail (const GError *error)
{
  int status;

  /* a plugin that does not load is no fault of the command line: the status memres kinds
   * gives it; a bad spec, option value, size, pattern or named file is the user's input: a
   * usage error */
  if (is_plugin_failure (error))
    status = MEMRES_TOOL_EXIT_BROKEN_PLUGIN;
  else if (g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT)
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT)
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOTDIR)
           /* an -o FILE that cannot be one (sdk/file-writer.c): a directory; a FIFO, a device
            * or a socket; a loop of links; a name too long: as a missing directory is */
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_ISDIR)
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_INVAL)
           /* a log adaptor's path that is a FIFO without a reader */
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NXIO)
           /* a log's path or an -o FILE that another writer holds locked with flock() (a log
            * layer writing it, a sleep's file): EWOULDBLOCK */
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_AGAIN)
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_LOOP)
           || g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NAMETOOLONG))
    status = 2;
  else
    status = 1;
  return report (NULL, error->message, error, status);
}

/* An operand that starts like a negative number ("-1", "-2KiB", "-.5"): no option of a command
 * is a digit or a dot, so GLib would report it as an unknown option. */
static gboolean
looks_negative (const char *arg)
{
  return arg[0] == '-' && (g_ascii_isdigit (arg[1]) || arg[1] == '.');
}

gboolean
memres_tool_parse_options (GOptionContext *context, int *argc, char ***argv, GError **error)
{
  int i, n = 1;
  gboolean operands_only = FALSE, parsed;
  /* --help's "Usage:" line names the program as GLib knows it: "memres alloc [OPTION…] ...",
   * a line that runs (it was "memres [OPTION…] [SPEC|default] SIZE", an unknown command); the
   * name is "memres" again after, for GLib's messages ("(memres:PID)") */
  g_autofree char *usage_name = g_strdup_printf ("%s %s", g_get_prgname (), (*argv)[0]);
  g_autofree char *name = g_strdup (g_get_prgname ());

  /* GLib keeps what it does not know in argv, in order, and parses nothing after "--" */
  g_option_context_set_ignore_unknown_options (context, TRUE);
  g_set_prgname (usage_name);
  parsed = g_option_context_parse (context, argc, argv, error);
  g_set_prgname (name);
  if (!parsed)
    return FALSE;
  for (i = 1; i < *argc; i++)
    {
      char *arg = (*argv)[i];

      if (!operands_only && strcmp (arg, "--") == 0)
        {
          operands_only = TRUE;
          continue;
        }
      if (!operands_only && arg[0] == '-' && arg[1] != '\0' && !looks_negative (arg))
        {
          /* GLib's own message for it */
          g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_UNKNOWN_OPTION, "Unknown option %s",
                       arg);
          return FALSE;
        }
      (*argv)[n++] = arg;
    }
  *argc = n;
  return TRUE;
}

int
memres_tool_usage_error (const char *command, const char *message)
{
  return report (command, message, NULL, 2);
}

int
memres_tool_usage_error_input (const char *command, const char *format, const char *input)
{
  g_autofree char *shown = memres_tool_show_input (input);
  g_autofree char *message = g_strdup_printf (format, shown);

  return report (command, message, NULL, 2);
}

GStrv
memres_tool_flag_names (MemresMemoryFlags flags)
{
  static const struct
  {
    MemresMemoryFlags flag;
    const char *name;
  } names[] = {
    { MEMRES_MEMORY_DEVICE_ACCESSIBLE, "device-accessible" },
    { MEMRES_MEMORY_HOST_ACCESSIBLE, "host-accessible" },
    { MEMRES_MEMORY_IPC_ENABLED, "ipc-enabled" },
    { MEMRES_MEMORY_IMPORTED, "imported" },
    { MEMRES_MEMORY_RESIZABLE, "resizable" },
    { MEMRES_MEMORY_STREAM_ORDERED, "stream-ordered" },
    { MEMRES_MEMORY_MANAGED, "managed" },
    { MEMRES_MEMORY_GRAPH, "graph" },
    { MEMRES_MEMORY_FABRIC_HANDLES, "fabric-handles" },
  };
  GPtrArray *out = g_ptr_array_new ();
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (names); i++)
    if (flags & names[i].flag)
      g_ptr_array_add (out, g_strdup (names[i].name));
  g_ptr_array_add (out, NULL);
  return (GStrv) g_ptr_array_free (out, FALSE);
}

char *
memres_tool_format_bytes (guint64 bytes)
{
  return g_strdup_printf ("%" G_GUINT64_FORMAT " byte%s", bytes, bytes == 1 ? "" : "s");
}

gboolean
memres_tool_size_too_large (const char *text)
{
  static const char *const units[] = { "", "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
  const char *end = text;
  guint64 bytes;

  while (g_ascii_isdigit (*end))
    end++;
  if (end == text || memres_parse_size (text, &bytes, NULL))
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (units); i++)
    if (strcmp (end, units[i]) == 0)
      return TRUE;
  return FALSE;
}

char *
memres_tool_format_size (guint64 bytes)
{
  g_autofree char *human = NULL;
  char *nbsp;

  /* below 1 KiB GLib's IEC form is the byte count itself: no need to say it twice */
  if (bytes < 1024)
    return memres_tool_format_bytes (bytes);
  human = g_format_size_full (bytes, G_FORMAT_SIZE_IEC_UNITS);

  /* GLib puts a no-break space (U+00A0) before the unit, which a non-UTF-8 locale prints as
   * '?' ("64.0?MiB"); output is for terminals and scripts alike: a plain space. */
  while ((nbsp = strstr (human, "\xc2\xa0")) != NULL)
    {
      nbsp[0] = ' ';
      memmove (nbsp + 1, nbsp + 2, strlen (nbsp + 2) + 1);
    }
  return g_strdup_printf ("%s (%" G_GUINT64_FORMAT " bytes)", human, bytes);
}

/* cmd-snapshot.c: `memres snapshot SPEC|NAME [-a SIZE[:TAG]]... [--close N]... [-o FILE]`:
 * creates the resource (a spec, `@NAME`, or the NAME of a resource of the config file), makes the
 * allocations -a asks for (in order, on the legacy default stream, under TAG when given), closes
 * those --close names (their 1-based numbers), and prints memres_resource_snapshot() of the stack:
 * the JSON document of docs/snapshot.md. Public API only. */
#include "memres-tool.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* @operand as a spec: NAME of a resource of the config file becomes `@NAME`; anything else is
 * taken as it is (a spec, `@NAME`). */
static char *
resolve_operand (const char *operand)
{
  g_autofree char *spec = NULL;

  if (strpbrk (operand, ":>@,=") == NULL
      && (spec = memres_config_get_resource_spec (operand, NULL, NULL)) != NULL)
    return g_strconcat ("@", operand, NULL);
  return g_strdup (operand);
}

int
memres_tool_snapshot (int argc, char **argv)
{
  g_auto (GStrv) sizes = NULL;
  g_auto (GStrv) closes = NULL;
  g_autofree char *output = NULL;
  gboolean json_output = FALSE; /* the snapshot is JSON already: --json makes the errors JSON */
  GOptionEntry entries[] = {
    { "allocate", 'a', 0, G_OPTION_ARG_STRING_ARRAY, &sizes,
      "Allocate SIZE bytes before the snapshot (repeat it for more buffers); SIZE:TAG under "
      "that tag",
      "SIZE[:TAG]" },
    { "close", 'c', 0, G_OPTION_ARG_STRING_ARRAY, &closes,
      "Close the Nth allocation (1 for the first -a) before the snapshot", "N" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
      "Write the snapshot to FILE (default: the standard output)", "FILE" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output,
      "Print errors as JSON (the snapshot is JSON already)", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GPtrArray) buffers
      = g_ptr_array_new_with_free_func ((GDestroyNotify) memres_buffer_unref);
  g_autoptr (GPtrArray) tags = g_ptr_array_new (); /* the TAG of each -a, or NULL */
  g_autofree char *spec = NULL;
  g_autofree char *doc = NULL;
  g_autoptr (GError) logs_error = NULL;
  struct stat out_st;
  gboolean logs_ok;
  int status = 0;

  context = g_option_context_new ("SPEC|NAME - what every layer of a resource holds, as JSON");
  g_option_context_set_summary (
      context, "Creates the resource (a spec, @NAME, or the NAME of a resource of the config "
               "file), makes the allocations -a asks for, closes those --close names, and prints "
               "the snapshot of every layer (docs/snapshot.md): blocks, segments, holes, "
               "reserved, used and cached bytes, the largest free block and the fragmentation "
               "index, and the driver's free and total bytes of the device.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("snapshot", error->message);
  if (argc != 2)
    return memres_tool_usage_error ("snapshot", "expected one SPEC or NAME");

  for (guint i = 0; sizes != NULL && sizes[i] != NULL; i++)
    {
      char *tag = strchr (sizes[i], ':');
      g_autoptr (GError) tag_error = NULL;
      guint64 size;

      /* SIZE:TAG, the allocation under that tag */
      if (tag != NULL && !memres_tag_check_name (tag + 1, &tag_error))
        {
          g_autofree char *msg = g_strdup_printf ("-a %s: %s", sizes[i], tag_error->message);
          return memres_tool_usage_error ("snapshot", msg);
        }
      if (tag != NULL)
        *tag++ = '\0';
      g_ptr_array_add (tags, tag);
      if (memres_tool_size_too_large (sizes[i]))
        {
          g_autofree char *msg = g_strdup_printf (
              "-a %s: too large: at most %" G_GUINT64_FORMAT " bytes", sizes[i], G_MAXUINT64);
          return memres_tool_usage_error ("snapshot", msg);
        }
      if (strcmp (sizes[i], "max") == 0 || !memres_parse_size (sizes[i], &size, NULL))
        {
          g_autofree char *msg = g_strdup_printf ("-a %s: not a size (bytes, or with a suffix "
                                                  "KiB, MiB, GiB, TiB, PiB)",
                                                  sizes[i]);
          return memres_tool_usage_error ("snapshot", msg);
        }
    }
  for (guint i = 0; closes != NULL && closes[i] != NULL; i++)
    {
      guint n_sizes = sizes != NULL ? g_strv_length (sizes) : 0;
      guint64 n;

      if (n_sizes == 0 || !g_ascii_string_to_unsigned (closes[i], 10, 1, n_sizes, &n, NULL))
        {
          g_autofree char *msg
              = n_sizes == 0
                    ? g_strdup_printf ("--close %s: there is no allocation to close (no -a)",
                                       closes[i])
                    : g_strdup_printf ("--close %s: not the number of an allocation (1 to %u)",
                                       closes[i], n_sizes);
          return memres_tool_usage_error ("snapshot", msg);
        }
      /* the same allocation twice is a mistake in the command line, not a second close */
      for (guint k = 0; k < i; k++)
        if (g_ascii_strtoull (closes[k], NULL, 10) == n)
          {
            g_autofree char *msg = g_strdup_printf ("--close %" G_GUINT64_FORMAT " given twice", n);
            return memres_tool_usage_error ("snapshot", msg);
          }
    }

  spec = resolve_operand (argv[1]);
  /* a stack of named resources is read from the config file: -o naming that file would replace
   * it with the snapshot (it did), as view and trace refuse an -o FILE that is one of their
   * inputs */
  if (output != NULL && strcmp (output, "-") != 0 && strchr (spec, '@') != NULL)
    {
      g_autofree char *config = NULL;
      g_autoptr (GPtrArray) names = memres_config_list_resources (&config, NULL);
      struct stat config_st;

      if (config != NULL && stat (output, &out_st) == 0 && stat (config, &config_st) == 0
          && out_st.st_dev == config_st.st_dev && out_st.st_ino == config_st.st_ino)
        {
          g_autofree char *shown = memres_tool_show_input (output);
          g_autofree char *msg = g_strdup_printf (
              "-o \"%s\" is the config file that defines the named resources of the spec: "
              "refused, the snapshot would overwrite it",
              shown);

          return memres_tool_usage_error ("snapshot", msg);
        }
    }
  /* a log layer on the file the snapshot goes to would mix its lines into the document, or
   * write them to the file the snapshot then replaces: refused before it is created */
  if (output == NULL || strcmp (output, "-") == 0)
    {
      if (!memres_tool_check_log_not_stdout (
              spec, "the standard output, where the snapshot is written", &error))
        return memres_tool_fail (error);
    }
  else if (stat (output, &out_st) == 0
           && !memres_tool_check_log_paths (spec, &out_st, "the -o FILE of the snapshot", &error))
    return memres_tool_fail (error);
  mr = memres_resource_new (spec, &error);
  if (mr == NULL)
    return memres_tool_fail (error);
  for (guint i = 0; sizes != NULL && sizes[i] != NULL; i++)
    {
      guint64 size = 0;
      MemresBuffer *buf;

      const char *tag = g_ptr_array_index (tags, i);

      memres_parse_size (sizes[i], &size, NULL);
      if (tag != NULL && !memres_tag_push (tag, &error)) /* too many tags */
        return memres_tool_fail (error);
      buf = memres_resource_allocate (mr, size, NULL, &error);
      if (tag != NULL)
        memres_tag_pop (tag, NULL);
      if (buf == NULL)
        return memres_tool_fail (error);
      g_ptr_array_add (buffers, buf);
    }
  for (guint i = 0; closes != NULL && closes[i] != NULL; i++)
    {
      MemresBuffer *buf = g_ptr_array_index (buffers, g_ascii_strtoull (closes[i], NULL, 10) - 1);

      if (!memres_buffer_close (buf, NULL, &error))
        return memres_tool_fail (error);
    }
  doc = memres_resource_snapshot (mr, &error);
  if (doc == NULL)
    return memres_tool_fail (error);
  /* a log layer that lost lines fails the command, as for alloc and replay; the snapshot is
   * written all the same (with --json on the standard output, the error is the one document) */
  logs_ok = memres_tool_check_logs_complete (mr, &logs_error);
  if (output == NULL || strcmp (output, "-") == 0)
    {
      if (logs_ok || !json_output)
        g_print ("%s", doc);
    }
  else if (!memres_file_replace (output, doc, -1, &error))
    status = memres_tool_fail (error);
  if (!logs_ok && status == 0)
    status = memres_tool_fail (logs_error);
  return status;
}

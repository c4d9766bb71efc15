/* cmd-kinds.c: `memres kinds [--json] [KIND...]`: every kind on the plugin search path with
 * its description, plugin and option schema, and every plugin file there that does not load,
 * with the reason. */
#include "memres-tool.h"

#include <string.h>

/* A plugin's string (a description, an option's doc, default or choice) as printable text:
 * plugins are not trusted to give UTF-8 without control characters. */
#define KIND_TEXT_MAX 4096
static char *
plugin_text (const char *text)
{
  return memres_printable (text, KIND_TEXT_MAX);
}

/* "enum: a|b", "int: -10..100", "size", ... */
static char *
describe_type (const MemresOptionSpec *spec)
{
  const char *type = memres_option_type_to_string (spec->type);

  switch (spec->type)
    {
    case MEMRES_OPTION_ENUM:
      {
        g_autofree char *choices = g_strjoinv ("|", (char **) spec->choices);
        g_autofree char *shown = plugin_text (choices);
        return g_strdup_printf ("%s (%s)", type, shown);
      }
    case MEMRES_OPTION_INT:
    case MEMRES_OPTION_INT_LIST:
      return g_strdup_printf ("%s (%" G_GINT64_FORMAT "..%" G_GINT64_FORMAT ")", type, spec->min,
                              spec->max);
    default:
      return g_strdup (type);
    }
}

/* Prints @text (a plugin's, made printable) word-wrapped to 100 columns, each line indented by
 * @indent spaces. */
static void
print_wrapped (const char *raw, int indent)
{
  g_autofree char *text = plugin_text (raw);
  g_auto (GStrv) words = g_strsplit (text, " ", -1);
  int column = 0;
  guint i;

  for (i = 0; words[i] != NULL; i++)
    {
      int len = (int) strlen (words[i]);

      if (column > 0 && column + 1 + len > 100)
        {
          g_print ("\n");
          column = 0;
        }
      if (column == 0)
        {
          g_print ("%*s%s", indent, "", words[i]);
          column = indent + len;
        }
      else
        {
          g_print (" %s", words[i]);
          column += 1 + len;
        }
    }
  g_print ("\n");
}

static void
print_kind_text (MemresKind *kind)
{
  const char *plugin = memres_kind_get_plugin_name (kind);
  const char *path = memres_kind_get_plugin_path (kind);
  const MemresOptionSpec *options;
  guint n, i;
  int name_width = 0;

  g_print ("%s\n", memres_kind_get_name (kind));
  print_wrapped (memres_kind_get_description (kind), 2);
  if (plugin == NULL)
    g_print ("  plugin: registered by the application\n");
  else if (path == NULL)
    g_print ("  plugin: %s, embedded in libmemres\n", plugin);
  else
    {
      g_autofree char *shown = memres_tool_one_line (path);
      g_print ("  plugin: %s, %s\n", plugin, shown);
    }
  if (memres_kind_get_flags (kind) & MEMRES_KIND_ADAPTOR)
    g_print ("  adaptor: goes above another layer (%s>host)%s\n", memres_kind_get_name (kind),
             (memres_kind_get_flags (kind) & MEMRES_KIND_PASSES_ALLOCATIONS)
                 ? ", passes allocations through"
                 : "");
  /* segments, or says it has none (docs/segments.md) */
  g_print ("  segments: %s\n", (memres_kind_get_flags (kind) & MEMRES_KIND_SEGMENTS)
                                   ? "raises segment events; memres_lookup() finds its memory"
                                   : "none (no segment events; memres_lookup() does not find "
                                     "its memory)");

  options = memres_kind_get_options (kind, &n);
  if (n == 0)
    {
      g_print ("  options: none\n");
      return;
    }
  g_print ("  options:\n");
  for (i = 0; i < n; i++)
    name_width = MAX (name_width, (int) strlen (options[i].name));
  for (i = 0; i < n; i++)
    {
      g_autofree char *type = describe_type (&options[i]);

      if (options[i].default_value != NULL)
        {
          g_autofree char *shown = plugin_text (options[i].default_value);
          g_print ("    %-*s  %s, default \"%s\"\n", name_width, options[i].name, type, shown);
        }
      else
        g_print ("    %-*s  %s, unset by default\n", name_width, options[i].name, type);
      if (options[i].doc != NULL && options[i].doc[0] != '\0')
        print_wrapped (options[i].doc, 6 + name_width);
    }
}

static void
print_kind_json (MemresJson *json, MemresKind *kind)
{
  const MemresOptionSpec *options;
  guint n, i, j;

  memres_json_begin_object (json, NULL);
  memres_json_string (json, "name", memres_kind_get_name (kind));
  memres_json_string (json, "description", memres_kind_get_description (kind));
  memres_json_string (json, "plugin", memres_kind_get_plugin_name (kind));
  memres_json_bool (json, "adaptor", (memres_kind_get_flags (kind) & MEMRES_KIND_ADAPTOR) != 0);
  memres_json_bool (json, "segments", (memres_kind_get_flags (kind) & MEMRES_KIND_SEGMENTS) != 0);
  memres_json_string (json, "plugin_path", memres_kind_get_plugin_path (kind));
  memres_json_begin_array (json, "options");
  options = memres_kind_get_options (kind, &n);
  for (i = 0; i < n; i++)
    {
      memres_json_begin_object (json, NULL);
      memres_json_string (json, "name", options[i].name);
      memres_json_string (json, "type", memres_option_type_to_string (options[i].type));
      memres_json_string (json, "default", options[i].default_value);
      memres_json_string (json, "doc", options[i].doc);
      if (options[i].type == MEMRES_OPTION_ENUM)
        {
          memres_json_begin_array (json, "choices");
          for (j = 0; options[i].choices[j] != NULL; j++)
            memres_json_string (json, NULL, options[i].choices[j]);
          memres_json_end_array (json);
        }
      if (options[i].type == MEMRES_OPTION_INT || options[i].type == MEMRES_OPTION_INT_LIST)
        {
          memres_json_int (json, "min", options[i].min);
          memres_json_int (json, "max", options[i].max);
        }
      memres_json_end_object (json);
    }
  memres_json_end_array (json);
  memres_json_end_object (json);
}

static gint
compare_paths (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The paths of @failures (path -> GError), sorted. (transfer container) */
static GPtrArray *
sorted_paths (GHashTable *failures)
{
  GPtrArray *paths = g_ptr_array_new ();
  GHashTableIter iter;
  gpointer path;

  g_hash_table_iter_init (&iter, failures);
  while (g_hash_table_iter_next (&iter, &path, NULL))
    g_ptr_array_add (paths, path);
  g_ptr_array_sort (paths, compare_paths);
  return paths;
}

/* Two lines, not wrapped: messages hold paths, and grep finds a line. */
static void
print_failure_text (const char *path, const GError *error)
{
  const char *code = memres_tool_error_code_name (error);
  g_autofree char *shown_path = memres_tool_one_line (path);
  g_autofree char *message = memres_tool_one_line (error->message);

  g_print ("not loadable: %s\n", shown_path);
  if (code != NULL)
    g_print ("  %s: %s\n", code, message);
  else
    g_print ("  %s %d: %s\n", g_quark_to_string (error->domain), error->code, message);
}

static void
print_failure_json (MemresJson *json, const char *path, const GError *error)
{
  memres_json_begin_object (json, NULL);
  memres_json_string (json, "path", path);
  memres_json_string (json, "domain", g_quark_to_string (error->domain));
  memres_json_int (json, "code", error->code);
  memres_json_string (json, "code_name", memres_tool_error_code_name (error));
  memres_json_string (json, "message", error->message);
  memres_json_end_object (json);
}

static gboolean
same_kind (gconstpointer a, gconstpointer b)
{
  return strcmp (memres_kind_get_name ((MemresKind *) a), memres_kind_get_name ((MemresKind *) b))
         == 0;
}

int
memres_tool_kinds (int argc, char **argv)
{
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output, "Print JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) kinds = NULL;
  g_autoptr (GHashTable) failures = NULL;
  g_autoptr (GPtrArray) failed_paths = NULL;
  guint i;

  context = g_option_context_new ("[KIND...] - list resource kinds and their options");
  g_option_context_set_summary (
      context, "Lists every kind: the embedded ones and those of every plugin "
               "on the search path (MEMRES_PLUGIN_PATH, then the installed "
               "plugin directory); with KIND..., those kinds, each once, in "
               "the order first named. A plugin file there that does not load (built "
               "for another plugin ABI, without its entry point, failing its "
               "init, named like a kind embedded in libmemres, ...) is listed after the kinds as "
               "\"not loadable\", with "
               "the reason (with --json: in \"broken_plugins\", each with its "
               "path, error domain, code, code name and message).");
  g_option_context_set_description (
      context, "Exit status: 0 when every plugin file on the search path loaded; 3 when the "
               "listing is complete but a plugin file did not load (one line on stderr says "
               "how many), and when the plugin of a KIND named does not load; 1 when a KIND "
               "named cannot be found; 2 for a usage error.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("kinds", error->message);

  if (argc > 1)
    {
      kinds = g_ptr_array_new_with_free_func ((GDestroyNotify) memres_kind_unref);
      for (i = 1; i < (guint) argc; i++)
        {
          MemresKind *kind = memres_registry_lookup (argv[i], &error);
          if (kind == NULL)
            return memres_tool_fail (error);
          /* a kind named twice is listed once, where it was named first */
          if (g_ptr_array_find_with_equal_func (kinds, kind, same_kind, NULL))
            memres_kind_unref (kind);
          else
            g_ptr_array_add (kinds, kind);
        }
    }
  else
    {
      kinds = memres_registry_list_kinds_full (&failures, &error);
      if (kinds == NULL)
        return memres_tool_fail (error);
    }
  failed_paths = failures != NULL ? sorted_paths (failures) : g_ptr_array_new ();

  if (json_output)
    {
      MemresJson json;
      g_autofree char *out = NULL;
      g_auto (GStrv) path = memres_registry_get_search_path ();

      memres_json_init (&json);
      memres_json_begin_object (&json, NULL);
      memres_json_begin_array (&json, "search_path");
      for (i = 0; path[i] != NULL; i++)
        memres_json_string (&json, NULL, path[i]);
      memres_json_end_array (&json);
      memres_json_begin_array (&json, "kinds");
      for (i = 0; i < kinds->len; i++)
        print_kind_json (&json, g_ptr_array_index (kinds, i));
      memres_json_end_array (&json);
      /* only a listing of the whole path has it: KIND... fails on a broken plugin instead */
      if (failures != NULL)
        {
          memres_json_begin_array (&json, "broken_plugins");
          for (i = 0; i < failed_paths->len; i++)
            {
              const char *path = g_ptr_array_index (failed_paths, i);
              print_failure_json (&json, path, g_hash_table_lookup (failures, path));
            }
          memres_json_end_array (&json);
        }
      memres_json_end_object (&json);
      out = memres_json_finish (&json);
      g_print ("%s", out);
    }
  else
    {
      for (i = 0; i < kinds->len; i++)
        {
          if (i > 0)
            g_print ("\n");
          print_kind_text (g_ptr_array_index (kinds, i));
        }
      for (i = 0; i < failed_paths->len; i++)
        {
          const char *path = g_ptr_array_index (failed_paths, i);

          g_print ("\n");
          print_failure_text (path, g_hash_table_lookup (failures, path));
        }
    }

  if (failed_paths->len == 0)
    return 0;
  /* stderr only: with --json, stdout holds the one document above, which says it all */
  g_printerr ("memres: %u plugin file%s on the search path did not load (%s)\n", failed_paths->len,
              failed_paths->len == 1 ? "" : "s",
              json_output ? "see \"broken_plugins\"" : "listed after the kinds");
  return MEMRES_TOOL_EXIT_BROKEN_PLUGIN;
}

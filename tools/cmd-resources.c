/* cmd-resources.c: `memres resources`: the named resources of the config file (`@NAME` layers),
 * each with its spec, its description (when it has one) and where it is defined (FILE:LINE). */
#include "memres-tool.h"

int
memres_tool_resources (int argc, char **argv)
{
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output, "Print JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) names = NULL;
  g_autoptr (GPtrArray) specs = NULL;
  g_autoptr (GPtrArray) origins = NULL;
  g_autofree char *path = NULL;
  MemresJson json;
  guint i;

  context = g_option_context_new ("- list the named resources of the config file");
  g_option_context_set_summary (
      context, "The file is $MEMRES_CONFIG, else $XDG_CONFIG_HOME/memres/resources.conf, else "
               "memres/resources.conf in a system config dir ($XDG_CONFIG_DIRS, /etc/xdg). "
               "Each [NAME] group has spec=STACK and an optional description=TEXT (shown); a spec "
               "names it as @NAME.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("resources", error->message);
  if (argc != 1)
    return memres_tool_usage_error ("resources", "expected no operand");

  names = memres_config_list_resources_full (&path, &specs, &origins, &error);
  if (names == NULL)
    return memres_tool_fail (error);

  if (json_output)
    {
      memres_json_init (&json);
      memres_json_begin_object (&json, NULL);
      memres_json_string (&json, "file", path);
      memres_json_begin_array (&json, "resources");
    }
  else if (path == NULL && g_getenv ("MEMRES_CONFIG") != NULL)
    g_print ("no config file: MEMRES_CONFIG is set to the empty string: no config file is read\n");
  else if (path == NULL)
    g_print ("no config file: set MEMRES_CONFIG or write %s/memres/resources.conf\n",
             g_get_user_config_dir ());
  else
    {
      g_autofree char *shown = memres_tool_one_line (path);
      g_print ("%s: %u named resource%s\n", shown, names->len, names->len == 1 ? "" : "s");
    }

  for (i = 0; i < names->len; i++)
    {
      const char *name = g_ptr_array_index (names, i);
      const char *origin = g_ptr_array_index (origins, i);
      const char *spec = g_ptr_array_index (specs, i);
      g_autofree char *description = NULL;

      /* the file read again: it changed since the listing, or the name went away */
      if (!memres_config_get_resource_description (name, &description, &error))
        return memres_tool_fail (error);
      if (json_output)
        {
          memres_json_begin_object (&json, NULL);
          memres_json_string (&json, "name", name);
          memres_json_string (&json, "spec", spec);
          memres_json_string (&json, "description", description);
          memres_json_string (&json, "defined_at", origin);
          memres_json_end_object (&json);
        }
      else
        {
          g_autofree char *spec_shown = memres_tool_one_line (spec);
          g_autofree char *origin_shown = memres_tool_one_line (origin);

          g_print ("\n@%s\n  spec: %s\n", name, spec_shown);
          if (description != NULL)
            {
              g_autofree char *description_shown = memres_tool_one_line (description);
              g_print ("  description: %s\n", description_shown);
            }
          g_print ("  from: %s\n", origin_shown);
        }
    }
  if (json_output)
    {
      g_autofree char *out = NULL;

      memres_json_end_array (&json);
      memres_json_end_object (&json);
      out = memres_json_finish (&json);
      g_print ("%s", out);
    }
  return 0;
}

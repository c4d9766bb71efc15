/* logs.c: the command's side of a stack's `log` layers: a log that would write over a file the
 * command reads or writes (LOG of memres replay, the standard output where its report goes), found
 * from the spec before anything is created, and a log that lost lines, from the layers' counters
 * after the work. */
#include "memres-tool.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_KIND "log"

gboolean
memres_tool_check_log_paths (const char *spec, const struct stat *file, const char *what,
                             GError **error)
{
  g_autoptr (GVariant) layers = NULL;
  GVariantIter iter;
  GVariant *options;
  const char *kind;
  guint position = 0;

  /* a spec that does not parse is memres_resource_new()'s to report, with its words */
  layers = memres_spec_parse (spec, NULL);
  if (layers == NULL)
    return TRUE;
  g_variant_iter_init (&iter, layers);
  while (g_variant_iter_next (&iter, "(&s@a{say})", &kind, &options))
    {
      g_autofree char *path = NULL;
      struct stat st;

      position++;
      if (strcmp (kind, LOG_KIND) == 0 && g_variant_lookup (options, "path", "^ay", &path)
          && stat (path, &st) == 0 && st.st_dev == file->st_dev && st.st_ino == file->st_ino)
        {
          g_autofree char *shown = memres_tool_show_input (path);

          g_variant_unref (options);
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                       "layer %u (kind \"" LOG_KIND "\") would write its log to \"%s\", which "
                       "is %s: refused, nothing was created or written",
                       position, shown, what);
          return FALSE;
        }
      g_variant_unref (options);
    }
  return TRUE;
}

gboolean
memres_tool_check_log_not_stdout (const char *spec, const char *what, GError **error)
{
  struct stat st;

  /* among devices, only a terminal shows what is written to it: /dev/null mixes nothing */
  if (fstat (STDOUT_FILENO, &st) != 0 || (S_ISCHR (st.st_mode) && !isatty (STDOUT_FILENO)))
    return TRUE;
  return memres_tool_check_log_paths (spec, &st, what, error);
}

gboolean
memres_tool_check_logs_complete (MemresResource *mr, GError **error)
{
  MemresResource *layer;
  guint position = 1;

  for (layer = mr; layer != NULL; layer = memres_resource_get_upstream (layer), position++)
    {
      g_autoptr (GVariant) counters = NULL;
      GError *local = NULL;
      guint64 lost = 0, written = 0;
      const char *why = "";

      if (strcmp (memres_resource_get_kind_name (layer), LOG_KIND) != 0)
        continue;
      /* reading them writes what the layer still buffers */
      counters = memres_resource_get_counters (layer, &local);
      if (g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
        {
          g_clear_error (&local); /* a log of another build: it cannot say */
          continue;
        }
      if (counters == NULL)
        {
          g_propagate_error (error, local);
          return FALSE;
        }
      if (!g_variant_lookup (counters, "lines_lost", "t", &lost) || lost == 0)
        continue;
      g_variant_lookup (counters, "lines_written", "t", &written);
      g_variant_lookup (counters, "write_error", "&s", &why);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                   "layer %u (kind \"" LOG_KIND "\"): its log is incomplete: %" G_GUINT64_FORMAT
                   " of %" G_GUINT64_FORMAT " lines could not be written (%s)",
                   position, lost, lost + written, why);
      return FALSE;
    }
  return TRUE;
}

gboolean
memres_tool_output_is_input (const char *output, const char *input, const char *what, guint index,
                             const char *made, const char *noun, GError **error)
{
  struct stat out_st, in_st;
  g_autofree char *shown = NULL;

  if (output == NULL || strcmp (output, "-") == 0 || stat (output, &out_st) != 0
      || stat (input, &in_st) != 0 || out_st.st_dev != in_st.st_dev
      || out_st.st_ino != in_st.st_ino)
    return FALSE;
  shown = memres_tool_show_input (output);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "-o \"%s\" is %s %u: refused, the %s would overwrite the %s it is made from", shown,
               what, index, made, noun);
  return TRUE;
}

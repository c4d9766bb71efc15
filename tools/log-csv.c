/* log-csv.c: one line of the CSV log the `log` adaptor writes (plugins/log/log.c), read for
 * `memres replay`, `memres trace` and `memres view` (through log-walk.c): RMM's six columns, with
 * memres's extra actions (`out of memory`, `trim`, `sleep POLICY`, `wake POLICY`, `segment
 * mapped|grown|unmapping`) beside RMM's; fields quoted as RFC 4180 quotes them (the Tag, where
 * it holds a comma or a quote) read unquoted. */
#include "memres-tool.h"

#include <string.h>

/* Sets INVALID_ARGUMENT "LOG:LINE: why" (@log shown printable) and returns FALSE. */
gboolean
memres_tool_log_bad_line (GError **error, const char *log, guint line, const char *format, ...)
{
  g_autofree char *why = NULL;
  g_autofree char *shown = memres_tool_show_input (log);
  va_list args;

  va_start (args, format);
  why = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "%s:%u: %s", shown, line, why);
  return FALSE;
}

gboolean
memres_tool_log_header_ok (const char *line, gboolean *tagged, gboolean *backtrace)
{
  gsize n = strlen (MEMRES_LOG_HEADER);

  if (strncmp (line, MEMRES_LOG_HEADER, n) != 0)
    return FALSE;
  line += n;
  *backtrace = g_str_has_prefix (line, ",Backtrace");
  if (*backtrace)
    line += strlen (",Backtrace");
  *tagged = strcmp (line, ",Tag") == 0;
  return *tagged || line[0] == '\0';
}

/* The hex digit's value, or -1. */
static int
hex_digit (char c)
{
  return g_ascii_isxdigit (c) ? g_ascii_xdigit_value (c) : -1;
}

/* NULL when the Backtrace field @f is well formed, else why not (transfer full). */
static char *
check_backtrace (const char *f)
{
  guint frame = 1;
  gboolean empty = TRUE; /* the frame has no byte yet */

  if (f[0] == '\0')
    return NULL;
  for (const char *p = f;; p++)
    {
      if (*p == ';' || *p == '\0')
        {
          if (empty)
            return g_strdup_printf ("invalid Backtrace: frame %u is empty", frame);
          if (*p == '\0')
            return NULL;
          if (++frame > MEMRES_LOG_FRAMES_MAX)
            return g_strdup_printf ("invalid Backtrace: more than %d frames",
                                    MEMRES_LOG_FRAMES_MAX);
          empty = TRUE;
          continue;
        }
      empty = FALSE;
      if (*p == '%')
        {
          int hi = hex_digit (p[1]), lo = hi >= 0 ? hex_digit (p[2]) : -1;

          if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
            {
              g_autofree char *shown = memres_tool_show_input (f);
              return g_strdup_printf ("invalid Backtrace \"%s\": at byte %u of the field, '%%' "
                                      "not followed by two hex digits (of a byte other than 0)",
                                      shown, (guint) (p - f) + 1);
            }
          p += 2;
        }
    }
}

GStrv
memres_tool_log_frames (const char *field)
{
  GStrv frames;

  if (field == NULL || field[0] == '\0')
    return NULL;
  frames = g_strsplit (field, ";", -1);
  for (guint i = 0; frames[i] != NULL; i++)
    {
      char *w = frames[i];

      for (const char *r = frames[i]; *r != '\0'; r++)
        if (*r == '%' && hex_digit (r[1]) >= 0 && hex_digit (r[2]) >= 0)
          {
            *w++ = (char) (hex_digit (r[1]) << 4 | hex_digit (r[2]));
            r += 2;
          }
        else
          *w++ = *r;
      *w = '\0';
    }
  return frames;
}

static const struct
{
  const char *name;
  MemresLogAction action;
  const char *policy;
} actions[] = {
  { "allocate", MEMRES_LOG_ALLOCATE, NULL },
  { "free", MEMRES_LOG_FREE, NULL },
  { "allocate failure", MEMRES_LOG_ALLOCATE_FAILURE, NULL },
  { "free failure", MEMRES_LOG_FREE_FAILURE, NULL },
  { "out of memory", MEMRES_LOG_OUT_OF_MEMORY, NULL },
  { "trim", MEMRES_LOG_TRIM, NULL },
  { "sleep discard", MEMRES_LOG_SLEEP, "discard" },
  { "sleep backup", MEMRES_LOG_SLEEP, "backup" },
  { "sleep file", MEMRES_LOG_SLEEP, "file" },
  { "wake discard", MEMRES_LOG_WAKE, "discard" },
  { "wake backup", MEMRES_LOG_WAKE, "backup" },
  { "wake file", MEMRES_LOG_WAKE, "file" },
  { "segment mapped", MEMRES_LOG_SEGMENT_MAPPED, NULL },
  { "segment grown", MEMRES_LOG_SEGMENT_GROWN, NULL },
  { "segment unmapping", MEMRES_LOG_SEGMENT_UNMAPPING, NULL },
};

static gboolean
parse_hex (const char *text, guint64 *value)
{
  return g_str_has_prefix (text, "0x")
         && g_ascii_string_to_unsigned (text + 2, 16, 0, G_MAXUINT64, value, NULL);
}

/* Splits @line in place into its fields as RFC 4180 reads them: a field that starts with '"'
 * runs to its closing quote, a quote in it doubled (unquoted in place), and the closing quote
 * ends the line or comes before a comma; any other field runs to the next comma, but the last of
 * @want when @rest_last (the Tag) is the rest of the line, commas and all, as logs wrote a tag
 * before the log adaptor quoted it. Returns the count of fields (@want + 1: more than @want), or
 * 0 for a quoted field that is not one, *@bad its index and *@why what is wrong. */
static guint
split_fields (char *line, char **f, guint want, gboolean rest_last, guint *bad, char **why)
{
  char *p = line;
  guint n = 0;

  for (;;)
    {
      if (n == want)
        return want + 1; /* a comma after the last field */
      f[n++] = p;
      if (*p == '"')
        {
          char *w = p, *r = p + 1;

          for (;; r++)
            {
              if (*r == '\0')
                {
                  *bad = n - 1;
                  *why = g_strdup ("a quoted field without its closing quote");
                  return 0;
                }
              if (*r == '"' && *++r != '"')
                break;
              *w++ = *r;
            }
          if (*r != '\0' && *r != ',')
            {
              *bad = n - 1;
              *why = g_strdup_printf ("'%c' after its closing quote (a comma or the end of the "
                                      "line expected)",
                                      g_ascii_isprint (*r) ? *r : '?');
              return 0;
            }
          *w = '\0';
          if (*r == '\0')
            return n;
          p = r + 1;
          continue;
        }
      if (rest_last && n == want)
        return n;
      if ((p = strchr (p, ',')) == NULL)
        return n;
      *p++ = '\0';
    }
}

gboolean
memres_tool_parse_log_line (char *line, gboolean tagged, gboolean backtrace, MemresLogLine *out,
                            char **why)
{
  guint want = 6 + (tagged ? 1 : 0) + (backtrace ? 1 : 0);
  char *f[8];
  guint n, bad = 0;
  g_autofree char *shown = NULL;

  /* no field the log adaptor writes holds a comma or a quote but the Tag, the last (a tag's
   * name is any printable UTF-8), which it quotes then; a field quoted by another writer (a
   * spreadsheet that saved the log) is read as well */
  if ((n = split_fields (line, f, want, tagged, &bad, why)) == 0)
    {
      static const char *const names[]
          = { "Thread", "Time", "Action", "Pointer", "Size", "Stream" };
      g_autofree char *what = g_steal_pointer (why);

      *why = g_strdup_printf ("invalid %s: %s",
                              bad < G_N_ELEMENTS (names)                 ? names[bad]
                              : bad == G_N_ELEMENTS (names) && backtrace ? "Backtrace"
                                                                         : "Tag",
                              what);
      return FALSE;
    }
  if (n != want)
    {
      *why = g_strdup_printf ("expected %u fields (" MEMRES_LOG_HEADER "%s%s), found %s%u", want,
                              backtrace ? ",Backtrace" : "", tagged ? ",Tag" : "",
                              n > want ? "more than " : "", n > want ? want : n);
      return FALSE;
    }
  out->thread = f[0];
  out->time = f[1];
  out->pointer_text = f[3];
  out->stream_text = f[5];
  out->backtrace = backtrace ? f[6] : "";
  out->tag = tagged ? f[backtrace ? 7 : 6] : "";
  if (backtrace && (*why = check_backtrace (out->backtrace)) != NULL)
    return FALSE;
  if (!parse_hex (f[3], &out->pointer))
    {
      shown = memres_tool_show_input (f[3]);
      *why = g_strdup_printf ("invalid Pointer \"%s\" (expected 0x...)", shown);
      return FALSE;
    }
  if (!g_ascii_string_to_unsigned (f[4], 10, 0, G_MAXSSIZE, &out->size, NULL))
    {
      shown = memres_tool_show_input (f[4]);
      *why = g_strdup_printf ("invalid Size \"%s\" (expected a decimal count of bytes from 0 to "
                              "%" G_GSSIZE_FORMAT ")",
                              shown, G_MAXSSIZE);
      return FALSE;
    }
  /* the Stream as the log adaptor and RMM write it (0x0 for none): replay --threads makes a
   * stream of each, by its text; trace and view show it */
  if (!parse_hex (f[5], &out->stream))
    {
      shown = memres_tool_show_input (f[5]);
      *why = g_strdup_printf ("invalid Stream \"%s\" (expected 0x...)", shown);
      return FALSE;
    }
  if (f[0][0] == '\0')
    {
      *why = g_strdup ("empty Thread");
      return FALSE;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (actions); i++)
    if (strcmp (f[2], actions[i].name) == 0)
      {
        out->action = actions[i].action;
        out->action_name = actions[i].name;
        out->policy = actions[i].policy;
        return TRUE;
      }
  shown = memres_tool_show_input (f[2]);
  *why = g_strdup_printf ("invalid Action \"%s\" (allocate, free, allocate failure, free "
                          "failure, out of memory, trim, sleep or wake followed by discard, "
                          "backup or file, segment mapped, segment grown or segment unmapping)",
                          shown);
  return FALSE;
}

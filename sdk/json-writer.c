/* memres - CUDA memory resources
 * json-writer.c: the small JSON writer of json-writer.h (compiled into libmemres and into the
 * `memres` command). */
#include "json-writer.h"

#include <math.h>

void
memres_json_init (MemresJson *json)
{
  json->str = g_string_new (NULL);
  json->depth = 0;
  json->first = TRUE;
}

char *
memres_json_finish (MemresJson *json)
{
  g_string_append_c (json->str, '\n');
  return g_string_free (json->str, FALSE);
}

/* @text as a JSON string. Bytes that are not UTF-8 (plugins' strings, paths) become the
 * six characters `\\xNN` (a backslash in the decoded string, as the text output shows them),
 * so that the output is always valid JSON; control characters (C0, DEL, C1) are escaped. */
void
memres_json_append_string (GString *str, const char *text)
{
  const char *p;
  gsize len;

  g_string_append_c (str, '"');
  for (p = text; *p != '\0'; p += len)
    {
      gunichar c = (guchar) *p;

      len = 1;
      if (c >= 0x80)
        {
          c = g_utf8_get_char_validated (p, -1);
          if (c == (gunichar) -1 || c == (gunichar) -2)
            {
              g_string_append_printf (str, "\\\\x%02x", (guchar) *p);
              continue;
            }
          len = (gsize) (g_utf8_next_char (p) - p);
        }
      if (c == '"' || c == '\\')
        g_string_append_printf (str, "\\%c", (char) c);
      else if (c == '\n')
        g_string_append (str, "\\n");
      else if (c == '\t')
        g_string_append (str, "\\t");
      else if (c < 0x20 || (c >= 0x7f && c < 0xa0))
        g_string_append_printf (str, "\\u%04x", c);
      else
        g_string_append_len (str, p, (gssize) len);
    }
  g_string_append_c (str, '"');
}

/* Starts a value: the separator, the indentation and the key when inside an object. */
static void
begin_value (MemresJson *json, const char *key)
{
  if (json->depth > 0)
    {
      if (!json->first)
        g_string_append_c (json->str, ',');
      g_string_append_c (json->str, '\n');
      g_string_append_printf (json->str, "%*s", (int) json->depth * 2, "");
    }
  if (key != NULL)
    {
      memres_json_append_string (json->str, key);
      g_string_append (json->str, ": ");
    }
  json->first = FALSE;
}

static void
open_container (MemresJson *json, const char *key, char bracket)
{
  begin_value (json, key);
  g_string_append_c (json->str, bracket);
  json->depth++;
  json->first = TRUE;
}

static void
close_container (MemresJson *json, char bracket)
{
  gboolean empty = json->first;

  json->depth--;
  if (!empty)
    {
      g_string_append_c (json->str, '\n');
      g_string_append_printf (json->str, "%*s", (int) json->depth * 2, "");
    }
  g_string_append_c (json->str, bracket);
  json->first = FALSE;
}

void
memres_json_begin_object (MemresJson *json, const char *key)
{
  open_container (json, key, '{');
}

void
memres_json_end_object (MemresJson *json)
{
  close_container (json, '}');
}

void
memres_json_begin_array (MemresJson *json, const char *key)
{
  open_container (json, key, '[');
}

void
memres_json_end_array (MemresJson *json)
{
  close_container (json, ']');
}

void
memres_json_string (MemresJson *json, const char *key, const char *value)
{
  begin_value (json, key);
  if (value == NULL)
    g_string_append (json->str, "null");
  else
    memres_json_append_string (json->str, value);
}

void
memres_json_int (MemresJson *json, const char *key, gint64 value)
{
  begin_value (json, key);
  g_string_append_printf (json->str, "%" G_GINT64_FORMAT, value);
}

void
memres_json_uint (MemresJson *json, const char *key, guint64 value)
{
  begin_value (json, key);
  g_string_append_printf (json->str, "%" G_GUINT64_FORMAT, value);
}

void
memres_json_bool (MemresJson *json, const char *key, gboolean value)
{
  begin_value (json, key);
  g_string_append (json->str, value ? "true" : "false");
}

void
memres_json_double (MemresJson *json, const char *key, double value)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];

  begin_value (json, key);
  if (isnan (value) || isinf (value))
    g_string_append (json->str, "null");
  else
    g_string_append (json->str, g_ascii_formatd (buf, sizeof buf, "%.6g", value));
}

void
memres_json_hex (MemresJson *json, const char *key, guint64 value)
{
  begin_value (json, key);
  g_string_append_printf (json->str, "\"0x%" G_GINT64_MODIFIER "x\"", value);
}

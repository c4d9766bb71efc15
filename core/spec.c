/* memres - CUDA memory resources
 * spec.c: the grammar of one layer of a spec string, `KIND[:KEY=VALUE[,KEY=VALUE]...]` (a
 * backslash in a value takes the next character literally), and the value parsers. Stacks of
 * layers are stack.c's. */
#include "memres-private.h"

#include <errno.h>
#include <string.h>

#define SIZE_SYNTAX                                                                                \
  "expected a non-negative whole number of bytes with an optional B, KiB, MiB, GiB, TiB or PiB "   \
  "suffix, or max"

/* TRUE when @name matches [a-z][a-z0-9_]* (option keys: any length). */
gboolean
_memres_key_is_valid (const char *name)
{
  return name != NULL && g_ascii_islower (name[0])
         && name[strspn (name, "abcdefghijklmnopqrstuvwxyz0123456789_")] == '\0';
}

/* TRUE when @name matches [a-z][a-z0-9_]* and fits MEMRES_KIND_NAME_MAX. */
gboolean
_memres_kind_name_is_valid (const char *name)
{
  return _memres_key_is_valid (name) && strlen (name) < MEMRES_KIND_NAME_MAX;
}

/* MEMRES_ERROR_INVALID_ARGUMENT "invalid spec \"SPEC\": " and the message @format makes, @spec
 * made printable (_memres_show_input()); returns FALSE. */
gboolean
_memres_set_spec_error (GError **error, const char *spec, const char *format, ...)
{
  g_autofree char *shown = _memres_show_input (spec);
  g_autofree char *why = NULL;
  va_list args;

  va_start (args, format);
  why = g_strdup_vprintf (format, args);
  va_end (args);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "invalid spec \"%s\": %s", shown,
               why);
  return FALSE;
}

/* _memres_kind_name_is_valid(), setting MEMRES_ERROR_INVALID_ARGUMENT with the rule when not.
 * @name may be NULL (invalid). */
gboolean
_memres_kind_name_check (const char *name, GError **error)
{
  g_autofree char *shown = NULL;

  if (_memres_kind_name_is_valid (name))
    return TRUE;
  shown = _memres_show_input (name);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "invalid kind name \"%s\": kind names match [a-z][a-z0-9_]* and are at most "
               "%d characters",
               shown, MEMRES_KIND_NAME_MAX - 1);
  return FALSE;
}

/* Parses the decimal digits at @text, overflow-checked; returns the end in @end. */
static gboolean
parse_digits (const char *text, guint64 *value, const char **end)
{
  if (!g_ascii_isdigit (*text))
    return FALSE;
  errno = 0;
  *value = g_ascii_strtoull (text, (char **) end, 10);
  return errno == 0;
}

/* @text split at every @separator (with @escapes, at every one that no backslash escapes: the
 * pieces keep their escapes), like g_strsplit() with a one-character separator, but in time
 * linear in the length of @text under AddressSanitizer too (its strstr() interceptor, which
 * g_strsplit() calls once per piece, measures the rest of the string every time: a megabyte of
 * user input with a separator every other byte took minutes). */
GStrv
_memres_split (const char *text, char separator, gboolean escapes)
{
  GPtrArray *parts = g_ptr_array_new ();
  const char *start = text;

  for (const char *p = text; *p != '\0'; p++)
    {
      if (escapes && *p == '\\' && p[1] != '\0')
        p++;
      else if (*p == separator)
        {
          g_ptr_array_add (parts, g_strndup (start, (gsize) (p - start)));
          start = p + 1;
        }
    }
  g_ptr_array_add (parts, g_strdup (start));
  g_ptr_array_add (parts, NULL);
  return (GStrv) g_ptr_array_free (parts, FALSE);
}

/* @text with `\`, `,` and `>` escaped by a backslash, as values are written in specs. */
char *
_memres_escape_value (const char *text)
{
  GString *str = g_string_sized_new (strlen (text) + 8);

  for (const char *p = text; *p != '\0'; p++)
    {
      if (*p == '\\' || *p == ',' || *p == '>')
        g_string_append_c (str, '\\');
      g_string_append_c (str, *p);
    }
  return g_string_free (str, FALSE);
}

/* The reverse of _memres_escape_value() on the first @len bytes of @text (a lone trailing
 * backslash is kept). */
char *
_memres_unescape (const char *text, gsize len)
{
  char *out = g_malloc (len + 1);
  gsize i, n = 0;

  for (i = 0; i < len; i++)
    {
      if (text[i] == '\\' && i + 1 < len)
        i++;
      out[n++] = text[i];
    }
  out[n] = '\0';
  return out;
}

/* The error of a size that does not parse (@too_large: digits beyond 64 bits); returns FALSE. */
static gboolean
size_error (const char *text, gboolean too_large, GError **error)
{
  g_autofree char *shown = _memres_show_input (text);

  if (too_large)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                 "size \"%s\" is too large: at most %" G_GUINT64_FORMAT " bytes", shown,
                 G_MAXUINT64);
  else
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                 "invalid size \"%s\": " SIZE_SYNTAX, shown);
  return FALSE;
}

/* Parses a size: plain bytes, or with a B/KiB/MiB/GiB/TiB/PiB suffix, or `max` (G_MAXUINT64).
 * Sets MEMRES_ERROR_INVALID_ARGUMENT on anything else, including negative numbers, exponents
 * and results that do not fit in 64 bits. */
gboolean
_memres_parse_size (const char *text, guint64 *bytes, GError **error)
{
  static const struct
  {
    const char *suffix;
    guint shift;
  } units[] = { { "", 0 },     { "B", 0 },    { "KiB", 10 }, { "MiB", 20 },
                { "GiB", 30 }, { "TiB", 40 }, { "PiB", 50 } };
  guint64 value;
  const char *end;
  gsize i;

  g_return_val_if_fail (text != NULL, FALSE);

  if (strcmp (text, "max") == 0)
    {
      *bytes = G_MAXUINT64;
      return TRUE;
    }
  if (!parse_digits (text, &value, &end))
    return size_error (text, g_ascii_isdigit (text[0]), error);
  for (i = 0; i < G_N_ELEMENTS (units); i++)
    {
      if (strcmp (end, units[i].suffix) != 0)
        continue;
      if (units[i].shift > 0 && value > (G_MAXUINT64 >> units[i].shift))
        return size_error (text, TRUE, error);
      *bytes = value << units[i].shift;
      return TRUE;
    }
  return size_error (text, FALSE, error);
}

/**
 * memres_parse_size:
 * @text: a size as written in spec strings: bytes, optionally with a `B`, `KiB`, `MiB`, `GiB`,
 *   `TiB` or `PiB` (since 2.0) suffix, or `max`
 * @bytes: (out): return location for the size in bytes (`max` is `G_MAXUINT64`)
 * @error: return location for a #GError, or %NULL
 *
 * Parses a size the way the values of %MEMRES_OPTION_SIZE options are parsed, for
 * applications that read sizes from their own configuration or command line. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for anything else: a sign, a fraction, an exponent, an
 * unknown suffix, a value that does not fit in 64 bits.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_parse_size (const char *text, guint64 *bytes, GError **error)
{
  g_return_val_if_fail (text != NULL, FALSE);
  g_return_val_if_fail (bytes != NULL, FALSE);

  return _memres_parse_size (text, bytes, error);
}

/* Parses true/false, yes/no, on/off, 1/0 (case-insensitive). */
gboolean
_memres_parse_bool (const char *text, gboolean *value, GError **error)
{
  /* each false word before its true one: the index's parity is the value */
  static const char *const words[] = { "false", "true", "no", "yes", "off", "on", "0", "1" };
  g_autofree char *shown = NULL;
  gsize i;

  g_return_val_if_fail (text != NULL, FALSE);

  for (i = 0; i < G_N_ELEMENTS (words); i++)
    if (g_ascii_strcasecmp (text, words[i]) == 0)
      {
        *value = i % 2 == 1;
        return TRUE;
      }
  shown = _memres_show_input (text);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "invalid boolean \"%s\": expected true, false, yes, no, on, off, 1 or 0", shown);
  return FALSE;
}

/* Parses a signed decimal integer within @min..@max. */
gboolean
_memres_parse_int (const char *text, gint64 min, gint64 max, gint64 *value, GError **error)
{
  g_autofree char *shown = NULL;
  gboolean negative;
  guint64 magnitude;
  const char *end;

  g_return_val_if_fail (text != NULL, FALSE);

  negative = text[0] == '-';
  if (!parse_digits (text + negative, &magnitude, &end) || *end != '\0')
    {
      shown = _memres_show_input (text);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "invalid integer \"%s\": expected a decimal integer from %" G_GINT64_FORMAT
                   " to %" G_GINT64_FORMAT,
                   shown, min, max);
      return FALSE;
    }
  /* -2^63 is the one magnitude beyond G_MAXINT64 that fits */
  if (magnitude <= (guint64) G_MAXINT64 + negative)
    {
      gint64 v = negative ? (gint64) (0 - magnitude) : (gint64) magnitude;

      if (v >= min && v <= max)
        {
          *value = v;
          return TRUE;
        }
    }
  shown = _memres_show_input (text);
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
               "integer %s is out of range: expected %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT,
               shown, min, max);
  return FALSE;
}

/* Splits @spec (one layer) into the kind name and its KEY=VALUE pairs (in order, unvalidated
 * beyond the syntax: keys must be names, each item must hold `=`; items are separated by the
 * commas no backslash escapes; values are returned unescaped). */
gboolean
_memres_spec_parse (const char *spec, char **kind, GPtrArray **keys, GPtrArray **values,
                    GError **error)
{
  const char *colon;
  g_autofree char *name = NULL;
  g_autoptr (GPtrArray) k = NULL;
  g_autoptr (GPtrArray) v = NULL;
  g_auto (GStrv) items = NULL;
  guint i;

  g_return_val_if_fail (spec != NULL, FALSE);

  colon = strchr (spec, ':');
  name = g_strndup (spec, colon != NULL ? (gsize) (colon - spec) : strlen (spec));
  if (name[0] == '\0')
    return _memres_set_spec_error (error, spec, "it names no kind (expected KIND[:KEY=VALUE,...])");
  if (!_memres_kind_name_check (name, error))
    return FALSE;
  if (colon != NULL && colon[1] == '\0')
    return _memres_set_spec_error (error, spec, "empty option list after ':' (expected KEY=VALUE)");

  k = g_ptr_array_new_with_free_func (g_free);
  v = g_ptr_array_new_with_free_func (g_free);
  /* without a colon, no items */
  items = colon != NULL ? _memres_split (colon + 1, ',', TRUE) : g_new0 (char *, 1);
  for (i = 0; items[i] != NULL; i++)
    {
      const char *item = items[i];
      const char *eq = strchr (item, '=');
      g_autofree char *key = eq != NULL ? g_strndup (item, (gsize) (eq - item)) : NULL;

      if (item[0] == '\0')
        return _memres_set_spec_error (error, spec, "empty option (expected KEY=VALUE)");
      /* no '=' (no key), or a key that is no name */
      if (!_memres_key_is_valid (key))
        {
          g_autofree char *shown = _memres_show_input (eq != NULL ? key : item);

          return _memres_set_spec_error (
              error, spec,
              eq != NULL ? "invalid key \"%s\" (keys match [a-z][a-z0-9_]*)"
                         : "option \"%s\" has no value (missing '=', expected KEY=VALUE)",
              shown);
        }
      g_ptr_array_add (k, g_steal_pointer (&key));
      g_ptr_array_add (v, _memres_unescape (eq + 1, strlen (eq + 1)));
    }

  *kind = g_steal_pointer (&name);
  *keys = g_steal_pointer (&k);
  *values = g_steal_pointer (&v);
  return TRUE;
}

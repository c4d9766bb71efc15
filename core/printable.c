/* memres - CUDA memory resources
 * printable.c: user input made fit to quote in a message: one line of printable text, and
 * short. Input of any size ends up in messages that are printed on terminals and logged; the
 * memres command quotes the same way (memres_printable()). */
#include "memres-private.h"

#include <string.h>

/* The escape of @ch (-1: the byte @byte, which is not UTF-8) in @buf, or NULL when @ch prints
 * as it is. */
static const char *
escape_char (gunichar ch, guchar byte, char buf[8])
{
  static const char *const named[] = { ['\t'] = "\\t", ['\n'] = "\\n", ['\r'] = "\\r" };

  if (ch < G_N_ELEMENTS (named) && named[ch] != NULL)
    return named[ch];
  if (ch == (gunichar) -1 || ch < 0x20 || ch == 0x7f)
    g_snprintf (buf, 8, "\\x%02x", ch == (gunichar) -1 ? byte : ch);
  else if (ch >= 0x80 && ch < 0xa0) /* C1 controls: U+009B starts a terminal escape */
    g_snprintf (buf, 8, "\\u%04x", ch);
  else
    return NULL;
  return buf;
}

/**
 * memres_printable:
 * @text: (nullable): user input, any bytes
 * @max_bytes: the most bytes of @text's printable form to keep
 *
 * @text as one line of printable UTF-8: line breaks and tabs become `\n`, `\r`, `\t`, other
 * control characters `\xNN` (C1 controls `\u00NN`), bytes that are not UTF-8 `\xNN`; the rest,
 * quotes and backslashes included, stays as it is, so that a message about input that is short
 * and printable reads exactly as before. When the printable form is longer than @max_bytes, it
 * is cut after the last whole character or escape that fits and "... (N bytes)" is appended,
 * N the length of @text in bytes; nothing past the cut is escaped or copied. %NULL gives
 * "(null)". The error messages of memres quote each piece of user input (a spec, a kind name,
 * an option value) as memres_printable (text, %MEMRES_INPUT_SHOWN_MAX). Thread-safe.
 *
 * Returns: (transfer full): the printable form; free with `g_free`
 *
 * Since: 1.2
 */
char *
memres_printable (const char *text, gsize max_bytes)
{
  GString *out;
  const char *p;
  gsize len;

  if (text == NULL)
    return g_strdup ("(null)");
  out = g_string_sized_new (MIN (max_bytes, 256) + 24);
  for (p = text; *p != '\0'; p += len)
    {
      gunichar ch = (guchar) *p;
      const char *piece, *escaped;
      char buf[8];
      gsize n;

      len = 1;
      if (ch >= 0x80)
        {
          ch = g_utf8_get_char_validated (p, -1);
          if (ch == (gunichar) -2) /* cut short by the end of @text */
            ch = (gunichar) -1;
          if (ch != (gunichar) -1)
            len = (gsize) (g_utf8_next_char (p) - p);
        }
      escaped = escape_char (ch, (guchar) *p, buf);
      piece = escaped != NULL ? escaped : p;
      n = escaped != NULL ? strlen (escaped) : len;
      if (out->len + n > max_bytes)
        {
          g_string_append_printf (out, "... (%" G_GSIZE_FORMAT " bytes)", strlen (text));
          break;
        }
      g_string_append_len (out, piece, (gssize) n);
    }
  return g_string_free (out, FALSE);
}

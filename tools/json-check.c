/* json-check.c: whether a text is one JSON value (RFC 8259) and nothing else, for the snapshots
 * `memres view` puts in its page as they are: a recursive descent that builds nothing, nesting
 * bounded; and the members of a JSON object, each name and value as the text holds them (the
 * format member a snapshot starts with). */
#include "memres-tool.h"

#include <string.h>

#define MAX_DEPTH 512

typedef struct
{
  const char *p, *end;
  const char *why;
} Scan;

static void
skip_space (Scan *s)
{
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static gboolean
fail (Scan *s, const char *why)
{
  s->why = why;
  return FALSE;
}

static gboolean
scan_string (Scan *s)
{
  s->p++; /* the opening quote */
  while (s->p < s->end)
    {
      unsigned char c = (unsigned char) *s->p++;

      if (c == '"')
        return TRUE;
      if (c < 0x20)
        return fail (s, "a control character in a string");
      if (c == '\\')
        {
          if (s->p >= s->end)
            break;
          c = (unsigned char) *s->p++;
          if (c == 'u')
            {
              for (int i = 0; i < 4; i++, s->p++)
                if (s->p >= s->end || !g_ascii_isxdigit (*s->p))
                  return fail (s, "a \\u escape without four hex digits");
            }
          else if (strchr ("\"\\/bfnrt", c) == NULL || c == '\0')
            return fail (s, "an invalid escape in a string");
        }
    }
  return fail (s, "a string that does not end");
}

static gboolean
scan_digits (Scan *s)
{
  const char *start = s->p;

  while (s->p < s->end && g_ascii_isdigit (*s->p))
    s->p++;
  return s->p > start;
}

static gboolean
scan_number (Scan *s)
{
  if (*s->p == '-')
    s->p++;
  if (s->p < s->end && *s->p == '0')
    s->p++;
  else if (!scan_digits (s))
    return fail (s, "an invalid number");
  if (s->p < s->end && *s->p == '.')
    {
      s->p++;
      if (!scan_digits (s))
        return fail (s, "an invalid number");
    }
  if (s->p < s->end && (*s->p == 'e' || *s->p == 'E'))
    {
      s->p++;
      if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
        s->p++;
      if (!scan_digits (s))
        return fail (s, "an invalid number");
    }
  return TRUE;
}

static gboolean
scan_value (Scan *s, guint depth)
{
  static const char *const words[] = { "true", "false", "null" };

  skip_space (s);
  if (s->p >= s->end)
    return fail (s, "the text ends where a value was expected");
  if (depth > MAX_DEPTH)
    return fail (s, "nested more than 512 deep");
  if (*s->p == '{' || *s->p == '[')
    {
      char close = *s->p == '{' ? '}' : ']';
      gboolean object = close == '}';

      s->p++;
      skip_space (s);
      if (s->p < s->end && *s->p == close)
        {
          s->p++;
          return TRUE;
        }
      for (;;)
        {
          if (object)
            {
              skip_space (s);
              if (s->p >= s->end || *s->p != '"')
                return fail (s, "expected a member name in quotes");
              if (!scan_string (s))
                return FALSE;
              skip_space (s);
              if (s->p >= s->end || *s->p != ':')
                return fail (s, "expected ':' after a member name");
              s->p++;
            }
          if (!scan_value (s, depth + 1))
            return FALSE;
          skip_space (s);
          if (s->p < s->end && *s->p == ',')
            {
              s->p++;
              continue;
            }
          if (s->p < s->end && *s->p == close)
            {
              s->p++;
              return TRUE;
            }
          return fail (s, object ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
  if (*s->p == '"')
    return scan_string (s);
  if (*s->p == '-' || g_ascii_isdigit (*s->p))
    return scan_number (s);
  for (gsize i = 0; i < G_N_ELEMENTS (words); i++)
    {
      gsize n = strlen (words[i]);

      if ((gsize) (s->end - s->p) >= n && memcmp (s->p, words[i], n) == 0)
        {
          s->p += n;
          return TRUE;
        }
    }
  return fail (s, "an invalid value");
}

gboolean
memres_tool_json_check (const char *text, gsize length, gsize *offset, const char **why)
{
  Scan s = { text, text + length, NULL };

  if (scan_value (&s, 0))
    {
      skip_space (&s);
      if (s.p == s.end)
        return TRUE;
      s.why = "more text after the value";
    }
  *offset = (gsize) (s.p - text);
  *why = s.why;
  return FALSE;
}

gboolean
memres_tool_json_members (const char *text, gsize length, MemresJsonMemberFunc func, gpointer data)
{
  Scan s = { text, text + length, NULL };

  skip_space (&s);
  if (s.p >= s.end || *s.p != '{')
    return FALSE;
  s.p++;
  for (;;)
    {
      const char *name, *value;
      gsize name_len;

      skip_space (&s);
      if (s.p < s.end && *s.p == '}')
        return TRUE;
      if (s.p >= s.end || *s.p != '"')
        return FALSE;
      name = s.p + 1;
      if (!scan_string (&s))
        return FALSE;
      name_len = (gsize) (s.p - 1 - name);
      skip_space (&s);
      if (s.p >= s.end || *s.p != ':')
        return FALSE;
      s.p++;
      skip_space (&s);
      value = s.p;
      if (!scan_value (&s, 1))
        return FALSE;
      func (name, name_len, value, (gsize) (s.p - value), data);
      skip_space (&s);
      if (s.p < s.end && *s.p == ',')
        s.p++;
    }
}

gboolean
memres_tool_json_elements (const char *text, gsize length, MemresJsonElementFunc func,
                           gpointer data)
{
  Scan s = { text, text + length, NULL };
  guint index = 0;

  skip_space (&s);
  if (s.p >= s.end || *s.p != '[')
    return FALSE;
  s.p++;
  for (;;)
    {
      const char *value;

      skip_space (&s);
      if (s.p < s.end && *s.p == ']')
        return TRUE;
      value = s.p;
      if (!scan_value (&s, 1))
        return FALSE;
      func (index++, value, (gsize) (s.p - value), data);
      skip_space (&s);
      if (s.p < s.end && *s.p == ',')
        s.p++;
    }
}

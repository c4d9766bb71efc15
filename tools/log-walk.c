/* log-walk.c: a whole CSV log of the `log` adaptor walked line by line for `memres replay`,
 * `memres trace` and `memres view`, the one place a log's lines are checked: each line parsed
 * (log-csv.c), its Time made a count of microseconds that never goes back (past midnight, or
 * to a Time before the line before's), the
 * bytes and allocations live after it, from a table of the live allocations by Pointer, and the
 * bytes mapped in segments, from a table of the segments by base. */
#include "memres-tool.h"

#include <string.h>

#define US_PER_DAY (G_GINT64_CONSTANT (86400) * 1000000)
/* The most midnights a log's times may pass. The Time column holds no date: a day is counted
 * each time the clock goes back by more than 12 hours, so a crafted log can claim a day every
 * two lines; past this it is refused. It bounds the microseconds after the first line (at most
 * 1,001 days, 8.7e13, well inside the 2^53 a page's JavaScript numbers hold exactly), and so
 * memres view's bucket arithmetic ((ts - t0) * 65536 stays below 2^63; it wrapped past about
 * 3,200 days). */
#define MAX_DAYS 1000

/* HH:MM:SS.uuuuuu in microseconds since midnight, or -1. */
static gint64
parse_time (const char *text)
{
  guint64 h, m, s, us;
  char *end;

  if (strlen (text) != 15 || text[2] != ':' || text[5] != ':' || text[8] != '.')
    return -1;
  h = g_ascii_strtoull (text, &end, 10);
  if (end != text + 2)
    return -1;
  m = g_ascii_strtoull (text + 3, &end, 10);
  if (end != text + 5)
    return -1;
  s = g_ascii_strtoull (text + 6, &end, 10);
  if (end != text + 8)
    return -1;
  us = g_ascii_strtoull (text + 9, &end, 10);
  if (end != text + 15 || h > 23 || m > 59 || s > 60)
    return -1;
  return (gint64) (((h * 60 + m) * 60 + s) * 1000000 + us);
}

typedef struct Live Live;
struct Live
{
  guint64 size;
  gint64 ts;
  guint line;
  const char *tag;
  /* the empty allocations live before this one at its Pointer: RMM logs every allocation of 0
   * bytes at 0x0 (its nullptr), any number of them live at once; freed newest first */
  Live *older;
};

static void
live_free (gpointer data)
{
  for (Live *a = data, *older; a != NULL; a = older)
    {
      older = a->older;
      g_free (a);
    }
}

gboolean
memres_tool_walk_log (const char *path, char *text, gsize length, MemresLogEventFunc func,
                      gpointer user_data, GError **error)
{
  g_autoptr (GHashTable) live
      = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, live_free);
  g_autoptr (GHashTable) segments
      = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
  gint64 day = 0, last = -1;
  guint64 used = 0, buffers = 0, mapped = 0;
  const char *nul;
  char *next, *line;
  guint n = 1;
  gboolean tagged, backtrace;

  if ((nul = memchr (text, '\0', length)) != NULL)
    {
      for (const char *c = text; c < nul; c++)
        n += *c == '\n';
      return memres_tool_log_bad_line (error, path, n, "a NUL byte: not a CSV log");
    }
  line = text;
  next = memchr (line, '\n', length);
  if (next != NULL)
    *next++ = '\0';
  if (!memres_tool_log_header_ok (g_strchomp (line), &tagged, &backtrace))
    return memres_tool_log_bad_line (error, path, 1,
                                     "expected the header \"" MEMRES_LOG_HEADER "\"");
  for (line = next; line != NULL; line = next)
    {
      MemresLogEvent e = { 0 };
      g_autofree char *why = NULL;
      gint64 t;
      gboolean ended;

      n++;
      next = strchr (line, '\n');
      if ((ended = next != NULL))
        *next++ = '\0';
      g_strchomp (line);
      if (line[0] == '\0')
        continue;
      /* the log adaptor writes whole lines: a last line without its newline was cut short (a
       * process that died with lines in its buffer, a full disk), and its last field (Stream,
       * Backtrace or Tag) may read as a shorter, wrong one */
      if (!ended)
        return memres_tool_log_bad_line (error, path, n,
                                         "the last line ends without a newline: the log was cut "
                                         "short");
      if (!memres_tool_parse_log_line (line, tagged, backtrace, &e.l, &why))
        return memres_tool_log_bad_line (error, path, n, "%s", why);
      if ((t = parse_time (e.l.time)) < 0)
        {
          g_autofree char *shown = memres_tool_show_input (e.l.time);
          return memres_tool_log_bad_line (error, path, n,
                                           "invalid Time \"%s\" (expected HH:MM:SS.uuuuuu)", shown);
        }
      if (last >= 0 && t + day < last - US_PER_DAY / 2)
        {
          if (day / US_PER_DAY >= MAX_DAYS)
            return memres_tool_log_bad_line (
                error, path, n,
                "the times pass midnight more than %d times (a day is counted each time the "
                "Time goes back by more than 12 hours): a log of more than %d days is refused",
                MAX_DAYS, MAX_DAYS);
          day += US_PER_DAY;
        }
      /* the bytes [Pointer, Pointer + Size) end inside the 64-bit address space: a buffer or
       * segment past its end is not one the log adaptor saw */
      if (e.l.size > 0 && e.l.size - 1 > G_MAXUINT64 - e.l.pointer)
        return memres_tool_log_bad_line (error, path, n,
                                         "Pointer %s with Size %" G_GUINT64_FORMAT
                                         " ends past the end of the address space (2^64)",
                                         e.l.pointer_text, e.l.size);
      /* a Time that goes back by less (the log adaptor takes each line's Time before the lock
       * that orders the lines, so a thread's line may follow a later one of another thread;
       * the wall clock set back) is the line before's: a line keeps its place in the log, which
       * the counters and a free before the allocate of its address follow */
      last = MAX (last, t + day);
      e.ts = last;
      e.line = n;
      e.tagged = tagged;
      if (e.l.action == MEMRES_LOG_ALLOCATE)
        {
          Live *a = g_hash_table_lookup (live, &e.l.pointer), *older = NULL;

          /* the log lost a free, or is not one the log adaptor wrote: the live bytes (and the
           * peak) would be wrong from here on; empty allocations alone share a Pointer */
          if (a != NULL && a->size == 0 && e.l.size == 0)
            {
              gpointer key;

              older = a;
              g_hash_table_steal_extended (live, &e.l.pointer, &key, NULL);
              g_free (key);
            }
          else if (a != NULL)
            return memres_tool_log_bad_line (error, path, n,
                                             "Pointer %s allocated again, without a free since "
                                             "line %u allocated it",
                                             e.l.pointer_text, a->line);
          if (e.l.size > G_MAXUINT64 - used)
            return memres_tool_log_bad_line (error, path, n,
                                             "the sizes live at once would pass 2^64 bytes "
                                             "(18446744073709551616): allocations that overlap");
          a = g_new (Live, 1);
          *a = (Live){ e.l.size, e.ts, n, e.l.tag, older };
          g_hash_table_insert (live, g_memdup2 (&e.l.pointer, sizeof e.l.pointer), a);
          used += e.l.size;
          buffers++;
          e.counted = TRUE;
        }
      else if (e.l.action == MEMRES_LOG_FREE)
        {
          Live *a = g_hash_table_lookup (live, &e.l.pointer);

          if (a != NULL && a->size != e.l.size)
            /* the log adaptor logs a free with the size its allocate logged: another size is a
             * log that lost lines or was not written by it (the live bytes would be wrong) */
            return memres_tool_log_bad_line (error, path, n,
                                             "free of Pointer %s with Size %" G_GUINT64_FORMAT
                                             ", but its allocate on line %u has Size "
                                             "%" G_GUINT64_FORMAT,
                                             e.l.pointer_text, e.l.size, a->line, a->size);
          if (a == NULL) /* allocated before the log began: not counted */
            goto done;
          used -= a->size;
          buffers--;
          e.counted = TRUE;
          e.alloc_size = a->size;
          e.alloc_ts = a->ts;
          e.alloc_line = a->line;
          e.alloc_tag = a->tag;
          if (a->older != NULL)
            {
              Live *older = a->older;

              a->older = NULL;
              g_hash_table_replace (live, g_memdup2 (&e.l.pointer, sizeof e.l.pointer), older);
            }
          else
            g_hash_table_remove (live, &e.l.pointer);
        }
      else if (e.l.action == MEMRES_LOG_SEGMENT_MAPPED || e.l.action == MEMRES_LOG_SEGMENT_GROWN)
        {
          guint64 *seg = g_hash_table_lookup (segments, &e.l.pointer);

          /* mapped again (an unmap that failed), or grown: the new length replaces the old */
          e.segment_previous = seg != NULL ? *seg : 0;
          if (e.l.size > G_MAXUINT64 - (mapped - e.segment_previous))
            return memres_tool_log_bad_line (error, path, n,
                                             "the segments mapped at once would pass 2^64 bytes "
                                             "(18446744073709551616): segments that overlap");
          if (seg == NULL)
            {
              seg = g_new (guint64, 1);
              g_hash_table_insert (segments, g_memdup2 (&e.l.pointer, sizeof e.l.pointer), seg);
            }
          mapped = mapped - e.segment_previous + e.l.size;
          *seg = e.l.size;
        }
      else if (e.l.action == MEMRES_LOG_SEGMENT_UNMAPPING)
        {
          guint64 *seg = g_hash_table_lookup (segments, &e.l.pointer);

          if (seg != NULL) /* else mapped before the log began */
            {
              e.segment_previous = *seg;
              mapped -= *seg;
              g_hash_table_remove (segments, &e.l.pointer);
            }
        }
    done:
      e.used = used;
      e.mapped = mapped;
      e.buffers = buffers;
      if (!func (&e, user_data, error))
        return FALSE;
    }
  return TRUE;
}

/* cmd-replay.c: `memres replay LOG SPEC`: replays a CSV log written by the `log` adaptor (RMM's
 * columns Thread,Time,Action,Pointer,Size,Stream) against any stack, one operation after the
 * other in the log's order on this thread, and prints the time per allocate and per free, the
 * peak of used bytes (the sizes live at once) and of reserved bytes (the stack's statistics,
 * where it keeps them), and the allocations that failed. Logged failures (`allocate failure`,
 * and `free failure`: a free that failed and left the buffer open) are counted, not replayed; a
 * free of an address the replay does not hold (its allocation failed here) is counted and skipped;
 * a log whose live sizes pass 2^64 bytes, or with a free whose Size is not its allocate's, is
 * refused as invalid (they would overlap; the live bytes would be wrong). Buffers still
 * live at the end are closed. LOG is read whole before SPEC is created, and a `log` layer of
 * SPEC on the same file is refused first (so is one on stdout with --json); a `log` layer that
 * lost lines fails the command (logs.c). */
#include "memres-tool.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_HEADER "Thread,Time,Action,Pointer,Size,Stream"

/* The plural "s" of a count's noun: "1 operation", "2 operations". */
#define PLURAL(n) ((n) == 1 ? "" : "s")

typedef struct
{
  guint64 allocations, frees, logged_failures, failures, unmatched_frees, live_at_end;
  guint64 alloc_ns, free_ns;
  guint64 used, used_peak, log_used, log_peak;
  guint threads;
  gboolean has_reserved;
  guint64 reserved_peak;
  char *first_failure;
} Replay;

static guint64
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (guint64) ts.tv_sec * G_GUINT64_CONSTANT (1000000000) + (guint64) ts.tv_nsec;
}

static gboolean bad_line (GError **error, const char *log, guint line, const char *format, ...)
    G_GNUC_PRINTF (4, 5);

static gboolean
bad_line (GError **error, const char *log, guint line, const char *format, ...)
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

static gboolean
parse_hex (const char *text, guint64 *value)
{
  return g_str_has_prefix (text, "0x")
         && g_ascii_string_to_unsigned (text + 2, 16, 0, G_MAXUINT64, value, NULL);
}

typedef struct
{
  MemresBuffer *buf;
  guint64 size; /* as logged */
  guint line;   /* of its allocate */
} Live;

static void
live_free (gpointer data)
{
  Live *l = data;

  if (l->buf != NULL)
    memres_buffer_unref (l->buf);
  g_free (l);
}

/* Reads @log whole into @text (@length bytes), before anything is created: the stack may name
 * the same file. @st: the file's identity. */
static gboolean
read_log (const char *log, char **text, gsize *length, struct stat *st, GError **error)
{
  g_autoptr (GError) local = NULL;

  /* a device or a FIFO would be read without end (or wait for good) */
  if (stat (log, st) == 0 && !S_ISREG (st->st_mode))
    {
      g_autofree char *shown = memres_tool_show_input (log);

      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "%s: not a regular file",
                   shown);
      return FALSE;
    }
  if (!g_file_get_contents (log, text, length, &local))
    {
      /* a LOG that names no file is a bad operand, as one that is not a regular file */
      gboolean bad_path = local->code == G_FILE_ERROR_NOENT || local->code == G_FILE_ERROR_NOTDIR
                          || local->code == G_FILE_ERROR_ISDIR || local->code == G_FILE_ERROR_LOOP
                          || local->code == G_FILE_ERROR_NAMETOOLONG;

      g_set_error (error, MEMRES_ERROR,
                   local->code == G_FILE_ERROR_ACCES || local->code == G_FILE_ERROR_PERM
                       ? MEMRES_ERROR_PERMISSION_DENIED
                   : bad_path ? MEMRES_ERROR_INVALID_ARGUMENT
                              : MEMRES_ERROR_FAILED,
                   "%s", local->message);
      return FALSE;
    }
  return TRUE;
}

static gboolean
replay (const char *log, const char *text, gsize length, MemresResource *mr, Replay *r,
        GError **error)
{
  g_auto (GStrv) lines = NULL;
  g_autoptr (GHashTable) live
      = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, live_free);
  g_autoptr (GHashTable) threads = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  const char *nul;
  guint i;

  if ((nul = memchr (text, '\0', length)) != NULL)
    {
      guint line = 1;

      for (const char *c = text; c < nul; c++)
        line += *c == '\n';
      return bad_line (error, log, line, "a NUL byte: not a CSV log");
    }
  lines = g_strsplit (text, "\n", -1);
  if (lines[0] == NULL || strcmp (g_strchomp (lines[0]), LOG_HEADER) != 0)
    return bad_line (error, log, 1, "expected the header \"" LOG_HEADER "\"");

  for (i = 1; lines[i] != NULL; i++)
    {
      char *line = g_strchomp (lines[i]);
      g_auto (GStrv) f = NULL;
      guint64 pointer, size;
      g_autofree char *shown = NULL;

      if (line[0] == '\0')
        continue;
      f = g_strsplit (line, ",", -1);
      if (g_strv_length (f) != 6)
        return bad_line (error, log, i + 1, "expected 6 fields (" LOG_HEADER "), found %u",
                         g_strv_length (f));
      if (!parse_hex (f[3], &pointer))
        {
          shown = memres_tool_show_input (f[3]);
          return bad_line (error, log, i + 1, "invalid Pointer \"%s\" (expected 0x...)", shown);
        }
      if (!g_ascii_string_to_unsigned (f[4], 10, 0, G_MAXSSIZE, &size, NULL))
        {
          shown = memres_tool_show_input (f[4]);
          return bad_line (error, log, i + 1, "invalid Size \"%s\"", shown);
        }
      if (!g_hash_table_contains (threads, f[0]))
        g_hash_table_add (threads, g_strdup (f[0]));

      if (strcmp (f[2], "allocate") == 0)
        {
          g_autoptr (GError) failure = NULL;
          Live *l, *earlier = g_hash_table_lookup (live, &pointer);
          guint64 t0;

          /* the log lost a free, or is not one the log adaptor wrote: the live bytes (and
           * the peak) would be wrong from here on */
          if (earlier != NULL)
            return bad_line (error, log, i + 1,
                             "Pointer %s allocated again, without a free since line %u "
                             "allocated it",
                             f[3], earlier->line);
          /* live allocations are disjoint ranges of a 64-bit address space: more live bytes
           * is no log of the log adaptor (and the sum, with the peak, would wrap) */
          if (size > G_MAXUINT64 - r->log_used)
            return bad_line (error, log, i + 1,
                             "the sizes live at once would pass 2^64 bytes "
                             "(18446744073709551616): allocations that overlap");
          l = g_new0 (Live, 1);
          l->line = i + 1;
          t0 = now_ns ();

          l->buf = memres_resource_allocate (mr, (gsize) size, NULL, &failure);
          r->alloc_ns += now_ns () - t0;
          r->allocations++;
          l->size = size;
          r->log_used += size;
          r->log_peak = MAX (r->log_peak, r->log_used);
          if (l->buf == NULL)
            {
              r->failures++;
              if (r->first_failure == NULL)
                r->first_failure = g_strdup_printf ("line %u: %s", i + 1, failure->message);
            }
          else
            {
              r->used += size;
              r->used_peak = MAX (r->used_peak, r->used);
            }
          g_hash_table_replace (live, g_memdup2 (&pointer, sizeof pointer), l);
        }
      else if (strcmp (f[2], "free") == 0)
        {
          Live *l = g_hash_table_lookup (live, &pointer);

          r->frees++;
          if (l == NULL)
            {
              r->unmatched_frees++;
              continue;
            }
          /* the log adaptor logs a free with the size its allocate logged: another size is a
           * log that lost lines or was not written by it (the live bytes would be wrong) */
          if (size != l->size)
            return bad_line (error, log, i + 1,
                             "free of Pointer %s with Size %" G_GUINT64_FORMAT
                             ", but its allocate on line %u has Size %" G_GUINT64_FORMAT,
                             f[3], size, l->line, l->size);
          r->log_used -= l->size; /* added at its allocate: no wrap */
          if (l->buf != NULL)
            {
              g_autoptr (GError) failure = NULL;
              guint64 t0 = now_ns ();
              gboolean ok = memres_buffer_close (l->buf, NULL, &failure);

              r->free_ns += now_ns () - t0;
              if (!ok)
                {
                  /* the work failed, not the log: the close's own error, with the line */
                  g_autofree char *shown_log = memres_tool_show_input (log);

                  g_propagate_prefixed_error (error, g_steal_pointer (&failure),
                                              "%s:%u: closing the buffer failed: ", shown_log,
                                              i + 1);
                  return FALSE;
                }
              r->used -= l->size;
            }
          else
            r->unmatched_frees++;
          g_hash_table_remove (live, &pointer);
        }
      else if (strcmp (f[2], "allocate failure") == 0 || strcmp (f[2], "free failure") == 0)
        r->logged_failures++;
      else
        {
          shown = memres_tool_show_input (f[2]);
          return bad_line (
              error, log, i + 1,
              "invalid Action \"%s\" (allocate, free, allocate failure or free failure)", shown);
        }
    }

  {
    MemresStats st;
    g_autoptr (GError) ignored = NULL;

    r->has_reserved = memres_resource_get_stats (mr, &st, &ignored);
    if (r->has_reserved)
      r->reserved_peak = st.reserved_high;
  }
  {
    GHashTableIter iter;
    gpointer value;

    g_hash_table_iter_init (&iter, live);
    while (g_hash_table_iter_next (&iter, NULL, &value))
      if (((Live *) value)->buf != NULL)
        {
          memres_buffer_close (((Live *) value)->buf, NULL, NULL);
          r->live_at_end++;
        }
  }
  r->threads = g_hash_table_size (threads);
  return TRUE;
}

/* The summary as text. */
static void
print_text (const char *log_path, const char *spec, const Replay *r)
{
  guint64 ops = r->allocations + r->frees;
  g_autofree char *log = memres_tool_one_line (log_path);
  g_autofree char *peak = memres_tool_format_size (r->used_peak);
  g_autofree char *log_peak = memres_tool_format_size (r->log_peak);
  g_autofree char *spec_shown = memres_tool_one_line (spec);

  g_print ("replayed  %s: %" G_GUINT64_FORMAT " operation%s (%" G_GUINT64_FORMAT
           " allocation%s, %" G_GUINT64_FORMAT " free%s) logged by %u thread%s\n",
           log, ops, PLURAL (ops), r->allocations, PLURAL (r->allocations), r->frees,
           PLURAL (r->frees), r->threads, PLURAL (r->threads));
  g_print ("against   %s\n", spec_shown);
  g_print ("allocate  %" G_GUINT64_FORMAT " ns per operation\n",
           r->allocations ? r->alloc_ns / r->allocations : 0);
  g_print ("free      %" G_GUINT64_FORMAT " ns per operation\n",
           r->frees ? r->free_ns / r->frees : 0);
  g_print ("peak      used %s (the log's: %s)\n", peak, log_peak);
  if (r->has_reserved)
    {
      g_autofree char *reserved = memres_tool_format_size (r->reserved_peak);
      g_print ("          reserved %s\n", reserved);
    }
  else
    g_print ("          reserved unknown (the stack keeps no statistics)\n");
  g_print ("failures  %" G_GUINT64_FORMAT " allocation%s failed", r->failures,
           PLURAL (r->failures));
  if (r->first_failure != NULL)
    {
      g_autofree char *first = memres_tool_one_line (r->first_failure);
      g_print (" (first: %s)", first);
    }
  g_print ("; %" G_GUINT64_FORMAT " failed in the log; %" G_GUINT64_FORMAT
           " free%s skipped; %" G_GUINT64_FORMAT " buffer%s live at the end, closed\n",
           r->logged_failures, r->unmatched_frees, PLURAL (r->unmatched_frees), r->live_at_end,
           PLURAL (r->live_at_end));
}

int
memres_tool_replay (int argc, char **argv)
{
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output, "Print JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *spec = NULL;
  Replay r = { 0 };
  g_autofree char *text = NULL;
  gsize length;
  struct stat log_st, out_st;
  int status = 0;

  context = g_option_context_new ("LOG SPEC - replay a log of the log adaptor against a stack");
  g_option_context_set_summary (
      context, "LOG is a CSV file the log adaptor wrote (log:path=FILE>...); SPEC any resource "
               "or stack. Prints the time per allocate and free, the peak used and reserved "
               "bytes, and the allocations that failed.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("replay", error->message);
  if (argc != 3)
    return memres_tool_usage_error ("replay", "expected LOG SPEC");

  /* LOG is read whole first, and a log layer that would write over it (truncating it when
   * created) is refused before anything is created: the input of a command is never
   * destroyed; with --json, a log on stdout would mix its lines into the document */
  if (!read_log (argv[1], &text, &length, &log_st, &error)
      || !memres_tool_check_log_paths (argv[2], &log_st, "the LOG being replayed", &error))
    return memres_tool_fail (error);
  if (json_output && fstat (STDOUT_FILENO, &out_st) == 0
      && !memres_tool_check_log_paths (
          argv[2], &out_st, "the standard output, where --json writes its document", &error))
    return memres_tool_fail (error);
  mr = memres_resource_new (argv[2], &error);
  if (mr == NULL)
    return memres_tool_fail (error);
  spec = memres_resource_to_string (mr);
  if (!replay (argv[1], text, length, mr, &r, &error))
    status = memres_tool_fail (error);
  /* a log layer of the stack that lost lines fails the command (with --json, the error is the
   * one document; the text summary stays, the error after it) */
  else if (!memres_tool_check_logs_complete (mr, &error))
    {
      if (!json_output)
        print_text (argv[1], spec, &r);
      status = memres_tool_fail (error);
    }
  else if (json_output)
    {
      MemresJson json;
      g_autofree char *out = NULL;

      memres_json_init (&json);
      memres_json_begin_object (&json, NULL);
      memres_json_string (&json, "log", argv[1]);
      memres_json_string (&json, "resource", spec);
      memres_json_uint (&json, "threads", r.threads);
      memres_json_uint (&json, "allocations", r.allocations);
      memres_json_uint (&json, "frees", r.frees);
      memres_json_uint (&json, "allocate_ns_mean", r.allocations ? r.alloc_ns / r.allocations : 0);
      memres_json_uint (&json, "free_ns_mean", r.frees ? r.free_ns / r.frees : 0);
      memres_json_uint (&json, "peak_used_bytes", r.used_peak);
      memres_json_uint (&json, "log_peak_used_bytes", r.log_peak);
      if (r.has_reserved)
        memres_json_uint (&json, "peak_reserved_bytes", r.reserved_peak);
      else
        memres_json_string (&json, "peak_reserved_bytes", NULL);
      memres_json_uint (&json, "failures", r.failures);
      memres_json_string (&json, "first_failure", r.first_failure);
      memres_json_uint (&json, "logged_failures", r.logged_failures);
      memres_json_uint (&json, "unmatched_frees", r.unmatched_frees);
      memres_json_uint (&json, "live_at_end", r.live_at_end);
      memres_json_end_object (&json);
      out = memres_json_finish (&json);
      g_print ("%s", out);
    }
  else
    print_text (argv[1], spec, &r);
  g_free (r.first_failure);
  return status;
}

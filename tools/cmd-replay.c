/* cmd-replay.c: `memres replay LOG SPEC...`: replays a CSV log written by the `log` adaptor
 * (RMM's columns Thread,Time,Action,Pointer,Size,Stream, with memres's actions beside RMM's:
 * log-csv.c) against one stack or several, in turn, and prints for each the time per allocate
 * and per free, the peak of used bytes (the sizes live at once) and of reserved bytes (the
 * stack's statistics, where it keeps them), and the allocations that failed; several SPECs make
 * a table, a column each. Serial by default (one operation after the other in the log's order on
 * this thread, so that the figures repeat); --threads replays each logged Thread on a thread of
 * its own (at most 1024 logged threads; a machine that runs out of threads fails the command
 * without waiting for what never started) and, over device memory, each logged Stream on a
 * stream of its own, a free waiting for its allocate. An allocation that fails names LOG:LINE and
 * makes the exit status 1 (after the summary); a close that fails stops the replay with LOG:LINE
 * (exit status 1). Logged failures
 * (`allocate failure`, and `free failure`: a free that failed and left the buffer open) are
 * counted, not replayed; memres's `out of memory` (which follows its `allocate failure`), `trim`,
 * `sleep` and `wake` (a replay has no tags to put to sleep: the buffers of the tag stay allocated
 * and awake, as the log's allocate and free lines say they stayed allocated) and `segment` lines
 * are read and not replayed; a free of an address the replay does
 * not hold (its allocation failed here) is counted and skipped, one whose allocate is in no line
 * of the log (a log cut at its start, or that lost lines) is refused as invalid (LOG:LINE, as
 * `memres trace` and `memres view` do not: they draw what the log holds); the lines are checked by
 * log-walk.c, as `memres trace` and `memres view` check them (a Time that is not HH:MM:SS.uuuuuu,
 * live sizes past 2^64 bytes, a free whose Size is not its allocate's are refused as invalid).
 * Buffers still live at the end are closed. LOG is read (input.c: a missing one named as missing,
 * as view's and trace's inputs) and checked whole before any SPEC is created, and a `log` layer of
 * a SPEC on the same file is refused first (so is one on stdout with
 * --json); a `log` layer that lost lines fails the command (logs.c). */
#include "memres-tool.h"

#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The most logged threads --threads replays, each on a thread of its own: a log of more (a
 * program whose threads came and went by the thousand) is refused before anything is created,
 * rather than running the machine out of threads part way. */
#define REPLAY_MAX_THREADS 1024

/* The plural "s" of a count's noun: "1 operation", "2 operations". */
#define PLURAL(n) ((n) == 1 ? "" : "s")

/* One line of the log that the replay acts on, or counts. */
typedef enum
{
  OP_ALLOCATE,
  OP_FREE,
  OP_LOGGED_FAILURE, /* allocate failure, free failure: counted, not replayed */
  OP_OTHER,          /* out of memory (after its allocate failure), trim, sleep, wake and the
                      * segment lines: not replayed */
} OpKind;

typedef struct
{
  OpKind kind;
  guint line;
  guint thread; /* index of the logged Thread */
  guint stream; /* index of the logged Stream (0: the legacy stream 0x0) */
  guint64 size; /* as logged */
  gint64 match; /* a free: the index of its allocate (-1: none in the log) */
} Op;

/* The log, parsed and checked once for every spec. */
typedef struct
{
  GArray *ops; /* Op */
  guint threads, streams;
  guint64 allocations, frees, logged_failures, others, log_peak;
} Log;

/* What a replay against one spec found. */
typedef struct
{
  guint64 failures, unmatched_frees, live_at_end;
  guint64 alloc_ns, free_ns;
  guint64 used, used_peak;
  gboolean has_reserved;
  guint64 reserved_peak;
  char *first_failure; /* "LOG:LINE: MESSAGE" */
} Replay;

static guint64
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (guint64) ts.tv_sec * G_GUINT64_CONSTANT (1000000000) + (guint64) ts.tv_nsec;
}

/* The index of @key in @table, added when new. */
static guint
intern (GHashTable *table, const char *key)
{
  gpointer value;

  if (g_hash_table_lookup_extended (table, key, NULL, &value))
    return GPOINTER_TO_UINT (value);
  value = GUINT_TO_POINTER (g_hash_table_size (table));
  g_hash_table_insert (table, g_strdup (key), value);
  return GPOINTER_TO_UINT (value);
}

/* What parse_log() builds as the walk goes. */
typedef struct
{
  Log *out;
  GHashTable *threads, *streams; /* logged Thread and Stream -> index */
  const char *log;               /* its path, for errors */
} Parsing;

/* The index of the op of log line @line (ops are in line order). */
static guint
op_of_line (const GArray *ops, guint line)
{
  guint lo = 0, hi = ops->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;

      if (g_array_index (ops, Op, mid).line < line)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static gboolean
add_op (const MemresLogEvent *e, gpointer user_data, GError **error)
{
  Parsing *p = user_data;
  Log *out = p->out;
  Op op = { 0 };

  op.line = e->line;
  op.size = e->l.size;
  op.match = -1;
  op.thread = intern (p->threads, e->l.thread);
  op.stream = intern (p->streams, e->l.stream_text);
  switch (e->l.action)
    {
    case MEMRES_LOG_ALLOCATE:
      op.kind = OP_ALLOCATE;
      out->allocations++;
      out->log_peak = MAX (out->log_peak, e->used);
      break;
    case MEMRES_LOG_FREE:
      /* a free whose allocate no line of the log holds: a log the log adaptor did not write whole
       * (its first lines cut off, lines lost); trace and view draw it (an allocation made before
       * the log began), but a replay would hold a buffer the program did not and free one it
       * never made */
      if (!e->counted)
        return memres_tool_log_bad_line (error, p->log, e->line,
                                         "free of Pointer %s, which no allocate line before it "
                                         "allocated: the log is not whole (cut at its start, "
                                         "or lines lost), and cannot be replayed",
                                         e->l.pointer_text);
      op.kind = OP_FREE;
      out->frees++;
      op.match = op_of_line (out->ops, e->alloc_line);
      break;
    case MEMRES_LOG_ALLOCATE_FAILURE:
    case MEMRES_LOG_FREE_FAILURE:
      op.kind = OP_LOGGED_FAILURE;
      out->logged_failures++;
      break;
    default: /* out of memory, trim, sleep, wake, segment lines */
      op.kind = OP_OTHER;
      out->others++;
      break;
    }
  g_array_append_val (out->ops, op);
  return TRUE;
}

/* Parses and checks the log before any stack is created: its lines walked and checked by
 * memres_tool_walk_log() (log-walk.c), as `memres trace` and `memres view` check them. */
static gboolean
parse_log (const char *log, char *text, gsize length, Log *out, GError **error)
{
  g_autoptr (GHashTable) threads = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) streams = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  Parsing p = { out, threads, streams, log };

  intern (streams, "0x0");
  out->ops = g_array_new (FALSE, TRUE, sizeof (Op));
  if (!memres_tool_walk_log (log, text, length, add_op, &p, error))
    return FALSE;
  out->threads = g_hash_table_size (threads);
  out->streams = g_hash_table_size (streams);
  return TRUE;
}

/* The replay of a log against one stack, serial or on the log's threads. */
typedef struct
{
  const char *log;
  const Log *parsed;
  MemresResource *mr;
  Replay *r;
  MemresBuffer **bufs;   /* per op: the buffer an allocate made (or NULL) */
  gint *done;            /* per op: 1 once it ran (threads) */
  MemresStream *streams; /* per logged stream */
  GMutex lock;           /* r's counts, @done, the first error (threads) */
  GCond cond;
  GError *error;  /* a close that failed: the replay stops */
  guint thread;   /* next logged thread for a worker to take */
  gboolean abort; /* a worker could not be started: the others stop waiting */
} Run;

static void
run_op (Run *run, guint index)
{
  const Op *op = &g_array_index (run->parsed->ops, Op, index);
  Replay *r = run->r;

  if (op->kind == OP_ALLOCATE)
    {
      g_autoptr (GError) failure = NULL;
      guint64 t0 = now_ns ();
      MemresBuffer *buf = memres_resource_allocate (run->mr, (gsize) op->size,
                                                    run->streams[op->stream], &failure);
      guint64 t = now_ns () - t0;

      g_mutex_lock (&run->lock);
      r->alloc_ns += t;
      run->bufs[index] = buf;
      if (buf == NULL)
        {
          r->failures++;
          if (r->first_failure == NULL)
            {
              g_autofree char *shown = memres_tool_show_input (run->log);

              r->first_failure
                  = g_strdup_printf ("%s:%u: allocating %" G_GUINT64_FORMAT " bytes failed: %s",
                                     shown, op->line, op->size, failure->message);
            }
        }
      else
        {
          r->used += op->size;
          r->used_peak = MAX (r->used_peak, r->used);
        }
      g_mutex_unlock (&run->lock);
    }
  else if (op->kind == OP_FREE)
    {
      MemresBuffer *buf = op->match >= 0 ? run->bufs[op->match] : NULL;
      g_autoptr (GError) failure = NULL;
      guint64 t0, t;
      gboolean ok;

      if (buf == NULL)
        {
          g_mutex_lock (&run->lock);
          r->unmatched_frees++;
          g_mutex_unlock (&run->lock);
          return;
        }
      t0 = now_ns ();
      ok = memres_buffer_close (buf, run->streams[op->stream], &failure);
      t = now_ns () - t0;
      g_mutex_lock (&run->lock);
      r->free_ns += t;
      if (ok)
        {
          r->used -= op->size;
          run->bufs[op->match] = NULL;
          memres_buffer_unref (buf);
        }
      else if (run->error == NULL)
        {
          /* the work failed, not the log: the close's own error, with the line */
          g_autofree char *shown_log = memres_tool_show_input (run->log);

          g_propagate_prefixed_error (&run->error, g_steal_pointer (&failure),
                                      "%s:%u: closing the buffer failed: ", shown_log, op->line);
        }
      g_mutex_unlock (&run->lock);
    }
}

/* A worker of the threaded replay: the ops of one logged thread, in order; a free waits for its
 * allocate on whichever thread it is. */
static gpointer
worker (gpointer data)
{
  Run *run = data;
  guint thread;

  g_mutex_lock (&run->lock);
  thread = run->thread++;
  g_mutex_unlock (&run->lock);
  for (guint i = 0; i < run->parsed->ops->len; i++)
    {
      const Op *op = &g_array_index (run->parsed->ops, Op, i);

      if (op->thread != thread)
        continue;
      if (op->kind == OP_FREE && op->match >= 0)
        {
          gboolean abort;

          g_mutex_lock (&run->lock);
          while (!run->done[op->match] && !run->abort)
            g_cond_wait (&run->cond, &run->lock);
          abort = !run->done[op->match];
          g_mutex_unlock (&run->lock);
          if (abort)
            break; /* its allocate's thread never started */
        }
      run_op (run, i);
      g_mutex_lock (&run->lock);
      run->done[i] = 1;
      g_cond_broadcast (&run->cond);
      g_mutex_unlock (&run->lock);
    }
  return NULL;
}

/* One stream per logged stream but the legacy one, for the threaded replay over device
 * memory (cuStreamCreate in the device's primary context); the legacy stream for every one
 * otherwise. */
static gboolean
make_streams (Run *run, gboolean threaded, GError **error)
{
  gint device = memres_resource_get_device (run->mr);
  const MemresCudaDriver *drv;
  gboolean pushed = FALSE;
  CUresult res = CUDA_SUCCESS;

  run->streams = g_new0 (MemresStream, run->parsed->streams);
  if (!threaded || run->parsed->streams < 2 || !memres_resource_is_device_accessible (run->mr)
      || device < 0)
    return TRUE;
  if ((drv = memres_cuda_get_driver (error)) == NULL
      || !memres_cuda_push_context (device, &pushed, error))
    return FALSE;
  for (guint s = 1; s < run->parsed->streams && res == CUDA_SUCCESS; s++)
    res = drv->cuStreamCreate ((CUstream *) &run->streams[s], CU_STREAM_NON_BLOCKING);
  memres_cuda_pop_context (pushed);
  if (res != CUDA_SUCCESS)
    return memres_cuda_set_error (error, res, "cuStreamCreate");
  return TRUE;
}

static void
free_streams (Run *run)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);

  for (guint s = 1; s < run->parsed->streams; s++)
    if (run->streams[s] != NULL)
      {
        memres_stream_synchronize (run->streams[s], NULL);
        drv->cuStreamDestroy ((CUstream) run->streams[s]);
      }
  g_free (run->streams);
}

static gboolean
replay (const char *log, const Log *parsed, MemresResource *mr, gboolean threaded, Replay *r,
        GError **error)
{
  Run run = { 0 };
  guint n = parsed->ops->len;

  run.log = log;
  run.parsed = parsed;
  run.mr = mr;
  run.r = r;
  run.bufs = g_new0 (MemresBuffer *, MAX (n, 1));
  run.done = g_new0 (gint, MAX (n, 1));
  g_mutex_init (&run.lock);
  g_cond_init (&run.cond);
  if (!make_streams (&run, threaded, &run.error))
    ;
  else if (!threaded || parsed->threads < 2)
    for (guint i = 0; i < n && run.error == NULL; i++)
      run_op (&run, i);
  else
    {
      g_autofree GThread **workers = g_new0 (GThread *, parsed->threads);

      for (guint t = 0; t < parsed->threads; t++)
        {
          g_autoptr (GError) failure = NULL;

          if ((workers[t] = g_thread_try_new ("replay", worker, &run, &failure)) != NULL)
            continue;
          /* a machine out of threads: the workers started stop waiting for the allocations of
           * those that did not, the buffers made are closed below, the command fails */
          g_mutex_lock (&run.lock);
          run.abort = TRUE;
          if (run.error == NULL)
            g_propagate_prefixed_error (&run.error, g_steal_pointer (&failure),
                                        "--threads: could not start the thread of logged thread "
                                        "%u of %u: ",
                                        t + 1, parsed->threads);
          g_cond_broadcast (&run.cond);
          g_mutex_unlock (&run.lock);
          break;
        }
      for (guint t = 0; t < parsed->threads && workers[t] != NULL; t++)
        g_thread_join (workers[t]);
    }

  {
    MemresStats st;
    g_autoptr (GError) ignored = NULL;

    r->has_reserved = memres_resource_get_stats (mr, &st, &ignored);
    if (r->has_reserved)
      r->reserved_peak = st.reserved_high;
  }
  for (guint i = 0; i < n; i++)
    if (run.bufs[i] != NULL)
      {
        memres_buffer_close (run.bufs[i], NULL, NULL);
        memres_buffer_unref (run.bufs[i]);
        r->live_at_end++;
      }
  if (run.streams != NULL)
    free_streams (&run);
  g_free (run.bufs);
  g_free (run.done);
  g_mutex_clear (&run.lock);
  g_cond_clear (&run.cond);
  if (run.error != NULL)
    {
      g_propagate_error (error, run.error);
      return FALSE;
    }
  return TRUE;
}

/* The log's line of the summary. */
static void
print_log_line (const char *log_path, const Log *log)
{
  guint64 ops = log->allocations + log->frees;
  g_autofree char *log_shown = memres_tool_one_line (log_path);

  g_print ("replayed  %s: %" G_GUINT64_FORMAT " operation%s (%" G_GUINT64_FORMAT
           " allocation%s, %" G_GUINT64_FORMAT " free%s) logged by %u thread%s\n",
           log_shown, ops, PLURAL (ops), log->allocations, PLURAL (log->allocations), log->frees,
           PLURAL (log->frees), log->threads, PLURAL (log->threads));
}

/* The summary of one replay as text. */
static void
print_text (const char *log_path, const Log *log, const char *spec, const Replay *r)
{
  g_autofree char *peak = memres_tool_format_size (r->used_peak);
  g_autofree char *log_peak = memres_tool_format_size (log->log_peak);
  g_autofree char *spec_shown = memres_tool_one_line (spec);

  print_log_line (log_path, log);
  g_print ("against   %s\n", spec_shown);
  g_print ("allocate  %" G_GUINT64_FORMAT " ns per operation\n",
           log->allocations ? r->alloc_ns / log->allocations : 0);
  g_print ("free      %" G_GUINT64_FORMAT " ns per operation\n",
           log->frees ? r->free_ns / log->frees : 0);
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
           log->logged_failures, r->unmatched_frees, PLURAL (r->unmatched_frees), r->live_at_end,
           PLURAL (r->live_at_end));
}

/* Several replays side by side: a row per figure, a column per spec. */
static void
print_table (const char *log_path, const Log *log, char **specs, const Replay *rs, guint n)
{
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) g_strfreev);
  static const char *const names[]
      = { "", "allocate ns", "free ns", "peak used", "peak reserved", "failures", "live at end" };
  g_autofree guint *col = g_new0 (guint, n + 1);

  print_log_line (log_path, log);
  for (guint row = 0; row < G_N_ELEMENTS (names); row++)
    {
      GStrv cells = g_new0 (char *, n + 2);

      cells[0] = g_strdup (names[row]);
      for (guint i = 0; i < n; i++)
        {
          const Replay *r = &rs[i];

          switch (row)
            {
            case 0:
              cells[i + 1] = memres_tool_one_line (specs[i]);
              break;
            case 1:
              cells[i + 1] = g_strdup_printf (
                  "%" G_GUINT64_FORMAT, log->allocations ? r->alloc_ns / log->allocations : 0);
              break;
            case 2:
              cells[i + 1] = g_strdup_printf ("%" G_GUINT64_FORMAT,
                                              log->frees ? r->free_ns / log->frees : 0);
              break;
            case 3:
              cells[i + 1] = g_strdup_printf ("%" G_GUINT64_FORMAT, r->used_peak);
              break;
            case 4:
              cells[i + 1] = r->has_reserved
                                 ? g_strdup_printf ("%" G_GUINT64_FORMAT, r->reserved_peak)
                                 : g_strdup ("unknown");
              break;
            case 5:
              cells[i + 1] = g_strdup_printf ("%" G_GUINT64_FORMAT, r->failures);
              break;
            default:
              cells[i + 1] = g_strdup_printf ("%" G_GUINT64_FORMAT, r->live_at_end);
              break;
            }
        }
      for (guint c = 0; c <= n; c++)
        col[c] = MAX (col[c], (guint) g_utf8_strlen (cells[c], -1));
      g_ptr_array_add (rows, cells);
    }
  for (guint row = 0; row < rows->len; row++)
    {
      GStrv cells = rows->pdata[row];
      GString *line = g_string_new (NULL);

      for (guint c = 0; c <= n; c++)
        {
          g_string_append (line, cells[c]);
          if (c < n)
            for (guint pad = (guint) g_utf8_strlen (cells[c], -1); pad < col[c] + 2; pad++)
              g_string_append_c (line, ' ');
        }
      g_print ("%s\n", line->str);
      g_string_free (line, TRUE);
    }
  for (guint i = 0; i < n; i++)
    if (rs[i].first_failure != NULL)
      {
        g_autofree char *first = memres_tool_one_line (rs[i].first_failure);
        g_autofree char *spec = memres_tool_one_line (specs[i]);

        g_print ("first failure against %s: %s\n", spec, first);
      }
}

/* The JSON object of one replay (its members; the caller opens and closes it). */
static void
json_replay (MemresJson *json, const Log *log, const char *spec, const Replay *r)
{
  memres_json_string (json, "resource", spec);
  memres_json_uint (json, "threads", log->threads);
  memres_json_uint (json, "allocations", log->allocations);
  memres_json_uint (json, "frees", log->frees);
  memres_json_uint (json, "allocate_ns_mean",
                    log->allocations ? r->alloc_ns / log->allocations : 0);
  memres_json_uint (json, "free_ns_mean", log->frees ? r->free_ns / log->frees : 0);
  memres_json_uint (json, "peak_used_bytes", r->used_peak);
  memres_json_uint (json, "log_peak_used_bytes", log->log_peak);
  if (r->has_reserved)
    memres_json_uint (json, "peak_reserved_bytes", r->reserved_peak);
  else
    memres_json_string (json, "peak_reserved_bytes", NULL);
  memres_json_uint (json, "failures", r->failures);
  memres_json_string (json, "first_failure", r->first_failure);
  memres_json_uint (json, "logged_failures", log->logged_failures);
  memres_json_uint (json, "unmatched_frees", r->unmatched_frees);
  memres_json_uint (json, "live_at_end", r->live_at_end);
}

int
memres_tool_replay (int argc, char **argv)
{
  gboolean json_output = FALSE, threaded = FALSE;
  GOptionEntry entries[] = {
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output, "Print JSON", NULL },
    { "threads", 't', 0, G_OPTION_ARG_NONE, &threaded,
      "Replay on the log's threads and streams (one thread per logged Thread, at most 1024, "
      "one stream per logged Stream over device memory; a free waits for its allocate), not "
      "one after the other on this thread",
      NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  g_autofree Replay *rs = NULL;
  g_autoptr (GPtrArray) specs = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) resources
      = g_ptr_array_new_with_free_func ((GDestroyNotify) memres_resource_unref);
  Log log = { 0 };
  gsize length;
  struct stat log_st;
  guint n, failed = 0;
  int status = 0;

  context = g_option_context_new (
      "LOG SPEC... - replay a log of the log adaptor against one stack or several");
  g_option_context_set_summary (
      context, "LOG is a CSV file the log adaptor wrote (log:path=FILE>...); each SPEC any "
               "resource or stack, replayed in turn (several: a table side by side). Prints the "
               "time per allocate and free, the peak used and reserved bytes, and the "
               "allocations that failed; a failed allocation names LOG:LINE and makes the exit "
               "status 1. Serial by default, so that the figures repeat; --threads replays on "
               "the log's threads and streams.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("replay", error->message);
  if (argc < 3)
    return memres_tool_usage_error ("replay", "expected LOG SPEC...");
  n = (guint) argc - 2;

  /* LOG is read whole first, and a log layer that would write over it (truncating it when
   * created) is refused before anything is created: the input of a command is never
   * destroyed; with --json, a log on stdout would mix its lines into the document */
  if (!memres_tool_read_input (argv[1], &text, &length, &log_st, &error))
    return memres_tool_fail (error);
  for (guint i = 0; i < n; i++)
    if (!memres_tool_check_log_paths (argv[i + 2], &log_st, "the LOG being replayed", &error)
        || !memres_tool_check_log_not_stdout (
            argv[i + 2],
            json_output ? "the standard output, where --json writes its document"
                        : "the standard output, where the table is written (log to a file or "
                          "/dev/stderr)",
            &error))
      return memres_tool_fail (error);
  if (parse_log (argv[1], text, length, &log, &error) && threaded
      && log.threads > REPLAY_MAX_THREADS)
    {
      g_autofree char *shown = memres_tool_show_input (argv[1]);

      g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "%s: %u logged threads: --threads replays each on a thread of its own, at "
                   "most %u; replay it without --threads (one operation after the other)",
                   shown, log.threads, REPLAY_MAX_THREADS);
    }
  if (error != NULL)
    {
      if (log.ops != NULL)
        g_array_unref (log.ops);
      return memres_tool_fail (error);
    }
  rs = g_new0 (Replay, n);
  for (guint i = 0; i < n && status == 0; i++)
    {
      MemresResource *mr = memres_resource_new (argv[i + 2], &error);

      if (mr == NULL)
        {
          status = memres_tool_fail (error);
          break;
        }
      g_ptr_array_add (resources, mr);
      g_ptr_array_add (specs, memres_resource_to_string (mr));
      if (!replay (argv[1], &log, mr, threaded, &rs[i], &error))
        status = memres_tool_fail (error);
      else if (!memres_tool_check_logs_complete (mr, &error))
        {
          /* a log layer of the stack that lost lines fails the command (with --json, the error
           * is the one document; the text summary stays, the error after it) */
          if (!json_output)
            print_text (argv[1], &log, specs->pdata[i], &rs[i]);
          status = memres_tool_fail (error);
        }
      failed += rs[i].failures > 0;
    }
  if (status == 0 && json_output)
    {
      MemresJson json;
      g_autofree char *out = NULL;

      memres_json_init (&json);
      memres_json_begin_object (&json, NULL);
      memres_json_string (&json, "log", argv[1]);
      if (n == 1)
        json_replay (&json, &log, specs->pdata[0], &rs[0]);
      else
        {
          memres_json_begin_array (&json, "replays");
          for (guint i = 0; i < n; i++)
            {
              memres_json_begin_object (&json, NULL);
              json_replay (&json, &log, specs->pdata[i], &rs[i]);
              memres_json_end_object (&json);
            }
          memres_json_end_array (&json);
        }
      memres_json_end_object (&json);
      out = memres_json_finish (&json);
      g_print ("%s", out);
    }
  else if (status == 0 && n == 1)
    print_text (argv[1], &log, specs->pdata[0], &rs[0]);
  else if (status == 0)
    print_table (argv[1], &log, (char **) specs->pdata, rs, n);
  /* a failed allocation fails the command, naming its line (the summary, or the JSON
   * document, printed first) */
  if (status == 0 && failed > 0)
    for (guint i = 0; i < n; i++)
      if (rs[i].first_failure != NULL)
        {
          g_autofree char *spec = memres_tool_one_line (specs->pdata[i]);

          g_printerr ("memres: against %s: %s\n", spec, rs[i].first_failure);
          status = 1;
        }
  for (guint i = 0; i < n; i++)
    g_free (rs[i].first_failure);
  g_array_unref (log.ops);
  return status;
}

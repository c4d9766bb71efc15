/* cmd-trace.c: `memres trace LOG... [-o FILE]`: the CSV logs of `log` layers (one LOG per layer,
 * read by log-csv.c) as one Chrome trace-event JSON document, which Perfetto's UI and
 * chrome://tracing open as it is. Each LOG is a process of the trace (pid 1, 2, ... in the
 * order given, named by its path): a counter track "used bytes" (the bytes live in the layer
 * after each allocate and free, from the log's Sizes) and a counter track "buffers" (the
 * allocations live); for a log with the Tag column (`log:tags=true`) a counter track per tag,
 * "used bytes, tag NAME" ("used bytes, untagged" for buffers without one), the bytes live under
 * it, a free counted under its allocation's tag; for a log with segment lines
 * (`log:segments=true`) a counter track "mapped bytes" (the bytes of the segments mapped below the
 * layer); and instant events (thread-scoped, on the logged Thread) for `allocate failure`, `out of
 * memory`, `free failure`, `trim`, and `sleep POLICY` and `wake POLICY` (the Action as the
 * event's name), with the Size in their args, and for a sleep or wake also its policy and tag
 * ("" in a log without the Tag column), for an allocate failure, an out of memory and a free
 * failure of a log with the Tag column also its tag (the request's; the buffer's whose free
 * failed). For a log with the Backtrace column (`log:backtrace=true`)
 * each allocate with a stack is also an instant event "allocate" (its Size and Pointer in its
 * args), and it, an allocate failure and an out of memory name their stack with "sf": the id of
 * its innermost frame in the document's "stackFrames", where each distinct frame (its text as
 * logged, decoded) is once under its parent, the frame that called it, as Perfetto's UI and
 * chrome://tracing read stacks. Times are the log's Time (local wall-clock HH:MM:SS.uuuuuu)
 * in microseconds since the first line of all the logs, a day added each time a log's time goes
 * back by more than 12 hours (past midnight), a line whose time goes back by less at the time of
 * the line before it (log-walk.c): the events of a log keep its order. A malformed line is an
 * error naming FILE:LINE (exit status 2), as in replay. */
#include "memres-tool.h"

#include <string.h>

typedef struct
{
  char *path;
  char *text;
  gsize length;
} Input;

/* One event of the trace, before the times are made relative. */
typedef struct
{
  gint64 ts;
  guint pid;
  const char *name;      /* an instant's action, or NULL for the counters */
  const char *tid;       /* the logged Thread (points into the log's text) */
  const char *pointer;   /* an allocate's instant: its Pointer (into the text), else NULL */
  const char *tag;       /* counters of one tag ("" the untagged; into the text), or NULL; a sleep's
                          * or wake's tag */
  const char *policy;    /* a sleep's or wake's policy, or NULL */
  const char *backtrace; /* an instant's Backtrace field (into the text), "" or NULL: none */
  gboolean mapped;       /* the counter of mapped bytes (a segment line) */
  guint64 value;         /* counters: the used (mapped) bytes; instants: the Size */
  guint64 buffers;       /* counters: the live allocations */
  guint seq;             /* the order read, for equal times */
} Event;

typedef struct
{
  guint pid;
  GArray *events;
  GHashTable *tag_used; /* tag -> guint64* bytes live under it */
} Reading;

static gboolean
add_event (const MemresLogEvent *le, gpointer user_data, GError **error)
{
  Reading *r = user_data;
  Event e = { 0 };

  e.ts = le->ts;
  e.seq = r->events->len;
  e.pid = r->pid;
  e.tid = le->l.thread;
  switch (le->l.action)
    {
    case MEMRES_LOG_FREE:
      if (!le->counted) /* of an allocation made before the log began */
        return TRUE;
      break;
    case MEMRES_LOG_SEGMENT_MAPPED:
    case MEMRES_LOG_SEGMENT_GROWN:
    case MEMRES_LOG_SEGMENT_UNMAPPING:
      e.mapped = TRUE;
      e.value = le->mapped;
      g_array_append_val (r->events, e);
      return TRUE;
    default:
      break;
    }
  if (le->counted && le->tagged)
    {
      /* the tag's own track first, then the layer's: the tag of a free is its allocation's */
      const char *tag = le->l.action == MEMRES_LOG_ALLOCATE ? le->l.tag : le->alloc_tag;
      guint64 *used = g_hash_table_lookup (r->tag_used, tag);
      Event t = e;

      if (used == NULL)
        {
          used = g_new0 (guint64, 1);
          g_hash_table_insert (r->tag_used, (gpointer) tag, used);
        }
      if (le->l.action == MEMRES_LOG_ALLOCATE)
        *used += le->l.size;
      else
        *used -= le->alloc_size;
      t.tag = tag;
      t.value = *used;
      g_array_append_val (r->events, t);
      e.seq = r->events->len;
    }
  if (le->counted)
    {
      e.value = le->used;
      e.buffers = le->buffers;
      if (le->l.action == MEMRES_LOG_ALLOCATE && le->l.backtrace[0] != '\0')
        {
          /* the counters, then an instant that carries the allocation's stack */
          Event a = e;

          g_array_append_val (r->events, e);
          a.seq = r->events->len;
          a.name = le->l.action_name;
          a.value = le->l.size;
          a.pointer = le->l.pointer_text;
          a.backtrace = le->l.backtrace;
          g_array_append_val (r->events, a);
          return TRUE;
        }
    }
  else
    {
      e.name = le->l.action_name;
      e.value = le->l.size;
      e.backtrace = le->l.backtrace;
      if (le->l.policy != NULL)
        {
          e.policy = le->l.policy;
          e.tag = le->l.tag;
        }
      else if (le->tagged
               && (le->l.action == MEMRES_LOG_ALLOCATE_FAILURE
                   || le->l.action == MEMRES_LOG_OUT_OF_MEMORY
                   || le->l.action == MEMRES_LOG_FREE_FAILURE))
        e.tag = le->l.tag; /* the failed request's, or the buffer's whose free failed */
    }
  g_array_append_val (r->events, e);
  return TRUE;
}

/* The events of one log (process @pid) appended to @events. */
static gboolean
read_events (Input *in, guint pid, GArray *events, GError **error)
{
  Reading r = { pid, events, g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free) };
  gboolean ok = memres_tool_walk_log (in->path, in->text, in->length, add_event, &r, error);

  g_hash_table_unref (r.tag_used);
  return ok;
}

static gint
event_compare (gconstpointer a, gconstpointer b)
{
  const Event *x = a, *y = b;

  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The trace's "stackFrames": each distinct frame once under its parent (the frame that called
 * it; none for the outermost), ids from 1, so that a stack is the id of its innermost frame (an
 * event's "sf"); the frames of a Backtrace field decoded (log-csv.c). */
typedef struct
{
  GString *json;       /* the members of "stackFrames" */
  GHashTable *node_of; /* "PARENT\x1fTEXT" (owned) -> id */
  GHashTable *leaf_of; /* a Backtrace field as logged (into the text) -> its innermost frame's id */
  guint n;
} Frames;

static guint
frames_leaf (Frames *f, const char *field)
{
  gpointer found = g_hash_table_lookup (f->leaf_of, field);
  g_auto (GStrv) frames = NULL;
  guint parent = 0;

  if (found != NULL)
    return GPOINTER_TO_UINT (found);
  frames = memres_tool_log_frames (field);
  for (guint i = g_strv_length (frames); i-- > 0;)
    {
      char *key = g_strdup_printf ("%u\x1f%s", parent, frames[i]);
      guint id = GPOINTER_TO_UINT (g_hash_table_lookup (f->node_of, key));

      if (id == 0)
        {
          id = ++f->n;
          g_string_append_printf (f->json, "%s\n\"%u\": {\"name\": ", id > 1 ? "," : "", id);
          memres_json_append_string (f->json, frames[i]);
          if (parent != 0)
            g_string_append_printf (f->json, ", \"parent\": \"%u\"", parent);
          g_string_append_c (f->json, '}');
          g_hash_table_insert (f->node_of, key, GUINT_TO_POINTER (id));
        }
      else
        g_free (key);
      parent = id;
    }
  g_hash_table_insert (f->leaf_of, (gpointer) field, GUINT_TO_POINTER (parent));
  return parent;
}

/* The document: metadata naming each process, then the events in time order, one a line, then
 * the stack frames their "sf" names. */
static char *
write_trace (Input *inputs, guint n_inputs, GArray *events)
{
  GString *s = g_string_new ("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [");
  gint64 t0 = events->len > 0 ? g_array_index (events, Event, 0).ts : 0;
  gboolean first = TRUE;
  Frames frames
      = { g_string_new (NULL), g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL),
          g_hash_table_new (g_str_hash, g_str_equal), 0 };

  for (guint i = 0; i < n_inputs; i++)
    {
      g_string_append_printf (s,
                              "%s\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %u, "
                              "\"args\": {\"name\": ",
                              first ? "" : ",", i + 1);
      memres_json_append_string (s, inputs[i].path);
      g_string_append (s, "}}");
      first = FALSE;
    }
  for (guint i = 0; i < events->len; i++)
    {
      const Event *e = &g_array_index (events, Event, i);
      gint64 ts = e->ts - t0;

      if (e->mapped)
        g_string_append_printf (
            s,
            ",\n{\"name\": \"mapped bytes\", \"ph\": \"C\", \"ts\": %" G_GINT64_FORMAT
            ", \"pid\": %u, \"args\": {\"mapped\": %" G_GUINT64_FORMAT "}}",
            ts, e->pid, e->value);
      else if (e->tag != NULL && e->name == NULL)
        {
          g_autofree char *name = g_strdup_printf ("used bytes, %s%s",
                                                   e->tag[0] != '\0' ? "tag " : "untagged", e->tag);

          g_string_append (s, ",\n{\"name\": ");
          memres_json_append_string (s, name);
          g_string_append_printf (s,
                                  ", \"ph\": \"C\", \"ts\": %" G_GINT64_FORMAT
                                  ", \"pid\": %u, \"args\": {\"used\": %" G_GUINT64_FORMAT "}}",
                                  ts, e->pid, e->value);
        }
      else if (e->name == NULL)
        g_string_append_printf (
            s,
            ",\n{\"name\": \"used bytes\", \"ph\": \"C\", \"ts\": %" G_GINT64_FORMAT
            ", \"pid\": %u, \"args\": {\"used\": %" G_GUINT64_FORMAT "}},\n"
            "{\"name\": \"buffers\", \"ph\": \"C\", \"ts\": %" G_GINT64_FORMAT
            ", \"pid\": %u, \"args\": {\"live\": %" G_GUINT64_FORMAT "}}",
            ts, e->pid, e->value, ts, e->pid, e->buffers);
      else
        {
          g_string_append_printf (
              s,
              ",\n{\"name\": \"%s\", \"ph\": \"i\", \"s\": \"t\", \"ts\": %" G_GINT64_FORMAT
              ", \"pid\": %u, \"tid\": ",
              e->name, ts, e->pid);
          memres_json_append_string (s, e->tid);
          g_string_append_printf (s, ", \"args\": {\"size\": %" G_GUINT64_FORMAT, e->value);
          if (e->pointer != NULL)
            {
              g_string_append (s, ", \"pointer\": ");
              memres_json_append_string (s, e->pointer);
            }
          if (e->policy != NULL)
            {
              g_string_append_printf (s, ", \"policy\": \"%s\"", e->policy);
            }
          if (e->tag != NULL)
            {
              g_string_append (s, ", \"tag\": ");
              memres_json_append_string (s, e->tag);
            }
          g_string_append_c (s, '}');
          if (e->backtrace != NULL && e->backtrace[0] != '\0')
            g_string_append_printf (s, ", \"sf\": %u", frames_leaf (&frames, e->backtrace));
          g_string_append_c (s, '}');
        }
    }
  g_string_append (s, "\n]");
  if (frames.n > 0)
    g_string_append_printf (s, ",\n\"stackFrames\": {%s\n}", frames.json->str);
  g_string_append (s, "}\n");
  g_string_free (frames.json, TRUE);
  g_hash_table_unref (frames.node_of);
  g_hash_table_unref (frames.leaf_of);
  return g_string_free (s, FALSE);
}

int
memres_tool_trace (int argc, char **argv)
{
  g_autofree char *output = NULL;
  gboolean json_output = FALSE; /* the trace is JSON already: --json makes the errors JSON */
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
      "Write the trace to FILE (default: the standard output)", "FILE" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output,
      "Print errors as JSON (the trace is JSON already)", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) events = g_array_new (FALSE, TRUE, sizeof (Event));
  g_autofree Input *inputs = NULL;
  g_autofree char *doc = NULL;
  guint n;
  int status = 0;

  context = g_option_context_new ("LOG... - a log adaptor's CSV logs as a Perfetto trace");
  g_option_context_set_summary (
      context, "Writes the CSV logs of log layers (one LOG per layer) as one Chrome "
               "trace-event JSON document, which Perfetto's UI and chrome://tracing open: per "
               "LOG a counter track of used bytes and one of live buffers, with the Tag "
               "column (log:tags=true) a track of used bytes per tag, with segment lines "
               "(log:segments=true) a track of mapped bytes, and instant events for allocate "
               "failure, out of memory, free failure, trim, sleep and wake; with the Backtrace "
               "column (log:backtrace=true) an instant per allocate too, and each allocate, "
               "allocate failure and out of memory carries its call stack (stackFrames, sf).");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("trace", error->message);
  if (argc < 2)
    return memres_tool_usage_error ("trace", "expected LOG...");
  n = (guint) argc - 1;
  inputs = g_new0 (Input, n);
  for (guint i = 0; i < n && status == 0; i++)
    {
      inputs[i].path = argv[i + 1];
      if (memres_tool_output_is_input (output, argv[i + 1], "LOG", i + 1, "trace", "log", &error))
        status = memres_tool_fail (error);
      else if (!memres_tool_read_input (argv[i + 1], &inputs[i].text, &inputs[i].length, NULL,
                                        &error)
               || !read_events (&inputs[i], i + 1, events, &error))
        status = memres_tool_fail (error);
    }
  if (status == 0)
    {
      /* stable: the events of one log keep their order at equal times */
      g_array_sort (events, event_compare);
      doc = write_trace (inputs, n, events);
      if (output == NULL || strcmp (output, "-") == 0)
        g_print ("%s", doc);
      else if (!memres_file_replace (output, doc, -1, &error))
        status = memres_tool_fail (error);
    }
  for (guint i = 0; i < n; i++)
    g_free (inputs[i].text);
  return status;
}

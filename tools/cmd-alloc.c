/* cmd-alloc.c: `memres alloc [SPEC|default] SIZE`: allocates a buffer by name, fills it with a
 * pattern, copies it back into host memory, verifies every byte, prints the buffer and the
 * resource's statistics, and closes it. A 0-byte buffer is empty: nothing to fill or check.
 * `default` that is host memory says why. For a stack (`stats>limit:max=1GiB>host`, `@NAME`),
 * each layer with its kind, options and own statistics after the allocation. A `log` layer
 * that lost lines fails the command (exit status 1); with --json, a `log` layer on the file of
 * stdout is refused before the stack is created (logs.c). */
#include "memres-tool.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_PATTERN 0xc0ffee42u

typedef struct
{
  char *spec;
  gboolean is_default; /* `default` was asked for */
  char *host_reason;   /* it is host memory: why; else NULL */
  guint64 size;        /* requested */
  guint64 actual;      /* the buffer's size: more than requested where the kind rounds up */
  guint32 pattern;
  guint width;
  MemresStats stats;
  gboolean has_stats;
  char *stats_error;
} AllocReport;

static void
alloc_report_clear (AllocReport *r)
{
  g_free (r->spec);
  g_free (r->host_reason);
  g_free (r->stats_error);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (AllocReport, alloc_report_clear)

static gboolean
parse_pattern (const char *text, guint32 *pattern, GError **error)
{
  g_autofree char *shown = NULL;
  guint64 value;

  if (!g_ascii_string_to_unsigned (text, g_str_has_prefix (text, "0x") ? 16 : 10, 0, G_MAXUINT32,
                                   &value, NULL)
      && !(g_str_has_prefix (text, "0x")
           && g_ascii_string_to_unsigned (text + 2, 16, 0, G_MAXUINT32, &value, NULL)))
    {
      shown = memres_tool_show_input (text);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "--pattern: invalid pattern \"%s\": expected a 32-bit number, decimal or "
                   "0x-hex",
                   shown);
      return FALSE;
    }
  *pattern = (guint32) value;
  return TRUE;
}

/* An operand that is meant as a SIZE (it starts with a digit or a sign) rather than a spec. */
static gboolean
looks_like_size (const char *text)
{
  return g_ascii_isdigit (text[0]) || text[0] == '-' || text[0] == '+' || text[0] == '.';
}

/* SIZE: what memres_parse_size() takes, but not `max` (nothing can allocate G_MAXUINT64
 * bytes; `max` is for options such as max_size). */
static gboolean
parse_alloc_size (const char *text, guint64 *size, GError **error)
{
  if (memres_tool_size_too_large (text))
    {
      g_autofree char *shown = memres_tool_show_input (text);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "SIZE \"%s\" is too large: at most %" G_GUINT64_FORMAT " bytes", shown,
                   G_MAXUINT64);
      return FALSE;
    }
  if (strcmp (text, "max") == 0 || !memres_parse_size (text, size, NULL))
    {
      g_autofree char *shown = memres_tool_show_input (text);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "invalid SIZE \"%s\": expected a non-negative whole number of bytes with an "
                   "optional B, KiB, MiB, GiB, TiB or PiB suffix",
                   shown);
      return FALSE;
    }
  return TRUE;
}

/* The byte at @offset of a buffer filled with @pattern in elements of @width bytes. */
static guint8
expected_byte (guint32 pattern, guint width, gsize offset)
{
  guint8 element[4];

  if (width == 1)
    return (guint8) pattern;
  memcpy (element, &pattern, 4); /* host byte order, like the fill */
  return element[offset % 4];
}

/* Fills @buf, copies it into a new host buffer and checks every byte. */
static gboolean
fill_and_verify (MemresBuffer *buf, guint32 pattern, guint width, GError **error)
{
  g_autoptr (MemresResource) host = NULL;
  g_autoptr (MemresBuffer) copy = NULL;
  gsize size = memres_buffer_get_size (buf);
  const guint8 *bytes;
  gsize i;

  if (!memres_buffer_fill (buf, width == 1 ? (pattern & 0xff) : pattern, width, NULL, error))
    return FALSE;
  host = memres_resource_new ("host", error);
  if (host == NULL)
    return FALSE;
  copy = memres_resource_allocate (host, size, NULL, error);
  if (copy == NULL)
    return FALSE;
  /* zero the copy first, so that a copy that does nothing cannot pass */
  if (size > 0 && !memres_buffer_fill (copy, 0, 1, NULL, error))
    return FALSE;
  if (!memres_buffer_copy_to (buf, copy, NULL, error))
    return FALSE;
  if (!memres_buffer_is_host_accessible (buf) || memres_buffer_is_device_accessible (buf))
    if (!memres_stream_synchronize (NULL, error))
      return FALSE;

  bytes = memres_buffer_get_pointer (copy);
  for (i = 0; i < size; i++)
    if (bytes[i] != expected_byte (pattern, width, i))
      {
        g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED,
                     "verification failed at byte %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
                     ": read 0x%02x, expected 0x%02x",
                     i, size, bytes[i], expected_byte (pattern, width, i));
        return FALSE;
      }
  return memres_buffer_close (copy, NULL, error);
}

/* One layer of a stack: its own spec (the stack from it, less the stack below it). */
static char *
layer_spec (MemresResource *layer)
{
  g_autofree char *all = memres_resource_to_string (layer);
  MemresResource *up = memres_resource_get_upstream (layer);
  g_autofree char *below = up != NULL ? memres_resource_to_string (up) : NULL;

  if (below == NULL || strlen (below) + 1 > strlen (all))
    return g_steal_pointer (&all);
  return g_strndup (all, strlen (all) - strlen (below) - 1);
}

/* The counts per tag of a counted layer (memres-tags.h), one line each; nothing for a layer that
 * does not count. */
static void
print_tags_text (MemresResource *layer)
{
  g_auto (GStrv) tags = memres_resource_list_tags (layer, NULL);

  for (guint k = 0; tags != NULL && tags[k] != NULL; k++)
    {
      MemresTagCounts c;
      g_autofree char *name = memres_tool_one_line (tags[k]);

      if (!memres_resource_get_tag_counts (layer, tags[k], &c, NULL))
        continue;
      {
        g_autofree char *current = memres_tool_format_size (c.bytes_current);
        g_autofree char *peak = memres_tool_format_size (c.bytes_peak);
        g_autofree char *total = memres_tool_format_size (c.bytes_total);

        g_print ("             tag %s: %s in %" G_GUINT64_FORMAT
                 " buffer%s, peak %s; total %s in %" G_GUINT64_FORMAT " allocation%s\n",
                 name, current, c.count_current, c.count_current == 1 ? "" : "s", peak, total,
                 c.count_total, c.count_total == 1 ? "" : "s");
      }
    }
}

static void
print_tags_json (MemresJson *json, MemresResource *layer)
{
  g_auto (GStrv) tags = memres_resource_list_tags (layer, NULL);

  if (tags == NULL)
    return;
  memres_json_begin_array (json, "tags");
  for (guint k = 0; tags[k] != NULL; k++)
    {
      MemresTagCounts c;

      if (!memres_resource_get_tag_counts (layer, tags[k], &c, NULL))
        continue;
      memres_json_begin_object (json, NULL);
      memres_json_string (json, "tag", tags[k]);
      memres_json_uint (json, "bytes_current", c.bytes_current);
      memres_json_uint (json, "bytes_peak", c.bytes_peak);
      memres_json_uint (json, "bytes_total", c.bytes_total);
      memres_json_uint (json, "count_current", c.count_current);
      memres_json_uint (json, "count_peak", c.count_peak);
      memres_json_uint (json, "count_total", c.count_total);
      memres_json_end_object (json);
    }
  memres_json_end_array (json);
}

static void
print_layers_text (MemresResource *mr)
{
  MemresResource *layer;
  guint i = 1;

  if (memres_resource_get_upstream (mr) == NULL)
    return;
  for (layer = mr; layer != NULL; layer = memres_resource_get_upstream (layer), i++)
    {
      g_autofree char *raw = layer_spec (layer);
      g_autofree char *spec = memres_tool_one_line (raw);
      g_autoptr (GError) error = NULL;
      MemresStats st;

      g_print ("%s%u  %s\n", i == 1 ? "layers    " : "          ", i, spec);
      if (memres_resource_get_stats (layer, &st, &error))
        {
          g_autofree char *used = memres_tool_format_size (st.used_current);
          g_autofree char *used_high = memres_tool_format_size (st.used_high);
          g_autofree char *reserved = memres_tool_format_size (st.reserved_current);

          g_print ("             used %s, high %s; reserved %s; %" G_GUINT64_FORMAT
                   " live buffer%s of its own\n",
                   used, used_high, reserved, st.n_buffers, st.n_buffers == 1 ? "" : "s");
        }
      else
        {
          g_autofree char *msg = memres_tool_one_line (error->message);
          g_print ("             %s\n", msg);
        }
      print_tags_text (layer);
    }
}

static void
print_layers_json (MemresJson *json, MemresResource *mr)
{
  MemresResource *layer;
  guint i = 1;

  memres_json_begin_array (json, "layers");
  for (layer = mr; layer != NULL; layer = memres_resource_get_upstream (layer), i++)
    {
      g_autofree char *spec = layer_spec (layer);
      g_autoptr (GError) error = NULL;
      MemresStats st;

      memres_json_begin_object (json, NULL);
      memres_json_uint (json, "position", i);
      memres_json_string (json, "kind", memres_resource_get_kind_name (layer));
      memres_json_string (json, "spec", spec);
      memres_json_bool (json, "adaptor", memres_resource_get_upstream (layer) != NULL);
      if (memres_resource_get_stats (layer, &st, &error))
        {
          memres_json_begin_object (json, "stats");
          memres_json_uint (json, "reserved_current", st.reserved_current);
          memres_json_uint (json, "reserved_high", st.reserved_high);
          memres_json_uint (json, "used_current", st.used_current);
          memres_json_uint (json, "used_high", st.used_high);
          memres_json_uint (json, "n_buffers", st.n_buffers);
          memres_json_end_object (json);
        }
      else
        {
          memres_json_string (json, "stats", NULL);
          memres_json_string (json, "stats_error", error->message);
        }
      print_tags_json (json, layer);
      memres_json_end_object (json);
    }
  memres_json_end_array (json);
}

#define CLOSED_LINE "closed    the buffer was freed\n"

/* The report, held back while the buffer is closed (g_set_print_handler()). */
static GString *report_text;

static void
hold_back (const char *text)
{
  g_string_append (report_text, text);
}

static void
print_text (MemresResource *mr, MemresBuffer *buf, const AllocReport *r)
{
  g_autofree char *size = memres_tool_format_size (r->actual);
  g_auto (GStrv) flags = memres_tool_flag_names (memres_buffer_get_flags (buf));
  g_autofree char *flag_text = g_strjoinv (", ", flags);
  gint device = memres_buffer_get_device (buf);
  g_autofree char *spec = memres_tool_one_line (r->spec);

  g_print ("resource  %s\n", spec);
  if (r->host_reason != NULL)
    {
      g_autofree char *reason = memres_tool_one_line (r->host_reason);
      g_print ("default   host memory: %s\n", reason);
    }
  g_print ("buffer    %s at 0x%" G_GINT64_MODIFIER "x, %s", size, memres_buffer_get_address (buf),
           device >= 0 ? "device " : "host memory");
  if (device >= 0)
    g_print ("%d", device);
  if (r->actual != r->size)
    {
      g_autofree char *asked = memres_tool_format_bytes (r->size);
      g_print (" (rounded up from %s)", asked);
    }
  g_print ("\nflags     %s\n", flag_text[0] != '\0' ? flag_text : "none");
  if (memres_buffer_get_tag (buf) != NULL)
    {
      g_autofree char *tag = memres_tool_one_line (memres_buffer_get_tag (buf));
      g_print ("tag       %s\n", tag);
    }
  if (r->actual == 0)
    g_print ("verified  nothing: a 0-byte buffer is empty (address 0, nothing to write or read)\n");
  else if (r->width == 1)
    g_print ("verified  filled with 0x%02x, copied back into host memory, every byte checked "
             "(%" G_GUINT64_FORMAT ")\n",
             r->pattern & 0xff, r->actual);
  else
    g_print ("verified  filled with the 4-byte pattern 0x%08x, copied back into host memory, "
             "every byte checked (%" G_GUINT64_FORMAT ")\n",
             r->pattern, r->actual);
  if (r->has_stats)
    {
      g_autofree char *used = memres_tool_format_size (r->stats.used_current);
      g_autofree char *used_high = memres_tool_format_size (r->stats.used_high);
      g_autofree char *reserved = memres_tool_format_size (r->stats.reserved_current);
      g_autofree char *reserved_high = memres_tool_format_size (r->stats.reserved_high);

      g_print ("stats     used %s, high %s\n", used, used_high);
      g_print ("          reserved %s, high %s\n", reserved, reserved_high);
      g_print ("          %" G_GUINT64_FORMAT " live buffer%s\n", r->stats.n_buffers,
               r->stats.n_buffers == 1 ? "" : "s");
    }
  else
    {
      g_autofree char *stats_error = memres_tool_one_line (r->stats_error);
      g_print ("stats     %s\n", stats_error);
    }
  print_layers_text (mr);
  g_print (CLOSED_LINE);
}

static void
print_json (MemresResource *mr, MemresBuffer *buf, const AllocReport *r)
{
  g_auto (GStrv) flags = memres_tool_flag_names (memres_buffer_get_flags (buf));
  MemresJson json;
  g_autofree char *out = NULL;
  g_autofree char *address
      = g_strdup_printf ("0x%" G_GINT64_MODIFIER "x", memres_buffer_get_address (buf));
  guint i;

  memres_json_init (&json);
  memres_json_begin_object (&json, NULL);
  memres_json_string (&json, "resource", r->spec);
  memres_json_string (&json, "kind", memres_resource_get_kind_name (mr));
  if (r->is_default)
    memres_json_string (&json, "default_host_reason", r->host_reason);
  memres_json_begin_object (&json, "buffer");
  memres_json_string (&json, "address", address);
  memres_json_uint (&json, "size", r->actual);
  memres_json_uint (&json, "requested_size", r->size);
  memres_json_int (&json, "device", memres_buffer_get_device (buf));
  memres_json_string (&json, "tag", memres_buffer_get_tag (buf));
  memres_json_begin_array (&json, "flags");
  for (i = 0; flags[i] != NULL; i++)
    memres_json_string (&json, NULL, flags[i]);
  memres_json_end_array (&json);
  memres_json_end_object (&json);
  memres_json_uint (&json, "pattern", r->width == 1 ? (r->pattern & 0xff) : r->pattern);
  memres_json_uint (&json, "pattern_width", r->width);
  memres_json_uint (&json, "verified_bytes", r->actual); /* 0: empty, nothing written */
  if (r->has_stats)
    {
      memres_json_begin_object (&json, "stats");
      memres_json_uint (&json, "reserved_current", r->stats.reserved_current);
      memres_json_uint (&json, "reserved_high", r->stats.reserved_high);
      memres_json_uint (&json, "used_current", r->stats.used_current);
      memres_json_uint (&json, "used_high", r->stats.used_high);
      memres_json_uint (&json, "n_buffers", r->stats.n_buffers);
      memres_json_end_object (&json);
    }
  else
    {
      memres_json_string (&json, "stats", NULL);
      memres_json_string (&json, "stats_error", r->stats_error);
    }
  print_layers_json (&json, mr);
  memres_json_bool (&json, "closed", TRUE);
  memres_json_end_object (&json);
  out = memres_json_finish (&json);
  g_print ("%s", out);
}

int
memres_tool_alloc (int argc, char **argv)
{
  gboolean json_output = FALSE;
  gint device = G_MININT; /* not given: 0 */
  g_autofree char *pattern_text = NULL;
  g_autofree char *tag = NULL;
  GOptionEntry entries[] = {
    { "device", 'd', 0, G_OPTION_ARG_INT, &device, "Device of the default resource (default 0)",
      "N" },
    { "pattern", 'p', 0, G_OPTION_ARG_FILENAME, &pattern_text,
      "32-bit fill pattern (default 0xc0ffee42; its low byte when SIZE is not a multiple of 4)",
      "VALUE" },
    { "tag", 't', 0, G_OPTION_ARG_STRING, &tag,
      "Allocate under this tag (memres-tags.h; counted per tag in the stack's stats layers)",
      "NAME" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output, "Print JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  const char *spec, *size_text;
  g_autofree char *default_spec = NULL;
  g_auto (AllocReport) r = { 0 };
  gboolean ok = TRUE, logs_ok;

  context = g_option_context_new ("[SPEC|default] SIZE - allocate a buffer by name and verify it");
  g_option_context_set_summary (
      context, "SPEC is KIND[:KEY=VALUE,...], for example \"host\" or "
               "\"dmr:device=0,release_threshold=1GiB\", or a stack of layers joined by '>' "
               "(\"stats>limit:max=1GiB>dmr\"), or @NAME from the config file (memres "
               "resources); \"default\" (or no SPEC) is the "
               "device's memory pool where a GPU exists, host memory otherwise (then it says "
               "why).\nSIZE is a non-negative number of bytes with an optional B, KiB, MiB, GiB, "
               "TiB or PiB suffix; 0 is an empty buffer, with nothing to fill or verify.");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("alloc", error->message);
  if (argc == 2 && !looks_like_size (argv[1]))
    return memres_tool_usage_error_input ("alloc", "SIZE is missing after \"%s\"", argv[1]);
  if (argc == 2)
    {
      spec = "default";
      size_text = argv[1];
    }
  else if (argc == 3)
    {
      spec = argv[1];
      size_text = argv[2];
    }
  else if (argc == 1)
    return memres_tool_usage_error ("alloc", "SIZE is missing (expected [SPEC|default] SIZE)");
  else
    return memres_tool_usage_error ("alloc", "too many operands (expected [SPEC|default] SIZE)");

  if (!parse_alloc_size (size_text, &r.size, &error))
    return memres_tool_usage_error ("alloc", error->message);
  /* a name that cannot be a tag (empty, too long, not UTF-8) is a bad option value */
  if (tag != NULL && !memres_tag_check_name (tag, &error))
    {
      g_autofree char *message = g_strdup_printf ("--tag: %s", error->message);
      return memres_tool_usage_error ("alloc", message);
    }
  if (device != G_MININT && strcmp (spec, "default") != 0)
    return memres_tool_usage_error ("alloc", "--device applies to \"default\" only: name the "
                                             "device in the spec (for example dmr:device=1)");
  if (device == G_MININT)
    device = 0;
  if (device < -1)
    return memres_tool_usage_error ("alloc", "--device takes a device ordinal (0 or more) or -1 "
                                             "for host memory");
  if (r.size > G_MAXSIZE)
    {
      g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "cannot allocate %s bytes",
                   size_text);
      return memres_tool_fail (error);
    }
  r.pattern = DEFAULT_PATTERN;
  if (pattern_text != NULL && !parse_pattern (pattern_text, &r.pattern, &error))
    return memres_tool_fail (error);
  if (tag != NULL && !memres_tag_push (tag, &error))
    return memres_tool_fail (error);

  /* what memres_resource_get_default() makes, with the reason when it is host memory */
  r.is_default = strcmp (spec, "default") == 0;
  if (r.is_default)
    {
      default_spec = memres_resource_get_default_spec (device, &r.host_reason, &error);
      if (default_spec == NULL)
        return memres_tool_fail (error);
      spec = default_spec;
    }
  /* a log on stdout would mix its lines into the report: refused before it is created */
  if (!memres_tool_check_log_not_stdout (
          spec,
          json_output ? "the standard output, where --json writes its document"
                      : "the standard output, where the report is written (log to a file or "
                        "/dev/stderr)",
          &error))
    return memres_tool_fail (error);
  mr = memres_resource_new (spec, &error);
  if (mr == NULL)
    return memres_tool_fail (error);
  r.spec = memres_resource_to_string (mr);

  buf = memres_resource_allocate (mr, (gsize) r.size, NULL, &error);
  if (buf == NULL)
    return memres_tool_fail (error);
  r.actual = memres_buffer_get_size (buf);
  r.width = r.actual % 4 == 0 ? 4 : 1;
  if (r.actual > 0)
    ok = fill_and_verify (buf, r.pattern, r.width, &error);
  if (ok)
    {
      g_autoptr (GError) stats_error = NULL;
      r.has_stats = memres_resource_get_stats (mr, &r.stats, &stats_error);
      if (!r.has_stats)
        r.stats_error = g_strdup (stats_error->message);
      GPrintFunc print_handler;

      /* The report says the buffer was closed: it is held back until the close succeeded,
       * so that a failing close leaves stdout with the error alone (with --json, one
       * document) */
      report_text = g_string_new (NULL);
      print_handler = g_set_print_handler (hold_back);
      if (json_output)
        print_json (mr, buf, &r);
      else
        print_text (mr, buf, &r);
      g_set_print_handler (print_handler);
      ok = memres_buffer_close (buf, NULL, &error);
      if (!ok && !json_output && g_str_has_suffix (report_text->str, CLOSED_LINE))
        g_string_truncate (report_text, report_text->len - strlen (CLOSED_LINE));
      /* a log that lost lines fails the command; the text report stays true (with --json,
       * the error is the one document) */
      logs_ok = !ok || memres_tool_check_logs_complete (mr, &error);
      if ((ok && logs_ok) || !json_output)
        g_print ("%s", report_text->str);
      g_string_free (g_steal_pointer (&report_text), TRUE);
      ok = ok && logs_ok;
    }
  if (!ok)
    return memres_tool_fail (error);
  return 0;
}

/* memres-bench: results, printed as a table (people) or JSON (bench/report.py). JSON holds the
 * raw statistics in ns per unit; the table converts to the unit a reader wants (GB/s for copies,
 * ms per GiB for grows). */
#include "bench-common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

BenchSection *
bench_section_new (const char *name, const char *title, const char *unit, const char *raw_desc)
{
  BenchSection *section = g_new0 (BenchSection, 1);

  section->name = g_strdup (name);
  section->title = g_strdup (title);
  section->unit = g_strdup (unit);
  section->raw_desc = g_strdup (raw_desc);
  section->rows = g_ptr_array_new ();
  return section;
}

static void
row_free (gpointer data)
{
  BenchRow *row = data;

  g_free (row->label);
  for (guint v = 0; v < BENCH_MAX_VARIANTS; v++)
    g_free (row->variant_names[v]);
  g_free (row->error);
  g_free (row->note);
  g_free (row);
}

void
bench_section_free (BenchSection *section)
{
  if (section == NULL)
    return;
  g_ptr_array_set_free_func (section->rows, row_free);
  g_ptr_array_unref (section->rows);
  g_free (section->name);
  g_free (section->title);
  g_free (section->unit);
  g_free (section->raw_desc);
  g_free (section->note);
  g_free (section);
}

BenchRow *
bench_section_add_row (BenchSection *section, const char *label, guint64 size, guint threads)
{
  BenchRow *row = g_new0 (BenchRow, 1);

  row->label = g_strdup (label);
  row->size = size;
  row->threads = threads;
  row->ratio = row->ratio_q1 = row->ratio_q3 = NAN;
  for (guint v = 0; v < BENCH_MAX_VARIANTS; v++)
    row->variant_ratio[v] = NAN;
  g_ptr_array_add (section->rows, row);
  return row;
}

void
bench_row_set_error (BenchRow *row, const GError *error)
{
  g_free (row->error);
  row->error = g_strdup (error != NULL ? error->message : "failed");
}

/* "256 B", "4 KiB", "1.5 MiB": exact binary units where they fit. */
char *
bench_format_size (guint64 bytes)
{
  static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
  gdouble v = bytes;
  guint u = 0;

  while (v >= 1024 && u + 1 < G_N_ELEMENTS (units))
    {
      v /= 1024;
      u++;
    }
  if (v == floor (v))
    return g_strdup_printf ("%.0f %s", v, units[u]);
  return g_strdup_printf ("%.3g %s", v, units[u]);
}

int
bench_row_variant_index (const BenchRow *row, const char *name)
{
  for (guint v = 0; v < row->n_variants; v++)
    if (g_strcmp0 (row->variant_names[v], name) == 0)
      return (int) v;
  return -1;
}

static const BenchSummary *
find_variant (const BenchRow *row, const char *name)
{
  int v = bench_row_variant_index (row, name);

  return v < 0 ? NULL : &row->summaries[v];
}

/* ---- table --------------------------------------------------------------------------------- */

typedef struct
{
  const char *unit;
  gboolean higher_is_better;
  gdouble scale; /* display = scale / ns (rates) or ns * scale (times) */
} Display;

static Display
section_display (const BenchContext *ctx, const BenchSection *section, const BenchRow *row)
{
  if (g_str_equal (section->name, "copy"))
    return (Display){ "GB/s", TRUE, (gdouble) row->size };
  if (g_str_equal (section->name, "vmm_grow"))
    return (Display){ "ms/GiB", FALSE, 1e-6 / ((gdouble) ctx->config->grow_size / BENCH_GIB) };
  return (Display){ section->unit, FALSE, 1.0 };
}

static gdouble
display_value (const Display *d, gdouble ns)
{
  return d->higher_is_better ? d->scale / ns : ns * d->scale;
}

static char *
format_cell (const Display *d, const BenchSummary *s)
{
  gdouble m = display_value (d, s->median), a = display_value (d, s->q1),
          b = display_value (d, s->q3);

  return g_strdup_printf ("%.4g [%.4g-%.4g]", m, MIN (a, b), MAX (a, b));
}

static void
print_section (const BenchContext *ctx, const BenchSection *section, FILE *out)
{
  Display d;

  if (section->rows->len == 0)
    return;
  d = section_display (ctx, section, g_ptr_array_index (section->rows, 0));
  fprintf (out, "\n%s [%s, median [IQR]]\n  raw: %s\n", section->title, d.unit, section->raw_desc);
  if (section->note != NULL)
    fprintf (out, "  (%s)\n", section->note);
  for (guint i = 0; i < section->rows->len; i++)
    {
      const BenchRow *row = g_ptr_array_index (section->rows, i);
      const BenchSummary *m = find_variant (row, "memres"), *r = find_variant (row, "raw");
      GString *line = g_string_new (NULL);

      d = section_display (ctx, section, row);
      g_string_append_printf (line, "  %-26s", row->label);
      if (row->error != NULL || m == NULL || r == NULL)
        g_string_append_printf (line, "FAILED: %s", row->error ? row->error : "no result");
      else
        {
          for (guint v = 0; v < row->n_variants; v++)
            {
              g_autofree char *cell = format_cell (&d, &row->summaries[v]);

              g_string_append_printf (line, "%s %-26s", row->variant_names[v], cell);
            }
          if (g_str_equal (section->name, "copy")) /* GB/s: raw over memres */
            g_string_append_printf (line, "ratio %.3fx",
                                    display_value (&d, m->median) / display_value (&d, r->median));
          else
            g_string_append_printf (line, "ratio %.3fx [%.3f-%.3f]", row->ratio, row->ratio_q1,
                                    row->ratio_q3);
          if (g_str_equal (section->name, "threads"))
            g_string_append_printf (line, "  Mops/s %.3g vs %.3g", 1e3 / m->median,
                                    1e3 / r->median);
        }
      fprintf (out, "%s\n", line->str);
      if (row->note != NULL)
        fprintf (out, "  %-26s(%s)\n", "", row->note);
      g_string_free (line, TRUE);
    }
}

static char *
device_name (const BenchContext *ctx)
{
  char name[256] = "";
  CUdevice dev;

  if (ctx->drv->cuDeviceGetName == NULL || ctx->drv->cuDeviceGet (&dev, ctx->device) != CUDA_SUCCESS
      || ctx->drv->cuDeviceGetName (name, sizeof name, dev) != CUDA_SUCCESS)
    return g_strdup ("unknown");
  return g_strdup (name);
}

void
bench_print_table (const BenchContext *ctx, GPtrArray *sections, FILE *out)
{
  g_autofree char *gpu = device_name (ctx);
  g_autofree char *resource = memres_resource_to_string (ctx->mr);

  fprintf (out, "memres-bench %s: %s on device %d (%s), driver %d%s\n", MEMRES_VERSION_STRING,
           resource, ctx->device, gpu, ctx->drv->driver_version,
           ctx->config->quick ? " [quick: timings mean nothing]" : "");
  for (guint i = 0; i < sections->len; i++)
    print_section (ctx, g_ptr_array_index (sections, i), out);
}

/* ---- JSON ---------------------------------------------------------------------------------- */

static void
json_string (GString *s, const char *text)
{
  if (text == NULL)
    {
      g_string_append (s, "null");
      return;
    }
  g_string_append_c (s, '"');
  for (const guchar *p = (const guchar *) text; *p; p++)
    {
      if (*p == '"' || *p == '\\')
        g_string_append_printf (s, "\\%c", *p);
      else if (*p < 0x20)
        g_string_append_printf (s, "\\u%04x", *p);
      else
        g_string_append_c (s, *p);
    }
  g_string_append_c (s, '"');
}

static void
json_number (GString *s, gdouble v)
{
  if (!isfinite (v))
    g_string_append (s, "null");
  else
    {
      char buf[G_ASCII_DTOSTR_BUF_SIZE];

      g_string_append (s, g_ascii_formatd (buf, sizeof buf, "%.6g", v));
    }
}

static void
json_key (GString *s, const char *key)
{
  json_string (s, key);
  g_string_append_c (s, ':');
}

static void
json_summary (GString *s, const BenchSummary *sum)
{
  g_string_append (s, "{\"median\":");
  json_number (s, sum->median);
  g_string_append (s, ",\"min\":");
  json_number (s, sum->min);
  g_string_append (s, ",\"max\":");
  json_number (s, sum->max);
  g_string_append (s, ",\"q1\":");
  json_number (s, sum->q1);
  g_string_append (s, ",\"q3\":");
  json_number (s, sum->q3);
  g_string_append_printf (s, ",\"repetitions\":%u,\"iterations\":%" G_GUINT64_FORMAT "}",
                          sum->repetitions, sum->iterations);
}

static void
json_row (GString *s, const BenchRow *row)
{
  const BenchSummary *m = find_variant (row, "memres"), *r = find_variant (row, "raw");
  gboolean ok = row->error == NULL && m != NULL && r != NULL;

  g_string_append (s, "{\"label\":");
  json_string (s, row->label);
  g_string_append_printf (s,
                          ",\"size\":%" G_GUINT64_FORMAT
                          ",\"threads\":%u,\"units\":%" G_GUINT64_FORMAT ",\"ratio\":",
                          row->size, row->threads, row->units);
  json_number (s, ok ? row->ratio : NAN);
  g_string_append (s, ",\"ratio_q1\":");
  json_number (s, ok ? row->ratio_q1 : NAN);
  g_string_append (s, ",\"ratio_q3\":");
  json_number (s, ok ? row->ratio_q3 : NAN);
  g_string_append (s, ",\"ratio_of_medians\":");
  json_number (s, ok ? m->median / r->median : NAN);
  g_string_append (s, ",\"error\":");
  json_string (s, row->error);
  g_string_append (s, ",\"note\":");
  json_string (s, row->note);
  if (row->peak_requested > 0)
    g_string_append_printf (
        s, ",\"peak_reserved\":%" G_GUINT64_FORMAT ",\"peak_requested\":%" G_GUINT64_FORMAT,
        row->peak_reserved, row->peak_requested);
  g_string_append (s, ",\"variants\":{");
  for (guint v = 0; ok && v < row->n_variants; v++)
    {
      if (v > 0)
        g_string_append_c (s, ',');
      json_key (s, row->variant_names[v]);
      json_summary (s, &row->summaries[v]);
    }
  g_string_append (s, "}}");
}

static void
json_section (GString *s, const BenchSection *section)
{
  g_string_append (s, "{\"name\":");
  json_string (s, section->name);
  g_string_append (s, ",\"title\":");
  json_string (s, section->title);
  g_string_append (s, ",\"unit\":");
  json_string (s, section->unit);
  g_string_append (s, ",\"raw\":");
  json_string (s, section->raw_desc);
  g_string_append (s, ",\"note\":");
  json_string (s, section->note);
  g_string_append (s, ",\"rows\":[");
  for (guint i = 0; i < section->rows->len; i++)
    {
      if (i > 0)
        g_string_append (s, ",\n  ");
      json_row (s, g_ptr_array_index (section->rows, i));
    }
  g_string_append (s, "]}");
}

void
bench_print_json (const BenchContext *ctx, GPtrArray *sections, FILE *out)
{
  const BenchConfig *cfg = ctx->config;
  GString *s = g_string_new ("{\"tool\":\"memres-bench\",\"schema\":1,\"memres_version\":");
  g_autoptr (GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *date = g_date_time_format_iso8601 (now);
  g_autofree char *gpu = device_name (ctx);
  g_autofree char *resource = memres_resource_to_string (ctx->mr);
  g_autofree char *command = g_strjoinv (" ", cfg->argv);

  json_string (s, MEMRES_VERSION_STRING);
  g_string_append (s, ",\n\"date\":");
  json_string (s, date);
  g_string_append (s, ",\n\"command\":");
  json_string (s, command);
  g_string_append (s, ",\n\"spec\":");
  json_string (s, cfg->spec);
  g_string_append (s, ",\n\"resource\":");
  json_string (s, resource);
  g_string_append (s, ",\n\"kind\":");
  json_string (s, memres_resource_get_kind_name (ctx->mr));
  g_string_append_printf (s, ",\n\"device\":%d,\n\"gpu\":", ctx->device);
  json_string (s, gpu);
  g_string_append_printf (s,
                          ",\n\"driver_version\":%d,\n\"driver_path\":", ctx->drv->driver_version);
  json_string (s, ctx->drv->path);
  g_string_append_printf (s, ",\n\"quick\":%s,\n\"repetitions\":%u,\n\"target_ms\":",
                          cfg->quick ? "true" : "false", cfg->repetitions);
  json_number (s, cfg->target_ms);
  g_string_append_printf (s,
                          ",\n\"seed\":%u,\n\"live\":%u,\n\"min_size\":%" G_GUINT64_FORMAT
                          ",\n\"max_size\":%" G_GUINT64_FORMAT ",\n\"grow_size\":%" G_GUINT64_FORMAT
                          ",\n\"copy_size\":%" G_GUINT64_FORMAT ",\n\"import_buffers\":%u"
                          ",\n\"sections\":[\n",
                          cfg->seed, cfg->live, cfg->min_size, cfg->max_size, cfg->grow_size,
                          cfg->copy_size, cfg->import_buffers);
  for (guint i = 0; i < sections->len; i++)
    {
      if (i > 0)
        g_string_append (s, ",\n");
      json_section (s, g_ptr_array_index (sections, i));
    }
  g_string_append (s, "\n]}\n");
  fputs (s->str, out);
  g_string_free (s, TRUE);
}

/* cmd-view.c: `memres view INPUT... [--reserved LOG]... [-o FILE]`: one self-contained HTML page
 * (no network, no library: tools/view-page.html, embedded at build time) from CSV logs of `log`
 * layers (one per layer, walked by log-walk.c) and snapshots (docs/snapshot.md, put in the page as
 * they are once json-check.c found them to be JSON). What the page gets, as one JSON value in place
 * of its marker (every '<' written \u003c, so that no text of an input ends the script element):
 *   inputs    the INPUT paths, in order, then the --reserved LOGs (a log's layer and a mark's
 *             log are indexes into it);
 *   clock0    the Time of the first line of all the logs (time 0), span [0, last] in us;
 *   series    per log its used bytes, and per tag of the log's Tag column the bytes of that tag
 *             ("" the untagged; none when no line names a tag): name, layer, tag (null for the
 *             whole layer), what ("used"; "reserved" for a --reserved LOG: a log layer under a
 *             layer that keeps memory, `cache>log`, logs what that layer holds from below, its
 *             reserved bytes), events, peak, final; the timeline
 *             at three resolutions (levels: 1024, 8192 and 65536 buckets of w us over the
 *             span, the least and most bytes live in each) or, up to 100,000 events, every
 *             step exactly (steps: t, v; levels empty);
 *   top       the 2,000 largest allocations of all the logs, each in full: layer, size,
 *             allocated and freed time (-1: live at the end), pointer, stream, thread, line,
 *             backtrace (an index into stacks; null: its line has none, `log:backtrace=true`
 *             records them), tag ("" for none);
 *   frames    the frames of the top allocations' backtraces, each text once (cut at
 *             MAX_FRAME_BYTES bytes);
 *   stacks    their backtraces, each once: a list, its count of frames as logged, then the
 *             indexes into frames of its first MAX_STACK_FRAMES frames, innermost first;
 *   marks     up to 100,000 events other than allocate, free and the segment lines (out of
 *             memory, allocate and free failures, trim, sleep and wake): layer, time, action
 *             (as logged: "sleep backup"), size, thread, line, and for a sleep or wake its tag,
 *             for an out of memory or allocate failure with a backtrace (the first
 *             MAX_MARK_STACKS of them) its tag (null) and its index into stacks;
 *   map       the segment lines of the logs (`log:segments=true`) and the allocations of those
 *             logs, for the segment map at the chosen moment (view-map.c);
 *   snapshots the snapshots, each with _file added (the allocator shim's file, a snapshot per
 *             device under "devices", is split by the page's script).
 * Of a log's tags, the TAGS_FULL with the highest peaks are held as its layer is, the others at
 * less detail (series_detail()): the page's size grows with the count of logs and tags, and with
 * the events of at most TAGS_FULL tags a log, not with the events of the others. Public API
 * only. */
#include "memres-tool.h"

#include <string.h>

#include "view-page.h"

#define PAGE_MARKER  "/*MEMRES-VIEW-DATA*/"
#define FINE_BUCKETS 65536
#define LEVEL_STEP   8 /* 1024, 8192, 65536 */
#define N_LEVELS     3
#define MAX_STEPS    100000
/* Tags by peak, the highest first, within their log: the first TAGS_FULL are held as a layer is
 * (the page draws them at first), up to TAGS_MEDIUM at most MAX_STEPS / LEVEL_STEP steps or the
 * two coarser levels, the rest at most MAX_STEPS / LEVEL_STEP^2 steps or the coarsest level: so
 * that the page's size grows with the events of at most TAGS_FULL tags (the page's first view,
 * view-page.html's MAX_TAGS_DRAWN, is the same tags). */
#define TAGS_FULL   8
#define TAGS_MEDIUM 64
#define MAX_TOP     2000
#define MAX_MARKS   100000
/* a backtrace in the page: its first frames, each cut at so many bytes */
#define MAX_STACK_FRAMES 32
#define MAX_FRAME_BYTES  1024
/* the marks (out of memory, allocate failure) whose backtraces the page holds, the first ones */
#define MAX_MARK_STACKS 2000

typedef struct
{
  gint64 ts;
  guint64 v;
} Point;

typedef struct
{
  guint layer;
  char *tag; /* NULL: the whole layer */
  GArray *points;
  guint64 used, peak;
  guint index, rank; /* in View's series; among its log's tags by peak (write_data()) */
} Series;

typedef struct
{
  guint layer, line;
  guint64 size;
  gint64 t_alloc, t_free;
  const char *pointer, *stream, *thread, *tag, *backtrace; /* into the log's text */
} TopAlloc;

typedef struct
{
  guint layer, line;
  gint64 ts;
  const char *action, *thread, *tag; /* tag: a sleep's or wake's (into the log), else NULL */
  const char *backtrace;             /* an allocate failure's or out of memory's, else "" */
  guint64 size;
} Mark;

typedef struct
{
  char *path, *text;
  gsize length;
  gboolean snapshot;
  gboolean reserved; /* given as --reserved LOG */
} Input;

typedef struct
{
  GPtrArray *series;   /* Series* */
  GHashTable *by_tag;  /* "layer\x1ftag" -> Series*, for this log */
  GPtrArray *heap;     /* TopAlloc*, a min-heap by size */
  GHashTable *in_heap; /* layer << 32 | line of the allocate -> TopAlloc* */
  GArray *marks;
  guint n_marks_dropped;
  guint layer;
  Series *layer_series; /* the whole layer's, of the log being read */
  MemresViewMap *map;   /* the segment lines and allocations (view-map.c) */
} View;

static Series *
series_new (guint layer, const char *tag)
{
  Series *s = g_new0 (Series, 1);

  s->layer = layer;
  s->tag = g_strdup (tag);
  s->points = g_array_new (FALSE, FALSE, sizeof (Point));
  return s;
}

static void
series_free (gpointer p)
{
  Series *s = p;

  g_array_unref (s->points);
  g_free (s->tag);
  g_free (s);
}

static void
series_add (Series *s, gint64 ts, guint64 used)
{
  Point pt = { ts, used };

  g_array_append_val (s->points, pt);
  if (used > s->peak)
    s->peak = used;
}

/* the heap's order: smaller first; at equal sizes the later allocation first (it goes first) */
static gboolean
top_less (const TopAlloc *a, const TopAlloc *b)
{
  if (a->size != b->size)
    return a->size < b->size;
  if (a->t_alloc != b->t_alloc)
    return a->t_alloc > b->t_alloc;
  return a->layer != b->layer ? a->layer > b->layer : a->line > b->line;
}

static void
heap_swap (GPtrArray *h, guint i, guint j)
{
  gpointer t = h->pdata[i];

  h->pdata[i] = h->pdata[j];
  h->pdata[j] = t;
}

static void
heap_sift_down (GPtrArray *h, guint i)
{
  for (;;)
    {
      guint l = 2 * i + 1, r = l + 1, m = i;

      if (l < h->len && top_less (h->pdata[l], h->pdata[m]))
        m = l;
      if (r < h->len && top_less (h->pdata[r], h->pdata[m]))
        m = r;
      if (m == i)
        return;
      heap_swap (h, i, m);
      i = m;
    }
}

static guint64
top_key (guint layer, guint line)
{
  return ((guint64) layer << 32) | line;
}

/* An allocation that may be among the largest: kept, the smallest of a full heap dropped. */
static void
top_offer (View *v, const MemresLogEvent *e)
{
  TopAlloc *a, probe = { v->layer, e->line, e->l.size, e->ts, -1, NULL, NULL, NULL, NULL, NULL };

  if (v->heap->len == MAX_TOP && !top_less (v->heap->pdata[0], &probe))
    return;
  a = g_memdup2 (&probe, sizeof probe);
  a->pointer = e->l.pointer_text;
  a->stream = e->l.stream_text;
  a->thread = e->l.thread;
  a->tag = e->l.tag;
  a->backtrace = e->l.backtrace;
  if (v->heap->len == MAX_TOP)
    {
      TopAlloc *old = v->heap->pdata[0];

      g_hash_table_remove (v->in_heap, GSIZE_TO_POINTER (top_key (old->layer, old->line)));
      g_free (old);
      v->heap->pdata[0] = a;
      heap_sift_down (v->heap, 0);
    }
  else
    {
      guint i = v->heap->len;

      g_ptr_array_add (v->heap, a);
      while (i > 0 && top_less (v->heap->pdata[i], v->heap->pdata[(i - 1) / 2]))
        {
          heap_swap (v->heap, i, (i - 1) / 2);
          i = (i - 1) / 2;
        }
    }
  g_hash_table_insert (v->in_heap, GSIZE_TO_POINTER (top_key (v->layer, e->line)), a);
}

static Series *
tag_series (View *v, const char *tag)
{
  Series *s = g_hash_table_lookup (v->by_tag, tag);

  if (s == NULL)
    {
      s = series_new (v->layer, tag);
      g_ptr_array_add (v->series, s);
      g_hash_table_insert (v->by_tag, s->tag, s);
    }
  return s;
}

static gboolean
on_event (const MemresLogEvent *e, gpointer user_data, GError **error)
{
  View *v = user_data;

  memres_view_map_add (v->map, v->layer, e);
  if (e->l.action == MEMRES_LOG_SEGMENT_MAPPED || e->l.action == MEMRES_LOG_SEGMENT_GROWN
      || e->l.action == MEMRES_LOG_SEGMENT_UNMAPPING
      || (e->l.action == MEMRES_LOG_FREE && !e->counted)) /* a free of memory older than the log */
    return TRUE;
  if (!e->counted)
    {
      Mark m = { v->layer,         e->line,     e->ts,
                 e->l.action_name, e->l.thread, e->l.policy != NULL ? e->l.tag : NULL,
                 e->l.backtrace,   e->l.size };

      if (v->marks->len < MAX_MARKS)
        g_array_append_val (v->marks, m);
      else
        v->n_marks_dropped++;
      return TRUE;
    }
  series_add (v->layer_series, e->ts, e->used);
  /* a series per tag ("" the untagged), the tag of a free its allocation's */
  {
    Series *s = tag_series (v, e->l.action == MEMRES_LOG_ALLOCATE ? e->l.tag : e->alloc_tag);

    if (e->l.action == MEMRES_LOG_ALLOCATE)
      s->used += e->l.size;
    else
      s->used -= e->alloc_size;
    series_add (s, e->ts, s->used);
  }
  if (e->l.action == MEMRES_LOG_ALLOCATE)
    top_offer (v, e);
  else
    {
      TopAlloc *a
          = g_hash_table_lookup (v->in_heap, GSIZE_TO_POINTER (top_key (v->layer, e->alloc_line)));

      if (a != NULL)
        a->t_free = e->ts;
    }
  return TRUE;
}

/* The least and most bytes live in each of @n buckets over [t0, t0 + len], from the points of
 * @s (times absolute): each point's value and the value before it count in its bucket, and a
 * bucket without a point holds the value of the last point before it. */
static void
fine_buckets (const Series *s, gint64 t0, gint64 len, guint n, guint64 *lo, guint64 *hi)
{
  g_autofree gboolean *set = g_new0 (gboolean, n);
  g_autofree guint64 *last = g_new0 (guint64, n);
  guint64 prev = 0, carry = 0;

  for (guint i = 0; i < s->points->len; i++)
    {
      const Point *p = &g_array_index (s->points, Point, i);
      guint64 b = len > 0 ? (guint64) (p->ts - t0) * n / (guint64) len : 0;

      b = MIN (b, n - 1);
      if (!set[b])
        {
          lo[b] = hi[b] = prev;
          set[b] = TRUE;
        }
      lo[b] = MIN (lo[b], MIN (prev, p->v));
      hi[b] = MAX (hi[b], MAX (prev, p->v));
      last[b] = p->v;
      prev = p->v;
    }
  for (guint b = 0; b < n; b++)
    {
      if (!set[b])
        lo[b] = hi[b] = carry;
      else
        carry = last[b];
    }
}

static void
append_u64_array (GString *out, const char *key, const guint64 *values, guint n)
{
  g_string_append_printf (out, "\"%s\":[", key);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (out, "%s%" G_GUINT64_FORMAT, i ? "," : "", values[i]);
  g_string_append_c (out, ']');
}

/* How much of @s the page holds: at most *max_steps steps, else *n_levels levels. */
static void
series_detail (const Series *s, guint *max_steps, int *n_levels)
{
  guint coarser = s->tag == NULL || s->rank < TAGS_FULL ? 0 : s->rank < TAGS_MEDIUM ? 1 : 2;

  *max_steps = MAX_STEPS;
  *n_levels = N_LEVELS - (int) coarser;
  for (guint i = 0; i < coarser; i++)
    *max_steps /= LEVEL_STEP;
}

static void
write_series (GString *out, const Series *s, const Input *inputs, gint64 t0, gint64 len)
{
  g_autofree guint64 *lo = g_new (guint64, FINE_BUCKETS);
  g_autofree guint64 *hi = g_new (guint64, FINE_BUCKETS);
  g_autofree char *name = g_path_get_basename (inputs[s->layer].path);
  guint n = FINE_BUCKETS, max_steps;
  int n_levels;
  GString *levels[N_LEVELS];

  g_string_append (out, "{\"name\":");
  memres_json_append_string (out, name);
  g_string_append_printf (out, ",\"layer\":%u,\"tag\":", s->layer);
  if (s->tag != NULL)
    memres_json_append_string (out, s->tag);
  else
    g_string_append (out, "null");
  g_string_append_printf (out, ",\"what\":\"%s\"", inputs[s->layer].reserved ? "reserved" : "used");
  g_string_append_printf (
      out, ",\"events\":%u,\"peak\":%" G_GUINT64_FORMAT ",\"final\":%" G_GUINT64_FORMAT,
      s->points->len, s->peak,
      s->points->len ? g_array_index (s->points, Point, s->points->len - 1).v : 0);
  series_detail (s, &max_steps, &n_levels);
  g_string_append (out, ",\"steps\":");
  if (s->points->len <= max_steps)
    {
      g_string_append (out, "{\"t\":[");
      for (guint i = 0; i < s->points->len; i++)
        g_string_append_printf (out, "%s%" G_GINT64_FORMAT, i ? "," : "",
                                g_array_index (s->points, Point, i).ts - t0);
      g_string_append (out, "],\"v\":[");
      for (guint i = 0; i < s->points->len; i++)
        g_string_append_printf (out, "%s%" G_GUINT64_FORMAT, i ? "," : "",
                                g_array_index (s->points, Point, i).v);
      g_string_append (out, "]}");
    }
  else
    g_string_append (out, "null");
  if (s->points->len <= max_steps) /* the steps serve every zoom */
    {
      g_string_append (out, ",\"levels\":[]}");
      return;
    }
  /* finest first, each coarser one from it; written coarsest first */
  fine_buckets (s, t0, len, n, lo, hi);
  for (int k = N_LEVELS - 1; k >= 0; k--)
    {
      levels[k] = g_string_new (NULL);
      if (k < n_levels)
        {
          g_string_append_printf (levels[k], "{\"w\":%.6f,", (double) MAX (len, 1) / n);
          append_u64_array (levels[k], "min", lo, n);
          g_string_append_c (levels[k], ',');
          append_u64_array (levels[k], "max", hi, n);
          g_string_append_c (levels[k], '}');
        }
      for (guint b = 0; k > 0 && b < n / LEVEL_STEP; b++)
        {
          guint64 mn = G_MAXUINT64, mx = 0;

          for (guint j = 0; j < LEVEL_STEP; j++)
            {
              mn = MIN (mn, lo[b * LEVEL_STEP + j]);
              mx = MAX (mx, hi[b * LEVEL_STEP + j]);
            }
          lo[b] = mn;
          hi[b] = mx;
        }
      n /= LEVEL_STEP;
    }
  g_string_append (out, ",\"levels\":[");
  for (int k = 0; k < N_LEVELS; k++)
    {
      if (k < n_levels)
        g_string_append_printf (out, "%s%s", k ? "," : "", levels[k]->str);
      g_string_free (levels[k], TRUE);
    }
  g_string_append (out, "]}");
}

/* The order of the ranks: by log, a log's whole-layer series first, then its tags by peak, the
 * highest first, at equal peaks in the order first seen (as the page's script ranks them). */
static gint
rank_compare (gconstpointer a, gconstpointer b)
{
  const Series *x = *(Series *const *) a, *y = *(Series *const *) b;

  if (x->layer != y->layer)
    return x->layer < y->layer ? -1 : 1;
  if ((x->tag == NULL) != (y->tag == NULL))
    return x->tag == NULL ? -1 : 1;
  if (x->peak != y->peak)
    return x->peak > y->peak ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index ? 1 : 0;
}

/* Each tag's rank among its log's tags (rank_compare()). */
static void
rank_tags (GPtrArray *series)
{
  g_autoptr (GPtrArray) order = g_ptr_array_sized_new (series->len);
  guint rank = 0;

  for (guint i = 0; i < series->len; i++)
    {
      Series *s = g_ptr_array_index (series, i);

      s->index = i;
      g_ptr_array_add (order, s);
    }
  g_ptr_array_sort (order, rank_compare);
  for (guint i = 0; i < order->len; i++)
    {
      Series *s = g_ptr_array_index (order, i);

      rank = s->tag == NULL ? 0 : rank;
      s->rank = s->tag == NULL ? 0 : rank++;
    }
}

static gint
top_compare (gconstpointer a, gconstpointer b)
{
  const TopAlloc *x = *(TopAlloc *const *) a, *y = *(TopAlloc *const *) b;

  return top_less (x, y) ? 1 : top_less (y, x) ? -1 : 0;
}

/* The backtraces of the top allocations, each once (by its text as logged), and their frames,
 * each once: the index of @a's in stacks (-1: none), the stack and its frames added when new. */
typedef struct
{
  GHashTable *stack_of; /* the Backtrace field as logged -> index + 1 */
  GHashTable *frame_of; /* a frame's text, cut -> index + 1 */
  GString *stacks, *frames;
  guint n_stacks, n_frames;
} Stacks;

static gint
stack_index (Stacks *st, const char *field)
{
  gpointer found;
  g_auto (GStrv) frames = NULL;
  guint n;

  if (field == NULL || field[0] == '\0')
    return -1;
  if ((found = g_hash_table_lookup (st->stack_of, field)) != NULL)
    return GPOINTER_TO_INT (found) - 1;
  frames = memres_tool_log_frames (field);
  n = g_strv_length (frames);
  g_string_append_printf (st->stacks, "%s[%u", st->n_stacks ? "," : "", n);
  for (guint i = 0; i < MIN (n, MAX_STACK_FRAMES); i++)
    {
      char *f = frames[i];
      guint index;

      if (strlen (f) > MAX_FRAME_BYTES)
        {
          gsize len = MAX_FRAME_BYTES;

          while (len > 0 && ((guchar) f[len] & 0xc0) == 0x80)
            len--;
          f[len] = '\0';
        }
      if ((found = g_hash_table_lookup (st->frame_of, f)) != NULL)
        index = GPOINTER_TO_UINT (found) - 1;
      else
        {
          index = st->n_frames++;
          g_string_append (st->frames, index ? "," : "");
          memres_json_append_string (st->frames, f);
          g_hash_table_insert (st->frame_of, g_strdup (f), GUINT_TO_POINTER (index + 1));
        }
      g_string_append_printf (st->stacks, ",%u", index);
    }
  g_string_append_c (st->stacks, ']');
  g_hash_table_insert (st->stack_of, (gpointer) field, GINT_TO_POINTER (st->n_stacks + 1));
  return (gint) st->n_stacks++;
}

/* The data of the page, '<' not yet escaped. */
static GString *
write_data (View *v, Input *inputs, guint n_inputs)
{
  GString *out = g_string_new ("{\"memres_view\":1,\"inputs\":[");
  gint64 t0 = G_MAXINT64, t1 = G_MININT64;
  gboolean any = FALSE;

  for (guint i = 0; i < n_inputs; i++)
    {
      if (i > 0)
        g_string_append_c (out, ',');
      memres_json_append_string (out, inputs[i].path);
    }
  for (guint i = 0; i < v->series->len; i++)
    {
      Series *s = g_ptr_array_index (v->series, i);

      if (s->points->len > 0)
        {
          /* the lines of a log need not be in time order (threads) */
          for (guint j = 0; j < s->points->len; j++)
            {
              t0 = MIN (t0, g_array_index (s->points, Point, j).ts);
              t1 = MAX (t1, g_array_index (s->points, Point, j).ts);
            }
          any = TRUE;
        }
    }
  for (guint i = 0; i < v->marks->len; i++)
    {
      t0 = MIN (t0, g_array_index (v->marks, Mark, i).ts);
      t1 = MAX (t1, g_array_index (v->marks, Mark, i).ts);
      any = TRUE;
    }
  memres_view_map_extent (v->map, &t0, &t1);
  any = any || !memres_view_map_empty (v->map);
  if (!any)
    t0 = t1 = 0;
  g_string_append (out, "],\"clock0\":");
  if (any)
    g_string_append_printf (out, "\"%02d:%02d:%02d.%06d\"", (int) (t0 / 3600000000 % 24),
                            (int) (t0 / 60000000 % 60), (int) (t0 / 1000000 % 60),
                            (int) (t0 % 1000000));
  else
    g_string_append (out, "null");
  g_string_append_printf (out, ",\"span\":[0,%" G_GINT64_FORMAT "],\n\"series\":[", t1 - t0);
  rank_tags (v->series);
  for (guint i = 0; i < v->series->len; i++)
    {
      if (i > 0)
        g_string_append (out, ",\n");
      write_series (out, g_ptr_array_index (v->series, i), inputs, t0, t1 - t0);
    }
  GString *marks;
  guint n_mark_stacks = 0;
  Stacks st = { g_hash_table_new (g_str_hash, g_str_equal),
                g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL),
                g_string_new (NULL),
                g_string_new (NULL),
                0,
                0 };

  g_ptr_array_sort (v->heap, top_compare);
  g_string_append (out, "],\n\"top\":{\"cols\":[\"layer\",\"size\",\"allocated\",\"freed\","
                        "\"pointer\",\"stream\",\"thread\",\"line\",\"backtrace\",\"tag\"],"
                        "\"rows\":[");
  for (guint i = 0; i < v->heap->len; i++)
    {
      const TopAlloc *a = v->heap->pdata[i];
      gint stack = stack_index (&st, a->backtrace);

      g_string_append_printf (
          out, "%s\n[%u,%" G_GUINT64_FORMAT ",%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",",
          i ? "," : "", a->layer, a->size, a->t_alloc - t0, a->t_free < 0 ? -1 : a->t_free - t0);
      memres_json_append_string (out, a->pointer);
      g_string_append_c (out, ',');
      memres_json_append_string (out, a->stream);
      g_string_append_c (out, ',');
      memres_json_append_string (out, a->thread);
      if (stack >= 0)
        g_string_append_printf (out, ",%u,%d,", a->line, stack);
      else
        g_string_append_printf (out, ",%u,null,", a->line);
      memres_json_append_string (out, a->tag);
      g_string_append_c (out, ']');
    }
  g_string_append (out, "]},");
  marks = g_string_new (NULL);
  for (guint i = 0; i < v->marks->len; i++)
    {
      const Mark *m = &g_array_index (v->marks, Mark, i);
      gint stack = n_mark_stacks < MAX_MARK_STACKS ? stack_index (&st, m->backtrace) : -1;

      g_string_append_printf (marks, "%s\n[%u,%" G_GINT64_FORMAT ",\"%s\",%" G_GUINT64_FORMAT ",",
                              i ? "," : "", m->layer, m->ts - t0, m->action, m->size);
      memres_json_append_string (marks, m->thread);
      g_string_append_printf (marks, ",%u", m->line);
      if (m->tag != NULL || stack >= 0)
        {
          g_string_append_c (marks, ',');
          if (m->tag != NULL)
            memres_json_append_string (marks, m->tag);
          else
            g_string_append (marks, "null");
        }
      if (stack >= 0)
        {
          g_string_append_printf (marks, ",%d", stack);
          n_mark_stacks++;
        }
      g_string_append_c (marks, ']');
    }
  g_string_append_printf (out, "\n\"frames\":[%s],\n\"stacks\":[%s],", st.frames->str,
                          st.stacks->str);
  g_string_free (st.frames, TRUE);
  g_string_free (st.stacks, TRUE);
  g_hash_table_unref (st.stack_of);
  g_hash_table_unref (st.frame_of);
  g_string_append_printf (out, "\n\"marks_dropped\":%u,\"marks\":[%s],\n", v->n_marks_dropped,
                          marks->str);
  g_string_free (marks, TRUE);
  memres_view_map_write (v->map, out, t0);
  g_string_append (out, ",\n\"snapshots\":[");
  any = FALSE;
  for (guint i = 0; i < n_inputs; i++)
    {
      const char *text = inputs[i].text;

      if (!inputs[i].snapshot)
        continue;
      while (g_ascii_isspace (*text))
        text++;
      /* {"_file": PATH, + the members of the snapshot */
      g_string_append (out, any ? ",\n{\"_file\":" : "\n{\"_file\":");
      memres_json_append_string (out, inputs[i].path);
      g_string_append_c (out, ',');
      g_string_append (out, text + 1);
      while (out->len > 0 && g_ascii_isspace (out->str[out->len - 1]))
        g_string_truncate (out, out->len - 1);
      any = TRUE;
    }
  g_string_append (out, "]}");
  return out;
}

static gboolean
read_input (View *v, Input *in, guint layer, GError **error)
{
  const char *p;

  if (!memres_tool_read_input (in->path, &in->text, &in->length, NULL, error))
    return FALSE;
  for (p = in->text; p < in->text + in->length && g_ascii_isspace (*p); p++)
    ;
  if (p < in->text + in->length && *p == '{')
    {
      if (in->reserved)
        {
          g_autofree char *shown = memres_tool_show_input (in->path);

          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                       "--reserved %s: a snapshot, not a log (a snapshot has its layers' "
                       "reserved bytes already: give it as an INPUT)",
                       shown);
          return FALSE;
        }
      in->snapshot = TRUE;
      return memres_tool_check_snapshot (in->path, in->text, in->length, error);
    }
  v->layer = layer;
  g_hash_table_remove_all (v->by_tag);
  v->layer_series = series_new (layer, NULL);
  g_ptr_array_add (v->series, v->layer_series);
  if (!memres_tool_walk_log (in->path, in->text, in->length, on_event, v, error))
    return FALSE;
  /* a log without tags (six columns, or every Tag empty): its layer's series alone */
  if (g_hash_table_size (v->by_tag) == 1 && g_hash_table_contains (v->by_tag, ""))
    g_ptr_array_remove_index (v->series, v->series->len - 1);
  return TRUE;
}

/* The page: the template with @data, every '<' escaped, in place of the marker. */
static char *
write_page (const GString *data)
{
  const char *marker = strstr (memres_view_page, PAGE_MARKER);
  GString *page = g_string_sized_new (sizeof memres_view_page + data->len + data->len / 64);

  g_assert (marker != NULL);
  g_string_append_len (page, memres_view_page, marker - memres_view_page);
  for (gsize i = 0; i < data->len; i++)
    {
      const char *lt = memchr (data->str + i, '<', data->len - i);
      gsize n = lt != NULL ? (gsize) (lt - data->str) - i : data->len - i;

      g_string_append_len (page, data->str + i, n);
      i += n;
      if (lt != NULL)
        g_string_append (page, "\\u003c");
    }
  g_string_append (page, marker + strlen (PAGE_MARKER));
  return g_string_free (page, FALSE);
}

int
memres_tool_view (int argc, char **argv)
{
  g_autofree char *output = NULL;
  g_auto (GStrv) reserved = NULL;
  gboolean json_output = FALSE;
  GOptionEntry entries[] = {
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
      "Write the page to FILE (default: the standard output)", "FILE" },
    { "reserved", 'r', 0, G_OPTION_ARG_FILENAME_ARRAY, &reserved,
      "A log layer's LOG under a layer that keeps memory (cache>log:path=LOG>dmr): its bytes "
      "drawn as that layer's reserved bytes (repeatable)",
      "LOG" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &json_output, "Print errors as JSON", NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree Input *inputs = NULL;
  g_autofree char *page = NULL;
  View v = { 0 };
  guint n, n_reserved;
  int status = 0;

  context = g_option_context_new ("LOG|SNAPSHOT... - a page to look at memory");
  g_option_context_set_summary (
      context, "Writes one self-contained HTML page (no network) from CSV logs of log layers "
               "(one LOG per layer) and snapshots (memres snapshot, MEMRES_OOM_SNAPSHOT): a "
               "timeline of the used bytes per layer and per tag, and the reserved bytes of a "
               "layer whose upstream is logged (--reserved) (zoom, pan, hover), the "
               "largest allocations and those live at a chosen moment (with their call stacks "
               "where the log has the Backtrace column: log:backtrace=true), the out-of-memory "
               "events and reports, each snapshot's segment map (blocks, holes, the largest "
               "free block).");
  g_option_context_add_main_entries (context, entries, NULL);
  if (!memres_tool_parse_options (context, &argc, &argv, &error))
    return memres_tool_usage_error ("view", error->message);
  n_reserved = reserved != NULL ? g_strv_length (reserved) : 0;
  if (argc < 2 && n_reserved == 0)
    return memres_tool_usage_error ("view", "expected LOG or SNAPSHOT...");
  /* a --reserved LOG is the reserved bytes of the layer above its log: drawn beside that
   * layer's used bytes, never alone (alone, its bytes are a log's used bytes: an INPUT) */
  if (argc < 2)
    return memres_tool_usage_error (
        "view", "--reserved LOG without an INPUT: give the log of the layer above it too "
                "(cache>log:path=LOG>... is --reserved LOG beside the log above the cache), or "
                "LOG alone as an INPUT (its bytes drawn as used)");
  n = (guint) argc - 1 + n_reserved;
  inputs = g_new0 (Input, n);
  v.series = g_ptr_array_new_with_free_func (series_free);
  v.by_tag = g_hash_table_new (g_str_hash, g_str_equal);
  v.heap = g_ptr_array_new_with_free_func (g_free);
  v.in_heap = g_hash_table_new (g_direct_hash, g_direct_equal);
  v.marks = g_array_new (FALSE, FALSE, sizeof (Mark));
  v.map = memres_view_map_new ();
  for (guint i = 0; i < n && status == 0; i++)
    {
      inputs[i].reserved = i >= (guint) argc - 1;
      inputs[i].path = inputs[i].reserved ? reserved[i - (argc - 1)] : argv[i + 1];
      if (memres_tool_output_is_input (
              output, inputs[i].path, inputs[i].reserved ? "--reserved LOG" : "INPUT",
              inputs[i].reserved ? i + 2 - (guint) argc : i + 1, "page", "input", &error)
          || !read_input (&v, &inputs[i], i, &error))
        status = memres_tool_fail (error);
    }
  if (status == 0)
    {
      GString *data = write_data (&v, inputs, n);

      page = write_page (data);
      g_string_free (data, TRUE);
      if (output == NULL || strcmp (output, "-") == 0)
        g_print ("%s", page);
      else if (!memres_file_replace (output, page, -1, &error))
        status = memres_tool_fail (error);
    }
  for (guint i = 0; i < n; i++)
    g_free (inputs[i].text);
  g_ptr_array_unref (v.series);
  g_hash_table_unref (v.by_tag);
  g_ptr_array_unref (v.heap);
  g_hash_table_unref (v.in_heap);
  g_array_unref (v.marks);
  memres_view_map_free (v.map);
  return status;
}

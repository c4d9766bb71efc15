/* view-map.c: what `memres view`'s page needs to draw the segment map of a log at any moment
 * (tools/cmd-view.c): the segment lines of each log (`log:segments=true`: mapped, grown,
 * unmapping) and, for the logs that have them, every allocation with its allocate and free times,
 * address and size, so that the page rebuilds the segments and their blocks at the moment chosen,
 * and the holes between the blocks. Bounded: at most MAX_SEGMENT_LINES segment lines and
 * MAX_MAP_ALLOCS allocations; what is left out is counted, and the page says the map is
 * incomplete. Public API only. */
#include "memres-tool.h"

#define MAX_SEGMENT_LINES 100000
#define MAX_MAP_ALLOCS    200000

typedef struct
{
  guint layer;
  gint64 ts;
  MemresLogAction action;
  const char *base; /* into the log's text */
  guint64 length;
} SegmentLine;

typedef struct
{
  guint layer, line;
  gint64 t_alloc, t_free;
  const char *pointer; /* into the log's text */
  guint64 size;
} MapAlloc;

struct _MemresViewMap
{
  GArray *segments; /* SegmentLine */
  GArray *allocs;   /* MapAlloc, in the order read: by layer, then line */
  GHashTable *layers_with_segments;
  guint segments_dropped, allocs_dropped;
};

MemresViewMap *
memres_view_map_new (void)
{
  MemresViewMap *m = g_new0 (MemresViewMap, 1);

  m->segments = g_array_new (FALSE, FALSE, sizeof (SegmentLine));
  m->allocs = g_array_new (FALSE, FALSE, sizeof (MapAlloc));
  m->layers_with_segments = g_hash_table_new (NULL, NULL);
  return m;
}

void
memres_view_map_free (MemresViewMap *m)
{
  g_array_unref (m->segments);
  g_array_unref (m->allocs);
  g_hash_table_unref (m->layers_with_segments);
  g_free (m);
}

/* The allocation of @layer allocated on log line @line, or NULL (left out). */
static MapAlloc *
find_alloc (MemresViewMap *m, guint layer, guint line)
{
  guint lo = 0, hi = m->allocs->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      const MapAlloc *a = &g_array_index (m->allocs, MapAlloc, mid);

      if (a->layer < layer || (a->layer == layer && a->line < line))
        lo = mid + 1;
      else
        hi = mid;
    }
  if (lo < m->allocs->len)
    {
      MapAlloc *a = &g_array_index (m->allocs, MapAlloc, lo);

      if (a->layer == layer && a->line == line)
        return a;
    }
  return NULL;
}

void
memres_view_map_add (MemresViewMap *m, guint layer, const MemresLogEvent *e)
{
  switch (e->l.action)
    {
    case MEMRES_LOG_SEGMENT_MAPPED:
    case MEMRES_LOG_SEGMENT_GROWN:
    case MEMRES_LOG_SEGMENT_UNMAPPING:
      {
        SegmentLine s = { layer, e->ts, e->l.action, e->l.pointer_text, e->l.size };

        g_hash_table_add (m->layers_with_segments, GUINT_TO_POINTER (layer + 1));
        if (m->segments->len < MAX_SEGMENT_LINES)
          g_array_append_val (m->segments, s);
        else
          m->segments_dropped++;
      }
      break;
    case MEMRES_LOG_ALLOCATE:
      {
        MapAlloc a = { layer, e->line, e->ts, -1, e->l.pointer_text, e->l.size };

        if (m->allocs->len < MAX_MAP_ALLOCS)
          g_array_append_val (m->allocs, a);
        else
          m->allocs_dropped++;
      }
      break;
    case MEMRES_LOG_FREE:
      if (e->counted)
        {
          MapAlloc *a = find_alloc (m, layer, e->alloc_line);

          if (a != NULL)
            a->t_free = e->ts;
        }
      break;
    default:
      break;
    }
}

void
memres_view_map_extent (const MemresViewMap *m, gint64 *t0, gint64 *t1)
{
  for (guint i = 0; i < m->segments->len; i++)
    {
      *t0 = MIN (*t0, g_array_index (m->segments, SegmentLine, i).ts);
      *t1 = MAX (*t1, g_array_index (m->segments, SegmentLine, i).ts);
    }
}

gboolean
memres_view_map_empty (const MemresViewMap *m)
{
  return m->segments->len == 0;
}

/* "map":{"segments":[[layer,t,what,base,length]...],"allocs":[[layer,t_alloc,t_free,pointer,
 * size]...],"segments_dropped":N,"allocs_dropped":N}: what 0 mapped, 1 grown (length the new
 * one), 2 unmapping; times relative to @t0, t_free -1 for live at the end; the allocations of
 * the logs with segment lines only (the dropped count too). */
void
memres_view_map_write (const MemresViewMap *m, GString *out, gint64 t0)
{
  guint dropped = m->allocs_dropped;
  gboolean first = TRUE;

  g_string_append (out, "\"map\":{\"segments\":[");
  for (guint i = 0; i < m->segments->len; i++)
    {
      const SegmentLine *s = &g_array_index (m->segments, SegmentLine, i);

      g_string_append_printf (out, "%s\n[%u,%" G_GINT64_FORMAT ",%d,", i ? "," : "", s->layer,
                              s->ts - t0,
                              s->action == MEMRES_LOG_SEGMENT_MAPPED  ? 0
                              : s->action == MEMRES_LOG_SEGMENT_GROWN ? 1
                                                                      : 2);
      memres_json_append_string (out, s->base);
      g_string_append_printf (out, ",%" G_GUINT64_FORMAT "]", s->length);
    }
  g_string_append (out, "],\"allocs\":[");
  for (guint i = 0; i < m->allocs->len; i++)
    {
      const MapAlloc *a = &g_array_index (m->allocs, MapAlloc, i);

      if (!g_hash_table_contains (m->layers_with_segments, GUINT_TO_POINTER (a->layer + 1)))
        continue;
      g_string_append_printf (out, "%s\n[%u,%" G_GINT64_FORMAT ",%" G_GINT64_FORMAT ",",
                              first ? "" : ",", a->layer, a->t_alloc - t0,
                              a->t_free < 0 ? -1 : a->t_free - t0);
      memres_json_append_string (out, a->pointer);
      g_string_append_printf (out, ",%" G_GUINT64_FORMAT "]", a->size);
      first = FALSE;
    }
  if (g_hash_table_size (m->layers_with_segments) == 0)
    dropped = 0;
  g_string_append_printf (out, "],\"segments_dropped\":%u,\"allocs_dropped\":%u}",
                          m->segments_dropped, dropped);
}

/* memres - CUDA memory resources
 * unmapped-ranges.c: the ranges a sleep unmaps (unmapped-ranges.h). */
#include "unmapped-ranges.h"

void
unmapped_ranges_collect (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
                         guint64 previous_length, gpointer user_data)
{
  if (event == MEMRES_SEGMENT_UNMAPPING)
    g_array_append_val ((GArray *) user_data, *segment);
}

gint
unmapped_ranges_cmp (gconstpointer a, gconstpointer b)
{
  const MemresSegment *x = a, *y = b;

  if (x->base != y->base)
    return x->base < y->base ? -1 : 1;
  return x->length > y->length ? -1 : x->length < y->length; /* the outer one first */
}

void
unmapped_ranges_keep_outermost (GArray *segs)
{
  guint kept = 0;

  g_array_sort (segs, unmapped_ranges_cmp);
  for (guint i = 0; i < segs->len; i++)
    {
      const MemresSegment *s = &g_array_index (segs, MemresSegment, i);

      if (kept > 0)
        {
          const MemresSegment *o = &g_array_index (segs, MemresSegment, kept - 1);

          if (s->base + s->length <= o->base + o->length)
            continue;
        }
      g_array_index (segs, MemresSegment, kept++) = *s;
    }
  g_array_set_size (segs, kept);
}

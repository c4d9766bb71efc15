/* memres - CUDA memory resources
 * unmapped-ranges.h: the ranges a sleep unmaps, as its segment events tell them, for the sleep
 * benchmark (sleep-bench.c) and the test of a sleep's driver calls (tests/test-sleep-calls.c),
 * which both find the physical allocations under them. Public API only. Not installed. */
#ifndef MEMRES_UNMAPPED_RANGES_H
#define MEMRES_UNMAPPED_RANGES_H

#include <memres/memres.h>

/* A MemresSegmentCallback: appends each range of a MEMRES_SEGMENT_UNMAPPING event to the
 * GArray of MemresSegment that @user_data is; other events are ignored. */
void unmapped_ranges_collect (MemresResource *mr, MemresSegmentEvent event,
                              const MemresSegment *segment, guint64 previous_length,
                              gpointer user_data);

/* A GCompareFunc of two MemresSegment: by base, the longer (outer) one first at one base. */
gint unmapped_ranges_cmp (gconstpointer a, gconstpointer b);

/* Sorts @segs (a GArray of MemresSegment) and keeps the outermost ranges only: a cache's chunk
 * lies inside the buffer of the layer below. */
void unmapped_ranges_keep_outermost (GArray *segs);

#endif

/* memres - CUDA memory resources
 * memres-adaptors.h: the C API of the adaptors embedded in libmemres (`stats`, `track`,
 * `retry`; see README.md "Adaptors"). Each function takes any layer of a stack and acts on
 * the first layer of its kind at or below it (memres_resource_get_upstream()), so that
 * `memres_stats_get_counters (mr, ...)` works on the resource an application holds, whatever
 * is stacked above the stats layer. Full documentation: the reference
 * (share/gtk-doc/html/memres), memres-adaptors. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-adaptors
 * @title: Adaptors
 * @short_description: the C API of the embedded `stats`, `track` and `retry` adaptors
 * @section_id: memres-memres-adaptors
 *
 * Adaptors are layers stacked above another resource in a spec (`stats>dmr:device=0`). The three
 * embedded in libmemres have functions of their own: `stats` counts bytes and allocations
 * (#MemresStatsCounters, memres_stats_get_counters()), `track` keeps every live allocation
 * (memres_track_foreach_live(), a #MemresLiveFunc), and `retry` calls the application's
 * handlers when an allocation runs out of memory (memres_retry_add_handler(), a
 * #MemresOomHandler). Each function takes any layer of a stack and acts on the first layer of its
 * kind at or below it, so it works on the resource the application holds, whatever is stacked
 * above the adaptor; %MEMRES_ERROR_NOT_FOUND when there is none.
 *
 * |[<!-- language="C" -->
 * g_autoptr (MemresResource) mr = memres_resource_new ("stats>dmr:device=0", &error);
 * MemresStatsCounters c;
 *
 * // ... allocations ...
 * if (memres_stats_get_counters (mr, &c, &error))
 *   g_print ("peak %" G_GUINT64_FORMAT " bytes\n", c.bytes_peak);
 * ]|
 *
 * Every function here is thread-safe.
 */

/**
 * MEMRES_STATS_N_SIZE_CLASSES:
 *
 * Entries of #MemresStatsCounters.size_classes: class k counts allocations of 2^k to
 * 2^(k+1) - 1 bytes.
 *
 * Since: 1.2
 */
#define MEMRES_STATS_N_SIZE_CLASSES 64

typedef struct _MemresStatsCounters MemresStatsCounters;

/**
 * MemresStatsCounters:
 * @bytes_current: bytes in live allocations of the layer now (the sizes its upstream returned)
 * @bytes_peak: high-water mark of @bytes_current since creation or memres_stats_reset()
 * @bytes_total: bytes of every allocation since creation or the reset
 * @count_current: live allocations now
 * @count_peak: high-water mark of @count_current
 * @count_total: allocations since creation or the reset
 * @size_classes: allocations since creation or the reset by size: entry k counts those of
 *   2^k to 2^(k+1) - 1 bytes
 *
 * What a `stats` layer counted. Frozen layout.
 *
 * Since: 1.2
 */
struct _MemresStatsCounters
{
  guint64 bytes_current;
  guint64 bytes_peak;
  guint64 bytes_total;
  guint64 count_current;
  guint64 count_peak;
  guint64 count_total;
  guint64 size_classes[MEMRES_STATS_N_SIZE_CLASSES];
};

gboolean memres_stats_get_counters (MemresResource *mr, MemresStatsCounters *counters,
                                    GError **error);
gboolean memres_stats_reset (MemresResource *mr, GError **error);
/* the counts of one counted layer (MEMRES_KIND_COUNTED), which the `stats` functions read */
gboolean memres_resource_get_counts (MemresResource *mr, MemresStatsCounters *counts,
                                     GError **error);
gboolean memres_resource_reset_counts (MemresResource *mr, GError **error);

typedef struct _MemresLiveAllocation MemresLiveAllocation;

/**
 * MemresLiveAllocation:
 * @address: start of the allocation (a `CUdeviceptr` or a host pointer as an integer)
 * @size: its size in bytes, as the upstream returned it
 * @stream: the stream it was allocated on
 * @thread: the allocating thread (its kernel thread id, as in `gettid()`)
 * @time: when it was allocated, in microseconds of `g_get_real_time` (allocations made within
 *   one microsecond have the same)
 * @backtrace: (nullable): the allocating call stack, one frame a line, innermost first, from
 *   the caller of memres_resource_allocate() out (the frames of libmemres left out), when the
 *   `track` layer was created with `backtrace=true`; else %NULL
 *
 * One live allocation of a `track` layer, as memres_track_foreach_live() passes it (valid
 * during the call only).
 *
 * Since: 1.2
 */
struct _MemresLiveAllocation
{
  guint64 address;
  gsize size;
  MemresStream stream;
  guint64 thread;
  gint64 time;
  const char *backtrace;
};

/**
 * MemresLiveFunc:
 * @allocation: one live allocation (transfer none, valid during the call)
 * @user_data: what memres_track_foreach_live() was given
 *
 * The callback of memres_track_foreach_live(), called once per live allocation of the `track`
 * layer, oldest first, on the calling thread with no memres lock held: it may allocate and
 * free (what it does is not in the walk).
 *
 * Returns: %TRUE to go on, %FALSE to stop
 *
 * Since: 1.2
 */
typedef gboolean (*MemresLiveFunc) (const MemresLiveAllocation *allocation, gpointer user_data);

gboolean memres_track_foreach_live (MemresResource *mr, MemresLiveFunc func, gpointer user_data,
                                    GError **error);

/**
 * MemresOomHandler:
 * @mr: the `retry` layer whose allocation ran out of memory (transfer none)
 * @size: the bytes asked for
 * @attempt: 1 for the first failure of this allocation, 2 for the second, ...
 * @error: why it failed: %MEMRES_ERROR_OUT_OF_MEMORY (the code every kind reports, for the
 *   driver's `CUDA_ERROR_OUT_OF_MEMORY` too; its message names the failing call)
 * @user_data: what memres_retry_add_handler() was given
 *
 * Called when an allocation through a `retry` layer fails for lack of memory: free what you
 * can (close buffers, trim caches), then say whether the allocation should be tried again.
 * Called on the allocating thread with no memres lock held; it may allocate itself (an
 * allocation through the same `retry` layer that runs out of memory inside a handler fails
 * without calling its handlers again; another `retry` layer, of another resource, runs its
 * own).
 *
 * Returns: %TRUE to retry the allocation, %FALSE to fail it (or to let the next handler
 *   decide)
 *
 * Since: 1.2
 */
typedef gboolean (*MemresOomHandler) (MemresResource *mr, gsize size, guint attempt,
                                      const GError *error, gpointer user_data);

guint memres_retry_add_handler (MemresResource *mr, MemresOomHandler handler, gpointer user_data,
                                GDestroyNotify destroy, GError **error);
gboolean memres_retry_remove_handler (MemresResource *mr, guint id, GError **error);

G_END_DECLS

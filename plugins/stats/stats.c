/* memres - CUDA memory resources
 * stats.c: the `stats` adaptor: counts what goes through it, bytes and allocations, current,
 * peak and total, and allocations by power-of-two size class (memres_stats_get_counters()).
 * Allocations pass through unchanged (MEMRES_KIND_PASSES_ALLOCATIONS). The kind has no allocate
 * or deallocate slot and no counter: it is MEMRES_KIND_COUNTED, so the core passes each call to
 * the upstream itself, as memres_upstream_allocate() would, and counts it on the calling thread's
 * stripe (core/counting.c); the layer only reads those counts (memres_resource_get_counts()).
 * Embedded in libmemres for its C API (memres-adaptors.h), on the public headers alone, as any
 * plugin. */
#include <memres/memres-plugin.h>

static gboolean
stats_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
stats_finalize (MemresResource *mr)
{
}

static gboolean
stats_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  MemresStatsCounters c;

  if (!memres_resource_get_counts (mr, &c, error))
    return FALSE;
  /* the layer's own view: what it handed out (reserving is the upstream's business) */
  stats->used_current = c.bytes_current;
  stats->used_high = c.bytes_peak;
  stats->reserved_current = c.bytes_current;
  stats->reserved_high = c.bytes_peak;
  return TRUE;
}

static gboolean
stats_reset_stats (MemresResource *mr, GError **error)
{
  return memres_resource_reset_counts (mr, error);
}

static const MemresResourceOps stats_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = stats_init,
  .finalize = stats_finalize,
  .get_stats = stats_get_stats,
  .reset_stats = stats_reset_stats,
};

static const MemresKindInfo stats_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "stats",
  .description = "Adaptor: counts bytes and allocations (current, peak, total, by size class)",
  .ops = &stats_ops,
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS | MEMRES_KIND_OWN_USAGE
           | MEMRES_KIND_COUNTED,
};

/**
 * memres_stats_get_counters:
 * @mr: a resource whose stack has a `stats` layer at or below it
 * @counters: (out caller-allocates): return location for the counters
 * @error: return location for a #GError, or %NULL
 *
 * Reads what the first `stats` layer at or below @mr counted: bytes and allocations, current,
 * peak and total, and allocations by size class (memres_resource_get_counts() of that layer,
 * which says how exact they are while threads allocate at once). No driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_FOUND when the stack has no `stats` layer there.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_stats_get_counters (MemresResource *mr, MemresStatsCounters *counters, GError **error)
{
  MemresResource *layer;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (counters != NULL, FALSE);

  layer = memres_resource_find_layer (mr, "stats", error);
  return layer != NULL && memres_resource_get_counts (layer, counters, error);
}

/**
 * memres_stats_reset:
 * @mr: a resource whose stack has a `stats` layer at or below it
 * @error: return location for a #GError, or %NULL
 *
 * Resets the first `stats` layer at or below @mr: the peaks to the current values, the totals
 * and size classes to 0 (the current values stay). memres_resource_reset_stats() on the layer
 * does the same. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_FOUND when the stack has no `stats` layer there.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
gboolean
memres_stats_reset (MemresResource *mr, GError **error)
{
  MemresResource *layer;

  g_return_val_if_fail (mr != NULL, FALSE);

  layer = memres_resource_find_layer (mr, "stats", error);
  return layer != NULL && memres_resource_reset_counts (layer, error);
}

static gboolean
stats_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &stats_kind, error);
}

MEMRES_PLUGIN_DEFINE_EMBEDDED (stats, "Statistics adaptor, embedded in libmemres",
                               stats_plugin_init);

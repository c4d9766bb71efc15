/* tally.c: the `tally` adaptor, an example of an adaptor kind (memres ABI 2.0). In a stack such
 * as `tally>host` or `tally:max_live=64>dmr:device=0`, the core creates the layer below first
 * and gives it to this layer as its upstream (memres_resource_get_upstream()); allocate and
 * deallocate reach it with memres_upstream_allocate() and memres_upstream_deallocate(), on the
 * buffer's own allocation record (MEMRES_KIND_PASSES_ALLOCATIONS: no record of its own, so that
 * export and resize can pass through to the layer that made the memory).
 *
 * It counts live buffers and bytes, refuses an allocation past `max_live` buffers, and reports
 * its own view in memres_resource_get_stats(). What it leaves NULL passes through: reset_stats
 * is its own, trim and peer access go to the upstream. */
#include <memres/memres-plugin.h>

typedef struct
{
  guint64 max_live;
  guint64 live;  /* atomic: buffers now */
  guint64 bytes; /* atomic: bytes now */
  guint64 high;  /* atomic: high-water mark of bytes */
} Tally;

static const MemresOptionSpec tally_options[] = {
  { "max_live", MEMRES_OPTION_INT, "1000000", "the most buffers live at once through the layer",
    NULL, 1, G_MAXINT64 },
};

static gboolean
tally_init (MemresResource *mr, const MemresOptions *options, GError **error G_GNUC_UNUSED)
{
  Tally *self = memres_resource_get_private (mr);

  /* the upstream already exists: it was created from the rest of the stack */
  g_assert (memres_resource_get_upstream (mr) != NULL);
  self->max_live = (guint64) memres_options_get_int (options, "max_live");
  return TRUE;
}

static void
tally_finalize (MemresResource *mr G_GNUC_UNUSED)
{
  /* nothing to release: the core drops the upstream after this returns */
}

static gboolean
tally_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  Tally *self = memres_resource_get_private (mr);
  guint64 bytes, high;

  if (__atomic_add_fetch (&self->live, 1, __ATOMIC_RELAXED) > self->max_live)
    {
      __atomic_sub_fetch (&self->live, 1, __ATOMIC_RELAXED);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "tally: %" G_GUINT64_FORMAT " buffers are live already (max_live)",
                   self->max_live);
      return FALSE;
    }
  if (!memres_upstream_allocate (mr, size, stream, alloc, error))
    {
      __atomic_sub_fetch (&self->live, 1, __ATOMIC_RELAXED);
      return FALSE;
    }
  /* alloc->size: what the upstream returned (it may round up); deallocate sees the same */
  bytes = __atomic_add_fetch (&self->bytes, alloc->size, __ATOMIC_RELAXED);
  high = __atomic_load_n (&self->high, __ATOMIC_RELAXED);
  while (bytes > high
         && !__atomic_compare_exchange_n (&self->high, &high, bytes, TRUE, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED))
    ;
  return TRUE;
}

static gboolean
tally_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  Tally *self = memres_resource_get_private (mr);

  guint64 size = alloc->size;

  /* uncounted before the free: once freed, another thread may get the memory and count it */
  __atomic_sub_fetch (&self->bytes, size, __ATOMIC_RELAXED);
  __atomic_sub_fetch (&self->live, 1, __ATOMIC_RELAXED);
  if (memres_upstream_deallocate (mr, alloc, stream, error))
    return TRUE;
  /* nothing released (the buffer stays open for another close) unless the upstream set the
   * address to 0: then it is gone */
  if (alloc->address != 0)
    {
      __atomic_add_fetch (&self->bytes, size, __ATOMIC_RELAXED);
      __atomic_add_fetch (&self->live, 1, __ATOMIC_RELAXED);
    }
  return FALSE;
}

/* Optional for adaptors: @info arrives with the upstream's device and flags. A resize would
 * change sizes behind the counts, so this layer does not offer it. */
static void
tally_query (MemresResource *mr G_GNUC_UNUSED, MemresResourceInfo *info)
{
  info->flags &= ~MEMRES_MEMORY_RESIZABLE;
}

static gboolean
tally_get_stats (MemresResource *mr, MemresStats *stats, GError **error G_GNUC_UNUSED)
{
  Tally *self = memres_resource_get_private (mr);

  stats->used_current = __atomic_load_n (&self->bytes, __ATOMIC_RELAXED);
  stats->used_high = MAX (__atomic_load_n (&self->high, __ATOMIC_RELAXED), stats->used_current);
  stats->reserved_current = stats->used_current;
  stats->reserved_high = stats->used_high;
  return TRUE;
}

static gboolean
tally_reset_stats (MemresResource *mr, GError **error G_GNUC_UNUSED)
{
  Tally *self = memres_resource_get_private (mr);

  __atomic_store_n (&self->high, __atomic_load_n (&self->bytes, __ATOMIC_RELAXED),
                    __ATOMIC_RELAXED);
  return TRUE;
}

static const MemresResourceOps tally_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = tally_init,
  .finalize = tally_finalize,
  .allocate = tally_allocate,
  .deallocate = tally_deallocate,
  .query = tally_query,
  .get_stats = tally_get_stats,
  .reset_stats = tally_reset_stats,
};

static const MemresKindInfo tally_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "tally",
  .description = "Example adaptor: counts live buffers and bytes of the layer below",
  .options = tally_options,
  .n_options = G_N_ELEMENTS (tally_options),
  .ops = &tally_ops,
  .instance_size = sizeof (Tally),
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
};

static gboolean
tally_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &tally_kind, error);
}

MEMRES_PLUGIN_DEFINE (tally, "Example adaptor plugin (memres plugin template)", tally_plugin_init)

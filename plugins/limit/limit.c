/* memres - CUDA memory resources
 * limit.c: the `limit` adaptor: at most `max` bytes in live allocations of the layer. An
 * allocation that would go past it fails with MEMRES_ERROR_OUT_OF_MEMORY, saying the size asked
 * for (and, when the layer below rounds it up, the size it takes), the limit and what is in use,
 * without calling anything below. The bytes counted are those the upstream
 * hands out (its rounded sizes): the requested size is reserved first (one atomic add, undone
 * when over the limit), then the difference of a rounded-up record, so that the limit is exact
 * at the boundary under any number of threads. Allocations pass through unchanged
 * (MEMRES_KIND_PASSES_ALLOCATIONS). The report of an out-of-memory error that reaches the
 * application gets the limit, its use and the refusal from the explain_oom slot; the counters
 * (memres_resource_get_counters()) are `limit` and `used`. */
#include <memres/memres-plugin.h>

typedef struct
{
  guint64 max;
  guint64 used; /* atomic */
} LimitResource;

/* The last refusal of the calling thread: which layer, and the bytes it would have taken (its
 * upstream's rounded size), for the report of the out-of-memory error (limit_explain_oom()).
 * Written and read on the failure path only. */
static __thread struct
{
  MemresResource *mr;
  guint64 bytes;
} last_refusal;

static const MemresOptionSpec limit_options[] = {
  { "max", MEMRES_OPTION_SIZE, NULL, "the most bytes live at once in allocations of the layer",
    NULL, 0, 0 },
};

static gboolean
limit_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  LimitResource *self = memres_resource_get_private (mr);

  if (!memres_options_is_set (options, "max"))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "kind \"limit\" needs option \"max\" (bytes, for example limit:max=8GiB)");
      return FALSE;
    }
  self->max = memres_options_get_size (options, "max");
  return TRUE;
}

static void
limit_finalize (MemresResource *mr)
{
}

/* The ending of "byte" after the count @n: "1 byte", "2 bytes". */
static const char *
plural (guint64 n)
{
  return n == 1 ? "" : "s";
}

/* Takes @bytes more of the limit for an allocation of @asked bytes (what the layer was asked
 * for), @below bytes in the layer below (its rounded size; @asked when it does not round), of
 * which @held are taken already, or sets the error (the size asked, the layer's below when it
 * differs, what is in use not counting @held) and takes nothing. */
static gboolean
reserve (MemresResource *mr, LimitResource *self, guint64 bytes, guint64 asked, guint64 below,
         guint64 held, GError **error)
{
  guint64 used = __atomic_load_n (&self->used, __ATOMIC_RELAXED);

  do
    {
      if (bytes > self->max || used > self->max - bytes)
        {
          g_autofree char *rounded
              = below != asked ? g_strdup_printf (" (%" G_GUINT64_FORMAT " bytes in the layer "
                                                  "below, which rounds it up)",
                                                  below)
                               : NULL;

          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                       "limit: allocating %" G_GUINT64_FORMAT " byte%s%s would pass the limit "
                       "of %" G_GUINT64_FORMAT " byte%s (%" G_GUINT64_FORMAT " in use)",
                       asked, plural (asked), rounded != NULL ? rounded : "", self->max,
                       plural (self->max), used - held);
          last_refusal.mr = mr;
          last_refusal.bytes = below;
          return FALSE;
        }
    }
  while (!__atomic_compare_exchange_n (&self->used, &used, used + bytes, TRUE, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED));
  return TRUE;
}

static gboolean
limit_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  LimitResource *self = memres_resource_get_private (mr);

  if (!reserve (mr, self, size, size, size, 0, error))
    return FALSE;
  if (!memres_upstream_allocate (mr, size, stream, alloc, error))
    {
      __atomic_sub_fetch (&self->used, size, __ATOMIC_RELAXED);
      return FALSE;
    }
  if (G_UNLIKELY (alloc->size > size)
      && !reserve (mr, self, alloc->size - size, size, alloc->size, size, error))
    {
      memres_upstream_deallocate (mr, alloc, stream, NULL);
      __atomic_sub_fetch (&self->used, size, __ATOMIC_RELAXED);
      return FALSE;
    }
  return TRUE;
}

static gboolean
limit_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  LimitResource *self = memres_resource_get_private (mr);
  gsize size = alloc->size;

  /* The bytes count until the layer below has them back: released first, another thread could
   * have more than max below at once; and a free that fails leaves the buffer open. */
  if (!memres_upstream_deallocate (mr, alloc, stream, error))
    return FALSE;
  __atomic_sub_fetch (&self->used, size, __ATOMIC_RELEASE);
  return TRUE;
}

/* The report of an out-of-memory error (#MemresResourceOps.explain_oom): the limit, what is
 * counted against it, and what this thread was refused. */
static void
limit_explain_oom (MemresResource *mr, MemresOomFigures *figures)
{
  LimitResource *self = memres_resource_get_private (mr);

  figures->limit = self->max;
  figures->limit_used = __atomic_load_n (&self->used, __ATOMIC_RELAXED);
  /* this thread's refusal, unless the limit would let it pass now (an older one, which a layer
   * above caught) */
  if (last_refusal.mr == mr
      && self->max - MIN (self->max, figures->limit_used) < last_refusal.bytes)
    figures->refused = last_refusal.bytes;
  last_refusal.mr = NULL;
}

/* The counters (memres_resource_get_counters()): the limit and the bytes counted against it, what
 * RMM's limiting adaptor answers as get_allocation_limit() and get_allocated_bytes(). */
static gboolean
limit_get_counters (MemresResource *mr, GVariantDict *counters, GError **error)
{
  LimitResource *self = memres_resource_get_private (mr);

  g_variant_dict_insert (counters, "limit", "t", self->max);
  g_variant_dict_insert (counters, "used", "t", __atomic_load_n (&self->used, __ATOMIC_RELAXED));
  return TRUE;
}

/* A resize would change sizes behind the count. */
static void
limit_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags &= ~MEMRES_MEMORY_RESIZABLE;
}

/* The snapshot slot: the limit and the bytes counted against it; the layer holds no memory of
 * its own (its allocations are its upstream's blocks). */
static void
limit_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  LimitResource *self = memres_resource_get_private (mr);

  memres_snapshot_add_figure (layer, "limit", self->max);
  memres_snapshot_add_figure (layer, "limit_used", __atomic_load_n (&self->used, __ATOMIC_RELAXED));
}

static const MemresResourceOps limit_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = limit_init,
  .finalize = limit_finalize,
  .allocate = limit_allocate,
  .deallocate = limit_deallocate,
  .query = limit_query,
  .explain_oom = limit_explain_oom,
  .snapshot = limit_snapshot,
  .get_counters = limit_get_counters,
};

static const MemresKindInfo limit_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "limit",
  .description
  = "Adaptor: at most `max` bytes live; past it allocations fail, nothing below called",
  .options = limit_options,
  .n_options = G_N_ELEMENTS (limit_options),
  .ops = &limit_ops,
  .instance_size = sizeof (LimitResource),
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
};

static gboolean
limit_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &limit_kind, error);
}

MEMRES_PLUGIN_DEFINE (limit, "Limiting adaptor: a byte budget over any resource", limit_plugin_init)

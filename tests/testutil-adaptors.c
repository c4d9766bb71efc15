/* testutil-adaptors.c: the in-test kinds of the adaptor tests (test-adaptors.c, test-stats.c,
 * test-limit.c, test-track.c, test-log.c, test-retry.c): "leaky", an adaptor that never gives
 * allocations back (so that track is finalized with allocations live), and "tight", a base kind
 * of host memory with a capacity and a cache of freed bytes that only trim returns (for retry's
 * default handler); "arena", a base kind of static memory (for counts of allocations left live);
 * "balky" and "crumbly", adaptors whose frees fail. */
#include "testutil.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>
#include "testutil-adaptors.h"

/* ---- leaky ---- */

static gboolean
leaky_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
leaky_finalize (MemresResource *mr)
{
}

static gboolean
leaky_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  return memres_upstream_allocate (mr, size, stream, alloc, error);
}

static gboolean
leaky_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  return TRUE; /* never passed down: the layer below keeps it live */
}

static const MemresResourceOps leaky_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = leaky_init,
  .finalize = leaky_finalize,
  .allocate = leaky_allocate,
  .deallocate = leaky_deallocate,
};

static const MemresOptionSpec tight_options[] = {
  { "capacity", MEMRES_OPTION_SIZE, "1000", "bytes", NULL, 0, 0 },
};

static gboolean
tight_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  TightResource *self = memres_resource_get_private (mr);

  self->capacity = memres_options_get_size (options, "capacity");
  return TRUE;
}

static gboolean
tight_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  TightResource *self = memres_resource_get_private (mr);
  guint64 used = __atomic_add_fetch (&self->used, size, __ATOMIC_SEQ_CST);

  if (used + __atomic_load_n (&self->cached, __ATOMIC_SEQ_CST) > self->capacity)
    {
      __atomic_sub_fetch (&self->used, size, __ATOMIC_SEQ_CST);
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "tight: full");
      return FALSE;
    }
  alloc->address = (guint64) (guintptr) g_malloc (size);
  alloc->size = size;
  return TRUE;
}

static gboolean
tight_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  TightResource *self = memres_resource_get_private (mr);

  g_free ((gpointer) (guintptr) alloc->address);
  __atomic_sub_fetch (&self->used, alloc->size, __ATOMIC_SEQ_CST);
  __atomic_add_fetch (&self->cached, alloc->size, __ATOMIC_SEQ_CST);
  return TRUE;
}

static gboolean
tight_trim (MemresResource *mr, gsize keep, GError **error)
{
  TightResource *self = memres_resource_get_private (mr);

  g_atomic_int_inc (&self->trims);
  __atomic_store_n (&self->cached, MIN (keep, __atomic_load_n (&self->cached, __ATOMIC_SEQ_CST)),
                    __ATOMIC_SEQ_CST);
  return TRUE;
}

static void
tight_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static const MemresResourceOps tight_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = tight_init,
  .finalize = leaky_finalize,
  .allocate = tight_allocate,
  .deallocate = tight_deallocate,
  .query = tight_query,
  .trim = tight_trim,
};

/* "arena": a base kind whose memory is a static arena (every allocation the same bytes, never
 * written: for counting only), so that an allocation left live leaks nothing. */
static guint8 arena_bytes[4096];

static gboolean
arena_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  if (size > sizeof arena_bytes)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY, "arena: full");
      return FALSE;
    }
  alloc->address = (guint64) (guintptr) arena_bytes;
  alloc->size = size;
  return TRUE;
}

static gboolean
arena_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  return TRUE;
}

static const MemresResourceOps arena_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = leaky_init,
  .finalize = leaky_finalize,
  .allocate = arena_allocate,
  .deallocate = arena_deallocate,
  .query = tight_query,
};

/* "balky": an adaptor whose deallocate refuses every other call (nothing released), so that a
 * close fails once and succeeds when tried again. */
gint balky_calls; /* atomic */

static gboolean
balky_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  if (g_atomic_int_add (&balky_calls, 1) % 2 == 0)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "balky refuses this free");
      return FALSE;
    }
  return memres_upstream_deallocate (mr, alloc, stream, error);
}

/* "crumbly": an adaptor whose free releases the allocation and then fails (the contract's
 * partial failure: address set to 0), so that the core closes the buffer all the same. */
static gboolean
crumbly_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                    GError **error)
{
  if (!memres_upstream_deallocate (mr, alloc, stream, error))
    return FALSE;
  alloc->address = 0;
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "crumbly freed it, then failed");
  return FALSE;
}

static const MemresResourceOps crumbly_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = leaky_init,
  .finalize = leaky_finalize,
  .allocate = leaky_allocate,
  .deallocate = crumbly_deallocate,
};

static const MemresResourceOps balky_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = leaky_init, /* leaky's: nothing to set up, allocations passed down */
  .finalize = leaky_finalize,
  .allocate = leaky_allocate,
  .deallocate = balky_deallocate,
};

void
register_kinds (void)
{
  const MemresKindInfo balky = {
    .struct_size = sizeof balky,
    .name = "balky",
    .description = "adaptor whose every other free fails",
    .ops = &balky_ops,
    .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
  };
  const MemresKindInfo crumbly = {
    .struct_size = sizeof crumbly,
    .name = "crumbly",
    .description = "adaptor whose free releases the allocation, then fails",
    .ops = &crumbly_ops,
    .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
  };
  const MemresKindInfo leaky = {
    .struct_size = sizeof leaky,
    .name = "leaky",
    .description = "adaptor that never frees",
    .ops = &leaky_ops,
    .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
  };
  const MemresKindInfo tight = {
    .struct_size = sizeof tight,
    .name = "tight",
    .description = "small host memory with a cache only trim empties",
    .options = tight_options,
    .n_options = G_N_ELEMENTS (tight_options),
    .ops = &tight_ops,
    .instance_size = sizeof (TightResource),
  };
  const MemresKindInfo arena = {
    .struct_size = sizeof arena,
    .name = "arena",
    .description = "host memory of a static arena, for counting",
    .ops = &arena_ops,
  };
  GError *error = NULL;

  if (!memres_registry_register_kind (&arena, &error)
      || !memres_registry_register_kind (&balky, &error)
      || !memres_registry_register_kind (&crumbly, &error)
      || !memres_registry_register_kind (&leaky, &error)
      || !memres_registry_register_kind (&tight, &error))
    g_error ("%s", error->message);
}

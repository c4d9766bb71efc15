/* memres - CUDA memory resources
 * cache.c: the `cache` adaptor, a caching pool over any upstream resource: the kind itself (its
 * options, init and finalize, statistics, counters and trim, the plugin). Allocate and close are
 * in cache-alloc.c, the upstream's side in cache-upstream.c, the per-thread fronts, shared bins
 * and events in plugins/common/cache/ (cache-private.h lists the files).
 *
 * Spec: cache[:max_block=SIZE,max_cached=SIZE|max,chunk=SIZE,front=N,front_bytes=SIZE]>UPSTREAM
 *
 * Requests up to max_block are rounded up to a size class (cache-classes.h) and served from
 * blocks the cache keeps; larger requests go straight to the upstream (one upstream allocation
 * per buffer, freed at close). Blocks of classes up to chunk / 16 are carved from chunks of
 * `chunk` bytes taken from the upstream; larger blocks are upstream allocations of their own.
 *
 * Where a free block is kept:
 * - the front cache of the thread that freed it (per thread and per class, up to `front`
 *   blocks): allocate and close of the same class on the same stream take only the front's own
 *   lock, which no other thread takes except trim, get_stats, an out-of-memory flush and
 *   finalize. No shared cache line is written on that path.
 * - the shared cache (per class, under the instance's mutex) when the front is full, when the
 *   front's byte lease cannot grow (past front_bytes, or max_cached), or when its thread exits.
 *
 * Stream rules (docs/cache.md): a block freed on stream S is handed out again for S at once;
 * for another stream S2 only after S2 waits on an event recorded on S after the free
 * (cuEventRecord at the spill into the shared cache, where S is the stream the caller is
 * closing on and so alive; cuStreamWaitEvent when S2 takes it; on the legacy stream, which
 * cannot be gone, the event is recorded only when S2 takes the block). Front blocks carry no event
 * and are only ever reused on their stream. Over an upstream that is neither stream-ordered nor
 * device-accessible (host), streams are ignored and no event exists. Returning memory to the
 * upstream (trim, the out-of-memory flush, finalize) first synchronizes the device's primary
 * context when any block lacks an event (the stream it was freed on may be gone). */
#include "cache-private.h"

/* ---- life ------------------------------------------------------------------------------------ */

static const MemresOptionSpec cache_options[] = {
  { "max_block", MEMRES_OPTION_SIZE, "64MiB",
    "largest request served from size classes (rounded up to its class, 256 B to 4 GiB); "
    "larger ones are upstream allocations of their own, freed at close",
    NULL, 0, 0 },
  { "max_cached", MEMRES_OPTION_SIZE, "max",
    "most bytes of free blocks kept (front and shared caches); a free past it returns its "
    "block to the upstream (a block carved from a chunk stays until its chunk is free)",
    NULL, 0, 0 },
  { "chunk", MEMRES_OPTION_SIZE, "2MiB",
    "bytes taken from the upstream at a time for the small classes (those of at most "
    "chunk/16 bytes); 4 KiB to 1 GiB",
    NULL, 0, 0 },
  { "front", MEMRES_OPTION_INT, "8",
    "free blocks per size class in each thread's front cache (0: every free goes to the "
    "shared cache)",
    NULL, 0, CACHE_FRONT_MAX },
  { "front_bytes", MEMRES_OPTION_SIZE, "256MiB",
    "most bytes of free blocks in each thread's front cache; a free past it goes to the shared "
    "cache, where every thread finds it",
    NULL, 0, 0 },
};

/* The first layer of @up that does not pass allocations through (the adaptors that do are
 * skipped: the core calls the layer below them), or NULL. */
static MemresResource *
upstream_holder (MemresResource *up)
{
  for (; up != NULL; up = memres_resource_get_upstream (up))
    if (!(memres_kind_get_flags (memres_resource_get_kind (up)) & MEMRES_KIND_PASSES_ALLOCATIONS))
      return up;
  return NULL;
}

static gboolean
cache_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  guint64 max_block = memres_options_get_size (options, "max_block");
  guint64 chunk = memres_options_get_size (options, "chunk");
  MemresMemoryFlags flags;
  MemresResource *holder;
  guint n_classes;

  if (max_block < 256 || max_block > CACHE_MAX_BLOCK_MAX)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "option \"max_block\" of kind \"cache\": %" G_GUINT64_FORMAT
                   " is not between 256 bytes and 4 GiB",
                   max_block);
      return FALSE;
    }
  if (chunk < 4096 || chunk > (G_GUINT64_CONSTANT (1) << 30))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "option \"chunk\" of kind \"cache\": %" G_GUINT64_FORMAT
                   " is not between 4 KiB and 1 GiB",
                   chunk);
      return FALSE;
    }
  self->self_mr = mr;
  self->upstream = memres_resource_get_upstream (mr);
  self->device = memres_resource_get_device (self->upstream);
  flags = memres_resource_get_flags (self->upstream);
  if (flags & MEMRES_MEMORY_GRAPH)
    {
      /* a block kept past its graph's launch would be an address no launch allocated */
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "kind \"cache\" cannot cache graph memory (upstream \"%s\"): its allocations "
                   "exist only inside launches of the graph that captured them",
                   memres_resource_get_kind_name (self->upstream));
      return FALSE;
    }
  n_classes = cache_class_of ((gsize) max_block) + 1;
  self->max_cached = memres_options_get_size (options, "max_cached");
  self->chunk_size = (gsize) chunk;
  self->n_chunk_classes = 0;
  while (self->n_chunk_classes < n_classes
         && cache_class_size (self->n_chunk_classes) <= chunk / CACHE_CHUNK_BLOCKS)
    self->n_chunk_classes++;
  /* cross-stream reuse needs events over memory that is device-accessible or stream-ordered */
  cache_parts_init (&self->parts, cache_class_size (n_classes - 1), n_classes,
                    (guint) memres_options_get_int (options, "front"),
                    memres_options_get_size (options, "front_bytes"),
                    (flags & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED)) != 0,
                    MAX (memres_resource_get_device (self->upstream), 0));
  /* an upstream that can sleep: free blocks kept by tag (Cache.by_tag_blocks); a kind that
   * also reads a buffer's tag to place it: Cache.by_tag */
  holder = upstream_holder (self->upstream);
  if (holder != NULL && memres_kind_get_ops (memres_resource_get_kind (holder))->sleep != NULL)
    {
      MemresKindFlags hflags = memres_kind_get_flags (memres_resource_get_kind (holder));

      self->by_tag_blocks = TRUE;
      self->by_tag = !(hflags & MEMRES_KIND_ADAPTOR) && (hflags & MEMRES_KIND_TAGGED);
    }
  if (self->by_tag)
    self->parts.hit_max = 0;
  return TRUE;
}

static void
cache_finalize (MemresResource *mr)
{
  Cache *self = memres_resource_get_private (mr);
  g_autoptr (GError) error = NULL;
  Retired retired = { NULL, NULL };

  cache_parts_stop (&self->parts);
  if (!release_idle (self, 0, CACHE_TAG_ANY, &retired, &error))
    g_warning ("cache: returning the cached blocks to the upstream failed: %s", error->message);
  if (self->chunks != NULL || self->reserved != 0)
    g_warning ("cache: %" G_GUINT64_FORMAT " bytes still reserved at finalize", self->reserved);
  cache_parts_clear (&self->parts);
  g_mutex_unlock (&self->parts.lock);
  retired_free (self, &retired, NULL);
  if (self->own_blocks != NULL)
    g_hash_table_unref (self->own_blocks);
  if (self->direct_live != NULL)
    g_hash_table_unref (self->direct_live);
  g_mutex_clear (&self->parts.lock);
}

/* Cached blocks are not the upstream's allocations: nothing of theirs can be exported or
 * resized. */
static void
cache_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags &= ~(MEMRES_MEMORY_IPC_ENABLED | MEMRES_MEMORY_FABRIC_HANDLES
                   | MEMRES_MEMORY_RESIZABLE | MEMRES_MEMORY_IMPORTED);
}

/* ---- statistics and trim --------------------------------------------------------------------- */

static gboolean
cache_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  guint64 cached;

  g_mutex_lock (&self->parts.lock);
  cached = self->parts.shared_cached + cache_fronts_cached_exact (&self->parts);
  stats->reserved_current = reserved_bytes (self);
  stats->used_current = used_bytes (self, cached);
  self->reserved_high = MAX (self->reserved_high, stats->reserved_current);
  self->used_high = MAX (self->used_high, stats->used_current);
  stats->reserved_high = self->reserved_high;
  stats->used_high = self->used_high;
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

static gboolean
cache_reset_stats (MemresResource *mr, GError **error)
{
  Cache *self = memres_resource_get_private (mr);

  g_mutex_lock (&self->parts.lock);
  self->reserved_high = reserved_bytes (self);
  self->used_high
      = used_bytes (self, self->parts.shared_cached + cache_fronts_cached_exact (&self->parts));
  g_mutex_unlock (&self->parts.lock);
  return TRUE;
}

gboolean
cache_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  GError *local = NULL;
  Retired retired = { NULL, NULL };
  gboolean ok;

  g_mutex_lock (&self->parts.lock);
  ok = flush_idle (self, bytes_to_keep, &retired, error);
  g_mutex_unlock (&self->parts.lock);
  retired_free (self, &retired, NULL);
  if (!ok)
    return FALSE;
  /* then the upstream's own reserve, where it has one */
  if (!memres_resource_trim (self->upstream, bytes_to_keep, &local))
    {
      if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
        {
          g_propagate_error (error, local);
          return FALSE;
        }
      g_clear_error (&local);
    }
  return TRUE;
}

/* Counters (memres_resource_get_counters()): totals and, per class, (class bytes, hits,
 * misses, bytes cached). */
static gboolean
cache_get_counters (MemresResource *mr, GVariantDict *counters, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  GVariantBuilder classes;
  guint64 hits = 0, misses = 0, front_cached = 0;
  g_autofree guint64 *class_hits = g_new0 (guint64, self->parts.n_classes);
  g_autofree guint64 *class_cached = g_new0 (guint64, self->parts.n_classes);

  g_variant_builder_init (&classes, G_VARIANT_TYPE ("a(tttt)"));
  g_mutex_lock (&self->parts.lock);
  cache_fronts_stop (&self->parts);
  for (Front *f = self->parts.fronts; f != NULL; f = f->next)
    {
      for (guint c = 0; c < self->parts.n_classes; c++)
        {
          class_hits[c] += f->hits[c];
          class_cached[c] += (guint64) f->bins[c].n * cache_class_size (c);
        }
      front_cached += f->cached;
    }
  cache_fronts_resume (&self->parts);
  for (guint c = 0; c < self->parts.n_classes; c++)
    {
      class_hits[c] += self->parts.shared_hits[c] + self->parts.gone_hits[c];
      class_cached[c] += self->parts.shared[c].n * cache_class_size (c);
      hits += class_hits[c];
      misses += self->misses[c];
      g_variant_builder_add (&classes, "(tttt)", (guint64) cache_class_size (c), class_hits[c],
                             self->misses[c], class_cached[c]);
    }
  g_variant_dict_insert (counters, "hits", "t", hits);
  g_variant_dict_insert (counters, "misses", "t", misses);
  g_variant_dict_insert (counters, "direct", "t", self->direct);
  g_variant_dict_insert (counters, "oom_flushes", "t", self->oom_flushes);
  g_variant_dict_insert (counters, "reserved", "t", reserved_bytes (self));
  g_variant_dict_insert (counters, "cached", "t", self->parts.shared_cached + front_cached);
  g_variant_dict_insert (counters, "front_cached", "t", front_cached);
  g_variant_dict_insert (counters, "shared_cached", "t", self->parts.shared_cached);
  g_variant_dict_insert (counters, "used", "t",
                         used_bytes (self, self->parts.shared_cached + front_cached));
  g_variant_dict_insert (counters, "parked", "t", self->parked);
  g_variant_dict_insert (counters, "max_block", "t", (guint64) self->parts.max_block);
  g_variant_dict_insert (counters, "max_cached", "t", self->max_cached);
  g_variant_dict_insert (counters, "events", "b", self->parts.events);
  g_mutex_unlock (&self->parts.lock);
  g_variant_dict_insert_value (counters, "classes", g_variant_builder_end (&classes));
  return TRUE;
}

/* The report of an out-of-memory error (#MemresResourceOps.explain_oom): the free bytes of the
 * fronts and shared bins, the largest free block, and what strands them. Blocks carved from a
 * chunk go back to the upstream only with the whole chunk: after the out-of-memory flush, what
 * stays cached is blocks of chunks that are partly in use. */
static void
cache_explain_oom (MemresResource *mr, MemresOomFigures *figures)
{
  Cache *self = memres_resource_get_private (mr);
  guint64 cached, largest = 0;

  g_mutex_lock (&self->parts.lock);
  cache_fronts_stop (&self->parts);
  cached = self->parts.shared_cached;
  for (guint c = self->parts.n_classes; c-- > 0 && largest == 0;)
    {
      if (self->parts.shared[c].n > 0)
        largest = cache_class_size (c);
      for (Front *f = self->parts.fronts; f != NULL && largest == 0; f = f->next)
        if (f->bins[c].n > 0)
          largest = cache_class_size (c);
    }
  for (Front *f = self->parts.fronts; f != NULL; f = f->next)
    cached += f->cached;
  cache_fronts_resume (&self->parts);
  g_mutex_unlock (&self->parts.lock);
  figures->cached = cached;
  figures->largest_free = largest;
  if (largest < figures->request && cached >= figures->request)
    figures->remedy = g_strdup_printf (
        "the free blocks of `cache` up to %" G_GSIZE_FORMAT " bytes are carved from chunks of "
        "%" G_GSIZE_FORMAT " bytes, which go back to the memory below only whole: a smaller "
        "`chunk`, or a kind below that maps memory where it is needed, strands less",
        cache_class_size (self->n_chunk_classes - 1), self->chunk_size);
}

/* The snapshot slot: every block of every chunk (used, or free where a front or a shared bin
 * holds it), every block that is an upstream allocation of its own (used or free), and every
 * live request above max_block (used). Under the lock, with the fronts stopped, as statistics
 * read them. */
static void
cache_snapshot (MemresResource *mr, MemresSnapshotLayer *layer)
{
  Cache *self = memres_resource_get_private (mr);
  g_autoptr (GHashTable) free_blocks = g_hash_table_new (NULL, NULL);
  GHashTableIter iter;
  gpointer key;
  guint64 listed_used = 0, front_cached = 0, used;

  g_mutex_lock (&self->parts.lock);
  cache_fronts_stop (&self->parts);
  cache_free_blocks_collect (&self->parts, free_blocks);
  for (Front *f = self->parts.fronts; f != NULL; f = f->next)
    front_cached += f->cached;
  cache_fronts_resume (&self->parts);
  for (Chunk *chunk = self->chunks; chunk != NULL; chunk = chunk->next)
    for (guint i = 0; i < chunk->n_blocks; i++)
      {
        Block *b = &chunk->blocks[i];
        gsize csize = cache_class_size (b->cls); /* Block.size: CACHE_BLOCK_ASLEEP when asleep */
        /* a sleeping chunk's free blocks are parked, in no bin (cache-sleep.c) */
        gboolean is_free = g_hash_table_contains (free_blocks, b)
                           || (chunk->asleep && b->size != CACHE_BLOCK_ASLEEP);

        memres_snapshot_add_block (layer, b->address, csize, b->stream,
                                   is_free ? MEMRES_BLOCK_FREE : MEMRES_BLOCK_USED);
        if (!is_free)
          listed_used += csize;
      }
  g_hash_table_iter_init (&iter, free_blocks);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    {
      Block *b = key;

      if (b->chunk == NULL)
        memres_snapshot_add_block (layer, b->address, b->size, b->stream, MEMRES_BLOCK_FREE);
    }
  if (self->own_blocks != NULL)
    {
      g_hash_table_iter_init (&iter, self->own_blocks);
      while (g_hash_table_iter_next (&iter, &key, NULL))
        {
          Block *b = key;
          /* a sleeping block's size says so (CACHE_BLOCK_ASLEEP): its class's is its size */
          guint64 size = cache_class_size (b->cls);

          if (g_hash_table_contains (free_blocks, b))
            continue;
          memres_snapshot_add_block (layer, b->address, size, b->stream, MEMRES_BLOCK_USED);
          listed_used += size;
        }
    }
  if (self->direct_live != NULL)
    {
      gpointer value;

      g_hash_table_iter_init (&iter, self->direct_live);
      while (g_hash_table_iter_next (&iter, &key, &value))
        {
          const DirectLive *live = value;

          memres_snapshot_add_block (layer, GPOINTER_TO_SIZE (key), live->size, live->stream,
                                     MEMRES_BLOCK_USED);
          listed_used += live->size;
        }
    }
  used = used_bytes (self, self->parts.shared_cached + front_cached);
  memres_snapshot_add_figure (layer, "max_block", self->parts.max_block);
  memres_snapshot_add_figure (layer, "chunk_size", self->chunk_size);
  memres_snapshot_add_figure (layer, "max_cached", self->max_cached);
  memres_snapshot_add_figure (layer, "rounding", self->rounding);
  if (used > listed_used)
    {
      memres_snapshot_add_figure (layer, "unlisted_used", used - listed_used);
      /* not expected: every used block is listed above */
      memres_snapshot_set_unseen (layer, "bytes counted in use that no listed block holds "
                                         "(unlisted_used)");
    }
  g_mutex_unlock (&self->parts.lock);
}

/* fork(): the parts' locks (cache_parts_at_fork()) */
static void
cache_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  cache_parts_at_fork (mr != NULL ? &((Cache *) memres_resource_get_private (mr))->parts : NULL,
                       phase);
}

static const MemresResourceOps cache_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = cache_init,
  .finalize = cache_finalize,
  .allocate = cache_allocate,
  .deallocate = cache_deallocate,
  .query = cache_query,
  .get_stats = cache_get_stats,
  .reset_stats = cache_reset_stats,
  .trim = cache_trim,
  .get_counters = cache_get_counters,
  .at_fork = cache_at_fork,
  .explain_oom = cache_explain_oom,
  .snapshot = cache_snapshot,
  .sleep = cache_sleep,
  .wake = cache_wake,
};

static const MemresKindInfo cache_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "cache",
  .description = "Caching pool adaptor: size classes, per-thread front caches, stream-safe reuse",
  .options = cache_options,
  .n_options = G_N_ELEMENTS (cache_options),
  .ops = &cache_ops,
  .instance_size = sizeof (Cache),
  /* its segments: the upstream allocations it holds (cache-upstream.c) */
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_OWN_USAGE | MEMRES_KIND_SEGMENTS,
};

static gboolean
cache_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &cache_kind, error);
}

MEMRES_PLUGIN_DEFINE (cache, "The cache adaptor: a caching pool over any resource",
                      cache_plugin_init)

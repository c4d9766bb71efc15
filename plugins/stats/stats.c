/* memres - CUDA memory resources
 * stats.c: the `stats` adaptor: counts what goes through it, bytes and allocations, current,
 * peak and total, and allocations by power-of-two size class (memres_stats_get_counters()).
 * Allocations pass through unchanged (MEMRES_KIND_PASSES_ALLOCATIONS). Embedded in libmemres
 * for its C API, and closer to the core than a plugin: it calls its upstream's slots directly,
 * leaving the check of their results to its caller (MemresResource.passes_unchecked), and counts
 * the bytes it takes from its upstream for the upstream's statistics (the accountant of
 * memres-private.h), so that no second count runs on each allocate and free. Its allocate and
 * deallocate bodies are in core/stats-inline.h, which the core inlines where it calls this
 * layer's slots: a pair through the layer makes no indirect call of its own.
 *
 * The hot path is the point of this kind: an allocate+close pair through it must cost a few
 * nanoseconds over its upstream, so it touches few cache lines and runs a few straight-line
 * instructions; everything else is out of line. While one thread alone counts (the first to
 * count becomes the counts' owner, known by its thread pointer), it changes the current bytes
 * and count and their peaks, and counts the totals (bytes allocated, allocations per size class)
 * in the instance itself, with plain loads and stores: no locked instruction, no thread-local
 * lookup; one cache line of the instance, and the line of the size class (stats_owner_enter(), the
 * asymmetric barrier of owner-fence.h; where membarrier() cannot be used the counts are shared
 * from the start). The first other thread to count makes the counts shared for good
 * (share_counts(): it stops the owner and waits until it is out of its last update before it
 * says the counts are shared, so that no other thread adds beside a plain update and the counts
 * stay exact); from then on no lock, and two locked instructions per call: one atomic add each to
 * the current bytes and count, on one cache line (an add never fails and retries, as a
 * compare-and-swap of both would when threads collide); a peak moves only when a new high is
 * reached (a relaxed load, and a compare-and-swap only then), to the value the add returned.
 * The totals are then counted at allocate on a shard of the calling thread (the former owner
 * too), a cache line or two written by that thread alone with plain stores; the owner's totals
 * in the instance stay as they were, and a reader sums them and the shards. A thread finds its
 * shard through a small thread-local cache keyed by the instance's serial number (never reused,
 * so a stale entry of a finalized instance never matches); on a miss it looks the shard up, or
 * adds one, under the instance's mutex. */
#include "memres-private.h"

#include "../common/owner-fence.h"

#include <stdlib.h>

/* the layer's private data and its allocate/free fast path: core/stats-inline.h, which the core
 * inlines where it calls a `stats` layer's slots */
typedef MemresStatsLayer StatsResource;
typedef MemresStatsShard Shard;
struct _MemresStatsShard
{
  /* written by one thread only */
  guint64 bytes_allocated;
  guint64 size_classes[MEMRES_STATS_N_SIZE_CLASSES];
  gconstpointer owner; /* the thread's cache (its address identifies the thread) */
  Shard *next;
};

/* StatsResource.owner once the counts are shared: matches no thread. */
#define NOT_OWNED ((gconstpointer) &next_serial)

/* A thread's shards of the last few instances it used. */
#define SHARD_CACHE_SIZE 4
typedef struct
{
  guint64 serial;
  Shard *shard;
} ShardCacheEntry;
/* initial-exec, as buffer.c's cache: no __tls_get_addr call on the hot path */
static __thread ShardCacheEntry shard_cache[SHARD_CACHE_SIZE]
    __attribute__ ((tls_model ("initial-exec")));

static guint64 next_serial = 1; /* atomic */

#ifndef MEMRES_STATS_HAVE_THREAD_POINTER
__thread gchar _memres_stats_thread_tag __attribute__ ((tls_model ("initial-exec")));
#endif

static const MemresAccountant stats_accountant;

static gboolean
stats_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  StatsResource *self = memres_resource_get_private (mr);

  g_mutex_init (&self->lock);
  self->serial = __atomic_fetch_add (&next_serial, 1, __ATOMIC_RELAXED);
  /* the bytes the layer takes from its upstream are its bytes_current: it counts them for the
   * upstream's statistics, where the core would (the upstream has only this layer above it) */
  mr->passes_unchecked = TRUE;
  if (mr->upstream->count_usage)
    _memres_resource_set_accountant (mr->upstream, mr, &stats_accountant);
  owner_fence_init ();
  if (!owner_fence_is_light ())
    {
      /* the owner would fence on every call: as costly as shared counts */
      self->owner = NOT_OWNED;
      self->stop = 1;
      self->shared = 1;
    }
  return TRUE;
}

static void
stats_finalize (MemresResource *mr)
{
  StatsResource *self = memres_resource_get_private (mr);

  _memres_resource_clear_accountant (mr->upstream, mr);
  while (self->shards != NULL)
    {
      Shard *next = self->shards->next;
      free (self->shards);
      self->shards = next;
    }
  g_mutex_clear (&self->lock);
}

G_GNUC_NO_INLINE __attribute__ ((cold)) static Shard *
shard_lookup (StatsResource *self, ShardCacheEntry *entry)
{
  Shard *shard;
  gpointer mem;

  /* The list is only added to, under the lock; its head is published with release and read
   * with acquire, so that the readers (and ThreadSanitizer, which does not see GLib's futex
   * mutex) see every shard whole. */
  g_mutex_lock (&self->lock);
  for (shard = __atomic_load_n (&self->shards, __ATOMIC_ACQUIRE); shard != NULL;
       shard = shard->next)
    if (shard->owner == shard_cache)
      break;
  if (shard == NULL)
    {
      if (posix_memalign (&mem, 64, sizeof (Shard)) != 0)
        g_error ("stats: out of memory for a shard of %" G_GSIZE_FORMAT " bytes", sizeof (Shard));
      shard = memset (mem, 0, sizeof (Shard));
      shard->owner = shard_cache;
      shard->next = __atomic_load_n (&self->shards, __ATOMIC_RELAXED);
      __atomic_store_n (&self->shards, shard, __ATOMIC_RELEASE);
    }
  g_mutex_unlock (&self->lock);
  entry->serial = self->serial;
  entry->shard = shard;
  return shard;
}

static inline Shard *
my_shard (StatsResource *self)
{
  ShardCacheEntry *entry = &shard_cache[self->serial % SHARD_CACHE_SIZE];

  if (G_LIKELY (entry->serial == self->serial))
    return entry->shard;
  return shard_lookup (self, entry);
}

/* Adds @bytes and @count (two's complement for a decrease) to the current values; stores the
 * new ones in *@new_bytes and *@new_count. */
static inline void
current_add (StatsResource *self, guint64 bytes, guint64 count, guint64 *new_bytes,
             guint64 *new_count)
{
  *new_bytes = __atomic_add_fetch (&self->bytes_current, bytes, __ATOMIC_RELAXED);
  *new_count = __atomic_add_fetch (&self->count_current, count, __ATOMIC_RELAXED);
}

static inline void
raise_peak (guint64 *peak, guint64 value)
{
  guint64 old = __atomic_load_n (peak, __ATOMIC_RELAXED);

  while (
      G_UNLIKELY (value > old)
      && !__atomic_compare_exchange_n (peak, &old, value, TRUE, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
}

/* Makes the counts shared: from now on every thread (the owner too) changes them with locked
 * instructions. Stops the owner, waits until it is out of its last plain update, and only then
 * says the counts are shared: a thread that finds them shared (or waited on the lock for the
 * thread sharing them) may add at once, no plain update of the owner's is still under way.
 * Once per instance. */
G_GNUC_NO_INLINE __attribute__ ((cold)) static void
share_counts (StatsResource *self)
{
  g_mutex_lock (&self->lock);
  if (!__atomic_load_n (&self->shared, __ATOMIC_RELAXED))
    {
      /* nobody is or becomes the owner any more */
      __atomic_store_n (&self->owner, NOT_OWNED, __ATOMIC_RELAXED);
      __atomic_store_n (&self->stop, 1, __ATOMIC_SEQ_CST);
      owner_heavy_barrier ();
      while (__atomic_load_n (&self->busy, __ATOMIC_ACQUIRE))
        g_thread_yield ();
      __atomic_store_n (&self->shared, 1, __ATOMIC_RELEASE);
    }
  g_mutex_unlock (&self->lock);
}

/* stats_owner_enter() for a thread that is not the owner (or found the counts shared): the first
 * thread to count becomes the owner; any other thread makes the counts shared. */
static inline gboolean
owner_claim (StatsResource *self)
{
  gconstpointer me = stats_this_thread ();
  gconstpointer owner = __atomic_load_n (&self->owner, __ATOMIC_RELAXED);

  if (owner == me
      || (owner == NULL
          && __atomic_compare_exchange_n (&self->owner, &owner, me, FALSE, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED)))
    return owner_try_enter_light (&self->busy, &self->stop);
  if (!__atomic_load_n (&self->shared, __ATOMIC_ACQUIRE))
    share_counts (self);
  return FALSE;
}

/* stats_tally(), out of line: the first count, a thread other than the owner, shared counts. */
G_GNUC_NO_INLINE void
_memres_stats_tally_slow (StatsResource *self, guint64 bytes, guint64 count, gboolean allocated)
{
  Shard *shard;
  guint64 b, c;

  if (owner_claim (self))
    {
      stats_owner_count (self, bytes, count, allocated);
      return;
    }
  current_add (self, bytes, count, &b, &c);
  if ((gint64) count > 0)
    {
      raise_peak (&self->bytes_peak, b);
      raise_peak (&self->count_peak, c);
      raise_peak (&self->upstream_peak, b);
    }
  if (allocated)
    {
      shard = my_shard (self);
      stats_count_totals (&shard->bytes_allocated, shard->size_classes, bytes);
    }
}

/* _memres_stats_deallocate() where the calling thread does not own the counts (@counted FALSE),
 * or where the upstream's memory is not stream-ordered: then the wait before its free is the
 * upstream's, as memres_upstream_deallocate() would make it, and a failed wait frees nothing.
 * Out of line, so that the owner's path keeps its arguments in registers. */
G_GNUC_NO_INLINE gboolean
_memres_stats_deallocate_slow (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                               GError **error, gboolean counted)
{
  MemresResource *up = mr->upstream;
  guint64 size = alloc->size;

  if (!counted)
    _memres_stats_tally_slow (mr->priv, -size, -(guint64) 1, FALSE);
  if (up->wait_before_free && !_memres_resource_wait_stream (up, stream, error))
    {
      _memres_stats_tally_slow (mr->priv, size, 1, FALSE);
      return FALSE;
    }
  return _memres_stats_upstream_free (mr, alloc, stream, error, size);
}

/* The slots, for a caller of a slot (a `stats` layer over this one, whose inline allocate calls
 * this layer's slot); the core itself calls the inline bodies (memres-private.h). Their address
 * also tells a `stats` layer (memres_stats_get_counters()). */
MEMRES_HOT static gboolean
stats_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  return _memres_stats_allocate (mr, size, stream, alloc, error);
}

MEMRES_HOT static gboolean
stats_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  return _memres_stats_deallocate (mr, alloc, stream, error);
}

/* Accounting per buffer: a resize would change sizes behind the counters. */
static void
stats_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags &= ~MEMRES_MEMORY_RESIZABLE;
}

/* The totals: bytes allocated, and allocations per class, the owner's and the shards' (under
 * self->lock). */
static guint64
sum_shards (StatsResource *self, guint64 classes[MEMRES_STATS_N_SIZE_CLASSES])
{
  guint64 bytes = __atomic_load_n (&self->bytes_allocated, __ATOMIC_RELAXED);
  Shard *shard;
  guint i;

  for (i = 0; i < MEMRES_STATS_N_SIZE_CLASSES; i++)
    classes[i] = __atomic_load_n (&self->size_classes[i], __ATOMIC_RELAXED);
  for (shard = __atomic_load_n (&self->shards, __ATOMIC_ACQUIRE); shard != NULL;
       shard = shard->next)
    {
      bytes += __atomic_load_n (&shard->bytes_allocated, __ATOMIC_RELAXED);
      for (i = 0; i < MEMRES_STATS_N_SIZE_CLASSES; i++)
        classes[i] += __atomic_load_n (&shard->size_classes[i], __ATOMIC_RELAXED);
    }
  return bytes;
}

static void
read_counters (StatsResource *self, MemresStatsCounters *c)
{
  guint64 classes[MEMRES_STATS_N_SIZE_CLASSES];
  guint64 allocated;
  guint i;

  memset (c, 0, sizeof *c);
  g_mutex_lock (&self->lock);
  allocated = sum_shards (self, classes);
  c->bytes_current = __atomic_load_n (&self->bytes_current, __ATOMIC_RELAXED);
  c->count_current = __atomic_load_n (&self->count_current, __ATOMIC_RELAXED);
  c->bytes_peak = MAX (__atomic_load_n (&self->bytes_peak, __ATOMIC_RELAXED), c->bytes_current);
  c->count_peak = MAX (__atomic_load_n (&self->count_peak, __ATOMIC_RELAXED), c->count_current);
  c->bytes_total = allocated - self->bytes_total_base;
  for (i = 0; i < MEMRES_STATS_N_SIZE_CLASSES; i++)
    {
      c->size_classes[i] = classes[i] - self->classes_base[i];
      c->count_total += c->size_classes[i];
    }
  g_mutex_unlock (&self->lock);
}

static gboolean
stats_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  StatsResource *self = memres_resource_get_private (mr);
  MemresStatsCounters c;

  read_counters (self, &c);
  /* the layer's own view: what it handed out (reserving is the upstream's business) */
  stats->used_current = c.bytes_current;
  stats->used_high = c.bytes_peak;
  stats->reserved_current = c.bytes_current;
  stats->reserved_high = c.bytes_peak;
  return TRUE;
}

/* Resets the layer's own counts: the peaks to the current values, the totals to 0. */
static void
reset (StatsResource *self)
{
  /* the owner's plain updates would overwrite the peaks set here: only the owner itself may
   * reset without making the counts shared */
  if (__atomic_load_n (&self->owner, __ATOMIC_RELAXED) != stats_this_thread ()
      && !__atomic_load_n (&self->shared, __ATOMIC_ACQUIRE))
    share_counts (self);
  g_mutex_lock (&self->lock);
  __atomic_store_n (&self->bytes_peak, __atomic_load_n (&self->bytes_current, __ATOMIC_RELAXED),
                    __ATOMIC_RELAXED);
  __atomic_store_n (&self->count_peak, __atomic_load_n (&self->count_current, __ATOMIC_RELAXED),
                    __ATOMIC_RELAXED);
  self->bytes_total_base = sum_shards (self, self->classes_base);
  g_mutex_unlock (&self->lock);
}

static gboolean
stats_reset_stats (MemresResource *mr, GError **error)
{
  reset (memres_resource_get_private (mr));
  return TRUE;
}

/* The upstream's view of the bytes the layer took from it (MemresAccountant). */
static void
upstream_read (MemresResource *mr, guint64 *bytes_current, guint64 *bytes_high)
{
  StatsResource *self = mr->priv;

  *bytes_current = __atomic_load_n (&self->bytes_current, __ATOMIC_RELAXED);
  *bytes_high = MAX (__atomic_load_n (&self->upstream_peak, __ATOMIC_RELAXED), *bytes_current);
}

/* The mark is only ever raised by the thread that reaches a new high (the owner's plain store,
 * or a compare-and-swap once shared): setting it here needs no hand-over of the counts, and a
 * reset at the same instant as an allocation counts as before or after it, as the core's own
 * reset does. */
static void
upstream_reset (MemresResource *mr)
{
  StatsResource *self = mr->priv;

  __atomic_store_n (&self->upstream_peak, __atomic_load_n (&self->bytes_current, __ATOMIC_RELAXED),
                    __ATOMIC_RELAXED);
}

static const MemresAccountant stats_accountant = { upstream_read, upstream_reset };

/* fork(): the lock; in the child, an owner that was inside a plain update is gone (the thread
 * that shares the counts would wait for it forever). */
static void
stats_at_fork (MemresResource *mr, MemresForkPhase phase)
{
  StatsResource *self;

  if (mr == NULL)
    return;
  self = memres_resource_get_private (mr);
  if (phase == MEMRES_FORK_CHILD)
    __atomic_store_n (&self->busy, 0, __ATOMIC_RELAXED);
  memres_fork_mutex (&self->lock, phase);
}

static const MemresResourceOps stats_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = stats_init,
  .finalize = stats_finalize,
  .allocate = stats_allocate,
  .deallocate = stats_deallocate,
  .query = stats_query,
  .get_stats = stats_get_stats,
  .reset_stats = stats_reset_stats,
  .at_fork = stats_at_fork,
};

static const MemresKindInfo stats_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "stats",
  .description = "Adaptor: counts bytes and allocations (current, peak, total, by size class)",
  .ops = &stats_ops,
  .instance_size = sizeof (StatsResource),
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS | MEMRES_KIND_OWN_USAGE,
};

/**
 * memres_stats_get_counters:
 * @mr: a resource whose stack has a `stats` layer at or below it
 * @counters: (out caller-allocates): return location for the counters
 * @error: return location for a #GError, or %NULL
 *
 * Reads what the first `stats` layer at or below @mr counted: bytes and allocations, current,
 * peak and total, and allocations by size class. Each value is read atomically; while other
 * threads allocate, the values may come from slightly different instants (current <= peak
 * always holds). No driver call. Thread-safe.
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

  layer = _memres_stack_find_layer (mr, (gpointer) stats_allocate, "stats", error);
  if (layer == NULL)
    return FALSE;
  read_counters (layer->priv, counters);
  return TRUE;
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

  layer = _memres_stack_find_layer (mr, (gpointer) stats_allocate, "stats", error);
  if (layer == NULL)
    return FALSE;
  reset (layer->priv);
  return TRUE;
}

static gboolean
stats_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &stats_kind, error);
}

const MemresPluginDesc *
_memres_stats_get_desc (void)
{
  static const MemresPluginDesc desc = {
    MEMRES_PLUGIN_ABI_MAJOR,
    MEMRES_PLUGIN_ABI_MINOR,
    sizeof (MemresPluginDesc),
    0,
    "stats",
    "Statistics adaptor, embedded in libmemres",
    stats_plugin_init,
  };
  return &desc;
}

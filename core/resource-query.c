/* memres - CUDA memory resources
 * resource-query.c: the wrappers of a resource's optional slots that report on it or trim it:
 * statistics (the core's own counts of a layer's usage, then its get_stats slot), trim,
 * counters. Creation, lifetime, peer access and the checked slot calls are resource.c's; none of
 * this is on the allocate/close path. */
#include "memres-private.h"

/* @mr's usage as the core counts it: its stripes (buffers allocated from it, and allocations
 * adaptors made through memres_upstream_allocate()). */
static void
core_usage (MemresResource *mr, MemresStats *s)
{
  s->used_current = _memres_resource_used_bytes (mr);
  s->used_high = MAX (__atomic_load_n (&mr->used_high, __ATOMIC_RELAXED), s->used_current);
  s->reserved_current = s->used_current;
  s->reserved_high = s->used_high;
}

/**
 * memres_resource_get_stats:
 * @mr: a #MemresResource
 * @stats: (out caller-allocates): return location for the statistics
 * @error: return location for a #GError, or %NULL
 *
 * Reads the resource's statistics (reserved and used bytes, current and high-water) and the
 * number of live buffers. The core counts the bytes each layer's allocate slot handed out (the
 * buffers memres_resource_allocate() made from it, and the allocations adaptors above it made
 * with memres_upstream_allocate(); reserved = used); a kind's get_stats slot starts from those
 * counts and replaces what it knows better (for pools, cuMemPoolGetAttribute(); for vmm, the
 * physical bytes as reserved). Kinds registered with %MEMRES_KIND_OWN_USAGE (the driver pools,
 * graph, cache, arena, stats) report their used bytes themselves, and the core leaves their
 * allocate/close path uncounted. The core's counts are
 * kept per thread (no shared cache line written on the allocate/close path): the current bytes
 * are exact when no allocate or close runs at the same time, and so is the high-water mark
 * whatever threads allocated and closed, except that when threads allocate and close at the
 * same instant it may miss a peak reached only then, or count one a little above the true
 * peak (the stripes are summed one after the other), by a few allocations. The `stats`
 * adaptor keeps exact counts for those who need them. The layer right below a `stats` layer
 * counts the bytes that go through that layer as any upstream allocation, beside those an
 * application allocates from it directly (memres_resource_get_upstream()); its
 * memres_resource_reset_stats() resets its mark, not the `stats` layer's (memres_stats_reset()),
 * and the other way round.
 * A resource imported from another process (%MEMRES_MEMORY_IMPORTED) reports what this process
 * maps of the pool (reserved and used: the bytes of the allocations its imported buffers
 * mapped; the driver keeps the pool's own counts in the exporting process and refuses
 * cuMemPoolGetAttribute() on an imported pool) and its open imported buffers, without calling
 * the kind. An adaptor without statistics of its own reports its upstream's (down the stack to
 * the first layer that keeps them), with its own count of live buffers: each layer's
 * n_buffers counts the buffers allocated from that layer, not the allocations adaptors above
 * made through it. Thread-safe.
 *
 * Errors: those of the get_stats slot of the layer that reports (the core's own counts of
 * that layer's buffers where it has none).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_resource_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  GError *local = NULL;
  MemresStats s = { 0 };
  guint64 imported = 0;
  MemresResource *owner;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (stats != NULL, FALSE);
  if (!_memres_resource_check_usable (mr, "statistics", error))
    return FALSE;

  /* what the core counted for the layer that reports; its get_stats replaces what it knows
   * better (a pool's reserved bytes, say) */
  owner = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (get_stats), FALSE);
  core_usage (owner, &s);
  if (owner->ipc != NULL && (owner->info.flags & MEMRES_MEMORY_IMPORTED))
    owner->ipc->hooks->get_stats (owner, &s, &imported);
  else if (owner->ops->get_stats != NULL
           && !_memres_resource_slot_result (
               owner, "get_stats", owner->ops->get_stats (owner, &s, &local), &local, error))
    return FALSE;
  else if (owner == mr && mr->ipc != NULL)
    mr->ipc->hooks->get_stats (mr, NULL, &imported);
  s.n_buffers = (guint64) (__atomic_load_n (&mr->refs, __ATOMIC_RELAXED) & 0xffffffff)
                + (guint64) MAX (_memres_resource_count_allocated (mr), 0);
  /* imported buffers share one buffer reference */
  s.n_buffers += imported > 0 ? imported - 1 : 0;
  *stats = s;
  return TRUE;
}

/**
 * memres_resource_reset_stats:
 * @mr: a #MemresResource
 * @error: return location for a #GError, or %NULL
 *
 * Resets the high-water marks to the current values: the core's count, and the kind's
 * through its reset_stats slot when it has one (for pools, cuMemPoolSetAttribute() of the high
 * attributes). An adaptor without a reset_stats slot resets its upstream's (down the stack).
 * Thread-safe.
 *
 * Errors: those of the kind's reset_stats slot.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_resource_reset_stats (MemresResource *mr, GError **error)
{
  GError *local = NULL;

  g_return_val_if_fail (mr != NULL, FALSE);
  if (!_memres_resource_check_usable (mr, "resetting statistics", error))
    return FALSE;

  mr = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (reset_stats), FALSE);
  if (mr->ipc != NULL && (mr->info.flags & MEMRES_MEMORY_IMPORTED))
    {
      mr->ipc->hooks->reset_stats (mr);
      return TRUE;
    }
  _memres_resource_count_peak (mr, TRUE);
  if (mr->ops->reset_stats == NULL)
    return TRUE;
  return _memres_resource_slot_result (mr, "reset_stats", mr->ops->reset_stats (mr, &local), &local,
                                       error);
}

/**
 * memres_resource_trim:
 * @mr: a #MemresResource
 * @bytes_to_keep: bytes the resource may keep reserved
 * @error: return location for a #GError, or %NULL
 *
 * Returns memory the resource holds but does not use to the system, keeping at least
 * @bytes_to_keep bytes reserved (for pools, cuMemPoolTrimTo()). An adaptor without a trim slot
 * passes the call to its upstream (down the stack). Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when the kind has nothing to trim; those of the kind.
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
gboolean
memres_resource_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  GError *local = NULL;

  g_return_val_if_fail (mr != NULL, FALSE);
  _memres_buffer_deferred_flush ();
  if (!_memres_resource_check_usable (mr, "trimming", error))
    return FALSE;

  mr = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (trim), FALSE);
  if (mr->ops->trim == NULL)
    return _memres_resource_not_supported (mr, "trimming", error);
  return _memres_resource_slot_result (mr, "trim", mr->ops->trim (mr, bytes_to_keep, &local),
                                       &local, error);
}

/**
 * memres_resource_get_counters:
 * @mr: a #MemresResource
 * @error: return location for a #GError, or %NULL
 *
 * Reads the kind's own counters, beyond #MemresStats: a dictionary (`a{sv}`) whose names and
 * types the kind documents; for the cache adaptor (docs/cache.md) `hits`, `misses`, `used`,
 * `cached`, `reserved` (`t`) and `classes` (`a(tttt)`: class size in bytes, hits, misses,
 * bytes cached); for the log adaptor (README) `lines_written`, `lines_lost` (`t`, the header
 * line included) and `write_error` (`s`, the first failed write's reason, "" when none): its
 * log is complete when `lines_lost` is 0, and reading them first writes the lines it buffers;
 * for the limit adaptor `limit` and `used` (`t`: its `max` and the bytes counted against it).
 * An adaptor without counters passes the call to the layer below. Reading them costs the
 * kind's lock, no driver call. Thread-safe.
 *
 * The core adds one counter of its own to every resource's dictionary (a kind's counter of that
 * name is replaced): `contract_breaches` (`t`), the calls of a memory slot (allocate,
 * deallocate, resize, the IPC imports) of @mr or of a layer below it that broke the slot
 * contract by failing without setting an error, or (deallocate) by failing and changing the
 * allocation's address to another nonzero value; each is also reported as a critical warning
 * naming the kind (see #MemresResourceOps). Since 2.0; until then a kind without counters
 * failed with %MEMRES_ERROR_NOT_SUPPORTED.
 *
 * Errors: those of the kind.
 *
 * Since: 1.2
 *
 * Returns: (transfer full) (nullable): a new non-floating `a{sv}` variant (free with
 *   `g_variant_unref`), or %NULL with @error set
 */
GVariant *
memres_resource_get_counters (MemresResource *mr, GError **error)
{
  GError *local = NULL;
  GVariantDict dict;
  MemresResource *owner;
  guint64 breaches = 0;

  g_return_val_if_fail (mr != NULL, NULL);

  owner = _memres_resource_slot_owner (mr, MEMRES_SLOT_OFFSET (get_counters), FALSE);
  g_variant_dict_init (&dict, NULL);
  if (owner->ops->get_counters != NULL
      && !_memres_resource_slot_result (
          owner, "get_counters", owner->ops->get_counters (owner, &dict, &local), &local, error))
    {
      g_variant_dict_clear (&dict);
      return NULL;
    }
  for (; mr != NULL; mr = mr->upstream)
    breaches += __atomic_load_n (&mr->contract_breaches, __ATOMIC_RELAXED);
  g_variant_dict_insert (&dict, "contract_breaches", "t", breaches);
  return g_variant_ref_sink (g_variant_dict_end (&dict));
}

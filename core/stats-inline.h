/* memres - CUDA memory resources
 * stats-inline.h: the allocate and deallocate of the embedded `stats` adaptor
 * (plugins/stats/stats.c), inline, so that the core calls them where it calls a slot
 * (memres-private.h: _memres_resource_slot_allocate(), _memres_resource_slot_deallocate();
 * buffer.c's hot path) without an indirect call into the layer: a pair through `stats>X` then
 * makes the one indirect call per allocate and per free that a pair through X makes, the call
 * of X's slot, and runs the layer's count in the core's own frame. After a driver call, an
 * indirect call whose target the branch predictor lost and the frame of a second function cost
 * more than the count itself.
 *
 * Included by memres-private.h only (after MemresResource). The layer's state, its
 * single-thread fast path and its slots' bodies are here; everything out of line (the first
 * count, another thread's counts, the shared counts, the wait before a free of memory that is
 * not stream-ordered, the readers) stays in stats.c. stats.c's file comment describes the
 * counting. */
#pragma once

typedef struct _MemresStatsShard MemresStatsShard; /* stats.c */

/* A `stats` layer's private data. */
typedef struct
{
  /* line 0, written on every allocate and free (by every thread once shared) */
  guint64 bytes_current;
  guint64 count_current;
  guint64 bytes_peak;
  guint64 count_peak;
  /* the high-water mark of bytes_current since the upstream's last reset: the layer counts the
   * bytes it took from its upstream for the upstream's statistics (the accountant of
   * memres-private.h), whose reset is not the layer's */
  guint64 upstream_peak;
  /* the single-thread fast path (stats_owner_enter()): the thread that owns the counts (its
   * thread pointer, stats_this_thread(); NULL until one counts, stats.c's NOT_OWNED once shared)
   * and whether it is inside an update; @stop, the flag the owner reads, asks it to end its plain
   * updates */
  gconstpointer owner;
  gint busy;
  gint stop;
  /* the owner's totals, written by it alone while it owns the counts (then by nobody) */
  guint64 bytes_allocated;
  guint64 size_classes[MEMRES_STATS_N_SIZE_CLASSES];
  /* whether the counts are shared (then every thread changes them with locked instructions):
   * set only once the owner is out of its last plain update; read on the slow path only */
  gint shared;
  guint64 serial; /* read-only after init: off the line every thread writes once shared */
  GMutex lock;    /* the shard list and the reset bases */
  MemresStatsShard *shards;
  guint64 bytes_total_base;
  guint64 classes_base[MEMRES_STATS_N_SIZE_CLASSES];
} MemresStatsLayer;

/* the current values at the start of the private data, the owner's path on line 0 */
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresStatsLayer, bytes_current) == 0);
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresStatsLayer, count_current) == 8);
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresStatsLayer, bytes_allocated) + 8 <= 64);
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresStatsLayer, size_classes) == 64);

/* stats.c, out of line: stats_tally() where the calling thread does not own the counts (the
 * first count, another thread, shared counts); _memres_stats_deallocate() where it does not
 * own them (@counted FALSE), or where the upstream's memory is not stream-ordered. */
G_GNUC_INTERNAL void _memres_stats_tally_slow (MemresStatsLayer *self, guint64 bytes, guint64 count,
                                               gboolean allocated);
G_GNUC_INTERNAL gboolean _memres_stats_deallocate_slow (MemresResource *mr, MemresAllocation *alloc,
                                                        MemresStream stream, GError **error,
                                                        gboolean counted);
#if defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer)
#define MEMRES_STATS_HAVE_THREAD_POINTER 1
#endif
#endif
#ifndef MEMRES_STATS_HAVE_THREAD_POINTER
/* stats.c: a thread-local byte whose address identifies the thread */
extern __thread gchar _memres_stats_thread_tag __attribute__ ((tls_model ("initial-exec")));
#endif

/* One writer (a shard's thread, the counts' owner): a plain load and store, atomic only so
 * that readers see whole values. Returns the new value. */
static inline guint64
stats_plain_add (guint64 *counter, guint64 n)
{
  guint64 v = __atomic_load_n (counter, __ATOMIC_RELAXED) + n;

  __atomic_store_n (counter, v, __ATOMIC_RELAXED);
  return v;
}

/* Counts an allocation of @size bytes in totals written by the calling thread alone. */
static inline void
stats_count_totals (guint64 *bytes_allocated, guint64 *size_classes, guint64 size)
{
  stats_plain_add (bytes_allocated, size);
  stats_plain_add (&size_classes[63 - (guint) __builtin_clzll (size)], 1);
}

/* The calling thread, as MemresStatsLayer.owner knows it. */
static inline gconstpointer
stats_this_thread (void)
{
#ifdef MEMRES_STATS_HAVE_THREAD_POINTER
  return __builtin_thread_pointer ();
#else
  return &_memres_stats_thread_tag;
#endif
}

/* The calling thread owns the counts and may change them with plain loads and stores (leave
 * with stats_owner_leave()); FALSE when it is not the owner or they are shared (stats.c:
 * owner_claim()). */
G_ALWAYS_INLINE static inline gboolean
stats_owner_enter (MemresStatsLayer *self)
{
  return G_LIKELY (__atomic_load_n (&self->owner, __ATOMIC_RELAXED) == stats_this_thread ())
         && G_LIKELY (owner_try_enter_light (&self->busy, &self->stop));
}

static inline void
stats_owner_leave (MemresStatsLayer *self)
{
  owner_leave_busy (&self->busy);
}

static inline void
stats_owner_raise (guint64 *peak, guint64 value)
{
  if (value > __atomic_load_n (peak, __ATOMIC_RELAXED))
    __atomic_store_n (peak, value, __ATOMIC_RELAXED);
}

/* The owner, inside: adds @bytes and @count (two's complement for a decrease) to the current
 * values, raising the peaks; counts the allocation of @bytes in its totals when @allocated. */
G_ALWAYS_INLINE static inline void
stats_owner_count (MemresStatsLayer *self, guint64 bytes, guint64 count, gboolean allocated)
{
  guint64 b = stats_plain_add (&self->bytes_current, bytes);
  guint64 c = stats_plain_add (&self->count_current, count);

  if ((gint64) count > 0)
    {
      stats_owner_raise (&self->bytes_peak, b);
      stats_owner_raise (&self->count_peak, c);
      stats_owner_raise (&self->upstream_peak, b);
    }
  if (allocated)
    stats_count_totals (&self->bytes_allocated, self->size_classes, bytes);
  stats_owner_leave (self);
}

/* Adds @bytes and @count (two's complement for a decrease) to the current values, raising the
 * peaks; counts an allocation of @bytes in the totals when @allocated. */
G_ALWAYS_INLINE static inline void
stats_tally (MemresStatsLayer *self, guint64 bytes, guint64 count, gboolean allocated)
{
  if (G_LIKELY (stats_owner_enter (self)))
    stats_owner_count (self, bytes, count, allocated);
  else
    _memres_stats_tally_slow (self, bytes, count, allocated);
}

/* The layer's allocate: its upstream's slot, called directly (the layer is part of libmemres,
 * and what memres_upstream_allocate() would add is done elsewhere), then the count.
 * - The check of the result: by the caller (the core, or memres_upstream_allocate() of an
 *   adaptor above), which checks every allocate call and, for a layer that passes its
 *   upstream's records unchecked (stats.c: stats_init()), judges, names and releases a bad one
 *   at the upstream. The layer counts only a plausible record, so that one is never counted.
 * - The count of the bytes on the upstream's stripes: the layer is the upstream's accountant
 *   (stats_init()), its bytes_current those bytes.
 * - The caller checked @size and zeroed @alloc, as memres_upstream_allocate() would. */
G_ALWAYS_INLINE static inline gboolean
_memres_stats_allocate (MemresResource *mr, gsize size, MemresStream stream,
                        MemresAllocation *alloc, GError **error)
{
  MemresResource *up = mr->upstream;

  if (G_UNLIKELY (!up->allocate (up, size, stream, alloc, error)))
    return FALSE;
  if (G_LIKELY (_memres_allocation_plausible (alloc, size)))
    stats_tally (mr->priv, alloc->size, 1, TRUE);
  return TRUE;
}

/* The upstream's free of _memres_stats_deallocate(), counted before: a free that failed and
 * released nothing (the buffer stays open) is counted again. Freed, or released half-way (the
 * address set to 0): gone all the same. */
G_ALWAYS_INLINE static inline gboolean
_memres_stats_upstream_free (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                             GError **error, guint64 size)
{
  MemresResource *up = mr->upstream;

  if (G_LIKELY (up->deallocate (up, alloc, stream, error)))
    return TRUE;
  if (alloc->address != 0)
    _memres_stats_tally_slow (mr->priv, size, 1, FALSE);
  return FALSE;
}

/* The layer's deallocate: uncounted before the free (once freed, another thread may get the
 * memory and count it), then its upstream's slot, called directly; the wait before a free of
 * memory that is not stream-ordered, as memres_upstream_deallocate() would make it, in
 * _memres_stats_deallocate_slow(). The caller checks the result. */
G_ALWAYS_INLINE static inline gboolean
_memres_stats_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                          GError **error)
{
  MemresStatsLayer *self = mr->priv;
  guint64 size = alloc->size;

  if (G_UNLIKELY (!stats_owner_enter (self)))
    return _memres_stats_deallocate_slow (mr, alloc, stream, error, FALSE);
  stats_owner_count (self, -size, -(guint64) 1, FALSE);
  if (G_UNLIKELY (mr->upstream->wait_before_free))
    return _memres_stats_deallocate_slow (mr, alloc, stream, error, TRUE);
  return _memres_stats_upstream_free (mr, alloc, stream, error, size);
}

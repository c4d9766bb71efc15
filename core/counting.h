/* memres - CUDA memory resources
 * counting.h: what the core counts per thread (counting.c): which stripe a thread counts on,
 * the high-water marks kept from per-stripe quotas, and the counts of a layer whose kind asks
 * for them (MEMRES_KIND_COUNTED: the `stats` adaptor): bytes and allocations, current, peak and
 * total, and allocations by size class, as memres_resource_get_counts() reads them.
 *
 * A counted layer's counts are one MemresCounts: a stripe per thread (the same index as the
 * resource's buffer stripes, 128 bytes apart so that threads write no shared line), each stripe
 * an array of counter sets. Set 0 counts every allocation of the layer; the sets after it are
 * for counts kept apart by a small id (the per-tag counters of issue 34): they need no other
 * layout, only MEMRES_COUNT_SETS raised and the id passed to _memres_counts_add(). A stripe
 * with one thread is changed with plain loads and stores; the shared stripe (more threads than
 * stripes) with locked adds. Which stripe a thread counts on is hot-path.h's (the resource's
 * buffer stripes use it too). Also the inline calls of a counted layer's slots, which only
 * resource.c expands (_memres_resource_counted_allocate/deallocate). Included through
 * memres-private.h. */
#pragma once

#include "hot-path.h"
#include "tags.h"

G_BEGIN_DECLS

/* A high-water mark kept from quotas: the MEMRES_BUFFER_STRIPES values at @value0, @stride
 * bytes apart, each with its quota at the same stride from @quota0. The quotas sum to at most
 * *@high, so while every stripe stays within its own, no new peak can have been reached; a
 * stripe that passes its quota calls this: the values summed, *@high raised to the sum when it is
 * a new peak (set to it: @reset), and what is left below the mark shared among the stripes as
 * new quotas. Exact whenever no two threads change the values at the same instant; under
 * contention off by a few allocations either way. Returns the sum (0 when it is below 0). */
guint64 _memres_peak_update (gint64 *value0, gint64 *quota0, gsize stride, guint64 *high,
                             gboolean reset);
/* The sum of the values as above, each stored in @values when it is not NULL. */
guint64 _memres_stripes_sum (const gint64 *value0, gsize stride, gint64 *values);

/* Counter sets per stripe of a counted layer: set 0 counts every allocation. The counts of each
 * tag (memres-tags.h) are kept beside them in sets of their own (MemresTagSet: no size classes,
 * 48 bytes rather than 552, so that the MEMRES_TAGS_MAX + 1 of them on each of the 32 stripes
 * take 96 KiB a counted layer rather than 1.1 MiB). */
#define MEMRES_COUNT_SETS 1

/* One set of counts on one stripe: written by the stripe's thread. */
typedef struct
{
  gint64 bytes;       /* bytes allocated minus bytes freed here (may be < 0 on one stripe) */
  gint64 count;       /* allocations minus frees here */
  gint64 bytes_quota; /* how high @bytes may go before the stripes are summed */
  gint64 count_quota;
  guint64 bytes_total;                          /* bytes of the allocations counted here */
  guint64 classes[MEMRES_STATS_N_SIZE_CLASSES]; /* allocations by power-of-two size class */
} MemresCounterSet;

typedef struct
{
  MemresCounterSet sets[MEMRES_COUNT_SETS];
} __attribute__ ((aligned (128))) MemresCountStripe;

/* What a set's readers keep: the marks, and the totals at the last reset. */
typedef struct
{
  guint64 bytes_peak;
  guint64 count_peak;
  guint64 bytes_total_base;
  guint64 classes_base[MEMRES_STATS_N_SIZE_CLASSES];
} MemresCountMarks;

/* One tag's counts on one stripe, written by the stripe's thread (the fields of
 * MemresCounterSet, with a count of allocations for the size classes). */
typedef struct
{
  gint64 bytes;
  gint64 count;
  gint64 bytes_quota;
  gint64 count_quota;
  guint64 bytes_total;
  guint64 count_total;
} MemresTagSet;

/* the tags' sets of one stripe, indexed by tag id (1 to MEMRES_TAGS_MAX; 0 unused) */
typedef struct
{
  MemresTagSet tags[MEMRES_TAGS_MAX + 1];
} __attribute__ ((aligned (128))) MemresTagStripe;

typedef struct
{
  guint64 bytes_peak;
  guint64 count_peak;
  guint64 bytes_total_base;
  guint64 count_total_base;
} MemresTagMarks;

struct _MemresCounts
{
  MemresCountStripe stripes[MEMRES_BUFFER_STRIPES];
  MemresCountMarks marks[MEMRES_COUNT_SETS]; /* under counting.c's lock, but the peaks */
  MemresTagStripe tag_stripes[MEMRES_BUFFER_STRIPES];
  MemresTagMarks tag_marks[MEMRES_TAGS_MAX + 1]; /* the same, per tag */
};

/* counting.c: a counted layer's counts, zeroed; freed with _memres_counts_free(). */
MemresCounts *_memres_counts_new (void);
void _memres_counts_free (MemresCounts *counts);
/* the slow half of _memres_counts_add(): a quota passed */
void _memres_counts_peak (MemresCounts *counts, guint set);
/* the slow half of _memres_counts_add_tag(): a tag's quota passed (tag-counts.c) */
void _memres_counts_tag_peak (MemresCounts *counts, guint tag);
/* counting.c's lock around fork() (fork.c's parts) */
void _memres_counts_fork (MemresResource *unused, MemresForkPhase phase);

/* One writer: a plain load and store, atomic only so that readers see whole values. */
static inline gint64
_memres_plain_add (gint64 *counter, gint64 n)
{
  gint64 v = __atomic_load_n (counter, __ATOMIC_RELAXED) + n;

  __atomic_store_n (counter, v, __ATOMIC_RELAXED);
  return v;
}

/* Adds @bytes and @count (negative for a free) to set @set of the calling thread's stripe of
 * @counts; an allocation (@allocated: @bytes > 0, @count 1) also goes into the totals and its size
 * class, and checks the quotas. */
G_ALWAYS_INLINE static inline void
_memres_counts_add (MemresCounts *counts, guint set, gint64 bytes, gint64 count, gboolean allocated)
{
  guint i = _memres_stripe_current ();
  MemresCounterSet *s = &counts->stripes[i - 1].sets[set];
  gint64 b, n;

  if (G_LIKELY (i != MEMRES_STRIPE_SHARED))
    {
      b = _memres_plain_add (&s->bytes, bytes);
      n = _memres_plain_add (&s->count, count);
      if (allocated)
        {
          _memres_plain_add ((gint64 *) &s->bytes_total, bytes);
          _memres_plain_add ((gint64 *) &s->classes[63 - __builtin_clzll ((guint64) bytes)], 1);
        }
    }
  else
    {
      b = __atomic_add_fetch (&s->bytes, bytes, __ATOMIC_RELAXED);
      n = __atomic_add_fetch (&s->count, count, __ATOMIC_RELAXED);
      if (allocated)
        {
          __atomic_add_fetch (&s->bytes_total, (guint64) bytes, __ATOMIC_RELAXED);
          __atomic_add_fetch (&s->classes[63 - __builtin_clzll ((guint64) bytes)], 1,
                              __ATOMIC_RELAXED);
        }
    }
  if (allocated
      && G_UNLIKELY (b > __atomic_load_n (&s->bytes_quota, __ATOMIC_RELAXED)
                     || n > __atomic_load_n (&s->count_quota, __ATOMIC_RELAXED)))
    _memres_counts_peak (counts, set);
}

/* Adds @bytes and @count to tag @tag's set (1 to MEMRES_TAGS_MAX) of the calling thread's stripe
 * of @counts, as _memres_counts_add() does to a counter set (out of line: tags are counted off the
 * untagged path). */
void _memres_counts_add_tag (MemresCounts *counts, guint tag, gint64 bytes, gint64 count,
                             gboolean allocated);

/* A count of a counted layer: set 0, and the tag's set when @alloc is the record of a tagged
 * buffer whose slot call runs on this thread (tags.h: a caching layer's chunk is not). */
G_ALWAYS_INLINE static inline void
_memres_counted_add (MemresResource *mr, const MemresAllocation *alloc, gint64 bytes, gint64 count,
                     gboolean allocated)
{
  guint tag = _memres_tag_of_call (alloc);

  _memres_counts_add (mr->counts, 0, bytes, count, allocated);
  if (G_UNLIKELY (tag != 0))
    _memres_counts_add_tag (mr->counts, tag, bytes, count, allocated);
}

/* The allocate of a counted layer (MemresResource.counts, MEMRES_KIND_COUNTED): its slot, or for
 * a pass-through layer without one (the `stats` adaptor) the call memres_upstream_allocate()
 * would make, inline: the upstream's slot, its result checked (naming and releasing at the
 * upstream), its bytes counted in the upstream's usage; then the layer's count (counting.h), of
 * a record _memres_allocation_plausible() accepts only (the caller's check releases any other).
 */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_allocate (MemresResource *mr, gsize size, MemresStream stream,
                          MemresAllocation *alloc, GError **error)
{
  if (mr->allocate != NULL)
    {
      if (G_UNLIKELY (!mr->allocate (mr, size, stream, alloc, error)))
        return FALSE;
    }
  else
    {
      MemresResource *up = mr->upstream;

      if (G_LIKELY (up->counts == NULL))
        {
          GError *local = NULL;
          gboolean ok = up->allocate (up, size, stream, alloc, &local);

          if (!_memres_resource_alloc_result (up, "allocate", ok, &local, size, stream, alloc,
                                              error))
            return FALSE;
        }
      else if (!_memres_resource_call_allocate_nested (up, size, stream, alloc, error))
        return FALSE;
      /* checked above: plausible */
      _memres_resource_count_used (up, (gint64) alloc->size);
      _memres_counted_add (mr, alloc, (gint64) alloc->size, 1, TRUE);
      return TRUE;
    }
  if (G_LIKELY (_memres_allocation_plausible (alloc, size)))
    _memres_counted_add (mr, alloc, (gint64) alloc->size, 1, TRUE);
  return TRUE;
}

/* The deallocate of a counted layer: uncounted before the free (once freed, another thread may
 * get the memory and count it), then its slot, or for a pass-through layer the call
 * memres_upstream_deallocate() would make (the upstream's checked deallocate, its usage
 * uncounted once the allocation is gone); counted again when the free failed with an error and
 * kept the allocation (the address as it was). */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                            GError **error)
{
  guint64 address = alloc->address;
  gint64 size = (gint64) alloc->size;
  gboolean ok;

  _memres_counted_add (mr, alloc, -size, -1, FALSE);
  if (mr->deallocate != NULL)
    ok = mr->deallocate (mr, alloc, stream, error);
  else
    {
      MemresResource *up = mr->upstream;

      if (G_LIKELY (up->counts == NULL && !up->wait_before_free))
        {
          GError *local = NULL;

          ok = up->deallocate (up, alloc, stream, &local);
          if (G_UNLIKELY (!(ok && local == NULL)))
            ok = _memres_resource_deallocate_result_slow (up, ok, &local, address, alloc, error);
        }
      else
        ok = _memres_resource_call_deallocate_nested (up, alloc, stream, error);
      if (G_LIKELY (ok) || alloc->address != address)
        _memres_resource_count_used (up, -size);
    }
  if (G_UNLIKELY (!ok) && error != NULL && *error != NULL && address != 0
      && alloc->address == address)
    _memres_counted_add (mr, alloc, size, 1, FALSE); /* kept: still live */
  return ok;
}

G_END_DECLS

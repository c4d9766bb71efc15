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
 * stripes) with locked adds. Included by hot-path.h, before MemresResource. */
#pragma once

#include <memres/memres-plugin.h>

G_BEGIN_DECLS

#define MEMRES_BUFFER_STRIPES 32
/* the index (+ 1) of the one stripe that threads share, changed with locked instructions; each
 * stripe below it has at most one thread at a time, which changes it with plain loads and stores
 * (_memres_stripe_assign()) */
#define MEMRES_STRIPE_SHARED MEMRES_BUFFER_STRIPES

/* The calling thread's stripe + 1 (0: none yet; _memres_stripe_assign() gives it a stripe of
 * its own while one is free, else MEMRES_STRIPE_SHARED; at its exit the stripe is free again). */
extern __thread guint _memres_stripe_index __attribute__ ((tls_model ("initial-exec")));
guint _memres_stripe_assign (void);

static inline guint
_memres_stripe_current (void)
{
  guint i = _memres_stripe_index;

  if (G_UNLIKELY (i == 0))
    i = _memres_stripe_assign ();
  return i;
}

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

/* Counter sets per stripe of a counted layer: set 0 counts every allocation (the only one so
 * far). */
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

typedef struct
{
  MemresCountStripe stripes[MEMRES_BUFFER_STRIPES];
  MemresCountMarks marks[MEMRES_COUNT_SETS]; /* under counting.c's lock, but the peaks */
} MemresCounts;

/* counting.c: a counted layer's counts, zeroed; freed with _memres_counts_free(). */
MemresCounts *_memres_counts_new (void);
void _memres_counts_free (MemresCounts *counts);
/* the slow half of _memres_counts_add(): a quota passed */
void _memres_counts_peak (MemresCounts *counts, guint set);
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

G_END_DECLS

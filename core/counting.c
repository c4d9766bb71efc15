/* memres - CUDA memory resources
 * counting.c: what the core counts per thread (counting.h): each thread's stripe, the
 * high-water marks kept from per-stripe quotas (the resources' used bytes and the counted
 * layers' counts alike), and the counts of the layers whose kind asks for them
 * (MEMRES_KIND_COUNTED): memres_resource_get_counts() and memres_resource_reset_counts() (their
 * slot calls, which count, are inline in counting.h), and the same per tag
 * (memres_resource_get_tag_counts(), _list_tags(), _reset_tag_peak()). It calls no other file of
 * the core but tags.c (a tag's name and id): the resources call it. */
#include "memres-private.h"

#include <string.h>
#include <sys/mman.h>

/* Bit i - 1 set: stripe i has a thread (i < MEMRES_STRIPE_SHARED). Changed with compare-and-swap
 * rather than under a mutex, so that the child of a fork() taken while another thread held it
 * cannot hang. */
static guint32 stripes_taken;
#define STRIPES_OWN_MASK ((guint32) ((G_GUINT64_CONSTANT (1) << (MEMRES_STRIPE_SHARED - 1)) - 1))
G_STATIC_ASSERT (MEMRES_STRIPE_SHARED <= 32);

/* At the exit of a thread with a stripe of its own: what it still counts (in later thread-local
 * destructors) goes to the shared stripe, and its stripe is free for the next new thread. The
 * release pairs with the next taker's acquire, so that thread's plain updates come after all of
 * this one's. */
static void
stripe_release (gpointer data)
{
  guint i = GPOINTER_TO_UINT (data);

  _memres_thread.stripe_index = MEMRES_STRIPE_SHARED;
  __atomic_fetch_and (&stripes_taken, ~((guint32) 1 << (i - 1)), __ATOMIC_RELEASE);
}

static GPrivate stripe_owner = G_PRIVATE_INIT (stripe_release);

/* The calling thread's stripe, at its first count: the lowest free stripe of its own, else the
 * shared one (more than MEMRES_STRIPE_SHARED - 1 threads counting at once). */
guint
_memres_stripe_assign (void)
{
  guint32 taken = __atomic_load_n (&stripes_taken, __ATOMIC_RELAXED);
  guint i;

  for (;;)
    {
      guint32 free = ~taken & STRIPES_OWN_MASK;

      if (free == 0)
        {
          i = MEMRES_STRIPE_SHARED;
          break;
        }
      i = (guint) __builtin_ctz (free) + 1;
      if (__atomic_compare_exchange_n (&stripes_taken, &taken, taken | ((guint32) 1 << (i - 1)),
                                       TRUE, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        {
          g_private_set (&stripe_owner, GUINT_TO_POINTER (i));
          break;
        }
    }
  _memres_thread.stripe_index = i;
  return i;
}

#define AT(base, i, stride) ((gint64 *) ((guint8 *) (base) + (gsize) (i) * (stride)))

guint64
_memres_stripes_sum (const gint64 *value0, gsize stride, gint64 *values)
{
  gint64 sum = 0;

  for (guint i = 0; i < MEMRES_BUFFER_STRIPES; i++)
    {
      gint64 v = __atomic_load_n (AT (value0, i, stride), __ATOMIC_RELAXED);

      if (values != NULL)
        values[i] = v;
      sum += v;
    }
  return (guint64) MAX (sum, 0);
}

guint64
_memres_peak_update (gint64 *value0, gint64 *quota0, gsize stride, guint64 *high, gboolean reset)
{
  gint64 values[MEMRES_BUFFER_STRIPES], share;
  guint64 total = _memres_stripes_sum (value0, stride, values);
  guint64 h = __atomic_load_n (high, __ATOMIC_RELAXED);

  if (reset)
    __atomic_store_n (high, h = total, __ATOMIC_RELAXED);
  while (
      total > h
      && !__atomic_compare_exchange_n (high, &h, total, TRUE, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
  h = MAX (h, total);
  share = (gint64) ((h - total) / MEMRES_BUFFER_STRIPES);
  for (guint i = 0; i < MEMRES_BUFFER_STRIPES; i++)
    __atomic_store_n (AT (quota0, i, stride), values[i] + share, __ATOMIC_RELAXED);
  return total;
}

/* A resource's usage: the bytes on its buffer stripes, and their mark (MemresResource.used_high) */
guint64
_memres_resource_used_bytes (MemresResource *mr)
{
  return _memres_stripes_sum (&mr->stripes[0].set.bytes, sizeof (MemresStripe), NULL);
}

/* The slow half of _memres_resource_count_used() (hot-path.h): the sum, the mark raised to
 * it (or set to it: @reset), and what is left below the mark shared as quotas. */
void
_memres_resource_count_peak (MemresResource *mr, gboolean reset)
{
  _memres_peak_update (&mr->stripes[0].set.bytes, &mr->stripes[0].set.bytes_quota,
                       sizeof (MemresStripe), &mr->used_high, reset);
}

/* The reset bases of the counted layers' totals, read and written by the readers only. */
static GMutex counts_lock;

void
_memres_counts_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&counts_lock, phase);
}

/* Mapped rather than taken from the heap: the kernel's zero pages (the tags' sets cost memory
 * only where they are written), and no block of this size on the heap beside the buffers of a
 * host layer (glibc consolidates its free lists at every free next to a large top chunk). */
MemresCounts *
_memres_counts_new (void)
{
  gpointer mem = mmap (NULL, sizeof (MemresCounts), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  return mem == MAP_FAILED ? NULL : mem;
}

void
_memres_counts_free (MemresCounts *counts)
{
  if (counts != NULL)
    munmap (counts, sizeof (MemresCounts));
}

/* A set's marks, on the stripes from @s0 (the set on stripe 0) @stride bytes apart: both peaks
 * raised (or set: @reset) to the sums, and what is left below them shared as quotas. One helper
 * for a layer's set (on its buffer stripes, its bytes peak the layer's used_high) and a tag's (on
 * the tag stripes). */
static void
set_marks_update (MemresCountSet *s0, gsize stride, guint64 *bytes_peak, guint64 *count_peak,
                  gboolean reset)
{
  _memres_peak_update (&s0->bytes, &s0->bytes_quota, stride, bytes_peak, reset);
  _memres_peak_update (&s0->count, &s0->count_quota, stride, count_peak, reset);
}

/* the sets of @mr itself and of tag @tag of @c, on their stripes */
#define LAYER_SET0(mr) (&(mr)->stripes[0].set)
#define LAYER_STRIDE   sizeof (MemresStripe)
#define TAG_SET0(c, t) (&(c)->tag_stripes[0].tags[(t)])
#define TAG_STRIDE     sizeof (MemresTagStripe)

G_GNUC_NO_INLINE void
_memres_counts_peak (MemresResource *mr)
{
  set_marks_update (LAYER_SET0 (mr), LAYER_STRIDE, &mr->used_high, &mr->counts->marks.count_peak,
                    FALSE);
}

G_GNUC_NO_INLINE void
_memres_counts_tag_peak (MemresCounts *counts, guint tag)
{
  MemresCountMarks *m = &counts->tag_marks[tag];

  set_marks_update (TAG_SET0 (counts, tag), TAG_STRIDE, &m->bytes_peak, &m->count_peak, FALSE);
}

/* An allocation of @bytes taken out of set @s and its totals (the calling thread's stripe: locked
 * adds, right for the shared stripe and for one of its own alike; a slow path) */
static void
set_take_back (MemresCountSet *s, gint64 bytes)
{
  __atomic_add_fetch (&s->bytes, -bytes, __ATOMIC_RELAXED);
  __atomic_add_fetch (&s->count, -1, __ATOMIC_RELAXED);
  __atomic_sub_fetch (&s->bytes_total, (guint64) bytes, __ATOMIC_RELAXED);
  __atomic_sub_fetch (&s->count_total, 1, __ATOMIC_RELAXED);
}

G_GNUC_NO_INLINE void
_memres_counted_refused (MemresResource *mr, guint tag, gint64 bytes)
{
  guint i = _memres_stripe_current ();
  MemresCounts *counts = mr->counts;
  MemresResource *usage = _memres_counted_usage (mr);

  __atomic_sub_fetch (&counts->classes[i - 1].n[_memres_size_class (bytes)], 1, __ATOMIC_RELAXED);
  set_take_back (&mr->stripes[i - 1].set, bytes);
  if (tag != 0)
    set_take_back (&counts->tag_stripes[i - 1].tags[tag], bytes);
  if (usage != NULL)
    __atomic_add_fetch (&MEMRES_STRIPE_AT (usage, i)->set.bytes, -bytes, __ATOMIC_RELAXED);
}

/* @delta bytes more (fewer) in set @s (a slow path: locked adds, right for any stripe) */
static void
set_resize (MemresCountSet *s, gint64 delta)
{
  __atomic_add_fetch (&s->bytes, delta, __ATOMIC_RELAXED);
}

G_GNUC_NO_INLINE void
_memres_counted_resized (MemresResource *mr, guint tag, gint64 delta)
{
  guint i = _memres_stripe_current ();
  MemresCounts *counts = mr->counts;

  set_resize (&mr->stripes[i - 1].set, delta);
  if (tag != 0)
    set_resize (&counts->tag_stripes[i - 1].tags[tag], delta);
  if (delta <= 0)
    return;
  _memres_counts_peak (mr);
  if (tag != 0)
    _memres_counts_tag_peak (counts, tag);
}

/* A set's figures: current, peak (at least current), and totals since the reset (@m's bases). */
static void
set_read (MemresCountSet *s0, gsize stride, const guint64 *bytes_peak, const guint64 *count_peak,
          const MemresCountMarks *m, MemresTagCounts *out)
{
  out->bytes_current = _memres_stripes_sum (&s0->bytes, stride, NULL);
  out->count_current = _memres_stripes_sum (&s0->count, stride, NULL);
  out->bytes_peak = MAX (__atomic_load_n (bytes_peak, __ATOMIC_RELAXED), out->bytes_current);
  out->count_peak = MAX (__atomic_load_n (count_peak, __ATOMIC_RELAXED), out->count_current);
  out->bytes_total
      = _memres_stripes_sum ((gint64 *) &s0->bytes_total, stride, NULL) - m->bytes_total_base;
  out->count_total
      = _memres_stripes_sum ((gint64 *) &s0->count_total, stride, NULL) - m->count_total_base;
}

/* A set's reset: the peaks to the current values, the totals' bases to the totals. */
static void
set_reset (MemresCountSet *s0, gsize stride, guint64 *bytes_peak, guint64 *count_peak,
           MemresCountMarks *m)
{
  set_marks_update (s0, stride, bytes_peak, count_peak, TRUE);
  m->bytes_total_base = _memres_stripes_sum ((gint64 *) &s0->bytes_total, stride, NULL);
  m->count_total_base = _memres_stripes_sum ((gint64 *) &s0->count_total, stride, NULL);
}

/* The allocations of each size class since creation, in @classes. */
static void
classes_sum (MemresCounts *counts, guint64 classes[MEMRES_STATS_N_SIZE_CLASSES])
{
  memset (classes, 0, MEMRES_STATS_N_SIZE_CLASSES * sizeof classes[0]);
  for (guint i = 0; i < MEMRES_BUFFER_STRIPES; i++)
    for (guint k = 0; k < MEMRES_STATS_N_SIZE_CLASSES; k++)
      classes[k] += __atomic_load_n (&counts->classes[i].n[k], __ATOMIC_RELAXED);
}

static gboolean
not_counted (MemresResource *mr, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
               "resources of kind \"%s\" are not counted (the kind is not MEMRES_KIND_COUNTED)",
               mr->kind->name);
  return FALSE;
}

/**
 * memres_resource_get_counts:
 * @mr: a resource whose kind has %MEMRES_KIND_COUNTED (a `stats` layer)
 * @counts: (out caller-allocates): return location for the counts
 * @error: return location for a #GError, or %NULL
 *
 * Reads what the core counted for @mr itself (not for the layers below it): the bytes and
 * allocations its allocate slot returned and its deallocate slot took back, current, peak and
 * total, and allocations by power-of-two size class, since its creation or
 * memres_resource_reset_counts(). The core counts them on each thread's stripe, with no lock and
 * no locked instruction while the process has fewer threads counting than stripes; a read sums
 * the stripes one after the other. Current values are exact whenever no allocate or free of @mr
 * runs at the same time; peaks are exact when the threads take turns, and may be off by a few
 * allocations either way while threads allocate at once (current <= peak always holds). For a
 * kind's get_stats slot (the `stats` adaptor's) and for applications; memres_stats_get_counters()
 * finds the layer by kind. No driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when @mr's kind is not counted.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_resource_get_counts (MemresResource *mr, MemresStatsCounters *counts, GError **error)
{
  MemresCounts *c;
  MemresTagCounts t;
  guint64 classes[MEMRES_STATS_N_SIZE_CLASSES];

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (counts != NULL, FALSE);

  c = mr->counts;
  if (c == NULL)
    return not_counted (mr, error);
  memset (counts, 0, sizeof *counts);
  g_mutex_lock (&counts_lock);
  set_read (LAYER_SET0 (mr), LAYER_STRIDE, &mr->used_high, &c->marks.count_peak, &c->marks, &t);
  classes_sum (c, classes);
  for (guint k = 0; k < MEMRES_STATS_N_SIZE_CLASSES; k++)
    counts->size_classes[k] = classes[k] - c->classes_base[k];
  g_mutex_unlock (&counts_lock);
  counts->bytes_current = t.bytes_current;
  counts->bytes_peak = t.bytes_peak;
  counts->bytes_total = t.bytes_total;
  counts->count_current = t.count_current;
  counts->count_peak = t.count_peak;
  counts->count_total = t.count_total;
  return TRUE;
}

/**
 * memres_resource_reset_counts:
 * @mr: a resource whose kind has %MEMRES_KIND_COUNTED (a `stats` layer)
 * @error: return location for a #GError, or %NULL
 *
 * Resets what memres_resource_get_counts() reads of @mr: the peaks to the current values, the
 * totals and size classes to 0 (the current values stay); every tag's counts
 * (memres_resource_get_tag_counts()) the same way. The `stats` adaptor's reset_stats slot
 * and memres_stats_reset() call it. No driver call. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when @mr's kind is not counted.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_resource_reset_counts (MemresResource *mr, GError **error)
{
  MemresCounts *c;

  g_return_val_if_fail (mr != NULL, FALSE);

  c = mr->counts;
  if (c == NULL)
    return not_counted (mr, error);
  g_mutex_lock (&counts_lock);
  set_reset (LAYER_SET0 (mr), LAYER_STRIDE, &mr->used_high, &c->marks.count_peak, &c->marks);
  classes_sum (c, c->classes_base);
  for (guint t = 1; t <= MEMRES_TAGS_MAX; t++)
    {
      MemresCountMarks *tm = &c->tag_marks[t];

      set_reset (TAG_SET0 (c, t), TAG_STRIDE, &tm->bytes_peak, &tm->count_peak, tm);
    }
  g_mutex_unlock (&counts_lock);
  return TRUE;
}

/* Tag @tag's counts of @c into @out; under counts_lock. */
static void
tag_counts_read (MemresCounts *c, guint tag, MemresTagCounts *out)
{
  MemresCountMarks *m = &c->tag_marks[tag];

  set_read (TAG_SET0 (c, tag), TAG_STRIDE, &m->bytes_peak, &m->count_peak, m, out);
}

/**
 * memres_resource_get_tag_counts:
 * @mr: a resource whose kind has %MEMRES_KIND_COUNTED (a `stats` layer)
 * @tag: a tag's name
 * @counts: (out caller-allocates): return location for the counts
 * @error: return location for a #GError, or %NULL
 *
 * Reads what @mr counted for the buffers allocated under @tag (memres_buffer_get_tag()): bytes
 * and allocations, current, peak and total, since the layer's creation or the last reset
 * (memres_resource_reset_counts(); the peaks also memres_resource_reset_tag_peak()). A layer
 * counts a buffer under its tag when the buffer's own allocation goes through it: the layer the
 * buffer was allocated from, and the layers below it through adaptors that pass allocations
 * (%MEMRES_KIND_PASSES_ALLOCATIONS); what a caching layer (`cache`, `arena`) takes from its
 * upstream is a chunk of no tag, counted in memres_resource_get_counts() only. Counted on each
 * thread's stripe with no lock and no locked instruction, as memres_resource_get_counts() says,
 * and as exact. A tag that exists but never went through @mr reads as zeros. No driver call.
 * Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when @mr's kind is not counted; %MEMRES_TAG_ERROR_INVALID
 * (@tag cannot be a tag), %MEMRES_TAG_ERROR_UNKNOWN (no allocation was ever made under @tag in
 * this process).
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_resource_get_tag_counts (MemresResource *mr, const char *tag, MemresTagCounts *counts,
                                GError **error)
{
  guint id;

  g_return_val_if_fail (mr != NULL, FALSE);
  g_return_val_if_fail (counts != NULL, FALSE);

  if (mr->counts == NULL)
    return not_counted (mr, error);
  if ((id = _memres_tag_find (tag, error)) == 0)
    return FALSE;
  g_mutex_lock (&counts_lock);
  tag_counts_read (mr->counts, id, counts);
  g_mutex_unlock (&counts_lock);
  return TRUE;
}

/**
 * memres_resource_list_tags:
 * @mr: a resource whose kind has %MEMRES_KIND_COUNTED (a `stats` layer)
 * @error: return location for a #GError, or %NULL
 *
 * The tags @mr counted a buffer of (memres_resource_get_tag_counts()) since its creation: those
 * whose total or current count is not 0 now (a reset keeps a tag whose buffers are still open),
 * in the order of their first use in the process. Thread-safe.
 *
 * Errors: %MEMRES_ERROR_NOT_SUPPORTED when @mr's kind is not counted.
 *
 * Returns: (transfer full) (nullable): a %NULL-terminated array of names (empty when none), free
 *   it with `g_strfreev`; %NULL with @error set
 *
 * Since: 2.0
 */
GStrv
memres_resource_list_tags (MemresResource *mr, GError **error)
{
  GPtrArray *names;
  guint n;

  g_return_val_if_fail (mr != NULL, NULL);

  if (mr->counts == NULL)
    {
      not_counted (mr, error);
      return NULL;
    }
  names = g_ptr_array_new ();
  n = _memres_tag_count ();
  g_mutex_lock (&counts_lock);
  for (guint t = 1; t <= n; t++)
    {
      MemresTagCounts tc;

      tag_counts_read (mr->counts, t, &tc);
      if (tc.count_total != 0 || tc.count_current != 0)
        g_ptr_array_add (names, g_strdup (_memres_tag_name (t)));
    }
  g_mutex_unlock (&counts_lock);
  g_ptr_array_add (names, NULL);
  return (GStrv) g_ptr_array_free (names, FALSE);
}

/**
 * memres_resource_reset_tag_peak:
 * @mr: a resource whose kind has %MEMRES_KIND_COUNTED (a `stats` layer)
 * @tag: a tag's name
 * @error: return location for a #GError, or %NULL
 *
 * Resets @tag's peaks in @mr (bytes and allocations) to their current values, and nothing else:
 * the other tags' peaks, @tag's totals and the layer's own counts stay. A phase of a program
 * measures its own peak so. No driver call. Thread-safe.
 *
 * Errors: those of memres_resource_get_tag_counts().
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_resource_reset_tag_peak (MemresResource *mr, const char *tag, GError **error)
{
  guint id;

  g_return_val_if_fail (mr != NULL, FALSE);

  if (mr->counts == NULL)
    return not_counted (mr, error);
  if ((id = _memres_tag_find (tag, error)) == 0)
    return FALSE;
  g_mutex_lock (&counts_lock);
  set_marks_update (TAG_SET0 (mr->counts, id), TAG_STRIDE, &mr->counts->tag_marks[id].bytes_peak,
                    &mr->counts->tag_marks[id].count_peak, TRUE);
  g_mutex_unlock (&counts_lock);
  return TRUE;
}

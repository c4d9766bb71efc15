/* memres - CUDA memory resources
 * counting.h: what the core counts per thread (counting.c): which stripe a thread counts on,
 * the high-water marks kept from per-stripe quotas, and the counts of a layer whose kind asks
 * for them (MEMRES_KIND_COUNTED: the `stats` adaptor): bytes and allocations, current, peak and
 * total, and allocations by size class, as memres_resource_get_counts() reads them.
 *
 * A counted layer counts on each thread's stripe (the index of hot-path.h), in sets of counts
 * (MemresCountSet: bytes and allocations, current, quotas and totals): every allocation in the
 * set of the layer's own buffer stripe (MemresStripe.set, on the line its buffer count is on; its
 * bytes are the layer's usage, whose mark is MemresResource.used_high), each tagged one also in
 * its tag's set (MemresCounts.tag_stripes); the size classes beside them (MemresCounts.classes).
 * A stripe with one thread is changed with plain loads and stores; the shared stripe (more
 * threads than stripes) with locked adds. Also the inline bodies of a counted layer's slot calls,
 * which only resource-slots.c expands (the slot pointers of a counted layer's MemresResource).
 * Included through memres-private.h. */
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

/* A counted layer's counts beside its buffer stripes: the size classes per stripe, the tags' sets
 * per stripe, and what the readers keep (the marks but the bytes peak, which is the layer's
 * used_high, and the totals at the last reset). Mapped whole, zero pages from the kernel: the
 * tags' sets take memory only once a tag is counted on a stripe (MEMRES_TAGS_MAX + 1 sets of 48
 * bytes on each of 32 stripes: 96 KiB). */
typedef struct
{
  guint64 n[MEMRES_STATS_N_SIZE_CLASSES]; /* allocations by power-of-two size class */
} __attribute__ ((aligned (128))) MemresClassStripe;

/* the tags' sets of one stripe, indexed by tag id (1 to MEMRES_TAGS_MAX; 0 unused) */
typedef struct
{
  MemresCountSet tags[MEMRES_TAGS_MAX + 1];
} __attribute__ ((aligned (128))) MemresTagStripe;

/* What a set's readers keep: the peaks (the layer's bytes peak is MemresResource.used_high) and
 * the totals at the last reset. */
typedef struct
{
  guint64 bytes_peak;
  guint64 count_peak;
  guint64 bytes_total_base;
  guint64 count_total_base;
} MemresCountMarks;

struct _MemresCounts
{
  MemresClassStripe classes[MEMRES_BUFFER_STRIPES];
  MemresCountMarks marks; /* the layer's own: under counting.c's lock, but the peaks */
  guint64 classes_base[MEMRES_STATS_N_SIZE_CLASSES];
  MemresTagStripe tag_stripes[MEMRES_BUFFER_STRIPES];
  MemresCountMarks tag_marks[MEMRES_TAGS_MAX + 1]; /* the same, per tag */
};

/* counting.c: a counted layer's counts, zeroed; freed with _memres_counts_free(). */
MemresCounts *_memres_counts_new (void);
void _memres_counts_free (MemresCounts *counts);
/* the slow half of a counted layer's count (_memres_counted_count()): a quota of its set passed */
void _memres_counts_peak (MemresResource *mr);
/* the same for a tag's set */
void _memres_counts_tag_peak (MemresCounts *counts, guint tag);
/* counting.c's lock around fork() (fork.c's parts) */
void _memres_counts_fork (MemresResource *unused, MemresForkPhase phase);

/* Adds @bytes and @count (negative for a free) to @s, a set on stripe @i (the calling thread's);
 * an allocation (@allocated: @bytes > 0, @count 1) also goes into the totals. The one body of
 * the layer's set and of a tag's. */
G_ALWAYS_INLINE static inline void
_memres_count_set_add (MemresCountSet *s, guint i, gint64 bytes, gint64 count, gboolean allocated)
{
  if (G_LIKELY (i != MEMRES_STRIPE_SHARED))
    {
      _memres_plain_add (&s->bytes, bytes);
      _memres_plain_add (&s->count, count);
      if (allocated)
        {
          _memres_plain_add ((gint64 *) &s->bytes_total, bytes);
          _memres_plain_add ((gint64 *) &s->count_total, 1);
        }
    }
  else
    {
      __atomic_add_fetch (&s->bytes, bytes, __ATOMIC_RELAXED);
      __atomic_add_fetch (&s->count, count, __ATOMIC_RELAXED);
      if (allocated)
        {
          __atomic_add_fetch (&s->bytes_total, (guint64) bytes, __ATOMIC_RELAXED);
          __atomic_add_fetch (&s->count_total, 1, __ATOMIC_RELAXED);
        }
    }
}

/* Whether a value of set @s on stripe @i (the calling thread's) is past its quota (the caller then
 * updates the marks). */
G_ALWAYS_INLINE static inline gboolean
_memres_count_set_over_quota (const MemresCountSet *s, guint i)
{
  return _memres_stripe_value (&s->bytes, i) > __atomic_load_n (&s->bytes_quota, __ATOMIC_RELAXED)
         || _memres_stripe_value (&s->count, i)
                > __atomic_load_n (&s->count_quota, __ATOMIC_RELAXED);
}

/* The tag of the allocate or deallocate slot call on @alloc in progress on this thread: the
 * buffer's when @alloc is the record of the tagged buffer whose slot call runs (tags.h), else 0. */
G_ALWAYS_INLINE static inline guint
_memres_tag_of_call (const MemresAllocation *alloc)
{
  if (G_LIKELY (alloc != _memres_thread.call_record))
    return 0;
  return ((const MemresBuffer *) ((const guint8 *) alloc - G_STRUCT_OFFSET (MemresBuffer, alloc)))
      ->tag;
}

/* How a counted layer's calls reach memory, and whose usage they count besides the layer's own:
 * a constant of each of the core's counted calls (resource-slots.c picks one at creation), so that
 * a call tests neither. */
typedef enum
{
  MEMRES_COUNTED_OWN,        /* the kind's own slots */
  MEMRES_COUNTED_PASS,       /* a layer without slots (`stats`): the upstream's, as
                              * memres_upstream_allocate() calls them; its usage is not counted
                              * (MemresResource.count_usage FALSE: the upstream counts it, or
                              * nobody reads it) */
  MEMRES_COUNTED_PASS_USAGE, /* the same, and the upstream's usage counted on the same stripe
                              * index, as memres_upstream_allocate() would count it */
} MemresCountedMode;

/* Whether counted layer @mr has no slots of its own and passes its calls to its upstream's */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_passes (MemresResource *mr)
{
  return mr->ops->allocate == NULL;
}

/* The resource whose usage counted layer @mr's calls count besides its own: its upstream for a
 * pass-through layer over an upstream whose usage the core counts, else NULL */
G_ALWAYS_INLINE static inline MemresResource *
_memres_counted_usage (MemresResource *mr)
{
  return _memres_counted_passes (mr) && mr->upstream->count_usage ? mr->upstream : NULL;
}

/* The resource whose usage a counted call of @mode counts: @mr's upstream for
 * MEMRES_COUNTED_PASS_USAGE (never NULL there: told to the compiler, which then tests nothing),
 * else NULL */
G_ALWAYS_INLINE static inline MemresResource *
_memres_counted_usage_of_mode (MemresResource *mr, MemresCountedMode mode)
{
  MemresResource *up = mr->upstream;

  if (mode != MEMRES_COUNTED_PASS_USAGE)
    return NULL;
  if (up == NULL)
    __builtin_unreachable ();
  return up;
}

/* resource-slots.c: the marks of a counted layer's count of an allocation on stripe @i (the calling
 * thread's) that took a value past its quota: each of its sets still past its quota there (the
 * layer's, tag @tag's, and @usage's: _memres_counted_usage()) has its marks updated, unless
 * @alloc is a record the caller's check refuses for an allocation of @asked bytes (counted before
 * that check, it is taken back: no peak of it is kept) */
void _memres_counted_marks (MemresResource *mr, guint i, guint tag, MemresResource *usage,
                            const MemresAllocation *alloc, gsize asked);
/* counting.c: the counts of an allocation of @bytes (tag @tag, 0: none) that counted layer @mr's
 * allocate counted (_memres_counted_allocate()) and the caller's check then refused, taken back
 * on the calling thread's stripe: current, totals, size class, the tag's set, and the usage of
 * _memres_counted_usage() */
void _memres_counted_refused (MemresResource *mr, guint tag, gint64 bytes);

/* counting.c: a resize by @delta bytes (memres_buffer_resize(), buffer-resize.c) of a buffer that
 * counted layer @mr counted (tag @tag's set too, 0: none), on the calling thread's stripe: the
 * current bytes change and a growth raises the peaks; the allocations, the totals and the size
 * classes stay what the allocation made them (a resize allocates nothing new) */
void _memres_counted_resized (MemresResource *mr, guint tag, gint64 delta);

/* The size class of an allocation of @bytes (its highest bit; a record the caller's check will
 * refuse, 0 bytes or past G_MAXSSIZE, has one too, as it is counted before that check) */
G_ALWAYS_INLINE static inline guint
_memres_size_class (gint64 bytes)
{
  return 63 - (guint) __builtin_clzll ((guint64) bytes | 1);
}

/* The counts of a call of counted layer @mr's slots on @alloc, of @bytes and @count (negative
 * for a free), on stripe @i (the calling thread's): the layer's set on its own buffer stripe (the
 * line its buffer count is on), an allocation's size class, the tag's set when @alloc is the
 * record of a tagged buffer whose slot call runs on this thread (@tag, _memres_tag_of_call(): a
 * caching layer's chunk is not), and @usage's usage on the same stripe index (NULL: none;
 * _memres_counted_usage()). Every add first, then for an allocation the quotas, with one call
 * where a value passed its own (_memres_counted_marks(), which sees which; @asked: the bytes the
 * allocation asked for, for its check of the record). */
G_ALWAYS_INLINE static inline void
_memres_counted_count (MemresResource *mr, guint i, const MemresAllocation *alloc, gint64 bytes,
                       gint64 count, gboolean allocated, MemresResource *usage, gsize asked,
                       guint tag)
{
  MemresCounts *counts = mr->counts;
  MemresCountSet *set = &MEMRES_STRIPE_AT (mr, i)->set;
  MemresCountSet *tag_set = NULL;

  if (allocated)
    {
      guint64 *c = &counts->classes[(gsize) i - 1].n[_memres_size_class (bytes)];

      if (G_LIKELY (i != MEMRES_STRIPE_SHARED))
        _memres_plain_add ((gint64 *) c, 1);
      else
        __atomic_add_fetch (c, 1, __ATOMIC_RELAXED);
    }
  _memres_count_set_add (set, i, bytes, count, allocated);
  if (G_UNLIKELY (tag != 0))
    {
      tag_set = &counts->tag_stripes[(gsize) i - 1].tags[tag];
      _memres_count_set_add (tag_set, i, bytes, count, allocated);
    }
  if (usage != NULL)
    _memres_stripe_add_bytes (usage, i, bytes);
  if (allocated
      && G_UNLIKELY (
          _memres_count_set_over_quota (set, i)
          || (tag_set != NULL && _memres_count_set_over_quota (tag_set, i))
          || (usage != NULL && _memres_stripe_over_quota (MEMRES_STRIPE_AT (usage, i), i))))
    _memres_counted_marks (mr, i, tag, usage, alloc, asked);
}

/* Whether stripe index @i is a stripe of the thread's own (not 0, none yet, and not the shared
 * one): one compare for both. A counted layer's calls count inline on such a stripe only. */
G_ALWAYS_INLINE static inline gboolean
_memres_stripe_is_own (guint i)
{
  return i - 1 < MEMRES_STRIPE_SHARED - 1;
}

/* resource-slots.c: a counted layer's calls out of line where the thread has no stripe of its own
 * (its first count, or more threads than stripes: the shared one, with locked adds) or where the
 * record is a tagged buffer's in its slot call (the thread's call record, tags.h), so that the
 * other calls carry no code and no registers for any of them (@mode: the calling slot's).
 * _memres_counted_allocated_slow(): the counts of _memres_counted_allocate() (@asked: the bytes
 * asked for); returns TRUE. _memres_counted_deallocate_slow(): _memres_counted_deallocate(). */
gboolean _memres_counted_allocated_slow (MemresResource *mr, const MemresAllocation *alloc,
                                         gsize asked, MemresCountedMode mode);
gboolean _memres_counted_deallocate_slow (MemresResource *mr, MemresAllocation *alloc,
                                          MemresStream stream, GError **error,
                                          MemresCountedMode mode);

/* resource-slots.c: @mr's deallocate slot after the wait for @stream that its memory needs
 * (MemresResource.wait_before_free), unchecked; FALSE with the wait's error when it fails. */
gboolean _memres_resource_call_deallocate_waiting (MemresResource *mr, MemresAllocation *alloc,
                                                   MemresStream stream, GError **error);

/* The allocate of a counted layer (the slot pointer of a MemresResource with counts): its kind's
 * slot, or for a pass-through layer without one (@mode) its upstream's slot, the call
 * memres_upstream_allocate() would make; then the counts (_memres_counted_count()) of whatever
 * record a successful call returned. The record is not checked here: the caller checks it
 * (buffer.c, _memres_resource_call_allocate()), and the slow half of that check takes the counts
 * of a bad record back (_memres_counted_refused()) and names and releases it at the layer that
 * made it (resource-slots.c: _memres_resource_alloc_result_slow()); no peak of it is kept
 * (_memres_counted_marks()). */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_allocate (MemresResource *mr, gsize size, MemresStream stream,
                          MemresAllocation *alloc, GError **error, MemresCountedMode mode)
{
  MemresResource *up = mr->upstream;
  guint i;

  if (mode != MEMRES_COUNTED_OWN)
    {
      if (G_UNLIKELY (!up->allocate (up, size, stream, alloc, error)))
        return FALSE;
    }
  else if (G_UNLIKELY (!mr->ops->allocate (mr, size, stream, alloc, error)))
    return FALSE;
  i = _memres_thread.stripe_index;
  if (G_UNLIKELY (!_memres_stripe_is_own (i) || alloc == _memres_thread.call_record))
    return _memres_counted_allocated_slow (mr, alloc, size, mode);
  _memres_counted_count (mr, i, alloc, (gint64) alloc->size, 1, TRUE,
                         _memres_counted_usage_of_mode (mr, mode), size, 0);
  return TRUE;
}

/* The deallocate of a counted layer on stripe @i (the calling thread's): uncounted before the
 * free (once freed, another thread may get the memory and count it; @usage's usage too), then its
 * kind's slot, or for a pass-through layer (@pass) the call memres_upstream_deallocate() would
 * make (its wait for the stream where the upstream frees at once, its slot), a tail call. A free
 * that did not simply succeed is judged by the caller's check, whose slow half judges it at the
 * layer that made the call and counts again what was kept (resource-slots.c:
 * _memres_resource_deallocate_result_slow()). */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_free (MemresResource *mr, guint i, MemresAllocation *alloc, MemresStream stream,
                      GError **error, gboolean pass, MemresResource *usage, guint tag)
{
  MemresResource *up = mr->upstream;

  _memres_counted_count (mr, i, alloc, -(gint64) alloc->size, -1, FALSE, usage, 0, tag);
  if (!pass)
    return mr->ops->deallocate (mr, alloc, stream, error);
  if (G_UNLIKELY (up->wait_before_free))
    return _memres_resource_call_deallocate_waiting (up, alloc, stream, error);
  return up->deallocate (up, alloc, stream, error);
}

/* The same on the thread's own stripe, untagged; else out of line */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                            GError **error, MemresCountedMode mode)
{
  guint i = _memres_thread.stripe_index;

  if (G_UNLIKELY (!_memres_stripe_is_own (i) || alloc == _memres_thread.call_record))
    return _memres_counted_deallocate_slow (mr, alloc, stream, error, mode);
  return _memres_counted_free (mr, i, alloc, stream, error, mode != MEMRES_COUNTED_OWN,
                               _memres_counted_usage_of_mode (mr, mode), 0);
}

G_END_DECLS

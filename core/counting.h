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
 * which only resource.c expands (the slot pointers of a counted layer's MemresResource).
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
/* the slow half of a counted layer's count (_memres_counted_add()): a quota of its set passed */
void _memres_counts_peak (MemresResource *mr);
/* the same for a tag's set */
void _memres_counts_tag_peak (MemresCounts *counts, guint tag);
/* counting.c's lock around fork() (fork.c's parts) */
void _memres_counts_fork (MemresResource *unused, MemresForkPhase phase);

/* Adds @bytes and @count (negative for a free) to @s, a set on stripe @i (the calling thread's);
 * an allocation (@allocated: @bytes > 0, @count 1) also goes into the totals. Returns TRUE when
 * the allocation took a value past its quota (the caller then updates the marks). The one body
 * of the layer's set and of a tag's. */
G_ALWAYS_INLINE static inline gboolean
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
  return allocated
         && G_UNLIKELY (__atomic_load_n (&s->bytes, __ATOMIC_RELAXED)
                            > __atomic_load_n (&s->bytes_quota, __ATOMIC_RELAXED)
                        || __atomic_load_n (&s->count, __ATOMIC_RELAXED)
                               > __atomic_load_n (&s->count_quota, __ATOMIC_RELAXED));
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

/* resource.c: the marks of a counted layer's count of an allocation whose values passed their
 * quotas (@passed: 1 the layer's set, 2 tag @tag's set, 4 the upstream's usage), unless @alloc
 * is a record the caller's check refuses for an allocation of @asked bytes (counted before that
 * check, it is taken back: no peak of it is kept) */
void _memres_counted_marks (MemresResource *mr, guint tag, guint passed,
                            const MemresAllocation *alloc, gsize asked);
/* counting.c: the counts of an allocation of @bytes (tag @tag, 0: none) that counted layer @mr's
 * allocate counted (_memres_counted_allocate()) and the caller's check then refused, taken back
 * on the calling thread's stripe: current, totals, size class, the tag's set, and for @pass (a
 * layer without slots) the upstream's usage */
void _memres_counted_refused (MemresResource *mr, guint tag, gint64 bytes, gboolean pass);

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
 * caching layer's chunk is not), and for @pass (a layer without slots of its own) the upstream's
 * usage on the same stripe index. No call but where a quota passed, at the end (@asked: the bytes
 * an allocation asked for, for the marks' check of the record). */
G_ALWAYS_INLINE static inline void
_memres_counted_count (MemresResource *mr, guint i, const MemresAllocation *alloc, gint64 bytes,
                       gint64 count, gboolean allocated, gboolean pass, gsize asked, guint tag)
{
  MemresCounts *counts = mr->counts;
  guint passed = 0;

  if (allocated)
    {
      guint64 *c = &counts->classes[i - 1].n[_memres_size_class (bytes)];

      if (G_LIKELY (i != MEMRES_STRIPE_SHARED))
        _memres_plain_add ((gint64 *) c, 1);
      else
        __atomic_add_fetch (c, 1, __ATOMIC_RELAXED);
    }
  if (_memres_count_set_add (&mr->stripes[i - 1].set, i, bytes, count, allocated))
    passed |= 1;
  if (G_UNLIKELY (tag != 0)
      && _memres_count_set_add (&counts->tag_stripes[i - 1].tags[tag], i, bytes, count, allocated))
    passed |= 2;
  if (pass && mr->upstream->count_usage
      && _memres_stripe_add_bytes (mr->upstream, i, bytes, allocated))
    passed |= 4;
  if (G_UNLIKELY (passed != 0))
    _memres_counted_marks (mr, tag, passed, alloc, asked);
}

/* resource.c: a counted layer's calls on the record of a tagged buffer's slot call (the thread's
 * call record, tags.h), out of line: the untagged calls then carry no code and no registers for
 * a tag. _memres_counted_allocated_tagged(): the counts of _memres_counted_allocate() under the
 * buffer's tag; returns TRUE. _memres_counted_deallocate_tagged(): _memres_counted_deallocate()
 * under the tag. */
gboolean _memres_counted_allocated_tagged (MemresResource *mr, guint i,
                                           const MemresAllocation *alloc, gboolean pass,
                                           gsize asked);
gboolean _memres_counted_deallocate_tagged (MemresResource *mr, MemresAllocation *alloc,
                                            MemresStream stream, GError **error, gboolean pass);

/* resource.c: @mr's deallocate slot after the wait for @stream that its memory needs
 * (MemresResource.wait_before_free), unchecked; FALSE with the wait's error when it fails. */
gboolean _memres_resource_call_deallocate_waiting (MemresResource *mr, MemresAllocation *alloc,
                                                   MemresStream stream, GError **error);

/* The allocate of a counted layer (the slot pointer of a MemresResource with counts): its kind's
 * slot, or for a pass-through layer without one (@pass: the `stats` adaptor) its upstream's slot,
 * the call memres_upstream_allocate() would make; then the counts (_memres_counted_count()) of
 * whatever record a successful call returned. The record is not checked here: the caller checks
 * it (buffer.c, _memres_resource_call_allocate()), and the slow half of that check takes the
 * counts of a bad record back (_memres_counted_refused()) and names and releases it at the layer
 * that made it (resource.c: _memres_resource_alloc_result_slow()); no peak of it is kept
 * (_memres_counted_marks()). */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_allocate (MemresResource *mr, gsize size, MemresStream stream,
                          MemresAllocation *alloc, GError **error, gboolean pass)
{
  MemresResource *up = mr->upstream;
  guint i;

  if (pass)
    {
      if (G_UNLIKELY (!up->allocate (up, size, stream, alloc, error)))
        return FALSE;
    }
  else if (G_UNLIKELY (!mr->ops->allocate (mr, size, stream, alloc, error)))
    return FALSE;
  i = _memres_stripe_current ();
  if (G_UNLIKELY (alloc == _memres_thread.call_record))
    return _memres_counted_allocated_tagged (mr, i, alloc, pass, size);
  _memres_counted_count (mr, i, alloc, (gint64) alloc->size, 1, TRUE, pass, size, 0);
  return TRUE;
}

/* The deallocate of a counted layer: uncounted before the free (once freed, another thread may
 * get the memory and count it; for @pass the upstream's usage too), then its kind's slot, or for
 * a pass-through layer the call memres_upstream_deallocate() would make (its wait for the stream
 * where the upstream frees at once, its slot). A free that did not simply succeed is judged by
 * the caller's check, whose slow half judges it at the layer that made the call and counts again
 * what was kept (resource.c: _memres_resource_deallocate_result_slow()). The calling thread has
 * its stripe (resource.c gets it first, so that the body makes no call before the slot's, which
 * is a tail call). */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_free (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                      GError **error, gboolean pass, guint tag)
{
  MemresResource *up = mr->upstream;

  _memres_counted_count (mr, _memres_thread.stripe_index, alloc, -(gint64) alloc->size, -1, FALSE,
                         pass, 0, tag);
  if (!pass)
    return mr->ops->deallocate (mr, alloc, stream, error);
  if (G_UNLIKELY (up->wait_before_free))
    return _memres_resource_call_deallocate_waiting (up, alloc, stream, error);
  return up->deallocate (up, alloc, stream, error);
}

/* The same, the tag found here (a tagged buffer's record: out of line) */
G_ALWAYS_INLINE static inline gboolean
_memres_counted_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                            GError **error, gboolean pass)
{
  if (G_UNLIKELY (alloc == _memres_thread.call_record))
    return _memres_counted_deallocate_tagged (mr, alloc, stream, error, pass);
  return _memres_counted_free (mr, alloc, stream, error, pass, 0);
}

G_END_DECLS

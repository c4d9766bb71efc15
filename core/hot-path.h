/* memres - CUDA memory resources
 * hot-path.h: what an allocate/close pair runs in the core, in one header: the calling
 * thread's state (MemresThread: its spare buffer structures, stripe, tag scope), the resource's
 * first cache line and its buffer stripes (MemresResource), the buffer's one line (MemresBuffer),
 * the check that a resource was not inherited through a fork(), the counts on the stripe, and the
 * inline calls of the allocate and deallocate slots with their checks. A counted layer's slots are
 * called out of line (resource-slots.c, on the inline bodies of counting.h), so that a pair through
 * any other layer reads no other header of the core. The out-of-line halves are resource-slots.c's,
 * counting.c's and fork.c's. Included through memres-private.h, the core's umbrella header. */
#pragma once

#ifndef MEMRES_CORE_COMPILATION
#error "hot-path.h is the core's own: plugins use <memres/memres-plugin.h> and sdk/ only."
#endif

#include <memres/memres-plugin.h>

#include "ipc/ipc.h"

/* one fence state for libmemres (defined in resource.c): the buffer stripes */
#define OWNER_FENCE_SHARED 1
#include "../sdk/owner-fence.h"

G_BEGIN_DECLS

/* The calling thread's state that an allocate/close pair reads, in one thread-local block
 * (defined in thread.c): the buffer structures the thread keeps for reuse (buffer.c), the stripe
 * it counts on (counting.c), its innermost tag scope and the record of the tagged slot call in
 * progress (tags.c). One block, so that a pair finds all of it from one address (initial-exec:
 * one load of its offset, then loads relative to the thread pointer) rather than one per
 * variable. */
typedef struct
{
  /* buffer.c: the thread's spare buffer structures, linked through their mr field (NULL: none),
   * and how many more it may keep (0: full, or not set up yet: buffer.c's slow half sets it up,
   * @cache_set, and its thread-exit handler frees the structures and clears it) */
  MemresBuffer *cache_head;
  guint cache_room;
  /* counting.c: the thread's stripe + 1 (0: none yet; _memres_stripe_assign()) */
  guint stripe_index;
  /* tags.c: the innermost tag of the thread's scope stack (0: none) */
  guint32 tag_scope;
  /* buffer.c: the cache above is set up (its thread-exit handler registered) */
  gboolean cache_set;
  /* tags.c: set only while a tagged buffer's allocate or deallocate slot runs, in a stack where a
   * layer reads tags: the buffer's allocation record (MemresBuffer.alloc), which a counted layer
   * compares the record it counts with (tags.h, counting.h) */
  const MemresAllocation *call_record;
} MemresThread;

/* initial-exec: no __tls_get_addr call on the hot path; the block is small enough for the static
 * TLS room glibc keeps for libraries loaded with dlopen() (as Python's ctypes does). */
G_GNUC_INTERNAL extern __thread MemresThread _memres_thread
    __attribute__ ((tls_model ("initial-exec")));

#define MEMRES_BUFFER_STRIPES 32
/* the index (+ 1) of the one stripe that threads share, changed with locked instructions; each
 * stripe below it has at most one thread at a time, which changes it with plain loads and stores
 * (_memres_stripe_assign()) */
#define MEMRES_STRIPE_SHARED MEMRES_BUFFER_STRIPES

/* The calling thread's stripe + 1 is _memres_thread.stripe_index (MemresThread above; 0: none yet;
 * _memres_stripe_assign() gives it a stripe of its own while one is free, else
 * MEMRES_STRIPE_SHARED; at its exit the stripe is free again). */
guint _memres_stripe_assign (void);

static inline guint
_memres_stripe_current (void)
{
  guint i = _memres_thread.stripe_index;

  if (G_UNLIKELY (i == 0))
    i = _memres_stripe_assign ();
  return i;
}

/* a counted layer's counts (counting.h) */
typedef struct _MemresCounts MemresCounts;

/* One set of counts on one stripe, written by the stripe's thread alone (plain loads and stores;
 * the shared stripe's with locked adds), read by anyone (atomic loads). On a resource's buffer
 * stripes: @bytes and @bytes_quota are the layer's usage (MemresStripe.set); the rest, a counted
 * layer's counts (counting.h). A tag's counts in a counted layer are sets of the same shape. */
typedef struct
{
  gint64 bytes;        /* bytes allocated minus bytes freed here (may be < 0 on one stripe) */
  gint64 count;        /* allocations minus frees here */
  gint64 bytes_quota;  /* how high @bytes may go before the stripes are summed */
  gint64 count_quota;  /* the same for @count */
  guint64 bytes_total; /* bytes of the allocations counted here */
  guint64 count_total; /* allocations counted here */
} MemresCountSet;

/* the resource's buffer stripes (MemresResource.stripes), one per thread */
#define MEMRES_STRIPE_BIAS ((gint64) 1 << 40)
#define MEMRES_STRIPE_DEAD ((gint64) 1 << 62)
typedef struct
{
  gint64 n;  /* atomic: MEMRES_STRIPE_BIAS + buffers counted here (MemresResource.stripes) */
  gint busy; /* the stripe's thread is inside a plain update (owner-fence.h) */
  /* set.bytes: the bytes of the layer's allocations minus those closed through this stripe
   * (MemresResource.count_usage; a counted layer's own counts, all of @set); set.bytes_quota: how
   * high set.bytes may go before the stripes are summed (counting.c) */
  MemresCountSet set;
  /* 128 bytes apart, not 64: x86's adjacent-line prefetcher fetches lines in 128-byte pairs, so
   * stripes on the two lines of one pair would still be written back and forth between the cores
   * of their threads */
} __attribute__ ((aligned (128))) MemresStripe;
/* everything a pair writes of a stripe on one line */
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresStripe, set) + sizeof (MemresCountSet) <= 64);

/* The functions of the allocate/close hot path (the core's, and the embedded pass-through
 * layer's slots): the compiler puts them in .text.hot, which the linker places together, so
 * that a pair runs from a few neighbouring lines of one or two pages of code rather than from
 * lines scattered over the library (after a driver call, each a cold line and TLB entry). */
#define MEMRES_HOT __attribute__ ((hot))

typedef struct _MemresSegmentsState MemresSegmentsState;
typedef struct _MemresSleepState MemresSleepState;

struct _MemresResource
{
  /* Line 0: all the allocate/close pair reads of a resource (buffer.c, the slot calls below),
   * so that a pair through a resource touches one line of it besides its stripe. */
  /* the kind's allocate and deallocate slots (ops->allocate, ops->deallocate), copied here at
   * creation so that a call loads no line of the kind's table */
  gboolean (*allocate) (MemresResource *mr, gsize size, MemresStream stream,
                        MemresAllocation *alloc, GError **error);
  gboolean (*deallocate) (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                          GError **error);
  gpointer priv;            /* instance_size bytes, zero-filled, 16-byte aligned */
  MemresResource *upstream; /* adaptors: the layer below (strong reference), else NULL */
  MemresResourceInfo info;  /* from the query slot, read on hot paths */
  /* set at creation: the core counts the bytes of this resource's buffers on the stripes.
   * FALSE for kinds with MEMRES_KIND_OWN_USAGE or MEMRES_KIND_COUNTED (whose slots count their
   * bytes there themselves) and for adaptors without a get_stats slot (whose statistics are their
   * upstream's, so that nobody reads their count). A byte, as the two flags after it, so that all
   * three fit on this line. */
  guint8 count_usage;
  /* set at creation: a base kind whose memory is device-accessible but not stream-ordered; the
   * core waits for the deallocation stream before its deallocate slot (resource-slots.c) */
  guint8 wait_before_free;
  /* set at creation: what a tagged buffer's allocate and close must do for its tag (bits; 0: a
   * tagged buffer takes the untagged pair, its tag only kept in MemresBuffer.tag).
   * MEMRES_TAGS_READ: a layer that a buffer's own allocation record reaches from here (this one,
   * and below it through MEMRES_KIND_PASSES_ALLOCATIONS adaptors) reads the buffer's tag (a
   * counted one, or a kind with MEMRES_KIND_TAGGED; tags.h): the thread's call record is set
   * around the slot call. MEMRES_TAGS_SLEEP: the stack can sleep (@sleep is set, sleep.h): the
   * buffer is recorded under its tag, refused while the tag sleeps. Read by the tagged allocate
   * and close only; an untagged pair never reads it. */
  guint8 tags_wanted;
  /* set when @refs drops to 0, or at creation where membarrier() cannot be used: from then on
   * every thread changes the stripes with locked instructions (the stop flag of owner-fence.h;
   * resource.c: resource_last_ref()) */
  gint stripes_stop;
  gint generation; /* the fork generation it was made in (fork.c) */
  /* set at creation for a kind with MEMRES_KIND_COUNTED: the core counts what the layer's
   * allocate and deallocate slots hand out and take back (counting.h), the slot pointers above
   * being the core's counted calls (resource-slots.c); NULL for every other */
  MemresCounts *counts;

  /* Line 1 and on: the rest. */
  MemresKind *kind;
  /* set at creation for a stack that can sleep (sleep.h): its tagged buffers by tag and which
   * tags sleep; NULL for every other, whose pairs never read it; read by the
   * tagged allocate and close only, so not on line 0 */
  MemresSleepState *sleep;
  const MemresResourceOps *ops; /* == &kind->ops */
  char *spec;                   /* normalized spec, or a description of the import */
  /* Lifetime, in one atomic word so that the allocate/close hot path costs one locked operation
   * each: the high 32 bits count the references of the application (memres_resource_ref()), the
   * low 32 bits the open buffers. The instance is finalized when the word drops to 0. */
  gint64 refs;
  /* The high-water mark of the bytes of the buffers memres_resource_allocate() and
   * memres_ipc_receive_buffer() made (resized ones at their size now; buffers imported through
   * a pool's mapping are not counted: core/ipc/ipc-buffers.c reports those); the bytes themselves
   * are counted on the stripes (MemresStripe.set.bytes, summed by _memres_resource_used_bytes()).
   * The statistics a kind without a get_stats slot reports, and what a get_stats slot starts from.
   * Written only when a new peak is seen (counting.c: _memres_resource_count_peak()), so the hot
   * path only reads it. */
  guint64 used_high;
  /* the IPC layer's state (core/ipc/ipc.h): set on a resource memres_resource_import_handle()
   * made, before it is published; NULL on every other */
  MemresIpcState *ipc;
  gpointer close_event; /* atomic: a CUevent kept for the next cross-stream close */
  /* atomic: the device whose context reaches memory of device -1 (resource-slots.c:
   * _memres_resource_context_device()), plus 2; 0: not known yet, 1: none known */
  gint reach_device;
  /* atomic: set by the first resource_last_ref() as it begins; a later one (after a reference
   * taken again) only gives back the one that reference counted in @dead_count. @dead_count
   * holds a bias (resource.c: DEAD_BIAS) until the first has summed the stripes into it. (Here,
   * in the padding before @fork_link: the instance keeps its size.) */
  gint stripes_dead;
  GList *fork_link; /* in fork.c's list of live resources, NULL before and after */
  /* Buffers allocated through memres_resource_allocate(), counted apart from @refs so that the
   * allocate/close pair of threads running at once writes no shared cache line: each thread
   * counts on a stripe of its own (MEMRES_BUFFER_STRIPES of them, 128 bytes apart; a buffer
   * closed on another thread than it was allocated on makes one stripe go up, another down).
   * Each stripe holds MEMRES_STRIPE_BIAS + its count. When @refs drops to 0, the stripes are
   * marked MEMRES_STRIPE_DEAD and their counts summed into @dead_count; a close that finds its
   * stripe dead then counts down @dead_count, and whoever takes it to 0 finalizes. A reference
   * taken again after that (through an open buffer, memres_buffer_get_resource()) counts as one
   * more in @dead_count until @refs drops to 0 again, and a buffer allocated on a dead stripe
   * (with such a reference) counts itself there (_memres_stripe_count_on()). */
  gint64 dead_count;
  /* atomic: the calls of this layer's memory slots that broke the contract (a failure without
   * an error; resource-slots.c: contract_breach()), read by memres_resource_get_counters() */
  guint64 contract_breaches;
  /* the message of the last out-of-memory error of an allocation through this resource, with its
   * report (oom-report.c, under its lock; freed at finalize), or NULL */
  char *oom_report;
  /* the snapshot taken at that error (snapshot.c, memres_resource_get_oom_snapshot(); under
   * oom-report.c's lock; freed at finalize), or NULL */
  char *oom_snapshot;
  /* its segment subscribers (segments.c), made at the first subscription, under segments.c's
   * lock */
  MemresSegmentsState *segments;
  MemresStripe stripes[MEMRES_BUFFER_STRIPES];
};
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresResource, kind) <= 64);

/* Stripe @i (1 to MEMRES_BUFFER_STRIPES: a thread's stripe index, _memres_thread.stripe_index) of
 * @mr. The index taken to 64 bits by the - 1, so that the compiler folds the - 1 into the
 * displacement (a 32-bit i - 1 may wrap, and costs an instruction at every count). */
#define MEMRES_STRIPE_AT(mr, i) (&(mr)->stripes[(i) - (gsize) 1])

/* MemresResource.tags_wanted's bits */
#define MEMRES_TAGS_READ  1u /* a layer reads the tag of the record it is given */
#define MEMRES_TAGS_SLEEP 2u /* the stack can sleep: its tagged buffers are kept by tag */

/* The release function of wrapped foreign memory (buffers.h): owned by a buffer of no resource */
typedef struct _MemresRelease MemresRelease;

/* One cache line, allocated 64-byte aligned (buffer.c): an import or allocation and its close
 * touch one line of it, not two. The structure allocated is two lines: the second holds the
 * buffer's link into its tag's list (sleep.h: MemresSleepLink), which only a tagged buffer of a
 * stack that can sleep touches. */
struct _MemresBuffer
{
  gatomicrefcount ref;
  /* @closed (atomic, 16-bit; set exactly once) and the buffer's tag (tags.h; 0: none, set at
   * allocation), one word so that the close's hot path tests both at once (@state == 0: open and
   * untagged) */
  union
  {
    struct
    {
      guint16 closed;
      guint16 tag;
    };
    guint32 state;
  };
  MemresResource *mr; /* strong reference; NULL for wrapped foreign memory */
  MemresAllocation alloc;
  MemresStream dealloc_stream;
  gint device;
  MemresMemoryFlags flags;
  union
  {
    MemresIpcMapping *ipc_mapping; /* mr != NULL: the shared mapping (imported), else NULL */
    MemresRelease *release;        /* mr == NULL (wrapped foreign memory): owned, or NULL */
  };
};
G_STATIC_ASSERT (sizeof (MemresBuffer) <= 64);
/* MemresBuffer.state of an open buffer of tag @tag, and the bits of its closed flag */
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
#define MEMRES_BUFFER_OPEN_STATE(tag) ((guint32) (tag) << 16)
#define MEMRES_BUFFER_CLOSED_BITS     0xffffu
#else
#define MEMRES_BUFFER_OPEN_STATE(tag) ((guint32) (tag))
#define MEMRES_BUFFER_CLOSED_BITS     0xffff0000u
#endif

/* fork.c: whether @mr was made before a fork() in a parent whose driver was initialized
 * (_memres_fork_generation_: incremented in every child of a fork() once the driver is loaded;
 * read it with g_atomic_int_get()).
 * _memres_resource_is_inherited(): @mr was made before the fork in a parent whose driver was
 *   initialized, and its kind is not the embedded host kind: its slots must not be called
 *   (release it without them).
 * _memres_resource_check_usable(): FALSE with MEMRES_ERROR_FORKED naming @what when @mr is
 *   inherited.
 * _memres_fork_set_error(): sets MEMRES_ERROR_FORKED for @what; returns FALSE. */
extern gint _memres_fork_generation_;
gboolean _memres_fork_set_error (GError **error, const char *what);
gboolean _memres_resource_is_inherited_slow (MemresResource *mr);

static inline gboolean
_memres_resource_is_inherited (MemresResource *mr)
{
  return G_UNLIKELY (mr->generation != g_atomic_int_get (&_memres_fork_generation_))
         && _memres_resource_is_inherited_slow (mr);
}

/* inline: one compare on the allocation hot path */
static inline gboolean
_memres_resource_check_usable (MemresResource *mr, const char *what, GError **error)
{
  if (G_LIKELY (!_memres_resource_is_inherited (mr)))
    return TRUE;
  return _memres_fork_set_error (error, what);
}
/* resource.c: the stripes of the allocate/close hot path (see MemresResource.stripes; the
 * calling thread's stripe is _memres_thread.stripe_index); _memres_resource_buffer_gone() counts
 * down a dead resource's buffers, _memres_resource_dead_allocated() counts up one allocated on a
 * dead stripe. */
void _memres_resource_buffer_gone (MemresResource *mr);
void _memres_resource_dead_allocated (MemresResource *mr);

/* counting.c: @delta more (or fewer) bytes in @mr's allocated buffers, on the calling thread's
 * stripe. Each stripe has a quota, and the quotas sum to at most used_high: while every stripe
 * stays within its own, no new peak can have been reached. A stripe that passes its quota sums
 * all stripes (_memres_resource_count_peak()), raises used_high to the sum when it is a new
 * peak, and shares what is left below the mark among the stripes as new quotas. Exact whenever
 * no two threads change the counts at the same instant; under contention the mark may be off by
 * a few allocations either way (memres_resource_get_stats() documents it). @reset: used_high
 * set to the sum. */
void _memres_resource_count_peak (MemresResource *mr, gboolean reset);
guint64 _memres_resource_used_bytes (MemresResource *mr);

/* One writer (a stripe's thread): @n added to *@counter with a plain read-modify-write, no lock
 * prefix; the readers' atomic loads see the aligned 8-byte value whole. On x86-64 one
 * instruction (GCC makes an atomic load, add and store three, and an address computation). */
G_ALWAYS_INLINE static inline void
_memres_plain_add (gint64 *counter, gint64 n)
{
#if defined(__x86_64__)
  __asm__("addq %1, %0" : "+m"(*counter) : "er"(n));
#else
  __atomic_store_n (counter, __atomic_load_n (counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
#endif
}

/* A value of stripe @i (the calling thread's) that only the stripe's thread writes: on a stripe of
 * its own, a plain load (no other thread writes it, and the compiler folds the load into the
 * compare that reads it); on the shared one, an atomic load. */
G_ALWAYS_INLINE static inline gint64
_memres_stripe_value (const gint64 *value, guint i)
{
  if (i != MEMRES_STRIPE_SHARED)
    return *value;
  return __atomic_load_n (value, __ATOMIC_RELAXED);
}

/* Whether the usage on @stripe, stripe @i (the calling thread's), is past its quota (which other
 * threads write: an atomic load). */
G_ALWAYS_INLINE static inline gboolean
_memres_stripe_over_quota (MemresStripe *stripe, guint i)
{
  return _memres_stripe_value (&stripe->set.bytes, i)
         > __atomic_load_n (&stripe->set.bytes_quota, __ATOMIC_RELAXED);
}

/* Counts @buffers more open buffers (1, -1 or 0) and @bytes more bytes (only where the core
 * counts @mr's usage) on stripe @i (the calling thread's, _memres_stripe_current()) of @mr. A
 * thread with a stripe of its own changes it with plain loads and stores, marked busy when it
 * counts buffers (owner-fence.h: no locked instruction on the allocate/close pair) unless @mr's
 * stripes are stopping; the shared stripe, and every stripe's buffers once stopped, with locked
 * instructions. Returns TRUE when a buffer fewer was counted on a dead stripe (the caller then
 * calls _memres_resource_buffer_gone()). */
G_ALWAYS_INLINE static inline gboolean
_memres_stripe_count_on (MemresResource *mr, guint i, gint64 buffers, gint64 bytes)
{
  MemresStripe *stripe = MEMRES_STRIPE_AT (mr, i);
  gint64 n = 0;

  /* a count of bytes alone needs no busy mark: a stripe's bytes have one writer, its thread, and
   * the stop (resource_last_ref()) sums only the buffers */
  if (G_LIKELY (i != MEMRES_STRIPE_SHARED)
      && (buffers == 0 || owner_try_enter_light (&stripe->busy, &mr->stripes_stop)))
    {
      if (buffers != 0) /* a constant at every call: a count of bytes alone touches no count */
        {
          n = __atomic_load_n (&stripe->n, __ATOMIC_RELAXED);
          __atomic_store_n (&stripe->n, n + buffers, __ATOMIC_RELAXED);
        }
      if (bytes != 0)
        _memres_plain_add (&stripe->set.bytes, bytes);
      if (buffers != 0)
        owner_leave_busy (&stripe->busy);
    }
  else
    {
      /* the bytes first: once the count of a close is in @n, the last reference's sum may see the
       * resource without buffers and free it (resource_last_ref()), so the close writes nothing
       * of it after that add */
      if (bytes != 0)
        __atomic_add_fetch (&stripe->set.bytes, bytes, __ATOMIC_RELAXED);
      if (buffers != 0)
        n = __atomic_fetch_add (&stripe->n, buffers, __ATOMIC_ACQ_REL);
      /* a buffer allocated once the stripes are dead (a reference taken again: resource.c's
       * memres_resource_ref()) is not in the sum of the last reference: it counts itself (never
       * on the owner's path above, which a dead stripe's stop flag closes) */
      if (buffers > 0 && G_UNLIKELY (n & MEMRES_STRIPE_DEAD))
        _memres_resource_dead_allocated (mr);
    }
  /* read as the shared stripe's, atomically, on every stripe: GCC lays the pair out worse for
   * the plain load (4 instructions more on a cache>host pair, whose top counts no bytes) */
  if (bytes > 0 && G_UNLIKELY (_memres_stripe_over_quota (stripe, MEMRES_STRIPE_SHARED)))
    _memres_resource_count_peak (mr, FALSE);
  return buffers < 0 && G_UNLIKELY (n & MEMRES_STRIPE_DEAD);
}

/* @bytes more bytes of @mr's usage on stripe @i (the calling thread's), with no busy mark (see
 * above), no call and no check of the quota (the caller checks _memres_stripe_over_quota() after
 * an allocation, and then calls _memres_resource_count_peak()). */
G_ALWAYS_INLINE static inline void
_memres_stripe_add_bytes (MemresResource *mr, guint i, gint64 bytes)
{
  MemresStripe *stripe = MEMRES_STRIPE_AT (mr, i);

  if (G_LIKELY (i != MEMRES_STRIPE_SHARED))
    _memres_plain_add (&stripe->set.bytes, bytes);
  else
    __atomic_add_fetch (&stripe->set.bytes, bytes, __ATOMIC_RELAXED);
}

/* The same on the calling thread's stripe, found only when there is something to count. */
G_ALWAYS_INLINE static inline gboolean
_memres_stripe_count (MemresResource *mr, gint64 buffers, gint64 bytes)
{
  if (!mr->count_usage)
    bytes = 0;
  if (buffers == 0 && bytes == 0)
    return FALSE;
  return _memres_stripe_count_on (mr, _memres_stripe_current (), buffers, bytes);
}

/* @delta more (or fewer) bytes in @mr's buffers (a resize, an upstream's allocation). */
G_ALWAYS_INLINE static inline void
_memres_resource_count_used (MemresResource *mr, gint64 delta)
{
  _memres_stripe_count (mr, 0, delta);
}

/* One more buffer of memres_resource_allocate(), of @size bytes: it keeps @mr alive. */
G_ALWAYS_INLINE static inline void
_memres_resource_add_allocated (MemresResource *mr, gsize size)
{
  _memres_stripe_count (mr, 1, (gint64) size);
}

/* The same on stripe @i (the calling thread's). */
G_ALWAYS_INLINE static inline void
_memres_resource_add_allocated_on (MemresResource *mr, guint i, gsize size)
{
  _memres_stripe_count_on (mr, i, 1, mr->count_usage ? (gint64) size : 0);
}

/* One such buffer fewer, of @size bytes: with the application's last reference gone, maybe the
 * last one. */
G_ALWAYS_INLINE static inline void
_memres_resource_remove_allocated (MemresResource *mr, gsize size)
{
  if (G_UNLIKELY (_memres_stripe_count (mr, -1, -(gint64) size)))
    _memres_resource_buffer_gone (mr);
}

/* resource-slots.c: the calls of the slots that return or take back memory, with their results
 * checked. _memres_resource_call_allocate() is the one way to call the allocate slot; it and
 * _memres_resource_alloc_result() (for resize, import_buffer, import_chunks) refuse a success
 * with address 0, fewer than @size bytes, more than G_MAXSSIZE bytes or a range past the end of
 * the address space (MEMRES_ERROR_FAILED), releasing what the plugin
 * returned through deallocate, and zero @alloc. _memres_resource_call_deallocate() is the one
 * way to call deallocate. */
gboolean _memres_resource_alloc_result_slow (MemresResource *mr, const char *slot, gboolean ok,
                                             GError **local, gsize size, MemresStream stream,
                                             MemresAllocation *alloc, GError **error);

/* Whether @alloc is memory an allocation of @size bytes can have returned: a nonzero address,
 * at least @size and at most G_MAXSSIZE bytes, a range inside the address space. */
static inline gboolean
_memres_allocation_plausible (const MemresAllocation *alloc, gsize size)
{
  return alloc->address != 0 && alloc->size >= size && alloc->size <= G_MAXSSIZE
         && alloc->address <= G_MAXUINT64 - alloc->size;
}

/* Inline: a good result costs a few compares on the allocation hot path, and each layer of a
 * stack pays no call of its own for the check. */
static inline gboolean
_memres_resource_alloc_result (MemresResource *mr, const char *slot, gboolean ok, GError **local,
                               gsize size, MemresStream stream, MemresAllocation *alloc,
                               GError **error)
{
  if (G_LIKELY (ok && *local == NULL && _memres_allocation_plausible (alloc, size)))
    return TRUE;
  return _memres_resource_alloc_result_slow (mr, slot, ok, local, size, stream, alloc, error);
}

/* resource-slots.c: the check of a deallocate call that did not simply succeed (@address: the
 * record's address before the call). A failure with an error that left @alloc->address as it
 * was released nothing; one that set it to 0 released the allocation half-way. A failure without
 * an error, or one that changed the address to another nonzero value, breaks the contract: it is
 * reported (a critical warning, the layer's contract_breaches), @alloc->address set to 0 and
 * the allocation taken as gone, never deallocated again (a leak at worst, never a double free).
 * So after any failure, @alloc->address unchanged means kept, anything else gone. */
gboolean _memres_resource_deallocate_result_slow (MemresResource *mr, gboolean ok, GError **local,
                                                  guint64 address, MemresAllocation *alloc,
                                                  GError **error);

/* A call of @mr's allocate slot, unchecked: the pointer on the resource's first line, the
 * kind's slot, or for a counted layer the core's counted call (resource-slots.c: the slot, or the
 * upstream's for a layer without one, and the counts). */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_slot_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                MemresAllocation *alloc, GError **error)
{
  return mr->allocate (mr, size, stream, alloc, error);
}

/* The same for the deallocate slot. */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_slot_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                                  GError **error)
{
  return mr->deallocate (mr, alloc, stream, error);
}

/* The allocate slot for @size (> 0) bytes. Every caller of the allocate slot goes through here
 * (memres_resource_allocate() and the upstream resources of adaptor kinds). */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_call_allocate (MemresResource *mr, gsize size, MemresStream stream,
                                MemresAllocation *alloc, GError **error)
{
  GError *local = NULL;
  gboolean ok = _memres_resource_slot_allocate (mr, size, stream, alloc, &local);

  return _memres_resource_alloc_result (mr, "allocate", ok, &local, size, stream, alloc, error);
}

/* resource-slots.c: waits for @stream before memory of @mr that is not stream-ordered is freed
 * (memres_cuda_stream_synchronize()); the error names the kind. */
gboolean _memres_resource_wait_stream (MemresResource *mr, MemresStream stream, GError **error);

/* The deallocate slot. For a kind whose memory is device-accessible but not stream-ordered
 * (MemresResource.wait_before_free, one flag on the line the slot pointer is read from) it first
 * waits for @stream; when that fails, the slot is not called and nothing changes. */
G_ALWAYS_INLINE static inline gboolean
_memres_resource_call_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                                  GError **error)
{
  GError *local = NULL;
  guint64 address = alloc->address; /* read after a failure only (the callers keep it too) */
  gboolean ok;

  if (G_UNLIKELY (mr->wait_before_free) && !_memres_resource_wait_stream (mr, stream, error))
    return FALSE;
  ok = _memres_resource_slot_deallocate (mr, alloc, stream, &local);

  if (G_LIKELY (ok && local == NULL))
    return TRUE;
  return _memres_resource_deallocate_result_slow (mr, ok, &local, address, alloc, error);
}

/* The slot calls on a buffer's own allocation record (MemresBuffer.alloc), for buffer.c's
 * allocate and close and buffer-resize.c's growth of an empty buffer: @tagged (a constant where
 * it is inlined) says that the buffer has a tag that @mr's stack wants (MemresResource.tags_wanted,
 * tags.h), and then its record is the thread's call record while the slot runs, so that the
 * counted layers it goes through count it under its tag and the kinds of a stack that can sleep
 * place it by its tag. _memres_buffer_slot_allocate(): the record marked as memres-plugin.h says
 * (MEMRES_ALLOCATION_TAGGED for a tagged record, which a kind reads before it asks for the tag;
 * the tag is read from MemresBuffer.state, set by the caller), then @mr's allocate slot for
 * @size bytes, unchecked (the caller checks the result as _memres_resource_call_allocate() does)
 * with the call record still set, so that a counted layer takes back a refused record's counts
 * under its tag; _memres_buffer_call_end() then clears it. _memres_buffer_call_deallocate(): the
 * checked deallocate slot (_memres_resource_call_deallocate()), the call record set around it. */
G_ALWAYS_INLINE static inline gboolean
_memres_buffer_slot_allocate (MemresBuffer *buf, MemresResource *mr, gsize size,
                              MemresStream stream, gboolean tagged, GError **error)
{
  buf->alloc.address = 0;
  buf->alloc.size = tagged ? MEMRES_ALLOCATION_TAGGED : 0;
  buf->alloc.plugin_data = NULL;
  if (tagged)
    _memres_thread.call_record = &buf->alloc;
  return _memres_resource_slot_allocate (mr, size, stream, &buf->alloc, error);
}

G_ALWAYS_INLINE static inline void
_memres_buffer_call_end (gboolean tagged)
{
  if (tagged) /* no test: NULL already where it was not set */
    _memres_thread.call_record = NULL;
}

G_ALWAYS_INLINE static inline gboolean
_memres_buffer_call_deallocate (MemresBuffer *buf, MemresResource *mr, MemresStream stream,
                                gboolean tagged, GError **error)
{
  gboolean ok;

  if (!tagged)
    return _memres_resource_call_deallocate (mr, &buf->alloc, stream, error);
  _memres_thread.call_record = &buf->alloc;
  ok = _memres_resource_call_deallocate (mr, &buf->alloc, stream, error);
  _memres_thread.call_record = NULL;
  return ok;
}

G_END_DECLS

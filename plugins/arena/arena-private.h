/* memres - CUDA memory resources
 * arena-private.h: what the files of the `arena` kind share: its instance (the reusable cache
 * parts of plugins/common/cache/ first, then the arena's own: the reserved address range, its
 * granules, the free ranges, the slabs of the size classes), and the functions one file calls
 * in another.
 *
 * The files, by job:
 * - arena.c: the kind: options, init and finalize, statistics, counters, trim, the plugin;
 * - arena-granules.c: physical memory: the granule table, the one place that maps granules and
 *   the one place that unmaps them, the runs of adjacent granules one driver call spans, backing
 *   a new extent's granules (a spare's memory, lent, or created), each driver step rolled back on
 *   failure;
 * - arena-unmap.c: taking memory away from addresses: idle granules unmapped (spares for a
 *   remap) or released, a resized buffer's granules moved, lent memory's second mappings and the
 *   reaping of its old addresses, a sleeping tag's granules released and backed again at the wake;
 * - arena-events.c: the events of frees that the arena asks about, per stream in the order they
 *   were recorded (asked oldest first, stopping at the first not done), one event recorded for
 *   many closes on the legacy stream;
 * - arena-segments.c: the segment events (each mapped granule a segment), queued under the lock
 *   and raised without it;
 * - arena-heap.c: the address range: free ranges best-fit with coalescing, tagged by the stream
 *   of their last free, and settling them (after the device's work) into ranges every stream
 *   may use;
 * - arena-runs.c: runs of adjacent free ranges that one stream may use together (its own and
 *   settled ones): the index of the tagged ranges that can be in one, the best run over it, a
 *   window taken across a run; and the full check of the heap's indexes (counter heap_errors);
 * - arena-tree.c: the heap's ordered indexes (best fit, runs, address) as AVL trees whose nodes
 *   live in the ranges;
 * - arena-stable.c: place=stable: a stream's large requests placed best fit over the runs of its
 *   own and settled free ranges as one, whenever its events complete; lending past a slack only;
 * - arena-resize.c: resize, in place where the range allows, else a move (remapping the whole
 *   granules, copying the bytes of the two end ones);
 * - arena-export.c: the buffers with physical memory of their own, outside the granule table:
 *   exportable ones (handle_type=posix_fd) and imports, and the IPC slots;
 * - arena-lend.c: the physical memory of whole granules freed on a stream lent to that stream's
 *   next allocation at a second address while the free drains (the donors picked, the old
 *   addresses taken out of the free ranges until their unmap, the new granules' other bytes
 *   tagged with the stream; arena-unmap.c maps and unmaps); and an extent's end granule
 *   shared with a granule still in use whose bytes there are the stream's free ones (Shared);
 * - arena-sleep.c: sleep and wake (docs/sleep.md): the granules only sleeping buffers hold
 *   released, and created and mapped again at the wake (arena-unmap.c does the driver work);
 * - arena-headroom.c: the remap headroom: granules created rather than moved once moving them
 *   was undone (a refault), within a bound over the peak of granules in use;
 * - arena-park.c: large closes parked by size (deferred coalescing): the next allocation of that
 *   size on the stream takes the extent back without heap work or a driver call; flushed into
 *   the heap before the arena maps a granule, and at trim, sleep, resize, snapshot and finalize;
 * - arena-alloc.c: allocate and close: small requests through the cache parts' fronts and shared
 *   bins, carved from slabs of the range; large requests best-fit in the range; the
 *   out-of-memory flush.
 *
 * Tags (docs/arena.md). A granule with held bytes serves one tag (Arena.gtag: the tag of the
 * buffers in it, untagged its own class), and so does a slab (Chunk.tag, Block.tag): placement
 * never puts bytes of one tag in a granule that holds another's (arena-heap.c's
 * arena_granule_serves()), so that a tag's sleep can release whole granules (arena-sleep.c).
 *
 * Memory model. Reservations of address space (`reserve` bytes at init, more when no free range
 * holds a request), one granule table over them all. Every byte of them is either
 * free and settled (a range in the heap with no stream tag: no queued work touches it), free and
 * tagged (a range freed on a stream, reusable at once on that stream only), or in use (a large
 * buffer, or a slab of size-class blocks). A granule's `held` count is its bytes that are not
 * free and settled; a granule with held bytes is always mapped; a mapped granule with none is
 * idle, and its physical memory may be unmapped and mapped wherever a new allocation needs it
 * (a remap) instead of creating more. So the arena never creates physical memory while a
 * granule is idle, and its physical peak is the peak of granules with held bytes.
 *
 * Locking: parts.lock guards everything below the parts too. */
#pragma once

#include "../common/cache/cache-parts.h"
#include "arena-tree.h"

#define ARENA_ALIGN 512 /* bytes: every large buffer and slab starts at a multiple */

/* One heap extent (a range of the reservation): a free range, or a large buffer's plugin data. */
typedef struct _Range
{
  guint64 addr;
  guint64 size;
  MemresStream tag;  /* free ranges: NULL settled, else the stream of the last free */
  CacheEvent *event; /* tagged ranges: recorded on @tag after the last free */
  /* free ranges, while in the heap's tables (arena-runs.c): */
  struct _Range *before; /* the free range that ends where it starts, or NULL */
  struct _Range *after;  /* the free range that starts where it ends, or NULL */
  gboolean in_run;       /* in Arena.run_tree */
  guint dirty_at;        /* its index in Arena.run_dirty plus one; 0: not there */
  guint32 visit;         /* the arena_runs_best_fit() that last walked its run */
  /* its places in Arena.free_tree, run_tree (while in_run) and addr_tree (arena-tree.h) */
  ArenaTreeNode fit_node, run_node, addr_node;
} Range;

/* <0, 0 or >0 as @x comes before, with or after @y in @order (arena-tree.h): by tag (the stream's
 * handle), size and address for ARENA_ORDER_FIT, the best-fit order; by address alone for
 * ARENA_ORDER_ADDR. */
static inline gint
arena_range_order (ArenaOrder order, const Range *x, const Range *y)
{
  if (order == ARENA_ORDER_FIT)
    {
      if (x->tag != y->tag)
        return (guintptr) x->tag < (guintptr) y->tag ? -1 : 1;
      if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    }
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* One reservation of address space: its granules are [first, first + size / granularity) of the
 * arena's granule table. */
typedef struct
{
  CUdeviceptr base;
  guint64 size;
  guint first;
} Reservation;

/* A segment event waiting to be raised (a granule mapped, or about to be unmapped). */
typedef struct
{
  guint64 base;
  MemresSegmentEvent event;
  guint tag; /* the tag its granule serves (Arena.gtag) when queued */
} PendingEvent;

/* A granule whose physical memory was lent (arena-lend.c): mapped at @g, its old address, until
 * @event (recorded on the stream it was lent to, after its free; NULL: done already) is done
 * (cuEventQuery, arena_lend_reap()); its bytes belong to no free range and no buffer meanwhile
 * (held, never idle). */
typedef struct
{
  guint g;
  CacheEvent *event;
  MemresStream stream; /* the stream @event belongs to (its line, arena-events.c) */
} Retired;

/* Closes on the legacy stream that share one event at most (arena-events.c). */
#define ARENA_CLOSES_PER_EVENT 16

/* The events of one stream that the arena asks about, in the order they were recorded
 * (arena-events.c). */
typedef struct
{
  MemresStream stream;
  GQueue recorded;       /* CacheEvent *, oldest first, a reference each; known done: out */
  CacheEvent *pending;   /* the legacy stream's: the event the closes since the last record hold,
                          * not recorded yet (CUevent NULL; a reference of the line's), or NULL */
  guint n_pending;       /* closes @pending covers */
  guint64 pending_bytes; /* free bytes waiting for it (arena_close_event()) */
  guint pruned;          /* length of @recorded after its last pruning (arena-events.c) */
  guint not_done;        /* reaps in a row that found the oldest not done */
  guint skip;            /* reaps that do not ask before the next one does (arena-events.c) */
} StreamLine;

/* A granule @to mapped with the memory of granule @from by the placement in progress: all of
 * it (@hi 0), or only the bytes [lo, hi) of the granule (offsets), which the extent covers and
 * which lie free in one of @from's ranges tagged with the stream (a shared granule). */
typedef struct
{
  guint to, from;
  guint64 lo, hi;
} LentPair;

/* A granule's memory mapped at two addresses that use different bytes of it (arena-lend.c): at
 * @to, an extent's bytes [lo, hi) (offsets in the granule), its other bytes withheld; at @from,
 * the donor, the other bytes, its bytes [lo, hi) withheld. Both stay held (never idle) until
 * every other byte of @from is free on @stream or settled; then @from's address is retired as
 * a lent granule's, and @to's withheld bytes become free, tagged @stream. */
typedef struct
{
  guint to, from;
  guint64 lo, hi;
  MemresStream stream;
} Shared;

/* A large extent closed and parked (arena-park.c): free, out of the heap, for the next allocation
 * of its size on its stream. */
typedef struct _Parked Parked;
struct _Parked
{
  guint64 addr, size;
  MemresStream stream;      /* the close's (normalized; never NULL nor the per-thread stream) */
  CacheEvent *event;        /* recorded on @stream after the close; NULL on the legacy stream */
  guint tag;                /* the tag its granules serve (Arena.gtag) */
  Parked *next;             /* its size's list (newest first), or the pool of spare structs */
  struct _ParkedList *list; /* its size's list */
  Parked *older, *newer;    /* every parked extent in the order of their closes */
};

/* The parked extents of one size, newest first (Arena.parked's values): kept empty after they
 * go, as the mark of a size closed before (arena-park.c). */
typedef struct _ParkedList
{
  Parked *head;
} ParkedList;

/* The most extents parked at once (arena_park(): a close past it flushes them all first); the
 * most sizes remembered (a close of a new size past it flushes them all and forgets the sizes). */
#define ARENA_PARKED_MAX   4096
#define ARENA_PARKED_SIZES 4096

/* A slab: one extent carved into n_blocks blocks of one class. */
struct _Chunk
{
  guint64 addr, size;
  Chunk *prev, *next;
  guint n_blocks;
  guint n_idle;
  guint8 tag;      /* the tag its blocks serve (cache_tag_index(), 0 untagged) */
  gboolean asleep; /* its tag sleeps: counted in Arena.asleep, never returned to the range */
  Block blocks[];
};

/* A physical allocation of an OwnBuf. */
typedef struct
{
  CUmemGenericAllocationHandle handle;
  guint64 size;
} OwnChunk;

/* A buffer with physical memory of its own at a reservation of its own (arena-export.c): an
 * exportable buffer (one chunk) or an import (the exporter's chunks); its plugin data. */
typedef struct _OwnBuf OwnBuf;
struct _OwnBuf
{
  OwnBuf *prev, *next;
  CUdeviceptr base;
  guint64 bytes; /* reserved and mapped: the chunks' sum */
  guint64 used;  /* exportable: the bytes counted as used (arena_round() of the size) */
  gboolean imported;
  gboolean exported;                     /* under parts.lock: exported once (it cannot sleep) */
  CUmemAllocationHandleType handle_type; /* an import's: the handles it was imported from */
  guint n;
  OwnChunk chunks[];
};

typedef struct
{
  CacheParts parts; /* first: the fast path reads its start */
  MemresResource *mr;
  const MemresCudaDriver *drv;
  gint device;
  CUmemAllocationProp prop;
  CUmemAccessDesc access;
  gsize granularity;
  guint granule_shift;
  gsize chunk_size;      /* bytes of a slab of the chunk classes */
  guint n_chunk_classes; /* classes carved from slabs of chunk_size */
  guint64 release_threshold;
  gboolean exportable; /* handle_type=posix_fd or fabric */
  gboolean fabric;     /* handle_type=fabric, granted by the driver (else POSIX fds) */
  guint64 export_min;  /* with it: large requests of at least this get memory of their own */
  CUmemAllocationProp own_prop; /* prop with the handle type of exportable buffers */
  gboolean eager_settle;        /* settle=eager (arena-heap.c extent_place()) */
  gboolean heap_check;          /* check=true: the counters add heap_errors */
  gboolean stable_place;        /* place=stable (arena-stable.c) */

  /* the reservations: the first at init, more when the address space runs out (under
   * parts.lock after init) */
  Reservation *resv;
  guint n_resv;
  guint64 va_size;  /* bytes of them all */
  guint n_granules; /* granules of them all */

  /* under parts.lock */
  guint64 *held; /* per granule: bytes not free and settled */
  guint8 *gtag;  /* per granule: the tag its held bytes serve (cache_tag_index(); when held) */
  CUmemGenericAllocationHandle *handle; /* per granule: its physical memory, 0 when unmapped */
  guint64 *mapped_bits; /* bit g: handle[g] != 0 (arena_handle_set()), for arena_span_unbacked() */
  guint8 *in_idle;      /* per granule: on the idle stack */
  guint32 *idle;        /* stack of granules that were idle when pushed */
  guint n_idle_stack;
  CUmemGenericAllocationHandle *spare; /* physical memory unmapped from idle granules */
  guint n_spare;
  guint want_unmap;       /* set by arena_span_hold(): idle granules to unmap before it can hold */
  guint keep_lo, keep_hi; /* with want_unmap: the granules of the span, not to be unmapped */
  guint idle_tag;    /* arena_release_idle_tag(): only idle granules that last served it (gtag) are
                      * unmapped; CACHE_TAG_ANY otherwise */
  gboolean no_unmap; /* arena_span_hold() creates rather than asking for unmaps */
  GArray *pending;   /* PendingEvent, in the order of the driver calls */
  /* lending (arena-lend.c): set by arena_extent_new() for the placement in progress */
  MemresStream lend_stream; /* the allocating stream whose own freed granules may be lent */
  guint64 lend_lo, lend_hi; /* the extent being placed: no donor granule overlaps it */
  GArray *lend_donors;      /* guint: granules picked to lend, not mapped yet */
  GArray *lent;             /* LentPair: mapped by this placement, committed or undone after */
  CacheEvent *lend_event;   /* recorded on lend_stream for this placement */
  GArray *retired;          /* Retired: old addresses of lent memory, unmapped once drained */
  guint8 *retired_at;       /* per granule: 1 while on @retired */
  guint8 *lent_away;        /* per granule: 1 once its memory was lent away and its address
                             * unmapped at the reap (never lent to again by a no_lend placement) */
  guint64 lent_granules;    /* counter granules_lent */
  guint64 reaped_granules;  /* counter granules_reaped: old addresses unmapped */
  GArray *shared;           /* Shared: granules mapped at two addresses, bytes split */
  guint8 *shared_at;        /* per granule: 1 the second address of a Shared (@to), 2 the donor */
  guint64 shared_granules;  /* counter granules_shared */
  /* per granule: 1 while its "about to be unmapped" event is on its way with parts.lock dropped
   * (arena-unmap.c's unmapping_raise()): an allocation may take bytes of it meanwhile (idle or
   * sleeping granules), but no event of its own may be raised for it (it is neither lent nor
   * moved) */
  guint8 *unmapping;
  guint n_mapped, n_idle_mapped, mapped_high;
  /* the remap headroom (arena-headroom.c) */
  guint8 *moved_away;  /* per granule: ARENA_MOVED once its memory was unmapped to back another */
  guint held_high;     /* the peak of granules in use (mapped, not idle) */
  guint headroom;      /* granules that may be created over held_high rather than moved */
  guint64 refaulted;   /* counter granules_refaulted */
  GHashTable *lines;   /* MemresStream: its StreamLine (arena-events.c) */
  ArenaTree free_tree; /* Range, by (tag, size, addr): best fit per tag */
  ArenaTree run_tree;  /* Range, by (tag, size, addr): the tagged free ranges with a neighbour
                        * in a run (arena-runs.c), each with in_run set, once run_dirty's are
                        * brought in or out */
  Range **run_dirty;   /* ranges whose place in run_tree may have changed */
  guint n_run_dirty, run_dirty_size;
  guint32 run_visit;     /* the arena_runs_best_fit() calls so far (Range.visit) */
  Range *range_pool[32]; /* Range structs freed, kept for the next free range (arena-heap.c) */
  guint n_range_pool;
  ArenaTree addr_tree;  /* Range, by address: the range holding an address, a free's neighbours */
  guint64 tagged_bytes; /* bytes of free ranges with a tag */
  guint64 large_used;   /* bytes of live large buffers */
  guint64 slab_bytes;   /* bytes of slabs (class bytes of their blocks) */
  guint64 event_bytes;  /* option event_bytes: ARENA_CLOSES_PER_EVENT's bytes rule (0: none) */
  guint64 used_high;    /* the statistics' used_high: lowered by a reset, raised by a stats read */
  guint64 used_peak;    /* the most bytes in use at an allocation since the arena was made, what
                         * placement decisions read (arena_stable_may_lend()): neither a stats reset
                         * nor a read changes a decision */
  Chunk *chunks;
  guint64 created, remapped, released, settles, oom_flushes, misses, large_allocs;
  guint64 moved;          /* granules whose memory a resize moved (remapped, not copied) */
  guint64 va_refused;     /* bytes of address space the driver last refused to reserve (0: none) */
  guint64 run_takes;      /* extents placed across a stream's own freed ranges and settled ones */
  guint64 stable_high;    /* place=stable: the most bytes of extents live at a placement, never
                           * reset (arena-stable.c stable_length()) */
  OwnBuf *owns;           /* buffers of their own memory (their granules count in n_mapped) */
  guint64 own_used;       /* bytes of the exportable ones counted as used */
  guint64 imported_bytes; /* bytes mapped from other processes */
  guint64 exportables, exports;

  /* sleep (arena-sleep.c), under parts.lock: per granule, its held bytes that belong to
   * sleeping buffers (NULL until the first sleep); a granule without memory whose held bytes are
   * all asleep is one a sleep released. The large extents asleep, by address (NULL until then). */
  guint64 *asleep;
  GHashTable *asleep_large;
  guint n_asleep[MEMRES_TAGS_MAX + 1]; /* per tag: its sleeping buffers (extents and blocks) */
  guint64 parked_bytes; /* free blocks of sleeping slabs, parked (in slab_bytes, not in use) */

  /* large closes parked by size (arena-park.c; option park), under parts.lock */
  gboolean park;
  GHashTable *parked;                    /* size (bytes) -> ParkedList */
  Parked *parked_oldest, *parked_newest; /* by close */
  Parked *parked_pool;                   /* spare structs */
  guint n_parked;
  guint64 parked_large;  /* bytes of the parked extents (held, not in use) */
  guint64 parked_legacy; /* bytes of them closed on the legacy stream */
  guint64 park_hits, park_flushes;
  gboolean no_lend; /* the placement in progress is of a size closed before: lends nothing to a
                     * granule whose memory was lent away before (lent_away) */

  /* segment events (arena-segments.c): queued under parts.lock, raised without it */
  GMutex ev_lock;    /* taken before parts.lock; held while events are raised */
  GThread *ev_owner; /* under ev_lock: the thread raising (a callback that allocates here) */
  gint in_flight;    /* atomic: events queued and not yet delivered */
} Arena;

/* @size rounded up to ARENA_ALIGN: the bytes of a large buffer's extent. */
static inline guint64
arena_round (guint64 size)
{
  return (size + ARENA_ALIGN - 1) & ~(guint64) (ARENA_ALIGN - 1);
}

/* The reservation address @addr lies in (one, nearly always: a short search otherwise). */
static inline const Reservation *
arena_reservation_of (const Arena *self, guint64 addr)
{
  for (guint i = self->n_resv; i-- > 1;)
    if (addr - self->resv[i].base < self->resv[i].size)
      return &self->resv[i];
  return &self->resv[0];
}

/* The granule index of address @addr of a reservation. */
static inline guint
arena_granule (const Arena *self, guint64 addr)
{
  const Reservation *r = arena_reservation_of (self, addr);

  return r->first + (guint) ((addr - r->base) >> self->granule_shift);
}

/* Granule @g's physical memory from now on (0: none), its bit in mapped_bits with it: every
 * write of Arena.handle goes through here. */
static inline void
arena_handle_set (Arena *self, guint g, CUmemGenericAllocationHandle h)
{
  guint64 bit = G_GUINT64_CONSTANT (1) << (g % 64);

  self->handle[g] = h;
  if (h != 0)
    self->mapped_bits[g / 64] |= bit;
  else
    self->mapped_bits[g / 64] &= ~bit;
}

/* The address of granule @g. */
static inline CUdeviceptr
arena_granule_address (const Arena *self, guint g)
{
  guint i = self->n_resv - 1;

  while (i > 0 && self->resv[i].first > g)
    i--;
  return self->resv[i].base + ((guint64) (g - self->resv[i].first) << self->granule_shift);
}

/* Whether granule @g may hold bytes of tag @tag (cache_tag_index(), 0 untagged) when the free
 * bytes [lo, hi) around it are taken: it serves @tag already, holds nothing, or lies wholly in
 * those free bytes (then nothing else is in it). Tag-aware placement (docs/arena.md): a granule
 * serves one tag, so that a tag's sleep can release whole granules. */
static inline gboolean
arena_granule_serves (const Arena *self, guint g, guint64 lo, guint64 hi, guint tag)
{
  guint64 ga;

  if (self->gtag[g] == tag || self->held[g] == 0)
    return TRUE;
  ga = arena_granule_address (self, g);
  return lo <= ga && ga + self->granularity <= hi;
}

/* Whether [a, a + size), inside the free bytes [lo, hi), may serve @tag: its end granules (the
 * others lie wholly in the free bytes). Inline: a placement asks it of every window it weighs. */
static inline gboolean
arena_heap_window_serves (const Arena *self, guint64 a, guint64 size, guint64 lo, guint64 hi,
                          guint tag)
{
  return arena_granule_serves (self, arena_granule (self, a), lo, hi, tag)
         && arena_granule_serves (self, arena_granule (self, a + size - 1), lo, hi, tag);
}

/* Bytes in use: large buffers and blocks handed out, with @fronts_cached bytes of free blocks
 * in the fronts (cache_fronts_cached(), or _exact() for the statistics); the free blocks of the
 * shared bins and those parked while their tag sleeps are not in use. Lock held. */
static inline guint64
arena_used_with (Arena *self, guint64 fronts_cached)
{
  guint64 cached = self->parts.shared_cached + fronts_cached + self->parked_bytes;

  return self->large_used + self->own_used
         + (self->slab_bytes > cached ? self->slab_bytes - cached : 0);
}

/* The same, the fronts' bytes as counted without stopping them. Lock held. */
static inline guint64
arena_used (Arena *self)
{
  return arena_used_with (self, cache_fronts_cached (&self->parts));
}

/* After a call that may have raised the bytes in use: the peaks (used_high, used_peak) raised
 * with them. Lock held. */
static inline void
arena_used_note (Arena *self)
{
  guint64 used = arena_used (self);

  self->used_high = MAX (self->used_high, used);
  self->used_peak = MAX (self->used_peak, used);
}

/* arena-granules.c */
gboolean arena_granules_init (Arena *self, GError **error);
void arena_granules_grow (Arena *self, guint n);
void arena_granules_clear (Arena *self);
typedef gboolean (*ArenaGranuleTest) (const Arena *self, guint g);
guint arena_granule_run (Arena *self, const guint *gs, guint n, guint i, ArenaGranuleTest also);
gboolean arena_granule_map (Arena *self, guint g, CUmemGenericAllocationHandle h, gboolean grant,
                            GError **error);
gboolean arena_granules_grant (Arena *self, const guint *gs, guint n, GError **error);
CUresult arena_granules_unmap (Arena *self, guint g, guint n);
void arena_granule_roll_back (Arena *self, guint g, gboolean keep, const char *what);
gboolean arena_granule_back (Arena *self, guint g, gboolean *moved, gboolean grant, GError **error);
void arena_idle_push (Arena *self, guint g);
void arena_span_count (Arena *self, guint64 addr, guint64 size, gint sign);
gboolean arena_span_hold (Arena *self, guint64 addr, guint64 size, GError **error);
void arena_span_drop (Arena *self, guint64 addr, guint64 size);
void arena_span_claim (Arena *self, guint64 addr, guint64 size);
guint arena_span_unbacked (Arena *self, guint64 addr, guint64 size);
guint64 arena_span_mapped_bytes (Arena *self, guint64 addr, guint64 size, guint *idle);
void arena_spares_release (Arena *self);
gboolean arena_reserve_more (Arena *self, guint64 size, GError **error);
void arena_reservations_drop_empty (Arena *self, guint keep);

/* arena-headroom.c */
/* Arena.moved_away: a granule's memory was unmapped to back another (a refault if it needs
 * memory again); its refault raised the headroom, not yet served */
#define ARENA_MOVED      1
#define ARENA_REFAULTING 2
void arena_headroom_note (Arena *self, guint g0, guint g1);
void arena_headroom_done (Arena *self, guint g0, guint g1);
gboolean arena_headroom_allows (const Arena *self, guint extra);
void arena_headroom_held (Arena *self);
void arena_headroom_reset (Arena *self);
gboolean arena_headroom_refused (Arena *self, GError **local);

/* arena-events.c */
void arena_lines_init (Arena *self);
void arena_lines_clear (Arena *self);
CacheEvent *arena_close_event (Arena *self, MemresStream stream, guint64 waiting, GError **error);
CacheEvent *arena_stream_event (Arena *self, MemresStream stream, GError **error);
gboolean arena_event_record (Arena *self, CacheEvent *e);
gboolean arena_line_poll (Arena *self, MemresStream stream, gboolean reaping, CacheEvent *upto);
void arena_lines_all_done (Arena *self);

/* Whether the work before @e (NULL: none) is known done (an arena_line_poll() found it, or a
 * wait for the device). */
static inline gboolean
arena_event_done (const CacheEvent *e)
{
  return e == NULL || e->done;
}

/* arena-segments.c */
void arena_segment_queue (Arena *self, MemresSegmentEvent event, guint g);
void arena_segment_withdraw (Arena *self, guint g);
void arena_events_flush (Arena *self);

/* arena-unmap.c */
gboolean arena_unmap_idle (Arena *self, guint n, gboolean release, GError **error);
gboolean arena_release_idle (Arena *self, guint64 keep_bytes, GError **error);
gboolean arena_release_idle_tag (Arena *self, guint tag, GError **error);
gboolean arena_granules_release_all (Arena *self);
gboolean arena_granules_move (Arena *self, guint from, guint to, guint n, GError **error);
gboolean arena_granules_sleep (Arena *self, const guint *gs, guint n, GError **error);
gboolean arena_granules_wake (Arena *self, const guint *gs, guint n, GError **error);
gboolean arena_granule_lend (Arena *self, guint g, guint from, guint64 lo, guint64 hi,
                             GError **error);
gboolean arena_granule_unlend (Arena *self, guint g);
void arena_lend_reap (Arena *self);

/* arena-lend.c */
void arena_lend_init (Arena *self);
void arena_lend_clear (Arena *self);
guint arena_lend_pick (Arena *self, guint n);
void arena_lend_commit (Arena *self, guint64 addr, guint64 size);
void arena_lend_abort (Arena *self);
gint arena_lend_pick_part (Arena *self, guint g, guint64 lo, guint64 hi);
void arena_shared_resolve (Arena *self, MemresStream stream, CacheEvent *event, guint64 lo,
                           guint64 hi);

/* The granules whose physical memory can back others without creating any: idle, or spare. */
static inline guint
arena_reusable (const Arena *self)
{
  return self->n_idle_mapped + self->n_spare;
}

/* arena-heap.c */
void arena_heap_init (Arena *self);
void arena_heap_clear (Arena *self);
void arena_heap_insert (Arena *self, guint64 addr, guint64 size, MemresStream tag,
                        CacheEvent *event);
Range *arena_heap_best_fit (Arena *self, MemresStream tag, guint64 size);
gboolean arena_heap_window (Arena *self, Range *r, guint64 size, guint tag, gboolean at_end,
                            guint64 *addr);
Range *arena_heap_fit_serving (Arena *self, MemresStream stream, guint64 size, guint tag,
                               guint64 *addr);
Range *arena_heap_range_at (Arena *self, guint64 a);

/* arena-stable.c */
gint arena_stable_place (Arena *self, guint64 size, gboolean slab, MemresStream tag, guint owner,
                         gboolean settled, guint64 *addr, GError **error);
gboolean arena_stable_may_lend (Arena *self, guint n);
guint64 arena_heap_take (Arena *self, Range *r, guint64 size, gboolean at_end);
guint64 arena_heap_take_at (Arena *self, Range *r, guint64 addr, guint64 size);
gboolean arena_heap_settle (Arena *self, gboolean wait, GError **error);
gboolean arena_heap_settle_tag (Arena *self, guint owner, GError **error);
gboolean arena_extent_new (Arena *self, guint64 size, gboolean slab, MemresStream tag, guint owner,
                           guint64 *addr, GError **error);
void arena_span_serve (Arena *self, guint64 addr, guint64 size, guint owner);
void arena_placement_begin (Arena *self, guint64 addr, guint64 size, guint owner);
guint64 arena_heap_largest_servable (Arena *self);
gboolean arena_heap_take_congruent (Arena *self, guint64 addr, guint64 old_size, guint64 new_size,
                                    guint64 *at);
gboolean arena_heap_grow_in_place (Arena *self, guint64 addr, guint64 old_size, guint64 new_size,
                                   MemresStream tag, GError **error);
gboolean arena_extent_free (Arena *self, guint64 addr, guint64 size, MemresStream tag,
                            GError **error);
void arena_range_unlink (Arena *self, Range *r);
void arena_range_free (Arena *self, Range *r);

/* arena-runs.c */
void arena_runs_init (Arena *self);
void arena_runs_index (Arena *self, Range *r, gboolean in);
void arena_runs_grow (Arena *self);
typedef void (*ArenaRunFunc) (Arena *self, Range *first, Range *last, gpointer data);
/* The best window found so far by a walk of runs (arena_runs_best_fit(), arena-stable.c's
 * stable_fit()): for a request of @size bytes serving tag @owner (@slab: a slab's), at @at in
 * the run of length @best_run (as the walk counts it), @unbacked granules to back, its first
 * byte in @from; @best_front: the window starts the run in the stream's own free bytes. */
typedef struct
{
  guint64 size;
  guint owner;
  gboolean slab, found, best_front;
  guint64 best_run, at;
  guint unbacked;
  Range *from;
} ArenaRunChoice;
void arena_runs_foreach (Arena *self, MemresStream tag, ArenaRunFunc fn, gpointer data);
Range *arena_runs_range_of (Range *first, guint64 at);
gboolean arena_runs_best_fit (Arena *self, MemresStream tag, guint64 size, guint owner,
                              guint64 *addr, Range **from, guint *unbacked);
gboolean arena_runs_take (Arena *self, Range *from, guint64 addr, guint64 size, GError **error);
Range *arena_runs_neighbour (const Arena *self, const Range *r, MemresStream tag, gboolean left);
guint64 arena_heap_check (Arena *self);

/* arena-alloc.c */
gboolean arena_allocate (MemresResource *mr, gsize size, MemresStream stream,
                         MemresAllocation *alloc, GError **error);
gboolean arena_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                           GError **error);
gboolean arena_flush (Arena *self, GError **error);
gboolean arena_allocate_for (MemresResource *mr, gsize size, MemresStream stream, guint tag,
                             MemresAllocation *alloc, GError **error);
guint arena_tag_of (Arena *self, const MemresAllocation *alloc);

/* arena-park.c */
void arena_park_init (Arena *self);
void arena_park_clear (Arena *self);
gboolean arena_park (Arena *self, guint64 addr, guint64 size, MemresStream stream);
gboolean arena_park_take (Arena *self, guint64 size, MemresStream stream, guint tag, guint64 *addr,
                          gboolean *seen);
void arena_park_flush (Arena *self);
gboolean arena_park_miss_place (Arena *self, guint64 size, MemresStream stream, guint tag,
                                guint64 *addr);

/* arena-snapshot.c: the snapshot slot */
void arena_snapshot (MemresResource *mr, MemresSnapshotLayer *layer);

/* arena-export.c */
gboolean arena_own_allocate (Arena *self, gsize size, MemresAllocation *alloc, GError **error);
gboolean arena_own_free (Arena *self, MemresAllocation *alloc, MemresStream stream, GError **error);
void arena_own_release_all (Arena *self);
gboolean arena_export_chunks (MemresResource *mr, const MemresAllocation *alloc,
                              MemresBufferChunks *out, GError **error);
gboolean arena_export_fabric_chunks (MemresResource *mr, const MemresAllocation *alloc,
                                     MemresBufferChunks *out, MemresFabricHandle *handles,
                                     GError **error);
gboolean arena_import_fabric_chunks (MemresResource *mr, const MemresBufferChunks *in,
                                     const MemresFabricHandle *handles, MemresStream stream,
                                     MemresAllocation *alloc, GError **error);
gboolean arena_import_chunks (MemresResource *mr, const MemresBufferChunks *in, MemresStream stream,
                              MemresAllocation *alloc, GError **error);

/* Whether a large buffer's allocation is one of arena-export.c's (else a heap extent). */
static inline gboolean
arena_is_own (const MemresAllocation *alloc)
{
  return alloc->plugin_data != NULL;
}

/* Whether a request of @size bytes gets memory of its own (an exportable buffer). */
static inline gboolean
arena_wants_own (const Arena *self, guint64 size)
{
  return self->exportable && size > self->parts.max_block && size >= self->export_min;
}

/* arena-sleep.c: the sleep and wake slots; a large extent's close while it sleeps */
gboolean arena_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                      GError **error);
gboolean arena_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                     GError **error);
gboolean arena_sleep_forget (Arena *self, guint64 addr, guint64 size);
void arena_sleep_block_closed (Arena *self, Block *b);

/* Block.size of a sleeping block (arena-sleep.c): larger than any front's budget, so that the
 * close's hit path never keeps it and deallocate_general() sees it */
#define ARENA_BLOCK_ASLEEP (G_MAXUINT64 / 4)

/* arena-resize.c */
gboolean arena_resize (MemresResource *mr, MemresAllocation *alloc, gsize new_size,
                       MemresStream stream, GError **error);

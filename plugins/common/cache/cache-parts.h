/* memres - CUDA memory resources
 * cache-parts.h: the types and functions of the parts of a size-class cache that a kind reuses
 * instead of copying them (the `cache` adaptor and the `arena` kind): blocks, the
 * per-thread front caches (their inline fast path at the end of this header; the rest in
 * cache-fronts.c), and the shared bins with the events of cross-stream reuse (cache-bins.c).
 *
 * The parts do not know where a block's memory comes from. A kind embeds CacheParts first in
 * its instance, makes its blocks (from an upstream resource, a chunk, a granule run: Block.chunk
 * and Block.up are the kind's), counts its own reserve and gives memory back; the parts keep
 * free blocks, per class, in the fronts and the shared bins, and order their reuse across
 * streams with events. Class sizes are the kind's too: the parts only index bins by class and
 * add up Block.size.
 *
 * Built as a static library with hidden symbols (meson.build here), linked into each plugin that
 * uses it: each plugin has its own copy of the thread-local fronts, the slot table and the
 * owner-fence state, as if the code were its own.
 *
 * Locking: CacheParts.lock guards the shared bins, the lease, the list of fronts, the spare
 * events, and whatever the kind puts under it. A front is its owner thread's without a lock on
 * the fast path (the fast path's section below says how another thread takes it). Functions that
 * say "lock held" want CacheParts.lock held. */
#pragma once

#include <memres/memres-plugin.h>

#include <pthread.h>

/* one owner-fence state for every file of the plugin (defined in cache-fronts.c): the owner's
 * inline fast path must read the flag that owner_fence_init() set */
#define OWNER_FENCE_SHARED
#include "../../../sdk/owner-fence.h"
#include "cache-classes.h"

#define CACHE_FRONT_MAX     16  /* most blocks per class in a front cache */
#define CACHE_MAX_CLASSES   176 /* classes up to 4 GiB */
#define CACHE_SLOTS         64  /* instances with front caches at once, per plugin */
#define CACHE_LEASE_QUANTUM (G_GUINT64_CONSTANT (8) << 20)

/* The intrusive doubly linked lists of the parts and their kinds (CacheParts.fronts,
 * SharedBin.head, a kind's chunks): @node, whose struct has prev and next, pushed at the front
 * of the list that starts at @head, or unlinked from it (@node's own links left as they were). */
#define LIST_PUSH(head, node)                                                                      \
  G_STMT_START                                                                                     \
  {                                                                                                \
    (node)->prev = NULL;                                                                           \
    (node)->next = (head);                                                                         \
    if ((node)->next != NULL)                                                                      \
      (node)->next->prev = (node);                                                                 \
    (head) = (node);                                                                               \
  }                                                                                                \
  G_STMT_END
#define LIST_UNLINK(head, node)                                                                    \
  G_STMT_START                                                                                     \
  {                                                                                                \
    if ((node)->prev != NULL)                                                                      \
      (node)->prev->next = (node)->next;                                                           \
    else                                                                                           \
      (head) = (node)->next;                                                                       \
    if ((node)->next != NULL)                                                                      \
      (node)->next->prev = (node)->prev;                                                           \
  }                                                                                                \
  G_STMT_END

typedef struct _CacheParts CacheParts;
typedef struct _Block Block;
typedef struct _Chunk Chunk; /* the kind's: what blocks are carved from (opaque here) */
typedef struct _Front Front;

/* An event recorded once on a stream, shared by the blocks freed (or carved) before it. */
typedef struct
{
  CUevent event; /* NULL: the kind's, not recorded yet (the `arena`'s legacy stream) */
  guint refs;    /* under CacheParts.lock */
  gboolean done; /* the kind's: known to be done (the `arena` asks, arena-events.c) */
} CacheEvent;

struct _Block
{
  guint64 address;
  MemresStream stream; /* normalized stream of its last free (or of its chunk's allocation) */
  CacheEvent *event;   /* shared bins only: recorded on @stream after that free, or NULL */
  Block *prev, *next;  /* shared bin (and the kind's lists of blocks on their way out) */
  Chunk *chunk;        /* the kind's: the chunk it was carved from, or NULL */
  MemresAllocation up; /* the kind's: its own upstream allocation (chunk == NULL) */
  guint64 size;        /* bytes of its class */
  guint16 cls;
  guint8 tag;   /* the kind's: the tag its slab (`arena`) or chunk (`cache`) serves
                 * (cache_tag_index(), 0 untagged) */
  guint8 fresh; /* the kind's: `cache`, never handed out since its chunk was carved */
};

typedef struct
{
  guint n;
  Block *blocks[CACHE_FRONT_MAX];
} FrontBin;

typedef struct
{
  Block *head;
  guint64 n;
} SharedBin;

/* The front caches of one thread, one per instance slot. */
typedef struct
{
  MemresResource *last_mr; /* the instance the thread used last ... */
  Front *last_front;       /* ... and its front there (cleared with the front) */
  /* the tag name the thread's last tagged allocation had, and its cache_tag_index() (a kind's
   * tagged hit path: cache_tag_index_cached()) */
  const char *last_tag_name;
  guint last_tag;
  Front *fronts[CACHE_SLOTS];
} ThreadFronts;

/* A thread's front cache of one instance. Its owner works on it without a locked instruction:
 * see the fast path's section below for how another thread takes it. */
struct _Front
{
  gint busy;      /* the owner is inside a front operation */
  gint stop;      /* another thread owns the front's content now */
  guint64 cached; /* bytes of its blocks */
  guint64 budget; /* bytes leased from the kind's cap (CacheParts.leased) */
  guint64 hits[CACHE_MAX_CLASSES];
  CacheParts *parts;
  ThreadFronts *owner;
  Front *prev, *next; /* CacheParts.fronts */
  FrontBin bins[];    /* n_classes */
};

/* The state the parts keep for one instance: the first member of the kind's instance. */
struct _CacheParts
{
  /* set at init; hit_max, depth and events are what the fast path reads, on one line */
  gsize max_block; /* the size of the largest class */
  gsize hit_max;   /* the largest request the inline hit paths serve: max_block, or 0 for none */
  guint depth;     /* front blocks per class */
  gboolean events; /* cross-stream reuse needs events (device-accessible or stream-ordered) */
  guint n_classes;
  gint slot;           /* index in ThreadFronts, or -1 (no front caches) */
  gint device;         /* for the primary context of event calls */
  guint64 front_bytes; /* most bytes a front leases */

  GMutex lock; /* everything below, and what the kind puts under it */
  SharedBin shared[CACHE_MAX_CLASSES];
  guint64 shared_cached; /* bytes of blocks in shared bins */
  guint64 leased;        /* sum of the fronts' budgets */
  guint64 shared_hits[CACHE_MAX_CLASSES];
  guint64 gone_hits[CACHE_MAX_CLASSES]; /* hits of fronts that no longer exist */
  Front *fronts;
  GPtrArray *spare_events; /* CUevent, recorded by nobody */
};

/* ---- life (cache-fronts.c) ---- */

/* Sets up @self (zero-filled) for @n_classes classes, the largest of @max_block bytes, with
 * fronts of @depth blocks per class (0: none) and @front_bytes bytes at most, events on the
 * primary context of @device when @events; takes a slot for the fronts if one is free. */
void cache_parts_init (CacheParts *self, gsize max_block, guint n_classes, guint depth,
                       guint64 front_bytes, gboolean events, gint device);
/* Finalize's first step: every front destroyed (its blocks into the shared bins), the slot
 * given back. Returns with the lock held. */
void cache_parts_stop (CacheParts *self);
/* Finalize's last step, lock held: the spare events destroyed (a warning if the driver
 * cannot). The kind then releases the lock and clears it. */
void cache_parts_clear (CacheParts *self);

/* The at_fork slot's work (#MemresResourceOps.at_fork): with @self NULL the slot table's lock
 * (taken outside every CacheParts.lock, so called before any instance's), else @self's lock; in
 * the child, the fronts whose owners were inside them at the fork belong to threads that are
 * gone: no longer busy, so that a stop (trim, statistics, an out-of-memory flush) does not wait
 * for them forever (their blocks stay in them until such a stop drains them). */
void cache_parts_at_fork (CacheParts *self, MemresForkPhase phase);

/* ---- fronts (cache-fronts.c; the fast path is inline at the end of this header) ---- */

Front *cache_front_create (CacheParts *self);
void cache_fronts_stop (CacheParts *self);
void cache_fronts_resume (CacheParts *self);
void cache_front_drain (CacheParts *self, Front *f);
void cache_free_blocks_collect (CacheParts *self, GHashTable *set);
guint64 cache_fronts_cached (CacheParts *self);
guint64 cache_fronts_cached_exact (CacheParts *self);
Front *cache_own_front (CacheParts *self);
Block *cache_own_front_take (CacheParts *self, guint cls, MemresStream stream, guint tag);
void cache_fronts_drain_tag (CacheParts *self, guint tag);
gboolean cache_front_lease_put (CacheParts *self, Front *f, Block *b, guint64 room);
void cache_front_spill (CacheParts *self, Front *f, guint cls, MemresStream stream, CacheEvent *e);
void cache_shared_put (CacheParts *self, Front *f, Block *b, MemresStream stream);

/* ---- shared bins and events (cache-bins.c) ---- */

const MemresCudaDriver *cache_context_push (CacheParts *self, gboolean *pushed, GError **error);
gboolean cache_check_not_capturing (CacheParts *self, MemresStream stream, GError **error);
CacheEvent *cache_event_record (CacheParts *self, MemresStream stream, GError **error);
void cache_event_unref (CacheParts *self, CacheEvent *e);
gboolean cache_event_wait (CacheParts *self, CacheEvent *e, MemresStream stream, GError **error);
CacheEvent *cache_block_event (CacheParts *self, Block *b);
void cache_shared_push (CacheParts *self, Block *b);
void cache_shared_unlink (CacheParts *self, Block *b);
Block *cache_shared_take (CacheParts *self, guint cls, MemresStream stream, guint tag,
                          GError **error);

/* ---- tags (cache-tags.c) ---- */

/* A tag argument that matches a block of any tag (cache_own_front_take()) */
#define CACHE_TAG_ANY G_MAXUINT

/* A small index (1 to MEMRES_TAGS_MAX) for the interned tag name @name (as
 * memres_allocation_get_tag() gives it; the same name always the same index in this plugin), 0
 * for %NULL; cache_tag_name() the name of an index (%NULL for 0). No lock to find a known name. */
guint cache_tag_index (const char *name);
const char *cache_tag_name (guint index);

/* cache_tag_index() of @name (not %NULL) through @tf's memo of the thread's last tag: no call
 * when the thread allocates under the same tag again. */
static inline guint
cache_tag_index_cached (ThreadFronts *tf, const char *name)
{
  if (G_LIKELY (tf->last_tag_name == name))
    return tf->last_tag;
  tf->last_tag = cache_tag_index (name);
  tf->last_tag_name = name;
  return tf->last_tag;
}

/* The stream a block freed on @stream is kept for: the legacy default stream named, or NULL for
 * every stream when the memory needs no events. */
static inline MemresStream
cache_normalize_stream (const CacheParts *self, MemresStream stream)
{
  if (!self->events)
    return NULL;
  return stream != NULL ? stream : MEMRES_STREAM_LEGACY;
}

/* ---- the fronts' fast path, inline in the kind's allocate and close ----
 *
 * How a thread other than the owner gets at a front safely: the owner works on its front
 * without a locked instruction: it sets Front.busy, then reads Front.stop (front_enter());
 * another thread (trim, statistics, the out-of-memory flush, all under CacheParts.lock) sets
 * @stop, then issues a process-wide barrier (membarrier(), owner_heavy_barrier()) and waits for
 * @busy to clear (cache_fronts_stop()). Either the owner sees @stop and takes the slow path
 * (which needs CacheParts.lock), or the other thread sees @busy and waits: the asymmetric form
 * of Dekker's exclusion, whose fence on the owner's side the barrier replaces. The owner's slow
 * paths hold CacheParts.lock, so no other thread is inside its front then. A front is
 * destroyed only on its owner's thread (at its exit) or in finalize, when nobody uses the
 * instance. */

/* The calling thread's ThreadFronts. A thread-local pointer (initial-exec: one load, no call;
 * one pointer fits the static TLS room glibc keeps for modules loaded with dlopen()), and a
 * pthread key whose destructor runs at thread exit (cache-fronts.c). Sanitizer builds
 * (meson.build defines CACHE_TLS_KEY) use the key alone: LeakSanitizer's thread scan crashes on
 * a dlopen()ed module's static TLS. */
G_GNUC_INTERNAL extern pthread_key_t cache_fronts_key;
#ifndef CACHE_TLS_KEY
G_GNUC_INTERNAL extern __thread ThreadFronts *cache_thread_fronts
    __attribute__ ((tls_model ("initial-exec")));
#endif

static inline ThreadFronts *
thread_fronts_get (void)
{
#ifdef CACHE_TLS_KEY
  return pthread_getspecific (cache_fronts_key);
#else
  return cache_thread_fronts;
#endif
}

/* The owner enters its front; FALSE when another thread holds it (take the slow path). */
static inline gboolean
front_enter (Front *f)
{
  return owner_try_enter (&f->busy, &f->stop);
}

static inline void
front_leave (Front *f)
{
  owner_leave_busy (&f->busy);
}

/* A front bin's slots, changed by the front's owner inside front_enter() (or with the lock held
 * on its own front, or on a stopped one): bin_take() takes slot @i out, bin_put() adds @b; both
 * keep Front.cached (read by other threads) in step. */
G_ALWAYS_INLINE static inline Block *
bin_take (Front *f, FrontBin *bin, guint i)
{
  Block *b = bin->blocks[i];

  bin->blocks[i] = bin->blocks[--bin->n];
  __atomic_store_n (&f->cached, f->cached - b->size, __ATOMIC_RELAXED);
  return b;
}

G_ALWAYS_INLINE static inline void
bin_put (Front *f, FrontBin *bin, Block *b)
{
  bin->blocks[bin->n++] = b;
  __atomic_store_n (&f->cached, f->cached + b->size, __ATOMIC_RELAXED);
}

/* The calling thread's front of @self, created on first use; NULL without a slot. */
static inline Front *
front_get (CacheParts *self)
{
  ThreadFronts *tf = thread_fronts_get ();

  if (G_LIKELY (tf != NULL && self->slot >= 0 && tf->fronts[self->slot] != NULL))
    return tf->fronts[self->slot];
  return cache_front_create (self);
}

/* The calling thread's front of @self, remembered as the one of @mr for the hot paths: a kind's
 * allocate and close first compare ThreadFronts.last_mr with their instance and take
 * last_front without a call. cache_front_destroy() clears last_front before last_mr, which this
 * sets in the other order, so that the owner never pairs a matching last_mr with a freed
 * front. */
static inline Front *
front_get_for (MemresResource *mr, CacheParts *self)
{
  Front *f = front_get (self);

  if (f != NULL)
    {
      __atomic_store_n (&f->owner->last_mr, mr, __ATOMIC_RELAXED);
      __atomic_store_n (&f->owner->last_front, f, __ATOMIC_RELEASE);
    }
  return f;
}

/* @alloc: @b handed out as a buffer of @size bytes (the block travels in plugin_data). */
static inline void
fill_allocation (MemresAllocation *alloc, Block *b, gsize size)
{
  alloc->address = b->address;
  alloc->size = size;
  alloc->plugin_data = b;
}

/* The front's part of an allocation: a block of class @cls freed on @stream (not normalized),
 * handed out as @size bytes; with @by_tag (a constant: the `arena`'s), a block of tag @tag. */
G_ALWAYS_INLINE static inline gboolean
front_try_allocate_tagged (Front *f, CacheParts *self, guint cls, gsize size, MemresStream stream,
                           gboolean by_tag, guint tag, MemresAllocation *alloc)
{
  MemresStream s = cache_normalize_stream (self, stream);
  FrontBin *bin = &f->bins[cls];

  if (G_UNLIKELY (!front_enter (f)))
    return FALSE;
  for (guint i = bin->n; i-- > 0;)
    {
      Block *b = bin->blocks[i];

      if (G_LIKELY (b->stream == s && (!by_tag || b->tag == tag)))
        {
          bin_take (f, bin, i);
          f->hits[cls]++;
          front_leave (f);
          fill_allocation (alloc, b, size);
          return TRUE;
        }
    }
  front_leave (f);
  return FALSE;
}

G_ALWAYS_INLINE static inline gboolean
front_try_allocate (Front *f, CacheParts *self, guint cls, gsize size, MemresStream stream,
                    MemresAllocation *alloc)
{
  return front_try_allocate_tagged (f, self, cls, size, stream, FALSE, 0, alloc);
}

/* The front's part of a free: room in the class and in the lease. */
G_ALWAYS_INLINE static inline gboolean
front_try_deallocate (Front *f, CacheParts *self, Block *b)
{
  FrontBin *bin = &f->bins[b->cls];

  if (G_UNLIKELY (!front_enter (f)))
    return FALSE;
  if (G_LIKELY (bin->n < self->depth && f->cached + b->size <= f->budget))
    {
      bin_put (f, bin, b);
      front_leave (f);
      return TRUE;
    }
  front_leave (f);
  return FALSE;
}

/* The allocate slot's hit path, the same for every kind on the parts (`cache`, `arena`): the
 * front of the instance this thread used last (ThreadFronts.last_mr, no call to find it), a
 * block of the request's class (cache_class_of()) freed on @stream. FALSE when the request is
 * above hit_max (max_block, or 0 for a kind whose general path must see every call), the thread
 * last used another instance, or the front has no such block: the kind's general path follows. */
G_ALWAYS_INLINE static inline gboolean
cache_hit_allocate_tagged (MemresResource *mr, gsize size, MemresStream stream, gboolean by_tag,
                           guint tag, MemresAllocation *alloc)
{
  ThreadFronts *tf = thread_fronts_get ();

  if (G_LIKELY (tf != NULL && __atomic_load_n (&tf->last_mr, __ATOMIC_RELAXED) == mr))
    {
      Front *f = __atomic_load_n (&tf->last_front, __ATOMIC_RELAXED);
      CacheParts *parts = f->parts;

      return G_LIKELY (size <= parts->hit_max)
             && front_try_allocate_tagged (f, parts, cache_class_of (size), size, stream, by_tag,
                                           tag, alloc);
    }
  return FALSE;
}

G_ALWAYS_INLINE static inline gboolean
cache_hit_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc)
{
  return cache_hit_allocate_tagged (mr, size, stream, FALSE, 0, alloc);
}

/* The deallocate slot's hit path: a block (of an allocation up to max_block) back into the
 * front of the instance this thread used last, its stream set to @stream (normalized). Blocks
 * carved from one chunk lie side by side, each used by another thread: no store of an unchanged
 * value (it would still take the neighbours' cache line away from them). FALSE: the kind's
 * general path follows. */
G_ALWAYS_INLINE static inline gboolean
cache_hit_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream)
{
  ThreadFronts *tf = thread_fronts_get ();

  if (G_LIKELY (tf != NULL && __atomic_load_n (&tf->last_mr, __ATOMIC_RELAXED) == mr))
    {
      Front *f = __atomic_load_n (&tf->last_front, __ATOMIC_RELAXED);
      CacheParts *parts = f->parts;
      Block *b = alloc->plugin_data;

      if (G_LIKELY (alloc->size <= parts->hit_max))
        {
          MemresStream s = cache_normalize_stream (parts, stream);

          if (b->stream != s)
            b->stream = s;
          return front_try_deallocate (f, parts, b);
        }
    }
  return FALSE;
}

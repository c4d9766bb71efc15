/* memres - CUDA memory resources
 * cache.c: the `cache` adaptor, a caching pool over any upstream resource.
 *
 * Spec: cache[:max_block=SIZE,max_cached=SIZE|max,chunk=SIZE,front=N,front_bytes=SIZE]>UPSTREAM
 *
 * Requests up to max_block are rounded up to a size class (cache-classes.h) and served from
 * blocks the cache keeps; larger requests go straight to the upstream (one upstream allocation
 * per buffer, freed at close). Blocks of classes up to chunk / 16 are carved from chunks of
 * `chunk` bytes taken from the upstream; larger blocks are upstream allocations of their own.
 *
 * Where a free block is kept:
 * - the front cache of the thread that freed it (per thread and per class, up to `front`
 *   blocks): allocate and close of the same class on the same stream take only the front's own
 *   lock, which no other thread takes except trim, get_stats, an out-of-memory flush and
 *   finalize. No shared cache line is written on that path.
 * - the shared cache (per class, under the instance's mutex) when the front is full, when the
 *   front's byte lease cannot grow (past front_bytes, or max_cached), or when its thread exits.
 *
 * Stream rules (docs/cache.md): a block freed on stream S is handed out again for S at once;
 * for another stream S2 only after S2 waits on an event recorded on S after the free
 * (cuEventRecord at the spill into the shared cache, where S is the stream the caller is
 * closing on and so alive; cuStreamWaitEvent when S2 takes it; on the legacy stream, which
 * cannot be gone, the event is recorded only when S2 takes the block). Front blocks carry no event
 * and are only ever reused on their stream. Over an upstream that is neither stream-ordered nor
 * device-accessible (host), streams are ignored and no event exists. Returning memory to the
 * upstream (trim, the out-of-memory flush, finalize) first synchronizes the device's primary
 * context when any block lacks an event (the stream it was freed on may be gone). */
#include <memres/memres-plugin.h>

#include "../common/owner-fence.h"
#include "cache-classes.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CACHE_FRONT_MAX     16  /* most blocks per class in a front cache */
#define CACHE_MAX_CLASSES   176 /* classes up to 4 GiB */
#define CACHE_MAX_BLOCK_MAX (G_GUINT64_CONSTANT (4) << 30)
#define CACHE_SLOTS         64 /* instances with front caches at once */
#define CACHE_LEASE_QUANTUM (G_GUINT64_CONSTANT (8) << 20)
#define CACHE_CHUNK_BLOCKS  16 /* a chunk holds at least this many blocks */

/* The intrusive doubly linked lists of this file (Cache.fronts, SharedBin.head, Cache.chunks):
 * @node, whose struct has prev and next, pushed at the front of the list that starts at @head,
 * or unlinked from it (@node's own links left as they were). */
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

typedef struct _Cache Cache;
typedef struct _Block Block;
typedef struct _Chunk Chunk;
typedef struct _Front Front;

/* An event recorded once on a stream, shared by the blocks freed (or carved) before it. */
typedef struct
{
  CUevent event;
  guint refs; /* under Cache.lock */
} CacheEvent;

struct _Block
{
  guint64 address;
  MemresStream stream; /* normalized stream of its last free (or of its chunk's allocation) */
  CacheEvent *event;   /* shared cache only: recorded on @stream after that free, or NULL */
  Block *prev, *next;  /* shared bin */
  Chunk *chunk;        /* the chunk it was carved from, or NULL */
  MemresAllocation up; /* its own upstream allocation (chunk == NULL) */
  guint64 size;        /* bytes of its class */
  guint16 cls;
};

struct _Chunk
{
  MemresAllocation up;
  Chunk *prev, *next;
  guint n_blocks;
  guint n_idle; /* trim's count of blocks in the shared cache */
  Block blocks[];
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

/* The front caches of one thread, one per cache instance slot. */
typedef struct
{
  MemresResource *last_mr; /* the instance the thread used last ... */
  Front *last_front;       /* ... and its front there (cleared with the front) */
  Front *fronts[CACHE_SLOTS];
} ThreadFronts;

/* The owner works on its front without a locked instruction: it sets @busy, then reads @stop;
 * another thread (trim, statistics, the out-of-memory flush, all under Cache.lock) sets @stop,
 * then issues a process-wide barrier (membarrier(), owner_heavy_barrier()) and waits for @busy to
 * clear. Either the owner sees @stop and takes the slow path (which needs Cache.lock), or the
 * other thread sees @busy and waits: the asymmetric form of Dekker's exclusion, whose fence on
 * the owner's side the barrier replaces. The owner's slow paths hold Cache.lock, so no other
 * thread is inside its front then. */
struct _Front
{
  gint busy;      /* the owner is inside a front operation */
  gint stop;      /* another thread owns the front's content now */
  guint64 cached; /* bytes of its blocks */
  guint64 budget; /* bytes leased from max_cached */
  guint64 hits[CACHE_MAX_CLASSES];
  Cache *cache;
  ThreadFronts *owner;
  Front *prev, *next; /* Cache.fronts */
  FrontBin bins[];    /* n_classes */
};

struct _Cache
{
  MemresResource *self_mr;  /* the instance itself (transfer none): upstream calls take it */
  MemresResource *upstream; /* transfer none: the core holds it for the adaptor */
  gint device;              /* for the primary context of event calls */
  gboolean events; /* cross-stream reuse needs events (device-accessible or stream-ordered) */
  gsize max_block; /* the size of the largest class */
  guint n_classes;
  guint n_chunk_classes; /* classes carved from chunks */
  guint64 max_cached;
  gsize chunk_size;
  guint depth;         /* front blocks per class */
  guint64 front_bytes; /* most bytes a front leases */
  gint slot;           /* index in ThreadFronts, or -1 (no front caches) */

  GMutex lock; /* everything below */
  SharedBin shared[CACHE_MAX_CLASSES];
  guint64 shared_cached; /* bytes of blocks in shared bins */
  guint64 leased;        /* sum of the fronts' budgets */
  guint64 reserved, reserved_high, used_high;
  /* bytes the upstream gave beyond the class sizes of the blocks and chunks @reserved counts (an
   * upstream that rounds up, as vmm does to its granularity): held from it all the same, so part
   * of the reserve reported, but neither cached nor used */
  guint64 rounding;
  guint64 direct_used; /* bytes of live buffers above max_block */
  guint64 misses[CACHE_MAX_CLASSES];
  guint64 shared_hits[CACHE_MAX_CLASSES];
  guint64 gone_hits[CACHE_MAX_CLASSES]; /* hits of fronts that no longer exist */
  guint64 direct, oom_flushes;
  Front *fronts;
  Chunk *chunks;
  GPtrArray *spare_events; /* CUevent, recorded by nobody */
};

/* ---- threads and their front caches -------------------------------------------------------- */

/* The calling thread's ThreadFronts. A thread-local pointer (initial-exec: one load, no call;
 * one pointer fits the static TLS room glibc keeps for modules loaded with dlopen()), and a
 * pthread key whose destructor runs at thread exit. Sanitizer builds (meson.build defines
 * CACHE_TLS_KEY) use the key alone: LeakSanitizer's thread scan crashes on a dlopen()ed module's
 * static TLS. */
static pthread_key_t fronts_key;
static GOnce fronts_key_once = G_ONCE_INIT;
#ifndef CACHE_TLS_KEY
static __thread ThreadFronts *thread_fronts __attribute__ ((tls_model ("initial-exec")));
#endif

static inline ThreadFronts *
thread_fronts_get (void)
{
#ifdef CACHE_TLS_KEY
  return pthread_getspecific (fronts_key);
#else
  return thread_fronts;
#endif
}

static void
thread_fronts_set (ThreadFronts *tf)
{
#ifndef CACHE_TLS_KEY
  thread_fronts = tf;
#endif
  pthread_setspecific (fronts_key, tf);
}
static GMutex slots_lock; /* the table below, ThreadFronts entries, Front lists of instances */
static Cache *slots[CACHE_SLOTS];

static void shared_push (Cache *self, Block *b);
static void thread_fronts_free (gpointer data);

static gpointer
fronts_key_create (gpointer data)
{
  if (pthread_key_create (&fronts_key, thread_fronts_free) != 0)
    g_error ("cache: no pthread key left for the front caches");
  return NULL;
}

/* TRUE when membarrier() cannot be used: the owner then fences (a locked instruction). Set once,
 * before the first front exists. */
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

/* Takes every front of @self but the calling thread's own from its owner (who is then outside
 * it until fronts_resume()). Cache.lock held. */
static void
fronts_stop (Cache *self)
{
  ThreadFronts *me = thread_fronts_get ();
  gboolean others = FALSE;

  for (Front *f = self->fronts; f != NULL; f = f->next)
    if (f->owner != me)
      {
        __atomic_store_n (&f->stop, 1, __ATOMIC_RELAXED);
        others = TRUE;
      }
  if (!others)
    return;
  owner_heavy_barrier ();
  for (Front *f = self->fronts; f != NULL; f = f->next)
    if (f->owner != me)
      while (__atomic_load_n (&f->busy, __ATOMIC_ACQUIRE))
        g_thread_yield ();
}

static void
fronts_resume (Cache *self)
{
  for (Front *f = self->fronts; f != NULL; f = f->next)
    __atomic_store_n (&f->stop, 0, __ATOMIC_RELEASE);
}

/* Moves every block of @f to the shared cache and gives its lease back. Cache.lock held, and @f
 * stopped (fronts_stop()) unless it is the calling thread's. */
static void
front_drain (Cache *self, Front *f)
{
  for (guint c = 0; c < self->n_classes; c++)
    {
      FrontBin *bin = &f->bins[c];

      while (bin->n > 0)
        shared_push (self, bin->blocks[--bin->n]);
    }
  self->leased -= f->budget;
  f->budget = 0;
  f->cached = 0;
}

/* Unlinks @f from its instance, drains it, counts its hits as gone and frees it. slots_lock
 * and Cache.lock held, on @f's thread (it exits) or in finalize (nobody uses the instance). */
static void
front_destroy (Cache *self, Front *f)
{
  front_drain (self, f);
  for (guint c = 0; c < self->n_classes; c++)
    self->gone_hits[c] += f->hits[c];
  LIST_UNLINK (self->fronts, f);
  f->owner->fronts[self->slot] = NULL;
  /* finalize may run while the owner moves on to another instance: last_front is cleared
   * before last_mr, which the owner sets before last_front, so that the owner never pairs a
   * matching last_mr with this front (see front_get_for()) */
  if (__atomic_load_n (&f->owner->last_front, __ATOMIC_RELAXED) == f)
    {
      __atomic_store_n (&f->owner->last_front, NULL, __ATOMIC_RELAXED);
      __atomic_store_n (&f->owner->last_mr, NULL, __ATOMIC_RELEASE);
    }
  free (f); /* front_struct_new() */
}

/* A thread exits: its blocks return to the shared caches (the GPrivate destructor). */
static void
thread_fronts_free (gpointer data)
{
  ThreadFronts *tf = data;

  g_mutex_lock (&slots_lock);
  for (guint i = 0; i < CACHE_SLOTS; i++)
    {
      Front *f = tf->fronts[i];
      Cache *cache;

      if (f == NULL)
        continue;
      cache = f->cache;
      g_mutex_lock (&cache->lock);
      front_destroy (cache, f);
      g_mutex_unlock (&cache->lock);
    }
  g_mutex_unlock (&slots_lock);
#ifndef CACHE_TLS_KEY
  if (thread_fronts == tf)
    thread_fronts = NULL; /* a free later in this thread's exit makes a new one */
#endif
  g_free (tf);
}

/* A zero-filled front of @size bytes on cache lines of its own: its owner writes its start on
 * every allocate and free, which must not share a line with another thread's data, nor the
 * other line of a 128-byte pair (x86's adjacent-line prefetcher fetches lines in pairs). */
static Front *
front_struct_new (gsize size)
{
  gpointer p;

  size = (size + 127) & ~(gsize) 127; /* nor its end */
  if (posix_memalign (&p, 128, size) != 0)
    g_error ("cache: out of memory for a front cache of %" G_GSIZE_FORMAT " bytes", size);
  return memset (p, 0, size);
}

/* The calling thread's front cache of @self, created on first use; NULL without a slot. */
G_GNUC_NO_INLINE
static Front *
front_create (Cache *self)
{
  ThreadFronts *tf = thread_fronts_get ();
  Front *f;

  if (self->slot < 0)
    return NULL;
  if (tf == NULL)
    {
      tf = g_new0 (ThreadFronts, 1);
      thread_fronts_set (tf);
    }
  f = front_struct_new (sizeof (Front) + self->n_classes * sizeof (FrontBin));
  f->cache = self;
  f->owner = tf;
  g_mutex_lock (&slots_lock);
  g_mutex_lock (&self->lock);
  LIST_PUSH (self->fronts, f);
  tf->fronts[self->slot] = f;
  g_mutex_unlock (&self->lock);
  g_mutex_unlock (&slots_lock);
  return f;
}

static inline Front *
front_get (Cache *self)
{
  ThreadFronts *tf = thread_fronts_get ();

  if (G_LIKELY (tf != NULL && self->slot >= 0 && tf->fronts[self->slot] != NULL))
    return tf->fronts[self->slot];
  return front_create (self);
}

/* ---- events ---------------------------------------------------------------------------------- */

/* The driver, with the primary context of the cache's device current (events belong to the
 * context they are created in); pop with memres_cuda_pop_context (*@pushed). */
static const MemresCudaDriver *
context_push (Cache *self, gboolean *pushed, GError **error)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (error);

  if (drv == NULL || !memres_cuda_push_context (self->device, pushed, error))
    return NULL;
  return drv;
}

/* A new event recorded on @stream now. Cache.lock held. */
static CacheEvent *
event_record (Cache *self, MemresStream stream, GError **error)
{
  const MemresCudaDriver *drv;
  gboolean pushed;
  CacheEvent *e;
  CUevent ev = NULL;
  CUresult r;

  if ((drv = context_push (self, &pushed, error)) == NULL)
    return NULL;
  if (self->spare_events->len > 0)
    ev = g_ptr_array_steal_index_fast (self->spare_events, self->spare_events->len - 1);
  else if ((r = drv->cuEventCreate (&ev, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS)
    {
      memres_cuda_pop_context (pushed);
      memres_cuda_set_error (error, r, "cuEventCreate");
      return NULL;
    }
  r = drv->cuEventRecord (ev, (CUstream) stream);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    {
      g_ptr_array_add (self->spare_events, ev);
      memres_cuda_set_error (error, r, "cuEventRecord");
      return NULL;
    }
  e = g_new (CacheEvent, 1);
  e->event = ev;
  e->refs = 1;
  return e;
}

static void
event_unref (Cache *self, CacheEvent *e)
{
  if (e != NULL && --e->refs == 0)
    {
      g_ptr_array_add (self->spare_events, e->event);
      g_free (e);
    }
}

/* Makes @stream wait for @e. Cache.lock held. */
static gboolean
event_wait (Cache *self, CacheEvent *e, MemresStream stream, GError **error)
{
  const MemresCudaDriver *drv;
  gboolean pushed;
  CUresult r;

  if ((drv = context_push (self, &pushed, error)) == NULL)
    return FALSE;
  r = drv->cuStreamWaitEvent ((CUstream) stream, e->event, 0);
  memres_cuda_pop_context (pushed);
  if (r != CUDA_SUCCESS)
    return memres_cuda_set_error (error, r, "cuStreamWaitEvent");
  return TRUE;
}

/* The event another stream waits for before it takes @b from the shared cache: the one recorded
 * after its free, else, for a block freed on the legacy default stream, one recorded there now
 * (that stream lives as long as the context, so an event recorded later orders the taker after
 * at least the free: blocks freed on it join the shared cache without a cuEventRecord each).
 * NULL when the block has none (it may then serve only its own stream) or the record failed.
 * Cache.lock held. */
static CacheEvent *
block_event (Cache *self, Block *b)
{
  g_autoptr (GError) local = NULL;

  if (b->event == NULL && b->stream == MEMRES_STREAM_LEGACY
      && (b->event = event_record (self, MEMRES_STREAM_LEGACY, &local)) == NULL)
    g_debug ("cache: no event on the legacy stream for a block of %" G_GUINT64_FORMAT " bytes: %s",
             b->size, local->message);
  return b->event;
}

/* ---- the shared cache ------------------------------------------------------------------------ */

static inline MemresStream
normalize_stream (const Cache *self, MemresStream stream)
{
  if (!self->events)
    return NULL;
  return stream != NULL ? stream : MEMRES_STREAM_LEGACY;
}

static void
shared_push (Cache *self, Block *b)
{
  SharedBin *bin = &self->shared[b->cls];

  LIST_PUSH (bin->head, b);
  bin->n++;
  self->shared_cached += cache_class_size (b->cls);
}

static void
shared_unlink (Cache *self, Block *b)
{
  SharedBin *bin = &self->shared[b->cls];

  LIST_UNLINK (bin->head, b);
  b->prev = b->next = NULL;
  bin->n--;
  self->shared_cached -= cache_class_size (b->cls);
}

static guint64
fronts_cached (Cache *self)
{
  guint64 sum = 0;

  for (Front *f = self->fronts; f != NULL; f = f->next)
    sum += __atomic_load_n (&f->cached, __ATOMIC_RELAXED);
  return sum;
}

/* What the cache holds from its upstream, in bytes. Cache.lock held. */
static inline guint64
reserved_bytes (Cache *self)
{
  return self->reserved + self->rounding;
}

/* @class_bytes more (reserve_add()) or fewer (reserve_sub()) bytes of blocks in the reserve, held
 * as @up_size bytes of the upstream (>= @class_bytes). Cache.lock held. */
static inline void
reserve_add (Cache *self, guint64 class_bytes, guint64 up_size)
{
  self->reserved += class_bytes;
  self->rounding += up_size - class_bytes;
}

static inline void
reserve_sub (Cache *self, guint64 class_bytes, guint64 up_size)
{
  self->reserved -= class_bytes;
  self->rounding -= up_size - class_bytes;
}

/* The high-water marks, sampled at each miss and each get_stats. Cache.lock held. */
static void
update_highs (Cache *self)
{
  guint64 cached = self->shared_cached + fronts_cached (self);
  guint64 used = self->reserved > cached ? self->reserved - cached : 0;

  self->reserved_high = MAX (self->reserved_high, reserved_bytes (self));
  self->used_high = MAX (self->used_high, used);
}

/* A block of class @cls from the shared cache for @stream: one freed on @stream, else one with
 * an event that @stream is made to wait on; NULL when there is none. Cache.lock held. */
static Block *
shared_take (Cache *self, guint cls, MemresStream stream, GError **error)
{
  Block *other = NULL;

  for (Block *b = self->shared[cls].head; b != NULL; b = b->next)
    {
      if (b->stream == stream && stream != CU_STREAM_PER_THREAD)
        {
          shared_unlink (self, b);
          event_unref (self, g_steal_pointer (&b->event));
          return b;
        }
      if (other == NULL && (b->event != NULL || b->stream == MEMRES_STREAM_LEGACY))
        other = b;
    }
  if (other == NULL || block_event (self, other) == NULL)
    return NULL;
  if (!event_wait (self, other->event, stream, error))
    return NULL;
  shared_unlink (self, other);
  event_unref (self, g_steal_pointer (&other->event));
  return other;
}

/* ---- the upstream ---------------------------------------------------------------------------- */

/* Memory on its way back to the upstream: taken out of the cache under Cache.lock, given back
 * after it is released (retired_free()), since the upstream may be another cache, whose locks
 * would otherwise be taken inside ours in one thread and before ours in another. */
typedef struct
{
  Block *blocks; /* linked through Block.next */
  Chunk *chunks; /* linked through Chunk.next */
} Retired;

static gboolean flush_idle (Cache *self, gsize bytes_to_keep, Retired *out, GError **error);
static void retired_free (Cache *self, Retired *r, MemresStream stream);

/* memres_upstream_allocate(), Cache.lock not held (the upstream may be another cache, or call
 * an out-of-memory handler that trims or reads this one); on out-of-memory, every cached block
 * of every thread goes back to the upstream (under the lock) and the allocation is tried once
 * more. */
static gboolean
upstream_allocate (MemresResource *mr, Cache *self, gsize size, MemresStream stream,
                   MemresAllocation *alloc, GError **error)
{
  GError *local = NULL;
  Retired retired = { NULL, NULL };
  gboolean ok;

  memset (alloc, 0, sizeof *alloc);
  if (memres_upstream_allocate (mr, size, stream, alloc, &local))
    return TRUE;
  if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  g_clear_error (&local);
  g_mutex_lock (&self->lock);
  self->oom_flushes++;
  ok = flush_idle (self, 0, &retired, error);
  g_mutex_unlock (&self->lock);
  retired_free (self, &retired, NULL);
  if (!ok)
    return FALSE;
  memset (alloc, 0, sizeof *alloc);
  return memres_upstream_allocate (mr, size, stream, alloc, error);
}

/* The upstream memory of a new block of class @cls for @stream, Cache.lock not held: a chunk of
 * blocks for the chunk classes, or when the upstream has not the memory for a chunk, the block
 * alone (a chunk of one block: an upstream limited below the chunk size still serves small
 * requests); a block of its own for larger classes. *@n_blocks: the blocks @up holds. */
static gboolean
block_memory (MemresResource *mr, Cache *self, guint cls, MemresStream stream, MemresAllocation *up,
              guint *n_blocks, GError **error)
{
  gsize csize = cache_class_size (cls);
  GError *local = NULL;

  *n_blocks = cls >= self->n_chunk_classes ? 1 : (guint) (self->chunk_size / csize);
  if (upstream_allocate (mr, self, (gsize) *n_blocks * csize, stream, up, &local))
    return TRUE;
  if (*n_blocks == 1 || !g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  g_clear_error (&local);
  *n_blocks = 1;
  return upstream_allocate (mr, self, csize, stream, up, error);
}

/* A new block of class @cls for @stream in @up (block_memory()): a block of its own above the
 * chunk classes, else carved from a new chunk (the other blocks of the chunk go to the shared
 * cache, with an event recorded after the chunk's allocation). NULL when the event cannot be
 * recorded: @up is then still the caller's, to give back once the lock is released. Cache.lock
 * held. */
static Block *
block_new (MemresResource *mr, Cache *self, guint cls, MemresStream stream, MemresAllocation *up,
           guint n, GError **error)
{
  gsize csize = cache_class_size (cls);
  Chunk *chunk;
  Block *b;
  CacheEvent *e = NULL;

  if (cls >= self->n_chunk_classes)
    {
      b = g_new0 (Block, 1);
      b->address = up->address;
      b->up = *up;
      b->cls = cls;
      b->size = csize;
      reserve_add (self, csize, up->size);
      return b;
    }
  /* blocks on the legacy stream get their event when another stream takes one (block_event()) */
  if (self->events && n > 1 && stream != MEMRES_STREAM_LEGACY
      && (e = event_record (self, stream, error)) == NULL)
    return NULL;
  chunk = g_malloc0 (sizeof (Chunk) + n * sizeof (Block));
  chunk->up = *up;
  chunk->n_blocks = n;
  LIST_PUSH (self->chunks, chunk);
  reserve_add (self, (guint64) n * csize, up->size);
  for (guint i = 0; i < n; i++)
    {
      b = &chunk->blocks[i];
      b->address = up->address + (guint64) i * csize;
      b->chunk = chunk;
      b->cls = cls;
      b->size = csize;
      b->stream = stream;
      if (i > 0)
        {
          b->event = e;
          shared_push (self, b);
        }
    }
  if (e != NULL)
    e->refs = n - 1;
  return &chunk->blocks[0];
}

/* Synchronizes the device (host-observed completion of every stream's work) before memory that
 * may still be in use by queued work goes back to the upstream. */
static gboolean
device_synchronize (Cache *self, GError **error)
{
  return !self->events || memres_cuda_device_synchronize (self->device, error);
}

static void block_retire (Cache *self, Block *b, Retired *out);

/* Retires the shared cache's blocks (and the chunks all of whose blocks are there) onto @out
 * while more than @bytes_to_keep stay reserved, never going below it (a block or chunk that
 * would is kept); every stream's work on them is complete once
 * this returns TRUE. Cache.lock held. */
static gboolean
release_idle (Cache *self, gsize bytes_to_keep, Retired *out, GError **error)
{
  Chunk *chunk, *next;

  if (self->shared_cached == 0 || self->reserved <= bytes_to_keep)
    return TRUE;
  if (!device_synchronize (self, error))
    return FALSE;
  for (guint c = self->n_classes; c-- > self->n_chunk_classes;)
    while (self->shared[c].head != NULL
           && self->reserved - self->shared[c].head->size >= bytes_to_keep)
      {
        Block *b = self->shared[c].head;

        shared_unlink (self, b);
        event_unref (self, g_steal_pointer (&b->event));
        block_retire (self, b, out);
      }
  for (chunk = self->chunks; chunk != NULL; chunk = chunk->next)
    chunk->n_idle = 0;
  for (guint c = 0; c < self->n_chunk_classes; c++)
    for (Block *b = self->shared[c].head; b != NULL; b = b->next)
      b->chunk->n_idle++;
  for (chunk = self->chunks; chunk != NULL && self->reserved > bytes_to_keep; chunk = next)
    {
      gsize csize;

      next = chunk->next;
      csize = cache_class_size (chunk->blocks[0].cls);
      if (chunk->n_idle != chunk->n_blocks
          || self->reserved - (guint64) chunk->n_blocks * csize < bytes_to_keep)
        continue;
      for (guint i = 0; i < chunk->n_blocks; i++)
        {
          shared_unlink (self, &chunk->blocks[i]);
          event_unref (self, g_steal_pointer (&chunk->blocks[i].event));
        }
      LIST_UNLINK (self->chunks, chunk);
      reserve_sub (self, (guint64) chunk->n_blocks * csize, chunk->up.size);
      chunk->next = out->chunks;
      out->chunks = chunk;
    }
  return TRUE;
}

/* Every front drained into the shared cache, then release_idle(): the out-of-memory flush and
 * trim. Cache.lock held. */
static gboolean
flush_idle (Cache *self, gsize bytes_to_keep, Retired *out, GError **error)
{
  fronts_stop (self);
  for (Front *f = self->fronts; f != NULL; f = f->next)
    front_drain (self, f);
  fronts_resume (self);
  return release_idle (self, bytes_to_keep, out, error);
}

/* ---- allocate and deallocate ----------------------------------------------------------------- */

static inline void
fill_allocation (MemresAllocation *alloc, Block *b, gsize size)
{
  alloc->address = b->address;
  alloc->size = size;
  alloc->plugin_data = b;
}

/* Above max_block: an upstream allocation of the buffer's own, not cached. */
G_GNUC_NO_INLINE
static gboolean
direct_allocate (MemresResource *mr, Cache *self, gsize size, MemresStream stream,
                 MemresAllocation *alloc, GError **error)
{
  if (!upstream_allocate (mr, self, size, stream, alloc, error))
    return FALSE;
  g_mutex_lock (&self->lock);
  self->direct++;
  self->direct_used += alloc->size;
  self->reserved += alloc->size;
  update_highs (self);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

G_GNUC_NO_INLINE
static gboolean
direct_deallocate (MemresResource *mr, Cache *self, MemresAllocation *alloc, MemresStream stream,
                   GError **error)
{
  gsize size = alloc->size;
  guint64 address = alloc->address;
  gboolean ok = memres_upstream_deallocate (mr, alloc, stream, error);

  /* a failed free that left the allocation in place leaves the buffer open (the core's rule) */
  if (!ok && alloc->address == address)
    return FALSE;
  g_mutex_lock (&self->lock);
  self->direct_used -= size;
  self->reserved -= size;
  g_mutex_unlock (&self->lock);
  return ok;
}

/* Classes above the chunked ones may serve a request from a cached block up to this many
 * classes larger (at most 19 % more bytes) before asking the upstream for a new one. */
#define CACHE_FIT_CLASSES 2
/* At a miss of those classes, free blocks beyond reserved / CACHE_IDLE_SHARE go back to the
 * upstream first (at most CACHE_RECYCLE_MAX of them), so that blocks of classes nobody asks for
 * any more do not pile up. */
#define CACHE_IDLE_SHARE  2
#define CACHE_RECYCLE_MAX 8

/* A front bin's slots, changed by the front's owner inside front_enter() (or with Cache.lock
 * held on its own front, or on a stopped one): bin_take() takes slot @i out, bin_put() adds @b;
 * both keep Front.cached (read by other threads) in step. */
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

/* The calling thread's front of @self, or NULL; with Cache.lock held, its owner may use it. */
static Front *
own_front (Cache *self)
{
  ThreadFronts *tf = thread_fronts_get ();

  return tf != NULL && self->slot >= 0 ? tf->fronts[self->slot] : NULL;
}

/* A block of class @cls freed on @stream from the calling thread's own front. Cache.lock
 * held. */
static Block *
own_front_take (Cache *self, guint cls, MemresStream stream)
{
  Front *f = own_front (self);
  FrontBin *bin;

  if (f == NULL)
    return NULL;
  bin = &f->bins[cls];
  for (guint i = bin->n; i-- > 0;)
    if (bin->blocks[i]->stream == stream)
      return bin_take (f, bin, i);
  return NULL;
}

/* Takes @b (an upstream allocation of its own, out of every cache) out of the reserve and onto
 * @out. Cache.lock held. */
static void
block_retire (Cache *self, Block *b, Retired *out)
{
  reserve_sub (self, b->size, b->up.size);
  b->next = out->blocks;
  out->blocks = b;
}

/* Gives what @r holds back to the upstream, ordered on @stream, after which nothing queued
 * before on @stream touches it; empties @r. Cache.lock not held. */
/* One upstream allocation of @self back to the upstream on @stream; a failure is a warning
 * (nobody is left to retry it). */
static void
give_back (Cache *self, MemresAllocation *up, MemresStream stream, const char *what)
{
  g_autoptr (GError) error = NULL;
  gsize size = up->size;

  if (!memres_upstream_deallocate (self->self_mr, up, stream, &error))
    g_warning ("cache: returning %s of %" G_GSIZE_FORMAT " bytes to the upstream failed: %s", what,
               size, error->message);
}

static void
retired_free (Cache *self, Retired *r, MemresStream stream)
{
  while (r->blocks != NULL)
    {
      Block *b = r->blocks;

      r->blocks = b->next;
      give_back (self, &b->up, stream, "a block");
      g_free (b);
    }
  while (r->chunks != NULL)
    {
      Chunk *chunk = r->chunks;

      r->chunks = chunk->next;
      give_back (self, &chunk->up, stream, "a chunk");
      g_free (chunk);
    }
}

/* Before a miss of class @cls for @stream: free blocks of other classes that @stream may use
 * (freed on it, or with an event it then waits on) while more than reserved / CACHE_IDLE_SHARE
 * bytes are idle, largest classes first: onto *@out (block_retire()). Cache.lock held. */
static void
recycle_idle (Cache *self, guint cls, MemresStream stream, Retired *out)
{
  Front *f = own_front (self);
  guint64 idle = self->shared_cached + fronts_cached (self);
  guint budget = CACHE_RECYCLE_MAX;

  for (guint c = self->n_classes; c-- > self->n_chunk_classes;)
    {
      if (c >= cls && c <= cls + CACHE_FIT_CLASSES)
        continue;
      for (Block *b = self->shared[c].head, *next; b != NULL; b = next)
        {
          gboolean mine = b->stream == stream && stream != CU_STREAM_PER_THREAD;

          next = b->next;
          if (budget == 0 || idle <= self->reserved / CACHE_IDLE_SHARE)
            return;
          if (!mine
              && (block_event (self, b) == NULL || !event_wait (self, b->event, stream, NULL)))
            continue;
          shared_unlink (self, b);
          event_unref (self, g_steal_pointer (&b->event));
          idle -= b->size;
          block_retire (self, b, out);
          budget--;
        }
      while (f != NULL && budget > 0 && idle > self->reserved / CACHE_IDLE_SHARE)
        {
          Block *b = own_front_take (self, c, stream);

          if (b == NULL)
            break;
          idle -= b->size;
          block_retire (self, b, out);
          budget--;
        }
    }
}

G_GNUC_NO_INLINE
static gboolean
allocate_slow (MemresResource *mr, Cache *self, guint cls, gsize size, MemresStream stream,
               MemresAllocation *alloc, GError **error)
{
  GError *local = NULL;
  MemresAllocation up;
  Retired retired = { NULL, NULL };
  Block *b;
  guint last = cls, n;

  if (cls >= self->n_chunk_classes)
    last = MIN (cls + CACHE_FIT_CLASSES, self->n_classes - 1);
  g_mutex_lock (&self->lock);
  b = NULL;
  for (guint c = cls; b == NULL && local == NULL && c <= last; c++)
    {
      b = c > cls ? own_front_take (self, c, stream) : NULL;
      if (b == NULL)
        b = shared_take (self, c, stream, &local);
    }
  if (b != NULL)
    self->shared_hits[cls]++;
  else if (local == NULL && cls >= self->n_chunk_classes)
    recycle_idle (self, cls, stream, &retired);
  g_mutex_unlock (&self->lock);
  retired_free (self, &retired, stream);
  /* a miss: the upstream is asked without the lock, then the block goes in under it */
  if (b == NULL && local == NULL && block_memory (mr, self, cls, stream, &up, &n, &local))
    {
      g_mutex_lock (&self->lock);
      if ((b = block_new (mr, self, cls, stream, &up, n, &local)) != NULL)
        {
          self->misses[cls]++;
          update_highs (self);
        }
      g_mutex_unlock (&self->lock);
      if (b == NULL)
        memres_upstream_deallocate (mr, &up, stream, NULL);
    }
  if (b == NULL)
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  fill_allocation (alloc, b, size);
  return TRUE;
}

/* The front's part of an allocation: a block of @size's class freed on @stream. */
G_ALWAYS_INLINE static inline gboolean
front_try_allocate (Front *f, Cache *self, gsize size, MemresStream stream, MemresAllocation *alloc)
{
  guint cls = cache_class_of (size);
  MemresStream s = normalize_stream (self, stream);
  FrontBin *bin = &f->bins[cls];

  if (G_UNLIKELY (!front_enter (f)))
    return FALSE;
  for (guint i = bin->n; i-- > 0;)
    {
      Block *b = bin->blocks[i];

      if (G_LIKELY (b->stream == s))
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

/* The front's part of a free: room in the class and in the lease. */
G_ALWAYS_INLINE static inline gboolean
front_try_deallocate (Front *f, Cache *self, Block *b)
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

/* The calling thread's front of @self, remembered as the one of @mr for the hot paths. */
static inline Front *
front_get_for (MemresResource *mr, Cache *self)
{
  Front *f = front_get (self);

  if (f != NULL)
    {
      __atomic_store_n (&f->owner->last_mr, mr, __ATOMIC_RELAXED);
      __atomic_store_n (&f->owner->last_front, f, __ATOMIC_RELEASE);
    }
  return f;
}

G_GNUC_NO_INLINE
static gboolean
allocate_general (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                  GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  Front *f;

  if (G_UNLIKELY (size > self->max_block))
    return direct_allocate (mr, self, size, stream, alloc, error);
  f = front_get_for (mr, self);
  if (f != NULL && front_try_allocate (f, self, size, stream, alloc))
    return TRUE;
  return allocate_slow (mr, self, cache_class_of (size), size, normalize_stream (self, stream),
                        alloc, error);
}

/* The hot path: the front of the instance this thread used last, found without a call. */
static gboolean
cache_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
                GError **error)
{
  ThreadFronts *tf = thread_fronts_get ();

  if (G_LIKELY (tf != NULL && __atomic_load_n (&tf->last_mr, __ATOMIC_RELAXED) == mr))
    {
      Front *f = __atomic_load_n (&tf->last_front, __ATOMIC_RELAXED);
      Cache *self = f->cache;

      if (G_LIKELY (size <= self->max_block) && front_try_allocate (f, self, size, stream, alloc))
        return TRUE;
    }
  return allocate_general (mr, size, stream, alloc, error);
}

/* Moves the blocks of class @cls in the calling thread's own front @f that were freed on @stream
 * to the shared cache, sharing @e: an event just recorded on @stream, after each of their frees
 * (the front is this thread's, and its blocks were freed by this thread). A spill then costs one
 * event for the whole bin instead of one per block. Cache.lock held. */
static void
front_spill (Cache *self, Front *f, guint cls, MemresStream stream, CacheEvent *e)
{
  FrontBin *bin = &f->bins[cls];

  for (guint i = bin->n; i-- > 0;)
    {
      Block *b = bin->blocks[i];

      if (b->stream != stream)
        continue;
      bin_take (f, bin, i);
      /* the lease goes with the bytes: leased + shared_cached stays within max_cached */
      f->budget -= b->size;
      self->leased -= b->size;
      b->event = e;
      e->refs++;
      shared_push (self, b);
    }
}

/* The front had no room: a bigger lease, else the shared cache (with an event on @stream, which the
 * class's front blocks freed on @stream join: front_spill()), else
 * (past max_cached) back to the upstream. */
G_GNUC_NO_INLINE
static gboolean
deallocate_slow (MemresResource *mr, Cache *self, Front *f, Block *b, MemresStream stream,
                 MemresStream caller_stream, GError **error)
{
  gsize csize = cache_class_size (b->cls);
  guint64 room, front_room;

  g_mutex_lock (&self->lock);
  room = self->max_cached - MIN (self->max_cached, self->leased + self->shared_cached);
  /* a front holds at most front_bytes: what one thread frees and others allocate (autograd's
   * backward thread, a consumer thread) reaches them through the shared cache */
  front_room = f != NULL ? MIN (room, self->front_bytes - MIN (self->front_bytes, f->budget)) : 0;
  if (f != NULL && front_room >= csize)
    {
      FrontBin *bin = &f->bins[b->cls];

      /* the calling thread's own front, and Cache.lock held: nobody else is inside it */
      if (bin->n < self->depth)
        {
          guint64 grant = MIN (front_room, MAX (CACHE_LEASE_QUANTUM, (guint64) csize));

          f->budget += grant;
          self->leased += grant;
          bin_put (f, bin, b);
          g_mutex_unlock (&self->lock);
          return TRUE;
        }
    }
  if (room < csize && b->chunk == NULL)
    {
      g_autoptr (GError) local = NULL;

      /* past max_cached: the memory goes back, ordered on the caller's stream; when that fails
       * (a stream that is gone, say), the block stays cached without an event instead: the
       * buffer is closed either way */
      gsize up_size = b->up.size;

      if (memres_upstream_deallocate (mr, &b->up, caller_stream, &local) || b->up.address == 0)
        {
          reserve_sub (self, csize, up_size);
          g_mutex_unlock (&self->lock);
          g_free (b);
          return TRUE;
        }
      g_debug ("cache: returning a block of %" G_GSIZE_FORMAT " bytes failed, kept: %s", csize,
               local->message);
      shared_push (self, b);
      g_mutex_unlock (&self->lock);
      return TRUE;
    }
  /* on the legacy stream, its event is recorded when another stream takes it (block_event()):
   * nothing to share, so no spill */
  if (self->events && stream != MEMRES_STREAM_LEGACY)
    {
      g_autoptr (GError) local = NULL;

      /* Without an event (the record failed) the block stays reusable on its own stream only. */
      b->event = event_record (self, stream, &local);
      if (b->event != NULL && f != NULL)
        front_spill (self, f, b->cls, stream, b->event);
    }
  shared_push (self, b);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

G_GNUC_NO_INLINE
static gboolean
deallocate_general (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                    GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  Block *b;
  Front *f;

  if (G_UNLIKELY (alloc->size > self->max_block))
    return direct_deallocate (mr, self, alloc, stream, error);
  b = alloc->plugin_data;
  b->stream = normalize_stream (self, stream);
  f = front_get_for (mr, self);
  if (f != NULL && front_try_deallocate (f, self, b))
    return TRUE;
  /* under Cache.lock, which every other user of a front holds, the front is ours again */
  return deallocate_slow (mr, self, f, b, b->stream, stream, error);
}

static gboolean
cache_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  ThreadFronts *tf = thread_fronts_get ();

  if (G_LIKELY (tf != NULL && __atomic_load_n (&tf->last_mr, __ATOMIC_RELAXED) == mr))
    {
      Front *f = __atomic_load_n (&tf->last_front, __ATOMIC_RELAXED);
      Cache *self = f->cache;
      Block *b = alloc->plugin_data;

      if (G_LIKELY (alloc->size <= self->max_block))
        {
          MemresStream s = normalize_stream (self, stream);

          /* Blocks carved from one chunk lie side by side, each used by another thread: the
           * hot path writes no block (a store of an unchanged value would still take the
           * neighbours' cache line away from them) */
          if (b->stream != s)
            b->stream = s;
          if (front_try_deallocate (f, self, b))
            return TRUE;
        }
    }
  return deallocate_general (mr, alloc, stream, error);
}

/* ---- life ------------------------------------------------------------------------------------ */

static const MemresOptionSpec cache_options[] = {
  { "max_block", MEMRES_OPTION_SIZE, "64MiB",
    "largest request served from size classes (rounded up to its class, 256 B to 4 GiB); "
    "larger ones are upstream allocations of their own, freed at close",
    NULL, 0, 0 },
  { "max_cached", MEMRES_OPTION_SIZE, "max",
    "most bytes of free blocks kept (front and shared caches); a free past it returns its "
    "block to the upstream (a block carved from a chunk stays until its chunk is free)",
    NULL, 0, 0 },
  { "chunk", MEMRES_OPTION_SIZE, "2MiB",
    "bytes taken from the upstream at a time for the small classes (those of at most "
    "chunk/16 bytes); 4 KiB to 1 GiB",
    NULL, 0, 0 },
  { "front", MEMRES_OPTION_INT, "8",
    "free blocks per size class in each thread's front cache (0: every free goes to the "
    "shared cache)",
    NULL, 0, CACHE_FRONT_MAX },
  { "front_bytes", MEMRES_OPTION_SIZE, "256MiB",
    "most bytes of free blocks in each thread's front cache; a free past it goes to the shared "
    "cache, where every thread finds it",
    NULL, 0, 0 },
};

static gboolean
cache_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  guint64 max_block = memres_options_get_size (options, "max_block");
  guint64 chunk = memres_options_get_size (options, "chunk");
  MemresMemoryFlags flags;

  if (max_block < 256 || max_block > CACHE_MAX_BLOCK_MAX)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "option \"max_block\" of kind \"cache\": %" G_GUINT64_FORMAT
                   " is not between 256 bytes and 4 GiB",
                   max_block);
      return FALSE;
    }
  if (chunk < 4096 || chunk > (G_GUINT64_CONSTANT (1) << 30))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "option \"chunk\" of kind \"cache\": %" G_GUINT64_FORMAT
                   " is not between 4 KiB and 1 GiB",
                   chunk);
      return FALSE;
    }
  self->self_mr = mr;
  self->upstream = memres_resource_get_upstream (mr);
  flags = memres_resource_get_flags (self->upstream);
  if (flags & MEMRES_MEMORY_GRAPH)
    {
      /* a block kept past its graph's launch would be an address no launch allocated */
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "kind \"cache\" cannot cache graph memory (upstream \"%s\"): its allocations "
                   "exist only inside launches of the graph that captured them",
                   memres_resource_get_kind_name (self->upstream));
      return FALSE;
    }
  self->events = (flags & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED)) != 0;
  self->device = MAX (memres_resource_get_device (self->upstream), 0);
  self->n_classes = cache_class_of ((gsize) max_block) + 1;
  self->max_block = cache_class_size (self->n_classes - 1);
  self->max_cached = memres_options_get_size (options, "max_cached");
  self->chunk_size = (gsize) chunk;
  self->n_chunk_classes = 0;
  while (self->n_chunk_classes < self->n_classes
         && cache_class_size (self->n_chunk_classes) <= chunk / CACHE_CHUNK_BLOCKS)
    self->n_chunk_classes++;
  self->depth = (guint) memres_options_get_int (options, "front");
  self->front_bytes = memres_options_get_size (options, "front_bytes");
  owner_fence_init ();
  g_once (&fronts_key_once, fronts_key_create, NULL);
  g_mutex_init (&self->lock);
  self->spare_events = g_ptr_array_new ();
  self->slot = -1;
  g_mutex_lock (&slots_lock);
  for (gint i = 0; i < CACHE_SLOTS && self->depth > 0; i++)
    if (slots[i] == NULL)
      {
        slots[i] = self;
        self->slot = i;
        break;
      }
  g_mutex_unlock (&slots_lock);
  return TRUE;
}

static void
cache_finalize (MemresResource *mr)
{
  Cache *self = memres_resource_get_private (mr);
  g_autoptr (GError) error = NULL;
  Retired retired = { NULL, NULL };

  g_mutex_lock (&slots_lock);
  g_mutex_lock (&self->lock);
  while (self->fronts != NULL)
    front_destroy (self, self->fronts);
  if (self->slot >= 0)
    slots[self->slot] = NULL;
  g_mutex_unlock (&slots_lock);
  if (!release_idle (self, 0, &retired, &error))
    g_warning ("cache: returning the cached blocks to the upstream failed: %s", error->message);
  if (self->chunks != NULL || self->reserved != 0)
    g_warning ("cache: %" G_GUINT64_FORMAT " bytes still reserved at finalize", self->reserved);
  if (self->spare_events->len > 0)
    {
      const MemresCudaDriver *drv;
      gboolean pushed;

      g_clear_error (&error);
      if ((drv = context_push (self, &pushed, &error)) != NULL)
        {
          for (guint i = 0; i < self->spare_events->len; i++)
            drv->cuEventDestroy (g_ptr_array_index (self->spare_events, i));
          memres_cuda_pop_context (pushed);
        }
      else
        g_warning ("cache: cannot destroy its events: %s", error->message);
    }
  g_ptr_array_unref (self->spare_events);
  g_mutex_unlock (&self->lock);
  retired_free (self, &retired, NULL);
  g_mutex_clear (&self->lock);
}

/* Cached blocks are not the upstream's allocations: nothing of theirs can be exported or
 * resized. */
static void
cache_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->flags &= ~(MEMRES_MEMORY_IPC_ENABLED | MEMRES_MEMORY_RESIZABLE | MEMRES_MEMORY_IMPORTED);
}

/* ---- statistics and trim --------------------------------------------------------------------- */

/* Bytes of the fronts' blocks, read with every front stopped. Cache.lock held. */
static guint64
fronts_cached_exact (Cache *self)
{
  guint64 sum = 0;

  fronts_stop (self);
  for (Front *f = self->fronts; f != NULL; f = f->next)
    sum += f->cached;
  fronts_resume (self);
  return sum;
}

static gboolean
cache_get_stats (MemresResource *mr, MemresStats *stats, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  guint64 cached;

  g_mutex_lock (&self->lock);
  cached = self->shared_cached + fronts_cached_exact (self);
  stats->reserved_current = reserved_bytes (self);
  stats->used_current = self->reserved - cached;
  self->reserved_high = MAX (self->reserved_high, stats->reserved_current);
  self->used_high = MAX (self->used_high, stats->used_current);
  stats->reserved_high = self->reserved_high;
  stats->used_high = self->used_high;
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
cache_reset_stats (MemresResource *mr, GError **error)
{
  Cache *self = memres_resource_get_private (mr);

  g_mutex_lock (&self->lock);
  self->reserved_high = reserved_bytes (self);
  self->used_high = self->reserved - self->shared_cached - fronts_cached_exact (self);
  g_mutex_unlock (&self->lock);
  return TRUE;
}

static gboolean
cache_trim (MemresResource *mr, gsize bytes_to_keep, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  GError *local = NULL;
  Retired retired = { NULL, NULL };
  gboolean ok;

  g_mutex_lock (&self->lock);
  ok = flush_idle (self, bytes_to_keep, &retired, error);
  g_mutex_unlock (&self->lock);
  retired_free (self, &retired, NULL);
  if (!ok)
    return FALSE;
  /* then the upstream's own reserve, where it has one */
  if (!memres_resource_trim (self->upstream, bytes_to_keep, &local))
    {
      if (!g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED))
        {
          g_propagate_error (error, local);
          return FALSE;
        }
      g_clear_error (&local);
    }
  return TRUE;
}

/* Counters (memres_resource_get_counters()): totals and, per class, (class bytes, hits,
 * misses, bytes cached). */
static gboolean
cache_get_counters (MemresResource *mr, GVariantDict *counters, GError **error)
{
  Cache *self = memres_resource_get_private (mr);
  GVariantBuilder classes;
  guint64 hits = 0, misses = 0, front_cached = 0;
  g_autofree guint64 *class_hits = g_new0 (guint64, self->n_classes);
  g_autofree guint64 *class_cached = g_new0 (guint64, self->n_classes);

  g_variant_builder_init (&classes, G_VARIANT_TYPE ("a(tttt)"));
  g_mutex_lock (&self->lock);
  fronts_stop (self);
  for (Front *f = self->fronts; f != NULL; f = f->next)
    {
      for (guint c = 0; c < self->n_classes; c++)
        {
          class_hits[c] += f->hits[c];
          class_cached[c] += (guint64) f->bins[c].n * cache_class_size (c);
        }
      front_cached += f->cached;
    }
  fronts_resume (self);
  for (guint c = 0; c < self->n_classes; c++)
    {
      class_hits[c] += self->shared_hits[c] + self->gone_hits[c];
      class_cached[c] += self->shared[c].n * cache_class_size (c);
      hits += class_hits[c];
      misses += self->misses[c];
      g_variant_builder_add (&classes, "(tttt)", (guint64) cache_class_size (c), class_hits[c],
                             self->misses[c], class_cached[c]);
    }
  g_variant_dict_insert (counters, "hits", "t", hits);
  g_variant_dict_insert (counters, "misses", "t", misses);
  g_variant_dict_insert (counters, "direct", "t", self->direct);
  g_variant_dict_insert (counters, "oom_flushes", "t", self->oom_flushes);
  g_variant_dict_insert (counters, "reserved", "t", reserved_bytes (self));
  g_variant_dict_insert (counters, "cached", "t", self->shared_cached + front_cached);
  g_variant_dict_insert (counters, "front_cached", "t", front_cached);
  g_variant_dict_insert (counters, "shared_cached", "t", self->shared_cached);
  g_variant_dict_insert (counters, "used", "t",
                         self->reserved - self->shared_cached - front_cached);
  g_variant_dict_insert (counters, "max_block", "t", (guint64) self->max_block);
  g_variant_dict_insert (counters, "max_cached", "t", self->max_cached);
  g_variant_dict_insert (counters, "events", "b", self->events);
  g_mutex_unlock (&self->lock);
  g_variant_dict_insert_value (counters, "classes", g_variant_builder_end (&classes));
  return TRUE;
}

static const MemresResourceOps cache_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = cache_init,
  .finalize = cache_finalize,
  .allocate = cache_allocate,
  .deallocate = cache_deallocate,
  .query = cache_query,
  .get_stats = cache_get_stats,
  .reset_stats = cache_reset_stats,
  .trim = cache_trim,
  .get_counters = cache_get_counters,
};

static const MemresKindInfo cache_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "cache",
  .description = "Caching pool adaptor: size classes, per-thread front caches, stream-safe reuse",
  .options = cache_options,
  .n_options = G_N_ELEMENTS (cache_options),
  .ops = &cache_ops,
  .instance_size = sizeof (Cache),
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_OWN_USAGE,
};

static gboolean
cache_plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &cache_kind, error);
}

MEMRES_PLUGIN_DEFINE (cache, "The cache adaptor: a caching pool over any resource",
                      cache_plugin_init)

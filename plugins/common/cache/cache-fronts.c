/* memres - CUDA memory resources
 * cache-fronts.c: the per-thread front caches, apart from their inline fast path
 * (cache-parts.h): each thread's table of fronts and its end at thread exit, the slots of
 * instances, a front's creation and destruction, taking every front from its owner
 * (cache_fronts_stop()) for trim, statistics and the out-of-memory flush, draining fronts into
 * the shared bins, and the lease of bytes a front may hold. */
#include "cache-parts.h"

#include <stdlib.h>
#include <string.h>

OWNER_FENCE_DEFINE;

pthread_key_t cache_fronts_key;
static GOnce fronts_key_once = G_ONCE_INIT;
#ifndef CACHE_TLS_KEY
__thread ThreadFronts *cache_thread_fronts __attribute__ ((tls_model ("initial-exec")));
#endif

static void
thread_fronts_set (ThreadFronts *tf)
{
#ifndef CACHE_TLS_KEY
  cache_thread_fronts = tf;
#endif
  pthread_setspecific (cache_fronts_key, tf);
}
static GMutex slots_lock; /* the table below, ThreadFronts entries, Front lists of instances */
static CacheParts *slots[CACHE_SLOTS];

static void thread_fronts_free (gpointer data);

static gpointer
fronts_key_create (gpointer data)
{
  if (pthread_key_create (&cache_fronts_key, thread_fronts_free) != 0)
    g_error ("cache: no pthread key left for the front caches");
  return NULL;
}

/* Takes every front of @self but the calling thread's own from its owner (who is then outside
 * it until cache_fronts_resume()): the taker's side of front_enter() (cache-parts.h). Lock
 * held. */
void
cache_fronts_stop (CacheParts *self)
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

void
cache_fronts_resume (CacheParts *self)
{
  for (Front *f = self->fronts; f != NULL; f = f->next)
    __atomic_store_n (&f->stop, 0, __ATOMIC_RELEASE);
}

/* Adds every free block of @self to @set: those of the shared bins and of every front. Lock
 * held, fronts stopped (cache_fronts_stop()): the snapshots of `cache` and `arena`. */
void
cache_free_blocks_collect (CacheParts *self, GHashTable *set)
{
  for (guint c = 0; c < self->n_classes; c++)
    {
      for (Block *b = self->shared[c].head; b != NULL; b = b->next)
        g_hash_table_add (set, b);
      for (Front *f = self->fronts; f != NULL; f = f->next)
        for (guint i = 0; i < f->bins[c].n; i++)
          g_hash_table_add (set, f->bins[c].blocks[i]);
    }
}

/* Moves every block of @f to the shared bins and gives its lease back. Lock held, and @f
 * stopped (cache_fronts_stop()) unless it is the calling thread's. */
void
cache_front_drain (CacheParts *self, Front *f)
{
  for (guint c = 0; c < self->n_classes; c++)
    {
      FrontBin *bin = &f->bins[c];

      while (bin->n > 0)
        cache_shared_push (self, bin->blocks[--bin->n]);
    }
  self->leased -= f->budget;
  f->budget = 0;
  f->cached = 0;
}

/* Unlinks @f from its instance, drains it, counts its hits as gone and frees it. slots_lock
 * and the lock held, on @f's thread (it exits) or in finalize (nobody uses the instance). */
static void
front_destroy (CacheParts *self, Front *f)
{
  cache_front_drain (self, f);
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

/* A thread exits: its blocks return to the shared bins (the pthread key's destructor). */
static void
thread_fronts_free (gpointer data)
{
  ThreadFronts *tf = data;

  g_mutex_lock (&slots_lock);
  for (guint i = 0; i < CACHE_SLOTS; i++)
    {
      Front *f = tf->fronts[i];
      CacheParts *parts;

      if (f == NULL)
        continue;
      parts = f->parts;
      g_mutex_lock (&parts->lock);
      front_destroy (parts, f);
      g_mutex_unlock (&parts->lock);
    }
  g_mutex_unlock (&slots_lock);
#ifndef CACHE_TLS_KEY
  if (cache_thread_fronts == tf)
    cache_thread_fronts = NULL; /* a free later in this thread's exit makes a new one */
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

/* The calling thread's front cache of @self, created on first use (front_get()); NULL without a
 * slot. */
G_GNUC_NO_INLINE Front *
cache_front_create (CacheParts *self)
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
  f->parts = self;
  f->owner = tf;
  g_mutex_lock (&slots_lock);
  g_mutex_lock (&self->lock);
  LIST_PUSH (self->fronts, f);
  tf->fronts[self->slot] = f;
  g_mutex_unlock (&self->lock);
  g_mutex_unlock (&slots_lock);
  return f;
}

/* Bytes of the fronts' blocks, read as their owners left them (not exact while they run). */
guint64
cache_fronts_cached (CacheParts *self)
{
  guint64 sum = 0;

  for (Front *f = self->fronts; f != NULL; f = f->next)
    sum += __atomic_load_n (&f->cached, __ATOMIC_RELAXED);
  return sum;
}

/* Bytes of the fronts' blocks, read with every front stopped. Lock held. */
guint64
cache_fronts_cached_exact (CacheParts *self)
{
  guint64 sum = 0;

  cache_fronts_stop (self);
  for (Front *f = self->fronts; f != NULL; f = f->next)
    sum += f->cached;
  cache_fronts_resume (self);
  return sum;
}

/* The calling thread's front of @self, or NULL; with the lock held, its owner may use it. */
Front *
cache_own_front (CacheParts *self)
{
  ThreadFronts *tf = thread_fronts_get ();

  return tf != NULL && self->slot >= 0 ? tf->fronts[self->slot] : NULL;
}

/* A block of class @cls and tag @tag (Block.tag; CACHE_TAG_ANY: any) freed on @stream from the
 * calling thread's own front. Lock held. */
Block *
cache_own_front_take (CacheParts *self, guint cls, MemresStream stream, guint tag)
{
  Front *f = cache_own_front (self);
  FrontBin *bin;

  if (f == NULL)
    return NULL;
  bin = &f->bins[cls];
  for (guint i = bin->n; i-- > 0;)
    if (bin->blocks[i]->stream == stream && (tag == CACHE_TAG_ANY || bin->blocks[i]->tag == tag))
      return bin_take (f, bin, i);
  return NULL;
}

/* Moves the blocks of tag @tag (Block.tag) of every front to the shared bins, with their lease
 * (as cache_front_spill() does): what a sleep of that tag gives back or parks is then there
 * alone, and the other tags' blocks stay in their fronts. Every front is stopped meanwhile. Lock
 * held. */
void
cache_fronts_drain_tag (CacheParts *self, guint tag)
{
  cache_fronts_stop (self);
  for (Front *f = self->fronts; f != NULL; f = f->next)
    for (guint c = 0; c < self->n_classes; c++)
      {
        FrontBin *bin = &f->bins[c];

        for (guint i = bin->n; i-- > 0;)
          {
            Block *b = bin->blocks[i];

            if (b->tag != tag)
              continue;
            bin_take (f, bin, i);
            f->budget -= b->size;
            self->leased -= b->size;
            cache_shared_push (self, b);
          }
      }
  cache_fronts_resume (self);
}

/* A free that found no room in the calling thread's own front @f (or NULL): puts @b there when
 * its class has a free slot and the front's lease can grow by the block's size, within @room
 * bytes (what the kind's cap on cached bytes leaves) and front_bytes. The lease grows by a
 * quantum at a time, so that the next frees of the thread fit without the lock. FALSE: @b is
 * still the caller's. Lock held (so nobody else is inside @f). */
gboolean
cache_front_lease_put (CacheParts *self, Front *f, Block *b, guint64 room)
{
  guint64 front_room;
  FrontBin *bin;
  guint64 grant;

  /* a front holds at most front_bytes: what one thread frees and others allocate (autograd's
   * backward thread, a consumer thread) reaches them through the shared bins */
  front_room = f != NULL ? MIN (room, self->front_bytes - MIN (self->front_bytes, f->budget)) : 0;
  if (f == NULL || front_room < b->size)
    return FALSE;
  bin = &f->bins[b->cls];
  if (bin->n >= self->depth)
    return FALSE;
  grant = MIN (front_room, MAX (CACHE_LEASE_QUANTUM, b->size));
  f->budget += grant;
  self->leased += grant;
  bin_put (f, bin, b);
  return TRUE;
}

/* Moves the blocks of class @cls in the calling thread's own front @f that were freed on @stream
 * to the shared bins, sharing @e: an event just recorded on @stream, after each of their frees
 * (the front is this thread's, and its blocks were freed by this thread). A spill then costs one
 * event for the whole bin instead of one per block. Lock held. */
void
cache_front_spill (CacheParts *self, Front *f, guint cls, MemresStream stream, CacheEvent *e)
{
  FrontBin *bin = &f->bins[cls];

  for (guint i = bin->n; i-- > 0;)
    {
      Block *b = bin->blocks[i];

      if (b->stream != stream)
        continue;
      bin_take (f, bin, i);
      /* the lease goes with the bytes: leased + shared_cached stays within the kind's cap */
      f->budget -= b->size;
      self->leased -= b->size;
      b->event = e;
      e->refs++;
      cache_shared_push (self, b);
    }
}

/* Puts @b, freed on @stream by the calling thread (its front @f, or NULL), in the shared bins.
 * Where cross-stream reuse needs events and @stream is not the legacy stream (whose event is
 * recorded when another stream takes the block: cache_block_event()), records one event on
 * @stream for @b and spills the front's blocks of @b's class freed on @stream under it. Without
 * an event (the record failed) @b stays reusable on its own stream only. Lock held. */
void
cache_shared_put (CacheParts *self, Front *f, Block *b, MemresStream stream)
{
  if (self->events && stream != MEMRES_STREAM_LEGACY)
    {
      g_autoptr (GError) local = NULL;

      b->event = cache_event_record (self, stream, &local);
      if (b->event != NULL && f != NULL)
        cache_front_spill (self, f, b->cls, stream, b->event);
    }
  cache_shared_push (self, b);
}

/* ---- life ---- */

void
cache_parts_init (CacheParts *self, gsize max_block, guint n_classes, guint depth,
                  guint64 front_bytes, gboolean events, gint device)
{
  self->max_block = max_block;
  self->hit_max = max_block;
  self->n_classes = n_classes;
  self->depth = depth;
  self->front_bytes = front_bytes;
  self->events = events;
  self->device = device;
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
}

void
cache_parts_stop (CacheParts *self)
{
  g_mutex_lock (&slots_lock);
  g_mutex_lock (&self->lock);
  while (self->fronts != NULL)
    front_destroy (self, self->fronts);
  if (self->slot >= 0)
    slots[self->slot] = NULL;
  g_mutex_unlock (&slots_lock);
}

void
cache_parts_at_fork (CacheParts *self, MemresForkPhase phase)
{
  if (self == NULL)
    {
      memres_fork_mutex (&slots_lock, phase);
      return;
    }
  if (phase == MEMRES_FORK_CHILD)
    for (Front *f = self->fronts; f != NULL; f = f->next)
      __atomic_store_n (&f->busy, 0, __ATOMIC_RELAXED);
  memres_fork_mutex (&self->lock, phase);
}

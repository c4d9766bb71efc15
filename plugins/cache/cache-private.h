/* memres - CUDA memory resources
 * cache-private.h: what the files of the `cache` adaptor share: its instance (the reusable parts
 * of plugins/common/cache/ first, then what is the adaptor's own: the upstream, the chunks, the
 * reserve), its chunks, and the functions one file calls in another.
 *
 * The files, by job:
 * - cache.c: the kind: options, init and finalize, statistics, counters, trim, the plugin;
 * - cache-alloc.c: allocate and close, from the inline front fast path to a miss;
 * - cache-upstream.c: memory from and back to the upstream: chunks carved into blocks, the
 *   reserve's accounting, the out-of-memory flush, and retirement (blocks and chunks taken out
 *   under the lock, given back after it);
 * - cache-sleep.c: sleep and wake over an upstream that can sleep, and the close of what sleeps;
 * - plugins/common/cache/: the per-thread fronts, the shared bins and the events. */
#pragma once

#include "../common/cache/cache-parts.h"

#define CACHE_MAX_BLOCK_MAX (G_GUINT64_CONSTANT (4) << 30)
#define CACHE_CHUNK_BLOCKS  16 /* a chunk holds at least this many blocks */

/* Classes above the chunked ones may serve a request from a cached block up to this many
 * classes larger (at most 19 % more bytes) before asking the upstream for a new one. */
#define CACHE_FIT_CLASSES 2
/* At a miss of those classes, free blocks beyond reserved / CACHE_IDLE_SHARE go back to the
 * upstream first (at most CACHE_RECYCLE_MAX of them), so that blocks of classes nobody asks for
 * any more do not pile up. */
#define CACHE_IDLE_SHARE  2
#define CACHE_RECYCLE_MAX 8

/* One upstream allocation carved into n_blocks blocks of one class. */
struct _Chunk
{
  MemresAllocation up;
  Chunk *prev, *next;
  guint n_blocks;
  guint n_idle; /* trim's count of blocks in the shared bins */
  /* asleep whole (cache-sleep.c): the upstream allocation put to sleep with the live blocks of
   * its tag, its free blocks parked (in no bin); @n_asleep of its blocks are live (marked
   * CACHE_BLOCK_ASLEEP), the chunk going back to the upstream when the last of them is closed.
   * Under parts.lock. */
  gboolean asleep;
  guint n_asleep;
  Block blocks[];
};

typedef struct
{
  CacheParts parts; /* first: the fast path reads its start; parts.lock guards the fields below */
  MemresResource *self_mr;  /* the instance itself (transfer none): upstream calls take it */
  MemresResource *upstream; /* transfer none: the core holds it for the adaptor */
  guint n_chunk_classes;    /* classes carved from chunks */
  guint64 max_cached;
  gsize chunk_size;
  gint device; /* the upstream's (memres_resource_get_device()), for the segments */
  /* the upstream places by tag (an upstream kind with MEMRES_KIND_TAGGED that can sleep, through
   * the adaptors that pass allocations: `arena`): a tagged buffer is the upstream's own
   * allocation (direct_allocate(), with the buffer's record), so that it lands in granules of its
   * tag there and sleeps with them; the hit paths are off (parts.hit_max 0) so that the general
   * paths see every call */
  gboolean by_tag;
  /* the upstream can sleep (its first layer that does not pass allocations has the sleep slot):
   * a chunk and a block of its own serve one tag (Block.tag), and an allocation takes only free
   * blocks of its buffer's tag (cache-alloc.c), so that a tag's sleep gives back that tag's free
   * blocks alone (cache-sleep.c); elsewhere every block has tag 0 */
  gboolean by_tag_blocks;

  /* under parts.lock */
  guint64 reserved, reserved_high, used_high;
  /* bytes the upstream gave beyond the class sizes of the blocks and chunks @reserved counts (an
   * upstream that rounds up, as vmm does to its granularity): held from it all the same, so part
   * of the reserve reported, but neither cached nor used */
  guint64 rounding;
  guint64 direct_used; /* bytes of live buffers above max_block */
  guint64 misses[CACHE_MAX_CLASSES];
  guint64 direct, oom_flushes;
  /* bytes of the free blocks parked in sleeping chunks (Chunk.asleep): neither cached nor used */
  guint64 parked;
  Chunk *chunks;
  /* the tags asleep (bit cache_tag_index()): the close of a buffer's own record of one of them
   * tells nothing of its segment (cache-sleep.c); atomic */
  guint64 asleep_tags;
  /* for the snapshot, which lists every block: the blocks of their own (Block *, chunk NULL)
   * the cache holds, used or free, from block_new() to their return (own_block_forget()); and
   * the live requests above max_block (their address to a DirectLive), from direct_allocate()
   * to their close. Each made at its first entry; under parts.lock. Neither is on a hit path:
   * an entry comes and goes with an upstream allocation. */
  GHashTable *own_blocks;
  GHashTable *direct_live;
} Cache;

/* A live request above max_block, for the snapshot. */
typedef struct
{
  guint64 size;
  MemresStream stream;
} DirectLive;

/* Block.size of a sleeping block of its own (cache-sleep.c): larger than any front's budget, so
 * that the close's hit path never keeps it */
#define CACHE_BLOCK_ASLEEP (G_MAXUINT64 / 4)

/* Memory on its way back to the upstream: taken out of the cache under the lock, given back
 * after it is released (retired_free()), since the upstream may be another cache, whose locks
 * would otherwise be taken inside ours in one thread and before ours in another. */
typedef struct
{
  Block *blocks; /* linked through Block.next */
  Chunk *chunks; /* linked through Chunk.next */
} Retired;

/* Block.fresh (the cache's use of it): carved from its chunk and never handed out since, so no
 * work of any stream can touch it (a chunk's sleep waits for no such block, cache-sleep.c) */

/* The tag of the segment of @b's chunk, or of @b when it is a block of its own: the tag its
 * blocks serve (Block.tag: one tag, in a stack that can sleep, Cache.by_tag_blocks), %NULL for
 * none (blocks that serve every tag). */
static inline const char *
block_tag_name (const Block *b)
{
  return cache_tag_name (b->tag);
}

/* The bytes of live buffers: what is reserved in blocks, less the free blocks @cached (fronts and
 * shared bins) and the parked ones. Lock held. */
static inline guint64
used_bytes (Cache *self, guint64 cached)
{
  return self->reserved - cached - self->parked;
}

/* What the cache holds from its upstream, in bytes. Lock held. */
static inline guint64
reserved_bytes (Cache *self)
{
  return self->reserved + self->rounding;
}

/* @class_bytes more (reserve_add()) or fewer (reserve_sub()) bytes of blocks in the reserve, held
 * as @up_size bytes of the upstream (>= @class_bytes). Lock held. */
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

/* @b, a block of its own, out of Cache.own_blocks: it goes back to the upstream. Lock held. */
static inline void
own_block_forget (Cache *self, Block *b)
{
  if (self->own_blocks != NULL)
    g_hash_table_remove (self->own_blocks, b);
}

/* @b, a block of its own of @class_bytes bytes over @up_size upstream bytes, went back to the
 * upstream: its bytes leave the counts and the block is freed. Lock not held. */
static inline void
own_block_returned (Cache *self, Block *b, guint64 class_bytes, guint64 up_size)
{
  g_mutex_lock (&self->parts.lock);
  reserve_sub (self, class_bytes, up_size);
  own_block_forget (self, b);
  g_mutex_unlock (&self->parts.lock);
  g_free (b);
}

/* cache-alloc.c */
gboolean cache_allocate (MemresResource *mr, gsize size, MemresStream stream,
                         MemresAllocation *alloc, GError **error);
gboolean cache_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream,
                           GError **error);

/* cache.c */
/* Whether the cache's buffer of record @alloc (at its allocate or close) is the upstream's own:
 * above max_block, or tagged over an upstream that places by tag (Cache.by_tag). */
static inline gboolean
cache_is_direct (Cache *self, const MemresAllocation *alloc, gsize size)
{
  return size > self->parts.max_block
         || (G_UNLIKELY (self->by_tag) && memres_allocation_get_tag (alloc) != NULL);
}
gboolean cache_trim (MemresResource *mr, gsize bytes_to_keep, GError **error);
/* cache-sleep.c: the sleep and wake slots; the close of a sleeping block (of its own, or of a
 * sleeping chunk: @alloc, its buffer's record), and whether a buffer's own record @alloc (in its
 * deallocate slot) sleeps */
gboolean cache_sleep (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                      GError **error);
gboolean cache_wake (MemresResource *mr, MemresAllocation *const *allocs, gsize n_allocs,
                     GError **error);
gboolean cache_deallocate_asleep (Cache *self, Block *b, MemresAllocation *alloc,
                                  MemresStream stream, GError **error);
gboolean cache_direct_is_asleep (Cache *self, const MemresAllocation *alloc);
/* cache-upstream.c */
/* the segment event of @up, an allocation of the cache's from its upstream, with tag @tag (the
 * buffer's, memres_allocation_get_tag(), for a buffer's own record; block_tag_name() for a chunk
 * or a block of its own) */
void cache_raise_segment (Cache *self, MemresSegmentEvent event, const MemresAllocation *up,
                          const char *tag);
/* the segment of @up with tag @tag, into @seg (for a batch of events: cache-sleep.c) */
void cache_segment_of (Cache *self, const MemresAllocation *up, const char *tag,
                       MemresSegment *seg);
void update_highs (Cache *self);
/* upstream_allocate() and upstream_give_back(): @own, @up is the cache's own (a chunk, a block of
 * its own), whose @tag the upstream is told too (memres_upstream_allocate_for_tag(): `vmm` tells
 * its segment with it); else a buffer's own record, which carries its tag to the upstream */
gboolean upstream_allocate (MemresResource *mr, Cache *self, gsize size, MemresStream stream,
                            const char *tag, gboolean own, MemresAllocation *alloc, GError **error);
gboolean block_memory (MemresResource *mr, Cache *self, guint cls, MemresStream stream, guint tag,
                       MemresAllocation *up, guint *n_blocks, GError **error);
Block *block_new (MemresResource *mr, Cache *self, guint cls, MemresStream stream, guint tag,
                  MemresAllocation *up, guint n, GError **error);
void chunks_count_idle (Cache *self);
gboolean cache_device_synchronize (Cache *self, GError **error);
gboolean release_idle (Cache *self, gsize bytes_to_keep, guint tag, Retired *out, GError **error);
gboolean flush_idle (Cache *self, gsize bytes_to_keep, Retired *out, GError **error);
void recycle_idle (Cache *self, guint cls, MemresStream stream, Retired *out);
void retired_free (Cache *self, Retired *r, MemresStream stream);
gboolean upstream_give_back (Cache *self, MemresAllocation *up, const char *tag, gboolean own,
                             MemresStream stream, GError **error);

/* memres - CUDA memory resources
 * buffer.c: allocation and lifetime of buffers (allocate, close, ref, unref). The
 * allocate/close pair is the hot path: a buffer structure from a per-thread cache, one count on
 * the calling thread's stripe of the resource (no cache line shared between threads), the slot
 * call; no locks, no lookups, no driver queries. A buffer's properties live in buffer-props.c,
 * resizing in buffer-resize.c, data movement in buffer-transfer.c, wrapping foreign memory in
 * buffer-wrap.c, the ordering of a close on another stream in buffer-streams.c. */
#include "memres-private.h"

#include <stdlib.h>

/* Buffer structures are recycled through a small per-thread cache: the allocate/close pair
 * then costs no malloc/free. The cache is part of the thread's hot-path block (hot-path.h,
 * MemresThread: _memres_thread.cache_head, cache_room; no call and no pointer to follow on the hot
 * path); a GPrivate registered at its first use frees what it holds when its thread exits. */
#define BUFFER_CACHE_MAX 256 /* 128-byte structures: at most 32 KiB per thread */

static void
buffer_cache_free (gpointer data)
{
  MemresThread *t = data; /* the exiting thread's own block */

  /* a buffer freed later in this thread's exit sets the cache up again */
  t->cache_set = FALSE;
  t->cache_room = 0;
  while (t->cache_head != NULL)
    {
      MemresBuffer *next = (MemresBuffer *) t->cache_head->mr;

      g_free (t->cache_head);
      t->cache_head = next;
    }
}

static GPrivate buffer_cache_cleanup = G_PRIVATE_INIT (buffer_cache_free);

/* A buffer structure (buffers.h): the buffer on a cache line of its own, and on the next its
 * link into its tag's list (sleep.h: MEMRES_SLEEP_LINK()), which only a tagged buffer of a stack
 * that can sleep touches; zeroed here, and left unlinked and alive again by whatever unlinks it
 * (so that a recycled structure needs no store to it). */
G_GNUC_NO_INLINE MemresBuffer *
_memres_buffer_struct_alloc (void)
{
  gpointer p;

  if (posix_memalign (&p, 64, MEMRES_BUFFER_STRUCT_SIZE) != 0)
    g_error ("out of memory: a buffer structure of %d bytes", MEMRES_BUFFER_STRUCT_SIZE);
  memset (MEMRES_SLEEP_LINK (p), 0, sizeof (MemresSleepLink));
  return p;
}

G_ALWAYS_INLINE static inline MemresBuffer *
buffer_struct_new (void)
{
  MemresBuffer *buf = _memres_thread.cache_head;

  if (buf == NULL)
    return _memres_buffer_struct_alloc ();
  _memres_thread.cache_head = (MemresBuffer *) buf->mr;
  _memres_thread.cache_room++;
  return buf;
}

/* @buf onto the thread's cache, which has room. */
G_ALWAYS_INLINE static inline void
buffer_cache_push (MemresBuffer *buf)
{
  buf->mr = (MemresResource *) _memres_thread.cache_head;
  _memres_thread.cache_head = buf;
  _memres_thread.cache_room--;
}

/* buffer_struct_free() for the calling thread's first buffer structure given back (its cache is
 * set up) and for a full cache (past BUFFER_CACHE_MAX the structure is freed). */
G_GNUC_NO_INLINE static void
buffer_struct_free_slow (MemresBuffer *buf)
{
  if (!_memres_thread.cache_set)
    {
      _memres_thread.cache_set = TRUE;
      _memres_thread.cache_room = BUFFER_CACHE_MAX;
      g_private_set (&buffer_cache_cleanup, &_memres_thread);
    }
  if (_memres_thread.cache_room == 0)
    g_free (buf);
  else
    buffer_cache_push (buf);
}

G_ALWAYS_INLINE static inline void
buffer_struct_free (MemresBuffer *buf)
{
  if (G_UNLIKELY (_memres_thread.cache_room == 0))
    buffer_struct_free_slow (buf);
  else
    buffer_cache_push (buf);
}

/* Everything of a new open buffer of @mr but its allocation record and its state (open, and its
 * tag: MemresBuffer.state). */
G_ALWAYS_INLINE static inline void
buffer_init (MemresBuffer *buf, MemresResource *mr, MemresStream stream)
{
  buf->ref = 1; /* g_atomic_ref_count_init() is a call into GLib on this hot path */
  buf->mr = mr;
  buf->dealloc_stream = stream;
  buf->device = mr->info.device;
  buf->flags = mr->info.flags;
  buf->ipc_mapping = NULL;
}

G_ALWAYS_INLINE static inline MemresBuffer *
buffer_new (MemresResource *mr, const MemresAllocation *alloc, MemresStream stream)
{
  MemresBuffer *buf = buffer_struct_new ();

  buf->alloc = *alloc;
  buf->state = MEMRES_BUFFER_OPEN_STATE (0);
  buffer_init (buf, mr, stream);
  return buf;
}

/* A new open buffer owning @alloc, holding a reference on @mr. */
MemresBuffer *
_memres_buffer_new (MemresResource *mr, const MemresAllocation *alloc, MemresStream stream)
{
  _memres_resource_add_allocated (mr, alloc->size);
  return buffer_new (mr, alloc, stream);
}

MemresBuffer *
_memres_buffer_new_imported (MemresResource *mr, const MemresAllocation *alloc, MemresStream stream,
                             MemresIpcMapping *mapping)
{
  MemresBuffer *buf = buffer_new (mr, alloc, stream);

  buf->ipc_mapping = mapping; /* released by mr->ipc's release_buffer hook */
  buf->flags |= MEMRES_MEMORY_IMPORTED;
  return buf;
}

/* @local, the error of an allocation or resize of @size bytes through @mr, to the caller
 * (buffers.h). */
G_GNUC_NO_INLINE gboolean
_memres_buffer_allocation_failed (MemresResource *mr, gsize size, GError *local, GError **error)
{
  if (g_error_matches (local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY))
    _memres_oom_report (mr, size, local);
  g_propagate_error (error, local);
  return FALSE;
}

/* memres_resource_allocate() for what its hot path leaves: a size of 0 or above G_MAXSSIZE, a
 * resource inherited through fork(), a kind that failed. */
G_GNUC_NO_INLINE static MemresBuffer *
allocate_slow (MemresResource *mr, gsize size, MemresStream stream, GError **error)
{
  MemresAllocation alloc = { 0, 0, NULL };
  MemresBuffer *buf;
  GError *local = NULL;
  guint tag;

  if (G_UNLIKELY (size > G_MAXSSIZE))
    {
      g_set_error (&local, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                   "cannot allocate %" G_GSIZE_FORMAT " bytes from a resource of kind \"%s\"", size,
                   mr->kind->name);
      _memres_buffer_allocation_failed (mr, size, local, error);
      return NULL;
    }
  if (!_memres_resource_check_usable (mr, "allocating", error))
    return NULL;
  if (size > 0 && !_memres_resource_call_allocate (mr, size, stream, &alloc, &local))
    {
      _memres_buffer_allocation_failed (mr, size, local, error);
      return NULL;
    }
  if (size > 0)
    return _memres_buffer_new (mr, &alloc, stream);
  /* an empty buffer carries its tag (no slot call: nothing to count), refused as any
   * allocation under a tag that sleeps on a stack that can sleep (sleep.h) */
  tag = _memres_thread.tag_scope;
  if (tag == 0 && _memres_tag_defaults != 0)
    tag = _memres_tag_resolve (stream, mr->info.device);
  if (tag != 0 && mr->sleep != NULL && !_memres_sleep_check_tag (mr, tag, error))
    return NULL;
  buf = _memres_buffer_new (mr, &alloc, stream);
  buf->tag = (guint16) tag;
  return buf;
}

/* A new tagged buffer of a stack that can sleep that _memres_sleep_link_fast() left, linked into
 * its tag's list under the lock (sleep.h); closed again when its tag began to sleep meanwhile. */
G_GNUC_NO_INLINE static MemresBuffer *
link_for_sleep (MemresResource *mr, MemresBuffer *buf, GError **error)
{
  if (G_LIKELY (_memres_sleep_link (mr, buf, error)))
    return buf;
  memres_buffer_close (buf, NULL, NULL);
  memres_buffer_unref (buf);
  return NULL;
}

/* The end of a successful allocate (allocate_fast()): the buffer counted on the calling thread's
 * stripe (assigned before the slot call) and filled. */
G_ALWAYS_INLINE static inline MemresBuffer *
allocate_done (MemresResource *mr, MemresBuffer *buf, MemresStream stream)
{
  _memres_resource_add_allocated_on (mr, _memres_thread.stripe_index, buf->alloc.size);
  buffer_init (buf, mr, stream);
  return buf;
}

/* allocate_fast() after a slot call that did not simply succeed (the slot's result @ok and error
 * @local): judged as _memres_resource_call_allocate() judges it. Out of line and given values
 * only, so that the hot path keeps no address across the slot call. A tagged buffer of a stack
 * that can sleep is linked by the caller (link_for_sleep()). Out of memory while buffers wait
 * for a capture's end (buffer-deferred.c): those whose capture has ended are closed, and the
 * slot is called again when any was. */
static G_GNUC_NO_INLINE MemresBuffer *
allocate_checked (MemresResource *mr, MemresBuffer *buf, gsize size, MemresStream stream,
                  gboolean tagged, gboolean ok, GError *local, GError **error)
{
  GError *failure = NULL;

  while (!_memres_resource_alloc_result_slow (mr, "allocate", ok, &local, size, stream, &buf->alloc,
                                              &failure))
    {
      if (g_error_matches (failure, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY)
          && _memres_buffer_deferred_flush () > 0)
        {
          g_clear_error (&failure);
          g_clear_error (&local);
          ok = _memres_buffer_slot_allocate (buf, mr, size, stream, tagged, &local);
          continue;
        }
      buffer_struct_free (buf);
      _memres_buffer_allocation_failed (mr, size, failure, error);
      return NULL;
    }
  return allocate_done (mr, buf, stream);
}

/* The hot path of memres_resource_allocate() (1 to G_MAXSSIZE bytes, a resource of this process)
 * for a buffer of tag @tag (0: none): the kind fills the allocation record of a recycled buffer
 * structure in place, and a success needs no copy. @tagged (a constant in both copies): the tag
 * is one that @mr's stack wants (MemresResource.tags_wanted); the untagged copy serves a tagged
 * buffer of any other stack too, its tag only kept in the buffer. A tagged buffer's record is the
 * thread's call record while the slot runs (tags.h), so that the counted layers it goes through
 * count it under its tag and the kinds of a stack that can sleep place it by its tag. */
G_ALWAYS_INLINE static inline MemresBuffer *
allocate_fast (MemresResource *mr, gsize size, MemresStream stream, gboolean tagged, guint tag,
               GError **error)
{
  MemresBuffer *buf;
  GError *local = NULL;
  gboolean ok;

  /* a stack that can sleep refuses a tag that sleeps (sleep.h); other stacks never look */
  if (tagged && G_UNLIKELY (mr->tags_wanted & MEMRES_TAGS_SLEEP)
      && !_memres_sleep_check_tag (mr, tag, error))
    return NULL;
  buf = buffer_struct_new ();
  /* the thread's stripe, before the slot call: after it, its count makes no call (a call there
   * would keep values in the registers that the slot call's need) */
  _memres_stripe_current ();
  buf->state = MEMRES_BUFFER_OPEN_STATE (tag); /* read through the call record (tags.h) */
  /* the record marked, the thread's call record when tagged (hot-path.h) */
  ok = _memres_buffer_slot_allocate (buf, mr, size, stream, tagged, &local);

  /* the checks of _memres_resource_call_allocate(), on the record the kind filled (with the
   * call record still set: a counted layer takes back a refused record's counts under its tag) */
  if (G_UNLIKELY (!(ok && local == NULL && _memres_allocation_plausible (&buf->alloc, size))))
    buf = allocate_checked (mr, buf, size, stream, tagged, ok, local, error);
  else
    buf = allocate_done (mr, buf, stream);
  _memres_buffer_call_end (tagged);
  /* a tagged buffer of a stack that can sleep, into its tag's list on the thread's stripe (the
   * untagged copy has no test) */
  if (tagged && (mr->tags_wanted & MEMRES_TAGS_SLEEP) && G_LIKELY (buf != NULL)
      && G_UNLIKELY (!_memres_sleep_link_fast (mr, buf, _memres_thread.stripe_index)))
    return link_for_sleep (mr, buf, error);
  return buf;
}

/**
 * memres_resource_allocate:
 * @mr: a #MemresResource
 * @size: bytes to allocate; 0 gives a valid empty buffer (address 0, size 0) without calling
 *   the kind: see below
 * @stream: the stream the allocation is ordered on (stream-ordered kinds), recorded as the
 *   buffer's deallocation stream; %NULL is the legacy default stream
 * @error: return location for a #GError, or %NULL
 *
 * Allocates a buffer from @mr through the kind's allocate slot (dmr: cuMemAllocFromPoolAsync();
 * host: `posix_memalign`). The buffer holds a reference on @mr. Thread-safe: any number of
 * threads may allocate from one resource at once. There is no alignment argument: every kind
 * memres ships aligns the address of a buffer of 1 byte or more to at least 256 bytes (the
 * conformance suite checks it for each kind under each adaptor), `host` to its `alignment`
 * option (256 by default).
 *
 * An allocation of 0 bytes succeeds with an empty buffer: open, of size 0 at address 0
 * (memres_buffer_get_pointer() %NULL), closable (once, twice, on any stream), and readable,
 * writable, fillable and copyable for 0 bytes. The core makes it: no layer's allocate slot
 * runs, nor any deallocate slot at its close, and the driver is not called.
 * memres_resource_get_stats() of @mr counts it among the live buffers
 * (#MemresStats.n_buffers, one more until its close) with 0 bytes used. No layer counts it as
 * an allocation, as none reached a layer: a `stats` layer's counters
 * (memres_stats_get_counters(): #MemresStatsCounters.count_current, count_total, the size
 * classes) and its tag counts (memres_resource_get_tag_counts()) leave it out, `track` does
 * not list it, `log` writes no line for it and `limit` charges nothing (RMM's statistics
 * adaptor counts a 0-byte allocate; an rmm::device_buffer of size 0 never calls its resource).
 * An empty buffer carries the calling thread's tag (memres_buffer_get_tag()), and a tag asleep
 * refuses it as it refuses any allocation. memres_buffer_resize() of it to a size above 0
 * allocates then, counted as an allocation of that size.
 *
 * When the kind runs out of memory (%MEMRES_ERROR_OUT_OF_MEMORY) while buffers whose last
 * reference went during a graph capture wait to be freed (see memres_buffer_unref()), those whose
 * capture has ended are freed and the allocate slot is called again, once for each time that
 * frees any.
 *
 * A size above `G_MAXSSIZE` (more than any memory holds) is refused by the core as an empty
 * buffer is made by it: no layer sees the request, so a `log` layer writes no line for it (no
 * `allocate failure`, which it writes for a size below that a layer refuses) and a `retry`
 * layer calls no handler; the error's report (memres_resource_get_oom_report()) is kept.
 *
 * Errors: %MEMRES_ERROR_OUT_OF_MEMORY when the memory cannot be had (always for sizes above
 * `G_MAXSSIZE`); %MEMRES_ERROR_NOT_SUPPORTED (an imported pool, a capturing stream given to a
 * kind that cannot allocate in a graph); %MEMRES_ERROR_INVALID_ARGUMENT (the `graph` kind, which
 * allocates only on a capturing stream, given another stream); %MEMRES_SLEEP_ERROR_TAG_ASLEEP
 * for an allocation of any size, 0 bytes too, under a tag asleep on @mr (memres-sleep.h); a
 * %MEMRES_CUDA_ERROR from the driver.
 *
 * Returns: (transfer full) (nullable): a new open buffer, or %NULL with @error set
 *
 * Since: 1.0
 */
MEMRES_HOT MemresBuffer *
memres_resource_allocate (MemresResource *mr, gsize size, MemresStream stream, GError **error)
{
  g_return_val_if_fail (mr != NULL, NULL);

  if (G_LIKELY (size - 1 < (gsize) G_MAXSSIZE && !_memres_resource_is_inherited (mr)))
    {
      guint tag = _memres_thread.tag_scope;

      /* one OR and one branch when no tag is set: no scope, no default (tags.h) */
      if (G_LIKELY ((tag | _memres_tag_defaults) == 0))
        return allocate_fast (mr, size, stream, FALSE, 0, error);
      if (G_UNLIKELY (tag == 0) && (tag = _memres_tag_resolve (stream, mr->info.device)) == 0)
        return allocate_fast (mr, size, stream, FALSE, 0, error);
      /* a tag no layer reads in a stack that cannot sleep: the untagged pair, the tag kept */
      if (G_LIKELY (mr->tags_wanted == 0))
        return allocate_fast (mr, size, stream, FALSE, tag, error);
      return allocate_fast (mr, size, stream, TRUE, tag, error);
    }
  return allocate_slow (mr, size, stream, error);
}

/* The deallocate slot of buffer_release_allocation() (its result in *@ok): FALSE when nothing was
 * released, a failure that left the address as it was (any other failure, a breach of the
 * contract included, is taken as released: _memres_resource_call_deallocate()). @tagged: the
 * record is the thread's call record around the slot call (for a layer that reads tags, or a
 * kind of a stack that can sleep). */
G_ALWAYS_INLINE static inline gboolean
release_slot (MemresBuffer *buf, MemresResource *mr, MemresStream stream, gboolean tagged,
              gboolean *ok, GError **error)
{
  guint64 address = buf->alloc.address;

  /* tagged: its tag uncounted (tags.h), its tag's placement told (sleep) */
  *ok = _memres_buffer_call_deallocate (buf, mr, stream, tagged, error);
  return G_LIKELY (*ok) || address == 0 || buf->alloc.address != address;
}

/* The end of a release: the buffer no longer @mr's, one buffer of @size bytes fewer on the
 * stripes (which may finalize @mr). */
G_ALWAYS_INLINE static inline void
release_done (MemresBuffer *buf, MemresResource *mr, gsize size)
{
  buf->mr = NULL;
  _memres_resource_remove_allocated (mr, size);
}

/* buffer_release_allocation() of a tagged buffer of a stack that can sleep that
 * _memres_sleep_unlink_fast() left (sleep.h): out of its tag's list under the lock, a sleep of the
 * tag in progress waited for, refused inside that sleep on its own thread (nothing released);
 * when the slot then releases nothing, back in a list with its entry; closed asleep, its entry
 * (backup) freed; closed on another thread than its list's, handed back to that list (before
 * the count, which may finalize the resource). */
G_GNUC_NO_INLINE static gboolean
release_tracked_slow (MemresBuffer *buf, MemresResource *mr, MemresStream stream, GError **error)
{
  gsize size = buf->alloc.size;
  MemresSleepEntry sleeping;
  MemresSleepUntrack how = _memres_sleep_untrack_begin (mr, buf, &sleeping, error);
  gboolean ok;

  if (how == 0)
    return FALSE;
  if (!release_slot (buf, mr, stream, TRUE, &ok, error))
    {
      _memres_sleep_untrack_end (mr, buf, how, &sleeping);
      return FALSE;
    }
  _memres_sleep_entry_clear (&sleeping);
  if (how == MEMRES_SLEEP_MARKED)
    _memres_sleep_push_dead (buf);
  release_done (buf, mr, size);
  return ok;
}

/* The part of buffer_release() for memory of @mr (buf->mr) that no IPC mapping holds: the
 * deallocate slot (not in the child of a fork(), which leaves inherited memory as it is:
 * fork.c), then one buffer fewer on the stripes. FALSE with buf->mr left set when nothing was
 * released (release_slot()). @tagged: the buffer has a tag that @mr's stack wants
 * (MemresResource.tags_wanted): its record is the thread's call record around the slot call, and
 * a stack that can sleep takes it out of its tag's list first (sleep.h: without a lock on the
 * thread that allocated it, its tag awake; else release_tracked_slow()). */
G_ALWAYS_INLINE static inline gboolean
buffer_release_allocation (MemresBuffer *buf, MemresResource *mr, MemresStream stream,
                           gboolean tagged, GError **error)
{
  /* the size as allocated: an adaptor's memres_upstream_deallocate() zeroes the record */
  gsize size = buf->alloc.size;
  gboolean ok = TRUE;

  if ((size > 0 || buf->alloc.address != 0) && !_memres_resource_is_inherited (mr))
    {
      if (tagged && (mr->tags_wanted & MEMRES_TAGS_SLEEP)
          && G_UNLIKELY (!_memres_sleep_unlink_fast (mr, buf)))
        return release_tracked_slow (buf, mr, stream, error);
      if (G_UNLIKELY (!release_slot (buf, mr, stream, tagged, &ok, error)))
        {
          /* still open: back in its tag's list */
          if (tagged && (mr->tags_wanted & MEMRES_TAGS_SLEEP))
            _memres_sleep_untrack_end (mr, buf, MEMRES_SLEEP_UNLINKED, NULL);
          return FALSE;
        }
    }
  release_done (buf, mr, size);
  return ok;
}

/* Frees what the buffer owns; called by whoever set buf->closed. On failure the buffer still
 * owns its memory when buf->mr is left set (nothing was released: the caller opens it again), and
 * not when the kind released it all the same (it set the allocation's address to 0). */
G_GNUC_NO_INLINE static gboolean
buffer_release (MemresBuffer *buf, MemresStream stream, MemresCloseFlags flags, GError **error)
{
  MemresResource *mr = buf->mr;
  gboolean ok = TRUE;

  if (mr != NULL)
    {
      /* One compare on the hot path: a close on the buffer's own stream needs no ordering. */
      if (G_UNLIKELY (stream != buf->dealloc_stream) && !(flags & MEMRES_CLOSE_CALLER_ORDERED)
          && !_memres_resource_is_inherited (mr)
          && !_memres_buffer_order_close (buf, stream, error))
        return FALSE;
      if (buf->ipc_mapping != NULL)
        {
          ok = mr->ipc->hooks->release_buffer (buf, mr, stream, error);
          if (ok || buf->ipc_mapping == NULL)
            buf->mr = NULL;
          return ok;
        }
      return buffer_release_allocation (buf, mr, stream, buf->tag != 0 && mr->tags_wanted != 0,
                                        error);
    }
  else if (buf->release != NULL)
    {
      MemresRelease *release = g_steal_pointer (&buf->release);

      if (G_LIKELY (!_memres_fork_skips_release (release->generation, buf->flags)))
        release->func (release->data);
      g_free (release);
    }
  return ok;
}

/* Sets buf->closed when it was not set (TRUE) with a locked exchange: for a buffer that other
 * threads hold too. */
static inline gboolean
buffer_mark_closed (MemresBuffer *buf)
{
  guint16 expected = 0;

  return __atomic_compare_exchange_n (&buf->closed, &expected, 1, FALSE, __ATOMIC_SEQ_CST,
                                      __ATOMIC_SEQ_CST);
}

/* buffer_close() for every case but its hot path's. */
G_GNUC_NO_INLINE static gboolean
buffer_close_general (MemresBuffer *buf, MemresStream stream, MemresCloseFlags flags,
                      GError **error)
{
  _memres_buffer_deferred_flush ();
  /* The only reference: no other thread can close concurrently, so no locked exchange is needed
   * (the allocate+close pair is the hot path). */
  if (__atomic_load_n (&buf->ref, __ATOMIC_ACQUIRE) == 1)
    {
      if (buf->closed)
        return TRUE;
      __atomic_store_n (&buf->closed, 1, __ATOMIC_RELAXED);
    }
  else if (!buffer_mark_closed (buf))
    return TRUE;
  if (G_LIKELY (buffer_release (buf, stream, flags, error)))
    return TRUE;
  if (buf->mr != NULL)
    __atomic_store_n (&buf->closed, 0, __ATOMIC_SEQ_CST); /* nothing released: open again */
  return FALSE;
}

/* The close of an open buffer held by the caller alone (nobody else closes it: no locked
 * exchange), of memory a kind allocated, on its deallocation stream: buffer_close()'s hot path,
 * for a buffer whose tag a layer reads or a sleep keeps (@tagged, as buffer_release_allocation()
 * says: a constant in both copies). */
G_ALWAYS_INLINE static inline gboolean
buffer_close_owned (MemresBuffer *buf, MemresResource *mr, MemresStream stream, gboolean tagged,
                    GError **error)
{
  __atomic_store_n (&buf->closed, 1, __ATOMIC_RELAXED);
  if (G_LIKELY (buffer_release_allocation (buf, mr, stream, tagged, error)))
    return TRUE;
  if (buf->mr != NULL)
    __atomic_store_n (&buf->closed, 0, __ATOMIC_RELAXED); /* nothing released: open again */
  return FALSE;
}

/* memres_buffer_close() and memres_buffer_close_full(): one body, inlined into both (a call of
 * the exported function from the other would go through the PLT on the hot path). Its hot path:
 * the only reference to an open buffer of memory a kind allocated, closed on its deallocation
 * stream (no ordering, no IPC mapping). */
G_ALWAYS_INLINE static inline gboolean
buffer_close (MemresBuffer *buf, MemresStream stream, MemresCloseFlags flags, GError **error)
{
  MemresResource *mr;

  g_return_val_if_fail (buf != NULL, FALSE);

  if (stream == NULL)
    stream = buf->dealloc_stream;
  mr = buf->mr;
  if (G_LIKELY (__atomic_load_n (&buf->ref, __ATOMIC_ACQUIRE) == 1 && mr != NULL
                && stream == buf->dealloc_stream && buf->ipc_mapping == NULL))
    {
      guint32 state = __atomic_load_n (&buf->state, __ATOMIC_RELAXED);

      /* open and untagged: the one test of the untagged hot path; open and tagged in a stack
       * that wants no tag (MemresResource.tags_wanted: no layer reads it, it cannot sleep): the
       * same close */
      if (G_LIKELY (state == 0)
          || ((state & MEMRES_BUFFER_CLOSED_BITS) == 0 && mr->tags_wanted == 0))
        return buffer_close_owned (buf, mr, stream, FALSE, error);
      /* open, tagged, its tag read below or kept by a stack that can sleep (sleep.h) */
      if ((state & MEMRES_BUFFER_CLOSED_BITS) == 0)
        return buffer_close_owned (buf, mr, stream, TRUE, error);
    }
  return buffer_close_general (buf, stream, flags, error);
}

/**
 * memres_buffer_close:
 * @buf: a #MemresBuffer
 * @stream: the stream the deallocation is ordered on, or %NULL for the buffer's recorded
 *   deallocation stream (memres_buffer_set_deallocation_stream())
 * @error: return location for a #GError, or %NULL
 *
 * memres_buffer_close_full() with %MEMRES_CLOSE_DEFAULT: frees the buffer's memory through the
 * kind's deallocate slot (dmr: cuMemFreeAsync() on @stream; host: free()) and drops the
 * buffer's reference on its resource; wrapped foreign memory gets its release function called.
 * A close on another stream than the deallocation stream is ordered after the deallocation
 * stream's work (see memres_buffer_close_full()). For memory that is device-accessible but not
 * stream-ordered (%MEMRES_MEMORY_STREAM_ORDERED not set: the kind frees it at once) the core
 * first waits for @stream (cuStreamSynchronize(), through memres_cuda_stream_synchronize()) before
 * the kind frees it; a failing wait fails the close with that error and leaves the buffer open
 * (see memres_buffer_close_full()). Idempotent: closing a closed buffer does
 * nothing and succeeds. Every other call on a closed buffer fails with %MEMRES_ERROR_CLOSED. May
 * be called from any thread, but not while another thread still uses the buffer.
 *
 * Errors: those of memres_buffer_close_full(); the buffer stays open then, except after a kind
 * that broke the deallocate contract (%MEMRES_ERROR_FAILED, see memres_buffer_close_full()).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.0
 */
MEMRES_HOT gboolean
memres_buffer_close (MemresBuffer *buf, MemresStream stream, GError **error)
{
  return buffer_close (buf, stream, MEMRES_CLOSE_DEFAULT, error);
}

/**
 * memres_buffer_close_full:
 * @buf: a #MemresBuffer
 * @stream: the stream the deallocation is ordered on, or %NULL for the buffer's recorded
 *   deallocation stream (memres_buffer_set_deallocation_stream())
 * @flags: #MemresCloseFlags
 * @error: return location for a #GError, or %NULL
 *
 * Closes @buf as memres_buffer_close() does. The buffer's deallocation stream (its allocation
 * stream unless memres_buffer_set_deallocation_stream() changed it) is taken as the last stream
 * that used the memory. A close on that stream (or with a %NULL @stream) frees in its order and
 * costs nothing more. A close of stream-ordered memory (%MEMRES_MEMORY_STREAM_ORDERED) on another
 * stream is made safe by default: an event is recorded on the deallocation stream and @stream
 * waits for it before the free (cuEventCreate(), cuEventRecord(), cuStreamWaitEvent(),
 * cuEventDestroy(): about the cost of one more stream-ordered call pair, paid only on such a
 * cross-stream close; see docs/streams.md), so that the memory is not reused on @stream while
 * work queued on the deallocation stream still uses it. No event is added when either stream is
 * capturing a graph (cuStreamIsCapturing(): the graph's dependencies order a free node there).
 * %MEMRES_CLOSE_CALLER_ORDERED skips the event for a caller that ordered @stream after every use
 * itself.
 *
 * Memory that is device-accessible but not stream-ordered (%MEMRES_MEMORY_DEVICE_ACCESSIBLE
 * without %MEMRES_MEMORY_STREAM_ORDERED in memres_buffer_get_flags(); in a stack, the base
 * layer's memory) is freed at once by its kind, not in @stream's order, so the core first waits for
 * @stream (cuStreamSynchronize() in the stream's context, through memres_cuda_stream_synchronize())
 * before the kind's deallocate slot runs: the close blocks until the work queued on @stream is
 * done. When that wait fails, the slot is not called, the close fails with the wait's error (its
 * message names the kind and the stream) and the buffer stays open; `CUDA_ERROR_DEINITIALIZED`
 * (the driver shutting down at process exit, when no work runs any more) is not a failure: the
 * slot frees. Host memory that the device cannot access is freed without a wait.
 *
 * When the close fails, nothing is released and the buffer stays open (its memory, address and
 * resource reference unchanged), so that it can be closed again, for example on a live stream
 * after a driver call of the close failed. @stream and the buffer's deallocation stream must
 * still exist: the driver does not promise an error for a destroyed stream's handle (it may
 * crash), so close a buffer before destroying its stream. (The one exception is a kind that
 * released the memory and cannot undo it: then the buffer is closed and the error still reported.)
 * Idempotent: closing a closed buffer does nothing and succeeds. May be called from any thread, but
 * not while another thread still uses the buffer.
 *
 * A deallocate slot that fails without setting an error breaks its contract (it may have freed
 * the memory), and so does one that fails and changes the allocation's address to another
 * nonzero value. The core reports such a breach once, as a critical warning naming the kind, and
 * counts it (`contract_breaches` in memres_resource_get_counters()); it takes the memory as
 * released and never calls deallocate for it again (a leak at worst, never a double free). The
 * buffer is then closed (memres_buffer_is_closed() says so) and the close fails with
 * %MEMRES_ERROR_FAILED saying so (for an address changed, with the slot's error, prefixed). Since
 * 2.0; until then the buffer stayed open and a later close or the last unref called deallocate
 * again.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT for @flags other than those of #MemresCloseFlags
 * (nothing is closed, on an open or a closed buffer); %MEMRES_CUDA_ERROR from the ordering
 * (cuEventRecord(), cuStreamWaitEvent()), from the wait before freeing memory that is not
 * stream-ordered (cuStreamSynchronize(), or the context calls around it) or from the kind's
 * deallocate slot; %MEMRES_ERROR_NO_DRIVER when ordering or the wait needs a driver that does not
 * load; %MEMRES_ERROR_FAILED when the deallocate slot broke its contract (see above: the buffer
 * is closed); %MEMRES_SLEEP_ERROR_BUSY for a buffer whose tag is being put to sleep or woken on
 * this very thread (a segment event callback inside memres_resource_sleep() or _wake(): the
 * buffer stays open; on another thread the close waits for the sleep or wake instead).
 *
 * Returns: %TRUE on success
 *
 * Since: 1.2
 */
MEMRES_HOT gboolean
memres_buffer_close_full (MemresBuffer *buf, MemresStream stream, MemresCloseFlags flags,
                          GError **error)
{
  g_return_val_if_fail (buf != NULL, FALSE);

  if (G_UNLIKELY (flags & ~MEMRES_CLOSE_CALLER_ORDERED))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "close flags 0x%x: the known flags are MEMRES_CLOSE_CALLER_ORDERED (0x%x)",
                   (guint) flags, (guint) MEMRES_CLOSE_CALLER_ORDERED);
      return FALSE;
    }
  return buffer_close (buf, stream, flags, error);
}

/**
 * memres_buffer_ref:
 * @buf: a #MemresBuffer
 *
 * Adds a reference. Thread-safe.
 *
 * Returns: (transfer full): @buf
 *
 * Since: 1.0
 */
MemresBuffer *
memres_buffer_ref (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, NULL);

  g_atomic_ref_count_inc (&buf->ref);
  return buf;
}

/* A buffer structure to be freed whose close failed for good, still open in its tag's list
 * (sleep.h): out of it; TRUE when its list holds the structure now. */
static gboolean
buffer_forget_link (MemresBuffer *buf, MemresResource *mr)
{
  return MEMRES_SLEEP_LINK (buf)->list != NULL && mr->sleep != NULL
         && _memres_sleep_forget (mr, buf);
}

/* memres_buffer_unref() of a buffer that is not both closed and held only by the caller. */
G_GNUC_NO_INLINE static void
buffer_unref_general (MemresBuffer *buf)
{
  gboolean kept = FALSE;

  _memres_buffer_deferred_flush ();
  /* The only reference: nobody else can change the count, so no locked decrement is needed
   * (the allocate+close pair is the hot path). */
  if (g_atomic_int_get (&buf->ref) != 1)
    {
      if (!g_atomic_ref_count_dec (&buf->ref))
        return;
      /* The last reference went here, on a race with another unref (each read a count above
       * one): the structure is this call's alone. Hold it as one reference again, as the count
       * reads when nobody else held one, so that a tag list's reference taken below counts from
       * one and the last check does not decrement a count of zero. */
      g_atomic_int_set (&buf->ref, 1);
    }
  /* Usually closed already: read before the (locked) exchange. */
  if (!__atomic_load_n (&buf->closed, __ATOMIC_SEQ_CST) && buffer_mark_closed (buf))
    {
      GError *error = NULL;

      if (!buffer_release (buf, buf->dealloc_stream, MEMRES_CLOSE_DEFAULT, &error))
        {
          gboolean deinitialized;

          /* refused while its stream captures a graph: closed after the capture ends */
          if (_memres_buffer_defer_close (buf, error, memres_buffer_unref))
            {
              g_error_free (error);
              return;
            }
          deinitialized = g_error_matches (error, MEMRES_CUDA_ERROR, CUDA_ERROR_DEINITIALIZED);
          memres_cuda_warn_release_failure (
              error, "Closing a buffer of %" G_GSIZE_FORMAT " bytes failed", buf->alloc.size);
          g_clear_error (&error);
          /* Process exit: the memory went with the driver; let the resource go too. */
          if (buf->mr != NULL && deinitialized && buf->ipc_mapping == NULL)
            {
              MemresResource *mr = g_steal_pointer (&buf->mr);

              /* out of its tag's list before the structure goes (and the resource with the
               * count below) */
              if (buffer_forget_link (buf, mr))
                kept = TRUE;
              /* counted on the stripes, as in release */
              _memres_resource_remove_allocated (mr, buf->alloc.size);
            }
          /* Nobody is left to close it again: after all work of its device is done, free it on
           * the legacy stream rather than leak it. */
          if (buf->mr != NULL && !deinitialized && _memres_buffer_wait_device (buf)
              && !buffer_release (buf, MEMRES_STREAM_LEGACY, MEMRES_CLOSE_CALLER_ORDERED, NULL))
            g_warning ("A buffer of %" G_GSIZE_FORMAT " bytes could not be freed: its memory "
                       "stays allocated",
                       buf->alloc.size);
          if (buf->mr != NULL && buffer_forget_link (buf, buf->mr))
            kept = TRUE;
        }
    }
  if (kept) /* its list's now, which frees it once unlinked */
    return;
  /* closed here on another thread than its tag's list's: that list holds a reference of its own
   * until it unlinks the structure (sleep.h), and frees it then unless this one is still held */
  if (G_UNLIKELY (g_atomic_int_get (&buf->ref) != 1) && !g_atomic_ref_count_dec (&buf->ref))
    return;
  buffer_struct_free (buf);
}

/**
 * memres_buffer_unref:
 * @buf: (transfer full): a #MemresBuffer
 *
 * Drops a reference. The last reference to an open buffer closes it on its deallocation
 * stream; a failure there is logged with memres_cuda_warn_release_failure() (a `g_warning`,
 * silent for `CUDA_ERROR_DEINITIALIZED`, which the driver returns while the process exits), and
 * then, since nobody can close the buffer again, it is freed on the legacy stream after all work
 * of its device's primary context (cuCtxSynchronize()) is done. Thread-safe.
 *
 * The one exception is memory that is not stream-ordered (vmm, `pinned:mode=legacy`,
 * `managed:pool=none`, or a stack on them) whose deallocation stream is capturing a graph
 * (cuStreamIsCapturing()): its free must wait for the stream, which the capture forbids
 * (memres_cuda_stream_synchronize() refuses it; cuCtxSynchronize() would fail with
 * `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`). Since 2.0 such a buffer is neither leaked nor
 * warned about: memres keeps it, still counted as allocated, and closes it on its deallocation
 * stream at the first of these calls, from any thread, that finds the stream's capture ended:
 * memres_buffer_unref() of a buffer that is open or shared, memres_buffer_close() of a shared
 * buffer or on another stream than the buffer's, memres_resource_trim(),
 * memres_resource_unref(), memres_stream_synchronize(), and an allocation of any resource that
 * runs out of memory (which then tries again). Its resource stays alive until then. The stream
 * must still exist when that happens (as for any close). Before 2.0 the close failed and the
 * buffer leaked with a warning.
 *
 * Since: 1.0
 */
void
memres_buffer_unref (MemresBuffer *buf)
{
  g_return_if_fail (buf != NULL);

  /* the hot path: the last reference to a closed buffer (nobody else can change the count) */
  if (G_LIKELY (__atomic_load_n (&buf->ref, __ATOMIC_ACQUIRE) == 1
                && __atomic_load_n (&buf->closed, __ATOMIC_RELAXED)))
    buffer_struct_free (buf);
  else
    buffer_unref_general (buf);
}

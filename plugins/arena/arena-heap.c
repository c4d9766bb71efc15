/* memres - CUDA memory resources
 * arena-heap.c: the address range of the `arena` kind as free ranges: best fit (the smallest
 * free range that holds a request, by a tree ordered on (tag, size, address)), neighbours of the
 * same tag coalesced at every insert (two hash tables, by start and by end address).
 *
 * A range's tag is the stream of the last free that made it (normalized: the legacy stream is
 * MEMRES_STREAM_LEGACY), or NULL once it is settled. A tagged range is reused at once by
 * allocations on its stream, whose order puts them after the free; its bytes stay held, so its
 * granules stay mapped. Each tagged range holds an event recorded on its stream after its last
 * free. Settling (arena_heap_settle()) makes tagged ranges settled once their events are done:
 * every stream may then use them, and their granules, once no other bytes hold them, are idle.
 * Without a wait (before the arena would create physical memory), the arena's own watch stream
 * waits on the events and is queried (cuStreamWaitEvent, cuStreamQuery: no call blocks); with a
 * wait (out of memory, trim, finalize), after cuCtxSynchronize. All under parts.lock. */
#include "arena-private.h"

static gint
range_cmp (gconstpointer a, gconstpointer b, gpointer unused)
{
  const Range *x = a, *y = b;

  if (x->tag != y->tag)
    return (guintptr) x->tag < (guintptr) y->tag ? -1 : 1;
  if (x->size != y->size)
    return x->size < y->size ? -1 : 1;
  if (x->addr != y->addr)
    return x->addr < y->addr ? -1 : 1;
  return 0;
}

void
arena_heap_init (Arena *self)
{
  self->free_tree = g_tree_new_full (range_cmp, NULL, NULL, g_free);
  self->by_start = g_hash_table_new (g_direct_hash, g_direct_equal);
  self->by_end = g_hash_table_new (g_direct_hash, g_direct_equal);
}

static gboolean
unref_event (gpointer key, gpointer value, gpointer data)
{
  Range *r = key;

  cache_event_unref (data, g_steal_pointer (&r->event));
  return FALSE;
}

/* Every range freed, their events unreferenced (parts.lock held, before cache_parts_clear()). */
void
arena_heap_clear (Arena *self)
{
  g_tree_foreach (self->free_tree, unref_event, &self->parts);
  g_clear_pointer (&self->by_start, g_hash_table_unref);
  g_clear_pointer (&self->by_end, g_hash_table_unref);
  g_clear_pointer (&self->free_tree, g_tree_destroy);
}

#define KEY(a) GSIZE_TO_POINTER ((gsize) (a))

static void
range_unlink (Arena *self, Range *r)
{
  g_hash_table_remove (self->by_start, KEY (r->addr));
  g_hash_table_remove (self->by_end, KEY (r->addr + r->size));
  g_tree_steal (self->free_tree, r);
  if (r->tag != NULL)
    self->tagged_bytes -= r->size;
}

static void
range_free (Arena *self, Range *r)
{
  cache_event_unref (&self->parts, r->event);
  g_free (r);
}

static void
range_link (Arena *self, Range *r)
{
  g_hash_table_insert (self->by_start, KEY (r->addr), r);
  g_hash_table_insert (self->by_end, KEY (r->addr + r->size), r);
  g_tree_insert (self->free_tree, r, r);
  if (r->tag != NULL)
    self->tagged_bytes += r->size;
}

/* [addr, addr + size) is free, tagged @tag (NULL: settled; its bytes must be dropped by the
 * caller) with @event (recorded on @tag after the free; the caller's reference is taken),
 * merged with free neighbours of the same tag, whose events the newer @event replaces. */
void
arena_heap_insert (Arena *self, guint64 addr, guint64 size, MemresStream tag, CacheEvent *event)
{
  Range *left = g_hash_table_lookup (self->by_end, KEY (addr));
  Range *right = g_hash_table_lookup (self->by_start, KEY (addr + size));
  Range *r;

  if (left != NULL && left->tag == tag)
    {
      range_unlink (self, left);
      addr = left->addr;
      size += left->size;
      range_free (self, left);
    }
  if (right != NULL && right->tag == tag)
    {
      range_unlink (self, right);
      size += right->size;
      range_free (self, right);
    }
  r = g_new (Range, 1);
  r->addr = addr;
  r->size = size;
  r->tag = tag;
  r->event = event;
  r->queued = FALSE;
  range_link (self, r);
}

/* The smallest free range tagged @tag of at least @size bytes, or NULL. */
Range *
arena_heap_best_fit (Arena *self, MemresStream tag, guint64 size)
{
  Range key = { 0, size, tag };
  GTreeNode *node = g_tree_lower_bound (self->free_tree, &key);
  Range *r = node != NULL ? g_tree_node_key (node) : NULL;

  return r != NULL && r->tag == tag ? r : NULL;
}

/* Takes @size bytes of @r, its first ones or with @at_end its last ones (the rest stays free
 * with its tag); returns their address. */
guint64
arena_heap_take (Arena *self, Range *r, guint64 size, gboolean at_end)
{
  guint64 addr = at_end ? r->addr + r->size - size : r->addr;

  range_unlink (self, r);
  if (r->size > size)
    {
      if (!at_end)
        r->addr += size;
      r->size -= size;
      range_link (self, r);
    }
  else
    range_free (self, r);
  return addr;
}

static gboolean
collect_tagged (gpointer key, gpointer value, gpointer data)
{
  Range *r = key;

  if (r->tag != NULL)
    g_ptr_array_add (data, r);
  return FALSE;
}

/* Without @wait: the watch stream is made to wait for the event of every tagged range, then
 * asked whether it is idle; only then are they all settled (a stream held back keeps them all
 * tagged: the caller then creates memory instead, and nothing waits). With @wait (trim, the
 * out-of-memory flush, finalize): after the device's work is done (cuCtxSynchronize), every
 * tagged range is settled. */
gboolean
arena_heap_settle (Arena *self, gboolean wait, GError **error)
{
  g_autoptr (GPtrArray) tagged = NULL;

  if (self->tagged_bytes == 0)
    return TRUE;
  tagged = g_ptr_array_new ();
  g_tree_foreach (self->free_tree, collect_tagged, tagged);
  if (wait)
    {
      if (!memres_cuda_device_synchronize (self->device, error))
        return FALSE;
    }
  else
    {
      const MemresCudaDriver *drv;
      gboolean pushed;
      CUresult r = CUDA_SUCCESS;

      if ((drv = cache_context_push (&self->parts, &pushed, error)) == NULL)
        return FALSE;
      for (guint i = 0; i < tagged->len && r == CUDA_SUCCESS; i++)
        {
          Range *range = g_ptr_array_index (tagged, i);

          if (range->queued)
            continue;
          r = drv->cuStreamWaitEvent (self->watch, range->event->event, 0);
          range->queued = r == CUDA_SUCCESS;
        }
      if (r == CUDA_SUCCESS)
        r = drv->cuStreamQuery (self->watch);
      memres_cuda_pop_context (pushed);
      if (r != CUDA_SUCCESS)
        return TRUE; /* not yet (or no answer): nothing settled */
    }
  for (guint i = 0; i < tagged->len; i++)
    {
      Range *r = g_ptr_array_index (tagged, i);
      guint64 addr = r->addr, size = r->size;

      range_unlink (self, r);
      range_free (self, r);
      arena_span_drop (self, addr, size);
      arena_heap_insert (self, addr, size, NULL, NULL);
    }
  self->settles++;
  return TRUE;
}

/* A new extent of @size bytes (a multiple of ARENA_ALIGN) for an allocation on @tag (a
 * normalized stream): a free range of that stream's if one fits as tightly as a settled one,
 * else a settled range, its granules backed (idle granules moved there first). When backing it
 * would create physical memory, or nothing fits, the tagged ranges are settled first and the
 * search made again. */
gboolean
arena_extent_new (Arena *self, guint64 size, MemresStream tag, guint64 *addr, GError **error)
{
  gboolean settled = FALSE, at_end;

  for (;;)
    {
      Range *mine = tag != NULL && tag != CU_STREAM_PER_THREAD
                        ? arena_heap_best_fit (self, tag, size)
                        : NULL;
      Range *any = arena_heap_best_fit (self, NULL, size);

      if (mine != NULL && (any == NULL || mine->size <= any->size))
        {
          *addr = arena_heap_take (self, mine, size, FALSE);
          return TRUE;
        }
      if (!settled && self->tagged_bytes > 0
          && (any == NULL || arena_span_unbacked (self, any->addr, size) > self->n_idle_mapped))
        {
          if (!arena_heap_settle (self, FALSE, error))
            return FALSE;
          settled = TRUE;
          continue;
        }
      if (any == NULL)
        {
          g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY,
                       "arena: no free range of %" G_GUINT64_FORMAT
                       " bytes in its %" G_GUINT64_FORMAT " bytes of address space",
                       size, self->va_size);
          return FALSE;
        }
      /* the end of the range that needs fewer granules backed: next to memory in use */
      at_end = arena_span_unbacked (self, any->addr + any->size - size, size)
               < arena_span_unbacked (self, any->addr, size);
      *addr = arena_heap_take (self, any, size, at_end);
      if (!arena_span_hold (self, *addr, size, error))
        {
          arena_heap_insert (self, *addr, size, NULL, NULL);
          return FALSE;
        }
      return TRUE;
    }
}

/* The extent [addr, addr + size) is free, freed on @tag (NULL: settled already): an event
 * recorded on @tag marks the free; when that fails, a wait for @tag settles the extent at once.
 * On failure (neither worked) nothing changed. */
gboolean
arena_extent_free (Arena *self, guint64 addr, guint64 size, MemresStream tag, GError **error)
{
  CacheEvent *event = NULL;

  if (tag != NULL && (event = cache_event_record (&self->parts, tag, NULL)) == NULL)
    {
      if (!memres_cuda_stream_synchronize (self->device, tag, error))
        return FALSE;
      tag = NULL;
    }
  if (tag == NULL)
    arena_span_drop (self, addr, size);
  arena_heap_insert (self, addr, size, tag, event);
  return TRUE;
}

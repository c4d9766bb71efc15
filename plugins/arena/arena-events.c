/* memres - CUDA memory resources
 * arena-events.c: the events that tell the `arena` kind when a stream is past a free of its
 * (the settling of ranges freed on it, arena-heap.c; the reaping of lent memory's old addresses,
 * arena-unmap.c), kept per stream in the order they were recorded (a StreamLine).
 *
 * Order. A stream runs its work in order, so an event recorded on it is done only if every
 * event recorded on it before is. A poll of a stream (arena_line_poll()) first asks the newest
 * event the caller waits for (a settle: the line's newest; a reap: the newest an old address
 * holds), cuEventQuery: when it is done, every older one is, and they all leave the line marked
 * done (CacheEvent.done) without a query. When it is not, the older ones are asked oldest first,
 * stopping at the first that is not done: the later ones cannot be, and are not asked. An event
 * that only the line still holds (every range and address that held it reused, or merged into a
 * newer one) leaves it unasked. So a stream caught up costs one query per poll, a stream held
 * back two, however many ranges it freed.
 *
 * Asking again. Settling (before the arena would create memory) always polls. Reaping runs at
 * every placement of an extent: after the n-th reap in a row that found a stream's oldest event
 * not done, the next 2^(n-2) - 1 reaps (at most 15; none after the first) skip that stream
 * (StreamLine.skip), so that a stream held back for a whole training step costs a few queries,
 * not one per allocation (each query is a driver call on the allocating thread), while a stream
 * found not done once is asked again at the next reap. An event found done starts the count
 * again. Settles ask whatever the count. Old addresses whose events are known done go at the next
 * reap without a query.
 *
 * One event for many closes (docs/arena.md, "Streams"). A large close on a stream S needs an
 * event recorded on S after the close, so that another stream gets the range only once S is past
 * it. An event recorded later than that is as safe (it is done later, never earlier), so one
 * event recorded after several closes serves them all. When it may be recorded later is the
 * question: only while S is certainly alive, since recording on a destroyed stream is undefined
 * (the cache's rule, plugins/common/cache/cache-bins.c). The legacy default stream lives as long
 * as the context: a close on it records nothing; its range holds the line's pending event (a
 * CacheEvent without a CUevent yet), shared by every close on the legacy stream since the last
 * record, and recorded (one cuEventRecord, after the last close it covers) when a decision needs
 * it, from any call: a settle, a lending, a reap of an address that holds it; or at the
 * ARENA_CLOSES_PER_EVENT-th close it covers or once they freed event_bytes bytes (the option, 64
 * MiB by default), so that a stream whose host runs far ahead still gets an event every few closes
 * and its early frees can settle while later ones are queued. The bytes counted are those that wait
 * for the pending event: the close's own, and those of a free neighbour whose event is recorded
 * that its range joins (the merged range holds the newest event, so it waits for the pending one
 * too): without them, a step's last closes, recorded only inside the next step, kept the step's
 * largest ranges from settling at its start (805 granules remapped a step in
 * tests/test-arena-steps.c's legacy run, against 34 with an event per close). Any other stream may
 * be destroyed right after its close (and a close on a destroyed stream must fail with the driver's
 * error): each close on it records its own event at the close, as before. Lending needs an event
 * after every free of the lending stream: the line's newest (after its pending one is recorded), or
 * a new one when the line has none.
 *
 * After a wait for the whole device (trim, the out-of-memory flush, finalize), every event of
 * every line is done (arena_lines_all_done()), pending ones included: those are then never
 * recorded. All under parts.lock. */
#include "arena-private.h"

static void
line_free (gpointer data)
{
  g_free (data);
}

void
arena_lines_init (Arena *self)
{
  self->lines = g_hash_table_new_full (g_direct_hash, g_direct_equal, NULL, line_free);
}

/* Every line's references dropped (finalize, before cache_parts_clear()). */
void
arena_lines_clear (Arena *self)
{
  GHashTableIter iter;
  StreamLine *line;

  if (self->lines == NULL)
    return;
  g_hash_table_iter_init (&iter, self->lines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &line))
    {
      CacheEvent *e;

      while ((e = g_queue_pop_head (&line->recorded)) != NULL)
        cache_event_unref (&self->parts, e);
      cache_event_unref (&self->parts, g_steal_pointer (&line->pending));
    }
  g_clear_pointer (&self->lines, g_hash_table_unref);
}

/* The line of @stream (normalized, not NULL), made if it has none. */
static StreamLine *
line_get (Arena *self, MemresStream stream)
{
  StreamLine *line = g_hash_table_lookup (self->lines, stream);

  if (line == NULL)
    {
      line = g_new0 (StreamLine, 1);
      line->stream = stream;
      g_queue_init (&line->recorded);
      g_hash_table_insert (self->lines, stream, line);
    }
  return line;
}

/* @e (a reference of the line's) appended as the newest event recorded on the line's stream.
 * When the line has grown to twice its length after the last pruning, the events only the line
 * holds leave it (nobody needs their answer): the line stays as long as the events its stream's
 * ranges and addresses hold, at a cost amortized over the records. */
static void
line_push (Arena *self, StreamLine *line, CacheEvent *e)
{
  g_queue_push_tail (&line->recorded, e);
  if (line->recorded.length < MAX (2 * line->pruned, 8))
    return;
  for (GList *l = line->recorded.head, *next; l != NULL; l = next)
    {
      CacheEvent *old = l->data;

      next = l->next;
      if (old->refs == 1)
        {
          g_queue_delete_link (&line->recorded, l);
          cache_event_unref (&self->parts, old);
        }
    }
  line->pruned = line->recorded.length;
}

/* The line's pending event recorded now on its stream (the legacy one): cuEventRecord, after
 * every close it covers; dropped unrecorded when nothing but the line holds it. TRUE when it has
 * none; FALSE with @error when the record fails (it stays pending). */
static gboolean
line_record (Arena *self, StreamLine *line, GError **error)
{
  CacheEvent *fresh;

  if (line->pending == NULL)
    return TRUE;
  if (line->pending->refs == 1)
    {
      cache_event_unref (&self->parts, g_steal_pointer (&line->pending));
      line->n_pending = 0;
      line->pending_bytes = 0;
      return TRUE;
    }
  if ((fresh = cache_event_record (&self->parts, line->stream, error)) == NULL)
    return FALSE;
  line->pending->event = fresh->event;
  g_free (fresh);
  line_push (self, line, g_steal_pointer (&line->pending));
  line->n_pending = 0;
  line->pending_bytes = 0;
  return TRUE;
}

/* The event of a large close on @stream (normalized, not NULL), a new reference: on the legacy
 * stream the line's pending one (recorded at the ARENA_CLOSES_PER_EVENT-th close it covers, or
 * once event_bytes free bytes (0: never) wait for it, @waiting of them this close's: its own and
 * those of the recorded ranges it joins; else when a decision needs it); on any other a new one
 * recorded now (cuEventRecord; NULL with @error when that fails: the caller waits for the stream
 * instead). */
CacheEvent *
arena_close_event (Arena *self, MemresStream stream, guint64 waiting, GError **error)
{
  StreamLine *line = line_get (self, stream);
  CacheEvent *e;

  if (stream == MEMRES_STREAM_LEGACY)
    {
      if (line->pending == NULL)
        {
          line->pending = g_new0 (CacheEvent, 1);
          line->pending->refs = 1; /* the line's */
        }
      e = line->pending;
      e->refs++;
      line->pending_bytes += waiting;
      if (++line->n_pending >= ARENA_CLOSES_PER_EVENT
          || (self->event_bytes > 0 && line->pending_bytes >= self->event_bytes))
        {
          g_autoptr (GError) local = NULL;

          if (!line_record (self, line, &local))
            g_debug ("arena: recording an event on the legacy stream failed (%s); tried at the "
                     "next decision",
                     local->message);
        }
      return e;
    }
  if ((e = cache_event_record (&self->parts, stream, error)) == NULL)
    return NULL;
  e->refs++; /* the line's (the record's is the caller's) */
  line_push (self, line, e);
  return e;
}

/* An event recorded on @stream (normalized, not NULL) after every close on it so far, a new
 * reference (a lending's, arena-lend.c): the line's pending one recorded now, else its newest,
 * else a new one (cuEventRecord). NULL with @error when a record fails. */
CacheEvent *
arena_stream_event (Arena *self, MemresStream stream, GError **error)
{
  StreamLine *line = line_get (self, stream);
  CacheEvent *e;

  if (!line_record (self, line, error))
    return NULL;
  if ((e = g_queue_peek_tail (&line->recorded)) == NULL)
    {
      if ((e = cache_event_record (&self->parts, stream, error)) == NULL)
        return NULL;
      e->refs++; /* the caller's, before the line's (line_push() may prune) */
      line_push (self, line, e);
      return e;
    }
  e->refs++;
  return e;
}

/* @e, a pending event (not recorded yet, not done), recorded now on the legacy stream (a reap of
 * an address that holds it). FALSE when the record fails. */
gboolean
arena_event_record (Arena *self, CacheEvent *e)
{
  StreamLine *line = g_hash_table_lookup (self->lines, MEMRES_STREAM_LEGACY);
  g_autoptr (GError) local = NULL;

  g_return_val_if_fail (line != NULL && line->pending == e, FALSE);
  if (line_record (self, line, &local))
    return TRUE;
  g_debug ("arena: recording an event on the legacy stream failed: %s", local->message);
  return FALSE;
}

/* The answer about @e: cuEventQuery, in the device's primary context (pushed at the first query
 * of a poll, *@drv set then). */
static CUresult
event_ask (Arena *self, CacheEvent *e, const MemresCudaDriver **drv, gboolean *pushed)
{
  if (*drv == NULL && (*drv = cache_context_push (&self->parts, pushed, NULL)) == NULL)
    return CUDA_ERROR_INVALID_CONTEXT;
  return (*drv)->cuEventQuery != NULL ? (*drv)->cuEventQuery (e->event) : CUDA_ERROR_NOT_SUPPORTED;
}

/* The line's events up to @upto (included; all of them when @upto is NULL) out of it, marked
 * done. */
static void
line_pop_done (Arena *self, StreamLine *line, CacheEvent *upto)
{
  CacheEvent *e;

  while ((e = g_queue_pop_head (&line->recorded)) != NULL)
    {
      gboolean last = e == upto;

      e->done = TRUE;
      cache_event_unref (&self->parts, e);
      if (last)
        break;
    }
}

/* Polls @stream's line for @upto (an event on it that the caller waits for; NULL: the newest,
 * for a settle, which records the pending event first when something besides the line holds it):
 * @upto is asked first (cuEventQuery), and when it is done, so is every event recorded before it,
 * which leave the line marked done without a query; else the events before it are asked oldest
 * first until one is not done. Events only the line holds leave it unasked. A reap's poll
 * (@reaping) within the stream's skips (arena-events.c's top) asks nothing. FALSE when a query
 * fails (neither done nor not ready: no answer; nothing more is marked). */
gboolean
arena_line_poll (Arena *self, MemresStream stream, gboolean reaping, CacheEvent *upto)
{
  StreamLine *line = g_hash_table_lookup (self->lines, stream);
  const MemresCudaDriver *drv = NULL;
  gboolean pushed = FALSE, ok = TRUE, reached = TRUE;
  CacheEvent *e;
  CUresult r = CUDA_SUCCESS;

  if (line == NULL)
    return TRUE;
  if (!reaping && line->pending != NULL && line->pending->refs > 1)
    {
      g_autoptr (GError) local = NULL;

      if (!line_record (self, line, &local))
        g_debug ("arena: recording an event on the legacy stream failed: %s", local->message);
    }
  if (reaping && line->skip > 0)
    {
      line->skip--;
      return TRUE;
    }
  if (upto == NULL)
    upto = g_queue_peek_tail (&line->recorded);
  if (upto != NULL && g_queue_find (&line->recorded, upto) == NULL)
    upto = NULL; /* known done already */
  if (upto != NULL && (r = event_ask (self, upto, &drv, &pushed)) == CUDA_SUCCESS)
    line_pop_done (self, line, upto);
  else if (upto != NULL && r != CUDA_ERROR_NOT_READY)
    ok = FALSE;
  else if (upto != NULL)
    {
      reached = FALSE;
      /* @upto not done: the ones before it, oldest first, until one is not done */
      while ((e = g_queue_peek_head (&line->recorded)) != upto)
        {
          if (e->refs > 1)
            {
              if ((r = event_ask (self, e, &drv, &pushed)) == CUDA_ERROR_NOT_READY)
                break;
              if (r != CUDA_SUCCESS)
                {
                  ok = FALSE;
                  break;
                }
              e->done = TRUE;
            }
          /* done, or held by nobody else: out of the line */
          g_queue_pop_head (&line->recorded);
          cache_event_unref (&self->parts, e);
        }
      /* a reap's: 0 skips after the first not done in a row, then 1, 3, 7, 15 */
      if (ok && reaping && ++line->not_done >= 2)
        line->skip = (1u << MIN (line->not_done - 2, 4)) - 1;
    }
  if (ok && reached)
    line->not_done = line->skip = 0;
  if (drv != NULL)
    memres_cuda_pop_context (pushed);
  if (g_queue_is_empty (&line->recorded) && line->pending == NULL)
    g_hash_table_remove (self->lines, stream);
  return ok;
}

/* After a wait for the whole device: every event of every line done, pending ones included
 * (their closes came before the wait); the lines emptied. */
void
arena_lines_all_done (Arena *self)
{
  GHashTableIter iter;
  StreamLine *line;

  g_hash_table_iter_init (&iter, self->lines);
  while (g_hash_table_iter_next (&iter, NULL, (gpointer *) &line))
    {
      CacheEvent *e;

      while ((e = g_queue_pop_head (&line->recorded)) != NULL)
        {
          e->done = TRUE;
          cache_event_unref (&self->parts, e);
        }
      if (line->pending != NULL)
        {
          line->pending->done = TRUE;
          cache_event_unref (&self->parts, g_steal_pointer (&line->pending));
        }
      g_hash_table_iter_remove (&iter);
    }
}

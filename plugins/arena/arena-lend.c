/* memres - CUDA memory resources
 * arena-lend.c: the physical memory of whole granules freed on a stream, lent to that stream's
 * next allocation at a second address while the free drains.
 *
 * A range freed on stream S stays tagged S until the device is past the free: its granules may
 * not be unmapped (work queued on S may still use their addresses), so before lending, an
 * allocation on S that found no free range big enough created memory beside them. Yet S's own
 * allocations are ordered after S's frees: the memory of a granule whose bytes all lie in a
 * range freed on S can serve S's new extent at once, at any address, if the old address stays
 * mapped until S is past the free. So when backing an extent for S would create memory (no
 * spare, no idle granule), arena_span_hold() asks arena_lend_pick() for such granules (donors),
 * and maps each donor's handle at a granule of the new extent as well (cuMemMap of the same
 * CUmemGenericAllocationHandle, cuMemSetAccess; arena_granule_lend()): nothing created.
 *
 * Stream safety. The donor's bytes are taken out of their free range (no allocation reuses the
 * old address) and the old mapping is *retired*: kept, held, until an event on S recorded after
 * every free of S before the lending (the donor's included; arena_stream_event(): S's newest, or
 * one recorded then) is done; then arena_lend_reap() unmaps it ("about to be
 * unmapped" delivered first) and its address becomes a settled free range without memory. The
 * new granule's bytes outside the extent become free and tagged S with that event, as if S had
 * freed them then: another stream gets them only after they settle, that is after the event,
 * after the donor's old work. The extent's own bytes are S's buffer: their free (on S, or on
 * another stream that waits for S first, as every close on another stream does) comes after.
 * So no byte of lent memory is reachable by another stream before S is past the donor's free.
 * Only S's own frees are lent, and only to S (the legacy stream counts as one stream; the
 * per-thread default stream, one handle for many streams, never lends).
 *
 * Shared granules. Lending takes whole granules only; free bytes of S in a granule that also
 * holds a live buffer stay pinned. So an end granule of S's new extent that the extent covers at
 * most half of, at offsets [lo, hi), may be mapped with the memory of such a granule (the donor,
 * arena_lend_pick_part()) whose bytes [lo, hi) are S's free ones: the two addresses then use
 * different bytes of one granule of memory. The donor's bytes [lo, hi) and the new granule's
 * other bytes are withheld (out of the free ranges, held, so neither address is ever idle) until
 * the donor has no byte in use (arena_shared_resolve(), at a free on S or a settle): then the
 * donor's address is retired as a lent granule's, and the withheld bytes of the new granule
 * become free, tagged S with the event of that free (or settled when every donor byte was).
 * Another stream reaches the donor's old bytes through the new address only after S is past
 * them. Counters `granules_shared`, `shared_pending`.
 *
 * The lending of a placement is committed (arena_lend_commit()) once the extent is placed, or
 * undone (arena_lend_abort()) when the placement fails: the second mappings unmapped, the
 * donors left where they were. Statistics: lending creates no memory and maps none, so the
 * physical bytes (reserved) do not change; counter `granules_lent`. All under parts.lock. */
#include "arena-private.h"

void
arena_lend_init (Arena *self)
{
  self->lend_donors = g_array_new (FALSE, FALSE, sizeof (guint));
  self->lent = g_array_new (FALSE, FALSE, sizeof (LentPair));
  self->retired = g_array_new (FALSE, FALSE, sizeof (Retired));
  self->shared = g_array_new (FALSE, FALSE, sizeof (Shared));
}

/* Finalize (after arena_granules_release_all(), which unmapped every retired mapping). */
void
arena_lend_clear (Arena *self)
{
  for (guint i = 0; self->retired != NULL && i < self->retired->len; i++)
    cache_event_unref (&self->parts, g_array_index (self->retired, Retired, i).event);
  cache_event_unref (&self->parts, g_steal_pointer (&self->lend_event));
  g_clear_pointer (&self->retired, g_array_unref);
  g_clear_pointer (&self->shared, g_array_unref);
  g_clear_pointer (&self->lent, g_array_unref);
  g_clear_pointer (&self->lend_donors, g_array_unref);
}

/* Whether granule @g is a donor of the placement in progress already. */
static gboolean
picked (Arena *self, guint g)
{
  for (guint i = 0; i < self->lend_donors->len; i++)
    if (g_array_index (self->lend_donors, guint, i) == g)
      return TRUE;
  for (guint i = 0; i < self->lent->len; i++)
    if (g_array_index (self->lent, LentPair, i).from == g)
      return TRUE;
  return FALSE;
}

/* Whether the placement in progress has its event (taken at the first donor: an event on
 * lend_stream after every free of it, arena_stream_event(), so after the donors' frees). */
static gboolean
lend_event_ready (Arena *self)
{
  return self->lend_event != NULL
         || (self->lend_event = arena_stream_event (self, self->lend_stream, NULL)) != NULL;
}

/* Up to @n donors for the placement in progress (lend_stream's, outside [lend_lo, lend_hi)):
 * mapped granules whose bytes all lie in one free range tagged lend_stream, onto lend_donors;
 * the placement's event recorded on lend_stream with the first. Returns how many. */
guint
arena_lend_pick (Arena *self, guint n)
{
  Range key = { 0, self->granularity, self->lend_stream };
  guint64 mask = self->granularity - 1;
  guint found = 0;

  for (Range *r = arena_tree_lower_bound (&self->free_tree, &key); r != NULL && found < n;
       r = arena_tree_next (&self->free_tree, r))
    {
      guint64 end = r->addr + r->size;

      if (r->tag != self->lend_stream)
        break;
      for (guint64 a = (r->addr + mask) & ~mask; a + self->granularity <= end && found < n;
           a += self->granularity)
        {
          guint g = arena_granule (self, a);

          if ((a < self->lend_hi && a + self->granularity > self->lend_lo) || self->handle[g] == 0
              || self->retired_at[g] || self->unmapping[g] || picked (self, g))
            continue;
          g_array_append_val (self->lend_donors, g);
          found++;
        }
    }
  if (found > 0 && !lend_event_ready (self))
    {
      g_array_set_size (self->lend_donors, 0);
      return 0;
    }
  return found;
}

/* A donor for the bytes [lo, hi) (offsets) of granule @g, an end granule of the placement in
 * progress that the extent covers in part: a mapped granule of the same tag outside the extent,
 * not retired nor shared already, whose bytes [lo, hi) lie in one free range tagged lend_stream
 * while others of its bytes do not (a whole free granule is arena_lend_pick()'s). Its index, or
 * -1. */
static gint
find_part (Arena *self, guint g, guint64 lo, guint64 hi, guint64 ext_lo, guint64 ext_hi)
{
  Range key = { 0, hi - lo, self->lend_stream };
  guint64 mask = self->granularity - 1;

  for (Range *r = arena_tree_lower_bound (&self->free_tree, &key); r != NULL;
       r = arena_tree_next (&self->free_tree, r))
    {
      guint64 end = r->addr + r->size;

      if (r->tag != self->lend_stream)
        break;
      /* the granules whose bytes [lo, hi) lie in @r */
      for (guint64 a = ((r->addr - lo + mask) & ~mask); a + hi <= end; a += self->granularity)
        {
          guint b = arena_granule (self, a);

          if (a + lo < r->addr || (r->addr <= a && a + self->granularity <= end)
              || (a < ext_hi && a + self->granularity > ext_lo) || self->handle[b] == 0
              || self->retired_at[b] || self->shared_at[b] || self->unmapping[b]
              || self->gtag[b] != self->gtag[g] || picked (self, b)
              || arena_reservation_of (self, a) != arena_reservation_of (self, a + hi - 1))
            continue;
          return (gint) b;
        }
    }
  return -1;
}

gint
arena_lend_pick_part (Arena *self, guint g, guint64 lo, guint64 hi)
{
  gint b = find_part (self, g, lo, hi, self->lend_lo, self->lend_hi);

  return b >= 0 && lend_event_ready (self) ? b : -1;
}

/* The free range tagged @tag that holds [addr, addr + size), or NULL. */
static Range *
range_holding (Arena *self, MemresStream tag, guint64 addr, guint64 size)
{
  Range *r = arena_heap_range_at (self, addr);

  return r != NULL && r->tag == tag && addr + size <= r->addr + r->size ? r : NULL;
}

/* Granule @g's bytes [addr, addr + size), free: taken out of the free ranges (still held, or
 * held from now on when they were settled) and retired until the placement's event is done. */
static void
retire (Arena *self, guint g, MemresStream tag, guint64 addr, guint64 size)
{
  Range *r = range_holding (self, tag, addr, size);

  g_warn_if_fail (r != NULL); /* a donor's bytes are S's free bytes; an undone one's settled */
  if (r != NULL)
    arena_heap_take_at (self, r, addr, size);
  if (tag == NULL)
    arena_span_claim (self, addr, size);
  self->lend_event->refs++;
  g_array_append_val (self->retired, ((Retired){ g, self->lend_event, self->lend_stream }));
  self->retired_at[g] = 1;
}

/* The free and settled bytes [lo, hi) of a lent granule: free and tagged lend_stream, with the
 * placement's event (the newest on that stream: merging keeps it). */
static void
tag_rest (Arena *self, guint64 lo, guint64 hi)
{
  Range *r;

  if (lo >= hi || (r = range_holding (self, NULL, lo, hi - lo)) == NULL)
    return;
  arena_heap_take_at (self, r, lo, hi - lo);
  arena_span_claim (self, lo, hi - lo);
  self->lend_event->refs++;
  arena_heap_insert (self, lo, hi - lo, self->lend_stream, self->lend_event);
}

static void
lend_done (Arena *self)
{
  g_array_set_size (self->lent, 0);
  g_array_set_size (self->lend_donors, 0);
  cache_event_unref (&self->parts, g_steal_pointer (&self->lend_event));
}

/* The free bytes [lo, hi) of a granule at @at, in a range tagged @tag (settled: NULL, then
 * held from now on), taken out of the free ranges. */
static void
withhold (Arena *self, MemresStream tag, guint64 lo, guint64 hi)
{
  Range *r;

  if (lo >= hi)
    return;
  r = range_holding (self, tag, lo, hi - lo);
  g_warn_if_fail (r != NULL);
  if (r == NULL)
    return;
  arena_heap_take_at (self, r, lo, hi - lo);
  if (tag == NULL)
    arena_span_claim (self, lo, hi - lo);
}

/* Granule @p->to shares @p->from's memory (committed): the donor's bytes [lo, hi) and the new
 * granule's other bytes withheld from the free ranges until arena_shared_resolve(). */
static void
share (Arena *self, const LentPair *p)
{
  guint64 to = arena_granule_address (self, p->to), from = arena_granule_address (self, p->from);
  Shared sh = { p->to, p->from, p->lo, p->hi, self->lend_stream };

  withhold (self, self->lend_stream, from + p->lo, from + p->hi);
  withhold (self, NULL, to, to + p->lo);
  withhold (self, NULL, to + p->hi, to + self->granularity);
  g_array_append_val (self->shared, sh);
  self->shared_at[p->to] = 1;
  self->shared_at[p->from] = 2;
  self->shared_granules++;
}

/* The extent [addr, addr + size) is placed: each donor's old address retired, each lent
 * granule's bytes outside the extent tagged with the stream; each shared granule's other
 * bytes withheld. */
void
arena_lend_commit (Arena *self, guint64 addr, guint64 size)
{
  for (guint i = 0; i < self->lent->len; i++)
    {
      LentPair *p = &g_array_index (self->lent, LentPair, i);
      guint64 to = arena_granule_address (self, p->to), end = to + self->granularity;

      if (p->hi != 0)
        {
          share (self, p);
          continue;
        }
      retire (self, p->from, self->lend_stream, arena_granule_address (self, p->from),
              self->granularity);
      tag_rest (self, to, MIN (addr, end));
      tag_rest (self, MAX (addr + size, to), end);
      self->lent_granules++;
    }
  lend_done (self);
}

/* The placement failed (its bytes free and settled again): each lent granule's second mapping
 * unmapped; one that cannot be is retired, never left idle. The donors stay as they were. */
void
arena_lend_abort (Arena *self)
{
  for (guint i = self->lent->len; i-- > 0;)
    {
      guint to = g_array_index (self->lent, LentPair, i).to;

      if (!arena_granule_unlend (self, to))
        retire (self, to, NULL, arena_granule_address (self, to), self->granularity);
    }
  lend_done (self);
}

/* Whether every byte of [lo, hi) lies in free ranges that are settled or tagged @stream. */
static gboolean
all_free (Arena *self, MemresStream stream, guint64 lo, guint64 hi)
{
  for (guint64 a = lo; a < hi;)
    {
      Range *r = arena_heap_range_at (self, a);

      if (r == NULL || (r->tag != NULL && r->tag != stream))
        return FALSE;
      a = r->addr + r->size;
    }
  return TRUE;
}

/* Takes the free bytes [lo, hi) out of the ranges they lie in (settled ones held from now on). */
static void
take_all (Arena *self, guint64 lo, guint64 hi)
{
  for (guint64 a = lo; a < hi;)
    {
      Range *r = arena_heap_range_at (self, a);
      guint64 e = MIN (hi, r->addr + r->size);
      MemresStream tag = r->tag;

      arena_heap_take_at (self, r, a, e - a);
      if (tag == NULL)
        arena_span_claim (self, a, e - a);
      a = e;
    }
}

/* Granule @to's withheld bytes [lo, hi) (offsets; none when @lo == @hi) free: tagged @stream
 * with @event, or settled without one. */
static void
release_withheld (Arena *self, guint to, guint64 lo, guint64 hi, MemresStream stream,
                  CacheEvent *event)
{
  guint64 at = arena_granule_address (self, to);

  if (lo >= hi)
    return;
  if (event != NULL)
    event->refs++;
  else
    arena_span_drop (self, at + lo, hi - lo);
  arena_heap_insert (self, at + lo, hi - lo, event != NULL ? stream : NULL, event);
}

/* After a free on @stream (with @event, recorded on it after the free) of bytes in [lo, hi),
 * or with @stream and @event NULL after bytes there settled: each shared granule (of @stream's,
 * or any) whose donor lies there and holds no byte in use any more (its other bytes free on
 * @stream, or settled) ends. The donor's address is retired as a lent granule's (unmapped once
 * @event is done, arena_lend_reap(); at once without one); the second address keeps the memory,
 * its withheld bytes free and tagged @stream with @event (settled without one): the donor's
 * bytes that another stream would reach there were last used by work ordered before @event. */
void
arena_shared_resolve (Arena *self, MemresStream stream, CacheEvent *event, guint64 lo, guint64 hi)
{
  for (guint i = self->shared->len; i-- > 0;)
    {
      Shared sh = g_array_index (self->shared, Shared, i);
      guint64 from = arena_granule_address (self, sh.from);

      if ((stream != NULL && sh.stream != stream) || from >= hi || from + self->granularity <= lo
          || !all_free (self, stream, from, from + sh.lo)
          || !all_free (self, stream, from + sh.hi, from + self->granularity))
        continue;
      /* the retired address's reference first: @event may be the one of a range taken here */
      if (event != NULL)
        event->refs++;
      take_all (self, from, from + sh.lo);
      take_all (self, from + sh.hi, from + self->granularity);
      g_array_append_val (self->retired, ((Retired){ sh.from, event, stream }));
      self->retired_at[sh.from] = 1;
      self->shared_at[sh.from] = 0;
      self->shared_at[sh.to] = 0;
      release_withheld (self, sh.to, 0, sh.lo, sh.stream, event);
      release_withheld (self, sh.to, sh.hi, self->granularity, sh.stream, event);
      g_array_remove_index_fast (self->shared, i);
    }
}

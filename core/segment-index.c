/* memres - CUDA memory resources
 * segment-index.c: the process-wide index of segments (segment-index.h), its operations as
 * segments.c calls them under its lock: a segment's entry found by its resource and base (one or
 * many), the overlap check of a new segment, insertion (one, or a batch that rewrites each page
 * it touches once), growth and removal (one, a batch, a resource's all), each change published
 * to the readers under the sequence lock (write_begin(), write_end()). The layout and what its
 * slots hold: segment-index-layout.h; the slots written: segment-slots.c; the readers,
 * memres_lookup(): segment-lookup.c. */
#include "segment-index-layout.h"

#include <stdlib.h>
#include <string.h>

/* under segments.c's lock */
static GPtrArray *live;         /* MemresIndexEntry, in no order */
static GPtrArray *free_entries; /* MemresIndexEntry */
static GPtrArray *scratch;      /* MemresIndexEntry, a unit's set */
static GArray *touches;         /* Touch, the pages a batch rewrites */

/* A page that a batch rewrites from its set (pages_touch()), for segment @e, the batch's
 * @seq-th. */
typedef struct
{
  guint64 pn;
  MemresIndexEntry *e;
  guint seq;
} Touch;

/* A change of the index begins: the count of changes begun made one more than the count done,
 * before any store of the change (the readers' rule, segment-lookup.c). */
static void
write_begin (void)
{
  STORE (&_memres_index_flat.seq.begun, _memres_index_flat.seq.begun + 1);
  __atomic_thread_fence (__ATOMIC_RELEASE);
}

/* The change published: the count of changes done equal to the count begun again, after every
 * store of the change. */
static void
write_end (void)
{
  __atomic_store_n (&_memres_index_flat.seq.done, _memres_index_flat.seq.done + 1,
                    __ATOMIC_RELEASE);
}

static void
ensure_setup (void)
{
  if (live != NULL)
    return;
  touches = g_array_new (FALSE, FALSE, sizeof (Touch));
  live = g_ptr_array_new ();
  free_entries = g_ptr_array_new ();
  scratch = g_ptr_array_new ();
  _memres_index_slots_setup ();
}

/* The entry of @mr at @base in the slot of unit @k, or NULL; its set read where it lies. */
static MemresIndexEntry *
unit_find (Level l, guint64 k, MemresResource *mr, guint64 base)
{
  Node *node = unit_node (l, k, FALSE);
  guintptr v = node != NULL ? unit_slot (node, l, k)->v : SLOT_NONE;
  MemresIndexEntry *e = (MemresIndexEntry *) v;

  gpointer one;
  gpointer const *m;
  guint n;

  if (v == SLOT_NONE)
    return NULL;
  m = slot_members (v, &one, &n);
  for (guint i = 0; i < n; i++)
    if ((e = m[i])->mr == mr && e->base == base)
      return e;
  return NULL;
}

MemresIndexEntry *
_memres_index_find (MemresResource *mr, guint64 base)
{
  MemresIndexEntry *e;

  ensure_setup ();
  if ((e = unit_find (PAGES, base >> PAGE_SHIFT, mr, base)) != NULL)
    return e;
  return unit_find (REGIONS, base >> REGION_SHIFT, mr, base);
}

/* A base asked for by _memres_index_find_many(), and its place in the question. */
typedef struct
{
  guint64 base;
  gsize at;
} Wanted;

static gint
wanted_order (gconstpointer a, gconstpointer b)
{
  guint64 x = ((const Wanted *) a)->base, y = ((const Wanted *) b)->base;

  return x < y ? -1 : x > y;
}

/* The entries of @mr among @set at the bases of @w[@i, @j) (in address order) into @out. */
static void
wanted_match (const GPtrArray *set, MemresResource *mr, const Wanted *w, gsize i, gsize j,
              MemresIndexEntry **out)
{
  for (guint k = 0; k < set->len; k++)
    {
      MemresIndexEntry *e = set->pdata[k];
      gsize lo = i, hi = j;

      if (e->mr != mr)
        continue;
      while (lo < hi) /* the first base at or after e's */
        {
          gsize mid = lo + (hi - lo) / 2;

          if (w[mid].base < e->base)
            lo = mid + 1;
          else
            hi = mid;
        }
      /* every request of that base (one, unless it comes twice) */
      for (; lo < j && w[lo].base == e->base; lo++)
        out[w[lo].at] = e;
    }
}

/* The bases in address order, each page of them read once, each region once: the entries of
 * @mr at them. */
void
_memres_index_find_many (MemresResource *mr, const MemresSegment *segments, gsize n,
                         MemresIndexEntry **out)
{
  g_autofree Wanted *w = g_new (Wanted, n + 1);

  gboolean in_order = TRUE;

  ensure_setup ();
  for (gsize i = 0; i < n; i++)
    {
      w[i].base = segments[i].base;
      w[i].at = i;
      out[i] = NULL;
      in_order = in_order && (i == 0 || w[i - 1].base <= w[i].base);
    }
  if (!in_order)
    qsort (w, n, sizeof *w, wanted_order);
  for (gsize i = 0, j; i < n; i = j)
    {
      guint64 pn = w[i].base >> PAGE_SHIFT;

      /* the bases in page pn: w[i, j) */
      for (j = i; j < n && (w[j].base >> PAGE_SHIFT) == pn; j++)
        ;
      _memres_index_unit_get (PAGES, pn, scratch);
      wanted_match (scratch, mr, w, i, j, out);
    }
  for (gsize i = 0, j; i < n; i = j)
    {
      guint64 rn = w[i].base >> REGION_SHIFT;

      for (j = i; j < n && (w[j].base >> REGION_SHIFT) == rn; j++)
        ;
      _memres_index_unit_get (REGIONS, rn, scratch);
      wanted_match (scratch, mr, w, i, j, out);
    }
}

/* What an overlap check looks for: a segment of @mr overlapping [@base, @end), or when @sorted
 * is not NULL one of its @n segments (in address order, disjoint). */
typedef struct
{
  MemresResource *mr;
  guint64 base, end;
  MemresIndexEntry *const *sorted;
  guint n;
} Probe;

/* The first of the @n segments @sorted (in address order, disjoint) that ends after @base, or @n.
 */
static guint
first_ending_after (MemresIndexEntry *const *sorted, guint n, guint64 base)
{
  guint lo = 0, hi = n;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;

      if (sorted[mid]->end > base)
        hi = mid;
      else
        lo = mid + 1;
    }
  return lo;
}

static inline gboolean
probe_hit (const MemresIndexEntry *x, const Probe *p)
{
  guint i;

  if (x->mr != p->mr)
    return FALSE;
  if (p->sorted == NULL)
    return x->base < p->end && x->end > p->base;
  i = first_ending_after (p->sorted, p->n, x->base);
  return i < p->n && p->sorted[i]->base < x->end;
}

/* Whether a segment of slot value @v is what @p looks for. */
static gboolean
slot_hit (guintptr v, const Probe *p)
{
  gpointer one;
  gpointer const *m;
  guint n;

  if (v == SLOT_NONE)
    return FALSE;
  m = slot_members (v, &one, &n);
  for (guint i = 0; i < n; i++)
    if (probe_hit (m[i], p))
      return TRUE;
  return FALSE;
}

/* Whether a segment of units @k to @last of level @l is what @p looks for, the slots read node by
 * node: a GiB with no node has none, an empty page costs a bit of the bitmap. */
static gboolean
units_hit (Level l, guint64 k, guint64 last, const Probe *p)
{
  for (;;)
    {
      guint64 stop = MIN (last, k | level_mask (l));
      Node *node = unit_node (l, k, FALSE);

      for (gsize i = k & level_mask (l), n = (stop & level_mask (l)) + 1; node != NULL; i++)
        {
          if (l == PAGES)
            i = next_used (node, i, n);
          if (i >= n)
            break;
          if (slot_hit (unit_slot (node, l, i)->v, p))
            return TRUE;
        }
      if (stop == last)
        return FALSE;
      k = stop + 1;
    }
}

gboolean
_memres_index_overlaps (MemresResource *mr, guint64 base, guint64 end)
{
  Probe p = { mr, base, end, NULL, 0 };

  ensure_setup ();
  return units_hit (REGIONS, base >> REGION_SHIFT, (end - 1) >> REGION_SHIFT, &p)
         || units_hit (PAGES, base >> PAGE_SHIFT, (end - 1) >> PAGE_SHIFT, &p);
}

/* Each page and region the @n segments span read once: a segment of @mr there is searched for
 * among them. */
gboolean
_memres_index_overlaps_many (MemresResource *mr, MemresIndexEntry *const *sorted, guint n)
{
  Probe p = { mr, 0, 0, sorted, n };
  guint64 next_page = 0, next_region = 0; /* the first not read yet */

  ensure_setup ();
  for (guint i = 0; i < n; i++)
    {
      guint64 pn = MAX (first_page (sorted[i]), next_page), last = last_page (sorted[i]);
      guint64 rn = MAX (sorted[i]->base >> REGION_SHIFT, next_region);
      guint64 last_region = (sorted[i]->end - 1) >> REGION_SHIFT;

      if (rn <= last_region && units_hit (REGIONS, rn, last_region, &p))
        return TRUE;
      if (pn <= last && units_hit (PAGES, pn, last, &p))
        return TRUE;
      next_page = last + 1; /* pages count below 2^44: no wrap */
      next_region = last_region + 1;
    }
  return FALSE;
}

/* An entry for a new segment: reused from the free list, or new. */
static inline __attribute__ ((always_inline)) MemresIndexEntry *
entry_new (void)
{
  MemresIndexEntry *e;

  if (free_entries->len > 0)
    return g_ptr_array_steal_index_fast (free_entries, free_entries->len - 1);
  if (posix_memalign ((void **) &e, 64, sizeof (MemresIndexEntry)) != 0)
    g_error ("memres: out of memory for the segment index");
  e->gen = 0; /* kept from then on, across its reuses */
  return e;
}

/* @e made a copy of @src and added to the live list, inside a write (its slots
 * not yet). */
static inline __attribute__ ((always_inline)) void
entry_fill (MemresIndexEntry *e, const MemresIndexEntry *src)
{
  /* a reused entry: a stale reader may be looking at it */
  STORE (&e->base, src->base);
  STORE (&e->length, src->end - src->base);
  e->end = src->end;
  STORE (&e->mr, src->mr);
  {
    MemresIndexEntry w = { .device = src->device, .handle_types = src->handle_types };

    STORE (&e->dev_types, w.dev_types);
  }
  STORE (&e->tag_word, (guint64) 0);
  STORE (&e->tag_id, src->tag_id);
  STORE (&e->tag, src->tag);
  e->unmapping = FALSE;
  e->dying = FALSE;
  e->coarse = src->end - src->base >= COARSE_MIN;
  e->live_at = live->len;
  g_ptr_array_add (live, e);
}

MemresIndexEntry *
_memres_index_insert (const MemresIndexEntry *src)
{
  MemresIndexEntry *e;

  ensure_setup ();
  e = entry_new ();
  write_begin ();
  entry_fill (e, src);
  _memres_index_entry_update (e, TRUE);
  write_end ();
  return e;
}

static gint
touch_order (gconstpointer a, gconstpointer b)
{
  const Touch *x = a, *y = b;

  if (x->pn != y->pn)
    return x->pn < y->pn ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* _memres_index_units_update() of a batch's fine segment @e (its @seq-th), inside a write: the
 * pages it covers whole and shares with no other fine segment take their one line of stores now;
 * every other page is left for pages_rewrite(), which rewrites it once for all the batch's segments
 * there. A coarse one changes its regions at once. */
static void
pages_touch (MemresIndexEntry *e, gboolean add, guint seq)
{
  guint64 pn = first_page (e), last = last_page (e);
  guint64 whole_first = first_page (e) + ((e->base & ((1u << PAGE_SHIFT) - 1)) != 0);
  guint64 whole_end = e->end >> PAGE_SHIFT;

  if (e->coarse)
    {
      _memres_index_entry_update (e, add);
      return;
    }
  for (;;)
    {
      Touch t = { pn, e, seq };
      Node *node;

      if (pn >= whole_first && pn < whole_end && (node = gib_node (pn >> NODE_SHIFT, add)) != NULL)
        {
          guint64 stop = MIN (whole_end - 1, pn | (NODE_PAGES - 1));

          pn += _memres_index_slots_swap (node, PAGES, pn, stop - pn + 1, e, add);
          t.pn = pn;
          if (pn > stop)
            pn--; /* the last whole page of the GiB done */
          else
            g_array_append_val (touches, t);
        }
      else
        g_array_append_val (touches, t);
      if (pn == last)
        break;
      pn++;
    }
}

/* The pages pages_touch() left, each rewritten once from its set: with the batch's segments
 * there added after the others (in the batch's order), or with its dying ones taken out. Each
 * page is its own write: between two, the index holds some of the batch's segments and not
 * others, which a reader may see (each segment's memory is mapped all the while). */
static void
pages_rewrite (gboolean add)
{
  gboolean in_order = TRUE;

  /* a batch in address order (a sleep's granules, say) touches its pages in order */
  for (guint i = 1; in_order && i < touches->len; i++)
    in_order
        = touch_order (&g_array_index (touches, Touch, i - 1), &g_array_index (touches, Touch, i))
          < 0;
  if (!in_order)
    g_array_sort (touches, touch_order);
  for (guint i = 0, j; i < touches->len; i = j)
    {
      guint64 pn = g_array_index (touches, Touch, i).pn;

      _memres_index_unit_get (PAGES, pn, scratch);
      if (!add)
        {
          guint m = 0;

          for (guint k = 0; k < scratch->len; k++)
            if (!((MemresIndexEntry *) scratch->pdata[k])->dying)
              scratch->pdata[m++] = scratch->pdata[k];
          g_ptr_array_set_size (scratch, m);
        }
      for (j = i; j < touches->len && g_array_index (touches, Touch, j).pn == pn; j++)
        if (add)
          g_ptr_array_add (scratch, g_array_index (touches, Touch, j).e);
      write_begin ();
      _memres_index_page_put (pn, scratch);
      write_end ();
    }
  g_array_set_size (touches, 0);
}

void
_memres_index_insert_many (const MemresIndexEntry *src, guint n, MemresIndexEntry **out)
{
  ensure_setup ();
  for (guint i = 0; i < n; i++)
    out[i] = entry_new ();
  write_begin ();
  for (guint i = 0; i < n; i++)
    {
      entry_fill (out[i], &src[i]);
      pages_touch (out[i], TRUE, i);
    }
  write_end ();
  pages_rewrite (TRUE);
}

void
_memres_index_grow (MemresIndexEntry *e, guint64 end)
{
  write_begin ();
  if (!e->coarse && end - e->base >= COARSE_MIN)
    {
      /* out of its pages at its old end, into its regions at the new one */
      _memres_index_units_update (PAGES, e, FALSE);
      e->coarse = TRUE;
    }
  e->end = end;
  STORE (&e->length, end - e->base);
  _memres_index_entry_update (
      e, TRUE); /* its old units (their runs end where it ended) and its new ones */
  write_end ();
}

/* @e taken off the live list, inside a write */
static inline __attribute__ ((always_inline)) void
entry_unlist (MemresIndexEntry *e)
{
  MemresIndexEntry *moved = g_ptr_array_steal_index_fast (live, e->live_at);

  g_assert (moved == e);
  if (e->live_at < live->len)
    ((MemresIndexEntry *) live->pdata[e->live_at])->live_at = e->live_at;
}

/* inside a write */
static void
remove_entry (MemresIndexEntry *e)
{
  entry_unlist (e);
  _memres_index_entry_update (e, FALSE);
  e->gen++;
  g_ptr_array_add (free_entries, e);
}

void
_memres_index_remove (MemresIndexEntry *e)
{
  write_begin ();
  remove_entry (e);
  write_end ();
}

void
_memres_index_remove_many (MemresIndexEntry *const *es, guint n)
{
  write_begin ();
  for (guint i = 0; i < n; i++)
    {
      es[i]->dying = TRUE;
      entry_unlist (es[i]);
      pages_touch (es[i], FALSE, i);
    }
  write_end ();
  pages_rewrite (FALSE);
  for (guint i = 0; i < n; i++)
    {
      es[i]->dying = FALSE;
      es[i]->gen++;
      g_ptr_array_add (free_entries, es[i]);
    }
}

void
_memres_index_remove_resource (MemresResource *mr)
{
  gboolean writing = FALSE;

  if (live == NULL)
    return;
  for (guint i = live->len; i-- > 0;)
    {
      MemresIndexEntry *e = live->pdata[i];

      if (e->mr != mr)
        continue;
      if (!writing)
        write_begin ();
      writing = TRUE;
      remove_entry (e); /* the last entry, already seen, takes its place */
    }
  if (writing)
    write_end ();
}

GPtrArray *
_memres_index_live (void)
{
  ensure_setup ();
  return live;
}

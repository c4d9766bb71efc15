/* memres - CUDA memory resources
 * segment-slots.c: the segment index's writer below its operations (segment-index-layout.h):
 * the nodes of the GiBs (the flat table's, and the hash table's above 2^48, grown by a table
 * twice the size), a unit's (page's or region's) slot written from its set of segments (its one
 * covering segment's answer copied in, up to three runs in the slot's line, or a Runs record of
 * more, the runs cut by a sweep that resolves nesting), the units a segment spans updated (a
 * large segment's interior one line of stores a page), and a coarse segment's pages cut again.
 * Everything here runs inside a write (segment-index.c's write_begin() and write_end()), under
 * segments.c's lock. Records a reader may still be reading go to free lists, never freed. */
#include "segment-index-layout.h"

#include <stdlib.h>
#include <string.h>

static GSList *retired_dirs;
static GPtrArray *top_nodes; /* Node, the flat table's: its biased addresses are no pointers */
static GPtrArray *free_sets; /* GPtrArray, the sets of SLOT_FEW slots */
static GPtrArray *free_runs[RUNS_CLASSES]; /* Runs, by log2 of their capacity */
static GPtrArray *scratch;                 /* MemresIndexEntry, a unit's set */
static GPtrArray *with_coarse;             /* the same, a page's with the coarse ones over it */
static GPtrArray *sorted;                  /* the segments of a slot in address order */
static GPtrArray *stack;                   /* MemresIndexEntry, the segments open at a point */
static GArray *cuts;                       /* Run, a slot's runs as they are worked out */

void
_memres_index_slots_setup (void)
{
  free_sets = g_ptr_array_new ();
  scratch = g_ptr_array_new ();
  with_coarse = g_ptr_array_new ();
  sorted = g_ptr_array_new ();
  stack = g_ptr_array_new ();
  cuts = g_array_new (FALSE, FALSE, sizeof (Run));
}

/* A new node, every slot SLOT_NONE, not yet published. */
static Node *
node_alloc (void)
{
  Node *node;

  if (posix_memalign ((void **) &node, 64, sizeof (Node)) != 0)
    g_error ("memres: out of memory for the segment index");
  memset (node, 0, sizeof (Node));
  for (guint i = 0; i < NODE_PAGES; i++)
    node->page[i].v = SLOT_NONE;
  for (guint i = 0; i < NODE_REGIONS; i++)
    node->region[i].v = SLOT_NONE;
  return node;
}

/* A new node, published at @where (inside a write). */
static Node *
node_new (Node **where)
{
  Node *node = node_alloc ();

  PUBLISH (where, node);
  return node;
}

/* A new node for GiB @gib of the flat table, published (inside a write). */
Node *
_memres_index_top_node_new (guint64 gib)
{
  Node *node = node_alloc ();

  /* kept where leak checkers (and debuggers) see it */
  if (top_nodes == NULL)
    top_nodes = g_ptr_array_new ();
  g_ptr_array_add (top_nodes, node);
  PUBLISH (&_memres_index_flat.top[gib], TOP_REL (node));
  return node;
}

/* The node of the GiB @gib above the flat table, made when @create (inside a write). */
Node *
_memres_index_dir_node (guint64 gib, gboolean create)
{
  Dir *d = _memres_index_dir;
  guint64 key = gib + 1;
  gsize mask, h;

  if (d != NULL)
    {
      mask = d->mask;
      for (h = dir_hash (key, d->shift); d->bucket[h].key != 0; h = (h + 1) & mask)
        if (d->bucket[h].key == key)
          return d->bucket[h].node;
    }
  if (!create)
    return NULL;
  if (d == NULL || (d->used + 1) * 2 > ((gsize) 1 << d->bits))
    {
      guint bits = d != NULL ? d->bits + 1 : 4;
      Dir *bigger = g_malloc0 (sizeof (Dir) + ((gsize) 1 << bits) * sizeof (Bucket));

      bigger->bits = bits;
      bigger->shift = 64 - bits;
      bigger->mask = mask = ((gsize) 1 << bits) - 1;
      for (gsize i = 0; d != NULL && i < ((gsize) 1 << d->bits); i++)
        if (d->bucket[i].key != 0)
          {
            for (h = dir_hash (d->bucket[i].key, bigger->shift); bigger->bucket[h].key != 0;)
              h = (h + 1) & mask;
            bigger->bucket[h] = d->bucket[i];
            bigger->used++;
          }
      if (d != NULL)
        retired_dirs = g_slist_prepend (retired_dirs, d);
      PUBLISH (&_memres_index_dir, bigger);
      d = bigger;
    }
  mask = d->mask;
  for (h = dir_hash (key, d->shift); d->bucket[h].key != 0;)
    h = (h + 1) & mask;
  d->used++;
  /* the node before the key: a reader that matches the key finds it */
  node_new (&d->bucket[h].node);
  PUBLISH (&d->bucket[h].key, key);
  return d->bucket[h].node;
}

static void set_copy (GPtrArray *to, const GPtrArray *from);

static Runs *
runs_new (guint n)
{
  guint c = 2;
  Runs *r;

  G_STATIC_ASSERT (RUNS_MIN == 1 << 2);
  while ((1u << c) < n)
    c++;
  if (free_runs[c] != NULL && free_runs[c]->len > 0)
    return g_ptr_array_steal_index_fast (free_runs[c], free_runs[c]->len - 1);
  r = g_malloc0 (sizeof (Runs) + ((gsize) 2 << c) * sizeof (guint64));
  r->cap = 1u << c;
  r->set = g_ptr_array_new ();
  return r;
}

static void
runs_free (Runs *r)
{
  guint c = (guint) g_bit_nth_lsf (r->cap, -1);

  if (free_runs[c] == NULL)
    free_runs[c] = g_ptr_array_new ();
  g_ptr_array_add (free_runs[c], r);
}

/* A run from @start held by @e (or none), appended to @cuts; one with the run before when they
 * have the same segment. */
static void
run_at (guint64 start, const MemresIndexEntry *e)
{
  if (cuts->len == 0 || g_array_index (cuts, Run, cuts->len - 1).entry != e)
    {
      Run run = { start, e };

      g_array_append_val (cuts, run);
    }
}

/* The part from the current point @pos to @to (exclusive), held by @e (or none), unless it is
 * empty; @pos moves to @to. */
static void
cut (guint64 *pos, guint64 to, const MemresIndexEntry *e)
{
  if (to <= *pos)
    return;
  run_at (*pos, e);
  *pos = to;
}

static gint entry_order (gconstpointer a, gconstpointer b);

/* TRUE when @x comes before @y in @set (the order mapped) */
static gboolean
mapped_before (const GPtrArray *set, gconstpointer x, gconstpointer y)
{
  for (guint i = 0; i < set->len; i++)
    if (set->pdata[i] == x || set->pdata[i] == y)
      return set->pdata[i] == x;
  return TRUE;
}

/* @e onto the stack of open segments, which stays ordered by length, the shortest on top (the
 * innermost: the answer at the point). A segment nested in the top, the usual case, goes on top
 * at once. One that only partly overlaps the top (a cache's block across the edge of two arena
 * granules, cache>arena) and is longer goes below the shorter ones; of two of the same length, the
 * later mapped (of @set's order) is above. */
static void
stack_push (const GPtrArray *set, MemresIndexEntry *e)
{
  guint64 length = e->end - e->base;
  guint i = stack->len;

  for (; i > 0; i--)
    {
      const MemresIndexEntry *below = stack->pdata[i - 1];
      guint64 below_length = below->end - below->base;

      if (below_length > length
          || (below_length == length && (below->base == e->base || mapped_before (set, below, e))))
        break;
    }
  g_ptr_array_insert (stack, (gint) i, e);
}

/* The runs of page @pn (first byte @first, last @last) for the segments of @set, in @cuts:
 * a sweep in address order (longest first among equal bases, then in the order mapped) with the
 * segments open at the point on a stack, the innermost (the shortest) on top (stack_push()); a
 * segment that ended below the top is dropped when it comes to the top. */
static void
page_runs (GPtrArray *set, guint64 first, guint64 last)
{
  guint64 pos = first;

  gboolean in_order = TRUE;

  set_copy (sorted, set);
  for (guint i = 1; in_order && i < set->len; i++)
    in_order = entry_order (&set->pdata[i - 1], &set->pdata[i]) <= 0;
  /* stable: of equal ranges, the later mapped is later; a page whose segments were mapped in
   * address order (a batch in address order after the segment under it) is sorted already */
  if (!in_order)
    _memres_index_sort (sorted);
  g_ptr_array_set_size (stack, 0);
  g_array_set_size (cuts, 0);
  for (guint i = 0; i < sorted->len; i++)
    {
      MemresIndexEntry *e = sorted->pdata[i];
      guint64 b = MAX (e->base, first);

      /* those that end before @e begins: each holds the part up to its end */
      while (stack->len > 0)
        {
          const MemresIndexEntry *top = stack->pdata[stack->len - 1];

          if (top->end > b)
            break;
          cut (&pos, top->end, top);
          g_ptr_array_set_size (stack, stack->len - 1);
        }
      cut (&pos, b, stack->len > 0 ? stack->pdata[stack->len - 1] : NULL);
      stack_push (set, e);
    }
  while (stack->len > 0)
    {
      const MemresIndexEntry *top = stack->pdata[stack->len - 1];

      /* the page's last byte + 1 may be 2^64: a segment ends at most at 2^64 - 1 */
      cut (&pos, MIN (top->end - 1, last) + 1, top);
      g_ptr_array_set_size (stack, stack->len - 1);
    }
  /* the rest of the page holds no segment (the page's end may be 2^64: @pos <= @last) */
  if (pos <= last || cuts->len == 0)
    run_at (pos, NULL);
}

/* @to made a copy of @from (one move, not an add per element: a crowded page holds hundreds) */
static void
set_copy (GPtrArray *to, const GPtrArray *from)
{
  g_ptr_array_set_size (to, from->len);
  if (from->len > 0)
    memcpy (to->pdata, from->pdata, from->len * sizeof (gpointer));
}

/* Sets @out to the segments of slot @s, in the order they were mapped. */
static void
slot_get (const Slot *s, GPtrArray *out)
{
  guintptr v = s->v;
  gpointer one;
  gpointer const *m;
  guint n;

  if (v == SLOT_NONE)
    {
      g_ptr_array_set_size (out, 0);
      return;
    }
  m = slot_members (v, &one, &n);
  g_ptr_array_set_size (out, n);
  memcpy (out->pdata, m, n * sizeof (gpointer));
}

/* Sets @out to the segments of unit @k's slot: a page's fine ones, a region's coarse ones. */
void
_memres_index_unit_get (Level l, guint64 k, GPtrArray *out)
{
  Node *node = unit_node (l, k, FALSE);

  if (node == NULL)
    g_ptr_array_set_size (out, 0);
  else
    slot_get (unit_slot (node, l, k), out);
}

/* The record an old slot value held, back to its free list (a stale reader may still read it). */
static void
slot_release (guintptr old)
{
  if ((old & (SLOT_TAGS | SLOT_ONE)) == SLOT_FEW)
    g_ptr_array_add (free_sets, (gpointer) (old - SLOT_FEW));
  else if ((old & SLOT_TAGS) == SLOT_RUNS)
    runs_free ((Runs *) (old - SLOT_RUNS));
}

/* Slot @s made to hold @v, a value of any kind but an entry's address (inside a write; its words
 * written before): the readers' direct test made to fail first. */
static inline void
slot_publish (Slot *s, guintptr v)
{
  STORE (&s->neg_base, 0);
  PUBLISH (&s->v, v);
}

/* Slot @s made to hold @e alone as @n runs (up to three: SLOT_FEW | SLOT_ONE), from @start (the
 * first's is the unit's first byte, not read), each @e or none (@run), inside a write; whatever
 * it held is the caller's to release. */
static void
slot_few_one (Slot *s, const MemresIndexEntry *e, const guint64 *start,
              const MemresIndexEntry *const *run, guint n)
{
  for (guint i = 0; i < FEW_RUNS; i++)
    {
      if (i > 0)
        STORE (&s->w[FEW_START (i)], i < n ? start[i] : G_MAXUINT64);
      STORE (&s->w[FEW_ENTRY (i)], i < n ? (guint64) (guintptr) run[i] : 0);
    }
  slot_publish (s, (guintptr) e | SLOT_FEW | SLOT_ONE);
}

/* Slot @s made to hold @e alone, which covers its unit (inside a write; whatever it held is the
 * caller's to release): its answer copied in and its negated base beside it; or, for a base
 * whose negation is not negative (0, above 2^63: NEG_BASE_OK), one run of @e over the whole unit,
 * which the readers take the long way. */
static inline void
slot_direct (Slot *s, const MemresIndexEntry *e)
{
  guint64 w[ANSWER_WORDS];

  if (G_UNLIKELY (!NEG_BASE_OK (e->base)))
    {
      slot_few_one (s, e, NULL, &e, 1);
      return;
    }
  memcpy (w, e, sizeof w);
  for (guint i = 0; i < ANSWER_WORDS; i++)
    STORE (&s->w[i], w[i]);
  STORE (&s->neg_base, 0 - e->base);
  PUBLISH (&s->v, (guintptr) e);
}

static inline gboolean
covers (const MemresIndexEntry *e, guint64 first, guint64 last)
{
  return e->base <= first && e->end - 1 >= last;
}

/* Slot @s of the unit from @first to @last made to say that the segments of @set are its own
 * (inside a write): none; one covering the unit (its answer); up to three runs (SLOT_FEW) or more
 * (Runs), cut from the segments of @cut (@set, or for a page @set with the coarse segments over
 * it). Records are new or reused from the free lists: a stale reader may be looking at one. */
static void
slot_write (Slot *s, GPtrArray *set, const GPtrArray *cut, guint64 first, guint64 last)
{
  guintptr old = s->v, v;

  if (set->len == 0)
    v = SLOT_NONE;
  else if (set->len == 1 && covers (set->pdata[0], first, last))
    {
      slot_direct (s, set->pdata[0]);
      slot_release (old);
      return;
    }
  else
    {
      page_runs ((GPtrArray *) cut, first, last);
      if (cuts->len <= FEW_RUNS)
        {
          GPtrArray *held = NULL;

          if (set->len > 1)
            held = free_sets->len > 0 ? g_ptr_array_steal_index_fast (free_sets, free_sets->len - 1)
                                      : g_ptr_array_new ();
          for (guint i = 0; i < FEW_RUNS; i++)
            {
              const Run *run = i < cuts->len ? &g_array_index (cuts, Run, i) : NULL;

              if (i > 0)
                STORE (&s->w[FEW_START (i)], run != NULL ? run->start : G_MAXUINT64);
              STORE (&s->w[FEW_ENTRY (i)], run != NULL ? (guint64) (guintptr) run->entry : 0);
            }
          if (held != NULL)
            {
              set_copy (held, set);
              v = (guintptr) held | SLOT_FEW;
            }
          else
            v = (guintptr) set->pdata[0] | SLOT_FEW | SLOT_ONE;
        }
      else
        {
          Runs *r = runs_new (cuts->len);

          for (guint i = 0; i < r->cap; i++)
            {
              const Run *run = i < cuts->len ? &g_array_index (cuts, Run, i) : NULL;

              STORE (&r->word[i], run != NULL ? run->start : G_MAXUINT64);
              STORE (&r->word[r->cap + i], run != NULL ? (guint64) (guintptr) run->entry : 0);
            }
          r->n = cuts->len;
          set_copy (r->set, set);
          v = (guintptr) r | SLOT_RUNS;
        }
    }
  slot_publish (s, v);
  slot_release (old);
}

/* page @i of @node marked as holding fine segments (or not) */
static inline void
page_mark (Node *node, gsize i, gboolean used)
{
  guint64 bit = G_GUINT64_CONSTANT (1) << (i % 64);

  if (used)
    node->used[i / 64] |= bit;
  else
    node->used[i / 64] &= ~bit;
}

/* Page @pn's slot made to say that the fine segments of @set are its own (inside a write); its
 * runs are cut from them and the coarse segments of its region that overlap it. */
void
_memres_index_page_put (guint64 pn, GPtrArray *set)
{
  Node *node = gib_node (pn >> NODE_SHIFT, set->len > 0);
  guint64 first = pn << PAGE_SHIFT, last = first + ((1u << PAGE_SHIFT) - 1);
  const GPtrArray *cut = set;

  if (node == NULL)
    return;
  if (set->len > 1 || (set->len == 1 && !covers (set->pdata[0], first, last)))
    {
      const Slot *rs = &node->region[(pn >> REGION_PAGES_SHIFT) & (NODE_REGIONS - 1)];

      if (rs->v != SLOT_NONE)
        {
          guint m = 0;

          slot_get (rs, with_coarse);
          for (guint k = 0; k < with_coarse->len; k++)
            {
              const MemresIndexEntry *c = with_coarse->pdata[k];

              if (c->base <= last && c->end > first)
                with_coarse->pdata[m++] = with_coarse->pdata[k];
            }
          g_ptr_array_set_size (with_coarse, m);
          if (m > 0)
            {
              for (guint k = 0; k < set->len; k++)
                g_ptr_array_add (with_coarse, set->pdata[k]);
              cut = with_coarse;
            }
        }
    }
  slot_write (&node->page[pn & (NODE_PAGES - 1)], set, cut, first, last);
  page_mark (node, pn & (NODE_PAGES - 1), set->len > 0);
}

/* Region @rn's slot made to say that the coarse segments of @set are its own (inside a write). */
static void
region_put (guint64 rn, GPtrArray *set)
{
  Node *node = unit_node (REGIONS, rn, set->len > 0);
  guint64 first = rn << REGION_SHIFT, last = first + (COARSE_MIN - 1);

  if (node != NULL)
    slot_write (unit_slot (node, REGIONS, rn), set, set, first, last);
}

/* Slot @s of the unit from @first to @last made to hold @e alone (inside a write): its answer
 * where @e covers the unit, else its run and the empty ones around it (SLOT_FEW), as page_runs()
 * would cut them. */
static void
slot_one (Slot *s, MemresIndexEntry *e, guint64 first, guint64 last)
{
  guintptr old = s->v;
  guint64 start[FEW_RUNS];
  const MemresIndexEntry *run[FEW_RUNS];
  guint n = 0;

  if (covers (e, first, last))
    {
      slot_direct (s, e);
      slot_release (old);
      return;
    }
  if (e->base > first)
    {
      start[n] = first;
      run[n++] = NULL;
    }
  start[n] = MAX (e->base, first);
  run[n++] = e;
  if (e->end - 1 < last)
    {
      start[n] = e->end;
      run[n++] = NULL;
    }
  slot_few_one (s, e, start, run, n);
  slot_release (old);
}

/* Whether slot value @v holds @e and nothing else. */
static inline gboolean
slot_alone (guintptr v, const MemresIndexEntry *e)
{
  return v == (guintptr) e || v == ((guintptr) e | SLOT_FEW | SLOT_ONE);
}

/* unit_update() where unit @k holds nothing else of its level and no coarse segment lies under
 * it (a page whose region's slot is empty): @e alone written, or SLOT_NONE, with no set gathered;
 * FALSE where it does not apply. */
static gboolean
unit_update_alone (Level l, guint64 k, MemresIndexEntry *e, gboolean add)
{
  Node *node = unit_node (l, k, add);
  guint shift = level_shift (l);
  guint64 first = k << shift, last = first + ((G_GUINT64_CONSTANT (1) << shift) - 1);
  Slot *s;
  guintptr v;

  if (node == NULL
      || (l == PAGES
          && node->region[(k >> REGION_PAGES_SHIFT) & (NODE_REGIONS - 1)].v != SLOT_NONE))
    return FALSE;
  s = unit_slot (node, l, k);
  v = s->v;
  if (add && v == SLOT_NONE)
    slot_one (s, e, first, last);
  else if (!add && slot_alone (v, e))
    {
      slot_publish (s, SLOT_NONE);
      slot_release (v);
    }
  else
    return FALSE;
  if (l == PAGES)
    page_mark (node, k & (NODE_PAGES - 1), add);
  return TRUE;
}

/* @e added to the set of unit @k where it is not (or, when @add is FALSE, removed from it) and
 * its slot rewritten, inside a write. A set keeps its segments in the order they were mapped (a
 * grown one keeps its place): of two with the same range (a cache's chunk that is the whole of
 * its upstream's segment), the later is the upper layer's, the innermost. */
static void
unit_update (Level l, guint64 k, MemresIndexEntry *e, gboolean add)
{
  gboolean had;

  if (unit_update_alone (l, k, e, add))
    return;
  _memres_index_unit_get (l, k, scratch);
  had = g_ptr_array_remove (scratch, e) && add;
  if (add && !had)
    g_ptr_array_add (scratch, e);
  else if (had)
    _memres_index_unit_get (l, k, scratch);
  if (l == PAGES)
    _memres_index_page_put (k, scratch);
  else
    region_put (k, scratch);
}

/* The slots of units @k on of @node, @n of them, that @e covers whole: from SLOT_NONE to @e
 * (@add) or from @e to SLOT_NONE, and those that hold @e already made to say its new length (a
 * growth), up to the first that is none of these; returns how many. A page slot of SLOT_NONE may
 * lie under coarse segments: a fine one that covers the page is shorter, the innermost over all
 * of it. */
gsize
_memres_index_slots_swap (Node *node, Level l, guint64 k, gsize n, MemresIndexEntry *e,
                          gboolean add)
{
  Slot *s = unit_slot (node, l, k);
  guintptr from = add ? SLOT_NONE : (guintptr) e;
  gsize i;

  for (i = 0; i < n; i++)
    {
      guintptr v = s[i].v;

      if (v == from)
        {
          if (add)
            slot_direct (&s[i], e);
          else
            slot_publish (&s[i], SLOT_NONE);
          if (l == PAGES)
            page_mark (node, (k + i) & (NODE_PAGES - 1), add);
        }
      else if (add && v == (guintptr) e)
        STORE (&s[i].w[LENGTH_WORD], e->end - e->base);
      else
        break;
    }
  return i;
}

/* unit_update() of every unit of level @l that @e spans, inside a write. The units @e covers
 * whole and that hold no other segment of the level (a large segment's interior) take one line
 * of stores each, their GiB's node found once: an added segment's slot goes from empty to @e (or
 * takes its new length when it grew), a removed one's from @e to empty; every other unit (an edge
 * inside it, a neighbour or a nesting there) is rewritten from its set. */
void
_memres_index_units_update (Level l, MemresIndexEntry *e, gboolean add)
{
  guint shift = level_shift (l);
  guint64 k = e->base >> shift, last = (e->end - 1) >> shift;
  /* the units wholly inside [base, end): from @whole_first to before @whole_end */
  guint64 whole_first = k + ((e->base & ((G_GUINT64_CONSTANT (1) << shift) - 1)) != 0);
  guint64 whole_end = e->end >> shift;

  for (;;)
    {
      Node *node;

      if (k >= whole_first && k < whole_end && (node = unit_node (l, k, add)) != NULL)
        {
          /* the whole units up to the end of this GiB */
          guint64 stop = MIN (whole_end - 1, k | level_mask (l));

          k += _memres_index_slots_swap (node, l, k, stop - k + 1, e, add);
          if (k > stop)
            k--; /* the last whole unit of the GiB done */
          else
            unit_update (l, k, e, add);
        }
      else
        unit_update (l, k, e, add);
      if (k == last)
        break;
      k++;
    }
}

/* The pages of coarse @e's range that hold fine segments, their runs cut again from their own
 * and the coarse ones over them (inside a write, after @e's regions changed). */
static void
pages_recut (const MemresIndexEntry *e)
{
  guint64 pn = first_page (e), last = last_page (e);

  for (;;)
    {
      guint64 stop = MIN (last, pn | (NODE_PAGES - 1));
      Node *node = gib_node (pn >> NODE_SHIFT, FALSE);

      for (gsize i = pn & (NODE_PAGES - 1), n = (stop & (NODE_PAGES - 1)) + 1; node != NULL; i++)
        {
          if ((i = next_used (node, i, n)) == n)
            break;
          /* one fine segment over the whole page is its answer whatever lies under it */
          if (node->page[i].v & SLOT_TAGS)
            {
              guint64 p = (pn & ~(guint64) (NODE_PAGES - 1)) | i;

              slot_get (&node->page[i], scratch);
              _memres_index_page_put (p, scratch);
            }
        }
      if (stop == last)
        return;
      pn = stop + 1;
    }
}

/* @e into the index (@add) or out of it, inside a write: a fine one into its pages' slots, a
 * coarse one into its regions', and the runs of the pages with fine segments in its range cut
 * again. */
void
_memres_index_entry_update (MemresIndexEntry *e, gboolean add)
{
  if (!e->coarse)
    {
      _memres_index_units_update (PAGES, e, add);
      return;
    }
  _memres_index_units_update (REGIONS, e, add);
  pages_recut (e);
}

static gint
entry_order (gconstpointer a, gconstpointer b)
{
  const MemresIndexEntry *x = *(MemresIndexEntry *const *) a;
  const MemresIndexEntry *y = *(MemresIndexEntry *const *) b;

  if (x->base != y->base)
    return x->base < y->base ? -1 : 1;
  if (x->end != y->end)
    return x->end > y->end ? -1 : 1;
  return 0;
}

void
_memres_index_sort (GPtrArray *entries)
{
  g_ptr_array_sort (entries, entry_order);
}

/* memres - CUDA memory resources
 * segment-index.c: the process-wide index of segments (segment-index.h) and memres_lookup(),
 * which reads it without a lock.
 *
 * The index is a directory of the address space's 1 MiB pages. A node holds the slots of the
 * 1,024 pages of one GiB; the nodes of the GiBs below 2^48 (x86-64's and 48-bit arm64's user
 * addresses, where the driver's device addresses lie too) are found in a flat table indexed by
 * the GiB (2 MiB of zero pages that only the GiBs in use touch; each entry the node's address
 * less its GiB's place, TOP_BIAS, so that the page number finds the slot with no mask), those
 * of higher GiBs in a hash table (open addressing). A page's slot says which segment holds each
 * of its addresses: none (SLOT_NONE, both tag bits); one segment that covers the whole page and is
 * alone there (a pointer to its entry); a split, one edge inside the page (a segment's end or
 * start, or two meeting) with the segment below it and the one from it (a pointer tagged 1); or
 * runs, the page cut at every edge inside it (a pointer tagged 2), found by a count of four starts
 * with no branch, or by a binary search of fixed steps over a power-of-two number of runs. Each run
 * (and each side of a split) names the innermost segment holding all of it, or none: nesting is
 * resolved when the page is written, so a reader never walks parents. A lookup is then a fixed
 * chain of loads, whatever the number of segments: the node, the slot, the split or runs, the
 * entry, whose first 48 bytes are the answer as the caller receives it. The direct case (a slot
 * that is one segment, told from every other kind of slot by one test of its tag bits) runs
 * straight through memres_lookup() with no taken branch and no register saved: 31 instructions on
 * x86-64 at -O2; splits are worked out beside it, and runs, misses, retries and high addresses
 * leave it by a jump to functions of their own. Where segments nest (a cache's chunk inside a `vmm`
 * buffer), the innermost is the shortest holding the address, and of equal ranges the later mapped
 * (the segments of one resource never overlap; those of two layers nest, the upper one mapped after
 * the segment it lies in). A change rewrites only the slots of the pages the segment spans: its
 * cost does not depend on how many segments there are, and a page the segment covers whole and
 * shares with no other (a large segment's interior) is one compare and one store, its GiB's node
 * found once for all of them (pages_update). A batch of segments (segments.c's
 * memres_resource_raise_segment_events(): a sleep's thousands) changes each page it touches once
 * (pages_touch(), pages_rewrite()): one event at a time, a page crowded with segments (a cache's
 * buffers) was sorted again at every one of them.
 *
 * Readers take no lock and write nothing shared: they read with atomic loads between two reads
 * of a sequence number, and retry when it changed (a writer makes it odd while it changes the
 * index, under segments.c's lock; a reader clears the low bit of the number it starts from, so
 * that an odd start never matches the end and needs no test of its own). Nothing a reader can reach
 * is ever freed: entries, splits, runs and nodes removed from the index wait on free lists for
 * their next use (runs only for runs of the same capacity, so that a reader bounds its search by a
 * capacity that never changes), and a full hash table is replaced by one twice its size and kept. A
 * stale pointer thus always leads to valid memory, and the sequence check throws away what was read
 * through it (the answer is copied out of the entry with three 16-byte loads: a torn copy is what
 * the check is for). No answer is kept per thread: with no table in front, the cost is the same
 * whether the thread found the segment before or not, and no branch mispredicts between a kept
 * answer and a search. */
#include "segment-index.h"

#include <stdlib.h>
#include <string.h>

/* a reader copies an entry's first 48 bytes as they lie into the first 48 of a MemresLookupInfo */
#define ANSWER_WORDS 6
#define INFO_AT(f)                                                                                 \
  (G_STRUCT_OFFSET (MemresLookupInfo, segment) + G_STRUCT_OFFSET (MemresSegment, f))
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresLookupInfo, resource)
                 == G_STRUCT_OFFSET (MemresIndexEntry, mr));
G_STATIC_ASSERT (INFO_AT (base) == G_STRUCT_OFFSET (MemresIndexEntry, base));
G_STATIC_ASSERT (INFO_AT (length) == G_STRUCT_OFFSET (MemresIndexEntry, length));
G_STATIC_ASSERT (INFO_AT (device) == G_STRUCT_OFFSET (MemresIndexEntry, device));
G_STATIC_ASSERT (INFO_AT (handle_types) == G_STRUCT_OFFSET (MemresIndexEntry, handle_types));
G_STATIC_ASSERT (INFO_AT (tag_id) == G_STRUCT_OFFSET (MemresIndexEntry, tag_id));
G_STATIC_ASSERT (INFO_AT (tag) == G_STRUCT_OFFSET (MemresIndexEntry, tag));
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresLookupInfo, offset) == ANSWER_WORDS * 8);
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresIndexEntry, base) == 8);
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresIndexEntry, end) == ANSWER_WORDS * 8);

/* 1 MiB pages: a segment of 1 MiB or more that starts and ends on 1 MiB (a pool's 1 MiB blocks,
 * two to a 2 MiB granule, as a `cache` over `dmr` holds them) has a slot of its own on each page,
 * the direct path; with 2 MiB pages such a block shared its page with its neighbour (a split,
 * one dependent load and 10 instructions more). Large segments pay one slot store more per
 * 2 MiB, their nodes 8 KiB a GiB. */
#define PAGE_SHIFT   20
#define NODE_SHIFT   10 /* 1,024 pages a node: a GiB */
#define NODE_PAGES   (1u << NODE_SHIFT)
#define GIB_SHIFT    (PAGE_SHIFT + NODE_SHIFT)
#define TOP_BITS     18 /* the flat table: the GiBs below 2^48 */
#define SLOT_SPLIT   ((guintptr) 1)
#define SLOT_RUNS    ((guintptr) 2)
#define SLOT_TAGS    (SLOT_SPLIT | SLOT_RUNS)
#define SLOT_NONE    SLOT_TAGS /* no segment: both tags, no pointer */
#define RUNS_CLASSES 32

/* A run of a page: from @start to the next run's start (or the page's end), the innermost
 * segment there, or NULL (the writer's form). */
typedef struct
{
  guint64 start;
  const MemresIndexEntry *entry;
} Run;

/* A page of two runs (one edge inside it: a segment's end, or its start, or both where two
 * segments meet) or of one run of nested segments, as readers see it: below @mid @lo, from @mid
 * on @hi (G_MAXUINT64 and @hi = @lo for one run). */
typedef struct
{
  guint64 mid;
  const MemresIndexEntry *lo;
  const MemresIndexEntry *hi;
  GPtrArray *set; /* the writer's: the segments overlapping the page, in the order mapped */
} Split;

/* A page's runs as readers see them (three or more): @word holds the starts of the runs, in address
 * order (the first the page's first byte), then their segments (MemresIndexEntry pointers, or 0),
 * @cap of each; the runs past the last start at G_MAXUINT64, with no segment. */
typedef struct
{
  guint32 cap;    /* a power of two, at least RUNS_MIN, set when made, never changed */
  guint32 n;      /* the writer's: runs in use */
  GPtrArray *set; /* the writer's: the segments overlapping the page, in the order mapped */
  guint64 word[];
} Runs;

/* the smallest capacity: a reader counts the starts at or before its address among these four
 * with no branch (a segment smaller than a page, alone in it, makes three runs) */
#define RUNS_MIN 4

typedef struct
{
  guintptr slot[NODE_PAGES];
} Node;

typedef struct
{
  guint64 key; /* the node's GiB + 1; 0 for an empty bucket */
  Node *node;
} Bucket;

typedef struct
{
  guint bits;  /* 1 << bits buckets; these three set before the table is published */
  guint shift; /* 64 - bits: a hash is the high bits of the key's product */
  gsize mask;  /* (1 << bits) - 1 */
  gsize used;
  Bucket bucket[];
} Dir;

/* a branch laid out as the straight path (G_LIKELY's 90 % leaves GCC free to jump to it) */
#if defined(__has_builtin)
#if __has_builtin(__builtin_expect_with_probability)
#define ALMOST_ALWAYS(x) __builtin_expect_with_probability (!!(x), 1, 0.999)
#endif
#endif
#ifndef ALMOST_ALWAYS
#define ALMOST_ALWAYS(x) G_LIKELY (x)
#endif

#define LOAD(p)         __atomic_load_n ((p), __ATOMIC_RELAXED)
#define LOAD_ACQUIRE(p) __atomic_load_n ((p), __ATOMIC_ACQUIRE)
#define STORE(p, v)     __atomic_store_n ((p), (v), __ATOMIC_RELAXED)
#define PUBLISH(p, v)   __atomic_store_n ((p), (v), __ATOMIC_RELEASE)

static guint64 index_seq; /* atomic: odd while the index changes; never wraps */
/* atomic: the node of each GiB below 2^48, as TOP_BIAS() of it (0: none) */
static guintptr index_top[1u << TOP_BITS];
static Dir *index_dir; /* atomic: the nodes of the GiBs above */
/* the writer's, under segments.c's lock */
static GSList *retired_dirs;
static GPtrArray *top_nodes;    /* Node, the flat table's: its biased addresses are no pointers */
static GPtrArray *live;         /* MemresIndexEntry, in no order */
static GPtrArray *free_entries; /* MemresIndexEntry */
static GPtrArray *free_splits;  /* Split */
static GPtrArray *free_runs[RUNS_CLASSES]; /* Runs, by log2 of their capacity */
static GPtrArray *scratch;                 /* MemresIndexEntry, a page's set */
static GPtrArray *sorted;                  /* the same, in address order */
static GPtrArray *stack;                   /* MemresIndexEntry, the segments open at a point */
static GArray *cuts;                       /* Run, a page's runs as they are worked out */
static GArray *touches;                    /* Touch, the pages a batch rewrites */

/* A page that a batch rewrites from its set (pages_touch()), for segment @e, the batch's
 * @seq-th. */
typedef struct
{
  guint64 pn;
  MemresIndexEntry *e;
  guint seq;
} Touch;

/* ---- the writer ----------------------------------------------------------------------------- */

/* What index_top holds for @node, the node of GiB @gib: its address less @gib's first page's
 * place in a node as if the nodes of all GiBs lay end to end, so that a reader finds the slot of
 * page pn at TOP_BIAS + pn * 8 with no mask. Never 0 (top_node_new() sees to it). */
#define TOP_BIAS(node, gib) ((guintptr) (node) - (guintptr) (gib) * sizeof (Node))
#define TOP_NODE(v, gib)    ((Node *) ((v) + (guintptr) (gib) * sizeof (Node)))

static inline gsize
dir_hash (guint64 key, guint shift)
{
  return (gsize) ((key * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15)) >> shift);
}

static void
write_begin (void)
{
  STORE (&index_seq, index_seq + 1);
  __atomic_thread_fence (__ATOMIC_RELEASE);
}

static void
write_end (void)
{
  __atomic_store_n (&index_seq, index_seq + 1, __ATOMIC_RELEASE);
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
  sorted = g_ptr_array_new ();
  stack = g_ptr_array_new ();
  cuts = g_array_new (FALSE, FALSE, sizeof (Run));
}

/* A new node, every slot SLOT_NONE, not yet published. */
static Node *
node_alloc (void)
{
  Node *node = g_new (Node, 1);

  for (guint i = 0; i < NODE_PAGES; i++)
    node->slot[i] = SLOT_NONE;
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

/* A new node for GiB @gib of the flat table, published (inside a write). A node whose biased
 * address would be 0, the mark of no node, is exchanged for another. */
static Node *
top_node_new (guint64 gib)
{
  Node *node = node_alloc ();

  if (G_UNLIKELY (TOP_BIAS (node, gib) == 0))
    {
      Node *other = node_alloc ();

      g_free (node);
      node = other;
    }
  /* kept where leak checkers (and debuggers) see it */
  if (top_nodes == NULL)
    top_nodes = g_ptr_array_new ();
  g_ptr_array_add (top_nodes, node);
  PUBLISH (&index_top[gib], TOP_BIAS (node, gib));
  return node;
}

/* The node of the GiB @gib above the flat table, made when @create (inside a write). */
static Node *
dir_node (guint64 gib, gboolean create)
{
  Dir *d = index_dir;
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
      PUBLISH (&index_dir, bigger);
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

/* The node of page @pn's GiB, made when @create (inside a write). */
static Node *
page_node (guint64 pn, gboolean create)
{
  guint64 gib = pn >> NODE_SHIFT;

  if (gib < G_N_ELEMENTS (index_top))
    {
      if (index_top[gib] != 0)
        return TOP_NODE (index_top[gib], gib);
      return create ? top_node_new (gib) : NULL;
    }
  return dir_node (gib, create);
}

/* @to made a copy of @from (one move, not an add per element: a crowded page holds hundreds) */
static void
set_copy (GPtrArray *to, const GPtrArray *from)
{
  g_ptr_array_set_size (to, from->len);
  if (from->len > 0)
    memcpy (to->pdata, from->pdata, from->len * sizeof (gpointer));
}

/* Sets @out to the entries of the segments overlapping page @pn, in the order they were
 * mapped. */
static void
page_get (guint64 pn, GPtrArray *out)
{
  Node *node = page_node (pn, FALSE);
  guintptr v;

  g_ptr_array_set_size (out, 0);
  if (node == NULL || (v = node->slot[pn & (NODE_PAGES - 1)]) == SLOT_NONE)
    return;
  if (v & SLOT_TAGS)
    set_copy (out, (v & SLOT_TAGS) == SLOT_SPLIT ? ((const Split *) (v - SLOT_SPLIT))->set
                                                 : ((const Runs *) (v - SLOT_RUNS))->set);
  else
    g_ptr_array_add (out, (gpointer) v);
}

static Split *
split_new (void)
{
  Split *sp;

  if (free_splits == NULL)
    free_splits = g_ptr_array_new ();
  if (free_splits->len > 0)
    return g_ptr_array_steal_index_fast (free_splits, free_splits->len - 1);
  sp = g_new0 (Split, 1);
  sp->set = g_ptr_array_new ();
  return sp;
}

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

/* The runs of page @pn (first byte @first, last @last) for the segments of @set, in @cuts:
 * a sweep in address order (longest first among equal bases, then in the order mapped) with the
 * segments open at the point on a stack, the innermost on top. */
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
      g_ptr_array_add (stack, e);
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

/* Page @pn's slot made to say that the segments of @set overlap it (inside a write): none;
 * one covering the page (its entry); two runs or one of nested segments (a Split); or more runs
 * (Runs). Records are new or reused from the free lists: a stale reader may be looking at one. */
static void
page_put (guint64 pn, GPtrArray *set)
{
  Node *node = page_node (pn, set->len > 0);
  guint64 first = pn << PAGE_SHIFT, last = first + ((1u << PAGE_SHIFT) - 1);
  const MemresIndexEntry *one = set->len == 1 ? set->pdata[0] : NULL;
  guintptr *slot, old, v;

  if (node == NULL)
    return;
  slot = &node->slot[pn & (NODE_PAGES - 1)];
  old = *slot;
  if (set->len == 0)
    v = SLOT_NONE;
  else if (one != NULL && one->base <= first && one->end - 1 >= last)
    v = (guintptr) one;
  else
    {
      page_runs (set, first, last);
      if (cuts->len <= 2)
        {
          Split *sp = split_new ();
          const Run *lo = &g_array_index (cuts, Run, 0);
          const Run *hi = &g_array_index (cuts, Run, cuts->len - 1);

          STORE (&sp->mid, cuts->len == 2 ? hi->start : G_MAXUINT64);
          STORE (&sp->lo, lo->entry);
          STORE (&sp->hi, hi->entry);
          set_copy (sp->set, set);
          v = (guintptr) sp | SLOT_SPLIT;
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
  PUBLISH (slot, v);
  if ((old & SLOT_TAGS) == SLOT_SPLIT)
    g_ptr_array_add (free_splits, (Split *) (old - SLOT_SPLIT));
  else if ((old & SLOT_TAGS) == SLOT_RUNS)
    runs_free ((Runs *) (old - SLOT_RUNS));
}

static inline guint64
first_page (const MemresIndexEntry *e)
{
  return e->base >> PAGE_SHIFT;
}

static inline guint64
last_page (const MemresIndexEntry *e)
{
  return (e->end - 1) >> PAGE_SHIFT;
}

/* @e added to the set of page @pn where it is not (or, when @add is FALSE, removed from it) and
 * its slot rewritten, inside a write. A set keeps its segments in the order they were mapped (a
 * grown one keeps its place): of two with the same range (a cache's chunk that is the whole of
 * its upstream's segment), the later is the upper layer's, the innermost. */
static void
page_update (guint64 pn, MemresIndexEntry *e, gboolean add)
{
  gboolean had;

  page_get (pn, scratch);
  had = g_ptr_array_remove (scratch, e) && add;
  if (add && !had)
    g_ptr_array_add (scratch, e);
  else if (had)
    page_get (pn, scratch);
  page_put (pn, scratch);
}

/* The slots from @slot on, @n of them, that hold @from, up to the first that does not, made to
 * hold @to; returns how many. */
static inline gsize
slots_swap (guintptr *slot, gsize n, guintptr from, guintptr to)
{
  gsize i;

  for (i = 0; i < n && slot[i] == from; i++)
    PUBLISH (&slot[i], to);
  return i;
}

/* page_update() of every page @e spans, inside a write. The pages @e covers whole and that no
 * other segment touches (a large segment's interior: 256 for 256 MiB) take one store each,
 * their GiB's node found once: an added segment's slot goes from empty to @e (or stays @e when it
 * grows), a removed one's from @e to empty; every other page (an edge inside it, a neighbour or
 * a nesting there) is rewritten from its set. */
static void
pages_update (MemresIndexEntry *e, gboolean add)
{
  guint64 pn = first_page (e), last = last_page (e);
  /* the pages wholly inside [base, end): from @whole_first to before @whole_end */
  guint64 whole_first = first_page (e) + ((e->base & ((1u << PAGE_SHIFT) - 1)) != 0);
  guint64 whole_end = e->end >> PAGE_SHIFT;
  guintptr from = add ? SLOT_NONE : (guintptr) e, to = add ? (guintptr) e : SLOT_NONE;

  for (;;)
    {
      Node *node;

      if (pn >= whole_first && pn < whole_end && (node = page_node (pn, add)) != NULL)
        {
          /* the whole pages up to the end of this GiB */
          guint64 stop = MIN (whole_end - 1, pn | (NODE_PAGES - 1));
          guintptr *slot = &node->slot[pn & (NODE_PAGES - 1)];

          pn += slots_swap (slot, stop - pn + 1, from, to);
          slot = &node->slot[pn & (NODE_PAGES - 1)];
          if (pn > stop)
            pn--;                                 /* the last whole page of the GiB done */
          else if (!add || *slot != (guintptr) e) /* grown: an old page stays @e */
            page_update (pn, e, add);
        }
      else
        page_update (pn, e, add);
      if (pn == last)
        break;
      pn++;
    }
}

MemresIndexEntry *
_memres_index_find (MemresResource *mr, guint64 base)
{
  ensure_setup ();
  page_get (base >> PAGE_SHIFT, scratch);
  for (guint i = 0; i < scratch->len; i++)
    {
      MemresIndexEntry *e = scratch->pdata[i];

      if (e->mr == mr && e->base == base)
        return e;
    }
  return NULL;
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

/* The bases in address order, each page of them read once: the entries of @mr at them. */
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
      page_get (pn, scratch);
      for (guint k = 0; k < scratch->len; k++)
        {
          MemresIndexEntry *e = scratch->pdata[k];
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
}

/* Whether a segment of @mr in page slot @v overlaps [@base, @end). */
static gboolean
slot_overlaps (guintptr v, MemresResource *mr, guint64 base, guint64 end)
{
  const GPtrArray *set;

  if (!(v & SLOT_TAGS))
    {
      const MemresIndexEntry *e = (const MemresIndexEntry *) v;

      return e->mr == mr && e->base < end && e->end > base;
    }
  if (v == SLOT_NONE)
    return FALSE;
  set = (v & SLOT_TAGS) == SLOT_SPLIT ? ((const Split *) (v - SLOT_SPLIT))->set
                                      : ((const Runs *) (v - SLOT_RUNS))->set;
  for (guint i = 0; i < set->len; i++)
    {
      const MemresIndexEntry *e = set->pdata[i];

      if (e->mr == mr && e->base < end && e->end > base)
        return TRUE;
    }
  return FALSE;
}

/* The slots of the pages of [@base, @end) read node by node: an empty one costs a load. */
gboolean
_memres_index_overlaps (MemresResource *mr, guint64 base, guint64 end)
{
  ensure_setup ();
  for (guint64 pn = base >> PAGE_SHIFT, last = (end - 1) >> PAGE_SHIFT;; pn++)
    {
      guint64 stop = MIN (last, pn | (NODE_PAGES - 1));
      const Node *node = page_node (pn, FALSE);

      /* a GiB with no node has no segment */
      for (gsize i = pn & (NODE_PAGES - 1), n = (stop & (NODE_PAGES - 1)) + 1; node != NULL; i++)
        {
          while (i < n && node->slot[i] == SLOT_NONE)
            i++;
          if (i == n)
            break;
          if (slot_overlaps (node->slot[i], mr, base, end))
            return TRUE;
        }
      pn = stop;
      if (pn == last)
        return FALSE;
    }
}

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

/* Whether segment @x, of @mr, overlaps one of @sorted. */
static inline gboolean
overlaps_sorted (const MemresIndexEntry *x, MemresResource *mr, MemresIndexEntry *const *sorted,
                 guint n)
{
  guint i;

  if (x->mr != mr)
    return FALSE;
  i = first_ending_after (sorted, n, x->base);
  return i < n && sorted[i]->base < x->end;
}

/* Each page the @n segments span read once: a segment of @mr there is searched for among them. */
gboolean
_memres_index_overlaps_many (MemresResource *mr, MemresIndexEntry *const *sorted, guint n)
{
  guint64 next = 0; /* the first page not read yet */

  ensure_setup ();
  for (guint i = 0; i < n; i++)
    {
      guint64 pn = MAX (first_page (sorted[i]), next), last = last_page (sorted[i]);

      for (; pn <= last; pn++)
        {
          const Node *node = page_node (pn, FALSE);
          guintptr v = node != NULL ? node->slot[pn & (NODE_PAGES - 1)] : SLOT_NONE;
          const GPtrArray *set;

          if (v == SLOT_NONE)
            continue;
          if (!(v & SLOT_TAGS))
            {
              if (overlaps_sorted ((const MemresIndexEntry *) v, mr, sorted, n))
                return TRUE;
              continue;
            }
          set = (v & SLOT_TAGS) == SLOT_SPLIT ? ((const Split *) (v - SLOT_SPLIT))->set
                                              : ((const Runs *) (v - SLOT_RUNS))->set;
          for (guint k = 0; k < set->len; k++)
            if (overlaps_sorted (set->pdata[k], mr, sorted, n))
              return TRUE;
        }
      next = last + 1; /* pages count below 2^43: no wrap */
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

/* @e made a copy of @src and added to the live list, inside a write (its pages
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
  pages_update (e, TRUE);
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

/* pages_update() of a batch's segment @e (its @seq-th), inside a write: the pages it covers whole
 * and shares with no other segment take their one store now; every other page is left for
 * pages_rewrite(), which rewrites it once for all the batch's segments there. */
static void
pages_touch (MemresIndexEntry *e, gboolean add, guint seq)
{
  guint64 pn = first_page (e), last = last_page (e);
  guint64 whole_first = first_page (e) + ((e->base & ((1u << PAGE_SHIFT) - 1)) != 0);
  guint64 whole_end = e->end >> PAGE_SHIFT;
  guintptr from = add ? SLOT_NONE : (guintptr) e, to = add ? (guintptr) e : SLOT_NONE;

  for (;;)
    {
      Touch t = { pn, e, seq };
      Node *node;

      if (pn >= whole_first && pn < whole_end && (node = page_node (pn, add)) != NULL)
        {
          guint64 stop = MIN (whole_end - 1, pn | (NODE_PAGES - 1));

          pn += slots_swap (&node->slot[pn & (NODE_PAGES - 1)], stop - pn + 1, from, to);
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

      page_get (pn, scratch);
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
      page_put (pn, scratch);
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
  e->end = end;
  STORE (&e->length, end - e->base);
  pages_update (e, TRUE); /* its old pages (their runs end where it ended) and its new ones */
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
  pages_update (e, FALSE);
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

/* ---- the readers ---------------------------------------------------------------------------- */

/* The node of the GiB of @addr above the flat table, or NULL. */
G_GNUC_NO_INLINE static const Node *
high_node (guint64 addr)
{
  const Dir *d = LOAD_ACQUIRE (&index_dir);
  guint64 key = (addr >> GIB_SHIFT) + 1;
  gsize mask, h;

  if (d == NULL)
    return NULL;
  mask = d->mask;
  h = dir_hash (key, d->shift);
  for (gsize probes = 0; probes <= mask; probes++, h = (h + 1) & mask)
    {
      guint64 k = LOAD_ACQUIRE (&d->bucket[h].key);

      if (k == key)
        return LOAD (&d->bucket[h].node);
      if (k == 0)
        break;
    }
  return NULL;
}

__attribute__ ((cold)) static gboolean lookup_retry (guint64 addr, MemresLookupInfo *info);

/* 16 bytes of an answer, copied in one move */
typedef gint64 AnswerPart __attribute__ ((vector_size (16), aligned (8), may_alias));

/* The answer of entry @e, which holds @addr (a slot's segment covers its page, a run's segment
 * the run), in @info when the index is still at sequence number @seq (even: an odd number read
 * at the start was made even by clearing its low bit, so that it never matches); else the whole
 * lookup again. The entry's first 48 bytes are copied as they lie, then the offset. */
static inline __attribute__ ((always_inline)) gboolean
lookup_answer (const MemresIndexEntry *e, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  AnswerPart a0 = ((const AnswerPart *) e)[0];
  AnswerPart a1 = ((const AnswerPart *) e)[1];
  AnswerPart a2 = ((const AnswerPart *) e)[2];
  guint64 base = LOAD (&e->base);

  __atomic_thread_fence (__ATOMIC_ACQUIRE);
  if (G_UNLIKELY (LOAD (&index_seq) != seq))
    return lookup_retry (addr, info);
  ((AnswerPart *) info)[0] = a0;
  ((AnswerPart *) info)[1] = a1;
  ((AnswerPart *) info)[2] = a2;
  info->offset = addr - base;
  return TRUE;
}

/* No segment holds @addr at sequence number @seq: %FALSE, or the whole lookup again when a
 * writer changed the index meanwhile. */
G_GNUC_NO_INLINE __attribute__ ((cold)) static gboolean
lookup_none (guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  __atomic_thread_fence (__ATOMIC_ACQUIRE);
  if (G_UNLIKELY (LOAD (&index_seq) != seq))
    return lookup_retry (addr, info);
  return FALSE;
}

/* The rest of a lookup whose page slot @v holds runs, or no segment (SLOT_NONE): the last run
 * starting at or before @addr (the first starts at the page's first byte). Four runs are counted
 * with no branch; more by a binary search in log2 (capacity) steps that are the same whatever the
 * data. Read without a lock, so only as good as the sequence check after it (a torn read still
 * stays inside the runs). Out of line: the search's registers would cost the direct path a save and
 * a restore. */
G_GNUC_NO_INLINE static gboolean
lookup_runs (guint64 addr, MemresLookupInfo *info, guint64 seq, guintptr v)
{
  const Runs *r;
  const guint64 *start;
  const MemresIndexEntry *e;
  guint cap;
  gsize i;

  if (G_UNLIKELY (v == SLOT_NONE))
    return lookup_none (addr, info, seq);
  r = (const Runs *) (v - SLOT_RUNS); /* v & ~SLOT_RUNS */
  start = r->word;
  cap = LOAD (&r->cap);
  if (G_LIKELY (cap == RUNS_MIN))
    i = (gsize) (LOAD (&start[1]) <= addr) + (LOAD (&start[2]) <= addr)
        + (LOAD (&start[3]) <= addr);
  else
    {
      const guint64 *it = start;

      for (guint half = cap / 2; half > 0; half /= 2)
        it = LOAD (&it[half]) <= addr ? it + half : it;
      i = (gsize) (it - start);
    }
  e = (const MemresIndexEntry *) (guintptr) LOAD (&r->word[cap + i]);
  if (G_UNLIKELY (e == NULL))
    return lookup_none (addr, info, seq);
  return lookup_answer (e, addr, info, seq);
}

/* The rest of a lookup at sequence number @seq from @v, the slot of @addr's page: the answer
 * in @info (untouched when there is none), or the whole lookup again when a writer changed the
 * index meanwhile. The direct path (a slot that is one segment) falls through every branch and
 * saves no register; a split is worked out beside it, the rest (runs, no segment, a writer
 * seen) in functions of their own. */
static inline __attribute__ ((always_inline)) gboolean
lookup_slot (guintptr v, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  if (ALMOST_ALWAYS (!(v & SLOT_TAGS)))
    return lookup_answer ((const MemresIndexEntry *) v, addr, info, seq);
  if (G_LIKELY (!(v & SLOT_RUNS))) /* SLOT_SPLIT: neither runs nor SLOT_NONE */
    {
      /* the segment below the edge or the one from it, chosen with a conditional move */
      const Split *sp = (const Split *) (v - SLOT_SPLIT);
      const MemresIndexEntry *lo = LOAD (&sp->lo), *hi = LOAD (&sp->hi);
      const MemresIndexEntry *e = addr < LOAD (&sp->mid) ? lo : hi;

      if (G_UNLIKELY (e == NULL))
        return lookup_none (addr, info, seq);
      return lookup_answer (e, addr, info, seq);
    }
  return lookup_runs (addr, info, seq, v);
}

/* A lookup above the flat table: the hash table's node. */
G_GNUC_NO_INLINE __attribute__ ((cold)) static gboolean
lookup_high (guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  const Node *node = high_node (addr);

  if (node == NULL)
    return lookup_none (addr, info, seq);
  return lookup_slot (LOAD_ACQUIRE (&node->slot[(addr >> PAGE_SHIFT) & (NODE_PAGES - 1)]), addr,
                      info, seq);
}

/* A lookup at sequence number @seq (even). */
static inline __attribute__ ((always_inline)) gboolean
lookup_at (guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  guint64 gib = addr >> GIB_SHIFT;
  guintptr top;

  if (G_UNLIKELY (gib >= G_N_ELEMENTS (index_top)))
    return lookup_high (addr, info, seq);
  top = LOAD_ACQUIRE (&index_top[gib]);
  if (G_UNLIKELY (top == 0))
    return lookup_none (addr, info, seq);
  /* the node's slot of the page, TOP_BIAS undone by the page number's high bits (the GiB) */
  return lookup_slot (
      LOAD_ACQUIRE ((const guintptr *) (top + (addr >> PAGE_SHIFT) * sizeof (guintptr))), addr,
      info, seq);
}

/* The lookup after a writer was seen: again, waiting while the sequence number is odd. */
G_GNUC_NO_INLINE __attribute__ ((cold)) static gboolean
lookup_retry (guint64 addr, MemresLookupInfo *info)
{
  guint64 seq;

  while ((seq = LOAD_ACQUIRE (&index_seq)) & 1)
    g_thread_yield ();
  return lookup_at (addr, info, seq);
}

/**
 * memres_lookup:
 * @ptr: an address: a device pointer (`(gconstpointer) (guintptr) cudeviceptr`) or a host
 *   pointer
 * @info: (out caller-allocates): where the answer goes; untouched when %FALSE is returned
 *
 * Finds the segment of memres memory that @ptr lies in, the resource whose segment it is and
 * the offset of @ptr inside it. It answers for the memory of kinds that have segments (those
 * registered with %MEMRES_KIND_SEGMENTS: `vmm`, `arena`, and `cache` over any upstream, whose
 * chunks are its segments); for memory of every other kind (`dmr`, `host`, `pinned`, a buffer
 * wrapped with memres_buffer_new_for_pointer()) it answers "not found", by design: an index
 * updated at every allocation would cost every allocation. Where segments nest, it answers the
 * innermost, the shortest segment holding @ptr: for a `cache` over `vmm` the upper layer's (the
 * cache's chunk inside the vmm buffer); for a `cache` allocation over `arena` that spans several
 * granules, the lower layer's (the arena's granule, inside the cache's segment). A segment is
 * found from just before its
 * %MEMRES_SEGMENT_MAPPED event until its %MEMRES_SEGMENT_UNMAPPING event's callbacks have
 * returned; one byte past its end is not in it.
 *
 * @info->resource is borrowed (transfer none): it is valid while the memory at @ptr is
 * allocated, which the caller knows (it holds a buffer inside the segment, say); take
 * memres_resource_ref() to keep it beyond that.
 *
 * Cost: a few nanoseconds, no lock taken and nothing shared written, whatever the number of
 * segments and whether the thread looked the segment up before: the index read under a
 * sequence lock, a fixed chain of loads (the node of the address's GiB, the slot of its 1 MiB
 * page, the segment; where a segment's edge lies in that page or segments nest, a binary search
 * of the page's few runs first) (docs/segments.md, bench/bench-lookup.c). No driver call.
 * Thread-safe: any thread, at any time, concurrently with anything; an answer is never older
 * than the index at the call (a segment unmapped before the call is not found).
 *
 * Returns: %TRUE and @info filled when @ptr lies in a segment; %FALSE (no error: not finding is
 *   no failure) when it does not, %NULL included.
 *
 * Since: 2.0
 */
gboolean
memres_lookup (gconstpointer ptr, MemresLookupInfo *info)
{
  g_return_val_if_fail (info != NULL, FALSE);
  /* an odd number (a writer at work) made even never matches the number read at the end: the
   * lookup runs through and retries there, with no branch of its own here */
  return lookup_at ((guint64) (guintptr) ptr, info, LOAD_ACQUIRE (&index_seq) & ~(guint64) 1);
}

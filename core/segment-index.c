/* memres - CUDA memory resources
 * segment-index.c: the process-wide index of segments (segment-index.h) and memres_lookup(),
 * which reads it without a lock.
 *
 * The index is a directory of the address space's 1 MiB pages and 64 MiB regions. A node holds
 * the slots of the 1,024 pages and 16 regions of one GiB; the nodes of the GiBs below 2^48
 * (x86-64's and 48-bit arm64's user addresses, where the driver's device addresses lie too) are
 * found in a flat table indexed by the GiB (2 MiB of zero pages that only the GiBs in use touch;
 * each entry the node's address less its GiB's place, TOP_BIAS, so that the page number finds the
 * slot with no mask), those of higher GiBs in a hash table (open addressing).
 *
 * A slot is one 64-byte line. It says which segment holds each address of its page (or region):
 * none (SLOT_NONE, both tag bits); one segment that covers the whole page and is alone there, whose
 * answer (the first 48 bytes of its entry, as the caller receives them) lies in the slot itself,
 * beside its entry's address; up to three runs, the page cut at one or two edges (a segment's end
 * or start, or two meeting), their two starts and their three segments in the slot (tag 1); or
 * more runs (a record, tag 2), found by a count of four starts with no branch, or by a binary
 * search of fixed steps over a power-of-two number of runs. Each run names the innermost segment
 * holding all of it, or none: nesting is resolved when the slot is written, so a reader never
 * walks parents. A lookup is then a fixed chain of loads, whatever the number of segments: the
 * node, the slot, and only for runs the record and the entry. The direct case (a slot that is one
 * segment, told from every other kind of slot by one test of its tag bits) runs straight through
 * memres_lookup() with no taken branch and no register saved, its answer copied out of the slot's
 * line: the flat table's entry, then the slot, two dependent loads. Where segments nest (a cache's
 * chunk inside a `vmm` buffer), the innermost is the shortest holding the address, and of equal
 * ranges the later mapped (the segments of one resource never overlap; those of two layers nest,
 * the upper one mapped after the segment it lies in).
 *
 * Segments of 64 MiB or more (coarse: a `cache`'s chunk of its own above max_block, a large `vmm`
 * buffer) live in the slots of the regions they touch, not in those of their pages: a page slot
 * names only the segments below 64 MiB (fine) that touch it, and SLOT_NONE sends the lookup to the
 * region's slot, a line beside it in the same node (one more load, not a dependent one: its
 * address is known from the node). A page where a fine segment lies inside or beside a coarse one
 * cuts its runs from both (the region's coarse segments over it, and its own). So a coarse
 * segment's map and unmap write the slots of its regions (4 or 5 for 256 MiB, 17 for 1 GiB) and
 * rewrite only the pages where fine segments lie in its range (a bitmap per node says which), not
 * one slot per MiB; a fine segment that grows to 64 MiB moves to its regions.
 *
 * A change rewrites only the slots of the pages (or regions) the segment spans: its cost does not
 * depend on how many segments there are, and a page the segment covers whole and shares with no
 * other fine segment (a large segment's interior) is one compare and one line's stores, its GiB's
 * node found once for all of them (units_update). A batch of segments (segments.c's
 * memres_resource_raise_segment_events(): a sleep's thousands) changes each page it touches once
 * (pages_touch(), pages_rewrite()): one event at a time, a page crowded with segments (a cache's
 * buffers) was sorted again at every one of them.
 *
 * Readers take no lock and write nothing shared: they read with atomic loads between two reads
 * of a sequence number, and retry when it changed (a writer makes it odd while it changes the
 * index, under segments.c's lock; a reader clears the low bit of the number it starts from, so
 * that an odd start never matches the end and needs no test of its own). Nothing a reader can reach
 * is ever freed: entries, runs and nodes removed from the index wait on free lists for their next
 * use (runs only for runs of the same capacity, so that a reader bounds its search by a capacity
 * that never changes), and a full hash table is replaced by one twice its size and kept. But a
 * slot's words are answer bytes in one state and run entries in another: a pointer read from a
 * word that may hold something else is followed only after the sequence is checked once more
 * (the readers' rule, where the readers begin, says which pointers are followed before). The
 * final check throws away what was read through a pointer (the answer is copied with three
 * 16-byte loads: a torn copy is what the check is for). No answer is kept per thread: with no table
 * in front, the cost is the same whether the thread found the segment before or not, and no branch
 * mispredicts between a kept answer and a search. */
#include "segment-index.h"

#include <stdlib.h>
#include <string.h>

/* a reader copies an entry's (or a slot's) first 48 bytes as they lie into the first 48 of a
 * MemresLookupInfo */
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
#define BASE_WORD   1 /* the answer's words: the base, then the length */
#define LENGTH_WORD 2
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresIndexEntry, length) == LENGTH_WORD * 8);

/* 1 MiB pages: a segment of 1 MiB or more that starts and ends on 1 MiB (a pool's 1 MiB blocks,
 * two to a 2 MiB granule, as a `cache` over `dmr` holds them) has a slot of its own on each page,
 * the direct path; with 2 MiB pages such a block shared its page with its neighbour. 64 MiB
 * regions: a segment of 64 MiB or more lives in them (COARSE_MIN). */
#define PAGE_SHIFT         20
#define NODE_SHIFT         10 /* 1,024 pages a node: a GiB */
#define NODE_PAGES         (1u << NODE_SHIFT)
#define GIB_SHIFT          (PAGE_SHIFT + NODE_SHIFT)
#define REGION_SHIFT       26 /* 64 MiB */
#define REGION_PAGES_SHIFT (REGION_SHIFT - PAGE_SHIFT)
#define NODE_REGIONS       (1u << (GIB_SHIFT - REGION_SHIFT))
#define COARSE_MIN         (G_GUINT64_CONSTANT (1) << REGION_SHIFT)
#define TOP_BITS           18 /* the flat table: the GiBs below 2^48 */
#define SLOT_FEW           ((guintptr) 1)
#define SLOT_RUNS          ((guintptr) 2)
#define SLOT_TAGS          (SLOT_FEW | SLOT_RUNS)
#define SLOT_NONE          SLOT_TAGS      /* no segment: both tags, no pointer */
#define SLOT_ONE           ((guintptr) 4) /* SLOT_FEW's pointer is its one segment's entry */
#define FEW_RUNS           3
#define RUNS_CLASSES       32

/* A page's (or a region's) slot, one line. @v says what it holds: an entry's address (one
 * segment over all of it, whose answer, the entry's first 48 bytes, is copied in @w), the set
 * of its segments tagged SLOT_FEW (up to three runs, in @w: the starts of the second and third,
 * G_MAXUINT64 where there is none, then the segment of each, or 0; where the slot has one segment
 * only, that segment's entry tagged SLOT_FEW | SLOT_ONE instead of a set: readers read neither),
 * a Runs record tagged SLOT_RUNS, or SLOT_NONE. */
typedef struct
{
  guint64 w[ANSWER_WORDS];
  guintptr v;
  guint64 unused;
} Slot;

G_STATIC_ASSERT (sizeof (Slot) == 64);

#define FEW_START(i) (i - 1) /* the words of the start of run 1 and 2 */
#define FEW_ENTRY(i) (2 + i) /* the words of the segment of run 0, 1 and 2 */

/* A run of a page: from @start to the next run's start (or the page's end), the innermost
 * segment there, or NULL (the writer's form). */
typedef struct
{
  guint64 start;
  const MemresIndexEntry *entry;
} Run;

/* A page's runs as readers see them (four or more): @word holds the starts of the runs, in address
 * order (the first the page's first byte), then their segments (MemresIndexEntry pointers, or 0),
 * @cap of each; the runs past the last start at G_MAXUINT64, with no segment. */
typedef struct
{
  guint32 cap;    /* a power of two, at least RUNS_MIN, set when made, never changed */
  guint32 n;      /* the writer's: runs in use */
  GPtrArray *set; /* the writer's: the segments of the slot, in the order mapped */
  guint64 word[];
} Runs;

/* the smallest capacity: a reader counts the starts at or before its address among these four
 * with no branch */
#define RUNS_MIN 4

/* A GiB: its pages' slots, its regions' slots after them (a region's slot at a fixed place from
 * the node, so that a lookup that finds no fine segment in its page goes there with no other
 * load), and the writer's bitmap of the pages whose slot is not SLOT_NONE. */
typedef struct
{
  Slot page[NODE_PAGES];
  Slot region[NODE_REGIONS];
  guint64 used[NODE_PAGES / 64];
} Node;

/* what the pages of a GiB span: a node's biased address moves by this per GiB */
#define NODE_STRIDE ((guintptr) NODE_PAGES * sizeof (Slot))
G_STATIC_ASSERT (G_STRUCT_OFFSET (Node, region) == NODE_STRIDE);

/* The two levels of slots: a page's (1 MiB, every segment below COARSE_MIN) and a region's
 * (64 MiB, the segments of COARSE_MIN or more). A unit is a page or a region, by its number. */
typedef enum
{
  PAGES,
  REGIONS
} Level;

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
static GPtrArray *free_sets;    /* GPtrArray, the sets of SLOT_FEW slots */
static GPtrArray *free_runs[RUNS_CLASSES]; /* Runs, by log2 of their capacity */
static GPtrArray *scratch;                 /* MemresIndexEntry, a unit's set */
static GPtrArray *with_coarse;             /* the same, a page's with the coarse ones over it */
static GPtrArray *sorted;                  /* the segments of a slot in address order */
static GPtrArray *stack;                   /* MemresIndexEntry, the segments open at a point */
static GArray *cuts;                       /* Run, a slot's runs as they are worked out */
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
 * place as if the page slots of all GiBs lay end to end, so that a reader finds the slot of
 * page pn at TOP_BIAS + pn * 64 with no mask. Never 0 (top_node_new() sees to it). */
#define TOP_BIAS(node, gib) ((guintptr) (node) - (guintptr) (gib) *NODE_STRIDE)
#define TOP_NODE(v, gib)    ((Node *) ((v) + (guintptr) (gib) *NODE_STRIDE))

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

/* A new node for GiB @gib of the flat table, published (inside a write). A node whose biased
 * address would be 0, the mark of no node, is exchanged for another. */
static Node *
top_node_new (guint64 gib)
{
  Node *node = node_alloc ();

  if (G_UNLIKELY (TOP_BIAS (node, gib) == 0))
    {
      Node *other = node_alloc ();

      free (node);
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

/* The node of GiB @gib, made when @create (inside a write). */
static inline __attribute__ ((always_inline)) Node *
gib_node (guint64 gib, gboolean create)
{
  if (gib < G_N_ELEMENTS (index_top))
    {
      if (index_top[gib] != 0)
        return TOP_NODE (index_top[gib], gib);
      return create ? top_node_new (gib) : NULL;
    }
  return dir_node (gib, create);
}

static inline guint
level_shift (Level l)
{
  return l == PAGES ? PAGE_SHIFT : REGION_SHIFT;
}

/* the units of a node, less one: a mask */
static inline guint64
level_mask (Level l)
{
  return l == PAGES ? NODE_PAGES - 1 : NODE_REGIONS - 1;
}

static inline Slot *
unit_slot (Node *node, Level l, guint64 k)
{
  return l == PAGES ? &node->page[k & (NODE_PAGES - 1)] : &node->region[k & (NODE_REGIONS - 1)];
}

static inline Node *
unit_node (Level l, guint64 k, gboolean create)
{
  return gib_node (k >> (GIB_SHIFT - level_shift (l)), create);
}

/* @to made a copy of @from (one move, not an add per element: a crowded page holds hundreds) */
static void
set_copy (GPtrArray *to, const GPtrArray *from)
{
  g_ptr_array_set_size (to, from->len);
  if (from->len > 0)
    memcpy (to->pdata, from->pdata, from->len * sizeof (gpointer));
}

/* The segments of slot value @v (not SLOT_NONE), in the order they were mapped: their array,
 * and their number in @n; a lone one's is @one. */
static inline gpointer const *
slot_members (guintptr v, gpointer *one, guint *n)
{
  const GPtrArray *set;

  if (!(v & SLOT_TAGS) || (v & SLOT_ONE))
    {
      *one = (gpointer) (v & ~(SLOT_TAGS | SLOT_ONE)); /* an entry: 64-byte aligned */
      *n = 1;
      return one;
    }
  set = (v & SLOT_TAGS) == SLOT_FEW ? (const GPtrArray *) (v - SLOT_FEW)
                                    : ((const Runs *) (v - SLOT_RUNS))->set;
  *n = set->len;
  return set->pdata;
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
static void
unit_get (Level l, guint64 k, GPtrArray *out)
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

/* Slot @s made to hold @e alone, its answer copied in (inside a write; whatever it held is the
 * caller's to release). */
static inline void
slot_direct (Slot *s, const MemresIndexEntry *e)
{
  guint64 w[ANSWER_WORDS];

  memcpy (w, e, sizeof w);
  for (guint i = 0; i < ANSWER_WORDS; i++)
    STORE (&s->w[i], w[i]);
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
  PUBLISH (&s->v, v);
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

/* The first page of @node from @i on, below @n, whose slot is not SLOT_NONE; or @n. */
static inline gsize
next_used (const Node *node, gsize i, gsize n)
{
  while (i < n)
    {
      guint64 w = node->used[i / 64] >> (i % 64);

      if (w != 0)
        return MIN (i + (gsize) __builtin_ctzll (w), n);
      i = (i | 63) + 1;
    }
  return n;
}

/* Page @pn's slot made to say that the fine segments of @set are its own (inside a write); its
 * runs are cut from them and the coarse segments of its region that overlap it. */
static void
page_put (guint64 pn, GPtrArray *set)
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
  for (guint i = 0; i < FEW_RUNS; i++)
    {
      if (i > 0)
        STORE (&s->w[FEW_START (i)], i < n ? start[i] : G_MAXUINT64);
      STORE (&s->w[FEW_ENTRY (i)], i < n ? (guint64) (guintptr) run[i] : 0);
    }
  PUBLISH (&s->v, (guintptr) e | SLOT_FEW | SLOT_ONE);
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
      PUBLISH (&s->v, SLOT_NONE);
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
  unit_get (l, k, scratch);
  had = g_ptr_array_remove (scratch, e) && add;
  if (add && !had)
    g_ptr_array_add (scratch, e);
  else if (had)
    unit_get (l, k, scratch);
  if (l == PAGES)
    page_put (k, scratch);
  else
    region_put (k, scratch);
}

/* The slots of units @k on of @node, @n of them, that @e covers whole: from SLOT_NONE to @e
 * (@add) or from @e to SLOT_NONE, and those that hold @e already made to say its new length (a
 * growth), up to the first that is none of these; returns how many. A page slot of SLOT_NONE may
 * lie under coarse segments: a fine one that covers the page is shorter, the innermost over all
 * of it. */
static gsize
slots_swap (Node *node, Level l, guint64 k, gsize n, MemresIndexEntry *e, gboolean add)
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
            PUBLISH (&s[i].v, SLOT_NONE);
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
static void
units_update (Level l, MemresIndexEntry *e, gboolean add)
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

          k += slots_swap (node, l, k, stop - k + 1, e, add);
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
              page_put (p, scratch);
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
static void
entry_update (MemresIndexEntry *e, gboolean add)
{
  if (!e->coarse)
    {
      units_update (PAGES, e, add);
      return;
    }
  units_update (REGIONS, e, add);
  pages_recut (e);
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
      unit_get (PAGES, pn, scratch);
      wanted_match (scratch, mr, w, i, j, out);
    }
  for (gsize i = 0, j; i < n; i = j)
    {
      guint64 rn = w[i].base >> REGION_SHIFT;

      for (j = i; j < n && (w[j].base >> REGION_SHIFT) == rn; j++)
        ;
      unit_get (REGIONS, rn, scratch);
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
  entry_update (e, TRUE);
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

/* units_update() of a batch's fine segment @e (its @seq-th), inside a write: the pages it covers
 * whole and shares with no other fine segment take their one line of stores now; every other page
 * is left for pages_rewrite(), which rewrites it once for all the batch's segments there. A
 * coarse one changes its regions at once. */
static void
pages_touch (MemresIndexEntry *e, gboolean add, guint seq)
{
  guint64 pn = first_page (e), last = last_page (e);
  guint64 whole_first = first_page (e) + ((e->base & ((1u << PAGE_SHIFT) - 1)) != 0);
  guint64 whole_end = e->end >> PAGE_SHIFT;

  if (e->coarse)
    {
      entry_update (e, add);
      return;
    }
  for (;;)
    {
      Touch t = { pn, e, seq };
      Node *node;

      if (pn >= whole_first && pn < whole_end && (node = gib_node (pn >> NODE_SHIFT, add)) != NULL)
        {
          guint64 stop = MIN (whole_end - 1, pn | (NODE_PAGES - 1));

          pn += slots_swap (node, PAGES, pn, stop - pn + 1, e, add);
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

      unit_get (PAGES, pn, scratch);
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
  if (!e->coarse && end - e->base >= COARSE_MIN)
    {
      /* out of its pages at its old end, into its regions at the new one */
      units_update (PAGES, e, FALSE);
      e->coarse = TRUE;
    }
  e->end = end;
  STORE (&e->length, end - e->base);
  entry_update (e, TRUE); /* its old units (their runs end where it ended) and its new ones */
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
  entry_update (e, FALSE);
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

/* The readers' rule. A reader takes no lock: it reads index_seq (acquire, its low bit cleared),
 * then words a writer may be rewriting meanwhile (relaxed atomic loads, or the answer's three
 * 16-byte loads), then checks index_seq again after an acquire fence (seq_still()): only then
 * is what it read one state of the index. So a pointer read from such a word is followed before
 * that check only where every value the word can ever hold is a valid pointer, of the one type
 * the reader takes it for, to memory that is never freed:
 * - index_top[gib]: 0, or a node's biased address, set once and never changed; nodes are never
 *   freed. lookup_at() follows it at once.
 * - index_dir: NULL, or a hash table; a table replaced by a bigger one is kept (retired_dirs), and
 *   its bits, shift and mask are set before it is published. A bucket's node is read only after
 *   its key matched (acquire): the node is published before the key, and a bucket with a key is
 *   never changed. high_node() follows both at once.
 * - a slot's v: every value it takes is a whole value with its tag bits (a writer stores it in
 *   one store), and each tag names one type: no tag, an entry (not followed: the answer is the
 *   slot's own words); SLOT_RUNS, a Runs record, reused only for records of the same capacity and
 *   never freed, so its cap and its 2 * cap words are always there; SLOT_FEW, nothing followed
 *   (the runs are the slot's own words). lookup_page() and lookup_region() follow a Runs pointer
 *   at once.
 * Every other pointer is read from words that hold other things in other states, and is followed
 * only after seq_still() (a retry from the start when the index changed):
 * - a SLOT_FEW slot's run entries (lookup_few()): those words hold a direct slot's answer bytes
 *   (a length, a device and its handle types, a tag) when the slot was rewritten to the direct
 *   form after the reader read its v. Followed before the check, they crashed the readers of
 *   /lookup/shared-pages-race on a 16-core machine (h-index, reverted in 1b033cd).
 * - a Runs record's run entries (lookup_runs()): its entry words only ever hold entries or 0 (a
 *   record keeps its capacity), so they could be followed at once; they are checked first all the
 *   same, so that the rule has one exception list, the one above.
 * An entry followed after the check may be removed and reused while the reader copies its answer:
 * entries are never freed, and lookup_answer()'s final check throws away a torn copy. */

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

/* Whether the index is still at sequence number @seq: what the reader read before the call is
 * one state's, and a pointer among it may be followed (the readers' rule, above). */
static inline __attribute__ ((always_inline)) gboolean
seq_still (guint64 seq)
{
  __atomic_thread_fence (__ATOMIC_ACQUIRE);
  return LOAD (&index_seq) == seq;
}

/* 16 bytes of an answer, copied in one move */
typedef gint64 AnswerPart __attribute__ ((vector_size (16), aligned (8), may_alias));

/* The answer at @w (a slot's copy, or an entry: the first 48 bytes of a MemresLookupInfo), of a
 * segment that holds @addr, in @info when the index is still at sequence number @seq (even: an odd
 * number read at the start was made even by clearing its low bit, so that it never matches); else
 * the whole lookup again. The 48 bytes are copied as they lie, then the offset. */
static inline __attribute__ ((always_inline)) gboolean
lookup_answer (const guint64 *w, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  AnswerPart a0 = ((const AnswerPart *) w)[0];
  AnswerPart a1 = ((const AnswerPart *) w)[1];
  AnswerPart a2 = ((const AnswerPart *) w)[2];
  guint64 base = LOAD (&w[BASE_WORD]);

  if (G_UNLIKELY (!seq_still (seq)))
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
  if (G_UNLIKELY (!seq_still (seq)))
    return lookup_retry (addr, info);
  return FALSE;
}

/* The entry @e of the run of @addr, read from words a writer may have rewritten since @seq:
 * followed only once the index is known to be still at @seq (the readers' rule, above); NULL
 * (no segment there) is then a true "not found". */
static inline __attribute__ ((always_inline)) gboolean
lookup_run_entry (const MemresIndexEntry *e, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  if (G_UNLIKELY (!seq_still (seq)))
    return lookup_retry (addr, info);
  if (G_UNLIKELY (e == NULL))
    return FALSE;
  return lookup_answer ((const guint64 *) e, addr, info, seq);
}

/* The rest of a lookup whose slot @s holds up to three runs (SLOT_FEW): the starts of the second
 * and third counted with no branch, the run's segment read from the slot, then (the sequence
 * checked: the slot may hold a direct answer's bytes by now) its entry. */
static inline __attribute__ ((always_inline)) gboolean
lookup_few (const Slot *s, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  gsize i = (gsize) (LOAD (&s->w[FEW_START (1)]) <= addr) + (LOAD (&s->w[FEW_START (2)]) <= addr);

  return lookup_run_entry ((const MemresIndexEntry *) (guintptr) LOAD (&s->w[FEW_ENTRY (i)]), addr,
                           info, seq);
}

/* The rest of a lookup whose slot holds the runs @r: the last run starting at or before @addr
 * (the first starts at the slot's first byte). Four runs are counted with no branch; more by a
 * binary search in log2 (capacity) steps that are the same whatever the data. Read without a
 * lock, so only as good as the sequence check after it (a torn read still stays inside the
 * runs). Out of line: the search's registers would cost the direct path a save and a restore. */
G_GNUC_NO_INLINE static gboolean
lookup_runs (guint64 addr, MemresLookupInfo *info, guint64 seq, const Runs *r)
{
  const guint64 *start = r->word;
  const MemresIndexEntry *e;
  guint cap = LOAD (&r->cap);
  gsize i;

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
  return lookup_run_entry (e, addr, info, seq);
}

/* The rest of a lookup whose page slot holds no fine segment: the slot of its region in @node
 * (the coarse segments), of the same kinds as a page's. */
G_GNUC_NO_INLINE static gboolean
lookup_region (const Node *node, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  const Slot *s = &node->region[(addr >> REGION_SHIFT) & (NODE_REGIONS - 1)];
  guintptr v = LOAD_ACQUIRE (&s->v);

  if (G_LIKELY (!(v & SLOT_TAGS)))
    return lookup_answer (s->w, addr, info, seq);
  if (!(v & SLOT_RUNS))
    return lookup_few (s, addr, info, seq);
  if (v == SLOT_NONE)
    return lookup_none (addr, info, seq);
  return lookup_runs (addr, info, seq, (const Runs *) (v - SLOT_RUNS));
}

/* The rest of a lookup whose page slot value @v (of @node) is runs or SLOT_NONE. */
G_GNUC_NO_INLINE static gboolean
lookup_page_rest (guintptr v, const Node *node, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  if (v == SLOT_NONE)
    return lookup_region (node, addr, info, seq);
  return lookup_runs (addr, info, seq, (const Runs *) (v - SLOT_RUNS));
}

/* The rest of a lookup at sequence number @seq from @s, the slot of @addr's page in @node: the
 * answer in @info (untouched when there is none), or the whole lookup again when a writer changed
 * the index meanwhile. The direct path (a slot that is one segment, its answer in the slot's own
 * line) falls through every branch and saves no register; up to three runs are worked out beside
 * it, the rest (more runs, the region's slot, a writer seen) in functions of their own. */
static inline __attribute__ ((always_inline)) gboolean
lookup_page (const Slot *s, const Node *node, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  guintptr v = LOAD_ACQUIRE (&s->v);

  if (ALMOST_ALWAYS (!(v & SLOT_TAGS)))
    return lookup_answer (s->w, addr, info, seq);
  if (G_LIKELY (!(v & SLOT_RUNS))) /* SLOT_FEW: neither runs nor SLOT_NONE */
    return lookup_few (s, addr, info, seq);
  return lookup_page_rest (v, node, addr, info, seq);
}

/* A lookup above the flat table: the hash table's node. */
G_GNUC_NO_INLINE __attribute__ ((cold)) static gboolean
lookup_high (guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  const Node *node = high_node (addr);

  if (node == NULL)
    return lookup_none (addr, info, seq);
  return lookup_page (&node->page[(addr >> PAGE_SHIFT) & (NODE_PAGES - 1)], node, addr, info, seq);
}

/* A lookup at sequence number @seq (even). */
static inline __attribute__ ((always_inline)) gboolean
lookup_at (guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  guint64 gib = addr >> GIB_SHIFT;
  /* the page's slot's place from the biased node: the page number times 64 */
  guint64 at = (addr >> (PAGE_SHIFT - 6)) & ~(guint64) 63;
  guintptr top;

  G_STATIC_ASSERT (sizeof (Slot) == 1u << 6);
  if (G_UNLIKELY (gib >= G_N_ELEMENTS (index_top)))
    return lookup_high (addr, info, seq);
  top = LOAD_ACQUIRE (&index_top[gib]);
  if (G_UNLIKELY (top == 0))
    return lookup_none (addr, info, seq);
  /* the node's slot of the page, TOP_BIAS undone by the page number's high bits (the GiB) */
  return lookup_page ((const Slot *) (top + at), (const Node *) (top + gib * NODE_STRIDE), addr,
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
 * sequence lock, a fixed chain of loads (the node of the address's GiB, then the slot of its
 * 1 MiB page, which holds the answer of a segment over the whole page; where segments' edges lie
 * in that page or segments nest, the segment of the address's run; for a segment of 64 MiB or
 * more, the slot of its 64 MiB region beside the page's) (docs/segments.md,
 * bench/bench-lookup.c). No driver call.
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

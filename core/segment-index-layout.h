/* memres - CUDA memory resources
 * segment-index-layout.h: the layout of the process-wide segment index, shared by the three files
 * that make it: segment-index.c (its operations, the ones segment-index.h gives segments.c),
 * segment-slots.c (the writer's nodes, slots and runs) and segment-lookup.c (memres_lookup(), the
 * readers, and the state they read). No other file includes it.
 *
 * The index is a directory of the address space's 1 MiB pages and 64 MiB regions. A node holds
 * the slots of the 1,024 pages and 16 regions of one GiB; the nodes of the GiBs below 2^48
 * (x86-64's and 48-bit arm64's user addresses, where the driver's device addresses lie too) are
 * found in a flat table indexed by the GiB (2 MiB of zero pages that only the GiBs in use touch;
 * each entry the node's address less that of the table's empty node, TOP_REL, so that an entry of
 * 0, a GiB with no node, leads to that node, whose slots all read as "nothing here", with no test
 * of its own), those of higher GiBs in a hash table (open addressing).
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
 * segment, told from every other kind of slot by the sign of one word, its negated base, which
 * also gives the offset) runs straight through
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
 * node found once for all of them (_memres_index_units_update). A batch of segments (segments.c's
 * memres_resource_raise_segment_events(): a sleep's thousands) changes each page it touches once
 * (pages_touch(), pages_rewrite()): one event at a time, a page crowded with segments (a cache's
 * buffers) was sorted again at every one of them.
 *
 * How the readers read it with no lock, and which pointers they may follow when: segment-lookup.c.
 */
#pragma once

#include "segment-index.h"

#include <memres/memres-lookup-inline.h>

G_BEGIN_DECLS

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
 * a Runs record tagged SLOT_RUNS, or SLOT_NONE. @neg_base is the readers' test of the first kind
 * and their offset in one word: where @v is an entry's address, 0 less the entry's base (as a
 * signed number, negative: a segment of the first kind has a base from 1 to 2^63, NEG_BASE_OK;
 * one outside is written as SLOT_FEW | SLOT_ONE with one run); for every other kind 0. So a
 * reader's one load and sign test tells the direct case, and its address plus the word is the
 * offset, with no load of the base and no test of @v's tag bits. */
typedef struct
{
  guint64 w[ANSWER_WORDS];
  guintptr v;
  guint64 neg_base;
} Slot;

/* whether a segment at @base may be a slot's one answer: its negated base is negative */
#define NEG_BASE_OK(base) ((gint64) (0 - (guint64) (base)) < 0)

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

/* ---- what the readers read (defined in segment-lookup.c; changed by the writer) ------------- */

/* The sequence lock's two counts (atomic, never wrap): the changes begun and the changes done.
 * A writer adds one to @begun before any store of its change and one to @done after the last; a
 * reader reads @done first and @begun last, and what it read between is one state of the index
 * when the two are equal (segment-lookup.c). In one line: both are written by every change. */
typedef struct
{
  guint64 begun;
  guint64 done;
} IndexSeq;

/* The readers' whole state but the hash table, in one object, so that a reader reaches all of it
 * from one address, the empty node's, which memres_lookup_index (memres-lookup-inline.h) gives
 * the inline readers of applications: the node the flat table's empty entries lead to (a slot's
 * place is that node's address plus the table's entry plus the page's place), the sequence
 * counts in the line before it and the table after it (each the displacement of a load). */
typedef struct
{
  IndexSeq seq;
  guint64 pad[6]; /* the counts' line, which every change writes, to themselves */
  /* never written: every word 0, so that a slot reads as no direct answer (neg_base 0) and, by
   * its v of 0 and its zero words, as SLOT_FEW with no run at 0 or after (lookup_few() finds
   * none there). Zero pages, touched only by the readers of empty GiBs. */
  Node empty;
  /* atomic: the node of each GiB below 2^48, as TOP_REL() of it; 0: none (the empty node) */
  guintptr top[1u << TOP_BITS];
} IndexFlat;

/* Layout 1 of memres-lookup-inline.h (MEMRES_LOOKUP_LAYOUT), whose direct path is the readers'
 * here too: what it reads of the index, where it reads it. A change that breaks one of these
 * is a new layout: a new MEMRES_LOOKUP_LAYOUT in that header, with its constants, and
 * memres_lookup_index's layout word set to it (applications built before then call
 * memres_lookup() for every address, as that header's documentation promises). */
#define FROM_EMPTY(f)                                                                              \
  ((long) G_STRUCT_OFFSET (IndexFlat, f) - (long) G_STRUCT_OFFSET (IndexFlat, empty))
G_STATIC_ASSERT (FROM_EMPTY (seq.begun) == 8 * MEMRES_LOOKUP_BEGUN_WORD_);
G_STATIC_ASSERT (FROM_EMPTY (seq.done) == 8 * MEMRES_LOOKUP_DONE_WORD_);
G_STATIC_ASSERT (FROM_EMPTY (top) == MEMRES_LOOKUP_TOP_AT_);
#undef FROM_EMPTY
G_STATIC_ASSERT (TOP_BITS == MEMRES_LOOKUP_TOP_BITS_);
G_STATIC_ASSERT (PAGE_SHIFT == MEMRES_LOOKUP_PAGE_SHIFT_);
G_STATIC_ASSERT (NODE_SHIFT == MEMRES_LOOKUP_NODE_SHIFT_);
G_STATIC_ASSERT (G_STRUCT_OFFSET (Node, page) == 0);
G_STATIC_ASSERT (sizeof (Slot) == 1u << MEMRES_LOOKUP_SLOT_SHIFT_);
G_STATIC_ASSERT (G_STRUCT_OFFSET (Slot, w) == 0);
G_STATIC_ASSERT (G_STRUCT_OFFSET (Slot, neg_base) == 8 * MEMRES_LOOKUP_NEG_BASE_WORD_);
G_STATIC_ASSERT (sizeof (MemresLookupPart_) * 3 == ANSWER_WORDS * 8);

G_GNUC_INTERNAL extern IndexFlat _memres_index_flat;
/* atomic: the hash table of the nodes of the GiBs above */
G_GNUC_INTERNAL extern Dir *_memres_index_dir;

/* What the flat table holds for @node: its address less the empty node's (a heap node is never
 * the empty node, so never 0); a reader's slot of page pn is at the empty node + this + (pn % 1024)
 * * 64. */
#define TOP_REL(node) ((guintptr) (node) - (guintptr) &_memres_index_flat.empty)
#define TOP_NODE(v)   ((Node *) ((v) + (guintptr) &_memres_index_flat.empty))
#define TOP_GIBS      G_N_ELEMENTS (_memres_index_flat.top)

static inline gsize
dir_hash (guint64 key, guint shift)
{
  return (gsize) ((key * G_GUINT64_CONSTANT (0x9e3779b97f4a7c15)) >> shift);
}

/* ---- the writer's, shared by segment-slots.c and segment-index.c (under segments.c's lock) -- */

/* The node of the flat table's GiB @gib, made and published (inside a write). */
G_GNUC_INTERNAL Node *_memres_index_top_node_new (guint64 gib);
/* The node of the GiB @gib above the flat table, made when @create (inside a write). */
G_GNUC_INTERNAL Node *_memres_index_dir_node (guint64 gib, gboolean create);
/* Sets @out to the segments of unit @k's slot: a page's fine ones, a region's coarse ones. */
G_GNUC_INTERNAL void _memres_index_unit_get (Level l, guint64 k, GPtrArray *out);
/* segment-slots.c's work arrays made (once, inside ensure_setup()). */
G_GNUC_INTERNAL void _memres_index_slots_setup (void);
/* Page @pn's slot made to hold the fine segments of @set (inside a write). */
G_GNUC_INTERNAL void _memres_index_page_put (guint64 pn, GPtrArray *set);
/* The slots of the @n units from @k of @node that @e covers whole, swapped from empty to @e
 * (@add) or back, up to the first that is neither: how many (inside a write). */
G_GNUC_INTERNAL gsize _memres_index_slots_swap (Node *node, Level l, guint64 k, gsize n,
                                                MemresIndexEntry *e, gboolean add);
/* @e added to (or removed from) every unit of level @l it spans (inside a write). */
G_GNUC_INTERNAL void _memres_index_units_update (Level l, MemresIndexEntry *e, gboolean add);
/* @e into the index (@add) or out of it: its pages, or its regions and the pages cut again
 * (inside a write). */
G_GNUC_INTERNAL void _memres_index_entry_update (MemresIndexEntry *e, gboolean add);

/* The node of GiB @gib, made when @create (inside a write). */
static inline __attribute__ ((always_inline)) Node *
gib_node (guint64 gib, gboolean create)
{
  if (gib < TOP_GIBS)
    {
      if (_memres_index_flat.top[gib] != 0)
        return TOP_NODE (_memres_index_flat.top[gib]);
      return create ? _memres_index_top_node_new (gib) : NULL;
    }
  return _memres_index_dir_node (gib, create);
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

G_END_DECLS

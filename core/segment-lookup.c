/* memres - CUDA memory resources
 * segment-lookup.c: memres_lookup(), which reads the segment index (segment-index-layout.h)
 * without a lock, and the state it reads (the sequence counts, the flat table, the hash table),
 * which the writer (segment-index.c, segment-slots.c) changes under segments.c's lock.
 *
 * Readers take no lock and write nothing shared: they read the count of changes done, then the
 * index, then the count of changes begun, and retry unless the two counts are equal (a writer
 * adds one to the count begun before its change and one to the count done after it: a change
 * under way when the reader starts, or begun meanwhile, makes the count begun larger at the end,
 * so a reader needs no test at the start). Nothing a reader can reach is ever freed:
 * entries, runs and nodes removed from the index wait on free lists for their next use (runs
 * only for runs of the same capacity, so that a reader bounds its search by a capacity that never
 * changes), and a full hash table is replaced by one twice its size and kept. But a slot's words
 * are answer bytes in one state and run entries in another: a pointer read from a word that may
 * hold something else is followed only after the sequence is checked once more (the readers'
 * rule, below, says which pointers are followed before). The final check throws away what was
 * read through a pointer (the answer is copied with three 16-byte loads: a torn copy is what the
 * check is for). No answer is kept per thread: with no table in front, the cost is the same
 * whether the thread found the segment before or not, and no branch mispredicts between a kept
 * answer and a search. */
#include "segment-index-layout.h"

IndexFlat _memres_index_flat __attribute__ ((aligned (64)));
Dir *_memres_index_dir;

/* memres-lookup-inline.h's object: the layout of the index it leads to, and the index. Documented
 * in that header. */
const MemresLookupIndex memres_lookup_index
    = { MEMRES_LOOKUP_LAYOUT, 0, (const guint64 *) &_memres_index_flat.empty };
/* its size is ABI (a program may hold a copy of it, made by a copy relocation) */
G_STATIC_ASSERT (sizeof (MemresLookupIndex) == 8 + sizeof (gpointer));
G_STATIC_ASSERT (G_STRUCT_OFFSET (MemresLookupIndex, layout) == 0);

/* ---- the readers ---------------------------------------------------------------------------- */

/* The readers' rule. A reader takes no lock: it reads _memres_index_flat.seq.done (acquire), then
 * words a writer may be rewriting meanwhile (relaxed atomic loads, or plain loads where a value is
 * only tested or copied, so that the compiler folds the load into the instruction that uses it:
 * the answer's three 16-byte loads, the direct path's slot neg_base), then, after an
 * acquire fence, checks that _memres_index_flat.seq.begun equals what it read (seq_still(), a plain
 * load folded into the compare): only then is what it read one state of the index. So a pointer
 * read from such a word is followed before that check only where every value the word can ever hold
 * is a valid pointer, of the one type the reader takes it for, to memory that is never freed:
 * - _memres_index_flat.top[gib]: 0 (the empty node, never written), or a node's address
 *   relative to the empty node, set once and never changed; nodes are never freed. lookup_at()
 *   follows it at once, read with a plain load that GCC folds into the add of the page's place:
 *   the slot's loads depend on its value by their address, which orders them after it (x86-64's
 *   loads are not reordered; arm64 and POWER keep address-dependent loads in order), and the
 *   node's words were written before the release store that published it.
 * - _memres_index_dir: NULL, or a hash table; a table replaced by a bigger one is kept
 *   (retired_dirs), and its bits, shift and mask are set before it is published. A bucket's
 *   node is read only after its key matched (acquire): the node is published before the key,
 *   and a bucket with a key is never changed. high_node() follows both at once.
 * - a slot's v: every value it takes is a whole value with its tag bits (a writer stores it in
 *   one store), and each tag names one type: no tag, an entry (not followed: the answer is the
 *   slot's own words); SLOT_RUNS, a Runs record, reused only for records of the same capacity and
 *   never freed, so its cap and its 2 * cap words are always there; SLOT_FEW, nothing followed
 *   (the runs are the slot's own words). lookup_page() and lookup_region() follow a Runs pointer
 *   at once, from an acquire load of v, made after their plain load of the slot's neg_base sent
 *   the direct case to its answer (neg_base is a number, never followed; a v with no tag read
 *   there is a writer's change between the two loads, or the empty node's 0, and it goes where
 *   the sequence is checked before anything is followed: lookup_few(), which finds no run in
 *   the empty node's zero words).
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
 * entries are never freed, and lookup_answer()'s final check throws away a torn copy.
 * The direct path (the flat table's entry, then a slot whose negated base says it holds one
 * segment's answer) is memres-lookup-inline.h's internal part, which memres_lookup_inline()
 * compiles into applications: they read by this rule too, through memres_lookup_index, and
 * only while its layout word is the one their header knew. */

/* The node of the GiB of @addr above the flat table, or NULL. */
G_GNUC_NO_INLINE static const Node *
high_node (guint64 addr)
{
  const Dir *d = LOAD_ACQUIRE (&_memres_index_dir);
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

/* Whether no change began since the @seq-th was done (@seq: the count done that the lookup
 * started from): what the reader read before the call is one state's, and a pointer among it may
 * be followed (the readers' rule, above). The count begun is read with a plain load after the
 * fence, one aligned word that GCC folds into the compare (an atomic load it keeps apart). */
static inline __attribute__ ((always_inline)) gboolean
seq_still (guint64 seq)
{
  __atomic_thread_fence (__ATOMIC_ACQUIRE);
  return _memres_index_flat.seq.begun == seq;
}

/* 16 bytes of an answer, copied in one move (the direct path's type, memres-lookup-inline.h) */
typedef MemresLookupPart_ AnswerPart;

/* The answer at @w (a slot's copy, or an entry: the first 48 bytes of a MemresLookupInfo), of a
 * segment that holds @addr, in @info when no change began since the @seq-th was done; else the
 * whole lookup again. The 48 bytes are copied as they lie, then the offset. */
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

/* The direct case at the slot @s (a page's or a region's), begun at @seq: memres-lookup-inline.h's
 * _memres_lookup_slot_(), the one copy of it, which applications also compile into their code
 * through memres_lookup_inline(). MEMRES_LOOKUP_ANSWERED_ (@info filled), MEMRES_LOOKUP_CHANGED_
 * (a writer seen: the caller retries) or MEMRES_LOOKUP_NOT_DIRECT_. */
static inline __attribute__ ((always_inline)) int
lookup_direct (const Slot *s, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  return _memres_lookup_slot_ ((const guint64 *) &_memres_index_flat.empty, s->w, addr, info, seq);
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

/* The rest of a lookup whose page slot holds no fine segment: @s, the slot of its region (the
 * coarse segments), of the same kinds as a page's. */
G_GNUC_NO_INLINE static gboolean
lookup_region (guint64 addr, MemresLookupInfo *info, guint64 seq, const Slot *s)
{
  int found = lookup_direct (s, addr, info, seq);
  guintptr v;

  if (G_LIKELY (found == MEMRES_LOOKUP_ANSWERED_))
    return TRUE;
  if (G_UNLIKELY (found == MEMRES_LOOKUP_CHANGED_))
    return lookup_retry (addr, info);
  v = LOAD_ACQUIRE (&s->v);
  if (!(v & SLOT_RUNS))
    return lookup_few (s, addr, info, seq);
  if (v == SLOT_NONE)
    return lookup_none (addr, info, seq);
  return lookup_runs (addr, info, seq, (const Runs *) (v - SLOT_RUNS));
}

/* The rest of a lookup whose page slot @s has the value @v, runs or SLOT_NONE. The region's slot
 * is found from the page's with no load: the node's page slots, then its region slots. */
G_GNUC_NO_INLINE static gboolean
lookup_page_rest (guint64 addr, MemresLookupInfo *info, guint64 seq, guintptr v, const Slot *s)
{
  G_STATIC_ASSERT (G_STRUCT_OFFSET (Node, region) == NODE_PAGES * sizeof (Slot));
  if (v == SLOT_NONE)
    {
      guint64 page = (addr >> PAGE_SHIFT) & (NODE_PAGES - 1);

      return lookup_region (addr, info, seq, s + NODE_PAGES - page + (page >> REGION_PAGES_SHIFT));
    }
  return lookup_runs (addr, info, seq, (const Runs *) (v - SLOT_RUNS));
}

/* The rest of a lookup at sequence number @seq from @s, the slot of @addr's page in its node: the
 * answer in @info (untouched when there is none), or the whole lookup again when a writer changed
 * the index meanwhile. The direct path (a slot that is one segment, its answer in the slot's own
 * line) falls through every branch and saves no register; up to three runs are worked out beside
 * it, the rest (more runs, the region's slot, a writer seen) in functions of their own. */
static inline __attribute__ ((always_inline)) gboolean
lookup_page (const Slot *s, guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  int found = lookup_direct (s, addr, info, seq);
  guintptr v;

  /* the direct path: one plain load of the negated base, its sign test (one instruction fused
   * with the branch) and its sum with the address, the offset. The other kinds read @v
   * (acquire, to follow a runs record at once); a @v that is an entry's address there (the
   * direct kind, no tag bits) was a writer's change between the two reads: lookup_few() reads
   * its answer bytes as runs, and its sequence check sends the lookup back before it follows
   * one (the readers' rule, above) */
  if (ALMOST_ALWAYS (found == MEMRES_LOOKUP_ANSWERED_))
    return TRUE;
  if (G_UNLIKELY (found == MEMRES_LOOKUP_CHANGED_))
    return lookup_retry (addr, info);
  v = LOAD_ACQUIRE (&s->v);
  if (G_LIKELY (!(v & SLOT_RUNS))) /* SLOT_FEW: neither runs nor SLOT_NONE */
    return lookup_few (s, addr, info, seq);
  return lookup_page_rest (addr, info, seq, v, s);
}

/* A lookup above the flat table: the hash table's node. */
G_GNUC_NO_INLINE __attribute__ ((cold)) static gboolean
lookup_high (guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  const Node *node = high_node (addr);

  if (node == NULL)
    return lookup_none (addr, info, seq);
  return lookup_page (&node->page[(addr >> PAGE_SHIFT) & (NODE_PAGES - 1)], addr, info, seq);
}

/* A lookup from the count of changes done @seq. */
static inline __attribute__ ((always_inline)) gboolean
lookup_at (guint64 addr, MemresLookupInfo *info, guint64 seq)
{
  const IndexFlat *flat = &_memres_index_flat;

  /* the table's address taken as an opaque value, so that GCC gives it a register of its own:
   * otherwise it put it in @addr's, and kept @addr for the offset by one copy more (gcc 12) */
  __asm__("" : "+r"(flat));
  if (G_UNLIKELY ((addr >> GIB_SHIFT) >= TOP_GIBS))
    return lookup_high (addr, info, seq);
  /* memres-lookup-inline.h's, as memres_lookup_inline() finds it: a plain load of the GiB's
   * entry (the readers' rule, above), one add with the page's place; a GiB with no node (0)
   * reads the empty node's slot, with no test here */
  return lookup_page (
      (const Slot *) _memres_lookup_flat_slot_ ((const guint64 *) &flat->empty, addr), addr, info,
      seq);
}

/* The lookup after a writer was seen: again, waiting while a change is under way (the count
 * begun ahead of the count done). */
G_GNUC_NO_INLINE __attribute__ ((cold)) static gboolean
lookup_retry (guint64 addr, MemresLookupInfo *info)
{
  guint64 seq;

  while ((seq = LOAD_ACQUIRE (&_memres_index_flat.seq.done))
         != LOAD (&_memres_index_flat.seq.begun))
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
 * granules, the lower layer's (the arena's granule, inside the cache's segment); where a
 * cache's block lies across the edge of two granules (they overlap in part), the shorter one
 * (of equal lengths, the later mapped). A segment is
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
 * bench/bench-lookup.c). No driver call. The answer is stored in 16-byte pieces: an @info at a
 * 16-byte boundary (`__attribute__ ((aligned (16)))` on the variable) never has one cross a cache
 * line, where one 8 bytes past such a boundary does in three places of four.
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
  /* a change begun and not done yet makes the count of changes begun, read at the end, larger:
   * the lookup runs through and retries there, with no branch of its own here */
  return lookup_at ((guint64) (guintptr) ptr, info, LOAD_ACQUIRE (&_memres_index_flat.seq.done));
}

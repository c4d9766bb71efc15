/* memres - CUDA memory resources
 * segment-index.c: the process-wide index of segments (segment-index.h) and memres_lookup(),
 * which reads it without a lock.
 *
 * The index is a directory of the address space's 2 MiB pages. A node holds the slots of the
 * 512 pages of one GiB and is found in a hash table (open addressing) keyed by the address's
 * GiB; a page's slot says which segments overlap the page: none (0); one segment that covers
 * the whole page and is alone there (a pointer to its entry); or any other set, a segment's
 * edge inside the page or segments nested (a pointer to a list of their ranges and entries,
 * tagged by its low bit). A lookup is then a bounded number of loads whatever the number of
 * segments: the table, the node, the slot, the entry (or a short list). Where segments nest (a
 * cache's chunk inside a `vmm` buffer), the innermost holding the address is the last in the
 * page's list (by base, longest first, the later mapped among equal ranges) at or before the
 * address that holds it, found by a binary search and a walk up the parents (the segments of
 * one resource never overlap; those of two layers nest, the upper one mapped after the segment
 * it lies in). A change rewrites only the slots of the pages the segment spans:
 * its cost does not depend on how many segments there are.
 *
 * Readers take no lock and write nothing shared: they read with atomic loads between two reads
 * of a sequence number, and retry when it changed (a writer makes it odd while it changes the
 * index, under segments.c's lock). Nothing a reader can reach is ever freed: entries, lists and
 * nodes removed from the index wait on free lists for their next use (a list only for a list
 * of the same capacity, so that a reader bounds its scan by a capacity that never changes), and
 * a full hash table is replaced by one twice its size and kept. A stale pointer thus always
 * leads to valid memory, and the sequence check throws away what was read through it.
 *
 * In front of the search each thread keeps the answers it found in a small table of its own,
 * each tagged with the sequence number it was read at: any change of the index makes them all
 * stale at once, so a kept answer is used only while the index is exactly what it was. It also
 * keeps the nodes it found, which need no such check (a node stays its GiB's for good), so
 * that a search in a GiB it saw before starts at the node's slot. */
#include "segment-index.h"

#include <stdlib.h>
#include <string.h>

#define PAGE_SHIFT   21 /* 2 MiB pages */
#define NODE_SHIFT   9  /* 512 pages a node: a GiB */
#define NODE_PAGES   (1u << NODE_SHIFT)
#define SLOT_LIST    ((guintptr) 1)
#define LIST_CLASSES 32

typedef struct
{
  guint64 base;
  guint64 end;
  MemresIndexEntry *entry;
  gint parent; /* the innermost earlier item containing this one, -1 for none */
} Item;

typedef struct
{
  guint32 cap; /* set when the list is made, never changed */
  guint32 n;
  Item item[];
} List;

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

#define LOAD(p)     __atomic_load_n ((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n ((p), (v), __ATOMIC_RELAXED)

static guint64 index_seq; /* atomic: odd while the index changes; never wraps */
static Dir *index_dir;    /* atomic */
/* the writer's, under segments.c's lock */
static GSList *retired_dirs;
static GPtrArray *live;                     /* MemresIndexEntry, in no order */
static GPtrArray *free_entries;             /* MemresIndexEntry */
static GPtrArray *free_lists[LIST_CLASSES]; /* List, by log2 of their capacity */
static GPtrArray *scratch;                  /* MemresIndexEntry, a page's set */
static GArray *stack;                       /* gint, for a list's parents */

/* ---- the writer ----------------------------------------------------------------------------- */

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
  live = g_ptr_array_new ();
  free_entries = g_ptr_array_new ();
  scratch = g_ptr_array_new ();
  stack = g_array_new (FALSE, FALSE, sizeof (gint));
}

/* The node of the GiB @gib, made when @create (inside a write). */
static Node *
dir_node (guint64 gib, gboolean create)
{
  Dir *d = index_dir;
  guint64 key = gib + 1;
  gsize mask, h;
  Node *node;

  if (d != NULL)
    {
      mask = ((gsize) 1 << d->bits) - 1;
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
      __atomic_store_n (&index_dir, bigger, __ATOMIC_RELEASE);
      d = bigger;
    }
  mask = d->mask;
  for (h = dir_hash (key, d->shift); d->bucket[h].key != 0;)
    h = (h + 1) & mask;
  node = g_malloc0 (sizeof (Node));
  STORE (&d->bucket[h].node, node);
  STORE (&d->bucket[h].key, key);
  d->used++;
  return node;
}

/* Appends to @out the entries of the segments overlapping page @pn. */
static void
page_get (guint64 pn, GPtrArray *out)
{
  Node *node = dir_node (pn >> NODE_SHIFT, FALSE);
  guintptr v;

  g_ptr_array_set_size (out, 0);
  if (node == NULL || (v = node->slot[pn & (NODE_PAGES - 1)]) == 0)
    return;
  if (v & SLOT_LIST)
    {
      const List *l = (const List *) (v & ~SLOT_LIST);

      for (guint i = 0; i < l->n; i++)
        g_ptr_array_add (out, l->item[i].entry);
    }
  else
    g_ptr_array_add (out, (gpointer) v);
}

static List *
list_new (guint n)
{
  guint c = 1;
  List *l;

  while ((1u << c) < n)
    c++;
  if (free_lists[c] != NULL && free_lists[c]->len > 0)
    l = g_ptr_array_steal_index_fast (free_lists[c], free_lists[c]->len - 1);
  else
    {
      l = g_malloc0 (sizeof (List) + ((gsize) 1 << c) * sizeof (Item));
      l->cap = 1u << c;
    }
  return l;
}

static void
list_free (List *l)
{
  guint c = (guint) g_bit_nth_lsf (l->cap, -1);

  if (free_lists[c] == NULL)
    free_lists[c] = g_ptr_array_new ();
  g_ptr_array_add (free_lists[c], l);
}

/* Page @pn's slot made to say that the segments of @set overlap it (inside a write). */
static void
page_put (guint64 pn, GPtrArray *set)
{
  Node *node = dir_node (pn >> NODE_SHIFT, set->len > 0);
  guint64 first = pn << PAGE_SHIFT, last = first + ((1u << PAGE_SHIFT) - 1);
  guintptr *slot, old, v;

  if (node == NULL)
    return;
  slot = &node->slot[pn & (NODE_PAGES - 1)];
  old = *slot;
  if (set->len == 0)
    v = 0;
  else if (set->len == 1 && ((MemresIndexEntry *) set->pdata[0])->base <= first
           && ((MemresIndexEntry *) set->pdata[0])->end - 1 >= last)
    v = (guintptr) set->pdata[0];
  else
    {
      List *l = list_new (set->len);
      gint top = 0;

      /* in address order, longest first, then in the order they came (a stable sort: a new
       * segment is last in @set), each with its parent (laminar ranges: a stack) */
      _memres_index_sort (set);
      g_array_set_size (stack, set->len);
      for (guint i = 0; i < set->len; i++)
        {
          MemresIndexEntry *e = set->pdata[i];

          while (top > 0
                 && ((MemresIndexEntry *) set->pdata[g_array_index (stack, gint, top - 1)])->end
                        < e->end)
            top--;
          STORE (&l->item[i].base, e->base);
          STORE (&l->item[i].end, e->end);
          STORE (&l->item[i].entry, e);
          STORE (&l->item[i].parent, top > 0 ? g_array_index (stack, gint, top - 1) : -1);
          g_array_index (stack, gint, top++) = (gint) i;
        }
      STORE (&l->n, set->len);
      v = (guintptr) l | SLOT_LIST;
    }
  STORE (slot, v);
  if (old & SLOT_LIST)
    list_free ((List *) (old & ~SLOT_LIST));
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

/* @e added to the slots of its pages where it is not (or, when @add is FALSE, removed from
 * them), inside a write. A list keeps its segments in the order they were mapped: of two with
 * the same range (a cache's chunk that is the whole of its upstream's segment), the later is the
 * upper layer's, the innermost. */
static void
pages_update (MemresIndexEntry *e, gboolean add)
{
  for (guint64 pn = first_page (e), last = last_page (e);; pn++)
    {
      gboolean had;

      page_get (pn, scratch);
      had = g_ptr_array_remove (scratch, e);
      if (add)
        {
          if (had) /* in place: a grown segment keeps its rank */
            page_get (pn, scratch);
          else
            g_ptr_array_add (scratch, e);
        }
      page_put (pn, scratch);
      if (pn == last)
        break;
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

gboolean
_memres_index_overlaps (MemresResource *mr, guint64 base, guint64 end)
{
  ensure_setup ();
  for (guint64 pn = base >> PAGE_SHIFT, last = (end - 1) >> PAGE_SHIFT;; pn++)
    {
      page_get (pn, scratch);
      for (guint i = 0; i < scratch->len; i++)
        {
          const MemresIndexEntry *e = scratch->pdata[i];

          if (e->mr == mr && e->base < end && e->end > base)
            return TRUE;
        }
      if (pn == last)
        return FALSE;
    }
}

MemresIndexEntry *
_memres_index_insert (const MemresIndexEntry *src)
{
  MemresIndexEntry *e;

  ensure_setup ();
  if (free_entries->len > 0)
    e = g_ptr_array_steal_index_fast (free_entries, free_entries->len - 1);
  else if (posix_memalign ((void **) &e, 64, sizeof (MemresIndexEntry)) != 0)
    g_error ("memres: out of memory for the segment index");
  write_begin ();
  /* a reused entry: a stale reader may be looking at it */
  STORE (&e->base, src->base);
  STORE (&e->end, src->end);
  STORE (&e->mr, src->mr);
  STORE (&e->device, src->device);
  STORE (&e->handle_types, src->handle_types);
  STORE (&e->tag_id, src->tag_id);
  STORE (&e->tag, src->tag);
  e->unmapping = FALSE;
  e->live_at = live->len;
  g_ptr_array_add (live, e);
  pages_update (e, TRUE);
  write_end ();
  return e;
}

void
_memres_index_grow (MemresIndexEntry *e, guint64 end)
{
  write_begin ();
  STORE (&e->end, end);
  pages_update (e, TRUE); /* its old pages (their lists hold its end) and its new ones */
  write_end ();
}

/* inside a write */
static void
remove_entry (MemresIndexEntry *e)
{
  MemresIndexEntry *moved = g_ptr_array_steal_index_fast (live, e->live_at);

  g_assert (moved == e);
  if (e->live_at < live->len)
    ((MemresIndexEntry *) live->pdata[e->live_at])->live_at = e->live_at;
  pages_update (e, FALSE);
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

/* The node of the GiB whose key (its number + 1) is @key in @d, or NULL. */
static inline const Node *
index_node (const Dir *d, guint64 key)
{
  gsize mask = LOAD (&d->mask), h = dir_hash (key, LOAD (&d->shift));

  for (gsize probes = 0; probes <= mask; probes++, h = (h + 1) & mask)
    {
      guint64 k = LOAD (&d->bucket[h].key);

      if (k == key)
        return LOAD (&d->bucket[h].node);
      if (k == 0)
        break;
    }
  return NULL;
}

/* The entry of the innermost segment holding @addr in @node (its GiB's), or NULL; read without
 * a lock, so only as good as the sequence check after it. */
static inline const MemresIndexEntry *
index_search (const Node *node, guint64 addr)
{
  guintptr v;

  v = LOAD (&node->slot[(addr >> PAGE_SHIFT) & (NODE_PAGES - 1)]);
  if (G_LIKELY (!(v & SLOT_LIST)))
    {
      const MemresIndexEntry *e = (const MemresIndexEntry *) v;

      guint64 base;

      if (e == NULL)
        return NULL;
      base = LOAD (&e->base);
      return addr - base < LOAD (&e->end) - base ? e : NULL;
    }
  else
    {
      /* sorted by base: the last item whose base is at or before @addr, then its parents
       * (laminar ranges) until one holds it */
      const List *l = (const List *) (v & ~SLOT_LIST);
      const Item *it = l->item;
      guint len = MIN (LOAD (&l->n), LOAD (&l->cap));
      gint i;

      if (len == 0)
        return NULL;
      while (len > 1)
        {
          guint half = len / 2;

          it = LOAD (&it[half].base) <= addr ? it + half : it;
          len -= half;
        }
      for (i = LOAD (&it->base) <= addr ? (gint) (it - l->item) : -1; i >= 0;)
        {
          gint parent;

          if (addr < LOAD (&l->item[i].end))
            return LOAD (&l->item[i].entry);
          parent = LOAD (&l->item[i].parent);
          if (parent >= i) /* only a torn read; the sequence check retries */
            return NULL;
          i = parent;
        }
      return NULL;
    }
}

/* The last answers of a thread: a direct-mapped table keyed by the address's MiB (its low bits,
 * with the higher ones folded in: segments 1 or 2 MiB apart, as a pool's blocks or 2 MiB-aligned
 * reservations lie, take distinct slots up to 128 or 64 of them), each answer valid while
 * index_seq is the even value it was read at (every change of the index changes it: an answer
 * from before any change, an unmap included, is never used). A slot holds the answer as the
 * caller receives it (its offset 0), so that a hit is one copy. 64 bytes a slot, 8 KiB a
 * thread, allocated at its first lookup, freed at its exit. */
#define LOOKUP_SLOTS_LOG2 7

typedef struct
{
  guint64 gen; /* the index_seq it was read at; 0 (never a published index's) when empty */
  MemresLookupInfo info;
} __attribute__ ((aligned (64))) LookupHit;

G_STATIC_ASSERT (sizeof (LookupHit) == 64);

/* The nodes a thread found, by their GiB (direct-mapped): a node, once in the hash table, stays
 * there for good (nothing is removed from it, and a bigger table holds the same nodes), so a
 * thread keeps them with no check and a search skips the table. */
#define LOOKUP_NODES 16

typedef struct
{
  guint64 key; /* the GiB + 1; 0 when empty */
  const Node *node;
} NodeHint;

typedef struct
{
  LookupHit slot[1 << LOOKUP_SLOTS_LOG2];
  NodeHint nodes[LOOKUP_NODES];
} LookupCache;

/* initial-exec as buffer.c's cache: one pointer, no __tls_get_addr on the hit */
static __thread LookupCache *thread_lookup __attribute__ ((tls_model ("initial-exec")));

static void
lookup_cache_free (gpointer data)
{
  if (thread_lookup == data)
    thread_lookup = NULL;
  free (data);
}

static GPrivate lookup_cache_cleanup = G_PRIVATE_INIT (lookup_cache_free);

static inline LookupHit *
lookup_slot (LookupCache *c, guint64 addr)
{
  guint64 mib = addr >> 20;

  return &c->slot[(mib ^ (mib >> LOOKUP_SLOTS_LOG2) ^ (mib >> (2 * LOOKUP_SLOTS_LOG2)))
                  & ((1 << LOOKUP_SLOTS_LOG2) - 1)];
}

/* The thread's table, made at its first lookup (aborts when memory is out, as g_malloc());
 * returns @addr's slot. */
G_GNUC_NO_INLINE static LookupHit *
lookup_cache_new (guint64 addr)
{
  /* 64-byte slots on lines of their own; freed by this thread's exit */
  LookupCache *c = aligned_alloc (64, sizeof (LookupCache));

  if (c == NULL)
    g_error ("memres_lookup: out of memory for the thread's table of answers (%zu bytes)",
             sizeof (LookupCache));
  memset (c, 0, sizeof (LookupCache));
  thread_lookup = c;
  g_private_set (&lookup_cache_cleanup, thread_lookup);
  return lookup_slot (c, addr);
}

/* The search of the index under its sequence lock; the answer kept in @h, the thread's slot
 * for @addr (NULL when the thread has no table yet). */
G_GNUC_NO_INLINE static gboolean
lookup_slow (guint64 addr, MemresLookupInfo *info, LookupHit *h)
{
  guint64 key = (addr >> (PAGE_SHIFT + NODE_SHIFT)) + 1;
  NodeHint *hint;

  g_return_val_if_fail (info != NULL, FALSE);
  if (G_UNLIKELY (h == NULL))
    h = lookup_cache_new (addr);
  hint = &thread_lookup->nodes[key & (LOOKUP_NODES - 1)];
  for (;;)
    {
      guint64 seq = __atomic_load_n (&index_seq, __ATOMIC_ACQUIRE);
      const Node *node;
      const MemresIndexEntry *e;

      if (G_UNLIKELY (seq & 1))
        {
          g_thread_yield ();
          continue;
        }
      if (G_LIKELY (hint->key == key))
        node = hint->node;
      else
        {
          const Dir *d = __atomic_load_n (&index_dir, __ATOMIC_ACQUIRE);

          node = d != NULL ? index_node (d, key) : NULL;
        }
      e = node != NULL ? index_search (node, addr) : NULL;
      if (e != NULL)
        {
          /* read into the slot, its answer kept only once the read is known whole */
          guint64 base = LOAD (&e->base);

          h->gen = 0;
          h->info.resource = LOAD (&e->mr);
          h->info.segment.base = base;
          h->info.segment.length = LOAD (&e->end) - base;
          h->info.segment.device = LOAD (&e->device);
          h->info.segment.handle_types = LOAD (&e->handle_types);
          h->info.segment.tag_id = LOAD (&e->tag_id);
          h->info.segment.tag = LOAD (&e->tag);
          h->info.offset = 0;
        }
      __atomic_thread_fence (__ATOMIC_ACQUIRE);
      if (__atomic_load_n (&index_seq, __ATOMIC_RELAXED) != seq)
        continue;
      if (node != NULL && hint->key != key)
        *hint = (NodeHint){ key, node };
      if (e == NULL)
        return FALSE;
      h->gen = seq;
      memcpy (info, &h->info, G_STRUCT_OFFSET (MemresLookupInfo, offset));
      info->offset = addr - h->info.segment.base;
      return TRUE;
    }
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
 * updated at every allocation would cost every allocation. Where segments nest (a `cache` over
 * `vmm`), it answers the innermost: the upper layer's. A segment is found from just before its
 * %MEMRES_SEGMENT_MAPPED event until its %MEMRES_SEGMENT_UNMAPPING event's callbacks have
 * returned; one byte past its end is not in it.
 *
 * @info->resource is borrowed (transfer none): it is valid while the memory at @ptr is
 * allocated, which the caller knows (it holds a buffer inside the segment, say); take
 * memres_resource_ref() to keep it beyond that.
 *
 * Cost: a few nanoseconds, no lock taken and no shared cache line written. Each thread keeps the
 * answers it found lately (a small table of its own, keyed by the address's MiB), each valid
 * only while the index is unchanged since it was found: a repeated lookup in a segment is a
 * load of the index's generation, two compares and a copy. Otherwise a search of the index read
 * under a sequence lock: a hash of the address's GiB, the slot of its 2 MiB page, the segment
 * (or the few whose edges lie in that page), whatever the number of segments
 * (docs/segments.md, bench/bench-lookup.c). No driver call. Thread-safe: any thread, at any
 * time, concurrently with anything; an answer is never older than the index at the call (a
 * segment unmapped before the call is not found).
 *
 * Returns: %TRUE and @info filled when @ptr lies in a segment; %FALSE (no error: not finding is
 *   no failure) when it does not, %NULL included.
 *
 * Since: 2.0
 */
gboolean
memres_lookup (gconstpointer ptr, MemresLookupInfo *info)
{
  guint64 addr = (guint64) (guintptr) ptr;
  LookupCache *c = thread_lookup;
  LookupHit *h = NULL;

  /* the hit: this thread found @addr's segment lately and the index has not changed since */
  if (G_LIKELY (c != NULL))
    {
      guint64 offset;

      h = lookup_slot (c, addr);
      offset = addr - h->info.segment.base;
      if (h->gen == __atomic_load_n (&index_seq, __ATOMIC_ACQUIRE)
          && offset < h->info.segment.length && G_LIKELY (info != NULL))
        {
          memcpy (info, &h->info, G_STRUCT_OFFSET (MemresLookupInfo, offset));
          info->offset = offset;
          return TRUE;
        }
    }
  return lookup_slow (addr, info, h);
}

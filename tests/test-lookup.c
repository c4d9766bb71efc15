/* test-lookup.c: memres_lookup() (core/segment-lookup.c) answers as the index is at the call:
 * never a segment after it was unmapped (in the same thread, and in reader threads racing a
 * mapping and unmapping thread), the innermost where segments nest, and right with more
 * segments than fit in any cache. Host memory through `cache` (suite core): no driver. And the
 * shapes of the index's pages, through "segkind", a kind registered here that raises segments
 * over ranges it never maps (lookups read no memory): pages covered by one segment, split by one
 * edge, cut into runs by many edges, nested, equal and partly overlapping ranges (a block of an
 * upper layer across the edge of two of the lower's), addresses above 2^48 (the hash
 * table, not the flat table); each probe checked against a model of the live ranges, after every
 * change. Every lookup outside the races is made twice, by memres_lookup() and by
 * memres_lookup_inline() (memres-lookup-inline.h), whose answers must be the same; the race
 * readers take either at random. Built a second time as test-lookup-other-layout, with
 * tests/lookup-other-layout.c's memres_lookup_index (a layout this header does not know, and no
 * index behind it) in place of libmemres's: every inline call must then be memres_lookup()'s,
 * with the same answers. */
#include "testutil.h"

#include "plugins/common.h"

#include <memres/memres-lookup-inline.h>
#include <string.h>

static gconstpointer
addr (guint64 a)
{
  return (gconstpointer) (guintptr) a;
}

/* memres_lookup() of @ptr, and memres_lookup_inline()'s answer checked against it: the same
 * result, the same 56 bytes when found, its @info untouched when not. */
static gboolean
lookup_both (gconstpointer ptr, MemresLookupInfo *info)
{
  MemresLookupInfo in;
  gboolean found = memres_lookup (ptr, info), found_inline;

  memset (&in, 0x5a, sizeof in);
  found_inline = memres_lookup_inline (ptr, &in);
  g_assert_cmpint (found_inline, ==, found);
  if (found)
    {
      g_assert_true (in.resource == info->resource);
      g_assert_cmphex (in.segment.base, ==, info->segment.base);
      g_assert_cmpuint (in.segment.length, ==, info->segment.length);
      g_assert_cmpint (in.segment.device, ==, info->segment.device);
      g_assert_cmpuint (in.segment.handle_types, ==, info->segment.handle_types);
      g_assert_cmpuint (in.segment.tag_id, ==, info->segment.tag_id);
      g_assert_true (in.segment.tag == info->segment.tag);
      g_assert_cmpuint (in.offset, ==, info->offset);
    }
  else
    g_assert_cmpuint (in.offset, ==, G_GUINT64_CONSTANT (0x5a5a5a5a5a5a5a5a));
  return found;
}

/* A race reader's lookup: memres_lookup() or memres_lookup_inline(), by @x's bit 0. */
static gboolean
lookup_either (guint64 x, gconstpointer ptr, MemresLookupInfo *info)
{
  return (x & 1) ? memres_lookup_inline (ptr, info) : memres_lookup (ptr, info);
}

static void
assert_found (guint64 a, MemresResource *mr, guint64 base, guint64 length)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  g_assert_true (lookup_both (addr (a), &info));
  g_assert_true (info.resource == mr);
  g_assert_cmphex (info.segment.base, ==, base);
  g_assert_cmpuint (info.segment.length, ==, length);
  g_assert_cmpint (info.segment.device, ==, -1);
  g_assert_cmpuint (info.segment.handle_types, ==, 0);
  g_assert_cmpuint (info.segment.tag_id, ==, 0);
  g_assert_null (info.segment.tag);
  g_assert_cmpuint (info.offset, ==, a - base);
}

static void
assert_missing (guint64 a)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  g_assert_false (lookup_both (addr (a), &info));
  g_assert_cmpuint (info.offset, ==, G_GUINT64_CONSTANT (0xa5a5a5a5a5a5a5a5));
}

/* A buffer above max_block is a segment of its own, unmapped at its close. */
static void
test_stale_after_unmap (void)
{
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresBuffer *buf = mt_alloc_ok (mr, 64 * 1024, NULL);
  guint64 a = memres_buffer_get_address (buf);

  for (guint i = 0; i < 3; i++) /* the first fills the thread's answer, the others hit it */
    {
      assert_found (a, mr, a, 64 * 1024);
      assert_found (a + 64 * 1024 - 1, mr, a, 64 * 1024);
    }
  mt_close_ok (buf, NULL);
  assert_missing (a);
  assert_missing (a + 100);

  /* mapped again (at whatever address): found, its old answer not used */
  buf = mt_alloc_ok (mr, 32 * 1024, NULL);
  a = memres_buffer_get_address (buf);
  assert_found (a + 5, mr, a, 32 * 1024);
  assert_missing (a + 32 * 1024);
  mt_close_ok (buf, NULL);
  assert_missing (a + 5);
  memres_resource_unref (mr);
}

/* A thread's answer for a lower chunk, then an upper chunk mapped inside it: the innermost. */
static void
test_nested_after_hit (void)
{
  MemresResource *top = mt_new_ok ("cache:chunk=64KiB>cache:chunk=1MiB,max_block=1MiB>host");
  MemresResource *lower = memres_resource_get_upstream (top);
  /* a block of the class the upper cache takes its chunks in: maps the lower chunk */
  MemresBuffer *held = mt_alloc_ok (lower, 64 * 1024, NULL);
  MemresLookupInfo info;
  MemresBuffer *a;
  guint64 l, ua;

  g_assert_true (lookup_both (memres_buffer_get_pointer (held), &info));
  g_assert_true (info.resource == lower);
  l = info.segment.base;
  g_assert_cmpuint (info.segment.length, ==, 1024 * 1024);
  for (guint round = 0; round < 2; round++)
    for (guint64 x = l; x < l + 1024 * 1024; x += 4096)
      assert_found (x, lower, l, 1024 * 1024);

  a = mt_alloc_ok (top, 256, NULL); /* the upper chunk, carved from the lower one */
  ua = memres_buffer_get_address (a);
  g_assert_cmphex (ua, >=, l);
  g_assert_cmphex (ua + 64 * 1024, <=, l + 1024 * 1024);
  g_assert_true (lookup_both (addr (ua), &info));
  assert_found (ua, top, info.segment.base, 64 * 1024);
  g_assert_cmphex (info.segment.base, <=, ua);
  for (guint64 x = info.segment.base; x < info.segment.base + 64 * 1024; x += 4096)
    assert_found (x, top, info.segment.base, 64 * 1024);

  mt_close_ok (a, NULL);
  mt_close_ok (held, NULL);
  memres_resource_unref (top);
}

/* More segments than the thread keeps answers for: every answer right, twice over. */
static void
test_many_segments (void)
{
  enum
  {
    N = 600
  };
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresBuffer *bufs[N];

  for (guint i = 0; i < N; i++)
    bufs[i] = mt_alloc_ok (mr, 8192 + 4096 * (i % 5), NULL);
  for (guint round = 0; round < 3; round++)
    for (guint k = 0; k < N; k++)
      {
        guint i = (k * 7919u) % N;
        guint64 a = memres_buffer_get_address (bufs[i]);
        gsize size = memres_buffer_get_size (bufs[i]);

        assert_found (a + (k * 131u) % size, mr, a, size);
      }
  for (guint i = 0; i < N; i += 2) /* every other one unmapped: each answer right again */
    mt_close_ok (bufs[i], NULL);
  for (guint k = 0; k < N; k++)
    {
      guint i = (k * 7919u) % N;

      if (i % 2 == 1)
        assert_found (memres_buffer_get_address (bufs[i]) + 1, mr,
                      memres_buffer_get_address (bufs[i]), memres_buffer_get_size (bufs[i]));
    }
  for (guint i = 1; i < N; i += 2)
    mt_close_ok (bufs[i], NULL);
  memres_resource_unref (mr);
}

/* Threads: one maps and unmaps a segment over and over; readers look its address up in each
 * phase and check the answer when the phase was the same before and after the lookup. A round
 * is four phases: 4r + 1 mapped, 4r + 2 closing, 4r + 3 unmapped, 4r + 4 mapping again (the
 * writer sets closing and mapping before it calls, so a lookup that saw "mapped" or "unmapped"
 * on both sides ran entirely inside that state). While unmapped none may find it: a reader's
 * answer kept from the mapped phase would. The writer waits in the mapped and unmapped phases
 * until every reader checked a lookup inside them. */
#define N_READERS 3
#define ROUNDS    100

typedef struct
{
  MemresResource *mr;
  gint phase;   /* atomic */
  guint64 base; /* atomic: the segment's base, set before each mapped phase */
  guint64 length;
  gint seen[N_READERS]; /* atomic: the last phase each reader checked inside */
  gint bad;             /* atomic */
  gint found;           /* atomic: readers that found it in each mapped phase */
} Race;

typedef struct
{
  Race *race;
  guint id;
} Reader;

static gpointer
reader_thread (gpointer data)
{
  Reader *rd = data;
  Race *r = rd->race;

  for (;;)
    {
      gint p1 = g_atomic_int_get (&r->phase);
      guint64 base = __atomic_load_n (&r->base, __ATOMIC_ACQUIRE);
      MemresLookupInfo info;
      gboolean hit;

      if (p1 > 4 * ROUNDS)
        return NULL;
      if (p1 % 4 != 1 && p1 % 4 != 3)
        {
          g_thread_yield ();
          continue;
        }
      hit = lookup_either ((guint64) p1 >> 2, addr (base + 8), &info);
      if (g_atomic_int_get (&r->phase) != p1)
        continue; /* the phase changed under the lookup: nothing to check */
      if (p1 % 4 == 1)
        {
          if (!(hit && info.resource == r->mr && info.segment.base == base
                && info.segment.length == r->length && info.offset == 8))
            g_atomic_int_inc (&r->bad);
          else if (g_atomic_int_get (&r->seen[rd->id]) < p1)
            g_atomic_int_inc (&r->found); /* once per reader and phase: a slow phase spins long */
        }
      else if (hit)
        g_atomic_int_inc (&r->bad); /* a stale answer: unmapped before the lookup began */
      g_atomic_int_set (&r->seen[rd->id], p1);
    }
}

static void
wait_readers (Race *r, gint phase)
{
  for (guint i = 0; i < N_READERS; i++)
    while (g_atomic_int_get (&r->seen[i]) < phase)
      g_thread_yield ();
}

static void
test_threads (void)
{
  Race r = { 0 };
  Reader readers[N_READERS];
  GThread *threads[N_READERS];

  r.mr = mt_new_ok ("cache:max_block=4KiB>host");
  r.length = 64 * 1024;
  for (guint i = 0; i < N_READERS; i++)
    {
      readers[i] = (Reader){ &r, i };
      threads[i] = g_thread_new ("reader", reader_thread, &readers[i]);
    }
  for (gint p = 1; p <= 4 * ROUNDS; p += 4)
    {
      MemresBuffer *buf = mt_alloc_ok (r.mr, r.length, NULL);

      __atomic_store_n (&r.base, memres_buffer_get_address (buf), __ATOMIC_RELEASE);
      g_atomic_int_set (&r.phase, p); /* mapped */
      wait_readers (&r, p);
      g_atomic_int_set (&r.phase, p + 1); /* closing */
      mt_close_ok (buf, NULL);
      g_atomic_int_set (&r.phase, p + 2); /* unmapped */
      wait_readers (&r, p + 2);
      g_atomic_int_set (&r.phase, p + 3); /* mapping */
    }
  g_atomic_int_set (&r.phase, 4 * ROUNDS + 1);
  for (guint i = 0; i < N_READERS; i++)
    g_thread_join (threads[i]);
  g_assert_cmpint (r.bad, ==, 0);
  g_assert_cmpint (r.found, ==, N_READERS * ROUNDS);
  memres_resource_unref (r.mr);
}

/* ---- the index's shapes, on segkind ---------------------------------------------------------- */

static const MemresKindInfo segkind_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "segkind",
  .description = "raises the segments the test tells it to (tests/test-lookup.c)",
  .ops = &tp_ops,
  .flags = MEMRES_KIND_SEGMENTS,
};

static void
segkind_register (void)
{
  static gboolean done;
  g_autoptr (GError) error = NULL;

  if (!done)
    MT_CHECK (memres_registry_register_kind (&segkind_info, &error));
  done = TRUE;
}

typedef struct
{
  MemresResource *mr;
  guint64 base;
  guint64 length;
  guint order; /* when mapped: of equal ranges, the later is the innermost */
} Seg;

static GArray *model; /* Seg, the live segments */
static guint model_order;

static void
seg_map (MemresResource *mr, guint64 base, guint64 length)
{
  MemresSegment s = { .base = base, .length = length, .device = -1 };
  Seg m = { mr, base, length, model_order++ };

  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_raise_segment_event (mr, MEMRES_SEGMENT_MAPPED, &s, &error));
  g_assert_no_error (error);
  g_array_append_val (model, m);
}

static void
seg_grow (MemresResource *mr, guint64 base, guint64 length)
{
  MemresSegment s = { .base = base, .length = length, .device = -1 };
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_raise_segment_event (mr, MEMRES_SEGMENT_GROWN, &s, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < model->len; i++)
    if (g_array_index (model, Seg, i).mr == mr && g_array_index (model, Seg, i).base == base)
      g_array_index (model, Seg, i).length = length;
}

static void
seg_unmap (MemresResource *mr, guint64 base)
{
  MemresSegment s = { .base = base };
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_raise_segment_event (mr, MEMRES_SEGMENT_UNMAPPING, &s, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < model->len; i++)
    if (g_array_index (model, Seg, i).mr == mr && g_array_index (model, Seg, i).base == base)
      {
        g_array_remove_index (model, i);
        return;
      }
  g_assert_not_reached ();
}

/* What the model answers at @a: the shortest live segment holding it, the later of equal ones. */
static const Seg *
model_at (guint64 a)
{
  const Seg *best = NULL;

  for (guint i = 0; i < model->len; i++)
    {
      const Seg *m = &g_array_index (model, Seg, i);

      if (a - m->base < m->length
          && (best == NULL || m->length < best->length
              || (m->length == best->length && m->order > best->order)))
        best = m;
    }
  return best;
}

static void
check_at (guint64 a)
{
  const Seg *want = model_at (a);

  if (want == NULL)
    assert_missing (a);
  else
    {
      MemresLookupInfo info;

      memset (&info, 0xa5, sizeof info);
      g_assert_true (lookup_both (addr (a), &info));
      g_assert_true (info.resource == want->mr);
      g_assert_cmphex (info.segment.base, ==, want->base);
      g_assert_cmpuint (info.segment.length, ==, want->length);
      g_assert_cmpint (info.segment.device, ==, -1);
      g_assert_cmpuint (info.segment.handle_types, ==, 0);
      g_assert_cmpuint (info.segment.tag_id, ==, 0);
      g_assert_null (info.segment.tag);
      g_assert_cmpuint (info.offset, ==, a - want->base);
    }
}

/* Every edge of every live segment and its neighbours, and points @step apart, in [@lo, @hi). */
static void
check_model_step (guint64 lo, guint64 hi, guint64 step)
{
  for (guint i = 0; i < model->len; i++)
    {
      const Seg *m = &g_array_index (model, Seg, i);
      guint64 probes[] = {
        m->base - 1,        m->base, m->base + 1, m->base + m->length / 3, m->base + m->length - 1,
        m->base + m->length
      };

      for (guint k = 0; k < G_N_ELEMENTS (probes); k++)
        check_at (probes[k]);
    }
  for (guint64 a = lo; a < hi; a += step)
    check_at (a);
}

static void
check_model (guint64 lo, guint64 hi)
{
  check_model_step (lo, hi, 64 * 1024 + 4097);
}

#define MIB (G_GUINT64_CONSTANT (1) << 20)

/* Pages (1 MiB, core/segment-slots.c) of every shape at @at (2 MiB-aligned): each change checked
 * against the model. */
static void
shapes_at (MemresResource *a, MemresResource *b, guint64 at)
{
  guint64 hi = at + 64 * MIB;

  /* one segment over whole pages: each page's slot is the segment */
  seg_map (a, at, 8 * MIB);
  check_model (at - MIB, hi);
  /* one edge inside a page (a split): the next segment from the middle of a page to the middle
   * of another */
  seg_map (a, at + 9 * MIB + MIB / 2, 3 * MIB);
  check_model (at - MIB, hi);
  /* two 1 MiB segments sharing a 2 MiB granule, as a pool's blocks lie: a page each */
  seg_map (a, at + 16 * MIB, MIB);
  seg_map (a, at + 17 * MIB, MIB);
  check_model (at - MIB, hi);
  /* two half-MiB segments meeting inside a page: a split with a segment on each side */
  seg_map (a, at + 18 * MIB, MIB / 2);
  seg_map (a, at + 18 * MIB + MIB / 2, MIB / 2);
  check_model (at - MIB, hi);
  /* many edges in one page (runs): small segments with holes between */
  for (guint i = 0; i < 9; i++)
    seg_map (a, at + 20 * MIB + i * 200 * 1024, 100 * 1024 + i * 4096);
  check_model (at - MIB, hi);
  /* nested: b's segments inside a's (an upper layer's chunks): inside one page, across a page
   * edge, one equal to a's whole segment (the later mapped is the innermost) */
  seg_map (b, at + 3 * MIB + 4096, 64 * 1024);
  seg_map (b, at + 4 * MIB - 8192, 16 * 1024);
  seg_map (b, at + 16 * MIB, MIB);
  check_model (at - MIB, hi);
  /* partly overlapping (no nesting): b's segments across the edge of two of a's adjacent ones,
   * as a cache's block of its own lies across two arena granules (cache>arena): a short one
   * (its bytes on both sides answer b's, the shorter), and one longer than a's (a's answer) */
  seg_map (a, at + 24 * MIB, 2 * MIB);
  seg_map (a, at + 26 * MIB, 2 * MIB);
  seg_map (b, at + 26 * MIB - 160 * 1024, 208 * 1024);
  seg_map (b, at + 27 * MIB + MIB / 2, 3 * MIB);
  check_model (at - MIB, hi);
  seg_unmap (b, at + 26 * MIB - 160 * 1024);
  check_model (at - MIB, hi);
  /* of the same length, partly overlapping: the later mapped, whichever starts first */
  seg_map (b, at + 35 * MIB + MIB / 2, 2 * MIB);
  seg_map (a, at + 36 * MIB, 2 * MIB);
  seg_map (a, at + 40 * MIB, 2 * MIB);
  seg_map (b, at + 39 * MIB + MIB / 2, 2 * MIB);
  check_model (at - MIB, hi);
  /* grown: the last small segment, then the split's segment over more pages */
  seg_grow (a, at + 20 * MIB + 8 * 200 * 1024, 300 * 1024);
  seg_grow (a, at + 9 * MIB + MIB / 2, 6 * MIB);
  check_model (at - MIB, hi);
  /* unmapped one by one in another order than mapped */
  seg_unmap (b, at + 16 * MIB);
  check_model (at - MIB, hi);
  seg_unmap (a, at);
  check_model (at - MIB, hi);
  for (guint i = 0; i < 9; i += 2)
    seg_unmap (a, at + 20 * MIB + i * 200 * 1024);
  check_model (at - MIB, hi);
  while (model->len > 0)
    {
      const Seg *m = &g_array_index (model, Seg, model->len / 2);

      seg_unmap (m->mr, m->base);
      check_model (at - MIB, hi);
    }
  check_model (at - MIB, hi);
}

static void
test_shapes (void)
{
  MemresResource *a, *b;

  segkind_register ();
  a = mt_new_ok ("segkind");
  b = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  /* ranges no memory is at: lookups read the index only */
  shapes_at (a, b, G_GUINT64_CONSTANT (0x100000000000));     /* the flat table (below 2^48) */
  shapes_at (a, b, G_GUINT64_CONSTANT (0x7fffffe00000));     /* across 2^47, still flat */
  shapes_at (a, b, G_GUINT64_CONSTANT (0xffffffe00000));     /* across 2^48: flat, then the hash */
  shapes_at (a, b, G_GUINT64_CONSTANT (0xfff0000000000000)); /* the hash table alone */
  /* the hash table's nodes of many GiBs (the table grows) and the last page of the space */
  for (guint64 i = 0; i < 40; i++)
    seg_map (a, G_GUINT64_CONSTANT (0x8000000000000000) + i * (G_GUINT64_CONSTANT (5) << 30),
             3 * MIB);
  seg_map (a, G_MAXUINT64 - 3 * MIB, 3 * MIB); /* ends at 2^64 - 1: that byte is in none */
  check_model (G_GUINT64_CONSTANT (0x8000000000000000),
               G_GUINT64_CONSTANT (0x8000000000000000) + 8 * MIB);
  check_at (G_MAXUINT64);
  check_at (G_MAXUINT64 - 1);
  while (model->len > 0)
    seg_unmap (g_array_index (model, Seg, 0).mr, g_array_index (model, Seg, 0).base);
  check_model (G_GUINT64_CONSTANT (0x8000000000000000),
               G_GUINT64_CONSTANT (0x8000000000000000) + 8 * MIB);
  check_at (G_MAXUINT64 - 2);
  g_array_unref (model);
  memres_resource_unref (b);
  memres_resource_unref (a);
}

#define GIB (G_GUINT64_CONSTANT (1) << 30)

/* Segments of many pages (256 MiB, 3 GiB, across GiB edges; their interior pages take one store
 * each, their GiB's node found once): mapped, nested into, grown, neighboured and unmapped in
 * every order, each change checked against the model at every edge and across the range. */
static void
test_large_shapes (void)
{
  guint64 at = G_GUINT64_CONSTANT (0x300000000000) + GIB - 6 * MIB; /* 6 MiB below a GiB edge */
  MemresResource *a, *b;

  segkind_register ();
  a = mt_new_ok ("segkind");
  b = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  /* 256 MiB, page-aligned, across the GiB edge; 3 GiB from the middle of a page after it */
  seg_map (a, at, 256 * MIB);
  seg_map (a, at + 256 * MIB + MIB / 2, 3 * GIB);
  check_model (at - 2 * MIB, at + 4 * GIB);
  /* nested in interior pages (b's chunks in a's segments: a page there becomes a split or
   * runs, its neighbours stay the one segment), one of them a whole page */
  seg_map (b, at + 100 * MIB + 4096, 64 * 1024);
  seg_map (b, at + 256 * MIB + MIB / 2 + GIB + 10 * MIB, 2 * MIB);
  seg_map (b, at + 256 * MIB + MIB / 2 + 2 * GIB - MIB, 3 * MIB); /* across a GiB edge */
  check_model (at - 2 * MIB, at + 4 * GIB);
  /* the 3 GiB one unmapped while b's are nested in it: their pages keep b's */
  seg_unmap (a, at + 256 * MIB + MIB / 2);
  check_model (at - 2 * MIB, at + 4 * GIB);
  /* mapped again over b's (b's mapped first: the later mapped, a's, is not the innermost where
   * both hold the address, the shorter is) and grown by a GiB and a half */
  seg_map (a, at + 256 * MIB + MIB / 2, 3 * GIB);
  seg_grow (a, at + 256 * MIB + MIB / 2, 4 * GIB + GIB / 2);
  check_model (at - 2 * MIB, at + 5 * GIB);
  /* the 256 MiB one grown up to its neighbour (they meet inside a page) */
  seg_grow (a, at, 256 * MIB + MIB / 2);
  check_model (at - 2 * MIB, at + 5 * GIB);
  /* unmapped: b's first, then a's, then everything in the order left */
  seg_unmap (b, at + 100 * MIB + 4096);
  seg_unmap (a, at);
  check_model (at - 2 * MIB, at + 5 * GIB);
  while (model->len > 0)
    {
      seg_unmap (g_array_index (model, Seg, 0).mr, g_array_index (model, Seg, 0).base);
      check_model (at - 2 * MIB, at + 5 * GIB);
    }
  g_array_unref (model);
  memres_resource_unref (b);
  memres_resource_unref (a);
}

/* Random segments of two resources over a few pages, a resource's own never overlapping and the
 * second's nested in the first's, mapped, grown and unmapped at random; every change checked
 * against the model: every shape a page can take, and every transition between them. */
static void
test_random_shapes (void)
{
  guint64 at = G_GUINT64_CONSTANT (0x200000000000);
  GRand *rand = g_rand_new_with_seed (37);
  MemresResource *mr[2];

  segkind_register ();
  mr[0] = mt_new_ok ("segkind");
  mr[1] = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  for (guint step = 0; step < 400; step++)
    {
      guint which = g_rand_int_range (rand, 0, 2);
      guint64 unit = 64 * 1024, base = at + unit * g_rand_int_range (rand, 0, 96);
      guint64 length = unit * g_rand_int_range (rand, 1, 24);
      gboolean ok = TRUE, inside = which == 0;

      if (model->len > 0 && g_rand_int_range (rand, 0, 3) == 0)
        {
          const Seg *m = &g_array_index (model, Seg, g_rand_int_range (rand, 0, model->len));

          seg_unmap (m->mr, m->base);
          check_model (at - MIB, at + 8 * MIB);
          continue;
        }
      /* a resource's own never overlap; the second's lie inside one of the first's */
      for (guint i = 0; i < model->len; i++)
        {
          const Seg *m = &g_array_index (model, Seg, i);

          if (m->mr == mr[which] && m->base < base + length && base < m->base + m->length)
            ok = FALSE;
          if (which == 1 && m->mr == mr[0] && m->base <= base
              && base + length <= m->base + m->length)
            inside = TRUE;
          if (which == 0 && m->mr == mr[1] && m->base < base + length && base < m->base + m->length)
            ok = FALSE; /* the upper layer's are mapped after the segment they lie in */
        }
      if (!ok || !inside)
        continue;
      seg_map (mr[which], base, length);
      check_model (at - MIB, at + 8 * MIB);
    }
  while (model->len > 0)
    seg_unmap (g_array_index (model, Seg, 0).mr, g_array_index (model, Seg, 0).base);
  check_model (at - MIB, at + 8 * MIB);
  g_array_unref (model);
  g_rand_free (rand);
  memres_resource_unref (mr[1]);
  memres_resource_unref (mr[0]);
}

/* One page's every shape of up to three runs, which its slot holds in its own line (a segment at
 * the page's edge, neighbours meeting or apart in it, nesting resolved to one run or to three),
 * and four or more (a record); each change checked against the model, before and after. */
static void
test_page_edges (void)
{
  guint64 p = G_GUINT64_CONSTANT (0x280000000000) + 5 * MIB; /* a page's first byte */
  MemresResource *a, *b;

  segkind_register ();
  a = mt_new_ok ("segkind");
  b = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  /* the whole page: its slot is the segment; the next page from its edge, half of it */
  seg_map (a, p, MIB);
  seg_map (a, p + MIB, MIB / 2);
  check_model (p - MIB, p + 3 * MIB);
  g_assert_cmpuint (model_at (p + MIB - 1)->base, ==, p);
  g_assert_cmpuint (model_at (p + MIB)->base, ==, p + MIB);
  g_assert_null (model_at (p + MIB + MIB / 2));
  /* a neighbour up to the page's last byte, leaving a hole (three runs: a, none, a) */
  seg_map (a, p + MIB + 3 * MIB / 4, MIB / 4);
  check_model (p - MIB, p + 3 * MIB);
  g_assert_null (model_at (p + MIB + 3 * MIB / 4 - 1));
  /* the hole filled: three runs meeting, then a fourth cut (a record) */
  seg_map (a, p + MIB + MIB / 2, MIB / 8);
  check_model (p - MIB, p + 3 * MIB);
  seg_map (a, p + MIB + MIB / 2 + MIB / 8, MIB / 8);
  check_model (p - MIB, p + 3 * MIB);
  /* nested: b's equal to a's whole page (the later mapped, one run of two segments), then b's
   * inside a's half page (a, b, a) */
  seg_map (b, p, MIB);
  check_model (p - MIB, p + 3 * MIB);
  g_assert_true (model_at (p + 100)->mr == b);
  seg_map (b, p + MIB + 4096, 8192);
  check_model (p - MIB, p + 3 * MIB);
  /* out again in another order, each page back to fewer runs */
  seg_unmap (a, p + MIB + MIB / 2);
  check_model (p - MIB, p + 3 * MIB);
  seg_unmap (a, p);
  check_model (p - MIB, p + 3 * MIB);
  g_assert_true (model_at (p + 100)->mr == b);
  seg_unmap (a, p + MIB);
  check_model (p - MIB, p + 3 * MIB);
  while (model->len > 0)
    {
      seg_unmap (g_array_index (model, Seg, 0).mr, g_array_index (model, Seg, 0).base);
      check_model (p - MIB, p + 3 * MIB);
    }
  g_array_unref (model);
  memres_resource_unref (b);
  memres_resource_unref (a);
}

/* Coarse segments (64 MiB or more, kept in the slots of their 64 MiB regions, segment-slots.c):
 * one region exactly, spans across region and GiB edges from inside a page, partial regions at
 * both ends, two meeting inside a region, fine segments inside them (a whole page, part of one,
 * across a page edge and a region edge) and beside them in one page, coarse inside coarse and an
 * equal range mapped later, a whole GiB; one freed and smaller ones (coarse and fine) mapped
 * inside its range; a fine one grown past 64 MiB (it moves to its regions) and a coarse one
 * grown across a GiB edge; one above 2^48; each change checked against the model. */
static void
test_coarse_shapes (void)
{
  guint64 at = G_GUINT64_CONSTANT (0x400000000000); /* a GiB's first byte */
  guint64 hi = at + 4 * GIB, step = MIB + 4097 * 3;
  MemresResource *a, *b, *c, *d;

  segkind_register ();
  a = mt_new_ok ("segkind");
  b = mt_new_ok ("segkind");
  c = mt_new_ok ("segkind");
  d = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  /* one region exactly */
  seg_map (a, at, 64 * MIB);
  check_model_step (at - MIB, hi, step);
  /* from the middle of a page: a partial region, two whole ones, a partial one */
  seg_map (a, at + 64 * MIB + MIB / 2, 200 * MIB);
  /* a coarse neighbour meeting it inside a region and a page */
  seg_map (a, at + 264 * MIB + MIB / 2, 100 * MIB);
  check_model_step (at - MIB, hi, step);
  /* fine ones inside: a whole page, part of a page, across a page edge, across a region edge */
  seg_map (b, at + 70 * MIB, MIB);
  seg_map (b, at + 80 * MIB + 4096, 64 * 1024);
  seg_map (b, at + 90 * MIB - 8192, 16 * 1024);
  seg_map (b, at + 128 * MIB - MIB / 2, MIB);
  /* a fine one beside a coarse one's end, meeting it inside a page */
  seg_map (a, at + 364 * MIB + MIB / 2, 3 * MIB);
  check_model_step (at - MIB, hi, step);
  /* coarse inside coarse; then an equal range to a's mapped later (segments of two resources
   * nest, they never cross) */
  seg_map (c, at + 140 * MIB, 120 * MIB);
  seg_map (d, at + 64 * MIB + MIB / 2, 200 * MIB);
  check_model_step (at - MIB, hi, step);
  g_assert_true (model_at (at + 65 * MIB)->mr == d);
  g_assert_true (model_at (at + 70 * MIB)->mr == b);
  g_assert_true (model_at (at + 141 * MIB)->mr == c);
  /* freed (both of that range), then smaller ones mapped inside the range it left */
  seg_unmap (d, at + 64 * MIB + MIB / 2);
  seg_unmap (a, at + 64 * MIB + MIB / 2);
  check_model_step (at - MIB, hi, step);
  g_assert_true (model_at (at + 65 * MIB) == NULL);
  seg_map (a, at + 66 * MIB, 2 * MIB);
  seg_map (a, at + 68 * MIB + 4096, 64 * MIB + 8192);
  check_model_step (at - MIB, hi, step);
  /* a fine one grown past 64 MiB with a fine one nested in it, a coarse one grown past a GiB
   * edge */
  seg_map (a, at + 400 * MIB, 32 * MIB);
  seg_map (b, at + 410 * MIB + MIB / 4, MIB);
  check_model_step (at - MIB, hi, step);
  seg_grow (a, at + 400 * MIB, 100 * MIB + 4096);
  check_model_step (at - MIB, hi, step);
  seg_grow (c, at + 140 * MIB, GIB + 3 * MIB / 2);
  check_model_step (at - MIB, hi, step);
  /* a whole GiB: every region of its node is the one segment */
  seg_map (d, at + 2 * GIB, GIB);
  check_model_step (at - MIB, hi, step);
  while (model->len > 0)
    {
      const Seg *m = &g_array_index (model, Seg, model->len / 2);

      seg_unmap (m->mr, m->base);
      check_model_step (at - MIB, hi, step);
    }
  /* above 2^48 (the hash table's nodes): a coarse one across a GiB edge, a fine one inside it */
  at = G_GUINT64_CONSTANT (0xfff0000000000000) + GIB - 100 * MIB - MIB / 2;
  seg_map (a, at, 300 * MIB);
  seg_map (b, at + 100 * MIB + MIB / 4, MIB);
  check_model_step (at - MIB, at + 320 * MIB, step);
  seg_unmap (a, at);
  check_model_step (at - MIB, at + 320 * MIB, step);
  seg_unmap (b, at + 100 * MIB + MIB / 4);
  check_model_step (at - MIB, at + 320 * MIB, step);
  g_array_unref (model);
  memres_resource_unref (d);
  memres_resource_unref (c);
  memres_resource_unref (b);
  memres_resource_unref (a);
}

/* test_random_shapes() at the scale of regions: segments from 768 KiB to 120 MiB over 600 MiB
 * across a GiB edge (fine and coarse, page and region edges anywhere), the second resource's
 * nested in the first's, mapped, grown and unmapped at random. */
static void
test_random_coarse (void)
{
  guint64 at = G_GUINT64_CONSTANT (0x500000000000) - 256 * MIB;
  guint64 unit = 768 * 1024, lo = at - MIB, hi = at + 800 * MIB;
  GRand *rand = g_rand_new_with_seed (3737);
  MemresResource *mr[2];

  segkind_register ();
  mr[0] = mt_new_ok ("segkind");
  mr[1] = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  for (guint step = 0; step < 160; step++)
    {
      guint which = g_rand_int_range (rand, 0, 2);
      guint64 base = at + unit * g_rand_int_range (rand, 0, 800);
      guint64 length = unit * g_rand_int_range (rand, 1, 160);
      gboolean ok = TRUE, inside = which == 0;
      gint op = g_rand_int_range (rand, 0, 4);

      if (model->len > 0 && op == 0)
        {
          const Seg *m = &g_array_index (model, Seg, g_rand_int_range (rand, 0, model->len));

          seg_unmap (m->mr, m->base);
          check_model_step (lo, hi, 3 * MIB + 4097);
          continue;
        }
      if (model->len > 0 && op == 1)
        {
          /* the first's last segment grown by up to 80 MiB, where nothing of its own lies */
          const Seg *m = &g_array_index (model, Seg, model->len - 1);
          guint64 more = unit * g_rand_int_range (rand, 1, 100), end = m->base + m->length + more;

          for (guint i = 0; i < model->len; i++)
            {
              const Seg *o = &g_array_index (model, Seg, i);

              if (o->base < end && m->base + m->length < o->base + o->length)
                ok = FALSE; /* none of either resource in the way */
            }
          if (ok && m->mr == mr[0])
            {
              seg_grow (m->mr, m->base, m->length + more);
              check_model_step (lo, hi, 3 * MIB + 4097);
            }
          continue;
        }
      for (guint i = 0; i < model->len; i++)
        {
          const Seg *m = &g_array_index (model, Seg, i);

          if (m->mr == mr[which] && m->base < base + length && base < m->base + m->length)
            ok = FALSE;
          if (which == 1 && m->mr == mr[0] && m->base <= base
              && base + length <= m->base + m->length)
            inside = TRUE;
          if (which == 0 && m->mr == mr[1] && m->base < base + length && base < m->base + m->length)
            ok = FALSE;
        }
      if (!ok || !inside)
        continue;
      seg_map (mr[which], base, length);
      check_model_step (lo, hi, 3 * MIB + 4097);
    }
  while (model->len > 0)
    seg_unmap (g_array_index (model, Seg, 0).mr, g_array_index (model, Seg, 0).base);
  check_model_step (lo, hi, 3 * MIB + 4097);
  g_array_unref (model);
  g_rand_free (rand);
  memres_resource_unref (mr[1]);
  memres_resource_unref (mr[0]);
}

/* Readers look up fixed segments whose pages a writer keeps rewriting: it maps and unmaps
 * neighbours in the same pages (each change remakes the page's split or runs, and the records
 * of the old ones are reused at once) and segments nested in the fixed ones. A fixed segment is
 * always found, as itself or as a nested one that holds the address while it is mapped; never
 * anything else, never "not found". */
#define SHARED_FIXED 16

typedef struct
{
  MemresResource *fixed_mr, *moving_mr;
  guint64 at;
  gint stop;     /* atomic */
  gint bad;      /* atomic */
  guint64 found; /* 64 bits: a slow run (valgrind) spins long */
  gint laps;     /* atomic: 1,024 lookups each */
} Shared;

static guint64
fixed_base (const Shared *sh, guint i)
{
  return sh->at + i * 2 * MIB + (i % 3) * 256 * 1024; /* pages with one edge, or two */
}

static gpointer
shared_reader (gpointer data)
{
  Shared *sh = data;
  guint32 x = 12345;
  guint64 found = 0;

  while (!g_atomic_int_get (&sh->stop))
    {
      MemresLookupInfo info;
      guint i;
      guint64 a;

      x = x * 1664525u + 1013904223u;
      if ((x & 1023) == 0)
        g_atomic_int_inc (&sh->laps);
      i = (x >> 8) % SHARED_FIXED;
      a = fixed_base (sh, i) + (x >> 12) % MIB;
      if (!lookup_either (x >> 31, addr (a), &info))
        g_atomic_int_inc (&sh->bad);
      else if (info.resource == sh->fixed_mr)
        {
          if (info.segment.base != fixed_base (sh, i) || info.segment.length != MIB
              || info.offset != a - fixed_base (sh, i))
            g_atomic_int_inc (&sh->bad);
          found++;
        }
      else if (info.resource != sh->moving_mr || a - info.segment.base >= info.segment.length
               || info.segment.base < fixed_base (sh, i)
               || info.segment.base + info.segment.length > fixed_base (sh, i) + MIB)
        g_atomic_int_inc (&sh->bad); /* only a nested segment may answer, and it holds @a */
    }
  __atomic_fetch_add (&sh->found, found, __ATOMIC_RELAXED);
  return NULL;
}

static void
test_shared_pages_race (void)
{
  Shared sh = { 0 };
  GThread *threads[2];
  MemresResource *mr;

  segkind_register ();
  mr = mt_new_ok ("segkind");
  sh.fixed_mr = mr;
  sh.moving_mr = mt_new_ok ("segkind");
  sh.at = G_GUINT64_CONSTANT (0x300000000000);
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  for (guint i = 0; i < SHARED_FIXED; i++)
    seg_map (mr, fixed_base (&sh, i), MIB);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("reader", shared_reader, &sh);
  /* 300 rounds, and more until the readers have looked up a few thousand times meanwhile (on a
   * loaded machine they may not run at all during the first 300) */
  for (guint round = 0; round < 300 || g_atomic_int_get (&sh.laps) < 4; round++)
    for (guint i = 0; i < SHARED_FIXED; i++)
      {
        guint64 f = fixed_base (&sh, i), after = f + MIB + (round % 4) * 64 * 1024;
        guint64 in = f + (round % 8) * 128 * 1024;

        /* a neighbour of the fixed one's own resource after it, in its page or the next */
        seg_map (mr, after, 64 * 1024 * (1 + round % 3));
        /* a nested one of the other resource inside it */
        seg_map (sh.moving_mr, in, 64 * 1024);
        seg_unmap (mr, after);
        seg_unmap (sh.moving_mr, in);
      }
  g_atomic_int_set (&sh.stop, 1);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  g_test_message ("%" G_GUINT64_FORMAT " lookups found the fixed segments, %d wrong", sh.found,
                  sh.bad);
  g_assert_cmpint (sh.bad, ==, 0);
  g_assert_cmpint (sh.found, >, 0);
  for (guint i = 0; i < SHARED_FIXED; i++)
    seg_unmap (mr, fixed_base (&sh, i));
  g_array_unref (model);
  memres_resource_unref (sh.moving_mr);
  memres_resource_unref (mr);
}

/* Readers race a writer that turns slots from one kind to another and back as fast as it can,
 * so that a reader that read a slot's kind finds its words already in another kind's form: a
 * page slot from one segment's answer (direct) to up to three runs (a nested segment) and to a
 * runs record (two nested) and back; a region slot (a 128 MiB segment) from its answer to three
 * runs (a 64 MiB segment nested in it) and back; a page inside that region from "none, ask the
 * region" to three runs (a small segment nested) and back; and nodes above 2^48 added one by
 * one (the hash table grown under the readers). In the direct form a slot's words are answer
 * bytes, not pointers: a reader that followed them as the entry of a run before it checked the
 * sequence died of SIGSEGV (h-index, on a 16-core machine). Four readers, more than this
 * machine's cores, so that they are preempted between their loads. Every lookup must find its
 * fixed segment, or a nested one that holds the address. */
#define STATES_FINE    2
#define STATES_FIXED   (STATES_FINE + 2)
#define STATES_READERS 4

typedef struct
{
  MemresResource *fixed_mr, *moving_mr;
  guint64 base[STATES_FIXED], length[STATES_FIXED];
  gint stop;                    /* atomic */
  gint bad;                     /* atomic */
  gint laps;                    /* atomic: 1,024 lookups each */
  guint64 found[STATES_FIXED];  /* atomic: lookups that found the fixed segment itself */
  guint64 nested[STATES_FIXED]; /* atomic: lookups that found a nested one */
} States;

static gpointer
states_reader (gpointer data)
{
  States *st = data;
  guint64 x = g_random_int () | 1; /* xorshift64 */
  guint64 found[STATES_FIXED] = { 0 }, nested[STATES_FIXED] = { 0 };

  while (!g_atomic_int_get (&st->stop))
    {
      MemresLookupInfo info;
      guint i;
      guint64 a;

      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      if ((x & 1023) == 0)
        g_atomic_int_inc (&st->laps);
      i = (x >> 10) % STATES_FIXED;
      /* in the coarse one: half of them in its first 8 MiB (a page with a small one nested) */
      a = st->base[i]
          + (((x >> 32) * (i == STATES_FINE && (x & 0x100) ? 8 * MIB : st->length[i])) >> 32);
      if (!lookup_either (x >> 63, addr (a), &info))
        g_atomic_int_inc (&st->bad);
      else if (info.resource == st->fixed_mr)
        {
          if (info.segment.base != st->base[i] || info.segment.length != st->length[i]
              || info.offset != a - st->base[i])
            g_atomic_int_inc (&st->bad);
          found[i]++;
        }
      else if (info.resource != st->moving_mr || a - info.segment.base >= info.segment.length
               || info.offset != a - info.segment.base || info.segment.base < st->base[i]
               || info.segment.base + info.segment.length > st->base[i] + st->length[i])
        g_atomic_int_inc (&st->bad);
      else
        nested[i]++;
    }
  for (guint i = 0; i < STATES_FIXED; i++)
    {
      __atomic_fetch_add (&st->found[i], found[i], __ATOMIC_RELAXED);
      __atomic_fetch_add (&st->nested[i], nested[i], __ATOMIC_RELAXED);
    }
  return NULL;
}

static void
test_slot_states_race (void)
{
  States st = { 0 };
  GThread *threads[STATES_READERS];
  guint64 fine = G_GUINT64_CONSTANT (0x310000000000);
  guint64 coarse = G_GUINT64_CONSTANT (0x320000000000);   /* a 64 MiB region's edge */
  guint64 high = G_GUINT64_CONSTANT (0xfff2000000000000); /* above 2^48: the hash table */
  guint64 found = 0, nested = 0;
  guint round;

  segkind_register ();
  st.fixed_mr = mt_new_ok ("segkind");
  st.moving_mr = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  for (guint i = 0; i < STATES_FINE; i++)
    {
      st.base[i] = fine + i * 2 * MIB; /* a page of its own: its slot is its answer */
      st.length[i] = MIB;
    }
  st.base[STATES_FINE] = coarse; /* two regions' slots are its answer */
  st.length[STATES_FINE] = 128 * MIB;
  st.base[STATES_FINE + 1] = high;
  st.length[STATES_FINE + 1] = MIB;
  for (guint i = 0; i < STATES_FIXED; i++)
    seg_map (st.fixed_mr, st.base[i], st.length[i]);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("reader", states_reader, &st);
  /* 600 rounds, and more until the readers have looked up tens of thousands of times */
  for (round = 0; round < 600 || g_atomic_int_get (&st.laps) < 64; round++)
    {
      guint64 in = (round % 7) * 128 * 1024;

      for (guint j = 0; j < 4 * STATES_FINE; j++)
        {
          guint i = j % STATES_FINE;
          guint64 f = st.base[i];

          /* direct -> three runs -> direct */
          seg_map (st.moving_mr, f + in, 64 * 1024);
          seg_unmap (st.moving_mr, f + in);
          if ((round + j) % 2 == 0)
            {
              /* direct -> three runs -> five (a record) -> three -> direct */
              seg_map (st.moving_mr, f + 64 * 1024, 64 * 1024);
              seg_map (st.moving_mr, f + 512 * 1024 + in / 2, 64 * 1024);
              seg_unmap (st.moving_mr, f + 64 * 1024);
              seg_unmap (st.moving_mr, f + 512 * 1024 + in / 2);
            }
        }
      /* the regions: their answer -> three runs -> their answer */
      seg_map (st.moving_mr, coarse + 32 * MIB, 64 * MIB);
      seg_unmap (st.moving_mr, coarse + 32 * MIB);
      /* a page in the first region: none (the region's) -> three runs -> none */
      seg_map (st.moving_mr, coarse + 5 * MIB + in, 64 * 1024);
      seg_unmap (st.moving_mr, coarse + 5 * MIB + in);
      /* a new GiB above 2^48, 64 of them: the hash table grows under the readers */
      if (round < 64)
        {
          seg_map (st.moving_mr, high + (round + 1) * GIB, MIB);
          seg_unmap (st.moving_mr, high + (round + 1) * GIB);
        }
    }
  g_atomic_int_set (&st.stop, 1);
  for (guint i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  for (guint i = 0; i < STATES_FIXED; i++)
    {
      found += st.found[i];
      nested += st.nested[i];
    }
  g_test_message ("%u rounds; %" G_GUINT64_FORMAT
                  " lookups found the fixed segments, %" G_GUINT64_FORMAT " a nested one, %d wrong",
                  round, found, nested, st.bad);
  g_assert_cmpint (st.bad, ==, 0);
  g_assert_cmpuint (found, >, 0);
  for (guint i = 0; i < STATES_FIXED; i++)
    seg_unmap (st.fixed_mr, st.base[i]);
  g_assert_cmpuint (model->len, ==, 0);
  g_array_unref (model);
  memres_resource_unref (st.moving_mr);
  memres_resource_unref (st.fixed_mr);
}

/* Refuses @event of @segment with @code of MEMRES_ERROR, saying @says. */
static void
assert_refused (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
                gint code, const char *says)
{
  g_autoptr (GError) error = NULL;

  g_assert_false (memres_resource_raise_segment_event (mr, event, segment, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, says));
}

/* A segment overlapping one of the same resource is refused (MEMRES_ERROR_INVALID_ARGUMENT, the
 * index unchanged), found across empty page slots of a node that exists (the overlap check skips
 * them), in the flat table and in the hash table; its neighbours and another resource's nesting
 * are not refused. A growth or unmapping of an unknown base (MEMRES_ERROR_NOT_FOUND), a shrink
 * and a length of 0 (INVALID_ARGUMENT) and a kind without MEMRES_KIND_SEGMENTS (NOT_SUPPORTED)
 * are refused too, nothing changed. They were criticals, which a kind could not see. */
static void
test_overlap_refused (void)
{
  static const guint64 ats[]
      = { G_GUINT64_CONSTANT (0x200000000000), G_GUINT64_CONSTANT (0xfff0000000000000) };
  MemresResource *a, *b, *host;
  MemresLookupInfo info;
  MemresSegment plain = { .base = G_GUINT64_CONSTANT (0x300000000000), .length = MIB };

  segkind_register ();
  a = mt_new_ok ("segkind");
  b = mt_new_ok ("segkind");
  host = mt_new_ok ("host");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  for (guint i = 0; i < G_N_ELEMENTS (ats); i++)
    {
      guint64 at = ats[i];
      MemresSegment over = { .base = at + MIB, .length = 7 * MIB + 1, .device = -1 };
      MemresSegment inside = { .base = at + 9 * MIB, .length = 4096, .device = -1 };
      MemresSegment shrink = { .base = at + 8 * MIB, .length = MIB, .device = -1 };
      MemresSegment unknown = { .base = at + 4 * MIB, .length = 8 * MIB, .device = -1 };
      MemresSegment empty = { .base = at + 14 * MIB, .length = 0, .device = -1 };

      /* pages at+8 MiB and on; the node's slots below them are empty */
      seg_map (a, at + 8 * MIB, 3 * MIB);
      /* from an empty page into a's first page: refused, nothing changes */
      assert_refused (a, MEMRES_SEGMENT_MAPPED, &over, MEMRES_ERROR_INVALID_ARGUMENT,
                      "kind \"segkind\" already has a segment overlapping");
      check_model (at, at + 16 * MIB);
      /* wholly inside a's segment: refused */
      assert_refused (a, MEMRES_SEGMENT_MAPPED, &inside, MEMRES_ERROR_INVALID_ARGUMENT,
                      "kind \"segkind\" already has a segment overlapping");
      check_model (at, at + 16 * MIB);
      /* a's segment made smaller by a growth, a growth and an unmap of no segment, nothing */
      assert_refused (a, MEMRES_SEGMENT_GROWN, &shrink, MEMRES_ERROR_INVALID_ARGUMENT,
                      "cannot grow from 3145728 to 1048576 bytes");
      assert_refused (a, MEMRES_SEGMENT_GROWN, &unknown, MEMRES_ERROR_NOT_FOUND, "no segment at");
      assert_refused (a, MEMRES_SEGMENT_UNMAPPING, &unknown, MEMRES_ERROR_NOT_FOUND,
                      "no segment at");
      assert_refused (b, MEMRES_SEGMENT_UNMAPPING, &shrink, MEMRES_ERROR_NOT_FOUND,
                      "no segment at");
      assert_refused (a, MEMRES_SEGMENT_MAPPED, &empty, MEMRES_ERROR_INVALID_ARGUMENT,
                      "at least 1 byte");
      check_model (at, at + 16 * MIB);
      /* up to a's first byte, and from its end: neighbours, not refused */
      seg_map (a, at + MIB, 7 * MIB);
      seg_map (a, at + 11 * MIB, MIB / 2);
      /* b's inside a's: nesting, not refused */
      seg_map (b, at + 9 * MIB, 4096);
      check_model (at, at + 16 * MIB);
      while (model->len > 0)
        seg_unmap (g_array_index (model, Seg, 0).mr, g_array_index (model, Seg, 0).base);
      check_model (at, at + 16 * MIB);
    }
  /* a length that wraps around the address space */
  plain.base = G_MAXUINT64 - MIB + 1;
  plain.length = 2 * MIB;
  assert_refused (a, MEMRES_SEGMENT_MAPPED, &plain, MEMRES_ERROR_INVALID_ARGUMENT,
                  "end inside the address space");
  /* host has no MEMRES_KIND_SEGMENTS */
  plain.base = G_GUINT64_CONSTANT (0x300000000000);
  plain.length = MIB;
  assert_refused (host, MEMRES_SEGMENT_MAPPED, &plain, MEMRES_ERROR_NOT_SUPPORTED,
                  "without MEMRES_KIND_SEGMENTS");
  g_assert_false (lookup_both ((gconstpointer) (guintptr) plain.base, &info));
  g_array_unref (model);
  memres_resource_unref (host);
  memres_resource_unref (b);
  memres_resource_unref (a);
}

#ifndef TEST_OTHER_LAYOUT
/* The inline code's own answer at @a, as memres_lookup_inline() reads it (MEMRES_LOOKUP_ANSWERED_
 * when it answers without memres_lookup()). */
static int
inline_direct (guint64 a, MemresLookupInfo *info)
{
  const guint64 *words = memres_lookup_index.words;
  guint64 seq = __atomic_load_n (&words[MEMRES_LOOKUP_DONE_WORD_], __ATOMIC_ACQUIRE);

  return _memres_lookup_slot_ (words, _memres_lookup_flat_slot_ (words, a), a, info, seq);
}
#endif

/* memres_lookup_inline() against memres_lookup() on each kind of page (one segment over it,
 * one cut by edges, none, a GiB with no node, above 2^48, NULL); with libmemres's index, a page
 * that one segment covers whole is answered by the inline code itself, and no other; with
 * tests/lookup-other-layout.c's object (test-lookup-other-layout), whose layout this header does
 * not know and which leads to no index, every inline call is memres_lookup()'s and answers the
 * same. */
static void
test_inline (void)
{
  const guint64 base = G_GUINT64_CONSTANT (0x7f1200000000), high = G_GUINT64_CONSTANT (1) << 52;
  const guint64 small = base + 4 * MIB + 512 * 1024;
  guint64 direct[] = { base, base + 1, base + MIB + 77, base + 3 * MIB, base + 4 * MIB - 1 };
  guint64 other[] = { base - 1,
                      small - 1,
                      small,
                      small + 5,
                      base + 6 * MIB,
                      high + 5,
                      high - 1,
                      G_GUINT64_CONSTANT (0x10000000000),
                      0 };
  MemresLookupInfo info;
  MemresResource *mr;

#ifndef TEST_OTHER_LAYOUT
  g_assert_cmpuint (memres_lookup_index.layout, ==, MEMRES_LOOKUP_LAYOUT);
  g_assert_nonnull (memres_lookup_index.words);
#else
  g_assert_cmpuint (memres_lookup_index.layout, !=, MEMRES_LOOKUP_LAYOUT);
  g_assert_null (memres_lookup_index.words);
#endif
  segkind_register ();
  mr = mt_new_ok ("segkind");
  model = g_array_new (FALSE, FALSE, sizeof (Seg));
  seg_map (mr, base, 4 * MIB);     /* four pages it covers whole */
  seg_map (mr, small, 256 * 1024); /* a page with two edges */
  seg_map (mr, high, 4 * MIB);     /* above 2^48: the hash table */
  for (guint i = 0; i < G_N_ELEMENTS (direct); i++)
    {
      assert_found (direct[i], mr, base, 4 * MIB);
#ifndef TEST_OTHER_LAYOUT
      memset (&info, 0xa5, sizeof info);
      g_assert_cmpint (inline_direct (direct[i], &info), ==, MEMRES_LOOKUP_ANSWERED_);
      g_assert_true (info.resource == mr);
      g_assert_cmphex (info.segment.base, ==, base);
      g_assert_cmpuint (info.segment.length, ==, 4 * MIB);
      g_assert_cmpint (info.segment.device, ==, -1);
      g_assert_cmpuint (info.offset, ==, direct[i] - base);
#endif
    }
  for (guint i = 0; i < G_N_ELEMENTS (other); i++)
    {
      check_at (other[i]);
#ifndef TEST_OTHER_LAYOUT
      memset (&info, 0xa5, sizeof info);
      if (other[i] >> 48 == 0)
        g_assert_cmpint (inline_direct (other[i], &info), ==, MEMRES_LOOKUP_NOT_DIRECT_);
      g_assert_cmpuint (info.offset, ==, G_GUINT64_CONSTANT (0xa5a5a5a5a5a5a5a5));
#endif
    }
  g_assert_false (lookup_both (NULL, &info));
  seg_unmap (mr, base);
  assert_missing (base + 5);
  seg_unmap (mr, small);
  seg_unmap (mr, high);
  assert_missing (high + 5);
  g_array_unref (model);
  memres_resource_unref (mr);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/lookup/stale-after-unmap", test_stale_after_unmap);
  g_test_add_func ("/lookup/nested-after-hit", test_nested_after_hit);
  g_test_add_func ("/lookup/many-segments", test_many_segments);
  g_test_add_func ("/lookup/threads", test_threads);
  g_test_add_func ("/lookup/shapes", test_shapes);
  g_test_add_func ("/lookup/random-shapes", test_random_shapes);
  g_test_add_func ("/lookup/large-shapes", test_large_shapes);
  g_test_add_func ("/lookup/page-edges", test_page_edges);
  g_test_add_func ("/lookup/coarse-shapes", test_coarse_shapes);
  g_test_add_func ("/lookup/random-coarse", test_random_coarse);
  g_test_add_func ("/lookup/shared-pages-race", test_shared_pages_race);
  g_test_add_func ("/lookup/slot-states-race", test_slot_states_race);
  g_test_add_func ("/lookup/overlap-refused", test_overlap_refused);
  g_test_add_func ("/lookup/inline", test_inline);
  return g_test_run ();
}

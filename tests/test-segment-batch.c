/* test-segment-batch.c: batches of segment events (memres_resource_raise_segment_events(),
 * core/segments.c, and the index's batch updates in core/segment-index.c). On "batchkind", a kind
 * registered here that raises segments over ranges it never maps (suite core): thousands of
 * segments crowded in 2 MiB pages mapped and unmapped in batches, each lookup then checked and
 * each event recorded in order; lookups from another thread after an unmapping batch returned;
 * a subscriber raising an event of the same resource from inside a batch's callback; empty,
 * single and grown batches; refused batches (overlapping, unknown, twice) that change nothing.
 * And sleeps of many buffers through `arena`, `cache>arena`, `vmm` and `cache>vmm` (suites fake
 * and gpu): after the sleep the index holds exactly the buffers that stayed awake, the events
 * were told in order, and a failed unmap in the middle leaves every segment found and told mapped
 * again, with the driver's error. */
#include "testutil.h"

#include "plugins/common.h"

#include <string.h>

#include "segment-check.h"

#define KiB G_GUINT64_CONSTANT (1024)
#define MiB (1024 * KiB)

static const MemresKindInfo batchkind_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "batchkind",
  .description = "raises the segments the test tells it to (tests/test-segment-batch.c)",
  .ops = &tp_ops,
  .flags = MEMRES_KIND_SEGMENTS,
};

static MemresResource *
batchkind_new (void)
{
  static gboolean done;
  g_autoptr (GError) error = NULL;

  if (!done)
    MT_CHECK (memres_registry_register_kind (&batchkind_info, &error));
  done = TRUE;
  return mt_new_ok ("batchkind");
}

/* memres_resource_raise_segment_events() that must succeed */
static void
raise_ok (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segs, gsize n)
{
  g_autoptr (GError) error = NULL;

  MT_CHECK (memres_resource_raise_segment_events (mr, event, segs, n, &error));
}

/* memres_resource_raise_segment_events() that must be refused with @code, naming segment @bad */
static void
raise_refused (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segs, gsize n,
               gint code, gsize bad)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *name
      = g_strdup_printf ("segment %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT, bad, n);

  g_assert_false (memres_resource_raise_segment_events (mr, event, segs, n, &error));
  g_assert_error (error, MEMRES_ERROR, code);
  g_assert_nonnull (strstr (error->message, name));
}

/* @n segments from @at, 4 KiB to 64 KiB each with a 4 KiB hole after each (about 50 to a 2 MiB
 * page), in the order of a fixed permutation (not the address order). */
static MemresSegment *
crowded (guint64 at, guint n)
{
  MemresSegment *segs = g_new0 (MemresSegment, n);
  g_autofree guint64 *base = g_new (guint64, n);

  for (guint i = 0; i < n; i++)
    {
      base[i] = at;
      at += 4 * KiB * (1 + i % 16) + 4 * KiB;
    }
  for (guint i = 0; i < n; i++)
    {
      guint k = (guint) (((guint64) i * 7919u) % n); /* n is no multiple of 7919 */

      segs[i].base = base[k];
      segs[i].length = 4 * KiB * (1 + k % 16);
      segs[i].device = -1;
    }
  return segs;
}

/* The recorder holds, from event @from on, @event for each of @segs in their order. */
static void
assert_recs (Recorder *r, guint from, MemresResource *mr, MemresSegmentEvent event,
             const MemresSegment *segs, guint n)
{
  g_assert_cmpuint (r->recs->len, ==, from + n);
  for (guint i = 0; i < n; i++)
    assert_rec (r, from + i, mr, event, segs[i].base, segs[i].length, 0);
}

/* Thousands of crowded segments mapped in one batch, every other one unmapped in another, the
 * rest in a third: each lookup right after each, each event recorded in the batch's order. */
static void
test_crowded (void)
{
  enum
  {
    N = 3001
  };
  MemresResource *mr = batchkind_new ();
  Recorder *r = recorder_new ();
  g_autofree MemresSegment *segs = crowded (G_GUINT64_CONSTANT (0x300000000000), N);
  g_autofree MemresSegment *odd = g_new (MemresSegment, N);
  g_autofree MemresSegment *even = g_new (MemresSegment, N);
  guint id = subscribe (mr, r), n_odd = 0, n_even = 0;

  raise_ok (mr, MEMRES_SEGMENT_MAPPED, segs, N);
  assert_recs (r, 0, mr, MEMRES_SEGMENT_MAPPED, segs, N);
  for (guint i = 0; i < N; i++)
    assert_segment_lookups (mr, segs[i].base, segs[i].length);
  g_assert_cmpuint (count_segments (mr), ==, N);

  for (guint i = 0; i < N; i++)
    {
      if (i % 2)
        odd[n_odd++] = segs[i];
      else
        even[n_even++] = segs[i];
    }
  raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, odd, n_odd);
  assert_recs (r, N, mr, MEMRES_SEGMENT_UNMAPPING, odd, n_odd);
  for (guint i = 0; i < n_odd; i++)
    {
      assert_missing (odd[i].base);
      assert_missing (odd[i].base + odd[i].length - 1);
    }
  for (guint i = 0; i < n_even; i++)
    assert_segment_lookups (mr, even[i].base, even[i].length);
  g_assert_cmpuint (count_segments (mr), ==, n_even);

  raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, even, n_even);
  assert_recs (r, N + n_odd, mr, MEMRES_SEGMENT_UNMAPPING, even, n_even);
  for (guint i = 0; i < N; i++)
    assert_missing (segs[i].base);
  g_assert_cmpuint (count_segments (mr), ==, 0);
  unsubscribe (mr, id);
  recorder_free (r);
  memres_resource_unref (mr);
}

/* ---- the order of a batch's events, and lookups inside and after it -------------------------- */

typedef struct
{
  MemresResource *mr;
  const MemresSegment *batch;
  guint n;
  guint calls;
  gboolean raise_done;
  MemresSegment extra; /* mapped from inside the first callback */
  gint found_inside;   /* UNMAPPING callbacks that found their segment */
} Nested;

/* On the first MAPPED event of the batch: raises UNMAPPING of the batch's third segment (whose
 * MAPPED event is not delivered yet) and MAPPED of another segment, on this thread. */
static void
nested_cb (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg, guint64 prev,
           gpointer data)
{
  Nested *t = data;

  t->calls++;
  if (event == MEMRES_SEGMENT_UNMAPPING)
    {
      MemresLookupInfo info;

      /* still found while its callbacks run */
      t->found_inside += memres_lookup (addr (seg->base), &info) && info.segment.base == seg->base;
      return;
    }
  if (t->raise_done)
    return;
  t->raise_done = TRUE;
  g_assert_true (
      memres_resource_raise_segment_event (t->mr, MEMRES_SEGMENT_UNMAPPING, &t->batch[2], NULL));
  g_assert_true (
      memres_resource_raise_segment_event (t->mr, MEMRES_SEGMENT_MAPPED, &t->extra, NULL));
}

/* A subscriber raising events of the same resource from inside a batch's callback: the rest of
 * the batch is delivered first, so that every subscriber sees each segment mapped before it is
 * unmapped, in the order a kind raising its queue one event at a time would give. */
static void
test_nested_raise (void)
{
  MemresResource *mr = batchkind_new ();
  Recorder *r = recorder_new ();
  g_autofree MemresSegment *segs = crowded (G_GUINT64_CONSTANT (0x310000000000), 5);
  Nested t = { mr, segs, 5, 0, FALSE, { .base = 0x310000000000 + 64 * MiB, .length = 8192 } };
  g_autoptr (GError) error = NULL;
  guint id_r = subscribe (mr, r);
  guint id_t = memres_resource_subscribe_segments (mr, nested_cb, &t, NULL, &error);

  g_assert_no_error (error);
  t.extra.device = -1;
  raise_ok (mr, MEMRES_SEGMENT_MAPPED, segs, 5);
  /* the recorder (subscribed first): the whole batch, then what the callback raised */
  g_assert_cmpuint (r->recs->len, ==, 7);
  for (guint i = 0; i < 5; i++)
    assert_rec (r, i, mr, MEMRES_SEGMENT_MAPPED, segs[i].base, segs[i].length, 0);
  assert_rec (r, 5, mr, MEMRES_SEGMENT_UNMAPPING, segs[2].base, segs[2].length, 0);
  assert_rec (r, 6, mr, MEMRES_SEGMENT_MAPPED, t.extra.base, t.extra.length, 0);
  g_assert_cmpuint (t.calls, ==, 7);
  g_assert_cmpint (t.found_inside, ==, 1);
  assert_missing (segs[2].base);
  assert_segment_lookups (mr, t.extra.base, t.extra.length);
  for (guint i = 0; i < 5; i++)
    if (i != 2)
      assert_segment_lookups (mr, segs[i].base, segs[i].length);

  /* an unmapping batch: each segment found in its own callback */
  segs[2] = t.extra;
  raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, segs, 5);
  assert_recs (r, 7, mr, MEMRES_SEGMENT_UNMAPPING, segs, 5);
  g_assert_cmpint (t.found_inside, ==, 6);
  for (guint i = 0; i < 5; i++)
    assert_missing (segs[i].base);
  MT_CHECK (memres_resource_unsubscribe_segments (mr, id_t, &error));
  unsubscribe (mr, id_r);
  recorder_free (r);
  memres_resource_unref (mr);
}

/* A reader thread asked, after each unmapping batch returned, to look up every address it
 * unmapped: never found (no stale answer in another thread), while the batch's kept neighbours in
 * the same pages always are. */
typedef struct
{
  GAsyncQueue *todo; /* MemresSegment arrays (ended by a length of 0), or the queue itself */
  GAsyncQueue *acks; /* one for each array looked up */
  gint stale;        /* atomic */
  gint lost;         /* atomic */
  MemresResource *mr;
  const MemresSegment *kept;
  guint n_kept;
} Reader;

static gpointer
reader_main (gpointer data)
{
  Reader *rd = data;

  for (;;)
    {
      MemresSegment *gone = g_async_queue_pop (rd->todo);

      if ((gpointer) gone == (gpointer) rd->todo)
        return NULL;
      for (guint i = 0; gone[i].length != 0; i++)
        {
          MemresLookupInfo info;

          if (memres_lookup (addr (gone[i].base + gone[i].length / 2), &info))
            g_atomic_int_inc (&rd->stale);
        }
      for (guint i = 0; i < rd->n_kept; i++)
        {
          MemresLookupInfo info;

          if (!memres_lookup (addr (rd->kept[i].base + 1), &info) || info.resource != rd->mr
              || info.segment.base != rd->kept[i].base)
            g_atomic_int_inc (&rd->lost);
        }
      g_free (gone);
      g_async_queue_push (rd->acks, GINT_TO_POINTER (1));
    }
}

static void
test_other_thread (void)
{
  enum
  {
    N = 1200,
    ROUNDS = 20
  };
  MemresResource *mr = batchkind_new ();
  g_autofree MemresSegment *segs = crowded (G_GUINT64_CONSTANT (0x320000000000), N);
  g_autofree MemresSegment *kept = g_new (MemresSegment, N);
  Reader rd = { g_async_queue_new (), g_async_queue_new (), 0, 0, mr, kept, 0 };
  GThread *th;
  guint n_moving = 0;

  for (guint i = 0; i < N; i++)
    if (i % 3 == 0)
      kept[rd.n_kept++] = segs[i];
  raise_ok (mr, MEMRES_SEGMENT_MAPPED, kept, rd.n_kept);
  th = g_thread_new ("reader", reader_main, &rd);
  for (guint round = 0; round < ROUNDS; round++)
    {
      MemresSegment *moving = g_new0 (MemresSegment, N + 1);

      /* the reader is done with round - 2's segments, which this round maps again */
      if (round >= 2)
        g_async_queue_pop (rd.acks);
      n_moving = 0;
      for (guint i = 0; i < N; i++)
        if (i % 3 != 0 && (i + round) % 2 == 0)
          moving[n_moving++] = segs[i];
      raise_ok (mr, MEMRES_SEGMENT_MAPPED, moving, n_moving);
      raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, moving, n_moving);
      g_async_queue_push (rd.todo, moving); /* looked up after the batch returned */
    }
  g_async_queue_push (rd.todo, rd.todo);
  g_thread_join (th);
  g_assert_cmpint (g_atomic_int_get (&rd.stale), ==, 0);
  g_assert_cmpint (g_atomic_int_get (&rd.lost), ==, 0);
  g_assert_cmpuint (n_moving, >, 300);
  raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, kept, rd.n_kept);
  g_assert_cmpuint (count_segments (mr), ==, 0);
  g_async_queue_unref (rd.todo);
  g_async_queue_unref (rd.acks);
  memres_resource_unref (mr);
}

/* ---- edges ------------------------------------------------------------------------------------
 */

/* An empty batch does nothing; a batch of one is the single call; grown ones go one by one. */
static void
test_edges (void)
{
  MemresResource *mr = batchkind_new ();
  Recorder *r = recorder_new ();
  guint64 at = G_GUINT64_CONSTANT (0x330000000000);
  MemresSegment two[2] = { { .base = at, .length = MiB, .device = -1 },
                           { .base = at + 4 * MiB, .length = 3 * MiB, .device = -1 } };
  guint id = subscribe (mr, r);

  raise_ok (mr, MEMRES_SEGMENT_MAPPED, NULL, 0);
  raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, NULL, 0);
  g_assert_cmpuint (r->recs->len, ==, 0);
  g_assert_cmpuint (count_segments (mr), ==, 0);

  raise_ok (mr, MEMRES_SEGMENT_MAPPED, two, 1);
  assert_recs (r, 0, mr, MEMRES_SEGMENT_MAPPED, two, 1);
  assert_segment_lookups (mr, at, MiB);
  raise_ok (mr, MEMRES_SEGMENT_MAPPED, &two[1], 1);
  two[0].length = 2 * MiB;
  two[1].length = 5 * MiB;
  raise_ok (mr, MEMRES_SEGMENT_GROWN, two, 2);
  g_assert_cmpuint (r->recs->len, ==, 4);
  assert_rec (r, 2, mr, MEMRES_SEGMENT_GROWN, at, 2 * MiB, MiB);
  assert_rec (r, 3, mr, MEMRES_SEGMENT_GROWN, at + 4 * MiB, 5 * MiB, 3 * MiB);
  assert_segment_lookups (mr, at, 2 * MiB);
  assert_segment_lookups (mr, at + 4 * MiB, 5 * MiB);
  /* whole pages (one store each) and their edges, unmapped in a batch */
  raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, two, 2);
  assert_recs (r, 4, mr, MEMRES_SEGMENT_UNMAPPING, two, 2);
  assert_missing (at);
  assert_missing (at + 4 * MiB);
  assert_missing (at + 9 * MiB - 1);
  unsubscribe (mr, id);
  recorder_free (r);
  memres_resource_unref (mr);
}

/* Refused batches: nothing of them happens, no event, each refusal a GError (MEMRES_ERROR,
 * INVALID_ARGUMENT for an overlap or no length, NOT_FOUND for an unknown base or one twice) naming
 * the segment's place. */
static void
test_refused (void)
{
  MemresResource *mr, *other;
  Recorder *r;
  guint64 at = G_GUINT64_CONSTANT (0x340000000000);
  MemresSegment have = { .base = at + 8 * MiB, .length = 3 * MiB, .device = -1 };
  MemresSegment batch[3] = { { .base = at, .length = 64 * KiB, .device = -1 },
                             { .base = at + 128 * KiB, .length = 64 * KiB, .device = -1 },
                             { .base = at + 160 * KiB, .length = 64 * KiB, .device = -1 } };
  MemresSegment bad_len[2] = { { .base = at, .length = 4096, .device = -1 },
                               { .base = at + MiB, .length = 0, .device = -1 } };
  MemresSegment nested = { .base = at + 9 * MiB, .length = 4096, .device = -1 };
  guint id;

  mr = batchkind_new ();
  other = batchkind_new ();
  r = recorder_new ();
  raise_ok (mr, MEMRES_SEGMENT_MAPPED, &have, 1);
  /* b's segment nested in a's: another resource's, no overlap of its own */
  raise_ok (other, MEMRES_SEGMENT_MAPPED, &nested, 1);
  id = subscribe (mr, r);
  g_assert_cmpuint (r->recs->len, ==, 1); /* the replay */

  /* the third overlaps the second: nothing mapped */
  raise_refused (mr, MEMRES_SEGMENT_MAPPED, batch, 3, MEMRES_ERROR_INVALID_ARGUMENT, 2);
  g_assert_cmpuint (r->recs->len, ==, 1);
  for (guint i = 0; i < 3; i++)
    assert_missing (batch[i].base);
  assert_segment_lookups (mr, have.base, have.length);

  /* one inside a segment it has */
  {
    MemresSegment in[2] = { batch[0], { .base = at + 9 * MiB, .length = 4096, .device = -1 } };

    raise_refused (mr, MEMRES_SEGMENT_MAPPED, in, 2, MEMRES_ERROR_INVALID_ARGUMENT, 1);
    g_assert_cmpuint (r->recs->len, ==, 1);
    assert_missing (batch[0].base);
  }
  /* no length */
  bad_len[1].base = at + MiB;
  raise_refused (mr, MEMRES_SEGMENT_MAPPED, bad_len, 2, MEMRES_ERROR_INVALID_ARGUMENT, 1);
  g_assert_cmpuint (r->recs->len, ==, 1);
  assert_missing (at);

  /* the first two mapped: an unmapping batch with one unknown unmaps nothing */
  batch[2].base = at + 256 * KiB;
  raise_ok (mr, MEMRES_SEGMENT_MAPPED, batch, 1);
  {
    MemresSegment un[3] = { batch[0], batch[1], have };

    raise_refused (mr, MEMRES_SEGMENT_UNMAPPING, un, 3, MEMRES_ERROR_NOT_FOUND, 1);
    g_assert_cmpuint (r->recs->len, ==, 2);
    assert_segment_lookups (mr, batch[0].base, batch[0].length);
    assert_segment_lookups (mr, have.base, have.length);
    /* twice the same */
    un[0] = have;
    un[1] = have;
    raise_refused (mr, MEMRES_SEGMENT_UNMAPPING, un, 2, MEMRES_ERROR_NOT_FOUND, 1);
    g_assert_cmpuint (r->recs->len, ==, 2);
    assert_segment_lookups (mr, have.base, have.length);
    /* none was left marked unmapping: a good batch unmaps them */
    un[0] = batch[0];
    raise_ok (mr, MEMRES_SEGMENT_UNMAPPING, un, 2);
    assert_recs (r, 2, mr, MEMRES_SEGMENT_UNMAPPING, un, 2);
    assert_missing (batch[0].base);
    assert_missing (have.base);
  }
  assert_found (at + 9 * MiB, other, at + 9 * MiB, 4096);
  unsubscribe (mr, id);
  recorder_free (r);
  memres_resource_unref (other);
  memres_resource_unref (mr);
}

/* ---- sleeps of many buffers (fake, gpu) --------------------------------------------------------
 */

#define N_BUFS 64

typedef struct
{
  MemresResource *mr;
  MemresBuffer *bufs[N_BUFS]; /* even ones tagged "sb-kv", odd ones "sb-keep" */
  Recorder *r[2];             /* two subscribers: both see the same events */
  guint id[2];
  guint before; /* segments before the sleep */
} Many;

static void
many_setup (Many *m, const char *spec)
{
  static const gsize sizes[] = { 4 * KiB, 64 * KiB, 1 * MiB, 3 * MiB };
  g_autoptr (GError) error = NULL;

  m->mr = mt_new_ok (spec);
  for (guint i = 0; i < N_BUFS; i++)
    {
      const char *tag = i % 2 == 0 ? "sb-kv" : "sb-keep";

      g_assert_true (memres_tag_push (tag, NULL));
      /* vmm rounds the size up to its granule */
      m->bufs[i]
          = memres_resource_allocate (m->mr, sizes[(i / 2) % G_N_ELEMENTS (sizes)], NULL, &error);
      g_assert_no_error (error);
      g_assert_true (memres_tag_pop (tag, NULL));
    }
  /* nothing idle or cached: the sleep's driver calls are its own (`vmm` keeps nothing) */
  if (!g_str_equal (spec, "vmm"))
    MT_CHECK (memres_resource_trim (m->mr, 0, &error));
  m->before = count_segments (m->mr);
  g_assert_cmpuint (m->before, >, 0);
  for (guint k = 0; k < 2; k++)
    {
      m->r[k] = recorder_new ();
      m->id[k] = subscribe (m->mr, m->r[k]);
      g_array_set_size (m->r[k]->recs, 0); /* the replay */
    }
}

static void
many_teardown (Many *m)
{
  for (guint k = 0; k < 2; k++)
    {
      unsubscribe (m->mr, m->id[k]);
      recorder_free (m->r[k]);
    }
  for (guint i = 0; i < N_BUFS; i++)
    mt_close_ok (m->bufs[i], NULL);
  memres_resource_unref (m->mr);
}

/* The recorders' events from @from on: the same in both, each @event, @n of them; their ranges
 * into @ranges when not NULL. */
static guint
many_events (Many *m, guint from, MemresSegmentEvent event, GArray *ranges)
{
  guint n = m->r[0]->recs->len - from;

  g_assert_cmpuint (m->r[1]->recs->len, ==, m->r[0]->recs->len);
  for (guint i = from; i < m->r[0]->recs->len; i++)
    {
      const Rec *a = &g_array_index (m->r[0]->recs, Rec, i);
      const Rec *b = &g_array_index (m->r[1]->recs, Rec, i);

      g_assert_cmpint (a->event, ==, event);
      g_assert_cmpint (b->event, ==, event);
      g_assert_cmphex (a->seg.base, ==, b->seg.base);
      g_assert_cmpuint (a->seg.length, ==, b->seg.length);
      if (ranges != NULL)
        g_array_append_val (ranges, a->seg);
    }
  return n;
}

static gboolean
in_ranges (GArray *ranges, guint64 a)
{
  for (guint i = 0; i < ranges->len; i++)
    {
      const MemresSegment *s = &g_array_index (ranges, MemresSegment, i);

      if (a - s->base < s->length)
        return TRUE;
    }
  return FALSE;
}

static gint
seg_by_base (gconstpointer a, gconstpointer b)
{
  guint64 x = ((const MemresSegment *) a)->base, y = ((const MemresSegment *) b)->base;

  return x < y ? -1 : x > y;
}

/* Two arrays of segments hold the same ranges (in any order). */
static void
assert_same_ranges (GArray *a, GArray *b)
{
  g_assert_cmpuint (a->len, ==, b->len);
  g_array_sort (a, seg_by_base);
  g_array_sort (b, seg_by_base);
  for (guint i = 0; i < a->len; i++)
    {
      g_assert_cmphex (g_array_index (a, MemresSegment, i).base, ==,
                       g_array_index (b, MemresSegment, i).base);
      g_assert_cmpuint (g_array_index (a, MemresSegment, i).length, ==,
                        g_array_index (b, MemresSegment, i).length);
    }
}

/* Every buffer found, in a segment of the resource (or of one below it). */
static void
assert_all_found (Many *m)
{
  for (guint i = 0; i < N_BUFS; i++)
    {
      MemresLookupInfo info;
      guint64 a = memres_buffer_get_address (m->bufs[i]);

      g_assert_true (memres_lookup (addr (a), &info));
      g_assert_true (memres_lookup (addr (a + memres_buffer_get_size (m->bufs[i]) - 1), &info));
    }
}

/* The kv half of @spec's buffers to sleep in one batch of events: the index then holds exactly
 * the segments not told unmapped (the count a new subscriber is told; every byte of a told range
 * refused, every kept buffer found, every kv buffer found or refused as its range was told), both
 * subscribers saw the same events, each range once; the wake tells the same ranges mapped. */
static void
test_sleep_many (gconstpointer data)
{
  g_autoptr (GArray) gone = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  g_autoptr (GArray) back = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  g_autoptr (GError) error = NULL;
  guint n_gone, n_kv_gone = 0;
  Many m;

  if (!mt_require_devices (1))
    return;
  many_setup (&m, data);
  MT_CHECK (memres_resource_sleep (m.mr, "sb-kv", NULL, NULL, &error));
  n_gone = many_events (&m, 0, MEMRES_SEGMENT_UNMAPPING, gone);
  g_assert_cmpuint (n_gone, >, 0);
  for (guint i = 0; i < gone->len; i++)
    {
      const MemresSegment *s = &g_array_index (gone, MemresSegment, i);

      assert_missing (s->base);
      assert_missing (s->base + s->length - 1);
      g_assert_false (in_ranges (gone, s->base + s->length) && i + 1 < gone->len
                      && g_array_index (gone, MemresSegment, i + 1).base == s->base);
    }
  g_assert_cmpuint (count_segments (m.mr), ==, m.before - n_gone);
  for (guint i = 0; i < N_BUFS; i++)
    {
      guint64 a = memres_buffer_get_address (m.bufs[i]);
      MemresLookupInfo info;

      g_assert_cmpint (memres_buffer_is_asleep (m.bufs[i]), ==, i % 2 == 0);
      if (i % 2 == 1)
        g_assert_false (in_ranges (gone, a));
      g_assert_cmpint (memres_lookup (addr (a), &info), ==, !in_ranges (gone, a));
      n_kv_gone += i % 2 == 0 && in_ranges (gone, a);
    }
  g_assert_cmpuint (n_kv_gone, >, N_BUFS / 8);

  MT_CHECK (memres_resource_wake (m.mr, "sb-kv", NULL, &error));
  g_assert_cmpuint (many_events (&m, n_gone, MEMRES_SEGMENT_MAPPED, back), ==, n_gone);
  assert_same_ranges (gone, back);
  g_assert_cmpuint (count_segments (m.mr), ==, m.before);
  assert_all_found (&m);
  many_teardown (&m);
}

/* The sleep's second cuMemUnmap fails (its only one where all its granules are adjacent, arena's
 * one run): the sleep fails with the driver's error, every buffer
 * awake, every segment told unmapping then mapped again (the same ranges) and found; a sleep and
 * wake then work. */
static void
test_sleep_unmap_fails (gconstpointer data)
{
  g_autoptr (GArray) gone = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  g_autoptr (GArray) back = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  g_autoptr (GError) error = NULL;
  guint n_gone = 0, n_back = 0, recs;
  long unmaps;
  Many m;

  if (!mt_require_devices (1) || !mt_require_fake ("injects faults"))
    return;
  many_setup (&m, data);
  /* how many unmaps the sleep makes (a run of adjacent granules is one): the second fails, or
   * the only one */
  unmaps = mt_fake_call_count ("cuMemUnmap");
  MT_CHECK (memres_resource_sleep (m.mr, "sb-kv", NULL, NULL, &error));
  unmaps = mt_fake_call_count ("cuMemUnmap") - unmaps;
  MT_CHECK (memres_resource_wake (m.mr, "sb-kv", NULL, &error));
  g_assert_cmpint (unmaps, >=, 1);
  g_test_message ("%s: %ld unmaps", (const char *) data, unmaps);
  for (guint k = 0; k < 2; k++)
    g_array_set_size (m.r[k]->recs, 0);
  mt_fake_fail_call ("cuMemUnmap", unmaps >= 2 ? 2 : 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_resource_sleep (m.mr, "sb-kv", NULL, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_assert_nonnull (strstr (error->message, "cuMemUnmap"));
  g_clear_error (&error);
  recs = m.r[0]->recs->len;
  g_assert_cmpuint (m.r[1]->recs->len, ==, recs);
  for (guint i = 0; i < recs; i++)
    {
      const Rec *a = &g_array_index (m.r[0]->recs, Rec, i);

      g_assert_cmpint (a->event, ==, g_array_index (m.r[1]->recs, Rec, i).event);
      g_assert_cmphex (a->seg.base, ==, g_array_index (m.r[1]->recs, Rec, i).seg.base);
      /* every unmapping first, then every mapped again */
      g_assert_cmpint (a->event, ==,
                       n_back == 0 && a->event == MEMRES_SEGMENT_UNMAPPING
                           ? MEMRES_SEGMENT_UNMAPPING
                           : MEMRES_SEGMENT_MAPPED);
      g_array_append_val (a->event == MEMRES_SEGMENT_UNMAPPING ? gone : back, a->seg);
      n_gone += a->event == MEMRES_SEGMENT_UNMAPPING;
      n_back += a->event == MEMRES_SEGMENT_MAPPED;
    }
  g_assert_cmpuint (n_gone, >, 1);
  assert_same_ranges (gone, back);
  g_assert_cmpuint (count_segments (m.mr), ==, m.before);
  assert_all_found (&m);
  for (guint i = 0; i < N_BUFS; i++)
    g_assert_false (memres_buffer_is_asleep (m.bufs[i]));

  MT_CHECK (memres_resource_sleep (m.mr, "sb-kv", NULL, NULL, &error));
  MT_CHECK (memres_resource_wake (m.mr, "sb-kv", NULL, &error));
  g_assert_cmpuint (count_segments (m.mr), ==, m.before);
  assert_all_found (&m);
  many_teardown (&m);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/segment-batch/crowded", test_crowded);
  g_test_add_func ("/segment-batch/nested-raise", test_nested_raise);
  g_test_add_func ("/segment-batch/other-thread", test_other_thread);
  g_test_add_func ("/segment-batch/edges", test_edges);
  g_test_add_func ("/segment-batch/refused", test_refused);
  g_test_add_data_func ("/segment-batch/sleep/arena", "arena", test_sleep_many);
  g_test_add_data_func ("/segment-batch/sleep/cache-arena", "cache>arena", test_sleep_many);
  g_test_add_data_func ("/segment-batch/sleep/vmm", "vmm", test_sleep_many);
  g_test_add_data_func ("/segment-batch/sleep/cache-vmm", "cache>vmm", test_sleep_many);
  g_test_add_data_func ("/segment-batch/unmap-fails/arena", "arena", test_sleep_unmap_fails);
  g_test_add_data_func ("/segment-batch/unmap-fails/cache-arena", "cache>arena",
                        test_sleep_unmap_fails);
  g_test_add_data_func ("/segment-batch/unmap-fails/vmm", "vmm", test_sleep_unmap_fails);
  g_test_add_data_func ("/segment-batch/unmap-fails/cache-vmm", "cache>vmm",
                        test_sleep_unmap_fails);
  return g_test_run ();
}

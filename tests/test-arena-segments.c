/* test-arena-segments.c: the segments of the `arena` kind (each mapped granule is one) against
 * the fake driver (suite fake) and the real one (suite gpu): the events of granules created,
 * moved (about to be unmapped at the old place, then mapped at the new one, in that order) and
 * given back, memres_lookup() of bytes of a buffer that spans granules (the granule's base and
 * the offset in it), a subscriber that allocates from the arena inside its callback, granules
 * taken while their "about to be unmapped" events are delivered, and the snapshot's blocks of
 * slabs whose extent ends past their last block. The
 * fault sweep of tests/test-arena.c holds the index to the mapped granules after every failure. */
#include "testutil.h"

#include "arena-check.h"

#include "segment-check.h"

/* Whether recorded events @from.. are @event for exactly the granules at @base + i * @g, i in
 * [0, @n), in any order. */
static void
assert_granule_events (Recorder *r, guint from, MemresResource *mr, MemresSegmentEvent event,
                       guint64 base, gsize g, guint n)
{
  g_autofree gboolean *seen = g_new0 (gboolean, n);

  g_assert_cmpuint (r->recs->len, ==, from + n);
  for (guint i = from; i < from + n; i++)
    {
      const Rec *rec = &g_array_index (r->recs, Rec, i);
      guint k = (guint) ((rec->seg.base - base) / g);

      g_assert_true (rec->mr == mr);
      g_assert_cmpint (rec->event, ==, event);
      g_assert_cmpuint (rec->seg.base, >=, base);
      g_assert_cmpuint (k, <, n);
      g_assert_cmphex (rec->seg.base, ==, base + k * g);
      g_assert_cmpuint (rec->seg.length, ==, g);
      g_assert_cmpint (rec->seg.device, ==, 0);
      g_assert_false (seen[k]);
      seen[k] = TRUE;
    }
}

/* A buffer of 2 granules and 1000 bytes: three granules mapped, in address order, each a
 * segment; its bytes found in their granule at their offset; a close keeps them (the range is
 * tagged with its stream); trim tells each one about to be unmapped, and then none is found. */
static void
test_events (void)
{
  g_autoptr (MemresResource) mr = NULL;
  Recorder *r;
  MemresBuffer *buf;
  guint64 a;
  guint id;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  g_assert_true (memres_kind_get_flags (memres_resource_get_kind (mr)) & MEMRES_KIND_SEGMENTS);
  g = (gsize) counter (mr, "granularity");
  r = recorder_new ();
  id = subscribe (mr, r);
  g_assert_cmpuint (r->recs->len, ==, 0);

  buf = mt_alloc_ok (mr, 2 * g + 1000, NULL);
  a = memres_buffer_get_address (buf);
  g_assert_cmpuint (a % g, ==, 0); /* the first extent of an empty arena: its base */
  g_assert_cmpuint (r->recs->len, ==, 3);
  for (guint i = 0; i < 3; i++)
    assert_rec (r, i, mr, MEMRES_SEGMENT_MAPPED, a + i * g, g, 0);
  g_assert_cmpuint (g_array_index (r->recs, Rec, 0).seg.handle_types, ==, 0);
  assert_found (a, mr, a, g);
  assert_found (a + g - 1, mr, a, g);
  assert_found (a + g, mr, a + g, g);
  assert_found (a + g + 7, mr, a + g, g);
  assert_found (a + 2 * g + 999, mr, a + 2 * g, g);
  assert_found (a + 3 * g - 1, mr, a + 2 * g, g);
  assert_missing (a + 3 * g);
  g_assert_cmpuint (count_segments (mr), ==, 3);

  mt_close_ok (buf, NULL);
  g_assert_cmpuint (r->recs->len, ==, 3);
  assert_found (a, mr, a, g);
  trim_ok (mr);
  assert_granule_events (r, 3, mr, MEMRES_SEGMENT_UNMAPPING, a, g, 3);
  assert_missing (a);
  assert_missing (a + g);
  assert_missing (a + 2 * g);
  g_assert_cmpuint (counter (mr, "granules_released"), ==, 3);
  g_assert_cmpuint (count_segments (mr), ==, 0);
  unsubscribe (mr, id);
  recorder_free (r);
}

/* A granule moved: x (one granule at the base) freed and settled, y (the next one) kept, then a
 * buffer of two granules placed after y: x's granule is told about to be unmapped at the base
 * before its memory is mapped at the new place (then a new one beside it), with one cuMemCreate
 * for the two. */
static void
test_move (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *y, *z;
  Recorder *r;
  guint64 a;
  long creates = 0;
  guint id;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  g = (gsize) counter (mr, "granularity");
  x = mt_alloc_ok (mr, g, NULL);
  y = mt_alloc_ok (mr, g, NULL);
  a = memres_buffer_get_address (x);
  g_assert_cmphex (memres_buffer_get_address (y), ==, a + g);
  mt_close_ok (x, NULL);
  r = recorder_new ();
  id = subscribe (mr, r);
  g_assert_cmpuint (r->recs->len, ==, 2); /* the replay: both granules */
  g_array_set_size (r->recs, 0);
  if (mt_driver_is_fake ())
    creates = mt_fake_call_count ("cuMemCreate");

  z = mt_alloc_ok (mr, 2 * g, (MemresStream) CU_STREAM_PER_THREAD);
  g_assert_cmphex (memres_buffer_get_address (z), ==, a + 2 * g);
  g_assert_cmpuint (r->recs->len, ==, 3);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_UNMAPPING, a, g, 0);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_MAPPED, a + 2 * g, g, 0);
  assert_rec (r, 2, mr, MEMRES_SEGMENT_MAPPED, a + 3 * g, g, 0);
  g_assert_cmpuint (counter (mr, "granules_remapped"), ==, 1);
  g_assert_cmpuint (counter (mr, "granules_created"), ==, 3);
  g_assert_cmpuint (counter (mr, "physical"), ==, 3 * g);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates + 1);
  assert_missing (a);
  assert_found (a + g + 1, mr, a + g, g);
  assert_found (a + 3 * g + 5, mr, a + 3 * g, g);
  mt_fill_byte_ok (z, 0x3c, NULL);
  mt_assert_bytes (z, 0x3c, NULL);

  mt_close_ok (z, (MemresStream) CU_STREAM_PER_THREAD);
  mt_close_ok (y, NULL);
  g_array_set_size (r->recs, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  /* finalize: the three granules left, each told */
  g_assert_cmpuint (r->recs->len, ==, 3);
  assert_missing (a + g);
  assert_missing (a + 2 * g);
  g_assert_cmpuint (id, !=, 0);
  g_assert_cmpint (r->destroyed, ==, 1); /* the subscription ends with the resource */
  recorder_free (r);
}

/* A subscriber that allocates from the arena itself, on the same thread, inside the callback of
 * a granule mapped: no deadlock, and its own granule's event comes after the one it handles. */
typedef struct
{
  MemresResource *mr;
  Recorder *rec;
  MemresBuffer *inner;
  gboolean entered;
  gsize g;
} Reentrant;

static void
reentrant_cb (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
              guint64 previous, gpointer data)
{
  Reentrant *re = data;

  record (mr, event, seg, previous, re->rec);
  if (event == MEMRES_SEGMENT_MAPPED && !re->entered)
    {
      re->entered = TRUE;
      re->inner = mt_alloc_ok (re->mr, re->g, NULL);
    }
}

static void
test_reentrant (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  Reentrant re = { 0 };
  MemresBuffer *outer;
  guint id;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  re.mr = mr;
  re.rec = recorder_new ();
  re.g = (gsize) counter (mr, "granularity");
  id = memres_resource_subscribe_segments (mr, reentrant_cb, &re, NULL, &error);
  g_assert_no_error (error);
  outer = mt_alloc_ok (mr, re.g, NULL);
  g_assert_nonnull (re.inner);
  g_assert_cmpuint (re.rec->recs->len, ==, 2);
  assert_rec (re.rec, 0, mr, MEMRES_SEGMENT_MAPPED, memres_buffer_get_address (outer), re.g, 0);
  assert_rec (re.rec, 1, mr, MEMRES_SEGMENT_MAPPED, memres_buffer_get_address (re.inner), re.g, 0);
  MT_CHECK (memres_resource_unsubscribe_segments (mr, id, &error));
  mt_close_ok (re.inner, NULL);
  mt_close_ok (outer, NULL);
  recorder_free (re.rec);
}

/* A slab's extent is its blocks rounded up to 512 bytes (ARENA_ALIGN): the bytes past its last
 * block are in the snapshot as one unused block, so that every segment's blocks add up to its
 * length (snapshot_adds_up()). Slabs of five classes of the default 256 KiB slab: 768, 2304 and
 * 2816 bytes (341, 113 and 93 blocks, an odd number of an odd multiple of 256 bytes) leave 256
 * bytes each, 1280 and 4096 bytes (204 and 64 blocks) none; a block freed, then all of them (the
 * slabs kept, their blocks free), change neither. */
static void
test_slab_tails (void)
{
  static const gsize sizes[] = { 768, 1280, 2304, 2816, 4096 };
  MemresBuffer *bufs[G_N_ELEMENTS (sizes)];
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  FakeCudaCounts base;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("arena");
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    bufs[i] = mt_alloc_ok (mr, sizes[i], NULL);
  g_assert_cmpuint (snapshot_adds_up (mr, 0), ==, 3 * 256);
  mt_close_ok (bufs[0], NULL);
  g_assert_cmpuint (snapshot_adds_up (mr, 0), ==, 3 * 256);
  for (guint i = 1; i < G_N_ELEMENTS (sizes); i++)
    mt_close_ok (bufs[i], NULL);
  g_assert_cmpuint (snapshot_adds_up (mr, 0), ==, 3 * 256);
  trim_ok (mr);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* Granules taken while their "about to be unmapped" events are delivered. A trim pins idle
 * granules, queues their events and drops the lock to deliver them: an allocation meanwhile
 * (here a subscriber's, on the same thread, inside the first of those callbacks) may take bytes
 * of them, and then they stay mapped (told mapped again). Until then their segments are on their
 * way out of the index, so nothing may raise an event of its own for them: a resize that
 * would move their memory (a remap: "about to be unmapped" again) copies instead, and a
 * placement that would lend them to a stream (their old address retired, then reaped:
 * "about to be unmapped" again) creates memory instead. Either event was refused by the core
 * ("no segment at …"), the arena's warning: what killed one of ten concurrent peers-fake runs on
 * the H100. After the trim every granule with memory is a segment, the buffers' bytes intact. */
typedef struct
{
  MemresResource *mr;
  MemresStream stream;
  gsize g;
  gboolean lend; /* lend instead of resize */
  gboolean trim; /* shrink in place and trim again instead */
  gboolean entered;
  MemresBuffer *taken, *lent;
} Taker;

static void
taker_cb (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg, guint64 previous,
          gpointer data)
{
  Taker *t = data;
  g_autoptr (GError) error = NULL;
  MtStreamHold *hold;

  if (event != MEMRES_SEGMENT_UNMAPPING || t->entered)
    return;
  t->entered = TRUE;
  /* the two pinned granules: the only free bytes with memory */
  t->taken = mt_alloc_ok (t->mr, 2 * t->g, t->stream);
  mt_write_pattern (t->taken, 0, 2 * t->g, 38, t->stream);
  if (t->trim)
    {
      /* its second granule freed by a shrink in place (held by the pin alone again), then a
       * trim inside the trim: neither pinned granule is idle, so it raises no event of its own */
      MT_CHECK (memres_buffer_resize (t->taken, t->g, t->stream, &error));
      mt_sync_ok (t->stream);
      trim_ok (t->mr);
      return;
    }
  if (!t->lend)
    {
      /* w follows: no growing in place */
      MT_CHECK (memres_buffer_resize (t->taken, 4 * t->g, t->stream, &error));
      return;
    }
  /* freed on the stream while it is held (the free's event not done), then a larger buffer on
   * it: its own free bytes would be lent, and their old address reaped once the stream is past
   * them, at the next allocation */
  hold = mt_stream_hold (t->stream);
  mt_close_ok (g_steal_pointer (&t->taken), t->stream);
  t->lent = mt_alloc_ok (t->mr, 3 * t->g, t->stream);
  mt_stream_release (hold);
  t->taken = mt_alloc_ok (t->mr, t->g, t->stream);
}

/* Each of the @n granules of @g bytes from @base is a segment of @mr. */
static void
assert_granules_found (MemresResource *mr, guint64 base, guint n, gsize g)
{
  for (guint i = 0; i < n; i++)
    assert_found (base + i * g + g / 2, mr, base + i * g, g);
}

static void
taken_while_unmapping (gboolean lend, gboolean trim)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  Taker t = { 0 };
  MemresBuffer *x, *w;
  CUstream s;
  guint64 a;
  guint id;

  if (lend ? !mt_hazard_begin () : !mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  s = mt_stream_new_on (0);
  t.mr = mr;
  t.stream = (MemresStream) s;
  t.g = gran (mr);
  t.lend = lend;
  t.trim = trim;
  x = mt_alloc_ok (mr, 2 * t.g, NULL);
  w = mt_alloc_ok (mr, t.g, NULL);
  a = memres_buffer_get_address (x);
  g_assert_cmphex (memres_buffer_get_address (w), ==, a + 2 * t.g);
  mt_close_ok (x, NULL);
  id = memres_resource_subscribe_segments (mr, taker_cb, &t, NULL, &error);
  g_assert_no_error (error);

  trim_ok (mr);
  g_assert_true (t.entered);
  /* the pinned granules kept their memory: taken meanwhile (then freed, or copied away) */
  g_assert_cmpuint (counter (mr, "granules_lent"), ==, 0);
  g_assert_cmpuint (counter (mr, "granules_reaped"), ==, 0);
  if (!trim)
    assert_granules_found (mr, a, 3, t.g);
  if (trim)
    {
      /* the first granule kept for the buffer, its bytes; the second, its free bytes settled by
       * the inner trim (held by the pin alone), unmapped by the outer one, once */
      g_assert_cmphex (memres_buffer_get_address (t.taken), ==, a);
      g_assert_cmpuint (memres_buffer_get_size (t.taken), ==, t.g);
      assert_granules_found (mr, a, 1, t.g);
      assert_granules_found (mr, a + 2 * t.g, 1, t.g);
      mt_check_pattern (t.taken, 0, t.g, 38, t.stream);
      assert_missing (a + t.g + t.g / 2);
      g_assert_cmpuint (counter (mr, "physical"), ==, 2 * t.g);
      mt_close_ok (t.taken, t.stream);
    }
  else if (lend)
    {
      g_assert_nonnull (t.lent);
      assert_granules_found (mr, memres_buffer_get_address (t.lent), 3, t.g);
      g_assert_cmphex (memres_buffer_get_address (t.taken), ==, a); /* the stream's own free */
      mt_close_ok (t.lent, t.stream);
      mt_close_ok (t.taken, t.stream);
    }
  else
    {
      g_assert_cmphex (memres_buffer_get_address (t.taken), !=, a); /* copied, not grown */
      assert_granules_found (mr, memres_buffer_get_address (t.taken), 4, t.g);
      mt_check_pattern (t.taken, 0, 2 * t.g, 38, t.stream);
      mt_close_ok (t.taken, t.stream);
    }
  /* every granule with memory is a segment */
  g_assert_cmpuint (count_segments (mr) * t.g, ==, counter (mr, "physical"));
  unsubscribe (mr, id);
  mt_close_ok (w, NULL);
  mt_sync_ok (t.stream);
  trim_ok (mr);
  g_assert_cmpuint (count_segments (mr), ==, 0);
  mt_stream_free (s);
  if (lend)
    mt_hazard_end ();
}

static void
test_taken_resize (void)
{
  taken_while_unmapping (FALSE, FALSE);
}

static void
test_taken_lend (void)
{
  taken_while_unmapping (TRUE, FALSE);
}

static void
test_taken_trim (void)
{
  taken_while_unmapping (FALSE, TRUE);
}

/* Inside the first "about to be unmapped" callback of a sleep (arena_granules_sleep(), parts.lock
 * dropped; its granules are not pinned but held by sleeping bytes alone): an allocation under the
 * sleeping tag (refused or served), a trim, and an untagged buffer of a granule written and
 * closed. None raises a second event for the sleeping granules: after the sleep every granule
 * with memory is a segment, and the wake gives the buffer its bytes back. */
typedef struct
{
  MemresResource *mr;
  gsize g;
  gboolean entered;
  gboolean tagged_served;
} Sleeper;

static void
sleeper_cb (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
            guint64 previous, gpointer data)
{
  Sleeper *t = data;
  g_autoptr (GError) error = NULL;
  MemresBuffer *b;

  if (event != MEMRES_SEGMENT_UNMAPPING || t->entered)
    return;
  t->entered = TRUE;
  /* the sleeping tag's free bytes in its last granule */
  g_assert_true (memres_tag_push ("bm-sleeper", NULL));
  b = memres_resource_allocate (t->mr, t->g / 4, NULL, &error);
  g_assert_true (memres_tag_pop ("bm-sleeper", NULL));
  if (b != NULL)
    {
      t->tagged_served = TRUE;
      mt_write_pattern (b, 0, t->g / 4, 44, NULL);
      mt_close_ok (b, NULL);
    }
  g_clear_error (&error);
  trim_ok (t->mr);
  b = mt_alloc_ok (t->mr, t->g, NULL);
  mt_write_pattern (b, 0, t->g, 45, NULL);
  mt_check_pattern (b, 0, t->g, 45, NULL);
  mt_close_ok (b, NULL);
}

static void
test_taken_sleep (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresSleepPolicy) policy = NULL;
  g_autoptr (GError) error = NULL;
  Sleeper t = { 0 };
  MemresBuffer *x, *w;
  guint id;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  t.mr = mr;
  t.g = gran (mr);
  g_assert_true (memres_tag_push ("bm-sleeper", NULL));
  x = mt_alloc_ok (mr, 2 * t.g + t.g / 2, NULL);
  g_assert_true (memres_tag_pop ("bm-sleeper", NULL));
  w = mt_alloc_ok (mr, t.g, NULL);
  mt_write_pattern (x, 0, memres_buffer_get_size (x), 43, NULL);
  mt_sync_ok (NULL);
  id = memres_resource_subscribe_segments (mr, sleeper_cb, &t, NULL, &error);
  g_assert_no_error (error);
  policy = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, &error);
  g_assert_no_error (error);

  g_assert_true (memres_resource_sleep (mr, "bm-sleeper", policy, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (t.entered);
  g_test_message ("an allocation under the sleeping tag inside the callback: %s",
                  t.tagged_served ? "served" : "refused");
  g_assert_cmpuint (count_segments (mr) * t.g, ==, counter (mr, "physical"));
  unsubscribe (mr, id);
  g_assert_true (memres_resource_wake (mr, "bm-sleeper", NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (count_segments (mr) * t.g, ==, counter (mr, "physical"));
  mt_check_pattern (x, 0, memres_buffer_get_size (x), 43, NULL);
  mt_close_ok (x, NULL);
  mt_close_ok (w, NULL);
  mt_sync_ok (NULL);
  trim_ok (mr);
  g_assert_cmpuint (count_segments (mr), ==, 0);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/arena/segments/events", test_events);
  g_test_add_func ("/arena/segments/move", test_move);
  g_test_add_func ("/arena/segments/reentrant", test_reentrant);
  g_test_add_func ("/arena/segments/slab-tails", test_slab_tails);
  g_test_add_func ("/arena/segments/taken-while-unmapping/resize", test_taken_resize);
  g_test_add_func ("/arena/segments/taken-while-unmapping/lend", test_taken_lend);
  g_test_add_func ("/arena/segments/taken-while-unmapping/trim", test_taken_trim);
  g_test_add_func ("/arena/segments/taken-while-unmapping/sleep", test_taken_sleep);
  return g_test_run ();
}

/* test-arena-park.c: the `arena` kind's parked large closes (option park=true,
 * plugins/arena/arena-park.c; suite fake): a closed extent taken back at the same address by the
 * next allocation of its size on its stream with no driver call, the statistics exact while it is
 * parked (not used, still reserved); a placement of another size flushes it into the heap first,
 * where it serves without new memory (in place, or lent to a new address); another stream never
 * gets it while the closing stream's work is queued, and the closing stream gets it back after the
 * flush. */
#include "testutil.h"

#include "arena-check.h"

#define MiB ((gsize) 1 << 20)

/* The driver calls that touch memory or events, summed (fake). */
static long
memory_calls (void)
{
  return mt_fake_call_count ("cuMemCreate") + mt_fake_call_count ("cuMemMap")
         + mt_fake_call_count ("cuMemUnmap") + mt_fake_call_count ("cuMemSetAccess")
         + mt_fake_call_count ("cuMemRelease") + mt_fake_call_count ("cuEventQuery")
         + mt_fake_call_count ("cuEventRecord");
}

/* Closed on the legacy stream and allocated again at its size: the same address, no driver
 * call; used drops at the close and comes back, reserved stays. */
static void
test_park_reuse (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *y, *z;
  guint64 at, reserved;
  long calls;

  if (!mt_require_fake ("the driver calls are counted by the fake"))
    return;
  mr = mt_new_ok ("arena:park=true");
  x = mt_alloc_ok (mr, 3 * MiB + 100, NULL);
  at = memres_buffer_get_address (x);
  mt_fill_byte_ok (x, 0x5a, NULL);
  reserved = stats_ok (mr).reserved_current;
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 3 * MiB + 512);
  mt_close_ok (x, NULL);
  g_assert_cmpuint (counter (mr, "parked"), ==, 1);
  g_assert_cmpuint (counter (mr, "parked_bytes"), ==, 3 * MiB + 512);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 0);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, reserved);
  calls = memory_calls ();
  y = mt_alloc_ok (mr, 3 * MiB + 1, NULL); /* the same extent: rounded to 512 bytes */
  g_assert_cmpint (memory_calls (), ==, calls);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, at);
  g_assert_cmpuint (counter (mr, "park_hits"), ==, 1);
  g_assert_cmpuint (counter (mr, "parked"), ==, 0);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 3 * MiB + 512);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, reserved);
  /* another size: not parked, placed */
  z = mt_alloc_ok (mr, 5 * MiB, NULL);
  g_assert_cmpuint (counter (mr, "park_hits"), ==, 1);
  mt_close_ok (y, NULL);
  mt_close_ok (z, NULL);
  g_assert_cmpuint (counter (mr, "parked"), ==, 2);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 0);
  /* a snapshot shows them as pending blocks and leaves them parked: its blocks add up to
   * reserved, none used, and the next allocation of y's size is still a park hit */
  snapshot_adds_up (mr, 0);
  {
    g_autofree char *doc = memres_resource_snapshot (mr, NULL);
    g_autofree char *y_block
        = g_strdup_printf ("\"address\": \"0x%" G_GINT64_MODIFIER
                           "x\",\\s*\"size\": %" G_GUINT64_FORMAT ",[^}]*\"state\": "
                           "\"pending\"",
                           at, (guint64) (3 * MiB + 512));

    g_assert_true (g_regex_match_simple (y_block, doc, 0, 0));
  }
  g_assert_cmpuint (counter (mr, "parked"), ==, 2);
  g_assert_cmpuint (counter (mr, "park_flushes"), ==, 0);
  calls = memory_calls ();
  y = mt_alloc_ok (mr, 3 * MiB + 1, NULL);
  g_assert_cmpint (memory_calls (), ==, calls);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, at);
  g_assert_cmpuint (counter (mr, "park_hits"), ==, 2);
  mt_close_ok (y, NULL);
  g_assert_cmpuint (counter (mr, "parked"), ==, 2);
  /* trim gives everything back */
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
}

/* A stream held (the device behind): x parked on it; an allocation of another size on the same
 * stream flushes x into the heap and is placed in x's free bytes, with no memory created. */
static void
test_park_flush_reuse (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *y;
  MtStreamHold *hold;
  MemresStream s;
  long creates;
  guint64 at;
  gsize g;

  if (!mt_hazard_begin ())
    return;
  s = mt_stream_new_on (0);
  mr = mt_new_ok ("arena:park=true");
  g = gran (mr);
  x = mt_alloc_ok (mr, 4 * g, s);
  at = memres_buffer_get_address (x);
  hold = mt_stream_hold (s);
  mt_fill_byte_ok (x, 0x11, s);
  mt_close_ok (x, s);
  g_assert_cmpuint (counter (mr, "parked"), ==, 1);
  creates = mt_fake_call_count ("cuMemCreate");
  y = mt_alloc_ok (mr, 2 * g, s);
  g_assert_cmpuint (counter (mr, "park_flushes"), ==, 1);
  g_assert_cmpuint (counter (mr, "parked"), ==, 0);
  g_assert_cmpuint (memres_buffer_get_address (y), >=, at);
  g_assert_cmpuint (memres_buffer_get_address (y) + 2 * g, <=, at + 4 * g);
  g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 4 * g);
  mt_fill_byte_ok (y, 0x22, s);
  mt_stream_release (hold);
  mt_assert_bytes (y, 0x22, s);
  mt_close_ok (y, s);
  mt_sync_ok (s);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s);
  mt_hazard_end ();
}

/* Memory short for a new size: x (two granules) parked on a held stream S behind w, y (on S,
 * too big for x's hole) flushes x into the heap and gets x's two granules lent (mapped at a
 * second address), nothing created, as without parking (test-arena.c, lent_run()). */
static void
test_park_flush_lend (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *w, *y;
  MtStreamHold *hold;
  MemresStream s;
  long creates;
  guint64 at;
  gsize g;

  if (!mt_hazard_begin ())
    return;
  s = mt_stream_new_on (0);
  mr = mt_new_ok ("arena:park=true");
  g = gran (mr);
  x = mt_alloc_ok (mr, 2 * g, s);
  at = memres_buffer_get_address (x);
  w = mt_alloc_ok (mr, g + g / 2, s);
  g_assert_cmpuint (memres_buffer_get_address (w), ==, at + 2 * g);
  mt_sync_ok (s);
  hold = mt_stream_hold (s);
  mt_fill_byte_ok (x, 0xaa, s);
  mt_close_ok (x, s);
  g_assert_cmpuint (counter (mr, "parked"), ==, 1);
  creates = mt_fake_call_count ("cuMemCreate");
  y = mt_alloc_ok (mr, 2 * g + g / 4, s);
  g_assert_cmpuint (counter (mr, "parked"), ==, 0);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, at + 3 * g + g / 2);
  g_assert_cmpuint (counter (mr, "granules_lent"), ==, 2);
  g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates);
  g_assert_cmpuint (stats_ok (mr).reserved_high, ==, 4 * g);
  mt_fill_byte_ok (y, 0xcc, s);
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xcc, s);
  mt_close_ok (y, s);
  mt_close_ok (w, s);
  mt_sync_ok (s);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s);
  mt_hazard_end ();
}

/* x parked on A while A is held: B's allocation of its size gets other memory (x's bytes are
 * A's until A is past the close), B's bytes stay B's after A's late fill; A then gets x's extent
 * back from the heap. */
static void
test_park_streams (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *y, *z;
  MtStreamHold *hold;
  MemresStream a, b;
  guint64 at;

  if (!mt_hazard_begin ())
    return;
  a = mt_stream_new_on (0);
  b = mt_stream_new_on (0);
  mr = mt_new_ok ("arena:park=true");
  x = mt_alloc_ok (mr, 4 * MiB, a);
  at = memres_buffer_get_address (x);
  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xaa, a);
  mt_close_ok (x, a);
  y = mt_alloc_ok (mr, 4 * MiB, b);
  g_assert_cmpuint (memres_buffer_get_address (y), !=, at);
  g_assert_cmpuint (counter (mr, "park_hits"), ==, 0);
  g_assert_cmpuint (counter (mr, "granules_lent"), ==, 0);
  z = mt_alloc_ok (mr, 4 * MiB, a);
  g_assert_cmpuint (memres_buffer_get_address (z), ==, at);
  mt_fill_byte_ok (y, 0xbb, b);
  mt_fill_byte_ok (z, 0xcc, a);
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, b);
  mt_assert_bytes (z, 0xcc, a);
  mt_close_ok (y, b);
  mt_close_ok (z, a);
  mt_sync_ok (a);
  mt_sync_ok (b);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (a);
  mt_stream_free (b);
  mt_hazard_end ();
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/arena/park/reuse", test_park_reuse);
  g_test_add_func ("/arena/park/flush-reuse", test_park_flush_reuse);
  g_test_add_func ("/arena/park/flush-lend", test_park_flush_lend);
  g_test_add_func ("/arena/park/streams", test_park_streams);
  return g_test_run ();
}

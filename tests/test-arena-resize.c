/* test-arena-resize.c: memres_buffer_resize() on `arena` buffers against the fake driver (suite
 * fake) and the real one (suite gpu): a large buffer grown in place into the free range after
 * it and shrunk in place (its tail free again, reused at once on its stream), a move when the
 * range after it is taken (the first bytes kept, the old range free), a block of the size
 * classes kept in its class and moved across classes and to and from the large ones. The fault
 * sweep of tests/test-arena.c fails every driver call of a grow in place and of a move. */
#include "testutil.h"

#include "arena-check.h"

#define KiB ((gsize) 1024)

static void
resize_ok (MemresBuffer *buf, gsize size, MemresStream stream)
{
  g_autoptr (GError) error = NULL;

  MT_CHECK (memres_buffer_resize (buf, size, stream, &error));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
}

static void
test_in_place (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *b;
  guint64 at;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  g_assert_true (memres_resource_get_flags (mr) & MEMRES_MEMORY_RESIZABLE);
  g = gran (mr);
  a = mt_alloc_ok (mr, g + 1000, NULL);
  at = memres_buffer_get_address (a);
  mt_write_pattern (a, 0, g + 1000, 7, NULL);
  g_assert_cmpuint (counter (mr, "physical"), ==, 2 * g);

  /* grown in place: two granules more mapped, the first bytes as they were */
  resize_ok (a, 4 * g, NULL);
  g_assert_cmphex (memres_buffer_get_address (a), ==, at);
  mt_check_pattern (a, 0, g + 1000, 7, NULL);
  g_assert_cmpuint (counter (mr, "physical"), ==, 4 * g);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 4 * g);
  mt_fill_byte_ok (a, 0x5e, NULL);
  mt_assert_bytes (a, 0x5e, NULL);

  /* shrunk in place: its tail is free, and reused at once on the same stream */
  resize_ok (a, 2 * g, NULL);
  g_assert_cmphex (memres_buffer_get_address (a), ==, at);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 2 * g);
  mt_assert_bytes (a, 0x5e, NULL);
  b = mt_alloc_ok (mr, 2 * g, NULL);
  g_assert_cmphex (memres_buffer_get_address (b), ==, at + 2 * g);
  g_assert_cmpuint (counter (mr, "physical"), ==, 4 * g);
  g_assert_cmpuint (counter (mr, "granules_created"), ==, 4);

  /* by 512-byte rounding only: in place, no driver call */
  resize_ok (a, 2 * g - 100, NULL);
  g_assert_cmphex (memres_buffer_get_address (a), ==, at);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
}

static void
test_move (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *blocker, *c;
  guint64 at;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  g = gran (mr);
  a = mt_alloc_ok (mr, g, NULL);
  blocker = mt_alloc_ok (mr, g, NULL);
  at = memres_buffer_get_address (a);
  g_assert_cmphex (memres_buffer_get_address (blocker), ==, at + g);
  mt_write_pattern (a, 0, g, 11, NULL);

  resize_ok (a, 3 * g, NULL);
  g_assert_cmphex (memres_buffer_get_address (a), !=, at);
  mt_check_pattern (a, 0, g, 11, NULL);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 4 * g);
  /* the old range is free: the next buffer of its size on the same stream takes it */
  c = mt_alloc_ok (mr, g, NULL);
  g_assert_cmphex (memres_buffer_get_address (c), ==, at);
  mt_close_ok (c, NULL);
  mt_close_ok (a, NULL);
  mt_close_ok (blocker, NULL);
}

/* A move that cannot grow in place remaps the buffer's whole granules instead of copying them:
 * the new place's whole granules get the old ones' memory (granules_moved), only the granules at
 * its ends are new (with their bytes copied), and the old place keeps only the granule it shares
 * with the buffer after it. */
static void
test_remap (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *blocker;
  guint64 at, created, physical;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  g = gran (mr);
  a = mt_alloc_ok (mr, 3 * g + 1000, NULL);
  blocker = mt_alloc_ok (mr, g, NULL);
  at = memres_buffer_get_address (a);
  g_assert_cmpuint (at % g, ==, 0);
  g_assert_cmphex (memres_buffer_get_address (blocker), ==, at + 3 * g + 1024);
  mt_write_pattern (a, 0, 3 * g + 1000, 13, NULL);
  mt_fill_byte_ok (blocker, 0x42, NULL);
  created = counter (mr, "granules_created");
  physical = counter (mr, "physical");

  resize_ok (a, 6 * g, NULL);
  g_assert_cmphex (memres_buffer_get_address (a), !=, at);
  g_assert_cmpuint (memres_buffer_get_address (a) % g, ==, 0);
  mt_check_pattern (a, 0, 3 * g + 1000, 13, NULL);
  mt_assert_bytes (blocker, 0x42, NULL);
  g_assert_cmpuint (counter (mr, "granules_moved"), ==, 3);
  /* three new granules (6 for the buffer, 3 of them moved), none for the old place */
  g_assert_cmpuint (counter (mr, "granules_created") - created, ==, 3);
  g_assert_cmpuint (counter (mr, "physical"), ==, physical + 3 * g);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 6 * g + g);
  mt_fill_byte_ok (a, 0x17, NULL);
  mt_assert_bytes (a, 0x17, NULL);
  mt_assert_bytes (blocker, 0x42, NULL);
  mt_close_ok (a, NULL);
  mt_close_ok (blocker, NULL);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
}

/* Blocks: kept while the class holds the new size; else moved, to another class or to a large
 * buffer and back, the first bytes kept each time. */
static void
test_small (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a;
  guint64 at;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  a = mt_alloc_ok (mr, 1000, NULL);
  at = memres_buffer_get_address (a);
  mt_write_pattern (a, 0, 1000, 3, NULL);
  resize_ok (a, 1024, NULL); /* the class of 1000 bytes is 1024 */
  g_assert_cmphex (memres_buffer_get_address (a), ==, at);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 1024);
  resize_ok (a, 5000, NULL);
  g_assert_cmphex (memres_buffer_get_address (a), !=, at);
  mt_check_pattern (a, 0, 1000, 3, NULL);
  mt_write_pattern (a, 0, 5000, 4, NULL);
  resize_ok (a, 200 * KiB, NULL); /* above max_block: a large buffer */
  mt_check_pattern (a, 0, 5000, 4, NULL);
  g_assert_cmpuint (counter (mr, "large_allocations"), ==, 1);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 200 * KiB);
  resize_ok (a, 100, NULL);
  mt_check_pattern (a, 0, 100, 4, NULL);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 256); /* the smallest class */
  mt_close_ok (a, NULL);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 0);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/arena/resize/in-place", test_in_place);
  g_test_add_func ("/arena/resize/move", test_move);
  g_test_add_func ("/arena/resize/remap", test_remap);
  g_test_add_func ("/arena/resize/small", test_small);
  return g_test_run ();
}

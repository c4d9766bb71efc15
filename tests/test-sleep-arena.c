/* test-sleep-arena.c: sleep and wake of the `arena` kind and of `cache>arena`: addresses,
 * shared granules, closing asleep, granules given back, slabs, statistics while asleep, segment
 * events, the refusal of an exported buffer. Runs against the fake driver (suite fake) and the
 * real one (suite gpu). */
#include <memres/memres.h>

#include "testutil.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil-sleep.h"

/* --- arena ------------------------------------------------------------------------------------ */

/* arena: the granules of the tag's buffers are released (the fake's live handles), its block of
 * the size classes too (its slab and granule serve that tag alone), addresses kept, contents
 * restored by backup; another tag's buffers are untouched. */
static void
test_arena_addresses (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  MemresResource *mr;
  MemresBuffer *kv[3], *w;
  guint64 addr[3];
  int before, asleep;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  w = alloc_tagged (mr, "sl-aw", 4 * MiB);
  kv[0] = alloc_tagged (mr, "sl-akv", 4 * MiB);
  kv[1] = alloc_tagged (mr, "sl-akv", 6 * MiB);
  kv[2] = alloc_tagged (mr, "sl-akv", 4096);
  for (int i = 0; i < 3; i++)
    {
      addr[i] = memres_buffer_get_address (kv[i]);
      mt_write_pattern (kv[i], 0, memres_buffer_get_size (kv[i]), 70 + i, NULL);
    }
  mt_fill_byte_ok (w, 0x3c, NULL);
  before = live_handles ();
  sleep_ok (mr, "sl-akv", policy);
  asleep = live_handles ();
  if (mt_driver_is_fake ())
    g_assert_cmpint (asleep, ==, before - 6); /* 2 + 3 granules of 2 MiB, the slab's 1 */
  for (int i = 0; i < 3; i++)
    {
      g_assert_true (memres_buffer_is_asleep (kv[i]));
      g_assert_cmpuint (memres_buffer_get_address (kv[i]), ==, addr[i]);
    }
  g_assert_false (memres_buffer_is_asleep (w));
  mt_assert_bytes (w, 0x3c, NULL);
  wake_ok (mr, "sl-akv");
  g_assert_cmpint (live_handles (), ==, before);
  for (int i = 0; i < 3; i++)
    {
      g_assert_cmpuint (memres_buffer_get_address (kv[i]), ==, addr[i]);
      mt_check_pattern (kv[i], 0, memres_buffer_get_size (kv[i]), 70 + i, NULL);
    }
  /* twice, discarding */
  sleep_ok (mr, "sl-akv", NULL);
  wake_ok (mr, "sl-akv");
  mt_fill_byte_ok (kv[1], 9, NULL);
  mt_assert_bytes (kv[1], 9, NULL);
  for (int i = 0; i < 3; i++)
    mt_close_ok (kv[i], NULL);
  mt_close_ok (w, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena: the free bytes of a granule a sleep released are not handed out to another tag while
 * asleep (a granule serves one tag: the other tag's buffers go elsewhere, and the granule stays
 * without memory); the wake restores the sleeping buffer's bytes and leaves the other buffers'
 * untouched. */
static void
test_arena_shared_granule (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  MemresResource *mr;
  MemresBuffer *a, *others[8];
  guint64 last_granule;
  guint in_last = 0;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  policy = policy_new (MEMRES_SLEEP_BACKUP);
  a = alloc_tagged (mr, "sl-ash", 3 * MiB); /* a granule and a half */
  mt_write_pattern (a, 0, 3 * MiB, 81, NULL);
  last_granule = (memres_buffer_get_address (a) + 3 * MiB - 1) & ~(guint64) (2 * MiB - 1);
  sleep_ok (mr, "sl-ash", policy);
  /* enough of the other tag's buffers that some would fit in the free half granule */
  for (int i = 0; i < 8; i++)
    {
      guint64 at;

      others[i] = alloc_tagged (mr, "sl-ash-other", 256 * 1024);
      mt_write_pattern (others[i], 0, 256 * 1024, 90 + i, NULL);
      at = memres_buffer_get_address (others[i]);
      in_last += at >= last_granule && at < last_granule + 2 * MiB;
    }
  if (mt_driver_is_fake ()) /* the fake's granules are 2 MiB */
    g_assert_cmpuint (in_last, ==, 0);
  wake_ok (mr, "sl-ash");
  mt_check_pattern (a, 0, 3 * MiB, 81, NULL);
  for (int i = 0; i < 8; i++)
    {
      mt_check_pattern (others[i], 0, 256 * 1024, 90 + i, NULL);
      mt_close_ok (others[i], NULL);
    }
  /* asleep again with its neighbours gone, woken, closed */
  sleep_ok (mr, "sl-ash", policy);
  wake_ok (mr, "sl-ash");
  mt_check_pattern (a, 0, 3 * MiB, 81, NULL);
  mt_close_ok (a, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena and cache>arena: a sleeping buffer closed gives its address range back and nothing is
 * restored for it; the others wake with their bytes; the range is reused afterwards. */
static void
test_arena_close_asleep (void)
{
  static const char *const specs[] = { "arena", "cache:max_block=4MiB>arena" };
  g_autoptr (MemresSleepPolicy) policy = policy_new (MEMRES_SLEEP_BACKUP);

  if (!require_device ())
    return;
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    {
      MemresResource *mr;
      MemresBuffer *a, *b, *c, *d;
      FakeCudaCounts base;

      mt_counts_snapshot (&base);
      mr = new_ok (specs[k]);
      a = alloc_tagged (mr, "sl-aclose", 2 * MiB);
      b = alloc_tagged (mr, "sl-aclose", 6 * MiB);
      c = alloc_tagged (mr, "sl-aclose", 1 * MiB);
      mt_write_pattern (b, 0, 6 * MiB, 43, NULL);
      mt_write_pattern (c, 0, 1 * MiB, 44, NULL);
      sleep_ok (mr, "sl-aclose", policy);
      mt_close_ok (a, NULL);
      d = alloc_tagged (mr, "sl-aclose-other", 2 * MiB);
      mt_fill_byte_ok (d, 5, NULL);
      wake_ok (mr, "sl-aclose");
      mt_check_pattern (b, 0, 6 * MiB, 43, NULL);
      mt_check_pattern (c, 0, 1 * MiB, 44, NULL);
      mt_assert_bytes (d, 5, NULL);
      /* the resource's last reference dropped while its buffers sleep */
      sleep_ok (mr, "sl-aclose", policy);
      memres_resource_unref (mr);
      mt_close_ok (b, NULL);
      mt_close_ok (c, NULL);
      mt_close_ok (d, NULL);
      mt_assert_fake_counts_equal (&base);
    }
}

/* arena: "about to be unmapped" for each granule a sleep releases, "mapped" for each the wake
 * maps, each with the tag its granule serves; memres_lookup() finds nothing there meanwhile. An
 * untagged buffer's granule has no tag; so has a cache's chunk, and a tagged request over an
 * arena is the cache's segment of the buffer's tag (cache>arena). */
static void
test_arena_segments (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) cached = NULL;
  MemresBuffer *a, *plain, *c, *small;
  MemresLookupInfo info;

  if (!require_device ())
    return;
  mr = new_ok ("arena");
  a = alloc_tagged (mr, "sl-aseg", 6 * MiB);
  plain = alloc_tagged (mr, NULL, 3 * MiB);
  assert_sleep_segment_events (mr, "sl-aseg", &a, 1, 3, 6 * MiB);
  g_assert_true (memres_lookup (memres_buffer_get_pointer (plain), &info));
  g_assert_null (info.segment.tag);
  g_assert_cmpuint (info.segment.tag_id, ==, 0);
  mt_close_ok (a, NULL);
  mt_close_ok (plain, NULL);

  cached = new_ok ("cache>arena");
  c = alloc_tagged (cached, "sl-aseg", 6 * MiB);
  small = alloc_tagged (cached, NULL, 4096);
  assert_sleep_segment_events (cached, "sl-aseg", &c, 1, 1, 6 * MiB);
  g_assert_true (memres_lookup (memres_buffer_get_pointer (small), &info));
  g_assert_true (info.resource == cached); /* the cache's chunk */
  g_assert_null (info.segment.tag);
  mt_close_ok (c, NULL);
  mt_close_ok (small, NULL);
}

/* arena and cache>arena: a mixed workload (sizes 4 KiB to 64 MiB drawn log-uniformly from a fixed
 * seed, every other buffer tagged, interleaved with the untagged ones): its tag's sleep gives at
 * least 99 % of the slept bytes back (cuMemGetInfo), since its granules and slabs serve it alone;
 * the wake keeps the addresses and the bytes, and nothing is left over at the end. */
static void
test_arena_given_back (gconstpointer spec)
{
  g_autoptr (GRand) rand = g_rand_new_with_seed (3438);
  MemresBuffer *bufs[240];
  guint64 addr[G_N_ELEMENTS (bufs)], slept = 0, before, given;
  MemresResource *mr;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok (spec);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      /* an octave of 4 KiB to 32 MiB, then a size in it: log-uniform by octaves */
      gsize octave = (gsize) 4096 << g_rand_int_range (rand, 0, 14);
      gsize size = octave + (gsize) g_rand_int_range (rand, 0, (gint32) octave);

      bufs[i] = alloc_tagged (mr, i % 2 ? "sl-gb" : NULL, size);
      addr[i] = memres_buffer_get_address (bufs[i]);
      if (i % 2)
        {
          slept += memres_buffer_get_size (bufs[i]);
          mt_write_pattern (bufs[i], 0, MIN (memres_buffer_get_size (bufs[i]), 64 * 1024), i, NULL);
        }
    }
  before = device_free_bytes ();
  sleep_ok (mr, "sl-gb", NULL);
  given = device_free_bytes () - before;
  g_test_message ("%s: slept %" G_GUINT64_FORMAT " bytes, given back %" G_GUINT64_FORMAT " (%.4f)",
                  (const char *) spec, slept, given, (double) given / (double) slept);
  if (mt_driver_is_fake ())
    g_assert_cmpfloat ((double) given / (double) slept, >=, 0.99);
  wake_ok (mr, "sl-gb");
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      g_assert_cmpuint (memres_buffer_get_address (bufs[i]), ==, addr[i]);
      mt_close_ok (bufs[i], NULL);
    }
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena: a tag's blocks of the size classes sleep with their slab (its granule released); closed
 * while asleep, the tag's last one gives its slabs back, so that after a wake that finds no
 * buffer, the tag's next blocks have memory under them (written and read back); a block of
 * another tag keeps its bytes throughout. */
static void
test_arena_slabs (void)
{
  MemresResource *mr;
  MemresBuffer *small[6], *other, *again;
  int before;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  other = alloc_tagged (mr, "sl-slab-other", 8192);
  mt_write_pattern (other, 0, 8192, 7, NULL);
  for (guint i = 0; i < G_N_ELEMENTS (small); i++)
    {
      small[i] = alloc_tagged (mr, "sl-slab", 8192);
      mt_write_pattern (small[i], 0, 8192, 20 + i, NULL);
    }
  before = live_handles ();
  sleep_ok (mr, "sl-slab", NULL);
  if (mt_driver_is_fake ())
    g_assert_cmpint (live_handles (), ==, before - 1); /* the tag's slab, one granule */
  mt_check_pattern (other, 0, 8192, 7, NULL);
  wake_ok (mr, "sl-slab");
  g_assert_cmpint (live_handles (), ==, before);
  sleep_ok (mr, "sl-slab", NULL);
  for (guint i = 0; i < G_N_ELEMENTS (small); i++)
    mt_close_ok (small[i], NULL);
  wake_ok (mr, "sl-slab"); /* no buffer left: nothing to map */
  again = alloc_tagged (mr, "sl-slab", 8192);
  mt_write_pattern (again, 0, 8192, 33, NULL);
  mt_check_pattern (again, 0, 8192, 33, NULL);
  mt_check_pattern (other, 0, 8192, 7, NULL);
  mt_close_ok (again, NULL);
  mt_close_ok (other, NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static MemresStats
stats_of (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresStats st;

  g_assert_true (memres_resource_get_stats (mr, &st, &error));
  g_assert_no_error (error);
  return st;
}

/* arena: the used bytes are exact while a tag sleeps: its free blocks, parked in their sleeping
 * slab, are not in use (before, during and after the sleep: the open blocks alone); one closed
 * while asleep leaves the used bytes at once; a large buffer stays used throughout. */
static void
test_arena_stats_asleep (void)
{
  MemresResource *mr;
  MemresBuffer *small[6], *large;
  FakeCudaCounts base;
  guint64 open_bytes;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("arena");
  for (guint i = 0; i < G_N_ELEMENTS (small); i++)
    small[i] = alloc_tagged (mr, "sl-stats", 8192);
  large = alloc_tagged (mr, "sl-stats", 96 * MiB);
  for (guint i = 3; i < G_N_ELEMENTS (small); i++)
    mt_close_ok (small[i], NULL); /* three free blocks in the tag's slab */
  open_bytes = 3 * memres_buffer_get_size (small[0]) + memres_buffer_get_size (large);
  g_assert_cmpuint (memres_buffer_get_size (small[0]), ==, 8192);
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  sleep_ok (mr, "sl-stats", NULL);
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  mt_close_ok (small[2], NULL); /* closed asleep: parked */
  open_bytes -= 8192;
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  wake_ok (mr, "sl-stats");
  g_assert_cmpuint (stats_of (mr).used_current, ==, open_bytes);
  for (guint i = 0; i < 2; i++)
    mt_close_ok (small[i], NULL);
  mt_close_ok (large, NULL);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* A tagged empty buffer grown by a resize: memory of its tag (counted under it by `stats`), in
 * its tag's list (a sleep takes it and the backup restores its bytes), closed to zero. */
static void
test_arena_resize_empty (void)
{
  g_autoptr (MemresSleepPolicy) backup = NULL;
  MemresTagCounts counts;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  FakeCudaCounts base;

  if (!require_device ())
    return;
  mt_counts_snapshot (&base);
  mr = new_ok ("stats>arena");
  buf = alloc_tagged (mr, "sl-grown", 0);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  MT_CHECK (memres_buffer_resize (buf, 3 * MiB, NULL, &error));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * MiB);
  mt_write_pattern (buf, 0, 3 * MiB, 21, NULL);
  MT_CHECK (memres_resource_get_tag_counts (mr, "sl-grown", &counts, &error));
  g_assert_cmpuint (counts.bytes_current, ==, 3 * MiB);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 3 * MiB);
  backup = policy_new (MEMRES_SLEEP_BACKUP);
  sleep_ok (mr, "sl-grown", backup);
  g_assert_true (memres_buffer_is_asleep (buf));
  wake_ok (mr, "sl-grown");
  g_assert_false (memres_buffer_is_asleep (buf));
  mt_check_pattern (buf, 0, 3 * MiB, 21, NULL);
  mt_close_ok (buf, NULL);
  MT_CHECK (memres_resource_get_tag_counts (mr, "sl-grown", &counts, &error));
  g_assert_cmpuint (counts.bytes_current, ==, 0);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  g_assert_true (memres_resource_trim (mr, 0, NULL));
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* arena:handle_type=posix_fd: a buffer with memory of its own is refused, exported or not */
static void
test_arena_refuse_own (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GBytes) bytes = NULL;
  g_autofree gint *fds = NULL;
  guint n_fds = 0;
  MemresBuffer *own, *large;

  if (!require_device ())
    return;
  mr = new_ok ("arena:handle_type=posix_fd,export_min=4MiB");
  own = alloc_tagged (mr, "sl-aown", 4 * MiB);
  large = alloc_tagged (mr, "sl-aown", 2 * MiB);
  mt_write_pattern (large, 0, 2 * MiB, 12, NULL);
  g_assert_false (memres_resource_sleep (mr, "sl-aown", NULL, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "handle_type=posix_fd"));
  g_clear_error (&error);
  g_assert_true (memres_buffer_export_message (own, &bytes, &fds, &n_fds, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < n_fds; i++)
    close (fds[i]);
  g_assert_false (memres_resource_sleep (mr, "sl-aown", NULL, NULL, &error));
  g_assert_error (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_SHARED);
  g_assert_nonnull (strstr (error->message, "exported to"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_is_asleep (own));
  g_assert_false (memres_buffer_is_asleep (large));
  mt_check_pattern (large, 0, 2 * MiB, 12, NULL);
  mt_close_ok (own, NULL);
  mt_close_ok (large, NULL);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_log_capture_init ();
  g_test_add_func ("/sleep/arena/addresses-and-handles", test_arena_addresses);
  g_test_add_func ("/sleep/arena/shared-granule", test_arena_shared_granule);
  g_test_add_func ("/sleep/arena/close-asleep", test_arena_close_asleep);
  g_test_add_data_func ("/sleep/arena/given-back", "arena", test_arena_given_back);
  g_test_add_data_func ("/sleep/arena/given-back-cache", "cache>arena", test_arena_given_back);
  g_test_add_func ("/sleep/arena/slabs", test_arena_slabs);
  g_test_add_func ("/sleep/arena/stats-asleep", test_arena_stats_asleep);
  g_test_add_func ("/sleep/arena/resize-empty", test_arena_resize_empty);
  g_test_add_data_func ("/sleep/arena/no-open-buffer", "arena", test_no_open_buffer);
  g_test_add_data_func ("/sleep/cache-arena/no-open-buffer", "cache>arena", test_no_open_buffer);
  g_test_add_func ("/sleep/arena/segments", test_arena_segments);
  g_test_add_func ("/sleep/arena/refuse-exported", test_arena_refuse_own);
  return g_test_run ();
}

/* test-vmm-resize.c: the `vmm` kind's resizes: growth in place, by one copy, within the
 * reservation and by move, shrinking by chunks. Runs against the fake driver (suite fake) and the
 * real one (suite gpu). */
#include "testutil.h"

#include <string.h>
#include "testutil-vmm.h"

/* --- growth -------------------------------------------------------------------------------- */

/* After a growth past the reservation: the fake always has the range after the buffer free, so
 * the buffer grew in place; the real driver takes the address only as a hint (cuda.h,
 * cuMemAddressReserve) and may place the range elsewhere (seen on the H200), and then the grow
 * moves. The caller checks that the bytes survived either way. */
static void
assert_grown_in_place (MemresBuffer *buf, guint64 address)
{
  if (mt_driver_is_fake ())
    g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  else if (memres_buffer_get_address (buf) != address)
    g_test_message ("the driver did not grant the range after the buffer: grown by move");
}

static void
test_grow_in_place (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, 2 * g);
  buf = allocate (mr, 3 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 3 * g, 1);

  resize (buf, 10 * g - 7);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 10 * g);
  assert_grown_in_place (buf, address);
  check_pattern (buf, 0, 3 * g, 1);
  write_pattern (buf, 3 * g, 7 * g, 2);

  address = memres_buffer_get_address (buf);
  resize (buf, 11 * g);
  assert_grown_in_place (buf, address);
  check_pattern (buf, 0, 3 * g, 1);
  check_pattern (buf, 3 * g, 7 * g, 2);
  write_pattern (buf, 0, 11 * g, 3);
  check_pattern (buf, 0, 11 * g, 3);

  /* the same size (after rounding) changes nothing */
  resize (buf, 11 * g - 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 11 * g);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* One copy over the whole of a buffer grown in place, across the boundary of its two
 * reservations: the address range is contiguous. */
static void
test_grow_one_copy (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree guint8 *data = NULL;
  MemresBuffer *buf;
  guint64 address;
  gboolean ok;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm");
  buf = allocate (mr, g);
  address = memres_buffer_get_address (buf);
  resize (buf, 3 * g);
  assert_grown_in_place (buf, address);
  data = g_malloc (3 * g);
  mt_fill_pattern (data, 3 * g, 20);
  ok = memres_buffer_write (buf, 0, data, 3 * g, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  memset (data, 0, 3 * g);
  ok = memres_buffer_read (buf, 0, data, 3 * g, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  mt_assert_pattern (data, 3 * g, 20);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A probe reservation after the buffer that the driver refuses with an error (rather than
 * placing it elsewhere) moves the buffer, as when the range is taken. */
static void
test_grow_probe_fails (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  if (!mt_require_fake ("failing the probe reservation needs the fake driver"))
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 2 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 2 * g, 21);

  mt_fake_fail_call ("cuMemAddressReserve", 1, CUDA_ERROR_INVALID_VALUE);
  resize (buf, 5 * g);
  mt_fake_reset_faults ();
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 5 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 2 * g, 21);
  write_pattern (buf, 2 * g, 3 * g, 22);
  check_pattern (buf, 0, 2 * g, 21);

  /* also with an out-of-memory answer, and when the move's own reservation then fails the
   * grow fails with that error and leaves the buffer as it was */
  address = memres_buffer_get_address (buf);
  mt_fake_fail_call ("cuMemAddressReserve", 1, CUDA_ERROR_OUT_OF_MEMORY);
  mt_fake_fail_call ("cuMemAddressReserve", 2, CUDA_ERROR_OUT_OF_MEMORY);
  {
    g_autoptr (GError) error = NULL;

    g_assert_false (memres_buffer_resize (buf, 8 * g, NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    g_assert_nonnull (strstr (error->message, "cuMemAddressReserve: CUDA_ERROR_OUT_OF_MEMORY"));
  }
  mt_fake_reset_faults ();
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 5 * g);
  check_pattern (buf, 0, 2 * g, 21);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A rollback whose driver call fails is warned about, except with CUDA_ERROR_DEINITIALIZED
 * (the driver shut down at process exit): then it is silent. In a subprocess (the warning is
 * fatal under g_test, and the failed rollback leaks a reservation). */
static void
test_rollback_deinitialized (void)
{
  if (!require_device ())
    return;
  if (!mt_require_fake ("failing the rollback needs the fake driver"))
    return;
  if (g_test_subprocess ())
    {
      g_autoptr (MemresResource) mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, gran ());
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = allocate (mr, 2 * gran ());
      const char *mode = g_getenv ("VMM_ROLLBACK_MODE");

      /* the grow in place fails at the access grant; its rollback frees the range it reserved */
      mt_fake_fail_call ("cuMemSetAccess", 1, CUDA_ERROR_OUT_OF_MEMORY);
      mt_fake_fail_call ("cuMemAddressFree", 1,
                         g_strcmp0 (mode, "deinit") == 0 ? CUDA_ERROR_DEINITIALIZED
                                                         : CUDA_ERROR_INVALID_VALUE);
      g_assert_false (memres_buffer_resize (buf, 5 * gran (), NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      mt_fake_reset_faults ();
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * gran ());
      close_buffer (buf);
      return;
    }
  g_setenv ("VMM_ROLLBACK_MODE", "fail", TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed ();
  g_test_trap_assert_stderr ("*vmm: rolling back a failure: cuMemAddressFree: "
                             "CUDA_ERROR_INVALID_VALUE*");
  g_setenv ("VMM_ROLLBACK_MODE", "deinit", TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("");
  g_unsetenv ("VMM_ROLLBACK_MODE");
}

/* With an up-front reservation a grow needs no new address range at all. */
static void
test_grow_within_reserve (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  long reserves = 0;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:reserve=%" G_GSIZE_FORMAT, 8 * g);
  buf = allocate (mr, g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, g, 4);
  /* a range after the reservation is taken: no matter */
  blocker.ptr = 0;
  blocker.size = g;
  g_assert_cmpint (drv->cuMemAddressReserve (&blocker.ptr, blocker.size, 0, address + 8 * g, 0), ==,
                   CUDA_SUCCESS);
  if (mt_driver_is_fake ())
    reserves = mt_fake_call_count ("cuMemAddressReserve");

  resize (buf, 8 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 8 * g);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAddressReserve"), ==, reserves);
  check_pattern (buf, 0, g, 4);
  write_pattern (buf, 0, 8 * g, 5);
  check_pattern (buf, 0, 8 * g, 5);

  close_buffer (buf);
  unblock (&blocker);
  mt_assert_fake_counts_equal (&base);
}

static void
test_grow_by_move (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, 2 * g);
  buf = allocate (mr, 5 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 5 * g, 6);
  blocker = block_after (buf);

  resize (buf, 9 * g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 9 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  g_assert_cmpuint (memres_buffer_get_address (buf) % g, ==, 0);
  check_pattern (buf, 0, 5 * g, 6);
  write_pattern (buf, 5 * g, 4 * g, 7);
  check_pattern (buf, 0, 5 * g, 6);
  check_pattern (buf, 5 * g, 4 * g, 7);

  /* and once more, after an in-place grow gave the buffer two reservations */
  unblock (&blocker);
  resize (buf, 12 * g);
  blocker = block_after (buf);
  address = memres_buffer_get_address (buf);
  resize (buf, 13 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 5 * g, 6);
  check_pattern (buf, 5 * g, 4 * g, 7);

  close_buffer (buf);
  unblock (&blocker);
  mt_assert_fake_counts_equal (&base);
}

/* A grow whose adjacent reservation lands elsewhere frees that stray reservation and moves the
 * buffer. When the driver refuses to free it, the grow still moves the buffer (no error) and the
 * stray reservation is kept, freed at the next grow or with the resource, never lost. */
static void
test_grow_stray_free_fails (void)
{
  FakeCudaCounts base, now;
  MemresResource *mr;
  MemresBuffer *buf;
  VmmBlocker blocker;
  guint64 address;
  gsize g;

  if (!require_device () || !mt_require_fake ("injects a fault"))
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 2 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 2 * g, 21);
  blocker = block_after (buf);
  g_assert_cmpuint (blocker.ptr, ==, address + 2 * g); /* the fake honours the hint */

  mt_fake_fail_call ("cuMemAddressFree", 1, CUDA_ERROR_UNKNOWN);
  resize (buf, 4 * g);
  mt_fake_reset_faults ();
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, address);
  check_pattern (buf, 0, 2 * g, 21);
  mt_fake_get_counts (&now);
  /* the buffer's new reservation, the blocker and the stray one */
  g_assert_cmpint (now.reservations, ==, base.reservations + 3);

  /* the next grow frees the stray reservation */
  resize (buf, 5 * g);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.reservations, <=, base.reservations + 3);
  check_pattern (buf, 0, 2 * g, 21);
  close_buffer (buf);
  unblock (&blocker);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);

  /* kept until the resource goes when no grow comes */
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 2 * g);
  blocker = block_after (buf);
  mt_fake_fail_call ("cuMemAddressFree", 1, CUDA_ERROR_UNKNOWN);
  resize (buf, 4 * g);
  mt_fake_reset_faults ();
  close_buffer (buf);
  unblock (&blocker);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.reservations, ==, base.reservations + 1); /* the stray one */
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* --- shrinking ----------------------------------------------------------------------------- */

static void
test_shrink (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  MemresStats s;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 6 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 6 * g, 8);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 6 * g);

  resize (buf, 2 * g + 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  s = stats (mr);
  g_assert_cmpuint (s.reserved_current, ==, 3 * g);
  g_assert_cmpuint (s.used_current, ==, 3 * g);
  check_pattern (buf, 0, 3 * g, 8);

  /* grows back in place into the kept reservation */
  resize (buf, 6 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  check_pattern (buf, 0, 3 * g, 8);
  write_pattern (buf, 0, 6 * g, 9);
  check_pattern (buf, 0, 6 * g, 9);

  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* A chunk that is only partly beyond the new size stays mapped, and growing into it again needs
 * no driver call. */
static void
test_shrink_partial_chunk (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  long creates = 0;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, 4 * g);
  buf = allocate (mr, 8 * g);
  write_pattern (buf, 0, 8 * g, 10);

  resize (buf, g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, g);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 4 * g);
  g_assert_cmpuint (stats (mr).used_current, ==, g);
  check_pattern (buf, 0, g, 10);

  if (mt_driver_is_fake ())
    creates = mt_fake_call_count ("cuMemCreate");
  resize (buf, 4 * g);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates);
  check_pattern (buf, 0, 4 * g, 10);

  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* Size 0 releases every chunk but keeps the address range; growing maps memory there again. */
static void
test_shrink_to_zero (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  guint64 address;
  gsize g;

  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 3 * g);
  address = memres_buffer_get_address (buf);
  resize (buf, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  /* empty, but the range is kept: the getters report it (memres_buffer_get_pointer()) */
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_true (memres_buffer_get_pointer (buf) == (gpointer) (guintptr) address);
  g_assert_cmpuint (stats (mr).reserved_current, ==, 0);
  resize (buf, 2 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * g);
  write_pattern (buf, 0, 2 * g, 18);
  check_pattern (buf, 0, 2 * g, 18);
  resize (buf, 0);
  close_buffer (buf);
  mt_assert_fake_counts_equal (&base);
}

/* --- the core's empty buffer (core/buffer-resize.c) ---------------------------------------- */

/* The core's empty buffer (0 bytes, address 0, never seen by the kind) resized to 0 stays empty
 * without a driver call; grown (0 → N), it is an allocation of its own: its bytes usable, the
 * resource's usage and its one buffer counted; shrunk (N → 0), its usage is 0 and it stays open;
 * grown again and closed, nothing is counted or left on the device. */
static void
test_grow_from_empty (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  MemresStats s;
  long reserves = 0;
  gsize g;

  g_test_summary ("An empty buffer (0 bytes, address 0) resized to 0 stays empty without a driver "
                  "call; grown (0 -> N) it holds N usable bytes, counted in the usage; shrunk "
                  "(N -> 0) its usage is 0 and it stays open; closed, nothing is left.");
  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("vmm:chunk=%" G_GSIZE_FORMAT, g);
  buf = allocate (mr, 0);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  s = stats (mr);
  g_assert_cmpuint (s.n_buffers, ==, 1);
  g_assert_cmpuint (s.used_current, ==, 0);
  if (mt_driver_is_fake ())
    reserves = mt_fake_call_count ("cuMemAddressReserve");
  resize (buf, 0);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAddressReserve"), ==, reserves);
  /* 0 → N: two granules, every byte usable */
  resize (buf, g + 1);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 2 * g);
  g_assert_cmpuint (memres_buffer_get_address (buf), !=, 0);
  write_pattern (buf, 0, 2 * g, 19);
  check_pattern (buf, 0, 2 * g, 19);
  s = stats (mr);
  g_assert_cmpuint (s.n_buffers, ==, 1);
  g_assert_cmpuint (s.used_current, ==, 2 * g);
  g_assert_cmpuint (s.used_high, ==, 2 * g);
  /* N → 0: nothing used, the buffer still open */
  resize (buf, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  g_assert_false (memres_buffer_is_closed (buf));
  s = stats (mr);
  g_assert_cmpuint (s.n_buffers, ==, 1);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.reserved_current, ==, 0);
  /* and grown again */
  resize (buf, g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, g);
  write_pattern (buf, 0, g, 20);
  check_pattern (buf, 0, g, 20);
  g_assert_cmpuint (stats (mr).used_current, ==, g);
  close_buffer (buf);
  s = stats (mr);
  g_assert_cmpuint (s.n_buffers, ==, 0);
  g_assert_cmpuint (s.used_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

/* An empty buffer of a tag grown through `stats>vmm` (0 → N): its allocation counted under its
 * tag, as memres_resource_allocate() would have counted it (the allocate slot runs with the
 * buffer's record as the thread's call record), and in the layer below; shrunk (N → 0), the
 * tag's bytes are 0 and its allocation still open; closed, nothing of the tag is left. */
static void
test_grow_from_empty_tagged (void)
{
  const char *tag = "vmm-resize-empty";
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresStatsCounters c;
  MemresTagCounts t;
  MemresBuffer *buf;
  gsize g;

  g_test_summary ("An empty buffer of a tag grown through stats>vmm is counted under its tag and "
                  "in the layer below; shrunk to 0 its tag's bytes are 0; closed, the tag's "
                  "counts are back to 0.");
  if (!require_device ())
    return;
  g = gran ();
  mt_fake_counts_begin (&base);
  mr = mt_new_printf_ok ("stats>vmm:chunk=%" G_GSIZE_FORMAT, g);
  g_assert_true (memres_tag_push (tag, &error));
  g_assert_no_error (error);
  buf = allocate (mr, 0);
  g_assert_true (memres_tag_pop (tag, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (memres_buffer_get_tag (buf), ==, tag);
  /* no slot saw it: nothing counted */
  t = tag_counts (mr, tag);
  g_assert_cmpuint (t.count_total, ==, 0);
  g_assert_cmpuint (t.bytes_current, ==, 0);
  resize (buf, 3 * g);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 3 * g);
  write_pattern (buf, 0, 3 * g, 21);
  check_pattern (buf, 0, 3 * g, 21);
  t = tag_counts (mr, tag);
  g_assert_cmpuint (t.bytes_current, ==, 3 * g);
  g_assert_cmpuint (t.bytes_peak, ==, 3 * g);
  g_assert_cmpuint (t.count_current, ==, 1);
  g_assert_cmpuint (t.count_total, ==, 1);
  g_assert_true (memres_stats_get_counters (mr, &c, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (c.bytes_current, ==, 3 * g);
  g_assert_cmpuint (c.count_current, ==, 1);
  g_assert_cmpuint (stats (mr).used_current, ==, 3 * g);
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 3 * g);
  resize (buf, 0);
  t = tag_counts (mr, tag);
  g_assert_cmpuint (t.bytes_current, ==, 0);
  g_assert_cmpuint (t.bytes_peak, ==, 3 * g);
  g_assert_cmpuint (t.count_current, ==, 1);
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 0);
  close_buffer (buf);
  t = tag_counts (mr, tag);
  g_assert_cmpuint (t.bytes_current, ==, 0);
  g_assert_cmpuint (t.count_current, ==, 0);
  g_assert_cmpuint (t.count_total, ==, 1);
  g_assert_true (memres_stats_get_counters (mr, &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, 0);
  g_assert_cmpuint (c.count_current, ==, 0);
  g_assert_cmpuint (stats (memres_resource_get_upstream (mr)).used_current, ==, 0);
  mt_assert_fake_counts_equal (&base);
}

/* --- many chunks --------------------------------------------------------------------------- */

/* A growth by thousands of chunks: the table grows (doubling) as the chunks are created
 * (_vmm_create_chunks()). The fake's granularity lowered to 64 KiB
 * (fakecuda_set_granularity(), as /vmm/allocate/many-chunks), a buffer of 10 chunks grown to
 * 5,000. Before, cuMemCreate and then cuMemMap fail at the 4,190th chunk of the growth (after the
 * table grew past 4,096): each time the buffer is as it was (10 chunks, its
 * bytes), nothing of the growth left (the fake's counts); then the growth succeeds (4,990
 * cuMemCreate), the bytes before and after chunk 4,096 read back, a shrink back to 10 chunks
 * releases 4,990 handles, nothing left after the close. */
static void
test_grow_many_chunks (void)
{
  VmmSmallChunks sc = { 0 };
  gsize g = VMM_SMALL_CHUNK;
  const char *calls[] = { "cuMemCreate", "cuMemMap" };
  FakeCudaCounts before, now;
  MemresBuffer *buf;
  guint64 address;
  long creates;

  if (!require_device () || !mt_require_fake ("sets the fake's granularity"))
    return;
  vmm_small_chunks_begin (&sc);
  buf = allocate (sc.mr, 10 * g);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 0, 10 * g, 51);
  mt_fake_get_counts (&before);

  for (guint i = 0; i < G_N_ELEMENTS (calls); i++)
    {
      g_autoptr (GError) error = NULL;

      mt_fake_fail_call (calls[i], 4190, CUDA_ERROR_OUT_OF_MEMORY);
      g_assert_false (memres_buffer_resize (buf, 5000 * g, NULL, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      g_assert_nonnull (strstr (error->message, calls[i]));
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, 10 * g);
      g_assert_cmphex (memres_buffer_get_address (buf), ==, address);
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.physical_handles, ==, before.physical_handles);
      g_assert_cmpint (now.mappings, ==, before.mappings);
      g_assert_cmpint (now.reservations, ==, before.reservations);
      check_pattern (buf, 0, 10 * g, 51);
    }

  creates = mt_fake_call_count ("cuMemCreate");
  resize (buf, 5000 * g);
  g_assert_cmpint (mt_fake_call_count ("cuMemCreate") - creates, ==, 4990);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 5000 * g);
  check_pattern (buf, 0, 10 * g, 51);
  write_pattern (buf, 4095 * g, 2 * g, 52);
  write_pattern (buf, 4999 * g, g, 53);
  check_pattern (buf, 4095 * g, 2 * g, 52);
  check_pattern (buf, 4999 * g, g, 53);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.physical_handles, ==, before.physical_handles + 4990);

  resize (buf, 10 * g);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.physical_handles, ==, before.physical_handles);
  check_pattern (buf, 0, 10 * g, 51);
  close_buffer (buf);
  vmm_small_chunks_end (&sc);
}

int
main (int argc, char **argv)
{
  vmm_test_init (&argc, &argv);
  g_test_add_func ("/vmm/grow/stray-free-fails", test_grow_stray_free_fails);
  g_test_add_func ("/vmm/grow/in-place", test_grow_in_place);
  g_test_add_func ("/vmm/grow/one-copy", test_grow_one_copy);
  g_test_add_func ("/vmm/grow/within-reserve", test_grow_within_reserve);
  g_test_add_func ("/vmm/grow/move", test_grow_by_move);
  g_test_add_func ("/vmm/grow/probe-fails", test_grow_probe_fails);
  g_test_add_func ("/vmm/grow/rollback-deinitialized", test_rollback_deinitialized);
  g_test_add_func ("/vmm/grow/from-empty", test_grow_from_empty);
  g_test_add_func ("/vmm/grow/from-empty-tagged", test_grow_from_empty_tagged);
  g_test_add_func ("/vmm/grow/many-chunks", test_grow_many_chunks);
  g_test_add_func ("/vmm/shrink/chunks", test_shrink);
  g_test_add_func ("/vmm/shrink/partial-chunk", test_shrink_partial_chunk);
  g_test_add_func ("/vmm/shrink/to-zero", test_shrink_to_zero);
  return g_test_run ();
}

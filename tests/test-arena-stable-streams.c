/* test-arena-stable-streams.c: `arena:place=stable` (docs/arena.md, the `place` bullet; issue 38)
 * against the fake driver, beside test-arena-stable.c's fault sweep: stream hazards over runs that
 * mix a stream's own frees with settled ranges; sleep and wake of a tagged buffer; resize in place
 * and by a move; the lending of a stream's own frees, which a statistics reset does not change.
 * Every allocation of interest is on a stream of its own (place=stable leaves the legacy and the
 * per-thread streams to best fit). */
#include "testutil.h"

#include "arena-check.h"

#define STABLE "arena:place=stable"

/* ---- stream hazards -------------------------------------------------------------------------- */

static void
test_hazard (gconstpointer data)
{
  mt_hazard_run (data);
}

static const MtHazard hazards[] = {
  { STABLE, 4 * (1 << 20), MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
  { STABLE, 4 * (1 << 20), MT_HAZARD_LEGACY, FALSE, FALSE, TRUE },
  { STABLE, 4 * (1 << 20), MT_HAZARD_DESTROYED, FALSE, FALSE, TRUE },
  { STABLE, 4 * 1024, MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
};
static const char *const hazard_names[] = {
  "/arena-stable/hazard/stream/large",
  "/arena-stable/hazard/legacy/large",
  "/arena-stable/hazard/destroyed/large",
  "/arena-stable/hazard/stream/front",
};
G_STATIC_ASSERT (G_N_ELEMENTS (hazards) == G_N_ELEMENTS (hazard_names));

/* A run of A's own frees and settled ranges: p (2 granules) freed on A and settled, q (2) freed
 * on A while A is held with a fill of q queued; B's 4 granules get none of q's bytes (new memory
 * elsewhere: q's fill, run when A is released, would land in them), A's 4 granules take the run
 * p + q at once (its own free is ordered before); each reads back its own bytes. */
static void
test_hazard_run (void)
{
  ArenaStreams t;
  MemresBuffer *p, *q, *r, *y, *z;
  MtStreamHold *hold;
  guint64 at_p, at_q, at_y;
  gsize g;

  if (!arena_streams_begin_spec (&t, FALSE, STABLE))
    return;
  g = gran (t.mr);
  p = mt_alloc_ok (t.mr, 2 * g, t.a);
  q = mt_alloc_ok (t.mr, 2 * g, t.a);
  r = mt_alloc_ok (t.mr, g, t.a);
  at_p = memres_buffer_get_address (p);
  at_q = memres_buffer_get_address (q);
  g_assert_cmphex (at_q, ==, at_p + 2 * g);
  mt_fill_byte_ok (r, 0x52, t.a);
  mt_close_ok (p, t.a);
  mt_sync_ok (t.a);
  g_assert_true (memres_resource_trim (t.mr, G_MAXSIZE, NULL)); /* p settled */
  hold = mt_stream_hold (t.a);
  mt_fill_byte_ok (q, 0xaa, t.a);
  mt_close_ok (q, t.a);
  y = mt_alloc_ok (t.mr, 4 * g, t.b);
  at_y = memres_buffer_get_address (y);
  g_assert_true (at_y + 4 * g <= at_q || at_y >= at_q + 2 * g);
  z = mt_alloc_ok (t.mr, 4 * g, t.a);
  g_assert_cmphex (memres_buffer_get_address (z), ==, at_p);
  g_assert_cmpuint (counter (t.mr, "run_takes"), ==, 1); /* across p's range and q's */
  mt_fill_byte_ok (y, 0xbb, t.b);
  mt_fill_byte_ok (z, 0xcc, t.a);
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, t.b);
  mt_assert_bytes (z, 0xcc, t.a);
  mt_assert_bytes (r, 0x52, t.a);
  mt_close_ok (y, t.b);
  mt_close_ok (z, t.a);
  mt_close_ok (r, t.a);
  arena_streams_end (&t);
}

/* Random buffers of 64 KiB to 6 MiB on two streams, either held for a round at random (its
 * fills and frees queued, its frees tagged beside settled ranges: runs), each buffer filled on
 * its stream with a byte of its own and closed there, some resized: after each round both
 * streams released and every live buffer reads back its byte (a range handed to the other
 * stream before the fills queued on it ran would hold the wrong byte). */
static void
test_hazard_random (void)
{
  enum
  {
    LIVE = 48
  };
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *live[LIVE] = { NULL };
  guint8 byte[LIVE];
  guint side[LIVE];
  MemresStream s[2];
  guint32 rng = 0x5eed;
  guint8 next_byte = 1;

  if (!mt_hazard_begin ())
    return;
  s[0] = mt_stream_new_on (0);
  s[1] = mt_stream_new_on (0);
  mr = mt_new_ok (STABLE ",check=true");
  for (guint round = 0; round < 24; round++)
    {
      MtStreamHold *hold[2] = { NULL, NULL };

      for (guint i = 0; i < 2; i++)
        if ((rng = rng * 1103515245u + 12345u) >> 16 & 1)
          hold[i] = mt_stream_hold (s[i]);
      for (guint op = 0; op < 40; op++)
        {
          guint k, r;

          rng = rng * 1103515245u + 12345u;
          r = rng >> 8;
          k = r % LIVE;
          if (live[k] != NULL && r % 5 == 0)
            {
              GError *error = NULL;
              gsize size = 64 * 1024 + (gsize) (r >> 4) % (6 << 20);

              /* grown or shrunk on its stream; its first bytes keep its byte */
              g_assert_true (memres_buffer_resize (live[k], size, s[side[k]], &error));
              g_assert_no_error (error);
              mt_fill_byte_ok (live[k], byte[k], s[side[k]]);
            }
          else if (live[k] != NULL)
            {
              mt_close_ok (live[k], s[side[k]]);
              live[k] = NULL;
            }
          else
            {
              side[k] = (r >> 3) & 1;
              byte[k] = next_byte;
              next_byte = next_byte == 255 ? 1 : next_byte + 1;
              live[k] = mt_alloc_ok (mr, 64 * 1024 + (gsize) (r >> 4) % (6 << 20), s[side[k]]);
              mt_fill_byte_ok (live[k], byte[k], s[side[k]]);
            }
        }
      for (guint i = 0; i < 2; i++)
        if (hold[i] != NULL)
          mt_stream_release (hold[i]);
      for (guint k = 0; k < LIVE; k++)
        if (live[k] != NULL)
          mt_assert_bytes (live[k], byte[k], s[side[k]]);
      g_assert_cmpuint (counter (mr, "heap_errors"), ==, 0);
      if (round % 4 == 3)
        trim_ok (mr);
    }
  g_test_message ("%" G_GUINT64_FORMAT " run takes, %" G_GUINT64_FORMAT
                  " settles, %" G_GUINT64_FORMAT " granules lent, %" G_GUINT64_FORMAT " refaulted",
                  counter (mr, "run_takes"), counter (mr, "settles"), counter (mr, "granules_lent"),
                  counter (mr, "granules_refaulted"));
  for (guint k = 0; k < LIVE; k++)
    if (live[k] != NULL)
      mt_close_ok (live[k], s[side[k]]);
  mt_sync_ok (s[0]);
  mt_sync_ok (s[1]);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s[0]);
  mt_stream_free (s[1]);
  mt_hazard_end ();
}

/* ---- sleep and resize ------------------------------------------------------------------------ */

/* A tagged buffer on a stream asleep (docs/sleep.md): its address range is not placed while it
 * sleeps, even for its own stream's stable placements (its granules unmapped, its bytes not
 * free); the wake gives back its bytes at its address. */
static void
test_sleep (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *k, *w, *o;
  CUstream s;
  guint64 at, at_o;
  gsize g, ks;

  if (!mt_require_devices (1) || !mt_require_fake ("the fake's counts"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (STABLE);
  s = mt_stream_new_on (0);
  g = gran (mr);
  policy = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, &error);
  g_assert_no_error (error);
  g_assert_true (memres_tag_push ("st-sleep", NULL));
  k = mt_alloc_ok (mr, 3 * g + 1000, s);
  g_assert_true (memres_tag_pop ("st-sleep", &error));
  g_assert_no_error (error);
  w = mt_alloc_ok (mr, 2 * g, s);
  ks = memres_buffer_get_size (k);
  at = memres_buffer_get_address (k);
  mt_write_pattern (k, 0, ks, 77, s);
  mt_fill_byte_ok (w, 0x3c, s);
  g_assert_true (memres_resource_sleep (mr, "st-sleep", policy, s, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_asleep (k));
  /* every placement on s while k sleeps lies outside it */
  for (guint n = 1; n <= 4; n++)
    {
      o = mt_alloc_ok (mr, n * g, s);
      at_o = memres_buffer_get_address (o);
      g_assert_true (at_o + n * g <= at || at_o >= at + ks);
      mt_fill_byte_ok (o, 0x10 + n, s);
      mt_assert_bytes (o, 0x10 + n, s);
      mt_close_ok (o, s);
    }
  g_assert_true (memres_resource_wake (mr, "st-sleep", s, &error));
  g_assert_no_error (error);
  g_assert_cmphex (memres_buffer_get_address (k), ==, at);
  mt_check_pattern (k, 0, ks, 77, s);
  mt_assert_bytes (w, 0x3c, s);
  mt_close_ok (k, s);
  mt_close_ok (w, s);
  mt_stream_free (s);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* A buffer on a stream grown in place (the free bytes after it), then grown by a move (a
 * neighbour after it): its bytes kept, the neighbour's too. */
static void
test_resize (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *x, *y;
  CUstream s;
  guint64 at;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (STABLE);
  s = mt_stream_new_on (0);
  g = gran (mr);
  x = mt_alloc_ok (mr, g + 1000, s);
  at = memres_buffer_get_address (x);
  mt_write_pattern (x, 0, g + 1000, 5, s);
  g_assert_true (memres_buffer_resize (x, 4 * g, s, &error));
  g_assert_no_error (error);
  g_assert_cmphex (memres_buffer_get_address (x), ==, at);
  mt_check_pattern (x, 0, g + 1000, 5, s);
  mt_write_pattern (x, 0, 4 * g, 6, s);
  y = mt_alloc_ok (mr, g, s);
  g_assert_cmphex (memres_buffer_get_address (y), ==, at + 4 * g);
  mt_fill_byte_ok (y, 0x79, s);
  g_assert_true (memres_buffer_resize (x, 6 * g + 1000, s, &error));
  g_assert_no_error (error);
  g_assert_cmphex (memres_buffer_get_address (x), !=, at);
  g_assert_cmpuint (memres_buffer_get_size (x), ==, 6 * g + 1000);
  mt_check_pattern (x, 0, 4 * g, 6, s);
  mt_assert_bytes (y, 0x79, s);
  /* the room x left, taken by x's stream again at once */
  mt_close_ok (mt_alloc_ok (mr, 4 * g, s), s);
  mt_close_ok (x, s);
  mt_close_ok (y, s);
  mt_stream_free (s);
  trim_ok (mr);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* ---- lending and the statistics ------------------------------------------------------------- */

/* place=stable lends a stream's own frees only where creating the memory would map more than
 * its slack over the peak used (arena_stable_may_lend()); that peak is the arena's own
 * (Arena.used_peak), not the statistics' used_high, which memres_resource_reset_stats() lowers.
 * A buffer of 64 granules once (the peak), trimmed away; a (8 granules) closed on a held stream
 * with n (1) live after it; b (12) on the same stream fits in no free range of its own: 9 mapped +
 * 12 is within the slack over 64, so b's 12 granules are created, a's not lent. The same calls
 * with the statistics reset after the trim (used_high 0, then 9 granules) lent a's 8 granules
 * before the peak was the arena's own. */
static void
lend_after (gboolean reset, guint64 *created, guint64 *at_b)
{
  g_autoptr (MemresResource) mr = mt_new_ok (STABLE);
  CUstream s = mt_stream_new_on (0);
  MemresBuffer *a, *n, *b;
  MtStreamHold *hold;
  guint64 base;
  gsize g = gran (mr);

  mt_close_ok (mt_alloc_ok (mr, 64 * g, (MemresStream) s), (MemresStream) s);
  mt_sync_ok ((MemresStream) s);
  trim_ok (mr);
  g_assert_cmpuint (counter (mr, "physical"), ==, 0);
  if (reset)
    {
      g_autoptr (GError) error = NULL;

      MT_CHECK (memres_resource_reset_stats (mr, &error));
      g_assert_cmpuint (stats_ok (mr).used_high, ==, 0);
    }
  base = counter (mr, "granules_created");
  a = mt_alloc_ok (mr, 8 * g, (MemresStream) s);
  n = mt_alloc_ok (mr, g, (MemresStream) s);
  g_assert_cmphex (memres_buffer_get_address (n), ==, memres_buffer_get_address (a) + 8 * g);
  hold = mt_stream_hold ((MemresStream) s);
  mt_close_ok (a, (MemresStream) s);
  b = mt_alloc_ok (mr, 12 * g, (MemresStream) s);
  *created = counter (mr, "granules_created") - base;
  *at_b = memres_buffer_get_address (b) - memres_buffer_get_address (n);
  g_assert_cmpuint (counter (mr, "granules_lent"), ==, 0);
  mt_stream_release (hold);
  mt_fill_byte_ok (b, 0x4b, (MemresStream) s);
  mt_assert_bytes (b, 0x4b, (MemresStream) s);
  mt_close_ok (b, (MemresStream) s);
  mt_close_ok (n, (MemresStream) s);
  mt_stream_free (s);
}

static void
test_lend_reset (void)
{
  guint64 created, at_b, created_reset, at_b_reset;

  if (!mt_hazard_begin ())
    return;
  lend_after (FALSE, &created, &at_b);
  lend_after (TRUE, &created_reset, &at_b_reset);
  g_assert_cmpuint (created, ==, 8 + 1 + 12);
  g_assert_cmpuint (created_reset, ==, created);
  g_assert_cmphex (at_b_reset, ==, at_b);
  mt_hazard_end ();
}

int
main (int argc, char **argv)
{
  /* 128 granules of 2 MiB (backed lazily; read at cuInit) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "256M", FALSE);
  mt_init (&argc, &argv);
  for (guint i = 0; i < G_N_ELEMENTS (hazards); i++)
    g_test_add_data_func (hazard_names[i], &hazards[i], test_hazard);
  g_test_add_func ("/arena-stable/hazard/run", test_hazard_run);
  g_test_add_func ("/arena-stable/hazard/random", test_hazard_random);
  g_test_add_func ("/arena-stable/sleep/tagged", test_sleep);
  g_test_add_func ("/arena-stable/resize", test_resize);
  g_test_add_func ("/arena-stable/lend/stats-reset", test_lend_reset);
  return g_test_run ();
}

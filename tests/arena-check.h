/* arena-check.h: what the tests of the `arena` kind share (test-arena.c, test-arena-heap.c,
 * test-arena-segments.c, test-arena-space.c, test-arena-streams.c, test-arena-stable.c): its
 * counters, its statistics checked for consistency, trim, its granularity, its snapshot's blocks
 * added up, the set-up of the stream hazard cases (ArenaStreams). Static functions: each test
 * program includes it once, after testutil.h. */
#pragma once

static inline guint64
counter (MemresResource *mr, const char *name)
{
  GError *error = NULL;
  g_autoptr (GVariant) v = memres_resource_get_counters (mr, &error);
  guint64 value = 0;

  g_assert_no_error (error);
  g_assert_true (g_variant_lookup (v, name, "t", &value));
  return value;
}

static inline MemresStats
stats_ok (MemresResource *mr)
{
  GError *error = NULL;
  MemresStats stats;

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.reserved_current, >=, stats.used_current);
  g_assert_cmpuint (stats.reserved_high, >=, stats.reserved_current);
  return stats;
}

static inline void
trim_ok (MemresResource *mr)
{
  GError *error = NULL;

  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
}

static inline gsize
gran (MemresResource *mr)
{
  return (gsize) counter (mr, "granularity");
}

/* The byte ranges [lo, hi) of @a (pairs of guint64) that overlap [lo, hi): their bytes there. */
static inline guint64
overlap_bytes (GArray *a, guint64 lo, guint64 hi)
{
  guint64 n = 0;

  for (guint i = 0; i + 1 < a->len; i += 2)
    {
      guint64 s = MAX (lo, g_array_index (a, guint64, i));
      guint64 e = MIN (hi, g_array_index (a, guint64, i) + g_array_index (a, guint64, i + 1));

      n += e > s ? e - s : 0;
    }
  return n;
}

/* A snapshot of @mr (an arena alone) read back: each segment covered by its blocks exactly (their
 * bytes in it sum to its size), @withheld bytes of withheld blocks, and the other blocks within
 * segments adding up to reserved (the physical memory once), the used ones to used. Returns the
 * bytes of its unused blocks (slabs' bytes past their last block). */
static inline guint64
snapshot_adds_up (MemresResource *mr, guint64 withheld)
{
  GError *error = NULL;
  g_autofree char *doc = memres_resource_snapshot (mr, &error);
  g_autoptr (GRegex) seg_re = g_regex_new (
      "\"address\": \"0x([0-9a-f]+)\",\\s*\"size\": ([0-9]+),\\s*\"device\"", 0, 0, NULL);
  g_autoptr (GRegex) block_re
      = g_regex_new ("\"address\": \"0x([0-9a-f]+)\",\\s*\"size\": ([0-9]+),\\s*\"stream\": "
                     "\"[^\"]*\",\\s*\"tag\": \"[^\"]*\",\\s*\"state\": \"([a-z]+)\"",
                     0, 0, NULL);
  g_autoptr (GArray) segs = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GArray) held = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GArray) kept = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GMatchInfo) m = NULL;
  MemresStats st = stats_ok (mr);
  guint64 in_segments = 0, used = 0, held_bytes = 0, unused = 0;

  g_assert_no_error (error);
  g_assert_nonnull (doc);
  for (g_regex_match (seg_re, doc, 0, &m); g_match_info_matches (m); g_match_info_next (m, NULL))
    {
      g_autofree char *a = g_match_info_fetch (m, 1), *n = g_match_info_fetch (m, 2);
      guint64 v[2] = { g_ascii_strtoull (a, NULL, 16), g_ascii_strtoull (n, NULL, 10) };

      g_array_append_vals (segs, v, 2);
    }
  g_clear_pointer (&m, g_match_info_unref);
  for (g_regex_match (block_re, doc, 0, &m); g_match_info_matches (m); g_match_info_next (m, NULL))
    {
      g_autofree char *a = g_match_info_fetch (m, 1), *n = g_match_info_fetch (m, 2);
      g_autofree char *state = g_match_info_fetch (m, 3);
      guint64 v[2] = { g_ascii_strtoull (a, NULL, 16), g_ascii_strtoull (n, NULL, 10) };
      gboolean w = g_strcmp0 (state, "withheld") == 0;

      g_array_append_vals (w ? held : kept, v, 2);
      if (w)
        held_bytes += v[1];
      if (g_strcmp0 (state, "used") == 0)
        used += v[1];
      if (g_strcmp0 (state, "unused") == 0)
        unused += v[1];
    }
  g_assert_cmpuint (segs->len, >, 0);
  for (guint i = 0; i < segs->len; i += 2)
    {
      guint64 lo = g_array_index (segs, guint64, i), hi = lo + g_array_index (segs, guint64, i + 1);

      g_assert_cmpuint (overlap_bytes (kept, lo, hi) + overlap_bytes (held, lo, hi), ==, hi - lo);
      in_segments += overlap_bytes (kept, lo, hi);
    }
  g_assert_cmpuint (in_segments, ==, st.reserved_current);
  g_assert_cmpuint (held_bytes, ==, withheld);
  g_assert_cmpuint (used, ==, st.used_current);
  return unused;
}

/* The stream hazard cases' set-up (test-arena.c's /arena/hazard/ cases, test-arena-streams.c):
 * in the fake's asynchronous mode, or on the real driver (mt_hazard_begin()), the fake's counts
 * taken, streams @a and @b of device 0 and an `arena`. */
typedef struct
{
  FakeCudaCounts base; /* the fake's counts at the start (fake only) */
  gboolean fake;
  MemresResource *mr;
  MemresStream a; /* NULL: the legacy stream (arena_streams_begin()'s @legacy, or @a destroyed) */
  MemresStream b;
} ArenaStreams;

/* FALSE when the case cannot run (skipped: mt_hazard_begin()); @legacy: @a is the legacy
 * stream; the arena of @spec (an `arena` spec, such as "arena:place=stable"). */
static inline gboolean
arena_streams_begin_spec (ArenaStreams *t, gboolean legacy, const char *spec)
{
  *t = (ArenaStreams){ 0 };
  if (!mt_hazard_begin ())
    return FALSE;
  t->fake = mt_driver_is_fake ();
  if (t->fake)
    mt_counts_snapshot (&t->base);
  t->a = legacy ? NULL : mt_stream_new_on (0);
  t->b = mt_stream_new_on (0);
  t->mr = mt_new_ok (spec);
  return TRUE;
}

/* arena_streams_begin_spec() of plain "arena". */
static inline gboolean
arena_streams_begin (ArenaStreams *t, gboolean legacy)
{
  return arena_streams_begin_spec (t, legacy, "arena");
}

/* A @size buffer allocated on @a (its address in @at), @a held, the buffer filled with 0xaa and
 * closed on @a: the fill and the close's event wait behind the hold, which is returned. */
static inline MtStreamHold *
arena_streams_close_held (ArenaStreams *t, gsize size, guint64 *at)
{
  MemresBuffer *x = mt_alloc_ok (t->mr, size, t->a);
  MtStreamHold *hold;

  *at = memres_buffer_get_address (x);
  hold = mt_stream_hold (t->a);
  mt_fill_byte_ok (x, 0xaa, t->a);
  mt_close_ok (x, t->a);
  return hold;
}

/* The end of a case whose buffers are closed and holds released: both streams synchronized, the
 * arena trimmed back to 0 bytes reserved and freed, the streams freed, and on the fake every
 * handle given back. */
static inline void
arena_streams_end (ArenaStreams *t)
{
  mt_sync_ok (t->a);
  mt_sync_ok (t->b);
  trim_ok (t->mr);
  g_assert_cmpuint (stats_ok (t->mr).reserved_current, ==, 0);
  g_clear_pointer (&t->mr, memres_resource_unref);
  if (t->a != NULL)
    mt_stream_free (t->a);
  mt_stream_free (t->b);
  if (t->fake)
    mt_assert_fake_counts_equal (&t->base);
  mt_hazard_end ();
}

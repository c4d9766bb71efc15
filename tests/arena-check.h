/* arena-check.h: what the tests of the `arena` kind share (test-arena.c, test-arena-segments.c,
 * test-arena-space.c): its counters, its statistics checked for consistency, trim, its
 * granularity. Static functions: each test program includes it once, after testutil.h. */
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

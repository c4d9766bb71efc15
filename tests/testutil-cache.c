/* testutil-cache.c: what the cache tests (test-cache*.c) share: counters, size-class
 * counts, trims, the upstream's emptiness, threads that exit, the hazard's set-up. */
#include "testutil.h"

#include "../plugins/common/cache/cache-classes.h"
#include "testutil-cache.h"

/* The counters of @mr, asserted to exist. */
GVariant *
counters_ok (MemresResource *mr)
{
  GError *error = NULL;
  GVariant *v = memres_resource_get_counters (mr, &error);

  g_assert_no_error (error);
  g_assert_nonnull (v);
  g_assert_true (g_variant_is_of_type (v, G_VARIANT_TYPE_VARDICT));
  return v;
}

guint64
counter (MemresResource *mr, const char *name)
{
  g_autoptr (GVariant) v = counters_ok (mr);
  guint64 value = 0;

  g_assert_true (g_variant_lookup (v, name, "t", &value));
  return value;
}

/* Hits and misses of the class that serves @size. */
void
class_counts (MemresResource *mr, gsize size, guint64 *hits, guint64 *misses, guint64 *cached)
{
  g_autoptr (GVariant) v = counters_ok (mr);
  g_autoptr (GVariant) classes = g_variant_lookup_value (v, "classes", G_VARIANT_TYPE ("a(tttt)"));
  guint64 csize, h, m, c;
  GVariantIter iter;

  g_assert_nonnull (classes);
  g_variant_iter_init (&iter, classes);
  while (g_variant_iter_next (&iter, "(tttt)", &csize, &h, &m, &c))
    if (csize == cache_class_size (cache_class_of (size)))
      {
        *hits = h;
        *misses = m;
        if (cached != NULL)
          *cached = c;
        return;
      }
  g_assert_not_reached ();
}

void
trim_ok (MemresResource *mr)
{
  GError *error = NULL;

  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
}

/* The upstream holds no allocation of the cache's any more: its used bytes are 0 and, on the
 * fake, no pool allocation beyond @base is live. */
void
assert_upstream_empty (MemresResource *mr, const FakeCudaCounts *base)
{
  MemresResource *up = memres_resource_get_upstream (mr);
  MemresStats stats = mt_stats_ok (up);
  FakeCudaCounts now;

  g_assert_cmpuint (stats.used_current, ==, 0);
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.pool_allocations, ==, base->pool_allocations);
    }
}

/* Allocates and closes @n blocks (they stay in this thread's front cache), then waits for
 * the word before exiting. */
gpointer
exit_thread (gpointer data)
{
  ExitJob *job = data;
  MemresBuffer *bufs[8];

  for (guint i = 0; i < job->n; i++)
    bufs[i] = mt_alloc_ok (job->mr, 1 * MiB, NULL);
  for (guint i = 0; i < job->n; i++)
    mt_close_ok (bufs[i], NULL);
  g_mutex_lock (&job->lock);
  job->filled = TRUE;
  g_cond_broadcast (&job->cond);
  while (!job->go)
    g_cond_wait (&job->cond, &job->lock);
  g_mutex_unlock (&job->lock);
  return NULL;
}

void
exit_job_go (ExitJob *job)
{
  g_mutex_lock (&job->lock);
  job->go = TRUE;
  g_cond_broadcast (&job->cond);
  g_mutex_unlock (&job->lock);
}

void
exit_job_wait_filled (ExitJob *job)
{
  g_mutex_lock (&job->lock);
  while (!job->filled)
    g_cond_wait (&job->cond, &job->lock);
  g_mutex_unlock (&job->lock);
}

/* test-sleep-calls.c: the driver calls of a tag's sleep and wake with the discard policy
 * (docs/sleep.md; issue 34's "discard" target) through `cache>vmm` and `cache>arena`, counted on
 * the fake and held to the raw calls for the same physical allocations: those the wake made
 * again under the ranges the sleep told unmapped (cuMemRetainAllocationHandle per granule, as
 * bench/sleep-bench.c finds its baseline), N allocations in R runs of adjacent ones. The raw
 * calls are N cuMemRelease and R cuMemUnmap for the sleep, N cuMemCreate, N cuMemMap and R
 * cuMemSetAccess for the wake; memres makes exactly those, plus one cuStreamSynchronize (the
 * buffers' one stream) and the context calls around it: no device or event synchronize, no
 * memory of another tag released or created. Fake only: it counts calls. */
#include <memres/memres.h>

#include "testutil.h"

#define KiB ((gsize) 1 << 10)
#define MiB ((gsize) 1 << 20)

/* the ranges a sleep tells unmapped */
static void
on_unmapping (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
              guint64 previous_length, gpointer user_data)
{
  if (event == MEMRES_SEGMENT_UNMAPPING)
    g_array_append_val ((GArray *) user_data, *segment);
}

static gint
by_base (gconstpointer a, gconstpointer b)
{
  const MemresSegment *x = a, *y = b;

  return x->base < y->base ? -1 : x->base > y->base;
}

/* The allocations mapped now under @segs (granule by granule, adjacent granules of one handle
 * one allocation) into *@n, and their runs of adjacent ones into *@runs; granules under @segs
 * with nothing mapped fail the test (a sleep gave back nothing that its wake did not make
 * again). */
static void
handles_under (GArray *segs, gsize granule, guint *n, guint *runs)
{
  const MemresCudaDriver *drv = mt_driver ();
  CUmemGenericAllocationHandle last = 0;
  guint64 end = 0, next = 0;

  *n = *runs = 0;
  g_array_sort (segs, by_base);
  for (guint i = 0; i < segs->len; i++)
    {
      const MemresSegment *s = &g_array_index (segs, MemresSegment, i);
      guint64 a = MAX (s->base / granule * granule, end);

      end = MAX (end, (s->base + s->length + granule - 1) / granule * granule);
      for (; a < end; a += granule)
        {
          CUmemGenericAllocationHandle h = 0;

          g_assert_cmpint (drv->cuMemRetainAllocationHandle (&h, (void *) (guintptr) a), ==,
                           CUDA_SUCCESS);
          g_assert_cmpint (drv->cuMemRelease (h), ==, CUDA_SUCCESS);
          if (a != next || h != last)
            {
              *n += 1;
              *runs += a != next;
            }
          last = h;
          next = a + granule;
        }
    }
}

/* How many of the @n_names calls are @entry. */
static guint
count (const char **names, int n_names, const char *entry)
{
  guint c = 0;

  for (int i = 0; i < n_names; i++)
    c += g_str_equal (names[i], entry);
  return c;
}

/* Asserts that every one of the @n_names calls is one of @allowed (NULL-terminated). */
static void
assert_only (const char **names, int n_names, const char *const *allowed)
{
  for (int i = 0; i < n_names; i++)
    {
      if (!g_strv_contains (allowed, names[i]))
        g_error ("unexpected driver call %s (call %d of %d) in a discard sleep or wake", names[i],
                 i, n_names);
    }
}

/* Buffers of tag "sc-kv" (the one slept), "sc-w" and none, interleaved, 4 KiB to 96 MiB (as the
 * bench draws them: a few large ones and many small ones carved from the cache's chunks). */
static void
test_calls (gconstpointer data)
{
  static const gsize sizes[]
      = { 96 * MiB,  4 * KiB,  40 * MiB,  12 * KiB, 3 * MiB, 700 * KiB, 64 * KiB, 9 * MiB,
          256 * KiB, 20 * KiB, 130 * MiB, 1 * MiB,  5 * KiB, 2 * MiB,   33 * MiB, 6 * KiB };
  /* the context calls: the wait for the buffers' stream makes the device's context current */
  static const char *const sleep_calls[] = { "cuMemUnmap",
                                             "cuMemRelease",
                                             "cuStreamSynchronize",
                                             "cuCtxGetCurrent",
                                             "cuCtxGetDevice",
                                             "cuCtxPushCurrent",
                                             "cuCtxPopCurrent",
                                             "cuCtxSetCurrent",
                                             "cuDeviceGet",
                                             "cuDevicePrimaryCtxRetain",
                                             NULL };
  static const char *const wake_calls[] = { "cuMemCreate", "cuMemMap", "cuMemSetAccess", NULL };
  const char *spec = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) unmapped = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  g_autoptr (GPtrArray) bufs = g_ptr_array_new ();
  MemresResource *mr;
  FakeCudaCounts base, awake, asleep, woken;
  const char **names = NULL;
  guint sub, n, runs, kv = 0;
  int n_names;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (spec);
  for (guint i = 0; i < 3 * G_N_ELEMENTS (sizes); i++)
    {
      const char *tag = i % 2 == 0 ? NULL : (i % 4 == 1 ? "sc-w" : "sc-kv");
      MemresBuffer *b;

      if (tag != NULL)
        g_assert_true (memres_tag_push (tag, NULL));
      b = memres_resource_allocate (mr, sizes[(i + i / 4) % G_N_ELEMENTS (sizes)], NULL, &error);
      g_assert_no_error (error);
      if (tag != NULL)
        g_assert_true (memres_tag_pop (tag, NULL));
      kv += tag != NULL && g_str_equal (tag, "sc-kv");
      g_ptr_array_add (bufs, b);
    }
  g_assert_cmpuint (kv, ==, 12);

  mt_fake_get_counts (&awake);
  sub = memres_resource_subscribe_segments (mr, on_unmapping, unmapped, NULL, &error);
  g_assert_no_error (error);
  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_sleep (mr, "sc-kv", NULL, NULL, &error));
  n_names = mt_fake_trace_end (&names);
  g_assert_true (memres_resource_unsubscribe_segments (mr, sub, &error));
  mt_fake_get_counts (&asleep);
  assert_only (names, n_names, sleep_calls);
  g_assert_cmpuint (count (names, n_names, "cuStreamSynchronize"), ==, 1);
  g_assert_cmpuint (unmapped->len, >, 0);
  /* what it released, all of it made again by the wake below */
  g_assert_cmpint (asleep.physical_handles, <, awake.physical_handles);
  n = (guint) (awake.physical_handles - asleep.physical_handles);
  g_assert_cmpuint (count (names, n_names, "cuMemRelease"), ==, n);
  {
    guint unmaps = count (names, n_names, "cuMemUnmap");

    mt_fake_trace_begin ();
    MT_CHECK (memres_resource_wake (mr, "sc-kv", NULL, &error));
    n_names = mt_fake_trace_end (&names);
    mt_fake_get_counts (&woken);
    assert_only (names, n_names, wake_calls);
    g_assert_cmpint (woken.physical_handles, ==, awake.physical_handles);
    g_assert_cmpint (woken.mappings, ==, awake.mappings);
    /* the raw calls for the same allocations, found under the unmapped ranges */
    handles_under (unmapped, mt_device_granularity (), &n, &runs);
    g_test_message ("%s: %u allocations in %u runs; sleep %u unmaps, wake %u grants", spec, n, runs,
                    unmaps, count (names, n_names, "cuMemSetAccess"));
    g_assert_cmpuint (n, ==, (guint) (awake.physical_handles - asleep.physical_handles));
    g_assert_cmpuint (unmaps, ==, runs);
    g_assert_cmpuint (count (names, n_names, "cuMemCreate"), ==, n);
    g_assert_cmpuint (count (names, n_names, "cuMemMap"), ==, n);
    g_assert_cmpuint (count (names, n_names, "cuMemSetAccess"), ==, runs);
  }
  for (guint i = 0; i < bufs->len; i++)
    mt_close_ok (bufs->pdata[i], NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_data_func ("/sleep-calls/cache-vmm", "cache>vmm", test_calls);
  g_test_add_data_func ("/sleep-calls/cache-arena", "cache>arena", test_calls);
  g_test_add_data_func ("/sleep-calls/arena", "arena", test_calls);
  g_test_add_data_func ("/sleep-calls/vmm", "vmm", test_calls);
  return g_test_run ();
}

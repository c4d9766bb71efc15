/* test-sleep-calls.c: the driver calls of a tag's sleep and wake with the discard policy
 * (docs/sleep.md; issue 34's "discard" target) through `cache>vmm` and `cache>arena`, counted on
 * the fake and held to the raw calls for the same physical allocations: those the wake made
 * again under the ranges the sleep told unmapped (cuMemRetainAllocationHandle per granule, as
 * bench/sleep-bench.c finds its baseline), N allocations in R runs of adjacent ones. The raw
 * calls are N cuMemRelease and R cuMemUnmap for the sleep, N cuMemCreate, N cuMemMap and R
 * cuMemSetAccess for the wake; memres makes exactly those, plus one cuStreamSynchronize (the
 * buffers' one stream) and the context calls around it: no device or event synchronize, no
 * memory of another tag released or created. The "fixed" cases hold a fixed layout's sleep and
 * wake to counts worked out by hand (driver calls and the cache's segment events), so that more
 * calls per granule, per block or per chunk fail there. And the backup policy's copies
 * (sleep-backup.c): one page-locked backup and one copy each way per run of adjacent buffers, one
 * synchronize for all of them, the bytes read back after the wake; those copies and
 * synchronizations failing in turn. Fake only: it counts calls. */
#include <memres/memres.h>

#include "testutil-sleep.h"
#include "unmapped-ranges.h"

#include <string.h>

#define KiB ((gsize) 1 << 10)

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
  g_array_sort (segs, unmapped_ranges_cmp);
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

      g_ptr_array_add (bufs, alloc_tagged (mr, tag, sizes[(i + i / 4) % G_N_ELEMENTS (sizes)]));
      kv += tag != NULL && g_str_equal (tag, "sc-kv");
    }
  g_assert_cmpuint (kv, ==, 12);

  mt_fake_get_counts (&awake);
  sub = memres_resource_subscribe_segments (mr, unmapped_ranges_collect, unmapped, NULL, &error);
  g_assert_no_error (error);
  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_sleep (mr, "sc-kv", NULL, NULL, &error));
  n_names = mt_fake_trace_end (&names);
  g_assert_true (memres_resource_unsubscribe_segments (mr, sub, &error));
  mt_fake_get_counts (&asleep);
  assert_only (names, n_names, sleep_calls);
  g_assert_cmpuint (trace_count (names, n_names, "cuStreamSynchronize"), ==, 1);
  g_assert_cmpuint (unmapped->len, >, 0);
  /* what it released, all of it made again by the wake below */
  g_assert_cmpint (asleep.physical_handles, <, awake.physical_handles);
  n = (guint) (awake.physical_handles - asleep.physical_handles);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemRelease"), ==, n);
  {
    guint unmaps = trace_count (names, n_names, "cuMemUnmap");

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
                    unmaps, trace_count (names, n_names, "cuMemSetAccess"));
    g_assert_cmpuint (n, ==, (guint) (awake.physical_handles - asleep.physical_handles));
    g_assert_cmpuint (unmaps, ==, runs);
    g_assert_cmpuint (trace_count (names, n_names, "cuMemCreate"), ==, n);
    g_assert_cmpuint (trace_count (names, n_names, "cuMemMap"), ==, n);
    g_assert_cmpuint (trace_count (names, n_names, "cuMemSetAccess"), ==, runs);
  }
  for (guint i = 0; i < bufs->len; i++)
    mt_close_ok (bufs->pdata[i], NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

typedef struct
{
  gsize size;
  gboolean closed; /* closed before the sleep: a free block the layers keep */
} Want;

/* Buffers of one tag: a few 4 KiB ones (carved from a chunk of `cache`, or a slab of `arena`), and
 * 1 MiB and 8 MiB ones (blocks of their own in `cache`, large extents in `arena`). Every small
 * one of "kv" is closed, so that its chunk is all free. */
static const Want kv_wants[]
    = { { 4096, TRUE },     { 4096, TRUE },     { 4096, TRUE },    { 4096, TRUE },
        { 1 * MiB, FALSE }, { 8 * MiB, FALSE }, { 1 * MiB, TRUE }, { 1 * MiB, TRUE } };
static const Want w_wants[]
    = { { 4096, FALSE },    { 4096, FALSE },   { 4096, TRUE },   { 4096, TRUE },
        { 1 * MiB, FALSE }, { 1 * MiB, TRUE }, { 1 * MiB, TRUE } };

/* A sleep of tag "ot-kv" while "ot-w" stays awake (docs/sleep.md, `cache`): the free memory kv's
 * buffers left cached is released with kv's buffers, the free blocks of "ot-w" stay cached: the
 * live handles drop by exactly the granules under kv's buffers, open and closed (its free chunk
 * and free blocks of their own in `cache>vmm`: 8 handles, see below), each of which has no
 * memory then, while every granule under w's, open and closed, still has; a w allocation of
 * every size it freed then makes no driver call. The wake (backup) maps kv's live buffers again at
 * their addresses with their bytes; w's bytes were never touched. */
static const char OT_KV[] = "ot-kv", OT_W[] = "ot-w";

static void
test_other_tag_kept (gconstpointer data)
{
  const char *spec = data;
  gboolean arena = strstr (spec, "arena") != NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GHashTable) kv_live = g_hash_table_new (NULL, NULL);
  g_autoptr (GHashTable) kv_gone = g_hash_table_new (NULL, NULL);
  g_autoptr (MemresSleepPolicy) backup = NULL;
  MemresBuffer *again[G_N_ELEMENTS (w_wants)] = { NULL };
  guint w0; /* the index of w's first buffer in the set (kv's are 0 to w0 - 1) */
  FakeCudaCounts base, awake, asleep, woken;
  GHashTableIter iter;
  gpointer key;
  const char **names = NULL;
  int n_names;
  guint drop;
  TaggedSet s;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  tagged_set_init (&s, spec, OT_KV, OT_W);
  for (guint i = 0; i < G_N_ELEMENTS (kv_wants); i++)
    {
      MemresBuffer *b = s.bufs[tagged_set_add (&s, OT_KV, kv_wants[i].size)];

      /* the arena's slab sleeps whole and wakes: its closed blocks' granules are not gone */
      if (!kv_wants[i].closed)
        granules_add (kv_live, b);
      else if (!arena || kv_wants[i].size > 4096)
        granules_add (kv_gone, b);
    }
  w0 = s.n;
  for (guint i = 0; i < G_N_ELEMENTS (w_wants); i++)
    tagged_set_add (&s, OT_W, w_wants[i].size);
  /* the tags' buffers lie in granules of their own: chunks and slabs serve one tag */
  tagged_set_assert_apart (&s);
  for (guint i = 0; i < G_N_ELEMENTS (kv_wants); i++)
    if (kv_wants[i].closed)
      mt_close_ok (g_steal_pointer (&s.bufs[i]), NULL);
  for (guint i = 0; i < G_N_ELEMENTS (w_wants); i++)
    if (w_wants[i].closed)
      mt_close_ok (g_steal_pointer (&s.bufs[w0 + i]), NULL);

  backup = policy_new (MEMRES_SLEEP_BACKUP);
  mt_fake_get_counts (&awake);
  MT_CHECK (memres_resource_sleep (s.mr, OT_KV, backup, NULL, &error));
  mt_fake_get_counts (&asleep);
  drop = (guint) (awake.physical_handles - asleep.physical_handles);
  g_test_message ("%s: the sleep of kv released %u handles, under kv's %u granules", spec, drop,
                  g_hash_table_size (s.granules[0]));
  /* one handle per granule there (vmm:chunk=2MiB, the arena's granules): in cache>vmm, by hand,
   * kv's 1 MiB and 8 MiB buffers (1 + 4), its two free 1 MiB blocks (2) and its chunk of free
   * 4 KiB blocks (1); in cache>arena, its slab, its live extents and its idle granules */
  if (!arena)
    g_assert_cmpuint (drop, ==, 8);
  g_assert_cmpuint (drop, ==, g_hash_table_size (s.granules[0]));
  assert_granules (s.granules[0], FALSE);
  assert_granules (s.granules[1], TRUE);

  /* w's free blocks stayed cached: allocating them again asks the driver nothing */
  mt_fake_trace_begin ();
  for (guint i = 0; i < G_N_ELEMENTS (w_wants); i++)
    if (w_wants[i].closed)
      again[i] = alloc_tagged (s.mr, OT_W, w_wants[i].size);
  n_names = mt_fake_trace_end (&names);
  if (n_names > 0)
    g_error ("%s: allocating w's freed sizes again called the driver %d times (first %s)", spec,
             n_names, names[0]);
  tagged_set_check (&s, OT_W, FALSE);

  MT_CHECK (memres_resource_wake (s.mr, OT_KV, NULL, &error));
  mt_fake_get_counts (&woken);
  /* the live buffers' memory made again, the arena's slab too (parked with its free blocks);
   * the granules only kv's closed buffers held are released for good: in cache>vmm its chunk
   * and its two free blocks of their own (3), in cache>arena those of its freed extents */
  g_hash_table_iter_init (&iter, kv_live);
  while (g_hash_table_iter_next (&iter, &key, NULL))
    g_hash_table_remove (kv_gone, key);
  if (!arena)
    g_assert_cmpuint (g_hash_table_size (kv_gone), ==, 3);
  g_assert_cmpint (woken.physical_handles, ==,
                   awake.physical_handles - (int) g_hash_table_size (kv_gone));
  /* kv's at their addresses with their bytes, w's bytes untouched */
  tagged_set_check (&s, NULL, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (w_wants); i++)
    if (again[i] != NULL)
      mt_close_ok (again[i], NULL);
  tagged_set_clear (&s);
  mt_assert_fake_counts_equal (&base);
}

/* --- the backup policy's copies ---------------------------------------------------------- */

#define RUN_N    8
#define RUN_SIZE (64 * KiB)

/* The page-locked allocations made (the backups: a `pinned` pool's, or legacy ones) among @n
 * calls. */
static guint
host_allocations (const char **names, int n)
{
  return trace_count (names, n, "cuMemAllocFromPoolAsync")
         + trace_count (names, n, "cuMemHostAlloc");
}

static gint
address_cmp (gconstpointer a, gconstpointer b)
{
  guint64 x = memres_buffer_get_address (*(MemresBuffer *const *) a);
  guint64 y = memres_buffer_get_address (*(MemresBuffer *const *) b);

  return x < y ? -1 : x > y;
}

/* RUN_N buffers of RUN_SIZE bytes of tag "bk-w" from @mr, one run of adjacent addresses (blocks
 * of one chunk of `cache`, one slab of `arena`), in address order, each with its pattern (seed
 * 700 + i). One more is allocated and closed: `cache` hands a fresh chunk's first block out from
 * its start and the next ones from its end down, so that RUN_N + 1 buffers have RUN_N adjacent
 * ones at either end. */
static void
run_setup (MemresResource *mr, MemresBuffer **w)
{
  MemresBuffer *all[RUN_N + 1];
  guint first;

  for (guint i = 0; i <= RUN_N; i++)
    all[i] = alloc_tagged (mr, "bk-w", RUN_SIZE);
  qsort (all, RUN_N + 1, sizeof all[0], address_cmp);
  first
      = memres_buffer_get_address (all[1]) == memres_buffer_get_address (all[0]) + RUN_SIZE ? 0 : 1;
  mt_close_ok (all[first == 0 ? RUN_N : 0], NULL);
  for (guint i = 0; i < RUN_N; i++)
    {
      w[i] = all[first + i];
      if (i > 0)
        g_assert_cmpuint (memres_buffer_get_address (w[i]), ==,
                          memres_buffer_get_address (w[i - 1]) + RUN_SIZE);
      mt_write_pattern (w[i], 0, RUN_SIZE, 700 + i, NULL);
    }
}

/* A backup sleep and wake of RUN_N adjacent buffers of one tag (docs/sleep.md, sleep-backup.c):
 * one page-locked backup and one copy each way for the whole run, one cuStreamSynchronize for
 * the copies (and the sleep's one for the buffers' stream), every byte back after the wake. A
 * buffer closed while asleep splits the run (two copies back, the others' bytes intact) and keeps
 * the run's backup until the last of the run is closed or woken. */
static void
test_backup_runs (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresSleepPolicy) backup = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, NULL);
  MemresBuffer *w[RUN_N];
  FakeCudaCounts base, awake, asleep, now;
  MemresResource *mr;
  const char **names = NULL;
  int n;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (spec);
  run_setup (mr, w);

  /* one run: one backup, one copy each way */
  mt_fake_get_counts (&awake);
  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_sleep (mr, "bk-w", backup, NULL, &error));
  n = mt_fake_trace_end (&names);
  g_assert_cmpuint (trace_count (names, n, "cuMemcpyAsync"), ==, 1);
  g_assert_cmpuint (trace_count (names, n, "cuMemcpy"), ==, 0);
  g_assert_cmpuint (trace_count (names, n, "cuStreamSynchronize"), ==, 2);
  g_assert_cmpuint (host_allocations (names, n), ==, 1);
  mt_fake_get_counts (&asleep);
  g_assert_cmpint (asleep.physical_handles, <, awake.physical_handles);
  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_wake (mr, "bk-w", NULL, &error));
  n = mt_fake_trace_end (&names);
  g_assert_cmpuint (trace_count (names, n, "cuMemcpyAsync"), ==, 1);
  g_assert_cmpuint (trace_count (names, n, "cuMemcpy"), ==, 0);
  g_assert_cmpuint (trace_count (names, n, "cuStreamSynchronize"), ==, 1);
  g_assert_cmpuint (host_allocations (names, n), ==, 0);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.physical_handles, ==, awake.physical_handles);
  g_assert_cmpint (now.pool_allocations + now.allocations, ==,
                   awake.pool_allocations + awake.allocations); /* the backup freed */
  for (guint i = 0; i < RUN_N; i++)
    mt_check_pattern (w[i], 0, RUN_SIZE, 700 + i, NULL);

  /* the fourth closed while asleep: the run's backup stays for the others, two copies back */
  MT_CHECK (memres_resource_sleep (mr, "bk-w", backup, NULL, &error));
  mt_fake_get_counts (&asleep);
  mt_close_ok (w[3], NULL);
  w[3] = NULL;
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.pool_allocations + now.allocations, ==,
                   asleep.pool_allocations + asleep.allocations);
  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_wake (mr, "bk-w", NULL, &error));
  n = mt_fake_trace_end (&names);
  g_assert_cmpuint (trace_count (names, n, "cuMemcpyAsync"), ==, 2);
  g_assert_cmpuint (trace_count (names, n, "cuStreamSynchronize"), ==, 1);
  for (guint i = 0; i < RUN_N; i++)
    if (w[i] != NULL)
      mt_check_pattern (w[i], 0, RUN_SIZE, 700 + i, NULL);

  /* now two runs; every buffer closed while asleep frees both backups */
  mt_fake_get_counts (&awake);
  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_sleep (mr, "bk-w", backup, NULL, &error));
  n = mt_fake_trace_end (&names);
  g_assert_cmpuint (trace_count (names, n, "cuMemcpyAsync"), ==, 2);
  g_assert_cmpuint (trace_count (names, n, "cuStreamSynchronize"), ==, 2);
  g_assert_cmpuint (host_allocations (names, n), ==, 2);
  for (guint i = 0; i < RUN_N; i++)
    if (w[i] != NULL)
      mt_close_ok (w[i], NULL);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.pool_allocations + now.allocations, ==,
                   awake.pool_allocations + awake.allocations);
  MT_CHECK (memres_resource_wake (mr, "bk-w", NULL, &error));
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* The fake's physical handles, mappings and host allocations (backups) are what they were at
 * @was. */
static void
assert_memory_as (const FakeCudaCounts *was)
{
  FakeCudaCounts now;

  mt_fake_get_counts (&now);
  g_assert_cmpint (now.physical_handles, ==, was->physical_handles);
  g_assert_cmpint (now.mappings, ==, was->mappings);
  g_assert_cmpint (now.pool_allocations + now.allocations, ==,
                   was->pool_allocations + was->allocations);
}

/* The copies and synchronizations of a backup sleep and wake failing in turn over two runs (the
 * fourth of RUN_N buffers closed before the sleep: a failing second copy finds the first one
 * queued): all or nothing as test-sleep-faults.c's sweeps demand, the error naming the call. */
static void
test_backup_run_faults (gconstpointer data)
{
  static const struct
  {
    gboolean wake;
    const char *call;
    int nth;
  } faults[] = {
    { FALSE, "cuMemcpyAsync", 1 },       { FALSE, "cuMemcpyAsync", 2 },
    { FALSE, "cuStreamSynchronize", 2 }, { FALSE, "cuMemAllocFromPoolAsync", 2 },
    { TRUE, "cuMemcpyAsync", 1 },        { TRUE, "cuMemcpyAsync", 2 },
    { TRUE, "cuStreamSynchronize", 1 },
  };
  const char *spec = data;
  g_autoptr (MemresSleepPolicy) backup = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, NULL);
  FakeCudaCounts base;

  if (!mt_require_fake ("injects faults into the fake"))
    return;
  mt_counts_snapshot (&base);
  for (guint f = 0; f <= G_N_ELEMENTS (faults); f++)
    {
      g_autoptr (GError) error = NULL;
      MemresResource *mr = mt_new_ok (spec);
      MemresBuffer *w[RUN_N];
      FakeCudaCounts before;
      const char **names = NULL;
      gboolean wake = f < G_N_ELEMENTS (faults) && faults[f].wake, ok;
      int n;

      run_setup (mr, w);
      mt_close_ok (w[3], NULL);
      w[3] = NULL;
      if (f == G_N_ELEMENTS (faults))
        {
          /* the calls the faults above name, once without a fault */
          mt_fake_trace_begin ();
          MT_CHECK (memres_resource_sleep (mr, "bk-w", backup, NULL, &error));
          n = mt_fake_trace_end (&names);
          g_assert_cmpuint (trace_count (names, n, "cuMemcpyAsync"), ==, 2);
          g_assert_cmpuint (trace_count (names, n, "cuStreamSynchronize"), ==, 2);
          g_assert_cmpuint (trace_count (names, n, "cuMemAllocFromPoolAsync"), ==, 2);
          mt_fake_trace_begin ();
          MT_CHECK (memres_resource_wake (mr, "bk-w", NULL, &error));
          n = mt_fake_trace_end (&names);
          g_assert_cmpuint (trace_count (names, n, "cuMemcpyAsync"), ==, 2);
          g_assert_cmpuint (trace_count (names, n, "cuStreamSynchronize"), ==, 1);
        }
      else
        {
          if (wake)
            MT_CHECK (memres_resource_sleep (mr, "bk-w", backup, NULL, &error));
          mt_fake_get_counts (&before);
          mt_fake_fail_call (faults[f].call, faults[f].nth, CUDA_ERROR_UNKNOWN);
          ok = wake ? memres_resource_wake (mr, "bk-w", NULL, &error)
                    : memres_resource_sleep (mr, "bk-w", backup, NULL, &error);
          mt_fake_reset_faults ();
          g_assert_false (ok);
          g_assert_nonnull (error);
          if (error->domain == MEMRES_CUDA_ERROR)
            g_assert_nonnull (strstr (error->message, faults[f].call));
          /* as before the call: asleep with its backups (a wake), awake with none (a sleep) */
          assert_memory_as (&before);
          for (guint i = 0; i < RUN_N; i++)
            if (w[i] != NULL)
              g_assert_cmpint (memres_buffer_is_asleep (w[i]), ==, wake);
          g_clear_error (&error);
          if (wake)
            MT_CHECK (memres_resource_wake (mr, "bk-w", NULL, &error));
        }
      for (guint i = 0; i < RUN_N; i++)
        if (w[i] != NULL)
          {
            mt_check_pattern (w[i], 0, RUN_SIZE, 700 + i, NULL);
            mt_close_ok (w[i], NULL);
          }
      memres_resource_unref (mr);
      mt_assert_fake_counts_equal (&base);
    }
}

/* The index of the first (@last FALSE) or last traced call @entry, or -1. */
static int
trace_index (const char **names, int n, const char *entry, gboolean last)
{
  int found = -1;

  for (int i = 0; i < n; i++)
    if (g_str_equal (names[i], entry))
      {
        found = i;
        if (!last)
          break;
      }
  return found;
}

#define OV_N     8
#define OV_SIZE  (8 * MiB)
#define OV_BATCH (4 * MiB)

/* OV_N buffers of OV_SIZE bytes of tag "ov-w" from @mr, each with its pattern (seed 900 + i) */
static void
overlap_setup (MemresResource *mr, MemresBuffer **w)
{
  for (guint i = 0; i < OV_N; i++)
    {
      w[i] = alloc_tagged (mr, "ov-w", OV_SIZE);
      mt_write_pattern (w[i], 0, OV_SIZE, 900 + i, NULL);
    }
}

static void
overlap_check (MemresBuffer **w, gboolean asleep)
{
  for (guint i = 0; i < OV_N; i++)
    {
      g_assert_cmpint (memres_buffer_is_asleep (w[i]), ==, asleep);
      if (!asleep)
        mt_check_pattern (w[i], 0, OV_SIZE, 900 + i, NULL);
    }
}

/* A backup wake overlaps mapping the memory and restoring it (docs/sleep.md, "The wake's copies
 * as the memory comes"): with a restore batch of OV_BATCH bytes, OV_N * OV_SIZE bytes of one
 * tag span several batches, and the first restoring cuMemcpyAsync is issued before the last
 * cuMemCreate and the last cuMemMap of the wake, every copy before the wake's one
 * cuStreamSynchronize; the bytes read back are the ones written. With a batch of 0 every copy
 * comes after the last map and grant (the wake as it was). `arena` (alone or under `cache`, whose
 * tagged buffers are the arena's own extents, adjacent: one run) grants a run of adjacent
 * granules per batch and copies the run in pieces of a batch; `vmm` tells each buffer mapped. */
static void
test_restore_overlap (gconstpointer data)
{
  const char *spec = data;
  gboolean arena = strstr (spec, "arena") != NULL;
  g_autoptr (GError) error = NULL;
  FakeCudaCounts base, awake;
  MemresResource *mr;
  MemresBuffer *w[OV_N];
  const char **names = NULL;
  int n;

  if (!mt_require_fake ("traces the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (spec);
  overlap_setup (mr, w);
  for (guint pass = 0; pass < 2; pass++)
    {
      g_autoptr (MemresSleepPolicy) backup = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, NULL);
      gsize batch = pass == 0 ? OV_BATCH : 0;
      int first_copy, last_create, last_map, last_grant, sync;
      guint copies, grants;

      g_assert_true (memres_sleep_policy_set_restore_batch (backup, batch, &error));
      g_assert_no_error (error);
      mt_fake_get_counts (&awake);
      MT_CHECK (memres_resource_sleep (mr, "ov-w", backup, NULL, &error));
      mt_fake_trace_begin ();
      MT_CHECK (memres_resource_wake (mr, "ov-w", NULL, &error));
      n = mt_fake_trace_end (&names);
      first_copy = trace_index (names, n, "cuMemcpyAsync", FALSE);
      last_create = trace_index (names, n, "cuMemCreate", TRUE);
      last_map = trace_index (names, n, "cuMemMap", TRUE);
      last_grant = trace_index (names, n, "cuMemSetAccess", TRUE);
      sync = trace_index (names, n, "cuStreamSynchronize", FALSE);
      copies = trace_count (names, n, "cuMemcpyAsync");
      grants = trace_count (names, n, "cuMemSetAccess");
      g_test_message ("%s, batch %" G_GSIZE_FORMAT ": first copy at call %d of %d, last create "
                      "%d, last map %d; %u copies, %u grants",
                      spec, batch, first_copy, n, last_create, last_map, copies, grants);
      g_assert_cmpint (first_copy, >=, 0);
      g_assert_cmpint (last_create, >=, 0);
      g_assert_cmpuint (trace_count (names, n, "cuStreamSynchronize"), ==, 1);
      g_assert_cmpint (trace_index (names, n, "cuMemcpyAsync", TRUE), <, sync);
      g_assert_cmpint (last_map, <, sync);
      if (batch > 0)
        {
          g_assert_cmpint (first_copy, <, last_create);
          g_assert_cmpint (first_copy, <, last_map);
        }
      else
        {
          g_assert_cmpint (first_copy, >, last_map);
          g_assert_cmpint (first_copy, >, last_grant);
        }
      if (arena)
        {
          /* one run of adjacent granules: one grant and one copy per batch, or one of each */
          g_assert_cmpuint (grants, ==, batch > 0 ? OV_N * OV_SIZE / OV_BATCH : 1);
          g_assert_cmpuint (copies, ==, batch > 0 ? OV_N * OV_SIZE / OV_BATCH : 1);
        }
      else
        g_assert_cmpuint (copies, >=, 2);
      assert_memory_as (&awake); /* the backups freed */
      overlap_check (w, FALSE);
    }
  for (guint i = 0; i < OV_N; i++)
    mt_close_ok (w[i], NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* A wake whose later batch fails after earlier batches' copies were queued: the last
 * cuMemCreate, the last cuMemMap, the last cuMemSetAccess, or the second restoring copy (queued
 * early) fails. All or nothing: the copies queued are waited for (cuStreamSynchronize) before
 * the first memory of the wake is unmapped or released again, everything stays asleep as it was
 * (handles, mappings, the backups), the error names the call; the next wake brings every byte
 * back. */
static void
test_restore_overlap_faults (gconstpointer data)
{
  static const char *const calls[]
      = { "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemcpyAsync" };
  const char *spec = data;
  FakeCudaCounts base;

  if (!mt_require_fake ("injects faults into the fake"))
    return;
  mt_counts_snapshot (&base);
  for (guint f = 0; f < G_N_ELEMENTS (calls); f++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresSleepPolicy) backup = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, NULL);
      MemresResource *mr = mt_new_ok (spec);
      MemresBuffer *w[OV_N];
      FakeCudaCounts before;
      const char **names = NULL;
      int n, nth, first_copy, sync, undo;
      gboolean ok;

      overlap_setup (mr, w);
      g_assert_true (memres_sleep_policy_set_restore_batch (backup, OV_BATCH, NULL));
      /* the calls of a wake without a fault, to fail the last one of each (the second copy) */
      MT_CHECK (memres_resource_sleep (mr, "ov-w", backup, NULL, &error));
      mt_fake_trace_begin ();
      MT_CHECK (memres_resource_wake (mr, "ov-w", NULL, &error));
      n = mt_fake_trace_end (&names);
      nth = g_str_equal (calls[f], "cuMemcpyAsync") ? 2 : (int) trace_count (names, n, calls[f]);
      g_assert_cmpint (nth, >=, 2);

      MT_CHECK (memres_resource_sleep (mr, "ov-w", backup, NULL, &error));
      mt_fake_get_counts (&before);
      mt_fake_fail_call (calls[f], nth, CUDA_ERROR_UNKNOWN);
      mt_fake_trace_begin ();
      ok = memres_resource_wake (mr, "ov-w", NULL, &error);
      n = mt_fake_trace_end (&names);
      mt_fake_reset_faults ();
      g_assert_false (ok);
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
      g_assert_nonnull (strstr (error->message, calls[f]));
      g_assert_nonnull (strstr (error->message, "cannot wake tag \"ov-w\""));
      g_test_message ("%s: %s #%d failing: %s", spec, calls[f], nth, error->message);
      /* a copy was queued before the failure, and waited for before any memory was unmapped (a
       * handle created for the failing granule and never mapped may be released before) */
      first_copy = trace_index (names, n, "cuMemcpyAsync", FALSE);
      sync = trace_index (names, n, "cuStreamSynchronize", FALSE);
      undo = trace_index (names, n, "cuMemUnmap", FALSE);
      g_assert_cmpint (first_copy, >=, 0);
      g_assert_cmpint (sync, >, first_copy);
      g_assert_cmpint (undo, >, sync);
      assert_memory_as (&before); /* backups kept */
      overlap_check (w, TRUE);
      g_clear_error (&error);
      MT_CHECK (memres_resource_wake (mr, "ov-w", NULL, &error));
      overlap_check (w, FALSE);
      for (guint i = 0; i < OV_N; i++)
        mt_close_ok (w[i], NULL);
      memres_resource_unref (mr);
      mt_assert_fake_counts_equal (&base);
    }
}

/* memres_sleep_policy_set_restore_batch() on a policy that restores nothing from host memory */
static void
test_restore_batch_refused (void)
{
  static const MemresSleepMode modes[] = { MEMRES_SLEEP_DISCARD, MEMRES_SLEEP_FILE };

  for (guint i = 0; i < G_N_ELEMENTS (modes); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresSleepPolicy) p = memres_sleep_policy_new (modes[i], NULL);

      g_assert_false (memres_sleep_policy_set_restore_batch (p, OV_BATCH, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    }
}

/* Counts a subscriber's events of each kind (MemresSegmentEvent as index). */
static void
count_events (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
              guint64 previous_length, gpointer user_data)
{
  ((guint *) user_data)[event]++;
}

typedef struct
{
  const char *spec;
  /* the kv sleep's cuMemUnmap and cuMemRelease, the wake's cuMemCreate (= cuMemMap) and
   * cuMemSetAccess, and the cache's segment events of each */
  guint unmaps, releases, creates, grants, events;
} Fixed;

/* Fixed driver-call counts of one discard sleep and wake, worked out by hand from the layout, so
 * that a sleep or wake that makes more calls (per block, per granule, per chunk where one per
 * reservation or run serves; calls for free blocks or chunks of another tag, which stay
 * mapped) fails here even when its own handles would hide it from the raw
 * count of test_calls(). "kv" holds, among "w" buffers that stay awake: 16 buffers of 4 KiB
 * (carved from a chunk of the cache's, or the arena's slab), 2 of 1 MiB, one of 8 MiB and one of
 * 100 MiB, all open; the stack sees the sleep's tag only through the core. */
static void
test_fixed (gconstpointer data)
{
  const Fixed *want = data;
  static const gsize kv_sizes[] = { 1 * MiB, 8 * MiB, 100 * MiB, 1 * MiB };
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) bufs = g_ptr_array_new ();
  MemresResource *mr;
  FakeCudaCounts base;
  const char **names = NULL;
  guint events[MEMRES_SEGMENT_UNMAPPING + 1] = { 0 }, sub;
  int n_names;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  g_assert_cmpuint (mt_device_granularity (), ==, 2 * MiB);
  mt_counts_snapshot (&base);
  mr = mt_new_ok (want->spec);
  for (guint i = 0; i < 16; i++)
    {
      g_ptr_array_add (bufs, alloc_tagged (mr, "fx-kv", 4 * KiB));
      g_ptr_array_add (bufs, alloc_tagged (mr, "fx-w", 4 * KiB));
    }
  for (guint i = 0; i < G_N_ELEMENTS (kv_sizes); i++)
    {
      g_ptr_array_add (bufs, alloc_tagged (mr, "fx-kv", kv_sizes[i]));
      g_ptr_array_add (bufs, alloc_tagged (mr, "fx-w", kv_sizes[i]));
    }
  sub = memres_resource_subscribe_segments (mr, count_events, events, NULL, &error);
  g_assert_no_error (error);
  memset (events, 0, sizeof events); /* the existing segments, told at the subscription */

  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_sleep (mr, "fx-kv", NULL, NULL, &error));
  n_names = mt_fake_trace_end (&names);
  g_test_message ("%s sleep: %u unmaps, %u releases, %u events", want->spec,
                  trace_count (names, n_names, "cuMemUnmap"),
                  trace_count (names, n_names, "cuMemRelease"), events[MEMRES_SEGMENT_UNMAPPING]);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemUnmap"), ==, want->unmaps);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemRelease"), ==, want->releases);
  g_assert_cmpuint (trace_count (names, n_names, "cuStreamSynchronize"), ==, 1);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemCreate")
                        + trace_count (names, n_names, "cuMemMap")
                        + trace_count (names, n_names, "cuMemSetAccess")
                        + trace_count (names, n_names, "cuCtxSynchronize")
                        + trace_count (names, n_names, "cuEventSynchronize"),
                    ==, 0);
  g_assert_cmpuint (events[MEMRES_SEGMENT_UNMAPPING], ==, want->events);
  g_assert_cmpuint (events[MEMRES_SEGMENT_MAPPED], ==, 0);

  mt_fake_trace_begin ();
  MT_CHECK (memres_resource_wake (mr, "fx-kv", NULL, &error));
  n_names = mt_fake_trace_end (&names);
  g_test_message ("%s wake: %u creates, %u maps, %u grants, %u events", want->spec,
                  trace_count (names, n_names, "cuMemCreate"),
                  trace_count (names, n_names, "cuMemMap"),
                  trace_count (names, n_names, "cuMemSetAccess"), events[MEMRES_SEGMENT_MAPPED]);
  g_assert_cmpint (n_names, ==, 2 * want->creates + want->grants);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemCreate"), ==, want->creates);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemMap"), ==, want->creates);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemSetAccess"), ==, want->grants);
  g_assert_cmpuint (events[MEMRES_SEGMENT_MAPPED], ==, want->events);

  g_assert_true (memres_resource_unsubscribe_segments (mr, sub, &error));
  for (guint i = 0; i < bufs->len; i++)
    mt_close_ok (bufs->pdata[i], NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* The close of a buffer whose own record is the cache's segment (a tagged buffer over `arena`,
 * a request above max_block over `vmm`) while tags sleep: one of the sleeping tag was told
 * unmapped at the sleep and tells nothing more; one of a tag awake is told unmapped once and is
 * gone from the index (the cache keeps the sleeping tags as a mask, cache-sleep.c). */
static void
test_close_direct (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (GError) error = NULL;
  guint events[MEMRES_SEGMENT_UNMAPPING + 1] = { 0 }, sub;
  MemresBuffer *kv[2], *w;
  MemresResource *mr;
  MemresLookupInfo info;
  guint64 w_addr;
  FakeCudaCounts base;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (spec);
  kv[0] = alloc_tagged (mr, "cd-kv", 8 * MiB);
  kv[1] = alloc_tagged (mr, "cd-kv", 8 * MiB);
  w = alloc_tagged (mr, "cd-w", 8 * MiB);
  w_addr = memres_buffer_get_address (w);
  sub = memres_resource_subscribe_segments (mr, count_events, events, NULL, &error);
  g_assert_no_error (error);
  MT_CHECK (memres_resource_sleep (mr, "cd-kv", NULL, NULL, &error));
  memset (events, 0, sizeof events);
  mt_close_ok (kv[0], NULL);
  g_assert_cmpuint (events[MEMRES_SEGMENT_UNMAPPING], ==, 0);
  mt_close_ok (w, NULL);
  g_assert_cmpuint (events[MEMRES_SEGMENT_UNMAPPING], ==, 1);
  g_assert_false (memres_lookup (GSIZE_TO_POINTER ((gsize) w_addr), &info)
                  && info.segment.base == w_addr && info.segment.length == 8 * MiB);
  MT_CHECK (memres_resource_wake (mr, "cd-kv", NULL, &error));
  g_assert_cmpuint (events[MEMRES_SEGMENT_MAPPED], ==, 1);
  /* awake again: its close is told */
  mt_close_ok (kv[1], NULL);
  g_assert_cmpuint (events[MEMRES_SEGMENT_UNMAPPING], ==, 2);
  g_assert_true (memres_resource_unsubscribe_segments (mr, sub, &error));
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* The counts (granules of 2 MiB). cache>vmm: the 4 KiB buffers share a chunk of the cache that
 * holds kv's blocks alone (chunks serve one tag), so it sleeps whole with them (a `vmm` buffer of
 * one 2 MiB chunk); the two 1 MiB buffers are blocks of their own (one 2 MiB chunk each), the
 * 8 MiB one a block of its own (4 chunks), the 100 MiB one a request of its own (50 chunks):
 * 57 handles in 5 reservations, one segment of the cache each. cache>arena: every tagged
 * buffer is the arena's own allocation (a segment of the cache each: 20), placed by tag in one
 * run of adjacent granules: the slab of the 4 KiB ones, the two 1 MiB extents in one granule, 4
 * and 50 granules: 56 handles, 1 run. arena alone: the same 56 granules, a segment each. */
static const Fixed fixed_cache_vmm = { "cache:chunk=2MiB>vmm:chunk=2MiB", 5, 57, 57, 5, 5 };
static const Fixed fixed_cache_arena = { "cache>arena", 1, 56, 56, 1, 20 };
static const Fixed fixed_arena = { "arena", 1, 56, 56, 1, 56 };

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_data_func ("/sleep-calls/cache-vmm", "cache>vmm", test_calls);
  g_test_add_data_func ("/sleep-calls/cache-arena", "cache>arena", test_calls);
  g_test_add_data_func ("/sleep-calls/arena", "arena", test_calls);
  g_test_add_data_func ("/sleep-calls/vmm", "vmm", test_calls);
  g_test_add_data_func ("/sleep-calls/cache-vmm/other-tag-kept", "cache:chunk=2MiB>vmm:chunk=2MiB",
                        test_other_tag_kept);
  g_test_add_data_func ("/sleep-calls/cache-arena/other-tag-kept", "cache>arena",
                        test_other_tag_kept);
  g_test_add_data_func ("/sleep-calls/cache-vmm/backup-runs", "cache>vmm", test_backup_runs);
  g_test_add_data_func ("/sleep-calls/cache-arena/backup-runs", "cache>arena", test_backup_runs);
  g_test_add_data_func ("/sleep-calls/arena/backup-runs", "arena", test_backup_runs);
  g_test_add_data_func ("/sleep-calls/cache-vmm/backup-run-faults", "cache>vmm",
                        test_backup_run_faults);
  g_test_add_data_func ("/sleep-calls/arena/backup-run-faults", "arena", test_backup_run_faults);
  g_test_add_data_func ("/sleep-calls/arena/restore-overlap", "arena", test_restore_overlap);
  g_test_add_data_func ("/sleep-calls/cache-arena/restore-overlap", "cache>arena",
                        test_restore_overlap);
  g_test_add_data_func ("/sleep-calls/vmm/restore-overlap", "vmm:chunk=2MiB", test_restore_overlap);
  g_test_add_data_func ("/sleep-calls/cache-vmm/restore-overlap", "cache>vmm:chunk=2MiB",
                        test_restore_overlap);
  g_test_add_data_func ("/sleep-calls/arena/restore-overlap-faults", "arena",
                        test_restore_overlap_faults);
  g_test_add_data_func ("/sleep-calls/vmm/restore-overlap-faults", "vmm:chunk=2MiB",
                        test_restore_overlap_faults);
  g_test_add_func ("/sleep-calls/restore-batch-refused", test_restore_batch_refused);
  g_test_add_data_func ("/sleep-calls/cache-vmm/close-direct", "cache:max_block=4MiB>vmm",
                        test_close_direct);
  g_test_add_data_func ("/sleep-calls/cache-arena/close-direct", "cache>arena", test_close_direct);
  g_test_add_data_func ("/sleep-calls/cache-vmm/fixed", &fixed_cache_vmm, test_fixed);
  g_test_add_data_func ("/sleep-calls/cache-arena/fixed", &fixed_cache_arena, test_fixed);
  g_test_add_data_func ("/sleep-calls/arena/fixed", &fixed_arena, test_fixed);
  return g_test_run ();
}

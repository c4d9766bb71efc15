/* test-sleep-chunks.c: a tag's small buffers, carved from the chunks of `cache`, sleep with their
 * chunks (docs/sleep.md, `cache`; issue 34): a chunk whose blocks are all free or the sleeping
 * tag's buffers is put to sleep whole by `vmm` below, its physical memory given back, and woken
 * at the same address with the live buffers' bytes restored by the backup policy. Asserted on the
 * fake driver: the bytes given back against the bytes slept (cuMemGetInfo), the granules of the
 * other tag still mapped and their bytes untouched, the driver calls of the sleep and wake, the
 * addresses and bytes after the wake, the close of a sleeping chunk's buffers (the chunk goes
 * back with its last one), and every driver call of the sleep and of the wake failing in turn;
 * and the tag a chunk's segment carries (the tag its blocks serve), in its segment events and
 * memres_lookup()'s answer, and `vmm`'s segment under it too. The buffers of two tags are
 * testutil-sleep.c's TaggedSet. Fake only (but the segment tags): it counts calls and fails them. */
#include <memres/memres.h>

#include "testutil-sleep.h"

#include <string.h>

/* `vmm` with chunks of one granule (2 MiB on the fake): one physical handle per cache chunk */
#define SPEC "cache>vmm:chunk=2MiB"
#define N    480

static const char KV[] = "ck-kv", W[] = "ck-w";

/* sizes of the chunk classes (at most chunk / 16 = 128 KiB), some not of a class's size */
static const gsize sizes[] = { 256, 1000, 4096, 5000, 12 << 10, 20 << 10, 64 << 10, 100 << 10 };

/* @n_bufs buffers (at most N) of kv, w and no tag in turn, of the sizes above, each of a tag
 * written with its pattern (TaggedSet: tag[0] kv, tag[1] w). */
static void
set_up (TaggedSet *s, guint n_bufs)
{
  tagged_set_init (s, SPEC, KV, W);
  for (guint i = 0; i < n_bufs; i++)
    tagged_set_add (s,
                    i % 3 == 0   ? KV
                    : i % 3 == 1 ? W
                                 : NULL,
                    sizes[(i * 7 + i / 3) % G_N_ELEMENTS (sizes)]);
}

/* Backup: kv's chunks sleep whole and give back at least 99 % of kv's bytes (all of its
 * granules: every one of its chunks); w's granules stay mapped with their bytes; the wake makes
 * and maps exactly kv's granules again and restores kv's bytes at the same addresses. */
static void
test_backup (void)
{
  g_autoptr (MemresSleepPolicy) backup = NULL;
  g_autoptr (GError) error = NULL;
  FakeCudaCounts base, awake, asleep, woken;
  const char **names = NULL;
  guint64 f0, f1, given;
  guint n_kv;
  int n_names;
  TaggedSet s;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  set_up (&s, N);
  n_kv = g_hash_table_size (s.granules[0]);
  tagged_set_assert_apart (&s); /* the tags' buffers lie in chunks of their own */
  backup = policy_new (MEMRES_SLEEP_BACKUP);
  mt_fake_get_counts (&awake);
  f0 = device_free_bytes ();
  mt_fake_trace_begin ();
  sleep_ok (s.mr, KV, backup);
  n_names = mt_fake_trace_end (&names);
  f1 = device_free_bytes ();
  mt_fake_get_counts (&asleep);
  given = f1 - f0;
  g_test_message ("%u kv buffers of %" G_GUINT64_FORMAT " bytes in %u granules: %" G_GUINT64_FORMAT
                  " bytes given back (%.4f)",
                  N / 3, s.bytes[0], n_kv, given, (double) given / (double) s.bytes[0]);
  g_assert_cmpfloat ((double) given / (double) s.bytes[0], >=, 0.99);
  g_assert_cmpuint (given, ==, (guint64) n_kv * mt_device_granularity ());
  /* one handle, one unmap and one release per chunk; no device wait (no free block of kv's
   * chunks was ever handed out) */
  g_assert_cmpint (awake.physical_handles - asleep.physical_handles, ==, (int) n_kv);
  g_assert_cmpint (awake.mappings - asleep.mappings, ==, (int) n_kv);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemRelease"), ==, n_kv);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemUnmap"), ==, n_kv);
  g_assert_cmpuint (trace_count (names, n_names, "cuCtxSynchronize"), ==, 0);
  g_assert_cmpint (asleep.reservations, ==, awake.reservations);
  assert_granules (s.granules[0], FALSE);
  assert_granules (s.granules[1], TRUE);
  tagged_set_check (&s, W, FALSE);
  tagged_set_check (&s, KV, TRUE);

  mt_fake_trace_begin ();
  wake_ok (s.mr, KV);
  n_names = mt_fake_trace_end (&names);
  mt_fake_get_counts (&woken);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemCreate"), ==, n_kv);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemMap"), ==, n_kv);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemSetAccess"), ==, n_kv);
  g_assert_cmpint (woken.physical_handles, ==, awake.physical_handles);
  g_assert_cmpint (woken.mappings, ==, awake.mappings);
  assert_granules (s.granules[0], TRUE);
  tagged_set_check (&s, NULL, FALSE);
  tagged_set_clear (&s);
  mt_assert_fake_counts_equal (&base);
}

/* A free block of a sleeping chunk that was handed out before (a kv buffer closed) may have work
 * queued on it: the sleep synchronizes the device once, and still puts the chunk to sleep whole;
 * a buffer closed asleep is parked with the chunk; after the (backup) wake the live buffers have
 * their bytes and the freed blocks are allocated again with no driver call. */
static void
test_freed_block_waits (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresSleepPolicy) backup = policy_new (MEMRES_SLEEP_BACKUP);
  MemresResource *mr;
  MemresBuffer *bufs[8];
  FakeCudaCounts base, awake, asleep;
  const char **names = NULL;
  int n_names;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  mr = new_ok (SPEC);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      bufs[i] = alloc_tagged (mr, KV, 4096);
      mt_write_pattern (bufs[i], 0, 4096, 10 + i, NULL);
    }
  for (guint i = 0; i < 3; i++)
    mt_close_ok (g_steal_pointer (&bufs[i]), NULL);
  mt_fake_get_counts (&awake);
  mt_fake_trace_begin ();
  sleep_ok (mr, KV, backup);
  n_names = mt_fake_trace_end (&names);
  mt_fake_get_counts (&asleep);
  g_assert_cmpuint (trace_count (names, n_names, "cuCtxSynchronize"), ==, 1);
  g_assert_cmpint (awake.physical_handles - asleep.physical_handles, ==, 1);
  g_assert_false (granule_mapped (memres_buffer_get_address (bufs[3])));
  /* closed asleep: parked with the chunk's free blocks (its memory is the chunk's) */
  mt_close_ok (g_steal_pointer (&bufs[4]), NULL);
  g_assert_false (granule_mapped (memres_buffer_get_address (bufs[3])));
  wake_ok (mr, KV);
  g_assert_true (granule_mapped (memres_buffer_get_address (bufs[3])));
  for (guint i = 3; i < G_N_ELEMENTS (bufs); i++)
    if (bufs[i] != NULL)
      mt_check_pattern (bufs[i], 0, 4096, 10 + i, NULL);
  /* the parked blocks are free again: four allocations of kv ask the driver nothing */
  mt_fake_trace_begin ();
  for (guint i = 0; i < 5; i++)
    if (bufs[i] == NULL)
      bufs[i] = alloc_tagged (mr, KV, 4096);
  n_names = mt_fake_trace_end (&names);
  g_assert_cmpint (n_names, ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* Discard: the addresses are kept across the wake; then kv sleeps again and its buffers are
 * closed asleep: each chunk's address range goes back with the last of its buffers (never
 * before), no memory is made for them, and a wake with none left makes no driver call. */
static void
test_discard_close_asleep (void)
{
  g_autoptr (GError) error = NULL;
  FakeCudaCounts base, awake, asleep, now;
  const char **names = NULL;
  guint n_kv, last = 0;
  int n_names;
  TaggedSet s;

  if (!mt_require_fake ("counts the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  set_up (&s, N);
  n_kv = g_hash_table_size (s.granules[0]);
  sleep_ok (s.mr, KV, NULL);
  wake_ok (s.mr, KV);
  tagged_set_check (&s, W, FALSE);
  for (guint i = 0; i < N; i++)
    if (s.tags[i] == KV)
      {
        g_assert_cmpuint (memres_buffer_get_address (s.bufs[i]), ==, s.addrs[i]);
        g_assert_false (memres_buffer_is_asleep (s.bufs[i]));
        last = i;
      }

  mt_fake_get_counts (&awake);
  sleep_ok (s.mr, KV, NULL);
  mt_fake_get_counts (&asleep);
  g_assert_cmpint (awake.physical_handles - asleep.physical_handles, ==, (int) n_kv);
  mt_fake_trace_begin ();
  for (guint i = 0; i < N; i++)
    if (s.tags[i] == KV && i != last)
      mt_close_ok (g_steal_pointer (&s.bufs[i]), NULL);
  mt_fake_get_counts (&now);
  /* every chunk but the last buffer's gone, by cuMemAddressFree alone: nothing was mapped */
  g_assert_cmpint (now.reservations, ==, asleep.reservations - (int) n_kv + 1);
  g_assert_cmpint (now.physical_handles, ==, asleep.physical_handles);
  mt_close_ok (g_steal_pointer (&s.bufs[last]), NULL);
  n_names = mt_fake_trace_end (&names);
  mt_fake_get_counts (&now);
  g_assert_cmpint (now.reservations, ==, asleep.reservations - (int) n_kv);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemAddressFree"), ==, n_kv);
  g_assert_cmpuint (trace_count (names, n_names, "cuMemUnmap")
                        + trace_count (names, n_names, "cuMemRelease")
                        + trace_count (names, n_names, "cuMemCreate"),
                    ==, 0);
  mt_fake_trace_begin ();
  wake_ok (s.mr, KV);
  n_names = mt_fake_trace_end (&names);
  g_assert_cmpint (n_names, ==, 0);
  tagged_set_check (&s, W, FALSE);
  /* the cache says no byte of kv is used or parked */
  {
    g_autoptr (GVariant) counters = memres_resource_get_counters (s.mr, &error);
    guint64 parked = 1;

    g_assert_no_error (error);
    g_assert_true (g_variant_lookup (counters, "parked", "t", &parked));
    g_assert_cmpuint (parked, ==, 0);
  }
  tagged_set_clear (&s);
  mt_assert_fake_counts_equal (&base);
}

/* The close of a sleeping chunk's last buffer with a driver call failing (vmm-faults' rule for a
 * close): when the wait for its stream fails (the core's, before the cache's slot), nothing is
 * released: the buffer stays open and asleep, its chunk asleep, and closes
 * later; when the driver refuses to free the chunk's address range, the error names the call
 * (MEMRES_CUDA_ERROR, the fake's code), `vmm` released the rest all the same (the buffer is
 * closed) and that range alone is left. */
static void
test_close_fault (void)
{
  static const struct
  {
    const char *entry;
    int nth;
    gboolean stays_open;
    int reservations; /* left behind */
  } cases[] = {
    { "cuCtxGetCurrent", 1, TRUE, 0 },
    { "cuStreamSynchronize", 1, TRUE, 0 },
    { "cuMemAddressFree", 1, FALSE, 1 },
  };
  FakeCudaCounts expected;

  if (!mt_require_fake ("fails the driver calls of the fake"))
    return;
  mt_counts_snapshot (&expected);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresResource *mr = new_ok (SPEC);
      MemresBuffer *buf = alloc_tagged (mr, KV, 4096);
      guint64 address = memres_buffer_get_address (buf);
      FakeCudaCounts asleep, now;

      sleep_ok (mr, KV, NULL);
      mt_fake_get_counts (&asleep);
      g_test_message ("the close with %s #%d failing", cases[i].entry, cases[i].nth);
      mt_fake_fail_call (cases[i].entry, cases[i].nth, CUDA_ERROR_UNKNOWN);
      g_assert_false (memres_buffer_close (buf, NULL, &error));
      mt_fake_reset_faults ();
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
      g_assert_nonnull (strstr (error->message, cases[i].entry));
      g_assert_cmpint (memres_buffer_is_closed (buf), ==, !cases[i].stays_open);
      if (cases[i].stays_open)
        {
          mt_fake_get_counts (&now);
          g_assert_cmpint (now.reservations, ==, asleep.reservations);
          g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
          g_assert_true (memres_buffer_is_asleep (buf));
          g_assert_false (granule_mapped (address));
          /* the chunk is the cache's still: the wake maps it again, the close then frees it */
          wake_ok (mr, KV);
          g_assert_true (granule_mapped (address));
          sleep_ok (mr, KV, NULL);
          g_clear_error (&error);
          g_assert_true (memres_buffer_close (buf, NULL, &error));
          g_assert_no_error (error);
        }
      memres_buffer_unref (buf);
      wake_ok (mr, KV);
      memres_resource_unref (mr);
      expected.reservations += cases[i].reservations;
      mt_assert_fake_counts_equal (&expected);
    }
}

/* --- faults: each driver call of the sleep, and of the wake, failing in turn ------------------ */

typedef struct
{
  TaggedSet set;
  MemresSleepPolicy *policy;
} Sweep;

/* kv's buffers awake with their bytes, or asleep; w's awake with theirs */
static void
sweep_check (Sweep *sw, gboolean asleep)
{
  tagged_set_check (&sw->set, KV, asleep);
  tagged_set_check (&sw->set, W, FALSE);
}

static gboolean
op_sleep (gpointer data, GError **error)
{
  Sweep *sw = data;

  if (memres_resource_sleep (sw->set.mr, KV, sw->policy, NULL, error))
    return TRUE;
  sweep_check (sw, FALSE); /* all or nothing: every buffer awake and intact */
  return FALSE;
}

static void
undo_sleep (gpointer data)
{
  Sweep *sw = data;

  wake_ok (sw->set.mr, KV);
  sweep_check (sw, FALSE);
}

static gboolean
op_wake (gpointer data, GError **error)
{
  Sweep *sw = data;

  if (memres_resource_wake (sw->set.mr, KV, NULL, error))
    return TRUE;
  sweep_check (sw, TRUE); /* still asleep as it was */
  return FALSE;
}

/* (the bytes read back here, outside the operation the sweep traces and fails) */
static void
undo_wake (gpointer data)
{
  Sweep *sw = data;

  sweep_check (sw, FALSE);
  sleep_ok (sw->set.mr, KV, sw->policy);
}

static void
run_sweep (gboolean wake)
{
  /* sleep: a release the driver refuses leaves the handle with the buffer, mapped again at the
   * wake (vmm-sleep.c): no failure. wake: the backups are freed after it succeeded (a warning) */
  static const char *const ignore_sleep[] = { "cuMemRelease", NULL };
  static const char *const ignore_wake[] = { "cuMemFreeAsync", "cuMemFreeHost", NULL };
  g_autoptr (MemresResource) host = NULL;
  FakeCudaCounts base;
  Sweep sw;
  int swept;

  if (!mt_require_fake ("fails the driver calls of the fake"))
    return;
  mt_counts_snapshot (&base);
  host = new_ok ("pinned:fallback=true");
  /* kv and w in chunks of several classes; a kv buffer closed, so that a free block of a
   * sleeping chunk was handed out before (the sleep's device wait) */
  set_up (&sw.set, 60);
  mt_close_ok (g_steal_pointer (&sw.set.bufs[3]), NULL);
  sw.policy = policy_new (MEMRES_SLEEP_BACKUP);
  g_assert_true (memres_sleep_policy_set_host_resource (sw.policy, host, NULL));
  if (!wake)
    {
      const char **names = NULL;
      int n_names;

      /* the calls swept include the device wait for the freed block's chunk */
      mt_fake_trace_begin ();
      sleep_ok (sw.set.mr, KV, sw.policy);
      n_names = mt_fake_trace_end (&names);
      g_assert_cmpuint (trace_count (names, n_names, "cuCtxSynchronize"), ==, 1);
      undo_sleep (&sw);
    }
  else
    sleep_ok (sw.set.mr, KV, sw.policy);
  swept = mt_fault_sweep (wake ? "a wake of cache chunks" : "a sleep of cache chunks",
                          wake ? op_wake : op_sleep, wake ? undo_wake : undo_sleep, &sw,
                          CUDA_ERROR_UNKNOWN, wake ? ignore_wake : ignore_sleep);
  g_test_message ("%d calls swept", swept);
  g_assert_cmpint (swept, >=, wake ? 3 : 3);
  if (wake)
    wake_ok (sw.set.mr, KV);
  sweep_check (&sw, FALSE);
  tagged_set_clear (&sw.set);
  memres_sleep_policy_unref (sw.policy);
  g_clear_pointer (&host, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_faults_sleep (void)
{
  run_sweep (FALSE);
}

static void
test_faults_wake (void)
{
  run_sweep (TRUE);
}

/* One segment event of the cache's: its kind, range and tag. */
typedef struct
{
  MemresSegmentEvent event;
  guint64 base, length;
  const char *tag;
  guint32 tag_id;
} SegEvent;

static void
record_segment (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *segment,
                guint64 previous_length, gpointer user_data)
{
  SegEvent e = { event, segment->base, segment->length, segment->tag, segment->tag_id };

  g_array_append_val ((GArray *) user_data, e);
}

/* The event of @events of kind @event for the segment at @base (exactly one). */
static const SegEvent *
event_at (GArray *events, MemresSegmentEvent event, guint64 base)
{
  const SegEvent *found = NULL;

  for (guint i = 0; i < events->len; i++)
    {
      const SegEvent *e = &g_array_index (events, SegEvent, i);

      if (e->event != event || e->base != base)
        continue;
      g_assert_null (found);
      found = e;
    }
  g_assert_nonnull (found);
  return found;
}

/* A chunk serves one tag (and so does a block of its own): the cache's segment of each carries
 * that tag, as a `vmm` buffer's does, in its mapped event, in memres_lookup()'s answer and in its
 * about-to-be-unmapped event, so that a registrar can tell the segments a tag's sleep unmaps
 * (those of that tag, each told unmapped and mapped again with it); an untagged buffer's chunk
 * carries none; and `vmm`'s segment under each carries the same tag (issue 34), mapped, slept,
 * woken and unmapped. kv: four 4 KiB buffers in one chunk and one of 1 MiB (a block of its own); w
 * and no tag: a 4 KiB buffer each, in a chunk of their own. */
static void
test_segment_tags (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) events = g_array_new (FALSE, FALSE, sizeof (SegEvent));
  g_autoptr (GArray) vmm_events = g_array_new (FALSE, FALSE, sizeof (SegEvent));
  static const char *const tags[] = { KV, KV, KV, KV, KV, W, NULL };
  static const gsize bsizes[] = { 4096, 4096, 4096, 4096, 1 << 20, 4096, 4096 };
  MemresBuffer *bufs[G_N_ELEMENTS (tags)];
  guint64 bases[G_N_ELEMENTS (tags)], kv_bytes = 0;
  guint32 kv_id = 0, w_id = 0;
  MemresResource *mr;
  guint32 ids[G_N_ELEMENTS (tags)];
  MemresResource *vmm;
  guint sub, vmm_sub, n_unmapping = 0;

  if (!require_device ())
    return;
  mr = new_ok (SPEC);
  vmm = memres_resource_get_upstream (mr);
  sub = memres_resource_subscribe_segments (mr, record_segment, events, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (events->len, ==, 0);
  vmm_sub = memres_resource_subscribe_segments (vmm, record_segment, vmm_events, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (vmm_events->len, ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS (tags); i++)
    bufs[i] = alloc_tagged (mr, tags[i], bsizes[i]);
  /* kv's chunk, kv's block, w's chunk, the untagged chunk */
  g_assert_cmpuint (events->len, ==, 4);
  for (guint i = 0; i < G_N_ELEMENTS (tags); i++)
    {
      MemresLookupInfo info;
      const SegEvent *e;

      g_assert_true (memres_lookup (memres_buffer_get_pointer (bufs[i]), &info));
      g_assert_true (info.resource == mr); /* the cache's segment, inside vmm's */
      g_assert_cmpstr (info.segment.tag, ==, tags[i]);
      bases[i] = info.segment.base;
      ids[i] = info.segment.tag_id;
      e = event_at (events, MEMRES_SEGMENT_MAPPED, bases[i]);
      g_assert_cmpuint (e->length, ==, info.segment.length);
      g_assert_cmpstr (e->tag, ==, tags[i]);
      g_assert_cmpuint (e->tag_id, ==, info.segment.tag_id);
      if (tags[i] == NULL)
        g_assert_cmpuint (info.segment.tag_id, ==, 0);
      else if (tags[i] == KV)
        {
          g_assert_cmpuint (info.segment.tag_id, !=, 0);
          g_assert_true (kv_id == 0 || kv_id == info.segment.tag_id);
          kv_id = info.segment.tag_id;
          if (i == 0 || i == 4)
            kv_bytes += info.segment.length;
        }
      else
        w_id = info.segment.tag_id;
    }
  g_assert_cmpuint (w_id, !=, 0);
  g_assert_cmpuint (w_id, !=, kv_id);
  for (guint i = 1; i < 4; i++)
    g_assert_cmpuint (bases[i], ==, bases[0]); /* one chunk */
  g_assert_cmpuint (bases[4], !=, bases[0]);
  g_assert_cmpuint (bases[5], !=, bases[0]);
  g_assert_cmpuint (bases[6], !=, bases[5]);
  /* vmm's segment under each (a chunk or a block of its own is a `vmm` buffer, at its base) is
   * mapped with the tag the cache's carries: the cache tells it (memres_upstream_allocate_for_tag)
   */
  g_assert_cmpuint (vmm_events->len, ==, 4);
  for (guint i = 0; i < G_N_ELEMENTS (tags); i++)
    {
      const SegEvent *e = event_at (vmm_events, MEMRES_SEGMENT_MAPPED, bases[i]);

      g_assert_cmpstr (e->tag, ==, tags[i]);
      g_assert_cmpuint (e->tag_id, ==, ids[i]);
    }

  /* the sleep tells kv's chunk and block unmapped, the wake mapped, each with kv's tag; so does
   * vmm below, for its segments under them */
  g_array_set_size (vmm_events, 0);
  assert_sleep_segment_events (mr, KV, bufs, 5, 2, kv_bytes);
  g_test_message ("vmm's events of the sleep and wake: %u", vmm_events->len);
  g_assert_cmpuint (vmm_events->len, ==, 4);
  for (guint i = 0; i < vmm_events->len; i++)
    {
      const SegEvent *e = &g_array_index (vmm_events, SegEvent, i);

      g_assert_true (e->base == bases[0] || e->base == bases[4]);
      g_assert_cmpstr (e->tag, ==, KV);
      g_assert_cmpuint (e->tag_id, ==, kv_id);
    }

  /* their return to the upstream tells each segment unmapped with the tag it was mapped with */
  for (guint i = 0; i < G_N_ELEMENTS (tags); i++)
    mt_close_ok (bufs[i], NULL);
  g_array_set_size (events, 0);
  g_array_set_size (vmm_events, 0);
  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < G_N_ELEMENTS (tags); i++)
    {
      const SegEvent *e;

      if (i > 0 && i < 4)
        continue;
      e = event_at (events, MEMRES_SEGMENT_UNMAPPING, bases[i]);
      g_assert_cmpstr (e->tag, ==, tags[i]);
      g_assert_cmpuint (e->tag_id, ==, tags[i] == NULL ? 0 : tags[i] == KV ? kv_id : w_id);
      e = event_at (vmm_events, MEMRES_SEGMENT_UNMAPPING, bases[i]);
      g_assert_cmpstr (e->tag, ==, tags[i]);
      g_assert_cmpuint (e->tag_id, ==, ids[i]);
      n_unmapping++;
    }
  g_assert_cmpuint (n_unmapping, ==, 4);
  g_assert_cmpuint (events->len, ==, 4);
  g_assert_cmpuint (vmm_events->len, ==, 4);
  g_assert_true (memres_resource_unsubscribe_segments (vmm, vmm_sub, &error));
  g_assert_true (memres_resource_unsubscribe_segments (mr, sub, &error));
  memres_resource_unref (mr);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  mt_log_capture_init ();
  g_test_add_func ("/sleep-chunks/cache-vmm/backup", test_backup);
  g_test_add_func ("/sleep-chunks/cache-vmm/freed-block-waits", test_freed_block_waits);
  g_test_add_func ("/sleep-chunks/cache-vmm/discard-close-asleep", test_discard_close_asleep);
  g_test_add_func ("/sleep-chunks/cache-vmm/close-fault", test_close_fault);
  g_test_add_func ("/sleep-chunks/cache-vmm/faults/sleep", test_faults_sleep);
  g_test_add_func ("/sleep-chunks/cache-vmm/faults/wake", test_faults_wake);
  g_test_add_func ("/sleep-chunks/cache-vmm/segment-tags", test_segment_tags);
  return g_test_run ();
}

/* test-segment-scale.c: the segment index (core/segment-index.c) at scale, on the `arena` kind
 * over the fake driver (suite fake; a device of 64 GiB, FAKECUDA_DEVICE_MEMORY, whose memory is
 * never touched): 10,000 granules mapped, one segment each, then every other one unmapped; each
 * of the 5,000 left is found at its base, middle and last byte with its resource, base, length
 * and offset, and the bytes just outside it (one before, one past: unmapped granules) are not.
 * The time of each phase is printed (g_test_message; figures belong in bench/RESULTS.md, not in
 * assertions). Then readers race a thread that maps and unmaps granules among thousands of fixed
 * ones: every answer is the right segment or "not found", never another's. And thousands of
 * small segments, many to a page (host memory, no driver): each probe answers its range or
 * nothing, before and after every other one is unmapped. And segments of 256 MiB and 3 GiB
 * (`vmm`, and a `cache>dmr` chunk above max_block) found at their base, middle and last byte and
 * not just outside, while readers race a thread that closes and allocates such segments again. */
#include "testutil.h"

#include "arena-check.h"

#include "segment-check.h"

#include <sys/resource.h>

#define N_GRANULES 10000

/* The fake driver's granules are memfds: as many open files as granules. */
static gboolean
enough_files (rlim_t n)
{
  struct rlimit rl;

  g_assert_cmpint (getrlimit (RLIMIT_NOFILE, &rl), ==, 0);
  if (rl.rlim_cur < n && rl.rlim_max >= n)
    {
      rl.rlim_cur = n;
      g_assert_cmpint (setrlimit (RLIMIT_NOFILE, &rl), ==, 0);
    }
  if (rl.rlim_cur >= n)
    return TRUE;
  {
    g_autofree char *why
        = g_strdup_printf ("the fake driver needs %lu open files, one a granule; the limit is %lu",
                           (unsigned long) n, (unsigned long) rl.rlim_max);

    g_test_skip (why);
  }
  return FALSE;
}

/* The live segments of the recorder's resource: base -> length (guint64 keys and values). */
static GHashTable *
live_segments (Recorder *r)
{
  GHashTable *live = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);

  g_mutex_lock (&r->lock);
  for (guint i = 0; i < r->recs->len; i++)
    {
      const Rec *rec = &g_array_index (r->recs, Rec, i);

      if (rec->event == MEMRES_SEGMENT_UNMAPPING)
        g_assert_true (g_hash_table_remove (live, &rec->seg.base));
      else
        g_hash_table_insert (live, g_memdup2 (&rec->seg.base, 8), g_memdup2 (&rec->seg.length, 8));
    }
  g_mutex_unlock (&r->lock);
  return live;
}

static gboolean
in_live (GHashTable *live, guint64 a, gsize g)
{
  guint64 base = a & ~(guint64) (g - 1);

  return g_hash_table_contains (live, &base);
}

static void
check_found (MemresResource *mr, guint64 base, guint64 length, guint64 a)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  g_assert_true (memres_lookup ((gconstpointer) (guintptr) a, &info));
  g_assert_true (info.resource == mr);
  g_assert_cmphex (info.segment.base, ==, base);
  g_assert_cmpuint (info.segment.length, ==, length);
  g_assert_cmpint (info.segment.device, ==, memres_resource_get_device (mr));
  g_assert_cmpuint (info.offset, ==, a - base);
}

static void
check_missing (guint64 a)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  g_assert_false (memres_lookup ((gconstpointer) (guintptr) a, &info));
  g_assert_cmpuint (info.offset, ==, G_GUINT64_CONSTANT (0xa5a5a5a5a5a5a5a5));
}

/* Every live segment found at its base, middle and last byte; its outside not, when no live
 * segment is there. Returns how many were checked. */
static guint
check_all (MemresResource *mr, GHashTable *live, gsize g)
{
  GHashTableIter it;
  gpointer k, v;
  guint n = 0;

  g_hash_table_iter_init (&it, live);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      guint64 base = *(guint64 *) k, length = *(guint64 *) v;

      check_found (mr, base, length, base);
      check_found (mr, base, length, base + length / 2);
      check_found (mr, base, length, base + length - 1);
      if (!in_live (live, base - 1, g))
        check_missing (base - 1);
      if (!in_live (live, base + length, g))
        check_missing (base + length);
      n++;
    }
  return n;
}

static void
test_twenty_thousand (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GHashTable) live = NULL;
  g_autoptr (GPtrArray) bufs = g_ptr_array_new ();
  g_autofree guint64 *addrs = g_new (guint64, N_GRANULES);
  Recorder *r;
  guint id, missing_between = 0;
  gsize g;
  gdouble t;

  if (!mt_require_devices (1) || !enough_files (N_GRANULES + 1000))
    return;
  mr = mt_new_ok ("arena:reserve=64GiB");
  g = gran (mr);
  r = recorder_new ();
  id = subscribe (mr, r);

  /* each buffer one granule: a granule mapped (a segment added) per allocation */
  g_test_timer_start ();
  for (guint i = 0; i < N_GRANULES; i++)
    {
      g_ptr_array_add (bufs, mt_alloc_ok (mr, g, NULL));
      addrs[i] = memres_buffer_get_address (g_ptr_array_index (bufs, i));
    }
  t = g_test_timer_elapsed ();
  g_test_message ("%u granules mapped, one segment each: %.3f s, %.2f us a granule", N_GRANULES, t,
                  t * 1e6 / N_GRANULES);
  live = live_segments (r);
  g_assert_cmpuint (g_hash_table_size (live), ==, N_GRANULES);
  g_test_timer_start ();
  g_assert_cmpuint (check_all (mr, live, g), ==, N_GRANULES);
  t = g_test_timer_elapsed ();
  g_test_message ("%u segments looked up 5 times each: %.1f ns a lookup", N_GRANULES,
                  t * 1e9 / (5.0 * N_GRANULES));
  g_clear_pointer (&live, g_hash_table_unref);

  /* every other one closed and trimmed: segments removed from the middle of the index */
  for (guint i = 0; i < N_GRANULES; i += 2)
    mt_close_ok (g_ptr_array_index (bufs, i), NULL);
  g_test_timer_start ();
  trim_ok (mr);
  t = g_test_timer_elapsed ();
  g_test_message ("%u granules unmapped from among %u: %.3f s, %.2f us a granule", N_GRANULES / 2,
                  N_GRANULES, t, t * 1e6 / (N_GRANULES / 2));
  live = live_segments (r);
  g_assert_cmpuint (g_hash_table_size (live), ==, N_GRANULES / 2);
  g_assert_cmpuint (check_all (mr, live, g), ==, N_GRANULES / 2);
  /* the unmapped granules between them are misses throughout */
  for (guint i = 1; i < N_GRANULES; i += 2)
    {
      guint64 a = addrs[i];

      if (!in_live (live, a - g, g))
        {
          check_missing (a - g);
          check_missing (a - g / 2);
          missing_between++;
        }
    }
  g_assert_cmpuint (missing_between, >=, N_GRANULES / 2 - 1);

  for (guint i = 1; i < N_GRANULES; i += 2)
    mt_close_ok (g_ptr_array_index (bufs, i), NULL);
  trim_ok (mr);
  g_clear_pointer (&live, g_hash_table_unref);
  live = live_segments (r);
  g_assert_cmpuint (g_hash_table_size (live), ==, 0);
  for (guint i = 0; i < N_GRANULES; i++) /* closed (mt_close_ok unrefs), unmapped */
    check_missing (addrs[i] + i % g);
  unsubscribe (mr, id);
  g_clear_pointer (&mr, memres_resource_unref);
  recorder_free (r);
}

/* ---- readers against a mapping and unmapping thread ----------------------------------------- */

#define N_FIXED   4000
#define N_MOVING  64
#define N_READERS 2

typedef struct
{
  MemresResource *mr;
  gsize g;
  guint64 *fixed; /* N_FIXED granule bases, mapped throughout */
  guint64 *slots; /* N_MOVING granule bases, mapped and unmapped by the writer */
  gint stop;      /* atomic */
  gint bad;       /* atomic */
  gint found;     /* atomic */
  gint missed;    /* atomic */
  guint seed;
} Race;

static gpointer
race_reader (gpointer data)
{
  Race *rc = data;
  guint32 x = g_atomic_int_add (&rc->seed, 7919) + 1;

  while (!g_atomic_int_get (&rc->stop))
    {
      MemresLookupInfo info;
      guint64 base, a;
      gboolean moving;

      x = x * 1664525u + 1013904223u;
      moving = (x >> 16) & 1;
      base = moving ? __atomic_load_n (&rc->slots[(x >> 17) % N_MOVING], __ATOMIC_RELAXED)
                    : rc->fixed[(x >> 17) % N_FIXED];
      a = base + ((x >> 3) % rc->g);
      if (memres_lookup ((gconstpointer) (guintptr) a, &info))
        {
          /* the right granule or nothing: never another segment */
          if (info.resource != rc->mr || info.segment.base != base || info.segment.length != rc->g
              || info.offset != a - base)
            g_atomic_int_inc (&rc->bad);
          else
            g_atomic_int_inc (&rc->found);
        }
      else if (!moving)
        g_atomic_int_inc (&rc->bad); /* a fixed granule is always mapped */
      else
        g_atomic_int_inc (&rc->missed);
    }
  return NULL;
}

static void
test_race (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GPtrArray) fixed_bufs = g_ptr_array_new ();
  MemresBuffer *moving[N_MOVING] = { NULL };
  GThread *threads[N_READERS];
  Race rc = { 0 };

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena:reserve=64GiB");
  rc.mr = mr;
  rc.g = gran (mr);
  rc.fixed = g_new (guint64, N_FIXED);
  rc.slots = g_new (guint64, N_MOVING);
  /* fixed granules with one free granule after each of the first N_MOVING: where the moving
   * ones go (a granule-sized hole, filled best-fit) */
  for (guint i = 0; i < N_FIXED; i++)
    {
      MemresBuffer *b = mt_alloc_ok (mr, rc.g, NULL);

      g_ptr_array_add (fixed_bufs, b);
      rc.fixed[i] = memres_buffer_get_address (b);
      if (i < N_MOVING)
        {
          moving[i] = mt_alloc_ok (mr, rc.g, NULL);
          rc.slots[i] = memres_buffer_get_address (moving[i]);
        }
    }
  for (guint i = 0; i < N_FIXED; i++)
    g_assert_cmphex (rc.fixed[i] & (rc.g - 1), ==, 0);
  for (guint i = 0; i < N_READERS; i++)
    threads[i] = g_thread_new ("reader", race_reader, &rc);
  /* rounds: every moving granule's buffer closed and trimmed (its segment unmapped), then
   * allocated again (mapped, wherever the arena places it) */
  for (guint round = 0; round < 40; round++)
    {
      for (guint i = 0; i < N_MOVING; i++)
        mt_close_ok (moving[i], NULL);
      trim_ok (mr);
      for (guint i = 0; i < N_MOVING; i++)
        {
          moving[i] = mt_alloc_ok (mr, rc.g, NULL);
          /* readers look for it there from now on; one that reads the old place finds nothing
           * there, or the granule that is there now */
          __atomic_store_n (&rc.slots[i], memres_buffer_get_address (moving[i]), __ATOMIC_RELAXED);
        }
    }
  g_atomic_int_set (&rc.stop, 1);
  for (guint i = 0; i < N_READERS; i++)
    g_thread_join (threads[i]);
  g_test_message ("race: %d found, %d not found (moving granules unmapped), %d wrong", rc.found,
                  rc.missed, rc.bad);
  g_assert_cmpint (rc.bad, ==, 0);
  g_assert_cmpint (rc.found, >, 0);
  for (guint i = 0; i < N_MOVING; i++)
    mt_close_ok (moving[i], NULL);
  for (guint i = 0; i < fixed_bufs->len; i++)
    mt_close_ok (g_ptr_array_index (fixed_bufs, i), NULL);
  g_free (rc.fixed);
  g_free (rc.slots);
}

/* ---- large segments: 256 MiB and 3 GiB, readers racing their maps and unmaps ------------- */

#define MIB         (G_GUINT64_CONSTANT (1) << 20)
#define GIB         (G_GUINT64_CONSTANT (1) << 30)
#define N_BIG_FIXED 3

typedef struct
{
  MemresResource *mr;
  guint64 base;
  guint64 length;
} Big;

typedef struct
{
  Big fixed[N_BIG_FIXED];
  MemresResource *vmm;
  guint64 slot[2]; /* atomic: the moving buffers' bases, 0 while closed */
  guint64 slot_length[2];
  gint stop;   /* atomic */
  gint bad;    /* atomic */
  gint found;  /* atomic */
  gint missed; /* atomic */
  guint seed;
} BigRace;

static Big
big_of (MemresResource *mr, MemresBuffer *buf)
{
  return (Big){ mr, memres_buffer_get_address (buf), memres_buffer_get_size (buf) };
}

/* Whether @a lies in one of @bigs (@n). */
static gboolean
in_bigs (const Big *bigs, guint n, guint64 a)
{
  for (guint i = 0; i < n; i++)
    if (a - bigs[i].base < bigs[i].length)
      return TRUE;
  return FALSE;
}

/* Each of @bigs found at its base, middle and last byte; the bytes just outside not, where none
 * of them lies. */
static void
check_bigs (const Big *bigs, guint n)
{
  for (guint i = 0; i < n; i++)
    {
      const Big *b = &bigs[i];

      check_found (b->mr, b->base, b->length, b->base);
      check_found (b->mr, b->base, b->length, b->base + b->length / 2);
      check_found (b->mr, b->base, b->length, b->base + b->length - 1);
      if (!in_bigs (bigs, n, b->base - 1))
        check_missing (b->base - 1);
      if (!in_bigs (bigs, n, b->base + b->length))
        check_missing (b->base + b->length);
    }
}

/* Whether @info, the answer at @a, is whole and names a segment the test made: one of the
 * fixed ones, or a moving one (vmm's, of a moving size). */
static gboolean
big_answer_valid (const BigRace *rc, const MemresLookupInfo *info, guint64 a)
{
  if (info->offset != a - info->segment.base || info->offset >= info->segment.length)
    return FALSE;
  for (guint i = 0; i < N_BIG_FIXED; i++)
    if (info->resource == rc->fixed[i].mr && info->segment.base == rc->fixed[i].base
        && info->segment.length == rc->fixed[i].length)
      return TRUE;
  return info->resource == rc->vmm
         && (info->segment.length == rc->slot_length[0]
             || info->segment.length == rc->slot_length[1]);
}

static gpointer
big_reader (gpointer data)
{
  BigRace *rc = data;
  guint32 x = g_atomic_int_add (&rc->seed, 7919) + 1;

  while (!g_atomic_int_get (&rc->stop))
    {
      MemresLookupInfo info;
      guint64 base, length, a;
      gboolean moving, found, inside;
      guint which;

      x = x * 1664525u + 1013904223u;
      moving = (x >> 16) & 1;
      which = (x >> 17) % (moving ? 2 : N_BIG_FIXED);
      base = moving ? __atomic_load_n (&rc->slot[which], __ATOMIC_RELAXED) : rc->fixed[which].base;
      length = moving ? rc->slot_length[which] : rc->fixed[which].length;
      if (base == 0)
        continue;
      /* base, middle, last byte; one before, one past */
      switch ((x >> 20) % 5)
        {
        case 0:
          a = base;
          break;
        case 1:
          a = base + length / 2;
          break;
        case 2:
          a = base + length - 1;
          break;
        case 3:
          a = base - 1;
          break;
        default:
          a = base + length;
          break;
        }
      inside = a - base < length;
      found = memres_lookup ((gconstpointer) (guintptr) a, &info);
      if (found && !big_answer_valid (rc, &info, a))
        g_atomic_int_inc (&rc->bad); /* torn, or a segment that never was */
      else if (!moving && inside)
        {
          /* a fixed segment is always there, and always itself */
          if (!found || info.resource != rc->fixed[which].mr || info.segment.base != base)
            g_atomic_int_inc (&rc->bad);
          else
            g_atomic_int_inc (&rc->found);
        }
      else if (found && !moving && info.segment.base == base)
        g_atomic_int_inc (&rc->bad); /* just outside a fixed one, found as that one */
      else if (found)
        g_atomic_int_inc (&rc->found); /* a moving one, or a neighbour */
      else if (inside)
        g_atomic_int_inc (&rc->missed); /* closed meanwhile */
    }
  return NULL;
}

static void
test_large_segments (void)
{
  g_autoptr (MemresResource) vmm = NULL;
  g_autoptr (MemresResource) cache = NULL;
  MemresBuffer *fixed[N_BIG_FIXED], *moving[2];
  GThread *threads[N_READERS];
  BigRace rc = { 0 };
  Big all[N_BIG_FIXED + 2];

  if (!mt_require_devices (1))
    return;
  vmm = mt_new_ok ("vmm");
  cache = mt_new_ok ("cache>dmr"); /* above max_block: a chunk of its own, one segment */
  rc.vmm = vmm;
  fixed[0] = mt_alloc_ok (vmm, 256 * MIB, NULL);
  fixed[1] = mt_alloc_ok (vmm, 3 * GIB, NULL);
  fixed[2] = mt_alloc_ok (cache, 256 * MIB, NULL);
  rc.fixed[0] = big_of (vmm, fixed[0]);
  rc.fixed[1] = big_of (vmm, fixed[1]);
  rc.fixed[2] = big_of (cache, fixed[2]);
  rc.slot_length[0] = 256 * MIB;
  rc.slot_length[1] = 3 * GIB;
  for (guint i = 0; i < 2; i++)
    {
      moving[i] = mt_alloc_ok (vmm, rc.slot_length[i], NULL);
      rc.slot[i] = memres_buffer_get_address (moving[i]);
    }
  for (guint i = 0; i < N_BIG_FIXED; i++)
    all[i] = rc.fixed[i];
  all[N_BIG_FIXED] = big_of (vmm, moving[0]);
  all[N_BIG_FIXED + 1] = big_of (vmm, moving[1]);
  check_bigs (all, G_N_ELEMENTS (all));

  for (guint i = 0; i < N_READERS; i++)
    threads[i] = g_thread_new ("reader", big_reader, &rc);
  /* rounds: each moving buffer closed (its segment unmapped), then allocated again */
  for (guint round = 0; round < 30; round++)
    for (guint i = 0; i < 2; i++)
      {
        __atomic_store_n (&rc.slot[i], 0, __ATOMIC_RELAXED);
        mt_close_ok (moving[i], NULL);
        moving[i] = mt_alloc_ok (vmm, rc.slot_length[i], NULL);
        __atomic_store_n (&rc.slot[i], memres_buffer_get_address (moving[i]), __ATOMIC_RELAXED);
      }
  g_atomic_int_set (&rc.stop, 1);
  for (guint i = 0; i < N_READERS; i++)
    g_thread_join (threads[i]);
  g_test_message ("large: %d found, %d not found (moving buffers closed), %d wrong", rc.found,
                  rc.missed, rc.bad);
  g_assert_cmpint (rc.bad, ==, 0);
  g_assert_cmpint (rc.found, >, 0);

  all[N_BIG_FIXED] = big_of (vmm, moving[0]);
  all[N_BIG_FIXED + 1] = big_of (vmm, moving[1]);
  check_bigs (all, G_N_ELEMENTS (all));
  /* closed one by one: the rest still answer, the closed ones' bytes are not found */
  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    {
      mt_close_ok (i < N_BIG_FIXED ? fixed[i] : moving[i - N_BIG_FIXED], NULL);
      check_bigs (all + i + 1, G_N_ELEMENTS (all) - i - 1);
      if (!in_bigs (all + i + 1, G_N_ELEMENTS (all) - i - 1, all[i].base))
        {
          check_missing (all[i].base);
          check_missing (all[i].base + all[i].length / 2);
          check_missing (all[i].base + all[i].length - 1);
        }
    }
}

/* ---- small segments, many to a page (host memory: a cache's blocks above max_block) -------- */

typedef struct
{
  guint64 base;
  guint64 length;
} Range;

static gint
range_order (gconstpointer a, gconstpointer b)
{
  const Range *x = a, *y = b;

  return x->base < y->base ? -1 : x->base > y->base;
}

/* The range of @ranges (sorted, disjoint) holding @a, or NULL. */
static const Range *
range_of (GArray *ranges, guint64 a)
{
  guint lo = 0, hi = ranges->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      const Range *r = &g_array_index (ranges, Range, mid);

      if (a < r->base)
        hi = mid;
      else if (a >= r->base + r->length)
        lo = mid + 1;
      else
        return r;
    }
  return NULL;
}

/* Each byte probed answers what the list of live ranges says: its range, or not found. */
static void
check_ranges (MemresResource *mr, GArray *ranges)
{
  for (guint i = 0; i < ranges->len; i++)
    {
      const Range *r = &g_array_index (ranges, Range, i);
      guint64 probes[] = { r->base - 1, r->base, r->base + r->length / 2, r->base + r->length - 1,
                           r->base + r->length };

      for (guint k = 0; k < G_N_ELEMENTS (probes); k++)
        {
          const Range *want = range_of (ranges, probes[k]);

          if (want != NULL)
            check_found (mr, want->base, want->length, probes[k]);
          else
            check_missing (probes[k]);
        }
    }
}

static void
test_small_segments (void)
{
  enum
  {
    N = 3000
  };
  g_autoptr (MemresResource) mr = mt_new_ok ("cache:max_block=4KiB>host");
  g_autoptr (GArray) ranges = g_array_new (FALSE, FALSE, sizeof (Range));
  MemresBuffer **bufs = g_new (MemresBuffer *, N);

  for (guint i = 0; i < N; i++)
    {
      Range r;

      bufs[i] = mt_alloc_ok (mr, 8192 + 4096 * (i % 3), NULL);
      r.base = memres_buffer_get_address (bufs[i]);
      r.length = memres_buffer_get_size (bufs[i]);
      g_array_append_val (ranges, r);
    }
  g_array_sort (ranges, range_order);
  check_ranges (mr, ranges);
  /* every other one closed (each its own segment: unmapped at its close) */
  g_array_set_size (ranges, 0);
  for (guint i = 0; i < N; i++)
    if (i % 2 == 0)
      mt_close_ok (bufs[i], NULL);
    else
      {
        Range r = { memres_buffer_get_address (bufs[i]), memres_buffer_get_size (bufs[i]) };

        g_array_append_val (ranges, r);
      }
  g_array_sort (ranges, range_order);
  check_ranges (mr, ranges);
  for (guint i = 1; i < N; i += 2)
    mt_close_ok (bufs[i], NULL);
  g_free (bufs);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/segment-scale/twenty-thousand", test_twenty_thousand);
  g_test_add_func ("/segment-scale/race", test_race);
  g_test_add_func ("/segment-scale/small-segments", test_small_segments);
  g_test_add_func ("/segment-scale/large-segments", test_large_segments);
  return g_test_run ();
}

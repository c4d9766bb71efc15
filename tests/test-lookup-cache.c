/* test-lookup-cache.c: the answers memres_lookup() keeps per thread (core/segments.c) are never
 * used once the index changed: not after their segment was unmapped (in the same thread, and in
 * reader threads racing a mapping and unmapping thread), not when a segment nested inside them
 * appeared, and not when more segments than the thread's table holds share its slots. Host memory
 * through `cache` (suite core): no driver. */
#include "testutil.h"

#include <string.h>

static gconstpointer
addr (guint64 a)
{
  return (gconstpointer) (guintptr) a;
}

static void
assert_found (guint64 a, MemresResource *mr, guint64 base, guint64 length)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  g_assert_true (memres_lookup (addr (a), &info));
  g_assert_true (info.resource == mr);
  g_assert_cmphex (info.segment.base, ==, base);
  g_assert_cmpuint (info.segment.length, ==, length);
  g_assert_cmpint (info.segment.device, ==, -1);
  g_assert_cmpuint (info.segment.handle_types, ==, 0);
  g_assert_cmpuint (info.segment.tag_id, ==, 0);
  g_assert_null (info.segment.tag);
  g_assert_cmpuint (info.offset, ==, a - base);
}

static void
assert_missing (guint64 a)
{
  MemresLookupInfo info;

  memset (&info, 0xa5, sizeof info);
  g_assert_false (memres_lookup (addr (a), &info));
  g_assert_cmpuint (info.offset, ==, G_GUINT64_CONSTANT (0xa5a5a5a5a5a5a5a5));
}

/* A buffer above max_block is a segment of its own, unmapped at its close. */
static void
test_stale_after_unmap (void)
{
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresBuffer *buf = mt_alloc_ok (mr, 64 * 1024, NULL);
  guint64 a = memres_buffer_get_address (buf);

  for (guint i = 0; i < 3; i++) /* the first fills the thread's answer, the others hit it */
    {
      assert_found (a, mr, a, 64 * 1024);
      assert_found (a + 64 * 1024 - 1, mr, a, 64 * 1024);
    }
  mt_close_ok (buf, NULL);
  assert_missing (a);
  assert_missing (a + 100);

  /* mapped again (at whatever address): found, its old answer not used */
  buf = mt_alloc_ok (mr, 32 * 1024, NULL);
  a = memres_buffer_get_address (buf);
  assert_found (a + 5, mr, a, 32 * 1024);
  assert_missing (a + 32 * 1024);
  mt_close_ok (buf, NULL);
  assert_missing (a + 5);
  memres_resource_unref (mr);
}

/* A thread's answer for a lower chunk, then an upper chunk mapped inside it: the innermost. */
static void
test_nested_after_hit (void)
{
  MemresResource *top = mt_new_ok ("cache:chunk=64KiB>cache:chunk=1MiB,max_block=1MiB>host");
  MemresResource *lower = memres_resource_get_upstream (top);
  /* a block of the class the upper cache takes its chunks in: maps the lower chunk */
  MemresBuffer *held = mt_alloc_ok (lower, 64 * 1024, NULL);
  MemresLookupInfo info;
  MemresBuffer *a;
  guint64 l, ua;

  g_assert_true (memres_lookup (memres_buffer_get_pointer (held), &info));
  g_assert_true (info.resource == lower);
  l = info.segment.base;
  g_assert_cmpuint (info.segment.length, ==, 1024 * 1024);
  for (guint round = 0; round < 2; round++)
    for (guint64 x = l; x < l + 1024 * 1024; x += 4096)
      assert_found (x, lower, l, 1024 * 1024);

  a = mt_alloc_ok (top, 256, NULL); /* the upper chunk, carved from the lower one */
  ua = memres_buffer_get_address (a);
  g_assert_cmphex (ua, >=, l);
  g_assert_cmphex (ua + 64 * 1024, <=, l + 1024 * 1024);
  g_assert_true (memres_lookup (addr (ua), &info));
  assert_found (ua, top, info.segment.base, 64 * 1024);
  g_assert_cmphex (info.segment.base, <=, ua);
  for (guint64 x = info.segment.base; x < info.segment.base + 64 * 1024; x += 4096)
    assert_found (x, top, info.segment.base, 64 * 1024);

  mt_close_ok (a, NULL);
  mt_close_ok (held, NULL);
  memres_resource_unref (top);
}

/* More segments than the thread keeps answers for: every answer right, twice over. */
static void
test_many_segments (void)
{
  enum
  {
    N = 600
  };
  MemresResource *mr = mt_new_ok ("cache:max_block=4KiB>host");
  MemresBuffer *bufs[N];

  for (guint i = 0; i < N; i++)
    bufs[i] = mt_alloc_ok (mr, 8192 + 4096 * (i % 5), NULL);
  for (guint round = 0; round < 3; round++)
    for (guint k = 0; k < N; k++)
      {
        guint i = (k * 7919u) % N;
        guint64 a = memres_buffer_get_address (bufs[i]);
        gsize size = memres_buffer_get_size (bufs[i]);

        assert_found (a + (k * 131u) % size, mr, a, size);
      }
  for (guint i = 0; i < N; i += 2) /* every other one unmapped: each answer right again */
    mt_close_ok (bufs[i], NULL);
  for (guint k = 0; k < N; k++)
    {
      guint i = (k * 7919u) % N;

      if (i % 2 == 1)
        assert_found (memres_buffer_get_address (bufs[i]) + 1, mr,
                      memres_buffer_get_address (bufs[i]), memres_buffer_get_size (bufs[i]));
    }
  for (guint i = 1; i < N; i += 2)
    mt_close_ok (bufs[i], NULL);
  memres_resource_unref (mr);
}

/* Threads: one maps and unmaps a segment over and over; readers look its address up in each
 * phase and check the answer when the phase was the same before and after the lookup. A round
 * is four phases: 4r + 1 mapped, 4r + 2 closing, 4r + 3 unmapped, 4r + 4 mapping again (the
 * writer sets closing and mapping before it calls, so a lookup that saw "mapped" or "unmapped"
 * on both sides ran entirely inside that state). While unmapped none may find it: a reader's
 * answer kept from the mapped phase would. The writer waits in the mapped and unmapped phases
 * until every reader checked a lookup inside them. */
#define N_READERS 3
#define ROUNDS    100

typedef struct
{
  MemresResource *mr;
  gint phase;   /* atomic */
  guint64 base; /* atomic: the segment's base, set before each mapped phase */
  guint64 length;
  gint seen[N_READERS]; /* atomic: the last phase each reader checked inside */
  gint bad;             /* atomic */
  gint found;           /* atomic: lookups that found it while mapped */
} Race;

typedef struct
{
  Race *race;
  guint id;
} Reader;

static gpointer
reader_thread (gpointer data)
{
  Reader *rd = data;
  Race *r = rd->race;

  for (;;)
    {
      gint p1 = g_atomic_int_get (&r->phase);
      guint64 base = __atomic_load_n (&r->base, __ATOMIC_ACQUIRE);
      MemresLookupInfo info;
      gboolean hit;

      if (p1 > 4 * ROUNDS)
        return NULL;
      if (p1 % 4 != 1 && p1 % 4 != 3)
        {
          g_thread_yield ();
          continue;
        }
      hit = memres_lookup (addr (base + 8), &info);
      if (g_atomic_int_get (&r->phase) != p1)
        continue; /* the phase changed under the lookup: nothing to check */
      if (p1 % 4 == 1)
        {
          if (hit && info.resource == r->mr && info.segment.base == base
              && info.segment.length == r->length && info.offset == 8)
            g_atomic_int_inc (&r->found);
          else
            g_atomic_int_inc (&r->bad);
        }
      else if (hit)
        g_atomic_int_inc (&r->bad); /* a stale answer: unmapped before the lookup began */
      g_atomic_int_set (&r->seen[rd->id], p1);
    }
}

static void
wait_readers (Race *r, gint phase)
{
  for (guint i = 0; i < N_READERS; i++)
    while (g_atomic_int_get (&r->seen[i]) < phase)
      g_thread_yield ();
}

static void
test_threads (void)
{
  Race r = { 0 };
  Reader readers[N_READERS];
  GThread *threads[N_READERS];

  r.mr = mt_new_ok ("cache:max_block=4KiB>host");
  r.length = 64 * 1024;
  for (guint i = 0; i < N_READERS; i++)
    {
      readers[i] = (Reader){ &r, i };
      threads[i] = g_thread_new ("reader", reader_thread, &readers[i]);
    }
  for (gint p = 1; p <= 4 * ROUNDS; p += 4)
    {
      MemresBuffer *buf = mt_alloc_ok (r.mr, r.length, NULL);

      __atomic_store_n (&r.base, memres_buffer_get_address (buf), __ATOMIC_RELEASE);
      g_atomic_int_set (&r.phase, p); /* mapped */
      wait_readers (&r, p);
      g_atomic_int_set (&r.phase, p + 1); /* closing */
      mt_close_ok (buf, NULL);
      g_atomic_int_set (&r.phase, p + 2); /* unmapped */
      wait_readers (&r, p + 2);
      g_atomic_int_set (&r.phase, p + 3); /* mapping */
    }
  g_atomic_int_set (&r.phase, 4 * ROUNDS + 1);
  for (guint i = 0; i < N_READERS; i++)
    g_thread_join (threads[i]);
  g_assert_cmpint (r.bad, ==, 0);
  g_assert_cmpint (r.found, >=, N_READERS * ROUNDS);
  memres_resource_unref (r.mr);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/lookup-cache/stale-after-unmap", test_stale_after_unmap);
  g_test_add_func ("/lookup-cache/nested-after-hit", test_nested_after_hit);
  g_test_add_func ("/lookup-cache/many-segments", test_many_segments);
  g_test_add_func ("/lookup-cache/threads", test_threads);
  return g_test_run ();
}

/* test-arena-heap.c: the free ranges of the `arena` kind and their indexes (plugins/arena/
 * arena-heap.c, arena-runs.c) checked against each other after random operations, against the
 * fake driver (suite fake): large and small buffers allocated, resized and closed on two
 * streams, either of them held at times (its frees stay tagged, beside settled ranges: runs),
 * settled by trims. After every few operations the counter heap_errors (the option check=true;
 * arena_heap_check(): every free range in the tables by start and by end, the best-fit tree,
 * its neighbour links and, exactly when a neighbour joins it in a run, the run index) must be 0;
 * with place=stable too (its windows taken across runs by arena_runs_take()). */
#include "testutil.h"

#include "arena-check.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define LIVE_MAX 48

static guint32
next (guint32 *rng)
{
  *rng = *rng * 1103515245u + 12345u;
  return *rng >> 16;
}

static void
assert_heap_ok (MemresResource *mr, guint op)
{
  guint64 errors = counter (mr, "heap_errors");

  if (errors != 0)
    g_test_message ("after operation %u: %" G_GUINT64_FORMAT " heap errors", op, errors);
  g_assert_cmpuint (errors, ==, 0);
}

/* 40 rounds of 120 random operations on two streams, each stream held for a round at random:
 * buffers of 1 KiB to 6 MiB allocated on one stream, resized and closed on either, a trim or a
 * stream's
 * synchronize between rounds; the heap checked every 20 operations and at the end. The runs are
 * used (run_takes), ranges settle (settles), and all of it goes back at the last trim. */
static void
test_heap_random (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *live[LIVE_MAX];
  MemresStream s[2];
  guint n_live = 0, op = 0, resizes = 0;
  guint32 rng = 3838;

  if (!mt_hazard_begin ())
    return;
  s[0] = mt_stream_new_on (0);
  s[1] = mt_stream_new_on (0);
  mr = mt_new_ok (spec);
  for (guint round = 0; round < 40; round++)
    {
      MtStreamHold *hold[2] = { NULL, NULL };

      for (guint i = 0; i < 2; i++)
        if (next (&rng) % 2 == 0)
          hold[i] = mt_stream_hold (s[i]);
      for (guint k = 0; k < 120; k++, op++)
        {
          guint32 r = next (&rng);

          if (n_live < LIVE_MAX && (n_live == 0 || r % 5 < 3))
            {
              /* one in eight small (the size classes' slabs come from the same range) */
              gsize size = next (&rng) % 8 == 0 ? 1 * KiB + next (&rng) % (63 * KiB)
                                                : 64 * KiB + (gsize) next (&rng) * 97 % (6 * MiB);

              live[n_live++] = mt_alloc_ok (mr, size, s[next (&rng) % 2]);
            }
          else if (r % 5 == 3 && hold[0] == NULL && hold[1] == NULL)
            {
              /* grown in place, moved (its whole granules remapped) or copied, or shrunk; not
               * while a stream is held (a move synchronizes the stream: arena-resize.c) */
              g_autoptr (GError) error = NULL;
              MemresBuffer *buf = live[next (&rng) % n_live];
              gsize size = 64 * KiB + (gsize) next (&rng) * 89 % (6 * MiB);

              MemresStream st = s[next (&rng) % 2];

              MT_CHECK (memres_buffer_resize (buf, size, st, &error));
              g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
              /* a copying resize queues its copy on @st, and the buffer may be closed on the
               * other stream later: the program orders them (here by a synchronize), as the
               * stream-ordered contract asks; unordered, the copy could run after the close let
               * trim unmap its memory (the fake's CUDA_ERROR_ILLEGAL_ADDRESS, 1 run in 60) */
              mt_sync_ok (st);
              resizes++;
            }
          else
            {
              guint i = next (&rng) % n_live;

              mt_close_ok (live[i], s[next (&rng) % 2]);
              live[i] = live[--n_live];
            }
          if (op % 20 == 19)
            assert_heap_ok (mr, op);
        }
      for (guint i = 0; i < 2; i++)
        if (hold[i] != NULL)
          mt_stream_release (hold[i]);
      switch (next (&rng) % 3)
        {
        case 0:
          trim_ok (mr);
          break;
        case 1:
          mt_sync_ok (s[next (&rng) % 2]);
          break;
        default:
          break;
        }
      assert_heap_ok (mr, op);
    }
  g_test_message ("%s: %u operations (%u resizes), %" G_GUINT64_FORMAT
                  " run takes, %" G_GUINT64_FORMAT " settles",
                  spec, op, resizes, counter (mr, "run_takes"), counter (mr, "settles"));
  g_assert_cmpuint (resizes, >, 0);
  g_assert_cmpuint (counter (mr, "run_takes"), >, 0);
  g_assert_cmpuint (counter (mr, "settles"), >, 0);
  for (; n_live > 0; n_live--)
    mt_close_ok (live[n_live - 1], s[n_live % 2]);
  assert_heap_ok (mr, op);
  trim_ok (mr);
  assert_heap_ok (mr, op);
  g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, 0);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s[0]);
  mt_stream_free (s[1]);
  mt_hazard_end ();
}

int
main (int argc, char **argv)
{
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "1GiB", FALSE);
  mt_init (&argc, &argv);

  /* check=true: the counter heap_errors (docs/arena.md) */
  g_test_add_data_func ("/arena/heap/random", "arena:check=true", test_heap_random);
  g_test_add_data_func ("/arena/heap/random-park", "arena:park=true,check=true", test_heap_random);
  g_test_add_data_func ("/arena/heap/random-stable", "arena:place=stable,check=true",
                        test_heap_random);
  g_test_add_data_func ("/arena/heap/random-eager", "arena:settle=eager,check=true",
                        test_heap_random);
  return g_test_run ();
}

/* test-arena-break.c: the `arena` kind used as a new user would, through the public API only,
 * against the fake driver: random allocations and closes on several streams and threads, trim,
 * the statistics and counters checked for consistency at each step, resize, odd sizes, option
 * errors, and out of memory on a small device. */
#include "testutil.h"

#include <string.h>

#include "arena-check.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

/* the statistics and the counters agree and hold together */
static MemresStats
consistent (MemresResource *mr)
{
  MemresStats s = stats_ok (mr);

  g_assert_cmpuint (s.used_high, >=, s.used_current);
  g_assert_cmpuint (s.reserved_high, >=, s.reserved_current);
  g_assert_cmpuint (s.reserved_high, >=, s.used_high);
  g_assert_cmpuint (counter (mr, "physical"), ==, s.reserved_current);
  g_assert_cmpuint (counter (mr, "physical_idle"), <=, s.reserved_current);
  g_assert_cmpuint (counter (mr, "heap_errors"), ==, 0);
  return s;
}

/* Everything closed: nothing used, nothing mapped after a trim; @streams freed */
static void
assert_emptied (MemresResource *mr, CUstream *streams, guint n)
{
  MemresStats st;

  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  trim_ok (mr);
  st = consistent (mr);
  g_assert_cmpuint (st.used_current, ==, 0);
  g_assert_cmpuint (st.reserved_current, ==, 0);
  for (guint i = 0; i < n; i++)
    mt_stream_free (streams[i]);
}

static gsize
random_size (void)
{
  switch (g_test_rand_int_range (0, 6))
    {
    case 0:
      return (gsize) g_test_rand_int_range (1, 4096);
    case 1:
      return (gsize) g_test_rand_int_range (4096, 64 * 1024 + 2);
    case 2:
      return (gsize) g_test_rand_int_range (64 * 1024 + 1, 2 * 1024 * 1024);
    case 3:
      return (gsize) g_test_rand_int_range (2 * 1024 * 1024, 9 * 1024 * 1024);
    case 4:
      return (gsize) g_test_rand_int_range (1, 5) * 2 * MiB;
    default:
      return (gsize) g_test_rand_int_range (1, 5) * 2 * MiB + g_test_rand_int_range (-3, 4);
    }
}

/* random operations on one thread, several streams: exact used bytes of large buffers */
static void
random_ops (const char *spec, guint n_ops)
{
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  GError *error = NULL;
  CUstream streams[3];
  MemresBuffer *bufs[64] = { 0 };
  guint64 large_used = 0;
  guint n_small = 0;
  gsize maxb;

  maxb = (gsize) counter (mr, "max_block");
  for (guint i = 0; i < G_N_ELEMENTS (streams); i++)
    streams[i] = mt_stream_new_on (0);
  for (guint op = 0; op < n_ops; op++)
    {
      guint i = (guint) g_test_rand_int_range (0, G_N_ELEMENTS (bufs));
      MemresStream s = g_test_rand_bit () ? NULL : streams[g_test_rand_int_range (0, 3)];
      guint what = (guint) g_test_rand_int_range (0, 100);

      if (bufs[i] == NULL && what < 70)
        {
          gsize size = random_size ();

          bufs[i] = mt_alloc_ok (mr, size, s);
          if (size > maxb)
            large_used += (size + 511) & ~(gsize) 511;
          else
            n_small++;
        }
      else if (bufs[i] != NULL && what < 80)
        {
          gsize old = memres_buffer_get_size (bufs[i]);
          gsize size = random_size ();

          if (!memres_buffer_resize (bufs[i], size, s, &error))
            g_error ("resize %zu -> %zu: %s", old, size, error->message);
          g_assert_cmpuint (memres_buffer_get_size (bufs[i]), ==, size);
          if (old > maxb)
            large_used -= (old + 511) & ~(gsize) 511;
          else
            n_small--;
          if (size > maxb)
            large_used += (size + 511) & ~(gsize) 511;
          else
            n_small++;
        }
      else if (bufs[i] != NULL)
        {
          gsize old = memres_buffer_get_size (bufs[i]);

          mt_close_ok (bufs[i], s);
          bufs[i] = NULL;
          if (old > maxb)
            large_used -= (old + 511) & ~(gsize) 511;
          else
            n_small--;
        }
      else if (what < 85)
        MT_CHECK (memres_resource_trim (mr, (gsize) g_test_rand_int_range (0, 64) * MiB, &error));
      else if (what < 90)
        MT_CHECK (memres_resource_reset_stats (mr, &error));
      else if (what < 95)
        mt_sync_ok (streams[g_test_rand_int_range (0, 3)]);
      {
        MemresStats st = consistent (mr);

        g_assert_cmpuint (st.used_current, >=, large_used);
        guint live = 0;

        if (n_small == 0)
          g_assert_cmpuint (st.used_current, ==, large_used);
        for (guint k = 0; k < G_N_ELEMENTS (bufs); k++)
          live += bufs[k] != NULL;
        g_assert_cmpuint (st.n_buffers, ==, live);
      }
    }
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    if (bufs[i] != NULL)
      mt_close_ok (bufs[i], NULL);
  assert_emptied (mr, streams, G_N_ELEMENTS (streams));
}

static void
test_random_fit (void)
{
  random_ops ("arena:device=0,check=true", 3000);
}

static void
test_random_stable (void)
{
  random_ops ("arena:device=0,place=stable,check=true", 3000);
}

static void
test_random_park (void)
{
  random_ops ("arena:device=0,park=true,check=true,release_threshold=0", 3000);
}

static void
test_random_small_reserve (void)
{
  random_ops ("arena:device=0,place=stable,check=true,reserve=1", 1500);
}

/* a request larger than the device fails, again and again (a program that catches the
 * out-of-memory error and retries smaller, or a loop that probes): the address space the arena
 * holds must not grow with each failure */
static void
test_oom_repeated_va (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("arena:device=0,check=true");
  guint64 virt0 = counter (mr, "virtual");

  for (guint i = 0; i < 8; i++)
    {
      GError *error = NULL;
      MemresBuffer *b = memres_resource_allocate (mr, (gsize) 1 << 40, NULL, &error);

      g_assert_null (b);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      g_clear_error (&error);
      g_test_message ("after %u failures: virtual %" G_GUINT64_FORMAT
                      " reservations %" G_GUINT64_FORMAT,
                      i + 1, counter (mr, "virtual"), counter (mr, "reservations"));
    }
  /* none kept (arena_reservations_drop_empty()) */
  g_assert_cmpuint (counter (mr, "virtual"), ==, virt0);
  {
    MemresBuffer *b = mt_alloc_ok (mr, 8 * MiB, NULL);

    mt_close_ok (b, NULL);
  }
  consistent (mr);
}

/* no two live buffers overlap */
static void
assert_disjoint (MemresBuffer **bufs, guint n, MemresBuffer *b)
{
  guint64 lo = memres_buffer_get_address (b), hi = lo + MAX (memres_buffer_get_size (b), 1);

  for (guint i = 0; i < n; i++)
    if (bufs[i] != NULL && bufs[i] != b)
      {
        guint64 l = memres_buffer_get_address (bufs[i]);
        guint64 h = l + MAX (memres_buffer_get_size (bufs[i]), 1);

        if (lo < h && l < hi)
          g_error ("overlap: [%" G_GINT64_MODIFIER "x, %" G_GINT64_MODIFIER
                   "x) and [%" G_GINT64_MODIFIER "x, %" G_GINT64_MODIFIER "x)",
                   lo, hi, l, h);
      }
}

/* a stream may wait for another's event (a block it reuses): no stream is waited for while
 * any is held */
static gboolean
any_held (MtStreamHold **holds)
{
  return holds[0] != NULL || holds[1] != NULL || holds[2] != NULL;
}

static gpointer
release_thread (gpointer data)
{
  GError *error = NULL;

  MT_CHECK (memres_cuda_ensure_context (0, &error));
  mt_stream_release (data);
  return NULL;
}

/* every hold released at once: a held stream may wait for another's event (a block it reuses),
 * so releasing one and waiting for it could wait for another hold */
static void
release_all (MtStreamHold **holds)
{
  GThread *t[3] = { 0 };

  for (guint h = 0; h < 3; h++)
    if (holds[h] != NULL)
      t[h] = g_thread_new ("release", release_thread, g_steal_pointer (&holds[h]));
  for (guint h = 0; h < 3; h++)
    if (t[h] != NULL)
      g_thread_join (t[h]);
}

/* random operations with streams held (the fake's asynchronous mode): live buffers never
 * overlap, a buffer's bytes stay its own (each filled on its stream with its own byte, read
 * back once its stream is free), the statistics hold together */
static void
random_async (const char *spec, guint n_ops)
{
  g_autoptr (MemresResource) mr = NULL;
  GError *error = NULL;
  CUstream streams[3];
  MtStreamHold *holds[3] = { 0 };
  MemresBuffer *bufs[64] = { 0 };
  guint8 byte[64] = { 0 };
  guint home[64] = { 0 };
  guint8 next = 1;

  if (!mt_hazard_begin ())
    return;
  mr = mt_new_ok (spec);
  for (guint i = 0; i < G_N_ELEMENTS (streams); i++)
    streams[i] = mt_stream_new_on (0);
  for (guint op = 0; op < n_ops; op++)
    {
      guint i = (guint) g_test_rand_int_range (0, G_N_ELEMENTS (bufs));
      guint si = (guint) g_test_rand_int_range (0, 3);
      guint what = (guint) g_test_rand_int_range (0, 100);

      if (bufs[i] == NULL && what < 60)
        {
          gsize size = random_size ();

          bufs[i] = mt_alloc_ok (mr, size, streams[si]);
          assert_disjoint (bufs, G_N_ELEMENTS (bufs), bufs[i]);
          home[i] = si;
          byte[i] = next++;
          if (next == 0)
            next = 1;
          if (size > 0)
            mt_fill_byte_ok (bufs[i], byte[i], streams[si]);
        }
      else if (bufs[i] != NULL && what < 66 && !any_held (holds))
        {
          /* resized on its stream or another: the first bytes kept */
          gsize old = memres_buffer_get_size (bufs[i]);
          gsize size = random_size ();
          MemresStream rs = g_test_rand_bit () ? streams[home[i]] : streams[si];
          g_autofree guint8 *host = NULL;

          if (rs != streams[home[i]])
            mt_sync_ok (streams[home[i]]);
          if (!memres_buffer_resize (bufs[i], size, rs, &error))
            g_error ("resize %zu -> %zu: %s", old, size, error->message);
          assert_disjoint (bufs, G_N_ELEMENTS (bufs), bufs[i]);
          if (MIN (old, size) > 0)
            {
              gsize n = MIN (old, size);

              host = g_malloc (n);
              MT_CHECK (memres_buffer_read (bufs[i], 0, host, n, rs, &error));
              mt_sync_ok (rs);
              for (gsize k = 0; k < n; k++)
                if (host[k] != byte[i])
                  g_error ("resize %zu -> %zu: byte %zu is %02x, not %02x", old, size, k, host[k],
                           byte[i]);
            }
          if (rs != streams[home[i]])
            mt_sync_ok (rs);
          if (size > 0)
            mt_fill_byte_ok (bufs[i], byte[i], streams[home[i]]);
        }
      else if (bufs[i] != NULL && what < 70 && !any_held (holds))
        {
          /* read back on its own stream, not held */
          if (memres_buffer_get_size (bufs[i]) > 0)
            mt_assert_bytes (bufs[i], byte[i], streams[home[i]]);
        }
      else if (bufs[i] != NULL && what < 90)
        {
          /* closed on its stream, or on another one */
          guint cs = g_test_rand_int_range (0, 4) == 0 ? si : home[i];

          if (cs != home[i])
            {
              /* the close's stream must be ordered after the buffer's work: here its own
               * stream is done with it */
              if (any_held (holds))
                cs = home[i];
              else
                mt_sync_ok (streams[home[i]]);
            }
          mt_close_ok (bufs[i], streams[cs]);
          bufs[i] = NULL;
        }
      else if (what < 95)
        {
          if (holds[si] == NULL)
            holds[si] = mt_stream_hold (streams[si]);
          else
            release_all (holds);
        }
      else if (what < 97)
        MT_CHECK (memres_resource_reset_stats (mr, &error));
      else
        {
          release_all (holds);
          MT_CHECK (memres_resource_trim (mr, (gsize) g_test_rand_int_range (0, 64) * MiB, &error));
        }
      consistent (mr);
    }
  release_all (holds);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    if (bufs[i] != NULL)
      {
        if (memres_buffer_get_size (bufs[i]) > 0)
          mt_assert_bytes (bufs[i], byte[i], streams[home[i]]);
        mt_close_ok (bufs[i], streams[home[i]]);
      }
  assert_emptied (mr, streams, G_N_ELEMENTS (streams));
  g_clear_pointer (&mr, memres_resource_unref);
  mt_hazard_end ();
}

static void
test_async_fit (void)
{
  random_async ("arena:device=0,check=true", 2000);
}

static void
test_async_stable (void)
{
  random_async ("arena:device=0,place=stable,check=true", 2000);
}

static void
test_async_park (void)
{
  random_async ("arena:device=0,park=true,check=true,settle=eager", 2000);
}

static void
test_async_stable_park (void)
{
  random_async ("arena:device=0,place=stable,park=true,check=true,release_threshold=0", 2000);
}

/* the device filled by another user (cuMemAlloc) but for @left bytes; returns the pointers */
static GArray *
hog_device (gsize left)
{
  GArray *ptrs = g_array_new (FALSE, FALSE, sizeof (CUdeviceptr));
  GError *error = NULL;
  gboolean pushed;
  size_t free_bytes = 0, total = 0;

  MT_CHECK (memres_cuda_push_context (0, &pushed, &error));
  for (;;)
    {
      CUdeviceptr p;
      gsize n;

      g_assert_cmpint (mt_driver ()->cuMemGetInfo (&free_bytes, &total), ==, CUDA_SUCCESS);
      if (free_bytes <= left)
        break;
      n = MIN (free_bytes - left, 256 * MiB);
      g_assert_cmpint (mt_driver ()->cuMemAlloc (&p, n), ==, CUDA_SUCCESS);
      g_array_append_val (ptrs, p);
    }
  memres_cuda_pop_context (pushed);
  return ptrs;
}

static void
unhog_device (GArray *ptrs)
{
  GError *error = NULL;
  gboolean pushed;

  MT_CHECK (memres_cuda_push_context (0, &pushed, &error));
  for (guint i = 0; i < ptrs->len; i++)
    g_assert_cmpint (mt_driver ()->cuMemFree (g_array_index (ptrs, CUdeviceptr, i)), ==, 0);
  memres_cuda_pop_context (pushed);
  g_array_unref (ptrs);
}

/* out of memory on a nearly full device: a clean MEMRES_ERROR_OUT_OF_MEMORY, statistics that
 * hold together, and the memory usable again once buffers are closed */
static void
oom_recover (const char *spec)
{
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  GArray *hog = hog_device (64 * MiB);
  MemresBuffer *bufs[4096];
  CUstream streams[2] = { mt_stream_new_on (0), mt_stream_new_on (0) };
  guint n = 0, n2 = 0, fails = 0;
  GError *error = NULL;

  while (n < G_N_ELEMENTS (bufs) && fails < 20)
    {
      gsize size = random_size ();
      MemresBuffer *b = memres_resource_allocate (mr, size, streams[n % 2], &error);

      if (b == NULL)
        {
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
          g_clear_error (&error);
          fails++;
          consistent (mr);
          continue;
        }
      bufs[n++] = b;
    }
  g_test_message ("%u buffers before 20 failures", n);
  for (guint i = 0; i < n; i++)
    mt_close_ok (bufs[i], streams[i % 2]);
  consistent (mr);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  /* all of it again, 2 MiB at a time, without a trim: at least 60 of the 64 MiB */
  for (n2 = 0;; n2++)
    {
      bufs[n2] = memres_resource_allocate (mr, 2 * MiB, streams[n2 % 2], &error);
      if (bufs[n2] == NULL)
        break;
    }
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_test_message ("%u buffers of 2 MiB after: %s", n2, error->message);
  g_clear_error (&error);
  g_assert_cmpuint (n2, >=, 24);
  for (guint i = 0; i < n2; i++)
    mt_close_ok (bufs[i], streams[i % 2]);
  unhog_device (hog);
  bufs[0] = mt_alloc_ok (mr, 256 * MiB, streams[0]);
  mt_close_ok (bufs[0], streams[0]);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  for (guint i = 0; i < 2; i++)
    mt_stream_free (streams[i]);
}

static void
test_oom_fit (void)
{
  oom_recover ("arena:device=0,check=true");
}

static void
test_oom_stable (void)
{
  oom_recover ("arena:device=0,place=stable,check=true");
}

static void
test_oom_park (void)
{
  oom_recover ("arena:device=0,park=true,check=true");
}

static void
close_ok (MemresBuffer *b, MemresStream s, const char *where)
{
  GError *error = NULL;
  gsize size = memres_buffer_get_size (b);

  if (!memres_buffer_close (b, s, &error))
    g_error ("%s: close of %zu bytes on %p: %s (%s %d)", where, size, (void *) s,
             error ? error->message : "no error", error ? g_quark_to_string (error->domain) : "",
             error ? error->code : 0);
  memres_buffer_unref (b);
}

typedef struct
{
  MemresResource *mr;
  guint seed;
  guint n_ops;
} ThreadJob;

/* one thread's random allocations and closes on a stream of its own and the legacy and
 * per-thread streams; some buffers handed to the next thread to close (a PyTorch autograd
 * thread freeing what the forward allocated) */
static MemresBuffer *handoff[8];
static GMutex handoff_lock;

static gpointer
thread_ops (gpointer data)
{
  ThreadJob *job = data;
  GRand *rand = g_rand_new_with_seed (job->seed);
  CUstream own = mt_stream_new_on (0);
  MemresStream streams[3] = { own, MEMRES_STREAM_LEGACY, (MemresStream) CU_STREAM_PER_THREAD };
  MemresBuffer *bufs[32] = { 0 };
  guint home[32];
  GError *error = NULL;

  for (guint op = 0; op < job->n_ops; op++)
    {
      guint i = (guint) g_rand_int_range (rand, 0, G_N_ELEMENTS (bufs));
      guint si = (guint) g_rand_int_range (rand, 0, 3);
      guint what = (guint) g_rand_int_range (rand, 0, 100);

      if (bufs[i] == NULL)
        {
          gsize size = what < 50 ? (gsize) g_rand_int_range (rand, 1, 65537)
                                 : (gsize) g_rand_int_range (rand, 65537, 6 * 1024 * 1024);

          bufs[i] = memres_resource_allocate (job->mr, size, streams[si], &error);
          g_assert_no_error (error);
          home[i] = si;
        }
      else if (what < 10)
        {
          /* to another thread: done with it on this one first */
          mt_sync_ok (streams[home[i]]);
          g_mutex_lock (&handoff_lock);
          {
            guint h = (guint) g_rand_int_range (rand, 0, G_N_ELEMENTS (handoff));
            MemresBuffer *old = handoff[h];

            handoff[h] = bufs[i];
            bufs[i] = old;
          }
          g_mutex_unlock (&handoff_lock);
          if (bufs[i] != NULL)
            close_ok (bufs[i], MEMRES_STREAM_LEGACY, "handoff");
          bufs[i] = NULL;
        }
      else if (what < 20)
        {
          gsize size = (gsize) g_rand_int_range (rand, 1, 6 * 1024 * 1024);

          MT_CHECK (memres_buffer_resize (bufs[i], size, streams[home[i]], &error));
        }
      else
        {
          close_ok (bufs[i], streams[home[i]], "random");
          bufs[i] = NULL;
        }
      if (what == 99)
        MT_CHECK (
            memres_resource_trim (job->mr, (gsize) g_rand_int_range (rand, 0, 32) * MiB, &error));
      if (what == 98)
        MT_CHECK (memres_resource_reset_stats (job->mr, &error));
      if (what >= 90)
        stats_ok (job->mr);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    if (bufs[i] != NULL)
      close_ok (bufs[i], streams[home[i]], "end");
  mt_stream_free (own);
  g_rand_free (rand);
  return NULL;
}

static void
threads_ops (const char *spec)
{
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  GThread *threads[4];
  ThreadJob jobs[4];

  for (guint t = 0; t < 4; t++)
    {
      jobs[t] = (ThreadJob){ mr, g_test_rand_int (), 2000 };
      threads[t] = g_thread_new ("ops", thread_ops, &jobs[t]);
    }
  for (guint t = 0; t < 4; t++)
    g_thread_join (threads[t]);
  for (guint h = 0; h < G_N_ELEMENTS (handoff); h++)
    if (handoff[h] != NULL)
      {
        close_ok (handoff[h], MEMRES_STREAM_LEGACY, "main");
        handoff[h] = NULL;
      }
  {
    MemresStats st = consistent (mr);

    g_assert_cmpuint (st.n_buffers, ==, 0);
    g_assert_cmpuint (st.used_current, ==, 0);
  }
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  trim_ok (mr);
  g_assert_cmpuint (consistent (mr).reserved_current, ==, 0);
}

static void
test_threads_fit (void)
{
  threads_ops ("arena:device=0,check=true");
}

static void
test_threads_stable (void)
{
  threads_ops ("arena:device=0,place=stable,check=true");
}

static void
test_threads_park (void)
{
  threads_ops ("arena:device=0,park=true,release_threshold=64MiB,check=true");
}

static void
test_random_options (void)
{
  random_ops ("arena:device=0,check=true,handle_type=posix_fd", 1500);
  random_ops ("arena:device=0,check=true,handle_type=posix_fd,export_min=3MiB,place=stable", 1500);
  random_ops ("arena:device=0,check=true,max_block=4MiB,chunk=64MiB", 1500);
  random_ops ("arena:device=0,check=true,max_block=64MiB,chunk=4KiB,front=0", 1500);
  random_ops ("arena:device=0,check=true,max_block=256,chunk=4KiB,front_bytes=0", 1500);
  random_ops ("arena:device=0,check=true,max_block=3MiB,chunk=48MiB,place=stable,park=true", 1500);
  random_ops ("arena:device=0,check=true,settle=eager,event_bytes=0,release_threshold=1", 1500);
}

/* the three placements, each with its heap cross-checked (heap_errors) */
static const char *const specs[]
    = { "arena:device=0,check=true", "arena:device=0,place=stable,check=true",
        "arena:device=0,park=true,check=true" };

/* odd sizes through resize: to 0 and back, a 0-byte buffer grown, exactly max_block, one over */
static void
test_resize_edges (void)
{

  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[k]);
      CUstream st = mt_stream_new_on (0);
      GError *error = NULL;
      gsize sizes[]
          = { 0, 1,       65536, 65537,   2 * MiB,       2 * MiB + 1,   0, 6 * MiB - 1, 65536,
              0, 3 * MiB, 1,     7 * MiB, 7 * MiB + 512, 7 * MiB - 512, 0 };
      MemresBuffer *b = mt_alloc_ok (mr, 0, st);
      MemresBuffer *other = mt_alloc_ok (mr, 3 * MiB, st);

      for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
        {
          gsize old = memres_buffer_get_size (b);

          if (!memres_buffer_resize (b, sizes[i], i % 2 ? st : NULL, &error))
            g_error ("%s: resize %zu -> %zu: %s", specs[k], old, sizes[i], error->message);
          g_assert_cmpuint (memres_buffer_get_size (b), ==, sizes[i]);
          if (sizes[i] > 0)
            {
              mt_fill_byte_ok (b, (guint8) (i + 1), st);
              mt_assert_bytes (b, (guint8) (i + 1), st);
            }
          {
            MemresStats s = consistent (mr);
            g_assert_cmpuint (s.n_buffers, ==, 2);
          }
        }
      mt_close_ok (b, st);
      mt_close_ok (other, st);
      g_assert_cmpuint (counter (mr, "used"), ==, 0);
      trim_ok (mr);
      g_assert_cmpuint (consistent (mr).reserved_current, ==, 0);
      mt_stream_free (st);
    }
}

/* peaks exact: after a reset, the peak of a known sequence */
static void
test_stats_peaks (void)
{

  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[k]);
      CUstream st = mt_stream_new_on (0);
      GError *error = NULL;
      MemresBuffer *a, *b, *c;
      MemresStats s;

      a = mt_alloc_ok (mr, 10 * MiB + 3, st);
      mt_close_ok (a, st);
      MT_CHECK (memres_resource_reset_stats (mr, &error));
      s = consistent (mr);
      g_assert_cmpuint (s.used_high, ==, 0);
      g_assert_cmpuint (s.used_current, ==, 0);
      g_assert_cmpuint (s.reserved_high, ==, s.reserved_current);
      a = mt_alloc_ok (mr, 3 * MiB + 1, st);
      b = mt_alloc_ok (mr, 5 * MiB, st);
      mt_close_ok (a, st);
      c = mt_alloc_ok (mr, 1 * MiB, st);
      s = consistent (mr);
      g_assert_cmpuint (s.used_current, ==, 6 * MiB);
      g_assert_cmpuint (s.used_high, ==, 8 * MiB + 512);
      MT_CHECK (memres_buffer_resize (b, 9 * MiB, st, &error));
      s = consistent (mr);
      g_assert_cmpuint (s.used_current, ==, 10 * MiB);
      g_assert_cmpuint (s.used_high, ==, 10 * MiB);
      MT_CHECK (memres_buffer_resize (b, 1 * MiB, st, &error));
      s = consistent (mr);
      g_assert_cmpuint (s.used_current, ==, 2 * MiB);
      g_assert_cmpuint (s.used_high, ==, 10 * MiB);
      MT_CHECK (memres_resource_reset_stats (mr, &error));
      s = consistent (mr);
      g_assert_cmpuint (s.used_high, ==, 2 * MiB);
      mt_close_ok (b, st);
      mt_close_ok (c, st);
      trim_ok (mr);
      s = consistent (mr);
      g_assert_cmpuint (s.reserved_current, ==, 0);
      g_assert_cmpuint (s.used_high, ==, 2 * MiB);
      mt_stream_free (st);
    }
}

/* a worker thread that keeps using whatever arena it is handed: its front cache outlives the
 * first arena, and the next arena may get the same address */
typedef struct
{
  GMutex lock;
  GCond cond;
  MemresResource *mr; /* the arena to use next (NULL: stop) */
  guint round, done;
  guint64 addrs[64];
} Worker;

static gpointer
worker_main (gpointer data)
{
  Worker *w = data;
  guint seen = 0;

  for (;;)
    {
      MemresResource *mr;
      MemresBuffer *b[64];

      g_mutex_lock (&w->lock);
      while (w->round == seen)
        g_cond_wait (&w->cond, &w->lock);
      seen = w->round;
      mr = w->mr;
      g_mutex_unlock (&w->lock);
      if (mr == NULL)
        break;
      for (guint i = 0; i < 64; i++)
        {
          b[i] = mt_alloc_ok (mr, 1000 + 100 * (i % 8), MEMRES_STREAM_LEGACY);
          w->addrs[i] = memres_buffer_get_address (b[i]);
        }
      for (guint i = 0; i < 64; i++)
        mt_close_ok (b[i], MEMRES_STREAM_LEGACY);
      g_mutex_lock (&w->lock);
      w->done = seen;
      g_cond_broadcast (&w->cond);
      g_mutex_unlock (&w->lock);
    }
  return NULL;
}

static void
worker_run (Worker *w, MemresResource *mr)
{
  g_mutex_lock (&w->lock);
  w->mr = mr;
  w->round++;
  g_cond_broadcast (&w->cond);
  if (mr != NULL)
    while (w->done != w->round)
      g_cond_wait (&w->cond, &w->lock);
  g_mutex_unlock (&w->lock);
}

static void
test_front_outlives (void)
{
  Worker w = { 0 };
  GThread *t;

  g_mutex_init (&w.lock);
  g_cond_init (&w.cond);
  t = g_thread_new ("worker", worker_main, &w);
  for (guint r = 0; r < 20; r++)
    {
      MemresResource *mr = mt_new_ok (r % 2 ? "arena:device=0,check=true"
                                            : "arena:device=0,place=stable,check=true");
      guint64 virt = counter (mr, "virtual");
      MemresBuffer *mine;
      MemresStats s;

      worker_run (&w, mr);
      /* every block the worker got lies in this arena's memory */
      s = consistent (mr);
      g_assert_cmpuint (s.used_current, ==, 0);
      g_assert_cmpuint (s.n_buffers, ==, 0);
      mine = mt_alloc_ok (mr, 3000, NULL);
      for (guint i = 0; i < 64; i++)
        {
          guint64 base = memres_buffer_get_address (mine);

          /* within the same reservation as this arena's own block */
          if (w.addrs[i] + virt <= base || base + virt <= w.addrs[i])
            g_error ("round %u: the worker's block %" G_GINT64_MODIFIER "x is not this arena's", r,
                     w.addrs[i]);
        }
      mt_close_ok (mine, NULL);
      memres_resource_unref (mr);
    }
  worker_run (&w, NULL);
  g_thread_join (t);
  g_mutex_clear (&w.lock);
  g_cond_clear (&w.cond);
}

/* The out-of-memory report's largest free block is what one request could get without new
 * memory: a free range whose mapped bytes lie at both of its ends, unmapped granules between
 * them, serves at most the larger end, not their sum. Here a 1.5 MiB buffer at the bottom of the
 * reservation and a slab at its top leave one free range with 0.5 MiB mapped at its start and
 * 1.75 MiB at its end; the device is full, so a 2 MiB request fails: the largest free block is
 * 1.75 MiB, under the request, and the verdict is fragmentation (a trim frees nothing: no
 * granule is idle). */
static void
test_oom_largest_split (void)
{
  GArray *hog;
  g_autoptr (MemresResource) mr = mt_new_ok ("arena:device=0,check=true");
  g_autofree char *report = NULL;
  MemresBuffer *a, *small, *big;
  GError *error = NULL;
  gsize g = gran (mr);

  g_assert_cmpuint (g, ==, 2 * MiB);
  hog = hog_device (2 * g);
  a = mt_alloc_ok (mr, 3 * g / 4, NULL);
  small = mt_alloc_ok (mr, 4096, NULL);
  g_assert_cmpuint (counter (mr, "physical"), ==, 2 * g);
  g_assert_cmpuint (memres_buffer_get_address (small) / g, !=,
                    (memres_buffer_get_address (a) + 3 * g / 4) / g);
  big = memres_resource_allocate (mr, g, NULL, &error);
  g_assert_null (big);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_test_message ("%s", error->message);
  g_clear_error (&error);
  report = memres_resource_get_oom_report (mr);
  g_assert_nonnull (report);
  /* the slab's granule: 2 MiB less the slab's 256 KiB free before it */
  g_assert_nonnull (strstr (report, "largest free block 1.8 MiB"));
  g_assert_nonnull (strstr (report, "fragmentation"));
  mt_close_ok (a, NULL);
  mt_close_ok (small, NULL);
  unhog_device (hog);
}

/* requests the device cannot hold, each larger than the last (a program probing down from too
 * much, or a batch size doubled until it fails): every one fails, and the address space reserved
 * for them is not kept (docs/arena.md, Failures: every driver step is rolled back) */
static void
test_oom_growing_va (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("arena:device=0,check=true");
  guint64 virt0 = counter (mr, "virtual");
  FakeCudaCounts base, now;
  MemresBuffer *b;

  mt_counts_snapshot (&base);
  for (guint i = 1; i <= 6; i++)
    {
      GError *error = NULL;
      b = memres_resource_allocate (mr, (gsize) i << 40, NULL, &error);
      g_assert_null (b);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      g_clear_error (&error);
      g_test_message ("after %u TiB: virtual %" G_GUINT64_FORMAT " in %" G_GUINT64_FORMAT
                      " reservations",
                      i, counter (mr, "virtual"), counter (mr, "reservations"));
    }
  g_assert_cmpuint (counter (mr, "virtual"), ==, virt0);
  g_assert_cmpuint (counter (mr, "reservations"), ==, 1);
  mt_counts_snapshot (&now);
  g_assert_cmpint (now.reservations, ==, base.reservations);
  /* and the arena still serves */
  b = mt_alloc_ok (mr, 64 << 20, NULL);
  mt_fill_byte_ok (b, 0x5a, NULL);
  mt_assert_bytes (b, 0x5a, NULL);
  mt_close_ok (b, NULL);
}

int
main (int argc, char **argv)
{
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "4GiB", FALSE);
  mt_init (&argc, &argv);
  g_test_add_func ("/arena-break/random/fit", test_random_fit);
  g_test_add_func ("/arena-break/random/stable", test_random_stable);
  g_test_add_func ("/arena-break/random/park", test_random_park);
  g_test_add_func ("/arena-break/random/small-reserve", test_random_small_reserve);
  g_test_add_func ("/arena-break/oom/repeated-va", test_oom_repeated_va);
  g_test_add_func ("/arena-break/async/fit", test_async_fit);
  g_test_add_func ("/arena-break/async/stable", test_async_stable);
  g_test_add_func ("/arena-break/async/park", test_async_park);
  g_test_add_func ("/arena-break/async/stable-park", test_async_stable_park);
  g_test_add_func ("/arena-break/oom/fit", test_oom_fit);
  g_test_add_func ("/arena-break/oom/stable", test_oom_stable);
  g_test_add_func ("/arena-break/oom/park", test_oom_park);
  g_test_add_func ("/arena-break/threads/fit", test_threads_fit);
  g_test_add_func ("/arena-break/threads/stable", test_threads_stable);
  g_test_add_func ("/arena-break/threads/park", test_threads_park);
  g_test_add_func ("/arena-break/random/options", test_random_options);
  g_test_add_func ("/arena-break/resize/edges", test_resize_edges);
  g_test_add_func ("/arena-break/stats/peaks", test_stats_peaks);
  g_test_add_func ("/arena-break/threads/front-outlives", test_front_outlives);
  g_test_add_func ("/arena-break/oom/largest-split", test_oom_largest_split);
  g_test_add_func ("/arena-break/oom/growing-va", test_oom_growing_va);
  return g_test_run ();
}

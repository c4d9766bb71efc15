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

/* The free ranges' indexes (arena-tree.c: the best-fit tree, the run index and the address tree,
 * whose search finds a free's neighbours) under many ranges, ties, tags side by side, two
 * reservations side by side, faults and sleep. heap_errors (check=true) must stay 0. */

static void
heap_ok (MemresResource *mr)
{
  g_assert_cmpuint (counter (mr, "heap_errors"), ==, 0);
}

static void
shuffle (guint *idx, guint n)
{
  for (guint i = n - 1; i > 0; i--)
    {
      guint j = (guint) g_test_rand_int_range (0, (gint32) i + 1), t = idx[i];

      idx[i] = idx[j];
      idx[j] = t;
    }
}

/* The blocks of @mr's snapshot in @state ("pending": free ranges of a stream, mapped) */
static guint
snapshot_blocks (MemresResource *mr, const char *state)
{
  GError *error = NULL;
  g_autofree char *doc = memres_resource_snapshot (mr, &error);
  g_autoptr (GRegex) re = g_regex_new (
      "\"stream\": \"[^\"]*\",\\s*\"tag\": \"[^\"]*\",\\s*\"state\": \"([a-z]+)\"", 0, 0, NULL);
  g_autoptr (GMatchInfo) m = NULL;
  guint n = 0;

  g_assert_no_error (error);
  for (g_regex_match (re, doc, 0, &m); g_match_info_matches (m); g_match_info_next (m, NULL))
    {
      g_autofree char *st = g_match_info_fetch (m, 1);

      n += g_strcmp0 (st, state) == 0;
    }
  return n;
}

/* 3,000 buffers of 512 B and 1 KiB side by side (max_block=256: each a large extent); the
 * 1,500 of 512 B freed in random order, 1,500 free ranges of one stream and one size (ties of
 * the best-fit order, broken by address); taken again at their size, lowest address first,
 * without memory created; then everything freed in random order coalesces into one range
 * that serves the sum at the first address. */
static void
test_heap_many_ties (void)
{
  static const char *const tie_specs[] = { "arena:device=0,check=true,max_block=256",
                                           "arena:device=0,check=true,max_block=256,place=stable",
                                           "arena:device=0,check=true,max_block=256,settle=eager" };
  enum
  {
    N = 3000
  };

  for (guint k = 0; k < G_N_ELEMENTS (tie_specs); k++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (tie_specs[k]);
      CUstream s = mt_stream_new_on (0);
      g_autofree MemresBuffer **b = g_new0 (MemresBuffer *, N);
      g_autofree guint64 *addr = g_new (guint64, N);
      g_autofree guint *idx = g_new (guint, N);
      guint64 created;
      MemresBuffer *big;

      for (guint i = 0; i < N; i++)
        {
          b[i] = mt_alloc_ok (mr, 512 + (i % 2) * 512, s);
          addr[i] = memres_buffer_get_address (b[i]);
          if (i > 0)
            g_assert_cmpuint (addr[i], ==, addr[i - 1] + 512 + ((i - 1) % 2) * 512);
        }
      for (guint i = 0; i < N / 2; i++)
        idx[i] = 2 * i;
      shuffle (idx, N / 2);
      for (guint i = 0; i < N / 2; i++)
        {
          mt_close_ok (b[idx[i]], s);
          if (i % 100 == 0)
            heap_ok (mr);
        }
      heap_ok (mr);
      g_assert_cmpuint (snapshot_blocks (mr, "pending"), ==, N / 2);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, N / 2 * 512);
      created = counter (mr, "granules_created");
      for (guint i = 0; i < N / 2; i++)
        {
          b[2 * i] = mt_alloc_ok (mr, 512, s);
          g_assert_cmpuint (memres_buffer_get_address (b[2 * i]), ==, addr[2 * i]);
        }
      g_assert_cmpuint (counter (mr, "granules_created"), ==, created);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, 0);
      heap_ok (mr);
      for (guint i = 0; i < N; i++)
        idx[i] = i;
      shuffle (idx, N);
      for (guint i = 0; i < N; i++)
        {
          mt_close_ok (b[idx[i]], s);
          if (i % 100 == 0)
            heap_ok (mr);
        }
      heap_ok (mr);
      g_assert_cmpuint (snapshot_blocks (mr, "pending"), ==, 1);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, N / 2 * 1536);
      big = mt_alloc_ok (mr, N / 2 * 1536, s);
      g_assert_cmpuint (memres_buffer_get_address (big), ==, addr[0]);
      g_assert_cmpuint (counter (mr, "run_takes"), ==, 0);
      g_assert_cmpuint (counter (mr, "granules_created"), ==, created);
      mt_close_ok (big, s);
      assert_emptied (mr, &s, 1);
    }
}

/* 999 buffers of 1 KiB side by side freed in random order on two streams and the legacy one in
 * turn: no two neighbours share a stream, so none coalesce (999 free ranges of a stream); a
 * request of 2 KiB on the first stream fits none of them (nor a run: its ranges are apart) and
 * lands after them. Once everything settles (a trim), it is one range again. */
static void
test_heap_tags_apart (void)
{
  static const char *const apart_specs[]
      = { "arena:device=0,check=true,max_block=256",
          "arena:device=0,check=true,max_block=256,place=stable" };
  enum
  {
    N = 999
  };

  for (guint k = 0; k < G_N_ELEMENTS (apart_specs); k++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (apart_specs[k]);
      CUstream a = mt_stream_new_on (0), bs = mt_stream_new_on (0);
      MemresStream tags[3] = { a, bs, MEMRES_STREAM_LEGACY };
      g_autofree MemresBuffer **b = g_new0 (MemresBuffer *, N);
      g_autofree guint64 *addr = g_new (guint64, N);
      g_autofree guint *idx = g_new (guint, N);
      MemresBuffer *x;

      for (guint i = 0; i < N; i++)
        {
          b[i] = mt_alloc_ok (mr, 1024, a);
          addr[i] = memres_buffer_get_address (b[i]);
          if (i > 0)
            g_assert_cmpuint (addr[i], ==, addr[i - 1] + 1024);
          idx[i] = i;
        }
      /* the other streams' closes ordered after a's work on the buffers */
      mt_sync_ok (a);
      shuffle (idx, N);
      for (guint i = 0; i < N; i++)
        {
          mt_close_ok (b[idx[i]], tags[idx[i] % 3]);
          if (i % 50 == 0)
            heap_ok (mr);
        }
      heap_ok (mr);
      g_assert_cmpuint (snapshot_blocks (mr, "pending"), ==, N);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, N * 1024);
      x = mt_alloc_ok (mr, 2048, a);
      g_assert_cmpuint (memres_buffer_get_address (x), ==, addr[N - 1] + 1024);
      g_assert_cmpuint (counter (mr, "run_takes"), ==, 0);
      heap_ok (mr);
      mt_close_ok (x, a);
      mt_sync_ok (a);
      mt_sync_ok (bs);
      mt_sync_ok (MEMRES_STREAM_LEGACY);
      trim_ok (mr);
      heap_ok (mr);
      g_assert_cmpuint (snapshot_blocks (mr, "pending"), ==, 0);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, 0);
      x = mt_alloc_ok (mr, N * 1024, bs);
      g_assert_cmpuint (memres_buffer_get_address (x), ==, addr[0]);
      mt_close_ok (x, bs);
      mt_sync_ok (bs);
      assert_emptied (mr, (CUstream[]){ a, bs }, 2);
    }
}

/* A buffer grows in place into the free range after it (the address tree's neighbour) when that
 * range was freed on its stream (closed on it, or with no stream: its own), or settled; not
 * when it was freed on another stream; and never past the live buffer after that range. */
static void
test_heap_grow_neighbour (void)
{
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    for (guint how = 0; how < 4; how++)
      {
        g_autoptr (MemresResource) mr = mt_new_ok (specs[k]);
        CUstream s = mt_stream_new_on (0), t = mt_stream_new_on (0);
        GError *error = NULL;
        MemresBuffer *x = mt_alloc_ok (mr, 1 * MiB, s), *y = mt_alloc_ok (mr, 1 * MiB, s);
        MemresBuffer *z = mt_alloc_ok (mr, 1 * MiB, s);
        guint64 ax = memres_buffer_get_address (x);

        g_assert_cmpuint (memres_buffer_get_address (y), ==, ax + MiB);
        g_assert_cmpuint (memres_buffer_get_address (z), ==, ax + 2 * MiB);
        if (how == 1)
          mt_sync_ok (s);
        mt_close_ok (y, how == 1 ? t : how == 2 ? NULL : s);
        if (how == 3)
          {
            mt_sync_ok (s);
            trim_ok (mr);
          }
        heap_ok (mr);
        MT_CHECK (memres_buffer_resize (x, MiB + 512 * KiB, s, &error));
        g_assert_true ((memres_buffer_get_address (x) == ax) == (how != 1));
        heap_ok (mr);
        MT_CHECK (memres_buffer_resize (x, 2 * MiB, s, &error));
        g_assert_true ((memres_buffer_get_address (x) == ax) == (how != 1));
        heap_ok (mr);
        MT_CHECK (memres_buffer_resize (x, 2 * MiB + 512, s, &error));
        g_assert_cmpuint (memres_buffer_get_address (x), !=, ax);
        heap_ok (mr);
        mt_close_ok (x, s);
        mt_close_ok (z, s);
        heap_ok (mr);
        mt_sync_ok (s);
        mt_sync_ok (t);
        trim_ok (mr);
        g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
        mt_stream_free (s);
        mt_stream_free (t);
      }
}

/* The fake's address space taken but for [lo, hi) (which the next reservation then gets: the
 * fake's first fit, when no gap leaves room after it); the reservations made, for va_unfill(). */
static GArray *
va_fill_but (guint64 lo, guint64 hi)
{
  GArray *res = g_array_new (FALSE, FALSE, sizeof (guint64) * 2);
  const MemresCudaDriver *drv = mt_driver ();
  GError *error = NULL;
  CUdeviceptr hold = 0;
  gboolean pushed;

  MT_CHECK (memres_cuda_push_context (0, &pushed, &error));
  g_assert_cmpint (drv->cuMemAddressReserve (&hold, hi - lo, 0, lo, 0), ==, CUDA_SUCCESS);
  g_assert_cmpuint (hold, ==, lo);
  for (guint64 size = (guint64) 1 << 44; size >= 2 * MiB; size /= 2)
    for (;;)
      {
        CUdeviceptr p = 0;
        guint64 v[2];

        if (drv->cuMemAddressReserve (&p, size, 0, 0, 0) != CUDA_SUCCESS)
          break;
        v[0] = p;
        v[1] = size;
        g_array_append_val (res, v);
      }
  g_assert_cmpint (drv->cuMemAddressFree (lo, hi - lo), ==, CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  return res;
}

static void
va_unfill (GArray *res)
{
  const MemresCudaDriver *drv = mt_driver ();
  GError *error = NULL;
  gboolean pushed;

  MT_CHECK (memres_cuda_push_context (0, &pushed, &error));
  for (guint i = 0; i < res->len; i++)
    {
      guint64 *v = &g_array_index (res, guint64, 2 * i);

      g_assert_cmpint (drv->cuMemAddressFree (v[0], v[1]), ==, CUDA_SUCCESS);
    }
  memres_cuda_pop_context (pushed);
  g_array_unref (res);
}

/* [a, a + n) on one side of @seam */
static gboolean
one_side (guint64 a, guint64 n, guint64 seam)
{
  return a + n <= seam || a >= seam;
}

/* Two reservations side by side (reserve=16MiB; the second made where the fake is left no other
 * room, right after the first): the ranges either side of the seam never coalesce, no run
 * crosses it (the last buffer of the first and the first of the second freed on one stream), a
 * grow in place stops at it; and a second reservation made there for a request that fails is
 * given back, the first one's last free range (linked with its range) unlinked. */
static void
test_heap_seam (void)
{
  static const char *const seam_specs[]
      = { "arena:device=0,check=true,reserve=16MiB",
          "arena:device=0,check=true,reserve=16MiB,place=stable",
          "arena:device=0,check=true,reserve=16MiB,park=true",
          "arena:device=0,check=true,reserve=16MiB,settle=eager" };

  if (!mt_require_fake ("the fake's address space is laid out by hand"))
    return;
  for (guint k = 0; k < G_N_ELEMENTS (seam_specs); k++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (seam_specs[k]);
      CUstream s = mt_stream_new_on (0), t = mt_stream_new_on (0);
      GError *error = NULL;
      MemresBuffer *b0, *b1, *b2, *b3, *x;
      guint64 v, seam;
      GArray *fill;

      g_assert_cmpuint (counter (mr, "virtual"), ==, 16 * MiB);
      b0 = mt_alloc_ok (mr, 4 * MiB, s);
      v = memres_buffer_get_address (b0);
      seam = v + 16 * MiB;
      b1 = mt_alloc_ok (mr, 12 * MiB, s);
      g_assert_cmpuint (memres_buffer_get_address (b1), ==, v + 4 * MiB);
      mt_close_ok (b1, s);
      fill = va_fill_but (seam, seam + 16 * MiB);
      /* each step of backing the request failing in turn: the reservation it made goes */
      for (guint f = 0; f < 3; f++)
        {
          mt_fake_fail_call (f == 0   ? "cuMemCreate"
                             : f == 1 ? "cuMemMap"
                                      : "cuMemSetAccess",
                             1, CUDA_ERROR_UNKNOWN);
          x = memres_resource_allocate (mr, 14 * MiB, s, &error);
          mt_fake_reset_faults ();
          g_assert_null (x);
          g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
          g_clear_error (&error);
          heap_ok (mr);
          g_assert_cmpuint (counter (mr, "reservations"), ==, 1);
          g_assert_cmpuint (counter (mr, "virtual"), ==, 16 * MiB);
        }
      b1 = mt_alloc_ok (mr, 12 * MiB, s);
      g_assert_cmpuint (memres_buffer_get_address (b1), ==, v + 4 * MiB);
      b2 = mt_alloc_ok (mr, 4 * MiB, s);
      va_unfill (fill);
      g_assert_cmpuint (counter (mr, "reservations"), ==, 2);
      g_assert_cmpuint (memres_buffer_get_address (b2), ==, seam);
      b3 = mt_alloc_ok (mr, 4 * MiB, s);
      g_assert_cmpuint (memres_buffer_get_address (b3), ==, seam + 4 * MiB);
      heap_ok (mr);
      mt_close_ok (b1, s);
      mt_close_ok (b2, s);
      heap_ok (mr);
      /* two free ranges of s (parked extents under park=true) */
      g_assert_cmpuint (snapshot_blocks (mr, "pending"), ==, 2);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==,
                        strstr (seam_specs[k], "park=true") != NULL ? 0 : 16 * MiB);
      /* b1's 12 MiB and b2's 2 would serve 14 MiB across the seam */
      x = mt_alloc_ok (mr, 14 * MiB, s);
      g_assert_true (one_side (memres_buffer_get_address (x), 14 * MiB, seam));
      heap_ok (mr);
      mt_close_ok (x, s);
      /* b0 grown into b1's bytes, up to the seam; past it, moved */
      MT_CHECK (memres_buffer_resize (b0, 16 * MiB, s, &error));
      g_assert_cmpuint (memres_buffer_get_address (b0), ==, v);
      heap_ok (mr);
      MT_CHECK (memres_buffer_resize (b0, 17 * MiB, s, &error));
      g_assert_true (one_side (memres_buffer_get_address (b0), 17 * MiB, seam));
      g_assert_cmpuint (memres_buffer_get_address (b0), !=, v);
      heap_ok (mr);
      /* settled on both sides: still apart */
      mt_sync_ok (s);
      trim_ok (mr);
      heap_ok (mr);
      x = mt_alloc_ok (mr, 20 * MiB, t);
      g_assert_true (one_side (memres_buffer_get_address (x), 20 * MiB, seam));
      heap_ok (mr);
      mt_close_ok (x, t);
      mt_close_ok (b0, s);
      mt_close_ok (b3, s);
      mt_sync_ok (s);
      mt_sync_ok (t);
      heap_ok (mr);
      g_assert_cmpuint (snapshot_adds_up (mr, 0), ==, 0);
      assert_emptied (mr, (CUstream[]){ s, t }, 2);
    }
}

/* test_heap_seam() with the second reservation just before the first: the buffer at its end
 * does not grow into the first one's free range (of its stream), nor a request take both. */
static void
test_heap_seam_below (void)
{
  const MemresCudaDriver *drv = mt_driver ();

  if (!mt_require_fake ("the fake's address space is laid out by hand"))
    return;
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    {
      g_autoptr (MemresResource) mr = NULL;
      CUstream s = mt_stream_new_on (0);
      GError *error = NULL;
      MemresBuffer *b0, *b1, *c0, *c1, *x;
      CUdeviceptr dummy = 0;
      guint64 v;
      GArray *fill;
      gboolean pushed;

      /* 64 MiB taken first: the arena's reservation lies after it and the room the fake leaves
       * after a reservation, whose last 16 MiB the arena's second then takes */
      MT_CHECK (memres_cuda_push_context (0, &pushed, &error));
      g_assert_cmpint (drv->cuMemAddressReserve (&dummy, 64 * MiB, 0, 0, 0), ==, CUDA_SUCCESS);
      memres_cuda_pop_context (pushed);
      mr = mt_new_printf_ok ("%s,reserve=16MiB", specs[k]);
      b0 = mt_alloc_ok (mr, 4 * MiB, s);
      v = memres_buffer_get_address (b0);
      b1 = mt_alloc_ok (mr, 12 * MiB, s);
      fill = va_fill_but (v - 16 * MiB, v);
      c0 = mt_alloc_ok (mr, 12 * MiB, s);
      va_unfill (fill);
      g_assert_cmpuint (memres_buffer_get_address (c0), ==, v - 16 * MiB);
      c1 = mt_alloc_ok (mr, 4 * MiB, s);
      g_assert_cmpuint (memres_buffer_get_address (c1), ==, v - 4 * MiB);
      mt_close_ok (b0, s);
      heap_ok (mr);
      MT_CHECK (memres_buffer_resize (c1, 6 * MiB, s, &error));
      g_assert_true (one_side (memres_buffer_get_address (c1), 6 * MiB, v));
      g_assert_cmpuint (memres_buffer_get_address (c1), !=, v - 4 * MiB);
      heap_ok (mr);
      mt_close_ok (c1, s);
      heap_ok (mr);
      x = mt_alloc_ok (mr, 8 * MiB, s);
      g_assert_true (one_side (memres_buffer_get_address (x), 8 * MiB, v));
      heap_ok (mr);
      mt_close_ok (x, s);
      mt_close_ok (c0, s);
      mt_close_ok (b1, s);
      mt_sync_ok (s);
      heap_ok (mr);
      g_assert_cmpuint (snapshot_adds_up (mr, 0), ==, 0);
      trim_ok (mr);
      x = mt_alloc_ok (mr, 20 * MiB, s);
      g_assert_true (one_side (memres_buffer_get_address (x), 20 * MiB, v));
      mt_close_ok (x, s);
      assert_emptied (mr, &s, 1);
      g_clear_pointer (&mr, memres_resource_unref);
      MT_CHECK (memres_cuda_push_context (0, &pushed, &error));
      g_assert_cmpint (drv->cuMemAddressFree (dummy, 64 * MiB), ==, CUDA_SUCCESS);
      memres_cuda_pop_context (pushed);
    }
}

/* An arena of 16 MiB reservations fragmented: 1 KiB buffers freed on two streams in turn, 3 MiB
 * ones between them (1,200 buffers, 612 free ranges) */
typedef struct
{
  MemresResource *mr;
  CUstream s, t;
  MemresBuffer *live[700];
  guint n_live;
} Frag;

static void
frag_setup (Frag *f, const char *spec)
{
  MemresBuffer *tmp[1200];

  f->mr = mt_new_ok (spec);
  f->s = mt_stream_new_on (0);
  f->t = mt_stream_new_on (0);
  f->n_live = 0;
  for (guint i = 0; i < G_N_ELEMENTS (tmp); i++)
    tmp[i] = mt_alloc_ok (f->mr, i % 100 == 99 ? 3 * MiB : 1024, f->s);
  mt_sync_ok (f->s);
  for (guint i = 0; i < G_N_ELEMENTS (tmp); i++)
    if (i % 2 == 0 || i % 100 == 99)
      mt_close_ok (tmp[i], i % 4 == 0 ? f->s : f->t);
    else
      f->live[f->n_live++] = tmp[i];
}

static void
frag_teardown (Frag *f)
{
  for (guint i = 0; i < f->n_live; i++)
    mt_close_ok (f->live[i], f->s);
  mt_sync_ok (f->s);
  mt_sync_ok (f->t);
  heap_ok (f->mr);
  trim_ok (f->mr);
  heap_ok (f->mr);
  g_assert_cmpuint (stats_ok (f->mr).reserved_current, ==, 0);
  g_assert_cmpuint (counter (f->mr, "tagged_bytes"), ==, 0);
  g_clear_pointer (&f->mr, memres_resource_unref);
  mt_stream_free (f->s);
  mt_stream_free (f->t);
}

/* 5 MiB on s, 20 MiB on t (more address space), the first grown to 9 MiB */
static gboolean
frag_op (Frag *f, GError **error)
{
  MemresBuffer *a = memres_resource_allocate (f->mr, 5 * MiB, f->s, error), *b;

  if (a == NULL)
    return FALSE;
  f->live[f->n_live++] = a;
  if ((b = memres_resource_allocate (f->mr, 20 * MiB, f->t, error)) == NULL)
    return FALSE;
  f->live[f->n_live++] = b;
  return memres_buffer_resize (a, 9 * MiB, f->s, error);
}

/* frag_op() on a fragmented arena, each driver call it makes failing in turn: the error is the
 * driver's, the heap whole, the bytes used those of the buffers live, and once all is closed
 * and the arena gone, nothing left with the driver */
static void
test_heap_frag_faults (void)
{
  static const char *const frag_specs[]
      = { "arena:device=0,check=true,max_block=256,reserve=16MiB",
          "arena:device=0,check=true,max_block=256,reserve=16MiB,place=stable",
          "arena:device=0,check=true,max_block=256,reserve=16MiB,park=true",
          "arena:device=0,check=true,max_block=256,reserve=16MiB,settle=eager" };

  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  for (guint k = 0; k < G_N_ELEMENTS (frag_specs); k++)
    {
      FakeCudaCounts base;
      GError *error = NULL;
      g_auto (GStrv) calls = NULL;
      Frag f;
      gint n;

      mt_counts_snapshot (&base);
      frag_setup (&f, frag_specs[k]);
      heap_ok (f.mr);
      /* the 612 closes: free ranges of their streams, or parked extents */
      if (strstr (frag_specs[k], "park=true") != NULL)
        g_assert_cmpuint (counter (f.mr, "parked"), ==, 612);
      else
        g_assert_cmpuint (counter (f.mr, "tagged_bytes"), ==, 600 * KiB + 12 * 3 * MiB);
      mt_fake_trace_begin ();
      MT_CHECK (frag_op (&f, &error));
      calls = mt_fake_trace_end_strv (&n);
      heap_ok (f.mr);
      frag_teardown (&f);
      mt_assert_fake_counts_equal (&base);
      g_assert_cmpint (n, >=, 8);
      for (gint i = 0; i < n; i++)
        {
          gint nth = mt_call_ordinal (calls, i);
          guint64 want;
          guint n0;
          gboolean ok;

          frag_setup (&f, frag_specs[k]);
          want = counter (f.mr, "used");
          n0 = f.n_live;
          mt_fake_fail_call (calls[i], nth, CUDA_ERROR_UNKNOWN);
          ok = frag_op (&f, &error);
          mt_fake_reset_faults ();
          if (!ok)
            {
              g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
              g_clear_error (&error);
            }
          heap_ok (f.mr);
          for (guint j = n0; j < f.n_live; j++)
            want += (memres_buffer_get_size (f.live[j]) + 511) & ~(gsize) 511;
          g_assert_cmpuint (counter (f.mr, "used"), ==, want);
          frag_teardown (&f);
          mt_assert_fake_counts_equal (&base);
        }
    }
}

/* 600 buffers of two tags, half of them freed in random order; one tag put to sleep (backup)
 * and woken three times while the other allocates and frees around it: the heap whole at each
 * step, the sleeping tag's contents kept, and everything back at the end */
static void
test_heap_sleep (void)
{
  static const char *const sleep_specs[] = { "arena:device=0,check=true,max_block=256",
                                             "arena:device=0,check=true,max_block=256,place=stable",
                                             "arena:device=0,check=true,park=true" };
  enum
  {
    N = 600
  };

  for (guint k = 0; k < G_N_ELEMENTS (sleep_specs); k++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (sleep_specs[k]);
      CUstream s = mt_stream_new_on (0);
      GError *error = NULL;
      g_autofree MemresBuffer **b = g_new0 (MemresBuffer *, N);
      g_autofree guint *idx = g_new (guint, N);
      g_autoptr (MemresSleepPolicy) policy = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, &error);

      g_assert_no_error (error);
      for (guint i = 0; i < N; i++)
        {
          const char *tag = i % 3 == 0 ? "w" : "k";

          MT_CHECK (memres_tag_push (tag, &error));
          b[i] = mt_alloc_ok (mr, i % 50 == 7 ? 3 * MiB + 512 * i : 1024 + 512 * (i % 5), s);
          MT_CHECK (memres_tag_pop (tag, &error));
          mt_fill_byte_ok (b[i], (guint8) (i + 1), s);
          idx[i] = i;
        }
      shuffle (idx, N);
      for (guint i = 0; i < N / 2; i++)
        {
          mt_close_ok (b[idx[i]], s);
          b[idx[i]] = NULL;
        }
      heap_ok (mr);
      for (guint round = 0; round < 3; round++)
        {
          MemresBuffer *extra[40];

          MT_CHECK (memres_resource_sleep (mr, "w", policy, s, &error));
          heap_ok (mr);
          MT_CHECK (memres_tag_push ("k", &error));
          for (guint i = 0; i < G_N_ELEMENTS (extra); i++)
            extra[i] = mt_alloc_ok (mr, i % 4 == 0 ? 2 * MiB + 1024 * i : 1536, s);
          MT_CHECK (memres_tag_pop ("k", &error));
          for (guint i = 0; i < G_N_ELEMENTS (extra); i += 2)
            mt_close_ok (extra[i], s);
          heap_ok (mr);
          MT_CHECK (memres_resource_wake (mr, "w", s, &error));
          heap_ok (mr);
          for (guint i = 1; i < G_N_ELEMENTS (extra); i += 2)
            mt_close_ok (extra[i], s);
          for (guint i = 0; i < N; i++)
            if (b[i] != NULL && (i % 3 == 0 || (i + round) % 7 == 0))
              mt_assert_bytes (b[i], (guint8) (i + 1), s);
          if (round == 1)
            trim_ok (mr);
          heap_ok (mr);
        }
      for (guint i = 0; i < N; i++)
        if (b[i] != NULL)
          mt_close_ok (b[i], s);
      mt_sync_ok (s);
      heap_ok (mr);
      assert_emptied (mr, &s, 1);
    }
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
  g_test_add_func ("/arena-break/heap/many-ties", test_heap_many_ties);
  g_test_add_func ("/arena-break/heap/tags-apart", test_heap_tags_apart);
  g_test_add_func ("/arena-break/heap/grow-neighbour", test_heap_grow_neighbour);
  g_test_add_func ("/arena-break/heap/seam", test_heap_seam);
  g_test_add_func ("/arena-break/heap/seam-below", test_heap_seam_below);
  g_test_add_func ("/arena-break/heap/frag-faults", test_heap_frag_faults);
  g_test_add_func ("/arena-break/heap/sleep", test_heap_sleep);
  return g_test_run ();
}

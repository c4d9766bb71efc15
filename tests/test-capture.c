/* test-capture.c: what the kinds other than `graph` do with a stream that is capturing a CUDA
 * graph (docs/graph.md, "Every other kind"), against the fake (suite fake) and the real driver
 * (suite gpu): the arena refuses to allocate on it, as the pool kinds do, and so does a miss of
 * the cache (before it gives idle blocks back to the upstream); a wait for it
 * (memres_cuda_stream_synchronize(), and so the close of memory that is not stream-ordered) is
 * refused before cuStreamSynchronize, which would invalidate the capture. Nothing is lost: the
 * refused close succeeds once the capture has ended. */
#include "testutil.h"

#include <memres/memres-tags.h>

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

typedef struct
{
  const MemresCudaDriver *drv;
  CUstream stream;
  FakeCudaCounts base;
} Fixture;

static gboolean
fixture_init (Fixture *f)
{
  GError *error = NULL;

  memset (f, 0, sizeof *f);
  if (!mt_require_devices (1))
    return FALSE;
  mt_counts_snapshot (&f->base);
  MT_CHECK (memres_cuda_ensure_context (0, &error));
  f->drv = memres_cuda_get_driver (NULL);
  f->stream = mt_stream_new_on (0);
  return TRUE;
}

static void
fixture_clear (Fixture *f)
{
  mt_stream_free (f->stream);
  mt_assert_fake_counts_equal (&f->base);
}

/* Ends the capture, which must still be valid (a graph comes back), and destroys the graph. */
static void
end_capture (Fixture *f)
{
  CU_OK (f->drv->cuGraphDestroy (mt_capture_end (f->stream)));
}

/* The arena refuses a capturing stream for a request of each path (a class's first block, a
 * large one), counts nothing, and serves the same stream once the capture has ended. */
static void
test_arena_refuses (void)
{
  static const gsize sizes[] = { 256, 1 * MiB, 64 * MiB };
  GError *error = NULL;
  MemresResource *mr;
  Fixture f;

  if (!fixture_init (&f))
    return;
  mr = mt_new_ok ("arena:device=0");
  mt_capture_begin (f.stream);
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      MemresBuffer *buf = memres_resource_allocate (mr, sizes[i], (MemresStream) f.stream, &error);

      g_assert_null (buf);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_assert_nonnull (strstr (error->message, "graph:device=N"));
      g_clear_error (&error);
    }
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  end_capture (&f);

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      MemresBuffer *buf = memres_resource_allocate (mr, sizes[i], (MemresStream) f.stream, &error);

      g_assert_no_error (error);
      g_assert_cmpuint (mt_stats_ok (mr).used_current, >=, sizes[i]);
      mt_close_ok (buf, (MemresStream) f.stream);
    }
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  /* the legacy stream cannot capture and is not asked: it allocates while the other captures */
  mt_capture_begin (f.stream);
  {
    MemresBuffer *buf = memres_resource_allocate (mr, 64 * MiB, NULL, &error);

    g_assert_no_error (error);
    end_capture (&f);
    mt_close_ok (buf, NULL);
  }
  MT_CHECK (memres_resource_trim (mr, 0, &error));
  memres_resource_unref (mr);
  fixture_clear (&f);
}

/* A miss of `cache` on a capturing stream is refused before it touches the upstream: it used to
 * give the idle blocks back first, ordered on the capture (a free node of the graph), and the
 * cache lost them when the driver refused. Over a pool kind and over vmm (whose own allocation
 * a capture may make). */
static void
test_cache_miss_refused (gconstpointer data)
{
  const char *spec = data;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  MemresStats before;
  long frees, unmaps;
  Fixture f;

  if (!fixture_init (&f))
    return;
  mr = mt_new_ok (spec);
  /* an idle block of the largest class, cached for the stream */
  buf = mt_alloc_ok (mr, 64 * MiB, (MemresStream) f.stream);
  mt_close_ok (buf, (MemresStream) f.stream);
  mt_sync_ok ((MemresStream) f.stream);
  before = mt_stats_ok (mr);
  g_assert_cmpuint (before.reserved_current, >=, 64 * MiB);

  mt_capture_begin (f.stream);
  frees = mt_driver_is_fake () ? mt_fake_call_count ("cuMemFreeAsync") : 0;
  unmaps = mt_driver_is_fake () ? mt_fake_call_count ("cuMemUnmap") : 0;
  g_assert_null (memres_resource_allocate (mr, 1 * MiB, (MemresStream) f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuMemFreeAsync"), ==, frees);
      g_assert_cmpint (mt_fake_call_count ("cuMemUnmap"), ==, unmaps);
    }
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, before.reserved_current);
  end_capture (&f);

  buf = mt_alloc_ok (mr, 1 * MiB, (MemresStream) f.stream);
  mt_close_ok (buf, (MemresStream) f.stream);
  mt_sync_ok ((MemresStream) f.stream);
  MT_CHECK (memres_resource_trim (mr, 0, &error));
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  memres_resource_unref (mr);
  fixture_clear (&f);
}

/* memres_cuda_stream_synchronize() of a capturing stream: refused without cuStreamSynchronize,
 * the capture still valid; the legacy stream is waited for as before. */
static void
test_synchronize_refused (void)
{
  GError *error = NULL;
  long syncs;
  Fixture f;

  if (!fixture_init (&f))
    return;
  mt_capture_begin (f.stream);
  syncs = mt_driver_is_fake () ? mt_fake_call_count ("cuStreamSynchronize") : 0;
  g_assert_false (memres_cuda_stream_synchronize (0, (MemresStream) f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "cuStreamEndCapture"));
  g_clear_error (&error);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamSynchronize"), ==, syncs);
  end_capture (&f);
  MT_CHECK (memres_cuda_stream_synchronize (0, (MemresStream) f.stream, &error));
  fixture_clear (&f);
}

/* vmm memory (not stream-ordered) closed on a capturing stream: the close is refused, the buffer
 * stays open and its bytes counted; after the capture, the same close frees everything. */
static void
test_vmm_close_refused (void)
{
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  Fixture f;

  if (!fixture_init (&f))
    return;
  mr = mt_new_ok ("vmm:device=0");
  buf = memres_resource_allocate (mr, 2 * MiB, (MemresStream) f.stream, &error);
  g_assert_no_error (error);
  mt_capture_begin (f.stream);
  g_assert_false (memres_buffer_close (buf, (MemresStream) f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "capturing a graph"));
  g_clear_error (&error);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * MiB);
  g_assert_nonnull (memres_buffer_get_pointer (buf));
  end_capture (&f);

  mt_close_ok (buf, (MemresStream) f.stream);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  g_assert_cmpuint (mt_stats_ok (mr).reserved_current, ==, 0);
  memres_resource_unref (mr);
  fixture_clear (&f);
}

/* A flush point of the deferred closes (core/buffer-deferred.c) that touches no stream: the
 * last reference of an unrelated resource. */
static void
poke_deferred (void)
{
  memres_resource_unref (mt_new_ok ("host"));
}

/* The last unref of a buffer whose memory is not stream-ordered, while its deallocation stream
 * captures: no warning (fatal in the tests), no leak; the buffer stays allocated, still counted,
 * while the capture lasts (a memres call in between keeps it), and is freed by the first memres
 * call after cuStreamEndCapture(). It used to fail the close with a warning and leak the
 * memory. */
static void
test_unref_deferred (gconstpointer data)
{
  const char *spec = data;
  MemresResource *mr;
  MemresBuffer *buf;
  Fixture f;

  if (!fixture_init (&f))
    return;
  mr = mt_new_ok (spec);
  buf = mt_alloc_ok (mr, 2 * MiB, (MemresStream) f.stream);
  mt_capture_begin (f.stream);
  memres_buffer_unref (buf);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * MiB);
  poke_deferred ();
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * MiB);
  end_capture (&f);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * MiB);
  poke_deferred ();
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  /* the memory went back to the kind: a new allocation of the same size succeeds and frees */
  buf = mt_alloc_ok (mr, 2 * MiB, (MemresStream) f.stream);
  mt_close_ok (buf, (MemresStream) f.stream);
  memres_resource_unref (mr);
  fixture_clear (&f);
}

/* A vmm resource whose buffer of @size bytes, allocated on @f's stream, lost its last reference
 * during a capture of that stream, which goes on. */
static MemresResource *
deferred_buffer_new (Fixture *f, gsize size)
{
  MemresResource *mr = mt_new_ok ("vmm:device=0");

  mt_capture_begin (f->stream);
  memres_buffer_unref (mt_alloc_ok (mr, size, (MemresStream) f->stream));
  return mr;
}

/* The resource's last application reference goes while its buffer waits for the capture's end:
 * the buffer keeps it alive, and the first memres call after the capture frees both (the fake's
 * counts: every handle and mapping given back). */
static void
test_unref_deferred_resource (void)
{
  Fixture f;

  if (!fixture_init (&f))
    return;
  memres_resource_unref (deferred_buffer_new (&f, 4 * MiB));
  end_capture (&f);
  mt_sync_ok ((MemresStream) f.stream); /* memres_stream_synchronize(): a flush point */
  fixture_clear (&f);
}

/* A buffer whose stream ends its capture and starts another before any memres call: still kept
 * (its free would wait for the new capture), freed after the second one ends. */
static void
test_unref_deferred_recapture (void)
{
  MemresResource *mr;
  Fixture f;

  if (!fixture_init (&f))
    return;
  mr = deferred_buffer_new (&f, 2 * MiB);
  end_capture (&f);
  mt_capture_begin (f.stream);
  poke_deferred ();
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * MiB);
  end_capture (&f);
  poke_deferred ();
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  memres_resource_unref (mr);
  fixture_clear (&f);
}

static gpointer
poke_thread (gpointer data)
{
  poke_deferred ();
  return NULL;
}

/* The close of a buffer whose last unref was refused for a capture, when the capture began
 * between memres's look and the wait (the driver's CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from
 * cuStreamSynchronize; the fake's answer forced, the stream not capturing): kept as well, judged
 * from the error alone, and freed at the next look. It used to warn, wait for the device and,
 * with another capture begun by then, leak the memory. With @data, on the per-thread default
 * stream (which the fake cannot capture): each thread has its own, so only the thread that
 * dropped the buffer looks at that stream and frees it; a look from another thread (whose
 * per-thread stream is another stream) keeps it. */
static void
test_unref_deferred_driver_refused (gconstpointer data)
{
  gboolean per_thread = GPOINTER_TO_INT (data);
  MemresResource *mr;
  Fixture f;

  if (!mt_driver_is_fake ())
    {
      g_test_skip ("forces the fake's answer");
      return;
    }
  if (!fixture_init (&f))
    return;
  mr = mt_new_ok ("vmm:device=0");
  mt_fake_fail_call ("cuStreamSynchronize", 1, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  memres_buffer_unref (mt_alloc_ok (
      mr, 2 * MiB, per_thread ? (MemresStream) CU_STREAM_PER_THREAD : (MemresStream) f.stream));
  if (per_thread)
    g_thread_join (g_thread_new ("poke", poke_thread, NULL));
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * MiB);
  poke_deferred ();
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  memres_resource_unref (mr);
  fixture_clear (&f);
}

static gpointer
drop_on_own_stream (gpointer mr)
{
  mt_fake_fail_call ("cuStreamSynchronize", 1, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  memres_buffer_unref (mt_alloc_ok (mr, 2 * MiB, (MemresStream) CU_STREAM_PER_THREAD));
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 2 * MiB);
  return NULL;
}

/* A thread whose buffer waits on its per-thread default stream (refused as in
 * test_unref_deferred_driver_refused()) and that ends without another memres call: its end
 * frees the buffer, as no other thread can ask that stream. It used to stay allocated until the
 * process ended. */
static void
test_unref_deferred_thread_exit (void)
{
  MemresResource *mr;

  if (!mt_driver_is_fake ())
    {
      g_test_skip ("forces the fake's answer");
      return;
    }
  mr = mt_new_ok ("vmm:device=0");
  g_thread_join (g_thread_new ("drop", drop_on_own_stream, mr));
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  /* the memory went back to the kind: 2 MiB again, and nothing left to the resource's end */
  mt_close_ok (mt_alloc_ok (mr, 2 * MiB, MEMRES_STREAM_LEGACY), MEMRES_STREAM_LEGACY);
  memres_resource_unref (mr);
}

static MemresBuffer *
alloc_tagged (MemresResource *mr, const char *tag, gsize size, CUstream stream)
{
  GError *error = NULL;
  MemresBuffer *buf;

  MT_CHECK (memres_tag_push (tag, &error));
  buf = mt_alloc_ok (mr, size, (MemresStream) stream);
  MT_CHECK (memres_tag_pop (tag, &error));
  return buf;
}

static void
assert_tag_counts (MemresResource *stats, const char *tag, guint64 bytes, guint64 count)
{
  GError *error = NULL;
  MemresTagCounts c;

  MT_CHECK (memres_resource_get_tag_counts (stats, tag, &c, &error));
  g_assert_cmpuint (c.bytes_current, ==, bytes);
  g_assert_cmpuint (c.count_current, ==, count);
}

/* Out of memory while a buffer waits whose capture has ended: the allocation closes it and
 * succeeds (`limit` counted it until then). The allocation is tagged and so is the waiting
 * buffer: each tag's counts stay its own, though the close runs inside the tagged call (the
 * thread's call record, tags.h, kept across it). */
static void
test_unref_deferred_oom (void)
{
  GError *error = NULL;
  MemresResource *mr, *stats;
  MemresBuffer *buf;
  CUstream other;
  Fixture f;

  if (!fixture_init (&f))
    return;
  other = mt_stream_new_on (0);
  mr = mt_new_ok ("stats>limit:max=4MiB>vmm:device=0");
  stats = memres_resource_find_layer (mr, "stats", &error);
  g_assert_no_error (error);
  buf = alloc_tagged (mr, "deferred-a", 4 * MiB, f.stream);
  mt_capture_begin (f.stream);
  memres_buffer_unref (buf);
  end_capture (&f);
  assert_tag_counts (stats, "deferred-a", 4 * MiB, 1);

  buf = alloc_tagged (mr, "deferred-b", 4 * MiB, other);
  assert_tag_counts (stats, "deferred-a", 0, 0);
  assert_tag_counts (stats, "deferred-b", 4 * MiB, 1);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 4 * MiB);
  mt_close_ok (buf, (MemresStream) other);
  assert_tag_counts (stats, "deferred-b", 0, 0);
  /* with nothing waiting, out of memory is out of memory */
  buf = mt_alloc_ok (mr, 4 * MiB, (MemresStream) other);
  g_assert_null (memres_resource_allocate (mr, 1 * MiB, (MemresStream) other, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  mt_close_ok (buf, (MemresStream) other);
  memres_resource_unref (mr);
  mt_stream_free (other);
  fixture_clear (&f);
}

/* One look at many waiting buffers asks each stream once: 64 buffers wait on a stream still
 * capturing and 64 on one whose capture ended; the look closes the latter (each close asks its
 * stream once more, in memres_cuda_stream_synchronize()) and keeps the former. It used to ask
 * again for every buffer at every close (about 4,000 queries here). */
#define N_WAITING 64

static void
test_unref_deferred_many (void)
{
  MemresResource *mr;
  CUstream other;
  long queries;
  Fixture f;

  if (!fixture_init (&f))
    return;
  other = mt_stream_new_on (0);
  mr = mt_new_ok ("pinned:device=0,mode=legacy");
  mt_capture_begin (f.stream);
  mt_capture_begin (other);
  for (guint i = 0; i < 2 * N_WAITING; i++)
    memres_buffer_unref (mt_alloc_ok (mr, 4096, (MemresStream) (i % 2 ? other : f.stream)));
  end_capture (&f);
  queries = mt_driver_is_fake () ? mt_fake_call_count ("cuStreamIsCapturing") : 0;
  poke_deferred ();
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamIsCapturing") - queries, <=, N_WAITING + 2);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, N_WAITING * 4096);
  CU_OK (f.drv->cuGraphDestroy (mt_capture_end (other)));
  poke_deferred ();
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  memres_resource_unref (mr);
  mt_stream_free (other);
  fixture_clear (&f);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/capture/arena/refused", test_arena_refuses);
  g_test_add_data_func ("/capture/cache/miss-refused-dmr", "cache>dmr:device=0",
                        test_cache_miss_refused);
  g_test_add_data_func ("/capture/cache/miss-refused-vmm", "cache>vmm:device=0",
                        test_cache_miss_refused);
  g_test_add_func ("/capture/synchronize/refused", test_synchronize_refused);
  g_test_add_func ("/capture/vmm/close-refused", test_vmm_close_refused);
  g_test_add_data_func ("/capture/unref-deferred/vmm", "vmm:device=0", test_unref_deferred);
  g_test_add_data_func ("/capture/unref-deferred/pinned-legacy", "pinned:device=0,mode=legacy",
                        test_unref_deferred);
  g_test_add_data_func ("/capture/unref-deferred/managed-no-pool", "managed:device=0,pool=none",
                        test_unref_deferred);
  g_test_add_func ("/capture/unref-deferred/resource-unref", test_unref_deferred_resource);
  g_test_add_func ("/capture/unref-deferred/recapture", test_unref_deferred_recapture);
  g_test_add_data_func ("/capture/unref-deferred/driver-refused", GINT_TO_POINTER (FALSE),
                        test_unref_deferred_driver_refused);
  g_test_add_data_func ("/capture/unref-deferred/per-thread-stream", GINT_TO_POINTER (TRUE),
                        test_unref_deferred_driver_refused);
  g_test_add_func ("/capture/unref-deferred/thread-exit", test_unref_deferred_thread_exit);
  g_test_add_func ("/capture/unref-deferred/out-of-memory", test_unref_deferred_oom);
  g_test_add_func ("/capture/unref-deferred/many", test_unref_deferred_many);
  return g_test_run ();
}

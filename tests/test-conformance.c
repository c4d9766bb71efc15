/* memres - CUDA memory resources
 * test-conformance.c: the contract every resource keeps, tested once over every kind and stack.
 * Each case runs for each spec of the table below: a base kind alone, and under each adaptor
 * (`cache>`, `stats>`, `limit>`, `track>`, `log>`, `retry>`). Without a driver (suite core) the
 * host specs run; with one (suite fake, and gpu against the real driver) the device specs.
 * Tests are named /conformance/SPEC/CASE. Adding a kind is one line of `bases`, adding an
 * adaptor one line of `layers`.
 *
 * The out-of-memory rule (a driver call that answers CUDA_ERROR_OUT_OF_MEMORY is reported as
 * MEMRES_ERROR_OUT_OF_MEMORY, its message naming the call; other CUresults stay
 * MEMRES_CUDA_ERROR) and the exit rule (a buffer closed once the driver has shut down at process
 * exit closes without an error: plugins/common/release.h) are cases here too. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

/* What a base kind is. */
typedef enum
{
  B_DEVICE = 1 << 0,   /* needs a driver: the fake and gpu suites */
  B_CAPTURE = 1 << 1,  /* allocates only inside a stream capture (graph) */
  B_NO_POOLS = 1 << 2, /* runs on a device without memory pools (the fake plays one) */
  B_REAL_OOM = 1 << 3, /* the real driver refuses 1 PiB with an out-of-memory */
  B_TRIM = 1 << 4,     /* trim is supported and gives back what is not in use */
  B_ALONE = 1 << 5,    /* a variant of a kind: only on its own, not under every adaptor */
  B_NO_CACHE = 1 << 6, /* `cache` refuses it as an upstream */
  B_ROUNDS = 1 << 7,   /* a buffer's size is the size asked for, rounded up (vmm's granularity) */
  B_HOLDS = 1 << 9,    /* keeps freed memory until a trim (release_threshold=max) */
  B_SHARED = 1 << 8,
  B_OWN_POOL = 1 << 10,
  /* a pool of its own (pool=new): one pool, one pool allocation a buffer */ /* the device's current
                                                                                pool: its high marks
                                                                                are older than the
                                                                                resource */
} BaseFlags;

/* What an adaptor does to the contract. */
typedef enum
{
  L_KEEPS = 1 << 0,   /* keeps closed memory (cache): a close need not reach the kind's free */
  L_RETRIES = 1 << 1, /* allocates again after an out-of-memory (retry, cache's flush) */
  L_PREFIX = 1 << 2,  /* prefixes the upstream's out-of-memory message */
  L_CHUNKS = 1 << 3,  /* asks the upstream for other sizes than the caller */
  L_EXTRA = 1 << 4,   /* only over the bases `extra_stacks` names */
} LayerFlags;

typedef struct
{
  const char *spec;
  guint flags;
  const char *alloc_entry; /* the driver call of an allocation (fault injection), or NULL */
  const char *free_entry;  /* the kind's free (the exit rule), or NULL */
  guint thread_pairs;      /* allocate+close pairs per thread in the threads case (a graph's capture
                            * grows with each, vmm maps and unmaps, the others are cheap) */
  guint as_layer;          /* LayerFlags the kind has itself: a caching kind (arena) keeps closed
                            * memory as a cache does */
} Base;

static const Base bases[] = {
  { "host", 0, NULL, NULL, 10000 },
  { "dmr:pool=new,release_threshold=max", B_DEVICE | B_REAL_OOM | B_TRIM | B_HOLDS | B_OWN_POOL,
    "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 10000 },
  { "dmr", B_DEVICE | B_SHARED | B_ALONE | B_TRIM | B_REAL_OOM, "cuMemAllocFromPoolAsync",
    "cuMemFreeAsync", 1000 },
  { "dmr:sync_fallback=true", B_DEVICE | B_NO_POOLS | B_ALONE | B_TRIM, "cuMemAlloc", "cuMemFree",
    200 },
  { "vmm", B_DEVICE | B_ROUNDS, "cuMemCreate", "cuMemUnmap", 100 },
  { "pinned", B_DEVICE | B_REAL_OOM | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 1000 },
  { "pinned:mode=legacy", B_DEVICE | B_REAL_OOM | B_ALONE | B_TRIM, "cuMemHostAlloc",
    "cuMemFreeHost", 200 },
  { "managed:pool=new", B_DEVICE | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 1000 },
  { "managed", B_DEVICE | B_SHARED | B_ALONE | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync",
    1000 },
  { "managed:pool=none", B_DEVICE | B_REAL_OOM | B_ALONE | B_TRIM, "cuMemAllocManaged", "cuMemFree",
    200 },
  { "graph", B_DEVICE | B_CAPTURE | B_SHARED | B_NO_CACHE | B_TRIM, "cuMemAllocAsync",
    "cuMemFreeAsync", 20 },
  { "ipc", B_DEVICE | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 1000 },
  { "arena", B_DEVICE | B_TRIM, "cuMemCreate", NULL, 1000, L_KEEPS | L_RETRIES | L_CHUNKS },
};

typedef struct
{
  const char *name;   /* in the test's path */
  const char *prefix; /* put before the base's spec */
  guint flags;
} Layer;

static const Layer layers[] = {
  { NULL, "", 0 },
  { "cache", "cache>", L_KEEPS | L_RETRIES | L_CHUNKS | L_PREFIX },
  { "stats", "stats>", 0 },
  { "limit", "limit:max=1GiB>", 0 },
  { "track", "track>", 0 },
  { "log", "log:path=/dev/null>", 0 },
  { "retry", "retry>", L_RETRIES | L_PREFIX },
  { "stats>limit", "stats>limit:max=1GiB>", L_EXTRA },
};

/* Stacks beyond every layer over every base: a layer over a variant, or two layers. */
static const struct
{
  const char *layer;
  const char *base;
} extra_stacks[] = {
  { "track", "pinned:mode=legacy" },
  { "stats>limit", "vmm" },
};

typedef struct
{
  char *spec; /* layer prefix + base spec */
  char *name; /* in the test's path */
  const Base *base;
  const Layer *layer;
} Spec;

static gboolean
is (const Spec *s, BaseFlags f)
{
  return (s->base->flags & f) != 0;
}

static gboolean
layer_is (const Spec *s, LayerFlags f)
{
  return ((s->layer->flags | s->base->as_layer) & f) != 0;
}

/* ---- the fixture: a resource of the spec, a stream to work on, host memory to read into ---- */

typedef struct
{
  const Spec *s;
  const MemresCudaDriver *drv; /* NULL for host specs */
  MemresResource *mr;
  MemresStream stream; /* a stream of device 0 (capturing for graph), NULL for host specs */
  FakeCudaCounts base;
} Fx;

/* A new stream for @s (NULL for host specs), capturing for graph. */
static MemresStream
stream_begin (const Spec *s)
{
  const MemresCudaDriver *drv;
  GError *error = NULL;
  CUstream stream;

  if (!is (s, B_DEVICE))
    return NULL;
  drv = memres_cuda_get_driver (NULL);
  MT_CHECK (memres_cuda_ensure_context (0, &error));
  CU_OK (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING));
  if (is (s, B_CAPTURE))
    CU_OK (drv->cuStreamBeginCapture (stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  return (MemresStream) stream;
}

/* Ends @stream's capture; @launch: instantiates, launches and waits for what was captured.
 * Destroys the graph. */
static void
capture_end (MemresStream stream, gboolean launch)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  CUgraph graph = NULL;
  CUgraphExec exec;

  CU_OK (drv->cuStreamEndCapture ((CUstream) stream, &graph));
  g_assert_nonnull (graph);
  if (launch)
    {
      CU_OK (drv->cuGraphInstantiateWithFlags (&exec, graph, 0));
      CU_OK (drv->cuGraphLaunch (exec, (CUstream) stream));
      CU_OK (drv->cuStreamSynchronize ((CUstream) stream));
      CU_OK (drv->cuGraphExecDestroy (exec));
    }
  CU_OK (drv->cuGraphDestroy (graph));
}

static void
stream_end (const Spec *s, MemresStream stream)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);

  if (stream == NULL)
    return;
  if (is (s, B_CAPTURE))
    capture_end (stream, FALSE);
  CU_OK (drv->cuStreamSynchronize ((CUstream) stream));
  CU_OK (drv->cuStreamDestroy ((CUstream) stream));
}

/* Runs what was queued on @f's stream: for graph, the capture so far is launched (and a new one
 * begins); otherwise the stream is synchronized. */
static void
fx_run (Fx *f)
{
  if (is (f->s, B_CAPTURE))
    {
      capture_end (f->stream, TRUE);
      CU_OK (f->drv->cuStreamBeginCapture ((CUstream) f->stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    }
  else
    mt_sync_ok (f->stream);
}

static void
fx_no_pools (const Spec *s, gboolean on)
{
  if (is (s, B_NO_POOLS))
    mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, on ? 0 : 1);
}

static gboolean
fx_init (Fx *f, gconstpointer data)
{
  const Spec *s = data;

  memset (f, 0, sizeof *f);
  f->s = s;
  if (is (s, B_DEVICE))
    {
      if (!mt_require_devices (1))
        return FALSE;
      if (is (s, B_NO_POOLS) && !mt_require_fake ("plays a device without memory pools"))
        return FALSE;
      f->drv = memres_cuda_get_driver (NULL);
      g_assert_true (memres_cuda_ensure_context (0, NULL));
    }
  mt_counts_snapshot (&f->base);
  fx_no_pools (s, TRUE);
  f->mr = mt_new_ok (s->spec);
  if (is (s, B_SHARED))
    g_assert_true (memres_resource_reset_stats (f->mr, NULL));
  f->stream = stream_begin (s);
  return TRUE;
}

static void
fx_clear (Fx *f)
{
  stream_end (f->s, f->stream);
  if (f->mr != NULL)
    {
      /* what a pool or a cache keeps goes back (host has no trim) */
      if (is (f->s, B_TRIM) || layer_is (f->s, L_KEEPS))
        g_assert_true (memres_resource_trim (f->mr, 0, NULL));
      memres_resource_unref (f->mr);
    }
  if (f->drv != NULL)
    mt_sync_ok (NULL);
  fx_no_pools (f->s, FALSE);
  mt_assert_fake_counts_equal (&f->base);
}

/* Host memory every kind can copy into (page-locked for device specs: a graph's copy node
 * may not stage through pageable memory), wrapped as a buffer. */
typedef struct
{
  guint8 *bytes;
  gsize size;
  MemresBuffer *buf;
} HostMem;

static void
host_mem_init (Fx *f, HostMem *h, gsize size)
{
  GError *error = NULL;
  MemresMemoryFlags flags = MEMRES_MEMORY_HOST_ACCESSIBLE;

  h->size = size;
  if (f->drv != NULL)
    {
      CU_OK (f->drv->cuMemHostAlloc ((void **) &h->bytes, size, 0));
      flags |= MEMRES_MEMORY_DEVICE_ACCESSIBLE;
    }
  else
    h->bytes = g_malloc (size);
  memset (h->bytes, 0, size);
  h->buf = memres_buffer_new_for_pointer (h->bytes, size, -1, flags, NULL, NULL, &error);
  g_assert_no_error (error);
}

static void
host_mem_clear (Fx *f, HostMem *h)
{
  mt_close_ok (h->buf, NULL);
  if (f->drv != NULL)
    CU_OK (f->drv->cuMemFreeHost (h->bytes));
  else
    g_free (h->bytes);
}

/* An allocation of @size bytes on @stream from @s's resource @mr, asserting no error and its
 * size: @size, or at least @size for a kind that rounds. */
static MemresBuffer *
alloc_ok (const Spec *s, MemresResource *mr, gsize size, MemresStream stream)
{
  GError *error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, stream, &error);

  g_assert_no_error (error);
  g_assert_nonnull (buf);
  if (is (s, B_ROUNDS))
    g_assert_cmpuint (memres_buffer_get_size (buf), >=, size);
  else
    g_assert_cmpuint (memres_buffer_get_size (buf), ==, size);
  return buf;
}

/* The buffer's properties after an allocation of @size bytes from @f's resource. */
static void
assert_buffer (Fx *f, MemresBuffer *buf, gsize size)
{
  MemresMemoryFlags flags = memres_resource_get_flags (f->mr);

  g_assert_true (memres_buffer_get_resource (buf) == f->mr);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpint (memres_buffer_is_host_accessible (buf), ==,
                   (flags & MEMRES_MEMORY_HOST_ACCESSIBLE) != 0);
  g_assert_cmpint (memres_buffer_is_device_accessible (buf), ==,
                   (flags & MEMRES_MEMORY_DEVICE_ACCESSIBLE) != 0);
  if (!is (f->s, B_DEVICE))
    g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  if (size > 0)
    {
      g_assert_cmpuint (memres_buffer_get_address (buf), !=, 0);
      if (memres_buffer_is_host_accessible (buf))
        g_assert_cmpuint (memres_buffer_get_address (buf), ==,
                          (guint64) (guintptr) memres_buffer_get_pointer (buf));
    }
}

/* ---- the cases ---- */

/* Sizes from one byte to a few MiB: each buffer has the size asked for, an address aligned to
 * 256 bytes, distinct from the others, and the resource's accessibility. */
static void
test_sizes (gconstpointer data)
{
  static const gsize sizes[] = { 1, 7, 255, 256, 4096, 65537, MiB, 3 * MiB + 5 };
  MemresBuffer *bufs[G_N_ELEMENTS (sizes)];
  Fx f;

  g_test_summary ("Buffers of 1 byte to a few MiB have their size, 256-byte alignment, distinct "
                  "addresses and the resource's accessibility.");
  if (!fx_init (&f, data))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      bufs[i] = alloc_ok (f.s, f.mr, sizes[i], f.stream);
      assert_buffer (&f, bufs[i], sizes[i]);
      g_assert_cmpuint (memres_buffer_get_address (bufs[i]) % 256, ==, 0);
      for (guint j = 0; j < i; j++)
        g_assert_cmpuint (memres_buffer_get_address (bufs[i]), !=,
                          memres_buffer_get_address (bufs[j]));
    }
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    mt_close_ok (bufs[i], f.stream);
  fx_clear (&f);
}

/* Zero bytes: an empty buffer, counted as a buffer, no memory and no driver call. */
static void
test_zero_size (gconstpointer data)
{
  GError *error = NULL;
  MemresStats before, after;
  MemresBuffer *buf;
  long calls = 0;
  Fx f;

  g_test_summary ("Zero bytes give an empty buffer (address 0, no pointer, size 0) that counts "
                  "as a buffer but no bytes, costs no driver allocation, fills and closes.");
  if (!fx_init (&f, data))
    return;
  before = mt_stats_ok (f.mr);
  if (mt_driver_is_fake () && f.s->base->alloc_entry != NULL)
    calls = mt_fake_call_count (f.s->base->alloc_entry);
  buf = memres_resource_allocate (f.mr, 0, f.stream, &error);
  g_assert_no_error (error);
  g_assert_nonnull (buf);
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_null (memres_buffer_get_pointer (buf));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  g_assert_true (memres_buffer_get_resource (buf) == f.mr);
  if (!is (f.s, B_DEVICE))
    {
      g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
      g_assert_true (memres_buffer_is_host_accessible (buf));
    }
  after = mt_stats_ok (f.mr);
  g_assert_cmpuint (after.used_current, ==, before.used_current);
  g_assert_cmpuint (after.used_current, ==, 0);
  g_assert_cmpuint (after.n_buffers, ==, before.n_buffers + 1);
  if (mt_driver_is_fake () && f.s->base->alloc_entry != NULL)
    g_assert_cmpint (mt_fake_call_count (f.s->base->alloc_entry), ==, calls);
  MT_CHECK (memres_buffer_fill (buf, 0xff, 1, f.stream, &error));
  mt_close_ok (buf, f.stream);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, before.n_buffers);
  fx_clear (&f);
}

/* Sizes no memory can hold: an out-of-memory, nothing counted or held, and the resource still
 * serves. */
static void
test_max_size (gconstpointer data)
{
  static const gsize sizes[] = { G_MAXSIZE, G_MAXSIZE - 1, G_MAXSIZE / 2 + 1 };
  MemresStats stats;
  Fx f;

  g_test_summary ("G_MAXSIZE and other sizes no memory holds fail with MEMRES_ERROR_OUT_OF_MEMORY, "
                  "count nothing, and the resource serves afterwards.");
  if (!fx_init (&f, data))
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresBuffer *buf = memres_resource_allocate (f.mr, sizes[i], f.stream, &error);

      g_assert_null (buf);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
    }
  /* nothing counted, nothing held */
  stats = mt_stats_ok (f.mr);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.used_high, ==, 0);
  g_assert_cmpuint (stats.n_buffers, ==, 0);
  /* the resource keeps working */
  mt_close_ok (alloc_ok (f.s, f.mr, 4 * KiB, f.stream), f.stream);
  fx_run (&f);
  /* a graph's used bytes are the driver's memory associated with graphs: on the real driver it
   * stays associated after the graph ran and was destroyed, until a trim (test-graph.c's
   * trim-after-destroy) */
  if (is (f.s, B_CAPTURE))
    g_assert_true (memres_resource_trim (f.mr, 0, NULL));
  g_assert_cmpuint (mt_stats_ok (f.mr).used_current, ==, 0);
  fx_clear (&f);
}

/* A closed buffer: its properties are empty, closing it again succeeds, data movement is
 * refused with MEMRES_ERROR_CLOSED. */
static void
test_closed (gconstpointer data)
{
  GError *error = NULL;
  MemresBuffer *buf, *other;
  guint8 byte = 0;
  Fx f;

  g_test_summary ("A closed buffer reports NULL/0/-1/FALSE, closes again without an error, and "
                  "refuses fill, read, write and copy with MEMRES_ERROR_CLOSED.");
  if (!fx_init (&f, data))
    return;
  buf = alloc_ok (f.s, f.mr, 4 * KiB, f.stream);
  other = alloc_ok (f.s, f.mr, 4 * KiB, f.stream);
  MT_CHECK (memres_buffer_close (buf, f.stream, &error));
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_null (memres_buffer_get_pointer (buf));
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, 0);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 0);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, -1);
  g_assert_false (memres_buffer_is_host_accessible (buf));
  g_assert_false (memres_buffer_is_device_accessible (buf));
  /* idempotent */
  MT_CHECK (memres_buffer_close (buf, f.stream, &error));
  g_assert_false (memres_buffer_fill (buf, 0, 1, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_write (buf, 0, &byte, 1, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_read (buf, 0, &byte, 1, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (other, buf, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_copy_to (buf, other, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_CLOSED);
  g_clear_error (&error);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 1);
  memres_buffer_unref (buf);
  /* the last unref closes */
  memres_buffer_unref (other);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  fx_clear (&f);
}

/* Streams: a buffer allocated on one stream and closed on another, on the legacy stream, and
 * through its deallocation stream. */
static void
test_streams (gconstpointer data)
{
  GError *error = NULL;
  MemresStream other;
  MemresBuffer *a, *b, *c;
  Fx f;

  g_test_summary ("A buffer allocated on one stream closes on another, on the legacy stream, and "
                  "on its deallocation stream at the last unref; its bytes stay intact meanwhile.");
  if (!fx_init (&f, data))
    return;
  if (is (f.s, B_CAPTURE))
    {
      /* graph memory lives within its capture: test-graph.c has its streams */
      g_test_skip ("allocated and freed inside one capture");
      fx_clear (&f);
      return;
    }
  other = stream_begin (f.s);
  a = alloc_ok (f.s, f.mr, 64 * KiB, f.stream);
  mt_write_pattern (a, 0, 64 * KiB, 7, f.stream);
  mt_check_pattern (a, 0, 64 * KiB, 7, other);
  mt_close_ok (a, other);
  b = alloc_ok (f.s, f.mr, 64 * KiB, other);
  mt_write_pattern (b, 0, 64 * KiB, 8, other);
  mt_close_ok (b, MEMRES_STREAM_LEGACY);
  c = alloc_ok (f.s, f.mr, 64 * KiB, MEMRES_STREAM_LEGACY);
  mt_write_pattern (c, 0, 64 * KiB, 9, MEMRES_STREAM_LEGACY);
  MT_CHECK (memres_buffer_set_deallocation_stream (c, f.stream, &error));
  g_assert_true (memres_buffer_get_deallocation_stream (c) == f.stream);
  memres_buffer_unref (c); /* closes on f.stream */
  mt_sync_ok (f.stream);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  stream_end (f.s, other);
  fx_clear (&f);
}

/* Bytes: fill (widths 1 and 4), copy between buffers, write and read back. */
static void
test_bytes (gconstpointer data)
{
  static const gsize sizes[] = { 1, 4 * KiB, MiB + 4 };
  GError *error = NULL;
  Fx f;

  g_test_summary ("fill (widths 1 and 4), copy between buffers and to host memory, write and "
                  "read back: every byte as expected.");
  if (!fx_init (&f, data))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      MemresBuffer *a = alloc_ok (f.s, f.mr, sizes[i], f.stream);
      MemresBuffer *b = alloc_ok (f.s, f.mr, sizes[i], f.stream);
      gsize size = memres_buffer_get_size (a); /* rounded up by some kinds */
      HostMem ha, hb;

      g_test_message ("size %" G_GSIZE_FORMAT, size);
      host_mem_init (&f, &ha, size);
      host_mem_init (&f, &hb, size);
      MT_CHECK (memres_buffer_fill (a, 0x5a, 1, f.stream, &error));
      MT_CHECK (memres_buffer_copy_to (a, b, f.stream, &error));
      if (size % 4 == 0)
        MT_CHECK (memres_buffer_fill (a, 0x11223344, 4, f.stream, &error));
      MT_CHECK (memres_buffer_copy_to (a, ha.buf, f.stream, &error));
      MT_CHECK (memres_buffer_copy_from (hb.buf, b, f.stream, &error));
      mt_close_ok (a, f.stream);
      mt_close_ok (b, f.stream);
      fx_run (&f);
      for (gsize j = 0; j < size; j++)
        {
          guint8 want = size % 4 == 0 ? (guint8) (0x11223344u >> (8 * (j % 4))) : 0x5a;

          if (ha.bytes[j] != want || hb.bytes[j] != 0x5a)
            g_error ("byte %" G_GSIZE_FORMAT ": 0x%02x 0x%02x, expected 0x%02x 0x5a", j,
                     ha.bytes[j], hb.bytes[j], want);
        }
      host_mem_clear (&f, &ha);
      host_mem_clear (&f, &hb);
      if (!is (f.s, B_CAPTURE))
        {
          /* write and read back through the API (not capturable from pageable memory) */
          a = alloc_ok (f.s, f.mr, size, f.stream);
          mt_write_pattern (a, 0, size, (guint32) size, f.stream);
          mt_check_pattern (a, 0, size, (guint32) size, f.stream);
          if (memres_buffer_is_host_accessible (a))
            {
              /* the memory is really there: every byte written and read through the pointer */
              guint8 *p = memres_buffer_get_pointer (a);

              g_assert_nonnull (p);
              for (gsize j = 0; j < size; j++)
                p[j] = (guint8) (j * 7);
              for (gsize j = 0; j < size; j++)
                g_assert_cmpint (p[j], ==, (guint8) (j * 7));
            }
          mt_close_ok (a, f.stream);
        }
    }
  fx_clear (&f);
}

/* Statistics: buffers and bytes in use, their high marks, and a reset. */
static void
test_stats (gconstpointer data)
{
  GError *error = NULL;
  MemresStats s0, s1, s2, s3;
  MemresBuffer *a, *b;
  gsize size_a, size_b;
  gboolean exact;
  Fx f;

  g_test_summary ("Statistics count live buffers and their bytes, keep high marks across a close, "
                  "bring them down to the current values on reset, and end at zero.");
  if (!fx_init (&f, data))
    return;
  /* host memory is counted to the byte, unless a cache counts its chunks */
  exact = !is (f.s, B_DEVICE) && !layer_is (f.s, L_CHUNKS);
  size_a = is (f.s, B_DEVICE) ? 3 * MiB : 1000;
  size_b = is (f.s, B_DEVICE) ? 5 * MiB + 1 : 3000;
  s0 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s0.used_current, ==, 0);
  g_assert_cmpuint (s0.used_high, ==, 0);
  g_assert_cmpuint (s0.n_buffers, ==, 0);

  a = alloc_ok (f.s, f.mr, size_a, f.stream);
  b = alloc_ok (f.s, f.mr, size_b, f.stream);
  s1 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s1.n_buffers, ==, 2);
  if (is (f.s, B_CAPTURE))
    {
      /* graph memory is counted when a launch allocates it (test-graph.c): the buffers only */
      mt_close_ok (b, f.stream);
      g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 1);
      mt_close_ok (a, f.stream);
      g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
      fx_clear (&f);
      return;
    }
  g_assert_cmpuint (s1.used_current, >=, size_a + size_b);
  g_assert_cmpuint (s1.used_high, >=, s1.used_current);
  g_assert_cmpuint (s1.reserved_current, >=, s1.used_current);
  if (exact)
    {
      g_assert_cmpuint (s1.used_current, ==, size_a + size_b);
      g_assert_cmpuint (s1.used_high, ==, size_a + size_b);
      g_assert_cmpuint (s1.reserved_current, ==, size_a + size_b);
      g_assert_cmpuint (s1.reserved_high, ==, size_a + size_b);
    }

  mt_close_ok (b, f.stream);
  fx_run (&f);
  s2 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s2.n_buffers, ==, 1);
  g_assert_cmpuint (s2.used_current, >=, size_a);
  if (!layer_is (f.s, L_CHUNKS))
    g_assert_cmpuint (s2.used_current, <=, s1.used_current - size_b);
  else
    g_assert_cmpuint (s2.used_current, <, s1.used_current);
  if (exact)
    g_assert_cmpuint (s2.used_current, ==, size_a);
  g_assert_cmpuint (s2.used_high, ==, s1.used_high); /* the mark stays */

  /* reset: the high marks come down to the current values */
  MT_CHECK (memres_resource_reset_stats (f.mr, &error));
  s3 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s3.used_high, ==, s3.used_current);
  g_assert_cmpuint (s3.used_high, <, s1.used_high);
  g_assert_cmpuint (s3.reserved_high, ==, s3.reserved_current);
  if (exact)
    {
      g_assert_cmpuint (s3.used_high, ==, size_a);
      g_assert_cmpuint (s3.reserved_high, ==, size_a);
    }

  memres_buffer_unref (a); /* closes it */
  fx_run (&f);
  s3 = mt_stats_ok (f.mr);
  g_assert_cmpuint (s3.used_current, ==, 0);
  g_assert_cmpuint (s3.n_buffers, ==, 0);
  g_assert_cmpuint (s3.used_high, >=, size_a);
  fx_clear (&f);
}

/* Trim: a kind that keeps memory gives it back; host has none to keep and says so. */
static void
test_trim (gconstpointer data)
{
  GError *error = NULL;
  MemresStats s;
  Fx f;

  g_test_summary (
      "trim(0) gives back all memory not in use (reserved falls to 0) and the resource "
      "serves afterwards; a stack with nothing to trim says MEMRES_ERROR_NOT_SUPPORTED.");
  if (!fx_init (&f, data))
    return;
  mt_close_ok (alloc_ok (f.s, f.mr, 2 * MiB, f.stream), f.stream);
  fx_run (&f);
  s = mt_stats_ok (f.mr);
  /* the real driver counts a graph's freed memory as used (associated with graphs) until a
   * trim: the check after the trim below holds it to 0 */
  if (!is (f.s, B_CAPTURE) || mt_driver_is_fake ())
    g_assert_cmpuint (s.used_current, ==, 0);
  /* kept until the trim (the base's own statistics; a cache's always) */
  if (((is (f.s, B_HOLDS) || (f.s->base->as_layer & L_KEEPS)) && f.s->layer->name == NULL)
      || (f.s->layer->flags & L_KEEPS))
    g_assert_cmpuint (s.reserved_current, >=, 2 * MiB);
  if (is (f.s, B_TRIM) || layer_is (f.s, L_KEEPS))
    {
      MT_CHECK (memres_resource_trim (f.mr, 0, &error));
      s = mt_stats_ok (f.mr);
      g_assert_cmpuint (s.reserved_current, ==, 0);
      g_assert_cmpuint (s.used_current, ==, 0);
      if (!is (f.s, B_CAPTURE)) /* graph memory is reserved at launch */
        g_assert_cmpuint (s.reserved_high, >=, 2 * MiB);
    }
  else
    {
      g_assert_false (memres_resource_trim (f.mr, 0, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      {
        /* the message names the kind that cannot */
        g_autofree char *kind
            = g_strdup_printf ("\"%.*s\"", (int) strcspn (f.s->base->spec, ":"), f.s->base->spec);

        g_assert_nonnull (strstr (error->message, kind));
      }
      g_clear_error (&error);
    }
  /* still works after the trim */
  mt_close_ok (alloc_ok (f.s, f.mr, 64 * KiB, f.stream), f.stream);
  fx_clear (&f);
}

/* An adaptor over its base: what it shows comes from below, and the layer below counts what the
 * adaptor took from it. */
static void
test_upstream (gconstpointer data)
{
  g_autoptr (MemresResource) below = NULL;
  MemresResource *up;
  guint64 used_before;
  MemresBuffer *buf;
  Fx f;

  g_test_summary ("An adaptor shows its base's kind (below it), device and flags (resizing aside); "
                  "its buffers are of that device, and the layer below counts their bytes while "
                  "they are open, none once closed.");
  if (!fx_init (&f, data))
    return;
  below = mt_new_ok (f.s->base->spec);
  up = memres_resource_get_upstream (f.mr);
  g_assert_nonnull (up);
  g_assert_cmpstr (memres_resource_get_kind_name (up), ==, memres_resource_get_kind_name (below));
  g_assert_cmpint (memres_resource_get_device (f.mr), ==, memres_resource_get_device (below));
  g_assert_cmpint (memres_resource_get_flags (f.mr) & ~MEMRES_MEMORY_RESIZABLE, ==,
                   memres_resource_get_flags (below) & ~MEMRES_MEMORY_RESIZABLE);
  used_before = mt_stats_ok (up).used_current;
  buf = alloc_ok (f.s, f.mr, MiB, f.stream);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, memres_resource_get_device (below));
  if (!is (f.s, B_CAPTURE)) /* graph memory is counted at launch */
    {
      mt_write_pattern (buf, 0, MiB, 1, f.stream);
      mt_check_pattern (buf, 0, MiB, 1, f.stream);
      g_assert_cmpuint (mt_stats_ok (up).used_current, >=,
                        used_before + memres_buffer_get_size (buf));
    }
  mt_close_ok (buf, f.stream);
  g_assert_cmpuint (mt_stats_ok (up).used_current, ==, used_before);
  g_clear_pointer (&below, memres_resource_unref);
  fx_clear (&f);
}

/* One allocation of @size bytes with the base's allocation call failing with @code (the first
 * @n_failures calls); returns the error, or NULL when the allocation succeeded (then closed). */
static GError *
allocate_failing (Fx *f, gsize size, CUresult code, int n_failures)
{
  GError *error = NULL;
  MemresBuffer *buf;

  if (layer_is (f->s, L_KEEPS)) /* no cached block serves it */
    g_assert_true (memres_resource_trim (f->mr, 0, NULL));
  for (int nth = 1; nth <= n_failures; nth++)
    mt_fake_fail_call (f->s->base->alloc_entry, nth, code);
  buf = memres_resource_allocate (f->mr, size, f->stream, &error);
  mt_fake_reset_faults ();
  if (buf != NULL)
    {
      g_assert_no_error (error);
      mt_close_ok (buf, f->stream);
      return NULL;
    }
  g_assert_nonnull (error);
  return error;
}

/* @error is the driver's out-of-memory from @s's allocation call, its message starting with
 * @words (after a retry's prefix; not where a cache asked for a chunk of another size). */
static void
assert_out_of_memory (const Spec *s, const GError *error, const char *words)
{
  g_autofree char *expected
      = g_strdup_printf ("%s: CUDA_ERROR_OUT_OF_MEMORY", s->base->alloc_entry);

  g_assert_nonnull (error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, expected));
  g_assert_true (mt_error_is_cuda (error, CUDA_ERROR_OUT_OF_MEMORY));
  if (layer_is (s, L_CHUNKS))
    return;
  if (layer_is (s, L_PREFIX))
    g_assert_nonnull (strstr (error->message, words));
  else
    g_assert_true (g_str_has_prefix (error->message, words));
}

/* The out-of-memory rule through fault injection (device specs, fake) or `limit` (host). */
static void
test_out_of_memory (gconstpointer data)
{
  const Spec *s = data;
  g_autoptr (GError) error = NULL;
  int failures;
  Fx f;

  g_test_summary ("An allocation the memory cannot serve fails with MEMRES_ERROR_OUT_OF_MEMORY: "
                  "a driver call's CUDA_ERROR_OUT_OF_MEMORY (fake), its message naming the call "
                  "and the size asked for; another CUresult stays MEMRES_CUDA_ERROR; nothing "
                  "leaks and the resource serves afterwards.");
  if (!is (s, B_DEVICE))
    {
      /* host: a limit below the stack */
      g_autofree char *limited
          = g_strconcat (s->layer->prefix, "limit:max=1MiB>", s->base->spec, NULL);
      g_autoptr (MemresResource) mr = mt_new_ok (limited);

      g_assert_null (memres_resource_allocate (mr, 2 * MiB, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
      g_assert_cmpuint (mt_stats_ok (mr).n_buffers, ==, 0);
      mt_close_ok (mt_alloc_ok (mr, 512 * KiB, NULL), NULL);
      return;
    }
  if (!mt_require_fake ("injects CUDA_ERROR_OUT_OF_MEMORY"))
    return;
  if (!fx_init (&f, data))
    return;
  /* retry and cache allocate again after an out-of-memory (retry by default only once it
   * trimmed something): once, the next call serves */
  if (layer_is (s, L_KEEPS) || (layer_is (s, L_RETRIES) && is (s, B_TRIM)))
    g_assert_null (allocate_failing (&f, MiB, CUDA_ERROR_OUT_OF_MEMORY, 1));
  failures = layer_is (s, L_RETRIES) ? 8 : 1;
  error = allocate_failing (&f, MiB, CUDA_ERROR_OUT_OF_MEMORY, failures);
  g_test_message ("%s: %s", s->spec, error->message);
  assert_out_of_memory (s, error, "cannot allocate 1048576 bytes: ");
  g_clear_error (&error);
  /* one byte, in the singular */
  error = allocate_failing (&f, 1, CUDA_ERROR_OUT_OF_MEMORY, failures);
  assert_out_of_memory (s, error, "cannot allocate 1 byte: ");
  g_clear_error (&error);
  /* another CUresult of the same call keeps its own domain and code */
  error = allocate_failing (&f, MiB, CUDA_ERROR_UNKNOWN, failures);
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_assert_nonnull (strstr (error->message, s->base->alloc_entry));
  g_clear_error (&error);
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  mt_close_ok (alloc_ok (f.s, f.mr, 4 * KiB, f.stream), f.stream);
  fx_clear (&f);
}

/* The retry adaptor matches the one code: a driver out-of-memory runs its handler. */
static gboolean
count_handler (MemresResource *mr, gsize size, guint attempt, const GError *error,
               gpointer user_data)
{
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  (*(int *) user_data)++;
  return TRUE;
}

static void
test_retry_handler (gconstpointer data)
{
  const Spec *s = data;
  g_autoptr (GError) error = NULL;
  int calls = 0;
  Fx f;

  g_test_summary ("retry runs its handler once for a driver's out-of-memory, and the second "
                  "attempt serves.");
  if (!mt_require_fake ("injects CUDA_ERROR_OUT_OF_MEMORY"))
    return;
  if (!fx_init (&f, data))
    return;
  g_assert_cmpuint (memres_retry_add_handler (f.mr, count_handler, &calls, NULL, &error), >, 0);
  g_assert_no_error (error);
  g_assert_null (allocate_failing (&f, MiB, CUDA_ERROR_OUT_OF_MEMORY, 1));
  g_assert_cmpint (calls, ==, 1);
  (void) s;
  fx_clear (&f);
}

/* Against the real driver: a request of 1 PiB, more than any device or host has. */
static void
test_out_of_memory_real (gconstpointer data)
{
  const Spec *s = data;
  const gsize size = (gsize) 1 << 50;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  Fx f;

  g_test_summary ("On the real driver, 1 PiB fails with MEMRES_ERROR_OUT_OF_MEMORY, holds "
                  "nothing, and the resource serves afterwards.");
  if (mt_driver_is_fake ())
    {
      g_test_skip ("needs the real driver: the fake has no memory limit");
      return;
    }
  if (!fx_init (&f, data))
    return;
  buf = memres_resource_allocate (f.mr, size, f.stream, &error);
  g_test_message ("%s: %s", s->spec, error != NULL ? error->message : "(allocated)");
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  /* nothing stays allocated, and the resource still serves */
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  buf = alloc_ok (f.s, f.mr, 4096, f.stream);
  mt_close_ok (buf, f.stream);
  fx_clear (&f);
}

/* The resource's last reference dropped while buffers live: they hold it. */
static void
test_finalize_live (gconstpointer data)
{
  MemresBuffer *bufs[3];
  MemresResource *mr;
  Fx f;

  g_test_summary ("Buffers outlive the caller's last reference to their resource: they keep it, "
                  "stay usable, and the last close finalizes it with nothing leaked.");
  if (!fx_init (&f, data))
    return;
  mr = f.mr;
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = alloc_ok (f.s, mr, (i + 1) * 100 * KiB, f.stream);
  f.mr = NULL;
  memres_resource_unref (mr); /* the buffers hold it now */
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    {
      GError *error = NULL;

      g_assert_true (memres_buffer_get_resource (bufs[i]) == mr);
      MT_CHECK (memres_buffer_fill (bufs[i], (guint32) i, 1, f.stream, &error));
      if (!is (f.s, B_CAPTURE))
        {
          gsize size = memres_buffer_get_size (bufs[i]);

          mt_write_pattern (bufs[i], 0, size, i, f.stream);
          mt_check_pattern (bufs[i], 0, size, i, f.stream);
        }
    }
  g_assert_cmpuint (mt_stats_ok (mr).n_buffers, ==, 3);
  if (mt_driver_is_fake () && is (f.s, B_OWN_POOL) && f.s->layer->name == NULL)
    {
      FakeCudaCounts live;

      mt_fake_get_counts (&live);
      g_assert_cmpint (live.pools, ==, f.base.pools + 1);
      g_assert_cmpint (live.pool_allocations, ==, f.base.pool_allocations + 3);
    }
  mt_close_ok (bufs[0], f.stream);
  mt_close_ok (bufs[2], f.stream);
  g_assert_cmpuint (mt_stats_ok (mr).n_buffers, ==, 1);
  if (mt_driver_is_fake () && is (f.s, B_OWN_POOL))
    {
      FakeCudaCounts live;

      mt_fake_get_counts (&live);
      g_assert_cmpint (live.pools, ==, f.base.pools + 1); /* one buffer is left */
    }
  mt_close_ok (bufs[1], f.stream); /* the last: finalizes the resource */
  fx_clear (&f);
}

/* Threads allocating and closing at once, each on its own stream. */
typedef struct
{
  const Spec *s;
  MemresResource *mr;
  guint iterations;
  guint index;
} ThreadData;

static gpointer
thread_main (gpointer data)
{
  ThreadData *td = data;
  /* half the threads on the legacy stream of the device's primary context (not graph: it
   * allocates only in a capture), the others each on a stream of their own */
  MemresStream stream = td->index % 2 == 0 && !is (td->s, B_CAPTURE) ? NULL : stream_begin (td->s);
  MemresBuffer *held[4] = { NULL };

  for (guint i = 0; i < td->iterations; i++)
    {
      gsize size = 1 + ((td->index * 7919 + i * 104729) % (64 * KiB));
      guint slot = i % G_N_ELEMENTS (held);
      MemresBuffer *buf = alloc_ok (td->s, td->mr, size, stream);

      if (held[slot] != NULL)
        mt_close_ok (held[slot], stream);
      held[slot] = buf;
    }
  for (guint i = 0; i < G_N_ELEMENTS (held); i++)
    if (held[i] != NULL)
      mt_close_ok (held[i], stream);
  stream_end (td->s, stream);
  return NULL;
}

static void
test_threads (gconstpointer data)
{
  const guint n_threads = RUNNING_ON_VALGRIND ? 3 : 16;
  const Spec *spec = data;
  const guint iterations
      = RUNNING_ON_VALGRIND ? MIN (50, spec->base->thread_pairs) : spec->base->thread_pairs;
  ThreadData td[16];
  GThread *threads[16];
  MemresStats s;
  Fx f;

  g_test_summary ("Threads allocate and close at once, each on its own stream: every buffer has "
                  "its size and the statistics end at zero buffers and bytes.");
  if (!fx_init (&f, data))
    return;
  for (guint t = 0; t < n_threads; t++)
    {
      td[t] = (ThreadData){ f.s, f.mr, iterations, t };
      threads[t] = g_thread_new ("conformance", thread_main, &td[t]);
    }
  for (guint t = 0; t < n_threads; t++)
    g_thread_join (threads[t]);
  if (f.drv != NULL)
    mt_sync_ok (NULL);
  s = mt_stats_ok (f.mr);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.n_buffers, ==, 0);
  if (!is (f.s, B_CAPTURE)) /* graph memory is counted at launch */
    g_assert_cmpuint (s.used_high, >=, 1);
  if (mt_driver_is_fake () && f.s->base->free_entry != NULL && !layer_is (f.s, L_KEEPS))
    g_assert_cmpint (mt_fake_call_count (f.s->base->free_entry), >=, (long) n_threads * iterations);
  fx_clear (&f);
}

/* Exit: a process that ends with live buffers exits cleanly. */
static MemresBuffer *exit_bufs[4]; /* reachable at exit: not leaks */
static MemresResource *exit_mr;

static void
test_exit_live (gconstpointer data)
{
  const Spec *s = data;

  g_test_summary ("A process that exits with live buffers (and its resource) exits with status 0 "
                  "and no warning.");
  if (is (s, B_DEVICE) && !mt_require_devices (1))
    return;
  if (is (s, B_NO_POOLS) && !mt_require_fake ("plays a device without memory pools"))
    return;
  if (g_test_subprocess ())
    {
      GError *error = NULL;
      MemresStream stream;

      fx_no_pools (s, TRUE);
      exit_mr = mt_new_ok (s->spec);
      stream = stream_begin (s);
      for (guint i = 0; i < G_N_ELEMENTS (exit_bufs); i++)
        {
          exit_bufs[i] = alloc_ok (s, exit_mr, (i + 1) * 64 * KiB, stream);
          MT_CHECK (memres_buffer_fill (exit_bufs[i], 0xa5, 1, stream, &error));
        }
      exit (0);
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr_unmatched ("*CRITICAL*");
  g_test_trap_assert_stderr_unmatched ("*WARNING*");
}

/* The exit rule: once the driver has shut down, every driver call answers
 * CUDA_ERROR_DEINITIALIZED, and a buffer closed then (a static destructor, Python's garbage
 * collector) closes without an error. The fake plays the shutdown; what the exit would have
 * freed is freed by the test afterwards. */
static const char *const shut_down_entries[] = {
  "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxPushCurrent",    "cuCtxPopCurrent",
  "cuCtxGetDevice",  "cuStreamGetCtx",  "cuStreamSynchronize", "cuMemRelease",
};

static void
shut_down (const char *free_entry)
{
  for (guint i = 0; i < G_N_ELEMENTS (shut_down_entries); i++)
    for (int nth = 1; nth <= 3; nth++)
      mt_fake_fail_call (shut_down_entries[i], nth, CUDA_ERROR_DEINITIALIZED);
  for (int nth = 1; nth <= 3; nth++)
    mt_fake_fail_call (free_entry, nth, CUDA_ERROR_DEINITIALIZED);
}

/* Frees what the exit would have freed: the memory of @s's buffer at @address (@size bytes). */
static void
free_as_exit (const Spec *s, const MemresCudaDriver *drv, CUdeviceptr address, gsize size)
{
  const char *free_entry = s->base->free_entry;
  CUmemGenericAllocationHandle handle;

  if (g_str_has_prefix (s->base->spec, "vmm"))
    {
      /* one chunk, one reservation, both of @size bytes; the handle taken back first */
      CU_OK (drv->cuMemRetainAllocationHandle (&handle, (void *) (guintptr) address));
      CU_OK (drv->cuMemUnmap (address, size));
      CU_OK (drv->cuMemAddressFree (address, size));
      CU_OK (drv->cuMemRelease (handle));
      CU_OK (drv->cuMemRelease (handle));
    }
  else if (g_strcmp0 (free_entry, "cuMemFreeHost") == 0)
    CU_OK (drv->cuMemFreeHost ((void *) (guintptr) address));
  else if (g_strcmp0 (free_entry, "cuMemFree") == 0)
    CU_OK (drv->cuMemFree (address));
  else if (!is (s, B_CAPTURE))
    {
      CU_OK (drv->cuMemFreeAsync (address, NULL));
      CU_OK (drv->cuStreamSynchronize (NULL));
    }
}

static void
test_close_at_exit (gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  CUdeviceptr address;
  MemresBuffer *buf;
  Fx f;

  g_test_summary ("After the driver's shutdown (every call answers CUDA_ERROR_DEINITIALIZED), a "
                  "buffer closes without an error (the fake plays the shutdown).");
  if (!mt_require_fake ("plays the driver's shutdown"))
    return;
  if (!fx_init (&f, data))
    return;
  buf = alloc_ok (f.s, f.mr, 2 * MiB, f.stream);
  address = (CUdeviceptr) memres_buffer_get_address (buf);

  shut_down (f.s->base->free_entry);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_closed (buf));
  memres_buffer_unref (buf);

  /* the driver is back (for the test): what the exit would have done */
  free_as_exit (f.s, f.drv, address, 2 * MiB);
  fx_clear (&f);
}

/* ---- registration ---- */

typedef struct
{
  const char *name;
  GTestDataFunc func;
  gboolean (*applies) (const Spec *s);
} Case;

static gboolean
always (const Spec *s G_GNUC_UNUSED)
{
  return TRUE;
}

static gboolean
retries (const Spec *s)
{
  /* (not over a kind that retries itself: one injected failure never reaches retry) */
  return g_strcmp0 (s->layer->name, "retry") == 0 && is (s, B_DEVICE)
         && !(s->base->as_layer & L_RETRIES);
}

static gboolean
real_oom (const Spec *s)
{
  return is (s, B_REAL_OOM);
}

/* The exit rule, where the close reaches the kind's free (not kept by a cache). */
static gboolean
frees_at_close (const Spec *s)
{
  return s->base->free_entry != NULL && !layer_is (s, L_KEEPS);
}

/* An adaptor that passes each allocation to the layer below (not a cache's chunks). */
static gboolean
passes_through (const Spec *s)
{
  return s->layer->name != NULL && !(s->layer->flags & (L_KEEPS | L_EXTRA));
}

static const Case cases[] = {
  { "sizes", test_sizes, always },
  { "zero-size", test_zero_size, always },
  { "max-size", test_max_size, always },
  { "closed", test_closed, always },
  { "streams", test_streams, always },
  { "bytes", test_bytes, always },
  { "stats", test_stats, always },
  { "trim", test_trim, always },
  { "upstream", test_upstream, passes_through },
  { "out-of-memory", test_out_of_memory, always },
  { "out-of-memory/retry-handler", test_retry_handler, retries },
  { "out-of-memory/real-driver", test_out_of_memory_real, real_oom },
  { "finalize-live", test_finalize_live, always },
  { "threads", test_threads, always },
  { "exit/live-buffers", test_exit_live, always },
  { "exit/close-after-shutdown", test_close_at_exit, frees_at_close },
};

static GPtrArray *specs; /* of Spec: the suite's whole life */

static void
add_spec (const Base *base, const Layer *layer)
{
  Spec *s = g_new0 (Spec, 1);

  s->base = base;
  s->layer = layer;
  s->spec = g_strconcat (layer->prefix, base->spec, NULL);
  s->name = layer->name == NULL ? g_strdup (base->spec)
                                : g_strconcat (layer->name, ">", base->spec, NULL);
  g_ptr_array_add (specs, s);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    if (cases[i].applies (s))
      {
        g_autofree char *path = g_strdup_printf ("/conformance/%s/%s", s->name, cases[i].name);

        g_test_add_data_func (path, s, cases[i].func);
      }
}

int
main (int argc, char **argv)
{
  /* MEMRES_TEST_SPECS=host (suite core) or device (fake, gpu: without a device they skip);
   * unset: device specs where a driver loads, host specs where none does */
  gboolean devices;

  mt_init (&argc, &argv);
  devices = g_getenv ("MEMRES_TEST_SPECS") != NULL
                ? g_strcmp0 (g_getenv ("MEMRES_TEST_SPECS"), "device") == 0
                : memres_cuda_get_driver (NULL) != NULL;
  specs = g_ptr_array_new ();
  for (guint b = 0; b < G_N_ELEMENTS (bases); b++)
    {
      if (((bases[b].flags & B_DEVICE) != 0) != devices)
        continue;
      for (guint l = 0; l < G_N_ELEMENTS (layers); l++)
        {
          for (guint e = 0; e < G_N_ELEMENTS (extra_stacks); e++)
            if (g_strcmp0 (extra_stacks[e].layer, layers[l].name) == 0
                && g_strcmp0 (extra_stacks[e].base, bases[b].spec) == 0)
              add_spec (&bases[b], &layers[l]);
          if ((l > 0 && (bases[b].flags & B_ALONE)) || (layers[l].flags & L_EXTRA))
            continue;
          if ((layers[l].flags & L_KEEPS) && (bases[b].flags & B_NO_CACHE))
            continue;
          add_spec (&bases[b], &layers[l]);
        }
    }
  return g_test_run ();
}

/* test-dmr.c: what is the dmr kind's own (device memory pools, stream-ordered: their options,
 * the current pool, captures, peers, faults), against the fake driver (suite fake) and the real
 * one (suite gpu). The contract it keeps with every kind is test-conformance.c's. */
#include "testutil.h"

#define KiB   ((gsize) 1024)
#define MiB   (1024 * KiB)
#define GiB   (1024 * MiB)
#define CHUNK (64 * MiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

/* A stream of device 0, which also becomes the calling thread's current context. */
static CUstream
stream_new (void)
{
  GError *error = NULL;

  MT_CHECK (memres_cuda_ensure_context (0, &error));
  return mt_stream_new_on (0);
}

/* The pool a buffer came from, asked of the driver. */
static CUmemoryPool
pool_of (MemresBuffer *buf)
{
  CUmemoryPool pool = NULL;

  mt_sync_ok (NULL); /* the allocation has happened */
  CU_OK (mt_driver ()->cuPointerGetAttribute (&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                              (CUdeviceptr) memres_buffer_get_address (buf)));
  g_assert_nonnull (pool);
  return pool;
}

static guint64
pool_attr (CUmemoryPool pool, CUmemPool_attribute attr)
{
  cuuint64_t value = 0;

  if (attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
    {
      int v = -1;

      CU_OK (mt_driver ()->cuMemPoolGetAttribute (pool, attr, &v));
      return (guint64) v;
    }
  CU_OK (mt_driver ()->cuMemPoolGetAttribute (pool, attr, &value));
  return value;
}

/* Host <-> device in chunks, so that a 1 GiB buffer needs CHUNK bytes of host memory. */
static void
write_pattern (MemresBuffer *buf, guint32 seed, MemresStream stream)
{
  gsize size = memres_buffer_get_size (buf);

  for (gsize off = 0; off < size; off += CHUNK)
    mt_write_pattern (buf, off, MIN (CHUNK, size - off), seed + (guint32) (off / CHUNK), stream);
}

static void
check_pattern (MemresBuffer *buf, guint32 seed, MemresStream stream)
{
  gsize size = memres_buffer_get_size (buf);

  for (gsize off = 0; off < size; off += CHUNK)
    mt_check_pattern (buf, off, MIN (CHUNK, size - off), seed + (guint32) (off / CHUNK), stream);
}

/* Every byte of @buf equals byte (i % 4) of little-endian @word. */
static void
check_fill (MemresBuffer *buf, guint32 word, MemresStream stream)
{
  gsize size = memres_buffer_get_size (buf);
  g_autofree guint8 *host = g_malloc (MIN (size, CHUNK));
  guint8 bytes[4] = { word & 0xff, (word >> 8) & 0xff, (word >> 16) & 0xff, word >> 24 };

  for (gsize off = 0; off < size; off += CHUNK)
    {
      gsize n = MIN (CHUNK, size - off);
      GError *error = NULL;

      memset (host, ~bytes[0], n);
      MT_CHECK (memres_buffer_read (buf, off, host, n, stream, &error));
      mt_sync_ok (stream);
      for (gsize i = 0; i < n; i++)
        if (host[i] != bytes[(off + i) % 4])
          g_error ("byte %" G_GSIZE_FORMAT " is 0x%02x, expected 0x%02x", off + i, host[i],
                   bytes[(off + i) % 4]);
    }
}

static void
fill_ok (MemresBuffer *buf, guint32 pattern, guint width, MemresStream stream)
{
  GError *error = NULL;

  MT_CHECK (memres_buffer_fill (buf, pattern, width, stream, &error));
}

/* write host -> a, copy a -> b, fill a, then verify both, every byte. */
static void
round_trip (MemresResource *mr, gsize size, MemresStream stream)
{
  MemresBuffer *a = mt_alloc_ok (mr, size, stream);
  MemresBuffer *b = mt_alloc_ok (mr, size, stream);
  GError *error = NULL;
  guint32 seed = (guint32) size;

  g_assert_cmpuint (memres_buffer_get_address (a), !=, 0);
  g_assert_cmpuint (memres_buffer_get_address (a), !=, memres_buffer_get_address (b));
  g_assert_cmpint (memres_buffer_get_device (a), ==, 0);
  g_assert_true (memres_buffer_is_device_accessible (a));
  g_assert_false (memres_buffer_is_host_accessible (a));

  write_pattern (a, seed, stream);
  MT_CHECK (memres_buffer_copy_to (a, b, stream, &error));
  fill_ok (a, 0x5a, 1, stream);
  check_pattern (b, seed, stream);
  check_fill (a, 0x5a5a5a5a, stream);
  if (size % 4 == 0)
    {
      fill_ok (b, 0x11223344, 4, stream);
      check_fill (b, 0x11223344, stream);
    }
  mt_close_ok (a, stream);
  mt_close_ok (b, stream);
  mt_sync_ok (stream);
}

static void
test_allocate_patterns (void)
{
  static const gsize sizes[] = { 1, 255, MiB, GiB };
  FakeCudaCounts base;
  MemresResource *mr;
  CUstream stream;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new");
  stream = stream_new ();
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_test_message ("size %" G_GSIZE_FORMAT, sizes[i]);
      round_trip (mr, sizes[i], stream);
    }
  /* the legacy default stream too */
  round_trip (mr, 4 * KiB, NULL);
  mt_stream_free (stream);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_max_size (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *a, *b;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new,max_size=64MiB");
  a = mt_alloc_ok (mr, 16 * MiB, NULL);
  b = memres_resource_allocate (mr, 128 * MiB, NULL, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_null (b);
  g_clear_error (&error);
  /* the pool keeps working: the first buffer is intact, more fits */
  write_pattern (a, 7, NULL);
  b = mt_alloc_ok (mr, 16 * MiB, NULL);
  check_pattern (a, 7, NULL);
  mt_close_ok (b, NULL);
  mt_close_ok (a, NULL);
  mt_sync_ok (NULL);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* max_size is the size asked for, not the larger one the driver rounds a small maxSize up to
 * (the fake rounds to 32 MiB as the real driver rounds up: a 2 MiB pool served 4 MiB on the
 * H200): the bytes of live buffers never exceed it, for dmr, pinned and ipc alike. */
static void
check_max_size_exact (const char *spec, gsize max)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *a, *b;

  mt_counts_snapshot (&base);
  mr = memres_resource_new (spec, &error);
  if (mr == NULL)
    {
      g_assert_false (mt_driver_is_fake ());
      g_test_message ("%s: %s", spec, error->message);
      g_clear_error (&error);
      return;
    }
  g_assert_null (memres_resource_allocate (mr, 2 * max, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "max_size"));
  g_test_message ("%s: %s", spec, error->message);
  g_clear_error (&error);
  a = mt_alloc_ok (mr, max / 2, NULL);
  b = mt_alloc_ok (mr, max / 2, NULL);
  g_assert_null (memres_resource_allocate (mr, 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  /* "1 byte", not "1 bytes" */
  g_assert_true (g_str_has_prefix (error->message, "cannot allocate 1 byte: the pool's max_size"));
  g_clear_error (&error);
  /* a freed buffer makes room again, exactly its size */
  mt_close_ok (b, NULL);
  g_assert_null (memres_resource_allocate (mr, max / 2 + 1, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  b = mt_alloc_ok (mr, max / 2, NULL);
  mt_close_ok (b, NULL);
  mt_close_ok (a, NULL);
  mt_sync_ok (NULL);
  /* zero-byte buffers are free */
  mt_close_ok (mt_alloc_ok (mr, 0, NULL), NULL);
  a = mt_alloc_ok (mr, max, NULL);
  mt_close_ok (a, NULL);
  mt_sync_ok (NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_max_size_exact (void)
{
  if (!mt_require_devices (1))
    return;
  check_max_size_exact ("dmr:pool=new,max_size=2MiB", 2 * MiB);
  check_max_size_exact ("pinned:max_size=2MiB", 2 * MiB);
  check_max_size_exact ("ipc:max_size=2MiB", 2 * MiB);
  check_max_size_exact ("dmr:pool=new,max_size=3000000", 3000000);
}

static void
test_free_other_stream (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *src, *dst;
  CUstream a, b;
  CUevent done;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new");
  a = stream_new ();
  b = stream_new ();
  CU_OK (mt_driver ()->cuEventCreate (&done, CU_EVENT_DISABLE_TIMING));

  src = mt_alloc_ok (mr, 4 * MiB, a);
  dst = mt_alloc_ok (mr, 4 * MiB, a);
  write_pattern (src, 42, a);
  MT_CHECK (memres_buffer_copy_to (src, dst, a, &error));
  check_pattern (src, 42, a); /* the bytes are intact before the free */

  /* the free on b waits for everything queued on a */
  CU_OK (mt_driver ()->cuEventRecord (done, a));
  CU_OK (mt_driver ()->cuStreamWaitEvent (b, done, 0));
  mt_close_ok (src, b);
  CU_OK (mt_driver ()->cuStreamSynchronize (b));
  check_pattern (dst, 42, a);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, >=, 4 * MiB);
  mt_close_ok (dst, a);
  CU_OK (mt_driver ()->cuStreamSynchronize (a));
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);

  CU_OK (mt_driver ()->cuEventDestroy (done));
  mt_stream_free (a);
  mt_stream_free (b);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_pool_current_vs_new (void)
{
  FakeCudaCounts base, now;
  MemresResource *cur1, *cur2, *own;
  MemresBuffer *b1, *b2, *b3;
  CUmemoryPool current = NULL;
  CUdevice dev;
  cuuint64_t zero = 0;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  CU_OK (mt_driver ()->cuDeviceGet (&dev, 0));
  CU_OK (mt_driver ()->cuDeviceGetMemPool (&current, dev));

  /* a current pool with threshold 0 is raised to max; a given threshold is applied */
  CU_OK (mt_driver ()->cuMemPoolSetAttribute (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
  cur1 = mt_new_ok ("dmr");
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, G_MAXUINT64);
  cur2 = mt_new_ok ("dmr:pool=current,release_threshold=1MiB");
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, MiB);
  memres_resource_unref (cur2);
  cur2 = mt_new_ok ("dmr:device=0,pool=current");
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, MiB);
  own = mt_new_ok ("dmr:pool=new");
  if (mt_driver_is_fake ())
    {
      mt_fake_get_counts (&now);
      g_assert_cmpint (now.pools, ==, base.pools + 1); /* only the new pool was created */
    }

  b1 = mt_alloc_ok (cur1, 2 * MiB, NULL);
  b2 = mt_alloc_ok (cur2, MiB, NULL);
  b3 = mt_alloc_ok (own, 3 * MiB, NULL);
  g_assert_true (pool_of (b1) == current);
  g_assert_true (pool_of (b2) == current);
  g_assert_true (pool_of (b3) != current);
  g_assert_cmpuint (pool_attr (pool_of (b3), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), !=, G_MAXUINT64);
  /* both current resources see all the current pool's memory, the new one only its own */
  g_assert_cmpuint (mt_stats_ok (cur1).used_current, >=, 3 * MiB);
  g_assert_cmpuint (mt_stats_ok (cur2).used_current, ==, mt_stats_ok (cur1).used_current);
  g_assert_cmpuint (mt_stats_ok (own).used_current, >=, 3 * MiB);
  g_assert_cmpuint (mt_stats_ok (own).used_current, <, 4 * MiB + 4 * MiB);
  g_assert_cmpint (memres_resource_get_device (cur1), ==, 0);
  g_assert_cmpint (memres_resource_get_flags (cur1), ==,
                   MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED);

  mt_close_ok (b1, NULL);
  mt_close_ok (b2, NULL);
  mt_close_ok (b3, NULL);
  mt_sync_ok (NULL);
  memres_resource_unref (cur1);
  memres_resource_unref (cur2);
  memres_resource_unref (own);
  /* the current pool survives its resources */
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, MiB);
  mt_assert_fake_counts_equal (&base);
}

/* The release threshold memres raises on a wrapped current pool (0 -> max) lasts while a
 * resource on the pool lives (its buffers included) and is set back to 0 after the last one;
 * a value someone set meanwhile is theirs and stays. */
static void
test_pool_current_threshold_restored (void)
{
  FakeCudaCounts base;
  MemresResource *a, *b;
  MemresBuffer *buf;
  CUmemoryPool current = NULL;
  CUdevice dev;
  cuuint64_t zero = 0, five = 5 * MiB;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  CU_OK (mt_driver ()->cuDeviceGet (&dev, 0));
  CU_OK (mt_driver ()->cuDeviceGetMemPool (&current, dev));
  CU_OK (mt_driver ()->cuMemPoolSetAttribute (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));

  a = mt_new_ok ("dmr");
  b = mt_new_ok ("dmr:device=0");
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, G_MAXUINT64);
  buf = mt_alloc_ok (b, MiB, NULL);
  memres_resource_unref (a);
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, G_MAXUINT64);
  memres_resource_unref (b);
  /* the buffer keeps its resource, and so the raise */
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, G_MAXUINT64);
  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 0);

  /* raised again by a new wrap; changed by someone else meanwhile: left as they set it */
  a = mt_new_ok ("dmr");
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, G_MAXUINT64);
  CU_OK (mt_driver ()->cuMemPoolSetAttribute (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &five));
  memres_resource_unref (a);
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 5 * MiB);

  /* a threshold that was not 0 is not raised, and not touched at the end */
  a = mt_new_ok ("dmr");
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 5 * MiB);
  memres_resource_unref (a);
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 5 * MiB);

  /* a failed wrap leaves it at 0 (fake: fail the second attribute set) */
  CU_OK (mt_driver ()->cuMemPoolSetAttribute (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
  if (mt_driver_is_fake ())
    {
      mt_fake_fail_call ("cuMemPoolSetAttribute", 2, CUDA_ERROR_INVALID_VALUE);
      mt_new_fails ("dmr:reuse_allow_opportunistic=true", MEMRES_CUDA_ERROR,
                    CUDA_ERROR_INVALID_VALUE, NULL);
      mt_fake_reset_faults ();
      g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 0);
      /* and the next wrap and its end work as before */
      memres_resource_unref (mt_new_ok ("dmr"));
      g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 0);
    }
  mt_assert_fake_counts_equal (&base);
}

/* Without a driver (run in a child whose MEMRES_CUDA_DRIVER names nothing). */
static void
test_no_driver (void)
{
  if (!g_test_subprocess ())
    {
      g_autofree char *saved = g_strdup (g_getenv ("MEMRES_CUDA_DRIVER"));

      g_setenv ("MEMRES_CUDA_DRIVER", "/nonexistent/libcuda.so.1", TRUE);
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
      if (saved != NULL)
        g_setenv ("MEMRES_CUDA_DRIVER", saved, TRUE);
      else
        g_unsetenv ("MEMRES_CUDA_DRIVER");
      g_test_trap_assert_passed ();
      return;
    }
  mt_new_fails ("dmr", MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER, NULL);
  mt_new_fails ("dmr:device=1,pool=new,release_threshold=max", MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER,
                NULL);
  /* bad options are reported before the driver is needed */
  mt_new_fails ("dmr:max_size=1GiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "pool=new");
}

/* A resource on the current pool that fails half-way gives the pool its attributes back. */
static void
test_pool_current_rollback (void)
{
  FakeCudaCounts base;
  CUmemoryPool current = NULL;
  CUdevice dev;
  cuuint64_t threshold = 5 * MiB;
  int opportunistic = 1;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  CU_OK (mt_driver ()->cuDeviceGet (&dev, 0));
  CU_OK (mt_driver ()->cuDeviceGetMemPool (&current, dev));
  CU_OK (
      mt_driver ()->cuMemPoolSetAttribute (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  CU_OK (mt_driver ()->cuMemPoolSetAttribute (current, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                                              &opportunistic));

  /* the threshold is set, then setting the reuse policy fails */
  mt_fake_fail_call ("cuMemPoolSetAttribute", 2, CUDA_ERROR_INVALID_VALUE);
  mt_new_fails ("dmr:release_threshold=1GiB,reuse_allow_opportunistic=false", MEMRES_CUDA_ERROR,
                CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAttribute");
  mt_fake_reset_faults ();
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 5 * MiB);
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), ==, 1);

  /* without the fault both change */
  memres_resource_unref (mt_new_ok ("dmr:release_threshold=1GiB,reuse_allow_opportunistic=false"));
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, GiB);
  g_assert_cmpuint (pool_attr (current, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), ==, 0);
  CU_OK (mt_driver ()->cuMemPoolSetAttribute (current, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC,
                                              &opportunistic));
  mt_assert_fake_counts_equal (&base);
}

static void
test_reuse_options (void)
{
  FakeCudaCounts base;
  MemresResource *mr;
  MemresBuffer *buf;
  CUmemoryPool pool;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new,release_threshold=2MiB,reuse_follow_event_dependencies=false,"
                  "reuse_allow_opportunistic=true,reuse_allow_internal_dependencies=no");
  buf = mt_alloc_ok (mr, KiB, NULL);
  pool = pool_of (buf);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), ==, 2 * MiB);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES), ==, 0);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), ==, 1);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES), ==, 0);
  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  memres_resource_unref (mr);

  mr = mt_new_ok ("dmr:pool=new,reuse_follow_event_dependencies=true,reuse_allow_opportunistic=0");
  buf = mt_alloc_ok (mr, KiB, NULL);
  pool = pool_of (buf);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES), ==, 1);
  g_assert_cmpuint (pool_attr (pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC), ==, 0);
  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_bad_options (void)
{
  FakeCudaCounts base;
  gint count = 0;
  GError *error = NULL;
  g_autofree char *beyond = NULL;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  MT_CHECK (memres_cuda_get_device_count (&count, &error));
  beyond = g_strdup_printf ("dmr:device=%d", count);

  mt_new_fails ("dmr:max_size=1GiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "max_size");
  mt_new_fails ("dmr:pool=current,max_size=1GiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "pool=new");
  mt_new_fails ("dmr:pool=new,max_size=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "max_size");
  mt_new_fails (beyond, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  mt_new_fails ("dmr:device=4096,pool=new", MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  mt_new_fails ("dmr:device=-1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "device");
  mt_new_fails ("dmr:reuse_allow_opportunistic=maybe", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "reuse_allow_opportunistic");
  mt_new_fails ("dmr:pool=shared", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "pool");
  mt_new_fails ("dmr:release_threshold=lots", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "release_threshold");
  mt_new_fails ("dmr:no_such_key=1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "no_such_key");
  mt_assert_fake_counts_equal (&base);
}

/* The default resource is the device's pool where the device exists; a device the driver does
 * not have is an error, not a silent fallback to host memory. */
static void
test_default_resource (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  gint n = 0;

  if (!mt_require_devices (1))
    return;
  mr = memres_resource_get_default (0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "dmr");
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  g_assert_true (memres_cuda_get_device_count (&n, &error));
  g_assert_null (memres_resource_get_default (n, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
  g_clear_error (&error);
  mr = memres_resource_get_default (-1, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "host");
  /* below -1 is no ordinal at all: refused, not host memory */
  g_assert_null (memres_resource_get_default (-2, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_resource_get_default (G_MININT, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);

  /* the spec it chose, and why host memory */
  {
    g_autofree char *spec = NULL;
    g_autofree char *stale = g_strdup ("not cleared");
    g_autofree char *reason = NULL;

    reason = stale; /* an out parameter: the call sets it without freeing what it held */
    spec = memres_resource_get_default_spec (0, &reason, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (spec, ==, "dmr:device=0");
    g_assert_null (reason);
    g_clear_pointer (&spec, g_free);
    spec = memres_resource_get_default_spec (-1, &reason, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (spec, ==, "host");
    g_assert_cmpstr (reason, ==, "asked for device -1");
    g_clear_pointer (&spec, g_free);
    g_clear_pointer (&reason, g_free);
    g_free (stale);
    reason = stale = g_strdup ("not cleared");
    g_assert_null (memres_resource_get_default_spec (n, &reason, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
    g_assert_null (reason);
  }
}

static void
test_query (void)
{
  FakeCudaCounts base;
  MemresResource *mr;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new");
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "dmr");
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  g_assert_true (memres_resource_is_device_accessible (mr));
  g_assert_false (memres_resource_is_host_accessible (mr));
  g_assert_cmpint (memres_resource_get_flags (mr), ==,
                   MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_STREAM_ORDERED);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_capture_refused (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  CUstream stream;
  CUgraph graph = NULL;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new");
  stream = stream_new ();
  CU_OK (mt_driver ()->cuStreamBeginCapture (stream, CU_STREAM_CAPTURE_MODE_RELAXED));
  buf = memres_resource_allocate (mr, MiB, stream, &error);
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "captur"));
  /* the message points at the kind that can allocate there */
  g_assert_nonnull (strstr (error->message, "\"graph\" kind"));
  g_clear_error (&error);
  CU_OK (mt_driver ()->cuStreamEndCapture (stream, &graph));
  if (graph != NULL)
    CU_OK (mt_driver ()->cuGraphDestroy (graph));
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);

  /* the same stream allocates again once the capture ended */
  round_trip (mr, 8 * KiB, stream);
  mt_stream_free (stream);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* Ten allocate+close pairs on the NULL stream, from a thread of its own. */
static gpointer
pairs_main (gpointer data)
{
  MemresResource *mr = data;

  for (guint i = 0; i < 10; i++)
    {
      gsize size = 1 + (i * 104729) % (64 * KiB);
      GError *error = NULL;
      MemresBuffer *buf = memres_resource_allocate (mr, size, NULL, &error);

      g_assert_no_error (error);
      g_assert_nonnull (buf);
      MT_CHECK (memres_buffer_close (buf, NULL, &error));
      memres_buffer_unref (buf);
    }
  return NULL;
}

static void
test_no_context (void)
{
  FakeCudaCounts base;
  MemresResource *mr;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new");
  /* a thread that never made a context current allocates and frees on the NULL stream */
  g_thread_join (g_thread_new ("no-context", pairs_main, mr));
  mt_sync_ok (NULL);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
assert_access (MemresResource *mr, gint device, MemresAccess expected)
{
  GError *error = NULL;
  MemresAccess access = (MemresAccess) 0x7f;

  MT_CHECK (memres_resource_get_access (mr, device, &access, &error));
  g_assert_cmpint (access, ==, expected);
}

/* Work on @stream (another device's) cannot reach @buf. Checked against the fake only: on real
 * hardware a kernel or copy touching memory without access may fault instead of failing, which
 * would poison the context for every later test. */
static void
assert_unreachable (MemresBuffer *buf, CUstream stream)
{
  GError *error = NULL;

  if (!mt_driver_is_fake ())
    return;
  g_assert_false (memres_buffer_fill (buf, 0x77, 1, stream, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE);
  g_clear_error (&error);
}

static void
test_peer_access (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  long calls = 0;
  gint count = 0;
  int can = 0;
  CUdevice d0, d1;
  CUstream s1;

  if (!mt_require_devices (2))
    return;
  CU_OK (mt_driver ()->cuDeviceGet (&d0, 0));
  CU_OK (mt_driver ()->cuDeviceGet (&d1, 1));
  CU_OK (mt_driver ()->cuDeviceCanAccessPeer (&can, d1, d0));
  if (!can)
    {
      g_test_skip ("device 1 cannot access device 0");
      return;
    }
  mt_counts_snapshot (&base);
  MT_CHECK (memres_cuda_get_device_count (&count, &error));
  s1 = mt_stream_new_on (1);
  mr = mt_new_ok ("dmr:pool=new");
  buf = mt_alloc_ok (mr, MiB, NULL);
  assert_access (mr, 0, MEMRES_ACCESS_READWRITE);
  assert_access (mr, 1, MEMRES_ACCESS_NONE);
  assert_unreachable (buf, s1);

  /* one driver call for all entries; the owner's entry is ignored */
  {
    const MemresAccessDesc grant[] = { { 0, MEMRES_ACCESS_NONE }, { 1, MEMRES_ACCESS_READWRITE } };

    if (mt_driver_is_fake ())
      calls = mt_fake_call_count ("cuMemPoolSetAccess");
    MT_CHECK (memres_resource_set_access (mr, grant, G_N_ELEMENTS (grant), &error));
    if (mt_driver_is_fake ())
      g_assert_cmpint (mt_fake_call_count ("cuMemPoolSetAccess"), ==, calls + 1);
  }
  assert_access (mr, 0, MEMRES_ACCESS_READWRITE);
  assert_access (mr, 1, MEMRES_ACCESS_READWRITE);

  /* granting again what is granted makes no cuMemPoolSetAccess (it would remap every mapping
   * of the pool); a mixed request passes only the change */
  {
    const MemresAccessDesc again[] = { { 1, MEMRES_ACCESS_READWRITE } };

    if (mt_driver_is_fake ())
      calls = mt_fake_call_count ("cuMemPoolSetAccess");
    MT_CHECK (memres_resource_set_access (mr, again, 1, &error));
    MT_CHECK (memres_resource_set_access (mr, again, 1, &error));
    if (mt_driver_is_fake ())
      g_assert_cmpint (mt_fake_call_count ("cuMemPoolSetAccess"), ==, calls);
  }
  assert_access (mr, 1, MEMRES_ACCESS_READWRITE);
  /* now it can: device 1 writes and reads the memory of device 0 */
  write_pattern (buf, 11, s1);
  check_pattern (buf, 11, s1);
  check_pattern (buf, 11, NULL);

  /* bad entries change nothing and make no driver call */
  {
    const MemresAccessDesc no_device[]
        = { { 1, MEMRES_ACCESS_NONE }, { count, MEMRES_ACCESS_NONE } };
    const MemresAccessDesc bad_access[] = { { 1, (MemresAccess) 2 } };
    const MemresAccessDesc conflict[] = { { 1, MEMRES_ACCESS_NONE }, { 1, MEMRES_ACCESS_READ } };

    if (mt_driver_is_fake ())
      calls = mt_fake_call_count ("cuMemPoolSetAccess");
    g_assert_false (memres_resource_set_access (mr, no_device, 2, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
    g_clear_error (&error);
    g_assert_false (memres_resource_set_access (mr, bad_access, 1, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_assert_false (memres_resource_set_access (mr, conflict, 2, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_assert_false (memres_resource_get_access (mr, count, &(MemresAccess){ 0 }, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE);
    g_clear_error (&error);
    if (mt_driver_is_fake ())
      g_assert_cmpint (mt_fake_call_count ("cuMemPoolSetAccess"), ==, calls);
  }
  assert_access (mr, 1, MEMRES_ACCESS_READWRITE);

  /* revoke; duplicates with the same access collapse */
  {
    const MemresAccessDesc revoke[] = { { 1, MEMRES_ACCESS_NONE }, { 1, MEMRES_ACCESS_NONE } };

    MT_CHECK (memres_resource_set_access (mr, revoke, 2, &error));
  }
  assert_access (mr, 1, MEMRES_ACCESS_NONE);
  assert_unreachable (buf, s1);

  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  memres_resource_unref (mr);

  /* the current pool of device 1 is another pool, owned by device 1, which device 0 cannot
   * reach until a grant */
  mr = mt_new_ok ("dmr:device=1");
  g_assert_cmpint (memres_resource_get_device (mr), ==, 1);
  assert_access (mr, 1, MEMRES_ACCESS_READWRITE);
  assert_access (mr, 0, MEMRES_ACCESS_NONE);
  buf = mt_alloc_ok (mr, 64 * KiB, s1);
  g_assert_cmpint (memres_buffer_get_device (buf), ==, 1);
  write_pattern (buf, 3, s1);
  check_pattern (buf, 3, s1);
  mt_close_ok (buf, s1);
  mt_stream_free (s1);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_peer_unsupported (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  const MemresAccessDesc grant[] = { { 1, MEMRES_ACCESS_READWRITE } };
  int can = 1;
  CUdevice d0, d1;

  /* The fake has peer access unless FAKECUDA_NO_PEER is set when it loads: run the test in a
   * child process that loads it so. */
  if (mt_driver_is_fake () && !g_test_subprocess ())
    {
      g_setenv ("FAKECUDA_NO_PEER", "1", TRUE);
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_unsetenv ("FAKECUDA_NO_PEER");
      g_test_trap_assert_passed ();
      return;
    }
  if (!mt_require_devices (2))
    return;
  CU_OK (mt_driver ()->cuDeviceGet (&d0, 0));
  CU_OK (mt_driver ()->cuDeviceGet (&d1, 1));
  CU_OK (mt_driver ()->cuDeviceCanAccessPeer (&can, d1, d0));
  if (can)
    {
      g_test_skip ("device 1 can access device 0");
      return;
    }
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new");
  g_assert_false (memres_resource_set_access (mr, grant, 1, &error));
  /* the SDK's check (memres_cuda_check_peer_access()), naming both devices */
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_cmpstr (error->message, ==,
                   "device 1 cannot access the memory of device 0 (cuDeviceCanAccessPeer)");
  g_clear_error (&error);
  assert_access (mr, 1, MEMRES_ACCESS_NONE);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_no_pools (void)
{
  FakeCudaCounts base, live;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *a, *b;
  MemresStats s;
  const MemresAccessDesc grant[] = { { 0, MEMRES_ACCESS_READWRITE } };

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("needs a device without memory pools: the fake makes one"))
    return;
  mt_counts_snapshot (&base);
  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);

  mt_new_fails ("dmr", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "device 0");
  mt_new_fails ("dmr:pool=new,sync_fallback=false", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "device 0");

  mr = mt_new_ok ("dmr:pool=new,max_size=8MiB,sync_fallback=true");
  g_assert_cmpint (memres_resource_get_flags (mr), ==, MEMRES_MEMORY_DEVICE_ACCESSIBLE);
  round_trip (mr, 255, NULL);
  round_trip (mr, MiB, NULL);
  a = mt_alloc_ok (mr, 6 * MiB, NULL);
  mt_fake_get_counts (&live);
  g_assert_cmpint (live.allocations, ==, base.allocations + 1);
  g_assert_cmpint (live.pool_allocations, ==, base.pool_allocations);
  b = memres_resource_allocate (mr, 4 * MiB, NULL, &error);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_null (b);
  g_clear_error (&error);
  s = mt_stats_ok (mr);
  g_assert_cmpuint (s.used_current, ==, 6 * MiB);
  g_assert_cmpuint (s.reserved_current, ==, 6 * MiB);
  g_assert_cmpuint (s.used_high, ==, 6 * MiB);
  mt_close_ok (a, NULL);
  s = mt_stats_ok (mr);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.used_high, ==, 6 * MiB);
  MT_CHECK (memres_resource_reset_stats (mr, &error));
  g_assert_cmpuint (mt_stats_ok (mr).used_high, ==, 0);
  MT_CHECK (memres_resource_trim (mr, 0, &error));
  g_assert_false (memres_resource_set_access (mr, grant, 1, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  memres_resource_unref (mr);

  mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1);
  mt_assert_fake_counts_equal (&base);
}

/* Fault sweeps (fake only) */

static void
test_fault_allocate (void)
{
  FakeCudaCounts base;
  MtSweepData sd = { .size = 256 * KiB };
  CUstream stream;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  sd.mr = mt_new_ok ("dmr:pool=new");
  stream = stream_new ();
  sd.stream = NULL;
  g_assert_cmpint (mt_fault_sweep ("allocate (NULL stream)", mt_op_allocate, mt_undo_allocate, &sd,
                                   CUDA_ERROR_INVALID_VALUE, NULL),
                   >=, 1);
  sd.stream = stream;
  g_assert_cmpint (mt_fault_sweep ("allocate (stream)", mt_op_allocate, mt_undo_allocate, &sd,
                                   CUDA_ERROR_INVALID_VALUE, NULL),
                   >=, 2);
  mt_stream_free (stream);
  memres_resource_unref (sd.mr);
  mt_assert_fake_counts_equal (&base);
}

/* A close whose free fails: the error is reported and nothing is released, the buffer stays
 * open with its bytes, and a second close frees it. */
static void
test_fault_close (void)
{
  FakeCudaCounts base, live;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  CUstream stream;
  guint64 address;

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("dmr:pool=new");
  stream = stream_new ();

  /* the free cannot be ordered on the stream: reported, and the buffer stays open */
  buf = mt_alloc_ok (mr, 256 * KiB, stream);
  address = memres_buffer_get_address (buf);
  write_pattern (buf, 5, stream);
  mt_fake_fail_call ("cuMemFreeAsync", 1, CUDA_ERROR_INVALID_HANDLE);
  g_assert_false (memres_buffer_close (buf, stream, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_HANDLE);
  g_assert_nonnull (strstr (error->message, "cuMemFreeAsync"));
  g_clear_error (&error);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpuint (memres_buffer_get_address (buf), ==, address);
  mt_fake_get_counts (&live);
  g_assert_cmpint (live.pool_allocations, ==, base.pool_allocations + 1);
  check_pattern (buf, 5, stream);
  mt_close_ok (buf, stream);
  mt_sync_ok (stream);
  mt_fake_get_counts (&live);
  g_assert_cmpint (live.pool_allocations, ==, base.pool_allocations);
  g_assert_cmpuint (mt_stats_ok (mr).used_current, ==, 0);

  /* at process exit (driver deinitialized) a failed free is no error */
  buf = mt_alloc_ok (mr, 256 * KiB, stream);
  address = memres_buffer_get_address (buf);
  mt_fake_fail_call ("cuMemFreeAsync", 1, CUDA_ERROR_DEINITIALIZED);
  mt_close_ok (buf, stream);
  mt_fake_get_counts (&live);
  g_assert_cmpint (live.pool_allocations, ==, base.pool_allocations + 1);
  CU_OK (mt_driver ()->cuMemFreeAsync ((CUdeviceptr) address,
                                       stream)); /* what the exit would have done */

  /* the resource keeps working */
  round_trip (mr, 4 * KiB, stream);
  mt_fake_reset_faults ();
  mt_stream_free (stream);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

static void
test_fault_new (void)
{
  static const char *const specs[] = {
    "dmr:pool=new",
    "dmr:pool=new,max_size=1GiB,release_threshold=4MiB,reuse_follow_event_dependencies=true,"
    "reuse_allow_opportunistic=false,reuse_allow_internal_dependencies=true",
    "dmr:pool=current,release_threshold=max,reuse_allow_opportunistic=true",
  };
  FakeCudaCounts base;
  MtSweepData sd = { 0 };

  if (!mt_require_devices (1))
    return;
  if (!mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      sd.spec = specs[i];
      g_assert_cmpint (
          mt_fault_sweep (specs[i], mt_op_new, mt_undo_new, &sd, CUDA_ERROR_INVALID_VALUE, NULL),
          >=, 1);
    }
  mt_assert_fake_counts_equal (&base);
}

/* Wrapping device memory checks the device ordinal against the driver: the last device is
 * taken, the one after it refused (INVALID_ARGUMENT), and the refused wrap's release function
 * is not called. */
static void
test_wrap_device_ordinal (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  MemresBuffer *wrap;
  gint n = 0;
  int released = 0;

  if (!mt_require_devices (1))
    return;
  g_assert_true (memres_cuda_get_device_count (&n, &error));
  g_assert_no_error (error);
  mr = mt_new_ok ("dmr:device=0");
  buf = mt_alloc_ok (mr, 4096, NULL);
  g_assert_null (memres_buffer_new_for_pointer (memres_buffer_get_pointer (buf), 4096, n,
                                                MEMRES_MEMORY_DEVICE_ACCESSIBLE, mt_count_release,
                                                &released, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "device"));
  g_clear_error (&error);
  g_assert_cmpint (released, ==, 0);
  /* memory of the last device (the driver checks that the memory is on the device said) */
  mt_close_ok (g_steal_pointer (&buf), NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  {
    g_autofree char *spec = g_strdup_printf ("dmr:device=%d", n - 1);

    mr = mt_new_ok (spec);
  }
  buf = mt_alloc_ok (mr, 4096, NULL);
  wrap = memres_buffer_new_for_pointer (memres_buffer_get_pointer (buf), 4096, n - 1,
                                        MEMRES_MEMORY_DEVICE_ACCESSIBLE, mt_count_release,
                                        &released, &error);
  g_assert_no_error (error);
  g_assert_cmpint (memres_buffer_get_device (wrap), ==, n - 1);
  memres_buffer_unref (wrap);
  g_assert_cmpint (released, ==, 1);
  mt_close_ok (g_steal_pointer (&buf), NULL);
}

/* Device memory described against what the driver says of it (cuPointerGetAttributes, asked
 * even where the caller gives flags): as host-accessible (a host read of it would fault on a
 * GPU) INVALID_ARGUMENT, as on another device WRONG_DEVICE, the release not called and the
 * memory untouched; described as it is, it wraps. Memory the driver does not know (pageable
 * host memory) is taken on the caller's word. */
static void
test_wrap_driver_disagrees (void)
{
  static const MemresMemoryFlags host_flags[]
      = { MEMRES_MEMORY_HOST_ACCESSIBLE,
          MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE };
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf, *wrap;
  gpointer ptr;
  gint n = 0;
  int released = 0;
  guint8 host[64];

  g_test_summary ("wrapped memory described otherwise than the driver knows it is refused");
  if (!mt_require_devices (1))
    return;
  g_assert_true (memres_cuda_get_device_count (&n, &error));
  mr = mt_new_ok ("dmr:device=0");
  buf = mt_alloc_ok (mr, 4096, NULL);
  mt_fill_byte_ok (buf, 0x3c, NULL);
  ptr = memres_buffer_get_pointer (buf);
  for (gsize i = 0; i < G_N_ELEMENTS (host_flags); i++)
    {
      g_assert_null (memres_buffer_new_for_pointer (ptr, 4096, -1, host_flags[i], mt_count_release,
                                                    &released, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "device memory of device 0"));
      g_clear_error (&error);
    }
  if (n > 1)
    {
      g_assert_null (memres_buffer_new_for_pointer (ptr, 4096, 1, MEMRES_MEMORY_DEVICE_ACCESSIBLE,
                                                    mt_count_release, &released, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_WRONG_DEVICE);
      g_assert_nonnull (strstr (error->message, "on device 0"));
      g_clear_error (&error);
    }
  g_assert_cmpint (released, ==, 0);
  wrap = memres_buffer_new_for_pointer (ptr, 4096, 0, MEMRES_MEMORY_DEVICE_ACCESSIBLE,
                                        mt_count_release, &released, &error);
  g_assert_no_error (error);
  mt_assert_bytes (wrap, 0x3c, NULL);
  memres_buffer_unref (wrap);
  g_assert_cmpint (released, ==, 1);
  /* pageable host memory: the driver does not know it, the caller's word is taken */
  memset (host, 0x11, sizeof host);
  wrap = memres_buffer_new_for_pointer (host, sizeof host, -1, MEMRES_MEMORY_HOST_ACCESSIBLE, NULL,
                                        NULL, &error);
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_host_accessible (wrap));
  memres_buffer_unref (wrap);
  mt_assert_bytes (buf, 0x3c, NULL);
  mt_close_ok (buf, NULL);
}

/* Device memory wrapped with a size past the end of the driver's allocation (its extent,
 * cuPointerGetAttributes' range attributes): INVALID_ARGUMENT whether the driver or the caller
 * describes the memory, from the allocation's start or inside it, the release not called and the
 * memory untouched; up to the allocation's end it wraps. On the fake only: a real pool's extent
 * may be larger than the allocation, and a live neighbour of the same device is taken for the
 * next mapping of a reservation. */
static void
test_wrap_past_allocation (void)
{
  static const MemresMemoryFlags flags[] = { 0, MEMRES_MEMORY_DEVICE_ACCESSIBLE };
  static const gsize offsets[] = { 0, 1024, 4095 };
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf, *wrap;
  guint8 *ptr;
  int released = 0;

  g_test_summary ("wrapped device memory larger than the driver's allocation is refused");
  if (!mt_require_fake ("the extent of a dmr allocation is the fake's: its size exactly"))
    return;
  mr = mt_new_ok ("dmr:device=0");
  buf = mt_alloc_ok (mr, 4096, NULL);
  mt_fill_byte_ok (buf, 0x4b, NULL);
  ptr = memres_buffer_get_pointer (buf);
  for (gsize f = 0; f < G_N_ELEMENTS (flags); f++)
    for (gsize i = 0; i < G_N_ELEMENTS (offsets); i++)
      {
        g_autofree char *ends
            = g_strdup_printf (", %" G_GSIZE_FORMAT " bytes in (", 4096 - offsets[i]);

        g_assert_null (memres_buffer_new_for_pointer (
            ptr + offsets[i], 4097 - offsets[i], 0, flags[f], mt_count_release, &released, &error));
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
        g_assert_nonnull (strstr (error->message, "past the end of the driver's allocation"));
        g_assert_nonnull (strstr (error->message, ends));
        g_clear_error (&error);
        wrap = memres_buffer_new_for_pointer (ptr + offsets[i], 4096 - offsets[i], 0, flags[f],
                                              mt_count_release, &released, &error);
        g_assert_no_error (error);
        g_assert_cmpuint (memres_buffer_get_size (wrap), ==, 4096 - offsets[i]);
        g_assert_cmpint (memres_buffer_get_device (wrap), ==, 0);
        mt_assert_bytes (wrap, 0x4b, NULL);
        memres_buffer_unref (wrap);
      }
  /* one release per wrap taken, none for the refused ones */
  g_assert_cmpint (released, ==, G_N_ELEMENTS (flags) * G_N_ELEMENTS (offsets));
  mt_assert_bytes (buf, 0x4b, NULL);
  mt_close_ok (buf, NULL);
}

int
main (int argc, char **argv)
{
  /* Against the fake, two devices, so that peer access is tested too. Set before the driver
   * loads (it reads the environment at cuInit). */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);

  g_test_add_func ("/dmr/allocate/patterns", test_allocate_patterns);
  g_test_add_func ("/dmr/wrap/device-ordinal", test_wrap_device_ordinal);
  g_test_add_func ("/dmr/wrap/driver-disagrees", test_wrap_driver_disagrees);
  g_test_add_func ("/dmr/wrap/past-allocation", test_wrap_past_allocation);
  g_test_add_func ("/dmr/allocate/no-context", test_no_context);
  g_test_add_func ("/dmr/allocate/capture-refused", test_capture_refused);
  g_test_add_func ("/dmr/pool/max-size", test_max_size);
  g_test_add_func ("/dmr/pool/max-size-exact", test_max_size_exact);
  g_test_add_func ("/dmr/pool/current-vs-new", test_pool_current_vs_new);
  g_test_add_func ("/dmr/pool/current-rollback", test_pool_current_rollback);
  g_test_add_func ("/dmr/pool/current-threshold-restored", test_pool_current_threshold_restored);
  g_test_add_func ("/dmr/pool/reuse-options", test_reuse_options);
  g_test_add_func ("/dmr/pool/no-pools", test_no_pools);
  g_test_add_func ("/dmr/stream/free-other-stream", test_free_other_stream);
  g_test_add_func ("/dmr/options/bad", test_bad_options);
  g_test_add_func ("/dmr/options/no-driver", test_no_driver);
  g_test_add_func ("/dmr/query", test_query);
  g_test_add_func ("/dmr/default-resource", test_default_resource);
  g_test_add_func ("/dmr/peer/access", test_peer_access);
  g_test_add_func ("/dmr/peer/unsupported", test_peer_unsupported);
  g_test_add_func ("/dmr/fault/allocate", test_fault_allocate);
  g_test_add_func ("/dmr/fault/close", test_fault_close);
  g_test_add_func ("/dmr/fault/new", test_fault_new);
  return g_test_run ();
}

/* test-managed.c: the managed kind (unified memory) and the advice, prefetch and discard
 * functions of memres-managed.h, against the fake driver (suite fake) and the real one (suite
 * gpu). Buffers stay at a few MiB: over-subscribing managed memory can hang a real GPU. */
#include <string.h>

#include <memres/memres.h>

#include "testutil.h"

#define MiB ((gsize) 1 << 20)

/* The specs of every mode (the pools need CUDA 13 and concurrent managed access). */
static const char *const all_specs[] = {
  "managed",
  "managed:pool=new",
  "managed:pool=new,preferred_location=device,release_threshold=1MiB",
  "managed:pool=none",
  "managed:pool=none,attach=host",
  "managed:pool=none,preferred_location=host",
};

/* Devices and drivers without managed pools (or without concurrent managed access, which
 * prefetching to a device and the pools need) cannot run the tests that use them. */
static gboolean
require_managed (gboolean pools)
{
  const MemresCudaDriver *drv;

  if (!mt_require_devices (1))
    return FALSE;
  drv = memres_cuda_get_driver (NULL);
  if (!mt_device_attribute (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY))
    {
      g_test_skip ("device 0 has no managed memory");
      return FALSE;
    }
  if (!mt_device_attribute (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS))
    {
      g_test_skip ("device 0 has no concurrent managed access");
      return FALSE;
    }
  if (pools && (drv->driver_version < 13000 || drv->cuMemGetMemPool == NULL))
    {
      g_test_skip ("managed pools need a CUDA 13 driver");
      return FALSE;
    }
  return TRUE;
}

static MemresLocation
loc (MemresLocationType type, gint id)
{
  return (MemresLocation){ type, id };
}

static void
assert_location (const MemresLocation *got, MemresLocationType type, gint id)
{
  g_assert_cmpint (got->type, ==, type);
  g_assert_cmpint (got->id, ==, id);
}

static void
assert_last_prefetch (MemresBuffer *buf, MemresLocationType type, gint id)
{
  g_autoptr (GError) error = NULL;
  MemresLocation got = { 42, 42 };

  g_assert_true (memres_buffer_get_last_prefetch_location (buf, &got, &error));
  g_assert_no_error (error);
  assert_location (&got, type, id);
}

static void
assert_preferred (MemresBuffer *buf, MemresLocationType type, gint id)
{
  g_autoptr (GError) error = NULL;
  MemresLocation got = { 42, 42 };

  g_assert_true (memres_buffer_get_preferred_location (buf, &got, &error));
  g_assert_no_error (error);
  assert_location (&got, type, id);
}

/* A preferred location on a host NUMA node, read back: the fake gives the node back. The real
 * driver (580, H200, one NUMA node) does not report it through
 * CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: it answers with the preference set before
 * (host memory after a host preference; none on a new buffer), so there the call's success is
 * all that can be checked, and the answer is logged. */
static void
assert_preferred_numa (MemresBuffer *buf, gint node)
{
  g_autoptr (GError) error = NULL;
  MemresLocation got = { 42, 42 };

  g_assert_true (memres_buffer_get_preferred_location (buf, &got, &error));
  g_assert_no_error (error);
  if (!mt_driver_is_fake () && got.type != MEMRES_LOCATION_HOST_NUMA)
    {
      g_test_message ("a preferred location on NUMA node %d reads back as type %d, id %d", node,
                      got.type, got.id);
      g_assert_true (got.type == MEMRES_LOCATION_HOST || got.type == MEMRES_LOCATION_NONE);
      return;
    }
  assert_location (&got, MEMRES_LOCATION_HOST_NUMA, node);
}

static MemresStream
new_stream (void)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&error);
  CUstream stream = NULL;

  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_cmpint (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  return (MemresStream) stream;
}

static void
destroy_stream (MemresStream stream)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);

  g_assert_cmpint (drv->cuStreamDestroy ((CUstream) stream), ==, CUDA_SUCCESS);
}

/* DLPack sees managed memory, pool memory too (which does not report IS_MANAGED). */
static void
assert_dlpack_managed (MemresBuffer *buf)
{
  g_autoptr (GError) error = NULL;
  MemresDLDataType u8 = { MEMRES_DL_UINT, 8, 1 };
  gint64 shape = 16;
  MemresDLManagedTensorVersioned *t
      = memres_buffer_export_dlpack (buf, u8, 1, &shape, NULL, 0, &error);

  g_assert_no_error (error);
  g_assert_cmpint (t->dl_tensor.device.device_type, ==, MEMRES_DL_CUDA_MANAGED);
  g_assert_cmpint (t->dl_tensor.device.device_id, ==, 0);
  t->deleter (t);
}

/* Fill on the device, read through the host pointer; write through it, copy to device memory
 * and back into another managed buffer. */
static void
roundtrip (const char *spec, gboolean pools)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  g_autoptr (MemresResource) dev_mr = mt_new_ok ("dmr:device=0");
  MemresStream stream = new_stream ();
  gsize size = 3 * MiB + 5;
  MemresBuffer *buf = mt_alloc_ok (mr, size, stream);
  MemresBuffer *other = mt_alloc_ok (mr, size, stream);
  MemresBuffer *dev = mt_alloc_ok (dev_mr, size, stream);
  MemresMemoryFlags flags
      = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_MANAGED;
  const guint8 *p;

  g_test_message ("%s", spec);
  if (pools)
    flags |= MEMRES_MEMORY_STREAM_ORDERED;
  g_assert_cmphex (memres_resource_get_flags (mr), ==, flags);
  g_assert_cmphex (memres_buffer_get_flags (buf), ==, flags);
  g_assert_true (memres_buffer_is_managed (buf));
  g_assert_true (memres_buffer_is_host_accessible (buf));
  g_assert_cmpint (memres_buffer_get_device (buf), ==, 0);
  assert_dlpack_managed (buf);

  g_assert_true (memres_buffer_fill (buf, 0x5a, 1, stream, &error));
  g_assert_no_error (error);
  mt_sync_ok (stream);
  p = memres_buffer_get_pointer (buf);
  for (gsize i = 0; i < size; i++)
    if (p[i] != 0x5a)
      g_error ("%s: byte %" G_GSIZE_FORMAT " is 0x%02x after the device fill", spec, i, p[i]);

  mt_fill_pattern (memres_buffer_get_pointer (buf), size, 17);
  g_assert_true (memres_buffer_copy_to (buf, dev, stream, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_copy_to (dev, other, stream, &error));
  g_assert_no_error (error);
  mt_sync_ok (stream);
  mt_assert_pattern (memres_buffer_get_pointer (other), size, 17);
  mt_check_pattern (other, 0, size, 17, stream);

  mt_close_ok (dev, stream);
  mt_close_ok (other, stream);
  mt_close_ok (buf, stream);
  mt_sync_ok (stream);
  destroy_stream (stream);
}

static void
test_roundtrip_pools (void)
{
  FakeCudaCounts base;

  if (!require_managed (TRUE))
    return;
  mt_counts_snapshot (&base);
  for (guint i = 0; i < 3; i++)
    roundtrip (all_specs[i], TRUE);
  mt_assert_fake_counts_equal (&base);
}

static void
test_roundtrip_none (void)
{
  FakeCudaCounts base;

  if (!require_managed (FALSE))
    return;
  mt_counts_snapshot (&base);
  for (guint i = 3; i < G_N_ELEMENTS (all_specs); i++)
    roundtrip (all_specs[i], FALSE);
  mt_assert_fake_counts_equal (&base);
}

static void
prefetch_ok (MemresBuffer *buf, MemresLocation where, MemresStream stream)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_buffer_prefetch (buf, &where, stream, &error));
  g_assert_no_error (error);
}

/* Prefetch to the device and back; LAST_PREFETCH_LOCATION says where each went. */
static void
test_prefetch (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresStream stream;
  MemresBuffer *bufs[3];
  MemresLocation where[3];
  FakeCudaCounts base;
  int numa;

  if (!require_managed (FALSE))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("managed:pool=none");
  stream = new_stream ();
  for (guint i = 0; i < 3; i++)
    bufs[i] = mt_alloc_ok (mr, MiB, stream);

  assert_last_prefetch (bufs[0], MEMRES_LOCATION_NONE, 0);
  prefetch_ok (bufs[0], loc (MEMRES_LOCATION_DEVICE, 0), stream);
  assert_last_prefetch (bufs[0], MEMRES_LOCATION_DEVICE, 0);
  prefetch_ok (bufs[0], loc (MEMRES_LOCATION_HOST, 7), stream);
  assert_last_prefetch (bufs[0], MEMRES_LOCATION_HOST, 0);
  numa = mt_device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
  if (numa >= 0)
    {
      prefetch_ok (bufs[0], loc (MEMRES_LOCATION_HOST_NUMA, numa), stream);
      assert_last_prefetch (bufs[0], MEMRES_LOCATION_HOST_NUMA, numa);
    }

  /* one location for all three, in one call */
  where[0] = loc (MEMRES_LOCATION_DEVICE, 0);
  g_assert_true (memres_buffers_prefetch (bufs, 3, where, 1, stream, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < 3; i++)
    assert_last_prefetch (bufs[i], MEMRES_LOCATION_DEVICE, 0);
  /* one each: host, device, host (three runs) */
  where[0] = loc (MEMRES_LOCATION_HOST, 0);
  where[1] = loc (MEMRES_LOCATION_DEVICE, 0);
  where[2] = loc (MEMRES_LOCATION_HOST, 0);
  g_assert_true (memres_buffers_prefetch (bufs, 3, where, 3, stream, &error));
  g_assert_no_error (error);
  assert_last_prefetch (bufs[0], MEMRES_LOCATION_HOST, 0);
  assert_last_prefetch (bufs[1], MEMRES_LOCATION_DEVICE, 0);
  assert_last_prefetch (bufs[2], MEMRES_LOCATION_HOST, 0);
  /* on the legacy stream, which the batch call itself refuses */
  where[0] = loc (MEMRES_LOCATION_DEVICE, 0);
  g_assert_true (memres_buffers_prefetch (bufs, 3, where, 1, NULL, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < 3; i++)
    assert_last_prefetch (bufs[i], MEMRES_LOCATION_DEVICE, 0);

  /* the data survives the trips */
  mt_write_pattern (bufs[1], 0, MiB, 5, stream);
  prefetch_ok (bufs[1], loc (MEMRES_LOCATION_HOST, 0), stream);
  mt_sync_ok (stream);
  mt_assert_pattern (memres_buffer_get_pointer (bufs[1]), MiB, 5);

  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_fake_call_count ("cuMemPrefetchBatchAsync"), ==, 3);
    }

  for (guint i = 0; i < 3; i++)
    mt_close_ok (bufs[i], stream);
  mt_sync_ok (stream);
  destroy_stream (stream);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* The same on a buffer of a managed pool. */
static void
test_prefetch_pool (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;

  if (!require_managed (TRUE))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("managed:pool=new");
  buf = mt_alloc_ok (mr, 2 * MiB, NULL);
  prefetch_ok (buf, loc (MEMRES_LOCATION_DEVICE, 0), NULL);
  assert_last_prefetch (buf, MEMRES_LOCATION_DEVICE, 0);
  prefetch_ok (buf, loc (MEMRES_LOCATION_HOST, 0), NULL);
  assert_last_prefetch (buf, MEMRES_LOCATION_HOST, 0);
  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static gboolean
accessed_by_contains (MemresBuffer *buf, MemresLocationType type, gint id, guint *n)
{
  g_autoptr (GError) error = NULL;
  g_autofree MemresLocation *list = NULL;
  gboolean found = FALSE;

  g_assert_true (memres_buffer_get_accessed_by (buf, &list, n, &error));
  g_assert_no_error (error);
  g_assert_true ((*n == 0) == (list == NULL));
  for (guint i = 0; i < *n; i++)
    if (list[i].type == type && list[i].id == id)
      found = TRUE;
  return found;
}

/* Each advice set, read back, and undone. On the real driver, advice on pool-allocated managed
 * memory may be refused (the H200's driver 580 said CUDA_ERROR_NOT_SUPPORTED): memres reports
 * that error as it is, and the test of a pool stops there. */
static void
advice (const char *spec, gboolean pool)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  MemresBuffer *buf = mt_alloc_ok (mr, MiB, NULL);
  MemresLocation where;
  gboolean mostly = TRUE;
  guint n = 99;
  int numa = mt_device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);

  g_test_message ("%s", spec);
  mt_sync_ok (NULL);
  MT_CHECK (memres_buffer_get_read_mostly (buf, &mostly, &error));
  g_assert_false (mostly);
  if (!memres_buffer_set_read_mostly (buf, TRUE, &error) && pool && !mt_driver_is_fake ()
      && g_error_matches (error, MEMRES_CUDA_ERROR, CUDA_ERROR_NOT_SUPPORTED))
    {
      g_test_skip_printf ("%s: the driver refuses advice on pool memory: %s", spec, error->message);
      mt_close_ok (buf, NULL);
      return;
    }
  g_assert_no_error (error);
  MT_CHECK (memres_buffer_get_read_mostly (buf, &mostly, &error));
  g_assert_true (mostly);
  MT_CHECK (memres_buffer_set_read_mostly (buf, FALSE, &error));
  MT_CHECK (memres_buffer_get_read_mostly (buf, &mostly, &error));
  g_assert_false (mostly);
  g_assert_no_error (error);

  where = loc (MEMRES_LOCATION_DEVICE, 0);
  MT_CHECK (memres_buffer_set_preferred_location (buf, &where, &error));
  assert_preferred (buf, MEMRES_LOCATION_DEVICE, 0);
  where = loc (MEMRES_LOCATION_HOST, 0);
  MT_CHECK (memres_buffer_set_preferred_location (buf, &where, &error));
  assert_preferred (buf, MEMRES_LOCATION_HOST, 0);
  if (numa >= 0)
    {
      where = loc (MEMRES_LOCATION_HOST_NUMA, numa);
      MT_CHECK (memres_buffer_set_preferred_location (buf, &where, &error));
      assert_preferred_numa (buf, numa);
    }
  MT_CHECK (memres_buffer_set_preferred_location (buf, NULL, &error));
  assert_preferred (buf, MEMRES_LOCATION_NONE, 0);

  g_assert_false (accessed_by_contains (buf, MEMRES_LOCATION_DEVICE, 0, &n));
  g_assert_cmpuint (n, ==, 0);
  where = loc (MEMRES_LOCATION_DEVICE, 0);
  MT_CHECK (memres_buffer_add_accessed_by (buf, &where, &error));
  g_assert_true (accessed_by_contains (buf, MEMRES_LOCATION_DEVICE, 0, &n));
  g_assert_cmpuint (n, ==, 1);
  MT_CHECK (memres_buffer_remove_accessed_by (buf, &where, &error));
  g_assert_false (accessed_by_contains (buf, MEMRES_LOCATION_DEVICE, 0, &n));
  g_assert_cmpuint (n, ==, 0);

  mt_close_ok (buf, NULL);
}

static void
test_advice (void)
{
  FakeCudaCounts base;

  if (!require_managed (FALSE))
    return;
  mt_counts_snapshot (&base);
  advice ("managed:pool=none", FALSE);
  advice ("managed:pool=none,attach=host", FALSE);
  mt_assert_fake_counts_equal (&base);
}

static void
test_advice_pool (void)
{
  FakeCudaCounts base;

  if (!require_managed (TRUE))
    return;
  mt_counts_snapshot (&base);
  advice ("managed", TRUE);
  advice ("managed:pool=new", TRUE);
  mt_sync_ok (NULL);
  mt_assert_fake_counts_equal (&base);
}

/* preferred_location with pool=none: every buffer is advised so. */
static void
test_preferred_option (void)
{
  g_autoptr (MemresResource) dev = NULL, host = NULL, numa = NULL;
  MemresBuffer *buf;
  FakeCudaCounts base;
  int node;

  if (!require_managed (FALSE))
    return;
  mt_counts_snapshot (&base);
  dev = mt_new_ok ("managed:pool=none,preferred_location=device");
  buf = mt_alloc_ok (dev, MiB, NULL);
  assert_preferred (buf, MEMRES_LOCATION_DEVICE, 0);
  mt_close_ok (buf, NULL);
  host = mt_new_ok ("managed:pool=none,preferred_location=host");
  buf = mt_alloc_ok (host, MiB, NULL);
  assert_preferred (buf, MEMRES_LOCATION_HOST, 0);
  mt_close_ok (buf, NULL);
  node = mt_device_attribute (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
  if (node >= 0)
    {
      g_autoptr (GError) error = NULL;

      /* no numa_id: the device's host NUMA node, read back from every buffer; a driver that
       * does not keep it (the 580 driver on a one-node host) makes creation fail, and so does
       * the fake told to behave so */
      numa = memres_resource_new ("managed:pool=none,preferred_location=host_numa", &error);
      if (numa == NULL)
        {
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
          g_assert_nonnull (strstr (error->message, "does not keep it"));
          g_assert_false (mt_driver_is_fake ());
          g_test_message ("the driver does not keep a host NUMA preference: %s", error->message);
        }
      else
        {
          buf = mt_alloc_ok (numa, MiB, NULL);
          assert_preferred (buf, MEMRES_LOCATION_HOST_NUMA, node);
          mt_close_ok (buf, NULL);
        }
      if (mt_driver_is_fake ())
        {
          g_clear_error (&error);
          g_setenv ("FAKECUDA_NO_HOST_NUMA_PREFERENCE", "1", TRUE);
          g_assert_null (
              memres_resource_new ("managed:pool=none,preferred_location=host_numa", &error));
          g_unsetenv ("FAKECUDA_NO_HOST_NUMA_PREFERENCE");
          g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
          g_assert_nonnull (strstr (error->message, "reads back as preferring none"));
        }
    }
  g_clear_pointer (&dev, memres_resource_unref);
  g_clear_pointer (&host, memres_resource_unref);
  g_clear_pointer (&numa, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* Discard, and discard with prefetch (CUDA 13 entry points). */
static void
test_discard (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  const MemresCudaDriver *drv;
  MemresLocation where = { MEMRES_LOCATION_DEVICE, 0 };
  MemresBuffer *buf;
  FakeCudaCounts base;

  if (!require_managed (FALSE))
    return;
  drv = memres_cuda_get_driver (NULL);
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("managed:pool=none");
  buf = mt_alloc_ok (mr, 2 * MiB, NULL);
  mt_write_pattern (buf, 0, 2 * MiB, 3, NULL);
  if (drv->cuMemDiscardBatchAsync == NULL)
    {
      g_assert_false (memres_buffer_discard (buf, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
    }
  else
    {
      g_assert_true (memres_buffer_discard (buf, NULL, &error));
      g_assert_no_error (error);
    }
  if (drv->cuMemDiscardAndPrefetchBatchAsync == NULL)
    {
      g_assert_false (memres_buffer_discard_and_prefetch (buf, &where, NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
      g_clear_error (&error);
    }
  else
    {
      g_assert_true (memres_buffer_discard_and_prefetch (buf, &where, NULL, &error));
      g_assert_no_error (error);
      assert_last_prefetch (buf, MEMRES_LOCATION_DEVICE, 0);
    }
  /* the legacy stream named explicitly goes the same way as NULL */
  if (drv->cuMemDiscardBatchAsync != NULL)
    {
      g_assert_true (memres_buffer_discard (buf, MEMRES_STREAM_LEGACY, &error));
      g_assert_no_error (error);
    }
  /* written again after the discard, the memory holds what was written */
  mt_write_pattern (buf, 0, 2 * MiB, 4, NULL);
  mt_check_pattern (buf, 0, 2 * MiB, 4, NULL);
  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

#define ASSERT_FAILS(call, code)                                                                   \
  G_STMT_START                                                                                     \
  {                                                                                                \
    g_autoptr (GError) e_ = NULL;                                                                  \
    GError **error = &e_;                                                                          \
    g_assert_false (call);                                                                         \
    g_assert_error (e_, MEMRES_ERROR, (gint) (code));                                              \
  }                                                                                                \
  G_STMT_END

/* Every function of memres-managed.h refuses a buffer that is not managed. */
static void
assert_refused (MemresBuffer *buf, MemresError code)
{
  MemresLocation where = { MEMRES_LOCATION_DEVICE, 0 }, out;
  MemresLocation *list = NULL;
  gboolean b;
  guint n;

  g_assert_false (memres_buffer_is_managed (buf));
  ASSERT_FAILS (memres_buffer_set_read_mostly (buf, TRUE, error), code);
  ASSERT_FAILS (memres_buffer_get_read_mostly (buf, &b, error), code);
  ASSERT_FAILS (memres_buffer_set_preferred_location (buf, &where, error), code);
  ASSERT_FAILS (memres_buffer_set_preferred_location (buf, NULL, error), code);
  ASSERT_FAILS (memres_buffer_get_preferred_location (buf, &out, error), code);
  ASSERT_FAILS (memres_buffer_add_accessed_by (buf, &where, error), code);
  ASSERT_FAILS (memres_buffer_remove_accessed_by (buf, &where, error), code);
  ASSERT_FAILS (memres_buffer_get_accessed_by (buf, &list, &n, error), code);
  g_assert_null (list);
  ASSERT_FAILS (memres_buffer_prefetch (buf, &where, NULL, error), code);
  ASSERT_FAILS (memres_buffers_prefetch (&buf, 1, &where, 1, NULL, error), code);
  ASSERT_FAILS (memres_buffer_get_last_prefetch_location (buf, &out, error), code);
  ASSERT_FAILS (memres_buffer_discard (buf, NULL, error), code);
  ASSERT_FAILS (memres_buffer_discard_and_prefetch (buf, &where, NULL, error), code);
}

static void
test_not_managed (void)
{
  g_autoptr (MemresResource) host = NULL, dmr = NULL, mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *managed, *pair[2];
  MemresLocation where = { MEMRES_LOCATION_DEVICE, 0 };
  guint8 bytes[64];

  if (!require_managed (FALSE))
    return;
  host = mt_new_ok ("host");
  buf = mt_alloc_ok (host, 4096, NULL);
  assert_refused (buf, MEMRES_ERROR_INVALID_ARGUMENT);
  mt_close_ok (buf, NULL);

  dmr = mt_new_ok ("dmr");
  buf = mt_alloc_ok (dmr, MiB, NULL);
  assert_refused (buf, MEMRES_ERROR_INVALID_ARGUMENT);

  /* a batch with one buffer that is not managed does nothing at all */
  mr = mt_new_ok ("managed:pool=none");
  managed = mt_alloc_ok (mr, MiB, NULL);
  pair[0] = managed;
  pair[1] = buf;
  ASSERT_FAILS (memres_buffers_prefetch (pair, 2, &where, 1, NULL, error),
                MEMRES_ERROR_INVALID_ARGUMENT);
  assert_last_prefetch (managed, MEMRES_LOCATION_NONE, 0);
  mt_close_ok (buf, NULL);

  buf = memres_buffer_new_for_pointer (bytes, sizeof bytes, -1, MEMRES_MEMORY_HOST_ACCESSIBLE, NULL,
                                       NULL, &error);
  g_assert_no_error (error);
  assert_refused (buf, MEMRES_ERROR_INVALID_ARGUMENT);
  mt_close_ok (buf, NULL);

  /* a closed managed buffer */
  buf = mt_alloc_ok (mr, MiB, NULL);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  assert_refused (buf, MEMRES_ERROR_CLOSED);
  memres_buffer_unref (buf);
  mt_close_ok (managed, NULL);
}

/* Locations that do not exist or do not fit the call; batches that do not add up. */
static void
test_bad_locations (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *buf, *bufs[2];
  MemresLocation where, two[2] = { { MEMRES_LOCATION_HOST, 0 }, { MEMRES_LOCATION_HOST, 0 } };
  FakeCudaCounts base;

  if (!require_managed (FALSE))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("managed:pool=none");
  buf = mt_alloc_ok (mr, MiB, NULL);

  where = loc (MEMRES_LOCATION_DEVICE, 99);
  ASSERT_FAILS (memres_buffer_prefetch (buf, &where, NULL, error), MEMRES_ERROR_NO_DEVICE);
  ASSERT_FAILS (memres_buffer_set_preferred_location (buf, &where, error), MEMRES_ERROR_NO_DEVICE);
  ASSERT_FAILS (memres_buffer_add_accessed_by (buf, &where, error), MEMRES_ERROR_NO_DEVICE);
  /* a negative ordinal is bad input, as memres_resource_get_default (-5) and
   * memres_buffer_new_for_pointer() with device -2 say; only a device the driver does not have
   * is NO_DEVICE */
  for (int id = -1; id >= -2; id--)
    {
      g_autofree char *want = NULL;
      GError *e = NULL;

      where = loc (MEMRES_LOCATION_DEVICE, id);
      want = g_strdup_printf ("prefetch: device %d: a device ordinal is 0 or more (the host is "
                              "MEMRES_LOCATION_HOST)",
                              id);
      g_assert_false (memres_buffer_prefetch (buf, &where, NULL, &e));
      g_assert_error (e, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_assert_cmpstr (e->message, ==, want);
      g_clear_error (&e);
      ASSERT_FAILS (memres_buffer_set_preferred_location (buf, &where, error),
                    MEMRES_ERROR_INVALID_ARGUMENT);
      ASSERT_FAILS (memres_buffer_add_accessed_by (buf, &where, error),
                    MEMRES_ERROR_INVALID_ARGUMENT);
      ASSERT_FAILS (memres_buffer_remove_accessed_by (buf, &where, error),
                    MEMRES_ERROR_INVALID_ARGUMENT);
      ASSERT_FAILS (memres_buffers_prefetch (&buf, 1, &where, 1, NULL, error),
                    MEMRES_ERROR_INVALID_ARGUMENT);
    }
  assert_last_prefetch (buf, MEMRES_LOCATION_NONE, 0);
  where = loc (MEMRES_LOCATION_HOST_NUMA, -3);
  ASSERT_FAILS (memres_buffer_prefetch (buf, &where, NULL, error), MEMRES_ERROR_INVALID_ARGUMENT);
  where = loc (MEMRES_LOCATION_HOST_NUMA, 0);
  ASSERT_FAILS (memres_buffer_add_accessed_by (buf, &where, error), MEMRES_ERROR_INVALID_ARGUMENT);
  where = loc (MEMRES_LOCATION_HOST_NUMA_CURRENT, 0);
  ASSERT_FAILS (memres_buffer_add_accessed_by (buf, &where, error), MEMRES_ERROR_INVALID_ARGUMENT);
  where = loc (MEMRES_LOCATION_NONE, 0);
  ASSERT_FAILS (memres_buffer_prefetch (buf, &where, NULL, error), MEMRES_ERROR_INVALID_ARGUMENT);
  ASSERT_FAILS (memres_buffer_set_preferred_location (buf, &where, error),
                MEMRES_ERROR_INVALID_ARGUMENT);
  where = loc ((MemresLocationType) 42, 0);
  ASSERT_FAILS (memres_buffer_prefetch (buf, &where, NULL, error), MEMRES_ERROR_INVALID_ARGUMENT);
  ASSERT_FAILS (memres_buffer_prefetch (buf, NULL, NULL, error), MEMRES_ERROR_INVALID_ARGUMENT);
  ASSERT_FAILS (memres_buffer_add_accessed_by (buf, NULL, error), MEMRES_ERROR_INVALID_ARGUMENT);

  bufs[0] = buf;
  bufs[1] = buf;
  ASSERT_FAILS (memres_buffers_prefetch (bufs, 0, two, 1, NULL, error),
                MEMRES_ERROR_INVALID_ARGUMENT);
  ASSERT_FAILS (memres_buffers_prefetch (bufs, 2, two, 0, NULL, error),
                MEMRES_ERROR_INVALID_ARGUMENT);
  ASSERT_FAILS (memres_buffers_prefetch (bufs, 1, two, 2, NULL, error),
                MEMRES_ERROR_INVALID_ARGUMENT);
  ASSERT_FAILS (memres_buffers_prefetch (bufs, 2, NULL, 2, NULL, error),
                MEMRES_ERROR_INVALID_ARGUMENT);
  assert_last_prefetch (buf, MEMRES_LOCATION_NONE, 0);

  mt_close_ok (buf, NULL);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* An empty buffer has nothing to advise or move: every call succeeds without the driver. */
static void
test_zero_size (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresLocation where = { MEMRES_LOCATION_DEVICE, 0 }, *list = NULL;
  MemresBuffer *buf;
  gboolean mostly = TRUE;
  guint n = 7;
  long calls;

  if (!require_managed (FALSE))
    return;
  mr = mt_new_ok ("managed:pool=none");
  buf = mt_alloc_ok (mr, 0, NULL);
  g_assert_true (memres_buffer_is_managed (buf));
  calls = mt_driver_is_fake () ? mt_fake_call_count ("cuMemAdvise") : 0;
  g_assert_true (memres_buffer_set_read_mostly (buf, TRUE, &error));
  g_assert_true (memres_buffer_get_read_mostly (buf, &mostly, &error));
  g_assert_false (mostly);
  g_assert_true (memres_buffer_add_accessed_by (buf, &where, &error));
  g_assert_true (memres_buffer_get_accessed_by (buf, &list, &n, &error));
  g_assert_null (list);
  g_assert_cmpuint (n, ==, 0);
  g_assert_true (memres_buffer_prefetch (buf, &where, NULL, &error));
  g_assert_true (memres_buffer_discard (buf, NULL, &error));
  g_assert_no_error (error);
  assert_last_prefetch (buf, MEMRES_LOCATION_NONE, 0);
  assert_preferred (buf, MEMRES_LOCATION_NONE, 0);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuMemAdvise"), ==, calls);
  mt_close_ok (buf, NULL);
}

static void
free_managed (gpointer data)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);

  g_assert_cmpint (drv->cuMemFree ((CUdeviceptr) (guintptr) data), ==, CUDA_SUCCESS);
}

/* Foreign cuMemAllocManaged memory: the driver says it is managed (flags 0), or the caller. */
static void
test_wrapped (void)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv;
  MemresLocation where = { MEMRES_LOCATION_HOST, 0 };
  FakeCudaCounts base;

  if (!require_managed (FALSE))
    return;
  drv = memres_cuda_get_driver (NULL);
  mt_counts_snapshot (&base);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  for (guint flags = 0; flags < 2; flags++)
    {
      CUdeviceptr ptr = 0;
      MemresBuffer *buf;

      g_assert_cmpint (drv->cuMemAllocManaged (&ptr, MiB, CU_MEM_ATTACH_GLOBAL), ==, CUDA_SUCCESS);
      buf = memres_buffer_new_for_pointer ((gpointer) (guintptr) ptr, MiB, 0,
                                           flags ? MEMRES_MEMORY_MANAGED : 0, free_managed,
                                           (gpointer) (guintptr) ptr, &error);
      g_assert_no_error (error);
      g_assert_true (memres_buffer_is_managed (buf));
      g_assert_true (memres_buffer_is_host_accessible (buf));
      g_assert_true (memres_buffer_is_device_accessible (buf));
      prefetch_ok (buf, where, NULL);
      assert_last_prefetch (buf, MEMRES_LOCATION_HOST, 0);
      mt_close_ok (buf, NULL);
    }
  mt_assert_fake_counts_equal (&base);
}

static void
test_options_invalid (void)
{
  if (!mt_require_devices (1))
    return;
  mt_new_fails ("managed:attach=host", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "attach");
  mt_new_fails ("managed:pool=new,attach=global", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "attach");
  mt_new_fails ("managed:pool=none,release_threshold=1MiB", MEMRES_ERROR,
                MEMRES_ERROR_INVALID_ARGUMENT, "release_threshold");
  mt_new_fails ("managed:pool=none,fallback=true", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "fallback");
  mt_new_fails ("managed:numa_id=0", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "numa_id");
  mt_new_fails ("managed:preferred_location=device,numa_id=0", MEMRES_ERROR,
                MEMRES_ERROR_INVALID_ARGUMENT, "numa_id");
  mt_new_fails ("managed:preferred_location=gpu", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "preferred_location");
  mt_new_fails ("managed:pool=old", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "pool");
  mt_new_fails ("managed:max_size=1GiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "max_size");
  mt_new_fails ("managed:device=99", MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  mt_new_fails ("managed:pool=none,device=99", MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
}

/* No concurrent managed access: the pools are refused naming the device and the attribute,
 * fallback=true takes cuMemAllocManaged, and the process is warned once (in a subprocess, whose
 * stderr shows the warnings: structured logging bypasses g_test_expect_message()). */
static void
test_no_concurrent_access (void)
{
  g_autoptr (MemresResource) mr = NULL, again = NULL;
  MtSavedAttribute saved;
  FakeCudaCounts base;

  if (!mt_require_devices (1) || !mt_require_fake ("turning attributes off needs the fake"))
    return;
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      g_test_trap_assert_stderr ("*device 0*no concurrent managed access*unsafe*");
      g_test_trap_assert_stderr_unmatched ("*unsafe*unsafe*");
      return;
    }
  g_log_set_always_fatal (G_LOG_FATAL_MASK); /* the warning is what is tested */
  mt_counts_snapshot (&base);
  mt_override_attribute (&saved, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 0);
  mt_new_fails ("managed", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS");
  mt_new_fails ("managed:pool=new", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "device 0");
  mt_new_fails ("managed:fallback=false", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "fallback=true");
  mr = mt_new_ok ("managed:fallback=true");
  g_assert_cmphex (memres_resource_get_flags (mr), ==,
                   MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_DEVICE_ACCESSIBLE
                       | MEMRES_MEMORY_MANAGED);
  again = mt_new_ok ("managed:pool=none"); /* no second warning */
  g_clear_pointer (&mr, memres_resource_unref);
  g_clear_pointer (&again, memres_resource_unref);
  mt_restore_attribute (&saved);
  mt_assert_fake_counts_equal (&base);
}

static void
test_no_pools (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MtSavedAttribute pools, managed;
  FakeCudaCounts base;

  if (!mt_require_devices (1) || !mt_require_fake ("turning attributes off needs the fake"))
    return;
  mt_counts_snapshot (&base);
  mt_override_attribute (&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0);
  mt_new_fails ("managed", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED");
  mr = mt_new_ok ("managed:pool=new,fallback=true");
  g_assert_false (memres_resource_get_flags (mr) & MEMRES_MEMORY_STREAM_ORDERED);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_restore_attribute (&pools);

  mt_override_attribute (&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0);
  mt_new_fails ("managed:pool=none", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                "CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY");
  mt_new_fails ("managed:fallback=true", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "device 0");
  mt_restore_attribute (&managed);
  mt_assert_fake_counts_equal (&base);
}

static void
get_stats (MemresResource *mr, MemresStats *stats)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (memres_resource_get_stats (mr, stats, &error));
  g_assert_no_error (error);
}

static void
test_stats (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *b;
  MemresStats stats;

  if (!require_managed (FALSE))
    return;
  mr = mt_new_ok ("managed:pool=none");
  a = mt_alloc_ok (mr, MiB, NULL);
  b = mt_alloc_ok (mr, 2 * MiB, NULL);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 3 * MiB);
  g_assert_cmpuint (stats.reserved_current, ==, 3 * MiB);
  g_assert_cmpuint (stats.n_buffers, ==, 2);
  mt_close_ok (b, NULL);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, MiB);
  g_assert_cmpuint (stats.used_high, ==, 3 * MiB);
  g_assert_true (memres_resource_reset_stats (mr, &error));
  g_assert_no_error (error);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_high, ==, MiB);
  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
  mt_close_ok (a, NULL);
}

static void
test_stats_pool (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a;
  MemresStats stats;

  if (!require_managed (TRUE))
    return;
  mr = mt_new_ok ("managed:pool=new,release_threshold=0");
  a = mt_alloc_ok (mr, 2 * MiB, NULL);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, >=, 2 * MiB);
  g_assert_cmpuint (stats.reserved_current, >=, stats.used_current);
  mt_close_ok (a, NULL);
  mt_sync_ok (NULL);
  g_assert_true (memres_resource_trim (mr, 0, &error));
  g_assert_no_error (error);
  get_stats (mr, &stats);
  g_assert_cmpuint (stats.used_current, ==, 0);
  g_assert_cmpuint (stats.reserved_current, ==, 0);
}

/* Fault sweeps: every driver call of creation, allocation and close fails once in turn. */
static void
sweep (const char *spec)
{
  /* A failing free cannot be undone (creation frees the page that checks a preferred
   * location of pool=none); a missing device name is only cosmetic; a failing pop leaves
   * nothing allocated. */
  static const char *const frees[] = { "cuMemFreeAsync", "cuMemFree", "cuCtxPopCurrent", NULL };
  static const char *const tolerated[] = { "cuDeviceGetName", "cuMemFree", NULL };
  static const char *const pops[] = { "cuCtxPopCurrent", NULL }; /* nothing to undo */
  g_autofree char *what = NULL;
  MtSweepData d = { .spec = spec, .size = 2 * MiB };
  int n;

  g_assert_true (mt_op_new (&d, NULL));
  g_assert_true (mt_op_allocate_close (&d, NULL));
  mt_undo_new (&d);

  what = g_strdup_printf ("create %s", spec);
  n = mt_fault_sweep (what, mt_op_new, mt_undo_new, &d, CUDA_ERROR_NOT_PERMITTED, tolerated);
  g_assert_cmpint (n, >, 0);
  d.mr = mt_new_ok (spec);
  g_free (what);
  what = g_strdup_printf ("allocate %s", spec);
  n = mt_fault_sweep (what, mt_op_allocate, mt_undo_allocate, &d, CUDA_ERROR_NOT_PERMITTED, pops);
  g_assert_cmpint (n, >, 0);
  g_free (what);
  what = g_strdup_printf ("allocate+close %s", spec);
  n = mt_fault_sweep (what, mt_op_allocate_close, NULL, &d, CUDA_ERROR_NOT_PERMITTED, frees);
  g_assert_cmpint (n, >, 0);
  mt_undo_new (&d);
}

static void
test_fault_sweep (void)
{
  FakeCudaCounts base;

  if (!require_managed (TRUE) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  sweep ("managed");
  sweep ("managed:pool=new,preferred_location=host,release_threshold=1MiB");
  sweep ("managed:pool=none");
  sweep ("managed:pool=none,preferred_location=host_numa,attach=host");
  mt_assert_fake_counts_equal (&base);
}

/* At process exit (the driver deinitialized) pool=none's free and the core's wait before it
 * answer CUDA_ERROR_DEINITIALIZED: the close succeeds, as for the other kinds. */
static void
test_none_exit (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  CUdeviceptr address;
  FakeCudaCounts base;

  if (!mt_require_fake ("injects CUDA_ERROR_DEINITIALIZED"))
    return;
  if (!require_managed (FALSE))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("managed:pool=none");
  buf = mt_alloc_ok (mr, MiB, NULL);
  address = (CUdeviceptr) memres_buffer_get_address (buf);
  mt_fake_fail_call ("cuStreamSynchronize", 1, CUDA_ERROR_DEINITIALIZED);
  mt_fake_fail_call ("cuMemFree", 1, CUDA_ERROR_DEINITIALIZED);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  mt_fake_reset_faults ();
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_closed (buf));
  memres_buffer_unref (buf);
  /* what the exit would have done */
  g_assert_cmpint (memres_cuda_get_driver (NULL)->cuMemFree (address), ==, CUDA_SUCCESS);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

/* Two devices (issue 20; one GPU skips naming device 1): device 1 joins the accessed-by set of
 * a managed buffer, the buffer is prefetched to device 1 on a stream of device 1, written and
 * read back there, and the host then reads device 1's bytes; device 1 leaves the set again. */
static void
test_peer_accessed_by (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  const MemresLocation one = loc (MEMRES_LOCATION_DEVICE, 1);
  MemresBuffer *buf;
  CUstream s1;
  guint n = 0;
  gint concurrent = 0;

  if (!require_managed (FALSE) || !mt_require_devices (2))
    return;
  g_assert_true (memres_cuda_get_device_attribute (1, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                                                   &concurrent, &error));
  g_assert_no_error (error);
  if (!concurrent)
    {
      g_test_skip ("device 1 has no concurrent managed access");
      return;
    }
  mr = mt_new_ok ("managed:pool=none");
  buf = mt_alloc_ok (mr, MiB, NULL);
  g_assert_false (accessed_by_contains (buf, MEMRES_LOCATION_DEVICE, 1, &n));
  g_assert_true (memres_buffer_add_accessed_by (buf, &one, &error));
  g_assert_no_error (error);
  g_assert_true (accessed_by_contains (buf, MEMRES_LOCATION_DEVICE, 1, &n));
  s1 = mt_stream_new_on (1);
  prefetch_ok (buf, one, s1);
  mt_sync_ok (s1);
  assert_last_prefetch (buf, MEMRES_LOCATION_DEVICE, 1);
  mt_fill_byte_ok (buf, 0x6d, s1);
  mt_assert_bytes (buf, 0x6d, s1);
  mt_sync_ok (s1);
  g_assert_cmpint (((const guint8 *) memres_buffer_get_pointer (buf))[MiB - 1], ==, 0x6d);
  g_assert_true (memres_buffer_remove_accessed_by (buf, &one, &error));
  g_assert_no_error (error);
  g_assert_false (accessed_by_contains (buf, MEMRES_LOCATION_DEVICE, 1, &n));
  mt_close_ok (buf, NULL);
  mt_sync_ok (NULL);
  destroy_stream ((MemresStream) s1);
}

int
main (int argc, char **argv)
{
  /* Against the fake, two devices for the peer test (read at cuInit) */
  g_setenv ("FAKECUDA_DEVICES", "2", FALSE);
  mt_init (&argc, &argv);

  g_test_add_func ("/managed/pool/roundtrip", test_roundtrip_pools);
  g_test_add_func ("/managed/pool/prefetch", test_prefetch_pool);
  g_test_add_func ("/managed/pool/advice", test_advice_pool);
  g_test_add_func ("/managed/pool/stats", test_stats_pool);
  g_test_add_func ("/managed/none/roundtrip", test_roundtrip_none);
  g_test_add_func ("/managed/none/stats", test_stats);
  g_test_add_func ("/managed/none/exit", test_none_exit);
  g_test_add_func ("/managed/prefetch", test_prefetch);
  g_test_add_func ("/managed/advice", test_advice);
  g_test_add_func ("/managed/preferred-option", test_preferred_option);
  g_test_add_func ("/managed/discard", test_discard);
  g_test_add_func ("/managed/not-managed", test_not_managed);
  g_test_add_func ("/managed/bad-locations", test_bad_locations);
  g_test_add_func ("/managed/zero-size", test_zero_size);
  g_test_add_func ("/managed/wrapped", test_wrapped);
  g_test_add_func ("/managed/options/invalid", test_options_invalid);
  g_test_add_func ("/managed/unsupported/no-concurrent-access", test_no_concurrent_access);
  g_test_add_func ("/managed/unsupported/no-pools", test_no_pools);
  g_test_add_func ("/managed/fault/sweep", test_fault_sweep);
  g_test_add_func ("/managed/peer/accessed-by", test_peer_accessed_by);

  return g_test_run ();
}

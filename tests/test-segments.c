/* test-segments.c: segment events and memres_lookup() (memres-segments.h): the events of `cache`
 * over host memory (suite core) and of `vmm` and `cache` over dmr and vmm (suites fake and gpu),
 * in order with their exact ranges; lookups at a segment's base, inside it, at its last byte,
 * one byte past it and after its unmap; subscribers told the existing segments; subscribers and
 * lookups in threads; bad input; and failures (a grow by move, a shrink, a give-back to the
 * upstream) that must leave the index as the memory is; callbacks that allocate from the resource
 * and close its buffers (events raised inside events) and look their segment up, on every kind
 * with segments (a cache's block across two arena granules answers as itself, the shorter). */
#include "testutil.h"

#include <string.h>

#include "segment-check.h"

static void
trim (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;

  MT_CHECK (memres_resource_trim (mr, 0, &error));
}

/* ---- cache over host (no driver) ------------------------------------------------------------- */

/* A chunk taken from the upstream is a segment of the cache from the allocation that took it
 * until trim gives it back; a request above max_block is one of its own. */
static void
test_cache_host_events (void)
{
  MemresResource *mr = mt_new_ok ("cache:chunk=64KiB,max_block=1MiB>host");
  Recorder *r = recorder_new ();
  MemresBuffer *buf, *big;
  guint64 base, big_base;
  guint id;

  g_assert_true (memres_kind_get_flags (memres_resource_get_kind (mr)) & MEMRES_KIND_SEGMENTS);
  id = subscribe (mr, r);
  g_assert_cmpuint (r->recs->len, ==, 0);

  buf = mt_alloc_ok (mr, 256, NULL);
  base = memres_buffer_get_address (buf);
  g_assert_cmpuint (r->recs->len, ==, 1);
  /* the first block of a new chunk is at the chunk's start */
  assert_rec (r, 0, mr, MEMRES_SEGMENT_MAPPED, base, 64 * 1024, 0);
  g_assert_cmpint (g_array_index (r->recs, Rec, 0).seg.device, ==, -1);
  g_assert_cmpuint (g_array_index (r->recs, Rec, 0).seg.handle_types, ==, 0);
  assert_segment_lookups (mr, base, 64 * 1024);

  /* another block of the same chunk: no event */
  mt_close_ok (mt_alloc_ok (mr, 256, NULL), NULL);
  g_assert_cmpuint (r->recs->len, ==, 1);

  /* above max_block: an upstream allocation of the buffer's own, given back at close */
  big = mt_alloc_ok (mr, 2 * 1024 * 1024, NULL);
  big_base = memres_buffer_get_address (big);
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_MAPPED, big_base, 2 * 1024 * 1024, 0);
  assert_segment_lookups (mr, big_base, 2 * 1024 * 1024);
  mt_close_ok (big, NULL);
  g_assert_cmpuint (r->recs->len, ==, 3);
  assert_rec (r, 2, mr, MEMRES_SEGMENT_UNMAPPING, big_base, 2 * 1024 * 1024, 0);
  assert_missing (big_base);

  /* the chunk stays while cached, and goes at trim */
  mt_close_ok (buf, NULL);
  g_assert_cmpuint (r->recs->len, ==, 3);
  assert_found (base, mr, base, 64 * 1024);
  trim (mr);
  g_assert_cmpuint (r->recs->len, ==, 4);
  assert_rec (r, 3, mr, MEMRES_SEGMENT_UNMAPPING, base, 64 * 1024, 0);
  assert_missing (base);
  assert_missing (base + 100);

  unsubscribe (mr, id);
  g_assert_cmpint (r->destroyed, ==, 1);
  memres_resource_unref (mr);
  recorder_free (r);
}

/* A new subscriber is told the segments that exist as mapped, in address order, before the
 * call returns; after unsubscribing it hears nothing more. */
static void
test_cache_host_replay (void)
{
  MemresResource *mr = mt_new_ok ("cache:chunk=64KiB>host");
  Recorder *r = recorder_new ();
  MemresBuffer *a, *b;
  guint64 lo, hi;
  guint id;

  a = mt_alloc_ok (mr, 256, NULL);
  b = mt_alloc_ok (mr, 1024, NULL); /* another class: another chunk */
  lo = MIN (memres_buffer_get_address (a), memres_buffer_get_address (b));
  hi = MAX (memres_buffer_get_address (a), memres_buffer_get_address (b));

  id = subscribe (mr, r);
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_MAPPED, lo, 64 * 1024, 0);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_MAPPED, hi, 64 * 1024, 0);

  unsubscribe (mr, id);
  g_assert_cmpint (r->destroyed, ==, 1);
  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  trim (mr);
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_missing (lo);

  /* subscriptions left at the resource's end are dropped with it */
  id = subscribe (mr, r);
  g_assert_cmpuint (r->recs->len, ==, 2);
  memres_resource_unref (mr);
  g_assert_cmpint (r->destroyed, ==, 2);
  recorder_free (r);
}

/* Through adaptors that pass allocations, the subscription follows the cache below; the events
 * name the layer that raised them. */
static void
test_pass_through (void)
{
  MemresResource *top = mt_new_ok ("limit:max=1GiB>stats>cache:chunk=64KiB>host");
  MemresResource *cache = memres_resource_get_upstream (memres_resource_get_upstream (top));
  Recorder *r = recorder_new ();
  MemresBuffer *buf;
  guint id;

  g_assert_cmpstr (memres_resource_get_kind_name (cache), ==, "cache");
  id = subscribe (top, r);
  buf = mt_alloc_ok (top, 100, NULL);
  g_assert_cmpuint (r->recs->len, ==, 1);
  assert_rec (r, 0, cache, MEMRES_SEGMENT_MAPPED, memres_buffer_get_address (buf), 64 * 1024, 0);
  assert_found (memres_buffer_get_address (buf) + 10, cache, memres_buffer_get_address (buf),
                64 * 1024);
  mt_close_ok (buf, NULL);
  /* unsubscribing through the top finds it too */
  unsubscribe (top, id);
  memres_resource_unref (top);
  g_assert_cmpint (r->destroyed, ==, 1);
  recorder_free (r);
}

/* A cache over a cache: the upper one's chunks are blocks carved from the lower one's chunk, so
 * its segments lie inside the lower one's; a lookup answers the innermost segment holding the
 * address, the lower one's between and after the upper chunks (the walk up the parents). */
static void
test_nested_caches (void)
{
  MemresResource *top = mt_new_ok ("cache:chunk=64KiB>cache:chunk=1MiB,max_block=1MiB>host");
  MemresResource *lower = memres_resource_get_upstream (top);
  Recorder *r = recorder_new ();
  MemresBuffer *a, *b;
  guint64 l, ua, ub;

  subscribe (lower, r);
  a = mt_alloc_ok (top, 256, NULL);
  g_assert_cmpuint (r->recs->len, ==, 1);
  l = g_array_index (r->recs, Rec, 0).seg.base;
  assert_rec (r, 0, lower, MEMRES_SEGMENT_MAPPED, l, 1024 * 1024, 0);
  b = mt_alloc_ok (top, 1024, NULL);      /* another class: a second upper chunk */
  g_assert_cmpuint (r->recs->len, ==, 1); /* carved from the same lower chunk */
  ua = memres_buffer_get_address (a);
  ub = memres_buffer_get_address (b);
  g_assert_cmphex (ua, >=, l);
  g_assert_cmphex (ub, >=, l);
  g_assert_cmphex (MAX (ua, ub) + 64 * 1024, <=, l + 1024 * 1024);

  assert_found (ua, top, ua, 64 * 1024);
  assert_found (ua + 64 * 1024 - 1, top, ua, 64 * 1024);
  assert_found (ub + 5, top, ub, 64 * 1024);
  /* outside both upper chunks, inside the lower one (of its 16 blocks, 2 are upper chunks) */
  for (guint64 x = l + 100; x < l + 1024 * 1024; x += 64 * 1024)
    if ((x < ua || x >= ua + 64 * 1024) && (x < ub || x >= ub + 64 * 1024))
      assert_found (x, lower, l, 1024 * 1024);
  assert_missing (l + 1024 * 1024);

  mt_close_ok (a, NULL);
  mt_close_ok (b, NULL);
  trim (top); /* down the stack: the lower cache gives its chunk back too */
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_rec (r, 1, lower, MEMRES_SEGMENT_UNMAPPING, l, 1024 * 1024, 0);
  assert_missing (ua);
  assert_missing (l);
  memres_resource_unref (top);
  g_assert_cmpint (r->destroyed, ==, 1);
  recorder_free (r);
}

/* Bad input: a clear error with its domain and code, nothing subscribed. */
static void
test_bad_input (void)
{
  MemresResource *host = mt_new_ok ("host");
  MemresResource *cache = mt_new_ok ("cache>host");
  MemresResource *stats = mt_new_ok ("stats>host");
  g_autoptr (GError) error = NULL;
  MemresLookupInfo info;
  MemresBuffer *buf;
  Recorder *r = recorder_new ();
  guint id;

  g_assert_false (memres_kind_get_flags (memres_resource_get_kind (host)) & MEMRES_KIND_SEGMENTS);
  g_assert_cmpuint (
      memres_resource_subscribe_segments (host, record, r, recorder_destroyed, &error), ==, 0);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  /* an adaptor passing allocations to a kind without segments */
  g_assert_cmpuint (memres_resource_subscribe_segments (stats, record, r, NULL, &error), ==, 0);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_resource_unsubscribe_segments (host, 1, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);

  g_assert_cmpuint (memres_resource_subscribe_segments (cache, NULL, r, recorder_destroyed, &error),
                    ==, 0);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_cmpint (r->destroyed, ==, 0); /* not called on failure */

  g_assert_false (memres_resource_unsubscribe_segments (cache, 0, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_false (memres_resource_unsubscribe_segments (cache, 123456, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* twice, and on another resource */
  id = subscribe (cache, r);
  g_assert_false (memres_resource_unsubscribe_segments (mt_new_ok ("cache>host"), id, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  unsubscribe (cache, id);
  g_assert_false (memres_resource_unsubscribe_segments (cache, id, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_clear_error (&error);
  g_assert_cmpint (r->destroyed, ==, 1);

  /* lookups: NULL, and memory of a kind without segments, are not found */
  memset (&info, 0, sizeof info);
  g_assert_false (memres_lookup (NULL, &info));
  buf = mt_alloc_ok (host, 4096, NULL);
  g_assert_false (memres_lookup (memres_buffer_get_pointer (buf), &info));
  g_assert_null (info.resource);
  mt_close_ok (buf, NULL);

  memres_resource_unref (host);
  memres_resource_unref (cache);
  memres_resource_unref (stats);
  recorder_free (r);
}

/* ---- threads --------------------------------------------------------------------------------- */

#define N_WORKERS     4
#define N_SUBSCRIBERS 2
#define ROUNDS        300

typedef struct
{
  MemresResource *mr;
  gint stop;
} Shared;

/* A subscriber that checks the order of every segment's events as they come: mapped once, then
 * grown or unmapping only for a segment it knows. */
typedef struct
{
  GMutex lock;
  GHashTable *live; /* base -> length */
  gint bad;
  guint events;
} Checker;

static void
check_event (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
             guint64 previous, gpointer data)
{
  Checker *c = data;
  gpointer key = GSIZE_TO_POINTER (seg->base);
  gboolean known;

  g_mutex_lock (&c->lock);
  known = g_hash_table_contains (c->live, key);
  c->events++;
  if (event == MEMRES_SEGMENT_MAPPED)
    {
      c->bad += known;
      g_hash_table_insert (c->live, key, GSIZE_TO_POINTER (seg->length));
    }
  else
    {
      c->bad += !known;
      g_hash_table_remove (c->live, key);
    }
  g_mutex_unlock (&c->lock);
  /* a mapped segment is found while its callbacks run */
  {
    MemresLookupInfo info;

    if (!memres_lookup (addr (seg->base + seg->length - 1), &info) || info.resource != mr
        || info.segment.base != seg->base)
      g_atomic_int_inc (&c->bad);
  }
}

static gint checkers_bad;

/* A checker's destroy notify: no callback runs any more. */
static void
checker_free (gpointer data)
{
  Checker *c = data;

  g_atomic_int_add (&checkers_bad, c->bad);
  g_hash_table_unref (c->live);
  g_mutex_clear (&c->lock);
  g_free (c);
}

static gpointer
subscriber_thread (gpointer data)
{
  Shared *s = data;
  guint rounds = 0;

  while (!g_atomic_int_get (&s->stop) || rounds < 10)
    {
      g_autoptr (GError) error = NULL;
      Checker *c = g_new0 (Checker, 1);
      guint id;

      g_mutex_init (&c->lock);
      c->live = g_hash_table_new (NULL, NULL);
      id = memres_resource_subscribe_segments (s->mr, check_event, c, checker_free, &error);
      g_assert_no_error (error);
      g_thread_yield ();
      MT_CHECK (memres_resource_unsubscribe_segments (s->mr, id, &error));
      rounds++;
    }
  return NULL;
}

static gpointer
worker_thread (gpointer data)
{
  Shared *s = data;

  for (guint i = 0; i < ROUNDS; i++)
    {
      /* above max_block: a segment of its own per buffer */
      MemresBuffer *buf = mt_alloc_ok (s->mr, 8192 + (i % 4) * 4096, NULL);
      guint64 a = memres_buffer_get_address (buf);
      MemresLookupInfo info;

      g_assert_true (memres_lookup (addr (a + 5000), &info));
      g_assert_true (info.resource == s->mr);
      g_assert_cmphex (info.segment.base, ==, a);
      g_assert_cmpuint (info.offset, ==, 5000);
      mt_close_ok (buf, NULL);
    }
  return NULL;
}

static void
test_threads (void)
{
  Shared s = { 0 };
  GThread *workers[N_WORKERS], *subs[N_SUBSCRIBERS];
  Checker whole = { 0 };
  g_autoptr (GError) error = NULL;
  guint id;

  s.mr = mt_new_ok ("cache:max_block=4KiB>host");
  g_mutex_init (&whole.lock);
  whole.live = g_hash_table_new (NULL, NULL);
  id = memres_resource_subscribe_segments (s.mr, check_event, &whole, NULL, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < N_SUBSCRIBERS; i++)
    subs[i] = g_thread_new ("subscriber", subscriber_thread, &s);
  for (guint i = 0; i < N_WORKERS; i++)
    workers[i] = g_thread_new ("worker", worker_thread, &s);
  for (guint i = 0; i < N_WORKERS; i++)
    g_thread_join (workers[i]);
  g_atomic_int_set (&s.stop, 1);
  for (guint i = 0; i < N_SUBSCRIBERS; i++)
    g_thread_join (subs[i]);
  MT_CHECK (memres_resource_unsubscribe_segments (s.mr, id, &error));

  /* every segment told mapped and then unmapping, in order, none left */
  g_assert_cmpint (whole.bad, ==, 0);
  g_assert_cmpint (g_atomic_int_get (&checkers_bad), ==, 0);
  g_assert_cmpuint (whole.events, ==, 2 * N_WORKERS * ROUNDS);
  g_assert_cmpuint (g_hash_table_size (whole.live), ==, 0);
  g_hash_table_unref (whole.live);
  g_mutex_clear (&whole.lock);
  memres_resource_unref (s.mr);
}

/* ---- device kinds (fake and GPU) ------------------------------------------------------------- */

static const MemresCudaDriver *drv;

static gboolean
require_device (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  drv = memres_cuda_get_driver (NULL);
  g_assert_nonnull (drv);
  return TRUE;
}

static MemresResource *
new_vmm (gsize g, const char *extra)
{
  g_autofree char *spec = g_strdup_printf ("vmm:chunk=%" G_GSIZE_FORMAT "%s", g, extra);

  return mt_new_ok (spec);
}

static void
resize_ok (MemresBuffer *buf, gsize size)
{
  g_autoptr (GError) error = NULL;

  MT_CHECK (memres_buffer_resize (buf, size, NULL, &error));
}

/* Reserves @size bytes at @at so that a buffer ending there cannot grow in place; 0 when the
 * driver put it elsewhere. */
static CUdeviceptr
block_at (CUdeviceptr at, gsize size)
{
  CUdeviceptr ptr = 0;

  g_assert_cmpint (drv->cuMemAddressReserve (&ptr, size, 0, at, 0), ==, CUDA_SUCCESS);
  return ptr;
}

/* A vmm buffer's mapped bytes are its segment: mapped at allocation, grown in place, moved
 * (unmapping the old, mapping the new), shrunk (unmapping, then the smaller one mapped), and
 * unmapped at close. */
static void
test_vmm_events (void)
{
  FakeCudaCounts base;
  MemresResource *mr;
  MemresBuffer *buf;
  Recorder *r;
  guint64 a, b;
  CUdeviceptr blocker;
  gsize g;
  guint id;

  if (!require_device ())
    return;
  g = mt_device_granularity ();
  mt_counts_snapshot (&base);
  mr = new_vmm (g, "");
  g_assert_true (memres_kind_get_flags (memres_resource_get_kind (mr)) & MEMRES_KIND_SEGMENTS);
  r = recorder_new ();
  id = subscribe (mr, r);

  buf = mt_alloc_ok (mr, 2 * g, NULL);
  a = memres_buffer_get_address (buf);
  g_assert_cmpuint (r->recs->len, ==, 1);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_MAPPED, a, 2 * g, 0);
  g_assert_cmpint (g_array_index (r->recs, Rec, 0).seg.device, ==, 0);
  g_assert_cmpuint (g_array_index (r->recs, Rec, 0).seg.handle_types, ==, 0);
  assert_segment_lookups (mr, a, 2 * g);

  /* in place: the range after it is free (the fake and the GPU honour the hint) */
  resize_ok (buf, 3 * g);
  if (memres_buffer_get_address (buf) == a)
    {
      g_assert_cmpuint (r->recs->len, ==, 2);
      assert_rec (r, 1, mr, MEMRES_SEGMENT_GROWN, a, 3 * g, 2 * g);
      assert_segment_lookups (mr, a, 3 * g);
    }
  else
    {
      g_test_message ("the range after the buffer was taken: it moved");
      g_assert_cmpuint (r->recs->len, ==, 3);
      assert_rec (r, 1, mr, MEMRES_SEGMENT_UNMAPPING, a, 2 * g, 0);
      a = memres_buffer_get_address (buf);
      assert_rec (r, 2, mr, MEMRES_SEGMENT_MAPPED, a, 3 * g, 0);
    }
  g_array_set_size (r->recs, 0);

  /* by move: the range after it is taken */
  blocker = block_at (a + 3 * g, g);
  if (blocker != a + 3 * g)
    {
      /* a driver that put the blocker elsewhere: nothing here to test */
      g_assert_cmpint (drv->cuMemAddressFree (blocker, g), ==, CUDA_SUCCESS);
      mt_close_ok (buf, NULL);
      unsubscribe (mr, id);
      memres_resource_unref (mr);
      recorder_free (r);
      g_test_skip ("the driver did not reserve at the address asked for");
      return;
    }
  resize_ok (buf, 4 * g);
  b = memres_buffer_get_address (buf);
  g_assert_cmphex (b, !=, a);
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_UNMAPPING, a, 3 * g, 0);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_MAPPED, b, 4 * g, 0);
  assert_missing (a);
  assert_missing (a + 3 * g - 1);
  assert_segment_lookups (mr, b, 4 * g);
  g_assert_cmpint (drv->cuMemAddressFree (blocker, g), ==, CUDA_SUCCESS);

  /* shrink */
  g_array_set_size (r->recs, 0);
  resize_ok (buf, g);
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_UNMAPPING, b, 4 * g, 0);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_MAPPED, b, g, 0);
  assert_segment_lookups (mr, b, g);

  /* close */
  g_array_set_size (r->recs, 0);
  mt_close_ok (buf, NULL);
  g_assert_cmpuint (r->recs->len, ==, 1);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_UNMAPPING, b, g, 0);
  assert_missing (b);

  unsubscribe (mr, id);
  memres_resource_unref (mr);
  recorder_free (r);
  mt_assert_fake_counts_equal (&base);
}

/* The handle types a vmm resource was made with are its segments'. */
static void
test_vmm_handle_types (void)
{
  MemresResource *mr;
  MemresBuffer *buf;
  MemresLookupInfo info;
  gsize g;

  if (!require_device ())
    return;
  g = mt_device_granularity ();
  mr = new_vmm (g, ",handle_type=posix_fd");
  buf = mt_alloc_ok (mr, g, NULL);
  g_assert_true (memres_lookup (memres_buffer_get_pointer (buf), &info));
  g_assert_cmpuint (info.segment.handle_types, ==, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  g_assert_cmpint (info.segment.device, ==, 0);
  mt_close_ok (buf, NULL);
  memres_resource_unref (mr);
}

/* Failures after an about-to-be-unmapped event that leave the memory mapped tell it mapped again,
 * and the index answers as the memory is: a grow by move whose unmap of the old range fails, a
 * shrink whose release fails. */
static void
test_vmm_faults (void)
{
  FakeCudaCounts base;
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  Recorder *r;
  CUdeviceptr blocker;
  guint64 a;
  gsize g;

  if (!require_device () || !mt_require_fake ("injects faults"))
    return;
  g = mt_device_granularity ();
  mt_counts_snapshot (&base);
  mr = new_vmm (g, "");
  r = recorder_new ();
  subscribe (mr, r);
  buf = mt_alloc_ok (mr, 2 * g, NULL);
  a = memres_buffer_get_address (buf);
  blocker = block_at (a + 2 * g, g);
  g_assert_cmphex (blocker, ==, a + 2 * g); /* the fake honours the hint */
  g_array_set_size (r->recs, 0);

  mt_fake_fail_call ("cuMemUnmap", 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_resize (buf, 4 * g, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_clear_error (&error);
  mt_fake_reset_faults ();
  g_assert_cmphex (memres_buffer_get_address (buf), ==, a);
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_UNMAPPING, a, 2 * g, 0);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_MAPPED, a, 2 * g, 0);
  assert_segment_lookups (mr, a, 2 * g);
  g_assert_cmpint (drv->cuMemAddressFree (blocker, g), ==, CUDA_SUCCESS);

  /* a shrink whose release fails keeps every chunk */
  g_array_set_size (r->recs, 0);
  mt_fake_fail_call ("cuMemRelease", 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_resize (buf, g, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_clear_error (&error);
  mt_fake_reset_faults ();
  g_assert_cmpuint (r->recs->len, ==, 2);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_UNMAPPING, a, 2 * g, 0);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_MAPPED, a, 2 * g, 0);
  assert_segment_lookups (mr, a, 2 * g);

  mt_close_ok (buf, NULL);
  assert_missing (a);
  memres_resource_unref (mr);
  g_assert_cmpint (r->destroyed, ==, 1);
  recorder_free (r);
  mt_assert_fake_counts_equal (&base);
}

/* A cache over dmr: a block past max_cached goes back to the upstream at close; when the
 * upstream refuses, the cache keeps it and tells it mapped again; trim gives it back. A buffer
 * above max_block whose free fails stays open, its segment mapped. */
static void
test_cache_dmr_give_back_fails (void)
{
  FakeCudaCounts base;
  g_autoptr (GError) error = NULL;
  MemresResource *mr;
  MemresBuffer *buf;
  Recorder *r;
  guint64 a;

  if (!require_device () || !mt_require_fake ("injects faults"))
    return;
  mt_counts_snapshot (&base);
  /* 1 MiB is above chunk / 16: a block of its own; max_cached=0: it goes back at close */
  mr = mt_new_ok ("cache:chunk=2MiB,max_cached=0,max_block=4MiB>dmr");
  r = recorder_new ();
  subscribe (mr, r);

  buf = mt_alloc_ok (mr, 1024 * 1024, NULL);
  a = memres_buffer_get_address (buf);
  g_assert_cmpuint (r->recs->len, ==, 1);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_MAPPED, a, 1024 * 1024, 0);
  g_assert_cmpint (g_array_index (r->recs, Rec, 0).seg.device, ==, 0);

  mt_fake_fail_call ("cuMemFreeAsync", 1, CUDA_ERROR_UNKNOWN);
  mt_close_ok (buf, NULL); /* the buffer is closed, the block kept */
  mt_fake_reset_faults ();
  g_assert_cmpuint (r->recs->len, ==, 3);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_UNMAPPING, a, 1024 * 1024, 0);
  assert_rec (r, 2, mr, MEMRES_SEGMENT_MAPPED, a, 1024 * 1024, 0);
  assert_segment_lookups (mr, a, 1024 * 1024);
  trim (mr);
  g_assert_cmpuint (r->recs->len, ==, 4);
  assert_rec (r, 3, mr, MEMRES_SEGMENT_UNMAPPING, a, 1024 * 1024, 0);
  assert_missing (a);

  /* above max_block */
  g_array_set_size (r->recs, 0);
  buf = mt_alloc_ok (mr, 8 * 1024 * 1024, NULL);
  a = memres_buffer_get_address (buf);
  mt_fake_fail_call ("cuMemFreeAsync", 1, CUDA_ERROR_UNKNOWN);
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_clear_error (&error);
  mt_fake_reset_faults ();
  g_assert_cmpuint (r->recs->len, ==, 3);
  assert_rec (r, 0, mr, MEMRES_SEGMENT_MAPPED, a, 8 * 1024 * 1024, 0);
  assert_rec (r, 1, mr, MEMRES_SEGMENT_UNMAPPING, a, 8 * 1024 * 1024, 0);
  assert_rec (r, 2, mr, MEMRES_SEGMENT_MAPPED, a, 8 * 1024 * 1024, 0);
  assert_segment_lookups (mr, a, 8 * 1024 * 1024);
  mt_close_ok (buf, NULL);
  g_assert_cmpuint (r->recs->len, ==, 4);
  assert_rec (r, 3, mr, MEMRES_SEGMENT_UNMAPPING, a, 8 * 1024 * 1024, 0);
  assert_missing (a);

  memres_resource_unref (mr);
  recorder_free (r);
  mt_assert_fake_counts_equal (&base);
}

/* cache over vmm: both raise, their segments nest, and the lookup answers the innermost (the
 * cache's chunk); the vmm's own buffers are the vmm's. */
static void
test_cache_vmm_nested (void)
{
  MemresResource *top, *vmm;
  MemresBuffer *buf, *own;
  MemresLookupInfo info;
  Recorder *r;
  guint64 a;
  gsize g;
  g_autofree char *spec = NULL;

  if (!require_device ())
    return;
  g = mt_device_granularity ();
  spec = g_strdup_printf ("cache:chunk=%" G_GSIZE_FORMAT ">vmm", g);
  top = mt_new_ok (spec);
  vmm = memres_resource_get_upstream (top);
  r = recorder_new ();
  subscribe (vmm, r);
  buf = mt_alloc_ok (top, 256, NULL);
  a = memres_buffer_get_address (buf);
  g_assert_cmpuint (r->recs->len, ==, 1);
  assert_rec (r, 0, vmm, MEMRES_SEGMENT_MAPPED, a, g, 0);
  assert_found (a + 300, top, a, g);

  own = mt_alloc_ok (vmm, g, NULL);
  assert_found (memres_buffer_get_address (own) + 1, vmm, memres_buffer_get_address (own), g);
  mt_close_ok (own, NULL);
  mt_close_ok (buf, NULL);
  memres_resource_unref (top);
  g_assert_false (memres_lookup (addr (a), &info));
  g_assert_cmpint (r->destroyed, ==, 1);
  recorder_free (r);
}

/* A callback that unsubscribes another subscriber (or itself) while an event is delivered: the
 * subscription ends there, and the later callbacks of that same event no longer reach it (they
 * did: the event had taken its subscribers before). */
typedef struct
{
  MemresResource *mr;
  guint victim; /* the subscription to end at the first event */
  guint calls;
} Unsubscriber;

static void
unsubscribe_other (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
                   guint64 previous, gpointer data)
{
  Unsubscriber *u = data;
  g_autoptr (GError) error = NULL;

  u->calls++;
  if (u->victim == 0)
    return;
  g_assert_true (memres_resource_unsubscribe_segments (u->mr, u->victim, &error));
  g_assert_no_error (error);
  /* twice: gone */
  g_assert_false (memres_resource_unsubscribe_segments (u->mr, u->victim, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  u->victim = 0;
}

static void
test_unsubscribe_in_callback (void)
{
  MemresResource *mr = mt_new_ok ("cache:chunk=64KiB>host");
  Recorder *r = recorder_new ();
  Unsubscriber u = { mr, 0, 0 }, self = { mr, 0, 0 };
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  guint first_id, self_id;

  /* the first subscriber ends the second at the first event */
  first_id = memres_resource_subscribe_segments (mr, unsubscribe_other, &u, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (first_id, !=, 0);
  u.victim = subscribe (mr, r);
  buf = mt_alloc_ok (mr, 256, NULL);
  g_assert_cmpuint (u.calls, ==, 1);
  g_assert_cmpuint (r->recs->len, ==, 0);
  g_assert_cmpint (r->destroyed, ==, 1);
  mt_close_ok (buf, NULL);
  trim (mr);
  g_assert_cmpuint (u.calls, ==, 2);
  g_assert_cmpuint (r->recs->len, ==, 0);

  MT_CHECK (memres_resource_unsubscribe_segments (mr, first_id, &error));

  /* a subscriber that ends itself hears nothing after */
  self_id = memres_resource_subscribe_segments (mr, unsubscribe_other, &self, NULL, &error);
  g_assert_no_error (error);
  self.victim = self_id;
  buf = mt_alloc_ok (mr, 256, NULL);
  g_assert_cmpuint (self.calls, ==, 1);
  mt_close_ok (buf, NULL);
  trim (mr);
  g_assert_cmpuint (self.calls, ==, 1);
  g_assert_cmpuint (u.calls, ==, 2);
  memres_resource_unref (mr);
  recorder_free (r);
}

/* ---- a callback running on another thread while its subscription ends ---------------------- */

typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean entered, release, returned;
  gint calls;
  gint destroyed;
  gboolean destroyed_after_return;
  GThread *caller, *destroyer;
  MemresResource *mr;
} Blocker;

static void
blocking_event (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
                guint64 previous, gpointer data)
{
  Blocker *b = data;

  g_mutex_lock (&b->lock);
  b->calls++;
  b->caller = g_thread_self ();
  b->entered = TRUE;
  g_cond_broadcast (&b->cond);
  while (!b->release)
    g_cond_wait (&b->cond, &b->lock);
  b->returned = TRUE;
  g_mutex_unlock (&b->lock);
}

static void
blocker_destroyed (gpointer data)
{
  Blocker *b = data;

  g_mutex_lock (&b->lock);
  b->destroyed++;
  b->destroyed_after_return = b->returned;
  b->destroyer = g_thread_self ();
  g_mutex_unlock (&b->lock);
}

static gpointer
allocate_one (gpointer data)
{
  Blocker *b = data;

  return mt_alloc_ok (b->mr, 256, NULL); /* maps a chunk: the blocking callback */
}

/* Unsubscribed while its callback runs on another thread: the call returns at once, the callback
 * finishes, no later event reaches it, and the destroy notify runs once, after the callback
 * returned, on that thread. */
static void
test_unsubscribe_while_running (void)
{
  Blocker b = { 0 };
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf, *other;
  GThread *t;
  guint id;

  b.mr = mt_new_ok ("cache:chunk=64KiB>host");
  g_mutex_init (&b.lock);
  g_cond_init (&b.cond);
  id = memres_resource_subscribe_segments (b.mr, blocking_event, &b, blocker_destroyed, &error);
  g_assert_no_error (error);
  t = g_thread_new ("allocator", allocate_one, &b);
  g_mutex_lock (&b.lock);
  while (!b.entered)
    g_cond_wait (&b.cond, &b.lock);
  g_mutex_unlock (&b.lock);

  MT_CHECK (memres_resource_unsubscribe_segments (b.mr, id, &error));
  g_mutex_lock (&b.lock);
  g_assert_cmpint (b.destroyed, ==, 0); /* its callback still runs */
  b.release = TRUE;
  g_cond_broadcast (&b.cond);
  g_mutex_unlock (&b.lock);
  buf = g_thread_join (t);
  g_assert_cmpint (b.destroyed, ==, 1);
  g_assert_true (b.destroyed_after_return);
  g_assert_true (b.destroyer == b.caller);
  g_assert_false (b.destroyer == g_thread_self ());

  {
    Recorder *r = recorder_new ();
    guint rid = subscribe (b.mr, r);

    other = mt_alloc_ok (b.mr, 128 * 1024, NULL); /* above a chunk: a segment, nobody told */
    g_assert_cmpuint (r->recs->len, >=, 2);       /* the replay's chunk, then the new segment */
    unsubscribe (b.mr, rid);
    recorder_free (r);
  }
  g_assert_cmpint (b.calls, ==, 1);
  g_assert_false (memres_resource_unsubscribe_segments (b.mr, id, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  mt_close_ok (other, NULL);
  mt_close_ok (buf, NULL);
  memres_resource_unref (b.mr);
  g_assert_cmpint (b.destroyed, ==, 1);
  g_cond_clear (&b.cond);
  g_mutex_clear (&b.lock);
}

/* ---- callbacks that allocate, close and look up (re-entrancy) -------------------------------- */

/* A subscriber that, at each segment mapped (the replay included), allocates a buffer from the
 * resource it subscribed to (which may map another segment: an event raised from inside a
 * callback, on its thread) and, at each one about to be unmapped, closes one it holds; at every
 * event it looks the segment up (first and last byte found, in it; one past not in it). It keeps
 * the segments it was told, which must be the resource's at the end. */
typedef struct
{
  MemresResource *mr; /* the resource subscribed to (allocations come from it) */
  GHashTable *live;   /* base -> length (told mapped, not yet unmapping) */
  GPtrArray *held;    /* MemresBuffer, allocated in callbacks */
  guint depth, max_depth, mapped, unmapping, bad;
  gsize size; /* of the buffers it allocates */
} Reentrant;

/* @seg's first and last byte found in it (or, where segments nest, in a shorter one inside it:
 * the innermost), one byte past it not found in it */
static void
reentrant_lookups (Reentrant *re, MemresResource *mr, const MemresSegment *seg)
{
  guint64 probes[3] = { seg->base, seg->base + seg->length - 1, seg->base + seg->length };
  MemresLookupInfo info;

  for (guint i = 0; i < 3; i++)
    {
      gboolean found = memres_lookup (addr (probes[i]), &info);
      gboolean inside = found && info.segment.base >= seg->base
                        && info.segment.base + info.segment.length <= seg->base + seg->length;
      gboolean itself = found && info.resource == mr && info.segment.base == seg->base;

      if (i < 2 ? inside : !itself)
        continue;
      re->bad++;
      g_test_message ("segment 0x%" G_GINT64_MODIFIER "x+%" G_GUINT64_FORMAT ", byte %u: %s "
                      "0x%" G_GINT64_MODIFIER "x+%" G_GUINT64_FORMAT,
                      seg->base, seg->length, i, found ? "found in" : "not found",
                      found ? info.segment.base : 0, found ? info.segment.length : 0);
    }
}

static void
reentrant_event (MemresResource *mr, MemresSegmentEvent event, const MemresSegment *seg,
                 guint64 previous, gpointer data)
{
  Reentrant *re = data;
  g_autoptr (GError) error = NULL;

  re->depth++;
  re->max_depth = MAX (re->max_depth, re->depth);
  reentrant_lookups (re, mr, seg);
  switch (event)
    {
    case MEMRES_SEGMENT_MAPPED:
      re->mapped++;
      if (g_hash_table_contains (re->live, GSIZE_TO_POINTER (seg->base)))
        re->bad++;
      g_hash_table_insert (re->live, GSIZE_TO_POINTER (seg->base), GSIZE_TO_POINTER (seg->length));
      if (re->depth == 1) /* one level: each allocation maps at most one more */
        {
          MemresBuffer *buf = memres_resource_allocate (re->mr, re->size, NULL, &error);

          g_assert_no_error (error);
          g_ptr_array_add (re->held, buf);
        }
      break;
    case MEMRES_SEGMENT_GROWN:
      g_hash_table_insert (re->live, GSIZE_TO_POINTER (seg->base), GSIZE_TO_POINTER (seg->length));
      break;
    case MEMRES_SEGMENT_UNMAPPING:
      re->unmapping++;
      if (!g_hash_table_remove (re->live, GSIZE_TO_POINTER (seg->base)))
        re->bad++;
      if (re->depth == 1 && re->held->len > 0)
        {
          MemresBuffer *buf = g_ptr_array_steal_index (re->held, re->held->len - 1);

          MT_CHECK (memres_buffer_close (buf, NULL, &error));
          memres_buffer_unref (buf);
        }
      break;
    }
  re->depth--;
}

static void
test_reentrant (gconstpointer data)
{
  const char *spec = data;
  Reentrant re = { 0 };
  g_autoptr (GError) error = NULL;
  MemresBuffer *bufs[8];
  guint id;

  if (strstr (spec, "host") == NULL && !require_device ())
    return;
  re.mr = mt_new_ok (spec);
  re.live = g_hash_table_new (NULL, NULL);
  re.held = g_ptr_array_new ();
  re.size = strstr (spec, "cache") != NULL ? 200 * 1024 : 2 * mt_device_granularity ();
  bufs[0] = mt_alloc_ok (re.mr, re.size, NULL); /* one segment before: the replay allocates */
  id = memres_resource_subscribe_segments (re.mr, reentrant_event, &re, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (re.mapped, >=, 1);
  g_assert_cmpuint (re.held->len, >=, 1); /* allocated inside the replay */
  for (guint i = 1; i < G_N_ELEMENTS (bufs); i++)
    bufs[i] = mt_alloc_ok (re.mr, re.size * (i % 3 + 1), NULL);
  for (guint i = 0; i < G_N_ELEMENTS (bufs); i++)
    mt_close_ok (bufs[i], NULL);
  if (strcmp (spec, "vmm") != 0) /* vmm holds nothing unused: no trim */
    MT_CHECK (memres_resource_trim (re.mr, 0, &error));
  /* what it was told is what the resource has */
  g_assert_cmpuint (g_hash_table_size (re.live), ==, count_segments (re.mr));
  g_assert_cmpuint (re.bad, ==, 0);
  g_assert_cmpuint (re.max_depth, ==, 2); /* events raised from inside callbacks */
  g_assert_cmpuint (re.unmapping, >, 0);
  g_test_message ("%s: %u mapped, %u unmapping, depth %u, %u held", spec, re.mapped, re.unmapping,
                  re.max_depth, re.held->len);
  unsubscribe (re.mr, id);
  for (guint i = 0; i < re.held->len; i++)
    mt_close_ok (g_ptr_array_index (re.held, i), NULL);
  g_ptr_array_unref (re.held);
  g_hash_table_unref (re.live);
  memres_resource_unref (re.mr);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);

  g_test_add_func ("/segments/cache-host/events", test_cache_host_events);
  g_test_add_func ("/segments/cache-host/replay", test_cache_host_replay);
  g_test_add_func ("/segments/pass-through", test_pass_through);
  g_test_add_func ("/segments/nested-caches", test_nested_caches);
  g_test_add_func ("/segments/bad-input", test_bad_input);
  g_test_add_func ("/segments/unsubscribe-in-callback", test_unsubscribe_in_callback);
  g_test_add_func ("/segments/unsubscribe-while-running", test_unsubscribe_while_running);
  g_test_add_func ("/segments/threads", test_threads);
  g_test_add_func ("/segments/vmm/events", test_vmm_events);
  g_test_add_func ("/segments/vmm/handle-types", test_vmm_handle_types);
  g_test_add_func ("/segments/vmm/faults", test_vmm_faults);
  g_test_add_func ("/segments/cache-dmr/give-back-fails", test_cache_dmr_give_back_fails);
  g_test_add_func ("/segments/cache-vmm/nested", test_cache_vmm_nested);
  g_test_add_data_func ("/segments/reentrant/cache-host", "cache:chunk=1MiB>host", test_reentrant);
  g_test_add_data_func ("/segments/reentrant/vmm", "vmm", test_reentrant);
  g_test_add_data_func ("/segments/reentrant/arena", "arena", test_reentrant);
  g_test_add_data_func ("/segments/reentrant/cache-vmm", "cache:chunk=1MiB>vmm", test_reentrant);
  g_test_add_data_func ("/segments/reentrant/cache-arena", "cache:chunk=1MiB>arena",
                        test_reentrant);
  g_test_add_data_func ("/segments/reentrant/cache-dmr", "cache:chunk=1MiB>dmr", test_reentrant);
  return g_test_run ();
}

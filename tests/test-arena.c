/* test-arena.c: the `arena` kind against the fake driver (suite fake) and the real one (suite
 * gpu): granules moved instead of created, the fault sweep of every driver call of allocate
 * (growing the reservation too), remap, close, resize, trim and finalize, stream hazards, threads
 * with exact statistics, options, and the replay target of issue 38 (bench/traces). */
#include "testutil.h"

#include <string.h>

#include "arena-check.h"
#include "segment-check.h"
#include "arena-sweep.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

/* ---- basics ---------------------------------------------------------------------------------- */

static void
test_basic (void)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *small, *mid, *large;
  MemresStats st;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok ("arena");
  g = gran (mr);
  g_assert_true (memres_resource_is_device_accessible (mr));
  g_assert_cmpint (memres_resource_get_device (mr), ==, 0);
  g_assert_cmpuint (counter (mr, "virtual"), >, 0);
  small = mt_alloc_ok (mr, 1000, NULL);
  mid = mt_alloc_ok (mr, 40 * KiB, NULL);
  large = mt_alloc_ok (mr, 3 * MiB + 1, NULL);
  mt_fill_byte_ok (small, 0x11, NULL);
  mt_fill_byte_ok (mid, 0x22, NULL);
  mt_fill_byte_ok (large, 0x33, NULL);
  mt_assert_bytes (small, 0x11, NULL);
  mt_assert_bytes (mid, 0x22, NULL);
  mt_assert_bytes (large, 0x33, NULL);
  st = stats_ok (mr);
  /* classes of 1024 and 40960 bytes, the large one rounded to 512 bytes */
  g_assert_cmpuint (st.used_current, ==, 1024 + 40 * KiB + 3 * MiB + 512);
  g_assert_cmpuint (st.reserved_current, ==, counter (mr, "physical"));
  g_assert_cmpuint (st.reserved_current % g, ==, 0);
  g_assert_cmpuint (st.reserved_current, <=, 4 * MiB + 2 * g);
  mt_close_ok (small, NULL);
  mt_close_ok (mid, NULL);
  mt_close_ok (large, NULL);
  g_assert_cmpuint (stats_ok (mr).used_current, ==, 0);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_assert_fake_counts_equal (&base);
}

static void
test_bad_options (void)
{
  if (!mt_require_devices (1))
    return;
  mt_new_fails ("arena:max_block=100", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "max_block");
  mt_new_fails ("arena:max_block=65MiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "max_block");
  mt_new_fails ("arena:chunk=1KiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "chunk");
  /* 2 PiB parses (PiB is a size suffix) and is above the option's range: "at most 1 PiB" */
  mt_new_fails ("arena:reserve=2PiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "at most 1 PiB");
  mt_new_fails ("arena:handle_type=ipc", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "handle_type");
  /* export_min without exportable memory did nothing: refused, naming both options */
  mt_new_fails (
      "arena:export_min=4MiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
      "option \"export_min\" of kind \"arena\" applies only with handle_type=posix_fd or fabric");
  mt_new_fails ("arena:handle_type=none,export_min=1", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "(handle_type is \"none\")");
  mt_new_fails ("cache>arena:export_min=4MiB", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                "export_min");
  memres_resource_unref (mt_new_ok ("arena:handle_type=posix_fd,export_min=4MiB"));
  memres_resource_unref (mt_new_ok ("arena:export_min=0")); /* the default, said */
  mt_new_fails ("arena:handle_type=fabric,fabric_fallback=maybe", MEMRES_ERROR,
                MEMRES_ERROR_INVALID_ARGUMENT, "fabric_fallback");
  {
    /* 1 PiB is taken (halved until the driver grants it) */
    g_autoptr (MemresResource) mr = mt_new_ok ("arena:reserve=1PiB");

    g_assert_cmpuint (counter (mr, "virtual"), <=, G_GUINT64_CONSTANT (1) << 50);
    g_assert_cmpuint (counter (mr, "virtual"), >, 0);
  }
  mt_new_fails ("arena:device=99", MEMRES_ERROR, MEMRES_ERROR_NO_DEVICE, NULL);
  mt_new_fails ("arena:front=17", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "front");
  mt_new_fails ("arena:settle=sometimes", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "settle");
  mt_new_fails ("arena:place=somewhere", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "place");
  mt_new_fails ("arena:check=maybe", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "check");
  mt_new_fails ("arena:check=", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "check");
  mt_new_fails ("arena:check=2", MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, "check");
  {
    /* check=true: the counter heap_errors, 0 on a sound heap; by default, no such counter */
    const char *unchecked[] = { "arena", "arena:check=false" };
    g_autoptr (MemresResource) checked = mt_new_ok ("arena:check=true");
    MemresBuffer *buf = mt_alloc_ok (checked, 3 * MiB, NULL);

    mt_close_ok (buf, NULL); /* a free range for the check to walk */
    g_assert_cmpuint (counter (checked, "heap_errors"), ==, 0);
    for (guint i = 0; i < G_N_ELEMENTS (unchecked); i++)
      {
        g_autoptr (MemresResource) mr = mt_new_ok (unchecked[i]);
        g_autoptr (GError) error = NULL;
        g_autoptr (GVariant) counters = memres_resource_get_counters (mr, &error);

        g_assert_no_error (error);
        g_assert_true (g_variant_lookup (counters, "physical", "t", NULL));
        g_assert_false (g_variant_lookup (counters, "heap_errors", "t", NULL));
      }
  }
  if (mt_driver_is_fake ())
    {
      mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0);
      mt_new_fails ("arena", MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "virtual memory");
      mt_fake_set_attribute (0, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1);
    }
}

/* settle=eager: a large request that no free range of its stream's own fits exactly settles the
 * ranges whose work is done first (one settle, the freed range's bytes then settled: no
 * tagged bytes left); the default keeps the stream's free range tagged and takes from it. */
static void
test_settle_eager (void)
{
  const char *specs[] = { "arena", "arena:settle=eager" };

  if (!mt_require_devices (1))
    return;
  for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      CUstream s = mt_stream_new_on (0);
      MemresBuffer *a = mt_alloc_ok (mr, 3 * MiB, s), *b = mt_alloc_ok (mr, 5 * MiB, s), *c;
      guint64 settles;

      mt_close_ok (a, s);
      mt_sync_ok (s);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, 3 * MiB);
      settles = counter (mr, "settles");
      c = mt_alloc_ok (mr, MiB, s); /* no exact fit: the 3 MiB range is looser */
      g_assert_cmpuint (counter (mr, "settles"), ==, settles + i);
      g_assert_cmpuint (counter (mr, "tagged_bytes"), ==, i == 0 ? 2 * MiB : 0);
      mt_close_ok (c, s);
      mt_close_ok (b, s);
      mt_sync_ok (s);
      g_clear_pointer (&mr, memres_resource_unref);
      mt_stream_free (s);
    }
}

/* ---- granules moved, not created ------------------------------------------------------------- */

/* a (2 granules) | b (1) | c (1), laid out from the start of the range; a and c closed. */
static void
setup_holes (Ctx *c)
{
  MemresBuffer *a, *cc;
  gsize g;

  c->mr = mt_new_ok ("arena");
  g = gran (c->mr);
  a = mt_alloc_ok (c->mr, 2 * g, NULL);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, g, NULL);
  cc = mt_alloc_ok (c->mr, g, NULL);
  g_assert_cmpuint (memres_buffer_get_address (c->bufs[0]), ==,
                    memres_buffer_get_address (a) + 2 * g);
  g_assert_cmpuint (memres_buffer_get_address (cc), ==, memres_buffer_get_address (a) + 3 * g);
  c->addr_c = memres_buffer_get_address (cc);
  mt_fill_byte_ok (c->bufs[0], 0x11, NULL);
  mt_close_ok (a, NULL);
  mt_close_ok (cc, NULL);
}

static gboolean
op_alloc_three (Ctx *c, GError **error)
{
  MemresBuffer *d = memres_resource_allocate (c->mr, 3 * gran (c->mr), NULL, error);

  if (d == NULL)
    return FALSE;
  c->bufs[c->n++] = d;
  return TRUE;
}

/* The two granules a freed back d, placed where c was (one granule of its own there), with no
 * cuMemCreate: the physical handles stay four, two granules are counted as remapped. */
static void
test_remap_no_create (void)
{
  FakeCudaCounts base, before, after;
  GError *error = NULL;
  Ctx c = { 0 };
  long creates = 0;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  setup_holes (&c);
  g = gran (c.mr);
  mt_counts_snapshot (&before);
  if (mt_driver_is_fake ())
    creates = mt_fake_call_count ("cuMemCreate");
  MT_CHECK (op_alloc_three (&c, &error));
  g_assert_cmpuint (memres_buffer_get_address (c.bufs[1]), ==, c.addr_c);
  g_assert_cmpuint (counter (c.mr, "granules_remapped"), ==, 2);
  g_assert_cmpuint (counter (c.mr, "granules_created"), ==, 4);
  g_assert_cmpuint (stats_ok (c.mr).reserved_current, ==, 4 * g);
  g_assert_cmpuint (stats_ok (c.mr).reserved_high, ==, 4 * g);
  if (mt_driver_is_fake ())
    {
      mt_counts_snapshot (&after);
      g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates);
      g_assert_cmpint (after.physical_handles, ==, before.physical_handles);
      g_assert_cmpint (after.physical_handles - base.physical_handles, ==, 4);
    }
  mt_fill_byte_ok (c.bufs[1], 0x5a, NULL);
  mt_assert_bytes (c.bufs[1], 0x5a, NULL);
  mt_assert_bytes (c.bufs[0], 0x11, NULL);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
}

/* Above release_threshold, idle granules go back after a large allocation. */
static void
test_release_threshold (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *a, *b;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena:release_threshold=0");
  g = gran (mr);
  a = mt_alloc_ok (mr, 4 * g, NULL);
  mt_close_ok (a, NULL);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 4 * g); /* tagged: still held */
  b = mt_alloc_ok (mr, 5 * g, (MemresStream) CU_STREAM_PER_THREAD);
  /* a's range settled, its four granules moved into b, one created; nothing idle is kept */
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 5 * g);
  g_assert_cmpuint (counter (mr, "physical_idle"), ==, 0);
  mt_close_ok (b, (MemresStream) CU_STREAM_PER_THREAD);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_assert_cmpuint (counter (mr, "granules_released"), ==, 5);
}

/* memres_resource_trim() keeps at least the bytes to keep, as cuMemPoolTrimTo() does: the
 * fewest whole granules that hold them (it gave back one granule too many for a keep between
 * two granule multiples: 2 of 5 granules for a keep of 1.5, leaving 1) */
static void
test_trim_keeps (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  g = gran (mr);
  mt_close_ok (mt_alloc_ok (mr, 5 * g, NULL), NULL);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 5 * g);
  g_assert_true (memres_resource_trim (mr, 4 * g, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 4 * g);
  g_assert_true (memres_resource_trim (mr, 3 * g / 2, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 2 * g);
  g_assert_true (memres_resource_trim (mr, 1, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, g);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
}

/* ---- the fault sweep ------------------------------------------------------------------------- */

static void
setup_empty (Ctx *c)
{
  c->mr = mt_new_ok ("arena");
}

static gboolean
op_alloc_large (Ctx *c, GError **error)
{
  MemresBuffer *b = memres_resource_allocate (c->mr, 3 * gran (c->mr) + 1000, NULL, error);

  if (b == NULL)
    return FALSE;
  c->bufs[c->n++] = b;
  return TRUE;
}

static gboolean
op_alloc_small (Ctx *c, GError **error)
{
  MemresBuffer *b = memres_resource_allocate (c->mr, 1000, NULL, error);

  if (b == NULL)
    return FALSE;
  c->bufs[c->n++] = b;
  return TRUE;
}

static void
setup_live (Ctx *c)
{
  c->mr = mt_new_ok ("arena");
  c->stream = mt_stream_new_on (0);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * MiB, NULL);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 1000, NULL);
}

static gboolean
op_close (Ctx *c, GError **error)
{
  gboolean ok = TRUE;

  for (guint i = 0; i < c->n && ok; i++)
    if ((ok = memres_buffer_close (c->bufs[i], c->stream, error)))
      g_clear_pointer (&c->bufs[i], memres_buffer_unref);
  return ok;
}

static void
setup_idle (Ctx *c)
{
  setup_live (c);
  g_assert_true (op_close (c, NULL));
}

static gboolean
op_trim (Ctx *c, GError **error)
{
  return memres_resource_trim (c->mr, 0, error);
}

/* The first reservation (8 MiB) nearly full: the next large buffer needs another. */
static void
setup_full (Ctx *c)
{
  c->mr = mt_new_ok ("arena:reserve=8MiB");
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * gran (c->mr), NULL);
}

static gboolean
op_alloc_grow (Ctx *c, GError **error)
{
  MemresBuffer *b = memres_resource_allocate (c->mr, 2 * gran (c->mr) + 1000, NULL, error);

  if (b == NULL)
    return FALSE;
  c->bufs[c->n++] = b;
  return TRUE;
}

static void
test_faults_allocate (void)
{
  /* granule by granule: create, map; then one set access for the four */
  run_sweep ("arena allocate large", setup_empty, op_alloc_large, 9);
  run_sweep ("arena allocate small", setup_empty, op_alloc_small, 3);
  /* another reservation, then its granules */
  run_sweep ("arena allocate past the reservation", setup_full, op_alloc_grow, 8);
}

static void
test_faults_remap (void)
{
  /* settle (wait, query), two moves (the idle granules unmapped, each mapped, access granted:
   * a run of adjacent granules by one call), the event calls */
  run_sweep ("arena remap", setup_holes, op_alloc_three, 7);
}

static void
test_faults_close (void)
{
  run_sweep ("arena close", setup_live, op_close, 1);
}

/* park=true (arena-park.c): bufs[0] (3 MiB) and a small one allocated on a stream, closed there:
 * the large one parked */
static void
setup_parked (Ctx *c)
{
  c->mr = mt_new_ok ("arena:park=true");
  c->stream = mt_stream_new_on (0);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * MiB, c->stream);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 1000, c->stream);
  g_assert_true (op_close (c, NULL));
  g_assert_cmpuint (counter (c->mr, "parked"), ==, 1);
}

/* setup_parked() on the legacy stream: the close records nothing; the flush gives the range
 * the legacy stream's pending event, recorded when the placement settles */
static void
setup_parked_legacy (Ctx *c)
{
  c->mr = mt_new_ok ("arena:park=true");
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * MiB, NULL);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 1000, NULL);
  g_assert_true (op_close (c, NULL));
  g_assert_cmpuint (counter (c->mr, "parked"), ==, 1);
}

/* setup_live() with park=true: the large close parks (its event recorded) */
static void
setup_live_parked (Ctx *c)
{
  c->mr = mt_new_ok ("arena:park=true");
  c->stream = mt_stream_new_on (0);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * MiB, c->stream);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 1000, c->stream);
}

/* Another size on the parked one's stream: the flush, then the placement and its granules */
static gboolean
op_alloc_other (Ctx *c, GError **error)
{
  MemresBuffer *b = memres_resource_allocate (c->mr, 5 * MiB, c->stream, error);

  if (b == NULL)
    return FALSE;
  c->bufs[c->n++] = b;
  return TRUE;
}

static void
test_faults_park (void)
{
  run_sweep ("arena park close", setup_live_parked, op_close, 1);
  run_sweep ("arena park flush and place", setup_parked, op_alloc_other, 3);
  run_sweep ("arena park flush and place, legacy", setup_parked_legacy, op_alloc_other, 3);
  run_sweep ("arena park trim", setup_parked, op_trim, 3);
}

/* bufs[0] (g + 1000 bytes, filled with 0x6d), and with @blocked bufs[1] right after it */
static void
setup_resize (Ctx *c, gboolean blocked)
{
  gsize g;

  c->mr = mt_new_ok ("arena");
  g = gran (c->mr);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, g + 1000, NULL);
  if (blocked)
    c->bufs[c->n++] = mt_alloc_ok (c->mr, g, NULL);
  mt_fill_byte_ok (c->bufs[0], 0x6d, NULL);
  c->addr_c = memres_buffer_get_address (c->bufs[0]);
}

static void
setup_resize_free (Ctx *c)
{
  setup_resize (c, FALSE);
}

static void
setup_resize_blocked (Ctx *c)
{
  setup_resize (c, TRUE);
}

/* bufs[0] grown to four granules (in place, or moved): on failure as it was, bytes included */
static gboolean
op_resize (Ctx *c, GError **error)
{
  gsize g = gran (c->mr);

  if (memres_buffer_resize (c->bufs[0], 4 * g, NULL, error))
    return TRUE;
  g_assert_cmphex (memres_buffer_get_address (c->bufs[0]), ==, c->addr_c);
  g_assert_cmpuint (memres_buffer_get_size (c->bufs[0]), ==, g + 1000);
  mt_assert_bytes (c->bufs[0], 0x6d, NULL);
  return FALSE;
}

/* bufs[0] of three granules and a bit (0x6d), bufs[1] right after it: a grow moves it by
 * remapping its three whole granules */
static void
setup_remap (Ctx *c)
{
  gsize g;

  c->mr = mt_new_ok ("arena");
  g = gran (c->mr);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * g + 1000, NULL);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, g, NULL);
  mt_fill_byte_ok (c->bufs[0], 0x6d, NULL);
  c->addr_c = memres_buffer_get_address (c->bufs[0]);
}

/* bufs[0] grown to six granules by a remap: on failure as it was, bytes included */
static gboolean
op_remap (Ctx *c, GError **error)
{
  gsize g = gran (c->mr);

  if (memres_buffer_resize (c->bufs[0], 6 * g, NULL, error))
    {
      g_assert_cmpuint (counter (c->mr, "granules_moved"), ==, 3);
      return TRUE;
    }
  g_assert_cmphex (memres_buffer_get_address (c->bufs[0]), ==, c->addr_c);
  g_assert_cmpuint (memres_buffer_get_size (c->bufs[0]), ==, 3 * g + 1000);
  mt_assert_bytes (c->bufs[0], 0x6d, NULL);
  return FALSE;
}

/* bufs[0] of 200 KiB (0x6d), in no whole granule, bufs[1] right after it: a grow moves it by a
 * copy */
static void
setup_copy (Ctx *c)
{
  c->mr = mt_new_ok ("arena");
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 200 * 1024, NULL);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 100 * 1024, NULL);
  mt_fill_byte_ok (c->bufs[0], 0x6d, NULL);
  c->addr_c = memres_buffer_get_address (c->bufs[0]);
}

static gboolean
op_copy (Ctx *c, GError **error)
{
  if (memres_buffer_resize (c->bufs[0], 4 * gran (c->mr), NULL, error))
    {
      g_assert_cmpuint (counter (c->mr, "granules_moved"), ==, 0);
      return TRUE;
    }
  g_assert_cmphex (memres_buffer_get_address (c->bufs[0]), ==, c->addr_c);
  g_assert_cmpuint (memres_buffer_get_size (c->bufs[0]), ==, 200 * 1024);
  mt_assert_bytes (c->bufs[0], 0x6d, NULL);
  return FALSE;
}

static void
test_faults_resize (void)
{
  /* in place: create and map per granule, then set access for the run */
  run_sweep ("arena resize in place", setup_resize_free, op_resize, 5);
  /* a move of one whole granule: a remap (waits, the end's granules, the copy of its tail, the
   * granule's unmap, map, set access) */
  run_sweep ("arena resize by move", setup_resize_blocked, op_resize, 10);
  /* a move of a buffer in no whole granule: a copy (the new buffer's granules, the copy, the old
   * one's close: an event) */
  run_sweep ("arena resize by copy", setup_copy, op_copy, 8);
  /* a remap: waits, the ends' granules, the copies, per whole granule unmap, map, set access */
  run_sweep ("arena resize by remap", setup_remap, op_remap, 14);
}

static void
test_faults_trim (void)
{
  /* synchronize, then per granule: release, unmap */
  run_sweep ("arena trim", setup_idle, op_trim, 5);
}

static void
test_faults_finalize (void)
{
  run_finalize_sweep (setup_idle);
}

/* ---- stream hazards (the fake's asynchronous mode; the real driver) -------------------------- */

/* Hold stream A, queue a fill of a buffer on A, close it on A, allocate the same size for B and
 * fill it on B, release A: the bytes are B's (mt_hazard_run(), the arena trimmed at the end).
 * Whatever the arena does (a block after B waited for A's event, a new extent, granules created
 * because A's range cannot settle yet), no allocation waits for the held stream. */
static void
test_hazard (gconstpointer data)
{
  mt_hazard_run (data);
}

static const MtHazard hazards[] = {
  { "arena", 4 * KiB, MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
  { "arena:front=0", 4 * KiB, MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
  { "arena", 4 * MiB, MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
  { "arena", 4 * KiB, MT_HAZARD_LEGACY, FALSE, FALSE, TRUE },
  { "arena:front=0", 4 * KiB, MT_HAZARD_LEGACY, FALSE, FALSE, TRUE },
  { "arena", 4 * MiB, MT_HAZARD_LEGACY, FALSE, FALSE, TRUE },
  { "arena:front=0", 4 * KiB, MT_HAZARD_DESTROYED, FALSE, FALSE, TRUE },
  { "arena", 4 * MiB, MT_HAZARD_DESTROYED, FALSE, FALSE, TRUE },
  /* parked large closes (arena-park.c): flushed for B, tagged with A until A is past the close */
  { "arena:park=true", 4 * MiB, MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
  { "arena:park=true", 4 * MiB, MT_HAZARD_LEGACY, FALSE, FALSE, TRUE },
  { "arena:park=true", 4 * MiB, MT_HAZARD_DESTROYED, FALSE, TRUE, TRUE },
};
static const char *const hazard_names[] = {
  "/arena/hazard/stream/front",     "/arena/hazard/stream/shared",   "/arena/hazard/stream/large",
  "/arena/hazard/legacy/front",     "/arena/hazard/legacy/shared",   "/arena/hazard/legacy/large",
  "/arena/hazard/destroyed/shared", "/arena/hazard/destroyed/large", "/arena/hazard/park/stream",
  "/arena/hazard/park/legacy",      "/arena/hazard/park/destroyed",
};
G_STATIC_ASSERT (G_N_ELEMENTS (hazards) == G_N_ELEMENTS (hazard_names));

/* A large range freed on A is reused at once on A (no driver call), and on B only after it
 * settles: while A is held, B gets new memory. */
static void
test_hazard_large_reuse (void)
{
  ArenaStreams t;
  MemresBuffer *y, *z;
  MtStreamHold *hold;
  guint64 addr;

  if (!arena_streams_begin (&t, FALSE))
    return;
  hold = arena_streams_close_held (&t, 4 * MiB, &addr);
  y = mt_alloc_ok (t.mr, 4 * MiB, t.b);
  g_assert_cmpuint (memres_buffer_get_address (y), !=, addr);
  /* A's freed granules are not lent to B either: new memory */
  g_assert_cmpuint (counter (t.mr, "granules_lent"), ==, 0);
  z = mt_alloc_ok (t.mr, 4 * MiB, t.a);
  g_assert_cmpuint (memres_buffer_get_address (z), ==, addr);
  mt_fill_byte_ok (y, 0xbb, t.b);
  mt_fill_byte_ok (z, 0xcc, t.a);
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, t.b);
  mt_assert_bytes (z, 0xcc, t.a);
  mt_close_ok (y, t.b);
  mt_close_ok (z, t.a);
  arena_streams_end (&t);
}

/* Once @s is past the event of a lending or a sharing's end (synchronized: its own work only):
 * the retired addresses go at the next allocation on @mr, which asks their events
 * (cuEventQuery). */
static void
reap_retired (MemresResource *mr, gsize size, MemresStream s)
{
  mt_sync_ok (s);
  mt_close_ok (mt_alloc_ok (mr, size, s), s);
}

/* The end of lent_run() and shared_run(): both streams synchronized, everything trimmed back to
 * 0 bytes reserved, the two arenas and streams freed, and on the fake every handle given back. */
static void
lend_run_end (MemresResource **mr, MemresResource **other, MemresStream s, MemresStream b,
              const FakeCudaCounts *base)
{
  mt_sync_ok (s);
  mt_sync_ok (b);
  trim_ok (*mr);
  g_assert_cmpuint (stats_ok (*mr).reserved_current, ==, 0);
  g_clear_pointer (mr, memres_resource_unref);
  g_clear_pointer (other, memres_resource_unref);
  mt_stream_free (s);
  mt_stream_free (b);
  if (mt_driver_is_fake ())
    mt_assert_fake_counts_equal (base);
}

/* Lent memory (arena-lend.c): S holds a pending copy of x, x is closed on S, and y (on S, too
 * big for x's hole, which a live buffer w closes off) gets x's two granules mapped at a second
 * address, nothing created. Stream B, meanwhile, must not reach that memory: v (on B) is not
 * placed in the free tail of y's last granule (x's memory too: tagged S until S is past the
 * lending), and B's fill, which runs at once, leaves the copy S had queued before the close
 * with x's bytes. After the release, the old addresses are unmapped and everything adds up.
 * With @fail, the @nth call of that driver entry during y's allocation fails (a code that is no
 * out-of-memory: the flush would wait for the held stream): y's allocation fails and leaves
 * everything as it was (tried again without the fault), or succeeds another way; the bytes are
 * right either way. Without @fail, the names of y's driver calls go to @calls (fake only). With
 * @fail2 too (the rollback's cuMemUnmap), the undone granule stays mapped, retired as an old
 * address until S is past it, with a warning. */
static void
lent_run (const char *fail, int nth, const char *fail2, int nth2, char ***calls)
{
  g_autofree char *warnings = NULL;
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL, other = NULL;
  MemresBuffer *x, *w, *y, *v, *z;
  g_autoptr (GError) error = NULL;
  gboolean fake = mt_driver_is_fake ();
  MemresStream s, b;
  MtStreamHold *hold;
  long creates = 0;
  guint64 at;
  gsize g;

  if (fake)
    mt_counts_snapshot (&base);
  s = mt_stream_new_on (0);
  b = mt_stream_new_on (0);
  mr = mt_new_ok ("arena");
  other = mt_new_ok ("arena");
  g = gran (mr);
  x = mt_alloc_ok (mr, 2 * g, s);
  at = memres_buffer_get_address (x);
  w = mt_alloc_ok (mr, g + g / 2, s);
  g_assert_cmpuint (memres_buffer_get_address (w), ==, at + 2 * g);
  z = mt_alloc_ok (other, 2 * g, s);
  mt_fill_byte_ok (x, 0x11, s);
  mt_sync_ok (s);
  hold = mt_stream_hold (s);
  mt_fill_byte_ok (x, 0xaa, s);
  g_assert_true (memres_buffer_copy_to (x, z, s, &error));
  g_assert_no_error (error);
  mt_close_ok (x, s);
  if (fake)
    creates = mt_fake_call_count ("cuMemCreate");
  if (fail2 != NULL)
    {
      mt_fake_fail_call (fail2, nth2, CUDA_ERROR_INVALID_VALUE);
      mt_log_capture_begin ();
    }
  if (fail != NULL)
    mt_fake_fail_call (fail, nth, CUDA_ERROR_INVALID_VALUE);
  else if (fake && calls != NULL)
    mt_fake_trace_begin ();
  /* y: right after w, in w's last granule and two granules without memory, which get x's */
  y = memres_resource_allocate (mr, 2 * g + g / 4, s, &error);
  if (fail == NULL && fake && calls != NULL)
    {
      const char **names = NULL;
      int n = mt_fake_trace_end (&names);

      *calls = g_new0 (char *, n + 1);
      for (int i = 0; i < n; i++)
        (*calls)[i] = g_strdup (names[i]);
    }
  if (fail != NULL)
    mt_fake_reset_faults ();
  if (fail2 != NULL)
    {
      guint criticals;

      warnings = mt_log_capture_end (&criticals);
      g_assert_cmpuint (criticals, ==, 0);
      g_assert_nonnull (strstr (warnings, "undoing a lent granule"));
      g_assert_null (y);
      g_assert_cmpuint (counter (mr, "lent_pending"), ==, 1);
    }
  if (y == NULL)
    {
      g_assert_nonnull (error);
      g_assert_cmpuint (counter (mr, "granules_lent"), ==, 0);
      g_assert_cmpuint (counter (mr, "lent_pending"), ==, fail2 != NULL ? 1 : 0);
      g_clear_error (&error);
      y = mt_alloc_ok (mr, 2 * g + g / 4, s);
    }
  g_assert_no_error (error);
  if (fail == NULL)
    {
      g_assert_cmpuint (memres_buffer_get_address (y), ==, at + 3 * g + g / 2);
      g_assert_cmpuint (counter (mr, "granules_lent"), ==, 2);
      g_assert_cmpuint (counter (mr, "lent_pending"), ==, 2);
      g_assert_cmpuint (counter (mr, "granules_created"), ==, 4);
      g_assert_cmpuint (stats_ok (mr).reserved_high, ==, 4 * g);
      if (fake)
        g_assert_cmpint (mt_fake_call_count ("cuMemCreate"), ==, creates);
    }
  /* y's last granule ends in a quarter of free bytes, x's memory when lent: not B's */
  v = mt_alloc_ok (mr, 256 * KiB, b);
  if (fail == NULL)
    g_assert_cmpuint (memres_buffer_get_address (v), >=, at + 6 * g);
  mt_fill_byte_ok (v, 0xbb, b);
  mt_sync_ok (b);
  mt_fill_byte_ok (y, 0xcc, s);
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  mt_assert_bytes (z, 0xaa, s);
  mt_assert_bytes (y, 0xcc, s);
  mt_assert_bytes (v, 0xbb, b);
  /* S is past the lending: the old addresses go */
  reap_retired (mr, 4 * g, s);
  g_assert_cmpuint (counter (mr, "lent_pending"), ==, 0);
  mt_close_ok (y, s);
  mt_close_ok (v, b);
  mt_close_ok (w, s);
  mt_close_ok (z, s);
  lend_run_end (&mr, &other, s, b, &base);
}

static void
test_hazard_lent (void)
{
  if (!mt_hazard_begin ())
    return;
  lent_run (NULL, 0, NULL, 0, NULL);
  mt_hazard_end ();
}

/* Every driver call of the lending allocation fails in turn (lent_run()). */
static void
test_faults_lent (void)
{
  g_auto (GStrv) calls = NULL;
  guint swept = 0;

  if (!mt_require_fake ("faults are injected by the fake"))
    return;
  if (!mt_hazard_begin ())
    return;
  lent_run (NULL, 0, NULL, 0, &calls);
  for (guint i = 0; calls[i] != NULL; i++)
    {
      int nth = mt_call_ordinal (calls, i);

      g_test_message ("lent: call %u, %s #%d, fails", i, calls[i], nth);
      lent_run (calls[i], nth, NULL, 0, NULL);
      swept++;
    }
  /* the second granule's map fails, and so does the unmap of the first one's rollback */
  lent_run ("cuMemMap", 2, "cuMemUnmap", 1, NULL);
  /* at least the event, and each granule's cuMemMap and cuMemSetAccess */
  g_assert_cmpuint (swept, >=, 5);
  mt_hazard_end ();
}

/* A shared granule (arena-lend.c): on stream S (held), x [0, g/4) and keep [g/4, g) fill
 * granule 0; x is closed, so that its bytes are S's free bytes in a granule still in use. y
 * (g + g/4) goes to granule 1 (created) and a quarter of granule 2, which shares granule 0's
 * memory: nothing created for it. Stream B's allocation never lands in granule 2's other bytes
 * nor in x's, before or after keep's close ends the sharing (granule 0's address retired, granule
 * 2's other bytes tagged S); a copy that S queued from x before its close still reads x's
 * bytes, and keep's bytes are not touched by y's. With @fail, the @nth call named so fails
 * during y's allocation: it fails, nothing is shared, and it succeeds when tried again; with
 * @calls, y's allocation's driver calls are traced. */
static void
shared_run (const char *fail, int nth, char ***calls)
{
  FakeCudaCounts base;
  g_autoptr (MemresResource) mr = NULL, other = NULL;
  MemresBuffer *x, *keep, *y, *v, *z, *kept;
  g_autoptr (GError) error = NULL;
  gboolean fake = mt_driver_is_fake ();
  MemresStream s, b;
  MtStreamHold *hold;
  gboolean shared;
  guint64 at, tail;
  gsize g;

  if (fake)
    mt_counts_snapshot (&base);
  s = mt_stream_new_on (0);
  b = mt_stream_new_on (0);
  mr = mt_new_ok ("arena");
  other = mt_new_ok ("arena");
  g = gran (mr);
  x = mt_alloc_ok (mr, g / 4, s);
  at = memres_buffer_get_address (x);
  keep = mt_alloc_ok (mr, g - g / 4, s);
  g_assert_cmpuint (memres_buffer_get_address (keep), ==, at + g / 4);
  z = mt_alloc_ok (other, g / 4, s);
  kept = mt_alloc_ok (other, g - g / 4, s);
  mt_fill_byte_ok (keep, 0x11, s);
  mt_sync_ok (s);
  hold = mt_stream_hold (s);
  mt_fill_byte_ok (x, 0xaa, s);
  g_assert_true (memres_buffer_copy_to (x, z, s, &error));
  g_assert_no_error (error);
  mt_close_ok (x, s);
  if (fail != NULL)
    mt_fake_fail_call (fail, nth, CUDA_ERROR_INVALID_VALUE);
  else if (fake && calls != NULL)
    mt_fake_trace_begin ();
  y = memres_resource_allocate (mr, g + g / 4, s, &error);
  if (fail == NULL && fake && calls != NULL)
    {
      const char **names = NULL;
      int n = mt_fake_trace_end (&names);

      *calls = g_new0 (char *, n + 1);
      for (int i = 0; i < n; i++)
        (*calls)[i] = g_strdup (names[i]);
    }
  if (fail != NULL)
    mt_fake_reset_faults ();
  if (y == NULL)
    {
      g_assert_nonnull (error);
      g_assert_true (error->domain == MEMRES_CUDA_ERROR || error->domain == MEMRES_ERROR);
      g_assert_cmpuint (counter (mr, "granules_shared"), ==, 0);
      g_assert_cmpuint (counter (mr, "shared_pending"), ==, 0);
      g_clear_error (&error);
      y = mt_alloc_ok (mr, g + g / 4, s);
    }
  g_assert_no_error (error);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, at + g);
  /* a failure of the event's record (before any mapping) creates granule 2 instead */
  shared = counter (mr, "granules_shared") == 1;
  g_assert_true (shared || fail != NULL);
  g_assert_cmpuint (counter (mr, "shared_pending"), ==, shared ? 1 : 0);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, shared ? 2 * g : 3 * g);
  tail = at + 2 * g + g / 4;
  /* B: neither granule 2's other bytes (granule 0's keep) nor x's old bytes (y's tail) */
  v = mt_alloc_ok (mr, g / 2, b);
  g_assert_true (memres_buffer_get_address (v) >= (shared ? at + 3 * g : at + g)
                 || memres_buffer_get_address (v) + g / 2 <= at);
  mt_fill_byte_ok (v, 0xbb, b);
  mt_sync_ok (b);
  mt_fill_byte_ok (y, 0xcc, s);
  /* y's bytes in granule 2 are x's old ones in granule 0: keep's are not touched */
  g_assert_true (memres_buffer_copy_to (keep, kept, s, &error));
  g_assert_no_error (error);
  /* keep's close ends the sharing: granule 0's address retired, granule 2's rest tagged S */
  mt_close_ok (keep, s);
  g_assert_cmpuint (counter (mr, "shared_pending"), ==, 0);
  g_assert_cmpuint (counter (mr, "lent_pending"), ==, shared ? 1 : 0);
  mt_close_ok (v, b);
  v = mt_alloc_ok (mr, g / 2, b);
  g_assert_true (memres_buffer_get_address (v) >= (shared ? tail + 3 * g / 4 : at + g)
                 || memres_buffer_get_address (v) + g / 2 <= at);
  mt_fill_byte_ok (v, 0xbb, b);
  mt_sync_ok (b);
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  mt_assert_bytes (z, 0xaa, s);
  mt_assert_bytes (kept, 0x11, s);
  mt_assert_bytes (y, 0xcc, s);
  mt_assert_bytes (v, 0xbb, b);
  /* S is past the sharing's end: granule 0's address goes */
  reap_retired (mr, 4 * g, s);
  if (shared)
    g_assert_cmpuint (counter (mr, "lent_pending"), ==, 0);
  mt_close_ok (y, s);
  mt_close_ok (v, b);
  mt_close_ok (z, s);
  mt_close_ok (kept, s);
  lend_run_end (&mr, &other, s, b, &base);
}

static void
test_hazard_shared (void)
{
  if (!mt_hazard_begin ())
    return;
  shared_run (NULL, 0, NULL);
  mt_hazard_end ();
}

/* Every driver call of the sharing allocation fails in turn (shared_run()). */
static void
test_faults_shared (void)
{
  g_auto (GStrv) calls = NULL;
  guint swept = 0;

  if (!mt_require_fake ("faults are injected by the fake"))
    return;
  if (!mt_hazard_begin ())
    return;
  shared_run (NULL, 0, &calls);
  for (guint i = 0; calls[i] != NULL; i++)
    {
      int nth = mt_call_ordinal (calls, i);

      g_test_message ("shared: call %u, %s #%d, fails", i, calls[i], nth);
      shared_run (calls[i], nth, NULL);
      swept++;
    }
  /* at least granule 1's cuMemCreate, the event, and each granule's cuMemMap and cuMemSetAccess */
  g_assert_cmpuint (swept, >=, 6);
  mt_hazard_end ();
}

/* An old address of lent memory goes at the first allocation after its stream is past the
 * lending, whatever another stream still holds. Stream B, held, frees u (a range tagged B whose
 * event is pending); on S, held too, x's two granules are lent to y as in lent_run(), after an
 * allocation asked whether B's and S's freed ranges may settle. S alone is then released and
 * synchronized (a device synchronize would wait for B): the next allocation on S unmaps both old
 * addresses (lent_pending 0, granules_reaped 2, two cuMemUnmap calls), as the arena asks each
 * retired address's own event (cuEventQuery). Asked through a stream of the arena's own made to
 * wait for every event it was asked about, B's among them, the answer would be "not yet" until B
 * is released (lent_pending 2). On the fake, the query failing first reaps nothing (the
 * allocation goes on; lent_pending 2, no unmap), and the next allocation reaps. */
static void
test_hazard_reap_own_stream (void)
{
  ArenaStreams t;
  MemresResource *mr;
  MemresBuffer *u, *x, *w, *y, *n;
  gboolean fake = mt_driver_is_fake ();
  MtStreamHold *hold_s, *hold_b;
  MemresStream s, b;
  long unmaps = 0;
  guint64 at;
  gsize g;

  if (!arena_streams_begin (&t, FALSE))
    return;
  mr = t.mr;
  s = t.a;
  b = t.b;
  g = gran (mr);
  u = mt_alloc_ok (mr, g, b);
  x = mt_alloc_ok (mr, 2 * g, s);
  at = memres_buffer_get_address (x);
  w = mt_alloc_ok (mr, g + g / 2, s);
  g_assert_cmpuint (memres_buffer_get_address (w), ==, at + 2 * g);
  mt_fill_byte_ok (x, 0x11, s);
  mt_sync_ok (s);
  hold_b = mt_stream_hold (b);
  hold_s = mt_stream_hold (s);
  mt_close_ok (u, b);
  mt_fill_byte_ok (x, 0xaa, s);
  mt_close_ok (x, s);
  y = mt_alloc_ok (mr, 2 * g + g / 4, s);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, at + 3 * g + g / 2);
  g_assert_cmpuint (counter (mr, "granules_lent"), ==, 2);
  g_assert_cmpuint (counter (mr, "lent_pending"), ==, 2);
  g_assert_cmpuint (counter (mr, "granules_reaped"), ==, 0);
  mt_fill_byte_ok (y, 0xcc, s);
  mt_stream_release (hold_s);
  mt_sync_ok (s);
  g_assert_true (mt_stream_is_held (hold_b));
  if (fake)
    {
      unmaps = mt_fake_call_count ("cuMemUnmap");
      mt_fake_fail_call ("cuEventQuery", 1, CUDA_ERROR_INVALID_VALUE);
      n = mt_alloc_ok (mr, 4 * g, s);
      mt_fake_reset_faults ();
      g_assert_cmpuint (counter (mr, "lent_pending"), ==, 2);
      g_assert_cmpuint (counter (mr, "granules_reaped"), ==, 0);
      g_assert_cmpint (mt_fake_call_count ("cuMemUnmap"), ==, unmaps);
      mt_close_ok (n, s);
      unmaps = mt_fake_call_count ("cuMemUnmap");
    }
  n = mt_alloc_ok (mr, 4 * g, s);
  g_assert_cmpuint (counter (mr, "lent_pending"), ==, 0);
  g_assert_cmpuint (counter (mr, "granules_reaped"), ==, 2);
  /* the two old addresses, adjacent: one cuMemUnmap */
  if (fake)
    g_assert_cmpint (mt_fake_call_count ("cuMemUnmap") - unmaps, ==, 1);
  g_assert_true (mt_stream_is_held (hold_b));
  mt_assert_bytes (y, 0xcc, s);
  mt_stream_release (hold_b);
  mt_close_ok (n, s);
  mt_close_ok (y, s);
  mt_close_ok (w, s);
  arena_streams_end (&t);
}

/* The snapshot of an arena with a shared granule (as in shared_run()): granule 2 maps granule 0's
 * memory for y's bytes [0, g/4), so its other bytes and granule 0's bytes [0, g/4) are withheld
 * (one granule's worth); then keep's close retires granule 0's address whole; then its reap.
 * Every time each segment's blocks add up to its size, the withheld ones to what the lending
 * withholds, the others to reserved (the memory counted once) and the used ones to used. */
static void
test_snapshot_shared (void)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *x, *keep, *y;
  MtStreamHold *hold;
  MemresStream s;
  guint64 at;
  gsize g;

  if (!mt_hazard_begin ())
    return;
  s = mt_stream_new_on (0);
  mr = mt_new_ok ("arena");
  g = gran (mr);
  x = mt_alloc_ok (mr, g / 4, s);
  at = memres_buffer_get_address (x);
  keep = mt_alloc_ok (mr, g - g / 4, s);
  g_assert_cmpuint (memres_buffer_get_address (keep), ==, at + g / 4);
  mt_sync_ok (s);
  snapshot_adds_up (mr, 0);
  hold = mt_stream_hold (s);
  mt_close_ok (x, s);
  y = mt_alloc_ok (mr, g + g / 4, s);
  g_assert_cmpuint (memres_buffer_get_address (y), ==, at + g);
  g_assert_cmpuint (counter (mr, "shared_pending"), ==, 1);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 2 * g);
  snapshot_adds_up (mr, g);
  mt_close_ok (keep, s);
  g_assert_cmpuint (counter (mr, "shared_pending"), ==, 0);
  g_assert_cmpuint (counter (mr, "lent_pending"), ==, 1);
  snapshot_adds_up (mr, g);
  mt_stream_release (hold);
  mt_sync_ok (s);
  mt_close_ok (mt_alloc_ok (mr, 4 * g, s), s);
  g_assert_cmpuint (counter (mr, "lent_pending"), ==, 0);
  snapshot_adds_up (mr, 0);
  mt_close_ok (y, s);
  mt_sync_ok (s);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s);
  mt_hazard_end ();
}

/* ---- memory: a training-shaped sequence on one stream ---------------------------------------- */

/* mt_hazard_begin() for a test of @res's reservation: FALSE (skipped, the hazard ended) where
 * the driver cannot give it whole. That is the fake under valgrind: memcheck lets a process map
 * tens of GiB (the fake's one mapping of its address space gets 32 GiB there, the VMM zone half
 * of it), so that a card's 160 or 282 GiB cannot be reserved, and the arena halves its
 * reservation until it fits (10 GiB): the figures asserted are a card's reservation's, which such
 * a run cannot have. Elsewhere (the fake outside valgrind: 16 TiB; a GPU) it is reserved, and
 * memory_arena_new() asserts that the arena got it all. */
static gboolean
memory_begin (const MtReservation *res)
{
  CUdeviceptr base = 0;
  CUresult r;

  if (!mt_hazard_begin ())
    return FALSE;
  if (res->bytes == 0 || !mt_driver_is_fake ())
    return TRUE;
  r = mt_driver ()->cuMemAddressReserve (&base, res->bytes, 0, 0, 0);
  if (r == CUDA_SUCCESS)
    {
      g_assert_cmpint (mt_driver ()->cuMemAddressFree (base, res->bytes), ==, CUDA_SUCCESS);
      return TRUE;
    }
  g_assert_cmpint (r, ==, CUDA_ERROR_OUT_OF_MEMORY);
  g_test_skip_printf ("the fake's address space cannot hold %s (%" G_GUINT64_FORMAT
                      " bytes): under valgrind, which maps tens of GiB",
                      res->device, res->bytes);
  mt_hazard_end ();
  return FALSE;
}

/* The arena of @res (testutil.h: the default reservation, or a card's) with check=true (the
 * counter heap_errors, docs/arena.md), its reservation checked; by default twice the device's
 * memory (on the fake 256 MiB, see main()). */
static MemresResource *
memory_arena_new (const MtReservation *res)
{
  g_autofree char *spec
      = g_strconcat (res->spec, strchr (res->spec, ':') != NULL ? "," : ":", "check=true", NULL);
  MemresResource *mr = mt_new_ok (spec);
  size_t total = 0;

  if (res->bytes != 0)
    g_assert_cmpuint (counter (mr, "virtual"), ==, res->bytes);
  else if (mt_driver_is_fake ())
    {
      g_assert_cmpint (mt_driver ()->cuDeviceTotalMem (&total, 0), ==, CUDA_SUCCESS);
      g_assert_cmpuint (counter (mr, "virtual"), ==, 2 * (guint64) total);
    }
  return mr;
}

/* A deterministic training-shaped sequence on one stream that is held (the device behind the
 * host, as under PyTorch) for each step: a forward pass allocates activations whose sizes scale
 * with the step's shape (temporaries freed at once), the backward pass frees them in reverse
 * while gradients of other sizes come and go; the stream is released and synchronized between
 * steps. Freed ranges cannot settle while the stream is held, yet they are the stream's own: the
 * physical peak stays within 1.03 times the peak used plus one granule per live buffer. */
static void
test_shifting_sizes (gconstpointer data)
{
  const MtReservation *res = data;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *act[24], *grad = NULL, *tmp;
  MemresStats st;
  MemresStream s;
  guint32 rng = 38;
  guint max_live = 0;
  gsize g;

  if (!memory_begin (res))
    return;
  s = mt_stream_new_on (0);
  mr = memory_arena_new (res);
  g = gran (mr);
  for (guint step = 0; step < 12; step++)
    {
      MtStreamHold *hold = mt_stream_hold (s);
      guint scale;

      rng = rng * 1103515245u + 12345u;
      scale = 1 + (rng >> 16) % 8;
      for (guint i = 0; i < G_N_ELEMENTS (act); i++)
        {
          gsize size = (gsize) scale * (1 + i % 5) * MiB / 4 + (i * 37 % 11) * 4 * KiB;

          act[i] = mt_alloc_ok (mr, size, s);
          tmp = mt_alloc_ok (mr, size * 3 / 2, s);
          mt_close_ok (tmp, s);
          max_live = MAX (max_live, i + 2);
        }
      for (guint i = G_N_ELEMENTS (act); i-- > 0;)
        {
          gsize size = (gsize) scale * (2 + i % 3) * MiB / 6 + 8 * KiB;
          MemresBuffer *next = mt_alloc_ok (mr, size, s);

          if (grad != NULL)
            mt_close_ok (grad, s);
          grad = next;
          mt_close_ok (act[i], s);
        }
      mt_close_ok (grad, s);
      grad = NULL;
      mt_stream_release (hold);
      mt_sync_ok (s);
    }
  st = stats_ok (mr);
  g_test_message (
      "shifting sizes (%s): peak physical %" G_GUINT64_FORMAT " / peak used %" G_GUINT64_FORMAT
      " = %.4f; %" G_GUINT64_FORMAT " granules created, %" G_GUINT64_FORMAT " remapped",
      res->device, st.reserved_high, st.used_high, (double) st.reserved_high / st.used_high,
      counter (mr, "granules_created"), counter (mr, "granules_remapped"));
  g_assert_cmpuint (st.reserved_high, <=, st.used_high * 103 / 100 + (guint64) max_live * g);
  /* the stream's freed ranges and the settled ones beside them serve it as one: 1.010 (1.049
   * when each was placed on its own) */
  g_assert_cmpuint (st.reserved_high, <=, st.used_high * 103 / 100);
  g_assert_cmpuint (counter (mr, "run_takes"), >, 0);
  g_assert_cmpuint (counter (mr, "heap_errors"), ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s);
  mt_hazard_end ();
}

/* ---- threads --------------------------------------------------------------------------------- */

#define PAIRS_THREADS 16

typedef struct
{
  MemresResource *mr;
  CUstream stream;
  gsize size;
  guint pairs;
} PairJob;

static gpointer
pairs_thread (gpointer data)
{
  PairJob *job = data;

  mt_pairs (job->mr, job->size, job->stream, job->pairs);
  return NULL;
}

/* Under valgrind (its preload library in LD_PRELOAD), far fewer pairs. */
static guint
pairs_per_thread (void)
{
  const char *preload = g_getenv ("LD_PRELOAD");

  return preload != NULL && strstr (preload, "vgpreload") != NULL ? 1000 : 100000;
}

static void
test_threads_pairs (void)
{
  g_autoptr (MemresResource) mr = NULL;
  GThread *threads[PAIRS_THREADS];
  PairJob jobs[PAIRS_THREADS];
  guint pairs = pairs_per_thread ();
  guint large_threads = 0;
  MemresStats st;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("arena");
  for (guint t = 0; t < PAIRS_THREADS; t++)
    {
      jobs[t].mr = mr;
      jobs[t].stream = mt_stream_new_on (0);
      jobs[t].size = (t % 4 == 0) ? 256 : (t % 4 == 1) ? 4 * KiB : (t % 4 == 2) ? 64 * KiB : MiB;
      jobs[t].pairs = pairs;
      large_threads += jobs[t].size > 64 * KiB;
      threads[t] = g_thread_new ("pairs", pairs_thread, &jobs[t]);
    }
  for (guint t = 0; t < PAIRS_THREADS; t++)
    g_thread_join (threads[t]);
  g_assert_cmpuint (counter (mr, "large_allocations"), ==, (guint64) large_threads * pairs);
  /* each small thread missed once: its first block (a slab or a block of its own) */
  g_assert_cmpuint (counter (mr, "misses"), <=, PAIRS_THREADS - large_threads);
  st = stats_ok (mr);
  g_assert_cmpuint (st.used_current, ==, 0);
  g_assert_cmpuint (counter (mr, "used"), ==, 0);
  /* the arena's own mark (MEMRES_KIND_OWN_USAGE: the core counts no bytes on the pair, whose
   * writes so stay on the thread's own lines, bench/pair-lines.py): a large buffer was live,
   * and at most one buffer of each thread at once (class bytes: 256 B, 4, 64 KiB, 1 MiB) */
  g_assert_true (memres_kind_get_flags (memres_resource_get_kind (mr)) & MEMRES_KIND_OWN_USAGE);
  g_assert_cmpuint (st.used_high, >=, MiB);
  g_assert_cmpuint (st.used_high, <=, (PAIRS_THREADS / 4) * (256 + 4 * KiB + 64 * KiB + MiB));
  /* four large buffers live at once at most: 4 MiB and their edges, plus the small slabs */
  g_assert_cmpuint (stats_ok (mr).reserved_high, <=, 8 * MiB + 4 * gran (mr));
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_assert_cmpuint (counter (mr, "slab_bytes"), ==, 0);
  for (guint t = 0; t < PAIRS_THREADS; t++)
    mt_stream_free (jobs[t].stream);
}

/* ---- replay target (issue 38, target 4) ------------------------------------------------------ */

static guint64
json_uint (const char *json, const char *key)
{
  g_autofree char *needle = g_strdup_printf ("\"%s\": ", key);
  const char *at = strstr (json, needle);

  g_assert_nonnull (at);
  return g_ascii_strtoull (at + strlen (needle), NULL, 10);
}

/* Inference-shaped (issue 38's target 3, on the fake): batches of 1-16 requests with prompts of
 * 32-512 tokens and 16-256 new tokens each (seed 383, as bench/workloads.py infer); at every
 * token each of 6 layers' key and value caches is allocated one token larger (256 dimensions of
 * 2 bytes per request and token) before the old one is freed, as torch.cat does, beside the
 * step's activations and logits; all of it freed at the batch's end. Many distinct, slowly
 * growing sizes on one stream that the host runs ahead of, never catching up inside a batch.
 * Target 3 asks for a physical peak within 1.03 times the peak used; on this shape the arena
 * holds 1.021 (24 granules for 23.5 used: the least whole granules there are) at each
 * reservation (mt_reservations). A cache grown by a token never fits the hole its predecessor left
 * (a token smaller), so the caches move through the range as a ring, and while the device has
 * not run past the frees, no granule of the hole behind the ring can move; since h-kv2 the
 * memory of its whole granules is lent to the ring's front (arena-lend.c: mapped there too, no
 * memory created). Since h-kv3 the ring's ends share one granule's memory: a new cache continues
 * in its stream's own free tail at the ring's front, into the settled bytes after it (a run
 * take, arena-runs.c arena_runs_best_fit()), and its last granule, which it covers at most half of,
 * is mapped with the memory of a granule of the hole whose bytes there are free while the rest of
 * it still holds an older cache. Until h-kvreal that held on a toy device only: the run best fit
 * chose between the ring's front and a run behind it by the run's length, and the front's run
 * reaches to the end of the reservation (twice the device's memory), so it won on a 256 MiB
 * device and lost on an 80 GiB one: 1.063 there (25 granules; as on the H100), 1.021 here. Now
 * the ring's front wins the tie whatever the reservation. Before h-kv3: 1.063 with lending alone,
 * 1.106 before lending, 1.233 before slabs were placed from the top of a range down (figures of
 * the 256 MiB device). /arena/memory/kv-growth-stable runs it with place=stable (arena-stable.c),
 * which must hold the same at every reservation to become the default: its tightest run lost
 * the ring's front the same way (1.106 on the 80 GiB and 141 GiB reservations, 1.021 on the
 * small one) until h-kvstable counted a run no longer than the most bytes ever live
 * (stable_length()); now 1.021 at all three. bench/workloads.py infer's whole sequence (the
 * weights, the prefill, the logits) with the device a few tokens behind is
 * tests/test-arena-infer.c. */
static void
test_kv_growth (gconstpointer data)
{
  const MtReservation *res = data;
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *kv[12], *x, *logits;
  MemresStats st;
  MemresStream s;
  guint32 rng = 383;
  gsize tok = 256 * 2;

  if (!memory_begin (res))
    return;
  s = mt_stream_new_on (0);
  mr = memory_arena_new (res);
  for (guint batch = 0; batch < 6; batch++)
    {
      MtStreamHold *hold = mt_stream_hold (s);
      guint b, prompt, n_new;

      rng = rng * 1103515245u + 12345u;
      b = 1 + (rng >> 16) % 16;
      rng = rng * 1103515245u + 12345u;
      prompt = 32 + (rng >> 16) % 481;
      rng = rng * 1103515245u + 12345u;
      n_new = 16 + (rng >> 16) % 241;
      for (guint i = 0; i < G_N_ELEMENTS (kv); i++)
        kv[i] = mt_alloc_ok (mr, (gsize) b * prompt * tok, s);
      for (guint t = prompt; t < prompt + n_new; t++)
        {
          x = mt_alloc_ok (mr, (gsize) b * tok, s);
          for (guint i = 0; i < G_N_ELEMENTS (kv); i++)
            {
              MemresBuffer *grown = mt_alloc_ok (mr, (gsize) b * (t + 1) * tok, s);

              mt_close_ok (kv[i], s);
              kv[i] = grown;
            }
          logits = mt_alloc_ok (mr, (gsize) b * 32000 * 2, s);
          mt_close_ok (x, s);
          mt_close_ok (logits, s);
        }
      for (guint i = 0; i < G_N_ELEMENTS (kv); i++)
        mt_close_ok (kv[i], s);
      mt_stream_release (hold);
      mt_sync_ok (s);
    }
  st = stats_ok (mr);
  g_test_message ("kv growth (%s, %s): peak physical %" G_GUINT64_FORMAT
                  " / peak used %" G_GUINT64_FORMAT " = %.4f; %" G_GUINT64_FORMAT
                  " granules created, %" G_GUINT64_FORMAT " remapped, %" G_GUINT64_FORMAT
                  " lent, %" G_GUINT64_FORMAT " shared, %" G_GUINT64_FORMAT " run takes",
                  res->device, res->spec, st.reserved_high, st.used_high,
                  (double) st.reserved_high / st.used_high, counter (mr, "granules_created"),
                  counter (mr, "granules_remapped"), counter (mr, "granules_lent"),
                  counter (mr, "granules_shared"), counter (mr, "run_takes"));
  g_assert_cmpuint (st.reserved_high, <=, st.used_high * 103 / 100);
  g_assert_cmpuint (counter (mr, "granules_lent"), >, 0);
  g_assert_cmpuint (counter (mr, "granules_shared"), >, 0);
  g_assert_cmpuint (counter (mr, "heap_errors"), ==, 0); /* the run index after 324 run takes */
  /* a share whose donor still holds the slab ends at the trim, and everything goes back */
  trim_ok (mr);
  g_assert_cmpuint (counter (mr, "shared_pending"), ==, 0);
  g_assert_cmpuint (counter (mr, "lent_pending"), ==, 0);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s);
  mt_hazard_end ();
}

/* Each committed trace replayed against `arena` on the fake with a large device: peak reserved
 * over peak requested at most 1.03 (a deterministic figure: the fake backs memory lazily). */
static void
test_replay_target (void)
{
  const char *tool = g_getenv ("MEMRES_TOOL"), *dir_name = g_getenv ("MEMRES_TRACES_DIR");
  g_autoptr (GDir) dir = NULL;
  const char *name;
  guint traces = 0;

  if (!mt_require_fake ("the figure is the fake's (its granularity, lazily backed memory)"))
    return;
  g_assert_nonnull (tool);
  g_assert_nonnull (dir_name);
  dir = g_dir_open (dir_name, 0, NULL);
  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *log = g_build_filename (dir_name, name, NULL);
      g_auto (GStrv) env = g_get_environ ();
      g_autofree char *out = NULL, *err = NULL;
      GError *error = NULL;
      gint status = 0;
      const char *argv[] = { tool, "replay", "--json", log, "arena", NULL };
      static const char *const replay_specs[]
          = { "arena", "arena:park=true", "arena:place=stable" };
      guint64 used, reserved;

      if (!g_str_has_suffix (name, ".csv"))
        continue;
      traces++;
      /* and with park=true (plugins/arena/arena-park.c) and place=stable (arena-stable.c),
       * the same target */
      for (guint spec = 0; spec < G_N_ELEMENTS (replay_specs); spec++)
        {
          argv[4] = replay_specs[spec];
          g_clear_pointer (&out, g_free);
          g_clear_pointer (&err, g_free);
          env = g_environ_setenv (env, "FAKECUDA_DEVICE_MEMORY", "256GiB", TRUE);
          g_assert_true (g_spawn_sync (NULL, (char **) argv, env, G_SPAWN_DEFAULT, NULL, NULL, &out,
                                       &err, &status, &error));
          g_assert_no_error (error);
          g_test_message ("%s: %s%s", name, out, err);
          g_assert_true (g_spawn_check_wait_status (status, NULL));
          used = json_uint (out, "peak_used_bytes");
          reserved = json_uint (out, "peak_reserved_bytes");
          g_test_message ("%s against %s: peak reserved / peak requested = %.4f", name, argv[4],
                          (double) reserved / (double) used);
          g_assert_cmpuint (json_uint (out, "failures"), ==, 0);
          g_assert_cmpuint (used, ==, json_uint (out, "log_peak_used_bytes"));
          g_assert_cmpuint (reserved * 100, <=, used * 103);
        }
    }
  g_assert_cmpuint (traces, >=, 2); /* issue 38's target: resnet18.csv and transformer.csv */
}

/* mt_reservations with place=stable (main()) */
static MtReservation stable_reservations[MT_N_RESERVATIONS];
static char *stable_specs[MT_N_RESERVATIONS];

int
main (int argc, char **argv)
{
  int rc;

  /* a small fake device, so that the out-of-memory test fills it quickly (read at cuInit); the
   * memory figures are asserted at the reservations of real cards too (mt_reservations) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "256MiB", FALSE);
  mt_init (&argc, &argv);
  mt_log_capture_init ();

  g_test_add_func ("/arena/basic", test_basic);
  g_test_add_func ("/arena/options/bad", test_bad_options);
  g_test_add_func ("/arena/settle/eager", test_settle_eager);
  g_test_add_func ("/arena/remap/no-create", test_remap_no_create);
  g_test_add_func ("/arena/remap/release-threshold", test_release_threshold);
  g_test_add_func ("/arena/trim/keeps", test_trim_keeps);
  g_test_add_func ("/arena/faults/allocate", test_faults_allocate);
  g_test_add_func ("/arena/faults/remap", test_faults_remap);
  g_test_add_func ("/arena/faults/close", test_faults_close);
  g_test_add_func ("/arena/faults/park", test_faults_park);
  g_test_add_func ("/arena/faults/trim", test_faults_trim);
  for (guint i = 0; i < MT_N_RESERVATIONS; i++)
    {
      const MtReservation *res = &mt_reservations[i];
      MtReservation *stable = &stable_reservations[i];
      g_autofree char *shifting = g_strconcat ("/arena/memory/shifting-sizes/", res->name, NULL);
      g_autofree char *kv = g_strconcat ("/arena/memory/kv-growth/", res->name, NULL);
      g_autofree char *kv_stable = g_strconcat ("/arena/memory/kv-growth-stable/", res->name, NULL);

      g_test_add_data_func (shifting, res, test_shifting_sizes);
      g_test_add_data_func (kv, res, test_kv_growth);
      /* and with place=stable (arena-stable.c), which is to hold the same at every reservation */
      *stable = *res;
      stable->spec = stable_specs[i] = g_strconcat (
          res->spec, strchr (res->spec, ':') != NULL ? "," : ":", "place=stable", NULL);
      g_test_add_data_func (kv_stable, stable, test_kv_growth);
    }
  for (guint i = 0; i < G_N_ELEMENTS (hazards); i++)
    g_test_add_data_func (hazard_names[i], &hazards[i], test_hazard);
  g_test_add_func ("/arena/hazard/large-reuse", test_hazard_large_reuse);
  g_test_add_func ("/arena/hazard/lent", test_hazard_lent);
  g_test_add_func ("/arena/faults/lent", test_faults_lent);
  g_test_add_func ("/arena/hazard/shared", test_hazard_shared);
  g_test_add_func ("/arena/faults/shared", test_faults_shared);
  g_test_add_func ("/arena/hazard/reap-own-stream", test_hazard_reap_own_stream);
  g_test_add_func ("/arena/snapshot/shared", test_snapshot_shared);
  g_test_add_func ("/arena/threads/pairs", test_threads_pairs);
  g_test_add_func ("/arena/replay/target", test_replay_target);
  /* last: a failing release in finalize leaves that granule with the driver */
  g_test_add_func ("/arena/finalize/faults", test_faults_finalize);
  g_test_add_func ("/arena/resize/faults", test_faults_resize);
  rc = g_test_run ();
  for (guint i = 0; i < MT_N_RESERVATIONS; i++)
    g_free (stable_specs[i]);
  return rc;
}

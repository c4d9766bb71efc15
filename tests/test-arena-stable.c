/* test-arena-stable.c: `arena:place=stable` (docs/arena.md, the `place` bullet; issue 38) and its
 * remap headroom (arena-headroom.c) broken on purpose, against the fake driver: the fault sweep of
 * every driver call of a stable allocation (a headroom creation and a take across a settled and a
 * tagged range included), of resize, remap, trim and finalize; trim with a grown headroom; the
 * counters granules_refaulted and headroom exact on a constructed sequence (stream hazards, sleep,
 * resize and lending: test-arena-stable-streams.c). Every allocation of interest is on a stream of
 * its own (place=stable leaves the legacy and the per-thread streams to best fit). */
#include "testutil.h"

#include <string.h>

#include "arena-check.h"
#include "segment-check.h"
#include "arena-sweep.h"

#define STABLE "arena:place=stable"

/* ---- the fault sweep ------------------------------------------------------------------------- */

/* The byte each buffer of the case's set-up was filled with (0: none), by index in Ctx.bufs;
 * the case's own new buffers are filled by the check. */
static guint8 kept_byte[G_N_ELEMENTS (((Ctx *) NULL)->bufs)];

static void
fill_kept (Ctx *c, guint i, guint8 byte)
{
  kept_byte[i] = byte;
  mt_fill_byte_ok (c->bufs[i], byte, c->stream);
}

/* No allocation lost: the set-up's buffers hold their bytes; the others (an operation's new
 * buffer) take a fill and read it back. */
static void
check_kept (Ctx *c, gboolean ok)
{
  for (guint i = 0; i < c->n; i++)
    {
      if (c->bufs[i] == NULL || kept_byte[i] == 0)
        {
          if (c->bufs[i] != NULL)
            {
              mt_fill_byte_ok (c->bufs[i], 0x3d, c->stream);
              mt_assert_bytes (c->bufs[i], 0x3d, c->stream);
            }
          continue;
        }
      mt_assert_bytes (c->bufs[i], kept_byte[i], c->stream);
    }
}

/* A buffer of @size bytes on c->stream, appended to c->bufs. */
static gboolean
alloc_on_stream (Ctx *c, gsize size, GError **error)
{
  MemresBuffer *b = memres_resource_allocate (c->mr, size, c->stream, error);

  if (b == NULL)
    return FALSE;
  c->bufs[c->n++] = b;
  return TRUE;
}

static void
setup_empty (Ctx *c)
{
  memset (kept_byte, 0, sizeof kept_byte);
  c->mr = mt_new_ok (STABLE);
  c->stream = mt_stream_new_on (0);
}

/* ---- the counters: a constructed sequence ---------------------------------------------------- */

/* granules_refaulted, headroom (in granules), granules_created, granules_remapped and the
 * physical bytes (in granules) of @mr, asserted */
static void
assert_counts (MemresResource *mr, guint64 refaulted, guint64 headroom, guint64 created,
               guint64 remapped, guint64 physical)
{
  gsize g = gran (mr);

  g_assert_cmpuint (counter (mr, "granules_refaulted"), ==, refaulted);
  g_assert_cmpuint (counter (mr, "headroom"), ==, headroom * g);
  g_assert_cmpuint (counter (mr, "granules_created"), ==, created);
  g_assert_cmpuint (counter (mr, "granules_remapped"), ==, remapped);
  g_assert_cmpuint (counter (mr, "physical"), ==, physical * g);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, physical * g);
}

/* On stream c->stream: a (32 granules) | x (1) from the start of the reservation, a closed; c (33
 * granules) then lies after x and takes a's 32 idle granules (moved: 32 remapped, 1 created). The
 * peak of granules in use is then 34 (x and c), the headroom's cap 34 / 32 = 1 granule; c closed
 * and a' of 32 granules placed where a was (the tightest run): its 32 granules refault, the
 * headroom is 1 granule, and a' moves 32 of c's idle granules (33 + 1 mapped: no room to create
 * 32). bufs[0] is x (0x58), bufs[1] a' (0xa1); addr_c is a's address. */
static void
setup_refaulted (Ctx *c)
{
  MemresBuffer *a, *cc;
  gsize g;

  setup_empty (c);
  g = gran (c->mr);
  a = mt_alloc_ok (c->mr, 32 * g, c->stream);
  c->addr_c = memres_buffer_get_address (a);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, g, c->stream);
  g_assert_cmphex (memres_buffer_get_address (c->bufs[0]), ==, c->addr_c + 32 * g);
  fill_kept (c, 0, 0x58);
  mt_close_ok (a, c->stream);
  cc = mt_alloc_ok (c->mr, 33 * g, c->stream);
  g_assert_cmphex (memres_buffer_get_address (cc), ==, c->addr_c + 33 * g);
  assert_counts (c->mr, 0, 0, 34, 32, 34);
  mt_close_ok (cc, c->stream);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 32 * g, c->stream);
  g_assert_cmphex (memres_buffer_get_address (c->bufs[1]), ==, c->addr_c);
  fill_kept (c, 1, 0xa1);
  assert_counts (c->mr, 32, 1, 34, 64, 34);
}

/* setup_refaulted(), then a' closed: c placed again at 33 is the next placement, whose 32
 * granules refault (test_counters(), test_headroom_failed_placement()) */
static void
setup_refaulted_closed (Ctx *c)
{
  setup_refaulted (c);
  mt_close_ok (c->bufs[1], c->stream);
  c->bufs[1] = NULL;
}

/* The counters on a constructed sequence (setup_refaulted(), then as the comments say; a
 * granule of the sequence is the index of one from a's address on). The headroom grows with the
 * refaults up to 1/32 of the peak of granules in use as it was at the refault; a placement that
 * needs more granules than the headroom allows moves them all (the headroom creates a whole
 * placement or none). */
static void
test_counters (void)
{
  FakeCudaCounts base;
  MemresBuffer *cc, *y, *w;
  Ctx c = { 0 };
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("the fake's counts"))
    return;
  mt_counts_snapshot (&base);
  /* a' closed, c placed again at 33: 32 granules refault (64), the headroom stays 1 (34 / 32),
   * and 34 mapped + 32 > 34 + 1: a''s 32 idle ones moved (96) */
  setup_refaulted_closed (&c);
  g = gran (c.mr);
  cc = mt_alloc_ok (c.mr, 33 * g, c.stream);
  g_assert_cmphex (memres_buffer_get_address (cc), ==, c.addr_c + 33 * g);
  assert_counts (c.mr, 64, 1, 34, 96, 34);
  mt_fill_byte_ok (cc, 0xcc, c.stream);
  /* y where a' was, c live: 32 refaults (96), nothing idle: 32 created; the peak in use 66, but
   * the headroom's cap is taken at the refault (34 / 32): still 1 */
  y = mt_alloc_ok (c.mr, 32 * g, c.stream);
  g_assert_cmphex (memres_buffer_get_address (y), ==, c.addr_c);
  assert_counts (c.mr, 96, 1, 66, 96, 66);
  /* y closed and settled; w (34) after c: 66 + 34 > 66 + 1, y's 32 idle granules moved (128),
   * 2 created; the peak in use 68 */
  mt_close_ok (y, c.stream);
  mt_sync_ok (c.stream);
  g_assert_true (memres_resource_trim (c.mr, G_MAXSIZE, NULL));
  w = mt_alloc_ok (c.mr, 34 * g, c.stream);
  g_assert_cmphex (memres_buffer_get_address (w), ==, c.addr_c + 66 * g);
  assert_counts (c.mr, 96, 1, 68, 128, 68);
  mt_fill_byte_ok (w, 0x77, c.stream);
  /* w closed, y again where it was: 32 refaults (128), the headroom 68 / 32 = 2; 68 + 32 > 68 +
   * 2: w's idle granules moved (160) */
  mt_close_ok (w, c.stream);
  mt_sync_ok (c.stream);
  g_assert_true (memres_resource_trim (c.mr, G_MAXSIZE, NULL));
  y = mt_alloc_ok (c.mr, 32 * g, c.stream);
  g_assert_cmphex (memres_buffer_get_address (y), ==, c.addr_c);
  assert_counts (c.mr, 128, 2, 68, 160, 68);
  mt_fill_byte_ok (y, 0x99, c.stream);
  mt_assert_bytes (cc, 0xcc, c.stream);
  mt_assert_bytes (y, 0x99, c.stream);
  mt_assert_bytes (c.bufs[0], 0x58, c.stream);
  mt_close_ok (cc, c.stream);
  mt_close_ok (y, c.stream);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
}

/* ---- the fault sweep's cases ---------------------------------------------------------------- */

static gboolean
op_alloc_large (Ctx *c, GError **error)
{
  return alloc_on_stream (c, 3 * gran (c->mr) + 1000, error);
}

static gboolean
op_alloc_small (Ctx *c, GError **error)
{
  return alloc_on_stream (c, 1000, error);
}

/* On c->stream: p (2 granules) | q (2) | [@with_r: r (2) |] x (1, @byte); p (and r) closed,
 * settled and their granules given back (trim), q closed (tagged with the stream): the run p + q
 * of 4 granules, half of it to back, or with r the run p + q + r, settled, tagged, settled (a
 * failure backing r drops what p's part held). addr_c: p's address. */
static void
setup_runs (Ctx *c, gboolean with_r, guint8 byte)
{
  MemresBuffer *p, *q, *r = NULL;
  gsize g;

  setup_empty (c);
  g = gran (c->mr);
  p = mt_alloc_ok (c->mr, 2 * g, c->stream);
  q = mt_alloc_ok (c->mr, 2 * g, c->stream);
  if (with_r)
    r = mt_alloc_ok (c->mr, 2 * g, c->stream);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, g, c->stream);
  fill_kept (c, 0, byte);
  c->addr_c = memres_buffer_get_address (p);
  mt_close_ok (p, c->stream);
  if (r != NULL)
    mt_close_ok (r, c->stream);
  mt_sync_ok (c->stream);
  trim_ok (c->mr);
  g_assert_cmpuint (stats_ok (c->mr).reserved_current, ==, 3 * g);
  mt_close_ok (q, c->stream);
  g_assert_cmpuint (counter (c->mr, "tagged_bytes"), ==, 2 * g);
}

/* setup_runs() without r: the run p + q */
static void
setup_run (Ctx *c)
{
  setup_runs (c, FALSE, 0x52);
}

/* @n granules on the stream, placed @at granules past c->addr_c */
static gboolean
alloc_at (Ctx *c, guint n, guint at, GError **error)
{
  if (!alloc_on_stream (c, n * gran (c->mr), error))
    return FALSE;
  g_assert_cmphex (memres_buffer_get_address (c->bufs[c->n - 1]), ==,
                   c->addr_c + at * gran (c->mr));
  return TRUE;
}

/* 4 granules on the stream: the run p + q, taken across its two ranges (p's granules created) */
static gboolean
op_alloc_run (Ctx *c, GError **error)
{
  return alloc_at (c, 4, 0, error);
}

/* 3 granules on the stream: the window at the top end of the run p + q (1 granule to back, the
 * bottom one 2), the first granule of p left free */
static gboolean
op_alloc_run_top (Ctx *c, GError **error)
{
  return alloc_at (c, 3, 1, error);
}

/* setup_runs() with r: the run p + q + r */
static void
setup_run3 (Ctx *c)
{
  setup_runs (c, TRUE, 0x53);
}

/* 6 granules on the stream: the run p + q + r */
static gboolean
op_alloc_run3 (Ctx *c, GError **error)
{
  return alloc_at (c, 6, 0, error);
}

/* The first reservation (8 MiB) nearly full: the next large buffer on the stream needs another
 * (its runs never reach across two) */
static void
setup_full (Ctx *c)
{
  memset (kept_byte, 0, sizeof kept_byte);
  c->mr = mt_new_ok (STABLE ",reserve=8MiB");
  c->stream = mt_stream_new_on (0);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * gran (c->mr), c->stream);
  fill_kept (c, 0, 0x46);
}

static gboolean
op_alloc_grow (Ctx *c, GError **error)
{
  return alloc_on_stream (c, 2 * gran (c->mr) + 1000, error);
}

/* setup_refaulted(), then z (1.5 granules, 0x2a) after x: in the leftover idle granule of c and
 * one created (within the headroom: the peak in use 35), and x closed: its granule idle, 34 in
 * use, 35 mapped. The tightest window for another 1.5 granules is then right after z, with one
 * granule to back (its other one z's): within the headroom it is created (35 + 1 <= 35 + 1)
 * rather than moved from x's idle granule (x settled by a trim that keeps everything). */
static void
setup_headroom (Ctx *c)
{
  gsize g;

  setup_refaulted (c);
  g = gran (c->mr);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, 3 * g / 2, c->stream);
  g_assert_cmphex (memres_buffer_get_address (c->bufs[2]), ==, c->addr_c + 33 * g);
  fill_kept (c, 2, 0x2a);
  g_assert_cmpuint (counter (c->mr, "granules_created"), ==, 35);
  g_assert_cmpuint (counter (c->mr, "granules_remapped"), ==, 64);
  g_assert_cmpuint (counter (c->mr, "granules_refaulted"), ==, 33);
  g_assert_cmpuint (counter (c->mr, "headroom"), ==, g);
  mt_close_ok (c->bufs[0], c->stream);
  c->bufs[0] = NULL;
  /* settled (a trim that keeps everything): x's granule idle */
  mt_sync_ok (c->stream);
  g_assert_true (memres_resource_trim (c->mr, G_MAXSIZE, NULL));
  g_assert_cmpuint (stats_ok (c->mr).reserved_current, ==, 35 * g);
  g_assert_cmpuint (counter (c->mr, "physical_idle"), ==, g);
}

static gboolean
op_alloc_headroom (Ctx *c, GError **error)
{
  return alloc_on_stream (c, 3 * gran (c->mr) / 2, error);
}

/* After op_alloc_headroom(): the new buffer right after z, its granule created, none moved */
static void
check_headroom (Ctx *c, gboolean ok)
{
  gsize g = gran (c->mr);

  check_kept (c, ok);
  if (!ok)
    return;
  g_assert_cmphex (memres_buffer_get_address (c->bufs[3]), ==, c->addr_c + 33 * g + 3 * g / 2);
  g_assert_cmpuint (counter (c->mr, "granules_created"), ==, 36);
  g_assert_cmpuint (counter (c->mr, "granules_remapped"), ==, 64);
  g_assert_cmpuint (counter (c->mr, "physical_idle"), ==, g);
  g_assert_cmpuint (stats_ok (c->mr).reserved_current, ==, 36 * g);
}

/* bufs[0] (g + 1000 bytes, 0x6d) on the stream; with @blocked bufs[1] (0x6e) right after it */
static void
setup_resize (Ctx *c, gboolean blocked)
{
  setup_empty (c);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, gran (c->mr) + 1000, c->stream);
  if (blocked)
    {
      c->bufs[c->n++] = mt_alloc_ok (c->mr, gran (c->mr), c->stream);
      fill_kept (c, 1, 0x6e);
    }
  fill_kept (c, 0, 0x6d);
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

/* bufs[0] grown to @n granules on the stream; on failure as it was */
static gboolean
resize_to (Ctx *c, guint n, GError **error)
{
  if (memres_buffer_resize (c->bufs[0], n * gran (c->mr), c->stream, error))
    return TRUE;
  g_assert_cmphex (memres_buffer_get_address (c->bufs[0]), ==, c->addr_c);
  g_assert_cmpuint (memres_buffer_get_size (c->bufs[0]), ==, gran (c->mr) + 1000);
  return FALSE;
}

/* After resize_to(): bufs[0]'s first g + 1000 bytes kept (0x6d), grown or not; bufs[1]'s */
static void
check_resized (Ctx *c, gboolean ok)
{
  gsize g = gran (c->mr);
  g_autofree guint8 *host = g_malloc (g + 1000);

  g_assert_true (memres_buffer_read (c->bufs[0], 0, host, g + 1000, c->stream, NULL));
  mt_sync_ok (c->stream);
  for (gsize i = 0; i < g + 1000; i++)
    g_assert_cmpuint (host[i], ==, 0x6d);
  if (!ok)
    g_assert_cmpuint (memres_buffer_get_size (c->bufs[0]), ==, g + 1000);
  if (c->n > 1)
    mt_assert_bytes (c->bufs[1], 0x6e, c->stream);
}

/* the move of a blocked buffer by a remap of its whole granules (3 and a bit, grown to 6) */
static void
setup_remap (Ctx *c)
{
  gsize g;

  setup_empty (c);
  g = gran (c->mr);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, g + 1000, c->stream);
  c->bufs[c->n++] = mt_alloc_ok (c->mr, g, c->stream);
  fill_kept (c, 0, 0x6d);
  fill_kept (c, 1, 0x6e);
  c->addr_c = memres_buffer_get_address (c->bufs[0]);
}

static gboolean
op_resize (Ctx *c, GError **error)
{
  return resize_to (c, 4, error);
}

static gboolean
op_remap (Ctx *c, GError **error)
{
  return resize_to (c, 6, error);
}

/* setup_refaulted() with everything closed: 34 idle granules and a headroom of one */
static void
setup_idle (Ctx *c)
{
  setup_refaulted (c);
  for (guint i = 0; i < c->n; i++)
    mt_close_ok (c->bufs[i], c->stream);
  c->n = 0;
  memset (kept_byte, 0, sizeof kept_byte);
  mt_sync_ok (c->stream);
}

/* setup_idle() trimmed to 4 idle granules (each the sweep's iterations: 70 calls for 34), the
 * headroom still 1 */
static void
setup_idle_few (Ctx *c)
{
  setup_idle (c);
  g_assert_true (memres_resource_trim (c->mr, 4 * gran (c->mr), NULL));
  g_assert_cmpuint (counter (c->mr, "physical_idle"), ==, 4 * gran (c->mr));
  g_assert_cmpuint (counter (c->mr, "headroom"), ==, gran (c->mr));
}

static gboolean
op_trim (Ctx *c, GError **error)
{
  return memres_resource_trim (c->mr, 0, error);
}

static void
test_faults_allocate (void)
{
  run_sweep_checked ("stable allocate large", setup_empty, op_alloc_large, check_kept, 9);
  run_sweep_checked ("stable allocate small", setup_empty, op_alloc_small, check_kept, 3);
  run_sweep_checked ("stable allocate across a settled and a tagged range", setup_run, op_alloc_run,
                     check_kept, 3);
  run_sweep_checked ("stable allocate at the top of a settled and a tagged range", setup_run,
                     op_alloc_run_top, check_kept, 3);
  run_sweep_checked ("stable allocate across settled, tagged and settled ranges", setup_run3,
                     op_alloc_run3, check_kept, 5);
  run_sweep_checked ("stable allocate past the reservation", setup_full, op_alloc_grow, check_kept,
                     8);
  run_sweep_checked ("stable allocate within the headroom", setup_headroom, op_alloc_headroom,
                     check_headroom, 3);
}

static void
test_faults_resize (void)
{
  run_sweep_checked ("stable resize in place", setup_resize_free, op_resize, check_resized, 5);
  run_sweep_checked ("stable resize by move", setup_resize_blocked, op_resize, check_resized, 8);
  run_sweep_checked ("stable resize by remap", setup_remap, op_remap, check_resized, 8);
}

static void
test_faults_trim (void)
{
  run_sweep_checked ("stable trim", setup_idle_few, op_trim, check_kept, 5);
}

static void
test_faults_finalize (void)
{
  run_finalize_sweep (setup_idle_few);
}

/* A cuMemCreate refused (out of memory) within the headroom: the out-of-memory flush, the
 * headroom back to 0, and the retry moves x's idle granule instead of creating one. */
static void
test_headroom_refused (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  Ctx c = { 0 };
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  setup_headroom (&c);
  g = gran (c.mr);
  mt_fake_fail_call ("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
  MT_CHECK (op_alloc_headroom (&c, &error));
  mt_fake_reset_faults ();
  g_test_message ("refused: created %" G_GUINT64_FORMAT ", remapped %" G_GUINT64_FORMAT
                  ", released %" G_GUINT64_FORMAT ", idle %" G_GUINT64_FORMAT,
                  counter (c.mr, "granules_created"), counter (c.mr, "granules_remapped"),
                  counter (c.mr, "granules_released"), counter (c.mr, "physical_idle"));
  g_assert_cmpuint (counter (c.mr, "oom_flushes"), ==, 1);
  g_assert_cmpuint (counter (c.mr, "headroom"), ==, 0);
  g_assert_cmphex (memres_buffer_get_address (c.bufs[3]), ==, c.addr_c + 33 * g + 3 * g / 2);
  g_assert_cmpuint (counter (c.mr, "granules_created"), ==, 35);
  g_assert_cmpuint (counter (c.mr, "granules_remapped"), ==, 65);
  g_assert_cmpuint (counter (c.mr, "physical_idle"), ==, 0);
  g_assert_cmpuint (stats_ok (c.mr).reserved_current, ==, 35 * g);
  check_kept (&c, TRUE);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
}

/* The same refusal met by a resize: z (setup_headroom()) grown in place by one granule, which
 * the headroom would create, every cuMemCreate refused (the device full): as an allocation does,
 * the headroom goes back to 0 and x's idle granule is moved there; z keeps its address and
 * bytes. */
static void
test_headroom_refused_resize (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  g_autofree guint8 *host = NULL;
  Ctx c = { 0 };
  gboolean ok;
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  setup_headroom (&c);
  g = gran (c.mr);
  host = g_malloc (3 * g / 2);
  for (gint nth = 1; nth <= 8; nth++)
    mt_fake_fail_call ("cuMemCreate", nth, CUDA_ERROR_OUT_OF_MEMORY);
  ok = memres_buffer_resize (c.bufs[2], 5 * g / 2, c.stream, &error);
  mt_fake_reset_faults ();
  g_test_message ("resize: %s; created %" G_GUINT64_FORMAT ", remapped %" G_GUINT64_FORMAT
                  ", headroom %" G_GUINT64_FORMAT ", idle %" G_GUINT64_FORMAT,
                  ok ? "grown" : error->message, counter (c.mr, "granules_created"),
                  counter (c.mr, "granules_remapped"), counter (c.mr, "headroom"),
                  counter (c.mr, "physical_idle"));
  g_assert_no_error (error);
  g_assert_true (ok);
  g_assert_cmphex (memres_buffer_get_address (c.bufs[2]), ==, c.addr_c + 33 * g);
  g_assert_cmpuint (counter (c.mr, "headroom"), ==, 0);
  g_assert_cmpuint (counter (c.mr, "granules_created"), ==, 35);
  g_assert_cmpuint (counter (c.mr, "granules_remapped"), ==, 65);
  g_assert_cmpuint (counter (c.mr, "physical_idle"), ==, 0);
  g_assert_cmpuint (stats_ok (c.mr).reserved_current, ==, 35 * g);
  /* z's bytes before the resize, the other buffers' */
  kept_byte[2] = 0;
  g_assert_true (memres_buffer_read (c.bufs[2], 0, host, 3 * g / 2, c.stream, NULL));
  mt_sync_ok (c.stream);
  for (gsize i = 0; i < 3 * g / 2; i++)
    g_assert_cmpuint (host[i], ==, 0x2a);
  check_kept (&c, TRUE);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
}

/* A placement whose granules refault and whose mapping then fails counts no refault and grows
 * no headroom (it backed nothing); the same placement made again counts them once.
 * setup_refaulted(), a' closed, c placed again at 33 (32 granules refault, as in test_counters())
 * with the first cuMemMap failing: refused with the driver's error, 32 refaulted and a headroom of
 * 1 still; then placed: 64 refaulted. */
static void
test_headroom_failed_placement (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresBuffer *cc;
  Ctx c = { 0 };
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  setup_refaulted_closed (&c);
  g = gran (c.mr);
  mt_fake_fail_call ("cuMemMap", 1, CUDA_ERROR_UNKNOWN);
  cc = memres_resource_allocate (c.mr, 33 * g, c.stream, &error);
  mt_fake_reset_faults ();
  g_assert_null (cc);
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
  g_clear_error (&error);
  g_assert_cmpuint (counter (c.mr, "granules_refaulted"), ==, 32);
  g_assert_cmpuint (counter (c.mr, "headroom"), ==, g);
  cc = mt_alloc_ok (c.mr, 33 * g, c.stream);
  g_assert_cmphex (memres_buffer_get_address (cc), ==, c.addr_c + 33 * g);
  g_assert_cmpuint (counter (c.mr, "granules_refaulted"), ==, 64);
  g_assert_cmpuint (counter (c.mr, "headroom"), ==, g);
  mt_fill_byte_ok (cc, 0xcc, c.stream);
  mt_assert_bytes (cc, 0xcc, c.stream);
  check_kept (&c, TRUE);
  mt_close_ok (cc, c.stream);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
}

/* ---- trim with a grown headroom -------------------------------------------------------------- */

/* memres_resource_trim() keeps what it is asked to keep with a headroom grown (setup_idle(): 34
 * idle granules, the headroom 1): 10.5 granules kept are 11, then 1 byte 1, then none; the
 * headroom is not memory (it stays, and maps nothing), and the next placement where a' was
 * creates its granules again (a trim's release is no refault); nor does one where c was, whose
 * memory a' had moved away before the trim gave the last idle granule back. */
static void
test_trim_headroom (void)
{
  FakeCudaCounts base, now;
  GError *error = NULL;
  MemresBuffer *b, *cc;
  Ctx c = { 0 };
  gsize g;

  if (!mt_require_devices (1) || !mt_require_fake ("the fake's counts"))
    return;
  mt_counts_snapshot (&base);
  setup_idle (&c);
  g = gran (c.mr);
  /* settled (a trim that keeps everything): 34 idle */
  g_assert_true (memres_resource_trim (c.mr, G_MAXSIZE, &error));
  g_assert_cmpuint (counter (c.mr, "physical_idle"), ==, 34 * g);
  g_assert_true (memres_resource_trim (c.mr, 21 * g / 2, &error));
  g_assert_no_error (error);
  mt_counts_snapshot (&now);
  g_assert_cmpuint (stats_ok (c.mr).reserved_current, ==, 11 * g);
  g_assert_cmpuint (counter (c.mr, "physical"), ==, 11 * g);
  g_assert_cmpuint (counter (c.mr, "physical_idle"), ==, 11 * g);
  g_assert_cmpuint (counter (c.mr, "granules_released"), ==, 23);
  g_assert_cmpint (now.physical_handles - base.physical_handles, ==, 11);
  g_assert_cmpuint (counter (c.mr, "headroom"), ==, g);
  g_assert_true (memres_resource_trim (c.mr, 1, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (counter (c.mr, "physical"), ==, g);
  trim_ok (c.mr);
  mt_counts_snapshot (&now);
  g_assert_cmpuint (counter (c.mr, "physical"), ==, 0);
  g_assert_cmpuint (counter (c.mr, "granules_released"), ==, 34);
  g_assert_cmpint (now.physical_handles, ==, base.physical_handles);
  g_assert_cmpint (now.mappings, ==, base.mappings);
  b = mt_alloc_ok (c.mr, 32 * g, c.stream);
  g_assert_cmphex (memres_buffer_get_address (b), ==, c.addr_c);
  g_assert_cmpuint (counter (c.mr, "granules_refaulted"), ==, 32);
  g_assert_cmpuint (counter (c.mr, "granules_created"), ==, 66);
  g_assert_cmpuint (counter (c.mr, "physical"), ==, 32 * g);
  /* after b, over x's granule and c's 32 whose memory a' took: those were moves before the
   * trim, and a trim forgets them (its release is no move), so nothing refaults */
  cc = mt_alloc_ok (c.mr, 33 * g, c.stream);
  g_assert_cmphex (memres_buffer_get_address (cc), ==, c.addr_c + 32 * g);
  g_assert_cmpuint (counter (c.mr, "granules_refaulted"), ==, 32);
  g_assert_cmpuint (counter (c.mr, "headroom"), ==, g);
  g_assert_cmpuint (counter (c.mr, "granules_created"), ==, 99);
  g_assert_cmpuint (counter (c.mr, "physical"), ==, 65 * g);
  mt_fill_byte_ok (b, 0x42, c.stream);
  mt_fill_byte_ok (cc, 0x43, c.stream);
  mt_assert_bytes (b, 0x42, c.stream);
  mt_assert_bytes (cc, 0x43, c.stream);
  mt_close_ok (b, c.stream);
  mt_close_ok (cc, c.stream);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
}

int
main (int argc, char **argv)
{
  /* 128 granules of 2 MiB (backed lazily; read at cuInit) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "256M", FALSE);
  mt_init (&argc, &argv);
  mt_log_capture_init (); /* run_finalize_sweep()'s warnings */
  g_test_add_func ("/arena-stable/counters", test_counters);
  g_test_add_func ("/arena-stable/faults/allocate", test_faults_allocate);
  g_test_add_func ("/arena-stable/faults/resize", test_faults_resize);
  g_test_add_func ("/arena-stable/faults/trim", test_faults_trim);
  g_test_add_func ("/arena-stable/faults/finalize", test_faults_finalize);
  g_test_add_func ("/arena-stable/headroom/refused", test_headroom_refused);
  g_test_add_func ("/arena-stable/headroom/refused-resize", test_headroom_refused_resize);
  g_test_add_func ("/arena-stable/headroom/failed-placement", test_headroom_failed_placement);
  g_test_add_func ("/arena-stable/trim/headroom", test_trim_headroom);
  return g_test_run ();
}

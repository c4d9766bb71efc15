/* test-arena-stable.c: `arena:place=stable` (docs/arena.md, the `place` bullet; issue 38) and its
 * remap headroom (arena-headroom.c) broken on purpose, against the fake driver: the fault sweep of
 * every driver call of a stable allocation (a headroom creation and a take across a settled and a
 * tagged range included), of resize, remap, trim and finalize; stream hazards over runs that mix
 * a stream's own frees with settled ranges; trim with a grown headroom; sleep and wake of a tagged
 * buffer; resize in place and by a move; the counters granules_refaulted and headroom exact on a
 * constructed sequence. Every allocation of interest is on a stream of its own (place=stable
 * leaves the legacy and the per-thread streams to best fit). */
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
  setup_refaulted (&c);
  g = gran (c.mr);
  /* a' closed, c placed again at 33: 32 granules refault (64), the headroom stays 1 (34 / 32),
   * and 34 mapped + 32 > 34 + 1: a''s 32 idle ones moved (96) */
  mt_close_ok (c.bufs[1], c.stream);
  c.bufs[1] = NULL;
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

/* ---- trim with a grown headroom -------------------------------------------------------------- */

/* memres_resource_trim() keeps what it is asked to keep with a headroom grown (setup_idle(): 34
 * idle granules, the headroom 1): 10.5 granules kept are 11, then 1 byte 1, then none; the
 * headroom is not memory (it stays, and maps nothing), and the next placement where a' was
 * creates its granules again (a trim's release is no refault). */
static void
test_trim_headroom (void)
{
  FakeCudaCounts base, now;
  GError *error = NULL;
  MemresBuffer *b;
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
  mt_fill_byte_ok (b, 0x42, c.stream);
  mt_assert_bytes (b, 0x42, c.stream);
  mt_close_ok (b, c.stream);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
}

/* ---- stream hazards -------------------------------------------------------------------------- */

static void
test_hazard (gconstpointer data)
{
  mt_hazard_run (data);
}

static const MtHazard hazards[] = {
  { STABLE, 4 * (1 << 20), MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
  { STABLE, 4 * (1 << 20), MT_HAZARD_LEGACY, FALSE, FALSE, TRUE },
  { STABLE, 4 * (1 << 20), MT_HAZARD_DESTROYED, FALSE, FALSE, TRUE },
  { STABLE, 4 * 1024, MT_HAZARD_STREAM, FALSE, FALSE, TRUE },
};
static const char *const hazard_names[] = {
  "/arena-stable/hazard/stream/large",
  "/arena-stable/hazard/legacy/large",
  "/arena-stable/hazard/destroyed/large",
  "/arena-stable/hazard/stream/front",
};
G_STATIC_ASSERT (G_N_ELEMENTS (hazards) == G_N_ELEMENTS (hazard_names));

/* A run of A's own frees and settled ranges: p (2 granules) freed on A and settled, q (2) freed
 * on A while A is held with a fill of q queued; B's 4 granules get none of q's bytes (new memory
 * elsewhere: q's fill, run when A is released, would land in them), A's 4 granules take the run
 * p + q at once (its own free is ordered before); each reads back its own bytes. */
static void
test_hazard_run (void)
{
  ArenaStreams t;
  MemresBuffer *p, *q, *r, *y, *z;
  MtStreamHold *hold;
  guint64 at_p, at_q, at_y;
  gsize g;

  if (!arena_streams_begin_spec (&t, FALSE, STABLE))
    return;
  g = gran (t.mr);
  p = mt_alloc_ok (t.mr, 2 * g, t.a);
  q = mt_alloc_ok (t.mr, 2 * g, t.a);
  r = mt_alloc_ok (t.mr, g, t.a);
  at_p = memres_buffer_get_address (p);
  at_q = memres_buffer_get_address (q);
  g_assert_cmphex (at_q, ==, at_p + 2 * g);
  mt_fill_byte_ok (r, 0x52, t.a);
  mt_close_ok (p, t.a);
  mt_sync_ok (t.a);
  g_assert_true (memres_resource_trim (t.mr, G_MAXSIZE, NULL)); /* p settled */
  hold = mt_stream_hold (t.a);
  mt_fill_byte_ok (q, 0xaa, t.a);
  mt_close_ok (q, t.a);
  y = mt_alloc_ok (t.mr, 4 * g, t.b);
  at_y = memres_buffer_get_address (y);
  g_assert_true (at_y + 4 * g <= at_q || at_y >= at_q + 2 * g);
  z = mt_alloc_ok (t.mr, 4 * g, t.a);
  g_assert_cmphex (memres_buffer_get_address (z), ==, at_p);
  g_assert_cmpuint (counter (t.mr, "run_takes"), ==, 1); /* across p's range and q's */
  mt_fill_byte_ok (y, 0xbb, t.b);
  mt_fill_byte_ok (z, 0xcc, t.a);
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, t.b);
  mt_assert_bytes (z, 0xcc, t.a);
  mt_assert_bytes (r, 0x52, t.a);
  mt_close_ok (y, t.b);
  mt_close_ok (z, t.a);
  mt_close_ok (r, t.a);
  arena_streams_end (&t);
}

/* Random buffers of 64 KiB to 6 MiB on two streams, either held for a round at random (its
 * fills and frees queued, its frees tagged beside settled ranges: runs), each buffer filled on
 * its stream with a byte of its own and closed there, some resized: after each round both
 * streams released and every live buffer reads back its byte (a range handed to the other
 * stream before the fills queued on it ran would hold the wrong byte). */
static void
test_hazard_random (void)
{
  enum
  {
    LIVE = 48
  };
  g_autoptr (MemresResource) mr = NULL;
  MemresBuffer *live[LIVE] = { NULL };
  guint8 byte[LIVE];
  guint side[LIVE];
  MemresStream s[2];
  guint32 rng = 0x5eed;
  guint8 next_byte = 1;

  if (!mt_hazard_begin ())
    return;
  s[0] = mt_stream_new_on (0);
  s[1] = mt_stream_new_on (0);
  mr = mt_new_ok (STABLE ",check=true");
  for (guint round = 0; round < 24; round++)
    {
      MtStreamHold *hold[2] = { NULL, NULL };

      for (guint i = 0; i < 2; i++)
        if ((rng = rng * 1103515245u + 12345u) >> 16 & 1)
          hold[i] = mt_stream_hold (s[i]);
      for (guint op = 0; op < 40; op++)
        {
          guint k, r;

          rng = rng * 1103515245u + 12345u;
          r = rng >> 8;
          k = r % LIVE;
          if (live[k] != NULL && r % 5 == 0)
            {
              GError *error = NULL;
              gsize size = 64 * 1024 + (gsize) (r >> 4) % (6 << 20);

              /* grown or shrunk on its stream; its first bytes keep its byte */
              g_assert_true (memres_buffer_resize (live[k], size, s[side[k]], &error));
              g_assert_no_error (error);
              mt_fill_byte_ok (live[k], byte[k], s[side[k]]);
            }
          else if (live[k] != NULL)
            {
              mt_close_ok (live[k], s[side[k]]);
              live[k] = NULL;
            }
          else
            {
              side[k] = (r >> 3) & 1;
              byte[k] = next_byte;
              next_byte = next_byte == 255 ? 1 : next_byte + 1;
              live[k] = mt_alloc_ok (mr, 64 * 1024 + (gsize) (r >> 4) % (6 << 20), s[side[k]]);
              mt_fill_byte_ok (live[k], byte[k], s[side[k]]);
            }
        }
      for (guint i = 0; i < 2; i++)
        if (hold[i] != NULL)
          mt_stream_release (hold[i]);
      for (guint k = 0; k < LIVE; k++)
        if (live[k] != NULL)
          mt_assert_bytes (live[k], byte[k], s[side[k]]);
      g_assert_cmpuint (counter (mr, "heap_errors"), ==, 0);
      if (round % 4 == 3)
        trim_ok (mr);
    }
  g_test_message ("%" G_GUINT64_FORMAT " run takes, %" G_GUINT64_FORMAT
                  " settles, %" G_GUINT64_FORMAT " granules lent, %" G_GUINT64_FORMAT " refaulted",
                  counter (mr, "run_takes"), counter (mr, "settles"), counter (mr, "granules_lent"),
                  counter (mr, "granules_refaulted"));
  for (guint k = 0; k < LIVE; k++)
    if (live[k] != NULL)
      mt_close_ok (live[k], s[side[k]]);
  mt_sync_ok (s[0]);
  mt_sync_ok (s[1]);
  trim_ok (mr);
  g_assert_cmpuint (stats_ok (mr).reserved_current, ==, 0);
  g_clear_pointer (&mr, memres_resource_unref);
  mt_stream_free (s[0]);
  mt_stream_free (s[1]);
  mt_hazard_end ();
}

/* ---- sleep and resize ------------------------------------------------------------------------ */

/* A tagged buffer on a stream asleep (docs/sleep.md): its address range is not placed while it
 * sleeps, even for its own stream's stable placements (its granules unmapped, its bytes not
 * free); the wake gives back its bytes at its address. */
static void
test_sleep (void)
{
  g_autoptr (MemresSleepPolicy) policy = NULL;
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *k, *w, *o;
  CUstream s;
  guint64 at, at_o;
  gsize g, ks;

  if (!mt_require_devices (1) || !mt_require_fake ("the fake's counts"))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (STABLE);
  s = mt_stream_new_on (0);
  g = gran (mr);
  policy = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, &error);
  g_assert_no_error (error);
  g_assert_true (memres_tag_push ("st-sleep", NULL));
  k = mt_alloc_ok (mr, 3 * g + 1000, s);
  g_assert_true (memres_tag_pop ("st-sleep", &error));
  g_assert_no_error (error);
  w = mt_alloc_ok (mr, 2 * g, s);
  ks = memres_buffer_get_size (k);
  at = memres_buffer_get_address (k);
  mt_write_pattern (k, 0, ks, 77, s);
  mt_fill_byte_ok (w, 0x3c, s);
  g_assert_true (memres_resource_sleep (mr, "st-sleep", policy, s, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_asleep (k));
  /* every placement on s while k sleeps lies outside it */
  for (guint n = 1; n <= 4; n++)
    {
      o = mt_alloc_ok (mr, n * g, s);
      at_o = memres_buffer_get_address (o);
      g_assert_true (at_o + n * g <= at || at_o >= at + ks);
      mt_fill_byte_ok (o, 0x10 + n, s);
      mt_assert_bytes (o, 0x10 + n, s);
      mt_close_ok (o, s);
    }
  g_assert_true (memres_resource_wake (mr, "st-sleep", s, &error));
  g_assert_no_error (error);
  g_assert_cmphex (memres_buffer_get_address (k), ==, at);
  mt_check_pattern (k, 0, ks, 77, s);
  mt_assert_bytes (w, 0x3c, s);
  mt_close_ok (k, s);
  mt_close_ok (w, s);
  mt_stream_free (s);
  memres_resource_unref (mr);
  mt_assert_fake_counts_equal (&base);
}

/* A buffer on a stream grown in place (the free bytes after it), then grown by a move (a
 * neighbour after it): its bytes kept, the neighbour's too. */
static void
test_resize (void)
{
  FakeCudaCounts base;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer *x, *y;
  CUstream s;
  guint64 at;
  gsize g;

  if (!mt_require_devices (1))
    return;
  mt_counts_snapshot (&base);
  mr = mt_new_ok (STABLE);
  s = mt_stream_new_on (0);
  g = gran (mr);
  x = mt_alloc_ok (mr, g + 1000, s);
  at = memres_buffer_get_address (x);
  mt_write_pattern (x, 0, g + 1000, 5, s);
  g_assert_true (memres_buffer_resize (x, 4 * g, s, &error));
  g_assert_no_error (error);
  g_assert_cmphex (memres_buffer_get_address (x), ==, at);
  mt_check_pattern (x, 0, g + 1000, 5, s);
  mt_write_pattern (x, 0, 4 * g, 6, s);
  y = mt_alloc_ok (mr, g, s);
  g_assert_cmphex (memres_buffer_get_address (y), ==, at + 4 * g);
  mt_fill_byte_ok (y, 0x79, s);
  g_assert_true (memres_buffer_resize (x, 6 * g + 1000, s, &error));
  g_assert_no_error (error);
  g_assert_cmphex (memres_buffer_get_address (x), !=, at);
  g_assert_cmpuint (memres_buffer_get_size (x), ==, 6 * g + 1000);
  mt_check_pattern (x, 0, 4 * g, 6, s);
  mt_assert_bytes (y, 0x79, s);
  /* the room x left, taken by x's stream again at once */
  mt_close_ok (mt_alloc_ok (mr, 4 * g, s), s);
  mt_close_ok (x, s);
  mt_close_ok (y, s);
  mt_stream_free (s);
  trim_ok (mr);
  memres_resource_unref (mr);
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
  g_test_add_func ("/arena-stable/trim/headroom", test_trim_headroom);
  for (guint i = 0; i < G_N_ELEMENTS (hazards); i++)
    g_test_add_data_func (hazard_names[i], &hazards[i], test_hazard);
  g_test_add_func ("/arena-stable/hazard/run", test_hazard_run);
  g_test_add_func ("/arena-stable/hazard/random", test_hazard_random);
  g_test_add_func ("/arena-stable/sleep/tagged", test_sleep);
  g_test_add_func ("/arena-stable/resize", test_resize);
  return g_test_run ();
}

/* arena-sweep.h: the fault sweep of the `arena` kind's tests (test-arena.c, test-arena-stable.c):
 * a case's state (Ctx), its set-up and operation run once to record the driver calls, then once
 * per call with that call failing (run_sweep()), and finalize's sweep (run_finalize_sweep()).
 * Static functions: each test program includes it once, after testutil.h, arena-check.h and
 * segment-check.h; run_finalize_sweep() needs mt_log_capture_init() in main(). */
#pragma once

#include <string.h>

/* The buffers and the arena of a sweep's case (each set-up lays out its own). */
typedef struct
{
  MemresResource *mr;
  MemresBuffer *bufs[8];
  guint n;
  guint64 addr_c;
  CUstream stream; /* the stream of the case's operation, NULL for the legacy one */
} Ctx;

static inline void
ctx_teardown (Ctx *c)
{
  for (guint i = 0; i < c->n; i++)
    if (c->bufs[i] != NULL)
      mt_close_ok (c->bufs[i], NULL);
  g_clear_pointer (&c->mr, memres_resource_unref);
  if (c->stream != NULL)
    mt_stream_free (c->stream);
  memset (c, 0, sizeof *c);
}

typedef void (*SetupFn) (Ctx *c);
typedef gboolean (*OpFn) (Ctx *c, GError **error);

/* The arena, the driver and the segment index agree: each granule one handle, one mapping and
 * one segment, and a mapping and a segment more for each old address of lent memory not
 * unmapped yet (a failed settle leaves ranges tagged, whose granules an allocation on their
 * stream may be lent); one reservation. */
static inline void
assert_consistent (Ctx *c, const FakeCudaCounts *base)
{
  FakeCudaCounts now;
  gint64 handles, pending = (gint64) counter (c->mr, "lent_pending");

  mt_counts_snapshot (&now);
  handles = now.physical_handles - base->physical_handles;
  g_assert_cmpint (now.mappings - base->mappings, ==, handles + pending);
  g_assert_cmpint (count_segments (c->mr), ==, handles + pending);
  g_assert_cmpint (now.reservations - base->reservations, ==, counter (c->mr, "reservations"));
  g_assert_cmpuint (stats_ok (c->mr).reserved_current, ==, (guint64) handles * gran (c->mr));
}

typedef void (*CheckFn) (Ctx *c, gboolean ok);

/* Runs @op once to record its driver calls, then once per call with that call failing
 * (CUDA_ERROR_UNKNOWN): the op fails with that error (domain MEMRES_CUDA_ERROR) or succeeds,
 * @check (if any: untraced, the faults cleared) finds the buffers as they should be after it
 * (@ok: whether it succeeded), the arena and the driver agree, the arena still serves, and once
 * everything is closed and the arena gone, nothing is left. */
static inline void
run_sweep_checked (const char *what, SetupFn setup, OpFn op, CheckFn check, guint min_calls)
{
  FakeCudaCounts base;
  GError *error = NULL;
  g_auto (GStrv) calls = NULL;
  Ctx c = { 0 };
  gint n;

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  mt_counts_snapshot (&base);
  setup (&c);
  mt_fake_trace_begin ();
  MT_CHECK (op (&c, &error));
  calls = mt_fake_trace_end_strv (&n);
  if (check != NULL)
    check (&c, TRUE);
  g_test_message ("%s: %d calls", what, n);
  g_assert_cmpint (n, >=, (gint) min_calls);
  ctx_teardown (&c);
  mt_assert_fake_counts_equal (&base);
  for (gint i = 0; i < n; i++)
    {
      gint nth = mt_call_ordinal (calls, i);
      gboolean ok;
      MemresBuffer *extra;

      setup (&c);
      mt_fake_fail_call (calls[i], nth, CUDA_ERROR_UNKNOWN);
      ok = op (&c, &error);
      mt_fake_reset_faults ();
      g_test_message ("%s, %s#%d failing: %s", what, calls[i], nth,
                      ok ? "succeeded" : error->message);
      if (!ok)
        {
          g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_UNKNOWN);
          g_clear_error (&error);
        }
      if (check != NULL)
        check (&c, ok);
      assert_consistent (&c, &base);
      extra = mt_alloc_ok (c.mr, 3 * ((gsize) 1 << 20), NULL);
      mt_fill_byte_ok (extra, 0x77, NULL);
      mt_assert_bytes (extra, 0x77, NULL);
      mt_close_ok (extra, NULL);
      ctx_teardown (&c);
      mt_assert_fake_counts_equal (&base);
    }
}

/* Finalize cannot fail: after @setup, each driver call of the arena's finalize failing in turn,
 * the others still run, a warning says
 * what failed, and at most that granule and the reservation stay with the driver. */
static inline void
run_finalize_sweep (SetupFn setup)
{
  g_auto (GStrv) calls = NULL;
  Ctx c = { 0 };
  gint n;

  if (!mt_require_devices (1) || !mt_require_fake ("fault injection needs the fake driver"))
    return;
  setup (&c);
  mt_fake_trace_begin ();
  g_clear_pointer (&c.mr, memres_resource_unref);
  calls = mt_fake_trace_end_strv (&n);
  ctx_teardown (&c);
  g_assert_cmpint (n, >=, 4);
  for (gint i = 0; i < n; i++)
    {
      FakeCudaCounts base, now;
      g_autofree char *warnings = NULL;
      gint nth = mt_call_ordinal (calls, i);
      guint criticals;

      mt_counts_snapshot (&base);
      setup (&c);
      mt_fake_fail_call (calls[i], nth, CUDA_ERROR_UNKNOWN);
      mt_log_capture_begin ();
      ctx_teardown (&c);
      warnings = mt_log_capture_end (&criticals);
      mt_fake_reset_faults ();
      g_test_message ("finalize, %s#%d failing: %s", calls[i], nth, warnings);
      g_assert_cmpuint (criticals, ==, 0);
      mt_counts_snapshot (&now);
      g_assert_cmpint (now.physical_handles - base.physical_handles, <=, 1);
      g_assert_cmpint (now.mappings - base.mappings, <=, 1);
      g_assert_cmpint (now.reservations - base.reservations, <=, 1);
      g_assert_cmpint (now.streams - base.streams, <=, 1);
      g_assert_cmpint (now.events, >=, base.events);
      /* whatever stays with the driver is warned about (a refused cuEventDestroy excepted) */
      if ((now.mappings != base.mappings || now.physical_handles != base.physical_handles
           || now.reservations != base.reservations || now.streams != base.streams
           || now.events != base.events)
          && strcmp (calls[i], "cuEventDestroy") != 0)
        g_assert_cmpstr (warnings, !=, "");
    }
}

/* run_sweep_checked() without a check. */
static inline void
run_sweep (const char *what, SetupFn setup, OpFn op, guint min_calls)
{
  run_sweep_checked (what, setup, op, NULL, min_calls);
}

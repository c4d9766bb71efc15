/* memres - CUDA memory resources
 * test-arena-infer.c: issue 38's target 3 on the fake driver: the allocation sequence of
 * bench/workloads.py infer (a decoder serving batches of requests whose key/value caches grow a
 * token at a time), replayed against `arena` with the host running a few tokens ahead of the
 * device, and its peak physical memory held against the peak of the bytes in use.
 *
 * The sequence is the one PyTorch asks of its allocator for workloads.py's model (6 blocks,
 * d_model 1024, 16 heads, feed-forward 4096, vocabulary 32000, bf16, no grad), sizes in bytes
 * as torch requests them:
 * - the weights, allocated once (bf16);
 * - per batch (b requests, a prompt of p tokens, n new tokens; drawn from seed 383 by an LCG,
 *   not Python's generator): the prefill over b*p tokens: per block the LayerNorm's output, the
 *   qkv projection (kept whole while the cache holds its key and value views), attention's
 *   output and its contiguous copy, the projection, the residual, the feed-forward's two
 *   activations; the logits of every prompt token (b*p*32000*2 bytes, the largest transient);
 * - per new token the same at one token per request, where each block's key and value caches
 *   are allocated one token larger (torch.cat) before the old ones are freed (the first time,
 *   the prefill's qkv); the previous logits freed after the new ones are made;
 * - at the batch's end everything of the batch freed.
 * Every operation is on one stream. The host runs LAG tokens ahead of the device: the stream is
 * held from the start and at each token, each hold released LAG tokens later, and the test waits
 * until the device is through the released token, so that the device never runs while the host
 * allocates and frees: both figures are the same at every run. (The lagged one was not, 1.006 to
 * 1.020 from run to run, while the first hold came only after the first prefill: the fake's
 * worker ran the weights and that prefill at once with the host's calls, and which of its frees
 * had settled when the arena was next asked depended on the threads' timing.) Fully held (the
 * device never catching up inside a batch) is the harder shape of /arena/memory/kv-growth in
 * test-arena.c. */
#include "testutil.h"

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define D_MODEL   1024
#define HEADS     16
#define FFN       4096
#define VOCAB     32000
#define LAYERS    6
#define BF16      2
#define MAX_HOLDS 64

typedef struct
{
  MemresResource *mr;
  CUstream s;
  guint32 rng;
  guint lag;
  MtStreamHold *holds[MAX_HOLDS];
  CUevent marks[MAX_HOLDS]; /* recorded before each hold: the device is through the token */
  guint n_holds, first_hold;
} Run;

static guint
draw (Run *run, guint lo, guint hi)
{
  run->rng = run->rng * 1103515245u + 12345u;
  return lo + (run->rng >> 16) % (hi - lo + 1);
}

static MemresBuffer *
A (Run *run, gsize size)
{
  return mt_alloc_ok (run->mr, size, run->s);
}

static void
F (Run *run, MemresBuffer **buf)
{
  if (*buf != NULL)
    mt_close_ok (*buf, run->s);
  *buf = NULL;
}

/* A token's work is queued: the stream held behind it; the hold LAG tokens back released and
 * the device let through everything before the next hold. */
static void
token_boundary (Run *run)
{
  guint i = run->n_holds % MAX_HOLDS;

  if (run->lag == G_MAXUINT && run->n_holds > run->first_hold)
    return; /* held for the whole batch: one hold */
  g_assert_cmpuint (run->n_holds - run->first_hold, <, MAX_HOLDS);
  g_assert_cmpint (mt_driver ()->cuEventCreate (&run->marks[i], CU_EVENT_DISABLE_TIMING), ==,
                   CUDA_SUCCESS);
  g_assert_cmpint (mt_driver ()->cuEventRecord (run->marks[i], run->s), ==, CUDA_SUCCESS);
  run->holds[i] = mt_stream_hold (run->s);
  run->n_holds++;
  while (run->n_holds - run->first_hold > run->lag)
    {
      guint k = run->first_hold++ % MAX_HOLDS, next = run->first_hold % MAX_HOLDS;

      mt_stream_release (run->holds[k]);
      g_assert_cmpint (mt_driver ()->cuEventDestroy (run->marks[k]), ==, CUDA_SUCCESS);
      if (run->first_hold < run->n_holds)
        g_assert_cmpint (mt_driver ()->cuEventSynchronize (run->marks[next]), ==, CUDA_SUCCESS);
    }
}

static void
release_all (Run *run)
{
  for (; run->first_hold < run->n_holds; run->first_hold++)
    {
      guint k = run->first_hold % MAX_HOLDS;

      mt_stream_release (run->holds[k]);
      g_assert_cmpint (mt_driver ()->cuEventDestroy (run->marks[k]), ==, CUDA_SUCCESS);
    }
  g_assert_cmpint (mt_driver ()->cuStreamSynchronize (run->s), ==, CUDA_SUCCESS);
}

typedef struct
{
  MemresBuffer *k, *v, *qkv; /* the caches; the prefill's qkv that their views keep */
} Cache;

/* One block over @n token rows (@n = b * t); @x the residual stream in and out. @cache: the
 * block's caches, grown to @len tokens per request when @b requests decode (@len > 0). */
static void
block (Run *run, MemresBuffer **x, gsize n, Cache *cache, gsize b, gsize len)
{
  MemresBuffer *ln, *qkv, *y, *yc, *proj, *x2, *ff1, *gelu, *ff2, *x3;

  ln = A (run, n * D_MODEL * BF16);
  qkv = A (run, n * 3 * D_MODEL * BF16);
  F (run, &ln);
  if (len == 0)
    {
      /* prefill: the caches are views of this qkv */
      cache->qkv = qkv;
      qkv = NULL;
    }
  else
    {
      MemresBuffer *k = A (run, b * len * D_MODEL * BF16);
      MemresBuffer *v = A (run, b * len * D_MODEL * BF16);

      F (run, &cache->k);
      F (run, &cache->v);
      F (run, &cache->qkv);
      cache->k = k;
      cache->v = v;
    }
  y = A (run, n * D_MODEL * BF16);  /* attention's output */
  F (run, &qkv);                    /* the query view's last user */
  yc = A (run, n * D_MODEL * BF16); /* transpose + reshape: a copy */
  F (run, &y);
  proj = A (run, n * D_MODEL * BF16);
  F (run, &yc);
  x2 = A (run, n * D_MODEL * BF16);
  F (run, &proj);
  F (run, x);
  ln = A (run, n * D_MODEL * BF16);
  ff1 = A (run, n * FFN * BF16);
  F (run, &ln);
  gelu = A (run, n * FFN * BF16);
  F (run, &ff1);
  ff2 = A (run, n * D_MODEL * BF16);
  F (run, &gelu);
  x3 = A (run, n * D_MODEL * BF16);
  F (run, &ff2);
  F (run, &x2);
  *x = x3;
}

/* The model over @n rows: its logits. */
static MemresBuffer *
forward (Run *run, gsize n, Cache *caches, gsize b, gsize len)
{
  MemresBuffer *x = A (run, n * D_MODEL * BF16), *ln, *logits;

  for (guint l = 0; l < LAYERS; l++)
    block (run, &x, n, &caches[l], b, len);
  ln = A (run, n * D_MODEL * BF16);
  F (run, &x);
  logits = A (run, n * VOCAB * BF16);
  F (run, &ln);
  return logits;
}

static void
weights_new (Run *run, GPtrArray *w)
{
  g_ptr_array_add (w, A (run, (gsize) VOCAB * D_MODEL * BF16));
  for (guint l = 0; l < LAYERS; l++)
    {
      const gsize sizes[]
          = { D_MODEL, D_MODEL, 3 * D_MODEL * D_MODEL, 3 * D_MODEL, D_MODEL * D_MODEL, D_MODEL,
              D_MODEL, D_MODEL, FFN * D_MODEL,         FFN,         D_MODEL * FFN,     D_MODEL };

      for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
        g_ptr_array_add (w, A (run, sizes[i] * BF16));
    }
  g_ptr_array_add (w, A (run, D_MODEL * BF16));
  g_ptr_array_add (w, A (run, D_MODEL * BF16));
  g_ptr_array_add (w, A (run, (gsize) VOCAB * D_MODEL * BF16));
}

/* The workload against @spec with the host @lag tokens ahead (G_MAXUINT: held for a whole
 * batch); returns the peak physical over the peak used, and the two peaks in @peaks. */
static double
infer_run (const char *spec, guint lag, guint batches, guint max_new, guint64 peaks[2])
{
  g_autoptr (GPtrArray) w = g_ptr_array_new ();
  Run run = { 0 };
  MemresStats st;
  double ratio;

  run.s = mt_stream_new_on (0);
  g_assert_true (memres_cuda_ensure_context (0, NULL));
  run.mr = mt_new_ok (spec);
  run.rng = 383;
  run.lag = lag == G_MAXUINT ? lag : MIN (lag, MAX_HOLDS - 1);
  /* lagged: the stream held from the start, so that the device runs only what a released hold
   * lets through (the weights and the first prefill too), never at once with the host */
  if (lag != G_MAXUINT)
    token_boundary (&run);
  weights_new (&run, w);
  for (guint batch = 0; batch < batches; batch++)
    {
      gsize b = draw (&run, 1, 16), p = draw (&run, 32, 512), n = draw (&run, 16, max_new);
      Cache caches[LAYERS] = { { 0 } };
      MemresBuffer *tokens = A (&run, b * p * 8), *logits, *next = NULL;

      if (lag == G_MAXUINT)
        token_boundary (&run);
      logits = forward (&run, b * p, caches, b, 0);
      token_boundary (&run);
      for (gsize t = 0; t < n; t++)
        {
          MemresBuffer *argmax = A (&run, b * 8), *out;

          F (&run, &next);
          next = argmax;
          out = forward (&run, b, caches, b, p + t + 1);
          F (&run, &logits);
          logits = out;
          token_boundary (&run);
        }
      for (guint l = 0; l < LAYERS; l++)
        {
          F (&run, &caches[l].k);
          F (&run, &caches[l].v);
          F (&run, &caches[l].qkv);
        }
      F (&run, &tokens);
      F (&run, &logits);
      F (&run, &next);
      if (lag == G_MAXUINT)
        release_all (&run);
    }
  release_all (&run);
  for (guint i = 0; i < w->len; i++)
    mt_close_ok (g_ptr_array_index (w, i), run.s);
  st = mt_stats_ok (run.mr);
  ratio = (double) st.reserved_high / (double) st.used_high;
  peaks[0] = st.reserved_high;
  peaks[1] = st.used_high;
  g_test_message ("%s, the device %s: peak physical %" G_GUINT64_FORMAT
                  " / peak used %" G_GUINT64_FORMAT " = %.4f",
                  spec, lag == G_MAXUINT ? "held for each batch" : "some tokens behind",
                  st.reserved_high, st.used_high, ratio);
  g_clear_pointer (&run.mr, memres_resource_unref);
  g_assert_cmpint (mt_driver ()->cuStreamDestroy (run.s), ==, CUDA_SUCCESS);
  return ratio;
}

static gboolean
begin (void)
{
  if (!mt_require_fake ("the figures are the fake's (its granularity, its streams held)"))
    return FALSE;
  mt_fake_set_async (TRUE);
  if (!mt_require_stream_holds ())
    {
      mt_fake_set_async (FALSE);
      return FALSE;
    }
  return TRUE;
}

/* Each case runs at the arena's default reservation (twice the fake's 8 GiB) and at those of
 * real cards (mt_reservations), where the free rest of the range lies elsewhere against the
 * buffers. */

/* The device two tokens behind the host, as PyTorch's launch queue keeps it: 1.0059 at every run
 * and reservation since the stream is held from the start (1.006 to 1.020 from run to run before,
 * see the top; 1.067 before the stream's own free ranges were preferred to tighter settled ones
 * that need memory created). */
static void
test_lagged (gconstpointer data)
{
  const MtReservation *res = data;
  guint64 peaks[2], again[2];
  double ratio;

  if (!begin ())
    return;
  ratio = infer_run (res->spec, 2, 8, 256, peaks);
  g_assert_cmpfloat (ratio, <=, 1.03);
  /* the same sequence against a new arena: the same peaks to the byte (the device's progress at
   * each allocation is the holds', not the threads' timing) */
  infer_run (res->spec, 2, 8, 256, again);
  g_assert_cmpuint (again[0], ==, peaks[0]);
  g_assert_cmpuint (again[1], ==, peaks[1]);
  mt_fake_set_async (FALSE);
}

/* The device held back for each whole batch: nothing the batch frees can settle before its end:
 * 1.0059 since h-kv3 (shared granules at the ring of KV caches' ends), at every reservation;
 * 1.0195 with lending alone, 1.017 before, 1.015 before slabs were placed from the top of a
 * range down. */
static void
test_held (gconstpointer data)
{
  const MtReservation *res = data;
  guint64 peaks[2];
  double ratio;

  if (!begin ())
    return;
  ratio = infer_run (res->spec, G_MAXUINT, 8, 256, peaks);
  g_assert_cmpfloat (ratio, <=, 1.03);
  mt_fake_set_async (FALSE);
}

int
main (int argc, char **argv)
{
  /* room for the weights and the largest prefill (the fake backs memory lazily) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "8GiB", FALSE);
  mt_init (&argc, &argv);
  for (guint i = 0; i < MT_N_RESERVATIONS; i++)
    {
      const MtReservation *res = &mt_reservations[i];
      g_autofree char *lagged = g_strconcat ("/arena-infer/lagged/", res->name, NULL);
      g_autofree char *held = g_strconcat ("/arena-infer/held/", res->name, NULL);

      g_test_add_data_func (lagged, res, test_lagged);
      g_test_add_data_func (held, res, test_held);
    }
  return g_test_run ();
}

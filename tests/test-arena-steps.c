/* memres - CUDA memory resources
 * test-arena-steps.c: the driver calls `arena` makes per training step once it has seen the
 * step's shapes (issue 38's target 1, step time: torch with expandable segments maps memory as
 * its segment grows and pays no driver call per step after that).
 *
 * The steps are those of bench/traces/transformer.csv (bench/workloads.py train, 4 steps of
 * different shapes, recorded with the `log` adaptor): the weights allocated, then per step
 * everything the step allocates freed by its end, which leaves the same live bytes at every
 * step's start (how the steps are found). They are replayed on one stream in the order
 * 0 1 2 3, then 1 2 3 twice more: by the later rounds the arena has held every shape once,
 * and the driver calls of each step are counted (the fake counts calls). The stream is held
 * for each step's whole length (the fake's asynchronous mode), as the device runs behind the
 * host inside a step and catches up at its end (workloads.py synchronizes there): no event of
 * the step is done while it runs. On a stream of the test's, and on the legacy default stream,
 * which the trace was recorded on (torch's default stream) and whose closes share events.
 *
 * Then issue 38's target 2: bench/traces/resnet18.csv's steady step (/arena/steps/resnet18*),
 * bench/interop.py's empty-del loop (/arena/steps/empty-del), and the two alternating as the
 * bench's repetitions run them (/arena/steps/phases), each op of the trace on the thread that
 * made it where a test says so (the Replayer). */
#include "testutil.h"

#include "arena-check.h"

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

#define ROUNDS 3 /* rounds of every step in order; then each step twice in a row */

typedef struct
{
  gboolean alloc;
  guint64 size;
  gint match;   /* a free: the index of its allocate */
  guint thread; /* the trace's threads numbered in order of appearance, from 0 */
} Op;

typedef struct
{
  GArray *ops;       /* Op */
  GArray *starts;    /* guint: the first op of each step, then the end of the last */
  guint64 step_live; /* live bytes at every step's start */
} Trace;

/* The driver calls counted, by index */
enum
{
  CREATE,
  RELEASE,
  MAP,
  UNMAP,
  ACCESS,
  EV_CREATE,
  EV_RECORD,
  EV_QUERY,
  CTX_SYNC,
  STREAM_SYNC,
  WAIT_EVENT,
  CTX_CURRENT, /* memres_cuda_push_context()'s check, before each record and each poll */
  N_ENTRIES
};

static const char *const entries[N_ENTRIES]
    = { "cuMemCreate",      "cuMemRelease",        "cuMemMap",          "cuMemUnmap",
        "cuMemSetAccess",   "cuEventCreate",       "cuEventRecord",     "cuEventQuery",
        "cuCtxSynchronize", "cuStreamSynchronize", "cuStreamWaitEvent", "cuCtxGetCurrent" };

/* The log at @path read into @t: allocate and free rows (nothing else in this trace), each free
 * matched to its allocate by address; the steps found. */
static void
trace_parse (const char *path, Trace *t, GArray *before)
{
  g_autofree char *text = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GHashTable) live = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GHashTable) threads = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GError *error = NULL;
  guint64 bytes = 0;

  g_assert_true (g_file_get_contents (path, &text, NULL, &error));
  g_assert_no_error (error);
  lines = g_strsplit (text, "\n", -1);
  t->ops = g_array_new (FALSE, FALSE, sizeof (Op));
  t->starts = g_array_new (FALSE, FALSE, sizeof (guint));
  t->step_live = 0;
  for (guint i = 1; lines[i] != NULL; i++)
    {
      g_auto (GStrv) f = g_strsplit (lines[i], ",", -1);
      Op op = { 0 };
      gpointer at;

      if (lines[i][0] == '\0')
        continue;
      g_assert_cmpuint (g_strv_length (f), ==, 6);
      if (!g_hash_table_contains (threads, f[0]))
        g_hash_table_insert (threads, g_strdup (f[0]),
                             GUINT_TO_POINTER (g_hash_table_size (threads)));
      op.thread = GPOINTER_TO_UINT (g_hash_table_lookup (threads, f[0]));
      op.size = g_ascii_strtoull (f[4], NULL, 10);
      op.alloc = g_str_equal (f[2], "allocate");
      g_assert_true (op.alloc || g_str_equal (f[2], "free"));
      g_array_append_val (before, bytes);
      if (op.alloc)
        {
          g_hash_table_insert (live, g_strdup (f[3]), GUINT_TO_POINTER (t->ops->len + 1));
          bytes += op.size;
        }
      else
        {
          g_assert_true (g_hash_table_steal_extended (live, f[3], &at, (gpointer *) &op.match));
          g_free (at);
          op.match--;
          bytes -= g_array_index (t->ops, Op, op.match).size;
        }
      g_array_append_val (t->ops, op);
    }
}

static void
trace_load (const char *path, Trace *t)
{
  g_autoptr (GHashTable) seen = g_hash_table_new (g_int64_hash, g_int64_equal);
  g_autoptr (GArray) before = g_array_new (FALSE, FALSE, sizeof (guint64));
  guint64 best = 0;
  guint best_n = 0;

  trace_parse (path, t, before);
  /* a step starts with an allocation after a free, at the live bytes every step starts at: the
   * value found most often there */
  for (guint i = 1; i < t->ops->len; i++)
    if (g_array_index (t->ops, Op, i).alloc && !g_array_index (t->ops, Op, i - 1).alloc)
      {
        gint64 key = (gint64) g_array_index (before, guint64, i);
        guint n = GPOINTER_TO_UINT (g_hash_table_lookup (seen, &key)) + 1;

        g_hash_table_insert (seen, &g_array_index (before, guint64, i), GUINT_TO_POINTER (n));
        if (n > best_n)
          best_n = n, best = (guint64) key;
      }
  g_assert_cmpuint (best_n, >=, 3);
  t->step_live = best;
  for (guint i = 1; i < t->ops->len; i++)
    if (g_array_index (t->ops, Op, i).alloc && !g_array_index (t->ops, Op, i - 1).alloc
        && g_array_index (before, guint64, i) == best)
      g_array_append_val (t->starts, i);
  /* the last step ends where the live bytes are back (before the weights' frees) */
  for (guint i = g_array_index (t->starts, guint, t->starts->len - 1) + 1; i <= t->ops->len; i++)
    if (i == t->ops->len || g_array_index (before, guint64, i) == best)
      {
        g_array_append_val (t->starts, i);
        break;
      }
  /* every step frees what it allocates, nothing else */
  for (guint s = 0; s + 1 < t->starts->len; s++)
    for (guint i = g_array_index (t->starts, guint, s); i < g_array_index (t->starts, guint, s + 1);
         i++)
      if (!g_array_index (t->ops, Op, i).alloc)
        g_assert_cmpint (g_array_index (t->ops, Op, i).match, >=,
                         (gint) g_array_index (t->starts, guint, s));
}

static void
counts_now (long *c)
{
  for (guint e = 0; e < N_ENTRIES; e++)
    c[e] = mt_fake_call_count (entries[e]);
}

/* Op @i of @t replayed on @s into @bufs (indexed by op). */
static void
replay_op (const Trace *t, guint i, MemresResource *mr, CUstream s, MemresBuffer **bufs)
{
  const Op *op = &g_array_index (t->ops, Op, i);

  if (op->alloc)
    bufs[i] = mt_alloc_ok (mr, op->size, s);
  else
    {
      mt_close_ok (bufs[op->match], s);
      bufs[op->match] = NULL;
    }
}

/* A second thread that replays the ops of the trace's second thread (Op.thread 1), one at a
 * time, in the trace's order (the test's thread waits for each): resnet18.csv was recorded on
 * torch's Python thread and autograd's, and most small blocks of a step are freed on the other
 * thread than the one that allocated them (another thread's front, plugins/common/cache/). */
typedef struct
{
  GThread *thread;
  GAsyncQueue *in, *out; /* ReplayJob *, then the same job back done */
} Replayer;

typedef struct
{
  const Trace *t;
  guint i;
  MemresResource *mr;
  CUstream s;
  MemresBuffer **bufs;
} ReplayJob;

static Replayer *replayer; /* NULL: every op on the test's thread */

static gpointer
replayer_main (gpointer data)
{
  Replayer *r = data;
  ReplayJob *job;

  while ((job = g_async_queue_pop (r->in))->t != NULL)
    {
      replay_op (job->t, job->i, job->mr, job->s, job->bufs);
      g_async_queue_push (r->out, job);
    }
  return NULL;
}

static void
replayer_start (void)
{
  replayer = g_new0 (Replayer, 1);
  replayer->in = g_async_queue_new ();
  replayer->out = g_async_queue_new ();
  replayer->thread = g_thread_new ("replayer", replayer_main, replayer);
}

static void
replayer_stop (void)
{
  ReplayJob end = { NULL };

  g_async_queue_push (replayer->in, &end);
  g_thread_join (replayer->thread);
  g_async_queue_unref (replayer->in);
  g_async_queue_unref (replayer->out);
  g_clear_pointer (&replayer, g_free);
}

/* Ops [lo, hi) of @t replayed on @s into @bufs (indexed by op), each on its thread's replayer
 * when one runs. */
static void
replay_ops (const Trace *t, guint lo, guint hi, MemresResource *mr, CUstream s, MemresBuffer **bufs)
{
  for (guint i = lo; i < hi; i++)
    if (replayer != NULL && g_array_index (t->ops, Op, i).thread == 1)
      {
        ReplayJob job = { t, i, mr, s, bufs };

        g_async_queue_push (replayer->in, &job);
        g_assert_true (g_async_queue_pop (replayer->out) == &job);
      }
    else
      replay_op (t, i, mr, s, bufs);
}

/* Step @step of @t replayed on @s held for its length; the calls it made added to @calls. */
static void
replay_step (const Trace *t, guint step, MemresResource *mr, CUstream s, MemresBuffer **bufs,
             long *calls, gboolean held)
{
  long c0[N_ENTRIES], c1[N_ENTRIES];
  MtStreamHold *hold = held ? mt_stream_hold (s) : NULL;

  counts_now (c0);
  replay_ops (t, g_array_index (t->starts, guint, step), g_array_index (t->starts, guint, step + 1),
              mr, s, bufs);
  counts_now (c1);
  if (hold != NULL)
    mt_stream_release (hold);
  /* the device through the step (workloads.py synchronizes): every event of it done */
  mt_sync_ok (s);
  for (guint e = 0; e < N_ENTRIES; e++)
    calls[e] = c1[e] - c0[e];
}

static char *
calls_line (const long *calls)
{
  GString *s = g_string_new (NULL);

  for (guint e = 0; e < N_ENTRIES; e++)
    if (calls[e] != 0)
      g_string_append_printf (s, " %s %ld", entries[e], calls[e]);
  return g_string_free (s, FALSE);
}

/* How a run replays the steps */
enum
{
  HELD = 1 << 0,   /* the stream held for each step's length (else synchronized at once) */
  LEGACY = 1 << 1, /* on the legacy default stream, as torch's default stream is (else a stream
                    * of the test's) */
};

static void
test_steady_steps (gconstpointer data)
{
  guint how = GPOINTER_TO_UINT (data);
  gboolean held = (how & HELD) != 0, legacy = (how & LEGACY) != 0;
  const char *dir = g_getenv ("MEMRES_TRACES_DIR");
  g_autofree char *path = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree MemresBuffer **bufs = NULL;
  long calls[N_ENTRIES], first[N_ENTRIES] = { 0 };
  Trace t;
  MemresStats st;
  guint n_steps;
  MtStreamHold *hold;
  CUstream s;

  if (!mt_require_fake ("the driver calls are counted by the fake"))
    return;
  g_assert_nonnull (dir);
  path = g_build_filename (dir, "transformer.csv", NULL);
  trace_load (path, &t);
  n_steps = t.starts->len - 1;
  g_assert_cmpuint (n_steps, >=, 3);
  if (held && !mt_hazard_begin ())
    return;
  s = legacy ? NULL : mt_stream_new_on (0);
  mr = mt_new_ok ("arena");
  bufs = g_new0 (MemresBuffer *, t.ops->len);
  /* the weights and the first step, held like the others (deterministic: the device never
   * catches up inside it, and always before the next) */
  hold = held ? mt_stream_hold (s) : NULL;
  replay_ops (&t, 0, g_array_index (t.starts, guint, 0), mr, s, bufs);
  if (hold != NULL)
    mt_stream_release (hold);
  mt_sync_ok (s);
  for (guint round = 0; round < ROUNDS + 1; round++)
    for (guint step = 0; step < n_steps; step++)
      for (guint again = 0; again < (round < ROUNDS ? 1 : 2); again++)
        {
          g_autofree char *line = NULL;

          replay_step (&t, step, mr, s, bufs, calls, held);
          line = calls_line (calls);
          g_test_message (
              "%s %u step %u (%u ops):%s; %" G_GUINT64_FORMAT
              " granules created, %" G_GUINT64_FORMAT " remapped, %" G_GUINT64_FORMAT
              " lent, %" G_GUINT64_FORMAT " settles",
              round < ROUNDS ? "round" : "twice, time", round < ROUNDS ? round : again, step,
              g_array_index (t.starts, guint, step + 1) - g_array_index (t.starts, guint, step),
              line, counter (mr, "granules_created"), counter (mr, "granules_remapped"),
              counter (mr, "granules_lent"), counter (mr, "settles"));
          for (guint e = 0; e < N_ENTRIES; e++)
            first[e] += round == 0 ? calls[e] : 0;
          if (round == 0)
            continue;
          /* once every shape was seen: the memory of a step mostly where it was (of its ~6,700
           * granules, at most 64 mapped anew, 2 created), each run of granules mapped or
           * unmapped granted or unmapped by one call, no wait, and the events of the step's
           * frees asked about a few dozen times (before: 1,641 granules remapped in the largest
           * step, with as many cuMemSetAccess and cuMemUnmap calls, or 1,320 cuEventQuery with
           * the device behind; then 221 before each stream's events were asked oldest first,
           * h-steps: 37 at most now, arena-events.c). On the legacy stream a run of closes
           * shares one event (h-steps: 197 cuEventRecord at most in a step, 353 before, one per
           * large close) */
          g_assert_cmpint (calls[CREATE], <=, 2);
          g_assert_cmpint (calls[RELEASE], ==, 0);
          g_assert_cmpint (calls[MAP], <=, 64);
          g_assert_cmpint (calls[UNMAP], <=, 8);
          g_assert_cmpint (calls[ACCESS], <=, 4);
          g_assert_cmpint (calls[CTX_SYNC], ==, 0);
          g_assert_cmpint (calls[STREAM_SYNC], ==, 0);
          g_assert_cmpint (calls[EV_QUERY], <=, 64);
          if (legacy)
            g_assert_cmpint (calls[EV_RECORD], <=, 224);
        }
  /* the first round grew the memory for the largest step: the counts are the driver's */
  g_assert_cmpint (first[CREATE], >, 1000);
  g_assert_cmpint (first[MAP], >=, first[CREATE]);
  st = stats_ok (mr);
  g_test_message ("peak physical %" G_GUINT64_FORMAT " / peak used %" G_GUINT64_FORMAT " = %.4f",
                  st.reserved_high, st.used_high, (double) st.reserved_high / st.used_high);
  g_assert_cmpuint (st.reserved_high * 100, <=, st.used_high * 103);
  for (guint i = 0; i < t.ops->len; i++)
    if (bufs[i] != NULL)
      mt_close_ok (bufs[i], s);
  mt_sync_ok (s);
  g_clear_pointer (&mr, memres_resource_unref);
  if (!legacy)
    CU_OK (mt_driver ()->cuStreamDestroy (s));
  if (held)
    mt_hazard_end ();
  g_array_unref (t.ops);
  g_array_unref (t.starts);
}

/* The longest run of @t's ops that frees exactly what it allocates and starts and ends where
 * an allocation follows a free (or at the end) with the same live bytes: a steady training
 * step (resnet18.csv: its second step; the first allocates the optimizer's state, the last
 * ends among the teardown's frees). */
static void
trace_steady_step (const Trace *t, const GArray *before, guint *lo, guint *hi)
{
  guint n = t->ops->len;

  *lo = *hi = 0;
  for (guint i = 1; i < n; i++)
    {
      if (!g_array_index (t->ops, Op, i).alloc || g_array_index (t->ops, Op, i - 1).alloc)
        continue;
      for (guint j = i + 1; j <= n; j++)
        {
          const Op *last = &g_array_index (t->ops, Op, j - 1);

          if (!last->alloc && last->match < (gint) i)
            break; /* frees what the run did not allocate */
          if ((j == n || (g_array_index (t->ops, Op, j).alloc && !last->alloc))
              && g_array_index (before, guint64, j) == g_array_index (before, guint64, i)
              && j - i > *hi - *lo)
            *lo = i, *hi = j;
        }
    }
}

/* A replay of resnet18.csv's steady step through one resource, kept between phases. */
typedef struct
{
  Trace t;
  guint lo, hi; /* the steady step's ops */
  MemresResource *mr;
  MemresBuffer **bufs;
  GRand *rand; /* CATCHUP_RANDOM's intervals */
} Resnet;

/* @r through @spec: the trace read, its weights and first step replayed on the legacy stream
 * held (deterministic: the device never catches up inside it, and always before the next). */
static void
resnet_open (Resnet *r, const char *spec)
{
  const char *dir = g_getenv ("MEMRES_TRACES_DIR");
  g_autofree char *path = g_build_filename (dir, "resnet18.csv", NULL);
  g_autoptr (GArray) before = g_array_new (FALSE, FALSE, sizeof (guint64));
  MtStreamHold *hold;

  trace_parse (path, &r->t, before);
  trace_steady_step (&r->t, before, &r->lo, &r->hi);
  g_assert_cmpuint (r->hi - r->lo, >=, 500);
  r->mr = mt_new_ok (spec);
  r->bufs = g_new0 (MemresBuffer *, r->t.ops->len);
  r->rand = g_rand_new_with_seed (38);
  hold = mt_stream_hold (NULL);
  replay_ops (&r->t, 0, r->lo, r->mr, NULL, r->bufs);
  mt_stream_release (hold);
  mt_sync_ok (NULL);
}

/* @n_steps steady steps of @r back to back on the legacy stream, held for their length
 * (@catchup 0), or with the device catching up every @catchup ops (CATCHUP_RANDOM: after 1 to 64
 * ops, drawn from r->rand); then the device through them (interop.py synchronizes after a timed
 * step, and after the 5 steps it profiles back to back). The driver calls of step k into
 * calls[k]. */
#define CATCHUP_RANDOM G_MAXUINT

static void
resnet_run (Resnet *r, guint catchup, guint n_steps, long (*calls)[N_ENTRIES])
{
  long c0[N_ENTRIES], c1[N_ENTRIES];
  MtStreamHold *hold = mt_stream_hold (NULL);
  guint n = r->hi - r->lo;

  for (guint k = 0; k < n_steps; k++)
    {
      counts_now (c0);
      for (guint i = r->lo; i < r->hi; i += n)
        {
          n = catchup == CATCHUP_RANDOM ? (guint) g_rand_int_range (r->rand, 1, 65)
              : catchup != 0            ? catchup
                                        : r->hi - r->lo;
          replay_ops (&r->t, i, MIN (r->hi, i + n), r->mr, NULL, r->bufs);
          if (catchup != 0)
            {
              mt_stream_release (hold);
              hold = mt_stream_hold (NULL);
            }
        }
      counts_now (c1);
      for (guint e = 0; e < N_ENTRIES; e++)
        calls[k][e] = c1[e] - c0[e];
    }
  mt_stream_release (hold);
  mt_sync_ok (NULL);
}

/* One step of @r (resnet_run()), its calls into @calls. */
static void
resnet_step (Resnet *r, guint catchup, long *calls)
{
  resnet_run (r, catchup, 1, (long (*)[N_ENTRIES]) calls);
}

/* @r's step's calls and the arena's counters, a line of the test's log. */
static void
resnet_log (Resnet *r, const char *spec, const char *what, guint step, const long *calls)
{
  g_autofree char *line = calls_line (calls);

  if (g_str_has_prefix (spec, "arena"))
    g_test_message ("%s: %s %u (ops %u..%u):%s; %" G_GUINT64_FORMAT
                    " granules created, %" G_GUINT64_FORMAT " remapped, %" G_GUINT64_FORMAT
                    " lent, %" G_GUINT64_FORMAT " shared, %" G_GUINT64_FORMAT
                    " settles, %" G_GUINT64_FORMAT " run takes, %" G_GUINT64_FORMAT " park hits",
                    spec, what, step, r->lo, r->hi, line, counter (r->mr, "granules_created"),
                    counter (r->mr, "granules_remapped"), counter (r->mr, "granules_lent"),
                    counter (r->mr, "granules_shared"), counter (r->mr, "settles"),
                    counter (r->mr, "run_takes"), counter (r->mr, "park_hits"));
  else
    g_test_message ("%s: %s %u (ops %u..%u):%s", spec, what, step, r->lo, r->hi, line);
}

static void
resnet_close (Resnet *r)
{
  for (guint i = 0; i < r->t.ops->len; i++)
    if (r->bufs[i] != NULL)
      mt_close_ok (r->bufs[i], NULL);
  mt_sync_ok (NULL);
  g_clear_pointer (&r->mr, memres_resource_unref);
  g_clear_pointer (&r->bufs, g_free);
  g_rand_free (r->rand);
  g_array_unref (r->t.ops);
  g_array_unref (r->t.starts);
}

#define RESNET_STEPS 8

/* The driver calls of a steady resnet18 step (bench/traces/resnet18.csv, the trace of
 * bench/interop.py's workload), replayed RESNET_STEPS times on the legacy stream held for the
 * step's length (@catchup 0), or with the device catching up every @catchup ops of the step (the
 * hold released and taken again: on a GPU the device runs a few ms behind, so some events of a
 * step are done while it runs), through @spec: the calls of each step into @each, the most of
 * each entry over the steps after the first two into @most. */
static void
resnet_steps (const char *spec, guint catchup, long *most, long (*each)[N_ENTRIES])
{
  Resnet r;

  resnet_open (&r, spec);
  memset (most, 0, N_ENTRIES * sizeof (long));
  for (guint step = 0; step < RESNET_STEPS; step++)
    {
      resnet_step (&r, catchup, each[step]);
      resnet_log (&r, spec, "resnet18 step", step, each[step]);
      for (guint e = 0; e < N_ENTRIES && step >= 2; e++)
        most[e] = MAX (most[e], each[step][e]);
    }
  resnet_close (&r);
}

/* issue 38's target 2 (the resnet18 step through the shim no slower than torch's): measured
 * once at 1.446 with `arena:device=0` and at 1.034 with `arena:device=0,release_threshold=max`
 * on an H100. The two specs are one configuration (release_threshold's default is max): the
 * same driver calls, step by step, in this deterministic replay, so the difference on the GPU is
 * the run, not the spec (how far the device lags decides which events are done, which ranges
 * settle and what is lent). `cache>arena` (0.998 there) makes no mapping call in a steady step:
 * its size classes give each buffer back the block it had. Plain `arena`'s steady steps still
 * lend (arena-lend.c) and remap: printed here, the gap bench/RESULTS.md records (h-resnet). */
static void
test_resnet_steps (void)
{
  long arena[N_ENTRIES], explicit_max[N_ENTRIES], cached[N_ENTRIES];
  long arena_each[RESNET_STEPS][N_ENTRIES], max_each[RESNET_STEPS][N_ENTRIES];
  long cached_each[RESNET_STEPS][N_ENTRIES];
  long parked[N_ENTRIES], parked_each[RESNET_STEPS][N_ENTRIES];

  if (!mt_require_fake ("the driver calls are counted by the fake") || !mt_hazard_begin ())
    return;
  resnet_steps ("arena", 0, arena, arena_each);
  resnet_steps ("arena:release_threshold=max", 0, explicit_max, max_each);
  resnet_steps ("cache>arena", 0, cached, cached_each);
  resnet_steps ("arena:park=true", 0, parked, parked_each);
  for (guint e = 0; e < N_ENTRIES; e++)
    {
      g_test_message ("%s, most in a steady step: arena %ld, cache>arena %ld, arena:park=true %ld",
                      entries[e], arena[e], cached[e], parked[e]);
      for (guint step = 0; step < RESNET_STEPS; step++)
        g_assert_cmpint (max_each[step][e], ==, arena_each[step][e]);
    }
  /* the cache: no memory mapped, unmapped, created or asked about once the step is known; one
   * event per close run that the shared bins take (a few a step) */
  g_assert_cmpint (cached[CREATE] + cached[RELEASE] + cached[MAP] + cached[UNMAP] + cached[ACCESS],
                   ==, 0);
  g_assert_cmpint (cached[EV_QUERY] + cached[CTX_SYNC] + cached[STREAM_SYNC], ==, 0);
  g_assert_cmpint (cached[EV_RECORD], <=, 16);
  /* park=true (arena-park.c): a steady step's large buffers taken back where they were, or
   * placed without lending to addresses whose memory was lent away before, once their sizes
   * were closed before: nothing mapped or created (h-lend: 22-125 cuMemMap a step without it);
   * step 2 still unmaps the old addresses of step 1's lending (12, asking 20 times about their
   * events; 7 and 1 before a park miss was placed without a flush, arena_park_miss_place(),
   * which lends less: 458 granules created, not 473) */
  g_assert_cmpint (parked[CREATE] + parked[RELEASE] + parked[MAP] + parked[ACCESS], ==, 0);
  g_assert_cmpint (parked[UNMAP], <=, 12);
  g_assert_cmpint (parked[EV_QUERY], <=, 20);
  g_assert_cmpint (parked[CTX_SYNC] + parked[STREAM_SYNC], ==, 0);
  g_assert_cmpint (parked[EV_RECORD], <=, 32);
  /* the fixed point, from step 4 on: no memory call, no query, no wait; the events of the
   * parked extents' flushes before the placements that no parked extent serves (24
   * cuEventRecord, each with its context check) */
  for (guint step = 4; step < RESNET_STEPS; step++)
    {
      for (guint e = 0; e < N_ENTRIES; e++)
        if (e != EV_RECORD && e != CTX_CURRENT && e != EV_CREATE)
          g_assert_cmpint (parked_each[step][e], ==, 0);
      g_assert_cmpint (parked_each[step][EV_RECORD], <=, 24);
    }
  mt_hazard_end ();
}

/* The resnet18 step through `arena:park=true` with the device catching up every 20 ops of a
 * step, as on a GPU some events of a step are done while it runs (issue 38's target 2: on an
 * H100 park's step time fell over tens of steps, where the held replay above reaches its fixed
 * point at step 2): no memory mapped, created or unmapped from step 5 on (at most 2 extents
 * parked at a miss placed without a flush, arena_park_miss_place(): memory mapped until step 4,
 * 154 granules remapped; without such placements until step 11, 310 remapped; with them at any
 * count parked until step 23, 427 remapped). The holds' own events are counted too: not
 * asserted. */
#define RESNET_CATCHUP 20

static void
test_resnet_lagged (void)
{
  long parked[N_ENTRIES], parked_each[RESNET_STEPS][N_ENTRIES];

  if (!mt_require_fake ("the driver calls are counted by the fake") || !mt_hazard_begin ())
    return;
  resnet_steps ("arena:park=true", RESNET_CATCHUP, parked, parked_each);
  for (guint step = 5; step < RESNET_STEPS; step++)
    {
      g_assert_cmpint (parked_each[step][CREATE] + parked_each[step][RELEASE]
                           + parked_each[step][MAP] + parked_each[step][UNMAP]
                           + parked_each[step][ACCESS],
                       ==, 0);
      g_assert_cmpint (parked_each[step][CTX_SYNC] + parked_each[step][STREAM_SYNC], ==, 0);
    }
  mt_hazard_end ();
}

/* The resnet18 step with the device catching up at random op counts (seeded: deterministic): the
 * legacy stream held, and the hold released (the device through everything queued) and taken
 * again every 1-@gap ops, drawn at random each time, so that the events of a step complete at
 * arbitrary points inside it, never at the same ops from one step to the next, as on a GPU where
 * the host is only slightly ahead (the step is host-bound). (A chain of holds, the device a few
 * holds behind, cannot be built on the fake's legacy stream: releasing a hold frees its word
 * with cuMemFreeHost, which drains the legacy stream behind the next hold.) Synchronized between
 * steps, as bench/interop.py is. @n steps through @spec; the granules remapped by each step (the
 * counter of the arena, the bottom layer) into @remapped, the driver calls into @each. */
static void
resnet_random (const char *spec, guint32 seed, guint gap, guint n, guint64 *remapped,
               long (*each)[N_ENTRIES])
{
  const char *dir = g_getenv ("MEMRES_TRACES_DIR");
  g_autofree char *path = g_build_filename (dir, "resnet18.csv", NULL);
  g_autoptr (GArray) before = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  g_autoptr (GRand) rng = g_rand_new_with_seed (seed);
  g_autofree MemresBuffer **bufs = NULL;
  MemresResource *arena = mr;
  MtStreamHold *hold;
  guint lo, hi;
  Trace t;

  while (memres_resource_get_upstream (arena) != NULL)
    arena = memres_resource_get_upstream (arena);
  trace_parse (path, &t, before);
  trace_steady_step (&t, before, &lo, &hi);
  bufs = g_new0 (MemresBuffer *, t.ops->len);
  hold = mt_stream_hold (NULL);
  replay_ops (&t, 0, lo, mr, NULL, bufs);
  mt_stream_release (hold);
  mt_sync_ok (NULL);
  for (guint step = 0; step < n; step++)
    {
      guint64 r0 = counter (arena, "granules_remapped");
      long c0[N_ENTRIES], c1[N_ENTRIES];
      guint next = g_rand_int_range (rng, 1, gap + 1);

      hold = mt_stream_hold (NULL);
      counts_now (c0);
      for (guint i = lo; i < hi; i++)
        {
          replay_ops (&t, i, i + 1, mr, NULL, bufs);
          if (--next > 0)
            continue;
          next = g_rand_int_range (rng, 1, gap + 1);
          mt_stream_release (hold);
          mt_sync_ok (NULL); /* all of it: the fake's device thread not racing the host */
          hold = mt_stream_hold (NULL);
        }
      counts_now (c1);
      mt_stream_release (hold);
      mt_sync_ok (NULL);
      for (guint e = 0; e < N_ENTRIES; e++)
        each[step][e] = c1[e] - c0[e];
      remapped[step] = counter (arena, "granules_remapped") - r0;
    }
  {
    MemresStats st = stats_ok (arena);

    g_test_message ("%s seed %u: peak physical %" G_GUINT64_FORMAT " / peak used %" G_GUINT64_FORMAT
                    " = %.4f; %" G_GUINT64_FORMAT " granules created, %" G_GUINT64_FORMAT " lent",
                    spec, seed, st.reserved_high, st.used_high,
                    (double) st.reserved_high / st.used_high, counter (arena, "granules_created"),
                    counter (arena, "granules_lent"));
    if (strstr (spec, "place=stable") != NULL)
      g_assert_cmpuint (st.reserved_high * 100, <=, st.used_high * 103);
  }
  for (guint i = 0; i < t.ops->len; i++)
    if (bufs[i] != NULL)
      mt_close_ok (bufs[i], NULL);
  mt_sync_ok (NULL);
  g_array_unref (t.ops);
  g_array_unref (t.starts);
}

#define RANDOM_STEPS 40
#define RANDOM_GAP   20

/* issue 38's target 2 with the device catching up every 1-20 ops at random (three seeds): on an
 * H100 plain `arena` remapped 11-208 granules a step for 50+ steps of bench/interop.py's resnet18
 * step (h-converge). Here plain `arena` remaps 2-93 a step for 10-21 steps, `arena:park=true`
 * 1-43 for 7-10 (printed, not asserted: the gap this closes); `cache>arena` nothing after step
 * 0. `arena:place=stable` (arena-stable.c) places the same whenever the events complete: at
 * most 16 granules remapped in step 1, nothing mapped, unmapped or created from step 2 on, and
 * 1.026 times the peak used (1.019 before the remap headroom; plain: 1.039-1.049). */
static void
test_resnet_random (void)
{
  static const char *const specs[]
      = { "arena", "arena:park=true", "cache>arena", "arena:place=stable" };
  static const guint32 seeds[] = { 1, 2, 3 };

  if (!mt_require_fake ("the driver calls are counted by the fake") || !mt_hazard_begin ())
    return;
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    for (guint si = 0; si < G_N_ELEMENTS (seeds); si++)
      {
        guint64 remapped[RANDOM_STEPS];
        long each[RANDOM_STEPS][N_ENTRIES];
        GString *line = g_string_new (NULL);
        gboolean stable = g_str_has_suffix (specs[k], "place=stable");
        gboolean cached = g_str_has_prefix (specs[k], "cache>");

        resnet_random (specs[k], seeds[si], RANDOM_GAP, RANDOM_STEPS, remapped, each);
        for (guint step = 0; step < RANDOM_STEPS; step++)
          g_string_append_printf (line, " %" G_GUINT64_FORMAT "/%ld", remapped[step],
                                  each[step][MAP]);
        g_test_message ("%s seed %u: granules remapped/cuMemMap per step:%s", specs[k], seeds[si],
                        line->str);
        g_string_free (line, TRUE);
        if (stable)
          g_assert_cmpuint (remapped[1], <=, 16);
        for (guint step = stable ? 2 : 1; (stable || cached) && step < RANDOM_STEPS; step++)
          {
            g_assert_cmpuint (remapped[step], ==, 0);
            g_assert_cmpint (each[step][CREATE] + each[step][RELEASE] + each[step][MAP]
                                 + each[step][UNMAP] + each[step][ACCESS],
                             ==, 0);
          }
      }
  mt_hazard_end ();
}

/* bench/interop.py's "empty-del" through the allocator shim: torch.empty of 1 KiB, 64 KiB, 1 MiB
 * and 16 MiB in turn, each deleted at once, on the legacy stream (torch's default stream), with
 * the stream held for the whole loop (@held: the device behind the host) or not. EMPTY_PAIRS
 * pairs after EMPTY_WARM warm-up pairs; the driver calls of the pairs counted into @calls. */
#define EMPTY_WARM  200
#define EMPTY_PAIRS 4000

static const gsize empty_sizes[] = { 1024, 64 << 10, 1 << 20, 16 << 20 };

/* Pairs [from, to) of the loop through @mr on the legacy stream: pair i allocates
 * empty_sizes[i % 4] and closes it at once. */
static void
empty_pairs (MemresResource *mr, guint from, guint to)
{
  for (guint i = from; i < to; i++)
    mt_close_ok (mt_alloc_ok (mr, empty_sizes[i % G_N_ELEMENTS (empty_sizes)], NULL), NULL);
}

static void
empty_del (const char *spec, gboolean held, long *calls)
{
  g_autoptr (MemresResource) mr = mt_new_ok (spec);
  long c0[N_ENTRIES], c1[N_ENTRIES];
  g_autofree char *line = NULL;
  MtStreamHold *hold = NULL;

  empty_pairs (mr, 0, EMPTY_WARM);
  mt_sync_ok (NULL);
  hold = held ? mt_stream_hold (NULL) : NULL;
  counts_now (c0);
  empty_pairs (mr, EMPTY_WARM, EMPTY_WARM + EMPTY_PAIRS);
  counts_now (c1);
  if (hold != NULL)
    mt_stream_release (hold);
  mt_sync_ok (NULL);
  for (guint e = 0; e < N_ENTRIES; e++)
    calls[e] = c1[e] - c0[e];
  line = calls_line (calls);
  if (g_str_has_suffix (spec, "park=true"))
    g_assert_cmpuint (counter (mr, "park_hits"), >=, (EMPTY_WARM + EMPTY_PAIRS) / 2 - 4);
  if (g_str_has_prefix (spec, "arena"))
    g_test_message ("%s, %s: empty-del, %u pairs:%s; %" G_GUINT64_FORMAT
                    " park hits, %" G_GUINT64_FORMAT " park flushes, %" G_GUINT64_FORMAT " settles",
                    spec, held ? "held" : "synced", EMPTY_PAIRS, line, counter (mr, "park_hits"),
                    counter (mr, "park_flushes"), counter (mr, "settles"));
  else
    g_test_message ("%s, %s: empty-del, %u pairs:%s", spec, held ? "held" : "synced", EMPTY_PAIRS,
                    line);
}

static void
test_empty_del (void)
{
  static const char *const specs[] = { "cache>arena", "arena", "arena:park=true" };
  long calls[G_N_ELEMENTS (specs)][2][N_ENTRIES];

  if (!mt_require_fake ("the driver calls are counted by the fake") || !mt_hazard_begin ())
    return;
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    for (guint held = 0; held < 2; held++)
      {
        empty_del (specs[k], held, calls[k][held]);
        /* no memory call and no wait, device behind or not: the pairs reuse memory */
        for (guint e = 0; e < N_ENTRIES; e++)
          if (e != EV_RECORD && e != CTX_CURRENT)
            g_assert_cmpint (calls[k][held][e], ==, 0);
        /* cache>arena's shared bins and plain arena's legacy-stream closes: one event every
         * 12 pairs at most (a 16 MiB close's bytes count toward ARENA_BYTES_PER_EVENT) */
        g_assert_cmpint (calls[k][held][EV_RECORD], <=, EMPTY_PAIRS / 12);
      }
  /* park=true: every 1 MiB and 16 MiB allocation takes back the extent its size's last close
   * parked, nothing flushed, no event recorded (arena_park_miss_place(): before it, each large
   * allocation missed, flushed the other size's parked extent into the heap and placed there,
   * and every 4th 16 MiB flush recorded the legacy stream's event, 250 cuEventRecord) */
  g_assert_cmpint (calls[2][0][EV_RECORD] + calls[2][1][EV_RECORD], ==, 0);
  mt_hazard_end ();
}

/* bench/interop.py's repetitions as the H100 ran them for issue 38's target 2, through one
 * resource: its warm-up (3 steps, 200 empty-del pairs), then PHASE_REPS times PHASE_STEPS timed
 * steps (each synchronized), PHASE_PAIRS empty-del pairs with the device idle (torch.empty queues
 * no work and interop.py synchronizes around the loop: the fake synchronous meanwhile), and
 * PHASE_AFTER steps back to back (the 5 steps torch.profiler sums, synchronized at their end).
 * The device runs behind each step as resnet_run() has it (@catchup); with @threads 2 each op
 * runs on the trace's thread (the Replayer). The calls of step k of repetition rep into
 * each[rep * PHASE_REP_STEPS + k], a line per repetition printed. (4,000 pairs a phase gave the
 * same calls as 1,000, but for plain `arena` held with one thread, quiet a repetition later; the
 * pairs held instead of idle gave the same as idle.) */
#define PHASE_REPS      5
#define PHASE_STEPS     10
#define PHASE_AFTER     5
#define PHASE_REP_STEPS (PHASE_STEPS + PHASE_AFTER)
#define PHASE_PAIRS     1000

static void
phases_run (const char *spec, guint catchup, guint threads, long (*each)[N_ENTRIES])
{
  static const guint shown[] = { MAP, UNMAP, CREATE, EV_RECORD, EV_QUERY };
  Resnet r;

  if (threads == 2)
    replayer_start ();
  resnet_open (&r, spec);
  for (guint k = 0; k < 2; k++)
    resnet_step (&r, catchup, each[0]);
  mt_fake_set_async (FALSE);
  empty_pairs (r.mr, 0, 200);
  mt_fake_set_async (TRUE);
  for (guint rep = 0; rep < PHASE_REPS; rep++)
    {
      g_autoptr (GString) line = g_string_new (NULL);
      long (*mine)[N_ENTRIES] = &each[rep * PHASE_REP_STEPS];

      for (guint k = 0; k < PHASE_STEPS; k++)
        resnet_step (&r, catchup, mine[k]);
      mt_fake_set_async (FALSE);
      empty_pairs (r.mr, 0, PHASE_PAIRS);
      mt_fake_set_async (TRUE);
      resnet_run (&r, catchup, PHASE_AFTER, &mine[PHASE_STEPS]);
      for (guint i = 0; i < G_N_ELEMENTS (shown); i++)
        {
          g_string_append_printf (line, "%s %s", i > 0 ? ";" : "", entries[shown[i]]);
          for (guint k = 0; k < PHASE_REP_STEPS; k++)
            g_string_append_printf (line, "%s%ld", k == PHASE_STEPS ? " | " : " ",
                                    mine[k][shown[i]]);
        }
      g_test_message ("%s, catch-up %s, %u thread%s: rep %u:%s", spec,
                      catchup == CATCHUP_RANDOM ? "random"
                      : catchup == 0            ? "none"
                                                : (catchup == 5 ? "5" : "20"),
                      threads, threads > 1 ? "s" : "", rep, line->str);
    }
  resnet_close (&r);
  if (threads == 2)
    replayer_stop ();
}

/* The memory calls (create, release, map, unmap, access) of the steps of repetitions @from.. */
static long
phases_memory_calls (long (*each)[N_ENTRIES], guint from)
{
  long n = 0;

  for (guint i = from * PHASE_REP_STEPS; i < PHASE_REPS * PHASE_REP_STEPS; i++)
    n += each[i][CREATE] + each[i][RELEASE] + each[i][MAP] + each[i][UNMAP] + each[i][ACCESS];
  return n;
}

/* Whether the steps after an empty-del phase make the arena map again, repetition after
 * repetition (issue 38, target 2; on the H100 arena:park=true's step was 3-8 ms slower than
 * torch's for the first 3-4 repetitions, plain arena's 6-7 ms for 3). On the fake the phases
 * barely move park's layout: with one thread its steps make no memory call after the warm-up
 * repetition (0), whatever the lag. The trace's second thread (autograd's: 87 of a step's 93
 * small blocks are freed on the other thread) delays them: with the device catching up every 5
 * ops park remaps until repetition 1 (none there without the pairs). Plain `arena` lends (the
 * memory of the legacy stream's own frees mapped at a second address while the device is
 * behind, arena-lend.c) until repetition 1 with one thread held (none without the pairs) and 2
 * with two, and unmaps the old addresses a repetition more; cache>arena, two threads, catch-up
 * 5, remaps 2 runs of 14 granules every step for ever (a 98 MiB and a 128 MiB buffer taking each
 * other's idle granules): not asserted. Figures: bench/RESULTS.md (h-phases). */
static void
test_phases (void)
{
  static const char *const specs[] = { "arena:park=true", "arena", "cache>arena" };
  /* the first repetition from which no step makes a memory call (G_MAXUINT: not asserted), by
   * spec, then thread count, then lag */
  static const guint catchups[] = { 0, 5, RESNET_CATCHUP, CATCHUP_RANDOM };
  static const guint quiet[3][2][4] = {
    { { 1, 1, 1, 1 }, { 1, 2, 1, 1 } },
    { { 3, 1, 1, 1 }, { 3, 3, 2, 2 } },
    { { 1, 1, 1, 1 }, { 1, G_MAXUINT, 1, 1 } },
  };
  static long each[PHASE_REPS * PHASE_REP_STEPS][N_ENTRIES];

  if (!mt_require_fake ("the driver calls are counted by the fake") || !mt_hazard_begin ())
    return;
  for (guint k = 0; k < G_N_ELEMENTS (specs); k++)
    for (guint threads = 1; threads <= 2; threads++)
      for (guint lag = 0; lag < G_N_ELEMENTS (catchups); lag++)
        {
          guint from = quiet[k][threads - 1][lag];

          /* catch-up 20 (test_resnet_lagged()'s) only in thorough runs: the others bracket it */
          if (catchups[lag] == RESNET_CATCHUP && !g_test_thorough ())
            continue;
          phases_run (specs[k], catchups[lag], threads, each);
          if (from != G_MAXUINT)
            g_assert_cmpint (phases_memory_calls (each, from), ==, 0);
        }
  mt_hazard_end ();
}

/* bench/shim-replay.py's pattern: the whole of resnet18.csv (the weights, every step) replayed
 * from an empty resource, again and again, each repetition ending with the close of what the
 * trace leaves live; on the legacy stream held for the whole repetition (@catchup 0) or with the
 * device catching up after 1 to 64 ops at random (CATCHUP_RANDOM, seeded), on one thread or the
 * trace's two (@threads). The memory calls (create, release, map, unmap, access) of each
 * repetition into @calls, the peak physical over the peak used into *@ratio. */
#define WHOLE_REPS 6

static void whole_trace_refused (const char *spec, guint threads, guint catchup, guint refuse_at,
                                 long *calls, double *ratio, MemresResource **keep);

static void
whole_trace (const char *spec, guint threads, guint catchup, long *calls, double *ratio)
{
  whole_trace_refused (spec, threads, catchup, G_MAXUINT, calls, ratio, NULL);
}

/* whole_trace(), the next cuMemCreate refused (CUDA_ERROR_OUT_OF_MEMORY) at the start of
 * repetition @refuse_at (G_MAXUINT: none), that repetition and the ones after it with the stream
 * not held (the out-of-memory flush waits for the device, which a held stream keeps from
 * finishing); the resource into *@keep when not NULL. */
static void
whole_trace_refused (const char *spec, guint threads, guint catchup, guint refuse_at, long *calls,
                     double *ratio, MemresResource **keep)
{
  const char *dir = g_getenv ("MEMRES_TRACES_DIR");
  g_autofree char *path = g_build_filename (dir, "resnet18.csv", NULL);
  g_autoptr (GArray) before = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GRand) rng = g_rand_new_with_seed (38);
  g_autoptr (MemresResource) mr = NULL;
  g_autofree MemresBuffer **bufs = NULL;
  MemresStats st;
  Trace t;

  if (threads == 2)
    replayer_start ();
  trace_parse (path, &t, before);
  mr = mt_new_ok (spec);
  bufs = g_new0 (MemresBuffer *, t.ops->len);
  for (guint rep = 0; rep < WHOLE_REPS; rep++)
    {
      MtStreamHold *hold = rep < refuse_at ? mt_stream_hold (NULL) : NULL;
      long c0[N_ENTRIES], c1[N_ENTRIES];
      guint n;

      if (rep == refuse_at)
        mt_fake_fail_call ("cuMemCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
      counts_now (c0);
      for (guint i = 0; i < t.ops->len; i += n)
        {
          n = catchup == CATCHUP_RANDOM ? (guint) g_rand_int_range (rng, 1, 65) : t.ops->len;
          replay_ops (&t, i, MIN (t.ops->len, i + n), mr, NULL, bufs);
          if (hold != NULL)
            {
              mt_stream_release (hold);
              hold = mt_stream_hold (NULL);
            }
        }
      for (guint i = 0; i < t.ops->len; i++)
        if (bufs[i] != NULL)
          {
            mt_close_ok (bufs[i], NULL);
            bufs[i] = NULL;
          }
      counts_now (c1);
      if (hold != NULL)
        mt_stream_release (hold);
      mt_sync_ok (NULL);
      calls[rep] = 0;
      for (guint e = CREATE; e <= ACCESS; e++)
        calls[rep] += c1[e] - c0[e];
    }
  st = stats_ok (mr);
  *ratio = (double) st.reserved_high / st.used_high;
  if (keep != NULL)
    *keep = g_steal_pointer (&mr);
  g_array_unref (t.ops);
  g_array_unref (t.starts);
  if (threads == 2)
    replayer_stop ();
}

/* Issue 38's target 2: on an H100 `arena:place=stable` remapped the same 38-43 granules every
 * resnet18 step through the allocator shim; on the fake, bench/shim-replay.py's repetitions
 * remapped 56 a repetition on one thread and 435-496 on two (plain `arena` 150-450 either way).
 * With the slabs stacked at the top of the reservation and the remap headroom
 * (arena-headroom.c): the device catching up at random, no memory call from the second
 * repetition on, 1.0486 times the peak used; the device held for whole repetitions (nothing of a
 * repetition settles inside it: the worst case), none from the fourth (one thread) or fifth (two),
 * 1.088 / 1.102. Plain `arena` here: 97-505 memory calls in every repetition, 1.051-1.095;
 * `arena:park=true` 0 from the fourth or sixth held, 1-184 a repetition at random, 1.063-1.169. */
static void
test_whole_trace (void)
{
  static const guint catchups[] = { 0, CATCHUP_RANDOM };

  if (!mt_require_fake ("the driver calls are counted by the fake") || !mt_hazard_begin ())
    return;
  for (guint threads = 1; threads <= 2; threads++)
    for (guint lag = 0; lag < G_N_ELEMENTS (catchups); lag++)
      {
        long calls[WHOLE_REPS];
        g_autoptr (GString) line = g_string_new (NULL);
        double ratio;

        whole_trace ("arena:place=stable", threads, catchups[lag], calls, &ratio);
        for (guint rep = 0; rep < WHOLE_REPS; rep++)
          g_string_append_printf (line, " %ld", calls[rep]);
        g_test_message ("arena:place=stable, %u thread%s, catch-up %s: memory calls per "
                        "repetition:%s; peak physical / peak used %.4f",
                        threads, threads > 1 ? "s" : "", catchups[lag] == 0 ? "none" : "random",
                        line->str, ratio);
        for (guint rep = catchups[lag] == 0 ? 4 : 1; rep < WHOLE_REPS; rep++)
          g_assert_cmpint (calls[rep], ==, 0);
        g_assert_cmpfloat (ratio, <=, catchups[lag] == 0 ? 1.11 : 1.05);
      }
  mt_hazard_end ();
}

/* The remap headroom gives way when the driver refuses memory (arena-headroom.c): the whole
 * trace repeated as in test_whole_trace(), the first repetition with the device held (103
 * refaults over the run: the headroom grows), and the first cuMemCreate of the second refused.
 * The allocation that met it flushes (counter oom_flushes), the headroom goes to 0 and idle
 * granules are moved instead: every allocation succeeds (245 memory calls in that repetition),
 * and the repetitions after it make none. */
static void
test_headroom_refused (void)
{
  g_autoptr (MemresResource) mr = NULL;
  long calls[WHOLE_REPS], failed = mt_fake_failed_call_count ();
  double ratio;

  if (!mt_require_fake ("the fake refuses the call") || !mt_hazard_begin ())
    return;
  whole_trace_refused ("arena:place=stable", 1, 0, 1, calls, &ratio, &mr);
  g_test_message (
      "memory calls per repetition: %ld %ld %ld %ld %ld %ld; oom flushes %" G_GUINT64_FORMAT
      ", refaults %" G_GUINT64_FORMAT,
      calls[0], calls[1], calls[2], calls[3], calls[4], calls[5], counter (mr, "oom_flushes"),
      counter (mr, "granules_refaulted"));
  g_assert_cmpint (mt_fake_failed_call_count () - failed, ==, 1);
  g_assert_cmpuint (counter (mr, "oom_flushes"), ==, 1);
  g_assert_cmpuint (counter (mr, "granules_refaulted"), >, 0);
  for (guint rep = 4; rep < WHOLE_REPS; rep++)
    g_assert_cmpint (calls[rep], ==, 0);
  mt_hazard_end ();
}

int
main (int argc, char **argv)
{
  /* an H100's memory (backed lazily; read at cuInit) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "80GiB", FALSE);
  mt_init (&argc, &argv);
  g_test_add_data_func ("/arena/steps/held", GUINT_TO_POINTER (HELD), test_steady_steps);
  g_test_add_data_func ("/arena/steps/synced", GUINT_TO_POINTER (0), test_steady_steps);
  g_test_add_data_func ("/arena/steps/legacy-held", GUINT_TO_POINTER (HELD | LEGACY),
                        test_steady_steps);
  g_test_add_data_func ("/arena/steps/legacy-synced", GUINT_TO_POINTER (LEGACY), test_steady_steps);
  g_test_add_func ("/arena/steps/resnet18", test_resnet_steps);
  g_test_add_func ("/arena/steps/resnet18-lagged", test_resnet_lagged);
  g_test_add_func ("/arena/steps/resnet18-random", test_resnet_random);
  g_test_add_func ("/arena/steps/empty-del", test_empty_del);
  g_test_add_func ("/arena/steps/phases", test_phases);
  g_test_add_func ("/arena/steps/whole-trace", test_whole_trace);
  g_test_add_func ("/arena/steps/headroom-refused", test_headroom_refused);
  return g_test_run ();
}

/* conformance-failures.c: the conformance suite's cases of failure and of the end
 * (test-conformance.c): out-of-memory (fault injection and real), retry's handler, finalize with
 * live buffers, threads, exit with live buffers and closes after the driver shut down. */
#include "conformance.h"

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

static gboolean
count_live (const MemresLiveAllocation *allocation G_GNUC_UNUSED, gpointer user_data)
{
  (*(guint *) user_data)++;
  return TRUE;
}

/* The out-of-memory rule through fault injection (device specs, fake) or `limit` (host). */
void
test_out_of_memory (gconstpointer data)
{
  const Spec *s = data;
  g_autoptr (GError) error = NULL;
  MemresStatsCounters counts_before = { 0 };
  MemresResource *stats_layer;
  MemresStats before, after;
  int failures;
  Fx f;

  g_test_summary ("An allocation the memory cannot serve fails with MEMRES_ERROR_OUT_OF_MEMORY: "
                  "a driver call's CUDA_ERROR_OUT_OF_MEMORY (fake), its message naming the call "
                  "and the size asked for; another CUresult stays MEMRES_CUDA_ERROR; nothing "
                  "leaks, no layer counts the failures (statistics, a stats layer's counters, a "
                  "track layer's list, a limit's budget) and the resource serves afterwards.");
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
  before = mt_stats_ok (f.mr);
  stats_layer = memres_resource_find_layer (f.mr, "stats", NULL);
  if (stats_layer != NULL)
    MT_CHECK (memres_stats_get_counters (stats_layer, &counts_before, &error));
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
  /* the failures counted nothing, in any layer */
  after = mt_stats_ok (f.mr);
  g_assert_cmpuint (after.n_buffers, ==, 0);
  g_assert_cmpuint (after.used_current, ==, before.used_current);
  g_assert_cmpuint (after.used_high, ==, before.used_high);
  if (stats_layer != NULL)
    {
      MemresStatsCounters counts;

      MT_CHECK (memres_stats_get_counters (stats_layer, &counts, &error));
      g_assert_cmpmem (&counts, sizeof counts, &counts_before, sizeof counts_before);
    }
  /* a track layer lists no allocation */
  if (memres_resource_find_layer (f.mr, "track", NULL) != NULL)
    {
      guint live = 0;

      MT_CHECK (memres_track_foreach_live (f.mr, count_live, &live, &error));
      g_assert_cmpuint (live, ==, 0);
    }
  /* a limit's budget is whole again: all of it can be had */
  if (memres_resource_find_layer (f.mr, "limit", NULL) != NULL)
    mt_close_ok (alloc_ok (f.s, f.mr, 1024 * MiB, f.stream), f.stream);
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

void
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

/* A request of 1 PiB, more than any device or host has: on the fake (4 GiB devices) and host
 * memory for every spec, on the real driver for the kinds known to refuse it (B_REAL_OOM). */
void
test_out_of_memory_1pib (gconstpointer data)
{
  const Spec *s = data;
  const gsize size = (gsize) 1 << 50;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  Fx f;

  g_test_summary ("1 PiB (RMM's too-large request for every resource) fails with "
                  "MEMRES_ERROR_OUT_OF_MEMORY, twice, holds nothing, and the resource serves "
                  "afterwards.");
  if (!fx_init (&f, data))
    return;
  if (f.drv != NULL && !mt_driver_is_fake () && !is (s, B_REAL_OOM))
    {
      g_test_skip ("on the real driver, only the kinds whose driver call refuses 1 PiB");
      fx_clear (&f);
      return;
    }
#if defined(__SANITIZE_ADDRESS__)
  if (f.drv == NULL)
    {
      /* its allocator aborts the process on a request past its maximum instead of failing */
      g_test_skip ("AddressSanitizer aborts on a posix_memalign() of 1 PiB");
      fx_clear (&f);
      return;
    }
#endif
  buf = memres_resource_allocate (f.mr, size, f.stream, &error);
  g_test_message ("%s: %s", s->spec, error != NULL ? error->message : "(allocated)");
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  /* the same again: the first left nothing that changes the answer */
  g_assert_null (memres_resource_allocate (f.mr, size, f.stream, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  /* nothing stays allocated, and the resource still serves */
  g_assert_cmpuint (mt_stats_ok (f.mr).n_buffers, ==, 0);
  buf = alloc_ok (f.s, f.mr, 4096, f.stream);
  mt_close_ok (buf, f.stream);
  fx_clear (&f);
}

/* The resource's last reference dropped while buffers live: they hold it. */
void
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

void
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

void
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

void
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

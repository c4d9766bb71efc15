/* memres - CUDA memory resources
 * test-conformance.c: the contract every resource keeps, tested once over every kind and stack.
 * Each case runs for each spec of the table below: a base kind alone, and under each adaptor
 * (`cache>`, `stats>`, `limit>`, `track>`, `log>`, `retry>`). Without a driver (suite core) the
 * host specs run; with one (suite fake, and gpu against the real driver) the device specs.
 * Tests are named /conformance/SPEC/CASE. Adding a kind is one line of `bases`, adding an
 * adaptor one line of `layers`.
 *
 * The out-of-memory rule (a driver call that answers CUDA_ERROR_OUT_OF_MEMORY is reported as
 * MEMRES_ERROR_OUT_OF_MEMORY, its message naming the call; other CUresults stay
 * MEMRES_CUDA_ERROR) and the exit rule (a buffer closed once the driver has shut down at process
 * exit closes without an error: plugins/common/release.h) are cases here too. */
#include "conformance.h"

#include <stdlib.h>
#include <string.h>

static const Base bases[] = {
  { "host", 0, NULL, NULL, 10000 },
  { "dmr:pool=new,release_threshold=max", B_DEVICE | B_REAL_OOM | B_TRIM | B_HOLDS | B_OWN_POOL,
    "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 10000 },
  { "dmr", B_DEVICE | B_SHARED | B_ALONE | B_TRIM | B_REAL_OOM, "cuMemAllocFromPoolAsync",
    "cuMemFreeAsync", 1000 },
  { "dmr:sync_fallback=true", B_DEVICE | B_NO_POOLS | B_ALONE | B_TRIM, "cuMemAlloc", "cuMemFree",
    200 },
  { "vmm", B_DEVICE | B_ROUNDS, "cuMemCreate", "cuMemUnmap", 100 },
  { "pinned", B_DEVICE | B_REAL_OOM | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 1000 },
  { "pinned:mode=legacy", B_DEVICE | B_REAL_OOM | B_ALONE | B_TRIM, "cuMemHostAlloc",
    "cuMemFreeHost", 200 },
  { "managed:pool=new", B_DEVICE | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 1000 },
  { "managed", B_DEVICE | B_SHARED | B_ALONE | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync",
    1000 },
  { "managed:pool=none", B_DEVICE | B_REAL_OOM | B_ALONE | B_TRIM, "cuMemAllocManaged", "cuMemFree",
    200 },
  { "graph", B_DEVICE | B_CAPTURE | B_SHARED | B_NO_CACHE | B_TRIM, "cuMemAllocAsync",
    "cuMemFreeAsync", 20 },
  { "ipc", B_DEVICE | B_TRIM, "cuMemAllocFromPoolAsync", "cuMemFreeAsync", 1000 },
  { "arena", B_DEVICE | B_TRIM, "cuMemCreate", NULL, 1000, L_KEEPS | L_RETRIES | L_CHUNKS },
};

static const Layer layers[] = {
  { NULL, "", 0 },
  { "cache", "cache>", L_KEEPS | L_RETRIES | L_CHUNKS | L_PREFIX },
  { "stats", "stats>", 0 },
  { "limit", "limit:max=1GiB>", 0 },
  { "track", "track>", 0 },
  { "log", "log:path=/dev/null>", 0 },
  { "retry", "retry>", L_RETRIES | L_PREFIX },
  { "stats>limit", "stats>limit:max=1GiB>", L_EXTRA },
};

/* Stacks beyond every layer over every base: a layer over a variant, or two layers. */
static const struct
{
  const char *layer;
  const char *base;
} extra_stacks[] = {
  { "track", "pinned:mode=legacy" },
  { "stats>limit", "vmm" },
};

gboolean
is (const Spec *s, BaseFlags f)
{
  return (s->base->flags & f) != 0;
}

static gboolean
always (const Spec *s G_GNUC_UNUSED)
{
  return TRUE;
}

static gboolean
retries (const Spec *s)
{
  /* (not over a kind that retries itself: one injected failure never reaches retry) */
  return g_strcmp0 (s->layer->name, "retry") == 0 && is (s, B_DEVICE)
         && !(s->base->as_layer & L_RETRIES);
}

/* The exit rule, where the close reaches the kind's free (not kept by a cache). */
static gboolean
frees_at_close (const Spec *s)
{
  return s->base->free_entry != NULL && !layer_is (s, L_KEEPS);
}

/* An adaptor that passes each allocation to the layer below (not a cache's chunks). */
static gboolean
passes_through (const Spec *s)
{
  return s->layer->name != NULL && !(s->layer->flags & (L_KEEPS | L_EXTRA));
}

static const Case cases[] = {
  { "sizes", test_sizes, always },
  { "zero-size", test_zero_size, always },
  { "max-size", test_max_size, always },
  { "closed", test_closed, always },
  { "streams", test_streams, always },
  { "bytes", test_bytes, always },
  { "stats", test_stats, always },
  { "trim", test_trim, always },
  { "upstream", test_upstream, passes_through },
  { "resize", test_resize, always },
  { "random", test_random, always },
  { "segments", test_segments, always },
  { "out-of-memory", test_out_of_memory, always },
  { "out-of-memory/retry-handler", test_retry_handler, retries },
  { "out-of-memory/1pib", test_out_of_memory_1pib, always },
  { "finalize-live", test_finalize_live, always },
  { "threads", test_threads, always },
  { "exit/live-buffers", test_exit_live, always },
  { "exit/close-after-shutdown", test_close_at_exit, frees_at_close },
};

static GPtrArray *specs; /* of Spec: the suite's whole life */

static void
add_spec (const Base *base, const Layer *layer)
{
  Spec *s = g_new0 (Spec, 1);

  s->base = base;
  s->layer = layer;
  s->spec = g_strconcat (layer->prefix, base->spec, NULL);
  s->name = layer->name == NULL ? g_strdup (base->spec)
                                : g_strconcat (layer->name, ">", base->spec, NULL);
  g_ptr_array_add (specs, s);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    if (cases[i].applies (s))
      {
        g_autofree char *path = g_strdup_printf ("/conformance/%s/%s", s->name, cases[i].name);

        g_test_add_data_func (path, s, cases[i].func);
      }
}

int
main (int argc, char **argv)
{
  /* MEMRES_TEST_SPECS=host (suite core) or device (fake, gpu: without a device they skip);
   * unset: device specs where a driver loads, host specs where none does */
  gboolean devices;

  mt_init (&argc, &argv);
  devices = g_getenv ("MEMRES_TEST_SPECS") != NULL
                ? g_strcmp0 (g_getenv ("MEMRES_TEST_SPECS"), "device") == 0
                : memres_cuda_get_driver (NULL) != NULL;
  specs = g_ptr_array_new ();
  for (guint b = 0; b < G_N_ELEMENTS (bases); b++)
    {
      if (((bases[b].flags & B_DEVICE) != 0) != devices)
        continue;
      for (guint l = 0; l < G_N_ELEMENTS (layers); l++)
        {
          for (guint e = 0; e < G_N_ELEMENTS (extra_stacks); e++)
            if (g_strcmp0 (extra_stacks[e].layer, layers[l].name) == 0
                && g_strcmp0 (extra_stacks[e].base, bases[b].spec) == 0)
              add_spec (&bases[b], &layers[l]);
          if ((l > 0 && (bases[b].flags & B_ALONE)) || (layers[l].flags & L_EXTRA))
            continue;
          if ((layers[l].flags & L_KEEPS) && (bases[b].flags & B_NO_CACHE))
            continue;
          add_spec (&bases[b], &layers[l]);
        }
    }
  return g_test_run ();
}

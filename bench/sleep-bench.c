/* memres-sleep-bench: sleep and wake (docs/sleep.md, issue 34) measured against the raw driver
 * calls and a re-implementation of vLLM's published method, paired in one run. Not a test:
 * timings only count on a GPU; the `sleep-bench-smoke` test (suite fake) only proves it runs.
 *
 *   memres-sleep-bench [--spec SPEC] [--buffers N] [--min SIZE] [--max SIZE] [--total SIZE]
 *                      [--calls-only] [--restore-batch SIZE]
 *
 * At least N buffers (default 10000) and `total` bytes (default 40 GiB), of sizes drawn
 * log-uniformly from [min, max] (4 KiB to 1 GiB), each draw capped so that the buffers still to
 * come can have `min` bytes each (so the first few hundred take most of the bytes and the rest
 * are small), every other one tagged "bench-weights" or "bench-kv" (half of them tagged), from
 * SPEC (default cache>vmm). Then, in order:
 *  1. each tagged buffer filled, its checksum taken (a read back through the host);
 *  2. "kv" put to sleep with discard and "weights" with backup, timed; cuMemGetInfo's free bytes
 *     before and after: the share of the slept bytes given back (target >= 99 %);
 *  3. one allocation of 90 % of what was given back, from a `vmm` resource of its own, filled,
 *     freed: the memory is usable by someone else;
 *  4. both woken, timed; addresses and checksums compared (target: identical);
 *  5. the raw driver calls for the same physical allocations as the "kv" sleep released: the
 *     granules under the ranges of its MEMRES_SEGMENT_UNMAPPING events, and on them, after the
 *     wake (untimed), the allocations that map them (cuMemRetainAllocationHandle per granule:
 *     `vmm`'s chunks, `arena`'s granules); timed, the fewest raw calls for those allocations:
 *     create + map of each and one set access per run of adjacent ones, one unmap per run +
 *     release of each (raw_*). The discard target is the "kv" sleep + wake <= 1.2x that
 *     (discard_vs_raw). Also, the same granules as one allocation per run (raw_runs, runs_*,
 *     discard_vs_runs): what the allocations' sizes cost on top. (Before issue 34's call
 *     counts, the baseline was one allocation per outermost unmapped range, rounded up to
 *     granules: fewer allocations than memres held for `vmm` (64 MiB chunks), and under
 *     `cache>arena` one per buffer, which was neither the granules released nor their handles.)
 *  6. page-locked copy bandwidth (cuMemcpy of 256 MiB each way), against the backup's restore
 *     (target >= 80 %): the "weights" wake (wake_weights_backup_ms) makes the physical memory
 *     again and copies the bytes back; the raw calls that make the same physical allocations
 *     (those under the ranges of the weights sleep's MEMRES_SEGMENT_UNMAPPING events, found as in
 *     5.), create + map + set access alone, are timed too (weights_raw_create_map_ms, the least
 *     of 3 runs), so that the copy's own bandwidth is weights_bytes / (wake - create + map)
 *     (weights_copy_only_gbps, against pinned_h2d_gbps: copy_only_vs_h2d; the whole wake's:
 *     weights_wake_gbps, wake_vs_h2d);
 *  7. vLLM's method on the "weights" buffers: per allocation a device synchronize, a copy into
 *     page-locked memory, one unmap and release; back: create, map, set access, copy: memres
 *     must be faster in both directions.
 *  8. the weights' backup wake paired in this run: with its restoring copies queued only after
 *     the last map (restore batch 0: wake_weights_serial_ms) and as the memory comes (the
 *     policy's batch, --restore-batch, 64 MiB by default: wake_weights_batched_ms), each after a
 *     sleep of its own, the least of 2 each, alternating; batched_vs_serial below 1 is the
 *     overlap's gain (docs/sleep.md, "The wake's copies as the memory comes").
 * With --calls-only, steps 1, 2 and 4 alone (the others' figures 0) and 5's allocations found,
 * not timed: the sleeps and wakes for callgrind (bench/sleep-callgrind.py), without the raw calls,
 * the copies and vLLM's method, which take minutes on the fake driver. On the fake driver
 * (MEMRES_CUDA_DRIVER naming it), kv_driver_calls counts the kv sleep's and wake's driver calls
 * (its trace: cuMemUnmap and cuMemRelease, cuMemCreate, cuMemMap and cuMemSetAccess, the others
 * together) beside the raw calls' (raw_sleep, raw_wake), so that calls compare where time cannot;
 * null counts on a real driver. There the JSON also has "calls" (tests/fakecuda's counters,
 * found with dlsym()): for each of the four calls of steps 2 and 4, the copies it issued (every
 * cuMemcpy* entry of the driver table), its cuStreamSynchronize and cuCtxSynchronize calls and its
 * page-locked allocations (cuMemAllocFromPoolAsync, cuMemHostAlloc: the backups); and the
 * weights' buffers, the runs of address-contiguous ones among them and the physical handles their
 * sleep released. Prints one JSON object. */
#include <memres/memres.h>
#include <memres/memres-plugin.h>

#include "fakecuda-control.h"
#include "unmapped-ranges.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define GRANULE ((gsize) 2 << 20)

static const MemresCudaDriver *drv;

/* The fake driver's counters, NULL on another driver */
static long (*fake_call_count) (const char *entry);
static void (*fake_get_counts) (FakeCudaCounts *counts);

static void
fake_find (void)
{
  void *lib = dlopen (drv->path, RTLD_NOW | RTLD_NOLOAD);

  if (lib == NULL)
    return;
  fake_call_count = (long (*) (const char *)) dlsym (lib, "fakecuda_call_count");
  fake_get_counts = (void (*) (FakeCudaCounts *)) dlsym (lib, "fakecuda_get_counts");
  if (fake_call_count == NULL || fake_get_counts == NULL)
    fake_call_count = NULL;
}

/* What one sleep or wake called, on the fake */
typedef struct
{
  long copies, stream_syncs, ctx_syncs, host_allocs;
} Calls;

static void
calls_now (Calls *c)
{
  /* every copy entry point of the driver table (memres-cuda.h) */
  static const char *const copies[]
      = { "cuMemcpy", "cuMemcpyAsync", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync" };

  memset (c, 0, sizeof *c);
  if (fake_call_count == NULL)
    return;
  for (guint i = 0; i < G_N_ELEMENTS (copies); i++)
    c->copies += fake_call_count (copies[i]);
  c->stream_syncs = fake_call_count ("cuStreamSynchronize");
  c->ctx_syncs = fake_call_count ("cuCtxSynchronize");
  c->host_allocs = fake_call_count ("cuMemAllocFromPoolAsync") + fake_call_count ("cuMemHostAlloc");
}

/* @c: the calls since @c was taken */
static void
calls_since (Calls *c)
{
  Calls now;

  calls_now (&now);
  c->copies = now.copies - c->copies;
  c->stream_syncs = now.stream_syncs - c->stream_syncs;
  c->ctx_syncs = now.ctx_syncs - c->ctx_syncs;
  c->host_allocs = now.host_allocs - c->host_allocs;
}

static long
live_handles (void)
{
  FakeCudaCounts counts;

  if (fake_get_counts == NULL)
    return 0;
  fake_get_counts (&counts);
  return counts.physical_handles;
}

static char *
calls_json (const char *name, const Calls *c)
{
  return g_strdup_printf ("\"%s\": {\"copies\": %ld, \"stream_syncs\": %ld, \"ctx_syncs\": %ld, "
                          "\"host_allocs\": %ld}",
                          name, c->copies, c->stream_syncs, c->ctx_syncs, c->host_allocs);
}

/* The runs of address-contiguous buffers among @bufs of @tag */
static guint
contiguous_runs (GPtrArray *bufs, const char *tag)
{
  g_autoptr (GArray) segs = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  guint runs = 0;

  for (guint i = 0; i < bufs->len; i++)
    {
      const char *t = memres_buffer_get_tag (bufs->pdata[i]);
      MemresSegment s = { 0 };

      if (t == NULL || !g_str_equal (t, tag))
        continue;
      s.base = memres_buffer_get_address (bufs->pdata[i]);
      s.length = memres_buffer_get_size (bufs->pdata[i]);
      g_array_append_val (segs, s);
    }
  g_array_sort (segs, unmapped_ranges_cmp);
  for (guint i = 0; i < segs->len; i++)
    {
      const MemresSegment *s = &g_array_index (segs, MemresSegment, i);

      runs += i == 0
              || g_array_index (segs, MemresSegment, i - 1).base
                         + g_array_index (segs, MemresSegment, i - 1).length
                     != s->base;
    }
  return runs;
}

static gint64
now_ns (void)
{
  return g_get_monotonic_time () * 1000;
}

static void
die (const char *what, GError *error)
{
  g_printerr ("memres-sleep-bench: %s: %s\n", what, error != NULL ? error->message : "failed");
  exit (1);
}

static void
cu (CUresult r, const char *call)
{
  if (r != CUDA_SUCCESS)
    {
      g_autoptr (GError) error = NULL;

      memres_cuda_set_error (&error, r, call);
      die (call, error);
    }
}

static guint64
checksum (MemresBuffer *buf, guint8 *host)
{
  g_autoptr (GError) error = NULL;
  gsize size = memres_buffer_get_size (buf);
  guint64 h = 1469598103934665603ull;

  for (gsize off = 0; off < size; off += 64 << 20)
    {
      gsize n = MIN ((gsize) 64 << 20, size - off);

      if (!memres_buffer_read (buf, off, host, n, NULL, &error))
        die ("reading a buffer back", error);
      for (gsize i = 0; i < n; i += 4096) /* a byte per page: enough to see a lost page */
        h = (h ^ host[i]) * 1099511628211ull;
    }
  return h;
}

static guint64
free_bytes (void)
{
  size_t free_b = 0, total = 0;

  cu (drv->cuMemGetInfo (&free_b, &total), "cuMemGetInfo");
  return free_b;
}

/* The fake driver's call trace (tests/fakecuda/fakecuda-control.h), found where
 * MEMRES_CUDA_DRIVER names the fake: the kv sleep's and wake's driver calls are counted and
 * printed beside the raw calls' count (kv_driver_calls), so that the build VM compares calls where
 * it cannot compare time. Both NULL on a real driver. */
static void (*trace_begin) (void);
static int (*trace_end) (const char ***names);

static void
fake_trace_find (void)
{
  const char *path = g_getenv ("MEMRES_CUDA_DRIVER");
  void *h = path != NULL ? dlopen (path, RTLD_NOW | RTLD_NOLOAD) : NULL;

  if (h == NULL)
    return;
  trace_begin = (void (*) (void)) dlsym (h, "fakecuda_trace_begin");
  trace_end = (int (*) (const char ***)) dlsym (h, "fakecuda_trace_end");
  if (trace_begin == NULL || trace_end == NULL)
    trace_begin = NULL;
}

static void
trace_start (void)
{
  if (trace_begin != NULL)
    trace_begin ();
}

/* The traced calls since trace_start() as a JSON object: each of @entries (NULL-terminated) and
 * "other", the rest; "null" without the fake. */
static char *
trace_stop (const char *const *entries)
{
  const char **names = NULL;
  GString *out;
  int n, other;

  if (trace_begin == NULL)
    return g_strdup ("null");
  n = other = trace_end (&names);
  out = g_string_new ("{");
  for (guint k = 0; entries[k] != NULL; k++)
    {
      int c = 0;

      for (int i = 0; i < n; i++)
        c += g_str_equal (names[i], entries[k]);
      other -= c;
      g_string_append_printf (out, "\"%s\": %d, ", entries[k], c);
    }
  g_string_append_printf (out, "\"other\": %d}", other);
  return g_string_free (out, FALSE);
}

static const char *const sleep_entries[] = { "cuMemUnmap", "cuMemRelease", NULL };
static const char *const wake_entries[] = { "cuMemCreate", "cuMemMap", "cuMemSetAccess", NULL };

/* One physical allocation (or a run of them) of the memory the kv sleep released: its address
 * there and its bytes. */
typedef struct
{
  guint64 base, size;
  guint first, n; /* raw_calls(): a run's handles, [first, first + n) of the handles */
} Extent;

/* The granule-aligned union of @segs (sorted, outermost), merged where they touch. */
static GArray *
granule_ranges (GArray *segs)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (Extent));

  for (guint i = 0; i < segs->len; i++)
    {
      const MemresSegment *s = &g_array_index (segs, MemresSegment, i);
      Extent e = { s->base / GRANULE * GRANULE, 0, 0, 0 };

      e.size = (s->base + s->length + GRANULE - 1) / GRANULE * GRANULE - e.base;
      if (out->len > 0)
        {
          Extent *last = &g_array_index (out, Extent, out->len - 1);

          if (e.base <= last->base + last->size)
            {
              last->size = MAX (last->base + last->size, e.base + e.size) - last->base;
              continue;
            }
        }
      g_array_append_val (out, e);
    }
  return out;
}

/* The physical allocations under the ranges @segs the kv sleep unmapped, as the wake made them
 * again: granule by granule, cuMemRetainAllocationHandle() (the handle that maps it; each
 * retain released again), adjacent granules of one handle one allocation; sorted by address.
 * Granules with nothing mapped after the wake (memory the sleep gave back for good, such as free
 * cached blocks) are counted in *@released_only (each run of them one allocation: released,
 * never created again). Untimed. */
static GArray *
handles_under (GArray *segs, GArray **released_only)
{
  g_autoptr (GArray) ranges = granule_ranges (segs);
  GArray *out = g_array_new (FALSE, FALSE, sizeof (Extent));

  *released_only = g_array_new (FALSE, FALSE, sizeof (Extent));
  for (guint i = 0; i < ranges->len; i++)
    {
      const Extent *r = &g_array_index (ranges, Extent, i);
      CUmemGenericAllocationHandle last = 0;
      GArray *last_to = NULL;

      for (guint64 a = r->base; a < r->base + r->size; a += GRANULE)
        {
          CUmemGenericAllocationHandle h = 0;
          GArray *to;

          if (drv->cuMemRetainAllocationHandle (&h, (void *) (guintptr) a) == CUDA_SUCCESS)
            cu (drv->cuMemRelease (h), "cuMemRelease");
          else
            h = 0;
          to = h != 0 ? out : *released_only;
          if (to == last_to && h == last && to->len > 0)
            g_array_index (to, Extent, to->len - 1).size += GRANULE;
          else
            {
              Extent e = { a, GRANULE, 0, 0 };

              g_array_append_val (to, e);
            }
          last = h;
          last_to = to;
        }
    }
  return out;
}

/* @handles (sorted) as runs of adjacent addresses: one Extent per run, naming its handles. */
static GArray *
runs_of (GArray *handles)
{
  GArray *runs = g_array_new (FALSE, FALSE, sizeof (Extent));

  for (guint k = 0; k < handles->len; k++)
    {
      const Extent *h = &g_array_index (handles, Extent, k);
      Extent *last = runs->len > 0 ? &g_array_index (runs, Extent, runs->len - 1) : NULL;

      if (last != NULL && last->base + last->size == h->base)
        {
          last->size += h->size;
          last->n++;
        }
      else
        {
          Extent e = { h->base, h->size, k, 1 };

          g_array_append_val (runs, e);
        }
    }
  return runs;
}

/* The raw driver calls for physical allocations of the sizes of @handles, laid out as @runs of
 * adjacent ones (one reservation per run, untimed): timed, per run, cuMemCreate and cuMemMap of
 * each allocation and one cuMemSetAccess of the run (*@t_create), then one cuMemUnmap of the run
 * and cuMemRelease of each allocation (*@t_release): the fewest calls for those allocations.
 * With @handles = @runs, one allocation per run. The @released_only ones (made untimed) are only
 * released, as the sleep gave them back and the wake made nothing for them. */
static void
raw_calls (GArray *handles, GArray *runs, GArray *released_only, gint64 *t_create,
           gint64 *t_release)
{
  CUmemAllocationProp prop = { 0 };
  CUmemAccessDesc access
      = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
  guint n_runs = runs->len + released_only->len;
  CUdeviceptr *ptr = g_new0 (CUdeviceptr, n_runs + 1);
  CUmemGenericAllocationHandle *h = g_new0 (CUmemGenericAllocationHandle, handles->len + 1);
  CUmemGenericAllocationHandle *gone
      = g_new0 (CUmemGenericAllocationHandle, released_only->len + 1);
  gboolean same = handles == runs;
  gint64 t0;

  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  for (guint r = 0; r < runs->len; r++)
    cu (drv->cuMemAddressReserve (&ptr[r], g_array_index (runs, Extent, r).size, GRANULE, 0, 0),
        "cuMemAddressReserve");
  for (guint r = 0; r < released_only->len; r++)
    {
      CUdeviceptr p;
      gsize size = g_array_index (released_only, Extent, r).size;

      cu (drv->cuMemAddressReserve (&p, size, GRANULE, 0, 0), "cuMemAddressReserve");
      ptr[runs->len + r] = p;
      cu (drv->cuMemCreate (&gone[r], size, &prop, 0), "cuMemCreate");
      cu (drv->cuMemMap (p, size, 0, gone[r], 0), "cuMemMap");
      cu (drv->cuMemSetAccess (p, size, &access, 1), "cuMemSetAccess");
    }
  t0 = now_ns ();
  for (guint r = 0; r < runs->len; r++)
    {
      const Extent *run = &g_array_index (runs, Extent, r);
      guint first = same ? r : run->first, n = same ? 1 : run->n;
      gsize off = 0;

      for (guint k = first; k < first + n; k++)
        {
          gsize size = g_array_index (handles, Extent, k).size;

          cu (drv->cuMemCreate (&h[k], size, &prop, 0), "cuMemCreate");
          cu (drv->cuMemMap (ptr[r] + off, size, 0, h[k], 0), "cuMemMap");
          off += size;
        }
      cu (drv->cuMemSetAccess (ptr[r], run->size, &access, 1), "cuMemSetAccess");
    }
  *t_create = now_ns () - t0;
  t0 = now_ns ();
  for (guint r = 0; r < runs->len; r++)
    {
      const Extent *run = &g_array_index (runs, Extent, r);
      guint first = same ? r : run->first, n = same ? 1 : run->n;

      cu (drv->cuMemUnmap (ptr[r], run->size), "cuMemUnmap");
      for (guint k = first; k < first + n; k++)
        cu (drv->cuMemRelease (h[k]), "cuMemRelease");
    }
  for (guint r = 0; r < released_only->len; r++)
    {
      cu (drv->cuMemUnmap (ptr[runs->len + r], g_array_index (released_only, Extent, r).size),
          "cuMemUnmap");
      cu (drv->cuMemRelease (gone[r]), "cuMemRelease");
    }
  *t_release = now_ns () - t0;
  for (guint r = 0; r < runs->len; r++)
    cu (drv->cuMemAddressFree (ptr[r], g_array_index (runs, Extent, r).size), "cuMemAddressFree");
  for (guint r = 0; r < released_only->len; r++)
    cu (drv->cuMemAddressFree (ptr[runs->len + r], g_array_index (released_only, Extent, r).size),
        "cuMemAddressFree");
  g_free (ptr);
  g_free (h);
  g_free (gone);
}

int
main (int argc, char **argv)
{
  g_autofree char *spec_opt = NULL; /* --spec, owned (GOption duplicates it) */
  const char *spec = "cache>vmm";
  gint64 n_min = 10000, restore_batch = -1;
  gboolean calls_only = FALSE;
  guint64 min = 4096, max = (guint64) 1 << 30, total = (guint64) 40 << 30;
  GOptionEntry entries[] = {
    { "spec", 0, 0, G_OPTION_ARG_STRING, &spec_opt, "the stack", "SPEC" },
    { "buffers", 0, 0, G_OPTION_ARG_INT64, &n_min, "fewest buffers", "N" },
    { "min", 0, 0, G_OPTION_ARG_INT64, &min, "smallest buffer (bytes)", "SIZE" },
    { "max", 0, 0, G_OPTION_ARG_INT64, &max, "largest buffer (bytes)", "SIZE" },
    { "total", 0, 0, G_OPTION_ARG_INT64, &total, "bytes in all", "SIZE" },
    { "calls-only", 0, 0, G_OPTION_ARG_NONE, &calls_only, "only the sleeps and wakes", NULL },
    { "restore-batch", 0, 0, G_OPTION_ARG_INT64, &restore_batch,
      "the weights' restore batch (bytes; 0: every copy after the last map; default: the "
      "policy's, 64 MiB)",
      "SIZE" },
    { NULL },
  };
  g_autoptr (GOptionContext) oc = g_option_context_new ("- sleep and wake, measured");
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) other = NULL;
  g_autoptr (MemresSleepPolicy) backup = NULL;
  GPtrArray *bufs = g_ptr_array_new ();
  GArray *sums, *addrs;
  guint64 slept = 0, weights_bytes = 0, sum_bytes = 0, free0, free1, given, raw_bytes = 0;
  guint handles_n = 0, runs_n = 0, ranges_n = 0;
  guint64 released_only_bytes = 0;
  GArray *released_only = NULL;
  gint64 t_sleep, t_wake, t_sleep_kv, t_wake_kv, t_raw_release = 0, t_raw_create = 0, t0;
  gint64 t_runs_release = 0, t_runs_create = 0;
  gint64 t_copy_d2h = 0, t_copy_h2d = 0, t_vllm_sleep = 0, t_vllm_wake = 0;
  gboolean same = TRUE;
  guint8 *host;
  GRand *rand = g_rand_new_with_seed (34);
  GArray *unmapped = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  GArray *unmapped_w = g_array_new (FALSE, FALSE, sizeof (MemresSegment));
  gint64 t_wake_w, t_w_create = G_MAXINT64;
  gint64 t_wake_serial = G_MAXINT64, t_wake_batched = G_MAXINT64;
  guint w_handles_n = 0;
  guint64 w_raw_bytes = 0;
  double w_copy_gbps, w_wake_gbps, h2d_gbps;
  guint sub;
  Calls c_sleep_kv, c_sleep_w, c_wake_kv, c_wake_w;
  long w_handles_released;
  g_autofree char *kv_sleep_calls = NULL, *kv_wake_calls = NULL;
  guint released_only_n = 0;

  g_option_context_add_main_entries (oc, entries, NULL);
  if (!g_option_context_parse (oc, &argc, &argv, &error))
    die ("options", error);
  if (spec_opt != NULL)
    spec = spec_opt;
  if ((drv = memres_cuda_get_driver (&error)) == NULL || !memres_cuda_ensure_context (0, &error))
    die ("the driver", error);
  fake_find ();
  if ((mr = memres_resource_new (spec, &error)) == NULL)
    die (spec, error);
  fake_trace_find ();
  host = g_malloc (64 << 20);

  /* 1. the buffers */
  for (gint64 i = 0; i < n_min || sum_bytes < total; i++)
    {
      double lo = log ((double) min), hi = log ((double) max);
      gsize size = (gsize) exp (lo + (hi - lo) * g_rand_double (rand));
      const char *tag = i % 2 == 0 ? NULL : (i % 4 == 1 ? "bench-weights" : "bench-kv");
      guint64 left = total > sum_bytes ? total - sum_bytes : 0;
      guint64 keep = i < n_min ? (guint64) (n_min - i - 1) * min : 0; /* for the buffers to come */
      MemresBuffer *b;

      size = MIN (size, left > keep ? left - keep : min);
      size = (MAX (size, 256) + 255) & ~(gsize) 255; /* whole 32-bit words for the fill */
      if (tag != NULL)
        memres_tag_push (tag, NULL);
      b = memres_resource_allocate (mr, size, NULL, &error);
      if (tag != NULL)
        memres_tag_pop (tag, NULL);
      if (b == NULL)
        die ("allocating", error);
      sum_bytes += memres_buffer_get_size (b);
      g_ptr_array_add (bufs, b);
    }
  sums = g_array_sized_new (FALSE, TRUE, sizeof (guint64), bufs->len);
  addrs = g_array_sized_new (FALSE, TRUE, sizeof (guint64), bufs->len);
  g_array_set_size (sums, bufs->len);
  g_array_set_size (addrs, bufs->len);
  for (guint i = 0; i < bufs->len; i++)
    {
      MemresBuffer *b = bufs->pdata[i];
      const char *tag = memres_buffer_get_tag (b);

      g_array_index (addrs, guint64, i) = memres_buffer_get_address (b);
      if (tag == NULL)
        continue;
      slept += memres_buffer_get_size (b);
      if (g_str_equal (tag, "bench-weights"))
        {
          weights_bytes += memres_buffer_get_size (b);
          if (!memres_buffer_fill (b, (guint32) (i * 2654435761u), 4, NULL, &error))
            die ("filling", error);
          g_array_index (sums, guint64, i) = checksum (b, host);
        }
    }

  /* 2. sleep */
  backup = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, NULL);
  if (restore_batch >= 0
      && !memres_sleep_policy_set_restore_batch (backup, (gsize) restore_batch, &error))
    die ("the restore batch", error);
  free0 = free_bytes ();
  sub = memres_resource_subscribe_segments (mr, unmapped_ranges_collect, unmapped, NULL, &error);
  if (sub == 0)
    die ("subscribing to segment events", error);
  calls_now (&c_sleep_kv);
  trace_start ();
  t0 = now_ns ();
  if (!memres_resource_sleep (mr, "bench-kv", NULL, NULL, &error))
    die ("sleeping kv", error);
  t_sleep_kv = now_ns () - t0;
  calls_since (&c_sleep_kv);
  kv_sleep_calls = trace_stop (sleep_entries);
  if (!memres_resource_unsubscribe_segments (mr, sub, &error))
    die ("unsubscribing", error);
  unmapped_ranges_keep_outermost (unmapped);
  /* the weights' segments untimed: subscribing is not part of the sleep */
  t_sleep = now_ns () - t0;
  sub = memres_resource_subscribe_segments (mr, unmapped_ranges_collect, unmapped_w, NULL, &error);
  if (sub == 0)
    die ("subscribing to segment events", error);
  w_handles_released = live_handles ();
  calls_now (&c_sleep_w);
  t0 = now_ns ();
  if (!memres_resource_sleep (mr, "bench-weights", backup, NULL, &error))
    die ("sleeping weights", error);
  t_sleep += now_ns () - t0;
  calls_since (&c_sleep_w);
  w_handles_released -= live_handles ();
  if (!memres_resource_unsubscribe_segments (mr, sub, &error))
    die ("unsubscribing", error);
  unmapped_ranges_keep_outermost (unmapped_w);
  free1 = free_bytes ();
  given = free1 > free0 ? free1 - free0 : 0;

  /* 3. someone else uses it */
  if (given > GRANULE * 2 && !calls_only)
    {
      other = memres_resource_new ("vmm", &error);
      if (other == NULL)
        die ("vmm", error);
    }
  if (other != NULL)
    {
      MemresBuffer *b = memres_resource_allocate (other, (gsize) (given * 0.9), NULL, &error);

      if (b == NULL || !memres_buffer_fill (b, 0xdeadbeef, 4, NULL, &error)
          || !memres_stream_synchronize (NULL, &error) || !memres_buffer_close (b, NULL, &error))
        die ("using the memory given back", error);
      memres_buffer_unref (b);
    }

  /* 4. wake */
  calls_now (&c_wake_kv);
  trace_start ();
  t0 = now_ns ();
  if (!memres_resource_wake (mr, "bench-kv", NULL, &error))
    die ("waking kv", error);
  t_wake_kv = now_ns () - t0;
  calls_since (&c_wake_kv);
  kv_wake_calls = trace_stop (wake_entries);
  calls_now (&c_wake_w);
  if (!memres_resource_wake (mr, "bench-weights", NULL, &error))
    die ("waking weights", error);
  t_wake = now_ns () - t0;
  calls_since (&c_wake_w);
  t_wake_w = t_wake - t_wake_kv;
  for (guint i = 0; i < bufs->len; i++)
    {
      MemresBuffer *b = bufs->pdata[i];
      const char *tag = memres_buffer_get_tag (b);

      same &= memres_buffer_get_address (b) == g_array_index (addrs, guint64, i);
      if (tag != NULL && g_str_equal (tag, "bench-weights"))
        same &= checksum (b, host) == g_array_index (sums, guint64, i);
    }

  /* 5. the raw driver calls for the same physical allocations as the kv sleep released, found
   * after the wake (untimed; also with --calls-only, for the counts), and the same granules as
   * one allocation per run */
  {
    GArray *handles = handles_under (unmapped, &released_only);
    g_autoptr (GArray) runs = runs_of (handles);

    if (!calls_only)
      {
        raw_calls (handles, runs, released_only, &t_raw_create, &t_raw_release);
        raw_calls (runs, runs, released_only, &t_runs_create, &t_runs_release);
      }
    handles_n = handles->len;
    runs_n = runs->len;
    ranges_n = unmapped->len;
    for (guint k = 0; k < handles->len; k++)
      raw_bytes += g_array_index (handles, Extent, k).size;
    for (guint k = 0; k < released_only->len; k++)
      released_only_bytes += g_array_index (released_only, Extent, k).size;
    released_only_n = released_only->len;
    g_array_unref (handles);
    g_array_unref (released_only);
  }
  if (calls_only)
    goto report;
  /* the same for the weights' physical allocations: create + map + set access alone, the least
   * of 3 runs, against the weights' wake, which also copies the bytes back */
  {
    GArray *w_released = NULL;
    GArray *handles = handles_under (unmapped_w, &w_released);
    g_autoptr (GArray) runs = runs_of (handles);

    for (guint rep = 0; rep < 3; rep++)
      {
        gint64 t_create, t_release;

        raw_calls (handles, runs, w_released, &t_create, &t_release);
        t_w_create = MIN (t_w_create, t_create);
      }
    w_handles_n = handles->len;
    for (guint k = 0; k < handles->len; k++)
      w_raw_bytes += g_array_index (handles, Extent, k).size;
    g_array_unref (handles);
    g_array_unref (w_released);
  }

  /* 6. page-locked copy bandwidth, and 7. vLLM's method on the weights */
  {
    gsize n = (gsize) 256 << 20;
    void *pinned = NULL;
    CUdeviceptr dev = 0;

    cu (drv->cuMemHostAlloc (&pinned, n, 0), "cuMemHostAlloc");
    cu (drv->cuMemAlloc (&dev, n), "cuMemAlloc");
    t0 = now_ns ();
    cu (drv->cuMemcpy ((CUdeviceptr) (guintptr) pinned, dev, n), "cuMemcpy");
    t_copy_d2h = now_ns () - t0;
    t0 = now_ns ();
    cu (drv->cuMemcpy (dev, (CUdeviceptr) (guintptr) pinned, n), "cuMemcpy");
    t_copy_h2d = now_ns () - t0;
    cu (drv->cuMemFree (dev), "cuMemFree");
    cu (drv->cuMemFreeHost (pinned), "cuMemFreeHost");
  }
  {
    CUmemAllocationProp prop = { 0 };
    CUmemAccessDesc access
        = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    gsize n_w = 0;
    gsize gran = 0;

    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    cu (drv->cuMemGetAllocationGranularity (&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "cuMemGetAllocationGranularity");
    for (guint i = 0; i < bufs->len; i++)
      {
        const char *tag = memres_buffer_get_tag (bufs->pdata[i]);

        n_w += tag != NULL && g_str_equal (tag, "bench-weights");
      }
    /* the same sizes as the weights, in allocations of their own, each one handle */
    {
      CUdeviceptr *ptr = g_new0 (CUdeviceptr, n_w + 1);
      gsize *size = g_new0 (gsize, n_w + 1);
      CUmemGenericAllocationHandle *h = g_new0 (CUmemGenericAllocationHandle, n_w + 1);
      void **cpu = g_new0 (void *, n_w + 1);
      gsize k = 0;

      for (guint i = 0; i < bufs->len; i++)
        {
          const char *tag = memres_buffer_get_tag (bufs->pdata[i]);

          if (tag == NULL || !g_str_equal (tag, "bench-weights"))
            continue;
          size[k] = (memres_buffer_get_size (bufs->pdata[i]) + gran - 1) / gran * gran;
          cu (drv->cuMemAddressReserve (&ptr[k], size[k], gran, 0, 0), "cuMemAddressReserve");
          cu (drv->cuMemCreate (&h[k], size[k], &prop, 0), "cuMemCreate");
          cu (drv->cuMemMap (ptr[k], size[k], 0, h[k], 0), "cuMemMap");
          cu (drv->cuMemSetAccess (ptr[k], size[k], &access, 1), "cuMemSetAccess");
          k++;
        }
      /* sleep: per allocation, a device synchronize, the copy out, unmap, release */
      t0 = now_ns ();
      for (k = 0; k < n_w; k++)
        {
          cu (drv->cuCtxSynchronize (), "cuCtxSynchronize");
          cu (drv->cuMemHostAlloc (&cpu[k], size[k], 0), "cuMemHostAlloc");
          cu (drv->cuMemcpy ((CUdeviceptr) (guintptr) cpu[k], ptr[k], size[k]), "cuMemcpy");
          cu (drv->cuMemUnmap (ptr[k], size[k]), "cuMemUnmap");
          cu (drv->cuMemRelease (h[k]), "cuMemRelease");
        }
      t_vllm_sleep = now_ns () - t0;
      t0 = now_ns ();
      for (k = 0; k < n_w; k++)
        {
          cu (drv->cuMemCreate (&h[k], size[k], &prop, 0), "cuMemCreate");
          cu (drv->cuMemMap (ptr[k], size[k], 0, h[k], 0), "cuMemMap");
          cu (drv->cuMemSetAccess (ptr[k], size[k], &access, 1), "cuMemSetAccess");
          cu (drv->cuMemcpy (ptr[k], (CUdeviceptr) (guintptr) cpu[k], size[k]), "cuMemcpy");
          cu (drv->cuMemFreeHost (cpu[k]), "cuMemFreeHost");
        }
      t_vllm_wake = now_ns () - t0;
      for (k = 0; k < n_w; k++)
        {
          cu (drv->cuMemUnmap (ptr[k], size[k]), "cuMemUnmap");
          cu (drv->cuMemRelease (h[k]), "cuMemRelease");
          cu (drv->cuMemAddressFree (ptr[k], size[k]), "cuMemAddressFree");
        }
      g_free (ptr);
      g_free (size);
      g_free (h);
      g_free (cpu);
    }
  }

  /* 8. the weights' wake paired: its copies queued after the last map (restore batch 0), then
   * as the memory comes (the batch of the run), each after a sleep of its own, the least of 2 */
  for (guint rep = 0; rep < 4; rep++)
    {
      g_autoptr (MemresSleepPolicy) p = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, NULL);
      gint64 t;

      if (rep % 2 == 0 && !memres_sleep_policy_set_restore_batch (p, 0, &error))
        die ("the restore batch", error);
      if (rep % 2 == 1 && restore_batch >= 0
          && !memres_sleep_policy_set_restore_batch (p, (gsize) restore_batch, &error))
        die ("the restore batch", error);
      if (!memres_resource_sleep (mr, "bench-weights", p, NULL, &error))
        die ("sleeping weights (paired)", error);
      t0 = now_ns ();
      if (!memres_resource_wake (mr, "bench-weights", NULL, &error))
        die ("waking weights (paired)", error);
      t = now_ns () - t0;
      if (rep % 2 == 0)
        t_wake_serial = MIN (t_wake_serial, t);
      else
        t_wake_batched = MIN (t_wake_batched, t);
    }

report:
  /* 0 for what --calls-only did not measure */
  if (t_wake_serial == G_MAXINT64)
    t_wake_serial = t_wake_batched = 0;
  h2d_gbps = t_copy_h2d > 0 ? (256.0 * 1048576.0) / (double) t_copy_h2d : 0.0;
  w_wake_gbps = (double) weights_bytes / MAX (1.0, (double) t_wake_w);
  if (t_w_create == G_MAXINT64)
    t_w_create = 0;
  /* 0 when the raw calls took as long as the whole wake (noise on a tiny run): no copy time */
  w_copy_gbps
      = t_wake_w > t_w_create ? (double) weights_bytes / (double) (t_wake_w - t_w_create) : 0.0;
  printf ("{\"spec\": \"%s\", \"buffers\": %u, \"bytes\": %" G_GUINT64_FORMAT
          ", \"slept_bytes\": %" G_GUINT64_FORMAT ", \"weights_bytes\": %" G_GUINT64_FORMAT
          ",\n \"given_back_bytes\": %" G_GUINT64_FORMAT ", \"given_back_share\": %.4f"
          ",\n \"sleep_ms\": %.3f, \"wake_ms\": %.3f, \"sleep_kv_discard_ms\": %.3f"
          ", \"wake_kv_discard_ms\": %.3f"
          ",\n \"unmapped_ranges\": %u, \"raw_handles\": %u, \"raw_bytes\": %" G_GUINT64_FORMAT
          ", \"released_only_bytes\": %" G_GUINT64_FORMAT
          ", \"raw_release_ms\": %.3f, \"raw_create_ms\": %.3f, \"discard_vs_raw\": %.3f"
          ",\n \"raw_runs\": %u, \"runs_release_ms\": %.3f, \"runs_create_ms\": %.3f"
          ", \"discard_vs_runs\": %.3f"
          ",\n \"pinned_d2h_gbps\": %.2f, \"pinned_h2d_gbps\": %.2f"
          ",\n \"vllm_sleep_ms\": %.3f, \"vllm_wake_ms\": %.3f"
          ",\n \"wake_weights_backup_ms\": %.3f, \"weights_raw_handles\": %u"
          ", \"weights_raw_bytes\": %" G_GUINT64_FORMAT ", \"weights_raw_create_map_ms\": %.3f"
          ",\n \"weights_wake_gbps\": %.3f, \"weights_copy_only_gbps\": %.3f"
          ", \"wake_vs_h2d\": %.4f, \"copy_only_vs_h2d\": %.4f"
          ",\n \"kv_driver_calls\": {\"sleep\": %s, \"wake\": %s"
          ",\n   \"raw_sleep\": {\"cuMemUnmap\": %u, \"cuMemRelease\": %u}"
          ", \"raw_wake\": {\"cuMemCreate\": %u, \"cuMemMap\": %u, \"cuMemSetAccess\": %u}}"
          ",\n \"wake_weights_serial_ms\": %.3f, \"wake_weights_batched_ms\": %.3f"
          ", \"batched_vs_serial\": %.4f"
          ",\n \"addresses_and_checksums_identical\": %s",
          spec, bufs->len, sum_bytes, slept, weights_bytes, given,
          slept > 0 ? (double) given / (double) slept : 0.0, t_sleep / 1e6, t_wake / 1e6,
          t_sleep_kv / 1e6, t_wake_kv / 1e6, ranges_n, handles_n, raw_bytes, released_only_bytes,
          t_raw_release / 1e6, t_raw_create / 1e6,
          (double) (t_sleep_kv + t_wake_kv) / MAX (1.0, (double) (t_raw_release + t_raw_create)),
          runs_n, t_runs_release / 1e6, t_runs_create / 1e6,
          (double) (t_sleep_kv + t_wake_kv) / MAX (1.0, (double) (t_runs_release + t_runs_create)),
          t_copy_d2h > 0 ? (256.0 * 1048576.0) / (double) t_copy_d2h : 0.0, h2d_gbps,
          t_vllm_sleep / 1e6, t_vllm_wake / 1e6, t_wake_w / 1e6, w_handles_n, w_raw_bytes,
          t_w_create / 1e6, w_wake_gbps, w_copy_gbps, h2d_gbps > 0 ? w_wake_gbps / h2d_gbps : 0.0,
          h2d_gbps > 0 ? w_copy_gbps / h2d_gbps : 0.0, kv_sleep_calls, kv_wake_calls,
          runs_n + released_only_n, handles_n + released_only_n, handles_n, handles_n, runs_n,
          t_wake_serial / 1e6, t_wake_batched / 1e6,
          t_wake_serial > 0 ? (double) t_wake_batched / (double) t_wake_serial : 0.0,
          same ? "true" : "false");
  if (fake_call_count != NULL)
    {
      g_autofree char *a = calls_json ("sleep_kv", &c_sleep_kv);
      g_autofree char *b = calls_json ("sleep_weights", &c_sleep_w);
      g_autofree char *c = calls_json ("wake_kv", &c_wake_kv);
      g_autofree char *d = calls_json ("wake_weights", &c_wake_w);
      guint n_w = 0;

      for (guint i = 0; i < bufs->len; i++)
        {
          const char *tag = memres_buffer_get_tag (bufs->pdata[i]);

          n_w += tag != NULL && g_str_equal (tag, "bench-weights");
        }
      printf (",\n \"weights_buffers\": %u, \"weights_runs\": %u, \"weights_handles_released\": "
              "%ld,\n \"calls\": {%s,\n  %s,\n  %s,\n  %s}",
              n_w, contiguous_runs (bufs, "bench-weights"), w_handles_released, a, b, c, d);
    }
  printf ("}\n");
  for (guint i = 0; i < bufs->len; i++)
    {
      if (!memres_buffer_close (bufs->pdata[i], NULL, &error))
        die ("closing", error);
      memres_buffer_unref (bufs->pdata[i]);
    }
  g_ptr_array_unref (bufs);
  g_array_unref (sums);
  g_array_unref (addrs);
  g_array_unref (unmapped);
  g_array_unref (unmapped_w);
  g_free (host);
  g_rand_free (rand);
  return same ? 0 : 2;
}

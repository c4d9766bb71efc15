/* memres-bench: section (n), the address lookup. With N buffers of the resource live (each one
 * segment or more: a `vmm` buffer is one, a `cache` chunk holds many small buffers),
 * memres_lookup() of addresses inside them (variant "memres") against cuPointerGetAttribute
 * (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) of the same addresses (variant "raw"), back to back in
 * each repetition, in ns per lookup. The target (issue 37): the paired ratio at most 0.04, that is
 * memres_lookup() at least 25 times faster. A third variant, "call", runs the same loop with a
 * function that only stores the word the loop sums: what the loop and the call cost by
 * themselves, given in the row's note with the ratio net of it. A fourth, "inline", runs the
 * same loop with memres_lookup_inline() (memres-lookup-inline.h) compiled into it: no call on
 * the direct path (a segment over the whole 1 MiB page: `cache>dmr`'s 1 MiB blocks, `vmm` and
 * `arena` pages inside a buffer or granule), memres_lookup() for the rest; its paired ratio
 * against the driver is in the note. The resource's kind must have segments (vmm, arena, cache
 * over anything); others fail the section. */
#include "bench-common.h"

#include <memres/memres-lookup-inline.h>

#define LOOKUP_ADDRESSES 4096 /* distinct addresses cycled through, a power of two */

/* a failure, laid out off the loop's straight path (G_UNLIKELY's 10 % leaves GCC free to make the
 * success a jump) */
#if defined(__has_builtin)
#if __has_builtin(__builtin_expect_with_probability)
#define ALMOST_NEVER(x) __builtin_expect_with_probability (!!(x), 0, 0.9999)
#endif
#endif
#ifndef ALMOST_NEVER
#define ALMOST_NEVER(x) G_UNLIKELY (x)
#endif

typedef gboolean (*LookupFunc) (gconstpointer ptr, MemresLookupInfo *info);

/* The two loops are the same, each in a function of its own that holds nothing else in its
 * registers: per lookup one load of an address, one call through a function pointer
 * (memres_lookup() is called through one too, as the driver's entry point is: not through the
 * PLT, a jump more), one test of the result (a failure leaves the loop, laid out off its
 * straight path: one taken branch a lookup, the loop's own) and one sum of the start found. Each
 * returns how many lookups succeeded, @iterations but for a failure. The answer's place is
 * aligned to a line: at 8 bytes past 16 (where the stack may put it) one of memres_lookup()'s
 * three 16-byte stores of it crosses a line in three places of four, a cost that moved with the
 * stack's place (0.1 ns a lookup on an AMD Zen 5, 6 %); the driver's 8-byte answer never
 * crosses one. */
static G_GNUC_NO_INLINE guint64
memres_loop (LookupFunc lookup, const CUdeviceptr *addresses, guint64 iterations, guint64 *sink)
{
  guint64 sum = 0, i;

  for (i = 0; i < iterations; i++)
    {
      MemresLookupInfo info __attribute__ ((aligned (64)));

      if (ALMOST_NEVER (
              !lookup ((gconstpointer) (guintptr) addresses[i & (LOOKUP_ADDRESSES - 1)], &info)))
        break;
      sum += info.segment.base;
    }
  *sink += sum;
  return i;
}

/* memres_loop() with memres_lookup_inline() in place of the call through @lookup: the same loads,
 * test and sum around it. The answer is made to escape (an empty asm that may read it), so that
 * the whole of it is stored, as memres_lookup() stores it: without that, GCC keeps only the
 * 16 bytes of the word the loop sums and drops the offset (a caller that reads little of the
 * answer gets that too). */
static G_GNUC_NO_INLINE guint64
inline_loop (const CUdeviceptr *addresses, guint64 iterations, guint64 *sink)
{
  guint64 sum = 0, i;

  for (i = 0; i < iterations; i++)
    {
      MemresLookupInfo info __attribute__ ((aligned (64)));

      if (ALMOST_NEVER (!memres_lookup_inline (
              (gconstpointer) (guintptr) addresses[i & (LOOKUP_ADDRESSES - 1)], &info)))
        break;
      __asm__ volatile("" : : "r"(&info) : "memory");
      sum += info.segment.base;
    }
  *sink += sum;
  return i;
}

/* The "call" variant's function: the loop's sum reads the one word it stores. */
static G_GNUC_NO_INLINE gboolean
lookup_nothing (gconstpointer ptr, MemresLookupInfo *info)
{
  info->segment.base = (guint64) (guintptr) ptr;
  return TRUE;
}

/* @r: the failure, where there was one */
static G_GNUC_NO_INLINE guint64
raw_loop (__typeof__ (cuPointerGetAttribute) *get_attribute, const CUdeviceptr *addresses,
          guint64 iterations, guint64 *sink, CUresult *r)
{
  CUresult res = CUDA_SUCCESS;
  guint64 sum = 0, i;

  for (i = 0; i < iterations; i++)
    {
      CUdeviceptr start; /* read only when set */

      res = get_attribute (&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                           addresses[i & (LOOKUP_ADDRESSES - 1)]);
      if (ALMOST_NEVER (res != CUDA_SUCCESS))
        break;
      sum += start;
    }
  *sink += sum;
  *r = res;
  return i;
}

typedef struct
{
  const BenchContext *ctx;
  CUdeviceptr *addresses; /* LOOKUP_ADDRESSES */
  LookupFunc lookup;      /* memres_lookup, a pointer the loop cannot see through */
  LookupFunc nothing;     /* lookup_nothing, the same */
  guint64 sink;           /* what the lookups found, so that none is optimized away */
} LookupJob;

static gboolean
lookup_memres (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  LookupJob *job = data;
  gint64 t0 = bench_now_ns ();
  guint64 done = memres_loop (job->lookup, job->addresses, iterations, &job->sink);

  *elapsed_ns += bench_now_ns () - t0;
  if (G_UNLIKELY (done < iterations))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                   "memres_lookup() did not find an address of a live buffer");
      return FALSE;
    }
  return TRUE;
}

static gboolean
lookup_inline (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  LookupJob *job = data;
  gint64 t0 = bench_now_ns ();
  guint64 done = inline_loop (job->addresses, iterations, &job->sink);

  *elapsed_ns += bench_now_ns () - t0;
  if (G_UNLIKELY (done < iterations))
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                   "memres_lookup_inline() did not find an address of a live buffer");
      return FALSE;
    }
  return TRUE;
}

/* the loop and the call by themselves: memres_loop() over lookup_nothing() */
static gboolean
lookup_call (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  LookupJob *job = data;
  gint64 t0 = bench_now_ns ();

  memres_loop (job->nothing, job->addresses, iterations, &job->sink);
  *elapsed_ns += bench_now_ns () - t0;
  return TRUE;
}

static gboolean
lookup_raw (gpointer data, guint64 iterations, gint64 *elapsed_ns, GError **error)
{
  LookupJob *job = data;
  CUresult r = CUDA_SUCCESS;
  gint64 t0 = bench_now_ns ();
  guint64 done
      = raw_loop (job->ctx->drv->cuPointerGetAttribute, job->addresses, iterations, &job->sink, &r);

  *elapsed_ns += bench_now_ns () - t0;
  if (G_UNLIKELY (done < iterations))
    return bench_cuda_check (job->ctx, r, "cuPointerGetAttribute", error);
  return TRUE;
}

/* One row: @n buffers of @size bytes live, lookups of addresses spread over all of them. */
static void
lookup_row (BenchContext *ctx, BenchSection *section, guint n, gsize size)
{
  g_autofree char *label = g_strdup_printf ("%u buffers", n);
  BenchRow *row = bench_section_add_row (section, label, size, 0);
  g_autoptr (GPtrArray) bufs = g_ptr_array_new ();
  g_autofree CUdeviceptr *addresses = g_new (CUdeviceptr, LOOKUP_ADDRESSES);
  g_autoptr (GError) error = NULL;
  LookupJob job = { ctx, addresses, memres_lookup, lookup_nothing, 0 };
  BenchVariant variants[] = { { "memres", lookup_memres, &job },
                              { "raw", lookup_raw, &job },
                              { "call", lookup_call, &job },
                              { "inline", lookup_inline, &job } };
  MemresLookupInfo info;
  g_autoptr (GHashTable) segments = g_hash_table_new (g_int64_hash, g_int64_equal);
  g_autoptr (GHashTable) gibs = g_hash_table_new (g_int64_hash, g_int64_equal);
  g_autofree guint64 *bases = g_new (guint64, 2 * n);
  guint whole_pages = 0; /* segments that start and end on 1 MiB: whole pages of the index */

  for (guint i = 0; i < n; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (ctx->mr, size, ctx->stream, &error);

      if (buf == NULL)
        goto out;
      g_ptr_array_add (bufs, buf);
    }
  for (guint i = 0; i < LOOKUP_ADDRESSES; i++)
    {
      MemresBuffer *buf = g_ptr_array_index (bufs, (i * 7919u) % n);
      /* spread over the buffer, last byte included */
      gsize offset = ((gsize) i * 40503u) % size;

      addresses[i] = memres_buffer_get_address (buf) + offset;
    }
  for (guint i = 0; i < n; i++)
    if (memres_lookup (memres_buffer_get_pointer (g_ptr_array_index (bufs, i)), &info)
        && !g_hash_table_contains (segments, &info.segment.base))
      {
        bases[i] = info.segment.base;
        bases[n + i] = info.segment.base >> 30;
        g_hash_table_add (segments, &bases[i]);
        g_hash_table_add (gibs, &bases[n + i]);
        whole_pages += (info.segment.base | info.segment.length) % BENCH_MIB == 0;
      }
  if (g_hash_table_size (segments) == 0)
    {
      g_autofree char *spec = memres_resource_to_string (ctx->mr);

      g_set_error (&error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED,
                   "--lookup needs a resource whose kind has segments (vmm, arena, cache>...): "
                   "memres_lookup() does not find the memory of %s",
                   spec);
      goto out;
    }
  if (bench_measure (ctx, label, variants, G_N_ELEMENTS (variants), 1, row, &error))
    {
      gdouble m = row->summaries[0].median, r = row->summaries[1].median;
      gdouble c = row->summaries[2].median, in = row->summaries[3].median;
      gdouble in_ratio = row->variant_ratio[3];

      row->note = g_strdup_printf (
          "%u segments in this process (in %u GiBs, %u of them on 1 MiB edges); memres_lookup() "
          "%.2f ns, cuPointerGetAttribute %.1f ns: %.1fx faster (paired ratio %.4f; target <= "
          "0.04, 25x); the loop and a call that only stores a word %.2f ns, net of it %.1fx; "
          "memres_lookup_inline() %.2f ns: %.1fx faster (paired ratio %.4f)",
          g_hash_table_size (segments), g_hash_table_size (gibs), whole_pages, m, r,
          row->ratio > 0 ? 1 / row->ratio : 0.0, row->ratio, c, m > c ? (r - c) / (m - c) : 0.0, in,
          in_ratio > 0 ? 1 / in_ratio : 0.0, in_ratio);
    }

out:
  if (error != NULL)
    bench_row_set_error (row, error);
  for (guint i = 0; i < bufs->len; i++)
    bench_close_buffer (g_ptr_array_index (bufs, i), ctx->stream, NULL);
}

/**
 * bench_run_lookup:
 * @ctx: the benchmark context (its resource must have segments)
 *
 * Section (n): memres_lookup() (and memres_lookup_inline()) against cuPointerGetAttribute, with
 * 1, 64, 1024 and 10,000
 * buffers live (quick: 1, 4, 16 and 64). Every lookup reads the index (no per-thread table):
 * the rows differ in how many segments' entries and pages the lookups touch.
 *
 * Returns: (transfer full): the section; failed rows carry their error
 */
BenchSection *
bench_run_lookup (BenchContext *ctx)
{
  static const guint counts[] = { 1, 64, 1024, 10000 };
  static const guint quick_counts[] = { 1, 4, 16, 64 };
  BenchSection *section = bench_section_new (
      "lookup", "address lookup: memres_lookup vs cuPointerGetAttribute", "ns/lookup",
      "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) of the same addresses");
  gsize size = ctx->config->quick ? 64 * BENCH_KIB : BENCH_MIB;

  for (guint i = 0; i < G_N_ELEMENTS (counts); i++)
    lookup_row (ctx, section, ctx->config->quick ? quick_counts[i] : counts[i], size);
  return section;
}

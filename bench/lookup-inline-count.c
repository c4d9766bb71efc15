/* memres - CUDA memory resources
 * lookup-inline-count.c: lookup-count.c's measure for memres_lookup_inline()
 * (memres-lookup-inline.h), whose code is compiled into the caller: so this one links libmemres
 * and includes the header instead of opening the library with dlopen(). N buffers of one spec
 * live, the same 4,096 addresses spread over them as bench-lookup.c spreads them, then LOOKUPS
 * lookups in the loop of bench-lookup.c's variant MODE, and nothing else: "inline" its
 * inline_loop() (the answer made to escape, so that all of it is stored), "memres" its
 * memres_loop() over memres_lookup() through a function pointer, "bare" inline_loop() without
 * the escape (GCC then keeps only what the loop reads of the answer). For counting instructions
 * per lookup under callgrind: run it at two numbers of lookups and divide the difference of the
 * totals by the difference of the counts. Not a test and not installed:
 *
 *     cc -O2 -g -o lookup-inline-count bench/lookup-inline-count.c -Iinclude -IBUILD/include \
 *        $(pkg-config --cflags --libs glib-2.0) -LBUILD/core -lmemres -Wl,-rpath,$PWD/BUILD/core
 *     MEMRES_PLUGIN_PATH=BUILD/plugins/dmr:BUILD/plugins/cache \
 *     MEMRES_CUDA_DRIVER=BUILD/tests/fakecuda/libfakecuda.so \
 *         valgrind --tool=callgrind ./lookup-inline-count 'cache>dmr' 65536 64 100000 inline
 *
 * Exit 0 after the lookups; 1 with a message when the resource, an allocation or a lookup
 * fails. */
#include <memres/memres-lookup-inline.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOOKUP_ADDRESSES 4096 /* as bench-lookup.c */

typedef gboolean (*Lookup) (gconstpointer ptr, MemresLookupInfo *info);

/* bench-lookup.c's inline_loop(), @escape or not (a constant: expanded in each of the two) */
static inline __attribute__ ((always_inline)) guint64
inline_loop_body (const guint64 *addresses, guint64 n, guint64 *sink, gboolean escape)
{
  guint64 sum = 0, i;

  for (i = 0; i < n; i++)
    {
      MemresLookupInfo info __attribute__ ((aligned (64)));

      if (__builtin_expect_with_probability (
              !memres_lookup_inline (
                  (gconstpointer) (guintptr) addresses[i & (LOOKUP_ADDRESSES - 1)], &info),
              0, 0.9999))
        break;
      if (escape)
        __asm__ volatile("" : : "r"(&info) : "memory");
      sum += info.segment.base;
    }
  *sink += sum;
  return i;
}

static __attribute__ ((noinline)) guint64
inline_loop (const guint64 *addresses, guint64 n, guint64 *sink)
{
  return inline_loop_body (addresses, n, sink, TRUE);
}

static __attribute__ ((noinline)) guint64
bare_loop (const guint64 *addresses, guint64 n, guint64 *sink)
{
  return inline_loop_body (addresses, n, sink, FALSE);
}

/* bench-lookup.c's memres_loop() */
static __attribute__ ((noinline)) guint64
memres_loop (Lookup lookup, const guint64 *addresses, guint64 n, guint64 *sink)
{
  guint64 sum = 0, i;

  for (i = 0; i < n; i++)
    {
      MemresLookupInfo info __attribute__ ((aligned (64)));

      if (__builtin_expect_with_probability (
              !lookup ((gconstpointer) (guintptr) addresses[i & (LOOKUP_ADDRESSES - 1)], &info), 0,
              0.9999))
        break;
      sum += info.segment.base;
    }
  *sink += sum;
  return i;
}

int
main (int argc, char **argv)
{
  static guint64 addresses[LOOKUP_ADDRESSES];
  /* a pointer the loop cannot see through, as bench-lookup.c's */
  static Lookup volatile lookup = memres_lookup;
  GError *error = NULL;
  MemresResource *mr;
  MemresBuffer **bufs;
  gsize size;
  long n;
  guint64 count, done, sink = 0;

  if (argc != 6
      || (strcmp (argv[5], "inline") != 0 && strcmp (argv[5], "memres") != 0
          && strcmp (argv[5], "bare") != 0))
    {
      fprintf (stderr, "usage: lookup-inline-count SPEC SIZE N LOOKUPS inline|memres|bare\n");
      return 1;
    }
  size = (gsize) atol (argv[2]);
  n = atol (argv[3]);
  count = (guint64) atoll (argv[4]);
  if (size == 0 || n <= 0)
    {
      fprintf (stderr, "lookup-inline-count: SIZE and N must be positive\n");
      return 1;
    }
  if ((mr = memres_resource_new (argv[1], &error)) == NULL)
    {
      fprintf (stderr, "lookup-inline-count: %s\n", error->message);
      return 1;
    }
  bufs = g_new0 (MemresBuffer *, n);
  for (long i = 0; i < n; i++)
    if ((bufs[i] = memres_resource_allocate (mr, size, NULL, &error)) == NULL)
      {
        fprintf (stderr, "lookup-inline-count: allocation %ld: %s\n", i, error->message);
        return 1;
      }
  for (unsigned i = 0; i < LOOKUP_ADDRESSES; i++)
    addresses[i] = memres_buffer_get_address (bufs[(i * 7919u) % (unsigned long) n])
                   + ((gsize) i * 40503u) % size;
  if (strcmp (argv[5], "memres") == 0)
    done = memres_loop (lookup, addresses, count, &sink);
  else if (strcmp (argv[5], "inline") == 0)
    done = inline_loop (addresses, count, &sink);
  else
    done = bare_loop (addresses, count, &sink);
  if (done < count)
    {
      fprintf (stderr, "lookup-inline-count: an address of a live buffer was not found\n");
      return 1;
    }
  printf ("%" G_GUINT64_FORMAT " lookups, sum %" G_GUINT64_FORMAT "\n", count, sink);
  return 0;
}

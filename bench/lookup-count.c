/* memres - CUDA memory resources
 * lookup-count.c: N buffers of one spec live, then memres_lookup() of addresses spread over them
 * in the loop of bench-lookup.c (the same 4,096 addresses, the same sum), and nothing else, for
 * counting instructions per lookup under callgrind: run it at two numbers of lookups and divide
 * the difference of the totals by the difference of the counts. The library is opened with
 * dlopen() from the path given, so that one binary measures any build tree (the call is then
 * through a function pointer: the bench's through its PLT is one jump more).
 *
 *     lookup-count LIBMEMRES SPEC SIZE N LOOKUPS [miss]
 *
 * With "miss", every address is moved 1 TiB down, where no segment lies, and every lookup must
 * answer "not found". With LOOKUP_COUNT_ADDRESSES set in the environment, the place of the array
 * of addresses the loop reads ("addresses 0xADDR BYTES") goes to stderr before the lookups: a
 * memory trace (valgrind's lackey) cut at each load from it is cut at each lookup
 * (bench/lookup-cachesim.py counts the cache lines each lookup touches that way).
 *
 * The plugins are found through MEMRES_PLUGIN_PATH, the driver through MEMRES_CUDA_DRIVER.
 * Exit 0 after the lookups; 1 with a message when the library, a function, the resource, an
 * allocation or a lookup fails. Not a test and not installed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlopen-count.h"

#define PROGRAM "lookup-count"

#define LOOKUP_ADDRESSES 4096 /* as bench-lookup.c */

/* MemresLookupInfo's frozen layout (memres-segments.h) */
typedef struct
{
  void *resource;
  uint64_t base, length;
  int device;
  uint32_t handle_types, tag_id;
  const char *tag;
  uint64_t offset;
} Info;

typedef void *(*Allocate) (void *mr, size_t size, void *stream, void **error);
typedef uint64_t (*GetAddress) (void *buf);
typedef int (*Lookup) (const void *ptr, Info *info);

/* the loop of bench-lookup.c's memres_loop(), not inlined (GCC 9 or later, clang 11) */
static __attribute__ ((noinline)) int
lookups (Lookup lookup, const uint64_t *addresses, long n, uint64_t *sink)
{
  uint64_t sum = 0;

  for (long i = 0; i < n; i++)
    {
      Info info __attribute__ ((aligned (64))); /* as bench-lookup.c: no store across a line */

      if (__builtin_expect_with_probability (
              !lookup ((const void *) (uintptr_t) addresses[i & (LOOKUP_ADDRESSES - 1)], &info), 0,
              0.9999))
        return 0;
      sum += info.base;
    }
  *sink += sum;
  return 1;
}

/* the same loop, every lookup a miss */
static __attribute__ ((noinline)) int
misses (Lookup lookup, const uint64_t *addresses, long n)
{
  for (long i = 0; i < n; i++)
    {
      Info info __attribute__ ((aligned (64))); /* as bench-lookup.c: no store across a line */

      if (__builtin_expect (
              lookup ((const void *) (uintptr_t) addresses[i & (LOOKUP_ADDRESSES - 1)], &info), 0))
        return 0;
    }
  return 1;
}

int
main (int argc, char **argv)
{
  static uint64_t addresses[LOOKUP_ADDRESSES];
  void *lib, *mr, **bufs;
  size_t size;
  long n, count;
  uint64_t sink = 0;

  int miss = argc == 7 && strcmp (argv[6], "miss") == 0;

  if (argc != 6 && !miss)
    {
      fprintf (stderr, "usage: lookup-count LIBMEMRES SPEC SIZE N LOOKUPS [miss]\n");
      return 1;
    }
  mr = count_open (PROGRAM, argv[1], argv[2], &lib);
  size = (size_t) atol (argv[3]);
  n = atol (argv[4]);
  count = atol (argv[5]);
  if (size == 0 || n <= 0 || count < 0)
    {
      fprintf (stderr, "lookup-count: SIZE and N must be positive, LOOKUPS not negative\n");
      return 1;
    }
  bufs = calloc ((size_t) n, sizeof (void *));
  for (long i = 0; i < n; i++)
    if ((bufs[i] = ((Allocate) count_need (PROGRAM, lib, "memres_resource_allocate")) (mr, size,
                                                                                       NULL, NULL))
        == NULL)
      {
        fprintf (stderr, "lookup-count: allocation %ld of %zu bytes failed\n", i, size);
        return 1;
      }
  /* as bench-lookup.c spreads them: over every buffer, last byte included */
  for (unsigned i = 0; i < LOOKUP_ADDRESSES; i++)
    addresses[i] = ((GetAddress) count_need (PROGRAM, lib, "memres_buffer_get_address")) (
                       bufs[(i * 7919u) % (unsigned long) n])
                   + ((size_t) i * 40503u) % size - (miss ? (uint64_t) 1 << 40 : 0);
  if (getenv ("LOOKUP_COUNT_ADDRESSES") != NULL)
    fprintf (stderr, "addresses %p %zu\n", (void *) addresses, sizeof addresses);
  if (miss)
    {
      if (!misses ((Lookup) count_need (PROGRAM, lib, "memres_lookup"), addresses, count))
        {
          fprintf (stderr, "lookup-count: memres_lookup() found an address 1 TiB below a buffer\n");
          return 1;
        }
      printf ("%ld misses\n", count);
      return 0;
    }
  if (!lookups ((Lookup) count_need (PROGRAM, lib, "memres_lookup"), addresses, count, &sink))
    {
      fprintf (stderr, "lookup-count: memres_lookup() did not find an address of a live buffer\n");
      return 1;
    }
  printf ("%ld lookups, sum %llu\n", count, (unsigned long long) sink);
  return 0;
}

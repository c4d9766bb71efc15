/* memres - CUDA memory resources
 * pair-count.c: N allocate+close+unref pairs through one spec and nothing else, for counting
 * instructions per pair under callgrind (bench/callgrind-pairs.py runs it at two N and takes
 * the difference). The library is opened with dlopen() from the path given, and only functions
 * that every release has are needed (memres_tag_push is used where it exists: a library from
 * before tags runs the pairs untagged), so that one binary measures any build tree.
 *
 *     pair-count LIBMEMRES SPEC SIZE N [TAG]
 *
 * The plugins are found through MEMRES_PLUGIN_PATH, the driver through MEMRES_CUDA_DRIVER.
 * Exit 0 after N pairs; 1 with a message when the library, a function, the resource or a pair
 * fails. Not a test and not installed. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlopen-count.h"

#define PROGRAM "pair-count"

typedef void *(*Allocate) (void *mr, size_t size, void *stream, void **error);
typedef int (*Close) (void *buf, void *stream, void **error);
typedef void (*Unref) (void *buf);
typedef int (*TagPush) (const char *tag, void **error);

/* the pairs, not inlined, so that callgrind shows the loop's own cost on one function */
static __attribute__ ((noinline)) int
pairs (Allocate allocate, Close close_, Unref unref, void *mr, size_t size, long n)
{
  for (long i = 0; i < n; i++)
    {
      void *buf = allocate (mr, size, NULL, NULL);

      if (buf == NULL || !close_ (buf, NULL, NULL))
        return 0;
      unref (buf);
    }
  return 1;
}

int
main (int argc, char **argv)
{
  void *lib, *mr;
  long n;

  if (argc < 5 || argc > 6)
    {
      fprintf (stderr, "usage: pair-count LIBMEMRES SPEC SIZE N [TAG]\n");
      return 1;
    }
  mr = count_open (PROGRAM, argv[1], argv[2], &lib);
  /* a library from before tags has no memres_tag_push: its pairs are untagged */
  if (argc == 6 && dlsym (lib, "memres_tag_push") != NULL
      && !((TagPush) dlsym (lib, "memres_tag_push")) (argv[5], NULL))
    {
      fprintf (stderr, "pair-count: cannot push tag \"%s\"\n", argv[5]);
      return 1;
    }
  n = atol (argv[4]);
  /* 100 pairs more than asked: two runs' difference leaves the first pairs' set-up out */
  if (!pairs ((Allocate) count_need (PROGRAM, lib, "memres_resource_allocate"),
              (Close) count_need (PROGRAM, lib, "memres_buffer_close"),
              (Unref) count_need (PROGRAM, lib, "memres_buffer_unref"), mr, (size_t) atol (argv[3]),
              100 + n))
    {
      fprintf (stderr, "pair-count: a pair failed\n");
      return 1;
    }
  return 0;
}

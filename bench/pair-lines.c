/* memres - CUDA memory resources
 * pair-lines.c: allocate+close+unref pairs through one spec on T threads, each thread's
 * measured pairs run alone between two marker calls, for bench/pair-lines.py, which runs it
 * under `valgrind --tool=lackey --trace-mem=yes` and finds the cache lines one thread's pairs
 * write and another's touch (what the threads share on the steady pair).
 *
 *     pair-lines LIBMEMRES SPEC SIZE WARM N T
 *
 * Every thread first runs WARM pairs (its front cache and buffer structures made), in turn; then
 * thread 0 runs N pairs between pair_lines_begin (0) and pair_lines_end (0), thread 1 the same,
 * and so on, the other threads alive and waiting meanwhile. Each thread on a stream of its own
 * (cuStreamCreate of the driver memres loaded, CU_STREAM_NON_BLOCKING), as memres-bench's
 * --thread-pairs runs them, or on the legacy stream when the driver has none (host specs).
 * Prints, on stdout, the markers' addresses, each thread's stack address and the process's
 * mappings (the lines of /proc/self/maps), for the script. The library is opened with dlopen()
 * (dlopen-count.c), so one binary serves any build tree. Not a test and not installed. */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlopen-count.h"

#define PROGRAM     "pair-lines"
#define MAX_THREADS 64

typedef void *(*Allocate) (void *mr, size_t size, void *stream, void **error);
typedef int (*Close) (void *buf, void *stream, void **error);
typedef void (*Unref) (void *buf);
typedef int (*StreamCreate) (void **stream, unsigned flags);

static Allocate allocate;
static Close close_;
static Unref unref;
static void *mr;
static size_t size;
static long warm, n;
static sem_t go[MAX_THREADS], done, quit;

/* the markers: the script splits the trace at their first instruction */
__attribute__ ((noinline)) void
pair_lines_begin (long t)
{
  __asm__ volatile("" : : "r"(t) : "memory");
}

__attribute__ ((noinline)) void
pair_lines_end (long t)
{
  __asm__ volatile("" : : "r"(t) : "memory");
}

static void
pairs (void *stream, long count)
{
  for (long i = 0; i < count; i++)
    {
      void *buf = allocate (mr, size, stream, NULL);

      if (buf == NULL || !close_ (buf, stream, NULL))
        {
          fprintf (stderr, PROGRAM ": a pair failed\n");
          exit (1);
        }
      unref (buf);
    }
}

typedef struct
{
  long index;
  void *stream;
} Job;

static void *
worker (void *data)
{
  Job *job = data;
  int here;

  /* round 1: warm-up, in turn; round 2: the measured pairs, in turn */
  sem_wait (&go[job->index]);
  printf ("stack %ld %p\n", job->index, (void *) &here);
  pairs (job->stream, warm);
  sem_post (&done);
  sem_wait (&go[job->index]);
  pair_lines_begin (job->index);
  pairs (job->stream, n);
  pair_lines_end (job->index);
  sem_post (&done);
  /* alive until every thread has measured */
  sem_wait (&quit);
  sem_post (&quit);
  return NULL;
}

int
main (int argc, char **argv)
{
  pthread_t threads[MAX_THREADS];
  Job jobs[MAX_THREADS];
  StreamCreate stream_create = NULL;
  const char *driver = getenv ("MEMRES_CUDA_DRIVER");
  void *lib;
  long t_count;
  FILE *maps;
  char line[4096];

  if (argc != 7)
    {
      fprintf (stderr, "usage: " PROGRAM " LIBMEMRES SPEC SIZE WARM N T\n");
      return 1;
    }
  mr = count_open (PROGRAM, argv[1], argv[2], &lib);
  allocate = (Allocate) count_need (PROGRAM, lib, "memres_resource_allocate");
  close_ = (Close) count_need (PROGRAM, lib, "memres_buffer_close");
  unref = (Unref) count_need (PROGRAM, lib, "memres_buffer_unref");
  size = (size_t) atol (argv[3]);
  warm = atol (argv[4]);
  n = atol (argv[5]);
  t_count = atol (argv[6]);
  if (t_count < 1 || t_count > MAX_THREADS - 1)
    {
      fprintf (stderr, PROGRAM ": T must be 1 to %d\n", MAX_THREADS - 1);
      return 1;
    }
  /* the driver memres loaded for a device spec (already open: no new load) */
  if (driver != NULL)
    {
      void *drv = dlopen (driver, RTLD_NOW | RTLD_NOLOAD);

      if (drv != NULL)
        stream_create = (StreamCreate) dlsym (drv, "cuStreamCreate");
    }
  printf ("begin %p\nend %p\n", (void *) pair_lines_begin, (void *) pair_lines_end);
  for (long t = 0; t < MAX_THREADS; t++)
    sem_init (&go[t], 0, 0);
  sem_init (&done, 0, 0);
  sem_init (&quit, 0, 0);
  for (long t = 0; t < t_count; t++)
    {
      jobs[t] = (Job){ t, NULL };
      if (stream_create != NULL && stream_create (&jobs[t].stream, 1 /* non-blocking */) != 0)
        {
          fprintf (stderr, PROGRAM ": cuStreamCreate failed\n");
          return 1;
        }
      pthread_create (&threads[t], NULL, worker, &jobs[t]);
    }
  /* one thread at a time: the warm-up round, then the measured one */
  for (int round = 0; round < 2; round++)
    for (long t = 0; t < t_count; t++)
      {
        sem_post (&go[t]);
        sem_wait (&done);
      }
  sem_post (&quit);
  for (long t = 0; t < t_count; t++)
    pthread_join (threads[t], NULL);
  maps = fopen ("/proc/self/maps", "r");
  while (maps != NULL && fgets (line, sizeof line, maps) != NULL)
    printf ("map %s", line);
  if (maps != NULL)
    fclose (maps);
  return 0;
}

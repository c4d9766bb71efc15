/* memres - CUDA memory resources
 * pair-lines.c: allocate+close+unref pairs through one spec on T threads, each thread's
 * measured pairs run alone between two marker calls, for bench/pair-lines.py, which runs it
 * under `valgrind --tool=lackey --trace-mem=yes` and finds the cache lines one thread's pairs
 * write and another's touch (what the threads share on the steady pair).
 *
 *     pair-lines LIBMEMRES SPEC SIZE WARM N T [bench]
 *
 * Every thread first runs WARM pairs (its front cache and buffer structures made), in turn; then
 * thread 0 runs N pairs between pair_lines_begin (0) and pair_lines_end (0), thread 1 the same,
 * and so on, the other threads alive and waiting meanwhile. Each thread on a stream of its own
 * (cuStreamCreate of the driver memres loaded, CU_STREAM_NON_BLOCKING), as memres-bench's
 * --thread-pairs runs them, or on the legacy stream when the driver has none (host specs).
 * With "bench", the threads are set up and loop as memres-bench's --thread-pairs workers do
 * (bench-cache.c): the main thread runs WARM pairs of its own on the first thread's stream
 * first (the ceiling's calibration), each worker makes the main thread's context current
 * (cuCtxSetCurrent), its state lies in one array of the bench's PairThread layout, each pair
 * is given that state's error location, and the N measured pairs run as BENCH_REPS
 * repetitions, each ended as the bench ends one: cuStreamSynchronize of the thread's stream,
 * the clock read and stored in the thread's state. What the bench does once a repetition
 * then falls in the traced window, at 1/(N/BENCH_REPS) a pair.
 * Prints, on stdout, the markers' addresses, each thread's stack address and the process's
 * mappings (the lines of /proc/self/maps), for the script. The library is opened with dlopen()
 * (dlopen-count.c), so one binary serves any build tree. Not a test and not installed. */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlopen-count.h"

#define PROGRAM     "pair-lines"
#define MAX_THREADS 64
#define BENCH_REPS  5

typedef void *(*Allocate) (void *mr, size_t size, void *stream, void **error);
typedef int (*Close) (void *buf, void *stream, void **error);
typedef void (*Unref) (void *buf);
typedef int (*StreamCreate) (void **stream, unsigned flags);
typedef int (*StreamSync) (void *stream);
typedef int (*CtxCall) (void *ctx);
typedef int (*CtxGet) (void **ctx);
typedef int (*EnsureContext) (int device, void **error);

static Allocate allocate;
static Close close_;
static Unref unref;
static void *mr;
static size_t size;
static long warm, n;
static int bench;
static void *context;
static StreamSync stream_sync;
static CtxCall ctx_set;
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

/* memres-bench's PairThread (bench-cache.c), field for field and 128-byte aligned: the
 * workers' states lie side by side in one array there too */
typedef struct
{
  void *run, *raw;
  size_t size;
  void *stream;
  long long finished_ns;
  unsigned long long sink;
  void *error; /* GError *: NULL while the pairs succeed */
} __attribute__ ((aligned (128))) BenchState;

static BenchState *bench_states;

static void
pairs (void *stream, long count, void **error)
{
  for (long i = 0; i < count; i++)
    {
      void *buf = allocate (mr, size, stream, error);

      if (buf == NULL || !close_ (buf, stream, error))
        {
          fprintf (stderr, PROGRAM ": a pair failed\n");
          exit (1);
        }
      unref (buf);
    }
}

/* @count pairs as the bench's loop (pairs_loop()) runs them: the size, the stream and the error
 * location read from the thread's state at every pair, in BENCH_REPS repetitions, each ended
 * by a stream synchronization and the clock stored in the thread's state */
static void
bench_pairs (BenchState *state, long count)
{
  for (int r = 0; r < BENCH_REPS; r++)
    {
      struct timespec ts;

      for (long i = 0; i < count / BENCH_REPS + (r < count % BENCH_REPS); i++)
        {
          void *buf = allocate (mr, state->size, state->stream, &state->error);

          if (buf == NULL || !close_ (buf, state->stream, &state->error))
            {
              fprintf (stderr, PROGRAM ": a pair failed\n");
              exit (1);
            }
          unref (buf);
        }
      if (stream_sync != NULL && stream_sync (state->stream) != 0)
        {
          fprintf (stderr, PROGRAM ": cuStreamSynchronize failed\n");
          exit (1);
        }
      clock_gettime (CLOCK_MONOTONIC, &ts);
      state->finished_ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
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
  BenchState *state = bench ? &bench_states[job->index] : NULL;
  int here;

  if (bench && ctx_set != NULL && ctx_set (context) != 0)
    {
      fprintf (stderr, PROGRAM ": cuCtxSetCurrent failed\n");
      exit (1);
    }
  /* round 1: warm-up, in turn; round 2: the measured pairs, in turn */
  sem_wait (&go[job->index]);
  printf ("stack %ld %p\n", job->index, (void *) &here);
  if (bench)
    bench_pairs (state, warm);
  else
    pairs (job->stream, warm, NULL);
  sem_post (&done);
  sem_wait (&go[job->index]);
  pair_lines_begin (job->index);
  if (bench)
    bench_pairs (state, n);
  else
    pairs (job->stream, n, NULL);
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

  if (argc != 7 && !(argc == 8 && strcmp (argv[7], "bench") == 0))
    {
      fprintf (stderr, "usage: " PROGRAM " LIBMEMRES SPEC SIZE WARM N T [bench]\n");
      return 1;
    }
  bench = argc == 8;
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
        {
          stream_create = (StreamCreate) dlsym (drv, "cuStreamCreate");
          stream_sync = (StreamSync) dlsym (drv, "cuStreamSynchronize");
          ctx_set = (CtxCall) dlsym (drv, "cuCtxSetCurrent");
          /* the bench's context: the device's primary one, current on the main thread */
          if (bench && stream_create != NULL)
            {
              CtxGet ctx_get = (CtxGet) dlsym (drv, "cuCtxGetCurrent");

              if (!((EnsureContext) count_need (PROGRAM, lib, "memres_cuda_ensure_context")) (0,
                                                                                              NULL)
                  || ctx_get == NULL || ctx_get (&context) != 0)
                {
                  fprintf (stderr, PROGRAM ": no current context\n");
                  return 1;
                }
            }
        }
    }
  if (bench)
    {
      bench_states = aligned_alloc (128, (size_t) t_count * sizeof *bench_states);
      memset (bench_states, 0, (size_t) t_count * sizeof *bench_states);
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
      if (bench)
        {
          bench_states[t].size = size;
          bench_states[t].stream = jobs[t].stream;
          /* the bench's main thread runs pairs of its own on the first stream first (the
           * ceiling's calibration), before the workers exist */
          if (t == 0)
            pairs (jobs[0].stream, warm, &bench_states[0].error);
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

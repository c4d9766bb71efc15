/* conformance.h: what the files of the conformance suite (test-conformance.c) share: the rows
 * of its table of specs (a base kind, a layer over it), the fixture, and the cases. */
#ifndef CONFORMANCE_H
#define CONFORMANCE_H

#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#define KiB ((gsize) 1024)
#define MiB (1024 * KiB)

#define CU_OK(call) g_assert_cmpint ((call), ==, CUDA_SUCCESS)

/* What a base kind is. */
typedef enum
{
  B_DEVICE = 1 << 0,    /* needs a driver: the fake and gpu suites */
  B_CAPTURE = 1 << 1,   /* allocates only inside a stream capture (graph) */
  B_NO_POOLS = 1 << 2,  /* runs on a device without memory pools (the fake plays one) */
  B_REAL_OOM = 1 << 3,  /* the real driver refuses 1 PiB with an out-of-memory */
  B_TRIM = 1 << 4,      /* trim is supported and gives back what is not in use */
  B_ALONE = 1 << 5,     /* a variant of a kind: only on its own, not under every adaptor */
  B_NO_CACHE = 1 << 6,  /* `cache` refuses it as an upstream */
  B_ROUNDS = 1 << 7,    /* a buffer's size is the size asked for, rounded up (vmm's granularity) */
  B_HOLDS = 1 << 9,     /* keeps freed memory until a trim (release_threshold=max) */
  B_SHARED = 1 << 8,    /* the device's current pool: its high marks are older than the resource */
  B_OWN_POOL = 1 << 10, /* a pool of its own (pool=new): one pool, one pool allocation a buffer */
} BaseFlags;

/* What an adaptor does to the contract. */
typedef enum
{
  L_KEEPS = 1 << 0,   /* keeps closed memory (cache): a close need not reach the kind's free */
  L_RETRIES = 1 << 1, /* allocates again after an out-of-memory (retry, cache's flush) */
  L_PREFIX = 1 << 2,  /* prefixes the upstream's out-of-memory message */
  L_CHUNKS = 1 << 3,  /* asks the upstream for other sizes than the caller */
  L_EXTRA = 1 << 4,   /* only over the bases `extra_stacks` names */
} LayerFlags;

typedef struct
{
  const char *spec;
  guint flags;
  const char *alloc_entry; /* the driver call of an allocation (fault injection), or NULL */
  const char *free_entry;  /* the kind's free (the exit rule), or NULL */
  guint thread_pairs;      /* allocate+close pairs per thread in the threads case (a graph's capture
                            * grows with each, vmm maps and unmaps, the others are cheap) */
  guint as_layer;          /* LayerFlags the kind has itself: a caching kind (arena) keeps closed
                            * memory as a cache does */
} Base;

typedef struct
{
  const char *name;   /* in the test's path */
  const char *prefix; /* put before the base's spec */
  guint flags;
} Layer;

typedef struct
{
  char *spec; /* layer prefix + base spec */
  char *name; /* in the test's path */
  const Base *base;
  const Layer *layer;
} Spec;

/* ---- the fixture: a resource of the spec, a stream to work on, host memory to read into ---- */

typedef struct
{
  const Spec *s;
  const MemresCudaDriver *drv; /* NULL for host specs */
  MemresResource *mr;
  MemresStream stream; /* a stream of device 0 (capturing for graph), NULL for host specs */
  FakeCudaCounts base;
} Fx;

/* Host memory every kind can copy into (page-locked for device specs: a graph's copy node
 * may not stage through pageable memory), wrapped as a buffer. */
typedef struct
{
  guint8 *bytes;
  gsize size;
  MemresBuffer *buf;
} HostMem;

/* Threads allocating and closing at once, each on its own stream. */
typedef struct
{
  const Spec *s;
  MemresResource *mr;
  guint iterations;
  guint index;
} ThreadData;

/* ---- registration ---- */

typedef struct
{
  const char *name;
  GTestDataFunc func;
  gboolean (*applies) (const Spec *s);
} Case;

/* conformance-fixture.c: what a spec is, the fixture (fx_init() skips where the spec cannot
 * run here and returns FALSE), host memory to read into, an allocation that must work. */
gboolean is (const Spec *s, BaseFlags f);

gboolean layer_is (const Spec *s, LayerFlags f);

MemresStream stream_begin (const Spec *s);

void stream_end (const Spec *s, MemresStream stream);

void fx_run (Fx *f);

void fx_no_pools (const Spec *s, gboolean on);

gboolean fx_init (Fx *f, gconstpointer data);

void fx_clear (Fx *f);

void host_mem_init (Fx *f, HostMem *h, gsize size);

void host_mem_clear (Fx *f, HostMem *h);

MemresBuffer *alloc_ok (const Spec *s, MemresResource *mr, gsize size, MemresStream stream);

/* The cases, each a GTestDataFunc of a Spec: conformance-buffers.c, conformance-failures.c. */
void test_sizes (gconstpointer data);

void test_zero_size (gconstpointer data);

void test_max_size (gconstpointer data);

void test_closed (gconstpointer data);

void test_streams (gconstpointer data);

void test_bytes (gconstpointer data);

void test_stats (gconstpointer data);

void test_trim (gconstpointer data);

void test_upstream (gconstpointer data);

void test_resize (gconstpointer data);

void test_random (gconstpointer data);

void test_segments (gconstpointer data);

void test_out_of_memory (gconstpointer data);

void test_retry_handler (gconstpointer data);

void test_out_of_memory_1pib (gconstpointer data);

void test_finalize_live (gconstpointer data);

void test_threads (gconstpointer data);

void test_exit_live (gconstpointer data);

void test_close_at_exit (gconstpointer data);

#endif

/* test-allocator.c: libmemres-allocator, loaded with dlopen() and its functions found by name,
 * as torch and CuPy do: allocations and frees (bytes written and read back through memres),
 * from many threads with frees in other threads than the allocations, the statistics of the
 * resource it uses, sizes 0 and NULL, unknown pointers, record_stream, empty_cache (also with
 * tensors live), frees in the child of a fork(), frees on another stream and on a destroyed
 * one, a stream capturing a CUDA graph (refused), two devices from several threads,
 * torch.cuda.MemPool's alloc (NULL on failure), and the failures that can only return NULL
 * (bad spec, wrong device, memory no device can access, out of memory, with the core's report),
 * each logged once. Suite core: MEMRES_ALLOCATOR_RESOURCE=hostdev, a kind of this program that
 * stands in for device-accessible memory without a driver (host memory that says it is
 * device-accessible, as page-locked memory is); suite fake and gpu: the default (dmr). */
#include <memres/memres.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../interop/memres-allocator.h" /* MEMRES_ALLOCATOR_DEFAULT_SPEC */
#include "hostdev-kind.h"
#include "testutil.h"

#include <glib/gstdio.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

typedef struct
{
  void *(*torch_alloc) (ssize_t size, int device, void *stream);
  void (*torch_free) (void *ptr, ssize_t size, int device, void *stream);
  void *(*torch_pool_alloc) (ssize_t size, int device, void *stream);
  void (*torch_record_stream) (void *ptr, void *stream);
  void (*torch_empty_cache) (void);
  gboolean (*torch_alloc_throws) (void);
  void *(*cupy_malloc) (void *param, size_t size, int device);
  void (*cupy_free) (void *param, void *ptr, int device);
  MemresResource *(*get_resource) (int device);
  guint64 (*count_buffers) (int device);
  int (*tag_push) (const char *tag);
  int (*tag_pop) (const char *tag);
  int (*tag_set_stream_default) (void *stream, const char *tag);
  int (*tag_set_device_default) (int device, const char *tag);
  int (*tag_get_counts) (int device, const char *tag, MemresTagCounts *counts);
  const char *(*tag_last_error) (void);
  gboolean (*write_snapshot) (const char *path, GError **error);
  int (*sleep) (int device, const char *tag, int mode, const char *path, void *stream);
  int (*wake) (int device, const char *tag, void *stream);
  int (*is_asleep) (int device, const char *tag);
  const char *(*sleep_last_error) (void);
} Shim;

static Shim shim;

static void
load_shim (void)
{
  const char *path = g_getenv ("MEMRES_ALLOCATOR_LIB");
  void *handle;

  g_assert_nonnull (path);
  handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    g_error ("dlopen %s: %s", path, dlerror ());
#define FIND(field, name)                                                                          \
  do                                                                                               \
    {                                                                                              \
      *(void **) &shim.field = dlsym (handle, name);                                               \
      g_assert_nonnull (shim.field);                                                               \
    }                                                                                              \
  while (0)
  FIND (torch_alloc, "memres_torch_alloc");
  FIND (torch_free, "memres_torch_free");
  FIND (torch_pool_alloc, "memres_torch_pool_alloc");
  FIND (torch_record_stream, "memres_torch_record_stream");
  FIND (torch_empty_cache, "memres_torch_empty_cache");
  FIND (torch_alloc_throws, "memres_torch_alloc_throws");
  FIND (cupy_malloc, "memres_cupy_malloc");
  FIND (cupy_free, "memres_cupy_free");
  FIND (get_resource, "memres_allocator_get_resource");
  FIND (count_buffers, "memres_allocator_count_buffers");
  FIND (tag_push, "memres_allocator_tag_push");
  FIND (tag_pop, "memres_allocator_tag_pop");
  FIND (tag_set_stream_default, "memres_allocator_tag_set_stream_default");
  FIND (tag_set_device_default, "memres_allocator_tag_set_device_default");
  FIND (tag_get_counts, "memres_allocator_tag_get_counts");
  FIND (tag_last_error, "memres_allocator_tag_last_error");
  FIND (write_snapshot, "memres_allocator_write_snapshot");
  FIND (sleep, "memres_allocator_sleep");
  FIND (wake, "memres_allocator_wake");
  FIND (is_asleep, "memres_allocator_is_asleep");
  FIND (sleep_last_error, "memres_allocator_sleep_last_error");
#undef FIND
}

/* The resource for device 0: hostdev in suite core, dmr against a driver. */
static gboolean
require_resource (void)
{
  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") == NULL && !mt_require_devices (1))
    return FALSE;
  g_assert_nonnull (shim.get_resource (0));
  return TRUE;
}

static MemresStats
stats_of (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresStats stats;

  g_assert_true (memres_resource_get_stats (mr, &stats, &error));
  g_assert_no_error (error);
  return stats;
}

/* @ptr of @size bytes from the shim, wrapped (no ownership) to reach it through memres. */
static MemresBuffer *
wrap (MemresResource *mr, void *ptr, gsize size)
{
  g_autoptr (GError) error = NULL;
  MemresMemoryFlags flags = memres_resource_get_flags (mr)
                            & (MEMRES_MEMORY_DEVICE_ACCESSIBLE | MEMRES_MEMORY_HOST_ACCESSIBLE);
  MemresBuffer *buf;

  /* hostdev's memory is host memory: no driver touches it */
  if (g_strcmp0 (memres_resource_get_kind_name (mr), "hostdev") == 0)
    flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
  buf = memres_buffer_new_for_pointer (ptr, size, memres_resource_get_device (mr), flags, NULL,
                                       NULL, &error);

  g_assert_no_error (error);
  return buf;
}

/* Tags through the shim's C entry points (ctypes callers): the scope is libmemres's, errors are
 * the MemresTagError code + 1 with the thread's last message, -1 for others. */
static void
test_tags (void)
{
  MemresTagCounts counts;

  g_assert_cmpint (shim.tag_push ("kv-cache"), ==, 0);
  g_assert_cmpstr (memres_tag_get_current (), ==, "kv-cache");
  g_assert_cmpint (shim.tag_pop ("other"), ==, MEMRES_TAG_ERROR_MISMATCH + 1);
  g_assert_nonnull (strstr (shim.tag_last_error (), "innermost tag is \"kv-cache\""));
  g_assert_cmpint (shim.tag_pop ("kv-cache"), ==, 0);
  g_assert_null (memres_tag_get_current ());
  g_assert_cmpint (shim.tag_pop (NULL), ==, MEMRES_TAG_ERROR_EMPTY + 1);
  g_assert_cmpint (shim.tag_push (""), ==, MEMRES_TAG_ERROR_INVALID + 1);
  g_assert_cmpstr (shim.tag_last_error (), ==, "a tag cannot be empty");
  g_assert_cmpint (shim.tag_set_device_default (-2, "x"), ==, -1);
  g_assert_cmpint (shim.tag_set_stream_default (NULL, "stream-tag"), ==, 0);
  g_assert_cmpint (shim.tag_set_stream_default (NULL, NULL), ==, 0);
  if (!require_resource ())
    return;
  /* no stats layer in these stacks */
  g_assert_cmpint (shim.tag_get_counts (0, "kv-cache", &counts), ==, -1);
  g_assert_nonnull (shim.tag_last_error ());
}

/* Sleep and wake through the shim's C entry points: over a stack that can sleep
 * (allocator-sleep-fake and -gpu run this case alone with MEMRES_ALLOCATOR_RESOURCE=cache>vmm), a
 * tensor of a tag sleeps with its contents backed up, keeps its address and reads back the same
 * after the wake; over any other, NOT_SUPPORTED (-1) naming vmm. */
static void
test_sleep (void)
{
  MemresResource *mr;
  g_autoptr (MemresBuffer) view = NULL;
  gsize size = 4 << 20;
  gboolean can_sleep = g_strcmp0 (g_getenv ("MEMRES_ALLOCATOR_RESOURCE"), "cache>vmm") == 0;
  void *ptr;

  if ((can_sleep && !mt_require_devices (1)) || !require_resource ())
    return;
  mr = shim.get_resource (0);
  g_assert_cmpint (shim.tag_push ("shim-kv"), ==, 0);
  ptr = shim.torch_alloc ((ssize_t) size, 0, NULL);
  g_assert_cmpint (shim.tag_pop ("shim-kv"), ==, 0);
  g_assert_nonnull (ptr);
  /* a NULL tag: -1 with the message kept, not a crash, whatever the stack */
  g_assert_cmpint (shim.sleep (0, NULL, 0, NULL, NULL), ==, -1);
  g_assert_nonnull (strstr (shim.sleep_last_error (), "tag cannot be empty"));
  g_assert_cmpint (shim.wake (0, NULL, NULL), ==, -1);
  g_assert_nonnull (strstr (shim.sleep_last_error (), "tag cannot be empty"));
  g_assert_cmpint (shim.is_asleep (0, NULL), ==, 0);
  if (!can_sleep)
    {
      g_assert_cmpint (shim.sleep (0, "shim-kv", 0, NULL, NULL), ==, -1);
      g_assert_nonnull (strstr (shim.sleep_last_error (), "vmm"));
      g_assert_cmpint (shim.wake (0, "shim-kv", NULL), ==, -1);
      g_assert_cmpint (shim.is_asleep (0, "shim-kv"), ==, 0);
      shim.torch_free (ptr, (ssize_t) size, 0, NULL);
      return;
    }
  view = wrap (mr, ptr, size);
  mt_write_pattern (view, 0, size, 77, NULL);
  g_assert_cmpint (shim.sleep (0, "shim-kv", 7, NULL, NULL), ==, -1); /* no such mode */
  g_assert_cmpint (shim.sleep (0, "shim-kv", MEMRES_SLEEP_BACKUP, NULL, NULL), ==, 0);
  g_assert_cmpint (shim.is_asleep (0, "shim-kv"), ==, 1);
  g_assert_cmpint (shim.sleep (0, "shim-kv", 0, NULL, NULL), ==,
                   MEMRES_SLEEP_ERROR_ALREADY_ASLEEP + 1);
  g_assert_nonnull (strstr (shim.sleep_last_error (), "asleep already"));
  g_assert_cmpint (shim.wake (0, "shim-kv", NULL), ==, 0);
  g_assert_cmpint (shim.wake (0, "shim-kv", NULL), ==, MEMRES_SLEEP_ERROR_NOT_ASLEEP + 1);
  mt_check_pattern (view, 0, size, 77, NULL);
  g_clear_pointer (&view, memres_buffer_unref);
  shim.torch_free (ptr, (ssize_t) size, 0, NULL);
}

static void
test_alloc_free (void)
{
  static const gsize sizes[] = { 1, 255, 4096, 65536 + 3, 1 << 20 };
  void *ptrs[G_N_ELEMENTS (sizes)];
  MemresResource *mr;

  if (!require_resource ())
    return;
  mr = shim.get_resource (0);
  g_assert_true (shim.get_resource (0) == mr); /* one resource per device */
  g_assert_cmpuint (stats_of (mr).n_buffers, ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autoptr (MemresBuffer) view = NULL;

      ptrs[i] = i % 2 ? shim.cupy_malloc (NULL, sizes[i], 0)
                      : shim.torch_alloc ((ssize_t) sizes[i], 0, NULL);
      g_assert_nonnull (ptrs[i]);
      view = wrap (mr, ptrs[i], sizes[i]);
      mt_write_pattern (view, 0, sizes[i], (guint32) i, NULL);
    }
  g_assert_cmpuint (shim.count_buffers (0), ==, G_N_ELEMENTS (sizes));
  g_assert_cmpuint (shim.count_buffers (-1), ==, G_N_ELEMENTS (sizes));
  g_assert_cmpuint (shim.count_buffers (1), ==, 0);
  g_assert_cmpuint (stats_of (mr).n_buffers, ==, G_N_ELEMENTS (sizes));
  /* every buffer still holds its own bytes: none was handed out twice */
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      g_autoptr (MemresBuffer) view = wrap (mr, ptrs[i], sizes[i]);

      mt_check_pattern (view, 0, sizes[i], (guint32) i, NULL);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    if (i % 2)
      shim.cupy_free (NULL, ptrs[i], 0);
    else
      shim.torch_free (ptrs[i], (ssize_t) sizes[i], 0, NULL);
  mt_sync_ok (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (stats_of (mr).n_buffers, ==, 0);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
}

/* torch asks for 0 bytes for every empty tensor (torch.empty(0), torch.Tensor().cuda(); pytorch
 * issue 159892), on any device and stream, and frees what it got: NULL, with size 0 (its deleter
 * context, torch 2.5 to 2.9). Each is NULL without a log line (warnings are fatal here), also for
 * a device the library does not serve; NULL given to free and record_stream does nothing. */
static void
test_zero_and_null (void)
{
  if (!require_resource ())
    return;
  for (int i = 0; i < 3; i++)
    {
      g_assert_null (shim.torch_alloc (0, 0, NULL));
      g_assert_null (shim.torch_pool_alloc (0, 0, NULL));
      g_assert_null (shim.torch_alloc (0, 1, (void *) 0x2)); /* the per-thread stream */
      g_assert_null (shim.torch_alloc (0, MEMRES_ALLOCATOR_MAX_DEVICES, NULL));
      g_assert_null (shim.cupy_malloc (NULL, 0, 0));
      shim.torch_free (NULL, 0, 0, NULL);
      shim.torch_free (NULL, 0, 3, (void *) 0x2);
      shim.torch_record_stream (NULL, (void *) 0x2);
      shim.cupy_free (NULL, NULL, 0);
    }
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (stats_of (shim.get_resource (0)).n_buffers, ==, 0);
}

/* Allocations passed between threads through a queue: each thread frees what another made. */
#define N_THREADS 8
#define N_ROUNDS  3000

typedef struct
{
  GAsyncQueue *queue;
  gboolean host; /* the memory can be tagged and checked in place */
  guint seed;
} ThreadData;

typedef struct
{
  void *ptr;
  gsize size;
  guint64 tag;
} Handed;

static gpointer
thread_main (gpointer data)
{
  ThreadData *td = data;
  GRand *rand = g_rand_new_with_seed (td->seed);

  for (guint i = 0; i < N_ROUNDS; i++)
    {
      Handed *h = g_new (Handed, 1);

      h->size = 8 + g_rand_int_range (rand, 0, 1 << 16);
      h->tag = ((guint64) td->seed << 32) | i;
      h->ptr = i % 3 ? shim.torch_alloc ((ssize_t) h->size, 0, NULL)
                     : shim.cupy_malloc (NULL, h->size, 0);
      g_assert_nonnull (h->ptr);
      if (td->host)
        memcpy (h->ptr, &h->tag, sizeof h->tag);
      g_async_queue_push (td->queue, h);
      /* free one of the queued allocations, most likely another thread's */
      if (g_rand_boolean (rand))
        {
          Handed *other = g_async_queue_try_pop (td->queue);

          if (other != NULL)
            {
              if (td->host)
                g_assert_cmpmem (other->ptr, sizeof other->tag, &other->tag, sizeof other->tag);
              if (g_rand_boolean (rand))
                shim.torch_free (other->ptr, (ssize_t) other->size, 0, NULL);
              else
                shim.cupy_free (NULL, other->ptr, 0);
              g_free (other);
            }
        }
    }
  g_rand_free (rand);
  return NULL;
}

static void
test_threads (void)
{
  GAsyncQueue *queue;
  ThreadData td[N_THREADS];
  GThread *threads[N_THREADS];
  MemresResource *mr;
  Handed *h;
  guint64 left = 0;

  if (!require_resource ())
    return;
  queue = g_async_queue_new ();
  mr = shim.get_resource (0);
  for (int i = 0; i < N_THREADS; i++)
    {
      td[i].queue = queue;
      td[i].host = (memres_resource_get_flags (mr) & MEMRES_MEMORY_HOST_ACCESSIBLE) != 0;
      td[i].seed = 1000 + i;
      threads[i] = g_thread_new ("allocator", thread_main, &td[i]);
    }
  for (int i = 0; i < N_THREADS; i++)
    g_thread_join (threads[i]);
  left = g_async_queue_length (queue);
  g_assert_cmpuint (shim.count_buffers (0), ==, left);
  g_assert_cmpuint (stats_of (mr).n_buffers, ==, left);
  while ((h = g_async_queue_try_pop (queue)) != NULL)
    {
      if (td[0].host)
        g_assert_cmpmem (h->ptr, sizeof h->tag, &h->tag, sizeof h->tag);
      shim.torch_free (h->ptr, (ssize_t) h->size, 0, NULL);
      g_free (h);
    }
  g_async_queue_unref (queue);
  mt_sync_ok (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (stats_of (mr).n_buffers, ==, 0);
}

/* The failures below are logged once each: they run in a subprocess of their own, with the
 * environment they need set before the library's first use, and a log writer that keeps every
 * warning (GLib of this age does not match structured messages with g_test_expect_message()). */
static GPtrArray *warnings;
static guint warnings_seen;

static GLogWriterOutput
keep_warnings (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer data)
{
  if ((level & G_LOG_LEVEL_WARNING) != 0)
    for (gsize i = 0; i < n_fields; i++)
      if (g_strcmp0 (fields[i].key, "MESSAGE") == 0)
        g_ptr_array_add (warnings, g_strdup (fields[i].value));
  return G_LOG_WRITER_HANDLED;
}

static void
child_setup (void)
{
  warnings = g_ptr_array_new_with_free_func (g_free);
  g_log_set_writer_func (keep_warnings, NULL, NULL);
  load_shim ();
}

/* For a test that needs the driver: in the parent, runs the test again in a child process
 * (skipped without a driver or a device) and returns FALSE; in that child, sets it up and returns
 * TRUE. */
static gboolean
in_driver_child (void)
{
  if (g_test_subprocess ())
    {
      child_setup ();
      return TRUE;
    }
  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL)
    g_test_skip ("needs the driver (suite fake or gpu)");
  else if (mt_require_devices (1))
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
    }
  return FALSE;
}

/* Exactly one warning since the last check, matching @pattern; NULL: none. */
static void
assert_new_warning (const char *pattern)
{
  if (pattern == NULL)
    {
      if (warnings->len != warnings_seen)
        {
          /* g_error() would reach keep_warnings(), which keeps nothing but warnings */
          g_printerr ("%u unexpected warnings, the first: '%s'\n", warnings->len - warnings_seen,
                      (char *) g_ptr_array_index (warnings, warnings_seen));
          g_assert_cmpuint (warnings->len, ==, warnings_seen);
        }
      return;
    }
  g_assert_cmpuint (warnings->len, ==, warnings_seen + 1);
  if (!g_pattern_match_simple (pattern, g_ptr_array_index (warnings, warnings_seen)))
    g_error ("warning '%s' does not match '%s'",
             (char *) g_ptr_array_index (warnings, warnings_seen), pattern);
  warnings_seen++;
}

static void
test_unknown_pointer (void)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  {
    int not_allocated;

    child_setup ();
    shim.torch_free (&not_allocated, 4, 0, NULL);
    assert_new_warning ("*was not allocated here*");
    /* the second one is logged at debug level only */
    shim.cupy_free (NULL, &not_allocated, 0);
    shim.torch_record_stream (&not_allocated, NULL); /* an unknown pointer: nothing */
    assert_new_warning (NULL);
  }
}

/* memres_torch_pool_alloc, torch.cuda.MemPool's alloc: the pointer as memres_torch_alloc's (bytes
 * written and read back, freed by memres_torch_free); a failure is NULL, which torch's caching
 * allocator checks there (it frees its cached blocks and asks again), never an exception; the
 * library works on afterwards. */
static void
test_pool_alloc (void)
{
  g_autoptr (MemresBuffer) view = NULL;
  void *p;

  if (!g_test_subprocess ())
    {
      if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") == NULL && !mt_require_devices (1))
        return;
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  child_setup ();
  p = shim.torch_pool_alloc (65536, 0, NULL);
  g_assert_nonnull (p);
  view = wrap (shim.get_resource (0), p, 65536);
  mt_write_pattern (view, 0, 65536, 5, NULL);
  mt_check_pattern (view, 0, 65536, 5, NULL);
  g_clear_pointer (&view, memres_buffer_unref);
  g_assert_cmpuint (shim.count_buffers (0), ==, 1);
  /* sizes no memory has: NULL, logged once (memres refuses them before any allocator) */
  g_assert_null (shim.torch_pool_alloc ((ssize_t) (G_MAXSIZE - 4096), 0, NULL));
  assert_new_warning ("*device 0: allocating*");
  g_assert_null (shim.torch_pool_alloc (-5, 0, NULL));
  assert_new_warning (NULL);
  /* a device not served: NULL too */
  g_assert_null (shim.torch_pool_alloc (4096, MEMRES_ALLOCATOR_MAX_DEVICES, NULL));
  assert_new_warning ("*device 64 is not served*");
  g_assert_cmpuint (shim.count_buffers (-1), ==, 1);
  shim.torch_free (p, 65536, 0, NULL);
  mt_sync_ok (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (stats_of (shim.get_resource (0)).used_current, ==, 0);
}

static void
test_bad_spec (void)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "no_such_kind:device={device}", TRUE);
  child_setup ();
  g_assert_null (shim.cupy_malloc (NULL, 4096, 0));
  assert_new_warning ("*device 0: no resource*no_such_kind*");
  /* no second try, no second warning */
  g_assert_null (shim.cupy_malloc (NULL, 4096, 0));
  g_assert_null (shim.get_resource (0));
  assert_new_warning (NULL);
  /* another device is tried once, with its own warning */
  g_assert_null (shim.cupy_malloc (NULL, 4096, 5));
  assert_new_warning ("*device 5: no resource*");
  /* devices out of range, a negative size */
  g_assert_null (shim.cupy_malloc (NULL, 4096, -1));
  assert_new_warning ("*device -1 is not served*");
  g_assert_null (shim.cupy_malloc (NULL, 4096, 64));
  /* torch's alloc fails in C (NULL) only in the build without C++; test-allocator-throw.cc
   * checks the throwing one (an exception cannot cross this C test's frames) */
  if (!shim.torch_alloc_throws ())
    g_assert_null (shim.torch_alloc (-5, 0, NULL));
  assert_new_warning (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
}

/* MEMRES_ALLOCATOR_RESOURCE[_<N>] set to the empty string is unset, as memres reads every empty
 * MEMRES_* variable that names something (and torch an empty PYTORCH_CUDA_ALLOC_CONF): device 0
 * gets MEMRES_ALLOCATOR_DEFAULT_SPEC (with the driver: that stack; without: the error that
 * spec gives, MEMRES_ERROR_NO_DRIVER, logged, not an error of an empty spec), an empty
 * per-device value leaves the device to MEMRES_ALLOCATOR_RESOURCE, and a blank one (spaces) is
 * a spec memres refuses: MEMRES_ERROR_INVALID_ARGUMENT, logged. */
static void
test_empty_spec (void)
{
  g_auto (GStrv) parts = g_strsplit (MEMRES_ALLOCATOR_DEFAULT_SPEC, "{device}", -1);
  g_autofree char *default_spec = g_strjoinv ("0", parts);
  g_autoptr (GError) want = NULL;
  g_autoptr (GError) blank = NULL;
  g_autoptr (MemresResource) direct = NULL;

  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "", TRUE);
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE_0", "", TRUE);
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE_1", "  ", TRUE);
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE_2", "hostdev", TRUE);
  child_setup ();
  direct = memres_resource_new (default_spec, &want);
  if (direct != NULL)
    {
      /* a driver: the default stack, layer by layer */
      MemresResource *mr = shim.get_resource (0);
      g_autofree char *got = NULL;
      g_autofree char *expected = memres_resource_to_string (direct);

      g_assert_nonnull (mr);
      got = memres_resource_to_string (mr);
      g_assert_cmpstr (got, ==, expected);
      assert_new_warning (NULL);
    }
  else
    {
      g_autofree char *pattern = g_strdup_printf ("*device 0: no resource: %s", want->message);

      g_assert_error (want, MEMRES_ERROR, MEMRES_ERROR_NO_DRIVER);
      g_assert_null (shim.get_resource (0));
      assert_new_warning (pattern);
    }
  /* blank: a spec, refused */
  g_assert_null (memres_resource_new ("  ", &blank));
  g_assert_error (blank, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  {
    g_autofree char *pattern = g_strdup_printf ("*device 1: no resource: %s", blank->message);

    g_assert_null (shim.cupy_malloc (NULL, 4096, 1));
    assert_new_warning (pattern);
  }
  /* an empty MEMRES_ALLOCATOR_RESOURCE_0 does not hide device 2's own */
  g_assert_nonnull (shim.get_resource (2));
  g_assert_cmpstr (memres_resource_get_kind_name (shim.get_resource (2)), ==, "hostdev");
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
}

static void
test_per_device_spec (void)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "no_such_kind", TRUE);
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE_3", "hostdev", TRUE);
  child_setup ();
  {
    MemresResource *mr = shim.get_resource (3);
    void *p;

    g_assert_nonnull (mr);
    g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "hostdev");
    p = shim.torch_alloc (100, 3, NULL);
    g_assert_nonnull (p);
    g_assert_cmpuint (shim.count_buffers (3), ==, 1);
    g_assert_cmpuint (shim.count_buffers (0), ==, 0);
    shim.torch_free (p, 100, 3, NULL);
    g_assert_cmpuint (shim.count_buffers (3), ==, 0);
  }
}

static void
test_wrong_device (void)
{
  if (!g_test_subprocess ())
    {
      if (!mt_require_devices (1))
        return;
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  /* no {device}: every device would get device 0's memory */
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "dmr:device=0", TRUE);
  child_setup ();
  g_assert_null (shim.cupy_malloc (NULL, 4096, 1));
  assert_new_warning ("*is of device 0, not of device 1*");
}

/* Memory no device can access (pageable host memory, in a stack or not) is refused, once per
 * device. */
static void
test_host_only (void)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "host", TRUE);
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE_1", "limit:max=1MiB>host", TRUE);
  child_setup ();
  g_assert_null (shim.cupy_malloc (NULL, 4096, 0));
  assert_new_warning ("*device 0: no resource*'host' gives memory that device 0 cannot access*");
  g_assert_null (shim.get_resource (0));
  if (!shim.torch_alloc_throws ())
    g_assert_null (shim.torch_alloc (4096, 0, NULL));
  assert_new_warning (NULL);
  g_assert_null (shim.get_resource (1));
  assert_new_warning ("*device 1: no resource*device 1 cannot access*kind 'limit'*");
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
}

/* Page-locked and managed memory, which the device reaches, are served: bytes written and read
 * back through a wrapping buffer. @data: the spec. */
static void
test_device_reachable (gconstpointer data)
{
  const char *spec = data;
  g_autoptr (MemresBuffer) view = NULL;
  void *p;

  if (!g_test_subprocess ())
    {
      if (!mt_require_devices (1))
        return;
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", spec, TRUE);
  child_setup ();
  p = shim.cupy_malloc (NULL, 4096, 0);
  if (p == NULL && warnings->len > 0)
    g_error ("%s: %s", spec, (char *) g_ptr_array_index (warnings, 0));
  g_assert_nonnull (p);
  view = wrap (shim.get_resource (0), p, 4096);
  mt_write_pattern (view, 0, 4096, 7, NULL);
  mt_check_pattern (view, 0, 4096, 7, NULL);
  g_clear_pointer (&view, memres_buffer_unref);
  shim.cupy_free (NULL, p, 0);
  assert_new_warning (NULL);
  mt_sync_ok (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
}

static void
test_out_of_memory (void)
{
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "hostdev", TRUE);
  child_setup ();
  /* sizes no memory has (memres refuses them before the allocator sees them; a sanitizer's
   * malloc would abort on them) */
  g_assert_null (shim.cupy_malloc (NULL, G_MAXSIZE - 4096, 0));
  assert_new_warning ("*device 0: allocating*");
  g_assert_null (shim.cupy_malloc (NULL, (gsize) G_MAXSSIZE + 1, 0)); /* debug level only */
  assert_new_warning (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (stats_of (shim.get_resource (0)).n_buffers, ==, 0);
}

/* The out-of-memory report through the shim (suite fake): the core's report is the message
 * the shim logs (once per device at warning level), the one the device's resource keeps
 * (memres_resource_get_oom_report()) and, with MEMRES_OOM_SNAPSHOT set, the file's
 * "oom_report"; a limit's verdict, then a request larger than the whole device, judged too
 * large (no trim or raised limit serves it) and logged at debug level only. */
static void
test_out_of_memory_report (void)
{
  g_autofree char *report = NULL;
  g_autofree char *written = NULL;
  g_autofree char *path = NULL;
  g_autofree char *dir = NULL;
  MemresResource *mr;
  void *held;

  if (!g_test_subprocess ())
    {
      if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL || !mt_require_fake ("the fake device"))
        {
          if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL)
            g_test_skip ("a device's report (suite fake)");
          return;
        }
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  dir = g_dir_make_tmp ("memres-shim-oom-XXXXXX", NULL);
  path = g_build_filename (dir, "oom.json", NULL);
  g_setenv ("MEMRES_OOM_SNAPSHOT", path, TRUE);
  g_setenv ("MEMRES_ALLOCATOR_RESOURCE", "limit:max=4MiB>dmr:pool=new", TRUE);
  child_setup ();
  held = shim.cupy_malloc (NULL, 3 << 20, 0);
  g_assert_nonnull (held);
  g_assert_null (shim.cupy_malloc (NULL, 2 << 20, 0));
  assert_new_warning ("memres allocator: device 0: allocating 2097152 bytes: limit: allocating "
                      "2097152 bytes would pass the limit of 4194304 bytes (3145728 in use). Out "
                      "of memory, limit: `limit` allows 4 MiB, 3 MiB in use. Held: `limit` "
                      "allows 4 MiB, 3 MiB in use; `dmr` holds * Remedy: raise the limit of "
                      "`limit`, or free some of what it has in use. (further failures*");
  mr = shim.get_resource (0);
  report = memres_resource_get_oom_report (mr);
  g_assert_nonnull (report);
  g_assert_true (g_str_has_prefix (report, "limit: allocating 2097152 bytes would pass"));
  g_assert_null (strchr (report, '\n'));
  g_assert_true (g_file_get_contents (path, &written, NULL, NULL));
  g_assert_nonnull (strstr (written, "\"oom_report\": \"limit: allocating 2097152 bytes"));
  g_assert_nonnull (strstr (written, "\"limit_used\": 3145728"));
  /* a PiB: more than the device has in all, whatever the limit says; debug level this time */
  g_assert_null (shim.cupy_malloc (NULL, (gsize) 1 << 50, 0));
  assert_new_warning (NULL);
  g_free (report);
  report = memres_resource_get_oom_report (mr);
  g_assert_nonnull (strstr (report, "Out of memory, too large: the request of 1 PiB is more than "
                                    "the device has in all ("));
  g_assert_true (g_str_has_suffix (report, "Remedy: no trim or kind makes the device larger: "
                                           "split the request into pieces the device can hold, "
                                           "or use memory that can exceed the device's (managed "
                                           "memory, or page-locked host memory)."));
  shim.cupy_free (NULL, held, 0);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_remove (path);
  g_rmdir (dir);
}

/* record_stream: the free waits for the recorded stream (one event waited for on the free's
 * stream), then empty_cache trims the pool. */
static void
test_record_stream_and_trim (void)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv;
  MemresResource *mr;
  CUstream other = NULL;
  long waits;
  void *p;

  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL || !mt_require_devices (1))
    {
      if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL)
        g_test_skip ("record_stream needs device memory (suite fake or gpu)");
      return;
    }
  mr = shim.get_resource (0);
  g_assert_nonnull (mr);
  drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (drv->cuStreamCreate (&other, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);

  p = shim.torch_alloc (1 << 20, 0, NULL);
  g_assert_nonnull (p);
  shim.torch_record_stream (p, other);
  shim.torch_record_stream (p, other); /* recorded once */
  shim.torch_record_stream (p, NULL);  /* the allocation's own stream: no wait */
  waits = mt_driver_is_fake () ? mt_fake_call_count ("cuStreamWaitEvent") : 0;
  shim.torch_free (p, 1 << 20, 0, NULL);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent") - waits, ==, 1);
  g_assert_cmpuint (shim.count_buffers (0), ==, 0);
  mt_sync_ok (NULL);

  shim.torch_empty_cache ();
  g_assert_cmpuint (stats_of (mr).reserved_current, ==, 0);
  g_assert_cmpint (drv->cuStreamDestroy (other), ==, CUDA_SUCCESS);
}

/* torch.cuda.empty_cache() while tensors are live: the trim releases only what is held unused
 * (the freed block, the pool's reserve); the live tensor keeps its bytes and stays counted. Its
 * free, given another size and device than the allocation's (torch's MemPool and CuPy pass
 * what they kept; the buffer knows its own), frees it from device 0. */
static void
test_trim_live (void)
{
  g_autoptr (MemresBuffer) view = NULL;
  MemresResource *mr;
  gsize size = 1 << 20;
  void *live, *freed;

  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL)
    {
      g_test_skip ("a pool to trim needs the driver (suite fake or gpu)");
      return;
    }
  if (!mt_require_devices (1))
    return;
  mr = shim.get_resource (0);
  live = shim.torch_alloc ((ssize_t) size, 0, NULL);
  freed = shim.cupy_malloc (NULL, 4096, 0);
  g_assert_nonnull (live);
  g_assert_nonnull (freed);
  shim.cupy_free (NULL, freed, 0);
  view = wrap (mr, live, size);
  mt_write_pattern (view, 0, size, 23, NULL);
  mt_sync_ok (NULL);
  g_assert_cmpuint (stats_of (mr).reserved_current, >, size);
  shim.torch_empty_cache ();
  g_assert_cmpuint (shim.count_buffers (0), ==, 1);
  g_assert_cmpuint (stats_of (mr).used_current, ==, size);
  /* the fake's pool keeps exactly what is live; a device's may keep its granule */
  if (mt_driver_is_fake ())
    g_assert_cmpuint (stats_of (mr).reserved_current, ==, size);
  else
    g_assert_cmpuint (stats_of (mr).reserved_current, >=, size);
  mt_check_pattern (view, 0, size, 23, NULL);
  g_clear_pointer (&view, memres_buffer_unref);
  shim.torch_free (live, 7, 3, NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  mt_sync_ok (NULL);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  shim.torch_empty_cache ();
  g_assert_cmpuint (stats_of (mr).reserved_current, ==, 0);
}

/* The driver and a non-blocking stream of device 0, for the cases that need device memory
 * (suites fake and gpu); FALSE (skipped) under MEMRES_ALLOCATOR_RESOURCE (suite core). */
static gboolean
require_driver_stream (const MemresCudaDriver **drv, CUstream *stream)
{
  g_autoptr (GError) error = NULL;

  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL)
    {
      g_test_skip ("needs device memory (suite fake or gpu)");
      return FALSE;
    }
  if (!mt_require_devices (1))
    return FALSE;
  g_assert_nonnull (shim.get_resource (0));
  *drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  g_assert_cmpint ((*drv)->cuStreamCreate (stream, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  return TRUE;
}

/* torch frees on the allocation's stream; CuPy's param, a MemPool's segment release and C++
 * callers may free on another. The free is then ordered after the allocation stream's work (the
 * buffer's cross-stream close: one event recorded there and waited for on the free's stream)
 * and the memory goes back. */
static void
test_free_other_stream (void)
{
  const MemresCudaDriver *drv = NULL;
  CUstream a = NULL, b = NULL;
  MemresResource *mr;
  long waits;
  void *p;

  if (!require_driver_stream (&drv, &a))
    return;
  g_assert_cmpint (drv->cuStreamCreate (&b, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  mr = shim.get_resource (0);
  p = shim.torch_alloc (1 << 20, 0, a);
  g_assert_nonnull (p);
  waits = mt_driver_is_fake () ? mt_fake_call_count ("cuStreamWaitEvent") : 0;
  shim.torch_free (p, 1 << 20, 0, b);
  if (mt_driver_is_fake ())
    g_assert_cmpint (mt_fake_call_count ("cuStreamWaitEvent") - waits, ==, 1);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  mt_sync_ok ((MemresStream) b);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  g_assert_cmpint (drv->cuStreamDestroy (a), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamDestroy (b), ==, CUDA_SUCCESS);
}

/* A tensor allocated on a stream that is destroyed before the tensor goes (an ExternalStream
 * of another library): torch frees it on that dead stream. The fake answers
 * CUDA_ERROR_INVALID_HANDLE for it, as the real driver may (it promises nothing: the case runs
 * on the fake only). Over the default stack the cache takes the block back without a driver
 * call and gives it to the pool at empty_cache; over dmr alone (@data: device 0's spec) the
 * failed free is logged once, the memory freed after the device's work anyway, without a
 * warning for each tensor. Either way nothing stays allocated and the library works on. */
static void
test_free_destroyed_stream (gconstpointer data)
{
  const char *spec = data;
  const MemresCudaDriver *drv = NULL;
  CUstream dead = NULL;
  MemresResource *mr;
  void *p, *q;

  if (!g_test_subprocess ())
    {
      if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL || !mt_driver_is_fake ())
        {
          g_test_skip ("the real driver promises no error for a destroyed stream (fake only)");
          return;
        }
      if (!mt_require_devices (1))
        return;
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
      g_test_trap_assert_passed ();
      return;
    }
  if (spec != NULL)
    g_setenv ("MEMRES_ALLOCATOR_RESOURCE_0", spec, TRUE);
  child_setup ();
  if (!require_driver_stream (&drv, &dead))
    return;
  mr = shim.get_resource (0);
  p = shim.torch_alloc (1 << 20, 0, dead);
  q = shim.torch_alloc (4096, 0, dead);
  g_assert_nonnull (p);
  g_assert_nonnull (q);
  g_assert_cmpint (drv->cuStreamDestroy (dead), ==, CUDA_SUCCESS);
  shim.torch_free (p, 1 << 20, 0, dead);
  assert_new_warning (spec != NULL ? "*free*CUDA_ERROR_INVALID_HANDLE*" : NULL);
  shim.torch_free (q, 4096, 0, dead);
  assert_new_warning (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  mt_sync_ok (NULL);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  g_assert_cmpuint (stats_of (mr).n_buffers, ==, 0);
  /* what the cache keeps for the dead stream goes back to the pool, and the pool to the driver */
  shim.torch_empty_cache ();
  assert_new_warning (NULL);
  g_assert_cmpuint (stats_of (mr).reserved_current, ==, 0);
  p = shim.torch_alloc (4096, 0, NULL);
  g_assert_nonnull (p);
  shim.torch_free (p, 4096, 0, NULL);
  assert_new_warning (NULL);
}

/* torch.cuda.graph calls alloc on its capturing stream and tells a pluggable allocator nothing
 * else: memres refuses the allocation (memres_torch_alloc throws, the others return NULL) rather
 * than hand out memory a graph would use again at each replay after its tensor was freed; a
 * block the cache holds for that stream is not handed out either. Logged once; after the
 * capture the stream allocates again. */
static void
test_capture (void)
{
  const MemresCudaDriver *drv = NULL;
  CUstream s = NULL;
  CUgraph graph = NULL;
  MemresResource *mr;
  void *p;

  if (!in_driver_child ())
    return;
  if (!require_driver_stream (&drv, &s))
    return;
  mr = shim.get_resource (0);
  p = shim.torch_alloc (4096, 0, s);
  g_assert_nonnull (p);
  shim.torch_free (p, 4096, 0, s); /* cached for s: a hit would make no driver call */
  g_assert_cmpint (drv->cuStreamBeginCapture (s, CU_STREAM_CAPTURE_MODE_RELAXED), ==, CUDA_SUCCESS);
  g_assert_null (shim.cupy_malloc (s, 4096, 0));
  assert_new_warning ("*device 0: allocating 4096 bytes*capturing a CUDA graph*");
  g_assert_null (shim.torch_pool_alloc (1 << 20, 0, s));
  g_assert_null (shim.torch_pool_alloc (4096, 0, s));
  assert_new_warning (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  /* the legacy stream is not capturing: served during the capture of another stream */
  p = shim.torch_alloc (4096, 0, NULL);
  g_assert_nonnull (p);
  shim.torch_free (p, 4096, 0, NULL);
  g_assert_cmpint (drv->cuStreamEndCapture (s, &graph), ==, CUDA_SUCCESS);
  if (graph != NULL)
    g_assert_cmpint (drv->cuGraphDestroy (graph), ==, CUDA_SUCCESS);
  p = shim.torch_alloc (4096, 0, s);
  g_assert_nonnull (p);
  shim.torch_free (p, 4096, 0, s);
  mt_sync_ok ((MemresStream) s);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpint (drv->cuStreamDestroy (s), ==, CUDA_SUCCESS);
}

/* A free during a capture of memory that is not stream-ordered (@data: device 0's spec): its
 * close would wait for the capturing stream, which the capture forbids. Not logged: memres keeps
 * the buffer (counted as used, no longer in the shim's table) and frees it at the first memres
 * call after the capture ends (here memres_stream_synchronize()). It used to log the refused
 * close, warn at the unref and leak the memory. */
static void
test_free_in_capture (gconstpointer data)
{
  const MemresCudaDriver *drv = NULL;
  CUstream s = NULL;
  CUgraph graph = NULL;
  MemresResource *mr;
  void *p;

  if (g_test_subprocess ())
    g_setenv ("MEMRES_ALLOCATOR_RESOURCE_0", data, TRUE);
  if (!in_driver_child () || !require_driver_stream (&drv, &s))
    return;
  mr = shim.get_resource (0);
  p = shim.torch_alloc (2 << 20, 0, s);
  g_assert_nonnull (p);
  g_assert_cmpint (drv->cuStreamBeginCapture (s, CU_STREAM_CAPTURE_MODE_RELAXED), ==, CUDA_SUCCESS);
  shim.torch_free (p, 2 << 20, 0, s);
  assert_new_warning (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 2 << 20);
  g_assert_cmpint (drv->cuStreamEndCapture (s, &graph), ==, CUDA_SUCCESS);
  if (graph != NULL)
    g_assert_cmpint (drv->cuGraphDestroy (graph), ==, CUDA_SUCCESS);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 2 << 20);
  mt_sync_ok ((MemresStream) s);
  assert_new_warning (NULL);
  g_assert_cmpuint (stats_of (mr).used_current, ==, 0);
  g_assert_cmpuint (stats_of (mr).n_buffers, ==, 0);
  g_assert_cmpint (drv->cuStreamDestroy (s), ==, CUDA_SUCCESS);
}

/* Several devices from several threads, as torch's autograd and data-loader threads allocate:
 * each device's own resource (of that device), allocations of devices 0 and 1 freed in other
 * threads with the other device's ordinal given to free (the buffer knows its own), the counts
 * per device right throughout. Suite fake: FAKECUDA_DEVICES=2. */
#define N_DEVICE_THREADS 4
#define N_DEVICE_ROUNDS  500

typedef struct
{
  void *ptr;
  int device;
} DeviceHanded;

static gpointer
device_thread (gpointer data)
{
  GAsyncQueue *queue = data;

  for (guint i = 0; i < N_DEVICE_ROUNDS; i++)
    {
      DeviceHanded *h = g_new (DeviceHanded, 1), *other;

      h->device = i % 2;
      h->ptr = shim.torch_alloc (256 + 64 * (i % 7), h->device, NULL);
      g_assert_nonnull (h->ptr);
      g_async_queue_push (queue, h);
      if (i % 3 != 0 && (other = g_async_queue_try_pop (queue)) != NULL)
        {
          shim.torch_free (other->ptr, 1, 1 - other->device, NULL);
          g_free (other);
        }
    }
  return NULL;
}

static void
test_devices (void)
{
  g_autoptr (GPtrArray) live = g_ptr_array_new_with_free_func (g_free);
  GThread *threads[N_DEVICE_THREADS];
  GAsyncQueue *queue;
  DeviceHanded *h;
  guint64 left[2] = { 0, 0 };

  if (g_getenv ("MEMRES_ALLOCATOR_RESOURCE") != NULL)
    {
      g_test_skip ("needs device memory (suite fake or gpu)");
      return;
    }
  if (!mt_require_devices (2))
    return;
  g_assert_cmpint (memres_resource_get_device (shim.get_resource (0)), ==, 0);
  g_assert_cmpint (memres_resource_get_device (shim.get_resource (1)), ==, 1);
  queue = g_async_queue_new ();
  for (int i = 0; i < N_DEVICE_THREADS; i++)
    threads[i] = g_thread_new ("devices", device_thread, queue);
  for (int i = 0; i < N_DEVICE_THREADS; i++)
    g_thread_join (threads[i]);
  while ((h = g_async_queue_try_pop (queue)) != NULL)
    {
      left[h->device]++;
      g_ptr_array_add (live, h);
    }
  g_async_queue_unref (queue);
  g_assert_cmpuint (left[0], >, 0);
  g_assert_cmpuint (left[1], >, 0);
  for (int d = 0; d < 2; d++)
    {
      g_assert_cmpuint (shim.count_buffers (d), ==, left[d]);
      g_assert_cmpuint (stats_of (shim.get_resource (d)).n_buffers, ==, left[d]);
    }
  for (guint i = 0; i < live->len; i++)
    {
      h = g_ptr_array_index (live, i);
      shim.torch_free (h->ptr, 0, h->device, NULL);
    }
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  for (int d = 0; d < 2; d++)
    g_assert_cmpuint (stats_of (shim.get_resource (d)).n_buffers, ==, 0);
}

/* The child of a fork() made after the driver was initialized (a multiprocessing worker): the
 * tensors it inherited are forgotten on free without a driver call or a warning, even one that
 * record_stream() ordered after another stream; empty_cache does nothing and says nothing; an
 * allocation fails with MEMRES_ERROR_FORKED's message, logged. The parent's buffers keep their
 * bytes and stay counted. */
static void
test_fork_child (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresBuffer) view = NULL;
  const MemresCudaDriver *drv;
  CUstream other = NULL;
  void *plain, *recorded;
  int status = 0;
  pid_t pid;

  if (!in_driver_child ())
    return;
  drv = memres_cuda_get_driver (&error);
  g_assert_no_error (error);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (drv->cuStreamCreate (&other, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  plain = shim.torch_alloc (4096, 0, NULL);
  recorded = shim.cupy_malloc (NULL, 8192, 0);
  g_assert_nonnull (plain);
  g_assert_nonnull (recorded);
  shim.torch_record_stream (recorded, other);
  view = wrap (shim.get_resource (0), recorded, 8192);
  mt_write_pattern (view, 0, 8192, 41, NULL);
  g_clear_pointer (&view, memres_buffer_unref);
  mt_sync_ok (NULL);

  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      shim.torch_free (recorded, 8192, 0, other);
      shim.cupy_free (NULL, plain, 0);
      assert_new_warning (NULL);
      g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
      shim.torch_empty_cache ();
      assert_new_warning (NULL);
      g_assert_null (shim.cupy_malloc (NULL, 4096, 0));
      assert_new_warning ("*device 0: allocating 4096 bytes*child of fork()*");
      _exit (0);
    }
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 0);
  g_assert_cmpuint (shim.count_buffers (0), ==, 2);
  view = wrap (shim.get_resource (0), recorded, 8192);
  mt_check_pattern (view, 0, 8192, 41, NULL);
  g_clear_pointer (&view, memres_buffer_unref);
  shim.torch_free (recorded, 8192, 0, NULL);
  shim.torch_free (plain, 4096, 0, NULL);
  assert_new_warning (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
  mt_sync_ok (NULL);
  g_assert_cmpint (drv->cuStreamDestroy (other), ==, CUDA_SUCCESS);
}

#define FORK_THREADS 4
#define FORK_KEPT    64

static gint churn_stop;

/* Allocates, records a stream for and frees one pointer after another until churn_stop. */
static gpointer
churn (gpointer data)
{
  while (!g_atomic_int_get (&churn_stop))
    {
      void *p = shim.torch_alloc (4096, 0, NULL);

      g_assert_nonnull (p);
      shim.torch_record_stream (p, NULL);
      shim.torch_free (p, 4096, 0, NULL);
    }
  return NULL;
}

/* fork() while other threads allocate and free through the shim: a thread may hold a lock of the
 * pointer table at the fork, which the child, with the forking thread alone, would wait for at
 * its first free (the shim's atfork handlers take them all around the fork). Each child frees
 * the pointers it inherited, within a 20 s alarm; before the handlers, about a third of the
 * children hung. */
static void
test_fork_busy_threads (void)
{
  guint n_forks = RUNNING_ON_VALGRIND ? 8 : 40;
  GThread *threads[FORK_THREADS];
  void *kept[FORK_KEPT];

  if (!in_driver_child ())
    return;
  for (guint i = 0; i < FORK_KEPT; i++)
    g_assert_nonnull (kept[i] = shim.torch_alloc (8192, 0, NULL));
  g_atomic_int_set (&churn_stop, 0);
  for (guint i = 0; i < FORK_THREADS; i++)
    threads[i] = g_thread_new ("churn", churn, NULL);
  for (guint k = 0; k < n_forks; k++)
    {
      int status = 0;
      pid_t pid = fork ();

      g_assert_cmpint (pid, >=, 0);
      if (pid == 0)
        {
          alarm (20);
          for (guint i = 0; i < FORK_KEPT; i++)
            shim.torch_free (kept[i], 8192, 0, NULL);
          /* what the other threads had live at the fork stays counted */
          _exit (shim.count_buffers (0) <= FORK_THREADS ? 0 : 3);
        }
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_assert_false (WIFSIGNALED (status));
      g_assert_cmpint (WEXITSTATUS (status), ==, 0);
    }
  g_atomic_int_set (&churn_stop, 1);
  for (guint i = 0; i < FORK_THREADS; i++)
    g_thread_join (threads[i]);
  g_assert_cmpuint (shim.count_buffers (0), ==, FORK_KEPT);
  for (guint i = 0; i < FORK_KEPT; i++)
    shim.torch_free (kept[i], 8192, 0, NULL);
  assert_new_warning (NULL);
  g_assert_cmpuint (shim.count_buffers (-1), ==, 0);
}

/* The snapshot of every device's resource in one file (sdk/file-writer.c: a link followed and
 * kept, a FIFO refused); a path that cannot be written: a GFileError. */
static void
test_write_snapshot (void)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = NULL;
  g_autofree char *path = NULL;
  g_autofree char *link = NULL;
  g_autofree char *fifo = NULL;
  g_autofree char *text = NULL;
  struct stat st;
  void *ptr;

  if (!require_resource ())
    return;
  ptr = shim.torch_alloc (4096, 0, NULL);
  g_assert_nonnull (ptr);
  dir = g_dir_make_tmp ("memres-shim-XXXXXX", NULL);
  path = g_build_filename (dir, "snapshot.json", NULL);
  g_assert_true (shim.write_snapshot (path, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_true (
      g_str_has_prefix (text, "{\"memres_allocator_snapshot\": 1, \"devices\": {\n\"0\": {"));
  g_assert_nonnull (strstr (text, "\"memres_snapshot\": 1"));
  g_assert_true (g_str_has_suffix (text, "}}\n"));
  /* a symbolic link: followed, the file it leads to replaced, the link kept */
  link = g_build_filename (dir, "latest.json", NULL);
  g_assert_cmpint (symlink ("snapshot.json", link), ==, 0);
  g_assert_true (g_file_set_contents (path, "old", -1, NULL));
  g_assert_true (shim.write_snapshot (link, &error));
  g_assert_no_error (error);
  g_clear_pointer (&text, g_free);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_true (g_str_has_prefix (text, "{\"memres_allocator_snapshot\": 1"));
  g_assert_cmpint (lstat (link, &st), ==, 0);
  g_assert_true (S_ISLNK (st.st_mode));
  /* a FIFO: refused, left a FIFO (no hang waiting for a reader) */
  fifo = g_build_filename (dir, "fifo", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_false (shim.write_snapshot (fifo, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_clear_error (&error);
  g_assert_cmpint (lstat (fifo, &st), ==, 0);
  g_assert_true (S_ISFIFO (st.st_mode));
  g_remove (fifo);
  g_remove (link);
  g_remove (path);
  g_rmdir (dir);
  g_assert_false (shim.write_snapshot ("/nonexistent/dir/snapshot.json", &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  shim.torch_free (ptr, 4096, 0, NULL);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  hostdev_register ();
  if (!g_test_subprocess ())
    load_shim ();
  g_test_add_func ("/allocator/tags", test_tags);
  g_test_add_func ("/allocator/sleep", test_sleep);
  g_test_add_func ("/allocator/alloc-free", test_alloc_free);
  g_test_add_func ("/allocator/zero-and-null", test_zero_and_null);
  g_test_add_func ("/allocator/threads", test_threads);
  g_test_add_func ("/allocator/unknown-pointer", test_unknown_pointer);
  g_test_add_func ("/allocator/bad-spec", test_bad_spec);
  g_test_add_func ("/allocator/per-device-spec", test_per_device_spec);
  g_test_add_func ("/allocator/empty-spec", test_empty_spec);
  g_test_add_func ("/allocator/wrong-device", test_wrong_device);
  g_test_add_func ("/allocator/host-only", test_host_only);
  g_test_add_data_func ("/allocator/device-reachable/pinned", "pinned:device=0",
                        test_device_reachable);
  g_test_add_data_func ("/allocator/device-reachable/pinned-legacy", "pinned:mode=legacy",
                        test_device_reachable);
  g_test_add_data_func ("/allocator/device-reachable/managed", "managed:pool=none",
                        test_device_reachable);
  g_test_add_func ("/allocator/out-of-memory", test_out_of_memory);
  g_test_add_func ("/allocator/out-of-memory-report", test_out_of_memory_report);
  g_test_add_func ("/allocator/record-stream-and-trim", test_record_stream_and_trim);
  g_test_add_func ("/allocator/write-snapshot", test_write_snapshot);
  g_test_add_func ("/allocator/fork-child", test_fork_child);
  g_test_add_func ("/allocator/fork-busy-threads", test_fork_busy_threads);
  g_test_add_func ("/allocator/trim-live", test_trim_live);
  g_test_add_func ("/allocator/pool-alloc", test_pool_alloc);
  g_test_add_func ("/allocator/free-other-stream", test_free_other_stream);
  g_test_add_data_func ("/allocator/free-destroyed-stream/cache", NULL, test_free_destroyed_stream);
  g_test_add_data_func ("/allocator/free-destroyed-stream/dmr", "dmr:device=0",
                        test_free_destroyed_stream);
  g_test_add_func ("/allocator/capture", test_capture);
  g_test_add_data_func ("/allocator/free-in-capture/vmm", "vmm:device=0", test_free_in_capture);
  g_test_add_data_func ("/allocator/free-in-capture/pinned-legacy", "pinned:device=0,mode=legacy",
                        test_free_in_capture);
  g_test_add_func ("/allocator/devices", test_devices);
  return g_test_run ();
}

/* memres - CUDA memory resources
 * test-oom-report.c: the report an out-of-memory error carries when it reaches the application
 * (core/oom-report.c): its verdict in each of its three cases, provoked on the fake driver with
 * 64 MiB of device memory (FAKECUDA_DEVICE_MEMORY, set before the driver loads): a `limit`
 * layer, an exhausted device, a cache whose free memory is stranded in blocks too small for
 * the request; a request larger than the whole device or than any memory (too large, judged
 * first); the figures of each layer and the device's; the remedy; the last report kept on the
 * top resource and on no layer below it (an adaptor that catches out-of-memory below pays for no
 * report, and one that recovers leaves none). The limit and the oversized request also run
 * against the real driver; the cases that fill the device need the fake's small one. */
#include "testutil.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define KIB ((gsize) 1 << 10)
#define MIB ((gsize) 1 << 20)

/* An allocation of @size bytes from @mr that must run out of memory: its error, after checking
 * that @mr keeps the same text as its last report. */
static GError *
allocate_oom (MemresResource *mr, gsize size)
{
  GError *error = NULL;
  MemresBuffer *buf = memres_resource_allocate (mr, size, NULL, &error);
  g_autofree char *report = NULL;

  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  report = memres_resource_get_oom_report (mr);
  g_assert_cmpstr (report, ==, error->message);
  /* one paragraph */
  g_assert_null (strchr (error->message, '\n'));
  g_test_message ("%s", error->message);
  return error;
}

static void
assert_contains (const char *text, const char *needle)
{
  if (strstr (text, needle) == NULL)
    g_error ("\"%s\" not found in: %s", needle, text);
}

static void
test_limit (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok ("limit:max=8MiB>dmr:pool=new");
  g_assert_null (memres_resource_get_oom_report (mr));
  buf = memres_resource_allocate (mr, 6 * MIB, NULL, &error);
  g_assert_no_error (error);
  error = allocate_oom (mr, 4 * MIB);
  /* the layer's own message first, then the report */
  g_assert_true (g_str_has_prefix (error->message, "limit: allocating 4194304 bytes would pass"));
  assert_contains (error->message, "Out of memory, limit: `limit` allows 8 MiB, 6 MiB in use.");
  assert_contains (error->message, "Held: `limit` allows 8 MiB, 6 MiB in use; `dmr` holds ");
  assert_contains (error->message, "(6 MiB used, ");
  assert_contains (error->message, "; device 0 has ");
  g_assert_true (g_str_has_suffix (
      error->message, "Remedy: raise the limit of `limit`, or free some of what it has in use."));
  mt_close_ok (buf, NULL);
}

/* A limit over a layer that rounds up (vmm, to its 2 MiB granularity on the fake) refuses more
 * than the request: the verdict is still the limit's, with the bytes it refused. */
static void
test_limit_rounded (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;

  if (!mt_require_fake ("vmm's granularity on the fake is 2 MiB"))
    return;
  mr = mt_new_ok ("limit:max=1MiB>vmm");
  error = allocate_oom (mr, 1);
  assert_contains (error->message, "Out of memory, limit: `limit` allows 1 MiB, 0 bytes in use, "
                                   "2 MiB refused for a request of 1 byte.");
}

/* A pool's max_size is a limit too (RMM's pool with a maximum size): the report's verdict is that
 * limit, not an exhausted device that has memory free, and its remedy is not a trim (which
 * cannot help: the bytes are in live buffers). */
static void
test_pool_max_size (gconstpointer data)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresResource *base;
  g_autoptr (GError) error = NULL;
  g_autofree char *verdict = NULL;
  g_autofree char *remedy = NULL;
  MemresBuffer *buf;

  if (!mt_require_devices (1))
    return;
  mr = mt_new_ok (data);
  for (base = mr; memres_resource_get_upstream (base) != NULL;)
    base = memres_resource_get_upstream (base);
  buf = memres_resource_allocate (mr, 3 * MIB, NULL, &error);
  g_assert_no_error (error);
  error = allocate_oom (mr, 2 * MIB);
  g_assert_true (g_str_has_prefix (error->message, "cannot allocate 2097152 bytes: the pool's "
                                                   "max_size is 4194304 bytes and 3145728 are "
                                                   "in use."));
  verdict = g_strdup_printf ("Out of memory, limit: `%s` allows 4 MiB, 3 MiB in use.",
                             memres_resource_get_kind_name (base));
  assert_contains (error->message, verdict);
  remedy = g_strdup_printf ("Remedy: raise the limit of `%s`, or free some of what it has in use.",
                            memres_resource_get_kind_name (base));
  g_assert_true (g_str_has_suffix (error->message, remedy));
  mt_close_ok (buf, NULL);
  /* within the limit again: served */
  mt_close_ok (mt_alloc_ok (mr, 4 * MIB, NULL), NULL);
}

/* The device's free bytes now (cuMemGetInfo in device 0's primary context). */
static gsize
device_free (void)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  gboolean pushed = FALSE;
  size_t free_bytes = 0, total = 0;

  g_assert_nonnull (drv);
  g_assert_true (memres_cuda_push_context (0, &pushed, NULL));
  g_assert_cmpint (drv->cuMemGetInfo (&free_bytes, &total), ==, CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  g_assert_cmpuint (total, ==, 64 * MIB);
  return free_bytes;
}

static void
test_exhausted (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  if (!mt_require_fake ("fills the fake's 64 MiB device"))
    return;
  mr = mt_new_ok ("dmr:pool=new");
  buf = memres_resource_allocate (mr, 40 * MIB, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (device_free (), ==, 24 * MIB);
  error = allocate_oom (mr, 32 * MIB);
  g_assert_true (g_str_has_prefix (error->message, "cannot allocate 33554432 bytes: "));
  assert_contains (error->message, "CUDA_ERROR_OUT_OF_MEMORY");
  assert_contains (error->message,
                   "Out of memory, exhausted: the device has 24 MiB free of 64 MiB, request "
                   "32 MiB.");
  assert_contains (error->message, "Held: `dmr` holds 40 MiB (40 MiB used, 0 bytes cached); "
                                   "device 0 has 24 MiB free of 64 MiB.");
  g_assert_true (g_str_has_suffix (error->message,
                                   "Remedy: trim (memres_resource_trim()) what other resources "
                                   "of the memory hold unused, or free memory held elsewhere; "
                                   "nothing is cached in this stack."));
  mt_close_ok (buf, NULL);
}

/* A device with less free than the granule the memory below maps but more than the request (1 MiB
 * free, a request of 4 KiB): "exhausted: the device has 1 MiB free of 64 MiB, request 4 KiB"
 * read as a contradiction; the verdict now says why more than the request was not enough. The
 * device is filled with cuMemAlloc(), whose bytes no layer of the stack holds. */
static void
test_exhausted_granule (void)
{
  static const char *const specs[] = { "dmr:pool=new", "vmm", "cache>vmm" };
  const MemresCudaDriver *drv;
  gboolean pushed = FALSE;
  CUdeviceptr taken = 0;

  if (!mt_require_fake ("fills the fake's 64 MiB device"))
    return;
  drv = memres_cuda_get_driver (NULL);
  g_assert_true (memres_cuda_push_context (0, &pushed, NULL));
  g_assert_cmpint (drv->cuMemAlloc (&taken, 63 * MIB), ==, CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
  g_assert_cmpuint (device_free (), ==, 1 * MIB);
  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      g_autoptr (GError) error = allocate_oom (mr, 4 * KIB);

      assert_contains (error->message,
                       "Out of memory, exhausted: the device has 1 MiB free of 64 MiB, request "
                       "4 KiB: more than the request is free, but not in the pieces the memory "
                       "below takes (");
      g_assert_null (strstr (error->message, "too large"));
    }
  g_assert_true (memres_cuda_push_context (0, &pushed, NULL));
  g_assert_cmpint (drv->cuMemFree (taken), ==, CUDA_SUCCESS);
  memres_cuda_pop_context (pushed);
}

/* A cache whose free memory lies in blocks carved from chunks that are partly in use: 128 KiB
 * blocks (16 to a chunk of 2 MiB) fill the device, every other one is freed, and a request of
 * 1 MiB finds 32 MiB free in the cache, none of it in one piece, and none it can give back. The
 * cache's out-of-memory flush and `retry` catch the error below the top: only the top keeps a
 * report. */
static void
test_fragmentation (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) bufs = g_ptr_array_new ();
  g_autofree char *snapshot = NULL;
  MemresResource *cache, *dmr;

  if (!mt_require_fake ("fills the fake's 64 MiB device"))
    return;
  mr = mt_new_ok ("retry>cache:front=0>dmr:pool=new");
  cache = memres_resource_get_upstream (mr);
  dmr = memres_resource_get_upstream (cache);
  for (guint i = 0; i < 512; i++)
    {
      MemresBuffer *buf = memres_resource_allocate (mr, 128 * KIB, NULL, &error);

      g_assert_no_error (error);
      g_ptr_array_add (bufs, buf);
    }
  g_assert_cmpuint (device_free (), ==, 0);
  for (guint i = 0; i < bufs->len; i += 2)
    mt_close_ok (bufs->pdata[i], NULL);

  error = allocate_oom (mr, 1 * MIB);
  assert_contains (error->message, "Out of memory, fragmentation: 32 MiB free in `cache`, "
                                   "largest block 128 KiB, request 1 MiB.");
  assert_contains (error->message, "Held: `cache` holds 64 MiB (32 MiB used, 32 MiB cached, "
                                   "largest free block 128 KiB); `dmr` holds 64 MiB (64 MiB "
                                   "used, 0 bytes cached); device 0 has 0 bytes free of 64 MiB.");
  g_assert_true (g_str_has_suffix (
      error->message, "Remedy: the free blocks of `cache` up to 131072 bytes are carved from "
                      "chunks of 2097152 bytes, which go back to the memory below only whole: a "
                      "smaller `chunk`, or a kind below that maps memory where it is needed, "
                      "strands less."));
  /* built at the top only */
  g_assert_null (memres_resource_get_oom_report (cache));
  g_assert_null (memres_resource_get_oom_report (dmr));
  g_assert_null (memres_resource_get_oom_snapshot (cache));
  g_assert_null (memres_resource_get_oom_snapshot (dmr));
  /* the snapshot at the failure: the cache's free blocks of 128 KiB, 32 MiB of them */
  snapshot = memres_resource_get_oom_snapshot (mr);
  g_assert_nonnull (snapshot);
  g_test_message ("%.2000s", snapshot);
  assert_contains (snapshot, "\"kind\": \"cache\"");
  /* with its report */
  assert_contains (snapshot, "\"oom_report\": \"");
  assert_contains (snapshot, "Out of memory, fragmentation");
  assert_contains (snapshot, "\"cached\": 33554432");
  assert_contains (snapshot, "\"largest_free\": 131072");
  assert_contains (snapshot, "\"driver\": {\n    \"free\": 0,\n    \"total\": 67108864\n  }");
  assert_contains (snapshot, "\"size\": 131072,\n          \"stream\": \"legacy\",\n"
                             "          \"tag\": \"\",\n          \"state\": \"free\"");

  for (guint i = 1; i < bufs->len; i += 2)
    mt_close_ok (bufs->pdata[i], NULL);
}

/* An out-of-memory error that a layer catches below the top and recovers from is no report: a
 * cache over a limit that its free blocks fill flushes them and tries again (under retry, which
 * would try again too), and the allocation succeeds with no report kept on any layer and no
 * snapshot file written (MEMRES_OOM_SNAPSHOT set). */
static void
test_rescued_below (void)
{
  static const char *const specs[]
      = { "cache:front=0>limit:max=48MiB>host", "retry>cache:front=0>limit:max=48MiB>host" };
  g_autofree char *dir = g_dir_make_tmp ("memres-oom-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "oom.json", NULL);

  g_setenv ("MEMRES_OOM_SNAPSHOT", path, TRUE);
  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      MemresResource *cache = i == 0 ? mr : memres_resource_get_upstream (mr);
      MemresStats stats;
      MemresBuffer *buf;

      /* 40 MiB held free by the cache under a limit of 48: 45 MiB fits once it let go */
      mt_close_ok (mt_alloc_ok (mr, 40 * MIB, NULL), NULL);
      g_assert_true (memres_resource_get_stats (cache, &stats, NULL));
      g_assert_cmpuint (stats.reserved_current, ==, 40 * MIB);
      buf = mt_alloc_ok (mr, 45 * MIB, NULL);
      /* the limit refused it below the cache until the cache let go of its 40 MiB: it holds the
       * new block alone (its class, 48 MiB) */
      g_assert_true (memres_resource_get_stats (cache, &stats, NULL));
      g_assert_cmpuint (stats.reserved_current, ==, 48 * MIB);
      for (MemresResource *l = mr; l != NULL; l = memres_resource_get_upstream (l))
        {
          g_assert_null (memres_resource_get_oom_report (l));
          g_assert_null (memres_resource_get_oom_snapshot (l));
        }
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      mt_close_ok (buf, NULL);
    }
  g_unsetenv ("MEMRES_OOM_SNAPSHOT");
  g_rmdir (dir);
}

/* A size no memory has, refused before any kind is called: a report all the same, whose
 * verdict is the size itself (before: "exhausted", with a trim for remedy; under a `limit`,
 * "limit", with "raise the limit"), and whose remedy is to look at how it was computed. */
static void
test_oversized (void)
{
  static const char *const specs[] = { "host", "limit:max=1MiB>host", "retry>cache>host" };

  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      g_autoptr (GError) error = allocate_oom (mr, (gsize) G_MAXSSIZE + 1);

      assert_contains (error->message, "Out of memory, too large: the request of 8 EiB is more "
                                       "than any memory holds (at most 2^63 - 1 bytes). Held: ");
      g_assert_true (g_str_has_suffix (
          error->message, "Remedy: check how the size was computed: a negative or overflowed "
                          "count read as an unsigned size asks for this much."));
      g_assert_null (strstr (error->message, "trim"));
      g_assert_null (strstr (error->message, "raise the limit"));
    }
}

/* Sizes that read as whole in no unit are given in exact bytes: 2^64 - 1 was "16384.0 PiB"
 * (15.99... EiB, one decimal "16.0", stepped down a unit where it reads as whole again). One
 * that reads as whole only in the larger unit is given in the smaller (16383.5 PiB). */
static void
test_oversized_words (void)
{
  static const struct
  {
    gsize size;
    const char *words;
  } cases[] = {
    { G_MAXSIZE, "the request of 18446744073709551615 bytes (16.0 EiB) is more" },
    { ((gsize) 12 << 60) - 1, "the request of 13835058055282163711 bytes (12.0 EiB) is more" },
    { G_MAXSIZE - ((gsize) 1 << 49) + 1, "the request of 16383.5 PiB is more" },
    { (gsize) 9 << 60, "the request of 9 EiB is more" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok ("host");
      g_autoptr (GError) error = allocate_oom (mr, cases[i].size);

      assert_contains (error->message, cases[i].words);
      g_assert_null (strstr (error->message, "16384.0"));
    }
}

/* A request larger than the whole device (64 MiB on the fake): no trim, raised limit, address
 * space or other kind makes it fit, whatever the stack (before: "exhausted: the device has 64
 * MiB free of 64 MiB, request 100 MiB", with a trim for remedy; under a limit above it, and the
 * arena's reservation, the same). One the device could hold is still exhausted. */
static void
test_larger_than_device (void)
{
  static const char *const specs[] = {
    "dmr:pool=new",    "limit:max=1GiB>cache>dmr:pool=new",  "retry>cache>arena",
    "stats>track>vmm", "cache:front=0>limit:max=128MiB>vmm",
  };

  if (!mt_require_fake ("the fake's device of 64 MiB"))
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      g_autoptr (GError) error = allocate_oom (mr, 100 * MIB);
      g_autoptr (GError) full = NULL;
      MemresBuffer *buf;

      assert_contains (error->message, "Out of memory, too large: the request of 100 MiB is "
                                       "more than the device has in all (64 MiB). Held: ");
      assert_contains (error->message, "device 0 has 64 MiB free of 64 MiB.");
      g_assert_true (g_str_has_suffix (
          error->message, "Remedy: no trim or kind makes the device larger: split the request "
                          "into pieces the device can hold, or use memory that can exceed the "
                          "device's (managed memory, or page-locked host memory)."));
      g_assert_null (strstr (error->message, "trim ("));
      /* half the device in use, a request of the whole one: exhausted, not too large */
      buf = mt_alloc_ok (mr, 32 * MIB, NULL);
      full = allocate_oom (mr, 64 * MIB);
      g_assert_null (strstr (full->message, "too large"));
      mt_close_ok (buf, NULL);
    }
  /* page-locked host memory is not the device's: never judged against its total */
  {
    g_autoptr (MemresResource) mr = mt_new_ok ("pinned:device=0");
    MemresBuffer *buf = mt_alloc_ok (mr, 100 * MIB, NULL);

    mt_close_ok (buf, NULL);
  }
}

/* A request of host memory larger than the host's memory and swap together (1 PiB, more than
 * any machine's, and past the 128 TiB of a process's address space): no trim or kind serves it
 * (before: "exhausted: `host` could not get 1 PiB", with a trim for remedy), whatever the
 * stack. */
static void
test_larger_than_host (void)
{
  static const char *const specs[]
      = { "host", "limit:max=2PiB>host", "retry>cache>host", "stats>track>host" };

#if defined(__SANITIZE_ADDRESS__)
  /* its allocator aborts the process on a request past its maximum instead of failing (as
   * conformance-failures.c's 1 PiB case says) */
  g_test_skip ("AddressSanitizer aborts on a posix_memalign() of 1 PiB");
  return;
#endif
  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      g_autoptr (GError) error = allocate_oom (mr, (gsize) 1 << 50);

      assert_contains (error->message, "Out of memory, too large: the request of 1 PiB is more "
                                       "than the host has in all (");
      assert_contains (error->message, " of memory and swap). Held: ");
      g_assert_true (g_str_has_suffix (
          error->message, "Remedy: no trim or kind makes the host larger: split the request "
                          "into pieces the host can hold, or look at how its size was "
                          "computed."));
      g_assert_null (strstr (error->message, "exhausted"));
      g_assert_null (strstr (error->message, "trim ("));
    }
}

/* The last report is the last one: a later failure replaces it. */
static void
test_last (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("limit:max=1MiB>host");
  g_autoptr (GError) first = NULL;
  g_autoptr (GError) second = NULL;
  g_autofree char *report = NULL;

  first = allocate_oom (mr, 2 * MIB);
  second = allocate_oom (mr, 3 * MIB);
  report = memres_resource_get_oom_report (mr);
  g_assert_cmpstr (report, ==, second->message);
  assert_contains (report, "limit: allocating 3145728 bytes");
  /* no error asked for: the report is kept all the same */
  g_assert_null (memres_resource_allocate (mr, 4 * MIB, NULL, NULL));
  g_free (report);
  report = memres_resource_get_oom_report (mr);
  assert_contains (report, "limit: allocating 4194304 bytes");
  assert_contains (report, "Out of memory, limit: `limit` allows 1 MiB, 0 bytes in use.");
}

/* The snapshot at the failure: kept beside the report (replaced by the next one) and written
 * to the file MEMRES_OOM_SNAPSHOT names, %p its process id, through a symbolic link to the file
 * it leads to (the link kept); a FIFO is refused with a warning and stays a FIFO. */
static void
test_snapshot_file (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("limit:max=1MiB>host");
  g_autoptr (GError) error = NULL;
  g_autofree char *dir = g_dir_make_tmp ("memres-oom-XXXXXX", NULL);
  g_autofree char *pattern = g_build_filename (dir, "oom-%p.json", NULL);
  g_autofree char *pid = g_strdup_printf ("oom-%d.json", (int) getpid ());
  g_autofree char *path = g_build_filename (dir, pid, NULL);
  g_autofree char *kept = NULL;
  g_autofree char *written = NULL;

  g_assert_null (memres_resource_get_oom_snapshot (mr));
  g_setenv ("MEMRES_OOM_SNAPSHOT", pattern, TRUE);
  error = allocate_oom (mr, 2 * MIB);
  g_unsetenv ("MEMRES_OOM_SNAPSHOT");
  kept = memres_resource_get_oom_snapshot (mr);
  g_assert_nonnull (kept);
  assert_contains (kept, "\"spec\": \"limit:max=1MiB>host:alignment=256\"");
  assert_contains (kept, "\"limit\": 1048576");
  g_assert_true (g_file_get_contents (path, &written, NULL, NULL));
  g_assert_cmpstr (written, ==, kept);
  g_remove (path);

  /* a symbolic link is followed: the file it leads to gets the snapshot, the link stays */
  {
    g_autofree char *link = g_build_filename (dir, "latest.json", NULL);
    g_autofree char *target = g_build_filename (dir, "target.json", NULL);
    g_autofree char *through = NULL;
    struct stat st;

    g_assert_cmpint (symlink ("target.json", link), ==, 0);
    g_assert_true (g_file_set_contents (target, "old", -1, NULL));
    g_setenv ("MEMRES_OOM_SNAPSHOT", link, TRUE);
    g_clear_error (&error);
    error = allocate_oom (mr, 2 * MIB);
    g_unsetenv ("MEMRES_OOM_SNAPSHOT");
    g_assert_cmpint (lstat (link, &st), ==, 0);
    g_assert_true (S_ISLNK (st.st_mode));
    g_assert_true (g_file_get_contents (target, &through, NULL, NULL));
    assert_contains (through, "\"memres_snapshot\": 1");
    g_remove (link);
    g_remove (target);
  }
  g_rmdir (dir);

  /* a file that cannot be written: a warning, and the error stays the allocation's */
  g_setenv ("MEMRES_OOM_SNAPSHOT", "/nonexistent/dir/oom.json", TRUE);
  if (g_test_subprocess ())
    {
      g_clear_error (&error);
      error = allocate_oom (mr, 3 * MIB);
      return;
    }
  g_unsetenv ("MEMRES_OOM_SNAPSHOT");
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_failed ();
  g_test_trap_assert_stderr ("*cannot write the out-of-memory snapshot to MEMRES_OOM_SNAPSHOT*");
}

static void
test_snapshot_fifo (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *fifo = NULL;
  struct stat st;

  if (g_test_subprocess ())
    {
      g_autoptr (MemresResource) mr = mt_new_ok ("limit:max=1MiB>host");
      g_autoptr (GError) error = NULL;

      g_setenv ("MEMRES_OOM_SNAPSHOT", g_getenv ("MEMRES_TEST_FIFO"), TRUE);
      error = allocate_oom (mr, 2 * MIB);
      return;
    }
  dir = g_dir_make_tmp ("memres-oom-XXXXXX", NULL);
  fifo = g_build_filename (dir, "fifo", NULL);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_setenv ("MEMRES_TEST_FIFO", fifo, TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_unsetenv ("MEMRES_TEST_FIFO");
  g_test_trap_assert_failed (); /* the warning, fatal in a test */
  g_test_trap_assert_stderr ("*cannot write the out-of-memory snapshot to MEMRES_OOM_SNAPSHOT*"
                             "not a regular file but a FIFO*");
  g_assert_cmpint (lstat (fifo, &st), ==, 0);
  g_assert_true (S_ISFIFO (st.st_mode));
  g_remove (fifo);
  g_rmdir (dir);
}

/* MEMRES_OOM_SNAPSHOT naming the file of a log layer of the stack that failed: the snapshot is
 * not written over the log (it was: renamed over it, the log's allocate failure and out of
 * memory lines went to a file no name reached), a warning says why, the log stays whole. */
static void
test_snapshot_on_log (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *log = NULL;
  g_autofree char *text = NULL;

  if (g_test_subprocess ())
    {
      g_autofree char *spec = g_strdup_printf ("log:path=%s,flush=true>limit:max=1MiB>host",
                                               g_getenv ("MEMRES_TEST_LOG"));
      g_autoptr (MemresResource) mr = mt_new_ok (spec);
      g_autoptr (GError) error = NULL;

      g_setenv ("MEMRES_OOM_SNAPSHOT", g_getenv ("MEMRES_TEST_LOG"), TRUE);
      error = allocate_oom (mr, 2 * MIB);
      return;
    }
  dir = g_dir_make_tmp ("memres-oom-XXXXXX", NULL);
  log = g_build_filename (dir, "alloc.csv", NULL);
  g_setenv ("MEMRES_TEST_LOG", log, TRUE);
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_unsetenv ("MEMRES_TEST_LOG");
  g_test_trap_assert_failed (); /* the warning, fatal in a test */
  g_test_trap_assert_stderr ("*cannot write the out-of-memory snapshot to MEMRES_OOM_SNAPSHOT*"
                             "locked*");
  g_assert_true (g_file_get_contents (log, &text, NULL, NULL));
  g_assert_true (g_str_has_prefix (text, "Thread,Time,Action,Pointer,Size,Stream\n"));
  assert_contains (text, ",allocate failure,0x0,2097152,");
  g_remove (log);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  /* the fake's device: small enough to fill (read when the driver loads) */
  g_setenv ("FAKECUDA_DEVICE_MEMORY", "64M", TRUE);
  mt_init (&argc, &argv);
  g_test_add_func ("/oom-report/limit", test_limit);
  g_test_add_func ("/oom-report/limit-rounded", test_limit_rounded);
  g_test_add_data_func ("/oom-report/pool-max-size/dmr", "dmr:pool=new,max_size=4MiB",
                        test_pool_max_size);
  g_test_add_data_func ("/oom-report/pool-max-size/ipc", "ipc:max_size=4MiB", test_pool_max_size);
  g_test_add_data_func ("/oom-report/pool-max-size/stats-dmr", "stats>dmr:pool=new,max_size=4MiB",
                        test_pool_max_size);
  g_test_add_func ("/oom-report/exhausted", test_exhausted);
  g_test_add_func ("/oom-report/exhausted-granule", test_exhausted_granule);
  g_test_add_func ("/oom-report/fragmentation", test_fragmentation);
  g_test_add_func ("/oom-report/rescued-below", test_rescued_below);
  g_test_add_func ("/oom-report/oversized", test_oversized);
  g_test_add_func ("/oom-report/oversized-words", test_oversized_words);
  g_test_add_func ("/oom-report/larger-than-device", test_larger_than_device);
  g_test_add_func ("/oom-report/larger-than-host", test_larger_than_host);
  g_test_add_func ("/oom-report/last", test_last);
  g_test_add_func ("/oom-report/snapshot-file", test_snapshot_file);
  g_test_add_func ("/oom-report/snapshot-fifo", test_snapshot_fifo);
  g_test_add_func ("/oom-report/snapshot-on-log", test_snapshot_on_log);
  return g_test_run ();
}

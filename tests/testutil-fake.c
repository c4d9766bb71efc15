/* testutil-fake.c: the test programs' helpers for the driver (see testutil.h): the fake's controls
 * (loaded with dlsym: counts, faults, traces, attributes, the asynchronous mode), devices, fault
 * sweeps, the driver's entry points by name, stream holds and peers. */
#define _GNU_SOURCE /* struct ucred */
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The fake's control functions, resolved once from the library MEMRES_CUDA_DRIVER names. */
typedef struct
{
  void (*get_counts) (FakeCudaCounts *counts);
  void (*fail_call) (const char *entry, int nth, CUresult result);
  void (*reset_faults) (void);
  void (*trace_begin) (void);
  int (*trace_end) (const char ***names);
  void (*set_attribute) (int device, CUdevice_attribute attr, int value);
  long (*call_count) (const char *entry);
  /* the asynchronous stream mode (optional: a fake without them has none) */
  void (*set_async) (int on);
  int (*get_async) (void);
  void (*wait_idle) (void);
  long (*failed_call_count) (void);
} MtFake;

static gpointer
load_fake (gpointer data)
{
  MtFake *fake = g_new0 (MtFake, 1);
  const char *path = g_getenv ("MEMRES_CUDA_DRIVER");
  void *handle;

  if (path == NULL || path[0] == '\0')
    return fake;
  /* The core may have loaded it already; otherwise load it now (the core's dlopen() of the same
   * path later gets this same copy). */
  handle = dlopen (path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL)
    handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    return fake;
  fake->get_counts = (void (*) (FakeCudaCounts *)) dlsym (handle, "fakecuda_get_counts");
  fake->fail_call = (void (*) (const char *, int, CUresult)) dlsym (handle, "fakecuda_fail_call");
  fake->reset_faults = (void (*) (void)) dlsym (handle, "fakecuda_reset_faults");
  fake->trace_begin = (void (*) (void)) dlsym (handle, "fakecuda_trace_begin");
  fake->trace_end = (int (*) (const char ***)) dlsym (handle, "fakecuda_trace_end");
  fake->set_attribute
      = (void (*) (int, CUdevice_attribute, int)) dlsym (handle, "fakecuda_set_attribute");
  fake->call_count = (long (*) (const char *)) dlsym (handle, "fakecuda_call_count");
  if (fake->get_counts == NULL || fake->fail_call == NULL || fake->reset_faults == NULL
      || fake->trace_begin == NULL || fake->trace_end == NULL || fake->set_attribute == NULL
      || fake->call_count == NULL)
    memset (fake, 0, sizeof *fake);
  else
    {
      fake->set_async = (void (*) (int)) dlsym (handle, "fakecuda_set_async");
      fake->get_async = (int (*) (void)) dlsym (handle, "fakecuda_get_async");
      fake->wait_idle = (void (*) (void)) dlsym (handle, "fakecuda_wait_idle");
      fake->failed_call_count = (long (*) (void)) dlsym (handle, "fakecuda_failed_call_count");
    }
  return fake;
}

static const MtFake *
get_fake (void)
{
  static GOnce once = G_ONCE_INIT;

  return g_once (&once, load_fake, NULL);
}

const MemresCudaDriver *
mt_driver (void)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *d = memres_cuda_get_driver (&error);

  g_assert_no_error (error);
  g_assert_nonnull (d);
  return d;
}

gboolean
mt_driver_is_fake (void)
{
  return get_fake ()->get_counts != NULL;
}

gboolean
mt_require_fake (const char *why)
{
  if (mt_driver_is_fake ())
    return TRUE;
  g_test_skip (why);
  return FALSE;
}

/* The fake's control functions, or a failed test when the driver is not the fake. */
static const MtFake *
require_fake (const char *what)
{
  const MtFake *fake = get_fake ();

  if (fake->get_counts == NULL)
    g_error ("%s needs the fake CUDA driver (MEMRES_CUDA_DRIVER=%s)", what,
             g_getenv ("MEMRES_CUDA_DRIVER") ? g_getenv ("MEMRES_CUDA_DRIVER") : "(unset)");
  return fake;
}

gboolean
mt_require_devices (int n)
{
  g_autoptr (GError) error = NULL;
  gint count = 0;

  if (memres_cuda_get_driver (&error) == NULL || !memres_cuda_get_device_count (&count, &error))
    {
      if (mt_driver_is_fake ())
        g_test_fail_printf ("The fake CUDA driver did not load: %s", error->message);
      else
        g_test_skip_printf ("No CUDA driver: %s", error->message);
      return FALSE;
    }
  if (count < n)
    {
      if (mt_driver_is_fake ())
        g_test_fail_printf ("The fake CUDA driver has %d devices, the test needs %d "
                            "(set FAKECUDA_DEVICES before the driver loads)",
                            count, n);
      else
        g_test_skip_printf ("The test needs device %d (%d CUDA devices), this machine has %d",
                            n - 1, n, count);
      return FALSE;
    }
  return TRUE;
}

void
mt_fake_get_counts (FakeCudaCounts *counts)
{
  require_fake ("mt_fake_get_counts")->get_counts (counts);
}

void
mt_fake_counts_begin (FakeCudaCounts *base)
{
  memset (base, 0, sizeof *base);
  if (mt_driver_is_fake ())
    mt_fake_get_counts (base);
}

int
mt_device_attribute (CUdevice_attribute attr)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&error);
  CUdevice dev;
  int value = 0;

  g_assert_no_error (error);
  g_assert_cmpint (drv->cuDeviceGet (&dev, 0), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuDeviceGetAttribute (&value, attr, dev), ==, CUDA_SUCCESS);
  return value;
}

void
mt_override_attribute (MtSavedAttribute *saved, CUdevice_attribute attr, int value)
{
  saved->attr = attr;
  saved->value = mt_device_attribute (attr);
  mt_fake_set_attribute (0, attr, value);
}

void
mt_restore_attribute (const MtSavedAttribute *saved)
{
  mt_fake_set_attribute (0, saved->attr, saved->value);
}

gsize
mt_device_granularity (void)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  CUmemAllocationProp prop = { 0 };
  size_t value = 0;

  g_assert_nonnull (drv);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  g_assert_cmpint (
      drv->cuMemGetAllocationGranularity (&value, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), ==,
      CUDA_SUCCESS);
  return value;
}

void
mt_fake_fail_call (const char *entry, int nth, CUresult result)
{
  require_fake ("mt_fake_fail_call")->fail_call (entry, nth, result);
}

void
mt_fake_reset_faults (void)
{
  require_fake ("mt_fake_reset_faults")->reset_faults ();
}

void
mt_fake_set_attribute (int device, CUdevice_attribute attr, int value)
{
  require_fake ("mt_fake_set_attribute")->set_attribute (device, attr, value);
}

long
mt_fake_call_count (const char *entry)
{
  return require_fake ("mt_fake_call_count")->call_count (entry);
}

void
mt_fake_set_async (gboolean on)
{
  const MtFake *fake = require_fake ("mt_fake_set_async");

  if (fake->set_async == NULL)
    g_error ("this fake CUDA driver has no asynchronous stream mode");
  fake->set_async (on);
}

gboolean
mt_fake_is_async (void)
{
  const MtFake *fake = get_fake ();

  return fake->get_async != NULL && fake->get_async ();
}

void
mt_fake_wait_idle (void)
{
  const MtFake *fake = get_fake ();

  if (fake->wait_idle != NULL)
    fake->wait_idle ();
}

long
mt_fake_failed_call_count (void)
{
  const MtFake *fake = require_fake ("mt_fake_failed_call_count");

  if (fake->failed_call_count == NULL)
    g_error ("this fake CUDA driver does not count failed calls");
  return fake->failed_call_count ();
}

void
mt_fake_trace_begin (void)
{
  require_fake ("mt_fake_trace_begin")->trace_begin ();
}

int
mt_fake_trace_end (const char ***names)
{
  return require_fake ("mt_fake_trace_end")->trace_end (names);
}

char **
mt_fake_trace_end_strv (int *n)
{
  const char **names = NULL;
  char **calls;

  *n = require_fake ("mt_fake_trace_end")->trace_end (&names);
  calls = g_new0 (char *, *n + 1);
  for (int i = 0; i < *n; i++)
    calls[i] = g_strdup (names[i]);
  return calls;
}

char *
mt_fake_trace_end_string (void)
{
  const char **names = NULL;
  int n = require_fake ("mt_fake_trace_end")->trace_end (&names);
  GString *s = g_string_new (NULL);

  for (int i = 0; i < n; i++)
    g_string_append_printf (s, "%s%s", i ? " " : "", names[i]);
  return g_string_free (s, FALSE);
}

#define MT_FOREACH_COUNT(X)                                                                        \
  X (pools)                                                                                        \
  X (pool_allocations)                                                                             \
  X (allocations)                                                                                  \
  X (reservations)                                                                                 \
  X (mappings)                                                                                     \
  X (physical_handles)                                                                             \
  X (exported_fds)                                                                                 \
  X (streams)                                                                                      \
  X (events)                                                                                       \
  X (graphs)                                                                                       \
  X (graph_execs)                                                                                  \
  X (graph_allocations)

void
mt_assert_fake_counts_equal (const FakeCudaCounts *baseline)
{
  FakeCudaCounts now;

  if (!mt_driver_is_fake ())
    return;
  mt_fake_wait_idle ();
  mt_fake_get_counts (&now);
#define MT_CMP_(field) g_assert_cmpint (now.field, ==, baseline->field);
  MT_FOREACH_COUNT (MT_CMP_)
#undef MT_CMP_
}

/* "field a→b, ..." for the counts that differ, or NULL. */
static char *
counts_diff (const FakeCudaCounts *a, const FakeCudaCounts *b)
{
  GString *s = g_string_new (NULL);

#define MT_DIFF_(field)                                                                            \
  if (a->field != b->field)                                                                        \
    g_string_append_printf (s, "%s%s %d -> %d", s->len ? ", " : "", #field, a->field, b->field);
  MT_FOREACH_COUNT (MT_DIFF_)
#undef MT_DIFF_
  if (s->len == 0)
    {
      g_string_free (s, TRUE);
      return NULL;
    }
  return g_string_free (s, FALSE);
}

static gboolean
ignored (const char *entry, int nth, const char *const *ignore)
{
  g_autofree char *numbered = g_strdup_printf ("%s#%d", entry, nth);

  /* Error names and texts only build messages; failing them fails nothing. */
  if (g_str_equal (entry, "cuGetErrorName") || g_str_equal (entry, "cuGetErrorString")
      || g_str_equal (entry, "cuGetProcAddress"))
    return TRUE;
  return ignore != NULL
         && (g_strv_contains ((const char *const *) ignore, entry)
             || g_strv_contains ((const char *const *) ignore, numbered));
}

int
mt_call_ordinal (char *const *calls, guint i)
{
  int nth = 0;

  for (guint j = 0; j <= i; j++)
    nth += g_str_equal (calls[j], calls[i]);
  return nth;
}

/* Runs @op expecting success, then @undo. */
static void
sweep_run_ok (const char *what, const char *when, MtOp op, MtUndo undo, gpointer data)
{
  g_autoptr (GError) error = NULL;

  if (!op (data, &error))
    g_error ("mt_fault_sweep(%s): the operation failed %s: %s", what, when,
             error ? error->message : "(no error set)");
  g_assert_no_error (error);
  if (undo != NULL)
    undo (data);
}

int
mt_fault_sweep (const char *what, MtOp op, MtUndo undo, gpointer data, CUresult code,
                const char *const *ignore)
{
  const MtFake *fake;
  g_auto (GStrv) calls = NULL;
  FakeCudaCounts base;
  int n, swept = 0;

  if (!mt_driver_is_fake ())
    {
      g_test_skip ("fault sweeps need the fake CUDA driver");
      return 0;
    }
  fake = get_fake ();
  if (code == 0)
    code = CUDA_ERROR_OUT_OF_MEMORY;
  fake->reset_faults ();

  /* A first run settles one-time work (driver load, contexts, caches); the second one, traced,
   * lists the calls every later run makes. */
  sweep_run_ok (what, "on its first run", op, undo, data);
  fake->trace_begin ();
  {
    g_autoptr (GError) error = NULL;
    gboolean ok = op (data, &error);

    calls = mt_fake_trace_end_strv (&n);
    if (!ok)
      g_error ("mt_fault_sweep(%s): the operation failed on its traced run: %s", what,
               error ? error->message : "(no error set)");
    if (undo != NULL)
      undo (data);
  }
  mt_fake_wait_idle ();
  fake->get_counts (&base);

  for (int i = 0; i < n; i++)
    {
      g_autoptr (GError) error = NULL;
      g_autofree char *diff = NULL;
      FakeCudaCounts now;
      int nth = mt_call_ordinal (calls, i);
      long before;
      gboolean ok;

      if (ignored (calls[i], nth, ignore))
        continue;
      g_test_message ("%s: failing call %d of %d, %s (its call %d in the operation)", what, i + 1,
                      n, calls[i], nth);
      before = fake->call_count (calls[i]);
      fake->fail_call (calls[i], nth, code);
      ok = op (data, &error);
      fake->fail_call (calls[i], 0, CUDA_SUCCESS);
      if (ok)
        g_error ("mt_fault_sweep(%s): the operation succeeded although call %d (%s #%d) failed "
                 "with %d%s",
                 what, i + 1, calls[i], nth, code,
                 fake->call_count (calls[i]) < before + nth ? " (the call was not made)" : "");
      if (!mt_error_is_cuda (error, code))
        g_error ("mt_fault_sweep(%s): failing call %d (%s #%d) with %d gave %s %d: %s", what, i + 1,
                 calls[i], nth, code, g_quark_to_string (error->domain), error->code,
                 error->message);
      mt_fake_wait_idle ();
      fake->get_counts (&now);
      diff = counts_diff (&base, &now);
      if (diff != NULL)
        g_error ("mt_fault_sweep(%s): failing call %d (%s #%d) leaked: %s", what, i + 1, calls[i],
                 nth, diff);
      sweep_run_ok (what, "again after a failed run", op, undo, data);
      swept++;
    }
  return swept;
}

void
mt_counts_snapshot (FakeCudaCounts *base)
{
  memset (base, 0, sizeof *base);
  if (mt_driver_is_fake ())
    {
      mt_fake_wait_idle ();
      mt_fake_get_counts (base);
    }
}

/* Driver entry points outside memres's table */

gpointer
mt_driver_proc (const char *name)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);
  CUresult (*get_proc) (const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  void *handle, *fn = NULL;

  if (drv == NULL)
    return NULL;
  /* The core has the library open already: this finds its copy. */
  handle = dlopen (drv->path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL)
    return NULL;
  get_proc
      = (CUresult (*) (const char *, void **, int, cuuint64_t,
                       CUdriverProcAddressQueryResult *)) dlsym (handle, "cuGetProcAddress_v2");
  if (get_proc == NULL
      || get_proc (name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS
      || status != CU_GET_PROC_ADDRESS_SUCCESS)
    fn = NULL;
  dlclose (handle);
  return fn;
}

/* Holding a stream */

struct _MtStreamHold
{
  MemresStream stream;
  volatile guint32 *flag; /* the word the wait reads, page-locked and mapped */
  gint slot;              /* its index in the real driver's slab, or -1 (its own allocation) */
  CUevent behind;         /* recorded on the stream right after the wait */
  gboolean released;
};

typedef CUresult (*MtWaitValue32) (CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*MtEventQuery) (CUevent);

/* On the real driver the flag words come from one page-locked slab allocated once for the
 * process and never freed: cuMemFreeHost waits for the whole device and cuMemHostAlloc may,
 * so a thread allocating or freeing its flag while another thread's stream is held waits for
 * that hold, which can wait for the first thread (the threaded hold tests hung on the H200
 * that way). The fake has no such waits, and counts every host allocation, so there each hold
 * has a word of its own, freed on release. */
#define MT_HOLD_SLOTS 1024

static struct
{
  GMutex lock;
  const MemresCudaDriver *drv; /* the driver the slab is from */
  volatile guint32 *words;
  CUdeviceptr device_words;
  gboolean used[MT_HOLD_SLOTS];
} hold_slab;

static void
hold_take_word (MtStreamHold *hold, const MemresCudaDriver *drv, CUdeviceptr *dptr)
{
  void *host = NULL;

  if (mt_driver_is_fake ())
    {
      g_assert_cmpint (
          drv->cuMemHostAlloc (&host, 4, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP), ==,
          CUDA_SUCCESS);
      g_assert_cmpint (drv->cuMemHostGetDevicePointer (dptr, host, 0), ==, CUDA_SUCCESS);
      hold->flag = host;
      hold->slot = -1;
      return;
    }
  g_mutex_lock (&hold_slab.lock);
  if (hold_slab.drv != drv)
    {
      /* a driver loaded anew: the old slab (if any) stays allocated, in the old driver */
      g_assert_cmpint (drv->cuMemHostAlloc (&host, MT_HOLD_SLOTS * sizeof (guint32),
                                            CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                       ==, CUDA_SUCCESS);
      g_assert_cmpint (drv->cuMemHostGetDevicePointer (&hold_slab.device_words, host, 0), ==,
                       CUDA_SUCCESS);
      hold_slab.words = host;
      hold_slab.drv = drv;
      memset (hold_slab.used, 0, sizeof hold_slab.used);
    }
  hold->slot = -1;
  for (gint i = 0; i < MT_HOLD_SLOTS && hold->slot < 0; i++)
    if (!hold_slab.used[i])
      hold->slot = i;
  g_assert_cmpint (hold->slot, >=, 0);
  hold_slab.used[hold->slot] = TRUE;
  hold->flag = hold_slab.words + hold->slot;
  *dptr = hold_slab.device_words + (CUdeviceptr) hold->slot * sizeof (guint32);
  g_mutex_unlock (&hold_slab.lock);
}

/* After the stream is past the wait. */
static void
hold_give_word (MtStreamHold *hold, const MemresCudaDriver *drv)
{
  if (hold->slot < 0)
    {
      g_assert_cmpint (drv->cuMemFreeHost ((void *) hold->flag), ==, CUDA_SUCCESS);
      return;
    }
  g_mutex_lock (&hold_slab.lock);
  if (hold_slab.drv == drv)
    hold_slab.used[hold->slot] = FALSE;
  g_mutex_unlock (&hold_slab.lock);
}

MtStreamHold *
mt_stream_hold (MemresStream stream)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&error);
  MtWaitValue32 wait_value = (MtWaitValue32) mt_driver_proc ("cuStreamWaitValue32");
  MtStreamHold *hold = g_new0 (MtStreamHold, 1);
  CUdeviceptr dptr = 0;

  g_assert_no_error (error);
  g_assert_nonnull (wait_value);
  g_assert_true (memres_cuda_ensure_context (0, &error));
  g_assert_no_error (error);
  hold->stream = stream;
  /* Everything that may wait inside the driver comes before the wait is queued: once the stream
   * is held, this thread makes only the one cuEventRecord call until it returns. */
  hold_take_word (hold, drv, &dptr);
  g_assert_cmpint (drv->cuEventCreate (&hold->behind, CU_EVENT_DISABLE_TIMING), ==, CUDA_SUCCESS);
  *hold->flag = 0;
  __atomic_thread_fence (__ATOMIC_SEQ_CST);
  g_assert_cmpint (wait_value ((CUstream) stream, dptr, 1, CU_STREAM_WAIT_VALUE_GEQ), ==,
                   CUDA_SUCCESS);
  g_assert_cmpint (drv->cuEventRecord (hold->behind, (CUstream) stream), ==, CUDA_SUCCESS);
  return hold;
}

gboolean
mt_stream_is_held (MtStreamHold *hold)
{
  MtEventQuery query = (MtEventQuery) mt_driver_proc ("cuEventQuery");
  CUresult r;

  g_assert_nonnull (query);
  r = query (hold->behind);
  g_assert_true (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY);
  return r == CUDA_ERROR_NOT_READY;
}

void
mt_stream_release (MtStreamHold *hold)
{
  const MemresCudaDriver *drv = memres_cuda_get_driver (NULL);

  g_assert_false (hold->released);
  hold->released = TRUE;
  __atomic_store_n (hold->flag, 1, __ATOMIC_SEQ_CST);
  /* The stream is past the wait once the event behind it completes: then the flag may go. */
  g_assert_cmpint (drv->cuEventSynchronize (hold->behind), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuEventDestroy (hold->behind), ==, CUDA_SUCCESS);
  hold_give_word (hold, drv);
  g_free (hold);
}

gboolean
mt_require_stream_holds (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  if (mt_driver_is_fake () && !mt_fake_is_async ())
    {
      g_test_fail_printf ("holding a stream needs the fake's asynchronous mode "
                          "(mt_fake_set_async or FAKECUDA_ASYNC=1)");
      return FALSE;
    }
  if (mt_driver_proc ("cuStreamWaitValue32") == NULL || mt_driver_proc ("cuEventQuery") == NULL)
    {
      g_test_skip ("the driver has no cuStreamWaitValue32 or cuEventQuery");
      return FALSE;
    }
  return TRUE;
}

gboolean
mt_hazard_begin (void)
{
  if (!mt_require_devices (1))
    return FALSE;
  if (mt_driver_is_fake ())
    mt_fake_set_async (TRUE);
  if (!mt_require_stream_holds ())
    {
      if (mt_driver_is_fake ())
        mt_fake_set_async (FALSE);
      return FALSE;
    }
  return TRUE;
}

void
mt_hazard_end (void)
{
  if (mt_driver_is_fake ())
    mt_fake_set_async (FALSE);
}

void
mt_stream_free (CUstream stream)
{
  g_assert_cmpint (mt_driver ()->cuStreamSynchronize (stream), ==, CUDA_SUCCESS);
  g_assert_cmpint (mt_driver ()->cuStreamDestroy (stream), ==, CUDA_SUCCESS);
}

void
mt_capture_begin (CUstream stream)
{
  g_assert_cmpint (mt_driver ()->cuStreamBeginCapture (stream, CU_STREAM_CAPTURE_MODE_RELAXED), ==,
                   CUDA_SUCCESS);
}

CUgraph
mt_capture_end (CUstream stream)
{
  CUgraph graph = NULL;

  g_assert_cmpint (mt_driver ()->cuStreamEndCapture (stream, &graph), ==, CUDA_SUCCESS);
  g_assert_nonnull (graph);
  return graph;
}

void
mt_hazard_run (const MtHazard *h)
{
  g_autoptr (MemresResource) mr = NULL;
  MemresStream a, b;
  MemresBuffer *x, *y;
  MtStreamHold *hold;
  guint64 addr;

  if (!mt_hazard_begin ())
    return;
  b = mt_stream_new_on (0);
  a = h->kind == MT_HAZARD_LEGACY ? NULL : mt_stream_new_on (0);
  mr = mt_new_ok (h->spec);
  x = mt_alloc_ok (mr, h->size, a);
  mt_fill_byte_ok (x, 0x11, a);
  mt_sync_ok (a);
  addr = memres_buffer_get_address (x);

  hold = mt_stream_hold (a);
  mt_fill_byte_ok (x, 0xaa, a); /* waits behind the hold */
  mt_close_ok (x, a);
  if (h->kind == MT_HAZARD_DESTROYED)
    g_assert_cmpint (mt_driver ()->cuStreamDestroy (a), ==, CUDA_SUCCESS);
  y = mt_alloc_ok (mr, h->size, b);
  if (h->expect_reuse)
    g_assert_cmpuint (memres_buffer_get_address (y), ==, addr);
  mt_fill_byte_ok (y, 0xbb, b);
  g_assert_true (mt_stream_is_held (hold));
  mt_stream_release (hold);
  mt_assert_bytes (y, 0xbb, b);
  if (h->kind == MT_HAZARD_DESTROYED && h->fresh_stream)
    {
      /* a new stream (perhaps with a's handle, once a's work ran) gets correct memory too */
      CUstream c = mt_stream_new_on (0);
      MemresBuffer *z = mt_alloc_ok (mr, h->size, c);

      mt_fill_byte_ok (z, 0xcc, c);
      mt_assert_bytes (z, 0xcc, c);
      mt_close_ok (z, c);
      mt_stream_free (c);
    }
  mt_close_ok (y, b);
  mt_sync_ok (b);
  if (h->trim)
    {
      g_autoptr (GError) error = NULL;

      g_assert_true (memres_resource_trim (mr, 0, &error));
      g_assert_no_error (error);
    }
  g_clear_pointer (&mr, memres_resource_unref);
  if (a != NULL && h->kind != MT_HAZARD_DESTROYED)
    mt_stream_free (a);
  mt_stream_free (b);
  mt_hazard_end ();
}

gboolean
mt_require_peer_access (gint device, gint peer)
{
  const MemresCudaDriver *drv;
  CUdevice d, p;
  int can = 0;

  if (!mt_require_devices (MAX (device, peer) + 1))
    return FALSE;
  drv = memres_cuda_get_driver (NULL);
  g_assert_cmpint (drv->cuDeviceGet (&d, device), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuDeviceGet (&p, peer), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuDeviceCanAccessPeer (&can, p, d), ==, CUDA_SUCCESS);
  if (can)
    return TRUE;
  if (mt_driver_is_fake ())
    g_test_fail_printf ("fake device %d cannot access device %d", peer, device);
  else
    g_test_skip_printf ("device %d cannot access device %d's memory", peer, device);
  return FALSE;
}

CUstream
mt_stream_new_on (gint device)
{
  g_autoptr (GError) error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&error);
  CUcontext context, popped;
  CUstream stream = NULL;

  g_assert_no_error (error);
  g_assert_true (memres_cuda_get_primary_context (device, &context, &error));
  g_assert_no_error (error);
  g_assert_cmpint (drv->cuCtxPushCurrent (context), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuStreamCreate (&stream, CU_STREAM_NON_BLOCKING), ==, CUDA_SUCCESS);
  g_assert_cmpint (drv->cuCtxPopCurrent (&popped), ==, CUDA_SUCCESS);
  return stream;
}

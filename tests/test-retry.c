/* test-retry.c: the `retry` adaptor's own: its out-of-memory handlers (freeing memory,
 * answering, recursing, destroyed) and the default handler's trim (suites core, fake and gpu;
 * the in-test kind "tight": testutil-adaptors.c). */
#include "testutil.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>
#include "testutil-adaptors.h"

/* ---- retry ---- */

typedef struct
{
  MemresResource *mr;
  MemresBuffer *victim; /* closed by the handler that frees */
  gint calls;
  gint recursed_failures;
  gboolean answer;
} HandlerState;

static gboolean
frees_memory (MemresResource *mr, gsize size, guint attempt, const GError *why, gpointer data)
{
  HandlerState *s = data;

  s->calls++;
  g_assert_true (g_error_matches (why, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY));
  g_assert_cmpuint (size, >=, 500);
  if (s->victim == NULL)
    return FALSE;
  mt_close_ok (s->victim, NULL);
  s->victim = NULL;
  return TRUE;
}

static gboolean
answers (MemresResource *mr, gsize size, guint attempt, const GError *why, gpointer data)
{
  HandlerState *s = data;

  s->calls++;
  g_assert_cmpuint (attempt, ==, (guint) s->calls);
  return s->answer;
}

static gboolean
recurses (MemresResource *mr, gsize size, guint attempt, const GError *why, gpointer data)
{
  HandlerState *s = data;
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  s->calls++;
  /* allocating from the same retry layer inside the handler: out of memory again, it fails at
   * once instead of calling this handler again */
  buf = memres_resource_allocate (s->mr, size, NULL, &error);
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  s->recursed_failures++;
  return FALSE;
}

static gint n_destroyed;

static void
count_destroy (gpointer data)
{
  g_assert_nonnull (data);
  n_destroyed++;
}

static void
test_retry_handlers (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("retry:max_retries=3>limit:max=1000>host");
  HandlerState s = { .mr = mr };
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;
  guint id;

  /* a handler that frees memory: the retry succeeds */
  s.victim = mt_alloc_ok (mr, 800, NULL);
  id = memres_retry_add_handler (mr, frees_memory, &s, count_destroy, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (id, !=, 0);
  buf = mt_alloc_ok (mr, 500, NULL);
  g_assert_cmpint (s.calls, ==, 1);
  g_assert_null (s.victim);
  /* nothing left to free: it refuses, the allocation fails after one call */
  s.calls = 0;
  g_assert_null (memres_resource_allocate (mr, 600, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpint (s.calls, ==, 1);
  g_assert_cmpint (n_destroyed, ==, 0);
  g_assert_true (memres_retry_remove_handler (mr, id, &error));
  g_assert_cmpint (n_destroyed, ==, 1);

  /* a handler that refuses */
  s.calls = 0;
  s.answer = FALSE;
  id = memres_retry_add_handler (mr, answers, &s, NULL, &error);
  g_assert_null (memres_resource_allocate (mr, 600, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpint (s.calls, ==, 1);
  /* one that always says retry without freeing: bounded by max_retries */
  s.calls = 0;
  s.answer = TRUE;
  g_assert_null (memres_resource_allocate (mr, 600, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "after 4 attempts"));
  g_clear_error (&error);
  g_assert_cmpint (s.calls, ==, 3);
  g_assert_true (memres_retry_remove_handler (mr, id, &error));

  /* one that allocates from the same layer */
  s.calls = 0;
  id = memres_retry_add_handler (mr, recurses, &s, NULL, &error);
  g_assert_null (memres_resource_allocate (mr, 600, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpint (s.calls, ==, 1);
  g_assert_cmpint (s.recursed_failures, ==, 1);
  g_assert_true (memres_retry_remove_handler (mr, id, &error));

  mt_close_ok (buf, NULL);
}

/* Without handlers, retry trims the layers below and tries again. */
static void
test_retry_default_trims (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("retry>stats>tight:capacity=1000");
  TightResource *tight = memres_resource_get_private (
      memres_resource_get_upstream (memres_resource_get_upstream (mr)));
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  buf = mt_alloc_ok (mr, 800, NULL);
  mt_close_ok (buf, NULL); /* 800 bytes now cached by tight */
  buf = mt_alloc_ok (mr, 500, NULL);
  g_assert_cmpint (tight->trims, ==, 1);
  mt_close_ok (buf, NULL);
  /* nothing to gain: trimmed again, still out of memory */
  g_assert_null (memres_resource_allocate (mr, 2000, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
}

/* Only an out-of-memory is retried (as RMM's failure callback adaptor catches its one exception
 * type and lets others through): a driver error that is not one reaches the caller as it is,
 * after one attempt, with no handler called and nothing trimmed; an out-of-memory of the same
 * call is retried and, the fault gone, succeeds. */
static void
test_retry_other_errors (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  HandlerState s = { .answer = TRUE };
  long calls;
  guint id;

  if (!mt_require_fake ("fault injection") || !mt_require_devices (1))
    return;
  mr = mt_new_ok ("retry>dmr:pool=new");
  s.mr = mr;
  id = memres_retry_add_handler (mr, answers, &s, NULL, &error);
  g_assert_no_error (error);
  calls = mt_fake_call_count ("cuMemAllocFromPoolAsync");
  mt_fake_fail_call ("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_INVALID_VALUE);
  g_assert_null (memres_resource_allocate (mr, 4096, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_INVALID_VALUE);
  g_assert_null (strstr (error->message, "attempt"));
  g_clear_error (&error);
  g_assert_cmpint (s.calls, ==, 0);
  g_assert_cmpint (mt_fake_call_count ("cuMemAllocFromPoolAsync") - calls, ==, 1);
  /* an out-of-memory: the handler is called once, and the second attempt succeeds */
  mt_fake_fail_call ("cuMemAllocFromPoolAsync", 1, CUDA_ERROR_OUT_OF_MEMORY);
  mt_close_ok (mt_alloc_ok (mr, 4096, NULL), NULL);
  g_assert_cmpint (s.calls, ==, 1);
  g_assert_cmpint (mt_fake_call_count ("cuMemAllocFromPoolAsync") - calls, ==, 3);
  g_assert_true (memres_retry_remove_handler (mr, id, NULL));
  mt_fake_reset_faults ();
}

/* A request above G_MAXSSIZE is refused by the core before any layer: no handler is called
 * (no memory freed could make it fit), as for a retry of it the core would refuse again */
static void
test_retry_too_large (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("retry:max_retries=3>limit:max=1000>host");
  HandlerState s = { .mr = mr, .answer = TRUE };
  g_autoptr (GError) error = NULL;
  guint id = memres_retry_add_handler (mr, answers, &s, NULL, &error);

  g_assert_no_error (error);
  g_assert_null (memres_resource_allocate (mr, G_MAXSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_clear_error (&error);
  g_assert_cmpint (s.calls, ==, 0);
  /* one the layer below refuses: each of the max_retries tries called the handler */
  g_assert_null (memres_resource_allocate (mr, G_MAXSSIZE, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_cmpint (s.calls, ==, 3);
  g_assert_true (memres_retry_remove_handler (mr, id, NULL));
}

/* A handler of one retry layer that allocates from another resource with a retry layer of its
 * own: out of memory there, that layer's handlers run (only an allocation from the same layer
 * fails at once, README: "a handler that allocates from the same layer does not recurse"), so a
 * handler that spills device memory into a full host pool gets the host pool's handler */
typedef struct
{
  MemresResource *other;
  MemresBuffer *spill; /* what the handler allocated from @other */
  gint calls;
} SpillState;

static gboolean
spills (MemresResource *mr, gsize size, guint attempt, const GError *why, gpointer data)
{
  SpillState *s = data;
  g_autoptr (GError) error = NULL;

  s->calls++;
  s->spill = memres_resource_allocate (s->other, 800, NULL, &error);
  g_assert_no_error (error);
  return FALSE;
}

static void
test_retry_other_layer (void)
{
  g_autoptr (MemresResource) device = mt_new_ok ("retry>limit:max=1000>host");
  g_autoptr (MemresResource) host = mt_new_ok ("retry>limit:max=1000>host");
  HandlerState frees = { .mr = host };
  SpillState spill = { .other = host };
  g_autoptr (GError) error = NULL;
  guint id_host, id_device;

  /* the host pool is full; its handler frees what fills it */
  frees.victim = mt_alloc_ok (host, 900, NULL);
  id_host = memres_retry_add_handler (host, frees_memory, &frees, NULL, &error);
  id_device = memres_retry_add_handler (device, spills, &spill, NULL, &error);
  g_assert_no_error (error);
  g_assert_null (memres_resource_allocate (device, 2000, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_OUT_OF_MEMORY);
  g_assert_cmpint (spill.calls, ==, 1);
  g_assert_cmpint (frees.calls, ==, 1); /* the host layer's handler ran inside the other's */
  g_assert_null (frees.victim);
  g_assert_nonnull (spill.spill);
  mt_close_ok (spill.spill, NULL);
  g_assert_true (memres_retry_remove_handler (host, id_host, NULL));
  g_assert_true (memres_retry_remove_handler (device, id_device, NULL));
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  register_kinds ();
  g_test_add_func ("/adaptors/retry-handlers", test_retry_handlers);
  g_test_add_func ("/adaptors/retry-default-trims", test_retry_default_trims);
  g_test_add_func ("/adaptors/retry-other-errors", test_retry_other_errors);
  g_test_add_func ("/adaptors/retry-too-large", test_retry_too_large);
  g_test_add_func ("/adaptors/retry-other-layer", test_retry_other_layer);
  return g_test_run ();
}

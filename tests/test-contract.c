/* test-contract.c: kinds that break the slot contract (a failure without an error, a success
 * with address 0 or fewer bytes than asked, a success that sets an error) get a clear GError
 * from every wrapper, and what they returned is given back to them: nothing crashes or leaks.
 * A memory slot that fails without an error is reported (a critical warning, the
 * contract_breaches counter), and a deallocate that did so is never called again for that
 * memory. Kinds whose init creates resources nest at most 32 deep. */
#include <memres/memres-plugin.h>

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>

#include "testutil.h"

/* What the liar does on its next calls. */
typedef enum
{
  LIE_NONE,
  LIE_FALSE_NO_ERROR, /* return FALSE, set no error */
  LIE_TRUE_WITH_ERROR,
  LIE_ADDRESS_ZERO,        /* success with address 0 (plugin data set: must be released) */
  LIE_SHORT,               /* success with size - 1 bytes */
  LIE_HUGE,                /* success with G_MAXSIZE bytes */
  LIE_WRAP,                /* success with a range that runs past the end of the address space */
  LIE_FREE_FALSE_NO_ERROR, /* deallocate: frees, then returns FALSE without an error */
  LIE_FALSE_WITH_ERROR,    /* deallocate: frees nothing, returns FALSE with an error (honest) */
  LIE_MOVE_ADDRESS, /* deallocate: frees, moves the address to another nonzero value, fails */
} Lie;

static struct
{
  Lie lie;
  gint live;   /* allocations not yet deallocated (plugin data included) */
  gint device; /* what query reports */
  guint extra_flags;
  gint deallocates;
} liar;

static gboolean
liar_lie (GError **error)
{
  if (liar.lie == LIE_TRUE_WITH_ERROR)
    g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED, "an error on success");
  return liar.lie != LIE_FALSE_NO_ERROR;
}

static gboolean
liar_init (MemresResource *mr G_GNUC_UNUSED, const MemresOptions *options G_GNUC_UNUSED,
           GError **error G_GNUC_UNUSED)
{
  return TRUE;
}

static gint finalizes;

static void
liar_finalize (MemresResource *mr G_GNUC_UNUSED)
{
  finalizes++;
}

static gboolean
fill_alloc (gsize size, MemresAllocation *alloc)
{
  alloc->size = liar.lie == LIE_SHORT ? size - 1 : liar.lie == LIE_HUGE ? G_MAXSIZE : size;
  alloc->plugin_data = g_malloc (MAX (size, 1));
  alloc->address = liar.lie == LIE_ADDRESS_ZERO ? 0
                   : liar.lie == LIE_WRAP       ? G_MAXUINT64 - size / 2
                                                : (guint64) (guintptr) alloc->plugin_data;
  liar.live++;
  return TRUE;
}

static gboolean
liar_allocate (MemresResource *mr G_GNUC_UNUSED, gsize size, MemresStream stream G_GNUC_UNUSED,
               MemresAllocation *alloc, GError **error)
{
  if (liar.lie == LIE_FALSE_NO_ERROR)
    return FALSE;
  fill_alloc (size, alloc);
  return liar_lie (error);
}

static gboolean
liar_deallocate (MemresResource *mr G_GNUC_UNUSED, MemresAllocation *alloc,
                 MemresStream stream G_GNUC_UNUSED, GError **error)
{
  liar.deallocates++;
  if (liar.lie == LIE_FALSE_WITH_ERROR)
    {
      g_set_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_ILLEGAL_ADDRESS, "cuMemFree: failed");
      return FALSE; /* released nothing: the contract of a failing free */
    }
  g_free (alloc->plugin_data);
  liar.live--;
  if (liar.lie == LIE_FREE_FALSE_NO_ERROR)
    return FALSE; /* freed, then said nothing: another call would free it twice */
  if (liar.lie == LIE_MOVE_ADDRESS)
    {
      alloc->address += 8;
      g_set_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_ILLEGAL_ADDRESS, "cuMemFree: moved");
      return FALSE;
    }
  return liar_lie (error);
}

static void
liar_query (MemresResource *mr G_GNUC_UNUSED, MemresResourceInfo *info)
{
  info->device = liar.device;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_RESIZABLE | liar.extra_flags;
}

static gboolean
liar_resize (MemresResource *mr G_GNUC_UNUSED, MemresAllocation *alloc, gsize new_size,
             MemresStream stream G_GNUC_UNUSED, GError **error)
{
  if (liar.lie == LIE_FALSE_NO_ERROR)
    return FALSE;
  g_free (alloc->plugin_data);
  liar.live--;
  fill_alloc (new_size, alloc);
  return liar_lie (error);
}

static gboolean
liar_trim (MemresResource *mr G_GNUC_UNUSED, gsize keep G_GNUC_UNUSED, GError **error)
{
  return liar_lie (error);
}

static gboolean
liar_get_stats (MemresResource *mr G_GNUC_UNUSED, MemresStats *stats G_GNUC_UNUSED, GError **error)
{
  return liar_lie (error);
}

static const MemresResourceOps liar_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = liar_init,
  .finalize = liar_finalize,
  .allocate = liar_allocate,
  .deallocate = liar_deallocate,
  .query = liar_query,
  .trim = liar_trim,
  .get_stats = liar_get_stats,
  .resize = liar_resize,
};

static const MemresKindInfo liar_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "liar",
  .description = "breaks the slot contract on request",
  .ops = &liar_ops,
};

/* The same without statistics of its own. */
static const MemresResourceOps plain_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = liar_init,
  .finalize = liar_finalize,
  .allocate = liar_allocate,
  .deallocate = liar_deallocate,
  .query = liar_query,
};

static const MemresKindInfo plain_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "plain",
  .description = "keeps no statistics",
  .ops = &plain_ops,
};

static void
liar_reset (void)
{
  liar.lie = LIE_NONE;
  liar.device = -1;
  liar.extra_flags = 0;
}

static MemresResource *
liar_new (void)
{
  liar_reset ();
  return mt_new_ok ("liar");
}

/* up: a pass-through adaptor through memres_upstream_allocate() and
 * memres_upstream_deallocate(); after a failed upstream free it passes the record again and
 * keeps what that said in up_again (0 when it was not tried, else the error's code + 1). */
static gint up_again;

static gboolean
up_init (MemresResource *mr G_GNUC_UNUSED, const MemresOptions *options G_GNUC_UNUSED,
         GError **error G_GNUC_UNUSED)
{
  return TRUE;
}

static void
up_finalize (MemresResource *mr G_GNUC_UNUSED)
{
}

static gboolean
up_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
             GError **error)
{
  return memres_upstream_allocate (mr, size, stream, alloc, error);
}

static gboolean
up_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  g_autoptr (GError) again = NULL;

  if (memres_upstream_deallocate (mr, alloc, stream, error))
    return TRUE;
  if (alloc->address == 0)
    {
      /* gone: the record was zeroed and is refused, not freed twice */
      g_assert_false (memres_upstream_deallocate (mr, alloc, stream, &again));
      up_again = again->code + 1;
      g_assert_true (again->domain == MEMRES_ERROR);
    }
  return FALSE;
}

static const MemresResourceOps up_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = up_init,
  .finalize = up_finalize,
  .allocate = up_allocate,
  .deallocate = up_deallocate,
};

static const MemresKindInfo up_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "up",
  .description = "pass-through adaptor over memres_upstream_*()",
  .ops = &up_ops,
  .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
};

/* memres_resource_get_counters()'s contract_breaches of @mr (and the layers below). */
static guint64
breaches (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GVariant) counters = memres_resource_get_counters (mr, &error);
  guint64 n = G_MAXUINT64;

  g_assert_no_error (error);
  g_assert_nonnull (counters);
  g_assert_true (g_variant_lookup (counters, "contract_breaches", "t", &n));
  return n;
}

/* The critical warnings of breaches by the liar: expect_breach() starts capturing what memres
 * logs (structured logging bypasses g_test_expect_message()); assert_breaches() asserts that
 * @n criticals came, each a breach of @what ("SLOT WHAT HAPPENED"), and returns what was
 * logged (transfer full). */
static void
expect_breach (void)
{
  mt_log_capture_begin ();
}

static char *
assert_breaches (guint n, const char *what)
{
  guint criticals;
  char *text = mt_log_capture_end (&criticals);
  g_autofree char *line
      = g_strdup_printf ("CRITICAL: kind \"liar\": %s, which breaks the slot contract", what);
  const char *at = text;

  for (guint i = 0; i < n; i++, at++)
    {
      at = strstr (at, line);
      if (at == NULL)
        g_error ("breach %u of %u (\"%s\") not logged; the log:\n%s", i + 1, n, line, text);
    }
  g_assert_cmpuint (criticals, ==, n);
  return text;
}

static void
assert_allocate_refused (Lie lie, const char *needle)
{
  g_autoptr (MemresResource) mr = liar_new ();
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  liar.deallocates = 0;
  liar.lie = lie;
  expect_breach ();
  buf = memres_resource_allocate (mr, 100, NULL, &error);
  g_free (assert_breaches (lie == LIE_FALSE_NO_ERROR,
                           "allocate returned FALSE without setting an error"));
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "\"liar\""));
  g_assert_nonnull (strstr (error->message, needle));
  /* what the plugin returned went back to it: nothing left allocated */
  g_assert_cmpint (liar.live, ==, 0);
  g_assert_cmpint (liar.deallocates, ==, lie == LIE_FALSE_NO_ERROR ? 0 : 1);
  /* and a NULL error location is fine too */
  expect_breach ();
  g_assert_null (memres_resource_allocate (mr, 100, NULL, NULL));
  g_free (assert_breaches (lie == LIE_FALSE_NO_ERROR,
                           "allocate returned FALSE without setting an error"));
  g_assert_cmpint (liar.live, ==, 0);
  /* a failure without an error is a breach of the contract, counted; the other lies are
   * refused records (succeeded, then released by the core) */
  liar.lie = LIE_NONE;
  g_assert_cmpuint (breaches (mr), ==, lie == LIE_FALSE_NO_ERROR ? 2 : 0);
}

static void
test_allocate_false_without_error (void)
{
  assert_allocate_refused (LIE_FALSE_NO_ERROR, "allocate failed without saying why");
}

static void
test_allocate_address_zero (void)
{
  assert_allocate_refused (LIE_ADDRESS_ZERO, "address 0");
}

static void
test_allocate_short (void)
{
  assert_allocate_refused (LIE_SHORT, "fewer bytes than asked for");
}

static void
test_allocate_huge (void)
{
  assert_allocate_refused (LIE_HUGE, "above G_MAXSSIZE bytes");
  assert_allocate_refused (LIE_WRAP, "past the end of the address space");
}

/* A success that sets an error is a success: the error is dropped with a warning (checked in a
 * subprocess, where warnings are not fatal). */
static void
test_allocate_true_with_error (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr (MemresResource) mr = liar_new ();
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresBuffer) buf = NULL;

      g_log_set_always_fatal (G_LOG_FATAL_MASK);
      liar.lie = LIE_TRUE_WITH_ERROR;
      buf = memres_resource_allocate (mr, 64, NULL, &error);
      g_assert_no_error (error);
      g_assert_nonnull (buf);
      g_assert_cmpuint (memres_buffer_get_size (buf), ==, 64);
      liar.lie = LIE_NONE;
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      g_assert_no_error (error);
      g_assert_cmpint (liar.live, ==, 0);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*kind \"liar\": allocate succeeded but set an error*");
}

/* A deallocate that fails with an error released nothing: the buffer stays open, no breach,
 * and the next close frees it. */
static void
test_deallocate_false_with_error (void)
{
  g_autoptr (MemresResource) mr = liar_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 64, NULL);

  liar.deallocates = 0;
  liar.lie = LIE_FALSE_WITH_ERROR;
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_ILLEGAL_ADDRESS);
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 64);
  g_assert_cmpint (liar.live, ==, 1);
  g_clear_error (&error);
  liar.lie = LIE_NONE;
  g_assert_cmpuint (breaches (mr), ==, 0);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_cmpint (liar.live, ==, 0);
  g_assert_cmpint (liar.deallocates, ==, 2);
}

/* The resource's counts after a breach: the memory is taken as released. */
static void
assert_nothing_counted (MemresResource *mr)
{
  g_autoptr (GError) error = NULL;
  MemresStats s;

  g_assert_true (memres_resource_get_stats (mr, &s, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.n_buffers, ==, 0);
}

/* A deallocate that freed the memory and then returned FALSE without an error: reported once
 * (a critical, the counter), the buffer closed, the close failed saying so, and the slot never
 * called again for that memory (by a second close or the last unref): no double free. */
static void
test_deallocate_false_without_error (void)
{
  g_autoptr (MemresResource) mr = liar_new ();
  g_autoptr (GError) error = NULL;
  g_autofree char *text = NULL;
  MemresBuffer *buf = mt_alloc_ok (mr, 64, NULL);

  liar.deallocates = 0;
  liar.lie = LIE_FREE_FALSE_NO_ERROR;
  expect_breach ();
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_free (assert_breaches (1, "deallocate returned FALSE without setting an error"));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "kind \"liar\": deallocate failed without saying why"));
  g_assert_nonnull (strstr (error->message, "64 bytes"));
  g_assert_nonnull (strstr (error->message, "never deallocated again"));
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_cmpint (liar.deallocates, ==, 1);
  g_assert_cmpint (liar.live, ==, 0);
  liar.lie = LIE_NONE;
  g_assert_cmpuint (breaches (mr), ==, 1);
  assert_nothing_counted (mr);
  g_clear_error (&error);
  g_assert_true (memres_buffer_close (buf, NULL, &error)); /* closed: nothing to do */
  g_assert_no_error (error);
  memres_buffer_unref (buf);
  g_assert_cmpint (liar.deallocates, ==, 1);
  g_assert_cmpuint (breaches (mr), ==, 1);

  /* the last unref of an open buffer: the breach is reported there too, and not retried on
   * the legacy stream */
  buf = mt_alloc_ok (mr, 32, NULL);
  liar.lie = LIE_FREE_FALSE_NO_ERROR;
  expect_breach ();
  memres_buffer_unref (buf);
  text = assert_breaches (1, "deallocate returned FALSE without setting an error");
  g_assert_nonnull (strstr (text, "WARNING: Closing a buffer of 32 bytes failed: kind \"liar\": "
                                  "deallocate failed without saying why"));
  g_assert_null (strstr (text, "could not be freed"));
  liar.lie = LIE_NONE;
  g_assert_cmpint (liar.deallocates, ==, 2);
  g_assert_cmpint (liar.live, ==, 0);
  g_assert_cmpuint (breaches (mr), ==, 2);
  assert_nothing_counted (mr);
}

/* Through an adaptor's memres_upstream_deallocate(): the same rule; the adaptor's record is
 * zeroed (gone: passing it again is refused, not freed twice), the upstream's counts no longer
 * hold the bytes, and the top of the stack counts the breach of the layer below. */
static void
test_deallocate_false_without_error_upstream (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresBuffer) buf = NULL;

  liar_reset ();
  mr = mt_new_ok ("up>liar");
  buf = mt_alloc_ok (mr, 64, NULL);
  liar.deallocates = 0;
  liar.lie = LIE_FREE_FALSE_NO_ERROR;
  up_again = 0;
  expect_breach ();
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_free (assert_breaches (1, "deallocate returned FALSE without setting an error"));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "kind \"liar\": deallocate failed without saying why"));
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_cmpint (up_again, ==, MEMRES_ERROR_INVALID_ARGUMENT + 1);
  g_assert_cmpint (liar.deallocates, ==, 1);
  g_assert_cmpint (liar.live, ==, 0);
  liar.lie = LIE_NONE;
  g_assert_cmpuint (breaches (mr), ==, 1);
  g_assert_cmpuint (breaches (memres_resource_get_upstream (mr)), ==, 1);
  assert_nothing_counted (memres_resource_get_upstream (mr));
}

/* A deallocate that fails and changes the address to another nonzero value: one rule for a
 * buffer's close and for memres_upstream_deallocate() (and the upstream's counts): a breach,
 * the memory taken as released, the slot's error kept behind the core's words. */
static void
test_deallocate_moves_address (void)
{
  for (guint through_adaptor = 0; through_adaptor < 2; through_adaptor++)
    {
      g_autoptr (MemresResource) mr = NULL;
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresBuffer) buf = NULL;
      MemresResource *bottom;

      liar_reset ();
      mr = mt_new_ok (through_adaptor ? "up>liar" : "liar");
      bottom = through_adaptor ? memres_resource_get_upstream (mr) : mr;
      buf = mt_alloc_ok (mr, 64, NULL);
      liar.deallocates = 0;
      liar.lie = LIE_MOVE_ADDRESS;
      expect_breach ();
      g_assert_false (memres_buffer_close (buf, NULL, &error));
      g_free (assert_breaches (1, "deallocate failed and changed the allocation's address"));
      g_assert_error (error, MEMRES_CUDA_ERROR, CUDA_ERROR_ILLEGAL_ADDRESS);
      g_assert_nonnull (strstr (error->message, "changed the allocation's address"));
      g_assert_nonnull (strstr (error->message, "cuMemFree: moved"));
      g_assert_true (memres_buffer_is_closed (buf));
      g_assert_cmpint (liar.deallocates, ==, 1);
      g_assert_cmpint (liar.live, ==, 0);
      liar.lie = LIE_NONE;
      g_assert_cmpuint (breaches (mr), ==, 1);
      assert_nothing_counted (bottom);
      g_clear_error (&error);
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      g_assert_cmpint (liar.deallocates, ==, 1);
    }
}

static void
test_resize_lies (void)
{
  static const struct
  {
    Lie lie;
    const char *needle;
  } cases[] = {
    { LIE_FALSE_NO_ERROR, "resize failed without saying why" },
    { LIE_ADDRESS_ZERO, "address 0" },
    { LIE_SHORT, "fewer bytes" },
  };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (MemresResource) mr = liar_new ();
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 64, NULL);

      liar.lie = cases[i].lie;
      expect_breach ();
      g_assert_false (memres_buffer_resize (buf, 200, NULL, &error));
      g_free (assert_breaches (cases[i].lie == LIE_FALSE_NO_ERROR,
                               "resize returned FALSE without setting an error"));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
      g_assert_nonnull (strstr (error->message, cases[i].needle));
      g_clear_error (&error);
      liar.lie = LIE_NONE;
      /* a failure without error leaves the buffer as it was; a lying success left it empty */
      g_assert_cmpuint (memres_buffer_get_size (buf), ==,
                        cases[i].lie == LIE_FALSE_NO_ERROR ? 64 : 0);
      g_assert_true (memres_buffer_close (buf, NULL, &error));
      g_assert_no_error (error);
      g_assert_cmpint (liar.live, ==, 0);
    }
}

static void
test_other_slots_false_without_error (void)
{
  g_autoptr (MemresResource) mr = liar_new ();
  MemresStats stats;

  liar.lie = LIE_FALSE_NO_ERROR;
  {
    g_autoptr (GError) error = NULL;
    g_assert_false (memres_resource_trim (mr, 0, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
    g_assert_nonnull (strstr (error->message, "trim failed without saying why"));
  }
  {
    g_autoptr (GError) error = NULL;
    g_assert_false (memres_resource_get_stats (mr, &stats, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
    g_assert_nonnull (strstr (error->message, "get_stats failed without saying why"));
  }
}

/* A query that reports a device that does not exist fails the creation (after finalize). */
static void
test_query_bad_device (void)
{
  static const gint devices[] = { -2, G_MININT, 4096 };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (devices); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = NULL;
      gint before = finalizes;

      liar.device = devices[i];
      mr = memres_resource_new ("liar", &error);
      g_assert_null (mr);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
      g_assert_nonnull (strstr (error->message, "query reported device"));
      g_assert_cmpint (finalizes, ==, before + 1);
    }
  liar.device = -1;
}

/* Unknown flags and IMPORTED on a resource init made are cleared with a warning. */
static void
test_query_bad_flags (void)
{
  if (g_test_subprocess ())
    {
      g_autoptr (MemresResource) mr = NULL;

      g_log_set_always_fatal (G_LOG_FATAL_MASK);
      liar.device = -1;
      liar.extra_flags = (1u << 20) | MEMRES_MEMORY_IMPORTED;
      mr = memres_resource_new ("liar", NULL);
      g_assert_nonnull (mr);
      g_assert_cmpuint (memres_resource_get_flags (mr), ==,
                        MEMRES_MEMORY_HOST_ACCESSIBLE | MEMRES_MEMORY_RESIZABLE);
      return;
    }
  g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
  g_test_trap_assert_stderr ("*query reported unknown flags 0x100000: ignored*"
                             "query reported MEMRES_MEMORY_IMPORTED*");
}

/* The core counts the bytes of every kind's buffers: a kind without a get_stats slot reports
 * them (reserved = used), with the high-water mark, resizes and resets. */
static void
test_core_counts_usage (void)
{
  g_autoptr (MemresResource) mr = liar_new ();
  g_autoptr (MemresBuffer) a = NULL;
  g_autoptr (MemresBuffer) b = NULL;
  g_autoptr (GError) error = NULL;
  MemresStats s;

  a = mt_alloc_ok (mr, 100, NULL);
  b = mt_alloc_ok (mr, 50, NULL);
  g_assert_true (memres_buffer_resize (b, 70, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_close (a, NULL, &error));
  /* plain: no get_stats slot at all */
  {
    g_autoptr (MemresResource) plain = mt_new_ok ("plain");
    g_autoptr (MemresBuffer) c = mt_alloc_ok (plain, 40, NULL);

    g_assert_true (memres_resource_get_stats (plain, &s, &error));
    g_assert_no_error (error);
    g_assert_cmpuint (s.used_current, ==, 40);
    g_assert_cmpuint (s.reserved_current, ==, 40);
    g_assert_true (memres_buffer_close (c, NULL, &error));
    g_assert_true (memres_resource_get_stats (plain, &s, &error));
    g_assert_cmpuint (s.used_current, ==, 0);
    g_assert_cmpuint (s.used_high, ==, 40);
    g_assert_true (memres_resource_reset_stats (plain, &error));
    g_assert_no_error (error);
    g_assert_true (memres_resource_get_stats (plain, &s, &error));
    g_assert_cmpuint (s.used_high, ==, 0);
  }
  /* liar has a get_stats slot (here truthful: it leaves the core's counts) */
  liar.lie = LIE_NONE;
  g_assert_true (memres_resource_get_stats (mr, &s, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (s.used_current, ==, 70);
  g_assert_cmpuint (s.used_high, ==, 170);
  g_assert_cmpuint (s.reserved_current, ==, 70);
  g_assert_cmpuint (s.n_buffers, ==, 1);
  g_assert_true (memres_resource_reset_stats (mr, &error));
  g_assert_no_error (error);
  g_assert_true (memres_resource_get_stats (mr, &s, &error));
  g_assert_cmpuint (s.used_high, ==, 70);
  g_assert_true (memres_buffer_close (b, NULL, &error));
  g_assert_true (memres_resource_get_stats (mr, &s, &error));
  g_assert_cmpuint (s.used_current, ==, 0);
  g_assert_cmpuint (s.used_high, ==, 70);
}

/* rec: a base kind whose init creates a resource of rec_spec (its own kind, in one way or
 * another) and fails with that creation's error; rec_inits counts the inits entered. */
static const char *rec_spec = "rec";
static gint rec_inits;

static gboolean
rec_init (MemresResource *mr, const MemresOptions *options G_GNUC_UNUSED, GError **error)
{
  MemresResource **child = memres_resource_get_private (mr);

  rec_inits++;
  *child = memres_resource_new (rec_spec, error);
  return *child != NULL;
}

static void
rec_finalize (MemresResource *mr)
{
  MemresResource **child = memres_resource_get_private (mr);

  g_clear_pointer (child, memres_resource_unref);
}

static const MemresResourceOps rec_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = rec_init,
  .finalize = rec_finalize,
  .allocate = liar_allocate,
  .deallocate = liar_deallocate,
  .query = liar_query,
};

static const MemresKindInfo rec_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "rec",
  .description = "creates itself in its init",
  .ops = &rec_ops,
  .instance_size = sizeof (MemresResource *),
};

/* recimp: its import_handle runs rec_spec's creation, as rec's init does (the import path). */
static gboolean
recimp_export_handle (MemresResource *mr G_GNUC_UNUSED, MemresIpcHandle **handle G_GNUC_UNUSED,
                      GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "recimp exports nothing");
  return FALSE;
}

static gboolean
recimp_import_handle (MemresResource *mr, const MemresIpcHandle *handle G_GNUC_UNUSED,
                      GError **error)
{
  MemresResource **child = memres_resource_get_private (mr);

  *child = memres_resource_new (rec_spec, error);
  return *child != NULL;
}

static const MemresIpcOps recimp_ipc = {
  .version = MEMRES_IPC_OPS_VERSION,
  .export_handle = recimp_export_handle,
  .import_handle = recimp_import_handle,
};

static const MemresKindInfo recimp_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "recimp",
  .description = "creates rec in its import_handle",
  .ops = &rec_ops,
  .ipc = &recimp_ipc,
  .instance_size = sizeof (MemresResource *),
};

/* nest: a base kind whose init creates "nest:depth=N-1" while N > 0 and holds it; nest_alive
 * counts the instances. */
static gint nest_alive;

static gboolean
nest_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  MemresResource **child = memres_resource_get_private (mr);
  gint64 depth = memres_options_get_int (options, "depth");

  if (depth > 0)
    {
      g_autofree char *spec = g_strdup_printf ("nest:depth=%" G_GINT64_FORMAT, depth - 1);

      *child = memres_resource_new (spec, error);
      if (*child == NULL)
        return FALSE;
    }
  nest_alive++;
  return TRUE;
}

static void
nest_finalize (MemresResource *mr)
{
  nest_alive--;
  rec_finalize (mr);
}

static const MemresResourceOps nest_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = nest_init,
  .finalize = nest_finalize,
  .allocate = liar_allocate,
  .deallocate = liar_deallocate,
  .query = liar_query,
};

static const MemresOptionSpec nest_options[] = {
  { "depth", MEMRES_OPTION_INT, "0", "how many more to create inside", NULL, 0, 1000 },
};

static const MemresKindInfo nest_info = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "nest",
  .description = "creates itself in its init, depth times",
  .options = nest_options,
  .n_options = G_N_ELEMENTS (nest_options),
  .ops = &nest_ops,
  .instance_size = sizeof (MemresResource *),
};

/* The error of a creation refused at the nesting limit, for kind @kind. */
static void
assert_too_deep (const GError *error, const char *kind)
{
  g_autofree char *needle
      = g_strdup_printf ("kind \"%s\": not created: inside the init of kind \"%s\", with 32 "
                         "kinds' inits running",
                         kind, kind);

  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  if (strstr (error->message, needle) == NULL)
    g_error ("\"%s\" lacks \"%s\"", error->message, needle);
}

/* A kind whose init creates itself: refused at 32 inits deep, with an error naming the kind,
 * whether it creates itself directly, in a stack or through a named stack (@NAME); nothing
 * leaks (valgrind), and the next creation on the thread starts from 0 again. */
static void
test_init_recursion (void)
{
  static const char *const specs[] = { "rec", "up>rec", "@self" };
  g_autofree char *dir = g_dir_make_tmp ("memres-contract-XXXXXX", NULL);
  g_autofree char *conf = g_build_filename (dir, "resources.conf", NULL);

  g_assert_true (g_file_set_contents (conf, "[self]\nspec=rec\n", -1, NULL));
  g_setenv ("MEMRES_CONFIG", conf, TRUE);
  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (GError) error = NULL;
      MemresResource *mr;

      rec_spec = specs[i];
      rec_inits = 0;
      mr = memres_resource_new (rec_spec, &error);
      g_assert_null (mr);
      assert_too_deep (error, "rec");
      /* 32 inits ran (each inside the one before); the 33rd creation was refused */
      g_assert_cmpint (rec_inits, ==, 32);
    }
  g_unsetenv ("MEMRES_CONFIG");
  g_assert_cmpint (g_unlink (conf), ==, 0);
  g_assert_cmpint (g_rmdir (dir), ==, 0);
  rec_spec = "rec";
}

/* The import path counts too: an import_handle creating rec runs at depth 1, so 31 of rec's
 * inits run before the refusal. */
static void
test_init_recursion_import (void)
{
  static const guint8 id[MEMRES_IPC_ID_SIZE] = { 7 };
  g_autoptr (GError) error = NULL;
  MemresIpcHandle *handle
      = memres_ipc_handle_new ("recimp", open ("/dev/null", O_RDONLY), id, id, &error);
  MemresResource *mr;

  g_assert_no_error (error);
  rec_spec = "rec";
  rec_inits = 0;
  mr = memres_resource_import_handle (handle, &error);
  g_assert_null (mr);
  assert_too_deep (error, "rec");
  g_assert_cmpint (rec_inits, ==, 31);
  memres_ipc_handle_free (handle);
}

/* Legitimate nesting works, up to the limit: 32 inits at once; 33 are refused, naming the
 * kind, and everything created on the way is released. */
static void
test_init_nesting (void)
{
  static const gint64 depths[] = { 3, 31, 32, 31 };

  for (gsize i = 0; i < G_N_ELEMENTS (depths); i++)
    {
      g_autofree char *spec = g_strdup_printf ("nest:depth=%" G_GINT64_FORMAT, depths[i]);
      g_autoptr (GError) error = NULL;
      MemresResource *mr = memres_resource_new (spec, &error);

      if (depths[i] < 32)
        {
          MemresResource **child;
          gint n = 1;

          g_assert_no_error (error);
          g_assert_nonnull (mr);
          g_assert_cmpint (nest_alive, ==, depths[i] + 1);
          for (child = memres_resource_get_private (mr); *child != NULL;
               child = memres_resource_get_private (*child))
            n++;
          g_assert_cmpint (n, ==, depths[i] + 1);
          memres_resource_unref (mr);
        }
      else
        {
          g_assert_null (mr);
          assert_too_deep (error, "nest");
        }
      g_assert_cmpint (nest_alive, ==, 0);
    }
}

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;

  mt_init (&argc, &argv);
  mt_log_capture_init ();
  g_assert_true (memres_registry_register_kind (&liar_info, &error));
  g_assert_no_error (error);
  g_assert_true (memres_registry_register_kind (&plain_info, &error));
  g_assert_no_error (error);
  g_assert_true (memres_registry_register_kind (&up_info, &error));
  g_assert_no_error (error);
  g_assert_true (memres_registry_register_kind (&rec_info, &error));
  g_assert_no_error (error);
  g_assert_true (memres_registry_register_kind (&recimp_info, &error));
  g_assert_no_error (error);
  g_assert_true (memres_registry_register_kind (&nest_info, &error));
  g_assert_no_error (error);

  g_test_add_func ("/contract/allocate/false-without-error", test_allocate_false_without_error);
  g_test_add_func ("/contract/allocate/address-zero", test_allocate_address_zero);
  g_test_add_func ("/contract/allocate/short", test_allocate_short);
  g_test_add_func ("/contract/allocate/huge", test_allocate_huge);
  g_test_add_func ("/contract/allocate/true-with-error", test_allocate_true_with_error);
  g_test_add_func ("/contract/deallocate/false-with-error", test_deallocate_false_with_error);
  g_test_add_func ("/contract/deallocate/false-without-error", test_deallocate_false_without_error);
  g_test_add_func ("/contract/deallocate/false-without-error-upstream",
                   test_deallocate_false_without_error_upstream);
  g_test_add_func ("/contract/deallocate/moves-address", test_deallocate_moves_address);
  g_test_add_func ("/contract/resize", test_resize_lies);
  g_test_add_func ("/contract/other-slots", test_other_slots_false_without_error);
  g_test_add_func ("/contract/query/bad-device", test_query_bad_device);
  g_test_add_func ("/contract/query/bad-flags", test_query_bad_flags);
  g_test_add_func ("/contract/core-counts-usage", test_core_counts_usage);
  g_test_add_func ("/contract/init/recursion", test_init_recursion);
  g_test_add_func ("/contract/init/recursion-import", test_init_recursion_import);
  g_test_add_func ("/contract/init/nesting", test_init_nesting);
  return g_test_run ();
}

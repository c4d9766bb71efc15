/* test-contract.c: kinds that break the slot contract (a failure without an error, a success
 * with address 0 or fewer bytes than asked, a success that sets an error) get a clear GError
 * from every wrapper, and what they returned is given back to them: nothing crashes or leaks. */
#include <memres/memres-plugin.h>

#include <string.h>

#include "testutil.h"

/* What the liar does on its next calls. */
typedef enum
{
  LIE_NONE,
  LIE_FALSE_NO_ERROR, /* return FALSE, set no error */
  LIE_TRUE_WITH_ERROR,
  LIE_ADDRESS_ZERO, /* success with address 0 (plugin data set: must be released) */
  LIE_SHORT,        /* success with size - 1 bytes */
  LIE_HUGE,         /* success with G_MAXSIZE bytes */
  LIE_WRAP,         /* success with a range that runs past the end of the address space */
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
  if (liar.lie == LIE_FALSE_NO_ERROR)
    return FALSE; /* released nothing (the contract of a failing free), said nothing */
  g_free (alloc->plugin_data);
  liar.live--;
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

static MemresResource *
liar_new (void)
{
  liar.lie = LIE_NONE;
  liar.device = -1;
  liar.extra_flags = 0;
  return mt_new_ok ("liar");
}

static void
assert_allocate_refused (Lie lie, const char *needle)
{
  g_autoptr (MemresResource) mr = liar_new ();
  g_autoptr (GError) error = NULL;
  MemresBuffer *buf;

  liar.deallocates = 0;
  liar.lie = lie;
  buf = memres_resource_allocate (mr, 100, NULL, &error);
  g_assert_null (buf);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "\"liar\""));
  g_assert_nonnull (strstr (error->message, needle));
  /* what the plugin returned went back to it: nothing left allocated */
  g_assert_cmpint (liar.live, ==, 0);
  g_assert_cmpint (liar.deallocates, ==, lie == LIE_FALSE_NO_ERROR ? 0 : 1);
  /* and a NULL error location is fine too */
  g_assert_null (memres_resource_allocate (mr, 100, NULL, NULL));
  g_assert_cmpint (liar.live, ==, 0);
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

static void
test_deallocate_false_without_error (void)
{
  g_autoptr (MemresResource) mr = liar_new ();
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 64, NULL);

  liar.lie = LIE_FALSE_NO_ERROR;
  g_assert_false (memres_buffer_close (buf, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_FAILED);
  g_assert_nonnull (strstr (error->message, "deallocate failed without saying why"));
  /* a failed free releases nothing: the buffer stays open, to be closed again */
  g_assert_false (memres_buffer_is_closed (buf));
  g_assert_cmpint (liar.live, ==, 1);
  g_clear_error (&error);
  liar.lie = LIE_NONE;
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (memres_buffer_is_closed (buf));
  g_assert_cmpint (liar.live, ==, 0);
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
      g_assert_false (memres_buffer_resize (buf, 200, NULL, &error));
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

int
main (int argc, char **argv)
{
  g_autoptr (GError) error = NULL;

  mt_init (&argc, &argv);
  g_assert_true (memres_registry_register_kind (&liar_info, &error));
  g_assert_no_error (error);
  g_assert_true (memres_registry_register_kind (&plain_info, &error));
  g_assert_no_error (error);

  g_test_add_func ("/contract/allocate/false-without-error", test_allocate_false_without_error);
  g_test_add_func ("/contract/allocate/address-zero", test_allocate_address_zero);
  g_test_add_func ("/contract/allocate/short", test_allocate_short);
  g_test_add_func ("/contract/allocate/huge", test_allocate_huge);
  g_test_add_func ("/contract/allocate/true-with-error", test_allocate_true_with_error);
  g_test_add_func ("/contract/deallocate/false-without-error", test_deallocate_false_without_error);
  g_test_add_func ("/contract/resize", test_resize_lies);
  g_test_add_func ("/contract/other-slots", test_other_slots_false_without_error);
  g_test_add_func ("/contract/query/bad-device", test_query_bad_device);
  g_test_add_func ("/contract/query/bad-flags", test_query_bad_flags);
  g_test_add_func ("/contract/core-counts-usage", test_core_counts_usage);
  return g_test_run ();
}

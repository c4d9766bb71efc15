/* test-host.c: what is the embedded host kind's own: its properties, the alignment option, the
 * unsupported optional operations, the default resource without a driver. The contract it keeps
 * with every kind (sizes, statistics, zero bytes, G_MAXSIZE...) is test-conformance.c's. */
#include <memres/memres-plugin.h>

#include <string.h>

#include "testutil.h"

static void
test_properties (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("host");

  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "host");
  g_assert_cmpstr (memres_kind_get_name (memres_resource_get_kind (mr)), ==, "host");
  g_assert_cmpint (memres_resource_get_device (mr), ==, -1);
  g_assert_cmpint (memres_resource_get_flags (mr), ==, MEMRES_MEMORY_HOST_ACCESSIBLE);
  g_assert_true (memres_resource_is_host_accessible (mr));
  g_assert_false (memres_resource_is_device_accessible (mr));
}

static void
test_alignment (void)
{
  static const char *const specs[] = { "host", "host:alignment=1", "host:alignment=64",
                                       "host:alignment=4KiB", "host:alignment=2MiB" };
  static const gsize expected[] = { 256, 8, 64, 4096, 2 * 1024 * 1024 };
  gsize i;
  int j;

  for (i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      g_autoptr (MemresResource) mr = mt_new_ok (specs[i]);
      for (j = 0; j < 8; j++)
        {
          g_autoptr (GError) error = NULL;
          g_autoptr (MemresBuffer) buf = mt_alloc_ok (mr, 1 + j * 13, NULL);
          g_assert_cmpuint (memres_buffer_get_address (buf) % expected[i], ==, 0);
        }
    }
}

static void
test_alignment_invalid (void)
{
  /* out of range and not a power of two are told apart: 1 TiB and max are powers of two */
  static const struct
  {
    const char *spec;
    const char *message; /* NULL: the option's parse error, which names "alignment" */
  } cases[] = {
    { "host:alignment=0",
      "option \"alignment\" of kind \"host\": 0 is not between 1 byte and 1 GiB" },
    { "host:alignment=3", "option \"alignment\" of kind \"host\": 3 is not a power of two" },
    { "host:alignment=1000", "option \"alignment\" of kind \"host\": 1000 is not a power of two" },
    { "host:alignment=max", "option \"alignment\" of kind \"host\": 18446744073709551615 is "
                            "not between 1 byte and 1 GiB" },
    { "host:alignment=1TiB",
      "option \"alignment\" of kind \"host\": 1099511627776 is not between 1 byte and 1 GiB" },
    { "host:alignment=2TiB",
      "option \"alignment\" of kind \"host\": 2199023255552 is not between 1 byte and 1 GiB" },
    { "host:alignment=3GiB",
      "option \"alignment\" of kind \"host\": 3221225472 is not between 1 byte and 1 GiB" },
    { "host:alignment=x", NULL },
  };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresResource) mr = memres_resource_new (cases[i].spec, &error);
      g_assert_null (mr);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      g_assert_nonnull (strstr (error->message, "alignment"));
      if (cases[i].message != NULL)
        g_assert_cmpstr (error->message, ==, cases[i].message);
    }
  /* the bounds themselves are valid */
  {
    g_autoptr (MemresResource) one = mt_new_ok ("host:alignment=1");
    g_autoptr (MemresResource) gib = mt_new_ok ("host:alignment=1GiB");
  }
}

static void
test_not_supported (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autoptr (MemresBuffer) buf = memres_resource_allocate (mr, 16, NULL, NULL);
  MemresAccessDesc desc = { 0, MEMRES_ACCESS_READWRITE };
  MemresAccess access;

  /* trim: the trim case of test-conformance.c */
  g_assert_false (memres_resource_set_access (mr, &desc, 1, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_resource_get_access (mr, 0, &access, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_clear_error (&error);
  g_assert_false (memres_buffer_resize (buf, 32, NULL, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 16);
}

static void
test_default_without_driver (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) host = NULL;

  /* the core suite has no driver: the default is host, whatever the device */
  mr = memres_resource_get_default (0, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "host");
  host = memres_resource_get_default (-1, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (memres_resource_get_kind_name (host), ==, "host");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/host/properties", test_properties);
  g_test_add_func ("/host/alignment", test_alignment);
  g_test_add_func ("/host/alignment/invalid", test_alignment_invalid);
  g_test_add_func ("/host/not-supported", test_not_supported);
  g_test_add_func ("/host/default-without-driver", test_default_without_driver);
  return g_test_run ();
}

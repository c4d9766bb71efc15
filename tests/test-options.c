/* test-options.c: validation against a kind's schema, defaults, the getters and the resource's
 * spec string, on the in-test kind "tk" (testkind.h). */
#include "testkind.h"
#include "testutil.h"

static void
test_defaults (void)
{
  g_autoptr (MemresResource) mr = NULL;

  tk_reset ();
  tk.count = 99;
  mr = mt_new_ok ("tk");
  g_assert_false (tk.flag);
  g_assert_cmpint (tk.count, ==, 4);
  g_assert_cmpuint (tk.limit, ==, 1024 * 1024);
  g_assert_cmpint (tk.mode, ==, 1);
  g_assert_cmpstr (tk.mode_text, ==, "safe");
  /* no default: unset, getters give NULL */
  g_assert_false (tk.label_set);
  g_assert_null (tk.label);
  g_assert_cmpuint (tk.n_peers, ==, 0);
}

static void
test_given_and_defaults (void)
{
  g_autoptr (MemresResource) mr = NULL;

  tk_reset ();
  mr = mt_new_ok ("tk:count=-3,flag=yes,peers=0+5");
  g_assert_true (tk.flag);
  g_assert_cmpint (tk.count, ==, -3);
  g_assert_cmpuint (tk.limit, ==, 1024 * 1024); /* default */
  g_assert_cmpstr (tk.mode_text, ==, "safe");   /* default */
  g_assert_cmpuint (tk.n_peers, ==, 2);
  g_assert_cmpint (tk.peers[0], ==, 0);
  g_assert_cmpint (tk.peers[1], ==, 5);
  g_assert_cmpstr (tk.peers_text, ==, "0+5");
}

static void
test_to_string (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) again = NULL;
  g_autofree char *spec = NULL;
  g_autofree char *spec_again = NULL;

  tk_reset ();
  mr = mt_new_ok ("tk:label=x,count=7");
  spec = memres_resource_to_string (mr);
  /* schema order, every option that has a value, defaults included */
  g_assert_cmpstr (spec, ==, "tk:flag=false,count=7,limit=1MiB,mode=safe,label=x,peers=");
  /* the string is a spec that creates the same resource */
  again = mt_new_ok (spec);
  spec_again = memres_resource_to_string (again);
  g_assert_cmpstr (spec, ==, spec_again);
  g_assert_cmpint (tk.count, ==, 7);
}

static void
test_host_to_string (void)
{
  g_autoptr (MemresResource) mr = mt_new_ok ("host");
  g_autofree char *spec = memres_resource_to_string (mr);

  g_assert_cmpstr (spec, ==, "host:alignment=256");
}

static void
test_bad_values_leave_no_resource (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;

  tk_reset ();
  /* validation happens before init: a bad value never reaches the kind */
  mr = memres_resource_new ("tk:count=1,mode=bogus", &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_cmpint (tk.inits, ==, 0);
  g_assert_cmpint (tk.finalizes, ==, 0);
}

static void
test_init_failure (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;

  tk_reset ();
  tk.fail_init = TRUE;
  mr = memres_resource_new ("tk", &error);
  g_assert_null (mr);
  /* the kind's own error comes through unchanged; finalize is not called */
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_cmpint (tk.finalizes, ==, 0);
  tk.fail_init = FALSE;
}

static void
test_kind_schema (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = memres_registry_lookup ("tk", &error);
  const MemresOptionSpec *options;
  guint n = 0;

  g_assert_no_error (error);
  options = memres_kind_get_options (kind, &n);
  g_assert_cmpuint (n, ==, 6);
  g_assert_cmpstr (options[2].name, ==, "limit");
  g_assert_cmpint (options[2].type, ==, MEMRES_OPTION_SIZE);
  g_assert_cmpstr (options[2].default_value, ==, "1MiB");
  g_assert_cmpstr (memres_option_type_to_string (MEMRES_OPTION_BOOL), ==, "bool");
  g_assert_cmpstr (memres_option_type_to_string (MEMRES_OPTION_INT), ==, "int");
  g_assert_cmpstr (memres_option_type_to_string (MEMRES_OPTION_SIZE), ==, "size");
  g_assert_cmpstr (memres_option_type_to_string (MEMRES_OPTION_ENUM), ==, "enum");
  g_assert_cmpstr (memres_option_type_to_string (MEMRES_OPTION_STRING), ==, "string");
  g_assert_cmpstr (memres_option_type_to_string (MEMRES_OPTION_INT_LIST), ==, "int-list");
  g_assert_cmpstr (memres_option_type_to_string ((MemresOptionType) 99), ==, "unknown");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tk_register ();

  g_test_add_func ("/options/defaults", test_defaults);
  g_test_add_func ("/options/given-and-defaults", test_given_and_defaults);
  g_test_add_func ("/options/to-string", test_to_string);
  g_test_add_func ("/options/host-to-string", test_host_to_string);
  g_test_add_func ("/options/bad-value/no-init", test_bad_values_leave_no_resource);
  g_test_add_func ("/options/init-failure", test_init_failure);
  g_test_add_func ("/options/schema", test_kind_schema);
  return g_test_run ();
}

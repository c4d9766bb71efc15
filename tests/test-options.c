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

/* memres_resource_new ("@kind:@key=@value") fails with MEMRES_ERROR_INVALID_ARGUMENT and a
 * short, printable message that holds @needle. */
static void
assert_value_refused (const char *kind, const char *key, const char *value, const char *needle)
{
  g_autofree char *spec = g_strdup_printf ("%s:%s=%s", kind, key, value);

  mt_new_fails_short (spec, needle);
}

#define MIB ((gsize) 1024 * 1024)

/* A value of a megabyte, for every type: each message quotes 64 bytes of it and its size. */
static void
test_huge_values (void)
{
  g_autofree char *letters = mt_repeat ("", "x", MIB, "");
  g_autofree char *nines = mt_repeat ("", "9", MIB, "");
  g_autofree char *zeros_then_500 = mt_repeat ("", "0", MIB - 3, "500");
  g_autofree char *zeros_then_big = mt_repeat ("", "0", MIB - 11, "16777216TiB");
  g_autofree char *zeros_then_xib = mt_repeat ("", "0", MIB - 4, "1XiB");
  g_autofree char *list = mt_repeat ("", "1+", MIB / 2 - 1, "19");
  g_autofree char *lines = mt_repeat ("", "\n", MIB, "");
  g_autofree char *x64 = mt_repeat ("", "x", 64, "... (1048576 bytes)\"");
  g_autofree char *zero64 = mt_repeat ("", "0", 64, "... (1048576 bytes)");

  assert_value_refused ("tk", "flag", letters, "invalid boolean");
  assert_value_refused ("tk", "flag", letters, x64);
  assert_value_refused ("tk", "count", nines, "invalid integer \"99999999");
  assert_value_refused ("tk", "count", nines, "... (1048576 bytes)\": expected a decimal");
  assert_value_refused ("tk", "count", zeros_then_500, "out of range");
  assert_value_refused ("tk", "count", zeros_then_500, zero64);
  assert_value_refused ("tk", "limit", nines, "is too large");
  assert_value_refused ("tk", "limit", zeros_then_big, "is too large");
  assert_value_refused ("tk", "limit", zeros_then_big, zero64);
  assert_value_refused ("tk", "limit", zeros_then_xib, "invalid size");
  assert_value_refused ("tk", "limit", zeros_then_xib, zero64);
  assert_value_refused ("tk", "mode", letters, "expected one of fast, safe");
  assert_value_refused ("tk", "mode", letters, x64);
  assert_value_refused ("tk", "peers", list, "in list \"1+1+1+");
  assert_value_refused ("tk", "peers", list, "... (1048576 bytes)\": integer 19 is out of range");
  assert_value_refused ("tk", "mode", lines, "\"\\n\\n\\n");
  assert_value_refused ("host", "alignment", letters, x64);
}

/* Values of normal length read in messages exactly as written; past 64 bytes, the cut falls
 * between characters and escapes, never inside one. */
static void
test_values_shown (void)
{
  g_autofree char *x64 = mt_repeat ("", "x", 64, "");
  g_autofree char *x65 = mt_repeat ("", "x", 65, "");
  g_autofree char *x63_e = mt_repeat ("", "x", 63, "\xc3\xa9");
  g_autofree char *e40 = mt_repeat ("", "\xc3\xa9", 40, "");
  g_autofree char *ctl20 = mt_repeat ("", "\x01", 20, "");
  g_autofree char *want = NULL;

  want = g_strdup_printf ("invalid value \"%s\": expected one of fast, safe", x64);
  assert_value_refused ("tk", "mode", x64, want);
  g_free (want);
  want = mt_repeat ("", "x", 64, "... (65 bytes)\": expected");
  assert_value_refused ("tk", "mode", x65, want);
  g_free (want);
  want = mt_repeat ("", "x", 63, "... (65 bytes)\"");
  assert_value_refused ("tk", "mode", x63_e, want);
  g_free (want);
  want = mt_repeat ("", "\xc3\xa9", 32, "... (80 bytes)\"");
  assert_value_refused ("tk", "mode", e40, want);
  g_free (want);
  want = mt_repeat ("", "\\x01", 16, "... (20 bytes)\"");
  assert_value_refused ("tk", "mode", ctl20, want);
  /* a backslash in a spec takes the next character literally: "\\\\" is one backslash */
  assert_value_refused ("tk", "mode", "a\\\\b\"c", "invalid value \"a\\b\"c\"");
  assert_value_refused ("tk", "mode", "\xff\xc2\x9b\x7f", "\"\\xff\\u009b\\x7f\"");
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
  g_test_add_func ("/options/bad-value/huge", test_huge_values);
  g_test_add_func ("/options/bad-value/shown", test_values_shown);
  g_test_add_func ("/options/schema", test_kind_schema);
  return g_test_run ();
}

/* test-spec.c: the spec grammar KIND[:KEY=VALUE[,KEY=VALUE]...] and the value parsers, through
 * memres_resource_new() on the in-test kind "tk" (testkind.h) and the embedded host kind. */
#include "testkind.h"
#include "testutil.h"

static void
assert_invalid (const char *spec, const char *needle)
{
  mt_new_fails (spec, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, needle);
}

static void
test_kind_only (void)
{
  g_autoptr (MemresResource) mr = NULL;

  tk_reset ();
  mr = mt_new_ok ("tk");
  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "tk");
  g_assert_cmpint (tk.inits, ==, 1);
}

static void
test_bad_kind_names (void)
{
  static const char *const names[] = {
    "a/b",   "../etc/passwd",
    "..",    "./host",
    "/host", "host/..",
    "Host",  "9host",
    "x-y",   "h.st",
    "h st",  "_host",
    "é",     "abcdefghijklmnopqrstuvwxyzabcdef", /* 32 characters: one too many */
  };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *with_opts = g_strconcat (names[i], ":alignment=1", NULL);
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresKind) kind = memres_registry_lookup (names[i], &error);

      g_assert_null (kind);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      assert_invalid (names[i], "invalid kind name");
      assert_invalid (with_opts, "invalid kind name");
    }
}

#define MIB ((gsize) 1024 * 1024)

/* A spec of a megabyte: every message quotes the first 64 bytes and the size, not the whole. */
static void
test_huge_spec (void)
{
  g_autofree char *name = mt_repeat ("", "a", MIB, "");
  g_autofree char *no_value = mt_repeat ("tk:", "a", MIB, "");
  g_autofree char *unknown_key = mt_repeat ("tk:", "a", MIB, "=1");
  g_autofree char *bad_key = mt_repeat ("tk:", "A", MIB, "=1");
  g_autofree char *empty_options = mt_repeat ("tk:flag=1", ",", MIB, "");
  g_autofree char *escapes = mt_repeat ("", "\x1b", MIB, "");
  g_autofree char *head = mt_repeat ("\"", "a", 64, "... (1048576 bytes)\"");

  mt_new_fails_short (name, "invalid kind name");
  mt_new_fails_short (name, head);
  mt_new_fails_short (no_value, "invalid spec \"tk:aaaaaaaa");
  mt_new_fails_short (no_value, "... (1048579 bytes)\": option");
  mt_new_fails_short (no_value, head);
  mt_new_fails_short (unknown_key, "has no option");
  mt_new_fails_short (unknown_key, head);
  mt_new_fails_short (bad_key, "invalid key \"AAAAAAAA");
  mt_new_fails_short (bad_key, "... (1048576 bytes)\" (keys match");
  mt_new_fails_short (empty_options, "empty option");
  mt_new_fails_short (empty_options, "\"tk:flag=1,,,,,");
  mt_new_fails_short (empty_options, "... (1048585 bytes)\"");
  /* 16 escapes of 4 bytes fill the 64 */
  mt_new_fails_short (escapes, "\"\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b\\x1b"
                               "\\x1b\\x1b\\x1b... (1048576 bytes)\"");
}

/* Control characters in a kind name reach no message raw. */
static void
test_kind_name_control_characters (void)
{
  static const char name[] = "ho\x1b[2Jst\n\r\t\x7f\xc2\x9b\xff";
  const char *shown = "\"ho\\x1b[2Jst\\n\\r\\t\\x7f\\u009b\\xff\"";
  g_autofree char *spec = g_strconcat (name, ":alignment=8", NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = memres_registry_lookup (name, &error);

  g_assert_null (kind);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  mt_assert_printable (error->message, 300);
  g_assert_nonnull (strstr (error->message, shown));
  mt_new_fails_short (name, shown);
  mt_new_fails_short (spec, shown);
}

static void
test_unknown_kind (void)
{
  mt_new_fails ("nonexistent", MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND, "nonexistent");
  mt_new_fails ("nonexistent:a=1", MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND,
                "libmemres-nonexistent.so");
  /* 31 characters is a valid name, just not a known one */
  mt_new_fails ("abcdefghijklmnopqrstuvwxyzabcde", MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND, NULL);
}

static void
test_syntax (void)
{
  assert_invalid ("", "names no kind");
  assert_invalid (":", "names no kind");
  assert_invalid (":limit=1", "names no kind");
  assert_invalid ("tk:", "empty option list");
  assert_invalid ("tk:limit=1,", "empty option");
  assert_invalid ("tk:,limit=1", "empty option");
  assert_invalid ("tk:limit=1,,count=2", "empty option");
  assert_invalid ("tk:=1", "invalid key");
  assert_invalid ("tk:Limit=1", "invalid key");
  assert_invalid ("tk:li mit=1", "invalid key");
}

static void
test_unknown_key (void)
{
  assert_invalid ("tk:colour=red", "\"colour\"");
  /* the message lists every valid key */
  assert_invalid ("tk:colour=red", "flag, count, limit, mode, label, peers");
  assert_invalid ("host:size=1", "valid options are alignment");
}

static void
test_repeated_key (void)
{
  assert_invalid ("tk:count=1,count=1", "\"count\" of kind \"tk\" is given more than once");
  assert_invalid ("tk:count=1,flag=true,count=2", "more than once");
}

static void
test_missing_equals (void)
{
  assert_invalid ("tk:flag", "missing '='");
  assert_invalid ("tk:count=1,flag", "\"flag\"");
  assert_invalid ("host:alignment", "missing '='");
}

static void
test_sizes_valid (void)
{
  static const struct
  {
    const char *text;
    guint64 bytes;
  } cases[] = {
    { "0", 0 },
    { "1", 1 },
    { "1B", 1 },
    { "4096", 4096 },
    { "1KiB", 1024 },
    { "3MiB", 3 * 1024 * 1024 },
    { "2GiB", G_GUINT64_CONSTANT (2) << 30 },
    { "5TiB", G_GUINT64_CONSTANT (5) << 40 },
    { "16777215TiB", G_GUINT64_CONSTANT (16777215) << 40 },
    { "1PiB", G_GUINT64_CONSTANT (1) << 50 },
    { "16383PiB", G_GUINT64_CONSTANT (16383) << 50 },
    { "18446744073709551615", G_MAXUINT64 },
    { "18446744073709551615B", G_MAXUINT64 },
    { "max", G_MAXUINT64 },
    { "007", 7 },
  };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *spec = g_strconcat ("tk:limit=", cases[i].text, NULL);
      g_autoptr (MemresResource) mr = NULL;

      tk_reset ();
      mr = mt_new_ok (spec);
      g_assert_cmpuint (tk.limit, ==, cases[i].bytes);
    }
}

static void
test_sizes_invalid (void)
{
  static const char *const cases[] = {
    "1e30",
    "99999999999TiB",
    "16777216TiB",
    "16384PiB",
    "1PB",
    "1pib",
    "18446744073709551616",
    "-1",
    "-1KiB",
    "1.5GiB",
    "1kib",
    "1 KiB",
    " 1",
    "",
    "KiB",
    "0x10",
    "+1",
    "1KB",
    "1K",
    "1iB",
    "max1",
    "MAX",
    "1TiBB",
  };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *spec = g_strconcat ("tk:limit=", cases[i], NULL);
      /* the message names the key */
      assert_invalid (spec, "option \"limit\" of kind \"tk\"");
    }
  assert_invalid ("tk:limit=1e30", "KiB, MiB, GiB, TiB or PiB");
  assert_invalid ("tk:limit=99999999999TiB", "too large");
  assert_invalid ("host:alignment=-4096", "\"alignment\"");
}

static void
test_bools (void)
{
  static const struct
  {
    const char *text;
    gboolean value;
  } valid[] = { { "true", TRUE }, { "false", FALSE }, { "yes", TRUE }, { "no", FALSE },
                { "on", TRUE },   { "off", FALSE },   { "1", TRUE },   { "0", FALSE },
                { "TRUE", TRUE }, { "Off", FALSE } };
  static const char *const invalid[] = { "maybe", "", "2", "truee", "t", "-1", "nope" };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (valid); i++)
    {
      g_autofree char *spec = g_strconcat ("tk:flag=", valid[i].text, NULL);
      g_autoptr (MemresResource) mr = NULL;

      tk_reset ();
      tk.flag = !valid[i].value;
      mr = mt_new_ok (spec);
      g_assert_cmpint (tk.flag, ==, valid[i].value);
    }
  for (i = 0; i < G_N_ELEMENTS (invalid); i++)
    {
      g_autofree char *spec = g_strconcat ("tk:flag=", invalid[i], NULL);
      assert_invalid (spec, "option \"flag\"");
    }
  assert_invalid ("tk:flag=maybe", "expected true, false");
}

static void
test_ints (void)
{
  static const struct
  {
    const char *text;
    gint64 value;
  } valid[] = { { "-10", -10 }, { "100", 100 }, { "0", 0 }, { "-0", 0 }, { "42", 42 } };
  static const char *const invalid[] = {
    "-11", "101", "1.0", "",   "9999999999999999999999", "--1",
    "1-",  "0x1", "ten", " 1", "-9223372036854775809",   "9223372036854775808",
  };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (valid); i++)
    {
      g_autofree char *spec = g_strconcat ("tk:count=", valid[i].text, NULL);
      g_autoptr (MemresResource) mr = NULL;

      tk_reset ();
      mr = mt_new_ok (spec);
      g_assert_cmpint (tk.count, ==, valid[i].value);
    }
  for (i = 0; i < G_N_ELEMENTS (invalid); i++)
    {
      g_autofree char *spec = g_strconcat ("tk:count=", invalid[i], NULL);
      assert_invalid (spec, "option \"count\"");
    }
  assert_invalid ("tk:count=101", "-10 to 100");
}

static void
test_enums (void)
{
  g_autoptr (MemresResource) mr = NULL;

  tk_reset ();
  mr = mt_new_ok ("tk:mode=fast");
  g_assert_cmpint (tk.mode, ==, 0);
  g_assert_cmpstr (tk.mode_text, ==, "fast");
  assert_invalid ("tk:mode=slow", "expected one of fast, safe");
  assert_invalid ("tk:mode=", "option \"mode\"");
  assert_invalid ("tk:mode=FAST", "option \"mode\"");
}

static void
test_strings (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) empty = NULL;

  tk_reset ();
  mr = mt_new_ok ("tk:label=hello=world");
  g_assert_true (tk.label_set);
  g_assert_cmpstr (tk.label, ==, "hello=world");
  tk_reset ();
  empty = mt_new_ok ("tk:label=");
  g_assert_true (tk.label_set);
  g_assert_cmpstr (tk.label, ==, "");
}

static void
test_int_lists (void)
{
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresResource) empty = NULL;

  tk_reset ();
  mr = mt_new_ok ("tk:peers=1+2+7");
  g_assert_cmpuint (tk.n_peers, ==, 3);
  g_assert_cmpint (tk.peers[0], ==, 1);
  g_assert_cmpint (tk.peers[1], ==, 2);
  g_assert_cmpint (tk.peers[2], ==, 7);
  g_assert_cmpstr (tk.peers_text, ==, "1+2+7");

  tk_reset ();
  empty = mt_new_ok ("tk:peers=");
  g_assert_cmpuint (tk.n_peers, ==, 0);

  assert_invalid ("tk:peers=1+8", "option \"peers\"");
  assert_invalid ("tk:peers=1++2", "option \"peers\"");
  assert_invalid ("tk:peers=+1", "option \"peers\"");
  assert_invalid ("tk:peers=a", "option \"peers\"");
  assert_invalid ("tk:peers=-1", "0 to 7");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  tk_register ();

  g_test_add_func ("/spec/kind-only", test_kind_only);
  g_test_add_func ("/spec/kind/bad-names", test_bad_kind_names);
  g_test_add_func ("/spec/kind/unknown", test_unknown_kind);
  g_test_add_func ("/spec/kind/control-characters", test_kind_name_control_characters);
  g_test_add_func ("/spec/huge", test_huge_spec);
  g_test_add_func ("/spec/syntax", test_syntax);
  g_test_add_func ("/spec/key/unknown", test_unknown_key);
  g_test_add_func ("/spec/key/repeated", test_repeated_key);
  g_test_add_func ("/spec/key/missing-equals", test_missing_equals);
  g_test_add_func ("/spec/size/valid", test_sizes_valid);
  g_test_add_func ("/spec/size/invalid", test_sizes_invalid);
  g_test_add_func ("/spec/bool", test_bools);
  g_test_add_func ("/spec/int", test_ints);
  g_test_add_func ("/spec/enum", test_enums);
  g_test_add_func ("/spec/string", test_strings);
  g_test_add_func ("/spec/int-list", test_int_lists);
  return g_test_run ();
}

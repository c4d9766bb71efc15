/* test-plugins.c: the plugin loader against the deliberately broken plugins of tests/plugins/
 * (each failure with its own code, the registry usable after each) and a module that is not a
 * shared object at all. */
#include <memres/memres.h>

#include <glib/gstdio.h>
#include <string.h>

#include "testutil.h"

static char *tmp_dir;

/* Asserts that the registry still works: the embedded host kind allocates. */
static void
assert_registry_usable (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = memres_resource_new ("host", &error);
  g_autoptr (MemresBuffer) buf = NULL;

  g_assert_no_error (error);
  buf = mt_alloc_ok (mr, 64, NULL);
  g_assert_cmpuint (memres_buffer_get_size (buf), ==, 64);
}

static void
assert_lookup_fails (const char *name, GQuark domain, gint code, const char *needle)
{
  int attempt;

  /* a failed load leaves nothing behind: the second attempt fails the same way */
  for (attempt = 0; attempt < 2; attempt++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (MemresKind) kind = memres_registry_lookup (name, &error);

      g_assert_null (kind);
      g_assert_error (error, domain, code);
      if (needle != NULL && strstr (error->message, needle) == NULL)
        g_error ("message for %s lacks \"%s\": %s", name, needle, error->message);
      assert_registry_usable ();
    }
}

static void
test_abi_major_too_new (void)
{
  assert_lookup_fails ("abi_new", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                       "plugin ABI 3.0");
}

static void
test_struct_too_small (void)
{
  assert_lookup_fails ("abi_small", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                       "struct_size 12");
}

static void
test_name_mismatch (void)
{
  assert_lookup_fails ("wrong_name", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_NAME_MISMATCH,
                       "other_name");
}

static void
test_no_symbol (void)
{
  assert_lookup_fails ("no_symbol", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_SYMBOL,
                       "memres_plugin_no_symbol_get_desc");
}

static void
test_init_fails (void)
{
  assert_lookup_fails ("init_fails", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_INIT_FAILED,
                       "fails on purpose");
}

static void
test_duplicate_kind (void)
{
  assert_lookup_fails ("duplicate", MEMRES_ERROR, MEMRES_ERROR_EXISTS, "\"host\"");
  /* the message names the plugin and its file */
  assert_lookup_fails ("duplicate", MEMRES_ERROR, MEMRES_ERROR_EXISTS, "plugin \"duplicate\" (");
  assert_lookup_fails ("duplicate", MEMRES_ERROR, MEMRES_ERROR_EXISTS, "libmemres-duplicate.so");
  /* the embedded host kind is untouched */
  {
    g_autoptr (MemresKind) host = memres_registry_lookup ("host", NULL);
    g_assert_nonnull (host);
    g_assert_null (memres_kind_get_plugin_path (host));
  }
}

static void
test_not_a_module (void)
{
  g_autofree char *path = g_build_filename (tmp_dir, "libmemres-garbage.so", NULL);

  g_assert_true (g_file_set_contents (path, "this is not an ELF file\n", -1, NULL));
  assert_lookup_fails ("garbage", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE, "garbage");
  g_assert_cmpint (g_unlink (path), ==, 0);
}

static void
test_reserved_nonzero (void)
{
  assert_lookup_fails ("reserved", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                       "reserved is 7, must be 0");
}

/* Bound at load time: the missing function fails the load, naming it and the plugin file. */
static void
test_missing_symbol (void)
{
  assert_lookup_fails ("missing_symbol", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE,
                       "memres_test_function_that_does_not_exist");
  assert_lookup_fails ("missing_symbol", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE,
                       "libmemres-missing_symbol.so");
}

/* A module whose init ran stays mapped after the init failed: the quark it made from its own
 * static string still reads. */
static void
test_failed_module_stays_resident (void)
{
  assert_lookup_fails ("quark_fails", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_INIT_FAILED,
                       "fails on purpose");
  g_assert_cmpstr (g_quark_to_string (g_quark_try_string ("memres-test-quark-of-a-failed-plugin")),
                   ==, "memres-test-quark-of-a-failed-plugin");
}

/* The plugin's init lists the kinds and looks up its own and the host kind (it checks the
 * answers itself and fails with the reason otherwise): no recursion into its own init. */
static void
test_reentrant_init (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = memres_registry_lookup ("reentrant", &error);

  g_assert_no_error (error);
  g_assert_cmpstr (memres_kind_get_plugin_name (kind), ==, "reentrant");
  assert_registry_usable ();
}

/* Odd files named like plugins: each refused at once (no hang in open() for the FIFO), with a
 * message saying what it is, by lookup and by the listing. */
static void
test_odd_files (void)
{
  static const struct
  {
    const char *name;
    const char *what;
  } odd[] = {
    { "fifo", "is a FIFO" },
    { "loop", "is a symbolic link loop" },
    { "dangling", "is a dangling symbolic link" },
    { "adir", "is a directory" },
  };
  g_autofree char *adir = g_build_filename (tmp_dir, "libmemres-adir.so", NULL);
  g_autoptr (GHashTable) failures = NULL;
  g_autoptr (GPtrArray) kinds = NULL;
  gsize i;

  mt_make_odd_files (tmp_dir, "libmemres-fifo.so", "libmemres-loop.so", "libmemres-dangling.so");
  g_assert_cmpint (g_mkdir (adir, 0700), ==, 0);
  for (i = 0; i < G_N_ELEMENTS (odd); i++)
    assert_lookup_fails (odd[i].name, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE, odd[i].what);
  kinds = memres_registry_list_kinds_full (&failures, NULL);
  g_assert_nonnull (kinds);
  for (i = 0; i < G_N_ELEMENTS (odd); i++)
    {
      g_autofree char *file = g_strdup_printf ("libmemres-%s.so", odd[i].name);
      g_autofree char *path = g_build_filename (tmp_dir, file, NULL);
      const GError *failure = g_hash_table_lookup (failures, path);

      g_assert_nonnull (failure);
      g_assert_error (failure, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE);
      g_assert_nonnull (strstr (failure->message, odd[i].what));
      g_assert_cmpint (g_remove (path), ==, 0);
    }
  assert_registry_usable ();
}

/* A search path entry that cannot be read as a directory is reported by the listing (one that
 * does not exist is not: the installed directory may not be there). */
static void
test_unreadable_search_dir (void)
{
  g_autofree char *file = g_build_filename (tmp_dir, "not-a-directory", NULL);
  g_autofree char *missing = g_build_filename (tmp_dir, "missing", NULL);
  g_autofree char *old = g_strdup (g_getenv ("MEMRES_PLUGIN_PATH"));
  g_autofree char *path = g_strjoin (":", old, file, missing, NULL);
  g_autoptr (GHashTable) failures = NULL;
  g_autoptr (GPtrArray) kinds = NULL;
  const GError *failure;

  g_assert_true (g_file_set_contents (file, "", -1, NULL));
  g_setenv ("MEMRES_PLUGIN_PATH", path, TRUE);
  kinds = memres_registry_list_kinds_full (&failures, NULL);
  g_setenv ("MEMRES_PLUGIN_PATH", old, TRUE);
  g_assert_nonnull (kinds);
  failure = g_hash_table_lookup (failures, file);
  g_assert_nonnull (failure);
  g_assert_error (failure, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_MODULE);
  g_assert_nonnull (strstr (failure->message, "cannot be read"));
  g_assert_null (g_hash_table_lookup (failures, missing));
  g_assert_cmpint (g_remove (file), ==, 0);
}

/* The ELF note of MEMRES_PLUGIN_DEFINE refuses a plugin of a newer ABI, or of another name,
 * before the module is opened: its ELF constructor never runs. */
static void
test_note_checked_before_open (void)
{
  assert_lookup_fails ("note_new", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                       "plugin ABI 2.99");
  assert_lookup_fails ("note_name", MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_NAME_MISMATCH,
                       "names itself \"something_else\"");
  g_assert_null (g_getenv ("MEMRES_TEST_CONSTRUCTOR_RAN"));
}

static void
test_older_minor_loads (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = memres_registry_lookup ("abi_old", &error);
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;

  g_assert_no_error (error);
  g_assert_cmpstr (memres_kind_get_plugin_name (kind), ==, "abi_old");
  g_assert_true (g_str_has_suffix (memres_kind_get_plugin_path (kind), "libmemres-abi_old.so"));
  mr = mt_new_ok ("abi_old");
  buf = mt_alloc_ok (mr, 100, NULL);
  g_assert_true (memres_buffer_fill (buf, 7, 1, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (((guint8 *) memres_buffer_get_pointer (buf))[99], ==, 7);
}

static void
test_plugin_with_two_kinds (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) good = memres_registry_lookup ("good", &error);
  g_autoptr (MemresKind) extra = NULL;

  g_assert_no_error (error);
  /* the second kind became visible with the first; no plugin file of its name is needed */
  extra = memres_registry_lookup ("good_extra", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (memres_kind_get_plugin_name (extra), ==, "good");
  g_assert_cmpstr (memres_kind_get_plugin_path (extra), ==, memres_kind_get_plugin_path (good));
}

static void
test_list_skips_broken (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) kinds = memres_registry_list_kinds (&error);
  g_autoptr (GString) names = g_string_new (NULL);
  guint i;

  g_assert_no_error (error);
  for (i = 0; i < kinds->len; i++)
    g_string_append_printf (names, "%s ", memres_kind_get_name (g_ptr_array_index (kinds, i)));
  /* every loadable kind, sorted; none of the broken plugins' kinds */
  g_assert_nonnull (strstr (names->str, "abi_old good good_extra host "));
  g_assert_null (strstr (names->str, "init_fails"));
  g_assert_null (strstr (names->str, "duplicate"));
  g_assert_null (strstr (names->str, "no_symbol"));
  assert_registry_usable ();
}

/* memres_registry_list_kinds_full() lists the same kinds and, for each plugin file that did not
 * load, the error that lookup gives; again on a second call (failures are not cached). */
static void
test_list_reports_broken (void)
{
  static const struct
  {
    const char *name;
    GQuark (*domain) (void);
    gint code;
  } expected[] = {
    { "abi_new", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_ABI_MISMATCH },
    { "abi_small", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_ABI_MISMATCH },
    { "wrong_name", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_NAME_MISMATCH },
    { "no_symbol", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_SYMBOL },
    { "init_fails", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_INIT_FAILED },
    { "duplicate", memres_error_quark, MEMRES_ERROR_EXISTS },
    { "reserved", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_ABI_MISMATCH },
    { "missing_symbol", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_MODULE },
    { "quark_fails", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_INIT_FAILED },
    { "note_new", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_ABI_MISMATCH },
    { "note_name", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_NAME_MISMATCH },
    { "garbage", memres_plugin_error_quark, MEMRES_PLUGIN_ERROR_MODULE },
    { "Bad-Name", memres_error_quark, MEMRES_ERROR_INVALID_ARGUMENT },
  };
  const char *plugin_dir = g_getenv ("MEMRES_TEST_PLUGIN_DIR");
  g_autofree char *garbage = g_build_filename (tmp_dir, "libmemres-garbage.so", NULL);
  g_autofree char *bad_name = g_build_filename (tmp_dir, "libmemres-Bad-Name.so", NULL);
  int attempt;
  gsize i;

  g_assert_true (g_file_set_contents (garbage, "this is not an ELF file\n", -1, NULL));
  g_assert_true (g_file_set_contents (bad_name, "", -1, NULL));
  for (attempt = 0; attempt < 2; attempt++)
    {
      g_autoptr (GError) error = NULL;
      g_autoptr (GHashTable) failures = NULL;
      g_autoptr (GPtrArray) kinds = memres_registry_list_kinds_full (&failures, &error);
      g_autoptr (GPtrArray) plain = memres_registry_list_kinds (NULL);

      g_assert_no_error (error);
      g_assert_nonnull (kinds);
      g_assert_cmpuint (kinds->len, ==, plain->len);
      for (i = 0; i < kinds->len; i++)
        g_assert_true (g_ptr_array_index (kinds, i) == g_ptr_array_index (plain, i));
      g_assert_nonnull (failures);
      g_assert_cmpuint (g_hash_table_size (failures), ==, G_N_ELEMENTS (expected));
      for (i = 0; i < G_N_ELEMENTS (expected); i++)
        {
          g_autofree char *file = g_strdup_printf ("libmemres-%s.so", expected[i].name);
          g_autofree char *path = g_build_filename (
              i < G_N_ELEMENTS (expected) - 2 ? plugin_dir : tmp_dir, file, NULL);
          const GError *failure = g_hash_table_lookup (failures, path);

          if (failure == NULL)
            g_error ("%s is not among the failures", path);
          g_assert_error (failure, expected[i].domain (), expected[i].code);
          if (strstr (failure->message, expected[i].name) == NULL)
            g_error ("the message for %s does not name it: %s", path, failure->message);
        }
    }
  /* once the scratch files are gone, so are their failures */
  {
    g_autoptr (GHashTable) failures = NULL;
    g_autoptr (GPtrArray) kinds = NULL;

    g_assert_cmpint (g_unlink (garbage), ==, 0);
    g_assert_cmpint (g_unlink (bad_name), ==, 0);
    kinds = memres_registry_list_kinds_full (&failures, NULL);
    g_assert_cmpuint (g_hash_table_size (failures), ==, G_N_ELEMENTS (expected) - 2);
  }
  assert_registry_usable ();
}

/* A file named like an embedded plugin (libmemres-host.so, libmemres-stats.so) is never
 * opened: lookups get the embedded kinds, and the listing reports each such file, in every
 * directory of the path, as not loaded (MEMRES_ERROR_EXISTS), without a warning. */
static void
test_embedded_shadows_file (void)
{
  static const char *const names[] = { "host", "stats" };
  g_autofree char *second = g_build_filename (tmp_dir, "second", NULL);
  g_autofree char *old = g_strdup (g_getenv ("MEMRES_PLUGIN_PATH"));
  g_autofree char *path = g_strjoin (":", old, second, NULL);
  g_autoptr (GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GHashTable) failures = NULL;
  g_autoptr (GPtrArray) kinds = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) host = NULL;
  guint i;

  g_assert_cmpint (g_mkdir (second, 0700), ==, 0);
  for (i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree char *file = g_strdup_printf ("libmemres-%s.so", names[i]);

      /* not an ELF file: opening it would fail with another error */
      g_ptr_array_add (files, g_build_filename (tmp_dir, file, NULL));
      g_ptr_array_add (files, g_build_filename (second, file, NULL));
    }
  for (i = 0; i < files->len; i++)
    g_assert_true (g_file_set_contents (g_ptr_array_index (files, i), "not ELF\n", -1, NULL));
  g_setenv ("MEMRES_PLUGIN_PATH", path, TRUE);

  host = memres_registry_lookup ("host", &error);
  g_assert_no_error (error);
  g_assert_null (memres_kind_get_plugin_path (host));
  assert_registry_usable ();
  kinds = memres_registry_list_kinds_full (&failures, &error);
  g_assert_no_error (error);
  g_assert_nonnull (kinds);
  for (i = 0; i < files->len; i++)
    {
      const char *file = g_ptr_array_index (files, i);
      const GError *failure = g_hash_table_lookup (failures, file);
      const char *name = names[i / 2];
      g_autofree char *want = g_strdup_printf (
          "plugin file %s is not loaded: plugin \"%s\" is embedded in libmemres, whose kinds "
          "take the name (give the file and its plugin another name)",
          file, name);

      if (failure == NULL)
        g_error ("%s is not among the failures", file);
      g_assert_error (failure, MEMRES_ERROR, MEMRES_ERROR_EXISTS);
      g_assert_cmpstr (failure->message, ==, want);
    }
  g_setenv ("MEMRES_PLUGIN_PATH", old, TRUE);
  for (i = 0; i < files->len; i++)
    g_assert_cmpint (g_remove (g_ptr_array_index (files, i)), ==, 0);
  g_assert_cmpint (g_rmdir (second), ==, 0);
  assert_registry_usable ();
}

int
main (int argc, char **argv)
{
  g_autofree char *path = NULL;
  const char *plugin_dir = g_getenv ("MEMRES_TEST_PLUGIN_DIR");
  int ret;

  g_test_init (&argc, &argv, NULL);
  if (plugin_dir == NULL)
    g_error ("MEMRES_TEST_PLUGIN_DIR is not set: run through meson test");
  tmp_dir = g_dir_make_tmp ("memres-test-plugins-XXXXXX", NULL);
  g_assert_nonnull (tmp_dir);
  /* only the test plugins and a scratch directory: never an installed copy */
  path = g_strjoin (":", plugin_dir, tmp_dir, NULL);
  g_setenv ("MEMRES_PLUGIN_PATH", path, TRUE);

  g_test_add_func ("/plugins/abi/major-too-new", test_abi_major_too_new);
  g_test_add_func ("/plugins/abi/struct-too-small", test_struct_too_small);
  g_test_add_func ("/plugins/abi/older-minor-loads", test_older_minor_loads);
  g_test_add_func ("/plugins/name-mismatch", test_name_mismatch);
  g_test_add_func ("/plugins/no-symbol", test_no_symbol);
  g_test_add_func ("/plugins/init-fails", test_init_fails);
  g_test_add_func ("/plugins/duplicate-kind", test_duplicate_kind);
  g_test_add_func ("/plugins/not-a-module", test_not_a_module);
  g_test_add_func ("/plugins/two-kinds", test_plugin_with_two_kinds);
  g_test_add_func ("/plugins/reserved-nonzero", test_reserved_nonzero);
  g_test_add_func ("/plugins/missing-symbol", test_missing_symbol);
  g_test_add_func ("/plugins/failed-module-stays-resident", test_failed_module_stays_resident);
  g_test_add_func ("/plugins/reentrant-init", test_reentrant_init);
  g_test_add_func ("/plugins/odd-files", test_odd_files);
  g_test_add_func ("/plugins/note-checked-before-open", test_note_checked_before_open);
  g_test_add_func ("/plugins/unreadable-search-dir", test_unreadable_search_dir);
  g_test_add_func ("/plugins/list-skips-broken", test_list_skips_broken);
  g_test_add_func ("/plugins/list-reports-broken", test_list_reports_broken);
  g_test_add_func ("/plugins/embedded-shadows-file", test_embedded_shadows_file);
  ret = g_test_run ();
  g_rmdir (tmp_dir);
  g_free (tmp_dir);
  return ret;
}

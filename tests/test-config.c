/* test-config.c: named resources (`@NAME` layers) from the config file: where it is looked
 * for ($MEMRES_CONFIG, $XDG_CONFIG_HOME, the system config dirs), names nesting, and bad files
 * (missing, unreadable, malformed, cyclic, huge), each an error naming the file, the line and
 * the key. */
#include "testutil.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

static char *tmp_dir;
static char *user_dir;   /* XDG_CONFIG_HOME */
static char *system_dir; /* XDG_CONFIG_DIRS */

static char *
write_config (const char *name, const char *text, gssize length)
{
  char *path = g_build_filename (tmp_dir, name, NULL);

  g_assert_true (g_file_set_contents (path, text, length, NULL));
  return path;
}

/* Uses @text as $MEMRES_CONFIG; returns the path. */
static char *
use_config (const char *text)
{
  char *path = write_config ("resources.conf", text, -1);

  g_setenv ("MEMRES_CONFIG", path, TRUE);
  return path;
}

static void
assert_fails (const char *spec, gint code, const char *needle)
{
  mt_new_fails (spec, MEMRES_ERROR, code, needle);
}

static void
test_named (void)
{
  g_autofree char *path = use_config ("# named stacks\n"
                                      "[base]\n"
                                      "spec = stats>host:alignment=64\n"
                                      "description=the inner part\n"
                                      "\n"
                                      "[training]\n"
                                      "spec=limit:max=1MiB>@base\n"
                                      "[odd.name-1]\n"
                                      "spec=log:path=/tmp/a\\,b.csv>host\n");
  g_autoptr (MemresResource) mr = mt_new_ok ("@training");
  g_autoptr (MemresResource) top = mt_new_ok ("track>@training");
  g_autofree char *text = memres_resource_to_string (mr);
  g_autofree char *text2 = memres_resource_to_string (top);
  g_autoptr (GPtrArray) names = NULL;
  g_autofree char *file = NULL;
  g_autofree char *origin = NULL;
  g_autofree char *spec = NULL;
  GError *error = NULL;

  g_assert_cmpstr (text, ==, "limit:max=1MiB>stats>host:alignment=64");
  g_assert_cmpstr (text2, ==, "track:backtrace=false>limit:max=1MiB>stats>host:alignment=64");

  names = memres_config_list_resources (&file, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (file, ==, path);
  g_assert_cmpuint (names->len, ==, 3);
  g_assert_cmpstr (g_ptr_array_index (names, 0), ==, "base");
  g_assert_cmpstr (g_ptr_array_index (names, 1), ==, "training");
  g_assert_cmpstr (g_ptr_array_index (names, 2), ==, "odd.name-1");
  spec = memres_config_get_resource_spec ("odd.name-1", &origin, &error);
  g_assert_no_error (error);
  /* raw: written as on a command line, escapes included */
  g_assert_cmpstr (spec, ==, "log:path=/tmp/a\\,b.csv>host");
  g_assert_true (g_str_has_suffix (origin, "resources.conf:9"));

  /* the whole listing from one read: specs and origins in the names' order */
  {
    g_autoptr (GPtrArray) all = NULL;
    g_autoptr (GPtrArray) specs = NULL;
    g_autoptr (GPtrArray) origins = NULL;
    g_autofree char *origin0 = g_strdup_printf ("%s:3", path);

    all = memres_config_list_resources_full (NULL, &specs, &origins, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (all->len, ==, 3);
    g_assert_cmpuint (specs->len, ==, 3);
    g_assert_cmpuint (origins->len, ==, 3);
    g_assert_cmpstr (g_ptr_array_index (all, 1), ==, "training");
    g_assert_cmpstr (g_ptr_array_index (specs, 0), ==, "stats>host:alignment=64");
    g_assert_cmpstr (g_ptr_array_index (specs, 1), ==, "limit:max=1MiB>@base");
    g_assert_cmpstr (g_ptr_array_index (specs, 2), ==, spec);
    g_assert_cmpstr (g_ptr_array_index (origins, 0), ==, origin0);
    g_assert_cmpstr (g_ptr_array_index (origins, 2), ==, origin);
  }

  /* an undefined name lists the defined ones */
  assert_fails ("@nope", MEMRES_ERROR_NOT_FOUND, "no resource named @nope in ");
  assert_fails ("stats>@nope", MEMRES_ERROR_NOT_FOUND, "defined are @base, @training, @odd.name-1");
  /* a named stack still obeys the stack rules where it is used */
  assert_fails ("@training>host", MEMRES_ERROR_INVALID_ARGUMENT, "is a base kind");
  /* a malformed name is a malformed spec (INVALID_ARGUMENT), not an unknown name */
  {
    static const struct
    {
      const char *spec;
      const char *message;
    } malformed[] = {
      { "@", "invalid resource name \"@\": a name is one or more letters, digits, '_', '-' and "
             "'.' (an @NAME layer takes no options)" },
      { "@ok:max=3", "invalid resource name \"@ok:max=3\": a name is one or more letters, "
                     "digits, '_', '-' and '.' (an @NAME layer takes no options)" },
      { "stats>@base x", "invalid resource name \"@base x\": a name is one or more letters, "
                         "digits, '_', '-' and '.' (an @NAME layer takes no options)" },
      { "@a\x1b[2J", "invalid resource name \"@a\\x1b[2J\": a name is one or more letters, "
                     "digits, '_', '-' and '.' (an @NAME layer takes no options)" },
    };

    for (gsize i = 0; i < G_N_ELEMENTS (malformed); i++)
      {
        g_autoptr (MemresResource) bad = memres_resource_new (malformed[i].spec, &error);
        g_assert_null (bad);
        g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
        g_assert_cmpstr (error->message, ==, malformed[i].message);
        g_clear_error (&error);
      }
    g_assert_null (memres_config_get_resource_spec ("base:max=3", NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_assert_null (memres_config_get_resource_spec ("", NULL, &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    /* well-formed and unknown stays NOT_FOUND */
    {
      g_autofree char *want = g_strdup_printf ("no resource named @no.such_name-2 in %s: defined "
                                               "are @base, @training, @odd.name-1",
                                               path);

      g_assert_null (memres_config_get_resource_spec ("no.such_name-2", NULL, &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
      g_assert_cmpstr (error->message, ==, want);
      g_clear_error (&error);
    }
  }
}

/* A bad layer inside a named stack says which name it came from, with its definition and file:
 * an unknown option (checked when the layers are prepared), an unknown kind, a kind that
 * refuses its options at init. */
static void
test_named_errors (void)
{
  g_autofree char *path = use_config ("[a]\nspec=host:foo=1\n"
                                      "[c]\nspec=nosuchkind\n"
                                      "[d]\nspec=limit>host\n"
                                      "[outer]\nspec=stats>@a\n");
  g_autofree char *from_a = g_strdup_printf ("@a (host:foo=1, from %s:2): ", path);

  assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, from_a);
  assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, "has no option \"foo\"");
  /* a layer after a named stack that ends in a base kind: the fault is what follows */
  assert_fails ("@d>host", MEMRES_ERROR_INVALID_ARGUMENT,
                "the named stack ends in a base kind, so nothing can follow it (layer 3 comes "
                "after it)");
  assert_fails ("stats>@a", MEMRES_ERROR_INVALID_ARGUMENT, from_a);
  assert_fails ("@outer", MEMRES_ERROR_INVALID_ARGUMENT, from_a);
  assert_fails ("@c", MEMRES_ERROR_NOT_FOUND, "@c (nosuchkind, from ");
  assert_fails ("@d", MEMRES_ERROR_INVALID_ARGUMENT, "@d (limit>host, from ");
  /* a layer the application wrote has no such prefix */
  assert_fails ("host:foo=1", MEMRES_ERROR_INVALID_ARGUMENT, "has no option \"foo\"");
}

static void
test_cycles (void)
{
  g_autofree char *path = use_config ("[a]\nspec=stats>@b\n[b]\nspec=track>@a\n[self]\n"
                                      "spec=stats>@self\n");

  assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, "cycle (@a -> @b -> @a)");
  assert_fails ("limit:max=1>@self", MEMRES_ERROR_INVALID_ARGUMENT, "cycle (@self -> @self)");
}

/* Names that expand past 16 layers. */
static void
test_too_deep (void)
{
  g_autofree char *path = use_config ("[four]\nspec=stats>stats>stats>stats>host\n");
  g_autoptr (MemresResource) mr = NULL;

  mr = mt_new_ok ("@four");
  assert_fails (
      "stats>stats>stats>stats>stats>stats>stats>stats>stats>stats>stats>stats>stats>@four",
      MEMRES_ERROR_INVALID_ARGUMENT, "more than 16 layers once its named resources");
}

/* A chain of names, each one layer more: the error is said of the spec the application wrote,
 * not of the two-layer definition where the count ran over. */
static void
test_too_deep_chain (void)
{
  g_autoptr (GString) text = g_string_new ("[e0]\nspec=stats>host\n");
  g_autofree char *path = NULL;
  g_autoptr (MemresResource) mr = NULL;

  for (guint i = 1; i <= 15; i++)
    g_string_append_printf (text, "[e%u]\nspec=stats>@e%u\n", i, i - 1);
  path = use_config (text->str);
  mr = mt_new_ok ("@e14"); /* 16 layers */
  assert_fails ("@e15", MEMRES_ERROR_INVALID_ARGUMENT,
                "invalid spec \"@e15\": more than 16 layers once its named resources");
  assert_fails ("stats>@e14", MEMRES_ERROR_INVALID_ARGUMENT,
                "invalid spec \"stats>@e14\": more than 16 layers");
}

/* A file that starts with a UTF-8 byte-order mark, as some editors write it. */
static void
test_byte_order_mark (void)
{
  g_autofree char *path = use_config ("\xEF\xBB\xBF[a]\nspec=stats>host\n");
  g_autoptr (MemresResource) mr = mt_new_ok ("@a");

  g_assert_cmpstr (memres_resource_get_kind_name (mr), ==, "stats");
  g_assert_cmpstr (memres_resource_get_kind_name (memres_resource_get_upstream (mr)), ==, "host");
}

typedef struct
{
  const char *text;
  const char *needle; /* after "config file PATH" */
} BadFile;

static void
test_malformed (void)
{
  static const BadFile cases[] = {
    { "[a]\nspec=host\nthis line is nothing\n", ":3: \"this line is nothing\" is not a [name]" },
    { "spec=host\n", ":1: key \"spec\": outside any [name] group" },
    { "[a]\nspec=host\ncolour=red\n", ":3: key \"colour\": unknown key in [a]" },
    { "[a]\nspec=host\n[a]\nspec=host\n", ":3: [a] is defined twice" },
    { "[a]\nspec=host\nspec=host\n", ":3: key \"spec\": given twice in [a]" },
    { "[a]\ndescription=x\n[b]\nspec=host\n", ":1: key \"spec\": [a] has no spec" },
    { "[b]\nspec=host\n[a]\n", ":3: key \"spec\": [a] has no spec" },
    { "[a b]\nspec=host\n", ":1: invalid name [a b]" },
    { "[a\nspec=host\n", ":1: a group header without its ']'" },
    { "[a]\nspec=   \n", ":2: key \"spec\": [a] has an empty spec" },
    { "[a]\nspec=ho\xffst\n", ":2: not UTF-8 text" },
  };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = use_config (cases[i].text);
      g_autofree char *want = g_strdup_printf ("config file %s%s", path, cases[i].needle);
      g_autoptr (GError) error = NULL;
      g_autoptr (GPtrArray) names = memres_config_list_resources (NULL, &error);

      {
        g_autofree char *shown = g_strescape (cases[i].text, NULL);
        g_test_message ("%s", shown);
      }
      g_assert_null (names);
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
      if (strstr (error->message, want) == NULL)
        g_error ("expected \"%s\" in: %s", want, error->message);
      assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, want);
    }
  /* a NUL byte */
  {
    g_autofree char *path = write_config ("nul.conf", "[a]\nspec=host\n\0\n", 15);
    g_autofree char *want = g_strdup_printf ("config file %s:3: a NUL byte", path);

    g_setenv ("MEMRES_CONFIG", path, TRUE);
    assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, want);
  }
  /* a bad spec inside a good file: the error says which name and where */
  {
    g_autofree char *path = use_config ("[a]\nspec=stats>>host\n");

    assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, "@a (stats>>host, from ");
    assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, "resources.conf:2): invalid spec");
  }
}

static void
test_missing_unreadable_huge (void)
{
  g_autofree char *missing = g_build_filename (tmp_dir, "nonexistent.conf", NULL);
  g_autofree char *fifo = g_build_filename (tmp_dir, "fifo.conf", NULL);
  g_autofree char *plain = write_config ("plain.conf", "[a]\nspec=host\n", -1);
  g_autofree char *under_file = g_build_filename (plain, "x.conf", NULL);
  g_autofree char *huge_text = mt_repeat ("[a]\nspec=host\n", "# padding\n", 110000, "");
  g_autofree char *huge = write_config ("huge.conf", huge_text, -1);
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) names = NULL;

  /* a MEMRES_CONFIG that cannot be read is GLib's file error, its code the system's: a
   * missing file, a path under a regular file, a directory, a FIFO (refused at once, not waited
   * on); memres_resource_new() and memres_config_list_resources() alike */
  g_setenv ("MEMRES_CONFIG", missing, TRUE);
  mt_new_fails ("@a", G_FILE_ERROR, G_FILE_ERROR_NOENT,
                "nonexistent.conf: No such file or directory");
  names = memres_config_list_resources (NULL, &error);
  g_assert_null (names);
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_assert_true (g_str_has_prefix (error->message, "MEMRES_CONFIG: config file "));
  g_assert_nonnull (strstr (error->message, missing));
  g_clear_error (&error);
  g_setenv ("MEMRES_CONFIG", under_file, TRUE);
  mt_new_fails ("@a", G_FILE_ERROR, G_FILE_ERROR_NOTDIR, "x.conf: Not a directory");
  g_assert_null (memres_config_get_resource_spec ("a", NULL, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOTDIR);
  g_clear_error (&error);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_setenv ("MEMRES_CONFIG", fifo, TRUE);
  mt_new_fails ("@a", G_FILE_ERROR, G_FILE_ERROR_INVAL, "fifo.conf: not a regular file (a FIFO)");
  names = memres_config_list_resources (NULL, &error);
  g_assert_null (names);
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_clear_error (&error);
  g_remove (fifo);
  /* a device: refused, not read without end */
  g_setenv ("MEMRES_CONFIG", "/dev/zero", TRUE);
  mt_new_fails ("@a", G_FILE_ERROR, G_FILE_ERROR_INVAL,
                "config file /dev/zero: not a regular file (a device)");
  /* a directory, within a stack: the layer's prefix keeps the domain and the code */
  g_setenv ("MEMRES_CONFIG", tmp_dir, TRUE);
  mt_new_fails ("@a", G_FILE_ERROR, G_FILE_ERROR_ISDIR, "not a regular file (a directory)");
  mt_new_fails ("stats>@a", G_FILE_ERROR, G_FILE_ERROR_ISDIR, "MEMRES_CONFIG: config file");

  g_setenv ("MEMRES_CONFIG", huge, TRUE);
  assert_fails ("@a", MEMRES_ERROR_INVALID_ARGUMENT, "larger than the 1048576 allowed");

  if (geteuid () != 0)
    {
      g_autofree char *path = use_config ("[a]\nspec=host\n");

      g_assert_cmpint (g_chmod (path, 0), ==, 0);
      mt_new_fails ("@a", G_FILE_ERROR, G_FILE_ERROR_ACCES, path);
      g_assert_cmpint (g_chmod (path, 0644), ==, 0);
    }
  else
    g_test_message ("running as root: the unreadable file case is not testable");
}

/* Without MEMRES_CONFIG: $XDG_CONFIG_HOME/memres/resources.conf, else the system dirs', else
 * no names at all. */
static void
test_search_path (void)
{
  g_autofree char *user = g_build_filename (user_dir, "memres", "resources.conf", NULL);
  g_autofree char *system = g_build_filename (system_dir, "memres", "resources.conf", NULL);
  g_autofree char *file = NULL;
  g_autoptr (GPtrArray) names = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autofree char *system_parent = g_path_get_dirname (system);
  g_autofree char *user_parent = g_path_get_dirname (user);
  GError *error = NULL;

  g_unsetenv ("MEMRES_CONFIG");
  g_assert_cmpint (g_mkdir_with_parents (user_dir, 0755), ==, 0);
  names = memres_config_list_resources (&file, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (names->len, ==, 0);
  g_assert_null (file);
  g_clear_pointer (&names, g_ptr_array_unref);
  assert_fails ("@x", MEMRES_ERROR_NOT_FOUND, "no config file defines names");

  g_assert_cmpint (g_mkdir_with_parents (system_parent, 0755), ==, 0);
  g_assert_true (g_file_set_contents (system, "[sys]\nspec=host\n", -1, NULL));
  mr = mt_new_ok ("@sys");
  g_clear_pointer (&mr, memres_resource_unref);

  g_assert_cmpint (g_mkdir_with_parents (user_parent, 0755), ==, 0);
  g_assert_true (g_file_set_contents (user, "[usr]\nspec=stats>host\n", -1, NULL));
  names = memres_config_list_resources (&file, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (file, ==, user);
  g_assert_cmpuint (names->len, ==, 1);
  mr = mt_new_ok ("@usr");
  /* the user's file wins whole: the system's names are not merged in */
  assert_fails ("@sys", MEMRES_ERROR_NOT_FOUND, "defined are @usr");
  g_clear_pointer (&names, g_ptr_array_unref);
  g_clear_pointer (&file, g_free);

  /* MEMRES_CONFIG set empty (`MEMRES_CONFIG= prog`): no config file at all, and no error */
  g_setenv ("MEMRES_CONFIG", "", TRUE);
  names = memres_config_list_resources (&file, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (names->len, ==, 0);
  g_assert_null (file);
  /* the user's file exists: the message says why it was not read, not to write one */
  g_assert_true (g_file_test (user, G_FILE_TEST_EXISTS));
  g_clear_pointer (&mr, memres_resource_unref);
  mr = memres_resource_new ("@usr", &error);
  g_assert_null (mr);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_assert_cmpstr (error->message, ==,
                   "no resource named @usr: MEMRES_CONFIG is set to the empty string: no config "
                   "file is read");
  g_clear_error (&error);
  g_unsetenv ("MEMRES_CONFIG");
  g_remove (user);
  g_remove (system);
}

/* memres_config_get_resource_description(): the text as written, NULL for a group without
 * one; the errors of a lookup. */
static void
test_description (void)
{
  g_autofree char *path = use_config ("[base]\n"
                                      "spec=host\n"
                                      "description =  what the job may use \n"
                                      "[bare]\n"
                                      "spec=@base\n");
  g_autoptr (GError) error = NULL;
  char *description = (char *) "unset";

  g_assert_true (memres_config_get_resource_description ("base", &description, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (description, ==, "what the job may use");
  g_free (description);
  g_assert_true (memres_config_get_resource_description ("bare", &description, &error));
  g_assert_no_error (error);
  g_assert_null (description);
  g_assert_false (memres_config_get_resource_description ("nope", &description, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_assert_null (description);
  g_clear_error (&error);
  g_assert_false (memres_config_get_resource_description ("a:b", &description, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_assert_null (description);
  g_unlink (path);
}

/* memres_spec_parse(): every layer, names expanded, values unescaped as bytes; nothing is
 * created (a log layer's file is not opened); a malformed spec or an unknown name fails. */
static void
test_spec_parse (void)
{
  g_autofree char *path = use_config ("[named]\n"
                                      "spec=log:path=/nonexistent/a\\,b.csv,flush=true>host\n");
  g_autoptr (GVariant) layers = NULL;
  g_autoptr (GVariant) options = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *log_path = NULL;
  const char *kind = NULL;

  layers = memres_spec_parse ("no_such_kind:x=1>@named", &error);
  g_assert_no_error (error);
  g_assert_nonnull (layers);
  g_assert_cmpstr (g_variant_get_type_string (layers), ==, "a(sa{say})");
  g_assert_cmpuint (g_variant_n_children (layers), ==, 3);
  g_variant_get_child (layers, 1, "(&s@a{say})", &kind, &options);
  g_assert_cmpstr (kind, ==, "log");
  g_assert_cmpuint (g_variant_n_children (options), ==, 2);
  g_assert_true (g_variant_lookup (options, "path", "^ay", &log_path));
  g_assert_cmpstr (log_path, ==, "/nonexistent/a,b.csv");
  g_clear_pointer (&options, g_variant_unref);
  g_variant_get_child (layers, 2, "(&s@a{say})", &kind, &options);
  g_assert_cmpstr (kind, ==, "host");
  g_assert_cmpuint (g_variant_n_children (options), ==, 0);
  g_clear_pointer (&options, g_variant_unref);
  g_clear_pointer (&layers, g_variant_unref);

  /* a value that is not UTF-8 comes back as it was given */
  layers = memres_spec_parse ("log:path=/tmp/\xff\\>x>host", &error);
  g_assert_no_error (error);
  g_variant_get_child (layers, 0, "(&s@a{say})", &kind, &options);
  g_clear_pointer (&log_path, g_free);
  g_assert_true (g_variant_lookup (options, "path", "^ay", &log_path));
  g_assert_cmpstr (log_path, ==, "/tmp/\xff>x");
  g_clear_pointer (&options, g_variant_unref);
  g_clear_pointer (&layers, g_variant_unref);

  g_assert_null (memres_spec_parse ("host>>host", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_spec_parse ("log:path>host", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_assert_null (memres_spec_parse ("@undefined", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_unlink (path);
}

int
main (int argc, char **argv)
{
  tmp_dir = g_dir_make_tmp ("memres-test-config-XXXXXX", NULL);
  user_dir = g_build_filename (tmp_dir, "user", NULL);
  system_dir = g_build_filename (tmp_dir, "system", NULL);
  /* before GLib reads and caches them */
  g_setenv ("XDG_CONFIG_HOME", user_dir, TRUE);
  g_setenv ("XDG_CONFIG_DIRS", system_dir, TRUE);
  mt_init (&argc, &argv);
  g_test_add_func ("/config/search-path", test_search_path);
  g_test_add_func ("/config/named", test_named);
  g_test_add_func ("/config/named-errors", test_named_errors);
  g_test_add_func ("/config/cycles", test_cycles);
  g_test_add_func ("/config/too-deep", test_too_deep);
  g_test_add_func ("/config/too-deep-chain", test_too_deep_chain);
  g_test_add_func ("/config/byte-order-mark", test_byte_order_mark);
  g_test_add_func ("/config/malformed", test_malformed);
  g_test_add_func ("/config/missing-unreadable-huge", test_missing_unreadable_huge);
  g_test_add_func ("/config/description", test_description);
  g_test_add_func ("/config/spec-parse", test_spec_parse);
  return g_test_run ();
}

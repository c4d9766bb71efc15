/* test-tool.c: the `memres` command as a user runs it (the program named by MEMRES_TOOL), with
 * no driver (suite core) and against the fake (suite fake). */
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "testutil.h"

typedef struct
{
  int status; /* exit status */
  char *out;
  char *err;
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}

/* Runs `memres ARGS...` (@args NULL-terminated) with the test's environment, where @env, when
 * not NULL, sets variables: NULL-terminated NAME, VALUE pairs. */
static void
run_toolv (Run *r, const char *const *env, const char *const *args)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_auto (GStrv) envp = g_get_environ ();
  GError *error = NULL;
  int wait_status;

  g_assert_nonnull (tool);
  g_ptr_array_add (argv, (gpointer) tool);
  for (; *args != NULL; args++)
    g_ptr_array_add (argv, (gpointer) *args);
  g_ptr_array_add (argv, NULL);
  for (; env != NULL && env[0] != NULL; env += 2)
    envp = g_environ_setenv (envp, env[0], env[1], TRUE);

  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, envp, G_SPAWN_DEFAULT, NULL, NULL,
                               &r->out, &r->err, &wait_status, &error));
  g_assert_no_error (error);
  g_assert_true (WIFEXITED (wait_status));
  r->status = WEXITSTATUS (wait_status);
}

/* Runs `memres ARGS...` (NULL-terminated) with the test's environment. */
static void
run_tool (Run *r, ...)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();
  const char *arg;
  va_list ap;

  va_start (ap, r);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (args, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (args, NULL);
  run_toolv (r, NULL, (const char *const *) args->pdata);
}

/* The command's promise: an error is one line on stderr, whatever the input echoed in it. */
static void
assert_one_error_line (const Run *r)
{
  const char *nl = strchr (r->err, '\n');

  g_assert_cmpint (r->status, !=, 0);
  g_assert_true (g_str_has_prefix (r->err, "memres"));
  g_assert_nonnull (nl);
  g_assert_cmpstr (nl + 1, ==, "");
  g_assert_true (g_utf8_validate (r->err, -1, NULL));
}

static void
test_error_one_line (void)
{
  static const char *const specs[] = {
    "host\n",                  /* kind name */
    "host:alignment=8\nx",     /* option value */
    "host:alignment=\r8\t",    /* other control characters */
    "h\xff\xfe",               /* not UTF-8 */
    "host:alignment=8\x1b[2J", /* a terminal escape */
  };

  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      Run r = { 0 };

      run_tool (&r, "alloc", specs[i], "1", NULL);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      run_clear (&r);
    }
  {
    Run r = { 0 };

    run_tool (&r, "alloc", "host", "1\n2", NULL);
    assert_one_error_line (&r);
    g_assert_nonnull (strstr (r.err, "\"1\\n2\""));
    run_clear (&r);
  }
}

/* Input of any size gives one short line: the spec and the pattern quoted in part, with their
 * size; an unknown command and GLib's own message about an unknown option made printable.
 * (Linux takes at most 128 KiB in one argument.) */
static void
test_error_huge_input (void)
{
  g_autofree char *spec = g_strnfill (100 * 1024, 'a');
  g_autofree char *value = g_strconcat ("host:alignment=", spec, NULL);
  g_autofree char *option = g_strconcat ("--", spec, "\x1b[2J", NULL);
  g_autofree char *head = g_strnfill (64, 'a');
  struct
  {
    const char *args[6];
    int status;
    const char *needle;
    gsize max_len;
  } cases[] = {
    { { "alloc", spec, "1" }, 1, "... (102400 bytes)\": kind names match", 300 },
    { { "alloc", value, "1" }, 1, "invalid size \"aaaaaaaa", 300 },
    { { "alloc", "--pattern", spec, "host", "1" }, 1, "invalid pattern \"aaaaaaaa", 300 },
    { { "ho\x1b[2Jst\n" }, 2, "unknown command \"ho\\x1b[2Jst\\n\"", 300 },
    /* GLib's message quotes the option whole: the line is cut at 4 KiB */
    { { "kinds", option }, 2, "memres kinds: ", 4200 },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Run r = { 0 };

      run_toolv (&r, NULL, cases[i].args);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, cases[i].status);
      mt_assert_printable (g_strchomp (r.err), cases[i].max_len);
      if (strstr (r.err, cases[i].needle) == NULL)
        g_error ("stderr lacks \"%s\": %.300s", cases[i].needle, r.err);
      if (i < 3)
        g_assert_nonnull (strstr (r.err, head));
      run_clear (&r);
    }
}

/* The broken plugins of tests/plugins/ and two more files: each plugin file, the code name of
 * its error and a piece of the reason. */
static const struct
{
  const char *file;
  const char *domain;
  int code;
  const char *code_name;
  const char *reason;
} broken[] = {
  { "libmemres-abi_new.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
    "MEMRES_PLUGIN_ERROR_ABI_MISMATCH", "plugin ABI 2.0" },
  { "libmemres-abi_small.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
    "MEMRES_PLUGIN_ERROR_ABI_MISMATCH", "struct_size 12" },
  { "libmemres-wrong_name.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_NAME_MISMATCH,
    "MEMRES_PLUGIN_ERROR_NAME_MISMATCH", "names itself \"other_name\"" },
  { "libmemres-no_symbol.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_SYMBOL,
    "MEMRES_PLUGIN_ERROR_SYMBOL", "has no entry point memres_plugin_no_symbol_get_desc" },
  { "libmemres-init_fails.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_INIT_FAILED,
    "MEMRES_PLUGIN_ERROR_INIT_FAILED", "failed to initialize: init_fails fails on purpose" },
  { "libmemres-duplicate.so", "memres-error-quark", MEMRES_ERROR_EXISTS, "MEMRES_ERROR_EXISTS",
    "a kind named \"host\" is already registered" },
  /* in the scratch directory: not a shared object; a name no kind can have */
  { "libmemres-garbage.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_MODULE,
    "MEMRES_PLUGIN_ERROR_MODULE", "plugin \"garbage\" could not be opened: " },
  { "libmemres-Bad-Name.so", "memres-error-quark", MEMRES_ERROR_INVALID_ARGUMENT,
    "MEMRES_ERROR_INVALID_ARGUMENT", "invalid kind name \"Bad-Name\"" },
};

/* `memres kinds` on a path with broken plugins lists every loadable kind, then each broken
 * plugin file with its error's code name and message; exit status 3 and one line on stderr. */
static void
test_kinds_broken_plugins (void)
{
  const char *plugin_dir = g_getenv ("MEMRES_TEST_PLUGIN_DIR");
  g_autofree char *tmp = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *garbage = g_build_filename (tmp, "libmemres-garbage.so", NULL);
  g_autofree char *bad_name = g_build_filename (tmp, "libmemres-Bad-Name.so", NULL);
  g_autofree char *path = g_strjoin (":", plugin_dir, tmp, NULL);
  const char *const text_args[] = { "kinds", NULL };
  const char *const json_args[] = { "kinds", "--json", NULL };
  const char *const env[] = { "MEMRES_PLUGIN_PATH", path, NULL };
  Run text = { 0 }, json = { 0 };

  g_assert_nonnull (plugin_dir);
  g_assert_true (g_file_set_contents (garbage, "this is not an ELF file\n", -1, NULL));
  g_assert_true (g_file_set_contents (bad_name, "", -1, NULL));
  run_toolv (&text, env, text_args);
  run_toolv (&json, env, json_args);
  g_test_message ("%s%s", text.out, text.err);

  for (gsize i = 0; i < G_N_ELEMENTS (broken); i++)
    {
      const char *dir = i < G_N_ELEMENTS (broken) - 2 ? plugin_dir : tmp;
      g_autofree char *file = g_build_filename (dir, broken[i].file, NULL);
      g_autofree char *entry
          = g_strdup_printf ("\nnot loadable: %s\n  %s: ", file, broken[i].code_name);
      g_autofree char *object = g_strdup_printf (
          "{\n      \"path\": \"%s\",\n      \"domain\": \"%s\",\n      \"code\": %d,\n"
          "      \"code_name\": \"%s\",\n      \"message\": \"",
          file, broken[i].domain, broken[i].code, broken[i].code_name);
      g_autofree char *json_reason = g_strescape (broken[i].reason, NULL); /* \" */
      const char *at = strstr (text.out, entry);
      const char *line_end;

      /* text: the path, then on the next line the code name and a message with the reason */
      if (at == NULL)
        g_error ("no \"%s\" in the listing", entry);
      at += strlen (entry);
      line_end = strchr (at, '\n');
      g_assert_nonnull (line_end);
      g_assert_nonnull (g_strstr_len (at, line_end - at, broken[i].reason));
      /* JSON: one object with the path, the domain, the code, its name and the message */
      at = strstr (json.out, object);
      if (at == NULL)
        g_error ("no \"%s\" in the JSON", object);
      line_end = strchr (at + strlen (object), '\n');
      g_assert_nonnull (g_strstr_len (at, line_end - at, json_reason));
    }
  /* the loadable kinds are all there, before the broken plugins */
  g_assert_true (g_str_has_prefix (text.out, "abi_old\n"));
  g_assert_nonnull (strstr (text.out, "\ngood_extra\n"));
  g_assert_nonnull (strstr (text.out, "\nhost\n"));
  g_assert_cmpuint (strstr (text.out, "\nhost\n") - text.out, <,
                    strstr (text.out, "not loadable") - text.out);
  g_assert_nonnull (strstr (json.out, "\"name\": \"good_extra\""));
  g_assert_nonnull (strstr (json.out, "\n  \"broken_plugins\": [\n"));
  /* exit status 3, and one line on stderr that says how many */
  g_assert_cmpint (text.status, ==, 3);
  g_assert_cmpint (json.status, ==, 3);
  g_assert_cmpstr (text.err, ==,
                   "memres: 8 plugin files on the search path did not load (listed after the "
                   "kinds)\n");
  g_assert_cmpstr (json.err, ==,
                   "memres: 8 plugin files on the search path did not load (see "
                   "\"broken_plugins\")\n");
  run_clear (&text);
  run_clear (&json);
  g_assert_cmpint (g_unlink (garbage), ==, 0);
  g_assert_cmpint (g_unlink (bad_name), ==, 0);
  g_assert_cmpint (g_rmdir (tmp), ==, 0);
}

/* A path whose every plugin loads: exit status 0, nothing on stderr, no broken plugin. */
static void
test_kinds_healthy (void)
{
  Run r = { 0 };

  run_tool (&r, "kinds", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.err, ==, "");
  g_assert_true (g_str_has_prefix (r.out, "cache\n"));
  g_assert_null (strstr (r.out, "not loadable"));
  run_clear (&r);

  run_tool (&r, "kinds", "--json", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.err, ==, "");
  g_assert_nonnull (strstr (r.out, "\"name\": \"vmm\""));
  g_assert_true (g_str_has_suffix (r.out, "\n  \"broken_plugins\": []\n}\n"));
  run_clear (&r);

  /* named kinds: no listing of the path, so no broken_plugins */
  run_tool (&r, "kinds", "--json", "host", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strstr (r.out, "broken_plugins"));
  run_clear (&r);
}

/* A kind that rounds sizes up: the command reports the buffer it got and verified. */
static void
test_alloc_reports_rounded_size (void)
{
  Run r = { 0 };
  g_autofree char *want = NULL;

  if (!mt_require_devices (1))
    return;
  run_tool (&r, "alloc", "--json", "vmm", "1MiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_test_message ("%s", r.out);
  /* vmm rounds to its granularity (the fake's and the H200's: 2 MiB) */
  g_assert_nonnull (strstr (r.out, "\"size\": 2097152"));
  g_assert_nonnull (strstr (r.out, "\"requested_size\": 1048576"));
  g_assert_nonnull (strstr (r.out, "\"verified_bytes\": 2097152"));
  run_clear (&r);

  run_tool (&r, "alloc", "vmm", "1MiB", NULL);
  g_test_message ("%s", r.out);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\nbuffer    2.0 MiB (2097152 bytes) at "));
  g_assert_nonnull (strstr (r.out, " (rounded up from 1048576 bytes)\n"));
  g_assert_nonnull (strstr (r.out, "every byte checked (2097152)"));
  run_clear (&r);
}

/* A negative SIZE is an invalid size, not an unknown option, before and after "--": a usage
 * error (exit status 2) that says what a size is. Other arguments that start with '-' are still
 * unknown options; "--" ends the options. */
static void
test_alloc_negative_size (void)
{
  struct
  {
    const char *args[6];
    const char *shown;
  } cases[] = {
    { { "alloc", "host", "-1" }, "\"-1\"" },
    { { "alloc", "-1" }, "\"-1\"" },
    { { "alloc", "host", "-1KiB" }, "\"-1KiB\"" },
    { { "alloc", "--json", "host", "-.5" }, "\"-.5\"" },
    { { "alloc", "host", "--", "-1" }, "\"-1\"" },
    { { "alloc", "--", "host", "-1" }, "\"-1\"" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Run r = { 0 };
      g_autofree char *want = g_strdup_printf (
          "memres alloc: invalid size %s: expected a non-negative whole number of bytes with an "
          "optional B, KiB, MiB, GiB or TiB suffix, or max (see memres alloc --help)\n",
          cases[i].shown);

      run_toolv (&r, NULL, cases[i].args);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 2);
      g_assert_cmpstr (r.err, ==, want);
      g_assert_cmpstr (r.out, ==, "");
      run_clear (&r);
    }

  {
    Run r = { 0 };

    /* an option it does not know is still one, and "--" makes a later "--json" an operand */
    run_tool (&r, "alloc", "host", "-x", "1", NULL);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_cmpstr (r.err, ==, "memres alloc: Unknown option -x (see memres alloc --help)\n");
    run_clear (&r);
    run_tool (&r, "alloc", "host", "--", "--json", NULL);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_nonnull (strstr (r.err, "invalid size \"--json\""));
    run_clear (&r);
    /* "--" before valid operands, and a negative --device taken as that option's value */
    run_tool (&r, "alloc", "--device", "-1", "--", "host", "8", NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "");
    g_assert_true (g_str_has_prefix (r.out, "resource  host:"));
    g_assert_nonnull (strstr (r.out, "\nbuffer    8 bytes at 0x"));
    run_clear (&r);
  }
}

/* Sizes below 1 KiB print as the byte count alone; from 1 KiB on the IEC form and the count. */
static void
test_alloc_small_sizes (void)
{
  static const struct
  {
    const char *size;
    const char *shown;
  } cases[] = {
    { "1", "1 byte" },
    { "100", "100 bytes" },
    { "1023", "1023 bytes" },
    { "1KiB", "1.0 KiB (1024 bytes)" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      Run r = { 0 };
      g_autofree char *buffer = g_strdup_printf ("\nbuffer    %s at 0x", cases[i].shown);
      g_autofree char *stats
          = g_strdup_printf ("\nstats     used %s, high %s\n", cases[i].shown, cases[i].shown);

      run_tool (&r, "alloc", "host", cases[i].size, NULL);
      g_test_message ("%s", r.out);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_cmpstr (r.err, ==, "");
      g_assert_nonnull (strstr (r.out, buffer));
      g_assert_nonnull (strstr (r.out, stats));
      if (i < 3)
        g_assert_null (strstr (r.out, "bytes ("));
      run_clear (&r);
    }
}

/* A 0-byte allocation is an empty buffer at address 0: the command says so, writes and reads
 * nothing, and succeeds; the same through `default` (the device's pool against the fake). */
static void
test_alloc_zero_size (void)
{
  static const char *const specs[] = { "host", "default" };

  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      Run r = { 0 };

      run_tool (&r, "alloc", specs[i], "0", NULL);
      g_test_message ("%s", r.out);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_cmpstr (r.err, ==, "");
      g_assert_nonnull (strstr (r.out, "\nbuffer    0 bytes at 0x0, "));
      g_assert_nonnull (strstr (
          r.out,
          "\nverified  nothing: a 0-byte buffer is empty (address 0, nothing to write or read)\n"));
      g_assert_null (strstr (r.out, "filled with"));
      g_assert_true (g_str_has_suffix (r.out, "\nclosed    the buffer was freed\n"));
      run_clear (&r);

      run_tool (&r, "alloc", "--json", specs[i], "0", NULL);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_nonnull (strstr (r.out, "\"address\": \"0x0\",\n    \"size\": 0,\n"));
      g_assert_nonnull (strstr (r.out, "\"verified_bytes\": 0,"));
      run_clear (&r);
    }
}

/* `default` that is host memory says why: one line in the text, "default_host_reason" in the
 * JSON (null when it is the device's pool; absent for a named spec). The reasons: no driver
 * (suite core), a driver without devices, device -1 (both suites). */
static void
test_alloc_default_reason (void)
{
  g_autoptr (GError) driver_error = NULL;
  const MemresCudaDriver *drv = memres_cuda_get_driver (&driver_error);
  const char *const no_devices[] = { "FAKECUDA_DEVICES", "0", NULL };
  const char *const default_args[] = { "alloc", "default", "1KiB", NULL };
  const char *const default_json[] = { "alloc", "--json", "default", "1KiB", NULL };
  Run r = { 0 };

  if (drv == NULL)
    {
      g_autofree char *line
          = g_strdup_printf ("\ndefault   host memory: %s\n", driver_error->message);
      g_autofree char *json_reason = g_strescape (driver_error->message, NULL);
      g_autofree char *field
          = g_strdup_printf ("\n  \"default_host_reason\": \"%s\",\n", json_reason);

      g_assert_true (g_str_has_prefix (driver_error->message, "No CUDA driver could be loaded"));
      run_tool (&r, "alloc", "default", "1KiB", NULL);
      g_test_message ("%s", r.out);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_cmpstr (r.err, ==, "");
      g_assert_true (g_str_has_prefix (r.out, "resource  host:"));
      g_assert_nonnull (strstr (r.out, line));
      run_clear (&r);
      /* SIZE alone is `default` too */
      run_tool (&r, "alloc", "--json", "1KiB", NULL);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_nonnull (strstr (r.out, "\n  \"kind\": \"host\",\n"));
      g_assert_nonnull (strstr (r.out, field));
      run_clear (&r);
    }
  else if (mt_require_fake ("FAKECUDA_DEVICES=0 needs the fake"))
    {
      /* the device's pool: no line, a null reason */
      run_tool (&r, "alloc", "default", "1KiB", NULL);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_true (g_str_has_prefix (r.out, "resource  dmr:"));
      g_assert_null (strstr (r.out, "\ndefault "));
      run_clear (&r);
      run_tool (&r, "alloc", "--json", "default", "1KiB", NULL);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_nonnull (strstr (r.out, "\n  \"default_host_reason\": null,\n"));
      run_clear (&r);
      /* a driver that reports no device */
      run_toolv (&r, no_devices, default_args);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_true (g_str_has_prefix (r.out, "resource  host:"));
      g_assert_nonnull (
          strstr (r.out, "\ndefault   host memory: the CUDA driver reports no device\n"));
      run_clear (&r);
      run_toolv (&r, no_devices, default_json);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_nonnull (
          strstr (r.out, "\n  \"default_host_reason\": \"the CUDA driver reports no device\",\n"));
      run_clear (&r);
    }

  /* device -1 is host memory, in either suite */
  run_tool (&r, "alloc", "--device", "-1", "default", "1KiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\ndefault   host memory: asked for device -1\n"));
  run_clear (&r);
  /* a named spec: neither the line nor the field */
  run_tool (&r, "alloc", "host", "1KiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strstr (r.out, "\ndefault "));
  run_clear (&r);
  run_tool (&r, "alloc", "--json", "host", "1KiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strstr (r.out, "default_host_reason"));
  run_clear (&r);
}

/* ipc-serve with a resource that cannot be shared fails before it listens, not at the first
 * client (with --count 0 it would otherwise fail every client, forever). */
static void
test_ipc_serve_not_shareable (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  Run r = { 0 };

  g_assert_nonnull (dir);
  run_tool (&r, "ipc-serve", "--spec", "host", "--count", "1", path, NULL);
  g_test_message ("%s", r.err);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "cannot be shared"));
  g_assert_cmpstr (r.out, ==, "");
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  run_clear (&r);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/tool/error/one-line", test_error_one_line);
  g_test_add_func ("/tool/error/huge-input", test_error_huge_input);
  g_test_add_func ("/tool/kinds/broken-plugins", test_kinds_broken_plugins);
  g_test_add_func ("/tool/kinds/healthy", test_kinds_healthy);
  g_test_add_func ("/tool/alloc/rounded-size", test_alloc_reports_rounded_size);
  g_test_add_func ("/tool/alloc/negative-size", test_alloc_negative_size);
  g_test_add_func ("/tool/alloc/small-sizes", test_alloc_small_sizes);
  g_test_add_func ("/tool/alloc/zero-size", test_alloc_zero_size);
  g_test_add_func ("/tool/alloc/default-reason", test_alloc_default_reason);
  g_test_add_func ("/tool/ipc-serve/not-shareable", test_ipc_serve_not_shareable);
  return g_test_run ();
}

/* test-tool.c: the `memres` command as a user runs it (the program named by MEMRES_TOOL), with
 * no driver (suite core) and against the fake (suite fake). */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* @out is one JSON document: it opens with "{" and no other top-level one starts after it
 * (memres's JSON indents every nested object, so only a top-level one starts a line with
 * "{"). */
static void
assert_one_json_document (const char *out)
{
  g_assert_true (g_str_has_prefix (out, "{\n"));
  g_assert_null (strstr (out, "\n{"));
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
      g_assert_cmpint (r.status, ==, 2); /* an invalid operand */
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
    { { "alloc", spec, "1" }, 2, "... (102400 bytes)\": kind names match", 300 },
    { { "alloc", value, "1" }, 2, "invalid size \"aaaaaaaa", 300 },
    { { "alloc", "--pattern", spec, "host", "1" }, 2, "invalid pattern \"aaaaaaaa", 300 },
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

/* An unknown command with --json: the one error line on stderr, and on stdout the error as
 * one JSON document, a usage error (exit status 2) without a GError; without --json, stdout
 * stays empty. */
static void
test_unknown_command_json (void)
{
  Run r = { 0 };

  run_tool (&r, "nosuch", "--json", NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_true (g_str_has_prefix (r.err, "memres: unknown command \"nosuch\" (commands: "));
  /* every command that --help lists (trace, snapshot and view were missing) */
  g_assert_nonnull (strstr (r.err, "(commands: kinds, info, alloc, resources, replay, trace, "
                                   "snapshot, view, ipc-serve, ipc-attach; see memres --help)\n"));
  assert_one_json_document (r.out);
  g_assert_true (g_str_has_prefix (r.out, "{\n  \"error\": {\n    \"message\": \"unknown "
                                          "command \\\"nosuch\\\" (commands: kinds, "));
  g_assert_nonnull (strstr (r.out, "\n    \"domain\": null,\n    \"code\": null,\n"
                                   "    \"code_name\": null,\n    \"exit_status\": 2\n  }\n}\n"));
  run_clear (&r);
  run_tool (&r, "nosuch", "-j", NULL);
  g_assert_cmpint (r.status, ==, 2);
  assert_one_json_document (r.out);
  run_clear (&r);
  run_tool (&r, "nosuch", NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_cmpstr (r.out, ==, "");
  run_clear (&r);
}

/* `memres --json CMD` is `memres CMD --json`: the same document; a second --json in the
 * command's place is an unknown command (usage error, with --json the error document), and so
 * is a lone --json. */
static void
test_json_first (void)
{
  Run a = { 0 }, b = { 0 };

  run_tool (&a, "--json", "kinds", NULL);
  run_tool (&b, "kinds", "--json", NULL);
  g_assert_cmpint (a.status, ==, b.status);
  assert_one_json_document (a.out);
  g_assert_cmpstr (a.out, ==, b.out);
  run_clear (&a);
  run_clear (&b);
  run_tool (&a, "--json", "--json", "kinds", NULL);
  g_assert_cmpint (a.status, ==, 2);
  g_assert_true (g_str_has_prefix (a.err, "memres: unknown command \"--json\""));
  assert_one_json_document (a.out);
  run_clear (&a);
  run_tool (&a, "--json", NULL);
  g_assert_cmpint (a.status, ==, 2);
  assert_one_json_document (a.out);
  run_clear (&a);
}

/* `memres --version` prints "memres VERSION"; with --json (before or after it) one JSON document
 * holding the version instead, exit status 0 both ways. */
static void
test_version (void)
{
  g_autofree char *plain = g_strdup_printf ("memres %s\n", memres_get_version ());
  g_autofree char *json = g_strdup_printf ("{\n  \"version\": \"%s\"\n}\n", memres_get_version ());
  static const char *const json_args[][3] = {
    { "--json", "--version" },
    { "--version", "--json" },
    { "-j", "--version" },
  };
  Run r = { 0 };

  run_tool (&r, "--version", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, plain);
  g_assert_cmpstr (r.err, ==, "");
  run_clear (&r);
  for (gsize i = 0; i < G_N_ELEMENTS (json_args); i++)
    {
      run_toolv (&r, NULL, json_args[i]);
      g_assert_cmpint (r.status, ==, 0);
      assert_one_json_document (r.out);
      g_assert_cmpstr (r.out, ==, json);
      g_assert_cmpstr (r.err, ==, "");
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
    "MEMRES_PLUGIN_ERROR_ABI_MISMATCH", "plugin ABI 3.0" },
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
  { "libmemres-reserved.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
    "MEMRES_PLUGIN_ERROR_ABI_MISMATCH", "reserved is 7, must be 0" },
  { "libmemres-missing_symbol.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_MODULE,
    "MEMRES_PLUGIN_ERROR_MODULE", "memres_test_function_that_does_not_exist" },
  { "libmemres-quark_fails.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_INIT_FAILED,
    "MEMRES_PLUGIN_ERROR_INIT_FAILED", "quark_fails fails on purpose" },
  { "libmemres-note_new.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
    "MEMRES_PLUGIN_ERROR_ABI_MISMATCH", "plugin ABI 2.99" },
  { "libmemres-note_name.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_NAME_MISMATCH,
    "MEMRES_PLUGIN_ERROR_NAME_MISMATCH", "names itself \"something_else\"" },
  /* in the scratch directory: not a shared object; a name no kind can have */
  { "libmemres-garbage.so", "memres-plugin-error-quark", MEMRES_PLUGIN_ERROR_MODULE,
    "MEMRES_PLUGIN_ERROR_MODULE", "file too short" },
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
  /* one JSON document on stdout (an error document after it made it invalid JSON) */
  assert_one_json_document (json.out);
  g_assert_null (strstr (json.out, "\"exit_status\""));
  /* exit status 3, and one line on stderr that says how many */
  g_assert_cmpint (text.status, ==, 3);
  g_assert_cmpint (json.status, ==, 3);
  g_assert_cmpstr (text.err, ==,
                   "memres: 13 plugin files on the search path did not load (listed after the "
                   "kinds)\n");
  g_assert_cmpstr (json.err, ==,
                   "memres: 13 plugin files on the search path did not load (see "
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
  g_assert_true (g_str_has_prefix (r.out, "arena\n"));
  g_assert_null (strstr (r.out, "not loadable"));
  run_clear (&r);

  run_tool (&r, "kinds", "--json", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.err, ==, "");
  g_assert_nonnull (strstr (r.out, "\"name\": \"vmm\""));
  g_assert_nonnull (strstr (r.out, "\"name\": \"graph\""));
  g_assert_true (g_str_has_suffix (r.out, "\n  \"broken_plugins\": []\n}\n"));
  run_clear (&r);

  /* named kinds: no listing of the path, so no broken_plugins */
  run_tool (&r, "kinds", "--json", "host", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strstr (r.out, "broken_plugins"));
  run_clear (&r);

  /* a kind named twice is listed once, in the order of first mention */
  {
    Run once = { 0 };
    const char *host, *cache;

    run_tool (&once, "kinds", "host", "cache", NULL);
    g_assert_cmpint (once.status, ==, 0);
    run_tool (&r, "kinds", "host", "cache", "host", "cache", NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "");
    g_assert_cmpstr (r.out, ==, once.out);
    g_assert_true (g_str_has_prefix (r.out, "host\n"));
    g_assert_nonnull (strstr (r.out, "\n\ncache\n"));
    g_assert_null (strstr (strstr (r.out, "\n\ncache\n"), "\nhost\n"));
    run_clear (&r);
    run_clear (&once);
    run_tool (&r, "kinds", "--json", "cache", "host", "cache", NULL);
    g_assert_cmpint (r.status, ==, 0);
    host = strstr (r.out, "\"name\": \"host\"");
    cache = strstr (r.out, "\"name\": \"cache\"");
    g_assert_nonnull (host);
    g_assert_nonnull (cache);
    g_assert_true (cache < host);
    /* which kinds have segments (docs/segments.md) */
    g_assert_true (g_str_has_prefix (strstr (cache, "\"segments\": "), "\"segments\": true"));
    g_assert_true (g_str_has_prefix (strstr (host, "\"segments\": "), "\"segments\": false"));
    g_assert_null (strstr (host + 1, "\"name\": \"host\""));
    g_assert_null (strstr (cache + 1, "\"name\": \"cache\""));
    run_clear (&r);
  }
}

/* A libmemres-host.so on the search path is shadowed by the embedded kind: `memres kinds` lists
 * it as not loadable (exit status 3), `memres kinds host` shows the embedded kind. */
static void
test_kinds_shadowed_by_embedded (void)
{
  g_autofree char *tmp = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *file = g_build_filename (tmp, "libmemres-host.so", NULL);
  g_autofree char *entry = g_strdup_printf (
      "\nnot loadable: %s\n  MEMRES_ERROR_EXISTS: plugin file %s is not loaded: plugin \"host\" "
      "is embedded in libmemres, whose kinds take the name (give the file and its plugin another "
      "name)\n",
      file, file);
  const char *const env[] = { "MEMRES_PLUGIN_PATH", tmp, NULL };
  const char *const list[] = { "kinds", NULL };
  const char *const json_list[] = { "kinds", "--json", NULL };
  const char *const named[] = { "kinds", "host", NULL };
  g_autofree char *object = NULL;
  g_autofree char *json_path = NULL;
  Run r = { 0 };

  g_assert_true (g_file_set_contents (file, "", -1, NULL));
  run_toolv (&r, env, list);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 3);
  g_assert_true (g_str_has_suffix (r.out, entry));
  g_assert_cmpstr (r.err, ==,
                   "memres: 1 plugin file on the search path did not load (listed after the "
                   "kinds)\n");
  run_clear (&r);
  run_toolv (&r, env, json_list);
  g_assert_cmpint (r.status, ==, 3);
  json_path = g_strescape (file, NULL);
  object = g_strdup_printf ("\"broken_plugins\": [\n    {\n      \"path\": \"%s\",\n      "
                            "\"domain\": \"memres-error-quark\",\n      \"code\": %d,\n      "
                            "\"code_name\": \"MEMRES_ERROR_EXISTS\",\n",
                            json_path, MEMRES_ERROR_EXISTS);
  g_assert_nonnull (strstr (r.out, object));
  run_clear (&r);
  run_toolv (&r, env, named);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.err, ==, "");
  g_assert_nonnull (strstr (r.out, "\n  plugin: host, embedded in libmemres\n"));
  run_clear (&r);
  g_assert_cmpint (g_unlink (file), ==, 0);
  g_assert_cmpint (g_rmdir (tmp), ==, 0);
}

/* `memres info` reports what each device can do with managed memory (the fake: everything). */
static void
test_info_managed (void)
{
  Run r = { 0 };

  if (!mt_require_devices (1))
    return;
  run_tool (&r, "info", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_test_message ("%s", r.out);
  g_assert_nonnull (strstr (r.out, "\n  managed memory              yes\n"));
  g_assert_nonnull (strstr (r.out, "\n  concurrent managed access   yes\n"));
  g_assert_nonnull (strstr (r.out, "\n  managed memory pools        yes\n"));
  run_clear (&r);

  run_tool (&r, "info", "--json", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\"managed_memory\": true"));
  g_assert_nonnull (strstr (r.out, "\"concurrent_managed_access\": true"));
  g_assert_nonnull (strstr (r.out, "\"managed_memory_pools\": true"));
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

  run_tool (&r, "alloc", "vmm", "1", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\nbuffer    2.0 MiB (2097152 bytes) at "));
  g_assert_nonnull (strstr (r.out, " (rounded up from 1 byte)\n"));
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
          "memres alloc: invalid SIZE %s: expected a non-negative whole number of bytes with an "
          "optional B, KiB, MiB, GiB, TiB or PiB suffix (see memres alloc --help)\n",
          cases[i].shown);

      run_toolv (&r, NULL, cases[i].args);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 2);
      g_assert_cmpstr (r.err, ==, want);
      /* with --json, the error is JSON on stdout too */
      if (strcmp (cases[i].args[1], "--json") == 0)
        g_assert_nonnull (strstr (r.out, "\n    \"exit_status\": 2\n"));
      else
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
    g_assert_nonnull (strstr (r.err, "invalid SIZE \"--json\""));
    g_assert_cmpstr (r.out, ==, "");
    run_clear (&r);
    /* a size written as one but past 64 bits is too large, not malformed (it was "expected a
     * non-negative whole number of bytes"); MEMRES_ERROR_INVALID_ARGUMENT, exit status 2 */
    for (gsize i = 0; i < 3; i++)
      {
        const char *const big[] = { "99999999999PiB", "18446744073709551616", "16384PiB" };
        g_autofree char *want = g_strdup_printf (
            "memres alloc: SIZE \"%s\" is too large: at most 18446744073709551615 bytes (see "
            "memres alloc --help)\n",
            big[i]);

        run_tool (&r, "alloc", "--json", "host", big[i], NULL);
        g_assert_cmpint (r.status, ==, 2);
        g_assert_cmpstr (r.err, ==, want);
        g_assert_nonnull (strstr (r.out, "\"exit_status\": 2"));
        run_clear (&r);
        run_tool (&r, "snapshot", "-a", big[i], "host", NULL);
        g_assert_cmpint (r.status, ==, 2);
        g_assert_nonnull (strstr (r.err, "too large: at most 18446744073709551615 bytes"));
        run_clear (&r);
      }
    /* "--" before valid operands, and a negative --device taken as that option's value */
    run_tool (&r, "alloc", "--device", "-1", "--", "default", "8", NULL);
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

/* alloc --tag: the buffer's tag, and the stats layer's counts of it, in text and JSON; a tag
 * that cannot be one fails the command (exit status 1, the tag error's message). */
static void
test_alloc_tag (void)
{
  Run r = { 0 };

  run_tool (&r, "alloc", "--tag", "weights", "stats>host", "4KiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\ntag       weights\n"));
  g_assert_nonnull (strstr (r.out, "\n             tag weights: 4.0 KiB (4096 bytes) in 1 buffer, "
                                   "peak 4.0 KiB (4096 bytes); total 4.0 KiB (4096 bytes) in 1 "
                                   "allocation\n"));
  run_clear (&r);
  run_tool (&r, "alloc", "--json", "--tag", "weights", "stats>host", "4KiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\"tag\": \"weights\""));
  g_assert_nonnull (strstr (r.out, "\"tags\": ["));
  g_assert_nonnull (strstr (r.out, "\"bytes_peak\": 4096"));
  g_assert_nonnull (strstr (r.out, "\"count_total\": 1"));
  run_clear (&r);
  /* untagged: no tag line, a null tag */
  run_tool (&r, "alloc", "--json", "stats>host", "4KiB", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\"tag\": null"));
  run_clear (&r);
  /* a name that cannot be a tag is a usage error (exit status 2), nothing allocated; --json
   * says so as JSON */
  run_tool (&r, "alloc", "--tag", "", "host", "1", NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_cmpstr (r.out, ==, "");
  g_assert_true (g_str_has_prefix (r.err, "memres alloc: --tag: a tag cannot be empty"));
  run_clear (&r);
  run_tool (&r, "alloc", "--json", "--tag=", "host", "1", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.out, "--tag: a tag cannot be empty"));
  g_assert_nonnull (strstr (r.out, "\"exit_status\": 2"));
  run_clear (&r);
  {
    g_autofree char *long_tag = g_strnfill (MEMRES_TAG_NAME_MAX + 1, 'a');

    run_tool (&r, "alloc", "-t", long_tag, "host", "1", NULL);
    assert_one_error_line (&r);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_nonnull (strstr (r.err, "is longer than 63 bytes"));
    run_clear (&r);
  }
}

/* ipc-serve with a resource that cannot be shared fails before it listens, not at the first
 * client (without --count it would otherwise fail every client, forever). */
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
  if (mt_require_devices (1))
    {
      /* vmm shares whole buffers, not a pool: the message says how, not "use kind ipc" */
      run_tool (&r, "ipc-serve", "--spec", "vmm:handle_type=posix_fd", "--count", "1", path, NULL);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_cmpstr (r.err, ==,
                       "memres: resources of kind \"vmm\" have no pool handle to share: their "
                       "buffers are shared whole, as their physical chunks (one file descriptor "
                       "each): send a buffer with memres_ipc_send_buffer(), or make its message "
                       "with memres_buffer_export_message() (docs/ipc.md)\n");
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      run_clear (&r);
      /* a cache over the pool hides it: why, and what to do */
      run_tool (&r, "ipc-serve", "--spec", "cache>ipc", "--count", "1", path, NULL);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_nonnull (strstr (r.err, ": resources of kind \"cache\" cannot be shared with "
                                       "other processes: \"cache\" carves its blocks out of "
                                       "larger allocations of the layer below"));
      g_assert_nonnull (strstr (r.err, "share from the layer below "
                                       "(memres_resource_get_upstream()), or use a stack without "
                                       "\"cache\"\n"));
      g_assert_null (strstr (r.err, "use kind"));
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      run_clear (&r);
    }
  g_rmdir (dir);
}

/* --count takes 1 or more: 0 (or less) would serve forever, which is what leaving it out
 * means; it is a usage error before anything listens, with --json the error document. */
static void
test_ipc_serve_count (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  static const char *const counts[] = { "0", "-1", "-2147483648", "x", "", "2147483648" };
  Run r = { 0 };

  for (gsize i = 0; i < G_N_ELEMENTS (counts); i++)
    {
      g_autofree char *want
          = g_strdup_printf ("memres ipc-serve: --count \"%s\": expected a number of clients, 1 "
                             "or more (without --count: serve until SIGINT or SIGTERM) (see "
                             "memres ipc-serve --help)\n",
                             counts[i]);

      run_tool (&r, "ipc-serve", "--count", counts[i], path, NULL);
      g_test_message ("--count '%s': %s", counts[i], r.err);
      g_assert_cmpint (r.status, ==, 2);
      g_assert_cmpstr (r.out, ==, "");
      g_assert_cmpstr (r.err, ==, want);
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
      run_clear (&r);
    }
  run_tool (&r, "ipc-serve", "--json", "--count=0", path, NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_cmpstr (r.err, ==,
                   "memres ipc-serve: --count \"0\": expected a number of clients, 1 or more "
                   "(without --count: serve until SIGINT or SIGTERM) (see memres ipc-serve "
                   "--help)\n");
  g_assert_cmpstr (r.out, ==,
                   "{\n  \"error\": {\n    \"message\": \"--count \\\"0\\\": expected a number of "
                   "clients, 1 or more (without --count: serve until SIGINT or SIGTERM)\",\n    "
                   "\"domain\": "
                   "null,\n    \"code\": null,\n    \"code_name\": null,\n    "
                   "\"exit_status\": 2\n  }\n}\n");
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  run_clear (&r);
  g_rmdir (dir);
}

/* A second ipc-serve on the socket of a live one is refused (the first keeps it); SIGTERM and
 * SIGINT make a server remove its socket and exit. `ipc-attach ''` says the path is empty. */
static void
test_ipc_serve_socket (void)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  static const int signals[] = { SIGTERM, SIGINT };
  Run r = { 0 };

  run_tool (&r, "ipc-attach", "", NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, "the socket path is empty"));
  run_clear (&r);
  if (!mt_require_fake ("ipc-serve needs a driver with pools: the fake"))
    {
      g_rmdir (dir);
      return;
    }
  /* a SOCKET that names a file which is not a socket is a bad operand (2); the file stays */
  {
    g_autofree char *want = g_strdup_printf ("memres: %s exists and is not a socket\n", path);
    g_autofree char *kept = NULL;

    g_assert_true (g_file_set_contents (path, "mine", -1, NULL));
    run_tool (&r, "ipc-serve", "--size", "4KiB", "--count", "1", path, NULL);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_cmpstr (r.err, ==, want);
    g_assert_cmpstr (r.out, ==, "");
    run_clear (&r);
    g_assert_true (g_file_get_contents (path, &kept, NULL, NULL));
    g_assert_cmpstr (kept, ==, "mine");
    g_assert_cmpint (g_remove (path), ==, 0);
  }
  for (gsize i = 0; i < G_N_ELEMENTS (signals); i++)
    {
      const char *argv[] = { tool, "ipc-serve", "--size", "4KiB", path, NULL };
      g_autoptr (GError) error = NULL;
      GPid pid;
      int status, tries;

      g_assert_true (g_spawn_async (NULL, (char **) argv, NULL,
                                    G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, NULL,
                                    NULL, &pid, &error));
      g_assert_no_error (error);
      for (tries = 0; tries < 500 && !g_file_test (path, G_FILE_TEST_EXISTS); tries++)
        g_usleep (10000);
      g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
      if (i == 0)
        {
          run_tool (&r, "ipc-serve", "--size", "4KiB", "--count", "1", path, NULL);
          assert_one_error_line (&r);
          g_assert_cmpint (r.status, ==, 1);
          g_assert_nonnull (strstr (r.err, "a server is already listening on"));
          g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
          run_clear (&r);
        }
      g_assert_cmpint (kill (pid, signals[i]), ==, 0);
      g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
      g_spawn_close_pid (pid);
      g_assert_true (WIFEXITED (status));
      g_assert_cmpint (WEXITSTATUS (status), ==, 0);
      g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
    }
  g_rmdir (dir);
}

/* A connected UNIX socket to @path (a listener must be there). */
static int
connect_to (const char *path)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  g_strlcpy (addr.sun_path, path, sizeof addr.sun_path);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  return fd;
}

/* Peers that stop talking: ipc-serve gives up on a silent client after --timeout and serves
 * the next (which answers garbage), with one JSON document listing both failures; ipc-attach
 * gives up on a server that accepts and never answers. */
static void
test_ipc_silent_peers (void)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "s.sock", NULL);
  g_autofree char *mute = g_build_filename (dir, "mute.sock", NULL);
  const char *argv[] = { tool, "ipc-serve", "--json", "--count", "2", "--timeout",
                         "1",  "--size",    "4KiB",   path,      NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (GString) out = g_string_new (NULL);
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int silent, garbage, listener, tries, out_fd, status;
  char chunk[4096];
  gssize n;
  GPid pid;
  Run r = { 0 };

  if (!mt_require_fake ("ipc-serve needs a driver with pools: the fake"))
    {
      g_rmdir (dir);
      return;
    }
  g_assert_true (g_spawn_async_with_pipes (NULL, (char **) argv, NULL,
                                           G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDERR_TO_DEV_NULL,
                                           NULL, NULL, &pid, NULL, &out_fd, NULL, &error));
  g_assert_no_error (error);
  for (tries = 0; tries < 500 && !g_file_test (path, G_FILE_TEST_EXISTS); tries++)
    g_usleep (10000);
  silent = connect_to (path);  /* says nothing, stays connected */
  garbage = connect_to (path); /* waits in the backlog, then answers 'X' */
  g_assert_cmpint (write (garbage, "X", 1), ==, 1);
  while ((n = read (out_fd, chunk, sizeof chunk)) > 0)
    g_string_append_len (out, chunk, n);
  close (out_fd);
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  g_spawn_close_pid (pid);
  g_test_message ("%s", out->str);
  g_assert_true (WIFEXITED (status));
  g_assert_cmpint (WEXITSTATUS (status), ==, 1);
  assert_one_json_document (out->str);
  g_assert_nonnull (strstr (out->str, "\"served\": 0,"));
  g_assert_nonnull (strstr (out->str, "\"failed\": 2,"));
  g_assert_nonnull (strstr (out->str, "receiving from the peer: timed out (--timeout)"));
  g_assert_nonnull (strstr (out->str, "the client answered 0x58"));
  close (silent);
  close (garbage);

  /* a server that accepts nothing and never answers */
  listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_strlcpy (addr.sun_path, mute, sizeof addr.sun_path);
  g_assert_cmpint (bind (listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (listener, 4), ==, 0);
  run_tool (&r, "ipc-attach", "--timeout", "1", mute, NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "timed out"));
  assert_one_error_line (&r);
  run_clear (&r);
  /* nor does ipc-serve take the socket of another program that listens there */
  run_tool (&r, "ipc-serve", "--count", "1", mute, NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.err, "another program listens on"));
  g_assert_true (g_file_test (mute, G_FILE_TEST_EXISTS));
  run_clear (&r);
  run_tool (&r, "ipc-attach", "--timeout", "-1", mute, NULL);
  g_assert_cmpint (r.status, ==, 2);
  run_clear (&r);
  close (listener);
  g_unlink (mute);
  g_rmdir (dir);
}

/* Odd files named like plugins: `memres alloc KIND` says what the file is (not "no such
 * plugin"), and `memres kinds` lists them as not loadable instead of hanging on the FIFO. */
static void
test_odd_plugin_files (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  const char *const env[] = { "MEMRES_PLUGIN_PATH", dir, NULL };
  static const struct
  {
    const char *kind;
    const char *what;
  } cases[] = {
    { "fifo", "is a FIFO" },
    { "loop", "is a symbolic link loop" },
    { "dangling", "is a dangling symbolic link" },
  };
  Run r = { 0 };

  mt_make_odd_files (dir, "libmemres-fifo.so", "libmemres-loop.so", "libmemres-dangling.so");
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      const char *const args[] = { "alloc", cases[i].kind, "1", NULL };

      run_toolv (&r, env, args);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 3); /* a plugin file that does not load, as for kinds */
      if (strstr (r.err, cases[i].what) == NULL)
        g_error ("stderr lacks \"%s\": %s", cases[i].what, r.err);
      run_clear (&r);
    }
  {
    const char *const args[] = { "kinds", NULL };

    run_toolv (&r, env, args);
    g_assert_cmpint (r.status, ==, 3);
    for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
      g_assert_nonnull (strstr (r.out, cases[i].what));
    run_clear (&r);
  }
  mt_remove_dir (dir);
}

/* Every invalid option or operand exits with 2 and says what is wrong; a failure of the work
 * (no such kind) with 1. With --json the error is also a JSON object on stdout. */
static void
test_alloc_usage_errors (void)
{
  static const struct
  {
    const char *args[6];
    int status;
    const char *needle;
  } cases[] = {
    { { "alloc" }, 2, "SIZE is missing" },
    { { "alloc", "host" }, 2, "SIZE is missing after \"host\"" },
    { { "alloc", "default" }, 2, "SIZE is missing after \"default\"" },
    { { "alloc", "host", "max" }, 2, "invalid SIZE \"max\"" },
    { { "alloc", "--pattern=abc", "host", "1" }, 2, "invalid pattern \"abc\"" },
    { { "alloc", "", "1" }, 2, "invalid spec \"\"" },
    { { "alloc", "host:", "1" }, 2, "host:" },
    { { "alloc", "host:alignment", "1" }, 2, "alignment" },
    { { "alloc", "--device=1", "host", "1" }, 2, "--device applies to \"default\" only" },
    { { "alloc", "--device=-2", "1" }, 2, "--device takes a device ordinal" },
    { { "alloc", "host", "1", "2" }, 2, "too many operands" },
    { { "alloc", "no_such_kind", "1" }, 1, "no kind \"no_such_kind\"" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GPtrArray) json_args = g_ptr_array_new ();
      g_autofree char *status = g_strdup_printf ("\n    \"exit_status\": %d\n", cases[i].status);
      Run r = { 0 }, j = { 0 };

      run_toolv (&r, NULL, cases[i].args);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, cases[i].status);
      if (strstr (r.err, cases[i].needle) == NULL)
        g_error ("stderr lacks \"%s\": %s", cases[i].needle, r.err);
      g_assert_cmpstr (r.out, ==, "");

      /* the same with --json: the same line on stderr, the error as JSON on stdout */
      g_ptr_array_add (json_args, (gpointer) "alloc");
      g_ptr_array_add (json_args, (gpointer) "--json");
      for (gsize k = 1; cases[i].args[k] != NULL; k++)
        g_ptr_array_add (json_args, (gpointer) cases[i].args[k]);
      g_ptr_array_add (json_args, NULL);
      run_toolv (&j, NULL, (const char *const *) json_args->pdata);
      g_assert_cmpint (j.status, ==, cases[i].status);
      g_assert_cmpstr (j.err, ==, r.err);
      g_assert_true (g_str_has_prefix (j.out, "{\n  \"error\": {\n    \"message\": \""));
      g_assert_nonnull (strstr (j.out, status));
      g_assert_true (g_str_has_suffix (j.out, "\n  }\n}\n"));
      run_clear (&r);
      run_clear (&j);
    }
}

/* `memres info` without a driver library and with one that fails to initialize: the message
 * once, then what it means, different for the two; in JSON a driver_state. */
static void
test_info_driver_states (void)
{
  g_autofree char *stub
      = g_build_filename (g_getenv ("MEMRES_TEST_PLUGIN_DIR"), "libstubcuda.so", NULL);
  const char *const absent_env[] = { "MEMRES_CUDA_DRIVER", "/nonexistent/libcuda.so.1", NULL };
  const char *const failed_env[]
      = { "MEMRES_CUDA_DRIVER", stub, "STUBCUDA_MODE", "initfail", NULL };
  const char *const text_args[] = { "info", NULL };
  const char *const json_args[] = { "info", "--json", NULL };
  Run r = { 0 };

  run_toolv (&r, absent_env, text_args);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\nNo CUDA driver could be loaded from "
                                   "/nonexistent/libcuda.so.1: cannot open shared object file"));
  g_assert_nonnull (strstr (r.out, "\nNo CUDA driver is present: only host memory"));
  /* the path once: dlerror()'s own copy of it is dropped */
  g_assert_null (strstr (r.out, "libcuda.so.1: /nonexistent"));
  run_clear (&r);
  run_toolv (&r, absent_env, json_args);
  g_assert_nonnull (strstr (r.out, "\"driver_state\": \"absent\""));
  run_clear (&r);

  run_toolv (&r, failed_env, text_args);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "failed to initialize: cuInit: CUDA_ERROR_INVALID_DEVICE"));
  g_assert_nonnull (strstr (r.out, "\nA CUDA driver library loaded but cannot be used: only"));
  g_assert_null (strstr (r.out, "No CUDA driver is present"));
  run_clear (&r);
  run_toolv (&r, failed_env, json_args);
  g_assert_nonnull (strstr (r.out, "\"driver_state\": \"failed\""));
  run_clear (&r);
}

/* @text holds no control character but line breaks, and is UTF-8. */
static void
assert_no_control (const char *text)
{
  const char *p;

  g_assert_true (g_utf8_validate (text, -1, NULL));
  for (p = text; *p != '\0'; p = g_utf8_next_char (p))
    {
      gunichar c = g_utf8_get_char (p);
      if (c != '\n' && (c < 0x20 || (c >= 0x7f && c < 0xa0)))
        g_error ("control character U+%04X at offset %d: %.80s", c, (int) (p - text), p);
    }
}

/* A plugin's strings with control characters and bytes that are not UTF-8 are escaped in the
 * listing, and the JSON stays valid (its strings escape them, \xNN for a byte that is not
 * UTF-8). */
static void
test_kinds_odd_strings (void)
{
  const char *const env[] = { "MEMRES_PLUGIN_PATH", g_getenv ("MEMRES_TEST_PLUGIN_DIR"), NULL };
  const char *const text_args[] = { "kinds", "odd_strings", NULL };
  const char *const json_args[] = { "kinds", "--json", "odd_strings", NULL };
  Run text = { 0 }, json = { 0 };

  run_toolv (&text, env, text_args);
  run_toolv (&json, env, json_args);
  g_test_message ("%s%s%s", text.out, json.out, json.err);
  g_assert_cmpint (text.status, ==, 0);
  g_assert_cmpint (json.status, ==, 0);
  assert_no_control (text.out);
  assert_no_control (json.out);
  g_assert_nonnull (strstr (text.out, "line one\\nline two \\x1b[31mred\\x7f \\xff\\xfe end"));
  g_assert_nonnull (strstr (text.out, "default \"x\\x07y\\xfe\""));
  g_assert_nonnull (strstr (text.out, "C1 control \\u009b here"));
  g_assert_nonnull (strstr (text.out, "enum (a\\x1b[2J|b\\xff)"));
  g_assert_nonnull (
      strstr (json.out, "\"line one\\nline two \\u001b[31mred\\u007f \\\\xff\\\\xfe end\""));
  g_assert_nonnull (strstr (json.out, "\"doc with a bell\\u0007 and \\\\xc3( bad UTF-8\""));
  run_clear (&text);
  run_clear (&json);
}

/* A log written by the log adaptor, replayed against other stacks: the same peak of used
 * bytes; against a limit below that peak, failures. */
static void
test_replay_round_trip (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-replay-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *spec = g_strdup_printf ("log:path=%s>stats>host", log);
  g_autofree char *want_peak = NULL;
  g_autofree char *want_log_peak = NULL;
  MemresResource *mr = mt_new_ok (spec);
  MemresBuffer *live[8] = { NULL };
  MemresStatsCounters c;
  Run r = { 0 };
  guint i;

  /* a pattern whose peak is not its end: allocate, free every other one, allocate more */
  for (i = 0; i < 40; i++)
    {
      guint slot = (i * 5) % G_N_ELEMENTS (live);

      if (live[slot] != NULL)
        mt_close_ok (live[slot], NULL);
      live[slot] = mt_alloc_ok (mr, 1000 + 997 * ((i * 7) % 13), NULL);
    }
  for (i = 0; i < G_N_ELEMENTS (live); i++)
    mt_close_ok (live[i], NULL);
  g_assert_true (memres_stats_get_counters (mr, &c, NULL));
  g_assert_cmpuint (c.count_total, ==, 40);
  memres_resource_unref (mr); /* flushes and closes the log */

  want_peak = g_strdup_printf ("\"peak_used_bytes\": %" G_GUINT64_FORMAT ",", c.bytes_peak);
  want_log_peak = g_strdup_printf ("\"log_peak_used_bytes\": %" G_GUINT64_FORMAT ",", c.bytes_peak);
  run_tool (&r, "replay", "--json", log, "stats>host", NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, want_peak));
  g_assert_nonnull (strstr (r.out, want_log_peak));
  g_assert_nonnull (strstr (r.out, "\"allocations\": 40,"));
  g_assert_nonnull (strstr (r.out, "\"frees\": 40,"));
  g_assert_nonnull (strstr (r.out, "\"failures\": 0,"));
  g_assert_nonnull (strstr (r.out, "\"threads\": 1,"));
  g_assert_nonnull (strstr (r.out, "\"live_at_end\": 0"));
  run_clear (&r);

  /* a limit below the peak: some allocations fail, and their frees are skipped; the first
   * failure names its line and fails the command (after the summary) */
  {
    g_autofree char *limited
        = g_strdup_printf ("limit:max=%" G_GUINT64_FORMAT ">host", c.bytes_peak - 1);
    g_autofree char *where = g_strdup_printf ("%s:", log);

    run_tool (&r, "replay", "--json", log, limited, NULL);
    g_test_message ("%s%s", r.out, r.err);
    g_assert_cmpint (r.status, ==, 1);
    g_assert_null (strstr (r.out, "\"failures\": 0,"));
    g_assert_nonnull (strstr (r.out, "would pass the limit"));
    assert_one_error_line (&r);
    g_assert_true (g_str_has_prefix (r.err, "memres: against limit:max="));
    g_assert_nonnull (strstr (r.err, where));
    g_assert_nonnull (strstr (r.err, " bytes failed: limit: allocating "));
    run_clear (&r);

    /* several specs: a table, a column each; the one that failed fails the command */
    run_tool (&r, "replay", log, "host", "stats>host", limited, NULL);
    g_test_message ("%s%s", r.out, r.err);
    g_assert_cmpint (r.status, ==, 1);
    g_assert_nonnull (strstr (
        r.out, "\n               host:alignment=256  stats>host:alignment=256  limit:max="));
    g_assert_nonnull (strstr (r.out, "\nfailures       0                   0                   "
                                     "      "));
    g_assert_nonnull (strstr (r.out, "\nfirst failure against limit:max="));
    assert_one_error_line (&r);
    run_clear (&r);
    run_tool (&r, "replay", "--json", log, "host", "stats>host", NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_nonnull (strstr (r.out, "\"replays\": ["));
    g_assert_nonnull (strstr (r.out, "\"resource\": \"stats>host:alignment=256\","));
    g_assert_nonnull (strstr (r.out, want_peak));
    run_clear (&r);
  }
  run_tool (&r, "replay", log, "host", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "replayed  "));
  g_assert_nonnull (
      strstr (r.out, ": 80 operations (40 allocations, 40 frees) logged by 1 thread\n"));
  g_assert_nonnull (strstr (r.out, "\nfailures  0 allocations failed"));
  run_clear (&r);
  g_remove (log);
  g_rmdir (dir);
}

/* The number after "KEY": in memres replay's JSON output. */
static guint64
json_uint (const char *json, const char *key)
{
  g_autofree char *quoted = g_strdup_printf ("\"%s\": ", key);
  const char *at = strstr (json, quoted);

  g_assert_nonnull (at);
  return g_ascii_strtoull (at + strlen (quoted), NULL, 10);
}

/* The traces committed under bench/traces (a log of PyTorch training resnet18 with memres as
 * its allocator) replay cleanly against host memory, with and without the cache: every
 * allocation served, the log's peak of used bytes reproduced exactly. */
static void
test_replay_traces (void)
{
  const char *dir_name = g_getenv ("MEMRES_TRACES_DIR");
  const char *const specs[] = { "host", "cache>host" };
  g_autoptr (GDir) dir = NULL;
  const char *name;
  guint traces = 0;

  g_assert_nonnull (dir_name);
  dir = g_dir_open (dir_name, 0, NULL);
  g_assert_nonnull (dir);
  while ((name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree char *log = g_build_filename (dir_name, name, NULL);

      if (!g_str_has_suffix (name, ".csv"))
        continue;
      traces++;
      for (guint i = 0; i < G_N_ELEMENTS (specs); i++)
        {
          Run r = { 0 };

          run_tool (&r, "replay", "--json", log, specs[i], NULL);
          g_test_message ("%s against %s: %s%s", name, specs[i], r.out, r.err);
          g_assert_cmpint (r.status, ==, 0);
          g_assert_cmpuint (json_uint (r.out, "allocations"), >, 0);
          g_assert_cmpuint (json_uint (r.out, "failures"), ==, 0);
          g_assert_cmpuint (json_uint (r.out, "unmatched_frees"), ==, 0);
          g_assert_cmpuint (json_uint (r.out, "peak_used_bytes"), ==,
                            json_uint (r.out, "log_peak_used_bytes"));
          g_assert_cmpuint (json_uint (r.out, "peak_reserved_bytes"), >=,
                            json_uint (r.out, "peak_used_bytes"));
          run_clear (&r);
        }
    }
  g_assert_cmpuint (traces, >, 0);
}

/* A `free failure` line (the log adaptor's free that failed and left the buffer open) is
 * counted with the logged failures and not replayed: the buffer stays live until its free. */
static void
test_replay_free_failure (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-replay-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "failed-free.csv", NULL);
  Run r = { 0 };

  g_assert_true (g_file_set_contents (log,
                                      "Thread,Time,Action,Pointer,Size,Stream\n"
                                      "1,10:00:00.000000,allocate,0x10,100,0x0\n"
                                      "1,10:00:00.000000,free failure,0x10,100,0x0\n"
                                      "1,10:00:00.000000,allocate,0x20,50,0x0\n"
                                      "1,10:00:00.000000,free,0x10,100,0x0\n"
                                      "1,10:00:00.000000,free,0x20,50,0x0\n",
                                      -1, NULL));
  run_tool (&r, "replay", "--json", log, "host", NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpuint (json_uint (r.out, "allocations"), ==, 2);
  g_assert_cmpuint (json_uint (r.out, "frees"), ==, 2);
  g_assert_cmpuint (json_uint (r.out, "logged_failures"), ==, 1);
  g_assert_cmpuint (json_uint (r.out, "peak_used_bytes"), ==, 150);
  g_assert_cmpuint (json_uint (r.out, "log_peak_used_bytes"), ==, 150);
  g_assert_cmpuint (json_uint (r.out, "unmatched_frees"), ==, 0);
  g_assert_cmpuint (json_uint (r.out, "live_at_end"), ==, 0);
  run_clear (&r);
  g_remove (log);
  g_rmdir (dir);
}

static void
test_replay_bad_logs (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-replay-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "bad.csv", NULL);
  static const struct
  {
    const char *text;
    const char *needle;
  } cases[] = {
    { "Pointer,Size\n", ":1: expected the header" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10\n",
      ":2: expected 6 fields" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,16,1,0x0\n",
      ":2: invalid Pointer" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,-1,0x0\n",
      ":2: invalid Size" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,steal,0x10,1,0x0\n",
      ":2: invalid Action" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,1,0x0\n1,10:00:00."
      "000000,allocate,0x10,2,0x0\n",
      ":3: Pointer 0x10 allocated again, without a free since line 2 allocated it" },
    /* a free's Size is its allocate's */
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,100,0x0\n\n1,10:00:"
      "00.000000,free,0x10,99,0x0\n",
      ":4: free of Pointer 0x10 with Size 99, but its allocate on line 2 has Size 100\n" },
    /* live sizes past 2^64 bytes: no log of disjoint allocations (the peak wrapped to 3 * 2^62) */
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,4611686018427387904,"
      "0x0\n"
      "1,10:00:00.000000,allocate,0x20,4611686018427387904,0x0\n1,10:00:00.000000,allocate,0x30,"
      "4611686018427387904,0x0\n"
      "1,10:00:00.000000,allocate,0x40,4611686018427387904,0x0\n1,10:00:00.000000,allocate,0x50,"
      "100,0x0\n",
      ":5: the sizes live at once would pass 2^64 bytes (18446744073709551616)" },
    /* a Time that is not HH:MM:SS.uuuuuu: replay refuses what trace and view refuse */
    { "Thread,Time,Action,Pointer,Size,Stream\n1,t,allocate,0x10,1,0x0\n",
      ":2: invalid Time \"t\"" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,25:00:00.000000,allocate,0x10,1,0x0\n",
      ":2: invalid Time" },
    /* memres's sleep and wake lines name their policy */
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,sleep forever,0x0,1,0x0\n",
      ":2: invalid Action \"sleep forever\"" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,segment mapped,0x10,x,0x0\n",
      ":2: invalid Size" },
    { "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,10:00:00.000000,segment mapped,0x10,9223372036854775807,0x0\n"
      "1,10:00:00.000000,segment mapped,0x20,9223372036854775807,0x0\n"
      "1,10:00:00.000000,segment grown,0x20,9223372036854775807,0x0\n"
      "1,10:00:00.000000,segment mapped,0x30,2,0x0\n",
      ":5: the segments mapped at once would pass 2^64 bytes" },
    /* bytes past the end of the address space: an allocation, a free, a segment (they were
     * replayed, traced and drawn) */
    { "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,10:00:00.000000,allocate,0xffffffffffffff00,257,0x0\n",
      ":2: Pointer 0xffffffffffffff00 with Size 257 ends past the end of the address space" },
    { "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,10:00:00.000000,free,0xffffffffffffff00,4096,0x0\n",
      ":2: Pointer 0xffffffffffffff00 with Size 4096 ends past the end" },
    { "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,10:00:00.000000,segment mapped,0x8000000000001000,2097152,0x0\n"
      "1,10:00:00.000000,segment grown,0x8000000000001000,9223372036854775807,0x0\n",
      ":3: Pointer 0x8000000000001000 with Size 9223372036854775807 ends past the end" },
    /* a last line without its newline: a log cut short, its last field perhaps cut too (the
     * stream 0x7f of 0x7f12, the tag "weig" of "weights"): it was read as whole */
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,16,0x7f",
      ":2: the last line ends without a newline: the log was cut short" },
    { "Thread,Time,Action,Pointer,Size,Stream,Tag\n1,10:00:00.000000,allocate,0x10,16,0x0,weig",
      ":2: the last line ends without a newline" },
    /* a Stream and a Thread as the log adaptor writes them (they were taken as any text) */
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,16,0xZZ\n",
      ":2: invalid Stream \"0xZZ\" (expected 0x...)" },
    { "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000000,allocate,0x10,16,\n",
      ":2: invalid Stream \"\"" },
    { "Thread,Time,Action,Pointer,Size,Stream\n,10:00:00.000000,allocate,0x10,16,0x0\n",
      ":2: empty Thread" },
  };
  /* replay, trace and view check a log's lines alike (log-walk.c): the same error for each */
  const char *const commands[][4] = {
    /* limit refuses the 2^62-byte allocations without asking host for them (a malloc that
     * size aborts under AddressSanitizer instead of failing) */
    { "replay", log, "limit:max=1GiB>host", NULL },
    { "trace", log, NULL },
    { "view", log, NULL },
  };
  Run r = { 0 };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    for (gsize c = 0; c < G_N_ELEMENTS (commands); c++)
      {
        g_assert_true (g_file_set_contents (log, cases[i].text, -1, NULL));
        run_toolv (&r, NULL, commands[c]);
        assert_one_error_line (&r);
        /* MEMRES_ERROR_INVALID_ARGUMENT: the operand (the log) is invalid, exit status 2 */
        g_assert_cmpint (r.status, ==, 2);
        g_assert_cmpstr (r.out, ==, "");
        if (strstr (r.err, cases[i].needle) == NULL)
          g_error ("memres %s: expected \"%s\": %s", commands[c][0], cases[i].needle, r.err);
        run_clear (&r);
        if (c == 0)
          {
            /* the error's domain and code */
            run_tool (&r, "--json", "trace", log, NULL);
            g_assert_cmpint (r.status, ==, 2);
            g_assert_nonnull (strstr (r.out, "\"domain\": \"memres-error-quark\""));
            g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_INVALID_ARGUMENT\""));
            g_assert_nonnull (strstr (r.out, "\"exit_status\": 2"));
            run_clear (&r);
          }
      }
  /* past the end of memory: MEMRES_ERROR_INVALID_ARGUMENT; up to its last byte: replayed */
  g_assert_true (g_file_set_contents (log,
                                      "Thread,Time,Action,Pointer,Size,Stream\n"
                                      "1,10:00:00.000000,allocate,0xffffffffffffff00,257,0x0\n",
                                      -1, NULL));
  run_tool (&r, "--json", "replay", log, "host", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.out, "\"domain\": \"memres-error-quark\""));
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_INVALID_ARGUMENT\""));
  run_clear (&r);
  g_assert_true (g_file_set_contents (log,
                                      "Thread,Time,Action,Pointer,Size,Stream\n"
                                      "1,10:00:00.000000,allocate,0xffffffffffffff00,256,0x0\n"
                                      "1,10:00:00.000001,free,0xffffffffffffff00,256,0x0\n",
                                      -1, NULL));
  for (gsize c = 0; c < G_N_ELEMENTS (commands); c++)
    {
      run_toolv (&r, NULL, commands[c]);
      g_assert_cmpstr (r.err, ==, "");
      g_assert_cmpint (r.status, ==, 0);
      run_clear (&r);
    }
  /* a NUL byte is reported on its line */
  g_assert_true (
      g_file_set_contents (log, "Thread,Time,Action,Pointer,Size,Stream\n1,t\0", 43, NULL));
  run_tool (&r, "replay", log, "host", NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, ":2: a NUL byte"));
  run_clear (&r);
  /* what is not a regular file is not read (a device or a FIFO would never end) */
  run_tool (&r, "replay", dir, "host", NULL);
  assert_one_error_line (&r);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, "not a regular file"));
  run_clear (&r);
  run_tool (&r, "replay", "/dev/zero", "host", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, "not a regular file"));
  run_clear (&r);
  run_tool (&r, "replay", "/nonexistent/log.csv", "host", NULL);
  assert_one_error_line (&r);
  run_clear (&r);
  run_tool (&r, "replay", log, NULL);
  g_assert_cmpint (r.status, ==, 2);
  run_clear (&r);
  g_remove (log);
  g_rmdir (dir);
}

/* A file the user names (a log adaptor's path, MEMRES_CONFIG, replay's LOG) that is missing, is
 * under something that is not a directory, is a directory or a FIFO is one bad input: exit
 * status 2, one line naming the file; MEMRES_ERROR_INVALID_ARGUMENT, but for replay's missing
 * LOG, which is named as missing as view's and trace's inputs are (input.c: G_FILE_ERROR_NOENT,
 * G_FILE_ERROR_NOTDIR); a FIFO is refused at once, never waited on (this test would time out). */
static void
test_bad_named_files (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *fifo = g_build_filename (dir, "fifo", NULL);
  g_autofree char *file = g_build_filename (dir, "file", NULL);
  g_autofree char *missing = g_build_filename (dir, "nonexistent-dir", "x.csv", NULL);
  g_autofree char *under_file = g_build_filename (file, "x.csv", NULL);
  const char *const paths[] = { missing, under_file, dir, fifo };
  const char *const why[] = { "No such file or directory", "Not a directory", NULL, NULL };
  /* replay's LOG, read by input.c as view's and trace's inputs */
  const char *const replay_why[] = { ": No such file\n", ": Not a directory\n",
                                     ": not a regular file\n", ": not a regular file\n" };
  const char *const replay_code[]
      = { "G_FILE_ERROR_NOENT", "G_FILE_ERROR_NOTDIR", "MEMRES_ERROR_INVALID_ARGUMENT",
          "MEMRES_ERROR_INVALID_ARGUMENT" };
  const char *const replay_domain[]
      = { "g-file-error-quark", "g-file-error-quark", "memres-error-quark", "memres-error-quark" };
  Run r = { 0 };

  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_true (g_file_set_contents (file, "", -1, NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autofree char *spec = g_strdup_printf ("log:path=%s>host", paths[i]);
      g_autofree char *log_needle = g_strdup_printf ("\"%s\"", paths[i]);
      g_autofree char *conf_needle
          = g_strdup_printf ("memres: MEMRES_CONFIG: config file %s: %s\n", paths[i],
                             why[i] != NULL ? why[i] : "not a regular file");
      const char *const config_env[] = { "MEMRES_CONFIG", paths[i], NULL };
      const char *const log_args[] = { "alloc", "--json", spec, "1MiB", NULL };
      const char *const config_args[] = { "alloc", "--json", "@a", "1MiB", NULL };
      const char *const replay_args[] = { "replay", "--json", paths[i], "host", NULL };
      Run runs[3] = { { 0 } };

      g_test_message ("%s", paths[i]);
      run_toolv (&runs[0], NULL, log_args);
      run_toolv (&runs[1], config_env, config_args);
      run_toolv (&runs[2], NULL, replay_args);
      for (gsize k = 0; k < G_N_ELEMENTS (runs); k++)
        {
          g_autofree char *code
              = g_strdup_printf ("\"code_name\": \"%s\",\n",
                                 k == 2 ? replay_code[i] : "MEMRES_ERROR_INVALID_ARGUMENT");
          g_autofree char *domain = g_strdup_printf (
              "\"domain\": \"%s\",\n", k == 2 ? replay_domain[i] : "memres-error-quark");

          g_test_message ("  %s", runs[k].err);
          assert_one_error_line (&runs[k]);
          g_assert_cmpint (runs[k].status, ==, 2);
          assert_one_json_document (runs[k].out);
          g_assert_nonnull (strstr (runs[k].out, domain));
          g_assert_nonnull (strstr (runs[k].out, code));
          g_assert_nonnull (strstr (runs[k].out, "\"exit_status\": 2\n"));
          g_assert_nonnull (strstr (runs[k].err, paths[i]));
        }
      g_assert_true (g_str_has_prefix (runs[0].err, "memres: layer 1 of 2 (kind \"log\"): "));
      g_assert_nonnull (strstr (runs[0].err, log_needle));
      g_assert_cmpstr (runs[1].err, ==, conf_needle);
      g_assert_true (g_str_has_suffix (runs[2].err, replay_why[i]));
      for (gsize k = 0; k < G_N_ELEMENTS (runs); k++)
        run_clear (&runs[k]);
    }
  /* an unreadable file is no bad path: permission denied, the work failing (1) */
  if (geteuid () != 0)
    {
      const char *const config_env[] = { "MEMRES_CONFIG", file, NULL };
      const char *const config_args[] = { "alloc", "--json", "@a", "1MiB", NULL };

      g_assert_cmpint (g_chmod (file, 0), ==, 0);
      run_toolv (&r, config_env, config_args);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_PERMISSION_DENIED\",\n"));
      run_clear (&r);
      g_assert_cmpint (g_chmod (file, 0644), ==, 0);
    }
  g_remove (fifo);
  g_remove (file);
  g_rmdir (dir);
}

/* `memres resources` lists the names of the config file; `memres alloc @NAME` prints every
 * layer with its own statistics. */
static void
test_resources_and_layers (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-resources-XXXXXX", NULL);
  g_autofree char *conf = g_build_filename (dir, "resources.conf", NULL);
  const char *env[] = { "MEMRES_CONFIG", conf, NULL };
  const char *list[] = { "resources", NULL };
  const char *list_json[] = { "resources", "--json", NULL };
  const char *alloc[] = { "alloc", "@training", "1MiB", NULL };
  const char *alloc_json[] = { "alloc", "--json", "@training", "1MiB", NULL };
  g_autofree char *want = NULL;
  Run r = { 0 };

  g_assert_true (g_file_set_contents (conf,
                                      "[base]\nspec=stats>host\n"
                                      "[training]\nspec=limit:max=1GiB>@base\n",
                                      -1, NULL));
  run_toolv (&r, env, list);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  want = g_strdup_printf ("%s: 2 named resources\n\n@base\n  spec: stats>host\n  from: %s:2\n\n"
                          "@training\n  spec: limit:max=1GiB>@base\n  from: %s:4\n",
                          conf, conf, conf);
  g_assert_cmpstr (r.out, ==, want);
  run_clear (&r);
  run_toolv (&r, env, list_json);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\"name\": \"training\""));
  g_assert_nonnull (strstr (r.out, "\"spec\": \"limit:max=1GiB>@base\""));
  run_clear (&r);

  run_toolv (&r, env, alloc);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "resource  limit:max=1GiB>stats>host:alignment=256\n"));
  g_assert_nonnull (strstr (r.out, "\nlayers    1  limit:max=1GiB\n"));
  g_assert_nonnull (
      strstr (r.out, "\n          2  stats\n             used 1.0 MiB (1048576 bytes)"));
  g_assert_nonnull (strstr (r.out, "\n          3  host:alignment=256\n"));
  run_clear (&r);
  run_toolv (&r, env, alloc_json);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\"position\": 2,"));
  g_assert_nonnull (strstr (r.out, "\"kind\": \"stats\","));
  run_clear (&r);

  /* a malformed @NAME is a malformed spec (2); a well-formed unknown one is not found (1) */
  {
    const char *bad_name[] = { "alloc", "@training:max=3", "1", NULL };
    const char *bare[] = { "alloc", "@", "1", NULL };
    const char *unknown[] = { "alloc", "@nope", "1", NULL };
    const char *bad_json[] = { "alloc", "--json", "@", "1", NULL };

    run_toolv (&r, env, bad_name);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_cmpstr (r.out, ==, "");
    g_assert_cmpstr (r.err, ==,
                     "memres: invalid resource name \"@training:max=3\": a name is one or more "
                     "letters, digits, '_', '-' and '.' (an @NAME layer takes no options)\n");
    run_clear (&r);
    run_toolv (&r, env, bare);
    g_assert_cmpint (r.status, ==, 2);
    g_assert_true (g_str_has_prefix (r.err, "memres: invalid resource name \"@\": "));
    run_clear (&r);
    run_toolv (&r, env, bad_json);
    g_assert_cmpint (r.status, ==, 2);
    assert_one_json_document (r.out);
    g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_INVALID_ARGUMENT\",\n"));
    g_assert_nonnull (strstr (r.out, "\"exit_status\": 2\n"));
    run_clear (&r);
    run_toolv (&r, env, unknown);
    g_assert_cmpint (r.status, ==, 1);
    g_assert_true (g_str_has_prefix (r.err, "memres: no resource named @nope in "));
    run_clear (&r);
  }

  /* MEMRES_CONFIG set empty: no file is read, and both commands say that this is why */
  {
    const char *empty[] = { "MEMRES_CONFIG", "", NULL };

    run_toolv (&r, empty, list);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.out, ==,
                     "no config file: MEMRES_CONFIG is set to the empty string: no config file "
                     "is read\n");
    run_clear (&r);
    run_toolv (&r, empty, alloc);
    g_assert_cmpint (r.status, ==, 1);
    g_assert_cmpstr (r.out, ==, "");
    g_assert_cmpstr (r.err, ==,
                     "memres: no resource named @training: MEMRES_CONFIG is set to the empty "
                     "string: no config file is read\n");
    run_clear (&r);
  }

  /* a bad file: one error line naming file and line */
  g_assert_true (g_file_set_contents (conf, "[a]\nspec=host\nnonsense\n", -1, NULL));
  run_toolv (&r, env, list);
  assert_one_error_line (&r);
  g_assert_nonnull (strstr (r.err, "resources.conf:3: "));
  run_clear (&r);
  g_remove (conf);
  g_rmdir (dir);
}

/* A close that fails: no report that says the buffer was freed; with --json, stdout is the
 * error document alone (the report before it made two documents). */
static void
test_alloc_close_fails (void)
{
  const char *const env[] = { "FAKECUDA_FAIL", "cuMemFreeAsync:1:CUDA_ERROR_UNKNOWN", NULL };
  const char *const json_args[] = { "alloc", "--json", "dmr", "1MiB", NULL };
  const char *const text_args[] = { "alloc", "dmr", "1MiB", NULL };
  Run r = { 0 };

  if (!mt_require_fake ("a failing cuMemFreeAsync needs the fake"))
    return;
  run_toolv (&r, env, json_args);
  g_assert_cmpint (r.status, ==, 1);
  assert_one_json_document (r.out);
  g_assert_true (g_str_has_prefix (r.out, "{\n  \"error\": {\n"));
  g_assert_null (strstr (r.out, "\"closed\""));
  g_assert_nonnull (strstr (r.out, "\"message\": \"cuMemFreeAsync: CUDA_ERROR_UNKNOWN"));
  /* the CUresult named, as for the other domains */
  g_assert_nonnull (strstr (r.out, "\"domain\": \"memres-cuda-error-quark\",\n"));
  g_assert_nonnull (strstr (r.out, "\"code\": 999,\n"));
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"CUDA_ERROR_UNKNOWN\",\n"));
  run_clear (&r);
  {
    const char *const invalid[]
        = { "FAKECUDA_FAIL", "cuMemFreeAsync:1:CUDA_ERROR_INVALID_VALUE", NULL };

    run_toolv (&r, invalid, json_args);
    g_assert_cmpint (r.status, ==, 1);
    assert_one_json_document (r.out);
    g_assert_nonnull (strstr (r.out, "\"code\": 1,\n"));
    g_assert_nonnull (strstr (r.out, "\"code_name\": \"CUDA_ERROR_INVALID_VALUE\",\n"));
    run_clear (&r);
  }
  run_toolv (&r, env, text_args);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (g_str_has_prefix (r.out, "resource  dmr:"));
  g_assert_null (strstr (r.out, "the buffer was freed"));
  g_assert_nonnull (strstr (r.err, "cuMemFreeAsync: CUDA_ERROR_UNKNOWN"));
  run_clear (&r);

  /* memres replay: a failing close is the work failing (1), not a bad log (2) */
  {
    g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
    g_autofree char *log = g_build_filename (dir, "ok.csv", NULL);
    const char *const replay_args[] = { "replay", log, "dmr", NULL };

    g_assert_true (g_file_set_contents (
        log,
        "Thread,Time,Action,Pointer,Size,Stream\n"
        "1,10:00:00.000000,allocate,0x10,100,0x0\n1,10:00:00.000000,free,0x10,100,0x0\n",
        -1, NULL));
    run_toolv (&r, env, replay_args);
    g_assert_cmpint (r.status, ==, 1);
    g_assert_nonnull (strstr (r.err, "ok.csv:3: closing the buffer failed: cuMemFreeAsync"));
    run_clear (&r);
    g_remove (log);
    g_rmdir (dir);
  }
}

/* User input in a spec (here a log path with a terminal escape) is escaped in every line of the
 * text output that shows it, as in error messages; the JSON output keeps it (JSON-escaped). */
static void
test_alloc_escapes_specs (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-escape-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "x\x1b[2Jx.csv", NULL);
  g_autofree char *spec = g_strdup_printf ("log:path=%s>host", log);
  g_autofree char *layer = g_strdup_printf (
      "log:path=%s/x\\x1b[2Jx.csv,append=false,flush=false,tags=false,segments=false,backtrace=false", dir);
  g_autofree char *want_resource = g_strdup_printf ("resource  %s>host:alignment=256\n", layer);
  g_autofree char *want_layer = g_strdup_printf ("\nlayers    1  %s\n", layer);
  g_autofree char *want_json = g_strdup_printf (
      "\"spec\": "
      "\"log:path=%s/x\\u001b[2Jx.csv,append=false,flush=false,tags=false,segments=false,backtrace=false\",",
      dir);
  g_autofree char *csv = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *want_against = g_strdup_printf ("\nagainst   %s>host:alignment=256\n", layer);
  Run r = { 0 };

  run_tool (&r, "alloc", spec, "1", NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strchr (r.out, '\x1b'));
  g_assert_true (g_str_has_prefix (r.out, want_resource));
  g_assert_nonnull (strstr (r.out, want_layer));
  g_assert_nonnull (strstr (r.out, "\n          2  host:alignment=256\n"));
  run_clear (&r);

  run_tool (&r, "alloc", "--json", spec, "1", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, want_json));
  run_clear (&r);

  /* memres replay's "against" line */
  g_assert_true (g_file_set_contents (
      csv,
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,10:00:00.000000,allocate,0x10,100,0x0\n1,10:00:00.000000,free,0x10,100,0x0\n",
      -1, NULL));
  run_tool (&r, "replay", csv, spec, NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_null (strchr (r.out, '\x1b'));
  g_assert_nonnull (strstr (r.out, want_against));
  run_clear (&r);
  g_remove (csv);
  g_remove (log);
  g_rmdir (dir);
}

/* Runs `memres ARGS...` (NULL-terminated) with its stdout on @out_fd (-1: closed), stderr
 * collected; r->out is empty. */
static void
run_tool_stdout (Run *r, int out_fd, ...)
{
  const char *tool = g_getenv ("MEMRES_TOOL");
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GString) err = g_string_new (NULL);
  const char *arg;
  int pipe_fds[2], wait_status;
  char chunk[4096];
  ssize_t n;
  va_list ap;
  pid_t pid;

  g_assert_nonnull (tool);
  g_ptr_array_add (argv, (gpointer) tool);
  va_start (ap, out_fd);
  while ((arg = va_arg (ap, const char *)) != NULL)
    g_ptr_array_add (argv, (gpointer) arg);
  va_end (ap);
  g_ptr_array_add (argv, NULL);
  g_assert_cmpint (pipe (pipe_fds), ==, 0);
  pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      dup2 (pipe_fds[1], 2);
      if (out_fd < 0)
        close (1);
      else
        dup2 (out_fd, 1);
      execv (tool, (char **) argv->pdata);
      _exit (127);
    }
  close (pipe_fds[1]);
  while ((n = read (pipe_fds[0], chunk, sizeof chunk)) > 0)
    g_string_append_len (err, chunk, n);
  close (pipe_fds[0]);
  g_assert_cmpint (waitpid (pid, &wait_status, 0), ==, pid);
  g_assert_true (WIFEXITED (wait_status));
  r->status = WEXITSTATUS (wait_status);
  r->out = g_strdup ("");
  r->err = g_string_free (g_steal_pointer (&err), FALSE);
}

/* Every command whose standard output cannot be written (a full disk, a closed descriptor)
 * says so on stderr and exits 1, not 0; one that failed already keeps its own status. */
static void
test_stdout_unwritable (void)
{
  static const char *const commands[][4] = {
    { "kinds", "host", NULL }, { "alloc", "host", "1KiB", NULL },
    { "resources", NULL },     { "info", NULL },
    { "--version", NULL },     { "--help", NULL },
  };
  int full = open ("/dev/full", O_WRONLY);
  Run r = { 0 };

  g_assert_cmpint (full, >=, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      const char *const *a = commands[i];

      run_tool_stdout (&r, full, a[0], a[1], a[2], NULL);
      g_test_message ("%s > /dev/full: %d %s", a[0], r.status, r.err);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_true (g_str_has_suffix (r.err, "memres: cannot write the standard output: No "
                                              "space left on device\n"));
      run_clear (&r);
      run_tool_stdout (&r, -1, a[0], a[1], a[2], NULL);
      g_test_message ("%s >&-: %d %s", a[0], r.status, r.err);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_true (g_str_has_suffix (r.err, "memres: cannot write the standard output: Bad "
                                              "file descriptor\n"));
      run_clear (&r);
    }
  /* a usage error keeps its status 2, with the reason and the write error */
  run_tool_stdout (&r, full, "alloc", "--json", "host", "-1", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_true (g_str_has_prefix (r.err, "memres alloc: "));
  g_assert_nonnull (strstr (r.err, "\nmemres: cannot write the standard output: "));
  run_clear (&r);
  close (full);
}

/* The string options of every command take any bytes (GLib would convert them to UTF-8 and
 * fail naming neither the option nor the value): a value that is not UTF-8 is refused by the
 * option's own check, which names the option and shows the value printably. */
static void
test_options_not_utf8 (void)
{
  static const struct
  {
    const char *args[6];
    int status;
    const char *message;
  } cases[] = {
    { { "ipc-serve", "--spec", "ho\xffst", "/nonexistent/s", NULL },
      2,
      "memres: --spec: invalid kind name \"ho\\xffst\"" },
    { { "ipc-serve", "--size", "1\xff", "/nonexistent/s", NULL },
      2,
      "memres ipc-serve: --size: invalid size \"1\\xff\"" },
    { { "ipc-serve", "--count", "\xfe", "/nonexistent/s", NULL },
      2,
      "memres ipc-serve: --count \"\\xfe\": expected a number of clients" },
    { { "alloc", "--pattern", "\xff", "host", "1", NULL },
      2,
      "memres: --pattern: invalid pattern \"\\xff\"" },
  };
  Run r = { 0 };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      run_toolv (&r, NULL, cases[i].args);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, cases[i].status);
      g_assert_true (g_str_has_prefix (r.err, cases[i].message));
      g_assert_null (strstr (r.err, "conversion"));
      run_clear (&r);
    }
}

/* A plugin whose kind has an invalid option schema is a plugin that does not load, not a
 * usage error: exit status 3 from every command that needs it, as from memres kinds. */
static void
test_plugin_bad_schema (void)
{
  const char *dir = g_getenv ("MEMRES_TEST_SCHEMA_PLUGIN_DIR");
  const char *const env[] = { "MEMRES_PLUGIN_PATH", dir, NULL };
  static const char *const commands[][5] = {
    { "alloc", "bad_schema", "1", NULL },
    { "alloc", "--json", "bad_schema", "1", NULL },
    { "kinds", "bad_schema", NULL },
    { "kinds", NULL },
  };
  Run r = { 0 };

  g_assert_nonnull (dir);
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      run_toolv (&r, env, commands[i]);
      g_test_message ("%s", r.err);
      g_assert_cmpint (r.status, ==, 3);
      g_assert_true (g_str_has_prefix (r.err, "memres: "));
      run_clear (&r);
    }
  run_toolv (&r, env, commands[1]);
  g_assert_nonnull (strstr (r.out, "\"exit_status\": 3"));
  g_assert_nonnull (strstr (r.err, "default of option \"max\": invalid size \"lots\""));
  run_clear (&r);
  /* what the user typed wrong stays a usage error */
  {
    const char *const args[] = { "alloc", "host:alignment=lots", "1", NULL };

    run_toolv (&r, env, args);
    g_assert_cmpint (r.status, ==, 2);
    run_clear (&r);
  }
}

/* memres replay --threads: each logged Thread on a thread of its own, a free waiting for its
 * allocate made on another thread; the same figures as the serial replay where they cannot
 * differ. memres's actions beside RMM's (out of memory, trim) are read and counted, not
 * replayed. */
static void
test_replay_threads (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-replay-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "threads.csv", NULL);
  GString *text = g_string_new ("Thread,Time,Action,Pointer,Size,Stream\n");
  Run r = { 0 };

  /* thread 1 allocates 100 buffers, thread 2 frees them; thread 3 allocates and frees its own */
  for (guint i = 0; i < 100; i++)
    g_string_append_printf (text, "1,10:00:00.000000,allocate,0x%x,%u,0x0\n", 0x1000 + i * 0x100,
                            10 + i);
  for (guint i = 0; i < 100; i++)
    g_string_append_printf (text, "2,10:00:00.000000,free,0x%x,%u,0x0\n", 0x1000 + i * 0x100,
                            10 + i);
  g_string_append (text,
                   "3,10:00:00.000000,allocate,0x90000,7,0x5\n3,10:00:00.000000,allocate "
                   "failure,0x0,1000000,0x5\n"
                   "3,10:00:00.000000,out of memory,0x0,1000000,0x5\n"
                   "3,10:00:00.000000,trim,0x0,0,0x0\n3,10:00:00.000000,free,0x90000,7,0x5\n");
  g_assert_true (g_file_set_contents (log, text->str, -1, NULL));
  g_string_free (text, TRUE);

  run_tool (&r, "replay", "--json", "--threads", log, "stats>host", NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpuint (json_uint (r.out, "threads"), ==, 3);
  g_assert_cmpuint (json_uint (r.out, "allocations"), ==, 101);
  g_assert_cmpuint (json_uint (r.out, "frees"), ==, 101);
  g_assert_cmpuint (json_uint (r.out, "failures"), ==, 0);
  g_assert_cmpuint (json_uint (r.out, "logged_failures"), ==, 1);
  g_assert_cmpuint (json_uint (r.out, "unmatched_frees"), ==, 0);
  g_assert_cmpuint (json_uint (r.out, "live_at_end"), ==, 0);
  g_assert_cmpuint (json_uint (r.out, "log_peak_used_bytes"), ==, 100 * 10 + 99 * 100 / 2);
  run_clear (&r);
  /* over device memory, each logged Stream on a stream of its own (0x5 here) */
  if (mt_driver_is_fake ())
    {
      run_tool (&r, "replay", "--json", "--threads", log, "dmr", NULL);
      g_test_message ("%s%s", r.out, r.err);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_cmpuint (json_uint (r.out, "failures"), ==, 0);
      g_assert_cmpuint (json_uint (r.out, "live_at_end"), ==, 0);
      run_clear (&r);
    }
  /* serial (the default): the log's peak exactly */
  run_tool (&r, "replay", "--json", log, "stats>host", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpuint (json_uint (r.out, "peak_used_bytes"), ==, 100 * 10 + 99 * 100 / 2);
  run_clear (&r);
  /* usage errors: no SPEC, an unknown option */
  run_tool (&r, "replay", "--threads", log, NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.err, "expected LOG SPEC..."));
  run_clear (&r);
  run_tool (&r, "replay", "--streams", log, "host", NULL);
  g_assert_cmpint (r.status, ==, 2);
  run_clear (&r);
  g_remove (log);
  g_rmdir (dir);
}

/* memres replay says "1 operation", "1 buffer": singular for a count of one. */
static void
test_replay_singular (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-replay-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "one.csv", NULL);
  Run r = { 0 };

  g_assert_true (g_file_set_contents (log,
                                      "Thread,Time,Action,Pointer,Size,Stream\n"
                                      "1,10:00:00.000000,allocate,0x1000,64,0x0\n",
                                      -1, NULL));
  run_tool (&r, "replay", log, "host", NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, ": 1 operation (1 allocation, 0 frees) logged by 1 thread\n"));
  g_assert_nonnull (strstr (r.out, "\nfailures  0 allocations failed; 0 failed in the log; 0 "
                                   "frees skipped; 1 buffer live at the end, closed\n"));
  run_clear (&r);
  g_remove (log);
  g_rmdir (dir);
}

/* memres replay LOG SPEC where SPEC logs to LOG (through a named resource, another path of
 * the same file, append=true): refused with exit status 1 before anything is created, LOG's
 * bytes intact. */
static void
test_replay_keeps_log (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-replay-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *link = g_build_filename (dir, "link.csv", NULL);
  g_autofree char *conf = g_build_filename (dir, "resources.conf", NULL);
  g_autofree char *conf_text = g_strdup_printf ("[debug]\nspec=log:path=%s>host\n", log);
  g_autofree char *via_dot = g_strdup_printf ("log:path=%s/./run.csv>host", dir);
  g_autofree char *appending = g_strdup_printf ("stats>log:path=%s,append=true>host", link);
  const char *const env[] = { "MEMRES_CONFIG", conf, NULL };
  const char *const cases[][5] = {
    { "replay", log, "@debug", NULL },
    { "replay", link, via_dot, NULL },
    { "replay", "--json", log, appending, NULL },
  };
  const char *text = "Thread,Time,Action,Pointer,Size,Stream\n"
                     "1,10:00:00.000000,allocate,0x1000,64,0x0\n"
                     "1,10:00:00.000001,free,0x1000,64,0x0\n";
  Run r = { 0 };

  g_assert_true (g_file_set_contents (log, text, -1, NULL));
  g_assert_true (g_file_set_contents (conf, conf_text, -1, NULL));
  g_assert_cmpint (symlink ("run.csv", link), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *after = NULL;

      run_toolv (&r, env, cases[i]);
      g_test_message ("%s%s", r.out, r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_nonnull (strstr (r.err, "(kind \"log\") would write its log to \""));
      g_assert_nonnull (strstr (r.err, "which is the LOG being replayed: refused"));
      g_assert_true (g_file_get_contents (log, &after, NULL, NULL));
      g_assert_cmpstr (after, ==, text);
      run_clear (&r);
    }
  /* the JSON error names the layer's position */
  run_toolv (&r, env, cases[2]);
  g_assert_nonnull (strstr (r.out, "\"message\": \"layer 2 (kind \\\"log\\\")"));
  g_assert_nonnull (strstr (r.out, "\"exit_status\": 1"));
  run_clear (&r);
  /* another file is logged to as before */
  {
    g_autofree char *other = g_build_filename (dir, "other.csv", NULL);
    g_autofree char *spec = g_strdup_printf ("log:path=%s>host", other);
    g_autofree char *logged = NULL;

    run_tool (&r, "replay", log, spec, NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (g_file_get_contents (other, &logged, NULL, NULL));
    g_assert_true (g_str_has_prefix (logged, "Thread,Time,Action,Pointer,Size,Stream\n"));
    g_assert_nonnull (strstr (logged, ",allocate,"));
    g_assert_nonnull (strstr (logged, ",free,"));
    run_clear (&r);
    g_remove (other);
  }
  g_remove (link);
  g_remove (log);
  g_remove (conf);
  g_rmdir (dir);
}

/* A log layer that cannot write its lines (/dev/full) fails memres alloc and memres replay
 * with exit status 1 and a message naming the layer and the lines lost; GLib's warning says
 * "memres", not the command's name. */
static void
test_log_lines_lost (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-replay-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  Run r = { 0 };

  run_tool (&r, "alloc", "log:path=/dev/full>host", "1KiB", NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.out, "\nclosed    the buffer was freed\n"));
  g_assert_true (g_str_has_suffix (r.err, "\nmemres: layer 1 (kind \"log\"): its log is "
                                          "incomplete: 3 of 3 lines could not be written (No "
                                          "space left on device)\n"));
  /* the warning says who: memres */
  g_assert_true (g_str_has_prefix (r.err, "\n(memres:"));
  g_assert_null (strstr (r.err, "(alloc:"));
  run_clear (&r);
  /* the second layer, with --json: the error is the one document */
  run_tool (&r, "alloc", "--json", "stats>log:path=/dev/full,flush=true>host", "1KiB", NULL);
  g_assert_cmpint (r.status, ==, 1);
  assert_one_json_document (r.out);
  g_assert_true (g_str_has_prefix (r.out, "{\n  \"error\": {\n    \"message\": \"layer 2 (kind "
                                          "\\\"log\\\"): its log is incomplete: 3 of 3 lines"));
  run_clear (&r);

  g_assert_true (g_file_set_contents (log,
                                      "Thread,Time,Action,Pointer,Size,Stream\n"
                                      "1,10:00:00.000000,allocate,0x1000,64,0x0\n"
                                      "1,10:00:00.000001,allocate,0x2000,64,0x0\n"
                                      "1,10:00:00.000002,free,0x1000,64,0x0\n",
                                      -1, NULL));
  run_tool (&r, "replay", log, "log:path=/dev/full>host", NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_nonnull (strstr (r.out, ": 3 operations (2 allocations, 1 free)"));
  g_assert_true (g_str_has_suffix (r.err, "\nmemres: layer 1 (kind \"log\"): its log is "
                                          "incomplete: 5 of 5 lines could not be written (No "
                                          "space left on device)\n"));
  run_clear (&r);
  /* snapshot too (it exited 0): the snapshot is written, then the error, MEMRES_ERROR_FAILED
   * (the header and the allocate: the buffer is still open) */
  run_tool (&r, "snapshot", "-a", "64", "log:path=/dev/full>host", NULL);
  g_assert_cmpint (r.status, ==, 1);
  g_assert_true (g_str_has_prefix (r.out, "{\n  \"memres_snapshot\": 1"));
  g_assert_true (g_str_has_suffix (r.err, "\nmemres: layer 1 (kind \"log\"): its log is "
                                          "incomplete: 2 of 2 lines could not be written (No "
                                          "space left on device)\n"));
  run_clear (&r);
  run_tool (&r, "snapshot", "--json", "-a", "64", "log:path=/dev/full>host", NULL);
  g_assert_cmpint (r.status, ==, 1);
  assert_one_json_document (r.out);
  g_assert_nonnull (strstr (r.out, "\"domain\": \"memres-error-quark\""));
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_FAILED\""));
  g_assert_nonnull (strstr (r.out, "its log is incomplete: 2 of 2 lines"));
  run_clear (&r);
  g_remove (log);
  g_rmdir (dir);
}

/* With --json, a log layer on the file of stdout (/dev/stdout, /proc/self/fd/1, the file
 * itself) is refused before it is created, exit status 1: stdout holds the error document
 * alone, no CSV line in it. */
static void
test_json_log_on_stdout (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *out = g_build_filename (dir, "out.json", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *self_spec = g_strdup_printf ("log:path=%s>host", out);
  const char *const specs[]
      = { "log:path=/dev/stdout>host", "stats>log:path=/proc/self/fd/1>host", self_spec };
  Run r = { 0 };

  g_assert_true (g_file_set_contents (log,
                                      "Thread,Time,Action,Pointer,Size,Stream\n"
                                      "1,10:00:00.000000,allocate,0x1000,64,0x0\n",
                                      -1, NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    for (guint replay = 0; replay < 2; replay++)
      {
        int fd = open (out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        g_autofree char *written = NULL;

        g_assert_cmpint (fd, >=, 0);
        if (replay)
          run_tool_stdout (&r, fd, "replay", "--json", log, specs[i], NULL);
        else
          run_tool_stdout (&r, fd, "alloc", "--json", specs[i], "1KiB", NULL);
        close (fd);
        g_test_message ("%s: %s", specs[i], r.err);
        g_assert_cmpint (r.status, ==, 1);
        g_assert_nonnull (strstr (r.err, "which is the standard output, where --json writes its "
                                         "document: refused"));
        g_assert_true (g_file_get_contents (out, &written, NULL, NULL));
        assert_one_json_document (written);
        g_assert_nonnull (strstr (written, "\"exit_status\": 1"));
        g_assert_null (strstr (written, "Thread,Time"));
        run_clear (&r);
      }
  g_remove (out);
  g_remove (log);
  g_rmdir (dir);
}

/* memres snapshot refuses a log layer on the file its snapshot goes to, before it is created,
 * exit status 1, MEMRES_ERROR_FAILED: the standard output by any name (its CSV lines were mixed
 * into the JSON document), and the -o FILE (written by the log, then replaced by the snapshot:
 * the log lost). Both were taken. */
static void
test_snapshot_log_on_output (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *out = g_build_filename (dir, "out.json", NULL);
  g_autofree char *link = g_build_filename (dir, "link.json", NULL);
  g_autofree char *self_spec = g_strdup_printf ("log:path=%s>host", out);
  g_autofree char *link_spec = g_strdup_printf ("stats>log:path=%s>host", link);
  const char *const specs[]
      = { "log:path=/dev/stdout>host", "stats>log:path=/proc/self/fd/1>host", self_spec };
  Run r = { 0 };

  g_assert_cmpint (symlink ("out.json", link), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (specs); i++)
    {
      int fd = open (out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      g_autofree char *written = NULL;

      g_assert_cmpint (fd, >=, 0);
      run_tool_stdout (&r, fd, "snapshot", "--json", "-a", "64", specs[i], NULL);
      close (fd);
      g_test_message ("%s: %s", specs[i], r.err);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_nonnull (strstr (r.err, "which is the standard output, where the snapshot is "
                                       "written: refused"));
      g_assert_true (g_file_get_contents (out, &written, NULL, NULL));
      assert_one_json_document (written);
      g_assert_nonnull (strstr (written, "\"code_name\": \"MEMRES_ERROR_FAILED\""));
      g_assert_null (strstr (written, "Thread,Time"));
      run_clear (&r);
    }
  for (gsize i = 0; i < 2; i++)
    {
      g_autofree char *written = NULL;

      g_assert_true (g_file_set_contents (out, "old", -1, NULL));
      run_tool (&r, "snapshot", "-a", "64", "-o", i == 0 ? out : link,
                i == 0 ? self_spec : link_spec, NULL);
      g_assert_cmpint (r.status, ==, 1);
      g_assert_nonnull (strstr (r.err, "which is the -o FILE of the snapshot: refused"));
      g_assert_true (g_file_get_contents (out, &written, NULL, NULL));
      g_assert_cmpstr (written, ==, "old");
      run_clear (&r);
    }
  g_remove (link);
  g_remove (out);
  g_rmdir (dir);
}

/* A named resource's description= is shown by memres resources, text and JSON (null when it
 * has none). */
static void
test_resources_description (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *conf = g_build_filename (dir, "resources.conf", NULL);
  const char *const env[] = { "MEMRES_CONFIG", conf, NULL };
  const char *const list[] = { "resources", NULL };
  const char *const list_json[] = { "resources", "--json", NULL };
  g_autofree char *want = NULL;
  Run r = { 0 };

  g_assert_true (g_file_set_contents (conf,
                                      "[base]\nspec=host\ndescription=what the job uses\n"
                                      "[bare]\nspec=@base\n",
                                      -1, NULL));
  run_toolv (&r, env, list);
  g_assert_cmpint (r.status, ==, 0);
  want = g_strdup_printf ("%s: 2 named resources\n\n@base\n  spec: host\n  description: what "
                          "the job uses\n  from: %s:2\n\n@bare\n  spec: @base\n  from: %s:5\n",
                          conf, conf, conf);
  g_assert_cmpstr (r.out, ==, want);
  run_clear (&r);
  run_toolv (&r, env, list_json);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "\"spec\": \"host\",\n      \"description\": \"what the job "
                                   "uses\",\n"));
  g_assert_nonnull (strstr (r.out, "\"spec\": \"@base\",\n      \"description\": null,\n"));
  run_clear (&r);
  g_remove (conf);
  g_rmdir (dir);
}

/* memres trace -o FILE where FILE is one of the LOGs (by another name too): refused with exit
 * status 2 (MEMRES_ERROR_INVALID_ARGUMENT) before anything is written, the LOG's bytes intact
 * (the trace replaced the log). Another -o is written as before. */
static void
test_trace_keeps_log (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-trace-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *other = g_build_filename (dir, "other.csv", NULL);
  g_autofree char *link = g_build_filename (dir, "link.csv", NULL);
  g_autofree char *via_dot = g_strdup_printf ("%s/./run.csv", dir);
  g_autofree char *out = g_build_filename (dir, "trace.json", NULL);
  const char *const cases[][7] = {
    { "trace", log, "-o", log, NULL },
    { "trace", other, log, "-o", link, NULL },
    { "trace", "--output", via_dot, link, NULL },
  };
  const char *text = "Thread,Time,Action,Pointer,Size,Stream\n"
                     "1,10:00:00.000000,allocate,0x1000,64,0x0\n"
                     "1,10:00:00.000001,free,0x1000,64,0x0\n";
  g_autofree char *written = NULL;
  Run r = { 0 };

  g_assert_true (g_file_set_contents (log, text, -1, NULL));
  g_assert_true (g_file_set_contents (other, text, -1, NULL));
  g_assert_cmpint (symlink ("run.csv", link), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *after = NULL;

      run_toolv (&r, NULL, cases[i]);
      g_test_message ("%s%s", r.out, r.err);
      g_assert_cmpint (r.status, ==, 2);
      g_assert_nonnull (
          strstr (r.err, "refused, the trace would overwrite the log it is made from"));
      g_assert_true (g_file_get_contents (log, &after, NULL, NULL));
      g_assert_cmpstr (after, ==, text);
      assert_one_error_line (&r);
      run_clear (&r);
    }
  g_assert_false (g_file_test (out, G_FILE_TEST_EXISTS));
  run_tool (&r, "trace", log, "-o", out, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (g_file_get_contents (out, &written, NULL, NULL));
  g_assert_true (g_str_has_prefix (written, "{\"displayTimeUnit\": \"ms\""));
  run_clear (&r);
  g_remove (out);
  g_remove (link);
  g_remove (other);
  g_remove (log);
  g_rmdir (dir);
}

/* The -o FILE of trace, view and snapshot (sdk/file-writer.c): a symbolic link is followed (the
 * file it leads to gets the document, the link stays a link); a FIFO and a device (/dev/null,
 * through a link) are refused, G_FILE_ERROR_INVAL, left as they are (no hang on a FIFO without a
 * reader). They used to be replaced by a regular file. Every FILE that cannot be one is a usage
 * error, exit status 2: these, a directory (G_FILE_ERROR_ISDIR), a FILE in a missing directory
 * and a link to nothing (G_FILE_ERROR_NOENT). A directory, a FIFO and a device were exit status
 * 1 while a missing directory was 2. */
static void
test_output_kinds (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-output-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *target = g_build_filename (dir, "out.txt", NULL);
  g_autofree char *link = g_build_filename (dir, "latest", NULL);
  g_autofree char *fifo = g_build_filename (dir, "fifo", NULL);
  g_autofree char *devnull = g_build_filename (dir, "devnull", NULL);
  const char *text = "Thread,Time,Action,Pointer,Size,Stream\n"
                     "1,10:00:00.000000,allocate,0x1000,64,0x0\n";
  const char *const commands[][3] = {
    { "trace", log, "{\"displayTimeUnit\"" },
    { "view", log, "<!DOCTYPE html>" },
    { "snapshot", "host", "{\n  \"memres_snapshot\": 1" },
  };
  g_autofree char *missing = g_build_filename (dir, "no-such-dir", "out.txt", NULL);
  g_autofree char *dangling = g_build_filename (dir, "dangling", NULL);
  const struct
  {
    const char *path;
    gint code;
    const char *code_name, *says;
  } refused[] = {
    { fifo, G_FILE_ERROR_INVAL, "G_FILE_ERROR_INVAL", "not a regular file" },
    { devnull, G_FILE_ERROR_INVAL, "G_FILE_ERROR_INVAL", "not a regular file" },
    { dir, G_FILE_ERROR_ISDIR, "G_FILE_ERROR_ISDIR", ": a directory" },
    { missing, G_FILE_ERROR_NOENT, "G_FILE_ERROR_NOENT", "No such file or directory" },
    { dangling, G_FILE_ERROR_NOENT, "G_FILE_ERROR_NOENT", "a symbolic link to nothing" },
  };
  struct stat st;
  Run r = { 0 };

  g_assert_true (g_file_set_contents (log, text, -1, NULL));
  g_assert_cmpint (symlink ("out.txt", link), ==, 0);
  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_cmpint (symlink ("/dev/null", devnull), ==, 0);
  g_assert_cmpint (symlink ("nowhere", dangling), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_autofree char *written = NULL;

      g_test_message ("%s", commands[i][0]);
      g_assert_true (g_file_set_contents (target, "old", -1, NULL));
      run_tool (&r, commands[i][0], commands[i][1], "-o", link, NULL);
      g_test_message ("%s", r.err);
      g_assert_cmpint (r.status, ==, 0);
      run_clear (&r);
      g_assert_cmpint (lstat (link, &st), ==, 0);
      g_assert_true (S_ISLNK (st.st_mode));
      g_assert_true (g_file_get_contents (target, &written, NULL, NULL));
      g_assert_true (g_str_has_prefix (written, commands[i][2]));
      for (gsize k = 0; k < G_N_ELEMENTS (refused); k++)
        {
          g_autofree char *code = g_strdup_printf ("\"code\": %d,", refused[k].code);
          g_autofree char *code_name
              = g_strdup_printf ("\"code_name\": \"%s\"", refused[k].code_name);

          run_tool (&r, "--json", commands[i][0], commands[i][1], "-o", refused[k].path, NULL);
          g_test_message ("%s", r.err);
          assert_one_error_line (&r);
          g_assert_cmpint (r.status, ==, 2);
          g_assert_nonnull (strstr (r.out, "\"domain\": \"g-file-error-quark\""));
          g_assert_nonnull (strstr (r.out, code));
          g_assert_nonnull (strstr (r.out, code_name));
          g_assert_nonnull (strstr (r.out, "\"exit_status\": 2"));
          g_assert_nonnull (strstr (r.err, refused[k].says));
          run_clear (&r);
        }
      g_assert_cmpint (lstat (fifo, &st), ==, 0);
      g_assert_true (S_ISFIFO (st.st_mode));
      g_assert_cmpint (lstat (devnull, &st), ==, 0);
      g_assert_true (S_ISLNK (st.st_mode));
      g_assert_cmpint (stat ("/dev/null", &st), ==, 0);
      g_assert_true (S_ISCHR (st.st_mode));
      g_assert_cmpint (lstat (dangling, &st), ==, 0);
      g_assert_true (S_ISLNK (st.st_mode));
      g_assert_false (g_file_test (missing, G_FILE_TEST_EXISTS));
    }
  g_remove (dangling);
  g_remove (devnull);
  g_remove (fifo);
  g_remove (link);
  g_remove (target);
  g_remove (log);
  g_rmdir (dir);
}

/* memres trace takes --json (-j, and memres --json trace) as every command does: its errors are
 * JSON on stdout with their domain and code; the trace itself is the same document. It was
 * "Unknown option --json". */
static void
test_trace_json (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-trace-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *missing = g_build_filename (dir, "missing.csv", NULL);
  g_autofree char *plain = NULL;
  const char *text = "Thread,Time,Action,Pointer,Size,Stream\n"
                     "1,10:00:00.000000,allocate,0x1000,64,0x0\n";
  Run r = { 0 };

  g_assert_true (g_file_set_contents (log, text, -1, NULL));
  run_tool (&r, "trace", log, NULL);
  g_assert_cmpint (r.status, ==, 0);
  plain = g_strdup (r.out);
  run_clear (&r);
  run_tool (&r, "trace", "--json", log, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.out, ==, plain);
  run_clear (&r);
  /* a missing LOG is named as missing (it was "not a regular file") */
  run_tool (&r, "--json", "trace", "-j", missing, NULL);
  g_test_message ("%s%s", r.out, r.err);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.out, "\"domain\": \"g-file-error-quark\""));
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"G_FILE_ERROR_NOENT\",\n"));
  g_assert_nonnull (strstr (r.out, "missing.csv: No such file\""));
  g_assert_nonnull (strstr (r.out, "\"exit_status\": 2"));
  run_clear (&r);
  /* a directory is not a regular file */
  run_tool (&r, "--json", "trace", dir, NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_INVALID_ARGUMENT\",\n"));
  g_assert_nonnull (strstr (r.out, "not a regular file"));
  run_clear (&r);
  run_tool (&r, "trace", "--json", log, "-o", log, NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_nonnull (strstr (r.out, "\"code_name\": \"MEMRES_ERROR_INVALID_ARGUMENT\",\n"));
  g_assert_nonnull (strstr (r.out, "the trace would overwrite the log it is made from"));
  run_clear (&r);
  g_remove (log);
  g_rmdir (dir);
}

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
  g_test_add_func ("/tool/error/one-line", test_error_one_line);
  g_test_add_func ("/tool/error/huge-input", test_error_huge_input);
  g_test_add_func ("/tool/error/unknown-command-json", test_unknown_command_json);
  g_test_add_func ("/tool/json-first", test_json_first);
  g_test_add_func ("/tool/version", test_version);
  g_test_add_func ("/tool/kinds/broken-plugins", test_kinds_broken_plugins);
  g_test_add_func ("/tool/kinds/healthy", test_kinds_healthy);
  g_test_add_func ("/tool/kinds/shadowed-by-embedded", test_kinds_shadowed_by_embedded);
  g_test_add_func ("/tool/kinds/odd-strings", test_kinds_odd_strings);
  g_test_add_func ("/tool/alloc/usage-errors", test_alloc_usage_errors);
  g_test_add_func ("/tool/alloc/tag", test_alloc_tag);
  g_test_add_func ("/tool/info/driver-states", test_info_driver_states);
  g_test_add_func ("/tool/alloc/rounded-size", test_alloc_reports_rounded_size);
  g_test_add_func ("/tool/alloc/negative-size", test_alloc_negative_size);
  g_test_add_func ("/tool/alloc/small-sizes", test_alloc_small_sizes);
  g_test_add_func ("/tool/alloc/zero-size", test_alloc_zero_size);
  g_test_add_func ("/tool/info/managed", test_info_managed);
  g_test_add_func ("/tool/alloc/default-reason", test_alloc_default_reason);
  g_test_add_func ("/tool/alloc/close-fails", test_alloc_close_fails);
  g_test_add_func ("/tool/alloc/escapes-specs", test_alloc_escapes_specs);
  g_test_add_func ("/tool/ipc-serve/not-shareable", test_ipc_serve_not_shareable);
  g_test_add_func ("/tool/ipc-serve/socket", test_ipc_serve_socket);
  g_test_add_func ("/tool/ipc-serve/count", test_ipc_serve_count);
  g_test_add_func ("/tool/ipc/silent-peers", test_ipc_silent_peers);
  g_test_add_func ("/tool/odd-plugin-files", test_odd_plugin_files);
  g_test_add_func ("/tool/replay/round-trip", test_replay_round_trip);
  g_test_add_func ("/tool/replay/bad-logs", test_replay_bad_logs);
  g_test_add_func ("/tool/error/bad-named-files", test_bad_named_files);
  g_test_add_func ("/tool/replay/free-failure", test_replay_free_failure);
  g_test_add_func ("/tool/replay/traces", test_replay_traces);
  g_test_add_func ("/tool/resources-and-layers", test_resources_and_layers);
  g_test_add_func ("/tool/stdout-unwritable", test_stdout_unwritable);
  g_test_add_func ("/tool/options-not-utf8", test_options_not_utf8);
  g_test_add_func ("/tool/plugin-bad-schema", test_plugin_bad_schema);
  g_test_add_func ("/tool/replay/singular", test_replay_singular);
  g_test_add_func ("/tool/replay/threads", test_replay_threads);
  g_test_add_func ("/tool/replay/keeps-log", test_replay_keeps_log);
  g_test_add_func ("/tool/trace/keeps-log", test_trace_keeps_log);
  g_test_add_func ("/tool/trace/json", test_trace_json);
  g_test_add_func ("/tool/output-kinds", test_output_kinds);
  g_test_add_func ("/tool/log-lines-lost", test_log_lines_lost);
  g_test_add_func ("/tool/snapshot/log-on-output", test_snapshot_log_on_output);
  g_test_add_func ("/tool/json-log-on-stdout", test_json_log_on_stdout);
  g_test_add_func ("/tool/resources/description", test_resources_description);
  return g_test_run ();
}

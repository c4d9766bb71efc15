/* test-tool.c: the `memres` command as a user runs it (the program named by MEMRES_TOOL), with
 * no driver (suite core) and against the fake (suite fake): its errors, JSON output, version,
 * kinds, plugins, resources and layers. The alloc and info commands: test-tool-alloc.c; ipc-serve:
 * test-tool-ipc.c; replay and trace: test-tool-replay.c; the runner: testutil-tool.c. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "testutil.h"
#include "testutil-tool.h"

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

/* Each command's --help shows a usage line that runs: "memres CMD [OPTION…] ..." (it was
 * "memres [OPTION…] ...", which names no command: an unknown command when typed). */
static void
test_command_help_usage (void)
{
  static const char *const commands[] = { "kinds", "info",     "alloc", "resources", "replay",
                                          "trace", "snapshot", "view",  "ipc-serve", "ipc-attach" };
  Run r = { 0 };

  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    {
      g_autofree char *want = g_strdup_printf ("Usage:\n  memres %s [OPTION", commands[i]);

      run_tool (&r, commands[i], "--help", NULL);
      g_test_message ("%s --help: %.200s", commands[i], r.out);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_true (g_str_has_prefix (r.out, want));
      g_assert_cmpstr (r.err, ==, "");
      run_clear (&r);
    }
  /* an unknown option names the command as before */
  run_tool (&r, "alloc", "--nosuch", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_true (g_str_has_prefix (r.err, "memres alloc: Unknown option --nosuch"));
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
  /* memres --help says how to ask for it */
  run_tool (&r, "--help", NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (g_str_has_suffix (r.out, "\nmemres --version [--json] prints the version.\n"));
  run_clear (&r);
  /* any other argument is a usage error, never ignored with exit status 0 */
  run_tool (&r, "--version", "extra", NULL);
  g_assert_cmpint (r.status, ==, 2);
  g_assert_cmpstr (r.out, ==, "");
  g_assert_cmpstr (r.err, ==,
                   "memres: --version: unexpected argument \"extra\" (it takes only --json)\n");
  run_clear (&r);
  run_tool (&r, "--version", "--json", "--bogus", NULL);
  g_assert_cmpint (r.status, ==, 2);
  assert_one_json_document (r.out);
  g_assert_nonnull (strstr (r.out, "\"exit_status\": 2"));
  run_clear (&r);
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

/* A file the user names (a log adaptor's path, MEMRES_CONFIG, replay's LOG) that is missing, is
 * under something that is not a directory, is a directory or a FIFO is one bad input: exit
 * status 2, one line naming the file; GLib's file error with the system's code (the log's and
 * the config file's: core/config.c, plugins/log/log.c; replay's LOG as view's and trace's
 * inputs: input.c, G_FILE_ERROR_ISDIR for a directory and G_FILE_ERROR_INVAL for a FIFO, as the
 * config file's); a FIFO is refused at once, never waited on (this test would time out). */
static void
test_bad_named_files (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *fifo = g_build_filename (dir, "fifo", NULL);
  g_autofree char *file = g_build_filename (dir, "file", NULL);
  g_autofree char *missing = g_build_filename (dir, "nonexistent-dir", "x.csv", NULL);
  g_autofree char *under_file = g_build_filename (file, "x.csv", NULL);
  const char *const paths[] = { missing, under_file, dir, fifo };
  /* replay's LOG, read by input.c as view's and trace's inputs */
  const char *const replay_why[]
      = { ": No such file\n", ": Not a directory\n", ": not a regular file (a directory)\n",
          ": not a regular file (a FIFO)\n" };
  const char *const replay_code[]
      = { "G_FILE_ERROR_NOENT", "G_FILE_ERROR_NOTDIR", "G_FILE_ERROR_ISDIR", "G_FILE_ERROR_INVAL" };
  /* G_FILE_ERROR for the log's path and the config file: a FIFO the log opens for writing
   * without a reader (ENXIO), the config file opens to read and finds no regular file */
  const char *const log_code[]
      = { "G_FILE_ERROR_NOENT", "G_FILE_ERROR_NOTDIR", "G_FILE_ERROR_ISDIR", "G_FILE_ERROR_NXIO" };
  const char *const config_code[]
      = { "G_FILE_ERROR_NOENT", "G_FILE_ERROR_NOTDIR", "G_FILE_ERROR_ISDIR", "G_FILE_ERROR_INVAL" };
  const char *const config_why[]
      = { "No such file or directory", "Not a directory", "not a regular file (a directory)",
          "not a regular file (a FIFO)" };
  Run r = { 0 };

  g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
  g_assert_true (g_file_set_contents (file, "", -1, NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (paths); i++)
    {
      g_autofree char *spec = g_strdup_printf ("log:path=%s>host", paths[i]);
      g_autofree char *log_needle = g_strdup_printf ("\"%s\"", paths[i]);
      g_autofree char *conf_needle = g_strdup_printf ("memres: MEMRES_CONFIG: config file %s: %s\n",
                                                      paths[i], config_why[i]);
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
                                 k == 2 ? replay_code[i] : (k == 1 ? config_code : log_code)[i]);
          const char *domain = "\"domain\": \"g-file-error-quark\",\n";

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
      g_assert_nonnull (strstr (r.out, "\"code_name\": \"G_FILE_ERROR_ACCES\",\n"));
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

/* Every command whose standard output cannot be written (a full disk, a closed descriptor)
 * says so on stderr and exits 1, not 0; one that failed already keeps its own status. */
static void
test_stdout_unwritable (void)
{
  static const char *const commands[][4] = {
    { "kinds", "host", NULL },
    { "alloc", "host", "1KiB", NULL },
    { "resources", NULL },
    { "info", NULL },
    { "--version", NULL },
    { "--help", NULL },
    /* a command's help, which GOption prints and exits 0 with (it did so past the check) */
    { "alloc", "--help", NULL },
    { "view", "--help-all", NULL },
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

/* memres snapshot -o naming the config file that defines the resource it snapshots: refused,
 * exit status 2, before anything is created, the file as it was (it was replaced by the
 * snapshot). Another -o is written. */
static void
test_snapshot_output_is_config (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-tool-XXXXXX", NULL);
  g_autofree char *conf = g_build_filename (dir, "resources.conf", NULL);
  g_autofree char *other = g_build_filename (dir, "snap.json", NULL);
  const char *const env[] = { "MEMRES_CONFIG", conf, NULL };
  const char *const operands[] = { "a", "@a", "stats>@a" };
  Run r = { 0 };

  g_assert_true (g_file_set_contents (conf, "[a]\nspec=host\n", -1, NULL));
  for (gsize i = 0; i < G_N_ELEMENTS (operands); i++)
    {
      const char *const args[] = { "snapshot", "-o", conf, operands[i], NULL };
      g_autofree char *kept = NULL;

      run_toolv (&r, env, args);
      g_test_message ("%s: %d %s", operands[i], r.status, r.err);
      g_assert_cmpint (r.status, ==, 2);
      assert_one_error_line (&r);
      g_assert_nonnull (strstr (r.err, "is the config file that defines the named resources of "
                                       "the spec: refused"));
      g_assert_true (g_file_get_contents (conf, &kept, NULL, NULL));
      g_assert_cmpstr (kept, ==, "[a]\nspec=host\n");
      run_clear (&r);
    }
  {
    const char *const args[] = { "snapshot", "-o", other, "a", NULL };
    g_autofree char *written = NULL;

    run_toolv (&r, env, args);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_true (g_file_get_contents (other, &written, NULL, NULL));
    g_assert_true (g_str_has_prefix (written, "{\n  \"memres_snapshot\": 1"));
    run_clear (&r);
  }
  g_remove (other);
  g_remove (conf);
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

/* A file another writer holds locked with flock() (a log layer writing it, a sleep's file) is
 * refused as the log of a stack and as an -o FILE alike: G_FILE_ERROR_AGAIN (flock()'s
 * EWOULDBLOCK through g_file_error_from_errno()), a usage error (exit status 2), the file left as
 * it is. The log layer's refusal was MEMRES_ERROR_INVALID_ARGUMENT, the file writer's
 * G_FILE_ERROR_INVAL. */
static void
test_locked_files (void)
{
  g_autofree char *dir = g_dir_make_tmp ("memres-test-locked-XXXXXX", NULL);
  g_autofree char *locked = g_build_filename (dir, "locked.csv", NULL);
  g_autofree char *log = g_build_filename (dir, "run.csv", NULL);
  g_autofree char *spec = g_strdup_printf ("log:path=%s>host", locked);
  const char *const text = "Thread,Time,Action,Pointer,Size,Stream\n"
                           "1,10:00:00.000000,allocate,0x1000,64,0x0\n";
  const char *const runs[][6] = {
    { "alloc", "--json", spec, "1MiB", NULL },
    { "trace", "--json", log, "-o", locked, NULL },
  };
  g_autofree char *after = NULL;
  Run r = { 0 };
  int fd;

  g_assert_true (g_file_set_contents (log, text, -1, NULL));
  g_assert_true (g_file_set_contents (locked, text, -1, NULL));
  fd = open (locked, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_EX), ==, 0);
  for (gsize i = 0; i < G_N_ELEMENTS (runs); i++)
    {
      run_toolv (&r, NULL, runs[i]);
      g_test_message ("%s", r.err);
      assert_one_error_line (&r);
      g_assert_cmpint (r.status, ==, 2);
      g_assert_nonnull (strstr (r.out, "\"domain\": \"g-file-error-quark\",\n"));
      g_assert_nonnull (strstr (r.out, "\"code_name\": \"G_FILE_ERROR_AGAIN\",\n"));
      g_assert_nonnull (strstr (r.err, locked));
      run_clear (&r);
    }
  g_assert_true (g_file_get_contents (locked, &after, NULL, NULL));
  g_assert_cmpstr (after, ==, text);
  close (fd);
  g_remove (locked);
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
  g_test_add_func ("/tool/error/locked-files", test_locked_files);
  g_test_add_func ("/tool/json-first", test_json_first);
  g_test_add_func ("/tool/command-help-usage", test_command_help_usage);
  g_test_add_func ("/tool/version", test_version);
  g_test_add_func ("/tool/kinds/broken-plugins", test_kinds_broken_plugins);
  g_test_add_func ("/tool/kinds/healthy", test_kinds_healthy);
  g_test_add_func ("/tool/kinds/shadowed-by-embedded", test_kinds_shadowed_by_embedded);
  g_test_add_func ("/tool/kinds/odd-strings", test_kinds_odd_strings);
  g_test_add_func ("/tool/odd-plugin-files", test_odd_plugin_files);
  g_test_add_func ("/tool/error/bad-named-files", test_bad_named_files);
  g_test_add_func ("/tool/resources-and-layers", test_resources_and_layers);
  g_test_add_func ("/tool/stdout-unwritable", test_stdout_unwritable);
  g_test_add_func ("/tool/options-not-utf8", test_options_not_utf8);
  g_test_add_func ("/tool/plugin-bad-schema", test_plugin_bad_schema);
  g_test_add_func ("/tool/output-kinds", test_output_kinds);
  g_test_add_func ("/tool/snapshot/log-on-output", test_snapshot_log_on_output);
  g_test_add_func ("/tool/snapshot/output-is-config", test_snapshot_output_is_config);
  g_test_add_func ("/tool/resources/description", test_resources_description);
  return g_test_run ();
}

/* test-tool-alloc.c: the `memres alloc` and `memres info` commands (sizes, tags, reasons, a
 * close that fails, the driver's states), with no driver (suite core) and against the fake
 * (suite fake). */
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
#include "testutil-tool.h"

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
      "log:path=%s/"
      "x\\x1b[2Jx.csv,append=false,flush=false,tags=false,segments=false,backtrace=false,rmm=false",
      dir);
  g_autofree char *want_resource = g_strdup_printf ("resource  %s>host:alignment=256\n", layer);
  g_autofree char *want_layer = g_strdup_printf ("\nlayers    1  %s\n", layer);
  g_autofree char *want_json = g_strdup_printf ("\"spec\": "
                                                "\"log:path=%s/"
                                                "x\\u001b[2Jx.csv,append=false,flush=false,tags="
                                                "false,segments=false,backtrace=false,rmm=false\",",
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

int
main (int argc, char **argv)
{
  mt_init (&argc, &argv);
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
  return g_test_run ();
}

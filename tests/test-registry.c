/* test-registry.c: lookups, kinds registered by the application, schema validation at
 * registration, the search path and the list of kinds. */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testkind.h"
#include "testutil.h"

static void
test_lookup_host (void)
{
  g_autoptr (GError) error = NULL;
  MemresKind *a, *b;

  a = memres_registry_lookup ("host", &error);
  g_assert_no_error (error);
  b = memres_registry_lookup ("host", &error);
  g_assert_no_error (error);
  /* one kind, a new reference per lookup */
  g_assert_true (a == b);
  memres_kind_unref (a);
  g_assert_cmpstr (memres_kind_get_name (b), ==, "host");
  g_assert_cmpstr (memres_kind_get_plugin_name (b), ==, "host");
  g_assert_null (memres_kind_get_plugin_path (b)); /* embedded */
  g_assert_nonnull (strstr (memres_kind_get_description (b), "host memory"));
  memres_kind_unref (b);
}

static void
test_lookup_invalid (void)
{
  static const char *const names[] = { "", "a/b", "..", "../host", "host/", "HOST", "1x", "a-b" };
  gsize i;

  for (i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autoptr (GError) error = NULL;
      g_assert_null (memres_registry_lookup (names[i], &error));
      g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
    }
}

static void
test_lookup_unknown (void)
{
  g_autoptr (GError) error = NULL;

  g_assert_null (memres_registry_lookup ("no_such_kind", &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (error->message, "libmemres-no_such_kind.so"));
}

static void
test_register_app_kind (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = NULL;

  tk_register ();
  kind = memres_registry_lookup ("tk", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (memres_kind_get_name (kind), ==, "tk");
  g_assert_null (memres_kind_get_plugin_name (kind));
  g_assert_null (memres_kind_get_plugin_path (kind));
}

static void
test_register_duplicate (void)
{
  g_autoptr (GError) error = NULL;
  MemresKindInfo info = tk_info;

  tk_register ();
  g_assert_false (memres_registry_register_kind (&tk_info, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_EXISTS);
  g_clear_error (&error);
  /* the embedded kind is registered before any application kind can take its name */
  info.name = "host";
  g_assert_false (memres_registry_register_kind (&info, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_EXISTS);
}

static const char *const no_choices[] = { NULL };

static void
assert_register_invalid (const MemresKindInfo *info, const char *needle)
{
  g_autoptr (GError) error = NULL;

  g_assert_false (memres_registry_register_kind (info, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT);
  if (needle != NULL && strstr (error->message, needle) == NULL)
    g_error ("message lacks \"%s\": %s", needle, error->message);
}

/* An IPC test slot that only says it was reached (registration tests, no sharing). */
static gboolean
reached_export_chunks (MemresResource *mr, const MemresAllocation *alloc, MemresBufferChunks *out,
                       GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "reached_export_chunks ran");
  return FALSE;
}

static gboolean
reached_import_chunks (MemresResource *mr, const MemresBufferChunks *in, MemresStream stream,
                       MemresAllocation *alloc, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "reached_import_chunks ran");
  return FALSE;
}

static gboolean
reached_export_handle (MemresResource *mr, MemresIpcHandle **handle, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "reached_export_handle ran");
  return FALSE;
}

static gboolean
reached_import_handle (MemresResource *mr, const MemresIpcHandle *handle, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "reached_import_handle ran");
  return FALSE;
}

static gboolean
reached_export_buffer (MemresResource *mr, const MemresAllocation *alloc, MemresBufferExport *out,
                       GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "reached_export_buffer ran");
  return FALSE;
}

static gboolean
reached_import_fabric_handle (MemresResource *mr, const MemresIpcHandle *handle,
                              const MemresFabricHandle *fabric, GError **error)
{
  g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "reached_import_fabric_handle ran");
  return FALSE;
}

static void
assert_ipc_table_refused (const MemresKindInfo *info, GQuark domain, gint code, const char *needle)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = NULL;

  g_assert_false (memres_registry_register_kind (info, &error));
  g_assert_error (error, domain, code);
  if (strstr (error->message, needle) == NULL)
    g_error ("message lacks \"%s\": %s", needle, error->message);
  g_clear_error (&error);
  /* nothing registered */
  kind = memres_registry_lookup (info->name, &error);
  g_assert_null (kind);
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
}

/* The IPC table (MemresKindInfo.ipc) is checked when the kind registers: its version, its
 * pairs, none on an adaptor; and copied: what the kind's plugin does with its table after
 * registering changes nothing. */
static void
test_register_ipc_table (void)
{
  MemresKindInfo info = tk_info;
  MemresIpcOps ipc = { .version = MEMRES_IPC_OPS_VERSION };
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  g_autoptr (MemresBuffer) buf = NULL;
  int sv[2];

  info.name = "tk_ipc";
  info.ipc = &ipc;

  /* version */
  ipc.version = 0;
  assert_ipc_table_refused (&info, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                            "IPC table version 0");
  ipc.version = MEMRES_IPC_OPS_VERSION + 1;
  assert_ipc_table_refused (&info, MEMRES_PLUGIN_ERROR, MEMRES_PLUGIN_ERROR_ABI_MISMATCH,
                            "is not one this memres knows");
  ipc.version = MEMRES_IPC_OPS_VERSION;

  /* each pair, either half alone */
  ipc.export_chunks = reached_export_chunks;
  assert_ipc_table_refused (&info, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                            "has export_chunks without import_chunks");
  ipc.export_chunks = NULL;
  ipc.import_chunks = reached_import_chunks;
  assert_ipc_table_refused (&info, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                            "has import_chunks without export_chunks");
  ipc.import_chunks = NULL;
  ipc.import_handle = reached_import_handle;
  assert_ipc_table_refused (&info, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                            "has import_handle without export_handle");
  ipc.import_handle = NULL;
  ipc.export_buffer = reached_export_buffer;
  assert_ipc_table_refused (&info, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                            "has export_buffer without import_buffer");
  ipc.export_buffer = NULL;
  ipc.import_fabric_handle = reached_import_fabric_handle;
  assert_ipc_table_refused (&info, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                            "has import_fabric_handle without export_fabric_handle");
  /* a table of version 2 ends before the fabric handle slots: they are not read */
  ipc.version = 2;
  info.name = "tk_ipc_v2";
  g_assert_true (memres_registry_register_kind (&info, &error));
  g_assert_no_error (error);
  info.name = "tk_ipc";
  ipc.version = MEMRES_IPC_OPS_VERSION;
  ipc.import_fabric_handle = NULL;

  /* an adaptor has none */
  ipc.export_chunks = reached_export_chunks;
  ipc.import_chunks = reached_import_chunks;
  info.flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS;
  assert_ipc_table_refused (&info, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                            "is an adaptor and has an IPC table");
  info.flags = 0;

  /* a valid table (an empty one is valid too: it shares nothing) is copied */
  ipc.export_handle = reached_export_handle;
  ipc.import_handle = reached_import_handle;
  g_assert_true (memres_registry_register_kind (&info, &error));
  g_assert_no_error (error);
  memset (&ipc, 0, sizeof ipc);
  mr = mt_new_ok ("tk_ipc");
  g_assert_null (memres_resource_export_handle (mr, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "reached_export_handle ran"));
  g_clear_error (&error);
  buf = mt_alloc_ok (mr, 64, NULL);
  g_assert_cmpint (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), ==, 0);
  g_assert_false (memres_ipc_send_buffer (sv[0], buf, &error));
  g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (error->message, "reached_export_chunks ran"));
  g_clear_error (&error);
  close (sv[0]);
  close (sv[1]);
  g_assert_true (memres_buffer_close (buf, NULL, &error));
  g_assert_no_error (error);
}

static void
test_register_invalid (void)
{
  MemresKindInfo info = tk_info;
  MemresResourceOps ops = tk_ops;
  MemresOptionSpec bad[2];

  info.name = "bad_kind";

  /* names */
  info.name = "Bad";
  assert_register_invalid (&info, "invalid kind name");
  info.name = "../bad";
  assert_register_invalid (&info, "invalid kind name");
  info.name = NULL;
  assert_register_invalid (&info, "invalid kind name");
  info.name = "bad_kind";

  /* struct size */
  info.struct_size = 8;
  assert_register_invalid (&info, "too small");
  info.struct_size = 64; /* ABI 1.2's MemresKindInfo, without ipc */
  assert_register_invalid (&info, "too small");
  info.struct_size = sizeof info;

  /* ops */
  info.ops = NULL;
  assert_register_invalid (&info, "ops");
  info.ops = &ops;
  ops.allocate = NULL;
  assert_register_invalid (&info, "required slot");
  ops = tk_ops;
  ops.version = 0;
  assert_register_invalid (&info, "version");
  ops.version = MEMRES_RESOURCE_OPS_VERSION + 1;
  assert_register_invalid (&info, "is newer than this memres");
  ops = tk_ops;

  /* schema */
  info.options = bad;
  info.n_options = 1;
  bad[0] = tk_options[2];
  bad[0].default_value = "1e30";
  assert_register_invalid (&info, "default of option \"limit\"");
  bad[0] = tk_options[3];
  bad[0].choices = no_choices;
  assert_register_invalid (&info, "no choices");
  {
    static const char *const empty_choice[] = { "a", "", NULL };
    static const char *const twice[] = { "a", "b", "a", NULL };

    bad[0] = tk_options[3];
    bad[0].default_value = NULL;
    bad[0].choices = empty_choice;
    assert_register_invalid (&info, "has an empty choice");
    bad[0].choices = twice;
    assert_register_invalid (&info, "lists the choice \"a\" twice");
  }
  bad[0] = tk_options[3];
  bad[0].default_value = "medium";
  assert_register_invalid (&info, "default of option \"mode\"");
  bad[0] = tk_options[1];
  bad[0].min = 5;
  bad[0].max = 4;
  assert_register_invalid (&info, "min > max");
  bad[0] = tk_options[0];
  bad[0].name = "Bad-Key";
  assert_register_invalid (&info, "invalid name");
  bad[0].name = NULL;
  assert_register_invalid (&info, "invalid name");
  bad[0] = tk_options[0];
  bad[0].type = (MemresOptionType) 42;
  assert_register_invalid (&info, "unknown type");
  bad[0] = tk_options[0];
  bad[1] = tk_options[0];
  info.n_options = 2;
  assert_register_invalid (&info, "declared twice");
  info.options = NULL;
  assert_register_invalid (&info, "no option table");

  /* nothing of the above got registered */
  {
    g_autoptr (GError) error = NULL;
    g_assert_null (memres_registry_lookup ("bad_kind", &error));
    g_assert_error (error, MEMRES_ERROR, MEMRES_ERROR_NOT_FOUND);
  }
}

static gboolean
long_keys_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  g_assert_false (memres_options_get_bool (options, "reuse_allow_internal_dependencies_and_more"));
  return TRUE;
}

static void
test_register_long_option_key (void)
{
  static MemresResourceOps ops;
  static const MemresOptionSpec options[] = {
    { "reuse_allow_internal_dependencies_and_more", MEMRES_OPTION_BOOL, "true", "long", NULL, 0,
      0 },
  };
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresResource) mr = NULL;
  MemresKindInfo info = tk_info;

  /* option keys have no length limit; kind names do */
  ops = tk_ops;
  ops.init = long_keys_init;
  info.name = "long_keys";
  info.ops = &ops;
  info.options = options;
  info.n_options = G_N_ELEMENTS (options);
  g_assert_true (memres_registry_register_kind (&info, &error));
  g_assert_no_error (error);
  mr = mt_new_ok ("long_keys:reuse_allow_internal_dependencies_and_more=no");
  g_assert_nonnull (mr);
}

static void
test_search_path (void)
{
  g_auto (GStrv) path = NULL;
  g_autofree char *saved = g_strdup (g_getenv ("MEMRES_PLUGIN_PATH"));

  g_setenv ("MEMRES_PLUGIN_PATH", "/first::/second", TRUE);
  path = memres_registry_get_search_path ();
  g_assert_cmpuint (g_strv_length (path), ==, 3);
  g_assert_cmpstr (path[0], ==, "/first");
  g_assert_cmpstr (path[1], ==, "/second");
  /* then the installed plugin directory */
  g_assert_true (g_str_has_suffix (path[2], "memres-2/plugins"));
  g_clear_pointer (&path, g_strfreev);

  g_unsetenv ("MEMRES_PLUGIN_PATH");
  path = memres_registry_get_search_path ();
  g_assert_cmpuint (g_strv_length (path), ==, 1);
  if (saved != NULL)
    g_setenv ("MEMRES_PLUGIN_PATH", saved, TRUE);
}

/* memres_registry_set_plugin_dir(): after the environment, before the installed directory;
 * replaced by the next call, removed by NULL; a kind found only there loads. */
static void
test_set_plugin_dir (void)
{
  g_auto (GStrv) path = NULL;
  g_auto (GStrv) env_dirs = NULL;
  g_autofree char *saved = g_strdup (g_getenv ("MEMRES_PLUGIN_PATH"));
  g_autofree char *limit_dir = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (MemresKind) kind = NULL;

  g_setenv ("MEMRES_PLUGIN_PATH", "/first", TRUE);
  memres_registry_set_plugin_dir ("/mine");
  memres_registry_set_plugin_dir ("/mine-now");
  path = memres_registry_get_search_path ();
  g_assert_cmpuint (g_strv_length (path), ==, 3);
  g_assert_cmpstr (path[0], ==, "/first");
  g_assert_cmpstr (path[1], ==, "/mine-now");
  g_assert_true (g_str_has_suffix (path[2], "memres-2/plugins"));
  g_clear_pointer (&path, g_strfreev);
  memres_registry_set_plugin_dir (NULL);
  path = memres_registry_get_search_path ();
  g_assert_cmpuint (g_strv_length (path), ==, 2);
  g_clear_pointer (&path, g_strfreev);

  /* the build tree's limit plugin, reached only through the directory set here */
  env_dirs = g_strsplit (saved != NULL ? saved : "", ":", -1);
  for (guint i = 0; env_dirs[i] != NULL && limit_dir == NULL; i++)
    {
      g_autofree char *file = g_build_filename (env_dirs[i], "libmemres-limit.so", NULL);
      if (g_file_test (file, G_FILE_TEST_EXISTS))
        limit_dir = g_strdup (env_dirs[i]);
    }
  if (limit_dir != NULL)
    {
      g_unsetenv ("MEMRES_PLUGIN_PATH");
      memres_registry_set_plugin_dir (limit_dir);
      kind = memres_registry_lookup ("limit", &error);
      g_assert_no_error (error);
      g_assert_nonnull (kind);
      g_assert_true (g_str_has_prefix (memres_kind_get_plugin_path (kind), limit_dir));
      memres_registry_set_plugin_dir (NULL);
    }
  if (saved != NULL)
    g_setenv ("MEMRES_PLUGIN_PATH", saved, TRUE);
  else
    g_unsetenv ("MEMRES_PLUGIN_PATH");
}

static void
test_list_kinds (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GPtrArray) kinds = NULL;
  gboolean host = FALSE, app = FALSE;
  guint i;

  tk_register ();
  kinds = memres_registry_list_kinds (&error);
  g_assert_no_error (error);
  g_assert_nonnull (kinds);
  for (i = 0; i < kinds->len; i++)
    {
      MemresKind *kind = g_ptr_array_index (kinds, i);
      host |= g_strcmp0 (memres_kind_get_name (kind), "host") == 0;
      app |= g_strcmp0 (memres_kind_get_name (kind), "tk") == 0;
      if (i > 0)
        g_assert_cmpstr (memres_kind_get_name (g_ptr_array_index (kinds, i - 1)), <,
                         memres_kind_get_name (kind));
    }
  g_assert_true (host);
  g_assert_true (app);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/registry/lookup/host", test_lookup_host);
  g_test_add_func ("/registry/lookup/invalid-name", test_lookup_invalid);
  g_test_add_func ("/registry/lookup/unknown", test_lookup_unknown);
  g_test_add_func ("/registry/register/app-kind", test_register_app_kind);
  g_test_add_func ("/registry/register/duplicate", test_register_duplicate);
  g_test_add_func ("/registry/register/invalid", test_register_invalid);
  g_test_add_func ("/registry/register/ipc-table", test_register_ipc_table);
  g_test_add_func ("/registry/register/long-option-key", test_register_long_option_key);
  g_test_add_func ("/registry/search-path", test_search_path);
  g_test_add_func ("/registry/set-plugin-dir", test_set_plugin_dir);
  g_test_add_func ("/registry/list-kinds", test_list_kinds);
  return g_test_run ();
}

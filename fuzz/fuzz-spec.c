/* memres - CUDA memory resources
 * fuzz-spec.c: libFuzzer target for the spec parser and option validation. The input is a spec
 * string, a stack of layers joined by `>` (`@NAME` layers are kept, not looked up); each layer
 * is parsed, and when it names a kind registered here (the embedded `host`, `fuzz`, whose schema
 * has one option of every type, or the adaptor `fuzzadapt` with the same schema), the stack
 * rule of its position is checked and its options are validated against the schema and
 * printed back. Nothing may crash, leak or read out of bounds; every failure must set a GError;
 * a spec that validates must print back (escapes included) to options that validate again with
 * the same values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memres-private.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static const char *const fuzz_choices[] = { "device", "host", "host_numa", NULL };

static const MemresOptionSpec fuzz_options[] = {
  { "device", MEMRES_OPTION_INT, "0", "device ordinal", NULL, -1, 7 },
  { "max_size", MEMRES_OPTION_SIZE, "max", "bytes", NULL, 0, 0 },
  { "ipc", MEMRES_OPTION_BOOL, "false", "shareable", NULL, 0, 0 },
  { "location", MEMRES_OPTION_ENUM, "device", "where", fuzz_choices, 0, 0 },
  { "label", MEMRES_OPTION_STRING, NULL, "any text", NULL, 0, 0 },
  { "peers", MEMRES_OPTION_INT_LIST, "", "devices", NULL, 0, 7 },
};

static gboolean
fuzz_init (MemresResource *mr, const MemresOptions *options, GError **error)
{
  return TRUE;
}

static void
fuzz_finalize (MemresResource *mr)
{
}

static gboolean
fuzz_allocate (MemresResource *mr, gsize size, MemresStream stream, MemresAllocation *alloc,
               GError **error)
{
  g_set_error_literal (error, MEMRES_ERROR, MEMRES_ERROR_NOT_SUPPORTED, "fuzz kind");
  return FALSE;
}

static gboolean
fuzz_deallocate (MemresResource *mr, MemresAllocation *alloc, MemresStream stream, GError **error)
{
  return TRUE;
}

static void
fuzz_query (MemresResource *mr, MemresResourceInfo *info)
{
  info->device = -1;
  info->flags = MEMRES_MEMORY_HOST_ACCESSIBLE;
}

static const MemresResourceOps fuzz_ops = {
  .version = MEMRES_RESOURCE_OPS_VERSION,
  .init = fuzz_init,
  .finalize = fuzz_finalize,
  .allocate = fuzz_allocate,
  .deallocate = fuzz_deallocate,
  .query = fuzz_query,
};

static void
register_fuzz_kind (void)
{
  static gsize done;

  if (g_once_init_enter (&done))
    {
      const MemresKindInfo info = {
        .struct_size = sizeof info,
        .name = "fuzz",
        .description = "option schema with every type",
        .options = fuzz_options,
        .n_options = G_N_ELEMENTS (fuzz_options),
        .ops = &fuzz_ops,
      };
      const MemresKindInfo adaptor = {
        .struct_size = sizeof adaptor,
        .name = "fuzzadapt",
        .description = "adaptor with the same schema",
        .options = fuzz_options,
        .n_options = G_N_ELEMENTS (fuzz_options),
        .ops = &fuzz_ops,
        .flags = MEMRES_KIND_ADAPTOR | MEMRES_KIND_PASSES_ALLOCATIONS,
      };
      GError *error = NULL;
      /* Registering also loads the embedded host kind. */
      G_GNUC_UNUSED g_autoptr (GPtrArray) kinds = memres_registry_list_kinds (NULL);
      if (!memres_registry_register_kind (&info, &error)
          || !memres_registry_register_kind (&adaptor, &error))
        g_error ("registering the fuzz kinds: %s", error->message);
      g_once_init_leave (&done, 1);
    }
}

static void
expect_error (GError *error)
{
  if (error == NULL)
    abort ();
  g_error_free (error);
}

static void
check_options (MemresKind *kind, GPtrArray *keys, GPtrArray *values)
{
  MemresOptions *options;
  GError *error = NULL;
  g_autofree char *text = NULL;
  g_autofree char *kind_name = NULL;
  g_autoptr (GPtrArray) keys2 = NULL;
  g_autoptr (GPtrArray) values2 = NULL;
  g_autofree char *spec2 = NULL;
  MemresOptions *options2;

  options = _memres_options_new (kind, keys, values, &error);
  if (options == NULL)
    {
      expect_error (error);
      return;
    }
  if (error != NULL)
    abort ();
  text = _memres_options_to_string (options);
  _memres_options_free (options);

  /* The printed form is itself a valid option list for the same kind. */
  spec2 = text && *text ? g_strdup_printf ("%s:%s", kind->name, text) : g_strdup (kind->name);
  if (!_memres_spec_parse (spec2, &kind_name, &keys2, &values2, &error))
    g_error ("normalized spec “%s” does not parse: %s", spec2, error->message);
  options2 = _memres_options_new (kind, keys2, values2, &error);
  if (options2 == NULL)
    g_error ("normalized spec “%s” does not validate: %s", spec2, error->message);
  /* the same values: escaping round-trips */
  {
    g_autofree char *text2 = _memres_options_to_string (options2);
    if (strcmp (text, text2) != 0)
      g_error ("normalized spec “%s” prints back as “%s”", text, text2);
  }
  _memres_options_free (options2);
  /* as one layer of a stack, the printed form splits back into that one layer */
  {
    g_autoptr (GPtrArray) layers = NULL;
    if (!_memres_stack_split (spec2, FALSE, &layers, NULL, &error))
      g_error ("normalized spec “%s” does not split: %s", spec2, error->message);
    if (layers->len != 1 || strcmp (g_ptr_array_index (layers, 0), spec2) != 0)
      g_error ("normalized spec “%s” splits into %u layers", spec2, layers->len);
  }
}

/* One layer of a stack of @n_layers at @position. */
static void
check_layer (const char *layer, guint position, guint n_layers)
{
  g_autofree char *kind_name = NULL;
  g_autoptr (GPtrArray) keys = NULL;
  g_autoptr (GPtrArray) values = NULL;
  MemresKind *kind;
  GError *error = NULL;

  if (layer[0] == '\0')
    abort (); /* the splitter refuses empty layers */
  if (layer[0] == '@')
    return;
  if (!_memres_spec_parse (layer, &kind_name, &keys, &values, &error))
    {
      expect_error (error);
      return;
    }
  if (error != NULL || kind_name == NULL || keys == NULL || values == NULL
      || keys->len != values->len)
    abort ();

  /* The value parsers on their own, on every value. */
  for (guint i = 0; i < values->len; i++)
    {
      const char *value = g_ptr_array_index (values, i);
      guint64 bytes;
      gboolean flag;
      gint64 number;

      if (!_memres_parse_size (value, &bytes, &error))
        expect_error (error), error = NULL;
      if (!_memres_parse_bool (value, &flag, &error))
        expect_error (error), error = NULL;
      if (!_memres_parse_int (value, -1000, 1000, &number, &error))
        expect_error (error), error = NULL;
      else if (number < -1000 || number > 1000)
        abort ();
    }

  kind = _memres_registry_lookup_loaded (kind_name);
  if (kind != NULL)
    {
      if (!_memres_stack_check_layer (kind, position, n_layers, &error))
        expect_error (error), error = NULL;
      check_options (kind, keys, values);
      memres_kind_unref (kind);
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autofree char *spec = NULL;
  g_autoptr (GPtrArray) layers = NULL;
  GError *error = NULL;

  register_fuzz_kind ();
  spec = g_strndup ((const char *) data, size); /* stops at an embedded NUL, as C callers do */

  if (!_memres_stack_split (spec, FALSE, &layers, NULL, &error))
    {
      expect_error (error);
      return 0;
    }
  if (error != NULL || layers->len == 0 || layers->len > MEMRES_STACK_MAX_LAYERS)
    abort ();
  for (guint i = 0; i < layers->len; i++)
    check_layer (g_ptr_array_index (layers, i), i, layers->len);
  return 0;
}

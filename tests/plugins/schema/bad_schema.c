/* bad_schema: registers a kind whose option schema is invalid (a size option whose default does
 * not parse), so its load fails although nothing the user typed is wrong (tests/test-tool.c:
 * `memres alloc bad_schema 1` exits 3, as `memres kinds` does for a plugin that does not load). */
#include "../common.h"

static const MemresOptionSpec bad_options[] = {
  { "max", MEMRES_OPTION_SIZE, "lots", "a default that is no size", NULL, 0, 0 },
};

static const MemresKindInfo bad_kind = {
  .struct_size = sizeof (MemresKindInfo),
  .name = "bad_schema",
  .description = "test kind bad_schema",
  .options = bad_options,
  .n_options = G_N_ELEMENTS (bad_options),
  .ops = &tp_ops,
};

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &bad_kind, error);
}

MEMRES_PLUGIN_DEFINE (bad_schema, "registers a kind with an invalid option schema", plugin_init)

/* no_symbol: exports no memres_plugin_no_symbol_get_desc (MEMRES_PLUGIN_ERROR_SYMBOL), only an
 * entry point under another plugin's name (made by hand: without the ELF note of
 * MEMRES_PLUGIN_DEFINE, which would refuse the file before opening it). */
#include "common.h"

static const MemresKindInfo kind = TP_KIND_INFO ("no_symbol");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_something_else_get_desc (void);

const MemresPluginDesc *
memres_plugin_something_else_get_desc (void)
{
  static const MemresPluginDesc desc = {
    MEMRES_PLUGIN_ABI_MAJOR,
    MEMRES_PLUGIN_ABI_MINOR,
    sizeof (MemresPluginDesc),
    0,
    "something_else",
    "the entry point has the wrong name",
    plugin_init,
  };
  return &desc;
}

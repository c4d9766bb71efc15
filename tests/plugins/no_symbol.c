/* no_symbol: exports no memres_plugin_no_symbol_get_desc (MEMRES_PLUGIN_ERROR_SYMBOL), only an
 * entry point under another plugin's name. */
#include "common.h"

static const MemresKindInfo kind = TP_KIND_INFO ("no_symbol");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_DEFINE (something_else, "the entry point has the wrong name", plugin_init)

/* wrong_name: the file is libmemres-wrong_name.so but the descriptor says "other_name"
 * (MEMRES_PLUGIN_ERROR_NAME_MISMATCH); its init must never run. */
#include "common.h"

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  g_error ("the init of a plugin with a mismatched name must not run");
  return FALSE;
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_wrong_name_get_desc (void);

const MemresPluginDesc *
memres_plugin_wrong_name_get_desc (void)
{
  static const MemresPluginDesc desc = {
    MEMRES_PLUGIN_ABI_MAJOR,
    MEMRES_PLUGIN_ABI_MINOR,
    sizeof (MemresPluginDesc),
    0,
    "other_name",
    "names itself other_name",
    plugin_init,
  };
  return &desc;
}

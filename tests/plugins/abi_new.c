/* abi_new: built for a plugin ABI major newer than the core's (MEMRES_PLUGIN_ERROR_ABI_MISMATCH);
 * its init must never run. */
#include "common.h"

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  g_error ("the init of a plugin with a newer ABI major must not run");
  return FALSE;
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abi_new_get_desc (void);

const MemresPluginDesc *
memres_plugin_abi_new_get_desc (void)
{
  static const MemresPluginDesc desc = {
    MEMRES_PLUGIN_ABI_MAJOR + 1, 0, sizeof (MemresPluginDesc), 0, "abi_new", "too new", plugin_init,
  };
  return &desc;
}

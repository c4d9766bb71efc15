/* abi_old: a plugin written against the oldest plugin ABI of this major (2.0), with the
 * descriptor filled by hand. Its minor is at most the core's: it loads and works. */
#include "common.h"

static const MemresKindInfo kind = TP_KIND_INFO ("abi_old");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abi_old_get_desc (void);

const MemresPluginDesc *
memres_plugin_abi_old_get_desc (void)
{
  static const MemresPluginDesc desc = {
    MEMRES_PLUGIN_ABI_MAJOR,    0,           sizeof (MemresPluginDesc), 0, "abi_old",
    "built for plugin ABI 2.0", plugin_init,
  };
  return &desc;
}

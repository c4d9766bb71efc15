/* reserved_set: a descriptor whose reserved field, documented "must be 0", is not
 * (MEMRES_PLUGIN_ERROR_ABI_MISMATCH, before its init runs). */
#include "common.h"

static const MemresKindInfo kind = TP_KIND_INFO ("reserved_set");

static gboolean
plugin_init (MemresPlugin *plugin, GError **error)
{
  g_error ("reserved_set: init must not run");
  return memres_plugin_register_kind (plugin, &kind, error);
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_reserved_set_get_desc (void);

const MemresPluginDesc *
memres_plugin_reserved_set_get_desc (void)
{
  static const MemresPluginDesc desc = {
    MEMRES_PLUGIN_ABI_MAJOR,
    MEMRES_PLUGIN_ABI_MINOR,
    sizeof (MemresPluginDesc),
    7,
    "reserved_set",
    "a descriptor with a non-zero reserved field",
    plugin_init,
  };
  return &desc;
}

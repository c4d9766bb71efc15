/* reserved: a descriptor made by hand with a nonzero reserved field
 * (MEMRES_PLUGIN_ERROR_ABI_MISMATCH). */
#include "common.h"

static gboolean
plugin_init (MemresPlugin *plugin G_GNUC_UNUSED, GError **error G_GNUC_UNUSED)
{
  return TRUE;
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_reserved_get_desc (void);

const MemresPluginDesc *
memres_plugin_reserved_get_desc (void)
{
  static const MemresPluginDesc desc = {
    MEMRES_PLUGIN_ABI_MAJOR,
    MEMRES_PLUGIN_ABI_MINOR,
    sizeof (MemresPluginDesc),
    7,
    "reserved",
    "a descriptor whose reserved field is not 0",
    plugin_init,
  };
  return &desc;
}

/* libmemres-abimajor.so: a plugin built for the next ABI major. The loader must refuse it with
 * MEMRES_PLUGIN_ERROR_ABI_MISMATCH before running its init. */
#include "abi-kind.h"

static gboolean
abimajor_init (MemresPlugin *plugin, GError **error)
{
  return abi_kind_register (plugin, "abimajor", error);
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abimajor_get_desc (void);

const MemresPluginDesc *
memres_plugin_abimajor_get_desc (void)
{
  static const MemresPluginDesc desc = {
    .abi_major = MEMRES_PLUGIN_ABI_MAJOR + 1,
    .abi_minor = 0,
    .struct_size = sizeof (MemresPluginDesc),
    .name = "abimajor",
    .description = "built for the next plugin ABI major",
    .init = abimajor_init,
  };

  return &desc;
}

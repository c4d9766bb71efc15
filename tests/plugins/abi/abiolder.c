/* libmemres-abiolder.so: a plugin as built against the headers of the previous ABI minor, which
 * the loader must accept. At ABI 1.1 that is 1.0: the descriptor says 1.0 and the ops table is
 * of version 1 (16 slots, ending after resize). */
#include "abi-kind.h"

#if MEMRES_PLUGIN_ABI_MINOR > 0
#define OLDER_MINOR (MEMRES_PLUGIN_ABI_MINOR - 1)
#else
#define OLDER_MINOR 0
#endif

static gboolean
abiolder_init (MemresPlugin *plugin, GError **error)
{
  return OLDER_MINOR == 0 ? abi_kind_register_v1 (plugin, "abiolder", error)
                          : abi_kind_register (plugin, "abiolder", error);
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abiolder_get_desc (void);

const MemresPluginDesc *
memres_plugin_abiolder_get_desc (void)
{
  /* The 1.0 descriptor: the layout every minor of this major starts with. */
  static const MemresPluginDesc desc = {
    .abi_major = MEMRES_PLUGIN_ABI_MAJOR,
    .abi_minor = OLDER_MINOR,
    .struct_size = sizeof (MemresPluginDesc),
    .name = "abiolder",
    .description = "built for an older plugin ABI minor",
    .init = abiolder_init,
  };

  return &desc;
}

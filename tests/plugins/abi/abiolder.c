/* libmemres-abiolder.so: a plugin as built against the headers of the previous ABI minor, which
 * the loader must accept. At ABI 2.0 there is none: it is built for 2.0 itself, the layout every
 * minor of this major starts with (ops table version 1, no IPC table). */
#include "abi-kind.h"

#if MEMRES_PLUGIN_ABI_MINOR > 0
#define OLDER_MINOR (MEMRES_PLUGIN_ABI_MINOR - 1)
#else
#define OLDER_MINOR 0
#endif

static gboolean
abiolder_init (MemresPlugin *plugin, GError **error)
{
  return abi_kind_register (plugin, "abiolder", error);
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abiolder_get_desc (void);

const MemresPluginDesc *
memres_plugin_abiolder_get_desc (void)
{
  /* The 2.0 descriptor: the layout every minor of this major starts with. */
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

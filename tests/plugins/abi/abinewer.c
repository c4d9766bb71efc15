/* libmemres-abinewer.so: a plugin as it would be built against the headers of the next ABI
 * minor (a larger descriptor with one appended field). The loader must refuse it with
 * MEMRES_PLUGIN_ERROR_ABI_MISMATCH before running its init. */
#include "abi-kind.h"

typedef struct
{
  MemresPluginDesc base;
  gpointer appended; /* what a newer minor could have added */
} NewerDesc;

static gboolean
abinewer_init (MemresPlugin *plugin, GError **error)
{
  return abi_kind_register (plugin, "abinewer", error);
}

MEMRES_PLUGIN_EXPORT const MemresPluginDesc *memres_plugin_abinewer_get_desc (void);

const MemresPluginDesc *
memres_plugin_abinewer_get_desc (void)
{
  static const NewerDesc desc = {
    .base = {
      .abi_major = MEMRES_PLUGIN_ABI_MAJOR,
      .abi_minor = MEMRES_PLUGIN_ABI_MINOR + 1,
      .struct_size = sizeof (NewerDesc),
      .name = "abinewer",
      .description = "built for the next plugin ABI minor",
      .init = abinewer_init,
    },
  };

  return &desc.base;
}
